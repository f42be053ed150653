/* The service threads of one process and what they tell each other (gw_hub.h). */
#include "gw_hub.h"
#include "gw_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a thread that renders /stats waits for the others' figures. */
#define FIGURES_WAIT_MS 100

/* One thread: its feed, its server, and what gw_hub_tell needs to know who told. */
typedef struct hub_thread {
    gw_hub *hub;
    unsigned index;
    gw_feed *feed;
    gw_server *srv;         /* gw_hub_attach */
    void (*wake)(void *ud); /* wakes its loop, from any thread */
    bool stopped;           /* its run has returned: it answers no more requests (under mu) */
    /* Connections accepted for it and not adopted yet (gw_listen.c): under hand_mu. */
    pthread_mutex_t hand_mu;
    int *handed;
    size_t n_handed, cap_handed;
    bool refusing;     /* its run has returned: nothing more is handed to it */
    uint64_t answered; /* the request its figures answer (under mu) */
    gw_figs figs;      /* under mu */
} hub_thread;

/* A user with sessions in this process: how many, over every thread (under mu). */
typedef struct online_user {
    UT_hash_handle hh;
    unsigned sessions;
    char uid[];
} online_user;

struct gw_hub {
    gw_config cfg;
    unsigned n;
    online_user *online; /* under mu */
    hub_thread t[GW_THREADS_MAX];
    gw_limits *limits;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wanted; /* the latest request for figures (under mu) */
};

gw_hub *gw_hub_new(const gw_config *cfg)
{
    gw_hub *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->cfg = *cfg;
    h->n = cfg->threads ? cfg->threads : 1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->limits = gw_limits_new(cfg, gw_now_ms());
    bool ok = h->limits != NULL;
    for (unsigned i = 0; i < h->n; i++) {
        h->t[i].hub = h;
        h->t[i].index = i;
        pthread_mutex_init(&h->t[i].hand_mu, NULL);
        ok = ok && (h->t[i].feed = gw_feed_new(0, 0)) != NULL;
    }
    if (!ok) {
        gw_hub_free(h);
        return NULL;
    }
    return h;
}

void gw_hub_free(gw_hub *h)
{
    if (!h)
        return;
    for (unsigned i = 0; i < h->n; i++) {
        gw_feed_free(h->t[i].feed);
        for (size_t k = 0; k < h->t[i].n_handed; k++)
            close(h->t[i].handed[k]);
        free(h->t[i].handed);
        pthread_mutex_destroy(&h->t[i].hand_mu);
    }
    gw_limits_free(h->limits);
    online_user *o, *tmp;
    HASH_ITER (hh, h->online, o, tmp) {
        HASH_DEL(h->online, o);
        free(o);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

unsigned gw_hub_threads(const gw_hub *h)
{
    return h->n;
}

gw_feed *gw_hub_feed(gw_hub *h, unsigned thread)
{
    return h->t[thread].feed;
}

gw_limits *gw_hub_limits(gw_hub *h)
{
    return h->limits;
}

void *gw_hub_teller(gw_hub *h, unsigned thread)
{
    return &h->t[thread];
}

void gw_hub_attach(gw_hub *h, unsigned thread, gw_server *srv, void (*wake)(void *srv))
{
    h->t[thread].srv = srv;
    h->t[thread].wake = wake;
}

gw_server *gw_hub_server(gw_hub *h, unsigned thread)
{
    return h->t[thread].srv;
}

void gw_hub_stopped(gw_hub *h, unsigned thread)
{
    /* Connections handed to it that it did not take: closed now, not at exit. */
    hub_thread *t = &h->t[thread];
    pthread_mutex_lock(&t->hand_mu);
    t->refusing = true;
    for (size_t k = 0; k < t->n_handed; k++)
        close(t->handed[k]);
    t->n_handed = 0;
    pthread_mutex_unlock(&t->hand_mu);
    pthread_mutex_lock(&h->mu);
    h->t[thread].stopped = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void gw_hub_post(void *hub, const st_change *ch, size_t n)
{
    gw_hub *h = hub;
    for (unsigned i = 0; i < h->n; i++)
        gw_feed_post(h->t[i].feed, ch, n);
}

/* ---- connections handed over ----------------------------------------------------- */

bool gw_hub_hand(gw_hub *h, unsigned thread, int fd)
{
    hub_thread *t = &h->t[thread];
    pthread_mutex_lock(&t->hand_mu);
    bool ok = !t->refusing;
    if (ok && t->n_handed == t->cap_handed) {
        size_t ncap = t->cap_handed ? 2 * t->cap_handed : 64;
        int *nf = realloc(t->handed, ncap * sizeof(*nf));
        if (nf) {
            t->handed = nf;
            t->cap_handed = ncap;
        } else {
            ok = false;
        }
    }
    if (ok)
        t->handed[t->n_handed++] = fd;
    pthread_mutex_unlock(&t->hand_mu);
    if (ok && t->wake)
        t->wake(t->srv);
    return ok;
}

size_t gw_hub_take(gw_hub *h, unsigned thread, int *fds, size_t max)
{
    hub_thread *t = &h->t[thread];
    pthread_mutex_lock(&t->hand_mu);
    size_t n = t->n_handed < max ? t->n_handed : max;
    if (n == 0) {
        pthread_mutex_unlock(&t->hand_mu);
        return 0;
    }
    memcpy(fds, t->handed, n * sizeof(*fds));
    memmove(t->handed, t->handed + n, (t->n_handed - n) * sizeof(*fds));
    t->n_handed -= n;
    pthread_mutex_unlock(&t->hand_mu);
    return n;
}

/* ---- what a thread's writes changed ---------------------------------------------------- */

static void post_others(gw_hub *h, unsigned from, const st_change *ch)
{
    for (unsigned i = 0; i < h->n; i++)
        if (i != from)
            gw_feed_post(h->t[i].feed, ch, 1);
}

void gw_hub_tell(void *teller, const st_op *op)
{
    hub_thread *me = teller;
    gw_hub *h = me->hub;
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
    /* Acks and sign-outs were told when they came (gw_hub_tell_ack, gw_hub_tell_signout);
     * reads change nothing. */
    default: return;
    }
    post_others(h, me->index, &one);
}

void gw_hub_tell_ack(gw_hub *h, unsigned thread, const char *gid, const char *uid, uint64_t mid)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_ACK, .gid = st_id_str(gid), .uid = st_id_str(uid), .ack = mid};
    post_others(h, thread, &ch);
}

void gw_hub_tell_signout(gw_hub *h, unsigned thread, const char *uid)
{
    if (h->n < 2)
        return;
    st_change ch = {.kind = ST_CH_SIGNOUT, .uid = st_id_str(uid)};
    post_others(h, thread, &ch);
}

/* ---- who is online ------------------------------------------------------------------ */

void gw_hub_online(gw_hub *h, const char *uid, int delta)
{
    size_t n = strlen(uid);
    pthread_mutex_lock(&h->mu);
    online_user *o = NULL;
    HASH_FIND(hh, h->online, uid, n, o);
    if (!o && delta > 0 && (o = calloc(1, sizeof(*o) + n + 1))) {
        memcpy(o->uid, uid, n + 1);
        HASH_ADD(hh, h->online, uid, n, o);
    }
    if (o) {
        o->sessions = delta > 0 ? o->sessions + 1 : o->sessions ? o->sessions - 1 : 0;
        if (!o->sessions) {
            HASH_DEL(h->online, o);
            free(o);
        }
    }
    pthread_mutex_unlock(&h->mu);
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
    unsigned n = HASH_COUNT(h->online);
    pthread_mutex_unlock(&h->mu);
    return n;
}

uint64_t gw_hub_acks_pending(gw_hub *h, const char *gid, const char *uid)
{
    uint64_t most = 0;
    for (unsigned i = 0; i < h->n; i++) {
        gw_server *srv = h->t[i].srv;
        uint64_t x = srv ? gw_acks_pending(srv->acks, gid, uid) : 0;
        if (x > most)
            most = x;
    }
    return most;
}

/* ---- figures ----------------------------------------------------------------------- */

/* Under mu: publishes f as thread i's answer to the latest request. */
static void publish(gw_hub *h, unsigned i, const gw_figs *f)
{
    h->t[i].figs = *f;
    h->t[i].answered = h->wanted;
    pthread_cond_broadcast(&h->cv);
}

void gw_hub_serve(gw_hub *h, unsigned thread, gw_server *srv)
{
    pthread_mutex_lock(&h->mu);
    bool asked = h->t[thread].answered < h->wanted;
    pthread_mutex_unlock(&h->mu);
    if (!asked)
        return;
    gw_figs f;
    gw_stats_figs(srv, &f);
    pthread_mutex_lock(&h->mu);
    publish(h, thread, &f);
    pthread_mutex_unlock(&h->mu);
}

static bool all_answered(gw_hub *h, unsigned self, uint64_t want)
{
    for (unsigned i = 0; i < h->n; i++)
        if (i != self && !h->t[i].stopped && h->t[i].answered < want)
            return false;
    return true;
}

void gw_hub_figures(gw_hub *h, unsigned thread, gw_figs *all)
{
    if (h->n < 2)
        return;
    pthread_mutex_lock(&h->mu);
    uint64_t want = ++h->wanted;
    /* Answer for this thread too: another thread may be waiting for it at this moment. */
    publish(h, thread, all);
    pthread_mutex_unlock(&h->mu);
    for (unsigned i = 0; i < h->n; i++)
        if (i != thread && h->t[i].wake)
            h->t[i].wake(h->t[i].srv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += FIGURES_WAIT_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&h->mu);
    while (!all_answered(h, thread, want))
        if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT)
            break;
    for (unsigned i = 0; i < h->n; i++)
        if (i != thread)
            gw_figs_add(all, &h->t[i].figs);
    pthread_mutex_unlock(&h->mu);
}
