/*
 * gwc: the connection part of the client library (see gwc.h), on libwebsockets 4.1.
 *
 * One lws_context per gwc_ctx, serviced only from inside the calls that wait. lws owns each
 * wsi; a gwc_conn points at its wsi until lws reports it destroyed (WSI_DESTROY), and the
 * wsi points back through its opaque user data, which is cleared before a gwc_conn is freed,
 * so that neither side ever follows a dangling pointer.
 */
#include "gwc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define GWC_MAX_FRAME_DEFAULT (1024u * 1024u)
#define GWC_SUBPROTOCOL "gw.v1"
#define GWC_CLOSE_WAIT_MS 500 /* how long a close may wait for the server's close ack */

const char *gwc_strerror(int err)
{
    switch (err) {
    case GWC_OK: return "ok";
    case GWC_EINVAL: return "invalid argument or URL";
    case GWC_ECONNECT: return "could not connect";
    case GWC_ETIMEDOUT: return "timed out";
    case GWC_ECLOSED: return "connection closed";
    case GWC_ENOMEM: return "out of memory";
    case GWC_EPROTO: return "server frame does not decode";
    default: return "unknown error";
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake_noop(lws_sorted_usec_list_t *sul) {}

/*
 * One pass of the event loop, waiting at most ms. lws 4.1 ignores lws_service's timeout
 * (any value >= 0 waits until the next scheduled lws event, a negative one does not wait),
 * so a wake-up is scheduled at our own deadline instead.
 */
static void service_once(gwc_ctx *c, int64_t ms)
{
    if (ms <= 0) {
        lws_service(c->lws, -1);
        return;
    }
    lws_sul_schedule(c->lws, 0, &c->wake, wake_noop, (lws_usec_t)ms * 1000);
    lws_service(c->lws, 0);
    lws_sul_cancel(&c->wake);
}

void gwc_poll(gwc_ctx *c, int timeout_ms)
{
    if (c)
        service_once(c, timeout_ms);
}

void gwc_service(gwc_ctx *c, int timeout_ms)
{
    if (!c)
        return;
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    do
        service_once(c, deadline - now_ms());
    while (deadline - now_ms() > 0);
}

gwc_ctx *gwc_ctx_new(const gwc_options *o)
{
    static const gwc_options defaults = {0};
    struct lws_context_creation_info info;
    if (!o)
        o = &defaults;
    /* lws only logs an unreadable CA file and then fails every handshake: fail here. */
    if (o->ca_file && access(o->ca_file, R_OK))
        return NULL;

    gwc_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_frame = o->max_frame ? o->max_frame : GWC_MAX_FRAME_DEFAULT;
    c->insecure = o->insecure;
    const char *sub = o->subprotocol ? o->subprotocol : GWC_SUBPROTOCOL;
    if (*sub && !(c->subprotocol = strdup(sub)))
        goto fail_sub;

    lws_set_log_level(LLL_ERR | LLL_WARN, NULL); /* tests print lws' stderr */
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = gwc_protocols;
    info.pt_serv_buf_size = 65536 + LWS_PRE; /* reads of 64 KiB per socket per wake-up */
    info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.client_ssl_ca_filepath = o->ca_file;
    info.gid = -1;
    info.uid = -1;
    if (!(c->lws = lws_create_context(&info)))
        goto fail_lws;
    return c;

fail_lws:
    free(c->subprotocol);
fail_sub:
    free(c);
    return NULL;
}

static void release_current(gwc_conn *k)
{
    free(k->cur);
    k->cur = NULL;
    k->n_evs = k->next_ev = 0;
}

void gwc_mark_ready(gwc_conn *k)
{
    gwc_ctx *c = k->ctx;
    if (k->in_ready)
        return;
    k->in_ready = true;
    k->ready_next = NULL;
    if (c->ready_tail)
        c->ready_tail->ready_next = k;
    else
        c->ready_head = k;
    c->ready_tail = k;
}

static void ready_remove(gwc_conn *k)
{
    gwc_ctx *c = k->ctx;
    gwc_conn *prev = NULL;
    for (gwc_conn *x = c->ready_head; x; prev = x, x = x->ready_next) {
        if (x != k)
            continue;
        if (prev)
            prev->ready_next = x->ready_next;
        else
            c->ready_head = x->ready_next;
        if (c->ready_tail == x)
            c->ready_tail = prev;
        break;
    }
    k->in_ready = false;
}

gwc_conn *gwc_next_ready(gwc_ctx *c)
{
    gwc_conn *k = c->ready_head;
    if (!k)
        return NULL;
    c->ready_head = k->ready_next;
    if (!c->ready_head)
        c->ready_tail = NULL;
    k->in_ready = false;
    return k;
}

int gwc_state(const gwc_conn *k)
{
    switch (k->state) {
    case GWC_ST_CONNECTING: return GWC_CONNECTING;
    case GWC_ST_OPEN: return GWC_OPEN;
    default: return GWC_DONE;
    }
}

void gwc_set_user(gwc_conn *k, void *user)
{
    k->user = user;
}

void *gwc_user(const gwc_conn *k)
{
    return k->user;
}

/* Frees k; a wsi still alive is let go first, then killed (lws may finish it later). */
static void conn_free(gwc_conn *k)
{
    if (k->in_ready)
        ready_remove(k);
    free(k->url_buf);
    if (k->wsi) {
        lws_set_opaque_user_data(k->wsi, NULL);
        lws_set_timeout(k->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
        k->wsi = NULL;
    }
    if (k->prev)
        k->prev->next = k->next;
    else
        k->ctx->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    gwc_queue_clear(&k->in);
    gwc_queue_clear(&k->out);
    release_current(k);
    free(k->rx);
    free(k->evs);
    pr_decoder_free(k->dec);
    free(k);
}

static void begin_close(gwc_conn *k)
{
    if (k->wsi && k->state == GWC_ST_OPEN && !k->close_requested) {
        k->close_requested = true;
        lws_callback_on_writable(k->wsi);
    }
}

void gwc_close(gwc_conn *k)
{
    if (!k)
        return;
    begin_close(k);
    int64_t deadline = now_ms() + GWC_CLOSE_WAIT_MS;
    while (k->wsi && deadline - now_ms() > 0)
        service_once(k->ctx, deadline - now_ms());
    conn_free(k);
}

void gwc_ctx_free(gwc_ctx *c)
{
    if (!c)
        return;
    /* Close them all at once, so that the wait is bounded once, not per connection. */
    gwc_conn *k;
    bool pending = false;
    for (k = c->conns; k; k = k->next)
        begin_close(k);
    int64_t deadline = now_ms() + GWC_CLOSE_WAIT_MS;
    do {
        pending = false;
        for (k = c->conns; k && !pending; k = k->next)
            pending = k->wsi != NULL;
        if (pending)
            service_once(c, deadline - now_ms());
    } while (pending && deadline - now_ms() > 0);
    while (c->conns)
        conn_free(c->conns);
    lws_context_destroy(c->lws);
    free(c->subprotocol);
    free(c);
}

const char *gwc_ctx_last_error(const gwc_ctx *c)
{
    return c ? c->err : "";
}

/* Splits a ws:// or wss:// URL into buf: host (no brackets), port, path with query. */
static int parse_url(const char *url, char *buf, const char **host, int *port, const char **path,
                     bool *tls)
{
    const char *p;
    if (!strncasecmp(url, "ws://", 5)) {
        *tls = false;
        p = url + 5;
    } else if (!strncasecmp(url, "wss://", 6)) {
        *tls = true;
        p = url + 6;
    } else {
        return -1;
    }
    size_t auth_n = strcspn(p, "/?#");
    const char *auth_end = p + auth_n, *h = p, *h_end, *colon;
    if (memchr(p, '@', auth_n))
        return -1; /* no user info */
    if (*h == '[') {
        h++;
        if (!(h_end = memchr(h, ']', (size_t)(auth_end - h))))
            return -1;
        colon = h_end + 1 < auth_end ? h_end + 1 : NULL;
        if (colon && *colon != ':')
            return -1;
    } else {
        colon = memchr(h, ':', auth_n);
        h_end = colon ? colon : auth_end;
    }
    if (h_end == h)
        return -1;
    *port = *tls ? 443 : 80;
    if (colon) {
        long v = 0;
        const char *d = colon + 1;
        if (d == auth_end)
            return -1;
        for (; d < auth_end; d++) {
            if (*d < '0' || *d > '9' || (v = v * 10 + (*d - '0')) > 65535)
                return -1;
        }
        if (v == 0)
            return -1;
        *port = (int)v;
    }
    memcpy(buf, h, (size_t)(h_end - h));
    buf[h_end - h] = '\0';
    *host = buf;
    char *w = buf + (h_end - h) + 1;
    *path = w;
    if (*auth_end != '/')
        *w++ = '/';
    size_t rest = strcspn(auth_end, "#"); /* the fragment is never sent */
    memcpy(w, auth_end, rest);
    w[rest] = '\0';
    return 0;
}

/* Starts the handshake for k (from source, a local address to bind, when not NULL). */
static int handshake_start(gwc_conn *k, const char *host, int port, const char *path, bool tls,
                           const char *source)
{
    gwc_ctx *c = k->ctx;
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = c->lws;
    ci.address = host;
    ci.port = port;
    ci.path = path;
    ci.host = host; /* also the TLS SNI and the name the certificate is checked against */
    ci.origin = host;
    ci.protocol = c->subprotocol;
    ci.local_protocol_name = gwc_protocols[0].name;
    if (tls) {
        ci.ssl_connection = LCCSCF_USE_SSL;
        if (c->insecure)
            ci.ssl_connection |= LCCSCF_ALLOW_SELFSIGNED | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK |
                                 LCCSCF_ALLOW_INSECURE | LCCSCF_ALLOW_EXPIRED;
    }
    ci.opaque_user_data = k;
    ci.pwsi = &k->wsi; /* so that callbacks during the call already find the wsi */
    ci.iface = source;
    if (!lws_client_connect_via_info(&ci)) {
        if (!k->err[0])
            gwc_set_err(k->err, sizeof k->err, "cannot connect to %s:%d", host, port);
        return GWC_ECONNECT;
    }
    return 0;
}

/* Starts the handshake for k and runs the loop until it is done, failed or late. */
static int handshake(gwc_conn *k, const char *host, int port, const char *path, bool tls,
                     int timeout_ms)
{
    gwc_ctx *c = k->ctx;
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int rc = handshake_start(k, host, port, path, tls, NULL);
    if (rc)
        return rc;
    for (bool first = true; k->state == GWC_ST_CONNECTING; first = false) {
        int64_t left = deadline - now_ms();
        if (left <= 0 && !first) {
            gwc_set_err(k->err, sizeof k->err, "no handshake within %d ms", timeout_ms);
            return GWC_ETIMEDOUT;
        }
        service_once(c, left);
    }
    /* A server may close right after the handshake: that is still a connection. */
    return k->state == GWC_ST_FAILED ? GWC_ECONNECT : 0;
}

int gwc_connect(gwc_ctx *c, const char *url, int timeout_ms, gwc_conn **out)
{
    const char *host, *path;
    int port, rc;
    bool tls;
    if (out)
        *out = NULL;
    if (!c || !url || !out)
        return GWC_EINVAL;
    char *buf = malloc(2 * strlen(url) + 4);
    if (!buf)
        return GWC_ENOMEM;
    if (parse_url(url, buf, &host, &port, &path, &tls)) {
        gwc_set_err(c->err, sizeof c->err, "bad URL: %.150s", url);
        rc = GWC_EINVAL;
        goto done;
    }
    gwc_conn *k = calloc(1, sizeof *k);
    if (!k) {
        rc = GWC_ENOMEM;
        goto done;
    }
    k->ctx = c;
    k->state = GWC_ST_CONNECTING;
    k->close_code = -1;
    if ((k->next = c->conns))
        k->next->prev = k;
    c->conns = k;
    if ((rc = handshake(k, host, port, path, tls, timeout_ms))) {
        gwc_set_err(c->err, sizeof c->err, "%s: %s", url, k->err);
        conn_free(k);
        goto done;
    }
    *out = k;

done:
    free(buf);
    return rc;
}

int gwc_connect_start(gwc_ctx *c, const char *url, const char *source, gwc_conn **out)
{
    const char *host, *path;
    int port;
    bool tls;
    if (out)
        *out = NULL;
    if (!c || !url || !out)
        return GWC_EINVAL;
    gwc_conn *k = calloc(1, sizeof *k);
    char *buf = malloc(2 * strlen(url) + 4);
    if (!k || !buf) {
        free(k);
        free(buf);
        return GWC_ENOMEM;
    }
    if (parse_url(url, buf, &host, &port, &path, &tls)) {
        gwc_set_err(c->err, sizeof c->err, "bad URL: %.150s", url);
        free(k);
        free(buf);
        return GWC_EINVAL;
    }
    k->ctx = c;
    k->state = GWC_ST_CONNECTING;
    k->close_code = -1;
    k->url_buf = buf; /* host and path point in here; kept until the connection is freed */
    if ((k->next = c->conns))
        k->next->prev = k;
    c->conns = k;
    int rc = handshake_start(k, host, port, path, tls, source);
    if (rc) {
        gwc_set_err(c->err, sizeof c->err, "%s: %s", url, k->err);
        conn_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

static int queue_out(gwc_conn *k, const void *data, size_t len, bool text)
{
    if (!k || (!data && len))
        return GWC_EINVAL;
    if (!k->wsi || k->state != GWC_ST_OPEN || k->close_requested)
        return GWC_ECLOSED;
    gwc_frame *f = malloc(sizeof *f + LWS_PRE + len);
    if (!f)
        return GWC_ENOMEM;
    f->len = len;
    f->off = LWS_PRE; /* lws writes the WebSocket header in front of the payload */
    f->text = text;
    if (len)
        memcpy(f->data + LWS_PRE, data, len);
    gwc_queue_push(&k->out, f);
    lws_callback_on_writable(k->wsi);
    return 0;
}

int gwc_send(gwc_conn *k, const void *frame, size_t len)
{
    return queue_out(k, frame, len, false);
}

int gwc_send_raw(gwc_conn *k, const void *data, size_t len, bool text)
{
    return queue_out(k, data, len, text);
}

/* Runs the loop until a frame is queued on k, k is closed, or the deadline passes. */
static int wait_frame(gwc_conn *k, int64_t deadline)
{
    for (bool first = true;; first = false) {
        if (k->in.head)
            return 0;
        if (k->state != GWC_ST_OPEN || !k->wsi)
            return GWC_ECLOSED;
        int64_t left = deadline - now_ms();
        if (left <= 0 && !first)
            return GWC_ETIMEDOUT;
        service_once(k->ctx, left);
    }
}

int gwc_recv(gwc_conn *k, int timeout_ms, const uint8_t **frame, size_t *len)
{
    if (!k || !frame || !len)
        return GWC_EINVAL;
    release_current(k);
    int rc = wait_frame(k, now_ms() + (timeout_ms > 0 ? timeout_ms : 0));
    if (rc)
        return rc;
    k->cur = gwc_queue_pop(&k->in);
    *frame = k->cur->data;
    *len = k->cur->len;
    return 0;
}

#define GWC_CB_NOMEM 1 /* collect_event's own code, distinct from every PR_E* value */

static int collect_event(void *ud, const pr_event *ev)
{
    gwc_conn *k = ud;
    if (k->n_evs == k->cap_evs) {
        size_t cap = k->cap_evs ? 2 * k->cap_evs : 8;
        pr_event *evs = realloc(k->evs, cap * sizeof *evs);
        if (!evs)
            return GWC_CB_NOMEM;
        k->evs = evs;
        k->cap_evs = cap;
    }
    k->evs[k->n_evs++] = *ev; /* a copy still borrows from cur and the decoder */
    return 0;
}

int gwc_next(gwc_conn *k, int timeout_ms, pr_event *ev)
{
    if (!k || !ev)
        return GWC_EINVAL;
    if (!k->dec) { /* made on first use: a decoder holds a zone, gwc_recv needs none */
        pr_limits lim = pr_limits_default();
        lim.max_frame = k->ctx->max_frame;
        if (!(k->dec = pr_decoder_new(&lim)))
            return GWC_ENOMEM;
    }
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    while (k->next_ev >= k->n_evs) { /* an empty batch yields nothing: take the next frame */
        release_current(k);
        int rc = wait_frame(k, deadline);
        if (rc)
            return rc;
        k->cur = gwc_queue_pop(&k->in);
        pr_error perr;
        rc = pr_decode_events(k->dec, k->cur->data, k->cur->len, collect_event, k, &perr);
        if (rc == GWC_CB_NOMEM) {
            k->n_evs = 0;
            return GWC_ENOMEM;
        }
        if (rc) {
            k->n_evs = 0;
            gwc_set_err(k->err, sizeof k->err, "%s: %s", pr_err_name(perr.code), perr.msg);
            return GWC_EPROTO;
        }
    }
    *ev = k->evs[k->next_ev++];
    return 0;
}

int gwc_pause(gwc_conn *k, bool paused)
{
    if (!k || k->state != GWC_ST_OPEN || !k->wsi)
        return GWC_ECLOSED;
    return lws_rx_flow_control(k->wsi, paused ? 0 : 1) < 0 ? GWC_ECLOSED : GWC_OK;
}

bool gwc_is_open(const gwc_conn *k)
{
    return k && k->wsi && k->state == GWC_ST_OPEN;
}

int gwc_close_code(const gwc_conn *k)
{
    return k ? k->close_code : -1;
}

const char *gwc_close_reason(const gwc_conn *k)
{
    return k ? k->close_reason : "";
}

const char *gwc_last_error(const gwc_conn *k)
{
    return k ? k->err : "";
}

uint64_t gwc_frames_in(const gwc_conn *k)
{
    return k ? k->frames_in : 0;
}

uint64_t gwc_frames_out(const gwc_conn *k)
{
    return k ? k->frames_out : 0;
}
