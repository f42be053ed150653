/*
 * ackrule: the client side of the batched, cumulative ack (docs/PROTOCOL.md, "Batched
 * ack"), for one group as one session reads it. Shared by gw_load and gw_cli.
 *
 * The reader keeps a contiguous watermark `held` (it holds every mid <= held) and the
 * last mid it acked. An ack of `held` is due once `every` messages are unacked, or
 * `delay_ms` after the first unacked one arrived, whichever comes first (both from the
 * welcome); and at once when the reader leaves the group (ackrule_pending). Acks are
 * cumulative: one ack of the watermark covers everything at or below it.
 *
 * Pure: no I/O, no clock of its own (times are the caller's, in nanoseconds on one
 * monotonic clock), no allocation. Header-only (static inline): gw_load calls it for
 * every delivery, and the unit tests include it as it is.
 */
#ifndef ACKRULE_H
#define ACKRULE_H

#include <stdbool.h>
#include <stdint.h>

#define ACKRULE_EVERY_DEFAULT 50      /* the protocol's defaults, when a welcome says 0 */
#define ACKRULE_DELAY_MS_DEFAULT 1000 /* (an older server) */

typedef struct ackrule {
    uint32_t every;    /* ack after this many unacked messages */
    uint32_t delay_ms; /* ... or this long after the first unacked one */
    uint64_t held;     /* contiguous watermark: every mid <= held is held */
    uint64_t acked;    /* the last ack sent (or the server's stored ack) */
    int64_t since_ns;  /* when held first passed acked (meaningful while held > acked) */
} ackrule;

/* The cadence from a welcome: 0 means the protocol's default. Keeps the position. */
static inline void ackrule_cadence(ackrule *a, uint32_t every, uint32_t delay_ms)
{
    a->every = every ? every : ACKRULE_EVERY_DEFAULT;
    a->delay_ms = delay_ms ? delay_ms : ACKRULE_DELAY_MS_DEFAULT;
}

/* Starts (or restarts, after a reconnect) at watermark held with acked already acked
 * (acked <= held; the unacked rest, if any, counts as unacked since now_ns). */
static inline void ackrule_start(ackrule *a, uint64_t held, uint64_t acked, int64_t now_ns)
{
    a->held = held;
    a->acked = acked < held ? acked : held;
    a->since_ns = now_ns;
}

/* The watermark moved up to mid at now_ns (the caller saw every mid up to it, or skips
 * a gap on purpose); a mid at or below the watermark changes nothing. */
static inline void ackrule_hold(ackrule *a, uint64_t mid, int64_t now_ns)
{
    if (mid <= a->held)
        return;
    if (a->held == a->acked)
        a->since_ns = now_ns; /* the first unacked one starts the delay */
    a->held = mid;
}

/* What to ack if the reader stops now: the watermark, or 0 when it is all acked. */
static inline uint64_t ackrule_pending(const ackrule *a)
{
    return a->held > a->acked ? a->held : 0;
}

/* The ack due at now_ns by count or by time: the mid to ack, or 0 for none yet. */
static inline uint64_t ackrule_due(const ackrule *a, int64_t now_ns)
{
    if (a->held <= a->acked)
        return 0;
    if (a->held - a->acked >= a->every || now_ns - a->since_ns >= (int64_t)a->delay_ms * 1000000)
        return a->held;
    return 0;
}

/* Nanoseconds from now_ns until the delay makes an ack due (0: due now), or -1 when
 * nothing is unacked: how long a reader may sleep. */
static inline int64_t ackrule_wait_ns(const ackrule *a, int64_t now_ns)
{
    if (a->held <= a->acked)
        return -1;
    if (a->held - a->acked >= a->every)
        return 0;
    int64_t left = a->since_ns + (int64_t)a->delay_ms * 1000000 - now_ns;
    return left > 0 ? left : 0;
}

/* An ack of mid went out. */
static inline void ackrule_acked(ackrule *a, uint64_t mid)
{
    if (mid > a->acked)
        a->acked = mid;
}

#endif
