/*
 * wss://: the gateway serves TLS with a given certificate and key; a client that trusts
 * that certificate chats over it, one that does not is refused; TLS below 1.2 is refused.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gwfx f;

static void setup(void)
{
    gwfx_start_tls(&f, NULL);
}

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 60);

Test(tls, chat_over_wss)
{
    cr_assert(strncmp(f.url, "wss://", 6) == 0);
    gwc_conn *a = gwfx_login(&f, "alice", NULL);
    gwc_conn *b = gwfx_login(&f, "bob", NULL);
    gwfx_join(a, "secure");
    gwfx_join(b, "secure");
    cr_assert_eq(gwfx_send_msg(a, "secure", "c1", "over tls"), 1);
    pr_event ev = gwfx_expect(b, PR_EV_MSG);
    cr_assert(gwfx_slice_is(ev.msg.body.data, "over tls"));
}

Test(tls, untrusted_certificate_is_refused)
{
    /* A client with the system CAs only: the test certificate is unknown to it. (Two
     * libwebsockets client contexts with different CA settings alive at once leak the
     * CA store in libwebsockets 4.1.6, so the fixture's context goes first.) */
    gwc_ctx_free(f.ctx);
    f.ctx = gwc_ctx_new(NULL);
    gwc_conn *k = NULL;
    cr_assert_eq(gwc_connect(f.ctx, f.url, GWFX_WAIT, &k), GWC_ECONNECT);
}

static int s_client(const char *opts)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "openssl s_client -connect 127.0.0.1:%d %s </dev/null >/dev/null 2>&1", f.port,
             opts);
    return system(cmd);
}

Test(tls, only_tls12_and_newer)
{
    /* The client side is allowed old protocols (security level 0), so a refusal is the
     * server's. */
    cr_assert_eq(s_client("-tls1_2"), 0, "TLS 1.2 must work");
    cr_assert_eq(s_client("-tls1_3"), 0, "TLS 1.3 must work");
    cr_assert_neq(s_client("-tls1_1 -cipher DEFAULT@SECLEVEL=0"), 0, "TLS 1.1 must be refused");
    cr_assert_neq(s_client("-tls1 -cipher DEFAULT@SECLEVEL=0"), 0, "TLS 1.0 must be refused");
    cr_assert_neq(s_client("-tls1_2 -cipher AES128-SHA"), 0, "no non-forward-secret suites");
}

Test(tls, plain_ws_is_refused_on_a_tls_port)
{
    char url[96];
    snprintf(url, sizeof(url), "ws://127.0.0.1:%d/ws", f.port);
    gwc_conn *k = NULL;
    int rc = gwc_connect(f.ctx, url, GWFX_WAIT, &k);
    cr_assert(rc == GWC_ECONNECT || rc == GWC_ETIMEDOUT, "plain ws:// got %s", gwc_strerror(rc));
}
