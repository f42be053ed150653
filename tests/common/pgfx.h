/*
 * PostgreSQL for the tests: the backend they run on (GW_TEST_STORE=postgres runs the store
 * and gateway suites on it; tools/test.sh does both), fresh databases on the suite's
 * server (GW_TEST_PG, started by tools/pg_server.sh), servers of a test's own for the
 * tests that stop, restart or kill the database, and pairs of them (a primary and its
 * synchronous standby) for the tests of failover.
 */
#ifndef GW_TEST_PGFX_H
#define GW_TEST_PGFX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when the suite runs on PostgreSQL. */
bool pgfx_on(void);
/* Skips the test unless the suite runs on PostgreSQL; why: the skip's message. */
void pgfx_need(const char *why);
/* The usual why: a test that needs a PostgreSQL server of its own. */
#define PGFX_ONLY "PostgreSQL only (the suite's PostgreSQL pass)"

/* A new empty database on the suite's server; its URL (malloc'd). Fails the test when
 * GW_TEST_PG is not set (run through tools/test.sh or tools/pg_server.sh with). */
char *pgfx_db_new(void);
/* GW_TEST_SHARDS=K (2 to 8) with the PostgreSQL pass: pgfx_db_new makes K databases and
 * answers a slot map's URL (shards:PATH) over them; pgfx_db_drop drops them all. */
bool pgfx_sharded(void);
/* A slot map over k new databases of the suite's server, each an equal share of the
 * slots: its URL, shards:PATH (malloc'd). */
char *pgfx_shards_new(unsigned k);
/* Skips the test in the sharded pass: it reads or writes the one database's tables itself,
 * or counts on one change feed (a sharded store hears each shard's). */
#define PGFX_ONE_DATABASE()                                                                        \
    do {                                                                                           \
        if (pgfx_sharded())                                                                        \
            cr_skip_test("one database's own tables or feed: not in the sharded pass");            \
    } while (0)
/* For the shards' own tests (they make their maps): PostgreSQL only, and not again in the
 * sharded pass, which runs the suites over maps of its own. */
#define PGFX_OWN_SHARDS()                                                                          \
    do {                                                                                           \
        pgfx_need(PGFX_ONLY);                                                                      \
        if (pgfx_sharded())                                                                        \
            cr_skip_test("the shards' own tests ran in the PostgreSQL pass");                      \
    } while (0)
/* Drops a database made by pgfx_db_new (its sessions are ended first). */
void pgfx_db_drop(const char *url);

/* Runs one statement on the database at url; returns the first field of the first row
 * as a number (0 if none, or a statement without rows). Fails the test on error. */
int64_t pgfx_scalar(const char *url, const char *sql);
/* url with its database changed to postgres (where a test may alter url's database, or
 * end its connections while it takes none); db gets url's database name. */
void pgfx_admin_url(const char *url, char *out, size_t n, char *db, size_t db_n);
/* Ends (pg_terminate_backend) the connections whose application_name is app, as a
 * failover or an operator would; how many. url: any database of the server. */
int64_t pgfx_end_connections(const char *url, const char *app);

/* A server of the test's own, in a folder of its own. */
typedef struct pgfx_server {
    char dir[256];
    char url[300]; /* of its `postgres` database */
} pgfx_server;

void pgfx_server_start(pgfx_server *s);
/* Starts it again after stop or kill (same folder, same port). */
void pgfx_server_restart(pgfx_server *s);
void pgfx_server_stop(pgfx_server *s);
/* pg_ctl restart -m immediate: no checkpoint, as after a crash. */
void pgfx_server_restart_immediate(pgfx_server *s);
/* SIGKILL of the postmaster (its children end with it). */
void pgfx_server_kill(pgfx_server *s);
/* Stops it and removes its folder. */
void pgfx_server_cleanup(pgfx_server *s);
/* The URL of a new database on it (malloc'd). */
char *pgfx_server_db_new(pgfx_server *s);

/* A primary and its synchronous standby (tools/pg_server.sh start-standby): a commit is
 * confirmed once it is on both, so it survives the loss of either. Which one is the
 * primary changes at each failover; a URL naming both (target_session_attrs=read-write)
 * reaches whichever it is. */
typedef struct pgfx_pair {
    pgfx_server a, b;
    int primary; /* 0: a, 1: b */
} pgfx_pair;

/* a the primary, b its synchronous standby. */
void pgfx_pair_start(pgfx_pair *p);
/* The URL of database db (NULL: "postgres") naming both servers, with
 * target_session_attrs=read-write (malloc'd). */
char *pgfx_pair_url(pgfx_pair *p, const char *db);
/* A new database, made on the primary and so on both; its URL as pgfx_pair_url's. */
char *pgfx_pair_db_new(pgfx_pair *p);
/* SIGKILL of the primary, then the standby is promoted and becomes p->primary; returns
 * once it takes writes. The killed one stays down (until pgfx_pair_rejoin). */
void pgfx_pair_failover(pgfx_pair *p);
/* The server killed by the last failover starts over (a new base backup, same port) as
 * the synchronous standby of the primary: commits wait for it again. */
void pgfx_pair_rejoin(pgfx_pair *p);
/* Stops both and removes their folders; safe to call twice, and after a failed assertion
 * (also half-way through pgfx_pair_start). */
void pgfx_pair_cleanup(pgfx_pair *p);

/* Two servers under Patroni over three etcd members (tools/pg_server.sh ha-up): the
 * failover is automatic, and a member killed comes back by itself as a replica. */
typedef struct pgfx_ha {
    char dir[256];
} pgfx_ha;

/* Up, with a leader and a streaming synchronous replica. */
void pgfx_ha_start(pgfx_ha *h);
/* A new database, made on the leader (and so on both); its URL names both servers with
 * target_session_attrs=read-write (malloc'd). */
char *pgfx_ha_db_new(pgfx_ha *h);
/* SIGKILL of the leader's (or the replica's) postmaster and Patroni; its name into name. */
void pgfx_ha_kill(pgfx_ha *h, bool leader, char *name, size_t n);
/* Is there a leader and a streaming synchronous replica now? */
bool pgfx_ha_ready(pgfx_ha *h);
/* Stops everything and removes the folder; safe to call twice. */
void pgfx_ha_cleanup(pgfx_ha *h);

#endif
