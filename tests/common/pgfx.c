#include "pgfx.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PG_SERVER GW_SOURCE_DIR "/tools/pg_server.sh"

bool pgfx_on(void)
{
    const char *s = getenv("GW_TEST_STORE");
    return s && strcmp(s, "postgres") == 0;
}

void pgfx_need(const char *why)
{
    if (!pgfx_on())
        cr_skip_test("%s", why);
}

static const char *base_url(void)
{
    const char *u = getenv("GW_TEST_PG");
    cr_assert(u && *u, "GW_TEST_PG is not set: run the suite through tools/test.sh, or "
                       "tools/pg_server.sh with <test binary>");
    return u;
}

/* The URL of database `name` on the server of url (URLs here end in /DBNAME). */
static char *url_with_db(const char *url, const char *name)
{
    const char *slash = strrchr(url, '/');
    cr_assert_not_null(slash);
    size_t n = (size_t)(slash - url) + 1;
    char *out = malloc(n + strlen(name) + 1);
    memcpy(out, url, n);
    strcpy(out + n, name);
    return out;
}

static void exec_on(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect %s: %s", url, PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
              PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

static char *db_new_on(const char *base)
{
    static unsigned n;
    char name[64], sql[128];
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(name, sizeof(name), "gwt_%d_%u_%lx", (int)getpid(), ++n, (unsigned long)t.tv_nsec);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    exec_on(base, sql);
    return url_with_db(base, name);
}

/* GW_TEST_SHARDS=K (2 to 8): the suite's stores are sharded, K databases of the suite's
 * server under a slot map in a file (store.h, "Shards"), each an equal share of the slots.
 * The map's URL stands for the database: pgfx_db_drop drops every shard of it. */
static unsigned shards_wanted(void)
{
    const char *k = getenv("GW_TEST_SHARDS");
    unsigned n = k ? (unsigned)atoi(k) : 0;
    return n >= 2 && n <= 8 ? n : 0;
}

bool pgfx_sharded(void)
{
    return pgfx_on() && shards_wanted();
}

char *pgfx_shards_new(unsigned k)
{
    static unsigned n;
    const char *base = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof(path), "%s/gw-slots-%d-%u.map", base && *base ? base : "/tmp",
             (int)getpid(), ++n);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fprintf(f, "version 1\n");
    for (unsigned i = 0; i < k; i++) {
        char *u = db_new_on(base_url());
        fprintf(f, "shard %u %s\n", i, u);
        free(u);
    }
    for (unsigned i = 0; i < k; i++)
        fprintf(f, "slots %u-%u %u\n", 4096 * i / k, 4096 * (i + 1) / k - 1, i);
    cr_assert_eq(fclose(f), 0);
    char *url = malloc(strlen(path) + 8);
    sprintf(url, "shards:%s", path);
    return url;
}

char *pgfx_db_new(void)
{
    if (pgfx_sharded())
        return pgfx_shards_new(shards_wanted());
    return db_new_on(base_url());
}

void pgfx_db_drop(const char *url)
{
    if (strncmp(url, "shards:", 7) == 0) {
        /* Every database the map's shard lines name, then the map. */
        FILE *f = fopen(url + 7, "r");
        char line[1024];
        while (f && fgets(line, sizeof(line), f)) {
            unsigned i;
            char u[900];
            if (sscanf(line, "shard %u %899s", &i, u) == 2)
                pgfx_db_drop(u);
        }
        if (f)
            fclose(f);
        unlink(url + 7);
        return;
    }
    const char *name = strrchr(url, '/') + 1;
    char sql[160];
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    char *admin = url_with_db(url, "postgres");
    exec_on(admin, sql);
    free(admin);
}

int64_t pgfx_scalar(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect %s: %s", url, PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
              "%s: %s", sql, PQresultErrorMessage(r));
    int64_t v = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? atoll(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    PQfinish(c);
    return v;
}

void pgfx_admin_url(const char *url, char *out, size_t n, char *db, size_t db_n)
{
    const char *slash = strrchr(url, '/');
    const char *q = strchr(slash, '?');
    size_t len = q ? (size_t)(q - slash - 1) : strlen(slash + 1);
    snprintf(db, db_n, "%.*s", (int)len, slash + 1);
    snprintf(out, n, "%.*s/postgres%s", (int)(slash - url), url, q ? q : "");
}

int64_t pgfx_end_connections(const char *url, const char *app)
{
    char sql[300];
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE application_name = '%s'",
             app);
    return pgfx_scalar(url, sql);
}

static void run(pgfx_server *s, const char *what)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s %s %s", PG_SERVER, what, s->dir);
    cr_assert_eq(system(cmd), 0, "%s failed (see %s/server.log)", cmd, s->dir);
}

void pgfx_server_start(pgfx_server *s)
{
    memset(s, 0, sizeof(*s));
    /* Under /tmp: the postgres user must reach it (the suite's TMPDIR is root's only). */
    snprintf(s->dir, sizeof(s->dir), "/tmp/gw-pgt-XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir));
    pgfx_server_restart(s);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "%s url %s", PG_SERVER, s->dir);
    FILE *p = popen(cmd, "r");
    cr_assert(p && fgets(s->url, sizeof(s->url), p));
    pclose(p);
    s->url[strcspn(s->url, "\n")] = 0;
}

void pgfx_server_restart(pgfx_server *s)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s start %s >/dev/null", PG_SERVER, s->dir);
    cr_assert_eq(system(cmd), 0, "%s failed (see %s/server.log)", cmd, s->dir);
}

void pgfx_server_stop(pgfx_server *s)
{
    run(s, "stop");
}

void pgfx_server_restart_immediate(pgfx_server *s)
{
    run(s, "restart-immediate");
}

void pgfx_server_kill(pgfx_server *s)
{
    run(s, "kill");
    /* The postmaster is gone; its children notice within moments. Wait until the
     * folder can be started again (the pid file no longer names a live process). */
    usleep(300 * 1000);
}

void pgfx_server_cleanup(pgfx_server *s)
{
    if (!s->dir[0])
        return;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s stop %s >/dev/null 2>&1; rm -rf %s", PG_SERVER, s->dir, s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pgfx: cleanup of %s failed\n", s->dir);
    s->dir[0] = 0;
}

char *pgfx_server_db_new(pgfx_server *s)
{
    return db_new_on(s->url);
}

/* The first line that cmd prints, into buf; fails the test unless cmd succeeds. */
static void capture(const char *cmd, char *buf, size_t len, const char *dir)
{
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "popen %s", cmd);
    bool got = fgets(buf, (int)len, f) != NULL;
    int rc = pclose(f);
    cr_assert(got && rc == 0, "%s failed (see %s/server.log)", cmd, dir);
    buf[strcspn(buf, "\n")] = 0;
}

static pgfx_server *pair_primary(pgfx_pair *p)
{
    return p->primary ? &p->b : &p->a;
}

static pgfx_server *pair_standby(pgfx_pair *p)
{
    return p->primary ? &p->a : &p->b;
}

void pgfx_pair_start(pgfx_pair *p)
{
    memset(p, 0, sizeof(*p));
    pgfx_server_start(&p->a);
    /* Named before the standby starts, so that a cleanup after a failure removes it. */
    snprintf(p->b.dir, sizeof(p->b.dir), "/tmp/gw-pgt-XXXXXX");
    cr_assert_not_null(mkdtemp(p->b.dir));
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "%s start-standby %s %s", PG_SERVER, p->a.dir, p->b.dir);
    capture(cmd, p->b.url, sizeof(p->b.url), p->b.dir);
    p->primary = 0;
}

char *pgfx_pair_url(pgfx_pair *p, const char *db)
{
    char cmd[700], url[400];
    snprintf(cmd, sizeof(cmd), "%s multi-url %s %s %s", PG_SERVER, p->a.dir, p->b.dir,
             db ? db : "postgres");
    capture(cmd, url, sizeof(url), p->a.dir);
    char *out = strdup(url);
    cr_assert_not_null(out);
    return out;
}

char *pgfx_pair_db_new(pgfx_pair *p)
{
    /* Its commit waits for the standby, like any other: the database is on both. */
    char *one = db_new_on(pair_primary(p)->url);
    char *url = pgfx_pair_url(p, strrchr(one, '/') + 1);
    free(one);
    return url;
}

void pgfx_pair_failover(pgfx_pair *p)
{
    pgfx_server *old = pair_primary(p), *next = pair_standby(p);
    pgfx_server_kill(old);
    run(next, "promote");
    p->primary ^= 1;
    /* promote waited for it already; a connection of our own says so too. */
    cr_assert_eq(pgfx_scalar(next->url, "SELECT (NOT pg_is_in_recovery())::int"), 1,
                 "%s: still a standby after promote", next->dir);
}

void pgfx_pair_rejoin(pgfx_pair *p)
{
    pgfx_server *old = pair_standby(p);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "%s rejoin %s %s >/dev/null", PG_SERVER, old->dir,
             pair_primary(p)->dir);
    cr_assert_eq(system(cmd), 0, "%s failed (see %s/server.log)", cmd, old->dir);
}

void pgfx_pair_cleanup(pgfx_pair *p)
{
    /* The primary first: with its standby gone first, its commits would wait for it
     * until the shutdown ends them. */
    pgfx_server_cleanup(pair_primary(p));
    pgfx_server_cleanup(pair_standby(p));
}

/* ---- Patroni over etcd ----------------------------------------------------------------- */

void pgfx_ha_start(pgfx_ha *h)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->dir, sizeof(h->dir), "/tmp/gw-pgha-XXXXXX");
    cr_assert_not_null(mkdtemp(h->dir));
    char cmd[600], url[400];
    snprintf(cmd, sizeof(cmd), "%s ha-up %s", PG_SERVER, h->dir); /* gives it to postgres */
    capture(cmd, url, sizeof(url), h->dir);
}

char *pgfx_ha_db_new(pgfx_ha *h)
{
    char cmd[600], admin[400], url[400];
    snprintf(cmd, sizeof(cmd), "%s ha-url %s", PG_SERVER, h->dir);
    capture(cmd, admin, sizeof(admin), h->dir);
    static unsigned n;
    char name[64], sql[128];
    snprintf(name, sizeof(name), "gwt_ha_%d_%u", (int)getpid(), ++n);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    exec_on(admin, sql);
    snprintf(cmd, sizeof(cmd), "%s ha-url %s %s", PG_SERVER, h->dir, name);
    capture(cmd, url, sizeof(url), h->dir);
    char *out = strdup(url);
    cr_assert_not_null(out);
    return out;
}

void pgfx_ha_kill(pgfx_ha *h, bool leader, char *name, size_t n)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s %s %s", PG_SERVER, leader ? "ha-kill-leader" : "ha-kill-replica",
             h->dir);
    capture(cmd, name, n, h->dir);
}

bool pgfx_ha_ready(pgfx_ha *h)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s ha-wait %s 0 >/dev/null", PG_SERVER, h->dir);
    return system(cmd) == 0;
}

void pgfx_ha_cleanup(pgfx_ha *h)
{
    if (!h->dir[0])
        return;
    char cmd[900];
    snprintf(cmd, sizeof(cmd), "%s ha-down %s >/dev/null 2>&1; rm -rf %s", PG_SERVER, h->dir,
             h->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pgfx: cleanup of %s failed\n", h->dir);
    h->dir[0] = 0;
}
