/*
 * The unread webhook's bookkeeping on PostgreSQL (store.h; the tables of schema version
 * 3, store_pg_schema.c), and signals (a NOTIFY that stores nothing). Each op is one statement in a
 * transaction of its own (its own Sync), so that one failing fails no other; all of them go in one
 * round trip.
 *
 * Across gateways: a claim is an insert on the tells' primary key, so of two gateways
 * claiming one event one makes it; a swept mark moves by an update of its row, which
 * orders two; adoption takes rows whose owner's advisory lock is free (store_pg_wire.c),
 * locking them, so that two adopters never take the same one. What READ_UNSWEPT reads is
 * the change log: its rows are written by the batches themselves, in their transactions.
 */
#include "store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ids in byte order, so that two claims of the same ids insert them in one order. */
static int by_id(const void *a, const void *b)
{
    return st_id_cmp((*(const st_tell *const *)a)->id, (*(const st_tell *const *)b)->id);
}

/* Queues the statement of one op; b holds its parameters. */
static int send_op(pg *p, st_op *op, uint64_t now, pg_buf *b)
{
    pg_buf *params[4] = {&b[0], &b[1], &b[2], &b[3]};
    switch (op->kind) {
    case ST_OP_TELL_CLAIM:
    case ST_OP_TELL_SENT: {
        const st_tell **sorted = malloc(op->n_tells * sizeof(*sorted));
        if (!sorted)
            return ST_ENOMEM;
        for (size_t i = 0; i < op->n_tells; i++)
            sorted[i] = &op->tells[i];
        qsort(sorted, op->n_tells, sizeof(*sorted), by_id);
        pg_arr_begin(&b[0], PG_OID_TEXT, op->n_tells);
        pg_arr_begin(&b[3], PG_OID_TEXT, op->n_tells);
        for (size_t i = 0; i < op->n_tells; i++) {
            pg_arr_bytes(&b[0], sorted[i]->id.p, sorted[i]->id.n);
            pg_arr_bytes(&b[3], sorted[i]->event ? sorted[i]->event : "", sorted[i]->event_n);
        }
        free(sorted);
        if (op->kind == ST_OP_TELL_SENT)
            return pg_send(p, PG_TELL_SENT, params, 1);
        pg_int8(&b[1], p->origin);
        pg_int8(&b[2], now);
        return pg_send(p, PG_TELL_CLAIM, params, 4);
    }
    case ST_OP_TELL_ADOPT:
        pg_int8(&b[0], p->origin);
        pg_int8(&b[1], op->upto);
        pg_int8(&b[2], st_list_limit(op->limit));
        return pg_send(p, PG_TELL_ADOPT, params, 3);
    case ST_OP_SWEPT:
        pg_text(&b[0], op->gid.p, op->gid.n);
        pg_int8(&b[1], op->from);
        pg_int8(&b[2], op->upto);
        return pg_send(p, PG_SWEPT, params, 3);
    case ST_OP_READ_UNSWEPT:
        pg_int8(&b[0], op->from);
        pg_int8(&b[1], op->upto);
        pg_text(&b[2], op->gid.n ? op->gid.p : "", op->gid.n);
        pg_int8(&b[3], st_list_limit(op->limit));
        return pg_send(p, PG_UNSWEPT, params, 4);
    case ST_OP_SIGNAL: {
        char h[32];
        int hn = snprintf(h, sizeof(h), "gw1 %016" PRIx64, p->origin);
        pg_text(&b[0], h, (size_t)hn);
        pg_buf_put(&b[0], op->record, op->record_n);
        return pg_send(p, PG_SIGNAL, params, 1);
    }
    default: return ST_EINVAL;
    }
}

/* The claimed ids that came back mark their tells. */
static int claimed_of(const PGresult *r, st_op *op)
{
    for (int i = 0; i < PQntuples(r); i++) {
        st_id id = pg_get_id(r, i, 0);
        for (size_t j = 0; j < op->n_tells; j++)
            if (!op->tells[j].claimed && st_id_cmp(op->tells[j].id, id) == 0) {
                op->tells[j].claimed = true;
                break;
            }
    }
    return ST_OK;
}

static int adopted_of(const PGresult *r, st_op *op)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    for (int i = 0; i < PQntuples(r); i++) {
        int rc = st_list_add(op->list, (st_id){NULL, 0}, 0, 0, 0, PQgetvalue(r, i, 0),
                             (size_t)PQgetlength(r, i, 0));
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

/* The page of groups: those past their mark; the one more row says there are more. */
static int unswept_of(const PGresult *r, st_op *op)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    size_t limit = st_list_limit(op->limit), n = (size_t)PQntuples(r);
    st_list_set_more(op->list, n > limit);
    for (size_t i = 0; i < n && i < limit; i++) {
        uint64_t lo = pg_get_int8(r, (int)i, 1), hi = pg_get_int8(r, (int)i, 2);
        uint64_t mark = pg_get_int8(r, (int)i, 3);
        st_list_set_after(op->list, pg_get_id(r, (int)i, 0));
        if (lo < mark + 1)
            lo = mark + 1;
        if (lo > hi)
            continue;
        int rc = st_list_add(op->list, pg_get_id(r, (int)i, 0), lo, hi, mark, NULL, 0);
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

/* Ops made in round trips of their own, before the others. */
static bool own_trip(const st_op *op)
{
    return op->kind == ST_OP_ERASE_USER || op->kind == ST_OP_DELETE_GROUP ||
           op->kind == ST_OP_RETAIN || op->kind == ST_OP_TRIM;
}

int pg_unread(void *be, st_op *ops, uint64_t now, char *why, size_t why_len)
{
    pg *p = be;
    pg_buf b[4] = {{0}};
    int rc = p->conn ? ST_OK : ST_EIO;
    /* Erasures first, each a transaction of its own in round trips of its own. */
    for (st_op *op = ops; rc == ST_OK && op; op = op->next_)
        if (op->kind == ST_OP_ERASE_USER)
            rc = pg_erase_user(p, op, now, why, why_len);
        else if (op->kind == ST_OP_DELETE_GROUP)
            rc = pg_delete_group(p, op, why, why_len);
        else if (op->kind == ST_OP_RETAIN)
            rc = pg_retain(p, op, why, why_len);
        else if (op->kind == ST_OP_TRIM)
            rc = pg_trim(p, op, now, why, why_len);
    for (st_op *op = ops; rc == ST_OK && op; op = op->next_) {
        if (own_trip(op))
            continue;
        rc = send_op(p, op, now, b);
        if (rc == ST_OK)
            rc = PQpipelineSync(p->conn) == 1 ? ST_OK : ST_EIO;
    }
    for (int i = 0; i < 4; i++)
        pg_buf_free(&b[i]);
    if (rc == ST_OK)
        rc = pg_sync(p, why, why_len); /* flushes; its own Sync ends nothing */
    if (rc != ST_OK) {
        if (!why[0])
            pg_why(p, NULL, "sending to the database failed", why, why_len);
        pg_disconnect(p);
        for (st_op *op = ops; op; op = op->next_)
            op->result = ST_EIO;
        return ST_EIO;
    }
    for (st_op *op = ops; op; op = op->next_) {
        if (own_trip(op))
            continue; /* answered above */
        PGresult *r = rc == ST_OK ? pg_result(p, why, why_len) : NULL;
        if (!r) {
            rc = ST_EIO;
            op->result = ST_EIO;
            continue;
        }
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
            op->result = ST_EIO; /* this statement failed (its transaction with it) */
        else if (op->kind == ST_OP_TELL_CLAIM)
            op->result = claimed_of(r, op);
        else if (op->kind == ST_OP_TELL_ADOPT)
            op->result = adopted_of(r, op);
        else if (op->kind == ST_OP_READ_UNSWEPT)
            op->result = unswept_of(r, op);
        else
            op->result = ST_OK;
        PQclear(r);
        if (op->result != ST_OK) {
            st_read_discard(op);
            if (op->kind == ST_OP_TELL_CLAIM)
                for (size_t i = 0; i < op->n_tells; i++)
                    op->tells[i].claimed = false;
        }
        if (pg_end(p, why, why_len) != ST_OK)
            rc = ST_EIO;
    }
    if (rc == ST_OK)
        rc = pg_end(p, why, why_len); /* the flushing Sync's */
    return rc;
}
