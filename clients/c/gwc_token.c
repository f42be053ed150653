/*
 * gwc_token: mints the JWTs the gateway checks (see gwc_token_mint in gwc.h), on libjwt 1.10.
 */
#include "gwc.h"

#include <jwt.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Worst case of one byte as a JSON string character: \u00XX. */
#define JSON_ESC_MAX 6

/* Appends s as a JSON string. Bytes >= 0x80 pass through: the caller's UTF-8 stays as is. */
static char *json_str(char *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    *w++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *w++ = '\\';
            *w++ = (char)*p;
        } else if (*p < 0x20) {
            memcpy(w, "\\u00", 4);
            w[4] = hex[*p >> 4];
            w[5] = hex[*p & 15];
            w += 6;
        } else {
            *w++ = (char)*p;
        }
    }
    *w++ = '"';
    return w;
}

/* {"groups":[...]} for jwt_add_grants_json, which is how libjwt takes a non-scalar claim. */
static char *groups_json(const char *const *groups, size_t n)
{
    size_t size = sizeof "{\"groups\":[]}";
    for (size_t i = 0; i < n; i++)
        size += strlen(groups[i]) * JSON_ESC_MAX + 3;
    char *json = malloc(size), *w = json;
    if (!json)
        return NULL;
    w += sprintf(w, "{\"groups\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            *w++ = ',';
        w = json_str(w, groups[i]);
    }
    strcpy(w, "]}");
    return json;
}

static int from_errno(int e)
{
    return e == ENOMEM ? GWC_ENOMEM : GWC_EINVAL;
}

int gwc_token_mint(const void *secret, size_t secret_n, const char *uid, int64_t exp,
                   const char *const *groups, size_t n_groups, bool none, char **out)
{
    jwt_t *jwt = NULL;
    char *json = NULL;
    int rc;
    if (out)
        *out = NULL;
    if (!uid || !out || (n_groups && !groups))
        return GWC_EINVAL;
    if (!none && (!secret || !secret_n || secret_n > INT_MAX))
        return GWC_EINVAL;
    for (size_t i = 0; i < n_groups; i++)
        if (!groups[i])
            return GWC_EINVAL;

    if ((rc = jwt_new(&jwt)))
        return from_errno(rc);
    if (none)
        rc = jwt_set_alg(jwt, JWT_ALG_NONE, NULL, 0);
    else
        rc = jwt_set_alg(jwt, JWT_ALG_HS256, secret, (int)secret_n);
    if (rc)
        goto done;
    if ((rc = jwt_add_grant(jwt, "sub", uid)))
        goto done;
    if ((rc = jwt_add_grant_int(jwt, "exp", (long)exp)))
        goto done;
    if ((rc = jwt_add_grant_int(jwt, "iat", (long)time(NULL))))
        goto done;
    if (n_groups) {
        if (!(json = groups_json(groups, n_groups))) {
            rc = ENOMEM;
            goto done;
        }
        if ((rc = jwt_add_grants_json(jwt, json)))
            goto done;
    }
    /* The string comes from libjwt's default allocator, malloc, so free() releases it. */
    if (!(*out = jwt_encode_str(jwt)))
        rc = errno ? errno : ENOMEM;

done:
    free(json);
    jwt_free(jwt);
    return rc ? from_errno(rc) : 0;
}
