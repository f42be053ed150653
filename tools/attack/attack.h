/*
 * gw_attack internals: what its files share (gw_attack.c says what the program does).
 *
 *   gw_attack.c     options, usage, main: one attack, its report and its table row
 *   attack_ctx.c    a run's context: one loop of sessions (load_ws) that sign in and join,
 *                   the server's figures sampled as the run goes (load_proc)
 *   attack_legit.c  what legitimate clients see meanwhile: a group of a few members
 *                   sending at a steady rate (send-to-deliver latency) and a /healthz probe
 *   attack_raw.c    raw sockets for what a well-behaved client never sends: a blocking
 *                   WebSocket handshake, frames cut as an attack wants them, HTTP by hand
 *   attack_flood.c  typing, edit and recall floods at members that never read
 *   attack_http.c   slow bodies, idle connections, the oversized POST
 *   attack_ws.c     pre-hello fragments, the large JSON first frame, pipelined bad requests
 *
 * One thread. The configuration is read-only once parsed; everything an attack changes
 * is in its atk_ctx (no mutable file-scope state). Every attack is bounded in count and
 * time and stops by itself.
 */
#ifndef ATTACK_H
#define ATTACK_H

#include "load_hist.h"
#include "load_util.h"
#include "load_ws.h"
#include "proto.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct atk_cfg {
    const char *url; /* ws://127.0.0.1:PORT/ws: the gateway */
    char host[64];   /* ... its host and port, for the raw sockets */
    int port;
    char secret[257]; /* the token secret (--secret-file or GW_SECRET) */
    size_t secret_n;
    char api_key[257];      /* --api-key-file: the API's key ("" none: the keyed attacks skip) */
    int pid;                /* the gateway (--server-pid, else found from the port) */
    double seconds;         /* how long an attack runs */
    int conns;              /* connections: slow bodies, idle, pre-hello */
    int members;            /* the floods: members that never read */
    int groups;             /* ... the groups they and the attacker are in */
    int tries;              /* pipelined, oversized, JSON: how many times */
    int bad;                /* pipelined: bad requests a try */
    int trickle_ms;         /* slow bodies: a byte this often */
    double legit_rate;      /* the legitimate group's messages per second */
    int legit_members;      /* ... and its members (one of them sends) */
    const char *legit_from; /* ... and the source address they (and /healthz) connect from:
                             * another than the attacker's, as a monitor's is */
    bool row;               /* also print the table row */
} atk_cfg;

typedef struct atk_ctx atk_ctx;
typedef struct atk_sess atk_sess;

/* A decoded frame for a session's owner; ev borrows the frame. */
typedef void (*atk_ev_fn)(atk_sess *s, const pr_event *ev);

/* A session on the context's loop: it signs in as soon as its handshake is done. */
struct atk_sess {
    atk_ctx *c;
    atk_sess *next; /* every session of the context, freed with it */
    lw_conn *k;
    char uid[40];
    bool welcomed;
    int joined;                     /* joins answered */
    uint64_t frames, errs, limited; /* frames in, err events, of them rate_limited */
    uint64_t last_sent_mid;         /* the mid of its last `sent` */
    int close_code;                 /* the peer's close code (0: a reset or none) */
    bool closed;
    atk_ev_fn on_ev; /* NULL: only counted */
    void *ud;        /* the owner's */
};

/* The server's figures over one attack. */
typedef struct atk_figs {
    long rss0_kib, rss_peak_kib, rss_end_kib;
    int fds0, fds_peak, fds_end;
    double cpu0_s, cpu_end_s;
} atk_figs;

/* The legitimate clients (attack_legit.c). */
typedef struct atk_legit {
    atk_sess **ss; /* ss[0] sends, the others receive */
    int n;
    char gid[40];
    bool on;
    int64_t next_ns; /* when the next message is due */
    uint64_t sent, delivered, errs, closed;
    load_hist lat; /* send-to-deliver, microseconds, from the time each was due */
    /* /healthz once a second over a new connection, 5 s at most each */
    int hz_fd;
    int64_t hz_start_ns, hz_next_ns, hz_max_us;
    uint64_t hz_tries, hz_ok;
    char hz_buf[16];
    size_t hz_n;
} atk_legit;

struct atk_ctx {
    const atk_cfg *cfg;
    const char *name; /* the attack's name, as in the table */
    unsigned run_id;  /* makes uids, cids and groups unique across runs */
    lw_loop *loop;
    pr_decoder *dec;
    msgpack_sbuffer sb; /* frames are encoded here, then sent */
    atk_sess *sessions;
    int n_sess;
    atk_figs figs;
    int64_t next_sample_ns;
    atk_legit legit;
    /* What the attacker sent, and what it saw: the attack's words for the table. */
    uint64_t sent_requests, sent_bytes, sent_conns;
    char outcome[400];
};

/* ---- attack_ctx.c ---- */
/* A context for attack `name`: its loop (subprotocol gw.v1) and decoder. 0 or -1. */
int atk_ctx_init(atk_ctx *c, const atk_cfg *cfg, const char *name);
/* Closes every session and socket and frees them. */
void atk_ctx_release(atk_ctx *c);
/* A session signed in as uid (made unique with the run's id); NULL on failure (said). */
atk_sess *atk_open(atk_ctx *c, const char *uid, atk_ev_fn on_ev, void *ud);
/* The same, for the legitimate group: from cfg->legit_from. */
atk_sess *atk_open_legit(atk_ctx *c, const char *uid, atk_ev_fn on_ev, void *ud);
/* Sends c->sb's frame on s and empties c->sb; counts it in sent_requests/bytes. */
void atk_send(atk_sess *s);
/* Queues a join of gid on s. */
void atk_join(atk_sess *s, const char *gid);
/* Runs the loop once (up to wait_ms), samples the server's figures every 100 ms, and
 * keeps the legitimate clients going. */
void atk_pump(atk_ctx *c, int wait_ms);
/* Pumps until every one of n sessions is welcomed and has `joins` joins answered; false
 * after timeout_s or when one closed (said on stderr). */
bool atk_wait_ready(atk_ctx *c, atk_sess **ss, int n, int joins, double timeout_s);
/* The figures at the attack's start, and at its end after settle_s of pumping (the
 * server's time to let go of what the attack made it hold). */
void atk_begin(atk_ctx *c);
void atk_end(atk_ctx *c, double settle_s);
/* Prints the report (and the table row with --row); the outcome is c->outcome. */
void atk_report(const atk_ctx *c);
/* Appends to c->outcome, printf-style. */
void atk_say(atk_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- attack_legit.c ---- */
/* Connects the legitimate group and waits until it is ready; 0 or -1. */
int atk_legit_start(atk_ctx *c);
/* Sends what is due and runs the /healthz probe (called from atk_pump). */
void atk_legit_tick(atk_ctx *c, int64_t now);
/* The legitimate clients' words for the table: "p99 ms (healthz ok/tries)". */
void atk_legit_cell(const atk_ctx *c, char *buf, size_t n);

/* ---- attack_raw.c: blocking helpers with a deadline, for raw sockets ---- */
/* A TCP connection to the gateway (blocking); the fd or -1 (errno). */
int atk_raw_connect(const atk_cfg *cfg);
/* A TCP connection that is still connecting (non-blocking); the fd or -1. */
int atk_raw_connect_nb(const atk_cfg *cfg);
/* The same from source address src (NULL: any), non-blocking. */
int atk_raw_connect_from(const atk_cfg *cfg, const char *src);
/* Writes all n bytes within timeout_ms; bytes written (fewer: timeout or error). */
size_t atk_raw_write(int fd, const void *p, size_t n, int timeout_ms);
/* A WebSocket handshake on a new connection, subprotocol sp; the fd, or -1. */
int atk_raw_ws(const atk_cfg *cfg, const char *sp, int timeout_ms);
/* The most a client frame's header takes (2 + 8 length + 4 mask). */
#define ATK_FRAME_HEAD 14
/* Encodes one masked client frame into f (n + ATK_FRAME_HEAD bytes of room); its length. */
size_t atk_raw_frame_enc(uint8_t *f, int opcode, bool fin, const void *p, size_t n);
/* One masked client frame: opcode, fin, payload. The header and payload go out together
 * (one write); bytes written, fewer when the server stopped taking them. */
size_t atk_raw_frame(int fd, int opcode, bool fin, const void *p, size_t n, int timeout_ms);
/* Whether the peer closed fd (EOF or reset): 1, or 0 while it is open. Reads and drops
 * what the server sent meanwhile, setting *answered when there was any. */
int atk_raw_closed(int fd, bool *answered);
/* Reads one server frame within timeout_ms into buf (cap bytes; larger ones are read and
 * cut). Returns its opcode, -1 on timeout, -2 when the peer closed (EOF), -3 on a reset
 * or other error. *n: its payload length as read. */
int atk_raw_read_frame(int fd, uint8_t *buf, size_t cap, size_t *n, int timeout_ms);
/* ---- the attacks: each fills c (figures, outcome) and returns 0, or -1 when it could
 * not run (said on stderr) ---- */
int atk_flood(atk_ctx *c, int kind); /* attack_flood.c: PR_REQ_TYPING, _EDIT, _RECALL */
int atk_slow_body(atk_ctx *c);       /* attack_http.c */
int atk_idle(atk_ctx *c);
int atk_oversized(atk_ctx *c);
int atk_prehello(atk_ctx *c); /* attack_ws.c */
int atk_json(atk_ctx *c);
int atk_pipelined(atk_ctx *c);

#endif
