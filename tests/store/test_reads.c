/* The second cursor (store.h): a member's read moves forward only, up to the last mid,
 * apart from its ack; unread counts come from it once there is one; reads show in the
 * member pages and the group's read; users' last_seen only moves forward. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

FX_STORE_SUITE(reads, false);

static void read_to(const char *uid, uint64_t read)
{
    st_ack a = {.gid = st_id_str("g"), .uid = st_id_str(uid), .read = read, .has_read = true};
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, &a, 1, &applied), 0);
}

static void ack_to(const char *uid, uint64_t mid)
{
    st_ack a = {.gid = st_id_str("g"), .uid = st_id_str(uid), .mid = mid};
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, &a, 1, &applied), 0);
}

/* uid's group g as its user's groups list it. */
static st_user_group group_of(const char *uid)
{
    st_op op = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str(uid)};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    cr_assert_eq(st_groups_count(op.groups), 1);
    st_user_group g = *st_groups_at(op.groups, 0);
    g.gid = (st_id){NULL, 0}; /* borrowed from the list, which goes */
    st_groups_free(op.groups);
    return g;
}

static void fill(void)
{
    fx_join(s, "g", "alice");
    fx_join(s, "g", "bob");
    fx_append_n(s, "g", "alice", "c", 1, 5);
}

Test(reads, a_read_moves_apart_from_the_ack_and_counts_the_unread)
{
    fill();
    st_user_group g = group_of("bob");
    cr_assert_not(g.has_read, "no read sent: none");
    cr_assert_eq(g.unread, 5, "from the ack");
    ack_to("bob", 5);
    cr_assert_eq(group_of("bob").unread, 0);
    read_to("bob", 2); /* the device has all five, the person saw two */
    g = group_of("bob");
    cr_assert(g.has_read);
    cr_assert_eq(g.read, 2);
    cr_assert_eq(g.ack, 5, "the ack stays");
    cr_assert_eq(g.unread, 3, "from the read, once there is one");
    read_to("bob", 1);
    cr_assert_eq(group_of("bob").read, 2, "never back");
    read_to("bob", 99);
    cr_assert_eq(group_of("bob").read, 5, "never past the last mid");
    cr_assert_eq(group_of("bob").unread, 0);
    /* A read of 0 is a read: the unread count is all the group. */
    read_to("alice", 0);
    g = group_of("alice");
    cr_assert(g.has_read && g.read == 0 && g.unread == 5);
}

Test(reads, reads_show_in_member_pages_and_the_group)
{
    fill();
    read_to("bob", 4);
    st_members *m = NULL;
    cr_assert_eq(st_read_members(s, st_id_str("g"), (st_id){NULL, 0}, 10, &m), 0);
    cr_assert_eq(st_members_count(m), 2);
    st_member a = st_members_at(m, 0), b = st_members_at(m, 1);
    cr_assert_not(a.has_read);
    cr_assert(b.has_read && b.read == 4);
    st_members_free(m);
    st_op op = {.kind = ST_OP_READ_GROUP, .gid = st_id_str("g"), .uid = st_id_str("bob")};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    cr_assert(op.has_read && op.read == 4 && op.ack == 0);
}

Test(reads, last_seen_only_moves_forward)
{
    st_seen w[3] = {
        {st_id_str("alice"), 1000}, {st_id_str("bob"), 2000}, {st_id_str("alice"), 1500}};
    st_op op = {.kind = ST_OP_SEEN, .seen = w, .n_seen = 3};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    st_seen back[1] = {{st_id_str("alice"), 900}};
    op = (st_op){.kind = ST_OP_SEEN, .seen = back, .n_seen = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    st_seen r[3] = {{st_id_str("alice"), 0}, {st_id_str("bob"), 0}, {st_id_str("nobody"), 7}};
    op = (st_op){.kind = ST_OP_READ_SEEN, .seen = r, .n_seen = 3};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    cr_assert_eq(r[0].ms, 1500);
    cr_assert_eq(r[1].ms, 2000);
    cr_assert_eq(r[2].ms, 0, "never seen");
}
