/*
 * Who is online, in which groups: the index the fan-out walks. Only users with a session
 * here are in it, and only the groups they belong to. Membership itself lives in the
 * store; this is a cache of it for the online users, read at a user's first hello here
 * (a store job: the hello and the requests after it wait for it) and kept current by
 * committed joins and leaves.
 */
#include "gw_hub.h"
#include "gw_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

struct gw_registry {
    gw_server *srv;
    gw_user *users;          /* by uid */
    gw_group *groups;        /* by gid: groups with an online member */
    gw_attached_fn attached; /* what hellos waiting for a user are told */
};

gw_registry *gw_registry_new(gw_server *srv)
{
    gw_registry *reg = calloc(1, sizeof(*reg));
    if (reg)
        reg->srv = srv;
    return reg;
}

gw_user *gw_user_find(gw_registry *reg, const char *uid)
{
    gw_user *u = NULL;
    HASH_FIND_STR(reg->users, uid, u);
    return u;
}

gw_group *gw_group_find(gw_registry *reg, const char *gid, size_t n)
{
    gw_group *g = NULL;
    HASH_FIND(hh, reg->groups, gid, n, g);
    return g;
}

gw_member *gw_member_find(gw_user *u, pr_slice gid)
{
    gw_member *m = NULL;
    HASH_FIND(hh, u->groups, gid.p, gid.n, m);
    return m;
}

void gw_group_saw(gw_registry *reg, const char *gid, uint64_t last_mid)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (g)
        gw_deliver_saw(reg->srv, g, last_mid);
}

/* Puts u among gid's online members, creating the group entry if needed. */
static int group_online(gw_registry *reg, gw_user *u, const char *gid, uint64_t last_mid)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g)
            return -1;
        strcpy(g->gid, gid);
        g->last_mid = last_mid;
        HASH_ADD_STR(reg->groups, gid, g);
        gw_deliver_group_new(reg->srv, g);
    } else {
        /* The store's figure may be newer or older than ours; mids only grow. */
        gw_deliver_saw(reg->srv, g, last_mid);
    }
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

static void group_offline(gw_registry *reg, gw_user *u, const char *gid)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
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
        HASH_DEL(reg->groups, g);
        gw_deliver_group_free(reg->srv, g);
        free(g);
    }
}

gw_member *gw_member_add(gw_registry *reg, gw_user *u, const char *gid, uint64_t ack,
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
    if (group_online(reg, u, gid, last_mid) != 0)
        return NULL;
    return m;
}

void gw_member_remove(gw_registry *reg, gw_user *u, const char *gid)
{
    gw_member *m = gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)});
    if (m) {
        HASH_DEL(u->groups, m);
        free(m);
    }
    group_offline(reg, u, gid);
}

unsigned gw_user_sign_out(gw_server *srv, const char *uid)
{
    gw_user *u = gw_user_find(srv->registry, uid);
    unsigned n = 0;
    for (gw_sess *s = u ? u->sessions : NULL; s; s = s->user_next, n++)
        gw_sess_close(s, GW_CLOSE_SIGNED_OUT, "signed out by the application");
    if (n)
        gw_info("user %s signed out by the application: %u sessions closed here", uid, n);
    return n;
}

void gw_member_end(gw_registry *reg, gw_user *u, const char *gid, gw_sess *except)
{
    if (!gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)}))
        return;
    gw_member_remove(reg, u, gid);
    /* The user's other sessions are told: `left` without a rid (docs/PROTOCOL.md). */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_left(&sb, PR_NO_RID, (pr_slice){(const uint8_t *)gid, strlen(gid)}) == 0) {
        gw_sess *s;
        DL_FOREACH2(u->sessions, s, user_next)
        {
            if (s != except)
                gw_out_reply(s, &sb);
        }
    }
    msgpack_sbuffer_destroy(&sb);
}

static void user_free(gw_registry *reg, gw_user *u)
{
    gw_member *m, *tmp;
    HASH_ITER (hh, u->groups, m, tmp) {
        group_offline(reg, u, m->gid);
        HASH_DEL(u->groups, m);
        free(m);
    }
    HASH_DEL(reg->users, u);
    free(u);
}

static void attach(gw_user *u, gw_sess *s)
{
    DL_APPEND2(u->sessions, s, user_prev, user_next);
    u->n_sessions++;
    s->user = u;
    if (s->srv->hub)
        gw_hub_online(s->srv->hub, u->uid, 1);
}

/* The read of a user's groups at its first hello here. */
typedef struct user_load {
    gw_job job; /* first: the completion finds the load from its job */
    gw_registry *reg;
    gw_user *user;
    unsigned tries; /* reads made again because the memberships changed meanwhile */
} user_load;

/* Reads made again at most before the hellos go on (then the re-read after catches up). */
#define LOAD_TRIES 3

/* The user's groups are read (or could not be): sign in every session waiting for them. */
static void loaded(gw_job *j)
{
    user_load *l = (user_load *)j;
    gw_registry *reg = l->reg;
    gw_user *u = l->user;
    st_op *op = &j->op;
    int rc = op->result;
    /* Another thread or node changed the user's memberships while they were read: read
     * again before the waiting hellos go on, so that a join a client saw confirmed there
     * holds here for its first request. */
    if (rc == 0 && u->stale && l->tries < LOAD_TRIES) {
        u->stale = false;
        l->tries++;
        st_groups_free(op->groups);
        *op = (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u->uid)};
        int src = gw_bridge_submit(reg->srv->bridge, &l->job); /* may load at once */
        if (src < 0) {
            op->result = src;
            loaded(j);
        }
        return;
    }
    for (size_t i = 0; rc == 0 && i < st_groups_count(op->groups); i++) {
        const st_user_group *g = st_groups_at(op->groups, i);
        char gid[PR_MAX_ID + 1];
        if (g->gid.n > PR_MAX_ID)
            continue; /* cannot be made through the protocol */
        memcpy(gid, g->gid.p, g->gid.n);
        gid[g->gid.n] = 0;
        /* An ack this gateway took but has not persisted yet is newer than the stored one. */
        gw_server *srv = reg->srv;
        uint64_t ack = g->ack, pending = srv->hub ? gw_hub_acks_pending(srv->hub, gid, u->uid)
                                                  : gw_acks_pending(srv->acks, gid, u->uid);
        if (!gw_member_add(reg, u, gid, pending > ack ? pending : ack, g->last_mid))
            rc = ST_ENOMEM;
    }
    st_groups_free(op->groups);
    free(l);
    u->loading = false;
    while (u->waiters) {
        gw_sess *s = u->waiters;
        DL_DELETE2(u->waiters, s, user_prev, user_next);
        s->loading = NULL;
        if (rc == 0)
            attach(u, s);
        reg->attached(s, rc);
    }
    if (u->n_sessions == 0) {
        user_free(reg, u); /* failed, or every waiter went meanwhile */
        return;
    }
    if (u->stale) /* another gateway changed its memberships while they were read */
        gw_cluster_reread_user(reg->srv, u);
}

int gw_registry_attach(gw_registry *reg, gw_sess *s, const char *uid, gw_attached_fn done)
{
    reg->attached = done;
    gw_user *u = gw_user_find(reg, uid);
    if (u && !u->loading) {
        attach(u, s);
        done(s, 0);
        return 0;
    }
    if (!u) {
        user_load *l = calloc(1, sizeof(*l));
        u = calloc(1, sizeof(*u));
        if (!u || !l) {
            free(u);
            free(l);
            done(s, ST_ENOMEM);
            return 0;
        }
        strcpy(u->uid, uid);
        u->loading = true;
        HASH_ADD_STR(reg->users, uid, u);
        DL_APPEND2(u->waiters, s, user_prev, user_next);
        s->loading = u;
        *l = (user_load){.reg = reg, .user = u};
        l->job.op = (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u->uid)};
        l->job.complete = loaded;
        int rc = gw_bridge_submit(reg->srv->bridge, &l->job); /* may load at once */
        if (rc < 0) {
            l->job.op.result = rc;
            loaded(&l->job);
        }
        return 0;
    }
    /* Another session's hello is reading this user's groups: wait for the same read. */
    DL_APPEND2(u->waiters, s, user_prev, user_next);
    s->loading = u;
    return 0;
}

void gw_registry_detach(gw_registry *reg, gw_sess *s)
{
    if (s->loading) {
        DL_DELETE2(s->loading->waiters, s, user_prev, user_next);
        s->loading = NULL; /* the user stays until its read completes */
        return;
    }
    gw_user *u = s->user;
    if (!u)
        return;
    DL_DELETE2(u->sessions, s, user_prev, user_next);
    s->user = NULL;
    if (s->srv->hub)
        gw_hub_online(s->srv->hub, u->uid, -1);
    if (--u->n_sessions == 0)
        user_free(reg, u);
}

void gw_fanout(gw_registry *reg, const char *gid, uint64_t mid, uint64_t ts, const void *record,
               size_t record_n, gw_sess *except)
{
    size_t n = strlen(gid);
    gw_group *g = gw_group_find(reg, gid, n);
    if (g)
        gw_deliver_msg(reg->srv, g, mid, ts, record, record_n, except);
    else
        gw_deliver_offline(reg->srv, gid, n, mid);
}

void gw_registry_figures(gw_registry *reg, uint64_t *users, uint64_t *groups, uint64_t *members,
                         uint64_t *lag_total, uint64_t *lag_max)
{
    *users = HASH_COUNT(reg->users);
    *groups = HASH_COUNT(reg->groups);
    *members = *lag_total = *lag_max = 0;
    gw_user *u, *ut;
    HASH_ITER (hh, reg->users, u, ut) {
        gw_member *m, *mt;
        HASH_ITER (hh, u->groups, m, mt) {
            gw_group *g = gw_group_find(reg, m->gid, strlen(m->gid));
            uint64_t l = g && g->last_mid > m->ack ? g->last_mid - m->ack : 0;
            (*members)++;
            *lag_total += l;
            if (l > *lag_max)
                *lag_max = l;
        }
    }
}

bool gw_registry_empty(const gw_registry *reg)
{
    return !reg->users && !reg->groups;
}

void gw_registry_free(gw_registry *reg)
{
    if (!reg)
        return;
    gw_user *u, *tmp;
    HASH_ITER (hh, reg->users, u, tmp) {
        u->sessions = u->waiters = NULL;
        user_free(reg, u);
    }
    free(reg);
}

void gw_registry_each(gw_registry *reg, void (*user)(void *ud, gw_user *u),
                      void (*group)(void *ud, gw_group *g), void *ud)
{
    gw_user *u, *ut;
    HASH_ITER (hh, reg->users, u, ut)
        user(ud, u);
    gw_group *g, *gt;
    HASH_ITER (hh, reg->groups, g, gt)
        group(ud, g);
}
