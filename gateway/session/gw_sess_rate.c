/*
 * A session's rate limits as the gateway applies them (the buckets themselves are net/'s
 * gw_rate.c):
 *   - bytes per session: every piece of a frame received is paid for from the session's
 *     byte bucket as it comes; one that leaves it in debt pauses reading until the debt is
 *     paid (the client is slowed at the TCP level, nothing is refused), and a `send` whose
 *     frame overdrew it is refused;
 *   - sends per session: a `send` with no token left is refused with `rate_limited` and
 *     `retry_ms`, and the session's socket is not read for that long, so a client that
 *     pipelines sends gets one refusal per pause, not one per frame;
 *   - typing per session, across its groups: one over the rate is dropped (as the
 *     protocol drops a second one in a group within 2 s), nothing paused: typing in turn
 *     in many groups is bounded as typing in one is.
 * Refusals are not charged to the error budget: a client with sends in flight cannot help
 * a few, and the pause already bounds what a client that ignores retry_ms can cost. New
 * connections per source address are net/'s (gw_conns.c), refused at accept.
 */
#include "sess_internal.h"

/* The shortest pause after a refusal: a client that ignores retry_ms then loses at most
 * one frame in that time, and one flat out gets refused about ten times a second at most
 * (each pause lets a tenth of a second's worth of sends build up). */
#define MIN_RETRY_MS 100

void gw_throttle_init(gw_sess *s)
{
    gw_sessions *all = s->all;
    uint64_t now = gw_mono_ms();
    gw_bucket_init(&s->rate.sends, &all->sends, now);
    gw_bucket_init(&s->rate.bytes, &all->bytes, now);
    gw_bucket_init(&s->rate.typing, &all->typing, now);
}

/* A libev timer, not a libwebsockets one: libwebsockets 4.1's libev glue can fire a timer
 * up to a second late (see groups/gw_acks.c), and a 100 ms pause must end in time. */
static void arm(gw_sess *s, uint64_t ms);

static void on_rate_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    gw_sess *s = (gw_sess *)((char *)w - offsetof(gw_sess, rate.timer));
    uint64_t now = gw_mono_ms();
    if (now < s->rate.until) { /* libev's cached clock runs a little behind: wait the rest */
        arm(s, s->rate.until - now);
        return;
    }
    gw_sess_pause(s, GW_PAUSE_RATE, false);
}

static void arm(gw_sess *s, uint64_t ms)
{
    struct ev_loop *loop = s->all->loop;
    if (!loop)
        return; /* no loop (the fuzz target): the pause stays until its input ends */
    ev_timer_stop(loop, &s->rate.timer);
    ev_timer_init(&s->rate.timer, on_rate_timer, (double)ms / 1000.0, 0);
    ev_timer_start(loop, &s->rate.timer);
}

void gw_throttle_release(gw_sess *s)
{
    if (s->all->loop)
        ev_timer_stop(s->all->loop, &s->rate.timer);
}

/* Stops reading the session for ms (or longer, if a pause is already on). */
static void pause_for(gw_sess *s, uint64_t ms)
{
    uint64_t until = gw_mono_ms() + ms;
    if (ms == 0 || until <= s->rate.until)
        return;
    s->rate.until = until;
    arm(s, ms);
    gw_sess_pause(s, GW_PAUSE_RATE, true);
}

void gw_throttle_bytes(gw_sess *s, size_t len, bool first)
{
    gw_sessions *all = s->all;
    if (first) {
        s->rate.frame_len = 0;
        s->rate.frame_over_bytes = false;
    }
    s->rate.frame_len += len;
    if (!all->cfg->rate_bytes)
        return;
    uint64_t now = gw_mono_ms();
    double before = gw_bucket_level(&s->rate.bytes, &all->bytes, now);
    gw_bucket_charge(&s->rate.bytes, &all->bytes, (double)len, now);
    if (before >= (double)len)
        return;
    s->rate.frame_over_bytes = true;
    all->figs.rate_byte_pauses++;
    pause_for(s, gw_bucket_wait_ms(&s->rate.bytes, &all->bytes, 0, now));
}

uint64_t gw_throttle_send(gw_sess *s, const char **why)
{
    gw_sessions *all = s->all;
    uint64_t now = gw_mono_ms(), wait;
    if (s->rate.frame_over_bytes) {
        /* The retry must find room for the whole frame again. */
        wait = gw_bucket_wait_ms(&s->rate.bytes, &all->bytes, (double)s->rate.frame_len, now);
        all->figs.rate_bytes_refused++;
        *why = "rate limited: this session sends too many bytes a second";
    } else if (!all->cfg->rate_sends || gw_bucket_take(&s->rate.sends, &all->sends, 1, now)) {
        return 0;
    } else {
        wait = gw_bucket_wait_ms(&s->rate.sends, &all->sends, 1, now);
        all->figs.rate_sends_refused++;
        *why = "rate limited: this session sends too many messages a second";
    }
    if (wait < MIN_RETRY_MS)
        wait = MIN_RETRY_MS;
    pause_for(s, wait);
    return wait;
}

bool gw_throttle_typing(gw_sess *s)
{
    gw_sessions *all = s->all;
    if (gw_bucket_take(&s->rate.typing, &all->typing, 1, gw_mono_ms()))
        return true;
    all->figs.rate_typing_dropped++;
    return false;
}
