/* TLS helpers for start-up. */
#ifndef GW_TLS_H
#define GW_TLS_H

#include <stddef.h>

/* Fills cert and key with the paths of a self-signed certificate for localhost in
 * data/tls/, making it (P-256, one year) if it is not there yet. Logs what it did.
 * Returns 0 or -1. */
int gw_tls_self_signed(const char *data, char *cert, size_t cert_n, char *key, size_t key_n);

#endif
