/*
 * gw_cli tail and pull: reading a group.
 *
 * tail keeps a watermark w: every message with mid <= w has been printed (or was acked
 * before tail started). A live `msg` is printed only if its mid is w + 1; an older one is
 * a duplicate and dropped, a newer one shows a hole, which is filled by pulling after w,
 * as is a `notify`. Pages answer "everything after w" in order, so their new entries are
 * printed as they come. Acks are cumulative at w, sent after ack_every messages or
 * ack_delay_ms after the first unacked one (values from welcome), and when tail ends:
 * the rule of ackrule.h, whose watermark is w.
 * After a lost connection it signs in again and pulls after w: nothing is missed, and
 * nothing at or below w is printed again.
 */
#include "gw_cli.h"

#include <inttypes.h>
#include <string.h>

#define TAIL_TICK_MS 250     /* longest wait before looking at the clock and cli_stop again */
#define TAIL_NO_NEWS_MS 1000 /* after a page with nothing new, wait before pulling again */

typedef struct tailer {
    cli *c;
    const char *gid;
    ackrule ack;       /* ack.held is the contiguous watermark w (see above) */
    uint64_t known;    /* the highest mid known to exist */
    uint64_t pull_rid; /* the pull in flight (0: none) */
    int64_t pull_sent_at;
    int64_t pull_due; /* no pull before this (after overloaded or unavailable) */
    int busy_wait_ms;
    long printed;
} tailer;

/* ackrule's clock: cli_now_ms in nanoseconds. */
static int64_t now_ns(void)
{
    return cli_now_ms() * 1000000;
}

static bool is_gid(const tailer *t, pr_slice gid)
{
    return gid.n == strlen(t->gid) && memcmp(gid.p, t->gid, gid.n) == 0;
}

static int print(tailer *t, const pr_message *m)
{
    out_message(t->c, cli_slice(t->gid), m);
    if (out_flush())
        return -1;
    ackrule_hold(&t->ack, m->mid, now_ns());
    if (m->mid > t->known)
        t->known = m->mid;
    t->printed++;
    return 0;
}

static bool counted_out(const tailer *t)
{
    return t->c->o.count && t->printed >= t->c->o.count;
}

/* Acks w if the rule says so by now, or whatever is unacked when forced. */
static void ack(tailer *t, bool force)
{
    cli *c = t->c;
    uint64_t mid = force ? ackrule_pending(&t->ack) : ackrule_due(&t->ack, now_ns());
    if (!mid || !gwc_is_open(c->k))
        return;
    if (cli_send_ack(c, t->gid, mid) != 0)
        return; /* closed: acked again on resuming */
    ackrule_acked(&t->ack, mid);
}

static int pull(tailer *t)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t rid = ++t->c->next_rid;
    int rc = cli_send_built(
        t->c, &sb, pr_enc_pull(&sb, rid, cli_slice(t->gid), false, t->ack.held, 0), "pull");
    if (rc <= 0)
        return rc; /* closed (0): the loop resumes */
    t->pull_rid = rid;
    t->pull_sent_at = cli_now_ms();
    return 0;
}

static int on_page(tailer *t, const pr_event *ev)
{
    uint64_t w0 = t->ack.held;
    t->pull_rid = 0;
    t->busy_wait_ms = 0;
    if (ev->last_mid > t->known)
        t->known = ev->last_mid;
    pr_message m;
    for (size_t i = 0; i < ev->n_items && !counted_out(t); i++)
        if (pr_event_message(ev, i, &m) == 0 && m.mid > t->ack.held && print(t, &m))
            return -1;
    /* Nothing new although more was expected (the page may predate what a push showed):
     * ask again a little later rather than at once. */
    if (t->ack.held == w0)
        t->pull_due = cli_now_ms() + TAIL_NO_NEWS_MS;
    return 0;
}

static int on_event(tailer *t, const pr_event *ev)
{
    if (ev->t == PR_EV_MSG && is_gid(t, ev->gid)) {
        if (ev->msg.mid == t->ack.held + 1 && !counted_out(t))
            return print(t, &ev->msg);
        if (ev->msg.mid > t->known)
            t->known = ev->msg.mid; /* a hole: pull fills it */
    } else if (ev->t == PR_EV_NOTIFY && is_gid(t, ev->gid)) {
        if (ev->last_mid > t->known)
            t->known = ev->last_mid;
    } else if (ev->t == PR_EV_PAGE && t->pull_rid && ev->has_rid && ev->rid == t->pull_rid) {
        return on_page(t, ev);
    } else if (ev->t == PR_EV_ERR && t->pull_rid && ev->has_rid && ev->rid == t->pull_rid &&
               (ev->err_code == PR_E_OVERLOADED || ev->err_code == PR_E_RATE_LIMITED ||
                ev->err_code == PR_E_UNAVAILABLE)) {
        t->pull_rid = 0;
        t->busy_wait_ms = t->busy_wait_ms ? 2 * t->busy_wait_ms : 200;
        if (t->busy_wait_ms > 5000)
            t->busy_wait_ms = 5000;
        t->pull_due = cli_now_ms() + t->busy_wait_ms;
    } else if (ev->t == PR_EV_ERR &&
               ((t->pull_rid && ev->has_rid && ev->rid == t->pull_rid) || is_gid(t, ev->gid))) {
        cli_say_err(ev, t->gid);
        return -1;
    } else if (ev->t == PR_EV_ERR) {
        cli_say_err(ev, NULL);
    }
    return 0;
}

/* Signed in again after a loss: take the server's view, repair its ack, pull after w. */
static int resume(tailer *t, const char *what, int64_t end)
{
    cli *c = t->c;
    if (c->o.retry_ms == 0) {
        cli_err("%s", what);
        return -1;
    }
    int64_t until = cli_now_ms() + c->o.retry_ms;
    if (cli_reopen(c, what, until < end ? until : end))
        return -1;
    pr_group g;
    if (!cli_welcome_group(c, t->gid, &g)) {
        cli_err("%s: no longer a member of this group", t->gid);
        return -1;
    }
    if (g.last_mid > t->known)
        t->known = g.last_mid;
    if (t->known > t->ack.held)
        cli_err("%s: catching up from mid %" PRIu64 " to %" PRIu64 " (nothing is printed twice)",
                t->gid, t->ack.held + 1, t->known);
    /* The gateway persists acks in batches: a crash may have lost our last one. The new
     * welcome's cadence holds from now on. */
    ackrule_cadence(&t->ack, c->ack_every, c->ack_delay_ms);
    ackrule_start(&t->ack, t->ack.held, g.ack, now_ns());
    ack(t, true);
    t->pull_rid = 0;
    t->pull_due = 0;
    return 0;
}

int cli_cmd_tail(cli *c, const char *gid)
{
    tailer t = {.c = c, .gid = gid};
    int64_t end = c->o.seconds_ms ? cli_now_ms() + c->o.seconds_ms : INT64_MAX;
    pr_group g;
    if (cli_open_member(c, gid, &g))
        return CLI_EXIT_FAIL;
    ackrule_cadence(&t.ack, c->ack_every, c->ack_delay_ms);
    ackrule_start(&t.ack, g.ack, g.ack, now_ns());
    t.known = g.last_mid;
    int rc = 0;
    pr_event ev;
    char what[400];
    while (rc == 0 && !counted_out(&t) && !cli_stop) {
        int64_t now = cli_now_ms();
        if (now >= end)
            break;
        if (!gwc_is_open(c->k)) {
            snprintf(what, sizeof(what), "connection lost: %s", cli_close_reason(c));
            if ((rc = resume(&t, what, end)))
                break;
            continue;
        }
        if (t.pull_rid && now - t.pull_sent_at > c->o.timeout_ms) {
            snprintf(what, sizeof(what), "no page within %d ms", c->o.timeout_ms);
            rc = resume(&t, what, end);
            continue;
        }
        if (!t.pull_rid && t.ack.held < t.known && now >= t.pull_due && (rc = pull(&t)))
            break;
        ack(&t, false);
        int64_t wait = end - now < TAIL_TICK_MS ? end - now : TAIL_TICK_MS;
        int64_t ack_in = ackrule_wait_ns(&t.ack, now * 1000000);
        if (ack_in >= 0 && ack_in / 1000000 < wait)
            wait = ack_in / 1000000;
        if (!t.pull_rid && t.ack.held < t.known && t.pull_due - now < wait)
            wait = t.pull_due > now ? t.pull_due - now : 0;
        int r = gwc_next(c->k, (int)wait, &ev);
        for (int n = 0; r == 0 || r == GWC_EPROTO;) {
            if (r == 0)
                rc = on_event(&t, &ev);
            else /* a lost push shows up as a hole later, and is pulled then */
                cli_err("ignoring a frame from the server: %s", gwc_last_error(c->k));
            if (rc || counted_out(&t) || ++n == CLI_DRAIN_MAX)
                break;
            r = gwc_next(c->k, 0, &ev);
        }
    }
    if (cli_stop && rc)
        rc = 0; /* interrupted while reconnecting: a normal end */
    ack(&t, true);
    return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_cmd_pull(cli *c, const char *gid)
{
    const cli_opts *o = &c->o;
    pr_group g;
    if (cli_open_member(c, gid, &g))
        return CLI_EXIT_FAIL;
    bool before = o->has_before;
    uint64_t at = before ? o->before : o->has_after ? o->after : g.ack;
    uint64_t hi = at, lo = at; /* after: highest mid printed; before: lowest */
    uint64_t held = g.ack;     /* --ack: contiguous watermark from the stored ack */
    bool more = false, gone_said = false;
    for (;;) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        uint64_t rid = ++c->next_rid;
        pr_event ev;
        int rc = pr_enc_pull(&sb, rid, cli_slice(gid), before, before ? lo : hi, o->limit);
        rc = rc ? -1 : cli_request(c, &sb, rid, PR_EV_PAGE, gid, &ev);
        msgpack_sbuffer_destroy(&sb);
        if (rc)
            return CLI_EXIT_FAIL;
        size_t fresh = 0;
        uint64_t page_lo = lo;
        pr_message m;
        /* What is below the horizon is gone (retention), not missing: the watermark goes
         * past it, and the reader is told once. */
        if (ev.first_mid > held + 1)
            held = ev.first_mid - 1;
        if (ev.gone_before && !gone_said) {
            cli_err("messages before mid %" PRIu64 " are no longer kept (the group's retention)",
                    ev.gone_before);
            gone_said = true;
        }
        for (size_t i = 0; i < ev.n_items; i++) {
            if (pr_event_message(&ev, i, &m))
                continue;
            if (before ? m.mid >= lo : m.mid <= hi)
                continue; /* never print one twice */
            out_message(c, cli_slice(gid), &m);
            fresh++;
            if (!before)
                hi = m.mid;
            if (m.mid < page_lo)
                page_lo = m.mid;
            if (m.mid == held + 1)
                held = m.mid;
        }
        lo = page_lo;
        more = ev.more;
        if (out_flush())
            return CLI_EXIT_FAIL;
        if (!more || !o->all || !fresh)
            break;
    }
    if (more && !o->all)
        cli_err("more messages: pull again with %s %" PRIu64 ", or use --all",
                before ? "--before" : "--after", before ? lo : hi);
    if (o->ack && held > g.ack) {
        int rc = cli_send_ack(c, gid, held);
        if (rc) {
            cli_err("cannot send the ack: %s", gwc_strerror(rc));
            return CLI_EXIT_FAIL;
        }
    }
    return CLI_EXIT_OK;
}
