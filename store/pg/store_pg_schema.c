/*
 * Connecting to PostgreSQL: the connection's parameters (libpq's own URL and its ways of
 * giving a password: never the URL, which shows in ps and in logs), the schema, created
 * on first start and checked at every connect, and the statements prepared for batches.
 *
 * The schema (version 1), in a schema `gw` of its own so that it shares a database with
 * anything else without clashing, and drops with one statement:
 *   groups  (gid, last_mid, created_ms)           one row per group
 *   members (gid, uid, ack, joined_ms)            one row per membership, and an index
 *                                                 on (uid, gid) for a user's groups
 *   msgs    (gid, mid, ts, record)                each message once, by (gid, mid)
 *   sends   (uid, cid, gid, mid, ts)              idempotent send, by (uid, cid)
 *   schema_version (version, applied_ms)
 * Version 2 adds the change log (store_pg_feed.c reads it to catch up by position):
 *   changes (seq, xid, at_ms, body)               one row per announcing batch, written
 *                                                 in its transaction: its announcement's
 *                                                 lines, messages as one hint a group;
 *                                                 by xid (the writing transaction's), in
 *                                                 seq order; rows older than the window
 *                                                 are deleted
 *   changes_pruned (xid)                          the greatest xid deleted so far
 * Version 3 adds the unread webhook's bookkeeping (store_pg_unread.c):
 *   unread_swept (gid, mid)                       a group's messages up to mid were looked
 *                                                 at (existing groups: up to their last)
 *   unread_tells (id, owner, made_ms, sent, event) an event made, until taken and for an
 *                                                 hour; owner: the claiming store's origin
 * Version 4 adds what members see of each other:
 *   members.read                                  the member's read cursor (-1: none sent)
 *   users (uid, last_seen_ms)                     when a user was last online
 * Version 5 adds a message's later versions (edits, recalls):
 *   msgs.ver, msgs.ets, msgs.recalled             its version (0: as sent), when that was
 *                                                 made, and whether it is a tombstone
 * Version 6 adds retention:
 *   groups.first_mid                              the horizon: messages below it are gone
 *   groups.keep_msgs, keep_ms, cap_msgs, acked    the group's own retention (store.h)
 *   an index on sends (gid, mid)                  a trim deletes its (uid, cid) rows
 * Version 7 adds revocation (store.h, Revocation):
 *   revoked (uid, not_before)                     a user's not-before (Unix seconds), kept
 *                                                 for good
 * Version 8 adds the change sequence and reactions (store.h, ST_OP_READ_CHANGES, ST_OP_REACT):
 *   msgs.cseq, msgs.cts                           the cseq of the message's latest change
 *                                                 (0: never changed) and when it was made
 *   an index on msgs (gid, cseq) where cseq > 0   the change log: one entry per changed
 *                                                 message, its latest (folded)
 *   groups.last_cseq, groups.changes_first        the group's last cseq, and the lowest
 *                                                 cseq after which the log is complete
 *   reactions (gid, mid, key, uid)                one row per reaction set; an index on uid
 *                                                 (an erasure drops a person's everywhere)
 * An older database is brought up to date at the first connect (nothing of it changes).
 * Ids are text in the "C" collation: byte order (the order store.h promises where it
 * promises one: a page of members), and the cheapest comparisons. groups and members are
 * updated in place all the time (last_mid, ack), so their pages keep room for HOT updates
 * (fillfactor): no index is touched.
 */
#include "store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defaults that the URL may override (libpq keeps the last value of a keyword), then the
 * URL itself, expanded by libpq. */
/* connect_timeout: 2 s (libpq's least), per host. A reconnect holds the store thread, and
 * a host that drops packets (a dead machine) costs this much before the next host is
 * tried, at every attempt of the recovery's schedule (a second apart); a connect on a
 * working network takes milliseconds, and 2 s still covers a lost SYN resent after 1 s.
 * tcp_user_timeout: data sent and not acknowledged for 10 s ends the connection (a link
 * gone silent in the middle of a request; keepalives only probe an idle one). */
static const char *const defaults_kw[] = {
    "connect_timeout",     "application_name", "keepalives",      "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout"};
static const char *const defaults_val[] = {"2", "gw", "1", "10", "5", "3", "10000"};
#define N_DEFAULTS (sizeof(defaults_kw) / sizeof(defaults_kw[0]))

static const char schema_v1[] =
    "CREATE TABLE gw.groups (gid text COLLATE \"C\" PRIMARY KEY, last_mid bigint NOT NULL,"
    " created_ms bigint NOT NULL) WITH (fillfactor = 50);"
    "CREATE TABLE gw.members (gid text COLLATE \"C\" NOT NULL, uid text COLLATE \"C\" NOT NULL,"
    " ack bigint NOT NULL, joined_ms bigint NOT NULL, PRIMARY KEY (gid, uid))"
    " WITH (fillfactor = 80);"
    "CREATE INDEX members_by_uid ON gw.members (uid, gid);"
    "CREATE TABLE gw.msgs (gid text COLLATE \"C\" NOT NULL, mid bigint NOT NULL,"
    " ts bigint NOT NULL, record bytea NOT NULL, PRIMARY KEY (gid, mid));"
    "CREATE TABLE gw.sends (uid text COLLATE \"C\" NOT NULL, cid text COLLATE \"C\" NOT NULL,"
    " gid text COLLATE \"C\" NOT NULL, mid bigint NOT NULL, ts bigint NOT NULL,"
    " PRIMARY KEY (uid, cid));"
    /* The check of a batch that took its rows from the gateway's cache (store_pg_cache.c):
     * locks the groups in key order, and fails (GW001) unless every one is at the
     * expected last_mid and every membership exists. */
    "CREATE FUNCTION gw.expect(gids text[], last_mids bigint[], mgids text[], muids text[])"
    " RETURNS void LANGUAGE plpgsql AS $$ DECLARE n int; BEGIN"
    " PERFORM 1 FROM gw.groups WHERE gid = ANY(gids) ORDER BY gid FOR UPDATE;"
    /* A new statement, a new snapshot: what the groups hold now that they are locked. */
    " SELECT count(*) INTO n FROM gw.groups g JOIN unnest(gids, last_mids) AS e(gid, last_mid)"
    " ON g.gid = e.gid AND g.last_mid = e.last_mid;"
    " IF n <> cardinality(gids) THEN RAISE EXCEPTION 'a group moved' USING ERRCODE = 'GW001';"
    " END IF;"
    " SELECT count(*) INTO n FROM gw.members m JOIN unnest(mgids, muids) AS k(gid, uid)"
    " ON m.gid = k.gid AND m.uid = k.uid;"
    " IF n <> cardinality(mgids) THEN RAISE EXCEPTION 'a membership ended'"
    " USING ERRCODE = 'GW001'; END IF; END $$;";

/* Version 3: the unread webhook's bookkeeping (store.h; store_pg_unread.c). Existing
 * groups are marked swept up to their last message: what was stored before the upgrade
 * is not looked at again. */
static const char schema_v3[] =
    "CREATE TABLE gw.unread_swept (gid text COLLATE \"C\" PRIMARY KEY, mid bigint NOT NULL);"
    "INSERT INTO gw.unread_swept SELECT gid, last_mid FROM gw.groups;"
    "CREATE TABLE gw.unread_tells (id text COLLATE \"C\" PRIMARY KEY, owner bigint NOT NULL,"
    " made_ms bigint NOT NULL, sent boolean NOT NULL DEFAULT false, event text NOT NULL);"
    "CREATE INDEX unread_tells_unsent ON gw.unread_tells (made_ms) WHERE NOT sent;"
    "CREATE INDEX unread_tells_by_made ON gw.unread_tells (made_ms);"
    "INSERT INTO gw.schema_version VALUES (3, (extract(epoch from now()) * 1000)::bigint);";

/* Version 4: what members see of each other: a member's read cursor (-1: it never sent
 * one; an older row has none) and a user's last_seen. */
static const char schema_v4[] =
    "ALTER TABLE gw.members ADD COLUMN read bigint NOT NULL DEFAULT -1;"
    "CREATE TABLE gw.users (uid text COLLATE \"C\" PRIMARY KEY, last_seen_ms bigint NOT NULL)"
    " WITH (fillfactor = 80);"
    "INSERT INTO gw.schema_version VALUES (4, (extract(epoch from now()) * 1000)::bigint);";

/* Version 5: a message's later versions (edits, recalls): its version, when that was
 * made, and whether it is a tombstone (its record then the sender alone). */
static const char schema_v5[] =
    "ALTER TABLE gw.msgs ADD COLUMN ver bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN ets bigint NOT NULL DEFAULT 0, ADD COLUMN recalled boolean NOT NULL DEFAULT false;"
    "INSERT INTO gw.schema_version VALUES (5, (extract(epoch from now()) * 1000)::bigint);";

/* Version 6: retention. A group's horizon and its own retention; the (uid, cid) rows of
 * a group's oldest messages found by the index that a trim deletes them with. */
static const char schema_v6[] =
    "ALTER TABLE gw.groups ADD COLUMN first_mid bigint NOT NULL DEFAULT 1,"
    " ADD COLUMN keep_msgs bigint NOT NULL DEFAULT 0, ADD COLUMN keep_ms bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN cap_msgs bigint NOT NULL DEFAULT 0, ADD COLUMN acked smallint NOT NULL DEFAULT 0;"
    "CREATE INDEX sends_gid_mid ON gw.sends (gid, mid);"
    "INSERT INTO gw.schema_version VALUES (6, (extract(epoch from now()) * 1000)::bigint);";

/* Version 7: revocation, a user's not-before (store.h). */
static const char schema_v7[] =
    "CREATE TABLE gw.revoked (uid text COLLATE \"C\" PRIMARY KEY, not_before bigint NOT NULL);"
    "INSERT INTO gw.schema_version VALUES (7, (extract(epoch from now()) * 1000)::bigint);";

/* Version 8: the change sequence (store.h): a message's latest change and its time (the
 * age retention of changes), the partial index that is the log of changes (a message
 * changed again moves its one entry: the log holds one per message), the group's last
 * cseq and the start of its complete log; reactions, keyed as they are counted (a
 * message's keys in byte order, then who). */
static const char schema_v8[] =
    "ALTER TABLE gw.msgs ADD COLUMN cseq bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN cts bigint NOT NULL DEFAULT 0;"
    "CREATE INDEX msgs_by_cseq ON gw.msgs (gid, cseq) WHERE cseq > 0;"
    "ALTER TABLE gw.groups ADD COLUMN last_cseq bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN changes_first bigint NOT NULL DEFAULT 1;"
    "CREATE TABLE gw.reactions (gid text COLLATE \"C\" NOT NULL, mid bigint NOT NULL,"
    " key text COLLATE \"C\" NOT NULL, uid text COLLATE \"C\" NOT NULL,"
    " PRIMARY KEY (gid, mid, key, uid));"
    "CREATE INDEX reactions_by_uid ON gw.reactions (uid);"
    "INSERT INTO gw.schema_version VALUES (8, (extract(epoch from now()) * 1000)::bigint);";

/* Version 9: shards (store.h, "Shards"). The slots a move fenced on this database (state
 * 'moving' while their rows are copied away, 'gone' once the map gives them to another
 * shard), and the check that a sharded store's every write transaction makes first: it
 * waits for a move's fence to be made or lifted (an exclusive hold of the same advisory
 * lock), then fails with GW002 naming the batch's slots that are fenced. The lock is taken
 * shared by writers, so they never wait on each other; a move takes it for the moment of
 * its insert. Slot -1 stands for every slot whose move from here is under way (an
 * erasure waits for none to be). A database that is no shard keeps the table empty and never calls
 * it. */
static const char schema_v9[] =
    "CREATE TABLE gw.fence (slot int8 PRIMARY KEY, state text NOT NULL, at_ms bigint NOT NULL);"
    "CREATE FUNCTION gw.fenced(slots int8[]) RETURNS void LANGUAGE plpgsql AS $$"
    " DECLARE f text; BEGIN"
    " PERFORM pg_advisory_xact_lock_shared(7220409);"
    /* A new statement, a new snapshot: a fence committed while this waited is seen. */
    " IF -1 = ANY(slots) THEN"
    " SELECT string_agg(slot::text, ',') INTO f FROM gw.fence WHERE state = 'moving';"
    " ELSE SELECT string_agg(slot::text, ',') INTO f FROM gw.fence WHERE slot = ANY(slots);"
    " END IF;"
    " IF f IS NOT NULL THEN RAISE EXCEPTION 'slots fenced by a move' USING ERRCODE = 'GW002',"
    " DETAIL = f; END IF; END $$;"
    "INSERT INTO gw.schema_version VALUES (9, (extract(epoch from now()) * 1000)::bigint);";

/* Version 2: the change log. seq orders the rows of batches that changed the same
 * membership in their commit order (both lock the group's row; the insert is the last
 * statement of its batch); xid gives the position (store_pg_feed.c). */
static const char schema_v2[] =
    "CREATE SEQUENCE gw.changes_seq;"
    "CREATE TABLE gw.changes (seq bigint NOT NULL DEFAULT nextval('gw.changes_seq'),"
    " xid xid8 NOT NULL DEFAULT pg_current_xact_id(),"
    " at_ms bigint NOT NULL DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint,"
    " body text NOT NULL);"
    "CREATE INDEX changes_by_xid ON gw.changes (xid);"
    "CREATE INDEX changes_by_at ON gw.changes (at_ms);"
    "CREATE TABLE gw.changes_pruned (xid xid8 NOT NULL);"
    "INSERT INTO gw.changes_pruned VALUES ('0');"
    "INSERT INTO gw.schema_version VALUES (2, (extract(epoch from now()) * 1000)::bigint);";

int pg_parse_url(pg *p, const char *url, char *why, size_t why_len)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &err);
    if (!opts) {
        snprintf(why, why_len, "the database URL is not valid: %s", err ? err : "out of memory");
        PQfreemem(err);
        return ST_EINVAL;
    }
    const char *host = NULL, *port = NULL, *db = NULL, *user = NULL;
    bool password = false;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val)
            continue;
        if (strcmp(o->keyword, "password") == 0)
            password = true;
        else if (strcmp(o->keyword, "host") == 0 || (strcmp(o->keyword, "hostaddr") == 0 && !host))
            host = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else if (strcmp(o->keyword, "dbname") == 0)
            db = o->val;
        else if (strcmp(o->keyword, "user") == 0)
            user = o->val;
    }
    snprintf(p->where, sizeof(p->where), "host %s port %s database %s user %s",
             host ? host : "(default)", port ? port : "(default)", db ? db : "(default)",
             user ? user : "(default)");
    PQconninfoFree(opts);
    if (password) {
        snprintf(why, why_len,
                 "the database URL holds a password, which would show in ps and in logs: "
                 "give it with a password file (PGPASSFILE or ~/.pgpass), a service file "
                 "(PGSERVICEFILE) or PGPASSWORD instead");
        return ST_EINVAL;
    }
    p->kw = calloc(N_DEFAULTS + 2, sizeof(char *));
    p->val = calloc(N_DEFAULTS + 2, sizeof(char *));
    if (!p->kw || !p->val)
        return ST_ENOMEM;
    for (size_t i = 0; i < N_DEFAULTS; i++) {
        p->kw[i] = (char *)defaults_kw[i];
        p->val[i] = (char *)defaults_val[i];
    }
    p->kw[N_DEFAULTS] = "dbname";
    p->val[N_DEFAULTS] = p->url = strdup(url);
    return p->url ? ST_OK : ST_ENOMEM;
}

void pg_disconnect(pg *p)
{
    if (p->conn)
        PQfinish(p->conn);
    p->conn = NULL;
    p->in_tx = false;
    atomic_store(&p->connected, false);
}

/* One statement outside pipeline mode; false with why. */
static bool exec(pg *p, const char *sql, PGresult **keep, char *why, size_t why_len)
{
    PGresult *r = PQexec(p->conn, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        pg_why(p, r, "preparing the database failed", why, why_len);
        PQclear(r);
        return false;
    }
    if (keep)
        *keep = r;
    else
        PQclear(r);
    return true;
}

/* The schema's version in the database; 0 when there is none yet, -1 on error. */
static int schema_version(pg *p, char *why, size_t why_len)
{
    PGresult *r = NULL;
    if (!exec(p, "SELECT to_regclass('gw.schema_version') IS NOT NULL", &r, why, why_len))
        return -1;
    bool there = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!there)
        return 0;
    if (!exec(p, "SELECT coalesce(max(version), 0) FROM gw.schema_version", &r, why, why_len))
        return -1;
    int version = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return version;
}

/* Checks the version of the schema there, or creates it on an empty database. Two
 * gateways starting at once on an empty database take turns (an advisory lock); a
 * database that has it already needs no lock, nor the right to create anything. */
static int schema(pg *p, char *why, size_t why_len)
{
    int version = schema_version(p, why, why_len);
    if (version < 0)
        return ST_EIO;
    if (version == 0) {
        if (!exec(p,
                  "BEGIN; SELECT pg_advisory_xact_lock(7220400);"
                  "CREATE SCHEMA IF NOT EXISTS gw;"
                  "CREATE TABLE IF NOT EXISTS gw.schema_version (version int NOT NULL,"
                  " applied_ms bigint NOT NULL);",
                  NULL, why, why_len) ||
            (version = schema_version(p, why, why_len)) < 0) {
            PQclear(PQexec(p->conn, "ROLLBACK"));
            return ST_EIO;
        }
        if (version == 0 &&
            (!exec(p, schema_v1, NULL, why, why_len) ||
             !exec(p,
                   "INSERT INTO gw.schema_version VALUES (1,"
                   " (extract(epoch from now()) * 1000)::bigint)",
                   NULL, why, why_len) ||
             !exec(p, schema_v2, NULL, why, why_len) || !exec(p, schema_v3, NULL, why, why_len) ||
             !exec(p, schema_v4, NULL, why, why_len) || !exec(p, schema_v5, NULL, why, why_len) ||
             !exec(p, schema_v6, NULL, why, why_len) || !exec(p, schema_v7, NULL, why, why_len) ||
             !exec(p, schema_v8, NULL, why, why_len) || !exec(p, schema_v9, NULL, why, why_len))) {
            PQclear(PQexec(p->conn, "ROLLBACK"));
            return ST_EIO;
        }
        if (!exec(p, "COMMIT", NULL, why, why_len))
            return ST_EIO;
        version = version ? version : PG_SCHEMA_VERSION;
    }
    if (version > 0 && version < PG_SCHEMA_VERSION) {
        /* An older release's: brought up to date, under the lock, by whoever is first. */
        if (!exec(p, "BEGIN; SELECT pg_advisory_xact_lock(7220400)", NULL, why, why_len) ||
            (version = schema_version(p, why, why_len)) < 0 ||
            (version < 2 && !exec(p, schema_v2, NULL, why, why_len)) ||
            (version < 3 && !exec(p, schema_v3, NULL, why, why_len)) ||
            (version < 4 && !exec(p, schema_v4, NULL, why, why_len)) ||
            (version < 5 && !exec(p, schema_v5, NULL, why, why_len)) ||
            (version < 6 && !exec(p, schema_v6, NULL, why, why_len)) ||
            (version < 7 && !exec(p, schema_v7, NULL, why, why_len)) ||
            (version < 8 && !exec(p, schema_v8, NULL, why, why_len)) ||
            (version < 9 && !exec(p, schema_v9, NULL, why, why_len)) ||
            !exec(p, "COMMIT", NULL, why, why_len)) {
            PQclear(PQexec(p->conn, "ROLLBACK"));
            return ST_EIO;
        }
        version = version < PG_SCHEMA_VERSION ? PG_SCHEMA_VERSION : version;
    }
    if (version > PG_SCHEMA_VERSION) {
        snprintf(why, why_len,
                 "the database's schema is version %d, newer than this gateway's (%d): run "
                 "the newer gateway that made it, or point this one at another database (%s)",
                 version, PG_SCHEMA_VERSION, p->where);
        return ST_EINVAL;
    }
    return ST_OK;
}

/* The store never prints: the server's notices ("schema gw already exists") are not
 * for the gateway's log. */
static void no_notices(void *arg, const char *message)
{
    (void)arg, (void)message;
}

int pg_connect(pg *p, char *why, size_t why_len)
{
    pg_disconnect(p);
    pg_cache_clear(p); /* what the old connection saw may have changed meanwhile */
    p->conn = PQconnectdbParams((const char *const *)p->kw, (const char *const *)p->val, 1);
    if (!p->conn || PQstatus(p->conn) != CONNECTION_OK) {
        pg_why(p, NULL, "cannot connect to the database", why, why_len);
        pg_disconnect(p);
        return ST_EIO;
    }
    PQsetNoticeProcessor(p->conn, no_notices, NULL);
    /* Nothing waits without end: setup statements get 10 s; a lock (a group's row held
     * by a gateway that stalled) 2 s, and then the batch is applied again; a session
     * left idle inside a transaction (that stalled gateway) loses it after 10 s. A
     * statement_timeout during batches would be wrong: it can cut a COMMIT's wait for a
     * synchronous standby short, and the commit would then be on one disk only. */
    if (!exec(p,
              "SET statement_timeout = '10s'; SET lock_timeout = '2s';"
              "SET idle_in_transaction_session_timeout = '10s'",
              NULL, why, why_len)) {
        pg_disconnect(p);
        return ST_EIO;
    }
    int rc = schema(p, why, why_len);
    if (rc != ST_OK) {
        pg_disconnect(p);
        return rc;
    }
    /* Durable before confirmed: synchronous_commit on (with a synchronous standby, on
     * two disks), or off with --no-sync (a crash of the database may lose the last
     * commits; a crash of the gateway loses nothing). */
    /* Every statement of the store looks rows up by their keys. Its plans are made once
     * per connection (generic plans: a custom plan per execution costs more than the work)
     * and must not depend on how big the tables were then: with a near-empty table the
     * planner picks a hash join over a sequential scan, which then walks every row (and
     * every dead version of the groups' rows, updated all the time) at each batch. So the
     * session plans lookups through the indexes, whatever the statistics say. */
    if (!exec(p,
              "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off;"
              "SET enable_hashjoin = off; SET enable_mergejoin = off;"
              "SET statement_timeout = 0",
              NULL, why, why_len) ||
        !exec(p, p->sync ? "SET synchronous_commit = on" : "SET synchronous_commit = off", NULL,
              why, why_len)) {
        pg_disconnect(p);
        return ST_EIO;
    }
    /* The owner of the tells this store claims is alive while this lock is held
     * (store_pg_unread.c): released when the connection ends, however it ends. */
    char lock[64];
    snprintf(lock, sizeof(lock), "SELECT pg_advisory_lock(%" PRId64 ")", (int64_t)p->origin);
    if (!exec(p, lock, NULL, why, why_len)) {
        pg_disconnect(p);
        return ST_EIO;
    }
    for (int i = 0; i < PG_N_STMTS; i++) {
        PGresult *r = PQprepare(p->conn, pg_stmt_name[i], pg_stmt_sql[i], 0, NULL);
        bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            pg_why(p, r, "preparing the store's statements failed", why, why_len);
        PQclear(r);
        if (!ok) {
            pg_disconnect(p);
            return ST_EIO;
        }
    }
    if (PQsetnonblocking(p->conn, 1) != 0 || PQenterPipelineMode(p->conn) != 1) {
        pg_why(p, NULL, "cannot use the connection's pipeline mode", why, why_len);
        pg_disconnect(p);
        return ST_EIO;
    }
    atomic_store(&p->connected, true);
    return ST_OK;
}
