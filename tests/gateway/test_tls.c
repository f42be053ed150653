/*
 * wss://: the gateway serves TLS with a given certificate and key; a client that trusts
 * that certificate chats over it, one that does not is refused; TLS below 1.2 is refused;
 * and sslscan, run against a default start (its own certificate), finds only TLS 1.2 and
 * 1.3 with forward-secret AEAD suites and an EC key of 256 bits or more.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

GWFX_SUITE(tls, f, gwfx_start_tls, 60);

Test(tls, chat_over_wss)
{
    cr_assert(strncmp(f.url, "wss://", 6) == 0);
    gwc_conn *a, *b;
    gwfx_login_two(&f, "alice", &f, "bob", "secure", &a, &b);
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
             "openssl s_client -connect 127.0.0.1:%d %s </dev/null >/dev/null 2>&1", f.port, opts);
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

/* ---- sslscan (Debian's package, installed by tools/setup.sh) ------------------------------ */

GWFX_SUITE(tls_scan, own, gwfx_start_tls_own, 120);

/* The value of attribute name in a line of sslscan's XML, or "" without it. */
static const char *attr(const char *line, const char *name, char *out, size_t n)
{
    char key[64];
    snprintf(key, sizeof(key), " %s=\"", name);
    const char *p = strstr(line, key);
    const char *e = p ? strchr(p + strlen(key), '"') : NULL;
    size_t len = e ? (size_t)(e - (p + strlen(key))) : 0;
    if (len >= n)
        len = n - 1;
    if (len)
        memcpy(out, p + strlen(key), len);
    out[len] = 0;
    return out;
}

/* A TLS 1.2 suite that is forward-secret (ephemeral (EC)DH) and AEAD, with nothing weak. */
static bool tls12_suite_ok(const char *c)
{
    static const char *const weak[] = {"NULL", "EXP", "RC4",   "DES", "CBC", "MD5",
                                       "anon", "ADH", "AECDH", "PSK", "SRP"};
    bool fs = strncmp(c, "ECDHE-", 6) == 0 || strncmp(c, "DHE-", 4) == 0;
    bool aead = strstr(c, "-GCM-") || strstr(c, "-CHACHA20-POLY1305");
    for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++)
        if (strstr(c, weak[i]))
            return false;
    return fs && aead;
}

/* TLS 1.3 suites are all forward-secret; these are its AEADs with a full-length tag. */
static bool tls13_suite_ok(const char *c)
{
    return strcmp(c, "TLS_AES_128_GCM_SHA256") == 0 || strcmp(c, "TLS_AES_256_GCM_SHA384") == 0 ||
           strcmp(c, "TLS_CHACHA20_POLY1305_SHA256") == 0;
}

/* Key size of a named EC curve (sslscan reports the curve and its security level). */
static int curve_bits(const char *curve)
{
    if (strcmp(curve, "prime256v1") == 0 || strcmp(curve, "secp256r1") == 0)
        return 256;
    if (strcmp(curve, "secp384r1") == 0)
        return 384;
    if (strcmp(curve, "secp521r1") == 0)
        return 521;
    return 0;
}

Test(tls_scan, sslscan_finds_only_modern_tls)
{
    char xml[400], cmd[1200];
    snprintf(xml, sizeof(xml), "%s/sslscan.xml", own.dir);
    snprintf(cmd, sizeof(cmd), "sslscan --no-colour --xml=%s 127.0.0.1:%d >%s/sslscan.txt 2>&1",
             xml, own.port, own.dir);
    cr_assert_eq(system(cmd), 0, "sslscan failed (see %s/sslscan.txt; tools/setup.sh installs it)",
                 own.dir);
    FILE *fp = fopen(xml, "r");
    cr_assert_not_null(fp, "sslscan wrote no %s", xml);
    char line[2048], a[128], b[128], c[128];
    int protocols = 0, enabled = 0, tls12 = 0, tls13 = 0, key_bits = -1;
    while (fgets(line, sizeof(line), fp)) {
        if (strstr(line, "<protocol ")) {
            protocols++;
            attr(line, "type", a, sizeof(a));
            attr(line, "version", b, sizeof(b));
            bool modern = strcmp(a, "tls") == 0 && (strcmp(b, "1.2") == 0 || strcmp(b, "1.3") == 0);
            if (modern)
                enabled += strcmp(attr(line, "enabled", c, sizeof(c)), "1") == 0;
            else
                cr_expect_str_eq(attr(line, "enabled", c, sizeof(c)), "0", "%s %s must be disabled",
                                 a, b);
        } else if (strstr(line, "<cipher ")) {
            attr(line, "sslversion", a, sizeof(a));
            attr(line, "cipher", b, sizeof(b));
            cr_expect_geq(atoi(attr(line, "bits", c, sizeof(c))), 128, "%s: %s bits", b, c);
            if (strcmp(a, "TLSv1.3") == 0) {
                tls13++;
                cr_expect(tls13_suite_ok(b), "TLS 1.3 suite %s is not allowed", b);
            } else {
                tls12++;
                cr_expect_str_eq(a, "TLSv1.2", "a cipher offered over %s", a);
                cr_expect(tls12_suite_ok(b), "%s %s is not forward-secret AEAD", a, b);
            }
        } else if (strstr(line, "<pk ")) {
            cr_expect_str_eq(attr(line, "type", a, sizeof(a)), "EC", "certificate key type");
            key_bits = curve_bits(attr(line, "curve_name", b, sizeof(b)));
        } else if (strstr(line, "<heartbleed ")) {
            cr_expect_str_eq(attr(line, "vulnerable", a, sizeof(a)), "0", "heartbleed");
        } else if (strstr(line, "<renegotiation ")) {
            cr_expect(strcmp(attr(line, "supported", a, sizeof(a)), "0") == 0 ||
                          strcmp(attr(line, "secure", b, sizeof(b)), "1") == 0,
                      "insecure renegotiation");
        }
    }
    fclose(fp);
    cr_assert_eq(protocols, 6, "sslscan reports SSLv2, SSLv3 and TLS 1.0 to 1.3");
    cr_assert_eq(enabled, 2, "TLS 1.2 and 1.3 must both be enabled");
    cr_assert(tls12 > 0 && tls13 > 0, "suites: %d of TLS 1.2, %d of TLS 1.3", tls12, tls13);
    cr_assert_geq(key_bits, 256, "the certificate key must be EC of 256 bits or more");
}
