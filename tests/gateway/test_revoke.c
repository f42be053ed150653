/*
 * Revocation (docs/API.md, Revoking a user): a sign-out or an erasure through the server
 * API moves the user's not-before, and a hello with a token issued at or before it (or
 * one that does not say when it was issued) is refused with 4001, as a bad token is,
 * while a token issued after it signs in. The not-before is the store's: it holds across
 * a restart.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gwfx f;

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(revoke, .fini = teardown, .timeout = 90);

#define NO_IAT GWFX_NO_IAT

/* A hello with the token on a new connection: 0 when welcomed (the connection is kept in
 * *kept if asked, else closed; the welcome's groups counted in *groups if asked), else the
 * code the gateway closed it with. */
static int hello_with(const char *uid, long iat, gwc_conn **kept, size_t *groups)
{
    char *tok = gwfx_token_issued(uid, iat);
    gwc_conn *k = gwfx_connect_raw(&f);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, gwfx_sl(tok));
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    free(tok);
    pr_event ev;
    int code = -1;
    for (int frames = 0; code < 0 && frames < 100; frames++) {
        int rc = gwc_next(k, GWFX_WAIT, &ev);
        if (rc == GWC_ECLOSED)
            code = gwc_close_code(k);
        else if (rc == 0 && ev.t == PR_EV_WELCOME && (code = 0, groups))
            *groups = ev.n_items;
        else
            cr_assert(rc == 0 || rc == GWC_EPROTO, "no answer to hello: %s", gwc_strerror(rc));
    }
    if (code == 0 && kept)
        *kept = k;
    else
        gwc_close(k);
    return code;
}

static void start(void)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start(&f, args);
}

/* The wall clock's second as the gateway's store reads it (CLOCK_REALTIME). Not time(NULL):
 * glibc answers it from the coarse clock, which can still say the last second for a tick
 * after the store's clock has moved on; `after + 1` would then be the sign-out's own second. */
static long now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long)t.tv_sec;
}

/* uid signs in with a token of a minute ago and joins a group; then the API's DELETE of
 * path_of (with uid in it) removes it (its session closed with 4003). The seconds just before and
 * after. */
static void removed(const char *uid, const char *path_of, long *before, long *after)
{
    *before = now_s();
    gwc_conn *k = NULL;
    cr_assert_eq(hello_with(uid, *before - 60, &k, NULL), 0);
    gwfx_join(k, "team");
    char path[128];
    snprintf(path, sizeof(path), path_of, uid);
    char *b = gwfx_api(&f, "DELETE", path, NULL, 200);
    free(b);
    cr_assert_eq(gwfx_closed(k), 4003);
    *after = now_s();
}

Test(revoke, a_signed_out_users_old_tokens_are_refused_and_a_new_one_signs_in)
{
    start();
    long before, after;
    removed("carol", "/api/v1/users/%s/sessions", &before, &after);
    cr_assert_eq(hello_with("carol", before - 60, NULL, NULL), 4001, "the token it had");
    cr_assert_eq(hello_with("carol", before, NULL, NULL), 4001,
                 "a token of the sign-out's own second (or before)");
    cr_assert_eq(hello_with("carol", NO_IAT, NULL, NULL), 4001, "a token that does not say when");
    gwc_conn *again = NULL;
    size_t groups = 0;
    cr_assert_eq(hello_with("carol", after + 1, &again, &groups), 0, "a token minted after it");
    cr_assert_eq(groups, 1, "signed in as before: its group is there");
    /* While it is online (its user here, no read at a hello), the old token stays out. */
    cr_assert_eq(hello_with("carol", before - 60, NULL, NULL), 4001);
    cr_assert(gwc_is_open(again));
    cr_assert_geq(gwfx_stat(&f, "sessions", "auth_failures"), 4);
    gwc_close(again);
}

Test(revoke, a_token_without_iat_is_refused_only_once_the_user_was_signed_out)
{
    start();
    gwc_conn *k = NULL;
    cr_assert_eq(hello_with("dave", NO_IAT, &k, NULL), 0, "no not-before yet: as before");
    cr_assert_eq(hello_with("erin", NO_IAT, NULL, NULL), 0);
    char *b = gwfx_api(&f, "DELETE", "/api/v1/users/dave/sessions", NULL, 200);
    free(b);
    cr_assert_eq(gwfx_closed(k), 4003);
    cr_assert_eq(hello_with("dave", NO_IAT, NULL, NULL), 4001);
    cr_assert_eq(hello_with("erin", NO_IAT, NULL, NULL), 0, "another user's tokens are untouched");
    cr_assert_eq(hello_with("erin", now_s() + 3600, NULL, NULL), 4001,
                 "a token issued in the future would outlive every sign-out before it");
}

Test(revoke, an_erased_users_token_is_refused_and_a_new_one_starts_afresh)
{
    start();
    long before, after;
    removed("mallory", "/api/v1/users/%s", &before, &after);
    cr_assert_eq(hello_with("mallory", before - 60, NULL, NULL), 4001);
    size_t groups = 1;
    cr_assert_eq(hello_with("mallory", after + 1, NULL, &groups), 0);
    cr_assert_eq(groups, 0, "erased: no group");
}

Test(revoke, the_not_before_holds_across_a_restart)
{
    start();
    long before = now_s();
    char *b = gwfx_api(&f, "DELETE", "/api/v1/users/carol/sessions", NULL, 200);
    free(b);
    long after = now_s();
    gwfx_stop(&f, SIGTERM);
    gwfx_restart(&f);
    cr_assert_eq(hello_with("carol", before - 60, NULL, NULL), 4001);
    cr_assert_eq(hello_with("carol", NO_IAT, NULL, NULL), 4001);
    cr_assert_eq(hello_with("carol", after + 1, NULL, NULL), 0);
}
