/*
 * One WebSocket session: reassembling received messages, the outbound queue with its cap
 * (slow consumers get a coalesced notify instead of bodies), writing batch frames, the
 * error budget, flow control and closing with a code.
 */
#include "gw_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

/* Messages written in one batch frame at most; the frame also stays within max_frame. */
#define BATCH_MAX 256
/* A client is owed its replies, so they are never refused; but reading from a session
 * pauses while more than this many max_frame's worth of replies wait to be written. */
#define REPLY_FRAMES 4
/* How long a close may wait for the socket to take the close frame. */
#define CLOSE_WAIT_S 5

gw_sess *gw_sess_new(gw_server *srv, struct lws *wsi)
{
    gw_sess *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->srv = srv;
    s->wsi = wsi;
    s->sid = ++srv->next_sid;
    snprintf(s->sid_str, sizeof(s->sid_str), "%lx-%lu", (unsigned long)srv->boot_id,
             (unsigned long)s->sid);
    s->err_at = s->born_ms = s->last_rx_ms = gw_mono_ms();
    gw_throttle_init(s);
    HASH_ADD(hh, srv->sessions, sid, sizeof(s->sid), s);
    srv->n_sessions++;
    return s;
}

gw_sess *gw_sess_find(gw_server *srv, uint64_t sid)
{
    gw_sess *s = NULL;
    HASH_FIND(hh, srv->sessions, &sid, sizeof(sid), s);
    return s;
}

static void notify_clear(gw_sess *s)
{
    gw_notify *n, *tmp;
    HASH_ITER(hh, s->notify, n, tmp)
    {
        HASH_DEL(s->notify, n);
        free(n);
    }
}

void gw_sess_free(gw_sess *s)
{
    gw_server *srv = s->srv;
    gw_user_detach(srv, s);
    gw_identity_release(&s->id);
    gw_throttle_release(s);
    if (s->paused)
        DL_DELETE2(srv->paused, s, paused_prev, paused_next);
    HASH_DEL(srv->sessions, s);
    srv->n_sessions--;
    for (size_t i = 0; i < s->q_len; i++)
        gw_buf_unref(s->q[(s->q_head + i) % s->q_cap].buf);
    free(s->q);
    notify_clear(s);
    free(s->rx);
    free(s);
}

void gw_sess_close(gw_sess *s, int code, const char *reason)
{
    if (s->close_code || !s->wsi)
        return;
    s->close_code = code;
    snprintf(s->close_reason, sizeof(s->close_reason), "%s", reason);
    gw_info("session %s%s%s closing: %d %s", s->sid_str, s->user ? " user " : "",
            s->user ? s->user->uid : "", code, reason);
    lws_callback_on_writable(s->wsi);
    /* A peer that never lets the socket drain would never see WRITEABLE: drop it then. */
    lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_WAIT_S);
}

/* ---- outbound queue ------------------------------------------------------------------ */

static int ring_push(gw_sess *s, gw_buf *b, bool push)
{
    if (s->q_len == s->q_cap) {
        size_t ncap = s->q_cap ? s->q_cap * 2 : 4; /* most sessions idle: start small */
        gw_qitem *nq = malloc(ncap * sizeof(*nq));
        if (!nq)
            return -1;
        for (size_t i = 0; i < s->q_len; i++)
            nq[i] = s->q[(s->q_head + i) % s->q_cap];
        free(s->q);
        s->q = nq;
        s->q_cap = ncap;
        s->q_head = 0;
    }
    s->q[(s->q_head + s->q_len) % s->q_cap] = (gw_qitem){b, push};
    s->q_len++;
    if (push) {
        s->q_pushes++;
        s->q_push_bytes += b->len;
    } else {
        s->q_reply_bytes += b->len;
    }
    return 0;
}

static gw_buf *ring_pop(gw_sess *s)
{
    gw_qitem it = s->q[s->q_head];
    s->q_head = (s->q_head + 1) % s->q_cap;
    s->q_len--;
    if (it.push) {
        s->q_pushes--;
        s->q_push_bytes -= it.buf->len;
    } else {
        s->q_reply_bytes -= it.buf->len;
    }
    return it.buf;
}

static void enqueue(gw_sess *s, gw_buf *b, bool push)
{
    if (!s->wsi || s->close_code || ring_push(s, b, push) != 0) {
        gw_buf_unref(b);
        return;
    }
    lws_callback_on_writable(s->wsi);
    if (!push)
        gw_sess_flow(s);
}

void gw_sess_send(gw_sess *s, gw_buf *b)
{
    enqueue(s, b, false);
}

void gw_sess_reply(gw_sess *s, const msgpack_sbuffer *sb)
{
    gw_buf *b = gw_buf_from(sb);
    if (b)
        gw_sess_send(s, b);
}

void gw_sess_push(gw_sess *s, const char *gid, uint64_t mid, gw_buf *msg)
{
    if (!s->wsi || s->close_code)
        return;
    gw_server *srv = s->srv;
    size_t cap = srv->cfg.queue_cap, cap_bytes = srv->cfg.queue_bytes;
    bool over = s->q_pushes >= cap || s->q_push_bytes + msg->len > cap_bytes;
    /* Over the cap counts only while the socket is really backed up: a reader that keeps
     * up can still see a burst (one group commit completes many messages at once) queue
     * past the cap for a moment, and must not be sent to pull for that. Four times the cap
     * is the hard limit either way. */
    if (over && s->q_pushes < 4 * cap && s->q_push_bytes + msg->len <= 4 * cap_bytes &&
        !lws_send_pipe_choked(s->wsi))
        over = false;
    if (!s->slow && !over) {
        srv->n.deliveries++;
        enqueue(s, gw_buf_ref(msg), true);
        return;
    }
    /* No more bodies for this session; one notify per group instead, with the newest
     * last_mid. The client pulls; nothing is dropped from the store. */
    if (!s->slow) {
        s->slow = true;
        s->slow_since = gw_mono_ms();
        srv->n.slow_switches++;
        gw_info("session %s user %s is a slow consumer (%zu pushes, %zu bytes queued): "
                "switching to notify", s->sid_str, s->user ? s->user->uid : "-", s->q_pushes,
                s->q_push_bytes);
    }
    gw_notify *n = NULL;
    HASH_FIND_STR(s->notify, gid, n);
    if (!n) {
        n = calloc(1, sizeof(*n));
        if (!n)
            return;
        strcpy(n->gid, gid);
        HASH_ADD_STR(s->notify, gid, n);
    }
    if (mid > n->last_mid)
        n->last_mid = mid;
}

/* Room for a frame of len bytes after LWS_PRE in the server's write buffer. */
static uint8_t *frame_room(gw_server *srv, size_t len)
{
    if (LWS_PRE + len > srv->wbuf_cap) {
        size_t ncap = LWS_PRE + len + 1024;
        uint8_t *nb = realloc(srv->wbuf, ncap);
        if (!nb)
            return NULL;
        srv->wbuf = nb;
        srv->wbuf_cap = ncap;
    }
    return srv->wbuf + LWS_PRE;
}

/* Writes the array header of a batch of n messages; returns its size. */
static size_t batch_header(uint8_t *p, size_t n)
{
    if (n < 16) {
        p[0] = (uint8_t)(0x90 | n);
        return 1;
    }
    p[0] = 0xdc;
    p[1] = (uint8_t)(n >> 8);
    p[2] = (uint8_t)n;
    return 3;
}

/* Encodes every pending notify as one frame; returns its length (0: nothing, or ENOMEM). */
static size_t take_notifies(gw_sess *s, uint8_t **out)
{
    gw_server *srv = s->srv;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    unsigned n = HASH_COUNT(s->notify);
    if (n > 1)
        pr_enc_batch_begin(&sb, n);
    gw_notify *e, *tmp;
    HASH_ITER(hh, s->notify, e, tmp)
    {
        pr_enc_notify(&sb, (pr_slice){(const uint8_t *)e->gid, strlen(e->gid)}, e->last_mid);
        srv->n.notifies++;
    }
    notify_clear(s);
    size_t len = 0;
    *out = frame_room(srv, sb.size);
    if (*out) {
        memcpy(*out, sb.data, sb.size);
        len = sb.size;
    }
    msgpack_sbuffer_destroy(&sb);
    return len;
}

/* Takes as many queued messages as fit in one frame (a batch if more than one). */
static size_t take_queued(gw_sess *s, uint8_t **out)
{
    gw_server *srv = s->srv;
    size_t n = 0, bytes = 3;
    for (size_t i = 0; i < s->q_len && n < BATCH_MAX; i++) {
        size_t l = s->q[(s->q_head + i) % s->q_cap].buf->len;
        if (n > 0 && bytes + l > srv->cfg.max_frame)
            break;
        bytes += l;
        n++;
    }
    /* A lone message goes as it is (it may exceed max_frame: a welcome of many groups). */
    *out = frame_room(srv, bytes);
    if (!*out)
        return 0;
    size_t len = n > 1 ? batch_header(*out, n) : 0;
    for (size_t i = 0; i < n; i++) {
        gw_buf *b = ring_pop(s);
        memcpy(*out + len, b->data, b->len);
        len += b->len;
        gw_buf_unref(b);
    }
    return len;
}

int gw_sess_writeable(gw_sess *s)
{
    gw_server *srv = s->srv;
    /* What was queued before the close goes out first (nothing is queued after it): a
     * client that pipelined requests reads the answers to them, the errors that spent its
     * budget among them, before the close. gw_sess_close's timeout bounds the wait. */
    if (s->close_code && !s->q_len) {
        lws_close_reason(s->wsi, (enum lws_close_status)s->close_code,
                         (unsigned char *)s->close_reason, strlen(s->close_reason));
        return -1;
    }
    uint8_t *out = NULL;
    size_t len = 0;
    if (s->ping_due) { /* one write per writeable: the ping now, the queue next time */
        s->ping_due = false;
        /* Not empty: libwebsockets 4.1 does not report an empty pong to the protocol. */
        srv->wbuf[LWS_PRE] = 'p';
        if (lws_write(s->wsi, srv->wbuf + LWS_PRE, 1, LWS_WRITE_PING) < 1)
            return -1;
        if (s->q_len || s->notify)
            lws_callback_on_writable(s->wsi);
        return 0;
    }
    if (s->q_len) {
        len = take_queued(s, &out);
    } else if (s->notify) {
        /* The queue drained: tell the slow consumer where each group is, and resume. */
        len = take_notifies(s, &out);
        s->slow = false;
    }
    if (len) {
        srv->n.frames_out++;
        srv->n.bytes_out += len;
        if (lws_write(s->wsi, out, len, LWS_WRITE_BINARY) < (int)len)
            return -1;
    }
    if (s->q_len || s->notify || s->close_code)
        lws_callback_on_writable(s->wsi);
    if (s->paused)
        gw_sess_flow(s);
    return 0;
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
     * were already on their way are still taken (gw_route_frame lets only those in). */
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
    /* A message that came whole is routed from libwebsockets' buffer as it is; only one
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
    if (s->rx_text && !s->user) {
        srv->n.closes_4001++;
        gw_sess_close(s, 4001, "unauthorized: the first message must be a valid hello");
    } else if (s->rx_text) {
        gw_sess_error(s, PR_NO_RID, PR_E_BAD_FRAME, "binary frames only: send MessagePack",
                      (pr_slice){0});
    } else {
        gw_route_frame(s, msg, msg_n);
    }
    free(s->rx);
    s->rx = NULL;
    s->rx_n = s->rx_cap = 0;
    return 0;
}

void gw_sess_error_free(gw_sess *s, uint64_t rid, int code, const char *msg, pr_slice gid)
{
    gw_server *srv = s->srv;
    if (code < 0 && -code < (int)(sizeof(srv->n.errors) / sizeof(srv->n.errors[0])))
        srv->n.errors[-code]++;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pr_enc_err(&sb, rid, code, msg, gid) == 0)
        gw_sess_reply(s, &sb);
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

/* ---- flow control -------------------------------------------------------------------- */

void gw_sess_flow(gw_sess *s)
{
    gw_server *srv = s->srv;
    if (!s->wsi)
        return;
    size_t pending = st_pending(srv->store);
    size_t reply_budget = REPLY_FRAMES * srv->cfg.max_frame;
    bool limited = gw_throttle_paused(s, gw_mono_ms());
    bool busy = s->inflight >= srv->cfg.inflight_max || pending >= srv->cfg.store_high ||
                s->q_reply_bytes > reply_budget || limited;
    /* Resume with hysteresis, so a session does not flap at the threshold. */
    bool calm = s->inflight <= srv->cfg.inflight_max / 2 &&
                pending <= srv->cfg.store_high / 2 && s->q_reply_bytes <= reply_budget / 2 &&
                !limited;
    if (!s->paused && busy) {
        s->paused = true;
        DL_APPEND2(srv->paused, s, paused_prev, paused_next);
        lws_rx_flow_control(s->wsi, 0);
    } else if (s->paused && calm) {
        s->paused = false;
        DL_DELETE2(srv->paused, s, paused_prev, paused_next);
        lws_rx_flow_control(s->wsi, 1);
    }
}

/*
 * Once a second: the hello deadline, pings to quiet sessions and the hang-up of ones that
 * answer nothing, and slow consumers that stay slow. These are not per-session
 * libwebsockets timers on purpose: libwebsockets 4.1 keeps its timers in one sorted
 * list, so every (re)armed timer walks the list, and with 10,000 sessions re-arming on
 * every pong that walk was most of an idle gateway's CPU. One pass over the sessions a
 * second costs a few microseconds per thousand sessions, and every ping of that second
 * goes out in one wake-up instead of one wake-up (and one poll of every socket) each.
 */
void gw_sess_sweep(gw_server *srv, uint64_t now_ms)
{
    uint64_t ping_ms = (uint64_t)srv->cfg.ping_s * 1000u;
    gw_sess *s, *tmp;
    HASH_ITER(hh, srv->sessions, s, tmp)
    {
        if (s->close_code || !s->wsi)
            continue;
        if (!s->user && now_ms - s->born_ms >= (uint64_t)srv->cfg.hello_timeout_s * 1000u) {
            srv->n.closes_4001++;
            gw_sess_close(s, 4001, "unauthorized: no hello in time");
        } else if (s->slow && now_ms - s->slow_since > (uint64_t)srv->cfg.slow_close_s * 1000u) {
            srv->n.closes_slow++;
            gw_sess_close(s, LWS_CLOSE_STATUS_POLICY_VIOLATION,
                          "slow consumer: not reading its messages");
        } else if (s->paused) {
            s->last_rx_ms = now_ms; /* we stopped reading it: its pongs wait unread */
        } else if (now_ms - s->last_rx_ms >= 2 * ping_ms) {
            /* Nothing for two ping intervals, not even a pong: the peer is gone, and a
             * close frame would wait for it in vain. */
            gw_info("session %s: no answer to ping in %u s: hanging up", s->sid_str,
                    2 * srv->cfg.ping_s);
            lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
        } else if (now_ms - s->last_rx_ms >= ping_ms && !s->ping_sent) {
            s->ping_due = s->ping_sent = true;
            lws_callback_on_writable(s->wsi);
        }
    }
}
