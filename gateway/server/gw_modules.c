/*
 * A service thread's modules, made and freed together and wired to each other, without
 * libwebsockets: the server (gw_server.c) adds its context and loop on top, and the fuzz
 * target (tests/fuzz/fuzz_session.c) drives the very same modules without either.
 *
 * The wiring is where the layers meet: groups/ hears of the other threads through the
 * hub's functions given as its hooks; the sessions hand their requests to app/ through
 * the hooks app/ gives; the bridge shows the hub every completion (gw_bridge_observe).
 */
#include "server_internal.h"

#include <stdlib.h>

int gw_modules_init(gw_modules *m, const gw_modules_deps *d)
{
    m->cfg = *d->cfg;
    m->thread = d->thread;
    m->store = d->store;
    m->loop = d->loop;
    m->hub = d->hub;
    m->started_ms = gw_now_ms();
    m->started_mono_ms = gw_mono_ms();
    const gw_config *cfg = &m->cfg;
    pr_limits lim = {.max_frame = cfg->max_frame,
                     .max_body = cfg->max_body,
                     .page_default = cfg->page_default,
                     .page_max = cfg->page_max};
    m->dec = pr_decoder_new(&lim);
    m->bridge = gw_bridge_new(m->store, d->wake, d->wake_ud);
    if (!m->dec || !m->bridge)
        return -1;
    gw_groups_deps gd = {.cfg = cfg,
                         .store = m->store,
                         .loop = m->loop,
                         .bridge = m->bridge,
                         .hooks_ud = m->hub,
                         .online = m->hub ? gw_hub_online : NULL,
                         .pending_ack = m->hub ? gw_hub_acks_pending : NULL,
                         .loading = m->hub ? gw_hub_loading : NULL,
                         .is_loading = m->hub ? gw_hub_is_loading : NULL};
    if (!(m->groups = gw_groups_new(&gd)))
        return -1;
    gw_registry *reg = gw_groups_registry(m->groups);
    gw_deliver *del = gw_groups_deliver(m->groups);
    gw_app_deps ad = {.cfg = cfg,
                      .store = m->store,
                      .loop = m->loop,
                      .dec = m->dec,
                      .bridge = m->bridge,
                      .registry = reg,
                      .deliver = del,
                      .hub = m->hub,
                      .thread = m->thread,
                      .keys = d->keys};
    if (!(m->app = gw_app_new(&ad)))
        return -1;
    gw_sess_hooks hooks = gw_app_sess_hooks(m->app);
    /* Session ids carry the start time and the thread: unique across restarts and threads. */
    m->sessions = gw_sessions_new(cfg, m->store, m->loop, m->dec,
                                  m->started_ms * GW_THREADS_MAX + m->thread, &hooks);
    m->cluster = gw_cluster_new(reg, del);
    if (!m->sessions || !m->cluster)
        return -1;
    if (m->hub) {
        m->feed = gw_hub_feed(m->hub, m->thread);
        gw_hub_attach(m->hub, m->thread, gw_groups_acks(m->groups));
        gw_bridge_observe(m->bridge, gw_hub_tell, gw_hub_teller(m->hub, m->thread));
    }
    return 0;
}

void gw_modules_release(gw_modules *m)
{
    if (m->hub)
        gw_hub_attach(m->hub, m->thread, NULL); /* its acks go */
    gw_app_free(m->app);
    gw_groups_free(m->groups);
    gw_cluster_free(m->cluster);
    gw_sessions_free(m->sessions);
    gw_bridge_free(m->bridge);
    pr_decoder_free(m->dec);
}

/* ---- for the fuzz target ------------------------------------------------------------------ */

gw_modules *gw_modules_new(const gw_config *cfg, st_store *store, gw_modules_parts *parts)
{
    gw_modules *m = calloc(1, sizeof(*m));
    /* A hub of its own, as a server of one thread has: the rosters and presence that
     * receipts, watches and presence need are the hub's. */
    gw_hub *hub = m ? gw_hub_new(1) : NULL;
    if (!hub) {
        free(m);
        return NULL;
    }
    gw_hub_set_store(hub, store);
    m->own_hub = hub;
    gw_modules_deps d = {.cfg = cfg, .store = store, .hub = hub};
    if (gw_modules_init(m, &d) != 0) {
        gw_modules_free(m);
        return NULL;
    }
    *parts = (gw_modules_parts){&m->cfg, m->sessions, m->bridge, m->groups};
    return m;
}

void gw_modules_free(gw_modules *m)
{
    if (!m)
        return;
    gw_modules_release(m);
    if (m->own_hub) {
        gw_hub_set_store(m->own_hub, NULL);
        gw_hub_free(m->own_hub);
    }
    free(m);
}
