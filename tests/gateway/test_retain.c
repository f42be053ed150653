/*
 * Retention (docs/PROTOCOL.md, Retention; docs/API.md), against the real gateway on the
 * suite's backend, and on two nodes over one database in the PostgreSQL pass:
 *   - with --retain-messages, a group's oldest messages go in the background and its
 *     horizon (first_mid) moves; `welcome`, `groups`, `joined` and pages say it; a pull
 *     from below it gets the page that starts there with gone_before; unread counts
 *     ignore what is gone; mids stay dense above it and are never reused;
 *   - the API sets and reads a group's own retention, which wins over the defaults, and
 *     its pages say the horizon too;
 *   - under a running workload (sends, pulls and passes interleaved), every page is dense
 *     from its horizon, says gone_before when asked from below it, and holds exactly what
 *     was confirmed; at the end the group keeps its last N.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

GWFX_PAIR_SUITE(retain, fa, fb, 120);

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A page of gid after `from` (or before it), as k gets it; the caller reads ev. */
static pr_event pull(gwc_conn *k, bool before, uint64_t from, uint32_t limit)
{
    static uint64_t rid = 1000;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_pull(&sb, ++rid, gwfx_sl("g"), before, from, limit), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev;
    for (;;) {
        cr_assert(gwfx_next_of(k, PR_EV_PAGE, GWFX_WAIT, &ev), "no page within %d ms", GWFX_WAIT);
        if (ev.has_rid && ev.rid == rid)
            return ev;
    }
}

/* Checks a page: dense from lo, each message's text "m<mid>", gone_before as given. */
static void check_page(const pr_event *ev, uint64_t lo, size_t n, uint64_t gone)
{
    cr_assert_eq(ev->n_items, n, "%zu messages in the page", ev->n_items);
    cr_assert_eq(ev->gone_before, gone, "gone_before %lu", (unsigned long)ev->gone_before);
    for (size_t i = 0; i < n; i++) {
        pr_message m;
        cr_assert_eq(pr_event_message(ev, i, &m), 0);
        cr_assert_eq(m.mid, lo + i, "dense: mid %lu at %zu", (unsigned long)m.mid, i);
        char want[32];
        snprintf(want, sizeof(want), "m%lu", (unsigned long)m.mid);
        cr_assert(gwfx_slice_is(m.body.data, want), "mid %lu is what was confirmed",
                  (unsigned long)m.mid);
    }
}

static uint64_t send_n(gwc_conn *k, uint64_t from, uint64_t to)
{
    char cid[32], text[32];
    uint64_t mid = 0;
    for (uint64_t i = from; i <= to; i++) {
        snprintf(cid, sizeof(cid), "c%lu", (unsigned long)i);
        snprintf(text, sizeof(text), "m%lu", (unsigned long)i);
        /* Not gwfx_send_msg: a pass that moves the horizon pushes `changed` meanwhile. */
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        cr_assert_eq(
            pr_enc_send(&sb, i, gwfx_sl("g"), gwfx_sl(cid), (pr_body){gwfx_sl(text), false}), 0);
        gwfx_send(k, &sb);
        msgpack_sbuffer_destroy(&sb);
        pr_event ev;
        cr_assert(gwfx_next_of(k, PR_EV_SENT, GWFX_WAIT, &ev), "no sent within %d ms", GWFX_WAIT);
        mid = ev.mid;
        cr_assert_eq(mid, i, "mids are dense and never reused");
    }
    return mid;
}

/* Waits (passes come every second) until k's pull from 0 shows the horizon at first. */
static pr_event wait_horizon(gwc_conn *k, uint64_t first)
{
    long until = tclock_ms() + 10000;
    pr_event ev;
    do {
        ev = pull(k, false, 0, 100);
        if (ev.first_mid == first)
            return ev;
        nap_ms(100);
    } while (tclock_ms() < until);
    cr_assert_fail("the horizon is %lu, not %lu, after 10 s", (unsigned long)ev.first_mid,
                   (unsigned long)first);
    return ev;
}

/* g's entry of a `groups` reply (or welcome). */
static pr_group group_g(const pr_event *ev)
{
    for (size_t i = 0; i < ev->n_items; i++) {
        pr_group g;
        cr_assert_eq(pr_event_group(ev, i, &g), 0);
        if (gwfx_slice_is(g.gid, "g"))
            return g;
    }
    cr_assert_fail("g is not listed");
    return (pr_group){0};
}

Test(retain, a_pull_below_the_horizon_says_gone_before_and_unread_ignores_it)
{
    const char *args[] = {"--retain-messages", "5", NULL};
    gwfx *other = gwfx_start_nodes(&fa, &fb, args);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    gwc_conn *bob = gwfx_login(other, "bob", NULL);
    gwfx_join(bob, "g"); /* acks nothing from here */
    gwc_close(bob);
    send_n(alice, 1, 20);
    pr_event ev = wait_horizon(alice, 16);
    check_page(&ev, 16, 5, 16);
    ev = pull(alice, false, 15, 100);
    check_page(&ev, 16, 5, 0); /* from just below the horizon: nothing gone was asked */
    ev = pull(alice, true, 18, 10);
    check_page(&ev, 16, 2, 16);
    /* bob comes back on the other node: what is gone is not unread. Its node learns the
     * horizon from its own pass (within a second or so). */
    long until = tclock_ms() + 10000;
    pr_group g;
    do {
        pr_event welcome;
        bob = gwfx_login(other, "bob", &welcome);
        g = group_g(&welcome);
        if (g.first_mid == 16)
            break;
        gwc_close(bob);
        bob = NULL;
        nap_ms(200);
    } while (tclock_ms() < until);
    cr_assert_not_null(bob, "bob's welcome never said the horizon");
    cr_assert_eq(g.last_mid, 20);
    cr_assert_eq(g.ack, 0);
    cr_assert_eq(g.unread, 5, "only what is kept is unread");
    ev = pull(bob, false, g.ack, 100);
    check_page(&ev, 16, 5, 16);
    cr_assert_eq(ev.first_mid, 16);
    /* A new member hears the horizon in `joined`; the next mid is the next. */
    gwc_conn *carol = gwfx_login(other, "carol", NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_join(&sb, 5, gwfx_sl("g")), 0);
    ev = gwfx_request(carol, &sb, PR_EV_JOINED);
    msgpack_sbuffer_destroy(&sb);
    cr_assert_eq(ev.first_mid, 16);
    cr_assert_eq(ev.last_mid, 20);
    cr_assert_eq(send_n(alice, 21, 21), 21);
    gwc_close(carol);
    gwc_close(bob);
    gwc_close(alice);
    long long deleted = gwfx_stat(&fa, "retention", "deleted");
    if (pgfx_on())
        deleted += gwfx_stat(&fb, "retention", "deleted");
    cr_assert_geq(deleted, 15, "the figure counts what went");
}

static json_t *api_json(const char *method, const char *path, const char *body, int want)
{
    char *out = gwfx_api(&fa, method, path, body, want);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_not_null(o, "%s", out);
    free(out);
    return o;
}

static long long jint(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    cr_assert(json_is_integer(v), "%s.%s is not a number", a, b ? b : "");
    return json_integer_value(v);
}

Test(retain, the_api_sets_a_groups_own_retention)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), "--retain-messages", "1000", NULL};
    gwfx_start_nodes(&fa, &fb, args);
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/members/alice", NULL, 201));
    char body[64];
    for (int i = 1; i <= 10; i++) {
        snprintf(body, sizeof(body), "{\"from\":\"alice\",\"cid\":\"c%d\",\"body\":\"m%d\"}", i, i);
        free(gwfx_api(&fa, "POST", "/api/v1/groups/g/messages", body, 200));
    }
    json_t *o = api_json("GET", "/api/v1/groups/g/retention", NULL, 200);
    cr_assert(json_is_null(json_object_get(json_object_get(o, "own"), "messages")));
    cr_assert_eq(jint(o, "effective", "messages"), 1000, "the gateway's default");
    cr_assert_eq(jint(o, "first_mid", NULL), 1);
    json_decref(o);
    o = api_json("PUT", "/api/v1/groups/g/retention", "{\"messages\":3}", 200);
    cr_assert_eq(jint(o, "own", "messages"), 3);
    cr_assert_eq(jint(o, "effective", "messages"), 3, "the group's own wins");
    cr_assert_eq(jint(o, "last_mid", NULL), 10);
    json_decref(o);
    long until = tclock_ms() + 10000;
    long long first = 1;
    while (first != 8 && tclock_ms() < until) {
        nap_ms(100);
        o = api_json("GET", "/api/v1/groups/g/retention", NULL, 200);
        first = jint(o, "first_mid", NULL);
        json_decref(o);
    }
    cr_assert_eq(first, 8, "a pass applied the group's own retention");
    o = api_json("GET", "/api/v1/groups/g/messages", NULL, 200);
    cr_assert_eq(jint(o, "first_mid", NULL), 8);
    cr_assert_eq(jint(o, "gone_before", NULL), 8, "asked from the start: some is gone");
    cr_assert_eq(json_array_size(json_object_get(o, "messages")), 3);
    json_decref(o);
    o = api_json("GET", "/api/v1/users/alice/groups", NULL, 200);
    json_t *g = json_array_get(json_object_get(o, "groups"), 0);
    cr_assert_eq(json_integer_value(json_object_get(g, "first_mid")), 8);
    cr_assert_eq(json_integer_value(json_object_get(g, "unread")), 3);
    json_decref(o);
    /* 0: keep everything (from now on); null: the default again. */
    o = api_json("PUT", "/api/v1/groups/g/retention", "{\"messages\":0,\"days\":30}", 200);
    cr_assert_eq(jint(o, "own", "messages"), 0);
    cr_assert_eq(jint(o, "own", "seconds"), 30 * 86400);
    json_decref(o);
    /* Refusals: what is wrong, and no such group. */
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/retention", "{\"messages\":-1}", 400));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/retention", "{\"days\":1,\"seconds\":1}", 400));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/retention", "{\"until_acked\":3}", 400));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/retention", "[]", 400));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/nope/retention", "{\"messages\":3}", 404));
    free(gwfx_api(&fa, "GET", "/api/v1/groups/nope/retention", NULL, 404));
    free(gwfx_api(&fa, "POST", "/api/v1/groups/g/retention", "{}", 405));
}

Test(retain, retention_under_a_running_workload_keeps_pages_honest, .timeout = 180)
{
    const char *args[] = {"--retain-messages", "50", NULL};
    gwfx *other = gwfx_start_nodes(&fa, &fb, args);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    gwc_conn *bob = gwfx_login(other, "bob", NULL);
    gwfx_join(bob, "g");
    uint64_t last = 0;
    size_t gone_seen = 0;
    for (int round = 0; round < 12; round++) {
        last = send_n(alice, last + 1, last + 50);
        /* bob pulls from the start and from where he is: every page is dense from the
         * horizon, says gone_before when it was asked from below, and holds what was
         * confirmed. */
        pr_event ev = pull(bob, false, 0, 500);
        uint64_t first = ev.first_mid;
        cr_assert_geq(first, 1);
        cr_assert_leq(first + 50, last + 1 + 50, "never more gone than retention lets go");
        cr_assert_geq(ev.last_mid, first - 1);
        check_page(&ev, first, ev.last_mid - first + 1, first > 1 ? first : 0);
        gone_seen += first > 1;
        ev = pull(bob, true, last + 1, 20);
        uint64_t lo = ev.first_mid > last - 19 ? ev.first_mid : last - 19;
        check_page(&ev, lo, last - lo + 1, ev.first_mid > last - 19 ? ev.first_mid : 0);
        nap_ms(150);
    }
    cr_assert_gt(gone_seen, 0, "passes ran during the workload");
    pr_event ev = wait_horizon(bob, last - 49);
    check_page(&ev, last - 49, 50, last - 49);
    gwc_close(bob);
    gwc_close(alice);
}
