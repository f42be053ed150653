/*
 * The listening socket of the process, and who serves each connection. The first service
 * thread accepts on it and hands each new connection to the service threads in turn
 * (gw_hub_hand), whose libwebsockets contexts adopt it as their own listener would have
 * (their vhosts do not listen: CONTEXT_PORT_NO_LISTEN_SERVER).
 *
 * Why not a listener per context: libwebsockets 4.1 binds without SO_REUSEPORT, so two
 * contexts cannot share a port; and with one acceptor the sessions are spread evenly, and
 * a second gw started on a port in use still fails to start ("address in use").
 *
 * What libwebsockets' listener did before its accept is done here, before a byte is read:
 * refusing every connection while stopping, and the connection rate per source address
 * (gw_throttle_connection).
 */
#ifndef GW_LISTEN_H
#define GW_LISTEN_H

typedef struct gw_listen gw_listen;
typedef struct gw_server gw_server;

/* Binds addr:port (port 0: any free one) and accepts on srv's loop for every thread of
 * srv's hub. NULL when the address cannot be had (logged). */
gw_listen *gw_listen_new(gw_server *srv, const char *addr, int port);
/* The port bound. */
int gw_listen_port(const gw_listen *l);
/* Accepts no more and closes the socket (stopping: a load balancer tries the next node at
 * once). Idempotent. */
void gw_listen_close(gw_listen *l);
/* Closes and frees. NULL is a no-op. */
void gw_listen_free(gw_listen *l);

#endif
