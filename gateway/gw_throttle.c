/*
 * The rate limits as the gateway applies them (the buckets themselves are gw_rate.c):
 *   - bytes per session: every frame received is paid for from the session's byte bucket;
 *     a frame that leaves it in debt pauses reading until the debt is paid (the client is
 *     slowed at the TCP level, nothing is refused), except a `send`, which is refused;
 *   - sends per session: a `send` with no token left is refused with `rate_limited` and
 *     `retry_ms`, and the session's socket is not read for that long, so a client that
 *     pipelines sends gets one refusal per pause, not one per frame;
 *   - new connections per source address: refused at accept, before TLS or HTTP.
 * Refusals are not charged to the error budget: a client with sends in flight cannot help
 * a few, and the pause already bounds what a client that ignores retry_ms can cost.
 */
#include "gw_internal.h"

#include <arpa/inet.h>
#include <stdio.h>

/* The shortest pause after a refusal: a client that ignores retry_ms then loses at most
 * one frame in that time, and one flat out gets refused about ten times a second at most
 * (each pause lets a tenth of a second's worth of sends build up). */
#define MIN_RETRY_MS 100

void gw_throttle_init(gw_sess *s)
{
    gw_server *srv = s->srv;
    uint64_t now = gw_mono_ms();
    gw_bucket_init(&s->rate_sends, &srv->lim_sends, now);
    gw_bucket_init(&s->rate_bytes, &srv->lim_bytes, now);
}

/* A libev timer, not a libwebsockets one: libwebsockets 4.1's libev glue can fire a timer
 * up to a second late (gw_internal.h, ack_timer), and a 100 ms pause must end in time. */
static void arm(gw_sess *s, uint64_t ms);

static void on_rate_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    gw_sess *s = lws_container_of(w, gw_sess, rate_timer);
    uint64_t now = gw_mono_ms();
    if (now < s->rate_until) { /* libev's cached clock runs a little behind: wait the rest */
        arm(s, s->rate_until - now);
        return;
    }
    gw_sess_flow(s);
}

static void arm(gw_sess *s, uint64_t ms)
{
    struct ev_loop *loop = s->srv->loop;
    if (!loop)
        return; /* no loop (the fuzz harness): the pause is still checked by time */
    ev_timer_stop(loop, &s->rate_timer);
    ev_timer_init(&s->rate_timer, on_rate_timer, (double)ms / 1000.0, 0);
    ev_timer_start(loop, &s->rate_timer);
}

void gw_throttle_release(gw_sess *s)
{
    if (s->srv->loop)
        ev_timer_stop(s->srv->loop, &s->rate_timer);
}

bool gw_throttle_paused(const gw_sess *s, uint64_t now_ms)
{
    return now_ms < s->rate_until;
}

/* Stops reading the session for ms (or longer, if a pause is already on). */
static void pause_for(gw_sess *s, uint64_t ms)
{
    uint64_t until = gw_mono_ms() + ms;
    if (ms == 0 || until <= s->rate_until)
        return;
    s->rate_until = until;
    arm(s, ms);
    gw_sess_flow(s);
}

void gw_throttle_frame(gw_sess *s, size_t len)
{
    gw_server *srv = s->srv;
    s->frame_len = len;
    s->frame_over_bytes = false;
    if (!srv->cfg.rate_bytes)
        return;
    uint64_t now = gw_mono_ms();
    double before = gw_bucket_level(&s->rate_bytes, &srv->lim_bytes, now);
    gw_bucket_charge(&s->rate_bytes, &srv->lim_bytes, (double)len, now);
    if (before >= (double)len)
        return;
    s->frame_over_bytes = true;
    srv->n.rate_byte_pauses++;
    pause_for(s, gw_bucket_wait_ms(&s->rate_bytes, &srv->lim_bytes, 0, now));
}

uint64_t gw_throttle_send(gw_sess *s, const char **why)
{
    gw_server *srv = s->srv;
    uint64_t now = gw_mono_ms(), wait;
    if (s->frame_over_bytes) {
        /* The retry must find room for the whole frame again. */
        wait = gw_bucket_wait_ms(&s->rate_bytes, &srv->lim_bytes, (double)s->frame_len, now);
        srv->n.rate_bytes_refused++;
        *why = "rate limited: this session sends too many bytes a second";
    } else if (!srv->cfg.rate_sends ||
               gw_bucket_take(&s->rate_sends, &srv->lim_sends, 1, now)) {
        return 0;
    } else {
        wait = gw_bucket_wait_ms(&s->rate_sends, &srv->lim_sends, 1, now);
        srv->n.rate_sends_refused++;
        *why = "rate limited: this session sends too many messages a second";
    }
    if (wait < MIN_RETRY_MS)
        wait = MIN_RETRY_MS;
    pause_for(s, wait);
    return wait;
}

int gw_throttle_connection(gw_server *srv, const struct lws_filter_network_conn_args *a)
{
    if (!srv->addrs)
        return 0;
    uint64_t now = gw_mono_ms();
    if (gw_addrs_admit(srv->addrs, (const struct sockaddr *)&a->cli_addr, a->clilen, now))
        return 0;
    srv->n.rate_conns_refused++;
    /* A flood would fill the log: one line a second at most, with the count. */
    srv->conns_refused_unlogged++;
    if (now - srv->conns_refused_logged_ms >= 1000) {
        char ip[INET6_ADDRSTRLEN] = "?";
        if (a->cli_addr.ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->cli_addr)->sin_addr, ip,
                      sizeof(ip));
        else if (a->cli_addr.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->cli_addr)->sin6_addr, ip,
                      sizeof(ip));
        gw_warn("refused %lu connection(s) over --rate-conns %u/s (the last from %s)",
                (unsigned long)srv->conns_refused_unlogged, srv->cfg.rate_conns, ip);
        srv->conns_refused_unlogged = 0;
        srv->conns_refused_logged_ms = now;
    }
    return 1;
}
