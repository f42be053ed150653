/*
 * gw_token: mints a token for a native client (an HS256 JWT the gateway accepts).
 *
 *   gw_token --user alice [--ttl 3600] [--group g1 --group g2] [--secret-file PATH]
 *
 * The secret comes from --secret-file, else the environment variable GW_SECRET, else the
 * gateway's default file data/token-secret. It is never taken on the command line.
 */
#include "gwc.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GROUPS 256

static void usage(FILE *f)
{
    fprintf(f, "usage: gw_token --user ID [--ttl SECONDS] [--group GID]... [--secret-file PATH]\n"
               "Prints a token (HS256 JWT) for the gateway: sub = ID, exp = now + SECONDS\n"
               "(default 86400), and with --group the only groups the user may join.\n"
               "The secret: --secret-file PATH, else $GW_SECRET, else data/token-secret.\n");
}

static int read_secret(const char *path, char *buf, size_t cap, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "gw_token: %s: %s\n", path, strerror(errno));
        return -1;
    }
    *n = fread(buf, 1, cap, f);
    fclose(f);
    while (*n && (buf[*n - 1] == '\n' || buf[*n - 1] == '\r'))
        (*n)--;
    if (*n < 16) {
        fprintf(stderr, "gw_token: %s: the secret must be at least 16 bytes\n", path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"user", required_argument, 0, 'u'},  {"ttl", required_argument, 0, 't'},
        {"group", required_argument, 0, 'g'}, {"secret-file", required_argument, 0, 's'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    const char *user = NULL, *secret_file = NULL;
    const char *groups[MAX_GROUPS];
    size_t n_groups = 0;
    long ttl = 86400;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'u': user = optarg; break;
        case 't':
            errno = 0;
            ttl = strtol(optarg, &end, 10);
            if (errno || *end || ttl < 1 || ttl > 10L * 365 * 86400) {
                fprintf(stderr, "gw_token: --ttl %s: seconds from 1 to ten years\n", optarg);
                return 2;
            }
            break;
        case 'g':
            if (n_groups == MAX_GROUPS) {
                fprintf(stderr, "gw_token: at most %d groups\n", MAX_GROUPS);
                return 2;
            }
            groups[n_groups++] = optarg;
            break;
        case 's': secret_file = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!user || optind < argc) {
        usage(stderr);
        return 2;
    }
    const char *bad = pr_id_valid((pr_slice){(const uint8_t *)user, strlen(user)}) ? NULL : user;
    for (size_t i = 0; !bad && i < n_groups; i++)
        if (!pr_id_valid((pr_slice){(const uint8_t *)groups[i], strlen(groups[i])}))
            bad = groups[i];
    if (bad) {
        fprintf(stderr, "gw_token: '%s' is not a valid id (1-64 of [A-Za-z0-9_.:-])\n", bad);
        return 2;
    }
    char secret[257];
    size_t secret_n = 0;
    const char *env = getenv("GW_SECRET");
    if (secret_file) {
        if (read_secret(secret_file, secret, sizeof(secret) - 1, &secret_n))
            return 1;
    } else if (env && *env) {
        secret_n = strlen(env);
        if (secret_n < 16 || secret_n > 256) {
            fprintf(stderr, "gw_token: GW_SECRET must be 16 to 256 bytes\n");
            return 1;
        }
        memcpy(secret, env, secret_n);
    } else if (read_secret("data/token-secret", secret, sizeof(secret) - 1, &secret_n)) {
        fprintf(stderr, "gw_token: give --secret-file or GW_SECRET\n");
        return 1;
    }
    char *tok = NULL;
    int rc = gwc_token_mint(secret, secret_n, user, (int64_t)time(NULL) + ttl, groups, n_groups,
                            false, &tok);
    if (rc != 0) {
        fprintf(stderr, "gw_token: cannot make the token: %s\n", gwc_strerror(rc));
        return 1;
    }
    printf("%s\n", tok);
    free(tok);
    return 0;
}
