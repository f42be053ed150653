/*
 * The change feed's listener: a connection of its own that LISTENs for what the other
 * writers of the database announce (store_pg_events.c) and hands each announcement to
 * st_options.on_change, on a thread of its own so that neither the store thread's
 * batches nor the gateway's loop ever wait for it.
 *
 * Why LISTEN/NOTIFY: only committed work is told (store_pg.c says when), it needs no
 * table to clean up and no polling, and libpq delivers it on an ordinary connection. Its costs, and
 * the alternatives weighed (logical decoding, polling an events table), are in
 * docs/ARCHITECTURE.md.
 *
 * Trouble. The connection is made again at 1, 2, 4, then every 5 s after it is lost;
 * each time it is up again RESYNC is handed over first, because whatever was announced
 * meanwhile is gone. The server keeps every notification until its slowest listener has
 * read it, in a queue of bounded size whose filling stalls every writer's COMMIT. This
 * thread reads whatever comes at once (the gateway bounds what it keeps, see gw_feed.c),
 * so it is never the slow one. Another listener may be (a gateway that stopped: SIGSTOP,
 * a hung machine): every 2 s this thread reads the queue's usage and which listeners'
 * backends are blocked writing to their client; one seen blocked three times running
 * (4 s and more) is ended with pg_terminate_backend, which frees the queue; that gateway
 * resyncs when it reads again.
 */
#include "store_pg.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHANGES 1024 /* changes in one payload (lines of 8 bytes at the least) */
#define CHECK_MS 2000    /* queue usage and laggards */
#define LAGGARD_SEEN 3   /* consecutive checks blocked before a listener is ended */
#define CONNECT_MS 10000 /* one attempt to connect, all hosts */
#define MAX_LAGGARDS 64

struct pg_feed {
    pthread_t thread;
    int wake[2]; /* written to stop the thread */
    atomic_bool stop;
    uint64_t origin;
    st_change_fn on_change;
    void *ud;
    const char **kw, **val; /* the store's parameters, with application_name last */
    char app[80];
    PGconn *conn;
    bool querying;     /* a check is under way */
    uint64_t check_at; /* monotonic ms */
    int seen_pid[MAX_LAGGARDS], seen_n[MAX_LAGGARDS], n_seen;
    st_change ch[MAX_CHANGES];
    unsigned char dec[8192];
    char why[256]; /* the last connection problem, for nobody but a debugger */

    atomic_bool connected;
    atomic_uint_fast64_t notifications, changes, bytes, resyncs, laggards;
    atomic_uint_fast64_t usage_ppm; /* pg_notification_queue_usage() in millionths */
};

/* Waits for the socket (or the stop); false on stop, timeout or error. */
static bool wait_for(pg_feed *f, int fd, short events, int ms)
{
    struct pollfd pf[2] = {{.fd = fd, .events = events}, {.fd = f->wake[0], .events = POLLIN}};
    int n = poll(pf, 2, ms);
    if (atomic_load(&f->stop))
        return false;
    return n > 0 && (pf[0].revents & (events | POLLERR | POLLHUP));
}

/* Sleeps ms, or until stopped. */
static void pause_ms(pg_feed *f, int ms)
{
    struct pollfd pf = {.fd = f->wake[0], .events = POLLIN};
    poll(&pf, 1, ms);
}

static void drop(pg_feed *f)
{
    if (f->conn)
        PQfinish(f->conn);
    f->conn = NULL;
    f->querying = false;
    atomic_store(&f->connected, false);
}

/* Connects without blocking past CONNECT_MS or a stop; then LISTEN. */
static bool connect_listen(pg_feed *f)
{
    f->conn = PQconnectStartParams(f->kw, f->val, 1);
    if (!f->conn)
        return false;
    uint64_t deadline = st_mono_ms() + CONNECT_MS;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED || PQstatus(f->conn) == CONNECTION_BAD)
            goto fail;
        uint64_t now = st_mono_ms();
        if (now >= deadline ||
            !wait_for(f, PQsocket(f->conn), st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                      (int)(deadline - now)))
            goto fail;
        st = PQconnectPoll(f->conn);
    }
    /* LISTEN on a standby fails (it cannot), which is right: the primary is the one that
     * announces; target_session_attrs in the URL makes libpq pick it. */
    PGresult *r = PQexec(f->conn, "LISTEN gw_feed");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok || PQsetnonblocking(f->conn, 1) != 0)
        goto fail;
    atomic_store(&f->connected, true);
    return true;
fail:
    snprintf(f->why, sizeof(f->why), "%s", f->conn ? PQerrorMessage(f->conn) : "no memory");
    drop(f);
    return false;
}

static void resync(pg_feed *f)
{
    st_change c = {.kind = ST_CH_RESYNC};
    atomic_fetch_add(&f->resyncs, 1);
    f->on_change(f->ud, &c, 1);
}

static void deliver(pg_feed *f, const PGnotify *n)
{
    size_t len = strlen(n->extra), k = 0;
    if (len > sizeof(f->dec))
        return; /* cannot be one of ours: PostgreSQL's payloads are shorter */
    int rc = pg_announce_parse(n->extra, len, f->origin, f->ch, MAX_CHANGES, f->dec, &k);
    if (rc == 1)
        return;
    atomic_fetch_add(&f->notifications, 1);
    atomic_fetch_add(&f->bytes, len);
    if (rc != ST_OK) {
        /* Another build's format, or damage: what it said is lost, so read it all. */
        resync(f);
        return;
    }
    atomic_fetch_add(&f->changes, k);
    if (k)
        f->on_change(f->ud, f->ch, k);
}

/* The check's answer: usage, and the listeners blocked writing to their client. */
static void checked(pg_feed *f, PGresult *r)
{
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        return;
    double usage = strtod(PQgetvalue(r, 0, 0), NULL);
    atomic_store(&f->usage_ppm, (uint64_t)(usage * 1e6));
    /* pids, comma-separated: keep the counts of those seen before, drop the others. */
    int pids[MAX_LAGGARDS], n = 0;
    for (const char *s = PQgetvalue(r, 0, 1); *s && n < MAX_LAGGARDS;) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s)
            break;
        pids[n++] = (int)v;
        s = *e == ',' ? e + 1 : e;
    }
    int seen_pid[MAX_LAGGARDS], seen_n[MAX_LAGGARDS], m = 0;
    for (int i = 0; i < n; i++) {
        int c = 1;
        for (int j = 0; j < f->n_seen; j++)
            if (f->seen_pid[j] == pids[i])
                c = f->seen_n[j] + 1;
        seen_pid[m] = pids[i];
        seen_n[m++] = c;
    }
    memcpy(f->seen_pid, seen_pid, sizeof(seen_pid));
    memcpy(f->seen_n, seen_n, sizeof(seen_n));
    f->n_seen = m;
}

/* Starts the next check, or the end of a laggard found by the last one. */
static void check(pg_feed *f)
{
    char sql[512];
    for (int i = 0; i < f->n_seen; i++) {
        if (f->seen_n[i] >= LAGGARD_SEEN) {
            snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d), ''", f->seen_pid[i]);
            f->seen_n[i] = 0;
            atomic_fetch_add(&f->laggards, 1);
            f->querying = PQsendQuery(f->conn, sql) == 1;
            return;
        }
    }
    f->querying =
        PQsendQuery(f->conn,
                    "SELECT pg_notification_queue_usage(), coalesce(string_agg(pid::text, ','), '')"
                    " FROM pg_stat_activity WHERE application_name LIKE 'gw-feed%'"
                    " AND wait_event = 'ClientWrite' AND pid <> pg_backend_pid()") == 1;
}

/* Reads what came: notifications and the check's result. False: the connection is gone. */
static bool take(pg_feed *f)
{
    if (PQconsumeInput(f->conn) != 1)
        return false;
    while (f->querying && !PQisBusy(f->conn)) {
        PGresult *r = PQgetResult(f->conn);
        if (!r) {
            f->querying = false;
            break;
        }
        checked(f, r);
        PQclear(r);
    }
    PGnotify *n;
    while ((n = PQnotifies(f->conn))) {
        deliver(f, n);
        PQfreemem(n);
    }
    return PQstatus(f->conn) == CONNECTION_OK;
}

static void *feed_main(void *arg)
{
    pg_feed *f = arg;
    int backoff = 1000;
    while (!atomic_load(&f->stop)) {
        if (!f->conn) {
            if (!connect_listen(f)) {
                pause_ms(f, backoff);
                backoff = backoff >= 4000 ? 5000 : backoff * 2;
                continue;
            }
            backoff = 1000;
            resync(f);
            f->check_at = st_mono_ms();
        }
        uint64_t now = st_mono_ms();
        if (!f->querying && now >= f->check_at) {
            check(f);
            f->check_at = now + CHECK_MS;
        }
        if (PQflush(f->conn) < 0) {
            drop(f);
            continue;
        }
        int fd = PQsocket(f->conn);
        struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = f->wake[0], .events = POLLIN}};
        poll(pf, 2, CHECK_MS / 2);
        if (atomic_load(&f->stop))
            break;
        if ((pf[0].revents & (POLLIN | POLLERR | POLLHUP)) && !take(f))
            drop(f);
    }
    drop(f);
    return NULL;
}

pg_feed *pg_feed_start(pg *p, const st_options *o)
{
    pg_feed *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->origin = p->origin;
    f->on_change = o->on_change;
    f->ud = o->change_ud;
    snprintf(f->app, sizeof(f->app), "gw-feed %s", o->node ? o->node : "");
    /* The store's parameters, then application_name again: the last value wins, so the
     * database names this connection as the feed whatever the URL says. */
    size_t n = 0;
    while (p->kw[n])
        n++;
    f->kw = calloc(n + 2, sizeof(char *));
    f->val = calloc(n + 2, sizeof(char *));
    if (!f->kw || !f->val || pipe2(f->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(f->kw);
        free(f->val);
        free(f);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        f->kw[i] = p->kw[i];
        f->val[i] = p->val[i];
    }
    f->kw[n] = "application_name";
    f->val[n] = f->app;
    if (pthread_create(&f->thread, NULL, feed_main, f) != 0) {
        close(f->wake[0]);
        close(f->wake[1]);
        free(f->kw);
        free(f->val);
        free(f);
        return NULL;
    }
    return f;
}

void pg_feed_stop(pg_feed *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    ssize_t w = write(f->wake[1], "x", 1);
    (void)w;
    pthread_join(f->thread, NULL);
    close(f->wake[0]);
    close(f->wake[1]);
    free(f->kw);
    free(f->val);
    free(f);
}

void pg_feed_figures(pg_feed *f, st_stats *out)
{
    if (!f)
        return;
    out->feed_connected = atomic_load(&f->connected);
    out->feed_notifications = atomic_load(&f->notifications);
    out->feed_changes = atomic_load(&f->changes);
    out->feed_bytes = atomic_load(&f->bytes);
    out->feed_resyncs = atomic_load(&f->resyncs);
    out->feed_laggards = atomic_load(&f->laggards);
    out->notify_queue_usage = (double)atomic_load(&f->usage_ppm) / 1e6;
}
