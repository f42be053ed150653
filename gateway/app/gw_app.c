/* A service thread's app (gw_app.h): what it is made with, and the unread webhook it
 * starts with --webhook-url. */
#include "app_internal.h"

#include <stdlib.h>

void gw_app_free(gw_app *a)
{
    if (!a)
        return;
    gw_unread_recover_free(a->recover);
    gw_unread_free(a->unread);
    gw_webhook_free(a->webhook);
    free(a);
}

gw_app *gw_app_new(const gw_app_deps *deps)
{
    gw_app *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->d = *deps;
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
