/*
 * groups/: who is online here, in which groups, and what they are owed. It owns the
 * registry (every user with a session on this service thread, their memberships with the
 * ack as this thread knows it, and every group with an online member), the pushes of
 * each group in mid order (from this thread's commits and from the feed alike, holes
 * read from the store, `notify` past a limit), the ack coalescer, and keeping the
 * registry in step with the store when announcements were lost (the resync).
 *
 * Membership itself lives in the store: the registry is a cache of it for the online
 * users, read at a user's first hello here and kept current by committed joins and
 * leaves, this thread's and the ones the feed brings.
 *
 * It stands on session/ (it pushes into sessions' queues and closes them), net/ and
 * core/, and must never call cluster/, app/ or server/: what it needs to know of the
 * other service threads (who is online there, the acks they took) comes as hooks given
 * when it is made. Everything here runs on its service thread, but for
 * gw_acks_pending, which any thread may call.
 */
#ifndef GW_GROUPS_H
#define GW_GROUPS_H

#include "gw_session.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;

typedef struct gw_groups gw_groups;
typedef struct gw_registry gw_registry;
typedef struct gw_deliver gw_deliver;
typedef struct gw_acks gw_acks;
typedef struct gw_user gw_user;

/* What groups/ is made with. The hooks (NULL: nothing to tell, or ask) are how it hears
 * of the other service threads: the cluster's hub wires them. */
typedef struct gw_groups_deps {
    const gw_config *cfg; /* borrowed, like the rest */
    st_store *store;
    struct ev_loop *loop; /* the timers' (NULL: no loop, the fuzz target) */
    gw_bridge *bridge;
    void *hooks_ud;
    /* A session of uid signed in here (delta 1) or went (-1). */
    void (*online)(void *ud, const char *uid, int delta);
    /* The highest ack of (gid, uid) taken anywhere in the process and not persisted yet,
     * and the highest read in *read when *has_read (NULL: this thread's coalescer is
     * asked). */
    uint64_t (*pending_ack)(void *ud, const char *gid, const char *uid, uint64_t *read,
                            bool *has_read);
    /* A read of uid's groups for a hello began here (1) or ended (-1); is one under way
     * anywhere in the process (NULL both: this thread's registry is asked)? */
    void (*loading)(void *ud, const char *uid, int delta);
    bool (*is_loading)(void *ud, const char *uid);
} gw_groups_deps;

/* What groups/ counts: every field a uint64_t (server/ adds them up as such). */
typedef struct gw_groups_figs {
    uint64_t pushes;                                     /* messages fanned out (encoded once) */
    uint64_t held, hole_reads, hole_msgs, hole_notifies; /* pushes in mid order */
    uint64_t resyncs;                                    /* the registry read again */
    uint64_t resync_reads; /* ... with these reads (a user's groups, a group's last mid) */
    uint64_t ack_writes, ack_entries; /* ack batches and entries persisted */
    uint64_t version_pushes;          /* edited and recalled pushed to sessions */
    uint64_t react_pushes;            /* reacted pushed to sessions (or coalesced) */
    uint64_t changed_pushes;          /* changed told to sessions */
} gw_groups_figs;

/* The registry, the pushes and the coalescer of one service thread, made together (they
 * know each other). NULL when out of memory. */
gw_groups *gw_groups_new(const gw_groups_deps *deps);
/* After the sessions are gone, while the loop is still there (the timers stop). */
void gw_groups_free(gw_groups *g);
gw_registry *gw_groups_registry(gw_groups *g);
gw_deliver *gw_groups_deliver(gw_groups *g);
gw_acks *gw_groups_acks(gw_groups *g);
const gw_groups_figs *gw_groups_figures(const gw_groups *g);

/* ---- the registry (gw_registry.c) ------------------------------------------------------ */

/* A session's place in the registry: embedded by the layer above in what it keeps of the
 * session (gw_sess_ext). Its fields are the registry's alone. */
typedef struct gw_seat gw_seat;
struct gw_seat {
    gw_sess *sess;
    gw_user *user;        /* signed in as (NULL until the user's groups are read) */
    gw_user *loading;     /* the user whose groups are being read for this seat's hello */
    gw_seat *prev, *next; /* the user's sessions, or its waiters while loading */
};

/* Told when a seat's user is signed in (rc 0), could not be loaded (rc ST_E*), or its
 * token is revoked (GW_REVOKED: the seat is not signed in). And, for every session of a
 * user signed in with part of its groups (gw_registry_partial), GW_WHOLE once the rest
 * were read: the client is to be told the whole list. */
typedef void (*gw_attached_fn)(void *ud, gw_seat *seat, int rc);
#define GW_REVOKED 2
#define GW_WHOLE 3

/* Signs s in as uid in seat: at once when the user is here, else once its groups are
 * read (done runs then, and may also run before this returns). Revocation
 * (docs/API.md): the user's not-before comes with its groups (the same store read), and
 * a session whose token (gw_sess_identity) was issued at or before it, or does not say
 * when it was issued while there is one, is refused. */
void gw_registry_attach(gw_registry *reg, gw_seat *seat, gw_sess *s, const char *uid,
                        gw_attached_fn done, void *ud);
/* Detaches a closing session's seat (or stops its wait); the user goes with its last. */
void gw_registry_detach(gw_registry *reg, gw_seat *seat);

/* Was the seat's user signed in with part of its groups, the groups of a shard that was
 * away left out (a sharded store: store.h, READ_GROUPS' partial_ok)? Until they are read
 * (the sweep tries once every shard takes writes), a group it is not known to be in may
 * be one of them: the requests answer `unavailable`, not `not_member`. */
bool gw_registry_partial(const gw_seat *seat);
/* Is the seat's user a member of gid? Its ack as this thread knows it in *ack (NULL: not
 * wanted). */
bool gw_registry_member(const gw_seat *seat, pr_slice gid, uint64_t *ack);
/* Has the seat's user sent a read for gid (here, or stored)? */
bool gw_registry_has_read(const gw_seat *seat, pr_slice gid);
/* One of a user's groups, as this thread knows it. */
typedef struct gw_mygroup {
    const char *gid;
    uint64_t last_mid;  /* the group's, as known here */
    uint64_t first_mid; /* ... and its horizon: what is below it is gone */
    uint64_t last_cseq; /* ... and its last change, as known here */
    uint64_t ack;
    uint64_t read; /* when has_read: the user has sent a read */
    bool has_read;
} gw_mygroup;
/* The seat's user's groups: how many, and each. */
size_t gw_registry_count(const gw_seat *seat);
void gw_registry_each(gw_registry *reg, const gw_seat *seat,
                      void (*fn)(void *ud, const gw_mygroup *g), void *ud);
/* Groups the seat's user holds or is joining (joins of its sessions in flight count
 * towards --max-groups), and one more join under way. */
unsigned gw_registry_joins(const gw_seat *seat);
void gw_registry_join_began(gw_seat *seat);
/* ... which the store refused at once: it is in flight no more. */
void gw_registry_join_refused(gw_seat *seat);
/* The seat's user acked gid up to mid: capped at the group's last mid (*cap), kept as
 * the member's ack and handed to the coalescer if it moves it. 1 (moved: *gid is the
 * member's own copy of the id), 0 (not beyond the ack), -1 (not a member). */
int gw_registry_ack(gw_registry *reg, gw_seat *seat, pr_slice gid, uint64_t mid,
                    const char **gid_out, uint64_t *cap);
/* The same for a read (the person has seen up to mid): kept as the member's read and
 * handed to the coalescer if it moves it (a first read always does). */
int gw_registry_read(gw_registry *reg, gw_seat *seat, pr_slice gid, uint64_t mid,
                     const char **gid_out, uint64_t *cap);

/* A join of uid completed with result (counted: it was counted towards its user's
 * joins in flight). A committed join makes the membership of the user here. *ack and
 * *last_mid (in: the store's; out: what `joined` says, with what this thread knows
 * beyond the store: acks not persisted, mids completed). */
void gw_registry_joined(gw_registry *reg, const char *uid, const char *gid, bool counted,
                        int result, uint64_t *ack, uint64_t *last_mid);
/* A leave of uid committed (here, by a session or the API): the membership ends, and the
 * user's sessions here but `except` (the one that asked) are told `left`. */
void gw_registry_left(gw_registry *reg, const char *uid, const char *gid, gw_sess *except);
/* The same for a deleted group: `left` carries the deletion's cseq. */
void gw_registry_left_c(gw_registry *reg, const char *uid, const char *gid, gw_sess *except,
                        uint64_t cseq);
/* gid's horizon is at least first_mid (a read, a page, a join, a retention pass): kept
 * for its unread counts while it is online here. Returns the horizon as known here
 * (first_mid itself, at least 1, when the group has nobody online here). */
uint64_t gw_registry_horizon(gw_registry *reg, const char *gid, uint64_t first_mid);
/* gid's last cseq as seen (a load, a join, a page, a change pushed) moves up to cseq;
 * returns the one known here (cseq itself when the group has nobody online here). */
uint64_t gw_registry_cseq(gw_registry *reg, const char *gid, uint64_t cseq);
/* A change another thread or node made (the feed): a join, a leave, an ack or a read of
 * a user online here. */
void gw_registry_change(gw_registry *reg, const st_change *ch);
/* uid is typing in gid: its online members here but uid are told (`typing`, to forget
 * after GW_TYPING_TTL_MS), each session as its outbound budget allows; how many sessions.
 * The time is kept as uid's last typing in gid here (gw_registry_typing_due). */
#define GW_TYPING_TTL_MS 5000
unsigned gw_registry_typing(gw_registry *reg, const char *gid, const char *uid);
/* May the seat's user's typing in gid go now? One per GW_TYPING_EVERY_MS per user and
 * group, whichever of its sessions types: those on this thread, and those on the others
 * and on other nodes once their typing reached this thread. */
#define GW_TYPING_EVERY_MS 2000
bool gw_registry_typing_due(const gw_seat *seat, pr_slice gid, uint64_t now_ms);
/* Closes every session of uid here with 4003 (signed out by the application); how many.
 * Its not-before here moves to now, so a hello meanwhile (no read: the user is here) is
 * held to it too (the store's is the commit's second: nodes' clocks agree within one). */
unsigned gw_registry_sign_out(gw_registry *reg, const char *uid);
/* uid's sessions on this thread. */
unsigned gw_registry_sessions_of(gw_registry *reg, const char *uid);

/* Figures: users and groups online, and how far online members' acks trail. */
void gw_registry_figures(gw_registry *reg, uint64_t *users, uint64_t *groups, uint64_t *members,
                         uint64_t *lag_total, uint64_t *lag_max);
/* True when nothing is left (the fuzz target's check after each input). */
bool gw_registry_empty(const gw_registry *reg);

/* ---- keeping in step with the store (gw_sync.c) ---------------------------------------- */

/* Announcements may have been lost (the feed's listener reconnected, or its queue
 * overflowed): every online user's groups and every online group's last mid are read
 * again from the store, the truth, and what differs is applied. */
void gw_registry_resync(gw_registry *reg);
/* Once a second: a resync whose reads failed is tried again once the store takes writes;
 * acks kept for a sign-in that was under way go once it is over (gw_acks.c). */
void gw_groups_sweep(gw_groups *g);

/* ---- pushes in mid order (gw_deliver.c) ------------------------------------------------ */

/* A committed message of gid (rec NULL: announced without its record, read it): pushed
 * once, in mid order, to every online session of every member here but `except` (the
 * sender's, which gets `sent` instead). */
void gw_fanout(gw_deliver *d, const char *gid, uint64_t mid, uint64_t ts, const void *rec, size_t n,
               gw_sess *except);
/* gid's last mid is at least last_mid (a page showed it): keeps the cap on acks in step
 * with what clients see, and pushes what is missing here. */
void gw_deliver_saw(gw_deliver *d, const char *gid, uint64_t last_mid);
/* Figures: groups with a hole now. */
size_t gw_deliver_holes(const gw_deliver *d);

/* ---- a message's later versions (gw_versions.c) ----------------------------------------- */

/* Version v of gid's message mid (rec: its record; NULL: announced without it, read it
 * first): `edited` or `recalled` to every online session of its members here but
 * `except` (the editor's, which gets the reply). */
void gw_deliver_version(gw_deliver *d, const char *gid, uint64_t mid, const pr_version *v,
                        const void *rec, size_t n, gw_sess *except);
/* A reaction set or cleared (r->duplicate false): `reacted` to every online session of
 * gid's members here but `except` (the reacting one, which got the reply). Past a
 * session's budget: a coalesced `changed` instead (GW_PUSH_REACT). */
void gw_deliver_react(gw_deliver *d, const pr_reacted *r, gw_sess *except);
/* gid's changes moved to last_cseq without pushes of their own (an erasure, a trim):
 * `changed {gid, last_cseq}` to every online session of its members here. */
void gw_deliver_changed(gw_deliver *d, const char *gid, uint64_t last_cseq);

/* ---- acks (gw_acks.c) ------------------------------------------------------------------- */

/* The not yet persisted ack of (gid, uid), or 0: waiting for a flush or being written.
 * Any thread (the tables are under a lock). */
uint64_t gw_acks_pending(gw_acks *a, const char *gid, const char *uid, uint64_t *read,
                         bool *has_read);
/* Hands every remembered ack to the store as one op. */
void gw_acks_flush(gw_acks *a);
/* True while acks wait for a flush. */
bool gw_acks_waiting(const gw_acks *a);
/* The gateway is stopping: a failed batch is dropped, not kept (no next flush). */
void gw_acks_stop(gw_acks *a);

#endif
