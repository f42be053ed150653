/*
 * Where the slot map is kept: a file (one machine, tests), or a key of etcd (v3), the
 * etcd that Patroni keeps its leaders in, read through etcd's JSON gateway (POST
 * /v3/kv/range, keys and values in base64) with libcurl, and its answer with jansson.
 */
#include "shard_internal.h"

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SH_MAP_MAX (1u << 20) /* the most bytes of a map's text we read */

struct sh_source {
    char *path;     /* shards:PATH */
    char *hosts[8]; /* etcd://: its members (host:port), tried in turn */
    unsigned n_hosts;
    unsigned next; /* the member that answered last: asked first */
    char *key;
    char where[300];
};

static int fail(char *why, size_t why_len, int rc, const char *fmt, const char *arg)
{
    snprintf(why, why_len, fmt, arg);
    return rc;
}

int sh_source_new(const char *url, sh_source **out, char *why, size_t why_len)
{
    *out = NULL;
    sh_source *s = calloc(1, sizeof(*s));
    if (!s)
        return ST_ENOMEM;
    if (strncmp(url, "shards:", 7) == 0 && url[7]) {
        if (!(s->path = strdup(url + 7)))
            goto nomem;
        snprintf(s->where, sizeof(s->where), "slot map %s", s->path);
    } else if (strncmp(url, "etcd://", 7) == 0) {
        const char *hosts = url + 7, *slash = strchr(hosts, '/');
        if (!slash || slash == hosts || !slash[1]) {
            sh_source_free(s);
            return fail(why, why_len, ST_EINVAL,
                        "%s: an etcd slot map is etcd://HOST:PORT[,HOST:PORT...]/KEY", url);
        }
        if (!(s->key = strdup(slash)))
            goto nomem;
        for (const char *h = hosts; h < slash;) {
            size_t n = strcspn(h, ",/");
            if (n == 0 || s->n_hosts == 8) {
                sh_source_free(s);
                return fail(why, why_len, ST_EINVAL,
                            "%s: etcd members are HOST:PORT, comma-separated, at most 8", url);
            }
            if (!(s->hosts[s->n_hosts++] = strndup(h, n)))
                goto nomem;
            h += n + (h[n] == ',');
        }
        snprintf(s->where, sizeof(s->where), "slot map etcd://%.*s%s", (int)(slash - hosts), hosts,
                 s->key);
    } else {
        sh_source_free(s);
        return fail(why, why_len, ST_EINVAL,
                    "%s: a slot map is shards:PATH or etcd://HOST:PORT[,...]/KEY", url);
    }
    *out = s;
    return ST_OK;
nomem:
    sh_source_free(s);
    return ST_ENOMEM;
}

void sh_source_free(sh_source *s)
{
    if (!s)
        return;
    free(s->path);
    for (unsigned i = 0; i < s->n_hosts; i++)
        free(s->hosts[i]);
    free(s->key);
    free(s);
}

const char *sh_source_where(const sh_source *s)
{
    return s->where;
}

static int read_file(sh_source *s, char **text, size_t *n, char *why, size_t why_len)
{
    FILE *f = fopen(s->path, "rb");
    if (!f)
        return fail(why, why_len, ST_EIO, "slot map %s: cannot open it", s->path);
    char *b = malloc(SH_MAP_MAX + 1);
    size_t got = b ? fread(b, 1, SH_MAP_MAX + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    if (!b)
        return ST_ENOMEM;
    if (err || got > SH_MAP_MAX) {
        free(b);
        return fail(why, why_len, ST_EIO, "slot map %s: cannot read it, or over 1 MiB", s->path);
    }
    b[got] = 0;
    *text = b;
    *n = got;
    return ST_OK;
}

/* ---- etcd ---------------------------------------------------------------------------- */

typedef struct body {
    char *p;
    size_t n;
} body;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    body *b = ud;
    size_t add = size * nmemb;
    if (b->n + add > 4 * SH_MAP_MAX)
        return 0; /* ends the transfer: no etcd answer of a map is that large */
    char *p = realloc(b->p, b->n + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->n, data, add);
    b->p = p;
    b->n += add;
    p[b->n] = 0;
    return add;
}

/* base64 of n bytes (malloc'd, NUL-terminated), or NULL. */
static char *b64(const unsigned char *in, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    return out;
}

/* The decoded bytes of base64 text (malloc'd, NUL-terminated, *n set), or NULL. */
static char *unb64(const char *in, size_t *n)
{
    size_t len = strlen(in);
    if (len % 4)
        return NULL;
    char *out = malloc(len / 4 * 3 + 1);
    int got = out ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)in, (int)len) : -1;
    if (got < 0) {
        free(out);
        return NULL;
    }
    /* EVP_DecodeBlock counts the padding's bytes too. */
    while (len && in[len - 1] == '=' && got > 0) {
        got--;
        len--;
    }
    out[got] = 0;
    *n = (size_t)got;
    return out;
}

/* POSTs req to path of one member: its answer as JSON (the caller's to json_decref), or
 * NULL with why. */
static json_t *post(const char *host, const char *path, const char *req, char *why, size_t why_len)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, why_len, "slot map: out of memory");
        return NULL;
    }
    char url[300];
    snprintf(url, sizeof(url), "http://%s%s", host, path);
    body b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    json_t *j = NULL;
    if (cc != CURLE_OK)
        snprintf(why, why_len, "slot map: etcd %s: %s", host, curl_easy_strerror(cc));
    else if (status != 200)
        snprintf(why, why_len, "slot map: etcd %s answered HTTP %ld", host, status);
    else if (!(j = json_loadb(b.p ? b.p : "", b.n, 0, NULL)))
        snprintf(why, why_len, "slot map: etcd %s: an answer that is not JSON", host);
    free(b.p);
    return j;
}

/* Asks the members in turn, the one that answered last first, with req (taken: freed
 * here; NULL when building it ran out of memory): the first answer, or NULL with why. */
static json_t *ask(sh_source *s, const char *path, json_t *req, char *why, size_t why_len)
{
    char *msg = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    json_t *j = NULL;
    if (!msg)
        snprintf(why, why_len, "slot map: out of memory");
    for (unsigned i = 0; msg && !j && i < s->n_hosts; i++) {
        unsigned m = (s->next + i) % s->n_hosts;
        if ((j = post(s->hosts[m], path, msg, why, why_len)))
            s->next = m;
    }
    free(msg);
    return j;
}

/* A json_pack string of bytes in base64 (jansson's "s" refuses NULL: a failed b64 fails
 * the pack). */
static char *b64s(const char *text)
{
    return b64((const unsigned char *)text, strlen(text));
}

static int read_etcd(sh_source *s, char **text, size_t *n, char *why, size_t why_len)
{
    char *k = b64s(s->key);
    json_t *j = ask(s, "/v3/kv/range", json_pack("{ss}", "key", k), why, why_len);
    int rc = ST_EIO;
    if (j) {
        json_t *kvs = json_object_get(j, "kvs");
        json_t *v = json_object_get(json_array_get(kvs, 0), "value");
        if (!json_array_size(kvs))
            snprintf(why, why_len, "slot map: etcd has no key %s", s->key);
        else if (!json_is_string(v) || !(*text = unb64(json_string_value(v), n)))
            snprintf(why, why_len, "slot map: etcd's value of %s is not base64", s->key);
        else
            rc = ST_OK;
    }
    json_decref(j);
    free(k);
    return rc;
}

/* A transaction: the new text is put only if the value is still old. */
static int swap_etcd(sh_source *s, const char *old, const char *text, char *why, size_t why_len)
{
    char *k = b64s(s->key), *o = b64s(old), *t = b64s(text);
    json_t *j =
        ask(s, "/v3/kv/txn",
            json_pack("{s[{ssssssss}]s[{s{ssss}}]}", "compare", "key", k, "target", "VALUE",
                      "result", "EQUAL", "value", o, "success", "requestPut", "key", k, "value", t),
            why, why_len);
    int rc = ST_EIO;
    if (j) {
        rc = json_is_true(json_object_get(j, "succeeded")) ? ST_OK : ST_ESTALE;
        if (rc == ST_ESTALE)
            snprintf(why, why_len, "slot map: etcd's %s changed since it was read", s->key);
    }
    json_decref(j);
    free(k);
    free(o);
    free(t);
    return rc;
}

static int swap_file(sh_source *s, const char *old, const char *text, char *why, size_t why_len)
{
    char *now;
    size_t n;
    int rc = read_file(s, &now, &n, why, why_len);
    if (rc != ST_OK)
        return rc;
    bool same = strcmp(now, old) == 0;
    free(now);
    if (!same) {
        snprintf(why, why_len, "slot map %s: changed since it was read", s->path);
        return ST_ESTALE;
    }
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.new", s->path);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f)
        ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, s->path) != 0) {
        snprintf(why, why_len, "slot map %s: cannot write it (through %s)", s->path, tmp);
        unlink(tmp);
        return ST_EIO;
    }
    return ST_OK;
}

int sh_source_swap(sh_source *s, const char *old, const char *text, char *why, size_t why_len)
{
    return s->path ? swap_file(s, old, text, why, why_len) : swap_etcd(s, old, text, why, why_len);
}

int sh_source_read(sh_source *s, char **text, size_t *n, char *why, size_t why_len)
{
    *text = NULL;
    *n = 0;
    return s->path ? read_file(s, text, n, why, why_len) : read_etcd(s, text, n, why, why_len);
}
