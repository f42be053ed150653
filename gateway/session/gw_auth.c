#include "gw_session.h"

#include <errno.h>
#include <jansson.h>
#include <jwt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void gw_identity_release(gw_identity *id)
{
    for (size_t i = 0; i < id->n_groups; i++)
        free(id->groups[i]);
    free(id->groups);
    id->groups = NULL;
    id->n_groups = 0;
}

static int set_groups(gw_identity *id, const char *json, const char **why)
{
    json_error_t jerr;
    json_t *arr = json_loads(json, 0, &jerr);
    int rc = -1;
    if (!arr || !json_is_array(arr) || json_array_size(arr) > GW_AUTH_MAX_GROUPS) {
        *why = "the groups claim must be an array of at most 256 group ids";
        goto out;
    }
    id->groups = calloc(json_array_size(arr) + 1, sizeof(char *));
    if (!id->groups) {
        *why = "out of memory";
        goto out;
    }
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *s = json_string_value(v);
        if (!s || !pr_id_valid((pr_slice){(const uint8_t *)s, strlen(s)})) {
            *why = "the groups claim holds something that is not a group id";
            goto out;
        }
        id->groups[id->n_groups] = strdup(s);
        if (!id->groups[id->n_groups]) {
            *why = "out of memory";
            goto out;
        }
        id->n_groups++;
    }
    rc = 0;
out:
    json_decref(arr);
    return rc;
}

int gw_auth_check(const void *secret, size_t secret_n, pr_slice token, int64_t now, gw_identity *id,
                  const char **why)
{
    memset(id, 0, sizeof(*id));
    if (token.n == 0 || token.n > GW_HELLO_TOKEN_MAX) {
        *why = "token missing or too long";
        return -1;
    }
    /* libjwt wants a C string. */
    char buf[GW_HELLO_TOKEN_MAX + 1];
    memcpy(buf, token.p, token.n);
    buf[token.n] = 0;
    if (memchr(buf, 0, token.n)) {
        *why = "token is not a JWT";
        return -1;
    }
    jwt_t *jwt = NULL;
    /* With a key, libjwt checks the HMAC; the algorithm is checked by hand below too, so
     * that a token saying alg "none" (or RS256 with our secret as a "public key") can never
     * pass. */
    if (jwt_decode(&jwt, buf, secret, (int)secret_n) != 0 || !jwt) {
        *why = "token signature or format is invalid";
        return -1;
    }
    int rc = -1;
    if (jwt_get_alg(jwt) != JWT_ALG_HS256) {
        *why = "token algorithm must be HS256";
        goto out;
    }
    const char *sub = jwt_get_grant(jwt, "sub");
    if (!sub || !pr_id_valid((pr_slice){(const uint8_t *)sub, strlen(sub)})) {
        *why = "token subject (sub) is missing or not a valid user id";
        goto out;
    }
    long exp = jwt_get_grant_int(jwt, "exp");
    if (exp <= 0) {
        *why = "token has no expiry (exp)";
        goto out;
    }
    if (exp <= now) {
        *why = "token expired";
        goto out;
    }
    /* A token issued before its user's sign-out is refused (groups/: the not-before); one
     * that does not say when it was issued cannot show it was not. */
    errno = 0;
    long iat = jwt_get_grant_int(jwt, "iat");
    if (errno != ENOENT && iat <= 0) {
        *why = "token issue time (iat) is not a positive number";
        goto out;
    }
    if (iat > now + GW_AUTH_IAT_SKEW) { /* else it would outlive every sign-out before it */
        *why = "token issue time (iat) is in the future";
        goto out;
    }
    strcpy(id->uid, sub);
    id->exp = exp;
    id->iat = errno == ENOENT ? 0 : iat;
    char *groups = jwt_get_grants_json(jwt, "groups");
    if (groups) {
        int grc = set_groups(id, groups, why);
        free(groups);
        if (grc) {
            gw_identity_release(id);
            goto out;
        }
    }
    rc = 0;
out:
    jwt_free(jwt);
    return rc;
}

int gw_identity_allows(const gw_identity *id, pr_slice gid)
{
    if (!id->groups)
        return 1;
    for (size_t i = 0; i < id->n_groups; i++)
        if (strlen(id->groups[i]) == gid.n && memcmp(id->groups[i], gid.p, gid.n) == 0)
            return 1;
    return 0;
}

int gw_auth_mint(const void *secret, size_t secret_n, const char *uid, int64_t exp, char **out)
{
    *out = NULL;
    jwt_t *jwt = NULL;
    if (jwt_new(&jwt) != 0)
        return -1;
    int rc = -1;
    if (jwt_add_grant(jwt, "sub", uid) == 0 && jwt_add_grant_int(jwt, "exp", (long)exp) == 0 &&
        jwt_add_grant_int(jwt, "iat", (long)time(NULL)) == 0 &&
        jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)secret, (int)secret_n) == 0) {
        *out = jwt_encode_str(jwt); /* malloc'd by libjwt: the caller free()s it */
        rc = *out ? 0 : -1;
    }
    jwt_free(jwt);
    return rc;
}
