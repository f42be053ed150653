/*
 * The PostgreSQL backend: several gateways over one database.
 *
 * A batch is one transaction in two round trips, whatever the number of ops:
 *   1. BEGIN, and one statement that reads every row the batch will read: the groups it
 *      touches (locked, in key order, until the commit), the memberships it names, the
 *      (uid, cid) rows of its appends; and, after the locks, the messages its edits and
 *      reactions change (with their reaction counts) and the reactions it names;
 *   2. the batch's changes as a few statements over arrays (insert the messages and the
 *      sends, update the groups' last_mid and last_cseq, insert, update or delete
 *      memberships, the messages' versions and cseqs, reactions set and cleared), and
 *      COMMIT (synchronous_commit on: durable before it answers). A change to a message
 *      (store.h, Changes) takes its cseq from the group's row, which the batch holds
 *      locked: cseqs are dense per group across gateways, like mids.
 * Between the two, the ops are applied in C (store_apply.c) to the rows read in 1, kept
 * here by key with what the batch did to them; so the rules are the RocksDB backend's,
 * written once.
 *
 * Two gateways writing one database: a group's row is locked by the batch that reads it,
 * so two batches appending to one group take turns and the second reads the first's
 * last_mid: mids stay dense and are never reused, with no retry. Every other row a batch
 * changes belongs to a group it locked (a membership, a message), or is keyed by a
 * (uid, cid): what can still collide is a row that did not exist when read (the same
 * (uid, cid) sent through two gateways at once, a group created by two): the insert
 * fails on its key, the transaction rolls back, and the core applies the batch again
 * (ST_EAGAIN), which then finds the other's row. Groups are locked in key order and every
 * array written is sorted by key, so two writers take their locks in one order and
 * cannot deadlock. Acks only move forward (greatest() in SQL).
 *
 * A connection lost or timed out during the COMMIT makes the batch's outcome unknown:
 * every op gets ST_EIO (`unavailable`), and a resend with the same cid is stored at most
 * once (sends). The store then reconnects (recover).
 *
 * Reads (store_pg_read.c) run on the store thread after the batch, all of them in one
 * round trip.
 */
#include "store_pg.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the batch's rows ------------------------------------------------------------------- */

static void rows_clear(pg *p)
{
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp) {
        HASH_DEL(p->rows, r);
        free(r->rec);
        free(r->rx);
        free(r->rx_keys);
        free(r);
    }
    pg_rx_clear(p);
    p->rx_lost = false;
    p->n_msgs = 0;
    p->seen.n = p->nbf.n = 0;
    p->seen.lost = p->nbf.lost = false;
}

/* Every row the ops may read, by key. False: out of memory. */
static bool want_rows(pg *p, st_op *writes)
{
    static const st_id none = {NULL, 0};
    for (st_op *op = writes; op; op = op->next_) {
        bool ok = true;
        if (pg_fence_refuses(p, op))
            continue; /* left out of the batch: its group is not locked */
        switch (op->kind) {
        case ST_OP_APPEND:
            ok = pg_row_want(p, 's', op->uid, op->cid) != NULL;
            __attribute__((fallthrough)); /* an append also reads its group, membership */
        case ST_OP_JOIN:
        case ST_OP_LEAVE:
            ok = ok && pg_row_want(p, 'g', op->gid, none) && pg_row_want(p, 'm', op->gid, op->uid);
            break;
        case ST_OP_EDIT: {
            char k[8];
            ok = pg_row_want(p, 'g', op->gid, none) &&
                 pg_row_want(p, 'x', op->gid, pg_msg_key(op->mid, k));
            break;
        }
        case ST_OP_REACT: {
            char k[8];
            ok = pg_row_want(p, 'g', op->gid, none) && pg_row_want(p, 'm', op->gid, op->uid) &&
                 pg_row_want(p, 'x', op->gid, pg_msg_key(op->mid, k)) &&
                 pg_rx_want(p, op->gid, op->mid, op->uid, (st_id){op->key, op->key_n});
            break;
        }
        case ST_OP_ACKS:
            for (size_t i = 0; ok && i < op->n_acks; i++)
                ok = pg_row_want(p, 'g', op->acks[i].gid, none) &&
                     pg_row_want(p, 'm', op->acks[i].gid, op->acks[i].uid);
            break;
        default: break;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* ---- round trip 1: lock and read ------------------------------------------------------- */

static void rollback_now(pg *p);

static int fail_tx(pg *p, PGresult *r, const char *what, char *why, size_t why_len)
{
    int rc = pg_retryable(r) ? ST_EAGAIN : ST_EIO;
    pg_fence_learn(p, r); /* GW002: applied again without the fenced slots' ops */
    pg_why(p, r, what, why, why_len);
    PQclear(r);
    return rc;
}

/* The rows of one statement of round trip 1 (kind, a, b, n1, n2, gid of a send) into the
 * batch's. */
static int rows_take(pg *p, PGresult *r)
{
    for (int row = 0; row < PQntuples(r); row++) {
        char kind = PQgetvalue(r, row, 0)[0];
        pg_row *x = pg_row_find(p, kind, pg_get_id(r, row, 1),
                                kind == 'g' ? (st_id){NULL, 0} : pg_get_id(r, row, 2));
        if (!x)
            continue;
        uint64_t n1 = pg_get_int8(r, row, 3), n2 = pg_get_int8(r, row, 4);
        if (kind == 'g') {
            x->v.g = (st_group_row){.last_mid = n1,
                                    .created_ms = n2,
                                    .first_mid = pg_get_int8(r, row, 6),
                                    .last_cseq = pg_get_int8(r, row, 7),
                                    .changes_first = pg_get_int8(r, row, 8)};
        } else if (kind == 'm') {
            uint64_t read = pg_get_int8(r, row, 6); /* -1: the member sent none */
            x->v.m = (st_member_row){.ack = n1, .joined_ms = n2};
            if (read != UINT64_MAX) {
                x->v.m.read = read;
                x->v.m.has_read = true;
            }
            x->m0 = x->v.m;
        } else {
            st_id gid = pg_get_id(r, row, 5);
            if (gid.n > ST_MAX_ID)
                continue;
            x->v.s.mid = n1;
            x->v.s.ts = n2;
            x->v.s.gid_n = gid.n;
            memcpy(x->v.s.gid, gid.p, gid.n);
        }
        x->existed = x->present = true;
    }
    return ST_OK;
}

/* Takes the next read of round trip 1 into the batch with take (ST_OK or ST_ENOMEM): ST_OK;
 * ST_EIO when the connection failed or memory ran out (why says so); fail_tx's when the
 * read failed (as `what` says). */
static int take_read(pg *p, const char *what, int (*take)(pg *p, PGresult *r), char *why,
                     size_t why_len)
{
    PGresult *r = pg_result(p, why, why_len);
    if (!r)
        return ST_EIO;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return fail_tx(p, r, what, why, why_len);
    int rc = take(p, r);
    PQclear(r);
    if (rc != ST_OK) {
        snprintf(why, why_len, "out of memory");
        return ST_EIO;
    }
    return ST_OK;
}

/* The answers of round trip 1: BEGIN's, the locked groups, the other rows, the messages
 * edits and reactions change (when msgs), the reactions (when rx), the Sync. */
static int take_reads(pg *p, bool msgs, bool rx, char *why, size_t why_len)
{
    PGresult *b = pg_result(p, why, why_len);
    if (!b)
        return ST_EIO;
    int rc =
        PQresultStatus(b) == PGRES_COMMAND_OK ? ST_OK : fail_tx(p, b, "BEGIN failed", why, why_len);
    if (rc == ST_OK)
        PQclear(b);
    for (int i = 0; i < 2 + msgs + rx; i++) {
        if (!p->conn)
            return ST_EIO;
        int one =
            rc != ST_OK ? ST_OK
            : i < 2     ? take_read(p, "reading the batch's rows failed", rows_take, why, why_len)
            : i == 2 && msgs
                ? take_read(p, "reading the batch's messages failed", pg_msgs_take, why, why_len)
                : take_read(p, "reading the batch's reactions failed", pg_rx_take, why, why_len);
        if (rc == ST_OK)
            rc = one;
        else if (p->conn) /* after a failure the rest are skipped: take their results */
            PQclear(pg_result(p, why, why_len));
    }
    if (!p->conn)
        return ST_EIO;
    int end = pg_end(p, why, why_len);
    return rc != ST_OK ? rc : end;
}

static int pg_begin(void *be, st_op *writes, char *why, size_t why_len)
{
    pg *p = be;
    p->writes = writes; /* its signouts are announced at commit */
    pg_fence_expire(p);
    rows_clear(p);
    if (!p->conn) {
        snprintf(why, why_len, "not connected to the database (%s)", p->where);
        return ST_EIO;
    }
    p->fast = pg_cache_fill(p, writes);
    if (p->fast)
        return ST_OK; /* rows from the cache: checked when the writes go (round trip 2) */
    rows_clear(p);
    if (!want_rows(p, writes)) {
        snprintf(why, why_len, "out of memory");
        return ST_EIO;
    }
    /* The keys, as arrays: groups; memberships (gid, uid); sends (uid, cid). */
    size_t ng = 0, nm = 0, ns = 0;
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp)
        r->kind == 'g' ? ng++ : r->kind == 'm' ? nm++ : r->kind == 's' ? ns++ : 0;
    pg_buf a[5] = {{0}};
    pg_arr_begin(&a[0], PG_OID_TEXT, ng);
    pg_arr_begin(&a[1], PG_OID_TEXT, nm);
    pg_arr_begin(&a[2], PG_OID_TEXT, nm);
    pg_arr_begin(&a[3], PG_OID_TEXT, ns);
    pg_arr_begin(&a[4], PG_OID_TEXT, ns);
    HASH_ITER (hh, p->rows, r, tmp) {
        if (r->kind == 'x')
            continue; /* read after the groups are locked (pg_msgs_send_read) */
        int k = r->kind == 'g' ? 0 : r->kind == 'm' ? 1 : 3;
        pg_arr_bytes(&a[k], r->a.p, r->a.n);
        if (k)
            pg_arr_bytes(&a[k + 1], r->b.p, r->b.n);
    }
    pg_buf *groups[1] = {&a[0]}, *others[4] = {&a[1], &a[2], &a[3], &a[4]};
    int rc = pg_send(p, PG_BEGIN, NULL, 0);
    p->in_tx = true;
    if (rc == ST_OK)
        rc = pg_send(p, PG_LOCK_GROUPS, groups, 1);
    if (rc == ST_OK)
        rc = pg_send(p, PG_READ_ROWS, others, 4);
    bool msgs = false, rx = false;
    if (rc == ST_OK)
        rc = pg_msgs_send_read(p, &msgs);
    if (rc == ST_OK)
        rc = pg_rx_send_read(p, &rx);
    for (int i = 0; i < 5; i++)
        pg_buf_free(&a[i]);
    if (rc != ST_OK) {
        /* Some statements may be queued already: the connection's pipeline is out of
         * step with this batch. Drop it (nothing was committed). */
        pg_why(p, NULL, "sending to the database failed", why, why_len);
        pg_disconnect(p);
        return ST_EIO;
    }
    rc = pg_sync(p, why, why_len);
    if (rc == ST_OK)
        rc = take_reads(p, msgs, rx, why, why_len);
    if (rc != ST_OK)
        rollback_now(p);
    return rc;
}

/* ---- the rows as the ops see them ------------------------------------------------------- */

/* The batch's row of (kind, a, b), read at begin: 1 (present; its value copied to out, n
 * bytes of the union), 0 (absent) or ST_EIO. */
static int get_row(pg *p, char kind, st_id a, st_id b, void *out, size_t n)
{
    pg_row *r = pg_row_find(p, kind, a, b);
    if (!r)
        return ST_EIO; /* not read at begin: cannot happen (want_rows names every key) */
    if (!r->present)
        return 0;
    memcpy(out, &r->v, n);
    return 1;
}

/* Sets the batch's row of (kind, a, b) to the value v (n bytes of the union), to write. */
static void put_row(pg *p, char kind, st_id a, st_id b, const void *v, size_t n)
{
    pg_row *r = pg_row_find(p, kind, a, b); /* always there: read by the op before */
    if (r) {
        r->present = r->dirty = true;
        memcpy(&r->v, v, n);
    }
}

static int pg_get_group(void *be, st_id gid, st_group_row *g)
{
    return get_row(be, 'g', gid, (st_id){NULL, 0}, g, sizeof(*g));
}

static void pg_put_group(void *be, st_id gid, const st_group_row *g)
{
    put_row(be, 'g', gid, (st_id){NULL, 0}, g, sizeof(*g));
}

static int pg_get_member(void *be, st_id gid, st_id uid, st_member_row *m)
{
    return get_row(be, 'm', gid, uid, m, sizeof(*m));
}

static void pg_put_member(void *be, st_id gid, st_id uid, const st_member_row *m)
{
    put_row(be, 'm', gid, uid, m, sizeof(*m));
}

static void pg_del_member(void *be, st_id gid, st_id uid)
{
    pg_row *r = pg_row_find(be, 'm', gid, uid);
    if (r) {
        r->present = false;
        r->dirty = true;
    }
}

static int pg_get_send(void *be, st_id uid, st_id cid, st_send_row *s)
{
    return get_row(be, 's', uid, cid, s, sizeof(*s));
}

static void pg_put_send(void *be, st_id uid, st_id cid, const st_send_row *s)
{
    put_row(be, 's', uid, cid, s, sizeof(*s));
}

static void pg_put_msg(void *be, st_id gid, uint64_t mid, uint64_t ts, const void *rec, size_t n)
{
    pg *p = be;
    if (!st_room(&p->msgs, &p->cap_msgs, p->n_msgs + 1, sizeof(*p->msgs), 64))
        abort(); /* a few dozen bytes per message: no way to go on without them */
    p->msgs[p->n_msgs++] = (pg_msg){gid, mid, ts, rec, n};
}

static void times_add(pg_times *t, st_id uid, uint64_t at)
{
    if (!st_room(&t->v, &t->cap, t->n + 1, sizeof(*t->v), 16)) {
        t->lost = true;
        return;
    }
    t->v[t->n++] = (st_seen){uid, at};
}

/* A last_seen lost only tells wrong when a user was last online: it may go. */
static void pg_put_seen(void *be, st_id uid, uint64_t ms)
{
    times_add(&((pg *)be)->seen, uid, ms);
}

/* A not-before lost would leave a token unrevoked: the batch fails (send_times). */
static void pg_put_not_before(void *be, st_id uid, uint64_t secs)
{
    times_add(&((pg *)be)->nbf, uid, secs);
}

/* ---- round trip 2: write and commit --------------------------------------------------- */

/* What a row's change means at the end of the batch. */
enum change { NONE, INSERT, UPDATE, DELETE };

static enum change change_of(const pg_row *r)
{
    if (!r->dirty)
        return NONE;
    if (r->present)
        return r->existed ? UPDATE : INSERT;
    return r->existed ? DELETE : NONE;
}

static bool has_change(const pg_row *r, int want)
{
    return change_of(r) == (enum change)want;
}

/* Queues one statement over the rows of kind with the given change, in key order; 0 if
 * there are none. */
static int send_rows(pg *p, enum pg_stmt st, char kind, enum change want, int *n_stmts)
{
    size_t n;
    pg_row **rows = pg_rows_sorted(p, kind, has_change, (int)want, &n);
    if (!rows)
        return n ? ST_ENOMEM : ST_OK;
    pg_buf a[5] = {{0}};
    int np = kind == 'g' ? 3 : kind == 's' ? 5 : (want == DELETE ? 2 : 5);
    static const unsigned oids[3][5] = {
        {PG_OID_TEXT, PG_OID_INT8, PG_OID_INT8, 0, 0},                     /* groups */
        {PG_OID_TEXT, PG_OID_TEXT, PG_OID_INT8, PG_OID_INT8, PG_OID_INT8}, /* members */
        {PG_OID_TEXT, PG_OID_TEXT, PG_OID_TEXT, PG_OID_INT8, PG_OID_INT8}, /* sends */
    };
    int t = kind == 'g' ? 0 : kind == 'm' ? 1 : 2;
    for (int i = 0; i < np; i++)
        pg_arr_begin(&a[i], oids[t][i], n);
    for (size_t k = 0; k < n; k++) {
        const pg_row *r = rows[k];
        pg_arr_bytes(&a[0], r->a.p, r->a.n);
        if (kind == 'g') {
            pg_arr_int8(&a[1], r->v.g.last_mid);
            pg_arr_int8(&a[2], want == INSERT ? r->v.g.created_ms : r->v.g.last_cseq);
        } else if (kind == 'm') {
            pg_arr_bytes(&a[1], r->b.p, r->b.n);
            if (want != DELETE) {
                pg_arr_int8(&a[2], r->v.m.ack);
                pg_arr_int8(&a[3], r->v.m.joined_ms);
                pg_arr_int8(&a[4], r->v.m.has_read ? r->v.m.read : UINT64_MAX); /* -1: none */
            }
        } else {
            pg_arr_bytes(&a[1], r->b.p, r->b.n);
            pg_arr_bytes(&a[2], r->v.s.gid, r->v.s.gid_n);
            pg_arr_int8(&a[3], r->v.s.mid);
            pg_arr_int8(&a[4], r->v.s.ts);
        }
    }
    free(rows);
    return pg_send_arrays(p, st, a, np, n_stmts); /* a[np..] were never begun */
}

static int by_uid(const void *x, const void *y)
{
    return st_id_cmp(((const st_seen *)x)->uid, ((const st_seen *)y)->uid);
}

/* The batch's moves of users' times (last_seen, not-before), one row a user (the latest),
 * in uid order. */
static int send_times(pg *p, pg_times *t, enum pg_stmt stmt, int *n_stmts)
{
    if (!t->n)
        return ST_OK;
    qsort(t->v, t->n, sizeof(*t->v), by_uid);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (n && st_id_cmp(t->v[n - 1].uid, t->v[i].uid) == 0) {
            if (t->v[i].ms > t->v[n - 1].ms)
                t->v[n - 1].ms = t->v[i].ms;
            continue;
        }
        t->v[n++] = t->v[i];
    }
    t->n = n;
    pg_buf a[2] = {{0}};
    pg_arr_begin(&a[0], PG_OID_TEXT, n);
    pg_arr_begin(&a[1], PG_OID_INT8, n);
    for (size_t i = 0; i < n; i++) {
        pg_arr_bytes(&a[0], t->v[i].uid.p, t->v[i].uid.n);
        pg_arr_int8(&a[1], t->v[i].ms);
    }
    return pg_send_arrays(p, stmt, a, 2, n_stmts);
}

static int by_msg(const void *x, const void *y)
{
    const pg_msg *a = x, *b = y;
    int c = a->gid.n != b->gid.n ? (a->gid.n > b->gid.n) - (a->gid.n < b->gid.n)
                                 : memcmp(a->gid.p, b->gid.p, a->gid.n);
    return c ? c : (a->mid > b->mid) - (a->mid < b->mid);
}

static int send_msgs(pg *p, int *n_stmts)
{
    if (!p->n_msgs)
        return ST_OK;
    qsort(p->msgs, p->n_msgs, sizeof(*p->msgs), by_msg);
    pg_buf a[4] = {{0}};
    pg_arr_begin(&a[0], PG_OID_TEXT, p->n_msgs);
    pg_arr_begin(&a[1], PG_OID_INT8, p->n_msgs);
    pg_arr_begin(&a[2], PG_OID_INT8, p->n_msgs);
    pg_arr_begin(&a[3], PG_OID_BYTEA, p->n_msgs);
    for (size_t i = 0; i < p->n_msgs; i++) {
        const pg_msg *m = &p->msgs[i];
        pg_arr_bytes(&a[0], m->gid.p, m->gid.n);
        pg_arr_int8(&a[1], m->mid);
        pg_arr_int8(&a[2], m->ts);
        pg_arr_bytes(&a[3], m->rec, m->n);
    }
    return pg_send_arrays(p, PG_INS_MSGS, a, 4, n_stmts);
}

/* Does the batch's announcement go in its transaction? When it makes or ends a
 * membership or signs a user out: then it is told in commit order with every other
 * batch's change to those groups (their rows are locked until the commit), so a listener
 * never applies a leave before the join it ends, nor the other way round. Messages and
 * acks need no such order (a listener holds a message until the ones before it came, or
 * reads them; an ack only moves forward), so the rest are announced after their commit,
 * in a transaction of their own: a notifying commit holds a lock over the whole server
 * until its WAL is flushed, which would make every gateway's commits take turns. */
static bool announce_in_tx(const pg *p)
{
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp)
        if (r->kind == 'm' && (change_of(r) == INSERT || change_of(r) == DELETE))
            return true;
    for (st_op *op = p->writes; op; op = op->next_)
        if (op->kind == ST_OP_SIGNOUT && op->result == ST_OK)
            return true;
    return false;
}

/* What the batch changed, for the other gateways (store_pg_events.c): joins, the
 * messages (sorted by send_msgs), acks, then leaves. The change log's row says the same
 * with one hint a group for its messages (their records are in msgs already), and
 * without the sign-outs (a sign-out is for the sessions of that moment, not one to
 * replay later). */
static void announce_make(pg *p)
{
    pg_announce *a = &p->announce, *log = &p->log;
    pg_announce_reset(a, p->origin);
    pg_announce_reset(log, p->origin);
    pg_row *r, *tmp;
    HASH_ITER (hh, p->rows, r, tmp)
        if (r->kind == 'm' && change_of(r) == INSERT) {
            pg_announce_member(a, 'j', r->a, r->b, r->v.m.ack);
            pg_announce_member(log, 'j', r->a, r->b, r->v.m.ack);
        }
    for (size_t i = 0, first = 0; i < p->n_msgs; i++) {
        const pg_msg *m = &p->msgs[i];
        pg_announce_msg(a, m->gid, m->mid, m->ts, m->rec, m->n);
        const pg_msg *next = i + 1 < p->n_msgs ? &p->msgs[i + 1] : NULL;
        if (!next || next->gid.n != m->gid.n || memcmp(next->gid.p, m->gid.p, m->gid.n) != 0) {
            pg_announce_hint(log, m->gid, p->msgs[first].mid, m->mid); /* the group's run */
            first = i + 1;
        }
    }
    HASH_ITER (hh, p->rows, r, tmp) {
        if (r->kind != 'm' || change_of(r) != UPDATE)
            continue;
        if (r->v.m.ack != r->m0.ack) {
            pg_announce_member(a, 'a', r->a, r->b, r->v.m.ack);
            pg_announce_member(log, 'a', r->a, r->b, r->v.m.ack);
        }
        if (r->v.m.has_read && (!r->m0.has_read || r->v.m.read != r->m0.read)) {
            pg_announce_member(a, 'v', r->a, r->b, r->v.m.read);
            pg_announce_member(log, 'v', r->a, r->b, r->v.m.read);
        }
    }
    pg_versions_announce(p, a, log);
    pg_rx_announce(p, a, log);
    HASH_ITER (hh, p->rows, r, tmp)
        if (r->kind == 'm' && change_of(r) == DELETE) {
            pg_announce_member(a, 'l', r->a, r->b, 0);
            pg_announce_member(log, 'l', r->a, r->b, 0);
        }
    for (st_op *op = p->writes; op; op = op->next_)
        if (op->kind == ST_OP_SIGNOUT && op->result == ST_OK)
            pg_announce_signout(a, op->uid);
}

/* Ends an open transaction without committing it (the connection may be gone). */
static void rollback_now(pg *p)
{
    char why[256];
    if (p->conn && p->in_tx && pg_send(p, PG_ROLLBACK, NULL, 0) == ST_OK &&
        pg_sync(p, why, sizeof(why)) == ST_OK) {
        PQclear(pg_result(p, why, sizeof(why)));
        pg_end(p, why, sizeof(why));
    }
    p->in_tx = false;
}

static void pg_rollback(void *be)
{
    rollback_now(be);
    rows_clear(be);
}

/* Round trip 2's answers: 0, ST_EAGAIN (a collision) or ST_EIO (the outcome is unknown).
 * The first n_data are the batch's (ending with its COMMIT); the rest, if any, are its
 * announcement's own transaction, whose outcome goes to *announced: once the batch's
 * COMMIT answered, the batch stands whatever happens to its announcement. */
static int take_writes(pg *p, int n, int n_data, bool *announced, char *why, size_t why_len)
{
    int out = ST_OK;
    *announced = true;
    for (int i = 0; i < n; i++) {
        PGresult *r = pg_result(p, why, why_len);
        if (!r && i >= n_data && out == ST_OK) {
            *announced = false; /* lost after the commit: the next connection sends it */
            why[0] = 0;
            return ST_OK;
        }
        if (!r) {
            /* Lost while the server had the batch: it may or may not have committed. */
            snprintf(why + strlen(why), why_len - strlen(why),
                     "; the batch's commit outcome is unknown");
            return ST_EIO;
        }
        ExecStatusType st = PQresultStatus(r);
        bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
        if (i >= n_data && out == ST_OK) {
            *announced = *announced && ok; /* a failed one leaves the rest aborted */
            PQclear(r);
        } else if (out == ST_OK && !ok) {
            out = fail_tx(p, r, "writing the batch failed", why, why_len);
        } else {
            PQclear(r);
        }
    }
    if (pg_end(p, why, why_len) != ST_OK) {
        if (out == ST_OK && n > n_data) {
            *announced = false;
            why[0] = 0;
            return ST_OK;
        }
        snprintf(why + strlen(why), why_len - strlen(why),
                 "; the batch's commit outcome is unknown");
        return ST_EIO;
    }
    /* A statement that failed left the slow path's transaction aborted (its COMMIT was
     * skipped); the fast path's implicit one ended with the Sync. */
    p->in_tx = PQtransactionStatus(p->conn) != PQTRANS_IDLE;
    if (p->in_tx)
        rollback_now(p);
    return out;
}

/* The batch's announcement in a transaction of its own, after the batch's COMMIT in the
 * same round trip: one statement, the implicit transaction that the Sync ends. The
 * server runs it only if everything before it succeeded (a failure skips the rest of the
 * pipeline up to its Sync). */
static int announce_after(pg *p, int *n)
{
    if (!pg_announce_pending(p, &p->announce))
        return ST_OK;
    return pg_announce_send(p, &p->announce, n, true);
}

static void prune_log(pg *p);
static void refresh_size(pg *p);
#define SIZE_EVERY_MS 5000 /* the database's size, read again under a steady load */

static int pg_commit(void *be, char *why, size_t why_len)
{
    pg *p = be;
    int n = 0, rc = ST_OK;
    pg_announce_reset(&p->announce, p->origin);
    bool in_tx = announce_in_tx(p);
    /* The announcement after the commit needs the batch's transaction to end before the
     * Sync: the fast path's is made explicit (it was the Sync's implicit one). */
    if (!in_tx && p->fast && (rc = pg_send(p, PG_BEGIN, NULL, 0)) == ST_OK)
        n++;
    /* Shards: the slots' fences first, before anything is locked or written. */
    if (rc == ST_OK)
        rc = pg_fence_send(p, &n);
    /* The fast path's check first (the groups locked, as round trip 1 does); then the
     * messages: a collision shows there, before anything else is written; then the
     * (uid, cid) rows, the groups, the memberships. */
    if (rc == ST_OK && p->fast)
        rc = pg_cache_send_check(p, &n);
    if (rc == ST_OK)
        rc = send_msgs(p, &n);
    static const struct {
        enum pg_stmt st;
        char kind;
        enum change want;
    } rows[] = {{PG_INS_SENDS, 's', INSERT},   {PG_INS_GROUPS, 'g', INSERT},
                {PG_UPD_GROUPS, 'g', UPDATE},  {PG_DEL_MEMBERS, 'm', DELETE},
                {PG_INS_MEMBERS, 'm', INSERT}, {PG_UPD_MEMBERS, 'm', UPDATE}};
    for (size_t i = 0; rc == ST_OK && i < sizeof(rows) / sizeof(rows[0]); i++)
        rc = send_rows(p, rows[i].st, rows[i].kind, rows[i].want, &n);
    if (rc == ST_OK)
        rc = send_times(p, &p->seen, PG_UPS_SEEN, &n);
    if (rc == ST_OK)
        rc = p->nbf.lost ? ST_ENOMEM : send_times(p, &p->nbf, PG_UPS_NBF, &n);
    if (rc == ST_OK)
        rc = pg_versions_send(p, &n);
    if (rc == ST_OK)
        rc = p->rx_lost ? ST_ENOMEM : pg_rx_send_writes(p, &n);
    if (rc == ST_OK)
        announce_make(p);
    if (rc == ST_OK && in_tx)
        rc = pg_announce_send(p, &p->announce, &n, false);
    if (rc == ST_OK)
        rc = pg_log_send(p, &p->log, &n);
    /* The slow path ends its transaction, and so does the fast path's made explicit;
     * otherwise the fast path's statements are an implicit one, which the Sync commits. */
    if (rc == ST_OK && (!p->fast || !in_tx) && (rc = pg_send(p, PG_COMMIT, NULL, 0)) == ST_OK)
        n++;
    int n_data = n;
    /* Tests: the announcement lost, as if the server died between the two. */
    bool drop =
        rc == ST_OK && !in_tx && p->drop_announces > 0 && pg_announce_pending(p, &p->announce) > 0;
    if (drop) {
        p->drop_announces--;
        pg_announce_reset(&p->announce, p->origin);
    } else if (rc == ST_OK && !in_tx) {
        rc = announce_after(p, &n);
    }
    if (rc != ST_OK) {
        /* Some statements may be queued already: drop the connection, which rolls the
         * transaction back, rather than send half a batch (nothing is committed). */
        if (rc == ST_ENOMEM)
            snprintf(why, why_len, "out of memory for the batch");
        else
            pg_why(p, NULL, "sending to the database failed", why, why_len);
        pg_disconnect(p);
        pg_cache_clear(p);
        rows_clear(p);
        return ST_EIO;
    }
    rc = pg_sync(p, why, why_len);
    bool announced = false;
    if (rc == ST_OK)
        rc = take_writes(p, n, n_data, &announced, why, why_len);
    else
        rc = ST_EIO; /* the server runs what it got as it comes: the outcome is unknown */
    /* Committed, announced or not (kept for the next); not committed, nothing is told
     * (the late payloads it carried wait on). Outcome unknown, with the announcement to
     * follow the commit: the listeners are told to catch up (the batch may stand). */
    if (!drop) {
        if (rc == ST_EIO && !in_tx && p->announce.n)
            p->owe_resync = true;
        pg_announce_done(p, &p->announce, rc == ST_OK, rc == ST_OK && announced);
    }
    if (rc == ST_OK)
        pg_cache_keep(p);
    else if (rc == ST_EAGAIN)
        pg_cache_stale(p);
    else
        pg_cache_clear(p);
    rows_clear(p);
    if (rc == ST_OK && st_mono_ms() >= p->prune_at)
        prune_log(p); /* under a steady load the idle probe does not come */
    if (rc == ST_OK && st_mono_ms() >= p->size_at)
        refresh_size(p); /* nor would the database's size be read again */
    return rc;
}

/* ---- life cycle, trouble, figures ----------------------------------------------------- */

static void pg_close(void *be)
{
    pg *p = be;
    if (!p)
        return;
    pg_feed_stop(p->feed);
    pg_disconnect(p);
    rows_clear(p);
    pg_cache_clear(p);
    pg_announce_free(&p->announce);
    pg_announce_free(&p->log);
    for (size_t i = 0; i < p->n_late; i++)
        pg_buf_free(&p->late[i]);
    free(p->late);
    free(p->msgs);
    free(p->seen.v);
    free(p->nbf.v);
    free(p->url);
    free(p->kw);
    free(p->val);
    free(p);
}

/* One statement without parameters in a round trip of its own; its result, or NULL. */
static PGresult *one(pg *p, enum pg_stmt st, char *why, size_t why_len)
{
    if (pg_send(p, st, NULL, 0) != ST_OK || pg_sync(p, why, why_len) != ST_OK) {
        if (!why[0])
            pg_why(p, NULL, "sending to the database failed", why, why_len);
        return NULL;
    }
    PGresult *r = pg_result(p, why, why_len);
    if (pg_end(p, why, why_len) != ST_OK) {
        PQclear(r);
        return NULL;
    }
    if (r && PQresultStatus(r) != PGRES_TUPLES_OK) {
        pg_why(p, r, "a query failed", why, why_len);
        PQclear(r);
        return NULL;
    }
    return r;
}

static void refresh_size(pg *p)
{
    p->size_at = st_mono_ms() + SIZE_EVERY_MS;
    char why[256] = "";
    PGresult *r = p->conn ? one(p, PG_SIZE, why, sizeof(why)) : NULL;
    if (r && PQntuples(r) == 1)
        atomic_store(&p->disk_bytes, pg_get_int8(r, 0, 0));
    PQclear(r);
}

static int pg_count(void *be, uint64_t *groups, uint64_t *messages)
{
    pg *p = be;
    char why[256] = "";
    PGresult *r = p->conn ? one(p, PG_COUNT, why, sizeof(why)) : NULL;
    int rc = r && PQntuples(r) == 1 ? ST_OK : ST_EIO;
    if (rc == ST_OK) {
        *groups = pg_get_int8(r, 0, 0);
        *messages = pg_get_int8(r, 0, 1);
    }
    PQclear(r);
    return rc;
}

/* Announcements kept from batches before (their connection was lost after the commit),
 * sent while idle rather than with the next batch, whenever that comes. */
static void announce_late(pg *p)
{
    char why[256] = "";
    int n = 0;
    pg_announce_reset(&p->announce, p->origin); /* no batch: nothing of its own */
    int rc = announce_after(p, &n);
    if (rc == ST_OK)
        rc = pg_sync(p, why, sizeof(why));
    bool announced = false;
    if (rc == ST_OK)
        rc = take_writes(p, n, 0, &announced, why, sizeof(why));
    pg_announce_done(p, &p->announce, true, rc == ST_OK && announced);
}

/* How long the change log keeps a batch's row: a gateway whose listener was away for
 * longer (or that starts) reads its online users again instead (store_pg_feed.c). */
#define LOG_WINDOW_MS ST_LOG_KEEP_MS
#define PRUNE_EVERY_MS 10000
#define PRUNE_ROWS 10000 /* a statement's delete (PG_PRUNE's LIMIT) */
#define PRUNE_ROUNDS 10  /* statements at most each time: 10,000 rows a second */

/* The change log's rows older than the window go (every gateway does it every 10 s, when
 * idle or after a commit; two at once delete different rows or wait on each other's,
 * harmlessly). */
static void prune_log(pg *p)
{
    p->prune_at = st_mono_ms() + PRUNE_EVERY_MS;
    uint64_t deleted = PRUNE_ROWS;
    for (int round = 0; round < PRUNE_ROUNDS && deleted == PRUNE_ROWS && p->conn; round++) {
        char why[256] = "";
        pg_buf cut = {0};
        pg_int8(&cut, st_now_ms() - LOG_WINDOW_MS);
        pg_buf *params[1] = {&cut};
        int rc = pg_send(p, PG_PRUNE, params, 1);
        pg_buf_free(&cut);
        if (rc == ST_OK)
            rc = pg_sync(p, why, sizeof(why));
        if (rc != ST_OK)
            return;
        PGresult *r = pg_result(p, why, sizeof(why));
        deleted = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                      ? pg_get_int8(r, 0, 0)
                      : 0;
        PQclear(r);
        if (pg_end(p, why, sizeof(why)) != ST_OK)
            return;
    }
    /* The unread webhook's tells kept past their hour: one statement of 10,000 at most
     * (a tell is made at most once per member and group until it acks). */
    char why[256] = "";
    pg_buf cut = {0};
    pg_int8(&cut, st_now_ms() - ST_TELL_KEEP_MS);
    pg_buf *params[1] = {&cut};
    int rc = p->conn ? pg_send(p, PG_PRUNE_TELLS, params, 1) : ST_EIO;
    pg_buf_free(&cut);
    if (rc == ST_OK && pg_sync(p, why, sizeof(why)) == ST_OK) {
        PQclear(pg_result(p, why, sizeof(why)));
        pg_end(p, why, sizeof(why));
    }
}

/* Idle for a second: is the connection there, and on a server that takes writes? (After
 * a failover the old primary may come back as a standby.) Every ten probes the
 * database's size is taken again for the figures; announcements kept go. */
static int pg_probe(void *be, char *why, size_t why_len)
{
    pg *p = be;
    if (!p->conn) {
        snprintf(why, why_len, "not connected to the database (%s)", p->where);
        return ST_EIO;
    }
    PGresult *r = one(p, PG_RECOVERY, why, why_len);
    if (!r)
        return ST_EIO;
    bool standby = PQntuples(r) == 1 && PQgetlength(r, 0, 0) == 1 && PQgetvalue(r, 0, 0)[0];
    PQclear(r);
    if (standby) {
        snprintf(why, why_len, "the database is a standby now and takes no writes (%s)", p->where);
        return ST_EIO;
    }
    if (++p->probe_n % 10 == 0)
        refresh_size(p);
    if (p->n_late || p->owe_resync)
        announce_late(p);
    if (p->conn && st_mono_ms() >= p->prune_at)
        prune_log(p);
    return ST_OK;
}

/* After trouble: a new connection (the old one's state is unknown), then the probe. The
 * change log's prune waits for the next commit or idle probe after PRUNE_EVERY_MS: a
 * recovery is what stands between the node and writes (in a failover, every node's at
 * once, on a server that has just been promoted), and a prune measured 0.2 to 0.6 s
 * there, half the time from the promotion to writes, for rows nobody needs gone now. */
static int pg_recover(void *be, char *why, size_t why_len)
{
    pg *p = be;
    atomic_fetch_add(&p->reconnects, 1);
    int rc = pg_connect(p, why, why_len);
    p->prune_at = st_mono_ms() + PRUNE_EVERY_MS;
    if (rc == ST_OK)
        rc = pg_probe(p, why, why_len);
    if (rc == ST_OK)
        refresh_size(p);
    return rc == ST_OK ? ST_OK : ST_EIO;
}

static int pg_open(const st_options *o, void **be, char *why, size_t why_len)
{
    *be = NULL;
    pg *p = calloc(1, sizeof(*p));
    if (!p)
        return ST_ENOMEM;
    p->sync = o->sync;
    p->changes_keep = o->changes_keep;
    p->changes_keep_ms = o->changes_keep_ms;
    p->drop_announces = o->test_drop_announcements;
    p->slots = o->slots;
    /* Names this store's announcements; a collision with another gateway's would only
     * make each skip some of the other's (1 in 2^64). */
    p->origin = o->origin;
    if (!p->origin && RAND_bytes((unsigned char *)&p->origin, sizeof(p->origin)) != 1)
        p->origin = st_now_ms() ^ ((uint64_t)getpid() << 40);
    int rc = pg_parse_url(p, o->url, why, why_len);
    if (rc == ST_OK) {
        /* The database shows which gateway each connection is (pg_stat_activity). */
        snprintf(p->app, sizeof(p->app), "gw %s", o->node ? o->node : "");
        for (size_t i = 0; p->kw[i]; i++)
            if (strcmp(p->kw[i], "application_name") == 0)
                p->val[i] = p->app;
        rc = pg_connect(p, why, why_len);
    }
    if (rc == ST_OK)
        refresh_size(p);
    if (rc != ST_OK && rc != ST_EIO) {
        pg_close(p);
        return rc;
    }
    /* The listener starts whatever the database's state: it connects when it can. */
    if (o->on_change && !(p->feed = pg_feed_start(p, o))) {
        snprintf(why, why_len, "cannot start the change feed's listener");
        pg_close(p);
        return ST_ENOMEM;
    }
    *be = p;
    return rc == ST_EIO ? ST_EDOWN : ST_OK;
}

static void pg_figures(void *be, st_stats *out)
{
    pg *p = be;
    out->connected = atomic_load(&p->connected);
    out->reconnects = atomic_load(&p->reconnects);
    out->disk_bytes = atomic_load(&p->disk_bytes);
    out->feed_announced = atomic_load(&p->announced);
    out->feed_hints = atomic_load(&p->hints);
    out->feed_late = atomic_load(&p->late_total);
    out->feed_late_dropped = atomic_load(&p->late_dropped);
    pg_feed_figures(p->feed, out);
}

static uint64_t pg_origin_of(void *be)
{
    return ((pg *)be)->origin;
}

static const char *pg_where_of(void *be)
{
    return ((pg *)be)->where;
}

const st_backend st_pg_backend = {
    .name = "postgres",
    .inline_reads = false,
    .open = pg_open,
    .close = pg_close,
    .begin = pg_begin,
    .refuses = pg_fence_refuses,
    .get_group = pg_get_group,
    .put_group = pg_put_group,
    .get_member = pg_get_member,
    .add_member = pg_put_member,
    .put_member = pg_put_member,
    .del_member = pg_del_member,
    .get_send = pg_get_send,
    .put_send = pg_put_send,
    .put_msg = pg_put_msg,
    .get_msg = pg_get_msg,
    .put_version = pg_put_version,
    .changes = true,
    .get_reaction = pg_get_reaction,
    .put_react = pg_put_react,
    .put_log = pg_put_log,
    .put_seen = pg_put_seen,
    .put_not_before = pg_put_not_before,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .read = pg_read,
    .unread = pg_unread,
    .probe = pg_probe,
    .recover = pg_recover,
    .retry_first_ms = PG_RETRY_FIRST_MS,
    .retry_max_ms = PG_RETRY_MAX_MS,
    .count = pg_count,
    .figures = pg_figures,
    .where = pg_where_of,
    .origin = pg_origin_of,
};
