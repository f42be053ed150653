/*
 * The service threads of one gateway process (--threads N). Each thread runs a gw_server of
 * its own: its libwebsockets context, which adopts the connections the process's listener
 * hands it (gw_listen.h), its sessions, registry, acks and loop, all over the one store. Debian's
 * libwebsockets is built with one service thread per context (LWS_MAX_SMP 1), hence a context per
 * thread.
 *
 * The threads meet here as the nodes of a cluster meet in the database, and the same code
 * applies what they tell each other (gw_cluster.c): what one thread's store requests
 * changed (a message stored, a membership made or ended, a sign-out) goes, once committed,
 * into every other thread's feed (gw_feed.h), and so does an ack as soon as a session
 * sends it (a thread's coalescer persists it later; meanwhile the others read it from
 * there, gw_hub_acks_pending); the store's own feed (PostgreSQL: the other nodes'
 * changes) goes to every thread. A user with sessions on two threads is
 * then a user on two nodes, and a group's pushes on each thread keep mid order and fill
 * their holes as they do across nodes (gw_deliver.c).
 *
 * Also kept here: the connection-rate table every thread shares (one limit per source
 * address, whichever thread accepts), and the figures of /stats summed over the threads.
 *
 * Life cycle, from the main thread: gw_hub_new (before st_open: the store's on_change is
 * gw_hub_post), gw_hub_start, gw_hub_run, st_close, gw_hub_finish, gw_hub_free. Running
 * the threads (gw_hub_run.c) is the gw binary's; the rest is also the fuzz target's.
 */
#ifndef GW_HUB_H
#define GW_HUB_H

#include "gw_config.h"
#include "gw_stats.h"
#include "store.h"

#include <stdbool.h>

typedef struct gw_hub gw_hub;
typedef struct gw_server gw_server;
typedef struct gw_limits gw_limits;
typedef struct gw_feed gw_feed;

/* cfg->threads feeds and the shared rate table; NULL when out of memory. */
gw_hub *gw_hub_new(const gw_config *cfg);
/* Frees the feeds and the rate table (after gw_hub_finish). NULL is a no-op. */
void gw_hub_free(gw_hub *h);

/* st_options.on_change: the store's feed thread hands over changes for every thread. */
void gw_hub_post(void *hub, const st_change *ch, size_t n);

/* Makes the servers (gw_server_new), the first on cfg->port, the others on the port it
 * bound. Returns the port, or -1 (what failed is logged; gw_hub_finish frees what was
 * made). */
int gw_hub_start(gw_hub *h, const gw_config *cfg, st_store *store);
/* Runs every server on a thread of its own (the first on the caller's) until a signal
 * stops them; returns once every one has stopped. */
void gw_hub_run(gw_hub *h);
/* After st_close: each server runs the completions that came after its run, then is
 * freed. */
void gw_hub_finish(gw_hub *h);

/* ---- for the servers (service threads) ------------------------------------------------ */

unsigned gw_hub_threads(const gw_hub *h);
/* Server `thread` is made (gw_server_new): wake(srv) wakes its loop from any thread. */
void gw_hub_attach(gw_hub *h, unsigned thread, gw_server *srv, void (*wake)(void *srv));
gw_server *gw_hub_server(gw_hub *h, unsigned thread);
/* Its run returned: it answers no more requests for figures. */
void gw_hub_stopped(gw_hub *h, unsigned thread);
/* A connection accepted for `thread` (gw_listen.c): queued, and the thread woken to adopt
 * it. False when out of memory or the thread has stopped (the caller closes fd). */
bool gw_hub_hand(gw_hub *h, unsigned thread, int fd);
/* Takes up to max of the connections handed to `thread`, oldest first. */
size_t gw_hub_take(gw_hub *h, unsigned thread, int *fds, size_t max);
gw_feed *gw_hub_feed(gw_hub *h, unsigned thread);
gw_limits *gw_hub_limits(gw_hub *h);
/* A store request of `thread` completed (gw_bridge_observe): what it changed goes to the
 * other threads. */
void gw_hub_tell(void *teller, const st_op *op);
/* A session of `thread` acked gid up to mid: the other threads' sessions of uid see it
 * at once, as they would on one thread (its coalescer persists it). */
void gw_hub_tell_ack(gw_hub *h, unsigned thread, const char *gid, const char *uid, uint64_t mid);
/* The application signed uid out on `thread`: the other threads close its sessions now. */
void gw_hub_tell_signout(gw_hub *h, unsigned thread, const char *uid);
/* A session of uid signed in (delta 1) or went (-1), on any thread. */
void gw_hub_online(gw_hub *h, const char *uid, int delta);
/* uid's sessions in this process, over every thread. */
unsigned gw_hub_sessions_of(gw_hub *h, const char *uid);
/* Users with at least one session in this process. */
unsigned gw_hub_users_online(gw_hub *h);
/* The highest ack of (gid, uid) taken by any thread and not yet persisted (0: none): a
 * user who signs in on one thread sees what it acked on another a moment ago. */
uint64_t gw_hub_acks_pending(gw_hub *h, const char *gid, const char *uid);
/* The ud gw_hub_tell wants for `thread`. */
void *gw_hub_teller(gw_hub *h, unsigned thread);
/* Adds the other threads' figures into *all (which holds this thread's): each is asked
 * for them and answers from its loop (gw_hub_serve); one that does not within 100 ms
 * is counted with its last answer. */
void gw_hub_figures(gw_hub *h, unsigned thread, gw_figs *all);
/* From a thread's loop at each wake-up: answers a request for its figures. */
void gw_hub_serve(gw_hub *h, unsigned thread, gw_server *srv);

#endif
