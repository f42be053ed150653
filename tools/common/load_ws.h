/*
 * load_ws: the load generator's own WebSocket client (lw_ prefix).
 *
 * Why not clients/c/gwc: gwc runs on libwebsockets, whose client side parses every received
 * byte through a state machine and polls every socket on each pass. In a fan-out run the
 * load generator receives every delivery the server sends, so with gwc it spent twice the
 * server's CPU per delivery and was the bottleneck it must not be. This client keeps only
 * what a load generator needs: epoll (cost per ready socket, not per socket), wslay for
 * the framing (a maintained RFC 6455 library without I/O of its own), OpenSSL for wss://
 * (the certificate is not checked: a load generator talks to a gateway it started), and
 * the HTTP/1.1 upgrade, checked (status 101 and Sec-WebSocket-Accept).
 *
 * One thread. Ownership: lw_loop owns every lw_conn it made; an lw_conn lives until
 * lw_loop_free, also after it closed (its state says so), so callers may keep pointers.
 */
#ifndef LOAD_WS_H
#define LOAD_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lw_loop lw_loop;
typedef struct lw_conn lw_conn;

enum lw_state { LW_CONNECTING, LW_OPEN, LW_CLOSED };

enum {
    LW_E_URL = -1,    /* not ws://HOST:PORT/PATH or wss://... */
    LW_E_SOCKET = -2, /* socket, bind or connect failed (errno is in the message) */
    LW_E_NOMEM = -3,
    LW_E_CLOSED = -4, /* the connection is not open */
};

typedef struct lw_callbacks {
    /* The handshake is done: the connection is open. */
    void (*on_open)(lw_conn *k, void *user);
    /* A whole text or binary message; data is valid during the call only. */
    void (*on_msg)(lw_conn *k, const uint8_t *data, size_t n, void *user);
    /* The connection ended: code is the peer's close code, or 0 (reset, failed handshake,
     * protocol error; why is in lw_error). Called once, also for a failed handshake. */
    void (*on_close)(lw_conn *k, int code, void *user);
} lw_callbacks;

/* subprotocol: what to ask for in the handshake (NULL or "": none). max_msg: the largest
 * message accepted; larger ones close the connection. NULL when out of memory or TLS
 * cannot be set up. */
lw_loop *lw_loop_new(const lw_callbacks *cb, const char *subprotocol, size_t max_msg);
void lw_loop_free(lw_loop *l);

/* Starts connecting to url from the local address source (NULL: any). user is handed to
 * the callbacks. Returns 0 and *out, or an LW_E_* code (a message in lw_loop_error). */
int lw_connect(lw_loop *l, const char *url, const char *source, void *user, lw_conn **out);

/* Queues one message (binary, or text when text is true) and sends what the socket takes
 * now; the rest goes when the socket is writable. Copies data. 0 or an LW_E_* code. */
int lw_send(lw_conn *k, const void *data, size_t n, bool text);

/* Waits up to timeout_ms for sockets to be ready and handles every ready one, calling the
 * callbacks. Returns the number of ready sockets, or -1 (errno) when epoll fails. */
int lw_poll(lw_loop *l, int timeout_ms);

/* Starts a clean close (close frame with code 1000); the rest goes on in lw_poll. */
void lw_close(lw_conn *k);

/* Stops reading k (paused) or starts again: a client that never reads, whose frames pile
 * up on the server (gw_attack's victims). Frames queued to k still go out. */
void lw_pause(lw_conn *k, bool paused);

enum lw_state lw_state(const lw_conn *k);
void *lw_user(const lw_conn *k);
const char *lw_error(const lw_conn *k);
const char *lw_loop_error(const lw_loop *l);
/* Bytes queued on k and not yet written. */
size_t lw_queued(const lw_conn *k);

#endif
