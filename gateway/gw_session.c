/*
 * Sessions: one WebSocket each, from the handshake to the close. Their life (the list of
 * every session, the hello deadline, pings, hang-ups), receiving (a message may arrive in
 * pieces), the error budget, closing with a code, and pausing reading for the reasons
 * each module sets. What a session sends is gw_outq.c's; what it asks, gw_reqs.c's.
 */
#include "gw_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

/* How long a close may wait for the socket to take the close frame. */
#define CLOSE_WAIT_S 5

struct gw_sessions {
    gw_server *srv;
    gw_sess *all;    /* DL through prev/next */
    gw_sess *paused; /* DL through paused_prev/next */
    unsigned n;
    uint64_t boot_id; /* in session ids, so they differ across restarts */
    uint64_t next_sid;
};

gw_sessions *gw_sessions_new(gw_server *srv, uint64_t boot_id)
{
    gw_sessions *all = calloc(1, sizeof(*all));
    if (all) {
        all->srv = srv;
        all->boot_id = boot_id;
    }
    return all;
}

void gw_sessions_free(gw_sessions *all)
{
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
        n += s->user != NULL;
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
    if (st_pending(all->srv->store) > all->srv->cfg.store_high / 2)
        return;
    gw_sess *s, *tmp;
    DL_FOREACH_SAFE2(all->paused, s, tmp, paused_next)
    if (s->pause & GW_PAUSE_STORE)
        gw_sess_pause(s, GW_PAUSE_STORE, false);
}

gw_sess *gw_sess_new(gw_server *srv, struct lws *wsi)
{
    gw_sessions *all = srv->sessions;
    gw_sess *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->srv = srv;
    s->wsi = wsi;
    s->sid = ++all->next_sid;
    snprintf(s->sid_str, sizeof(s->sid_str), "%lx-%lu", (unsigned long)all->boot_id,
             (unsigned long)s->sid);
    s->err_at = s->born_ms = s->last_rx_ms = gw_mono_ms();
    gw_throttle_init(s);
    DL_APPEND(all->all, s);
    all->n++;
    return s;
}

void gw_sess_free(gw_sess *s)
{
    gw_sessions *all = s->srv->sessions;
    gw_reqs_release(s);
    gw_registry_detach(s->srv->registry, s);
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

void gw_sess_close(gw_sess *s, int code, const char *reason)
{
    if (s->close_code || !s->wsi)
        return;
    s->close_code = code;
    /* Only a closing session holds its reason (at most 123 bytes go in a close frame). */
    s->close_reason = strndup(reason, 96);
    gw_info("session %s%s%s closing: %d %s", s->sid_str, s->user ? " user " : "",
            s->user ? s->user->uid : "", code, reason);
    lws_callback_on_writable(s->wsi);
    /* A peer that never lets the socket drain would never see WRITEABLE: drop it then. */
    lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_WAIT_S);
}

void gw_sess_pause(gw_sess *s, enum gw_pause why, bool on)
{
    gw_sessions *all = s->srv->sessions;
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

/* ---- receive ------------------------------------------------------------------------- */

void gw_sess_alive(gw_sess *s)
{
    s->last_rx_ms = gw_mono_ms();
    s->ping_sent = false;
}

int gw_sess_rx(gw_sess *s, const void *in, size_t len, bool first, bool final, bool binary)
{
    gw_server *srv = s->srv;
    srv->n.bytes_in += len;
    gw_sess_alive(s);
    if (first) {
        s->rx_n = 0;
        s->rx_text = !binary;
        s->rx_discard = 0;
    }
    /* Closing: ignore the rest, except during a graceful stop (1001), when acks that
     * were already on their way are still taken (gw_route_start lets only those in). */
    if (s->close_code && s->close_code != LWS_CLOSE_STATUS_GOINGAWAY)
        return 0;
    if (s->rx_discard || s->rx_n + len > srv->cfg.max_frame) {
        /* Over the limit: drop the message and close with 1009 once it has been read to
         * its end, so the close frame is the next thing the client reads (closing while
         * it still writes can end in a reset that hides the code). A message that goes on
         * far past the limit is cut off at once. */
        s->rx_discard += len + (s->rx_discard ? 0 : s->rx_n);
        s->rx_n = 0;
        if (final || s->rx_discard > 16 * srv->cfg.max_frame) {
            srv->n.closes_1009++;
            srv->n.errors[-PR_E_TOO_LARGE]++;
            gw_sess_close(s, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, "frame over the size limit");
        }
        return 0;
    }
    /* A message that came whole is handled from libwebsockets' buffer as it is; only one
     * in pieces is joined in s->rx, which is freed after it: an idle session holds no
     * receive buffer of its own. */
    const uint8_t *msg = in;
    size_t msg_n = len;
    if (!first || !final) {
        if (s->rx_n + len > s->rx_cap) {
            size_t ncap = s->rx_cap ? s->rx_cap : 4096;
            while (ncap < s->rx_n + len)
                ncap *= 2;
            uint8_t *nb = realloc(s->rx, ncap);
            if (!nb)
                return -1;
            s->rx = nb;
            s->rx_cap = ncap;
        }
        if (len)
            memcpy(s->rx + s->rx_n, in, len);
        s->rx_n += len;
        if (!final)
            return 0;
        msg = s->rx;
        msg_n = s->rx_n;
    }
    srv->n.frames_in++;
    gw_throttle_frame(s, msg_n);
    /* A JSON session's frame becomes MessagePack here, and takes the one path from there. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    bool wrong_kind = s->rx_text != s->json;
    bool bad_json =
        !wrong_kind && s->json && pr_msgpack_from_json((const char *)msg, msg_n, &sb) != 0;
    if ((wrong_kind || bad_json) && !s->user && !s->loading) {
        srv->n.closes_4001++;
        gw_sess_close(s, 4001, "unauthorized: the first message must be a valid hello");
    } else if (wrong_kind) {
        gw_sess_error(s, PR_NO_RID, PR_E_BAD_FRAME,
                      s->json ? "text frames only: send JSON (subprotocol gw.v1.json)"
                              : "binary frames only: send MessagePack",
                      (pr_slice){0});
    } else if (bad_json) {
        gw_sess_error(s, PR_NO_RID, PR_E_BAD_FRAME,
                      "not a JSON object or array (or a bad {\"base64\"} body)", (pr_slice){0});
    } else if (s->json) {
        gw_reqs_frame(s, (const uint8_t *)sb.data, sb.size);
    } else {
        gw_reqs_frame(s, msg, msg_n);
    }
    msgpack_sbuffer_destroy(&sb);
    free(s->rx);
    s->rx = NULL;
    s->rx_n = s->rx_cap = 0;
    return 0;
}

/* ---- errors ------------------------------------------------------------------------------ */

void gw_sess_error_free(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid)
{
    gw_server *srv = s->srv;
    if (code < 0 && -code < (int)(sizeof(srv->n.errors) / sizeof(srv->n.errors[0])))
        srv->n.errors[-code]++;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_err(&sb, rid, code, msg, gid) == 0)
        gw_out_reply(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

void gw_sess_error(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid)
{
    gw_server *srv = s->srv;
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
    if (s->err_score > srv->cfg.error_budget) {
        srv->n.closes_1008++;
        gw_sess_close(s, LWS_CLOSE_STATUS_POLICY_VIOLATION, "too many bad requests");
    }
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
    const gw_config *cfg = &all->srv->cfg;
    gw_counters *n = &all->srv->n;
    uint64_t ping_ms = (uint64_t)cfg->ping_s * 1000u;
    for (gw_sess *s = all->all; s; s = s->next) {
        if (s->close_code || !s->wsi)
            continue;
        if (!s->user && !s->loading &&
            now_ms - s->born_ms >= (uint64_t)cfg->hello_timeout_s * 1000u) {
            n->closes_4001++;
            gw_sess_close(s, 4001, "unauthorized: no hello in time");
        } else if (s->out.slow &&
                   now_ms - s->out.slow_since > (uint64_t)cfg->slow_close_s * 1000u) {
            n->closes_slow++;
            gw_sess_close(s, LWS_CLOSE_STATUS_POLICY_VIOLATION,
                          "slow consumer: not reading its messages");
        } else if (s->out.backed_up_since &&
                   now_ms - s->out.backed_up_since > (uint64_t)cfg->slow_close_s * 1000u) {
            /* It asked, and does not read the answers: the same as a slow consumer. */
            n->closes_slow++;
            gw_sess_close(s, LWS_CLOSE_STATUS_POLICY_VIOLATION,
                          "slow consumer: not reading its replies");
        } else if (s->pause) {
            s->last_rx_ms = now_ms; /* we stopped reading it: its pongs wait unread */
        } else if (now_ms - s->last_rx_ms >= 2 * ping_ms) {
            /* Nothing for two ping intervals, not even a pong: the peer is gone, and a
             * close frame would wait for it in vain. */
            gw_info("session %s: no answer to ping in %u s: hanging up", s->sid_str,
                    2 * cfg->ping_s);
            lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
        } else if (now_ms - s->last_rx_ms >= ping_ms && !s->ping_sent) {
            s->ping_sent = true;
            gw_out_ping(s);
        }
    }
}
