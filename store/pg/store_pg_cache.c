/*
 * The fast path of a PostgreSQL batch: one round trip instead of two.
 *
 * Round trip 1 of a batch reads the rows its ops will read. For a batch of appends to
 * groups this connection has written before, it would read back what it already knows:
 * the groups' last_mid (which only this connection moved, as long as no other gateway
 * writes the group) and the senders' memberships. So the connection keeps those rows as
 * it last saw them, and a batch of appends whose rows are all here is applied to them at
 * once; its writes then start with a check, in the same transaction, that the cache was
 * right: gw.expect locks the groups in key order (as round trip 1 would) and fails with
 * GW001 unless each is at the last_mid the batch began from and each membership exists.
 * A (uid, cid) is not cached: a resend collides with its row on insert (unique_violation).
 * Either failure rolls the whole transaction back, and the core applies the batch again;
 * its groups then go the slow way for a while, since another writer is busy there. So
 * the cache can make a batch cheaper, never different.
 */
#include "store_pg.h"

#include <stdlib.h>
#include <string.h>

#define CACHE_MAX 200000 /* rows; past it the cache starts again empty */
#define SLOW_MS 10000    /* a group another writer touched goes the slow way this long */

static const st_id none = {NULL, 0};

static pg_row *cache_find(pg *p, const pg_row *like)
{
    pg_row *c = NULL;
    HASH_FIND(hh, p->cache, like->key, like->key_n, c);
    return c;
}

void pg_cache_clear(pg *p)
{
    pg_row *c, *tmp;
    HASH_ITER (hh, p->cache, c, tmp) {
        HASH_DEL(p->cache, c);
        free(c);
    }
    p->n_cache = 0;
}

/* The cached row of kind (a, b), if it may serve a batch now. */
static const pg_row *usable(pg *p, char kind, st_id a, st_id b, uint64_t now)
{
    pg_row probe;
    pg_row *r = pg_row_want(p, kind, a, b); /* the batch's row: it has the key */
    if (!r)
        return NULL;
    memcpy(probe.key, r->key, r->key_n);
    probe.key_n = r->key_n;
    const pg_row *c = cache_find(p, &probe);
    return c && c->present && now >= c->slow_until ? c : NULL;
}

bool pg_cache_fill(pg *p, st_op *writes)
{
    uint64_t now = st_mono_ms();
    for (st_op *op = writes; op; op = op->next_) {
        if (op->kind != ST_OP_APPEND)
            return false;
        if (pg_fence_refuses(p, op))
            continue; /* left out of the batch (store_pg_fence.c) */
        const pg_row *g = usable(p, 'g', op->gid, none, now);
        const pg_row *m = g ? usable(p, 'm', op->gid, op->uid, now) : NULL;
        pg_row *s = m ? pg_row_want(p, 's', op->uid, op->cid) : NULL;
        if (!s)
            return false;
        pg_row *rg = pg_row_find(p, 'g', op->gid, none);
        pg_row *rm = pg_row_find(p, 'm', op->gid, op->uid);
        rg->existed = rg->present = true;
        rg->v.g = g->v.g;
        rg->read_last_mid = g->v.g.last_mid;
        rm->existed = rm->present = true;
        rm->v.m = m->v.m;
        /* s: not cached; assumed new, and checked by its key on insert. */
    }
    return true;
}

int pg_cache_send_check(pg *p, int *n_stmts)
{
    size_t ng = 0, nm = 0;
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp)
        ng += r->kind == 'g', nm += r->kind == 'm';
    pg_buf a[4] = {{0}};
    pg_arr_begin(&a[0], PG_OID_TEXT, ng);
    pg_arr_begin(&a[1], PG_OID_INT8, ng);
    pg_arr_begin(&a[2], PG_OID_TEXT, nm);
    pg_arr_begin(&a[3], PG_OID_TEXT, nm);
    HASH_ITER (hh, p->rows, r, tmp) {
        if (r->kind == 'g') {
            pg_arr_bytes(&a[0], r->a.p, r->a.n);
            pg_arr_int8(&a[1], r->read_last_mid);
        } else if (r->kind == 'm') {
            pg_arr_bytes(&a[2], r->a.p, r->a.n);
            pg_arr_bytes(&a[3], r->b.p, r->b.n);
        }
    }
    return pg_send_arrays(p, PG_EXPECT, a, 4, n_stmts);
}

void pg_cache_keep(pg *p)
{
    if (p->n_cache > CACHE_MAX)
        pg_cache_clear(p);
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp) {
        if (r->kind == 's' || r->kind == 'x')
            continue;
        pg_row *c = cache_find(p, r);
        if (!r->present) {
            if (c) {
                HASH_DEL(p->cache, c);
                free(c);
                p->n_cache--;
            }
            continue;
        }
        if (!c) {
            if (!(c = malloc(sizeof(*c))))
                continue;
            *c = *r;
            c->slow_until = 0;
            c->a.p = c->key + 2;
            if (c->b.n)
                c->b.p = c->key + 3 + c->a.n;
            HASH_ADD(hh, p->cache, key, c->key_n, c);
            p->n_cache++;
        }
        c->v = r->v;
        c->present = true;
    }
}

void pg_cache_stale(pg *p)
{
    uint64_t until = st_mono_ms() + SLOW_MS;
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp) {
        pg_row *c = r->kind == 's' || r->kind == 'x' ? NULL : cache_find(p, r);
        if (c)
            c->slow_until = until;
    }
}
