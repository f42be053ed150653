/*
 * Rate limits: token buckets (gw_rate.c) and the bounded table of source addresses that
 * holds one bucket per address for new connections (gw_addrs.c). Pure bookkeeping: no
 * sockets, no libwebsockets; time is passed in (monotonic ms), so both are easy to test.
 */
#ifndef GW_RATE_H
#define GW_RATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A limit: `rate` tokens a second, bursts of up to `cap` tokens. rate 0 = no limit. */
typedef struct gw_limit {
    double rate;
    double cap;
} gw_limit;

/* rate per second, with bursts of burst_s seconds' worth. */
gw_limit gw_limit_make(double rate, unsigned burst_s);

/* One bucket. Starts full. The balance may go below zero: a frame that has already been
 * read is paid for after the fact, and the debt is what the session then waits out. */
typedef struct gw_bucket {
    double tokens;
    uint64_t at_ms; /* monotonic ms the balance was last brought up to date */
} gw_bucket;

void gw_bucket_init(gw_bucket *b, const gw_limit *l, uint64_t now_ms);
/* The balance now (refilled for the time since the last call, never above cap). */
double gw_bucket_level(gw_bucket *b, const gw_limit *l, uint64_t now_ms);
/* Takes n tokens if the balance holds them; false (and nothing taken) if not. */
bool gw_bucket_take(gw_bucket *b, const gw_limit *l, double n, uint64_t now_ms);
/* Takes n tokens whatever the balance (it may go into debt). */
void gw_bucket_charge(gw_bucket *b, const gw_limit *l, double n, uint64_t now_ms);
/* Milliseconds until the balance reaches `want` (0 if it already has; rounded up). */
uint64_t gw_bucket_wait_ms(gw_bucket *b, const gw_limit *l, double want, uint64_t now_ms);

/* ---- source addresses ------------------------------------------------------------------ */

/* Addresses remembered at once. A flood from more addresses than this cannot grow memory:
 * an address is then forgotten early (its bucket, full or nearly, is reused), which only
 * ever makes the limit looser for it, never refuses anyone it should not. */
#define GW_ADDRS_SLOTS 4096

typedef struct gw_addrs gw_addrs;

/* A table for limit l (rate and cap); seed randomises the hash (addresses are chosen by
 * whoever connects). NULL if out of memory. */
gw_addrs *gw_addrs_new(const gw_limit *l, uint64_t seed);
void gw_addrs_free(gw_addrs *t);
/* One new connection from sa: true to accept it, false if its address is over the rate.
 * IPv4 addresses count one by one; IPv6 ones by their /64 (one host usually holds a whole
 * /64). Other families are always accepted. */
bool gw_addrs_admit(gw_addrs *t, const struct sockaddr *sa, socklen_t len, uint64_t now_ms);
/* Addresses the table holds now (a gauge for /stats). */
size_t gw_addrs_count(const gw_addrs *t);

#endif
