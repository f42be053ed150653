/* Retention (store.h, ST_OP_RETAIN, ST_OP_TRIM): a pass deletes what a group's retention
 * lets go and moves its horizon; pages, a group's read and a user's groups say the
 * horizon; a page asked from below it starts there and says gone_before; unread counts
 * ignore what is gone; mids stay dense and are never reused; a group's own retention
 * wins over the defaults; until-acked keeps what a member lacks, up to the cap; all of it
 * survives a reopen. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

FX_STORE_SUITE(retain, true);

/* One pass over every group with these defaults; the messages it deleted. */
static size_t trim(st_retain dflt)
{
    st_op op = {.kind = ST_OP_TRIM, .limit = 100, .retain = dflt};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0, "trim: %s", st_strerror(op.result));
    cr_assert_not(st_list_more(op.list));
    size_t n = op.applied;
    st_list_free(op.list);
    st_list_free(op.changed);
    return n;
}

static void own(const char *gid, st_retain r, int want)
{
    st_op op = {.kind = ST_OP_RETAIN, .gid = st_id_str(gid), .retain = r};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, want, "retain %s: %s", gid, st_strerror(op.result));
}

static void fill(const char *gid, int n)
{
    fx_join(s, gid, "alice");
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%s-", gid);
    fx_append_n(s, gid, "alice", prefix, 0, n);
}

static st_page *page(const char *gid, enum st_dir way, uint64_t from, size_t limit)
{
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str(gid), way, from, limit, &p), 0);
    return p;
}

static void expect_page(st_page *p, uint64_t lo, uint64_t hi, uint64_t gone, bool more)
{
    cr_assert_eq(st_page_count(p), hi >= lo ? hi - lo + 1 : 0, "%zu messages", st_page_count(p));
    for (size_t i = 0; i < st_page_count(p); i++)
        cr_assert_eq(st_page_at(p, i)->mid, lo + i, "dense from the horizon");
    cr_assert_eq(st_page_gone_before(p), gone);
    cr_assert_eq(st_page_more(p), more);
    st_page_free(p);
}

static st_op group(const char *gid, const char *uid)
{
    st_op op = {.kind = ST_OP_READ_GROUP, .gid = st_id_str(gid), .uid = st_id_str(uid ? uid : "")};
    if (!uid)
        op.uid.n = 0;
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    return op;
}

Test(retain, a_pass_keeps_the_last_n_and_says_the_horizon_everywhere)
{
    fill("g", 50);
    fx_join(s, "g", "bob"); /* ack 50 */
    cr_assert_eq(group("g", NULL).first_mid, 1, "nothing gone yet");
    cr_assert_eq(trim((st_retain){.messages = 10}), 40);
    cr_assert_eq(trim((st_retain){.messages = 10}), 0, "a second pass finds nothing");
    st_op g = group("g", NULL);
    cr_assert_eq(g.first_mid, 41);
    cr_assert_eq(g.last_mid, 50);
    /* From below the horizon: the page starts there and says so. */
    expect_page(page("g", ST_AFTER, 0, 5), 41, 45, 41, true);
    expect_page(page("g", ST_AFTER, 39, 100), 41, 50, 41, false);
    expect_page(page("g", ST_AFTER, 40, 100), 41, 50, 0,
                false); /* from the horizon: nothing gone asked */
    expect_page(page("g", ST_BEFORE, 46, 10), 41, 45, 41, false);
    expect_page(page("g", ST_BEFORE, 46, 5), 41, 45, 0, false);
    expect_page(page("g", ST_BEFORE, 30, 5), 1, 0, 41, false);
    st_page *p = page("g", ST_AFTER, 45, 2);
    cr_assert_eq(st_page_first_mid(p), 41);
    expect_page(p, 46, 47, 0, true);
    /* Unread: alice acked nothing, but what is gone is not unread; bob holds it all. */
    st_user_group a = fx_user_group(s, "alice", "g");
    cr_assert_eq(a.first_mid, 41);
    cr_assert_eq(a.unread, 10);
    cr_assert_eq(fx_user_group(s, "bob", "g").unread, 0);
    /* Gone is gone: no edit of it; the next mid is the next, never a reused one. */
    uint64_t ver = 0, ts = 0;
    bool dup = false;
    cr_assert_eq(st_edit_sync(s, st_id_str("g"), 3, &ver, false, "x", 1, &ts, &dup), ST_ENOMSG);
    cr_assert_eq(fx_append(s, "g", "alice", "after"), 51);
    /* All of it survives a reopen. */
    st_close(s);
    s = fx_open(dir, true);
    cr_assert_eq(group("g", NULL).first_mid, 41);
    expect_page(page("g", ST_AFTER, 0, 100), 41, 51, 41, false);
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_eq(st.messages, 11, "the count is of what is kept");
}

Test(retain, a_groups_own_retention_wins_over_the_defaults)
{
    fill("own", 20);
    fill("dflt", 20);
    fill("all", 20);
    own("own", (st_retain){.messages = 5}, 0);
    own("all", (st_retain){.messages = ST_KEEP_ALL}, 0);
    own("nope", (st_retain){.messages = 5}, ST_ENOGROUP);
    cr_assert_eq(trim((st_retain){.messages = 15}), 15 + 5);
    cr_assert_eq(group("own", NULL).first_mid, 16);
    cr_assert_eq(group("dflt", NULL).first_mid, 6);
    cr_assert_eq(group("all", NULL).first_mid, 1);
    st_op g = group("own", NULL);
    cr_assert_eq(g.retain.messages, 5, "the group's own is read back");
    /* No default: only the group's own applies. */
    fx_append(s, "own", "alice", "more");
    cr_assert_eq(trim((st_retain){0}), 1);
    cr_assert_eq(group("own", NULL).first_mid, 17);
    cr_assert_eq(group("dflt", NULL).first_mid, 6);
}

Test(retain, an_age_limit_lets_old_messages_go_and_keeps_new_ones)
{
    fill("g", 10);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cr_assert_eq(trim((st_retain){.ms = 10}), 10);
    st_op g = group("g", NULL);
    cr_assert_eq(g.first_mid, 11, "all of it went: the horizon is past the last");
    cr_assert_eq(g.last_mid, 10);
    expect_page(page("g", ST_AFTER, 0, 10), 1, 0, 11, false);
    cr_assert_eq(fx_user_group(s, "alice", "g").unread, 0);
    cr_assert_eq(fx_append(s, "g", "alice", "new"), 11);
    cr_assert_eq(trim((st_retain){.ms = 60000}), 0, "a young message stays");
    expect_page(page("g", ST_AFTER, 0, 10), 11, 11, 11, false);
    cr_assert_eq(fx_user_group(s, "alice", "g").unread, 1);
}

Test(retain, until_acked_keeps_what_a_member_lacks_up_to_the_cap)
{
    fill("g", 10); /* alice acks nothing */
    fx_join(s, "g", "bob");
    st_ack acks[] = {{.gid = st_id_str("g"), .uid = st_id_str("alice"), .mid = 3}};
    cr_assert_eq(st_acks_sync(s, acks, 1, NULL), 0);
    st_retain r = {.messages = 2, .until_acked = ST_ACKED_ON, .cap = 8};
    cr_assert_eq(trim(r), 3, "alice holds 1..3: those go, 4.. stay for her");
    cr_assert_eq(group("g", NULL).first_mid, 4);
    acks[0].mid = 10;
    cr_assert_eq(st_acks_sync(s, acks, 1, NULL), 0);
    cr_assert_eq(trim(r), 5, "everyone holds everything: the last 2 stay");
    cr_assert_eq(group("g", NULL).first_mid, 9);
    /* An idle member holds no more than the cap. */
    fx_join(s, "h", "idle"); /* acks nothing */
    fill("h", 21);
    st_ack all[] = {{.gid = st_id_str("h"), .uid = st_id_str("alice"), .mid = 21}};
    cr_assert_eq(st_acks_sync(s, all, 1, NULL), 0);
    own("h", (st_retain){.cap = 4}, 0);
    trim(r);
    cr_assert_eq(group("h", NULL).first_mid, 18, "the cap: the last 4 of 21");
    /* Until acked alone: what everyone holds goes, nothing else (the cap still holds). */
    fx_join(s, "k", "x");
    fx_join(s, "k", "y");
    fx_append_n(s, "k", "x", "k", 0, 6);
    st_ack k[] = {{.gid = st_id_str("k"), .uid = st_id_str("x"), .mid = 6},
                  {.gid = st_id_str("k"), .uid = st_id_str("y"), .mid = 4}};
    cr_assert_eq(st_acks_sync(s, k, 2, NULL), 0);
    own("k", (st_retain){.until_acked = ST_ACKED_ON, .messages = ST_KEEP_ALL}, 0);
    trim((st_retain){0});
    cr_assert_eq(group("k", NULL).first_mid, 5, "both hold 1..4");
}

Test(retain, a_pass_goes_page_by_page)
{
    char gid[16];
    for (int i = 0; i < 5; i++) {
        snprintf(gid, sizeof(gid), "g%d", i);
        fill(gid, 3);
    }
    st_op op = {.kind = ST_OP_TRIM, .limit = 2, .retain = {.messages = 1}};
    size_t groups = 0, deleted = 0;
    for (int pass = 0; pass < 10; pass++) {
        fx_submit_wait(s, &op);
        cr_assert_eq(op.result, 0);
        groups += st_list_count(op.list);
        deleted += op.applied;
        bool more = st_list_more(op.list);
        st_id after = st_list_after(op.list);
        memcpy(gid, after.p, after.n);
        st_list_free(op.list);
        st_list_free(op.changed);
        op = (st_op){
            .kind = ST_OP_TRIM, .limit = 2, .retain = {.messages = 1}, .gid = {gid, after.n}};
        if (!more)
            break;
    }
    cr_assert_eq(groups, 5, "each group once, with its horizon");
    cr_assert_eq(deleted, 10);
}
