/*
 * Slow consumer: a member stops reading while a burst is sent. The gateway stops queueing
 * bodies for it once its queue is over the cap and queues one `notify` instead; another
 * member keeps receiving every push live meanwhile; when the slow one reads again it gets
 * the notify, pulls, and ends with every message exactly once.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MESSAGES 3000
#define BODY 16384

static gwfx f;

static void setup(void)
{
    /* The burst is far over the default rate limits: they are not what is tested here. */
    static const char *const args[] = {"--queue-cap", "64", "--rate-sends", "0", "--rate-bytes",
                                       "0",           NULL};
    gwfx_start(&f, args);
}

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(slow, .init = setup, .fini = teardown, .timeout = 180);

static bool held[MESSAGES + 1];

/* A message the slow member pulls: whole, and held; counted in *pulled. */
static void pulled_one(const pr_message *m, void *pulled)
{
    cr_assert_eq(m->body.data.n, BODY);
    held[m->mid] = true;
    (*(int *)pulled)++;
}

Test(slow, notify_then_pull_and_nobody_else_waits)
{
    /* The slow member stops reading its socket while the burst goes on. */
    gwc_conn *slow = gwfx_login(&f, "slow", NULL);
    gwfx_join(slow, "g");
    cr_assert_eq(gwc_pause(slow, true), 0);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);

    gwc_conn *sender, *fast;
    gwfx_login_two(&f, "sender", &f, "fast", "g", &sender, &fast);

    char *body = malloc(BODY);
    memset(body, 'b', BODY);
    int sent = 0, confirmed = 0, live_fast = 0;
    while (live_fast < MESSAGES) {
        while (sent < MESSAGES && sent - confirmed < 40) {
            char cid[16];
            snprintf(cid, sizeof(cid), "m%d", ++sent);
            sb.size = 0;
            pr_enc_send(&sb, PR_NO_RID, gwfx_sl("g"), gwfx_sl(cid),
                        (pr_body){{(const uint8_t *)body, BODY}, true});
            gwfx_send(sender, &sb);
        }
        pr_event ev;
        while (gwc_next(sender, 0, &ev) == 0)
            confirmed += ev.t == PR_EV_SENT;
        int rc;
        while ((rc = gwc_next(fast, 20, &ev)) == 0) {
            cr_assert_eq(ev.t, PR_EV_MSG, "fast member got event %d (%.*s)", ev.t,
                         (int)ev.err_msg.n, ev.err_msg.p);
            cr_assert_eq(ev.msg.mid, (uint64_t)live_fast + 1, "the fast member misses nothing");
            live_fast++;
        }
        cr_assert_eq(rc, GWC_ETIMEDOUT, "fast member: %s", gwc_strerror(rc));
    }
    free(body);
    cr_assert(gwfx_alive(&f));

    /* The slow member reads again: some messages, then a notify; then it pulls. */
    cr_assert_eq(gwc_pause(slow, false), 0);
    int live_slow = 0, notifies = 0;
    uint64_t notified = 0;
    pr_event ev;
    while (gwc_next(slow, 1000, &ev) == 0) {
        if (ev.t == PR_EV_MSG) {
            cr_assert_eq(notifies, 0, "no bodies after the notify until the queue drained");
            held[ev.msg.mid] = true;
            live_slow++;
        } else {
            cr_assert_eq(ev.t, PR_EV_NOTIFY);
            cr_assert(gwfx_slice_is(ev.gid, "g"));
            notifies++;
            notified = ev.last_mid;
        }
    }
    cr_assert_eq(notifies, 1, "one coalesced notify");
    cr_assert_eq(notified, MESSAGES);
    cr_assert_lt(live_slow, MESSAGES / 2, "the gateway kept queueing bodies for a slow reader");
    uint64_t after = 0;
    while (held[after + 1])
        after++;
    int pulled = 0;
    gwfx_pull_all(slow, "g", 2, after, pulled_one, &pulled);
    for (int i = 1; i <= MESSAGES; i++)
        cr_assert(held[i], "the slow member misses mid %d", i);
    cr_log_info("slow: %d pushed before the cap, then 1 notify, %d pulled", live_slow, pulled);

    /* Live pushes resume once it has drained. */
    uint64_t mid = gwfx_send_msg(fast, "g", "after", "resumed");
    ev = gwfx_expect(slow, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, mid);
    msgpack_sbuffer_destroy(&sb);
}
