/*
 * The registry kept in step with the store when announcements may have been lost (the
 * feed's listener reconnected, or its queue overflowed: the resync), or when a user's
 * memberships changed elsewhere while they were read for a hello (a reread): every online
 * user's groups and every online group's last mid are read again from the store, the
 * truth, and what differs is applied (a hole in a group's pushes is then read and
 * pushed, gw_deliver.c). A read that fails is tried again by the sweep.
 */
#include "groups_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A read made again after the feed lost announcements: a user's groups (uid set) or a
 * group's last mid. */
typedef struct resync_read {
    gw_job job; /* first */
    gw_registry *reg;
    char id[PR_MAX_ID + 1];
} resync_read;

static void resync_failed(gw_registry *reg)
{
    gw_groups *g = gw_registry_groups(reg);
    if (!g->resync_pending)
        gw_warn("cluster: a read to catch up with other gateways failed; trying again");
    g->resync_pending = true;
}

/* The stored memberships of a user here, against what the registry holds. */
static void user_reread(gw_job *j)
{
    resync_read *r = (resync_read *)j;
    gw_registry *reg = r->reg;
    st_op *op = &j->op;
    gw_user *u = gw_user_find(reg, r->id);
    if (u)
        u->rereading = false;
    if (op->result != 0) {
        if (u)
            resync_failed(reg);
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
            if (nm) {
                nm->seen = true;
                gw_member_read(nm, e->read, e->has_read, 0, false);
            }
            gw_registry_horizon(reg, gid, e->first_mid);
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
    gw_group *g = gw_group_find(r->reg, r->id, strlen(r->id));
    if (op->result == 0 && g) {
        gw_deliver_group_saw(gw_registry_groups(r->reg)->del, g, op->last_mid);
        gw_registry_horizon(r->reg, r->id, op->first_mid);
    } else if (op->result != 0 && op->result != ST_ENOGROUP && g)
        resync_failed(r->reg);
    free(r);
}

static void reread(gw_registry *reg, const char *id, bool user, gw_job_fn done)
{
    gw_registry_groups(reg)->figs.resync_reads++;
    resync_read *r = calloc(1, sizeof(*r));
    if (!r) {
        resync_failed(reg);
        return;
    }
    r->reg = reg;
    strcpy(r->id, id);
    r->job.op = user ? (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(r->id)}
                     : (st_op){.kind = ST_OP_READ_GROUP, .gid = st_id_str(r->id)};
    r->job.complete = done;
    if (gw_bridge_submit(gw_registry_groups(reg)->deps.bridge, &r->job) < 0) {
        free(r);
        resync_failed(reg);
    }
}

void gw_sync_user(gw_registry *reg, gw_user *u)
{
    u->stale = false;
    if (u->rereading)
        return;
    u->rereading = true;
    reread(reg, u->uid, true, user_reread);
}

static void resync_user(void *ud, gw_user *u)
{
    if (u->loading)
        u->stale = true;
    else
        gw_sync_user(ud, u);
}

static void resync_group(void *ud, gw_group *g)
{
    reread(ud, g->gid, false, group_reread);
}

void gw_registry_resync(gw_registry *reg)
{
    gw_groups *g = gw_registry_groups(reg);
    g->resync_pending = false;
    g->figs.resyncs++;
    uint64_t users, groups, members, lag_total, lag_max;
    gw_registry_figures(reg, &users, &groups, &members, &lag_total, &lag_max);
    /* At the listener's first connection nobody is online yet: nothing worth a line. */
    if (users)
        gw_info("cluster: catching up from the store (the change feed may have missed some): "
                "%" PRIu64 " users and %" PRIu64 " groups online here",
                users, groups);
    gw_registry_walk(reg, resync_user, resync_group, reg);
}

void gw_sync_sweep(gw_registry *reg)
{
    gw_groups *g = gw_registry_groups(reg);
    if (g->resync_pending && st_writable(g->deps.store))
        gw_registry_resync(reg);
}
