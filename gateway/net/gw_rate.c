/*
 * Token buckets: the arithmetic behind every rate limit of the gateway (sends and bytes
 * per session in session/gw_sess_rate.c, connections per address in gw_addrs.c, requests
 * per API key in app/gw_api.c).
 */
#include "gw_net.h"

#include <math.h>

gw_limit gw_limit_make(double rate, unsigned burst_s)
{
    return (gw_limit){rate, rate * (double)(burst_s ? burst_s : 1)};
}

void gw_bucket_init(gw_bucket *b, const gw_limit *l, uint64_t now_ms)
{
    b->tokens = l->cap;
    b->at_ms = now_ms;
}

double gw_bucket_level(gw_bucket *b, const gw_limit *l, uint64_t now_ms)
{
    /* A caller with an older now (taken before another caller's) adds nothing. */
    if (now_ms > b->at_ms) {
        b->tokens += (double)(now_ms - b->at_ms) * l->rate / 1000.0;
        if (b->tokens > l->cap)
            b->tokens = l->cap;
        b->at_ms = now_ms;
    }
    return b->tokens;
}

bool gw_bucket_take(gw_bucket *b, const gw_limit *l, double n, uint64_t now_ms)
{
    if (gw_bucket_level(b, l, now_ms) < n)
        return false;
    b->tokens -= n;
    return true;
}

void gw_bucket_charge(gw_bucket *b, const gw_limit *l, double n, uint64_t now_ms)
{
    gw_bucket_level(b, l, now_ms);
    b->tokens -= n;
}

uint64_t gw_bucket_wait_ms(gw_bucket *b, const gw_limit *l, double want, uint64_t now_ms)
{
    double have = gw_bucket_level(b, l, now_ms);
    if (have >= want || l->rate <= 0)
        return 0;
    return (uint64_t)ceil((want - have) * 1000.0 / l->rate);
}
