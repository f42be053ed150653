/*
 * Who is online, over the cluster (gw_cluster.h), and when each user was last seen.
 *
 * This process's users come from the hub's count of sessions: a user's first session
 * here makes it online here, its last one's end offline (gw_presence_local). The other
 * nodes' come over the store's signals (store.h: nothing stored, a NOTIFY each):
 *   - `o UID 1` / `o UID 0 TS` when a user comes online on a node or goes;
 *   - `b N` every BEAT_MS from every node: alive, with N users online. A node that says
 *     nothing for EXPIRE_MS is gone (killed, cut off): its users go offline here, with
 *     the time it was last heard as their last_seen (written to the store by whichever
 *     node notices first: the greater wins);
 *   - a node's whole list (`O` parts) when asked (`q`): by every node when this one's
 *     listener connects (it knows nobody yet), and by this node of another whose beat's
 *     count disagrees with what it has heard (a signal lost).
 * A user is online while any place counts it (here, or a node still heard).
 *
 * Every change to who is online (a user online nowhere before, or online nowhere now)
 * goes into a ring that the service threads read once a second for their subscribed
 * sessions (gw_presence_changes). last_seen: written to the store when a user comes
 * online here and when it goes (so that after a crash it is at least the sign-in's).
 *
 * Signals and last_seen writes are ops of their own, submitted to the store from
 * whichever thread: a small op with a completion that frees it.
 */
#include "gw_cluster.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BEAT_MS 2000
#define EXPIRE_MS 6000         /* a node not heard this long is gone */
#define RING 65536             /* changes kept for the threads' subscribers */
#define LINES_MAX 7000         /* bytes of signal lines sent as one */
#define LISTING_PARTS_MAX 4096 /* parts of one listing (4096 x ~100 users) */
#define ASK_AGAIN_MS 5000      /* a node asked to list is not asked again before this */

/* A user online somewhere, and in how many places (here counts as one). */
typedef struct puser {
    UT_hash_handle hh;
    unsigned places;
    char uid[PR_MAX_ID + 1];
} puser;

/* A user in a set (this process's, a node's). */
typedef struct member {
    UT_hash_handle hh;
    char uid[PR_MAX_ID + 1];
} member;

/* Another node, as heard. */
typedef struct origin {
    UT_hash_handle hh;
    uint64_t id;
    uint64_t heard_ms; /* wall clock */
    member *users;
    size_t n;
    /* A listing coming in (replaces users once every part is in). */
    uint64_t list;
    uint64_t parts, got;
    uint8_t *have; /* a part came (LISTING_PARTS_MAX) */
    member *staging;
    uint64_t asked_ms; /* when it was last asked to list */
} origin;

typedef struct change {
    uint64_t seq;
    bool online;
    uint64_t ms;
    char uid[PR_MAX_ID + 1];
} change;

struct gw_presence {
    pthread_mutex_t mu;
    st_store *store; /* NULL: not opened yet, or closing: nothing is sent */
    uint64_t origin; /* this process's store's (what other nodes' signals call it) */
    puser *users;    /* online anywhere */
    member *local;   /* online here */
    size_t n_local;
    origin *origins;
    change *ring;
    uint64_t seq; /* changes so far */
    char lines[LINES_MAX + 1024];
    size_t lines_n;
    uint64_t beat_ms;  /* wall clock: the last beat */
    uint64_t listings; /* this node's listings so far */
    bool ask_all;      /* list-everyone asked at the next tick */
    uint64_t ask_one;  /* a node to ask at the next tick (0: none) */
    gw_presence_figs figs;
};

gw_presence *gw_presence_new(void)
{
    gw_presence *p = calloc(1, sizeof(*p));
    if (!p || !(p->ring = calloc(RING, sizeof(*p->ring)))) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

static void set_clear(member **set)
{
    GW_HASH_FREE_ALL(*set);
}

static void origin_free(gw_presence *p, origin *o)
{
    HASH_DEL(p->origins, o);
    set_clear(&o->users);
    set_clear(&o->staging);
    free(o->have);
    free(o);
}

void gw_presence_free(gw_presence *p)
{
    if (!p)
        return;
    origin *o, *otmp;
    HASH_ITER (hh, p->origins, o, otmp)
        origin_free(p, o);
    set_clear(&p->local);
    GW_HASH_FREE_ALL(p->users);
    free(p->ring);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ---- to the store ------------------------------------------------------------------------- */

/* A small op of its own, freed by its completion. */
typedef struct own_op {
    st_op op;
    char bytes[]; /* the signal's lines, or the seen entries' uids */
} own_op;

static void own_done(st_op *op)
{
    free(op);
}

static void submit(gw_presence *p, own_op *o)
{
    o->op.done = own_done;
    if (!p->store || st_submit(p->store, &o->op) != 0)
        free(o);
}

/* Under mu: the lines gathered go as one signal. */
static void flush_lines(gw_presence *p)
{
    if (!p->lines_n)
        return;
    own_op *o = calloc(1, sizeof(*o) + p->lines_n);
    if (o) {
        memcpy(o->bytes, p->lines, p->lines_n);
        o->op = (st_op){.kind = ST_OP_SIGNAL, .record = o->bytes, .record_n = p->lines_n};
        submit(p, o);
        p->figs.signals++;
    }
    p->lines_n = 0;
}

/* Under mu: one line for the next signal (sent at the tick, or at once when full). */
static void line(gw_presence *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(gw_presence *p, const char *fmt, ...)
{
    char l[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l + 1, sizeof(l) - 1, fmt, ap);
    va_end(ap);
    if (n <= 0 || (size_t)n >= sizeof(l) - 1)
        return;
    l[0] = '\n';
    if (p->lines_n + (size_t)n + 1 > LINES_MAX)
        flush_lines(p);
    memcpy(p->lines + p->lines_n, l, (size_t)n + 1);
    p->lines_n += (size_t)n + 1;
}

/* uids' last_seen moves to ms in the store. */
static void write_seen(gw_presence *p, const char *const *uids, size_t n, uint64_t ms)
{
    if (!n || !p->store)
        return;
    own_op *o = calloc(1, sizeof(*o) + n * (sizeof(st_seen) + PR_MAX_ID + 1));
    if (!o)
        return;
    st_seen *seen = (st_seen *)o->bytes;
    char *ids = o->bytes + n * sizeof(st_seen);
    for (size_t i = 0; i < n; i++) {
        char *id = ids + i * (PR_MAX_ID + 1);
        snprintf(id, PR_MAX_ID + 1, "%s", uids[i]);
        seen[i] = (st_seen){st_id_str(id), ms};
    }
    o->op = (st_op){.kind = ST_OP_SEEN, .seen = seen, .n_seen = n};
    submit(p, o);
}

void gw_presence_set_store(gw_presence *p, st_store *s)
{
    pthread_mutex_lock(&p->mu);
    if (!s)
        flush_lines(p); /* what was to be told goes before the store closes */
    p->store = s;
    if (s)
        p->origin = st_origin(s);
    pthread_mutex_unlock(&p->mu);
}

/* ---- places ------------------------------------------------------------------------------ */

/* Under mu: a change to the ring. */
static void record(gw_presence *p, const char *uid, bool online, uint64_t ms)
{
    change *c = &p->ring[p->seq % RING];
    c->seq = ++p->seq;
    c->online = online;
    c->ms = ms;
    snprintf(c->uid, sizeof(c->uid), "%s", uid);
}

/* Under mu: one more (delta 1) or one fewer (-1) place where uid is online; true when
 * that changed whether it is online anywhere (recorded). */
static bool place(gw_presence *p, const char *uid, int delta, uint64_t ms)
{
    puser *u = NULL;
    HASH_FIND_STR(p->users, uid, u);
    if (delta > 0) {
        if (!u) {
            if (!(u = calloc(1, sizeof(*u))))
                return false;
            snprintf(u->uid, sizeof(u->uid), "%s", uid);
            HASH_ADD_STR(p->users, uid, u);
        }
        if (u->places++ == 0) {
            record(p, uid, true, ms);
            return true;
        }
        return false;
    }
    if (!u || u->places == 0)
        return false;
    if (--u->places > 0)
        return false;
    HASH_DEL(p->users, u);
    free(u);
    record(p, uid, false, ms);
    return true;
}

/* Under mu: uid into a set (true if it was not there). */
static bool set_add(member **set, const char *uid)
{
    member *m = NULL;
    HASH_FIND_STR(*set, uid, m);
    if (m || !(m = calloc(1, sizeof(*m))))
        return false;
    snprintf(m->uid, sizeof(m->uid), "%s", uid);
    HASH_ADD_STR(*set, uid, m);
    return true;
}

static bool set_del(member **set, const char *uid)
{
    member *m = NULL;
    HASH_FIND_STR(*set, uid, m);
    if (!m)
        return false;
    HASH_DEL(*set, m);
    free(m);
    return true;
}

/* ---- this process ------------------------------------------------------------------------- */

void gw_presence_local(gw_presence *p, const char *uid, bool online)
{
    uint64_t now = gw_now_ms();
    pthread_mutex_lock(&p->mu);
    bool changed = online ? set_add(&p->local, uid) : set_del(&p->local, uid);
    if (changed) {
        p->n_local += online ? 1 : -1;
        place(p, uid, online ? 1 : -1, now);
        if (online)
            line(p, "o %s 1", uid);
        else
            line(p, "o %s 0 %" PRIu64, uid, now);
        const char *one[1] = {uid};
        write_seen(p, one, 1, now);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Under mu: this node's whole list, as signals of parts. */
static void list_all(gw_presence *p)
{
    flush_lines(p);
    uint64_t list = ++p->listings;
    /* The parts first (each up to LINES_MAX bytes), then sent with their count. */
    size_t parts = 0, bytes = 0;
    member *m, *tmp;
    HASH_ITER (hh, p->local, m, tmp) {
        size_t n = strlen(m->uid) + 1;
        if (bytes == 0 || bytes + n > LINES_MAX - 64) {
            parts++;
            bytes = 0;
        }
        bytes += n;
    }
    if (parts == 0)
        parts = 1;
    if (parts > LISTING_PARTS_MAX)
        return; /* too many to list: the others know them from the deltas */
    char *buf = malloc(LINES_MAX + 64);
    if (!buf)
        return;
    size_t part = 0, n = 0;
    n = (size_t)snprintf(buf, LINES_MAX, "\nO %" PRIu64 " %zu %zu", list, part, parts);
    HASH_ITER (hh, p->local, m, tmp) {
        size_t un = strlen(m->uid) + 1;
        if (n + un > LINES_MAX - 64 + 32) {
            memcpy(p->lines, buf, n);
            p->lines_n = n;
            flush_lines(p);
            part++;
            n = (size_t)snprintf(buf, LINES_MAX, "\nO %" PRIu64 " %zu %zu", list, part, parts);
        }
        buf[n++] = ' ';
        memcpy(buf + n, m->uid, un - 1);
        n += un - 1;
    }
    memcpy(p->lines, buf, n);
    p->lines_n = n;
    flush_lines(p);
    free(buf);
    p->figs.listings++;
}

/* ---- the other nodes ----------------------------------------------------------------------- */

static origin *origin_of(gw_presence *p, uint64_t id)
{
    origin *o = NULL;
    HASH_FIND(hh, p->origins, &id, sizeof(id), o);
    if (!o && (o = calloc(1, sizeof(*o)))) {
        o->id = id;
        HASH_ADD(hh, p->origins, id, sizeof(o->id), o);
    }
    return o;
}

/* Under mu: the node's users go (it is gone, or a listing replaced them). */
static void origin_forget(gw_presence *p, origin *o, uint64_t ms, const char **gone, size_t *n_gone,
                          size_t room)
{
    member *m, *tmp;
    HASH_ITER (hh, o->users, m, tmp) {
        if (place(p, m->uid, -1, ms) && gone && *n_gone < room)
            gone[(*n_gone)++] = m->uid; /* valid until m is freed: used before */
    }
}

/* Under mu: a complete listing replaces what the node's users were. */
static void listing_done(gw_presence *p, origin *o, uint64_t now)
{
    member *m, *tmp;
    HASH_ITER (hh, o->staging, m, tmp) /* the new ones first: nobody flickers offline */
        if (set_add(&o->users, m->uid))
            place(p, m->uid, 1, now);
    HASH_ITER (hh, o->users, m, tmp) {
        member *s = NULL;
        HASH_FIND_STR(o->staging, m->uid, s);
        if (!s) {
            place(p, m->uid, -1, now);
            HASH_DEL(o->users, m);
            free(m);
        }
    }
    o->n = HASH_COUNT(o->users);
    set_clear(&o->staging);
    free(o->have);
    o->have = NULL;
    o->list = o->parts = o->got = 0;
}

void gw_presence_heard(gw_presence *p, const st_change *ch)
{
    char uid[PR_MAX_ID + 1];
    if (!gw_id_copy(uid, ch->uid.p, ch->uid.n))
        return;
    uint64_t now = gw_now_ms();
    pthread_mutex_lock(&p->mu);
    if (ch->kind == ST_CH_RESYNC) { /* the listener connected: it knows nobody yet */
        p->ask_all = true;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    origin *o = NULL;
    if ((ch->kind == ST_CH_ONLINE || ch->kind == ST_CH_BEAT || ch->kind == ST_CH_LISTED ||
         ch->kind == ST_CH_ASK) &&
        ch->origin && ch->origin != p->origin)
        o = origin_of(p, ch->origin);
    if (!o) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    o->heard_ms = now;
    switch (ch->kind) {
    case ST_CH_ASK:
        if (ch->ack == 0 || ch->ack == p->origin)
            list_all(p);
        break;
    case ST_CH_ONLINE:
        if (ch->ack) {
            if (set_add(&o->users, uid))
                place(p, uid, 1, now);
            if (o->have)
                set_add(&o->staging, uid);
        } else {
            if (set_del(&o->users, uid))
                place(p, uid, -1, ch->ts ? ch->ts : now);
            if (o->have)
                set_del(&o->staging, uid);
        }
        o->n = HASH_COUNT(o->users);
        break;
    case ST_CH_BEAT:
        /* Its count disagrees with what was heard (a signal lost, or this node is new to
         * it): ask it for its list, not too often. */
        if (ch->ack != o->n && !o->have && now - o->asked_ms > ASK_AGAIN_MS) {
            o->asked_ms = now;
            p->ask_one = o->id;
        }
        break;
    case ST_CH_LISTED:
        if (ch->ts == 0 || ch->ts > LISTING_PARTS_MAX || ch->ack >= ch->ts)
            break;
        if (o->list != ch->mid || !o->have) { /* a new listing: staged from nothing */
            set_clear(&o->staging);
            free(o->have);
            o->list = ch->mid;
            o->parts = ch->ts;
            o->got = 0;
            if (!(o->have = calloc(ch->ts, 1)))
                break;
        }
        if (!o->have[ch->ack]) {
            o->have[ch->ack] = 1;
            o->got++;
        }
        if (uid[0])
            set_add(&o->staging, uid);
        break;
    default: break;
    }
    pthread_mutex_unlock(&p->mu);
}

void gw_presence_heard_end(gw_presence *p)
{
    uint64_t now = gw_now_ms();
    pthread_mutex_lock(&p->mu);
    origin *o, *tmp;
    /* A payload is whole: a listing whose last part came in it is complete. */
    HASH_ITER (hh, p->origins, o, tmp)
        if (o->have && o->got == o->parts)
            listing_done(p, o, now);
    pthread_mutex_unlock(&p->mu);
}

void gw_presence_tick(gw_presence *p)
{
    uint64_t now = gw_now_ms();
    const char *gone[1024];
    size_t n_gone = 0;
    pthread_mutex_lock(&p->mu);
    if (!p->store) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    if (p->ask_all) {
        p->ask_all = false;
        line(p, "q 0");
    }
    if (p->ask_one) {
        line(p, "q %" PRIu64, p->ask_one);
        p->ask_one = 0;
    }
    if (now - p->beat_ms >= BEAT_MS) {
        p->beat_ms = now;
        line(p, "b %zu", p->n_local);
    }
    flush_lines(p);
    /* Nodes gone quiet: their users go offline, last seen when the node was last heard. */
    origin *o, *tmp;
    HASH_ITER (hh, p->origins, o, tmp) {
        if (now - o->heard_ms < EXPIRE_MS)
            continue;
        n_gone = 0;
        origin_forget(p, o, o->heard_ms, gone, &n_gone, sizeof(gone) / sizeof(gone[0]));
        write_seen(p, gone, n_gone, o->heard_ms);
        p->figs.nodes_gone++;
        origin_free(p, o);
    }
    pthread_mutex_unlock(&p->mu);
}

/* ---- what the threads ask ------------------------------------------------------------------ */

bool gw_presence_online(gw_presence *p, const char *uid)
{
    pthread_mutex_lock(&p->mu);
    puser *u = NULL;
    HASH_FIND_STR(p->users, uid, u);
    pthread_mutex_unlock(&p->mu);
    return u != NULL;
}

uint64_t gw_presence_changes(gw_presence *p, uint64_t since,
                             void (*fn)(void *ud, const char *uid, bool online, uint64_t ms),
                             void *ud)
{
    pthread_mutex_lock(&p->mu);
    uint64_t from = since;
    if (p->seq > RING && from < p->seq - RING)
        from = p->seq - RING; /* fell behind the ring: those changes are lost to it */
    for (uint64_t s = from + 1; s <= p->seq; s++) {
        change *c = &p->ring[(s - 1) % RING];
        fn(ud, c->uid, c->online, c->ms);
    }
    uint64_t now = p->seq;
    pthread_mutex_unlock(&p->mu);
    return now;
}

uint64_t gw_presence_seq(gw_presence *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t s = p->seq;
    pthread_mutex_unlock(&p->mu);
    return s;
}

void gw_presence_typing(gw_presence *p, const char *gid, const char *uid)
{
    pthread_mutex_lock(&p->mu);
    if (p->store) {
        /* At once, not at the tick: typing is stale in a few seconds. */
        line(p, "t %s %s", gid, uid);
        flush_lines(p);
    }
    pthread_mutex_unlock(&p->mu);
}

void gw_presence_figures(gw_presence *p, gw_presence_figs *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->figs;
    out->online = HASH_COUNT(p->users);
    out->nodes = HASH_COUNT(p->origins);
    pthread_mutex_unlock(&p->mu);
}
