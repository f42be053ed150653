/* Revocation (store.h): a user's not-before, written by a sign-out and by an erasure, read
 * with the user's groups, kept across a reopen, and never moved back. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

FX_STORE_SUITE(revoke, true);

/* The wall clock's second as the store reads it (CLOCK_REALTIME). Not time(NULL): glibc
 * answers it from the coarse clock, which can still say the last second for a tick after
 * the store's clock has moved on, and a bound read from it would then be one second low. */
static uint64_t now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec;
}

static uint64_t not_before(const char *uid)
{
    uint64_t nbf = 1;
    cr_assert_eq(st_read_not_before(s, st_id_str(uid), &nbf), 0);
    return nbf;
}

Test(revoke, a_sign_out_sets_the_not_before_read_with_the_groups)
{
    cr_assert_eq(not_before("mallory"), 0, "none before a sign-out");
    fx_join(s, "team", "mallory");
    uint64_t before = now_s(), nbf = 0;
    cr_assert_eq(st_signout_sync(s, st_id_str("mallory"), &nbf), 0);
    cr_assert(nbf >= before && nbf <= now_s(), "the commit's second: %lu", (unsigned long)nbf);
    /* The sign-in's read: the groups and the not-before from one read. */
    st_op op = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str("mallory")};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    cr_assert_eq(st_groups_count(op.groups), 1);
    cr_assert_eq(op.not_before, nbf);
    st_groups_free(op.groups);
    cr_assert_eq(not_before("alice"), 0, "another user's is not touched");

    /* A later sign-out moves it; it never goes back (one second on). */
    struct timespec second = {1, 100000000};
    nanosleep(&second, NULL);
    uint64_t later = 0;
    cr_assert_eq(st_signout_sync(s, st_id_str("mallory"), &later), 0);
    cr_assert_gt(later, nbf);
    cr_assert_eq(not_before("mallory"), later);
}

Test(revoke, the_not_before_stays_across_a_reopen)
{
    uint64_t nbf = 0;
    cr_assert_eq(st_signout_sync(s, st_id_str("mallory"), &nbf), 0);
    st_close(s);
    s = fx_open(dir, true);
    cr_assert_eq(not_before("mallory"), nbf);
}

Test(revoke, an_erasure_sets_the_not_before_and_keeps_it)
{
    fx_join(s, "team", "mallory");
    fx_append(s, "team", "mallory", "c1");
    uint64_t before = now_s();
    st_op op = {
        .kind = ST_OP_ERASE_USER, .uid = st_id_str("mallory"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0, "%s", st_strerror(op.result));
    st_list_free(op.list);
    st_list_free(op.changed);
    cr_assert(op.not_before >= before && op.not_before <= now_s());
    cr_assert_eq(not_before("mallory"), op.not_before, "what revokes the erased user's tokens");
    /* Erased again: the not-before does not go, nor back. */
    st_op again = {
        .kind = ST_OP_ERASE_USER, .uid = st_id_str("mallory"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &again);
    cr_assert_eq(again.result, 0);
    st_list_free(again.list);
    cr_assert_geq(not_before("mallory"), op.not_before);
    st_close(s);
    s = fx_open(dir, true);
    cr_assert_geq(not_before("mallory"), op.not_before);
}
