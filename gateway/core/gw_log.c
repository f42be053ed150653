#include "gw_core.h"

#include <libwebsockets.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum gw_log_level max_level = GW_LOG_INFO;
static const char *const names[] = {"error", "warn", "info", "debug"};
static char node[80]; /* "[NAME] ", set once at start before any other thread logs */

/* "t2 " on the second service thread's lines and so on (the first's have none). */
static _Thread_local char thread_tag[16];

void gw_log_set_thread(unsigned index)
{
    if (index)
        snprintf(thread_tag, sizeof(thread_tag), "t%u ", index + 1);
    else
        thread_tag[0] = 0;
}

void gw_log_set_node(const char *name)
{
    snprintf(node, sizeof(node), "[%s] ", name);
}

void gw_log_set_level(enum gw_log_level lvl)
{
    max_level = lvl;
}

static void vlog(enum gw_log_level lvl, const char *fmt, va_list ap)
{
    if (lvl > max_level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[1024];
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, names[lvl], node, thread_tag);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    /* One write per line, so lines from the store thread never interleave mid-line. */
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = 0;
    fprintf(stderr, "%s\n", line);
}

void gw_log(enum gw_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, fmt, ap);
    va_end(ap);
}

static void from_lws(int level, const char *line)
{
    gw_log(level == LLL_ERR ? GW_LOG_ERROR : GW_LOG_WARN, "lws: %s", line);
}

void gw_log_capture_lws(void)
{
    lws_set_log_level(LLL_ERR | LLL_WARN, from_lws);
}
