/*
 * Reactions (docs/PROTOCOL.md, Changes and reactions): a session's `react {gid, mid, key,
 * on}` and the API's PUT and DELETE /groups/{gid}/messages/{mid}/reactions/{key}?uid=
 * (docs/API.md). One store write (ST_OP_REACT), which checks everything the store knows
 * (the message, the member, a recalled message, the 21st key) and takes the change's
 * cseq in the same batch. Then the answer goes to whoever asked, and `reacted` to the
 * group's other sessions here (groups/gw_versions.c, GW_PUSH_REACT: past a session's
 * budget, a coalesced `changed` instead); the hub takes it to the other threads and the
 * store's feed (ST_CH_REACT) to the other nodes. A reaction is a write as an edit is:
 * it counts against the session's send rate.
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct react_req {
    gw_job job; /* first: the completion finds the request from its job */
    gw_app *app;
    gw_sess_req link; /* a session's: link.sess NULL once it is gone */
    gw_api_conn *api; /* the API's: NULL once its connection is gone */
    uint64_t rid;
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1];
    char key[PR_REACT_KEY_MAX + 1];
    size_t key_n;
} react_req;

static void req_free(react_req *q)
{
    if (q->api)
        q->api->job = NULL;
    gw_op_release(&q->job.op);
    free(q);
}

static void api_orphan(void *job)
{
    ((react_req *)job)->api = NULL;
}

/* What a store code means for a reaction, in words (gw_route_err_msg speaks of edits). */
static const char *why(int st)
{
    switch (st) {
    case ST_EGONE: return "mid: the message was recalled: it takes no reactions";
    case ST_ETOOMANY: return "key: the message has the most distinct reaction keys already (20)";
    case ST_EINVAL: return "key: 1-32 bytes of UTF-8 without control characters";
    default: return gw_route_err_msg(st);
    }
}

static void refuse(react_req *q, int st)
{
    gw_sess *s = q->link.sess;
    if (s) {
        int code = st == ST_ETOOMANY ? PR_E_TOO_LARGE : gw_route_err_code(st);
        gw_sess_error(s, q->rid, code, why(st), gw_cstr(q->gid));
        gw_reqs_done(s, &q->link, false);
    } else if (q->api) {
        if (st == ST_ETOOMANY)
            gw_api_fail(q->api, 413, "too_large", "key", why(st));
        else if (st == ST_EINVAL)
            gw_api_fail(q->api, 400, "bad_field", "key", why(st));
        else
            gw_api_fail_store(q->api, st, "the reaction was not stored");
    }
    req_free(q);
}

static void done(gw_job *j)
{
    react_req *q = (react_req *)j;
    gw_app *a = q->app;
    const st_op *op = &j->op;
    if (op->result != 0) {
        refuse(q, op->result);
        return;
    }
    pr_reacted r = {.gid = gw_cstr(q->gid),
                    .mid = op->mid,
                    .uid = gw_cstr(q->uid),
                    .key = {(const uint8_t *)q->key, q->key_n},
                    .on = op->on,
                    .count = op->count,
                    .cseq = op->cseq,
                    .duplicate = op->duplicate};
    gw_sess *s = q->link.sess;
    if (s) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (pr_enc_reacted(&sb, q->rid, &r) == 0)
            gw_out_reply(s, &sb);
        msgpack_sbuffer_destroy(&sb);
        gw_reqs_done(s, &q->link, false);
    } else if (q->api) {
        json_t *o = json_object();
        if (o) {
            json_object_set_new(o, "gid", json_string(q->gid));
            json_object_set_new(o, "mid", json_integer((json_int_t)op->mid));
            json_object_set_new(o, "uid", json_string(q->uid));
            json_object_set_new(o, "key", json_stringn(q->key, q->key_n));
            json_object_set_new(o, "on", json_boolean(op->on));
            json_object_set_new(o, "count", json_integer((json_int_t)op->count));
            json_object_set_new(o, "cseq", json_integer((json_int_t)op->cseq));
            json_object_set_new(o, "duplicate", json_boolean(op->duplicate));
            gw_api_answer(q->api, 200, o);
        } else {
            gw_api_fail(q->api, 500, "internal", NULL, "out of memory");
        }
    }
    if (!op->duplicate) {
        a->figs.reactions++;
        gw_deliver_react(a->d.deliver, &r, s);
    }
    req_free(q);
}

static react_req *req_new(gw_app *a, pr_slice gid, uint64_t mid, const char *uid, pr_slice key,
                          bool on)
{
    react_req *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->app = a;
    snprintf(q->gid, sizeof(q->gid), "%.*s", (int)gid.n, (const char *)gid.p);
    snprintf(q->uid, sizeof(q->uid), "%s", uid);
    memcpy(q->key, key.p, key.n);
    q->key_n = key.n;
    q->job.complete = done;
    q->job.op = (st_op){.kind = ST_OP_REACT,
                        .gid = st_id_str(q->gid),
                        .uid = st_id_str(q->uid),
                        .mid = mid,
                        .key = q->key,
                        .key_n = q->key_n,
                        .on = on};
    return q;
}

static void submit(react_req *q)
{
    int rc = gw_bridge_submit(q->app->d.bridge, &q->job);
    if (rc < 0)
        refuse(q, rc == ST_ECLOSED ? ST_EIO : rc);
}

void gw_react_request(gw_app *a, gw_sess *s, const pr_req *r)
{
    if (!gw_write_admitted(a, s, r))
        return;
    react_req *q = req_new(a, r->gid, r->mid, gw_sess_uid(s), r->key, r->on);
    if (!q) {
        gw_sess_error(s, r->rid, PR_E_INTERNAL, "out of memory", r->gid);
        return;
    }
    q->link.sess = s;
    q->rid = r->rid;
    gw_reqs_began(s, &q->link, false);
    submit(q);
}

void gw_api_react(gw_app *a, gw_api_conn *c, const char *gid, uint64_t mid, const char *uid,
                  const char *key, size_t key_n, bool on)
{
    pr_slice k = {(const uint8_t *)key, key_n};
    if (!pr_react_key_valid(k)) {
        gw_api_fail(c, 400, "bad_field", "key", why(ST_EINVAL));
        return;
    }
    react_req *q = req_new(a, gw_cstr(gid), mid, uid, k, on);
    if (!q) {
        gw_api_fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    q->job.op.any_sender = true; /* the application's: the uid need not be a member */
    q->api = c;
    c->job = q;
    c->orphan = api_orphan;
    submit(q);
}
