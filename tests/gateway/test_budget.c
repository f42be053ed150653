/*
 * One outbound budget for everything pushed to a session, and rate limits that hold
 * across groups and sessions (docs/PROTOCOL.md, Slow consumers and Typing): the attacks,
 * for real against the real gateway, each bounded in time.
 *   - One session types in 5 groups in turn as fast as it can, with 20 members' sessions
 *     that never read: the gateway's memory stays put, and a reader gets no more typing
 *     than the documented rates let through.
 *   - A session floods edits, or recalls: the send rate bounds them, a reader gets every
 *     one accepted, and members that never read are closed as slow consumers (edits)
 *     instead of queueing without end.
 *   - A user's typing in a group is limited whichever of its sessions types; typing to a
 *     slow consumer is dropped and counted.
 */
#include "gwfx.h"
#include "rawws.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define GROUPS 5
#define IDLE 20       /* members' sessions that never read */
#define FLOOD_MS 3000 /* how long each flood lasts */
#define MIB (1024 * 1024)
#define RSS_MARGIN_KIB (64 * 1024)

static gwfx f;

/* Under the sanitizers, ASan holds freed memory back for a while (its quarantine, 256 MiB
 * by default) and the RSS would count it: the gateways of this suite keep 8 MiB of it, so
 * that what is measured is what the gateway holds. */
static void setup(void)
{
#ifdef GW_TEST_SANITIZED
    static char opts[1024];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=8", was ? was : "", was ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
}

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(budget, .init = setup, .fini = teardown, .timeout = 180);

static const char *gid_of(int i)
{
    static const char *const g[GROUPS] = {"g0", "g1", "g2", "g3", "g4"};
    return g[i % GROUPS];
}

/* A member that signs in, joins every group and then never reads: its socket's receive
 * buffer made small, so that what the gateway sends it backs up at once. */
static void idle_member(rawws *c, const char *uid)
{
    char *tok = gwfx_token(uid);
    cr_assert_eq(rawws_open(c, f.port, NULL, GWFX_WAIT), 0);
    cr_assert_eq(rawws_hello(c, tok, false), 0, "%s signs in", uid);
    free(tok);
    for (int g = 0; g < GROUPS; g++)
        cr_assert_eq(rawws_join(c, gid_of(g)), 0, "%s joins", uid);
    int small = 4096;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
}

static void idle_members(rawws *idle)
{
    for (int i = 0; i < IDLE; i++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "idle%d", i);
        idle_member(&idle[i], uid);
    }
}

static void idle_release(rawws *idle)
{
    for (int i = 0; i < IDLE; i++)
        rawws_close(&idle[i]);
}

/* A reading member of every group. */
static gwc_conn *reader(const char *uid)
{
    gwc_conn *k = gwfx_login(&f, uid, NULL);
    for (int g = 0; g < GROUPS; g++)
        gwfx_join(k, gid_of(g));
    return k;
}

/* Reads what k has now (or within ms), counting events of type t. */
static long count_of(gwc_conn *k, enum pr_ev_type t, int ms)
{
    long n = 0;
    pr_event ev;
    while (gwc_next(k, ms, &ev) == 0)
        n += ev.t == t;
    return n;
}

/* ---- typing ------------------------------------------------------------------------------ */

Test(budget, typing_in_many_groups_in_turn_is_bounded_and_the_memory_stays)
{
    gwfx_start(&f, NULL);
    rawws idle[IDLE];
    idle_members(idle);
    gwc_conn *watcher = reader("watcher");
    rawws typist;
    char *tok = gwfx_token("typist");
    cr_assert_eq(rawws_open(&typist, f.port, NULL, GWFX_WAIT), 0);
    cr_assert_eq(rawws_hello(&typist, tok, false), 0);
    free(tok);
    for (int g = 0; g < GROUPS; g++)
        cr_assert_eq(rawws_join(&typist, gid_of(g)), 0);
    long rss0 = gwfx_rss_kib(&f);

    /* As fast as the socket takes them, in the groups in turn; the watcher reads. */
    msgpack_sbuffer sb[GROUPS];
    for (int g = 0; g < GROUPS; g++) {
        msgpack_sbuffer_init(&sb[g]);
        pr_enc_typing(&sb[g], gwfx_sl(gid_of(g)));
    }
    long t0 = tclock_ms(), sent = 0, seen = 0;
    while (tclock_since(t0) < FLOOD_MS) {
        for (int i = 0; i < 500; i++, sent++)
            cr_assert_eq(rawws_request(&typist, &sb[sent % GROUPS], false), 0);
        seen += count_of(watcher, PR_EV_TYPING, 0);
    }
    /* The gateway reads what is still in the socket (its byte rate pauses it), then the
     * reader gets what went. */
    for (int i = 0; i < 100 && gwfx_stat(&f, "typing", "received") < sent; i++)
        seen += count_of(watcher, PR_EV_TYPING, 100);
    long took = tclock_since(t0);
    seen += count_of(watcher, PR_EV_TYPING, 500);
    long rss1 = gwfx_rss_kib(&f);
    for (int g = 0; g < GROUPS; g++)
        msgpack_sbuffer_destroy(&sb[g]);
    cr_assert_eq(gwfx_stat(&f, "typing", "received"), sent, "every one was read and counted");
    long went = sent - (long)gwfx_stat(&f, "typing", "dropped");

    /* The session's rate across its groups: 2 a second, bursts of 4 (and one per 2 s per
     * group, which 5 groups would allow 2.5 a second of). */
    long bound = 4 + 2 * (took + 999) / 1000;
    cr_log_info("typing: %ld sent, read over %ld ms; %ld went (bound %ld), %ld reached the "
                "reader; RSS %ld -> %ld KiB",
                sent, took, went, bound, seen, rss0, rss1);
    cr_assert_gt(sent, 1000, "the flood ran (%ld)", sent);
    cr_assert_geq(went, 1, "typing still goes");
    cr_assert_leq(went, bound, "%ld typing went of %ld sent over %ld ms", went, sent, took);
    cr_assert_eq(seen, went, "the reader got each that went");
    cr_assert_lt(rss1 - rss0, RSS_MARGIN_KIB, "RSS grew by %ld KiB", rss1 - rss0);
    cr_assert(gwfx_alive(&f));
    rawws_close(&typist);
    idle_release(idle);
}

Test(budget, a_users_typing_in_a_group_is_limited_whichever_session_types)
{
    gwfx_start(&f, NULL);
    gwc_conn *laptop = gwfx_login(&f, "ann", NULL), *phone = gwfx_login(&f, "ann", NULL);
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    gwfx_join(laptop, "t");
    gwfx_join(bob, "t");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_typing(&sb, gwfx_sl("t"));
    gwfx_send(laptop, &sb);
    pr_event ev = gwfx_expect_of(bob, PR_EV_TYPING);
    cr_assert(gwfx_slice_is(ev.uid, "ann"));
    /* The same user on another device, within 2 s: dropped like the laptop's second. */
    gwfx_send(phone, &sb);
    gwfx_send(laptop, &sb);
    cr_assert_not(gwfx_next_of(bob, PR_EV_TYPING, 1500, &ev), "a second typing within 2 s");
    usleep(700 * 1000);
    gwfx_send(phone, &sb); /* 2 s after the first: it goes */
    gwfx_expect_of(bob, PR_EV_TYPING);
    cr_assert_eq(gwfx_stat(&f, "typing", "dropped"), 2);
    msgpack_sbuffer_destroy(&sb);
}

Test(budget, typing_to_a_slow_consumer_is_dropped_and_counted)
{
    static const char *const args[] = {"--queue-cap", "4", "--queue-bytes", "65536", "--rate-bytes",
                                       "0",           NULL};
    gwfx_start(&f, args);
    rawws slow;
    idle_member(&slow, "slow");
    gwc_conn *sender = reader("sender");
    /* Messages until the slow member's socket (the kernel's buffers on both sides: a few
     * MiB) and its queue are full: it switches to notify, and stays so, the notify having
     * no room to go either. */
    gwfx_fill_slow(&f, sender, "g0", 200, 0, 200);
    gwfx_settle_slow(&f, sender, "g0");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    /* The sender types: the slow member is not given it. */
    sb.size = 0;
    pr_enc_typing(&sb, gwfx_sl("g0"));
    gwfx_send(sender, &sb);
    /* On PostgreSQL the typing goes out as a signal through the store, queued behind the
     * fill's writes: on a loaded machine that takes seconds. */
    for (int i = 0; i < 200 && gwfx_stat(&f, "slow_consumers", "typing_dropped") == 0; i++)
        count_of(sender, PR_EV_SENT, 100); /* the client's loop writes the frame */
    cr_assert_eq(gwfx_stat(&f, "slow_consumers", "typing_dropped"), 1);
    cr_assert_eq(gwfx_stat(&f, "typing", "pushes"), 0);
    msgpack_sbuffer_destroy(&sb);
    rawws_close(&slow);
}

/* ---- edits and recalls ------------------------------------------------------------------ */

/* Sends `messages` messages of body bytes to g0 from k and waits for each `sent`. */
static void send_some(gwc_conn *k, int messages, size_t body_n)
{
    char *body = malloc(body_n);
    memset(body, 'a', body_n);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int i = 0; i < messages; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "s%d", i);
        sb.size = 0;
        pr_enc_send(&sb, PR_NO_RID, gwfx_sl("g0"), gwfx_sl(cid),
                    (pr_body){{(uint8_t *)body, body_n}, true});
        gwfx_send(k, &sb);
    }
    for (int i = 0; i < messages; i++)
        gwfx_expect_of(k, PR_EV_SENT);
    msgpack_sbuffer_destroy(&sb);
    free(body);
}

typedef struct flood {
    long requests, accepted, limited, pushed, took;
} flood;

/* For FLOOD_MS, editor edits (or recalls) mids 1..mids of g0 in turn, at most 64 requests
 * unanswered, while watcher reads; counts the answers and the pushes. */
static flood run_flood(gwc_conn *editor, gwc_conn *watcher, bool recall, int mids, size_t body_n)
{
    flood r = {0};
    enum pr_ev_type push = recall ? PR_EV_RECALLED : PR_EV_EDITED;
    char *body = malloc(body_n);
    memset(body, 'e', body_n);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    long t0 = tclock_ms(), answered = 0;
    while (tclock_since(t0) < FLOOD_MS) {
        while (r.requests - answered < 64) {
            uint64_t mid = (uint64_t)(r.requests % mids) + 1;
            sb.size = 0;
            if (recall)
                pr_enc_recall(&sb, 1, gwfx_sl("g0"), mid);
            else
                pr_enc_edit(&sb, 1, gwfx_sl("g0"), mid, 0,
                            (pr_body){{(uint8_t *)body, body_n}, true});
            gwfx_send(editor, &sb);
            r.requests++;
        }
        pr_event ev;
        while (gwc_next(editor, 5, &ev) == 0) {
            if (ev.t == PR_EV_ERR) {
                cr_assert_eq(ev.err_code, PR_E_RATE_LIMITED, "%.*s", (int)ev.err_msg.n,
                             ev.err_msg.p);
                r.limited++;
                answered++;
            } else if (ev.t == push) {
                r.accepted++;
                answered++;
            }
        }
        r.pushed += count_of(watcher, push, 0);
    }
    r.took = tclock_since(t0);
    /* The answers still on their way, then the pushes. */
    pr_event ev;
    while (answered < r.requests && gwc_next(editor, GWFX_WAIT, &ev) == 0) {
        r.limited += ev.t == PR_EV_ERR;
        r.accepted += ev.t == push;
        answered += ev.t == PR_EV_ERR || ev.t == push;
    }
    r.pushed += count_of(watcher, push, 1000);
    msgpack_sbuffer_destroy(&sb);
    free(body);
    return r;
}

/* The flood's answers within the send rate (rate a second, burst_s seconds' worth), some
 * refused, the memory put; what reached the reader is the caller's to check. */
static void check_flood(const char *what, const flood *r, long rate, long burst_s, long rss0)
{
    long rss1 = gwfx_rss_kib(&f);
    long bound = rate * burst_s + rate * (r->took + 999) / 1000 + 5;
    cr_log_info("%s: %ld asked in %ld ms, %ld accepted (bound %ld), %ld refused, %ld pushed "
                "to the reader; RSS %ld -> %ld KiB",
                what, r->requests, r->took, r->accepted, bound, r->limited, r->pushed, rss0, rss1);
    cr_assert_gt(r->limited, 0, "%s are refused past the send rate", what);
    cr_assert_leq(r->accepted, bound, "%s", what);
    cr_assert_lt(rss1 - rss0, RSS_MARGIN_KIB, "RSS grew by %ld KiB", rss1 - rss0);
}

Test(budget, an_edit_flood_is_rate_limited_and_members_that_never_read_are_closed)
{
    /* A small budget (four times it: 4 MiB) and a send rate of 50 a second with bursts of
     * one second's worth; the byte rate off, so that the send rate is what limits. */
    static const char *const args[] = {"--queue-cap",
                                       "64",
                                       "--queue-bytes",
                                       "1048576",
                                       "--rate-sends",
                                       "50",
                                       "--rate-burst",
                                       "1",
                                       "--rate-bytes",
                                       "0",
                                       NULL};
    gwfx_start(&f, args);
    gwc_conn *editor = reader("editor"), *watcher = reader("watcher");
    send_some(editor, GROUPS, 10);
    rawws idle[IDLE];
    idle_members(idle);
    long rss0 = gwfx_rss_kib(&f);
    flood r = run_flood(editor, watcher, false, GROUPS, 60000);
    check_flood("edits", &r, 50, 1, rss0);
    cr_assert_eq(r.pushed, r.accepted, "a reader gets every edit made");
    /* The members that never read: closed as slow consumers, not queued for (told by the
     * gateway's figures: their sockets, whose buffers were made tiny, take long to drain
     * what the kernel still holds for them before the end). */
    long long open_now = 0;
    for (int i = 0; i < 200 && (open_now = gwfx_stat(&f, "connections", "now")) > 2; i++)
        count_of(watcher, PR_EV_EDITED, 100);
    cr_assert_eq(open_now, 2, "every member that never read was closed");
    cr_assert_geq(gwfx_stat(&f, "slow_consumers", "version_closes"), IDLE);
    cr_assert(gwfx_alive(&f));
    idle_release(idle);
}

Test(budget, a_recall_flood_is_rate_limited_and_the_memory_stays)
{
    static const char *const args[] = {"--rate-sends", "100", "--rate-burst", "2", NULL};
    gwfx_start(&f, args);
    gwc_conn *editor = reader("editor"), *watcher = reader("watcher");
    rawws idle[IDLE];
    idle_members(idle);
    send_some(editor, 150, 1000);
    count_of(watcher, PR_EV_MSG, 200);
    usleep(2000 * 1000); /* the bucket fills again */
    long rss0 = gwfx_rss_kib(&f);
    flood r = run_flood(editor, watcher, true, 150, 0);
    check_flood("recalls", &r, 100, 2, rss0);
    cr_assert_eq(r.pushed, 150, "each message's recall reaches a reader once");
    cr_assert(gwfx_alive(&f));
    idle_release(idle);
}
