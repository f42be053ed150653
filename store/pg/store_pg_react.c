/*
 * Reactions on PostgreSQL (store.h, ST_OP_REACT; the table of schema version 8). The rule
 * (what a reaction may do, the counts after it, the cseq it takes) is store_apply.c's, the
 * same as on RocksDB; here are the rows it reads and writes, in the batch's two round
 * trips like everything else:
 *   1. with the batch's other reads, the (gid, mid, uid, key) rows its reactions name
 *      (PG_READ_RX), and with the messages they change (PG_READ_MSGS) each message's counts
 *      per key, after its group is locked (no other writer changes them meanwhile);
 *   2. the rows set and cleared (PG_INS_RX, PG_DEL_RX, over arrays in key order), the
 *      reactions of the messages the batch recalled (PG_DEL_RX_MSGS), and the messages'
 *      cseq (PG_UPD_MSGS, store_pg_edit.c).
 * The counts are not stored: a page counts a message's rows (one index range of the
 * primary key (gid, mid, key, uid), at most ST_REACT_KEYS_MAX keys).
 */
#include "store_pg.h"

#include <stdlib.h>
#include <string.h>

static size_t rx_key(char *k, st_id gid, uint64_t mid, st_id uid, st_id key)
{
    size_t n = 0;
    k[n++] = (char)gid.n;
    memcpy(k + n, gid.p, gid.n);
    n += gid.n;
    st_put_be64(k + n, mid);
    n += 8;
    k[n++] = (char)uid.n;
    memcpy(k + n, uid.p, uid.n);
    n += uid.n;
    memcpy(k + n, key.p, key.n);
    return n + key.n;
}

static pg_rx *rx_find(pg *p, st_id gid, uint64_t mid, st_id uid, st_id key)
{
    char k[sizeof(((pg_rx *)0)->key)];
    size_t n = rx_key(k, gid, mid, uid, key);
    pg_rx *r = NULL;
    HASH_FIND(hh, p->rxs, k, n, r);
    return r;
}

pg_rx *pg_rx_want(pg *p, st_id gid, uint64_t mid, st_id uid, st_id key)
{
    if (gid.n > ST_MAX_ID || uid.n > ST_MAX_ID || key.n > ST_REACT_KEY_MAX)
        return NULL;
    pg_rx *r = rx_find(p, gid, mid, uid, key);
    if (r)
        return r;
    if (!(r = calloc(1, sizeof(*r))))
        return NULL;
    r->key_n = rx_key(r->key, gid, mid, uid, key);
    r->gid = (st_id){r->key + 1, gid.n};
    r->mid = mid;
    r->uid = (st_id){r->key + 1 + gid.n + 9, uid.n};
    r->rkey = (st_id){r->key + 1 + gid.n + 9 + uid.n, key.n};
    HASH_ADD(hh, p->rxs, key, r->key_n, r);
    return r;
}

void pg_rx_clear(pg *p)
{
    pg_rx *r, *tmp;
    HASH_ITER (hh, p->rxs, r, tmp) {
        HASH_DEL(p->rxs, r);
        free(r);
    }
}

/* The four arrays of a set of reactions (gid, mid, uid, key). */
static void arrays(pg_buf *a, size_t n)
{
    pg_arr_begin(&a[0], PG_OID_TEXT, n);
    pg_arr_begin(&a[1], PG_OID_INT8, n);
    pg_arr_begin(&a[2], PG_OID_TEXT, n);
    pg_arr_begin(&a[3], PG_OID_TEXT, n);
}

static void add(pg_buf *a, const pg_rx *r)
{
    pg_arr_bytes(&a[0], r->gid.p, r->gid.n);
    pg_arr_int8(&a[1], r->mid);
    pg_arr_bytes(&a[2], r->uid.p, r->uid.n);
    pg_arr_bytes(&a[3], r->rkey.p, r->rkey.n);
}

int pg_rx_send_read(pg *p, bool *sent)
{
    *sent = false;
    size_t n = HASH_COUNT(p->rxs);
    if (!n)
        return ST_OK;
    pg_buf a[4] = {{0}};
    arrays(a, n);
    pg_rx *r, *tmp;
    HASH_ITER (hh, p->rxs, r, tmp)
        add(a, r);
    int rc = pg_send_arrays(p, PG_READ_RX, a, 4, NULL);
    *sent = rc == ST_OK;
    return rc;
}

int pg_rx_take(pg *p, PGresult *r)
{
    for (int row = 0; row < PQntuples(r); row++) {
        pg_rx *x = rx_find(p, pg_get_id(r, row, 0), pg_get_int8(r, row, 1), pg_get_id(r, row, 2),
                           pg_get_id(r, row, 3));
        if (x)
            x->existed = x->present = true;
    }
    return ST_OK;
}

int pg_get_reaction(void *be, st_id gid, uint64_t mid, st_id uid, st_id key)
{
    pg_rx *r = rx_find(be, gid, mid, uid, key);
    if (!r)
        return ST_EIO; /* not read at begin: cannot happen (want_rows names every key) */
    return r->present ? 1 : 0;
}

static int by_key(const void *x, const void *y)
{
    const pg_rx *a = *(pg_rx *const *)x, *b = *(pg_rx *const *)y;
    int c = memcmp(a->key, b->key, a->key_n < b->key_n ? a->key_n : b->key_n);
    return c ? c : (a->key_n > b->key_n) - (a->key_n < b->key_n);
}

/* One statement over the reactions set (on) or cleared by the batch, in key order. */
static int send_changed(pg *p, bool on, int *n_stmts)
{
    size_t n = 0;
    pg_rx *r, *tmp;
    HASH_ITER (hh, p->rxs, r, tmp)
        n += r->dirty && r->present != r->existed && r->present == on;
    if (!n)
        return ST_OK;
    pg_rx **v = malloc(n * sizeof(*v));
    if (!v)
        return ST_ENOMEM;
    size_t k = 0;
    HASH_ITER (hh, p->rxs, r, tmp)
        if (r->dirty && r->present != r->existed && r->present == on)
            v[k++] = r;
    qsort(v, n, sizeof(*v), by_key);
    pg_buf a[4] = {{0}};
    arrays(a, n);
    for (k = 0; k < n; k++)
        add(a, v[k]);
    free(v);
    return pg_send_arrays(p, on ? PG_INS_RX : PG_DEL_RX, a, 4, n_stmts);
}

/* A message row recalled by the batch (its reactions go). */
static bool recalled(const pg_row *x, int arg)
{
    (void)arg;
    return x->versioned && x->v.x.recalled;
}

int pg_rx_send_writes(pg *p, int *n_stmts)
{
    int rc = send_changed(p, true, n_stmts);
    if (rc == ST_OK)
        rc = send_changed(p, false, n_stmts);
    if (rc != ST_OK)
        return rc;
    /* A recall drops every reaction of its message (store.h, Changes). */
    size_t n, k;
    pg_row **v = pg_rows_sorted(p, 'x', recalled, 0, &n);
    if (!v)
        return n ? ST_ENOMEM : ST_OK;
    pg_buf a[2] = {{0}};
    pg_arr_begin(&a[0], PG_OID_TEXT, n);
    pg_arr_begin(&a[1], PG_OID_INT8, n);
    for (k = 0; k < n; k++) {
        pg_arr_bytes(&a[0], v[k]->a.p, v[k]->a.n);
        pg_arr_int8(&a[1], st_get_be64(v[k]->b.p));
    }
    free(v);
    return pg_send_arrays(p, PG_DEL_RX_MSGS, a, 2, n_stmts);
}

void pg_rx_announce(pg *p, pg_announce *a, pg_announce *log)
{
    for (st_op *op = p->writes; op; op = op->next_) {
        if (op->kind != ST_OP_REACT || op->result != ST_OK || op->duplicate)
            continue;
        st_id key = {op->key, op->key_n};
        pg_announce_react(a, op->gid, op->mid, op->uid, key, op->on, op->count, op->cseq);
        pg_announce_react(log, op->gid, op->mid, op->uid, key, op->on, op->count, op->cseq);
    }
}

size_t pg_rx_parse(const char *s, size_t n, st_reaction *out, size_t max)
{
    const char *end = s + n;
    size_t k = 0;
    while (s < end && k < max) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        uint64_t count = 0;
        while (s < le && *s >= '0' && *s <= '9')
            count = count * 10 + (uint64_t)(*s++ - '0');
        /* " MINE KEY" */
        if (le - s >= 4 && s[0] == ' ' && s[2] == ' ') {
            out[k++] = (st_reaction){
                .key = {s + 3, (size_t)(le - s - 3)}, .count = count, .mine = s[1] == '1'};
        }
        s = nl ? nl + 1 : end;
    }
    return k;
}

/* The message row's counts replaced by a copy of rx (keys copied): false, no memory. */
static bool set_counts(pg_row *x, const st_reaction *rx, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += rx[i].key.n;
    st_reaction *nr = n ? malloc(n * sizeof(*nr)) : NULL;
    char *keys = bytes ? malloc(bytes) : NULL;
    if ((n && !nr) || (bytes && !keys)) {
        free(nr);
        free(keys);
        return false;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        nr[i] = rx[i];
        nr[i].mine = false;
        memcpy(keys + at, rx[i].key.p, rx[i].key.n);
        nr[i].key.p = keys + at;
        at += rx[i].key.n;
    }
    free(x->rx);
    free(x->rx_keys);
    x->rx = nr;
    x->n_rx = n;
    x->rx_keys = keys;
    x->v.x.reactions = nr;
    x->v.x.n_reactions = n;
    return true;
}

bool pg_msg_set_counts(pg_row *x, const char *text, size_t n)
{
    st_reaction rx[ST_REACT_KEYS_MAX];
    size_t k = pg_rx_parse(text, n, rx, ST_REACT_KEYS_MAX);
    return set_counts(x, rx, k);
}

void pg_put_react(void *be, st_id gid, uint64_t mid, const st_msg_row *m, st_id uid, st_id key,
                  bool on)
{
    pg *p = be;
    char k[8];
    pg_row *x = pg_row_find(p, 'x', gid, pg_msg_key(mid, k));
    pg_rx *r = rx_find(p, gid, mid, uid, key);
    if (!x || !r)
        return; /* read at begin: cannot happen */
    /* The counts are the core's for this call: copied (the keys may be the op's or the
     * row's own, which the copy replaces). */
    if (!set_counts(x, m->reactions, m->n_reactions))
        p->rx_lost = true;
    x->v.x.cseq = m->cseq;
    x->dirty = true;
    r->present = on;
    r->dirty = true;
}

void pg_put_log(void *be, st_id gid, uint64_t mid, uint64_t old_cseq, uint64_t cseq, uint64_t now)
{
    (void)old_cseq, (void)cseq; /* the log is the index on the messages' cseq */
    char k[8];
    pg_row *x = pg_row_find(be, 'x', gid, pg_msg_key(mid, k));
    if (x)
        x->cts = now;
}
