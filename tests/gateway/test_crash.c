/* The crash-and-verify harness (tools/gw_crash) in a short run: the gateway is killed
 * with SIGKILL five times under senders and receivers; nothing confirmed may be lost,
 * duplicated or reordered, and stored acks stay within the flush window. */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

Test(crash, five_kills_lose_nothing, .timeout = 300)
{
    char bin[512], dirbuf[512], cmd[1400], line[512], last[512] = "";
    snprintf(dirbuf, sizeof(dirbuf), "%s", GW_BINARY);
    snprintf(bin, sizeof(bin), "%s/tools/gw_crash", dirname(dirbuf));
    snprintf(cmd, sizeof(cmd), "%s --gw %s --kills 5 2>&1", bin, GW_BINARY);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    while (fgets(line, sizeof(line), p))
        if (strncmp(line, "gw_crash:", 9) == 0)
            snprintf(last, sizeof(last), "%s", line);
    int st = pclose(p);
    cr_log_info("%s", last);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gw_crash failed: %s", last);
    cr_assert_not_null(strstr(last, "losses 0"), "%s", last);
}
