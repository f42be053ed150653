/* groups/ made as one (gw_groups.h): the registry, the pushes and the coalescer of one
 * service thread know each other, and the layers above get each from here. */
#include "groups_internal.h"

#include <stdlib.h>

void gw_groups_free(gw_groups *g)
{
    if (!g)
        return;
    gw_registry_free(g->reg); /* its groups leave the lists of holes */
    gw_deliver_free(g->del);
    gw_acks_free(g->acks);
    free(g);
}

gw_groups *gw_groups_new(const gw_groups_deps *deps)
{
    gw_groups *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->deps = *deps;
    g->reg = gw_registry_new(g);
    g->del = gw_deliver_new(g);
    g->acks = gw_acks_new(g);
    if (!g->reg || !g->del || !g->acks) {
        gw_groups_free(g);
        return NULL;
    }
    return g;
}

gw_registry *gw_groups_registry(gw_groups *g)
{
    return g->reg;
}

gw_deliver *gw_groups_deliver(gw_groups *g)
{
    return g->del;
}

gw_acks *gw_groups_acks(gw_groups *g)
{
    return g->acks;
}

void gw_groups_sweep(gw_groups *g)
{
    gw_sync_sweep(g->reg);
    gw_acks_sweep(g->acks);
}

const gw_groups_figs *gw_groups_figures(const gw_groups *g)
{
    return &g->figs;
}
