/* Reactions (store.h, ST_OP_REACT): stored once per (gid, mid, uid, key) and idempotent
 * (a duplicate takes no cseq); pages and changes show the counts per key in byte order
 * and the reader's own; at most ST_REACT_KEYS_MAX keys a message (ST_ETOOMANY); bad keys
 * ST_EINVAL; only members react (any_sender aside); unknown, recalled and gone messages
 * are refused; a recall and an erasure drop them; all of it survives a reopen. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

FX_STORE_SUITE(reactions, true);

typedef struct reacted {
    int rc;
    uint64_t cseq, count;
    bool duplicate;
} reacted;

static reacted react_n(const char *gid, uint64_t mid, const char *uid, const char *key,
                       size_t key_n, bool on)
{
    reacted r = {0};
    r.rc = st_react_sync(s, st_id_str(gid), mid, st_id_str(uid), (st_id){key, key_n}, on, &r.cseq,
                         &r.count, &r.duplicate);
    return r;
}

static reacted react(const char *gid, uint64_t mid, const char *uid, const char *key, bool on)
{
    return react_n(gid, mid, uid, key, strlen(key), on);
}

static void react_ok(const char *gid, uint64_t mid, const char *uid, const char *key, bool on)
{
    reacted r = react(gid, mid, uid, key, on);
    cr_assert_eq(r.rc, 0, "react %s %s: %s", uid, key, st_strerror(r.rc));
}

static uint64_t last_cseq(const char *gid)
{
    st_op op = {.kind = ST_OP_READ_GROUP, .gid = st_id_str(gid)};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    return op.last_cseq;
}

/* The page of [mid, mid] as the reader uid (NULL: none) sees it. */
static st_page *page_of(const char *gid, uint64_t mid, const char *uid)
{
    st_op op = {.kind = ST_OP_READ_PAGE,
                .gid = st_id_str(gid),
                .dir = ST_AFTER,
                .from = mid - 1,
                .limit = 1,
                .uid = uid ? st_id_str(uid) : (st_id){NULL, 0}};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0, "page: %s", st_strerror(op.result));
    cr_assert_eq(st_page_count(op.page), 1);
    return op.page;
}

/* The reaction of key on m (NULL: none). */
static const st_reaction *find(const st_msg *m, const char *key)
{
    for (size_t i = 0; i < m->n_reactions; i++)
        if (m->reactions[i].key.n == strlen(key) &&
            memcmp(m->reactions[i].key.p, key, m->reactions[i].key.n) == 0)
            return &m->reactions[i];
    return NULL;
}

static void fill(void)
{
    fx_join(s, "g", "alice");
    fx_join(s, "g", "bob");
    fx_join(s, "g", "carol");
    fx_append(s, "g", "alice", "one");
    fx_append(s, "g", "bob", "two");
    fx_append(s, "g", "carol", "three");
}

Test(reactions, setting_twice_or_clearing_what_is_unset_changes_nothing)
{
    fill();
    reacted r = react("g", 2, "alice", "\xf0\x9f\x91\x8d", true); /* U+1F44D */
    cr_assert_eq(r.rc, 0);
    cr_assert_eq(r.cseq, 1);
    cr_assert_eq(r.count, 1);
    cr_assert_not(r.duplicate);
    r = react("g", 2, "alice", "\xf0\x9f\x91\x8d", true);
    cr_assert_eq(r.rc, 0);
    cr_assert(r.duplicate);
    cr_assert_eq(r.cseq, 1, "the message's current cseq");
    cr_assert_eq(r.count, 1, "stored once per user and key");
    cr_assert_eq(last_cseq("g"), 1, "a duplicate takes no cseq");
    r = react("g", 2, "bob", "\xf0\x9f\x91\x8d", false);
    cr_assert(r.duplicate, "bob had not set it");
    cr_assert_eq(r.count, 1);
    r = react("g", 2, "alice", "\xf0\x9f\x91\x8d", false);
    cr_assert_not(r.duplicate);
    cr_assert_eq(r.cseq, 2);
    cr_assert_eq(r.count, 0);
    r = react("g", 2, "alice", "\xf0\x9f\x91\x8d", false);
    cr_assert(r.duplicate);
    cr_assert_eq(r.cseq, 2);
    cr_assert_eq(last_cseq("g"), 2);
    st_page *p = page_of("g", 2, "alice");
    cr_assert_eq(st_page_at(p, 0)->n_reactions, 0, "a key at 0 is gone");
    cr_assert_eq(st_page_at(p, 0)->cseq, 2);
    st_page_free(p);
}

Test(reactions, pages_show_counts_in_key_order_and_the_readers_own)
{
    fill();
    react_ok("g", 1, "alice", "b", true);
    react_ok("g", 1, "bob", "b", true);
    react_ok("g", 1, "carol", "b", true);
    react_ok("g", 1, "bob", "ab", true);
    react_ok("g", 1, "carol", "a", true);
    reacted r = react("g", 1, "alice", "a", true);
    cr_assert_eq(r.count, 2);
    st_page *p = page_of("g", 1, "alice");
    const st_msg *m = st_page_at(p, 0);
    cr_assert_eq(m->n_reactions, 3);
    const char *order[] = {"a", "ab", "b"};
    uint64_t counts[] = {2, 1, 3};
    bool mine[] = {true, false, true};
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(m->reactions[i].key.n, strlen(order[i]));
        cr_assert_arr_eq(m->reactions[i].key.p, order[i], m->reactions[i].key.n, "byte order");
        cr_assert_eq(m->reactions[i].count, counts[i]);
        cr_assert_eq(m->reactions[i].mine, mine[i], "alice's: %s", order[i]);
    }
    cr_assert_eq(m->cseq, 6);
    st_page_free(p);
    p = page_of("g", 1, "bob");
    cr_assert(find(st_page_at(p, 0), "ab")->mine);
    cr_assert_not(find(st_page_at(p, 0), "a")->mine);
    st_page_free(p);
    p = page_of("g", 1, NULL);
    for (size_t i = 0; i < 3; i++)
        cr_assert_not(st_page_at(p, 0)->reactions[i].mine, "no reader: none is mine");
    st_page_free(p);
    /* A message with none has none; a wide page mixes them. */
    p = page_of("g", 2, "alice");
    cr_assert_eq(st_page_at(p, 0)->n_reactions, 0);
    cr_assert_null(st_page_at(p, 0)->reactions);
    st_page_free(p);
    react_ok("g", 3, "alice", "z", true);
    st_op op = {.kind = ST_OP_READ_PAGE,
                .gid = st_id_str("g"),
                .dir = ST_BEFORE,
                .from = 4,
                .limit = 10,
                .uid = st_id_str("alice")};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    cr_assert_eq(st_page_count(op.page), 3);
    cr_assert_eq(st_page_at(op.page, 0)->n_reactions, 3);
    cr_assert_eq(st_page_at(op.page, 1)->n_reactions, 0);
    cr_assert_eq(st_page_at(op.page, 2)->n_reactions, 1);
    cr_assert(st_page_at(op.page, 2)->reactions[0].mine);
    st_page_free(op.page);
    /* The changes show the same, mine included. */
    st_op ch = {.kind = ST_OP_READ_CHANGES,
                .gid = st_id_str("g"),
                .from = 0,
                .limit = 10,
                .uid = st_id_str("bob")};
    fx_submit_wait(s, &ch);
    cr_assert_eq(ch.result, 0);
    cr_assert_eq(st_page_count(ch.page), 2);
    const st_msg *c = st_page_at(ch.page, 0);
    cr_assert_eq(c->mid, 1);
    cr_assert_eq(c->n_reactions, 3);
    cr_assert(find(c, "ab")->mine);
    cr_assert_eq(find(c, "b")->count, 3);
    cr_assert_eq(st_page_at(ch.page, 1)->mid, 3);
    cr_assert_not(st_page_at(ch.page, 1)->reactions[0].mine);
    st_page_free(ch.page);
    /* All of it survives a reopen. */
    st_close(s);
    s = fx_open(dir, true);
    p = page_of("g", 1, "carol");
    cr_assert_eq(st_page_at(p, 0)->n_reactions, 3);
    cr_assert(find(st_page_at(p, 0), "a")->mine);
    cr_assert_eq(find(st_page_at(p, 0), "b")->count, 3);
    st_page_free(p);
    r = react("g", 1, "carol", "a", true);
    cr_assert(r.duplicate);
}

Test(reactions, a_21st_key_is_too_many)
{
    fill();
    char key[8];
    for (unsigned i = 0; i < ST_REACT_KEYS_MAX; i++) {
        snprintf(key, sizeof(key), "k%02u", i);
        react_ok("g", 1, "alice", key, true);
    }
    uint64_t before = last_cseq("g");
    reacted r = react("g", 1, "bob", "k99", true);
    cr_assert_eq(r.rc, ST_ETOOMANY, "%s", st_strerror(r.rc));
    cr_assert_eq(last_cseq("g"), before, "nothing stored");
    /* A key it has still takes more users, and one that goes makes room. */
    r = react("g", 1, "bob", "k07", true);
    cr_assert_eq(r.rc, 0);
    cr_assert_eq(r.count, 2);
    react_ok("g", 1, "alice", "k00", false);
    r = react("g", 1, "bob", "k99", true);
    cr_assert_eq(r.rc, 0);
    st_page *p = page_of("g", 1, NULL);
    cr_assert_eq(st_page_at(p, 0)->n_reactions, ST_REACT_KEYS_MAX);
    st_page_free(p);
}

Test(reactions, bad_keys_are_refused)
{
    fill();
    struct {
        const char *k;
        size_t n;
    } bad[] = {
        {"", 0},
        {"a\nb", 3},
        {"tab\t", 4},
        {"\x7f", 1},
        {"\xc2\x85", 2},     /* U+0085, a C1 control */
        {"\xff", 1},         /* not UTF-8 */
        {"\xc0\xaf", 2},     /* overlong */
        {"\xed\xa0\x80", 3}, /* a surrogate */
        {"\xf0\x9f\x91", 3}, /* cut short */
        {"abcdefghijklmnopqrstuvwxyz0123456", 33},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        reacted r = react_n("g", 1, "alice", bad[i].k, bad[i].n, true);
        cr_assert_eq(r.rc, ST_EINVAL, "key %zu: %s", i, st_strerror(r.rc));
    }
    st_op null_key = {.kind = ST_OP_REACT,
                      .gid = st_id_str("g"),
                      .mid = 1,
                      .uid = st_id_str("alice"),
                      .key_n = 1,
                      .on = true};
    cr_assert_eq(fx_submit_wait(s, &null_key), ST_EINVAL);
    cr_assert_eq(last_cseq("g"), 0);
    /* 32 bytes, spaces and non-ASCII letters are fine. */
    const char *good[] = {"abcdefghijklmnopqrstuvwxyz012345", "thumbs up", "\xc3\xa9t\xc3\xa9",
                          "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        reacted r = react("g", 1, "alice", good[i], true);
        cr_assert_eq(r.rc, 0, "good key %zu: %s", i, st_strerror(r.rc));
    }
}

Test(reactions, only_members_react_on_messages_that_are_there)
{
    fill();
    cr_assert_eq(react("g", 1, "mallory", "x", true).rc, ST_ENOTMEMBER);
    cr_assert_eq(react("nope", 1, "alice", "x", true).rc, ST_ENOGROUP);
    cr_assert_eq(react("g", 4, "alice", "x", true).rc, ST_ENOMSG);
    st_op any = {.kind = ST_OP_REACT,
                 .gid = st_id_str("g"),
                 .mid = 1,
                 .uid = st_id_str("a-bot"),
                 .key = "x",
                 .key_n = 1,
                 .on = true,
                 .any_sender = true};
    fx_submit_wait(s, &any);
    cr_assert_eq(any.result, 0, "the API's: any uid");
    cr_assert_eq(any.count, 1);
    /* A recalled message: refused, and its reactions went with the recall. */
    react_ok("g", 2, "alice", "x", true);
    react_ok("g", 2, "carol", "y", true);
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(s, st_id_str("g"), 2, &ver, true, "T", 1, NULL, NULL), 0);
    cr_assert_eq(last_cseq("g"), 4, "the recall is a change");
    cr_assert_eq(react("g", 2, "bob", "x", true).rc, ST_EGONE);
    cr_assert_eq(react("g", 2, "alice", "x", false).rc, ST_EGONE);
    st_page *p = page_of("g", 2, "alice");
    cr_assert(st_page_at(p, 0)->recalled);
    cr_assert_eq(st_page_at(p, 0)->n_reactions, 0);
    cr_assert_eq(st_page_at(p, 0)->cseq, 4);
    st_page_free(p);
    /* Below the horizon: gone, so no message. */
    st_op trim = {.kind = ST_OP_TRIM, .limit = 10, .retain = {.messages = 1}};
    fx_submit_wait(s, &trim);
    cr_assert_eq(trim.result, 0);
    st_list_free(trim.list);
    st_list_free(trim.changed);
    cr_assert_eq(react("g", 1, "alice", "x", true).rc, ST_ENOMSG);
    cr_assert_eq(react("g", 3, "alice", "x", true).rc, 0, "the last one stays");
}

Test(reactions, a_recall_and_an_erasure_drop_them_and_take_cseqs)
{
    fill();
    react_ok("g", 1, "bob", "x", true);   /* on alice's message */
    react_ok("g", 2, "alice", "x", true); /* alice's on bob's */
    react_ok("g", 2, "carol", "x", true);
    react_ok("g", 3, "alice", "y", true);
    react_ok("g", 3, "alice", "z", true);
    cr_assert_eq(last_cseq("g"), 5);
    st_op op = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    st_list_free(op.list);
    cr_assert_eq(st_list_count(op.changed), 1);
    cr_assert_eq(st_list_at(op.changed, 0)->hi, 9,
                 "the tombstone of 1, and 2, 3 (twice) losing alice's reactions");
    st_list_free(op.changed);
    st_op r = {.kind = ST_OP_READ_PAGE,
               .gid = st_id_str("g"),
               .dir = ST_AFTER,
               .from = 0,
               .limit = 10,
               .uid = st_id_str("carol")};
    fx_submit_wait(s, &r);
    cr_assert_eq(r.result, 0);
    const st_msg *m1 = st_page_at(r.page, 0), *m2 = st_page_at(r.page, 1),
                 *m3 = st_page_at(r.page, 2);
    cr_assert(m1->recalled);
    cr_assert_eq(m1->n_reactions, 0, "bob's went with the tombstone");
    cr_assert_eq(m2->n_reactions, 1);
    cr_assert_eq(m2->reactions[0].count, 1, "carol's stays");
    cr_assert(m2->reactions[0].mine);
    cr_assert_eq(m3->n_reactions, 0);
    cr_assert_eq(m3->cseq, 9);
    st_page_free(r.page);
    /* Bob's reaction went with the tombstone: setting it again is new, and erasing bob
     * later finds nothing of it to change on message 1. */
    cr_assert_eq(react("g", 1, "bob", "x", true).rc, ST_EGONE);
    st_op bob = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("bob"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &bob);
    cr_assert_eq(bob.result, 0);
    st_list_free(bob.list);
    cr_assert_eq(st_list_at(bob.changed, 0)->hi, 10, "bob's tombstone of 2 alone");
    st_list_free(bob.changed);
}

Test(reactions, a_reaction_and_a_recall_in_one_batch_see_each_other)
{
    fill();
    st_op ops[3] = {
        {.kind = ST_OP_REACT,
         .gid = st_id_str("g"),
         .mid = 2,
         .uid = st_id_str("alice"),
         .key = "x",
         .key_n = 1,
         .on = true},
        {.kind = ST_OP_EDIT,
         .gid = st_id_str("g"),
         .mid = 2,
         .recall = true,
         .record = "T",
         .record_n = 1},
        {.kind = ST_OP_REACT,
         .gid = st_id_str("g"),
         .mid = 2,
         .uid = st_id_str("carol"),
         .key = "x",
         .key_n = 1,
         .on = true},
    };
    fx_run_all(s, ops, 3);
    cr_assert_eq(ops[0].result, 0);
    cr_assert_eq(ops[0].cseq, 1);
    cr_assert_eq(ops[1].result, 0);
    cr_assert_eq(ops[1].cseq, 2);
    cr_assert_eq(ops[2].result, ST_EGONE);
    /* alice's reaction went with the recall, though it was only in the batch. */
    st_op erase = {
        .kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &erase);
    cr_assert_eq(erase.result, 0);
    st_list_free(erase.list);
    cr_assert_eq(st_list_at(erase.changed, 0)->hi, 3, "alice's message 1 alone");
    st_list_free(erase.changed);
}
