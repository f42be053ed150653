/*
 * Retention on PostgreSQL (store.h, Retention; the rules in store_retain.c):
 *   - ST_OP_RETAIN updates the group's own retention in its row;
 *   - ST_OP_TRIM reads a page of groups with what the rules need (one statement), then
 *     trims each group whose horizon moves in a transaction of its own (one statement:
 *     the horizon, the messages and their (uid, cid) rows), all in one round trip. Batched
 *     deletes rather than partitions: a group's messages are one range of the primary key
 *     whatever their age, a pass deletes at most ST_TRIM_STEP of a group, and the space
 *     they leave is reused by the next inserts once (auto)vacuum has seen it, so the
 *     tables stay the size of what is kept. Partitions by time would drop whole tables
 *     but cannot follow a per-group count.
 * Several gateways may run passes over one database: a horizon only moves up, so two
 * passes over a group trim it once.
 *
 * A horizon moved takes the group's next cseq (store.h) in the same statement, and its
 * reactions below go too. The retention of changes (st_options.changes_keep, _ms) moves
 * the group's changes_first up in the same pass: by count, to last_cseq - N + 1; by age,
 * past the last entry of the log older than the age. The log's entries below it stay (a
 * message's cseq is also what pages show); they are never read again. The groups whose
 * last cseq moved are told to the other gateways ('c' lines, store_pg_events.c).
 */
#include "store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int lost(pg *p, st_op *op, char *why, size_t why_len)
{
    if (!why[0])
        pg_why(p, NULL, "sending to the database failed", why, why_len);
    pg_disconnect(p);
    op->result = ST_EIO;
    return ST_EIO;
}

int pg_retain(pg *p, st_op *op, char *why, size_t why_len)
{
    pg_buf b[5] = {{0}};
    pg_text(&b[0], op->gid.p, op->gid.n);
    pg_int8(&b[1], op->retain.messages);
    pg_int8(&b[2], op->retain.ms);
    pg_int8(&b[3], op->retain.cap);
    pg_int8(&b[4], (uint64_t)op->retain.until_acked);
    pg_buf *params[5] = {&b[0], &b[1], &b[2], &b[3], &b[4]};
    /* Shards: not while a move fences the group's slot (the setting would stay behind on
     * the shard the group leaves): refused as unavailable, made again by the caller. */
    int fence = 0, rc = pg_send(p, PG_BEGIN, NULL, 0);
    if (rc == ST_OK)
        rc = pg_fence_send_one(p, &op->gid, &fence);
    if (rc == ST_OK)
        rc = pg_send(p, PG_RETAIN, params, 5);
    if (rc == ST_OK)
        rc = pg_send(p, PG_COMMIT, NULL, 0);
    for (int i = 0; i < 5; i++)
        pg_buf_free(&b[i]);
    PGresult *r = NULL;
    bool ok = false;
    if (rc != ST_OK ||
        pg_round_trip(p, 3 + fence, 1 + fence, &r, &ok, NULL, why, why_len) != ST_OK) {
        PQclear(r);
        return lost(p, op, why, why_len);
    }
    op->result = !ok ? ST_EIO : PQntuples(r) == 1 ? ST_OK : ST_ENOGROUP;
    PQclear(r);
    if (!ok && PQtransactionStatus(p->conn) != PQTRANS_IDLE &&
        pg_send(p, PG_ROLLBACK, NULL, 0) == ST_OK)
        pg_round_trip(p, 1, -1, NULL, &ok, NULL, why, why_len);
    return ST_OK;
}

/* The changes_first the retention of changes asks for (the group's row r of the page;
 * moved: its horizon moves, taking a cseq). */
static uint64_t changes_first(const pg *p, const PGresult *r, int row, bool moved)
{
    uint64_t last = pg_get_int8(r, row, 9) + moved, first = pg_get_int8(r, row, 10), cf = first;
    cf = st_changes_first_for(cf, last, st_changes_keep(p->changes_keep));
    if (!PQgetisnull(r, row, 11) && pg_get_int8(r, row, 11) + 1 > cf)
        cf = pg_get_int8(r, row, 11) + 1;
    return cf;
}

/* The page of groups: each one's horizon as the rules ask, into hs[i] (0: none moves), and
 * its changes_first into cf[i] (0: it stays). */
static int plan(const pg *p, const PGresult *r, st_op *op, size_t n, uint64_t *hs, uint64_t *cf)
{
    for (size_t i = 0; i < n; i++) {
        int row = (int)i;
        st_retain own = {.messages = pg_get_int8(r, row, 3),
                         .ms = pg_get_int8(r, row, 4),
                         .cap = pg_get_int8(r, row, 5),
                         .until_acked = (enum st_acked)pg_get_int8(r, row, 6)};
        st_retain eff = st_retain_of(&own, &op->retain);
        uint64_t last = pg_get_int8(r, row, 1), first = pg_get_int8(r, row, 2);
        uint64_t young = PQgetisnull(r, row, 7) ? last + 1 : pg_get_int8(r, row, 7);
        uint64_t min_ack = PQgetisnull(r, row, 8) ? last : pg_get_int8(r, row, 8);
        uint64_t h = st_retain_horizon(&eff, first, last, young, min_ack);
        hs[i] = h > first ? h : 0;
        uint64_t c = changes_first(p, r, row, false); /* as RocksDB: before the move's cseq */
        cf[i] = c > pg_get_int8(r, row, 10) ? c : 0;
    }
    return ST_OK;
}

/* The groups whose last cseq moved, told to the other gateways (best effort, as any
 * announcement: the change log has them). */
static void announce(pg *p, const st_list *changed)
{
    if (!st_list_count(changed))
        return;
    pg_announce a = {0};
    pg_announce_reset(&a, p->origin);
    for (size_t i = 0; i < st_list_count(changed); i++)
        pg_announce_changed(&a, st_list_at(changed, i)->gid, st_list_at(changed, i)->hi);
    int n = 0;
    char why[256];
    bool ok = false;
    if (pg_announce_send(p, &a, &n, true) != ST_OK ||
        pg_round_trip(p, n, -1, NULL, &ok, NULL, why, sizeof(why)) != ST_OK)
        ok = false;
    pg_announce_done(p, &a, true, ok);
    pg_announce_free(&a);
}

/* The gid of the i-th statement sent (the i-th group with something to do). */
static st_id gid_of_trim(const PGresult *r, const uint64_t *hs, const uint64_t *cf, size_t n, int i)
{
    for (size_t k = 0; k < n; k++)
        if ((hs[k] || cf[k]) && i-- == 0)
            return pg_get_id(r, (int)k, 0);
    return (st_id){NULL, 0};
}

int pg_trim(pg *p, st_op *op, uint64_t now, char *why, size_t why_len)
{
    if (!(op->list = st_list_new())) {
        op->result = ST_ENOMEM;
        return ST_OK;
    }
    size_t limit = st_list_limit(op->limit);
    /* The defaults' age limit and until-acked, as the statement takes them. */
    uint64_t ms = op->retain.ms == ST_KEEP_ALL ? 0 : op->retain.ms;
    pg_buf b[6] = {{0}};
    pg_text(&b[0], op->gid.n ? op->gid.p : "", op->gid.n);
    pg_int8(&b[1], limit);
    pg_int8(&b[2], ms);
    pg_int8(&b[3], now);
    pg_int8(&b[4], op->retain.until_acked == ST_ACKED_ON);
    pg_int8(&b[5], p->changes_keep_ms);
    pg_buf *params[6] = {&b[0], &b[1], &b[2], &b[3], &b[4], &b[5]};
    int rc = pg_send(p, PG_TRIM_READ, params, 6);
    PGresult *r = NULL;
    bool ok = false;
    if (rc != ST_OK || pg_round_trip(p, 1, 0, &r, &ok, NULL, why, why_len) != ST_OK) {
        PQclear(r);
        for (int i = 0; i < 6; i++)
            pg_buf_free(&b[i]);
        return lost(p, op, why, why_len);
    }
    size_t rows = ok ? (size_t)PQntuples(r) : 0, n = rows < limit ? rows : limit;
    uint64_t *hs = n ? calloc(2 * n, sizeof(*hs)) : NULL, *cf = hs ? hs + n : NULL;
    op->result = !ok ? ST_EIO : (n && !hs) ? ST_ENOMEM : plan(p, r, op, n, hs, cf);
    int sent = 0;
    char head[32];
    int head_n = snprintf(head, sizeof(head), "gw1 %016" PRIx64, p->origin);
    for (size_t i = 0; op->result == ST_OK && i < n; i++) {
        if (!hs[i] && !cf[i])
            continue;
        st_id gid = pg_get_id(r, (int)i, 0);
        for (int k = 0; k < 4; k++)
            pg_buf_reset(&b[k]);
        pg_text(&b[0], gid.p, gid.n);
        pg_int8(&b[1], hs[i] ? hs[i] : pg_get_int8(r, (int)i, 2));
        pg_int8(&b[2], cf[i] ? cf[i] : pg_get_int8(r, (int)i, 10));
        pg_text(&b[3], head, (size_t)head_n);
        if (pg_send(p, PG_TRIM, params, 4) != ST_OK || PQpipelineSync(p->conn) != 1) {
            rc = ST_EIO;
            break;
        }
        sent++;
    }
    for (int i = 0; i < 6; i++)
        pg_buf_free(&b[i]);
    /* The answers, in the order sent: each group trimmed or not (another writer in the
     * way: the next pass tries again). The flushing Sync's answer comes last. */
    if (rc == ST_OK && sent)
        rc = pg_sync(p, why, why_len);
    for (int i = 0; rc == ST_OK && i < sent; i++) {
        PGresult *t = pg_result(p, why, why_len);
        if (!t) {
            rc = ST_EIO;
            break;
        }
        if (PQresultStatus(t) == PGRES_TUPLES_OK && PQntuples(t) == 1) {
            op->applied += (size_t)pg_get_int8(t, 0, 0);
            /* changed: made with its first group (NULL when none: store.h) */
            if (!PQgetisnull(t, 0, 1) && op->result == ST_OK && !op->changed &&
                !(op->changed = st_list_new()))
                op->result = ST_ENOMEM;
            if (!PQgetisnull(t, 0, 1) && op->result == ST_OK)
                op->result = st_list_add(op->changed, gid_of_trim(r, hs, cf, n, i), 0,
                                         pg_get_int8(t, 0, 1), 0, NULL, 0);
        }
        PQclear(t);
        if (pg_end(p, why, why_len) != ST_OK)
            rc = ST_EIO;
    }
    if (rc == ST_OK && sent)
        rc = pg_end(p, why, why_len);
    for (size_t i = 0; rc == ST_OK && op->result == ST_OK && i < n; i++) {
        st_id gid = pg_get_id(r, (int)i, 0);
        uint64_t first = hs[i] ? hs[i] : pg_get_int8(r, (int)i, 2);
        st_list_set_after(op->list, gid);
        if (first > 1)
            op->result = st_list_add(op->list, gid, first, pg_get_int8(r, (int)i, 1), 0, NULL, 0);
    }
    if (op->result == ST_OK)
        st_list_set_more(op->list, rows > limit);
    free(hs);
    PQclear(r);
    if (rc == ST_OK && op->result == ST_OK && op->changed)
        announce(p, op->changed);
    return rc == ST_OK ? ST_OK : lost(p, op, why, why_len);
}
