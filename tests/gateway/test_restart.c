/*
 * Crash and resume: the gateway is killed with SIGKILL while a sender streams messages.
 * After a restart, every message that got `sent` is stored under its mid, mids are dense,
 * resending what was unconfirmed creates no duplicates, and a receiver that resumes by
 * pulling after its ack ends with every message exactly once.
 */
#include "gwfx.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MSGS 20000

GWFX_SUITE(restart, f, gwfx_start, 120);

static uint64_t confirmed[MAX_MSGS + 1]; /* cid number -> mid from `sent` (0: none) */
static bool held[MAX_MSGS * 2 + 2];      /* receiver: mids it holds */
static int dups_absorbed;

static void send_cid(gwc_conn *k, int i)
{
    char cid[16];
    snprintf(cid, sizeof(cid), "m%d", i);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, (uint64_t)i, gwfx_sl("g"), gwfx_sl(cid),
                (pr_body){{(const uint8_t *)cid, strlen(cid)}, false});
    gwc_send(k, sb.data, sb.size); /* may fail once the server is gone: that is the test */
    msgpack_sbuffer_destroy(&sb);
}

static void take(uint64_t mid)
{
    cr_assert_lt(mid, sizeof(held) / sizeof(held[0]));
    if (held[mid])
        dups_absorbed++;
    held[mid] = true;
}

/* Reads what is there on both sessions for a moment. */
static void pump(gwc_conn *sender, gwc_conn *recv, int ms)
{
    pr_event ev;
    while (gwc_next(sender, ms, &ev) == 0)
        if (ev.t == PR_EV_SENT && ev.rid <= MAX_MSGS)
            confirmed[ev.rid] = ev.mid;
    while (gwc_next(recv, 0, &ev) == 0)
        if (ev.t == PR_EV_MSG)
            take(ev.msg.mid);
}

static void ack(gwc_conn *k, uint64_t mid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack a = {{(const uint8_t *)"g", 1}, mid};
    pr_enc_ack(&sb, &a, 1);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static uint64_t watermark(void)
{
    uint64_t w = 0;
    while (held[w + 1])
        w++;
    return w;
}

/* A pulled message: taken by the receiver, and the one that was confirmed under its mid
 * (its body is "m<cid>", cid in 1..*last_sent). */
static void check_stored(const pr_message *m, void *last_sent)
{
    take(m->mid);
    /* The body is "m<cid>", not NUL-terminated: copy it before reading it. */
    char text[16];
    snprintf(text, sizeof(text), "%.*s", (int)m->body.data.n, m->body.data.p);
    int cid = atoi(text + 1);
    cr_assert(cid >= 1 && cid <= *(int *)last_sent);
    cr_assert_eq(confirmed[cid], m->mid, "m%d confirmed as %lu, stored as %lu", cid,
                 (unsigned long)confirmed[cid], (unsigned long)m->mid);
}

Test(restart, sigkill_during_sends_loses_nothing_confirmed)
{
    gwc_conn *sender, *recv;
    gwfx_login_two(&f, "sender", &f, "recv", "g", &sender, &recv);

    /* Stream for a moment (receiver acking its watermark), then kill mid-stream. */
    int next = 1;
    long kill_at = tclock_ms() + 300 + rand() % 300;
    while (tclock_ms() < kill_at && next <= MAX_MSGS / 2) {
        for (int i = 0; i < 20; i++)
            send_cid(sender, next++);
        pump(sender, recv, 5);
        ack(recv, watermark());
    }
    /* A last burst goes out and the gateway dies while it is being committed. */
    for (int i = 0; i < 200; i++)
        send_cid(sender, next++);
    gwc_service(f.ctx, 0);
    pump(sender, recv, 1);
    gwfx_stop(&f, SIGKILL);
    pump(sender, recv, 50); /* whatever was already on the wire */
    int last_sent = next - 1, n_confirmed = 0;
    for (int i = 1; i <= last_sent; i++)
        n_confirmed += confirmed[i] != 0;
    cr_assert_gt(n_confirmed, 0, "nothing was confirmed before the kill");
    gwc_close(sender);
    gwc_close(recv);

    gwfx_restart(&f);
    sender = gwfx_login(&f, "sender", NULL);

    /* Resend what was not confirmed: the same cids, so nothing is stored twice. */
    for (int i = 1; i <= last_sent; i++) {
        if (confirmed[i])
            continue;
        char cid[16], text[16];
        snprintf(cid, sizeof(cid), "m%d", i);
        snprintf(text, sizeof(text), "m%d", i);
        confirmed[i] = gwfx_send_msg(sender, "g", cid, text);
    }

    /* The receiver comes back: its ack, then pull after it to the end. */
    pr_event w;
    recv = gwfx_login(&f, "recv", &w);
    pr_group g = gwfx_first_group(&w);
    cr_assert_eq(g.last_mid, (uint64_t)last_sent, "every send stored once: mids 1..%d", last_sent);
    cr_assert_leq(g.ack, watermark(), "the stored ack never passes what was acked");
    uint64_t after = gwfx_pull_all(recv, "g", 1, g.ack, check_stored, &last_sent);
    cr_assert_eq(after, (uint64_t)last_sent);
    cr_assert_eq(watermark(), (uint64_t)last_sent, "the receiver holds every message");
    cr_log_info("restart: %d sent, %d confirmed before the kill, %d re-deliveries absorbed",
                last_sent, n_confirmed, dups_absorbed);
}
