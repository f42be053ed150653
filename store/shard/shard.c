/*
 * The router's life: opening one core per shard of the map, the thread that watches the
 * map for new versions, the callbacks of the shards' cores (one at a time, as one store
 * would make them), the figures summed over the shards, and closing.
 */
#include "shard_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool st_shard_url(const char *url)
{
    return url && (strncmp(url, "shards:", 7) == 0 || strncmp(url, "etcd://", 7) == 0);
}

/* ---- the shards' callbacks ----------------------------------------------------------- */

static void on_event(void *ud, const st_event *ev)
{
    sh_shard *sh = ud;
    sh_router *r = sh->r;
    char reason[600];
    snprintf(reason, sizeof(reason), "shard %u: %s", sh->index, ev->reason ? ev->reason : "");
    st_event e = *ev;
    e.reason = reason;
    pthread_mutex_lock(&r->cb_mu);
    r->user_event(r->user_event_ud, &e);
    pthread_mutex_unlock(&r->cb_mu);
}

static void on_change(void *ud, const st_change *ch, size_t n)
{
    sh_shard *sh = ud;
    sh_router *r = sh->r;
    /* Each shard's feed thread hands over its own shard's announcements, in its order;
     * the caller's on_change was written for one feed thread. */
    pthread_mutex_lock(&r->cb_mu);
    r->user_change(r->user_change_ud, ch, n);
    pthread_mutex_unlock(&r->cb_mu);
}

/* Opens shard i's core over its URL (the watcher, or open). */
static int open_shard(sh_router *r, unsigned i, const char *url, char *why, size_t why_len)
{
    sh_shard *sh = &r->shard[i];
    sh->r = r;
    sh->index = i;
    if (!(sh->url = strdup(url)))
        return ST_ENOMEM;
    st_options o = r->o;
    o.url = sh->url;
    o.on_event = r->user_event ? on_event : NULL;
    o.event_ud = sh;
    o.on_change = r->user_change ? on_change : NULL;
    o.change_ud = sh;
    o.slots = true;
    char err[512] = "";
    int rc = st_core_open(r->be, &o, &sh->core, err, sizeof(err));
    if (rc != ST_OK) {
        snprintf(why, why_len, "shard %u (%s): %s", i, url, err);
        free(sh->url);
        sh->url = NULL;
    }
    return rc;
}

/* A map read and parsed, newer than the one in force: its new shards opened, then its
 * owners taken. Only the watcher and open call it. */
static int take_map(sh_router *r, sh_map *m, char *why, size_t why_len)
{
    unsigned open = atomic_load(&r->n_open);
    for (unsigned i = 0; i < open && i < m->n; i++)
        if (strcmp(r->shard[i].url, m->url[i]) != 0) {
            /* A shard's index names its databases for good: the rows of its slots are
             * there. Another URL for it (a new host list) needs a restart. */
            snprintf(why, why_len,
                     "slot map version %llu gives shard %u another URL; kept version %llu "
                     "(a shard's URL changes with a restart of the gateway)",
                     (unsigned long long)m->version, i,
                     (unsigned long long)atomic_load(&r->version));
            return ST_EINVAL;
        }
    for (unsigned i = open; i < m->n; i++) {
        int rc = open_shard(r, i, m->url[i], why, why_len);
        if (rc != ST_OK)
            return rc;
        atomic_store(&r->n_open, i + 1);
    }
    for (unsigned s = 0; s < ST_SLOTS; s++)
        atomic_store_explicit(&r->owner[s], m->owner[s], memory_order_relaxed);
    atomic_store(&r->version, m->version);
    return ST_OK;
}

/* Reads the map; takes it when it is newer. 1: taken, 0: nothing new, or an error. */
static int reload(sh_router *r, char *why, size_t why_len)
{
    char *text;
    size_t n;
    int rc = sh_source_read(r->src, &text, &n, why, why_len);
    if (rc != ST_OK)
        return rc;
    if (r->text && strcmp(r->text, text) == 0) {
        free(text);
        return 0;
    }
    sh_map m;
    rc = sh_map_parse(text, n, &m, why, why_len);
    if (rc == ST_OK && m.version <= atomic_load(&r->version) && r->text) {
        /* An older version, or the same one changed in place: a map only moves forward. */
        rc = 0;
    } else if (rc == ST_OK && (rc = take_map(r, &m, why, why_len)) == ST_OK) {
        free(r->text);
        r->text = text;
        text = NULL;
        atomic_fetch_add(&r->reloads, 1);
        rc = 1;
    }
    sh_map_free(&m);
    free(text);
    return rc;
}

static void *watch(void *arg)
{
    sh_router *r = arg;
    pthread_setname_np(pthread_self(), "gw-slots");
    pthread_mutex_lock(&r->mu);
    while (!r->closing) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(SH_WATCH_MS % 1000) * 1000000L;
        until.tv_sec += SH_WATCH_MS / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (!r->closing && pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT) {
        }
        if (r->closing)
            break;
        pthread_mutex_unlock(&r->mu);
        /* A map that cannot be read now (etcd away, a file half written) leaves the one in
         * force: the shards go on as they were, and the next read may do better. */
        char why[512];
        (void)reload(r, why, sizeof(why));
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- the router's table -------------------------------------------------------------- */

static size_t sh_pending(void *ud)
{
    sh_router *r = ud;
    size_t n = 0;
    for (unsigned i = 0, k = atomic_load(&r->n_open); i < k; i++)
        n += st_pending(r->shard[i].core);
    return n;
}

/* While any shard takes writes: its groups' writes go on, and a node that answered 503 to
 * its load balancer's health check for one shard away would take every shard's users out
 * with it (every node sees the same shards). How many do not: st_stats.shards_unwritable. */
static bool sh_writable(void *ud)
{
    sh_router *r = ud;
    for (unsigned i = 0, k = atomic_load(&r->n_open); i < k; i++)
        if (st_writable(r->shard[i].core))
            return true;
    return false;
}

static void sh_write_error(void *ud, char *buf, size_t len)
{
    sh_router *r = ud;
    size_t at = 0;
    buf[0] = 0;
    for (unsigned i = 0, k = atomic_load(&r->n_open); i < k && at + 1 < len; i++) {
        char err[512];
        st_write_error(r->shard[i].core, err, sizeof(err));
        if (*err) {
            int w = snprintf(buf + at, len - at, "%sshard %u: %s", at ? "; " : "", i, err);
            at += w > 0 ? (size_t)w : 0;
        }
    }
}

#define MAX_OF(a, b) ((a) > (b) ? (a) : (b))

static void sh_stats(void *ud, st_stats *out)
{
    sh_router *r = ud;
    memset(out, 0, sizeof(*out));
    out->backend = r->be->name;
    out->connected = out->feed_connected = true;
    unsigned k = atomic_load(&r->n_open);
    for (unsigned i = 0; i < k; i++) {
        st_stats s;
        st_read_stats(r->shard[i].core, &s);
        out->connected &= s.connected;
        out->writable |= s.writable;
        out->feed_connected &= s.feed_connected;
        out->shards_unwritable += !s.writable;
        out->unwritable_ms = MAX_OF(out->unwritable_ms, s.unwritable_ms);
        out->commit_p50_us = MAX_OF(out->commit_p50_us, s.commit_p50_us);
        out->commit_p99_us = MAX_OF(out->commit_p99_us, s.commit_p99_us);
        out->read_p50_us = MAX_OF(out->read_p50_us, s.read_p50_us);
        out->read_p99_us = MAX_OF(out->read_p99_us, s.read_p99_us);
        out->notify_queue_usage = MAX_OF(out->notify_queue_usage, s.notify_queue_usage);
#define SUM(f) out->f += s.f
        SUM(reconnects);
        SUM(commits);
        SUM(ops);
        SUM(appends);
        SUM(commit_failures);
        SUM(commit_retries);
        SUM(write_errors);
        SUM(moved);
        SUM(recoveries);
        SUM(messages);
        SUM(groups);
        SUM(commit_us_sum);
        SUM(reads);
        SUM(read_us_sum);
        SUM(disk_bytes);
        SUM(feed_notifications);
        SUM(feed_changes);
        SUM(feed_bytes);
        SUM(feed_resyncs);
        SUM(feed_connects);
        SUM(feed_catch_ups);
        SUM(feed_catch_up_rows);
        SUM(feed_catch_up_changes);
        SUM(feed_announced);
        SUM(feed_hints);
        SUM(feed_late);
        SUM(feed_late_dropped);
        SUM(feed_laggards);
#undef SUM
    }
    if (!r->user_change)
        out->feed_connected = false;
    out->shards = k;
    out->map_version = atomic_load(&r->version);
    out->map_reloads = atomic_load(&r->reloads);
}

static const char *sh_name(void *ud)
{
    return ((sh_router *)ud)->be->name;
}

static const char *sh_where(void *ud)
{
    return ((sh_router *)ud)->where;
}

static uint64_t sh_origin(void *ud)
{
    return ((sh_router *)ud)->o.origin;
}

static void sh_close(void *ud)
{
    sh_router *r = ud;
    if (r->src) {
        pthread_mutex_lock(&r->mu);
        r->closing = true;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        if (atomic_load(&r->watching)) /* the watcher was started */
            pthread_join(r->watcher, NULL);
    }
    for (unsigned i = 0; i < SH_MAX; i++) {
        st_close(r->shard[i].core);
        free(r->shard[i].url);
    }
    sh_source_free(r->src);
    free(r->text);
    free(r->url);
    free(r->node);
    pthread_mutex_destroy(&r->cb_mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static const st_router router = {
    .submit = sh_submit,
    .pending = sh_pending,
    .writable = sh_writable,
    .write_error = sh_write_error,
    .stats = sh_stats,
    .name = sh_name,
    .where = sh_where,
    .origin = sh_origin,
    .close = sh_close,
};

int st_shard_open(const st_options *o, const st_backend *be, st_store **out, char *errmsg,
                  size_t errmsg_len)
{
    *out = NULL;
    char why[512] = "";
    sh_router *r = calloc(1, sizeof(*r));
    if (!r)
        return ST_ENOMEM;
    pthread_mutex_init(&r->cb_mu, NULL);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->be = be;
    r->o = *o;
    r->url = strdup(o->url);
    r->node = o->node ? strdup(o->node) : NULL;
    r->o.url = r->url;
    r->o.node = r->node;
    r->user_event = o->on_event;
    r->user_event_ud = o->event_ud;
    r->user_change = o->on_change;
    r->user_change_ud = o->change_ud;
    /* One origin for every shard: a node's own announcements are known as its own on each
     * shard's feed, and the others hear one gateway whichever shard it wrote to. */
    if (!r->o.origin && RAND_bytes((unsigned char *)&r->o.origin, sizeof(r->o.origin)) != 1)
        r->o.origin = st_now_ms() ^ 0x5eedULL << 40;
    int rc = !r->url || (o->node && !r->node) ? ST_ENOMEM : ST_OK;
    if (rc == ST_OK)
        rc = sh_source_new(o->url, &r->src, why, sizeof(why));
    if (rc == ST_OK) {
        curl_global_init(CURL_GLOBAL_DEFAULT); /* reference-counted: the webhook's too */
        rc = reload(r, why, sizeof(why));
        rc = rc == 1 ? ST_OK : rc == 0 ? ST_EIO : rc;
    }
    if (rc == ST_OK) {
        unsigned k = atomic_load(&r->n_open);
        int at = snprintf(r->where, sizeof(r->where),
                          "%s, version %llu, %u shard%s:", sh_source_where(r->src),
                          (unsigned long long)atomic_load(&r->version), k, k == 1 ? "" : "s");
        for (unsigned i = 0; i < k && at > 0 && (size_t)at < sizeof(r->where); i++)
            at += snprintf(r->where + at, sizeof(r->where) - (size_t)at, " %u %s", i,
                           st_where(r->shard[i].core));
        if (pthread_create(&r->watcher, NULL, watch, r) != 0) {
            snprintf(why, sizeof(why), "cannot start the slot map's watcher");
            rc = ST_EIO;
        } else {
            atomic_store(&r->watching, true);
        }
    }
    if (rc == ST_OK)
        rc = st_core_open_router(&router, r, out);
    if (rc != ST_OK) {
        if (errmsg && errmsg_len)
            snprintf(errmsg, errmsg_len, "store: %s", *why ? why : st_strerror(rc));
        sh_close(r);
        return rc == ST_ENOMEM ? rc : ST_EIO;
    }
    return ST_OK;
}
