/* A message's later versions (store.h, ST_OP_EDIT): an edit keeps the mid and makes the
 * next version; the same version again with the same record is a duplicate, another
 * record under a taken version is stale; a recall leaves a tombstone that no edit
 * changes; pages show the latest version; all of it survives a reopen; mids stay dense. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

FX_STORE_SUITE(edits, true);

static int edit(uint64_t mid, uint64_t *ver, const char *record, bool recall, bool *dup)
{
    uint64_t ts = 0;
    return st_edit_sync(s, st_id_str("g"), mid, ver, recall, record, strlen(record), &ts, dup);
}

/* The one message of mid in gid, as a page shows it (its record copied into rec). */
static st_msg one_in(st_store *st, const char *gid, uint64_t mid, char *rec, size_t cap)
{
    st_page *p = NULL;
    cr_assert_eq(st_read_page(st, st_id_str(gid), ST_AFTER, mid - 1, 1, &p), 0);
    cr_assert_eq(st_page_count(p), 1);
    st_msg m = *st_page_at(p, 0);
    cr_assert_eq(m.mid, mid);
    cr_assert_lt(m.record_n, cap);
    memcpy(rec, m.record, m.record_n);
    rec[m.record_n] = 0;
    m.record = NULL; /* the page goes */
    st_page_free(p);
    return m;
}

static st_msg one(st_store *st, uint64_t mid, char *rec, size_t cap)
{
    return one_in(st, "g", mid, rec, cap);
}

static void fill(void)
{
    fx_join(s, "g", "alice");
    fx_append(s, "g", "alice", "one");
    fx_append(s, "g", "alice", "two");
    fx_append(s, "g", "alice", "three");
}

Test(edits, an_edit_keeps_the_mid_and_makes_the_next_version)
{
    fill();
    char rec[64];
    st_msg m = one(s, 2, rec, sizeof(rec));
    cr_assert_eq(m.ver, 0, "as sent");
    cr_assert_not(m.recalled);
    uint64_t sent_ts = m.ts, ver = 1;
    bool dup = true;
    cr_assert_eq(edit(2, &ver, "two, edited", false, &dup), 0);
    cr_assert_eq(ver, 1);
    cr_assert_not(dup);
    m = one(s, 2, rec, sizeof(rec));
    cr_assert_str_eq(rec, "two, edited");
    cr_assert_eq(m.ver, 1);
    cr_assert_eq(m.ts, sent_ts, "when it was sent stays");
    cr_assert_geq(m.ver_ts, sent_ts);
    /* ver 0: whichever is next. */
    ver = 0;
    cr_assert_eq(edit(2, &ver, "two, again", false, &dup), 0);
    cr_assert_eq(ver, 2);
    uint64_t last = 0;
    cr_assert_eq(st_read_last_mid(s, st_id_str("g"), &last), 0);
    cr_assert_eq(last, 3, "no new mid");
    /* The neighbours are untouched. */
    one(s, 1, rec, sizeof(rec));
    cr_assert_str_eq(rec, "one");
    one(s, 3, rec, sizeof(rec));
    cr_assert_str_eq(rec, "three");
}

Test(edits, the_same_version_again_is_a_duplicate_and_another_is_stale)
{
    fill();
    uint64_t ver = 1;
    bool dup = false;
    cr_assert_eq(edit(1, &ver, "one, edited", false, &dup), 0);
    ver = 1;
    cr_assert_eq(edit(1, &ver, "one, edited", false, &dup), 0, "a resent edit");
    cr_assert(dup);
    cr_assert_eq(ver, 1);
    ver = 1;
    cr_assert_eq(edit(1, &ver, "one, other", false, &dup), ST_ESTALE, "version 1 is taken");
    ver = 3;
    cr_assert_eq(edit(1, &ver, "one, later", false, &dup), ST_ESTALE, "2 comes first");
    char rec[64];
    st_msg m = one(s, 1, rec, sizeof(rec));
    cr_assert_str_eq(rec, "one, edited");
    cr_assert_eq(m.ver, 1);
}

Test(edits, a_recall_leaves_a_tombstone_no_edit_changes)
{
    fill();
    uint64_t ver = 0;
    bool dup = true;
    cr_assert_eq(edit(2, &ver, "alice", true, &dup), 0);
    cr_assert_eq(ver, 1);
    cr_assert_not(dup);
    char rec[64];
    st_msg m = one(s, 2, rec, sizeof(rec));
    cr_assert(m.recalled);
    cr_assert_str_eq(rec, "alice", "the tombstone's record");
    ver = 0;
    cr_assert_eq(edit(2, &ver, "back", false, &dup), ST_EGONE);
    ver = 0;
    cr_assert_eq(edit(2, &ver, "alice", true, &dup), 0, "a recall again");
    cr_assert(dup);
    cr_assert_eq(ver, 1);
    /* Mids stay dense: the page over all three has three. */
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, 10, &p), 0);
    cr_assert_eq(st_page_count(p), 3);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(st_page_at(p, i)->mid, i + 1);
    cr_assert(st_page_at(p, 1)->recalled);
    cr_assert_not(st_page_at(p, 0)->recalled);
    st_page_free(p);
}

Test(edits, unknown_messages_and_groups_are_refused)
{
    fill();
    uint64_t ver = 0;
    bool dup;
    cr_assert_eq(edit(4, &ver, "x", false, &dup), ST_ENOMSG, "past the last mid");
    cr_assert_eq(st_edit_sync(s, st_id_str("nope"), 1, &ver, false, "x", 1, NULL, &dup),
                 ST_ENOGROUP);
    st_op bad = {.kind = ST_OP_EDIT, .gid = st_id_str("g"), .mid = 0, .record = "x", .record_n = 1};
    cr_assert_eq(fx_submit_wait(s, &bad), ST_EINVAL, "mid 0");
}

Test(edits, versions_survive_a_reopen)
{
    fill();
    uint64_t ver = 0;
    bool dup;
    cr_assert_eq(edit(1, &ver, "one, edited", false, &dup), 0);
    ver = 0;
    cr_assert_eq(edit(3, &ver, "alice", true, &dup), 0);
    st_close(s);
    s = fx_open(dir, true);
    char rec[64];
    st_msg m = one(s, 1, rec, sizeof(rec));
    cr_assert_str_eq(rec, "one, edited");
    cr_assert_eq(m.ver, 1);
    m = one(s, 3, rec, sizeof(rec));
    cr_assert(m.recalled);
    cr_assert_eq(m.ver, 1);
    ver = 1;
    cr_assert_eq(edit(1, &ver, "one, edited", false, &dup), 0);
    cr_assert(dup, "the version is known after the reopen");
}

/* Edits of one message in one batch: the second sees the first. */
Test(edits, edits_in_one_batch_see_each_other)
{
    fill();
    st_op ops[3] = {
        {.kind = ST_OP_EDIT,
         .gid = st_id_str("g"),
         .mid = 2,
         .ver = 1,
         .record = "a",
         .record_n = 1},
        {.kind = ST_OP_EDIT,
         .gid = st_id_str("g"),
         .mid = 2,
         .ver = 1,
         .record = "b",
         .record_n = 1},
        {.kind = ST_OP_EDIT,
         .gid = st_id_str("g"),
         .mid = 2,
         .ver = 2,
         .record = "c",
         .record_n = 1},
    };
    fx_run_all(s, ops, 3);
    cr_assert_eq(ops[0].result, 0);
    cr_assert_eq(ops[1].result, ST_ESTALE);
    cr_assert_eq(ops[2].result, 0);
    char rec[8];
    st_msg m = one(s, 2, rec, sizeof(rec));
    cr_assert_str_eq(rec, "c");
    cr_assert_eq(m.ver, 2);
}

/* A person's erasure: every message it sent a tombstone, its memberships and its last_seen
 * gone, the others' messages as they were; a second erasure finds nothing. */
Test(edits, erasing_a_user_leaves_no_message_of_theirs)
{
    fill(); /* alice: one, two, three in g */
    fx_join(s, "g", "bob");
    fx_append(s, "g", "bob", "bobs");
    fx_join(s, "h", "alice");
    fx_append(s, "h", "alice", "four");
    uint64_t ver = 0;
    bool dup;
    cr_assert_eq(edit(2, &ver, "alice", true, &dup), 0, "one recalled before: not counted");
    st_seen seen = {st_id_str("alice"), 1234};
    st_op so = {.kind = ST_OP_SEEN, .seen = &seen, .n_seen = 1};
    fx_submit_wait(s, &so);
    st_op op = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0, "%s", st_strerror(op.result));
    cr_assert_eq(op.applied, 3, "one, three and four");
    cr_assert_eq(st_list_count(op.list), 2);
    cr_assert(st_list_at(op.list, 0)->gid.n == 1 && st_list_at(op.list, 0)->gid.p[0] == 'g');
    cr_assert(st_list_at(op.list, 1)->gid.n == 1 && st_list_at(op.list, 1)->gid.p[0] == 'h');
    st_list_free(op.list);
    st_list_free(op.changed);
    char rec[64];
    for (uint64_t mid = 1; mid <= 3; mid++) {
        st_msg m = one(s, mid, rec, sizeof(rec));
        cr_assert(m.recalled, "mid %lu", (unsigned long)mid);
        cr_assert_str_eq(rec, mid == 2 ? "alice" : "T", "the recall before keeps its tombstone");
    }
    st_msg m = one(s, 4, rec, sizeof(rec));
    cr_assert_not(m.recalled);
    cr_assert_str_eq(rec, "bobs");
    /* No membership, no groups, no last_seen; bob's membership stays. */
    uint64_t ack = 0;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("alice"), &ack), ST_ENOTMEMBER);
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("bob"), &ack), 0);
    st_op gs = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str("alice")};
    fx_submit_wait(s, &gs);
    cr_assert_eq(st_groups_count(gs.groups), 0);
    st_groups_free(gs.groups);
    seen.ms = 99;
    st_op rs = {.kind = ST_OP_READ_SEEN, .seen = &seen, .n_seen = 1};
    fx_submit_wait(s, &rs);
    cr_assert_eq(seen.ms, 0, "last_seen gone");
    /* Again: nothing left to erase. */
    st_op again = {
        .kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "T", .record_n = 1};
    fx_submit_wait(s, &again);
    cr_assert_eq(again.result, 0);
    cr_assert_eq(again.applied, 0);
    cr_assert_eq(st_list_count(again.list), 0);
    st_list_free(again.list);
}

/* A group's deletion: its messages and memberships gone, the others' groups untouched;
 * the group no longer exists. */
Test(edits, deleting_a_group_leaves_nothing_of_it)
{
    fill(); /* alice: one, two, three in g */
    fx_join(s, "g", "bob");
    fx_join(s, "h", "alice");
    fx_append(s, "h", "alice", "four");
    st_op op = {.kind = ST_OP_DELETE_GROUP, .gid = st_id_str("g")};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0, "%s", st_strerror(op.result));
    cr_assert_eq(op.applied, 3, "its last mid");
    cr_assert_eq(st_list_count(op.list), 2, "its members");
    bool alice = false, bob = false; /* in no promised order */
    for (size_t i = 0; i < 2; i++) {
        const st_item *it = st_list_at(op.list, i);
        alice |= it->text_n == 5 && memcmp(it->text, "alice", 5) == 0;
        bob |= it->text_n == 3 && memcmp(it->text, "bob", 3) == 0;
    }
    cr_assert(alice && bob);
    st_list_free(op.list);
    st_list_free(op.changed);
    uint64_t last = 0, ack = 0;
    cr_assert_eq(st_read_last_mid(s, st_id_str("g"), &last), ST_ENOGROUP);
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, 10, &p), ST_ENOGROUP);
    st_page_free(p);
    cr_assert_eq(st_read_ack(s, st_id_str("h"), st_id_str("alice"), &ack), 0, "h stays");
    st_op gs = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str("alice")};
    fx_submit_wait(s, &gs);
    cr_assert_eq(st_groups_count(gs.groups), 1, "only h is left of alice's groups");
    st_groups_free(gs.groups);
    char rec[64];
    one_in(s, "h", 1, rec, sizeof(rec));
    cr_assert_str_eq(rec, "four");
    st_op again = {.kind = ST_OP_DELETE_GROUP, .gid = st_id_str("g")};
    fx_submit_wait(s, &again);
    cr_assert_eq(again.result, ST_ENOGROUP);
    st_list_free(again.list);
    /* A group of that name can be made again, from mid 1. */
    fx_join(s, "g", "carol");
    cr_assert_eq(fx_append(s, "g", "carol", "anew"), 1);
}
