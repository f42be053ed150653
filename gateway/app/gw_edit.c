/*
 * A message's later versions, asked by its sender (docs/PROTOCOL.md, Edits and recalls):
 * `edit {gid, mid, body, ver?}` and `recall {gid, mid}`. Two store steps, the session's
 * next requests waiting meanwhile: the message is read (is it there, is it this user's,
 * is the edit window open), then the version is written (ST_OP_EDIT, which checks again
 * that it is the next one: a version made meanwhile, through another session or node,
 * makes it `conflict`). Then the reply (`edited`, `recalled`) goes to the session, and the
 * version to the group's other sessions here (groups/gw_versions.c); the hub takes it to
 * the other threads and the store's feed to the other nodes.
 *
 * The record is encoded once, when the request comes: the sender and the new body, or
 * the sender alone (a recall's tombstone: the body is gone from the store).
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct edit_req {
    gw_job job; /* first: the completion finds the request from its job */
    gw_app *app;
    gw_sess_req link; /* link.sess: NULL once the session is gone, nothing to answer */
    uint64_t rid, mid, ver;
    bool recall, reading; /* reading: the first step (the message read) is under way */
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1];
    msgpack_sbuffer record;
} edit_req;

static void step_done(gw_job *j);

static void req_free(edit_req *q)
{
    msgpack_sbuffer_destroy(&q->record);
    gw_op_release(&q->job.op);
    free(q);
}

/* The request ends: an error to its session (code 0: none), the session's next requests
 * may go. */
static void finish(edit_req *q, int code, const char *msg)
{
    gw_sess *s = q->link.sess;
    if (s && code)
        gw_sess_error(s, q->rid, code, msg, gw_cstr(q->gid));
    if (s)
        gw_reqs_done(s, &q->link, false);
    req_free(q);
}

/* Hands the job's op to the store; false when refused (the request is finished). */
static bool submit(edit_req *q)
{
    q->job.complete = step_done;
    int rc = gw_bridge_submit(q->app->d.bridge, &q->job); /* a read may complete at once */
    if (rc >= 0)
        return true;
    finish(q, gw_route_err_code(rc), gw_route_err_msg(rc));
    return false;
}

/* The message as stored: may its version be made? Then the write. */
static void read_done(edit_req *q)
{
    gw_app *a = q->app;
    st_op *op = &q->job.op;
    if (op->result != 0) {
        finish(q, gw_route_err_code(op->result), gw_route_err_msg(op->result));
        return;
    }
    if (st_page_count(op->page) == 0) {
        finish(q, PR_E_BAD_FIELD, gw_route_err_msg(ST_ENOMSG));
        return;
    }
    const st_msg *m = st_page_at(op->page, 0);
    pr_message r;
    bool mine = pr_dec_record(a->d.dec, m->record, m->record_n, &r) == 0 &&
                r.from.n == strlen(q->uid) && memcmp(r.from.p, q->uid, r.from.n) == 0;
    uint64_t window_ms = (uint64_t)a->d.cfg->edit_window_s * 1000;
    bool late = !q->recall && window_ms && gw_now_ms() > m->ts + window_ms;
    gw_op_release(op); /* the page */
    if (!mine) {
        finish(q, PR_E_UNAUTHORIZED,
               q->recall ? "only its sender recalls a message" : "only its sender edits a message");
        return;
    }
    if (late) {
        char why[96];
        snprintf(why, sizeof(why), "the edit window (%u s after sending) has passed",
                 a->d.cfg->edit_window_s);
        finish(q, PR_E_UNAUTHORIZED, why);
        return;
    }
    if (!q->link.sess) { /* the session is gone: nobody to confirm it to */
        finish(q, 0, NULL);
        return;
    }
    q->reading = false;
    q->job.op = (st_op){.kind = ST_OP_EDIT,
                        .gid = st_id_str(q->gid),
                        .uid = st_id_str(q->uid),
                        .mid = q->mid,
                        .ver = q->ver,
                        .recall = q->recall,
                        .record = q->record.data,
                        .record_n = q->record.size};
    submit(q);
}

/* The version is stored (or refused): the reply, and the version to the others here. */
static void write_done(edit_req *q)
{
    gw_app *a = q->app;
    const st_op *op = &q->job.op;
    if (op->result != 0) {
        finish(q, gw_route_err_code(op->result), gw_route_err_msg(op->result));
        return;
    }
    pr_version v = {.ver = op->ver, .ts = op->ts, .recalled = q->recall};
    pr_slice rec = {(const uint8_t *)q->record.data, q->record.size};
    gw_sess *s = q->link.sess;
    if (s) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (pr_enc_version(&sb, q->rid, gw_cstr(q->gid), q->mid, &v, rec) == 0)
            gw_out_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
    }
    if (!op->duplicate) {
        (*(q->recall ? &a->figs.recalls : &a->figs.edits))++;
        gw_deliver_version(a->d.deliver, q->gid, q->mid, &v, rec.p, rec.n, s);
    }
    finish(q, 0, NULL);
}

static void step_done(gw_job *j)
{
    edit_req *q = (edit_req *)j;
    if (q->reading)
        read_done(q);
    else
        write_done(q);
}

void gw_edit_request(gw_app *a, gw_sess *s, const pr_req *r)
{
    app_sess *as = gw_sess_ext(s);
    bool recall = r->t == PR_REQ_RECALL;
    if (!gw_registry_member(&as->seat, r->gid, NULL)) {
        gw_sess_error(s, r->rid, PR_E_NOT_MEMBER, "not a member of this group", r->gid);
        return;
    }
    const char *why = NULL;
    uint64_t retry_ms = gw_throttle_send(s, &why); /* a version is a write, as a send is */
    if (retry_ms) {
        gw_sess_error_retry(s, r->rid, PR_E_RATE_LIMITED, why, r->gid, retry_ms);
        return;
    }
    if (st_pending(a->d.store) >= a->d.cfg->store_overload) {
        gw_sess_error(s, r->rid, PR_E_OVERLOADED, "server overloaded: retry later", r->gid);
        return;
    }
    edit_req *q = calloc(1, sizeof(*q));
    if (!q) {
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    q->app = a;
    q->link.sess = s;
    q->rid = r->rid;
    q->mid = r->mid;
    q->ver = r->ver;
    q->recall = recall;
    q->reading = true;
    memcpy(q->gid, r->gid.p, r->gid.n);
    snprintf(q->uid, sizeof(q->uid), "%s", gw_sess_uid(s));
    msgpack_sbuffer_init(&q->record);
    int rc = recall ? pr_enc_tombstone(&q->record, gw_cstr(q->uid))
                    : pr_enc_record(&q->record, gw_cstr(q->uid), r->body);
    if (rc != 0) {
        req_free(q);
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    q->job.op = (st_op){.kind = ST_OP_READ_PAGE,
                        .gid = st_id_str(q->gid),
                        .dir = ST_AFTER,
                        .from = q->mid - 1,
                        .limit = 1};
    gw_reqs_began(s, &q->link, false);
    submit(q);
}
