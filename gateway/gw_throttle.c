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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

struct gw_limits {
    gw_limit sends, bytes; /* per session; read only once made */
    /* Every service thread admits connections through the one table (gw_hub.h). */
    pthread_mutex_t mu;
    gw_addrs *addrs; /* per source address; NULL with --rate-conns 0 (under mu) */
    unsigned rate_conns;
    uint64_t refused_unlogged, refused_logged_ms; /* under mu */
};

gw_limits *gw_limits_new(const gw_config *cfg, uint64_t seed)
{
    gw_limits *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->sends = gw_limit_make(cfg->rate_sends, cfg->rate_burst_s);
    l->bytes = gw_limit_make((double)cfg->rate_bytes, cfg->rate_burst_s);
    l->rate_conns = cfg->rate_conns;
    pthread_mutex_init(&l->mu, NULL);
    if (cfg->rate_conns) {
        /* Whoever connects picks the addresses: keep the table's hash unpredictable. */
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
            seed ^= (uint64_t)getpid() << 32;
        gw_limit c = gw_limit_make(cfg->rate_conns, cfg->rate_burst_s);
        if (!(l->addrs = gw_addrs_new(&c, seed))) {
            pthread_mutex_destroy(&l->mu);
            free(l);
            return NULL;
        }
    }
    return l;
}

void gw_limits_free(gw_limits *l)
{
    if (!l)
        return;
    gw_addrs_free(l->addrs);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

size_t gw_limits_addresses(gw_limits *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->addrs ? gw_addrs_count(l->addrs) : 0;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* The shortest pause after a refusal: a client that ignores retry_ms then loses at most
 * one frame in that time, and one flat out gets refused about ten times a second at most
 * (each pause lets a tenth of a second's worth of sends build up). */
#define MIN_RETRY_MS 100

void gw_throttle_init(gw_sess *s)
{
    gw_limits *l = s->srv->limits;
    uint64_t now = gw_mono_ms();
    gw_bucket_init(&s->rate.sends, &l->sends, now);
    gw_bucket_init(&s->rate.bytes, &l->bytes, now);
}

/* A libev timer, not a libwebsockets one: libwebsockets 4.1's libev glue can fire a timer
 * up to a second late (see gw_acks.c), and a 100 ms pause must end in time. */
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
    struct ev_loop *loop = s->srv->loop;
    if (!loop)
        return; /* no loop (the fuzz target): the pause stays until its input ends */
    ev_timer_stop(loop, &s->rate.timer);
    ev_timer_init(&s->rate.timer, on_rate_timer, (double)ms / 1000.0, 0);
    ev_timer_start(loop, &s->rate.timer);
}

void gw_throttle_release(gw_sess *s)
{
    if (s->srv->loop)
        ev_timer_stop(s->srv->loop, &s->rate.timer);
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

void gw_throttle_frame(gw_sess *s, size_t len)
{
    gw_server *srv = s->srv;
    gw_limits *l = srv->limits;
    s->rate.frame_len = len;
    s->rate.frame_over_bytes = false;
    if (!srv->cfg.rate_bytes)
        return;
    uint64_t now = gw_mono_ms();
    double before = gw_bucket_level(&s->rate.bytes, &l->bytes, now);
    gw_bucket_charge(&s->rate.bytes, &l->bytes, (double)len, now);
    if (before >= (double)len)
        return;
    s->rate.frame_over_bytes = true;
    srv->n.rate_byte_pauses++;
    pause_for(s, gw_bucket_wait_ms(&s->rate.bytes, &l->bytes, 0, now));
}

uint64_t gw_throttle_send(gw_sess *s, const char **why)
{
    gw_server *srv = s->srv;
    gw_limits *l = srv->limits;
    uint64_t now = gw_mono_ms(), wait;
    if (s->rate.frame_over_bytes) {
        /* The retry must find room for the whole frame again. */
        wait = gw_bucket_wait_ms(&s->rate.bytes, &l->bytes, (double)s->rate.frame_len, now);
        srv->n.rate_bytes_refused++;
        *why = "rate limited: this session sends too many bytes a second";
    } else if (!srv->cfg.rate_sends || gw_bucket_take(&s->rate.sends, &l->sends, 1, now)) {
        return 0;
    } else {
        wait = gw_bucket_wait_ms(&s->rate.sends, &l->sends, 1, now);
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
    gw_limits *l = srv->limits;
    if (!l->addrs)
        return 0;
    uint64_t now = gw_mono_ms();
    pthread_mutex_lock(&l->mu);
    if (gw_addrs_admit(l->addrs, (const struct sockaddr *)&a->cli_addr, a->clilen, now)) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    srv->n.rate_conns_refused++;
    /* A flood would fill the log: one line a second at most, with the count. */
    l->refused_unlogged++;
    uint64_t unlogged = 0;
    if (now - l->refused_logged_ms >= 1000) {
        unlogged = l->refused_unlogged;
        l->refused_unlogged = 0;
        l->refused_logged_ms = now;
    }
    pthread_mutex_unlock(&l->mu);
    if (unlogged) {
        char ip[INET6_ADDRSTRLEN] = "?";
        if (a->cli_addr.ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->cli_addr)->sin_addr, ip,
                      sizeof(ip));
        else if (a->cli_addr.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->cli_addr)->sin6_addr, ip,
                      sizeof(ip));
        gw_warn("refused %lu connection(s) over --rate-conns %u/s (the last from %s)",
                (unsigned long)unlogged, l->rate_conns, ip);
    }
    return 1;
}
