/*
 * The server API's requests that need the store (docs/API.md). Each is a store job like a
 * session's; its connection waits (libwebsockets keeps it) and is answered from the
 * job's completion, when the socket can take it. A connection that goes away meanwhile
 * leaves its job to complete with nobody to answer: what it wrote is still stored (a
 * message is pushed as usual), as with a session that closes.
 *
 * Every job completes through one skeleton (done): its kind's effect on this node (a
 * message pushed, a membership made or ended), whether anyone waits or not; then, for a
 * connection still there, the kind's answer, or the error of the store's result; then
 * what the store handed back is freed.
 */
#include "app_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct api_job api_job;

/* What one kind of request does when its store job completes. */
typedef struct api_kind {
    const char *failed; /* what the error answer says was not done */
    /* Its effect here, once the store has done it (NULL: none). */
    void (*effect)(api_job *j, const st_op *op);
    /* Its answer (a new reference), and the status if not 200. */
    json_t *(*answer)(api_job *j, const st_op *op, unsigned *status);
    /* A second request after the first succeeded (NULL: none): true when it submitted one
     * (the job goes on, and this runs again after it). */
    bool (*then)(api_job *j, st_op *op);
} api_kind;

/* A request waiting for the store. */
struct api_job {
    gw_job job; /* first */
    gw_app *app;
    gw_api_conn *conn; /* NULL once the connection is gone */
    const api_kind *kind;
    gw_append m;     /* its gid and uid; a message's cid and record */
    unsigned closed; /* DELETE sessions: how many were closed here */
    /* GET members: the page, kept while its members' last_seen is read */
    st_members *page;
    st_seen *seen;
    size_t n_seen;
};

/* A job of kind for connection c, whose op names gid and uid (NULL: none; "": from the
 * first member, for READ_MEMBERS). NULL (answered) when out of memory. */
static api_job *job_new(gw_app *a, gw_api_conn *c, enum st_op_kind op, const api_kind *kind,
                        const char *gid, const char *uid)
{
    api_job *j = calloc(1, sizeof(*j));
    if (!j) {
        gw_api_fail(c, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    j->app = a;
    j->conn = c;
    j->kind = kind;
    j->job.op.kind = op;
    gw_append_init(&j->m);
    if (gid) {
        strcpy(j->m.gid, gid);
        j->job.op.gid = st_id_str(j->m.gid);
    }
    if (uid) {
        strcpy(j->m.uid, uid);
        j->job.op.uid = st_id_str(j->m.uid);
    }
    return j;
}

static void job_free(api_job *j)
{
    if (j->conn)
        j->conn->job = NULL;
    gw_append_release(&j->m);
    gw_op_release(&j->job.op);
    st_list_free(j->job.op.list); /* an erasure's groups */
    st_members_free(j->page);
    free(j->seen);
    free(j);
}

void gw_api_job_orphan(void *job)
{
    ((api_job *)job)->conn = NULL;
}

/* The skeleton every API job completes through (see the top of this file). */
static void done(gw_job *jb)
{
    api_job *j = (api_job *)jb;
    st_op *op = &jb->op;
    if (op->result == 0 && j->kind->then && j->kind->then(j, op))
        return; /* its next request is under way */
    if (op->result == 0 && j->kind->effect)
        j->kind->effect(j, op);
    if (j->conn && op->result == 0) {
        unsigned status = 200;
        json_t *body = j->kind->answer(j, op, &status);
        gw_api_answer(j->conn, status, body);
    } else if (j->conn) {
        gw_api_fail_store(j->conn, op->result, j->kind->failed);
    }
    job_free(j);
}

static void submit(api_job *j)
{
    j->job.complete = done;
    j->conn->job = j;
    j->conn->orphan = gw_api_job_orphan;
    int rc = gw_bridge_submit(j->app->d.bridge, &j->job);
    if (rc < 0) { /* refused: answered here, not by done */
        gw_api_fail_store(j->conn, rc == ST_ECLOSED ? ST_EIO : rc, "the store refused the request");
        job_free(j);
    }
}

/* ---- POST /groups/{gid}/messages ----------------------------------------------------------- */

static void message_stored(api_job *j, const st_op *op)
{
    gw_append_stored(j->app, &j->m, op, NULL);
}

static json_t *message_answer(api_job *j, const st_op *op, unsigned *status)
{
    return json_pack("{s:I, s:I, s:b}", "mid", (json_int_t)op->mid, "ts", (json_int_t)op->ts,
                     "duplicate", op->duplicate);
}

static const api_kind post_kind = {"the message was not stored", message_stored, message_answer,
                                   NULL};

void gw_api_post_message(gw_app *a, gw_api_conn *c, const char *gid)
{
    json_t *req = gw_api_body_object(c, "{from, cid, body}");
    if (!req)
        return;
    json_t *from = json_object_get(req, "from"), *cid = json_object_get(req, "cid"),
           *body = json_object_get(req, "body");
    /* The first thing wrong, named: status, code, field, message. */
    unsigned status = 0;
    const char *code = "bad_field", *field = NULL, *why = NULL;
    char uid[PR_MAX_ID + 1], cidv[PR_MAX_ID + 1];
    if (!json_is_string(from) ||
        !gw_api_take_id(json_string_value(from), json_string_length(from), uid))
        status = 400, field = "from", why = "from: an id, 1-64 characters [A-Za-z0-9_.:-]";
    else if (!json_is_string(cid) ||
             !gw_api_take_id(json_string_value(cid), json_string_length(cid), cidv))
        status = 400, field = "cid", why = "cid: an id, 1-64 characters [A-Za-z0-9_.:-]";
    else if (!json_is_string(body))
        status = 400, field = "body", why = "body: a string";
    else if (json_string_length(body) > a->d.cfg->max_body)
        status = 413, code = "too_large", field = "body",
        why = "body: more bytes than the gateway's max_body";
    if (status) {
        json_decref(req);
        gw_api_fail(c, status, code, field, why);
        return;
    }
    api_job *j = job_new(a, c, ST_OP_APPEND, &post_kind, gid, uid);
    if (!j) {
        json_decref(req);
        return;
    }
    pr_body b = {{(const uint8_t *)json_string_value(body), json_string_length(body)}, false};
    int rc = gw_append_op(&j->m, &j->job.op, gw_cstr(uid), gw_cstr(cidv), b, true);
    json_decref(req);
    if (rc != 0) {
        job_free(j);
        gw_api_fail(c, 500, "internal", NULL, "cannot encode the message");
        return;
    }
    submit(j);
}

/* ---- PUT and DELETE /groups/{gid}/members/{uid} ------------------------------------------- */

static void member_added(api_job *j, const st_op *op)
{
    uint64_t ack = op->ack, last = op->last_mid;
    gw_registry_joined(j->app->d.registry, j->m.uid, j->m.gid, false, 0, &ack, &last);
}

static json_t *added_answer(api_job *j, const st_op *op, unsigned *status)
{
    *status = op->joined ? 201 : 200;
    return json_pack("{s:s, s:s, s:I, s:I, s:b, s:b}", "gid", j->m.gid, "uid", j->m.uid, "last_mid",
                     (json_int_t)op->last_mid, "ack", (json_int_t)op->ack, "joined", op->joined,
                     "created", op->created);
}

static void member_removed(api_job *j, const st_op *op)
{
    gw_registry_left(j->app->d.registry, j->m.uid, j->m.gid, NULL);
}

static json_t *removed_answer(api_job *j, const st_op *op, unsigned *status)
{
    return json_pack("{s:s, s:s, s:b}", "gid", j->m.gid, "uid", j->m.uid, "removed", true);
}

static const api_kind add_kind = {"the member was not added", member_added, added_answer, NULL};
static const api_kind remove_kind = {"the member was not removed", member_removed, removed_answer,
                                     NULL};

void gw_api_membership(gw_app *a, gw_api_conn *c, const char *gid, const char *uid, bool add)
{
    api_job *j =
        job_new(a, c, add ? ST_OP_JOIN : ST_OP_LEAVE, add ? &add_kind : &remove_kind, gid, uid);
    if (!j)
        return;
    j->job.op.create = add; /* the API makes the groups it adds members to */
    submit(j);
}

/* ---- GET /users/{uid}/groups ---------------------------------------------------------------- */

static json_t *groups_answer(api_job *j, const st_op *op, unsigned *status)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < st_groups_count(op->groups); i++) {
        const st_user_group *g = st_groups_at(op->groups, i);
        json_t *e = json_pack("{s:s%, s:I, s:I, s:I, s:I}", "gid", g->gid.p, g->gid.n, "first_mid",
                              (json_int_t)g->first_mid, "last_mid", (json_int_t)g->last_mid, "ack",
                              (json_int_t)g->ack, "unread",
                              (json_int_t)g->unread); /* from the read once there is one */
        if (e && g->has_read)
            json_object_set_new(e, "read", json_integer((json_int_t)g->read));
        json_array_append_new(arr, e);
    }
    return json_pack("{s:s, s:o}", "uid", j->m.uid, "groups", arr);
}

static const api_kind groups_kind = {"cannot read the user's groups", NULL, groups_answer, NULL};

void gw_api_user_groups(gw_app *a, gw_api_conn *c, const char *uid)
{
    api_job *j = job_new(a, c, ST_OP_READ_GROUPS, &groups_kind, NULL, uid);
    if (j)
        submit(j);
}

/* ---- GET /groups/{gid}/messages ---------------------------------------------------------------
 */

/* A page's (or changes') messages as JSON: each with its version, cseq and reactions. */
static json_t *messages_json(api_job *j, const st_page *pg)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < st_page_count(pg); i++) {
        const st_msg *m = st_page_at(pg, i);
        pr_message r;
        if (pr_dec_record(j->app->d.dec, m->record, m->record_n, &r) != 0)
            continue; /* cannot happen for what the gateway stored */
        json_t *e = gw_json_message(m->mid, m->ts, &r, !m->recalled);
        if (e && m->ver) /* a later version (docs/PROTOCOL.md, Edits and recalls) */
            json_object_set_new(e, "ver", json_integer((json_int_t)m->ver));
        if (e && m->recalled)
            json_object_set_new(e, "recalled", json_true());
        if (e) /* its latest change (docs/PROTOCOL.md, Changes and reactions) */
            json_object_set_new(e, "cseq", json_integer((json_int_t)m->cseq));
        if (e && m->n_reactions) {
            json_t *rx = json_object();
            for (size_t k = 0; k < m->n_reactions; k++) {
                char key[ST_REACT_KEY_MAX + 1];
                size_t n = m->reactions[k].key.n < ST_REACT_KEY_MAX ? m->reactions[k].key.n
                                                                    : ST_REACT_KEY_MAX;
                memcpy(key, m->reactions[k].key.p, n);
                key[n] = 0;
                json_object_set_new(rx, key, json_integer((json_int_t)m->reactions[k].count));
            }
            json_object_set_new(e, "reactions", rx);
        }
        json_array_append_new(arr, e);
    }
    return arr;
}

static json_t *page_answer(api_job *j, const st_op *op, unsigned *status)
{
    json_t *arr = messages_json(j, op->page);
    json_t *ans = json_pack("{s:s, s:I, s:I, s:I, s:b, s:o}", "gid", j->m.gid, "first_mid",
                            (json_int_t)st_page_first_mid(op->page), "last_mid",
                            (json_int_t)st_page_last_mid(op->page), "last_cseq",
                            (json_int_t)st_page_last_cseq(op->page), "more", st_page_more(op->page),
                            "messages", arr);
    if (ans && st_page_gone_before(op->page)) /* asked from below the horizon */
        json_object_set_new(ans, "gone_before",
                            json_integer((json_int_t)st_page_gone_before(op->page)));
    return ans;
}

static const api_kind page_kind = {"cannot read the group's messages", NULL, page_answer, NULL};

/* The `changes` reply as JSON (docs/API.md): the entries under `msgs`, as the protocol. */
static json_t *changes_answer(api_job *j, const st_op *op, unsigned *status)
{
    const st_page *pg = op->page;
    j->app->figs.changes_pages++;
    json_t *ans = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:o}", "gid", j->m.gid, "after", (json_int_t)op->from,
        "upto", (json_int_t)st_page_upto(pg), "last_cseq", (json_int_t)st_page_last_cseq(pg),
        "first_mid", (json_int_t)st_page_first_mid(pg), "last_mid",
        (json_int_t)st_page_last_mid(pg), "more", st_page_more(pg), "msgs", messages_json(j, pg));
    if (ans && st_page_changes_gone(pg))
        json_object_set_new(ans, "changes_gone_before",
                            json_integer((json_int_t)st_page_changes_gone(pg)));
    return ans;
}

static const api_kind changes_kind = {"cannot read the group's changes", NULL, changes_answer,
                                      NULL};

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

/* limit=N of a page's query into *limit: the default when absent, held to page_max.
 * false: malformed, and answered. */
static bool query_limit(const gw_config *cfg, gw_api_conn *c, struct lws *wsi, uint64_t *limit)
{
    *limit = cfg->page_default;
    int hl = query_u64(wsi, "limit=", limit);
    if (hl < 0 || (hl && *limit == 0)) {
        gw_api_fail(c, 400, "bad_field", "limit", "limit: a whole number >= 1");
        return false;
    }
    if (*limit > cfg->page_max)
        *limit = cfg->page_max;
    return true;
}

/* A read of a page of messages or of changes, of at most limit entries from `from`, made
 * (submit it); NULL: answered. */
static api_job *page_job(gw_app *a, gw_api_conn *c, enum st_op_kind kind, const api_kind *jk,
                         const char *gid, uint64_t from, uint64_t limit)
{
    api_job *j = job_new(a, c, kind, jk, gid, NULL);
    if (j) {
        j->job.op.from = from;
        j->job.op.limit = (size_t)limit;
        j->job.op.max_bytes = a->d.cfg->max_frame;
    }
    return j;
}

void gw_api_get_messages(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *gid)
{
    uint64_t after = 0, before = 0, limit;
    int ha = query_u64(wsi, "after=", &after), hb = query_u64(wsi, "before=", &before);
    if (ha < 0 || hb < 0 || (ha && hb) || (hb && before == 0)) {
        gw_api_fail(c, 400, "bad_field", ha < 0 ? "after" : "before",
                    "give after=MID or before=MID (>= 1), not both (neither: from the start)");
        return;
    }
    if (!query_limit(a->d.cfg, c, wsi, &limit))
        return;
    api_job *j = page_job(a, c, ST_OP_READ_PAGE, &page_kind, gid, hb ? before : after, limit);
    if (!j)
        return;
    j->job.op.dir = hb ? ST_BEFORE : ST_AFTER;
    submit(j);
}

/* GET /groups/{gid}/changes?after=C&limit=N: the changes after cseq C (docs/API.md). */
void gw_api_get_changes(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *gid)
{
    uint64_t after = 0, limit;
    if (query_u64(wsi, "after=", &after) < 0) {
        gw_api_fail(c, 400, "bad_field", "after", "after: a cseq, a whole number (0: all)");
        return;
    }
    if (!query_limit(a->d.cfg, c, wsi, &limit))
        return;
    api_job *j = page_job(a, c, ST_OP_READ_CHANGES, &changes_kind, gid, after, limit);
    if (j)
        submit(j);
}

/* ---- GET /groups/{gid}/members ------------------------------------------------------------------
 */

/* The page came: kept, and its members' last_seen read. */
static bool members_then(api_job *j, st_op *op)
{
    if (op->kind != ST_OP_READ_MEMBERS)
        return false; /* the last_seen came: answer */
    j->page = op->members;
    op->members = NULL;
    size_t n = st_members_count(j->page);
    if (n == 0 || !(j->seen = calloc(n, sizeof(*j->seen))))
        return false; /* answered without last_seen (0) */
    for (size_t i = 0; i < n; i++)
        j->seen[i].uid = st_members_at(j->page, i).uid;
    j->n_seen = n;
    memset(op, 0, sizeof(*op));
    op->kind = ST_OP_READ_SEEN;
    op->seen = j->seen;
    op->n_seen = n;
    int rc = gw_bridge_submit(j->app->d.bridge, &j->job);
    if (rc < 0) {
        op->result = rc;
        return false;
    }
    return true;
}

static json_t *members_answer(api_job *j, const st_op *op, unsigned *status)
{
    gw_app *a = j->app;
    const st_members *page = j->page ? j->page : op->members;
    json_t *arr = json_array();
    uint64_t last = st_members_last_mid(page);
    const char *next = NULL;
    size_t next_n = 0;
    for (size_t i = 0; i < st_members_count(page); i++) {
        st_member m = st_members_at(page, i);
        char uid[PR_MAX_ID + 1];
        if (m.uid.n > PR_MAX_ID)
            continue;
        memcpy(uid, m.uid.p, m.uid.n);
        uid[m.uid.n] = 0;
        /* Online anywhere in the cluster (cluster/gw_presence.c). */
        bool online = a->d.hub ? gw_presence_online(gw_hub_presence(a->d.hub), uid)
                               : gw_registry_sessions_of(a->d.registry, uid) > 0;
        uint64_t seen = m.has_read ? m.read : m.ack; /* unread counts from the read */
        json_t *e =
            json_pack("{s:s, s:I, s:I, s:b, s:I}", "uid", uid, "ack", (json_int_t)m.ack, "unread",
                      (json_int_t)(last > seen ? last - seen : 0), "online", online, "last_seen",
                      (json_int_t)(j->seen && i < j->n_seen ? j->seen[i].ms : 0));
        if (e && m.has_read)
            json_object_set_new(e, "read", json_integer((json_int_t)m.read));
        json_array_append_new(arr, e);
        next = m.uid.p;
        next_n = m.uid.n;
    }
    json_t *o =
        json_pack("{s:s, s:I, s:o}", "gid", j->m.gid, "last_mid", (json_int_t)last, "members", arr);
    /* The cursor of the next page: the last uid of this one. */
    json_object_set_new(o, "next",
                        st_members_more(page) && next ? json_stringn(next, next_n) : json_null());
    return o;
}

static const api_kind members_kind = {"cannot read the group's members", NULL, members_answer,
                                      members_then};

void gw_api_get_members(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *gid)
{
    char after[PR_MAX_ID + 8] = "";
    uint64_t limit = 100;
    int hl = query_u64(wsi, "limit=", &limit);
    if (hl < 0 || (hl && (limit == 0 || limit > ST_MEMBERS_MAX))) {
        gw_api_fail(c, 400, "bad_field", "limit", "limit: a whole number from 1 to 1000");
        return;
    }
    char from[PR_MAX_ID + 1] = "";
    if (lws_get_urlarg_by_name(wsi, "after=", after, sizeof(after)) &&
        !gw_api_take_id(after + 6, strlen(after + 6), from)) {
        gw_api_fail(c, 400, "bad_field", "after", "after: a uid (the `next` of the page before)");
        return;
    }
    api_job *j = job_new(a, c, ST_OP_READ_MEMBERS, &members_kind, gid, from);
    if (!j)
        return;
    j->job.op.limit = (size_t)limit;
    submit(j);
}

/* ---- DELETE /users/{uid} -------------------------------------------------------------------- */

/* uid's sessions in this process end: this thread's now (how many), the other threads'
 * when the hub tells them; the other nodes' when the store announces the sign-out. */
static unsigned sign_out_here(gw_app *a, const char *uid)
{
    unsigned closed = gw_registry_sign_out(a->d.registry, uid);
    if (a->d.hub)
        gw_hub_tell_signout(a->d.hub, a->d.thread, uid);
    return closed;
}

/* The user's sessions in this process end (the other nodes' when the store's sign-out is
 * heard); the groups it left leave the process's rosters (gw_roster_committed). */
static void erased(api_job *j, const st_op *op)
{
    j->closed = sign_out_here(j->app, j->m.uid);
    /* Its tombstones and its reactions gone took a cseq in each group: the online members
     * there pull their changes. */
    for (size_t i = 0; i < st_list_count(op->changed); i++) {
        const st_item *it = st_list_at(op->changed, i);
        char gid[PR_MAX_ID + 1];
        if (gw_id_copy(gid, it->gid.p, it->gid.n))
            gw_deliver_changed(j->app->d.deliver, gid, it->hi);
    }
}

static json_t *erased_answer(api_job *j, const st_op *op, unsigned *status)
{
    json_t *groups = json_array();
    for (size_t i = 0; i < st_list_count(op->list); i++) {
        st_id g = st_list_at(op->list, i)->gid;
        json_array_append_new(groups, json_stringn(g.p, g.n));
    }
    return json_pack("{s:s, s:I, s:o}", "uid", j->m.uid, "erased", (json_int_t)op->applied,
                     "groups", groups);
}

static const api_kind erase_kind = {"the user was not erased", erased, erased_answer, NULL};

/* A person's erasure (docs/API.md): every message the user sent a tombstone, its
 * memberships, cursors and last_seen gone, its sessions ended, on every node. */
void gw_api_erase_user(gw_app *a, gw_api_conn *c, const char *uid)
{
    api_job *j = job_new(a, c, ST_OP_ERASE_USER, &erase_kind, NULL, uid);
    if (!j)
        return;
    if (pr_enc_tombstone(&j->m.record, gw_cstr(uid)) != 0) {
        job_free(j);
        gw_api_fail(c, 500, "internal", NULL, "out of memory");
        return;
    }
    j->job.op.record = j->m.record.data;
    j->job.op.record_n = j->m.record.size;
    submit(j);
}

/* ---- DELETE /groups/{gid} ---------------------------------------------------------------------
 */

/* Its members here are told `left` (the other threads' through the hub, the other nodes'
 * through the store's announcement of the leaves). */
static void group_deleted(api_job *j, const st_op *op)
{
    for (size_t i = 0; i < st_list_count(op->list); i++) {
        const st_item *it = st_list_at(op->list, i);
        char uid[PR_MAX_ID + 1];
        if (gw_id_copy(uid, it->text, it->text_n))
            gw_registry_left_c(j->app->d.registry, uid, j->m.gid, NULL, op->cseq);
    }
}

static json_t *group_deleted_answer(api_job *j, const st_op *op, unsigned *status)
{
    json_t *members = json_array();
    for (size_t i = 0; i < st_list_count(op->list); i++) {
        const st_item *it = st_list_at(op->list, i);
        json_array_append_new(members, json_stringn(it->text, it->text_n));
    }
    return json_pack("{s:s, s:I, s:o}", "gid", j->m.gid, "deleted", (json_int_t)op->applied,
                     "members", members);
}

static const api_kind delete_group_kind = {"the group was not deleted", group_deleted,
                                           group_deleted_answer, NULL};

/* A group and everything in it (docs/API.md). */
void gw_api_delete_group(gw_app *a, gw_api_conn *c, const char *gid)
{
    api_job *j = job_new(a, c, ST_OP_DELETE_GROUP, &delete_group_kind, gid, NULL);
    if (j)
        submit(j);
}

/* ---- DELETE /users/{uid}/sessions --------------------------------------------------------------
 */

static json_t *signed_out_answer(api_job *j, const st_op *op, unsigned *status)
{
    return json_pack("{s:s, s:I}", "uid", j->m.uid, "closed", (json_int_t)j->closed);
}

static const api_kind signout_kind = {"the other nodes were not told", NULL, signed_out_answer,
                                      NULL};

/* The user's sessions here are closed at once with 4003; the other threads' when told,
 * the other nodes' when the store announces it (ST_OP_SIGNOUT, through the change feed). */
void gw_api_close_sessions(gw_app *a, gw_api_conn *c, const char *uid)
{
    api_job *j = job_new(a, c, ST_OP_SIGNOUT, &signout_kind, NULL, uid);
    if (!j)
        return;
    /* Every thread's sessions of the user: this one's now, the others' when told. */
    unsigned all = a->d.hub ? gw_hub_sessions_of(a->d.hub, uid) : 0;
    j->closed = sign_out_here(a, uid);
    if (all > j->closed)
        j->closed = all;
    submit(j);
}

/* ---- GET and PUT /groups/{gid}/retention -------------------------------------------------------
 */

/* A limit as the API shows it: null (the gateway's default), 0 (no limit) or the limit. */
static json_t *limit_json(uint64_t v, uint64_t unit)
{
    return v == 0             ? json_null()
           : v == ST_KEEP_ALL ? json_integer(0)
                              : json_integer((json_int_t)(v / unit));
}

static json_t *retention_json(const st_retain *r)
{
    return json_pack("{s:o, s:o, s:o, s:o}", "messages", limit_json(r->messages, 1), "seconds",
                     limit_json(r->ms, 1000), "until_acked",
                     r->until_acked == ST_ACKED_DEFAULT
                         ? json_null()
                         : json_boolean(r->until_acked == ST_ACKED_ON),
                     "cap", limit_json(r->cap, 1));
}

static json_t *retention_answer(api_job *j, const st_op *op, unsigned *status)
{
    st_retain dflt = gw_retain_defaults(j->app->d.cfg);
    st_retain eff = st_retain_of(&op->retain, &dflt);
    json_t *e = retention_json(&eff);
    if (eff.until_acked != ST_ACKED_ON)
        json_object_set_new(e, "cap", json_null()); /* applies with until_acked only */
    return json_pack("{s:s, s:I, s:I, s:o, s:o}", "gid", j->m.gid, "first_mid",
                     (json_int_t)op->first_mid, "last_mid", (json_int_t)op->last_mid, "own",
                     retention_json(&op->retain), "effective", e);
}

/* After a PUT: the group read back, for the answer. */
static bool retention_then(api_job *j, st_op *op)
{
    if (op->kind != ST_OP_RETAIN)
        return false;
    op->kind = ST_OP_READ_GROUP;
    op->uid = (st_id){NULL, 0};
    int rc = gw_bridge_submit(j->app->d.bridge, &j->job);
    if (rc < 0)
        op->result = rc == ST_ECLOSED ? ST_EIO : rc;
    return rc >= 0;
}

static const api_kind retention_kind = {"the group's retention was not read", NULL,
                                        retention_answer, NULL};
static const api_kind set_retention_kind = {"the group's retention was not set", NULL,
                                            retention_answer, retention_then};

/* One limit of a PUT's body into *out: absent or null (the default: 0), 0 (none) or a
 * whole number from 1 to max, times unit. False (answered 400) when it is none of those. */
static bool limit_of(gw_api_conn *c, json_t *req, const char *name, uint64_t max, uint64_t unit,
                     uint64_t *out)
{
    json_t *v = json_object_get(req, name);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max) {
        char why[128];
        snprintf(why, sizeof(why), "%s: null (the gateway's default), 0 (no limit) or 1 to %llu",
                 name, (unsigned long long)max);
        gw_api_fail(c, 400, "bad_field", name, why);
        return false;
    }
    uint64_t n = (uint64_t)json_integer_value(v);
    *out = n == 0 ? ST_KEEP_ALL : n * unit;
    return true;
}

void gw_api_retention(gw_app *a, gw_api_conn *c, const char *gid, bool set)
{
    st_retain r = {0};
    if (set) {
        json_t *req = gw_api_body_object(c, "{messages?, days?, seconds?, until_acked?, cap?}");
        json_t *acked = json_object_get(req, "until_acked");
        bool ok = req != NULL; /* else answered */
        if (ok && json_object_get(req, "days") && json_object_get(req, "seconds"))
            ok = false, gw_api_fail(c, 400, "bad_field", "seconds", "days or seconds, not both");
        else if (ok && acked && !json_is_boolean(acked) && !json_is_null(acked))
            ok = false, gw_api_fail(c, 400, "bad_field", "until_acked",
                                    "until_acked: true, false or null (the gateway's default)");
        ok = ok && limit_of(c, req, "messages", 1000000000000ull, 1, &r.messages) &&
             limit_of(c, req, "days", 36500, 86400000ull, &r.ms) &&
             limit_of(c, req, "seconds", 3153600000ull, 1000, &r.ms) &&
             limit_of(c, req, "cap", 1000000000000ull, 1, &r.cap);
        if (ok && json_is_boolean(acked))
            r.until_acked = json_is_true(acked) ? ST_ACKED_ON : ST_ACKED_OFF;
        json_decref(req);
        if (!ok)
            return;
    }
    api_job *j = job_new(a, c, set ? ST_OP_RETAIN : ST_OP_READ_GROUP,
                         set ? &set_retention_kind : &retention_kind, gid, NULL);
    if (!j)
        return;
    j->job.op.retain = r;
    submit(j);
}
