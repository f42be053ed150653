/*
 * gwc: a protocol v1 client over ws:// and wss://, on libwebsockets' client side.
 *
 * Used by the tests, the native client and the load generator. One gwc_ctx is one
 * libwebsockets client context that carries any number of connections. Everything is
 * single-threaded: call every function of one context from the same thread. The calls
 * that wait (connect, recv, next) run the context's event loop while they wait, so frames
 * for other connections of the same context keep arriving and are queued on those.
 * Nothing runs between calls: queued frames go out, and the server's WebSocket pings are
 * answered, only inside connect, recv, next, service and close. A connection left without
 * them for longer than the server's idle timeout is closed by the server.
 *
 * Errors are negative GWC_E* codes; gwc_strerror() describes them.
 */
#ifndef GW_CLIENT_H
#define GW_CLIENT_H

#include "proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gwc_err {
    GWC_OK = 0,
    GWC_EINVAL = -1,    /* bad argument or URL */
    GWC_ECONNECT = -2,  /* could not connect, TLS failed, or the handshake was refused */
    GWC_ETIMEDOUT = -3, /* nothing arrived in time */
    GWC_ECLOSED = -4,   /* the connection is closed (see gwc_close_code) */
    GWC_ENOMEM = -5,
    GWC_EPROTO = -6, /* the server sent a frame that does not decode (see gwc_last_error) */
};

const char *gwc_strerror(int err);

typedef struct gwc_ctx gwc_ctx;
typedef struct gwc_conn gwc_conn;

typedef struct gwc_options {
    const char *ca_file;     /* wss: trust this CA or certificate (PEM); NULL: system CAs */
    bool insecure;           /* wss: do not verify the server certificate (tests only) */
    size_t max_frame;        /* largest frame accepted from the server; 0 = 1 MiB */
    const char *subprotocol; /* NULL = "gw.v1"; "" = ask for none (for tests). When one is
                                asked for, a server that does not select it fails the
                                handshake (GWC_ECONNECT) */
} gwc_options;

/* A context with the given options (NULL: defaults); NULL if out of memory, ca_file is not
 * readable, or libwebsockets refuses. Sets libwebsockets' log level, which is process-wide,
 * to errors and warnings. Free with gwc_ctx_free, which closes every connection still open
 * and frees every gwc_conn not yet passed to gwc_close: none may be used afterwards. */
gwc_ctx *gwc_ctx_new(const gwc_options *o);
void gwc_ctx_free(gwc_ctx *c);
/* Why the most recent failed gwc_connect on c failed ("" if none has). Owned by c. */
const char *gwc_ctx_last_error(const gwc_ctx *c);

/* Connects to url ("ws://host:port/path" or "wss://..."), waiting up to timeout_ms for
 * the WebSocket handshake. On success *out is a connection owned by the caller (it may
 * already be closed if the server closed at once). GWC_EINVAL for a bad URL, GWC_ECONNECT,
 * or GWC_ETIMEDOUT; gwc_ctx_last_error says why. */
int gwc_connect(gwc_ctx *c, const char *url, int timeout_ms, gwc_conn **out);

/*
 * Many connections at once (a load generator): starts connecting without waiting, from
 * the local address `source` when not NULL (for example 127.0.0.2, to use more source
 * ports than one address has). The handshake goes on while the loop runs (gwc_service);
 * gwc_state tells where it is, and gwc_next_ready hands out connections with news.
 */
int gwc_connect_start(gwc_ctx *c, const char *url, const char *source, gwc_conn **out);

enum { GWC_CONNECTING = 0, GWC_OPEN = 1, GWC_DONE = 2 /* closed, or never opened */ };
int gwc_state(const gwc_conn *k);

/* The next connection that received a frame or changed state since it was last handed
 * out, or NULL. Read its frames with gwc_next(k, 0, ...) until GWC_ETIMEDOUT. */
gwc_conn *gwc_next_ready(gwc_ctx *c);

/* Runs one pass of the loop: returns once something happened, or after timeout_ms. */
void gwc_poll(gwc_ctx *c, int timeout_ms);

/* A pointer of the caller's kept with the connection. */
void gwc_set_user(gwc_conn *k, void *user);
void *gwc_user(const gwc_conn *k);

/* Closes (normal closure, 1000, after the frames still queued) and frees, waiting at most
 * 500 ms for the server's close ack. NULL is a no-op. */
void gwc_close(gwc_conn *k);

/* Queues one binary frame (copied) and lets the loop send it. GWC_ECLOSED once closed. */
int gwc_send(gwc_conn *k, const void *frame, size_t len);
/* Queues raw bytes as one text (text = true) or binary frame: for tests of bad input. */
int gwc_send_raw(gwc_conn *k, const void *data, size_t len, bool text);

/* Waits up to timeout_ms for the next frame from the server (0: only take what the loop
 * has ready). *frame stays valid until the next recv/next call on this connection.
 * GWC_ECLOSED once closed and drained. Messages of a batch that gwc_next had not handed
 * out yet are dropped. */
int gwc_recv(gwc_conn *k, int timeout_ms, const uint8_t **frame, size_t *len);

/* Waits up to timeout_ms for the next message (a batch frame yields its messages one by
 * one). *ev borrows from the connection until the next recv/next call. A frame that does
 * not decode is consumed and gives GWC_EPROTO. */
int gwc_next(gwc_conn *k, int timeout_ms, pr_event *ev);

/* Runs the loop for up to timeout_ms (for example to let queued frames go out). */
void gwc_service(gwc_ctx *c, int timeout_ms);

/* Stops (true) or resumes (false) reading this connection's socket, as a client that
 * stops reading would: the server's frames wait in the kernel's buffers, then in the
 * server's queue. For tests of slow consumers. */
int gwc_pause(gwc_conn *k, bool paused);

bool gwc_is_open(const gwc_conn *k);
/* The close code the server sent (4001, 1008, ...), 0 if it sent none, -1 if still open.
 * A code RFC 6455 forbids on the wire (1005, 1006, 1016-2999, ...) reads as 1002. */
int gwc_close_code(const gwc_conn *k);
/* The reason text the server sent with its close ("" if none). */
const char *gwc_close_reason(const gwc_conn *k);
/* Text of the last GWC_EPROTO, or why this side closed the connection (a frame over
 * max_frame is refused with close code 1009). "" if none. */
const char *gwc_last_error(const gwc_conn *k);

/* Frames received and sent on this connection so far. */
uint64_t gwc_frames_in(const gwc_conn *k);
uint64_t gwc_frames_out(const gwc_conn *k);

/*
 * Tokens (HS256 JWT, as the gateway checks them). Mints a token for uid that expires at
 * exp (Unix seconds), optionally limited to n_groups groups. *out is allocated; free().
 * Claims: sub, exp, iat (now) and, when n_groups > 0, groups (an array of strings).
 * For tests of refusal: alg "none" when none is true (then secret may be NULL).
 * Returns 0, GWC_EINVAL (no uid or out, or no secret for HS256) or GWC_ENOMEM.
 */
int gwc_token_mint(const void *secret, size_t secret_n, const char *uid, int64_t exp,
                   const char *const *groups, size_t n_groups, bool none, char **out);

#endif
