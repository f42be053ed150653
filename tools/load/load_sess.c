/*
 * load_sess: gw_load's sessions that speak the protocol (fan-out, own groups, idle).
 *
 * Receiver u<i> is a member of group g<i / group-size>; sender s<j> of every group (or,
 * with --own-groups, only of own<j>-<run>). Each signs in as soon as its handshake is
 * done, joins, and every receiver acks its group as the protocol says (ackrule.h).
 * Deliveries carry the time they were meant to be sent in their first 8 bytes.
 */
#include "load_run.h"

#include <string.h>

int load_n_groups(const load_cfg *cfg)
{
    return cfg->sessions ? (cfg->sessions + cfg->group_size - 1) / cfg->group_size : 1;
}

/* A sender's g-th group: g<g>, or its own (--own-groups: its only member is the sender). */
static void sender_gid(const load_sess *s, int g, char *gid, size_t n)
{
    if (s->run->cfg->own_groups)
        snprintf(gid, n, "own%d-%x", s->id, s->run->run_id);
    else
        snprintf(gid, n, "g%d", g);
}

static int sender_groups(const load_sess *s)
{
    return s->run->cfg->own_groups ? 1 : load_n_groups(s->run->cfg);
}

void load_next_gid(load_sess *s, char *gid, size_t n)
{
    sender_gid(s, s->group, gid, n);
    s->group = (s->group + 1) % load_n_groups(s->run->cfg);
}

static void maybe_ack(load_sess *s, bool force, int64_t now)
{
    uint64_t mid = force ? ackrule_pending(&s->ack) : ackrule_due(&s->ack, now);
    if (!mid)
        return;
    load_run *r = s->run;
    char gid[24];
    snprintf(gid, sizeof(gid), "g%d", s->group);
    pr_ack a = {load_sl(gid), mid};
    pr_enc_ack(&r->sb, &a, 1);
    load_send_frame(s, &r->sb);
    ackrule_acked(&s->ack, mid);
    r->st.ack_frames++;
    if (r->cfg->reads) {
        pr_enc_read(&r->sb, &a, 1);
        load_send_frame(s, &r->sb);
        r->st.read_frames++;
    }
}

static void on_delivery(load_sess *s, const pr_message *m)
{
    load_run *r = s->run;
    load_stats *st = &r->st;
    int64_t now = load_now_ns(), meant;
    st->deliveries++;
    r->last_delivery_ns = now;
    if (m->body.data.n >= sizeof(meant)) {
        memcpy(&meant, m->body.data.p, sizeof(meant));
        load_hist_add(&st->lat, (now - meant) / 1000);
        load_hist_add(&st->lat_url[s->url], (now - meant) / 1000);
        st->deliveries_url[s->url]++;
        if (r->cfg->interval > 0)
            load_hist_add(&r->lat_iv, (now - meant) / 1000);
    }
    if (s->sender)
        return; /* a sender is a member of many groups: only receivers track and ack */
    if (m->mid > s->ack.held + 1)
        st->gaps++; /* only after a notify; counted, not pulled: this is a load tool */
    ackrule_hold(&s->ack, m->mid, now);
    maybe_ack(s, false, now);
}

/* The send-to-confirm latency from a cid load_fanout made ("RUN-SEQ-MEANT", hex last):
 * other cids (two parts) are left out. */
static void sent_latency(load_stats *st, pr_slice cid)
{
    const char *c = (const char *)cid.p;
    int dashes = 0;
    size_t last = 0;
    for (size_t i = 0; i < cid.n; i++)
        if (c[i] == '-') {
            dashes++;
            last = i + 1;
        }
    if (dashes != 2 || last >= cid.n || cid.n - last > 16)
        return;
    int64_t meant = 0;
    for (size_t i = last; i < cid.n; i++) {
        char h = c[i];
        int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
        if (v < 0)
            return;
        meant = meant * 16 + v;
    }
    load_hist_add(&st->lat_send, (load_now_ns() - meant) / 1000);
}

static int on_event(void *ud, const pr_event *ev)
{
    load_sess *s = ud;
    load_stats *st = &s->run->st;
    switch (ev->t) {
    case PR_EV_WELCOME:
        s->welcomed = true;
        ackrule_cadence(&s->ack,
                        s->run->cfg->ack_every > 0 ? (uint32_t)s->run->cfg->ack_every
                                                   : ev->welcome.ack_every,
                        ev->welcome.ack_delay_ms);
        break;
    case PR_EV_JOINED:
        if (!s->sender) {
            ackrule_start(&s->ack, ev->last_mid, ev->last_mid, 0);
            s->joined = true;
        } else if (--s->inflight == 0) {
            s->joined = true; /* joined every group */
        }
        break;
    case PR_EV_SENT:
        s->inflight--;
        st->confirmed++;
        sent_latency(st, ev->cid);
        break;
    case PR_EV_MSG: on_delivery(s, &ev->msg); break;
    case PR_EV_NOTIFY: st->notifies++; break;
    case PR_EV_ERR:
        st->errors++;
        if (st->errors <= 5)
            fprintf(stderr, "gw_load: err %.*s: %.*s\n", (int)ev->err_name.n, ev->err_name.p,
                    (int)ev->err_msg.n, ev->err_msg.p);
        break;
    default: break;
    }
    return 0;
}

static void load_gw_on_frame(load_sess *s, const uint8_t *f, size_t n)
{
    pr_error perr;
    if (pr_decode_events(s->run->dec, f, n, on_event, s, &perr) != 0 && ++s->run->st.errors <= 5)
        fprintf(stderr, "gw_load: bad frame from the server: %s: %s\n", pr_err_name(perr.code),
                perr.msg);
}

/* Signs a session in. Sent as soon as its handshake is done: with thousands of sessions
 * still connecting, the first ones would otherwise outlive the server's hello timeout. */
static bool send_hello(load_sess *s)
{
    const load_cfg *cfg = s->run->cfg;
    char uid[32];
    snprintf(uid, sizeof(uid), "%.16s%s%d", cfg->uid_prefix, s->sender ? "s" : "u", s->id);
    if (load_enc_hello(cfg, uid, &s->run->sb) != 0)
        return false;
    load_send_frame(s, &s->run->sb);
    s->hello_sent = true;
    return true;
}

static void load_gw_on_open(load_sess *s)
{
    if (!send_hello(s))
        s->run->st.errors++;
}

static bool is_welcomed(const load_sess *s)
{
    return s->welcomed;
}

static bool is_joined(const load_sess *s)
{
    return s->joined;
}

static bool load_gw_set_up(load_run *r)
{
    for (int i = 0; i < r->n; i++)
        if (!r->ss[i].hello_sent && !send_hello(&r->ss[i]))
            return false;
    if (!load_wait_all(r, is_welcomed, 60 + r->n / 500.0, "signing in"))
        return false;
    for (int i = 0; i < r->n; i++) {
        load_sess *s = &r->ss[i];
        int first = s->sender ? 0 : s->group, last = s->sender ? sender_groups(s) : first + 1;
        for (int g = first; g < last; g++) {
            char gid[24];
            if (s->sender)
                sender_gid(s, g, gid, sizeof(gid));
            else
                snprintf(gid, sizeof(gid), "g%d", g);
            pr_enc_join(&r->sb, PR_NO_RID, load_sl(gid));
            load_send_frame(s, &r->sb);
            s->inflight += s->sender;
        }
    }
    return load_wait_all(r, is_joined, 60 + r->n / 200.0, "joining");
}

static void load_gw_tick(load_run *r, int64_t now)
{
    for (int i = 0; i < r->cfg->sessions; i++)
        maybe_ack(&r->ss[i], false, now);
}

static void load_gw_finish(load_run *r)
{
    for (int i = 0; i < r->cfg->sessions; i++)
        maybe_ack(&r->ss[i], true, 0);
}

const load_mode load_gw_mode = {.subprotocol = "gw.v1",
                                .on_open = load_gw_on_open,
                                .on_frame = load_gw_on_frame,
                                .set_up = load_gw_set_up,
                                .tick = load_gw_tick,
                                .finish = load_gw_finish};
