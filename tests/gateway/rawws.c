#include "rawws.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int rawws_connect(rawws *c, int port, const char *src)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (src) {
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
            goto fail;
    }
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        goto fail;
    return 0;
fail:
    close(c->fd);
    c->fd = -1;
    return -1;
}

void rawws_close(rawws *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->in);
    free(c->frame);
    free(c->evs);
    pr_decoder_free(c->dec);
    c->dec = NULL;
    c->evs = NULL;
    c->n_evs = c->next_ev = 0;
    c->in = c->frame = NULL;
    c->in_n = c->in_cap = c->frame_cap = 0;
}

void rawws_reset(rawws *c)
{
    struct linger l = {1, 0};
    if (c->fd >= 0)
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    rawws_close(c);
}

int rawws_write(rawws *c, const void *p, size_t n, bool bytewise)
{
    const uint8_t *b = p;
    while (n) {
        size_t step = bytewise ? 1 : n;
        ssize_t w = send(c->fd, b, step, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
        if (bytewise && n) {
            struct timespec d = {0, 200 * 1000}; /* 0.2 ms: one segment per byte */
            nanosleep(&d, NULL);
        }
    }
    return 0;
}

/* Reads more bytes into c->in (waiting up to the deadline); 0, -1 on EOF or an error, -2
 * on timeout. */
static int fill(rawws *c, long deadline)
{
    long left = deadline - now_ms();
    if (left < 0)
        left = 0;
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, (int)left);
    if (pr == 0)
        return -2;
    if (pr < 0)
        return -1;
    if (c->in_n + 65536 > c->in_cap) {
        size_t ncap = c->in_cap ? c->in_cap * 2 : 131072;
        uint8_t *nb = realloc(c->in, ncap);
        if (!nb)
            return -1;
        c->in = nb;
        c->in_cap = ncap;
    }
    ssize_t r = recv(c->fd, c->in + c->in_n, c->in_cap - c->in_n, 0);
    if (r <= 0)
        return -1;
    c->in_n += (size_t)r;
    return 0;
}

static void consume(rawws *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_n - n);
    c->in_n -= n;
}

int rawws_handshake(rawws *c, int port, bool bytewise, int timeout_ms)
{
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
                     port, c->subprotocol ? c->subprotocol : "gw.v1");
    if (rawws_write(c, req, (size_t)n, bytewise) != 0)
        return -1;
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        uint8_t *end = c->in_n ? memmem(c->in, c->in_n, "\r\n\r\n", 4) : NULL;
        if (end) {
            bool ok = c->in_n > 12 && memcmp(c->in, "HTTP/1.1 101", 12) == 0;
            c->agreed[0] = 0;
            const char *h = memmem(c->in, (size_t)(end - c->in), "sec-websocket-protocol: ", 24);
            if (!h)
                h = memmem(c->in, (size_t)(end - c->in), "Sec-WebSocket-Protocol: ", 24);
            if (h)
                sscanf(h + 24, "%31[^\r]", c->agreed);
            consume(c, (size_t)(end + 4 - c->in));
            c->upgraded = ok;
            return ok ? 0 : -1;
        }
        if (fill(c, deadline) != 0)
            return -1;
    }
}

int rawws_open(rawws *c, int port, const char *src, int timeout_ms)
{
    if (rawws_connect(c, port, src) != 0)
        return -1;
    if (rawws_handshake(c, port, false, timeout_ms) != 0) {
        rawws_close(c);
        return -1;
    }
    return 0;
}

size_t rawws_frame(uint8_t *out, size_t cap, int opcode, bool fin, const void *payload, size_t len)
{
    size_t hdr = 2 + (len > 65535 ? 8 : len > 125 ? 2 : 0) + 4;
    if (cap < hdr + len)
        return 0;
    size_t i = 0;
    out[i++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    if (len <= 125) {
        out[i++] = (uint8_t)(0x80 | len);
    } else if (len <= 65535) {
        out[i++] = 0x80 | 126;
        out[i++] = (uint8_t)(len >> 8);
        out[i++] = (uint8_t)len;
    } else {
        out[i++] = 0x80 | 127;
        for (int s = 56; s >= 0; s -= 8)
            out[i++] = (uint8_t)((uint64_t)len >> s);
    }
    /* Any mask will do; a varying one shows the server really unmasks. */
    uint8_t mask[4] = {(uint8_t)rand(), (uint8_t)rand(), (uint8_t)rand(), (uint8_t)rand()};
    memcpy(out + i, mask, 4);
    i += 4;
    const uint8_t *p = payload;
    for (size_t k = 0; k < len; k++)
        out[i + k] = p[k] ^ mask[k & 3];
    return i + len;
}

static int send_op(rawws *c, int opcode, const void *payload, size_t len, bool bytewise)
{
    size_t cap = len + 14;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -1;
    size_t n = rawws_frame(buf, cap, opcode, true, payload, len);
    int rc = rawws_write(c, buf, n, bytewise);
    free(buf);
    return rc;
}

int rawws_send(rawws *c, const void *payload, size_t len, bool bytewise)
{
    return send_op(c, RAWWS_BIN, payload, len, bytewise);
}

int rawws_send_text(rawws *c, const char *text)
{
    return send_op(c, RAWWS_TEXT, text, strlen(text), false);
}

int rawws_read_frame(rawws *c, int timeout_ms, int *opcode, const uint8_t **payload, size_t *len)
{
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        /* A server frame: FIN/opcode, length (7, 16 or 64 bits), never masked. */
        if (c->in_n >= 2) {
            size_t need = 2, plen = c->in[1] & 0x7f;
            if (plen == 126)
                need += 2;
            else if (plen == 127)
                need += 8;
            if (c->in_n >= need) {
                if (plen == 126)
                    plen = (size_t)c->in[2] << 8 | c->in[3];
                else if (plen == 127) {
                    plen = 0;
                    for (int k = 0; k < 8; k++)
                        plen = plen << 8 | c->in[2 + k];
                }
                if (c->in_n >= need + plen) {
                    int op = c->in[0] & 0x0f;
                    if (plen + 1 > c->frame_cap) {
                        uint8_t *nb = realloc(c->frame, plen + 1);
                        if (!nb)
                            return -1;
                        c->frame = nb;
                        c->frame_cap = plen + 1;
                    }
                    memcpy(c->frame, c->in + need, plen);
                    consume(c, need + plen);
                    if (op == RAWWS_CLOSE) {
                        c->close_code = plen >= 2 ? c->frame[0] << 8 | c->frame[1] : 1005;
                        snprintf(c->close_reason, sizeof(c->close_reason), "%.*s",
                                 plen > 2 ? (int)(plen - 2) : 0, (const char *)c->frame + 2);
                        return -1;
                    }
                    if (op == RAWWS_PING || op == RAWWS_PONG)
                        continue;
                    *opcode = op;
                    *payload = c->frame;
                    *len = plen;
                    return 0;
                }
            }
        }
        int rc = fill(c, deadline);
        if (rc != 0)
            return rc;
    }
}

bool rawws_wait_closed(rawws *c, int timeout_ms)
{
    long deadline = now_ms() + timeout_ms;
    while (c->upgraded) {
        int op;
        const uint8_t *p;
        size_t n;
        long left = deadline - now_ms();
        int rc = rawws_read_frame(c, left > 0 ? (int)left : 0, &op, &p, &n);
        if (rc == -1)
            return true; /* a close frame, EOF or a reset */
        if (rc == -2)
            return false;
    }
    for (;;) {
        long left = deadline - now_ms();
        if (left <= 0)
            return false;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, (int)left) <= 0)
            return false;
        uint8_t buf[4096];
        ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
        if (r <= 0)
            return true; /* EOF or reset */
    }
}

static int collect(void *ud, const pr_event *ev)
{
    rawws *c = ud;
    if (c->n_evs < 256)
        c->evs[c->n_evs++] = *ev;
    return 0;
}

int rawws_next(rawws *c, int timeout_ms, pr_event *ev)
{
    if (c->next_ev < c->n_evs) {
        *ev = c->evs[c->next_ev++];
        return 0;
    }
    if (!c->dec) {
        pr_limits lim = pr_limits_default();
        lim.max_frame = 16u << 20; /* a welcome of many groups is sent whole */
        c->dec = pr_decoder_new(&lim);
        c->evs = calloc(256, sizeof(*c->evs));
        if (!c->dec || !c->evs)
            return -3;
    }
    int op;
    const uint8_t *p;
    size_t n;
    int rc = rawws_read_frame(c, timeout_ms, &op, &p, &n);
    if (rc)
        return rc;
    c->n_evs = c->next_ev = 0;
    pr_error err;
    if (pr_decode_events(c->dec, p, n, collect, c, &err) != 0 || c->n_evs == 0)
        return -3;
    *ev = c->evs[c->next_ev++];
    return 0;
}

int rawws_request(rawws *c, const msgpack_sbuffer *sb, bool bytewise)
{
    return rawws_send(c, sb->data, sb->size, bytewise);
}

int rawws_expect(rawws *c, enum pr_ev_type t, pr_event *ev)
{
    while (rawws_next(c, 5000, ev) == 0)
        if (ev->t == t)
            return 0;
    return -1;
}

/* Sends sb (and frees its contents), then waits for an event of type want. */
static int request_and_expect(rawws *c, msgpack_sbuffer *sb, bool bytewise, enum pr_ev_type want)
{
    int rc = rawws_request(c, sb, bytewise);
    msgpack_sbuffer_destroy(sb);
    pr_event ev;
    return rc ? rc : rawws_expect(c, want, &ev);
}

int rawws_hello(rawws *c, const char *token, bool bytewise)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, (pr_slice){(const uint8_t *)token, strlen(token)});
    return request_and_expect(c, &sb, bytewise, PR_EV_WELCOME);
}

int rawws_join(rawws *c, const char *gid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 2, (pr_slice){(const uint8_t *)gid, strlen(gid)});
    return request_and_expect(c, &sb, false, PR_EV_JOINED);
}

void rawws_padded_ping(msgpack_sbuffer *sb, uint64_t rid, size_t n)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_str_with_body(&pk, "ping", 4);
    msgpack_pack_str_with_body(&pk, "rid", 3);
    msgpack_pack_uint64(&pk, rid);
    msgpack_pack_str_with_body(&pk, "pad", 3);
    msgpack_pack_str(&pk, (uint32_t)n);
    for (size_t i = 0; i < n; i += 4096) {
        static const char pad[4096] = {0};
        msgpack_pack_str_body(&pk, pad, n - i < 4096 ? n - i : 4096);
    }
}
