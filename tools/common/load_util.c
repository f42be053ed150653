/* load_util: a clock, slices, the secret and a hello for the tools; see load_util.h. */
#include "load_util.h"

#include "gwc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t load_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

pr_slice load_sl(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

int load_read_file(const char *prog, const char *path, char *buf, size_t cap, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    *n = fread(buf, 1, cap - 1, f);
    fclose(f);
    while (*n && (buf[*n - 1] == '\n' || buf[*n - 1] == '\r'))
        (*n)--;
    buf[*n] = 0;
    return 0;
}

void load_secret_from_env(char *buf, size_t cap, size_t *n)
{
    const char *env = getenv("GW_SECRET");
    if (!*n && env && strlen(env) < cap) {
        *n = strlen(env);
        memcpy(buf, env, *n);
    }
}

int load_enc_hello_with(const char *secret, size_t secret_n, const char *uid, msgpack_sbuffer *sb)
{
    char *tok = NULL;
    if (gwc_token_mint(secret, secret_n, uid, (int64_t)time(NULL) + 86400, NULL, 0, false, &tok) !=
        0)
        return -1;
    pr_enc_hello(sb, PR_NO_RID, load_sl(tok));
    free(tok);
    return 0;
}
