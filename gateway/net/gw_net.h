/*
 * net/: the gateway's sockets before they are sessions. It owns the process's listening
 * socket and who serves each connection, the limit on new connections per source
 * address, TLS (the self-signed certificate at start-up, the server context's tuning),
 * and the token buckets every rate limit of the gateway is made of.
 *
 * It stands on core/ only: it must never call session/, groups/, cluster/, app/ or
 * server/. What the service threads do with a connection they are handed is theirs,
 * registered with gw_listen_attach.
 */
#ifndef GW_NET_H
#define GW_NET_H

#include "gw_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ev_loop;

/* ---- token buckets (gw_rate.c): pure arithmetic on a monotonic clock ----------------- */

/* A limit: `rate` tokens a second, bursts of up to `cap` tokens. rate 0 = no limit. */
typedef struct gw_limit {
    double rate;
    double cap;
} gw_limit;

/* rate per second, with bursts of burst_s seconds' worth. */
gw_limit gw_limit_make(double rate, unsigned burst_s);

/* One bucket. Starts full. The balance may go below zero: a frame that has already been
 * read is paid for after the fact, and the debt is what the session then waits out. */
typedef struct gw_bucket {
    double tokens;
    uint64_t at_ms; /* monotonic ms the balance was last brought up to date */
} gw_bucket;

void gw_bucket_init(gw_bucket *b, const gw_limit *l, uint64_t now_ms);
/* The balance now (refilled for the time since the last call, never above cap). */
double gw_bucket_level(gw_bucket *b, const gw_limit *l, uint64_t now_ms);
/* Takes n tokens if the balance holds them; false (and nothing taken) if not. */
bool gw_bucket_take(gw_bucket *b, const gw_limit *l, double n, uint64_t now_ms);
/* Takes n tokens whatever the balance (it may go into debt). */
void gw_bucket_charge(gw_bucket *b, const gw_limit *l, double n, uint64_t now_ms);
/* Milliseconds until the balance reaches `want` (0 if it already has; rounded up). */
uint64_t gw_bucket_wait_ms(gw_bucket *b, const gw_limit *l, double want, uint64_t now_ms);

/* ---- new connections per source address (gw_conns.c) ---------------------------------- */

/* One table for the process, whichever thread accepts or closes (under its own lock): per
 * source address, a limit of --rate-conns new connections a second with --rate-burst
 * seconds' worth of room, and a cap of --conns-per-address open at once. */
typedef struct gw_conns gw_conns;
/* An address's share of the open connections: each connection counted holds one, from
 * gw_conns_admit until it is closed (gw_conns_release). */
typedef struct gw_conn_addr gw_conn_addr;

enum {
    GW_CONNS_RATE = -1, /* over --rate-conns */
    GW_CONNS_HELD = -2, /* the address holds --conns-per-address open connections already */
};

/* seed randomises the table's hash (whoever connects picks the addresses). NULL if out
 * of memory. */
gw_conns *gw_conns_new(const gw_config *cfg, uint64_t seed);
void gw_conns_free(gw_conns *c); /* NULL is a no-op */
/* A connection just accepted from sa: 0 to take it, with *held its share of the
 * address's count (NULL when not counted) for gw_conns_release when it closes; or
 * GW_CONNS_* to refuse it (logged once a second at most, with the count). */
int gw_conns_admit(gw_conns *c, const struct sockaddr *sa, socklen_t len, gw_conn_addr **held);
/* The connection that held it is closed (any thread). NULL is a no-op. */
void gw_conns_release(gw_conns *c, gw_conn_addr *held);
/* Figures: source addresses in the rate's table now (at most 4096), connections refused
 * over the rate, and over the cap of open ones. */
size_t gw_conns_addresses(gw_conns *c);
uint64_t gw_conns_refused(gw_conns *c);
uint64_t gw_conns_refused_held(gw_conns *c);

/* ---- the listening socket (gw_listen.c) ----------------------------------------------- */

/*
 * The listening socket of the process, and who serves each connection. The accepting
 * thread (the first service thread, whose loop the listener runs on) accepts and hands
 * each new connection to the service threads in turn; each thread's libwebsockets
 * context adopts it as its own listener would have (their vhosts do not listen).
 *
 * Why not a listener per context: libwebsockets 4.1 binds without SO_REUSEPORT, so two
 * contexts cannot share a port; and with one acceptor the sessions are spread evenly, and
 * a second gw started on a port in use still fails to start ("address in use").
 *
 * What libwebsockets' listener did before its accept is done here, before a byte is read:
 * the connection rate and the cap of open connections per source address (gw_conns). Stopping
 * closes the socket (gw_listen_close), so that a load balancer tries the next node at once.
 */
typedef struct gw_listen gw_listen;

/* A connection accepted and admitted: its socket and its share of its address's count of
 * open connections, released (gw_conns_release) when it closes. */
typedef struct gw_accepted {
    int fd;
    gw_conn_addr *held;
} gw_accepted;

/* Binds addr:port (port 0: any free one) and accepts on loop for `threads` service
 * threads, admitting through conns. NULL when the address cannot be had (logged). */
gw_listen *gw_listen_new(struct ev_loop *loop, const char *addr, int port, unsigned threads,
                         gw_conns *conns);
/* The port bound. */
int gw_listen_port(const gw_listen *l);
/* What thread `thread` does with its connections: the accepting thread (0) adopts each at
 * once (adopt); another is woken (wake, from the accepting thread) and takes them with
 * gw_listen_take on its own thread. */
void gw_listen_attach(gw_listen *l, unsigned thread, void (*adopt)(void *ud, gw_accepted c),
                      void (*wake)(void *ud), void *ud);
/* Takes up to max of the connections handed to `thread`, oldest first. */
size_t gw_listen_take(gw_listen *l, unsigned thread, gw_accepted *out, size_t max);
/* `thread`'s run is over: what was handed to it and not taken is closed now, and nothing
 * more is handed to it. */
void gw_listen_thread_done(gw_listen *l, unsigned thread);
/* Accepts no more and closes the socket. Idempotent; the accepting thread's. */
void gw_listen_close(gw_listen *l);
/* Closes, and frees (what is still handed to a thread is closed). NULL is a no-op. */
void gw_listen_free(gw_listen *l);

/* ---- TLS (gw_tls.c) -------------------------------------------------------------------- */

/* Fills cert and key with the paths of a self-signed certificate for localhost in
 * data/tls/, making it (P-256, one year) if it is not there yet. Logs what it did.
 * Returns 0 or -1. */
int gw_tls_self_signed(const char *data, char *cert, size_t cert_n, char *key, size_t key_n);

/* Tunes the server's SSL_CTX (an SSL_CTX *, from libwebsockets) for many long-lived
 * sessions: no session cache and no resumption tickets (see gw_tls.c). Returns 0. */
int gw_tls_tune(void *ssl_ctx);

#endif
