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
                     /* DELETE, not TRUNCATE: a new file for a small table costs more. */
                     "DELETE FROM sl_gids; DELETE FROM sl_uids; DELETE FROM sl_tells",
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
 * order that differs between the databases (an upgraded one, a new one) does not matter.
 * out: the names; xout: the same, each of the table aliased x. */
static int columns(PGconn *c, int t, char *out, char *xout, size_t n, char *why, size_t why_len)
{
    char sql[400];
    snprintf(sql, sizeof(sql),
             "SELECT string_agg(quote_ident(attname), ',' ORDER BY attnum),"
             " string_agg('x.' || quote_ident(attname), ',' ORDER BY attnum) FROM pg_attribute"
             " WHERE attrelid = 'gw.%s'::regclass AND attnum > 0 AND NOT attisdropped",
             sl_tables[t]);
    PGresult *r = PQexec(c, sql);
    int rc = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? ST_OK : ST_EIO;
    if (rc == ST_OK && ((size_t)snprintf(out, n, "%s", PQgetvalue(r, 0, 0)) >= n ||
                        (size_t)snprintf(xout, n, "%s", PQgetvalue(r, 0, 1)) >= n))
        rc = ST_EINVAL;
    if (rc != ST_OK)
        snprintf(why, why_len, "the columns of gw.%s: %s", sl_tables[t],
                 r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    PQclear(r);
    return rc;
}

/* Streams rows from one COPY TO into one COPY FROM, each row written at once: *read and
 * *written (added to) the rows of each end. */
static int stream(PGconn *from, PGconn *to, const char *what, const char *out_sql,
                  const char *in_sql, uint64_t *read, uint64_t *written, char *why, size_t why_len)
{
    int rc = copy_begin(to, in_sql, PGRES_COPY_IN, why, why_len);
    if (rc != ST_OK)
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
            snprintf(why, why_len, "%s: writing to the destination: %s", what, PQerrorMessage(to));
            rc = ST_EIO;
            break;
        }
    }
    if (rc == ST_OK && len == -2) {
        snprintf(why, why_len, "%s: reading the source: %s", what, PQerrorMessage(from));
        rc = ST_EIO;
    }
    /* The source's result, also after a failure (its rows are left unread then: the
     * connection ends its COPY when asked for the result). */
    uint64_t r_out = 0, r_in = 0;
    PGresult *r;
    while ((r = PQgetResult(from))) {
        if (PQresultStatus(r) == PGRES_COMMAND_OK)
            r_out = strtoull(PQcmdTuples(r), NULL, 10);
        else if (rc == ST_OK && PQresultStatus(r) != PGRES_COPY_OUT) {
            snprintf(why, why_len, "%s: COPY TO: %s", what, PQresultErrorMessage(r));
            rc = ST_EIO;
        }
        PQclear(r);
    }
    int in = copy_in_end(to, rc == ST_OK ? NULL : "the copy failed", &r_in, why, why_len);
    rc = rc != ST_OK ? rc : in;
    if (rc == ST_OK && r_out != r_in) {
        snprintf(why, why_len, "%s: %" PRIu64 " rows read, %" PRIu64 " written", what, r_out, r_in);
        rc = ST_EIO;
    }
    *read += r_out;
    *written += r_in;
    why[strcspn(why, "\n")] = 0;
    return rc;
}

/* Streams one table's rows: those of `rows` (a FROM clause naming the table x; NULL: all
 * rows of the keys loaded). */
static int copy_table(PGconn *from, PGconn *to, int t, const char *rows, sl_counts *n, char *why,
                      size_t why_len)
{
    char cols[1024], xcols[1024], all[200], out_sql[2600], in_sql[1200];
    int rc = columns(from, t, cols, xcols, sizeof(cols), why, why_len);
    if (rc != ST_OK)
        return rc;
    if (!rows) {
        snprintf(all, sizeof(all), "gw.%s x WHERE x.%s IN (SELECT k FROM %s)", sl_tables[t],
                 table_key[t].key, temp_table[table_key[t].kind]);
        rows = all;
    }
    snprintf(out_sql, sizeof(out_sql), "COPY (SELECT %s FROM %s) TO STDOUT (FORMAT binary)", xcols,
             rows);
    snprintf(in_sql, sizeof(in_sql), "COPY gw.%s (%s) FROM STDIN (FORMAT binary)", sl_tables[t],
             cols);
    char what[40];
    snprintf(what, sizeof(what), "gw.%s", sl_tables[t]);
    return stream(from, to, what, out_sql, in_sql, &n->read[t], &n->written[t], why, why_len);
}

int sl_copy_rows(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len)
{
    memset(n, 0, sizeof(*n));
    int rc = ST_OK;
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        rc = delete_table(to, t, why, why_len);
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        rc = copy_table(from, to, t, NULL, n, why, why_len);
    return rc;
}

/* ---- the two phases: the messages before the fence, what changed since after it ------- */

enum { T_MSGS = 2, T_SENDS = 3 };

/* Per pre-copied group (on both ends): its last_mid M and last_cseq C as pre-copied, its
 * created_ms (a group deleted and made again is not the one pre-copied), its first_mid
 * then and as the source has it at the fence. sl_redo: its messages changed since
 * (cseq > C). sl_new: the keys of sl_gids not pre-copied. */
#define MARK_TABLES                                                                                \
    "CREATE TEMP TABLE IF NOT EXISTS sl_pre (k text COLLATE \"C\", last_mid int8,"                 \
    " last_cseq int8, created_ms int8, first_pre int8, first_now int8);"                           \
    "CREATE TEMP TABLE IF NOT EXISTS sl_redo (gid text COLLATE \"C\", mid int8);"                  \
    "CREATE TEMP TABLE IF NOT EXISTS sl_new (k text COLLATE \"C\");"                               \
    "DELETE FROM sl_redo; DELETE FROM sl_new"

int sl_pre_mark(PGconn *from, char *why, size_t why_len)
{
    return sl_exec(from,
                   MARK_TABLES
                   "; DELETE FROM sl_pre;"
                   "INSERT INTO sl_pre SELECT gid, last_mid, last_cseq, created_ms, first_mid,"
                   " first_mid FROM gw.groups WHERE gid IN (SELECT k FROM sl_gids);"
                   "ANALYZE sl_pre",
                   why, why_len);
}

int sl_pre_copy(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len)
{
    memset(n, 0, sizeof(*n));
    int rc = sl_delete_rows(to, why, why_len);
    if (rc == ST_OK)
        rc = copy_table(from, to, T_MSGS,
                        "gw.msgs x JOIN sl_pre p ON p.k = x.gid AND x.mid <= p.last_mid", n, why,
                        why_len);
    if (rc == ST_OK)
        rc = copy_table(from, to, T_SENDS,
                        "gw.sends x JOIN sl_pre p ON p.k = x.gid AND x.mid <= p.last_mid", n, why,
                        why_len);
    return rc;
}

int sl_catch_up(PGconn *from, PGconn *to, sl_counts *n, uint64_t *messages, char *why,
                size_t why_len)
{
    memset(n, 0, sizeof(*n));
    /* The pre-copied groups still the same (a group deleted and made again is left to the
     * delta, which copies it in full) that took messages since: from M to their last_mid. */
    int rc = sl_exec(from,
                     "CREATE TEMP TABLE IF NOT EXISTS sl_more (k text COLLATE \"C\", after int8,"
                     " upto int8);"
                     "DELETE FROM sl_more;"
                     "INSERT INTO sl_more SELECT p.k, p.last_mid, g.last_mid FROM sl_pre p"
                     " JOIN gw.groups g ON g.gid = p.k AND g.created_ms = p.created_ms"
                     " WHERE g.last_mid > p.last_mid;"
                     "ANALYZE sl_more",
                     why, why_len);
    if (rc == ST_OK)
        rc = copy_table(from, to, T_MSGS,
                        "gw.msgs x JOIN sl_more m ON m.k = x.gid AND x.mid > m.after"
                        " AND x.mid <= m.upto",
                        n, why, why_len);
    if (rc == ST_OK)
        rc = copy_table(from, to, T_SENDS,
                        "gw.sends x JOIN sl_more m ON m.k = x.gid AND x.mid > m.after"
                        " AND x.mid <= m.upto",
                        n, why, why_len);
    /* M moves; C does not: what changed since the pre-copy is still redone after the fence
     * (a message this pass copied and changed since included). */
    if (rc == ST_OK)
        rc = sl_exec(from, "UPDATE sl_pre p SET last_mid = m.upto FROM sl_more m WHERE m.k = p.k",
                     why, why_len);
    *messages = n->read[T_MSGS];
    return rc;
}

/* The rows per table of the keys loaded on c (one statement), sent. */
static int count_send(PGconn *c, char *why, size_t why_len)
{
    char sql[1500];
    size_t len = (size_t)snprintf(sql, sizeof(sql), "SELECT ");
    for (int t = 0; t < SL_TABLES; t++)
        len += (size_t)snprintf(sql + len, sizeof(sql) - len,
                                "%s(SELECT count(*) FROM gw.%s WHERE %s IN (SELECT k FROM %s))",
                                t ? ", " : "", sl_tables[t], table_key[t].key,
                                temp_table[table_key[t].kind]);
    if (PQsendQuery(c, sql))
        return ST_OK;
    snprintf(why, why_len, "counting the rows: %s", PQerrorMessage(c));
    why[strcspn(why, "\n")] = 0;
    return ST_EIO;
}

/* ... and its answer (every result taken: the connection is idle after). */
static int count_take(PGconn *c, uint64_t out[SL_TABLES], char *why, size_t why_len)
{
    int rc = ST_EIO;
    PGresult *r;
    while ((r = PQgetResult(c))) {
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
            PQnfields(r) == SL_TABLES) {
            for (int t = 0; t < SL_TABLES; t++)
                out[t] = strtoull(PQgetvalue(r, 0, t), NULL, 10);
            rc = ST_OK;
        } else {
            snprintf(why, why_len, "counting the rows: %s", PQresultErrorMessage(r));
            why[strcspn(why, "\n")] = 0;
        }
        PQclear(r);
    }
    if (rc != ST_OK && !*why)
        snprintf(why, why_len, "counting the rows: %s", PQerrorMessage(c));
    return rc;
}

/* The source's rows per table against the destination's (the keys loaded at each end):
 * the first table that differs in *bad (-1: none). */
static int compare(PGconn *from, PGconn *to, sl_counts *n, int *bad, char *why, size_t why_len)
{
    /* Both ends at once: each counts every row of the keys. */
    uint64_t there[SL_TABLES];
    int rc = count_send(from, why, why_len);
    if (rc == ST_OK && (rc = count_send(to, why, why_len)) != ST_OK)
        count_take(from, n->source, why, why_len);
    if (rc == ST_OK) {
        int a = count_take(from, n->source, why, why_len);
        int b = count_take(to, there, why, why_len);
        rc = a != ST_OK ? a : b;
    }
    *bad = -1;
    for (int t = 0; t < SL_TABLES && rc == ST_OK && *bad < 0; t++)
        if (n->source[t] != there[t]) {
            *bad = t;
            snprintf(why, why_len,
                     "gw.%s: %" PRIu64 " rows of the moved keys on the source, %" PRIu64
                     " on the destination",
                     sl_tables[t], n->source[t], there[t]);
        }
    return rc;
}

/* What the delta takes on each end: the marks of groups no longer the pre-copied ones
 * dropped (a deletion: all their rows go again), the first_mid of now, the changed
 * messages. */
static const char *const delta_mark_sql = MARK_TABLES
    ";"
    "DELETE FROM sl_pre p WHERE p.k NOT IN (SELECT k FROM sl_gids) OR NOT EXISTS (SELECT 1"
    " FROM gw.groups g WHERE g.gid = p.k AND g.created_ms = p.created_ms);"
    "UPDATE sl_pre p SET first_now = g.first_mid FROM gw.groups g WHERE g.gid = p.k"
    " AND g.first_mid <> p.first_now;"
    "INSERT INTO sl_new SELECT k FROM sl_gids EXCEPT SELECT k FROM sl_pre;"
    "INSERT INTO sl_redo SELECT x.gid, x.mid FROM sl_pre p JOIN gw.msgs x ON x.gid = p.k"
    " AND x.cseq > 0 AND x.cseq > p.last_cseq AND x.mid <= p.last_mid;"
    "ANALYZE sl_pre, sl_redo, sl_new";

/* The destination's rows that the delta replaces: all of groups not pre-copied, and of
 * pre-copied ones those below the first_mid of now (a trim) and those changed. None above
 * M: nobody writes the destination's rows of the slots but the move (and the count
 * would say so). */
static const char *const delta_delete_sql[] = {
    "DELETE FROM gw.%s x USING sl_new n WHERE x.gid = n.k",
    "DELETE FROM gw.%s x USING sl_pre p WHERE p.first_now > p.first_pre AND x.gid = p.k"
    " AND x.mid < p.first_now",
    "DELETE FROM gw.%s x USING sl_redo r WHERE x.gid = r.gid AND x.mid = r.mid",
};
/* ... and the source's rows that replace them. */
static const char *const delta_rows_sql[] = {
    "gw.%s x JOIN sl_new n ON n.k = x.gid",
    "gw.%s x JOIN sl_pre p ON p.k = x.gid AND x.mid > p.last_mid",
    "gw.%s x JOIN sl_redo r ON r.gid = x.gid AND r.mid = x.mid",
};

int sl_delta_copy(PGconn *from, PGconn *to, sl_counts *n, char *why, size_t why_len)
{
    memset(n, 0, sizeof(*n));
    uint64_t marks[2] = {0}, unused[2] = {0};
    int rc = sl_exec(from, delta_mark_sql, why, why_len);
    if (rc == ST_OK)
        rc = sl_exec(to, MARK_TABLES "; DELETE FROM sl_pre", why, why_len);
    if (rc == ST_OK)
        rc = stream(from, to, "sl_pre",
                    "COPY (SELECT k, last_mid, last_cseq, created_ms, first_pre, first_now"
                    " FROM sl_pre) TO STDOUT (FORMAT binary)",
                    "COPY sl_pre FROM STDIN (FORMAT binary)", &marks[0], &unused[0], why, why_len);
    if (rc == ST_OK)
        /* I's own: its keys loaded are those of every copy to it (a group pre-copied and
         * deleted since among them). */
        rc = sl_exec(to, "INSERT INTO sl_new SELECT k FROM sl_gids EXCEPT SELECT k FROM sl_pre",
                     why, why_len);
    if (rc == ST_OK)
        rc = stream(from, to, "sl_redo", "COPY sl_redo TO STDOUT (FORMAT binary)",
                    "COPY sl_redo FROM STDIN (FORMAT binary)", &marks[1], &unused[1], why, why_len);
    if (rc == ST_OK)
        rc = sl_exec(to, "ANALYZE sl_pre, sl_redo, sl_new", why, why_len);
    n->groups_precopied = marks[0];
    n->redone = marks[1];
    /* Everything but the messages again in full; the messages' delta. */
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        if (t != T_MSGS && t != T_SENDS)
            rc = delete_table(to, t, why, why_len);
    for (int t = T_MSGS; t <= T_SENDS; t++)
        for (size_t q = 0; q < sizeof(delta_delete_sql) / sizeof(*delta_delete_sql) && rc == ST_OK;
             q++) {
            char sql[300];
            snprintf(sql, sizeof(sql), delta_delete_sql[q], sl_tables[t]);
            rc = sl_exec(to, sql, why, why_len);
        }
    for (int t = 0; t < SL_TABLES && rc == ST_OK; t++)
        if (t != T_MSGS && t != T_SENDS)
            rc = copy_table(from, to, t, NULL, n, why, why_len);
    for (int t = T_MSGS; t <= T_SENDS; t++)
        for (size_t q = 0; q < sizeof(delta_rows_sql) / sizeof(*delta_rows_sql) && rc == ST_OK;
             q++) {
            char rows[300];
            snprintf(rows, sizeof(rows), delta_rows_sql[q], sl_tables[t]);
            rc = copy_table(from, to, t, rows, n, why, why_len);
        }
    int bad = -1;
    if (rc == ST_OK)
        rc = compare(from, to, n, &bad, why, why_len);
    /* A change that moved no cseq (an erasure drops the (uid, cid) rows of messages recalled
     * before): the messages and their sends again in full, as a single-phase copy. */
    if (rc == ST_OK && (bad == T_MSGS || bad == T_SENDS)) {
        n->full_again = true;
        for (int t = T_MSGS; t <= T_SENDS && rc == ST_OK; t++) {
            n->read[t] = n->written[t] = 0;
            if ((rc = delete_table(to, t, why, why_len)) == ST_OK)
                rc = copy_table(from, to, t, NULL, n, why, why_len);
        }
        if (rc == ST_OK)
            rc = compare(from, to, n, &bad, why, why_len);
    }
    return rc == ST_OK && bad >= 0 ? ST_EIO : rc;
}
