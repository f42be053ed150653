/*
 * attack_legit: what legitimate clients see while an attack runs (see attack.h).
 *
 * A group of a few members: the first sends at a steady open-loop rate, each body holding
 * the time its message was due (so a stalled server shows up as latency, not as fewer
 * sends), and the others read and take the send-to-deliver time. Apart from them, a
 * /healthz request once a second over a new connection (what a load balancer does): a
 * server out of descriptors or too busy to accept fails it while its old sessions may
 * still be served.
 */
#include "attack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LEGIT_BODY 32
#define HZ_TIMEOUT_NS 5000000000LL

static void legit_ev(atk_sess *s, const pr_event *ev)
{
    atk_legit *l = &s->c->legit;
    if (ev->t == PR_EV_ERR && l->on)
        l->errs++;
    if (ev->t != PR_EV_MSG || s == l->ss[0] || ev->msg.body.data.n < sizeof(int64_t))
        return;
    int64_t due;
    memcpy(&due, ev->msg.body.data.p, sizeof(due));
    l->delivered++;
    load_hist_add(&l->lat, (load_now_ns() - due) / 1000);
}

int atk_legit_start(atk_ctx *c)
{
    atk_legit *l = &c->legit;
    l->n = c->cfg->legit_members;
    if (l->n < 2 || c->cfg->legit_rate <= 0)
        return 0; /* no legitimate group */
    snprintf(l->gid, sizeof(l->gid), "legit-%x", c->run_id);
    if (!(l->ss = calloc((size_t)l->n, sizeof(*l->ss))))
        return -1;
    for (int i = 0; i < l->n; i++) {
        char uid[24];
        snprintf(uid, sizeof(uid), "legit%d", i);
        if (!(l->ss[i] = atk_open_legit(c, uid, legit_ev, NULL)))
            return -1;
    }
    if (!atk_wait_ready(c, l->ss, l->n, 0, 15))
        return -1;
    for (int i = 0; i < l->n; i++)
        atk_join(l->ss[i], l->gid);
    if (!atk_wait_ready(c, l->ss, l->n, 1, 15))
        return -1;
    c->sent_requests = c->sent_bytes = 0; /* the attacker's count starts now */
    l->on = true;
    l->next_ns = l->hz_next_ns = load_now_ns();
    return 0;
}

static void legit_send(atk_ctx *c, atk_legit *l, int64_t due)
{
    uint8_t body[LEGIT_BODY] = {0};
    char cid[40];
    memcpy(body, &due, sizeof(due));
    snprintf(cid, sizeof(cid), "l%llu", (unsigned long long)l->sent);
    pr_enc_send(&c->sb, PR_NO_RID, load_sl(l->gid), load_sl(cid),
                (pr_body){{body, sizeof(body)}, true});
    /* Not the attacker's: sent directly, not through atk_send's counts. */
    if (lw_send(l->ss[0]->k, c->sb.data, c->sb.size, false) != 0)
        l->errs++;
    c->sb.size = 0;
    l->sent++;
}

static void hz_done(atk_legit *l, bool ok, int64_t now)
{
    l->hz_tries++; /* counted once done: one still going at the end is neither */
    if (ok)
        l->hz_ok++;
    int64_t us = (now - l->hz_start_ns) / 1000;
    if (us > l->hz_max_us)
        l->hz_max_us = us;
    close(l->hz_fd);
    l->hz_fd = -1;
}

/* One /healthz at a time, non-blocking: connect, write the request, read "HTTP/1.1 200". */
static void hz_tick(atk_ctx *c, atk_legit *l, int64_t now)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (l->hz_fd < 0) {
        if (now < l->hz_next_ns)
            return;
        l->hz_next_ns = now + 1000000000;
        l->hz_start_ns = now;
        l->hz_n = 0;
        if ((l->hz_fd = atk_raw_connect_from(c->cfg, c->cfg->legit_from)) < 0) {
            l->hz_tries++;
            return;
        }
        l->hz_buf[0] = 1; /* the request is still to be written */
        return;
    }
    if (l->hz_buf[0] == 1) {
        ssize_t w = send(l->hz_fd, req, sizeof(req) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == (ssize_t)sizeof(req) - 1)
            l->hz_buf[0] = 0;
        else if (w >= 0 || (errno != EAGAIN && errno != ENOTCONN))
            return hz_done(l, false, now); /* a short write of 60 bytes: a failure */
    } else {
        ssize_t r =
            recv(l->hz_fd, l->hz_buf + l->hz_n, sizeof(l->hz_buf) - 1 - l->hz_n, MSG_DONTWAIT);
        if (r > 0)
            l->hz_n += (size_t)r;
        else if (r == 0 || errno != EAGAIN)
            return hz_done(l, false, now);
        l->hz_buf[l->hz_n] = 0;
        if (l->hz_n >= 12)
            return hz_done(l, !strncmp(l->hz_buf, "HTTP/1.1 200", 12), now);
    }
    if (now - l->hz_start_ns > HZ_TIMEOUT_NS)
        hz_done(l, false, now);
}

void atk_legit_tick(atk_ctx *c, int64_t now)
{
    atk_legit *l = &c->legit;
    if (!l->on)
        return;
    int64_t step = (int64_t)(1e9 / c->cfg->legit_rate);
    for (int burst = 0; now >= l->next_ns && burst < 100; burst++) {
        legit_send(c, l, l->next_ns);
        l->next_ns += step;
    }
    l->closed = 0;
    for (int i = 0; i < l->n; i++)
        l->closed += l->ss[i]->closed;
    hz_tick(c, l, now);
}

void atk_legit_cell(const atk_ctx *c, char *buf, size_t n)
{
    const atk_legit *l = &c->legit;
    snprintf(buf, n, "%.1f (%llu/%llu delivered%s; healthz %llu/%llu, slowest %.0f ms)",
             load_hist_quantile(&l->lat, 0.99) / 1000.0, (unsigned long long)l->delivered,
             (unsigned long long)(l->sent * (uint64_t)(l->n > 1 ? l->n - 1 : 0)),
             l->closed ? ", sessions closed" : "", (unsigned long long)l->hz_ok,
             (unsigned long long)l->hz_tries, l->hz_max_us / 1000.0);
}
