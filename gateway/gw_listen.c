/* The listening socket and the hand-over of connections (gw_listen.h). */
#include "gw_listen.h"
#include "gw_hub.h"
#include "gw_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections accepted at one wake-up at most: the loop's other work is not starved by a
 * burst of connections. */
#define ACCEPT_BURST 64
/* Out of descriptors: accepting waits this long (the socket stays readable meanwhile). */
#define FULL_PAUSE_S 0.1

struct gw_listen {
    gw_server *srv; /* the first service thread's: its loop accepts */
    int fd;
    int port;
    unsigned next; /* the thread the next connection goes to */
    ev_io io;
    ev_timer pause;
    uint64_t full_logged_ms, full_unlogged;
};

static void on_readable(struct ev_loop *loop, ev_io *w, int revents);

static int bind_to(const char *addr, int port, int *bound)
{
    struct addrinfo hints = {
        .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%d", port);
    int rc = getaddrinfo(addr, service, &hints, &res);
    if (rc != 0) {
        gw_err("cannot listen on %s: %s (an IPv4 address or a host name)", addr, gai_strerror(rc));
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    /* Restart at once even with old connections in TIME_WAIT. */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        gw_err("cannot listen on %s:%d: %s", addr, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    *bound = getsockname(fd, (struct sockaddr *)&sin, &len) == 0 ? ntohs(sin.sin_port) : port;
    return fd;
}

gw_listen *gw_listen_new(gw_server *srv, const char *addr, int port)
{
    gw_listen *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->srv = srv;
    l->fd = bind_to(addr, port, &l->port);
    if (l->fd < 0) {
        free(l);
        return NULL;
    }
    ev_io_init(&l->io, on_readable, l->fd, EV_READ);
    ev_io_start(srv->loop, &l->io);
    ev_init(&l->pause, NULL);
    return l;
}

int gw_listen_port(const gw_listen *l)
{
    return l->port;
}

void gw_listen_close(gw_listen *l)
{
    if (!l || l->fd < 0)
        return;
    ev_io_stop(l->srv->loop, &l->io);
    ev_timer_stop(l->srv->loop, &l->pause);
    close(l->fd);
    l->fd = -1;
}

void gw_listen_free(gw_listen *l)
{
    gw_listen_close(l);
    free(l);
}

static void on_pause_over(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    gw_listen *l = (gw_listen *)((char *)w - offsetof(gw_listen, pause));
    if (l->fd >= 0)
        ev_io_start(loop, &l->io);
}

/* accept failed for want of descriptors: say so (once a second at most) and wait. */
static void full(gw_listen *l, int err)
{
    uint64_t now = gw_mono_ms();
    l->full_unlogged++;
    if (now - l->full_logged_ms >= 1000) {
        gw_warn("cannot accept %lu connection(s): %s (the open-files limit, ulimit -n)",
                (unsigned long)l->full_unlogged, strerror(err));
        l->full_unlogged = 0;
        l->full_logged_ms = now;
    }
    ev_io_stop(l->srv->loop, &l->io);
    ev_timer_stop(l->srv->loop, &l->pause);
    ev_timer_init(&l->pause, on_pause_over, FULL_PAUSE_S, 0);
    ev_timer_start(l->srv->loop, &l->pause);
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    gw_listen *l = (gw_listen *)((char *)w - offsetof(gw_listen, io));
    gw_server *srv = l->srv;
    unsigned threads = gw_hub_threads(srv->hub);
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct lws_filter_network_conn_args a;
        memset(&a, 0, sizeof(a));
        a.clilen = sizeof(a.cli_addr);
        int fd =
            accept4(l->fd, (struct sockaddr *)&a.cli_addr, &a.clilen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                full(l, errno);
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                     errno != ECONNABORTED)
                gw_warn("accept: %s", strerror(errno));
            return;
        }
        a.accept_fd = fd;
        /* As libwebsockets' listener sets it: small frames go out at once, not after the
         * peer's delayed ack (40 ms a round trip). */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* Draining: no new connection, so that a client (or a load balancer trying the
         * next node) goes elsewhere at once rather than meeting a 1001. */
        if (srv->stopping || gw_throttle_connection(srv, &a)) {
            close(fd);
            continue;
        }
        unsigned to = l->next++ % threads;
        if (to == 0)
            gw_server_adopt(srv, fd);
        else if (!gw_hub_hand(srv->hub, to, fd))
            close(fd);
    }
}
