/*
 * The gateway on PostgreSQL when the database is away: down at start (the gateway starts
 * anyway, /healthz says why, and it connects once the database is up), going away under
 * open sessions (they stay open, writes and reads get `unavailable`, and a resend with
 * the same cid is stored once), and two gateways appending to one group of one database.
 * Each test that stops the database runs a server of its own; they run in the suite's
 * PostgreSQL pass only. On RocksDB, whose folder is one process's, a second gateway on a
 * data folder in use is refused with what to do.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "trun.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The test's gateways and server: cleaned up by the suite's fini, also after a failed
 * assertion (none of it may outlive the test). */
static gwfx fa, fb;
static pgfx_server db;

static void teardown(void)
{
    gwfx_cleanup(&fb); /* fb shares fa's client context: before fa */
    gwfx_cleanup(&fa);
    pgfx_server_cleanup(&db);
}

TestSuite(database, .fini = teardown);

Test(database, down_at_start_the_gateway_waits_for_it, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    pgfx_server_start(&db);
    char *url = pgfx_server_db_new(&db);
    pgfx_server_stop(&db);
    gwfx *f = &fa;
    gwfx_start_on(f, url, NULL);
    char *body = gwfx_wait_health(f, 503);
    /* It says no more than that: the detail names the database's host and user. */
    cr_assert_str_eq(body, "store unavailable\n", "/healthz: %s", body);
    cr_assert(gwfx_log_has(f, "/healthz: 503, the store does not accept writes: cannot connect "
                              "to the database"),
              "the log tells why");
    free(body);
    int status = 0;
    body = gwfx_http(f, "/stats", NULL, &status);
    cr_assert_eq(status, 200);
    cr_assert(strstr(body, "\"backend\": \"postgres\"") && strstr(body, "\"connected\": 0"),
              "/stats: %s", body);
    free(body);

    /* A hello cannot load the user now: told why, and closed with 4013 (try again). */
    gwc_conn *k = gwfx_connect_raw(f);
    char *tok = gwfx_token("alice");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, gwfx_sl(tok));
    pr_event ev = gwfx_request(k, &sb, PR_EV_ERR);
    cr_assert(gwfx_slice_is(ev.err_name, "unavailable"));
    int code = gwfx_closed(k);
    cr_assert_eq(code, 4013, "closed with %d", code);

    pgfx_server_restart(&db);
    free(gwfx_wait_health(f, 200));
    k = gwfx_login(f, "alice", NULL);
    gwfx_join(k, "room");
    cr_assert_eq(gwfx_send_msg(k, "room", "c1", "hello"), 1);
    msgpack_sbuffer_destroy(&sb);
    free(tok);
    free(url);
}

Test(database, away_under_open_sessions_then_back, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    pgfx_server_start(&db);
    char *url = pgfx_server_db_new(&db);
    gwfx *f = &fa;
    gwfx_start_on(f, url, NULL);
    gwc_conn *k = gwfx_login(f, "alice", NULL);
    gwfx_join(k, "room");
    cr_assert_eq(gwfx_send_msg(k, "room", "c1", "one"), 1);

    pgfx_server_stop(&db);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, 2, gwfx_sl("room"), gwfx_sl("c2"), (pr_body){gwfx_sl("two"), false});
    pr_event ev = gwfx_request(k, &sb, PR_EV_ERR);
    cr_assert(gwfx_slice_is(ev.err_name, "unavailable"), "send: %.*s", (int)ev.err_name.n,
              ev.err_name.p);
    cr_assert_eq(ev.rid, 2);
    sb.size = 0;
    pr_enc_pull(&sb, 3, gwfx_sl("room"), false, 0, 0);
    ev = gwfx_request(k, &sb, PR_EV_ERR);
    cr_assert(gwfx_slice_is(ev.err_name, "unavailable"), "pull: %.*s", (int)ev.err_name.n,
              ev.err_name.p);
    char *body = gwfx_wait_health(f, 503);
    free(body);

    pgfx_server_restart(&db);
    free(gwfx_wait_health(f, 200));
    /* The same session, still open: the resend is stored once, after c1. */
    sb.size = 0;
    pr_enc_send(&sb, 4, gwfx_sl("room"), gwfx_sl("c2"), (pr_body){gwfx_sl("two"), false});
    ev = gwfx_request(k, &sb, PR_EV_SENT);
    cr_assert_eq(ev.mid, 2);
    sb.size = 0;
    pr_enc_send(&sb, 5, gwfx_sl("room"), gwfx_sl("c2"), (pr_body){gwfx_sl("two"), false});
    ev = gwfx_request(k, &sb, PR_EV_SENT);
    cr_assert_eq(ev.mid, 2, "a resend of c2 is answered with its first mid");
    sb.size = 0;
    pr_enc_pull(&sb, 6, gwfx_sl("room"), false, 0, 0);
    ev = gwfx_request(k, &sb, PR_EV_PAGE);
    cr_assert_eq(ev.n_items, 2);
    cr_assert_eq(ev.last_mid, 2);
    body = gwfx_http(f, "/metrics", NULL, &(int){0});
    cr_assert(strstr(body, "gw_store_reconnects_total "), "%s", body);
    cr_assert_null(strstr(body, "gw_store_reconnects_total 0\n"), "a reconnect is counted");
    free(body);
    msgpack_sbuffer_destroy(&sb);
    free(url);
}

Test(database, two_gateways_append_to_one_group, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    gwfx_start(&fa, NULL); /* its own new database */
    gwfx_start_beside(&fb, &fa, NULL);
    gwc_conn *ka, *kb;
    gwfx_login_two(&fa, "alice", &fb, "bob", "room", &ka, &kb);
    enum { N = 300 };
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int i = 1; i <= N; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "c%d", i);
        sb.size = 0;
        pr_enc_send(&sb, (uint64_t)i, gwfx_sl("room"), gwfx_sl(cid),
                    (pr_body){gwfx_sl("a"), false});
        gwfx_send(ka, &sb);
        sb.size = 0;
        pr_enc_send(&sb, (uint64_t)i, gwfx_sl("room"), gwfx_sl(cid),
                    (pr_body){gwfx_sl("b"), false});
        gwfx_send(kb, &sb);
    }
    /* Every mid given once, and together they are 1..2N. */
    static uint8_t seen[2 * N + 1];
    memset(seen, 0, sizeof(seen));
    gwc_conn *ks[2] = {ka, kb};
    for (int w = 0; w < 2; w++)
        for (int got = 0; got < N;) {
            pr_event ev;
            cr_assert_eq(gwc_next(ks[w], GWFX_WAIT, &ev), 0);
            if (ev.t == PR_EV_MSG)
                continue; /* pushes: of the other sender's messages */
            cr_assert_eq(ev.t, PR_EV_SENT);
            cr_assert(ev.mid >= 1 && ev.mid <= 2 * N, "mid %lu", (unsigned long)ev.mid);
            cr_assert_eq(seen[ev.mid], 0, "mid %lu given twice", (unsigned long)ev.mid);
            seen[ev.mid] = 1;
            got++;
        }
    /* Read back through either gateway: one dense run, both senders in it. */
    int from_b = 0;
    for (uint64_t after = 0; after < 2 * N;) {
        sb.size = 0;
        pr_enc_pull(&sb, 999, gwfx_sl("room"), false, after, 500);
        gwfx_send(ka, &sb);
        pr_event ev;
        do /* bob's messages, pushed to alice through the cluster, come first */
            ev = gwfx_expect_any(ka);
        while (ev.t == PR_EV_MSG);
        cr_assert_eq(ev.t, PR_EV_PAGE);
        cr_assert_gt(ev.n_items, 0);
        for (size_t i = 0; i < ev.n_items; i++) {
            pr_message m;
            cr_assert_eq(pr_event_message(&ev, i, &m), 0);
            cr_assert_eq(m.mid, after + 1 + i);
            from_b += gwfx_slice_is(m.from, "bob");
        }
        after += ev.n_items;
        cr_assert_eq(ev.last_mid, 2 * N);
    }
    cr_assert_eq(from_b, N);
    msgpack_sbuffer_destroy(&sb);
}

Test(database, a_second_gateway_on_a_data_folder_in_use_says_so_and_what_to_do, .timeout = 60)
{
    gwfx_rocksdb_only("RocksDB keeps its folder to one process; PostgreSQL takes many gateways");
    gwfx_start(&fa, NULL);
    char data[300], out[4096];
    snprintf(data, sizeof(data), "%s/data", fa.dir);
    /* timeout: were it to start, it would run on. */
    int rc = trun(out, sizeof(out),
                  "GW_SECRET=%s timeout 20 %s --listen 127.0.0.1 --port 0 --data %s --insecure "
                  "--log-level 3 2>&1",
                  GWFX_SECRET, GW_BINARY, data);
    cr_assert_eq(rc, 1, "exits 1 (%d): %s", rc, out);
    char holder[32];
    snprintf(holder, sizeof(holder), "process %d ", (int)fa.pid);
    cr_assert(strstr(out, "in use by another gateway") && strstr(out, holder),
              "says another gateway (by its pid) holds it: %s", out);
    cr_assert(strstr(out, data) && strstr(out, "stop that gateway") && strstr(out, "--data"),
              "names the folder and what to do: %s", out);
    cr_assert_null(strstr(out, "Resource temporarily unavailable"), "%s", out);
    cr_assert(gwfx_alive(&fa), "the first gateway runs on");
}
