/*
 * Sessions: one WebSocket each, from the handshake to the close. Their life (the list of
 * every session, the hello deadline, pings, hang-ups), the error budget, closing with a
 * code, and pausing reading for the reasons each part sets. What a session receives and
 * asks is gw_sess_in.c's; what it sends, gw_sess_out.c's.
 */
#include "sess_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

/* How long a close may wait for the socket to take the close frame. */
#define CLOSE_WAIT_S 5

gw_sessions *gw_sessions_new(const gw_config *cfg, st_store *store, struct ev_loop *loop,
                             pr_decoder *dec, uint64_t boot_id, const gw_sess_hooks *hooks)
{
    gw_sessions *all = calloc(1, sizeof(*all));
    if (!all)
        return NULL;
    all->cfg = cfg;
    all->store = store;
    all->loop = loop;
    all->dec = dec;
    all->hooks = *hooks;
    all->boot_id = boot_id;
    all->sends = gw_limit_make(cfg->rate_sends, cfg->rate_burst_s);
    all->bytes = gw_limit_make((double)cfg->rate_bytes, cfg->rate_burst_s);
    all->typing = gw_limit_make(GW_TYPING_RATE, GW_TYPING_BURST_S);
    gw_out_start(all);
    return all;
}

void gw_sessions_free(gw_sessions *all)
{
    if (!all)
        return;
    gw_out_stop(all);
    free(all); /* sessions are freed by libwebsockets' CLOSED, before this */
}

unsigned gw_sessions_count(const gw_sessions *all)
{
    return all->n;
}

unsigned gw_sessions_authenticated(const gw_sessions *all)
{
    unsigned n = 0;
    for (gw_sess *s = all->all; s; s = s->next)
        n += s->signin == GW_SIGNIN_DONE;
    return n;
}

bool gw_sessions_writing(const gw_sessions *all)
{
    for (gw_sess *s = all->all; s; s = s->next)
        if (gw_out_pending(s))
            return true;
    return false;
}

void gw_sessions_close_all(gw_sessions *all, int code, const char *reason)
{
    for (gw_sess *s = all->all; s; s = s->next)
        gw_sess_close(s, code, reason);
}

void gw_sessions_store_calm(gw_sessions *all)
{
    if (st_pending(all->store) > all->cfg->store_high / 2)
        return;
    gw_sess *s, *tmp;
    DL_FOREACH_SAFE2(all->paused, s, tmp, paused_next)
    if (s->pause & GW_PAUSE_STORE)
        gw_sess_pause(s, GW_PAUSE_STORE, false);
}

const gw_sess_figs *gw_sessions_figures(const gw_sessions *all)
{
    return &all->figs;
}

gw_sess *gw_sess_new(gw_sessions *all, struct lws *wsi, bool json)
{
    gw_sess *s = calloc(1, sizeof(*s) + all->hooks.ext_size);
    if (!s)
        return NULL;
    s->all = all;
    s->wsi = wsi;
    s->json = json;
    s->sid = ++all->next_sid;
    s->err_at = s->born_ms = s->last_rx_ms = gw_mono_ms();
    gw_throttle_init(s);
    DL_APPEND(all->all, s);
    all->n++;
    all->figs.connections++;
    if (all->n > all->figs.connections_peak)
        all->figs.connections_peak = all->n;
    return s;
}

void gw_sess_free(gw_sess *s)
{
    gw_sessions *all = s->all;
    if (!s->close_code)
        gw_dbg("session %s%s%s closed by the client or the network", gw_sess_name(s),
               s->signin == GW_SIGNIN_DONE ? " user " : "", gw_sess_uid(s) ? s->id.uid : "");
    s->wsi = NULL;
    gw_reqs_release(s);
    if (all->hooks.closing)
        all->hooks.closing(all->hooks.ud, s);
    gw_identity_release(&s->id);
    gw_throttle_release(s);
    if (s->pause)
        DL_DELETE2(all->paused, s, paused_prev, paused_next);
    DL_DELETE(all->all, s);
    all->n--;
    gw_out_release(s);
    free(s->rx);
    free(s->close_reason);
    free(s);
}

void *gw_sess_ext(gw_sess *s)
{
    return s->ext;
}

uint64_t gw_sess_id(const gw_sess *s)
{
    return s->sid;
}

const char *gw_sess_name(const gw_sess *s)
{
    /* Made when a log line or a welcome wants it, not kept by every idle session. */
    static _Thread_local char name[40];
    snprintf(name, sizeof(name), "%lx-%lu", (unsigned long)s->all->boot_id, (unsigned long)s->sid);
    return name;
}

gw_identity *gw_sess_identity(gw_sess *s)
{
    return &s->id;
}

enum gw_signin gw_sess_signin(const gw_sess *s)
{
    return s->signin;
}

void gw_sess_set_signin(gw_sess *s, enum gw_signin st)
{
    s->signin = st;
}

const char *gw_sess_uid(const gw_sess *s)
{
    return s->signin == GW_SIGNIN_DONE ? s->id.uid : NULL;
}

bool gw_sess_wants_write(const gw_sess *s)
{
    return gw_out_pending(s) || s->close_code || s->out.ping_due;
}

/* Counted by the code it closes with: every call, as each place that closes counts. */
static void count_close(gw_sess *s, int code)
{
    gw_sess_figs *f = &s->all->figs;
    if (code == 4001)
        f->closes_4001++;
    else if (code == 4013)
        f->closes_4013++;
    else if (code == LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE)
        f->closes_1009++;
    else if (code == LWS_CLOSE_STATUS_POLICY_VIOLATION)
        f->closes_1008++;
}

static void close_now(gw_sess *s, int code, const char *reason)
{
    if (s->close_code || !s->wsi)
        return;
    s->close_code = code;
    /* Only a closing session holds its reason (at most 123 bytes go in a close frame). */
    s->close_reason = strndup(reason, 96);
    gw_info("session %s%s%s closing: %d %s", gw_sess_name(s),
            s->signin == GW_SIGNIN_DONE ? " user " : "", gw_sess_uid(s) ? s->id.uid : "", code,
            reason);
    if (s->pause) /* read on, so the close does not end in a reset (gw_sess_pause) */
        gw_sess_pause(s, s->pause, false);
    lws_callback_on_writable(s->wsi);
    /* A peer that never lets the socket drain would never see WRITEABLE: drop it then. */
    lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_WAIT_S);
}

void gw_sess_close(gw_sess *s, int code, const char *reason)
{
    count_close(s, code);
    close_now(s, code, reason);
}

void gw_sess_close_slow(gw_sess *s, const char *reason)
{
    s->all->figs.closes_slow++;
    close_now(s, LWS_CLOSE_STATUS_POLICY_VIOLATION, reason);
}

void gw_sess_pause(gw_sess *s, enum gw_pause why, bool on)
{
    gw_sessions *all = s->all;
    /* A closing session reads on and drops what it reads (gw_sess_rx): closing a socket
     * with unread input ends in a reset, which loses the close frame and what was
     * queued before it on the client's side. */
    if (on && s->close_code)
        return;
    unsigned was = s->pause;
    s->pause = on ? was | why : was & ~(unsigned)why;
    if (!s->wsi || !was == !s->pause)
        return;
    if (s->pause) {
        DL_APPEND2(all->paused, s, paused_prev, paused_next);
        lws_rx_flow_control(s->wsi, 0);
    } else {
        DL_DELETE2(all->paused, s, paused_prev, paused_next);
        lws_rx_flow_control(s->wsi, 1);
    }
}

void gw_sess_alive(gw_sess *s)
{
    s->last_rx_ms = gw_mono_ms();
    s->ping_sent = false;
}

/* ---- errors ------------------------------------------------------------------------------ */

/* An `err` reply, counted by its code. */
static void reply_err(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid,
                      uint64_t retry_ms)
{
    gw_sess_figs *f = &s->all->figs;
    if (code < 0 && -code < (int)(sizeof(f->errors) / sizeof(f->errors[0])))
        f->errors[-code]++;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = retry_ms ? pr_enc_err_retry(&sb, rid, code, msg, gid, retry_ms)
                      : pr_enc_err(&sb, rid, code, msg, gid);
    if (rc == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

void gw_sess_error_free(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid)
{
    reply_err(s, rid, code, msg, gid, 0);
}

void gw_sess_error_retry(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid,
                         uint64_t retry_ms)
{
    reply_err(s, rid, code, msg, gid, retry_ms);
}

void gw_sess_error(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid)
{
    gw_sess_error_free(s, rid, code, msg, gid);
    /* The budget refills at one error a second; a client that keeps sending bad requests
     * faster than that is closed. Errors caused by the server are not charged. */
    if (code == PR_E_INTERNAL || code == PR_E_OVERLOADED || code == PR_E_UNAVAILABLE ||
        code == PR_E_NOMEM)
        return;
    uint64_t now = gw_mono_ms();
    s->err_score -= (double)(now - s->err_at) / 1000.0;
    if (s->err_score < 0)
        s->err_score = 0;
    s->err_at = now;
    s->err_score += 1;
    if (s->err_score > s->all->cfg->error_budget)
        gw_sess_close(s, LWS_CLOSE_STATUS_POLICY_VIOLATION, "too many bad requests");
}

/*
 * Once a second: the hello deadline, pings to quiet sessions and the hang-up of ones that
 * answer nothing, and slow consumers that stay slow. These are not per-session
 * libwebsockets timers on purpose: libwebsockets 4.1 keeps its timers in one sorted
 * list that every re-arm walks, and with 10,000 sessions re-arming on every pong that
 * walk was most of an idle gateway's CPU. One pass over the sessions a second costs a few
 * microseconds per thousand sessions, and every ping of that second goes out in one
 * wake-up instead of one wake-up (and one poll of every socket) each.
 */
void gw_sessions_sweep(gw_sessions *all, uint64_t now_ms)
{
    const gw_config *cfg = all->cfg;
    uint64_t ping_ms = (uint64_t)cfg->ping_s * 1000u;
    for (gw_sess *s = all->all; s; s = s->next) {
        if (s->close_code || !s->wsi)
            continue;
        if (s->signin == GW_SIGNIN_NONE &&
            now_ms - s->born_ms >= (uint64_t)cfg->hello_timeout_s * 1000u) {
            gw_sess_close(s, 4001, "unauthorized: no hello in time");
        } else if (s->out.slow &&
                   now_ms - s->out.slow_since > (uint64_t)cfg->slow_close_s * 1000u) {
            gw_sess_close_slow(s, "slow consumer: not reading its messages");
        } else if (s->out.backed_up_since &&
                   now_ms - s->out.backed_up_since > (uint64_t)cfg->slow_close_s * 1000u) {
            /* It asked, and does not read the answers: the same as a slow consumer. */
            gw_sess_close_slow(s, "slow consumer: not reading its replies");
        } else if (s->pause) {
            s->last_rx_ms = now_ms; /* we stopped reading it: its pongs wait unread */
        } else if (now_ms - s->last_rx_ms >= 2 * ping_ms) {
            /* Nothing for two ping intervals, not even a pong: the peer is gone, and a
             * close frame would wait for it in vain. */
            gw_info("session %s: no answer to ping in %u s: hanging up", gw_sess_name(s),
                    2 * cfg->ping_s);
            lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
        } else if (now_ms - s->last_rx_ms >= ping_ms && !s->ping_sent) {
            s->ping_sent = true;
            gw_out_ping(s);
        }
    }
}
