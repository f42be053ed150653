/*
 * gwc internals shared by gwc.c (the public calls and the event loop) and gwc_conn.c (the
 * libwebsockets callback). Not installed; nothing outside clients/c/ includes it.
 */
#ifndef GW_CLIENT_INTERNAL_H
#define GW_CLIENT_INTERNAL_H

#include "gwc.h"

#include <libwebsockets.h>

/* One WebSocket message, queued in either direction. */
typedef struct gwc_frame {
    struct gwc_frame *next;
    size_t len;     /* payload bytes at data + off */
    size_t off;     /* LWS_PRE headroom for outgoing frames, 0 for received ones */
    bool text;      /* outgoing: send as a text frame */
    uint8_t data[]; /* off + len bytes (received: capacity while being reassembled) */
} gwc_frame;

typedef struct gwc_queue {
    gwc_frame *head;
    gwc_frame *tail;
} gwc_queue;

enum gwc_state {
    GWC_ST_CONNECTING, /* handshake under way */
    GWC_ST_OPEN,       /* established, no close seen */
    GWC_ST_CLOSED,     /* was open; closed by either side or dropped */
    GWC_ST_FAILED,     /* never got established */
};

struct gwc_conn {
    gwc_ctx *ctx;
    gwc_conn *prev, *next; /* in ctx->conns, so that gwc_ctx_free finds every connection */
    struct lws *wsi;       /* NULL once lws has destroyed it */
    enum gwc_state state;
    bool close_requested;   /* gwc_close: send 1000 once the out queue has drained */
    bool close_sent;        /* ... and that close is on its way */
    int close_code;         /* see gwc_close_code */
    char close_reason[124]; /* see gwc_close_reason */
    gwc_queue in;           /* complete frames from the server, oldest first */
    gwc_queue out;          /* frames waiting for WRITEABLE */
    gwc_frame *rx;          /* message being reassembled from RECEIVE fragments */
    size_t rx_cap;          /* bytes allocated after rx->data */
    gwc_frame *cur;         /* the frame last handed out; lives until the next recv/next */
    pr_decoder *dec;        /* owns the objects that cur's events borrow */
    pr_event *evs;          /* events of cur not yet handed out by gwc_next */
    size_t n_evs, next_ev, cap_evs;
    uint64_t frames_in, frames_out;
    char err[200]; /* see gwc_last_error */
    void *user;    /* gwc_set_user */
    char *url_buf; /* gwc_connect_start: the parsed URL, alive while lws may read it */
    bool in_ready; /* in ctx->ready */
    gwc_conn *ready_next;
};

struct gwc_ctx {
    struct lws_context *lws;
    char *subprotocol; /* NULL: ask for none */
    bool insecure;     /* wss: skip certificate checks */
    size_t max_frame;
    gwc_conn *conns;
    lws_sorted_usec_list_t wake;       /* bounds each lws_service wait, see service_once */
    char err[200];                     /* see gwc_ctx_last_error */
    gwc_conn *ready_head, *ready_tail; /* connections with news: gwc_next_ready */
};

/* Puts k on its context's ready list (once): it has a frame or changed state. */
void gwc_mark_ready(gwc_conn *k);

/* The one protocol of every gwc context; lws keeps a pointer to it. */
extern const struct lws_protocols gwc_protocols[];

/* printf into an error buffer (gwc_conn.err, gwc_ctx.err). */
void gwc_set_err(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void gwc_queue_push(gwc_queue *q, gwc_frame *f);
gwc_frame *gwc_queue_pop(gwc_queue *q);
void gwc_queue_clear(gwc_queue *q);

#endif
