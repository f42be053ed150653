/*
 * Who is online, in which groups: the index the fan-out walks. Only users with a session
 * here are in it, and only the groups they belong to. Membership itself lives in the
 * store; this is a cache of it for the online users, read at a user's first hello here
 * (a store job: the hello and the requests after it wait for it) and kept current by
 * committed joins and leaves, this thread's and the feed's.
 */
#include "groups_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utlist.h>

struct gw_registry {
    gw_groups *g;
    gw_user *users;          /* by uid */
    gw_group *groups;        /* by gid: groups with an online member */
    gw_attached_fn attached; /* what hellos waiting for a user are told (every attach
                              * names the same) */
    void *attached_ud;
    unsigned n_partial; /* users with partial set */
};

gw_registry *gw_registry_new(gw_groups *g)
{
    gw_registry *reg = calloc(1, sizeof(*reg));
    if (reg)
        reg->g = g;
    return reg;
}

gw_groups *gw_registry_groups(gw_registry *reg)
{
    return reg->g;
}

/* A session of uid signed in here (1) or went (-1): the other threads hear of it. */
static void tell_online(gw_registry *reg, const char *uid, int delta)
{
    const gw_groups_deps *d = &reg->g->deps;
    if (d->online)
        d->online(d->hooks_ud, uid, delta);
}

/* A read of uid's groups for a hello began here (1) or ended (-1): while one is under
 * way, the process's coalescers keep the acks they write visible (gw_acks.c). */
static void tell_loading(gw_registry *reg, const char *uid, int delta)
{
    const gw_groups_deps *d = &reg->g->deps;
    if (d->loading)
        d->loading(d->hooks_ud, uid, delta);
}

bool gw_registry_loading(gw_registry *reg, const char *uid)
{
    const gw_groups_deps *d = &reg->g->deps;
    if (d->is_loading)
        return d->is_loading(d->hooks_ud, uid);
    gw_user *u = gw_user_find(reg, uid);
    return u && u->loading;
}

gw_user *gw_user_find(gw_registry *reg, const char *uid)
{
    gw_user *u = NULL;
    HASH_FIND_STR(reg->users, uid, u);
    return u;
}

gw_group *gw_group_find(gw_registry *reg, const char *gid, size_t n)
{
    gw_group *g = NULL;
    HASH_FIND(hh, reg->groups, gid, n, g);
    return g;
}

static gw_member *gw_member_find(gw_user *u, pr_slice gid)
{
    gw_member *m = NULL;
    HASH_FIND(hh, u->groups, gid.p, gid.n, m);
    return m;
}

/* Puts u among gid's online members, creating the group entry if needed. */
static int group_online(gw_registry *reg, gw_user *u, const char *gid, uint64_t last_mid)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g)
            return -1;
        strcpy(g->gid, gid);
        g->last_mid = last_mid;
        g->first_mid = 1;
        HASH_ADD_STR(reg->groups, gid, g);
        gw_deliver_group_new(reg->g->del, g);
    } else {
        /* The store's figure may be newer or older than ours; mids only grow. */
        gw_deliver_group_saw(reg->g->del, g, last_mid);
    }
    gw_online *o = NULL;
    HASH_FIND_PTR(g->online, &u, o);
    if (!o) {
        o = calloc(1, sizeof(*o));
        if (!o)
            return -1;
        o->user = u;
        HASH_ADD_PTR(g->online, user, o);
        g->n_online++;
    }
    return 0;
}

static void group_offline(gw_registry *reg, gw_user *u, const char *gid)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (!g)
        return;
    gw_online *o = NULL;
    HASH_FIND_PTR(g->online, &u, o);
    if (o) {
        HASH_DEL(g->online, o);
        free(o);
        g->n_online--;
    }
    if (g->n_online == 0) {
        HASH_DEL(reg->groups, g);
        gw_deliver_group_free(reg->g->del, g);
        free(g);
    }
}

gw_member *gw_member_add(gw_registry *reg, gw_user *u, const char *gid, uint64_t ack,
                         uint64_t last_mid)
{
    gw_member *m = gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)});
    if (!m) {
        m = calloc(1, sizeof(*m));
        if (!m)
            return NULL;
        strcpy(m->gid, gid);
        m->ack = ack;
        HASH_ADD_STR(u->groups, gid, m);
    } else if (ack > m->ack) {
        m->ack = ack;
    }
    if (group_online(reg, u, gid, last_mid) != 0)
        return NULL;
    return m;
}

void gw_member_read(gw_member *m, uint64_t stored, bool has_stored, uint64_t pending,
                    bool has_pending)
{
    if (has_stored && (!m->has_read || stored > m->read)) {
        m->read = stored;
        m->has_read = true;
    }
    if (has_pending && (!m->has_read || pending > m->read)) {
        m->read = pending;
        m->has_read = true;
    }
}

static void member_remove(gw_registry *reg, gw_user *u, const char *gid)
{
    gw_member *m = gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)});
    if (m) {
        HASH_DEL(u->groups, m);
        free(m);
    }
    group_offline(reg, u, gid);
}

unsigned gw_registry_sign_out(gw_registry *reg, const char *uid)
{
    gw_user *u = gw_user_find(reg, uid);
    uint64_t now = (uint64_t)time(NULL);
    if (u && u->not_before < now)
        u->not_before = now;
    unsigned n = 0;
    for (gw_seat *s = u ? u->sessions : NULL; s; s = s->next, n++)
        gw_sess_close(s->sess, GW_CLOSE_SIGNED_OUT, "signed out by the application");
    if (n)
        gw_info("user %s signed out by the application: %u sessions closed here", uid, n);
    return n;
}

/* cseq: a deleted group's deletion (0: a plain leave), which `left` carries. */
static void member_end_c(gw_registry *reg, gw_user *u, const char *gid, gw_sess *except,
                         uint64_t cseq);

void gw_member_end(gw_registry *reg, gw_user *u, const char *gid, gw_sess *except)
{
    member_end_c(reg, u, gid, except, 0);
}

static void member_end_c(gw_registry *reg, gw_user *u, const char *gid, gw_sess *except,
                         uint64_t cseq)
{
    if (!gw_member_find(u, (pr_slice){(const uint8_t *)gid, strlen(gid)}))
        return;
    member_remove(reg, u, gid);
    /* The user's other sessions are told: `left` without a rid (docs/PROTOCOL.md). */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    gw_buf *b = NULL;
    if (pr_enc_left_c(&sb, PR_NO_RID, (pr_slice){(const uint8_t *)gid, strlen(gid)}, cseq) == 0 &&
        (b = gw_buf_from(&sb))) {
        gw_seat *s;
        DL_FOREACH (u->sessions, s) {
            if (s->sess != except)
                gw_out_push(s->sess, GW_PUSH_LEFT, gid, 0, b);
        }
        gw_buf_unref(b);
    }
    msgpack_sbuffer_destroy(&sb);
}

static void user_free(gw_registry *reg, gw_user *u)
{
    gw_member *m, *tmp;
    HASH_ITER (hh, u->groups, m, tmp) {
        group_offline(reg, u, m->gid);
        HASH_DEL(u->groups, m);
        free(m);
    }
    if (u->partial)
        reg->n_partial--;
    HASH_DEL(reg->users, u);
    free(u);
}

/* Was the seat's token issued at or before its user's not-before (or does it not say,
 * while there is one)? iat <= not_before: a token of the sign-out's own second is refused,
 * since the second cannot tell which came first. */
static bool revoked(const gw_user *u, const gw_seat *s)
{
    int64_t iat = gw_sess_identity(s->sess)->iat;
    return u->not_before && (iat <= 0 || (uint64_t)iat <= u->not_before);
}

static void attach(gw_registry *reg, gw_user *u, gw_seat *s)
{
    DL_APPEND(u->sessions, s);
    u->n_sessions++;
    s->user = u;
    tell_online(reg, u->uid, 1);
}

/* The read of a user's groups at its first hello here. */
typedef struct user_load {
    gw_job job; /* first: the completion finds the load from its job */
    gw_registry *reg;
    gw_user *user;
    unsigned tries; /* reads made again because the memberships changed meanwhile */
} user_load;

/* Reads made again at most before the hellos go on (then the re-read after catches up). */
#define LOAD_TRIES 3

/* The user's groups are read (or could not be): sign in every session waiting for them. */
static void loaded(gw_job *j)
{
    user_load *l = (user_load *)j;
    gw_registry *reg = l->reg;
    gw_user *u = l->user;
    st_op *op = &j->op;
    int rc = op->result;
    unsigned stall = reg->g->deps.cfg->test_load_stall_ms;
    if (stall && l->tries == 0) /* tests only: this thread held up here by others' work */
        usleep(stall * 1000u);
    /* Another thread or node changed the user's memberships while they were read: read
     * again before the waiting hellos go on, so that a join a client saw confirmed there
     * holds here for its first request. */
    if (rc == 0 && u->stale && l->tries < LOAD_TRIES) {
        u->stale = false;
        l->tries++;
        st_groups_free(op->groups);
        *op = (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u->uid), .partial_ok = true};
        int src = gw_bridge_submit(reg->g->deps.bridge, &l->job); /* may load at once */
        if (src < 0) {
            op->result = src;
            loaded(j);
        }
        return;
    }
    for (size_t i = 0; rc == 0 && i < st_groups_count(op->groups); i++) {
        const st_user_group *g = st_groups_at(op->groups, i);
        char gid[PR_MAX_ID + 1];
        if (!gw_id_copy(gid, g->gid.p, g->gid.n))
            continue; /* cannot be made through the protocol */
        /* An ack (or a read) this gateway took but has not persisted yet is newer than the
         * stored one. */
        const gw_groups_deps *d = &reg->g->deps;
        uint64_t ack = g->ack, read = 0;
        bool has_read = false;
        uint64_t pending = d->pending_ack
                               ? d->pending_ack(d->hooks_ud, gid, u->uid, &read, &has_read)
                               : gw_acks_pending(reg->g->acks, gid, u->uid, &read, &has_read);
        gw_member *m = gw_member_add(reg, u, gid, pending > ack ? pending : ack, g->last_mid);
        if (!m)
            rc = ST_ENOMEM;
        else
            gw_member_read(m, g->read, g->has_read, read, has_read);
        gw_registry_horizon(reg, gid, g->first_mid);
        gw_registry_cseq(reg, gid, g->last_cseq);
    }
    if (rc == 0 && op->not_before > u->not_before)
        u->not_before = op->not_before;
    if (rc == 0 && op->shards_away && !u->partial) {
        u->partial = true;
        reg->n_partial++;
        gw_info("user %s signed in with part of its groups: %u shard(s) away; the rest are "
                "read once they are back",
                u->uid, op->shards_away);
    }
    st_groups_free(op->groups);
    free(l);
    u->loading = false;
    tell_loading(reg, u->uid, -1); /* after the acks pending were merged above */
    while (u->waiters) {
        gw_seat *s = u->waiters;
        DL_DELETE(u->waiters, s);
        s->loading = NULL;
        int one = rc == 0 && revoked(u, s) ? GW_REVOKED : rc;
        if (one == 0)
            attach(reg, u, s);
        reg->attached(reg->attached_ud, s, one);
    }
    if (u->n_sessions == 0) {
        user_free(reg, u); /* failed, or every waiter went meanwhile */
        return;
    }
    if (u->stale) /* another thread or node changed its memberships while they were read */
        gw_sync_user(reg, u);
}

void gw_registry_attach(gw_registry *reg, gw_seat *s, gw_sess *sess, const char *uid,
                        gw_attached_fn done, void *ud)
{
    reg->attached = done;
    reg->attached_ud = ud;
    s->sess = sess;
    gw_user *u = gw_user_find(reg, uid);
    if (u && !u->loading) {
        if (revoked(u, s)) {
            done(ud, s, GW_REVOKED);
            return;
        }
        attach(reg, u, s);
        done(ud, s, 0);
        return;
    }
    if (!u) {
        user_load *l = calloc(1, sizeof(*l));
        u = calloc(1, sizeof(*u));
        if (!u || !l) {
            free(u);
            free(l);
            done(ud, s, ST_ENOMEM);
            return;
        }
        strcpy(u->uid, uid);
        u->loading = true;
        tell_loading(reg, uid, 1); /* before the read: acks written from now on stay seen */
        HASH_ADD_STR(reg->users, uid, u);
        DL_APPEND(u->waiters, s);
        s->loading = u;
        *l = (user_load){.reg = reg, .user = u};
        /* A sign-in goes on without the groups of a shard that is away (gw_registry_partial). */
        l->job.op =
            (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u->uid), .partial_ok = true};
        l->job.complete = loaded;
        int rc = gw_bridge_submit(reg->g->deps.bridge, &l->job); /* may load at once */
        if (rc < 0) {
            l->job.op.result = rc;
            loaded(&l->job);
        }
        return;
    }
    /* Another session's hello is reading this user's groups: wait for the same read. */
    DL_APPEND(u->waiters, s);
    s->loading = u;
}

void gw_registry_detach(gw_registry *reg, gw_seat *s)
{
    if (s->loading) {
        DL_DELETE(s->loading->waiters, s);
        s->loading = NULL; /* the user stays until its read completes */
        return;
    }
    gw_user *u = s->user;
    if (!u)
        return;
    DL_DELETE(u->sessions, s);
    s->user = NULL;
    tell_online(reg, u->uid, -1);
    if (--u->n_sessions == 0)
        user_free(reg, u);
}

void gw_registry_figures(gw_registry *reg, uint64_t *users, uint64_t *groups, uint64_t *members,
                         uint64_t *lag_total, uint64_t *lag_max)
{
    *users = HASH_COUNT(reg->users);
    *groups = HASH_COUNT(reg->groups);
    *members = *lag_total = *lag_max = 0;
    gw_user *u, *ut;
    HASH_ITER (hh, reg->users, u, ut) {
        gw_member *m, *mt;
        HASH_ITER (hh, u->groups, m, mt) {
            gw_group *g = gw_group_find(reg, m->gid, strlen(m->gid));
            uint64_t l = g && g->last_mid > m->ack ? g->last_mid - m->ack : 0;
            (*members)++;
            *lag_total += l;
            if (l > *lag_max)
                *lag_max = l;
        }
    }
}

bool gw_registry_empty(const gw_registry *reg)
{
    return !reg->users && !reg->groups;
}

void gw_registry_free(gw_registry *reg)
{
    if (!reg)
        return;
    gw_user *u, *tmp;
    HASH_ITER (hh, reg->users, u, tmp) {
        u->sessions = u->waiters = NULL;
        user_free(reg, u);
    }
    free(reg);
}

void gw_registry_walk(gw_registry *reg, void (*user)(void *ud, gw_user *u),
                      void (*group)(void *ud, gw_group *g), void *ud)
{
    gw_user *u, *ut;
    HASH_ITER (hh, reg->users, u, ut)
        user(ud, u);
    gw_group *g, *gt;
    HASH_ITER (hh, reg->groups, g, gt)
        group(ud, g);
}

/* ---- what the requests of a signed-in session ask ------------------------------------- */

unsigned gw_registry_n_partial(const gw_registry *reg)
{
    return reg->n_partial;
}

void gw_registry_whole(gw_registry *reg, gw_user *u)
{
    if (!u->partial)
        return;
    u->partial = false;
    reg->n_partial--;
    gw_info("user %s: the rest of its groups read (%u now): its sessions are told", u->uid,
            HASH_COUNT(u->groups));
    gw_seat *s;
    DL_FOREACH (u->sessions, s)
        reg->attached(reg->attached_ud, s, GW_WHOLE);
}

bool gw_registry_partial(const gw_seat *seat)
{
    return seat->user && seat->user->partial;
}

bool gw_registry_member(const gw_seat *seat, pr_slice gid, uint64_t *ack)
{
    gw_member *m = seat->user ? gw_member_find(seat->user, gid) : NULL;
    if (m && ack)
        *ack = m->ack;
    return m != NULL;
}

bool gw_registry_has_read(const gw_seat *seat, pr_slice gid)
{
    gw_member *m = seat->user ? gw_member_find(seat->user, gid) : NULL;
    return m && m->has_read;
}

size_t gw_registry_count(const gw_seat *seat)
{
    return seat->user ? HASH_COUNT(seat->user->groups) : 0;
}

void gw_registry_each(gw_registry *reg, const gw_seat *seat,
                      void (*fn)(void *ud, const gw_mygroup *g), void *ud)
{
    if (!seat->user)
        return;
    gw_member *m, *tmp;
    HASH_ITER (hh, seat->user->groups, m, tmp) {
        gw_group *g = gw_group_find(reg, m->gid, strlen(m->gid));
        gw_mygroup mg = {.gid = m->gid,
                         .last_mid = g ? g->last_mid : m->ack,
                         .first_mid = g ? g->first_mid : 1,
                         .last_cseq = g ? g->last_cseq : 0,
                         .ack = m->ack,
                         .read = m->read,
                         .has_read = m->has_read};
        fn(ud, &mg);
    }
}

unsigned gw_registry_joins(const gw_seat *seat)
{
    return seat->user ? HASH_COUNT(seat->user->groups) + seat->user->joins_inflight : 0;
}

void gw_registry_join_began(gw_seat *seat)
{
    if (seat->user)
        seat->user->joins_inflight++; /* undone in gw_registry_joined */
}

void gw_registry_join_refused(gw_seat *seat)
{
    if (seat->user && seat->user->joins_inflight)
        seat->user->joins_inflight--;
}

/* One cap-and-move rule for a member's two cursors (read: the read cursor, else the ack):
 * mid is held to the group's last mid (when the group is not held here, to the furthest
 * either cursor says), and the cursor moves only forward. -1 not a member, 0 no move,
 * 1 moved (and the move handed to gw_acks to persist). */
static inline int cursor_move(gw_registry *reg, gw_seat *seat, pr_slice gid, uint64_t mid,
                              bool read, const char **gid_out, uint64_t *cap)
{
    gw_member *m = seat->user ? gw_member_find(seat->user, gid) : NULL;
    if (!m)
        return -1;
    gw_group *g = gw_group_find(reg, m->gid, strlen(m->gid));
    *cap = g ? g->last_mid : read && m->read > m->ack ? m->read : m->ack;
    *gid_out = m->gid;
    if (mid > *cap)
        mid = *cap;
    if (read) {
        if (m->has_read && mid <= m->read)
            return 0;
        m->read = mid;
        m->has_read = true;
        gw_acks_add_read(reg->g->acks, m->gid, seat->user->uid, mid);
    } else {
        if (mid <= m->ack)
            return 0;
        m->ack = mid;
        gw_acks_add(reg->g->acks, m->gid, seat->user->uid, mid);
    }
    return 1;
}

int gw_registry_read(gw_registry *reg, gw_seat *seat, pr_slice gid, uint64_t mid,
                     const char **gid_out, uint64_t *cap)
{
    return cursor_move(reg, seat, gid, mid, true, gid_out, cap);
}

int gw_registry_ack(gw_registry *reg, gw_seat *seat, pr_slice gid, uint64_t mid,
                    const char **gid_out, uint64_t *cap)
{
    return cursor_move(reg, seat, gid, mid, false, gid_out, cap);
}

void gw_registry_joined(gw_registry *reg, const char *uid, const char *gid, bool counted,
                        int result, uint64_t *ack, uint64_t *last_mid)
{
    gw_user *u = gw_user_find(reg, uid);
    /* A user dropped and signed in again meanwhile starts from 0: never below it. */
    if (counted && u && u->joins_inflight)
        u->joins_inflight--;
    if (result == 0 && u && u->loading)
        u->stale = true; /* the read under way may predate it: read again after */
    if (result == 0 && u) {
        gw_member *m = gw_member_add(reg, u, gid, *ack, *last_mid);
        if (m)
            *ack = m->ack;
    }
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (g)
        *last_mid = g->last_mid;
}

void gw_registry_left(gw_registry *reg, const char *uid, const char *gid, gw_sess *except)
{
    gw_registry_left_c(reg, uid, gid, except, 0);
}

void gw_registry_left_c(gw_registry *reg, const char *uid, const char *gid, gw_sess *except,
                        uint64_t cseq)
{
    gw_user *u = gw_user_find(reg, uid);
    if (u && u->loading)
        u->stale = true; /* the read under way may predate it: read again after */
    if (u)
        member_end_c(reg, u, gid, except, cseq);
}

unsigned gw_registry_typing(gw_registry *reg, const char *gid, const char *uid)
{
    pr_slice gs = {(const uint8_t *)gid, strlen(gid)};
    gw_user *typist = gw_user_find(reg, uid);
    gw_member *m = typist ? gw_member_find(typist, gs) : NULL;
    if (m) /* its sessions here type again in this group after GW_TYPING_EVERY_MS */
        m->typed_ms = gw_mono_ms();
    gw_group *g = gw_group_find(reg, gid, gs.n);
    if (!g)
        return 0;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    unsigned n = 0;
    gw_buf *b = NULL;
    if (pr_enc_typing_push(&sb, gs, (pr_slice){(const uint8_t *)uid, strlen(uid)},
                           GW_TYPING_TTL_MS) == 0 &&
        (b = gw_buf_from(&sb))) {
        gw_online *o, *tmp;
        HASH_ITER (hh, g->online, o, tmp) {
            if (o->user == typist)
                continue; /* not to the typist, on any of its devices */
            for (gw_seat *s = o->user->sessions; s; s = s->next)
                n += gw_out_push(s->sess, GW_PUSH_TYPING, gid, 0, b) == 0;
        }
        gw_buf_unref(b);
    }
    msgpack_sbuffer_destroy(&sb);
    return n;
}

bool gw_registry_typing_due(const gw_seat *seat, pr_slice gid, uint64_t now_ms)
{
    gw_member *m = seat->user ? gw_member_find(seat->user, gid) : NULL;
    return m && (!m->typed_ms || now_ms - m->typed_ms >= GW_TYPING_EVERY_MS);
}

unsigned gw_registry_sessions_of(gw_registry *reg, const char *uid)
{
    gw_user *u = gw_user_find(reg, uid);
    return u ? u->n_sessions : 0;
}

uint64_t gw_registry_horizon(gw_registry *reg, const char *gid, uint64_t first_mid)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (!g)
        return first_mid ? first_mid : 1;
    if (first_mid > g->first_mid)
        g->first_mid = first_mid; /* a horizon only moves up */
    return g->first_mid;
}

uint64_t gw_registry_cseq(gw_registry *reg, const char *gid, uint64_t cseq)
{
    gw_group *g = gw_group_find(reg, gid, strlen(gid));
    if (!g)
        return cseq;
    if (cseq > g->last_cseq)
        g->last_cseq = cseq; /* cseqs only grow */
    return g->last_cseq;
}

void gw_registry_change(gw_registry *reg, const st_change *ch)
{
    char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
    if (!gw_id_copy(gid, ch->gid.p, ch->gid.n) || !gw_id_copy(uid, ch->uid.p, ch->uid.n))
        return; /* cannot be made through the protocol */
    gw_user *u = gw_user_find(reg, uid);
    if (!u)
        return; /* not online here */
    if (u->loading) {
        u->stale = true; /* the read under way may predate it: read again after */
        return;
    }
    pr_slice gs = {(const uint8_t *)gid, ch->gid.n};
    gw_member *m = gw_member_find(u, gs);
    switch (ch->kind) {
    case ST_CH_JOIN:
        if (!m)
            gw_member_add(reg, u, gid, ch->ack, ch->ack);
        break;
    case ST_CH_LEAVE:
        if (m)
            member_end_c(reg, u, gid, NULL, ch->cseq);
        break;
    case ST_CH_ACK:
        if (m && ch->ack > m->ack)
            m->ack = ch->ack;
        break;
    case ST_CH_READ:
        if (m && (!m->has_read || ch->read > m->read)) {
            m->read = ch->read;
            m->has_read = true;
        }
        break;
    default: break;
    }
}
