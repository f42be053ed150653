/*
 * The server API for application backends: JSON over HTTP under /api/v1/ on the
 * gateway's port (docs/API.md). Off unless --api-key-file names its keys; every request
 * carries one as `Authorization: Bearer KEY`.
 *
 * Keys are compared as SHA-256 digests with CRYPTO_memcmp: the time taken says nothing of
 * how much of a key was right, nor of its length. A request that needs the store is a
 * store job like a session's; its connection waits (libwebsockets keeps it) and is
 * answered from its completion, when the socket can take it. A connection that goes away
 * meanwhile leaves its job to complete with nobody to answer: what it wrote is still
 * stored (a message is pushed as usual), as with a session that closes.
 */
#include "gw_api.h"
#include "gw_hub.h"
#include "gw_internal.h"
#include "gw_json.h"
#include "gw_webhook.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#define MAX_KEYS 16
#define KEY_MIN 16 /* bytes of a key, at least */
#define API_PREFIX "/api/v1/"

/* One for the process: every service thread checks keys and rates against it. */
struct gw_api {
    unsigned char key[MAX_KEYS][32]; /* SHA-256 of each key */
    size_t n_keys;
    gw_limit rate; /* requests a second per key (--api-rate) */
    pthread_mutex_t mu;
    gw_bucket bucket[MAX_KEYS]; /* under mu */
};

/* A request waiting for the store. */
typedef struct api_job {
    gw_job job; /* first */
    gw_server *srv;
    gw_api_conn *conn; /* NULL once the connection is gone */
    char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1], cid[PR_MAX_ID + 1];
    msgpack_sbuffer record;
    unsigned closed; /* DELETE sessions: how many were closed here */
} api_job;

static void sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 32;
    EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}

int gw_api_load(gw_server *srv, const char *path)
{
    srv->api = NULL;
    if (!path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        gw_err("api: cannot read --api-key-file %s: %s", path, strerror(errno));
        return -1;
    }
    gw_api *a = calloc(1, sizeof(*a));
    char line[512];
    int lineno = 0, rc = 0;
    while (a && rc == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        while (n && isspace((unsigned char)line[n - 1]))
            line[--n] = 0;
        char *k = line;
        while (isspace((unsigned char)*k))
            k++, n--;
        if (!*k || *k == '#')
            continue; /* blank lines and comments */
        if (n < KEY_MIN || a->n_keys == MAX_KEYS) {
            gw_err("api: %s line %d: %s", path, lineno,
                   n < KEY_MIN ? "a key must be at least 16 characters"
                               : "at most 16 keys (rotate by replacing the file)");
            rc = -1;
            break;
        }
        sha256(k, n, a->key[a->n_keys++]);
    }
    fclose(f);
    explicit_bzero(line, sizeof(line));
    if (!a || rc != 0 || a->n_keys == 0) {
        if (a && rc == 0)
            gw_err("api: %s holds no key (one a line, at least 16 characters)", path);
        free(a);
        return -1;
    }
    a->rate = gw_limit_make(srv->cfg.api_rate, srv->cfg.rate_burst_s);
    pthread_mutex_init(&a->mu, NULL);
    for (size_t i = 0; i < a->n_keys; i++)
        gw_bucket_init(&a->bucket[i], &a->rate, gw_mono_ms());
    gw_info("api: on at %s (%zu keys, %u requests a second each%s)", API_PREFIX, a->n_keys,
            srv->cfg.api_rate, srv->cfg.api_rate ? "" : ": no limit");
    srv->api = a;
    return 0;
}

void gw_api_free(gw_api *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    explicit_bzero(a, sizeof(*a));
    free(a);
}

/* ---- answers --------------------------------------------------------------------------- */

static void answer(gw_api_conn *c, unsigned status, json_t *body)
{
    json_decref(c->answer);
    c->status = status;
    c->answer = body;
    c->answered = true;
    if (c->wsi)
        lws_callback_on_writable(c->wsi);
}

/* An error: {"error": code, "message": text} and the field it is about, if any. */
static void fail(gw_api_conn *c, unsigned status, const char *code, const char *field,
                 const char *msg)
{
    json_t *o = json_pack("{s:s, s:s}", "error", code, "message", msg);
    if (field)
        json_object_set_new(o, "field", json_string(field));
    answer(c, status, o);
}

/* The HTTP status and error code of a store result. */
static void fail_store(gw_api_conn *c, int rc, const char *what)
{
    char msg[160];
    switch (rc) {
    case ST_ENOGROUP:
        snprintf(msg, sizeof(msg), "%s: no such group", what);
        fail(c, 404, "no_group", "gid", msg);
        return;
    case ST_ENOTMEMBER:
        snprintf(msg, sizeof(msg), "%s: not a member of this group", what);
        fail(c, 404, "not_member", "uid", msg);
        return;
    case ST_ECONFLICT:
        fail(c, 409, "bad_field", "cid",
             "this cid was already used by this sender for another group");
        return;
    case ST_EIO:
    case ST_ECLOSED:
        snprintf(msg, sizeof(msg),
                 "%s: the store does not take writes now; retry (a message "
                 "with the same cid is stored once)",
                 what);
        fail(c, 503, "unavailable", NULL, msg);
        return;
    default:
        snprintf(msg, sizeof(msg), "%s: %s", what, st_strerror(rc));
        fail(c, 500, "internal", NULL, msg);
    }
}

/* ---- store jobs ------------------------------------------------------------------------ */

static api_job *job_new(gw_server *srv, gw_api_conn *c, enum st_op_kind kind)
{
    api_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->srv = srv;
    j->conn = c;
    j->job.op.kind = kind;
    msgpack_sbuffer_init(&j->record);
    return j;
}

static void job_free(api_job *j)
{
    if (j->conn)
        j->conn->job = NULL;
    msgpack_sbuffer_destroy(&j->record);
    free(j);
}

static void submit(api_job *j, gw_job_fn done)
{
    j->job.complete = done;
    j->conn->job = j;
    int rc = gw_bridge_submit(j->srv->bridge, &j->job);
    if (rc < 0) { /* refused: answered here, not by done */
        fail_store(j->conn, rc == ST_ECLOSED ? ST_EIO : rc, "the store refused the request");
        job_free(j);
    }
}

static void posted(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    gw_server *srv = j->srv;
    st_op *op = &jb->op;
    if (op->result == 0) {
        if (op->duplicate) {
            srv->n.sends_dup++;
        } else {
            srv->n.sends++;
            gw_fanout(srv->registry, j->gid, op->mid, op->ts, j->record.data, j->record.size, NULL);
            gw_unread_stored(srv->unread, j->gid, op->mid);
        }
    }
    if (j->conn) {
        if (op->result == 0)
            answer(j->conn, 200,
                   json_pack("{s:I, s:I, s:b}", "mid", (json_int_t)op->mid, "ts",
                             (json_int_t)op->ts, "duplicate", op->duplicate));
        else
            fail_store(j->conn, op->result, "the message was not stored");
    }
    job_free(j);
}

static void membership_done(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    gw_server *srv = j->srv;
    st_op *op = &jb->op;
    gw_user *u = op->result == 0 ? gw_user_find(srv->registry, j->uid) : NULL;
    if (op->kind == ST_OP_JOIN) {
        if (u && !u->loading)
            gw_member_add(srv->registry, u, j->gid, op->ack, op->last_mid);
        if (j->conn && op->result == 0)
            answer(j->conn, op->joined ? 201 : 200,
                   json_pack("{s:s, s:s, s:I, s:I, s:b, s:b}", "gid", j->gid, "uid", j->uid,
                             "last_mid", (json_int_t)op->last_mid, "ack", (json_int_t)op->ack,
                             "joined", op->joined, "created", op->created));
    } else {
        if (u && !u->loading)
            gw_member_end(srv->registry, u, j->gid, NULL);
        if (j->conn && op->result == 0)
            answer(j->conn, 200,
                   json_pack("{s:s, s:s, s:b}", "gid", j->gid, "uid", j->uid, "removed", true));
    }
    if (j->conn && op->result != 0)
        fail_store(j->conn, op->result,
                   op->kind == ST_OP_JOIN ? "the member was not added"
                                          : "the member was not removed");
    job_free(j);
}

static void groups_done(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    st_op *op = &jb->op;
    if (j->conn && op->result == 0) {
        json_t *arr = json_array();
        for (size_t i = 0; i < st_groups_count(op->groups); i++) {
            const st_user_group *g = st_groups_at(op->groups, i);
            json_array_append_new(arr,
                                  json_pack("{s:s%, s:I, s:I, s:I}", "gid", g->gid.p, g->gid.n,
                                            "last_mid", (json_int_t)g->last_mid, "ack",
                                            (json_int_t)g->ack, "unread", (json_int_t)g->unread));
        }
        answer(j->conn, 200, json_pack("{s:s, s:o}", "uid", j->uid, "groups", arr));
    } else if (j->conn) {
        fail_store(j->conn, op->result, "cannot read the user's groups");
    }
    st_groups_free(op->groups);
    job_free(j);
}

static void page_done(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    gw_server *srv = j->srv;
    st_op *op = &jb->op;
    if (j->conn && op->result == 0) {
        json_t *arr = json_array();
        for (size_t i = 0; i < st_page_count(op->page); i++) {
            const st_msg *m = st_page_at(op->page, i);
            pr_message r;
            if (pr_dec_record(srv->dec, m->record, m->record_n, &r) != 0)
                continue; /* cannot happen for what the gateway stored */
            json_array_append_new(arr, gw_json_message(m->mid, m->ts, &r, true));
        }
        answer(j->conn, 200,
               json_pack("{s:s, s:I, s:b, s:o}", "gid", j->gid, "last_mid",
                         (json_int_t)st_page_last_mid(op->page), "more", st_page_more(op->page),
                         "messages", arr));
    } else if (j->conn) {
        fail_store(j->conn, op->result, "cannot read the group's messages");
    }
    st_page_free(op->page);
    job_free(j);
}

static void members_done(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    gw_server *srv = j->srv;
    st_op *op = &jb->op;
    if (j->conn && op->result == 0) {
        json_t *arr = json_array();
        uint64_t last = st_members_last_mid(op->members);
        const char *next = NULL;
        size_t next_n = 0;
        for (size_t i = 0; i < st_members_count(op->members); i++) {
            st_member m = st_members_at(op->members, i);
            char uid[PR_MAX_ID + 1];
            if (m.uid.n > PR_MAX_ID)
                continue;
            memcpy(uid, m.uid.p, m.uid.n);
            uid[m.uid.n] = 0;
            gw_user *u = gw_user_find(srv->registry, uid);
            bool online = srv->hub ? gw_hub_sessions_of(srv->hub, uid) > 0 /* any thread */
                                   : u && u->n_sessions > 0;
            json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:b}", "uid", uid, "ack",
                                                 (json_int_t)m.ack, "unread",
                                                 (json_int_t)(last > m.ack ? last - m.ack : 0),
                                                 "online", online));
            next = m.uid.p;
            next_n = m.uid.n;
        }
        json_t *o = json_pack("{s:s, s:I, s:o}", "gid", j->gid, "last_mid", (json_int_t)last,
                              "members", arr);
        /* The cursor of the next page: the last uid of this one. */
        json_object_set_new(o, "next",
                            st_members_more(op->members) && next ? json_stringn(next, next_n)
                                                                 : json_null());
        answer(j->conn, 200, o);
    } else if (j->conn) {
        fail_store(j->conn, op->result, "cannot read the group's members");
    }
    st_members_free(op->members);
    job_free(j);
}

/* ---- requests -------------------------------------------------------------------------- */

/* The id in [p, p + n) copied into out (PR_MAX_ID + 1 bytes); false if it is not an id. */
static bool take_id(const char *p, size_t n, char *out)
{
    if (!pr_id_valid((pr_slice){(const uint8_t *)p, n}))
        return false;
    memcpy(out, p, n);
    out[n] = 0;
    return true;
}

/* A decimal query argument (name=) into *v: 1 given, 0 absent, -1 malformed. */
static int query_u64(struct lws *wsi, const char *name, uint64_t *v)
{
    char buf[64];
    if (lws_get_urlarg_by_name(wsi, name, buf, sizeof(buf)) == NULL)
        return 0;
    const char *s = buf + strlen(name);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-')
        return -1;
    *v = x;
    return 1;
}

static void post_message(gw_server *srv, gw_api_conn *c, const char *gid)
{
    json_error_t jerr;
    json_t *req = json_loadb(c->body, c->body_n, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        fail(c, 400, "bad_frame", NULL, "the body must be a JSON object {from, cid, body}");
        return;
    }
    json_t *from = json_object_get(req, "from"), *cid = json_object_get(req, "cid"),
           *body = json_object_get(req, "body");
    api_job *j = job_new(srv, c, ST_OP_APPEND);
    /* The first thing wrong, named: status, code, field, message. */
    unsigned status = 0;
    const char *code = "bad_field", *field = NULL, *why = NULL;
    if (!j)
        status = 500, code = "internal", why = "out of memory";
    else if (!json_is_string(from) ||
             !take_id(json_string_value(from), json_string_length(from), j->uid))
        status = 400, field = "from", why = "from: an id, 1-64 characters [A-Za-z0-9_.:-]";
    else if (!json_is_string(cid) ||
             !take_id(json_string_value(cid), json_string_length(cid), j->cid))
        status = 400, field = "cid", why = "cid: an id, 1-64 characters [A-Za-z0-9_.:-]";
    else if (!json_is_string(body))
        status = 400, field = "body", why = "body: a string";
    else if (json_string_length(body) > srv->cfg.max_body)
        status = 413, code = "too_large", field = "body",
        why = "body: more bytes than the gateway's max_body";
    if (status) {
        json_decref(req);
        if (j)
            job_free(j);
        fail(c, status, code, field, why);
        return;
    }
    strcpy(j->gid, gid);
    pr_slice b = {(const uint8_t *)json_string_value(body), json_string_length(body)};
    int rc = pr_enc_record(&j->record, (pr_slice){(const uint8_t *)j->uid, strlen(j->uid)},
                           (pr_body){b, false});
    json_decref(req);
    if (rc != 0) {
        job_free(j);
        fail(c, 500, "internal", NULL, "cannot encode the message");
        return;
    }
    st_op *op = &j->job.op;
    op->gid = st_id_str(j->gid);
    op->uid = st_id_str(j->uid);
    op->cid = st_id_str(j->cid);
    op->record = j->record.data;
    op->record_n = j->record.size;
    op->any_sender = true; /* the backend names any sender: a bot, the system */
    submit(j, posted);
}

static void membership(gw_server *srv, gw_api_conn *c, const char *gid, const char *uid, bool add)
{
    api_job *j = job_new(srv, c, add ? ST_OP_JOIN : ST_OP_LEAVE);
    if (!j) {
        fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    strcpy(j->gid, gid);
    strcpy(j->uid, uid);
    j->job.op.gid = st_id_str(j->gid);
    j->job.op.uid = st_id_str(j->uid);
    j->job.op.create = add; /* the API makes the groups it adds members to */
    submit(j, membership_done);
}

static void user_groups(gw_server *srv, gw_api_conn *c, const char *uid)
{
    api_job *j = job_new(srv, c, ST_OP_READ_GROUPS);
    if (!j) {
        fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    strcpy(j->uid, uid);
    j->job.op.uid = st_id_str(j->uid);
    submit(j, groups_done);
}

static void get_messages(gw_server *srv, gw_api_conn *c, struct lws *wsi, const char *gid)
{
    uint64_t after = 0, before = 0, limit = srv->cfg.page_default;
    int ha = query_u64(wsi, "after=", &after), hb = query_u64(wsi, "before=", &before),
        hl = query_u64(wsi, "limit=", &limit);
    if (ha < 0 || hb < 0 || (ha && hb) || (hb && before == 0)) {
        fail(c, 400, "bad_field", ha < 0 ? "after" : "before",
             "give after=MID or before=MID (>= 1), not both (neither: from the start)");
        return;
    }
    if (hl < 0 || (hl && limit == 0)) {
        fail(c, 400, "bad_field", "limit", "limit: a whole number >= 1");
        return;
    }
    if (limit > srv->cfg.page_max)
        limit = srv->cfg.page_max;
    api_job *j = job_new(srv, c, ST_OP_READ_PAGE);
    if (!j) {
        fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    strcpy(j->gid, gid);
    st_op *op = &j->job.op;
    op->gid = st_id_str(j->gid);
    op->dir = hb ? ST_BEFORE : ST_AFTER;
    op->from = hb ? before : after;
    op->limit = (size_t)limit;
    op->max_bytes = srv->cfg.max_frame;
    submit(j, page_done);
}

static void get_members(gw_server *srv, gw_api_conn *c, struct lws *wsi, const char *gid)
{
    char after[PR_MAX_ID + 8] = "";
    uint64_t limit = 100;
    int hl = query_u64(wsi, "limit=", &limit);
    if (hl < 0 || (hl && (limit == 0 || limit > ST_MEMBERS_MAX))) {
        fail(c, 400, "bad_field", "limit", "limit: a whole number from 1 to 1000");
        return;
    }
    api_job *j = job_new(srv, c, ST_OP_READ_MEMBERS);
    if (!j) {
        fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    if (lws_get_urlarg_by_name(wsi, "after=", after, sizeof(after)) &&
        !take_id(after + 6, strlen(after + 6), j->uid)) {
        job_free(j);
        fail(c, 400, "bad_field", "after", "after: a uid (the `next` of the page before)");
        return;
    }
    strcpy(j->gid, gid);
    st_op *op = &j->job.op;
    op->gid = st_id_str(j->gid);
    op->uid = st_id_str(j->uid); /* "" : from the first */
    op->limit = (size_t)limit;
    submit(j, members_done);
}

static void signed_out(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    if (j->conn && jb->op.result == 0)
        answer(j->conn, 200,
               json_pack("{s:s, s:I}", "uid", j->uid, "closed", (json_int_t)j->closed));
    else if (j->conn)
        fail_store(j->conn, jb->op.result, "the other nodes were not told");
    job_free(j);
}

/* The user's sessions here are closed at once with 4003; the other nodes close theirs
 * when the store announces it (ST_OP_SIGNOUT, through the cluster's change feed). */
static void close_sessions(gw_server *srv, gw_api_conn *c, const char *uid)
{
    api_job *j = job_new(srv, c, ST_OP_SIGNOUT);
    if (!j) {
        fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    strcpy(j->uid, uid);
    /* Every thread's sessions of the user: this one's now, the others' when told. */
    unsigned all = srv->hub ? gw_hub_sessions_of(srv->hub, uid) : 0;
    j->closed = gw_user_sign_out(srv, uid);
    if (srv->hub) {
        gw_hub_tell_signout(srv->hub, srv->thread, uid);
        if (all > j->closed)
            j->closed = all;
    }
    j->job.op.uid = st_id_str(j->uid);
    submit(j, signed_out);
}

/* Splits path (after the prefix) into at most 4 segments. */
static size_t segments(const char *path, const char *seg[4], size_t len[4])
{
    size_t n = 0;
    while (*path && n < 5) {
        const char *e = strchr(path, '/');
        size_t l = e ? (size_t)(e - path) : strlen(path);
        if (n == 4 || l == 0)
            return 5; /* too many, or an empty segment: no such endpoint */
        seg[n] = path;
        len[n++] = l;
        path += l + (e ? 1 : 0);
        if (e && !*path)
            return 5; /* a trailing slash */
    }
    return n;
}

static bool seg_is(const char *s, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

/* Decides what the request is and starts it; answers at once what needs no store. */
static void route(gw_server *srv, gw_api_conn *c, struct lws *wsi)
{
    c->routed = true;
    const char *seg[4];
    size_t len[4];
    size_t n = segments(c->path + strlen(API_PREFIX), seg, len);
    char a[PR_MAX_ID + 1], b[PR_MAX_ID + 1];
    const char *m = c->method;
    bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0, put = strcmp(m, "PUT") == 0,
         del = strcmp(m, "DELETE") == 0;
    if (n >= 2 && seg_is(seg[0], len[0], "groups")) {
        if (!take_id(seg[1], len[1], a)) {
            fail(c, 400, "bad_field", "gid", "gid: an id, 1-64 characters [A-Za-z0-9_.:-]");
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "messages")) {
            if (post)
                post_message(srv, c, a);
            else if (get)
                get_messages(srv, c, wsi, a);
            else
                fail(c, 405, "bad_type", NULL, "use GET or POST here");
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "members")) {
            if (get)
                get_members(srv, c, wsi, a);
            else
                fail(c, 405, "bad_type", NULL, "use GET here");
            return;
        }
        if (n == 4 && seg_is(seg[2], len[2], "members")) {
            if (!take_id(seg[3], len[3], b)) {
                fail(c, 400, "bad_field", "uid", "uid: an id, 1-64 characters [A-Za-z0-9_.:-]");
                return;
            }
            if (put || del)
                membership(srv, c, a, b, put);
            else
                fail(c, 405, "bad_type", NULL, "use PUT or DELETE here");
            return;
        }
    }
    if (n == 3 && seg_is(seg[0], len[0], "users")) {
        if (!take_id(seg[1], len[1], a)) {
            fail(c, 400, "bad_field", "uid", "uid: an id, 1-64 characters [A-Za-z0-9_.:-]");
            return;
        }
        if (seg_is(seg[2], len[2], "groups")) {
            if (get)
                user_groups(srv, c, a);
            else
                fail(c, 405, "bad_type", NULL, "use GET here");
            return;
        }
        if (seg_is(seg[2], len[2], "sessions")) {
            if (del)
                close_sessions(srv, c, a);
            else
                fail(c, 405, "bad_type", NULL, "use DELETE here");
            return;
        }
    }
    fail(c, 404, "not_found", NULL, "no such endpoint (see docs/API.md)");
}

/* ---- the HTTP side --------------------------------------------------------------------- */

bool gw_api_path(const char *path)
{
    return strncmp(path, API_PREFIX, strlen(API_PREFIX)) == 0 || strcmp(path, "/api/v1") == 0;
}

/* The key in `Authorization: Bearer KEY`, checked against every key, in constant time:
 * its index, or -1. */
static int authorized(gw_api *a, struct lws *wsi)
{
    char hdr[600];
    int n = lws_hdr_copy(wsi, hdr, sizeof(hdr), WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n <= 7 || strncasecmp(hdr, "Bearer ", 7) != 0)
        return -1;
    unsigned char d[32];
    sha256(hdr + 7, (size_t)n - 7, d);
    explicit_bzero(hdr, sizeof(hdr));
    int which = -1;
    for (size_t i = 0; i < a->n_keys; i++)
        if (CRYPTO_memcmp(d, a->key[i], 32) == 0)
            which = (int)i; /* no early exit: every key is compared */
    return which;
}

int gw_api_begin(gw_server *srv, gw_api_conn *c, struct lws *wsi, const char *path,
                 const char *method)
{
    memset(c, 0, sizeof(*c));
    c->wsi = wsi;
    snprintf(c->path, sizeof(c->path), "%s", path);
    snprintf(c->method, sizeof(c->method), "%s", method);
    if (strlen(path) >= sizeof(c->path)) {
        fail(c, 414, "bad_field", NULL, "the path is too long");
        return 0;
    }
    if (!srv->api) {
        fail(c, 404, "not_found", NULL, "the API is off: start the gateway with --api-key-file");
        return 0;
    }
    int key = authorized(srv->api, wsi);
    if (key < 0) {
        srv->n.api_unauthorized++;
        fail(c, 401, "unauthorized", NULL,
             "send Authorization: Bearer KEY with a key of --api-key-file");
        return 0;
    }
    gw_api *a = srv->api;
    uint64_t now = gw_mono_ms(), wait = 0;
    pthread_mutex_lock(&a->mu);
    bool over = srv->cfg.api_rate && !gw_bucket_take(&a->bucket[key], &a->rate, 1, now);
    if (over)
        wait = gw_bucket_wait_ms(&a->bucket[key], &a->rate, 1, now);
    pthread_mutex_unlock(&a->mu);
    if (over) {
        srv->n.api_rate_limited++;
        fail(c, 429, "rate_limited", NULL, "over --api-rate for this key: wait retry_ms");
        json_object_set_new(c->answer, "retry_ms", json_integer((json_int_t)(wait < 1 ? 1 : wait)));
        return 0;
    }
    srv->n.api_requests++;
    c->authorized = true;
    if (strcmp(method, "POST") == 0)
        return 1; /* the body follows */
    route(srv, c, wsi);
    return 0;
}

int gw_api_body(gw_server *srv, gw_api_conn *c, const void *in, size_t len)
{
    if (c->routed)
        return 0; /* a body on a request that does not take one */
    /* A message's JSON: its body (escaped, up to 6 bytes a byte) and the other fields. */
    size_t max = 6 * srv->cfg.max_body + 4096;
    if (c->answered || c->body_n + len > max) {
        if (!c->answered)
            fail(c, 413, "too_large", "body", "the request body is too large");
        return 0;
    }
    char *nb = realloc(c->body, c->body_n + len);
    if (!nb) {
        fail(c, 500, "internal", NULL, "out of memory");
        return 0;
    }
    c->body = nb;
    memcpy(c->body + c->body_n, in, len);
    c->body_n += len;
    return 0;
}

void gw_api_body_done(gw_server *srv, gw_api_conn *c, struct lws *wsi)
{
    /* Only a POST waits for its body; the others started at their headers (and a body
     * sent with them is ignored). */
    if (!c->answered && c->authorized && !c->routed && strcmp(c->method, "POST") == 0)
        route(srv, c, wsi);
}

bool gw_api_ready(const gw_api_conn *c, unsigned *status, char **json)
{
    if (!c->answered)
        return false;
    *status = c->status;
    *json = json_dumps(c->answer, JSON_COMPACT);
    return true;
}

void gw_api_release(gw_api_conn *c)
{
    if (c->job)
        c->job->conn = NULL; /* it completes with nobody to answer */
    c->job = NULL;
    free(c->body);
    c->body = NULL;
    json_decref(c->answer);
    c->answer = NULL;
    c->wsi = NULL;
}
