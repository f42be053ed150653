/*
 * Later versions of messages on PostgreSQL (store.h, ST_OP_EDIT; the columns of schema
 * version 5): the message rows a batch's edits read, in round trip 1 after its groups are
 * locked (so no other writer changes those messages meanwhile: an edit of one message
 * through two gateways takes turns on the group's row), and the versions it made, one
 * UPDATE over arrays in key order in round trip 2. The rule (which version may follow
 * which) is store_apply.c's, the same as on RocksDB.
 *
 * A version is announced like a message: with its record when the line fits a payload,
 * else as a hint that the listener reads. The change log's line never carries the
 * record: a body recalled must not stay behind in the log for its ten minutes.
 */
#include "store_pg.h"

#include <stdlib.h>
#include <string.h>

st_id pg_msg_key(uint64_t mid, char buf[8])
{
    st_put_be64(buf, mid);
    return (st_id){buf, 8};
}

int pg_msgs_send_read(pg *p, bool *sent)
{
    size_t n = 0;
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp)
        n += r->kind == 'x';
    *sent = false;
    if (!n)
        return ST_OK;
    pg_buf a[2] = {{0}};
    pg_arr_begin(&a[0], PG_OID_TEXT, n);
    pg_arr_begin(&a[1], PG_OID_INT8, n);
    HASH_ITER (hh, p->rows, r, tmp)
        if (r->kind == 'x') {
            pg_arr_bytes(&a[0], r->a.p, r->a.n);
            pg_arr_int8(&a[1], st_get_be64(r->b.p));
        }
    pg_buf *params[2] = {&a[0], &a[1]};
    int rc = pg_send(p, PG_READ_MSGS, params, 2);
    pg_buf_free(&a[0]);
    pg_buf_free(&a[1]);
    *sent = rc == ST_OK;
    return rc;
}

int pg_msgs_take(pg *p, PGresult *r)
{
    for (int row = 0; row < PQntuples(r); row++) {
        char k[8];
        pg_row *x =
            pg_row_find(p, 'x', pg_get_id(r, row, 0), pg_msg_key(pg_get_int8(r, row, 1), k));
        if (!x)
            continue;
        size_t n = (size_t)PQgetlength(r, row, 6);
        if (!(x->rec = malloc(n ? n : 1)))
            return ST_ENOMEM;
        memcpy(x->rec, PQgetvalue(r, row, 6), n);
        x->v.x = (st_msg_row){.ts = pg_get_int8(r, row, 2),
                              .ver = pg_get_int8(r, row, 3),
                              .ver_ts = pg_get_int8(r, row, 4),
                              .recalled = pg_get_int8(r, row, 5) != 0,
                              .record = x->rec,
                              .record_n = n,
                              .cseq = pg_get_int8(r, row, 7)};
        if (!PQgetisnull(r, row, 8) &&
            !pg_msg_set_counts(x, PQgetvalue(r, row, 8), (size_t)PQgetlength(r, row, 8)))
            return ST_ENOMEM;
        x->existed = x->present = true;
    }
    return ST_OK;
}

int pg_get_msg(void *be, st_id gid, uint64_t mid, st_msg_row *m)
{
    char k[8];
    pg_row *r = pg_row_find(be, 'x', gid, pg_msg_key(mid, k));
    if (!r)
        return ST_EIO; /* not read at begin: cannot happen (want_rows names every key) */
    if (!r->present)
        return 0;
    *m = r->v.x;
    return 1;
}

void pg_put_version(void *be, st_id gid, uint64_t mid, const st_msg_row *m)
{
    char k[8];
    pg_row *r = pg_row_find(be, 'x', gid, pg_msg_key(mid, k));
    if (r) {
        /* The record is the op's, alive until the batch ends; the counts stay the row's
         * (the core hands back the ones get_msg gave, or none for a recall). */
        r->v.x = *m;
        if (m->recalled)
            r->n_rx = 0;
        r->v.x.reactions = m->recalled ? NULL : r->rx;
        r->v.x.n_reactions = m->recalled ? 0 : r->n_rx;
        r->ver_cseq = m->cseq;
        r->dirty = r->versioned = true;
    }
}

/* The batch's changed message rows in key order (NULL with *n 0: none; NULL with *n set:
 * no memory). */
static bool dirty(const pg_row *r, int arg)
{
    (void)arg;
    return r->dirty;
}

static pg_row **dirty_msgs(pg *p, size_t *n)
{
    return pg_rows_sorted(p, 'x', dirty, 0, n); /* the UPDATE's arrays: one lock order */
}

int pg_versions_send(pg *p, int *n_stmts)
{
    size_t n;
    pg_row **rows = dirty_msgs(p, &n);
    if (!rows)
        return n ? ST_ENOMEM : ST_OK;
    pg_buf a[8] = {{0}};
    static const unsigned oids[8] = {PG_OID_TEXT, PG_OID_INT8,  PG_OID_INT8, PG_OID_INT8,
                                     PG_OID_INT8, PG_OID_BYTEA, PG_OID_INT8, PG_OID_INT8};
    for (int i = 0; i < 8; i++)
        pg_arr_begin(&a[i], oids[i], n);
    for (size_t k = 0; k < n; k++) {
        const pg_row *r = rows[k];
        /* A row only a reaction changed: version 0 (its columns stay), no record sent. */
        bool v = r->versioned;
        pg_arr_bytes(&a[0], r->a.p, r->a.n);
        pg_arr_int8(&a[1], st_get_be64(r->b.p));
        pg_arr_int8(&a[2], v ? r->v.x.ver : 0);
        pg_arr_int8(&a[3], r->v.x.ver_ts);
        pg_arr_int8(&a[4], r->v.x.recalled ? 1 : 0);
        pg_arr_bytes(&a[5], v ? r->v.x.record : NULL, v ? r->v.x.record_n : 0);
        pg_arr_int8(&a[6], r->v.x.cseq);
        pg_arr_int8(&a[7], r->cts);
    }
    free(rows);
    return pg_send_arrays(p, PG_UPD_MSGS, a, 8, n_stmts);
}

void pg_versions_announce(pg *p, pg_announce *a, pg_announce *log)
{
    size_t n;
    pg_row **rows = dirty_msgs(p, &n);
    for (size_t k = 0; rows && k < n; k++) {
        if (!rows[k]->versioned)
            continue; /* a reaction's: announced from its op (pg_rx_announce) */
        uint64_t mid = st_get_be64(rows[k]->b.p);
        st_msg_row m = rows[k]->v.x;
        m.cseq = rows[k]->ver_cseq; /* the version's own change, not a later reaction's */
        pg_announce_version(a, rows[k]->a, mid, &m, true);
        pg_announce_version(log, rows[k]->a, mid, &m, false);
    }
    free(rows);
}
