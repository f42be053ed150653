/*
 * The process (gw_server.h): what only the process has (the hub where the service
 * threads meet, the connection-rate table, the listening socket, the API's keys, the
 * figures board), and making, running and ending one server per service thread.
 *
 * Why a context per thread: Debian's libwebsockets is built with one service thread per
 * context (LWS_MAX_SMP 1).
 */
#include "server_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void gw_process_free(gw_process *p)
{
    if (!p)
        return;
    gw_listen_free(p->listener);
    gw_api_keys_free(p->keys);
    gw_board_free(p->board);
    gw_conns_free(p->conns);
    gw_hub_free(p->hub);
    free(p);
}

gw_process *gw_process_new(const gw_config *cfg)
{
    gw_process *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->cfg = *cfg;
    p->n = cfg->threads ? cfg->threads : 1;
    p->hub = gw_hub_new(p->n);
    p->conns = gw_conns_new(cfg, gw_now_ms()); /* one table of addresses for every thread */
    p->board = gw_board_new(p->n);
    if (!p->hub || !p->conns || !p->board) {
        gw_err("out of memory");
        gw_process_free(p);
        return NULL;
    }
    /* The API's keys and rates are the process's: read once, shared by every thread. */
    if (gw_api_keys_load(cfg, &p->keys) != 0) {
        gw_process_free(p);
        return NULL;
    }
    return p;
}

gw_feeds *gw_process_feeds(gw_process *p)
{
    return gw_hub_feeds(p->hub);
}

int gw_process_start(gw_process *p, const gw_config *cfg, st_store *store)
{
    /* One listening socket, on the first thread's loop, for all of them: bound before the
     * others are made, so that a port in use fails the start at once. */
    if (gw_server_new(cfg, store, p, 0, &p->srv[0]) != 0)
        return -1;
    p->listener = gw_listen_new(p->srv[0]->m.loop, cfg->listen, cfg->port, p->n, p->conns);
    if (!p->listener)
        return -1;
    for (unsigned i = 1; i < p->n; i++)
        if (gw_server_new(cfg, store, p, i, &p->srv[i]) != 0)
            return -1;
    int port = gw_listen_port(p->listener);
    gw_hub_set_store(p->hub, store); /* presence tells the other nodes through it */
    for (unsigned i = 0; i < p->n; i++) {
        gw_listen_attach(p->listener, i, gw_server_adopt, gw_server_wake, p->srv[i]);
        gw_server_name(p->srv[i], port);
    }
    return port;
}

void gw_process_store_closing(gw_process *p)
{
    gw_hub_set_store(p->hub, NULL);
}

typedef struct runner {
    gw_process *p;
    unsigned index;
    pthread_t tid;
    bool started; /* tid is a thread of ours (the first server runs on the caller's) */
} runner;

static void run_one(gw_process *p, unsigned i)
{
    gw_server_run(p->srv[i]);
    gw_listen_thread_done(p->listener, i);
    gw_board_stopped(p, i);
}

static void *thread_main(void *ud)
{
    runner *r = ud;
    char name[16];
    snprintf(name, sizeof(name), "gw-t%u", r->index + 1); /* the log's t2, t3... */
    pthread_setname_np(pthread_self(), name);
    gw_log_set_thread(r->index);
    run_one(r->p, r->index);
    return NULL;
}

void gw_process_run(gw_process *p)
{
    runner r[GW_THREADS_MAX];
    for (unsigned i = 1; i < p->n; i++) {
        r[i] = (runner){.p = p, .index = i};
        if (pthread_create(&r[i].tid, NULL, thread_main, &r[i]) == 0) {
            r[i].started = true;
        } else {
            /* Connections would be handed to a thread nobody runs: stop, as on SIGTERM. */
            gw_err("cannot start service thread %u of %u: stopping", i + 1, p->n);
            gw_server_stop_all();
            break;
        }
    }
    run_one(p, 0);
    for (unsigned i = 1; i < p->n; i++) {
        if (r[i].started)
            pthread_join(r[i].tid, NULL);
        else
            run_one(p, i); /* its stop, at once: the signal is seen */
    }
}

void gw_process_finish(gw_process *p)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->srv[i])
            gw_server_drain(p->srv[i]);
    /* The listener's watchers are on the first thread's loop, which goes with its server. */
    gw_listen_free(p->listener);
    p->listener = NULL;
    for (unsigned i = p->n; i-- > 0;) {
        gw_server_free(p->srv[i]);
        p->srv[i] = NULL;
    }
}
