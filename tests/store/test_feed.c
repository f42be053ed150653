/*
 * The change feed (PostgreSQL): what one store commits, another store on the same
 * database hears, in commit order, with every field; its own commits it does not hear;
 * a record too large to announce comes as a hint; and a listener that reconnects catches
 * up from the change log, without a RESYNC. On RocksDB there is no feed: the tests are
 * skipped.
 */
#include "fixture.h"
#include "fixture_feed.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A new database on which b listens (into h, as node; up once its first word is heard)
 * and a writes; its URL (malloc'd: fx_feed_done). The test is skipped on RocksDB. */
static char *listener_and_writer(fx_heard *h, const char *node, st_store **b, st_store **a)
{
    pgfx_need("PostgreSQL only: RocksDB has one writer and no feed");
    char *where = fx_tmpdir();
    *b = fx_open_listening(where, h, node);
    fx_heard_await(h, 1);
    *a = fx_open(where, true);
    return where;
}

/* alice joins g and posts c1 and c2 (mids 1 and 2); once h heard them (after the first
 * word, RESYNC, and the join: 4 changes). */
static void alice_posts_two(st_store *a, fx_heard *h)
{
    fx_join(a, "g", "alice");
    fx_append(a, "g", "alice", "c1");
    fx_append(a, "g", "alice", "c2");
    fx_heard_await(h, 4);
}

/* alice's "hi" (cid c1) in g, and her ack of it: its mid. */
static uint64_t say_hi_and_ack(st_store *a)
{
    uint64_t mid = 0, ts = 0;
    bool dup = false;
    cr_assert_eq(st_append_sync(a, st_id_str("g"), st_id_str("alice"), st_id_str("c1"), "hi", 2,
                                &mid, &ts, &dup),
                 0);
    st_ack ack = {.gid = st_id_str("g"), .uid = st_id_str("alice"), .mid = mid};
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(a, &ack, 1, &applied), 0);
    return mid;
}

Test(feed, another_store_hears_every_change_in_commit_order, .timeout = 60)
{
    PGFX_ONE_DATABASE();
    static fx_heard h = FX_HEARD_INIT(0);
    st_store *a, *b;
    char *where = listener_and_writer(&h, "feed-test-1", &b, &a);
    cr_assert_eq(h.ch[0].kind, ST_CH_RESYNC, "the listener's first word");

    fx_join(a, "g", "alice");
    uint64_t mid = say_hi_and_ack(a), ts = 0;
    bool dup = false;
    static char big[9000];
    memset(big, 'x', sizeof(big));
    uint64_t mid2 = 0;
    cr_assert_eq(st_append_sync(a, st_id_str("g"), st_id_str("alice"), st_id_str("c2"), big,
                                sizeof(big), &mid2, &ts, &dup),
                 0);
    cr_assert_eq(st_leave_sync(a, st_id_str("g"), st_id_str("alice")), 0);
    fx_heard_await(&h, 6);
    usleep(200 * 1000);
    cr_assert_eq(fx_heard_count(&h), 6, "nothing more: %zu", fx_heard_count(&h));

    cr_assert_eq(h.ch[1].kind, ST_CH_JOIN);
    cr_assert_str_eq(h.ch[1].gid, "g");
    cr_assert_str_eq(h.ch[1].uid, "alice");
    cr_assert_eq(h.ch[1].ack, 0);
    cr_assert_eq(h.ch[2].kind, ST_CH_MSG);
    cr_assert_eq(h.ch[2].mid, mid);
    cr_assert(h.ch[2].has_record && h.ch[2].record_n == 2 && memcmp(h.ch[2].record, "hi", 2) == 0);
    cr_assert_gt(h.ch[2].ts, 0);
    cr_assert_eq(h.ch[3].kind, ST_CH_ACK);
    cr_assert_eq(h.ch[3].ack, mid);
    cr_assert_eq(h.ch[4].kind, ST_CH_MSG, "the large one: a hint");
    cr_assert_eq(h.ch[4].mid, mid2);
    cr_assert(!h.ch[4].has_record, "too large for a notification: announced without it");
    cr_assert_eq(h.ch[5].kind, ST_CH_LEAVE);
    cr_assert_str_eq(h.ch[5].uid, "alice");

    /* Its own commits it does not hear. */
    fx_join(b, "g", "bob");
    fx_append(b, "g", "bob", "b1");
    usleep(300 * 1000);
    cr_assert_eq(fx_heard_count(&h), 6);

    st_stats st;
    st_read_stats(b, &st);
    cr_assert(st.feed_connected);
    cr_assert_geq(st.feed_notifications, 4);
    cr_assert_eq(st.feed_changes, 5);
    st_read_stats(a, &st);
    cr_assert_eq(st.feed_hints, 1);
    fx_feed_done(where, a, b);
}

/* A read is heard as READ, with or without an ack in the same entry (ACK first). */
Test(feed, a_read_is_heard_apart_from_the_ack, .timeout = 60)
{
    PGFX_ONE_DATABASE();
    static fx_heard h = FX_HEARD_INIT(0);
    st_store *a, *b;
    char *where = listener_and_writer(&h, "feed-test-reads", &b, &a);
    alice_posts_two(a, &h);
    size_t base = 4;
    st_ack r = {.gid = st_id_str("g"), .uid = st_id_str("alice"), .read = 1, .has_read = true};
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(a, &r, 1, &applied), 0);
    st_ack both = {
        .gid = st_id_str("g"), .uid = st_id_str("alice"), .mid = 2, .read = 2, .has_read = true};
    cr_assert_eq(st_acks_sync(a, &both, 1, &applied), 0);
    fx_heard_await(&h, base + 3);
    cr_assert_eq(h.ch[base].kind, ST_CH_READ);
    cr_assert_str_eq(h.ch[base].uid, "alice");
    cr_assert_eq(h.ch[base].read, 1);
    cr_assert_eq(h.ch[base + 1].kind, ST_CH_ACK);
    cr_assert_eq(h.ch[base + 1].ack, 2);
    cr_assert_eq(h.ch[base + 2].kind, ST_CH_READ);
    cr_assert_eq(h.ch[base + 2].read, 2);
    fx_feed_done(where, a, b);
}

/* A version is heard with its record (or without, when too large: read it), a recall as
 * one; the change log keeps no body of a version (a recalled body must not stay there). */
Test(feed, versions_are_heard_and_the_log_keeps_no_body, .timeout = 60)
{
    PGFX_ONE_DATABASE();
    static fx_heard h = FX_HEARD_INIT(0);
    st_store *a, *b;
    char *where = listener_and_writer(&h, "feed-test-edits", &b, &a);
    alice_posts_two(a, &h);
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 1, &ver, false, "secret-v1", 9, NULL, NULL), 0);
    static char big[9000];
    memset(big, 'y', sizeof(big));
    ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 2, &ver, false, big, sizeof(big), NULL, NULL), 0);
    ver = 0;
    cr_assert_eq(st_edit_sync(a, st_id_str("g"), 1, &ver, true, "alice", 5, NULL, NULL), 0);
    fx_heard_await(&h, 7);
    cr_assert_eq(h.ch[4].kind, ST_CH_EDIT);
    cr_assert_eq(h.ch[4].mid, 1);
    cr_assert_eq(h.ch[4].ver, 1);
    cr_assert_not(h.ch[4].recalled);
    cr_assert(h.ch[4].has_record && h.ch[4].record_n == 9 &&
              memcmp(h.ch[4].record, "secret-v1", 9) == 0);
    cr_assert_gt(h.ch[4].ts, 0);
    cr_assert_eq(h.ch[5].kind, ST_CH_EDIT);
    cr_assert_eq(h.ch[5].mid, 2);
    cr_assert_not(h.ch[5].has_record, "too large: a hint");
    cr_assert_eq(h.ch[6].kind, ST_CH_EDIT);
    cr_assert_eq(h.ch[6].ver, 2);
    cr_assert(h.ch[6].recalled);
    cr_assert(h.ch[6].has_record && h.ch[6].record_n == 5);
    cr_assert_eq(pgfx_scalar(where, "SELECT count(*) FROM gw.changes WHERE body LIKE '%E g 1 %'"),
                 2, "the log's lines of the versions");
    cr_assert_eq(pgfx_scalar(where, "SELECT count(*) FROM gw.changes WHERE body LIKE '%e g %'"), 0,
                 "with no record");
    fx_feed_done(where, a, b);
}

/* A listener that lost its connection reads, when it is back, the change log from its
 * position: what was announced meanwhile, without a RESYNC. */
Test(feed, a_listener_that_lost_its_connection_catches_up_from_the_log, .timeout = 60)
{
    PGFX_ONE_DATABASE();
    static fx_heard h = FX_HEARD_INIT(0);
    st_store *a, *b;
    char *where = listener_and_writer(&h, "feed-test-2", &b, &a);
    cr_assert_eq(h.ch[0].kind, ST_CH_RESYNC, "the first connection: no position yet");
    fx_join(a, "g", "alice");
    fx_heard_await(&h, 2); /* heard as it came */
    /* Its connection ended by the database (as a failover or an operator would), and
     * none taken until the writes below are done. */
    fx_feed_cut(where, "feed-test-2");
    uint64_t mid = say_hi_and_ack(a);
    cr_assert_eq(st_leave_sync(a, st_id_str("g"), st_id_str("alice")), 0);
    usleep(300 * 1000);
    cr_assert_eq(fx_heard_count(&h), 2, "nothing heard while away");
    fx_feed_uncut(where);
    /* From the position of the first connection: the join again (a listener takes a
     * change twice without harm), the message as a hint (its record is in the table),
     * the ack, the leave, in commit order. */
    fx_heard_await(&h, 6);
    usleep(300 * 1000);
    cr_assert_eq(fx_heard_count(&h), 6, "nothing more: %zu", fx_heard_count(&h));
    cr_assert_eq(h.ch[2].kind, ST_CH_JOIN);
    cr_assert_eq(h.ch[3].kind, ST_CH_MSG);
    cr_assert_eq(h.ch[3].mid, mid);
    cr_assert(!h.ch[3].has_record, "a hint: read it");
    cr_assert_eq(h.ch[4].kind, ST_CH_ACK);
    cr_assert_eq(h.ch[4].ack, mid);
    cr_assert_eq(h.ch[5].kind, ST_CH_LEAVE);
    st_stats st;
    st_read_stats(b, &st);
    cr_assert_eq(st.feed_connects, 2);
    cr_assert_eq(st.feed_resyncs, 1, "no RESYNC: caught up by position");
    cr_assert_eq(st.feed_catch_ups, 1);
    cr_assert_eq(st.feed_catch_up_rows, 4);
    cr_assert_eq(st.feed_catch_up_changes, 4);
    fx_feed_done(where, a, b);
}

/* The change log keeps 10 minutes: rows older go (every store deletes them every 10 s).
 * A listener whose position is older than what went cannot catch up from the log, and
 * says RESYNC instead. */
Test(feed, a_listener_whose_position_was_pruned_says_resync, .timeout = 90)
{
    PGFX_ONE_DATABASE();
    static fx_heard h = FX_HEARD_INIT(0);
    st_store *a, *b;
    char *where = listener_and_writer(&h, "feed-test-3", &b, &a);
    fx_join(a, "g", "alice");
    say_hi_and_ack(a);
    fx_heard_await(&h, 4); /* heard as it came: the join, the message, the ack */
    cr_assert_geq(pgfx_scalar(where, "SELECT count(*) FROM gw.changes"), 3);
    /* As if they were written 10 minutes ago and more: the next prune takes them. */
    pgfx_scalar(where, "UPDATE gw.changes SET at_ms = 0; SELECT 0");
    for (int i = 0; i < 300 && pgfx_scalar(where, "SELECT count(*) FROM gw.changes") > 0; i++)
        usleep(100 * 1000);
    cr_assert_eq(pgfx_scalar(where, "SELECT count(*) FROM gw.changes"), 0, "pruned within 30 s");
    cr_assert_gt(pgfx_scalar(where, "SELECT xid::text::int8 FROM gw.changes_pruned"), 0);
    char admin[512], db[128];
    pgfx_admin_url(where, admin, sizeof(admin), db, sizeof(db));
    cr_assert_eq(pgfx_end_connections(admin, "gw-feed feed-test-3"), 1);
    fx_heard_await(&h, 5);
    cr_assert_eq(h.ch[4].kind, ST_CH_RESYNC, "its position is older than what the log keeps");
    st_stats st;
    st_read_stats(b, &st);
    cr_assert_eq(st.feed_resyncs, 2);
    cr_assert_eq(st.feed_catch_ups, 0);
    fx_feed_done(where, a, b);
}
