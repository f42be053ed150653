/*
 * Ack coalescing. Clients ack cumulatively and in batches; the gateway keeps only the
 * highest ack per (group, user) in memory and hands them all to the store as one op
 * ack_flush_ms after the first of them came (and at shutdown). A crash loses at most the
 * last interval's acks, which means re-delivery (absorbed by client dedup), never loss.
 * Reads (the second cursor: what the person has seen) ride along the same way: an entry
 * holds the highest ack and the highest read of its (group, user).
 */
#include "groups_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ack_entry {
    char key[2 * PR_MAX_ID + 2]; /* gid \1 uid */
    uint64_t mid;                /* the ack (0: none came) */
    uint64_t read;               /* when has_read */
    bool has_read;
    bool kept; /* written, and kept for a sign-in of its user under way (gw_acks_sweep) */
    UT_hash_handle hh;
} ack_entry;

struct gw_acks {
    gw_groups *g;
    bool stopping; /* gw_acks_stop: a failed batch has no next flush to wait for */
    /* The tables are read by the other service threads too (gw_acks_pending, for a user
     * who signs in there): under mu. Everything else is this thread's. */
    pthread_mutex_t mu;
    ack_entry *waiting; /* for the next flush */
    ack_entry *writing; /* flushed, the write not completed yet */
    /* The flush timer is libev's: libwebsockets 4.1's libev glue cannot move its one
     * timer earlier while it runs (ev_timer_set on an active watcher), so a libwebsockets
     * timer due sooner than the one already set fires late. */
    ev_timer timer;
};

/* One flush on its way to the store. */
typedef struct ack_batch {
    gw_job job; /* first: the completion finds the batch from its job */
    gw_acks *a;
    st_ack *acks; /* ids point into ids */
    char *ids;
    size_t n;
} ack_batch;

static size_t make_key(char *key, const char *gid, const char *uid)
{
    return (size_t)snprintf(key, 2 * PR_MAX_ID + 2, "%s\x01%s", gid, uid);
}

gw_acks *gw_acks_new(gw_groups *g)
{
    gw_acks *a = calloc(1, sizeof(*a));
    if (a) {
        a->g = g;
        pthread_mutex_init(&a->mu, NULL);
    }
    return a;
}

static void clear(ack_entry **h)
{
    GW_HASH_FREE_ALL(*h);
}

void gw_acks_free(gw_acks *a)
{
    if (!a)
        return;
    if (a->g->deps.loop)
        ev_timer_stop(a->g->deps.loop, &a->timer);
    clear(&a->waiting);
    clear(&a->writing);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static void on_flush_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    gw_acks_flush((gw_acks *)((char *)w - offsetof(gw_acks, timer)));
}

static void arm_flush(gw_acks *a)
{
    struct ev_loop *loop = a->g->deps.loop;
    if (!loop || ev_is_active(&a->timer))
        return; /* without a loop (the fuzz target) the caller flushes */
    ev_timer_init(&a->timer, on_flush_timer, a->g->deps.cfg->ack_flush_ms / 1000.0, 0);
    ev_timer_start(loop, &a->timer);
}

bool gw_acks_waiting(const gw_acks *a)
{
    return a->waiting != NULL;
}

void gw_acks_stop(gw_acks *a)
{
    a->stopping = true;
}

/* Takes the higher of e's and (mid, read) into e. */
static void merge(ack_entry *e, uint64_t mid, uint64_t read, bool has_read)
{
    if (mid > e->mid)
        e->mid = mid;
    if (has_read && (!e->has_read || read > e->read)) {
        e->read = read;
        e->has_read = true;
    }
}

static void add(gw_acks *a, const char *gid, const char *uid, uint64_t mid, uint64_t read,
                bool has_read)
{
    char key[2 * PR_MAX_ID + 2];
    size_t n = make_key(key, gid, uid);
    ack_entry *e = NULL;
    /* The flush timer runs only while acks wait: a gateway with nothing to flush is not
     * woken five times a second. */
    if (!a->waiting)
        arm_flush(a);
    pthread_mutex_lock(&a->mu);
    HASH_FIND(hh, a->waiting, key, n, e);
    if (!e && (e = calloc(1, sizeof(*e)))) { /* out of memory: lost, only re-delivered */
        memcpy(e->key, key, n + 1);
        HASH_ADD(hh, a->waiting, key, n, e);
    }
    if (e)
        merge(e, mid, read, has_read);
    pthread_mutex_unlock(&a->mu);
}

void gw_acks_add(gw_acks *a, const char *gid, const char *uid, uint64_t mid)
{
    add(a, gid, uid, mid, 0, false);
}

void gw_acks_add_read(gw_acks *a, const char *gid, const char *uid, uint64_t read)
{
    add(a, gid, uid, 0, read, true);
}

/* A user who signs in again while its acks are being written must see them: its groups
 * come from the store, which does not hold them yet (a second `tail` would otherwise
 * print again what the first one acked). */
uint64_t gw_acks_pending(gw_acks *a, const char *gid, const char *uid, uint64_t *read,
                         bool *has_read)
{
    char key[2 * PR_MAX_ID + 2];
    size_t n = make_key(key, gid, uid);
    ack_entry *e = NULL, *w = NULL, most = {.mid = 0};
    pthread_mutex_lock(&a->mu);
    HASH_FIND(hh, a->waiting, key, n, e);
    HASH_FIND(hh, a->writing, key, n, w);
    if (e)
        merge(&most, e->mid, e->read, e->has_read);
    if (w)
        merge(&most, w->mid, w->read, w->has_read);
    pthread_mutex_unlock(&a->mu);
    *read = most.read;
    *has_read = most.has_read;
    return most.mid;
}

/* Is a read of the user of key ("gid\1uid") for a hello under way in the process? */
static bool user_loading(gw_acks *a, const char *key)
{
    return gw_registry_loading(a->g->reg, strchr(key, '\x01') + 1);
}

/*
 * A batch's write completed (ok or not): its acks are no longer being written. But one
 * whose user's groups are being read for a hello, on any thread, stays visible to
 * gw_acks_pending until that read is over: the read may have been taken before this
 * write (a sign-in on another thread, or on this one held up), and when it comes back it
 * merges the acks pending, which must include this one. A read that began after this
 * point sees the write in the store: it was committed before we got here.
 */
static void written(gw_acks *a, const ack_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        char key[2 * PR_MAX_ID + 2];
        int kn = snprintf(key, sizeof(key), "%.*s\x01%.*s", (int)b->acks[i].gid.n, b->acks[i].gid.p,
                          (int)b->acks[i].uid.n, b->acks[i].uid.p);
        bool keep = user_loading(a, key);
        pthread_mutex_lock(&a->mu);
        ack_entry *w = NULL;
        HASH_FIND(hh, a->writing, key, (size_t)kn, w);
        const st_ack *k = &b->acks[i];
        /* A later batch may carry a higher one of either. */
        if (w && w->mid <= k->mid && (!w->has_read || (k->has_read && w->read <= k->read))) {
            if (keep) {
                w->kept = true;
            } else {
                HASH_DEL(a->writing, w);
                free(w);
            }
        }
        pthread_mutex_unlock(&a->mu);
    }
}

void gw_acks_sweep(gw_acks *a)
{
    pthread_mutex_lock(&a->mu);
    ack_entry *w, *tmp;
    HASH_ITER (hh, a->writing, w, tmp) {
        if (w->kept && !user_loading(a, w->key)) {
            HASH_DEL(a->writing, w);
            free(w);
        }
    }
    pthread_mutex_unlock(&a->mu);
}

static void batch_free(ack_batch *b)
{
    free(b->acks);
    free(b->ids);
    free(b);
}

static void flushed(gw_job *j)
{
    ack_batch *b = (ack_batch *)j;
    gw_acks *a = b->a;
    int rc = j->op.result;
    written(a, b);
    if (rc == 0) {
        a->g->figs.ack_writes++;
        a->g->figs.ack_entries += b->n;
    } else if (a->stopping) {
        /* No next flush to keep them for: after the restart clients get those messages
         * again (re-delivery, absorbed by their dedup), nothing is lost. */
        gw_warn("ack batch of %zu not persisted: %s (dropped while stopping)", b->n,
                st_strerror(rc));
    } else {
        /* Keep them for the next flush; lost only if the gateway dies before. */
        gw_warn("ack batch of %zu not persisted: %s (kept for the next flush)", b->n,
                st_strerror(rc));
        for (size_t i = 0; i < b->n; i++) {
            char gid[PR_MAX_ID + 1], uid[PR_MAX_ID + 1];
            snprintf(gid, sizeof(gid), "%.*s", (int)b->acks[i].gid.n, b->acks[i].gid.p);
            snprintf(uid, sizeof(uid), "%.*s", (int)b->acks[i].uid.n, b->acks[i].uid.p);
            add(a, gid, uid, b->acks[i].mid, b->acks[i].read, b->acks[i].has_read);
        }
    }
    batch_free(b);
}

void gw_acks_flush(gw_acks *a)
{
    /* Only this thread adds or takes entries: the count and the batch's room need no lock;
     * moving the entries to `writing` does. */
    size_t n = HASH_COUNT(a->waiting);
    if (n == 0)
        return;
    /* While the store takes no writes the acks wait here, and the timer looks again
     * after the next interval (a batch would only fail and come back); when stopping
     * they go, and a failure drops them (re-delivery). */
    if (!st_writable(a->g->deps.store) && !a->stopping) {
        arm_flush(a);
        return;
    }
    ack_batch *b = calloc(1, sizeof(*b));
    size_t ids_n = 0;
    ack_entry *e, *tmp;
    HASH_ITER (hh, a->waiting, e, tmp)
        ids_n += strlen(e->key) + 1;
    if (b) {
        b->acks = calloc(n, sizeof(*b->acks));
        b->ids = malloc(ids_n);
    }
    if (!b || !b->acks || !b->ids) {
        if (b)
            batch_free(b);
        gw_err("acks: out of memory; %zu acks kept for the next flush", n);
        arm_flush(a);
        return;
    }
    b->a = a;
    b->n = n;
    size_t i = 0, off = 0;
    pthread_mutex_lock(&a->mu);
    HASH_ITER (hh, a->waiting, e, tmp) {
        /* The key is "gid\1uid": copy it and split it in place. */
        size_t kl = strlen(e->key);
        char *k = b->ids + off;
        memcpy(k, e->key, kl + 1);
        char *sep = strchr(k, '\x01');
        b->acks[i++] = (st_ack){.gid = {k, (size_t)(sep - k)},
                                .uid = {sep + 1, kl - (size_t)(sep - k) - 1},
                                .mid = e->mid,
                                .read = e->read,
                                .has_read = e->has_read};
        off += kl + 1;
        HASH_DEL(a->waiting, e);
        ack_entry *w = NULL; /* visible to gw_acks_pending until written */
        HASH_FIND(hh, a->writing, e->key, kl, w);
        if (w) {
            merge(w, e->mid, e->read, e->has_read);
            w->kept = false; /* being written again: this batch's completion decides */
            free(e);
        } else {
            HASH_ADD(hh, a->writing, key, kl, e);
        }
    }
    pthread_mutex_unlock(&a->mu);
    b->job.op = (st_op){.kind = ST_OP_ACKS,
                        .acks = b->acks,
                        .n_acks = n,
                        .urgent = true}; /* a backlog of sends must not hold acks back */
    b->job.complete = flushed;
    int rc = gw_bridge_submit(a->g->deps.bridge, &b->job);
    if (rc < 0) {
        b->job.op.result = rc;
        flushed(&b->job);
    }
}
