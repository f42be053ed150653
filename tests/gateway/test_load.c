/* A short load through the real load generator: 300 sessions in groups of 100, two
 * senders flat out for three seconds, over ws:// and over wss:// (the load generator's
 * own WebSocket client, tools/common/load_ws.c, has a TLS path of its own). Everything sent is
 * confirmed and delivered to every member, the generator's counts agree exactly with the
 * gateway's /stats, and the gateway then stops cleanly (under the sanitizer build: with
 * no report and no leak, since it must exit 0). */
#include "gwfx.h"
#include "loadreport.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static gwfx f;

static void teardown(void)
{
    gwfx_cleanup(&f); /* SIGTERM: must exit 0; also when an assertion failed */
}

static long long stat_of(json_t *j, const char *group, const char *key)
{
    json_t *v = json_object_get(json_object_get(j, group), key);
    cr_assert(json_is_integer(v), "/stats has no %s.%s", group, key);
    return json_integer_value(v);
}

static void run_load(void)
{
    char bin[512], dirbuf[512], cmd[1400], line[1024], report[1024] = "";
    snprintf(dirbuf, sizeof(dirbuf), "%s", GW_BINARY);
    snprintf(bin, sizeof(bin), "%s/tools/gw_load", dirname(dirbuf));
    snprintf(cmd, sizeof(cmd),
             "GW_SECRET=%s %s --url %s --sessions 300 --group-size 100 --senders 2 "
             "--seconds 3 --json --server-pid %d 2>/dev/null",
             GWFX_SECRET, bin, f.url, (int)f.pid);
    FILE *p = popen(cmd, "r");
    while (fgets(line, sizeof(line), p))
        if (line[0] == '{')
            snprintf(report, sizeof(report), "%s", line);
    int st = pclose(p);
    cr_log_info("load over %s: %s", f.tls ? "wss" : "ws", report);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gw_load failed: %s", report);
    unsigned long sends = loadreport_field(report, "sends"),
                  confirmed = loadreport_field(report, "confirmed"),
                  deliveries = loadreport_field(report, "deliveries");
    cr_assert_gt(sends, 0);
    cr_assert_eq(confirmed, sends);
    cr_assert_eq(loadreport_field(report, "errors"), 0);
    cr_assert_eq(loadreport_field(report, "notifies"), 0);
    /* Each message goes to the 100 members of its group and to the other sender (senders
     * join every group; the sending session itself gets no push). */
    cr_assert_eq(deliveries, 101 * confirmed, "deliveries %lu for %lu messages", deliveries,
                 confirmed);

    /* The gateway counted the same: every send stored and confirmed, every delivery. */
    int status;
    char *body = gwfx_http(&f, "/stats", NULL, &status);
    cr_assert_eq(status, 200, "GET /stats: %d", status);
    json_error_t jerr;
    json_t *j = json_loads(body, 0, &jerr);
    free(body);
    cr_assert_not_null(j, "/stats is not JSON: %s", jerr.text);
    cr_assert_eq(stat_of(j, "messages", "sends"), (long long)confirmed);
    cr_assert_eq(stat_of(j, "messages", "stored"), (long long)confirmed);
    cr_assert_eq(stat_of(j, "messages", "deliveries"), (long long)deliveries);
    json_decref(j);
}

/* Flat-out senders are over the default send rate by design (see test_rate.c), and 302
 * sessions from one address over the default cap of open connections (test_exposed.c). And the
 * sessions' queues are long enough for the whole run: with a service thread per core the
 * gateway can push faster than the one load generator reads while another test shares
 * the cores, and a session more than 1,024 pushes behind would rightly be switched to
 * notify (test_slow.c), which is not what this test is about. */
static const char *const unlimited[] = {
    "--rate-sends",  "0",         "--rate-bytes",        "0", "--queue-cap", "200000",
    "--queue-bytes", "268435456", "--conns-per-address", "0", NULL};

Test(load, three_seconds_of_fan_out, .fini = teardown, .timeout = 180)
{
    gwfx_start(&f, unlimited);
    run_load();
}

Test(load, three_seconds_of_fan_out_over_wss, .fini = teardown, .timeout = 180)
{
    gwfx_start_tls(&f, unlimited);
    run_load();
}
