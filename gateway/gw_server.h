/*
 * The gateway server: a libwebsockets context serving protocol v1 at /ws over the store.
 * Life cycle: gw_server_new, gw_server_run (returns after SIGINT/SIGTERM and a graceful
 * stop), then st_close on the store (every write in flight completes), gw_server_drain,
 * gw_server_free.
 */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include "gw_config.h"
#include "store.h"

typedef struct gw_server gw_server;

typedef struct gw_hub gw_hub;

/* Binds and listens: service thread `thread` of hub (gw_hub.h, which makes the servers).
 * The server borrows store and hub, and the hub's feed and rate table for its thread. */
int gw_server_new(const gw_config *cfg, st_store *store, gw_hub *hub, unsigned thread,
                  gw_server **out);
/* The port actually bound (useful with --port 0). */
int gw_server_port(const gw_server *srv);
/* Names the node after the port bound (unless --node named it) in logs and figures. */
void gw_server_name(gw_server *srv, int port);
/* Serves until a signal asks it to stop; then closes sessions with 1001, flushes acks
 * and waits (a few seconds at most) for writes in flight. */
void gw_server_run(gw_server *srv);
/* Every server of the process stops gracefully, as on SIGTERM (a thread that could not
 * start). */
void gw_server_stop_all(void);
/* Runs the completions that arrived after the run ended (call after st_close). */
void gw_server_drain(gw_server *srv);
void gw_server_free(gw_server *srv);

#endif
