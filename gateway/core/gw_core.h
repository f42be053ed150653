/*
 * core/: what every other part of the gateway stands on. It owns the settings (flags,
 * defaults, checks), the one place that prints (levels), the clocks, reference-counted
 * frames, and the completion bridge: how a store request made on a service thread comes
 * back to it from the store's thread.
 *
 * It knows proto/ and store/ and nothing of the gateway above it: it must never call
 * net/, session/, groups/, cluster/, app/ or server/.
 */
#ifndef GW_CORE_H
#define GW_CORE_H

#include "proto.h"
#include "store.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* uthash makes every table with 32 buckets (512 bytes) at its first entry. Most tables
 * here are small and per user (a user's groups: often one or a few), so they start
 * with 4 buckets and double as they fill (at 10 entries a bucket): 448 bytes less per
 * signed-in user; the large tables (users, groups) reach their size in a few more
 * doublings. Only the table's creation reads these, so every file that makes tables
 * includes this header. */
#undef HASH_INITIAL_NUM_BUCKETS
#undef HASH_INITIAL_NUM_BUCKETS_LOG2
#define HASH_INITIAL_NUM_BUCKETS 4U
#define HASH_INITIAL_NUM_BUCKETS_LOG2 2U

/* Empties a uthash table (its handle named hh) whose entries are each one malloc'd block,
 * freeing them. */
#define GW_HASH_FREE_ALL(head)                                                                     \
    do {                                                                                           \
        __typeof__(head) gw_entry_, gw_next_;                                                      \
        HASH_ITER (hh, head, gw_entry_, gw_next_) {                                                \
            HASH_DEL(head, gw_entry_);                                                             \
            free(gw_entry_);                                                                       \
        }                                                                                          \
    } while (0)

/* An id from a store change or op (bytes and a length; NULL and 0 for none) as a C string
 * in out. false, out empty: longer than an id can be. (memcpy is not called for none:
 * a NULL source is undefined behaviour even for 0 bytes.) */
static inline bool gw_id_copy(char out[PR_MAX_ID + 1], const void *p, size_t n)
{
    if (n > PR_MAX_ID) {
        out[0] = 0;
        return false;
    }
    if (n)
        memcpy(out, p, n);
    out[n] = 0;
    return true;
}

/* ---- settings (gw_config.c) ---------------------------------------------------------- */

/* Most service threads (--threads). */
#define GW_THREADS_MAX 64

typedef struct gw_config {
    const char *listen;       /* address to bind */
    int port;                 /* 0: any free port (the log says which) */
    const char *port_file;    /* if set, the bound port is written there (for scripts) */
    unsigned threads;         /* service threads; default: the cores online */
    const char *data;         /* data folder: the token secret, TLS files, the RocksDB store */
    const char *store_url;    /* PostgreSQL connection URI; NULL: RocksDB in data/store */
    const char *api_key_file; /* the server API's keys, one a line (NULL: the API is off) */
    unsigned api_rate;        /* API requests a second per key (0: no limit) */
    const char *webhook_url;  /* the unread webhook's receiver (NULL: no webhook) */
    char webhook_secret[256]; /* its HMAC-SHA256 key (--webhook-secret-file) */
    size_t webhook_secret_n;
    unsigned webhook_delay_ms;   /* a message unread this long is told */
    unsigned webhook_timeout_ms; /* one POST may take this long */
    size_t webhook_queue;        /* events waiting at most (more are dropped, counted) */
    unsigned webhook_batch;      /* events in one POST at most */
    bool webhook_body;           /* events carry the message's body */
    unsigned receipt_list_max;   /* receipts list who read, and cursor pushes say who moved,
                                  * in groups of at most this many members */
    unsigned receipt_push_ms;    /* a watching session gets one receipt push a group this
                                  * often at most */
    unsigned presence_list_max;  /* presence lists the members of groups this small */
    unsigned edit_window_s;      /* a message is editable this long after it was sent (0:
                                  * always) */
    uint64_t retain_messages;    /* retention's defaults (store.h, Retention): each group's
                                  * last N messages (0: all) */
    unsigned retain_days;        /* ... messages younger than this (0: all) */
    bool retain_until_acked;     /* ... and what some member has not acked, */
    uint64_t retain_cap;         /* ... up to this many messages a group */
    uint64_t retain_changes;     /* the change log: each group's last N changes (0: the
                                  * store's default; UINT64_MAX: all) */
    uint64_t retain_changes_ms;  /* ... or its changes younger than this (0: no age) */
    bool insecure;               /* plain ws:// and http:// (development on loopback) */
    const char *cert;            /* TLS certificate (PEM) */
    const char *key;             /* TLS private key (PEM) */
    char secret[256];            /* HS256 token secret */
    size_t secret_n;
    bool sync;             /* fsync every group commit */
    bool open_groups;      /* join creates missing groups (--groups open) */
    bool managed_groups;   /* --groups managed: only the server API (or a token's groups
                            * claim) makes members; a client's join of any other group is
                            * `unauthorized` */
    bool demo;             /* POST /demo/login issues tokens (insecure) */
    const char *web_root;  /* static files served at / */
    size_t max_frame;      /* bytes */
    size_t max_body;       /* bytes */
    size_t queue_cap;      /* queued pushes per session before switching to notify */
    size_t queue_bytes;    /* ... or bytes of queued pushes */
    unsigned max_groups;   /* groups one user may belong to */
    unsigned slow_close_s; /* a session stuck in notify mode this long is closed */
    unsigned ack_flush_ms; /* coalesced acks are persisted this often */
    unsigned ack_every;    /* told to clients in welcome */
    unsigned ack_delay_ms; /* told to clients in welcome */
    unsigned page_default; /* enter/pull without limit */
    unsigned page_max;     /* larger limits are clamped */
    unsigned hello_timeout_s;
    unsigned error_budget;   /* bad requests tolerated in a burst before closing with 1008 */
    unsigned ping_s;         /* idle sessions are pinged after this, closed after twice it */
    unsigned inflight_max;   /* store writes in flight per session before its reads pause */
    unsigned rate_sends;     /* `send`s per second per session (0: no limit) */
    size_t rate_bytes;       /* bytes per second a session may send (0: no limit) */
    unsigned rate_conns;     /* new connections per second per source address (0: no limit) */
    unsigned rate_burst_s;   /* each rate's bucket holds this many seconds' worth */
    unsigned conns_per_addr; /* connections open at once per source address (0: no cap) */
    unsigned body_timeout_s; /* an HTTP request's body must be in this long after its headers */
    unsigned handshake_timeout_s;     /* TLS handshake and HTTP request (or upgrade) must finish */
    bool demo_any_address;            /* --demo on a --listen address that is not loopback */
    size_t store_high;                /* writer queue length that pauses reading from senders */
    size_t store_overload;            /* writer queue length past which writes get `overloaded` */
    int log_level;                    /* 0 error .. 3 debug */
    unsigned test_load_stall_ms;      /* tests only: a thread stalls when a user's groups come in */
    unsigned test_drop_announcements; /* tests only: st_options.test_drop_announcements */
    char node[72];                    /* --node, or listen:port (the bound port, once known) */
    bool node_given;                  /* --node was given */
} gw_config;

/* Fills defaults, then parses argv. Returns 0 to run, 1 when --help was printed (exit
 * 0), or -1 after printing what was wrong to stderr (exit 2). */
int gw_config_parse(gw_config *c, int argc, char **argv);

/* A node name: 1..64 of [A-Za-z0-9._:-]. */
bool gw_config_node_ok(const char *name);
/* Sets the node name: name if given, else (unless --node was given) listen:port. */
void gw_config_set_node(gw_config *c, const char *name, int port);

/* ---- the log (gw_log.c): one line per event, with a level; the only place that prints - */

enum gw_log_level { GW_LOG_ERROR = 0, GW_LOG_WARN, GW_LOG_INFO, GW_LOG_DEBUG };

/* Lines above this level are dropped (default GW_LOG_INFO). */
void gw_log_set_level(enum gw_log_level lvl);
/* Every line names the node from then on (the cluster: whose log is this). */
void gw_log_set_node(const char *name);
/* The calling thread's lines name it from then on: service thread index (0: no name). */
void gw_log_set_thread(unsigned index);
/* Routes libwebsockets' own errors and warnings into this log. */
void gw_log_capture_lws(void);

__attribute__((format(printf, 2, 3))) void gw_log(enum gw_log_level lvl, const char *fmt, ...);

#define gw_err(...) gw_log(GW_LOG_ERROR, __VA_ARGS__)
#define gw_warn(...) gw_log(GW_LOG_WARN, __VA_ARGS__)
#define gw_info(...) gw_log(GW_LOG_INFO, __VA_ARGS__)
#define gw_dbg(...) gw_log(GW_LOG_DEBUG, __VA_ARGS__)

/* ---- clocks (gw_clock.c) ------------------------------------------------------------- */

/* Wall-clock ms, for `ts` fields. */
uint64_t gw_now_ms(void);
/* Monotonic ms, for intervals (immune to clock steps). */
uint64_t gw_mono_ms(void);

/* ---- shared frames (gw_buf.c) --------------------------------------------------------- */

/* Reference-counted bytes: one encoded message queued on many sessions. A push is encoded
 * once and every member's session queue holds a reference to the same buffer. Used on the
 * service thread only, so the count is a plain integer. */
typedef struct gw_buf {
    unsigned refs; /* owners; the last gw_buf_unref frees */
    size_t len;
    uint8_t data[];
} gw_buf;

/* A buffer holding a copy of the sbuffer's bytes, with one reference. NULL on ENOMEM. */
gw_buf *gw_buf_from(const msgpack_sbuffer *sb);
gw_buf *gw_buf_ref(gw_buf *b);
void gw_buf_unref(gw_buf *b);

/* ---- the completion bridge (gw_bridge.c) ---------------------------------------------- */

/*
 * How a store request made on the service thread comes back to it. The store runs `done`
 * on its own thread; the bridge links the finished job into a list under a mutex and
 * wakes the service thread (the wake function: lws_cancel_service in the server), which
 * drains the list and runs each job's `complete`, in the order the store finished them.
 * A read the store answers at once completes before submit returns.
 *
 * The bridge knows nothing of libwebsockets or of an event loop: the server and the fuzz
 * target make it the same way, with their own wake function.
 */
typedef struct gw_bridge gw_bridge;
typedef struct gw_job gw_job;

/* Called on the service thread once the job's store request has its result in op. The
 * job belongs to its owner again: it may free it. */
typedef void (*gw_job_fn)(gw_job *j);

/* A store request on its way. Embedded by its owner (a request, an ack batch), which
 * fills op (but op.done and op.ud, the bridge's) and complete. */
struct gw_job {
    st_op op;
    gw_job_fn complete;
    gw_bridge *bridge_; /* private: where it comes back to */
    gw_job *next_;      /* private: the drain list */
};

/* wake(ud) is called on the store thread after a completion is posted. */
gw_bridge *gw_bridge_new(st_store *store, void (*wake)(void *ud), void *ud);
void gw_bridge_free(gw_bridge *b);

/* Hands j->op to the store. Returns 0: j->complete runs later, from gw_bridge_drain; 1:
 * the store answered at once and j->complete has run already; a negative ST_E* code:
 * refused (j->complete is not called). */
int gw_bridge_submit(gw_bridge *b, gw_job *j);

/* fn(ud, op) is called on the service thread with every op drained, before its job's
 * complete, while its inputs are still there: the threads' hub (cluster/) tells the
 * other service threads what a write changed. Ops answered at once (reads) are not
 * shown. */
void gw_bridge_observe(gw_bridge *b, void (*fn)(void *ud, const st_op *op), void *ud);

/* The store was closed (st_close, which frees it): from now on gw_bridge_submit refuses
 * with ST_ECLOSED, so that the completions drained after it cannot reach the store. */
void gw_bridge_close(gw_bridge *b);

/* Runs every posted completion, in order. Service thread. */
void gw_bridge_drain(gw_bridge *b);

/* Store requests submitted and not completed yet. */
unsigned gw_bridge_inflight(const gw_bridge *b);

/* Blocks until a completion is posted (or nothing is in flight). For a caller without an
 * event loop (the fuzz target); the server waits in its loop instead. */
void gw_bridge_wait(gw_bridge *b);

/* Frees what an op's reads handed back (its page, groups or members; NULL ones are
 * skipped) and clears them: every completion ends with it. */
void gw_op_release(st_op *op);

/* ---- a multiset that counts what is at least x, in O(log n) (gw_rank.c) -------------- */

/* The cursors of a group's members: how many are at or past a mid. Not thread-safe: its
 * owner locks. */
typedef struct gw_rank gw_rank;
gw_rank *gw_rank_new(void);    /* NULL: no memory */
void gw_rank_free(gw_rank *r); /* NULL is a no-op */
/* Adds v once more. 0, or -1 when out of memory (nothing changed). */
int gw_rank_add(gw_rank *r, uint64_t v);
/* Removes v once (nothing if it is not there). */
void gw_rank_remove(gw_rank *r, uint64_t v);
/* How many values are >= v. */
size_t gw_rank_at_least(const gw_rank *r, uint64_t v);
/* How many values in all. */
size_t gw_rank_count(const gw_rank *r);

#endif
