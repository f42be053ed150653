/*
 * Erasures on PostgreSQL, each one transaction that first locks, in key order, the
 * groups it changes (as a batch does: a batch editing one of those messages, or moving one
 * of those cursors, waits for it, and none can deadlock with it), then changes everything
 * in one statement and writes the leaves to the change log; the leaves (and a person's
 * sign-out) are then announced after the commit, as messages are:
 *   - a person's (store.h, ST_OP_ERASE_USER): its (uid, cid) rows deleted, the messages
 *     they named made tombstones (a recall's version) without their reactions, its
 *     reactions deleted everywhere, its memberships and last_seen deleted, its not-before
 *     moved to the erasure's second (kept: store.h, Revocation). Each tombstone, and each
 *     reaction dropped from a message that stays, takes its group's next cseq in the same
 *     statement (as on RocksDB; a message's entry is its last). The tombstones are not announced
 *     one by one (a user may have sent a million messages): each group changed is
 *     announced once with its new last cseq ('c'), and its clients pull the changes;
 *   - a group's (ST_OP_DELETE_GROUP): its messages, memberships, (uid, cid) rows (a scan:
 *     gw.sends has no index on gid), reactions and swept mark deleted with its row; the
 *     leaves carry the deletion's cseq.
 */
#include "store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* BEGIN, the lock (its first parameter only), the statement, COMMIT, in one round trip.
 * ST_OK with the statement's one row in *row (the caller PQclears it), or with *row NULL
 * when the database refused (rolled back: the op fails, the store goes on); ST_EIO when
 * the connection failed (the outcome is unknown: the store is in trouble). */
static int one_tx(pg *p, const st_id *gid, enum pg_stmt lock, enum pg_stmt stmt,
                  pg_buf *const *params, int n, PGresult **row, char *why, size_t why_len)
{
    *row = NULL;
    int rc = pg_send(p, PG_BEGIN, NULL, 0), fence = 0;
    /* Shards: the group's slot must not be fenced; an erasure (gid NULL), which reaches
     * the user's groups of every slot here, waits for no move to be under way. */
    if (rc == ST_OK)
        rc = pg_fence_send_one(p, gid, &fence);
    if (rc == ST_OK)
        rc = pg_send(p, lock, params, 1);
    if (rc == ST_OK)
        rc = pg_send(p, stmt, params, n);
    if (rc == ST_OK)
        rc = pg_send(p, PG_COMMIT, NULL, 0);
    bool ok = false;
    if (rc == ST_OK)
        rc = pg_round_trip(p, 4 + fence, 2 + fence, row, &ok, "an erasure failed", why, why_len);
    if (rc != ST_OK) {
        PQclear(*row);
        *row = NULL;
        if (!why[0])
            pg_why(p, NULL, "sending to the database failed", why, why_len);
        pg_disconnect(p);
        return ST_EIO;
    }
    if (!ok || PQntuples(*row) != 1) {
        PQclear(*row);
        *row = NULL;
        if (PQtransactionStatus(p->conn) != PQTRANS_IDLE && pg_send(p, PG_ROLLBACK, NULL, 0) == 0)
            pg_round_trip(p, 1, -1, NULL, &ok, "an erasure failed", why, why_len);
    }
    return ST_OK;
}

/* The ids of a text field, separated by spaces (ids have none), into l: as gids (as_gid)
 * or as the items' text. */
static int ids_into(st_list *l, const PGresult *r, int col, bool as_gid)
{
    const char *g = PQgetvalue(r, 0, col), *end = g + PQgetlength(r, 0, col);
    while (g < end) {
        const char *sp = memchr(g, ' ', (size_t)(end - g));
        size_t n = (size_t)((sp ? sp : end) - g);
        int rc = !n       ? ST_OK
                 : as_gid ? st_list_add(l, (st_id){g, n}, 0, 0, 0, NULL, 0)
                          : st_list_add(l, (st_id){NULL, 0}, 0, 0, 0, g, n);
        if (rc != ST_OK)
            return rc;
        g += n + 1;
    }
    return ST_OK;
}

/* The leaves (and, for a person, its sign-out), told to the other gateways. Best effort:
 * one lost is the same as any announcement lost (the change log holds the leaves). */
static void announce(pg *p, const st_op *op)
{
    pg_announce a = {0};
    pg_announce_reset(&a, p->origin);
    for (size_t i = 0; i < st_list_count(op->list); i++) {
        const st_item *it = st_list_at(op->list, i);
        if (op->kind == ST_OP_ERASE_USER)
            pg_announce_member(&a, 'l', it->gid, op->uid, 0);
        else
            pg_announce_leave(&a, op->gid, (st_id){it->text, it->text_n}, op->cseq);
    }
    for (size_t i = 0; op->changed && i < st_list_count(op->changed); i++) {
        const st_item *it = st_list_at(op->changed, i);
        pg_announce_changed(&a, it->gid, it->hi);
    }
    if (op->kind == ST_OP_ERASE_USER)
        pg_announce_signout(&a, op->uid);
    int n = 0;
    char why[256];
    bool ok = false;
    if (pg_announce_send(p, &a, &n, true) == ST_OK)
        pg_round_trip(p, n, -1, NULL, &ok, "an erasure failed", why, sizeof(why));
    pg_announce_done(p, &a, true, ok);
    pg_announce_free(&a);
}

/* "GID CSEQ" pairs, separated by spaces, into l's items (gid, hi). */
static int pairs_into(st_list *l, const PGresult *r, int col)
{
    const char *g = PQgetvalue(r, 0, col), *end = g + PQgetlength(r, 0, col);
    while (g < end) {
        const char *sp = memchr(g, ' ', (size_t)(end - g));
        if (!sp)
            return ST_EIO; /* the statement's own format: cannot happen */
        st_id gid = {g, (size_t)(sp - g)};
        uint64_t hi = strtoull(sp + 1, NULL, 10);
        const char *next = memchr(sp + 1, ' ', (size_t)(end - sp - 1));
        int rc = st_list_add(l, gid, 0, hi, 0, NULL, 0);
        if (rc != ST_OK)
            return rc;
        g = next ? next + 1 : end;
    }
    return ST_OK;
}

/* The change log's header: this store's origin. */
static void header(pg *p, pg_buf *b)
{
    char head[32];
    int hn = snprintf(head, sizeof(head), "gw1 %016" PRIx64, p->origin);
    pg_text(b, head, (size_t)hn);
}

int pg_erase_user(pg *p, st_op *op, uint64_t now, char *why, size_t why_len)
{
    op->result = (op->list = st_list_new()) ? ST_OK : ST_ENOMEM;
    if (op->result)
        return ST_OK;
    pg_buf b[4] = {{0}};
    pg_text(&b[0], op->uid.p, op->uid.n);
    pg_buf_put(&b[1], op->record, op->record_n);
    pg_int8(&b[2], now);
    header(p, &b[3]);
    pg_buf *params[4] = {&b[0], &b[1], &b[2], &b[3]};
    PGresult *r = NULL;
    int rc = one_tx(p, NULL, PG_ERASE_LOCK, PG_ERASE, params, 4, &r, why, why_len);
    for (int i = 0; i < 4; i++)
        pg_buf_free(&b[i]);
    if (rc != ST_OK || !r) {
        op->result = ST_EIO;
        return rc;
    }
    op->applied = (size_t)pg_get_int8(r, 0, 0);
    op->ts = now;
    op->not_before = now / 1000;
    op->result = ids_into(op->list, r, 1, true);
    /* changed: NULL when no group's last cseq moved (store.h). */
    if (op->result == ST_OK && PQgetlength(r, 0, 3) > 0)
        op->result = (op->changed = st_list_new()) ? pairs_into(op->changed, r, 3) : ST_ENOMEM;
    PQclear(r);
    if (op->result == ST_OK)
        announce(p, op);
    return ST_OK;
}

int pg_delete_group(pg *p, st_op *op, char *why, size_t why_len)
{
    op->result = (op->list = st_list_new()) ? ST_OK : ST_ENOMEM;
    if (op->result)
        return ST_OK;
    pg_buf b[2] = {{0}};
    pg_text(&b[0], op->gid.p, op->gid.n);
    header(p, &b[1]);
    pg_buf *params[2] = {&b[0], &b[1]};
    PGresult *r = NULL;
    int rc = one_tx(p, &op->gid, PG_DROP_LOCK, PG_DROP_GROUP, params, 2, &r, why, why_len);
    pg_buf_free(&b[0]);
    pg_buf_free(&b[1]);
    if (rc != ST_OK || !r) {
        op->result = ST_EIO;
        return rc;
    }
    if (PQgetisnull(r, 0, 0)) {
        op->result = ST_ENOGROUP;
    } else {
        op->applied = (size_t)pg_get_int8(r, 0, 0);
        op->cseq = pg_get_int8(r, 0, 3);
        op->result = ids_into(op->list, r, 1, false);
    }
    PQclear(r);
    if (op->result == ST_OK)
        announce(p, op);
    return ST_OK;
}
