/* The convergence checker (tools/gw_converge) in short runs, on the suite's backend: client
 * replicas that keep what they receive live through sends, edits, recalls, reactions,
 * erasures, retention passes, offline spans and gateway kills (on PostgreSQL over two
 * nodes, and with an automatic failover under Patroni), and each must end equal to the
 * server read through the API, with nothing confirmed lost. And the checker can fail:
 * a replica that drops one change is reported divergent. */
#include "gwfx.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Runs gw_converge with extra arguments; returns its exit status and its last line
 * ("gw_converge: ok ..." with the totals). Other lines are logged when the status is not
 * `expect`: only then, as an error log makes Criterion exit non-zero even when every
 * test passed. */
static int run(const char *extra, int expect, char *last, size_t last_n)
{
    char bin[512], dirbuf[512], cmd[1600], line[1024];
    static char other[24][1100];
    int n_other = 0;
    snprintf(dirbuf, sizeof(dirbuf), "%s", GW_BINARY);
    snprintf(bin, sizeof(bin), "%s/tools/gw_converge", dirname(dirbuf));
    snprintf(cmd, sizeof(cmd), "%s --gw %s %s 2>&1", bin, GW_BINARY, extra);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    last[0] = 0;
    while (fgets(line, sizeof(line), p)) {
        if (strncmp(line, "gw_converge: ok ", 16) == 0 ||
            strncmp(line, "gw_converge: DIVERGED ", 22) == 0 ||
            strncmp(line, "gw_converge: FAILED", 19) == 0)
            snprintf(last, last_n, "%s", line);
        else if (strncmp(line, "gw_converge: catch-up ", 22) != 0)
            snprintf(other[n_other++ % 24], sizeof(other[0]), "%s", line);
    }
    int st = pclose(p);
    cr_log_info("%s", last);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == expect))
        for (int i = n_other > 24 ? n_other - 24 : 0; i < n_other; i++)
            cr_log_error("%s", other[i % 24]);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The figure before `what` in the last line ("... 3 kills, ..."). */
static unsigned long figure(const char *last, const char *what)
{
    const char *p = strstr(last, what);
    cr_assert_not_null(p, "no \"%s\" in: %s", what, last);
    while (p > last && p[-1] == ' ')
        p--;
    while (p > last && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoul(p, NULL, 10);
}

/* The backend's arguments: on PostgreSQL a new database and two nodes on it. */
static char *backend(char *out, size_t n)
{
    char *url = pgfx_on() ? pgfx_db_new() : NULL;
    if (url)
        snprintf(out, n, "--store %s --nodes 2", url);
    else
        out[0] = 0;
    return url;
}

Test(converge, replicas_converge_through_kills_erasures_and_retention, .timeout = 300)
{
    char be[600], extra[900], last[1024];
    char *url = backend(be, sizeof(be));
    snprintf(extra, sizeof(extra), "--ops 500 --kills 3 --replicas 4 --groups 3 --seed 36 %s", be);
    int st = run(extra, 0, last, sizeof(last));
    cr_assert_eq(st, 0, "gw_converge failed (%d): %s", st, last);
    cr_assert_eq(figure(last, " divergent replicas"), 0, "%s", last);
    cr_assert_eq(figure(last, " lost messages"), 0, "%s", last);
    cr_assert_eq(figure(last, " kills"), 3, "%s", last);
    /* What was exercised: every kind of change, and catch-ups that carried changes. */
    cr_assert_gt(figure(last, " confirmed"), 0, "%s", last);
    cr_assert_gt(figure(last, " edits"), 0, "%s", last);
    cr_assert_gt(figure(last, " recalls"), 0, "%s", last);
    cr_assert_gt(figure(last, " reactions"), 0, "%s", last);
    cr_assert_gt(figure(last, " erasures"), 0, "%s", last);
    cr_assert_gt(figure(last, " retention changes"), 0, "%s", last);
    cr_assert_gt(figure(last, " offline spans"), 0, "%s", last);
    cr_assert_gt(figure(last, " catch-ups carried"), 0, "%s", last);
    cr_assert_gt(figure(last, " changes for"), 0, "%s", last);
    cr_assert_gt(figure(last, " messages checked"), 0, "%s", last);
    if (url) {
        pgfx_db_drop(url);
        free(url);
    }
}

/* A change log kept short (--retain-changes 5): replicas away for a while get
 * changes_gone_before and page their window again, and still converge. */
Test(converge, replicas_past_the_change_horizon_repage_and_converge, .timeout = 300)
{
    char be[600], extra[900], last[1024];
    char *url = backend(be, sizeof(be));
    snprintf(extra, sizeof(extra), "--ops 400 --kills 1 --retain-changes 5 --seed 7 %s", be);
    int st = run(extra, 0, last, sizeof(last));
    cr_assert_eq(st, 0, "gw_converge failed (%d): %s", st, last);
    cr_assert_eq(figure(last, " divergent replicas"), 0, "%s", last);
    cr_assert_eq(figure(last, " lost messages"), 0, "%s", last);
    cr_assert_gt(figure(last, " answered changes_gone_before"), 0, "%s", last);
    if (url) {
        pgfx_db_drop(url);
        free(url);
    }
}

/* The checker can fail: one replica drops one change (a recall) and is reported. */
Test(converge, a_replica_that_skips_a_change_is_reported_divergent, .timeout = 300)
{
    char be[600], extra[900], last[1024];
    char *url = backend(be, sizeof(be));
    snprintf(extra, sizeof(extra), "--ops 200 --kills 1 --seed 5 --inject-skip-change %s", be);
    int st = run(extra, 1, last, sizeof(last));
    cr_assert_eq(st, 1, "gw_converge should have found the divergence (%d): %s", st, last);
    cr_assert_not_null(strstr(last, "DIVERGED"), "%s", last);
    cr_assert_eq(figure(last, " changes skipped"), 1, "%s", last);
    cr_assert_eq(figure(last, " divergent replicas"), 1, "%s", last);
    if (url) {
        pgfx_db_drop(url);
        free(url);
    }
}

/* Patroni over etcd: stopped by the fini also after a failed assertion. */
static pgfx_ha ha;

static void stop_ha(void)
{
    pgfx_ha_cleanup(&ha);
}

Test(converge, replicas_converge_through_an_automatic_failover_under_two_nodes, .fini = stop_ha,
     .timeout = 400)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
#ifdef GW_TEST_SANITIZED
    cr_skip_test("the normal build's PostgreSQL pass runs it (a failover waits seconds)");
#endif
    pgfx_ha_start(&ha);
    char *url = pgfx_ha_db_new(&ha);
    char extra[1200], last[1024];
    snprintf(extra, sizeof(extra),
             "--nodes 2 --ops 500 --kills 2 --failovers 1 --seed 11 --store '%s' --ha-dir %s", url,
             ha.dir);
    int st = run(extra, 0, last, sizeof(last));
    cr_assert_eq(st, 0, "gw_converge failed (%d): %s", st, last);
    cr_assert_eq(figure(last, " failovers"), 1, "%s", last);
    cr_assert_eq(figure(last, " divergent replicas"), 0, "%s", last);
    cr_assert_eq(figure(last, " lost messages"), 0, "%s", last);
    free(url);
}
