/*
 * The figures: the gateway's counters, incremented by the module where each event
 * happens and read only here, and the rendering of every figure (these, the store's,
 * and each module's own) as JSON for /stats and Prometheus text for /metrics, from one
 * table taken in one snapshot, so the two cannot drift apart.
 */
#ifndef GW_STATS_H
#define GW_STATS_H

#include "proto.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gw_server gw_server;

typedef struct gw_counters {
    uint64_t connections, connections_peak, sessions_total, auth_failures;
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    uint64_t sends, sends_dup, pushes, deliveries, notifies, slow_switches;
    uint64_t acks_received, ack_frames;
    uint64_t pages, page_msgs;
    uint64_t requests_waited;       /* requests that waited for the ones before them */
    uint64_t errors[1 - PR_E_LAST]; /* by -PR_E* code */
    uint64_t closes_1008, closes_1009, closes_4001, closes_slow, closes_4013;
    uint64_t rate_sends_refused, rate_bytes_refused, rate_byte_pauses, rate_conns_refused;
    /* The cluster: other gateways' changes applied, resyncs, and the pushes in order. */
    uint64_t feed_applied, resyncs;
    uint64_t held, hole_reads, hole_msgs, hole_notifies;
    uint64_t api_requests, api_unauthorized, api_rate_limited; /* the server API (gw_api.c) */
    /* The unread webhook: who is to be told (gw_unread.c), and the delivery (gw_webhook.c). */
    uint64_t webhook_passes, webhook_events, webhook_missed, webhook_read_errors;
    uint64_t webhook_queued; /* a gauge: events waiting or in the batch out */
    uint64_t webhook_delivered, webhook_batches, webhook_attempts, webhook_failures;
    uint64_t webhook_timeouts, webhook_rejected, webhook_dropped, webhook_last_status;
} gw_counters;

/* A sample of the counters that have a rate in /stats. */
typedef struct gw_rate_sample {
    uint64_t ms; /* monotonic */
    uint64_t sends, deliveries, pushes;
} gw_rate_sample;

#define GW_RATE_SAMPLES 11 /* one a second: rates over the last ten seconds */

typedef struct gw_samples {
    gw_rate_sample s[GW_RATE_SAMPLES];
    size_t next, n;
} gw_samples;

/* One service thread's figures (gw_hub.h sums them over the threads); the store's are
 * the process's and are read once, by the thread that renders. */
typedef struct gw_figs {
    gw_counters n;
    uint64_t sessions, authenticated, users, groups_online;
    uint64_t lag_members, lag_total, lag_max;
    uint64_t ack_writes, ack_entries, holes, feed_dropped;
    double r_sends, r_deliveries, r_pushes;
} gw_figs;

/* This thread's figures, now. */
void gw_stats_figs(gw_server *srv, gw_figs *f);
/* Adds f into sum: counts add up, the largest lag and the last webhook status are kept. */
void gw_figs_add(gw_figs *sum, const gw_figs *f);

/* Once a second: a sample for the rates. */
void gw_stats_tick(gw_server *srv);
/* /stats as JSON, and /metrics as Prometheus text; malloc'd, the caller frees. */
char *gw_stats_json(gw_server *srv);
char *gw_stats_prometheus(gw_server *srv, size_t *len);

#endif
