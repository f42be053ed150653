/*
 * Pushes in mid order: each group's messages reach its online sessions here once each
 * and in mid order, whether they come from this gateway's commits (completions) or from
 * another's (the change feed), which interleave in any order.
 *
 * A group keeps `pushed`, the mid up to which everything has been pushed here, and
 * `last_mid`, the highest mid known to be committed (from completions, announcements,
 * pages, joins, resyncs). A message just after `pushed` goes out at once, with any held
 * ones that follow it; one further ahead is held. A group whose last_mid is ahead of
 * pushed has a hole: if it is not filled within HOLE_WAIT_MS (the usual case is only an
 * announcement overtaken by a completion), the missing messages are read from the
 * store, which is the truth, and pushed in order. A hole too large to push is told
 * instead as a `notify {gid, last_mid}` to each online session (the client pulls), as a
 * slow consumer is. Announcements of groups with nobody online here are remembered for
 * a while (`recent`), so that a group that comes online just after one was handled
 * still reads it.
 */
#include "groups_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#define HOLE_WAIT_MS 100 /* how long a hole may wait for the message that fills it */
#define TICK_S 0.05      /* the hole timer, while there is a hole */
#define READ_LIMIT 256   /* messages read at a time to fill a hole */
#define HOLE_MAX 4096    /* past this many missing or held, notify instead */
#define RECENT_N 4096    /* announcements of offline groups remembered (by gid hash) */

/* A message that came before the ones it follows. */
struct gw_held {
    gw_held *next;
    uint64_t mid;
    gw_buf *buf;
    uint64_t except_sid; /* the sending session here (0: none), which gets `sent` instead */
};

struct gw_deliver {
    gw_groups *g;
    gw_group *holes; /* DL through hole_prev/next: groups with last_mid > pushed */
    ev_timer timer;
    struct {
        uint64_t hash, mid;
    } recent[RECENT_N];
};

/* A hole's read of the store. */
typedef struct fill_job {
    gw_job job; /* first */
    gw_deliver *d;
    char gid[PR_MAX_ID + 1];
} fill_job;

static void tick(struct ev_loop *loop, ev_timer *w, int revents);

gw_deliver *gw_deliver_new(gw_groups *g)
{
    gw_deliver *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->g = g;
    ev_timer_init(&d->timer, tick, TICK_S, TICK_S);
    d->timer.data = d;
    return d;
}

gw_groups *gw_deliver_groups(gw_deliver *d)
{
    return d->g;
}

void gw_deliver_free(gw_deliver *d)
{
    if (!d)
        return;
    if (d->g->deps.loop)
        ev_timer_stop(d->g->deps.loop, &d->timer);
    free(d);
}

static uint64_t hash_gid(const char *gid, size_t n)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)gid[i]) * 1099511628211u;
    return h | 1; /* never 0: 0 marks an empty slot */
}

/* ---- pushing ------------------------------------------------------------------------ */

/* A `msg` push; v: the version a message read back from the store has (NULL: as sent). */
static gw_buf *encode(const char *gid, uint64_t mid, uint64_t ts, const pr_version *v,
                      const void *rec, size_t n)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_slice gs = {(const uint8_t *)gid, strlen(gid)};
    gw_buf *b = NULL;
    if (pr_enc_msg_v(&sb, gs, mid, ts, v, (pr_slice){rec, n}) == 0)
        b = gw_buf_from(&sb);
    else
        gw_err("fan-out: cannot encode message %s/%lu", gid, (unsigned long)mid);
    msgpack_sbuffer_destroy(&sb);
    return b;
}

/* One message to every online session of the group but the sender's. */
static void push_now(gw_deliver *d, gw_group *g, uint64_t mid, gw_buf *b, uint64_t except)
{
    g->pushed = mid;
    d->g->figs.pushes++;
    gw_online *o, *tmp;
    HASH_ITER (hh, g->online, o, tmp) {
        gw_seat *s;
        DL_FOREACH (o->user->sessions, s) {
            if (gw_sess_id(s->sess) != except)
                gw_out_push(s->sess, GW_PUSH_MSG, g->gid, mid, b);
        }
    }
}

/* Held messages that now follow `pushed` go out; those behind it are dropped. */
static void release_held(gw_deliver *d, gw_group *g)
{
    while (g->held && g->held->mid <= g->pushed + 1) {
        gw_held *h = g->held;
        g->held = h->next;
        g->n_held--;
        if (h->mid == g->pushed + 1)
            push_now(d, g, h->mid, h->buf, h->except_sid);
        gw_buf_unref(h->buf);
        free(h);
    }
}

static void drop_held(gw_group *g)
{
    while (g->held) {
        gw_held *h = g->held;
        g->held = h->next;
        gw_buf_unref(h->buf);
        free(h);
    }
    g->n_held = 0;
}

/* Keeps the group in the list of holes exactly while it has one. */
static void hole_check(gw_deliver *d, gw_group *g)
{
    struct ev_loop *loop = d->g->deps.loop;
    bool hole = g->last_mid > g->pushed;
    if (hole && !g->in_holes) {
        g->in_holes = true;
        g->hole_since = gw_mono_ms();
        DL_APPEND2(d->holes, g, hole_prev, hole_next);
        if (loop && !ev_is_active(&d->timer))
            ev_timer_start(loop, &d->timer);
    } else if (!hole && g->in_holes) {
        g->in_holes = false;
        DL_DELETE2(d->holes, g, hole_prev, hole_next);
    }
}

/* The hole is too large to push: every online session is told where the group is and
 * pulls (a client fills holes by pull anyway). */
static void notify_all(gw_deliver *d, gw_group *g)
{
    gw_online *o, *tmp;
    HASH_ITER (hh, g->online, o, tmp) {
        gw_seat *s;
        DL_FOREACH (o->user->sessions, s)
            gw_out_notify(s->sess, g->gid, g->last_mid);
    }
    d->g->figs.hole_notifies++;
    g->pushed = g->last_mid;
    drop_held(g);
    hole_check(d, g);
}

static void hold(gw_deliver *d, gw_group *g, uint64_t mid, gw_buf *b, uint64_t except)
{
    gw_held **at = &g->held;
    while (*at && (*at)->mid < mid)
        at = &(*at)->next;
    if (*at && (*at)->mid == mid)
        return; /* held already */
    gw_held *h = malloc(sizeof(*h));
    if (!h)
        return; /* the hole's read brings it */
    *h = (gw_held){*at, mid, gw_buf_ref(b), except};
    *at = h;
    g->n_held++;
    d->g->figs.held++;
    if (g->n_held > HOLE_MAX)
        notify_all(d, g);
}

/* A committed message of g (rec NULL: read it): pushed in mid order, once. */
static void deliver_msg(gw_deliver *d, gw_group *g, uint64_t mid, uint64_t ts, const void *rec,
                        size_t n, gw_sess *except)
{
    if (mid > g->last_mid)
        g->last_mid = mid;
    if (mid > g->pushed && rec && g->n_online) {
        gw_buf *b = encode(g->gid, mid, ts, NULL, rec, n);
        if (b) {
            uint64_t ex = except ? gw_sess_id(except) : 0;
            if (mid == g->pushed + 1) {
                push_now(d, g, mid, b, ex);
                release_held(d, g);
            } else {
                hold(d, g, mid, b, ex);
            }
            gw_buf_unref(b);
        }
    }
    hole_check(d, g);
    if (!rec && g->in_holes)
        g->hole_since = 0; /* announced without its record: read it at the next tick */
}

void gw_deliver_group_saw(gw_deliver *d, gw_group *g, uint64_t last_mid)
{
    if (last_mid > g->last_mid)
        g->last_mid = last_mid;
    hole_check(d, g);
}

/* A message of a group with nobody online here: remembered for a while. */
static void offline(gw_deliver *d, const char *gid, size_t n, uint64_t mid)
{
    uint64_t h = hash_gid(gid, n);
    size_t i = h % RECENT_N;
    if (d->recent[i].hash != h || d->recent[i].mid < mid) {
        d->recent[i].hash = h;
        d->recent[i].mid = mid;
    }
}

void gw_fanout(gw_deliver *d, const char *gid, uint64_t mid, uint64_t ts, const void *rec, size_t n,
               gw_sess *except)
{
    size_t gn = strlen(gid);
    gw_group *g = gw_group_find(d->g->reg, gid, gn);
    if (g)
        deliver_msg(d, g, mid, ts, rec, n, except);
    else
        offline(d, gid, gn, mid);
}

void gw_deliver_saw(gw_deliver *d, const char *gid, uint64_t last_mid)
{
    gw_group *g = gw_group_find(d->g->reg, gid, strlen(gid));
    if (g)
        gw_deliver_group_saw(d, g, last_mid);
}

void gw_deliver_group_new(gw_deliver *d, gw_group *g)
{
    g->pushed = g->last_mid;
    uint64_t h = hash_gid(g->gid, strlen(g->gid));
    size_t i = h % RECENT_N;
    /* Announced while nobody was online here, maybe after the read that brought the
     * group online: a hole then, read from the store (one read, if nothing is missing). */
    if (d->recent[i].hash == h && d->recent[i].mid > g->last_mid)
        g->last_mid = d->recent[i].mid;
    hole_check(d, g);
}

void gw_deliver_group_free(gw_deliver *d, gw_group *g)
{
    drop_held(g);
    g->last_mid = g->pushed = 0;
    hole_check(d, g);
}

/* ---- filling holes from the store ---------------------------------------------------- */

static void filled(gw_job *j)
{
    fill_job *f = (fill_job *)j;
    gw_deliver *d = f->d;
    st_op *op = &j->op;
    gw_group *g = gw_group_find(d->g->reg, f->gid, strlen(f->gid));
    if (g)
        g->filling = false;
    if (op->result != 0 || !g) {
        if (g) /* the store is away: try again after the wait */
            g->hole_since = gw_mono_ms();
        st_page_free(op->page);
        free(f);
        return;
    }
    d->g->figs.hole_reads++;
    size_t n = st_page_count(op->page);
    for (size_t i = 0; i < n; i++) {
        const st_msg *m = st_page_at(op->page, i);
        if (m->mid != g->pushed + 1)
            continue;
        d->g->figs.hole_msgs++;
        if (g->held && g->held->mid == m->mid) {
            release_held(d, g); /* the held one keeps its sender out */
            continue;
        }
        pr_version v = {.ver = m->ver, .ts = m->ver_ts, .recalled = m->recalled};
        gw_buf *b = encode(g->gid, m->mid, m->ts, &v, m->record, m->record_n);
        if (!b)
            break;
        push_now(d, g, m->mid, b, 0);
        gw_buf_unref(b);
        release_held(d, g);
    }
    uint64_t last = st_page_last_mid(op->page);
    bool more = st_page_more(op->page);
    st_page_free(op->page);
    free(f);
    gw_deliver_group_saw(d, g, last);
    if (g->in_holes)
        g->hole_since = more ? 0 : gw_mono_ms();
}

static void fill(gw_deliver *d, gw_group *g)
{
    if (g->last_mid - g->pushed > HOLE_MAX || g->n_online == 0) {
        notify_all(d, g);
        return;
    }
    fill_job *f = calloc(1, sizeof(*f));
    if (!f)
        return;
    f->d = d;
    strcpy(f->gid, g->gid);
    f->job.op = (st_op){.kind = ST_OP_READ_PAGE,
                        .gid = st_id_str(f->gid),
                        .dir = ST_AFTER,
                        .from = g->pushed,
                        .limit = READ_LIMIT,
                        .max_bytes = 4u << 20};
    f->job.complete = filled;
    g->filling = true;
    int rc = gw_bridge_submit(d->g->deps.bridge, &f->job);
    if (rc < 0) {
        g->filling = false;
        g->hole_since = gw_mono_ms();
        free(f);
    }
}

static void tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    gw_deliver *d = w->data;
    uint64_t now = gw_mono_ms();
    gw_group *g, *tmp;
    DL_FOREACH_SAFE2(d->holes, g, tmp, hole_next)
    {
        if (!g->filling && now - g->hole_since >= HOLE_WAIT_MS)
            fill(d, g); /* may complete at once (RocksDB), even leave the list */
    }
    if (!d->holes)
        ev_timer_stop(loop, w);
}

size_t gw_deliver_holes(const gw_deliver *d)
{
    size_t n = 0;
    const gw_group *g;
    DL_FOREACH2(d->holes, g, hole_next)
    n++;
    return n;
}
