/*
 * The change feed's changes (PostgreSQL; store.h, Changes): what one store changes,
 * another store on the same database hears with its cseq: an edit and a recall (EDIT with
 * cseq), a reaction (REACT with the key, on, the count and cseq), an erasure and a trim
 * (CHANGED per group with its last cseq), a group's deletion (LEAVE with the deletion's
 * cseq); and a listener that lost its connection reads the same back from the change log.
 * On RocksDB there is no feed: the tests are skipped.
 */
#include "fixture.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct heard {
    pthread_mutex_t mu;
    struct {
        enum st_change_kind kind;
        char gid[64], uid[64], key[64];
        uint64_t mid, ver, cseq, count;
        bool on, recalled;
    } ch[256];
    size_t n;
} heard;

static void on_change(void *ud, const st_change *c, size_t n)
{
    heard *h = ud;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < n && h->n < 256; i++) {
        if (c[i].kind != ST_CH_EDIT && c[i].kind != ST_CH_REACT && c[i].kind != ST_CH_CHANGED &&
            c[i].kind != ST_CH_LEAVE)
            continue; /* joins, messages, resyncs: test_feed.c's */
        __typeof__(h->ch[0]) *e = &h->ch[h->n++];
        e->kind = c[i].kind;
        snprintf(e->gid, sizeof(e->gid), "%.*s", (int)c[i].gid.n, c[i].gid.p);
        snprintf(e->uid, sizeof(e->uid), "%.*s", (int)c[i].uid.n, c[i].uid.p);
        snprintf(e->key, sizeof(e->key), "%.*s", (int)c[i].key.n, c[i].key.p ? c[i].key.p : "");
        e->mid = c[i].mid;
        e->ver = c[i].ver;
        e->cseq = c[i].cseq;
        e->count = c[i].count;
        e->on = c[i].on;
        e->recalled = c[i].recalled;
    }
    pthread_mutex_unlock(&h->mu);
}

static size_t count(heard *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

static void await(heard *h, size_t n)
{
    for (int i = 0; i < 500 && count(h) < n; i++)
        usleep(10 * 1000);
    cr_assert_geq(count(h), n, "heard %zu changes, expected %zu", count(h), n);
}

static st_store *open_listening(const char *where, heard *h, const char *node)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.on_change = on_change;
    o.change_ud = h;
    o.node = node;
    st_store *s = NULL;
    char err[256];
    cr_assert_eq(st_open(&o, &s, err, sizeof(err)), 0, "%s", err);
    return s;
}

/* Waits until the listener is up (its first word is a RESYNC, which this on_change does
 * not keep): a signal of its own would do, a short pause is enough with the await after. */
static void settle(void)
{
    usleep(300 * 1000);
}

static void react(st_store *s, const char *gid, uint64_t mid, const char *uid, const char *key,
                  bool on, uint64_t want_cseq, uint64_t want_count)
{
    uint64_t cseq = 0, n = 0;
    bool dup = true;
    cr_assert_eq(
        st_react_sync(s, st_id_str(gid), mid, st_id_str(uid), st_id_str(key), on, &cseq, &n, &dup),
        0);
    cr_assert_eq(cseq, want_cseq);
    cr_assert_eq(n, want_count);
    cr_assert_not(dup);
}

Test(changes_feed, every_change_is_heard_with_its_cseq, .timeout = 60)
{
    pgfx_need("PostgreSQL only: RocksDB has one writer and no feed");
    char *where = fx_tmpdir();
    static heard h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    st_store *b = open_listening(where, &h, "changes-feed-1");
    settle();
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.changes_keep = 2;
    st_store *a = NULL;
    char err[256];
    cr_assert_eq(st_open(&o, &a, err, sizeof(err)), 0, "%s", err);
    fx_join(a, "g", "alice");
    fx_join(a, "g", "bob");
    fx_join(a, "h", "bob");
    fx_join(a, "h", "alice");
    for (int i = 0; i < 4; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "c%d", i);
        fx_append(a, "g", "alice", cid);
    }
    fx_append(a, "h", "alice", "c9");
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 1, &ver, false, "v1", 2, NULL, NULL), 0);
    react(a, "g", 2, "bob", "\xf0\x9f\x91\x8d", true, 2, 1);
    react(a, "g", 2, "alice", "a b", true, 3, 1);
    react(a, "g", 2, "bob", "\xf0\x9f\x91\x8d", false, 4, 0);
    ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 3, &ver, true, "alice", 5, NULL, NULL), 0);
    await(&h, 5);
    cr_assert_eq(h.ch[0].kind, ST_CH_EDIT);
    cr_assert(h.ch[0].mid == 1 && h.ch[0].ver == 1 && h.ch[0].cseq == 1);
    cr_assert_eq(h.ch[1].kind, ST_CH_REACT);
    cr_assert_str_eq(h.ch[1].gid, "g");
    cr_assert_str_eq(h.ch[1].uid, "bob");
    cr_assert_str_eq(h.ch[1].key, "\xf0\x9f\x91\x8d");
    cr_assert(h.ch[1].mid == 2 && h.ch[1].on && h.ch[1].count == 1 && h.ch[1].cseq == 2);
    cr_assert_str_eq(h.ch[2].key, "a b", "a key with a space: the line's last field");
    cr_assert_eq(h.ch[2].cseq, 3);
    cr_assert(h.ch[3].kind == ST_CH_REACT && !h.ch[3].on && h.ch[3].count == 0 &&
              h.ch[3].cseq == 4);
    cr_assert(h.ch[4].kind == ST_CH_EDIT && h.ch[4].recalled && h.ch[4].cseq == 5);
    /* bob's erasure: his reaction... gone already; alice's on 2 stays. An erasure of
     * alice: her messages in g (1, 2, 4: 3 is recalled) and h (1) take cseqs; told once a
     * group. */
    st_op e = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "x", .record_n = 1};
    fx_submit_wait(a, &e);
    cr_assert_eq(e.result, 0);
    await(&h, 9); /* her two leaves and the two groups changed */
    cr_assert(h.ch[5].kind == ST_CH_LEAVE && h.ch[6].kind == ST_CH_LEAVE);
    cr_assert_eq(h.ch[5].cseq, 0, "a plain leave");
    cr_assert(h.ch[7].kind == ST_CH_CHANGED && strcmp(h.ch[7].gid, "g") == 0 && h.ch[7].cseq == 8);
    cr_assert(h.ch[8].kind == ST_CH_CHANGED && strcmp(h.ch[8].gid, "h") == 0 && h.ch[8].cseq == 1);
    st_list_free(e.list);
    st_list_free(e.changed);
    /* A trim moving g's horizon: a cseq, told. */
    st_op t = {.kind = ST_OP_TRIM, .limit = 10, .retain = {.messages = 2}};
    fx_submit_wait(a, &t);
    cr_assert_eq(t.result, 0);
    await(&h, 10);
    cr_assert(h.ch[9].kind == ST_CH_CHANGED && strcmp(h.ch[9].gid, "g") == 0 && h.ch[9].cseq == 9);
    st_list_free(t.list);
    st_list_free(t.changed);
    /* changes_keep 2: the log of g starts at 9 - 2 + 1... as of before the move: 7. */
    st_page *p = NULL;
    cr_assert_eq(st_read_changes(a, st_id_str("g"), 0, 10, st_id_str(""), &p), 0);
    cr_assert_eq(st_page_changes_gone(p), 7);
    st_page_free(p);
    /* h deleted: bob's leave carries the deletion's cseq. */
    st_op d = {.kind = ST_OP_DELETE_GROUP, .gid = st_id_str("h")};
    fx_submit_wait(a, &d);
    cr_assert_eq(d.result, 0);
    cr_assert_eq(d.cseq, 2);
    st_list_free(d.list);
    await(&h, 11);
    cr_assert(h.ch[10].kind == ST_CH_LEAVE && strcmp(h.ch[10].uid, "bob") == 0 &&
              h.ch[10].cseq == 2);
    st_close(a);
    st_close(b);
    fx_rmtree(where);
    free(where);
}

/* A listener that lost its connection reads the changes back from the change log, in
 * the same lines. */
Test(changes_feed, a_listener_back_reads_the_changes_from_the_log, .timeout = 60)
{
    pgfx_need("PostgreSQL only: RocksDB has one writer and no feed");
    char *where = fx_tmpdir();
    static heard h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    st_store *b = open_listening(where, &h, "changes-feed-2");
    settle();
    st_store *a = fx_open(where, true);
    fx_join(a, "g", "alice");
    fx_append(a, "g", "alice", "c1");
    react(a, "g", 1, "alice", "ok", true, 1, 1);
    await(&h, 1);
    char admin[512], db[128], sql[600];
    pgfx_admin_url(where, admin, sizeof(admin), db, sizeof(db));
    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS false", db);
    pgfx_scalar(admin, sql);
    cr_assert_eq(pgfx_end_connections(admin, "gw-feed changes-feed-2"), 1);
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 1, &ver, false, "v1", 2, NULL, NULL), 0);
    react(a, "g", 1, "alice", "ok", false, 3, 0);
    st_op e = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "x", .record_n = 1};
    fx_submit_wait(a, &e);
    cr_assert_eq(e.result, 0);
    st_list_free(e.list);
    st_list_free(e.changed);
    usleep(300 * 1000);
    cr_assert_eq(count(&h), 1, "nothing heard while away");
    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS true", db);
    pgfx_scalar(admin, sql);
    /* From the first connection's position: the first reaction again (a listener takes a
     * change twice without harm), then the edit (no body), the reaction cleared, the leave,
     * g changed. */
    await(&h, 6);
    cr_assert(h.ch[1].kind == ST_CH_REACT && h.ch[1].on && h.ch[1].cseq == 1);
    cr_assert(h.ch[2].kind == ST_CH_EDIT && h.ch[2].cseq == 2);
    cr_assert(h.ch[3].kind == ST_CH_REACT && !h.ch[3].on && h.ch[3].cseq == 3 &&
              strcmp(h.ch[3].key, "ok") == 0);
    cr_assert_eq(h.ch[4].kind, ST_CH_LEAVE);
    cr_assert(h.ch[5].kind == ST_CH_CHANGED && h.ch[5].cseq == 4);
    st_close(a);
    st_close(b);
    fx_rmtree(where);
    free(where);
}
