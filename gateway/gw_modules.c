/*
 * The gateway's modules, made and freed together, without libwebsockets or an event loop:
 * the server (gw_server.c) adds its context and loop on top, and the fuzz target
 * (tests/fuzz/fuzz_session.c) drives the very same modules without either.
 */
#include "gw_internal.h"

int gw_server_init(gw_server *srv, const gw_config *cfg, st_store *store, void (*wake)(void *ud),
                   void *wake_ud)
{
    srv->cfg = *cfg;
    srv->store = store;
    srv->started_ms = gw_now_ms();
    srv->started_mono_ms = gw_mono_ms();
    pr_limits lim = {.max_frame = cfg->max_frame,
                     .max_body = cfg->max_body,
                     .page_default = cfg->page_default,
                     .page_max = cfg->page_max};
    srv->dec = pr_decoder_new(&lim);
    srv->bridge = gw_bridge_new(store, wake, wake_ud);
    /* Session ids carry the start time and the thread: unique across restarts and threads. */
    srv->sessions = gw_sessions_new(srv, srv->started_ms * GW_THREADS_MAX + srv->thread);
    srv->registry = gw_registry_new(srv);
    srv->deliver = gw_deliver_new(srv);
    srv->cluster = gw_cluster_new();
    srv->acks = gw_acks_new(srv);
    if (!srv->limits) { /* else borrowed: the hub's, shared by the threads */
        srv->limits = gw_limits_new(cfg, srv->started_ms);
        srv->owns_limits = true;
    }
    if (!srv->dec || !srv->bridge || !srv->sessions || !srv->registry || !srv->deliver ||
        !srv->cluster || !srv->acks || !srv->limits)
        return -1;
    return 0;
}

void gw_server_release(gw_server *srv)
{
    gw_registry_free(srv->registry); /* its groups leave gw_deliver's lists */
    gw_deliver_free(srv->deliver);
    gw_cluster_free(srv->cluster);
    gw_acks_free(srv->acks);
    gw_sessions_free(srv->sessions);
    if (srv->owns_limits)
        gw_limits_free(srv->limits);
    gw_bridge_free(srv->bridge);
    pr_decoder_free(srv->dec);
}
