/*
 * The change feed's queue: how the other gateways' changes (store.h, st_change) come from
 * the store's feed thread to the service thread. The feed thread copies each change into
 * the queue and wakes the service thread, which drains it in order.
 *
 * The queue is bounded (changes and bytes): a service thread that cannot keep up must
 * not let it grow without end, nor hold the database's notification queue (the feed
 * thread always reads). Past the bound everything queued is dropped and a RESYNC takes
 * its place: the gateway then reads again from the tables what concerns its users, which
 * costs a few reads instead of unbounded memory.
 *
 * Made before the store (whose options name it) and attached to the server later: what
 * comes before then waits in the queue.
 */
#ifndef GW_FEED_H
#define GW_FEED_H

#include "store.h"

typedef struct gw_feed gw_feed;

/* max_changes, max_bytes: the bound (0: defaults, 200,000 changes and 64 MiB). */
gw_feed *gw_feed_new(size_t max_changes, size_t max_bytes);
/* After the store is closed (no more posts). NULL is a no-op. */
void gw_feed_free(gw_feed *f);

/* st_options.on_change: the store's feed thread hands over one announcement. */
void gw_feed_post(void *feed, const st_change *ch, size_t n);

/* wake(ud) is called from the feed thread after a post (lws_cancel_service). */
void gw_feed_attach(gw_feed *f, void (*wake)(void *ud), void *ud);

/* Service thread: calls apply for each queued change, in order. The change and what it
 * points to are valid during the call only. */
void gw_feed_drain(gw_feed *f, void (*apply)(void *ud, const st_change *ch), void *ud);

/* True while something waits to be drained (any thread; an atomic read). */
bool gw_feed_pending(gw_feed *f);

/* Figures: changes taken in, dropped past the bound, and times that happened. */
void gw_feed_figures(gw_feed *f, uint64_t *queued, uint64_t *dropped, uint64_t *overflows);

#endif
