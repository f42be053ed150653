/*
 * What a test of a hostile client measures while the attack goes on: a well-behaved
 * bystander (one session sends to group "calm", another receives) probed again and again,
 * with the latency of each probe, and the gateway's resources (RSS, open descriptors).
 * The attack itself runs on a thread of its own (raw sockets only: see rawws.h), while
 * the test's thread probes; Criterion's assertions stay on the test's thread.
 */
#ifndef GW_TEST_WATCH_H
#define GW_TEST_WATCH_H

#include "gwfx.h"

typedef struct watch {
    gwfx *f;
    gwc_conn *tx, *rx;
    int probes, delivered;
    long max_ms; /* the bystander's slowest probe: send to delivery */
    double sum_ms;
    long rss0_kib; /* the gateway's RSS and open descriptors when the watch started */
    long fds0;
    long rss_peak_kib;
} watch;

/* Call before gwfx_start: under the sanitizer build, keeps AddressSanitizer's quarantine of
 * freed memory small in the gateway, so that its RSS shows what the gateway holds rather
 * than the freed blocks ASan keeps back (256 MiB by default) to catch a use after free. */
void watch_prepare(void);
/* Signs the bystander in (users by-tx and by-rx, group calm) and takes the baseline. */
void watch_start(watch *w, gwfx *f);
/* One probe: by-tx sends, by-rx must receive it (within 15 s). Samples the RSS too. */
void watch_probe(watch *w);
/* Runs fn(arg) on a thread, probing every 50 ms until it returns. */
void watch_during(watch *w, void *(*fn)(void *), void *arg);
/* Checks the gateway is alive, every probe was delivered and the RSS grew by less than
 * max_growth_kib; logs the figures under `what` (for docs/RELIABILITY.md). */
void watch_report(watch *w, const char *what, long max_growth_kib);

/* Open descriptors of the gateway process (/proc/PID/fd). */
long watch_fds(gwfx *f);
/* A number from GET /stats: group.key, e.g. "connections.now" (-1 if absent). */
double watch_stat(gwfx *f, const char *path);
/* Waits (at most ms) until the gateway holds at most n WebSocket sessions. */
bool watch_sessions_at_most(gwfx *f, double n, int ms);

#endif
