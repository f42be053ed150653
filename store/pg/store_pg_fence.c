/*
 * Shards (store.h): a shard's writes and the fences of slot moves. A sharded store's every
 * write transaction begins with gw.fenced(its slots) (schema version 9): it waits while a
 * move makes or lifts a fence, and fails with GW002, naming the fenced slots of the batch,
 * when one of them is fenced. The batch is then applied again without the ops of those
 * slots (st_backend.refuses), which are answered ST_EIO, as when the database is away: the
 * clients retry, and by then the gateway's map sends them to the slot's new shard.
 *
 * What is learned is kept a few seconds: long enough for the nodes to read the new map
 * (store/shard/ reads it every half second), short enough that a slot moved back here is
 * served again without a restart.
 */
#include "store_pg.h"

#include <stdlib.h>
#include <string.h>

#define FENCED_KEEP_MS 3000u

/* The slots an op writes: its group's, or (a user's own rows) its users'. */
static void each_slot(const st_op *op, void (*fn)(void *ud, unsigned slot), void *ud)
{
    switch (op->kind) {
    case ST_OP_ACKS:
        for (size_t i = 0; i < op->n_acks; i++)
            fn(ud, st_slot_of(op->acks[i].gid));
        break;
    case ST_OP_SEEN:
        for (size_t i = 0; i < op->n_seen; i++)
            fn(ud, st_slot_of(op->seen[i].uid));
        break;
    case ST_OP_SIGNOUT: fn(ud, st_slot_of(op->uid)); break;
    default: fn(ud, st_slot_of(op->gid)); break;
    }
}

static void is_fenced(void *ud, unsigned slot)
{
    void **a = ud;
    const pg *p = a[0];
    if (p->fenced[slot / 8] & (1u << (slot % 8)))
        *(bool *)a[1] = true;
}

void pg_fence_expire(pg *p)
{
    if (p->fenced_until_ms && st_mono_ms() >= p->fenced_until_ms) {
        memset(p->fenced, 0, sizeof(p->fenced));
        p->fenced_until_ms = 0;
    }
}

bool pg_fence_refuses(void *be, const st_op *op)
{
    pg *p = be;
    if (!p->fenced_until_ms)
        return false;
    bool hit = false;
    void *a[2] = {p, &hit};
    each_slot(op, is_fenced, a);
    return hit;
}

static void mark(void *ud, unsigned slot)
{
    uint8_t *seen = ud;
    seen[slot / 8] |= (uint8_t)(1u << (slot % 8));
}

int pg_fence_send(pg *p, int *n_stmts)
{
    if (!p->slots)
        return ST_OK;
    uint8_t seen[ST_SLOTS / 8] = {0};
    size_t n = 0;
    for (const st_op *op = p->writes; op; op = op->next_)
        if (op->result != ST_EMOVED && op->kind != ST_OP_SIGNAL)
            each_slot(op, mark, seen);
    for (unsigned s = 0; s < ST_SLOTS; s++)
        n += (seen[s / 8] >> (s % 8)) & 1;
    pg_buf a[1] = {{0}};
    pg_arr_begin(&a[0], PG_OID_INT8, n);
    for (unsigned s = 0; s < ST_SLOTS; s++)
        if ((seen[s / 8] >> (s % 8)) & 1)
            pg_arr_int8(&a[0], s);
    return pg_send_arrays(p, PG_FENCED, a, 1, n_stmts);
}

void pg_fence_learn(pg *p, const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *detail = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : NULL;
    if (!state || strcmp(state, "GW002") != 0 || !detail)
        return;
    for (const char *d = detail; *d;) {
        char *end;
        unsigned long s = strtoul(d, &end, 10);
        if (end == d)
            break;
        if (s < ST_SLOTS)
            p->fenced[s / 8] |= (uint8_t)(1u << (s % 8));
        d = *end == ',' ? end + 1 : end;
    }
    p->fenced_until_ms = st_mono_ms() + FENCED_KEEP_MS;
}

int pg_fence_send_one(pg *p, const st_id *gid, int *n_stmts)
{
    if (!p->slots)
        return ST_OK;
    pg_buf a[1] = {{0}};
    pg_arr_begin(&a[0], PG_OID_INT8, 1);
    pg_arr_int8(&a[0], gid ? st_slot_of(*gid) : (uint64_t)-1); /* -1: any move under way */
    return pg_send_arrays(p, PG_FENCED, a, 1, n_stmts);
}
