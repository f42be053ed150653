/*
 * What members see of each other (app_internal.h; docs/PROTOCOL.md, Receipts and
 * presence): the requests answered from a group's roster (cluster/gw_roster.c), the
 * members with their two cursors.
 *
 *   - `receipts {gid, mid}`: "delivered to 9, read by 7 of 12", two counts of cursors at
 *     or past mid, O(log n) each, never a row per message; for a group of at most
 *     --receipt-list-max members also who read it.
 *   - `watch {gid, mids}`: what the session has on screen (gw_watch.c pushes).
 *   - `presence {gid, sub?}`: how many of the members are online (anywhere in the cluster:
 *     cluster/gw_presence.c); for a group of at most --presence-list-max members each one,
 *     online or when last seen (a read of the store's last_seen); `sub` starts or stops
 *     the pushes of changes (gw_watch.c).
 * The API's GET .../messages/{mid}/receipts and GET .../presence are the same answers in
 * JSON (docs/API.md).
 * A roster not in memory yet is read first, a page of members at a time, by this request:
 * the session's later requests wait behind it, as behind any store request. If another
 * thread is reading it, the request looks again a little later.
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_S 0.02    /* another thread reads the roster: look again after this */
#define WAITS_MAX 1000 /* ... this many times at most (20 s) */
#define MEMBERS_PAGE 1000

/* A request that needs a roster: receipts, watch, presence. */
typedef struct peer_req {
    gw_job job; /* first: its store reads (the roster's pages, last_seen) come back on it */
    gw_app *app;
    gw_sess_req link;  /* link.sess: NULL once the session is gone */
    gw_api_conn *conn; /* an API request's instead (NULL once it is gone) */
    bool api;
    pr_req r; /* the request (its gid points into gid) */
    char gid[PR_MAX_ID + 1];
    char after[ST_MAX_ID + 1]; /* the roster's read: the next page after this uid */
    ev_timer wait;
    unsigned waits;
    /* presence: the members, and their last_seen being read */
    st_seen *seen;
    char (*uids)[PR_MAX_ID + 1];
    bool *online;
    size_t n, cap;
} peer_req;

static gw_roster *roster(gw_app *a)
{
    return gw_hub_roster(a->d.hub);
}

/* ---- presence ----------------------------------------------------------------------------- */

static void add_member(void *ud, const char *uid)
{
    peer_req *q = ud;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 32;
        void *u = realloc(q->uids, cap * sizeof(*q->uids));
        if (u)
            q->uids = u;
        void *o = u ? realloc(q->online, cap * sizeof(*q->online)) : NULL;
        if (o)
            q->online = o;
        if (!u || !o)
            return; /* out of memory: the list is short of some (the count is not) */
        q->cap = cap;
    }
    snprintf(q->uids[q->n], sizeof(q->uids[0]), "%s", uid);
    q->online[q->n++] = false;
}

static void finish(peer_req *q);
static void fail(peer_req *q, int st_rc);

/* The API's presence answer. */
static void presence_json(peer_req *q, uint64_t online, uint64_t now)
{
    json_t *o = json_pack("{s:s, s:I, s:I}", "gid", q->gid, "online", (json_int_t)online, "of",
                          (json_int_t)q->n);
    if (o && q->seen) {
        json_t *arr = json_array();
        for (size_t i = 0; i < q->n; i++)
            json_array_append_new(arr, json_pack("{s:s, s:b, s:I}", "uid", q->uids[i], "online",
                                                 q->online[i], "last_seen",
                                                 (json_int_t)(q->online[i] ? now : q->seen[i].ms)));
        json_object_set_new(o, "members", arr);
    }
    gw_api_answer(q->conn, 200, o);
}

/* The presence reply: counts, and each member of a small group with its last_seen. */
static void presence_reply(peer_req *q)
{
    gw_app *a = q->app;
    gw_sess *s = q->link.sess;
    if (q->api) {
        uint64_t online = 0;
        for (size_t i = 0; i < q->n; i++)
            online += q->online[i];
        if (q->conn) {
            presence_json(q, online, gw_now_ms());
            a->figs.presence_queries++;
        }
        finish(q);
        return;
    }
    gw_presence *pr = gw_hub_presence(a->d.hub);
    uint64_t online = 0, now = gw_now_ms();
    for (size_t i = 0; i < q->n; i++)
        online += q->online[i];
    bool list = q->seen != NULL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc =
        pr_enc_presence_begin(&sb, q->r.rid, gw_cstr(q->gid), online, q->n, list ? q->n : SIZE_MAX);
    for (size_t i = 0; list && rc == 0 && i < q->n; i++) {
        pr_presence p = {gw_cstr(q->uids[i]), q->online[i], q->online[i] ? now : q->seen[i].ms};
        rc = pr_enc_presence_entry(&sb, &p);
    }
    (void)pr;
    if (rc == 0 && s) {
        gw_out_reply(s, &sb);
        a->figs.presence_queries++;
    } else if (s) {
        gw_sess_error_free(s, q->r.rid, PR_E_INTERNAL, "cannot encode the presence", q->r.gid);
    }
    msgpack_sbuffer_destroy(&sb);
    if (rc == 0 && s && q->r.has_sub)
        gw_watch_presence(a, s, q->gid, q->r.sub);
    finish(q);
}

static void seen_read(gw_job *j)
{
    peer_req *q = (peer_req *)j;
    if (j->op.result != 0) {
        fail(q, j->op.result);
        return;
    }
    presence_reply(q);
}

static void presence_answer(peer_req *q)
{
    gw_app *a = q->app;
    size_t n = 0;
    if (!gw_roster_members(roster(a), q->gid, add_member, q, &n)) {
        fail(q, ST_EIO);
        return;
    }
    gw_presence *pr = gw_hub_presence(a->d.hub);
    size_t offline = 0;
    for (size_t i = 0; i < q->n; i++)
        offline += !(q->online[i] = gw_presence_online(pr, q->uids[i]));
    if (q->n > a->d.cfg->presence_list_max || offline == 0) {
        if (offline == 0 && q->n <= a->d.cfg->presence_list_max)
            q->seen = calloc(q->n ? q->n : 1, sizeof(*q->seen)); /* all online: none read */
        presence_reply(q);
        return;
    }
    /* A small group: when each member was last seen, from the store. */
    if (!(q->seen = calloc(q->n, sizeof(*q->seen)))) {
        fail(q, ST_ENOMEM);
        return;
    }
    for (size_t i = 0; i < q->n; i++)
        q->seen[i].uid = st_id_str(q->uids[i]);
    st_op *op = &q->job.op;
    memset(op, 0, sizeof(*op));
    op->kind = ST_OP_READ_SEEN;
    op->seen = q->seen;
    op->n_seen = q->n;
    q->job.complete = seen_read;
    int rc = gw_bridge_submit(a->d.bridge, &q->job);
    if (rc < 0) {
        op->result = rc;
        seen_read(&q->job);
    }
}

/* ---- requests that need a roster ------------------------------------------------------------ */

static void proceed(peer_req *q);

static void finish(peer_req *q)
{
    ev_timer_stop(q->app->d.loop, &q->wait);
    if (q->link.sess)
        gw_reqs_done(q->link.sess, &q->link, false);
    if (q->conn)
        q->conn->job = NULL;
    free(q->seen);
    free(q->uids);
    free(q->online);
    free(q);
}

static void fail(peer_req *q, int st_rc)
{
    if (q->conn)
        gw_api_fail_store(q->conn, st_rc, "cannot read the group's members");
    if (q->link.sess)
        gw_sess_error_free(q->link.sess, q->r.rid, gw_route_err_code(st_rc),
                           gw_route_err_msg(st_rc), q->r.gid);
    finish(q);
}

typedef struct reader_list {
    json_t *arr;
} reader_list;

static void json_reader(void *ud, const char *uid)
{
    json_array_append_new(((reader_list *)ud)->arr, json_string(uid));
}

/* The API's receipts answer. */
static void receipts_json(peer_req *q)
{
    gw_app *a = q->app;
    gw_receipt rc;
    reader_list rl = {json_array()};
    if (!gw_roster_receipt(roster(a), q->gid, q->r.mid, &rc, a->d.cfg->receipt_list_max,
                           json_reader, &rl)) {
        json_decref(rl.arr);
        fail(q, ST_EIO);
        return;
    }
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I}", "gid", q->gid, "mid", (json_int_t)q->r.mid,
                          "delivered", (json_int_t)rc.delivered, "read", (json_int_t)rc.read, "of",
                          (json_int_t)rc.of);
    if (o && rc.listed)
        json_object_set(o, "readers", rl.arr);
    json_decref(rl.arr);
    gw_api_answer(q->conn, 200, o);
    a->figs.receipt_queries++;
    finish(q);
}

/* The roster is ready: the answer. */
static void answer(peer_req *q)
{
    gw_app *a = q->app;
    gw_sess *s = q->link.sess;
    if (q->api && q->conn) {
        if (q->r.t == PR_REQ_PRESENCE)
            presence_answer(q);
        else
            receipts_json(q);
        return;
    }
    if (!s) {
        finish(q);
        return;
    }
    if (q->r.t == PR_REQ_WATCH) {
        gw_watch_set(a, s, &q->r, q->gid);
        finish(q);
        return;
    }
    if (q->r.t == PR_REQ_PRESENCE) {
        presence_answer(q);
        return;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = gw_peers_enc_receipt(a, q->gid, q->r.mid, q->r.rid, &sb);
    if (rc == -1) { /* read again meanwhile (a resync): once more */
        msgpack_sbuffer_destroy(&sb);
        proceed(q);
        return;
    }
    if (rc == 0) {
        gw_out_reply(s, &sb);
        a->figs.receipt_queries++;
    } else {
        gw_sess_error_free(s, q->r.rid, PR_E_INTERNAL, "cannot encode the receipts", q->r.gid);
    }
    msgpack_sbuffer_destroy(&sb);
    finish(q);
}

static void read_page(peer_req *q);

/* A page of the roster's members came. */
static void page_read(gw_job *j)
{
    peer_req *q = (peer_req *)j;
    st_op *op = &j->op;
    gw_roster *ro = roster(q->app);
    if (op->result != 0 || gw_roster_load_page(ro, q->gid, op->members) != 0) {
        int rc = op->result ? op->result : ST_ENOMEM;
        gw_op_release(op);
        gw_roster_load_end(ro, q->gid, rc);
        fail(q, rc);
        return;
    }
    bool more = st_members_more(op->members);
    size_t n = st_members_count(op->members);
    if (n) {
        st_member last = st_members_at(op->members, n - 1);
        snprintf(q->after, sizeof(q->after), "%.*s", (int)last.uid.n, last.uid.p);
    }
    gw_op_release(op);
    if (more) {
        read_page(q);
        return;
    }
    gw_roster_load_end(ro, q->gid, 0);
    q->app->figs.roster_reads++;
    answer(q);
}

static void read_page(peer_req *q)
{
    st_op *op = &q->job.op;
    memset(op, 0, sizeof(*op));
    op->kind = ST_OP_READ_MEMBERS;
    op->gid = st_id_str(q->gid);
    op->uid = st_id_str(q->after);
    op->limit = MEMBERS_PAGE;
    q->job.complete = page_read;
    int rc = gw_bridge_submit(q->app->d.bridge, &q->job);
    if (rc < 0) {
        op->result = rc;
        page_read(&q->job);
    }
}

static void waited(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    proceed((peer_req *)((char *)t - offsetof(peer_req, wait)));
}

static void proceed(peer_req *q)
{
    gw_app *a = q->app;
    switch (gw_roster_begin(roster(a), q->gid)) {
    case GW_ROSTER_READY: answer(q); return;
    case GW_ROSTER_READ:
        q->after[0] = 0;
        read_page(q);
        return;
    default:
        if (!a->d.loop || ++q->waits > WAITS_MAX) { /* no loop (the fuzz target): no wait */
            fail(q, ST_EIO);
            return;
        }
        ev_timer_set(&q->wait, WAIT_S, 0);
        ev_timer_start(a->d.loop, &q->wait);
    }
}

static void orphan(void *job)
{
    ((peer_req *)job)->conn = NULL;
}

void gw_peers_api(gw_app *a, gw_api_conn *c, enum pr_req_type t, const char *gid, uint64_t mid)
{
    peer_req *q = calloc(1, sizeof(*q));
    if (!q || !a->d.hub) {
        free(q);
        gw_api_fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    q->app = a;
    q->api = true;
    q->conn = c;
    c->job = q;
    c->orphan = orphan;
    q->r.t = t;
    q->r.mid = mid;
    q->r.rid = PR_NO_RID;
    snprintf(q->gid, sizeof(q->gid), "%s", gid);
    q->r.gid = gw_cstr(q->gid);
    ev_init(&q->wait, waited);
    proceed(q);
}

void gw_peers_request(gw_app *a, gw_sess *s, const pr_req *r)
{
    app_sess *as = gw_sess_ext(s);
    if (!gw_registry_member(&as->seat, r->gid, NULL)) {
        const char *msg = "not a member of this group";
        gw_sess_error(s, r->rid, gw_route_not_member(s, &msg), msg, r->gid);
        return;
    }
    char gid[PR_MAX_ID + 1];
    snprintf(gid, sizeof(gid), "%.*s", (int)r->gid.n, r->gid.p);
    /* Ends of a watch or of a subscription need no roster. */
    if (r->t == PR_REQ_WATCH && r->n_mids == 0) {
        gw_watch_set(a, s, r, gid);
        return;
    }
    peer_req *q = calloc(1, sizeof(*q));
    if (!q) {
        gw_sess_error_free(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    q->app = a;
    q->r = *r;
    memcpy(q->gid, gid, sizeof(gid));
    q->r.gid = gw_cstr(q->gid);
    q->r.token = q->r.cid = (pr_slice){NULL, 0};
    q->r.body = (pr_body){{NULL, 0}, false};
    ev_init(&q->wait, waited);
    gw_reqs_began(s, &q->link, false); /* the session's later requests wait for this one */
    proceed(q);
}
