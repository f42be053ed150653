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
 * Catching up by position. Whatever was announced while the connection was down is gone
 * with it; but every announcing batch also wrote its changes, in its transaction, to the
 * change log (gw.changes, store_pg.c), with its transaction's id. The position is the
 * xmin of the snapshot of the last catch-up: every transaction that committed after that
 * snapshot has an id at or above it (it was running then, or began later). So, each time
 * the connection is up again (LISTEN first, then the read: nothing falls between), one
 * statement reads the log's rows from the position on, in their order, and hands their
 * changes over like announcements; the position becomes the xmin of that statement's
 * snapshot. Some rows come twice (those of transactions running at the last snapshot
 * that it saw): a listener takes a change twice without harm. The cost is the rows
 * written since, not the users online. Without a position (the first connection) or with
 * one older than what the log keeps (store_pg.c prunes rows older than its window),
 * RESYNC is handed over instead: read everything again.
 *
 * The position also moves while all is well, or the log would be read from the last
 * reconnect on: the check every 2 s takes its snapshot's xmin too, every 10 s one is
 * kept. It becomes a position once SETTLE_MS have passed with the connection up: by then
 * the announcements of every batch committed before it have come (a batch announces
 * right after its commit; one that could not, within a second or with an 'r' line when
 * its writer is back). A kept one younger than that when the connection drops is
 * forgotten. A writer that could not learn whether a batch committed says so with an
 * 'r' line, maybe long after: that catch-up goes from the oldest position kept (about
 * nine minutes back), in case that batch was older than the newest.
 *
 * Trouble. The connection is made again at once after it is lost (or after a check went
 * unanswered for 10 s: a link that is gone without a word), then 0.25 s after a failed
 * attempt, 0.5 s, and every second (PG_RETRY_FIRST_MS, store_pg.h: after a failover,
 * other nodes' messages are pushed again from the moment it is up), and catches up each
 * time it is up again. The server keeps every notification until its slowest
 * listener has read it, in a queue of bounded size whose filling stalls every writer's COMMIT. This
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
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHANGES 1024      /* changes in one payload (lines of 8 bytes at the least) */
#define CHECK_MS 2000         /* queue usage and laggards */
#define CHECK_ANSWER_MS 10000 /* a check not answered by then: the connection is dropped */
#define LAGGARD_SEEN 3        /* consecutive checks blocked before a listener is ended */
#define CONNECT_MS 10000      /* one attempt to connect, all hosts */
#define MAX_LAGGARDS 64
#define KEEP_EVERY_MS 10000 /* a position kept from the checks */
#define SETTLE_MS 30000     /* ... usable once the connection stayed up that long after it */
#define KEEP_MS 540000      /* positions kept this long (the log keeps 10 minutes) */
#define MAX_POS 64          /* at least KEEP_MS / KEEP_EVERY_MS */

/* A position and from when on it may be caught up from (monotonic ms). */
typedef struct feed_pos {
    uint64_t xid, taken, usable;
} feed_pos;

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
    uint64_t asked_at; /* monotonic ms: when it was sent */
    uint64_t check_at; /* monotonic ms */
    int seen_pid[MAX_LAGGARDS], seen_n[MAX_LAGGARDS], n_seen;
    st_change ch[MAX_CHANGES];
    unsigned char dec[8192];
    char why[256];         /* the last connection problem, for nobody but a debugger */
    feed_pos pos[MAX_POS]; /* oldest first */
    int n_pos;
    uint64_t kept_at;   /* monotonic ms: the last position kept from a check */
    bool want_catch_up; /* an 'r' line came: catch up once no check is under way */

    atomic_bool connected;
    atomic_uint_fast64_t notifications, changes, bytes, resyncs, laggards;
    atomic_uint_fast64_t connects, catch_ups, catch_up_rows, catch_up_changes;
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

/* Keeps a position (the oldest goes past MAX_POS or KEEP_MS). */
static void keep_pos(pg_feed *f, uint64_t xid, uint64_t taken, uint64_t usable)
{
    int skip = 0;
    while (skip < f->n_pos && (f->n_pos - skip >= MAX_POS || f->pos[skip].taken + KEEP_MS < taken))
        skip++;
    memmove(f->pos, f->pos + skip, (size_t)(f->n_pos - skip) * sizeof(*f->pos));
    f->n_pos -= skip;
    f->pos[f->n_pos++] = (feed_pos){xid, taken, usable};
}

/* The position to catch up from: the newest usable one, or (oldest) the oldest; NULL
 * when there is none. */
static const feed_pos *pick_pos(const pg_feed *f, bool oldest)
{
    uint64_t now = st_mono_ms();
    if (oldest)
        return f->n_pos && f->pos[0].usable <= now ? &f->pos[0] : NULL;
    for (int i = f->n_pos - 1; i >= 0; i--)
        if (f->pos[i].usable <= now)
            return &f->pos[i];
    return NULL;
}

static void drop(pg_feed *f)
{
    /* Positions not yet settled cannot be caught up from: announcements of batches
     * before them may be lost with this connection. */
    uint64_t now = st_mono_ms();
    int keep = 0;
    for (int i = 0; i < f->n_pos; i++)
        if (f->pos[i].usable <= now)
            f->pos[keep++] = f->pos[i];
    f->n_pos = keep;
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
    PGresult *r = PQexec(f->conn, "SET statement_timeout = '10s'; LISTEN gw_feed");
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok || PQsetnonblocking(f->conn, 1) != 0)
        goto fail;
    atomic_store(&f->connected, true);
    atomic_fetch_add(&f->connects, 1);
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
        /* Another build's format, or damage: what it said is lost, so catch up. */
        f->want_catch_up = true;
        return;
    }
    /* A writer's word that its changes may be missing: caught up by position. */
    size_t keep = 0;
    for (size_t i = 0; i < k; i++) {
        if (f->ch[i].kind == ST_CH_RESYNC)
            f->want_catch_up = true;
        else
            f->ch[keep++] = f->ch[i];
    }
    atomic_fetch_add(&f->changes, keep);
    if (keep)
        f->on_change(f->ud, f->ch, keep);
}

/* The change log's rows from the position on (none without one), with the position to
 * take next and the greatest xid pruned, in one statement: one snapshot. */
static const char catch_up_sql[] =
    "SELECT x.xmin::text, x.pruned::text, c.body FROM"
    " (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin,"
    "  (SELECT max(xid) FROM gw.changes_pruned) AS pruned) x"
    " LEFT JOIN LATERAL (SELECT seq, body FROM gw.changes WHERE xid >= $1::xid8) c ON true"
    " ORDER BY c.seq";

/* See the top of the file; oldest: from the oldest position kept (an 'r' line). False:
 * the connection is gone (caught up at the next). */
static bool catch_up(pg_feed *f, bool oldest)
{
    f->want_catch_up = false;
    const feed_pos *from = pick_pos(f, oldest);
    char pos[24];
    snprintf(pos, sizeof(pos), "%" PRIu64, from ? from->xid : UINT64_MAX);
    const char *vals[1] = {pos};
    PGresult *r = PQexecParams(f->conn, catch_up_sql, 1, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
        PQclear(r);
        if (PQstatus(f->conn) != CONNECTION_OK)
            return false;
        f->n_pos = 0; /* the log cannot be read (damage? rights?): read it all */
        resync(f);
        return true;
    }
    /* Everything up to this statement's snapshot is handed over below (or read again):
     * its xmin is a position at once. */
    uint64_t now = st_mono_ms();
    uint64_t next = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    uint64_t pruned = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
    if (!from || pruned >= from->xid) {
        keep_pos(f, next, now, now);
        PQclear(r);
        resync(f);
        return true;
    }
    atomic_fetch_add(&f->catch_ups, 1);
    uint64_t rows = 0, changes = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        if (PQgetisnull(r, i, 2))
            continue;
        size_t len = (size_t)PQgetlength(r, i, 2), k = 0;
        rows++;
        if (len > sizeof(f->dec) || pg_announce_parse(PQgetvalue(r, i, 2), len, f->origin, f->ch,
                                                      MAX_CHANGES, f->dec, &k) < 0) {
            /* Not a row this build wrote: what it said is unknown, so read it all. */
            PQclear(r);
            keep_pos(f, next, now, now);
            resync(f);
            return true;
        }
        changes += k;
        if (k)
            f->on_change(f->ud, f->ch, k);
    }
    PQclear(r);
    keep_pos(f, next, now, now);
    atomic_fetch_add(&f->catch_up_rows, rows);
    atomic_fetch_add(&f->catch_up_changes, changes);
    /* Announcements that came while the statement ran wait in libpq, not on the socket. */
    PGnotify *n;
    while ((n = PQnotifies(f->conn))) {
        deliver(f, n);
        PQfreemem(n);
    }
    return true;
}

/* The check's answer: usage, and the listeners blocked writing to their client. */
static void checked(pg_feed *f, PGresult *r)
{
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        return;
    double usage = strtod(PQgetvalue(r, 0, 0), NULL);
    atomic_store(&f->usage_ppm, (uint64_t)(usage * 1e6));
    uint64_t now = st_mono_ms();
    if (PQnfields(r) > 2 && now >= f->kept_at + KEEP_EVERY_MS) {
        f->kept_at = now;
        keep_pos(f, strtoull(PQgetvalue(r, 0, 2), NULL, 10), now, now + SETTLE_MS);
    }
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
        PQsendQuery(
            f->conn,
            "SELECT pg_notification_queue_usage(), coalesce(string_agg(pid::text, ','), ''),"
            " pg_snapshot_xmin(pg_current_snapshot())::text"
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
    int backoff = PG_RETRY_FIRST_MS;
    pthread_setname_np(pthread_self(), "gw-feed");
    while (!atomic_load(&f->stop)) {
        if (!f->conn) {
            if (!connect_listen(f)) {
                pause_ms(f, backoff);
                backoff = backoff * 2 > PG_RETRY_MAX_MS ? PG_RETRY_MAX_MS : backoff * 2;
                continue;
            }
            backoff = PG_RETRY_FIRST_MS;
            if (!catch_up(f, false)) {
                drop(f);
                continue;
            }
            f->check_at = st_mono_ms();
        }
        if (f->want_catch_up && !f->querying && !catch_up(f, true)) {
            drop(f);
            continue;
        }
        uint64_t now = st_mono_ms();
        if (!f->querying && now >= f->check_at) {
            check(f);
            f->asked_at = now;
            f->check_at = now + CHECK_MS;
        }
        /* A check unanswered that long: the link is gone without a word (a partition
         * whose TCP keepalives something in between answers, a hung server). Connect
         * again, and catch up. */
        if (f->querying && now >= f->asked_at + CHECK_ANSWER_MS) {
            snprintf(f->why, sizeof(f->why), "the check was not answered in %d s",
                     CHECK_ANSWER_MS / 1000);
            drop(f);
            continue;
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
    out->feed_connects = atomic_load(&f->connects);
    out->feed_catch_ups = atomic_load(&f->catch_ups);
    out->feed_catch_up_rows = atomic_load(&f->catch_up_rows);
    out->feed_catch_up_changes = atomic_load(&f->catch_up_changes);
    out->feed_laggards = atomic_load(&f->laggards);
    out->notify_queue_usage = (double)atomic_load(&f->usage_ppm) / 1e6;
}
