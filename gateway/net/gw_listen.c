/* The listening socket and the hand-over of connections (gw_net.h). */
#include "gw_net.h"

#include <errno.h>
#include <ev.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections accepted at one wake-up at most: the loop's other work is not starved by a
 * burst of connections. */
#define ACCEPT_BURST 64
/* Out of descriptors: accepting waits this long (the socket stays readable meanwhile). */
#define FULL_PAUSE_S 0.1

/* One service thread as the listener sees it. */
typedef struct listen_thread {
    void (*adopt)(void *ud, gw_accepted c); /* the accepting thread's: takes one at once */
    void (*wake)(void *ud); /* another's: wakes its loop to take what it was handed */
    void *ud;
    /* Connections handed to it and not taken yet: under mu. */
    pthread_mutex_t mu;
    gw_accepted *handed;
    size_t n_handed, cap_handed;
    bool refusing; /* its run is over: nothing more is handed to it */
} listen_thread;

struct gw_listen {
    struct ev_loop *loop; /* the accepting thread's */
    gw_conns *conns;
    int fd;
    int port;
    unsigned threads;
    unsigned next; /* the thread the next connection goes to */
    ev_io io;
    ev_timer pause;
    uint64_t full_logged_ms, full_unlogged;
    listen_thread t[GW_THREADS_MAX];
};

static void on_readable(struct ev_loop *loop, ev_io *w, int revents);

/* A connection no thread takes: closed, and its address's count goes down. */
static void drop(gw_listen *l, gw_accepted c)
{
    close(c.fd);
    gw_conns_release(l->conns, c.held);
}

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

gw_listen *gw_listen_new(struct ev_loop *loop, const char *addr, int port, unsigned threads,
                         gw_conns *conns)
{
    gw_listen *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->loop = loop;
    l->conns = conns;
    l->threads = threads ? threads : 1;
    for (unsigned i = 0; i < GW_THREADS_MAX; i++)
        pthread_mutex_init(&l->t[i].mu, NULL);
    l->fd = bind_to(addr, port, &l->port);
    if (l->fd < 0) {
        gw_listen_free(l);
        return NULL;
    }
    ev_io_init(&l->io, on_readable, l->fd, EV_READ);
    ev_io_start(loop, &l->io);
    ev_init(&l->pause, NULL);
    return l;
}

int gw_listen_port(const gw_listen *l)
{
    return l->port;
}

void gw_listen_attach(gw_listen *l, unsigned thread, void (*adopt)(void *ud, gw_accepted c),
                      void (*wake)(void *ud), void *ud)
{
    l->t[thread].adopt = adopt;
    l->t[thread].wake = wake;
    l->t[thread].ud = ud;
}

void gw_listen_close(gw_listen *l)
{
    if (!l || l->fd < 0)
        return;
    ev_io_stop(l->loop, &l->io);
    ev_timer_stop(l->loop, &l->pause);
    close(l->fd);
    l->fd = -1;
}

void gw_listen_free(gw_listen *l)
{
    if (!l)
        return;
    gw_listen_close(l);
    for (unsigned i = 0; i < GW_THREADS_MAX; i++) {
        for (size_t k = 0; k < l->t[i].n_handed; k++)
            drop(l, l->t[i].handed[k]);
        free(l->t[i].handed);
        pthread_mutex_destroy(&l->t[i].mu);
    }
    free(l);
}

/* ---- connections handed over ------------------------------------------------------------ */

/* Queues c for `thread` and wakes it. False when out of memory or the thread has
 * stopped (the caller drops c). */
static bool hand(gw_listen *l, unsigned thread, gw_accepted c)
{
    listen_thread *t = &l->t[thread];
    pthread_mutex_lock(&t->mu);
    bool ok = !t->refusing;
    if (ok && t->n_handed == t->cap_handed) {
        size_t ncap = t->cap_handed ? 2 * t->cap_handed : 64;
        gw_accepted *nf = realloc(t->handed, ncap * sizeof(*nf));
        if (nf) {
            t->handed = nf;
            t->cap_handed = ncap;
        } else {
            ok = false;
        }
    }
    if (ok)
        t->handed[t->n_handed++] = c;
    pthread_mutex_unlock(&t->mu);
    if (ok && t->wake)
        t->wake(t->ud);
    return ok;
}

size_t gw_listen_take(gw_listen *l, unsigned thread, gw_accepted *out, size_t max)
{
    listen_thread *t = &l->t[thread];
    pthread_mutex_lock(&t->mu);
    size_t n = t->n_handed < max ? t->n_handed : max;
    if (n == 0) {
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    memcpy(out, t->handed, n * sizeof(*out));
    memmove(t->handed, t->handed + n, (t->n_handed - n) * sizeof(*out));
    t->n_handed -= n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void gw_listen_thread_done(gw_listen *l, unsigned thread)
{
    /* Connections handed to it that it did not take: closed now, not at exit. */
    listen_thread *t = &l->t[thread];
    pthread_mutex_lock(&t->mu);
    t->refusing = true;
    for (size_t k = 0; k < t->n_handed; k++)
        drop(l, t->handed[k]);
    t->n_handed = 0;
    pthread_mutex_unlock(&t->mu);
}

/* ---- accepting ------------------------------------------------------------------------------ */

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
    ev_io_stop(l->loop, &l->io);
    ev_timer_stop(l->loop, &l->pause);
    ev_timer_init(&l->pause, on_pause_over, FULL_PAUSE_S, 0);
    ev_timer_start(l->loop, &l->pause);
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    gw_listen *l = (gw_listen *)((char *)w - offsetof(gw_listen, io));
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct sockaddr_storage sa;
        socklen_t sa_n = sizeof(sa);
        int fd = accept4(l->fd, (struct sockaddr *)&sa, &sa_n, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                full(l, errno);
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                     errno != ECONNABORTED)
                gw_warn("accept: %s", strerror(errno));
            return;
        }
        /* As libwebsockets' listener sets it: small frames go out at once, not after the
         * peer's delayed ack (40 ms a round trip). */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        gw_accepted c = {.fd = fd};
        if (gw_conns_admit(l->conns, (const struct sockaddr *)&sa, sa_n, &c.held) != 0) {
            close(fd);
            continue;
        }
        unsigned to = l->next++ % l->threads;
        if (to == 0 && l->t[0].adopt)
            l->t[0].adopt(l->t[0].ud, c);
        else if (to == 0 || !hand(l, to, c))
            drop(l, c);
    }
}
