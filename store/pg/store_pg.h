/*
 * Private to the PostgreSQL backend (store_pg*.c): the connection, the rows of the batch
 * being applied, and the helpers that speak libpq's pipeline mode with binary arrays.
 */
#ifndef GW_STORE_PG_H
#define GW_STORE_PG_H

#include "st_pg.h"
#include "store_backend.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <uthash.h>

#define PG_SCHEMA_VERSION 9 /* what this build creates and understands */

/* A lost connection is made again 250 ms after the loss, then after 500 ms, then every
 * second: the store's (st_backend.retry_first_ms, retry_max_ms) and the change feed's
 * (store_pg_feed.c). An attempt is a connect, refused at once while the server is down
 * and, through the URL's target_session_attrs=read-write, by a standby not yet promoted;
 * a host that does not answer costs connect_timeout (store_pg_schema.c). In a failover
 * each pause after the promotion is time without writes (or without the feed's pushes),
 * so the pauses stay short; a second apart, the attempts of a hundred nodes are a
 * hundred connects a second, nothing to a server. */
#define PG_RETRY_FIRST_MS 250
#define PG_RETRY_MAX_MS 1000

/* A growable byte buffer (parameters in PostgreSQL's binary format). */
typedef struct pg_buf {
    char *p;
    size_t n, cap;
    bool oom;
} pg_buf;

/* A row of the batch: read at begin (existed) and changed by the ops (present, dirty). */
typedef struct pg_row {
    UT_hash_handle hh;
    char key[1 + 2 * (1 + ST_MAX_ID)]; /* kind, then the ids, each length-prefixed */
    size_t key_n;
    char kind;              /* 'g' group, 'm' member, 's' send, 'x' message (an edit's) */
    st_id a, b;             /* the ids, pointing into key: gid | gid, uid | uid, cid |
                             * gid, be64 mid */
    bool existed;           /* in the database when the batch began */
    st_member_row m0;       /* 'm': the membership as it was then (what moved is announced) */
    bool present;           /* in it now, as the batch has changed it */
    bool dirty;             /* changed by the batch */
    uint64_t read_last_mid; /* 'g': the last_mid it began with (what the fast path expects) */
    uint64_t slow_until;    /* cache: another writer was seen here; no fast path until
                             * then (monotonic ms) */
    union {
        st_group_row g;
        st_member_row m;
        st_send_row s;
        st_msg_row x; /* its record: rec as read, then the op's (put_version) */
    } v;
    void *rec; /* 'x': the record as read (owned) */
    /* 'x' (Changes): its reactions' counts as read, then as the batch's reactions left
     * them (v.x.reactions points here; keys in rx_keys; both owned); the cseq of the
     * batch's last version of it (what its announcement carries), the time of its latest
     * change, and whether the batch made a version (else only its cseq moved). */
    st_reaction *rx;
    size_t n_rx;
    char *rx_keys;
    uint64_t ver_cseq, cts;
    bool versioned;
} pg_row;

/* A reaction a batch reads or writes: uid's key on gid's message mid (store_pg_react.c). */
typedef struct pg_rx {
    UT_hash_handle hh;
    char key[1 + ST_MAX_ID + 8 + 1 + ST_MAX_ID + ST_REACT_KEY_MAX];
    size_t key_n;
    st_id gid, uid, rkey; /* pointing into key */
    uint64_t mid;
    bool existed; /* in the database when the batch began */
    bool present; /* set, as the batch has left it */
    bool dirty;
} pg_rx;

/* A message of the batch; the record is borrowed from its op. */
typedef struct pg_msg {
    st_id gid;
    uint64_t mid, ts;
    const void *rec;
    size_t n;
} pg_msg;

/* A batch's announcement being made (store_pg_events.c): payloads of whole lines. */
typedef struct pg_announce {
    uint64_t origin; /* the announcing store */
    pg_buf *list;    /* finished payloads */
    size_t n, cap;
    pg_buf cur; /* the payload being filled */
    size_t cur_changes;
    size_t hints; /* messages announced without their record */
    bool oom;
} pg_announce;

typedef struct pg_feed pg_feed;

/* Users' times a batch moves forward (st_seen: a uid and a time). */
typedef struct pg_times {
    st_seen *v;
    size_t n, cap;
    bool lost; /* one could not be kept (out of memory) */
} pg_times;

typedef struct pg {
    char *url;        /* as given (may hold a password: never logged) */
    char **kw, **val; /* the connection's parameters: defaults, then the URL */
    char app[80];     /* application_name: "gw NODE" */
    char where[256];  /* hosts, ports, database and user, for log lines: never a password */
    bool sync;
    PGconn *conn;                           /* NULL: not connected */
    pg_row *rows;                           /* the batch's rows, by key */
    pg_rx *rxs;                             /* the batch's reactions, by key */
    uint64_t changes_keep, changes_keep_ms; /* st_options' (TRIM) */
    bool rx_lost;  /* a reaction's counts could not be kept (no memory): the batch fails */
    pg_msg *msgs;  /* the batch's new messages */
    pg_times seen; /* the batch's last_seen moves (uids borrowed from their ops) */
    pg_times nbf;  /* ... and not-before moves (store.h, Revocation), in seconds */
    bool in_tx;    /* the batch's transaction is open on conn */
    bool fast;     /* the batch took its rows from the cache (store_pg_cache.c) */
    pg_row *cache; /* groups and memberships as this connection last saw them, by key */
    size_t n_cache;
    size_t n_msgs, cap_msgs;
    uint64_t probe_n;     /* idle probes, for the slower refreshes */
    uint64_t origin;      /* random per open: names this store's announcements */
    pg_announce announce; /* the batch's, made at commit */
    pg_announce log;      /* the same changes for the change log (a hint a group for its
                           * messages), written in the batch's transaction */
    uint64_t prune_at;    /* monotonic ms: the next delete of old change log rows */
    uint64_t size_at;     /* monotonic ms: the next read of the database's size, under load */
    /* Payloads of batches that committed but whose announcement did not go (the
     * connection was lost between the two, or the announcing transaction failed): they
     * go first with the next announcement (the next batch's, or the idle probe's). A
     * listener takes one twice without harm: a message it has is dropped, a membership
     * or an ack it holds is unchanged. */
    pg_buf *late;
    size_t n_late, cap_late;
    size_t late_sent;                  /* of those, how many the announcement under way carries */
    bool owe_resync;                   /* a batch's outcome was lost with its announcement: the
                                        * next one starts with an 'r' (the listeners catch up
                                        * from the change log) */
    bool resync_sent;                  /* the announcement under way carries it */
    unsigned drop_announces;           /* tests only: announcements to lose after their commit */
    atomic_uint_fast64_t late_total;   /* batches whose announcement missed their commit */
    atomic_uint_fast64_t late_dropped; /* late payloads given up (LATE_MAX, memory) */
    st_op *writes;                     /* the batch's ops, from begin to commit (its signouts) */
    atomic_uint_fast64_t announced, hints;
    pg_feed *feed; /* the listener (NULL: not listening) */
    atomic_bool connected;
    atomic_uint_fast64_t reconnects;
    atomic_uint_fast64_t disk_bytes;
    /* Shards (store_pg_fence.c): this database is a shard, and the slots its last GW002
     * named as fenced, believed until fenced_until_ms (monotonic; 0: none). */
    bool slots;
    uint8_t fenced[ST_SLOTS / 8];
    uint64_t fenced_until_ms;
} pg;

/* ---- shards: the fences of slot moves (store_pg_fence.c) ----------------------------- */

/* A batch begins: what the last GW002 named is forgotten once it is a few seconds old (the
 * same answer then holds from begin to commit: the rows read and the ops applied agree). */
void pg_fence_expire(pg *p);
/* st_backend.refuses: is op's slot one the last GW002 named? Neither round trip 1 nor the
 * cache's rows take such an op's rows: a fenced group is not locked by a batch that leaves
 * it out (a move deletes its rows under the same locks). */
bool pg_fence_refuses(void *be, const st_op *op);
/* A sharded store's batch: gw.fenced over the slots of the batch's ops (but those refused),
 * its first statement (counted in *n_stmts). ST_OK at once when not sharded. */
int pg_fence_send(pg *p, int *n_stmts);
/* The same for one transaction of its own: gid's slot, or (gid NULL) every slot whose move
 * is under way (an erasure reaches every group of a user). */
int pg_fence_send_one(pg *p, const st_id *gid, int *n_stmts);
/* A failed statement: when it is GW002, its slots are learned (refused for a while). */
void pg_fence_learn(pg *p, const PGresult *r);

/* ---- connection and schema (store_pg_schema.c) -------------------------------------- */

/* Parses the URL into p's parameters; refuses a malformed one and one with a password.
 * 0 or ST_EINVAL with why. */
int pg_parse_url(pg *p, const char *url, char *why, size_t why_len);
/* Connects, creates or checks the schema, prepares the statements. 0, ST_EIO (cannot
 * reach or use the database now), ST_EINVAL (its schema is newer: never retried as is). */
int pg_connect(pg *p, char *why, size_t why_len);
void pg_disconnect(pg *p);

/* ---- talking in pipeline mode (store_pg_wire.c) ------------------------------------- */

/* Statements, prepared at connect. */
enum pg_stmt {
    PG_LOCK_GROUPS,
    PG_READ_ROWS,
    PG_EXPECT,
    PG_UPD_GROUPS,
    PG_INS_GROUPS,
    PG_INS_MEMBERS,
    PG_UPD_MEMBERS,
    PG_DEL_MEMBERS,
    PG_INS_SENDS,
    PG_INS_MSGS,
    PG_PAGE_AFTER,
    PG_PAGE_BEFORE,
    PG_USER_GROUPS,
    PG_GROUP,
    PG_MEMBERS,
    PG_NOTIFY,
    PG_COUNT,
    PG_SIZE,
    PG_RECOVERY,
    PG_BEGIN,
    PG_COMMIT,
    PG_ROLLBACK,
    PG_NOTIFY_AFTER,
    PG_LOG,
    PG_PRUNE,
    PG_PRUNE_TELLS,
    PG_TELL_CLAIM,
    PG_TELL_SENT,
    PG_TELL_ADOPT,
    PG_SWEPT,
    PG_UNSWEPT,
    PG_UPS_SEEN,
    PG_READ_SEEN,
    PG_UPS_NBF,
    PG_SIGNAL,
    PG_READ_MSGS,
    PG_UPD_MSGS,
    PG_ERASE_LOCK,
    PG_ERASE,
    PG_DROP_LOCK,
    PG_DROP_GROUP,
    PG_RETAIN,
    PG_TRIM_READ,
    PG_TRIM,
    PG_CHANGES,
    PG_DEL_RX_MSGS,
    PG_READ_RX,
    PG_INS_RX,
    PG_DEL_RX,
    PG_FENCED,
    PG_N_STMTS,
};
extern const char *const pg_stmt_sql[PG_N_STMTS];
extern const char *const pg_stmt_name[PG_N_STMTS];

/* Queues a prepared statement with up to 4 binary parameters (NULL bufs end the list). */
int pg_send(pg *p, enum pg_stmt st, pg_buf *const *params, int n);
/* Ends the round trip (Sync) and sends it all. 0 or ST_EIO. */
int pg_sync(pg *p, char *why, size_t why_len);
/* The next statement's result (the caller PQclears it), having taken the NULL that ends
 * it; NULL when the connection failed or timed out (why says so). */
PGresult *pg_result(pg *p, char *why, size_t why_len);
/* Takes the Sync's result. 0 or ST_EIO. */
int pg_end(pg *p, char *why, size_t why_len);
/* Sends st with a[0..n) (n at most 8) as its parameters and frees them; counts the
 * statement in *n_stmts (NULL: not counted) when it went. 0, ST_ENOMEM or ST_EIO. */
int pg_send_arrays(pg *p, enum pg_stmt st, pg_buf *a, int n, int *n_stmts);
/* Ends a round trip of n statements queued with one Sync: sends it, takes their n results
 * and the Sync's. *ok: each was COMMAND_OK or TUPLES_OK (set once the Sync went); the
 * first that was not writes its error to why as `what` says (NULL: why is left alone);
 * *kept: result `keep` (-1: none; the caller PQclears it), NULL otherwise. 0, or ST_EIO
 * when the connection failed. */
int pg_round_trip(pg *p, int n, int keep, PGresult **kept, bool *ok, const char *what, char *why,
                  size_t why_len);

/* Did a failed statement lose to another writer (a unique key, a deadlock, a
 * serialization failure): worth applying the batch again? */
bool pg_retryable(const PGresult *r);
/* why: the statement's error, or the connection's. */
void pg_why(pg *p, const PGresult *r, const char *what, char *why, size_t why_len);

/* Binary parameters: arrays of text, int8 or bytea, and scalars. */
void pg_buf_put(pg_buf *b, const void *p, size_t n);
void pg_buf_reset(pg_buf *b);
void pg_buf_free(pg_buf *b);
void pg_arr_begin(pg_buf *b, unsigned elem_oid, size_t n);
void pg_arr_bytes(pg_buf *b, const void *p, size_t n);
void pg_arr_int8(pg_buf *b, uint64_t v);
void pg_text(pg_buf *b, const void *p, size_t n);
void pg_int8(pg_buf *b, uint64_t v);
/* Result fields in binary format. */
uint64_t pg_get_int8(const PGresult *r, int row, int col);
st_id pg_get_id(const PGresult *r, int row, int col);

#define PG_OID_BYTEA 17
#define PG_OID_INT8 20
#define PG_OID_TEXT 25

/* ---- the batch's rows (store_pg_rows.c) and the fast path (store_pg_cache.c) ------------ */

pg_row *pg_row_find(pg *p, char kind, st_id a, st_id b);
/* The row for (kind, a, b), added (not existing, not present) if new. NULL: no memory. */
pg_row *pg_row_want(pg *p, char kind, st_id a, st_id b);
/* qsort order of pg_row pointers: by key (writes in one lock order across writers). */
int pg_row_by_key(const void *x, const void *y);
/* The batch's rows of kind that take(r, arg) picks, in key order (the statements' arrays:
 * one lock order): a malloc'd array of *n (the caller frees it); NULL with *n 0: none;
 * NULL with *n set: no memory. Inline, so that each caller's take is a direct call. */
static inline pg_row **pg_rows_sorted(pg *p, char kind, bool (*take)(const pg_row *r, int arg),
                                      int arg, size_t *n)
{
    *n = 0;
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp)
        *n += r->kind == kind && take(r, arg);
    if (!*n)
        return NULL;
    pg_row **rows = malloc(*n * sizeof(*rows));
    if (!rows)
        return NULL;
    size_t k = 0;
    HASH_ITER (hh, p->rows, r, tmp)
        if (r->kind == kind && take(r, arg))
            rows[k++] = r;
    qsort(rows, *n, sizeof(*rows), pg_row_by_key);
    return rows;
}

/* A batch of appends whose groups and memberships are all cached takes its rows from
 * the cache (no round trip): true then, the rows filled. */
bool pg_cache_fill(pg *p, st_op *writes);
/* Queues the statement that checks, in the batch's transaction, what the cache said:
 * the groups' last_mid (locking them, in key order) and the memberships. */
int pg_cache_send_check(pg *p, int *n_stmts);
/* After a commit: the batch's groups and memberships, as they are now. */
void pg_cache_keep(pg *p);
/* The check failed, or a key collided: the cache was wrong about this batch's groups;
 * they go the slow way for a while (another writer is busy there). */
void pg_cache_stale(pg *p);
void pg_cache_clear(pg *p);

/* ---- the change feed: its format (store_pg_events.c), its listener (store_pg_feed.c) */

/* Starts a batch's announcement (dropping the last one's). */
void pg_announce_reset(pg_announce *a, uint64_t origin);
void pg_announce_free(pg_announce *a);
/* kind 'j' (joined, with ack), 'a' (ack moved), 'v' (read moved; ack: the read) or 'l'
 * (left; ack unused). */
void pg_announce_member(pg_announce *a, char kind, st_id gid, st_id uid, uint64_t ack);
/* A membership ended; cseq: the group's deletion's (0: none, a plain leave). */
void pg_announce_leave(pg_announce *a, st_id gid, st_id uid, uint64_t cseq);
/* A reaction set (on) or cleared, the key's count after it and its change's cseq. */
void pg_announce_react(pg_announce *a, st_id gid, uint64_t mid, st_id uid, st_id key, bool on,
                       uint64_t count, uint64_t cseq);
/* gid's last cseq moved to cseq by changes not told one by one (erasure, retention). */
void pg_announce_changed(pg_announce *a, st_id gid, uint64_t cseq);
/* uid's sessions end on every gateway. */
void pg_announce_signout(pg_announce *a, st_id uid);
void pg_announce_msg(pg_announce *a, st_id gid, uint64_t mid, uint64_t ts, const void *rec,
                     size_t n);
/* For the change log: the batch stored gid's messages lo..hi (the listener reads them;
 * the unread webhook's READ_UNSWEPT finds them). */
void pg_announce_hint(pg_announce *a, st_id gid, uint64_t lo, uint64_t hi);
/* Queues the insert of the change log's row(s) of the batch (log's payloads), in the
 * batch's transaction, as its last statement. */
int pg_log_send(pg *p, pg_announce *log, int *n_stmts);
/* The payloads an announcement would carry now: a's, p's late ones, the resync owed. */
size_t pg_announce_pending(pg *p, pg_announce *a);
/* Queues one pg_notify of p's late payloads and then every payload of a, in order: in
 * the batch's transaction, or (after) in one of its own that follows its COMMIT. */
int pg_announce_send(pg *p, pg_announce *a, int *n_stmts, bool after);
/* After the pg_notify's outcome: sent, the late payloads it carried are dropped; not
 * sent but its batch committed, a's payloads join them (the oldest dropped past a bound);
 * not committed, the late ones wait on. */
void pg_announce_done(pg *p, pg_announce *a, bool committed, bool sent);
/* Reads one payload into at most max changes (records decoded into dec, which has room
 * for len bytes). 0, 1 (the store's own: nothing read) or ST_EINVAL (malformed). */
int pg_announce_parse(const char *payload, size_t len, uint64_t own_origin, st_change *out,
                      size_t max, unsigned char *dec, size_t *n_out);

/* Starts the listener on a connection of its own (its thread); NULL: no memory. */
pg_feed *pg_feed_start(pg *p, const st_options *o);
/* Stops and joins it. NULL is a no-op. */
void pg_feed_stop(pg_feed *f);
void pg_feed_figures(pg_feed *f, st_stats *out);

/* ---- later versions of messages (store_pg_edit.c) ------------------------------------ */

/* The key of a batch's message row ('x'): gid, and the mid's 8 bytes (in buf). */
st_id pg_msg_key(uint64_t mid, char buf[8]);
/* Round trip 1: queues the read of the batch's message rows (none: nothing queued, *sent
 * false). */
int pg_msgs_send_read(pg *p, bool *sent);
/* ... and takes its answer into the rows. 0, ST_ENOMEM or a failure (fail_tx's). */
int pg_msgs_take(pg *p, PGresult *r);
int pg_get_msg(void *be, st_id gid, uint64_t mid, st_msg_row *m);
void pg_put_version(void *be, st_id gid, uint64_t mid, const st_msg_row *m);
/* Round trip 2: queues the update of the versions the batch made (none: nothing). */
int pg_versions_send(pg *p, int *n_stmts);
/* The versions into the announcement (with their records where they fit) and the change
 * log (never a record: a body recalled must not stay in the log). */
void pg_versions_announce(pg *p, pg_announce *a, pg_announce *log);
/* A version's line (store_pg_events.c): 'e' with its record when it fits, else 'E'. */
void pg_announce_version(pg_announce *a, st_id gid, uint64_t mid, const st_msg_row *m,
                         bool with_record);

/* ---- reactions (store_pg_react.c) --------------------------------------------------- */

/* The batch's reaction (gid, mid, uid, key), added (not existing) if new. NULL: no memory. */
pg_rx *pg_rx_want(pg *p, st_id gid, uint64_t mid, st_id uid, st_id key);
/* Round trip 1: queues the read of the batch's reactions (none: nothing, *sent false). */
int pg_rx_send_read(pg *p, bool *sent);
int pg_rx_take(pg *p, PGresult *r);
/* Round trip 2: the reactions set and cleared, and those of messages recalled. */
int pg_rx_send_writes(pg *p, int *n_stmts);
/* The batch's reaction changes into the announcement and the change log ('k' lines). */
void pg_rx_announce(pg *p, pg_announce *a, pg_announce *log);
void pg_rx_clear(pg *p);
/* A message's reactions as the statements give them ("COUNT MINE KEY" lines, RX_SQL) into
 * out (keys pointing into s). The number read; at most max. */
size_t pg_rx_parse(const char *s, size_t n, st_reaction *out, size_t max);
/* A message row's counts as read (text in that format). False: no memory. */
bool pg_msg_set_counts(pg_row *x, const char *text, size_t n);
/* The backend's functions (store_internal.h). */
int pg_get_reaction(void *be, st_id gid, uint64_t mid, st_id uid, st_id key);
void pg_put_react(void *be, st_id gid, uint64_t mid, const st_msg_row *m, st_id uid, st_id key,
                  bool on);
void pg_put_log(void *be, st_id gid, uint64_t mid, uint64_t old_cseq, uint64_t cseq, uint64_t now);

/* ---- reads (store_pg_read.c) --------------------------------------------------------- */

int pg_read(void *be, st_op *reads, char *why, size_t why_len);

/* ---- the unread webhook's bookkeeping (store_pg_unread.c) ----------------------------- */

int pg_unread(void *be, st_op *ops, uint64_t now, char *why, size_t why_len);

/* ---- a person's erasure (store_pg_erase.c) --------------------------------------------- */

/* ST_OP_ERASE_USER in a transaction of its own, then announced. Sets op->result; returns
 * ST_EIO when the connection failed (the store is in trouble), else ST_OK. */
int pg_erase_user(pg *p, st_op *op, uint64_t now, char *why, size_t why_len);
/* ST_OP_DELETE_GROUP the same way. */
int pg_delete_group(pg *p, st_op *op, char *why, size_t why_len);
/* ST_OP_RETAIN and ST_OP_TRIM (store_pg_trim.c), each in round trips of its own: ST_OK
 * (the op's result says how it went) or ST_EIO (the connection failed). */
int pg_retain(pg *p, st_op *op, char *why, size_t why_len);
int pg_trim(pg *p, st_op *op, uint64_t now, char *why, size_t why_len);

#endif
