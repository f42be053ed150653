/* load_ws: the load generator's epoll + wslay + OpenSSL WebSocket client; see load_ws.h. */
#include "load_ws.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#define LW_HEAD_MAX 4096 /* the server's handshake answer must fit */
#define LW_EVENTS 256

enum phase { PH_TCP, PH_TLS, PH_REQUEST, PH_RESPONSE, PH_OPEN, PH_DONE };

struct lw_conn {
    lw_loop *loop;
    lw_conn *next; /* every connection of the loop, for lw_loop_free */
    int fd;
    SSL *ssl;
    enum phase ph;
    bool busy;       /* inside wslay: lw_send and lw_close only queue (wslay is not reentrant) */
    uint32_t events; /* what epoll watches now */
    bool ssl_wants_write;
    bool drained; /* a plain read came back short: the socket is empty for now */
    bool paused;  /* lw_pause: not reading (what the server sends piles up in its queue) */
    wslay_event_context_ptr ws;
    void *user;
    /* Handshake: the request going out, then the answer coming in. The bytes after the
     * answer's blank line are already WebSocket frames: wslay reads those first. */
    char *req;
    size_t req_n, req_off;
    char head[LW_HEAD_MAX + 1];
    size_t head_n, head_off, head_end;
    char accept[32]; /* the Sec-WebSocket-Accept the server must send back */
    char host[256];
    uint16_t close_code;
    char err[160];
};

struct lw_loop {
    int epfd;
    lw_callbacks cb;
    char *subprotocol;
    size_t max_msg;
    SSL_CTX *tls; /* made at the first wss:// connection */
    lw_conn *conns;
    uint64_t mask_rng;
    /* wslay asks for at most 4 KiB a time; reading 64 KiB per recv and handing it out from
     * here takes a sixteenth of the system calls. One buffer serves every connection: a
     * connection's wslay_event_recv runs until the socket would block, so what is read
     * for one connection is used up before the next one reads. */
    uint8_t rbuf[65536];
    size_t rbuf_off, rbuf_n;
    char err[200];
};

static void set_err(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

/* ---- I/O over a socket or TLS ------------------------------------------------------------ */

/* Returns bytes moved, 0 when the peer closed (read), -1 when it would block, -2 on error. */
static ssize_t io_read(lw_conn *k, void *buf, size_t n)
{
    if (!k->ssl) {
        ssize_t r = recv(k->fd, buf, n, 0);
        if (r >= 0)
            return r;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return -1;
        set_err(k->err, sizeof k->err, "recv: %s", strerror(errno));
        return -2;
    }
    int r = SSL_read(k->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    int e = SSL_get_error(k->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return -1;
    if (e == SSL_ERROR_WANT_WRITE) {
        k->ssl_wants_write = true;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    set_err(k->err, sizeof k->err, "TLS read: %s",
            ERR_reason_error_string(ERR_peek_last_error()) ?: "connection reset");
    ERR_clear_error();
    return -2;
}

static ssize_t io_write(lw_conn *k, const void *buf, size_t n)
{
    if (!k->ssl) {
        ssize_t r = send(k->fd, buf, n, MSG_NOSIGNAL);
        if (r >= 0)
            return r;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return -1;
        set_err(k->err, sizeof k->err, "send: %s", strerror(errno));
        return -2;
    }
    int r = SSL_write(k->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    int e = SSL_get_error(k->ssl, r);
    if (e == SSL_ERROR_WANT_WRITE) {
        k->ssl_wants_write = true;
        return -1;
    }
    if (e == SSL_ERROR_WANT_READ)
        return -1;
    set_err(k->err, sizeof k->err, "TLS write: %s",
            ERR_reason_error_string(ERR_peek_last_error()) ?: "connection reset");
    ERR_clear_error();
    return -2;
}

/* ---- wslay's callbacks -------------------------------------------------------------------- */

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
    (void)flags;
    lw_conn *k = ud;
    if (k->head_off < k->head_n) { /* frames that came with the handshake's answer */
        size_t m = k->head_n - k->head_off < len ? k->head_n - k->head_off : len;
        memcpy(buf, k->head + k->head_off, m);
        k->head_off += m;
        return (ssize_t)m;
    }
    lw_loop *l = k->loop;
    ssize_t r = -1;
    /* A short read emptied the socket: asking again would only return EAGAIN, one system
     * call per ready socket for nothing. epoll is level-triggered, so bytes that come
     * in meanwhile are reported at the next lw_poll. (TLS reads a record at a time, so
     * a short read there says nothing about the socket.) */
    if (l->rbuf_off == l->rbuf_n && !k->drained) {
        r = io_read(k, l->rbuf, sizeof l->rbuf);
        l->rbuf_off = 0;
        l->rbuf_n = r > 0 ? (size_t)r : 0;
        k->drained = !k->ssl && r > 0 && (size_t)r < sizeof l->rbuf;
    }
    if (l->rbuf_off < l->rbuf_n) {
        size_t m = l->rbuf_n - l->rbuf_off < len ? l->rbuf_n - l->rbuf_off : len;
        memcpy(buf, l->rbuf + l->rbuf_off, m);
        l->rbuf_off += m;
        return (ssize_t)m;
    }
    if (r == 0)
        set_err(k->err, sizeof k->err, "the server closed the connection");
    wslay_event_set_error(ctx, r == -1 ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud)
{
    (void)flags;
    ssize_t r = io_write(ud, data, len);
    if (r >= 0)
        return r;
    wslay_event_set_error(ctx, r == -1 ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

/* RFC 6455 masks only keep a browser's script from steering bytes on the wire against
 * proxies; a load generator needs no unpredictable key, and a xorshift is a few ns. */
static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud)
{
    (void)ctx;
    lw_loop *l = ((lw_conn *)ud)->loop;
    for (size_t i = 0; i < len; i++) {
        l->mask_rng ^= l->mask_rng << 13;
        l->mask_rng ^= l->mask_rng >> 7;
        l->mask_rng ^= l->mask_rng << 17;
        buf[i] = (uint8_t)l->mask_rng;
    }
    return 0;
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a,
                      void *ud)
{
    (void)ctx;
    lw_conn *k = ud;
    if (a->opcode == WSLAY_TEXT_FRAME || a->opcode == WSLAY_BINARY_FRAME)
        k->loop->cb.on_msg(k, a->msg, a->msg_length, k->user);
    else if (a->opcode == WSLAY_CONNECTION_CLOSE)
        k->close_code = a->status_code;
}

/* ---- the connection's life ---------------------------------------------------------------- */

static void watch(lw_conn *k, uint32_t ev)
{
    if (ev == k->events)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = k};
    epoll_ctl(k->loop->epfd, EPOLL_CTL_MOD, k->fd, &e);
    k->events = ev;
}

static void finish(lw_conn *k)
{
    if (k->ph == PH_DONE)
        return;
    k->ph = PH_DONE;
    if (k->ssl) {
        SSL_free(k->ssl);
        k->ssl = NULL;
    }
    close(k->fd); /* also leaves the epoll set */
    k->fd = -1;
    free(k->req);
    k->req = NULL;
    if (k->ws) {
        wslay_event_context_free(k->ws);
        k->ws = NULL;
    }
    k->loop->cb.on_close(k, k->close_code, k->user);
}

/* After wslay ran: watch what it wants next, or end the connection. */
static void ws_settle(lw_conn *k, int rc)
{
    if (rc != 0 || (!wslay_event_want_read(k->ws) && !wslay_event_want_write(k->ws))) {
        if (rc != 0 && !k->err[0])
            set_err(k->err, sizeof k->err, "WebSocket protocol error (%d)", rc);
        finish(k);
        return;
    }
    bool out = wslay_event_want_write(k->ws) || k->ssl_wants_write;
    watch(k, (k->paused ? 0 : EPOLLIN) | (out ? EPOLLOUT : 0));
}

static int make_request(lw_conn *k, const char *path, const char *port)
{
    uint8_t nonce[16], md[EVP_MAX_MD_SIZE];
    char key[32], cat[80];
    unsigned mdn = 0;
    if (RAND_bytes(nonce, sizeof nonce) != 1)
        return LW_E_NOMEM;
    EVP_EncodeBlock((unsigned char *)key, nonce, sizeof nonce);
    snprintf(cat, sizeof cat, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    if (!EVP_Digest(cat, strlen(cat), md, &mdn, EVP_sha1(), NULL))
        return LW_E_NOMEM;
    EVP_EncodeBlock((unsigned char *)k->accept, md, (int)mdn);
    const char *sp = k->loop->subprotocol;
    int n =
        asprintf(&k->req,
                 "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s%s%s\r\n",
                 path, k->host, port, key, sp ? "Sec-WebSocket-Protocol: " : "", sp ? sp : "",
                 sp ? "\r\n" : "");
    if (n < 0) {
        k->req = NULL;
        return LW_E_NOMEM;
    }
    k->req_n = (size_t)n;
    return 0;
}

/* The value of header name in the answer's head (NUL-terminated), or NULL. */
static const char *header(char *head, const char *name, size_t *vn)
{
    size_t nn = strlen(name);
    for (char *p = strstr(head, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
        char *line = p + 2;
        if (strncasecmp(line, name, nn) || line[nn] != ':')
            continue;
        char *v = line + nn + 1, *end = strstr(v, "\r\n");
        while (*v == ' ' || *v == '\t')
            v++;
        *vn = (size_t)(end - v);
        while (*vn && (v[*vn - 1] == ' ' || v[*vn - 1] == '\t'))
            (*vn)--;
        return v;
    }
    return NULL;
}

static int check_answer(lw_conn *k)
{
    size_t vn = 0;
    const char *v;
    if (strncmp(k->head, "HTTP/1.1 101", 12)) {
        set_err(k->err, sizeof k->err, "handshake refused: %.*s", (int)strcspn(k->head, "\r\n"),
                k->head);
        return -1;
    }
    v = header(k->head, "Sec-WebSocket-Accept", &vn);
    if (!v || vn != strlen(k->accept) || memcmp(v, k->accept, vn)) {
        set_err(k->err, sizeof k->err, "handshake: wrong or missing Sec-WebSocket-Accept");
        return -1;
    }
    return 0;
}

static void handle(lw_conn *k, uint32_t ev);

static void open_ws(lw_conn *k)
{
    static const struct wslay_event_callbacks cbs = {.recv_callback = ws_recv,
                                                     .send_callback = ws_send,
                                                     .genmask_callback = ws_genmask,
                                                     .on_msg_recv_callback = ws_on_msg};
    if (wslay_event_context_client_init(&k->ws, &cbs, k) != 0) {
        set_err(k->err, sizeof k->err, "out of memory");
        finish(k);
        return;
    }
    wslay_event_config_set_max_recv_msg_length(k->ws, k->loop->max_msg);
    k->ph = PH_OPEN;
    k->head_off = k->head_end;
    k->loop->cb.on_open(k, k->user);
    if (k->ph != PH_OPEN)
        return; /* closed from on_open */
    if (k->head_off < k->head_n)
        handle(k, EPOLLIN);
    else
        ws_settle(k, 0);
}

/* Runs the handshake as far as the socket allows. */
static void handshake_step(lw_conn *k, uint32_t ev)
{
    if (k->ph == PH_TCP) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if ((ev & (EPOLLERR | EPOLLHUP)) || getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) ||
            soerr) {
            set_err(k->err, sizeof k->err, "connect: %s", strerror(soerr ? soerr : ECONNREFUSED));
            finish(k);
            return;
        }
        if (k->loop->tls) {
            if (!(k->ssl = SSL_new(k->loop->tls)) || !SSL_set_fd(k->ssl, k->fd)) {
                set_err(k->err, sizeof k->err, "TLS: cannot set up the connection");
                finish(k);
                return;
            }
            unsigned char a[16];
            if (inet_pton(AF_INET, k->host, a) != 1 && inet_pton(AF_INET6, k->host, a) != 1)
                SSL_set_tlsext_host_name(k->ssl, k->host); /* SNI names hosts, not addresses */
            SSL_set_connect_state(k->ssl);
            k->ph = PH_TLS;
        } else {
            k->ph = PH_REQUEST;
        }
    }
    if (k->ph == PH_TLS) {
        int r = SSL_do_handshake(k->ssl);
        if (r != 1) {
            int e = SSL_get_error(k->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                watch(k, e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT);
                return;
            }
            set_err(k->err, sizeof k->err, "TLS handshake: %s",
                    ERR_reason_error_string(ERR_peek_last_error()) ?: "connection closed");
            ERR_clear_error();
            finish(k);
            return;
        }
        k->ph = PH_REQUEST;
    }
    if (k->ph == PH_REQUEST) {
        while (k->req_off < k->req_n) {
            ssize_t r = io_write(k, k->req + k->req_off, k->req_n - k->req_off);
            if (r == -1) {
                watch(k, EPOLLOUT);
                return;
            }
            if (r < 0) {
                finish(k);
                return;
            }
            k->req_off += (size_t)r;
        }
        free(k->req);
        k->req = NULL;
        k->ph = PH_RESPONSE;
        watch(k, EPOLLIN);
    }
    while (k->ph == PH_RESPONSE) {
        ssize_t r = io_read(k, k->head + k->head_n, LW_HEAD_MAX - k->head_n);
        if (r == -1)
            return;
        if (r <= 0) {
            if (r == 0)
                set_err(k->err, sizeof k->err, "the server closed during the handshake");
            finish(k);
            return;
        }
        k->head_n += (size_t)r;
        k->head[k->head_n] = '\0';
        char *end = strstr(k->head, "\r\n\r\n");
        if (!end) {
            if (k->head_n == LW_HEAD_MAX) {
                set_err(k->err, sizeof k->err, "handshake: answer over %d bytes", LW_HEAD_MAX);
                finish(k);
            }
            continue;
        }
        k->head_end = (size_t)(end - k->head) + 4;
        end[2] = '\0'; /* the head's lines for header(); frames after it stay as they are */
        if (check_answer(k)) {
            finish(k);
            return;
        }
        open_ws(k);
    }
}

static void handle(lw_conn *k, uint32_t ev)
{
    if (k->ph != PH_OPEN) {
        handshake_step(k, ev);
        return;
    }
    int rc = 0;
    k->ssl_wants_write = false;
    k->drained = false;
    k->busy = true;
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        rc = wslay_event_recv(k->ws);
    /* Also what on_msg queued (acks): it goes now, not at the next writable event. */
    if (rc == 0 && wslay_event_want_write(k->ws))
        rc = wslay_event_send(k->ws);
    k->busy = false;
    k->loop->rbuf_off = k->loop->rbuf_n = 0; /* only left over when k stopped reading */
    ws_settle(k, rc);
}

/* ---- the API ------------------------------------------------------------------------------- */

lw_loop *lw_loop_new(const lw_callbacks *cb, const char *subprotocol, size_t max_msg)
{
    lw_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->cb = *cb;
    l->max_msg = max_msg;
    l->mask_rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
    l->subprotocol = subprotocol && *subprotocol ? strdup(subprotocol) : NULL;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0 || (subprotocol && *subprotocol && !l->subprotocol)) {
        lw_loop_free(l);
        return NULL;
    }
    return l;
}

void lw_loop_free(lw_loop *l)
{
    if (!l)
        return;
    for (lw_conn *k = l->conns, *n; k; k = n) {
        n = k->next;
        if (k->ph != PH_DONE) {
            if (k->ssl)
                SSL_free(k->ssl);
            if (k->ws)
                wslay_event_context_free(k->ws);
            close(k->fd);
            free(k->req);
        }
        free(k);
    }
    if (l->tls)
        SSL_CTX_free(l->tls);
    if (l->epfd >= 0)
        close(l->epfd);
    free(l->subprotocol);
    free(l);
}

static int tls_setup(lw_loop *l)
{
    if (l->tls)
        return 0;
    static const unsigned char alpn[] = "\x08http/1.1";
    l->tls = SSL_CTX_new(TLS_client_method());
    if (!l->tls || !SSL_CTX_set_min_proto_version(l->tls, TLS1_2_VERSION) ||
        SSL_CTX_set_alpn_protos(l->tls, alpn, sizeof alpn - 1)) {
        set_err(l->err, sizeof l->err, "TLS: cannot make a client context");
        return LW_E_NOMEM;
    }
    SSL_CTX_set_verify(l->tls, SSL_VERIFY_NONE, NULL); /* see load_ws.h */
    return 0;
}

/* Splits ws[s]://HOST[:PORT][/PATH] into host (brackets dropped), port and path. */
static int parse_url(const char *url, bool *tls, char *host, size_t hn, char *port,
                     const char **path)
{
    const char *p;
    if (!strncasecmp(url, "ws://", 5))
        *tls = false, p = url + 5;
    else if (!strncasecmp(url, "wss://", 6))
        *tls = true, p = url + 6;
    else
        return -1;
    const char *h = p, *h_end;
    if (*h == '[') {
        h++;
        if (!(h_end = strchr(h, ']')))
            return -1;
        p = h_end + 1;
    } else {
        h_end = h + strcspn(h, ":/");
        p = h_end;
    }
    if (h_end == h || (size_t)(h_end - h) >= hn)
        return -1;
    memcpy(host, h, (size_t)(h_end - h));
    host[h_end - h] = '\0';
    snprintf(port, 8, "%s", *tls ? "443" : "80");
    if (*p == ':') {
        size_t n = strspn(p + 1, "0123456789");
        if (n == 0 || n > 5)
            return -1;
        memcpy(port, p + 1, n);
        port[n] = '\0';
        p += 1 + n;
    }
    if (*p && *p != '/')
        return -1;
    *path = *p ? p : "/";
    return 0;
}

int lw_connect(lw_loop *l, const char *url, const char *source, void *user, lw_conn **out)
{
    bool tls;
    char host[200], port[8];
    const char *path;
    if (parse_url(url, &tls, host, sizeof host, port, &path)) {
        set_err(l->err, sizeof l->err, "not a ws:// or wss:// URL: %s", url);
        return LW_E_URL;
    }
    if (tls && tls_setup(l))
        return LW_E_NOMEM;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL, *src = NULL;
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr == 0 && source)
        gr = getaddrinfo(source, NULL, &(struct addrinfo){.ai_flags = AI_NUMERICHOST}, &src);
    if (gr) {
        set_err(l->err, sizeof l->err, "%s: %s", source && ai ? source : host, gai_strerror(gr));
        freeaddrinfo(ai);
        return LW_E_URL;
    }
    lw_conn *k = calloc(1, sizeof *k);
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, rc = LW_E_SOCKET;
    if (!k) {
        rc = LW_E_NOMEM;
        goto fail;
    }
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        (src && bind(fd, src->ai_addr, src->ai_addrlen)) ||
        (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS)) {
        set_err(l->err, sizeof l->err, "connect to %s:%s%s%s: %s", host, port,
                source ? " from " : "", source ? source : "", strerror(errno));
        goto fail;
    }
    k->loop = l;
    k->fd = fd;
    k->user = user;
    k->ph = PH_TCP;
    k->events = EPOLLOUT;
    snprintf(k->host, sizeof k->host, "%s", host);
    if ((rc = make_request(k, path, port)) != 0)
        goto fail;
    struct epoll_event e = {.events = EPOLLOUT, .data.ptr = k};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e)) {
        set_err(l->err, sizeof l->err, "epoll: %s", strerror(errno));
        rc = LW_E_SOCKET;
        goto fail;
    }
    k->next = l->conns;
    l->conns = k;
    freeaddrinfo(ai);
    freeaddrinfo(src);
    *out = k;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    if (k)
        free(k->req);
    free(k);
    freeaddrinfo(ai);
    freeaddrinfo(src);
    return rc;
}

int lw_send(lw_conn *k, const void *data, size_t n, bool text)
{
    if (k->ph != PH_OPEN)
        return LW_E_CLOSED;
    struct wslay_event_msg m = {text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, data, n};
    int rc = wslay_event_queue_msg(k->ws, &m);
    if (rc == WSLAY_ERR_NOMEM)
        return LW_E_NOMEM;
    if (rc != 0)
        return LW_E_CLOSED;
    if (k->busy)
        return 0; /* handle() sends it when wslay returns */
    k->ssl_wants_write = false;
    ws_settle(k, wslay_event_send(k->ws));
    return 0;
}

int lw_poll(lw_loop *l, int timeout_ms)
{
    struct epoll_event ev[LW_EVENTS];
    int n = epoll_wait(l->epfd, ev, LW_EVENTS, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++)
        handle(ev[i].data.ptr, ev[i].events);
    return n;
}

void lw_close(lw_conn *k)
{
    if (k->ph != PH_OPEN) {
        if (k->ph != PH_DONE)
            finish(k);
        return;
    }
    wslay_event_queue_close(k->ws, 1000, NULL, 0);
    if (!k->busy)
        ws_settle(k, wslay_event_send(k->ws));
}

void lw_pause(lw_conn *k, bool paused)
{
    k->paused = paused;
    if (k->ph == PH_OPEN && !k->busy)
        ws_settle(k, 0);
}

enum lw_state lw_state(const lw_conn *k)
{
    return k->ph == PH_OPEN ? LW_OPEN : k->ph == PH_DONE ? LW_CLOSED : LW_CONNECTING;
}

void *lw_user(const lw_conn *k)
{
    return k->user;
}

const char *lw_error(const lw_conn *k)
{
    return k->err;
}

const char *lw_loop_error(const lw_loop *l)
{
    return l->err;
}

size_t lw_queued(const lw_conn *k)
{
    return k->ph == PH_OPEN ? wslay_event_get_queued_msg_length(k->ws) : 0;
}
