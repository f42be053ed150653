/*
 * The change feed's changes (PostgreSQL; store.h, Changes): what one store changes,
 * another store on the same database hears with its cseq: an edit and a recall (EDIT with
 * cseq), a reaction (REACT with the key, on, the count and cseq), an erasure and a trim
 * (CHANGED per group with its last cseq), a group's deletion (LEAVE with the deletion's
 * cseq); a listener that lost its connection reads the same back from the change log; and
 * two stores changing one group at once take dense cseqs, none twice.
 * On RocksDB there is no feed: the tests are skipped.
 */
#include "fixture.h"
#include "fixture_feed.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kinds these tests keep (joins, messages, resyncs: test_feed.c's). */
#define CHANGES_KINDS                                                                              \
    (FX_KIND(ST_CH_EDIT) | FX_KIND(ST_CH_REACT) | FX_KIND(ST_CH_CHANGED) | FX_KIND(ST_CH_LEAVE))

/* A new database on which b listens (into h, as node); its URL (malloc'd: fx_feed_done).
 * The test is skipped on RocksDB. Returns once the listener is up: its first word is a
 * RESYNC, which h does not keep; a signal of its own would do, a short pause is enough
 * with the awaits after. */
static char *listener(fx_heard *h, const char *node, st_store **b)
{
    pgfx_need("PostgreSQL only: RocksDB has one writer and no feed");
    char *where = fx_tmpdir();
    *b = fx_open_listening(where, h, node);
    usleep(300 * 1000);
    return where;
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
    static fx_heard h = FX_HEARD_INIT(CHANGES_KINDS);
    st_store *b;
    char *where = listener(&h, "changes-feed-1", &b);
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.changes_keep = 2;
    st_store *a = fx_open_options(&o);
    fx_join(a, "g", "alice");
    fx_join(a, "g", "bob");
    fx_join(a, "h", "bob");
    fx_join(a, "h", "alice");
    fx_append_n(a, "g", "alice", "c", 0, 4);
    fx_append(a, "h", "alice", "c9");
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 1, &ver, false, "v1", 2, NULL, NULL), 0);
    react(a, "g", 2, "bob", "\xf0\x9f\x91\x8d", true, 2, 1);
    react(a, "g", 2, "alice", "a b", true, 3, 1);
    react(a, "g", 2, "bob", "\xf0\x9f\x91\x8d", false, 4, 0);
    ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 3, &ver, true, "alice", 5, NULL, NULL), 0);
    fx_heard_await(&h, 5);
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
    fx_heard_await(&h, 9); /* her two leaves and the two groups changed */
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
    fx_heard_await(&h, 10);
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
    fx_heard_await(&h, 11);
    cr_assert(h.ch[10].kind == ST_CH_LEAVE && strcmp(h.ch[10].uid, "bob") == 0 &&
              h.ch[10].cseq == 2);
    fx_feed_done(where, a, b);
}

/* A listener that lost its connection reads the changes back from the change log, in
 * the same lines. */
Test(changes_feed, a_listener_back_reads_the_changes_from_the_log, .timeout = 60)
{
    PGFX_ONE_DATABASE();
    static fx_heard h = FX_HEARD_INIT(CHANGES_KINDS);
    st_store *b;
    char *where = listener(&h, "changes-feed-2", &b);
    st_store *a = fx_open(where, true);
    fx_join(a, "g", "alice");
    fx_append(a, "g", "alice", "c1");
    react(a, "g", 1, "alice", "ok", true, 1, 1);
    fx_heard_await(&h, 1);
    fx_feed_cut(where, "changes-feed-2");
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 1, &ver, false, "v1", 2, NULL, NULL), 0);
    react(a, "g", 1, "alice", "ok", false, 3, 0);
    st_op e = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "x", .record_n = 1};
    fx_submit_wait(a, &e);
    cr_assert_eq(e.result, 0);
    st_list_free(e.list);
    st_list_free(e.changed);
    usleep(300 * 1000);
    cr_assert_eq(fx_heard_count(&h), 1, "nothing heard while away");
    fx_feed_uncut(where);
    /* From the first connection's position: the first reaction again (a listener takes a
     * change twice without harm), then the edit (no body), the reaction cleared, the leave,
     * g changed. */
    fx_heard_await(&h, 6);
    cr_assert(h.ch[1].kind == ST_CH_REACT && h.ch[1].on && h.ch[1].cseq == 1);
    cr_assert(h.ch[2].kind == ST_CH_EDIT && h.ch[2].cseq == 2);
    cr_assert(h.ch[3].kind == ST_CH_REACT && !h.ch[3].on && h.ch[3].cseq == 3 &&
              strcmp(h.ch[3].key, "ok") == 0);
    cr_assert_eq(h.ch[4].kind, ST_CH_LEAVE);
    cr_assert(h.ch[5].kind == ST_CH_CHANGED && h.ch[5].cseq == 4);
    fx_feed_done(where, a, b);
}

/* Two stores (two gateways) changing one group at once: the group's row, locked by each
 * batch, hands out the cseqs in turn, so they are dense and never given twice. */
typedef struct writer {
    st_store *s;
    const char *uid;
    uint64_t cseqs[40];
    int rc;
} writer;

static void *write_changes(void *arg)
{
    writer *w = arg;
    for (int i = 0; i < 40 && w->rc == 0; i++) {
        bool dup = false;
        uint64_t n = 0;
        if (i % 4 == 3) {
            uint64_t ver = 0;
            w->rc = st_edit_sync(w->s, st_id_str("g"), (uint64_t)(i % 5) + 1, &ver, false, w->uid,
                                 strlen(w->uid), NULL, NULL);
            /* st_edit_sync does not hand the cseq back: read it from the page below */
            w->cseqs[i] = 0;
        } else {
            char key[8];
            snprintf(key, sizeof(key), "k%d", i);
            w->rc = st_react_sync(w->s, st_id_str("g"), (uint64_t)(i % 5) + 1, st_id_str(w->uid),
                                  st_id_str(key), true, &w->cseqs[i], &n, &dup);
        }
    }
    return NULL;
}

Test(changes_feed, two_stores_take_dense_cseqs, .timeout = 60)
{
    pgfx_need("PostgreSQL only: one database, two writers");
    char *where = fx_tmpdir();
    st_store *a = fx_open(where, true), *b = fx_open(where, true);
    fx_join(a, "g", "alice");
    fx_join(a, "g", "bob");
    fx_append_n(a, "g", "alice", "c", 0, 5);
    static writer wa, wb;
    wa = (writer){.s = a, .uid = "alice"};
    wb = (writer){.s = b, .uid = "bob"};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, write_changes, &wa);
    pthread_create(&tb, NULL, write_changes, &wb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert_eq(wa.rc, 0, "%s", st_strerror(wa.rc));
    cr_assert_eq(wb.rc, 0, "%s", st_strerror(wb.rc));
    /* 80 changes: each reaction's cseq given once, within 1..80. */
    bool seen[81] = {0};
    for (int i = 0; i < 40; i++)
        for (int k = 0; k < 2; k++) {
            uint64_t c = (k ? &wb : &wa)->cseqs[i];
            if (!c)
                continue;
            cr_assert(c >= 1 && c <= 80, "cseq %llu", (unsigned long long)c);
            cr_assert_not(seen[c], "cseq %llu given twice", (unsigned long long)c);
            seen[c] = true;
        }
    st_page *p = NULL;
    cr_assert_eq(st_read_changes(b, st_id_str("g"), 0, 100, st_id_str("alice"), &p), 0);
    cr_assert_eq(st_page_last_cseq(p), 80, "dense: as many cseqs as changes");
    cr_assert_eq(st_page_upto(p), 80);
    cr_assert_eq(st_page_count(p), 5, "one entry a message (folded)");
    uint64_t prev = 0, keys = 0;
    for (size_t i = 0; i < st_page_count(p); i++) {
        const st_msg *m = st_page_at(p, i);
        cr_assert_gt(m->cseq, prev);
        prev = m->cseq;
        for (size_t k = 0; k < m->n_reactions; k++)
            keys += m->reactions[k].count;
    }
    cr_assert_eq(prev, 80, "the last change is the last entry's");
    cr_assert_eq(keys, 60, "every reaction counted once");
    st_page_free(p);
    fx_feed_done(where, a, b);
}
