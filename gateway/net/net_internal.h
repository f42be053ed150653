/* net/'s own parts, for its files only. */
#ifndef GW_NET_INTERNAL_H
#define GW_NET_INTERNAL_H

#include "gw_net.h"

/* ---- source addresses (gw_addrs.c) ----------------------------------------------------- */

/* Addresses remembered at once. A flood from more addresses than this cannot grow memory:
 * an address is then forgotten early (its bucket, full or nearly, is reused), which only
 * ever makes the limit looser for it, never refuses anyone it should not. */
#define GW_ADDRS_SLOTS 4096

/* The bounded table of source addresses that holds one bucket per address for new
 * connections. Pure bookkeeping: no sockets, no locks; time is passed in (monotonic ms). */
typedef struct gw_addrs gw_addrs;

/* A table for limit l (rate and cap); seed randomises the hash (addresses are chosen by
 * whoever connects). NULL if out of memory. */
gw_addrs *gw_addrs_new(const gw_limit *l, uint64_t seed);
void gw_addrs_free(gw_addrs *t);
/* One new connection from sa: true to accept it, false if its address is over the rate.
 * IPv4 addresses count one by one; IPv6 ones by their /64 (one host usually holds a whole
 * /64). Other families are always accepted. */
bool gw_addrs_admit(gw_addrs *t, const struct sockaddr *sa, socklen_t len, uint64_t now_ms);
/* sa as a 16-byte key (IPv4 as ::ffff:a.b.c.d, IPv6 as its /64); false for families
 * that have none. */
bool gw_addr_key(const struct sockaddr *sa, socklen_t len, uint8_t key[16]);
/* Addresses the table holds now (a gauge for /stats). */
size_t gw_addrs_count(const gw_addrs *t);

#endif
