/*
 * Reads of the PostgreSQL backend. They run on the store thread after the batch taken
 * with them has committed, every read of the batch in one round trip: each is a single
 * statement, so it reads one snapshot (a page and its group's last_mid agree).
 */
#include "store_pg.h"

#include <stdio.h>
#include <string.h>

/* A message of a page's or a changes page's row (cols: mid, ts, record, ver, ets,
 * recalled, cseq, reactions), its reactions into rx. */
static st_msg msg_of(const PGresult *r, int i, int c, st_reaction *rx)
{
    st_msg m = {.mid = pg_get_int8(r, i, c),
                .ts = pg_get_int8(r, i, c + 1),
                .record = PQgetvalue(r, i, c + 2),
                .record_n = (size_t)PQgetlength(r, i, c + 2),
                .ver = pg_get_int8(r, i, c + 3),
                .ver_ts = pg_get_int8(r, i, c + 4),
                .recalled = pg_get_int8(r, i, c + 5) != 0,
                .cseq = pg_get_int8(r, i, c + 6),
                .reactions = rx};
    if (!PQgetisnull(r, i, c + 7))
        m.n_reactions = pg_rx_parse(PQgetvalue(r, i, c + 7), (size_t)PQgetlength(r, i, c + 7), rx,
                                    ST_REACT_KEYS_MAX);
    return m;
}

static int page_of(const PGresult *r, st_op *op)
{
    if (PQntuples(r) == 0)
        return ST_ENOGROUP;
    uint64_t last_mid = pg_get_int8(r, 0, 0), first_mid = pg_get_int8(r, 0, 7), lo = 0, hi = 0;
    uint64_t gone;
    bool any = st_page_range(op->dir, op->from, op->limit, first_mid, last_mid, &lo, &hi, &gone);
    if (!(op->page = st_page_new(first_mid, last_mid, gone)) ||
        st_page_reserve(op->page, (size_t)PQntuples(r)))
        return ST_ENOMEM;
    st_page_set_last_cseq(op->page, pg_get_int8(r, 0, 8));
    size_t n = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        if (PQgetisnull(r, i, 1))
            continue; /* the group, with no message in the range */
        st_reaction rx[ST_REACT_KEYS_MAX];
        /* cols 1..6 as ever, then cseq (9) and reactions (10): moved into msg_of's order */
        st_msg m = {.mid = pg_get_int8(r, i, 1),
                    .ts = pg_get_int8(r, i, 2),
                    .record = PQgetvalue(r, i, 3),
                    .record_n = (size_t)PQgetlength(r, i, 3),
                    .ver = pg_get_int8(r, i, 4),
                    .ver_ts = pg_get_int8(r, i, 5),
                    .recalled = pg_get_int8(r, i, 6) != 0,
                    .cseq = pg_get_int8(r, i, 9),
                    .reactions = rx};
        if (!PQgetisnull(r, i, 10))
            m.n_reactions = pg_rx_parse(PQgetvalue(r, i, 10), (size_t)PQgetlength(r, i, 10), rx,
                                        ST_REACT_KEYS_MAX);
        int rc = st_page_add(op->page, &m);
        if (rc != ST_OK)
            return rc;
        n++;
    }
    bool more = false;
    if (any) {
        /* Mids are dense: fewer than the range holds means the bytes cut it short. */
        bool cut = n < hi - lo + 1;
        more = cut || (op->dir == ST_AFTER ? hi < last_mid : lo > first_mid);
    }
    st_page_finish(op->page, op->dir == ST_BEFORE, more);
    return ST_OK;
}

/* A changes page (CHANGES_SQL): cols last_mid, first_mid, last_cseq, changes_first, then
 * the message's (msg_of, from 4) and how many of limit + 1 there were (12). */
static int changes_of(const PGresult *r, st_op *op)
{
    if (PQntuples(r) == 0)
        return ST_ENOGROUP;
    uint64_t last_mid = pg_get_int8(r, 0, 0), first_mid = pg_get_int8(r, 0, 1);
    uint64_t last_cseq = pg_get_int8(r, 0, 2), changes_first = pg_get_int8(r, 0, 3);
    if (!(op->page = st_page_new(first_mid, last_mid, 0)) ||
        st_page_reserve(op->page, (size_t)PQntuples(r)))
        return ST_ENOMEM;
    st_page_set_last_cseq(op->page, last_cseq);
    size_t n = 0, total = 0;
    uint64_t upto = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        if (PQgetisnull(r, i, 4))
            continue; /* the group, with no change after `from` */
        st_reaction rx[ST_REACT_KEYS_MAX];
        st_msg m = msg_of(r, i, 4, rx);
        int rc = st_page_add(op->page, &m);
        if (rc != ST_OK)
            return rc;
        upto = m.cseq;
        total = (size_t)pg_get_int8(r, i, 12);
        n++;
    }
    bool gone = op->from + 1 < (changes_first ? changes_first : 1);
    bool more = !gone && total > n;
    /* Complete up to the last entry given when cut; else up to the group's last cseq (the
     * cseqs without an entry: folded, horizon moves), also below a `from` past it (a
     * group made again under its old gid starts from 0: the reader's cursor comes back). */
    if (!more)
        upto = last_cseq;
    if (gone)
        upto = op->from; /* nothing served: the reader re-pages (store.h, Changes) */
    st_page_set_changes(op->page, upto, gone ? changes_first : 0);
    st_page_finish(op->page, false, more);
    return ST_OK;
}

static int groups_of(const PGresult *r, st_op *op)
{
    if (!(op->groups = st_groups_new()))
        return ST_ENOMEM;
    op->not_before = PQntuples(r) && !PQgetisnull(r, 0, 5) ? pg_get_int8(r, 0, 5) : 0;
    for (int i = 0; i < PQntuples(r); i++) {
        if (PQgetisnull(r, i, 0))
            continue;                         /* the user, with no group */
        uint64_t read = pg_get_int8(r, i, 3); /* -1: none */
        int rc =
            st_groups_add(op->groups, pg_get_id(r, i, 0), pg_get_int8(r, i, 4),
                          pg_get_int8(r, i, 1), pg_get_int8(r, i, 2), read, read != UINT64_MAX);
        if (rc != ST_OK)
            return rc;
        st_groups_set_last_cseq(op->groups, pg_get_int8(r, i, 6));
    }
    return ST_OK;
}

static int group_of(const PGresult *r, st_op *op)
{
    if (PQntuples(r) == 0)
        return ST_ENOGROUP;
    op->last_mid = pg_get_int8(r, 0, 0);
    op->first_mid = pg_get_int8(r, 0, 3);
    op->last_cseq = pg_get_int8(r, 0, 8);
    op->retain = (st_retain){.messages = pg_get_int8(r, 0, 4),
                             .ms = pg_get_int8(r, 0, 5),
                             .cap = pg_get_int8(r, 0, 6),
                             .until_acked = (enum st_acked)pg_get_int8(r, 0, 7)};
    if (op->uid.n == 0)
        return ST_OK;
    if (PQgetisnull(r, 0, 1))
        return ST_ENOTMEMBER;
    op->ack = pg_get_int8(r, 0, 1);
    uint64_t read = pg_get_int8(r, 0, 2); /* -1: none */
    op->has_read = read != UINT64_MAX;
    op->read = op->has_read ? read : 0;
    return ST_OK;
}

static int members_of(const PGresult *r, st_op *op)
{
    if (PQntuples(r) == 0)
        return ST_ENOGROUP;
    if (!(op->members = st_members_new(pg_get_int8(r, 0, 0), op->limit)))
        return ST_ENOMEM;
    for (int i = 0; i < PQntuples(r); i++) {
        if (PQgetisnull(r, i, 1))
            continue;                         /* the group, with no member after `after` */
        uint64_t read = pg_get_int8(r, i, 3); /* -1: none */
        int rc = st_members_offer(op->members, pg_get_id(r, i, 1), pg_get_int8(r, i, 2), read,
                                  read != UINT64_MAX);
        if (rc < 0)
            return rc;
    }
    st_members_finish(op->members); /* limit + 1 rows at most: more if there was the one */
    return ST_OK;
}

static int seen_of(const PGresult *r, st_op *op)
{
    for (size_t i = 0; i < op->n_seen; i++)
        op->seen[i].ms = 0;
    for (int row = 0; row < PQntuples(r); row++) {
        st_id uid = pg_get_id(r, row, 0);
        for (size_t i = 0; i < op->n_seen; i++)
            if (st_id_cmp(op->seen[i].uid, uid) == 0)
                op->seen[i].ms = pg_get_int8(r, row, 1);
    }
    return ST_OK;
}

/* Queues the statement of one read. */
static int send_read(pg *p, st_op *op, pg_buf *b)
{
    pg_buf *params[5] = {&b[0], &b[1], &b[2], &b[3], &b[4]};
    switch (op->kind) {
    case ST_OP_READ_PAGE:
        pg_text(&b[0], op->gid.p, op->gid.n);
        pg_int8(&b[1], op->from);
        pg_int8(&b[2], op->limit);
        pg_int8(&b[3], op->max_bytes ? op->max_bytes : INT64_MAX);
        pg_text(&b[4], op->uid.p ? op->uid.p : "", op->uid.n);
        return pg_send(p, op->dir == ST_AFTER ? PG_PAGE_AFTER : PG_PAGE_BEFORE, params, 5);
    case ST_OP_READ_CHANGES:
        pg_text(&b[0], op->gid.p, op->gid.n);
        pg_int8(&b[1], op->from);
        pg_int8(&b[2], op->limit < ST_CHANGES_LIMIT_MAX ? op->limit : ST_CHANGES_LIMIT_MAX);
        pg_int8(&b[3], op->max_bytes ? op->max_bytes : INT64_MAX);
        pg_text(&b[4], op->uid.p ? op->uid.p : "", op->uid.n);
        return pg_send(p, PG_CHANGES, params, 5);
    case ST_OP_READ_GROUPS:
        pg_text(&b[0], op->uid.p, op->uid.n);
        return pg_send(p, PG_USER_GROUPS, params, 1);
    case ST_OP_READ_GROUP:
        pg_text(&b[0], op->gid.p, op->gid.n);
        pg_text(&b[1], op->uid.p ? op->uid.p : "", op->uid.n);
        return pg_send(p, PG_GROUP, params, 2);
    case ST_OP_READ_MEMBERS:
        pg_text(&b[0], op->gid.p, op->gid.n);
        pg_text(&b[1], op->uid.p ? op->uid.p : "", op->uid.n);
        pg_int8(&b[2], st_members_limit(op->limit));
        return pg_send(p, PG_MEMBERS, params, 3);
    case ST_OP_READ_SEEN:
        pg_arr_begin(&b[0], PG_OID_TEXT, op->n_seen);
        for (size_t i = 0; i < op->n_seen; i++)
            pg_arr_bytes(&b[0], op->seen[i].uid.p, op->seen[i].uid.n);
        return pg_send(p, PG_READ_SEEN, params, 1);
    default: return ST_EINVAL;
    }
}

int pg_read(void *be, st_op *reads, char *why, size_t why_len)
{
    pg *p = be;
    pg_buf b[5] = {{0}};
    int rc = p->conn ? ST_OK : ST_EIO;
    for (st_op *op = reads; rc == ST_OK && op; op = op->next_) {
        for (int i = 0; i < 5; i++)
            pg_buf_reset(&b[i]);
        rc = send_read(p, op, b);
    }
    for (int i = 0; i < 5; i++)
        pg_buf_free(&b[i]);
    if (rc != ST_OK) {
        /* Some reads may be queued already: the pipeline is out of step. Drop it. */
        pg_why(p, NULL, "sending to the database failed", why, why_len);
        pg_disconnect(p);
        for (st_op *op = reads; op; op = op->next_)
            op->result = ST_EIO;
        return ST_EIO;
    }
    rc = pg_sync(p, why, why_len);
    for (st_op *op = reads; op; op = op->next_) {
        PGresult *r = rc == ST_OK ? pg_result(p, why, why_len) : NULL;
        if (!r) {
            rc = ST_EIO;
            op->result = ST_EIO;
            continue;
        }
        switch (PQresultStatus(r) == PGRES_TUPLES_OK ? op->kind : 0) {
        case ST_OP_READ_PAGE: op->result = page_of(r, op); break;
        case ST_OP_READ_CHANGES: op->result = changes_of(r, op); break;
        case ST_OP_READ_GROUPS: op->result = groups_of(r, op); break;
        case ST_OP_READ_GROUP: op->result = group_of(r, op); break;
        case ST_OP_READ_MEMBERS: op->result = members_of(r, op); break;
        case ST_OP_READ_SEEN: op->result = seen_of(r, op); break;
        default: op->result = ST_EIO; break; /* the statement failed, or was skipped */
        }
        PQclear(r);
        if (op->result != ST_OK)
            st_read_discard(op);
    }
    if (rc == ST_OK)
        rc = pg_end(p, why, why_len);
    return rc; /* ST_EIO: the connection failed; the store starts failing */
}
