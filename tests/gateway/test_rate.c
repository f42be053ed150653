/*
 * Rate limits: sends and bytes per session (`err rate_limited` with `retry_ms`, reading
 * paused meanwhile, the session goes on), new connections per source address (closed at
 * accept; other addresses unaffected), the address table's bound under a flood from
 * thousands of addresses, the defaults that a normal client never meets. (The flags are
 * checked with the others in test_ops.c.)
 * The bounds asserted are the buckets' own arithmetic over the time the test measured
 * (a slow machine only lowers what gets through), never how fast something happened.
 */
#include "rawws.h"
#include "tclock.h"
#include "watch.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static gwfx f;
static watch w;

static void teardown(void)
{
    gwfx_cleanup(&f);
}

static void start(const char *const *args)
{
    watch_prepare();
    gwfx_start(&f, args);
    watch_start(&w, &f);
}

/* A raw session signed in as uid from src, member of gid. */
static void raw_member(rawws *c, const char *src, const char *uid, const char *gid)
{
    cr_assert_eq(rawws_open(c, f.port, src, GWFX_WAIT), 0);
    char *tok = gwfx_token(uid);
    cr_assert_eq(rawws_hello(c, tok, false), 0);
    free(tok);
    cr_assert_eq(rawws_join(c, gid), 0);
}

/* Pipelines n sends (rid i, cid "c<i>") of a body of body_n bytes in one write. */
static void pipeline_sends(rawws *c, int first, int n, size_t body_n)
{
    char *body = malloc(body_n + 1);
    memset(body, 'r', body_n);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t cap = (size_t)n * (body_n + 64), len = 0;
    uint8_t *buf = malloc(cap);
    for (int i = first; i < first + n; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "c%d", i);
        sb.size = 0;
        pr_enc_send(&sb, (uint64_t)i, gwfx_sl("r"), gwfx_sl(cid),
                    (pr_body){{(const uint8_t *)body, body_n}, false});
        len += rawws_frame(buf + len, cap - len, RAWWS_BIN, true, sb.data, sb.size);
    }
    cr_assert_eq(rawws_write(c, buf, len, false), 0);
    free(buf);
    free(body);
    msgpack_sbuffer_destroy(&sb);
}

/* Reads n answers to sends: marks sent[rid] or refused[rid] (with its retry hint). */
static void read_answers(rawws *c, int n, bool *sent, uint64_t *refused_retry, int *n_sent,
                         int *n_refused)
{
    pr_event ev;
    for (int k = 0; k < n; k++) {
        int rc = rawws_next(c, 20000, &ev);
        cr_assert_eq(rc, 0, "answer %d of %d did not come (%d, close %d)", k, n, rc, c->close_code);
        if (ev.t == PR_EV_SENT) {
            sent[ev.rid] = true;
            (*n_sent)++;
        } else {
            cr_assert_eq(ev.t, PR_EV_ERR);
            cr_assert_eq(ev.err_code, PR_E_RATE_LIMITED, "err %.*s: %.*s", (int)ev.err_name.n,
                         ev.err_name.p, (int)ev.err_msg.n, ev.err_msg.p);
            cr_assert(gwfx_slice_is(ev.gid, "r"));
            cr_assert_geq(ev.retry_ms, 100, "retry hint %lu ms", (unsigned long)ev.retry_ms);
            refused_retry[ev.rid] = ev.retry_ms;
            (*n_refused)++;
        }
    }
}

static void expect_pong(rawws *c)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_ping(&sb, 4242);
    cr_assert_eq(rawws_send(c, sb.data, sb.size, false), 0);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev;
    cr_assert_eq(rawws_next(c, 20000, &ev), 0, "no pong: the session was closed (%d)",
                 c->close_code);
    cr_assert_eq(ev.t, PR_EV_PONG);
}

#define SENDS 300

Test(rate, sends_over_the_rate_get_rate_limited_and_a_retry_hint, .fini = teardown, .timeout = 120)
{
    static const char *const args[] = {"--rate-sends", "100", "--rate-burst", "1", NULL};
    start(args);
    rawws c;
    raw_member(&c, "127.0.0.20", "eager", "r");
    static bool sent[SENDS + 1];
    static uint64_t retry[SENDS + 1];
    int n_sent = 0, n_refused = 0;
    long t0 = tclock_ms();
    pipeline_sends(&c, 1, SENDS, 10);
    read_answers(&c, SENDS, sent, retry, &n_sent, &n_refused);
    long took = tclock_ms() - t0;
    watch_probe(&w);
    cr_log_info("rate: %d sends pipelined at --rate-sends 100 --rate-burst 1: %d stored, %d "
                "refused with rate_limited, in %ld ms",
                SENDS, n_sent, n_refused, took);
    cr_assert_gt(n_refused, 0, "nothing was refused");
    /* The bucket: 100 at once, then 100 a second. */
    cr_assert_leq(n_sent, 100 + 100 * took / 1000 + 1, "%d stored in %ld ms", n_sent, took);
    /* Refusals are not bad requests: the session is still open and served. */
    expect_pong(&c);
    /* A client that waits out retry_ms and resends the same cid gets everything stored,
     * each message once. */
    int rounds = 0;
    while (n_sent < SENDS) {
        cr_assert_lt(++rounds, 100, "still refused after %d rounds", rounds);
        uint64_t wait = 0;
        int first = 0, n = 0;
        for (int i = 1; i <= SENDS; i++)
            if (!sent[i] && retry[i]) {
                wait = retry[i] > wait ? retry[i] : wait;
                if (!first)
                    first = i;
            }
        usleep((useconds_t)wait * 1000);
        /* Resend a run of refused ones (as many as a second allows). */
        for (int i = first; i <= SENDS && n < 100; i++, n++)
            if (sent[i])
                break;
        memset(retry + first, 0, (size_t)n * sizeof(retry[0]));
        pipeline_sends(&c, first, n, 10);
        read_answers(&c, n, sent, retry, &n_sent, &n_refused);
    }
    watch_probe(&w);
    pr_event wel;
    gwc_conn *k = gwfx_login(&f, "eager", &wel);
    (void)k;
    pr_group g = gwfx_first_group(&wel);
    cr_assert_eq(g.last_mid, SENDS, "every message stored once: last mid %lu",
                 (unsigned long)g.last_mid);
    cr_assert_geq(watch_stat(&f, "rate_limits.sends"), n_refused);
    cr_assert_geq(watch_stat(&f, "errors.rate_limited"), n_refused);
    char *metrics = gwfx_metrics(&f);
    cr_assert_not_null(strstr(metrics, "gw_rate_limited_total{limit=\"sends\"} "));
    cr_assert_not_null(strstr(metrics, "gw_rate_limited_total{limit=\"connections\"} 0"));
    free(metrics);
    rawws_close(&c);
    watch_report(&w, "send rate", 64 * 1024);
}

Test(rate, bytes_over_the_rate_slow_the_session_and_refuse_sends, .fini = teardown, .timeout = 120)
{
    /* 256 KiB a second, bursts of one second's worth: one full frame. */
    static const char *const args[] = {"--rate-bytes", "262144", "--rate-burst", "1", NULL};
    start(args);
    rawws c;
    raw_member(&c, "127.0.0.21", "bulky", "r");
    static bool sent[41];
    static uint64_t retry[41];
    int n_sent = 0, n_refused = 0;
    long t0 = tclock_ms();
    pipeline_sends(&c, 1, 40, 32 * 1024); /* 1.3 MiB */
    read_answers(&c, 40, sent, retry, &n_sent, &n_refused);
    long took = tclock_ms() - t0;
    cr_log_info("rate: 40 sends of 32 KiB at --rate-bytes 262144: %d stored, %d refused, in "
                "%ld ms",
                n_sent, n_refused, took);
    cr_assert_gt(n_refused, 0);
    cr_assert_leq(n_sent, 8 + 8 * took / 1000 + 1, "%d stored in %ld ms", n_sent, took);
    /* Other frames are never refused for bytes, only slowed: 20 pings of 30 KiB. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int i = 0; i < 20; i++) {
        sb.size = 0;
        rawws_padded_ping(&sb, (uint64_t)i, 30 * 1024);
        cr_assert_eq(rawws_request(&c, &sb, false), 0);
    }
    msgpack_sbuffer_destroy(&sb);
    for (int i = 0; i < 20; i++) {
        pr_event ev;
        cr_assert_eq(rawws_next(&c, 20000, &ev), 0);
        cr_assert_eq(ev.t, PR_EV_PONG, "ping %d: event %d", i, ev.t);
        watch_probe(&w);
    }
    cr_assert_geq(watch_stat(&f, "rate_limits.bytes"), n_refused);
    cr_assert_geq(watch_stat(&f, "rate_limits.byte_pauses"), 1);
    rawws_close(&c);
    watch_report(&w, "byte rate", 64 * 1024);
}

/* Connects and upgrades from src: true if the gateway let it in. */
static bool let_in(const char *src)
{
    rawws c;
    bool ok = rawws_open(&c, f.port, src, GWFX_WAIT) == 0;
    if (ok)
        rawws_close(&c);
    return ok;
}

Test(rate, connections_per_source_address, .fini = teardown, .timeout = 120)
{
    static const char *const args[] = {"--rate-conns", "5", "--rate-burst", "2", NULL};
    start(args);
    int in = 0, out = 0;
    long t0 = tclock_ms();
    for (int i = 0; i < 40; i++)
        *(let_in("127.0.0.22") ? &in : &out) += 1;
    long took = tclock_ms() - t0;
    cr_log_info("rate: 40 connections from one address at --rate-conns 5 --rate-burst 2: %d "
                "let in, %d refused, in %ld ms",
                in, out, took);
    cr_assert_gt(out, 0);
    cr_assert_leq(in, 10 + 5 * took / 1000 + 1);
    /* Another address is not affected, nor is the bystander. */
    cr_assert(let_in("127.0.0.23"));
    watch_probe(&w);
    cr_assert_eq(watch_stat(&f, "rate_limits.connections"), out);
    cr_assert_geq(watch_stat(&f, "rate_limits.addresses"), 2);
    /* The bucket refills: a second later the first address is let in again. */
    sleep(1);
    cr_assert(let_in("127.0.0.22"));
    watch_report(&w, "connection rate", 64 * 1024);
}

Test(rate, the_address_table_stays_bounded, .fini = teardown, .timeout = 120)
{
    /* Three connections at once per address: the bystander's two (and /stats) fit. */
    static const char *const args[] = {"--rate-conns", "3", "--rate-burst", "1", NULL};
    start(args);
    /* 6,000 addresses (127.1.x.y), one connection each: more than the table holds. */
    int refused_again = 0;
    long t0 = tclock_ms();
    for (int i = 0; i < 6000; i++) {
        char src[32];
        snprintf(src, sizeof(src), "127.1.%d.%d", i / 250, 1 + i % 250);
        rawws c;
        cr_assert_eq(rawws_connect(&c, f.port, src), 0, "connect from %s", src);
        rawws_close(&c);
        /* The last ones connect four times at once: the fourth is over the rate. */
        if (i >= 5990) {
            let_in(src);
            let_in(src);
            refused_again += !let_in(src);
        }
        if (i % 500 == 0)
            watch_probe(&w);
    }
    long took = tclock_ms() - t0;
    double addrs = watch_stat(&f, "rate_limits.addresses");
    cr_log_info("rate: 6,000 source addresses in %ld ms: the table holds %.0f; %d of 10 "
                "immediate fourth connections refused",
                took, addrs, refused_again);
    cr_assert_leq(addrs, 4096);
    cr_assert_gt(refused_again, 0, "the table forgot addresses it had just seen");
    watch_report(&w, "6,000 source addresses", 64 * 1024);
}

Test(rate, defaults_let_a_burst_of_500_through, .fini = teardown, .timeout = 120)
{
    start(NULL);
    rawws c;
    raw_member(&c, "127.0.0.24", "paster", "r");
    static bool sent[501];
    static uint64_t retry[501];
    int n_sent = 0, n_refused = 0;
    /* As the web demo does when 500 lines are pasted: all of them at once. */
    pipeline_sends(&c, 1, 500, 40);
    watch_probe(&w);
    read_answers(&c, 500, sent, retry, &n_sent, &n_refused);
    watch_probe(&w);
    cr_assert_eq(n_sent, 500);
    cr_assert_eq(n_refused, 0);
    rawws_close(&c);
    watch_report(&w, "defaults, a burst of 500 sends", 64 * 1024);
}
