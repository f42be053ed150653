/*
 * For the store tests of trouble: a store whose events (st_options.on_event) are counted,
 * so a test can assert how often it failed, kept failing and recovered.
 */
#ifndef GW_TEST_STORE_FIXTURE_EVENTS_H
#define GW_TEST_STORE_FIXTURE_EVENTS_H

#include "store.h"

#include <stdatomic.h>
#include <stdbool.h>

/* What on_event told, counted on the store thread. */
typedef struct fx_events {
    atomic_int failed;    /* ST_EV_WRITE_FAILED */
    atomic_int still;     /* ST_EV_STILL_FAILING */
    atomic_int recovered; /* ST_EV_RECOVERED */
} fx_events;

/* Opens a store at the place (path or url; the options' defaults otherwise) that counts
 * its events in e (zeroed by the caller), or fails the test. */
st_store *fx_open_events(const char *where, fx_events *e);
/* Waits (at most ms) until *count is at least n; returns whether it is. */
bool fx_wait_count(atomic_int *count, int n, long ms);

#endif
