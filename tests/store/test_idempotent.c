/* Idempotent append: the same (uid, cid) returns the first mid and stores nothing new,
 * within one batch, across batches, and after the store is closed and reopened. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

FX_STORE_SUITE_FILLED(idempotent, true);

static void fx_suite_fill(void)
{
    fx_join(s, "g", "a");
    fx_join(s, "g", "b");
    fx_join(s, "h", "a");
}

static int append(const char *gid, const char *uid, const char *cid, uint64_t *mid, uint64_t *ts,
                  bool *dup)
{
    return st_append_sync(s, st_id_str(gid), st_id_str(uid), st_id_str(cid), "body", 4, mid, ts,
                          dup);
}

Test(idempotent, resend_returns_first_mid_and_ts)
{
    uint64_t m1, t1, m2, t2, last;
    bool d1, d2;
    cr_assert_eq(append("g", "a", "c1", &m1, &t1, &d1), 0);
    cr_assert_eq(fx_append(s, "g", "b", "other"), 2);
    cr_assert_eq(append("g", "a", "c1", &m2, &t2, &d2), 0);
    cr_assert_eq(m1, 1);
    cr_assert(!d1);
    cr_assert(d2);
    cr_assert_eq(m2, m1);
    cr_assert_eq(t2, t1);
    cr_assert_eq(st_read_last_mid(s, st_id_str("g"), &last), 0);
    cr_assert_eq(last, 2, "a resend must not store a message");
}

Test(idempotent, cid_is_per_user)
{
    uint64_t ma, mb;
    bool d;
    cr_assert_eq(append("g", "a", "same", &ma, NULL, &d), 0);
    cr_assert_eq(append("g", "b", "same", &mb, NULL, &d), 0);
    cr_assert(!d);
    cr_assert_eq(ma, 1);
    cr_assert_eq(mb, 2);
}

Test(idempotent, same_cid_for_another_group_is_a_conflict)
{
    uint64_t m;
    cr_assert_eq(append("g", "a", "c", &m, NULL, NULL), 0);
    cr_assert_eq(append("h", "a", "c", &m, NULL, NULL), ST_ECONFLICT);
    uint64_t last;
    cr_assert_eq(st_read_last_mid(s, st_id_str("h"), &last), 0);
    cr_assert_eq(last, 0);
}

static void count_done(st_op *op)
{
    (void)op;
}

Test(idempotent, duplicates_inside_one_batch)
{
    /* Queue many ops before the writer can take them: several land in one batch. */
    enum { N = 64 };
    st_op ops[N];
    for (int i = 0; i < N; i++) {
        ops[i] = (st_op){.kind = ST_OP_APPEND,
                         .gid = st_id_str("g"),
                         .uid = st_id_str("a"),
                         .cid = st_id_str(i % 2 ? "odd" : "even"),
                         .record = "x",
                         .record_n = 1,
                         .done = count_done};
        cr_assert_eq(st_submit(s, &ops[i]), 0);
    }
    /* A sync op queued last completes after all of them (the queue is FIFO). */
    cr_assert_eq(fx_append(s, "g", "b", "last"), 3);
    int dups = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(ops[i].result, 0);
        cr_assert_eq(ops[i].mid, i % 2 ? 2u : 1u);
        dups += ops[i].duplicate;
    }
    cr_assert_eq(dups, N - 2);
}

Test(idempotent, survives_reopen)
{
    uint64_t m1, t1, m2, t2;
    bool d;
    cr_assert_eq(append("g", "a", "persist", &m1, &t1, NULL), 0);
    st_close(s);
    s = fx_open(dir, true);
    cr_assert_eq(append("g", "a", "persist", &m2, &t2, &d), 0);
    cr_assert(d);
    cr_assert_eq(m2, m1);
    cr_assert_eq(t2, t1);
    cr_assert_eq(fx_append(s, "g", "a", "fresh"), m1 + 1);
}
