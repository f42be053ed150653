/* Cumulative acks: monotonic (a lower ack is ignored), capped at last_mid, per member;
 * acks of non-members change nothing. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>

static char *dir;
static st_store *s;

static void setup(void)
{
    dir = fx_tmpdir();
    s = fx_open(dir, false);
    fx_join(s, "g", "a");
    fx_join(s, "g", "b");
    for (int i = 0; i < 10; i++) {
        char cid[8] = {'c', (char)('0' + i), 0};
        fx_append(s, "g", "a", cid);
    }
}

static void teardown(void)
{
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}

TestSuite(acks, .init = setup, .fini = teardown);

static uint64_t ack_of(const char *uid)
{
    uint64_t ack = 0;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str(uid), &ack), 0);
    return ack;
}

static size_t ack(const char *uid, uint64_t mid)
{
    st_ack a = {st_id_str("g"), st_id_str(uid), mid};
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
        {st_id_str("g"), st_id_str("b"), 4},
        {st_id_str("g"), st_id_str("b"), 8},
        {st_id_str("g"), st_id_str("b"), 6},
        {st_id_str("g"), st_id_str("nobody"), 9},
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
