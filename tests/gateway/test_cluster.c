/*
 * Several gateway nodes over one PostgreSQL database (the suite's PostgreSQL pass only):
 * a message sent on one node is pushed to members online on the others, in mid order and
 * once per session; the same user on two nodes shares memberships and acks; a node killed
 * under load loses nothing confirmed, and its clients catch up on another node by pull;
 * the database's primary killed under load and its synchronous standby promoted loses
 * nothing confirmed either, nor do failovers that Patroni makes by itself; a node cut
 * from the database for 30 s keeps its sessions and catches up by position after.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "tclock.h"
#include "tproxy.h"
#include "watch.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The nodes (fb and fc share fa's client context: cleaned up before it), and the
 * failover test's database pair. */
static gwfx fa, fb, fc;
static pgfx_pair pair;

static pgfx_ha ha;
static pgfx_server own;
static tproxy *proxy;

static void teardown(void)
{
    tproxy_stop(proxy);
    proxy = NULL;
    gwfx_cleanup(&fc);
    gwfx_cleanup(&fb);
    gwfx_cleanup(&fa);
    pgfx_pair_cleanup(&pair);
    pgfx_ha_cleanup(&ha);
    pgfx_server_cleanup(&own);
}

TestSuite(cluster, .fini = teardown);

/* Three nodes on one new database. */
static void three_nodes(void)
{
    gwfx_start(&fa, NULL);
    gwfx_start_beside(&fb, &fa, NULL);
    gwfx_start_beside(&fc, &fa, NULL);
}

/* What a receiving session holds of one group: every mid seen, and whether the pushes
 * came in order (each one the one after the last). */
typedef struct holder {
    gwc_conn *k;
    uint8_t *seen; /* by mid */
    size_t cap;
    uint64_t pushes, out_of_order, twice, last_push;
    uint64_t watermark; /* every mid up to it is held */
} holder;

static void holder_init(holder *h, gwc_conn *k, size_t cap)
{
    *h = (holder){.k = k, .cap = cap};
    h->seen = calloc(cap + 1, 1);
}

static void hold(holder *h, uint64_t mid)
{
    cr_assert(mid >= 1 && mid <= h->cap, "mid %lu out of range", (unsigned long)mid);
    if (h->seen[mid])
        h->twice++;
    h->seen[mid] = 1;
    while (h->watermark < h->cap && h->seen[h->watermark + 1])
        h->watermark++;
}

/* Takes the events that came (waiting at most ms for the first); pushes of gid only. */
static void take(holder *h, int ms)
{
    pr_event ev;
    while (gwc_next(h->k, ms, &ev) == 0) {
        ms = 0;
        if (ev.t != PR_EV_MSG)
            continue;
        h->pushes++;
        if (h->last_push && ev.msg.mid != h->last_push + 1)
            h->out_of_order++;
        h->last_push = ev.msg.mid;
        hold(h, ev.msg.mid);
    }
}

/* Takes pushes (100 ms at a time) until h holds every mid up to n, for ms at most; the
 * caller asserts on what it holds then. */
static void take_until(holder *h, uint64_t n, long ms)
{
    long until = tclock_ms() + ms;
    while (h->watermark < n && tclock_ms() < until)
        take(h, 100);
}

/* Pages after the watermark until nothing is missing up to last (a client's catch-up). */
static void catch_up(holder *h, const char *gid, uint64_t last)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int round = 0; h->watermark < last && round < 1000; round++) {
        sb.size = 0;
        pr_enc_pull(&sb, 77, gwfx_sl(gid), false, h->watermark, 500);
        cr_assert_eq(gwc_send(h->k, sb.data, sb.size), 0);
        for (;;) {
            pr_event ev;
            cr_assert_eq(gwc_next(h->k, GWFX_WAIT, &ev), 0, "no page");
            if (ev.t == PR_EV_MSG) {
                hold(h, ev.msg.mid);
                continue;
            }
            cr_assert_eq(ev.t, PR_EV_PAGE);
            for (size_t i = 0; i < ev.n_items; i++) {
                pr_message m;
                cr_assert_eq(pr_event_message(&ev, i, &m), 0);
                hold(h, m.mid);
            }
            break;
        }
    }
    msgpack_sbuffer_destroy(&sb);
    cr_assert_eq(h->watermark, last, "holds up to %lu of %lu", (unsigned long)h->watermark,
                 (unsigned long)last);
}

/* Sends n messages with cids PREFIX-1.. pipelined, without waiting. */
static void send_burst(gwc_conn *k, const char *gid, const char *prefix, int from, int n)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int i = from; i < from + n; i++) {
        char cid[32], body[48];
        snprintf(cid, sizeof(cid), "%s-%d", prefix, i);
        snprintf(body, sizeof(body), "%s says %d", prefix, i);
        sb.size = 0;
        pr_enc_send(&sb, (uint64_t)i, gwfx_sl(gid), gwfx_sl(cid), (pr_body){gwfx_sl(body), false});
        cr_assert_eq(gwc_send(k, sb.data, sb.size), 0);
    }
    msgpack_sbuffer_destroy(&sb);
}

/* Waits for n `sent` on k (pushes from the other senders are counted into h if given). */
static void await_sent(gwc_conn *k, int n)
{
    for (int got = 0; got < n;) {
        pr_event ev;
        cr_assert_eq(gwc_next(k, GWFX_WAIT * 2, &ev), 0, "sent %d of %d", got, n);
        if (ev.t == PR_EV_SENT)
            got++;
        else
            cr_assert_eq(ev.t, PR_EV_MSG, "event %d", ev.t);
    }
}

/* Sends n messages of `bytes` bytes each (too large to be announced with their record:
 * the other nodes read them from the store), pipelined. */
static void send_large(gwc_conn *k, const char *gid, const char *prefix, int from, int n,
                       size_t bytes)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    char *body = malloc(bytes);
    for (int i = from; i < from + n; i++) {
        char cid[32];
        snprintf(cid, sizeof(cid), "%s-%d", prefix, i);
        memset(body, 'a' + i % 26, bytes);
        sb.size = 0;
        pr_enc_send(&sb, (uint64_t)i, gwfx_sl(gid), gwfx_sl(cid),
                    (pr_body){{(const uint8_t *)body, bytes}, false});
        cr_assert_eq(gwc_send(k, sb.data, sb.size), 0);
    }
    free(body);
    msgpack_sbuffer_destroy(&sb);
}

/* Senders on nodes A and B send n messages each, in bursts (A's of `large` bytes each when
 * not 0: too large to announce, so the other nodes read them), while receivers on B and
 * C take their pushes. Then each receiver must hold all 2n by push, each pushed once and
 * in mid order, and nothing more comes. */
static void two_senders(int n, int burst, size_t large)
{
    gwc_conn *sa = gwfx_login(&fa, "alice", NULL);
    gwc_conn *sb_ = gwfx_login(&fb, "bob", NULL);
    gwc_conn *rb = gwfx_login(&fb, "carol", NULL);
    gwc_conn *rc = gwfx_login(&fc, "dave", NULL);
    gwfx_join(sa, "room");
    gwfx_join(sb_, "room");
    gwfx_join(rb, "room");
    gwfx_join(rc, "room");
    holder hb, hc;
    holder_init(&hb, rb, 2 * (size_t)n);
    holder_init(&hc, rc, 2 * (size_t)n);
    for (int i = 1; i <= n; i += burst) {
        if (large)
            send_large(sa, "room", "a", i, burst, large);
        else
            send_burst(sa, "room", "a", i, burst);
        send_burst(sb_, "room", "b", i, burst);
        take(&hb, 0);
        take(&hc, 0);
    }
    await_sent(sa, n);
    await_sent(sb_, n);
    long deadline = tclock_ms() + 20000;
    while ((hb.watermark < 2 * (uint64_t)n || hc.watermark < 2 * (uint64_t)n) &&
           tclock_ms() < deadline) {
        take(&hb, 100);
        take(&hc, 100);
    }
    holder *hs[2] = {&hb, &hc};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(hs[i]->watermark, 2 * (uint64_t)n, "receiver %d holds up to %lu of %d by push",
                     i, (unsigned long)hs[i]->watermark, 2 * n);
        cr_assert_eq(hs[i]->pushes, 2 * (uint64_t)n, "receiver %d: %lu pushes", i,
                     (unsigned long)hs[i]->pushes);
        cr_assert_eq(hs[i]->twice, 0);
        cr_assert_eq(hs[i]->out_of_order, 0, "receiver %d: %lu pushes out of mid order", i,
                     (unsigned long)hs[i]->out_of_order);
    }
    cr_assert(gwfx_quiet(rb, 300) && gwfx_quiet(rc, 300), "nothing more comes");
    free(hb.seen);
    free(hc.seen);
}

Test(cluster, messages_reach_every_node_in_order_once, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    /* Two senders on two nodes at once: their mids interleave, and each node's own
     * commits race the other's announcements. */
    two_senders(400, 50, 0);
}

Test(cluster, large_messages_are_read_from_the_store_and_pushed_in_order, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    /* Alice's are announced as hints (read by the other nodes before they can push them),
     * while node B's own small ones complete meanwhile: B must hold its own until
     * Alice's that come before them have been read. */
    two_senders(100, 10, 20000);
    cr_assert_gt(watch_stat(&fc, "cluster.hole_reads"), 0, "node C read the hints' records");
}

/* The group's entry in a `groups` reply (ack and unread), or false if absent. */
static bool group_entry(gwc_conn *k, const char *gid, pr_group *out)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_groups_req(&sb, 5);
    pr_event ev = gwfx_request(k, &sb, PR_EV_GROUPS);
    msgpack_sbuffer_destroy(&sb);
    for (size_t i = 0; i < ev.n_items; i++) {
        cr_assert_eq(pr_event_group(&ev, i, out), 0);
        if (gwfx_slice_is(out->gid, gid))
            return true;
    }
    return false;
}

/* After a node or the database failed under load: h (on r) catches up to n by pull, no
 * message was pushed to it twice, and the group "log" holds n messages, so that none was
 * stored twice (lost: what a last mid other than n means). Frees what h holds. */
static void expect_each_once(holder *h, gwc_conn *r, uint64_t n, const char *lost)
{
    catch_up(h, "log", n);
    cr_assert_eq(h->twice, 0, "a message pushed twice");
    pr_group g;
    cr_assert(group_entry(r, "log", &g));
    cr_assert_eq(g.last_mid, n, "last mid %lu: %s", (unsigned long)g.last_mid, lost);
    free(h->seen);
}

/* Polls `groups` on k until the group is there (or not) with the given ack; bounded. */
static void await_group(gwc_conn *k, const char *gid, bool present, uint64_t ack)
{
    pr_group g = {.gid = {0}};
    bool there = false;
    for (int i = 0; i < 100; i++) {
        there = group_entry(k, gid, &g);
        if (there == present && (!present || g.ack == ack))
            return;
        usleep(50 * 1000);
    }
    cr_assert_fail("groups on the other node: %s %s (ack %lu), expected %s (ack %lu)", gid,
                   there ? "present" : "absent", (unsigned long)g.ack,
                   present ? "present" : "absent", (unsigned long)ack);
}

Test(cluster, one_user_on_two_nodes_shares_memberships_and_acks, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    gwc_conn *a1 = gwfx_login(&fa, "alice", NULL); /* alice's phone, on node A */
    gwc_conn *a2 = gwfx_login(&fb, "alice", NULL); /* her laptop, on node B */
    gwc_conn *bob = gwfx_login(&fc, "bob", NULL);
    gwfx_join(bob, "team");

    /* A join on A: B's session lists the group and gets its pushes. */
    gwfx_join(a1, "team");
    await_group(a2, "team", true, 0);
    uint64_t m1 = gwfx_send_msg(bob, "team", "b1", "hello alice");
    pr_event ev = gwfx_expect(a2, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, m1);
    ev = gwfx_expect(a1, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, m1);

    /* Her own message from A reaches her other device on B once, and not A's session. */
    uint64_t m2 = gwfx_send_msg(a1, "team", "a1", "from the phone");
    ev = gwfx_expect(a2, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, m2);
    cr_assert(gwfx_slice_is(ev.msg.from, "alice"));
    ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, m2);
    cr_assert(gwfx_quiet(a2, 300), "pushed once");

    /* An ack on A shows on B: the laptop's unread count drops. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack ack = {gwfx_sl("team"), m2};
    pr_enc_ack(&sb, &ack, 1);
    gwfx_send(a1, &sb);
    await_group(a2, "team", true, m2);
    pr_group g;
    cr_assert(group_entry(a2, "team", &g));
    cr_assert_eq(g.unread, 0);

    /* A leave on A: B's session is told (`left` without a rid), lists it no more and
     * gets no pushes of it. */
    sb.size = 0;
    pr_enc_leave(&sb, 9, gwfx_sl("team"));
    gwfx_request(a1, &sb, PR_EV_LEFT);
    ev = gwfx_expect(a2, PR_EV_LEFT);
    cr_assert(gwfx_slice_is(ev.gid, "team") && !ev.has_rid);
    await_group(a2, "team", false, 0);
    gwfx_send_msg(bob, "team", "b2", "anyone?");
    cr_assert(gwfx_quiet(a2, 500), "no push after the leave");
    cr_assert(gwfx_quiet(a1, 100));
    /* And B's session is no member any more: its send is refused. */
    sb.size = 0;
    pr_enc_send(&sb, 11, gwfx_sl("team"), gwfx_sl("a2"), (pr_body){gwfx_sl("x"), false});
    ev = gwfx_request(a2, &sb, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_NOT_MEMBER);
    msgpack_sbuffer_destroy(&sb);
}

Test(cluster, a_node_killed_under_load_loses_nothing, .timeout = 180)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    gwc_conn *s = gwfx_login(&fa, "alice", NULL);
    gwc_conn *r = gwfx_login(&fb, "carol", NULL); /* on the node that will be killed */
    gwc_conn *r2 = gwfx_login(&fc, "dave", NULL);
    gwfx_join(s, "log");
    gwfx_join(r, "log");
    gwfx_join(r2, "log");
    enum { N = 600, KILL_AT = 250 };
    holder h, h2;
    holder_init(&h, r, N);
    holder_init(&h2, r2, N);
    /* The sender keeps 50 in flight; at KILL_AT, node B dies under the receiver. */
    int sent = 0, confirmed = 0;
    while (confirmed < N) {
        while (sent < N && sent - confirmed < 50) {
            send_burst(s, "log", "a", sent + 1, 1);
            sent++;
        }
        pr_event ev;
        cr_assert_eq(gwc_next(s, GWFX_WAIT * 2, &ev), 0, "confirmed %d", confirmed);
        if (ev.t == PR_EV_SENT)
            confirmed++;
        if (confirmed == KILL_AT && gwfx_alive(&fb))
            gwfx_stop(&fb, SIGKILL);
        if (gwfx_alive(&fb))
            take(&h, 0);
        take(&h2, 0);
    }
    /* The receiver of B reconnects to C and catches up after what it holds. */
    cr_assert_lt(h.watermark, (uint64_t)N, "the kill came before the end");
    gwc_close(r);
    h.k = gwfx_login(&fc, "carol", NULL);
    catch_up(&h, "log", N);
    take_until(&h2, N, 10000);
    cr_assert_eq(h2.watermark, N, "the other node's receiver got every push");
    cr_assert_eq(h2.out_of_order, 0);
    cr_assert_eq(h2.twice, 0);
    free(h.seen);
    free(h2.seen);
}

Test(cluster, a_sender_whose_node_dies_resends_and_each_message_is_stored_once, .timeout = 180)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    /* alice: on the node that will be killed */
    gwc_conn *s, *r;
    gwfx_login_two(&fa, "alice", &fc, "dave", "log", &s, &r);
    enum { N = 400 };
    send_burst(s, "log", "a", 1, N);
    /* Some are confirmed, some not, when A dies. */
    int confirmed = 0;
    while (confirmed < N / 4) {
        pr_event ev;
        cr_assert_eq(gwc_next(s, GWFX_WAIT * 2, &ev), 0);
        confirmed += ev.t == PR_EV_SENT;
    }
    gwfx_stop(&fa, SIGKILL);
    /* The client reconnects to B and sends again everything it has no `sent` for, with
     * the same cids: each is stored once. */
    gwc_close(s);
    s = gwfx_login(&fb, "alice", NULL);
    send_burst(s, "log", "a", 1, N);
    await_sent(s, N);
    holder h;
    holder_init(&h, r, N);
    take_until(&h, N, 10000);
    /* N messages, each once: the group's last mid is N. */
    expect_each_once(&h, r, N, "a resend was stored again");
}

/* A client's sending of messages 1..n (cid "aN", rid N) from s, at most `window` of them
 * unconfirmed; `unavailable` (or `overloaded`) means not confirmed, so the same cid goes
 * again a little later (stored once whatever happened to the first). h takes what its receiver is
 * pushed meanwhile. at(confirmed, ud) is called after every event (the test's moves: kill a
 * database server, and so on); it returns how many to send in all from then on (at least
 * n, at most SEND_MAX): the sending ends when that many are confirmed. Returns the sends
 * refused, and the number sent in *n. */
enum { SEND_MAX = 6000 };
static int send_through(gwc_conn *s, holder *h, int *n_io, int window,
                        int (*at)(int confirmed, void *ud), void *ud)
{
    static uint8_t confirmed[SEND_MAX + 1];
    static int resend[SEND_MAX];
    int n = *n_io;
    cr_assert_leq(n, SEND_MAX);
    memset(confirmed, 0, sizeof(confirmed));
    int n_resend = 0, next = 1, inflight = 0, n_confirmed = 0, refused = 0;
    long retry_at = 0, deadline = tclock_ms() + 200000;
    while (n_confirmed < n) {
        cr_assert_lt(tclock_ms(), deadline, "confirmed %d of %d in 200 s", n_confirmed, n);
        while (next <= n && inflight < window) {
            send_burst(s, "log", "a", next++, 1);
            inflight++;
        }
        if (n_resend && tclock_ms() >= retry_at) {
            for (int i = 0; i < n_resend; i++)
                send_burst(s, "log", "a", resend[i], 1);
            n_resend = 0; /* they kept their places in the window */
        }
        pr_event ev;
        int rc = gwc_next(s, 200, &ev);
        cr_assert(rc == 0 || rc == GWC_ETIMEDOUT, "the sender's session: %s", gwc_strerror(rc));
        if (rc == 0 && ev.t == PR_EV_SENT) {
            inflight--;
            cr_assert(ev.rid >= 1 && ev.rid <= (uint64_t)n);
            if (!confirmed[ev.rid]) {
                confirmed[ev.rid] = 1;
                n_confirmed++;
            }
        } else if (rc == 0 && ev.t == PR_EV_ERR) {
            cr_assert(ev.err_code == PR_E_UNAVAILABLE || ev.err_code == PR_E_OVERLOADED, "err %.*s",
                      (int)ev.err_name.n, ev.err_name.p);
            refused++; /* still unconfirmed: its place in the window stays taken */
            resend[n_resend++] = (int)ev.rid;
            retry_at = tclock_ms() + 300;
        }
        take(h, 0);
        int want = at(n_confirmed, ud);
        if (want > n)
            n = want < SEND_MAX ? want : SEND_MAX;
    }
    *n_io = n;
    return refused;
}

/* The failover of the pair, once, after 150 messages are confirmed. */
static int fail_pair_once(int confirmed, void *ud)
{
    bool *done = ud;
    if (confirmed >= 150 && !*done) {
        pgfx_pair_failover(&pair); /* SIGKILL of the primary, the standby promoted */
        *done = true;
    }
    return 0;
}

Test(cluster, the_primary_killed_under_load_and_its_standby_promoted_loses_nothing, .timeout = 240)
{
    pgfx_need(PGFX_ONLY);
    pgfx_pair_start(&pair);
    char *url = pgfx_pair_db_new(&pair); /* names both servers: read-write is the primary */
    gwfx_start_on(&fa, url, NULL);
    gwfx_start_beside(&fb, &fa, NULL);
    free(url);
    gwc_conn *s, *r;
    gwfx_login_two(&fa, "alice", &fb, "carol", "log", &s, &r);
    enum { N = 400 };
    holder h;
    holder_init(&h, r, N);
    bool failed_over = false;
    int n = N;
    int refused = send_through(s, &h, &n, 50, fail_pair_once, &failed_over);
    cr_log_info("failover: %d sends refused and sent again", refused);
    /* The receiver's node lost its listener with the primary, and with it what was
     * announced until it listened again on the new one: it reads what it missed for its
     * online groups and pushes it. Every confirmed message is there, once, with a dense
     * mid. */
    take_until(&h, N, 15000);
    cr_assert_eq(h.watermark, N,
                 "the receiver's node caught up after its listener came back: %lu of %d pushed",
                 (unsigned long)h.watermark, N);
    expect_each_once(&h, r, N, "a resend was stored again, or one was lost");
}

/* The automatic failover's moves (Patroni): at each step's count of confirmed messages,
 * the leader is killed, then the leader again (the first one is back as its replica by
 * then), then the replica; the time from each kill to the first message confirmed after
 * it (past a window's worth: what was in flight at the kill may have been committed
 * before it) is measured. */
enum { HA_WINDOW = 20 };
typedef struct ha_moves {
    int step;
    int at_kill;   /* confirmed when the last kill was made */
    long kill_ms;  /* its time (0: none waiting for its first write) */
    long ready_ms; /* the cluster last looked at (its status costs a few processes) */
    long took[3];
    char killed[3][32];
} ha_moves;

static int ha_move(int confirmed, void *ud)
{
    ha_moves *m = ud;
    /* A client that sends at a human pace, 50 messages a second at most, all along: the
     * moves take a minute or more (each failover waits for the leader key's ttl). */
    usleep(20 * 1000);
    int more = m->step < 3 || m->kill_ms ? confirmed + 100 : 0; /* on until the last move */
    static const int at[3] = {100, 260, 420};
    /* At most HA_WINDOW sends were unconfirmed at the kill: the next one confirmed past
     * them was sent after it. */
    if (m->kill_ms && confirmed > m->at_kill + HA_WINDOW) {
        m->took[m->step - 1] = tclock_ms() - m->kill_ms;
        cr_log_info("failover: %s killed, writes confirmed again after %ld ms",
                    m->killed[m->step - 1], m->took[m->step - 1]);
        m->kill_ms = 0;
    }
    if (m->step == 3 || m->kill_ms || confirmed < at[m->step] || tclock_ms() < m->ready_ms + 500)
        return more;
    /* The one killed before must be back as a replica first (its supervisor starts it
     * again; it catches up with the new leader by itself): looked at twice a second while
     * the sends go on. */
    m->ready_ms = tclock_ms();
    if (!pgfx_ha_ready(&ha))
        return more;
    pgfx_ha_kill(&ha, m->step < 2, m->killed[m->step], sizeof(m->killed[0]));
    m->kill_ms = tclock_ms();
    m->at_kill = confirmed;
    m->step++;
    return more;
}

Test(cluster, automatic_failover_under_load_loses_nothing, .timeout = 400)
{
    pgfx_need(PGFX_ONLY);
#ifdef GW_TEST_SANITIZED
    cr_skip_test("the normal build's PostgreSQL pass runs it (each failover waits seconds)");
#endif
    pgfx_ha_start(&ha);
    char *url = pgfx_ha_db_new(&ha); /* names both servers: read-write is the leader */
    /* A client flat out for a minute and more: over the default send rate by design. */
    static const char *const unlimited[] = {"--rate-sends", "0", NULL};
    gwfx_start_on(&fa, url, unlimited);
    gwfx_start_beside(&fb, &fa, unlimited);
    free(url);
    gwc_conn *s, *r;
    gwfx_login_two(&fa, "alice", &fb, "carol", "log", &s, &r);
    holder h;
    holder_init(&h, r, SEND_MAX);
    ha_moves m = {0};
    int n = 560; /* and on until the last move has been made and writes came back */
    int refused = send_through(s, &h, &n, HA_WINDOW, ha_move, &m);
    cr_assert_eq(m.step, 3, "every kill made");
    cr_assert_eq(m.kill_ms, 0, "writes confirmed after the last kill");
    cr_log_info("automatic failover: leader %s killed: %ld ms to the next confirmed write; "
                "leader %s killed: %ld ms; replica %s killed: %ld ms; %d sends refused and "
                "sent again, %d messages",
                m.killed[0], m.took[0], m.killed[1], m.took[1], m.killed[2], m.took[2], refused, n);
    cr_assert_str_neq(m.killed[0], m.killed[1], "the second kill was of the new leader");
    /* Every confirmed message is there, once, with a dense mid, and the receiver has each. */
    take_until(&h, (uint64_t)n, 20000);
    cr_assert_eq(h.watermark, (uint64_t)n, "the receiver has %lu of %d", (unsigned long)h.watermark,
                 n);
    expect_each_once(&h, r, (uint64_t)n, "a resend was stored again, or one was lost");
}

/* The partition's moves: the link of node B to the database cut once 100 messages are
 * confirmed, healed 30 s later; the sending goes on until 100 more are confirmed after. */
typedef struct cut_moves {
    long cut_ms, healed_ms;
    int at_heal;
    gwc_conn *other; /* on A: sends to the group of B's second member while B is cut */
    int other_sent;
} cut_moves;

static int cut_move(int confirmed, void *ud)
{
    cut_moves *m = ud;
    usleep(20 * 1000); /* a human pace: 50 a second at most */
    if (!m->cut_ms && confirmed >= 100) {
        tproxy_cut(proxy, true);
        m->cut_ms = tclock_ms();
    } else if (m->cut_ms && !m->healed_ms && tclock_ms() - m->cut_ms >= 30000) {
        tproxy_cut(proxy, false);
        m->healed_ms = tclock_ms();
        m->at_heal = confirmed;
    }
    /* Meanwhile node A goes on: its messages to "side" reach B's member only by B's
     * catch-up, since B's listener hears nothing while cut. */
    if (m->cut_ms && !m->healed_ms && m->other_sent < 20 && tclock_ms() - m->cut_ms >= 2000) {
        char cid[16];
        snprintf(cid, sizeof(cid), "o%d", ++m->other_sent);
        gwfx_send_msg(m->other, "side", cid, "while B was cut off");
    }
    return m->healed_ms ? m->at_heal + 100 : confirmed + 100;
}

/* A network partition between node B and the database (a TCP proxy that drops nothing
 * and passes nothing), 30 s long, while B's sessions keep sending. */
Test(cluster, a_node_cut_from_the_database_keeps_its_sessions_and_loses_nothing, .timeout = 240)
{
    PGFX_ONE_DATABASE();
    pgfx_need(PGFX_ONLY);
    static const char *const unlimited[] = {"--rate-sends", "0", "--node", "node-cut", NULL};
    gwfx_start(&fa, NULL);
    /* B reaches the database through the proxy: the same URL with the proxy's port. */
    const char *at = strstr(fa.store_url, "127.0.0.1:");
    cr_assert_not_null(at, "a TCP URL: %s", fa.store_url);
    proxy = tproxy_start(atoi(at + strlen("127.0.0.1:")));
    cr_assert_not_null(proxy);
    const char *rest = strchr(at + strlen("127.0.0.1:"), '/');
    char url[600];
    snprintf(url, sizeof(url), "%.*s127.0.0.1:%d%s", (int)(at - fa.store_url), fa.store_url,
             tproxy_port(proxy), rest);
    gwfx_start_beside_on(&fb, &fa, url, unlimited); /* one client context: see gwfx.h */
    gwc_conn *s = gwfx_login(&fb, "alice", NULL);   /* sends through the cut node */
    gwc_conn *r = gwfx_login(&fa, "carol", NULL);
    gwc_conn *d = gwfx_login(&fb, "dave", NULL); /* on the cut node, in "side" */
    gwc_conn *o = gwfx_login(&fa, "erin", NULL); /* sends to "side" from A */
    gwfx_join(s, "log");
    gwfx_join(r, "log");
    gwfx_join(d, "side");
    gwfx_join(o, "side");
    holder h, hd;
    holder_init(&h, r, SEND_MAX);
    holder_init(&hd, d, 64);
    double resyncs = watch_stat(&fb, "cluster.resyncs");
    double caught = watch_stat(&fb, "cluster.catch_ups");
    cut_moves m = {.other = o};
    int n = 300;
    int refused = send_through(s, &h, &n, HA_WINDOW, cut_move, &m);
    cr_assert(m.healed_ms, "the link was cut and healed");
    cr_log_info("partition: cut for %ld ms; %d sends refused (unavailable) and sent again with "
                "the same cid; %d messages; %d sent from A meanwhile",
                m.healed_ms - m.cut_ms, refused, n, m.other_sent);
    cr_assert_gt(refused, 0, "sends during the cut were refused, not left unanswered");
    /* Every confirmed message is there, once, with a dense mid; A's member has each. */
    take_until(&h, (uint64_t)n, 20000);
    cr_assert_eq(h.watermark, (uint64_t)n, "the receiver has %lu of %d", (unsigned long)h.watermark,
                 n);
    expect_each_once(&h, r, (uint64_t)n, "a resend was stored again, or one was lost");
    /* B's member of "side" got what A stored while B was cut, by B's catch-up by position
     * (the session stayed open all along). */
    take_until(&hd, (uint64_t)m.other_sent, 20000);
    cr_assert_eq(hd.watermark, (uint64_t)m.other_sent, "B's member has %lu of %d",
                 (unsigned long)hd.watermark, m.other_sent);
    cr_assert_eq(hd.twice, 0);
    cr_assert_geq(watch_stat(&fb, "cluster.catch_ups"), caught + 1, "B caught up by position");
    cr_assert_eq(watch_stat(&fb, "cluster.resyncs"), resyncs, "and did not reread its users");
    free(hd.seen); /* h's: expect_each_once */
}

/* While a node's listener is away, the others' announcements are lost to it; when it
 * listens again it reads the change log from its position: one statement, the rows
 * written meanwhile, and not a read per online user. */
Test(cluster, a_node_whose_listener_was_away_catches_up_by_position, .timeout = 120)
{
    PGFX_ONE_DATABASE();
    pgfx_need(PGFX_ONLY);
    static const char *const named[] = {"--node", "node-b", NULL};
    gwfx_start(&fa, NULL);
    gwfx_start_beside(&fb, &fa, named);
    gwc_conn *s = gwfx_login(&fa, "alice", NULL);
    gwc_conn *r = gwfx_login(&fb, "carol", NULL);
    gwc_conn *r2 = gwfx_login(&fa, "carol", NULL); /* carol's other device, on A */
    gwfx_join(s, "log");
    gwfx_join(r, "log");
    gwfx_join(s, "side");
    gwfx_send_msg(s, "log", "first", "before");
    holder h;
    holder_init(&h, r, 30);
    take(&h, GWFX_WAIT);
    cr_assert_eq(h.watermark, 1);
    double resyncs = watch_stat(&fb, "cluster.resyncs");
    double reads = watch_stat(&fb, "cluster.resync_reads");
    double caught = watch_stat(&fb, "cluster.catch_ups");
    /* Node B's listener is cut off, and cannot come back until the database takes new
     * connections again; node A's connection stays, and it stores 20 messages meanwhile,
     * whose announcements B never gets, and carol, on A, joins a group and acks. No
     * message follows them to show B a hole: only its catch-up, when it listens again,
     * can. */
    char admin[400], db[128], sql[600];
    pgfx_admin_url(fa.store_url, admin, sizeof(admin), db, sizeof(db));
    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS false", db);
    pgfx_scalar(admin, sql);
    cr_assert_eq(pgfx_end_connections(admin, "gw-feed node-b"), 1,
                 "node B's listener was found and ended");
    for (int i = 2; i <= 21; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "m%d", i);
        gwfx_send_msg(s, "log", cid, "while B was not listening");
    }
    pr_event ev;
    while (gwc_next(r2, 300, &ev) == 0) /* the pushes of log carol's device on A got */
        ;
    gwfx_join(r2, "side");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack ack = {gwfx_sl("log"), 21};
    pr_enc_ack(&sb, &ack, 1);
    gwfx_send(r2, &sb);
    msgpack_sbuffer_destroy(&sb);
    usleep(300 * 1000); /* the ack's coalescing delay */
    cr_assert(gwfx_quiet(r, 500), "B cannot know of them yet");
    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS true", db);
    pgfx_scalar(admin, sql);
    take_until(&h, 21, 15000);
    cr_assert_eq(h.watermark, 21, "pushed after the catch-up: up to %lu of 21",
                 (unsigned long)h.watermark);
    cr_assert_eq(h.out_of_order, 0);
    cr_assert_eq(h.twice, 0);
    /* The join and the ack made on A reached B's registry too. */
    await_group(r, "side", true, 0);
    await_group(r, "log", true, 21);
    uint64_t m = gwfx_send_msg(s, "side", "s1", "to the new member");
    ev = gwfx_expect(r, PR_EV_MSG);
    cr_assert(gwfx_slice_is(ev.gid, "side") && ev.msg.mid == m, "B pushes the joined group");
    /* By position: one catch-up more, no resync, no read per user or group. */
    cr_assert_eq(watch_stat(&fb, "cluster.catch_ups"), caught + 1);
    cr_assert_geq(watch_stat(&fb, "cluster.catch_up_rows"), 22, "20 sends, a join, an ack");
    cr_assert_eq(watch_stat(&fb, "cluster.resyncs"), resyncs, "no resync");
    cr_assert_eq(watch_stat(&fb, "cluster.resync_reads"), reads);
    free(h.seen);
}

/* A batch of messages announces them after its commit, in a transaction of its own; if
 * the database dies between the two, the announcement is lost with it. Every listener
 * loses its connection then too, and reads again what concerns its users when it is
 * back: the message reaches the other node's member anyway. */
Test(cluster, an_announcement_lost_after_its_commit_is_caught_up, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    pgfx_server_start(&own); /* restarted below: the suite's server is not */
    char *url = pgfx_server_db_new(&own);
    static const char *const lose_one[] = {"--test-drop-announcements", "1", NULL};
    gwfx_start_on(&fa, url, lose_one);
    gwfx_start_beside(&fb, &fa, NULL);
    free(url);
    gwc_conn *s = gwfx_login(&fa, "alice", NULL);
    gwc_conn *r = gwfx_login(&fb, "carol", NULL);
    gwfx_join(s, "log"); /* a membership's batch announces in its transaction: not lost */
    gwfx_join(r, "log");
    gwfx_send_msg(s, "log", "m1", "announced never");
    holder h;
    holder_init(&h, r, 4);
    cr_assert(gwfx_quiet(r, 1000), "B cannot know of it: its announcement was lost");
    cr_assert_eq(watch_stat(&fa, "cluster.announcements_late"), 0);
    /* The database dies right after (and starts again): every listener reconnects. */
    pgfx_server_restart_immediate(&own);
    take_until(&h, 1, 30000);
    cr_assert_eq(h.watermark, 1, "m1 reached B after the database came back");
    cr_assert_eq(h.twice, 0);
    /* And the announcements go on after their commits as before, once A's store is back
     * too (it reconnects on its own schedule: B's being back says nothing of A's). Over
     * shards /healthz is 200 once any shard is back: every one of them, then. */
    free(gwfx_wait_health(&fa, 200));
    for (int i = 0; i < 200 && gwfx_stat(&fa, "store", "shards_unwritable") != 0; i++)
        usleep(100 * 1000);
    gwfx_send_msg(s, "log", "m2", "announced");
    take_until(&h, 2, 20000);
    cr_assert_eq(h.watermark, 2);
    cr_assert_eq(h.twice, 0);
    cr_assert_eq(h.out_of_order, 0);
    free(h.seen);
}

Test(cluster, a_stopped_node_does_not_hold_the_database_s_notifications, .timeout = 180)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    gwc_conn *s, *r;
    gwfx_login_two(&fa, "alice", &fc, "dave", "log", &s, &r);
    /* Node C stops (SIGSTOP: a hung machine): its listener's backend can no longer hand
     * it notifications, and the server would keep them all for it. The others end that
     * listener once it has been blocked for a few seconds. */
    cr_assert_eq(kill(fc.pid, SIGSTOP), 0);
    enum { N = 2000, BYTES = 5000 }; /* about 13 MB of notifications: more than sockets hold */
    int confirmed = 0;
    long deadline = tclock_ms() + 60000;
    for (int i = 1; i <= N; i += 100) {
        send_large(s, "log", "a", i, 100, BYTES);
        await_sent(s, 100);
        confirmed += 100;
    }
    while (watch_stat(&fa, "cluster.laggards_ended") + watch_stat(&fb, "cluster.laggards_ended") <
               1 &&
           tclock_ms() < deadline)
        usleep(200 * 1000);
    double ended =
        watch_stat(&fa, "cluster.laggards_ended") + watch_stat(&fb, "cluster.laggards_ended");
    cr_assert_geq(ended, 1, "node C's listener was ended");
    /* C wakes up, listens again, resyncs, and pushes what its member missed. */
    cr_assert_eq(kill(fc.pid, SIGCONT), 0);
    holder h;
    holder_init(&h, r, N);
    take_until(&h, N, 30000);
    cr_assert_eq(h.watermark, N, "C's member got %lu of %d", (unsigned long)h.watermark, N);
    cr_assert_eq(h.twice, 0);
    cr_assert_geq(watch_stat(&fc, "cluster.feed_reconnects"), 2);
    free(h.seen);
}

Test(cluster, a_drained_node_closes_with_1001_and_its_clients_go_on_elsewhere, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    three_nodes();
    /* carol: on the node that is drained */
    gwc_conn *s, *r;
    gwfx_login_two(&fa, "alice", &fb, "carol", "log", &s, &r);
    enum { N = 300 };
    holder h;
    holder_init(&h, r, N);
    send_burst(s, "log", "a", 1, N / 2);
    await_sent(s, N / 2);
    take(&h, 200);
    /* SIGTERM: node B sends what it has queued, closes its sessions with 1001, exits 0. */
    kill(fb.pid, SIGTERM);
    pr_event ev;
    int rc;
    while ((rc = gwc_next(r, GWFX_WAIT, &ev)) == 0)
        if (ev.t == PR_EV_MSG)
            hold(&h, ev.msg.mid);
    cr_assert_eq(rc, GWC_ECLOSED, "the session ends: %s", gwc_strerror(rc));
    cr_assert_eq(gwc_close_code(r), 1001);
    gwfx_wait_exit(&fb);
    /* Meanwhile the sender goes on; the receiver comes back on node C and pulls. */
    send_burst(s, "log", "a", N / 2 + 1, N / 2);
    await_sent(s, N / 2);
    h.k = gwfx_login(&fc, "carol", NULL);
    catch_up(&h, "log", N);
    cr_assert_eq(h.twice, 0);
    free(h.seen);
}
