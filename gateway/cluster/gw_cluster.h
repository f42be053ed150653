/*
 * cluster/: how a service thread hears what the others changed, the other threads of
 * this process and the other nodes over PostgreSQL alike. It owns the change feed's
 * queues (one per service thread, filled by the store's feed thread or by another
 * service thread), the hub where the threads meet (what one thread's commits and acks
 * changed goes into the others' queues; who is online over every thread; the acks each
 * took and has not persisted), and applying a change to a thread's registry and pushes.
 *
 * The threads meet here as the nodes of a cluster meet in the database, and the same
 * code applies what they tell each other (gw_apply.c): a user with sessions on two
 * threads is a user on two nodes, and a group's pushes on each thread keep mid order and
 * fill their holes as they do across nodes (groups/gw_deliver.c).
 *
 * It stands on groups/, session/, net/ and core/, and must never call app/ or server/.
 */
#ifndef GW_CLUSTER_H
#define GW_CLUSTER_H

#include "gw_groups.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the change feed's queues (gw_feed.c) ------------------------------------------------ */

/*
 * One queue per service thread: how the other gateways' changes (store.h, st_change)
 * come from the store's feed thread, and the other threads' from theirs, to the service
 * thread, which drains its queue in order.
 *
 * A queue is bounded (changes and bytes): a service thread that cannot keep up must not
 * let it grow without end, nor hold the database's notification queue (the feed thread
 * always reads). Past the bound everything queued is dropped and a RESYNC takes its
 * place: the thread then reads again from the tables what concerns its users, which
 * costs a few reads instead of unbounded memory (groups/gw_sync.c).
 *
 * Made before the store (whose options name them) and attached to each thread's loop
 * later: what comes before then waits in the queue.
 */
typedef struct gw_feed gw_feed;
typedef struct gw_feeds gw_feeds;

/* n queues, each bounded at 200,000 changes and 64 MiB. NULL when out of memory. */
gw_feeds *gw_feeds_new(unsigned n);
/* After the store is closed (no more posts). NULL is a no-op. */
void gw_feeds_free(gw_feeds *fs);
gw_feed *gw_feeds_at(gw_feeds *fs, unsigned i);
/* st_options.on_change: the store's feed thread hands over changes for every thread. */
void gw_feeds_post(void *feeds, const st_change *ch, size_t n);
/* Every thread's queue but `from`'s. */
void gw_feeds_post_others(gw_feeds *fs, unsigned from, const st_change *ch, size_t n);

/* wake(ud) is called from the posting thread after a post (lws_cancel_service). */
void gw_feed_attach(gw_feed *f, void (*wake)(void *ud), void *ud);
/* Service thread: calls apply for each queued change, in order. The change and what it
 * points to are valid during the call only. */
void gw_feed_drain(gw_feed *f, void (*apply)(void *ud, const st_change *ch), void *ud);
/* True while something waits to be drained (any thread; an atomic read). */
bool gw_feed_pending(gw_feed *f);
/* Figures: changes taken in, dropped past the bound, and times that happened. */
void gw_feed_figures(gw_feed *f, uint64_t *queued, uint64_t *dropped, uint64_t *overflows);

/* ---- the service threads' hub (gw_hub.c) ------------------------------------------------- */

/*
 * What one thread's store requests changed (a message stored, a membership made or
 * ended) goes, once committed, into every other thread's queue (gw_hub_tell, the
 * bridge's observer), and so does an ack as soon as a session sends it (a thread's
 * coalescer persists it later; meanwhile the others read it from there,
 * gw_hub_acks_pending), and a sign-out. Also kept here, under a lock: who is online over
 * every thread (the API's `online` and its sign-out count).
 *
 * Made by the main thread before st_open (the store's on_change is gw_feeds_post on
 * gw_hub_feeds), freed after st_close.
 */
typedef struct gw_hub gw_hub;

/* `threads` queues and the table of who is online; NULL when out of memory. */
gw_hub *gw_hub_new(unsigned threads);
void gw_hub_free(gw_hub *h); /* NULL is a no-op */
gw_feeds *gw_hub_feeds(gw_hub *h);
gw_feed *gw_hub_feed(gw_hub *h, unsigned thread);
/* Thread `thread`'s coalescer (NULL: gone), for gw_hub_acks_pending. */
void gw_hub_attach(gw_hub *h, unsigned thread, gw_acks *acks);
/* The ud gw_hub_tell wants for `thread`. */
void *gw_hub_teller(gw_hub *h, unsigned thread);
/* gw_bridge_observe: a store request of the teller's thread completed; what it changed
 * goes to the other threads. */
void gw_hub_tell(void *teller, const st_op *op);
/* A session of `thread` acked gid up to mid: the other threads' sessions of uid see it
 * at once, as they would on one thread (its coalescer persists it). */
void gw_hub_tell_ack(gw_hub *h, unsigned thread, const char *gid, const char *uid, uint64_t mid);
/* The application signed uid out on `thread`: the other threads close its sessions now. */
void gw_hub_tell_signout(gw_hub *h, unsigned thread, const char *uid);
/* gw_groups_deps.online (ud: the hub): a session of uid signed in (1) or went (-1). */
void gw_hub_online(void *hub, const char *uid, int delta);
/* gw_groups_deps.loading and .is_loading (ud: the hub): a thread began (1) or ended (-1)
 * a read of uid's groups for a hello; is one under way anywhere in the process? */
void gw_hub_loading(void *hub, const char *uid, int delta);
bool gw_hub_is_loading(void *hub, const char *uid);
/* uid's sessions in this process, over every thread. */
unsigned gw_hub_sessions_of(gw_hub *h, const char *uid);
/* Users with at least one session in this process. */
unsigned gw_hub_users_online(gw_hub *h);
/* gw_groups_deps.pending_ack (ud: the hub): the highest ack of (gid, uid) taken by any
 * thread and not yet persisted (0: none), so that a user who signs in on one thread sees
 * what it acked on another a moment ago. */
uint64_t gw_hub_acks_pending(void *hub, const char *gid, const char *uid);

/* ---- a change applied here (gw_apply.c) -------------------------------------------------- */

typedef struct gw_cluster gw_cluster;

/* What gw_apply.c counts (every field a uint64_t). */
typedef struct gw_cluster_figs {
    uint64_t feed_applied; /* other threads' and nodes' changes applied here */
} gw_cluster_figs;

/* Applies changes to reg and its pushes (both borrowed). NULL when out of memory. */
gw_cluster *gw_cluster_new(gw_registry *reg, gw_deliver *del);
void gw_cluster_free(gw_cluster *c);
/* gw_feed_drain's apply (ud: the gw_cluster): one change another thread or node made. */
void gw_cluster_apply(void *cluster, const st_change *ch);
const gw_cluster_figs *gw_cluster_figures(const gw_cluster *c);

#endif
