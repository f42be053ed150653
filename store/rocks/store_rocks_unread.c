/*
 * The unread webhook's bookkeeping on RocksDB (store.h): the log of batches of messages,
 * the groups' swept marks and the tells, each in a column family of its own.
 *
 * One process owns the folder, so what needs a lock on PostgreSQL needs none here: the
 * store thread alone writes, and an op reads and writes its rows in one indexed batch
 * (it sees its own writes) committed with one synced write. The tells an earlier process
 * claimed and did not see taken are all adopted by the first TELL_ADOPTs of this one
 * (their owner is not this process's origin); after those, none can appear.
 *
 * The log's keys begin with the time, so a span of it is one range of keys and what is
 * older than ST_LOG_KEEP_MS goes with one range delete. Tells are pruned by a walk over
 * their column family that goes on from where it stopped, a bounded number a time.
 */
#include "store_rocks.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define TELL_HDR 17 /* be64 owner, be64 made_ms, sent */
#define PRUNE_EVERY_MS 10000
#define PRUNE_STEP 10000 /* tells looked at by one prune */

/* ---- the log: one line a run of messages of one group in a batch --------------------- */

void rk_unread_msg(rk *r, st_id gid, uint64_t mid, uint64_t ts)
{
    if (!r->unread_log)
        return;
    rk_log_line *l = r->n_lines ? &r->lines[r->n_lines - 1] : NULL;
    if (l && l->hi + 1 == mid && l->gid_n == gid.n && memcmp(l->gid, gid.p, gid.n) == 0) {
        l->hi = mid;
        return;
    }
    if (!st_room(&r->lines, &r->cap_lines, r->n_lines + 1, sizeof(*r->lines), 16))
        return; /* that line is missing: its messages are looked at by their gateway */
    l = &r->lines[r->n_lines++];
    memcpy(l->gid, gid.p, gid.n);
    l->gid_n = gid.n;
    l->lo = l->hi = mid;
    l->at_ms = ts;
}

static void log_key(rk_key *k, uint64_t at_ms, st_id gid, uint64_t hi)
{
    st_put_be64(k->b, at_ms);
    k->b[8] = (char)(unsigned char)gid.n;
    memcpy(k->b + 9, gid.p, gid.n);
    st_put_be64(k->b + 9 + gid.n, hi);
    k->n = 17 + gid.n;
}

void rk_unread_lines(rk *r)
{
    for (size_t i = 0; i < r->n_lines; i++) {
        const rk_log_line *l = &r->lines[i];
        rk_key k;
        char v[8];
        log_key(&k, l->at_ms, (st_id){l->gid, l->gid_n}, l->hi);
        st_put_be64(v, l->lo);
        rocksdb_writebatch_wi_put_cf(r->wb, r->rw.cf[RK_CF_UNREAD_LOG], k.b, k.n, v, sizeof(v));
    }
    r->n_lines = 0;
}

/* ---- rows ---------------------------------------------------------------------------- */

static void put_row(rk *r, enum rk_cf cf, const char *key, size_t key_n, const char *v, size_t n)
{
    rocksdb_writebatch_wi_put_cf(r->wb, r->rw.cf[cf], key, key_n, v, n);
}

/* A group's swept mark (0: none). */
static int get_swept(rk *r, st_id gid, uint64_t *mid)
{
    rk_key k;
    rk_key_id(&k, gid);
    char *v;
    size_t n;
    int rc = rk_get_row(r, RK_CF_UNREAD_SWEPT, k.b, k.n, &v, &n);
    *mid = rc == 1 && n == 8 ? st_get_be64(v) : 0;
    rocksdb_free(rc == 1 ? v : NULL);
    return rc < 0 ? rc : ST_OK;
}

/* ---- the ops ---------------------------------------------------------------------------- */

static int claim(rk *r, st_op *op, uint64_t now)
{
    for (size_t i = 0; i < op->n_tells; i++) {
        st_tell *t = &op->tells[i];
        char *v;
        size_t n;
        int rc = rk_get_row(r, RK_CF_UNREAD_TELLS, t->id.p, t->id.n, &v, &n);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            rocksdb_free(v);
            continue;
        }
        char *row = malloc(TELL_HDR + t->event_n);
        if (!row)
            return ST_ENOMEM;
        st_put_be64(row, r->origin);
        st_put_be64(row + 8, now);
        row[16] = 0;
        if (t->event_n)
            memcpy(row + TELL_HDR, t->event, t->event_n);
        put_row(r, RK_CF_UNREAD_TELLS, t->id.p, t->id.n, row, TELL_HDR + t->event_n);
        free(row);
        t->claimed = true;
    }
    return ST_OK;
}

static int sent(rk *r, st_op *op)
{
    for (size_t i = 0; i < op->n_tells; i++) {
        const st_tell *t = &op->tells[i];
        char *v;
        size_t n;
        int rc = rk_get_row(r, RK_CF_UNREAD_TELLS, t->id.p, t->id.n, &v, &n);
        if (rc < 0)
            return rc;
        if (rc == 1 && n >= TELL_HDR && !v[16]) {
            v[16] = 1;
            put_row(r, RK_CF_UNREAD_TELLS, t->id.p, t->id.n, v, n);
        }
        if (rc == 1)
            rocksdb_free(v);
    }
    return ST_OK;
}

/* Tells of an earlier process, not taken: this process's from now on. */
static int adopt(rk *r, st_op *op)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    if (r->adopted_all)
        return ST_OK;
    size_t limit = st_list_limit(op->limit);
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(r->rw.db, r->ropts, r->rw.cf[RK_CF_UNREAD_TELLS]);
    int rc = ST_OK;
    bool full = false;
    for (rocksdb_iter_seek_to_first(it); rc == ST_OK && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        if (vn < TELL_HDR || v[16] || st_get_be64(v) == r->origin || st_get_be64(v + 8) > op->upto)
            continue;
        if (st_list_count(op->list) == limit) {
            full = true;
            break;
        }
        char *row = malloc(vn);
        if (!row) {
            rc = ST_ENOMEM;
            break;
        }
        memcpy(row, v, vn);
        st_put_be64(row, r->origin);
        put_row(r, RK_CF_UNREAD_TELLS, k, kn, row, vn);
        free(row);
        rc = st_list_add(op->list, (st_id){NULL, 0}, 0, 0, 0, v + TELL_HDR, vn - TELL_HDR);
    }
    rocksdb_iter_destroy(it);
    /* Every tell of an earlier process was made before this one opened: once a walk
     * that was not cut short has looked that far, none is left. */
    if (rc == ST_OK && !full && op->upto >= r->opened_ms)
        r->adopted_all = true;
    return rc;
}

static int swept(rk *r, st_op *op)
{
    uint64_t cur;
    int rc = get_swept(r, op->gid, &cur);
    if (rc < 0)
        return rc;
    /* Only from where it is: past a gap it stays, and the gap is looked at again. */
    if (cur + 1 < op->from || cur >= op->upto)
        return ST_OK;
    rk_key k;
    rk_key_id(&k, op->gid);
    char v[8];
    st_put_be64(v, op->upto);
    put_row(r, RK_CF_UNREAD_SWEPT, k.b, k.n, v, sizeof(v));
    return ST_OK;
}

/* A group of the span, as its lines say. */
typedef struct span_group {
    UT_hash_handle hh;
    uint64_t lo, hi;
    size_t n;
    char gid[]; /* n bytes */
} span_group;

static int by_gid(const span_group *a, const span_group *b)
{
    return st_id_cmp((st_id){a->gid, a->n}, (st_id){b->gid, b->n});
}

static int unswept(rk *r, st_op *op)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    span_group *groups = NULL, *g, *tmp;
    rk_key lo_k, hi_k;
    st_put_be64(lo_k.b, op->from + 1);
    st_put_be64(hi_k.b, op->upto + 1);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi_k.b, 8);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->rw.db, ro, r->rw.cf[RK_CF_UNREAD_LOG]);
    int rc = ST_OK;
    for (rocksdb_iter_seek(it, lo_k.b, 8); rc == ST_OK && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        size_t gn = kn > 9 ? (unsigned char)k[8] : 0;
        if (kn != 17 + gn || gn == 0 || vn != 8)
            continue;
        st_id gid = {k + 9, gn};
        if (op->gid.n && st_id_cmp(gid, op->gid) <= 0)
            continue;
        uint64_t hi = st_get_be64(k + 9 + gn), lo = st_get_be64(v);
        HASH_FIND(hh, groups, gid.p, gn, g);
        if (!g) {
            if (!(g = malloc(sizeof(*g) + gn))) {
                rc = ST_ENOMEM;
                break;
            }
            memcpy(g->gid, gid.p, gn);
            g->n = gn;
            g->lo = lo;
            g->hi = hi;
            HASH_ADD(hh, groups, gid, gn, g);
        }
        g->lo = lo < g->lo ? lo : g->lo;
        g->hi = hi > g->hi ? hi : g->hi;
    }
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    /* The page: the first `limit` groups in gid order, those past their mark. */
    HASH_SORT(groups, by_gid);
    size_t limit = st_list_limit(op->limit), taken = 0;
    HASH_ITER (hh, groups, g, tmp) {
        if (rc == ST_OK && taken == limit)
            st_list_set_more(op->list, true);
        if (rc == ST_OK && taken < limit) {
            uint64_t mark;
            st_id gid = {g->gid, g->n};
            st_list_set_after(op->list, gid);
            rc = get_swept(r, gid, &mark);
            uint64_t lo = g->lo > mark + 1 ? g->lo : mark + 1;
            if (rc == ST_OK && lo <= g->hi)
                rc = st_list_add(op->list, gid, lo, g->hi, mark, NULL, 0);
            taken++;
        }
        HASH_DEL(groups, g);
        free(g);
    }
    return rc;
}

/* The log's lines older than it keeps go in one range delete; the tells, a step of the
 * walk. Failures are left for the next time. */
static void prune(rk *r, uint64_t now)
{
    char *err = NULL;
    char lo[8], hi[8];
    st_put_be64(lo, 0);
    st_put_be64(hi, now > ST_LOG_KEEP_MS ? now - ST_LOG_KEEP_MS : 0);
    rocksdb_delete_range_cf(r->rw.db, r->wopts, r->rw.cf[RK_CF_UNREAD_LOG], lo, 8, hi, 8, &err);
    rocksdb_free(err);
    err = NULL;
    rocksdb_writebatch_t *del = rocksdb_writebatch_create();
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(r->rw.db, r->ropts, r->rw.cf[RK_CF_UNREAD_TELLS]);
    rocksdb_iter_seek(it, r->prune_from, r->prune_from_n);
    size_t seen = 0;
    for (; rocksdb_iter_valid(it) && seen < PRUNE_STEP; rocksdb_iter_next(it), seen++) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        if (vn < TELL_HDR || st_get_be64(v + 8) + ST_TELL_KEEP_MS < now)
            rocksdb_writebatch_delete_cf(del, r->rw.cf[RK_CF_UNREAD_TELLS], k, kn);
    }
    r->prune_from_n = 0; /* from the first, next time, unless the walk goes on */
    if (rocksdb_iter_valid(it)) {
        size_t kn;
        const char *k = rocksdb_iter_key(it, &kn);
        if (kn <= sizeof(r->prune_from)) {
            memcpy(r->prune_from, k, kn);
            r->prune_from_n = kn;
        }
    }
    rocksdb_iter_destroy(it);
    if (rocksdb_writebatch_count(del))
        rocksdb_write(r->rw.db, r->wopts, del, &err);
    rocksdb_free(err);
    rocksdb_writebatch_destroy(del);
}

int rk_unread_mark_all(rk *r, char *why, size_t why_len)
{
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->rw.db, r->ropts, r->rw.cf[RK_CF_GROUPS]);
    int rc = ST_OK;
    for (rocksdb_iter_seek_to_first(it); rc == ST_OK && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        st_group_row g;
        if (rk_group_decode(v, vn, &g))
            put_row(r, RK_CF_UNREAD_SWEPT, k, kn, v, 8); /* the value begins with last_mid */
        if (rocksdb_writebatch_wi_count(r->wb) >= 10000)
            rc = rk_write(r, why, why_len);
    }
    rocksdb_iter_destroy(it);
    if (rc == ST_OK)
        rc = rk_write(r, why, why_len);
    rocksdb_writebatch_wi_clear(r->wb);
    return rc;
}

int rk_unread_op(rk *r, st_op *op, uint64_t now)
{
    switch (op->kind) {
    case ST_OP_TELL_CLAIM: return claim(r, op, now);
    case ST_OP_TELL_SENT: return sent(r, op);
    case ST_OP_TELL_ADOPT: return adopt(r, op);
    case ST_OP_SWEPT: return swept(r, op);
    case ST_OP_READ_UNSWEPT: return unswept(r, op);
    case ST_OP_SIGNAL: return ST_OK; /* one gateway: nobody to tell */
    default: return ST_EINVAL;
    }
}

void rk_unread_prune(rk *r, uint64_t now)
{
    uint64_t mono = st_mono_ms();
    if (mono >= r->prune_at) {
        r->prune_at = mono + PRUNE_EVERY_MS;
        prune(r, now);
    }
}
