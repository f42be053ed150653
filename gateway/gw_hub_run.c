/* Running the service threads of a process (gw_hub.h): the gw binary's part, apart from
 * what the threads share so that the fuzz target links without libwebsockets. */
#include "gw_hub.h"
#include "gw_internal.h"
#include "gw_server.h"

#include <pthread.h>

int gw_hub_start(gw_hub *h, const gw_config *cfg, st_store *store)
{
    unsigned n = gw_hub_threads(h);
    gw_config c = *cfg;
    for (unsigned i = 0; i < n; i++) {
        gw_server *srv;
        if (gw_server_new(&c, store, h, i, &srv) != 0)
            return -1;
        c.port = gw_server_port(srv); /* the others listen on the port the first bound */
    }
    for (unsigned i = 0; i < n; i++)
        gw_server_name(gw_hub_server(h, i), c.port);
    return c.port;
}

typedef struct runner {
    gw_hub *hub;
    unsigned index;
    pthread_t tid;
    bool started; /* tid is a thread of ours (the first server runs on the caller's) */
} runner;

static void run_one(gw_hub *h, unsigned i)
{
    gw_server_run(gw_hub_server(h, i));
    gw_hub_stopped(h, i);
}

static void *thread_main(void *ud)
{
    runner *r = ud;
    gw_log_set_thread(r->index);
    run_one(r->hub, r->index);
    return NULL;
}

void gw_hub_run(gw_hub *h)
{
    unsigned n = gw_hub_threads(h);
    runner r[GW_THREADS_MAX];
    for (unsigned i = 1; i < n; i++) {
        r[i] = (runner){.hub = h, .index = i};
        if (pthread_create(&r[i].tid, NULL, thread_main, &r[i]) == 0) {
            r[i].started = true;
        } else {
            /* Connections would be handed to a thread nobody runs: stop, as on SIGTERM. */
            gw_err("cannot start service thread %u of %u: stopping", i + 1, n);
            gw_server_stop_all();
            break;
        }
    }
    run_one(h, 0);
    for (unsigned i = 1; i < n; i++) {
        if (r[i].started)
            pthread_join(r[i].tid, NULL);
        else
            run_one(h, i); /* its stop, at once: the signal is seen */
    }
}

void gw_hub_finish(gw_hub *h)
{
    unsigned n = gw_hub_threads(h);
    for (unsigned i = 0; i < n; i++)
        if (gw_hub_server(h, i))
            gw_server_drain(gw_hub_server(h, i));
    /* The first last: the others borrow its API keys and listen through its socket. */
    for (unsigned i = n; i-- > 0;) {
        gw_server_free(gw_hub_server(h, i));
        gw_hub_attach(h, i, NULL, NULL);
    }
}
