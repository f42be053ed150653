/*
 * Bad input: each case gets the right error or close code, and the server keeps serving
 * another session throughout (checked after every case).
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gwfx f;
static gwc_conn *watcher; /* a well-behaved session that must stay served */

static void setup(void)
{
    static const char *const args[] = {"--hello-timeout", "1", "--error-budget", "5", NULL};
    gwfx_start(&f, args);
    watcher = gwfx_login(&f, "watcher", NULL);
    gwfx_join(watcher, "g");
}

static void teardown(void)
{
    cr_assert(gwfx_alive(&f), "the gateway died");
    gwfx_cleanup(&f);
}

TestSuite(errors, .init = setup, .fini = teardown, .timeout = 60);

/* The watcher still gets answers. */
static void still_served(void)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_ping(&sb, 99);
    pr_event ev = gwfx_request(watcher, &sb, PR_EV_PONG);
    cr_assert_eq(ev.rid, 99);
    msgpack_sbuffer_destroy(&sb);
}

static pr_event expect_err(gwc_conn *k, const char *code)
{
    pr_event ev = gwfx_expect(k, PR_EV_ERR);
    cr_assert(gwfx_slice_is(ev.err_name, code), "expected err %s, got %.*s (%.*s)", code,
              (int)ev.err_name.n, ev.err_name.p, (int)ev.err_msg.n, ev.err_msg.p);
    cr_assert_gt(ev.err_msg.n, 0, "an error says what was wrong");
    return ev;
}

static void hello_with(gwc_conn *k, const char *tok)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, gwfx_sl(tok));
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static void token_refused(const char *tok)
{
    gwc_conn *k = gwfx_connect_raw(&f);
    hello_with(k, tok);
    cr_assert_eq(gwfx_closed(k), 4001);
    cr_assert(strncmp(gwc_close_reason(k), "unauthorized: ", 14) == 0, "reason: %s",
              gwc_close_reason(k));
    gwc_close(k);
    still_served();
}

Test(errors, bad_tokens_close_with_4001)
{
    char *tok = NULL;
    /* Wrong secret. */
    cr_assert_eq(gwc_token_mint("another-secret-0123456789", 25, "eve", time(NULL) + 60, NULL, 0,
                                false, &tok),
                 0);
    token_refused(tok);
    free(tok);
    /* Expired. */
    cr_assert_eq(gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), "eve", time(NULL) - 5, NULL, 0,
                                false, &tok),
                 0);
    token_refused(tok);
    free(tok);
    /* alg none. */
    cr_assert_eq(gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), "eve", time(NULL) + 60, NULL, 0,
                                true, &tok),
                 0);
    token_refused(tok);
    free(tok);
    /* Not a token at all, and a valid token with its signature cut off. */
    token_refused("not.a.token");
    tok = gwfx_token("eve");
    *strrchr(tok, '.') = 0;
    token_refused(tok);
    free(tok);
}

Test(errors, anything_before_hello_closes_with_4001)
{
    gwc_conn *k = gwfx_connect_raw(&f);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 1, gwfx_sl("g"));
    gwfx_send(k, &sb);
    cr_assert_eq(gwfx_closed(k), 4001);
    gwc_close(k);
    msgpack_sbuffer_destroy(&sb);
    still_served();
}

Test(errors, no_hello_in_time_closes_with_4001)
{
    gwc_conn *k = gwfx_connect_raw(&f); /* --hello-timeout 1 */
    cr_assert_eq(gwfx_closed(k), 4001);
    gwc_close(k);
    still_served();
}

Test(errors, token_groups_claim_limits_joins)
{
    const char *groups[] = {"allowed"};
    char *tok = NULL;
    cr_assert_eq(gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), "limited", time(NULL) + 60,
                                groups, 1, false, &tok),
                 0);
    gwc_conn *k = gwfx_connect_raw(&f);
    hello_with(k, tok);
    free(tok);
    gwfx_expect(k, PR_EV_WELCOME);
    gwfx_join(k, "allowed");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 2, gwfx_sl("other"));
    gwfx_send(k, &sb);
    pr_event ev = expect_err(k, "unauthorized");
    cr_assert_eq(ev.rid, 2);
    msgpack_sbuffer_destroy(&sb);
}

Test(errors, not_member_on_every_group_operation)
{
    gwc_conn *k = gwfx_login(&f, "outsider", NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, 1, gwfx_sl("g"), gwfx_sl("c1"), (pr_body){gwfx_sl("x"), false});
    gwfx_send(k, &sb);
    pr_event ev = expect_err(k, "not_member");
    cr_assert_eq(ev.rid, 1);
    cr_assert(gwfx_slice_is(ev.gid, "g"));
    sb.size = 0;
    pr_ack a = {gwfx_sl("g"), 5};
    pr_enc_ack(&sb, &a, 1);
    gwfx_send(k, &sb);
    expect_err(k, "not_member");
    sb.size = 0;
    pr_enc_enter(&sb, 3, gwfx_sl("g"), 0);
    gwfx_send(k, &sb);
    expect_err(k, "not_member");
    sb.size = 0;
    pr_enc_pull(&sb, 4, gwfx_sl("g"), false, 0, 10);
    gwfx_send(k, &sb);
    expect_err(k, "not_member");
    sb.size = 0;
    pr_enc_leave(&sb, 5, gwfx_sl("g"));
    gwfx_send(k, &sb);
    expect_err(k, "not_member");
    msgpack_sbuffer_destroy(&sb);
    /* Nothing was stored on the watcher's group. */
    cr_assert(gwfx_quiet(watcher, 100));
    still_served();
}

Test(errors, idempotent_resend)
{
    gwc_conn *b = gwfx_login(&f, "bob", NULL);
    gwfx_join(b, "g");
    uint64_t m1 = gwfx_send_msg(b, "g", "same-cid", "once");
    uint64_t m2 = gwfx_send_msg(b, "g", "same-cid", "once");
    cr_assert_eq(m1, 1);
    cr_assert_eq(m2, m1);
    /* The watcher saw it once. */
    pr_event ev = gwfx_expect(watcher, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 1);
    cr_assert(gwfx_quiet(watcher, 200), "a resend must not be pushed again");
    cr_assert_eq(gwfx_send_msg(b, "g", "next", "two"), 2);
}

/* Sends {t: type, key: value} as MessagePack, built by hand (the encoders write only
 * what the protocol allows). */
static void send_type_and_uint(gwc_conn *k, const char *type, const char *key, uint64_t value)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_str_with_body(&pk, type, strlen(type));
    msgpack_pack_str_with_body(&pk, key, strlen(key));
    msgpack_pack_uint64(&pk, value);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
}

Test(errors, malformed_requests_get_errors_and_the_session_goes_on)
{
    gwc_conn *k = gwfx_login(&f, "mallory", NULL);
    gwfx_join(k, "m");
    /* Garbage bytes. */
    const uint8_t junk[] = {0xc1, 0xff, 0x00, 0x13};
    cr_assert_eq(gwc_send_raw(k, junk, sizeof(junk), false), 0);
    expect_err(k, "bad_frame");
    /* A text frame. */
    cr_assert_eq(gwc_send_raw(k, "{\"t\":\"ping\"}", 12, true), 0);
    expect_err(k, "bad_frame");
    /* Unknown type. */
    send_type_and_uint(k, "dance", "rid", 42);
    pr_event ev = expect_err(k, "bad_type");
    cr_assert_eq(ev.rid, 42);
    /* A field of the wrong type: gid as an integer. */
    send_type_and_uint(k, "join", "gid", 7);
    expect_err(k, "bad_field");
    /* Still a working session. */
    cr_assert_eq(gwfx_send_msg(k, "m", "ok-1", "still here"), 1);
    still_served();
}

Test(errors, oversized_body_is_refused_and_nothing_stored)
{
    gwc_conn *k = gwfx_login(&f, "big", NULL);
    gwfx_join(k, "g");
    size_t n = 64 * 1024 + 1;
    char *body = malloc(n);
    memset(body, 'x', n);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, 8, gwfx_sl("g"), gwfx_sl("huge"),
                (pr_body){{(const uint8_t *)body, n}, false});
    gwfx_send(k, &sb);
    pr_event ev = expect_err(k, "too_large");
    cr_assert_eq(ev.rid, 8);
    free(body);
    msgpack_sbuffer_destroy(&sb);
    cr_assert(gwfx_quiet(watcher, 200), "nothing may be stored or pushed");
    cr_assert_eq(gwfx_send_msg(k, "g", "small", "fits"), 1, "no mid was used up");
}

Test(errors, oversized_frame_closes_with_1009)
{
    gwc_conn *k = gwfx_login(&f, "huge", NULL);
    size_t n = 300 * 1024;
    uint8_t *junk = calloc(1, n);
    cr_assert_eq(gwc_send_raw(k, junk, n, false), 0);
    free(junk);
    int code = gwfx_closed(k);
    cr_assert_eq(code, 1009, "closed with %d (%s)", code, gwc_last_error(k));
    still_served();
}

Test(errors, error_budget_closes_with_1008)
{
    gwc_conn *k = gwfx_login(&f, "spammer", NULL);
    /* One bad request at a time, each answered, until the budget (5) is spent. A client
     * that kept writing after the close could see its connection reset instead of the
     * close frame: that is TCP, not the gateway. */
    const uint8_t junk[] = {0xc1};
    int answered = 0;
    pr_event ev;
    while (gwc_send_raw(k, junk, 1, false) == 0 && gwc_next(k, GWFX_WAIT, &ev) == 0) {
        cr_assert_eq(ev.t, PR_EV_ERR);
        cr_assert_lt(++answered, 20, "the budget was never spent");
    }
    cr_assert_geq(answered, 5, "closed before the budget was spent");
    int code = gwfx_closed(k);
    cr_assert_eq(code, 1008, "closed with %d (%s)", code, gwc_last_error(k));
    still_served();
}
