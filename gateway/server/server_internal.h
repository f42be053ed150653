/*
 * server/'s own parts, for its files only: a service thread's modules (gw_modules.c), the
 * server around them (gw_server.c: the libwebsockets context, its callbacks, the sweep,
 * the stop), the process (gw_process.c), its figures (gw_stats.c) and its plain HTTP
 * endpoints (gw_http.c).
 */
#ifndef GW_SERVER_INTERNAL_H
#define GW_SERVER_INTERNAL_H

#include "gw_server.h"

#include <ev.h>
#include <libwebsockets.h>

/* ---- a service thread's modules (gw_modules.c) ------------------------------------------- */

/* What a thread's modules are made with. */
typedef struct gw_modules_deps {
    const gw_config *cfg; /* copied */
    st_store *store;
    unsigned thread;
    struct ev_loop *loop;   /* NULL: no loop (the fuzz target) */
    gw_hub *hub;            /* NULL: no other threads */
    gw_api_keys *keys;      /* NULL: the API is off */
    void (*wake)(void *ud); /* the bridge's (gw_bridge_new) */
    void *wake_ud;
} gw_modules_deps;

struct gw_modules {
    gw_config cfg; /* every module reads this copy */
    unsigned thread;
    st_store *store;
    struct ev_loop *loop;
    gw_hub *hub;
    pr_decoder *dec; /* one decoder: requests are decoded one at a time */
    gw_bridge *bridge;
    gw_groups *groups;
    gw_app *app;
    gw_sessions *sessions;
    gw_cluster *cluster;
    gw_feed *feed;            /* the other threads' and nodes' changes (NULL: no hub) */
    gw_hub *own_hub;          /* gw_modules_new's: a hub of one thread, freed with m */
    uint64_t started_ms;      /* wall clock */
    uint64_t started_mono_ms; /* for uptime */
};

/* Makes m's modules, wired together. 0, or -1 (what was made is freed by release). */
int gw_modules_init(gw_modules *m, const gw_modules_deps *d);
/* After the sessions are gone, while the loop is still there. */
void gw_modules_release(gw_modules *m);

/* ---- the event loop's own lag (gw_looplag.c) --------------------------------------------- */

/* Buckets of an iteration's busy time: up to 0.1, 0.25, 0.5, 1, 2, 5, 10, 25, 50, 100 and
 * 250 ms, and over (gw_looplag_bound_us). */
#define GW_LAG_BUCKETS 12

/* A loop's iterations: counts only (added up over the threads). */
typedef struct gw_lag_figs {
    uint64_t iterations;
    uint64_t busy_us;            /* their busy time, summed */
    uint64_t le[GW_LAG_BUCKETS]; /* iterations per bucket (not cumulative) */
} gw_lag_figs;

/* Times every iteration of loop from its poll's return to its next poll. Owned by the
 * caller; freed while the loop is still there. */
typedef struct gw_looplag gw_looplag;
gw_looplag *gw_looplag_new(struct ev_loop *loop);
void gw_looplag_free(gw_looplag *l);
/* A window of the recent maximum ends (called every few seconds). */
void gw_looplag_tick(gw_looplag *l);
/* The counts, the longest iteration since the start, and the longest of the last two
 * windows (µs). */
void gw_looplag_figures(const gw_looplag *l, gw_lag_figs *f, uint64_t *max_us,
                        uint64_t *recent_max_us);
/* A bucket's upper bound in µs (0 for the last: +Inf). */
uint64_t gw_looplag_bound_us(size_t bucket);
/* The same bound as Prometheus' le label ("0.001", ..., "+Inf"; a literal). */
const char *gw_looplag_bound_label(size_t bucket);

/* ---- figures (gw_stats.c) ------------------------------------------------------------------ */

/* A sample of the counters that have a rate in /stats. */
typedef struct gw_rate_sample {
    uint64_t ms; /* monotonic */
    uint64_t sends, deliveries, pushes;
} gw_rate_sample;

#define GW_RATE_SAMPLES 11 /* one a second: rates over the last ten seconds */

typedef struct gw_samples {
    gw_rate_sample s[GW_RATE_SAMPLES];
    size_t next, n;
} gw_samples;

/* One service thread's figures: the modules' counts, its gauges and its rates. The
 * counts' structs are uint64_t only, and are added up as such over the threads. */
typedef struct gw_figs {
    struct {
        gw_sess_figs sess;
        gw_groups_figs groups;
        gw_cluster_figs cluster;
        gw_app_figs app;
        gw_lag_figs lag;
    } n;
    uint64_t loop_max_us, loop_recent_max_us; /* the largest over the threads */
    uint64_t sessions, authenticated, users, groups_online;
    uint64_t lag_members, lag_total, lag_max;
    uint64_t holes, feed_dropped;
    double r_sends, r_deliveries, r_pushes;
} gw_figs;

/* Where the threads answer each other's requests for their figures (for /stats from any
 * thread): one for the process. */
typedef struct gw_board gw_board;
gw_board *gw_board_new(unsigned threads);
void gw_board_free(gw_board *b);
/* Thread `thread` answers no more (its run returned): a thread waiting for it is woken. */
void gw_board_stopped(gw_process *p, unsigned thread);

/* ---- the server of one service thread (gw_server.c) --------------------------------------- */

/* The protocols of a server's context: HTTP, gw.v1, its JSON form, the end. */
#define GW_PROTOCOLS 4

struct gw_server {
    gw_modules m;
    gw_process *proc;
    struct lws_protocols protocols[GW_PROTOCOLS];
    struct lws_context *ctx;
    struct lws_vhost *vhost;     /* its one vhost: adopts the connections handed to it */
    SSL_CTX *client_ssl_ctx;     /* given to libwebsockets, which makes no client connection */
    int port;                    /* bound (the process's listener) */
    gw_samples samples;          /* gw_stats.c */
    gw_looplag *lag;             /* the loop's iterations, timed */
    uint64_t figs_answered;      /* gw_stats.c: the request for figures answered last */
    struct http_pss *stats_wait; /* gw_http.c: /stats and /metrics waiting for figures */
    uint64_t healthz_logged_ms;  /* gw_http.c: when /healthz last logged the store's error */
    ev_timer stats_timer;        /* ... their time limit, while there are any */

    lws_sorted_usec_list_t sul_sweep; /* once a second */
    unsigned sweeps;                  /* sweeps so far (the heap trim's cadence) */
    bool stopping;
    uint64_t stop_deadline_ms; /* monotonic */
    bool closing_all;          /* stop: sessions have been told 1001 */
    bool finished;
};

/* Makes service thread `thread`'s server on its own loop, without listening (the
 * process's listener hands it connections). */
int gw_server_new(const gw_config *cfg, st_store *store, gw_process *proc, unsigned thread,
                  gw_server **out);
/* Names the node after the port bound (unless --node named it) in logs and figures. */
void gw_server_name(gw_server *srv, int port);
/* A connection accepted for srv: adopted by its context, or closed when stopping. */
void gw_server_adopt(void *srv, gw_accepted c);
/* Wakes srv's loop, from any thread (lws_cancel_service). */
void gw_server_wake(void *srv);
/* Serves until a signal asks it to stop; then closes sessions with 1001, flushes acks
 * and waits (a few seconds at most) for writes in flight. */
void gw_server_run(gw_server *srv);
/* Runs the completions that arrived after the run ended (call after st_close). */
void gw_server_drain(gw_server *srv);
void gw_server_free(gw_server *srv);

/* ---- the process (gw_process.c) ----------------------------------------------------------- */

struct gw_process {
    gw_config cfg;
    unsigned n;          /* service threads */
    gw_hub *hub;         /* where they meet (cluster/) */
    gw_conns *conns;     /* new connections per source address, for every thread */
    gw_listen *listener; /* the listening socket, on the first thread's loop */
    gw_api_keys *keys;   /* the server API's, for every thread (NULL: off) */
    gw_board *board;     /* the threads' figures for each other */
    gw_server *srv[GW_THREADS_MAX];
};

/* ---- plain HTTP (gw_http.c) ---------------------------------------------------------------- */

/* The protocol entry of plain HTTP on the same port (health, figures, demo, files, the
 * API). */
int gw_http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                     size_t len);
/* Bytes of per-connection state gw_http_callback needs. */
size_t gw_http_pss_size(void);
/* The context's token_limits: the URL's, so that a URL of any length is answered 414
 * (gw_http.c says why). Static: it outlives every context. */
const struct lws_token_limits *gw_http_token_limits(void);
/* The server's loop is there / is about to go: the timer of /stats' wait. */
void gw_http_start(gw_server *srv);
void gw_http_stop(gw_server *srv);
/* At each wake-up: /stats and /metrics requests whose figures are in are answered. */
void gw_http_wake(gw_server *srv);

/* ---- figures (gw_stats.c) ------------------------------------------------------------------- */

/* Once a second: a sample for the rates. */
void gw_stats_tick(gw_server *srv);
/* From a thread's loop at each wake-up: answers a request for its figures. */
void gw_stats_serve(gw_server *srv);
/* Asks the other service threads for their figures, at once (they answer from their
 * loops and the last to answer wakes this one); returns the request's number (0: there
 * are no others). */
uint64_t gw_stats_ask(gw_server *srv);
/* True once request `want` (asked at monotonic asked_ms) is answered by every other
 * thread, or its wait (100 ms) is over: the figures can be rendered. */
bool gw_stats_ready(gw_server *srv, uint64_t want, uint64_t asked_ms);
/* /stats as JSON, and /metrics as Prometheus text, over every thread (the others' latest
 * answers: ask first); malloc'd, the caller frees. Never waits. */
char *gw_stats_json(gw_server *srv);
char *gw_stats_prometheus(gw_server *srv, size_t *len);

#endif
