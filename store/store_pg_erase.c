/*
 * A person's erasure on PostgreSQL (store.h, ST_OP_ERASE_USER): one transaction that
 * first locks, in key order, every group the user has a message or a membership in (as a
 * batch does: a batch editing one of those messages, or moving one of those cursors,
 * waits for it, and none can deadlock with it), then in one statement deletes the user's
 * (uid, cid) rows, turns the messages they named into tombstones (a recall's version),
 * deletes its memberships and last_seen, and writes the leaves to the change log. The
 * leaves and a sign-out of the user are then announced (after the commit, as messages
 * are), so that other gateways drop its memberships and end its sessions; the tombstones
 * are not announced one by one (a user may have sent a million messages): pages show them.
 */
#include "store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Takes n results (the caller knows how many it queued) and the Sync's; ok: each was
 * COMMAND_OK or TUPLES_OK. keep: index of one to hand back (the caller PQclears it), or
 * -1. ST_EIO when the connection failed. */
static int take(pg *p, int n, int keep, PGresult **kept, bool *ok, char *why, size_t why_len)
{
    *ok = true;
    for (int i = 0; i < n; i++) {
        PGresult *r = pg_result(p, why, why_len);
        if (!r)
            return ST_EIO;
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            if (*ok)
                pg_why(p, r, "erasing a user failed", why, why_len);
            *ok = false;
        }
        if (i == keep && kept)
            *kept = r;
        else
            PQclear(r);
    }
    return pg_end(p, why, why_len);
}

/* The leaves and the sign-out, told to the other gateways. Best effort: one lost is the
 * same as any announcement lost (the change log holds the leaves). */
static void announce(pg *p, st_op *op)
{
    pg_announce a = {0};
    pg_announce_reset(&a, p->origin);
    for (size_t i = 0; i < st_list_count(op->list); i++)
        pg_announce_member(&a, 'l', st_list_at(op->list, i)->gid, op->uid, 0);
    pg_announce_signout(&a, op->uid);
    int n = 0;
    char why[256];
    bool ok = false;
    if (pg_announce_send(p, &a, &n, true) == ST_OK && pg_sync(p, why, sizeof(why)) == ST_OK)
        take(p, n, -1, NULL, &ok, why, sizeof(why));
    pg_announce_done(p, &a, true, ok);
    pg_announce_free(&a);
}

int pg_erase_user(pg *p, st_op *op, uint64_t now, char *why, size_t why_len)
{
    op->result = ST_OK;
    if (!(op->list = st_list_new())) {
        op->result = ST_ENOMEM;
        return ST_OK;
    }
    char head[32];
    int hn = snprintf(head, sizeof(head), "gw1 %016" PRIx64, p->origin);
    pg_buf b[4] = {{0}};
    pg_text(&b[0], op->uid.p, op->uid.n);
    pg_buf_put(&b[1], op->record, op->record_n);
    pg_int8(&b[2], now);
    pg_text(&b[3], head, (size_t)hn);
    pg_buf *params[4] = {&b[0], &b[1], &b[2], &b[3]};
    int rc = pg_send(p, PG_BEGIN, NULL, 0);
    if (rc == ST_OK)
        rc = pg_send(p, PG_ERASE_LOCK, params, 1);
    if (rc == ST_OK)
        rc = pg_send(p, PG_ERASE, params, 4);
    if (rc == ST_OK)
        rc = pg_send(p, PG_COMMIT, NULL, 0);
    for (int i = 0; i < 4; i++)
        pg_buf_free(&b[i]);
    if (rc == ST_OK)
        rc = pg_sync(p, why, why_len);
    PGresult *r = NULL;
    bool ok = false;
    if (rc == ST_OK)
        rc = take(p, 4, 2, &r, &ok, why, why_len);
    if (rc != ST_OK) { /* the connection: the outcome is unknown, the store is in trouble */
        PQclear(r);
        if (!why[0])
            pg_why(p, NULL, "sending to the database failed", why, why_len);
        pg_disconnect(p);
        return op->result = ST_EIO;
    }
    if (!ok || PQntuples(r) != 1) { /* refused: the transaction is rolled back */
        PQclear(r);
        if (PQtransactionStatus(p->conn) != PQTRANS_IDLE && pg_send(p, PG_ROLLBACK, NULL, 0) == 0 &&
            pg_sync(p, why, why_len) == ST_OK)
            take(p, 1, -1, NULL, &ok, why, why_len);
        op->result = ST_EIO; /* this op failed; the store goes on */
        return ST_OK;
    }
    op->applied = (size_t)pg_get_int8(r, 0, 0);
    op->ts = now;
    /* The groups left: their ids, separated by spaces (ids have none). */
    const char *g = PQgetvalue(r, 0, 1), *end = g + PQgetlength(r, 0, 1);
    while (g < end && op->result == ST_OK) {
        const char *sp = memchr(g, ' ', (size_t)(end - g));
        size_t n = (size_t)((sp ? sp : end) - g);
        if (n)
            op->result = st_list_add(op->list, (st_id){g, n}, 0, 0, 0, NULL, 0);
        g += n + 1;
    }
    PQclear(r);
    if (op->result == ST_OK)
        announce(p, op);
    return ST_OK;
}
