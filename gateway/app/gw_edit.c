/*
 * A message's later versions (docs/PROTOCOL.md, Edits and recalls): a session's `edit
 * {gid, mid, body, ver?}` and `recall {gid, mid}` by the message's sender, and the API's
 * PUT and DELETE /groups/{gid}/messages/{mid} (docs/API.md) for the application. Two store
 * steps, a session's next requests waiting meanwhile: the message is read (is it there;
 * for a session, is it this user's and is the edit window open), then the version is
 * written (ST_OP_EDIT, which checks again that it is the next one: a version made
 * meanwhile, through another session or node, makes it `conflict`). Then the answer goes
 * to whoever asked, and the version to the group's other sessions here
 * (groups/gw_versions.c); the hub takes it to the other threads and the store's feed to
 * the other nodes.
 *
 * The record is encoded once, after the read: the message's sender (as stored) and the new
 * body, or the sender alone (a recall's tombstone: the body is gone from the store).
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct edit_req {
    gw_job job; /* first: the completion finds the request from its job */
    gw_app *app;
    gw_sess_req link; /* a session's: link.sess NULL once it is gone */
    gw_api_conn *api; /* the API's: NULL once its connection is gone */
    bool by_api;
    uint64_t rid, mid, ver;
    bool recall, reading; /* reading: the first step (the message read) is under way */
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1]; /* a session's user */
    pr_body body;            /* an edit's new body (owned copy) */
    msgpack_sbuffer record;
} edit_req;

static void step_done(gw_job *j);

static void req_free(edit_req *q)
{
    if (q->api)
        q->api->job = NULL;
    free((void *)q->body.data.p);
    msgpack_sbuffer_destroy(&q->record);
    gw_op_release(&q->job.op);
    free(q);
}

static void api_orphan(void *job)
{
    ((edit_req *)job)->api = NULL;
}

static const char *what(const edit_req *q)
{
    return q->recall ? "the message was not recalled" : "the message was not edited";
}

/* The request ends refused: a store code (st < 0), or else a protocol code and its text. */
static void refuse(edit_req *q, int st, int code, const char *msg)
{
    gw_sess *s = q->link.sess;
    if (s) {
        gw_sess_error(s, q->rid, st ? gw_route_err_code(st) : code, st ? gw_route_err_msg(st) : msg,
                      gw_cstr(q->gid));
        gw_reqs_done(s, &q->link, false);
    } else if (q->api) {
        gw_api_fail_store(q->api, st, what(q));
    }
    req_free(q);
}

/* Hands the job's op to the store; false when refused (the request is finished). */
static bool submit(edit_req *q)
{
    q->job.complete = step_done;
    int rc = gw_bridge_submit(q->app->d.bridge, &q->job); /* a read may complete at once */
    if (rc >= 0)
        return true;
    refuse(q, rc == ST_ECLOSED ? ST_EIO : rc, 0, NULL);
    return false;
}

/* The message as stored: may its version be made? Then the write. */
static void read_done(edit_req *q)
{
    gw_app *a = q->app;
    st_op *op = &q->job.op;
    if (op->result != 0 || st_page_count(op->page) == 0) {
        refuse(q, op->result ? op->result : ST_ENOMSG, 0, NULL);
        return;
    }
    const st_msg *m = st_page_at(op->page, 0);
    pr_message r;
    if (pr_dec_record(a->d.dec, m->record, m->record_n, &r) != 0) {
        refuse(q, 0, PR_E_INTERNAL, "the stored message cannot be read");
        return;
    }
    bool mine = r.from.n == strlen(q->uid) && memcmp(r.from.p, q->uid, r.from.n) == 0;
    uint64_t window_ms = (uint64_t)a->d.cfg->edit_window_s * 1000;
    bool late = !q->recall && window_ms && gw_now_ms() > m->ts + window_ms;
    int rc = q->recall ? pr_enc_tombstone(&q->record, r.from)
                       : pr_enc_record(&q->record, r.from, q->body);
    gw_op_release(op); /* the page, and r's slices with it */
    if (!q->by_api && !mine) {
        refuse(q, 0, PR_E_UNAUTHORIZED,
               q->recall ? "only its sender recalls a message" : "only its sender edits a message");
        return;
    }
    if (!q->by_api && late) {
        char why[96];
        snprintf(why, sizeof(why), "the edit window (%u s after sending) has passed",
                 a->d.cfg->edit_window_s);
        refuse(q, 0, PR_E_UNAUTHORIZED, why);
        return;
    }
    if (rc != 0) {
        refuse(q, ST_ENOMEM, 0, NULL);
        return;
    }
    q->reading = false;
    q->job.op = (st_op){.kind = ST_OP_EDIT,
                        .gid = st_id_str(q->gid),
                        .mid = q->mid,
                        .ver = q->ver,
                        .recall = q->recall,
                        .record = q->record.data,
                        .record_n = q->record.size};
    submit(q);
}

/* The API's answer: the version as stored (JSON, docs/API.md). */
static json_t *api_answer(edit_req *q, const pr_version *v)
{
    pr_message r;
    json_t *o = NULL;
    if (pr_dec_record(q->app->d.dec, (const uint8_t *)q->record.data, q->record.size, &r) == 0)
        o = gw_json_message(q->mid, v->ts, &r, !v->recalled);
    if (!o)
        return NULL;
    json_object_set_new(o, "gid", json_string(q->gid));
    json_object_set_new(o, "ver", json_integer((json_int_t)v->ver));
    if (v->recalled)
        json_object_set_new(o, "recalled", json_true());
    return o;
}

/* The version is stored (or refused): the answer, and the version to the others here. */
static void write_done(edit_req *q)
{
    gw_app *a = q->app;
    const st_op *op = &q->job.op;
    if (op->result != 0) {
        refuse(q, op->result, 0, NULL);
        return;
    }
    pr_version v = {.ver = op->ver, .ts = op->ts, .recalled = q->recall, .cseq = op->cseq};
    pr_slice rec = {(const uint8_t *)q->record.data, q->record.size};
    gw_sess *s = q->link.sess;
    if (s) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (pr_enc_version(&sb, q->rid, gw_cstr(q->gid), q->mid, &v, rec) == 0)
            gw_out_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
        gw_reqs_done(s, &q->link, false);
    } else if (q->api) {
        json_t *o = api_answer(q, &v);
        if (o)
            gw_api_answer(q->api, 200, o);
        else
            gw_api_fail(q->api, 500, "internal", NULL, "cannot encode the answer");
    }
    if (!op->duplicate) {
        uint64_t *n = q->recall ? &a->figs.recalls : &a->figs.edits;
        (*n)++;
        gw_deliver_version(a->d.deliver, q->gid, q->mid, &v, rec.p, rec.n, s);
    }
    req_free(q);
}

static void step_done(gw_job *j)
{
    edit_req *q = (edit_req *)j;
    if (q->reading)
        read_done(q);
    else
        write_done(q);
}

/* A request of either kind, its first step (the read) ready to submit. NULL: no memory. */
static edit_req *req_new(gw_app *a, const char *gid, uint64_t mid, bool recall, pr_body body)
{
    edit_req *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->app = a;
    q->mid = mid;
    q->recall = recall;
    q->reading = true;
    snprintf(q->gid, sizeof(q->gid), "%s", gid);
    msgpack_sbuffer_init(&q->record);
    if (!recall) {
        void *copy = malloc(body.data.n ? body.data.n : 1);
        if (!copy) {
            free(q);
            return NULL;
        }
        if (body.data.n)
            memcpy(copy, body.data.p, body.data.n);
        q->body = (pr_body){{copy, body.data.n}, body.is_bin};
    }
    q->job.op = (st_op){.kind = ST_OP_READ_PAGE,
                        .gid = st_id_str(q->gid),
                        .dir = ST_AFTER,
                        .from = mid - 1,
                        .limit = 1};
    return q;
}

void gw_edit_request(gw_app *a, gw_sess *s, const pr_req *r)
{
    if (!gw_write_admitted(a, s, r))
        return;
    char gid[PR_MAX_ID + 1];
    snprintf(gid, sizeof(gid), "%.*s", (int)r->gid.n, (const char *)r->gid.p);
    edit_req *q = req_new(a, gid, r->mid, r->t == PR_REQ_RECALL, r->body);
    if (!q) {
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    q->link.sess = s;
    q->rid = r->rid;
    q->ver = r->ver;
    snprintf(q->uid, sizeof(q->uid), "%s", gw_sess_uid(s));
    gw_reqs_began(s, &q->link, false);
    submit(q);
}

void gw_api_edit(gw_app *a, gw_api_conn *c, const char *gid, uint64_t mid, bool recall)
{
    pr_body body = {{NULL, 0}, false};
    uint64_t ver = 0;
    json_t *req = NULL;
    if (!recall) {
        if (!(req = gw_api_body_object(c, "{body, ver?}")))
            return;
        json_t *b = json_object_get(req, "body"), *v = json_object_get(req, "ver");
        const char *field = NULL, *why = NULL;
        unsigned status = 400;
        if (!json_is_string(b))
            field = "body", why = "body: a string";
        else if (json_string_length(b) > a->d.cfg->max_body)
            status = 413, field = "body", why = "body: more bytes than the gateway's max_body";
        else if (v && (!json_is_integer(v) || json_integer_value(v) < 1))
            field = "ver", why = "ver: the version to make, a whole number from 1";
        if (why) {
            json_decref(req);
            gw_api_fail(c, status, status == 413 ? "too_large" : "bad_field", field, why);
            return;
        }
        body.data = (pr_slice){(const uint8_t *)json_string_value(b), json_string_length(b)};
        ver = v ? (uint64_t)json_integer_value(v) : 0;
    }
    edit_req *q = req_new(a, gid, mid, recall, body);
    json_decref(req);
    if (!q) {
        gw_api_fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    q->by_api = true;
    q->api = c;
    q->ver = ver;
    c->job = q;
    c->orphan = api_orphan;
    submit(q);
}
