/*
 * gwc_replica: a client's copy of its groups that keeps what it receives and converges
 * (docs/PROTOCOL.md, Changes; docs/CLIENT.md). Per group it holds the messages by mid
 * (version, body or tombstone, reaction counts, the reader's own keys, the cseq of the
 * state held) and the change cursor `cseq`, and applies the server's frames by the client
 * rule of the issue-36 contract:
 *   - a push with a cseq (edited, recalled, reacted) is applied when newer than the held
 *     message's cseq; the cursor moves to it when it is the next one, else (a hole) the
 *     changes after the cursor are pulled; a change to a message not held is pulled too
 *     (its entry carries the whole state) rather than half applied;
 *   - `changed`, a reconnect (welcome) and a group first seen pull `changes` after the
 *     cursor until `more` is false, apply each entry (it replaces the held state when its
 *     cseq is at least the held one: an entry is the message's whole state, so an equal
 *     cseq is the same change, maybe seen before only in part), drop held messages below
 *     `first_mid`, and set the cursor to `upto`;
 *   - `changes_gone_before`: the cursor becomes `last_cseq` and the window held is paged
 *     again from the horizon, before other pages and at a position of its own (a page
 *     already in flight, pushes and the horizon's moves do not cut it short); `no_group`
 *     to `changes`, or `left`: the group is dropped;
 *   - new messages (msg, notify, sent) are paged in after the highest contiguous mid held.
 * The replica only decides; the caller moves its frames: it passes every server frame to
 * gwc_rep_frame and sends what gwc_rep_next_request writes. Single-threaded, like gwc.
 * Frames are read with msgpack directly (not pr_decode_events), so that the replica also
 * reads entries' fields the event decoder does not carry.
 */
#ifndef GW_CLIENT_REPLICA_H
#define GW_CLIENT_REPLICA_H

#include "proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GWC_REP_KEY_MAX 32  /* a reaction key's bytes (ST_REACT_KEY_MAX) */
#define GWC_REP_KEYS_MAX 20 /* distinct keys a message may have (ST_REACT_KEYS_MAX) */

/* Requests of the replica carry rids from here up (the caller's stay below). */
#define GWC_REP_RID_BASE (1ull << 48)

typedef struct gwc_rep gwc_rep;

/* What one catch-up carried (a reconnect, a `changed`, a hole): changes entries and
 * `changes` round trips, against the messages held when it began. */
typedef struct gwc_rep_catchup {
    const char *gid;
    uint64_t entries; /* changes entries received */
    uint64_t rounds;  /* `changes` requests answered */
    uint64_t held;    /* messages held when it began */
    uint64_t bytes;   /* bytes of the `changes` frames */
    bool gone;        /* answered changes_gone_before: the window was paged again */
} gwc_rep_catchup;
typedef void (*gwc_rep_catchup_cb)(void *ud, const gwc_rep_catchup *c);

/* A replica for the user uid (copied); NULL when out of memory. cb (may be NULL) is told
 * of every catch-up once its last `changes` reply is in. */
gwc_rep *gwc_rep_new(const char *uid, gwc_rep_catchup_cb cb, void *ud);
void gwc_rep_free(gwc_rep *r);

/* Applies one server frame (a map or a batch of maps). 0, or GWC_EPROTO for a frame that
 * is not MessagePack (nothing of it applied), GWC_ENOMEM. Kinds the replica does not
 * need are skipped. */
int gwc_rep_frame(gwc_rep *r, const uint8_t *frame, size_t len);
/* The session ended: requests in flight will not be answered. The next welcome catches up. */
void gwc_rep_disconnected(gwc_rep *r);
/* Every group held: pull changes after the cursor and pages after the top, now. */
void gwc_rep_catch_up(gwc_rep *r);
/* Appends to b the next request the replica wants sent (a `changes` or a `pull`) and
 * returns 1, or 0 when it wants none now. now_ms: a monotonic clock, for the retry of a
 * request refused or unanswered. */
int gwc_rep_next_request(gwc_rep *r, msgpack_sbuffer *b, uint64_t now_ms);
/* True when nothing is wanted or in flight in any group. */
bool gwc_rep_idle(const gwc_rep *r);

/* Fault injection (the checker's --inject-skip-change): the next recall of a held
 * message of gid (a push or the reply to its own) is not applied, though the cursor moves
 * past it. gid is copied. */
void gwc_rep_inject_skip(gwc_rep *r, const char *gid);
/* Changes dropped so by now. */
uint64_t gwc_rep_skipped(const gwc_rep *r);

/* Reading the state held. Groups by index 0..n-1 (a dropped group stays, as not held). */
size_t gwc_rep_n_groups(const gwc_rep *r);
/* The gid of group i, NULL when i is out of range or the group was dropped. */
const char *gwc_rep_group(const gwc_rep *r, size_t i);
/* The group's cursor, horizon and highest contiguous mid held; -1 when not held. */
int gwc_rep_group_state(const gwc_rep *r, const char *gid, uint64_t *cursor, uint64_t *first_mid,
                        uint64_t *top);

typedef struct gwc_rep_msg {
    uint64_t mid, ver, cseq, ts;
    bool recalled;
    const char *from;    /* NUL-terminated */
    const uint8_t *body; /* none when recalled */
    size_t body_n;
    bool body_bin;
    size_t n_reactions; /* read each with gwc_rep_reaction */
} gwc_rep_msg;
/* Message mid of gid as held: 0, or -1 when not held. Borrowed until the next call that
 * changes the replica. */
int gwc_rep_get(const gwc_rep *r, const char *gid, uint64_t mid, gwc_rep_msg *out);
/* Its i-th reaction (keys in byte order): the key (NUL-terminated), count, mine. */
int gwc_rep_reaction(const gwc_rep *r, const char *gid, uint64_t mid, size_t i, const char **key,
                     uint64_t *count, bool *mine);
/* The highest mid held in gid (0: none); the number held. */
uint64_t gwc_rep_max_mid(const gwc_rep *r, const char *gid);
uint64_t gwc_rep_n_held(const gwc_rep *r, const char *gid);

#endif
