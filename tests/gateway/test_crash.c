/* The crash-and-verify harness (tools/gw_crash) in short runs: the gateway is killed with
 * SIGKILL five times under senders and receivers (on the suite's backend); on PostgreSQL
 * also the database, restarted with pg_ctl restart -m immediate three times under a
 * gateway that keeps running; a cluster of three nodes of which one at random is killed
 * six times; two failovers of a primary to its synchronous standby under two nodes;
 * node kills with automatic failovers (Patroni) between them, under three nodes; and a
 * sharded store (two shards, four groups) with node kills and slot moves, or with one
 * shard's leader killed while the other shard's groups keep going.
 * Nothing confirmed may be lost, duplicated or reordered, and stored acks stay within the
 * flush window. */
#include "harness.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs gw_crash with extra arguments; returns its last line. On failure the last lines of
 * other output (a sanitizer's report, a crash) are logged too. */
static void run(const char *extra, char *last, size_t last_n)
{
    static const char *const summary[] = {"gw_crash:", NULL};
    int st = harness_run("gw_crash", extra, 0, summary, NULL, last, last_n);
    cr_assert_eq(st, 0, "gw_crash failed (status %d): %s", st, last);
    cr_assert_not_null(strstr(last, "losses 0"), "%s", last);
}

/* With edits and recalls mixed in (--edits): every message ends as the version its sender
 * saw confirmed. */
Test(crash, five_kills_lose_nothing, .timeout = 300)
{
    char extra[600] = "--kills 5 --edits", last[512];
    char *url = pgfx_on() ? pgfx_db_new() : NULL;
    if (url)
        snprintf(extra, sizeof(extra), "--kills 5 --edits --store %s", url);
    run(extra, last, sizeof(last));
    cr_assert_gt(harness_figure(last, " versions confirmed"), 0, "%s", last);
    cr_assert_gt(harness_figure(last, " messages checked"), 0, "%s", last);
    if (url) {
        pgfx_db_drop(url);
        free(url);
    }
}

/* The test's own server: stopped by the fini also after a failed assertion. */
static pgfx_server srv;

static void stop_server(void)
{
    pgfx_server_cleanup(&srv);
}

Test(crash, three_database_restarts_lose_nothing, .fini = stop_server, .timeout = 300)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
    pgfx_server_start(&srv);
    char *url = pgfx_server_db_new(&srv);
    char extra[800], last[512];
    snprintf(extra, sizeof(extra), "--kills 3 --store %s --kill db --pg-dir %s", url, srv.dir);
    run(extra, last, sizeof(last));
    /* The restarts happened under load: some sends were refused and sent again. */
    cr_assert_null(strstr(last, " 0 sends refused"), "%s", last);
    free(url);
}

Test(crash, six_kills_of_random_nodes_of_three_lose_nothing, .timeout = 300)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
    char *url = pgfx_db_new();
    char extra[800], last[512];
    snprintf(extra, sizeof(extra), "--nodes 3 --kills 6 --edits --store %s", url);
    run(extra, last, sizeof(last));
    cr_assert_eq(harness_figure(last, " node kills"), 6, "%s", last);
    cr_assert_gt(harness_figure(last, " versions confirmed"), 0, "%s", last);
    /* Receivers got messages pushed from senders on other nodes, and in mid order. */
    cr_assert_gt(harness_figure(last, " pushes across nodes"), 0, "%s", last);
    cr_assert_eq(harness_figure(last, " pushes out of order"), 0, "%s", last);
    /* Clients of the killed nodes signed in again on the others. */
    cr_assert_gt(harness_figure(last, " reconnects"), 0, "%s", last);
    pgfx_db_drop(url);
    free(url);
}

/* The primary and its standby: stopped by the fini also after a failed assertion. */
static pgfx_pair pair;

static void stop_pair(void)
{
    pgfx_pair_cleanup(&pair);
}

Test(crash, two_failovers_of_the_primary_lose_nothing, .fini = stop_pair, .timeout = 300)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
    pgfx_pair_start(&pair);
    char *url = pgfx_pair_db_new(&pair);
    char extra[1200], last[512];
    snprintf(extra, sizeof(extra),
             "--nodes 2 --kills 2 --store '%s' --kill primary --pg-dir %s --pg-standby-dir %s", url,
             pair.a.dir, pair.b.dir);
    run(extra, last, sizeof(last));
    /* Each one rejoined the old primary: after two, a is the primary again, as pair
     * (which the harness does not update) says. */
    cr_assert_eq(harness_figure(last, " failovers"), 2, "%s", last);
    /* The failovers landed under load: writes in flight were refused and sent again. */
    cr_assert_gt(harness_figure(last, " sends refused"), 0, "%s", last);
    cr_assert_eq(harness_figure(last, " pushes out of order"), 0, "%s", last);
    free(url);
}

Test(crash, node_kills_and_automatic_failovers_under_three_nodes_lose_nothing,
     .fini = harness_ha_stop, .timeout = 400)
{
    char *url = harness_ha_db("each failover waits seconds");
    char extra[1200], last[512];
    /* One failover among the kills: cluster::automatic_failover_under_load_loses_nothing
     * fails the leader over twice; this is about kills and a failover in one run. */
    snprintf(extra, sizeof(extra), "--nodes 3 --kills 4 --failovers 1 --store '%s' --ha-dir %s",
             url, harness_ha.dir);
    run(extra, last, sizeof(last));
    cr_assert_eq(harness_figure(last, " node kills"), 4, "%s", last);
    cr_assert_eq(harness_figure(last, " automatic failovers"), 1, "%s", last);
    cr_assert_gt(harness_figure(last, " sends refused"), 0, "%s", last);
    cr_assert_eq(harness_figure(last, " pushes out of order"), 0, "%s", last);
    free(url);
}

/* Shards of the test's own (tools/pg_server.sh shards-up DIR 2 [ha]), stopped and removed
 * by the fini also after a failed assertion. */
static char shards_dir[64];

static void shards_up(bool ha, char *url, size_t url_n)
{
    pgfx_need(PGFX_ONLY);
    snprintf(shards_dir, sizeof(shards_dir), "/tmp/gw-shards-XXXXXX");
    cr_assert_not_null(mkdtemp(shards_dir));
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "%s/tools/pg_server.sh shards-up %s 2%s 2>&1", GW_SOURCE_DIR,
             shards_dir, ha ? " ha" : "");
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    bool got = fgets(url, (int)url_n, p) != NULL;
    int rc = pclose(p);
    url[strcspn(url, "\n")] = 0;
    cr_assert(got && rc == 0, "%s: %s", cmd, url);
}

static void shards_down(void)
{
    if (!shards_dir[0])
        return;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "%s/tools/pg_server.sh shards-down %s >/dev/null 2>&1; rm -rf %s",
             GW_SOURCE_DIR, shards_dir, shards_dir);
    if (system(cmd) != 0)
        cr_log_warn("%s failed", cmd);
    shards_dir[0] = 0;
}

/* Two plain shards under two nodes: node kills and two slot moves (a group's slot to the
 * other shard and back) under the load; each group checked on the shard the map gives it
 * at the end. */
Test(crash, two_shards_two_nodes_kills_and_a_slot_move_lose_nothing, .fini = shards_down,
     .timeout = 300)
{
    char url[400], extra[800], last[512];
    shards_up(false, url, sizeof(url));
    snprintf(extra, sizeof(extra), "--nodes 2 --shards 2 --kills 2 --moves 2 --store '%s'", url);
    run(extra, last, sizeof(last));
    cr_assert_eq(harness_figure(last, " node kills"), 2, "%s", last);
    cr_assert_eq(harness_figure(last, " slot moves"), 2, "%s", last);
    cr_assert_eq(harness_figure(last, " stored twice"), 0, "%s", last);
    cr_assert_eq(harness_figure(last, " pushes out of order"), 0, "%s", last);
    /* The moves landed under load: writes of the moving slot were refused and resent. */
    cr_assert_gt(harness_figure(last, " sends refused"), 0, "%s", last);
}

/* Two Patroni pairs as shards: shard 0's leader killed under two nodes; its groups stall
 * until Patroni promotes the replica, shard 1's keep confirming all along. */
Test(crash, a_shard_failover_stalls_only_its_shard, .fini = shards_down, .timeout = 400)
{
#ifdef GW_TEST_SANITIZED
    cr_skip_test("the normal build's PostgreSQL pass runs it (a failover waits seconds)");
#endif
    char url[400], extra[800], last[512];
    shards_up(true, url, sizeof(url));
    snprintf(extra, sizeof(extra),
             "--nodes 2 --shards 2 --kills 0 --failovers 1 --ha-dir %s --store '%s'", shards_dir,
             url);
    /* Its line: "automatic failover 1 of shard 0: writes back ... 12.3 s after the leader's
     * kill; meanwhile the other shards confirmed N messages, longest gap G s; ...". The
     * exit status says the rest (0: nothing lost or stored twice, no failover that stalled
     * the other shards). */
    static const char *const failover[] = {"gw_crash: automatic failover 1 of shard 0", NULL};
    int st = harness_run("gw_crash", extra, 0, failover, NULL, last, sizeof(last));
    cr_assert_eq(st, 0, "gw_crash failed (status %d): %s", st, last);
    cr_assert_gt(harness_figure(last, " messages, longest gap"), 0, "%s", last);
    cr_assert_not_null(strstr(last, "after the leader's kill"), "%s", last);
}
