/*
 * The unread webhook's delivery (app_internal.h): a bounded queue of events, POSTed in
 * batches to --webhook-url with libcurl's multi interface on the gateway's libev loop.
 *
 * One batch is out at a time, in queue order: it takes what has queued (at most
 * --webhook-batch events) LINGER_S after the first event came, or at once when that
 * many wait. Its body is made once; each attempt signs it anew:
 *
 *   X-GW-Signature: t=UNIX_SECONDS,v1=HEX(HMAC-SHA256(secret, "UNIX_SECONDS." + body))
 *
 * (the scheme Stripe's webhooks use: the receiver checks the MAC and that t is recent,
 * which stops a replay). A 2xx answer delivers it. A failure to connect or send, a
 * timeout (--webhook-timeout), 408, 429 or 5xx is tried again after a pause that doubles
 * from BACKOFF_MIN_S up to BACKOFF_MAX_S (with jitter), for as long as it takes: events
 * queue behind it meanwhile, and past --webhook-queue the newest are dropped and counted.
 * Any other answer (a 3xx, a 4xx: the receiver refuses the request as such) drops the
 * batch, counted as rejected and logged, as retrying cannot change it.
 */
#include "app_internal.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#define LINGER_S 0.1
#define BACKOFF_MIN_S 0.5
#define BACKOFF_MAX_S 30.0
#define CONNECT_TIMEOUT_MS 5000L

/* libcurl's interest in one socket, as a libev watcher. */
typedef struct sock_watch {
    ev_io io; /* first */
    curl_socket_t fd;
    gw_webhook *w;
    struct sock_watch *prev, *next; /* every one, freed at the end if libcurl did not */
} sock_watch;

struct gw_webhook {
    gw_app *a;
    CURLM *multi;
    ev_timer curl_timer; /* libcurl's own timeouts */
    ev_timer send_timer; /* the linger before a batch, or the pause before a retry */

    sock_watch *watches;
    json_t **q; /* events waiting: a ring */
    size_t head, len, cap;

    /* The batch out, or waiting to be tried again. */
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    size_t batch_n;   /* events in it */
    char (*ids)[33];  /* their ids, for the store's mark that they were taken */
    unsigned attempt; /* attempts so far */
    bool busy;        /* a batch exists (out or waiting for its retry) */
    char delivery[40];
    char err[CURL_ERROR_SIZE];
    uint64_t seq;
    char boot[17]; /* random: delivery ids differ across restarts */
};

static void start_batch(gw_webhook *w);
static void attempt(gw_webhook *w);

/* ---- libcurl on libev --------------------------------------------------------------- */

static void drive(gw_webhook *w, curl_socket_t fd, int action);

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    sock_watch *s = (sock_watch *)io;
    drive(s->w, s->fd,
          (revents & EV_READ ? CURL_CSELECT_IN : 0) | (revents & EV_WRITE ? CURL_CSELECT_OUT : 0));
}

static void on_curl_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    drive((gw_webhook *)((char *)t - offsetof(gw_webhook, curl_timer)), CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_SOCKETFUNCTION: watch fd as libcurl asks. */
static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)e;
    gw_webhook *w = userp;
    sock_watch *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            ev_io_stop(w->a->d.loop, &s->io);
            DL_DELETE(w->watches, s);
            free(s);
            curl_multi_assign(w->multi, fd, NULL);
        }
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s)
            return -1;
        s->fd = fd;
        s->w = w;
        DL_APPEND(w->watches, s);
        curl_multi_assign(w->multi, fd, s);
    } else {
        ev_io_stop(w->a->d.loop, &s->io);
    }
    int ev = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    ev_io_init(&s->io, on_io, fd, ev);
    ev_io_start(w->a->d.loop, &s->io);
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: one timer, moved as libcurl asks (-1: none). */
static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    gw_webhook *w = userp;
    ev_timer_stop(w->a->d.loop, &w->curl_timer);
    if (timeout_ms >= 0) {
        ev_timer_set(&w->curl_timer, (double)timeout_ms / 1000.0, 0);
        ev_timer_start(w->a->d.loop, &w->curl_timer);
    }
    return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p, (void)ud;
    return size * n; /* the receiver's answer body is not used */
}

/* ---- batches ------------------------------------------------------------------------ */

static void end_batch(gw_webhook *w)
{
    if (w->easy) {
        curl_multi_remove_handle(w->multi, w->easy);
        curl_easy_cleanup(w->easy);
        w->easy = NULL;
    }
    curl_slist_free_all(w->headers);
    w->headers = NULL;
    free(w->body);
    w->body = NULL;
    free(w->ids);
    w->ids = NULL;
    w->a->figs.webhook_queued -= w->batch_n;
    w->batch_n = 0;
    w->busy = false;
}

/* The store's mark that a batch's events were taken (TELL_SENT): they are then no
 * other gateway's to send again should this one die. */
typedef struct sent_job {
    gw_job job; /* first: the completion finds it from its job */
    gw_app *a;
    st_tell *tells;
    char (*ids)[33];
} sent_job;

static void sent_done(gw_job *j)
{
    sent_job *sj = (sent_job *)j;
    if (j->op.result != 0) {
        /* Left unsent: if this gateway dies within the hour they are kept, another one
         * sends them again (the receiver dedups by id). */
        sj->a->figs.webhook_mark_errors++;
        gw_dbg("webhook: cannot mark %zu events taken: %s", j->op.n_tells,
               st_strerror(j->op.result));
    }
    free(sj->tells);
    free(sj->ids);
    free(sj);
}

static void mark_sent(gw_webhook *w)
{
    sent_job *sj = calloc(1, sizeof(*sj));
    size_t n = 0;
    if (sj && w->ids && (sj->tells = calloc(w->batch_n, sizeof(*sj->tells)))) {
        sj->ids = w->ids; /* the batch's ids go with the job */
        w->ids = NULL;
        for (size_t i = 0; i < w->batch_n; i++)
            if (sj->ids[i][0])
                sj->tells[n++].id = st_id_str(sj->ids[i]);
    }
    if (!sj || n == 0) {
        if (sj) {
            free(sj->tells);
            free(sj->ids);
        }
        free(sj);
        return;
    }
    sj->a = w->a;
    sj->job.op = (st_op){.kind = ST_OP_TELL_SENT, .tells = sj->tells, .n_tells = n};
    sj->job.complete = sent_done;
    int rc = gw_bridge_submit(w->a->d.bridge, &sj->job);
    if (rc < 0) {
        sj->job.op.result = rc;
        sent_done(&sj->job);
    }
}

/* What comes next: a batch at once if a whole one waits, else after the linger. */
static void next(gw_webhook *w)
{
    if (w->busy || w->len == 0)
        return;
    if (w->len >= w->a->d.cfg->webhook_batch) { /* a whole batch waits: no more lingering */
        ev_timer_stop(w->a->d.loop, &w->send_timer);
        start_batch(w);
        return;
    }
    if (ev_is_active(&w->send_timer))
        return;
    ev_timer_set(&w->send_timer, LINGER_S, 0);
    ev_timer_start(w->a->d.loop, &w->send_timer);
}

static void on_send_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    gw_webhook *w = (gw_webhook *)((char *)t - offsetof(gw_webhook, send_timer));
    if (w->busy)
        attempt(w); /* the pause before a retry is over */
    else
        start_batch(w);
}

static void retry_later(gw_webhook *w, const char *why)
{
    gw_app *a = w->a;
    a->figs.webhook_failures++;
    double pause = BACKOFF_MIN_S;
    for (unsigned i = 1; i < w->attempt && pause < BACKOFF_MAX_S; i++)
        pause *= 2;
    if (pause > BACKOFF_MAX_S)
        pause = BACKOFF_MAX_S;
    unsigned char r;
    RAND_bytes(&r, 1);
    pause *= 0.8 + 0.4 * r / 255.0; /* jitter: nodes that failed together do not retry so */
    /* The first failures in a row are logged, then one in ten: a receiver that is down
     * for an hour does not fill the log. */
    if (w->attempt <= 3 || w->attempt % 10 == 0)
        gw_warn("webhook: POST %s failed (%s): %zu events, attempt %u, again in %.1f s",
                a->d.cfg->webhook_url, why, w->batch_n, w->attempt, pause);
    curl_multi_remove_handle(w->multi, w->easy);
    ev_timer_set(&w->send_timer, pause, 0);
    ev_timer_start(a->d.loop, &w->send_timer);
}

static void finished(gw_webhook *w, CURLcode rc)
{
    gw_app *a = w->a;
    long status = 0;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    a->figs.webhook_last_status = rc == CURLE_OK ? (uint64_t)status : 0;
    char why[CURL_ERROR_SIZE + 32];
    if (rc != CURLE_OK) {
        snprintf(why, sizeof(why), "%s", w->err[0] ? w->err : curl_easy_strerror(rc));
        if (rc == CURLE_OPERATION_TIMEDOUT)
            a->figs.webhook_timeouts++;
        retry_later(w, why);
        return;
    }
    if (status >= 200 && status < 300) {
        a->figs.webhook_delivered += w->batch_n;
        a->figs.webhook_batches++;
        if (w->attempt > 1)
            gw_info("webhook: delivered %zu events after %u attempts", w->batch_n, w->attempt);
        mark_sent(w);
        end_batch(w);
        next(w);
        return;
    }
    if (status == 408 || status == 429 || status >= 500) {
        snprintf(why, sizeof(why), "HTTP %ld", status);
        retry_later(w, why);
        return;
    }
    gw_warn("webhook: POST %s answered HTTP %ld: %zu events dropped (a 3xx or 4xx is not "
            "retried: check the URL and the receiver)",
            a->d.cfg->webhook_url, status, w->batch_n);
    a->figs.webhook_rejected += w->batch_n;
    mark_sent(w); /* refused as such: no node is to send them again */
    end_batch(w);
    next(w);
}

static void drive(gw_webhook *w, curl_socket_t fd, int action)
{
    int running;
    curl_multi_socket_action(w->multi, fd, action, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(w->multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == w->easy)
            finished(w, m->data.result);
}

/* Signs the batch for this attempt and sends it. */
static void attempt(gw_webhook *w)
{
    gw_app *a = w->a;
    w->attempt++;
    a->figs.webhook_attempts++;
    char t[24];
    snprintf(t, sizeof(t), "%llu", (unsigned long long)(gw_now_ms() / 1000));
    size_t body_n = strlen(w->body);
    /* HMAC-SHA256 over "t." + body, fed in pieces (no copy of the body). */
    unsigned char mac[32];
    unsigned int mac_n = 0;
    EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = alg ? EVP_MAC_CTX_new(alg) : NULL;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0),
                           OSSL_PARAM_construct_end()};
    size_t out_n = 0;
    bool ok = ctx &&
              EVP_MAC_init(ctx, (const unsigned char *)a->d.cfg->webhook_secret,
                           a->d.cfg->webhook_secret_n, params) &&
              EVP_MAC_update(ctx, (const unsigned char *)t, strlen(t)) &&
              EVP_MAC_update(ctx, (const unsigned char *)".", 1) &&
              EVP_MAC_update(ctx, (const unsigned char *)w->body, body_n) &&
              EVP_MAC_final(ctx, mac, &out_n, sizeof(mac));
    mac_n = (unsigned int)out_n;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(alg);
    char sig[128], hex[65];
    for (unsigned i = 0; ok && i < mac_n; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    if (!ok) {
        gw_err("webhook: cannot sign a batch (OpenSSL HMAC): %zu events dropped", w->batch_n);
        a->figs.webhook_rejected += w->batch_n;
        end_batch(w);
        next(w);
        return;
    }
    snprintf(sig, sizeof(sig), "X-GW-Signature: t=%s,v1=%s", t, hex);
    char att[48];
    snprintf(att, sizeof(att), "X-GW-Attempt: %u", w->attempt);
    char dlv[64];
    snprintf(dlv, sizeof(dlv), "X-GW-Delivery: %s", w->delivery);
    curl_slist_free_all(w->headers);
    w->headers = NULL;
    const char *hs[] = {
        "Content-Type: application/json", "User-Agent: gw-webhook/1", "Expect:", sig, att, dlv};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        w->headers = curl_slist_append(w->headers, hs[i]);

    if (!w->easy) {
        w->easy = curl_easy_init();
        if (!w->easy) {
            retry_later(w, "curl_easy_init failed");
            return;
        }
        curl_easy_setopt(w->easy, CURLOPT_URL, a->d.cfg->webhook_url);
        curl_easy_setopt(w->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(w->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, (long)a->d.cfg->webhook_timeout_ms);
        curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
        curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->err);
    }
    curl_easy_setopt(w->easy, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_n);
    curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->headers);
    w->err[0] = 0;
    CURLMcode mc = curl_multi_add_handle(w->multi, w->easy);
    if (mc != CURLM_OK)
        retry_later(w, curl_multi_strerror(mc));
}

/* Takes the events at the head of the queue as one batch and sends it. */
static void start_batch(gw_webhook *w)
{
    gw_app *a = w->a;
    if (w->busy || w->len == 0)
        return;
    json_t *events = json_array();
    size_t n = w->len < a->d.cfg->webhook_batch ? w->len : a->d.cfg->webhook_batch;
    w->ids = calloc(n, sizeof(*w->ids)); /* NULL: they are not marked taken (sent again) */
    for (size_t i = 0; i < n; i++) {
        const char *id = json_string_value(json_object_get(w->q[w->head], "id"));
        if (w->ids && id && strlen(id) < sizeof(w->ids[i]))
            strcpy(w->ids[i], id);
        json_array_append_new(events, w->q[w->head]);
        w->head = (w->head + 1) % w->cap;
        w->len--;
    }
    snprintf(w->delivery, sizeof(w->delivery), "%s-%llu", w->boot, (unsigned long long)++w->seq);
    json_t *batch = json_pack("{s:s, s:s, s:o}", "delivery", w->delivery, "node", a->d.cfg->node,
                              "events", events);
    w->body = batch ? json_dumps(batch, JSON_COMPACT) : NULL;
    json_decref(batch);
    w->batch_n = n;
    w->busy = true;
    w->attempt = 0;
    if (!w->body) {
        gw_err("webhook: out of memory: %zu events dropped", n);
        a->figs.webhook_rejected += n;
        end_batch(w);
        next(w);
        return;
    }
    attempt(w);
}

/* ---- the queue ---------------------------------------------------------------------- */

bool gw_webhook_push(gw_webhook *w, json_t *event)
{
    if (!w) {
        json_decref(event);
        return false;
    }
    gw_app *a = w->a;
    if (w->len + w->batch_n >= w->cap) { /* the batch out counts: --webhook-queue in all */
        a->figs.webhook_dropped++;
        if (a->figs.webhook_dropped == 1 || a->figs.webhook_dropped % 1000 == 0)
            gw_warn("webhook: queue full (%zu events, --webhook-queue): %llu events dropped "
                    "so far",
                    w->cap, (unsigned long long)a->figs.webhook_dropped);
        json_decref(event);
        return false;
    }
    w->q[(w->head + w->len) % w->cap] = event;
    w->len++;
    a->figs.webhook_queued++;
    next(w);
    return true;
}

size_t gw_webhook_room(const gw_webhook *w)
{
    return w && w->len + w->batch_n < w->cap ? w->cap - w->len - w->batch_n : 0;
}

gw_webhook *gw_webhook_new(gw_app *a)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        gw_err("webhook: libcurl cannot start");
        return NULL;
    }
    gw_webhook *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->a = a;
    w->cap = a->d.cfg->webhook_queue;
    w->q = calloc(w->cap, sizeof(*w->q));
    w->multi = curl_multi_init();
    if (!w->q || !w->multi) {
        gw_err("webhook: out of memory");
        gw_webhook_free(w);
        return NULL;
    }
    unsigned char r[8];
    RAND_bytes(r, sizeof(r));
    for (int i = 0; i < 8; i++)
        snprintf(w->boot + 2 * i, 3, "%02x", r[i]);
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
    ev_timer_init(&w->curl_timer, on_curl_timer, 0, 0);
    ev_timer_init(&w->send_timer, on_send_timer, 0, 0);
    gw_info("webhook: unread events to %s after %u ms (batches of %u, queue of %zu%s)",
            a->d.cfg->webhook_url, a->d.cfg->webhook_delay_ms, a->d.cfg->webhook_batch, w->cap,
            a->d.cfg->webhook_body ? ", with bodies" : "");
    return w;
}

void gw_webhook_free(gw_webhook *w)
{
    if (!w)
        return;
    gw_app *a = w->a;
    size_t lost = w->len + w->batch_n;
    if (lost)
        gw_warn("webhook: stopping with %zu events not delivered: kept in the store, they "
                "are sent by another node, or by this one once it is back",
                lost);
    ev_timer_stop(a->d.loop, &w->curl_timer);
    ev_timer_stop(a->d.loop, &w->send_timer);
    end_batch(w);
    for (size_t i = 0; i < w->len; i++)
        json_decref(w->q[(w->head + i) % w->cap]);
    a->figs.webhook_queued = 0;
    free(w->q);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    sock_watch *s, *tmp;
    DL_FOREACH_SAFE (w->watches, s, tmp) {
        ev_io_stop(a->d.loop, &s->io);
        DL_DELETE(w->watches, s);
        free(s);
    }
    free(w);
    curl_global_cleanup();
}
