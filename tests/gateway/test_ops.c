/*
 * Operating it: exact figures in /stats and /metrics after a known workload (metrics
 * checked with Prometheus' own parser), health, demo login, the demo page, bad flags, and
 * a graceful stop during a stream of sends and acks.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "store.h"
#include "trun.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gwfx f;

static void teardown(void)
{
    gwfx_cleanup(&f);
}

static json_t *stats(void)
{
    int status;
    char *body = gwfx_http(&f, "/stats", NULL, &status);
    cr_assert_eq(status, 200, "GET /stats: %d", status);
    json_error_t jerr;
    json_t *j = json_loads(body, 0, &jerr);
    cr_assert_not_null(j, "/stats is not JSON: %s", jerr.text);
    free(body);
    return j;
}

static double figf(json_t *j, const char *group, const char *key)
{
    json_t *o = group ? json_object_get(j, group) : j;
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v), "/stats has no %s.%s", group ? group : "", key);
    return json_number_value(v);
}

static long long fig(json_t *j, const char *group, const char *key)
{
    return (long long)figf(j, group, key);
}

static void ack(gwc_conn *k, const char *gid, uint64_t mid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack a = {gwfx_sl(gid), mid};
    pr_enc_ack(&sb, &a, 1);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static void metrics_check(const char *expect)
{
    int status;
    char *body = gwfx_http(&f, "/metrics", NULL, &status);
    cr_assert_eq(status, 200);
    char path[300], cmd[1600];
    snprintf(path, sizeof(path), "%s/metrics.txt", f.dir);
    FILE *o = fopen(path, "w");
    fputs(body, o);
    fclose(o);
    free(body);
    /* The fixture's gateway has no --node: its name is the address and port it bound. */
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 %s/tests/gateway/check_metrics.py %s 127.0.0.1:%d %s 2>&1",
             GW_SOURCE_DIR, path, f.port, expect);
    FILE *p = popen(cmd, "r");
    char line[512] = "";
    if (!fgets(line, sizeof(line), p))
        line[0] = 0;
    int rc = pclose(p);
    cr_assert_eq(rc, 0, "/metrics check: %s", line);
    cr_log_info("%s", line);
}

Test(ops, stats_and_metrics_count_a_known_workload, .fini = teardown, .timeout = 60)
{
    /* One service thread: every figure is then exact for the workload (pushes count once
     * per thread that has the group online; test_threads.c checks the sums over threads). */
    static const char *const args[] = {"--ack-flush-ms", "50", "--threads", "1", NULL};
    gwfx_start(&f, args);
    gwc_conn *k[3];
    gwfx_login_joined(&f, "trio", 3, (const char *const[]){"alice", "bob", "carol"}, k);
    gwc_conn *a = k[0], *b = k[1], *c = k[2];
    gwc_close(c); /* 3 members, 2 online */
    for (int i = 1; i <= 10; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "c%d", i);
        gwfx_send_msg(a, "trio", cid, "hello");
    }
    for (int i = 1; i <= 10; i++)
        cr_assert_eq(gwfx_expect(b, PR_EV_MSG).msg.mid, (uint64_t)i);
    ack(b, "trio", 5);
    ack(b, "trio", 10);
    /* A bad request, and a page of 4 for carol when she is back. */
    const uint8_t junk[] = {0xc1};
    gwc_send_raw(b, junk, 1, false);
    gwfx_expect(b, PR_EV_ERR);
    c = gwfx_login(&f, "carol", NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_enter(&sb, 1, gwfx_sl("trio"), 4);
    pr_event page = gwfx_request(c, &sb, PR_EV_PAGE);
    cr_assert_eq(page.n_items, 4);
    msgpack_sbuffer_destroy(&sb);
    usleep(300 * 1000); /* > the ack flush interval */

    json_t *j = stats();
    /* Exact figures; figures that must have moved. */
    static const struct {
        const char *group, *key;
        long long want;
        const char *why;
    } exact[] = {
        {"messages", "stored", 10, ""},
        {"messages", "sends", 10, ""},
        {"messages", "pushes", 10, ""},
        {"messages", "deliveries", 10, "one other online member"},
        {"acks", "received", 2, ""},
        {"acks", "frames", 2, ""},
        {"acks", "deliveries_per_ack_frame", 5, ""},
        {"pages", "served", 1, ""},
        {"pages", "messages", 4, ""},
        {"errors", "bad_frame", 1, ""},
        {"connections", "now", 3, ""},
        {"sessions", "authenticated", 3, ""},
        {NULL, "users_online", 3, ""},
        {"groups", "total", 1, ""},
        /* Lag of online members: alice never acked (10), bob is at 10 (0), carol at 0 (10). */
        {"lag", "members", 3, ""},
        {"lag", "total", 20, ""},
        {"lag", "max", 10, ""},
        {"store", "writable", 1, ""},
        {"store", "connected", 1, ""},
        {"store", "reconnects", 0, ""},
        {"store", "reads", 5, "a user's groups 4 times, 1 page"},
    };
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
        long long got = fig(j, exact[i].group, exact[i].key);
        cr_assert_eq(got, exact[i].want, "/stats %s.%s is %lld, not %lld %s",
                     exact[i].group ? exact[i].group : "", exact[i].key, got, exact[i].want,
                     exact[i].why);
    }
    static const struct {
        const char *group, *key;
    } moved[] = {
        {"acks", "writes"},
        {"store", "commits"},
        {"store", "disk_bytes"},
        {"traffic", "bytes_in"},
    };
    for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++)
        cr_assert_gt(fig(j, moved[i].group, moved[i].key), 0, "/stats %s.%s is 0", moved[i].group,
                     moved[i].key);
    /* Which backend, and how it does: connected, reads (4 sign-ins, 1 page) and their
     * latency, commits with their messages. */
    const char *backend =
        json_string_value(json_object_get(json_object_get(j, "store"), "backend"));
    cr_assert_str_eq(backend ? backend : "", pgfx_on() ? "postgres" : "rocksdb");
    cr_assert_gt(figf(j, "store", "read_p99_ms"), 0);
    cr_assert_gt(figf(j, "store", "messages_per_commit"), 0);
    /* The loop's own lag: every iteration timed, the longest ones kept. */
    cr_assert_gt(fig(j, "loop", "iterations"), 20, "a session's requests take iterations");
    cr_assert_leq(fig(j, "loop", "over_10ms"), fig(j, "loop", "over_1ms"));
    cr_assert_leq(fig(j, "loop", "over_1ms"), fig(j, "loop", "iterations"));
    cr_assert_gt(figf(j, "loop", "stall_max_ms"), 0);
    cr_assert_leq(figf(j, "loop", "stall_recent_ms"), figf(j, "loop", "stall_max_ms"));
    json_decref(j);

    metrics_check("gw_messages_stored=10 gw_sends_total=10 gw_deliveries_total=10 "
                  "gw_pushes_total=10 gw_acks_received_total=2 gw_ack_frames_total=2 "
                  "gw_pages_served_total=1 gw_page_messages_total=4 "
                  "'gw_errors_total{code=\"bad_frame\"}=1' gw_connections=3 "
                  "gw_member_ack_lag_messages=20 gw_store_writable=1 gw_store_connected=1 "
                  "gw_store_read_duration_seconds_count=5");
}

Test(ops, health_demo_login_and_page, .fini = teardown, .timeout = 60)
{
    char web[320];
    snprintf(web, sizeof(web), "%s/web-demo", GW_SOURCE_DIR);
    const char *const args[] = {"--demo", "--web-root", web, NULL};
    gwfx_start(&f, args);
    int status;
    char *body = gwfx_http(&f, "/healthz", NULL, &status);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(body, "ok\n");
    free(body);
    body = gwfx_http(&f, "/", NULL, &status);
    cr_assert_eq(status, 200);
    cr_assert_not_null(strstr(body, "<html"));
    free(body);
    body = gwfx_http(&f, "/../../etc/passwd", NULL, &status);
    cr_assert_eq(status, 404);
    free(body);
    body = gwfx_http(&f, "/nope.html", NULL, &status);
    cr_assert_eq(status, 404);
    free(body);

    /* A demo token signs in like any token. */
    body = gwfx_http(&f, "/demo/login", "{\"user\":\"dora\"}", &status);
    cr_assert_eq(status, 200, "%s", body);
    json_t *j = json_loads(body, 0, NULL);
    free(body);
    const char *tok = json_string_value(json_object_get(j, "token"));
    cr_assert_not_null(tok);
    gwc_conn *k = gwfx_connect_raw(&f);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, gwfx_sl(tok));
    pr_event ev = gwfx_request(k, &sb, PR_EV_WELCOME);
    cr_assert(gwfx_slice_is(ev.welcome.uid, "dora"));
    msgpack_sbuffer_destroy(&sb);
    json_decref(j);
    body = gwfx_http(&f, "/demo/login", "{\"user\":\"no spaces\"}", &status);
    cr_assert_eq(status, 400);
    free(body);
}

Test(ops, no_demo_login_unless_asked, .fini = teardown)
{
    gwfx_start(&f, NULL);
    int status;
    char *body = gwfx_http(&f, "/demo/login", "{\"user\":\"dora\"}", &status);
    cr_assert_eq(status, 404);
    free(body);
}

/* Runs gw with args; returns its exit code and what it printed on stderr. */
static int run_gw(const char *args, char *err, size_t n)
{
    return trun(err, n, "%s %s 2>&1 >/dev/null", GW_BINARY, args);
}

Test(ops, bad_flags_are_refused_with_a_reason)
{
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"--port 70000", "--port"},
        {"--port http", "--port"},
        {"--page-default 600 --page-max 500", "--page-default"},
        {"--cert /tmp/x.pem", "--cert and --key"},
        {"--insecure --cert a --key b", "--insecure"},
        {"--max-body 300000", "--max-body"},
        {"--queue-cap 0", "--queue-cap"},
        {"--frobnicate", "--help"},
        {"stray-argument", "stray-argument"},
        {"--rate-sends -1", "--rate-sends"},
        {"--rate-burst 0", "--rate-burst"},
        {"--rate-bytes 1000", "--rate-bytes"}, /* ten seconds of it hold less than a frame */
        {"--rate-conns 2000000", "--rate-conns"},
        {"--handshake-timeout 0", "--handshake-timeout"},
        {"--threads 0", "--threads"},
        {"--threads 65", "--threads"},
    };
    char err[2048];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run_gw(cases[i].args, err, sizeof(err));
        cr_assert_eq(rc, 2, "gw %s: exit %d", cases[i].args, rc);
        cr_assert_not_null(strstr(err, cases[i].says), "gw %s said: %s", cases[i].args, err);
    }
    cr_assert_eq(run_gw("--help", err, sizeof(err)), 0);
}

Test(ops, graceful_stop_during_sends_and_acks, .fini = teardown, .timeout = 60)
{
    gwfx_start(&f, NULL);
    gwc_conn *a, *b;
    gwfx_login_two(&f, "sender", &f, "reader", "g", &a, &b);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    static uint64_t confirmed[2001];
    int next = 1, n_confirmed = 0;
    uint64_t held = 0, last_ack = 0;
    /* Stream: sends in flight, the reader acking every 10 messages. */
    while (next <= 600) {
        for (int i = 0; i < 20; i++, next++) {
            char cid[16];
            snprintf(cid, sizeof(cid), "m%d", next);
            sb.size = 0;
            pr_enc_send(&sb, (uint64_t)next, gwfx_sl("g"), gwfx_sl(cid),
                        (pr_body){gwfx_sl(cid), false});
            gwfx_send(a, &sb);
        }
        pr_event ev;
        while (gwc_next(a, 5, &ev) == 0)
            if (ev.t == PR_EV_SENT)
                confirmed[ev.rid] = ev.mid, n_confirmed++;
        while (gwc_next(b, 0, &ev) == 0)
            if (ev.t == PR_EV_MSG && ev.msg.mid == held + 1)
                held++;
        if (held >= last_ack + 10) {
            ack(b, "g", held);
            last_ack = held;
        }
    }
    gwc_service(f.ctx, 0); /* the last ack and sends are on the wire */
    kill(f.pid, SIGTERM);
    pr_event ev;
    int rc;
    while ((rc = gwc_next(a, GWFX_WAIT, &ev)) == 0)
        if (ev.t == PR_EV_SENT)
            confirmed[ev.rid] = ev.mid, n_confirmed++;
    cr_assert_eq(gwc_close_code(a), 1001);
    while ((rc = gwc_next(b, GWFX_WAIT, &ev)) == 0)
        ;
    cr_assert_eq(gwc_close_code(b), 1001);
    msgpack_sbuffer_destroy(&sb);
    gwfx_wait_exit(&f);

    /* Every `sent` is stored under its mid; the stored ack is the last one sent. */
    st_store *s = gwfx_open_store(&f);
    uint64_t stored_ack = 0, last_mid = 0;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("reader"), &stored_ack), 0);
    cr_assert_eq(st_read_last_mid(s, st_id_str("g"), &last_mid), 0);
    for (int i = 1; i < next; i++) {
        if (!confirmed[i])
            continue;
        st_page *p;
        cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, confirmed[i] - 1, 1, &p), 0);
        cr_assert_eq(st_page_count(p), 1, "m%d confirmed as %lu is missing", i,
                     (unsigned long)confirmed[i]);
        st_page_free(p);
    }
    st_close(s);
    cr_log_info("ops: %d sends, %d confirmed, %lu stored; last ack sent %lu, stored %lu", next - 1,
                n_confirmed, (unsigned long)last_mid, (unsigned long)last_ack,
                (unsigned long)stored_ack);
    cr_assert_eq((uint64_t)n_confirmed, last_mid, "stored and confirmed differ");
    cr_assert_eq(stored_ack, last_ack);
}
