/* attack_ctx: one attack's context, its sessions and the server's figures; see attack.h. */
#include "attack.h"
#include "load_proc.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void atk_say(atk_ctx *c, const char *fmt, ...)
{
    size_t n = strlen(c->outcome);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->outcome + n, sizeof(c->outcome) - n, fmt, ap);
    va_end(ap);
}

/* ---- the sessions' callbacks ---------------------------------------------------------- */

static int on_event(void *ud, const pr_event *ev)
{
    atk_sess *s = ud;
    switch (ev->t) {
    case PR_EV_WELCOME: s->welcomed = true; break;
    case PR_EV_JOINED: s->joined++; break;
    case PR_EV_SENT: s->last_sent_mid = ev->mid; break;
    case PR_EV_ERR:
        s->errs++;
        s->limited += ev->err_code == PR_E_RATE_LIMITED;
        break;
    default: break;
    }
    if (s->on_ev)
        s->on_ev(s, ev);
    return 0;
}

static void cb_open(lw_conn *k, void *user)
{
    atk_sess *s = user;
    if (load_enc_hello_with(s->c->cfg->secret, s->c->cfg->secret_n, s->uid, &s->c->sb) == 0)
        atk_send(s);
    else
        lw_close(k);
}

static void cb_msg(lw_conn *k, const uint8_t *f, size_t n, void *user)
{
    (void)k;
    atk_sess *s = user;
    pr_error perr;
    s->frames++;
    pr_decode_events(s->c->dec, f, n, on_event, s, &perr);
}

static void cb_close(lw_conn *k, int code, void *user)
{
    (void)k;
    atk_sess *s = user;
    s->closed = true;
    s->close_code = code;
}

/* ---- the context ----------------------------------------------------------------------- */

int atk_ctx_init(atk_ctx *c, const atk_cfg *cfg, const char *name)
{
    static const lw_callbacks cbs = {cb_open, cb_msg, cb_close};
    memset(c, 0, sizeof(*c));
    c->cfg = cfg;
    c->name = name;
    c->run_id = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    c->legit.hz_fd = -1;
    msgpack_sbuffer_init(&c->sb);
    c->loop = lw_loop_new(&cbs, "gw.v1", 1 << 20);
    c->dec = pr_decoder_new(NULL);
    if (!c->loop || !c->dec) {
        fprintf(stderr, "gw_attack: out of memory\n");
        return -1;
    }
    return 0;
}

void atk_ctx_release(atk_ctx *c)
{
    if (c->legit.hz_fd >= 0)
        close(c->legit.hz_fd);
    if (c->loop)
        lw_loop_free(c->loop); /* closes every session's socket */
    for (atk_sess *s = c->sessions, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    free(c->legit.ss);
    pr_decoder_free(c->dec);
    msgpack_sbuffer_destroy(&c->sb);
    memset(c, 0, sizeof(*c));
}

static atk_sess *open_from(atk_ctx *c, const char *uid, const char *src, atk_ev_fn on_ev, void *ud)
{
    atk_sess *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->c = c;
    s->on_ev = on_ev;
    s->ud = ud;
    snprintf(s->uid, sizeof(s->uid), "%s-%x", uid, c->run_id);
    if (lw_connect(c->loop, c->cfg->url, src, s, &s->k) != 0) {
        fprintf(stderr, "gw_attack: %s\n", lw_loop_error(c->loop));
        free(s);
        return NULL;
    }
    s->next = c->sessions;
    c->sessions = s;
    c->n_sess++;
    return s;
}

atk_sess *atk_open(atk_ctx *c, const char *uid, atk_ev_fn on_ev, void *ud)
{
    return open_from(c, uid, NULL, on_ev, ud);
}

atk_sess *atk_open_legit(atk_ctx *c, const char *uid, atk_ev_fn on_ev, void *ud)
{
    return open_from(c, uid, c->cfg->legit_from, on_ev, ud);
}

void atk_send(atk_sess *s)
{
    atk_ctx *c = s->c;
    if (lw_send(s->k, c->sb.data, c->sb.size, false) == 0) {
        c->sent_requests++;
        c->sent_bytes += c->sb.size;
    }
    c->sb.size = 0;
}

void atk_join(atk_sess *s, const char *gid)
{
    pr_enc_join(&s->c->sb, PR_NO_RID, load_sl(gid));
    atk_send(s);
}

static void sample(atk_ctx *c)
{
    atk_figs *f = &c->figs;
    long rss = load_proc_rss_kib(c->cfg->pid);
    int fds = load_proc_fds(c->cfg->pid);
    if (rss > f->rss_peak_kib)
        f->rss_peak_kib = rss;
    if (fds > f->fds_peak)
        f->fds_peak = fds;
}

void atk_pump(atk_ctx *c, int wait_ms)
{
    /* Not past the legitimate sender's next message: its latency counts from when it was
     * due, so a wait here would be the tool's delay, not the server's. */
    int64_t due_ms = c->legit.on ? (c->legit.next_ns - load_now_ns()) / 1000000 : wait_ms;
    lw_poll(c->loop, due_ms < 0 ? 0 : due_ms < wait_ms ? (int)due_ms : wait_ms);
    int64_t now = load_now_ns();
    if (now >= c->next_sample_ns) {
        sample(c);
        c->next_sample_ns = now + 100000000;
    }
    atk_legit_tick(c, now);
}

bool atk_wait_ready(atk_ctx *c, atk_sess **ss, int n, int joins, double timeout_s)
{
    int64_t until = load_now_ns() + (int64_t)(timeout_s * 1e9);
    for (;;) {
        int ready = 0, closed = 0;
        for (int i = 0; i < n; i++) {
            ready += ss[i]->welcomed && ss[i]->joined >= joins;
            closed += ss[i]->closed;
        }
        if (ready == n)
            return true;
        if (closed || load_now_ns() > until) {
            fprintf(stderr, "gw_attack: %s: %d of %d sessions ready, %d closed (%s)\n", c->name,
                    ready, n, closed, closed ? "see the gateway's log" : "timed out");
            return false;
        }
        atk_pump(c, 5);
    }
}

void atk_begin(atk_ctx *c)
{
    atk_figs *f = &c->figs;
    f->rss0_kib = f->rss_peak_kib = load_proc_rss_kib(c->cfg->pid);
    f->fds0 = f->fds_peak = load_proc_fds(c->cfg->pid);
    f->cpu0_s = load_proc_cpu_s(c->cfg->pid);
}

void atk_end(atk_ctx *c, double settle_s)
{
    for (int64_t until = load_now_ns() + (int64_t)(settle_s * 1e9); load_now_ns() < until;)
        atk_pump(c, 20);
    atk_figs *f = &c->figs;
    sample(c);
    f->cpu_end_s = load_proc_cpu_s(c->cfg->pid);
    f->rss_end_kib = load_proc_rss_kib(c->cfg->pid);
    f->fds_end = load_proc_fds(c->cfg->pid);
    if (f->rss_end_kib < 0)
        atk_say(c, "%sTHE GATEWAY IS GONE (it crashed or was killed)", c->outcome[0] ? "; " : "");
}

void atk_report(const atk_ctx *c)
{
    const atk_figs *f = &c->figs;
    const atk_legit *l = &c->legit;
    char legit[80];
    atk_legit_cell(c, legit, sizeof(legit));
    printf("attack %s\n"
           "  sent:     %llu requests, %llu bytes, %llu connections\n"
           "  server:   RSS %.1f -> peak %.1f -> %.1f MiB after; fds %d -> peak %d -> %d; "
           "CPU %.2f s\n"
           "  attacker: %s\n"
           "  legit:    %llu sent, %llu delivered, p50 %.1f ms, p99 %.1f ms, max %.1f ms, "
           "%llu errors, %llu closed; /healthz %llu of %llu answered, slowest %.0f ms\n",
           c->name, (unsigned long long)c->sent_requests, (unsigned long long)c->sent_bytes,
           (unsigned long long)c->sent_conns, f->rss0_kib / 1024.0, f->rss_peak_kib / 1024.0,
           f->rss_end_kib / 1024.0, f->fds0, f->fds_peak, f->fds_end, f->cpu_end_s - f->cpu0_s,
           c->outcome, (unsigned long long)l->sent, (unsigned long long)l->delivered,
           load_hist_quantile(&l->lat, 0.5) / 1000.0, load_hist_quantile(&l->lat, 0.99) / 1000.0,
           l->lat.max / 1000.0, (unsigned long long)l->errs, (unsigned long long)l->closed,
           (unsigned long long)l->hz_ok, (unsigned long long)l->hz_tries, l->hz_max_us / 1000.0);
    if (c->cfg->row)
        printf("ROW | %s | %.0f -> %.0f | %d | %.2f | %s | %s |\n", c->name, f->rss0_kib / 1024.0,
               f->rss_peak_kib / 1024.0, f->fds_peak, f->cpu_end_s - f->cpu0_s, legit, c->outcome);
    fflush(stdout);
}
