/*
 * app/: what the gateway does when it is asked. It owns a session's requests (hello,
 * groups, join, leave, send, ack, enter, pull, ping: their checks, their replies, their
 * store jobs and what each completion does), the server API for application backends
 * (its keys, its routes, its store jobs; docs/API.md), the one append op that a
 * session's `send` and the API's POST both make, and the unread webhook (who is told,
 * and the delivery).
 *
 * It stands on cluster/, groups/, session/, net/ and core/, and must never call
 * server/. Everything here runs on its service thread; the API's keys are the process's
 * and are shared by every thread under their own lock.
 */
#ifndef GW_APP_H
#define GW_APP_H

#include "gw_cluster.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct lws;

typedef struct gw_app gw_app;
typedef struct gw_api_keys gw_api_keys;

/* What a thread's app is made with, all borrowed. */
typedef struct gw_app_deps {
    const gw_config *cfg;
    st_store *store;
    struct ev_loop *loop; /* the webhook's (NULL: no loop, the fuzz target: no webhook) */
    pr_decoder *dec;      /* a stored record read back (the API's pages, the webhook) */
    gw_bridge *bridge;
    gw_registry *registry;
    gw_deliver *deliver;
    gw_hub *hub; /* the other service threads (NULL: none) */
    unsigned thread;
    gw_api_keys *keys; /* the server API's (NULL: the API is off) */
} gw_app_deps;

/* What app/ counts: every field a uint64_t (server/ adds them up as such). */
typedef struct gw_app_figs {
    uint64_t sessions_total, auth_failures; /* hellos signed in, tokens refused */
    uint64_t sends, sends_dup;              /* messages stored (a session's or the API's) */
    uint64_t acks_received, ack_frames;
    uint64_t reads_received, read_frames;
    uint64_t receipt_queries, receipt_pushes, roster_reads; /* receipts (gw_peers.c) */
    uint64_t presence_queries, presence_pushes;
    uint64_t typing_received, typing_dropped, typing_pushes;
    uint64_t edits, recalls; /* versions made by this node's sessions (not duplicates) */
    uint64_t reactions;      /* reactions set or cleared through this node (not duplicates) */
    uint64_t changes_pages;  /* `changes` answered (sessions and the API) */
    uint64_t pages, page_msgs;
    uint64_t retain_passes, retain_deleted, retain_errors; /* retention (gw_retain.c) */
    uint64_t api_requests, api_unauthorized, api_rate_limited;
    /* The unread webhook: who is to be told (gw_unread.c), and the delivery (gw_webhook.c). */
    uint64_t webhook_passes, webhook_events, webhook_missed, webhook_read_errors;
    uint64_t webhook_claimed_before; /* made before (here, or by another node): not again */
    uint64_t webhook_taken_up;       /* ranges another node (or this one before) left */
    uint64_t webhook_adopted;        /* events a node that is gone had not delivered */
    uint64_t webhook_mark_errors;    /* deliveries whose store mark failed (sent again if
                                      * this node dies) */
    uint64_t webhook_queued;         /* a gauge: events waiting or in the batch out */
    uint64_t webhook_delivered, webhook_batches, webhook_attempts, webhook_failures;
    uint64_t webhook_timeouts, webhook_rejected, webhook_dropped, webhook_last_status;
} gw_app_figs;

/* With --webhook-url (and a loop), the webhook starts too. NULL (logged) on failure. */
gw_app *gw_app_new(const gw_app_deps *deps);
/* After the sessions are gone, while the loop is still there (the webhook's timers stop;
 * what it had not delivered is logged as lost). NULL is a no-op. */
void gw_app_free(gw_app *a);
/* The hooks the thread's sessions are made with: the app answers their requests. */
gw_sess_hooks gw_app_sess_hooks(gw_app *a);
/* Stopping: requests are refused from now on, but acks (they save clients re-deliveries
 * after the restart) and pings. */
void gw_app_stop(gw_app *a);
const gw_app_figs *gw_app_figures(const gw_app *a);

/* ---- the server API (gw_api.c) ------------------------------------------------------------ */

/* Reads the keys of --api-key-file (NULL path: the API is off, *out NULL). 0 or -1
 * (logged). One set for the process. */
int gw_api_keys_load(const gw_config *cfg, gw_api_keys **out);
void gw_api_keys_free(gw_api_keys *k); /* NULL is a no-op */

/* One API request on its HTTP connection: kept in the HTTP connection's state (server/),
 * its fields the API's alone. */
typedef struct gw_api_conn {
    struct lws *wsi; /* NULL once released */
    char path[512];
    char method[8];
    bool authorized;
    bool routed; /* started: it is never started twice */
    char *body;  /* POST body so far (malloc'd) */
    size_t body_n;
    void *job;                 /* its store job under way, or NULL */
    void (*orphan)(void *job); /* tells that job nobody waits for it any more */
    bool answered;             /* status and answer are set: write them when writable */
    unsigned status;
    json_t *answer;
} gw_api_conn;

/* True for paths the API answers. */
bool gw_api_path(const char *path);
/* LWS_CALLBACK_HTTP of an API path: checks the key; starts a request that takes no body
 * (a POST starts at gw_api_body_done). 1 for a POST (its body follows), else 0. */
int gw_api_begin(gw_app *a, gw_api_conn *c, struct lws *wsi, const char *path, const char *method);
/* A request that server/ refuses before the API looks at it (its URL is too long): c
 * answers the API's error (status, code, msg; no field), to be written as any answer. */
void gw_api_refuse(gw_api_conn *c, struct lws *wsi, unsigned status, const char *code,
                   const char *msg);
/* At the headers, a body declared longer than a request may take: answers 413 (unless
 * already answered) and returns true, so that none of it is read and the connection is
 * closed after the answer. */
bool gw_api_body_refused(gw_app *a, gw_api_conn *c, uint64_t declared);
/* LWS_CALLBACK_HTTP_BODY and _COMPLETION. */
int gw_api_body(gw_app *a, gw_api_conn *c, const void *in, size_t len);
void gw_api_body_done(gw_app *a, gw_api_conn *c, struct lws *wsi);
/* True once the request has its answer (it may have been known at the headers: a bad
 * key, a path that is not there), whether or not its body is in. */
bool gw_api_answered(const gw_api_conn *c);
/* The answer, once there is one: its status, JSON text (malloc'd) and, for a 429, the
 * seconds to wait (its retry_ms rounded up; else 0). */
bool gw_api_ready(const gw_api_conn *c, unsigned *status, char **json, unsigned *retry_s);
/* The connection is done or gone: its job (if any) answers nobody. */
void gw_api_release(gw_api_conn *c);

#endif
