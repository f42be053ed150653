/*
 * The registry kept in step with the store when announcements may have been lost (the
 * feed's listener reconnected, or its queue overflowed: the resync), or when a user's
 * memberships changed elsewhere while they were read for a hello (a reread): every online
 * user's groups and every online group's last mid are read again from the store, the
 * truth, and what differs is applied (a hole in a group's pushes is then read and
 * pushed, gw_deliver.c). A read that fails is tried again by the sweep. And the users
 * signed in with part of their groups (a shard away, gw_registry_partial) are read again
 * by the sweep once every shard takes writes: their sessions are then pushed the whole
 * list (GW_WHOLE).
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
    bool partial; /* a partial user's read by the sweep: a failure waits for the next one */
    char id[PR_MAX_ID + 1];
} resync_read;

static void resync_failed(gw_registry *reg)
{
    gw_groups *g = gw_registry_groups(reg);
    if (!g->resync_pending)
        gw_warn("cluster: a read to catch up with other gateways failed; trying again");
    g->resync_pending = true;
}

/* The stored memberships of u (a whole list), against what the registry holds. */
static void apply_user(gw_registry *reg, gw_user *u, const st_op *op)
{
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
        gw_registry_cseq(reg, gid, e->last_cseq);
    }
    /* A join of this gateway still in flight is not in the read yet: keep those. */
    if (!u->joins_inflight)
        HASH_ITER (hh, u->groups, m, tmp)
            if (!m->seen)
                gw_member_end(reg, u, m->gid, NULL);
}

/* A user's groups read again, whole (a resync, a reread after a hello, or the sweep's
 * read of a partial user). A failed read of the sweep waits for its next second, without
 * a resync of everyone: a shard away is not lost announcements. */
static void user_reread(gw_job *j)
{
    resync_read *r = (resync_read *)j;
    gw_registry *reg = r->reg;
    st_op *op = &j->op;
    gw_user *u = gw_user_find(reg, r->id);
    if (u)
        u->rereading = false;
    if (op->result != 0) {
        if (u && !r->partial)
            resync_failed(reg);
    } else if (u && !u->loading) {
        apply_user(reg, u, op);
        gw_registry_whole(reg, u); /* a whole list: a partial user is whole now */
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

static void reread(gw_registry *reg, const char *id, bool user, gw_job_fn done, bool partial)
{
    gw_registry_groups(reg)->figs.resync_reads++;
    resync_read *r = calloc(1, sizeof(*r));
    if (!r) {
        resync_failed(reg);
        return;
    }
    r->reg = reg;
    r->partial = partial;
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
    reread(reg, u->uid, true, user_reread, false);
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
    reread(ud, g->gid, false, group_reread, false);
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

/* The sweep's re-reads of partial users: at most this many a sweep (a shard back after
 * many sign-ins is not met by all of them at once). */
#define PARTIAL_READS 256

typedef struct partial_walk {
    gw_registry *reg;
    unsigned left;
} partial_walk;

static void partial_user(void *ud, gw_user *u)
{
    partial_walk *w = ud;
    if (!u->partial || u->loading || u->rereading || !w->left)
        return;
    w->left--;
    u->rereading = true;
    reread(w->reg, u->uid, true, user_reread, true);
}

static void no_group(void *ud, gw_group *g)
{
    (void)ud;
    (void)g;
}

void gw_sync_sweep(gw_registry *reg)
{
    gw_groups *g = gw_registry_groups(reg);
    if (g->resync_pending && st_writable(g->deps.store))
        gw_registry_resync(reg);
    if (gw_registry_n_partial(reg)) {
        /* Only once every shard takes writes: until then the read would leave them out. */
        st_stats st;
        st_read_stats(g->deps.store, &st);
        if (st.shards_unwritable == 0) {
            partial_walk w = {reg, PARTIAL_READS};
            gw_registry_walk(reg, partial_user, no_group, &w);
        }
    }
}
