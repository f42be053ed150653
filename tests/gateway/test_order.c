/*
 * A session's requests take effect in the order it sent them, also when it sends them
 * back to back without waiting for a reply: every case here writes all its frames first,
 * then reads the replies.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static gwfx f;

static msgpack_sbuffer out; /* the frame being written */

static void setup(void)
{
    gwfx_start(&f, NULL);
    msgpack_sbuffer_init(&out);
}

static void teardown(void)
{
    msgpack_sbuffer_destroy(&out);
    gwfx_cleanup(&f);
}

TestSuite(order, .init = setup, .fini = teardown, .timeout = 60);

/* Sends the frame written to `out` on k, without waiting for a reply, and empties it. */
static void put(gwc_conn *k)
{
    gwfx_send(k, &out);
    out.size = 0;
}

static void put_join(gwc_conn *k, uint64_t rid, const char *gid)
{
    pr_enc_join(&out, rid, gwfx_sl(gid));
    put(k);
}

static void put_leave(gwc_conn *k, uint64_t rid, const char *gid)
{
    pr_enc_leave(&out, rid, gwfx_sl(gid));
    put(k);
}

static void put_send(gwc_conn *k, uint64_t rid, const char *gid, const char *cid, const char *text)
{
    pr_enc_send(&out, rid, gwfx_sl(gid), gwfx_sl(cid), (pr_body){gwfx_sl(text), false});
    put(k);
}

static void put_enter(gwc_conn *k, uint64_t rid, const char *gid)
{
    pr_enc_enter(&out, rid, gwfx_sl(gid), 0);
    put(k);
}

static void put_pull(gwc_conn *k, uint64_t rid, const char *gid, uint64_t after)
{
    pr_enc_pull(&out, rid, gwfx_sl(gid), false, after, 0);
    put(k);
}

/* The next event, which must be of type t and answer rid. */
static pr_event next(gwc_conn *k, enum pr_ev_type t, uint64_t rid)
{
    pr_event ev = gwfx_expect(k, t);
    cr_assert_eq(ev.rid, rid, "event %d answers rid %lu, expected %lu", t, (unsigned long)ev.rid,
                 (unsigned long)rid);
    return ev;
}

Test(order, join_then_send_enter_and_pull)
{
    gwc_conn *k = gwfx_login(&f, "alice", NULL);
    put_join(k, 1, "room");
    put_send(k, 2, "room", "c1", "first");
    put_enter(k, 3, "room");
    put_pull(k, 4, "room", 0);
    pr_event ev = next(k, PR_EV_JOINED, 1);
    cr_assert_eq(ev.last_mid, 0);
    ev = next(k, PR_EV_SENT, 2);
    cr_assert_eq(ev.mid, 1, "the send found the membership the join made");
    /* The join set the ack at the group's last mid then (0): the page after it holds
     * the message sent since. */
    ev = next(k, PR_EV_PAGE, 3);
    cr_assert_eq(ev.n_items, 1);
    cr_assert_eq(ev.last_mid, 1);
    ev = next(k, PR_EV_PAGE, 4);
    cr_assert_eq(ev.n_items, 1);
    cr_assert(!ev.more);
}

Test(order, send_then_pull_sees_the_message)
{
    gwc_conn *k = gwfx_login(&f, "alice", NULL);
    gwfx_join(k, "room");
    /* Twenty sends back to back, then a pull: every one is in the page, in order. */
    for (int i = 1; i <= 20; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "c%d", i);
        put_send(k, 100 + (uint64_t)i, "room", cid, cid);
    }
    put_pull(k, 200, "room", 0);
    for (int i = 1; i <= 20; i++) {
        pr_event ev = next(k, PR_EV_SENT, 100 + (uint64_t)i);
        cr_assert_eq(ev.mid, (uint64_t)i, "sends are confirmed in the order they were sent");
    }
    pr_event ev = next(k, PR_EV_PAGE, 200);
    cr_assert_eq(ev.n_items, 20, "the pull after the sends sees all %d of them (got %zu)", 20,
                 ev.n_items);
    cr_assert_eq(ev.last_mid, 20);
    for (size_t i = 0; i < ev.n_items; i++) {
        pr_message m;
        cr_assert_eq(pr_event_message(&ev, i, &m), 0);
        cr_assert_eq(m.mid, i + 1);
    }
}

Test(order, leave_then_send_is_not_member)
{
    gwc_conn *k = gwfx_login(&f, "alice", NULL);
    gwfx_join(k, "room");
    put_send(k, 1, "room", "c1", "before");
    put_leave(k, 2, "room");
    put_send(k, 3, "room", "c2", "after");
    put_join(k, 4, "room");
    put_send(k, 5, "room", "c3", "again");
    cr_assert_eq(next(k, PR_EV_SENT, 1).mid, 1);
    next(k, PR_EV_LEFT, 2);
    pr_event ev = next(k, PR_EV_ERR, 3);
    cr_assert(gwfx_slice_is(ev.err_name, "not_member"), "after the leave: %.*s", (int)ev.err_name.n,
              ev.err_name.p);
    next(k, PR_EV_JOINED, 4);
    cr_assert_eq(next(k, PR_EV_SENT, 5).mid, 2, "c2 was never stored");
}

Test(order, hello_then_requests)
{
    gwc_conn *k = gwfx_connect_raw(&f);
    char *tok = gwfx_token("alice");
    pr_enc_hello(&out, 1, gwfx_sl(tok));
    put(k);
    free(tok);
    /* Written before the welcome could come back: they wait for the hello. */
    put_join(k, 2, "room");
    put_send(k, 3, "room", "c1", "hi");
    next(k, PR_EV_WELCOME, 1);
    next(k, PR_EV_JOINED, 2);
    cr_assert_eq(next(k, PR_EV_SENT, 3).mid, 1);
}

Test(order, a_second_device_joining_while_the_first_sends)
{
    /* Two sessions of one user: what one joins the other can use once it is confirmed,
     * and the sends of each session keep their own order. */
    gwc_conn *a = gwfx_login(&f, "alice", NULL);
    gwc_conn *b = gwfx_login(&f, "alice", NULL);
    put_join(a, 1, "room");
    next(a, PR_EV_JOINED, 1);
    for (int i = 1; i <= 10; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "a%d", i);
        put_send(a, (uint64_t)i, "room", cid, cid);
        snprintf(cid, sizeof(cid), "b%d", i);
        put_send(b, (uint64_t)i, "room", cid, cid);
    }
    /* Each session's own `sent`s in order, and the other's messages pushed in between. */
    gwc_conn *ks[2] = {a, b};
    for (int w = 0; w < 2; w++) {
        uint64_t last = 0;
        for (int got = 0; got < 10;) {
            pr_event ev;
            cr_assert_eq(gwc_next(ks[w], GWFX_WAIT, &ev), 0);
            if (ev.t == PR_EV_MSG)
                continue;
            cr_assert_eq(ev.t, PR_EV_SENT);
            cr_assert_eq(ev.rid, (uint64_t)got + 1, "session %d: replies in request order", w);
            cr_assert_gt(ev.mid, last);
            last = ev.mid;
            got++;
        }
    }
}
