/*
 * What a session sends: its outbound queue of replies and pushes waiting for the socket,
 * written as batch frames (a MessagePack array of up to 256 messages within the frame
 * limit) when the socket can take more; every push, whatever its kind, counts against one
 * budget (gw_out_push), past which each kind has its fate: messages become one coalesced
 * `notify` per group (slow consumers), typing is dropped, and so on; a ping or the close
 * when their turn comes.
 *
 * Writing: a session given something to send joins the thread's flush list, and just
 * before the loop polls again (an ev_prepare) each one in it is written straight to its
 * socket, when libwebsockets holds nothing unsent for it. So everything an iteration
 * produced for a session (a commit's messages, the replies to a read's requests) leaves
 * as one frame in one send(), without a round trip through the poller for POLLOUT. What
 * cannot go that way (a ping, the close, more than a few frames, a socket that did not
 * take the last one whole) waits for libwebsockets' SERVER_WRITEABLE, gw_out_writeable.
 */
#include "sess_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

/* Messages written in one batch frame at most; the frame also stays within max_frame. */
#define BATCH_MAX 256
/* A client is owed its replies, so they are never refused; but reading from a session
 * pauses while more than this many max_frame's worth of replies wait to be written. */
#define REPLY_FRAMES 4
/* Frames written at once before the poll; a session with more waits for WRITEABLE, so one
 * busy session does not hold up the others' turn. */
#define FLUSH_FRAMES 4

/* The frame being written: LWS_PRE bytes of room, then the frame. A service thread writes
 * one frame at a time, so one buffer per thread serves all its sessions. */
static _Thread_local uint8_t *wbuf;
static _Thread_local size_t wbuf_cap;

void gw_sessions_thread_end(void)
{
    free(wbuf);
    wbuf = NULL;
    wbuf_cap = 0;
}

static uint8_t *frame_room(size_t len)
{
    if (LWS_PRE + len > wbuf_cap) {
        size_t ncap = LWS_PRE + len + 1024;
        uint8_t *nb = realloc(wbuf, ncap);
        if (!nb)
            return NULL;
        wbuf = nb;
        wbuf_cap = ncap;
    }
    return wbuf + LWS_PRE;
}

static void hash_clear(gw_notify **h)
{
    GW_HASH_FREE_ALL(*h);
}

static void notify_clear(gw_outq *o)
{
    hash_clear(&o->notify);
    hash_clear(&o->changed);
}

static void flush_cb(struct ev_loop *loop, ev_prepare *w, int revents);

void gw_out_start(gw_sessions *all)
{
    if (!all->loop)
        return; /* no loop (the fuzz target): everything waits for WRITEABLE */
    ev_prepare_init(&all->flush_w, flush_cb);
    all->flush_w.data = all;
    ev_prepare_start(all->loop, &all->flush_w);
    ev_unref(all->loop); /* the flush alone does not keep the loop running */
}

void gw_out_stop(gw_sessions *all)
{
    if (!all->loop)
        return;
    ev_ref(all->loop);
    ev_prepare_stop(all->loop, &all->flush_w);
}

/* The session has something new to write: before the next poll, or at WRITEABLE. */
static void want_write(gw_sess *s)
{
    gw_sessions *all = s->all;
    if (!all->loop) {
        lws_callback_on_writable(s->wsi);
        return;
    }
    if (s->out.to_flush)
        return;
    s->out.to_flush = true;
    DL_APPEND2(all->flush, s, out.flush_prev, out.flush_next);
}

void gw_out_release(gw_sess *s)
{
    gw_outq *o = &s->out;
    if (o->to_flush)
        DL_DELETE2(s->all->flush, s, out.flush_prev, out.flush_next);
    for (size_t i = 0; i < o->len; i++)
        gw_buf_unref(o->q[(o->head + i) % o->cap].buf);
    free(o->q);
    notify_clear(o);
    memset(o, 0, sizeof(*o));
}

bool gw_out_pending(const gw_sess *s)
{
    return s->out.len || s->out.notify || s->out.changed;
}

/* Replies waiting past the budget pause reading; under half of it, reading goes on. */
static void reply_flow(gw_sess *s)
{
    size_t budget = REPLY_FRAMES * s->all->cfg->max_frame;
    if (s->out.reply_bytes > budget) {
        if (!(s->pause & GW_PAUSE_REPLIES))
            s->out.backed_up_since = gw_mono_ms();
        gw_sess_pause(s, GW_PAUSE_REPLIES, true);
    } else if (s->out.reply_bytes <= budget / 2 && (s->pause & GW_PAUSE_REPLIES)) {
        s->out.backed_up_since = 0;
        gw_sess_pause(s, GW_PAUSE_REPLIES, false);
        gw_reqs_resume(s); /* requests that waited for the replies to drain */
    }
}

/* ---- the ring ----------------------------------------------------------------------- */

static int ring_push(gw_outq *o, gw_buf *b, bool push)
{
    if (o->len == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 4; /* most sessions idle: start small */
        gw_qitem *nq = malloc(ncap * sizeof(*nq));
        if (!nq)
            return -1;
        for (size_t i = 0; i < o->len; i++)
            nq[i] = o->q[(o->head + i) % o->cap];
        free(o->q);
        o->q = nq;
        o->cap = ncap;
        o->head = 0;
    }
    o->q[(o->head + o->len) % o->cap] = (gw_qitem){b, push};
    o->len++;
    if (push) {
        o->pushes++;
        o->push_bytes += b->len;
    } else {
        o->reply_bytes += b->len;
    }
    return 0;
}

static gw_buf *ring_pop(gw_outq *o)
{
    gw_qitem it = o->q[o->head];
    o->head = (o->head + 1) % o->cap;
    o->len--;
    if (it.push) {
        o->pushes--;
        o->push_bytes -= it.buf->len;
    } else {
        o->reply_bytes -= it.buf->len;
    }
    return it.buf;
}

static void enqueue(gw_sess *s, gw_buf *b, bool push)
{
    if (!s->wsi || s->close_code || ring_push(&s->out, b, push) != 0) {
        gw_buf_unref(b);
        return;
    }
    want_write(s);
    if (!push)
        reply_flow(s);
}

void gw_out_reply(gw_sess *s, const msgpack_sbuffer *sb)
{
    gw_buf *b = gw_buf_from(sb);
    if (b)
        enqueue(s, b, false);
}

void gw_out_ping(gw_sess *s)
{
    if (!s->wsi)
        return;
    s->out.ping_due = true;
    lws_callback_on_writable(s->wsi);
}

/* The newest mid (or cseq) of gid in one of the session's coalesced hashes. */
static void coalesce(gw_notify **h, const char *gid, uint64_t mid)
{
    gw_notify *n = NULL;
    HASH_FIND_STR(*h, gid, n);
    if (!n) {
        n = calloc(1, sizeof(*n));
        if (!n)
            return;
        strcpy(n->gid, gid);
        HASH_ADD_STR(*h, gid, n);
    }
    if (mid > n->last_mid)
        n->last_mid = mid;
}

static void notify_add(gw_outq *o, const char *gid, uint64_t mid)
{
    coalesce(&o->notify, gid, mid);
}

/* The push of len bytes would pass the session's budget. Over it counts only while the
 * socket is really backed up: a reader that keeps up can still see a burst (one group
 * commit completes many messages at once) queue past it for a moment, and must not be
 * sent to pull for that. Four times the budget (*hard) is the limit either way. */
static bool over_budget(gw_sess *s, size_t len, bool *hard)
{
    const gw_outq *o = &s->out;
    size_t cap = s->all->cfg->queue_cap, cap_bytes = s->all->cfg->queue_bytes;
    *hard = o->pushes >= 4 * cap || o->push_bytes + len > 4 * cap_bytes;
    bool over = o->pushes >= cap || o->push_bytes + len > cap_bytes;
    return o->slow || *hard || (over && lws_send_pipe_choked(s->wsi));
}

/* The session is a slow consumer from now on: messages become notifies until its queue
 * drained, and the sweep closes it if it stays so (--slow-close). */
static void go_slow(gw_sess *s)
{
    gw_outq *o = &s->out;
    if (o->slow)
        return;
    o->slow = true;
    o->slow_since = gw_mono_ms();
    s->all->figs.slow_switches++;
    gw_info("session %s user %s is a slow consumer (%zu pushes, %zu bytes queued): "
            "switching to notify",
            gw_sess_name(s), gw_sess_uid(s) ? s->id.uid : "-", o->pushes, o->push_bytes);
}

int gw_out_push(gw_sess *s, enum gw_push_kind kind, const char *gid, uint64_t mid, gw_buf *b)
{
    if (!s->wsi || s->close_code)
        return 0;
    gw_sess_figs *f = &s->all->figs;
    bool hard;
    if (kind == GW_PUSH_LEFT || kind == GW_PUSH_GROUPS || !over_budget(s, b->len, &hard)) {
        f->deliveries += kind == GW_PUSH_MSG;
        enqueue(s, gw_buf_ref(b), true);
        return 0;
    }
    switch (kind) {
    case GW_PUSH_MSG:
        /* No more bodies for this session; one notify per group instead, with the newest
         * last_mid. The client pulls; nothing is dropped from the store. */
        go_slow(s);
        notify_add(&s->out, gid, mid);
        return 0;
    case GW_PUSH_VERSION:
        /* Nothing the client pulls would bring a version it missed: queued while there is
         * room, then the session goes (it reconnects and pages). */
        go_slow(s);
        if (!hard) {
            enqueue(s, gw_buf_ref(b), true);
            return 0;
        }
        f->budget_version_closes++;
        gw_sess_close_slow(s, "slow consumer: not reading its edits and recalls");
        return -EAGAIN;
    case GW_PUSH_WATCH: f->budget_watch_deferred++; return -EAGAIN;
    case GW_PUSH_PRESENCE: f->budget_presence_deferred++; return -EAGAIN;
    case GW_PUSH_TYPING: f->budget_typing_dropped++; return -EAGAIN;
    case GW_PUSH_REACT:
        /* Reactions are many and small: past the budget they are not queued, one
         * `changed` per group says where its change log is (the client pulls it). */
        go_slow(s);
        f->budget_react_coalesced++;
        coalesce(&s->out.changed, gid, mid);
        want_write(s);
        return 0;
    case GW_PUSH_LEFT:
    case GW_PUSH_GROUPS: break; /* queued above */
    }
    return -EAGAIN;
}

void gw_out_notify(gw_sess *s, const char *gid, uint64_t last_mid)
{
    if (!s->wsi || s->close_code)
        return;
    /* Goes out once what is queued before it has (as a slow consumer's notifies do). */
    notify_add(&s->out, gid, last_mid);
    want_write(s);
}

void gw_out_changed(gw_sess *s, const char *gid, uint64_t last_cseq)
{
    if (!s->wsi || s->close_code)
        return;
    coalesce(&s->out.changed, gid, last_cseq);
    want_write(s);
}

/* ---- writing ------------------------------------------------------------------------------ */

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
    gw_outq *o = &s->out;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    unsigned n = HASH_COUNT(o->notify) + HASH_COUNT(o->changed);
    if (n > 1)
        pr_enc_batch_begin(&sb, n);
    gw_notify *e, *tmp;
    HASH_ITER (hh, o->notify, e, tmp) {
        pr_enc_notify(&sb, (pr_slice){(const uint8_t *)e->gid, strlen(e->gid)}, e->last_mid);
        s->all->figs.notifies++;
    }
    HASH_ITER (hh, o->changed, e, tmp) {
        pr_enc_changed(&sb, (pr_slice){(const uint8_t *)e->gid, strlen(e->gid)}, e->last_mid);
        s->all->figs.changed_sent++;
    }
    notify_clear(o);
    size_t len = 0;
    *out = frame_room(sb.size);
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
    gw_outq *o = &s->out;
    size_t n = 0, bytes = 3;
    for (size_t i = 0; i < o->len && n < BATCH_MAX; i++) {
        size_t l = o->q[(o->head + i) % o->cap].buf->len;
        if (n > 0 && bytes + l > s->all->cfg->max_frame)
            break;
        bytes += l;
        n++;
    }
    /* A lone message goes as it is (it may exceed max_frame: a welcome of many groups). */
    *out = frame_room(bytes);
    if (!*out)
        return 0;
    size_t len = n > 1 ? batch_header(*out, n) : 0;
    for (size_t i = 0; i < n; i++) {
        gw_buf *b = ring_pop(o);
        memcpy(*out + len, b->data, b->len);
        len += b->len;
        gw_buf_unref(b);
    }
    return len;
}

/* Writes one frame: the ping if one is due, else queued messages, else the pending
 * notifies. Returns -1 when the socket failed. */
static int write_frame(gw_sess *s)
{
    gw_sessions *all = s->all;
    gw_outq *o = &s->out;
    uint8_t *out = NULL;
    size_t len = 0;
    if (o->ping_due) {
        o->ping_due = false;
        /* Not empty: libwebsockets 4.1 does not report an empty pong to the protocol. */
        uint8_t *p = frame_room(1);
        if (!p)
            return -1;
        p[0] = 'p';
        return lws_write(s->wsi, p, 1, LWS_WRITE_PING) < 1 ? -1 : 0;
    }
    if (o->len) {
        len = take_queued(s, &out);
    } else if (o->notify || o->changed) {
        /* The queue drained: tell the slow consumer where each group is, and resume. */
        len = take_notifies(s, &out);
        o->slow = false;
    }
    enum lws_write_protocol kind = LWS_WRITE_BINARY;
    if (len && s->json) { /* a JSON session: the frame as JSON text (proto.h) */
        char *text;
        size_t text_n;
        if (pr_json_from_msgpack(out, len, &text, &text_n) != 0) {
            /* Cannot happen for what the gateway encodes (ids, str or bin bodies). */
            gw_warn("session %s: a frame has no JSON form: closing the JSON session",
                    gw_sess_name(s));
            return -1;
        }
        out = frame_room(text_n);
        if (out)
            memcpy(out, text, text_n);
        free(text);
        if (!out)
            return -1;
        len = text_n;
        kind = LWS_WRITE_TEXT;
    }
    if (len) {
        all->figs.frames_out++;
        all->figs.bytes_out += len;
        /* libwebsockets keeps what the socket did not take and sends it first. */
        if (lws_write(s->wsi, out, len, kind) < (int)len)
            return -1;
    }
    return 0;
}

/* Before the poll: each session in the flush list is written now if its socket holds
 * nothing unsent; what is left waits for WRITEABLE. */
static void flush_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    gw_sessions *all = w->data;
    gw_sess *s;
    while ((s = all->flush)) {
        DL_DELETE2(all->flush, s, out.flush_prev, out.flush_next);
        s->out.to_flush = false;
        if (!s->wsi)
            continue;
        /* The close goes after what is queued, at WRITEABLE (gw_out_writeable). */
        for (int n = 0; n < FLUSH_FRAMES && !s->close_code && gw_out_pending(s) &&
                        !lws_partial_buffered(s->wsi);
             n++) {
            if (write_frame(s) != 0) {
                /* The socket failed: libwebsockets closes it (CLOSED frees the session). */
                lws_set_timeout(s->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
                break;
            }
        }
        if (s->wsi && (gw_out_pending(s) || s->close_code || s->out.ping_due))
            lws_callback_on_writable(s->wsi);
        if (s->pause & GW_PAUSE_REPLIES)
            reply_flow(s);
    }
}

int gw_out_writeable(gw_sess *s)
{
    gw_outq *o = &s->out;
    /* What was queued before the close goes out first (nothing is queued after it): a
     * client that pipelined requests reads the answers to them, the errors that spent its
     * budget among them, before the close. gw_sess_close's timeout bounds the wait. */
    if (s->close_code && !o->len) {
        lws_close_reason(s->wsi, (enum lws_close_status)s->close_code,
                         (unsigned char *)(s->close_reason ? s->close_reason : ""),
                         s->close_reason ? strlen(s->close_reason) : 0);
        return -1;
    }
    /* One frame per writeable (the ping now, the queue next time). */
    if (write_frame(s) != 0)
        return -1;
    if (o->len || o->notify || o->changed || o->ping_due || s->close_code)
        lws_callback_on_writable(s->wsi);
    if (s->pause & GW_PAUSE_REPLIES)
        reply_flow(s);
    return 0;
}
