/*
 * Connections per source address (gw_net.h): refused at accept, before TLS or HTTP, when
 * their address is over --rate-conns new ones a second, or already holds
 * --conns-per-address open ones. One lock for the process, whichever thread accepts or
 * closes. The rate's table is gw_addrs.c's (a fixed size, whatever the number of
 * addresses); the open connections are counted in a hash of the addresses that hold any,
 * so it is never larger than the connections themselves.
 */
#include "net_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <string.h>
#include <uthash.h>
#include <unistd.h>

/* An address holding open connections: what a counted connection carries until it closes. */
struct gw_conn_addr {
    uint8_t key[16];
    unsigned open;
    UT_hash_handle hh;
};

struct gw_conns {
    pthread_mutex_t mu;
    gw_addrs *addrs; /* NULL with --rate-conns 0 (under mu) */
    unsigned rate_conns;
    unsigned per_addr;                            /* --conns-per-address (0: not counted) */
    gw_conn_addr *held;                           /* addresses with open connections (under mu) */
    uint64_t refused, refused_held;               /* under mu */
    uint64_t refused_unlogged, refused_logged_ms; /* under mu */
};

void gw_conns_free(gw_conns *c)
{
    if (!c)
        return;
    gw_addrs_free(c->addrs);
    GW_HASH_FREE_ALL(c->held);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

gw_conns *gw_conns_new(const gw_config *cfg, uint64_t seed)
{
    gw_conns *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->rate_conns = cfg->rate_conns;
    c->per_addr = cfg->conns_per_addr;
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

uint64_t gw_conns_refused_held(gw_conns *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->refused_held;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* Counts one more connection from key: false if the address holds its cap already (or
 * out of memory). Under mu. */
static bool hold(gw_conns *c, const uint8_t key[16], gw_conn_addr **held)
{
    gw_conn_addr *a = NULL;
    HASH_FIND(hh, c->held, key, 16, a);
    if (a && a->open >= c->per_addr)
        return false;
    if (!a) {
        if (!(a = calloc(1, sizeof(*a))))
            return false;
        memcpy(a->key, key, 16);
        HASH_ADD(hh, c->held, key, 16, a);
    }
    a->open++;
    *held = a;
    return true;
}

void gw_conns_release(gw_conns *c, gw_conn_addr *held)
{
    if (!held)
        return;
    pthread_mutex_lock(&c->mu);
    if (--held->open == 0) {
        HASH_DEL(c->held, held);
        free(held);
    }
    pthread_mutex_unlock(&c->mu);
}

/* A refusal: how many to log now (once a second at most, with the count). Under mu. */
static uint64_t note_refusal(gw_conns *c, uint64_t now)
{
    c->refused_unlogged++;
    if (now - c->refused_logged_ms < 1000)
        return 0;
    uint64_t n = c->refused_unlogged;
    c->refused_unlogged = 0;
    c->refused_logged_ms = now;
    return n;
}

static void log_refusals(uint64_t n, const struct sockaddr *sa, const char *limit, unsigned v)
{
    if (!n)
        return;
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip));
    gw_warn("refused %lu connection(s) over a per-address limit (the last from %s, over %s %u)",
            (unsigned long)n, ip, limit, v);
}

int gw_conns_admit(gw_conns *c, const struct sockaddr *sa, socklen_t len, gw_conn_addr **held)
{
    *held = NULL;
    uint8_t key[16];
    bool counted = c->per_addr && gw_addr_key(sa, len, key);
    if (!c->addrs && !counted)
        return 0;
    uint64_t now = gw_mono_ms(), log_n;
    pthread_mutex_lock(&c->mu);
    if (counted && !hold(c, key, held)) {
        c->refused_held++;
        log_n = note_refusal(c, now);
        pthread_mutex_unlock(&c->mu);
        log_refusals(log_n, sa, "--conns-per-address (open at once)", c->per_addr);
        return GW_CONNS_HELD;
    }
    if (!c->addrs || gw_addrs_admit(c->addrs, sa, len, now)) {
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    c->refused++;
    log_n = note_refusal(c, now);
    pthread_mutex_unlock(&c->mu);
    log_refusals(log_n, sa, "--rate-conns (a second)", c->rate_conns);
    gw_conns_release(c, *held);
    *held = NULL;
    return GW_CONNS_RATE;
}
