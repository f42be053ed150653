/*
 * Who the unread webhook tells (app_internal.h): members whose first unread message has
 * been stored for --webhook-delay.
 *
 * The rule is one line: an event for member M of group G tells of M's first unread
 * message, mid f = ack + 1, once f has been stored for the delay and M's ack is still
 * f - 1. (M's read takes the ack's place once M has sent one: docs/PROTOCOL.md.) Two things make a
 * member's first unread message new, and each is looked at again after the delay:
 *   - a message this node stored (mid f): its members whose ack is f - 1 then are told.
 *     Consecutive messages of one group wait as one range and are looked at in one pass
 *     over the members (a page at a time), which reads the stored acks: whichever node a
 *     member is on, its acks are there.
 *   - an ack a session here made that left messages unread (ack a < last mid): the
 *     member is told of a + 1 if its ack is still a. Without this a member who read half
 *     of a group would never be told of the rest.
 * A member whose first unread message is its own is not told (clients ack what they
 * send once they hold it).
 *
 * What outlives this node is in the store (store.h, the unread webhook's bookkeeping):
 *   - An event is claimed by its id before it is queued for the receiver (TELL_CLAIM):
 *     one claimed before, here or by another node, is not made again. That is what makes
 *     "one event per member and group until it acks" hold across nodes and restarts.
 *   - A range looked at moves its group's swept mark (SWEPT). A range this node stored
 *     and did not look at in time (it died), or one another node stored and did not, is
 *     found in the store by gw_unread_recover.c and looked at here (gw_unread_take_up),
 *     in ranges one after the other.
 * An ack's look stays in memory: if its node dies within the delay, that member is told
 * at its next message instead.
 *
 * What waits is bounded (DUE_MAX entries: more are dropped and counted as missed) and
 * so is what is read at once (SCANS_MAX passes, each a page of members and one page of
 * messages). Events made here lately are not claimed again (RECENT_N ids).
 */
#include "app_internal.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#define DUE_MAX 100000 /* entries waiting for their delay */
#define RANGE_MAX 64   /* consecutive mids of a group looked at in one pass */
#define MERGE_MS 200   /* ... stored within this long of the range's first */
#define SCANS_MAX 16   /* passes under way at once */
#define MEMBERS_PAGE 1000
#define RECENT_N 16384 /* ids of the events made lately (direct-mapped) */
#define RETRIES 5      /* a pass the store failed is tried again, a second apart */
#define STARTS_MAX                                                                                 \
    64 /* passes started per look at the due list: RocksDB answers at                              \
        * once, so a pass runs whole inside its start; this bounds what                            \
        * one tick does on the service thread */
#define TICK_S 0.1

/* What waits for its delay: messages lo..hi of gid, or uid's ack lo of gid. */
typedef struct due {
    struct due *next;
    uint64_t at_ms;    /* monotonic: look at it then */
    uint64_t first_ms; /* when the range's first message was stored */
    bool ack;
    bool taken_up; /* a range from the store (gw_unread_take_up): the next one follows */
    unsigned tries;
    uint64_t lo, hi;
    uint64_t to;         /* taken up: the last mid of all its ranges */
    uint64_t sweep_from; /* the first mid its SWEPT moves the mark from */
    char gid[PR_MAX_ID + 1];
    char uid[PR_MAX_ID + 1]; /* ack: the member */
} due;

/* A member to be told, once its first unread message is read. */
typedef struct cand {
    char uid[PR_MAX_ID + 1];
    uint64_t ack;
} cand;

enum pass_phase { P_MEMBERS, P_MEMBER, P_MESSAGES, P_CLAIM, P_SWEPT };

/* An event made, to be claimed before it is queued. */
typedef struct made {
    json_t *ev;
    char *text; /* its JSON, kept by the store until the receiver took it */
    char id[33];
    uint64_t key; /* for the recent table */
} made;

/* One pass under way: a store job at a time. */
typedef struct pass {
    gw_job job; /* first: the completion finds the pass from its job */
    gw_unread *u;
    due *d;
    enum pass_phase phase;
    char after[ST_MAX_ID + 1]; /* members: the cursor ("" from the first) */
    bool more;                 /* members after this page */
    cand *c;
    size_t n;
    uint64_t last_mid;
    made *m; /* this page's events (room for n) */
    st_tell *tells;
    size_t n_made;
} pass;

struct gw_unread {
    gw_app *a;
    due *head, *tail;
    size_t n_due;
    unsigned passes;
    bool popping; /* pop_due is running: a pass that ends inside it does not recurse */
    ev_timer timer;
    uint64_t recent[RECENT_N];
};

gw_unread *gw_unread_new(gw_app *a)
{
    gw_unread *u = calloc(1, sizeof(*u));
    if (!u)
        return NULL;
    u->a = a;
    return u;
}

void gw_unread_free(gw_unread *u)
{
    if (!u)
        return;
    ev_timer_stop(u->a->d.loop, &u->timer);
    due *d, *tmp;
    LL_FOREACH_SAFE (u->head, d, tmp)
        free(d);
    /* No pass is under way: the server frees this after the store closed and every
     * completion ran. */
    free(u);
}

static void tick(struct ev_loop *loop, ev_timer *w, int revents);

static void enqueue(gw_unread *u, due *d)
{
    if (u->tail)
        u->tail->next = d;
    else
        u->head = d;
    u->tail = d;
    d->next = NULL;
    u->n_due++;
    if (!ev_is_active(&u->timer)) {
        ev_timer_init(&u->timer, tick, TICK_S, TICK_S);
        ev_timer_start(u->a->d.loop, &u->timer);
    }
}

static due *due_new(gw_unread *u, const char *gid, uint64_t at_ms)
{
    if (u->n_due >= DUE_MAX) {
        u->a->figs.webhook_missed++;
        return NULL;
    }
    due *d = calloc(1, sizeof(*d));
    if (!d) {
        u->a->figs.webhook_missed++;
        return NULL;
    }
    snprintf(d->gid, sizeof(d->gid), "%s", gid);
    d->at_ms = at_ms;
    d->first_ms = at_ms;
    return d;
}

void gw_unread_stored(gw_unread *u, const char *gid, uint64_t mid)
{
    if (!u)
        return;
    uint64_t at = gw_mono_ms() + u->a->d.cfg->webhook_delay_ms;
    due *t = u->tail;
    /* The next message of the range at the tail: it waits with it (a little longer). */
    if (t && !t->ack && t->hi + 1 == mid && t->hi - t->lo + 1 < RANGE_MAX &&
        at - t->first_ms < MERGE_MS && strcmp(t->gid, gid) == 0) {
        t->hi = mid;
        t->at_ms = at;
        return;
    }
    due *d = due_new(u, gid, at);
    if (!d)
        return;
    d->lo = d->hi = mid;
    enqueue(u, d);
}

void gw_unread_acked(gw_unread *u, const char *gid, const char *uid, uint64_t ack,
                     uint64_t last_mid)
{
    if (!u || ack >= last_mid)
        return;
    due *d = due_new(u, gid, gw_mono_ms() + u->a->d.cfg->webhook_delay_ms);
    if (!d)
        return;
    d->ack = true;
    d->lo = d->hi = ack;
    snprintf(d->uid, sizeof(d->uid), "%s", uid);
    enqueue(u, d);
}

/* Messages lo..hi of gid, not looked at in time: looked at now, RANGE_MAX at a time, each
 * range once the one before is done. The first moves the swept mark from mark. */
void gw_unread_take_up(gw_unread *u, const char *gid, uint64_t lo, uint64_t hi, uint64_t mark)
{
    if (!u || lo > hi)
        return;
    due *d = due_new(u, gid, gw_mono_ms());
    if (!d)
        return;
    d->taken_up = true;
    d->lo = lo;
    d->to = hi;
    d->hi = hi - lo + 1 > RANGE_MAX ? lo + RANGE_MAX - 1 : hi;
    d->sweep_from = mark + 1; /* what lies between the mark and lo is older than the span */
    u->a->figs.webhook_taken_up++;
    enqueue(u, d);
}

size_t gw_unread_waiting(const gw_unread *u)
{
    return u ? u->n_due + u->passes : 0;
}

/* ---- events ------------------------------------------------------------------------- */

/* The event's id: (gid, uid, first unread mid), hashed, in hex; its first 8 bytes as a
 * number for the recent table. */
static uint64_t event_id(const char *gid, const char *uid, uint64_t first, char hex[33])
{
    char buf[2 * PR_MAX_ID + 32];
    int n = snprintf(buf, sizeof(buf), "%s%c%s%c%llu", gid, 0, uid, 0, (unsigned long long)first);
    unsigned char md[32];
    unsigned int len = sizeof(md);
    EVP_Digest(buf, (size_t)n, md, &len, EVP_sha256(), NULL);
    uint64_t k = 0;
    for (int i = 0; i < 16; i++) {
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (i < 8)
            k = k << 8 | md[i];
    }
    return k;
}

/* The event of candidate c, whose first unread message is m, into the pass's list of
 * events to claim; nothing for its own message or one made here lately. */
static void make_event(pass *p, const cand *c, uint64_t last_mid, const st_msg *m)
{
    gw_unread *u = p->u;
    gw_app *a = u->a;
    pr_message r;
    if (pr_dec_record(a->d.dec, m->record, m->record_n, &r) != 0)
        return; /* cannot happen for what the gateway stored */
    if (r.from.n == strlen(c->uid) && memcmp(r.from.p, c->uid, r.from.n) == 0)
        return; /* its own message */
    made *e = &p->m[p->n_made];
    e->key = event_id(p->d->gid, c->uid, m->mid, e->id);
    if (u->recent[e->key % RECENT_N] == e->key)
        return; /* made (or found claimed) here lately */
    json_t *msg = gw_json_message(m->mid, m->ts, &r, a->d.cfg->webhook_body);
    e->ev = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:I}", "id", e->id, "type",
                      "unread", "gid", p->d->gid, "uid", c->uid, "first_unread", (json_int_t)m->mid,
                      "unread", (json_int_t)(last_mid > c->ack ? last_mid - c->ack : 0), "last_mid",
                      (json_int_t)last_mid, "message", msg, "ts", (json_int_t)gw_now_ms());
    e->text = e->ev ? json_dumps(e->ev, JSON_COMPACT) : NULL;
    if (!e->text) {
        json_decref(e->ev);
        a->figs.webhook_missed++;
        return;
    }
    p->tells[p->n_made] =
        (st_tell){.id = st_id_str(e->id), .event = e->text, .event_n = strlen(e->text)};
    p->n_made++;
}

/* The page's events were claimed (or not): those claimed here go to the receiver. */
static void take_claims(pass *p, bool ok)
{
    gw_unread *u = p->u;
    gw_app *a = u->a;
    for (size_t i = 0; i < p->n_made; i++) {
        made *e = &p->m[i];
        if (ok && p->tells[i].claimed) {
            a->figs.webhook_events++;
            u->recent[e->key % RECENT_N] = e->key;
            gw_webhook_push(a->webhook, e->ev); /* takes it; dropped if full (counted) */
        } else {
            if (ok) { /* made before, here or by another node: once is enough */
                a->figs.webhook_claimed_before++;
                u->recent[e->key % RECENT_N] = e->key;
            }
            json_decref(e->ev);
        }
        free(e->text);
    }
    p->n_made = 0;
}

/* ---- passes ------------------------------------------------------------------------- */

static void pass_step(gw_job *jb);

static void submit(pass *p)
{
    p->job.complete = pass_step;
    int rc = gw_bridge_submit(p->u->a->d.bridge, &p->job);
    if (rc < 0) { /* refused (closing): as a failed read */
        p->job.op.result = rc;
        pass_step(&p->job);
    }
}

/* The pass's op, cleared, for its next request of kind in phase ph. */
static st_op *next_op(pass *p, enum st_op_kind kind, enum pass_phase ph)
{
    st_op *op = &p->job.op;
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->gid = st_id_str(p->d->gid);
    p->phase = ph;
    return op;
}

static void read_members(pass *p)
{
    st_op *op = next_op(p, ST_OP_READ_MEMBERS, P_MEMBERS);
    op->uid = (st_id){p->after, strlen(p->after)};
    op->limit = MEMBERS_PAGE;
    submit(p);
}

static void read_member(pass *p)
{
    next_op(p, ST_OP_READ_GROUP, P_MEMBER)->uid = st_id_str(p->d->uid);
    submit(p);
}

/* The messages the candidates have first unread: lo..hi, or ack + 1 for an ack's. */
static void read_messages(pass *p)
{
    st_op *op = next_op(p, ST_OP_READ_PAGE, P_MESSAGES);
    op->dir = ST_AFTER;
    op->from = p->d->ack ? p->d->lo : p->d->lo - 1;
    op->limit = p->d->ack ? 1 : (size_t)(p->d->hi - p->d->lo + 1);
    submit(p);
}

static void claim(pass *p)
{
    st_op *op = next_op(p, ST_OP_TELL_CLAIM, P_CLAIM);
    op->tells = p->tells;
    op->n_tells = p->n_made;
    submit(p);
}

/* The range was looked at: its group's mark moves (from where it is only). */
static void sweep(pass *p)
{
    st_op *op = next_op(p, ST_OP_SWEPT, P_SWEPT);
    op->from = p->d->sweep_from ? p->d->sweep_from : p->d->lo;
    op->upto = p->d->hi;
    submit(p);
}

static void pop_due(gw_unread *u);

static void pass_end(pass *p, bool failed)
{
    gw_unread *u = p->u;
    due *d = p->d;
    take_claims(p, false); /* a failed claim: nothing of it goes */
    if (failed && ++d->tries <= RETRIES) {
        /* Again a second later, or after the delay if that is shorter: the list stays
         * in time order only if nothing in it waits longer than the delay. */
        unsigned delay = u->a->d.cfg->webhook_delay_ms, pause = delay < 1000 ? delay : 1000;
        d->at_ms = gw_mono_ms() + pause;
        enqueue(u, d);
        d = NULL;
    } else if (failed) {
        u->a->figs.webhook_missed++;
    } else if (d->taken_up && d->hi < d->to) {
        /* The next range of what was taken up, from where this one ended. */
        d->lo = d->hi + 1;
        d->hi = d->to - d->lo + 1 > RANGE_MAX ? d->lo + RANGE_MAX - 1 : d->to;
        d->sweep_from = 0;
        d->tries = 0;
        d->at_ms = gw_mono_ms();
        enqueue(u, d);
        d = NULL;
    }
    free(d);
    free(p->c);
    free(p->m);
    free(p->tells);
    free(p);
    u->passes--;
    pop_due(u);
}

/* A page of candidates is done: the next page of members, or the end of the pass. */
static void page_done(pass *p)
{
    if (!p->d->ack && p->more)
        read_members(p);
    else if (!p->d->ack)
        sweep(p);
    else
        pass_end(p, false);
}

static void pass_step(gw_job *jb)
{
    pass *p = (pass *)jb;
    st_op *op = &jb->op;
    gw_unread *u = p->u;
    if (p->phase == P_SWEPT) { /* failed or not: a mark left behind is looked at again */
        pass_end(p, false);
        return;
    }
    if (op->result != 0 && op->result != ST_ENOGROUP && op->result != ST_ENOTMEMBER) {
        u->a->figs.webhook_read_errors++;
        pass_end(p, true);
        return;
    }
    if (op->result != 0) { /* the group or the membership is gone: nobody to tell */
        pass_end(p, false);
        return;
    }
    switch (p->phase) {
    case P_MEMBERS: {
        p->n = 0;
        p->last_mid = st_members_last_mid(op->members);
        p->more = st_members_more(op->members);
        for (size_t i = 0; i < st_members_count(op->members); i++) {
            st_member m = st_members_at(op->members, i);
            /* The cursor moves on whatever the member (a uid longer than the protocol's
             * ids, written by another tool, is passed over, not told). */
            if (i + 1 == st_members_count(op->members) && m.uid.n <= ST_MAX_ID) {
                memcpy(p->after, m.uid.p, m.uid.n);
                p->after[m.uid.n] = 0;
            }
            /* The member's cursor: its read once it has sent one, else its ack. */
            uint64_t seen = m.has_read ? m.read : m.ack;
            if (m.uid.n > PR_MAX_ID || seen + 1 < p->d->lo || seen + 1 > p->d->hi)
                continue;
            cand *c = &p->c[p->n++];
            memcpy(c->uid, m.uid.p, m.uid.n);
            c->uid[m.uid.n] = 0;
            c->ack = seen;
        }
        st_members_free(op->members);
        if (p->n)
            read_messages(p);
        else
            page_done(p);
        return;
    }
    case P_MEMBER:
        /* Still where it acked (or the ack is not written yet), and messages after it. */
        if ((op->has_read ? op->read : op->ack) > p->d->lo || op->last_mid <= p->d->lo) {
            pass_end(p, false);
            return;
        }
        snprintf(p->c[0].uid, sizeof(p->c[0].uid), "%s", p->d->uid);
        p->c[0].ack = p->d->lo;
        p->n = 1;
        p->last_mid = op->last_mid;
        read_messages(p);
        return;
    case P_MESSAGES: {
        uint64_t last = st_page_last_mid(op->page);
        if (last < p->last_mid)
            last = p->last_mid;
        size_t k = st_page_count(op->page);
        p->n_made = 0;
        for (size_t i = 0; i < p->n; i++)
            for (size_t j = 0; j < k; j++) {
                const st_msg *m = st_page_at(op->page, j);
                if (m->mid == p->c[i].ack + 1) {
                    make_event(p, &p->c[i], last, m);
                    break;
                }
            }
        st_page_free(op->page);
        if (p->n_made)
            claim(p);
        else
            page_done(p);
        return;
    }
    case P_CLAIM:
        take_claims(p, true);
        page_done(p);
        return;
    case P_SWEPT: return; /* above */
    }
}

static void start_pass(gw_unread *u, due *d)
{
    pass *p = calloc(1, sizeof(*p));
    size_t room = d->ack ? 1 : MEMBERS_PAGE;
    if (p) {
        p->c = calloc(room, sizeof(cand));
        p->m = calloc(room, sizeof(made));
        p->tells = calloc(room, sizeof(st_tell));
    }
    if (!p || !p->c || !p->m || !p->tells) {
        if (p) {
            free(p->c);
            free(p->m);
            free(p->tells);
        }
        free(p);
        free(d);
        u->a->figs.webhook_missed++;
        return;
    }
    p->u = u;
    p->d = d;
    u->passes++;
    u->a->figs.webhook_passes++;
    if (d->ack)
        read_member(p);
    else
        read_members(p);
}

/* Starts the passes that are due, as many as may run. */
static void pop_due(gw_unread *u)
{
    if (u->popping)
        return;
    u->popping = true;
    uint64_t now = gw_mono_ms();
    unsigned started = 0;
    while (u->head && u->head->at_ms <= now && u->passes < SCANS_MAX && started++ < STARTS_MAX) {
        due *d = u->head;
        u->head = d->next;
        if (!u->head)
            u->tail = NULL;
        u->n_due--;
        start_pass(u, d);
    }
    u->popping = false;
    if (!u->head)
        ev_timer_stop(u->a->d.loop, &u->timer);
}

static void tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    pop_due((gw_unread *)((char *)w - offsetof(gw_unread, timer)));
}
