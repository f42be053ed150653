/*
 * server/: the gateway as one process, on top of everything else. It owns the start-up
 * (flags, data folder, token secret, store, gw_main.c), the service threads (each a
 * libwebsockets context on a libev loop of its own, with its modules wired together), the
 * libwebsockets callbacks that hand each event to the module it is for, the once-a-second
 * sweep, the graceful stop, the plain HTTP endpoints (health, figures, demo login, static
 * files, the API's door), and the figures summed over the threads.
 *
 * It may call every folder below it (app/, cluster/, groups/, session/, net/, core/), and
 * nothing below calls it: what they need from it they were given when they were made.
 *
 * Life cycle, from the main thread: gw_process_new (before st_open: the store's on_change
 * is gw_feeds_post on gw_process_feeds), gw_process_start, gw_process_run, st_close,
 * gw_process_finish, gw_process_free.
 */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include "gw_app.h"

typedef struct gw_process gw_process;
typedef struct gw_server gw_server;
typedef struct gw_modules gw_modules;

/* The hub and the connection-rate table of cfg->threads service threads, and the API's
 * keys (--api-key-file). NULL (logged) on failure. */
gw_process *gw_process_new(const gw_config *cfg);
/* After gw_process_finish. NULL is a no-op. */
void gw_process_free(gw_process *p);
/* The change feed's queues, for st_options.change_ud (on_change: gw_feeds_post). */
gw_feeds *gw_process_feeds(gw_process *p);
/* Makes the servers and listens on cfg->listen:cfg->port for all of them. Returns the
 * port bound, or -1 (what failed is logged; gw_process_finish frees what was made). */
int gw_process_start(gw_process *p, const gw_config *cfg, st_store *store);
/* Runs every server on a thread of its own (the first on the caller's) until a signal
 * stops them; returns once every one has stopped. */
void gw_process_run(gw_process *p);
/* Before st_close: what the process's parts had to tell the other nodes goes, and they
 * use the store no more. */
void gw_process_store_closing(gw_process *p);
/* After st_close: each server runs the completions that came after its run, then is
 * freed. */
void gw_process_finish(gw_process *p);
/* Every server of the process stops gracefully, as on SIGTERM (a thread that could not
 * start). */
void gw_server_stop_all(void);

/* ---- one service thread's modules without libwebsockets: the fuzz target -------------------- */

/* The modules' handles, for their faces' functions. */
typedef struct gw_modules_parts {
    const gw_config *cfg; /* the copy every module reads */
    gw_sessions *sessions;
    gw_bridge *bridge;
    gw_groups *groups;
} gw_modules_parts;

/* cfg copied; over store; no loop, no other threads (a hub of one thread, its own), no
 * API; the bridge is waited on (gw_bridge_wait), not woken. Fills *parts. NULL when out
 * of memory. */
gw_modules *gw_modules_new(const gw_config *cfg, st_store *store, gw_modules_parts *parts);
void gw_modules_free(gw_modules *m);

#endif
