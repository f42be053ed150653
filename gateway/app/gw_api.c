/*
 * The server API for application backends: JSON over HTTP under /api/v1/ on the
 * gateway's port (docs/API.md). Off unless --api-key-file names its keys; every request
 * carries one as `Authorization: Bearer KEY`.
 *
 * Keys are compared as SHA-256 digests with CRYPTO_memcmp: the time taken says nothing of
 * how much of a key was right, nor of its length. This file checks the key and its rate,
 * routes by method and path, and answers; the requests that need the store are
 * gw_api_jobs.c's.
 */
#include "app_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#define MAX_KEYS 16
#define KEY_MIN 16 /* bytes of a key, at least */
#define API_PREFIX "/api/v1/"

/* One for the process: every service thread checks keys and rates against it. */
struct gw_api_keys {
    unsigned char key[MAX_KEYS][32]; /* SHA-256 of each key */
    size_t n_keys;
    gw_limit rate; /* requests a second per key (--api-rate) */
    pthread_mutex_t mu;
    gw_bucket bucket[MAX_KEYS]; /* under mu */
};

static void sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 32;
    EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}

int gw_api_keys_load(const gw_config *cfg, gw_api_keys **out)
{
    const char *path = cfg->api_key_file;
    *out = NULL;
    if (!path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        gw_err("api: cannot read --api-key-file %s: %s", path, strerror(errno));
        return -1;
    }
    gw_api_keys *a = calloc(1, sizeof(*a));
    char line[512];
    int lineno = 0, rc = 0;
    while (a && rc == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        while (n && isspace((unsigned char)line[n - 1]))
            line[--n] = 0;
        char *k = line;
        while (isspace((unsigned char)*k))
            k++, n--;
        if (!*k || *k == '#')
            continue; /* blank lines and comments */
        if (n < KEY_MIN || a->n_keys == MAX_KEYS) {
            gw_err("api: %s line %d: %s", path, lineno,
                   n < KEY_MIN ? "a key must be at least 16 characters"
                               : "at most 16 keys (rotate by replacing the file)");
            rc = -1;
            break;
        }
        sha256(k, n, a->key[a->n_keys++]);
    }
    fclose(f);
    explicit_bzero(line, sizeof(line));
    if (!a || rc != 0 || a->n_keys == 0) {
        if (a && rc == 0)
            gw_err("api: %s holds no key (one a line, at least 16 characters)", path);
        free(a);
        return -1;
    }
    a->rate = gw_limit_make(cfg->api_rate, cfg->rate_burst_s);
    pthread_mutex_init(&a->mu, NULL);
    for (size_t i = 0; i < a->n_keys; i++)
        gw_bucket_init(&a->bucket[i], &a->rate, gw_mono_ms());
    gw_info("api: on at %s (%zu keys, %u requests a second each%s)", API_PREFIX, a->n_keys,
            cfg->api_rate, cfg->api_rate ? "" : ": no limit");
    *out = a;
    return 0;
}

void gw_api_keys_free(gw_api_keys *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    explicit_bzero(a, sizeof(*a));
    free(a);
}

/* ---- answers --------------------------------------------------------------------------- */

bool gw_api_take_id(const char *p, size_t n, char *out)
{
    if (!pr_id_valid((pr_slice){(const uint8_t *)p, n}))
        return false;
    memcpy(out, p, n);
    out[n] = 0;
    return true;
}

/* Splits path (after the prefix) into at most 4 segments. */
#define SEGMENTS_MAX 6

static size_t segments(const char *path, const char *seg[SEGMENTS_MAX], size_t len[SEGMENTS_MAX])
{
    size_t n = 0;
    while (*path && n <= SEGMENTS_MAX) {
        const char *e = strchr(path, '/');
        size_t l = e ? (size_t)(e - path) : strlen(path);
        if (n == SEGMENTS_MAX || l == 0)
            return SEGMENTS_MAX + 1; /* too many, or an empty segment: no such endpoint */
        seg[n] = path;
        len[n++] = l;
        path += l + (e ? 1 : 0);
        if (e && !*path)
            return SEGMENTS_MAX + 1; /* a trailing slash */
    }
    return n;
}

static bool seg_is(const char *s, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

/* The id of path segment `what` (gid, uid) into out; or a 400 naming it, and false. */
static bool path_id(gw_api_conn *c, const char *seg, size_t len, char *out, const char *what)
{
    if (gw_api_take_id(seg, len, out))
        return true;
    char msg[80];
    snprintf(msg, sizeof(msg), "%s: an id, 1-64 characters [A-Za-z0-9_.:-]", what);
    gw_api_fail(c, 400, "bad_field", what, msg);
    return false;
}

/* A mid in a path segment (1 or more, digits only); or a 400, and false. */
static bool path_mid(gw_api_conn *c, const char *seg, size_t len, uint64_t *mid)
{
    uint64_t v = 0;
    bool ok = len > 0 && len <= 19;
    for (size_t i = 0; ok && i < len; i++) {
        ok = seg[i] >= '0' && seg[i] <= '9';
        v = v * 10 + (uint64_t)(seg[i] - '0');
    }
    if (ok && v > 0) {
        *mid = v;
        return true;
    }
    gw_api_fail(c, 400, "bad_field", "mid", "mid: a message id, a whole number from 1");
    return false;
}

/* The method is one this endpoint takes (ok); or a 405 saying which (use), and false. */
static bool allowed(gw_api_conn *c, bool ok, const char *use)
{
    if (!ok)
        gw_api_fail(c, 405, "bad_type", NULL, use);
    return ok;
}

/* Decides what the request is and starts it; answers at once what needs no store. */
static void route(gw_app *a, gw_api_conn *c, struct lws *wsi)
{
    c->routed = true;
    const char *seg[SEGMENTS_MAX];
    size_t len[SEGMENTS_MAX];
    size_t n = segments(c->path + strlen(API_PREFIX), seg, len);
    char x[PR_MAX_ID + 1], y[PR_MAX_ID + 1];
    const char *m = c->method;
    bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0, put = strcmp(m, "PUT") == 0,
         del = strcmp(m, "DELETE") == 0;
    if (n >= 2 && seg_is(seg[0], len[0], "groups")) {
        if (!path_id(c, seg[1], len[1], x, "gid"))
            return;
        if (n == 2) {
            if (allowed(c, del, "use DELETE here"))
                gw_api_delete_group(a, c, x);
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "messages")) {
            if (post)
                gw_api_post_message(a, c, x);
            else if (allowed(c, get, "use GET or POST here"))
                gw_api_get_messages(a, c, wsi, x);
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "changes")) {
            if (allowed(c, get, "use GET here"))
                gw_api_get_changes(a, c, wsi, x);
            return;
        }
        if (n == 6 && seg_is(seg[2], len[2], "messages") && seg_is(seg[4], len[4], "reactions")) {
            uint64_t mid = 0;
            if (!path_mid(c, seg[3], len[3], &mid) ||
                !allowed(c, put || del, "use PUT (set) or DELETE (clear) here"))
                return;
            char uid[PR_MAX_ID + 1], arg[PR_MAX_ID + 8];
            if (!lws_get_urlarg_by_name(wsi, "uid=", arg, sizeof(arg)) ||
                !gw_api_take_id(arg + 4, strlen(arg + 4), uid)) {
                gw_api_fail(c, 400, "bad_field", "uid", "uid=: the reacting user's id");
                return;
            }
            gw_api_react(a, c, x, mid, uid, seg[5], len[5], put);
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "members")) {
            if (allowed(c, get, "use GET here"))
                gw_api_get_members(a, c, wsi, x);
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "retention")) {
            if (allowed(c, get || put, "use GET or PUT here"))
                gw_api_retention(a, c, x, put);
            return;
        }
        if (n == 3 && seg_is(seg[2], len[2], "presence")) {
            if (allowed(c, get, "use GET here"))
                gw_peers_api(a, c, PR_REQ_PRESENCE, x, 0);
            return;
        }
        if (n == 4 && seg_is(seg[2], len[2], "messages")) {
            uint64_t mid = 0;
            if (path_mid(c, seg[3], len[3], &mid) &&
                allowed(c, put || del, "use PUT (edit) or DELETE (recall) here"))
                gw_api_edit(a, c, x, mid, del);
            return;
        }
        if (n == 5 && seg_is(seg[2], len[2], "messages") && seg_is(seg[4], len[4], "receipts")) {
            uint64_t mid = 0;
            if (!path_mid(c, seg[3], len[3], &mid))
                return;
            if (allowed(c, get, "use GET here"))
                gw_peers_api(a, c, PR_REQ_RECEIPTS, x, mid);
            return;
        }
        if (n == 4 && seg_is(seg[2], len[2], "members")) {
            if (path_id(c, seg[3], len[3], y, "uid") &&
                allowed(c, put || del, "use PUT or DELETE here"))
                gw_api_membership(a, c, x, y, put);
            return;
        }
    }
    if (n == 2 && seg_is(seg[0], len[0], "users")) {
        if (path_id(c, seg[1], len[1], x, "uid") && allowed(c, del, "use DELETE here"))
            gw_api_erase_user(a, c, x);
        return;
    }
    if (n == 3 && seg_is(seg[0], len[0], "users")) {
        if (!path_id(c, seg[1], len[1], x, "uid"))
            return;
        if (seg_is(seg[2], len[2], "groups")) {
            if (allowed(c, get, "use GET here"))
                gw_api_user_groups(a, c, x);
            return;
        }
        if (seg_is(seg[2], len[2], "sessions")) {
            if (allowed(c, del, "use DELETE here"))
                gw_api_close_sessions(a, c, x);
            return;
        }
    }
    gw_api_fail(c, 404, "not_found", NULL, "no such endpoint (see docs/API.md)");
}

/* ---- the HTTP side --------------------------------------------------------------------- */

bool gw_api_path(const char *path)
{
    return strncmp(path, API_PREFIX, strlen(API_PREFIX)) == 0 || strcmp(path, "/api/v1") == 0;
}

/* The key in `Authorization: Bearer KEY`, checked against every key, in constant time:
 * its index, or -1. */
static int authorized(gw_api_keys *a, struct lws *wsi)
{
    char hdr[600];
    int n = lws_hdr_copy(wsi, hdr, sizeof(hdr), WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n <= 7 || strncasecmp(hdr, "Bearer ", 7) != 0)
        return -1;
    unsigned char d[32];
    sha256(hdr + 7, (size_t)n - 7, d);
    explicit_bzero(hdr, sizeof(hdr));
    int which = -1;
    for (size_t i = 0; i < a->n_keys; i++)
        if (CRYPTO_memcmp(d, a->key[i], 32) == 0)
            which = (int)i; /* no early exit: every key is compared */
    return which;
}

void gw_api_refuse(gw_api_conn *c, struct lws *wsi, unsigned status, const char *code,
                   const char *msg)
{
    memset(c, 0, sizeof(*c));
    c->wsi = wsi;
    gw_api_fail(c, status, code, NULL, msg);
}

bool gw_api_answered(const gw_api_conn *c)
{
    return c->answered;
}

/* Does the request need its body to start: a POST, or the PUT of a message (an edit)? */
static bool routes_after_body(const gw_api_conn *c)
{
    size_t n = strlen(c->path), r = strlen("/retention");
    bool retention = n > r && strcmp(c->path + n - r, "/retention") == 0;
    return strcmp(c->method, "POST") == 0 ||
           (strcmp(c->method, "PUT") == 0 &&
            ((strstr(c->path, "/messages/") != NULL && !strstr(c->path, "/reactions/")) ||
             retention));
}

int gw_api_begin(gw_app *app, gw_api_conn *c, struct lws *wsi, const char *path, const char *method)
{
    memset(c, 0, sizeof(*c));
    c->wsi = wsi;
    snprintf(c->path, sizeof(c->path), "%s", path);
    snprintf(c->method, sizeof(c->method), "%s", method);
    if (strlen(path) >= sizeof(c->path)) {
        char why[64];
        snprintf(why, sizeof(why), "the path is too long: at most %zu bytes", sizeof(c->path) - 1);
        gw_api_fail(c, 414, "bad_field", NULL, why);
        return 0;
    }
    gw_api_keys *a = app->d.keys;
    if (!a) {
        gw_api_fail(c, 404, "not_found", NULL,
                    "the API is off: start the gateway with --api-key-file");
        return 0;
    }
    int key = authorized(a, wsi);
    if (key < 0) {
        app->figs.api_unauthorized++;
        gw_api_fail(c, 401, "unauthorized", NULL,
                    "send Authorization: Bearer KEY with a key of --api-key-file");
        return 0;
    }
    uint64_t now = gw_mono_ms(), wait = 0;
    pthread_mutex_lock(&a->mu);
    bool over = app->d.cfg->api_rate && !gw_bucket_take(&a->bucket[key], &a->rate, 1, now);
    if (over)
        wait = gw_bucket_wait_ms(&a->bucket[key], &a->rate, 1, now);
    pthread_mutex_unlock(&a->mu);
    if (over) {
        app->figs.api_rate_limited++;
        gw_api_fail(c, 429, "rate_limited", NULL, "over --api-rate for this key: wait retry_ms");
        json_object_set_new(c->answer, "retry_ms", json_integer((json_int_t)(wait < 1 ? 1 : wait)));
        return 0;
    }
    app->figs.api_requests++;
    c->authorized = true;
    if (routes_after_body(c))
        return 1; /* the body follows */
    route(app, c, wsi);
    return 0;
}

/* The longest request body: a message's JSON, its body (escaped, up to 6 bytes a byte)
 * and the other fields. */
static size_t body_max(const gw_app *a)
{
    return 6 * a->d.cfg->max_body + 4096;
}

bool gw_api_body_refused(gw_app *a, gw_api_conn *c, uint64_t declared)
{
    if (declared <= body_max(a))
        return false;
    if (!c->answered)
        gw_api_fail(c, 413, "too_large", "body",
                    "the request body is too large (declared in Content-Length; --max-body)");
    return true;
}

int gw_api_body(gw_app *a, gw_api_conn *c, const void *in, size_t len)
{
    if (c->routed)
        return 0; /* a body on a request that does not take one */
    if (c->answered || c->body_n + len > body_max(a)) {
        if (!c->answered)
            gw_api_fail(c, 413, "too_large", "body", "the request body is too large");
        return 0;
    }
    char *nb = realloc(c->body, c->body_n + len);
    if (!nb) {
        gw_api_fail(c, 500, "internal", NULL, "out of memory");
        return 0;
    }
    c->body = nb;
    memcpy(c->body + c->body_n, in, len);
    c->body_n += len;
    return 0;
}

void gw_api_body_done(gw_app *a, gw_api_conn *c, struct lws *wsi)
{
    /* Only a POST, a message's PUT and a retention's wait for their body; the others started at
     * their headers (and a body sent with them is ignored). */
    if (!c->answered && c->authorized && !c->routed && routes_after_body(c))
        route(a, c, wsi);
}

bool gw_api_ready(const gw_api_conn *c, unsigned *status, char **json, unsigned *retry_s)
{
    if (!c->answered)
        return false;
    *status = c->status;
    json_int_t ms = json_integer_value(json_object_get(c->answer, "retry_ms"));
    *retry_s = c->status == 429 ? (unsigned)((ms + 999) / 1000) : 0;
    *json = json_dumps(c->answer, JSON_COMPACT);
    return true;
}

void gw_api_release(gw_api_conn *c)
{
    if (c->job)
        c->orphan(c->job); /* it completes with nobody to answer */
    c->job = NULL;
    free(c->body);
    c->body = NULL;
    json_decref(c->answer);
    c->answer = NULL;
    c->wsi = NULL;
}
