/*
 * A session's requests: each one's checks, its reply from memory, or its store job (a
 * write, a page) and what its completion does: the reply, then the pushes. session/
 * decides when a request starts (gw_sess_in.c) and calls gw_route_request through the
 * hooks; this file decides what it does. A hello and the `groups` reply are
 * gw_signin.c's. The append op a `send` makes is built here, for the API's POST too.
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An id slice copied into dst (PR_MAX_ID + 1 bytes). */
static void slice_cpy(char *dst, pr_slice s)
{
    memcpy(dst, s.p, s.n);
    dst[s.n] = 0;
}

/* ---- the append op ---------------------------------------------------------------------- */

void gw_append_init(gw_append *m)
{
    memset(m, 0, sizeof(*m));
    msgpack_sbuffer_init(&m->record);
}

void gw_append_release(gw_append *m)
{
    msgpack_sbuffer_destroy(&m->record);
}

int gw_append_op(gw_append *m, st_op *op, pr_slice from, pr_slice cid, pr_body body,
                 bool any_sender)
{
    if (pr_enc_record(&m->record, from, body) != 0)
        return -1;
    slice_cpy(m->cid, cid);
    op->kind = ST_OP_APPEND;
    op->gid = st_id_str(m->gid);
    op->uid = st_id_str(m->uid);
    op->cid = st_id_str(m->cid);
    op->record = m->record.data;
    op->record_n = m->record.size;
    op->any_sender = any_sender; /* the API names any sender: a bot, the system */
    return 0;
}

void gw_append_stored(gw_app *a, const gw_append *m, const st_op *op, gw_sess *except)
{
    if (op->duplicate) {
        a->figs.sends_dup++;
        return;
    }
    a->figs.sends++;
    gw_fanout(a->d.deliver, m->gid, op->mid, op->ts, m->record.data, m->record.size, except);
    gw_unread_stored(a->unread, m->gid, op->mid);
}

/* ---- store jobs ----------------------------------------------------------------------- */

/* A request of a session with a store job under way. */
typedef struct gw_req {
    gw_job job; /* first: the completion finds the request from its job */
    gw_app *app;
    gw_sess_req link; /* link.sess: NULL once the session is gone, nothing to answer */
    uint64_t rid;
    bool counted;           /* JOIN: counted in its user's joins in flight */
    uint64_t ack, last_mid; /* JOIN: what `joined` says */
    uint64_t first_mid;     /* ... and its horizon */
    uint64_t last_cseq;     /* JOIN: ... and its last change */
    uint64_t after;         /* READ_CHANGES: as asked */
    gw_append m;            /* its gid and uid; a send's cid and record */
} gw_req;

static void complete(gw_job *j);

static gw_req *req_new(gw_app *a, gw_sess *s, uint64_t rid, enum st_op_kind kind, pr_slice gid)
{
    gw_req *r = calloc(1, sizeof(*r));
    if (!r) {
        gw_sess_error(s, rid, PR_E_INTERNAL, "out of memory", gid);
        return NULL;
    }
    r->app = a;
    r->link.sess = s;
    r->rid = rid;
    r->job.op.kind = kind;
    r->job.complete = complete;
    gw_append_init(&r->m);
    slice_cpy(r->m.gid, gid);
    strcpy(r->m.uid, gw_sess_uid(s));
    r->job.op.gid = st_id_str(r->m.gid);
    /* A write names its user; a page or changes its reader, for the reactions it set. */
    if (kind <= ST_OP_ACKS || kind == ST_OP_READ_PAGE || kind == ST_OP_READ_CHANGES)
        r->job.op.uid = st_id_str(r->m.uid);
    return r;
}

static void req_free(gw_req *r)
{
    gw_append_release(&r->m);
    gw_op_release(&r->job.op);
    free(r);
}

/* Hands r's op to the store as a request of its session (the ones after it wait, but
 * sends after a send). 0; or -1 when refused at once: it is answered and freed. */
static int submit(gw_req *r)
{
    gw_app *a = r->app;
    gw_sess *s = r->link.sess;
    const st_op *op = &r->job.op;
    bool send = op->kind == ST_OP_APPEND, write = op->kind <= ST_OP_ACKS;
    /* Client writes are refused past the overload mark: the store is that far behind. */
    int rc = write && st_pending(a->d.store) >= a->d.cfg->store_overload ? ST_ECLOSED : 0;
    if (rc == 0) {
        gw_reqs_began(s, &r->link, send);
        rc = gw_bridge_submit(a->d.bridge, &r->job); /* may complete at once (reads) */
        if (rc >= 0) {
            if (rc == 0 && write && st_pending(a->d.store) >= a->d.cfg->store_high)
                gw_reqs_store_busy(s);
            return 0;
        }
        gw_reqs_done(s, &r->link, send);
    }
    bool overload = rc == ST_ECLOSED && !a->stopping;
    gw_sess_error(s, r->rid, overload ? PR_E_OVERLOADED : gw_route_err_code(rc),
                  overload ? "server overloaded: retry later" : gw_route_err_msg(rc),
                  r->m.gid[0] ? gw_cstr(r->m.gid) : NO_GID);
    req_free(r);
    return -1;
}

/* ---- the requests ----------------------------------------------------------------------- */

int gw_route_not_member(gw_sess *s, const char **msg)
{
    app_sess *as = gw_sess_ext(s);
    if (!gw_registry_partial(&as->seat))
        return PR_E_NOT_MEMBER;
    *msg = "the groups of a database that is away are not read yet: try again";
    return PR_E_UNAVAILABLE;
}

/* Is the session's user a member of gid? An error reply (and false) if not. */
static bool need_member(gw_sess *s, const pr_req *r, pr_slice gid, uint64_t *ack)
{
    app_sess *as = gw_sess_ext(s);
    if (gw_registry_member(&as->seat, gid, ack))
        return true;
    const char *msg = "not a member of this group";
    gw_sess_error(s, r->rid, gw_route_not_member(s, &msg), msg, gid);
    return false;
}

static void on_join(gw_app *a, gw_sess *s, const pr_req *r)
{
    const gw_identity *id = gw_sess_identity(s);
    if (!gw_identity_allows(id, r->gid)) {
        gw_sess_error(s, r->rid, PR_E_UNAUTHORIZED, "your token does not allow this group", r->gid);
        return;
    }
    app_sess *as = gw_sess_ext(s);
    bool member = gw_registry_member(&as->seat, r->gid, NULL);
    /* Managed groups: the application makes members (its API, or the groups its token
     * names, which it chose); joining anything else is not the client's to do. */
    bool claimed = id->groups != NULL;
    if (a->d.cfg->managed_groups && !member && !claimed) {
        gw_sess_error(s, r->rid, PR_E_UNAUTHORIZED,
                      "this gateway's groups are managed by the application: it adds members",
                      r->gid);
        return;
    }
    /* Joins of this user's other sessions still in flight count too. */
    if (!member && gw_registry_joins(&as->seat) >= a->d.cfg->max_groups) {
        gw_sess_error(s, r->rid, PR_E_TOO_LARGE, "member of too many groups: leave one first",
                      r->gid);
        return;
    }
    gw_req *q = req_new(a, s, r->rid, ST_OP_JOIN, r->gid);
    if (!q)
        return;
    q->job.op.create = a->d.cfg->managed_groups && claimed; /* the token made it */
    q->counted = !member;
    if (q->counted)
        gw_registry_join_began(&as->seat); /* undone in gw_registry_joined */
    if (submit(q) < 0 && !member)
        gw_registry_join_refused(&as->seat);
}

static void on_leave(gw_app *a, gw_sess *s, const pr_req *r)
{
    if (!need_member(s, r, r->gid, NULL))
        return;
    gw_req *q = req_new(a, s, r->rid, ST_OP_LEAVE, r->gid);
    if (q)
        submit(q);
}

static void on_send(gw_app *a, gw_sess *s, const pr_req *r)
{
    if (!need_member(s, r, r->gid, NULL))
        return;
    const char *why = NULL;
    uint64_t retry_ms = gw_throttle_send(s, &why);
    if (retry_ms) { /* not charged to the error budget: see session/gw_sess_rate.c */
        gw_sess_error_retry(s, r->rid, PR_E_RATE_LIMITED, why, r->gid, retry_ms);
        return;
    }
    gw_req *q = req_new(a, s, r->rid, ST_OP_APPEND, r->gid);
    if (!q)
        return;
    if (gw_append_op(&q->m, &q->job.op, gw_cstr(q->m.uid), r->cid, r->body, false) != 0) {
        req_free(q);
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    submit(q);
}

/* ack (the device has the messages) and read (the person has seen them): two cursors,
 * each cumulative, coalesced and persisted the same way. */
static void on_cursors(gw_app *a, gw_sess *s, const pr_req *r, bool read)
{
    app_sess *as = gw_sess_ext(s);
    if (read)
        a->figs.read_frames++;
    else
        a->figs.ack_frames++;
    bool charged = false;
    for (size_t i = 0; i < r->n_acks; i++) {
        const pr_ack *k = &r->acks[i];
        if (read)
            a->figs.reads_received++;
        else
            a->figs.acks_received++;
        const char *gid;
        uint64_t cap;
        int moved = (read ? gw_registry_read : gw_registry_ack)(a->d.registry, &as->seat, k->gid,
                                                                k->mid, &gid, &cap);
        if (moved < 0) {
            /* One bad frame costs the error budget once, however many groups it names. */
            const char *msg =
                read ? "read for a group you are not in" : "ack for a group you are not in";
            int code = gw_route_not_member(s, &msg);
            (charged ? gw_sess_error_free : gw_sess_error)(s, r->rid, code, msg, k->gid);
            charged = true;
            continue;
        }
        if (moved) {
            uint64_t mid = k->mid < cap ? k->mid : cap;
            if (a->d.hub)
                (read ? gw_hub_tell_read : gw_hub_tell_ack)(a->d.hub, a->d.thread, gid,
                                                            gw_sess_uid(s), mid);
            /* The webhook's cursor is the read once there is one (gw_unread.c). */
            if (read || !gw_registry_has_read(&as->seat, k->gid))
                gw_unread_acked(a->unread, gid, gw_sess_uid(s), mid, cap);
        }
    }
}

/* A page: at most `limit` messages and at most max_frame bytes, so that a page of large
 * bodies is cut short (with more: true) rather than oversized. */
static void read_page(gw_app *a, gw_sess *s, uint64_t rid, pr_slice gid, enum st_dir dir,
                      uint64_t from, uint32_t limit)
{
    const gw_config *cfg = a->d.cfg;
    if (limit > cfg->page_max)
        limit = cfg->page_max;
    /* Each entry costs its record plus a map header and "mid", "ts" with 9-byte integers
     * (32 bytes at most); the page's own fields fit in 256. So records get what is left. */
    size_t budget = cfg->max_frame - 256 - gid.n, per_entry = 32 * (size_t)limit;
    gw_req *r = req_new(a, s, rid, ST_OP_READ_PAGE, gid);
    if (!r)
        return;
    st_op *op = &r->job.op;
    op->dir = dir;
    op->from = from;
    op->limit = limit;
    op->max_bytes = budget > 2 * per_entry ? budget - per_entry : budget / 2;
    submit(r);
}

/* The changes after a cseq: bounded like a page (limit, and the frame: gw_enc_entries). */
static void read_changes(gw_app *a, gw_sess *s, const pr_req *q)
{
    const gw_config *cfg = a->d.cfg;
    uint32_t limit = q->limit > cfg->page_max ? cfg->page_max : q->limit;
    gw_req *r = req_new(a, s, q->rid, ST_OP_READ_CHANGES, q->gid);
    if (!r)
        return;
    st_op *op = &r->job.op;
    op->from = q->after;
    r->after = q->after;
    op->limit = limit;
    size_t budget = cfg->max_frame - 256 - q->gid.n, per_entry = 64 * (size_t)limit;
    op->max_bytes = budget > 2 * per_entry ? budget - per_entry : budget / 2;
    submit(r);
}

static void on_ping(gw_sess *s, const pr_req *r)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_pong(&sb, r->rid, gw_now_ms()) == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

/* gw_sess_hooks.request: one decoded request of s, answered at once or handed to the
 * store. */
static void route_request(void *ud, gw_sess *s, const pr_req *r)
{
    gw_app *a = ud;
    uint64_t ack;
    /* Stopping: acks and reads are still taken (they are what saves clients re-deliveries
     * after the restart) and pings answered; everything else is refused, not half done. */
    if (a->stopping && r->t != PR_REQ_ACK && r->t != PR_REQ_READ && r->t != PR_REQ_PING) {
        gw_sess_error(s, r->rid, PR_E_OVERLOADED, "server is shutting down", NO_GID);
        return;
    }
    switch (r->t) {
    case PR_REQ_HELLO: gw_signin_hello(a, s, r); break;
    case PR_REQ_JOIN: on_join(a, s, r); break;
    case PR_REQ_LEAVE: on_leave(a, s, r); break;
    case PR_REQ_GROUPS: gw_signin_groups(a, s, r->rid); break;
    case PR_REQ_SEND: on_send(a, s, r); break;
    case PR_REQ_ACK: on_cursors(a, s, r, false); break;
    case PR_REQ_READ: on_cursors(a, s, r, true); break;
    case PR_REQ_ENTER:
        if (need_member(s, r, r->gid, &ack))
            read_page(a, s, r->rid, r->gid, ST_AFTER, ack, r->limit);
        break;
    case PR_REQ_PULL:
        if (need_member(s, r, r->gid, NULL))
            read_page(a, s, r->rid, r->gid, r->has_before ? ST_BEFORE : ST_AFTER,
                      r->has_before ? r->before : r->after, r->limit);
        break;
    case PR_REQ_PING: on_ping(s, r); break;
    case PR_REQ_RECEIPTS:
    case PR_REQ_WATCH:
    case PR_REQ_PRESENCE: gw_peers_request(a, s, r); break;
    case PR_REQ_TYPING: gw_typing_request(a, s, r); break;
    case PR_REQ_EDIT:
    case PR_REQ_RECALL: gw_edit_request(a, s, r); break;
    case PR_REQ_CHANGES:
        if (need_member(s, r, r->gid, NULL))
            read_changes(a, s, r);
        break;
    case PR_REQ_REACT: gw_react_request(a, s, r); break;
    }
}

/* gw_sess_hooks.closing: the session's seat leaves the registry. */
static void route_closing(void *ud, gw_sess *s)
{
    gw_app *a = ud;
    app_sess *as = gw_sess_ext(s);
    gw_watch_closing(a, s);
    gw_registry_detach(a->d.registry, &as->seat);
}

gw_sess_hooks gw_app_sess_hooks(gw_app *a)
{
    return (gw_sess_hooks){
        .ud = a, .request = route_request, .closing = route_closing, .ext_size = sizeof(app_sess)};
}

/* ---- completions -------------------------------------------------------------------------- */

/* A store job's effects on this thread, whether or not its session is still there: the
 * message pushed (after the sender's `sent`: confirmed first, then pushed to everyone
 * else), the membership made or ended, a page's last mid seen (before the reply). */
static void stored(gw_app *a, gw_req *r)
{
    if (r->job.op.result == 0) /* pushed to every online session but the sender's */
        gw_append_stored(a, &r->m, &r->job.op, r->link.sess);
}

static void joined(gw_app *a, gw_req *r)
{
    const st_op *op = &r->job.op;
    r->ack = op->ack;
    r->last_mid = op->last_mid;
    r->last_cseq = op->last_cseq;
    /* Also when refused: the join is in flight no more. */
    gw_registry_joined(a->d.registry, r->m.uid, r->m.gid, r->counted, op->result, &r->ack,
                       &r->last_mid);
    r->first_mid = gw_registry_horizon(a->d.registry, r->m.gid, op->first_mid);
    r->last_cseq = gw_registry_cseq(a->d.registry, r->m.gid, op->last_cseq);
    if (op->result == 0 && op->created && r->link.sess)
        gw_info("group %s created by %s", r->m.gid, r->m.uid);
}

static void left(gw_app *a, gw_req *r)
{
    if (r->job.op.result == 0) /* the user's other sessions are told */
        gw_registry_left(a->d.registry, r->m.uid, r->m.gid, r->link.sess);
}

static void page_seen(gw_app *a, gw_req *r)
{
    const st_op *op = &r->job.op;
    /* A page may show a mid whose completion this thread has not run yet (or another
     * gateway's): keep the cap on acks in step with what clients can see (a page nobody
     * waits for any more shows nobody anything). */
    if (op->result == 0 && r->link.sess) {
        gw_deliver_saw(a->d.deliver, r->m.gid, st_page_last_mid(op->page));
        gw_registry_horizon(a->d.registry, r->m.gid, st_page_first_mid(op->page));
        gw_registry_cseq(a->d.registry, r->m.gid, st_page_last_cseq(op->page));
    }
}

/* The reply of a job that worked, encoded into sb: 0, or a PR_E* code. */
static int reply_sent(gw_app *a, gw_req *r, msgpack_sbuffer *sb)
{
    const st_op *op = &r->job.op;
    return pr_enc_sent(sb, r->rid, gw_cstr(r->m.gid), gw_cstr(r->m.cid), op->mid, op->ts);
}

static int reply_joined(gw_app *a, gw_req *r, msgpack_sbuffer *sb)
{
    return pr_enc_joined_c(sb, r->rid, gw_cstr(r->m.gid), r->first_mid, r->last_mid, r->ack,
                           r->last_cseq);
}

static int reply_left(gw_app *a, gw_req *r, msgpack_sbuffer *sb)
{
    return pr_enc_left(sb, r->rid, gw_cstr(r->m.gid));
}

int gw_enc_entry(msgpack_sbuffer *sb, const st_msg *m)
{
    pr_reaction few[PR_REACT_KEYS_MAX] = {0}, *r = few;
    if (m->n_reactions > PR_REACT_KEYS_MAX && !(r = malloc(m->n_reactions * sizeof(*r))))
        return PR_E_NOMEM;
    for (size_t i = 0; i < m->n_reactions; i++)
        r[i] = (pr_reaction){{(const uint8_t *)m->reactions[i].key.p, m->reactions[i].key.n},
                             m->reactions[i].count,
                             m->reactions[i].mine};
    pr_version v = {.ver = m->ver, .ts = m->ver_ts, .recalled = m->recalled, .cseq = m->cseq};
    int rc = pr_enc_page_entry_r(sb, m->mid, m->ts, &v, (pr_slice){m->record, m->record_n}, r,
                                 m->n_reactions);
    if (r != few)
        free(r);
    return rc;
}

/* A page's (or changes') entries encoded into ents, within `budget` bytes: the store bounds
 * records, but reactions come on top, so entries past the budget are left out, from the
 * end (keep_last: from the start, a page before a mid keeping the ones nearest it).
 * *first and *n: the entries kept; *cut: some were left out. 0 or PR_E*. */
static int enc_entries(const st_page *pg, size_t budget, bool keep_last, msgpack_sbuffer *ents,
                       size_t *first, size_t *n, size_t *start, bool *cut)
{
    size_t count = st_page_count(pg);
    size_t *off = malloc((count + 1) * sizeof(*off));
    if (!off)
        return PR_E_NOMEM;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        off[i] = ents->size;
        rc = gw_enc_entry(ents, st_page_at(pg, i));
    }
    off[count] = ents->size;
    size_t lo = 0, hi = count; /* kept: [lo, hi) */
    while (rc == 0 && hi - lo > 1 && off[hi] - off[lo] > budget) {
        if (keep_last)
            lo++;
        else
            hi--;
    }
    *first = lo;
    *n = hi - lo;
    *start = off[lo];
    *cut = hi - lo < count;
    ents->size = off[hi]; /* what follows hi is dropped; *start says where the kept begin */
    free(off);
    return rc;
}

static int reply_page(gw_app *a, gw_req *r, msgpack_sbuffer *sb)
{
    const st_op *op = &r->job.op;
    const st_page *pg = op->page;
    msgpack_sbuffer ents;
    msgpack_sbuffer_init(&ents);
    size_t first, n, start;
    bool cut;
    size_t budget = a->d.cfg->max_frame - 256 - strlen(r->m.gid);
    int rc = enc_entries(pg, budget, op->dir == ST_BEFORE, &ents, &first, &n, &start, &cut);
    if (rc == 0)
        rc = pr_enc_page_begin_c(sb, r->rid, gw_cstr(r->m.gid), st_page_first_mid(pg),
                                 st_page_last_mid(pg), st_page_gone_before(pg),
                                 st_page_more(pg) || cut, st_page_last_cseq(pg), n);
    if (rc == 0 && n && msgpack_sbuffer_write(sb, ents.data + start, ents.size - start) != 0)
        rc = PR_E_NOMEM;
    msgpack_sbuffer_destroy(&ents);
    a->figs.pages++;
    a->figs.page_msgs += n;
    return rc;
}

static int reply_changes(gw_app *a, gw_req *r, msgpack_sbuffer *sb)
{
    const st_page *pg = r->job.op.page;
    msgpack_sbuffer ents;
    msgpack_sbuffer_init(&ents);
    size_t first, n, start;
    bool cut;
    size_t budget = a->d.cfg->max_frame - 256 - strlen(r->m.gid);
    int rc = enc_entries(pg, budget, false, &ents, &first, &n, &start, &cut);
    pr_changes c = {.gid = gw_cstr(r->m.gid),
                    .after = r->after,
                    .upto = st_page_upto(pg),
                    .last_cseq = st_page_last_cseq(pg),
                    .first_mid = st_page_first_mid(pg),
                    .last_mid = st_page_last_mid(pg),
                    .gone_before = st_page_changes_gone(pg),
                    .more = st_page_more(pg)};
    if (cut) { /* entries are in cseq order: go on after the last one sent */
        c.upto = st_page_at(pg, first + n - 1)->cseq;
        c.more = true;
    }
    if (rc == 0)
        rc = pr_enc_changes_begin(sb, r->rid, &c, n);
    if (rc == 0 && n && msgpack_sbuffer_write(sb, ents.data + start, ents.size - start) != 0)
        rc = PR_E_NOMEM;
    msgpack_sbuffer_destroy(&ents);
    a->figs.changes_pages++;
    return rc;
}

/* What each kind of job does when it completes: an effect before its session's reply, the
 * reply, an effect after it (NULL: none). */
static const struct {
    void (*before)(gw_app *a, gw_req *r);
    int (*reply)(gw_app *a, gw_req *r, msgpack_sbuffer *sb);
    void (*after)(gw_app *a, gw_req *r);
} kinds[] = {
    [ST_OP_APPEND] = {NULL, reply_sent, stored},
    [ST_OP_JOIN] = {joined, reply_joined, NULL},
    [ST_OP_LEAVE] = {left, reply_left, NULL},
    [ST_OP_READ_PAGE] = {page_seen, reply_page, NULL},
    [ST_OP_READ_CHANGES] = {page_seen, reply_changes, NULL},
};

/* The one completion of a session's store jobs: the job's effects here, and between them,
 * for a session still there, the reply or the store's error; then its next requests may
 * go. */
static void complete(gw_job *j)
{
    gw_req *r = (gw_req *)j; /* the job is the request's first member */
    gw_app *a = r->app;
    gw_sess *s = r->link.sess;
    const st_op *op = &j->op;
    if (kinds[op->kind].before)
        kinds[op->kind].before(a, r);
    if (s && op->result != 0) {
        gw_sess_error(s, r->rid, gw_route_err_code(op->result), gw_route_err_msg(op->result),
                      gw_cstr(r->m.gid));
    } else if (s) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (kinds[op->kind].reply(a, r, &sb) == 0)
            gw_out_reply(s, &sb);
        else
            gw_sess_error(s, r->rid, PR_E_INTERNAL, "cannot encode the reply", gw_cstr(r->m.gid));
        msgpack_sbuffer_destroy(&sb);
    }
    if (kinds[op->kind].after)
        kinds[op->kind].after(a, r);
    if (s)
        gw_reqs_done(s, &r->link, op->kind == ST_OP_APPEND);
    req_free(r);
}
