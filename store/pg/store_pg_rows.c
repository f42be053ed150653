/*
 * The rows of a PostgreSQL batch, by key (kind, then the ids): found, added, and put in
 * one lock order. Called by the batch (store_pg.c), the fast path (store_pg_cache.c), edits
 * and reactions; calls nothing of the backend's, so none of those loop through it.
 */
#include "store_pg.h"

#include <stdlib.h>
#include <string.h>

static size_t make_key(char *key, char kind, st_id a, st_id b)
{
    size_t n = 0;
    key[n++] = kind;
    key[n++] = (char)a.n;
    memcpy(key + n, a.p, a.n);
    n += a.n;
    if (b.n) {
        key[n++] = (char)b.n;
        memcpy(key + n, b.p, b.n);
        n += b.n;
    }
    return n;
}

pg_row *pg_row_find(pg *p, char kind, st_id a, st_id b)
{
    char key[sizeof(((pg_row *)0)->key)];
    size_t n = make_key(key, kind, a, b);
    pg_row *r = NULL;
    HASH_FIND(hh, p->rows, key, n, r);
    return r;
}

/* The row for (kind, a, b), added (not existing, not present) if new. NULL: no memory. */
pg_row *pg_row_want(pg *p, char kind, st_id a, st_id b)
{
    pg_row *r = pg_row_find(p, kind, a, b);
    if (r)
        return r;
    if (!(r = calloc(1, sizeof(*r))))
        return NULL;
    r->kind = kind;
    r->key_n = make_key(r->key, kind, a, b);
    r->a = (st_id){r->key + 2, a.n};
    r->b = b.n ? (st_id){r->key + 3 + a.n, b.n} : (st_id){NULL, 0};
    HASH_ADD(hh, p->rows, key, r->key_n, r);
    return r;
}

int pg_row_by_key(const void *x, const void *y)
{
    const pg_row *a = *(pg_row *const *)x, *b = *(pg_row *const *)y;
    int c = memcmp(a->key, b->key, a->key_n < b->key_n ? a->key_n : b->key_n);
    return c ? c : (a->key_n > b->key_n) - (a->key_n < b->key_n);
}
