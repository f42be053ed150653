/*
 * gw_converge's helpers (conv_api.c): the server API over plain HTTP on a node's port,
 * and the server's state of a group read through it, message by message, to compare the
 * replicas with (docs/RELIABILITY.md, Convergence).
 */
#ifndef GW_CONV_H
#define GW_CONV_H

#include "gwc_replica.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One API request to 127.0.0.1:port with the bearer key; body may be NULL. Returns the
 * HTTP status (0: no answer) and, when resp is not NULL, the response's body (malloc'd,
 * NUL-terminated; the caller frees). Bounded: 5 s to connect and answer. */
int conv_api(int port, const char *key, const char *method, const char *path, const char *body,
             char **resp);

/* A group as the server has it: every message from first_mid to last_mid. */
typedef struct conv_msg {
    uint64_t mid, ver, cseq;
    bool recalled;
    char *body; /* NULL when recalled */
    char *from;
    char *reactions; /* "key=count,..." in key order ("" when none) */
} conv_msg;

typedef struct conv_group {
    uint64_t first_mid, last_mid, last_cseq;
    conv_msg *m;
    size_t n;
} conv_group;

/* Reads gid through GET /groups/{gid}/messages, page by page, into *out (freed with
 * conv_group_free). 0, or -1 when a page could not be read (why printed on stderr). */
int conv_read_group(int port, const char *key, const char *gid, conv_group *out);
void conv_group_free(conv_group *g);
/* Same messages in the same states (the reading's bookkeeping aside). */
bool conv_group_equal(const conv_group *a, const conv_group *b);

/* Compares what replica r holds of gid with the server's state s: counts the messages
 * the replica lacks (*missing), holds but the server has not (*extra, e.g. below the
 * horizon) and holds in another state (*differ); prints the first few differences with
 * who. */
void conv_compare(const gwc_rep *r, const char *who, const char *gid, const conv_group *s,
                  uint64_t *missing, uint64_t *extra, uint64_t *differ);

#endif
