/*
 * load_fanout: the senders' driver. Fan-out (W1): senders send to the receivers' groups
 * round robin, each delivery timed at every member; with --own-groups (W2) each sender
 * sends to a group of its own instead (durable sends without fan-out). At --rate the
 * sends are open loop; flat out each sender keeps --window sends unconfirmed.
 */
#include "load_run.h"

#include <string.h>

static void send_message(load_sess *s, int64_t meant_ns)
{
    load_run *r = s->run;
    char gid[24], cid[32];
    load_next_gid(s, gid, sizeof(gid));
    /* Unique across runs too: the same cid from the same user would be a resend. Its
     * last part is the time the send was meant to go: `sent` echoes the cid, which gives
     * the send-to-confirm latency without a table of sends in flight. */
    snprintf(cid, sizeof(cid), "%x-%lu-%llx", r->run_id, (unsigned long)r->st.sends,
             (unsigned long long)meant_ns);
    load_vary_body(r, r->body);
    memcpy(r->body, &meant_ns, sizeof(meant_ns)); /* one clock: this process */
    pr_enc_send(&r->sb, PR_NO_RID, load_sl(gid), load_sl(cid),
                (pr_body){{r->body, (size_t)r->cfg->body}, true});
    load_send_frame(s, &r->sb);
    s->inflight++;
    r->st.sends++;
}

static void flat_out(load_run *r)
{
    const load_cfg *cfg = r->cfg;
    for (int i = 0; i < cfg->senders; i++) {
        load_sess *s = &r->ss[cfg->sessions + i];
        while (s->inflight < cfg->window && (!cfg->count || r->st.sends < (uint64_t)cfg->count))
            send_message(s, load_now_ns());
    }
}

static bool in_flight(const load_run *r)
{
    return r->st.confirmed < r->st.sends;
}

int load_fanout(const load_cfg *cfg)
{
    load_mode mode = load_gw_mode;
    mode.send = send_message;
    mode.flat_out = flat_out;
    mode.in_flight = in_flight;
    return load_run_sessions(cfg, &mode);
}
