/*
 * attack_raw: raw sockets for what a well-behaved client never sends (see attack.h).
 * load_ws frames whole messages through wslay; the attacks need a fragment that never
 * ends, a frame that is mostly not there yet, and requests written back to back in one
 * write, so they cut their bytes here. Every wait has a deadline.
 */
#include "attack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int make_socket(const atk_cfg *cfg, bool nonblock, const char *src)
{
    struct sockaddr_in from = {.sin_family = AF_INET};
    if (src && inet_pton(AF_INET, src, &from.sin_addr) != 1)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (inet_pton(AF_INET, cfg->host, &a.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    int one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (src && bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0) {
        close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

int atk_raw_connect(const atk_cfg *cfg)
{
    return make_socket(cfg, false, NULL);
}

int atk_raw_connect_nb(const atk_cfg *cfg)
{
    return make_socket(cfg, true, NULL);
}

int atk_raw_connect_from(const atk_cfg *cfg, const char *src)
{
    return make_socket(cfg, true, src);
}

/* Waits for fd to be ready for ev until deadline (monotonic ns): true when ready. */
static bool wait_fd(int fd, short ev, int64_t deadline)
{
    int64_t left = (deadline - load_now_ns()) / 1000000;
    struct pollfd p = {.fd = fd, .events = ev};
    return left > 0 && poll(&p, 1, (int)left) == 1;
}

size_t atk_raw_write(int fd, const void *p, size_t n, int timeout_ms)
{
    int64_t deadline = load_now_ns() + (int64_t)timeout_ms * 1000000;
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, (const char *)p + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            break;
        if (!wait_fd(fd, POLLOUT, deadline))
            break;
    }
    return off;
}

int atk_raw_ws(const atk_cfg *cfg, const char *sp, int timeout_ms)
{
    int fd = atk_raw_connect(cfg);
    if (fd < 0)
        return -1;
    char req[512], head[1024];
    /* A fixed key: the answer's Sec-WebSocket-Accept is not checked, only its 101. */
    int n = snprintf(req, sizeof(req),
                     "GET /ws HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: "
                     "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
                     cfg->host, cfg->port, sp);
    if (atk_raw_write(fd, req, (size_t)n, timeout_ms) != (size_t)n)
        goto fail;
    /* Byte by byte up to the blank line: what follows is frames, for the caller. */
    int64_t deadline = load_now_ns() + (int64_t)timeout_ms * 1000000;
    size_t got = 0;
    while (got < sizeof(head) - 1) {
        if (!wait_fd(fd, POLLIN, deadline) || recv(fd, head + got, 1, 0) != 1)
            goto fail;
        got++;
        if (got >= 4 && !memcmp(head + got - 4, "\r\n\r\n", 4))
            break;
    }
    head[got] = 0;
    if (strncmp(head, "HTTP/1.1 101", 12))
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

size_t atk_raw_frame_enc(uint8_t *f, int opcode, bool fin, const void *p, size_t n)
{
    size_t h = 0;
    f[h++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    if (n < 126) {
        f[h++] = (uint8_t)(0x80 | n);
    } else if (n < 65536) {
        f[h++] = 0x80 | 126;
        f[h++] = (uint8_t)(n >> 8);
        f[h++] = (uint8_t)n;
    } else {
        f[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            f[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    static const uint8_t mask[4] = {0x5a, 0xa5, 0x3c, 0xc3};
    memcpy(f + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++)
        f[h + i] = ((const uint8_t *)p)[i] ^ mask[i & 3];
    return h + n;
}

size_t atk_raw_frame(int fd, int opcode, bool fin, const void *p, size_t n, int timeout_ms)
{
    uint8_t *f = malloc(n + ATK_FRAME_HEAD);
    if (!f)
        return 0;
    size_t w = atk_raw_write(fd, f, atk_raw_frame_enc(f, opcode, fin, p, n), timeout_ms);
    free(f);
    return w;
}

int atk_raw_closed(int fd, bool *answered)
{
    char buf[4096];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r > 0) {
            *answered = true;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        return 1;
    }
}

/* Reads exactly n bytes by deadline: 0, or atk_raw_read_frame's -1/-2/-3. */
static int read_all(int fd, uint8_t *p, size_t n, int64_t deadline)
{
    size_t got = 0;
    while (got < n) {
        if (!wait_fd(fd, POLLIN, deadline))
            return -1;
        ssize_t r = recv(fd, p + got, n - got, 0);
        if (r == 0)
            return -2;
        if (r < 0)
            return errno == EAGAIN || errno == EINTR ? -1 : -3;
        got += (size_t)r;
    }
    return 0;
}

int atk_raw_read_frame(int fd, uint8_t *buf, size_t cap, size_t *n, int timeout_ms)
{
    int64_t deadline = load_now_ns() + (int64_t)timeout_ms * 1000000;
    uint8_t h[8];
    int rc = read_all(fd, h, 2, deadline);
    if (rc)
        return rc;
    int opcode = h[0] & 0x0f;
    uint64_t len = h[1] & 0x7f;
    int ext = len == 126 ? 2 : len == 127 ? 8 : 0;
    if (ext && (rc = read_all(fd, h, (size_t)ext, deadline)) != 0)
        return rc;
    if (ext)
        len = 0;
    for (int i = 0; i < ext; i++)
        len = len << 8 | h[i];
    *n = 0;
    while (len > 0) { /* a server frame is not masked */
        uint8_t skip[4096];
        size_t room = *n < cap ? cap - *n : 0;
        size_t most = room ? room : sizeof(skip), want = len < most ? (size_t)len : most;
        if ((rc = read_all(fd, room ? buf + *n : skip, want, deadline)) != 0)
            return rc;
        if (room)
            *n += want;
        len -= want;
    }
    return opcode;
}
