/*
 * New connections per source address (gw_net.h): refused at accept, before TLS or HTTP,
 * when their address is over --rate-conns. One table for the process, whichever thread
 * accepts, under its lock; the table itself is gw_addrs.c's (a fixed size, whatever the
 * number of addresses).
 */
#include "net_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

struct gw_conns {
    pthread_mutex_t mu;
    gw_addrs *addrs; /* NULL with --rate-conns 0 (under mu) */
    unsigned rate_conns;
    uint64_t refused;                             /* under mu */
    uint64_t refused_unlogged, refused_logged_ms; /* under mu */
};

void gw_conns_free(gw_conns *c)
{
    if (!c)
        return;
    gw_addrs_free(c->addrs);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

gw_conns *gw_conns_new(const gw_config *cfg, uint64_t seed)
{
    gw_conns *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->rate_conns = cfg->rate_conns;
    pthread_mutex_init(&c->mu, NULL);
    if (cfg->rate_conns) {
        /* Whoever connects picks the addresses: keep the table's hash unpredictable. */
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
            seed ^= (uint64_t)getpid() << 32;
        gw_limit l = gw_limit_make(cfg->rate_conns, cfg->rate_burst_s);
        if (!(c->addrs = gw_addrs_new(&l, seed))) {
            pthread_mutex_destroy(&c->mu);
            free(c);
            return NULL;
        }
    }
    return c;
}

size_t gw_conns_addresses(gw_conns *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->addrs ? gw_addrs_count(c->addrs) : 0;
    pthread_mutex_unlock(&c->mu);
    return n;
}

uint64_t gw_conns_refused(gw_conns *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->refused;
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool gw_conns_admit(gw_conns *c, const struct sockaddr *sa, socklen_t len)
{
    if (!c->addrs)
        return true;
    uint64_t now = gw_mono_ms();
    pthread_mutex_lock(&c->mu);
    if (gw_addrs_admit(c->addrs, sa, len, now)) {
        pthread_mutex_unlock(&c->mu);
        return true;
    }
    c->refused++;
    /* A flood would fill the log: one line a second at most, with the count. */
    c->refused_unlogged++;
    uint64_t unlogged = 0;
    if (now - c->refused_logged_ms >= 1000) {
        unlogged = c->refused_unlogged;
        c->refused_unlogged = 0;
        c->refused_logged_ms = now;
    }
    pthread_mutex_unlock(&c->mu);
    if (unlogged) {
        char ip[INET6_ADDRSTRLEN] = "?";
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip));
        gw_warn("refused %lu connection(s) over --rate-conns %u/s (the last from %s)",
                (unsigned long)unlogged, c->rate_conns, ip);
    }
    return false;
}
