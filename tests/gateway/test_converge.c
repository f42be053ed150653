/* The convergence checker (tools/gw_converge) in short runs, on the suite's backend: client
 * replicas that keep what they receive live through sends, edits, recalls, reactions,
 * erasures, retention passes, offline spans and gateway kills (on PostgreSQL over two
 * nodes, and with an automatic failover under Patroni), and each must end equal to the
 * server read through the API, with nothing confirmed lost. And the checker can fail:
 * a replica that drops one change is reported divergent. */
#include "harness.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const summary[] = {"gw_converge: ok ", "gw_converge: DIVERGED ",
                                      "gw_converge: FAILED", NULL};

/* Runs gw_converge with args on the suite's backend (on PostgreSQL a new database, dropped
 * afterwards, and two nodes on it); returns its exit status and its last line
 * ("gw_converge: ok ..." with the totals). Its catch-up lines are dropped; other lines
 * are logged when the status is not `expect`. */
static int converge(const char *args, int expect, char *last, size_t last_n)
{
    char extra[900];
    char *url = pgfx_on() ? pgfx_db_new() : NULL;
    snprintf(extra, sizeof(extra), "%s%s%s", args, url ? " --nodes 2 --store " : "",
             url ? url : "");
    int st =
        harness_run("gw_converge", extra, expect, summary, "gw_converge: catch-up ", last, last_n);
    if (url) {
        pgfx_db_drop(url);
        free(url);
    }
    return st;
}

/* gw_converge ended well: status 0, no replica divergent, no confirmed message lost. */
static void assert_converged(int st, const char *last)
{
    cr_assert_eq(st, 0, "gw_converge failed (%d): %s", st, last);
    cr_assert_eq(harness_figure(last, " divergent replicas"), 0, "%s", last);
    cr_assert_eq(harness_figure(last, " lost messages"), 0, "%s", last);
}

Test(converge, replicas_converge_through_kills_erasures_and_retention, .timeout = 300)
{
    char last[1024];
    int st =
        converge("--ops 500 --kills 3 --replicas 4 --groups 3 --seed 36", 0, last, sizeof(last));
    assert_converged(st, last);
    cr_assert_eq(harness_figure(last, " kills"), 3, "%s", last);
    /* What was exercised: every kind of change, and catch-ups that carried changes. */
    static const char *const exercised[] = {" confirmed",
                                            " edits",
                                            " recalls",
                                            " reactions",
                                            " erasures",
                                            " retention changes",
                                            " offline spans",
                                            " catch-ups carried",
                                            " changes for",
                                            " messages checked",
                                            NULL};
    for (int i = 0; exercised[i]; i++)
        cr_assert_gt(harness_figure(last, exercised[i]), 0, "no%s: %s", exercised[i], last);
}

/* A change log kept short (--retain-changes 5): replicas away for a while get
 * changes_gone_before and page their window again, and still converge. */
Test(converge, replicas_past_the_change_horizon_repage_and_converge, .timeout = 300)
{
    char last[1024];
    int st = converge("--ops 400 --kills 1 --retain-changes 5 --seed 7", 0, last, sizeof(last));
    assert_converged(st, last);
    cr_assert_gt(harness_figure(last, " answered changes_gone_before"), 0, "%s", last);
}

/* The checker can fail: one replica drops one change (a recall) and is reported. */
Test(converge, a_replica_that_skips_a_change_is_reported_divergent, .timeout = 300)
{
    char last[1024];
    int st = converge("--ops 200 --kills 1 --seed 5 --inject-skip-change", 1, last, sizeof(last));
    cr_assert_eq(st, 1, "gw_converge should have found the divergence (%d): %s", st, last);
    cr_assert_not_null(strstr(last, "DIVERGED"), "%s", last);
    cr_assert_eq(harness_figure(last, " changes skipped"), 1, "%s", last);
    cr_assert_eq(harness_figure(last, " divergent replicas"), 1, "%s", last);
}

Test(converge, replicas_converge_through_an_automatic_failover_under_two_nodes,
     .fini = harness_ha_stop, .timeout = 400)
{
    char *url = harness_ha_db("a failover waits seconds");
    char extra[1200], last[1024];
    snprintf(extra, sizeof(extra),
             "--nodes 2 --ops 500 --kills 2 --failovers 1 --seed 11 --store '%s' --ha-dir %s", url,
             harness_ha.dir);
    int st =
        harness_run("gw_converge", extra, 0, summary, "gw_converge: catch-up ", last, sizeof(last));
    assert_converged(st, last);
    cr_assert_eq(harness_figure(last, " failovers"), 1, "%s", last);
    free(url);
}
