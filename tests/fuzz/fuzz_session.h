/*
 * The input format of fuzz_session (shared with make_seeds, which writes its seeds).
 *
 * An input is a script of steps, each one byte `op` and, for the frame steps, a 2-byte
 * big-endian length and that many bytes of a WebSocket message (cut short at the end of
 * the input). The op's bits: slot = op & 3 (one of four client connections),
 * step = (op >> 2) & 7, arg = op >> 5 (0..7).
 */
#ifndef GW_FUZZ_SESSION_H
#define GW_FUZZ_SESSION_H

#define FS_SLOTS 4

enum fs_step {
    FS_FRAME = 0, /* a binary message; arg & 1: do not wait for the store before the next step */
    FS_SPLIT = 1, /* the same message in two pieces, cut at len * arg / 8 */
    FS_TEXT = 2,  /* a text message */
    FS_HELLO = 3, /* hello with the harness's token number arg (see tokens in fuzz_session.c) */
    FS_WRITE = 4, /* the socket is writable: write until the queue is empty (not if choked);
                   * connects first if the slot has no connection */
    FS_CLOSE = 5, /* the client vanishes (libwebsockets' CLOSED) */
    FS_TICK = 6,  /* the clock moves (arg + 1) * 250 ms: sweep, ack flush, completions */
    FS_CHOKE = 7, /* the socket backs up, or drains again (a toggle) */
};

#define FS_OP(step, slot, arg) ((unsigned char)(((arg) << 5) | ((step) << 2) | (slot)))

#endif
