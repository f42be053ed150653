/*
 * The store's core, as its backends see it (store/core/): the face of the core folder.
 *
 * Owns: the table of operations a backend provides (st_backend), the rows the meaning of
 * the writes reads and writes through it, the builders of what reads answer (pages, group
 * and member lists, the unread webhook's lists), the retention rules, and the helpers both
 * backends share once (ids and their byte order, big-endian numbers, the clocks).
 * Never calls: a backend (rocks/, pg/) other than through the st_backend it is given, nor
 * the top of the store (store_open.c). A backend includes store.h, this header and its own
 * folder's; never store_internal.h (the core's private state) nor another backend's.
 *
 * A backend owns its handles and how rows are read and written: RocksDB (rocks/) or
 * PostgreSQL (pg/). It is called on the store thread only, except `read` when
 * `inline_reads` is set (then from any thread, concurrently).
 */
#ifndef GW_STORE_BACKEND_H
#define GW_STORE_BACKEND_H

#include "store.h"

#include <stdlib.h>
#include <string.h>

/* ---- rows, as the meaning of the writes sees them ------------------------------------ */

typedef struct st_group_row {
    uint64_t last_mid;
    uint64_t created_ms;
    uint64_t first_mid;     /* the horizon (0 read as 1); PostgreSQL's batches: as read, and
                             * never written by them (a TRIM moves it) */
    st_retain retain;       /* the group's own (RocksDB; PostgreSQL's batches leave it) */
    uint64_t last_cseq;     /* Changes (store.h): the group's last cseq (0: none yet); the core
                             * moves it by one for each change it applies (EDIT, REACT) */
    uint64_t changes_first; /* the change log is complete after changes_first - 1 (0 read
                             * as 1); only a TRIM moves it */
} st_group_row;

/* ---- retention (store_retain.c), the rules once for both backends ---------------------- */

/* Does the rule need the first young message (an age limit), the lowest ack? */
bool st_retain_by_age(const st_retain *eff);
bool st_retain_by_acks(const st_retain *eff);
/* The horizon the rule asks for, at most ST_TRIM_STEP above first_mid. young: the first
 * mid at or above first_mid whose message is younger than the age limit (last_mid + 1:
 * none; only read when st_retain_by_age); min_ack: the lowest ack of a member (only read
 * when st_retain_by_acks; last_mid when there is no member). */
uint64_t st_retain_horizon(const st_retain *eff, uint64_t first_mid, uint64_t last_mid,
                           uint64_t young, uint64_t min_ack);

typedef struct st_member_row {
    uint64_t ack;
    uint64_t joined_ms;
    uint64_t read; /* when has_read: the member has sent a read */
    bool has_read;
} st_member_row;

typedef struct st_send_row {
    uint64_t mid;
    uint64_t ts;
    char gid[ST_MAX_ID];
    size_t gid_n;
} st_send_row;

/* A stored message as an edit sees it (the record: only to tell a resent edit). */
typedef struct st_msg_row {
    uint64_t ts;     /* when it was sent */
    uint64_t ver;    /* 0: as sent */
    uint64_t ver_ts; /* when version ver was made */
    bool recalled;
    const void *record; /* get_msg: the backend's, valid until its next call; put_version:
                         * the op's, valid until the batch ends */
    size_t record_n;
    uint64_t cseq; /* its latest change (0: none). put_version, put_react: the new one */
    /* Its reactions' counts (mine unset), keys in byte order, at most ST_REACT_KEYS_MAX:
     * get_msg, the backend's (valid like record); put_react, the counts after the change
     * (a key whose count fell to 0 is left out), the core's, valid during the call. */
    const st_reaction *reactions;
    size_t n_reactions;
} st_msg_row;

/* What a backend's commit may answer besides 0 and ST_EIO. */
#define ST_EAGAIN                                                                                  \
    (-100)              /* another writer of the same database got in the way (a unique            \
                         * key taken, a deadlock): nothing was stored; apply again */
#define ST_EDOWN (-101) /* open: the database cannot be reached now (start failing) */
/* Shards: a write's slot is fenced on this shard (moving away, or moved while the writer's
 * map was behind): nothing of it stored; the caller gets ST_EIO and resends. */
#define ST_EMOVED (-102)

/*
 * A backend. `be` is its own state, made by open. Row reads (get_*) answer 1 (found, *r
 * filled), 0 (absent) or ST_EIO, and see the writes of the batch so far; row writes are
 * kept in the batch until commit. Functions that can fail fill why (NUL-terminated).
 */
typedef struct st_backend {
    const char *name;  /* "rocksdb", "postgres" */
    bool inline_reads; /* read() may run on any thread at once: st_submit answers ST_DONE */

    /* Opens with the options; 0, ST_EDOWN (opened, but the database is unreachable: the
     * store starts failing and recovers later), or another code (cannot run). */
    int (*open)(const st_options *o, void **be, char *why, size_t why_len);
    void (*close)(void *be);

    /* A batch of writes (linked by next_): begin, the rows, then commit or rollback. */
    int (*begin)(void *be, st_op *writes, char *why, size_t why_len);
    int (*get_group)(void *be, st_id gid, st_group_row *r);
    void (*put_group)(void *be, st_id gid, const st_group_row *r);
    int (*get_member)(void *be, st_id gid, st_id uid, st_member_row *r);
    void (*add_member)(void *be, st_id gid, st_id uid, const st_member_row *r); /* new */
    void (*put_member)(void *be, st_id gid, st_id uid, const st_member_row *r); /* update */
    void (*del_member)(void *be, st_id gid, st_id uid);
    int (*get_send)(void *be, st_id uid, st_id cid, st_send_row *r);
    void (*put_send)(void *be, st_id uid, st_id cid, const st_send_row *r);
    void (*put_msg)(void *be, st_id gid, uint64_t mid, uint64_t ts, const void *rec, size_t n);
    /* A message as stored (ST_OP_EDIT, ST_OP_REACT), and a later version of it replacing
     * it, with its cseq (r->cseq). A recalled one (r->recalled) loses its reactions, every
     * user's, in the same batch (r->reactions is then empty). */
    int (*get_msg)(void *be, st_id gid, uint64_t mid, st_msg_row *r);
    void (*put_version)(void *be, st_id gid, uint64_t mid, const st_msg_row *r);

    /* Changes and reactions (store.h). `changes`: the backend implements them (REACT and
     * READ_CHANGES, the cseqs of erasures, deletions and trims); false: those ops are
     * refused with ST_EINVAL and the three functions below are NULL. */
    bool changes;
    /* Is uid's reaction key on gid's message mid set? 1, 0 or ST_EIO. */
    int (*get_reaction)(void *be, st_id gid, uint64_t mid, st_id uid, st_id key);
    /* uid sets (on) or clears key on the message: its (gid, mid, uid, key) row comes or
     * goes, and the message takes m's cseq and counts (m: the row get_msg gave, with the
     * cseq and reactions after the change; record and version unchanged). */
    void (*put_react)(void *be, st_id gid, uint64_t mid, const st_msg_row *m, st_id uid, st_id key,
                      bool on);
    /* The change log (folding): the message's entry moves from old_cseq (0: none) to cseq,
     * made at now (ms: the age retention reads). Called after put_version or put_react in
     * the same batch. PostgreSQL, whose log is an index on the messages' cseq, may only
     * keep the time. */
    void (*put_log)(void *be, st_id gid, uint64_t mid, uint64_t old_cseq, uint64_t cseq,
                    uint64_t now);
    /* uid's last_seen moves to ms, if that is later (a blind write: the backend keeps the
     * greater). */
    void (*put_seen)(void *be, st_id uid, uint64_t ms);
    /* uid's not-before (store.h, Revocation) moves to secs, if that is later (a blind
     * write, the same way). */
    void (*put_not_before)(void *be, st_id uid, uint64_t secs);
    /* Shards (NULL: never): is this write's slot fenced by a move, as the backend last
     * learned from its database? Asked before the op is applied; a refused op is left out
     * of the batch and answered ST_EIO (the slot's writes wait for the move). A commit that
     * finds a slot of the batch fenced answers ST_EAGAIN, having learned it. */
    bool (*refuses)(void *be, const st_op *op);
    /* 0 (committed), ST_EIO (failed: the store starts failing), ST_EAGAIN. */
    int (*commit)(void *be, char *why, size_t why_len);
    void (*rollback)(void *be);

    /* Answers reads (linked by next_): each op's result and outputs. ST_EIO (with why)
     * when the backend itself failed (the database went away): the store starts
     * failing. */
    int (*read)(void *be, st_op *reads, char *why, size_t why_len);

    /* The unread webhook's bookkeeping (linked by next_; store.h): each op's result and
     * outputs, each op on its own (one failing fails no other). now: ms since the epoch.
     * ST_EIO (with why) when the backend itself failed: the store starts failing. */
    int (*unread)(void *be, st_op *ops, uint64_t now, char *why, size_t why_len);

    /* The store thread was idle for a second: can it still write? 0 or ST_EIO. */
    int (*probe)(void *be, char *why, size_t why_len);
    /* After a failure: make writes work again (reopen, reconnect). 0 or ST_EIO. */
    int (*recover)(void *be, char *why, size_t why_len);
    /* When recover is tried (store_recover.c): first this long after the failure, then
     * after twice the pause before, at most max (ms). What an attempt costs is the
     * backend's to weigh: a reopen of a database, or a connect. 0: the core's own (1 s,
     * at most 5 s). */
    uint32_t retry_first_ms;
    uint32_t retry_max_ms;
    /* Groups and messages in the store (at open, and after a recovery). */
    int (*count)(void *be, uint64_t *groups, uint64_t *messages);
    /* Figures of its own: connected, reconnects, disk_bytes. Any thread. */
    void (*figures)(void *be, st_stats *out);
    /* Where it lives, for log lines (never a password). */
    const char *(*where)(void *be);
    /* Its origin (random per open). */
    uint64_t (*origin)(void *be);
} st_backend;

/*
 * A store made of stores (store/shard/): the store.h calls that touch a store's own state,
 * answered by a router over several cores instead of by one core's queue and thread. The
 * core's public functions hand a router store's calls to it; the rest of store.h (the
 * blocking helpers) is built on st_submit and so follows. `r` is the router's own state.
 */
typedef struct st_router {
    int (*submit)(void *r, st_op *op); /* as st_submit, after st_op_valid */
    size_t (*pending)(void *r);
    bool (*writable)(void *r);
    void (*write_error)(void *r, char *buf, size_t len);
    void (*stats)(void *r, st_stats *out);
    const char *(*name)(void *r);
    const char *(*where)(void *r);
    uint64_t (*origin)(void *r);
    void (*close)(void *r); /* frees r */
} st_router;

/* A store whose calls go to the router (r: its state, owned by the store from here on, and
 * closed with it). Never fails but for memory (ST_ENOMEM; r is then the caller's). */
int st_core_open_router(const st_router *ops, void *r, st_store **out);

/* Is op well formed (st_submit's check, ST_EINVAL when not)? For a router, which checks
 * before it splits an op. */
bool st_op_valid(const st_op *op);
/* Clears op's outputs as st_submit does on taking it (a router, before it splits it). */
void st_op_reset(st_op *op);

/* The top of the store (store_open.c) opens the core over the backend it chose: st_open's
 * work but the choice (store.h). Never called by a backend. */
int st_core_open(const st_backend *ops, const st_options *o, st_store **out, char *errmsg,
                 size_t errmsg_len);

/* ---- pages, group lists and member lists, built by the backends' reads (store_page.c) */

/* The mids [lo, hi] a page covers, from its direction, start, limit and the group's
 * horizon and last mid (mids are dense above the horizon, so the range is known before
 * reading). False: empty. *gone: the horizon when the range asked reached below it (the
 * page's gone_before), else 0. */
bool st_page_range(enum st_dir dir, uint64_t from, size_t limit, uint64_t first_mid,
                   uint64_t last_mid, uint64_t *lo, uint64_t *hi, uint64_t *gone);
st_page *st_page_new(uint64_t first_mid, uint64_t last_mid, uint64_t gone_before);
/* Room for n messages up front (a read that knows its range); ST_ENOMEM. */
int st_page_reserve(st_page *p, size_t n);
/* Adds one message (its record copied); in reading order. ST_ENOMEM. */
int st_page_add(st_page *p, const st_msg *m);
/* The page is complete: read newest first (ST_BEFORE) is turned around, and more set. */
void st_page_finish(st_page *p, bool reversed, bool more);
/* Record bytes added so far. */
size_t st_page_bytes(const st_page *p);
/* Changes (store.h): the group's last cseq in the page's snapshot (every page); a changes
 * page's upto and changes_gone (st_page_upto, st_page_changes_gone). st_page_add copies
 * m's reactions (keys and mine) with the record. */
void st_page_set_last_cseq(st_page *p, uint64_t last_cseq);
void st_page_set_changes(st_page *p, uint64_t upto, uint64_t changes_gone);
/* The clamp of a READ_CHANGES limit: as pages', at most ST_CHANGES_LIMIT_MAX. */
#define ST_CHANGES_LIMIT_MAX 500u

st_groups *st_groups_new(void);
/* A member's row as reads find it: read is the backend's (has_read false: none). */
int st_groups_add(st_groups *g, st_id gid, uint64_t first_mid, uint64_t last_mid, uint64_t ack,
                  uint64_t read, bool has_read);
/* The last group added gets the group's last_cseq (Changes). */
void st_groups_set_last_cseq(st_groups *g, uint64_t last_cseq);
/* Where unread counting starts for a cursor: the cursor, or just below the horizon when
 * the cursor is below it (what is gone is not unread). */
static inline uint64_t st_seen_from(uint64_t cursor, uint64_t first_mid)
{
    return first_mid > cursor + 1 ? first_mid - 1 : cursor;
}

/* The most members a page of `limit` holds: limit, capped at ST_MEMBERS_MAX. */
size_t st_members_limit(size_t limit);
/* A page of at most st_members_limit(limit) members, filled in any order: it keeps the
 * smallest uids offered (byte order), and one more to tell `more`. NULL: no memory. */
st_members *st_members_new(uint64_t last_mid, size_t limit);
/* Offers a member (the uid is copied). 1: kept for now; 0: not kept, as the page and its
 * one more hold smaller uids already (so will every greater uid be); ST_ENOMEM. */
int st_members_offer(st_members *m, st_id uid, uint64_t ack, uint64_t read, bool has_read);
/* The page is complete: in uid order, cut to its limit, more set from what was cut. */
void st_members_finish(st_members *m);

/* The unread webhook's lists (store_list.c). */
st_list *st_list_new(void);
/* An item: gid (may be empty), lo, hi, mark and text (copied; may be empty). ST_ENOMEM. */
int st_list_add(st_list *l, st_id gid, uint64_t lo, uint64_t hi, uint64_t mark, const void *text,
                size_t text_n);
/* The item of gid gets hi (the greater, when there is one), or an item is added for it
 * (Changes: an op's `changed`, one item per group). ST_ENOMEM. */
int st_list_note_hi(st_list *l, st_id gid, uint64_t hi);
void st_list_set_more(st_list *l, bool more);
void st_list_set_after(st_list *l, st_id gid); /* copied */
/* The most items a list of `limit` holds: limit, capped at ST_LIST_MAX. */
size_t st_list_limit(size_t limit);

/* How long the lines of batches of messages are kept (READ_UNSWEPT reads them; on
 * PostgreSQL they are the change log's rows, which its listeners read too), and tells. */
#define ST_LOG_KEEP_MS (10 * 60 * 1000)
#define ST_TELL_KEEP_MS (60 * 60 * 1000)

/* A read failed: nothing half-made goes back. Frees what the read built so far (the
 * op's page, groups or members) and clears them. */
void st_read_discard(st_op *op);

/* ---- small shared helpers (store_util.c) --------------------------------------------- */

bool st_id_ok(st_id id);
/* The changes' retention in force (store.h, st_options.changes_keep): how many of a
 * group's latest changes a TRIM keeps (ST_KEEP_ALL: all). */
static inline uint64_t st_changes_keep(uint64_t opt)
{
    return opt ? opt : ST_CHANGES_KEEP;
}
/* Where a count-kept change log begins: changes_first after a TRIM keeping `keep` of
 * last_cseq's changes (never below first: it only moves up). */
static inline uint64_t st_changes_first_for(uint64_t first, uint64_t last_cseq, uint64_t keep)
{
    if (first < 1)
        first = 1;
    if (keep == ST_KEEP_ALL || last_cseq < keep)
        return first;
    uint64_t want = last_cseq - keep + 1;
    return want > first ? want : first;
}
/* Byte order of ids (<0, 0, >0): memcmp, and an id before the longer ones it begins. */
int st_id_cmp(st_id a, st_id b);
void st_put_be64(char *p, uint64_t v);
uint64_t st_get_be64(const char *p);
uint64_t st_now_ms(void);  /* wall clock, for timestamps */
uint64_t st_mono_ms(void); /* monotonic, for durations */
uint64_t st_mono_us(void);

/* ---- growing arrays, for the core and both backends ---------------------------------- */

/* Room for `need` elements of `size` bytes in a growing array of *cap; at: the address of
 * the array's pointer (&p->items). When it does not hold them, the array moves to room
 * for *cap doubled (first when 0) until it does, *cap set. false when memory ran out
 * (the array kept as it was, *cap too). Inline: the usual case is the one comparison. */
static inline bool st_room(void *at, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap * 2 : first;
    while (c < need)
        c *= 2;
    void *v;
    memcpy(&v, at, sizeof(v));
    if (!(v = realloc(v, c * size)))
        return false;
    memcpy(at, &v, sizeof(v));
    *cap = c;
    return true;
}

#endif
