/*
 * Requests: decode, check, answer from memory or the store's reads, or hand a write to
 * the store's writer thread and answer when it has committed (gw_route_complete).
 */
#include "gw_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NO_GID ((pr_slice){0})

static void slice_cpy(char *dst, pr_slice s)
{
    memcpy(dst, s.p, s.n);
    dst[s.n] = 0;
}

static pr_slice cstr(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

static int store_err_code(int rc)
{
    switch (rc) {
    case ST_ENOGROUP: return PR_E_NO_GROUP;
    case ST_ENOTMEMBER: return PR_E_NOT_MEMBER;
    case ST_ECONFLICT: return PR_E_BAD_FIELD;
    case ST_EINVAL: return PR_E_BAD_FIELD;
    case ST_ECLOSED: return PR_E_OVERLOADED;
    case ST_EIO: return PR_E_UNAVAILABLE;
    default: return PR_E_INTERNAL;
    }
}

static const char *store_err_msg(int rc)
{
    switch (rc) {
    case ST_ENOGROUP: return "no such group";
    case ST_ENOTMEMBER: return "not a member of this group";
    case ST_ECONFLICT: return "this cid was already used for another group";
    case ST_EIO: return "storage unavailable (disk full or not writable): retry later";
    case ST_ECLOSED: return "server is shutting down";
    default: return "internal error";
    }
}

void gw_pending_free(gw_pending *p)
{
    msgpack_sbuffer_destroy(&p->record);
    free(p->acks);
    free(p->ack_ids);
    free(p);
}

static gw_pending *pending_new(gw_sess *s, uint64_t rid)
{
    gw_pending *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->srv = s->srv;
    p->sid = s->sid;
    p->rid = rid;
    strcpy(p->uid, s->user->uid);
    msgpack_sbuffer_init(&p->record);
    return p;
}

/* Writer thread: queue the finished op for the service thread and wake it. */
static void on_done(st_op *op)
{
    gw_pending *p = op->ud;
    gw_server *srv = p->srv;
    pthread_mutex_lock(&srv->done_mu);
    p->next = NULL;
    if (srv->done_tail)
        srv->done_tail->next = p;
    else
        srv->done_head = p;
    srv->done_tail = p;
    pthread_mutex_unlock(&srv->done_mu);
    lws_cancel_service(srv->ctx);
}

int gw_route_submit(gw_server *srv, gw_pending *p)
{
    p->op.done = on_done;
    p->op.ud = p;
    gw_sess *s = p->sid ? gw_sess_find(srv, p->sid) : NULL;
    /* Client writes are refused past the overload mark; the gateway's own ack batches
     * always go (they are what keeps re-delivery small). */
    int rc = s && st_pending(srv->store) >= srv->cfg.store_overload
                 ? ST_ECLOSED
                 : st_submit(srv->store, &p->op);
    if (rc != 0) {
        if (s) {
            bool overload = rc == ST_ECLOSED && !srv->stopping;
            gw_sess_error(s, p->rid, overload ? PR_E_OVERLOADED : store_err_code(rc),
                          overload ? "server overloaded: retry later" : store_err_msg(rc),
                          p->gid[0] ? cstr(p->gid) : NO_GID);
        }
        gw_pending_free(p);
        return rc;
    }
    srv->ops_inflight++;
    if (s) {
        s->inflight++;
        gw_sess_flow(s);
    }
    return 0;
}

/* ---- replies -------------------------------------------------------------------------- */

/* The user's groups as `welcome` and `groups` list them, after their header. */
static int enc_groups(gw_sess *s, msgpack_sbuffer *sb)
{
    int rc = 0;
    gw_member *m, *tmp;
    HASH_ITER(hh, s->user->groups, m, tmp)
    {
        gw_group *g = gw_group_find(s->srv, m->gid, strlen(m->gid));
        uint64_t last = g ? g->last_mid : m->ack;
        pr_group e = {cstr(m->gid), last, m->ack, last > m->ack ? last - m->ack : 0};
        rc = rc ? rc : pr_enc_group_entry(sb, &e);
    }
    return rc;
}

/* welcome (hello) or groups (groups request). */
static void send_groups(gw_sess *s, uint64_t rid, bool welcome)
{
    gw_server *srv = s->srv;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t n = HASH_COUNT(s->user->groups);
    int rc;
    if (welcome) {
        pr_welcome w = {.uid = cstr(s->user->uid), .sid = cstr(s->sid_str), .ts = gw_now_ms(),
                        .ack_every = srv->cfg.ack_every, .ack_delay_ms = srv->cfg.ack_delay_ms,
                        .max_body = (uint32_t)srv->cfg.max_body};
        rc = pr_enc_welcome_begin(&sb, rid, &w, n);
    } else {
        rc = pr_enc_groups_begin(&sb, rid, n);
    }
    rc = rc ? rc : enc_groups(s, &sb);
    if (rc == 0)
        gw_sess_reply(s, &sb);
    else
        gw_sess_error(s, rid, PR_E_INTERNAL, "cannot encode the group list", NO_GID);
    msgpack_sbuffer_destroy(&sb);
}

/* A page read from the store: at most `limit` messages and at most max_frame bytes, so
 * that a page of large bodies is cut short (with more: true) rather than oversized. */
static void send_page(gw_sess *s, uint64_t rid, pr_slice gid, enum st_dir dir, uint64_t from,
                      uint32_t limit)
{
    gw_server *srv = s->srv;
    char g[PR_MAX_ID + 1];
    slice_cpy(g, gid);
    if (limit > srv->cfg.page_max)
        limit = srv->cfg.page_max;
    /* Each entry costs its record plus a map header and "mid", "ts" with 9-byte integers
     * (32 bytes at most); the page's own fields fit in 256. So records get what is left. */
    size_t budget = srv->cfg.max_frame - 256 - gid.n, per_entry = 32 * (size_t)limit;
    size_t record_budget = budget > 2 * per_entry ? budget - per_entry : budget / 2;
    st_page *pg = NULL;
    int rc = st_read_page_bounded(srv->store, st_id_str(g), dir, from, limit, record_budget, &pg);
    if (rc != 0) {
        gw_sess_error(s, rid, store_err_code(rc), store_err_msg(rc), gid);
        return;
    }
    size_t n = st_page_count(pg);
    bool more = st_page_more(pg);
    /* Pages read the store directly, so they may show a mid whose completion this thread
     * has not run yet: keep the cap on acks in step with what clients can see. */
    gw_group *grp = gw_group_find(srv, g, strlen(g));
    if (grp && st_page_last_mid(pg) > grp->last_mid)
        grp->last_mid = st_page_last_mid(pg);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    rc = pr_enc_page_begin(&sb, rid, gid, st_page_last_mid(pg), more, n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const st_msg *m = st_page_at(pg, i);
        rc = pr_enc_page_entry(&sb, m->mid, m->ts, (pr_slice){m->record, m->record_n});
    }
    if (rc == 0)
        gw_sess_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (rc != 0)
        gw_sess_error(s, rid, PR_E_INTERNAL, "cannot encode page", gid);
    srv->n.pages++;
    srv->n.page_msgs += n;
    st_page_free(pg);
}

/* ---- requests -------------------------------------------------------------------------- */

static void on_hello(gw_sess *s, const pr_req *r)
{
    gw_server *srv = s->srv;
    if (s->user) {
        gw_sess_error(s, r->rid, PR_E_BAD_TYPE, "already signed in on this session", NO_GID);
        return;
    }
    const char *why = NULL;
    if (gw_auth_check(srv->cfg.secret, srv->cfg.secret_n, r->token, (int64_t)time(NULL), &s->id,
                      &why) != 0) {
        srv->n.auth_failures++;
        srv->n.closes_4001++;
        char reason[96];
        snprintf(reason, sizeof(reason), "unauthorized: %s", why);
        gw_sess_close(s, 4001, reason);
        return;
    }
    int rc = gw_user_attach(srv, s->id.uid, s);
    if (rc != 0) {
        gw_err("session %s: cannot load user %s: %s", s->sid_str, s->id.uid, st_strerror(rc));
        gw_sess_close(s, 1011, "cannot load the user's groups");
        return;
    }
    srv->n.sessions_total++;
    gw_dbg("session %s signed in as %s", s->sid_str, s->id.uid);
    send_groups(s, r->rid, true);
}

/* The membership a group request needs, or an error reply and NULL. */
static gw_member *need_member(gw_sess *s, const pr_req *r, pr_slice gid)
{
    gw_member *m = gw_member_find(s->user, gid);
    if (!m)
        gw_sess_error(s, r->rid, PR_E_NOT_MEMBER, "not a member of this group", gid);
    return m;
}

/* Submits a join or leave of r->gid; 0 if it is on its way (an error was replied if not). */
static int submit_simple(gw_sess *s, const pr_req *r, enum st_op_kind kind)
{
    gw_pending *p = pending_new(s, r->rid);
    if (!p) {
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return -1;
    }
    slice_cpy(p->gid, r->gid);
    p->op.kind = kind;
    p->op.gid = st_id_str(p->gid);
    p->op.uid = st_id_str(p->uid);
    p->counted = kind == ST_OP_JOIN && !gw_member_find(s->user, r->gid);
    return gw_route_submit(s->srv, p);
}

static void on_join(gw_sess *s, const pr_req *r)
{
    if (!gw_identity_allows(&s->id, r->gid)) {
        gw_sess_error(s, r->rid, PR_E_UNAUTHORIZED, "your token does not allow this group",
                      r->gid);
        return;
    }
    gw_user *u = s->user;
    bool member = gw_member_find(u, r->gid) != NULL;
    /* Joins still in flight count too: a client that pipelines joins would otherwise get
     * up to --inflight-max of them past the limit before the first one completes. */
    if (!member && HASH_COUNT(u->groups) + u->joins_inflight >= s->srv->cfg.max_groups) {
        gw_sess_error(s, r->rid, PR_E_TOO_LARGE, "member of too many groups: leave one first",
                      r->gid);
        return;
    }
    if (submit_simple(s, r, ST_OP_JOIN) == 0 && !member)
        u->joins_inflight++; /* undone in complete_join */
}

static void on_leave(gw_sess *s, const pr_req *r)
{
    if (need_member(s, r, r->gid))
        submit_simple(s, r, ST_OP_LEAVE);
}

static void on_send(gw_sess *s, const pr_req *r)
{
    if (!need_member(s, r, r->gid))
        return;
    const char *why = NULL;
    uint64_t retry_ms = gw_throttle_send(s, &why);
    if (retry_ms) {
        /* Not charged to the error budget: see gw_throttle.c. */
        s->srv->n.errors[-PR_E_RATE_LIMITED]++;
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (pr_enc_err_retry(&sb, r->rid, PR_E_RATE_LIMITED, why, r->gid, retry_ms) == 0)
            gw_sess_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    gw_pending *p = pending_new(s, r->rid);
    if (!p || pr_enc_record(&p->record, cstr(s->user->uid), r->body) != 0) {
        if (p)
            gw_pending_free(p);
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    slice_cpy(p->gid, r->gid);
    slice_cpy(p->cid, r->cid);
    p->op = (st_op){.kind = ST_OP_APPEND, .gid = st_id_str(p->gid), .uid = st_id_str(p->uid),
                    .cid = st_id_str(p->cid), .record = p->record.data,
                    .record_n = p->record.size};
    gw_route_submit(s->srv, p);
}

static void on_ack(gw_sess *s, const pr_req *r)
{
    gw_server *srv = s->srv;
    srv->n.ack_frames++;
    bool charged = false;
    for (size_t i = 0; i < r->n_acks; i++) {
        const pr_ack *a = &r->acks[i];
        srv->n.acks_received++;
        gw_member *m = gw_member_find(s->user, a->gid);
        if (!m) {
            /* One bad frame costs the error budget once, however many groups it names. */
            (charged ? gw_sess_error_free : gw_sess_error)(
                s, r->rid, PR_E_NOT_MEMBER, "ack for a group you are not in", a->gid);
            charged = true;
            continue;
        }
        gw_group *g = gw_group_find(srv, m->gid, strlen(m->gid));
        uint64_t cap = g ? g->last_mid : m->ack;
        uint64_t mid = a->mid < cap ? a->mid : cap;
        if (mid > m->ack) {
            m->ack = mid;
            gw_acks_add(srv, m->gid, s->user->uid, mid);
        }
    }
}

static void on_ping(gw_sess *s, const pr_req *r)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_pong(&sb, r->rid, gw_now_ms()) == 0)
        gw_sess_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

void gw_route_frame(gw_sess *s, const uint8_t *frame, size_t len)
{
    gw_server *srv = s->srv;
    pr_req r;
    pr_error err = {0};
    int rc = pr_decode_req(srv->dec, frame, len, &r, &err);
    if (!s->user && (rc != 0 || r.t != PR_REQ_HELLO)) {
        /* Nothing but a hello is heard before a hello. */
        srv->n.closes_4001++;
        gw_sess_close(s, 4001, "unauthorized: the first message must be a valid hello");
        return;
    }
    /* From here on, r.rid is what every reply carries: the client's rid, or none. */
    if (!r.has_rid)
        r.rid = PR_NO_RID;
    if (rc != 0) {
        gw_sess_error(s, r.rid, rc, err.msg, NO_GID);
        return;
    }
    /* Stopping: acks are still taken (they are what saves clients re-deliveries after the
     * restart) and pings answered; everything else is refused, not half done. */
    if (srv->stopping && r.t != PR_REQ_ACK && r.t != PR_REQ_PING) {
        gw_sess_error(s, r.rid, PR_E_OVERLOADED, "server is shutting down", NO_GID);
        return;
    }
    switch (r.t) {
    case PR_REQ_HELLO: on_hello(s, &r); break;
    case PR_REQ_JOIN: on_join(s, &r); break;
    case PR_REQ_LEAVE: on_leave(s, &r); break;
    case PR_REQ_GROUPS: send_groups(s, r.rid, false); break;
    case PR_REQ_SEND: on_send(s, &r); break;
    case PR_REQ_ACK: on_ack(s, &r); break;
    case PR_REQ_ENTER: {
        gw_member *m = need_member(s, &r, r.gid);
        if (m)
            send_page(s, r.rid, r.gid, ST_AFTER, m->ack, r.limit);
        break;
    }
    case PR_REQ_PULL:
        if (need_member(s, &r, r.gid))
            send_page(s, r.rid, r.gid, r.has_before ? ST_BEFORE : ST_AFTER,
                      r.has_before ? r.before : r.after, r.limit);
        break;
    case PR_REQ_PING: on_ping(s, &r); break;
    }
}

/* ---- completions ----------------------------------------------------------------------- */

static void complete_append(gw_server *srv, gw_pending *p, gw_sess *s)
{
    const st_op *op = &p->op;
    if (op->result != 0) {
        if (s)
            gw_sess_error(s, p->rid, store_err_code(op->result), store_err_msg(op->result),
                          cstr(p->gid));
        return;
    }
    if (op->duplicate) {
        srv->n.sends_dup++;
    } else {
        srv->n.sends++;
    }
    /* Persisted: confirm to the sender first, then push to everyone else. */
    if (s) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (pr_enc_sent(&sb, p->rid, cstr(p->gid), cstr(p->cid), op->mid, op->ts) == 0)
            gw_sess_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
    }
    if (!op->duplicate)
        gw_fanout(srv, p->gid, op->mid, op->ts, p->record.data, p->record.size, s);
}

static void complete_join(gw_server *srv, gw_pending *p, gw_sess *s)
{
    const st_op *op = &p->op;
    gw_user *u = gw_user_find(srv, p->uid);
    uint64_t ack = op->ack;
    /* A user dropped and signed in again meanwhile starts from 0: never below it. */
    if (p->counted && u && u->joins_inflight)
        u->joins_inflight--;
    if (op->result == 0 && u) {
        gw_member *m = gw_member_add(srv, u, p->gid, op->ack, op->last_mid);
        if (m)
            ack = m->ack;
    }
    if (!s)
        return;
    if (op->result != 0) {
        gw_sess_error(s, p->rid, store_err_code(op->result), store_err_msg(op->result),
                      cstr(p->gid));
        return;
    }
    gw_group *g = gw_group_find(srv, p->gid, strlen(p->gid));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_joined(&sb, p->rid, cstr(p->gid), g ? g->last_mid : op->last_mid, ack) == 0)
        gw_sess_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (op->created)
        gw_info("group %s created by %s", p->gid, p->uid);
}

static void complete_leave(gw_server *srv, gw_pending *p, gw_sess *s)
{
    gw_user *u = gw_user_find(srv, p->uid);
    if (p->op.result == 0 && u)
        gw_member_remove(srv, u, p->gid);
    if (!s)
        return;
    if (p->op.result != 0) {
        gw_sess_error(s, p->rid, store_err_code(p->op.result), store_err_msg(p->op.result),
                      cstr(p->gid));
        return;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_left(&sb, p->rid, cstr(p->gid)) == 0)
        gw_sess_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

void gw_route_complete(gw_server *srv, gw_pending *p)
{
    srv->ops_inflight--;
    gw_sess *s = p->sid ? gw_sess_find(srv, p->sid) : NULL;
    if (s && s->inflight)
        s->inflight--;
    switch (p->op.kind) {
    case ST_OP_APPEND: complete_append(srv, p, s); break;
    case ST_OP_JOIN: complete_join(srv, p, s); break;
    case ST_OP_LEAVE: complete_leave(srv, p, s); break;
    case ST_OP_ACKS:
        gw_acks_written(srv, p->acks, p->op.n_acks);
        if (p->op.result != 0 && srv->stopping) {
            /* No next flush to keep them for: after the restart clients get those
             * messages again (re-delivery, absorbed by their dedup), nothing is lost. */
            gw_warn("ack batch of %zu not persisted: %s (dropped while stopping)",
                    p->op.n_acks, st_strerror(p->op.result));
        } else if (p->op.result != 0) {
            /* Keep them for the next flush; lost only if the gateway dies before. */
            gw_warn("ack batch of %zu not persisted: %s (kept for the next flush)",
                    p->op.n_acks, st_strerror(p->op.result));
            for (size_t i = 0; i < p->op.n_acks; i++) {
                char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
                snprintf(gid, sizeof(gid), "%.*s", (int)p->acks[i].gid.n, p->acks[i].gid.p);
                snprintf(uid, sizeof(uid), "%.*s", (int)p->acks[i].uid.n, p->acks[i].uid.p);
                gw_acks_add(srv, gid, uid, p->acks[i].mid);
            }
        }
        else
            srv->n.ack_writes++, srv->n.ack_entries_written += p->op.n_acks;
        break;
    default:
        break;
    }
    if (s && s->paused)
        gw_sess_flow(s);
    gw_pending_free(p);
}
