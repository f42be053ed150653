/* Token check for `hello`: an HS256 JWT signed with the server's secret (libjwt). */
#ifndef GW_AUTH_H
#define GW_AUTH_H

#include "proto.h"

#include <stddef.h>
#include <stdint.h>

#define GW_AUTH_MAX_GROUPS 256 /* entries of a `groups` claim */

/* What a valid token says. Owned by the caller; free with gw_identity_release. */
typedef struct gw_identity {
    char uid[PR_MAX_ID + 1];
    int64_t exp;   /* Unix seconds */
    char **groups; /* the `groups` claim: the only groups this user may join; NULL = any */
    size_t n_groups;
} gw_identity;

/*
 * Verifies token against secret at time now (Unix seconds): the algorithm must be HS256
 * (none and every other algorithm are refused), the signature must match, `sub` must be a
 * valid id, `exp` must be present and in the future, and `groups`, if present, an array of
 * valid ids. Returns 0 and fills *id, or -1 with a short reason in why (never the token).
 */
int gw_auth_check(const void *secret, size_t secret_n, pr_slice token, int64_t now, gw_identity *id,
                  const char **why);
void gw_identity_release(gw_identity *id);

/* Mints an HS256 token for uid expiring at exp (demo login). *out is malloc'd. 0 or -1. */
int gw_auth_mint(const void *secret, size_t secret_n, const char *uid, int64_t exp, char **out);

/* True if the identity may join gid (no groups claim, or gid listed in it). */
int gw_identity_allows(const gw_identity *id, pr_slice gid);

#endif
