/*
 * gw_slots move: slots a..b from their one shard X to shard `to` (I), online. The writes of
 * those slots are refused on X from the fence to the map's bump (the write pause: the
 * clients retry), their reads are served by X until each node has the new map, then by I.
 * Steps (gw_slots --help says them to the operator):
 *   1. schema: every involved shard opened once as a shard (st_open: a new database gets
 *      the schema, an older one its upgrade)
 *   2. pre-copy: while X still takes the slots' writes, the slots' groups as one snapshot
 *      of X has them: in one transaction on I, the rows of those keys already there
 *      deleted (a move back), then each group's messages up to its last_mid M (and their
 *      sends) copied; M and the group's last_cseq C kept (slots_copy.c). I serves none of
 *      the slots until the bump: nobody sees these rows before the rest is there
 *   2b. catch-up: while X still takes the slots' writes, passes like the pre-copy's, each
 *      copying the messages (and sends) the pre-copied groups took since the last; they go
 *      on while a pass copies more than CATCH_UP_ENOUGH messages (CATCH_UP_PASSES at most),
 *      so that what is left for the fence is what came during the last, short pass
 *   3. fence: on X, under the exclusive hold of gw.fenced's advisory lock (it waits for X's
 *      writes under way), the slots go into gw.fence as 'moving': X refuses their writes
 *   4. copy: the slots' keys read on X again; in one transaction on I, every other table
 *      replaced in full, the messages' delta (above M, changed since: cseq > C, below the
 *      first_mid of now gone), each table's rows counted at both ends, I's fences of the
 *      slots lifted. The write pause is this step's length, no longer the slots' rows
 *   5. bump: the map's next version gives I the slots, if the map is still the one read
 *   6. X's fences become 'gone'; after the grace (nodes whose map is behind still read X)
 *      the rows left on X are deleted
 * Until the bump a failure undoes what was done (the fence lifted, the copies deleted), so
 * the slots are X's as before; after it the move stands and what is left is said.
 */
#include "slots.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long the fence waits for X's writes under way: longer, and the writes queued
 * behind the fence's lock would wait as long (PostgreSQL's lock queue is fair). */
#define FENCE_LOCK_TIMEOUT "5s"
/* Step 2b: another catch-up pass while the last copied more messages than this (a busy
 * group takes that many in well under a second), at most this many passes. */
#define CATCH_UP_ENOUGH 1000
#define CATCH_UP_PASSES 3
/* The deletion of the rows left behind, tried again after a failure (a deadlock). */
#define DELETE_ATTEMPTS 3

typedef struct run {
    sl_move *mv;
    st_slot_map *map;
    unsigned from;                 /* X */
    const char *from_url, *to_url; /* borrowed from the map, or mv->new_url */
    char from_name[300], to_name[300];
    PGconn *x, *i;
    sl_keyset pre;   /* X's keys of the slots at the pre-copy */
    sl_keyset moved; /* X's keys of the slots at the fence */
    sl_keyset on_to; /* I's keys of the slots, the pre-copied and the moved ones: what I's
                      * copies replace */
    bool precopied;  /* I's pre-copy committed (or its answer lost) */
    bool fenced;     /* X's fence committed */
    bool copied;     /* I's copy committed */
    uint64_t fenced_at;
} run;

/* ---- checks ------------------------------------------------------------------------- */

static int refuse(char *why, size_t why_len, const char *msg)
{
    snprintf(why, why_len, "%s", msg);
    return ST_EINVAL;
}

/* The move asked for against the map: the slots of one shard, to another (or a new) one. */
static int check(run *r, char *why, size_t why_len)
{
    sl_move *mv = r->mv;
    unsigned n = st_slot_map_shards(r->map);
    if (mv->a > mv->b || mv->b >= ST_SLOTS)
        return refuse(why, why_len, "--slots A-B: slots 0..4095, A <= B");
    if (mv->new_url) {
        if (mv->to != n) {
            snprintf(why, why_len, "--new-shard: the new shard is shard %u (the map has %u)", n, n);
            return ST_EINVAL;
        }
        for (unsigned s = 0; s < n; s++)
            if (strcmp(st_slot_map_url(r->map, s), mv->new_url) == 0) {
                snprintf(why, why_len, "--new-shard: that URL is shard %u's already: --to %u", s,
                         s);
                return ST_EINVAL;
            }
    } else if (mv->to >= n) {
        snprintf(why, why_len, "--to %u: the map has shards 0..%u (a new one: --new-shard URL)",
                 mv->to, n - 1);
        return ST_EINVAL;
    }
    r->from = st_slot_map_owner(r->map, mv->a);
    for (unsigned s = mv->a; s <= mv->b; s++)
        if (st_slot_map_owner(r->map, s) != r->from) {
            snprintf(why, why_len,
                     "slots %u-%u belong to more than one shard (slot %u: shard %u, slot %u: "
                     "shard %u): move each shard's part on its own (gw_slots show)",
                     mv->a, mv->b, mv->a, r->from, s, st_slot_map_owner(r->map, s));
            return ST_EINVAL;
        }
    if (r->from == mv->to) {
        snprintf(why, why_len, "slots %u-%u are shard %u's already", mv->a, mv->b, mv->to);
        return ST_EINVAL;
    }
    r->from_url = st_slot_map_url(r->map, r->from);
    r->to_url = mv->new_url ? mv->new_url : st_slot_map_url(r->map, mv->to);
    sl_url_name(r->from_url, r->from_name, sizeof(r->from_name));
    sl_url_name(r->to_url, r->to_name, sizeof(r->to_name));
    return ST_OK;
}

/* ---- the steps ---------------------------------------------------------------------- */

/* Step 1: st_open as a shard makes or upgrades the schema (what the gateway would do at
 * its first use of the shard); then the tool's own connection, checked to be at version 9
 * (st_open opens a store whose database it cannot reach, failing). */
static int schema(const char *url, const char *name, PGconn **c, char *why, size_t why_len)
{
    st_options o;
    st_options_init(&o);
    o.url = url;
    o.slots = true;
    st_store *s = NULL;
    char err[512] = "";
    int rc = st_open(&o, &s, err, sizeof(err));
    if (rc != ST_OK) {
        snprintf(why, why_len, "%s: st_open: %s (%s)", name, st_strerror(rc), err);
        return rc;
    }
    st_close(s);
    int64_t version = 0;
    if ((rc = sl_connect(url, c, why, why_len)) == ST_OK &&
        (rc = sl_scalar(*c, "SELECT max(version) FROM gw.schema_version", &version, why,
                        why_len)) == ST_OK &&
        version < 9) {
        snprintf(why, why_len, "%s: schema version %" PRId64 ", not 9 or later", name, version);
        rc = ST_EIO;
    }
    return rc;
}

/* Makes ('moving') or lifts (NULL) X's fence of a..b under the exclusive advisory lock. */
static int fence(PGconn *c, unsigned a, unsigned b, const char *state, char *why, size_t why_len)
{
    char sql[700];
    int n = snprintf(sql, sizeof(sql),
                     "BEGIN; SET LOCAL lock_timeout = '" FENCE_LOCK_TIMEOUT "';"
                     " SELECT pg_advisory_xact_lock(%d);",
                     SL_FENCE_LOCK);
    if (state)
        snprintf(sql + n, sizeof(sql) - (size_t)n,
                 "INSERT INTO gw.fence SELECT s, '%s', (extract(epoch from clock_timestamp())"
                 " * 1000)::bigint FROM generate_series(%u, %u) s ON CONFLICT (slot) DO UPDATE"
                 " SET state = EXCLUDED.state, at_ms = EXCLUDED.at_ms; COMMIT",
                 state, a, b);
    else
        snprintf(sql + n, sizeof(sql) - (size_t)n,
                 "DELETE FROM gw.fence WHERE slot BETWEEN %u AND %u; COMMIT", a, b);
    int rc = sl_exec(c, sql, why, why_len);
    if (rc != ST_OK)
        sl_rollback(c);
    return rc;
}

static void log_counts(const char *step, const char *what, const sl_counts *n, bool all)
{
    char line[700];
    size_t len = 0;
    for (int t = 0; t < SL_TABLES; t++)
        if (all || n->read[t])
            len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s %" PRIu64,
                                    len ? ", " : "", sl_tables[t], n->read[t]);
    sl_log("%s: %s: %s", step, what, len ? line : "none");
}

/* The slots' keys on X into ks, loaded into X's session for the copy's reads, and added
 * to on_to (what an undo deletes on I). Steps 2 and 4 each take them again: step 4 finds
 * what was made between the two. */
static int gather(run *r, sl_keyset *ks, char *why, size_t why_len)
{
    int rc = sl_keyset_list(r->x, r->mv->a, r->mv->b, ks, why, why_len);
    if (rc == ST_OK)
        rc = sl_keyset_load(r->x, ks, why, why_len);
    for (int k = 0; k < SL_KINDS && rc == ST_OK; k++)
        for (size_t j = 0; j < ks->k[k].n && rc == ST_OK; j++)
            rc = sl_keys_add(&r->on_to.k[k], ks->k[k].v[j]);
    return rc;
}

/* Step 2. X's side is one snapshot (REPEATABLE READ), committed (its marks stay in the
 * session for step 4); I's side one transaction. */
static int precopy(run *r, char *why, size_t why_len)
{
    sl_move *mv = r->mv;
    int rc = sl_keyset_list(r->i, mv->a, mv->b, &r->on_to, why, why_len);
    size_t already = r->on_to.k[SL_GIDS].n + r->on_to.k[SL_UIDS].n + r->on_to.k[SL_TELLS].n;
    if (rc == ST_OK)
        rc = gather(r, &r->pre, why, why_len);
    if (rc != ST_OK)
        return rc;
    sl_log("pre-copy: %zu groups of the slots on shard %u, their messages as of now; %zu keys "
           "of the slots already on shard %u (replaced)",
           r->pre.k[SL_GIDS].n, r->from, already, mv->to);
    if ((rc = sl_exec(r->x, "BEGIN ISOLATION LEVEL REPEATABLE READ", why, why_len)) == ST_OK &&
        (rc = sl_pre_mark(r->x, why, why_len)) == ST_OK &&
        (rc = sl_exec(r->i, "BEGIN", why, why_len)) == ST_OK &&
        (rc = sl_keyset_load(r->i, &r->on_to, why, why_len)) == ST_OK &&
        (rc = sl_pre_copy(r->x, r->i, &mv->pre, why, why_len)) == ST_OK) {
        r->precopied = true;
        if ((rc = sl_exec(r->i, "COMMIT", why, why_len)) == ST_OK)
            rc = sl_exec(r->x, "COMMIT", why, why_len);
    }
    sl_rollback(r->x);
    sl_rollback(r->i);
    if (rc == ST_OK)
        log_counts("pre-copy", "rows copied", &mv->pre, false);
    return rc;
}

/* Step 2b. Each pass as the pre-copy: X's side one snapshot, committed (the marks move),
 * I's side one transaction. */
static int catch_up(run *r, char *why, size_t why_len)
{
    sl_move *mv = r->mv;
    for (int pass = 1; pass <= CATCH_UP_PASSES; pass++) {
        sl_counts n = {0};
        uint64_t messages = 0, t0 = sl_ms();
        int rc;
        if ((rc = sl_exec(r->x, "BEGIN ISOLATION LEVEL REPEATABLE READ", why, why_len)) == ST_OK &&
            (rc = sl_exec(r->i, "BEGIN", why, why_len)) == ST_OK &&
            (rc = sl_catch_up(r->x, r->i, &n, &messages, why, why_len)) == ST_OK &&
            (rc = sl_exec(r->i, "COMMIT", why, why_len)) == ST_OK)
            rc = sl_exec(r->x, "COMMIT", why, why_len);
        sl_rollback(r->x);
        sl_rollback(r->i);
        if (rc != ST_OK)
            return rc;
        sl_log("catch-up %d: messages the groups took since: %" PRIu64 ", copied in %" PRIu64 " ms",
               pass, messages, sl_ms() - t0);
        if (messages <= CATCH_UP_ENOUGH)
            break;
    }
    /* The check after the fence counts the slots' rows at both ends; I's are fresh copies,
     * which PostgreSQL counts from the heap until a vacuum marks their pages all-visible
     * (595,145 messages and their sends: 540 ms, then 150 ms). Done here, outside the
     * write pause; a failure only leaves the count slower. */
    uint64_t t0 = sl_ms();
    char vwhy[300] = "";
    if (sl_exec(r->i, "VACUUM gw.msgs, gw.sends", vwhy, sizeof(vwhy)) == ST_OK)
        sl_log("vacuum: the copies on shard %u marked visible in %" PRIu64 " ms", mv->to,
               sl_ms() - t0);
    else
        sl_warn("vacuum of the copies on shard %u: %s (the check after the fence is slower)",
                mv->to, vwhy);
    return ST_OK;
}

/* Step 4. X's rows are read in one snapshot (REPEATABLE READ) after the fence; I's side is
 * one transaction: nothing of it is seen before all of it is there. */
static int copy(run *r, char *why, size_t why_len)
{
    sl_move *mv = r->mv;
    int rc = gather(r, &r->moved, why, why_len);
    if (rc != ST_OK)
        return rc;
    mv->groups = r->moved.k[SL_GIDS].n;
    sl_log("copy: %zu groups, %zu users, %zu tells of the slots on shard %u", r->moved.k[SL_GIDS].n,
           r->moved.k[SL_UIDS].n, r->moved.k[SL_TELLS].n, r->from);
    char sql[200];
    snprintf(sql, sizeof(sql), "DELETE FROM gw.fence WHERE slot BETWEEN %u AND %u; COMMIT", mv->a,
             mv->b);
    if ((rc = sl_exec(r->x, "BEGIN ISOLATION LEVEL REPEATABLE READ", why, why_len)) == ST_OK &&
        (rc = sl_exec(r->i, "BEGIN", why, why_len)) == ST_OK &&
        (rc = sl_keyset_load(r->i, &r->on_to, why, why_len)) == ST_OK &&
        (rc = sl_delta_copy(r->x, r->i, &mv->counts, why, why_len)) == ST_OK &&
        (rc = sl_exec(r->i, sql, why, why_len)) == ST_OK)
        r->copied = true;
    sl_rollback(r->x);
    sl_rollback(r->i);
    if (rc != ST_OK)
        return rc;
    sl_log("copy: %" PRIu64 " groups' pre-copies stand, %" PRIu64 " of their messages changed "
           "since%s",
           mv->counts.groups_precopied, mv->counts.redone,
           mv->counts.full_again ? "; messages or sends differed: copied again in full" : "");
    log_counts("copy", "rows copied", &mv->counts, true);
    sl_counts check = {0};
    memcpy(check.read, mv->counts.source, sizeof(check.read));
    log_counts("copy", "rows of the keys on both shards (checked equal)", &check, true);
    return rc;
}

/* Step 5, and what an answer other than yes means: the map read again says whether the
 * new version is there (a write whose answer was lost). */
static int bump(run *r, bool *made, char *why, size_t why_len)
{
    sl_move *mv = r->mv;
    *made = false;
    int rc = st_slot_map_move(mv->map_url, r->map, mv->a, mv->b, mv->to, mv->new_url, why, why_len);
    if (rc == ST_OK || rc == ST_ESTALE) {
        *made = rc == ST_OK;
        return rc;
    }
    st_slot_map *now = NULL;
    char why2[300] = "";
    if (st_slot_map_read(mv->map_url, &now, why2, sizeof(why2)) != ST_OK) {
        sl_warn("bump: %s; and the map cannot be read again (%s): whether it has the move is "
                "not known",
                why, why2);
        return ST_EIO;
    }
    uint64_t v = st_slot_map_version(now), v0 = st_slot_map_version(r->map);
    bool moved = v == v0 + 1 && st_slot_map_owner(now, mv->a) == mv->to &&
                 st_slot_map_owner(now, mv->b) == mv->to;
    st_slot_map_free(now);
    if (moved) {
        sl_warn("bump: %s; but the map read again has the move (version %" PRIu64
                "): taken as made",
                why, v);
        *made = true;
        return ST_OK;
    }
    return v == v0 ? rc : ST_ESTALE;
}

/* Step 6: the fences 'gone' (X refuses the slots for good: a node whose map is behind is
 * told to retry, and it soon has the new map), the grace, then X's rows of the slots
 * deleted in one transaction. A connection lost in the grace is made again. */
static int finish(run *r, char *why, size_t why_len)
{
    sl_move *mv = r->mv;
    int rc = fence(r->x, mv->a, mv->b, "gone", why, why_len);
    if (rc != ST_OK)
        sl_warn("gone: %s: the fences stay 'moving' on shard %u (its writes of the slots are "
                "refused either way, but an erasure there waits for no move: set them 'gone' "
                "by hand)",
                why, r->from);
    else
        sl_log("gone: slots %u-%u are 'gone' on shard %u", mv->a, mv->b, r->from);
    sl_log("grace: %" PRIu64 " ms before the rows left on shard %u go", mv->grace_ms, r->from);
    struct timespec t = {(time_t)(mv->grace_ms / 1000), (long)(mv->grace_ms % 1000) * 1000000};
    nanosleep(&t, NULL);
    if (PQstatus(r->x) != CONNECTION_OK) {
        PQfinish(r->x);
        r->x = NULL;
        if ((rc = sl_connect(r->from_url, &r->x, why, why_len)) == ST_OK)
            rc = sl_keyset_load(r->x, &r->moved, why, why_len);
        if (rc != ST_OK)
            return rc;
    }
    /* Again after a failure while the connection holds (a deadlock with a writer that
     * locks in another order, say): nothing else needs these rows. */
    for (int attempt = 1; attempt <= DELETE_ATTEMPTS; attempt++) {
        if ((rc = sl_exec(r->x, "BEGIN", why, why_len)) == ST_OK &&
            (rc = sl_delete_rows(r->x, why, why_len)) == ST_OK)
            rc = sl_exec(r->x, "COMMIT", why, why_len);
        sl_rollback(r->x);
        if (rc == ST_OK || PQstatus(r->x) != CONNECTION_OK || attempt == DELETE_ATTEMPTS)
            break;
        sl_warn("delete: %s: again (%d of %d)", why, attempt + 1, DELETE_ATTEMPTS);
    }
    if (rc == ST_OK)
        sl_log("delete: the moved rows are gone from shard %u", r->from);
    return rc;
}

/* ---- undoing a move that did not reach the bump ------------------------------------- */

/* c if it still works, else a new connection to url (NULL: none could be made). */
static PGconn *usable(PGconn **c, const char *url, char *why, size_t why_len)
{
    if (*c && PQstatus(*c) == CONNECTION_OK)
        return *c;
    PQfinish(*c);
    *c = NULL;
    return sl_connect(url, c, why, why_len) == ST_OK ? *c : NULL;
}

/* The fence first (X takes the slots' writes again at once), then I's copy; each failure
 * says what it leaves and how to end it. */
static void undo(run *r)
{
    sl_move *mv = r->mv;
    char why[600] = "";
    if (r->fenced) {
        PGconn *c = usable(&r->x, r->from_url, why, sizeof(why));
        if (c && fence(c, mv->a, mv->b, NULL, why, sizeof(why)) == ST_OK)
            sl_log("undo: the fence is lifted: shard %u takes the writes of slots %u-%u again",
                   r->from, mv->a, mv->b);
        else
            sl_warn("undo FAILED: slots %u-%u stay fenced on shard %u (%s), which refuses their "
                    "writes: run `gw_slots unfence --map URL --slots %u-%u` (or the move again)",
                    mv->a, mv->b, r->from, why, mv->a, mv->b);
    }
    if (r->copied || r->precopied) {
        PGconn *c = usable(&r->i, r->to_url, why, sizeof(why));
        char sql[400];
        /* 'gone' again: a node whose map is far behind must not write the slots there. */
        snprintf(sql, sizeof(sql),
                 "INSERT INTO gw.fence SELECT s, 'gone', (extract(epoch from clock_timestamp())"
                 " * 1000)::bigint FROM generate_series(%u, %u) s ON CONFLICT DO NOTHING; COMMIT",
                 mv->a, mv->b);
        int rc = c ? sl_exec(c, "BEGIN", why, sizeof(why)) : ST_EIO;
        if (rc == ST_OK && (rc = sl_keyset_load(c, &r->on_to, why, sizeof(why))) == ST_OK &&
            (rc = sl_delete_rows(c, why, sizeof(why))) == ST_OK)
            rc = sl_exec(c, sql, why, sizeof(why));
        sl_rollback(c);
        if (rc == ST_OK)
            sl_log("undo: the copied rows on shard %u are deleted", mv->to);
        else
            sl_warn("undo FAILED: the rows copied to shard %u stay there (%s): unused, as the map "
                    "gives shard %u none of the slots; the next move of them there replaces them",
                    mv->to, why, mv->to);
    }
}

/* ---- the move ------------------------------------------------------------------------ */

int sl_move_run(sl_move *mv, char *why, size_t why_len)
{
    run r = {.mv = mv};
    *why = 0;
    int rc = st_slot_map_read(mv->map_url, &r.map, why, why_len);
    if (rc == ST_OK && (rc = check(&r, why, why_len)) == ST_OK)
        sl_log("move: slots %u-%u, shard %u (%s) -> shard %u (%s%s), map version %" PRIu64, mv->a,
               mv->b, r.from, r.from_name, mv->to, r.to_name, mv->new_url ? ", new" : "",
               st_slot_map_version(r.map));
    if (rc == ST_OK && (rc = schema(r.from_url, r.from_name, &r.x, why, why_len)) == ST_OK &&
        (rc = schema(r.to_url, r.to_name, &r.i, why, why_len)) == ST_OK)
        sl_log("schema: both shards at version 9 or later");
    if (rc == ST_OK && (rc = precopy(&r, why, why_len)) == ST_OK) {
        sl_log("pre-copy: committed on shard %u", mv->to);
        /* A test's window between the phases (tests/store/test_slots.c). */
        const char *wait = getenv("GW_SLOTS_TEST_PAUSE_MS");
        if (wait && atoi(wait) > 0) {
            sl_log("test: %d ms before the fence", atoi(wait));
            struct timespec t = {atoi(wait) / 1000, (long)(atoi(wait) % 1000) * 1000000};
            nanosleep(&t, NULL);
        }
        rc = catch_up(&r, why, why_len);
    }
    if (rc == ST_OK && (rc = fence(r.x, mv->a, mv->b, "moving", why, why_len)) == ST_OK) {
        r.fenced = true;
        r.fenced_at = sl_ms();
        sl_log("fence: slots %u-%u fenced on shard %u: their writes are refused from now", mv->a,
               mv->b, r.from);
    }
    if (rc == ST_OK && (rc = copy(&r, why, why_len)) == ST_OK)
        sl_log("copy: committed on shard %u", mv->to);
    bool made = false;
    if (rc == ST_OK) {
        rc = bump(&r, &made, why, why_len);
        mv->pause_ms = sl_ms() - r.fenced_at;
    }
    mv->made = made;
    if (made) {
        sl_log("bump: map version %" PRIu64 " gives slots %u-%u to shard %u",
               st_slot_map_version(r.map) + 1, mv->a, mv->b, mv->to);
        sl_log("write pause: %" PRIu64 " ms (the fence's commit to the bump; each node takes the "
               "new map within 0.5 s more)",
               mv->pause_ms);
        if ((rc = finish(&r, why, why_len)) != ST_OK)
            sl_warn("the move is made, but the rows left on shard %u could not be deleted (%s): "
                    "they are unused; delete them, or run the move of slots %u-%u back there "
                    "one day (it replaces them)",
                    r.from, why, mv->a, mv->b);
    } else if (rc == ST_ESTALE) {
        sl_warn("bump: the map changed since it was read (%s): nothing is undone, slots %u-%u "
                "stay fenced on shard %u (their writes refused) with their rows copied to shard "
                "%u; run the same move again (it takes them over), or `gw_slots unfence`",
                why, mv->a, mv->b, r.from, mv->to);
        snprintf(why, why_len, "the map changed under the move: run it again");
    } else if (rc != ST_OK && (r.fenced || r.precopied || r.copied)) {
        sl_warn("failed: %s: undoing", why);
        undo(&r);
    }
    PQfinish(r.x);
    PQfinish(r.i);
    sl_keyset_release(&r.pre);
    sl_keyset_release(&r.moved);
    sl_keyset_release(&r.on_to);
    st_slot_map_free(r.map);
    return rc;
}

int sl_unfence(const char *map_url, unsigned a, unsigned b, char *why, size_t why_len)
{
    st_slot_map *m = NULL;
    int rc = st_slot_map_read(map_url, &m, why, why_len);
    if (rc != ST_OK)
        return rc;
    if (a > b || b >= ST_SLOTS) {
        st_slot_map_free(m);
        return refuse(why, why_len, "--slots A-B: slots 0..4095, A <= B");
    }
    /* Only the owner's fences: another shard's are 'gone' ones that keep stale writers off. */
    for (unsigned s = a; s <= b && rc == ST_OK;) {
        unsigned owner = st_slot_map_owner(m, s), e = s;
        while (e + 1 <= b && st_slot_map_owner(m, e + 1) == owner)
            e++;
        PGconn *c = NULL;
        if ((rc = sl_connect(st_slot_map_url(m, owner), &c, why, why_len)) == ST_OK &&
            (rc = fence(c, s, e, NULL, why, why_len)) == ST_OK)
            sl_log("unfence: slots %u-%u on shard %u take writes", s, e, owner);
        PQfinish(c);
        s = e + 1;
    }
    st_slot_map_free(m);
    return rc;
}
