/*
 * Each request: its checks, its reply from memory, or its store job (a write, a page, a
 * user's groups) and what its completion does: the reply, then the pushes. gw_reqs.c
 * decides when a request starts; this file, what it does.
 */
#include "gw_hub.h"
#include "gw_internal.h"
#include "gw_webhook.h"

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

int gw_route_err_code(int rc)
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

const char *gw_route_err_msg(int rc)
{
    switch (rc) {
    case ST_ENOGROUP: return "no such group";
    case ST_ENOTMEMBER: return "not a member of this group";
    case ST_ECONFLICT: return "this cid was already used for another group";
    case ST_EIO: return "storage unavailable (disk full, or the database unreachable): retry later";
    case ST_ECLOSED: return "server is shutting down";
    default: return "internal error";
    }
}

/* ---- store jobs ----------------------------------------------------------------------- */

static void complete(gw_job *j);

static gw_req *req_new(gw_sess *s, uint64_t rid, enum st_op_kind kind)
{
    gw_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->srv = s->srv;
    r->sess = s;
    r->rid = rid;
    r->job.op.kind = kind;
    r->job.complete = complete;
    strcpy(r->uid, s->user->uid);
    msgpack_sbuffer_init(&r->record);
    return r;
}

static void req_free(gw_req *r)
{
    msgpack_sbuffer_destroy(&r->record);
    st_page_free(r->job.op.page);
    free(r);
}

/* Hands r's op to the store as a request of its session (the ones after it wait, but
 * sends after a send). 0; or -1 when refused at once: it is answered and freed. */
static int submit(gw_req *r)
{
    gw_server *srv = r->srv;
    gw_sess *s = r->sess;
    const st_op *op = &r->job.op;
    bool send = op->kind == ST_OP_APPEND, write = op->kind <= ST_OP_ACKS;
    /* Client writes are refused past the overload mark: the store is that far behind. */
    int rc = write && st_pending(srv->store) >= srv->cfg.store_overload ? ST_ECLOSED : 0;
    if (rc == 0) {
        gw_reqs_began(s, r, send);
        rc = gw_bridge_submit(srv->bridge, &r->job); /* may complete at once (reads) */
        if (rc >= 0) {
            if (rc == 0 && write && st_pending(srv->store) >= srv->cfg.store_high)
                gw_reqs_store_busy(s);
            return 0;
        }
        gw_reqs_done(s, r, send);
    }
    bool overload = rc == ST_ECLOSED && !srv->stopping;
    gw_sess_error(s, r->rid, overload ? PR_E_OVERLOADED : gw_route_err_code(rc),
                  overload ? "server overloaded: retry later" : gw_route_err_msg(rc),
                  r->gid[0] ? cstr(r->gid) : NO_GID);
    req_free(r);
    return -1;
}

/* ---- replies ---------------------------------------------------------------------------- */

/* The user's groups as `welcome` and `groups` list them, after their header. */
static int enc_groups(gw_sess *s, msgpack_sbuffer *sb)
{
    int rc = 0;
    gw_member *m, *tmp;
    HASH_ITER (hh, s->user->groups, m, tmp) {
        gw_group *g = gw_group_find(s->srv->registry, m->gid, strlen(m->gid));
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
        pr_welcome w = {.uid = cstr(s->user->uid),
                        .sid = cstr(s->sid_str),
                        .ts = gw_now_ms(),
                        .ack_every = srv->cfg.ack_every,
                        .ack_delay_ms = srv->cfg.ack_delay_ms,
                        .max_body = (uint32_t)srv->cfg.max_body};
        rc = pr_enc_welcome_begin(&sb, rid, &w, n);
    } else {
        rc = pr_enc_groups_begin(&sb, rid, n);
    }
    rc = rc ? rc : enc_groups(s, &sb);
    if (rc == 0)
        gw_out_reply(s, &sb);
    else
        gw_sess_error(s, rid, PR_E_INTERNAL, "cannot encode the group list", NO_GID);
    msgpack_sbuffer_destroy(&sb);
}

static void reply_page(gw_sess *s, gw_req *r)
{
    gw_server *srv = s->srv;
    const st_page *pg = r->job.op.page;
    pr_slice gid = cstr(r->gid);
    size_t n = st_page_count(pg);
    /* A page may show a mid whose completion this thread has not run yet (or another
     * gateway's): keep the cap on acks in step with what clients can see. */
    gw_group_saw(srv->registry, r->gid, st_page_last_mid(pg));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = pr_enc_page_begin(&sb, r->rid, gid, st_page_last_mid(pg), st_page_more(pg), n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const st_msg *m = st_page_at(pg, i);
        rc = pr_enc_page_entry(&sb, m->mid, m->ts, (pr_slice){m->record, m->record_n});
    }
    if (rc == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (rc != 0)
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "cannot encode page", gid);
    srv->n.pages++;
    srv->n.page_msgs += n;
}

/* A page: at most `limit` messages and at most max_frame bytes, so that a page of large
 * bodies is cut short (with more: true) rather than oversized. */
static void read_page(gw_sess *s, uint64_t rid, pr_slice gid, enum st_dir dir, uint64_t from,
                      uint32_t limit)
{
    gw_server *srv = s->srv;
    if (limit > srv->cfg.page_max)
        limit = srv->cfg.page_max;
    /* Each entry costs its record plus a map header and "mid", "ts" with 9-byte integers
     * (32 bytes at most); the page's own fields fit in 256. So records get what is left. */
    size_t budget = srv->cfg.max_frame - 256 - gid.n, per_entry = 32 * (size_t)limit;
    gw_req *r = req_new(s, rid, ST_OP_READ_PAGE);
    if (!r) {
        gw_sess_error(s, rid, PR_E_INTERNAL, "out of memory", gid);
        return;
    }
    slice_cpy(r->gid, gid);
    st_op *op = &r->job.op;
    op->gid = st_id_str(r->gid);
    op->dir = dir;
    op->from = from;
    op->limit = limit;
    op->max_bytes = budget > 2 * per_entry ? budget - per_entry : budget / 2;
    submit(r);
}

/* ---- requests --------------------------------------------------------------------------- */

/* The hello's user is signed in (rc 0), or could not be loaded. */
static void attached(gw_sess *s, int rc)
{
    gw_server *srv = s->srv;
    if (rc != 0) {
        gw_err("session %s: cannot load the groups of user %s: %s", s->sid_str, s->id.uid,
               st_strerror(rc));
        /* The client may come back: the store is away, not the client's fault. 4013, not
         * WebSocket's 1013 (try again later): libwebsockets 4.1's clients take 1013 for a
         * protocol error. */
        gw_sess_error_free(s, s->hello_rid, gw_route_err_code(rc), gw_route_err_msg(rc), NO_GID);
        srv->n.closes_4013++;
        gw_sess_close(s, 4013, "try again later: the user's groups cannot be read now");
    } else {
        srv->n.sessions_total++;
        gw_dbg("session %s signed in as %s", s->sid_str, s->id.uid);
        send_groups(s, s->hello_rid, true);
    }
    gw_reqs_done(s, NULL, false);
}

static void on_hello(gw_sess *s, const pr_req *r)
{
    gw_server *srv = s->srv;
    if (s->user || s->loading) {
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
    /* Until the user's groups are here, the requests after the hello wait. */
    s->hello_rid = r->rid;
    gw_reqs_began(s, NULL, false);
    gw_registry_attach(srv->registry, s, s->id.uid, attached);
}

/* The membership a group request needs, or an error reply and NULL. */
static gw_member *need_member(gw_sess *s, const pr_req *r, pr_slice gid)
{
    gw_member *m = gw_member_find(s->user, gid);
    if (!m)
        gw_sess_error(s, r->rid, PR_E_NOT_MEMBER, "not a member of this group", gid);
    return m;
}

/* A join or leave of r->gid. */
static gw_req *membership_req(gw_sess *s, const pr_req *r, enum st_op_kind kind)
{
    gw_req *q = req_new(s, r->rid, kind);
    if (!q) {
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return NULL;
    }
    slice_cpy(q->gid, r->gid);
    q->job.op.gid = st_id_str(q->gid);
    q->job.op.uid = st_id_str(q->uid);
    return q;
}

static void on_join(gw_sess *s, const pr_req *r)
{
    if (!gw_identity_allows(&s->id, r->gid)) {
        gw_sess_error(s, r->rid, PR_E_UNAUTHORIZED, "your token does not allow this group", r->gid);
        return;
    }
    gw_user *u = s->user;
    bool member = gw_member_find(u, r->gid) != NULL;
    /* Managed groups: the application makes members (its API, or the groups its token
     * names, which it chose); joining anything else is not the client's to do. */
    bool claimed = s->id.groups != NULL;
    if (s->srv->cfg.managed_groups && !member && !claimed) {
        gw_sess_error(s, r->rid, PR_E_UNAUTHORIZED,
                      "this gateway's groups are managed by the application: it adds members",
                      r->gid);
        return;
    }
    /* Joins of this user's other sessions still in flight count too. */
    if (!member && HASH_COUNT(u->groups) + u->joins_inflight >= s->srv->cfg.max_groups) {
        gw_sess_error(s, r->rid, PR_E_TOO_LARGE, "member of too many groups: leave one first",
                      r->gid);
        return;
    }
    gw_req *q = membership_req(s, r, ST_OP_JOIN);
    if (!q)
        return;
    q->job.op.create = s->srv->cfg.managed_groups && claimed; /* the token made it */
    q->counted = !member;
    if (q->counted)
        u->joins_inflight++; /* undone in complete_join, or here if refused */
    if (submit(q) < 0 && !member)
        u->joins_inflight--;
}

static void on_leave(gw_sess *s, const pr_req *r)
{
    if (!need_member(s, r, r->gid))
        return;
    gw_req *q = membership_req(s, r, ST_OP_LEAVE);
    if (q)
        submit(q);
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
            gw_out_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    gw_req *q = req_new(s, r->rid, ST_OP_APPEND);
    if (!q || pr_enc_record(&q->record, cstr(s->user->uid), r->body) != 0) {
        if (q)
            req_free(q);
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    slice_cpy(q->gid, r->gid);
    slice_cpy(q->cid, r->cid);
    st_op *op = &q->job.op;
    op->gid = st_id_str(q->gid);
    op->uid = st_id_str(q->uid);
    op->cid = st_id_str(q->cid);
    op->record = q->record.data;
    op->record_n = q->record.size;
    submit(q);
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
        gw_group *g = gw_group_find(srv->registry, m->gid, strlen(m->gid));
        uint64_t cap = g ? g->last_mid : m->ack;
        uint64_t mid = a->mid < cap ? a->mid : cap;
        if (mid > m->ack) {
            m->ack = mid;
            gw_acks_add(srv->acks, m->gid, s->user->uid, mid);
            if (srv->hub)
                gw_hub_tell_ack(srv->hub, srv->thread, m->gid, s->user->uid, mid);
            gw_unread_acked(srv->unread, m->gid, s->user->uid, mid, cap);
        }
    }
}

static void on_ping(gw_sess *s, const pr_req *r)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_pong(&sb, r->rid, gw_now_ms()) == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

void gw_route_start(gw_sess *s, const pr_req *r)
{
    gw_server *srv = s->srv;
    /* Stopping: acks are still taken (they are what saves clients re-deliveries after the
     * restart) and pings answered; everything else is refused, not half done. */
    if (srv->stopping && r->t != PR_REQ_ACK && r->t != PR_REQ_PING) {
        gw_sess_error(s, r->rid, PR_E_OVERLOADED, "server is shutting down", NO_GID);
        return;
    }
    switch (r->t) {
    case PR_REQ_HELLO: on_hello(s, r); break;
    case PR_REQ_JOIN: on_join(s, r); break;
    case PR_REQ_LEAVE: on_leave(s, r); break;
    case PR_REQ_GROUPS: send_groups(s, r->rid, false); break;
    case PR_REQ_SEND: on_send(s, r); break;
    case PR_REQ_ACK: on_ack(s, r); break;
    case PR_REQ_ENTER: {
        gw_member *m = need_member(s, r, r->gid);
        if (m)
            read_page(s, r->rid, r->gid, ST_AFTER, m->ack, r->limit);
        break;
    }
    case PR_REQ_PULL:
        if (need_member(s, r, r->gid))
            read_page(s, r->rid, r->gid, r->has_before ? ST_BEFORE : ST_AFTER,
                      r->has_before ? r->before : r->after, r->limit);
        break;
    case PR_REQ_PING: on_ping(s, r); break;
    }
}

/* ---- completions -------------------------------------------------------------------------- */

static void complete_append(gw_server *srv, gw_req *r, gw_sess *s)
{
    const st_op *op = &r->job.op;
    if (op->result != 0) {
        if (s)
            gw_sess_error(s, r->rid, gw_route_err_code(op->result), gw_route_err_msg(op->result),
                          cstr(r->gid));
        return;
    }
    if (op->duplicate)
        srv->n.sends_dup++;
    else
        srv->n.sends++;
    /* Persisted: confirm to the sender first, then push to everyone else. */
    if (s) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (pr_enc_sent(&sb, r->rid, cstr(r->gid), cstr(r->cid), op->mid, op->ts) == 0)
            gw_out_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
    }
    if (!op->duplicate) {
        gw_fanout(srv->registry, r->gid, op->mid, op->ts, r->record.data, r->record.size, s);
        gw_unread_stored(srv->unread, r->gid, op->mid);
    }
}

static void complete_join(gw_server *srv, gw_req *r, gw_sess *s)
{
    const st_op *op = &r->job.op;
    gw_user *u = gw_user_find(srv->registry, r->uid);
    uint64_t ack = op->ack;
    /* A user dropped and signed in again meanwhile starts from 0: never below it. */
    if (r->counted && u && u->joins_inflight)
        u->joins_inflight--;
    if (op->result == 0 && u) {
        gw_member *m = gw_member_add(srv->registry, u, r->gid, op->ack, op->last_mid);
        if (m)
            ack = m->ack;
    }
    if (!s)
        return;
    if (op->result != 0) {
        gw_sess_error(s, r->rid, gw_route_err_code(op->result), gw_route_err_msg(op->result),
                      cstr(r->gid));
        return;
    }
    gw_group *g = gw_group_find(srv->registry, r->gid, strlen(r->gid));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_joined(&sb, r->rid, cstr(r->gid), g ? g->last_mid : op->last_mid, ack) == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (op->created)
        gw_info("group %s created by %s", r->gid, r->uid);
}

static void complete_leave(gw_server *srv, gw_req *r, gw_sess *s)
{
    const st_op *op = &r->job.op;
    gw_user *u = gw_user_find(srv->registry, r->uid);
    if (op->result == 0 && u)
        gw_member_end(srv->registry, u, r->gid, s);
    if (!s)
        return;
    if (op->result != 0) {
        gw_sess_error(s, r->rid, gw_route_err_code(op->result), gw_route_err_msg(op->result),
                      cstr(r->gid));
        return;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_left(&sb, r->rid, cstr(r->gid)) == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static void complete(gw_job *j)
{
    gw_req *r = (gw_req *)j; /* the job is the request's first member */
    gw_server *srv = r->srv;
    gw_sess *s = r->sess;
    const st_op *op = &j->op;
    switch (op->kind) {
    case ST_OP_APPEND: complete_append(srv, r, s); break;
    case ST_OP_JOIN: complete_join(srv, r, s); break;
    case ST_OP_LEAVE: complete_leave(srv, r, s); break;
    case ST_OP_READ_PAGE:
        if (s && op->result == 0)
            reply_page(s, r);
        else if (s)
            gw_sess_error(s, r->rid, gw_route_err_code(op->result), gw_route_err_msg(op->result),
                          cstr(r->gid));
        break;
    default: break;
    }
    if (s)
        gw_reqs_done(s, r, op->kind == ST_OP_APPEND);
    req_free(r);
}
