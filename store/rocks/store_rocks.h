/*
 * Private to the RocksDB backend (store_rocks*.c): its handles and the key and value
 * layouts shared by its writes (store_rocks.c) and its reads (store_rocks_read.c).
 */
#ifndef GW_STORE_ROCKS_H
#define GW_STORE_ROCKS_H

#include "st_rocks.h"
#include "store_backend.h"

#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <sys/types.h>

/* Column families, in the order they are opened. */
enum rk_cf {
    RK_CF_DEFAULT = 0, /* the probe's row only; RocksDB requires it */
    RK_CF_GROUPS,      /* gid -> last_mid, created */
    RK_CF_MEMBERS,     /* gid | uid -> ack, joined[, read] */
    RK_CF_USER_GROUPS, /* uid | gid -> (empty) */
    RK_CF_MSGS,        /* gid | be64(mid) -> ts, record */
    RK_CF_SENDS,       /* uid | cid -> mid, ts, gid */
    /* The unread webhook's (store_rocks_unread.c): */
    RK_CF_UNREAD_LOG,   /* be64(at_ms) | gid | be64(hi) -> be64(lo): a batch's messages */
    RK_CF_UNREAD_SWEPT, /* gid -> be64(mid): looked at up to there */
    RK_CF_UNREAD_TELLS, /* id -> be64(owner), be64(made_ms), sent (1 byte), the event */
    RK_CF_USERS,        /* uid -> be64(last_seen) */
    RK_CF_REVOKED,      /* uid -> be64(not_before): kept for good (store.h, Revocation); a
                         * folder of an older release gets it, empty, at its first open */
    /* Changes and reactions (store.h, Changes; store_rocks_change.c). A folder of an
     * older release gets them, empty, at its first open, like revoked. */
    RK_CF_CHANGES,        /* gid | be64(cseq) -> be64(mid), be64(at_ms): the change log, one
                           * entry per changed message (its latest: folding) */
    RK_CF_REACTIONS,      /* gid | be64(mid) | len key | uid -> (empty): who set what, by
                           * message (a recall, a trim, a deletion find them here) */
    RK_CF_USER_REACTIONS, /* uid | gid | be64(mid) | len key -> (empty): the same by user
                           * (idempotency, the reader's `mine`, an erasure) */
    RK_CF_COUNT,
};

/* A key (layouts below, store_rocks_keys.c). */
#define RK_KEY_MAX (2 * (1 + ST_MAX_ID) + 8 + 1 + ST_REACT_KEY_MAX)

typedef struct rk_key {
    char b[RK_KEY_MAX];
    size_t n;
} rk_key;

/* A line of the unread log being made: the batch's messages lo..hi of one group. */
typedef struct rk_log_line {
    char gid[ST_MAX_ID];
    size_t gid_n;
    uint64_t lo, hi, at_ms;
} rk_log_line;

/* One open RocksDB handle and its column families (db NULL: not open). */
typedef struct rk_db {
    rocksdb_t *db;
    rocksdb_column_family_handle_t *cf[RK_CF_COUNT];
} rk_db;

typedef struct rk {
    rk_db rw; /* the store thread's handle; only that thread uses or changes it */
    rk_db ro; /* read-only handle that serves reads while rw is reopened */
    /* The handle readers use (&rw, &ro, or NULL when neither is open). Readers hold
     * rd_lock shared for a whole read; the store thread takes it exclusively only to
     * switch rd, and closes a handle only once no reader can be using it. */
    rk_db *rd;
    pthread_rwlock_t rd_lock;
    rocksdb_options_t *opts;
    rocksdb_cache_t *cache;
    rocksdb_block_based_table_options_t *table;
    rocksdb_writeoptions_t *wopts;         /* sync per options */
    rocksdb_readoptions_t *ropts;          /* plain reads on the store thread */
    rocksdb_writebatch_wi_t *wb;           /* the batch being applied (reads see it first) */
    char *msg_val;                         /* the value get_msg read last (its record is lent) */
    st_reaction msg_rx[ST_REACT_KEYS_MAX]; /* ... and its reactions (keys lent the same) */
    uint64_t changes_keep;                 /* st_options.changes_keep, as in force */
    uint64_t changes_keep_ms;              /* st_options.changes_keep_ms (0: no age) */
    struct {                               /* recalled bodies off the disk (store_rocks_scrub.c) */
        rk_key batch_lo, batch_hi;         /* the batch's recalled messages' keys */
        bool batch_any;
        rk_key lo, hi; /* the committed ones' since the last scrub */
        bool due;
        uint64_t at; /* monotonic ms: not before */
    } scrub;
    uint64_t scrubs;                   /* scrubs made (figures) */
    struct {                           /* retention (store_rocks_trim.c) */
        rocksdb_options_t *sends_opts; /* the sends family's: r->opts and the filter */
        rocksdb_compactionfilter_t *filter;
        _Atomic(rocksdb_t *) db; /* what the filter reads horizons from */
        _Atomic(rocksdb_column_family_handle_t *) groups;
        uint64_t compact_at; /* monotonic ms: the next compaction hint, when trims deleted */
        rk_key *ranges;      /* the ranges trims deleted since the last hint: lo, hi pairs */
        size_t n_ranges, cap_ranges; /* (pairs) */
        bool all;                    /* ... too many to list: the whole family is hinted */
    } trim;
    bool unreadable; /* a read of the batch failed: refuse it */
    char *path;
    /* The unread webhook's (store_rocks_unread.c). */
    bool unread_log;    /* keep the log of batches of messages (st_options.unread_log) */
    rk_log_line *lines; /* the batch's: one a run of messages of one group */
    size_t n_lines, cap_lines;
    uint64_t origin;            /* random per open: the owner of the tells this process claims */
    bool adopted_all;           /* no tell of an earlier process is left to adopt */
    uint64_t opened_ms;         /* when this process opened the folder (ms since the epoch) */
    uint64_t prune_at;          /* monotonic ms: the next prune of the log and the tells */
    char prune_from[ST_MAX_ID]; /* the tell key where the tells' prune goes on */
    size_t prune_from_n;        /* (0: from the first) */
    dev_t dev;                  /* the folder as opened: a folder removed or replaced is noticed */
    ino_t ino;
    atomic_uint_fast64_t reopens;
} rk;

/* Reads (store_rocks_read.c): any thread, concurrently. */
int rk_read(void *be, st_op *reads, char *why, size_t why_len);

/* The unread webhook's (store_rocks_unread.c): a message of the batch, for its log line;
 * the batch's lines into its write; the ops (st_backend.unread). */
void rk_unread_msg(rk *r, st_id gid, uint64_t mid, uint64_t ts);
void rk_unread_lines(rk *r);
/* The unread webhook's ops (claim, sent, adopt, swept, unswept, signal) into the batch:
 * ST_EINVAL for any other kind (store_rocks.c's rk_unread runs the rest). */
int rk_unread_op(rk *r, st_op *op, uint64_t now);
/* Prunes old tells and lines, at most every PRUNE_EVERY_MS. */
void rk_unread_prune(rk *r, uint64_t now);
/* A database made before the marks were: every group is marked swept up to its last
 * message (what was stored before is not looked at again). 0 or ST_EIO. */
int rk_unread_mark_all(rk *r, char *why, size_t why_len);
/* A synced write of the batch (writes nothing when it is empty). 0 or ST_EIO. */
/* Is the folder still the one opened? false with why if it was removed or replaced. */
bool rk_folder_same(rk *r, char *why, size_t why_len);
int rk_write(rk *r, char *why, size_t why_len);

/* A message as stored, and a later version of it (st_backend.get_msg, put_version). */
int rk_get_msg(void *be, st_id gid, uint64_t mid, st_msg_row *row);
/* The message's value as the row says (header, cseq and counts, record) into the batch. */
void rk_put_msg_row(rk *r, st_id gid, uint64_t mid, const st_msg_row *m);
/* Changes and reactions (store_rocks_change.c): st_backend's get_reaction, put_react,
 * put_log; a message's reactions out of the batch (a recall); the group's next cseq taken
 * in the batch (1 or ST_EIO; 0: no such group), *cseq the new one. */
int rk_get_reaction(void *be, st_id gid, uint64_t mid, st_id uid, st_id key);
void rk_put_react(void *be, st_id gid, uint64_t mid, const st_msg_row *m, st_id uid, st_id key,
                  bool on);
void rk_put_log(void *be, st_id gid, uint64_t mid, uint64_t old_cseq, uint64_t cseq, uint64_t now);
int rk_drop_reactions(rk *r, st_id gid, uint64_t mid);
int rk_take_cseq(rk *r, st_id gid, uint64_t *cseq);
/* An erased user's reactions (ST_OP_ERASE_USER): each goes, and each message it was on
 * takes a cseq (touched: the groups whose last_cseq moved, into op->changed). */
int rk_erase_reactions(rk *r, st_op *op, uint64_t now);
/* A deleted group's change log and reactions, into the batch. */
int rk_drop_group_changes(rk *r, st_id gid);
/* Notes that gid's last_cseq is now cseq in op->changed (one item per group). Here, not
 * in store_rocks_change.c: trims and erasures note their changes without calling into the
 * change log's file (which calls the rows of store_rocks.c: a loop of five files). */
static inline int rk_changed(st_op *op, st_id gid, uint64_t cseq)
{
    if (!op->changed && !(op->changed = st_list_new()))
        return ST_ENOMEM;
    return st_list_note_hi(op->changed, gid, cseq);
}
/* st_backend's row operations (store_rocks_rows.c), named in the table (store_rocks.c). */
int rk_get_group(void *be, st_id gid, st_group_row *g);
int rk_get_member(void *be, st_id gid, st_id uid, st_member_row *m);
void rk_put_member(void *be, st_id gid, st_id uid, const st_member_row *m);
void rk_put_seen(void *be, st_id uid, uint64_t ms);
void rk_add_member(void *be, st_id gid, st_id uid, const st_member_row *m);
int rk_get_send(void *be, st_id uid, st_id cid, st_send_row *row);
void rk_put_send(void *be, st_id uid, st_id cid, const st_send_row *row);
void rk_put_msg(void *be, st_id gid, uint64_t mid, uint64_t ts, const void *rec, size_t n);
/* A row of cf from the batch, then the database: 1 (*v is RocksDB's: rocksdb_free it, *n
 * its length), 0 (absent, *v NULL), ST_EIO (*v NULL). Marks nothing: a caller whose
 * failed read must fail the batch sets r->unreadable. */
int rk_get_row(rk *r, enum rk_cf cf, const char *key, size_t key_n, char **v, size_t *n);
/* The group's row as the batch has it: 1, 0 (none, or not a row of ours), ST_EIO (the batch
 * not marked); and a row into the batch (st_backend.get_group is the first marking). */
int rk_group_row(rk *r, st_id gid, st_group_row *g);
void rk_put_group(void *be, st_id gid, const st_group_row *g);

/* Walks over a family's rows (store_rocks_iter.c), on the store thread:
 *   - rk_range: an iterator over cf's keys in [lo, hi), seeked to lo (hi NULL: to the end
 *     of lo's prefix, which *end holds: RocksDB keeps a pointer to a bound, not a copy,
 *     so the bound must live as long as the iterator); *ro its options;
 *   - rk_iter_end: frees it and ro (NULL: none): ST_EIO when it stopped on an error,
 *     else rc;
 *   - rk_each: fn(r, ud, key, value) for each row of the database starting with prefix;
 *   - rk_each_in_batch: fn(r, ud, key) for each such row, the batch's writes over the
 *     database's (a batch's earlier ops included; fn gets a copy of the key, so it may
 *     write into the batch).
 * Both each stop at fn's first error and answer it. */
typedef int rk_row_fn(rk *r, void *ud, const char *k, size_t kn, const char *v, size_t vn);
rocksdb_iterator_t *rk_range(rk *r, enum rk_cf cf, const rk_key *lo, const rk_key *hi,
                             rocksdb_readoptions_t **ro, rk_key *end);
int rk_iter_end(rocksdb_iterator_t *it, rocksdb_readoptions_t *ro, int rc);
int rk_each(rk *r, enum rk_cf cf, const rk_key *prefix, rk_row_fn *fn, void *ud);
int rk_each_in_batch(rk *r, enum rk_cf cf, const rk_key *prefix,
                     int (*fn)(rk *r, void *ud, const char *k, size_t kn), void *ud);
/* A membership's two rows (members and user_groups) out, in the batch (st_backend.del_member). */
void rk_del_member(void *be, st_id gid, st_id uid);
void rk_put_version(void *be, st_id gid, uint64_t mid, const st_msg_row *m);
/* uid's not-before moves to secs if later (store_internal.h, put_not_before). */
void rk_put_not_before(void *be, st_id uid, uint64_t secs);
/* ST_OP_ERASE_USER and ST_OP_DELETE_GROUP into the batch (store_rocks_erase.c). */
int rk_erase_user(rk *r, st_op *op, uint64_t now);
int rk_delete_group(rk *r, st_op *op);
/* ST_OP_RETAIN and ST_OP_TRIM, each its own synced write (store_rocks_trim.c). */
int rk_retain(rk *r, st_op *op);
int rk_trim(rk *r, st_op *op, uint64_t now, char *why, size_t why_len);
/* The (uid, cid) rows whose message is below its group's horizon are dropped when their
 * table files are compacted: the filter for the sends family's options (made once, freed
 * after the handles are closed), and the handle it looks the horizons up with (set after each open,
 * NULL before a close). */
rocksdb_compactionfilter_t *rk_sends_filter_new(rk *r);
void rk_sends_filter_db(rk *r, rk_db *d);

/* Recalled bodies off the disk (store_rocks_scrub.c): a recalled message of the batch; the
 * batch's end (committed or not); the flush and compaction, when one is due and its time
 * has come (a failed one is tried again then). 0 or ST_EIO. */
void rk_scrub_note(rk *r, st_id gid, uint64_t mid);
void rk_scrub_batch_end(rk *r, bool committed);
int rk_scrub(rk *r, char *why, size_t why_len);

/* ---- keys and values (store_rocks_keys.c) ---------------------------------------------
 * Ids are length-prefixed (one byte), numbers big-endian, so one group's messages are one
 * contiguous ordered range and a user's rows sort together. */
/* rk_key: see above. */

void rk_key_id(rk_key *k, st_id a);                  /* groups */
void rk_key_id2(rk_key *k, st_id a, st_id b);        /* members, user_groups, sends */
void rk_key_msg(rk_key *k, st_id gid, uint64_t mid); /* msgs; changes (gid, cseq) */
/* reactions: gid | be64(mid) | len key | key | len uid | uid */
void rk_key_react(rk_key *k, st_id gid, uint64_t mid, st_id key, st_id uid);
/* user_reactions: len uid | uid | len gid | gid | be64(mid) | len key | key; without the
 * key (key.n == 0) the prefix of the user's reactions on that message */
void rk_key_user_react(rk_key *k, st_id uid, st_id gid, uint64_t mid, st_id key);
/* The parts of those keys; false when k is not one. */
bool rk_react_key_parse(const char *k, size_t kn, st_id *gid, uint64_t *mid, st_id *key,
                        st_id *uid);
bool rk_user_react_key_parse(const char *k, size_t kn, st_id *uid, st_id *gid, uint64_t *mid,
                             st_id *key);
/* The second id of a two-id key (len a, len b: members, user_groups, sends); false when k
 * is not such a key. */
bool rk_key_second_id(const char *k, size_t kn, st_id *out);
/* The smallest key greater than every key starting with k (for an upper bound). Returns
 * false when there is none (all bytes 0xff). */
bool rk_key_prefix_end(const rk_key *k, rk_key *end);

/* Fixed-size values. */
#define RK_GROUP_VAL 16 /* be64 last_mid, be64 created_ms */
#define RK_GROUP_VAL_RETAIN                                                                        \
    49                       /* ... be64 first_mid, the group's st_retain: be64 messages,          \
                              * be64 ms, be64 cap, one byte until_acked */
#define RK_GROUP_VAL_CSEQ 65 /* ... be64 last_cseq, be64 changes_first (Changes) */
#define RK_GROUP_VAL_MAX RK_GROUP_VAL_CSEQ
/* A group's value (either size) into a row; false for any other size. */
bool rk_group_decode(const char *v, size_t n, st_group_row *g);
/* A row into v (RK_GROUP_VAL_MAX bytes of room): its size, the shortest that holds it (the
 * 16 bytes while the group has no horizon, retention of its own nor change; 49 without
 * a change): what an older release wrote reads as it is. */
size_t rk_group_encode(const st_group_row *g, char *v);
#define RK_MEMBER_VAL 16      /* be64 ack, be64 joined_ms: a member that never sent a read */
#define RK_MEMBER_VAL_READ 24 /* ... and be64 read: one that did */

/* A member's value into a row (16 or 24 bytes); false for any other size. */
bool rk_member_decode(const char *v, size_t n, st_member_row *m);
/* A message: be64 ts, then the record. A later version (ST_OP_EDIT) has the ts's top bit
 * set and two more numbers, be64 (ver << 1 | recalled) and be64 ver_ts, before the record:
 * a value written before versions existed reads as it is. A message that changed
 * (Changes: an edit, a recall, a reaction) has the next bit set too, and after those
 * numbers be64 cseq, one byte n and n reactions (one byte key length, the key, be64
 * count; keys in byte order), then the record: a page reads counts with the message. */
#define RK_MSG_HDR 8
#define RK_MSG_HDR_VER 24
#define RK_MSG_VERSIONED (1ull << 63)
#define RK_MSG_CHANGED (1ull << 62)
#define RK_MSG_EXT_MAX (9 + ST_REACT_KEYS_MAX * (9 + ST_REACT_KEY_MAX))
/* A message's value into m (mid not set; record borrowed from v); false: not one. Its
 * reactions go into rx (ST_REACT_KEYS_MAX of room, keys borrowed from v; NULL: not
 * wanted, m->n_reactions 0). */
bool rk_msg_decode(const char *v, size_t n, st_msg *m, st_reaction *rx);
/* A message row's header (the three numbers, and with a cseq the rest but the record)
 * into hdr (RK_MSG_HDR_VER + RK_MSG_EXT_MAX of room): its size. */
size_t rk_msg_encode_hdr(const st_msg_row *m, char *hdr);
#define RK_SEND_HDR 16 /* be64 mid, be64 ts, then the gid bytes */

#endif
