/*
 * store: the gateway's durable state, behind an API that does not expose its backend.
 *
 * Read diffusion: a group's messages are stored once, each with a dense per-group id
 * (`mid` 1, 2, 3, ... with no gaps); a member is one row holding its cumulative `ack`.
 * Two backends stand behind it: RocksDB in a local folder (the embedded default) and
 * PostgreSQL (several gateways on one database). See docs/ARCHITECTURE.md for both
 * schemas. Nothing below depends on which one runs.
 *
 * Threads. Every request is an st_op handed to st_submit(), which never blocks on disk or
 * network. One store thread takes every queued op at once: it applies the writes (append,
 * join, leave, acks) in queue order and commits them together (group commit: one synced
 * write, or one transaction), then runs the reads queued with them, then calls each op's
 * `done` on the store thread. A backend whose reads are cheap and safe from any thread
 * (RocksDB) answers a read at once on the caller's thread instead: st_submit() then
 * returns ST_DONE and does not call `done`. The *_sync helpers submit and wait; they are
 * for tools, tests and start-up, not for an event loop.
 *
 * Message bytes. The store does not know the wire format: a message is an opaque "record"
 * (the sender's encoded fields) that the store keeps verbatim next to the mid and the
 * server timestamp it assigns, so readers can forward the stored bytes without re-encoding.
 *
 * Trouble. When a write fails (a disk full or read-only, a folder removed, a database
 * unreachable or gone read-only), the store stops taking writes: every op gets ST_EIO
 * until it has recovered, and nothing is confirmed that was not committed. The store
 * thread retries with a growing pause (1 s up to 5 s), reopening or reconnecting as the
 * backend needs, and is writable again once a write can be made. Reads go on where the
 * backend can serve them (RocksDB, from a read-only handle) and get ST_EIO where it
 * cannot (PostgreSQL while the database is unreachable). A store whose database cannot be
 * reached at start opens anyway, in that failing state. It tells the caller through
 * st_options.on_event (it never prints).
 *
 * Errors are negative ST_E* codes; st_strerror() describes them.
 */
#ifndef GW_STORE_H
#define GW_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_ID 255u /* longest id the store holds (the protocol allows 64) */

enum st_err {
    ST_OK = 0,
    ST_EINVAL = -1,     /* bad argument (empty, overlong or unprintable id, NULL, zero
                         * limit) */
    ST_ENOGROUP = -2,   /* the group does not exist */
    ST_ENOTMEMBER = -3, /* the user is not a member of the group */
    ST_ECONFLICT = -4,  /* the (uid, cid) was already used for another group */
    ST_EIO = -5,        /* the backend failed, or the store is not taking writes (disk
                         * full, read-only, folder gone, database unreachable). Not
                         * confirmed, and almost always not stored; but a commit whose
                         * answer was lost may have stored it: retry an append with the
                         * same cid, which stores it at most once. */
    ST_ENOMEM = -6,     /* allocation failed */
    ST_ECLOSED = -7,    /* the store is closing and takes no more writes */
    ST_ENOMSG = -8,     /* EDIT: the group has no message with that mid */
    ST_EGONE = -9,      /* EDIT: the message was recalled: nothing of it is left to edit */
    ST_ESTALE = -10,    /* EDIT: the version asked for is not the next one (another edit
                         * came first) */
    ST_EBUSY = -11,     /* st_open: the folder is in use: another store has it open (RocksDB
                         * locks its folder to one process; errmsg names the process when
                         * it can) */
    ST_ETOOMANY = -12,  /* REACT: the message has ST_REACT_KEYS_MAX keys already and this one
                         * would be another */
};

/* st_submit's answer for a read answered at once on the caller's thread. */
#define ST_DONE 1

const char *st_strerror(int err);

/* A borrowed id: not NUL-terminated; 1..ST_MAX_ID bytes, each printable ASCII other than
 * space (0x21..0x7e): what every backend can key on as it is. */
typedef struct st_id {
    const char *p;
    size_t n;
} st_id;

/* Convenience: an st_id over a NUL-terminated string (borrowed). */
st_id st_id_str(const char *s);

/*
 * Shards. A store may be several PostgreSQL databases (each its own cluster: a Patroni pair
 * on real machines), each holding the groups of some hash slots. A group's slot is
 * st_slot_of(gid); what is a user's alone (last_seen, the not-before) lives by the slot of
 * the uid. A slot map, versioned, says which shard owns each slot; the store follows it as
 * it changes (tools/gw_slots moves slots between shards online). st_options.url names it:
 *   shards:PATH           the map in a file (one machine, tests)
 *   etcd://HOST:PORT[,HOST:PORT...]/KEY
 *                         the map as the value of KEY in etcd (v3), where Patroni's is
 * The map's text (docs/ARCHITECTURE.md, "Shards"):
 *   version N
 *   shard I URL           I = 0, 1, ...: a shard's PostgreSQL URL (multi-host allowed)
 *   slots A-B I           slots A..B belong to shard I (every slot exactly once)
 * Nothing above store.h knows of shards: ops go to their group's shard, a user's groups
 * are asked of every shard and merged, and each shard fails and recovers on its own.
 */
#define ST_SLOTS 4096u
/* A group's (or a user's) slot: FNV-1a (32 bits) of the id's bytes, modulo ST_SLOTS. */
unsigned st_slot_of(st_id id);

/* A slot map as read from where it is kept, for tools (tools/gw_slots). */
typedef struct st_slot_map st_slot_map;
/* Reads the map of a store URL (shards:PATH or etcd://...): 0, ST_EINVAL (a URL that is
 * not a map's, a malformed map: why says which line), ST_EIO (unreadable), ST_ENOMEM. */
int st_slot_map_read(const char *url, st_slot_map **out, char *why, size_t why_len);
void st_slot_map_free(st_slot_map *m); /* NULL is a no-op */
uint64_t st_slot_map_version(const st_slot_map *m);
unsigned st_slot_map_shards(const st_slot_map *m);
const char *st_slot_map_url(const st_slot_map *m, unsigned shard); /* NULL past the end */
unsigned st_slot_map_owner(const st_slot_map *m, unsigned slot);
/* The map's text (malloc'd; the caller frees it). */
char *st_slot_map_text(const st_slot_map *m);
/* Writes m's next version where url keeps it: slots a..b given to shard `to`, which is one
 * of m's shards or, with new_url, a new last one (to == st_slot_map_shards(m)). Only if the
 * map kept there is still m (etcd: a transaction comparing the value; a file: read again,
 * then a rename): ST_ESTALE when another version came meanwhile. 0, ST_EINVAL, ST_EIO. */
int st_slot_map_move(const char *url, const st_slot_map *m, unsigned a, unsigned b, unsigned to,
                     const char *new_url, char *why, size_t why_len);

/* What the store tells about trouble; see st_options.on_event. */
enum st_event_kind {
    ST_EV_WRITE_FAILED = 1, /* a write failed: from now on every write gets ST_EIO */
    ST_EV_STILL_FAILING,    /* an attempt to recover failed; the next one comes later */
    ST_EV_RECOVERED,        /* writes work again */
};

typedef struct st_event {
    enum st_event_kind kind;
    const char *reason; /* borrowed, valid during the call: the backend's message (the
                         * first failure's, for RECOVERED) */
    uint64_t down_ms;   /* since the first failed write */
    uint64_t attempts;  /* recovery attempts so far */
    uint64_t refused;   /* ops answered ST_EIO since the first failed write */
} st_event;

/* Called on the store thread; must be quick and must not call the store. */
typedef void (*st_event_fn)(void *ud, const st_event *ev);

/*
 * The change feed (PostgreSQL, where several gateways write one database). Every batch a
 * store commits also announces what it changed: new messages, memberships made and
 * ended, acks moved (in its transaction when it changed memberships, so in commit order
 * with every change to those groups; otherwise right after its commit, so messages of
 * one group may come out of mid order). A store opened with on_change set listens to
 * what the other writers of the database announce and hands it over as it comes (its
 * own commits are not handed back: their ops' completions tell already).
 * An announcement is a hint and the tables are the truth: a message too large for the
 * database's notification payload comes without its record (read it), and when the
 * listener lost its connection, it catches up by position from the database's change
 * log (what was written since, handed over as announcements, some twice); only when that
 * cannot be (its first connection, a position older than the log keeps) does RESYNC say
 * that anything may have been missed, and the listener reads what it needs again. The
 * RocksDB backend has one writer and no feed: on_change is never called.
 */
enum st_change_kind {
    ST_CH_MSG = 1, /* a message: gid, mid, ts, record (NULL: too large to announce) */
    ST_CH_JOIN,    /* uid became a member of gid with ack (= the group's last mid then) */
    ST_CH_LEAVE,   /* uid is no longer a member of gid */
    ST_CH_ACK,     /* uid's stored ack of gid moved forward to ack */
    ST_CH_RESYNC,  /* changes may be missing and the log could not say which: read again */
    ST_CH_SIGNOUT, /* uid's sessions are to end (ST_OP_SIGNOUT) */
    ST_CH_READ,    /* uid's stored read of gid moved forward to read */
    ST_CH_EDIT,    /* gid's message mid has version ver, made at ts: record (NULL: too large
                    * to announce); recalled: a tombstone, its record the `from` pair alone */
    ST_CH_HORIZON, /* gid's horizon is at mid (Retention): the gateway's own, between its
                    * service threads; no store announces it */
    /* Signals (ST_OP_SIGNAL): nothing stored, told as they come, from the gateway `origin`. */
    ST_CH_TYPING, /* uid is typing in gid */
    ST_CH_ONLINE, /* uid came online on origin (ack 1), or went (ack 0; ts: when) */
    ST_CH_BEAT,   /* origin is alive, with ack users online */
    ST_CH_ASK,    /* origin asks gateway `ack` (0: every one) to list who is online there */
    ST_CH_LISTED, /* uid is online on origin: one of listing mid's users, which comes in ts
                   * parts, this one part ack (0-based); a part with no user has uid.n 0 */
    /* Changes (below: Changes), appended so that the kinds above keep their values. */
    ST_CH_REACT,   /* uid set (on) or cleared gid's message mid's reaction key: the key's
                    * count is now count, the change took cseq */
    ST_CH_CHANGED, /* gid's last_cseq moved to cseq through changes not announced one by one
                    * (an erasure, a trim): a hint, read the changes */
};

#define ST_SIGNAL_MAX 7800u /* bytes of a signal's lines */

typedef struct st_change {
    enum st_change_kind kind;
    st_id gid, uid;     /* borrowed, valid during the call */
    uint64_t mid, ts;   /* MSG */
    uint64_t ack;       /* JOIN, ACK */
    uint64_t read;      /* READ */
    uint64_t ver;       /* EDIT */
    bool recalled;      /* EDIT */
    const void *record; /* MSG, EDIT: borrowed, or NULL when it was too large to announce */
    size_t record_n;
    uint64_t origin; /* the announcing store (random per open) */
    /* Changes (below: Changes). */
    uint64_t cseq;  /* EDIT, REACT: the change's; CHANGED: the group's last_cseq; LEAVE of a
                     * deleted group: the deletion's (0: a plain leave) */
    st_id key;      /* REACT: the reaction's key (borrowed, valid during the call; UTF-8) */
    bool on;        /* REACT: set (true) or cleared */
    uint64_t count; /* REACT: the key's count after it */
} st_change;

/*
 * Signals (ST_OP_SIGNAL, PostgreSQL): what a gateway tells the others without storing it,
 * as lines of the feed's format (store_pg_events.c), sent with a NOTIFY that commits no
 * data (op->record: the lines, each after a '\n'; at most ST_SIGNAL_MAX bytes in all):
 *   t GID UID                 uid is typing in gid
 *   o UID 1 | o UID 0 TS      uid came online on this gateway | went (TS: when, ms)
 *   b N                       this gateway is alive, with N users online
 *   q N                       gateway N (its origin; 0: every one): list who is online
 *   O LIST PART PARTS UID...  part PART of PARTS of listing LIST of this gateway's users
 * They come to the other gateways' on_change as the ST_CH_ kinds above, with origin.
 */

/* Called on the store's feed thread with one announcement's changes, in its order.
 * Must be quick (copy what is needed) and must not call the store's *_sync helpers. */
typedef void (*st_change_fn)(void *ud, const st_change *ch, size_t n);

typedef struct st_options {
    const char *path;       /* RocksDB: folder of the database; created if missing */
    const char *url;        /* PostgreSQL: a libpq connection URI (postgresql://...; multi-host
                             * allowed; no password in it: libpq's password file, service
                             * file or environment give it). Set, it is used and path is not */
    bool sync;              /* commits are durable before they are confirmed (RocksDB: fsync;
                             * PostgreSQL: synchronous_commit on). Default true */
    bool open_groups;       /* join creates a group that does not exist */
    size_t max_batch;       /* most ops in one group commit; 0 = 4096 */
    size_t cache_bytes;     /* RocksDB block cache; 0 = 64 MiB */
    st_event_fn on_event;   /* trouble and recovery (NULL: not told) */
    void *event_ud;         /* passed to on_event */
    st_change_fn on_change; /* the other writers' changes (NULL: not listened to) */
    void *change_ud;        /* passed to on_change */
    const char *node;       /* this writer's name, for the database's view of its
                             * connections (application_name); NULL: "gw" */
    unsigned test_drop_announcements; /* tests only (PostgreSQL): the next N announcements
                                       * made after their batch's commit are lost, as when the
                                       * server dies between the two */
    bool unread_log;          /* RocksDB: keep the line of each batch of messages that READ_UNSWEPT
                               * reads (a gateway with the unread webhook); PostgreSQL's change log
                               * keeps it always */
    uint64_t changes_keep;    /* Changes: how many of a group's latest changes READ_CHANGES can
                               * serve at least (0: ST_CHANGES_KEEP; ST_KEEP_ALL: every one);
                               * ST_OP_TRIM moves changes_first up to keep that many */
    uint64_t changes_keep_ms; /* ... and how old a change may be (ms; 0: no age limit): a TRIM
                               * moves changes_first past the older ones */
    uint64_t origin;          /* PostgreSQL: this store's origin (0: a random one); the shards
                               * of one sharded store share one */
    bool slots;               /* PostgreSQL: a shard of a sharded store (store/shard/ sets it):
                               * every write transaction first checks that its slots are not
                               * fenced by a move (tools/gw_slots) */
} st_options;

/* Fills *o with the defaults (sync on, open groups on). path and url stay NULL. */
void st_options_init(st_options *o);

typedef struct st_store st_store;

/* Opens (creating the database or schema if missing) and starts the store thread. The
 * store copies what it needs from *o. A database that cannot be reached now is not an
 * error: the store opens in the failing state and connects when it can (on_event tells).
 * A folder that cannot be opened, a malformed URL or a database whose schema is newer
 * than this build's are errors: *out is NULL and errmsg (if not NULL) holds a reason.
 * Returns 0, ST_EBUSY (a folder another process, or another store of this one, holds),
 * ST_ENOMEM, or ST_EIO for any other failure. */
int st_open(const st_options *o, st_store **out, char *errmsg, size_t errmsg_len);

/* This store's origin: a random number per open that names it to the other gateways of a
 * database (the announcements' and signals' header; st_change.origin). */
uint64_t st_origin(const st_store *s);

/* The backend's name: "rocksdb" or "postgres". */
const char *st_backend_name(const st_store *s);
/* Where the store lives, for a log line: the folder, or the database's hosts, ports,
 * name and user (never a password). Valid as long as the store. */
const char *st_where(const st_store *s);

/* True while the store accepts writes: false from a failed write (a commit, or the probe
 * the store thread makes when it has been idle for a second, so that a disk that fills
 * up or a database that went away shows here within about a second even without
 * traffic) until the store has recovered. Sharded: while any shard does (the others'
 * groups go on; st_stats.shards_unwritable counts the shards that do not). */
bool st_writable(st_store *s);

/* Copies into buf (always NUL-terminated) why the store does not take writes: the
 * backend's message for the latest failure; "" while it is writable. */
void st_write_error(st_store *s, char *buf, size_t len);

/* Commits every op already submitted (their `done` runs), stops the store thread and
 * closes. Ops submitted after close began get ST_ECLOSED. NULL is a no-op. */
void st_close(st_store *s);

/* ---------------------------------------------------------------------------------------
 * Requests
 */

enum st_op_kind {
    /* Writes. */
    ST_OP_APPEND = 1, /* store a message; idempotent by (uid, cid) */
    ST_OP_JOIN,       /* make uid a member of gid (ack = last_mid); create gid if allowed
                       * (open_groups, or the op's `create`) */
    ST_OP_LEAVE,      /* remove the membership */
    ST_OP_ACKS,       /* apply a batch of cumulative acks and reads */
    ST_OP_SIGNOUT,    /* uid's sessions end, on every gateway (PostgreSQL: the other
                       * gateways hear ST_CH_SIGNOUT), and uid's not-before moves to the
                       * commit's second (below: Revocation) -> not_before */
    ST_OP_SEEN,       /* users were online until seen[i].ms: their last_seen moves there
                       * (never back) */
    /* Reads: they see every write committed before they were submitted. */
    ST_OP_READ_PAGE,    /* a page of gid's messages: dir, from, limit, max_bytes, uid (the
                         * reader, optional) -> page */
    ST_OP_READ_GROUPS,  /* the groups of uid with their unread counts -> groups, and uid's
                         * not-before (Revocation) -> not_before, from the same snapshot */
    ST_OP_READ_GROUP,   /* gid's last mid, and uid's ack when uid is given -> last_mid, ack,
                         * last_cseq */
    ST_OP_READ_MEMBERS, /* a page of gid's members in uid order after uid, at most limit ->
                         * members (see st_read_members) */
    ST_OP_READ_SEEN,    /* the last_seen of the users seen[i].uid -> seen[i].ms (0: never) */
    /* The unread webhook's bookkeeping (below): each its own small write or read on the
     * store thread, after the batch's writes, never answered at once. */
    ST_OP_TELL_CLAIM,   /* claim the events of tells -> tells[i].claimed */
    ST_OP_TELL_SENT,    /* the events of tells (ids) were taken by the receiver */
    ST_OP_TELL_ADOPT,   /* events not taken whose gateway is gone, made at or before upto
                         * (ms), at most limit -> list (text: the event) */
    ST_OP_SWEPT,        /* gid's messages from..upto were looked at */
    ST_OP_READ_UNSWEPT, /* groups with messages stored in (from, upto] (ms) not looked at,
                         * in gid order after gid (n == 0: the first), at most limit ->
                         * list (gid, lo..hi) */
    ST_OP_SIGNAL,       /* tell the other gateways something that is not stored (record:
                         * the lines, see Signals below); RocksDB: nothing to tell */
    /* A message's later versions: each a write of its own after the batch's writes, like
     * the bookkeeping, and announced (ST_CH_EDIT). */
    ST_OP_EDIT,       /* gid's message mid gets version `ver`: `record` replaces the stored one (an
                       * edit: the `from` pair and a new body; a recall, with `recall`: the `from`
                       * pair alone, and the message stays a tombstone). Checked here: the message
                       * exists (ST_ENOMSG), is not recalled (ST_EGONE; a recall of it again is a
                       * duplicate), ver is the next one (ST_ESTALE). The same ver with the same
                       * record again is a duplicate: nothing stored, the first answer given.
                       * Who may edit is the caller's to check (the record names the sender). */
    ST_OP_ERASE_USER, /* uid's data goes (a person's erasure): its memberships with their
                       * cursors, its last_seen and its (uid, cid) rows; every message it
                       * sent becomes a tombstone (record: the caller's tombstone of uid), as
                       * a recall makes -> applied: messages erased (not recalled before);
                       * list: the groups it was a member of (gid). One transaction; the
                       * other gateways hear the leaves and a sign-out of uid. Its
                       * not-before moves like a sign-out's and stays (Revocation) */
    ST_OP_DELETE_GROUP, /* gid goes with all of it: its messages, memberships (and their
                         * cursors), (uid, cid) rows and marks -> applied: its last mid;
                         * list: its members (each item's text is a uid; in no promised
                         * order). One transaction;
                         * the other gateways hear the leaves. ST_ENOGROUP if none */
    /* Retention (below): each its own write, like the erasures. */
    ST_OP_RETAIN, /* gid's own retention becomes `retain` (ST_ENOGROUP if none) */
    ST_OP_TRIM,   /* a pass of retention over the groups after gid (n == 0: from the first),
                   * at most limit of them, `retain` the defaults, now the time: each group's
                   * messages below its horizon go -> applied: messages deleted; list: the
                   * groups looked at whose horizon is past 1 (lo: first_mid, hi: last_mid),
                   * st_list_after/st_list_more to go on; changed: the groups whose horizon
                   * moved (each move takes a cseq, below: Changes; hi: the new last_cseq).
                   * The same pass moves each group's changes_first (changes_keep,
                   * changes_keep_ms) */
    /* Changes (below): appended so that the kinds above keep their values. */
    ST_OP_REACT,        /* a write like EDIT (in the batch): uid sets (`on`) or clears gid's message
                         * mid's reaction `key` (key/key_n: 1..ST_REACT_KEY_MAX bytes of UTF-8
                         * without control characters, else ST_EINVAL). Checked: the group
                         * (ST_ENOGROUP), uid a member unless any_sender (ST_ENOTMEMBER), the
                         * message (ST_ENOMSG), not recalled (ST_EGONE), a new key beyond
                         * ST_REACT_KEYS_MAX (ST_ETOOMANY). Setting a set key or clearing an unset
                         * one changes nothing: duplicate, with cseq the message's current one
                         * -> cseq (the change's), count (the key's count after), duplicate */
    ST_OP_READ_CHANGES, /* a read: gid's changed messages with a cseq after `from`, in cseq
                         * order, at most limit (clamped like pages) and max_bytes, each in
                         * its current state; uid (optional, n == 0: none) the reader, for
                         * `mine` -> page (st_page_upto, st_page_changes_gone, more) */
};

/*
 * Revocation. Each user may have a not-before, a time in Unix seconds (0: none): the
 * gateway refuses a token issued (`iat`) at or before it, and a token without `iat`
 * while there is one (docs/API.md, Revoking a user). A sign-out and an erasure move it
 * to their commit's second, never back. It is kept for good, erasure included: it is
 * the one row an erased user leaves (the uid and 8 bytes), and without it a token still
 * unexpired would sign the erased user in again.
 */

/*
 * Retention. Each group has a horizon, first_mid: its messages below it are gone (deleted
 * by ST_OP_TRIM), and it only moves up; 1 until then. Mids stay dense above it and are
 * never reused. What a group keeps is its own st_retain where a field is set, else the
 * defaults a TRIM is given:
 *   - messages: its last N messages (0: the default; ST_KEEP_ALL: no count limit);
 *   - ms: messages younger than that (0: the default; ST_KEEP_ALL: no age limit);
 *   - until_acked: and, beyond those, every message some member has not acked, up to
 *     `cap` messages in all (0: the default cap; ST_KEEP_ALL: none), so that one idle
 *     member cannot keep a group's disk forever. Alone (no count, no age limit): a
 *     message goes once every member has acked it, the cap still holding.
 * A pass deletes at most ST_TRIM_STEP messages of a group (the next pass goes on): one
 * write stays short whatever a group's backlog.
 */
#define ST_KEEP_ALL UINT64_MAX
#define ST_TRIM_STEP 10000u
enum st_acked { ST_ACKED_DEFAULT = 0, ST_ACKED_ON, ST_ACKED_OFF };
typedef struct st_retain {
    uint64_t messages;
    uint64_t ms;
    uint64_t cap;
    enum st_acked until_acked;
} st_retain;

/*
 * Changes. Every change to an existing message (an edit, a recall, an erasure's
 * tombstone, a reaction set or cleared, an erased user's reaction going) and every
 * group-level change a client must apply (the horizon moving, the group deleted) takes
 * the group's next cseq (1, 2, 3, ...; dense; 0: none yet), written in the same commit as
 * the change. New messages take none: they are the mid stream.
 *   - Each message remembers the cseq of its latest change (st_msg.cseq; 0: never
 *     changed), and the change log holds one entry per changed message, its latest
 *     (folding: a message changed again leaves its older entry). READ_CHANGES reads
 *     that log: a catch-up costs O(messages changed).
 *   - Horizon moves and the deletion take a cseq but have no entry: every page carries
 *     the horizon, and a deleted group answers ST_ENOGROUP.
 *   - The log keeps a horizon of its own, changes_first: it is complete after
 *     changes_first - 1. A READ_CHANGES from F with F + 1 < changes_first cannot be
 *     served: its page is empty and st_page_changes_gone() says changes_first (never
 *     silently short). TRIM moves changes_first (st_options.changes_keep, _ms). Entries
 *     of messages below the group's horizon are never returned.
 * Reactions: a user sets a key (a short UTF-8 string: an emoji) on a message, stored once
 * per (gid, mid, uid, key); at most ST_REACT_KEYS_MAX distinct keys a message. A recall
 * or an erasure's tombstone drops the message's reactions in the same change; an erased
 * user's reactions go everywhere, each message they were on taking a cseq.
 */
#define ST_CHANGES_KEEP 100000u /* changes_keep's default */
#define ST_REACT_KEY_MAX 32u    /* bytes of a reaction's key */
#define ST_REACT_KEYS_MAX 20u   /* distinct keys a message may have */

/* A reaction key the store takes: 1..ST_REACT_KEY_MAX bytes of well-formed UTF-8 with no
 * control character (below 0x20, 0x7f, nor U+0080..U+009F). */
bool st_react_key_ok(const char *p, size_t n);

/* A group's retention in force: its own fields where set, over the defaults. */
st_retain st_retain_of(const st_retain *own, const st_retain *dflt);

/*
 * The unread webhook's bookkeeping (the gateway's app/gw_unread.c), kept by the store so
 * that what is to be told outlives the gateway that was to tell it:
 *   - Tells: an event, by its id, from when a gateway makes it (TELL_CLAIM) until the
 *     receiver has taken it (TELL_SENT). A claim of an id that exists does nothing: an
 *     event is made once, across gateways and restarts. An event not taken when the
 *     gateway that claimed it ended (a crash, a stop) goes to another one, or to the same
 *     one once it is back (TELL_ADOPT). Tells are kept for an hour.
 *   - Which groups got messages lately: every batch of messages leaves a line (group,
 *     first and last mid, when) kept for 10 minutes (PostgreSQL: the change log; RocksDB:
 *     with st_options.unread_log).
 *   - A group's swept mark: its messages up to there were looked at (SWEPT moves it only
 *     from where it is: a range looked at past a gap leaves it, and what is behind it is
 *     looked at again, never skipped).
 * READ_UNSWEPT joins the last two: what was stored in a span of time and is past the
 * mark, whichever gateway stored it.
 */
typedef struct st_tell {
    st_id id;          /* in: the event's id (1..ST_MAX_ID printable bytes) */
    const char *event; /* in: CLAIM, the event itself (kept until SENT, handed to ADOPT) */
    size_t event_n;
    bool claimed; /* out: CLAIM, claimed by this op (false: it had been claimed before) */
} st_tell;

/* What READ_UNSWEPT and TELL_ADOPT answer; owns its bytes. Free with st_list_free. */
#define ST_LIST_MAX 1000u
typedef struct st_list st_list;
typedef struct st_item {
    st_id gid;        /* READ_UNSWEPT: the group, with messages lo..hi not looked at */
    uint64_t lo, hi;  /* (lo: past its swept mark, and not stored before the span) */
    uint64_t mark;    /* READ_UNSWEPT: its swept mark (0: none) */
    const char *text; /* TELL_ADOPT: the event, as claimed */
    size_t text_n;
} st_item;
size_t st_list_count(const st_list *l);
const st_item *st_list_at(const st_list *l, size_t i);
bool st_list_more(const st_list *l); /* READ_UNSWEPT: more groups after the page */
/* READ_UNSWEPT: the last group the page looked at (listed or not: swept ones are not),
 * where the next page starts after. Borrowed from l. */
st_id st_list_after(const st_list *l);
void st_list_free(st_list *l); /* NULL is a no-op */

/* One cumulative ack (uid holds every message of gid up to mid), and with it, or alone,
 * one cumulative read (the person has seen every message of gid up to read). Each only
 * moves forward, and never past the group's last mid. A member who never sent a read
 * has none: its unread counts come from its ack. */
typedef struct st_ack {
    st_id gid;
    st_id uid;
    uint64_t mid;  /* the ack (0: leaves it) */
    uint64_t read; /* and the read cursor, when has_read: the person has seen up to there */
    bool has_read;
} st_ack;

/* A user's last_seen: when it was last online (ms since the epoch; 0: never). */
typedef struct st_seen {
    st_id uid;
    uint64_t ms;
} st_seen;

enum st_dir {
    ST_AFTER = 1, /* messages with mid > from, ascending */
    ST_BEFORE,    /* the messages just below from (mid < from), still ascending */
};

/* A page of stored messages; owns copies of the records. Free with st_page_free. */
typedef struct st_page st_page;
/* A user's groups as listed at login; owns its ids. Free with st_groups_free. */
typedef struct st_groups st_groups;
/* A page of a group's members; owns its ids. Free with st_members_free. */
typedef struct st_members st_members;

typedef struct st_op st_op;

/* Called once per op on the store thread when its batch committed (or failed) or its
 * read was answered. It must be quick and must not call the store's *_sync helpers. */
typedef void (*st_done_fn)(st_op *op);

/*
 * A request, allocated by the caller (for example inside a session's request) and owned
 * by the caller. Between st_submit() and the call of `done` the store reads the inputs
 * and writes the outputs: the caller must keep the op and every byte its inputs point to
 * alive and unchanged until then. Outputs that own memory (page, groups, members) pass to
 * the caller with the result.
 */
struct st_op {
    enum st_op_kind kind; /* in */
    st_id gid;            /* in: APPEND, JOIN, LEAVE, READ_PAGE, READ_GROUP, READ_MEMBERS,
                           * SWEPT; READ_UNSWEPT, the group the page starts after (n == 0:
                           * from the first) */
    st_id uid;            /* in: APPEND (the sender), JOIN, LEAVE, READ_GROUPS, REACT;
                           * READ_GROUP (optional: n == 0 for none); READ_PAGE and
                           * READ_CHANGES (optional: the reader, for st_reaction.mine); READ_MEMBERS, the uid
                           * the page            starts after, exclusive (n == 0: from the first member) */
    st_id cid;            /* in: APPEND, the client's message id */
    const void *record;   /* in: APPEND, the encoded message fields (opaque to the store) */
    size_t record_n;      /* in */
    const st_ack *acks;   /* in: ACKS */
    size_t n_acks;        /* in */
    enum st_dir dir;      /* in: READ_PAGE */
    uint64_t from;        /* in: READ_PAGE, the mid the page starts after or before;
                           * READ_CHANGES, the cseq the page starts after; SWEPT,
                           * the first mid looked at; READ_UNSWEPT, the span's start (ms,
                           * exclusive) */
    size_t limit; /* in: READ_PAGE and READ_CHANGES, most messages (at least 1); READ_MEMBERS, most
                   * members (at least 1; above ST_MEMBERS_MAX, ST_MEMBERS_MAX);
                   * READ_UNSWEPT, most groups; TELL_ADOPT, most events (at least
                   * 1; above ST_LIST_MAX, ST_LIST_MAX) */
    size_t max_bytes; /* in: READ_PAGE, READ_CHANGES, most record bytes (0: no bound); at least one
                       * message is always given, and a page cut short keeps the
                       * messages nearest to `from` and says more */
    bool create;      /* in: JOIN, create gid if it does not exist even when the store
                       * was opened with open_groups off (a service making its own
                       * groups); false: as open_groups says */
    bool any_sender;  /* in: APPEND, REACT: the sender need not be a member (the server API's
                       * messages: a bot, the application itself) */
    bool recall;      /* in: EDIT, the version is a tombstone */
    const char *key;  /* in: REACT, the reaction's key (UTF-8, not NUL-terminated) */
    size_t key_n;     /* in */
    bool on;          /* in: REACT, set (true) or clear the reaction */
    st_retain retain; /* in: RETAIN, the group's own; TRIM, the defaults (0 or
                       * ST_KEEP_ALL: no limit; until_acked DEFAULT: off); out:
                       * READ_GROUP, the group's own */
                      /* (ERASE_USER: uid and record, the tombstone, as above) */
    st_done_fn done;  /* in: completion, on the store thread */
    bool urgent;      /* in: queue ahead of waiting ops (acks: never behind a backlog) */
    bool partial_ok;  /* in: READ_GROUPS, a sharded store may answer without the shards that
                       * are away (ST_EIO or moving), as long as the user's own (its
                       * not-before) answered: shards_away says how many are missing */
    void *ud;         /* in: for the caller */

    int result;           /* out: 0 or ST_E* */
    uint64_t mid;         /* out: APPEND, the message's mid (the first one if duplicate); in:
                           * EDIT, the message's */
    uint64_t ts;          /* out: APPEND, server time in ms assigned at commit; EDIT, when the
                           * version was made */
    uint64_t ver;         /* in: EDIT, the version to make (the stored one + 1; 0: the next,
                           * whichever it is); out: the version stored */
    bool duplicate;       /* out: APPEND, (uid, cid) seen before: nothing new stored; EDIT, the
                           * version was made before with this record (or recalled before) */
    uint64_t last_mid;    /* out: APPEND (after it), JOIN, READ_GROUP */
    uint64_t first_mid;   /* out: JOIN, READ_GROUP: the group's horizon (Retention) */
    uint64_t not_before;  /* out: READ_GROUPS, uid's not-before; SIGNOUT, ERASE_USER, the one
                           * written (Unix seconds; 0: none) */
    unsigned shards_away; /* out: READ_GROUPS with partial_ok, the shards whose groups are
                           * not in groups (0: the list is whole) */
    uint64_t ack;         /* out: JOIN, the member's ack; READ_GROUP with uid */
    uint64_t read;        /* out: READ_GROUP with uid, the member's read, when has_read */
    bool has_read;
    bool created;        /* out: JOIN created the group */
    bool joined;         /* out: JOIN made a new membership (false: was already a member) */
    size_t applied;      /* out: ACKS, entries that moved a stored ack or read forward */
    st_page *page;       /* out: READ_PAGE, owned by the caller (st_page_free) */
    st_groups *groups;   /* out: READ_GROUPS, owned by the caller (st_groups_free) */
    st_members *members; /* out: READ_MEMBERS, owned by the caller (st_members_free) */
    st_seen *seen;       /* in: SEEN; in/out: READ_SEEN (the caller's, like acks) */
    size_t n_seen;       /* in */
    st_tell *tells;      /* in/out: TELL_CLAIM, TELL_SENT (the caller's, like acks) */
    size_t n_tells;      /* in */
    uint64_t upto;       /* in: SWEPT, the last mid looked at (from: the first);
                          * READ_UNSWEPT, the span's end (from: its start); TELL_ADOPT,
                          * made at or before this (ms since the epoch) */
    st_list *list;       /* out: READ_UNSWEPT, TELL_ADOPT, owned by the caller */
    uint64_t cseq;       /* out (Changes): EDIT, REACT, the change's (a duplicate: the message's
                          * current cseq); DELETE_GROUP, the deletion's (last_cseq + 1) */
    uint64_t count;      /* out: REACT, the key's count after it */
    uint64_t last_cseq;  /* out: JOIN, READ_GROUP, the group's last cseq (0: none yet) */
    st_list *changed;    /* out: ERASE_USER, TRIM, owned by the caller (st_list_free): one
                          * item per group whose last_cseq moved (gid, hi: its last_cseq
                          * now); NULL when none */

    st_op *next_;        /* private: queue link */
    uint64_t ver_asked_; /* private: EDIT's ver as submitted */
    uint64_t queued_us_; /* private: when it was submitted, for the read latency */
};

/* Queues op for the store thread. Returns 0 (done will be called exactly once), ST_DONE
 * (a read answered at once: result and outputs are filled, done is not called), or a
 * negative code (done will not be called): ST_EINVAL for a malformed op, ST_ECLOSED. */
int st_submit(st_store *s, st_op *op);

/* Number of ops queued and not yet taken by the store thread: for backpressure. */
size_t st_pending(const st_store *s);

/* Submits n ops at once (their done and ud are set here) and waits until each one the
 * store took is done. rcs[i]: what st_submit returned for ops[i]; the results are in the
 * ops. It blocks like the *_sync helpers: never from a store callback. */
void st_submit_all(st_store *s, st_op *ops, size_t n, int *rcs);

/* Blocking helpers: submit one op and wait for it. Return op result. */
int st_append_sync(st_store *s, st_id gid, st_id uid, st_id cid, const void *record,
                   size_t record_n, uint64_t *mid, uint64_t *ts, bool *duplicate);
/* *ver in: the version to make (0: the next); out: the version stored. */
int st_edit_sync(st_store *s, st_id gid, uint64_t mid, uint64_t *ver, bool recall,
                 const void *record, size_t record_n, uint64_t *ts, bool *duplicate);
int st_join_sync(st_store *s, st_id gid, st_id uid, uint64_t *last_mid, uint64_t *ack);
int st_leave_sync(st_store *s, st_id gid, st_id uid);
int st_acks_sync(st_store *s, const st_ack *acks, size_t n, size_t *applied);
/* ST_OP_REACT: uid sets (on) or clears key on gid's message mid, as a member (cseq,
 * count, duplicate: NULL when not wanted). */
int st_react_sync(st_store *s, st_id gid, uint64_t mid, st_id uid, st_id key, bool on,
                  uint64_t *cseq, uint64_t *count, bool *duplicate);

/* ---------------------------------------------------------------------------------------
 * Blocking reads (helpers over the read ops): they see only committed writes.
 */

/* The last mid of a group (0 when empty). ST_ENOGROUP if it does not exist. */
int st_read_last_mid(st_store *s, st_id gid, uint64_t *last_mid);

/* A member's stored ack. ST_ENOTMEMBER if uid is not a member (or the group is absent). */
int st_read_ack(st_store *s, st_id gid, st_id uid, uint64_t *ack);

/* One group of a user, as listed at login. */
typedef struct st_user_group {
    st_id gid; /* borrowed from its st_groups (or valid during the callback only) */
    uint64_t last_mid;
    uint64_t first_mid; /* the horizon: messages below it are gone */
    uint64_t ack;
    uint64_t unread; /* last_mid - read when has_read, else last_mid - ack; what is below
                      * the horizon never counts */
    uint64_t read;   /* when has_read: the member has sent a read */
    bool has_read;
    uint64_t last_cseq; /* the group's last change (Changes; 0: none yet) */
} st_user_group;

/* Calls cb for each group uid belongs to, once each, in the store's order (not sorted).
 * cb returns non-zero to stop; that value is returned. */
int st_read_user_groups(st_store *s, st_id uid, int (*cb)(void *ud, const st_user_group *g),
                        void *ud);

/* Revocation: uid's sessions end and its not-before moves to the commit's second (in
 * *not_before, NULL: not wanted); uid's not-before as stored (0: none). */
int st_signout_sync(st_store *s, st_id uid, uint64_t *not_before);
int st_read_not_before(st_store *s, st_id uid, uint64_t *not_before);

size_t st_groups_count(const st_groups *g);
const st_user_group *st_groups_at(const st_groups *g, size_t i);
void st_groups_free(st_groups *g);

/* Most members in one page: a larger limit is taken as this, so that a page's memory is
 * bounded (under 270 KB). */
#define ST_MEMBERS_MAX 1000u

/* One member of a page; uid is borrowed from its st_members. */
typedef struct st_member {
    st_id uid;
    uint64_t ack;
    uint64_t read; /* when has_read */
    bool has_read;
} st_member;

/*
 * A page of gid's members, from one consistent snapshot: those whose uid comes after
 * `after` (exclusive; after.n == 0: from the first), at most `limit` of them (at least 1;
 * above ST_MEMBERS_MAX, ST_MEMBERS_MAX), in uid order. The order is the ids' byte order
 * (memcmp, and an id before every longer one that begins with it: "a" < "a1" < "b"), on
 * every backend. ST_ENOGROUP if the group does not exist; ST_EINVAL for a zero limit or a
 * malformed `after` (one given need not be a member). *out owns the result (NULL on
 * error).
 *
 * A stable cursor: page on with the last uid of a page as the next `after`. Each page
 * depends only on what is stored when it is read, not on earlier pages, so a member that
 * stays a member throughout is listed exactly once, whatever joins and leaves happen
 * between pages (a member who left is no cursor problem: `after` need not exist). One
 * who joins or leaves meanwhile is listed or not: a uid that joins behind the cursor is
 * not. Unread counts: last_mid (of that snapshot) - ack.
 */
int st_read_members(st_store *s, st_id gid, st_id after, size_t limit, st_members **out);
size_t st_members_count(const st_members *m);
/* The i-th member, in uid order; past the end, {{NULL, 0}, 0}. */
st_member st_members_at(const st_members *m, size_t i);
uint64_t st_members_last_mid(const st_members *m); /* the group's last mid in that snapshot */
bool st_members_more(const st_members *m);         /* more members come after this page */
void st_members_free(st_members *m);               /* NULL is a no-op */

/* A message's reactions with one key: how many users set it, and whether the page's
 * reader is one of them. key is borrowed from the page. */
typedef struct st_reaction {
    st_id key; /* UTF-8 (st_react_key_ok), not an id: not NUL-terminated */
    uint64_t count;
    bool mine;
} st_reaction;

/* One message of a page; `record` and `reactions` are borrowed from the page. */
typedef struct st_msg {
    uint64_t mid;
    uint64_t ts;     /* when it was sent */
    uint64_t ver;    /* 0: as sent; n: its nth later version (ST_OP_EDIT) */
    uint64_t ver_ts; /* when version ver was made (ver > 0) */
    bool recalled;   /* a tombstone: record is the `from` pair alone */
    const void *record;
    size_t record_n;
    uint64_t cseq;                /* its latest change (Changes; 0: never changed) */
    const st_reaction *reactions; /* its reactions, one per key with a count, keys in byte
                                   * order (memcmp, shorter first); none when recalled */
    size_t n_reactions;
} st_msg;

/*
 * Reads up to `limit` messages of gid in direction dir from `from`, from one consistent
 * snapshot. ST_ENOGROUP if the group does not exist. *out owns the result.
 */
int st_read_page(st_store *s, st_id gid, enum st_dir dir, uint64_t from, size_t limit,
                 st_page **out);
/* The changes after cseq `after` (READ_CHANGES, no byte bound): *out a page of the
 * changed messages in cseq order; uid (n == 0: none) the reader, for st_reaction.mine.
 * ST_ENOGROUP if the group does not exist. */
int st_read_changes(st_store *s, st_id gid, uint64_t after, size_t limit, st_id uid, st_page **out);
/* The same, and also at most max_bytes of records (but always at least one message):
 * when cut short, the page keeps the messages nearest to `from` and says more. */
int st_read_page_bounded(st_store *s, st_id gid, enum st_dir dir, uint64_t from, size_t limit,
                         size_t max_bytes, st_page **out);
size_t st_page_count(const st_page *p);
const st_msg *st_page_at(const st_page *p, size_t i);
uint64_t st_page_last_mid(const st_page *p);  /* the group's last mid in that snapshot */
uint64_t st_page_first_mid(const st_page *p); /* ... and its horizon (Retention) */
/* The page asked for messages below the horizon (none of them are in it): the horizon;
 * else 0. A page AFTER such a `from` starts at the horizon. */
uint64_t st_page_gone_before(const st_page *p);
bool st_page_more(const st_page *p); /* more messages exist in that direction */
/* The group's last cseq in that snapshot (every page; 0: no change yet). */
uint64_t st_page_last_cseq(const st_page *p);
/* A changes page (READ_CHANGES): the cseq it is complete up to, to read on after (the
 * group's last_cseq when not more); and changes_first when the log could not serve
 * `from` (the page is then empty, not more, and upto is `from`: the reader re-pages what
 * it holds and takes st_page_last_cseq as its cursor; else 0). */
uint64_t st_page_upto(const st_page *p);
uint64_t st_page_changes_gone(const st_page *p);
void st_page_free(st_page *p);

/* Figures for monitoring. Counters count since open, except messages and groups. */
typedef struct st_stats {
    const char *backend;      /* "rocksdb" or "postgres" (static) */
    bool connected;           /* the backend is reachable (RocksDB: the database is open) */
    uint64_t reconnects;      /* times the backend was opened or connected again */
    uint64_t commits;         /* group commits done */
    uint64_t ops;             /* write ops committed (all kinds) */
    uint64_t appends;         /* messages stored since open (duplicates excluded) */
    uint64_t commit_failures; /* batches that failed (refused by the backend, or while the
                               * store was not taking writes) */
    uint64_t commit_retries;  /* batches applied again after a conflict with another
                               * writer of the same database */
    uint64_t write_errors;    /* failed writes to the backend: commits, probes, reopens */
    uint64_t recoveries;      /* times the store took writes again after failing */
    uint64_t unwritable_ms;   /* how long it has not been taking writes (0 while it does) */
    uint64_t messages;        /* messages in the store, all groups (exact for one writer;
                               * with several, as of the last count: see ARCHITECTURE) */
    uint64_t groups;          /* groups in the store (the same) */
    uint64_t commit_p50_us;   /* commit latency (one synced write or transaction) over the
                               * last 1024 commits */
    uint64_t commit_p99_us;
    uint64_t commit_us_sum; /* total time spent in commits since open */
    uint64_t reads;         /* reads answered since open */
    uint64_t read_p50_us;   /* read latency, submit to answer, over the last 1024 */
    uint64_t read_p99_us;
    uint64_t read_us_sum; /* total of those latencies since open */
    bool writable;        /* as st_writable() */
    uint64_t disk_bytes;  /* RocksDB: bytes of every file in its folder; PostgreSQL:
                           * the database's size (refreshed every few seconds) */
    /* The change feed (PostgreSQL with on_change; zero otherwise). */
    bool feed_connected;            /* the listening connection is up */
    uint64_t feed_notifications;    /* announcements received from other writers */
    uint64_t feed_changes;          /* ... and the changes in them */
    uint64_t feed_bytes;            /* their payload bytes */
    uint64_t feed_resyncs;          /* RESYNC handed over: the listener's first connection, or
                                     * a catch-up the change log could not serve */
    uint64_t feed_connects;         /* times the listener connected */
    uint64_t feed_catch_ups;        /* catch-ups by position: after a reconnect (a failover, a
                                     * lost link) or a writer's word that changes may be missing */
    uint64_t feed_catch_up_rows;    /* change log rows they read (one statement each) */
    uint64_t feed_catch_up_changes; /* ... and the changes in those rows, handed over */
    uint64_t feed_announced;        /* announcements this store made (one or more a batch) */
    uint64_t feed_hints;            /* messages announced without their record (too large) */
    uint64_t feed_late;             /* batches whose announcement did not go after their commit
                                     * (kept, and sent with a later one) */
    uint64_t feed_late_dropped;     /* such payloads given up (too many waiting): the other
                                     * gateways read those changes at a hole or a resync */
    uint64_t feed_laggards;         /* other listeners ended for not reading (see ARCHITECTURE) */
    double notify_queue_usage;      /* pg_notification_queue_usage(), 0..1, every 2 s */
    /* A sharded store (below: Shards; zero otherwise). Counters above are summed over the
     * shards, latencies are the worst shard's, connected holds for every one, writable for
     * one at least (as st_writable). */
    uint32_t shards;            /* shards in the slot map */
    uint32_t shards_unwritable; /* ... not taking writes now */
    uint64_t map_version;       /* the slot map's version in force */
    uint64_t map_reloads;       /* new versions taken since open */
    uint64_t moved;             /* writes a shard refused as their slot was fenced by a
                                 * move (answered ST_EIO: the clients resend them) */
} st_stats;

void st_read_stats(st_store *s, st_stats *out);

#endif
