/*
 * gw_slots: the log, and a shard's database as the tool reaches it. A move's steps are
 * timed from the start (the write pause is read off them), and the URLs printed are cut
 * to host:port/db: the map's URLs may carry a password.
 */
#include "slots.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

uint64_t sl_ms(void)
{
    static uint64_t start;
    if (!start)
        start = mono_ms();
    return mono_ms() - start;
}

static void vline(FILE *f, const char *fmt, va_list ap)
{
    fprintf(f, "[%6" PRIu64 " ms] ", sl_ms());
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
}

void sl_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stdout, fmt, ap);
    va_end(ap);
}

void sl_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stderr, fmt, ap);
    va_end(ap);
}

void sl_url_name(const char *url, char *out, size_t n)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &err);
    if (!opts) {
        snprintf(out, n, "(a URL libpq does not read)");
        PQfreemem(err);
        return;
    }
    const char *host = NULL, *port = NULL, *db = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else if (strcmp(o->keyword, "dbname") == 0)
            db = o->val;
    }
    snprintf(out, n, "%s:%s/%s", host ? host : "localhost", port ? port : "5432",
             db ? db : "(default)");
    PQconninfoFree(opts);
}

int sl_connect(const char *url, PGconn **out, char *why, size_t why_len)
{
    /* The URL last: what it says wins (libpq keeps a keyword's last value). No notices:
     * the temporary tables' CREATE IF NOT EXISTS says each time that they are there. */
    const char *kw[] = {"connect_timeout", "application_name", "options", "dbname", NULL};
    const char *val[] = {"5", "gw_slots", "-c client_min_messages=warning", url, NULL};
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        char name[300];
        sl_url_name(url, name, sizeof(name));
        snprintf(why, why_len, "%s: cannot connect: %s", name,
                 c ? PQerrorMessage(c) : "out of memory");
        why[strcspn(why, "\n")] = 0;
        PQfinish(c);
        *out = NULL;
        return ST_EIO;
    }
    *out = c;
    return ST_OK;
}

static int failed(PGresult *r, PGconn *c, const char *sql, char *why, size_t why_len)
{
    snprintf(why, why_len, "%.60s...: %s", sql, r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    why[strcspn(why, "\n")] = 0;
    PQclear(r);
    return ST_EIO;
}

int sl_exec(PGconn *c, const char *sql, char *why, size_t why_len)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return failed(r, c, sql, why, why_len);
    PQclear(r);
    return ST_OK;
}

int sl_scalar(PGconn *c, const char *sql, int64_t *out, char *why, size_t why_len)
{
    PGresult *r = PQexec(c, sql);
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
        return failed(r, c, sql, why, why_len);
    *out = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return ST_OK;
}

void sl_rollback(PGconn *c)
{
    if (c && PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
}
