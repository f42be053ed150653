/*
 * Private to the store's core (store/core/): the store's state (struct st_store), the
 * store thread, the meaning of the writes, latencies and the trouble policy.
 *
 * The core owns what is the same whatever holds the data: the queue st_submit fills, the
 * store thread that drains it in batches, the meaning of each write (store_apply.c, over
 * the backend's rows), retries, the trouble policy (store_recover.c) and the figures.
 * What a backend may see and call is the core's face, store_backend.h; nothing here is
 * for a backend (rocks/, pg/) or the top (store_open.c), which never include this header.
 */
#ifndef GW_STORE_INTERNAL_H
#define GW_STORE_INTERNAL_H

#include "store_backend.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- the core ------------------------------------------------------------------------- */

#define ST_LAT_N 1024

/* Latencies of the last ST_LAT_N events (commits, reads), for p50 and p99. */
typedef struct st_lat {
    pthread_mutex_t mu;
    uint32_t us[ST_LAT_N];
    size_t n, next;
} st_lat;

struct st_store {
    const st_router *router; /* a router store (st_core_open_router): the rest is unused */
    void *router_ud;
    const st_backend *be_ops;
    void *be;
    bool open_groups;
    size_t max_batch;
    st_event_fn on_event;
    void *event_ud;

    /* The queue, filled by st_submit, drained by the store thread. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    st_op *head;
    st_op *tail;
    atomic_size_t pending; /* ops queued, not yet taken */
    bool closing;          /* under mu: refuse new ops, drain and stop */
    pthread_t thread;

    /* Figures (written by the store thread, read by anyone). */
    atomic_uint_fast64_t commits;
    atomic_uint_fast64_t ops;
    atomic_uint_fast64_t appends;
    atomic_uint_fast64_t commit_failures;
    atomic_uint_fast64_t commit_retries;
    atomic_uint_fast64_t messages; /* counted at open, then kept by the store thread */
    atomic_uint_fast64_t groups;
    atomic_uint_fast64_t commit_us_sum;
    atomic_uint_fast64_t reads;
    atomic_uint_fast64_t read_us_sum;
    atomic_bool writable;
    atomic_uint_fast64_t write_errors;
    atomic_uint_fast64_t recoveries;
    atomic_uint_fast64_t moved;        /* writes refused as their slot was fenced (Shards) */
    atomic_uint_fast64_t failed_at_ms; /* monotonic ms of the first failed write; 0: none */
    st_lat commit_lat, read_lat;

    /* Trouble (store_recover.c): store thread only, except err under err_mu. */
    bool failed;          /* refuse ops until recovered */
    uint64_t retry_at_ms; /* next recovery attempt (monotonic) */
    uint64_t retry_ms;    /* pause before the attempt after that */
    uint64_t attempts;
    uint64_t refused;
    char first_err[512]; /* the failure that started it, for the recovery's log line */
    pthread_mutex_t err_mu;
    char err[512]; /* the latest failure's message, "" while writable */
};

/* The store thread's body (store_writer.c). */
void *st_thread_main(void *arg);

/* The meaning of one write, applied through the backend's rows at server time now
 * (store_apply.c). Returns the op's result; ST_EIO when a row could not be read. A write
 * is checked before it changes anything, so a refused one leaves nothing behind. */
int st_apply(st_store *s, st_op *op, uint64_t now);

/* Latency rings. */
void st_lat_init(st_lat *l);
void st_lat_add(st_lat *l, uint64_t us);
void st_lat_quantiles(st_lat *l, uint64_t *p50, uint64_t *p99);
void st_lat_destroy(st_lat *l);

/* ---- trouble (store_recover.c), store thread only ------------------------------------ */

/* A write failed (why: the backend's message): start refusing ops, schedule recovery. */
void st_fail(st_store *s, const char *why);
/* False while the store refuses ops. While failing, makes a recovery attempt when one
 * is due and returns true if that worked. */
bool st_recover(st_store *s);

#endif
