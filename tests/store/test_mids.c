/* Dense mids: concurrent appends to one group and to several groups never skip or
 * repeat a mid, and each message lands under the mid it was given. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define PER_THREAD 150

typedef struct producer {
    st_store *s;
    int id;
    int n_groups; /* thread i appends to group i % n_groups */
    uint64_t mids[PER_THREAD];
    int failures;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    char gid[16], uid[16], cid[32];
    snprintf(gid, sizeof(gid), "g%d", p->id % p->n_groups);
    snprintf(uid, sizeof(uid), "u%d", p->id);
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(cid, sizeof(cid), "t%d-%d", p->id, i);
        if (st_append_sync(p->s, st_id_str(gid), st_id_str(uid), st_id_str(cid), cid, strlen(cid),
                           &p->mids[i], NULL, NULL) != 0)
            p->failures++;
    }
    return NULL;
}

/* Checks that group gid holds exactly mids 1..n, each with a record some producer sent. */
static void check_dense(st_store *s, const char *gid, uint64_t n)
{
    uint64_t last = 0;
    cr_assert_eq(st_read_last_mid(s, st_id_str(gid), &last), 0);
    cr_assert_eq(last, n, "group %s: last_mid %lu, expected %lu", gid, (unsigned long)last,
                 (unsigned long)n);
    uint64_t next = 1;
    for (;;) {
        st_page *pg;
        cr_assert_eq(st_read_page(s, st_id_str(gid), ST_AFTER, next - 1, 500, &pg), 0);
        for (size_t i = 0; i < st_page_count(pg); i++) {
            const st_msg *m = st_page_at(pg, i);
            cr_assert_eq(m->mid, next, "group %s: mid %lu where %lu expected", gid,
                         (unsigned long)m->mid, (unsigned long)next);
            cr_assert(m->record_n > 0 && ((const char *)m->record)[0] == 't');
            next++;
        }
        bool more = st_page_more(pg);
        st_page_free(pg);
        if (!more)
            break;
    }
    cr_assert_eq(next - 1, n);
}

static void run(int n_groups)
{
    char *dir = fx_tmpdir();
    st_store *s = fx_open(dir, false);
    producer ps[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        char gid[16], uid[16];
        snprintf(gid, sizeof(gid), "g%d", t % n_groups);
        snprintf(uid, sizeof(uid), "u%d", t);
        fx_join(s, gid, uid);
        ps[t] = (producer){.s = s, .id = t, .n_groups = n_groups};
    }
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, produce, &ps[t]);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    /* Within one group, every mid was handed out once and each thread saw its own rise. */
    for (int g = 0; g < n_groups; g++) {
        uint64_t total = 0;
        static bool seen[THREADS * PER_THREAD + 1];
        memset(seen, 0, sizeof(seen));
        for (int t = g; t < THREADS; t += n_groups) {
            cr_assert_eq(ps[t].failures, 0);
            for (int i = 0; i < PER_THREAD; i++) {
                uint64_t m = ps[t].mids[i];
                cr_assert(m >= 1 && m <= THREADS * PER_THREAD);
                cr_assert(!seen[m], "mid %lu handed out twice", (unsigned long)m);
                seen[m] = true;
                if (i > 0)
                    cr_assert_gt(m, ps[t].mids[i - 1]);
            }
            total += PER_THREAD;
        }
        char gid[16];
        snprintf(gid, sizeof(gid), "g%d", g);
        check_dense(s, gid, total);
    }
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_eq(st.appends, THREADS * PER_THREAD);
    /* Group commit: concurrent producers share commits. */
    cr_assert_lt(st.commits, st.ops, "no batching: %lu commits for %lu ops",
                 (unsigned long)st.commits, (unsigned long)st.ops);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}

Test(mids, dense_under_concurrent_appends_to_one_group)
{
    run(1);
}

Test(mids, dense_under_concurrent_appends_to_several_groups)
{
    run(4);
}

Test(mids, survive_reopen_and_continue)
{
    char *dir = fx_tmpdir();
    st_store *s = fx_open(dir, true);
    fx_join(s, "g", "a");
    cr_assert_eq(fx_append(s, "g", "a", "c1"), 1);
    cr_assert_eq(fx_append(s, "g", "a", "c2"), 2);
    st_close(s);
    s = fx_open(dir, true);
    cr_assert_eq(fx_append(s, "g", "a", "c3"), 3);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}

Test(mids, append_needs_group_and_membership)
{
    char *dir = fx_tmpdir();
    st_store *s = fx_open(dir, false);
    uint64_t mid = 9;
    cr_assert_eq(st_append_sync(s, st_id_str("nope"), st_id_str("a"), st_id_str("c"), "x", 1, &mid,
                                NULL, NULL),
                 ST_ENOGROUP);
    fx_join(s, "g", "a");
    cr_assert_eq(
        st_append_sync(s, st_id_str("g"), st_id_str("b"), st_id_str("c"), "x", 1, &mid, NULL, NULL),
        ST_ENOTMEMBER);
    uint64_t last = 9;
    cr_assert_eq(st_read_last_mid(s, st_id_str("g"), &last), 0);
    cr_assert_eq(last, 0, "a refused append must not take a mid");
    cr_assert_eq(fx_append(s, "g", "a", "c"), 1);
    /* Malformed ops are refused before they are queued. */
    cr_assert_eq(
        st_append_sync(s, st_id_str(""), st_id_str("a"), st_id_str("c"), "x", 1, &mid, NULL, NULL),
        ST_EINVAL);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}
