/*
 * gw_load internals: what its files share (see gw_load.c for what the program does).
 *
 *   gw_load.c      options, usage, and main: parses, then runs one driver
 *   load_run.c     one run of sessions: connecting (a ramp), the timed loop with its
 *                  progress and --interval lines, the drain, the report; CPU and RSS
 *                  from /proc
 *   load_sess.c    sessions that speak the protocol: hello, joins, events, acks
 *   load_fanout.c  the senders' driver: fan-out (W1) and --own-groups (W2)
 *   load_idle.c    --idle (W4): sessions signed in and joined, held
 *   load_raw.c     --raw: a peer server's subscribers and publishers
 *   load_pull.c    --pull (W5): a returning user reads its unread messages, pipelined
 *   load_page.c    the lean reader of `page` frames that load_pull uses
 *   load_xmpp.c, load_xmpp_pull.c, xmpp_stanza.c
 *                  --xmpp: an XMPP server's MUC and MAM under the same load (load_xmpp.h)
 *
 * One thread. The configuration is read-only once parsed; everything a run changes is
 * in its load_run, which the sessions point back to (no mutable file-scope state).
 */
#ifndef LOAD_RUN_H
#define LOAD_RUN_H

#include "ackrule.h"
#include "load_hist.h"
#include "load_util.h"
#include "load_ws.h"
#include "proto.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LOAD_MAX_URLS 8

typedef struct load_cfg {
    const char *url;
    char secret[257];
    size_t secret_n;
    int sessions;   /* members that receive */
    int group_size; /* members per group */
    int senders;    /* extra sessions that send (members of every group they send to) */
    double rate;    /* messages per second in all; 0 = flat out */
    int window;     /* flat out: unconfirmed sends per sender */
    int body;       /* bytes */
    double seconds; /* run time after setup */
    long count;     /* stop after this many sends (0: no limit) */
    int sources;    /* source addresses 127.0.0.1 .. 127.0.0.N */
    int server_pid; /* for CPU and RSS; 0: not reported */
    /* Several gateways (a cluster): sessions spread over the URLs, CPU and RSS summed. */
    const char *urls[LOAD_MAX_URLS];
    int n_urls;
    int server_pids[LOAD_MAX_URLS];
    int n_server_pids;
    const char *uid_prefix; /* before every user name: several gw_load, distinct users */
    bool idle;              /* only connect, sign in and join, then hold */
    bool own_groups;        /* every sender sends to a group of its own (no receivers) */
    int ack_every;          /* > 0: ack after this many messages, not what welcome says */
    bool reads;             /* every ack also sends a read of the same mid (the person saw
                             * what the device has: the second cursor's cost) */
    int pull;               /* > 0: the offline-pull run, pages of this many messages */
    int pull_groups;        /* ... over this many groups */
    int pull_window;        /* ... with up to this many pulls in flight */
    const char *raw_sub;    /* raw mode: subscribers' URL (a peer server, not the gateway) */
    const char *raw_pub;    /* raw mode: the publisher's URL (default: raw_sub) */
    const char *raw_proto;  /* raw mode: subprotocol to ask for ("" for none) */
    double interval;        /* > 0: a report line every this many seconds (soak runs) */
    bool json;
    /* --xmpp: an XMPP server over WebSocket (load_xmpp.h) instead of the gateway */
    const char *xmpp;          /* its URL (ws://HOST:PORT/PATH), or NULL */
    const char *xmpp_domain;   /* the users' domain */
    const char *xmpp_muc;      /* the MUC service's domain */
    const char *xmpp_password; /* every user's */
    int xmpp_members;          /* > 0: each room's members (affiliation), online or not */
    bool xmpp_preloaded;       /* --pull: the rooms already hold the messages: read them all */
    char xmpp_muc_buf[256];    /* conference.<domain> when --xmpp-muc is not given */
} load_cfg;

typedef struct load_run load_run;

typedef struct load_sess {
    load_run *run;
    lw_conn *k;
    int id;
    int group; /* receivers: the group; senders: the next group to send to */
    int url;   /* index in cfg->urls */
    bool sender;
    bool hello_sent, welcomed, joined;
    ackrule ack; /* receivers: the group's watermark and acks */
    int inflight;
} load_sess;

typedef struct load_stats {
    uint64_t sends, confirmed, deliveries, ack_frames, read_frames, notifies, errors, gaps;
    load_hist lat;
    load_hist lat_send; /* send-to-confirm (the sender's view), meant time to confirmation */
    load_hist lat_url[LOAD_MAX_URLS]; /* by the receiver's URL (--url with several) */
    uint64_t deliveries_url[LOAD_MAX_URLS];
} load_stats;

/* What a driver plugs into load_run_sessions. NULL hooks do nothing. */
typedef struct load_mode {
    const char *subprotocol;
    /* A session's handshake is done / a whole frame came from the server. */
    void (*on_open)(load_sess *s);
    void (*on_frame)(load_sess *s, const uint8_t *f, size_t n);
    /* A session closed (NULL: the first five closes are said on stderr). */
    void (*on_close)(load_sess *s, int code);
    /* Once every session is open: sign in and join; false stops the run. */
    bool (*set_up)(load_run *r);
    /* Sends one message from sender s, stamped with the time it was meant to go. */
    void (*send)(load_sess *s, int64_t meant_ns);
    /* Flat out (no --rate): sends what the window allows now. */
    void (*flat_out)(load_run *r);
    /* Every 20 ms of the run: acks due by time, not count. */
    void (*tick)(load_run *r, int64_t now);
    /* After the run: true while sends are still unconfirmed (drained for up to 2 s). */
    bool (*in_flight)(const load_run *r);
    /* At the end: what a client leaving would still send (the last acks). */
    void (*finish)(load_run *r);
} load_mode;

/* One run: the sessions, their loop and every figure. */
struct load_run {
    const load_cfg *cfg;
    const load_mode *mode;
    load_stats st;
    load_hist lat_iv; /* --interval: latencies since the last interval line */
    unsigned run_id;  /* makes cids and group names unique across runs */
    uint64_t body_rng;
    /* The run's start and its last delivery: a run's drain waits up to 2 s for frames a
     * peer never sends (it dropped or split them), which must not count as time spent
     * delivering. */
    int64_t t0, last_delivery_ns;
    lw_loop *loop;
    pr_decoder *dec;
    msgpack_sbuffer sb; /* every frame the sessions send is encoded here */
    uint8_t *body;      /* cfg->body bytes: the next message's body is made here */
    load_sess *ss;
    int n;
    int opened, closed;
    uint64_t raw_first_received; /* raw mode: frames the first subscriber received */
    void *mode_data;             /* the driver's own state, if it has more */
};

/* ---- load_run.c ---- */
/* A run of n sessions (zeroed, not connected) with its loop and decoder, for mode m;
 * NULL when out of memory. */
load_run *load_run_new(const load_cfg *cfg, const load_mode *m, int n);
void load_run_free(load_run *r);
/* Fills the body with new random lowercase letters: text a peer accepts as UTF-8, and no
 * two bodies alike, so the store's block compression cannot fold them together. */
void load_vary_body(load_run *r, uint8_t *body);
/* Encodes a hello for uid into sb with a fresh token (a day long): 0 or -1. */
int load_enc_hello(const load_cfg *cfg, const char *uid, msgpack_sbuffer *sb);
/* Runs the loop once (every ready session's frames go to the mode); counts an epoll
 * failure as an error. */
void load_pump(load_run *r, int wait_ms);
/* Sends sb's frame on s and empties sb; a failure counts as an error. */
void load_send_frame(load_sess *s, msgpack_sbuffer *sb);
/* Waits until done(s) holds for every session, running the loop; false after timeout or
 * when a session closed, saying so. */
bool load_wait_all(load_run *r, bool (*done)(const load_sess *), double timeout_s,
                   const char *what);
double load_self_cpu_s(void);
double load_servers_cpu_s(const load_cfg *cfg);
long load_servers_rss_kib(const load_cfg *cfg);
/* The whole run of a session-holding mode (fan-out, own groups, idle, raw): connects
 * cfg->sessions receivers and cfg->senders senders, sets them up, runs for
 * cfg->seconds (or cfg->count sends), drains, reports. Returns the exit code. */
int load_run_sessions(const load_cfg *cfg, const load_mode *m);
/* The same for a run made by load_run_new (its mode_data set by the driver): the
 * cfg->sessions + cfg->senders sessions it was made with. Returns the exit code. */
int load_run_go(load_run *r);

/* ---- load_sess.c: sessions that speak the protocol (fan-out, own groups, idle) ---- */
int load_n_groups(const load_cfg *cfg);
/* The group a sender sends its next message to, and moves it on. */
void load_next_gid(load_sess *s, char *gid, size_t n);
/* Sessions that sign in, join, take deliveries and ack, and send nothing: a driver adds
 * its senders' hooks (send, flat_out, in_flight) to a copy. */
extern const load_mode load_gw_mode;

/* ---- load_catchup.c: what W5's two drivers (load_pull.c, load_xmpp_pull.c) share ---- */
/* Closes s after what it queued went out (2 s at most). */
void load_sess_close_drained(load_run *r, load_sess *s);
/* The returning user's reading: its figures, and the time and CPU it took. */
typedef struct load_catchup {
    uint64_t msgs, pages, bytes;    /* read; bytes received by the returning user */
    int64_t last_page_ns;           /* when the last page came: 30 s without one ends it */
    double cpu0, srv0;              /* CPU seconds (this process, the servers) at the start */
    int64_t t0;                     /* the start: before the sign-in */
    double secs, cpu_self, cpu_srv; /* the reading's, taken at its end */
} load_catchup;
/* Takes the start's time and CPU figures. */
void load_catchup_start(load_catchup *c, const load_cfg *cfg);
/* Runs the loop until done(arg); stops early after an error, a close of s or 30 s without a
 * page, saying so (who: the driver's name in messages). Then takes the end's figures. */
void load_catchup_read(load_catchup *c, load_run *r, const load_sess *s, bool (*done)(const void *),
                       const void *arg, const char *who);
/* Prints the JSON line; extra: the driver's own fields after pull_window, each with its
 * trailing comma ("" for none). */
void load_catchup_report(const load_catchup *c, const load_run *r, int groups, const char *extra,
                         double fill_s);

/* ---- the drivers: each returns the exit code ---- */
int load_fanout(const load_cfg *cfg); /* load_fanout.c: W1, and W2 with --own-groups */
int load_idle(const load_cfg *cfg);   /* load_idle.c */
int load_raw(const load_cfg *cfg);    /* load_raw.c */
int load_pull(const load_cfg *cfg);   /* load_pull.c */

#endif
