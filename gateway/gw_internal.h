/*
 * The gateway's modules and how they meet, private to gateway/. Everything of one server
 * runs on its libwebsockets service thread, except the store's completions, which the
 * bridge (gw_bridge.c) brings over from the store thread. A process runs one server per
 * service thread (--threads; gw_hub.c), which share nothing but the store, the hub's
 * feeds and its rate table.
 *
 * Each module keeps its own state and is the only one to touch it:
 *   gw_server.c   the composition: the lws context, its callbacks, the sweep, the stop
 *   gw_session.c  sessions: their life, receiving, the error budget, closing, pausing
 *   gw_reqs.c     a session's requests in the order it sent them (gw_reqq)
 *   gw_route.c    each request: checks, replies, store jobs and their completions
 *   gw_outq.c     a session's outbound queue, batching, notify mode, writing (gw_outq)
 *   gw_registry.c who is online in which group, users loading, fan-out (gw_registry)
 *   gw_deliver.c  each group's pushes once and in mid order, holes read (gw_deliver)
 *   gw_cluster.c  the other nodes' changes applied, the resync (gw_cluster)
 *   gw_feed.c     the change feed's queue, feed thread to service thread (gw_feed)
 *   gw_hub.c      the service threads of the process and what they tell each other
 *   gw_acks.c     the ack coalescer (gw_acks)
 *   gw_bridge.c   store completions to the service thread (gw_bridge)
 *   gw_throttle.c rate limits applied (gw_limits, and a session's gw_srate)
 *   gw_stats.c    the figures (gw_counters), rendered as JSON and Prometheus text
 * and gw_http.c, gw_auth.c, gw_config.c, gw_log.c, gw_buf.c, gw_tls.c, gw_rate.c and
 * gw_addrs.c, each with one job (docs/ARCHITECTURE.md).
 *
 * A session (gw_sess) is the one struct several modules share: each owns its part (out,
 * reqs, rate) and the others reach it only through that module's functions.
 */
#ifndef GW_INTERNAL_H
#define GW_INTERNAL_H

#include "gw_auth.h"
#include "gw_bridge.h"
#include "gw_buf.h"
#include "gw_config.h"
#include "gw_feed.h"
#include "gw_log.h"
#include "gw_rate.h"
#include "gw_stats.h"
#include "proto.h"
#include "store.h"

#include <ev.h>
#include <libwebsockets.h>
#include <stdbool.h>
#include <stdint.h>
#include <uthash.h>

/* uthash makes every table with 32 buckets (512 bytes) at its first entry. Most tables
 * here are small and per user (a user's groups: often one or a few), so they start
 * with 4 buckets and double as they fill (at 10 entries a bucket): 448 bytes less per
 * signed-in user; the large tables (users, groups) reach their size in a few more
 * doublings. Only the table's creation reads these. */
#undef HASH_INITIAL_NUM_BUCKETS
#undef HASH_INITIAL_NUM_BUCKETS_LOG2
#define HASH_INITIAL_NUM_BUCKETS 4U
#define HASH_INITIAL_NUM_BUCKETS_LOG2 2U

typedef struct gw_server gw_server;
typedef struct gw_sess gw_sess;
typedef struct gw_user gw_user;
typedef struct gw_req gw_req;
typedef struct gw_registry gw_registry;
typedef struct gw_acks gw_acks;
typedef struct gw_limits gw_limits;
typedef struct gw_sessions gw_sessions;

/* ---- a session's parts ------------------------------------------------------------- */

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

/* The outbound queue (gw_outq.c): a ring of encoded messages, shared pushes included. */
typedef struct gw_outq {
    gw_qitem *q;
    size_t head, len, cap;
    size_t pushes;            /* pushes in the ring */
    size_t push_bytes;        /* ... and their bytes */
    size_t reply_bytes;       /* bytes of replies in the ring: reading pauses past a budget */
    bool slow;                /* over the push cap: pushes become notify entries */
    uint64_t slow_since;      /* monotonic ms */
    gw_notify *notify;        /* coalesced notify per group while slow */
    bool ping_due;            /* a WebSocket ping goes out at the next writeable */
    uint64_t backed_up_since; /* monotonic ms since replies were over the budget (0: not) */
} gw_outq;

/* A frame that waits for the requests before it (gw_reqs.c). */
typedef struct gw_waiting {
    struct gw_waiting *next;
    size_t n;
    uint8_t frame[];
} gw_waiting;

/* A session's requests (gw_reqs.c): they take effect in the order they came. */
typedef struct gw_reqq {
    gw_waiting *head, *tail; /* frames waiting their turn, copied */
    size_t n_waiting, waiting_bytes;
    unsigned sends;   /* sends in flight: more sends (and acks) may follow them */
    bool barrier;     /* another request in flight: everything after it waits */
    bool pumping;     /* gw_reqs_pump is running (a completion may come inside it) */
    gw_req *inflight; /* DL: its requests with a store job under way */
} gw_reqq;

/* A session's rate limits (gw_throttle.c). */
typedef struct gw_srate {
    gw_bucket sends, bytes;
    uint64_t until;        /* monotonic ms: reading is paused until then */
    ev_timer timer;        /* resumes reading at `until` (libev: see gw_acks.c) */
    size_t frame_len;      /* the frame being handled ... */
    bool frame_over_bytes; /* ... and whether it overdrew the byte bucket */
} gw_srate;

/* Why reading a session is paused: each reason is set and cleared by its module, and the
 * socket is read again once no reason is left (gw_sess_pause). */
enum gw_pause {
    GW_PAUSE_REQS = 1,    /* gw_reqs.c: too many requests in flight or waiting */
    GW_PAUSE_REPLIES = 2, /* gw_outq.c: too many replies not yet written */
    GW_PAUSE_STORE = 4,   /* gw_reqs.c: the store's queue is long (every writer waits) */
    GW_PAUSE_RATE = 8,    /* gw_throttle.c: over a rate limit */
};

/* The subprotocol of JSON text frames (proto.h, "The JSON form"). */
#define GW_PROTO_JSON "gw.v1.json"

struct gw_sess {
    gw_server *srv;
    struct lws *wsi; /* NULL once libwebsockets has closed it */
    uint64_t sid;
    char sid_str[24];
    gw_user *user;    /* NULL until a valid hello has loaded it */
    gw_user *loading; /* the user whose groups are being read for this session's hello */
    gw_identity id;
    gw_sess *user_prev, *user_next;     /* the user's sessions, or its waiters while loading */
    gw_sess *prev, *next;               /* every session (gw_session.c) */
    gw_sess *paused_prev, *paused_next; /* paused sessions (gw_session.c) */
    unsigned pause;                     /* GW_PAUSE_* reasons */

    /* Receive: one WebSocket message may arrive in several pieces. */
    uint8_t *rx;
    size_t rx_n, rx_cap;
    bool rx_text;      /* the message being received is a text frame */
    bool json;         /* subprotocol gw.v1.json: JSON text frames both ways */
    size_t rx_discard; /* bytes dropped of a message over max_frame */

    gw_outq out;
    gw_reqq reqs;
    gw_srate rate;

    /* Liveness, checked by the sweep once a second (see gw_session.c for why not by
     * timers). */
    uint64_t born_ms;    /* monotonic ms at the handshake: the hello must come in time */
    uint64_t hello_rid;  /* the rid of the hello whose user is loading */
    uint64_t last_rx_ms; /* monotonic ms of the last bytes or pong received */
    bool ping_sent;      /* a ping was sent since last_rx_ms */

    double err_score;   /* bad requests, decaying by one a second */
    uint64_t err_at;    /* monotonic ms of the last decay */
    int close_code;     /* non-zero: close with it at the next writeable */
    char *close_reason; /* malloc'd by gw_sess_close (NULL: none) */
};

/* The close code of sessions the application signs out (its API: docs/API.md). */
#define GW_CLOSE_SIGNED_OUT 4003

/* ---- sessions (gw_session.c) -------------------------------------------------------- */

gw_sessions *gw_sessions_new(gw_server *srv, uint64_t boot_id);
void gw_sessions_free(gw_sessions *all);
unsigned gw_sessions_count(const gw_sessions *all);
/* Sessions past hello. */
unsigned gw_sessions_authenticated(const gw_sessions *all);
/* True while some session still has something to write. */
bool gw_sessions_writing(const gw_sessions *all);
/* Closes every session with code and reason. */
void gw_sessions_close_all(gw_sessions *all, int code, const char *reason);
/* The store's queue got shorter: sessions paused for it may read again. */
void gw_sessions_store_calm(gw_sessions *all);
/* Once a second: hello deadline, pings, hang-ups, slow consumers that stay slow. */
void gw_sessions_sweep(gw_sessions *all, uint64_t now_ms);

gw_sess *gw_sess_new(gw_server *srv, struct lws *wsi);
/* libwebsockets closed the connection: detach and free. */
void gw_sess_free(gw_sess *s);
/* One piece of a received WebSocket message. Returns -1 to close the connection now. */
int gw_sess_rx(gw_sess *s, const void *in, size_t len, bool first, bool final, bool binary);
/* Something came from the peer (bytes or a pong): it is alive. */
void gw_sess_alive(gw_sess *s);
/* Replies `err` and charges the error budget (closing with 1008 when it is spent). */
void gw_sess_error(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid);
/* Replies `err` without charging the budget (a second error caused by the same frame,
 * or one the server caused). */
void gw_sess_error_free(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid);
/* Closes with code and reason once what is queued before it has been written. */
void gw_sess_close(gw_sess *s, int code, const char *reason);
/* Sets or clears one reason to pause reading the session. */
void gw_sess_pause(gw_sess *s, enum gw_pause why, bool on);

/* ---- the outbound queue (gw_outq.c) ------------------------------------------------- */

/* Queues an encoded reply (copies the sbuffer). */
void gw_out_reply(gw_sess *s, const msgpack_sbuffer *sb);
/* Queues a `notify {gid, last_mid}` (a hole too large to push: the client pulls). */
void gw_out_notify(gw_sess *s, const char *gid, uint64_t last_mid);
/* Queues a push of gid's message (shared bytes), or a notify once over the cap. */
void gw_out_push(gw_sess *s, const char *gid, uint64_t mid, gw_buf *msg);
/* A WebSocket ping goes out at the next writeable. */
void gw_out_ping(gw_sess *s);
/* The socket can take more: write the next frame (or the close). Returns -1 to close. */
int gw_out_writeable(gw_sess *s);
/* True while something waits to be written. */
bool gw_out_pending(const gw_sess *s);
/* Frees what is queued (the session is going). */
void gw_out_release(gw_sess *s);
/* The service thread writes no more: its frame buffer goes. */
void gw_out_thread_end(void);

/* ---- requests in order (gw_reqs.c) -------------------------------------------------- */

/* A complete frame from an open session. */
void gw_reqs_frame(gw_sess *s, const uint8_t *frame, size_t len);
/* A request of the session went to the store (send: more sends may follow it). */
void gw_reqs_began(gw_sess *s, gw_req *r, bool send);
/* ... and came back: the requests waiting behind it may start. */
void gw_reqs_done(gw_sess *s, gw_req *r, bool send);
/* The replies went out: requests held back for them may start. */
void gw_reqs_resume(gw_sess *s);
/* The store's queue is over its mark: pause this writer until it is shorter. */
void gw_reqs_store_busy(gw_sess *s);
/* The session is going: drop what waits, detach what is in flight. */
void gw_reqs_release(gw_sess *s);

/* ---- each request (gw_route.c) ------------------------------------------------------ */

/* A request of a session with a store job under way. */
struct gw_req {
    gw_job job;
    gw_server *srv;
    gw_sess *sess;       /* NULL once the session is gone: nothing to answer */
    gw_req *prev, *next; /* in its session's reqs.inflight */
    uint64_t rid;
    bool counted; /* JOIN: counted in its user's joins_inflight */
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1];
    char cid[PR_MAX_ID + 1];
    msgpack_sbuffer record; /* APPEND: the encoded from/body */
};

/* Starts one decoded request of s: answered at once, or handed to the store. */
void gw_route_start(gw_sess *s, const pr_req *r);
/* What st_* codes mean to a client. */
int gw_route_err_code(int st_rc);
const char *gw_route_err_msg(int st_rc);

/* ---- the registry (gw_registry.c) --------------------------------------------------- */

/* One of an online user's groups, with the ack as this gateway knows it (the stored one,
 * moved forward by acks not yet persisted). */
typedef struct gw_member {
    char gid[PR_MAX_ID + 1];
    uint64_t ack;
    bool seen;         /* in the store's list, during a resync's comparison */
    UT_hash_handle hh; /* in gw_user.groups, by gid */
} gw_member;

/* A user with a session here, or one whose groups are being read for a hello. */
struct gw_user {
    char uid[PR_MAX_ID + 1];
    gw_sess *sessions; /* utlist DL through gw_sess.user_prev/next */
    unsigned n_sessions;
    gw_sess *waiters;        /* sessions whose hello waits for the read of its groups */
    bool loading;            /* that read is under way */
    gw_member *groups;       /* by gid */
    unsigned joins_inflight; /* joins submitted, not completed: count towards --max-groups */
    bool stale;        /* another gateway changed its memberships during the load: read again */
    bool rereading;    /* such a read is under way */
    UT_hash_handle hh; /* in the registry's users, by uid */
};

/* An online member of a group: the entry the fan-out walks. */
typedef struct gw_online {
    gw_user *user;     /* key: the pointer */
    UT_hash_handle hh; /* in gw_group.online */
} gw_online;

typedef struct gw_held gw_held;

/* A group with at least one online member. */
typedef struct gw_group {
    char gid[PR_MAX_ID + 1];
    uint64_t last_mid; /* the highest mid known committed: completions, announcements,
                        * pages, joins */
    gw_online *online;
    unsigned n_online;
    UT_hash_handle hh; /* in the registry's groups, by gid */
    /* Pushes in mid order (gw_deliver.c, which alone touches these). */
    uint64_t pushed; /* every mid up to it has gone to the online sessions here */
    gw_held *held;   /* messages ahead of a hole, ascending */
    size_t n_held;
    bool in_holes;       /* last_mid > pushed: in the list of holes */
    bool filling;        /* a read of the hole is under way */
    uint64_t hole_since; /* monotonic ms (0: read it at the next tick) */
    struct gw_group *hole_prev, *hole_next;
} gw_group;

/* Told when a session's hello has its user (rc 0) or could not load it (rc ST_E*). */
typedef void (*gw_attached_fn)(gw_sess *s, int rc);

gw_registry *gw_registry_new(gw_server *srv);
void gw_registry_free(gw_registry *reg);
/* Signs s in as uid: at once (returns 1) when the user is here, else once its groups are
 * read (returns 0; done runs then, and may also run before this returns). */
int gw_registry_attach(gw_registry *reg, gw_sess *s, const char *uid, gw_attached_fn done);
/* Detaches a closing session (or stops its wait); the user goes with its last session. */
void gw_registry_detach(gw_registry *reg, gw_sess *s);
gw_user *gw_user_find(gw_registry *reg, const char *uid);
gw_member *gw_member_find(gw_user *u, pr_slice gid);
/* Records a membership (after a committed join) and puts the user online in the group. */
gw_member *gw_member_add(gw_registry *reg, gw_user *u, const char *gid, uint64_t ack,
                         uint64_t last_mid);
void gw_member_remove(gw_registry *reg, gw_user *u, const char *gid);
/* Closes every session of uid here with 4003 (signed out by the application); how many. */
unsigned gw_user_sign_out(gw_server *srv, const char *uid);
/* A membership ended (a leave committed, here or elsewhere, or the application removed
 * it): removed, and the user's sessions but `except` (the one that asked) are told. */
void gw_member_end(gw_registry *reg, gw_user *u, const char *gid, gw_sess *except);
gw_group *gw_group_find(gw_registry *reg, const char *gid, size_t n);
/* A page showed gid's last mid: keep the cap on acks in step with what clients see. */
void gw_group_saw(gw_registry *reg, const char *gid, uint64_t last_mid);
/* Pushes a committed message to every online session of every member but `except`. */
void gw_fanout(gw_registry *reg, const char *gid, uint64_t mid, uint64_t ts, const void *record,
               size_t record_n, gw_sess *except);
/* Figures: users and groups online, and how far online members' acks trail. */
void gw_registry_figures(gw_registry *reg, uint64_t *users, uint64_t *groups, uint64_t *members,
                         uint64_t *lag_total, uint64_t *lag_max);
/* True when nothing is left (the fuzz target's check after each input). */
bool gw_registry_empty(const gw_registry *reg);

/* Calls user for every user and group for every group here (neither may change them). */
void gw_registry_each(gw_registry *reg, void (*user)(void *ud, gw_user *u),
                      void (*group)(void *ud, gw_group *g), void *ud);

/* ---- the other nodes' changes (gw_cluster.c) ---------------------------------------- */

typedef struct gw_cluster gw_cluster;

gw_cluster *gw_cluster_new(void);
void gw_cluster_free(gw_cluster *c);
/* Applies one change another node announced (the change feed, gw_feed.h); srv. */
void gw_cluster_change(void *srv, const st_change *ch);
/* Reads again what concerns the online users (the feed lost announcements); repeated
 * from the sweep until every read has worked. */
void gw_cluster_resync(gw_server *srv);
/* Reads a user's groups again and applies what changed elsewhere meanwhile. */
void gw_cluster_reread_user(gw_server *srv, gw_user *u);
/* Once a second: a resync that failed is tried again. */
void gw_cluster_sweep(gw_server *srv);

/* ---- pushes in mid order (gw_deliver.c) --------------------------------------------- */

typedef struct gw_deliver gw_deliver;

gw_deliver *gw_deliver_new(gw_server *srv);
void gw_deliver_free(gw_deliver *d);
/* A committed message of g (rec NULL: announced without its record, read it): pushed to
 * the online sessions but `except` in mid order, once. */
void gw_deliver_msg(gw_server *srv, gw_group *g, uint64_t mid, uint64_t ts, const void *rec,
                    size_t n, gw_sess *except);
/* g's last mid is at least last_mid (a page, a join, a read): pushes what it is missing. */
void gw_deliver_saw(gw_server *srv, gw_group *g, uint64_t last_mid);
/* A message of a group with nobody online here: remembered for a while. */
void gw_deliver_offline(gw_server *srv, const char *gid, size_t n, uint64_t mid);
/* g came online here (last_mid set) / is going. */
void gw_deliver_group_new(gw_server *srv, gw_group *g);
void gw_deliver_group_free(gw_server *srv, gw_group *g);
/* Figures: groups with a hole now. */
size_t gw_deliver_holes(const gw_deliver *d);

/* ---- acks (gw_acks.c) --------------------------------------------------------------- */

gw_acks *gw_acks_new(gw_server *srv);
void gw_acks_free(gw_acks *a);
/* Remembers uid's ack of gid (the highest wins) until the next flush. */
void gw_acks_add(gw_acks *a, const char *gid, const char *uid, uint64_t mid);
/* The not yet persisted ack of (gid, uid), or 0: waiting for a flush or being written. */
uint64_t gw_acks_pending(gw_acks *a, const char *gid, const char *uid);
/* Hands every remembered ack to the store as one op. */
void gw_acks_flush(gw_acks *a);
/* True while acks wait for a flush. */
bool gw_acks_waiting(const gw_acks *a);
/* Figures: batches and entries persisted. */
void gw_acks_figures(const gw_acks *a, uint64_t *writes, uint64_t *entries);

/* ---- rate limits (gw_throttle.c) ---------------------------------------------------- */

gw_limits *gw_limits_new(const gw_config *cfg, uint64_t seed);
void gw_limits_free(gw_limits *l);
/* Source addresses in the connection-rate table. */
size_t gw_limits_addresses(gw_limits *l);
/* Fills a new session's buckets. */
void gw_throttle_init(gw_sess *s);
/* Cancels the session's pending resume (before it is freed). */
void gw_throttle_release(gw_sess *s);
/* A complete frame of len bytes arrived: pays for it (pausing reading while in debt). */
void gw_throttle_frame(gw_sess *s, size_t len);
/* May the frame being handled, a `send`, go? 0: yes. Else the ms the client should wait
 * (reading is paused that long) and *why, the text of the `rate_limited` error. */
uint64_t gw_throttle_send(gw_sess *s, const char **why);
/* A connection just accepted (gw_listen.c), a: its source address: 0 to accept, 1 to
 * refuse (over --rate-conns). Any thread: the table is shared under its lock. */
int gw_throttle_connection(gw_server *srv, const struct lws_filter_network_conn_args *a);

/* ---- the server (gw_server.c) ------------------------------------------------------- */

/* The protocols of a server's context: HTTP, gw.v1, its JSON form, the end. */
#define GW_PROTOCOLS 4

struct gw_server {
    gw_config cfg;
    struct gw_hub *hub; /* the process's service threads (gw_hub.h; NULL: the fuzz target) */
    unsigned thread;    /* this one's index among them */
    struct lws_protocols protocols[GW_PROTOCOLS];
    st_store *store;
    struct lws_context *ctx;
    struct lws_vhost *vhost;    /* its one vhost: adopts the connections handed to it */
    struct gw_listen *listener; /* the process's listening socket (the first thread's) */
    SSL_CTX *client_ssl_ctx;    /* given to libwebsockets, which makes no client connection */
    struct ev_loop *loop;       /* libev (epoll): libwebsockets runs on it; NULL without a loop */
    pr_decoder *dec;            /* one decoder: requests are decoded one at a time */
    int port;                   /* bound */
    uint64_t started_ms;        /* wall clock */
    uint64_t started_mono_ms;   /* for uptime */

    /* The modules, each with its own state. */
    gw_bridge *bridge;
    gw_feed *feed;            /* the other gateways' changes (NULL: not listening) */
    struct gw_api *api;       /* the server API's keys (NULL: the API is off) */
    struct gw_unread *unread; /* the unread webhook (gw_webhook.h; NULL: off) */
    struct gw_webhook *webhook;
    gw_cluster *cluster;
    gw_deliver *deliver;
    gw_sessions *sessions;
    gw_registry *registry;
    gw_acks *acks;
    gw_limits *limits; /* the hub's, shared by every thread (or its own: owns_limits) */
    bool owns_limits;
    gw_counters n; /* the figures: counted where things happen, read by gw_stats.c */
    gw_samples samples;

    lws_sorted_usec_list_t sul_sweep; /* once a second */
    unsigned sweeps;                  /* sweeps so far (the heap trim's cadence) */
    bool stopping;
    uint64_t stop_deadline_ms; /* monotonic */
    bool closing_all;          /* stop: sessions have been told 1001 */
    bool finished;
};

/* Sets up a server's modules without libwebsockets or a loop (the fuzz target; the
 * server adds its context and loop on top). wake: see gw_bridge_new. */
int gw_server_init(gw_server *srv, const gw_config *cfg, st_store *store, void (*wake)(void *ud),
                   void *wake_ud);
/* Frees what gw_server_init made. */
void gw_server_release(gw_server *srv);

/* A connection accepted for this server (gw_listen.c): adopted by its context, or closed
 * when stopping. */
void gw_server_adopt(gw_server *srv, int fd);

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
