/*
 * gw_slots: the keys of the slots that move, and their rows from one shard's database to
 * another's. The slot of a key is st_slot_of (FNV-1a, computed here, not in SQL), so each
 * database's keys are read once and those of the slots kept; the kept ones are loaded
 * into temporary tables that every statement after joins with. The rows go by COPY in
 * binary, one row at a time from the source's COPY TO into the destination's COPY FROM:
 * a move of any size holds one row in memory, and its keys.
 */
#include "slots.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where each table's rows are found: its key column and the temporary table of its keys.
 * gw.changes and gw.changes_pruned are each database's own log: they do not move. */
static const struct {
    const char *key;
    enum sl_kind kind;
} table_key[SL_TABLES] = {
    {"gid", SL_GIDS}, {"gid", SL_GIDS}, {"gid", SL_GIDS}, {"gid", SL_GIDS}, {"gid", SL_GIDS},
    {"gid", SL_GIDS}, {"uid", SL_UIDS}, {"uid", SL_UIDS}, {"id", SL_TELLS},
};
const char *const sl_tables[SL_TABLES] = {"groups", "members",   "msgs",
                                          "sends",  "reactions", "unread_swept",
                                          "users",  "revoked",   "unread_tells"};
static const char *const temp_table[SL_KINDS] = {"sl_gids", "sl_uids", "sl_tells"};
static const char *const list_sql[SL_KINDS] = {
    "SELECT gid FROM gw.groups",
    "SELECT uid FROM gw.users UNION SELECT uid FROM gw.revoked",
    "SELECT id FROM gw.unread_tells",
};

void sl_keyset_release(sl_keyset *ks)
{
    for (int k = 0; k < SL_KINDS; k++) {
        for (size_t i = 0; i < ks->k[k].n; i++)
            free(ks->k[k].v[i]);
        free(ks->k[k].v);
        ks->k[k] = (sl_keys){0};
    }
}

int sl_keys_add(sl_keys *k, const char *key)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 256;
        char **v = realloc(k->v, cap * sizeof(*v));
        if (!v)
            return ST_ENOMEM;
        k->v = v;
        k->cap = cap;
    }
    return (k->v[k->n] = strdup(key)) ? (k->n++, ST_OK) : ST_ENOMEM;
}

int sl_keyset_list(PGconn *c, unsigned a, unsigned b, sl_keyset *ks, char *why, size_t why_len)
{
    for (int k = 0; k < SL_KINDS; k++) {
        if (!PQsendQuery(c, list_sql[k]) || !PQsetSingleRowMode(c)) {
            snprintf(why, why_len, "%s: %s", list_sql[k], PQerrorMessage(c));
            return ST_EIO;
        }
        int rc = ST_OK;
        PGresult *r;
        /* Every result is taken, also after a failure: the connection is then idle. */
        while ((r = PQgetResult(c))) {
            ExecStatusType st = PQresultStatus(r);
            if (st == PGRES_SINGLE_TUPLE && rc == ST_OK) {
                const char *key = PQgetvalue(r, 0, 0);
                unsigned slot = st_slot_of((st_id){key, (size_t)PQgetlength(r, 0, 0)});
                if (slot >= a && slot <= b)
                    rc = sl_keys_add(&ks->k[k], key);
            } else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && rc == ST_OK) {
                snprintf(why, why_len, "%s: %s", list_sql[k], PQresultErrorMessage(r));
                rc = ST_EIO;
            }
            PQclear(r);
        }
        if (rc != ST_OK)
            return rc;
    }
    return ST_OK;
}

/* COPY's text format: a key is printable ASCII without spaces (store.h), so only the
 * backslash needs its escape. */
static int put_key(PGconn *c, const char *key)
{
    char line[2 * ST_MAX_ID + 2];
    size_t n = 0;
    for (const char *p = key; *p && n < sizeof(line) - 3; p++) {
        if (*p == '\\')
            line[n++] = '\\';
        line[n++] = *p;
    }
    line[n++] = '\n';
    return PQputCopyData(c, line, (int)n) == 1 ? ST_OK : ST_EIO;
}

/* Ends a COPY FROM STDIN (err: why it is abandoned, or NULL) and takes its result: the
 * rows it stored in *rows. */
static int copy_in_end(PGconn *c, const char *err, uint64_t *rows, char *why, size_t why_len)
{
    int rc = PQputCopyEnd(c, err) == 1 ? ST_OK : ST_EIO;
    PGresult *r;
    while ((r = PQgetResult(c))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            if (rc == ST_OK && !err)
                snprintf(why, why_len, "COPY FROM: %s", PQresultErrorMessage(r));
            rc = ST_EIO;
        } else if (rows) {
            *rows = strtoull(PQcmdTuples(r), NULL, 10);
        }
        PQclear(r);
    }
    if (rc != ST_OK && !err && !*why)
        snprintf(why, why_len, "COPY FROM: %s", PQerrorMessage(c));
    why[strcspn(why, "\n")] = 0;
    return err ? ST_EIO : rc;
}

/* Starts a COPY (PGRES_COPY_IN or _OUT expected). */
static int copy_begin(PGconn *c, const char *sql, ExecStatusType want, char *why, size_t why_len)
{
    PGresult *r = PQexec(c, sql);
    int rc = r && PQresultStatus(r) == want ? ST_OK : ST_EIO;
    if (rc != ST_OK) {
        snprintf(why, why_len, "%.80s: %s", sql, r ? PQresultErrorMessage(r) : PQerrorMessage(c));
        why[strcspn(why, "\n")] = 0;
    }
    PQclear(r);
    return rc;
}

int sl_keyset_load(PGconn *c, const sl_keyset *ks, char *why, size_t why_len)
{
    int rc = sl_exec(c,
                     "CREATE TEMP TABLE IF NOT EXISTS sl_gids (k text COLLATE \"C\");"
                     "CREATE TEMP TABLE IF NOT EXISTS sl_uids (k text COLLATE \"C\");"
                     "CREATE TEMP TABLE IF NOT EXISTS sl_tells (k text COLLATE \"C\");"
                     "TRUNCATE sl_gids, sl_uids, sl_tells",
                     why, why_len);
    for (int k = 0; k < SL_KINDS && rc == ST_OK; k++) {
        char sql[80];
        snprintf(sql, sizeof(sql), "COPY %s FROM STDIN", temp_table[k]);
        if ((rc = copy_begin(c, sql, PGRES_COPY_IN, why, why_len)) != ST_OK)
            break;
        for (size_t i = 0; i < ks->k[k].n && rc == ST_OK; i++)
            rc = put_key(c, ks->k[k].v[i]);
        if (rc != ST_OK)
            snprintf(why, why_len, "%s: %s", sql, PQerrorMessage(c));
        rc = copy_in_end(c, rc == ST_OK ? NULL : "a key could not be sent", NULL, why, why_len);
    }
    /* The planner's figures for the joins with them (a temporary table has none). */
    return rc == ST_OK ? sl_exec(c, "ANALYZE sl_gids, sl_uids, sl_tells", why, why_len) : rc;
}

static int delete_table(PGconn *c, int t, char *why, size_t why_len)
{
    char sql[200];
    snprintf(sql, sizeof(sql), "DELETE FROM gw.%s WHERE %s IN (SELECT k FROM %s)", sl_tables[t],
             table_key[t].key, temp_table[table_key[t].kind]);
    return sl_exec(c, sql, why, why_len);
}

int sl_delete_rows(PGconn *c, char *why, size_t why_len)
{
    /* The groups' rows locked first, in gid order as a shard's writers lock theirs: a
     * writer's batch may lock a group of these (a slow path's first round trip locks its
     * groups before its fence check refuses their ops), and deleting them in another order
     * would be a deadlock. */
    int rc = sl_exec(c,
                     "SELECT 1 FROM gw.groups WHERE gid IN (SELECT k FROM sl_gids)"
                     " ORDER BY gid FOR UPDATE",
                     why, why_len);
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        rc = delete_table(c, t, why, why_len);
    return rc;
}

/* The table's columns in order, as the source has them: both ends name them, so a column
 * order that differs between the databases (an upgraded one, a new one) does not matter. */
static int columns(PGconn *c, int t, char *out, size_t n, char *why, size_t why_len)
{
    char sql[300];
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(quote_ident(attname), ',' ORDER BY attnum) FROM pg_attribute"
             " WHERE attrelid = 'gw.%s'::regclass AND attnum > 0 AND NOT attisdropped",
             sl_tables[t]);
    PGresult *r = PQexec(c, sql);
    int rc = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? ST_OK : ST_EIO;
    if (rc == ST_OK && (size_t)snprintf(out, n, "%s", PQgetvalue(r, 0, 0)) >= n)
        rc = ST_EINVAL;
    if (rc != ST_OK)
        snprintf(why, why_len, "the columns of gw.%s: %s", sl_tables[t],
                 r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    PQclear(r);
    return rc;
}

/* Streams one table's rows: each row read from `from` is written to `to` at once. */
static int copy_table(PGconn *from, PGconn *to, int t, sl_counts *n, char *why, size_t why_len)
{
    char cols[1024], out_sql[1400], in_sql[1200];
    int rc = columns(from, t, cols, sizeof(cols), why, why_len);
    if (rc != ST_OK)
        return rc;
    snprintf(out_sql, sizeof(out_sql),
             "COPY (SELECT %s FROM gw.%s WHERE %s IN (SELECT k FROM %s)) TO STDOUT (FORMAT binary)",
             cols, sl_tables[t], table_key[t].key, temp_table[table_key[t].kind]);
    snprintf(in_sql, sizeof(in_sql), "COPY gw.%s (%s) FROM STDIN (FORMAT binary)", sl_tables[t],
             cols);
    if ((rc = copy_begin(to, in_sql, PGRES_COPY_IN, why, why_len)) != ST_OK)
        return rc;
    if ((rc = copy_begin(from, out_sql, PGRES_COPY_OUT, why, why_len)) != ST_OK) {
        copy_in_end(to, "the source's COPY failed", NULL, why, why_len);
        return rc;
    }
    char *buf;
    int len;
    while ((len = PQgetCopyData(from, &buf, 0)) > 0) {
        int put = PQputCopyData(to, buf, len);
        PQfreemem(buf);
        if (put != 1) {
            snprintf(why, why_len, "gw.%s: writing to the destination: %s", sl_tables[t],
                     PQerrorMessage(to));
            rc = ST_EIO;
            break;
        }
    }
    if (rc == ST_OK && len == -2) {
        snprintf(why, why_len, "gw.%s: reading the source: %s", sl_tables[t], PQerrorMessage(from));
        rc = ST_EIO;
    }
    /* The source's result, also after a failure (its rows are left unread then: the
     * connection ends its COPY when asked for the result). */
    PGresult *r;
    while ((r = PQgetResult(from))) {
        if (PQresultStatus(r) == PGRES_COMMAND_OK)
            n->read[t] = strtoull(PQcmdTuples(r), NULL, 10);
        else if (rc == ST_OK && PQresultStatus(r) != PGRES_COPY_OUT) {
            snprintf(why, why_len, "gw.%s: COPY TO: %s", sl_tables[t], PQresultErrorMessage(r));
            rc = ST_EIO;
        }
        PQclear(r);
    }
    int in = copy_in_end(to, rc == ST_OK ? NULL : "the copy failed", &n->written[t], why, why_len);
    rc = rc != ST_OK ? rc : in;
    if (rc == ST_OK && n->read[t] != n->written[t]) {
        snprintf(why, why_len, "gw.%s: %" PRIu64 " rows read, %" PRIu64 " written", sl_tables[t],
                 n->read[t], n->written[t]);
        rc = ST_EIO;
    }
    why[strcspn(why, "\n")] = 0;
    return rc;
}

int sl_copy_rows(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len)
{
    memset(n, 0, sizeof(*n));
    int rc = ST_OK;
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        rc = delete_table(to, t, why, why_len);
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        rc = copy_table(from, to, t, n, why, why_len);
    return rc;
}
