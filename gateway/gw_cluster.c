/*
 * The other nodes' changes, applied to this node's online users: messages (pushed in mid
 * order by gw_deliver.c), memberships made and ended, acks moved (what a user's devices
 * here show). And the resync: when announcements may have been lost (the listener
 * reconnected, or the feed's queue overflowed), every online user's groups and every
 * online group's last mid are read again from the store, the truth, and what differs is
 * applied (a hole in a group's pushes is then read and pushed).
 */
#include "gw_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A read made again after the feed lost announcements: a user's groups (uid set) or a
 * group's last mid. */
typedef struct resync_read {
    gw_job job; /* first */
    gw_server *srv;
    char id[PR_MAX_ID + 1];
} resync_read;

struct gw_cluster {
    bool resync_pending; /* a resync read failed: the sweep tries again */
};

gw_cluster *gw_cluster_new(void)
{
    return calloc(1, sizeof(gw_cluster));
}

void gw_cluster_free(gw_cluster *c)
{
    free(c);
}

static void resync_failed(gw_server *srv)
{
    if (!srv->cluster->resync_pending)
        gw_warn("cluster: a read to catch up with other gateways failed; trying again");
    srv->cluster->resync_pending = true;
}

/* The stored memberships of a user here, against what the registry holds. */
static void user_reread(gw_job *j)
{
    resync_read *r = (resync_read *)j;
    gw_registry *reg = r->srv->registry;
    st_op *op = &j->op;
    gw_user *u = gw_user_find(reg, r->id);
    if (u)
        u->rereading = false;
    if (op->result != 0) {
        if (u)
            resync_failed(r->srv);
        free(r);
        return;
    }
    if (u && !u->loading) {
        /* Mark what the store lists; what is left unmarked has ended elsewhere. */
        gw_member *m, *tmp;
        HASH_ITER (hh, u->groups, m, tmp)
            m->seen = false;
        for (size_t i = 0; i < st_groups_count(op->groups); i++) {
            const st_user_group *e = st_groups_at(op->groups, i);
            char gid[PR_MAX_ID + 1];
            if (e->gid.n > PR_MAX_ID)
                continue;
            memcpy(gid, e->gid.p, e->gid.n);
            gid[e->gid.n] = 0;
            gw_member *nm = gw_member_add(reg, u, gid, e->ack, e->last_mid);
            if (nm)
                nm->seen = true;
        }
        /* A join of this gateway still in flight is not in the read yet: keep those. */
        if (!u->joins_inflight)
            HASH_ITER (hh, u->groups, m, tmp)
                if (!m->seen)
                    gw_member_end(reg, u, m->gid, NULL);
    }
    st_groups_free(op->groups);
    free(r);
}

static void group_reread(gw_job *j)
{
    resync_read *r = (resync_read *)j;
    st_op *op = &j->op;
    gw_group *g = gw_group_find(r->srv->registry, r->id, strlen(r->id));
    if (op->result == 0 && g)
        gw_deliver_saw(r->srv, g, op->last_mid);
    else if (op->result != 0 && op->result != ST_ENOGROUP && g)
        resync_failed(r->srv);
    free(r);
}

static void reread(gw_server *srv, const char *id, bool user, gw_job_fn done)
{
    resync_read *r = calloc(1, sizeof(*r));
    if (!r) {
        resync_failed(srv);
        return;
    }
    r->srv = srv;
    strcpy(r->id, id);
    r->job.op = user ? (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(r->id)}
                     : (st_op){.kind = ST_OP_READ_GROUP, .gid = st_id_str(r->id)};
    r->job.complete = done;
    if (gw_bridge_submit(srv->bridge, &r->job) < 0) {
        free(r);
        resync_failed(srv);
    }
}

void gw_cluster_reread_user(gw_server *srv, gw_user *u)
{
    u->stale = false;
    if (u->rereading)
        return;
    u->rereading = true;
    reread(srv, u->uid, true, user_reread);
}

static void resync_user(void *ud, gw_user *u)
{
    if (u->loading)
        u->stale = true;
    else
        gw_cluster_reread_user(ud, u);
}

static void resync_group(void *ud, gw_group *g)
{
    reread(ud, g->gid, false, group_reread);
}

void gw_cluster_resync(gw_server *srv)
{
    srv->cluster->resync_pending = false;
    srv->n.resyncs++;
    uint64_t users, groups, members, lag_total, lag_max;
    gw_registry_figures(srv->registry, &users, &groups, &members, &lag_total, &lag_max);
    /* At the listener's first connection nobody is online yet: nothing worth a line. */
    if (users)
        gw_info("cluster: catching up from the store (the change feed may have missed some): "
                "%" PRIu64 " users and %" PRIu64 " groups online here",
                users, groups);
    gw_registry_each(srv->registry, resync_user, resync_group, srv);
}

void gw_cluster_sweep(gw_server *srv)
{
    if (srv->cluster->resync_pending && st_writable(srv->store))
        gw_cluster_resync(srv);
}

void gw_cluster_change(void *ud, const st_change *ch)
{
    gw_server *srv = ud;
    gw_registry *reg = srv->registry;
    char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
    if (ch->kind == ST_CH_RESYNC) {
        gw_cluster_resync(srv);
        return;
    }
    if (ch->kind == ST_CH_SIGNOUT) {
        if (ch->uid.n <= PR_MAX_ID) {
            memcpy(uid, ch->uid.p, ch->uid.n);
            uid[ch->uid.n] = 0;
            gw_user_sign_out(srv, uid);
        }
        return;
    }
    if (ch->gid.n > PR_MAX_ID || ch->uid.n > PR_MAX_ID)
        return; /* cannot be made through the protocol */
    memcpy(gid, ch->gid.p, ch->gid.n);
    gid[ch->gid.n] = 0;
    memcpy(uid, ch->uid.p, ch->uid.n);
    uid[ch->uid.n] = 0;
    srv->n.feed_applied++;
    if (ch->kind == ST_CH_MSG) {
        gw_fanout(reg, gid, ch->mid, ch->ts, ch->record, ch->record_n, NULL);
        return;
    }
    gw_user *u = gw_user_find(reg, uid);
    if (!u)
        return; /* not online here */
    if (u->loading) {
        u->stale = true; /* the read under way may predate it: read again after */
        return;
    }
    pr_slice gs = {(const uint8_t *)gid, ch->gid.n};
    gw_member *m = gw_member_find(u, gs);
    switch (ch->kind) {
    case ST_CH_JOIN:
        if (!m)
            gw_member_add(reg, u, gid, ch->ack, ch->ack);
        break;
    case ST_CH_LEAVE:
        if (m)
            gw_member_end(reg, u, gid, NULL);
        break;
    case ST_CH_ACK:
        if (m && ch->ack > m->ack)
            m->ack = ch->ack;
        break;
    default: break;
    }
}
