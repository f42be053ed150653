/*
 * What a session receives, and the order its requests take effect in.
 *
 * Receiving: one WebSocket message may arrive in pieces, which are joined here (a message
 * that arrives whole is handled from libwebsockets' buffer, with no copy); a message over
 * the frame limit is dropped and the session closed with 1009; a JSON session's frame
 * becomes MessagePack here and takes the one path from there.
 *
 * A session's requests take effect in the order it sent them, also when it sends them
 * back to back without waiting for the replies. A request starts when every request
 * before it has been answered, with one exception that keeps a busy sender fast: a
 * `send` (or an `ack`) may start while only sends are in flight, because the store
 * applies writes in the order they were submitted. So `join` then `send` finds the
 * membership, `send` then `pull` sees the message, `leave` then `send` gets not_member,
 * and a hundred pipelined sends still go to the store together.
 *
 * A frame that cannot start yet is copied and waits here; it is decoded again when its
 * turn comes. Waiting frames count towards --inflight-max, like requests in flight: past
 * it, or past a few frames' worth of bytes, the session's socket is not read until half
 * of that is left. And while the session's replies are backed up (a client that asks and
 * does not read), no further request starts: what it asked waits here, small, instead of
 * as replies, large. What a request does is the layer above's (gw_sess_hooks.request).
 */
#include "sess_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#define WAIT_FRAMES 4 /* bytes of waiting frames, in max_frame's, before reading pauses */
/* The largest message before a hello: a token is at most 8 KiB (docs/PROTOCOL.md), and the
 * hello's other fields are a few bytes. Nothing larger is held, joined or parsed for a
 * client that has not shown a token. */
#define HELLO_FRAME_MAX (GW_HELLO_TOKEN_MAX + 2048)

static void flow(gw_sess *s)
{
    const gw_reqq *q = &s->reqs;
    const gw_config *cfg = s->all->cfg;
    size_t max = cfg->inflight_max, budget = WAIT_FRAMES * cfg->max_frame;
    size_t load = q->sends + (q->barrier ? 1 : 0) + q->n_waiting;
    if (load >= max || q->waiting_bytes > budget)
        gw_sess_pause(s, GW_PAUSE_REQS, true);
    else if ((s->pause & GW_PAUSE_REQS) && load <= max / 2 && q->waiting_bytes <= budget / 2)
        gw_sess_pause(s, GW_PAUSE_REQS, false);
}

/* Decodes the frame and starts it, unless it must wait: false then, nothing done. */
static bool try_start(gw_sess *s, const uint8_t *frame, size_t len)
{
    gw_sessions *all = s->all;
    const gw_reqq *q = &s->reqs;
    if (q->barrier || (s->pause & GW_PAUSE_REPLIES))
        return false;
    pr_req r;
    pr_error err = {0};
    int rc = pr_decode_req(all->dec, frame, len, &r, &err);
    if (q->sends && (rc != 0 || (r.t != PR_REQ_SEND && r.t != PR_REQ_ACK)))
        return false;
    if (s->signin != GW_SIGNIN_DONE && (rc != 0 || r.t != PR_REQ_HELLO)) {
        /* Nothing but a hello is heard before a hello. */
        gw_sess_close(s, 4001, "unauthorized: the first message must be a valid hello");
        return true;
    }
    /* From here on, r.rid is what every reply carries: the client's rid, or none. */
    if (!r.has_rid)
        r.rid = PR_NO_RID;
    /* A request refused for a field after its gid (too many mids, a mid of 0) names the
     * group, as an error of the request's own does: the gid is read before the rest. */
    if (rc != 0)
        gw_sess_error(s, r.rid, rc, err.msg, r.gid);
    else
        all->hooks.request(all->hooks.ud, s, &r);
    return true;
}

/* Starts the waiting frames whose turn has come. A request that completes at once (a
 * read the store answers on the spot) comes back here through gw_reqs_done: the loop
 * below goes on with the next one. */
static void pump(gw_sess *s)
{
    gw_reqq *q = &s->reqs;
    if (q->pumping)
        return;
    q->pumping = true;
    while (q->head) {
        gw_waiting *w = q->head;
        /* Closing: what waits is dropped (but acks during a graceful stop, 1001). */
        if (!s->close_code || s->close_code == LWS_CLOSE_STATUS_GOINGAWAY) {
            if (!try_start(s, w->frame, w->n))
                break;
        }
        q->head = w->next;
        if (!q->head)
            q->tail = NULL;
        q->n_waiting--;
        q->waiting_bytes -= w->n;
        free(w);
    }
    q->pumping = false;
    flow(s);
}

static void reqs_frame(gw_sess *s, const uint8_t *frame, size_t len)
{
    gw_reqq *q = &s->reqs;
    if (!q->head) {
        q->pumping = true;
        bool started = try_start(s, frame, len);
        q->pumping = false;
        if (started) {
            pump(s);
            return;
        }
    }
    gw_waiting *w = malloc(sizeof(*w) + len);
    if (!w) {
        gw_sess_error_free(s, PR_NO_RID, PR_E_INTERNAL, "out of memory", (pr_slice){0});
        return;
    }
    w->next = NULL;
    w->n = len;
    memcpy(w->frame, frame, len);
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    q->n_waiting++;
    q->waiting_bytes += len;
    s->all->figs.requests_waited++;
    flow(s);
}

void gw_reqs_began(gw_sess *s, gw_sess_req *r, bool send)
{
    gw_reqq *q = &s->reqs;
    if (send)
        q->sends++;
    else
        q->barrier = true;
    if (r) {
        r->sess = s;
        DL_APPEND(q->inflight, r);
    }
    flow(s);
}

void gw_reqs_done(gw_sess *s, gw_sess_req *r, bool send)
{
    gw_reqq *q = &s->reqs;
    if (send && q->sends)
        q->sends--;
    else if (!send)
        q->barrier = false;
    if (r)
        DL_DELETE(q->inflight, r);
    pump(s);
}

void gw_reqs_resume(gw_sess *s)
{
    pump(s);
}

void gw_reqs_store_busy(gw_sess *s)
{
    gw_sess_pause(s, GW_PAUSE_STORE, true);
}

void gw_reqs_release(gw_sess *s)
{
    gw_reqq *q = &s->reqs;
    while (q->head) {
        gw_waiting *w = q->head;
        q->head = w->next;
        free(w);
    }
    q->tail = NULL;
    q->n_waiting = q->waiting_bytes = 0;
    gw_sess_req *r, *tmp;
    DL_FOREACH_SAFE (q->inflight, r, tmp) {
        DL_DELETE(q->inflight, r);
        r->sess = NULL; /* its completion still does what it does; it answers nobody */
    }
}

/* ---- receive ------------------------------------------------------------------------- */

/* Does the JSON text begin with an object (after white space)? */
static bool json_object_first(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    return i < n && p[i] == '{';
}

int gw_sess_rx(gw_sess *s, const void *in, size_t len, bool first, bool final, bool binary)
{
    gw_sessions *all = s->all;
    all->figs.bytes_in += len;
    gw_sess_alive(s);
    if (first) {
        s->rx_n = 0;
        s->rx_text = !binary;
        s->rx_discard = 0;
    }
    /* Closing: ignore the rest, except during a graceful stop (1001), when acks that
     * were already on their way are still taken (the layer above lets only those in). */
    if (s->close_code && s->close_code != LWS_CLOSE_STATUS_GOINGAWAY)
        return 0;
    /* Every piece is paid for from the byte rate as it comes, not once the message is
     * whole: a message sent in many pieces costs what it is. */
    gw_throttle_bytes(s, len, first);
    bool hello_due = s->signin == GW_SIGNIN_NONE;
    size_t limit = hello_due ? HELLO_FRAME_MAX : all->cfg->max_frame;
    if (s->rx_discard || s->rx_n + len > limit) {
        /* Over the limit: drop the message and close with 1009 once it has been read to
         * its end, so the close frame is the next thing the client reads (closing while
         * it still writes can end in a reset that hides the code). A message that goes on
         * far past the limit is cut off at once. */
        s->rx_discard += len + (s->rx_discard ? 0 : s->rx_n);
        s->rx_n = 0;
        if (final || s->rx_discard > 16 * limit) {
            all->figs.errors[-PR_E_TOO_LARGE]++;
            gw_sess_close(s, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                          hello_due ? "frame over the size limit (a hello is at most 10 KiB)"
                                    : "frame over the size limit");
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
    all->figs.frames_in++;
    /* A JSON session's frame becomes MessagePack here, and takes the one path from there.
     * Before a hello, only a JSON object is parsed: anything else cannot be one. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    bool wrong_kind = s->rx_text != s->json;
    pr_error jerr;
    bool bad_json = !wrong_kind && s->json &&
                    ((hello_due && !json_object_first(msg, msg_n)) ||
                     pr_msgpack_from_json_err((const char *)msg, msg_n, &sb, &jerr) != 0);
    if ((wrong_kind || bad_json) && s->signin == GW_SIGNIN_NONE) {
        gw_sess_close(s, 4001, "unauthorized: the first message must be a valid hello");
    } else if (wrong_kind) {
        gw_sess_error(s, PR_NO_RID, PR_E_BAD_FRAME,
                      s->json ? "text frames only: send JSON (subprotocol gw.v1.json)"
                              : "binary frames only: send MessagePack",
                      (pr_slice){0});
    } else if (bad_json) {
        gw_sess_error(s, PR_NO_RID, PR_E_BAD_FRAME, jerr.msg, (pr_slice){0});
    } else if (s->json) {
        reqs_frame(s, (const uint8_t *)sb.data, sb.size);
    } else {
        reqs_frame(s, msg, msg_n);
    }
    msgpack_sbuffer_destroy(&sb);
    free(s->rx);
    s->rx = NULL;
    s->rx_n = s->rx_cap = 0;
    return 0;
}
