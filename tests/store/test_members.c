/* A group's members, page by page in uid order (byte order): each once, with acks, and
 * a cursor that neither skips nor repeats while members come and go between pages. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_BIG 2500
#define N_MSGS 30

FX_STORE_SUITE(members, false);

/* ---- many ops at once: they commit in a few batches, not one each ------------------------ */

/* Submits n ops and waits for all; each must succeed. */
static void run_all(st_op *ops, size_t n)
{
    fx_run_all(s, ops, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ops[i].result, 0, "op %zu: %s", i, st_strerror(ops[i].result));
}

/* ---- the big group: N_BIG members "u0".."u2499" of several lengths, distinct acks --------- */

static char uids[N_BIG][8];
static const char *sorted[N_BIG]; /* the uids in byte order: what pages must give */
static uint64_t acks[N_BIG];      /* by the number in the uid */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static uint64_t want_ack(const char *uid)
{
    return acks[atoi(uid + 1)];
}

/* In byte order "u10" comes before "u2", and in the RocksDB keys (length first) after: a
 * listing in key order would fail here. */
static void make_big_group(const char *gid)
{
    static st_op ops[N_BIG];
    static st_ack ack_list[N_BIG];
    for (int i = 0; i < N_BIG; i++) {
        snprintf(uids[i], sizeof(uids[i]), "u%d", i);
        sorted[i] = uids[i];
        ops[i] = (st_op){.kind = ST_OP_JOIN, .gid = st_id_str(gid), .uid = st_id_str(uids[i])};
    }
    qsort(sorted, N_BIG, sizeof(sorted[0]), cmp_str);
    run_all(ops, N_BIG);
    for (int i = 0; i < N_MSGS; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "m%d", i);
        fx_append(s, gid, "u0", cid);
    }
    for (int i = 0; i < N_BIG; i++) {
        acks[i] = (uint64_t)(i * 7 % (N_MSGS + 1));
        ack_list[i] = (st_ack){.gid = st_id_str(gid), .uid = st_id_str(uids[i]), .mid = acks[i]};
    }
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, ack_list, N_BIG, &applied), 0);
    size_t zero = 0;
    for (int i = 0; i < N_BIG; i++)
        zero += acks[i] == 0;
    cr_assert_eq(applied, N_BIG - zero);
}

static bool id_is(st_id id, const char *want)
{
    return id.n == strlen(want) && memcmp(id.p, want, id.n) == 0;
}

static st_members *page(const char *gid, st_id after, size_t limit)
{
    st_members *m = NULL;
    int rc = st_read_members(s, st_id_str(gid), after, limit, &m);
    cr_assert_eq(rc, 0, "members of %s after %.*s: %s", gid, (int)after.n, after.p ? after.p : "",
                 st_strerror(rc));
    cr_assert_not_null(m);
    return m;
}

Test(members, pages_through_all_once_in_order, .timeout = 120)
{
    make_big_group("big");
    char after[16] = "";
    size_t seen = 0, pages = 0;
    for (bool more = true; more; pages++) {
        cr_assert_lt(pages, N_BIG / 100 + 1, "too many pages");
        st_members *m = page("big", st_id_str(after), 100);
        size_t n = st_members_count(m);
        more = st_members_more(m);
        cr_assert_eq(st_members_last_mid(m), N_MSGS);
        cr_assert_eq(n, 100, "page %zu: %zu members", pages, n);
        for (size_t i = 0; i < n; i++, seen++) {
            st_member x = st_members_at(m, i);
            cr_assert(id_is(x.uid, sorted[seen]), "member %zu: %.*s, expected %s", seen,
                      (int)x.uid.n, x.uid.p, sorted[seen]);
            cr_assert_eq(x.ack, want_ack(sorted[seen]), "ack of %s", sorted[seen]);
        }
        cr_assert_null(st_members_at(m, n).uid.p);
        st_member last = st_members_at(m, n - 1);
        memcpy(after, last.uid.p, last.uid.n);
        after[last.uid.n] = 0;
        st_members_free(m);
        cr_assert_eq(more, seen < N_BIG, "more after %zu members", seen);
    }
    cr_assert_eq(seen, N_BIG);
    cr_assert_eq(pages, N_BIG / 100);

    /* Past the last: empty, no more. */
    st_members *m = page("big", st_id_str(after), 100);
    cr_assert_eq(st_members_count(m), 0);
    cr_assert_not(st_members_more(m));
    cr_assert_eq(st_members_last_mid(m), N_MSGS);
    st_members_free(m);
}

Test(members, limits_and_errors, .timeout = 120)
{
    make_big_group("big");
    st_members *m = (st_members *)1;
    cr_assert_eq(st_read_members(s, st_id_str("nope"), st_id_str(""), 10, &m), ST_ENOGROUP);
    cr_assert_null(m);
    m = (st_members *)1;
    cr_assert_eq(st_read_members(s, st_id_str("nope"), st_id_str("u1"), 10, &m), ST_ENOGROUP);
    cr_assert_null(m);
    cr_assert_eq(st_read_members(s, st_id_str("big"), st_id_str(""), 0, &m), ST_EINVAL);
    cr_assert_null(m);
    cr_assert_eq(st_read_members(s, st_id_str("big"), st_id_str("a b"), 10, &m), ST_EINVAL);
    cr_assert_eq(st_read_members(s, st_id_str(""), st_id_str(""), 10, &m), ST_EINVAL);

    /* After a uid beyond the last one (byte order: "u999" is the greatest member). */
    const char *beyond[] = {"u9990", "u9999", "v", "~"};
    for (size_t i = 0; i < sizeof(beyond) / sizeof(beyond[0]); i++) {
        m = page("big", st_id_str(beyond[i]), 100);
        cr_assert_eq(st_members_count(m), 0, "after %s", beyond[i]);
        cr_assert_not(st_members_more(m));
        st_members_free(m);
    }
    m = page("big", st_id_str("u999"), 1); /* the last member itself */
    cr_assert_eq(st_members_count(m), 0);
    cr_assert_not(st_members_more(m));
    st_members_free(m);
    m = page("big", st_id_str("u998"), 5); /* exactly one left: no more */
    cr_assert_eq(st_members_count(m), 1);
    cr_assert(id_is(st_members_at(m, 0).uid, "u999"));
    cr_assert_not(st_members_more(m));
    st_members_free(m);

    /* A limit above the cap is the cap. */
    m = page("big", st_id_str(""), 5000);
    cr_assert_eq(st_members_count(m), ST_MEMBERS_MAX);
    cr_assert(st_members_more(m));
    for (size_t i = 0; i < ST_MEMBERS_MAX; i++)
        cr_assert(id_is(st_members_at(m, i).uid, sorted[i]));
    st_members_free(m);

    /* A page of one, from a cursor that is no member ("u1000a" sorts between u1000 and
     * u1001). */
    m = page("big", st_id_str("u1000a"), 1);
    cr_assert_eq(st_members_count(m), 1);
    cr_assert(id_is(st_members_at(m, 0).uid, "u1001"));
    cr_assert(st_members_more(m));
    st_members_free(m);
}

/* Leaves between pages: of the cursor itself, of the next one, of one already listed.
 * Every member that stays is listed once; none of them is skipped. */
Test(members, leave_between_pages_skips_nothing, .timeout = 120)
{
    make_big_group("big");
    st_members *m = page("big", st_id_str(""), 100);
    cr_assert_eq(st_members_count(m), 100);
    char cursor[16];
    st_member last = st_members_at(m, 99);
    memcpy(cursor, last.uid.p, last.uid.n);
    cursor[last.uid.n] = 0;
    cr_assert_str_eq(cursor, sorted[99]);
    st_members_free(m);

    cr_assert_eq(st_leave_sync(s, st_id_str("big"), st_id_str(sorted[99])), 0);  /* the cursor */
    cr_assert_eq(st_leave_sync(s, st_id_str("big"), st_id_str(sorted[100])), 0); /* next */
    cr_assert_eq(st_leave_sync(s, st_id_str("big"), st_id_str(sorted[5])), 0);   /* listed */
    cr_assert_eq(st_leave_sync(s, st_id_str("big"), st_id_str(sorted[150])), 0); /* ahead */

    m = page("big", st_id_str(cursor), 100);
    cr_assert_eq(st_members_count(m), 100);
    size_t want = 101;
    for (size_t i = 0; i < 100; i++, want++) {
        if (want == 150)
            want++; /* it left before this page was read */
        cr_assert(id_is(st_members_at(m, i).uid, sorted[want]), "member %zu: %.*s, expected %s", i,
                  (int)st_members_at(m, i).uid.n, st_members_at(m, i).uid.p, sorted[want]);
        cr_assert_eq(st_members_at(m, i).ack, want_ack(sorted[want]));
    }
    cr_assert(st_members_more(m));
    st_members_free(m);
}

/* The order is byte order on every backend: shorter ids before the longer ones they
 * begin, punctuation where ASCII puts it; the longest id; other groups stay out. */
Test(members, byte_order_of_odd_ids)
{
    char longest[ST_MAX_ID + 1];
    memset(longest, 'a', ST_MAX_ID);
    longest[ST_MAX_ID] = 0;
    const char *order[] = {"!", "a", "a!", "aa", longest, "ab", "abc", "b", "ba", "z", "~"};
    const size_t n = sizeof(order) / sizeof(order[0]);
    const size_t join_order[] = {7, 4, 0, 10, 2, 9, 3, 1, 8, 5, 6};
    for (size_t i = 0; i < n; i++)
        fx_join(s, "g", order[join_order[i]]);
    /* Neighbours in the members keys: a group whose id begins with "g", and one before. */
    fx_join(s, "g1", "a0");
    fx_join(s, "f", "a1");
    fx_join(s, "gg", "!");

    st_members *m = page("g", st_id_str(""), 100);
    cr_assert_eq(st_members_count(m), n);
    for (size_t i = 0; i < n; i++)
        cr_assert(id_is(st_members_at(m, i).uid, order[i]), "member %zu: %.*s, expected %s", i,
                  (int)st_members_at(m, i).uid.n, st_members_at(m, i).uid.p, order[i]);
    cr_assert_not(st_members_more(m));
    cr_assert_eq(st_members_last_mid(m), 0);
    cr_assert_eq(st_members_at(m, 0).ack, 0);
    st_members_free(m);

    /* Page by one and by three: the same order, each once. */
    for (size_t limit = 1; limit <= 3; limit += 2) {
        char after[ST_MAX_ID + 1] = "";
        size_t seen = 0;
        for (bool more = true; more;) {
            m = page("g", st_id_str(after), limit);
            more = st_members_more(m);
            for (size_t i = 0; i < st_members_count(m); i++, seen++) {
                cr_assert_lt(seen, n);
                cr_assert(id_is(st_members_at(m, i).uid, order[seen]), "limit %zu: member %zu",
                          limit, seen);
            }
            cr_assert_gt(st_members_count(m), 0, "limit %zu: an empty page said more", limit);
            st_member last = st_members_at(m, st_members_count(m) - 1);
            memcpy(after, last.uid.p, last.uid.n);
            after[last.uid.n] = 0;
            st_members_free(m);
        }
        cr_assert_eq(seen, n, "limit %zu", limit);
    }

    /* Cursors that are no members start at the next one in byte order. */
    const struct {
        const char *after, *first;
    } cursors[] = {{"a0", "aa"},  {"a", "a!"}, {"aaa", longest}, {"ab", "abc"}, {"abc", "b"},
                   {"aab", "ab"}, {"}", "~"},  {"0", "a"},       {"b!", "ba"}};
    for (size_t i = 0; i < sizeof(cursors) / sizeof(cursors[0]); i++) {
        m = page("g", st_id_str(cursors[i].after), 1);
        cr_assert_eq(st_members_count(m), 1, "after %s", cursors[i].after);
        cr_assert(id_is(st_members_at(m, 0).uid, cursors[i].first), "after %s: %.*s, expected %s",
                  cursors[i].after, (int)st_members_at(m, 0).uid.n, st_members_at(m, 0).uid.p,
                  cursors[i].first);
        st_members_free(m);
    }
}

/* A group whose members all left is still a group: an empty page, not ST_ENOGROUP. */
Test(members, empty_group)
{
    fx_join(s, "g", "a");
    fx_append(s, "g", "a", "1");
    cr_assert_eq(st_leave_sync(s, st_id_str("g"), st_id_str("a")), 0);
    st_members *m = page("g", st_id_str(""), 10);
    cr_assert_eq(st_members_count(m), 0);
    cr_assert_not(st_members_more(m));
    cr_assert_eq(st_members_last_mid(m), 1);
    cr_assert_null(st_members_at(m, 0).uid.p);
    st_members_free(m);
}

Test(members, as_an_op)
{
    fx_join(s, "g", "b");
    fx_join(s, "g", "a");
    fx_join(s, "g", "c");
    fx_append(s, "g", "a", "1");
    fx_append(s, "g", "a", "2");
    st_ack a = {.gid = st_id_str("g"), .uid = st_id_str("a"), .mid = 1};
    cr_assert_eq(st_acks_sync(s, &a, 1, NULL), 0);

    st_op op = {
        .kind = ST_OP_READ_MEMBERS, .gid = st_id_str("g"), .uid = st_id_str("a"), .limit = 1};
    int rc = fx_submit_wait(s, &op);
    cr_assert(rc == 0 || rc == ST_DONE, "%s", st_strerror(rc));
    cr_assert_eq(op.result, 0);
    cr_assert_not_null(op.members);
    cr_assert_eq(st_members_count(op.members), 1);
    cr_assert(id_is(st_members_at(op.members, 0).uid, "b"));
    cr_assert_eq(st_members_at(op.members, 0).ack, 0);
    cr_assert_eq(st_members_last_mid(op.members), 2);
    cr_assert(st_members_more(op.members));
    st_members_free(op.members);

    op = (st_op){.kind = ST_OP_READ_MEMBERS, .gid = st_id_str("g"), .limit = 10};
    rc = fx_submit_wait(s, &op);
    cr_assert(rc == 0 || rc == ST_DONE, "%s", st_strerror(rc));
    cr_assert_eq(op.result, 0);
    cr_assert_eq(st_members_count(op.members), 3);
    cr_assert(id_is(st_members_at(op.members, 0).uid, "a"));
    cr_assert_eq(st_members_at(op.members, 0).ack, 1);
    cr_assert(id_is(st_members_at(op.members, 2).uid, "c"));
    cr_assert_not(st_members_more(op.members));
    st_members_free(op.members);

    op = (st_op){.kind = ST_OP_READ_MEMBERS, .gid = st_id_str("g"), .limit = 0};
    cr_assert_eq(fx_submit_wait(s, &op), ST_EINVAL);
    op = (st_op){.kind = ST_OP_READ_MEMBERS, .gid = st_id_str("missing"), .limit = 5};
    rc = fx_submit_wait(s, &op);
    cr_assert(rc == 0 || rc == ST_DONE, "%s", st_strerror(rc));
    cr_assert_eq(op.result, ST_ENOGROUP);
    cr_assert_null(op.members);
}
