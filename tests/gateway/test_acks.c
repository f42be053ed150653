/*
 * Batched acks: a client that acks as the protocol says (after ack_every messages, or
 * ack_delay_ms after the first unacked one) sends few ack frames, and the stored ack ends
 * at the last mid (read straight from the store once the gateway has stopped).
 */
#include "gwfx.h"
#include "store.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MESSAGES 1000

GWFX_SUITE(acks, f, gwfx_start, 120);

/* A client's ack policy, as docs/PROTOCOL.md describes it. */
typedef struct acker {
    gwc_conn *k;
    uint64_t every, delay_ms;
    uint64_t held;  /* contiguous watermark */
    uint64_t acked; /* last mid acked */
    long first_unacked_at;
    int frames;
} acker;

static void ack_now(acker *a)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack x = {{(const uint8_t *)"g", 1}, a->held};
    pr_enc_ack(&sb, &x, 1);
    gwfx_send(a->k, &sb);
    msgpack_sbuffer_destroy(&sb);
    a->acked = a->held;
    a->frames++;
    a->first_unacked_at = 0;
}

static void on_message(acker *a, uint64_t mid)
{
    if (mid == a->held + 1)
        a->held = mid;
    if (a->held > a->acked && !a->first_unacked_at)
        a->first_unacked_at = tclock_ms();
    if (a->held - a->acked >= a->every)
        ack_now(a);
}

static void on_idle(acker *a)
{
    if (a->held > a->acked && tclock_ms() - a->first_unacked_at >= (long)a->delay_ms)
        ack_now(a);
}

Test(acks, batched_acks_are_few_and_end_at_the_last_mid)
{
    pr_event w;
    gwc_conn *sender = gwfx_login(&f, "sender", NULL);
    gwc_conn *b = gwfx_login(&f, "bob", &w);
    acker a = {.k = b, .every = w.welcome.ack_every, .delay_ms = w.welcome.ack_delay_ms};
    cr_assert_gt(a.every, 1);
    gwfx_join(sender, "g");
    gwfx_join(b, "g");

    /* Send in bursts without waiting for each `sent`; collect them afterwards. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int sent = 0, received = 0;
    while (sent < MESSAGES || received < MESSAGES) {
        for (int burst = 0; burst < 50 && sent < MESSAGES; burst++) {
            char cid[16];
            snprintf(cid, sizeof(cid), "m%d", ++sent);
            sb.size = 0;
            pr_enc_send(&sb, PR_NO_RID, gwfx_sl("g"), gwfx_sl(cid),
                        (pr_body){{(const uint8_t *)"tick", 4}, false});
            gwfx_send(sender, &sb);
        }
        pr_event ev;
        while (received < MESSAGES && gwc_next(b, 50, &ev) == 0) {
            cr_assert_eq(ev.t, PR_EV_MSG);
            cr_assert_eq(ev.msg.mid, (uint64_t)received + 1, "in order, no gaps");
            received++;
            on_message(&a, ev.msg.mid);
        }
        on_idle(&a);
        gwc_service(f.ctx, 0); /* lets the sender's frames and `sent` replies move */
    }
    msgpack_sbuffer_destroy(&sb);
    /* Wait out the delay for the tail, as a client would. */
    long until = tclock_ms() + (long)a.delay_ms + 200;
    while (a.acked < a.held && tclock_ms() < until) {
        gwc_service(f.ctx, 50);
        on_idle(&a);
    }
    cr_assert_eq(a.acked, MESSAGES);
    cr_log_info("acks: %d ack frames for %d messages (ack_every %lu)", a.frames, MESSAGES,
                (unsigned long)a.every);
    cr_assert_leq(a.frames, MESSAGES / (int)a.every + 3);
    gwc_service(f.ctx, 100);

    /* A graceful stop flushes the coalesced acks; the store holds the last mid. */
    gwfx_stop(&f, SIGTERM);
    st_store *s = gwfx_open_store(&f);
    uint64_t ack = 0, last = 0;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("bob"), &ack), 0);
    cr_assert_eq(st_read_last_mid(s, st_id_str("g"), &last), 0);
    st_close(s);
    cr_assert_eq(last, MESSAGES);
    cr_assert_eq(ack, MESSAGES);
}
