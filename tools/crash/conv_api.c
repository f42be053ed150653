/*
 * gw_converge's view of the server (conv.h): API requests over plain HTTP/1.1 on a
 * node's port, and a group read back through GET /groups/{gid}/messages, message by
 * message, compared with what a replica holds.
 */
#include "conv.h"
#include "gw_crash.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define RESP_MAX (8u << 20)

/* Reads the response: headers, then Content-Length bytes of body. */
static int read_resp(int fd, char **resp)
{
    size_t cap = 65536, n = 0, want = 0;
    char *buf = malloc(cap + 1), *body = NULL;
    int status = 0;
    if (!buf)
        return 0;
    for (;;) {
        if (n == cap) {
            if (cap >= RESP_MAX)
                break;
            char *b = realloc(buf, 2 * cap + 1);
            if (!b)
                break;
            buf = b;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got <= 0)
            break;
        n += (size_t)got;
        buf[n] = 0;
        if (!body && (body = strstr(buf, "\r\n\r\n"))) {
            body += 4;
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            want = cl && cl < body ? strtoul(cl + 17, NULL, 10) : 0;
            if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
                status = 0;
        }
        if (body && n - (size_t)(body - buf) >= want)
            break;
    }
    if (!body || n - (size_t)(body - buf) < want) {
        free(buf);
        return 0;
    }
    if (resp) {
        size_t off = (size_t)(body - buf);
        memmove(buf, body, want);
        buf[want] = 0;
        (void)off;
        *resp = buf;
    } else {
        free(buf);
    }
    return status;
}

int conv_api(int port, const char *key, const char *method, const char *path, const char *body,
             char **resp)
{
    if (resp)
        *resp = NULL;
    if (port <= 0)
        return 0;
    int fd = node_connect(port, 5);
    if (fd < 0)
        return 0;
    int status = 0;
    size_t bn = body ? strlen(body) : 0;
    char *req = malloc(1024 + strlen(path) + bn);
    if (req) {
        int hn = sprintf(req,
                         "%s /api/v1%s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         method, path, key, bn);
        memcpy(req + hn, body ? body : "", bn);
        size_t total = (size_t)hn + bn, off = 0;
        while (off < total) {
            ssize_t w = write(fd, req + off, total - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        if (off == total)
            status = read_resp(fd, resp);
    }
    free(req);
    close(fd);
    return status;
}

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A reactions object {key: count} as "key=count,..." in key order. */
static char *reactions_text(json_t *rx)
{
    const char *keys[64];
    size_t n = 0;
    const char *k;
    json_t *v;
    if (json_is_object(rx))
        json_object_foreach(rx, k, v) if (n < 64 && json_integer_value(v) > 0) keys[n++] = k;
    qsort(keys, n, sizeof *keys, key_cmp);
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(keys[i]) + 24;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = 0;
    for (size_t i = 0, o = 0; i < n; i++)
        o += (size_t)sprintf(out + o, "%s%s=%lld", i ? "," : "", keys[i],
                             (long long)json_integer_value(json_object_get(rx, keys[i])));
    return out;
}

int conv_read_group(int port, const char *key, const char *gid, conv_group *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    uint64_t after = 0;
    for (int pages = 0; pages < 100000; pages++) {
        char path[256], *resp = NULL;
        snprintf(path, sizeof path, "/groups/%s/messages?after=%llu&limit=500", gid,
                 (unsigned long long)after);
        int st = conv_api(port, key, "GET", path, NULL, &resp);
        json_t *j = st == 200 && resp ? json_loads(resp, 0, NULL) : NULL;
        if (!j) {
            fprintf(stderr, "gw_converge: GET %s: status %d: %.200s\n", path, st, resp ? resp : "");
            free(resp);
            conv_group_free(out);
            return -1;
        }
        free(resp);
        out->first_mid = (uint64_t)json_integer_value(json_object_get(j, "first_mid"));
        out->last_mid = (uint64_t)json_integer_value(json_object_get(j, "last_mid"));
        out->last_cseq = (uint64_t)json_integer_value(json_object_get(j, "last_cseq"));
        json_t *ms = json_object_get(j, "messages"), *e;
        size_t i;
        json_array_foreach(ms, i, e)
        {
            if (out->n == cap) {
                cap = cap ? 2 * cap : 256;
                conv_msg *m = realloc(out->m, cap * sizeof *m);
                if (!m) {
                    json_decref(j);
                    conv_group_free(out);
                    return -1;
                }
                out->m = m;
            }
            conv_msg *m = &out->m[out->n++];
            m->mid = (uint64_t)json_integer_value(json_object_get(e, "mid"));
            m->ver = (uint64_t)json_integer_value(json_object_get(e, "ver"));
            m->cseq = (uint64_t)json_integer_value(json_object_get(e, "cseq"));
            m->recalled = json_is_true(json_object_get(e, "recalled"));
            m->body = m->recalled ? NULL : dup_str(json_string_value(json_object_get(e, "body")));
            m->from = dup_str(json_string_value(json_object_get(e, "from")));
            m->reactions = reactions_text(json_object_get(e, "reactions"));
            after = m->mid;
        }
        bool more = json_is_true(json_object_get(j, "more")) && json_array_size(ms) > 0;
        json_decref(j);
        if (!more)
            return 0;
    }
    return 0;
}

void conv_group_free(conv_group *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->m[i].body);
        free(g->m[i].from);
        free(g->m[i].reactions);
    }
    free(g->m);
    memset(g, 0, sizeof *g);
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool msg_equal(const conv_msg *a, const conv_msg *b)
{
    return a->mid == b->mid && a->ver == b->ver && a->cseq == b->cseq &&
           a->recalled == b->recalled && str_eq(a->body, b->body) && str_eq(a->from, b->from) &&
           str_eq(a->reactions, b->reactions);
}

bool conv_group_equal(const conv_group *a, const conv_group *b)
{
    if (a->first_mid != b->first_mid || a->last_mid != b->last_mid || a->n != b->n ||
        a->last_cseq != b->last_cseq)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!msg_equal(&a->m[i], &b->m[i]))
            return false;
    return true;
}

/* The replica's reactions of mid as "key=count,..." (keys are held in byte order). */
static void rep_reactions(const gwc_rep *r, const char *gid, uint64_t mid, size_t n, char *out,
                          size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && o + 64 < cap; i++) {
        const char *k;
        uint64_t c;
        bool mine;
        if (gwc_rep_reaction(r, gid, mid, i, &k, &c, &mine) == 0)
            o += (size_t)snprintf(out + o, cap - o, "%s%s=%llu", i ? "," : "", k,
                                  (unsigned long long)c);
    }
}

#define SHOW_MAX 5 /* differences printed per replica and group */

void conv_compare(const gwc_rep *r, const char *who, const char *gid, const conv_group *s,
                  uint64_t *missing, uint64_t *extra, uint64_t *differ)
{
    int shown = 0;
    char rx[2048];
    *missing = *extra = *differ = 0;
    /* What the server has, each in the replica's state. */
    for (size_t i = 0; i < s->n; i++) {
        const conv_msg *sm = &s->m[i];
        gwc_rep_msg h;
        if (gwc_rep_get(r, gid, sm->mid, &h)) {
            (*missing)++;
            if (shown++ < SHOW_MAX)
                printf("gw_converge: %s %s mid %llu: missing\n", who, gid,
                       (unsigned long long)sm->mid);
            continue;
        }
        rep_reactions(r, gid, sm->mid, h.n_reactions, rx, sizeof rx);
        char *body = h.recalled || !h.body ? NULL : strndup((const char *)h.body, h.body_n);
        conv_msg hm = {.mid = sm->mid,
                       .ver = h.ver,
                       .cseq = h.cseq,
                       .recalled = h.recalled,
                       .body = body,
                       .from = (char *)h.from,
                       .reactions = rx};
        if (!msg_equal(&hm, sm)) {
            (*differ)++;
            if (shown++ < SHOW_MAX)
                printf("gw_converge: %s %s mid %llu: holds ver %llu cseq %llu %s [%s], the "
                       "server ver %llu cseq %llu %s [%s]\n",
                       who, gid, (unsigned long long)sm->mid, (unsigned long long)h.ver,
                       (unsigned long long)h.cseq,
                       h.recalled ? "(recalled)"
                       : body     ? body
                                  : "",
                       rx, (unsigned long long)sm->ver, (unsigned long long)sm->cseq,
                       sm->recalled ? "(recalled)"
                       : sm->body   ? sm->body
                                    : "",
                       sm->reactions ? sm->reactions : "");
        }
        free(body);
    }
    /* What the replica holds and the server does not (below the horizon, or made up). */
    uint64_t top = gwc_rep_max_mid(r, gid);
    for (uint64_t mid = 1, j = 0; mid <= top; mid++) {
        while (j < s->n && s->m[j].mid < mid)
            j++;
        gwc_rep_msg h;
        if ((j < s->n && s->m[j].mid == mid) || gwc_rep_get(r, gid, mid, &h))
            continue;
        (*extra)++;
        if (shown++ < SHOW_MAX)
            printf("gw_converge: %s %s mid %llu: held, but not on the server (horizon %llu)\n", who,
                   gid, (unsigned long long)mid, (unsigned long long)s->first_mid);
    }
}
