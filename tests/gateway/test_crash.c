/* The crash-and-verify harness (tools/gw_crash) in short runs: the gateway is killed with
 * SIGKILL five times under senders and receivers (on the suite's backend); on PostgreSQL
 * also the database, restarted with pg_ctl restart -m immediate three times under a
 * gateway that keeps running. Nothing confirmed may be lost, duplicated or reordered, and
 * stored acks stay within the flush window. */
#include "gwfx.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Runs gw_crash with extra arguments; returns its last line. */
static void run(const char *extra, char *last, size_t last_n)
{
    char bin[512], dirbuf[512], cmd[1600], line[512];
    snprintf(dirbuf, sizeof(dirbuf), "%s", GW_BINARY);
    snprintf(bin, sizeof(bin), "%s/tools/gw_crash", dirname(dirbuf));
    snprintf(cmd, sizeof(cmd), "%s --gw %s %s 2>&1", bin, GW_BINARY, extra);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    last[0] = 0;
    while (fgets(line, sizeof(line), p))
        if (strncmp(line, "gw_crash:", 9) == 0)
            snprintf(last, last_n, "%s", line);
    int st = pclose(p);
    cr_log_info("%s", last);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gw_crash failed: %s", last);
    cr_assert_not_null(strstr(last, "losses 0"), "%s", last);
}

Test(crash, five_kills_lose_nothing, .timeout = 300)
{
    char extra[600] = "--kills 5", last[512];
    char *url = pgfx_on() ? pgfx_db_new() : NULL;
    if (url)
        snprintf(extra, sizeof(extra), "--kills 5 --store %s", url);
    run(extra, last, sizeof(last));
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
