/*
 * The unread webhook's bookkeeping (store.h), on both backends: an event is claimed
 * once, also by a second store on the same place; what a store claimed and did not see
 * taken is adopted by the next one, and not while its owner is alive (PostgreSQL, two
 * writers); the groups with messages stored in a span and not swept, with the span's
 * first mid, the swept mark that only moves from where it is, and pages of groups; and a
 * store made before these existed opens with its groups marked swept.
 */
#include "fixture.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static char *dir;
static st_store *s, *s2;

static st_store *open_unread(const char *where)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.sync = false;
    o.unread_log = true;
    return fx_open_options(&o);
}

static void setup(void)
{
    dir = fx_tmpdir();
    s = open_unread(dir);
}

static void teardown(void)
{
    st_close(s2);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}

TestSuite(unread, .init = setup, .fini = teardown);

static uint64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* One op of the bookkeeping, waited for; its result. */
static int run(st_store *st, st_op *op)
{
    int rc = fx_submit_wait(st, op);
    cr_assert_eq(rc, 0, "these ops are never answered at once: %d", rc);
    return op->result;
}

static void claim(st_store *st, st_tell *t, size_t n)
{
    st_op op = {.kind = ST_OP_TELL_CLAIM, .tells = t, .n_tells = n};
    cr_assert_eq(run(st, &op), 0);
}

static st_tell tell(const char *id, const char *event)
{
    return (st_tell){.id = st_id_str(id), .event = event, .event_n = strlen(event)};
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* TELL_ADOPT of everything made up to now: the events adopted, sorted, as one string. */
static void adopt(st_store *st, char *out, size_t n)
{
    st_op op = {.kind = ST_OP_TELL_ADOPT, .upto = now_ms(), .limit = 100};
    cr_assert_eq(run(st, &op), 0);
    size_t k = st_list_count(op.list);
    char **texts = calloc(k + 1, sizeof(*texts));
    for (size_t i = 0; i < k; i++)
        texts[i] = strndup(st_list_at(op.list, i)->text, st_list_at(op.list, i)->text_n);
    qsort(texts, k, sizeof(*texts), by_str);
    out[0] = 0;
    for (size_t i = 0; i < k; i++) {
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? "," : "", texts[i]);
        free(texts[i]);
    }
    free(texts);
    st_list_free(op.list);
}

Test(unread, an_event_is_claimed_once)
{
    st_tell t[3] = {tell("e1", "{\"a\":1}"), tell("e2", "{\"a\":2}"), tell("e3", "{\"a\":3}")};
    claim(s, t, 3);
    for (int i = 0; i < 3; i++)
        cr_assert(t[i].claimed, "e%d is new", i + 1);
    st_tell u[2] = {tell("e2", "{\"again\":2}"), tell("e4", "{\"a\":4}")};
    claim(s, u, 2);
    cr_assert_not(u[0].claimed, "e2 was claimed before");
    cr_assert(u[1].claimed, "e4 is new");
    /* A second store on the same place (another gateway: PostgreSQL), or the same folder
     * opened again (a restart: RocksDB) claims none of them again. */
    if (pgfx_on()) {
        s2 = open_unread(dir);
    } else {
        st_close(s);
        s = NULL;
        s2 = open_unread(dir);
    }
    claim(s2, t, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_not(t[i].claimed, "e%d was claimed by the first store", i + 1);
}

Test(unread, tells_not_taken_are_adopted_by_the_next_store_once)
{
    st_tell t[3] = {tell("x1", "{\"n\":1}"), tell("x2", "{\"n\":2}"), tell("x3", "{\"n\":3}")};
    claim(s, t, 3);
    st_op sent = {.kind = ST_OP_TELL_SENT, .tells = &t[1], .n_tells = 1};
    cr_assert_eq(run(s, &sent), 0);
    char got[256];
    adopt(s, got, sizeof(got));
    cr_assert_str_empty(got, "a store does not adopt its own: %s", got);
    if (pgfx_on()) {
        /* Its owner alive (its connection holds its lock): not another's to take. */
        s2 = open_unread(dir);
        adopt(s2, got, sizeof(got));
        cr_assert_str_empty(got, "the owner is alive: %s", got);
        st_close(s2);
        s2 = NULL;
    }
    st_close(s); /* as a gateway that stops (or dies) with x1 and x3 not taken */
    s = NULL;
    s2 = open_unread(dir);
    adopt(s2, got, sizeof(got));
    cr_assert_str_eq(got, "{\"n\":1},{\"n\":3}", "the ones not taken, as claimed");
    adopt(s2, got, sizeof(got));
    cr_assert_str_empty(got, "adopted once: %s", got);
    /* Adopted, they are the new store's: taken once it delivers them. */
    st_op done = {.kind = ST_OP_TELL_SENT, .tells = t, .n_tells = 3};
    cr_assert_eq(run(s2, &done), 0);
    st_close(s2);
    s2 = open_unread(dir);
    adopt(s2, got, sizeof(got));
    cr_assert_str_empty(got, "all taken: %s", got);
}

/* PostgreSQL: two stores adopting at once take each event once between them. */
Test(unread, two_adopters_take_each_event_once)
{
    pgfx_need(PGFX_ONLY);
    enum { N = 300 };
    static st_tell t[N];
    static char ids[N][16], evs[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof(ids[i]), "t%d", i);
        snprintf(evs[i], sizeof(evs[i]), "{\"i\":%d}", i);
        t[i] = tell(ids[i], evs[i]);
    }
    claim(s, t, N);
    st_close(s);
    s = open_unread(dir);
    s2 = open_unread(dir);
    st_op a = {.kind = ST_OP_TELL_ADOPT, .upto = now_ms(), .limit = 1000, .done = NULL};
    st_op b = a;
    int seen[N] = {0};
    for (int round = 0; round < 20; round++) {
        a.limit = b.limit = 40;
        a.upto = b.upto = now_ms();
        st_op *both[2] = {&a, &b};
        st_store *by[2] = {s, s2};
        for (int k = 0; k < 2; k++) {
            cr_assert_eq(run(by[k], both[k]), 0);
            for (size_t i = 0; i < st_list_count(both[k]->list); i++)
                seen[atoi(st_list_at(both[k]->list, i)->text + 5)]++;
            st_list_free(both[k]->list);
        }
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(seen[i], 1, "event %d adopted %d times", i, seen[i]);
}

/* ---- what is not swept ------------------------------------------------------------------ */

/* READ_UNSWEPT over (from, upto] after gid `after`, at most limit: "gid lo-hi ..." and
 * whether there are more; next (if not NULL) gets where the next page starts after. */
static bool unswept_next(uint64_t from, uint64_t upto, const char *after, size_t limit, char *out,
                         size_t n, char *next)
{
    st_op op = {.kind = ST_OP_READ_UNSWEPT,
                .from = from,
                .upto = upto,
                .limit = limit,
                .gid = st_id_str(after)};
    cr_assert_eq(run(s, &op), 0);
    out[0] = 0;
    for (size_t i = 0; i < st_list_count(op.list); i++) {
        const st_item *it = st_list_at(op.list, i);
        snprintf(out + strlen(out), n - strlen(out), "%s%.*s %llu-%llu", i ? " " : "",
                 (int)it->gid.n, it->gid.p, (unsigned long long)it->lo, (unsigned long long)it->hi);
    }
    bool more = st_list_more(op.list);
    if (next)
        snprintf(next, 64, "%.*s", (int)st_list_after(op.list).n, st_list_after(op.list).p);
    st_list_free(op.list);
    return more;
}

static bool unswept(uint64_t from, uint64_t upto, const char *after, size_t limit, char *out,
                    size_t n)
{
    return unswept_next(from, upto, after, limit, out, n, NULL);
}

static void swept(const char *gid, uint64_t from, uint64_t upto)
{
    st_op op = {.kind = ST_OP_SWEPT, .gid = st_id_str(gid), .from = from, .upto = upto};
    cr_assert_eq(run(s, &op), 0);
}

static void append_n(const char *gid, int n)
{
    static int cid;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof(c), "c%d", ++cid);
        fx_append(s, gid, "u", c);
    }
}

Test(unread, groups_not_swept_in_a_span_with_their_first_mid)
{
    fx_join(s, "g1", "u");
    fx_join(s, "g2", "u");
    fx_join(s, "g3", "u");
    append_n("g1", 2); /* before the span */
    usleep(30 * 1000);
    uint64_t t0 = now_ms();
    usleep(30 * 1000);
    append_n("g1", 3);
    append_n("g2", 3);
    usleep(30 * 1000);
    uint64_t t1 = now_ms();
    usleep(30 * 1000);
    append_n("g3", 1); /* after it */
    char got[512];
    cr_assert_not(unswept(t0, t1, "", 100, got, sizeof(got)));
    cr_assert_str_eq(got, "g1 3-5 g2 1-3", "what the span stored");
    cr_assert_not(unswept(0, t0, "", 100, got, sizeof(got)));
    cr_assert_str_eq(got, "g1 1-2");
    /* The mark moves from where it is; past a gap it stays. */
    swept("g2", 1, 2);
    swept("g1", 4, 5); /* g1 has no mark: 1..3 are not swept */
    cr_assert_not(unswept(t0, t1, "", 100, got, sizeof(got)));
    cr_assert_str_eq(got, "g1 3-5 g2 3-3");
    swept("g1", 1, 5);
    swept("g2", 3, 3);
    cr_assert_not(unswept(t0, now_ms() + 1000, "", 100, got, sizeof(got)));
    cr_assert_str_eq(got, "g3 1-1", "only g3 is left");
    /* A mark behind the span: what the span stored, from its first. */
    swept("g3", 1, 1);
    uint64_t t2 = now_ms();
    usleep(30 * 1000);
    append_n("g2", 2);
    cr_assert_not(unswept(t2, now_ms() + 1000, "", 100, got, sizeof(got)));
    cr_assert_str_eq(got, "g2 4-5");
}

Test(unread, groups_not_swept_come_in_pages)
{
    char gid[16];
    for (int i = 0; i < 7; i++) {
        snprintf(gid, sizeof(gid), "p%d", i);
        fx_join(s, gid, "u");
        append_n(gid, 1);
    }
    swept("p3", 1, 1);
    char got[512], all[2048] = "", after[64] = "";
    int pages = 0;
    bool more = true;
    while (more) {
        more = unswept_next(0, now_ms() + 1000, after, 2, got, sizeof(got), after);
        pages++;
        if (got[0])
            snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", all[0] ? " " : "", got);
        /* The next page starts after the last group of this one, swept or not: the page
         * of p2 and p3 lists p2 only, and says to go on after p3. */
        if (pages == 2)
            cr_assert_str_eq(after, "p3");
        cr_assert_lt(pages, 10);
    }
    cr_assert_str_eq(all, "p0 1-1 p1 1-1 p2 1-1 p4 1-1 p5 1-1 p6 1-1");
    cr_assert_eq(pages, 4);
}

/* A store made before the bookkeeping existed: its groups are marked swept up to their
 * last message, so that nothing stored before is told; what comes after is. */
Test(unread, a_store_from_before_marks_its_groups_swept)
{
    PGFX_ONE_DATABASE();
    fx_join(s, "old", "u");
    append_n("old", 4);
    st_close(s);
    s = NULL;
    if (pgfx_on()) {
        pgfx_scalar(dir, "DROP TABLE gw.unread_swept, gw.unread_tells, gw.users, gw.revoked;"
                         "ALTER TABLE gw.members DROP COLUMN read;"
                         "ALTER TABLE gw.msgs DROP COLUMN ver, DROP COLUMN ets,"
                         " DROP COLUMN recalled;"
                         "ALTER TABLE gw.groups DROP COLUMN first_mid, DROP COLUMN keep_msgs,"
                         " DROP COLUMN keep_ms, DROP COLUMN cap_msgs, DROP COLUMN acked;"
                         "DROP INDEX gw.sends_gid_mid; DROP TABLE gw.reactions;"
                         "ALTER TABLE gw.msgs DROP COLUMN cseq, DROP COLUMN cts;"
                         "ALTER TABLE gw.groups DROP COLUMN last_cseq, DROP COLUMN changes_first;"
                         "DROP TABLE gw.fence; DROP FUNCTION gw.fenced(int8[]);"
                         "DELETE FROM gw.schema_version WHERE version >= 3; SELECT 0");
        cr_assert_eq(pgfx_scalar(dir, "SELECT max(version) FROM gw.schema_version"), 2);
    } else {
        /* The folder as the release before left it: without the three families. */
        rocksdb_options_t *o = rocksdb_options_create();
        char *err = NULL;
        size_t n = 0;
        char **names = rocksdb_list_column_families(o, dir, &n, &err);
        cr_assert_null(err);
        const rocksdb_options_t **opts = calloc(n, sizeof(*opts));
        rocksdb_column_family_handle_t **cfs = calloc(n, sizeof(*cfs));
        for (size_t i = 0; i < n; i++)
            opts[i] = o;
        rocksdb_t *db = rocksdb_open_column_families(o, dir, (int)n, (const char *const *)names,
                                                     opts, cfs, &err);
        cr_assert_null(err, "%s", err);
        int dropped = 0;
        for (size_t i = 0; i < n; i++) {
            if (strncmp(names[i], "unread_", 7) == 0) {
                rocksdb_drop_column_family(db, cfs[i], &err);
                cr_assert_null(err);
                dropped++;
            }
            rocksdb_column_family_handle_destroy(cfs[i]);
        }
        cr_assert_eq(dropped, 3);
        rocksdb_close(db);
        rocksdb_list_column_families_destroy(names, n);
        free(opts);
        free(cfs);
        rocksdb_options_destroy(o);
    }
    s = open_unread(dir);
    if (pgfx_on())
        cr_assert_eq(pgfx_scalar(dir, "SELECT max(version) FROM gw.schema_version"), 9);
    uint64_t last = 0;
    cr_assert_eq(st_read_last_mid(s, st_id_str("old"), &last), 0);
    cr_assert_eq(last, 4, "the messages are kept");
    swept("old", 1, 2); /* behind the mark: changes nothing */
    uint64_t t0 = now_ms();
    usleep(30 * 1000);
    append_n("old", 2);
    char got[256];
    cr_assert_not(unswept(0, now_ms() + 1000, "", 100, got, sizeof(got)));
    cr_assert_str_eq(got, "old 5-6", "only what came after the upgrade");
    swept("old", 5, 6);
    cr_assert_not(unswept(t0, now_ms() + 1000, "", 100, got, sizeof(got)));
    cr_assert_str_empty(got);
}
