/* TLS helpers: the self-signed certificate at start-up, and the server context's tuning. */
#ifndef GW_TLS_H
#define GW_TLS_H

#include <stddef.h>

/* Fills cert and key with the paths of a self-signed certificate for localhost in
 * data/tls/, making it (P-256, one year) if it is not there yet. Logs what it did.
 * Returns 0 or -1. */
int gw_tls_self_signed(const char *data, char *cert, size_t cert_n, char *key, size_t key_n);

/* Tunes the server's SSL_CTX (an SSL_CTX *, from libwebsockets) for many long-lived
 * sessions: no session cache and no resumption tickets (see gw_tls.c). Returns 0. */
int gw_tls_tune(void *ssl_ctx);

#endif
