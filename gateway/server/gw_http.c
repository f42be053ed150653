/*
 * Plain HTTP on the gateway's port: /healthz, /stats (JSON), /metrics (Prometheus),
 * POST /demo/login (demo mode only), the server API under /api/v1/ (app/gw_api.c) and
 * the demo page's static files. It sits on top, in server/, because its endpoints
 * answer from every layer: the health from the store and the stop, the figures from
 * every module, the API from app/.
 */
#include "server_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <utlist.h>

#define LOGIN_BODY_MAX 4096
/* The longest URL the gateway serves: its path and query, as libwebsockets holds them
 * (`%` escapes decoded); a longer one is answered 414 (docs/API.md). Nothing here needs
 * a tenth of it: an id is at most 64 bytes, a file's path 511. */
#define URL_MAX 2048
/* How often the requests waiting for the other threads' figures are looked at for their
 * time limit (gw_stats_ready's), while there are any. */
#define STATS_CHECK_S 0.02
#define DEMO_TOKEN_TTL_S (24 * 3600)
/* After an answer given before the request's body was read (401, 404, 413, ...), the body
 * is still read, and dropped, for this long at most: closing with unread input would make
 * the kernel reset the connection, and the client would lose the answer (nginx's
 * lingering_time). Between two pieces of it, libwebsockets' own limit, --handshake-timeout. */
#define LINGER_MS 30000

typedef struct http_pss {
    char body[LOGIN_BODY_MAX + 1]; /* POST body being received */
    size_t n;
    bool too_long;
    bool api;       /* an API request: its state is in `req` */
    bool api_body;  /* ... whose body is still coming: not answered before it is in */
    bool api_close; /* ... a POST or PUT without Content-Length: see gw_http_callback */
    /* The body declared in Content-Length is still coming (libwebsockets reads it before
     * the next request): it must be in by body_deadline_ms. */
    bool body_pending;
    uint64_t body_deadline_ms;
    /* Answered already (with Connection: close): the rest of the body is read and dropped
     * until drain_until_ms, then the connection closes. */
    bool draining;
    bool half_closed; /* ... once the answer was out, the client was told the end (FIN) */
    uint64_t drain_until_ms;
    gw_api_conn req;
    /* /stats or /metrics, answered once the other threads' figures are in (gw_stats.c):
     * in the server's stats_wait list until then. */
    enum { STATS_NONE, STATS_JSON, STATS_PROM } stats;
    bool stats_waiting;
    uint64_t stats_want, stats_asked_ms;
    struct lws *wsi;
    struct http_pss *stats_prev, *stats_next;
} http_pss;

size_t gw_http_pss_size(void)
{
    return sizeof(http_pss);
}

/* libwebsockets 4.1 reads a request's headers into one buffer per connection
 * (max_http_header_data, 4 KiB by default), and a request whose headers overflow it is
 * closed there and then: no callback, no status, the client sees an empty reply. So the
 * URL is held to URL_MAX + 1 bytes a part (the path; each &-separated part of the query):
 * libwebsockets cuts a longer part there and skips the rest of the request line (the
 * HTTP version with it: the request is taken as HTTP/1.0), and the request reaches
 * LWS_CALLBACK_HTTP with a URL over URL_MAX, answered 414. A path or a query part of any
 * length costs at most URL_MAX + 1 bytes of the buffer that way. A bigger buffer would not
 * do it: every connection holds one while it sends its headers (a burst of handshakes, a
 * slow client), and a longer URL would overflow it still. What is still closed unanswered
 * (libwebsockets 4.1 has no hook there): a query of several parts, each under the limit,
 * that with the other headers is over 4 KiB, or of more parts than libwebsockets notes
 * (94 fragments for the headers and the query's parts together). */
static const struct lws_token_limits url_limits = {
    .token_limit = {
        [WSI_TOKEN_GET_URI] = URL_MAX + 1,
        [WSI_TOKEN_POST_URI] = URL_MAX + 1,
        [WSI_TOKEN_OPTIONS_URI] = URL_MAX + 1,
        [WSI_TOKEN_PUT_URI] = URL_MAX + 1,
        [WSI_TOKEN_PATCH_URI] = URL_MAX + 1,
        [WSI_TOKEN_DELETE_URI] = URL_MAX + 1,
        [WSI_TOKEN_CONNECT] = URL_MAX + 1,
        [WSI_TOKEN_HEAD_URI] = URL_MAX + 1,
        /* 0, every other header: no limit of its own, the buffer's */
    }};

const struct lws_token_limits *gw_http_token_limits(void)
{
    return &url_limits;
}

/* Is the request's URL (path, '?', query) over URL_MAX? A part that libwebsockets cut at
 * URL_MAX + 1 (above) makes it so. */
static bool url_too_long(struct lws *wsi)
{
    char *uri;
    int uri_n;
    if (lws_http_get_uri_and_method(wsi, &uri, &uri_n) < 0)
        return false;
    int args = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS);
    return (size_t)uri_n + (args ? 1 + (size_t)args : 0) > URL_MAX;
}

/* The reason phrase of each status the gateway answers with. libwebsockets 4.1 writes
 * none for some (201, 429, ...): "HTTP/1.1 429 ", which clients and proxies show as is. */
static const char *reason_phrase(unsigned status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}

/* Puts the reason phrase into the HTTP/1.x status line libwebsockets wrote at the start of
 * [start, *p) (RFC 9112: "HTTP/1.1 429 Too Many Requests"). HTTP/2 has no such line and is
 * left alone. 0, or -1 when there is no room. */
static int fix_status_line(unsigned status, uint8_t *start, uint8_t **p, const uint8_t *end)
{
    size_t n = (size_t)(*p - start);
    if (n < 13 || memcmp(start, "HTTP/1.", 7) != 0)
        return 0;
    uint8_t *eol = memchr(start, '\r', n);
    uint8_t *code_end = start + 12; /* "HTTP/1.1 NNN" */
    if (!eol || eol < code_end)
        return 0;
    char line[64];
    int ln = snprintf(line, sizeof(line), " %s", reason_phrase(status));
    size_t old = (size_t)(eol - code_end);
    if (*p - old + (size_t)ln > end)
        return -1;
    memmove(code_end + ln, eol, (size_t)(*p - eol));
    memcpy(code_end, line, (size_t)ln);
    *p = *p - old + ln;
    return 0;
}

/* The answer is all out while the client's body is still coming: tell the client that is
 * all (a TLS close_notify, then FIN: it reads the end of the answer at once), and read on
 * (nginx's lingering close). Closing instead, with its body unread, would make the kernel
 * reset the connection, and a reset drops the answer if the client has not read it yet. */
static void half_close(struct lws *wsi, http_pss *ps)
{
    if (lws_partial_buffered(wsi)) { /* the rest of the answer first: at HTTP_WRITEABLE */
        lws_callback_on_writable(wsi);
        return;
    }
    ps->half_closed = true;
    SSL *ssl = lws_get_ssl(wsi);
    if (ssl)
        SSL_shutdown(ssl);
    shutdown(lws_get_socket_fd(wsi), SHUT_WR);
}

/* Sends a whole small response. With close, it says `Connection: close` and closes the
 * connection once the answer is out (RFC 9112, 9.6), for requests whose body it did not
 * or could not read. A 429 says when to try again (retry_s, at least 1); a 503 says 5 s,
 * the pace at which the gateway retries its store. Returns what the callback should
 * return. */
static int respond_full(struct lws *wsi, unsigned status, const char *type, const char *body,
                        size_t len, bool close, unsigned retry_s)
{
    http_pss *ps = lws_wsi_user(wsi);
    size_t room = LWS_PRE + 1024 + len;
    uint8_t *buf = malloc(room);
    if (!buf)
        return -1;
    uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + room;
    char retry[16] = "";
    if (status == 429 || status == 503)
        snprintf(retry, sizeof(retry), "%u", status == 503 ? 5 : retry_s ? retry_s : 1);
    int rc = -1;
    if (lws_add_http_common_headers(wsi, status, type, (lws_filepos_t)len, &p, end) ||
        fix_status_line(status, start, &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                    (const unsigned char *)"no-store", 8, &p, end) ||
        (retry[0] && lws_add_http_header_by_name(
                         wsi, (const unsigned char *)"retry-after:", (const unsigned char *)retry,
                         (int)strlen(retry), &p, end)) ||
        (close && lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:",
                                              (const unsigned char *)"close", 5, &p, end)) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        goto out;
    memcpy(start, body, len);
    if (lws_write(wsi, start, len, LWS_WRITE_HTTP_FINAL) != (int)len)
        goto out;
    if (close && ps && ps->body_pending) {
        /* The client may still be sending its body: read and drop it, and close when it
         * is in (or at drain_until_ms), so that the answer is not lost to a reset. */
        ps->draining = true;
        ps->drain_until_ms = gw_mono_ms() + LINGER_MS;
        half_close(wsi, ps);
        rc = 0;
        goto out;
    }
    /* Closing: libwebsockets sends what it still holds of the answer first. */
    rc = close || lws_http_transaction_completed(wsi) ? -1 : 0;
out:
    free(buf);
    return rc;
}

static int respond_ex(struct lws *wsi, unsigned status, const char *type, const char *body,
                      size_t len, bool close)
{
    return respond_full(wsi, status, type, body, len, close, 0);
}

static int respond(struct lws *wsi, unsigned status, const char *type, const char *body, size_t len)
{
    return respond_ex(wsi, status, type, body, len, false);
}

static int respond_text(struct lws *wsi, unsigned status, const char *text)
{
    return respond(wsi, status, "text/plain; charset=utf-8", text, strlen(text));
}

static int respond_json_ex(struct lws *wsi, unsigned status, json_t *obj, bool close)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!s)
        return -1;
    int rc = respond_ex(wsi, status, "application/json", s, strlen(s), close);
    free(s);
    return rc;
}

static int respond_json(struct lws *wsi, unsigned status, json_t *obj)
{
    return respond_json_ex(wsi, status, obj, false);
}

static int healthz(gw_server *srv, struct lws *wsi)
{
    if (srv->stopping)
        return respond_text(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE, "stopping\n");
    if (!st_writable(srv->m.store)) {
        /* The detail (which on PostgreSQL names the host, port, database and user) goes
         * to the log, once a minute at most; whoever can reach /healthz reads only this. */
        char why[512];
        st_write_error(srv->m.store, why, sizeof(why));
        uint64_t now = gw_mono_ms();
        if (!srv->healthz_logged_ms || now - srv->healthz_logged_ms >= 60000) {
            srv->healthz_logged_ms = now;
            gw_warn("/healthz: 503, the store does not accept writes: %s", why);
        }
        return respond_text(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE, "store unavailable\n");
    }
    return respond_text(wsi, HTTP_STATUS_OK, "ok\n");
}

static int demo_login(gw_server *srv, struct lws *wsi, http_pss *ps)
{
    if (ps->too_long)
        return respond_json(wsi, HTTP_STATUS_REQ_ENTITY_TOO_LARGE,
                            json_pack("{s:s}", "error", "body too large"));
    ps->body[ps->n] = 0;
    json_error_t jerr;
    json_t *req = json_loads(ps->body, 0, &jerr);
    if (!req && ps->n) {
        char why[200];
        pr_json_why(&jerr, "the body", why, sizeof(why));
        return respond_json(wsi, HTTP_STATUS_BAD_REQUEST, json_pack("{s:s}", "error", why));
    }
    const char *user = req ? json_string_value(json_object_get(req, "user")) : NULL;
    if (!user || !pr_id_valid((pr_slice){(const uint8_t *)user, strlen(user)})) {
        json_decref(req);
        return respond_json(wsi, HTTP_STATUS_BAD_REQUEST,
                            json_pack("{s:s}", "error",
                                      "send {\"user\": name}, a name of 1-64 characters "
                                      "[A-Za-z0-9_.:-]"));
    }
    int64_t exp = (int64_t)time(NULL) + DEMO_TOKEN_TTL_S;
    char *tok = NULL;
    if (gw_auth_mint(srv->m.cfg.secret, srv->m.cfg.secret_n, user, exp, &tok) != 0) {
        json_decref(req);
        return respond_json(wsi, HTTP_STATUS_INTERNAL_SERVER_ERROR,
                            json_pack("{s:s}", "error", "cannot make a token"));
    }
    gw_info("demo login: token issued for %s (demo mode: no password)", user);
    json_t *out =
        json_pack("{s:s, s:s, s:I, s:s}", "token", tok, "uid", user, "exp", (json_int_t)exp,
                  "warning", "demo mode: anyone can sign in as anyone; do not use in production");
    free(tok);
    json_decref(req);
    return respond_json(wsi, HTTP_STATUS_OK, out);
}

/* An API request's answer, once it has one (a store job's comes later: its completion
 * asks for a writeable callback, which comes back here). */
static int api_answer(struct lws *wsi, http_pss *ps)
{
    unsigned status, retry_s;
    char *json = NULL;
    if (ps->api_body || !gw_api_ready(&ps->req, &status, &json, &retry_s))
        return 0;
    /* Released first: completing the HTTP transaction may free ps with it. */
    gw_api_release(&ps->req);
    ps->api = false;
    int rc = json ? respond_full(wsi, status, "application/json", json, strlen(json), ps->api_close,
                                 retry_s)
                  : -1;
    free(json);
    return rc;
}

/* ---- /stats and /metrics ------------------------------------------------------------- */

static int stats_answer(gw_server *srv, struct lws *wsi, http_pss *ps)
{
    bool json = ps->stats == STATS_JSON;
    ps->stats = STATS_NONE; /* before the answer: completing it may start the next request */
    size_t n = 0;
    char *s = json ? gw_stats_json(srv) : gw_stats_prometheus(srv, &n);
    if (s && json)
        n = strlen(s);
    int rc = s ? respond(wsi, HTTP_STATUS_OK,
                         json ? "application/json" : "text/plain; version=0.0.4", s, n)
               : -1;
    free(s);
    return rc;
}

static void stats_unwait(gw_server *srv, http_pss *ps)
{
    DL_DELETE2(srv->stats_wait, ps, stats_prev, stats_next);
    ps->stats_waiting = false;
    if (!srv->stats_wait)
        ev_timer_stop(srv->m.loop, &srv->stats_timer);
}

/* Asks the other threads for their figures and answers when they are in: at once with
 * one thread, else at a writeable callback that gw_http_wake or the timer asks for. */
static int stats_begin(gw_server *srv, struct lws *wsi, http_pss *ps, bool json)
{
    ps->stats = json ? STATS_JSON : STATS_PROM;
    ps->wsi = wsi;
    ps->stats_want = gw_stats_ask(srv);
    ps->stats_asked_ms = gw_mono_ms();
    if (!srv->m.loop || gw_stats_ready(srv, ps->stats_want, ps->stats_asked_ms))
        return stats_answer(srv, wsi, ps);
    ps->stats_waiting = true;
    DL_APPEND2(srv->stats_wait, ps, stats_prev, stats_next);
    if (!ev_is_active(&srv->stats_timer))
        ev_timer_start(srv->m.loop, &srv->stats_timer);
    return 0;
}

void gw_http_wake(gw_server *srv)
{
    http_pss *ps, *tmp;
    DL_FOREACH_SAFE2(srv->stats_wait, ps, tmp, stats_next)
    {
        if (gw_stats_ready(srv, ps->stats_want, ps->stats_asked_ms)) {
            stats_unwait(srv, ps);
            lws_callback_on_writable(ps->wsi);
        }
    }
}

static void stats_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    gw_http_wake(w->data);
}

void gw_http_start(gw_server *srv)
{
    ev_timer_init(&srv->stats_timer, stats_timer_cb, STATS_CHECK_S, STATS_CHECK_S);
    srv->stats_timer.data = srv;
}

void gw_http_stop(gw_server *srv)
{
    if (srv->m.loop)
        ev_timer_stop(srv->m.loop, &srv->stats_timer);
}

static const char *mime_of(const char *path)
{
    static const struct {
        const char *ext, *mime;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript"},
        {".mjs", "text/javascript"},
        {".css", "text/css"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".map", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].mime;
    return "application/octet-stream";
}

static int refuse(struct lws *wsi, http_pss *ps, const char *path, unsigned status,
                  const char *code, const char *why);

/* 414 for a URL over URL_MAX: the API's JSON error under /api/v1/, plain text elsewhere
 * (a page, a WebSocket upgrade). The connection closes after it: a body, if the request
 * has one, is not read. */
static int refuse_url(struct lws *wsi, http_pss *ps, const char *path)
{
    char why[96];
    snprintf(why, sizeof(why), "the URL is too long: its path and query, at most %d bytes",
             URL_MAX);
    return refuse(wsi, ps, path, HTTP_STATUS_REQ_URI_TOO_LONG, "bad_field", why);
}

/* A file under web_root, or 404. Paths are checked character by character: no "..", no
 * hidden files, nothing but [A-Za-z0-9._/@-] (@ for npm scopes under node_modules). */
static int static_file(gw_server *srv, struct lws *wsi, const char *uri)
{
    if (!srv->m.cfg.web_root)
        return respond_text(wsi, HTTP_STATUS_NOT_FOUND, "not found\n");
    const char *rel = strcmp(uri, "/") == 0 ? "/index.html" : uri;
    bool ok = rel[0] == '/' && strlen(rel) < 512 && !strstr(rel, "..") && !strstr(rel, "/.");
    for (const char *c = rel; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
             *c == '.' || *c == '_' || *c == '-' || *c == '/' || *c == '@';
    char path[4096];
    struct stat st;
    if (ok) {
        snprintf(path, sizeof(path), "%s%s", srv->m.cfg.web_root, rel);
        ok = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    }
    if (!ok)
        return respond_text(wsi, HTTP_STATUS_NOT_FOUND, "not found\n");
    int n = lws_serve_http_file(wsi, path, mime_of(path), NULL, 0);
    if (n < 0 || (n > 0 && lws_http_transaction_completed(wsi)))
        return -1;
    return 0;
}

/* The request's Content-Length: 0 and *n for one header of digits only, 1 for none
 * (*n = 0), -1 for two of them or one that is not a plain number. Two that disagree let a
 * proxy in front take the body for another length than the gateway, and the rest for a
 * request of its own (request smuggling): such a request is refused, as nginx does. */
static int content_length(struct lws *wsi, uint64_t *n)
{
    char cl[24];
    *n = 0;
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0)
        return 1;
    int len = lws_hdr_copy_fragment(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH, 0);
    if (len <= 0 || len > 19 || lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, 1) > 0)
        return -1;
    for (int i = 0; i < len; i++)
        if (cl[i] < '0' || cl[i] > '9')
            return -1;
    *n = strtoull(cl, NULL, 10);
    return 0;
}

/* A refusal before the body is read (the API's JSON error under /api/v1/, plain text
 * elsewhere), with Connection: close: the body, if one is coming, is drained
 * (respond_full). */
static int refuse(struct lws *wsi, http_pss *ps, const char *path, unsigned status,
                  const char *code, const char *why)
{
    if (!path || !gw_api_path(path)) {
        char text[160];
        int n = snprintf(text, sizeof(text), "%s\n", why);
        return respond_ex(wsi, status, "text/plain; charset=utf-8", text, (size_t)n, true);
    }
    if (ps->api)
        gw_api_release(&ps->req);
    gw_api_refuse(&ps->req, wsi, status, code, why);
    ps->api = true;
    ps->api_body = false;
    ps->api_close = true;
    return api_answer(wsi, ps);
}

/* A piece of a body came after its deadline (--body-timeout): 408, and the connection
 * closes at once, its body unread (the client is the slow one). */
static int body_late(gw_server *srv, struct lws *wsi, http_pss *ps, const char *path)
{
    char why[96];
    snprintf(why, sizeof(why), "the request body did not come within --body-timeout %u s",
             srv->m.cfg.body_timeout_s);
    ps->body_pending = false;
    return refuse(wsi, ps, ps->api ? "/api/v1/" : path, 408, "timeout", why);
}

int gw_http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                     size_t len)
{
    gw_server *srv = lws_context_user(lws_get_context(wsi));
    http_pss *ps = user;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        /* A WebSocket upgrade that did not ask for gw.v1 lands here: refuse it. */
        return 1;
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* Made once per vhost, on protocol 0: the moment to tune the server's SSL_CTX. */
        return gw_tls_tune(user);
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        /* A WebSocket upgrade's URL is held to the same limit (refuse_url returns -1: the
         * connection closes once the answer is out). */
        return url_too_long(wsi) ? refuse_url(wsi, ps, NULL) : 0;
    case LWS_CALLBACK_HTTP: {
        const char *path = in;
        bool post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
        bool put = lws_hdr_total_length(wsi, WSI_TOKEN_PUT_URI) > 0;
        uint64_t declared;
        int cl = content_length(wsi, &declared);
        ps->body_pending = declared > 0;
        ps->body_deadline_ms = gw_mono_ms() + 1000ull * srv->m.cfg.body_timeout_s;
        if (cl < 0) { /* its length is in doubt: closed at once, nothing of it read */
            ps->body_pending = false;
            return refuse(wsi, ps, path, HTTP_STATUS_BAD_REQUEST, "bad_field",
                          "one Content-Length header, of digits only");
        }
        if (url_too_long(wsi))
            return refuse_url(wsi, ps, path);
        if (gw_api_path(path)) {
            const char *method = post                                              ? "POST"
                                 : put                                             ? "PUT"
                                 : lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) ? "DELETE"
                                 : lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI)    ? "GET"
                                                                                   : "OTHER";
            /* A request with a body is answered once the body is in, whatever the method
             * (an answer before it would leave its bytes to the next request), unless the
             * answer is known at the headers: then at once, with Connection: close. */
            ps->api = true;
            ps->api_body = declared > 0;
            /* libwebsockets 4.1 takes a POST or PUT without Content-Length to have a body
             * of up to 100 MiB, and would swallow the next request on the connection as
             * that body: such a request is answered with Connection: close. */
            ps->api_close = cl == 1 && (post || put);
            gw_api_begin(srv->m.app, &ps->req, wsi, path, method);
            /* 413 at once when the body is declared too long; 401, 404, 429 and the like as
             * soon as they are known: none of the body is used, and the connection closes. */
            if (gw_api_body_refused(srv->m.app, &ps->req, declared) ||
                (ps->api_body && gw_api_answered(&ps->req))) {
                ps->api_body = false;
                ps->api_close = true;
                return api_answer(wsi, ps);
            }
            if (ps->api_body)
                return 0;                                /* the body follows */
            gw_api_body_done(srv->m.app, &ps->req, wsi); /* a POST without one */
            return api_answer(wsi, ps);
        }
        if (post && strcmp(path, "/demo/login") == 0 && srv->m.cfg.demo) {
            if (declared > LOGIN_BODY_MAX)
                return respond_json_ex(wsi, HTTP_STATUS_REQ_ENTITY_TOO_LARGE,
                                       json_pack("{s:s}", "error", "body too large"), true);
            ps->n = 0;
            ps->too_long = false;
            return 0; /* the body follows */
        }
        /* Nothing else takes a body: its bytes would be taken for the next request. */
        if (post || ps->body_pending)
            return respond_ex(wsi, post || put ? HTTP_STATUS_NOT_FOUND : HTTP_STATUS_BAD_REQUEST,
                              "text/plain; charset=utf-8",
                              post || put ? "not found\n" : "no request body is taken here\n",
                              post || put ? 10 : 30, true);
        if (strcmp(path, "/healthz") == 0)
            return healthz(srv, wsi);
        if (strcmp(path, "/stats") == 0 || strcmp(path, "/metrics") == 0)
            return stats_begin(srv, wsi, ps, path[1] == 's');
        return static_file(srv, wsi, path);
    }
    case LWS_CALLBACK_HTTP_BODY:
        if (ps->draining) /* answered: dropped, for LINGER_MS at most */
            return gw_mono_ms() > ps->drain_until_ms ? -1 : 0;
        if (gw_mono_ms() > ps->body_deadline_ms)
            return body_late(srv, wsi, ps, "/");
        if (ps->api)
            return gw_api_body(srv->m.app, &ps->req, in, len);
        if (ps->n + len > LOGIN_BODY_MAX) {
            ps->too_long = true;
            return 0;
        }
        memcpy(ps->body + ps->n, in, len);
        ps->n += len;
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        ps->body_pending = false;
        if (ps->draining) /* all of it read: the connection closes without a reset */
            return -1;
        if (ps->api) {
            ps->api_body = false;
            gw_api_body_done(srv->m.app, &ps->req, wsi);
            return api_answer(wsi, ps);
        }
        return demo_login(srv, wsi, ps);
    case LWS_CALLBACK_HTTP_WRITEABLE:
        if (ps && ps->draining) {
            if (!ps->half_closed)
                half_close(wsi, ps);
            return 0;
        }
        if (ps && ps->api)
            return api_answer(wsi, ps);
        if (ps && ps->stats)
            return ps->stats_waiting ? 0 : stats_answer(srv, wsi, ps);
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    case LWS_CALLBACK_CLOSED_HTTP:
        if (ps && ps->stats_waiting)
            stats_unwait(srv, ps);
        if (ps && ps->api) {
            gw_api_release(&ps->req);
            ps->api = false;
        }
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    case LWS_CALLBACK_HTTP_FILE_COMPLETION: return lws_http_transaction_completed(wsi) ? -1 : 0;
    default: return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}
