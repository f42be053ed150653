/* A service thread's app (gw_app.h): what it is made with, and the unread webhook it
 * starts with --webhook-url. */
#include "app_internal.h"

#include <stdlib.h>

void gw_app_free(gw_app *a)
{
    if (!a)
        return;
    gw_watch_free(a);
    if (a->d.loop)
        ev_timer_stop(a->d.loop, &a->tick_timer);
    gw_unread_recover_free(a->recover);
    gw_retain_free(a->retain);
    gw_unread_free(a->unread);
    gw_webhook_free(a->webhook);
    free(a);
}

static void tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    gw_app *a = (gw_app *)((char *)t - offsetof(gw_app, tick_timer));
    gw_presence_tick(gw_hub_presence(a->d.hub));
    gw_roster_sweep(gw_hub_roster(a->d.hub));
}

gw_app *gw_app_new(const gw_app_deps *deps)
{
    gw_app *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->d = *deps;
    ev_init(&a->watch_timer, NULL);
    ev_init(&a->sub_timer, NULL);
    /* The first thread keeps the process's presence beating and its rosters swept. */
    if (deps->loop && deps->hub && deps->thread == 0) {
        ev_timer_init(&a->tick_timer, tick, 1.0, 1.0);
        ev_timer_start(deps->loop, &a->tick_timer);
        /* ... and makes retention's passes. */
        if (!(a->retain = gw_retain_new(a))) {
            gw_app_free(a);
            return NULL;
        }
    }
    if (deps->cfg->webhook_url && deps->loop) {
        a->webhook = gw_webhook_new(a);
        a->unread = a->webhook ? gw_unread_new(a) : NULL;
        /* One thread of each node takes up what no node is telling. */
        if (a->unread && deps->thread == 0)
            a->recover = gw_unread_recover_new(a);
        if (!a->unread || (deps->thread == 0 && !a->recover)) {
            gw_app_free(a);
            return NULL;
        }
    }
    return a;
}

void gw_app_stop(gw_app *a)
{
    a->stopping = true;
}

const gw_app_figs *gw_app_figures(const gw_app *a)
{
    return &a->figs;
}
