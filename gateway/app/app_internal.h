/*
 * app/'s own parts, for its files only: the app's state (gw_app.c), what a session's
 * requests keep of it (gw_route.c, gw_signin.c), the append op (gw_route.c, used by the
 * API too), the API's answers (gw_api.c, used by gw_api_jobs.c), the webhook.
 */
#ifndef GW_APP_INTERNAL_H
#define GW_APP_INTERNAL_H

#include "gw_app.h"

#include <ev.h>
#include <libwebsockets.h>

typedef struct gw_unread gw_unread;
typedef struct gw_unread_recover gw_unread_recover;
typedef struct gw_webhook gw_webhook;
typedef struct gw_watch gw_watch;
typedef struct gw_retain gw_retain;

struct gw_app {
    gw_app_deps d;
    bool stopping; /* gw_app_stop */
    gw_app_figs figs;
    gw_watch *watches;          /* this thread's sessions' watches and subscriptions (gw_watch.c) */
    ev_timer watch_timer;       /* the receipt pushes */
    ev_timer sub_timer;         /* the presence pushes */
    ev_timer tick_timer;        /* the first thread's: presence's beat, rosters' sweep */
    gw_unread *unread;          /* the unread webhook (NULL: off) */
    gw_unread_recover *recover; /* ... what it takes up from the store (the first thread's) */
    gw_webhook *webhook;
    gw_retain *retain; /* retention's passes (the first thread's; gw_retain.c) */
};

/* gw_retain.c: retention's passes over the store's groups, on the first service thread. */
gw_retain *gw_retain_new(gw_app *a);
/* The defaults of --retain-*, as a pass applies them where a group has no retention of
 * its own (each limit ST_KEEP_ALL when not set). */
st_retain gw_retain_defaults(const gw_config *cfg);
void gw_retain_free(gw_retain *r); /* NULL is a no-op */

/* ---- a session, as its requests see it (gw_route.c, gw_signin.c) ------------------------ */

/* What the app keeps of each session, in the session's room for it (gw_sess_ext). */
typedef struct app_sess {
    gw_seat seat;       /* its user in the registry (groups/) */
    uint64_t hello_rid; /* the rid of the hello whose user is loading */
    gw_watch *watches;  /* its watches and presence subscriptions (gw_watch.c) */
} app_sess;

#define NO_GID ((pr_slice){0})

/* gw_answers.c: what st_* codes mean to a client. */
int gw_route_err_code(int st_rc);
const char *gw_route_err_msg(int st_rc);
/* The answer to a request about a group the session's user is not known here to be in:
 * PR_E_NOT_MEMBER with msg, or PR_E_UNAVAILABLE (and its own message in *msg) while the
 * user was signed in with part of its groups (a shard away: gw_registry_partial). */
int gw_route_not_member(gw_sess *s, const char **msg);
/* gw_answers.c: the C string's slice. */
pr_slice gw_cstr(const char *s);

/* gw_signin.c: a session's hello: the token, then its user's groups (the requests after
 * it wait), then `welcome`. */
void gw_signin_hello(gw_app *a, gw_sess *s, const pr_req *r);
/* gw_signin.c: the `groups` reply, from memory. */
void gw_signin_groups(gw_app *a, gw_sess *s, uint64_t rid);

/* ---- the append op (gw_route.c): one builder for a session's send and the API's POST -- */

/* A write's ids, and the record of a message (the ids the op points at live here). */
typedef struct gw_append {
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1];
    char cid[PR_MAX_ID + 1];
    msgpack_sbuffer record; /* APPEND: `from` and `body`, encoded once */
} gw_append;

void gw_append_init(gw_append *m);
void gw_append_release(gw_append *m);
/* An APPEND of body by `from` (the sender: a session's user, or whom the API names),
 * with the client's cid, to m->gid: the record is encoded once, and op points into m.
 * any_sender: the sender need not be a member (the API). 0, or -1 when out of memory. */
int gw_append_op(gw_append *m, st_op *op, pr_slice from, pr_slice cid, pr_body body,
                 bool any_sender);
/* The APPEND committed (op->result 0): counted; unless a duplicate, pushed to every
 * online session of the group here but `except` (the sender's), and the webhook told. */
void gw_append_stored(gw_app *a, const gw_append *m, const st_op *op, gw_sess *except);

/* ---- the API's answers (gw_answers.c), its ids (gw_api.c), its store jobs (gw_api_jobs.c) - */

/* The answer is body with status (the reference is taken): written when writable. */
void gw_api_answer(gw_api_conn *c, unsigned status, json_t *body);
/* An error: {"error": code, "message": text} and the field it is about, if any. */
void gw_api_fail(gw_api_conn *c, unsigned status, const char *code, const char *field,
                 const char *msg);
/* The HTTP status and error code of a store result; `what` says what was not done. */
void gw_api_fail_store(gw_api_conn *c, int rc, const char *what);
/* The id in [p, p + n) copied into out (PR_MAX_ID + 1 bytes); false if it is not an id. */
bool gw_api_take_id(const char *p, size_t n, char *out);
/* The request's body as a JSON object (the caller owns it), or NULL with a 400 bad_frame
 * answered that says what is wrong: nothing sent, what jansson refused and where
 * (pr_json_why: a \u0000, malformed JSON), or JSON of another kind than an object of
 * `shape` ("{from, cid, body}"). Every API body is read through it. */
json_t *gw_api_body_object(gw_api_conn *c, const char *shape);

/* The requests that need the store, each answered from its completion. */
void gw_api_post_message(gw_app *a, gw_api_conn *c, const char *gid);
void gw_api_get_changes(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *gid);
void gw_api_get_messages(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *gid);
void gw_api_get_members(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *gid);
void gw_api_membership(gw_app *a, gw_api_conn *c, const char *gid, const char *uid, bool add);
void gw_api_user_groups(gw_app *a, gw_api_conn *c, const char *uid);
void gw_api_close_sessions(gw_app *a, gw_api_conn *c, const char *uid);
void gw_api_erase_user(gw_app *a, gw_api_conn *c, const char *uid);
void gw_api_delete_group(gw_app *a, gw_api_conn *c, const char *gid);
/* GET (set false) or PUT (the body: the group's own retention) /groups/{gid}/retention. */
void gw_api_retention(gw_app *a, gw_api_conn *c, const char *gid, bool set);
/* gw_api_conn.orphan of the store jobs here: the connection is gone, the job answers
 * nobody. */
void gw_api_job_orphan(void *job);

/* ---- the unread webhook: who is told (gw_unread.c), the delivery (gw_webhook.c) ------- */

gw_unread *gw_unread_new(gw_app *a);
void gw_unread_free(gw_unread *u); /* NULL is a no-op */
/* This node stored gid's message mid (a session's send or the API's; not a duplicate).
 * u may be NULL (no webhook): nothing happens. */
void gw_unread_stored(gw_unread *u, const char *gid, uint64_t mid);
/* A session of uid acked gid up to ack while the group's last mid is last_mid. Messages
 * are left unread (ack < last_mid): the member is looked at again after the delay. */
void gw_unread_acked(gw_unread *u, const char *gid, const char *uid, uint64_t ack,
                     uint64_t last_mid);

/* Messages lo..hi of gid were not looked at in time (gw_unread_recover.c found them in
 * the store): looked at now, a range at a time; the first range's SWEPT moves the swept
 * mark from mark (what lies between is older than the span read). */
void gw_unread_take_up(gw_unread *u, const char *gid, uint64_t lo, uint64_t hi, uint64_t mark);
/* Looks waiting or under way. */
size_t gw_unread_waiting(const gw_unread *u);

/* gw_unread_recover.c: takes up what no node is telling (ranges not looked at in time,
 * events not taken whose node is gone), on the app's loop. NULL when out of memory. */
gw_unread_recover *gw_unread_recover_new(gw_app *a);
void gw_unread_recover_free(gw_unread_recover *r); /* NULL is a no-op */

/* Starts the delivery to cfg->webhook_url on the app's loop. NULL (logged) on failure. */
gw_webhook *gw_webhook_new(gw_app *a);
/* Stops: a POST under way is abandoned, and what is not delivered is logged as lost. */
void gw_webhook_free(gw_webhook *w);
/* Queues one event (takes the reference): true, or false when it was dropped (the queue
 * full: counted; or no webhook). */
bool gw_webhook_push(gw_webhook *w, json_t *event);
/* Events the queue has room for now. */
size_t gw_webhook_room(const gw_webhook *w);

/* ---- what members see of each other (gw_peers.c, gw_watch.c, gw_typing.c) ------------- */

/* receipts, watch, presence: answered from the group's roster (read first if it must). */
void gw_peers_request(gw_app *a, gw_sess *s, const pr_req *r);
/* The API's GET .../messages/{mid}/receipts (t PR_REQ_RECEIPTS) and GET .../presence
 * (PR_REQ_PRESENCE): the same answers, in JSON (docs/API.md). */
void gw_peers_api(gw_app *a, gw_api_conn *c, enum pr_req_type t, const char *gid, uint64_t mid);
/* A `receipts` of mid into sb (rid PR_NO_RID: a push). 0, a PR_E code, or -1: the roster
 * is not ready. */
int gw_peers_enc_receipt(gw_app *a, const char *gid, uint64_t mid, uint64_t rid,
                         msgpack_sbuffer *sb);
/* s's watch of gid, as r says (no mids: it ends). */
void gw_watch_set(gw_app *a, gw_sess *s, const pr_req *r, const char *gid);
/* s's presence subscription of gid starts (sub) or ends. */
void gw_watch_presence(gw_app *a, gw_sess *s, const char *gid, bool sub);
/* s is closing: its watches and subscriptions end. */
void gw_watch_closing(gw_app *a, gw_sess *s);
/* The thread's app goes: the watches left (their sessions are gone) and the timers. */
void gw_watch_free(gw_app *a);
/* typing: told to the group's other online members here, and on every other thread and
 * node; never stored. */
void gw_typing_request(gw_app *a, gw_sess *s, const pr_req *r);

/* ---- a member's write other than a send (gw_edit.c, gw_react.c) ---------------------- */

/* Whether session s may make request r, a write to a group's message (an edit, a recall, a
 * reaction): it is a member, within the send rate (such a write is charged as a send is),
 * and the store is not past its overload mark. false: r is answered with the error. */
static inline bool gw_write_admitted(gw_app *a, gw_sess *s, const pr_req *r)
{
    app_sess *as = gw_sess_ext(s);
    if (!gw_registry_member(&as->seat, r->gid, NULL)) {
        gw_sess_error(s, r->rid, PR_E_NOT_MEMBER, "not a member of this group", r->gid);
        return false;
    }
    const char *why = NULL;
    uint64_t retry_ms = gw_throttle_send(s, &why);
    if (retry_ms) {
        gw_sess_error_retry(s, r->rid, PR_E_RATE_LIMITED, why, r->gid, retry_ms);
        return false;
    }
    if (st_pending(a->d.store) >= a->d.cfg->store_overload) {
        gw_sess_error(s, r->rid, PR_E_OVERLOADED, "server overloaded: retry later", r->gid);
        return false;
    }
    return true;
}

/* ---- a message's later versions (gw_edit.c) ------------------------------------------- */

/* edit and recall by the message's sender: read, checked, written, replied and pushed. */
void gw_edit_request(gw_app *a, gw_sess *s, const pr_req *r);
/* The API's PUT (edit: c's body {body, ver?}) and DELETE (recall) of a message, by the
 * application: any sender's, no edit window. */
void gw_api_edit(gw_app *a, gw_api_conn *c, const char *gid, uint64_t mid, bool recall);

/* ---- changes and reactions (gw_react.c, gw_route.c) ------------------------------------- */

/* react by a member: written, replied and pushed (docs/PROTOCOL.md). */
void gw_react_request(gw_app *a, gw_sess *s, const pr_req *r);
/* The API's PUT (on) and DELETE of uid's reaction key on gid's message mid. */
void gw_api_react(gw_app *a, gw_api_conn *c, const char *gid, uint64_t mid, const char *uid,
                  const char *key, size_t key_n, bool on);
/* A page or changes entry of a stored message, with its cseq and reactions. */
int gw_enc_entry(msgpack_sbuffer *sb, const st_msg *m);

/* gw_json.c: {mid, from, ts} and, with_body, `body`: a text body as a string; a binary
 * one (or text that is not UTF-8) in base64, with "encoding": "base64". New reference,
 * or NULL when out of memory. The same wherever the gateway speaks JSON: the API's pages
 * and the webhook's events (docs/API.md). */
json_t *gw_json_message(uint64_t mid, uint64_t ts, const pr_message *r, bool with_body);

#endif
