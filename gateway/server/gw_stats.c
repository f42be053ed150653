/*
 * The gateway's figures, for GET /stats (JSON, with jansson) and GET /metrics
 * (Prometheus text exposition). Both are rendered from one table of figures taken in one
 * snapshot, so the two can never disagree or drift apart. Each module counts its own
 * (session/, groups/, cluster/, app/: their *_figs), and this file reads them; the
 * thread that renders asks the other threads for theirs and adds them up (the board).
 */
#include "server_internal.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One figure: where it goes in the JSON, and what it is called in Prometheus. */
typedef struct fig {
    const char *group; /* JSON object it sits in (NULL: top level) */
    const char *key;   /* JSON key (NULL: Prometheus only) */
    const char *prom;  /* Prometheus name (NULL: JSON only, e.g. a rate) */
    const char *type;  /* counter, gauge or summary */
    const char *help;
    const char *label; /* one Prometheus label, "name=value" form split below */
    const char *label_value;
    double v;
    bool integer;    /* JSON: an integer, not a real */
    const char *str; /* JSON: this string instead of v (Prometheus: its label, value 1) */
} fig;

#define MAX_FIGS 256

typedef struct table {
    fig f[MAX_FIGS];
    size_t n;
} table;

static void add(table *t, const char *group, const char *key, const char *prom, const char *type,
                const char *help, double v, bool integer)
{
    if (t->n < MAX_FIGS)
        t->f[t->n++] = (fig){group, key, prom, type, help, NULL, NULL, v, integer, NULL};
}

static void add_label(table *t, const char *group, const char *key, const char *prom,
                      const char *type, const char *help, const char *label,
                      const char *label_value, double v)
{
    if (t->n < MAX_FIGS)
        t->f[t->n++] = (fig){group, key, prom, type, help, label, label_value, v, true, NULL};
}

/* A latency of the store as a Prometheus summary (p50, p99, sum, count; in seconds) and
 * as store.<key_p50>, <key_p99> (ms) in the JSON. names: the family, then its _sum and
 * _count samples (literals: the table keeps the pointers). */
static void summary(table *t, const char *key_p50, const char *key_p99, const char *const names[3],
                    const char *help, uint64_t p50_us, uint64_t p99_us, uint64_t sum_us,
                    uint64_t count)
{
    add_label(t, "store", key_p50, names[0], "summary", help, "quantile", "0.5",
              (double)p50_us / 1e6);
    t->f[t->n - 1].integer = false;
    add_label(t, "store", key_p99, names[0], "summary", help, "quantile", "0.99",
              (double)p99_us / 1e6);
    t->f[t->n - 1].integer = false;
    add(t, NULL, NULL, names[1], "summary", NULL, (double)sum_us / 1e6, false);
    add(t, NULL, NULL, names[2], "summary", NULL, (double)count, true);
}

#define C(group, key, prom, help, v) add(t, group, key, prom, "counter", help, (double)(v), true)
#define G(group, key, prom, help, v) add(t, group, key, prom, "gauge", help, (double)(v), true)
#define R(group, key, v) add(t, group, key, NULL, NULL, NULL, (v), false)

/* The service threads' loops (gw_looplag.c): how long an iteration kept a thread from
 * polling. JSON: loop.iterations, loop.stall_max_ms (the longest since the start, of any
 * thread), loop.stall_recent_ms (the last 10-20 s), loop.over_1ms and over_10ms
 * (iterations that long or longer); Prometheus: the histogram gw_loop_iteration_seconds
 * and the two gauges. */
static void loop_figures(table *t, const gw_figs *all)
{
    const gw_lag_figs *l = &all->n.lag;
    C("loop", "iterations", NULL, NULL, l->iterations);
    add(t, "loop", "stall_max_ms", "gw_loop_stall_max_seconds", "gauge",
        "The longest loop iteration of any service thread since the start (callbacks between "
        "two polls)",
        (double)all->loop_max_us / 1e6, false);
    add(t, "loop", "stall_recent_ms", "gw_loop_stall_recent_seconds", "gauge",
        "The longest loop iteration of any service thread in the last 10 to 20 s",
        (double)all->loop_recent_max_us / 1e6, false);
    uint64_t over_1ms = 0, over_10ms = 0, cum = 0;
    for (size_t b = 0; b < GW_LAG_BUCKETS; b++) {
        uint64_t bound = gw_looplag_bound_us(b);
        if (bound == 0 || bound > 1000)
            over_1ms += l->le[b];
        if (bound == 0 || bound > 10000)
            over_10ms += l->le[b];
        cum += l->le[b];
        add_label(t, NULL, NULL, "gw_loop_iteration_seconds_bucket", "histogram",
                  b == 0 ? "Service threads' loop iterations by busy time (poll to poll)" : NULL,
                  "le", gw_looplag_bound_label(b), (double)cum);
    }
    add(t, NULL, NULL, "gw_loop_iteration_seconds_sum", "histogram", NULL, (double)l->busy_us / 1e6,
        false);
    add(t, NULL, NULL, "gw_loop_iteration_seconds_count", "histogram", NULL, (double)l->iterations,
        true);
    C("loop", "over_1ms", NULL, NULL, over_1ms);
    C("loop", "over_10ms", NULL, NULL, over_10ms);
}

void gw_stats_tick(gw_server *srv)
{
    gw_samples *x = &srv->samples;
    gw_rate_sample *s = &x->s[x->next];
    s->ms = gw_mono_ms();
    s->sends = gw_app_figures(srv->m.app)->sends;
    s->deliveries = gw_sessions_figures(srv->m.sessions)->deliveries;
    s->pushes = gw_groups_figures(srv->m.groups)->pushes;
    x->next = (x->next + 1) % GW_RATE_SAMPLES;
    if (x->n < GW_RATE_SAMPLES)
        x->n++;
}

/* Per second over the last samples (up to ten seconds): now against the oldest kept. */
static void rates(gw_server *srv, gw_figs *f)
{
    const gw_samples *x = &srv->samples;
    f->r_sends = f->r_deliveries = f->r_pushes = 0;
    if (x->n == 0)
        return;
    size_t oldest = (x->next + GW_RATE_SAMPLES - x->n) % GW_RATE_SAMPLES;
    const gw_rate_sample *o = &x->s[oldest];
    double secs = (double)(gw_mono_ms() - o->ms) / 1000.0;
    if (secs < 0.5)
        return;
    f->r_sends = (double)(f->n.app.sends - o->sends) / secs;
    f->r_deliveries = (double)(f->n.sess.deliveries - o->deliveries) / secs;
    f->r_pushes = (double)(f->n.groups.pushes - o->pushes) / secs;
}

/* This thread's figures, now. */
static void thread_figs(gw_server *srv, gw_figs *f)
{
    gw_modules *m = &srv->m;
    memset(f, 0, sizeof(*f));
    f->n.sess = *gw_sessions_figures(m->sessions);
    f->n.groups = *gw_groups_figures(m->groups);
    f->n.cluster = *gw_cluster_figures(m->cluster);
    f->n.app = *gw_app_figures(m->app);
    f->sessions = gw_sessions_count(m->sessions);
    f->authenticated = gw_sessions_authenticated(m->sessions);
    gw_registry_figures(gw_groups_registry(m->groups), &f->users, &f->groups_online,
                        &f->lag_members, &f->lag_total, &f->lag_max);
    f->holes = gw_deliver_holes(gw_groups_deliver(m->groups));
    gw_looplag_figures(srv->lag, &f->n.lag, &f->loop_max_us, &f->loop_recent_max_us);
    uint64_t fq_in, fq_overflows;
    if (m->feed)
        gw_feed_figures(m->feed, &fq_in, &f->feed_dropped, &fq_overflows);
    rates(srv, f);
}

/* Adds f into sum: counts add up, the largest lag and the last webhook status are kept. */
static void figs_add(gw_figs *sum, const gw_figs *f)
{
    /* The modules' counts are uint64_t fields only: added as an array. */
    _Static_assert(sizeof(sum->n) % sizeof(uint64_t) == 0, "figures: uint64_t only");
    uint64_t *a = (uint64_t *)&sum->n;
    const uint64_t *b = (const uint64_t *)&f->n;
    uint64_t status = sum->n.app.webhook_last_status ? sum->n.app.webhook_last_status
                                                     : f->n.app.webhook_last_status;
    for (size_t i = 0; i < sizeof(sum->n) / sizeof(uint64_t); i++)
        a[i] += b[i];
    sum->n.app.webhook_last_status = status;
    sum->sessions += f->sessions;
    sum->authenticated += f->authenticated;
    sum->users += f->users;
    sum->groups_online += f->groups_online;
    sum->lag_members += f->lag_members;
    sum->lag_total += f->lag_total;
    if (f->lag_max > sum->lag_max)
        sum->lag_max = f->lag_max;
    if (f->loop_max_us > sum->loop_max_us)
        sum->loop_max_us = f->loop_max_us;
    if (f->loop_recent_max_us > sum->loop_recent_max_us)
        sum->loop_recent_max_us = f->loop_recent_max_us;
    sum->holes += f->holes;
    sum->feed_dropped += f->feed_dropped;
    sum->r_sends += f->r_sends;
    sum->r_deliveries += f->r_deliveries;
    sum->r_pushes += f->r_pushes;
}

/* ---- the board: the threads' figures for each other ------------------------------------- */

/* How long a request for /stats waits for the other threads' figures at most. */
#define FIGURES_WAIT_MS 100

struct gw_board {
    unsigned n;
    pthread_mutex_t mu;
    uint64_t wanted;                   /* the latest request for figures (under mu) */
    uint64_t answered[GW_THREADS_MAX]; /* the request each thread's figures answer */
    uint64_t waits[GW_THREADS_MAX];    /* the request a thread waits for (0: none) */
    bool stopped[GW_THREADS_MAX];      /* its run has returned: it answers no more */
    gw_figs figs[GW_THREADS_MAX];      /* under mu */
};

gw_board *gw_board_new(unsigned threads)
{
    gw_board *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->n = threads;
    pthread_mutex_init(&b->mu, NULL);
    return b;
}

void gw_board_free(gw_board *b)
{
    if (!b)
        return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static bool all_answered(gw_board *b, unsigned self, uint64_t want)
{
    for (unsigned i = 0; i < b->n; i++)
        if (i != self && !b->stopped[i] && b->answered[i] < want)
            return false;
    return true;
}

/* Under mu, after a thread answered or stopped: the threads whose request is now
 * answered in full, to be woken (a bit each), and no longer waiting. */
static unsigned to_wake(gw_board *b)
{
    unsigned mask = 0;
    for (unsigned i = 0; i < b->n; i++)
        if (b->waits[i] && all_answered(b, i, b->waits[i])) {
            b->waits[i] = 0;
            mask |= 1u << i;
        }
    return mask;
}

static void wake(gw_process *p, unsigned mask)
{
    for (unsigned i = 0; i < p->n; i++)
        if ((mask & 1u << i) && p->srv[i])
            gw_server_wake(p->srv[i]);
}

void gw_board_stopped(gw_process *p, unsigned thread)
{
    gw_board *b = p->board;
    pthread_mutex_lock(&b->mu);
    b->stopped[thread] = true;
    unsigned mask = to_wake(b);
    pthread_mutex_unlock(&b->mu);
    wake(p, mask);
}

/* Under mu: publishes f as thread i's answer to the latest request. */
static void publish(gw_board *b, unsigned i, const gw_figs *f)
{
    b->figs[i] = *f;
    b->answered[i] = b->wanted;
}

void gw_stats_serve(gw_server *srv)
{
    gw_board *b = srv->proc ? srv->proc->board : NULL;
    if (!b)
        return;
    unsigned me = srv->m.thread;
    pthread_mutex_lock(&b->mu);
    bool asked = b->answered[me] < b->wanted;
    pthread_mutex_unlock(&b->mu);
    if (!asked)
        return;
    gw_figs f;
    thread_figs(srv, &f);
    pthread_mutex_lock(&b->mu);
    publish(b, me, &f);
    unsigned mask = to_wake(b);
    pthread_mutex_unlock(&b->mu);
    wake(srv->proc, mask);
}

/* The figures are asked for and rendered apart, so the thread that renders them never
 * waits for the others (a thread busy for a while would hold it up: a stall of its own
 * loop). gw_http.c asks, answers other requests meanwhile, and renders once
 * gw_stats_ready says so: every other thread answered (each wakes it with its answer's
 * last), or FIGURES_WAIT_MS passed (one that did not answer is counted with its last
 * answer). */
uint64_t gw_stats_ask(gw_server *srv)
{
    gw_process *p = srv->proc;
    if (!p || p->n < 2)
        return 0;
    unsigned me = srv->m.thread;
    gw_board *b = p->board;
    gw_figs f;
    thread_figs(srv, &f);
    pthread_mutex_lock(&b->mu);
    uint64_t want = ++b->wanted;
    /* Answer for this thread too: another thread may be waiting for it at this moment. */
    publish(b, me, &f);
    b->waits[me] = want;
    unsigned mask = to_wake(b) & ~(1u << me); /* this thread is awake */
    pthread_mutex_unlock(&b->mu);
    wake(p, mask);
    for (unsigned i = 0; i < p->n; i++)
        if (i != me && p->srv[i])
            gw_server_wake(p->srv[i]);
    return want;
}

bool gw_stats_ready(gw_server *srv, uint64_t want, uint64_t asked_ms)
{
    gw_process *p = srv->proc;
    if (!want || !p || gw_mono_ms() - asked_ms >= FIGURES_WAIT_MS)
        return true;
    pthread_mutex_lock(&p->board->mu);
    bool ready = all_answered(p->board, srv->m.thread, want);
    pthread_mutex_unlock(&p->board->mu);
    return ready;
}

/* Adds the other threads' latest answers into *all (which holds this thread's). */
static void gather(gw_server *srv, gw_figs *all)
{
    gw_process *p = srv->proc;
    unsigned me = srv->m.thread;
    if (!p || p->n < 2)
        return;
    gw_board *b = p->board;
    pthread_mutex_lock(&b->mu);
    for (unsigned i = 0; i < p->n; i++)
        if (i != me)
            figs_add(all, &b->figs[i]);
    pthread_mutex_unlock(&b->mu);
}

/* ---- the table ---------------------------------------------------------------------------- */

static void snapshot(gw_server *srv, table *t)
{
    /* Every service thread's figures, summed; the store's and the process's once. */
    gw_process *p = srv->proc;
    gw_figs all;
    thread_figs(srv, &all);
    gather(srv, &all);
    if (p)
        all.users = gw_hub_users_online(p->hub); /* once each, whatever its threads */
    const gw_sess_figs *ns = &all.n.sess;
    const gw_groups_figs *ng = &all.n.groups;
    const gw_cluster_figs *nc = &all.n.cluster;
    const gw_app_figs *na = &all.n.app;
    st_stats st;
    st_read_stats(srv->m.store, &st);
    gw_presence_figs pf = {0};
    uint64_t rosters = 0;
    if (p) {
        gw_presence_figures(gw_hub_presence(p->hub), &pf);
        rosters = gw_roster_count(gw_hub_roster(p->hub));
    }

    add(t, NULL, "node", "gw_node_info", "gauge",
        "This gateway's node name (its label node), always 1", 1, true);
    t->f[t->n - 1].str = srv->m.cfg.node;
    G(NULL, "threads", "gw_service_threads", "Service threads (--threads), each with its sessions",
      p ? p->n : 1);
    add(t, NULL, "uptime_s", "gw_uptime_seconds", "gauge", "Seconds since the gateway started",
        (double)(gw_mono_ms() - srv->m.started_mono_ms) / 1000.0, false);
    G("connections", "now", "gw_connections", "WebSocket sessions open", all.sessions);
    G("connections", "peak", "gw_connections_peak", "Most sessions open at once",
      ns->connections_peak);
    C("connections", "total", "gw_connections_total", "WebSocket sessions accepted",
      ns->connections);
    G("sessions", "authenticated", "gw_sessions_authenticated", "Sessions past hello",
      all.authenticated);
    C("sessions", "auth_failures", "gw_auth_failures_total", "Refused tokens", na->auth_failures);
    G(NULL, "users_online", "gw_users_online", "Users with at least one session", all.users);
    G("groups", "total", "gw_groups", "Groups in the store", st.groups);
    G("groups", "online", "gw_groups_online", "Groups with an online member", all.groups_online);
    G("messages", "stored", "gw_messages_stored", "Messages in the store", st.messages);
    C("messages", "sends", "gw_sends_total", "Messages stored and confirmed by this gateway",
      na->sends);
    R("messages", "sends_per_s", all.r_sends);
    C("messages", "duplicate_sends", "gw_sends_duplicate_total",
      "Resends of a known cid, answered without storing", na->sends_dup);
    C("messages", "deliveries", "gw_deliveries_total", "Messages queued to a session live",
      ns->deliveries);
    R("messages", "deliveries_per_s", all.r_deliveries);
    C("messages", "pushes", "gw_pushes_total", "Messages fanned out (encoded once each)",
      ng->pushes);
    R("messages", "pushes_per_s", all.r_pushes);
    C("traffic", "bytes_in", "gw_received_bytes_total", "WebSocket payload bytes received",
      ns->bytes_in);
    C("traffic", "bytes_out", "gw_sent_bytes_total", "WebSocket payload bytes sent", ns->bytes_out);
    C("traffic", "frames_in", "gw_frames_received_total", "WebSocket messages received",
      ns->frames_in);
    C("traffic", "frames_out", "gw_frames_sent_total", "WebSocket frames sent (batches count once)",
      ns->frames_out);
    C("acks", "received", "gw_acks_received_total", "Ack entries received", na->acks_received);
    C("acks", "frames", "gw_ack_frames_total", "Ack frames received", na->ack_frames);
    C("acks", "writes", "gw_ack_writes_total", "Ack batches persisted", ng->ack_writes);
    C("acks", "entries_written", "gw_ack_entries_written_total", "Coalesced acks persisted",
      ng->ack_entries);
    add(t, "acks", "deliveries_per_ack_frame", "gw_deliveries_per_ack_frame", "gauge",
        "Live deliveries per ack frame received (ack compression)",
        na->ack_frames ? (double)ns->deliveries / (double)na->ack_frames : 0.0, false);
    /* What members see of each other (docs/PROTOCOL.md: receipts, presence, typing). */
    C("reads", "received", "gw_reads_received_total", "Read cursor entries received",
      na->reads_received);
    C("reads", "frames", "gw_read_frames_total", "Read frames received", na->read_frames);
    C("receipts", "queries", "gw_receipt_queries_total", "Receipts asked (requests and the API)",
      na->receipt_queries);
    C("receipts", "pushes", "gw_receipt_pushes_total", "Cursor pushes sent to watching sessions",
      na->receipt_pushes);
    C("receipts", "roster_reads", "gw_roster_reads_total",
      "Groups' members read from the store for receipts and presence", na->roster_reads);
    G("receipts", "rosters", "gw_rosters", "Groups whose members this process keeps", rosters);
    G("presence", "online", "gw_presence_online_users", "Users online on any node", pf.online);
    G("presence", "nodes", "gw_presence_nodes", "Other nodes heard from (PostgreSQL)", pf.nodes);
    C("presence", "queries", "gw_presence_queries_total", "Presence asked", na->presence_queries);
    C("presence", "pushes", "gw_presence_pushes_total", "Presence changes pushed to subscribers",
      na->presence_pushes);
    C("presence", "signals", "gw_presence_signals_total",
      "Signals sent to the other nodes (online, offline, beats, lists)", pf.signals);
    C("presence", "nodes_gone", "gw_presence_nodes_gone_total",
      "Nodes not heard for 6 s: their users went offline", pf.nodes_gone);
    C("typing", "received", "gw_typing_received_total",
      "Typing frames received (the dropped and refused too)", na->typing_received);
    C("typing", "dropped", "gw_typing_dropped_total",
      "Typing frames dropped (a user's second within 2 s in a group, or over a session's "
      "typing rate)",
      na->typing_dropped);
    C("typing", "over_session_rate", "gw_typing_over_session_rate_total",
      "Typing frames dropped for a session's typing rate across its groups",
      ns->rate_typing_dropped);
    C("typing", "pushes", "gw_typing_pushes_total", "Typing events pushed to sessions",
      na->typing_pushes + nc->typing_pushes);
    C("versions", "edits", "gw_edits_total", "Messages edited by this node's sessions", na->edits);
    C("versions", "recalls", "gw_recalls_total", "Messages recalled by this node's sessions",
      na->recalls);
    C("changes", "reactions", "gw_reactions_total",
      "Reactions set or cleared through this node (sessions and the API)", na->reactions);
    C("changes", "pages", "gw_changes_pages_total", "changes answered (sessions and the API)",
      na->changes_pages);
    C("changes", "react_pushes", "gw_react_pushes_total",
      "reacted pushed to sessions (from any thread or node)", ng->react_pushes);
    C("changes", "changed_pushes", "gw_changed_pushes_total",
      "changed told to sessions (erasures, trims)", ng->changed_pushes);
    C("versions", "pushes", "gw_version_pushes_total",
      "Edits and recalls pushed to sessions (from any thread or node)", ng->version_pushes);
    C("retention", "passes", "gw_retention_passes_total",
      "Retention passes over every group made by this node", na->retain_passes);
    C("retention", "deleted", "gw_retention_deleted_total",
      "Messages deleted past their groups' retention by this node's passes", na->retain_deleted);
    C("retention", "errors", "gw_retention_errors_total", "Retention pages that failed",
      na->retain_errors);
    C("pages", "served", "gw_pages_served_total", "Pages answered (enter, pull)", na->pages);
    C("pages", "messages", "gw_page_messages_total", "Messages sent in pages", na->page_msgs);
    C("requests", "waited", "gw_requests_waited_total",
      "Requests that waited for the session's requests before them", ns->requests_waited);
    C("slow_consumers", "switches", "gw_slow_consumer_switches_total",
      "Sessions switched from pushes to notify", ns->slow_switches);
    C("slow_consumers", "notifies", "gw_notifies_sent_total", "notify messages sent", ns->notifies);
    C("slow_consumers", "changed", "gw_changed_sent_total",
      "changed messages sent (changes not pushed one by one: the client pulls them)",
      ns->changed_sent);
    const struct {
        const char *key, *kind, *fate;
        uint64_t n;
    } past[] = {
        {"typing_dropped", "typing", "dropped", ns->budget_typing_dropped},
        {"presence_deferred", "presence", "deferred", ns->budget_presence_deferred},
        {"watch_deferred", "watch", "deferred", ns->budget_watch_deferred},
        {"version_closes", "version", "closed", ns->budget_version_closes},
        {"react_coalesced", "reaction", "coalesced", ns->budget_react_coalesced},
    };
    for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++)
        add_label(t, "slow_consumers", past[i].key, "gw_pushes_past_budget_total", "counter",
                  "Pushes past a session's outbound budget, by kind: typing dropped, presence "
                  "and watch pushes put off to their next period, sessions closed for edits "
                  "and recalls they did not read",
                  "kind", past[i].kind, (double)past[i].n);
    for (int code = PR_E_BAD_FRAME; code >= PR_E_LAST; code--) {
        if (code == PR_E_NOMEM)
            continue;
        add_label(t, "errors", pr_err_name(code), "gw_errors_total", "counter",
                  "err replies sent, by code", "code", pr_err_name(code),
                  (double)ns->errors[-code]);
    }
    static const struct {
        const char *key;
        size_t off;
    } closes[] = {
        {"unauthorized", offsetof(gw_sess_figs, closes_4001)},
        {"policy", offsetof(gw_sess_figs, closes_1008)},
        {"too_large", offsetof(gw_sess_figs, closes_1009)},
        {"slow_consumer", offsetof(gw_sess_figs, closes_slow)},
        {"try_again", offsetof(gw_sess_figs, closes_4013)},
    };
    for (size_t i = 0; i < sizeof(closes) / sizeof(closes[0]); i++)
        add_label(t, "closes", closes[i].key, "gw_session_closes_total", "counter",
                  "Sessions the gateway closed, by reason", "reason", closes[i].key,
                  (double)*(const uint64_t *)((const char *)ns + closes[i].off));
    const struct {
        const char *key;
        uint64_t n;
    } limited[] = {
        {"sends", ns->rate_sends_refused},
        {"bytes", ns->rate_bytes_refused},
        {"connections", p ? gw_conns_refused(p->conns) : 0}, /* the process's table */
        {"connections_open", p ? gw_conns_refused_held(p->conns) : 0},
    };
    for (size_t i = 0; i < sizeof(limited) / sizeof(limited[0]); i++)
        add_label(t, "rate_limits", limited[i].key, "gw_rate_limited_total", "counter",
                  "Sends refused with rate_limited (by the send or the byte rate) and "
                  "connections refused (per source address: over the rate, or over the "
                  "cap of open ones)",
                  "limit", limited[i].key, (double)limited[i].n);
    C("rate_limits", "byte_pauses", "gw_rate_byte_pauses_total",
      "Frames that overdrew a session's byte rate (reading paused until paid)",
      ns->rate_byte_pauses);
    G("rate_limits", "addresses", "gw_rate_addresses",
      "Source addresses in the connection-rate table (at most 4096)",
      p ? gw_conns_addresses(p->conns) : 0);
    add_label(t, "store", "backend", "gw_store_info", "gauge",
              "The store's backend (label), always 1", "backend", st.backend, 1);
    t->f[t->n - 1].str = st.backend;
    G("store", "connected", "gw_store_connected",
      "1 while the store's backend is reachable (RocksDB: open)", st.connected ? 1 : 0);
    C("store", "reconnects", "gw_store_reconnects_total",
      "Times the backend was connected (or opened) again after trouble", st.reconnects);
    C("store", "commits", "gw_store_commits_total",
      "Group commits (one synced write or one transaction each)", st.commits);
    C("store", "commit_retries", "gw_store_commit_retries_total",
      "Batches applied again after a conflict with another writer of the database",
      st.commit_retries);
    C("store", "commit_failures", "gw_store_commit_failures_total",
      "Group commits the store refused", st.commit_failures);
    add(t, "store", "messages_per_commit", NULL, NULL, NULL,
        st.commits ? (double)st.appends / (double)st.commits : 0.0, false);
    static const char *const commit_names[3] = {"gw_store_commit_duration_seconds",
                                                "gw_store_commit_duration_seconds_sum",
                                                "gw_store_commit_duration_seconds_count"};
    static const char *const read_names[3] = {"gw_store_read_duration_seconds",
                                              "gw_store_read_duration_seconds_sum",
                                              "gw_store_read_duration_seconds_count"};
    summary(t, "commit_p50_ms", "commit_p99_ms", commit_names,
            "Time of one group commit (last 1024 commits)", st.commit_p50_us, st.commit_p99_us,
            st.commit_us_sum, st.commits + st.commit_failures);
    add(t, "store", "reads", NULL, NULL, NULL, (double)st.reads, true);
    summary(t, "read_p50_ms", "read_p99_ms", read_names,
            "Time from a read's request to its answer (last 1024 reads)", st.read_p50_us,
            st.read_p99_us, st.read_us_sum, st.reads);
    G("store", "disk_bytes", "gw_store_disk_bytes", "Bytes of the store's files on disk",
      st.disk_bytes);
    G("store", "writable", "gw_store_writable", "1 while the store accepts writes",
      st.writable ? 1 : 0);
    C("store", "write_errors", "gw_store_write_errors_total",
      "Failed writes to the store's disk (commits, idle probes, reopen attempts)", st.write_errors);
    C("store", "recoveries", "gw_store_recoveries_total",
      "Times the store took writes again after failing", st.recoveries);
    add(t, "store", "unwritable_s", "gw_store_unwritable_seconds", "gauge",
        "How long the store has not been taking writes (0 while it does)",
        (double)st.unwritable_ms / 1000.0, false);
    G("store", "queue", "gw_store_queue_length", "Writes waiting for the store's writer",
      st_pending(srv->m.store));
    /* Shards (store.h): zero on one database. */
    G("store", "shards", "gw_store_shards", "Shards in the slot map (0: one database)", st.shards);
    G("store", "shards_unwritable", "gw_store_shards_unwritable",
      "Shards not taking writes now: their groups' writes are refused, the others' go on",
      st.shards_unwritable);
    G("store", "slot_map_version", "gw_store_slot_map_version", "The slot map's version in force",
      st.map_version);
    C("store", "slot_map_reloads", "gw_store_slot_map_reloads_total",
      "New versions of the slot map taken since start", st.map_reloads);
    C("store", "moved", "gw_store_moved_total",
      "Writes refused because their slot was moving between shards (clients resend them)",
      st.moved);
    G("cluster", "feed_connected", "gw_feed_connected",
      "1 while the listener for other gateways' changes is connected (PostgreSQL)",
      st.feed_connected ? 1 : 0);
    C("cluster", "feed_notifications", "gw_feed_notifications_total",
      "Announcements received from other gateways", st.feed_notifications);
    C("cluster", "feed_changes", "gw_feed_changes_total", "Changes in the announcements received",
      st.feed_changes);
    C("cluster", "feed_bytes", "gw_feed_bytes_total", "Payload bytes of those announcements",
      st.feed_bytes);
    C("cluster", "feed_applied", "gw_feed_applied_total", "Other gateways' changes applied here",
      nc->feed_applied);
    C("cluster", "feed_dropped", "gw_feed_dropped_total",
      "Changes dropped because the service thread fell behind (a resync replaced them)",
      all.feed_dropped);
    C("cluster", "feed_reconnects", "gw_feed_reconnects_total",
      "Times the listener connected (each followed by a catch-up)", st.feed_connects);
    C("cluster", "catch_ups", "gw_catch_ups_total",
      "Catch-ups by position from the change log (one statement each)", st.feed_catch_ups);
    C("cluster", "catch_up_rows", "gw_catch_up_rows_total", "Change log rows those catch-ups read",
      st.feed_catch_up_rows);
    C("cluster", "catch_up_changes", "gw_catch_up_changes_total",
      "Changes in those rows, applied like announcements", st.feed_catch_up_changes);
    C("cluster", "resyncs", "gw_resyncs_total",
      "Times this gateway read again what concerns its online users (no position to catch up "
      "from)",
      ng->resyncs);
    C("cluster", "resync_reads", "gw_resync_reads_total",
      "Reads those resyncs made: one per online user and one per online group", ng->resync_reads);
    C("cluster", "announcements", "gw_feed_announcements_total",
      "Announcements this gateway's commits made", st.feed_announced);
    C("cluster", "hints", "gw_feed_hints_total",
      "Messages announced without their record (too large for a notification)", st.feed_hints);
    C("cluster", "announcements_late", "gw_feed_announcements_late_total",
      "Committed batches whose announcement failed after the commit (sent with a later one)",
      st.feed_late);
    C("cluster", "announcements_dropped", "gw_feed_announcements_dropped_total",
      "Late announcements given up (too many waiting): other gateways catch up by hole reads",
      st.feed_late_dropped);
    C("cluster", "laggards_ended", "gw_feed_laggards_ended_total",
      "Other gateways' listeners ended for not reading their notifications", st.feed_laggards);
    add(t, "cluster", "notify_queue_usage", "gw_notify_queue_usage", "gauge",
        "pg_notification_queue_usage(): the database's notification queue in use (0..1)",
        st.notify_queue_usage, false);
    G("cluster", "holes", "gw_groups_with_hole",
      "Online groups waiting for a message before they can push on", all.holes);
    C("cluster", "held", "gw_messages_held_total", "Messages held until the ones before them came",
      ng->held);
    C("cluster", "hole_reads", "gw_hole_reads_total",
      "Reads of the store to fill a hole in a group's pushes", ng->hole_reads);
    C("cluster", "hole_messages", "gw_hole_messages_total", "Messages pushed from those reads",
      ng->hole_msgs);
    C("cluster", "hole_notifies", "gw_hole_notifies_total",
      "Holes too large to push, told as notify instead", ng->hole_notifies);
    C("api", "requests", "gw_api_requests_total",
      "Server API requests with a valid key (docs/API.md)", na->api_requests);
    C("api", "unauthorized", "gw_api_unauthorized_total",
      "Server API requests refused for their key", na->api_unauthorized);
    C("api", "rate_limited", "gw_api_rate_limited_total",
      "Server API requests refused for their key's rate (--api-rate)", na->api_rate_limited);
    /* The unread webhook (docs/API.md): zero while it is off. */
    C("webhook", "passes", "gw_webhook_passes_total",
      "Looks at unread members after --webhook-delay (a range of messages, or an ack)",
      na->webhook_passes);
    C("webhook", "events", "gw_webhook_events_total", "Unread events made", na->webhook_events);
    C("webhook", "missed", "gw_webhook_missed_total",
      "Messages or acks not looked at (too many waiting, or the store failing)",
      na->webhook_missed);
    C("webhook", "read_errors", "gw_webhook_read_errors_total",
      "Store requests of those looks that failed (tried again)", na->webhook_read_errors);
    C("webhook", "claimed_before", "gw_webhook_claimed_before_total",
      "Events found made before (by this node or another): not made again",
      na->webhook_claimed_before);
    C("webhook", "taken_up", "gw_webhook_taken_up_total",
      "Ranges of messages no node looked at in time (a node died), looked at here",
      na->webhook_taken_up);
    C("webhook", "adopted", "gw_webhook_adopted_total",
      "Events a node that is gone made and had not delivered, sent from here", na->webhook_adopted);
    C("webhook", "mark_errors", "gw_webhook_mark_errors_total",
      "Deliveries the store could not mark as taken (sent again should this node die)",
      na->webhook_mark_errors);
    G("webhook", "queued", "gw_webhook_queued_events", "Events waiting or being sent",
      na->webhook_queued);
    C("webhook", "delivered", "gw_webhook_delivered_total", "Events the receiver took (2xx)",
      na->webhook_delivered);
    C("webhook", "batches", "gw_webhook_batches_total", "Batches the receiver took",
      na->webhook_batches);
    C("webhook", "attempts", "gw_webhook_attempts_total", "POSTs made (first tries and retries)",
      na->webhook_attempts);
    C("webhook", "failures", "gw_webhook_failures_total",
      "POSTs that failed and are tried again (no answer, timeout, 408, 429, 5xx)",
      na->webhook_failures);
    C("webhook", "timeouts", "gw_webhook_timeouts_total",
      "POSTs given up for --webhook-timeout (among the failures)", na->webhook_timeouts);
    C("webhook", "rejected", "gw_webhook_rejected_total",
      "Events dropped because the receiver refused their batch (3xx, 4xx)", na->webhook_rejected);
    C("webhook", "dropped", "gw_webhook_dropped_total",
      "Events dropped because the queue was full (--webhook-queue)", na->webhook_dropped);
    G("webhook", "last_status", "gw_webhook_last_status",
      "The HTTP status of the last answer (0: none, or no answer)", na->webhook_last_status);
    G("lag", "members", "gw_members_online", "Memberships of online users", all.lag_members);
    G("lag", "total", "gw_member_ack_lag_messages", "Sum over online members of last_mid - ack",
      all.lag_total);
    G("lag", "max", "gw_member_ack_lag_max_messages", "Largest last_mid - ack of an online member",
      all.lag_max);
    loop_figures(t, &all);
}

char *gw_stats_json(gw_server *srv)
{
    table t = {.n = 0};
    snapshot(srv, &t);
    json_t *root = json_object();
    for (size_t i = 0; i < t.n; i++) {
        const fig *f = &t.f[i];
        if (!f->key)
            continue;
        json_t *obj = root;
        if (f->group) {
            obj = json_object_get(root, f->group);
            if (!obj) {
                obj = json_object();
                json_object_set_new(root, f->group, obj);
            }
        }
        /* Durations (seconds for Prometheus) read better in ms in JSON: the store's
         * latency quantiles, the loop's stalls. */
        double v = strstr(f->key, "_ms") && !f->integer ? f->v * 1000.0 : f->v;
        json_object_set_new(obj, f->key,
                            f->str       ? json_string(f->str)
                            : f->integer ? json_integer((json_int_t)v)
                                         : json_real(v));
    }
    char *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    return out;
}

char *gw_stats_prometheus(gw_server *srv, size_t *len)
{
    table t = {.n = 0};
    snapshot(srv, &t);
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    const char *typed = ""; /* the family whose HELP/TYPE was written last */
    for (size_t i = 0; i < t.n; i++) {
        const fig *x = &t.f[i];
        if (!x->prom)
            continue;
        if (x->help && strcmp(x->prom, typed) != 0) {
            /* A histogram's family is its name without _bucket. */
            int n = (int)strlen(x->prom);
            if (strcmp(x->type, "histogram") == 0 && n > 7)
                n -= 7;
            fprintf(f, "# HELP %.*s %s\n# TYPE %.*s %s\n", n, x->prom, x->help, n, x->prom,
                    x->type);
            typed = x->prom;
        }
        /* Every sample names the node (--node: letters, digits and ._:- only, so it needs
         * no escaping), so that one Prometheus can scrape every node of a cluster. */
        if (x->label)
            fprintf(f, "%s{node=\"%s\",%s=\"%s\"} ", x->prom, srv->m.cfg.node, x->label,
                    x->label_value);
        else
            fprintf(f, "%s{node=\"%s\"} ", x->prom, srv->m.cfg.node);
        if (x->integer)
            fprintf(f, "%.0f\n", x->v);
        else
            fprintf(f, "%.9g\n", x->v);
    }
    fclose(f);
    return buf;
}
