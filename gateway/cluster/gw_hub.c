/* The service threads of one process and what they tell each other (gw_cluster.h). */
#include "gw_cluster.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What gw_hub_tell needs to know of who told. */
typedef struct hub_thread {
    gw_hub *hub;
    unsigned index;
    gw_acks *acks; /* gw_hub_attach (NULL: not made, or gone) */
} hub_thread;

/* A user with sessions in this process, or whose groups a thread is reading for a
 * hello: how many of each, over every thread (under mu). */
typedef struct online_user {
    UT_hash_handle hh;
    unsigned sessions;
    unsigned loading;
    char uid[];
} online_user;

struct gw_hub {
    unsigned n;
    gw_feeds *feeds;
    gw_roster *roster;     /* the process's (its own lock) */
    gw_presence *presence; /* the same */
    hub_thread t[GW_THREADS_MAX];
    pthread_mutex_t mu;
    online_user *online; /* under mu */
};

void gw_hub_free(gw_hub *h)
{
    if (!h)
        return;
    gw_feeds_free(h->feeds);
    gw_roster_free(h->roster);
    gw_presence_free(h->presence);
    GW_HASH_FREE_ALL(h->online);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* A change of another node, once for the process (NULL: an announcement's end). */
static void heard(void *ud, const st_change *ch)
{
    gw_hub *h = ud;
    if (!ch) {
        gw_presence_heard_end(h->presence);
        return;
    }
    gw_roster_change(h->roster, ch);
    gw_presence_heard(h->presence, ch);
}

gw_hub *gw_hub_new(unsigned threads)
{
    gw_hub *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->n = threads ? threads : 1;
    pthread_mutex_init(&h->mu, NULL);
    for (unsigned i = 0; i < h->n; i++)
        h->t[i] = (hub_thread){.hub = h, .index = i};
    if (!(h->feeds = gw_feeds_new(h->n)) || !(h->roster = gw_roster_new()) ||
        !(h->presence = gw_presence_new())) {
        gw_hub_free(h);
        return NULL;
    }
    gw_feeds_heard(h->feeds, heard, h);
    return h;
}

gw_roster *gw_hub_roster(gw_hub *h)
{
    return h->roster;
}

gw_presence *gw_hub_presence(gw_hub *h)
{
    return h->presence;
}

void gw_hub_set_store(gw_hub *h, st_store *s)
{
    gw_presence_set_store(h->presence, s);
}

gw_feeds *gw_hub_feeds(gw_hub *h)
{
    return h->feeds;
}

gw_feed *gw_hub_feed(gw_hub *h, unsigned thread)
{
    return gw_feeds_at(h->feeds, thread);
}

void gw_hub_attach(gw_hub *h, unsigned thread, gw_acks *acks)
{
    h->t[thread].acks = acks;
}

void *gw_hub_teller(gw_hub *h, unsigned thread)
{
    return &h->t[thread];
}

/* ---- what a thread's writes changed ---------------------------------------------------- */

/* The groups op changed (op->changed: a cseq each, as hi), told to the other threads. */
static void post_changed(gw_hub *h, const hub_thread *me, const st_op *op)
{
    for (size_t i = 0; i < st_list_count(op->changed); i++) {
        const st_item *it = st_list_at(op->changed, i);
        st_change ch = {.kind = ST_CH_CHANGED, .gid = it->gid, .cseq = it->hi};
        gw_feeds_post_others(h->feeds, me->index, &ch, 1);
    }
}

void gw_hub_tell(void *teller, const st_op *op)
{
    hub_thread *me = teller;
    gw_hub *h = me->hub;
    gw_roster_committed(h->roster, op);
    if (h->n < 2 || op->result != 0)
        return;
    st_change one = {.gid = op->gid, .uid = op->uid};
    switch (op->kind) {
    case ST_OP_APPEND:
        if (op->duplicate)
            return;
        one.kind = ST_CH_MSG;
        one.mid = op->mid;
        one.ts = op->ts;
        one.record = op->record;
        one.record_n = op->record_n;
        break;
    case ST_OP_JOIN:
        if (!op->joined)
            return;
        one.kind = ST_CH_JOIN;
        one.ack = op->ack;
        break;
    case ST_OP_LEAVE: one.kind = ST_CH_LEAVE; break;
    case ST_OP_DELETE_GROUP:
    case ST_OP_ERASE_USER: /* memberships ended (an erased user's sessions: the sign-out) */
        for (size_t i = 0; i < gw_op_leaves(op); i++) {
            st_change ch = gw_op_leave(op, i);
            gw_feeds_post_others(h->feeds, me->index, &ch, 1);
        }
        if (op->kind == ST_OP_ERASE_USER)
            post_changed(h, me, op); /* tombstones, reactions */
        return;
    case ST_OP_EDIT:
        if (op->duplicate)
            return;
        one.kind = ST_CH_EDIT;
        one.uid = (st_id){NULL, 0};
        one.mid = op->mid;
        one.ver = op->ver;
        one.ts = op->ts;
        one.recalled = op->recall;
        one.record = op->record;
        one.record_n = op->record_n;
        one.cseq = op->cseq;
        break;
    case ST_OP_REACT:
        if (op->duplicate)
            return;
        one.kind = ST_CH_REACT;
        one.mid = op->mid;
        one.key = (st_id){op->key, op->key_n};
        one.on = op->on;
        one.count = op->count;
        one.cseq = op->cseq;
        break;
    case ST_OP_TRIM: /* groups whose horizon moved (a cseq each): a hint to pull changes */
        post_changed(h, me, op);
        return;
    /* Acks, reads and sign-outs were told when they came (gw_hub_tell_ack,
     * gw_hub_tell_read, gw_hub_tell_signout); store reads change nothing. */
    default: return;
    }
    gw_feeds_post_others(h->feeds, me->index, &one, 1);
}

void gw_hub_tell_ack(gw_hub *h, unsigned thread, const char *gid, const char *uid, uint64_t mid)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_ACK, .gid = st_id_str(gid), .uid = st_id_str(uid), .ack = mid};
    gw_feeds_post_others(h->feeds, thread, &ch, 1);
}

void gw_hub_tell_read(gw_hub *h, unsigned thread, const char *gid, const char *uid, uint64_t read)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_READ, .gid = st_id_str(gid), .uid = st_id_str(uid), .read = read};
    gw_feeds_post_others(h->feeds, thread, &ch, 1);
}

void gw_hub_tell_typing(gw_hub *h, unsigned thread, const char *gid, const char *uid)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_TYPING, .gid = st_id_str(gid), .uid = st_id_str(uid)};
    gw_feeds_post_others(h->feeds, thread, &ch, 1);
}

void gw_hub_tell_horizon(gw_hub *h, unsigned thread, const char *gid, uint64_t first_mid)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_HORIZON, .gid = st_id_str(gid), .mid = first_mid};
    gw_feeds_post_others(h->feeds, thread, &ch, 1);
}

void gw_hub_tell_signout(gw_hub *h, unsigned thread, const char *uid)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_SIGNOUT, .uid = st_id_str(uid)};
    gw_feeds_post_others(h->feeds, thread, &ch, 1);
}

/* ---- who is online ------------------------------------------------------------------ */

/* Under mu: one more (delta 1) or one fewer (-1) of uid's sessions (loading false) or
 * reads of its groups (true); the entry goes with the last of both. */
static void count(gw_hub *h, const char *uid, int delta, bool loading)
{
    size_t n = strlen(uid);
    online_user *o = NULL;
    HASH_FIND(hh, h->online, uid, n, o);
    if (!o && delta > 0 && (o = calloc(1, sizeof(*o) + n + 1))) {
        memcpy(o->uid, uid, n + 1);
        HASH_ADD(hh, h->online, uid, n, o);
    }
    if (!o)
        return;
    unsigned *c = loading ? &o->loading : &o->sessions;
    unsigned before = *c;
    *c = delta > 0 ? *c + 1 : *c ? *c - 1 : 0;
    /* Its first session in the process, or its last: online here, or not. */
    if (!loading && (before == 0) != (*c == 0))
        gw_presence_local(h->presence, uid, *c > 0);
    if (!o->sessions && !o->loading) {
        HASH_DEL(h->online, o);
        free(o);
    }
}

void gw_hub_online(void *hub, const char *uid, int delta)
{
    gw_hub *h = hub;
    pthread_mutex_lock(&h->mu);
    count(h, uid, delta, false);
    pthread_mutex_unlock(&h->mu);
}

void gw_hub_loading(void *hub, const char *uid, int delta)
{
    gw_hub *h = hub;
    pthread_mutex_lock(&h->mu);
    count(h, uid, delta, true);
    pthread_mutex_unlock(&h->mu);
}

bool gw_hub_is_loading(void *hub, const char *uid)
{
    gw_hub *h = hub;
    pthread_mutex_lock(&h->mu);
    online_user *o = NULL;
    HASH_FIND(hh, h->online, uid, strlen(uid), o);
    bool yes = o && o->loading;
    pthread_mutex_unlock(&h->mu);
    return yes;
}

unsigned gw_hub_sessions_of(gw_hub *h, const char *uid)
{
    pthread_mutex_lock(&h->mu);
    online_user *o = NULL;
    HASH_FIND(hh, h->online, uid, strlen(uid), o);
    unsigned n = o ? o->sessions : 0;
    pthread_mutex_unlock(&h->mu);
    return n;
}

unsigned gw_hub_users_online(gw_hub *h)
{
    pthread_mutex_lock(&h->mu);
    unsigned n = 0;
    online_user *o, *tmp;
    HASH_ITER (hh, h->online, o, tmp)
        n += o->sessions > 0; /* not a user only being read for a hello */
    pthread_mutex_unlock(&h->mu);
    return n;
}

uint64_t gw_hub_acks_pending(void *hub, const char *gid, const char *uid, uint64_t *read,
                             bool *has_read)
{
    gw_hub *h = hub;
    uint64_t most = 0;
    *read = 0;
    *has_read = false;
    for (unsigned i = 0; i < h->n; i++) {
        gw_acks *a = h->t[i].acks;
        uint64_t r = 0;
        bool hr = false;
        uint64_t x = a ? gw_acks_pending(a, gid, uid, &r, &hr) : 0;
        if (x > most)
            most = x;
        if (hr && (!*has_read || r > *read)) {
            *read = r;
            *has_read = true;
        }
    }
    return most;
}
