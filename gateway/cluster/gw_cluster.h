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
/* heard(ud, ch) sees every change the store's feed thread posts, once for the process,
 * before the threads' queues get it (the hub's roster and presence), then heard(ud, NULL)
 * at the end of each announcement. */
void gw_feeds_heard(gw_feeds *fs, void (*heard)(void *ud, const st_change *ch), void *ud);

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
/* ... and read gid up to read (the person has seen it). */
void gw_hub_tell_read(gw_hub *h, unsigned thread, const char *gid, const char *uid, uint64_t read);
/* Retention moved gid's horizon to first_mid (app/gw_retain.c, on `thread`): the other
 * threads' registries learn it. */
void gw_hub_tell_horizon(gw_hub *h, unsigned thread, const char *gid, uint64_t first_mid);
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
 * thread and not yet persisted (0: none), and the highest read in *read (when *has_read),
 * so that a user who signs in on one thread sees what it acked on another a moment ago. */
uint64_t gw_hub_acks_pending(void *hub, const char *gid, const char *uid, uint64_t *read,
                             bool *has_read);

/* ---- who is in a group, and where their cursors are (gw_roster.c) ------------------------ */

/*
 * For receipts ("read by 7 of 12") and presence: the members of the groups someone in
 * this process asks about or watches, each with its two cursors, and per group two rank
 * multisets (core/gw_rank.c) that count the cursors at or past a mid in O(log n).
 * Process-wide, under a lock: any service thread asks; the changes come from every
 * thread's commits (gw_hub_tell) and the other nodes' (the store's feed). A roster is
 * read from the store by the first thread that needs it, a page of members at a time;
 * changes that come meanwhile are kept and applied after the read.
 */
typedef struct gw_roster gw_roster;

gw_roster *gw_roster_new(void);
void gw_roster_free(gw_roster *r); /* NULL is a no-op */
/* The hub's (made with it). */
gw_roster *gw_hub_roster(gw_hub *h);

enum { GW_ROSTER_READY, GW_ROSTER_READ, GW_ROSTER_WAIT };
/* Is gid's roster there (READY)? If not: the caller reads it (READ: READ_MEMBERS pages into
 * gw_roster_load_page, then gw_roster_load_end), or another thread does (WAIT: ask again
 * a little later). */
int gw_roster_begin(gw_roster *r, const char *gid);
/* A page of the read (-1: out of memory; end the read with a failure). */
int gw_roster_load_page(gw_roster *r, const char *gid, const st_members *page);
/* The read is over: rc 0 makes the roster ready (the changes kept meanwhile applied);
 * anything else drops it (read again by the next that asks). */
void gw_roster_load_end(gw_roster *r, const char *gid, int rc);

/* A store write of this process committed (the bridge's observer: acks, reads, joins and
 * leaves move the rosters), and a change of another node (gw_feeds_heard). */
void gw_roster_committed(gw_roster *r, const st_op *op);
void gw_roster_change(gw_roster *r, const st_change *ch);

/* The leaves a committed person's erasure or group's deletion made, told to the rosters
 * and to the other threads alike: how many (0 for any other op), and the i-th as a change
 * (ST_CH_LEAVE; borrowed from op; a deletion's with the deletion's cseq). */
static inline size_t gw_op_leaves(const st_op *op)
{
    bool erasure = op->kind == ST_OP_ERASE_USER || op->kind == ST_OP_DELETE_GROUP;
    return erasure && op->result == 0 ? st_list_count(op->list) : 0;
}
static inline st_change gw_op_leave(const st_op *op, size_t i)
{
    const st_item *it = st_list_at(op->list, i);
    if (op->kind == ST_OP_DELETE_GROUP) /* its members left */
        return (st_change){
            .kind = ST_CH_LEAVE, .gid = op->gid, .uid = {it->text, it->text_n}, .cseq = op->cseq};
    return (st_change){.kind = ST_CH_LEAVE, .gid = it->gid, .uid = op->uid}; /* groups it left */
}

typedef struct gw_receipt {
    uint64_t delivered; /* members whose ack (or read, when ahead of it) is at or past mid */
    uint64_t read;      /* ... whose read is (their ack, if they never sent one) */
    uint64_t of;        /* members */
    bool listed;        /* the readers were listed (a group of at most list_max) */
} gw_receipt;
/* Receipts of mid in gid, and each reader (for a group of at most list_max members, when
 * reader is not NULL). false: the roster is not ready. */
bool gw_roster_receipt(gw_roster *r, const char *gid, uint64_t mid, gw_receipt *out,
                       size_t list_max, void (*reader)(void *ud, const char *uid), void *ud);

/* One member's cursors (uid borrowed for the call). */
typedef struct gw_cursor {
    const char *uid;
    uint64_t ack, read; /* read when has_read */
    bool has_read;
} gw_cursor;
/* The cursors that moved since version *since (moved in: *since becomes the roster's
 * version): fn for each, in a group of at most list_max (a larger one: none, only *of
 * and the answer). true: something moved. false also when the roster is not ready. */
bool gw_roster_moves(gw_roster *r, const char *gid, uint64_t *since, size_t list_max,
                     void (*fn)(void *ud, const gw_cursor *c), void *ud, size_t *of);
/* Every member (fn may be NULL), and how many in *n. false: not ready. */
bool gw_roster_members(gw_roster *r, const char *gid, void (*fn)(void *ud, const char *uid),
                       void *ud, size_t *n);
/* Is uid a member of gid's ready roster? */
bool gw_roster_has(gw_roster *r, const char *gid, const char *uid);
/* A session watches gid (delta 1) or no more (-1): a watched roster stays. */
void gw_roster_watch(gw_roster *r, const char *gid, int delta);
/* Rosters nobody watched or asked about for 10 minutes go. */
void gw_roster_sweep(gw_roster *r);
/* Rosters kept (ready or being read). */
size_t gw_roster_count(gw_roster *r);

/* ---- who is online, over the cluster (gw_presence.c) ------------------------------------ */

/*
 * This process's users online (the hub's count of their sessions) and the other nodes'
 * (their signals: store.h), with the changes to who is online anywhere in a ring the
 * service threads read for their subscribed sessions. A node not heard for 6 s is gone:
 * its users go offline (last seen when it was last heard). Process-wide, under a lock.
 */
typedef struct gw_presence gw_presence;
typedef struct gw_presence_figs {
    uint64_t online;     /* users online anywhere (a gauge) */
    uint64_t nodes;      /* other nodes heard (a gauge) */
    uint64_t signals;    /* signals sent */
    uint64_t listings;   /* whole lists of this node's users sent (asked) */
    uint64_t nodes_gone; /* nodes that went quiet: their users went offline */
} gw_presence_figs;

gw_presence *gw_presence_new(void);
void gw_presence_free(gw_presence *p); /* NULL is a no-op */
/* The hub's (made with it). */
gw_presence *gw_hub_presence(gw_hub *h);
/* The store to signal and write last_seen to (NULL: none any more, before it closes). */
void gw_presence_set_store(gw_presence *p, st_store *s);
/* uid came online in this process (its first session) or went (its last). */
void gw_presence_local(gw_presence *p, const char *uid, bool online);
/* Another node's signal (gw_feeds_heard), and the end of its announcement. */
void gw_presence_heard(gw_presence *p, const st_change *ch);
void gw_presence_heard_end(gw_presence *p);
/* Once a second (one thread): the beat, lists asked, nodes gone quiet, signals sent. */
void gw_presence_tick(gw_presence *p);
/* uid is typing in gid: told to the other nodes at once. */
void gw_presence_typing(gw_presence *p, const char *gid, const char *uid);
/* Is uid online anywhere? */
bool gw_presence_online(gw_presence *p, const char *uid);
/* The changes after `since` (a sequence number): fn for each, oldest first; returns the
 * sequence number to ask from next. One far behind misses what the ring no longer holds. */
uint64_t gw_presence_changes(gw_presence *p, uint64_t since,
                             void (*fn)(void *ud, const char *uid, bool online, uint64_t ms),
                             void *ud);
/* The sequence number now (a new subscriber starts there). */
uint64_t gw_presence_seq(gw_presence *p);
void gw_presence_figures(gw_presence *p, gw_presence_figs *out);
/* The store the hub's parts (presence) tell through (NULL before it closes). */
void gw_hub_set_store(gw_hub *h, st_store *s);
/* A session of `thread` is typing in gid: the other threads' sessions are told. */
void gw_hub_tell_typing(gw_hub *h, unsigned thread, const char *gid, const char *uid);

/* ---- a change applied here (gw_apply.c) -------------------------------------------------- */

typedef struct gw_cluster gw_cluster;

/* What gw_apply.c counts (every field a uint64_t). */
typedef struct gw_cluster_figs {
    uint64_t feed_applied;  /* other threads' and nodes' changes applied here */
    uint64_t typing_pushes; /* typing events of theirs pushed to this thread's sessions */
} gw_cluster_figs;

/* Applies changes to reg and its pushes (both borrowed). NULL when out of memory. */
gw_cluster *gw_cluster_new(gw_registry *reg, gw_deliver *del);
void gw_cluster_free(gw_cluster *c);
/* gw_feed_drain's apply (ud: the gw_cluster): one change another thread or node made. */
void gw_cluster_apply(void *cluster, const st_change *ch);
const gw_cluster_figs *gw_cluster_figures(const gw_cluster *c);

#endif
