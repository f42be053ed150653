/* The test's TCP proxy (tproxy.h): one thread, poll over the listening socket and every
 * pair of sockets; a pipe wakes it when the test cuts, heals or stops. */
#include "tproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PAIRS 128

typedef struct pair {
    int down, up; /* the client's socket; upstream's (-1: not made yet, the link was cut) */
} pair;

struct tproxy {
    pthread_t thread;
    int listen_fd, wake[2], upstream_port, port;
    atomic_bool cut, stop;
    atomic_int accepted;
    pair pairs[MAX_PAIRS];
    int n;
};

static int upstream(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void pair_close(tproxy *p, int i)
{
    close(p->pairs[i].down);
    if (p->pairs[i].up >= 0)
        close(p->pairs[i].up);
    p->pairs[i] = p->pairs[--p->n];
}

/* Moves what one side has to the other; false when either side is done. */
static bool relay(int from, int to)
{
    char buf[65536];
    ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return false;
    for (ssize_t off = 0; n > 0 && off < n;) {
        ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static void *run(void *arg)
{
    tproxy *p = arg;
    while (!atomic_load(&p->stop)) {
        bool cut = atomic_load(&p->cut);
        /* Healed: held connections are made upstream now. */
        for (int i = 0; !cut && i < p->n; i++)
            if (p->pairs[i].up < 0 && (p->pairs[i].up = upstream(p->upstream_port)) < 0)
                pair_close(p, i--);
        struct pollfd pf[2 + 2 * MAX_PAIRS];
        int np = 0;
        pf[np++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        pf[np++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        if (!cut)
            for (int i = 0; i < p->n; i++) {
                pf[np++] = (struct pollfd){.fd = p->pairs[i].down, .events = POLLIN};
                pf[np++] = (struct pollfd){.fd = p->pairs[i].up, .events = POLLIN};
            }
        if (poll(pf, (nfds_t)np, 1000) <= 0)
            continue;
        if (pf[0].revents & POLLIN) {
            char drain[64];
            while (read(p->wake[0], drain, sizeof(drain)) > 0)
                ;
            continue; /* the cut changed: poll again with it */
        }
        if ((pf[1].revents & POLLIN)) {
            int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0 && p->n < MAX_PAIRS) {
                atomic_fetch_add(&p->accepted, 1);
                p->pairs[p->n++] = (pair){fd, cut ? -1 : upstream(p->upstream_port)};
                if (!cut && p->pairs[p->n - 1].up < 0)
                    pair_close(p, p->n - 1);
            } else if (fd >= 0) {
                close(fd);
            }
        }
        /* Pairs in pf from index 2, two each, in the order they were when polled. */
        int polled = (np - 2) / 2;
        for (int i = polled - 1; i >= 0; i--) {
            short d = pf[2 + 2 * i].revents, u = pf[3 + 2 * i].revents;
            bool ok = true;
            if (d & (POLLIN | POLLHUP | POLLERR))
                ok = relay(p->pairs[i].down, p->pairs[i].up);
            if (ok && (u & (POLLIN | POLLHUP | POLLERR)))
                ok = relay(p->pairs[i].up, p->pairs[i].down);
            if (!ok)
                pair_close(p, i);
        }
    }
    while (p->n)
        pair_close(p, 0);
    return NULL;
}

tproxy *tproxy_start(int upstream_port)
{
    tproxy *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->upstream_port = upstream_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(p->listen_fd, 64) != 0 || getsockname(p->listen_fd, (struct sockaddr *)&a, &len) ||
        pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        if (p->listen_fd >= 0)
            close(p->listen_fd);
        free(p);
        return NULL;
    }
    p->port = ntohs(a.sin_port);
    if (pthread_create(&p->thread, NULL, run, p) != 0) {
        close(p->listen_fd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p);
        return NULL;
    }
    return p;
}

int tproxy_port(const tproxy *p)
{
    return p->port;
}

int tproxy_accepted(const tproxy *p)
{
    return atomic_load(&((tproxy *)p)->accepted);
}

static void wake(tproxy *p)
{
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w;
}

void tproxy_cut(tproxy *p, bool cut)
{
    atomic_store(&p->cut, cut);
    wake(p);
}

void tproxy_stop(tproxy *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, true);
    wake(p);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p);
}
