/*
 * A raw WebSocket client for tests of hostile and broken clients: plain blocking sockets,
 * hand-made masked frames, and control over every byte written (one byte per write, a
 * handshake that never finishes, a connection that never reads). No libwebsockets, no
 * Criterion: safe to use from a test's attacker thread. Errors are -1 (errno set where
 * the system set it).
 */
#ifndef GW_TEST_RAWWS_H
#define GW_TEST_RAWWS_H

#include "proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    RAWWS_CONT = 0x0,
    RAWWS_TEXT = 0x1,
    RAWWS_BIN = 0x2,
    RAWWS_CLOSE = 0x8,
    RAWWS_PING = 0x9,
    RAWWS_PONG = 0xa
};

typedef struct rawws {
    int fd;
    uint8_t *in; /* bytes read but not consumed yet (after the handshake: frames) */
    size_t in_n, in_cap;
    uint8_t *frame; /* the last frame's payload (rawws_read_frame), owned here */
    size_t frame_cap;
    int close_code;          /* the server's close code, once a close frame was read (else 0) */
    char close_reason[124];  /* ... and its reason text */
    bool upgraded;           /* the handshake succeeded: what comes are frames */
    const char *subprotocol; /* asked for in the handshake (NULL: gw.v1); set after connect */
    char agreed[32];         /* the subprotocol the server chose ("" if none) */
    pr_decoder *dec;         /* rawws_next: the events of the last frame, handed out one by one */
    pr_event *evs;
    size_t n_evs, next_ev;
} rawws;

/* TCP connect to 127.0.0.1:port from source address src (NULL: any), TCP_NODELAY on.
 * Returns 0 and fills *c (no handshake yet), or -1. */
int rawws_connect(rawws *c, int port, const char *src);
/* Sends the WebSocket upgrade for /ws with subprotocol gw.v1 (bytewise: one byte per
 * write) and reads the response; 0 on 101, -1 otherwise. */
int rawws_handshake(rawws *c, int port, bool bytewise, int timeout_ms);
/* connect + handshake. */
int rawws_open(rawws *c, int port, const char *src, int timeout_ms);
void rawws_close(rawws *c);
/* Closes with an RST instead of a FIN (SO_LINGER 0): the abrupt end of a vanished peer. */
void rawws_reset(rawws *c);

/* Encodes one client frame (masked, as RFC 6455 requires) into out; returns its size, or
 * 0 if cap is too small. fin false: more fragments follow. */
size_t rawws_frame(uint8_t *out, size_t cap, int opcode, bool fin, const void *payload, size_t len);
/* Writes all of p, or one byte per write() with a short pause between (the kernel then
 * sends each byte in its own segment on loopback). */
int rawws_write(rawws *c, const void *p, size_t n, bool bytewise);
/* Encodes and writes one binary frame. */
int rawws_send(rawws *c, const void *payload, size_t len, bool bytewise);
/* Encodes and writes one text frame. */
int rawws_send_text(rawws *c, const char *text);

/* Reads the next data frame (answering nothing; pings are skipped). 0; -1 when the
 * connection ended (a close frame sets close_code; EOF or a reset leave it 0); -2 when
 * nothing came within timeout_ms. *payload points into c until the next read. */
int rawws_read_frame(rawws *c, int timeout_ms, int *opcode, const uint8_t **payload, size_t *len);
/* Protocol v1: the next message from the server (a batch yields its messages one by one;
 * *ev borrows from c until the next read). 0, -1 closed, -2 timeout, -3 undecodable. */
int rawws_next(rawws *c, int timeout_ms, pr_event *ev);
/* Sends one encoded request (sb holds one message). */
int rawws_request(rawws *c, const msgpack_sbuffer *sb, bool bytewise);
/* Waits (5 s at most) for the next message of type t, skipping others; 0 or -1. */
int rawws_expect(rawws *c, enum pr_ev_type t, pr_event *ev);
/* `hello` with token, then waits for `welcome`; 0 or -1. */
int rawws_hello(rawws *c, const char *token, bool bytewise);
/* `join` gid, then waits for `joined`; 0 or -1. */
int rawws_join(rawws *c, const char *gid);
/* A valid `ping` made large by an unknown key of n bytes (unknown keys are ignored). */
void rawws_padded_ping(msgpack_sbuffer *sb, uint64_t rid, size_t n);

/* Waits until the server ends the connection (EOF, reset, or a close frame), reading and
 * dropping whatever comes; true if it did within timeout_ms. */
bool rawws_wait_closed(rawws *c, int timeout_ms);

#endif
