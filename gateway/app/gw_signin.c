/*
 * Signing a session in: its hello's token checked, its user's groups read (a store job:
 * the hello and the requests after it wait for it; a second device's hello meanwhile
 * waits for the same read, groups/gw_registry.c), then `welcome` with the user's groups
 * and their unread counts. And the `groups` reply, the same list from memory. On a
 * sharded store a sign-in goes on while a shard is away: the welcome lists the other
 * shards' groups and says `partial`, and a `groups` push lists them all once the rest
 * were read (GW_WHOLE).
 */
#include "app_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* One of the user's groups as `welcome` and `groups` list it. */
typedef struct list_enc {
    msgpack_sbuffer *sb;
    int rc;
} list_enc;

/* Unread counts come from the read once the user has sent one for the group, else from
 * the ack (docs/PROTOCOL.md, Receipts), and never count what is below the horizon
 * (Retention). */
static void enc_group(void *ud, const gw_mygroup *m)
{
    list_enc *e = ud;
    uint64_t seen = m->has_read ? m->read : m->ack;
    if (m->first_mid > seen + 1)
        seen = m->first_mid - 1;
    pr_group g = {.gid = gw_cstr(m->gid),
                  .last_mid = m->last_mid,
                  .first_mid = m->first_mid,
                  .last_cseq = m->last_cseq,
                  .ack = m->ack,
                  .unread = m->last_mid > seen ? m->last_mid - seen : 0,
                  .read = m->read,
                  .has_read = m->has_read};
    e->rc = e->rc ? e->rc : pr_enc_group_entry(e->sb, &g);
}

/* What a group list goes out as: the welcome, the reply to a `groups` request (with its
 * rid, or none if the request had none: a reply all the same, under the session's reply
 * budget), or the push of the whole list once it turned whole. */
enum list_kind { LIST_WELCOME, LIST_REPLY, LIST_PUSH };

static void send_groups(gw_app *a, gw_sess *s, uint64_t rid, enum list_kind kind)
{
    app_sess *as = gw_sess_ext(s);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t n = gw_registry_count(&as->seat);
    bool partial = gw_registry_partial(&as->seat);
    int rc;
    if (kind == LIST_WELCOME) {
        const gw_config *cfg = a->d.cfg;
        pr_welcome w = {.uid = gw_cstr(gw_sess_uid(s)),
                        .sid = gw_cstr(gw_sess_name(s)),
                        .ts = gw_now_ms(),
                        .ack_every = cfg->ack_every,
                        .ack_delay_ms = cfg->ack_delay_ms,
                        .max_body = (uint32_t)cfg->max_body,
                        .partial = partial};
        rc = pr_enc_welcome_begin(&sb, rid, &w, n);
    } else {
        rc = pr_enc_groups_begin_p(&sb, kind == LIST_PUSH ? PR_NO_RID : rid, n, partial);
    }
    list_enc e = {&sb, rc};
    if (rc == 0)
        gw_registry_each(a->d.registry, &as->seat, enc_group, &e);
    gw_buf *b = NULL;
    if (e.rc == 0 && kind != LIST_PUSH)
        gw_out_reply(s, &sb);
    else if (e.rc == 0 && (b = gw_buf_from(&sb)))
        gw_out_push(s, GW_PUSH_GROUPS, NULL, 0, b);
    else if (kind != LIST_PUSH)
        gw_sess_error(s, rid, PR_E_INTERNAL, "cannot encode the group list", NO_GID);
    else
        gw_err("session %s: cannot encode the groups push", gw_sess_name(s));
    gw_buf_unref(b);
    msgpack_sbuffer_destroy(&sb);
}

void gw_signin_groups(gw_app *a, gw_sess *s, uint64_t rid)
{
    send_groups(a, s, rid, LIST_REPLY);
}

/* The hello's user is signed in (rc 0), or could not be loaded. */
static void attached(void *ud, gw_seat *seat, int rc)
{
    gw_app *a = ud;
    gw_sess *s = seat->sess;
    app_sess *as = gw_sess_ext(s);
    if (rc == GW_WHOLE) { /* signed in earlier, with part of its groups: now all of them */
        send_groups(a, s, PR_NO_RID, LIST_PUSH);
        return;
    }
    if (rc == GW_REVOKED) {
        /* As a bad token is (docs/PROTOCOL.md, hello): the client must get a new one. */
        gw_sess_set_signin(s, GW_SIGNIN_NONE);
        a->figs.auth_failures++;
        gw_info("session %s: the token of %s is revoked (issued before its sign-out)",
                gw_sess_name(s), gw_sess_identity(s)->uid);
        gw_sess_close(s, 4001, "unauthorized: token revoked (issued before the user's sign-out)");
    } else if (rc != 0) {
        gw_sess_set_signin(s, GW_SIGNIN_NONE);
        gw_err("session %s: cannot load the groups of user %s: %s", gw_sess_name(s),
               gw_sess_identity(s)->uid, st_strerror(rc));
        /* The client may come back: the store is away, not the client's fault. 4013, not
         * WebSocket's 1013 (try again later): libwebsockets 4.1's clients take 1013 for a
         * protocol error. */
        gw_sess_error_free(s, as->hello_rid, gw_route_err_code(rc), gw_route_err_msg(rc), NO_GID);
        gw_sess_close(s, 4013, "try again later: the user's groups cannot be read now");
    } else {
        gw_sess_set_signin(s, GW_SIGNIN_DONE);
        a->figs.sessions_total++;
        gw_dbg("session %s signed in as %s", gw_sess_name(s), gw_sess_uid(s));
        send_groups(a, s, as->hello_rid, LIST_WELCOME);
    }
    gw_reqs_done(s, NULL, false);
}

void gw_signin_hello(gw_app *a, gw_sess *s, const pr_req *r)
{
    if (gw_sess_signin(s) != GW_SIGNIN_NONE) {
        gw_sess_error(s, r->rid, PR_E_BAD_TYPE, "already signed in on this session", NO_GID);
        return;
    }
    const char *why = NULL;
    gw_identity *id = gw_sess_identity(s);
    if (gw_auth_check(a->d.cfg->secret, a->d.cfg->secret_n, r->token, (int64_t)time(NULL), id,
                      &why) != 0) {
        a->figs.auth_failures++;
        char reason[96];
        snprintf(reason, sizeof(reason), "unauthorized: %s", why);
        gw_sess_close(s, 4001, reason);
        return;
    }
    /* Until the user's groups are here, the requests after the hello wait. */
    app_sess *as = gw_sess_ext(s);
    as->hello_rid = r->rid;
    gw_sess_set_signin(s, GW_SIGNIN_LOADING);
    gw_reqs_began(s, NULL, false);
    gw_registry_attach(a->d.registry, &as->seat, s, id->uid, attached, a);
}
