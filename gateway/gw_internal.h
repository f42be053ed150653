/*
 * The gateway's shared types, private to gateway/. Everything here lives on the
 * libwebsockets service thread, except where a comment says otherwise: the store's writer
 * thread touches only gw_server.done_* (under done_mu).
 *
 * Files: gw_server.c (libwebsockets callbacks, timers, the completion bridge, shutdown),
 * gw_session.c (one WebSocket session: receive, queue, write, close), gw_route.c (requests
 * and their completions), gw_registry.c (online users, their groups, fan-out), gw_acks.c
 * (ack coalescing), gw_auth.c (tokens), gw_throttle.c (rate limits applied; the buckets are
 * gw_rate.c and gw_addrs.c), gw_config.c, gw_log.c, gw_buf.c.
 */
#ifndef GW_INTERNAL_H
#define GW_INTERNAL_H

#include "gw_auth.h"
#include "gw_buf.h"
#include "gw_config.h"
#include "gw_log.h"
#include "gw_rate.h"
#include "proto.h"
#include "store.h"

#include <ev.h>
#include <libwebsockets.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uthash.h>

typedef struct gw_server gw_server;
typedef struct gw_sess gw_sess;
typedef struct gw_user gw_user;

/* ---- registry ---------------------------------------------------------------------- */

/* One of an online user's groups, with the ack as this gateway knows it (the stored one,
 * moved forward by acks not yet persisted). */
typedef struct gw_member {
    char gid[PR_MAX_ID + 1];
    uint64_t ack;
    UT_hash_handle hh; /* in gw_user.groups, by gid */
} gw_member;

/* A user with at least one session here. */
struct gw_user {
    char uid[PR_MAX_ID + 1];
    gw_sess *sessions; /* utlist DL through gw_sess.user_prev/next */
    unsigned n_sessions;
    gw_member *groups; /* by gid */
    unsigned joins_inflight; /* joins submitted, not completed: count towards --max-groups */
    UT_hash_handle hh; /* in gw_server.users, by uid */
};

/* An online member of a group: the entry the fan-out walks. */
typedef struct gw_online {
    gw_user *user;     /* key: the pointer */
    UT_hash_handle hh; /* in gw_group.online */
} gw_online;

/* A group with at least one online member. */
typedef struct gw_group {
    char gid[PR_MAX_ID + 1];
    uint64_t last_mid; /* as committed; kept current by send completions */
    gw_online *online;
    unsigned n_online;
    UT_hash_handle hh; /* in gw_server.groups, by gid */
} gw_group;

/* Logs the user in (loading its groups from the store on its first session). */
int gw_user_attach(gw_server *srv, const char *uid, gw_sess *s);
/* Detaches a closing session; the user is dropped with its last session. */
void gw_user_detach(gw_server *srv, gw_sess *s);
gw_user *gw_user_find(gw_server *srv, const char *uid);
gw_member *gw_member_find(gw_user *u, pr_slice gid);
/* Records a membership (after a committed join) and puts the user online in the group. */
gw_member *gw_member_add(gw_server *srv, gw_user *u, const char *gid, uint64_t ack,
                         uint64_t last_mid);
void gw_member_remove(gw_server *srv, gw_user *u, const char *gid);
gw_group *gw_group_find(gw_server *srv, const char *gid, size_t n);
/* Pushes a committed message to every online session of every member but `except`. */
void gw_fanout(gw_server *srv, const char *gid, uint64_t mid, uint64_t ts, const void *record,
               size_t record_n, gw_sess *except);
void gw_registry_free(gw_server *srv);

/* ---- sessions ---------------------------------------------------------------------- */

/* One queued frame: a reply (owned) or a push (one reference to a shared buffer). */
typedef struct gw_qitem {
    gw_buf *buf;
    bool push;
} gw_qitem;

typedef struct gw_notify {
    char gid[PR_MAX_ID + 1];
    uint64_t last_mid;
    UT_hash_handle hh;
} gw_notify;

struct gw_sess {
    gw_server *srv;
    struct lws *wsi; /* NULL once libwebsockets has closed it */
    uint64_t sid;
    char sid_str[24];
    gw_user *user; /* NULL until a valid hello */
    gw_identity id;
    gw_sess *user_prev, *user_next;
    gw_sess *paused_prev, *paused_next; /* in gw_server.paused while reading is paused */
    bool paused;

    /* Receive: one WebSocket message may arrive in several pieces. */
    uint8_t *rx;
    size_t rx_n, rx_cap;
    bool rx_text;      /* the message being received is a text frame */
    size_t rx_discard; /* bytes dropped of a message over max_frame */

    /* Send: a ring of encoded messages, shared push buffers included. */
    gw_qitem *q;
    size_t q_head, q_len, q_cap;
    size_t q_pushes;      /* pushes in the ring */
    size_t q_push_bytes;  /* ... and their bytes */
    size_t q_reply_bytes; /* bytes of replies in the ring: reading pauses past a budget */
    bool slow;            /* over the push cap: pushes become notify entries */
    uint64_t slow_since;  /* monotonic ms */
    gw_notify *notify;    /* coalesced notify per group while slow */

    /* Liveness, checked by gw_sess_sweep once a second (see there for why not by timers). */
    uint64_t born_ms;    /* monotonic ms at the handshake: the hello must come in time */
    uint64_t last_rx_ms; /* monotonic ms of the last bytes or pong received */
    bool ping_due;       /* a ping goes out at the next writeable */
    bool ping_sent;      /* ... and was sent since last_rx_ms */

    unsigned inflight; /* store writes submitted, not yet completed */
    gw_bucket rate_sends, rate_bytes; /* rate limits (gw_throttle.c) */
    uint64_t rate_until;              /* monotonic ms: reading is paused until then */
    ev_timer rate_timer;              /* resumes reading at rate_until (libev: see ack_timer) */
    size_t frame_len;                 /* the frame being handled ... */
    bool frame_over_bytes;            /* ... and whether it overdrew the byte bucket */
    double err_score;  /* bad requests, decaying by one a second */
    uint64_t err_at;   /* monotonic ms of the last decay */
    int close_code;    /* non-zero: close with it at the next writeable */
    char close_reason[96];

    UT_hash_handle hh; /* in gw_server.sessions, by sid */
};

gw_sess *gw_sess_new(gw_server *srv, struct lws *wsi);
/* libwebsockets closed the connection: detach and free. */
void gw_sess_free(gw_sess *s);
gw_sess *gw_sess_find(gw_server *srv, uint64_t sid);
/* One piece of a received WebSocket message. Returns -1 to close the connection now. */
int gw_sess_rx(gw_sess *s, const void *in, size_t len, bool first, bool final, bool binary);
/* Something came from the peer (bytes or a pong): it is alive. */
void gw_sess_alive(gw_sess *s);
/* The socket can take more: write the next frame. Returns -1 to close. */
int gw_sess_writeable(gw_sess *s);
/* Queues a reply or a push (takes one reference of b). */
void gw_sess_send(gw_sess *s, gw_buf *b);
/* Queues an encoded reply (copies the sbuffer). */
void gw_sess_reply(gw_sess *s, const msgpack_sbuffer *sb);
/* Queues a push of gid's message (shared bytes), or a notify once over the cap. */
void gw_sess_push(gw_sess *s, const char *gid, uint64_t mid, gw_buf *msg);
/* Replies `err` and charges the error budget (closing with 1008 when it is spent). */
void gw_sess_error(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid);
/* Replies `err` without charging the budget (a second error caused by the same frame). */
void gw_sess_error_free(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid);
/* Closes with code and reason at the next chance (after nothing else). */
void gw_sess_close(gw_sess *s, int code, const char *reason);
/* Pauses or resumes reading from the socket to match the session's and the store's load. */
void gw_sess_flow(gw_sess *s);
/* Sweep: closes sessions stuck in notify mode for too long. */
void gw_sess_sweep(gw_server *srv, uint64_t now_ms);

/* ---- rate limits (gw_throttle.c) ------------------------------------------------------ */

/* Fills a new session's buckets. */
void gw_throttle_init(gw_sess *s);
/* Cancels the session's pending resume (before it is freed). */
void gw_throttle_release(gw_sess *s);
/* A complete frame of len bytes arrived: pays for it (pausing reading while in debt). */
void gw_throttle_frame(gw_sess *s, size_t len);
/* May the frame being handled, a `send`, go? 0: yes. Else the ms the client should wait
 * (reading is paused that long) and *why, the text of the `rate_limited` error. */
uint64_t gw_throttle_send(gw_sess *s, const char **why);
/* True while a rate limit pauses reading the session. */
bool gw_throttle_paused(const gw_sess *s, uint64_t now_ms);
/* LWS_CALLBACK_FILTER_NETWORK_CONNECTION: 0 to accept, 1 to refuse (over --rate-conns). */
int gw_throttle_connection(gw_server *srv, const struct lws_filter_network_conn_args *a);

/* ---- requests (gw_route.c) ---------------------------------------------------------- */

/* A store write in flight for a session (or the ack flusher). */
typedef struct gw_pending {
    st_op op;
    gw_server *srv;
    uint64_t sid; /* 0: not from a session */
    uint64_t rid;
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1];
    char cid[PR_MAX_ID + 1];
    bool counted;           /* JOIN: counted in its user's joins_inflight */
    msgpack_sbuffer record; /* APPEND: the encoded from/body */
    st_ack *acks;           /* ACKS: the batch (ids point into ack_ids) */
    char *ack_ids;
    struct gw_pending *next; /* in gw_server.done_* */
} gw_pending;

/* A complete frame from an open session. */
void gw_route_frame(gw_sess *s, const uint8_t *frame, size_t len);
/* A store write finished; called on the service thread. */
void gw_route_complete(gw_server *srv, gw_pending *p);
/* Submits p (its op filled in) to the store; on refusal replies and frees. */
int gw_route_submit(gw_server *srv, gw_pending *p);
void gw_pending_free(gw_pending *p);

/* ---- acks (gw_acks.c) ---------------------------------------------------------------- */

typedef struct gw_ack_entry {
    char key[2 * PR_MAX_ID + 2]; /* gid \1 uid */
    uint64_t mid;
    UT_hash_handle hh;
} gw_ack_entry;

/* Remembers uid's ack of gid (the highest wins) until the next flush. */
void gw_acks_add(gw_server *srv, const char *gid, const char *uid, uint64_t mid);
/* The not yet persisted ack of (gid, uid), or 0: waiting for a flush or being written. */
uint64_t gw_acks_pending(gw_server *srv, const char *gid, const char *uid);
/* Hands every remembered ack to the store writer as one op. */
void gw_acks_flush(gw_server *srv);
/* An ack batch's write completed (ok or not): its acks are no longer in flight. */
void gw_acks_written(gw_server *srv, const st_ack *acks, size_t n);
void gw_acks_free(gw_server *srv);

/* ---- the server (gw_server.c) ------------------------------------------------------ */

typedef struct gw_counters {
    uint64_t connections, connections_peak, sessions_total, auth_failures;
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    uint64_t sends, sends_dup, pushes, deliveries, notifies, slow_switches;
    uint64_t acks_received, ack_frames, ack_writes, ack_entries_written;
    uint64_t pages, page_msgs;
    uint64_t errors[1 - PR_E_LAST]; /* by -PR_E* code */
    uint64_t closes_1008, closes_1009, closes_4001, closes_slow;
    uint64_t rate_sends_refused, rate_bytes_refused, rate_byte_pauses, rate_conns_refused;
} gw_counters;

/* A sample of the counters that have a rate in /stats. */
typedef struct gw_rate_sample {
    uint64_t ms; /* monotonic */
    uint64_t sends, deliveries, pushes;
} gw_rate_sample;

#define GW_RATE_SAMPLES 11 /* one a second: rates over the last ten seconds */

struct gw_server {
    gw_config cfg;
    st_store *store;
    struct lws_context *ctx;
    struct ev_loop *loop; /* libev (epoll): libwebsockets runs on it, see gw_server_new */
    struct lws_vhost *vhost;
    pr_decoder *dec; /* one decoder: requests are handled one at a time */
    int port;        /* bound */
    uint64_t started_ms;      /* wall clock */
    uint64_t started_mono_ms; /* for uptime */
    uint64_t boot_id; /* in session ids, so they differ across restarts */
    uint64_t next_sid;

    gw_sess *sessions; /* by sid */
    unsigned n_sessions;
    gw_sess *paused;   /* DL list */
    gw_user *users;
    gw_group *groups;
    gw_ack_entry *acks;          /* waiting for the next flush */
    gw_ack_entry *acks_writing;  /* flushed, the write not completed yet */
    unsigned ops_inflight; /* store ops submitted and not yet completed */
    gw_limit lim_sends, lim_bytes; /* per session (gw_throttle.c) */
    gw_addrs *addrs;               /* per source address; NULL with --rate-conns 0 */
    uint64_t conns_refused_unlogged, conns_refused_logged_ms;

    /* Completions from the writer thread, taken on the service thread. */
    pthread_mutex_t done_mu;
    gw_pending *done_head, *done_tail;

    /* The ack flush timer is libev's: libwebsockets 4.1's libev glue cannot move its one
     * timer earlier while it runs (ev_timer_set on an active watcher), so a libwebsockets
     * timer due sooner than the one already set fires late. The sweep stays a
     * libwebsockets timer: it makes that timer run at least once a second, which bounds
     * how late libwebsockets' own timeouts can be. */
    ev_timer ack_timer;
    lws_sorted_usec_list_t sul_sweep; /* once a second */
    bool stopping;
    uint64_t stop_deadline_ms; /* monotonic */
    bool closing_all;          /* stop: sessions have been told 1001 */
    bool finished;

    uint8_t *wbuf; /* LWS_PRE + the frame being written (one thread); grows if needed */
    size_t wbuf_cap;
    gw_counters n;
    gw_rate_sample samples[GW_RATE_SAMPLES];
    size_t sample_next, n_samples;
};

/* ---- figures (gw_stats.c) and HTTP (gw_http.c) ---------------------------------------- */

/* Once a second: a sample for the rates. */
void gw_stats_tick(gw_server *srv);
/* /stats as JSON, and /metrics as Prometheus text; malloc'd, the caller frees. */
char *gw_stats_json(gw_server *srv);
char *gw_stats_prometheus(gw_server *srv, size_t *len);

/* The protocol entry of plain HTTP on the same port (health, figures, demo, files). */
int gw_http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                     size_t len);
/* Bytes of per-connection state gw_http_callback needs. */
size_t gw_http_pss_size(void);

/* Wall-clock ms, for `ts` fields. */
uint64_t gw_now_ms(void);
/* Monotonic ms, for intervals (immune to clock steps). */
uint64_t gw_mono_ms(void);

#endif
