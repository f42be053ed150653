/*
 * gw_floor: the floor of a WebSocket fan-out on this machine, the program the gateway's
 * server CPU per delivery is divided by in docs/BENCHMARKS.md. It does what the gateway's
 * delivery path cannot avoid and nothing else: the same sockets (the same load generator
 * on the other end), frames encoded once and shared, and the same batching as the gateway
 * (one send per session per loop round). No storage, no protocol, no TLS.
 *
 *   gw_floor --port P [--host 127.0.0.1] [--max-sessions N]
 *
 * One thread, epoll (level-triggered), non-blocking sockets. A client is upgraded by the
 * RFC 6455 handshake (Sec-WebSocket-Accept by OpenSSL's SHA-1 and base64; the first
 * subprotocol offered is echoed). Every message a client sends (text or binary, one frame
 * or its fragments, 1 MiB at most) becomes ONE unmasked server frame, header and payload in
 * one refcounted buffer, queued to every other open session; a ping is answered by a pong,
 * a close by a close. Each round, every session with queued output gets one sendmsg() of
 * its queue (an iovec per frame); a socket that takes less is watched for EPOLLOUT.
 *
 * Bounds: a handshake of 8 KiB, a message of 1 MiB, 8 MiB queued per session (past it
 * that session is closed: a reader too slow for the fan-out), --max-sessions (default
 * 100,000, and below the open-files limit, raised to its hard limit). Bad input (a bad
 * handshake, a frame too large, a protocol error) closes that socket only. Text is not
 * checked for UTF-8: the floor does only what every server must. SIGTERM or SIGINT: exits 0.
 * Prints "gw_floor: listening on HOST:PORT" (the port bound, for --port 0) once listening.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define FL_HANDSHAKE_MAX 8192   /* bytes of an upgrade request */
#define FL_MSG_MAX (1u << 20)   /* payload of a message (all its fragments) */
#define FL_QUEUE_MAX (8u << 20) /* bytes queued to one session before it is closed */
#define FL_READ_CHUNK 65536     /* room made for each read */
#define FL_IOV_MAX 1024         /* frames in one sendmsg (IOV_MAX on Linux) */
#define FL_EVENTS 1024          /* epoll events taken per round */
#define FL_DEFAULT_MAX_SESSIONS 100000

/* A server frame, ready to send: shared by every session it is queued to (one copy per
 * frame, not per session), freed when the last one has sent it. */
typedef struct fl_frame {
    size_t refs;    /* queues holding it (+1 while it is being broadcast) */
    size_t len;     /* bytes in data */
    uint8_t data[]; /* header + payload */
} fl_frame;

enum fl_kind { FL_LISTENER, FL_SIGNALS, FL_SESSION };

/* What an epoll event points to: the listener, the signalfd or a session (first member). */
typedef struct fl_src {
    enum fl_kind kind;
} fl_src;

typedef struct fl_sess {
    fl_src src;
    int fd;
    size_t idx;   /* position in fl_server.sess */
    bool open;    /* upgraded: receives broadcasts */
    bool blocked; /* the socket took less than offered: waiting for EPOLLOUT */
    bool dirty;   /* in this round's flush list */
    bool dead;    /* closed; freed at the end of the round (events of this round may name it) */
    uint8_t *in;  /* bytes read and not parsed yet (a handshake, then frames) */
    size_t in_n, in_cap;
    size_t in_need; /* bytes of the frame begun in it (0: none begun) */
    uint8_t *msg;   /* a fragmented message so far, unmasked */
    size_t msg_n;
    int msg_op;   /* its opcode (text or binary); 0: none under way */
    fl_frame **q; /* output queue: a ring of frames (q_cap a power of two) */
    size_t q_head, q_n, q_cap;
    size_t q_off;   /* bytes of the head frame sent already */
    size_t q_bytes; /* bytes queued and not sent */
} fl_sess;

typedef struct fl_server {
    int ep, lfd, sfd;
    int spare_fd; /* given up to accept-and-close a connection when out of descriptors */
    fl_src listener, signals;
    fl_sess **sess; /* every session, upgraded or not */
    size_t n_sess, cap_sess, max_sess;
    fl_sess **dirty; /* sessions given output this round */
    size_t n_dirty, cap_dirty;
    fl_sess **dead; /* sessions closed this round */
    size_t n_dead, cap_dead;
    struct iovec iov[FL_IOV_MAX];
} fl_server;

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* Room for need pointers in a growable array; false when out of memory. */
static bool reserve(fl_sess ***arr, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 256;
    while (ncap < need)
        ncap *= 2;
    fl_sess **na = realloc(*arr, ncap * sizeof(*na));
    if (!na)
        return false;
    *arr = na;
    *cap = ncap;
    return true;
}

/* Appends p to a growable array of pointers; false when out of memory. */
static bool push(fl_sess ***arr, size_t *n, size_t *cap, fl_sess *p)
{
    if (!reserve(arr, cap, *n + 1))
        return false;
    (*arr)[(*n)++] = p;
    return true;
}

/* A frame of opcode op with room for len payload bytes (written by the caller at the
 * returned pointer), with one reference; NULL when out of memory. */
static fl_frame *frame_new(int op, size_t len, uint8_t **payload)
{
    size_t hdr = len <= 125 ? 2 : len <= 65535 ? 4 : 10;
    fl_frame *f = malloc(sizeof(*f) + hdr + len);
    if (!f)
        return NULL;
    f->refs = 1;
    f->len = hdr + len;
    f->data[0] = (uint8_t)(0x80 | op);
    if (hdr == 2) {
        f->data[1] = (uint8_t)len;
    } else if (hdr == 4) {
        f->data[1] = 126;
        f->data[2] = (uint8_t)(len >> 8);
        f->data[3] = (uint8_t)len;
    } else {
        f->data[1] = 127;
        for (int i = 0; i < 8; i++)
            f->data[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    }
    *payload = f->data + hdr;
    return f;
}

static void frame_unref(fl_frame *f)
{
    if (--f->refs == 0)
        free(f);
}

/* dst = src unmasked; eight bytes at a time (the mask repeats every four). */
static void unmask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t mask[4])
{
    uint8_t m8b[8];
    uint64_t m8, v;
    memcpy(m8b, mask, 4);
    memcpy(m8b + 4, mask, 4);
    memcpy(&m8, m8b, 8);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&v, src + i, 8);
        v ^= m8;
        memcpy(dst + i, &v, 8);
    }
    for (; i < n; i++)
        dst[i] = src[i] ^ mask[i & 3];
}

/* Closes s now (its queue dropped) and frees it at the end of the round. */
static void sess_kill(fl_server *sv, fl_sess *s)
{
    if (s->dead)
        return;
    s->dead = true;
    close(s->fd); /* also takes it out of the epoll set */
    s->fd = -1;
    for (; s->q_n; s->q_n--, s->q_head = (s->q_head + 1) & (s->q_cap - 1))
        frame_unref(s->q[s->q_head]);
    s->q_bytes = 0;
    sv->dead[sv->n_dead++] = s; /* room for every session was made when it was accepted */
}

/* Appends f to s's ring (one more reference); false when out of memory. */
static bool queue_push(fl_sess *s, fl_frame *f)
{
    if (s->q_n == s->q_cap) {
        size_t ncap = s->q_cap ? s->q_cap * 2 : 16;
        fl_frame **nq = malloc(ncap * sizeof(*nq));
        if (!nq)
            return false;
        for (size_t i = 0; i < s->q_n; i++)
            nq[i] = s->q[(s->q_head + i) & (s->q_cap - 1)];
        free(s->q);
        s->q = nq;
        s->q_cap = ncap;
        s->q_head = 0;
    }
    f->refs++;
    s->q[(s->q_head + s->q_n++) & (s->q_cap - 1)] = f;
    s->q_bytes += f->len;
    return true;
}

/* One sendmsg of s's queue (an iovec per frame, the first from where it stopped), and
 * the frames sent dropped from it; -1 when the socket failed. */
static int send_queue(fl_server *sv, fl_sess *s)
{
    int n = 0;
    for (size_t i = 0; i < s->q_n && n < FL_IOV_MAX; i++, n++) {
        fl_frame *f = s->q[(s->q_head + i) & (s->q_cap - 1)];
        size_t off = i == 0 ? s->q_off : 0;
        sv->iov[n] = (struct iovec){f->data + off, f->len - off};
    }
    struct msghdr mh = {.msg_iov = sv->iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    size_t left = (size_t)w;
    s->q_bytes -= left;
    while (s->q_n && left) {
        fl_frame *f = s->q[s->q_head];
        size_t rest = f->len - s->q_off;
        if (left < rest) {
            s->q_off += left;
            break;
        }
        left -= rest;
        s->q_off = 0;
        s->q_head = (s->q_head + 1) & (s->q_cap - 1);
        s->q_n--;
        frame_unref(f);
    }
    return 0;
}

/* Ends s: a close frame (code; 0: none) behind what is queued, one send of it all, best
 * effort (a peer that does not read gets no more), and closed. */
static void sess_fail(fl_server *sv, fl_sess *s, int code)
{
    uint8_t *payload;
    fl_frame *f = s->open ? frame_new(0x8, code ? 2 : 0, &payload) : NULL;
    if (f) {
        if (code) {
            payload[0] = (uint8_t)(code >> 8);
            payload[1] = (uint8_t)code;
        }
        if (queue_push(s, f))
            (void)send_queue(sv, s);
        frame_unref(f);
    }
    sess_kill(sv, s);
}

/* Queues f to s for this round's flush; a session past its queue bound is closed. */
static void enqueue(fl_server *sv, fl_sess *s, fl_frame *f)
{
    if (s->q_bytes + f->len > FL_QUEUE_MAX) {
        sess_fail(sv, s, 1008);
        return;
    }
    if (!queue_push(s, f)) {
        sess_kill(sv, s);
        return;
    }
    if (!s->dirty && !s->blocked) {
        if (!push(&sv->dirty, &sv->n_dirty, &sv->cap_dirty, s)) {
            sess_kill(sv, s);
            return;
        }
        s->dirty = true;
    }
}

/* Queues f to every other upgraded session; f's own reference is given up. */
static void broadcast(fl_server *sv, fl_sess *from, fl_frame *f)
{
    for (size_t i = 0; i < sv->n_sess; i++) {
        fl_sess *s = sv->sess[i];
        if (s != from && s->open && !s->dead)
            enqueue(sv, s, f);
    }
    frame_unref(f);
}

/* A frame of its own to s (a handshake answer, a pong). */
static void reply(fl_server *sv, fl_sess *s, int op, const void *p, size_t n)
{
    uint8_t *payload;
    fl_frame *f = frame_new(op, n, &payload);
    if (!f) {
        sess_kill(sv, s);
        return;
    }
    memcpy(payload, p, n);
    enqueue(sv, s, f);
    frame_unref(f);
}

/* The value of header name in the request head (the first such line), trimmed; NULL if
 * absent. */
static const char *header(const char *head, size_t hlen, const char *name, size_t *vlen)
{
    size_t nlen = strlen(name);
    const char *end = head + hlen, *line = memchr(head, '\n', hlen);
    while (line && ++line < end) {
        const char *eol = memchr(line, '\r', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nlen && line[nlen] == ':' && !strncasecmp(line, name, nlen)) {
            const char *v = line + nlen + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        line = memchr(eol, '\n', (size_t)(end - eol));
    }
    return NULL;
}

/* Whether the comma-separated list v holds token (any case). */
static bool has_token(const char *v, size_t vlen, const char *token)
{
    size_t tlen = strlen(token);
    for (size_t i = 0; i + tlen <= vlen; i++)
        if (!strncasecmp(v + i, token, tlen))
            return true;
    return false;
}

/* Upgrades s once its request head is in: 101 (queued as its first frame) or 400 and
 * closed. Returns the head's size, 0 while it is incomplete. */
static size_t handshake(fl_server *sv, fl_sess *s)
{
    static const char bad[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
                              "Content-Length: 0\r\n\r\n";
    const char *head = (const char *)s->in;
    const char *end = memmem(head, s->in_n, "\r\n\r\n", 4);
    if (!end) {
        if (s->in_n >= FL_HANDSHAKE_MAX)
            goto reject;
        return 0;
    }
    size_t hlen = (size_t)(end - head) + 4, n, vn, kn, pn = 0;
    const char *first_eol = memchr(head, '\r', hlen);
    const char *v, *key = header(head, hlen, "Sec-WebSocket-Key", &kn);
    const char *proto = header(head, hlen, "Sec-WebSocket-Protocol", &pn);
    if (hlen < 14 || memcmp(head, "GET ", 4) != 0 || (size_t)(first_eol - head) < 13 ||
        memcmp(first_eol - 9, " HTTP/1.1", 9) != 0 || !key || kn != 24)
        goto reject;
    if (!(v = header(head, hlen, "Upgrade", &vn)) || !has_token(v, vn, "websocket") ||
        !(v = header(head, hlen, "Connection", &vn)) || !has_token(v, vn, "upgrade") ||
        !(v = header(head, hlen, "Sec-WebSocket-Version", &vn)) || vn != 2 || memcmp(v, "13", 2))
        goto reject;
    if (proto) { /* the first one offered */
        for (n = 0; n < pn && proto[n] != ',' && proto[n] != ' ' && proto[n] != '\t'; n++)
            ;
        pn = n;
        if (pn > 64)
            goto reject;
    }

    char cat[24 + sizeof(ws_guid)], accept[32], out[256];
    unsigned char sha[SHA_DIGEST_LENGTH];
    memcpy(cat, key, 24);
    memcpy(cat + 24, ws_guid, sizeof(ws_guid) - 1);
    SHA1((const unsigned char *)cat, 24 + sizeof(ws_guid) - 1, sha);
    EVP_EncodeBlock((unsigned char *)accept, sha, SHA_DIGEST_LENGTH);
    int w = snprintf(out, sizeof(out),
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s%.*s%s\r\n",
                     accept, pn ? "Sec-WebSocket-Protocol: " : "", (int)pn, pn ? proto : "",
                     pn ? "\r\n" : "");
    /* The answer goes through the queue like any frame: a frame's bytes are sent as they
     * are, and whatever follows it is behind it. */
    fl_frame *f = malloc(sizeof(*f) + (size_t)w);
    if (!f) {
        sess_kill(sv, s);
        return hlen;
    }
    f->refs = 1;
    f->len = (size_t)w;
    memcpy(f->data, out, (size_t)w);
    enqueue(sv, s, f);
    frame_unref(f);
    s->open = true;
    return hlen;
reject:
    (void)!send(s->fd, bad, sizeof(bad) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    sess_kill(sv, s);
    return 0;
}

/* A fragment unmasked onto the message under way (its size was checked against the
 * bound before it was read); false when out of memory. */
static bool append_msg(fl_sess *s, const uint8_t *mask, const uint8_t *p, size_t len)
{
    uint8_t *nm = realloc(s->msg, s->msg_n + len + 1);
    if (!nm)
        return false;
    s->msg = nm;
    unmask(s->msg + s->msg_n, p, len, mask);
    s->msg_n += len;
    return true;
}

/* One complete client frame, its payload still masked at p. */
static void on_frame(fl_server *sv, fl_sess *s, bool fin, int op, const uint8_t *mask,
                     const uint8_t *p, size_t len)
{
    uint8_t *payload, ctl[125];
    fl_frame *f;
    switch (op) {
    case 0x8: /* close: answered with its status code, then closed */
        unmask(ctl, p, len < 2 ? len : 2, mask);
        sess_fail(sv, s, len >= 2 ? ctl[0] << 8 | ctl[1] : 0);
        return;
    case 0x9: /* ping: a pong with the same payload */
        unmask(ctl, p, len, mask);
        reply(sv, s, 0xa, ctl, len);
        return;
    case 0xa: return;
    case 0x0: /* a continuation of the message under way */
        if (!s->msg_op)
            break;
        if (!append_msg(s, mask, p, len)) {
            sess_kill(sv, s);
            return;
        }
        if (!fin)
            return;
        if ((f = frame_new(s->msg_op, s->msg_n, &payload)) != NULL) {
            memcpy(payload, s->msg, s->msg_n);
            broadcast(sv, s, f);
        }
        free(s->msg);
        s->msg = NULL;
        s->msg_n = 0;
        s->msg_op = 0;
        if (!f)
            sess_kill(sv, s);
        return;
    default: /* text or binary: whole, or the first fragment */
        if (s->msg_op)
            break;
        if (!fin) {
            if (!append_msg(s, mask, p, len))
                sess_kill(sv, s);
            s->msg_op = op;
            return;
        }
        if (!(f = frame_new(op, len, &payload))) {
            sess_kill(sv, s);
            return;
        }
        unmask(payload, p, len, mask); /* the only copy of the payload */
        broadcast(sv, s, f);
        return;
    }
    sess_fail(sv, s, 1002); /* a continuation without a start, or a start inside one */
}

/* Every complete frame in s->in; what is left is the start of the next one. */
static void parse_frames(fl_server *sv, fl_sess *s, size_t pos)
{
    s->in_need = 0;
    while (!s->dead && s->in_n - pos >= 2) {
        const uint8_t *p = s->in + pos;
        size_t avail = s->in_n - pos, hdr = 2;
        bool fin = p[0] & 0x80;
        int op = p[0] & 0x0f;
        uint64_t len = p[1] & 0x7f;
        if (len == 126) {
            if (avail < 4)
                break;
            len = (uint64_t)p[2] << 8 | p[3];
            hdr = 4;
        } else if (len == 127) {
            if (avail < 10)
                break;
            len = 0;
            for (int i = 0; i < 8; i++)
                len = len << 8 | p[2 + i];
            hdr = 10;
        }
        bool control = op & 0x8;
        if ((p[0] & 0x70) || !(p[1] & 0x80) || (control && (!fin || len > 125)) ||
            (op > 0x2 && op < 0x8) || op > 0xa) {
            sess_fail(sv, s, 1002); /* reserved bits or opcodes, unmasked, bad control */
            return;
        }
        if (len > FL_MSG_MAX || (!control && s->msg_n + len > FL_MSG_MAX)) {
            sess_fail(sv, s, 1009); /* too big: refused before it is read */
            return;
        }
        if (avail < hdr + 4 + len) {
            s->in_need = hdr + 4 + (size_t)len; /* read room for all of it */
            break;
        }
        on_frame(sv, s, fin, op, p + hdr, p + hdr + 4, (size_t)len);
        pos += hdr + 4 + (size_t)len;
    }
    if (s->dead)
        return;
    memmove(s->in, s->in + pos, s->in_n - pos);
    s->in_n -= pos;
    /* Sessions that only receive hold no input buffer; a large one goes back at once. */
    if (s->in_n == 0 && s->in_cap != FL_READ_CHUNK) {
        free(s->in);
        s->in = NULL;
        s->in_cap = 0;
    }
}

/* One read of s (level-triggered: what is left is read next round), then its frames. */
static void sess_read(fl_server *sv, fl_sess *s)
{
    size_t room = s->open ? FL_READ_CHUNK : FL_HANDSHAKE_MAX - s->in_n;
    if (s->in_need > s->in_n + room)
        room = s->in_need - s->in_n;
    if (s->in_cap - s->in_n < room) {
        size_t ncap = s->in_n + room;
        uint8_t *nb = realloc(s->in, ncap);
        if (!nb) {
            sess_kill(sv, s);
            return;
        }
        s->in = nb;
        s->in_cap = ncap;
    }
    ssize_t r = recv(s->fd, s->in + s->in_n, room, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) { /* the peer went away (EOF or an error) */
        sess_kill(sv, s);
        return;
    }
    s->in_n += (size_t)r;
    size_t pos = 0;
    if (!s->open && (pos = handshake(sv, s)) == 0)
        return;
    parse_frames(sv, s, pos);
}

/* This round's send to s; a socket that took less is watched for EPOLLOUT. */
static void sess_flush(fl_server *sv, fl_sess *s)
{
    if (send_queue(sv, s) != 0) {
        sess_kill(sv, s);
        return;
    }
    if (s->q_n) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = s};
        s->blocked = true;
        if (epoll_ctl(sv->ep, EPOLL_CTL_MOD, s->fd, &ev) != 0)
            sess_kill(sv, s);
    }
}

static void on_writable(fl_server *sv, fl_sess *s)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    s->blocked = false;
    if (epoll_ctl(sv->ep, EPOLL_CTL_MOD, s->fd, &ev) != 0 ||
        (!s->dirty && !push(&sv->dirty, &sv->n_dirty, &sv->cap_dirty, s))) {
        sess_kill(sv, s);
        return;
    }
    s->dirty = true;
}

/* Every connection waiting; past --max-sessions, or out of descriptors, one is accepted
 * and closed at once (the spare descriptor makes room), so that the listener does not stay
 * readable for ever. */
static void on_accept(fl_server *sv)
{
    for (;;) {
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if ((errno == EMFILE || errno == ENFILE) && sv->spare_fd >= 0) {
                close(sv->spare_fd);
                fd = accept(sv->lfd, NULL, NULL);
                if (fd >= 0)
                    close(fd);
                sv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                continue;
            }
            return; /* EAGAIN: none left */
        }
        fl_sess *s = sv->n_sess < sv->max_sess ? calloc(1, sizeof(*s)) : NULL;
        if (!s) {
            close(fd);
            continue;
        }
        int one = 1; /* as the gateway's libwebsockets does */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s->src.kind = FL_SESSION;
        s->fd = fd;
        s->idx = sv->n_sess;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
        if (!reserve(&sv->dead, &sv->cap_dead, sv->n_sess + 1) ||
            !push(&sv->sess, &sv->n_sess, &sv->cap_sess, s)) {
            close(fd);
            free(s);
            continue;
        }
        if (epoll_ctl(sv->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            sess_kill(sv, s);
    }
}

static void sess_free(fl_sess *s)
{
    free(s->in);
    free(s->msg);
    free(s->q);
    free(s);
}

/* The sessions closed this round leave the list (the last one takes each one's place). */
static void reap(fl_server *sv)
{
    for (size_t i = 0; i < sv->n_dead; i++) {
        fl_sess *s = sv->dead[i], *last = sv->sess[--sv->n_sess];
        sv->sess[s->idx] = last;
        last->idx = s->idx;
        sess_free(s);
    }
    sv->n_dead = 0;
}

static int listen_on(fl_server *sv, const char *host, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "gw_floor: --host %s: not an IPv4 address\n", host);
        return -1;
    }
    int one = 1;
    socklen_t alen = sizeof(a);
    sv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sv->lfd < 0 || setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(sv->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(sv->lfd, SOMAXCONN) != 0 ||
        getsockname(sv->lfd, (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "gw_floor: listening on %s:%d: %s\n", host, port, strerror(errno));
        return -1;
    }
    printf("gw_floor: listening on %s:%d\n", host, ntohs(a.sin_port));
    fflush(stdout);
    return 0;
}

/* The loop: events (accepts, reads, writable sockets), then one send per session with
 * output, then the closed sessions freed. Until SIGTERM or SIGINT. */
static int serve(fl_server *sv)
{
    struct epoll_event evs[FL_EVENTS];
    for (;;) {
        int n = epoll_wait(sv->ep, evs, FL_EVENTS, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            perror("gw_floor: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            fl_src *src = evs[i].data.ptr;
            if (src->kind == FL_LISTENER) {
                on_accept(sv);
                continue;
            }
            if (src->kind == FL_SIGNALS)
                return 0;
            fl_sess *s = (fl_sess *)src;
            if (!s->dead && (evs[i].events & EPOLLOUT))
                on_writable(sv, s);
            if (!s->dead && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                sess_read(sv, s);
        }
        for (size_t i = 0; i < sv->n_dirty; i++) {
            fl_sess *s = sv->dirty[i];
            s->dirty = false;
            if (!s->dead && !s->blocked && s->q_n)
                sess_flush(sv, s);
        }
        sv->n_dirty = 0;
        reap(sv);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gw_floor --port P [--host 127.0.0.1] [--max-sessions N]\n"
               "A WebSocket broadcast server and nothing more (the benchmarks' floor): every\n"
               "message a client sends goes to every other client, encoded once, one send\n"
               "per client per loop round. --port 0: any free port (printed). Stops on\n"
               "SIGTERM or SIGINT.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
                                         {"host", required_argument, NULL, 'H'},
                                         {"max-sessions", required_argument, NULL, 'm'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *host = "127.0.0.1";
    long port = -1, max_sess = FL_DEFAULT_MAX_SESSIONS;
    char *end;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            port = strtol(optarg, &end, 10);
            port = *end ? -1 : port;
            break;
        case 'H': host = optarg; break;
        case 'm':
            max_sess = strtol(optarg, &end, 10);
            max_sess = *end ? 0 : max_sess;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || port < 0 || port > 65535 || max_sess < 1) {
        fprintf(stderr, "gw_floor: %s\n",
                optind < argc  ? "unexpected argument"
                : max_sess < 1 ? "--max-sessions must be at least 1"
                               : "--port 0-65535 is required");
        usage(stderr);
        return 2;
    }

    /* Every descriptor the hard limit allows; sessions stay below it (listener, epoll,
     * signalfd, spare, stdio and some slack). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)max_sess + 16 > rl.rlim_cur)
            max_sess = rl.rlim_cur > 32 ? (long)rl.rlim_cur - 16 : 16;
    }

    fl_server sv = {.ep = -1, .lfd = -1, .sfd = -1, .max_sess = (size_t)max_sess};
    sv.listener.kind = FL_LISTENER;
    sv.signals.kind = FL_SIGNALS;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    signal(SIGPIPE, SIG_IGN);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int rc = 1;
    sv.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    sv.sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    sv.ep = epoll_create1(EPOLL_CLOEXEC);
    if (sv.sfd < 0 || sv.ep < 0) {
        perror("gw_floor: signalfd/epoll");
        goto out;
    }
    if (listen_on(&sv, host, (int)port) != 0)
        goto out;
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &sv.listener};
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &sv.signals};
    if (epoll_ctl(sv.ep, EPOLL_CTL_ADD, sv.lfd, &lev) != 0 ||
        epoll_ctl(sv.ep, EPOLL_CTL_ADD, sv.sfd, &sev) != 0) {
        perror("gw_floor: epoll_ctl");
        goto out;
    }
    rc = serve(&sv);
out:
    for (size_t i = 0; i < sv.n_sess; i++)
        sess_kill(&sv, sv.sess[i]);
    for (size_t i = 0; i < sv.n_sess; i++)
        sess_free(sv.sess[i]);
    free(sv.sess);
    free(sv.dirty);
    free(sv.dead);
    if (sv.lfd >= 0)
        close(sv.lfd);
    if (sv.sfd >= 0)
        close(sv.sfd);
    if (sv.ep >= 0)
        close(sv.ep);
    if (sv.spare_fd >= 0)
        close(sv.spare_fd);
    return rc;
}
