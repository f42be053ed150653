/*
 * Who is online, in which groups: the index the fan-out walks. Only users with a session
 * here are in it, and only the groups they belong to. Membership itself lives in the
 * store; this is a cache of it for the online users, filled at login and kept current by
 * committed joins and leaves.
 */
#include "gw_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

gw_user *gw_user_find(gw_server *srv, const char *uid)
{
    gw_user *u = NULL;
    HASH_FIND_STR(srv->users, uid, u);
    return u;
}

gw_group *gw_group_find(gw_server *srv, const char *gid, size_t n)
{
    gw_group *g = NULL;
    HASH_FIND(hh, srv->groups, gid, n, g);
    return g;
}

gw_member *gw_member_find(gw_user *u, pr_slice gid)
{
    gw_member *m = NULL;
    HASH_FIND(hh, u->groups, gid.p, gid.n, m);
    return m;
}

/* Puts u among gid's online members, creating the group entry if needed. */
static int group_online(gw_server *srv, gw_user *u, const char *gid, uint64_t last_mid)
{
    gw_group *g = gw_group_find(srv, gid, strlen(gid));
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g)
            return -1;
        strcpy(g->gid, gid);
        HASH_ADD_STR(srv->groups, gid, g);
    }
    /* The store's figure may be newer or older than ours; mids only grow. */
    if (last_mid > g->last_mid)
        g->last_mid = last_mid;
    gw_online *o = NULL;
    HASH_FIND_PTR(g->online, &u, o);
    if (!o) {
        o = calloc(1, sizeof(*o));
        if (!o)
            return -1;
        o->user = u;
        HASH_ADD_PTR(g->online, user, o);
        g->n_online++;
    }
    return 0;
}

static void group_offline(gw_server *srv, gw_user *u, const char *gid)
{
    gw_group *g = gw_group_find(srv, gid, strlen(gid));
    if (!g)
        return;
    gw_online *o = NULL;
    HASH_FIND_PTR(g->online, &u, o);
    if (o) {
        HASH_DEL(g->online, o);
        free(o);
        g->n_online--;
    }
    if (g->n_online == 0) {
        HASH_DEL(srv->groups, g);
        free(g);
    }
}

gw_member *gw_member_add(gw_server *srv, gw_user *u, const char *gid, uint64_t ack,
                         uint64_t last_mid)
{
    gw_member *m = gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)});
    if (!m) {
        m = calloc(1, sizeof(*m));
        if (!m)
            return NULL;
        strcpy(m->gid, gid);
        m->ack = ack;
        HASH_ADD_STR(u->groups, gid, m);
    } else if (ack > m->ack) {
        m->ack = ack;
    }
    if (group_online(srv, u, gid, last_mid) != 0)
        return NULL;
    return m;
}

void gw_member_remove(gw_server *srv, gw_user *u, const char *gid)
{
    gw_member *m = gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)});
    if (m) {
        HASH_DEL(u->groups, m);
        free(m);
    }
    group_offline(srv, u, gid);
}

typedef struct load_ctx {
    gw_server *srv;
    gw_user *u;
    int rc;
} load_ctx;

static int load_group(void *ud, const st_user_group *g)
{
    load_ctx *l = ud;
    char gid[PR_MAX_ID + 1];
    if (g->gid.n > PR_MAX_ID)
        return 0; /* cannot be created through the protocol */
    memcpy(gid, g->gid.p, g->gid.n);
    gid[g->gid.n] = 0;
    /* An ack this gateway took but has not persisted yet is newer than the stored one. */
    uint64_t ack = g->ack, pending = gw_acks_pending(l->srv, gid, l->u->uid);
    if (pending > ack)
        ack = pending;
    if (!gw_member_add(l->srv, l->u, gid, ack, g->last_mid)) {
        l->rc = ST_ENOMEM;
        return 1;
    }
    return 0;
}

static void user_free(gw_server *srv, gw_user *u)
{
    gw_member *m, *tmp;
    HASH_ITER(hh, u->groups, m, tmp)
    {
        group_offline(srv, u, m->gid);
        HASH_DEL(u->groups, m);
        free(m);
    }
    HASH_DEL(srv->users, u);
    free(u);
}

int gw_user_attach(gw_server *srv, const char *uid, gw_sess *s)
{
    gw_user *u = gw_user_find(srv, uid);
    if (!u) {
        u = calloc(1, sizeof(*u));
        if (!u)
            return ST_ENOMEM;
        strcpy(u->uid, uid);
        HASH_ADD_STR(srv->users, uid, u);
        load_ctx l = {srv, u, 0};
        int rc = st_read_user_groups(srv->store, st_id_str(uid), load_group, &l);
        if (rc == 0)
            rc = l.rc;
        if (rc != 0) {
            user_free(srv, u);
            return rc;
        }
    }
    DL_APPEND2(u->sessions, s, user_prev, user_next);
    u->n_sessions++;
    s->user = u;
    return 0;
}

void gw_user_detach(gw_server *srv, gw_sess *s)
{
    gw_user *u = s->user;
    if (!u)
        return;
    DL_DELETE2(u->sessions, s, user_prev, user_next);
    s->user = NULL;
    if (--u->n_sessions == 0)
        user_free(srv, u);
}

void gw_fanout(gw_server *srv, const char *gid, uint64_t mid, uint64_t ts, const void *record,
               size_t record_n, gw_sess *except)
{
    gw_group *g = gw_group_find(srv, gid, strlen(gid));
    if (!g)
        return;
    if (mid > g->last_mid)
        g->last_mid = mid;
    if (g->n_online == 0 || (g->n_online == 1 && except && except->user &&
                             except->user->n_sessions == 1 && g->online->user == except->user))
        return; /* nobody else to tell */

    /* Encoded once; every session's queue holds a reference to the same bytes. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_slice gs = {(const uint8_t *)gid, strlen(gid)};
    if (pr_enc_msg(&sb, gs, mid, ts, (pr_slice){record, record_n}) != 0) {
        msgpack_sbuffer_destroy(&sb);
        gw_err("fan-out: cannot encode message %s/%lu", gid, (unsigned long)mid);
        return;
    }
    gw_buf *b = gw_buf_from(&sb);
    msgpack_sbuffer_destroy(&sb);
    if (!b)
        return;
    srv->n.pushes++;
    gw_online *o, *tmp;
    HASH_ITER(hh, g->online, o, tmp)
    {
        gw_sess *s;
        DL_FOREACH2(o->user->sessions, s, user_next)
        {
            if (s != except)
                gw_sess_push(s, gid, mid, b);
        }
    }
    gw_buf_unref(b);
}

void gw_registry_free(gw_server *srv)
{
    gw_user *u, *tmp;
    HASH_ITER(hh, srv->users, u, tmp)
    {
        u->sessions = NULL;
        user_free(srv, u);
    }
}
