/*
 * A session's requests take effect in the order it sent them, also when it sends them
 * back to back without waiting for the replies.
 *
 * A request starts when every request before it has been answered, with one exception
 * that keeps a busy sender fast: a `send` (or an `ack`) may start while only sends are in
 * flight, because the store applies writes in the order they were submitted. So `join`
 * then `send` finds the membership, `send` then `pull` sees the message, `leave` then
 * `send` gets not_member, and a hundred pipelined sends still go to the store together.
 *
 * A frame that cannot start yet is copied and waits here; it is decoded again when its
 * turn comes (a frame that starts at once is handled from libwebsockets' buffer, with no
 * copy). Waiting frames count towards --inflight-max, like requests in flight: past it,
 * or past a few frames' worth of bytes, the session's socket is not read until half of
 * that is left. And while the session's replies are backed up (a client that asks and
 * does not read), no further request starts: what it asked waits here, small, instead of
 * as replies, large.
 */
#include "gw_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#define WAIT_FRAMES 4 /* bytes of waiting frames, in max_frame's, before reading pauses */

static void flow(gw_sess *s)
{
    const gw_reqq *q = &s->reqs;
    size_t max = s->srv->cfg.inflight_max, budget = WAIT_FRAMES * s->srv->cfg.max_frame;
    size_t load = q->sends + (q->barrier ? 1 : 0) + q->n_waiting;
    if (load >= max || q->waiting_bytes > budget)
        gw_sess_pause(s, GW_PAUSE_REQS, true);
    else if ((s->pause & GW_PAUSE_REQS) && load <= max / 2 && q->waiting_bytes <= budget / 2)
        gw_sess_pause(s, GW_PAUSE_REQS, false);
}

/* Decodes the frame and starts it, unless it must wait: false then, nothing done. */
static bool try_start(gw_sess *s, const uint8_t *frame, size_t len)
{
    gw_server *srv = s->srv;
    const gw_reqq *q = &s->reqs;
    if (q->barrier || (s->pause & GW_PAUSE_REPLIES))
        return false;
    pr_req r;
    pr_error err = {0};
    int rc = pr_decode_req(srv->dec, frame, len, &r, &err);
    if (q->sends && (rc != 0 || (r.t != PR_REQ_SEND && r.t != PR_REQ_ACK)))
        return false;
    if (!s->user && (rc != 0 || r.t != PR_REQ_HELLO)) {
        /* Nothing but a hello is heard before a hello. */
        srv->n.closes_4001++;
        gw_sess_close(s, 4001, "unauthorized: the first message must be a valid hello");
        return true;
    }
    /* From here on, r.rid is what every reply carries: the client's rid, or none. */
    if (!r.has_rid)
        r.rid = PR_NO_RID;
    if (rc != 0)
        gw_sess_error(s, r.rid, rc, err.msg, (pr_slice){0});
    else
        gw_route_start(s, &r);
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

void gw_reqs_frame(gw_sess *s, const uint8_t *frame, size_t len)
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
    s->srv->n.requests_waited++;
    flow(s);
}

void gw_reqs_began(gw_sess *s, gw_req *r, bool send)
{
    gw_reqq *q = &s->reqs;
    if (send)
        q->sends++;
    else
        q->barrier = true;
    if (r)
        DL_APPEND(q->inflight, r);
    flow(s);
}

void gw_reqs_done(gw_sess *s, gw_req *r, bool send)
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
    gw_req *r, *tmp;
    DL_FOREACH_SAFE (q->inflight, r, tmp) {
        DL_DELETE(q->inflight, r);
        r->sess = NULL; /* its completion still updates the registry; it answers nobody */
    }
}
