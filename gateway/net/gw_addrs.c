/*
 * New connections per source address: a fixed table of token buckets, so that a flood
 * from any number of addresses costs the same memory. Open addressing with a short probe:
 * an address lives in one of PROBE slots after its hash. When none of them is free, the
 * slot whose bucket is fullest is reused: a full bucket says nothing a fresh one would
 * not, so forgetting it changes no decision; only when every candidate is itself in a
 * burst (a flood from thousands of addresses at once) is an address forgotten early, and
 * then it only gets a fresh burst.
 */
#include "net_internal.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define PROBE 8

typedef struct slot {
    uint8_t key[16]; /* IPv4 as ::ffff:a.b.c.d; IPv6 as its /64 */
    bool used;
    gw_bucket b;
} slot;

struct gw_addrs {
    gw_limit limit;
    uint64_t seed;
    size_t used;
    slot slots[GW_ADDRS_SLOTS];
};

gw_addrs *gw_addrs_new(const gw_limit *l, uint64_t seed)
{
    gw_addrs *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->limit = *l;
    t->seed = seed;
    return t;
}

void gw_addrs_free(gw_addrs *t)
{
    free(t);
}

size_t gw_addrs_count(const gw_addrs *t)
{
    return t->used;
}

bool gw_addr_key(const struct sockaddr *sa, socklen_t len, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &in->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        /* An IPv4 client on a dual-stack socket is one address, not a /64. */
        memcpy(key, &in6->sin6_addr, IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) ? 16 : 8);
        return true;
    }
    return false;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t hash(const gw_addrs *t, const uint8_t key[16])
{
    uint64_t a, b;
    memcpy(&a, key, 8);
    memcpy(&b, key + 8, 8);
    return (size_t)(mix(mix(a ^ t->seed) ^ b) % GW_ADDRS_SLOTS);
}

bool gw_addrs_admit(gw_addrs *t, const struct sockaddr *sa, socklen_t len, uint64_t now_ms)
{
    uint8_t key[16];
    if (!gw_addr_key(sa, len, key))
        return true;
    size_t h = hash(t, key);
    slot *found = NULL, *victim = NULL;
    double victim_level = -1e300;
    for (size_t i = 0; i < PROBE && !found; i++) {
        slot *s = &t->slots[(h + i) % GW_ADDRS_SLOTS];
        if (s->used && memcmp(s->key, key, 16) == 0) {
            found = s;
        } else if (!s->used) {
            if (victim_level < 1e300) {
                victim = s;
                victim_level = 1e300; /* a free slot beats any reuse */
            }
        } else {
            double level = gw_bucket_level(&s->b, &t->limit, now_ms);
            if (level > victim_level) {
                victim = s;
                victim_level = level;
            }
        }
    }
    if (!found) {
        found = victim;
        if (!found->used)
            t->used++;
        found->used = true;
        memcpy(found->key, key, 16);
        gw_bucket_init(&found->b, &t->limit, now_ms);
    }
    return gw_bucket_take(&found->b, &t->limit, 1, now_ms);
}
