#include "harness.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define HARNESS_KEPT 24 /* other lines logged on failure: the last ones */

static bool starts_with_any(const char *line, const char *const *prefixes)
{
    for (; prefixes && *prefixes; prefixes++)
        if (strncmp(line, *prefixes, strlen(*prefixes)) == 0)
            return true;
    return false;
}

int harness_run(const char *tool, const char *extra, int expect, const char *const *summary,
                const char *quiet, char *last, size_t last_n)
{
    char bin[512], dirbuf[512], cmd[1600], line[1024];
    static char other[HARNESS_KEPT][1100];
    int n_other = 0;
    snprintf(dirbuf, sizeof(dirbuf), "%s", GW_BINARY);
    snprintf(bin, sizeof(bin), "%s/tools/%s", dirname(dirbuf), tool);
    snprintf(cmd, sizeof(cmd), "%s --gw %s %s 2>&1", bin, GW_BINARY, extra);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", bin);
    last[0] = 0;
    while (fgets(line, sizeof(line), p)) {
        if (starts_with_any(line, summary))
            snprintf(last, last_n, "%s", line);
        else if (!quiet || strncmp(line, quiet, strlen(quiet)) != 0)
            snprintf(other[n_other++ % HARNESS_KEPT], sizeof(other[0]), "%s", line);
    }
    int st = pclose(p);
    cr_log_info("%s", last);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == expect))
        for (int i = n_other > HARNESS_KEPT ? n_other - HARNESS_KEPT : 0; i < n_other; i++)
            cr_log_error("%s", other[i % HARNESS_KEPT]);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

unsigned long harness_figure(const char *last, const char *what)
{
    const char *p = strstr(last, what);
    cr_assert_not_null(p, "no \"%s\" in: %s", what, last);
    while (p > last && p[-1] == ' ')
        p--;
    while (p > last && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoul(p, NULL, 10);
}

pgfx_ha harness_ha;

char *harness_ha_db(const char *why_long)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
#ifdef GW_TEST_SANITIZED
    cr_skip_test("the normal build's PostgreSQL pass runs it (%s)", why_long);
#else
    (void)why_long;
#endif
    pgfx_ha_start(&harness_ha);
    return pgfx_ha_db_new(&harness_ha);
}

void harness_ha_stop(void)
{
    pgfx_ha_cleanup(&harness_ha);
}
