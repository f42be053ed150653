/* A short load through the real load generator: 300 sessions in groups of 100, two
 * senders flat out for three seconds. Everything sent is confirmed and delivered to
 * every member, and the gateway then stops cleanly (under the sanitizer build: with no
 * report and no leak, since it must exit 0). */
#include "gwfx.h"

#include <criterion/criterion.h>
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

Test(load, three_seconds_of_fan_out, .fini = teardown, .timeout = 180)
{
    gwfx_start(&f, NULL);
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
    cr_log_info("load: %s", report);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gw_load failed: %s", report);
    unsigned long sends = 0, confirmed = 0, deliveries = 0, errors = 1;
    const char *s = strstr(report, "\"sends\":"), *c = strstr(report, "\"confirmed\":"),
               *d = strstr(report, "\"deliveries\":"), *e = strstr(report, "\"errors\":");
    cr_assert(s && c && d && e, "no report: %s", report);
    sscanf(s, "\"sends\":%lu", &sends);
    sscanf(c, "\"confirmed\":%lu", &confirmed);
    sscanf(d, "\"deliveries\":%lu", &deliveries);
    sscanf(e, "\"errors\":%lu", &errors);
    cr_assert_gt(sends, 0);
    cr_assert_eq(confirmed, sends);
    cr_assert_eq(errors, 0);
    /* Each message goes to the 100 members of its group and to the other sender (senders
     * join every group; the sending session itself gets no push). */
    cr_assert_eq(deliveries, 101 * confirmed, "deliveries %lu for %lu messages", deliveries,
                 confirmed);
}
