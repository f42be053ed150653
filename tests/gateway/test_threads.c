/*
 * Several service threads in one gateway (--threads, gateway/gw_hub.h). The first thread
 * hands new connections to the threads in turn, so consecutive logins land on
 * alternating threads: each case here puts the sessions that must meet on different
 * threads, and checks what one thread's session does reaches the other's as on one thread.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gwfx f;

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(threads, .fini = teardown, .timeout = 90);

static void start(const char *threads)
{
    const char *const args[] = {"--threads", threads, "--ack-flush-ms", "50", NULL};
    gwfx_start(&f, args);
}

static long long stat_of(const char *group, const char *key)
{
    int status;
    char *body = gwfx_http(&f, "/stats", NULL, &status);
    cr_assert_eq(status, 200);
    json_t *j = json_loads(body, 0, NULL);
    free(body);
    cr_assert_not_null(j);
    json_t *o = group ? json_object_get(j, group) : j;
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v), "/stats has no %s.%s", group ? group : "", key);
    long long x = (long long)json_number_value(v);
    json_decref(j);
    return x;
}

/* Lines of the gateway's log that the second service thread wrote. */
static int lines_of_thread_2(void)
{
    char path[320];
    snprintf(path, sizeof(path), "%s/gw.log", f.dir);
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof(line), fp))
        n += strstr(line, "] t2 ") != NULL;
    fclose(fp);
    return n;
}

static void send_nowait(gwc_conn *k, uint64_t rid, const char *gid, const char *cid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, rid, gwfx_sl(gid), gwfx_sl(cid), (pr_body){gwfx_sl(cid), false});
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
}

#define USERS 6
#define EACH 40

Test(threads, every_member_gets_every_message_once_and_in_order)
{
    start("2");
    gwc_conn *k[USERS];
    for (int i = 0; i < USERS; i++) {
        char uid[8];
        snprintf(uid, sizeof(uid), "u%d", i);
        k[i] = gwfx_login(&f, uid, NULL);
        gwfx_join(k[i], "g");
    }
    cr_assert_eq(stat_of(NULL, "threads"), 2);
    cr_assert_eq(stat_of("connections", "now"), USERS, "/stats sums the threads' sessions");
    /* Every member sends at once, from both threads, without waiting for its `sent`s. */
    for (int m = 0; m < EACH; m++)
        for (int i = 0; i < USERS; i++) {
            char cid[16];
            snprintf(cid, sizeof(cid), "c%d-%d", i, m);
            send_nowait(k[i], (uint64_t)m + 1, "g", cid);
        }
    /* Each session: its own sents in order, and every other member's message once, in
     * mid order; with its own mids they are exactly 1..USERS*EACH. */
    for (int i = 0; i < USERS; i++) {
        bool seen[USERS * EACH + 1] = {false};
        uint64_t last_push = 0;
        int sents = 0, msgs = 0;
        while (sents < EACH || msgs < (USERS - 1) * EACH) {
            pr_event ev = gwfx_expect_any(k[i]);
            uint64_t mid;
            if (ev.t == PR_EV_SENT) {
                cr_assert_eq(ev.rid, (uint64_t)sents + 1, "session %d: sents in request order", i);
                mid = ev.mid;
                sents++;
            } else {
                cr_assert_eq(ev.t, PR_EV_MSG, "session %d: event %d", i, ev.t);
                mid = ev.msg.mid;
                cr_assert_gt(mid, last_push, "session %d: pushes in mid order", i);
                last_push = mid;
                msgs++;
            }
            cr_assert(mid >= 1 && mid <= USERS * EACH && !seen[mid],
                      "session %d: mid %lu twice or out of range", i, (unsigned long)mid);
            seen[mid] = true;
        }
    }
    cr_assert_eq(stat_of("messages", "sends"), USERS * EACH);
    cr_assert_eq(stat_of("messages", "deliveries"), USERS * (USERS - 1) * EACH,
                 "/stats sums the threads' deliveries");
    cr_assert_gt(lines_of_thread_2(), 0, "the second thread served sessions");
}

Test(threads, two_devices_on_two_threads)
{
    start("2");
    gwc_conn *a1 = gwfx_login(&f, "alice", NULL); /* thread 1 */
    gwc_conn *a2 = gwfx_login(&f, "alice", NULL); /* thread 2 */
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);  /* thread 1 */
    gwfx_join(bob, "room");
    /* A join confirmed on one thread holds on the other at once. */
    gwfx_join(a1, "room");
    send_nowait(a2, 7, "room", "from-a2");
    pr_event ev = gwfx_expect(a2, PR_EV_SENT);
    cr_assert_eq(ev.rid, 7);
    uint64_t mid = ev.mid;
    ev = gwfx_expect(a1, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, mid, "the other device gets it");
    ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, mid);
    /* An ack on one thread is what a new session on the other is told. */
    gwfx_ack(a1, "room", mid);
    cr_assert(gwfx_quiet(a1, 100));
    gwc_close(bob);
    gwc_conn *a3 = gwfx_login(&f, "alice", &ev); /* thread 2 */
    pr_group g;
    bool found = false;
    for (size_t i = 0; i < ev.n_items; i++)
        if (pr_event_group(&ev, i, &g) == 0 && gwfx_slice_is(g.gid, "room"))
            found = true;
    cr_assert(found);
    cr_assert_eq(g.ack, mid);
    cr_assert_eq(g.unread, 0);
    /* A leave on one thread: the devices on the other are told, and cannot send. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_leave(&sb, 9, gwfx_sl("room"));
    ev = gwfx_request(a1, &sb, PR_EV_LEFT);
    msgpack_sbuffer_destroy(&sb);
    ev = gwfx_expect(a2, PR_EV_LEFT);
    cr_assert(gwfx_slice_is(ev.gid, "room") && !ev.has_rid);
    send_nowait(a3, 10, "room", "after-leave");
    ev = gwfx_expect(a3, PR_EV_LEFT);
    ev = gwfx_expect(a3, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_NOT_MEMBER);
    /* Three sessions on two threads are one user online. */
    cr_assert_eq(stat_of(NULL, "users_online"), 1);
    cr_assert_eq(stat_of("connections", "now"), 3);
}

Test(threads, one_thread_serves_alone_and_a_stop_ends_every_thread)
{
    start("1");
    gwfx_login(&f, "alice", NULL);
    gwfx_login(&f, "bob", NULL);
    cr_assert_eq(stat_of(NULL, "threads"), 1);
    cr_assert_eq(lines_of_thread_2(), 0, "one thread: every line is the first's");
    gwfx_cleanup(&f);

    start("3");
    gwc_conn *k[3];
    for (int i = 0; i < 3; i++)
        k[i] = gwfx_login(&f, i == 1 ? "bob" : "alice", NULL);
    kill(f.pid, SIGTERM); /* gwfx_wait_exit below checks it exits 0 */
    for (int i = 0; i < 3; i++)
        cr_assert_eq(gwfx_closed(k[i]), 1001, "session %d: going away", i);
    gwfx_wait_exit(&f);
}

/* A user acks on one thread and signs in on the other at once: its groups are read there
 * before that ack is written, and that thread is held up (--test-load-stall-ms) until
 * the ack has been written and its completion run on the first. The welcome shows the
 * ack all the same: an ack written while a read of its user's groups is under way stays
 * seen until the read is over. Without that, the welcome showed the stored ack of before
 * and the message as unread. */
Test(threads, a_sign_in_sees_an_ack_written_while_its_groups_were_read)
{
    const char *const args[] = {"--threads", "2", "--ack-flush-ms", "200", "--test-load-stall-ms",
                                "1000",      NULL};
    gwfx_start(&f, args);
    gwc_conn *a1 = gwfx_login(&f, "alice", NULL); /* thread 1 */
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);  /* thread 2 */
    gwfx_login(&f, "carol", NULL);                /* thread 1: the next login is thread 2's */
    gwfx_join(a1, "room");
    gwfx_join(bob, "room");
    send_nowait(bob, 5, "room", "hello");
    uint64_t mid = gwfx_expect(bob, PR_EV_SENT).mid;
    cr_assert_eq(gwfx_expect(a1, PR_EV_MSG).msg.mid, mid);
    gwfx_ack(a1, "room", mid);
    pr_event ev;
    gwfx_login(&f, "alice", &ev); /* thread 2, where alice is not online: her groups are read */
    pr_group g;
    bool found = false;
    for (size_t i = 0; i < ev.n_items && !found; i++)
        found = pr_event_group(&ev, i, &g) == 0 && gwfx_slice_is(g.gid, "room");
    cr_assert(found);
    cr_assert_eq(g.last_mid, mid);
    cr_assert_eq(g.ack, mid, "the welcome shows the ack taken on the other thread");
    cr_assert_eq(g.unread, 0);
}
