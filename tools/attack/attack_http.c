/*
 * attack_http: HTTP that holds the server's connections (see attack.h).
 *
 *   slow-body  requests announcing a body that then comes a byte every --trickle-ms: on
 *              /api/v1/ with no key and with the key (60,000 bytes: under --max-body, which
 *              a larger one would get 413 for at once), and a PUT of 1,000,000 bytes on a
 *              static path, a third of the connections each
 *   idle       connections that send nothing at all
 *   oversized  an API POST whose body is far over --max-body, written whole: does the
 *              client get to read the 413, or is its connection reset under it
 *
 * All from one address (127.0.0.1), as one attacker would: a per-address cap bounds them.
 */
#include "attack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { V_NOKEY, V_KEY, V_STATIC, V_IDLE, V_COUNT };
static const char *const variant_name[V_COUNT] = {"API, no key", "API with key", "static PUT",
                                                  "idle"};

typedef struct held {
    int fd;
    int variant;
    bool connected;
    bool closed;
    bool answered;     /* the server said something (an HTTP answer) before closing */
    int64_t closed_at; /* ns after the start */
} held;

static int request_head(const atk_cfg *cfg, int variant, size_t body, char *buf, size_t n)
{
    const char *key = cfg->api_key[0] ? cfg->api_key : "not-the-key";
    if (variant == V_STATIC)
        return snprintf(buf, n,
                        "PUT /index.html HTTP/1.1\r\nHost: %s\r\nContent-Length: %zu\r\n\r\n",
                        cfg->host, body);
    return snprintf(buf, n,
                    "POST /api/v1/groups/lobby/messages HTTP/1.1\r\nHost: %s\r\n%s%s%s"
                    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                    cfg->host, variant == V_KEY ? "Authorization: Bearer " : "",
                    variant == V_KEY ? key : "", variant == V_KEY ? "\r\n" : "", body);
}

/* Looks at a held connection: did the server answer or close it? */
static void look(held *h, int64_t since)
{
    if (!atk_raw_closed(h->fd, &h->answered))
        return;
    h->closed = true;
    h->closed_at = load_now_ns() - since;
    close(h->fd);
    h->fd = -1;
}

/* Holds n connections of the given variants for cfg->seconds: the slow ones get a byte
 * every trickle_ms. Fills the outcome with what the server did to each variant. */
static int hold(atk_ctx *c, int n, const int *variants, int n_variants)
{
    const atk_cfg *cfg = c->cfg;
    held *hs = calloc((size_t)n, sizeof(*hs));
    if (!hs)
        return -1;
    int failed = 0;
    atk_begin(c);
    int64_t t0 = load_now_ns();
    for (int i = 0; i < n; i++) {
        held *h = &hs[i];
        char head[512];
        h->variant = variants[i % n_variants];
        if ((h->fd = atk_raw_connect_nb(cfg)) < 0) {
            h->closed = true;
            failed++;
            continue;
        }
        h->connected = true;
        c->sent_conns++;
        if (h->variant != V_IDLE) {
            size_t body = h->variant == V_STATIC ? 1000000 : 60000;
            int hn = request_head(cfg, h->variant, body, head, sizeof(head));
            size_t w = atk_raw_write(h->fd, head, (size_t)hn, 1000);
            c->sent_requests++;
            c->sent_bytes += w;
            if (w != (size_t)hn)
                failed++;
        }
        if (i % 16 == 15)
            atk_pump(c, 0);
    }
    int64_t until = t0 + (int64_t)(cfg->seconds * 1e9), next_byte = t0;
    while (load_now_ns() < until) {
        bool trickle = load_now_ns() >= next_byte;
        if (trickle)
            next_byte += (int64_t)cfg->trickle_ms * 1000000;
        for (int i = 0; i < n; i++) {
            held *h = &hs[i];
            if (h->closed)
                continue;
            if (trickle && h->variant != V_IDLE &&
                send(h->fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
                c->sent_bytes++;
            look(h, t0);
        }
        atk_pump(c, 50);
    }
    for (int v = 0; v < V_COUNT; v++) {
        int of = 0, closed = 0, answered = 0;
        int64_t last = 0;
        for (int i = 0; i < n; i++) {
            held *h = &hs[i];
            if (h->variant != v || !h->connected)
                continue;
            of++;
            answered += h->answered;
            if (h->closed) {
                closed++;
                last = h->closed_at > last ? h->closed_at : last;
            }
        }
        if (!of)
            continue;
        atk_say(c, "%s%s: %d of %d closed by the server in %.0f s", c->outcome[0] ? "; " : "",
                variant_name[v], closed, of, cfg->seconds);
        if (closed)
            atk_say(c, " (the last at %.1f s)", (double)last / 1e9);
        atk_say(c, ", %d answered", answered);
    }
    if (failed)
        atk_say(c, "; %d of %d could not connect or send their request", failed, n);
    for (int i = 0; i < n; i++)
        if (hs[i].fd >= 0)
            close(hs[i].fd);
    free(hs);
    atk_end(c, 2);
    return 0;
}

int atk_slow_body(atk_ctx *c)
{
    static const int vs[] = {V_NOKEY, V_KEY, V_STATIC};
    return hold(c, c->cfg->conns, vs, 3);
}

int atk_idle(atk_ctx *c)
{
    static const int vs[] = {V_IDLE};
    return hold(c, c->cfg->conns, vs, 1);
}

/* One oversized POST: 1 the client read the 413, 0 it read something else or nothing,
 * -1 its connection was reset first. */
static int oversized_once(atk_ctx *c, const uint8_t *body, size_t body_n)
{
    char head[512];
    int fd = atk_raw_connect_nb(c->cfg);
    if (fd < 0)
        return 0;
    c->sent_conns++;
    int hn = request_head(c->cfg, V_KEY, body_n, head, sizeof(head));
    c->sent_requests++;
    c->sent_bytes += atk_raw_write(fd, head, (size_t)hn, 1000);
    c->sent_bytes += atk_raw_write(fd, body, body_n, 2000);
    uint8_t buf[64];
    size_t n = 0;
    int op = 0;
    for (int64_t until = load_now_ns() + 2000000000; n < 12 && load_now_ns() < until;) {
        ssize_t r = recv(fd, buf + n, sizeof(buf) - n, MSG_DONTWAIT);
        if (r > 0) {
            n += (size_t)r;
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
            op = r == 0 ? 0 : -1;
            break;
        } else {
            atk_pump(c, 5);
        }
    }
    close(fd);
    if (n >= 12)
        return !memcmp(buf, "HTTP/1.1 413", 12);
    return op;
}

int atk_oversized(atk_ctx *c)
{
    const size_t body_n = 8u << 20; /* far over the default --max-body of 64 KiB */
    uint8_t *body = malloc(body_n);
    if (!body)
        return -1;
    memset(body, 'x', body_n);
    atk_begin(c);
    int read_413 = 0, reset = 0, other = 0;
    for (int t = 0; t < c->cfg->tries; t++) {
        int r = oversized_once(c, body, body_n);
        read_413 += r == 1;
        reset += r == -1;
        other += r == 0;
    }
    free(body);
    atk_end(c, 1);
    atk_say(c, "%d tries of an 8 MiB body: the 413 read %d, reset %d, other/nothing %d",
            c->cfg->tries, read_413, reset, other);
    return 0;
}
