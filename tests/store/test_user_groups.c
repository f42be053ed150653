/* A user's groups at login: every group once, with last_mid, ack and unread. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

FX_STORE_SUITE(user_groups, false);

typedef struct listing {
    int n;
    char gid[8][16];
    st_user_group g[8];
} listing;

static int collect(void *ud, const st_user_group *g)
{
    listing *l = ud;
    cr_assert_lt(l->n, 8);
    cr_assert_lt(g->gid.n, sizeof(l->gid[0]));
    memcpy(l->gid[l->n], g->gid.p, g->gid.n);
    l->gid[l->n][g->gid.n] = 0;
    l->g[l->n++] = *g;
    return 0;
}

static listing list(const char *uid)
{
    listing l = {0};
    cr_assert_eq(st_read_user_groups(s, st_id_str(uid), collect, &l), 0);
    return l;
}

Test(user_groups, unread_counts)
{
    fx_join(s, "alpha", "c");
    fx_join(s, "beta", "c");
    fx_join(s, "alpha", "a");
    fx_join(s, "beta", "a");
    fx_join(s, "gamma", "a"); /* c is not in gamma */
    fx_append_n(s, "alpha", "a", "x", 0, 7);
    fx_append(s, "beta", "a", "b1");
    fx_append(s, "gamma", "a", "g1");
    st_ack ack = {.gid = st_id_str("alpha"), .uid = st_id_str("c"), .mid = 3};
    cr_assert_eq(st_acks_sync(s, &ack, 1, NULL), 0);

    listing l = list("c");
    cr_assert_eq(l.n, 2);
    int alpha = strcmp(l.gid[0], "alpha") == 0 ? 0 : 1; /* the order is the store's own */
    cr_assert_str_eq(l.gid[alpha], "alpha");
    cr_assert_eq(l.g[alpha].last_mid, 7);
    cr_assert_eq(l.g[alpha].ack, 3);
    cr_assert_eq(l.g[alpha].unread, 4);
    cr_assert_str_eq(l.gid[1 - alpha], "beta");
    cr_assert_eq(l.g[1 - alpha].last_mid, 1);
    cr_assert_eq(l.g[1 - alpha].unread, 1);

    cr_assert_eq(list("a").n, 3);
    cr_assert_eq(list("nobody").n, 0);
}

Test(user_groups, join_twice_changes_nothing_and_leave_removes)
{
    fx_join(s, "g", "a");
    fx_append(s, "g", "a", "1");
    fx_append(s, "g", "a", "2");
    fx_join(s, "g", "b");
    fx_append(s, "g", "a", "3");
    uint64_t last, ack;
    cr_assert_eq(st_join_sync(s, st_id_str("g"), st_id_str("b"), &last, &ack), 0);
    cr_assert_eq(last, 3);
    cr_assert_eq(ack, 2, "a second join must keep the ack");
    cr_assert_eq(list("b").n, 1);
    cr_assert_eq(list("b").g[0].unread, 1);
    cr_assert_eq(st_leave_sync(s, st_id_str("g"), st_id_str("b")), 0);
    cr_assert_eq(list("b").n, 0);
    cr_assert_eq(list("a").n, 1);
}

/* The suite's store opened again with open_groups off. */
static void reopen_with_closed_groups(void)
{
    st_close(s);
    st_options o;
    st_options_init(&o);
    fx_locate(&o, dir);
    o.open_groups = false;
    cr_assert_eq(st_open(&o, &s, NULL, 0), 0);
}

Test(user_groups, closed_groups)
{
    reopen_with_closed_groups();
    cr_assert_eq(st_join_sync(s, st_id_str("new"), st_id_str("a"), NULL, NULL), ST_ENOGROUP);
    cr_assert_eq(list("a").n, 0);
}

/* A join with `create`, as a service makes its groups: the store's open_groups off is for
 * clients' joins, and those still follow it. */
static int join(const char *gid, const char *uid, bool create, st_op *op)
{
    *op =
        (st_op){.kind = ST_OP_JOIN, .gid = st_id_str(gid), .uid = st_id_str(uid), .create = create};
    fx_run_all(s, op, 1);
    return op->result;
}

Test(user_groups, closed_groups_join_with_create)
{
    reopen_with_closed_groups();
    st_op op;
    cr_assert_eq(join("made", "a", false, &op), ST_ENOGROUP);
    cr_assert_not(op.created);
    cr_assert_eq(list("a").n, 0);
    uint64_t last;
    cr_assert_eq(st_read_last_mid(s, st_id_str("made"), &last), ST_ENOGROUP,
                 "a refused join leaves nothing behind");

    cr_assert_eq(join("made", "a", true, &op), 0);
    cr_assert(op.created);
    cr_assert(op.joined);
    cr_assert_eq(op.last_mid, 0);
    cr_assert_eq(op.ack, 0);
    cr_assert_eq(list("a").n, 1);
    cr_assert_eq(st_read_last_mid(s, st_id_str("made"), &last), 0);

    /* The group exists now: a client's join (no create) works, and creates nothing. */
    fx_append(s, "made", "a", "1");
    cr_assert_eq(join("made", "b", false, &op), 0);
    cr_assert_not(op.created);
    cr_assert(op.joined);
    cr_assert_eq(op.ack, 1);
    /* create on a group that exists is a plain join. */
    cr_assert_eq(join("made", "a", true, &op), 0);
    cr_assert_not(op.created);
    cr_assert_not(op.joined);
    /* Still closed for others. */
    cr_assert_eq(join("other", "b", false, &op), ST_ENOGROUP);
    cr_assert_eq(list("b").n, 1);
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_eq(st.groups, 1);
}
