/*
 * session/: one WebSocket client, from its handshake to its close. It owns a thread's
 * sessions and their life (the hello deadline, pings, hang-ups, slow consumers that stay
 * slow), receiving (a message in pieces, the frame limit, the JSON form), the order a
 * session's requests take effect in, the outbound queue (replies, shared pushes, batch
 * frames, `notify` for a slow consumer, the close), the error budget, the per-session
 * rate limits, pausing reading for the reasons each part sets, and the token check.
 *
 * It stands on net/ and core/, and must never call groups/, cluster/, app/ or server/.
 * What a request does is the layer above's: it registers gw_sess_hooks when it makes the
 * sessions, and keeps what it holds of each session in the room the session keeps for it
 * (gw_sess_ext).
 *
 * Everything here runs on the session's service thread.
 */
#ifndef GW_SESSION_H
#define GW_SESSION_H

#include "gw_net.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct lws;

/* The subprotocol of JSON text frames (proto.h, "The JSON form"). */
#define GW_PROTO_JSON "gw.v1.json"

/* The close code of sessions the application signs out (its API: docs/API.md). */
#define GW_CLOSE_SIGNED_OUT 4003

/* ---- tokens (gw_auth.c): an HS256 JWT signed with the server's secret (libjwt) -------- */

#define GW_AUTH_MAX_GROUPS 256  /* entries of a `groups` claim */
#define GW_AUTH_IAT_SKEW 60     /* seconds an `iat` may be ahead of this clock */
#define GW_HELLO_TOKEN_MAX 8192 /* bytes of a token: a longer one is refused unread */

/* What a valid token says. Owned by the caller; free with gw_identity_release. */
typedef struct gw_identity {
    char uid[PR_MAX_ID + 1];
    int64_t exp;   /* Unix seconds */
    int64_t iat;   /* Unix seconds: when it was issued; 0 when it does not say (then a
                    * user's not-before refuses it: groups/, gw_registry_attach) */
    char **groups; /* the `groups` claim: the only groups this user may join; NULL = any */
    size_t n_groups;
} gw_identity;

/*
 * Verifies token against secret at time now (Unix seconds): the algorithm must be HS256
 * (none and every other algorithm are refused), the signature must match, `sub` must be a
 * valid id, `exp` must be present and in the future, `iat`, if present, a positive number
 * at most GW_AUTH_IAT_SKEW ahead of now,
 * and `groups`, if present, an array of valid ids. Returns 0 and fills *id, or -1 with a short
 * reason in why (never the token).
 */
int gw_auth_check(const void *secret, size_t secret_n, pr_slice token, int64_t now, gw_identity *id,
                  const char **why);
void gw_identity_release(gw_identity *id);

/* Mints an HS256 token for uid expiring at exp, issued (iat) now (demo login). *out is
 * malloc'd. 0 or -1. */
int gw_auth_mint(const void *secret, size_t secret_n, const char *uid, int64_t exp, char **out);

/* True if the identity may join gid (no groups claim, or gid listed in it). */
int gw_identity_allows(const gw_identity *id, pr_slice gid);

/* ---- the sessions of a service thread (gw_sess.c) --------------------------------------- */

typedef struct gw_sessions gw_sessions;
typedef struct gw_sess gw_sess;

/* What the layer above does with sessions: registered when the sessions are made. */
typedef struct gw_sess_hooks {
    void *ud;
    /* A request's turn has come: r is decoded, and borrowed for the call. The layer
     * answers it (gw_out_reply, gw_sess_error) or starts a store job for it
     * (gw_reqs_began). Only a hello comes before the session is signed in. */
    void (*request)(void *ud, gw_sess *s, const pr_req *r);
    /* The session is going: what the layer holds of it must go (its requests in flight
     * have been detached already). */
    void (*closing)(void *ud, gw_sess *s);
    /* Bytes each session keeps for the layer (gw_sess_ext), zeroed when it is made. */
    size_t ext_size;
} gw_sess_hooks;

/* The figures sessions count: every field a uint64_t (server/ adds them up as such). */
typedef struct gw_sess_figs {
    uint64_t connections, connections_peak;
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    uint64_t deliveries, notifies, slow_switches;
    uint64_t requests_waited;       /* requests that waited for the ones before them */
    uint64_t errors[1 - PR_E_LAST]; /* `err` replies, by -PR_E* code */
    uint64_t closes_1008, closes_1009, closes_4001, closes_slow, closes_4013;
    uint64_t rate_sends_refused, rate_bytes_refused, rate_byte_pauses;
    /* Pushes past the outbound budget: typing dropped, presence and watch pushes put off
     * to their next period, sessions closed for versions they did not read. */
    uint64_t budget_typing_dropped, budget_presence_deferred, budget_watch_deferred;
    uint64_t budget_version_closes;
    uint64_t budget_react_coalesced; /* reacted pushes past it: a `changed` instead */
    uint64_t changed_sent;           /* `changed` messages sent */
    uint64_t rate_typing_dropped;    /* typing over the session's rate (gw_throttle_typing) */
} gw_sess_figs;

/* Sessions over store, decoding with dec (both borrowed), their timers on loop (NULL: no
 * loop, the fuzz target: rate pauses last until the input ends). Session ids carry
 * boot_id, so they differ across restarts and threads. */
gw_sessions *gw_sessions_new(const gw_config *cfg, st_store *store, struct ev_loop *loop,
                             pr_decoder *dec, uint64_t boot_id, const gw_sess_hooks *hooks);
/* After every session is freed (libwebsockets' CLOSED frees them). NULL is a no-op. */
void gw_sessions_free(gw_sessions *all);
unsigned gw_sessions_count(const gw_sessions *all);
/* Sessions past hello. */
unsigned gw_sessions_authenticated(const gw_sessions *all);
/* True while some session still has something to write. */
bool gw_sessions_writing(const gw_sessions *all);
/* Closes every session with code and reason. */
void gw_sessions_close_all(gw_sessions *all, int code, const char *reason);
/* The store's queue got shorter: sessions paused for it may read again. */
void gw_sessions_store_calm(gw_sessions *all);
/* Once a second: hello deadline, pings, hang-ups, slow consumers that stay slow. */
void gw_sessions_sweep(gw_sessions *all, uint64_t now_ms);
const gw_sess_figs *gw_sessions_figures(const gw_sessions *all);
/* The service thread writes no more: its frame buffer goes. */
void gw_sessions_thread_end(void);

/* ---- one session ------------------------------------------------------------------------ */

/* A new WebSocket (libwebsockets' ESTABLISHED) on wsi; json: subprotocol gw.v1.json. */
gw_sess *gw_sess_new(gw_sessions *all, struct lws *wsi, bool json);
/* libwebsockets closed the connection (CLOSED): the session is detached and freed. */
void gw_sess_free(gw_sess *s);
/* One piece of a received WebSocket message (RECEIVE). Returns -1 to close at once. */
int gw_sess_rx(gw_sess *s, const void *in, size_t len, bool first, bool final, bool binary);
/* Something came from the peer (bytes or a pong): it is alive. */
void gw_sess_alive(gw_sess *s);
/* The socket can take more (SERVER_WRITEABLE): write the next frame or the close.
 * Returns -1 to close the connection. */
int gw_out_writeable(gw_sess *s);
/* True while something waits to be written: a frame, a ping or the close. */
bool gw_sess_wants_write(const gw_sess *s);

/* The room the session keeps for the layer above (gw_sess_hooks.ext_size bytes). */
void *gw_sess_ext(gw_sess *s);
/* Unique among this process's sessions, and across restarts. */
uint64_t gw_sess_id(const gw_sess *s);
/* The id as text, for log lines and `welcome`: valid until the next call on this thread. */
const char *gw_sess_name(const gw_sess *s);
/* The identity its hello's token gave (filled by gw_auth_check; released with it). */
gw_identity *gw_sess_identity(gw_sess *s);

/* How far its sign-in is: the layer above moves it (only a hello is heard before DONE;
 * a session still NONE at the hello deadline is closed). */
enum gw_signin { GW_SIGNIN_NONE, GW_SIGNIN_LOADING, GW_SIGNIN_DONE };
enum gw_signin gw_sess_signin(const gw_sess *s);
void gw_sess_set_signin(gw_sess *s, enum gw_signin st);
/* The uid it signed in as (DONE), or NULL. */
const char *gw_sess_uid(const gw_sess *s);

/* Replies `err` and charges the error budget (closing with 1008 when it is spent). */
void gw_sess_error(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid);
/* Replies `err` without charging the budget (a second error caused by the same frame,
 * or one the server caused). */
void gw_sess_error_free(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid);
/* Replies `err` with `retry_ms` (rate_limited), not charged to the budget. */
void gw_sess_error_retry(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid,
                         uint64_t retry_ms);
/* Closes with code and reason once what is queued before it has been written. */
void gw_sess_close(gw_sess *s, int code, const char *reason);

/* ---- what goes out (gw_sess_out.c) ----------------------------------------------------- */

/* Queues an encoded reply (copies the sbuffer). */
void gw_out_reply(gw_sess *s, const msgpack_sbuffer *sb);
/* What a push is. Every push to a session, whatever its kind, counts against one budget,
 * --queue-cap pushes and --queue-bytes of them waiting (replies to the session's own
 * requests are not pushes: reading pauses while they back up). Past it, each kind has its
 * fate (docs/PROTOCOL.md, Slow consumers): */
enum gw_push_kind {
    GW_PUSH_MSG,      /* a message: one coalesced `notify` per group instead (the client pulls) */
    GW_PUSH_VERSION,  /* edited, recalled: queued up to four times the budget, past it the
                       * session is closed as a slow consumer (no pull finds a missed one) */
    GW_PUSH_WATCH,    /* cursors, receipts of a watch: refused; the caller keeps what moved for
                       * its next period, when it goes coalesced */
    GW_PUSH_PRESENCE, /* online: refused, and kept the same way */
    GW_PUSH_TYPING,   /* dropped: stale in seconds anyway */
    GW_PUSH_LEFT,     /* a membership ended: always queued (at most one per membership) */
    GW_PUSH_REACT,    /* reacted: dropped, and one coalesced `changed {gid, last_cseq}` per
                       * group kept instead (mid: the push's cseq; the client pulls changes) */
    GW_PUSH_GROUPS,   /* the user's whole list after a partial sign-in: always queued (one
                       * per session each time the list turns whole, which no client can
                       * make happen; its size bounded by --max-groups) */
};

/* Queues a push of kind: b is shared (the session takes a reference of its own), gid and
 * mid say what a MSG notifies. 0: queued, or coalesced into a notify; -EAGAIN: over the
 * budget and not queued (the kind's fate above). */
int gw_out_push(gw_sess *s, enum gw_push_kind kind, const char *gid, uint64_t mid, gw_buf *b);
/* Queues a `notify {gid, last_mid}` (a hole too large to push: the client pulls). */
void gw_out_notify(gw_sess *s, const char *gid, uint64_t last_mid);
/* Queues a `changed {gid, last_cseq}`, coalesced per group with any other not yet sent
 * (changes not pushed one by one: the client pulls `changes`). */
void gw_out_changed(gw_sess *s, const char *gid, uint64_t last_cseq);

/* ---- requests in order (gw_sess_in.c) -------------------------------------------------- */

/* A request of a session with a store job under way: embedded by the layer above in what
 * it keeps for the job. The session links it while it is in flight; if the session goes
 * first, `sess` turns NULL and the job's completion answers nobody. */
typedef struct gw_sess_req {
    gw_sess *sess;                   /* NULL once the session is gone */
    struct gw_sess_req *prev, *next; /* the session's */
} gw_sess_req;

/* A request of s went to the store (r: its link, or NULL for one with no job of its own,
 * a hello waiting for its user): the requests after it wait, but sends after a send. */
void gw_reqs_began(gw_sess *s, gw_sess_req *r, bool send);
/* ... and came back: the requests waiting behind it may start. */
void gw_reqs_done(gw_sess *s, gw_sess_req *r, bool send);
/* The store's queue is over its mark: pause reading this writer until it is shorter. */
void gw_reqs_store_busy(gw_sess *s);

/* ---- rate limits (gw_sess_rate.c) ------------------------------------------------------ */

/* May the request being handled, a `send`, go? 0: yes. Else the ms the client should
 * wait (reading is paused that long) and *why, the text of the `rate_limited` error. */
uint64_t gw_throttle_send(gw_sess *s, const char **why);
/* May the session's `typing` being handled go, whatever its group? The session's own rate
 * across all its groups, GW_TYPING_RATE a second with bursts of GW_TYPING_BURST_S seconds'
 * worth (docs/PROTOCOL.md, Typing): false, and counted, past it. */
#define GW_TYPING_RATE 2
#define GW_TYPING_BURST_S 2
bool gw_throttle_typing(gw_sess *s);

#endif
