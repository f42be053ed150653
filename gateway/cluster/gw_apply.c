/*
 * A change another service thread or node made, applied to this thread (gw_cluster.h):
 * a message goes to the pushes, in mid order (groups/gw_deliver.c), a message's later
 * version to its group's sessions (groups/gw_versions.c); a membership made or
 * ended and an ack moved go to the registry, for users online here; a sign-out closes
 * the user's sessions here; a RESYNC (announcements were lost) reads the registry again
 * from the store.
 */
#include "gw_cluster.h"

#include <stdlib.h>
#include <string.h>

struct gw_cluster {
    gw_registry *reg;
    gw_deliver *del;
    gw_cluster_figs figs;
};

gw_cluster *gw_cluster_new(gw_registry *reg, gw_deliver *del)
{
    gw_cluster *c = calloc(1, sizeof(*c));
    if (c) {
        c->reg = reg;
        c->del = del;
    }
    return c;
}

void gw_cluster_free(gw_cluster *c)
{
    free(c);
}

const gw_cluster_figs *gw_cluster_figures(const gw_cluster *c)
{
    return &c->figs;
}

void gw_cluster_apply(void *cluster, const st_change *ch)
{
    gw_cluster *c = cluster;
    if (ch->kind == ST_CH_RESYNC) {
        gw_registry_resync(c->reg);
        return;
    }
    if (ch->kind == ST_CH_SIGNOUT) {
        char uid[PR_MAX_ID + 1];
        if (gw_id_copy(uid, ch->uid.p, ch->uid.n))
            gw_registry_sign_out(c->reg, uid);
        return;
    }
    if (ch->kind == ST_CH_ONLINE || ch->kind == ST_CH_BEAT || ch->kind == ST_CH_ASK ||
        ch->kind == ST_CH_LISTED)
        return; /* the process's presence took them (gw_presence.c) */
    char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
    if (!gw_id_copy(gid, ch->gid.p, ch->gid.n) || !gw_id_copy(uid, ch->uid.p, ch->uid.n))
        return; /* cannot be made through the protocol */
    c->figs.feed_applied++;
    if (ch->kind == ST_CH_TYPING) {
        c->figs.typing_pushes += gw_registry_typing(c->reg, gid, uid);
        return;
    }
    if (ch->kind == ST_CH_MSG) {
        gw_fanout(c->del, gid, ch->mid, ch->ts, ch->record, ch->record_n, NULL);
        return;
    }
    if (ch->kind == ST_CH_HORIZON) {
        gw_registry_horizon(c->reg, gid, ch->mid);
        return;
    }
    if (ch->kind == ST_CH_EDIT) {
        pr_version v = {.ver = ch->ver, .ts = ch->ts, .recalled = ch->recalled, .cseq = ch->cseq};
        gw_deliver_version(c->del, gid, ch->mid, &v, ch->record, ch->record_n, NULL);
        return;
    }
    if (ch->kind == ST_CH_REACT) {
        pr_reacted r = {.gid = {(const uint8_t *)ch->gid.p, ch->gid.n},
                        .mid = ch->mid,
                        .uid = {(const uint8_t *)ch->uid.p, ch->uid.n},
                        .key = {(const uint8_t *)ch->key.p, ch->key.n},
                        .on = ch->on,
                        .count = ch->count,
                        .cseq = ch->cseq};
        gw_deliver_react(c->del, &r, NULL);
        return;
    }
    if (ch->kind == ST_CH_CHANGED) {
        gw_deliver_changed(c->del, gid, ch->cseq);
        return;
    }
    gw_registry_change(c->reg, ch);
}
