/*
 * What a session is shown without asking (app_internal.h; docs/PROTOCOL.md, Receipts and
 * presence), on its own thread:
 *   - A watch (`watch {gid, mids}`: the group is on screen). Every --receipt-push-ms, a
 *     watch whose roster moved gets one push: in a group of at most --receipt-list-max
 *     members `cursors`, who moved to where; in a larger one a `receipts` of each mid it
 *     watches. An empty `mids` ends the watch; so does the session's end. At most
 *     WATCHES_MAX groups a session.
 *   - A presence subscription (`presence {gid, sub: true}`). Once a second, the changes
 *     to who is online (cluster/gw_presence.c's ring) that concern the group's members go
 *     as one `online {gid, changes}`.
 * Pushes are coalesced by the timers: at most one of each kind a group per period,
 * however many cursors moved or users came and went in it. A push the session's outbound
 * budget refuses (it does not read: session/, gw_out_push) leaves the watch where it was,
 * so the next period's push, once there is room, says everything since.
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#define WATCHES_MAX 16 /* groups one session watches, or is subscribed to, at once */
#define SUB_PUSH_S 1.0

struct gw_watch {
    struct gw_watch *prev, *next; /* the thread's (utlist DL) */
    struct gw_watch *sess_next;   /* the session's */
    gw_sess *s;
    bool presence; /* a presence subscription (else a watch of receipts) */
    char gid[PR_MAX_ID + 1];
    uint64_t mids[PR_MAX_WATCH];
    size_t n_mids;
    uint64_t since; /* the roster's version, or presence's sequence, last pushed */
};

static gw_roster *roster(gw_app *a)
{
    return gw_hub_roster(a->d.hub);
}

static gw_watch **of_sess(gw_sess *s)
{
    return &((app_sess *)gw_sess_ext(s))->watches;
}

static gw_watch *find(gw_sess *s, const char *gid, bool presence)
{
    for (gw_watch *w = *of_sess(s); w; w = w->sess_next)
        if (w->presence == presence && strcmp(w->gid, gid) == 0)
            return w;
    return NULL;
}

static void remove_watch(gw_app *a, gw_watch *w)
{
    gw_watch **pp = of_sess(w->s);
    while (*pp && *pp != w)
        pp = &(*pp)->sess_next;
    if (*pp)
        *pp = w->sess_next;
    DL_DELETE(a->watches, w);
    gw_roster_watch(roster(a), w->gid, -1);
    free(w);
}

static void push_all(struct ev_loop *loop, ev_timer *t, int revents);
static void push_subs(struct ev_loop *loop, ev_timer *t, int revents);

/* A new watch or subscription of s (NULL, with an error sent, past the limit). */
static gw_watch *add_watch(gw_app *a, gw_sess *s, uint64_t rid, const char *gid, bool presence)
{
    size_t n = 0;
    for (gw_watch *x = *of_sess(s); x; x = x->sess_next)
        n += x->presence == presence;
    if (n >= WATCHES_MAX) {
        gw_sess_error(s, rid, PR_E_TOO_LARGE,
                      presence ? "a session subscribes to 16 groups at most"
                               : "a session watches 16 groups at most",
                      gw_cstr(gid));
        return NULL;
    }
    gw_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        gw_sess_error_free(s, rid, PR_E_INTERNAL, "out of memory", gw_cstr(gid));
        return NULL;
    }
    w->s = s;
    w->presence = presence;
    snprintf(w->gid, sizeof(w->gid), "%s", gid);
    w->sess_next = *of_sess(s);
    *of_sess(s) = w;
    DL_APPEND(a->watches, w);
    gw_roster_watch(roster(a), gid, 1);
    ev_timer *t = presence ? &a->sub_timer : &a->watch_timer;
    if (!ev_is_active(t) && a->d.loop) { /* no loop (the fuzz target): no pushes */
        double every = presence ? SUB_PUSH_S : a->d.cfg->receipt_push_ms / 1000.0;
        ev_timer_init(t, presence ? push_subs : push_all, every, every);
        ev_timer_start(a->d.loop, t);
    }
    return w;
}

void gw_watch_set(gw_app *a, gw_sess *s, const pr_req *r, const char *gid)
{
    gw_watch *w = find(s, gid, false);
    if (r->n_mids == 0) {
        if (w)
            remove_watch(a, w);
        return;
    }
    if (!w) {
        if (!(w = add_watch(a, s, r->rid, gid, false)))
            return;
        /* From now on: what moves later is pushed, not where things stand (the client
         * asks `receipts` for that). */
        size_t of;
        gw_roster_moves(roster(a), gid, &w->since, 0, NULL, NULL, &of);
    }
    if (r->n_mids)
        memcpy(w->mids, r->mids, r->n_mids * sizeof(r->mids[0]));
    w->n_mids = r->n_mids;
}

void gw_watch_presence(gw_app *a, gw_sess *s, const char *gid, bool sub)
{
    gw_watch *w = find(s, gid, true);
    if (!sub && w)
        remove_watch(a, w);
    if (sub && !w && (w = add_watch(a, s, PR_NO_RID, gid, true)))
        w->since = gw_presence_seq(gw_hub_presence(a->d.hub)); /* changes after the answer */
}

void gw_watch_closing(gw_app *a, gw_sess *s)
{
    while (*of_sess(s))
        remove_watch(a, *of_sess(s));
}

void gw_watch_free(gw_app *a)
{
    while (a->watches) {
        gw_watch *w = a->watches;
        DL_DELETE(a->watches, w);
        free(w);
    }
    ev_timer_stop(a->d.loop, &a->watch_timer);
    ev_timer_stop(a->d.loop, &a->sub_timer);
}

/* ---- receipts ---------------------------------------------------------------------------- */

/* The cursors that moved, copied out of the roster's lock. */
typedef struct moved {
    gw_cursor *c;
    char (*uids)[PR_MAX_ID + 1];
    size_t n, cap;
    bool oom;
} moved;

static void take_move(void *ud, const gw_cursor *c)
{
    moved *m = ud;
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        gw_cursor *nc = realloc(m->c, cap * sizeof(*nc));
        if (nc)
            m->c = nc;
        char(*nu)[PR_MAX_ID + 1] = nc ? realloc(m->uids, cap * sizeof(*nu)) : NULL;
        if (!nc || !nu) {
            m->oom = true;
            return;
        }
        m->uids = nu;
        m->cap = cap;
    }
    snprintf(m->uids[m->n], sizeof(m->uids[0]), "%s", c->uid);
    m->c[m->n] = *c;
    m->c[m->n].uid = m->uids[m->n];
    m->n++;
}

/* Pushes sb to the watch's session as kind: 0, or -EAGAIN when its budget refused it. */
static int push_to(gw_watch *w, enum gw_push_kind kind, const msgpack_sbuffer *sb)
{
    gw_buf *b = gw_buf_from(sb);
    if (!b)
        return PR_E_NOMEM;
    int rc = gw_out_push(w->s, kind, w->gid, 0, b);
    gw_buf_unref(b);
    return rc;
}

/* One watch's push, if its roster moved since the last. */
static void push_one(gw_app *a, gw_watch *w)
{
    size_t max = a->d.cfg->receipt_list_max, of = 0;
    moved m = {0};
    uint64_t since = w->since;
    if (!gw_roster_moves(roster(a), w->gid, &since, max, take_move, &m, &of))
        return; /* nothing moved (or the roster is being read again) */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc;
    if (of <= max) { /* a small group: who moved to where */
        rc = m.oom ? PR_E_NOMEM : pr_enc_cursors_begin(&sb, gw_cstr(w->gid), m.n);
        for (size_t i = 0; rc == 0 && i < m.n; i++) {
            pr_cursor k = {gw_cstr(m.c[i].uid), m.c[i].ack, m.c[i].read, m.c[i].has_read};
            rc = pr_enc_cursor_entry(&sb, &k);
        }
    } else { /* a large one: the counts of the mids on screen, a `receipts` each */
        rc = pr_enc_batch_begin(&sb, w->n_mids);
        for (size_t i = 0; rc == 0 && i < w->n_mids; i++)
            rc = gw_peers_enc_receipt(a, w->gid, w->mids[i], PR_NO_RID, &sb);
    }
    if (rc == 0 && (of > max || m.n > 0) && (rc = push_to(w, GW_PUSH_WATCH, &sb)) == 0)
        a->figs.receipt_pushes++;
    if (rc == 0)
        w->since = since;
    msgpack_sbuffer_destroy(&sb);
    free(m.c);
    free(m.uids);
}

static void push_all(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    gw_app *a = (gw_app *)((char *)t - offsetof(gw_app, watch_timer));
    bool any = false;
    gw_watch *w, *tmp;
    DL_FOREACH_SAFE (a->watches, w, tmp) {
        if (w->presence)
            continue;
        any = true;
        push_one(a, w);
    }
    if (!any)
        ev_timer_stop(a->d.loop, t);
}

/* ---- presence ---------------------------------------------------------------------------- */

typedef struct online_enc {
    gw_app *a;
    gw_watch *w;
    pr_presence *ch;
    char (*uids)[PR_MAX_ID + 1];
    size_t n, cap;
} online_enc;

static void take_change(void *ud, const char *uid, bool online, uint64_t ms)
{
    online_enc *e = ud;
    if (!gw_roster_has(roster(e->a), e->w->gid, uid))
        return; /* not a member of this group */
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->uids[i], uid) == 0) { /* the latest of a user wins */
            e->ch[i].online = online;
            e->ch[i].last_seen = ms;
            return;
        }
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        void *c = realloc(e->ch, cap * sizeof(*e->ch));
        if (c)
            e->ch = c;
        void *u = c ? realloc(e->uids, cap * sizeof(*e->uids)) : NULL;
        if (!c || !u)
            return;
        e->uids = u;
        e->cap = cap;
    }
    snprintf(e->uids[e->n], sizeof(e->uids[0]), "%s", uid);
    e->ch[e->n] = (pr_presence){{NULL, 0}, online, ms};
    e->n++;
}

static void push_subs(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    gw_app *a = (gw_app *)((char *)t - offsetof(gw_app, sub_timer));
    gw_presence *pr = gw_hub_presence(a->d.hub);
    bool any = false;
    gw_watch *w, *tmp;
    DL_FOREACH_SAFE (a->watches, w, tmp) {
        if (!w->presence)
            continue;
        any = true;
        online_enc e = {a, w, NULL, NULL, 0, 0};
        uint64_t next = gw_presence_changes(pr, w->since, take_change, &e);
        if (!e.n)
            w->since = next;
        if (e.n) {
            msgpack_sbuffer sb;
            msgpack_sbuffer_init(&sb);
            int rc = pr_enc_online_begin(&sb, gw_cstr(w->gid), e.n);
            for (size_t i = 0; rc == 0 && i < e.n; i++) {
                e.ch[i].uid = gw_cstr(e.uids[i]);
                rc = pr_enc_presence_entry(&sb, &e.ch[i]);
            }
            if (rc == 0 && push_to(w, GW_PUSH_PRESENCE, &sb) == 0) {
                a->figs.presence_pushes++;
                w->since = next;
            }
            msgpack_sbuffer_destroy(&sb);
        }
        free(e.ch);
        free(e.uids);
    }
    if (!any)
        ev_timer_stop(a->d.loop, t);
}
