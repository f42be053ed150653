/* Cumulative acks: monotonic (a lower ack is ignored), capped at last_mid, per member;
 * acks of non-members change nothing. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

FX_STORE_SUITE_FILLED(acks, false);

static void fx_suite_fill(void)
{
    fx_join(s, "g", "a");
    fx_join(s, "g", "b");
    fx_append_n(s, "g", "a", "c", 0, 10);
}

static uint64_t ack_of(const char *uid)
{
    uint64_t ack = 0;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str(uid), &ack), 0);
    return ack;
}

static size_t ack(const char *uid, uint64_t mid)
{
    st_ack a = {.gid = st_id_str("g"), .uid = st_id_str(uid), .mid = mid};
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, &a, 1, &applied), 0);
    return applied;
}

Test(acks, join_starts_at_last_mid)
{
    fx_join(s, "g", "late");
    cr_assert_eq(ack_of("late"), 10);
    cr_assert_eq(ack_of("a"), 0);
}

Test(acks, monotonic)
{
    cr_assert_eq(ack("b", 5), 1);
    cr_assert_eq(ack_of("b"), 5);
    cr_assert_eq(ack("b", 3), 0);
    cr_assert_eq(ack_of("b"), 5, "a lower ack must be ignored");
    cr_assert_eq(ack("b", 5), 0);
    cr_assert_eq(ack("b", 7), 1);
    cr_assert_eq(ack_of("b"), 7);
    cr_assert_eq(ack_of("a"), 0, "acks are per member");
}

Test(acks, capped_at_last_mid)
{
    cr_assert_eq(ack("b", UINT64_MAX), 1);
    cr_assert_eq(ack_of("b"), 10);
    fx_append(s, "g", "a", "c10");
    cr_assert_eq(ack_of("b"), 10);
}

Test(acks, batch_of_many_keeps_the_max)
{
    st_ack as[4] = {
        {.gid = st_id_str("g"), .uid = st_id_str("b"), .mid = 4},
        {.gid = st_id_str("g"), .uid = st_id_str("b"), .mid = 8},
        {.gid = st_id_str("g"), .uid = st_id_str("b"), .mid = 6},
        {.gid = st_id_str("g"), .uid = st_id_str("nobody"), .mid = 9},
    };
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, as, 4, &applied), 0);
    cr_assert_eq(applied, 2);
    cr_assert_eq(ack_of("b"), 8);
    uint64_t x;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("nobody"), &x), ST_ENOTMEMBER);
}

Test(acks, survive_reopen)
{
    ack("b", 6);
    st_close(s);
    s = fx_open(dir, false);
    cr_assert_eq(ack_of("b"), 6);
}

Test(acks, leave_and_rejoin_resets_to_last_mid)
{
    ack("b", 2);
    cr_assert_eq(st_leave_sync(s, st_id_str("g"), st_id_str("b")), 0);
    uint64_t x;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("b"), &x), ST_ENOTMEMBER);
    cr_assert_eq(st_leave_sync(s, st_id_str("g"), st_id_str("b")), ST_ENOTMEMBER);
    cr_assert_eq(ack("b", 9), 0, "an ack after leaving changes nothing");
    uint64_t last, a;
    cr_assert_eq(st_join_sync(s, st_id_str("g"), st_id_str("b"), &last, &a), 0);
    cr_assert_eq(last, 10);
    cr_assert_eq(a, 10);
}

static int order_seq;
static void note_order(st_op *op)
{
    *(int *)op->ud = ++order_seq;
}

static void slow_note(st_op *op)
{
    usleep(150000);
    note_order(op);
}

Test(acks, urgent_ops_go_ahead_of_a_backlog)
{
    enum { N = 300 };
    /* Hold the writer in a completion while the backlog and the urgent op queue up, so
     * that the order they are taken in is the queue's alone. */
    static int first_at;
    st_op hold = {.kind = ST_OP_APPEND,
                  .gid = st_id_str("g"),
                  .uid = st_id_str("a"),
                  .cid = st_id_str("hold"),
                  .record = "x",
                  .record_n = 1,
                  .done = slow_note,
                  .ud = &first_at};
    cr_assert_eq(st_submit(s, &hold), 0);
    usleep(20000); /* the writer has taken it and sleeps in its completion */
    static st_op ops[N];
    static int done_at[N];
    static char cids[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(cids[i], sizeof(cids[i]), "b%d", i);
        ops[i] = (st_op){.kind = ST_OP_APPEND,
                         .gid = st_id_str("g"),
                         .uid = st_id_str("a"),
                         .cid = st_id_str(cids[i]),
                         .record = "x",
                         .record_n = 1,
                         .done = note_order,
                         .ud = &done_at[i]};
        cr_assert_eq(st_submit(s, &ops[i]), 0);
    }
    int ack_at = 0;
    st_ack a = {.gid = st_id_str("g"), .uid = st_id_str("b"), .mid = 10};
    st_op urgent = {.kind = ST_OP_ACKS,
                    .acks = &a,
                    .n_acks = 1,
                    .done = note_order,
                    .ud = &ack_at,
                    .urgent = true};
    cr_assert_eq(st_submit(s, &urgent), 0);
    fx_append(s, "g", "a", "barrier"); /* FIFO: after every normal op above */
    cr_assert_gt(ack_at, 0);
    cr_assert_lt(ack_at, done_at[0], "the urgent op waited behind the backlog");
    cr_assert_eq(ack_of("b"), 10);
}
