/*
 * Who is in a group and where their cursors are (gw_cluster.h): for receipts ("read by
 * 7 of 12") and presence, over the whole process.
 *
 * A roster holds every member of one group with its two cursors, and two rank multisets
 * (core/gw_rank.c) of them: the acks (who has the message: `delivered`) and the reads
 * (who has seen it; a member's ack until it sends a read). "How many have read mid M" is
 * then one walk down a tree, O(log n), whatever the group's size; no member is scanned
 * per question. Only the groups someone here asks about or watches have a roster; one
 * nobody used for IDLE_MS goes.
 *
 * A roster is read from the store, a page of members at a time, by the first thread
 * that needs it (gw_roster_begin says READ); the others wait for it (WAIT). Changes that
 * come meanwhile (every commit of this process, and the other nodes' through the feed)
 * are kept and applied once the pages are in, in the order they came: a cursor only
 * moves forward, so one that a page shows already is left as it is, and a join or a
 * leave after the read is applied after it. Everything is under one lock: the changes
 * come from every service thread and from the store's feed thread.
 */
#include "gw_cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_MS (10 * 60 * 1000) /* a roster nobody asked about or watched this long goes */
#define KEPT_MAX 100000          /* changes kept during a read; past it the read is redone */

typedef struct rmember {
    UT_hash_handle hh;
    uint64_t ack, read; /* read when has_read */
    bool has_read;
    uint64_t version; /* the roster's version at its last move */
    char uid[PR_MAX_ID + 1];
} rmember;

/* A change that came during the read. */
typedef struct kept {
    struct kept *next;
    enum st_change_kind kind;
    uint64_t ack, read;
    char uid[PR_MAX_ID + 1];
} kept;

typedef struct rgroup {
    UT_hash_handle hh;
    char gid[PR_MAX_ID + 1];
    bool ready;       /* read, and kept current */
    bool loading;     /* a thread reads it (pages go to members) */
    rmember *members; /* by uid */
    size_t n;         /* members */
    gw_rank *acks;    /* every member's ack */
    gw_rank *reads;   /* every member's read (its ack until it has one) */
    uint64_t version; /* moves at every change */
    kept *kept, *kept_tail;
    size_t n_kept;
    bool overflowed;   /* too many kept: the read is redone */
    unsigned watchers; /* sessions watching (gw_roster_watch) */
    uint64_t used_ms;  /* monotonic: last asked about */
} rgroup;

struct gw_roster {
    pthread_mutex_t mu;
    rgroup *groups;
};

gw_roster *gw_roster_new(void)
{
    gw_roster *r = calloc(1, sizeof(*r));
    if (r)
        pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void kept_clear(rgroup *g)
{
    while (g->kept) {
        kept *k = g->kept;
        g->kept = k->next;
        free(k);
    }
    g->kept_tail = NULL;
    g->n_kept = 0;
    g->overflowed = false;
}

static void members_clear(rgroup *g)
{
    GW_HASH_FREE_ALL(g->members);
    g->n = 0;
    gw_rank_free(g->acks);
    gw_rank_free(g->reads);
    g->acks = g->reads = NULL;
}

static void group_free(gw_roster *r, rgroup *g)
{
    HASH_DEL(r->groups, g);
    members_clear(g);
    kept_clear(g);
    free(g);
}

void gw_roster_free(gw_roster *r)
{
    if (!r)
        return;
    rgroup *g, *tmp;
    HASH_ITER (hh, r->groups, g, tmp)
        group_free(r, g);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static rgroup *find(gw_roster *r, const char *gid)
{
    rgroup *g = NULL;
    HASH_FIND_STR(r->groups, gid, g);
    return g;
}

/* Where the member counts as having read (its ack, until it sent a read). */
static uint64_t seen(const rmember *m)
{
    return m->has_read ? m->read : m->ack;
}

/* Where the member counts as having the messages: its ack, or its read if that is ahead
 * (what someone has seen is on one of their devices), so no receipt says "read" without
 * "delivered". */
static uint64_t held(const rmember *m)
{
    return seen(m) > m->ack ? seen(m) : m->ack;
}

/* ---- members and their cursors ------------------------------------------------------- */

/* A new member (not there yet) with its cursors. false: out of memory. */
static bool member_add(rgroup *g, const char *uid, uint64_t ack, uint64_t read, bool has_read)
{
    rmember *m = calloc(1, sizeof(*m));
    if (!m)
        return false;
    snprintf(m->uid, sizeof(m->uid), "%s", uid);
    m->ack = ack;
    m->read = has_read ? read : 0;
    m->has_read = has_read;
    if (gw_rank_add(g->acks, held(m)) != 0) {
        free(m);
        return false;
    }
    if (gw_rank_add(g->reads, seen(m)) != 0) {
        gw_rank_remove(g->acks, held(m));
        free(m);
        return false;
    }
    m->version = ++g->version;
    HASH_ADD_STR(g->members, uid, m);
    g->n++;
    return true;
}

static void member_remove(rgroup *g, rmember *m)
{
    gw_rank_remove(g->acks, held(m));
    gw_rank_remove(g->reads, seen(m));
    HASH_DEL(g->members, m);
    free(m);
    g->n--;
    g->version++;
}

/* A cursor moves forward (never back). */
static void member_move(rgroup *g, rmember *m, uint64_t ack, uint64_t read, bool has_read)
{
    const rmember was = *m;
    uint64_t old_held = held(m), old_seen = seen(m);
    if (ack > m->ack)
        m->ack = ack;
    if (has_read && (!m->has_read || read > m->read)) {
        m->read = read;
        m->has_read = true;
    }
    if (m->ack == was.ack && m->read == was.read && m->has_read == was.has_read)
        return;
    /* The counts follow: the new places are taken before the old ones are given up, so
     * that out of memory leaves the member where it was. */
    bool moved_held = held(m) != old_held, moved_seen = seen(m) != old_seen;
    if (moved_held && gw_rank_add(g->acks, held(m)) != 0) {
        m->ack = was.ack, m->read = was.read, m->has_read = was.has_read;
        return;
    }
    if (moved_seen && gw_rank_add(g->reads, seen(m)) != 0) {
        if (moved_held)
            gw_rank_remove(g->acks, held(m));
        m->ack = was.ack, m->read = was.read, m->has_read = was.has_read;
        return;
    }
    if (moved_held)
        gw_rank_remove(g->acks, old_held);
    if (moved_seen)
        gw_rank_remove(g->reads, old_seen);
    m->version = ++g->version;
}

/* One change applied to a ready roster. */
static void apply(rgroup *g, enum st_change_kind kind, const char *uid, uint64_t ack, uint64_t read)
{
    rmember *m = NULL;
    HASH_FIND_STR(g->members, uid, m);
    switch (kind) {
    case ST_CH_JOIN:
        if (m)
            member_remove(g, m); /* a join after a leave the read did not show: from ack */
        member_add(g, uid, ack, 0, false);
        break;
    case ST_CH_LEAVE:
        if (m)
            member_remove(g, m);
        break;
    case ST_CH_ACK:
        if (m)
            member_move(g, m, ack, 0, false);
        break;
    case ST_CH_READ:
        if (m)
            member_move(g, m, 0, read, true);
        break;
    default: break;
    }
}

/* A change of a roster being read: kept, to be applied after the read. */
static void keep(rgroup *g, enum st_change_kind kind, const char *uid, uint64_t ack, uint64_t read)
{
    if (g->n_kept >= KEPT_MAX) {
        g->overflowed = true;
        return;
    }
    kept *k = calloc(1, sizeof(*k));
    if (!k) {
        g->overflowed = true;
        return;
    }
    k->kind = kind;
    k->ack = ack;
    k->read = read;
    snprintf(k->uid, sizeof(k->uid), "%s", uid);
    if (g->kept_tail)
        g->kept_tail->next = k;
    else
        g->kept = k;
    g->kept_tail = k;
    g->n_kept++;
}

/* Under mu: one change to gid's roster, if there is one. */
static void change(gw_roster *r, const char *gid, enum st_change_kind kind, const char *uid,
                   uint64_t ack, uint64_t read)
{
    rgroup *g = find(r, gid);
    if (!g)
        return;
    if (g->ready)
        apply(g, kind, uid, ack, read);
    else if (g->loading)
        keep(g, kind, uid, ack, read);
}

void gw_roster_change(gw_roster *r, const st_change *ch)
{
    if (ch->kind == ST_CH_RESYNC) { /* changes may have been lost: every roster is read anew */
        pthread_mutex_lock(&r->mu);
        rgroup *g, *tmp;
        HASH_ITER (hh, r->groups, g, tmp) {
            if (g->loading) {
                g->overflowed = true; /* the read under way is redone */
            } else if (g->ready) {
                members_clear(g);
                g->ready = false;
            }
        }
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (ch->kind != ST_CH_JOIN && ch->kind != ST_CH_LEAVE && ch->kind != ST_CH_ACK &&
        ch->kind != ST_CH_READ)
        return;
    char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
    if (!gw_id_copy(gid, ch->gid.p, ch->gid.n) || !gw_id_copy(uid, ch->uid.p, ch->uid.n))
        return;
    pthread_mutex_lock(&r->mu);
    change(r, gid, ch->kind, uid, ch->ack, ch->read);
    pthread_mutex_unlock(&r->mu);
}

void gw_roster_committed(gw_roster *r, const st_op *op)
{
    if (op->result != 0)
        return;
    char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
    pthread_mutex_lock(&r->mu);
    if (op->kind == ST_OP_ACKS) {
        for (size_t i = 0; i < op->n_acks; i++) {
            const st_ack *a = &op->acks[i];
            if (!gw_id_copy(gid, a->gid.p, a->gid.n) || !gw_id_copy(uid, a->uid.p, a->uid.n))
                continue;
            /* The store capped them at the last mid: so does a later read of the roster. */
            change(r, gid, ST_CH_ACK, uid, a->mid, 0);
            if (a->has_read)
                change(r, gid, ST_CH_READ, uid, 0, a->read);
        }
    } else if (gw_op_leaves(op)) {
        for (size_t i = 0; i < gw_op_leaves(op); i++) {
            st_change ch = gw_op_leave(op, i);
            if (gw_id_copy(gid, ch.gid.p, ch.gid.n) && gw_id_copy(uid, ch.uid.p, ch.uid.n))
                change(r, gid, ST_CH_LEAVE, uid, 0, 0);
        }
    } else if ((op->kind == ST_OP_JOIN && op->joined) || op->kind == ST_OP_LEAVE) {
        if (gw_id_copy(gid, op->gid.p, op->gid.n) && gw_id_copy(uid, op->uid.p, op->uid.n)) {
            change(r, gid, op->kind == ST_OP_JOIN ? ST_CH_JOIN : ST_CH_LEAVE, uid, op->ack, 0);
        }
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- reading a roster ------------------------------------------------------------------ */

int gw_roster_begin(gw_roster *r, const char *gid)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = find(r, gid);
    if (!g && (g = calloc(1, sizeof(*g)))) {
        snprintf(g->gid, sizeof(g->gid), "%s", gid);
        HASH_ADD_STR(r->groups, gid, g);
    }
    int state = GW_ROSTER_WAIT; /* out of memory: wait, and ask again */
    if (g) {
        g->used_ms = gw_mono_ms();
        if (g->ready) {
            state = GW_ROSTER_READY;
        } else if (!g->loading && (g->acks = gw_rank_new()) && (g->reads = gw_rank_new())) {
            g->loading = true; /* changes from now on are kept */
            state = GW_ROSTER_READ;
        } else if (!g->loading) {
            members_clear(g);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return state;
}

int gw_roster_load_page(gw_roster *r, const char *gid, const st_members *page)
{
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    rgroup *g = find(r, gid);
    for (size_t i = 0; g && g->loading && i < st_members_count(page); i++) {
        st_member m = st_members_at(page, i);
        char uid[PR_MAX_ID + 1];
        if (m.uid.n > PR_MAX_ID)
            continue; /* not an id of the protocol's */
        memcpy(uid, m.uid.p, m.uid.n);
        uid[m.uid.n] = 0;
        rmember *have = NULL;
        HASH_FIND_STR(g->members, uid, have);
        if (!have && !member_add(g, uid, m.ack, m.read, m.has_read))
            rc = -1;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void gw_roster_load_end(gw_roster *r, const char *gid, int rc)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = find(r, gid);
    if (g && g->loading) {
        g->loading = false;
        if (rc == 0 && !g->overflowed) {
            g->ready = true;
            for (kept *k = g->kept; k; k = k->next)
                apply(g, k->kind, k->uid, k->ack, k->read);
        } else {
            members_clear(g); /* read again by the next that asks */
        }
        kept_clear(g);
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- what it answers --------------------------------------------------------------------- */

/* Under mu: gid's ready roster, marked used; NULL when it is not ready. */
static rgroup *ready(gw_roster *r, const char *gid)
{
    rgroup *g = find(r, gid);
    if (!g || !g->ready)
        return NULL;
    g->used_ms = gw_mono_ms();
    return g;
}

bool gw_roster_receipt(gw_roster *r, const char *gid, uint64_t mid, gw_receipt *out,
                       size_t list_max, void (*reader)(void *ud, const char *uid), void *ud)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = ready(r, gid);
    if (g) {
        out->delivered = gw_rank_at_least(g->acks, mid);
        out->read = gw_rank_at_least(g->reads, mid);
        out->of = g->n;
        out->listed = reader && g->n <= list_max;
        if (out->listed) {
            rmember *m, *tmp;
            HASH_ITER (hh, g->members, m, tmp)
                if (seen(m) >= mid)
                    reader(ud, m->uid);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return g != NULL;
}

bool gw_roster_moves(gw_roster *r, const char *gid, uint64_t *since, size_t list_max,
                     void (*fn)(void *ud, const gw_cursor *c), void *ud, size_t *of)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = ready(r, gid);
    bool any = g && g->version > *since;
    if (g) {
        *of = g->n;
        if (any && g->n <= list_max) {
            rmember *m, *tmp;
            HASH_ITER (hh, g->members, m, tmp) {
                if (m->version <= *since)
                    continue;
                gw_cursor c = {m->uid, m->ack, m->read, m->has_read};
                fn(ud, &c);
            }
        }
        *since = g->version;
    }
    pthread_mutex_unlock(&r->mu);
    return any;
}

bool gw_roster_members(gw_roster *r, const char *gid, void (*fn)(void *ud, const char *uid),
                       void *ud, size_t *n)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = ready(r, gid);
    if (g) {
        *n = g->n;
        rmember *m, *tmp;
        if (fn)
            HASH_ITER (hh, g->members, m, tmp)
                fn(ud, m->uid);
    }
    pthread_mutex_unlock(&r->mu);
    return g != NULL;
}

bool gw_roster_has(gw_roster *r, const char *gid, const char *uid)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = find(r, gid);
    rmember *m = NULL;
    if (g && g->ready)
        HASH_FIND_STR(g->members, uid, m);
    pthread_mutex_unlock(&r->mu);
    return m != NULL;
}

void gw_roster_watch(gw_roster *r, const char *gid, int delta)
{
    pthread_mutex_lock(&r->mu);
    rgroup *g = find(r, gid);
    if (g) {
        g->watchers = delta > 0 ? g->watchers + 1 : g->watchers ? g->watchers - 1 : 0;
        g->used_ms = gw_mono_ms();
    }
    pthread_mutex_unlock(&r->mu);
}

void gw_roster_sweep(gw_roster *r)
{
    uint64_t now = gw_mono_ms();
    pthread_mutex_lock(&r->mu);
    rgroup *g, *tmp;
    HASH_ITER (hh, r->groups, g, tmp)
        if (!g->loading && !g->watchers && now - g->used_ms > IDLE_MS)
            group_free(r, g);
    pthread_mutex_unlock(&r->mu);
}

size_t gw_roster_count(gw_roster *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = HASH_COUNT(r->groups);
    pthread_mutex_unlock(&r->mu);
    return n;
}
