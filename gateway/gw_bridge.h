/*
 * The completion bridge: how a store request made on the service thread comes back to
 * it. The store runs `done` on its own thread; the bridge links the finished job into a
 * list under a mutex and wakes the service thread (the wake function: lws_cancel_service
 * in the server), which drains the list and runs each job's `complete`, in the order the
 * store finished them. A read the store answers at once completes before submit
 * returns.
 *
 * The bridge knows nothing of libwebsockets or of an event loop: the server and the fuzz
 * target make it the same way, with their own wake function.
 */
#ifndef GW_BRIDGE_H
#define GW_BRIDGE_H

#include "store.h"

typedef struct gw_bridge gw_bridge;
typedef struct gw_job gw_job;

/* Called on the service thread once the job's store request has its result in op. The
 * job belongs to its owner again: it may free it. */
typedef void (*gw_job_fn)(gw_job *j);

/* A store request on its way. Embedded by its owner (a request, an ack batch), which
 * fills op (but op.done and op.ud, the bridge's) and complete. */
struct gw_job {
    st_op op;
    gw_job_fn complete;
    gw_bridge *bridge_; /* private: where it comes back to */
    gw_job *next_;      /* private: the drain list */
};

/* wake(ud) is called on the store thread after a completion is posted. */
gw_bridge *gw_bridge_new(st_store *store, void (*wake)(void *ud), void *ud);
void gw_bridge_free(gw_bridge *b);

/* Hands j->op to the store. Returns 0: j->complete runs later, from gw_bridge_drain; 1:
 * the store answered at once and j->complete has run already; a negative ST_E* code:
 * refused (j->complete is not called). */
int gw_bridge_submit(gw_bridge *b, gw_job *j);

/* fn(ud, op) is called on the service thread with every op drained, before its job's
 * complete, while its inputs are still there: the hub (gw_hub.h) tells the other service
 * threads what a write changed. Ops answered at once (reads) are not shown. */
void gw_bridge_observe(gw_bridge *b, void (*fn)(void *ud, const st_op *op), void *ud);

/* The store was closed (st_close, which frees it): from now on gw_bridge_submit refuses
 * with ST_ECLOSED, so that the completions drained after it cannot reach the store. */
void gw_bridge_close(gw_bridge *b);

/* Runs every posted completion, in order. Service thread. */
void gw_bridge_drain(gw_bridge *b);

/* Store requests submitted and not completed yet. */
unsigned gw_bridge_inflight(const gw_bridge *b);

/* Blocks until a completion is posted (or nothing is in flight). For a caller without an
 * event loop (the fuzz target); the server waits in its loop instead. */
void gw_bridge_wait(gw_bridge *b);

#endif
