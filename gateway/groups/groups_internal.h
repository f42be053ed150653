/*
 * groups/'s own parts, for its files only. The registry (gw_registry.c) owns users,
 * memberships and groups; gw_deliver.c owns a group's push state (the fields so marked)
 * and the holes; gw_acks.c the coalescer; gw_sync.c the resync's reads and its state.
 */
#ifndef GW_GROUPS_INTERNAL_H
#define GW_GROUPS_INTERNAL_H

#include "gw_groups.h"

#include <ev.h>

struct gw_groups {
    gw_groups_deps deps;
    gw_registry *reg;
    gw_deliver *del;
    gw_acks *acks;
    gw_groups_figs figs; /* each file counts its own */
    bool resync_pending; /* gw_sync.c: a read of the last resync failed, the sweep tries again */
};

/* ---- the registry's entries (gw_registry.c) ----------------------------------------- */

/* One of an online user's groups, with the ack as this thread knows it (the stored one,
 * moved forward by acks not yet persisted). */
typedef struct gw_member {
    char gid[PR_MAX_ID + 1];
    uint64_t ack;
    uint64_t read; /* when has_read (the stored one, moved forward by reads not persisted) */
    bool has_read;
    bool seen;         /* in the store's list, during a resync's comparison (gw_sync.c) */
    uint64_t typed_ms; /* monotonic: the user's last typing in the group told here (0: none) */
    UT_hash_handle hh; /* in gw_user.groups, by gid */
} gw_member;

/* A user with a session here, or one whose groups are being read for a hello. */
struct gw_user {
    char uid[PR_MAX_ID + 1];
    gw_seat *sessions; /* utlist DL through gw_seat.prev/next */
    unsigned n_sessions;
    gw_seat *waiters;        /* seats whose hello waits for the read of its groups */
    bool loading;            /* that read is under way */
    gw_member *groups;       /* by gid */
    unsigned joins_inflight; /* joins submitted, not completed: count towards --max-groups */
    bool stale;              /* another thread or node changed its memberships during the load:
                              * read again */
    bool rereading;          /* such a read is under way (gw_sync.c) */
    bool partial;            /* signed in without the groups of a shard that was away; the
                              * sweep reads them all again (gw_sync.c) */
    uint64_t not_before;     /* Unix seconds: tokens issued at or before it are refused (read
                              * with its groups; moved by a sign-out heard here); 0: none */
    UT_hash_handle hh;       /* in the registry's users, by uid */
};

/* An online member of a group: the entry the fan-out walks. */
typedef struct gw_online {
    gw_user *user;     /* key: the pointer */
    UT_hash_handle hh; /* in gw_group.online */
} gw_online;

typedef struct gw_held gw_held;

/* A group with at least one online member. */
typedef struct gw_group {
    char gid[PR_MAX_ID + 1];
    uint64_t last_mid;  /* the highest mid known committed: completions, announcements,
                         * pages, joins */
    uint64_t first_mid; /* the horizon as known here (retention): reads, pages, joins, the
                         * retention passes */
    uint64_t last_cseq; /* the highest cseq known: reads, joins, pages, changes pushed */
    gw_online *online;
    unsigned n_online;
    UT_hash_handle hh; /* in the registry's groups, by gid */
    /* Pushes in mid order (gw_deliver.c, which alone touches these). */
    uint64_t pushed; /* every mid up to it has gone to the online sessions here */
    gw_held *held;   /* messages ahead of a hole, ascending */
    size_t n_held;
    bool in_holes;       /* last_mid > pushed: in the list of holes */
    bool filling;        /* a read of the hole is under way */
    uint64_t hole_since; /* monotonic ms (0: read it at the next tick) */
    struct gw_group *hole_prev, *hole_next;
} gw_group;

/* ---- between the parts ---------------------------------------------------------------------- */

/* gw_registry.c */
gw_registry *gw_registry_new(gw_groups *g);
void gw_registry_free(gw_registry *reg);
gw_user *gw_user_find(gw_registry *reg, const char *uid);
gw_group *gw_group_find(gw_registry *reg, const char *gid, size_t n);
/* Records a membership (after a committed join) and puts the user online in the group. */
gw_member *gw_member_add(gw_registry *reg, gw_user *u, const char *gid, uint64_t ack,
                         uint64_t last_mid);
/* The member's read moves to the higher of the stored and the pending one (each when it
 * has one). */
void gw_member_read(gw_member *m, uint64_t stored, bool has_stored, uint64_t pending,
                    bool has_pending);
/* A membership ended: removed, and the user's sessions but `except` are told `left`. */
void gw_member_end(gw_registry *reg, gw_user *u, const char *gid, gw_sess *except);
/* Calls user for every user and group for every group here (neither may change them). */
void gw_registry_walk(gw_registry *reg, void (*user)(void *ud, gw_user *u),
                      void (*group)(void *ud, gw_group *g), void *ud);

/* gw_registry.c: the folder the registry belongs to. */
gw_groups *gw_registry_groups(gw_registry *reg);

/* gw_registry.c: is a read of uid's groups for a hello under way, in the process? */
bool gw_registry_loading(gw_registry *reg, const char *uid);

/* gw_sync.c: reads a user's groups again and applies what changed elsewhere meanwhile. */
void gw_sync_user(gw_registry *reg, gw_user *u);
/* Users signed in with part of their groups here (gw_user.partial). */
unsigned gw_registry_n_partial(const gw_registry *reg);
/* u's whole list was read: no longer partial, and its sessions told (GW_WHOLE). */
void gw_registry_whole(gw_registry *reg, gw_user *u);
/* gw_sync.c: once a second, a resync whose reads failed is tried again, and the users
 * signed in with part of their groups are read again once every shard takes writes. */
void gw_sync_sweep(gw_registry *reg);

/* gw_deliver.c */
gw_deliver *gw_deliver_new(gw_groups *g);
gw_groups *gw_deliver_groups(gw_deliver *d); /* its owner (gw_versions.c pushes through it) */
void gw_deliver_free(gw_deliver *d);
/* g's last mid is at least last_mid (a page, a join, a read): pushes what it is missing. */
void gw_deliver_group_saw(gw_deliver *d, gw_group *g, uint64_t last_mid);
/* g came online here (last_mid set) / is going. */
void gw_deliver_group_new(gw_deliver *d, gw_group *g);
void gw_deliver_group_free(gw_deliver *d, gw_group *g);

/* gw_acks.c */
gw_acks *gw_acks_new(gw_groups *g);
void gw_acks_free(gw_acks *a);
/* Remembers uid's ack of gid (the highest wins) until the next flush. */
void gw_acks_add(gw_acks *a, const char *gid, const char *uid, uint64_t mid);
/* ... and uid's read of gid. */
void gw_acks_add_read(gw_acks *a, const char *gid, const char *uid, uint64_t read);
/* Once a second: acks written while their user's groups were being read for a hello are
 * kept visible until that read is over; then they go. */
void gw_acks_sweep(gw_acks *a);

#endif
