/*
 * How an answer is said (app_internal.h): what the store's codes mean to a client (a
 * protocol error of a session's request) and to an application (an HTTP status of the
 * API's), and an API connection's answer, with the 400 of a body that is not the JSON
 * object a request takes. Called from the requests' files; calls none of them. (Here, not
 * in gw_api.c, so that the session path's files that answer the API too, as gw_edit.c,
 * link without the API's libwebsockets side: tests/fuzz/fuzz_session.c needs that.)
 */
#include "app_internal.h"

#include <stdio.h>
#include <string.h>

pr_slice gw_cstr(const char *s)
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
    case ST_ENOMSG:
    case ST_EGONE: return PR_E_BAD_FIELD;
    case ST_ESTALE: return PR_E_CONFLICT;
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
    case ST_ENOMSG: return "mid: the group has no message with this mid";
    case ST_EGONE: return "mid: the message was recalled: nothing of it is left to edit";
    case ST_ESTALE: return "ver: the message has another version by now: pull it, then edit that";
    default: return "internal error";
    }
}

void gw_api_answer(gw_api_conn *c, unsigned status, json_t *body)
{
    json_decref(c->answer);
    c->status = status;
    c->answer = body;
    c->answered = true;
    if (c->wsi)
        lws_callback_on_writable(c->wsi);
}

void gw_api_fail(gw_api_conn *c, unsigned status, const char *code, const char *field,
                 const char *msg)
{
    json_t *o = json_pack("{s:s, s:s}", "error", code, "message", msg);
    if (field)
        json_object_set_new(o, "field", json_string(field));
    gw_api_answer(c, status, o);
}

json_t *gw_api_body_object(gw_api_conn *c, const char *shape)
{
    char why[200];
    json_error_t jerr;
    json_t *req = c->body_n ? json_loadb(c->body, c->body_n, 0, &jerr) : NULL;
    if (json_is_object(req))
        return req;
    if (!c->body_n)
        snprintf(why, sizeof(why), "the body is empty: send a JSON object %s", shape);
    else if (!req)
        pr_json_why(&jerr, "the body", why, sizeof(why));
    else
        snprintf(why, sizeof(why), "the body must be a JSON object %s", shape);
    json_decref(req);
    gw_api_fail(c, 400, "bad_frame", NULL, why);
    return NULL;
}

void gw_api_fail_store(gw_api_conn *c, int rc, const char *what)
{
    char msg[160];
    switch (rc) {
    case ST_ENOGROUP:
        snprintf(msg, sizeof(msg), "%s: no such group", what);
        gw_api_fail(c, 404, "no_group", "gid", msg);
        return;
    case ST_ENOTMEMBER:
        snprintf(msg, sizeof(msg), "%s: not a member of this group", what);
        gw_api_fail(c, 404, "not_member", "uid", msg);
        return;
    case ST_ECONFLICT:
        gw_api_fail(c, 409, "bad_field", "cid",
                    "this cid was already used by this sender for another group");
        return;
    case ST_ENOMSG:
    case ST_EGONE:
        snprintf(msg, sizeof(msg), "%s: %s", what, gw_route_err_msg(rc));
        gw_api_fail(c, rc == ST_ENOMSG ? 404 : 410, rc == ST_ENOMSG ? "no_message" : "gone", "mid",
                    msg);
        return;
    case ST_ESTALE:
        snprintf(msg, sizeof(msg), "%s: %s", what, gw_route_err_msg(rc));
        gw_api_fail(c, 409, "conflict", "ver", msg);
        return;
    case ST_EIO:
    case ST_ECLOSED:
        snprintf(msg, sizeof(msg),
                 "%s: the store does not take writes now; retry (a message "
                 "with the same cid is stored once)",
                 what);
        gw_api_fail(c, 503, "unavailable", NULL, msg);
        return;
    default:
        snprintf(msg, sizeof(msg), "%s: %s", what, st_strerror(rc));
        gw_api_fail(c, 500, "internal", NULL, msg);
    }
}
