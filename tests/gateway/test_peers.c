/*
 * What members see of each other (docs/PROTOCOL.md: reads, receipts, presence, typing),
 * against the real gateway on the suite's backend, and on two nodes over one database in
 * the PostgreSQL pass:
 *   - a read is a second cursor: unread counts come from it, it survives a restart;
 *   - receipts count delivered and read, name the readers of a small group, and match a
 *     brute-force count over the stored cursors after random reads by 50 members, asked
 *     on either node;
 *   - a watch gets cursor pushes coalesced to one a period, and a large group counts;
 *   - typing reaches the other members (on another node too), once per 2 s a session,
 *     and nothing of it is stored;
 *   - presence lists who is online and when the others were last seen, pushes changes,
 *     and follows a node that is killed within its bound (PostgreSQL, two nodes).
 */
#include "gwfx.h"
#include "pgfx.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

GWFX_PAIR_SUITE(peers, fa, fb, 120);

static void start(gwfx *f, gwfx *beside, const char *const *more)
{
    const char *const base[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start_with(f, beside, base, more);
}

/* The frames queued go out (the client's loop runs a moment; nothing is read away). */
static void flush(void)
{
    gwc_service(fa.ctx, 20);
}

static void send_frame(gwc_conn *k, int (*enc)(msgpack_sbuffer *, void *), void *ud)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(enc(&sb, ud), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    flush();
}

static void ack_to(gwc_conn *k, const char *gid, uint64_t mid)
{
    gwfx_ack(k, gid, mid);
    flush();
}

typedef struct cur {
    const char *gid;
    uint64_t mid;
} cur;

static int enc_read(msgpack_sbuffer *sb, void *ud)
{
    cur *c = ud;
    pr_ack a = {gwfx_sl(c->gid), c->mid};
    return pr_enc_read(sb, &a, 1);
}

static void read_to(gwc_conn *k, const char *gid, uint64_t mid)
{
    cur c = {gid, mid};
    send_frame(k, enc_read, &c);
}

/* Waits until gid's members listed by the API show uid with the stored read (or ack). */
static void wait_stored(gwfx *f, const char *gid, const char *uid, const char *what, uint64_t v)
{
    char path[200], want[200];
    snprintf(path, sizeof(path), "/api/v1/groups/%s/members", gid);
    snprintf(want, sizeof(want), "\"%s\":%llu", what, (unsigned long long)v);
    for (int i = 0; i < 100; i++) {
        char *b = gwfx_api(f, "GET", path, NULL, 200);
        json_t *o = json_loads(b, 0, NULL);
        free(b);
        size_t j;
        json_t *m;
        bool ok = false;
        json_array_foreach(json_object_get(o, "members"), j, m)
        {
            if (strcmp(json_string_value(json_object_get(m, "uid")), uid) == 0)
                ok = json_integer_value(json_object_get(m, what)) == (json_int_t)v &&
                     json_object_get(m, what);
        }
        json_decref(o);
        if (ok)
            return;
        usleep(50 * 1000);
    }
    cr_assert_fail("%s's %s of %s never became %s", uid, what, gid, want);
}

/* ---- reads ---------------------------------------------------------------------------------- */

static const pr_group *group_in(const pr_event *ev, const char *gid, pr_group *g)
{
    for (size_t i = 0; i < ev->n_items; i++)
        if (pr_event_group(ev, i, g) == 0 && gwfx_slice_is(g->gid, gid))
            return g;
    cr_assert_fail("%s is not in the list", gid);
    return NULL;
}

Test(peers, a_read_is_a_second_cursor_the_unread_counts_come_from)
{
    start(&fa, NULL, NULL);
    gwc_conn *alice, *bob;
    gwfx_login_two(&fa, "alice", &fa, "bob", "g", &alice, &bob);
    for (int i = 1; i <= 5; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "c%d", i);
        gwfx_send_msg(alice, "g", cid, "hello");
    }
    ack_to(bob, "g", 5);
    read_to(bob, "g", 2);
    wait_stored(&fa, "g", "bob", "read", 2);
    pr_event w;
    pr_group g;
    gwc_conn *bob2 = gwfx_login(&fa, "bob", &w);
    group_in(&w, "g", &g);
    cr_assert_eq(g.ack, 5);
    cr_assert(g.has_read && g.read == 2);
    cr_assert_eq(g.unread, 3, "from the read");
    /* Alice never sent a read: her count comes from her ack, as before. */
    gwc_conn *alice2 = gwfx_login(&fa, "alice", &w);
    group_in(&w, "g", &g);
    cr_assert_not(g.has_read);
    cr_assert_eq(g.unread, 5);
    (void)bob2, (void)alice2;
    /* A read that goes back changes nothing; past the last mid it stops there. */
    read_to(bob, "g", 1);
    read_to(bob, "g", 99);
    wait_stored(&fa, "g", "bob", "read", 5);
    /* And it is in the store: across a restart. */
    gwfx_stop(&fa, SIGTERM);
    gwfx_restart(&fa);
    gwc_conn *bob3 = gwfx_login(&fa, "bob", &w);
    group_in(&w, "g", &g);
    cr_assert(g.has_read && g.read == 5 && g.unread == 0);
    (void)bob3;
    /* A read of a group one is not in is an error, like an ack. */
    read_to(bob3, "nope", 1);
    pr_event e = gwfx_expect(bob3, PR_EV_ERR);
    cr_assert_eq(e.err_code, PR_E_NOT_MEMBER);
}

/* ---- receipts ------------------------------------------------------------------------------- */

typedef struct rq {
    const char *gid;
    uint64_t mid;
} rq;

static int enc_receipts(msgpack_sbuffer *sb, void *ud)
{
    rq *q = ud;
    return pr_enc_receipts_req(sb, 4, gwfx_sl(q->gid), q->mid);
}

/* Receipts of mid: counts, and the readers joined by ',' (sorted by the caller's order). */
static pr_event receipts(gwc_conn *k, const char *gid, uint64_t mid, char *readers, size_t n)
{
    rq q = {gid, mid};
    send_frame(k, enc_receipts, &q);
    pr_event ev = gwfx_expect_of(k, PR_EV_RECEIPTS);
    cr_assert_eq(ev.rid, 4);
    cr_assert_eq(ev.mid, mid);
    if (readers) {
        readers[0] = 0;
        for (size_t i = 0; i < ev.n_items; i++) {
            pr_slice u;
            cr_assert_eq(pr_event_reader(&ev, i, &u), 0);
            snprintf(readers + strlen(readers), n - strlen(readers), "%s%.*s", i ? "," : "",
                     (int)u.n, u.p);
        }
    }
    return ev;
}

static bool has(const char *list, const char *uid)
{
    char w[80];
    snprintf(w, sizeof(w), ",%s,", uid);
    char l[1024];
    snprintf(l, sizeof(l), ",%s,", list);
    return strstr(l, w) != NULL;
}

Test(peers, receipts_count_delivered_and_read_and_name_the_readers)
{
    start(&fa, NULL, NULL);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL), *bob = gwfx_login(&fa, "bob", NULL),
             *carol = gwfx_login(&fa, "carol", NULL);
    gwfx_join(alice, "g");
    gwfx_join(bob, "g");
    gwfx_join(carol, "g");
    for (int i = 1; i <= 3; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "m%d", i);
        gwfx_send_msg(alice, "g", cid, "x");
    }
    char who[256];
    pr_event ev = receipts(alice, "g", 2, who, sizeof(who));
    cr_assert_eq(ev.of, 3);
    cr_assert_eq(ev.delivered, 0);
    cr_assert_eq(ev.read, 0);
    cr_assert(ev.has_list);
    cr_assert_str_empty(who);
    ack_to(alice, "g", 3); /* a sender acks what she holds: her ack is her read */
    ack_to(bob, "g", 3);
    read_to(bob, "g", 1); /* bob's device has all three; he saw one */
    read_to(carol, "g", 3);
    wait_stored(&fa, "g", "carol", "read", 3);
    wait_stored(&fa, "g", "bob", "read", 1);
    wait_stored(&fa, "g", "alice", "ack", 3);
    ev = receipts(alice, "g", 2, who, sizeof(who));
    cr_assert_eq(ev.delivered, 3, "alice and bob have it, and carol, who saw it");
    cr_assert_eq(ev.read, 2, "alice (by her ack) and carol read it, bob not yet");
    cr_assert_eq(ev.of, 3);
    cr_assert(has(who, "alice") && has(who, "carol") && !has(who, "bob"), "readers: %s", who);
    ev = receipts(bob, "g", 1, who, sizeof(who));
    cr_assert_eq(ev.read, 3);
    /* The API says the same. */
    char *b = gwfx_api(&fa, "GET", "/api/v1/groups/g/messages/2/receipts", NULL, 200);
    cr_assert_not_null(strstr(b, "\"delivered\":3"), "%s", b);
    cr_assert_not_null(strstr(b, "\"read\":2"), "%s", b);
    cr_assert_not_null(strstr(b, "\"of\":3"), "%s", b);
    free(b);
    free(gwfx_api(&fa, "GET", "/api/v1/groups/nosuch/messages/1/receipts", NULL, 404));
    free(gwfx_api(&fa, "GET", "/api/v1/groups/g/messages/0/receipts", NULL, 400));
    /* A mid of 0 is refused, naming the group; one past the last counts nobody. */
    rq zero = {"g", 0};
    send_frame(alice, enc_receipts, &zero);
    pr_event e = gwfx_expect(alice, PR_EV_ERR);
    cr_assert_eq(e.err_code, PR_E_BAD_FIELD);
    cr_assert(gwfx_slice_is(e.gid, "g"), "the error names the group");
    ev = receipts(alice, "g", 9, who, sizeof(who));
    cr_assert_eq(ev.delivered + ev.read, 0);
    cr_assert_eq(ev.of, 3);
    /* Only members ask. */
    gwc_conn *dave = gwfx_login(&fa, "dave", NULL);
    rq q = {"g", 1};
    send_frame(dave, enc_receipts, &q);
    cr_assert_eq(gwfx_expect(dave, PR_EV_ERR).err_code, PR_E_NOT_MEMBER);
    /* /stats counts them: three asked in frames and one through the API, the roster read
     * once; bob's and carol's reads. */
    cr_assert_geq(gwfx_stat(&fa, "receipts", "queries"), 4);
    cr_assert_geq(gwfx_stat(&fa, "receipts", "roster_reads"), 1);
    cr_assert_geq(gwfx_stat(&fa, "reads", "frames"), 2);
}

#define N_MEMBERS 50
#define N_MSGS 20

/* The brute-force count over the stored cursors (the API's member list, read from the
 * tables): members with ack or read >= mid (what one has seen is on a device), and with
 * read (or ack, without a read) >= mid. */
static void brute(gwfx *f, uint64_t mid, uint64_t *delivered, uint64_t *read, uint64_t *of)
{
    char *b = gwfx_api(f, "GET", "/api/v1/groups/big/members?limit=1000", NULL, 200);
    json_t *o = json_loads(b, 0, NULL);
    free(b);
    *delivered = *read = *of = 0;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(o, "members"), i, m)
    {
        uint64_t ack = (uint64_t)json_integer_value(json_object_get(m, "ack"));
        json_t *r = json_object_get(m, "read");
        uint64_t rd = r ? (uint64_t)json_integer_value(r) : ack;
        (*of)++;
        *delivered += ack >= mid || rd >= mid;
        *read += rd >= mid;
    }
    json_decref(o);
}

Test(peers, receipt_counts_match_a_brute_force_count_after_random_reads, .timeout = 180)
{
    bool two = pgfx_on();
    start(&fa, NULL, NULL);
    if (two)
        start(&fb, &fa, NULL);
    static gwc_conn *k[N_MEMBERS];
    char uid[N_MEMBERS][16];
    for (int i = 0; i < N_MEMBERS; i++) {
        snprintf(uid[i], sizeof(uid[i]), "m%02d", i);
        k[i] = gwfx_login(two && i % 2 ? &fb : &fa, uid[i], NULL); /* half on each node */
        gwfx_join(k[i], "big");
    }
    for (int j = 1; j <= N_MSGS; j++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "b%d", j);
        gwfx_send_msg(k[0], "big", cid, "x");
    }
    /* A roster on each node before the reads: they must follow them, not read them again. */
    char who[2048];
    pr_event ev = receipts(k[0], "big", 1, NULL, 0);
    cr_assert_eq(ev.of, N_MEMBERS);
    if (two)
        receipts(k[1], "big", 1, NULL, 0);
    srand(23);
    uint64_t want_ack[N_MEMBERS], want_read[N_MEMBERS];
    for (int i = 0; i < N_MEMBERS; i++) {
        want_ack[i] = (uint64_t)(rand() % (N_MSGS + 1));
        want_read[i] = (uint64_t)(rand() % (N_MSGS + 1));
        if (want_ack[i])
            ack_to(k[i], "big", want_ack[i]);
        if (i % 5) /* a fifth never send a read */
            read_to(k[i], "big", want_read[i]);
    }
    for (int i = 0; i < N_MEMBERS; i++) /* every cursor stored */
        wait_stored(&fa, "big", uid[i], i % 5 ? "read" : "ack", i % 5 ? want_read[i] : want_ack[i]);
    usleep(300 * 1000); /* and announced to the other node */
    for (uint64_t mid = 1; mid <= N_MSGS; mid++) {
        uint64_t d, r, of;
        brute(&fa, mid, &d, &r, &of);
        for (int node = 0; node < (two ? 2 : 1); node++) {
            ev = receipts(k[node], "big", mid, who, sizeof(who));
            cr_assert_eq(ev.of, of);
            cr_assert_eq(ev.delivered, d, "mid %llu on node %d: delivered %llu, the tables %llu",
                         (unsigned long long)mid, node, (unsigned long long)ev.delivered,
                         (unsigned long long)d);
            cr_assert_eq(ev.read, r, "mid %llu on node %d: read %llu, the tables %llu",
                         (unsigned long long)mid, node, (unsigned long long)ev.read,
                         (unsigned long long)r);
            size_t listed = 0;
            for (char *p = who; *p; p++)
                listed += *p == ',';
            cr_assert_eq(who[0] ? listed + 1 : 0, r, "each reader named once");
        }
    }
}

typedef struct wq {
    const char *gid;
    uint64_t mids[2];
    size_t n;
} wq;

static int enc_watch(msgpack_sbuffer *sb, void *ud)
{
    wq *w = ud;
    return pr_enc_watch(sb, 6, gwfx_sl(w->gid), w->mids, w->n);
}

Test(peers, a_watch_gets_cursor_pushes_coalesced_to_one_a_period)
{
    const char *more[] = {"--receipt-push-ms", "500", NULL};
    start(&fa, NULL, more);
    enum { N = 20 };
    static gwc_conn *k[N];
    for (int i = 0; i < N; i++) {
        char u[8];
        snprintf(u, sizeof(u), "w%d", i);
        k[i] = gwfx_login(&fa, u, NULL);
        gwfx_join(k[i], "room");
    }
    gwfx_send_msg(k[0], "room", "w1", "look");
    wq w = {"room", {1}, 1};
    send_frame(k[0], enc_watch, &w);
    receipts(k[0], "room", 1, NULL, 0); /* in order: the watch is set */
    /* 19 members read it over about 2 s: 4 or 5 periods of 500 ms. */
    long t0 = tclock_ms();
    for (int i = 1; i < N; i++) {
        read_to(k[i], "room", 1);
        usleep(100 * 1000);
    }
    int frames = 0, moved = 0;
    char seen[N] = {0};
    pr_event ev;
    while (moved < N - 1 && gwfx_next_of(k[0], PR_EV_CURSORS, 3000, &ev)) {
        frames++;
        for (size_t i = 0; i < ev.n_items; i++) {
            pr_cursor c;
            cr_assert_eq(pr_event_cursor(&ev, i, &c), 0);
            int who = atoi((const char *)c.uid.p + 1);
            if (c.has_read && c.read == 1 && !seen[who]) {
                seen[who] = 1;
                moved++;
            }
        }
    }
    long took = tclock_since(t0);
    cr_assert_eq(moved, N - 1, "every reader was pushed: %d", moved);
    /* One frame a period at most: 19 reads over ~2 s came as a handful of frames. */
    cr_assert_leq(frames, took / 500 + 2, "%d frames in %ld ms", frames, took);
    cr_assert_geq(frames, 2);
    /* An empty watch ends it: nothing more comes. */
    wq stop = {"room", {0}, 0};
    send_frame(k[0], enc_watch, &stop);
    receipts(k[0], "room", 1, NULL, 0);
    ack_to(k[5], "room", 1);
    cr_assert_not(gwfx_next_of(k[0], PR_EV_CURSORS, 1200, &ev), "no push after the watch ended");
}

Test(peers, a_large_group_gets_the_counts_of_the_watched_mids)
{
    const char *more[] = {"--receipt-list-max", "3", "--receipt-push-ms", "300", NULL};
    start(&fa, NULL, more);
    gwc_conn *k[5];
    for (int i = 0; i < 5; i++) {
        char u[8];
        snprintf(u, sizeof(u), "l%d", i);
        k[i] = gwfx_login(&fa, u, NULL);
        gwfx_join(k[i], "lg");
    }
    gwfx_send_msg(k[0], "lg", "a", "one");
    gwfx_send_msg(k[0], "lg", "b", "two");
    pr_event ev = receipts(k[0], "lg", 1, NULL, 0);
    cr_assert_not(ev.has_list, "5 members, over the list's 3: counts only");
    wq w = {"lg", {1, 2}, 2};
    send_frame(k[0], enc_watch, &w);
    receipts(k[0], "lg", 1, NULL, 0);
    read_to(k[3], "lg", 2);
    read_to(k[4], "lg", 1);
    /* Pushes come as a `receipts` for each watched mid, until they show both reads. */
    bool one = false, two = false;
    long t0 = tclock_ms();
    while (!(one && two) && tclock_since(t0) < 5000 &&
           gwfx_next_of(k[0], PR_EV_RECEIPTS, 2000, &ev)) {
        cr_assert(!ev.has_rid);
        cr_assert_eq(ev.of, 5);
        if (ev.mid == 1 && ev.read == 2)
            one = true;
        if (ev.mid == 2 && ev.read == 1)
            two = true;
    }
    cr_assert(one && two, "the watched mids' counts were pushed");
}

/* ---- typing -------------------------------------------------------------------------------- */

static int enc_typing(msgpack_sbuffer *sb, void *ud)
{
    return pr_enc_typing(sb, gwfx_sl((const char *)ud));
}

Test(peers, typing_reaches_the_others_once_in_two_seconds_and_is_not_stored)
{
    bool two = pgfx_on();
    start(&fa, NULL, NULL);
    if (two)
        start(&fb, &fa, NULL);
    gwfx *other = two ? &fb : &fa;
    gwc_conn *bob = gwfx_login(&fa, "bob", NULL), *carol = gwfx_login(other, "carol", NULL);
    gwc_conn *bob_phone = gwfx_login(other, "bob", NULL);
    gwfx_join(bob, "t");
    gwfx_join(carol, "t");
    gwfx_send_msg(bob, "t", "t1", "hi");
    /* Both online as node a sees them (carol's signal may come from node b a little
     * later): the list before and after the typing is then the same. */
    char *before = NULL;
    for (int i = 0; i < 50; i++) {
        free(before);
        before = gwfx_api(&fa, "GET", "/api/v1/groups/t/members", NULL, 200);
        if (!strstr(before, "\"online\":false"))
            break;
        usleep(100 * 1000);
    }
    cr_assert_null(strstr(before, "\"online\":false"), "%s", before);
    send_frame(bob, enc_typing, "t");
    send_frame(bob, enc_typing, "t"); /* within 2 s: dropped */
    pr_event ev = gwfx_expect_of(carol, PR_EV_TYPING);
    cr_assert(gwfx_slice_is(ev.gid, "t"));
    cr_assert(gwfx_slice_is(ev.uid, "bob"));
    cr_assert_eq(ev.ttl_ms, 5000);
    cr_assert_not(gwfx_next_of(carol, PR_EV_TYPING, 1200, &ev), "the second within 2 s is dropped");
    cr_assert_not(gwfx_next_of(bob_phone, PR_EV_TYPING, 200, &ev), "not to the typist's devices");
    usleep(1000 * 1000);
    send_frame(bob, enc_typing, "t"); /* 2 s after the first: it goes */
    gwfx_expect_of(carol, PR_EV_TYPING);
    /* Nothing stored: no message, no cursor moved, the group's last mid the same. */
    char *after = gwfx_api(&fa, "GET", "/api/v1/groups/t/members", NULL, 200);
    cr_assert_str_eq(after, before);
    free(before);
    free(after);
    char *page = gwfx_api(&fa, "GET", "/api/v1/groups/t/messages", NULL, 200);
    cr_assert_not_null(strstr(page, "\"last_mid\":1"), "%s", page);
    free(page);
    /* Only members type. */
    gwc_conn *eve = gwfx_login(&fa, "eve", NULL);
    send_frame(eve, enc_typing, "t");
    cr_assert_eq(gwfx_expect(eve, PR_EV_ERR).err_code, PR_E_NOT_MEMBER);
    /* /stats counts them: bob's three and eve's, one of bob's dropped; the pushes on the
     * node carol is on (bob's phone is not told). */
    cr_assert_eq(gwfx_stat(&fa, "typing", "received"), 4);
    cr_assert_eq(gwfx_stat(&fa, "typing", "dropped"), 1);
    cr_assert_eq(gwfx_stat(other, "typing", "pushes"), 2);
}

/* ---- presence ------------------------------------------------------------------------------ */

typedef struct pq {
    const char *gid;
    int sub;
} pq;

static int enc_presence(msgpack_sbuffer *sb, void *ud)
{
    pq *q = ud;
    return pr_enc_presence_req(sb, 8, gwfx_sl(q->gid), q->sub);
}

/* uid in a presence reply or an online push: its entry (fails if absent). */
static pr_presence member_of(const pr_event *ev, const char *uid)
{
    pr_presence p;
    for (size_t i = 0; i < ev->n_items; i++)
        if (pr_event_presence(ev, i, &p) == 0 && gwfx_slice_is(p.uid, uid))
            return p;
    cr_assert_fail("%s is not listed", uid);
    return p;
}

/* Waits for an `online` push that says uid is online (or not). */
static void await_online(gwc_conn *k, const char *uid, bool online, int ms)
{
    long t0 = tclock_ms();
    pr_event ev;
    while (tclock_since(t0) < ms && gwfx_next_of(k, PR_EV_ONLINE, ms, &ev))
        for (size_t i = 0; i < ev.n_items; i++) {
            pr_presence p;
            if (pr_event_presence(&ev, i, &p) == 0 && gwfx_slice_is(p.uid, uid) &&
                p.online == online) {
                if (!online)
                    cr_assert_gt(p.last_seen, 0, "gone: with when it was last seen");
                return;
            }
        }
    cr_assert_fail("no push of %s %s within %d ms", uid, online ? "online" : "offline", ms);
}

Test(peers, presence_lists_who_is_online_and_pushes_the_changes)
{
    start(&fa, NULL, NULL);
    gwc_conn *alice, *carol;
    gwfx_login_two(&fa, "alice", &fa, "carol", "p", &alice, &carol);
    char *ok = gwfx_api(&fa, "PUT", "/api/v1/groups/p/members/dave", NULL, 201);
    free(ok); /* a member never seen */
    uint64_t before = (uint64_t)time(NULL) * 1000;
    gwc_close(carol);
    usleep(300 * 1000); /* carol's last_seen is written as she goes */
    pq q = {"p", 1};
    send_frame(alice, enc_presence, &q);
    pr_event ev = gwfx_expect_of(alice, PR_EV_PRESENCE);
    cr_assert_eq(ev.rid, 8);
    cr_assert_eq(ev.of, 3);
    cr_assert_eq(ev.online, 1);
    cr_assert(ev.has_list);
    pr_presence p = member_of(&ev, "alice");
    cr_assert(p.online);
    p = member_of(&ev, "carol");
    cr_assert_not(p.online);
    cr_assert_geq(p.last_seen, before - 2000, "carol was last seen as she left");
    p = member_of(&ev, "dave");
    cr_assert(!p.online && p.last_seen == 0, "never seen");
    /* Subscribed: carol comes back, and goes again. */
    carol = gwfx_login(&fa, "carol", NULL);
    await_online(alice, "carol", true, 4000);
    gwc_close(carol);
    await_online(alice, "carol", false, 4000);
    /* The API's view. */
    char *b = gwfx_api(&fa, "GET", "/api/v1/groups/p/presence", NULL, 200);
    cr_assert_not_null(strstr(b, "\"online\":1"), "%s", b);
    cr_assert_not_null(strstr(b, "\"of\":3"), "%s", b);
    free(b);
    b = gwfx_api(&fa, "GET", "/api/v1/groups/p/members", NULL, 200);
    cr_assert_not_null(strstr(b, "\"last_seen\""), "%s", b);
    free(b);
}

/* A node that is killed: its users go offline on the others within the bound that
 * docs/PROTOCOL.md states (6 s without a word from it, then the next second's look, then
 * the next push: 8 s; the test allows 12). */
Test(peers, presence_follows_a_node_that_is_killed, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    start(&fa, NULL, NULL);
    start(&fb, &fa, NULL);
    gwc_conn *alice, *bob;
    gwfx_login_two(&fa, "alice", &fb, "bob", "k", &alice, &bob);
    pq q = {"k", 1};
    pr_event ev;
    /* Bob (on the other node) is seen online here. */
    for (int i = 0; i < 50; i++) {
        send_frame(alice, enc_presence, &q);
        ev = gwfx_expect_of(alice, PR_EV_PRESENCE);
        if (ev.online == 2)
            break;
        usleep(100 * 1000);
    }
    cr_assert_eq(ev.online, 2, "bob, on the other node, is online here");
    gwfx_stop(&fb, SIGKILL);
    long t0 = tclock_ms();
    await_online(alice, "bob", false, 12000);
    long took = tclock_since(t0);
    cr_log_info("bob went offline here %ld ms after his node was killed", took);
    cr_assert_geq(took, 4000, "not before the node has been quiet for a while");
}
