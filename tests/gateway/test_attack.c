/* The attack tool (tools/gw_attack) run briefly against the real gateway, so that it does
 * not rot: a short typing flood and a few pipelined bad requests. It must run, stop by
 * itself, and print its figures (what it sent, the server's RSS, descriptors and CPU,
 * the attacker's outcome, the legitimate group's latency) and its table row; the gateway
 * must then stop cleanly. No figure is asserted beyond its presence: those are measured
 * by tools/bench/attacks.sh. */
#include "gwfx.h"
#include "trun.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

static gwfx f;

static void teardown(void)
{
    gwfx_cleanup(&f); /* SIGTERM: must exit 0 (under the sanitizer: no report, no leak) */
}

/* Runs gw_attack ATTACK with options against f; its whole output in out. */
static void run_attack(const char *attack, const char *opts, char *out, size_t cap)
{
    char bin[512], dirbuf[512];
    snprintf(dirbuf, sizeof(dirbuf), "%s", GW_BINARY);
    snprintf(bin, sizeof(bin), "%s/tools/gw_attack", dirname(dirbuf));
    int rc = trun(out, cap, "GW_SECRET=%s %s --url %s --server-pid %d --row %s %s 2>&1",
                  GWFX_SECRET, bin, f.url, (int)f.pid, opts, attack);
    cr_log_info("gw_attack %s:\n%s", attack, out);
    cr_assert_eq(rc, 0, "gw_attack %s failed:\n%s", attack, out);
    char head[64];
    snprintf(head, sizeof(head), "attack %s\n", attack);
    cr_assert(strstr(out, head), "no report:\n%s", out);
    long rss0 = 0, peak = 0;
    const char *srv = strstr(out, "server:   RSS ");
    cr_assert(srv && sscanf(srv, "server:   RSS %ld.%*d -> peak %ld", &rss0, &peak) == 2,
              "no server figures:\n%s", out);
    cr_assert_gt(peak, 0);
    cr_assert(strstr(out, "  sent:     ") && strstr(out, "  attacker: ") &&
                  strstr(out, "  legit:    "),
              "a figure is missing:\n%s", out);
    /* The row: attack | RSS | fds | CPU | legit | outcome, between bars. */
    const char *row = strstr(out, "ROW | ");
    cr_assert_not_null(row, "no table row:\n%s", out);
    int bars = 0;
    for (const char *q = row; *q && *q != '\n'; q++)
        bars += *q == '|';
    cr_assert_eq(bars, 7, "a row of 6 cells: %.*s", (int)strcspn(row, "\n"), row);
}

Test(attack, a_short_typing_flood_and_pipelined_errors_are_measured, .fini = teardown,
     .timeout = 120)
{
    static char out[8192];
    gwfx_start(&f, NULL);
    run_attack("typing", "--seconds 1 --members 3 --groups 2 --legit-rate 10", out, sizeof(out));
    cr_assert(strstr(out, "typing sent in"), "%s", out);
    run_attack("pipelined", "--tries 1 --bad 30", out, sizeof(out));
    cr_assert(strstr(out, "30 bad requests in one write"), "%s", out);
}
