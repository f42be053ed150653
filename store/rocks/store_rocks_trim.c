/*
 * Retention on RocksDB (store.h, Retention; the rules in store_retain.c):
 *   - ST_OP_RETAIN writes the group's own retention into its row (the long value);
 *   - ST_OP_TRIM walks a page of groups and, in one synced write, deletes each one's
 *     messages below its new horizon with one range delete (a single tombstone however
 *     many messages: the write stays small) and moves the horizon in its row, so a read
 *     sees the old horizon with its messages or the new one without them. The range
 *     tombstones drop the messages' bytes when their table files are compacted; once a
 *     minute, the table files holding the ranges deleted since are marked for compaction
 *     (RocksDB's background threads do it), so the disk is reclaimed without waiting for
 *     the levels to fill, and the rest of the store is not rewritten for it;
 *   - a horizon that moves takes the group's next cseq (store.h, Changes: op->changed),
 *     and the deleted messages' reactions go in the same write; the same pass moves each
 *     group's change log start (changes_keep, changes_keep_ms) and deletes the entries
 *     below it with one range delete;
 *   - the (uid, cid) rows of deleted messages are keyed by sender, not by group: a
 *     compaction filter on their family drops a row whose message is below its group's
 *     horizon, or whose group is gone. A resend of such a cid until then still answers
 *     its old mid (the message was stored; it is gone since).
 */
#include "store_rocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPACT_EVERY_MS 60000
#define RANGES_MAX 1024 /* deleted ranges listed for the next hint; past it, the family */

int rk_retain(rk *r, st_op *op)
{
    st_group_row g;
    int rc = rk_group_row(r, op->gid, &g);
    if (rc <= 0)
        return rc < 0 ? rc : ST_ENOGROUP;
    g.retain = op->retain;
    rk_put_group(r, op->gid, &g);
    return ST_OK;
}

/* The first mid from g's horizon (at most ST_TRIM_STEP on) whose message was sent at or
 * after `since`; when none was, the one after the last looked at. */
static int first_young(rk *r, st_id gid, const st_group_row *g, uint64_t since, uint64_t *young)
{
    uint64_t upto = g->first_mid + ST_TRIM_STEP;
    *young = (upto < g->last_mid ? upto : g->last_mid) + 1;
    rk_key lo, hi;
    rk_key_msg(&lo, gid, g->first_mid);
    rk_key_msg(&hi, gid, *young);
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it = rk_range(r, RK_CF_MSGS, &lo, &hi, &ro, NULL);
    for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        st_msg m;
        if (kn >= 8 && rk_msg_decode(v, vn, &m, NULL) && m.ts >= since) {
            *young = st_get_be64(k + kn - 8);
            break;
        }
    }
    return rk_iter_end(it, ro, ST_OK);
}

/* The lowest ack of gid's members (none: last_mid, nobody lacks anything). */
static int lowest_ack(rk *r, st_id gid, uint64_t last_mid, uint64_t *min_ack)
{
    *min_ack = last_mid;
    rk_key lo;
    rk_key_id(&lo, gid);
    rocksdb_readoptions_t *ro;
    rk_key end;
    rocksdb_iterator_t *it = rk_range(r, RK_CF_MEMBERS, &lo, NULL, &ro, &end);
    for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t vn;
        const char *v = rocksdb_iter_value(it, &vn);
        st_member_row m;
        if (rk_member_decode(v, vn, &m) && m.ack < *min_ack)
            *min_ack = m.ack;
    }
    return rk_iter_end(it, ro, ST_OK);
}

/* A deleted range, for the next compaction hint. */
static void note_range(rk *r, const rk_key *lo, const rk_key *hi)
{
    if (r->trim.all)
        return;
    if (r->trim.n_ranges == r->trim.cap_ranges) {
        size_t cap = r->trim.cap_ranges ? 2 * r->trim.cap_ranges : 64;
        rk_key *nr = cap <= RANGES_MAX ? realloc(r->trim.ranges, 2 * cap * sizeof(*nr)) : NULL;
        if (!nr) {
            r->trim.all = true; /* the whole family, then */
            return;
        }
        r->trim.ranges = nr;
        r->trim.cap_ranges = cap;
    }
    r->trim.ranges[2 * r->trim.n_ranges] = *lo;
    r->trim.ranges[2 * r->trim.n_ranges + 1] = *hi;
    r->trim.n_ranges++;
}

/* The reactions of gid's messages [lo, hi) go, both rows of each (the by-user rows are
 * found through the by-message ones). */
static int drop_reactions(rk *r, rocksdb_writebatch_t *wb, st_id gid, uint64_t lo, uint64_t hi)
{
    rk_key klo, khi;
    rk_key_msg(&klo, gid, lo);
    rk_key_msg(&khi, gid, hi);
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it = rk_range(r, RK_CF_REACTIONS, &klo, &khi, &ro, NULL);
    bool any = false;
    for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kn;
        const char *k = rocksdb_iter_key(it, &kn);
        st_id g, key, uid;
        uint64_t mid;
        if (rk_react_key_parse(k, kn, &g, &mid, &key, &uid)) {
            rk_key ku;
            rk_key_user_react(&ku, uid, g, mid, key);
            rocksdb_writebatch_delete_cf(wb, r->rw.cf[RK_CF_USER_REACTIONS], ku.b, ku.n);
        }
        any = true;
    }
    if (any)
        rocksdb_writebatch_delete_range_cf(wb, r->rw.cf[RK_CF_REACTIONS], klo.b, klo.n, khi.b,
                                           khi.n);
    return rk_iter_end(it, ro, ST_OK);
}

/* Where the change log may begin (store.h, Changes): past what changes_keep leaves out,
 * and past the entries older than changes_keep_ms (at most ST_TRIM_STEP looked at a
 * pass). */
static int log_start(rk *r, st_id gid, const st_group_row *g, uint64_t now, uint64_t *first)
{
    *first = st_changes_first_for(g->changes_first, g->last_cseq, r->changes_keep);
    if (!r->changes_keep_ms || now <= r->changes_keep_ms)
        return ST_OK;
    uint64_t old = now - r->changes_keep_ms;
    rk_key lo, hi;
    rk_key_msg(&lo, gid, *first);
    rk_key_msg(&hi, gid, g->last_cseq + 1);
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it = rk_range(r, RK_CF_CHANGES, &lo, &hi, &ro, NULL);
    for (size_t n = 0; rocksdb_iter_valid(it) && n < ST_TRIM_STEP; rocksdb_iter_next(it), n++) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        if (kn < 8 || vn != 16 || st_get_be64(v + 8) >= old)
            break; /* the first young entry: the log from it on stays */
        *first = st_get_be64(k + kn - 8) + 1;
    }
    return rk_iter_end(it, ro, ST_OK);
}

/* One group of the pass: its horizon moved in wb when the rule asks (a change: it takes
 * a cseq), and its change log's start as changes_keep says. */
static int trim_group(rk *r, st_op *op, rocksdb_writebatch_t *wb, st_id gid, st_group_row *g,
                      uint64_t now)
{
    st_retain eff = st_retain_of(&g->retain, &op->retain);
    uint64_t young = g->last_mid + 1, min_ack = g->last_mid;
    int rc = ST_OK;
    if (st_retain_by_age(&eff))
        rc = first_young(r, gid, g, now > eff.ms ? now - eff.ms : 0, &young);
    if (rc == ST_OK && st_retain_by_acks(&eff))
        rc = lowest_ack(r, gid, g->last_mid, &min_ack);
    if (rc != ST_OK)
        return rc;
    uint64_t h = st_retain_horizon(&eff, g->first_mid, g->last_mid, young, min_ack);
    uint64_t cf = g->changes_first;
    if ((rc = log_start(r, gid, g, now, &cf)) != ST_OK)
        return rc;
    if (h <= g->first_mid && cf <= g->changes_first)
        return ST_OK;
    rk_key lo, hi, k;
    if (h > g->first_mid) {
        rk_key_msg(&lo, gid, g->first_mid);
        rk_key_msg(&hi, gid, h);
        rocksdb_writebatch_delete_range_cf(wb, r->rw.cf[RK_CF_MSGS], lo.b, lo.n, hi.b, hi.n);
        if ((rc = drop_reactions(r, wb, gid, g->first_mid, h)) != ST_OK)
            return rc;
        op->applied += (size_t)(h - g->first_mid);
        g->first_mid = h;
        note_range(r, &lo, &hi);
        if ((rc = rk_changed(op, gid, ++g->last_cseq)) != ST_OK)
            return rc;
        /* Its change entries below the horizon are never read again; the count and age
         * rules delete them as the log's start passes them. */
    }
    if (cf > g->changes_first) {
        rk_key_msg(&lo, gid, g->changes_first);
        rk_key_msg(&hi, gid, cf);
        rocksdb_writebatch_delete_range_cf(wb, r->rw.cf[RK_CF_CHANGES], lo.b, lo.n, hi.b, hi.n);
        g->changes_first = cf;
    }
    char v[RK_GROUP_VAL_MAX];
    rk_key_id(&k, gid);
    rocksdb_writebatch_put_cf(wb, r->rw.cf[RK_CF_GROUPS], k.b, k.n, v, rk_group_encode(g, v));
    return ST_OK;
}

/* Once a minute with trims: the table files holding what they deleted marked for
 * compaction in the background (a hint: one not taken is no trouble). The (uid, cid)
 * rows are keyed by sender, spread over their whole family: their filter drops them as
 * the family's own compactions come. */
static void hint_compaction(rk *r)
{
    uint64_t mono = st_mono_ms();
    if ((!r->trim.n_ranges && !r->trim.all) || mono < r->trim.compact_at)
        return;
    r->trim.compact_at = mono + COMPACT_EVERY_MS;
    char *err = NULL;
    if (r->trim.all) {
        rocksdb_suggest_compact_range_cf(r->rw.db, r->rw.cf[RK_CF_MSGS], NULL, 0, NULL, 0, &err);
        rocksdb_free(err);
    }
    for (size_t i = 0; !r->trim.all && i < r->trim.n_ranges; i++) {
        const rk_key *lo = &r->trim.ranges[2 * i], *hi = &r->trim.ranges[2 * i + 1];
        err = NULL;
        rocksdb_suggest_compact_range_cf(r->rw.db, r->rw.cf[RK_CF_MSGS], lo->b, lo->n, hi->b, hi->n,
                                         &err);
        rocksdb_free(err);
    }
    r->trim.n_ranges = 0;
    r->trim.all = false;
}

int rk_trim(rk *r, st_op *op, uint64_t now, char *why, size_t why_len)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    size_t limit = st_list_limit(op->limit);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->rw.db, r->ropts, r->rw.cf[RK_CF_GROUPS]);
    rk_key from;
    if (op->gid.n) {
        rk_key_id(&from, op->gid);
        rocksdb_iter_seek(it, from.b, from.n);
        if (rocksdb_iter_valid(it)) { /* after it, exclusive */
            size_t kn;
            const char *k = rocksdb_iter_key(it, &kn);
            if (kn == from.n && memcmp(k, from.b, kn) == 0)
                rocksdb_iter_next(it);
        }
    } else {
        rocksdb_iter_seek_to_first(it);
    }
    int rc = ST_OK;
    size_t n = 0;
    for (; rc == ST_OK && rocksdb_iter_valid(it) && n < limit; rocksdb_iter_next(it), n++) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        st_group_row g;
        if (kn < 2 || (size_t)(unsigned char)k[0] != kn - 1 || !rk_group_decode(v, vn, &g))
            continue;
        st_id gid = {k + 1, kn - 1};
        st_list_set_after(op->list, gid);
        rc = trim_group(r, op, wb, gid, &g, now);
        if (rc == ST_OK && g.first_mid > 1)
            rc = st_list_add(op->list, gid, g.first_mid, g.last_mid, 0, NULL, 0);
    }
    st_list_set_more(op->list, rc == ST_OK && rocksdb_iter_valid(it));
    rocksdb_iter_destroy(it);
    if (rc == ST_OK && rocksdb_writebatch_count(wb) > 0) {
        char *err = NULL;
        rocksdb_write(r->rw.db, r->wopts, wb, &err);
        if (err) {
            snprintf(why, why_len, "deleting messages past retention failed: %s", err);
            rocksdb_free(err);
            rc = ST_EIO;
        }
    }
    rocksdb_writebatch_destroy(wb);
    if (rc == ST_OK)
        hint_compaction(r);
    return rc;
}

/* ---- the (uid, cid) rows' filter --------------------------------------------------------- */

/* Drop a row whose message is below its group's horizon, or whose group is gone. Runs on
 * RocksDB's compaction threads; a row it cannot decide about (no handle, a failed read) stays. */
static unsigned char sends_filter(void *state, int level, const char *key, size_t key_n,
                                  const char *v, size_t vn, char **new_v, size_t *new_vn,
                                  unsigned char *changed)
{
    (void)level, (void)key, (void)key_n, (void)new_v, (void)new_vn;
    *changed = 0;
    rk *r = state;
    rocksdb_t *db = atomic_load(&r->trim.db);
    rocksdb_column_family_handle_t *cf = atomic_load(&r->trim.groups);
    if (!db || !cf || vn <= RK_SEND_HDR || vn - RK_SEND_HDR > ST_MAX_ID)
        return 0;
    rk_key k;
    rk_key_id(&k, (st_id){v + RK_SEND_HDR, vn - RK_SEND_HDR});
    char *err = NULL;
    size_t n = 0;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    char *g = rocksdb_get_cf(db, ro, cf, k.b, k.n, &n, &err);
    rocksdb_readoptions_destroy(ro);
    unsigned char drop = 0;
    st_group_row row;
    if (err)
        rocksdb_free(err);
    else if (!g)
        drop = 1; /* the group was deleted */
    else if (rk_group_decode(g, n, &row))
        drop = st_get_be64(v) < row.first_mid;
    rocksdb_free(g);
    return drop;
}

static const char *sends_filter_name(void *state)
{
    (void)state;
    return "gw.sends_below_horizon";
}

static void sends_filter_free(void *state)
{
    (void)state; /* the rk is not the filter's */
}

rocksdb_compactionfilter_t *rk_sends_filter_new(rk *r)
{
    return rocksdb_compactionfilter_create(r, sends_filter_free, sends_filter, sends_filter_name);
}

void rk_sends_filter_db(rk *r, rk_db *d)
{
    atomic_store(&r->trim.groups, d ? d->cf[RK_CF_GROUPS] : NULL);
    atomic_store(&r->trim.db, d ? d->db : NULL);
}
