/*
 * gw_slots's parts (tools/cli/gw_slots.c is the command line): a shard's connection and
 * its printable name (slots_db.c), the sets of keys a move takes and the copy of their
 * rows (slots_copy.c), and the move's steps with their undoing (slots_move.c).
 * Every function returns 0 or a negative ST_E* code (store.h) and says why in `why`;
 * only sl_log and sl_warn print (stdout, stderr), each line with the ms since start.
 */
#ifndef GW_SLOTS_H
#define GW_SLOTS_H

#include "store.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The advisory lock of gw.fenced (store_pg_schema.c, schema_v9): writers hold it shared
 * for their transaction, a move takes it exclusively to make or lift a fence. */
#define SL_FENCE_LOCK 7220409

/* ---- log (slots_db.c) ----------------------------------------------------------------- */

/* ms since the program started (CLOCK_MONOTONIC). */
uint64_t sl_ms(void);
/* A line to stdout (the move's steps, what an operator follows), "[   123 ms] ...". */
void sl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A line to stderr, the same way: what went wrong and the state it left. */
void sl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- a shard's database (slots_db.c) -------------------------------------------------- */

/* host:port/db of a PostgreSQL URL, for every line printed: never the user or password
 * (the map's URLs may hold one). */
void sl_url_name(const char *url, char *out, size_t n);
/* A connection to url (application_name gw_slots, a 5 s connect timeout): 0 or ST_EIO. */
int sl_connect(const char *url, PGconn **out, char *why, size_t why_len);
/* One statement (or several, without parameters): 0, or ST_EIO with the server's message. */
int sl_exec(PGconn *c, const char *sql, char *why, size_t why_len);
/* One statement whose answer is a number (the first field of the first row; 0: none). */
int sl_scalar(PGconn *c, const char *sql, int64_t *out, char *why, size_t why_len);
/* ROLLBACK if a transaction is open (after a failure: the connection is usable again). */
void sl_rollback(PGconn *c);

/* ---- the keys a move takes and their rows (slots_copy.c) ------------------------------- */

/* The keys of one kind (malloc'd strings, the set's own). */
typedef struct sl_keys {
    char **v;
    size_t n, cap;
} sl_keys;

/* What lives by slot: groups (and everything keyed by gid), users' own rows (by uid) and
 * the unread webhook's tells (by id). */
enum sl_kind { SL_GIDS, SL_UIDS, SL_TELLS, SL_KINDS };

typedef struct sl_keyset {
    sl_keys k[SL_KINDS];
} sl_keyset;

void sl_keyset_release(sl_keyset *ks);
/* Adds a copy of key: 0 or ST_ENOMEM. */
int sl_keys_add(sl_keys *k, const char *key);
/* Adds to ks the keys of the database whose slot is in a..b (read in single-row mode: the
 * database's keys are never all in memory, only those that move). */
int sl_keyset_list(PGconn *c, unsigned a, unsigned b, sl_keyset *ks, char *why, size_t why_len);
/* Loads ks into the connection's temporary tables sl_gids, sl_uids, sl_tells (made if
 * needed, emptied first), which the statements below name. */
int sl_keyset_load(PGconn *c, const sl_keyset *ks, char *why, size_t why_len);
/* Rows per table of one copy, in the order of sl_tables. */
#define SL_TABLES 9
extern const char *const sl_tables[SL_TABLES];
typedef struct sl_counts {
    uint64_t read[SL_TABLES], written[SL_TABLES]; /* the rows streamed, per table */
    uint64_t source[SL_TABLES];                   /* the delta's check: the source's rows of
                                                   * the keys, equal to the destination's */
    uint64_t groups_precopied;                    /* the delta: groups whose pre-copy stands */
    uint64_t redone;                              /* the delta: messages changed since it */
    bool full_again; /* the delta found messages or sends that differ (a change that moved
                      * no cseq): the groups' messages and sends were copied in full */
} sl_counts;
/* In the open transaction of `to`: deletes the rows of the keys loaded there, then
 * streams the rows of the keys loaded on `from` (COPY binary, row by row) into `to`,
 * counting rows read and written per table. ST_EIO when a table's counts differ. */
int sl_copy_rows(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len);
/* In the open transaction of c: deletes the rows of the keys loaded there. */
int sl_delete_rows(PGconn *c, char *why, size_t why_len);

/* A move in two phases: the messages copied before the fence, what changed since after.
 * sl_pre_mark: in from's open REPEATABLE READ transaction (the pre-copy's snapshot, which
 * the caller commits, not rolls back: the marks are kept in the session's temporary table
 * sl_pre), per group of sl_gids its last_mid M and last_cseq C.
 * sl_pre_copy: in to's open transaction, the rows of its loaded keys deleted, then each
 * marked group's msgs and sends rows with mid <= M copied (in n: msgs and sends).
 * sl_catch_up: while the slots still take writes, from in a new REPEATABLE READ
 * transaction that the caller commits (the marks move), to in an open one: each marked
 * group's messages (and sends) above M that it took since, if it is still the group
 * marked (its created_ms); M becomes its last_mid, C stays. *messages: how many.
 * sl_delta_copy: after the fence, `from` in a new REPEATABLE READ transaction with the
 * keys of now loaded, `to` in the open transaction that the move commits: every table but
 * msgs and sends replaced in full; of msgs and sends the groups not pre-copied in full,
 * the rows above M, and those changed since (cseq > C: an edit, recall, reaction, an
 * erasure's tombstone) again; rows below the first_mid of now deleted (a trim). Then each
 * table's rows of the keys counted at both ends: ST_EIO when they differ (when msgs or
 * sends do, they are first copied again in full: n->full_again). */
int sl_pre_mark(PGconn *from, char *why, size_t why_len);
int sl_pre_copy(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len);
int sl_catch_up(PGconn *from, PGconn *to, sl_counts *n, uint64_t *messages, char *why,
                size_t why_len);
int sl_delta_copy(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len);

/* ---- the move (slots_move.c) ---------------------------------------------------------- */

typedef struct sl_move {
    const char *map_url; /* shards:PATH or etcd://... */
    unsigned a, b;       /* the slots */
    unsigned to;         /* the shard they go to */
    const char *new_url; /* a new shard's URL (to == the map's shard count), or NULL */
    uint64_t grace_ms;   /* between the bump and the deletion of the rows left behind */
    uint64_t pause_ms;   /* out: the fence's commit to the map's bump */
    sl_counts pre;       /* out: the rows pre-copied (msgs, sends), before the fence */
    sl_counts counts;    /* out: the rows copied after the fence (the delta) */
    size_t groups;       /* out: the groups moved */
    bool made;           /* out: the map gives the slots to `to` (also when what follows
                          * the bump failed) */
} sl_move;

/* The whole move (gw_slots --help tells its steps). 0; ST_EINVAL (refused before anything
 * was done: why); ST_ESTALE (the map changed under the move: the fence stays, run it
 * again); ST_EIO (a step failed: what was done is undone, or the log says what is left). */
int sl_move_run(sl_move *mv, char *why, size_t why_len);
/* Lifts the fences of slots a..b on the shard that owns them now (a move that stopped
 * before its bump and could not undo its fence, and is not run again). */
int sl_unfence(const char *map_url, unsigned a, unsigned b, char *why, size_t why_len);

#endif
