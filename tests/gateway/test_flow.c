/*
 * The main flow: A, B and C in a group; A (two sessions) and B online, C offline. A sends
 * 50 messages; then C comes back, sees its unread count without receiving anything, and
 * pages through what it missed.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

GWFX_SUITE(flow, f, gwfx_start, 60);

static void ack(gwc_conn *k, const char *gid, uint64_t mid)
{
    gwfx_ack(k, gid, mid);
}

static const pr_group *find_group(const pr_event *welcome, const char *gid, pr_group *out)
{
    for (size_t i = 0; i < welcome->n_items; i++) {
        cr_assert_eq(pr_event_group(welcome, i, out), 0);
        if (gwfx_slice_is(out->gid, gid))
            return out;
    }
    return NULL;
}

Test(flow, send_push_and_lazy_paged_pull)
{
    gwc_conn *k[3];
    gwfx_login_joined(&f, "room", 3, (const char *const[]){"alice", "bob", "carol"}, k);
    gwc_conn *a1 = k[0], *b = k[1], *c = k[2];
    gwc_close(c); /* carol goes offline */
    gwc_conn *a2 = gwfx_login(&f, "alice", NULL);

    /* Alice sends 50: her session gets `sent` with mids 1..50 and no `msg`. */
    for (int i = 1; i <= 50; i++) {
        char cid[16], text[32];
        snprintf(cid, sizeof(cid), "c%d", i);
        snprintf(text, sizeof(text), "hello %d", i);
        cr_assert_eq(gwfx_send_msg(a1, "room", cid, text), (uint64_t)i);
    }
    cr_assert(gwfx_quiet(a1, 200), "the sending session must not get its own messages");

    /* Bob, and alice's second session, get 50 `msg` with the same mids in order. */
    gwc_conn *readers[2] = {b, a2};
    for (int r = 0; r < 2; r++) {
        for (int i = 1; i <= 50; i++) {
            pr_event ev = gwfx_expect(readers[r], PR_EV_MSG);
            char text[32];
            snprintf(text, sizeof(text), "hello %d", i);
            cr_assert_eq(ev.msg.mid, (uint64_t)i, "reader %d: mid %lu, expected %d", r,
                         (unsigned long)ev.msg.mid, i);
            cr_assert(gwfx_slice_is(ev.gid, "room"));
            cr_assert(gwfx_slice_is(ev.msg.from, "alice"));
            cr_assert(gwfx_slice_is(ev.msg.body.data, text));
            cr_assert_not(ev.msg.body.is_bin);
            cr_assert_gt(ev.msg.ts, 0);
        }
        cr_assert(gwfx_quiet(readers[r], 100));
    }

    /* Carol logs in: unread 50, and nothing is pushed to her. */
    pr_event w;
    c = gwfx_login(&f, "carol", &w);
    pr_group g;
    cr_assert_not_null(find_group(&w, "room", &g));
    cr_assert_eq(g.last_mid, 50);
    cr_assert_eq(g.ack, 0);
    cr_assert_eq(g.unread, 50);
    cr_assert(gwfx_quiet(c, 300), "login must not pull messages");

    /* Enter with limit 20, then pull after each page, acking each page. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_enter(&sb, 11, gwfx_sl("room"), 20);
    pr_event page = gwfx_request(c, &sb, PR_EV_PAGE);
    uint64_t next = 1;
    int pages = 0;
    for (;;) {
        pages++;
        cr_assert_eq(page.last_mid, 50);
        cr_assert_leq(page.n_items, 20);
        for (size_t i = 0; i < page.n_items; i++) {
            pr_message m;
            cr_assert_eq(pr_event_message(&page, i, &m), 0);
            cr_assert_eq(m.mid, next++);
            cr_assert(gwfx_slice_is(m.from, "alice"));
        }
        ack(c, "room", next - 1);
        if (!page.more)
            break;
        sb.size = 0;
        pr_enc_pull(&sb, 12, gwfx_sl("room"), false, next - 1, 20);
        page = gwfx_request(c, &sb, PR_EV_PAGE);
    }
    cr_assert_eq(next, 51);
    cr_assert_eq(pages, 3);

    /* History: the 5 messages just below mid 11, ascending. */
    sb.size = 0;
    pr_enc_pull(&sb, 13, gwfx_sl("room"), true, 11, 5);
    page = gwfx_request(c, &sb, PR_EV_PAGE);
    cr_assert_eq(page.n_items, 5);
    pr_message m;
    pr_event_message(&page, 0, &m);
    cr_assert_eq(m.mid, 6);
    cr_assert(page.more);
    msgpack_sbuffer_destroy(&sb);

    /* Logging in again shows nothing unread, on a new session. */
    gwc_close(c);
    c = gwfx_login(&f, "carol", &w);
    cr_assert_not_null(find_group(&w, "room", &g));
    cr_assert_eq(g.ack, 50);
    cr_assert_eq(g.unread, 0);

    /* An enter with nothing unread is an empty page with more: false. */
    msgpack_sbuffer_init(&sb);
    pr_enc_enter(&sb, 14, gwfx_sl("room"), 0);
    page = gwfx_request(c, &sb, PR_EV_PAGE);
    cr_assert_eq(page.n_items, 0);
    cr_assert_not(page.more);
    msgpack_sbuffer_destroy(&sb);
}

Test(flow, bodies_keep_their_type_and_ping_answers)
{
    gwc_conn *a, *b;
    gwfx_login_two(&f, "alice", &f, "bob", "g", &a, &b);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    const uint8_t bin[4] = {0, 1, 0xfe, 0xff};
    pr_enc_send(&sb, 3, gwfx_sl("g"), gwfx_sl("b1"), (pr_body){{bin, 4}, true});
    pr_event ev = gwfx_request(a, &sb, PR_EV_SENT);
    cr_assert_eq(ev.rid, 3);
    ev = gwfx_expect(b, PR_EV_MSG);
    cr_assert(ev.msg.body.is_bin);
    cr_assert_eq(ev.msg.body.data.n, 4);
    cr_assert_arr_eq(ev.msg.body.data.p, bin, 4);

    sb.size = 0;
    pr_enc_ping(&sb, 77);
    ev = gwfx_request(b, &sb, PR_EV_PONG);
    cr_assert_eq(ev.rid, 77);
    cr_assert_gt(ev.ts, 0);
    /* rid 0 is a rid like any other; no rid gets none back. */
    sb.size = 0;
    pr_enc_ping(&sb, 0);
    ev = gwfx_request(b, &sb, PR_EV_PONG);
    cr_assert(ev.has_rid);
    cr_assert_eq(ev.rid, 0);
    sb.size = 0;
    pr_enc_ping(&sb, PR_NO_RID);
    ev = gwfx_request(b, &sb, PR_EV_PONG);
    cr_assert_not(ev.has_rid);

    sb.size = 0;
    pr_enc_groups_req(&sb, 5);
    ev = gwfx_request(b, &sb, PR_EV_GROUPS);
    cr_assert_eq(ev.n_items, 1);
    pr_group g;
    pr_event_group(&ev, 0, &g);
    cr_assert(gwfx_slice_is(g.gid, "g"));
    cr_assert_eq(g.last_mid, 1);
    msgpack_sbuffer_destroy(&sb);
}
