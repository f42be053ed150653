/*
 * Changes and reactions (docs/PROTOCOL.md, Changes and reactions; issue 36), against the
 * real gateway on the suite's backend (two nodes over one database in the PostgreSQL
 * pass where it says so):
 *   - every change to a message takes the group's next cseq, pushed with it (edited,
 *     recalled, reacted); `changes` answers them folded (one entry per message, its
 *     latest state), in cseq order, a page at a time; last_cseq in joined, welcome, page;
 *   - a client that was away sees the hole in the pushes' cseqs and fills it by `changes`;
 *   - react's errors: a bad key, a 21st key, not a member, a recalled message, an
 *     unknown mid; a repeat is a duplicate (no cseq, no push);
 *   - an erasure and a retention pass push `changed`; the log's own horizon answers
 *     changes_gone_before; a deleted group's `left` carries its cseq;
 *   - a reaction flood: the send rate bounds it, a slow reader is told `changed` instead
 *     of the pushes, and the memory stays;
 *   - the JSON subprotocol and the server API.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "rawws.h"
#include "tclock.h"
#include "watch.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

GWFX_PAIR_SUITE(changes, fa, fb, 120);

static pr_event react(gwc_conn *k, uint64_t rid, const char *gid, uint64_t mid, const char *key,
                      bool on, enum pr_ev_type want)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_react(&sb, rid, gwfx_sl(gid), mid, gwfx_sl(key), on), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    return gwfx_reply(k, rid, want);
}

static pr_event edit(gwc_conn *k, uint64_t rid, uint64_t mid, const char *text)
{
    return gwfx_edit(k, rid, "g", mid, 0, text, PR_EV_EDITED);
}

static pr_event recall(gwc_conn *k, uint64_t rid, uint64_t mid)
{
    return gwfx_recall(k, rid, "g", mid, PR_EV_RECALLED);
}

/* One entry of a changes reply, copied out of the event. */
typedef struct entry {
    uint64_t mid, cseq, ver;
    bool recalled;
    char body[64];
    char rx[128]; /* "key=count*," ... (* : mine), in the order sent */
} entry;

typedef struct chpage {
    uint64_t after, upto, last_cseq, first_mid, last_mid, gone;
    bool more;
    size_t n;
    entry e[16];
} chpage;

static void take_entries(const pr_event *ev, entry *e, size_t *n)
{
    *n = ev->n_items;
    cr_assert_leq(*n, 16);
    for (size_t i = 0; i < *n; i++) {
        pr_message m;
        cr_assert_eq(pr_event_message(ev, i, &m), 0);
        e[i] = (entry){.mid = m.mid, .cseq = m.cseq, .ver = m.ver, .recalled = m.recalled};
        snprintf(e[i].body, sizeof(e[i].body), "%.*s", (int)m.body.data.n,
                 (const char *)m.body.data.p);
        for (size_t k = 0; k < m.n_reactions; k++) {
            pr_reaction r;
            cr_assert_eq(pr_message_reaction(&m, k, &r), 0);
            size_t l = strlen(e[i].rx);
            snprintf(e[i].rx + l, sizeof(e[i].rx) - l, "%.*s=%lu%s,", (int)r.key.n,
                     (const char *)r.key.p, (unsigned long)r.count, r.mine ? "*" : "");
        }
    }
}

static chpage changes(gwc_conn *k, const char *gid, uint64_t after, uint32_t limit)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_changes_req(&sb, 900, gwfx_sl(gid), after, limit), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev = gwfx_reply(k, 900, PR_EV_CHANGES);
    chpage p = {.after = ev.after,
                .upto = ev.upto,
                .last_cseq = ev.last_cseq,
                .first_mid = ev.first_mid,
                .last_mid = ev.last_mid,
                .gone = ev.changes_gone_before,
                .more = ev.more};
    take_entries(&ev, p.e, &p.n);
    return p;
}

/* A page of g after 0: its last_cseq and entries. */
static chpage page(gwc_conn *k)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_pull(&sb, 901, gwfx_sl("g"), false, 0, 10), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev = gwfx_reply(k, 901, PR_EV_PAGE);
    chpage p = {.last_cseq = ev.last_cseq, .first_mid = ev.first_mid, .last_mid = ev.last_mid};
    take_entries(&ev, p.e, &p.n);
    return p;
}

Test(changes, changes_are_numbered_pushed_and_folded, .timeout = 120)
{
    gwfx *other = gwfx_start_nodes(&fa, &fb, NULL);
    gwc_conn *alice, *bob;
    gwfx_login_two(&fa, "alice", other, "bob", "g", &alice, &bob);
    gwfx_send_msg(alice, "g", "c1", "one");
    gwfx_send_msg(alice, "g", "c2", "two");
    gwfx_send_msg(alice, "g", "c3", "three");

    pr_event ev = edit(alice, 1, 1, "one, edited");
    cr_assert_eq(ev.msg.cseq, 1, "an edit takes the group's first cseq");
    ev = gwfx_expect_of(bob, PR_EV_EDITED);
    cr_assert_eq(ev.msg.cseq, 1, "pushed with it");

    ev = react(bob, 2, "g", 2, "+1", true, PR_EV_REACTED);
    cr_assert(ev.on && ev.count == 1 && ev.cseq == 2 && !ev.duplicate && ev.mid == 2);
    cr_assert(gwfx_slice_is(ev.uid, "bob") && gwfx_slice_is(ev.key, "+1"));
    ev = gwfx_expect_of(alice, PR_EV_REACTED);
    cr_assert(!ev.has_rid && ev.cseq == 2 && ev.count == 1 && gwfx_slice_is(ev.uid, "bob"));
    /* The same again: nothing changes, no cseq, no push. */
    ev = react(bob, 3, "g", 2, "+1", true, PR_EV_REACTED);
    cr_assert(ev.duplicate && ev.cseq == 2 && ev.count == 1);
    cr_assert_not(gwfx_next_of(alice, PR_EV_REACTED, 300, &ev), "a duplicate is not pushed");

    ev = recall(alice, 4, 3);
    cr_assert_eq(ev.msg.cseq, 3);
    ev = gwfx_expect_of(bob, PR_EV_RECALLED);
    cr_assert_eq(ev.msg.cseq, 3);
    ev = react(alice, 5, "g", 1, "\xe2\x9d\xa4", true, PR_EV_REACTED);
    cr_assert_eq(ev.cseq, 4);
    ev = gwfx_expect_of(bob, PR_EV_REACTED);
    cr_assert_eq(ev.cseq, 4);

    /* Folded: one entry per message, its latest state, in cseq order. */
    chpage p = changes(bob, "g", 0, 0);
    cr_assert(p.upto == 4 && p.last_cseq == 4 && !p.more && p.gone == 0 && p.after == 0);
    cr_assert(p.first_mid == 1 && p.last_mid == 3);
    cr_assert_eq(p.n, 3);
    cr_assert(p.e[0].mid == 2 && p.e[0].cseq == 2 && p.e[0].ver == 0);
    cr_assert_str_eq(p.e[0].rx, "+1=1*,", "bob's own: mine");
    cr_assert_str_eq(p.e[0].body, "two");
    cr_assert(p.e[1].mid == 3 && p.e[1].cseq == 3 && p.e[1].recalled && !p.e[1].body[0]);
    cr_assert(p.e[2].mid == 1 && p.e[2].cseq == 4 && p.e[2].ver == 1);
    cr_assert_str_eq(p.e[2].body, "one, edited");
    cr_assert_str_eq(p.e[2].rx, "\xe2\x9d\xa4=1,");
    /* From a cursor; and a page at a time. */
    p = changes(bob, "g", 3, 0);
    cr_assert(p.n == 1 && p.e[0].mid == 1 && p.upto == 4 && !p.more);
    p = changes(bob, "g", 4, 0);
    cr_assert(p.n == 0 && p.upto == 4 && !p.more);
    uint64_t cursor = 0, seen[3] = {0};
    for (int i = 0; i < 3; i++) {
        p = changes(alice, "g", cursor, 1);
        cr_assert_eq(p.n, 1);
        cr_assert_gt(p.upto, cursor);
        seen[i] = p.e[0].mid;
        cursor = p.upto;
        cr_assert_eq(p.more, i < 2, "more until the last one");
    }
    cr_assert(seen[0] == 2 && seen[1] == 3 && seen[2] == 1);
    cr_assert_str_eq(changes(alice, "g", 0, 0).e[0].rx, "+1=1,", "not alice's");

    /* Pages and joins carry last_cseq; page entries their cseq and reactions. */
    p = page(bob);
    cr_assert(p.last_cseq == 4 && p.n == 3);
    cr_assert(p.e[0].cseq == 4 && p.e[1].cseq == 2 && p.e[2].cseq == 3);
    cr_assert_str_eq(p.e[1].rx, "+1=1*,");
    cr_assert_str_eq(p.e[2].rx, "", "a recalled message has no reactions");
    gwc_conn *carol = gwfx_login(other, "carol", NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 7, gwfx_sl("g"));
    ev = gwfx_request(carol, &sb, PR_EV_JOINED);
    cr_assert_eq(ev.last_cseq, 4);
    msgpack_sbuffer_destroy(&sb);
    pr_event w;
    gwfx_login(&fa, "bob", &w);
    pr_group g;
    cr_assert_eq(w.n_items, 1);
    g = gwfx_first_group(&w);
    cr_assert_eq(g.last_cseq, 4, "welcome's groups carry it");

    /* A client that was away: the next push's cseq shows the hole, changes fills it. */
    uint64_t carol_cursor = 4; /* her join's last_cseq */
    ev = react(alice, 8, "g", 2, "ok", true, PR_EV_REACTED);
    cr_assert_eq(ev.cseq, 5);
    ev = gwfx_expect_of(carol, PR_EV_REACTED);
    cr_assert_eq(ev.cseq, carol_cursor + 1, "no hole: apply it");
    carol_cursor = ev.cseq;
    gwc_close(carol);
    edit(alice, 9, 2, "two, edited"); /* 6, while carol is away */
    carol = gwfx_login(other, "carol", &w);
    g = gwfx_first_group(&w);
    cr_assert_eq(g.last_cseq, 6);
    ev = react(alice, 10, "g", 2, "ok", false, PR_EV_REACTED); /* 7 */
    cr_assert(ev.cseq == 7 && ev.count == 0 && !ev.on);
    ev = gwfx_expect_of(carol, PR_EV_REACTED);
    cr_assert_gt(ev.cseq, carol_cursor + 1, "a hole: %lu after %lu", (unsigned long)ev.cseq,
                 (unsigned long)carol_cursor);
    p = changes(carol, "g", carol_cursor, 0);
    cr_assert(p.n == 1 && p.e[0].mid == 2 && p.e[0].cseq == 7 && p.e[0].ver == 1 && p.upto == 7,
              "folded: the edit and the reaction as one entry");
    cr_assert_str_eq(p.e[0].body, "two, edited");
    cr_assert_str_eq(p.e[0].rx, "+1=1,", "ok cleared: gone from the counts");
}

Test(changes, react_refuses_what_it_must)
{
    gwfx_start(&fa, NULL);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL), *eve = gwfx_login(&fa, "eve", NULL);
    gwfx_join(alice, "g");
    gwfx_join(eve, "other");
    gwfx_send_msg(alice, "g", "c1", "one");
    gwfx_send_msg(alice, "g", "c2", "two");
    pr_event ev = react(alice, 1, "g", 1, "a\x01b", true, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_BAD_FIELD, "a control character");
    cr_assert(ev.has_rid);
    ev = react(alice, 2, "g", 1, "123456789012345678901234567890123", true, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_BAD_FIELD, "33 bytes");
    ev = react(eve, 3, "g", 1, "+1", true, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_NOT_MEMBER);
    ev = react(alice, 4, "g", 9, "+1", true, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_BAD_FIELD, "an unknown mid");
    cr_assert(gwfx_slice_is(ev.gid, "g"));
    /* Clearing what is not set: a duplicate, the message's cseq (none yet). */
    ev = react(alice, 5, "g", 1, "+1", false, PR_EV_REACTED);
    cr_assert(ev.duplicate && ev.cseq == 0 && ev.count == 0);
    /* 20 keys, then a 21st is too many; a key already there still takes another user. */
    for (int i = 0; i < 20; i++) {
        char key[8];
        snprintf(key, sizeof(key), "k%d", i);
        ev = react(alice, 100 + (uint64_t)i, "g", 1, key, true, PR_EV_REACTED);
        cr_assert_eq(ev.cseq, (uint64_t)i + 1);
    }
    ev = react(alice, 200, "g", 1, "k20", true, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_TOO_LARGE, "%.*s", (int)ev.err_msg.n, ev.err_msg.p);
    gwc_conn *bob = gwfx_login(&fa, "bob", NULL);
    gwfx_join(bob, "g");
    ev = react(bob, 201, "g", 1, "k3", true, PR_EV_REACTED);
    cr_assert(ev.count == 2 && ev.cseq == 21);
    /* A recalled message takes none, and has none left. */
    ev = recall(alice, 202, 1);
    cr_assert_eq(ev.msg.cseq, 22);
    ev = react(bob, 203, "g", 1, "k3", true, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_BAD_FIELD);
    cr_assert(strstr((const char *)ev.err_msg.p, "recalled") != NULL, "%.*s", (int)ev.err_msg.n,
              ev.err_msg.p);
    chpage p = changes(bob, "g", 0, 0);
    cr_assert(p.n == 1 && p.e[0].recalled && p.e[0].cseq == 22 && !p.e[0].rx[0]);
    /* changes: members only; a limit of 0 is refused by the decoder. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_changes_req(&sb, 300, gwfx_sl("g"), 0, 0);
    ev = gwfx_request(eve, &sb, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_NOT_MEMBER);
    msgpack_sbuffer_destroy(&sb);
}

Test(changes, an_erasure_and_a_retention_pass_push_changed, .timeout = 120)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), "--retain-messages", "3", NULL};
    gwfx_start(&fa, args);
    gwc_conn *alice, *bob;
    gwfx_login_two(&fa, "alice", &fa, "bob", "g", &alice, &bob);
    gwfx_send_msg(bob, "g", "c1", "bob one");
    pr_event ev = gwfx_expect_of(alice, PR_EV_MSG);
    gwfx_send_msg(bob, "g", "c2", "bob two");
    ev = gwfx_expect_of(alice, PR_EV_MSG);
    ev = react(alice, 1, "g", 1, "+1", true, PR_EV_REACTED);
    cr_assert_eq(ev.cseq, 1);
    free(gwfx_api(&fa, "DELETE", "/api/v1/users/bob", NULL, 200));
    ev = gwfx_expect_of(alice, PR_EV_CHANGED);
    cr_assert(gwfx_slice_is(ev.gid, "g"));
    cr_assert_geq(ev.last_cseq, 3, "two tombstones (and the reaction with one of them)");
    chpage p = changes(alice, "g", 1, 0);
    cr_assert_eq(p.n, 2);
    cr_assert(p.e[0].recalled && p.e[1].recalled && !p.e[0].rx[0] && !p.e[1].rx[0]);
    cr_assert_eq(p.upto, ev.last_cseq);
    uint64_t cseq = p.upto;

    /* Retention keeps 3: the fourth message moves the horizon; a pass tells `changed`. */
    gwfx_send_msg(alice, "g", "c3", "a");
    gwfx_send_msg(alice, "g", "c4", "b");
    ev = gwfx_expect_of(alice, PR_EV_CHANGED);
    cr_assert_eq(ev.last_cseq, cseq + 1, "the horizon's move took a cseq");
    p = changes(alice, "g", cseq, 0);
    cr_assert(p.n == 0 && p.first_mid == 2 && p.upto == cseq + 1 && p.last_cseq == cseq + 1);
    cr_assert_geq(gwfx_stat(&fa, "slow_consumers", "changed"), 2);
}

Test(changes, the_log_keeps_its_own_horizon, .timeout = 120)
{
    const char *args[] = {"--retain-changes", "2", NULL};
    gwfx_start(&fa, args);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    for (int i = 1; i <= 4; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "c%d", i);
        gwfx_send_msg(alice, "g", cid, "x");
    }
    for (uint64_t i = 1; i <= 4; i++)
        edit(alice, i, i, "y");
    /* A retention pass runs every second with a short log: wait for the one after the last
     * edit (one that ran between the third and the fourth edits leaves the log's horizon
     * at 2, and the next moves it on). */
    chpage p = {0};
    long t0 = tclock_ms();
    while (tclock_since(t0) < 20000 && (p = changes(alice, "g", 0, 0)).gone < 3)
        usleep(200 * 1000);
    cr_assert_eq(p.gone, 3, "the log serves the last two: after 2 and on");
    cr_assert(p.n == 0 && p.last_cseq == 4 && p.upto == 0,
              "never silently short, nothing served: n %zu last %lu upto %lu", p.n,
              (unsigned long)p.last_cseq, (unsigned long)p.upto);
    p = changes(alice, "g", 2, 0);
    cr_assert(p.gone == 0 && p.n == 2 && p.e[0].mid == 3 && p.e[1].mid == 4);
}

Test(changes, a_deleted_group_says_so, .timeout = 90)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start(&fa, args);
    gwc_conn *alice, *bob;
    gwfx_login_two(&fa, "alice", &fa, "bob", "g", &alice, &bob);
    gwfx_send_msg(alice, "g", "c1", "one");
    react(alice, 1, "g", 1, "+1", true, PR_EV_REACTED);
    free(gwfx_api(&fa, "DELETE", "/api/v1/groups/g", NULL, 200));
    pr_event ev = gwfx_expect_of(bob, PR_EV_LEFT);
    cr_assert_eq(ev.cseq, 2, "the deletion's cseq");
    gwfx_join(bob, "g2");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_changes_req(&sb, 5, gwfx_sl("g"), 0, 0);
    ev = gwfx_request(bob, &sb, PR_EV_ERR);
    cr_assert(ev.err_code == PR_E_NOT_MEMBER || ev.err_code == PR_E_NO_GROUP);
    msgpack_sbuffer_destroy(&sb);
}

/* A member that signs in, joins g and then does not read (until the end: its socket's
 * buffers are left as they are, so that it can read everything then). */
static void idle_member(rawws *c, const char *uid)
{
    char *tok = gwfx_token(uid);
    cr_assert_eq(rawws_open(c, fa.port, NULL, GWFX_WAIT), 0);
    cr_assert_eq(rawws_hello(c, tok, false), 0, "%s signs in", uid);
    free(tok);
    cr_assert_eq(rawws_join(c, "g"), 0, "%s joins", uid);
}

Test(changes, a_reaction_flood_is_rate_limited_and_a_slow_reader_is_told_changed, .timeout = 180)
{
    static const char *const args[] = {"--queue-cap",
                                       "4",
                                       "--queue-bytes",
                                       "65536",
                                       "--rate-sends",
                                       "50",
                                       "--rate-burst",
                                       "1",
                                       "--rate-bytes",
                                       "0",
                                       NULL};
    /* Under the sanitizers the RSS bound below must see what the gateway holds, not
     * ASan's quarantine of the flood's freed frames (as test_budget does). */
    watch_prepare();
    gwfx_start(&fa, args);
    rawws slow;
    idle_member(&slow, "slow");
    gwc_conn *sender = gwfx_login(&fa, "sender", NULL);
    gwfx_join(sender, "g");
    /* Messages until the slow member's socket and queue are full: it is a slow consumer
     * (the messages become a notify) before the reactions come. */
    gwfx_fill_slow(&fa, sender, "g", 300, 21, 100); /* 21 ms: within the send rate */
    gwfx_settle_slow(&fa, sender, "g");
    /* The watcher comes after the messages, which it would not read (it would be a slow
     * consumer too, and be told `changed` for the first reactions instead of each). */
    gwc_conn *watcher = gwfx_login(&fa, "watcher", NULL);
    gwfx_join(watcher, "g");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    long rss0 = gwfx_rss_kib(&fa);

    /* Three seconds of reactions as fast as the sender can ask: set and clear in turn on
     * the first message, at most 64 unanswered. */
    long asked = 0, accepted = 0, limited = 0, answered = 0, pushed = 0;
    long t0 = tclock_ms();
    while (tclock_since(t0) < 3000) {
        while (asked - answered < 64) {
            sb.size = 0;
            pr_enc_react(&sb, (uint64_t)asked, gwfx_sl("g"), 1, gwfx_sl("+1"), asked % 2 == 0);
            gwfx_send(sender, &sb);
            asked++;
        }
        pr_event ev;
        while (gwc_next(sender, 5, &ev) == 0) {
            if (ev.t == PR_EV_ERR) {
                cr_assert_eq(ev.err_code, PR_E_RATE_LIMITED, "%.*s", (int)ev.err_msg.n,
                             ev.err_msg.p);
                limited++;
                answered++;
            } else if (ev.t == PR_EV_REACTED) {
                accepted += !ev.duplicate;
                answered++;
            }
        }
        while (gwc_next(watcher, 0, &ev) == 0)
            pushed += ev.t == PR_EV_REACTED;
    }
    long took = tclock_since(t0);
    pr_event ev;
    while (answered < asked && gwc_next(sender, GWFX_WAIT, &ev) == 0) {
        limited += ev.t == PR_EV_ERR;
        accepted += ev.t == PR_EV_REACTED && !ev.duplicate;
        answered += ev.t == PR_EV_ERR || ev.t == PR_EV_REACTED;
    }
    while (gwc_next(watcher, 1000, &ev) == 0)
        pushed += ev.t == PR_EV_REACTED;
    long rss1 = gwfx_rss_kib(&fa);
    long bound = 50 + 50 * (took + 999) / 1000 + 5;
    cr_log_info("reactions: %ld asked in %ld ms, %ld accepted (bound %ld), %ld refused, %ld "
                "pushed to the reader; RSS %ld -> %ld KiB",
                asked, took, accepted, bound, limited, pushed, rss0, rss1);
    cr_assert_gt(limited, 0, "reactions are refused past the send rate");
    cr_assert_leq(accepted, bound);
    cr_assert_eq(pushed, accepted, "a reader gets every reaction made");
    cr_assert_lt(rss1 - rss0, 64 * 1024, "RSS grew by %ld KiB", rss1 - rss0);
    cr_log_info("react pushes %lld, coalesced %lld, notifies %lld, switches %lld",
                gwfx_stat(&fa, "changes", "react_pushes"),
                gwfx_stat(&fa, "slow_consumers", "react_coalesced"),
                gwfx_stat(&fa, "slow_consumers", "notifies"),
                gwfx_stat(&fa, "slow_consumers", "switches"));
    cr_assert_geq(gwfx_stat(&fa, "slow_consumers", "react_coalesced"), 1);

    /* The slow member reads at last: a notify, and `changed` for the reactions it was not
     * sent. Each reaction reaches it one way or the other: the newest cseq it is told of
     * is the last reaction's. One by one it gets only those the gateway queued while its
     * socket still took them (none once it settled, unless the kernel gave room again). */
    bool changed = false;
    uint64_t newest = 0;
    long one_by_one = 0;
    int rc = 0, evs = 0, last_t = 0;
    while (newest < (uint64_t)accepted && (rc = rawws_next(&slow, GWFX_WAIT, &ev)) == 0) {
        evs++;
        last_t = ev.t;
        if (ev.t == PR_EV_CHANGED) {
            changed = true;
            newest = ev.last_cseq > newest ? ev.last_cseq : newest;
        } else if (ev.t == PR_EV_REACTED) {
            one_by_one++;
            newest = ev.cseq > newest ? ev.cseq : newest;
        }
    }
    cr_log_info("the slow member: %ld reactions one by one, changed %s", one_by_one,
                changed ? "yes" : "no");
    cr_assert(changed,
              "the slow member is told to pull changes (rc %d after %d events, the last %d)", rc,
              evs, last_t);
    cr_assert_eq(newest, (uint64_t)accepted, "the newest cseq");
    cr_assert_lt(one_by_one, accepted, "past the budget reactions are not queued");
    rawws_close(&slow);
    msgpack_sbuffer_destroy(&sb);
}

Test(changes, the_api_reacts_and_reads_changes, .timeout = 90)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start(&fa, args);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    gwfx_send_msg(alice, "g", "c1", "one");
    /* A bot's reaction (any uid, a member or not): the key URL-encoded. */
    char *out = gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1/reactions/%F0%9F%91%8D?uid=bot",
                         NULL, 200);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_not_null(o, "%s", out);
    cr_assert_str_eq(json_string_value(json_object_get(o, "key")), "\xf0\x9f\x91\x8d", "%s", out);
    cr_assert_str_eq(json_string_value(json_object_get(o, "uid")), "bot");
    cr_assert_eq(json_integer_value(json_object_get(o, "count")), 1);
    cr_assert_eq(json_integer_value(json_object_get(o, "cseq")), 1);
    cr_assert(json_is_true(json_object_get(o, "on")) &&
              json_is_false(json_object_get(o, "duplicate")));
    json_decref(o);
    free(out);
    pr_event ev = gwfx_expect_of(alice, PR_EV_REACTED);
    cr_assert(ev.cseq == 1 && gwfx_slice_is(ev.uid, "bot") &&
              gwfx_slice_is(ev.key, "\xf0\x9f\x91\x8d"));
    out = gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1/reactions/%F0%9F%91%8D?uid=bot", NULL,
                   200);
    cr_assert(strstr(out, "\"duplicate\":true"), "%s", out);
    free(out);
    out = gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1/reactions/ok?uid=carol", NULL, 200);
    free(out);
    /* The messages page: cseq and reactions; the page's last_cseq. */
    out = gwfx_api(&fa, "GET", "/api/v1/groups/g/messages", NULL, 200);
    cr_assert(strstr(out, "\"last_cseq\":2"), "%s", out);
    cr_assert(strstr(out, "\"cseq\":2,\"reactions\":{"), "%s", out);
    cr_assert(strstr(out, "\"ok\":1"), "%s", out);
    free(out);
    out = gwfx_api(&fa, "DELETE", "/api/v1/groups/g/messages/1/reactions/ok?uid=carol", NULL, 200);
    cr_assert(strstr(out, "\"count\":0") && strstr(out, "\"cseq\":3") &&
                  strstr(out, "\"on\":false"),
              "%s", out);
    free(out);
    out = gwfx_api(&fa, "GET", "/api/v1/groups/g/changes?after=1", NULL, 200);
    o = json_loads(out, 0, NULL);
    cr_assert_not_null(o, "%s", out);
    cr_assert_eq(json_integer_value(json_object_get(o, "upto")), 3, "%s", out);
    cr_assert_eq(json_integer_value(json_object_get(o, "last_cseq")), 3);
    cr_assert(json_is_false(json_object_get(o, "more")));
    json_t *msgs = json_object_get(o, "msgs");
    cr_assert_eq(json_array_size(msgs), 1, "%s", out);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(msgs, 0), "cseq")), 3);
    json_decref(o);
    free(out);
    /* Refusals. */
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/9/reactions/x?uid=bot", NULL, 404));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1/reactions/x", NULL, 400));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1/reactions/a%01b?uid=bot", NULL, 400));
    free(gwfx_api(&fa, "POST", "/api/v1/groups/g/messages/1/reactions/x?uid=bot", "{}", 405));
    free(gwfx_api(&fa, "GET", "/api/v1/groups/g/changes?after=x", NULL, 400));
    free(gwfx_api(&fa, "GET", "/api/v1/groups/nope/changes", NULL, 404));
    for (int i = 0; i < 19; i++) {
        char path[128];
        snprintf(path, sizeof(path), "/api/v1/groups/g/messages/1/reactions/k%d?uid=bot", i);
        free(gwfx_api(&fa, "PUT", path, NULL, 200));
    }
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1/reactions/k99?uid=bot", NULL, 413));
}

/* The JSON subprotocol: react and changes as JSON text, their answers as JSON. */
static json_t *jnext_of(rawws *c, const char *t)
{
    for (;;) {
        int op;
        const uint8_t *p;
        size_t n;
        cr_assert_eq(rawws_read_frame(c, GWFX_WAIT, &op, &p, &n), 0, "no %s", t);
        cr_assert_eq(op, RAWWS_TEXT);
        json_t *j = json_loadb((const char *)p, n, 0, NULL);
        cr_assert_not_null(j);
        json_t *arr = json_is_array(j) ? j : NULL;
        for (size_t i = 0; i < (arr ? json_array_size(arr) : 1); i++) {
            json_t *m = arr ? json_array_get(arr, i) : j;
            if (strcmp(json_string_value(json_object_get(m, "t")), t) == 0) {
                json_incref(m);
                json_decref(j);
                return m;
            }
        }
        json_decref(j);
    }
}

Test(changes, the_json_subprotocol_reacts_and_reads_changes)
{
    gwfx_start(&fa, NULL);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    gwfx_send_msg(alice, "g", "c1", "one");
    rawws j;
    cr_assert_eq(rawws_connect(&j, fa.port, NULL), 0);
    j.subprotocol = "gw.v1.json";
    cr_assert_eq(rawws_handshake(&j, fa.port, false, GWFX_WAIT), 0);
    char *tok = gwfx_token("jo"), text[1024];
    snprintf(text, sizeof(text), "{\"t\":\"hello\",\"rid\":1,\"token\":\"%s\"}", tok);
    free(tok);
    cr_assert_eq(rawws_send_text(&j, text), 0);
    json_decref(jnext_of(&j, "welcome"));
    cr_assert_eq(rawws_send_text(&j, "{\"t\":\"join\",\"rid\":2,\"gid\":\"g\"}"), 0);
    json_t *m = jnext_of(&j, "joined");
    cr_assert_eq(json_integer_value(json_object_get(m, "last_cseq")), 0);
    json_decref(m);
    cr_assert_eq(rawws_send_text(&j, "{\"t\":\"react\",\"rid\":3,\"gid\":\"g\",\"mid\":1,"
                                     "\"key\":\"\\ud83d\\udc4d\",\"on\":true}"),
                 0);
    m = jnext_of(&j, "reacted");
    cr_assert_eq(json_integer_value(json_object_get(m, "cseq")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(m, "key")), "\xf0\x9f\x91\x8d");
    json_decref(m);
    pr_event ev = gwfx_expect_of(alice, PR_EV_REACTED);
    cr_assert(gwfx_slice_is(ev.uid, "jo"));
    cr_assert_eq(rawws_send_text(&j, "{\"t\":\"changes\",\"rid\":4,\"gid\":\"g\",\"after\":0}"), 0);
    m = jnext_of(&j, "changes");
    json_t *e = json_array_get(json_object_get(m, "msgs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(e, "cseq")), 1);
    cr_assert_eq(
        json_integer_value(json_object_get(json_object_get(e, "reactions"), "\xf0\x9f\x91\x8d")),
        1);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(e, "mine"), 0)),
                     "\xf0\x9f\x91\x8d");
    json_decref(m);
    cr_assert_eq(rawws_send_text(&j, "{\"t\":\"react\",\"rid\":5,\"gid\":\"g\",\"mid\":1,"
                                     "\"key\":\"\",\"on\":true}"),
                 0);
    m = jnext_of(&j, "err");
    cr_assert_str_eq(json_string_value(json_object_get(m, "code")), "bad_field");
    json_decref(m);
    rawws_close(&j);
}
