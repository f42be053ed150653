/*
 * A TCP proxy that a test controls, on 127.0.0.1: what a node sends to its upstream (a
 * PostgreSQL server) goes through it, and the test can cut the link as a network
 * partition does, then heal it.
 *
 * Cut is a black hole, not a refusal: connections stay open and nothing passes either
 * way (the bytes wait in the sockets); new connections are accepted but reach nothing.
 * That is what a node sees when a switch or a link fails: no error, no answer, only its
 * own timeouts. Healed, the bytes that waited flow again and held connections are made
 * upstream (those whose client gave up meanwhile are closed).
 *
 * Ownership: tproxy_start returns a proxy that tproxy_stop ends and frees (every
 * connection through it closed).
 */
#ifndef GW_TESTS_TPROXY_H
#define GW_TESTS_TPROXY_H

#include <stdbool.h>

typedef struct tproxy tproxy;

/* Listens on a free port of 127.0.0.1 and relays to 127.0.0.1:upstream_port. NULL on
 * failure. */
tproxy *tproxy_start(int upstream_port);
int tproxy_port(const tproxy *p);
/* true: the link is cut (see above); false: healed. Takes effect at once. */
void tproxy_cut(tproxy *p, bool cut);
/* Connections accepted so far (the node's reconnects show here). */
int tproxy_accepted(const tproxy *p);
void tproxy_stop(tproxy *p);

#endif
