/*
 * What the unread webhook takes up from the store (app_internal.h): the work of a node
 * that is gone, or of this one before it was restarted. The first service thread of
 * every node does it; the store's bookkeeping makes sure that two nodes doing the same
 * tell each member once (store.h, TELL_CLAIM).
 *
 *   - Ranges not looked at in time. Every second, the span of time that ended
 *     --webhook-delay + GRACE_MS ago (and began where the last one ended) is read from
 *     the store (READ_UNSWEPT): the groups with messages stored in it past their swept
 *     mark. Their node looks at a range and moves the mark once the delay is up, so what
 *     is still there GRACE_MS later was left: its node died, or is late (then both look,
 *     and the claims tell each member once). At start the span reaches back as far as
 *     the store keeps its log (10 minutes): what this node or another stored before, and
 *     left, is looked at.
 *   - Events made and not taken. Every ADOPT_S, the events a node claimed and that its
 *     receiver had not taken when the node ended (died, or stopped with them queued) are
 *     adopted (TELL_ADOPT, as many as the queue has room for) and queued here.
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_S 1.0
#define GRACE_MS 3000u            /* after the delay: the storing node's look should be done */
#define SCAN_BACK_MS (570 * 1000) /* at start: within the store's 10 minutes of log */
#define SCAN_PAGE 500             /* groups a read */
#define BUSY_DUE 20000            /* ranges waiting here: the next span waits too */
#define ADOPT_S 5.0
#define ADOPT_AFTER_MS 2000u /* an event claimed this lately may still be queued by its node */

/* One store request of its own, and whose it is. */
typedef struct rec_job {
    gw_job job; /* first: the completion finds it from its job */
    gw_unread_recover *r;
} rec_job;

struct gw_unread_recover {
    gw_app *a;
    ev_timer timer;
    uint64_t scan_from;        /* the span read next begins after this (ms since the epoch) */
    uint64_t scan_upto;        /* ... and ends here (0: not begun) */
    char after[PR_MAX_ID + 1]; /* the span's next page begins after this group */
    bool scanning, adopting;
    uint64_t adopt_at; /* monotonic ms */
    rec_job scan, adopt;
};

static void scan_next(gw_unread_recover *r);

static void scanned(gw_job *j)
{
    gw_unread_recover *r = ((rec_job *)j)->r;
    gw_app *a = r->a;
    st_op *op = &j->op;
    r->scanning = false;
    if (op->result != 0) {
        a->figs.webhook_read_errors++; /* the same span again at the next tick */
        return;
    }
    for (size_t i = 0; i < st_list_count(op->list); i++) {
        const st_item *it = st_list_at(op->list, i);
        char gid[PR_MAX_ID + 1];
        if (!gw_id_copy(gid, it->gid.p, it->gid.n))
            continue; /* not an id this gateway makes */
        gw_unread_take_up(a->unread, gid, it->lo, it->hi, it->mark);
    }
    bool more = st_list_more(op->list);
    st_id after = st_list_after(op->list);
    snprintf(r->after, sizeof(r->after), "%.*s", (int)(after.n <= PR_MAX_ID ? after.n : 0),
             after.p);
    st_list_free(op->list);
    if (more && r->after[0]) {
        scan_next(r); /* the same span, its next page */
        return;
    }
    r->scan_from = r->scan_upto; /* the span is read: the next one begins there */
    r->scan_upto = 0;
    r->after[0] = 0;
}

/* Reads the span (or its next page). */
static void scan_next(gw_unread_recover *r)
{
    gw_app *a = r->a;
    if (gw_unread_waiting(a->unread) > BUSY_DUE)
        return; /* looks already wait here: the span waits for them */
    r->scanning = true;
    st_op *op = &r->scan.job.op;
    memset(op, 0, sizeof(*op));
    op->kind = ST_OP_READ_UNSWEPT;
    op->from = r->scan_from;
    op->upto = r->scan_upto;
    op->gid = st_id_str(r->after);
    op->limit = SCAN_PAGE;
    r->scan.job.complete = scanned;
    int rc = gw_bridge_submit(a->d.bridge, &r->scan.job);
    if (rc < 0)
        r->scanning = false; /* closing */
}

static void adopted(gw_job *j)
{
    gw_unread_recover *r = ((rec_job *)j)->r;
    gw_app *a = r->a;
    st_op *op = &j->op;
    r->adopting = false;
    if (op->result != 0) {
        a->figs.webhook_read_errors++;
        return;
    }
    size_t n = st_list_count(op->list);
    for (size_t i = 0; i < n; i++) {
        const st_item *it = st_list_at(op->list, i);
        json_t *ev = json_loadb(it->text, it->text_n, 0, NULL);
        if (!ev) {
            a->figs.webhook_missed++; /* not an event this gateway made */
            continue;
        }
        a->figs.webhook_adopted++;
        gw_webhook_push(a->webhook, ev);
    }
    if (n)
        gw_info("webhook: %zu events made by a node that is gone (or by this one before a "
                "restart) and not taken by the receiver: sent from here",
                n);
    st_list_free(op->list);
}

static void adopt(gw_unread_recover *r)
{
    gw_app *a = r->a;
    size_t room = gw_webhook_room(a->webhook);
    if (room == 0)
        return; /* they wait in the store */
    r->adopting = true;
    st_op *op = &r->adopt.job.op;
    memset(op, 0, sizeof(*op));
    op->kind = ST_OP_TELL_ADOPT;
    op->upto = gw_now_ms() - ADOPT_AFTER_MS;
    op->limit = room;
    r->adopt.job.complete = adopted;
    if (gw_bridge_submit(a->d.bridge, &r->adopt.job) < 0)
        r->adopting = false;
}

static void on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    gw_unread_recover *r = (gw_unread_recover *)((char *)t - offsetof(gw_unread_recover, timer));
    if (r->a->stopping)
        return;
    if (!r->adopting && gw_mono_ms() >= r->adopt_at) {
        r->adopt_at = gw_mono_ms() + (uint64_t)(ADOPT_S * 1000);
        adopt(r);
    }
    if (r->scanning)
        return;
    if (!r->scan_upto) {
        uint64_t upto = gw_now_ms() - r->a->d.cfg->webhook_delay_ms - GRACE_MS;
        if (upto <= r->scan_from)
            return;
        r->scan_upto = upto;
    }
    scan_next(r);
}

gw_unread_recover *gw_unread_recover_new(gw_app *a)
{
    gw_unread_recover *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->a = a;
    r->scan.r = r->adopt.r = r;
    r->scan_from = gw_now_ms() - SCAN_BACK_MS;
    ev_timer_init(&r->timer, on_tick, SCAN_S, SCAN_S);
    ev_timer_start(a->d.loop, &r->timer);
    return r;
}

void gw_unread_recover_free(gw_unread_recover *r)
{
    if (!r)
        return;
    /* No read is under way: the server frees this after the store closed and every
     * completion ran. */
    ev_timer_stop(r->a->d.loop, &r->timer);
    free(r);
}
