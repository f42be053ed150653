/*
 * session/'s own parts, for its files only. A session (gw_sess) is one struct that each
 * file of session/ owns a part of: gw_sess_out.c its `out`, gw_sess_in.c its receiving
 * and `reqs`, gw_sess_rate.c its `rate`, gw_sess.c the rest; each touches only its own
 * part and calls the others' functions for theirs.
 */
#ifndef GW_SESS_INTERNAL_H
#define GW_SESS_INTERNAL_H

#include "gw_session.h"

#include <ev.h>
#include <libwebsockets.h>

/* ---- the parts -------------------------------------------------------------------------- */

/* One queued frame: a reply (owned) or a push (one reference to a shared buffer). */
typedef struct gw_qitem {
    gw_buf *buf;
    bool push;
} gw_qitem;

typedef struct gw_notify {
    char gid[PR_MAX_ID + 1];
    uint64_t last_mid;
    UT_hash_handle hh;
} gw_notify;

/* The outbound queue (gw_sess_out.c): a ring of encoded messages, shared pushes included. */
typedef struct gw_outq {
    gw_qitem *q;
    size_t head, len, cap;
    size_t pushes;       /* pushes in the ring */
    size_t push_bytes;   /* ... and their bytes */
    size_t reply_bytes;  /* bytes of replies in the ring: reading pauses past a budget */
    bool slow;           /* over the push cap: pushes become notify entries */
    uint64_t slow_since; /* monotonic ms */
    gw_notify *notify;   /* coalesced notify per group while slow */
    gw_notify *changed;  /* coalesced `changed` per group (last_mid: its last_cseq) */
    bool ping_due;       /* a WebSocket ping goes out at the next writeable */
    bool to_flush;       /* in gw_sessions' flush list (DL through flush_prev/next) */
    struct gw_sess *flush_prev, *flush_next;
    uint64_t backed_up_since; /* monotonic ms since replies were over the budget (0: not) */
} gw_outq;

/* A frame that waits for the requests before it (gw_sess_in.c). */
typedef struct gw_waiting {
    struct gw_waiting *next;
    size_t n;
    uint8_t frame[];
} gw_waiting;

/* A session's requests (gw_sess_in.c): they take effect in the order they came. */
typedef struct gw_reqq {
    gw_waiting *head, *tail; /* frames waiting their turn, copied */
    size_t n_waiting, waiting_bytes;
    unsigned sends;        /* sends in flight: more sends (and acks) may follow them */
    bool barrier;          /* another request in flight: everything after it waits */
    bool pumping;          /* the pump is running (a completion may come inside it) */
    gw_sess_req *inflight; /* DL: its requests with a store job under way */
} gw_reqq;

/* A session's rate limits (gw_sess_rate.c). */
typedef struct gw_srate {
    gw_bucket sends, bytes;
    gw_bucket typing;      /* typing across the session's groups */
    uint64_t until;        /* monotonic ms: reading is paused until then */
    ev_timer timer;        /* resumes reading at `until` (libev: see gw_sess_rate.c) */
    size_t frame_len;      /* the frame being received or handled ... */
    bool frame_over_bytes; /* ... and whether a piece of it overdrew the byte bucket */
} gw_srate;

/* Why reading a session is paused: each reason is set and cleared by its part, and the
 * socket is read again once no reason is left (gw_sess_pause). */
enum gw_pause {
    GW_PAUSE_REQS = 1,    /* gw_sess_in.c: too many requests in flight or waiting */
    GW_PAUSE_REPLIES = 2, /* gw_sess_out.c: too many replies not yet written */
    GW_PAUSE_STORE = 4,   /* gw_sess_in.c: the store's queue is long (every writer waits) */
    GW_PAUSE_RATE = 8,    /* gw_sess_rate.c: over a rate limit */
};

struct gw_sess {
    gw_sessions *all;
    struct lws *wsi; /* NULL once libwebsockets has closed it */
    uint64_t sid;    /* its name is made from it when needed (gw_sess_name): 24 bytes less */
    gw_identity id;
    gw_sess *prev, *next;               /* every session (gw_sess.c) */
    gw_sess *paused_prev, *paused_next; /* paused sessions (gw_sess.c) */
    unsigned pause;                     /* GW_PAUSE_* reasons */
    enum gw_signin signin;

    /* Receive (gw_sess_in.c): one WebSocket message may arrive in several pieces. */
    uint8_t *rx;
    size_t rx_n, rx_cap;
    bool rx_text;      /* the message being received is a text frame */
    bool json;         /* subprotocol gw.v1.json: JSON text frames both ways */
    size_t rx_discard; /* bytes dropped of a message over max_frame */

    gw_outq out;
    gw_reqq reqs;
    gw_srate rate;

    /* Liveness, checked by the sweep once a second (see gw_sess.c for why not by
     * timers). */
    uint64_t born_ms;    /* monotonic ms at the handshake: the hello must come in time */
    uint64_t last_rx_ms; /* monotonic ms of the last bytes or pong received */
    bool ping_sent;      /* a ping was sent since last_rx_ms */

    double err_score;   /* bad requests, decaying by one a second */
    uint64_t err_at;    /* monotonic ms of the last decay */
    int close_code;     /* non-zero: close with it at the next writeable */
    char *close_reason; /* malloc'd by gw_sess_close (NULL: none) */
    /* Then gw_sess_hooks.ext_size bytes for the layer above (gw_sess_ext). */
    uint64_t ext[];
};

struct gw_sessions {
    const gw_config *cfg;
    st_store *store;
    struct ev_loop *loop; /* NULL: no loop (the fuzz target) */
    pr_decoder *dec;      /* requests are decoded one at a time */
    gw_sess_hooks hooks;
    gw_limit sends, bytes; /* per session: --rate-sends, --rate-bytes */
    gw_limit typing;       /* per session: GW_TYPING_RATE */
    gw_sess *all;          /* DL through prev/next */
    gw_sess *paused;       /* DL through paused_prev/next */
    gw_sess *flush;        /* DL through out.flush_prev/next: written before the next poll */
    ev_prepare flush_w;    /* ... by gw_sess_out.c's flush (started when there is a loop) */
    unsigned n;
    uint64_t boot_id; /* in session ids, so they differ across restarts */
    uint64_t next_sid;
    gw_sess_figs figs;
};

/* ---- between the parts -------------------------------------------------------------------- */

/* gw_sess.c: sets or clears one reason to pause reading the session. */
void gw_sess_pause(gw_sess *s, enum gw_pause why, bool on);

/* gw_sess.c: closes a slow consumer (1008, counted as such) once what is queued went. */
void gw_sess_close_slow(gw_sess *s, const char *reason);

/* gw_sess_in.c: the replies went out: requests held back for them may start. */
void gw_reqs_resume(gw_sess *s);
/* gw_sess_in.c: the session is going: drop what waits, detach what is in flight. */
void gw_reqs_release(gw_sess *s);

/* gw_sess_out.c: a WebSocket ping goes out at the next writeable. */
void gw_out_ping(gw_sess *s);
/* gw_sess_out.c: true while a frame or a notify waits to be written. */
bool gw_out_pending(const gw_sess *s);
/* gw_sess_out.c: frees what is queued (the session is going). */
void gw_out_release(gw_sess *s);
/* gw_sess_out.c: starts / stops the writing before each poll (gw_sessions_new, _free). */
void gw_out_start(gw_sessions *all);
void gw_out_stop(gw_sessions *all);

/* gw_sess_rate.c: fills a new session's buckets / cancels its pending resume. */
void gw_throttle_init(gw_sess *s);
void gw_throttle_release(gw_sess *s);
/* gw_sess_rate.c: a piece of len bytes of a frame arrived (first: the frame's first):
 * pays for it (pausing reading while in debt). */
void gw_throttle_bytes(gw_sess *s, size_t len, bool first);

#endif
