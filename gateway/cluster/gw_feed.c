/* The change feed's queues (gw_cluster.h): the feed thread, or another service thread, to
 * a service thread. */
#include "gw_cluster.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A change with copies of what it points to, in one allocation. */
typedef struct entry {
    struct entry *next;
    st_change ch;
    size_t size;
    char bytes[]; /* gid, uid, key, record */
} entry;

struct gw_feed {
    pthread_mutex_t mu;
    entry *head, *tail; /* under mu */
    size_t n, bytes;    /* under mu */
    size_t max_n, max_bytes;
    void (*wake)(void *ud);
    void *wake_ud;
    uint64_t queued, dropped, overflows; /* under mu */
    atomic_bool waiting; /* something is queued: read without the lock (gw_feed_drain) */
};

struct gw_feeds {
    unsigned n;
    gw_feed *f[GW_THREADS_MAX];
    void (*heard)(void *ud, const st_change *ch); /* the process's own look (gw_hub.c) */
    void *heard_ud;
};

/* max_changes, max_bytes: the bound (0: defaults, 200,000 changes and 64 MiB). */
static gw_feed *feed_new(size_t max_changes, size_t max_bytes)
{
    gw_feed *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->max_n = max_changes ? max_changes : 200000;
    f->max_bytes = max_bytes ? max_bytes : (64u << 20);
    return f;
}

static void free_list(entry *e)
{
    while (e) {
        entry *next = e->next;
        free(e);
        e = next;
    }
}

static void feed_free(gw_feed *f)
{
    if (!f)
        return;
    free_list(f->head);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static entry *copy(const st_change *c)
{
    size_t size = c->gid.n + c->uid.n + c->key.n + (c->record ? c->record_n : 0);
    entry *e = malloc(sizeof(*e) + size);
    if (!e)
        return NULL;
    e->next = NULL;
    e->ch = *c;
    e->size = sizeof(*e) + size;
    char *p = e->bytes;
    /* A RESYNC has no ids, a leave no record: memcpy is given nothing but real bytes. */
    if (c->gid.n)
        memcpy(p, c->gid.p, c->gid.n);
    e->ch.gid.p = p;
    p += c->gid.n;
    if (c->uid.n)
        memcpy(p, c->uid.p, c->uid.n);
    e->ch.uid.p = p;
    p += c->uid.n;
    if (c->key.n) /* a reaction's key (ST_CH_REACT) */
        memcpy(p, c->key.p, c->key.n);
    e->ch.key.p = p;
    p += c->key.n;
    if (c->record) {
        if (c->record_n)
            memcpy(p, c->record, c->record_n);
        e->ch.record = p;
    }
    return e;
}

/* Under mu: everything queued goes; a RESYNC stands for it. */
static void overflow(gw_feed *f, entry **head, entry **tail)
{
    f->dropped += f->n;
    f->overflows++;
    free_list(f->head);
    f->head = f->tail = NULL;
    f->n = f->bytes = 0;
    free_list(*head);
    st_change r = {.kind = ST_CH_RESYNC};
    *head = *tail = copy(&r);
}

static void feed_post(gw_feed *f, const st_change *ch, size_t n)
{
    /* Copied outside the lock; linked under it. */
    entry *head = NULL, *tail = NULL;
    size_t bytes = 0;
    bool oom = false;
    for (size_t i = 0; i < n; i++) {
        entry *e = copy(&ch[i]);
        if (!e) {
            oom = true;
            break;
        }
        bytes += e->size;
        if (tail)
            tail->next = e;
        else
            head = e;
        tail = e;
    }
    pthread_mutex_lock(&f->mu);
    f->queued += n;
    /* A queue that holds something has a wake-up on its way already (the drain takes
     * everything): under load, one wake-up serves many posts. */
    bool wake_now = f->head == NULL;
    if (oom || f->n + n > f->max_n || f->bytes + bytes > f->max_bytes) {
        overflow(f, &head, &tail);
        n = head ? 1 : 0;
        bytes = head ? head->size : 0;
        wake_now = true;
    }
    if (head) {
        if (f->tail)
            f->tail->next = head;
        else
            f->head = head;
        f->tail = tail;
        f->n += n;
        f->bytes += bytes;
        atomic_store(&f->waiting, true);
    }
    void (*wake)(void *) = f->wake;
    void *ud = f->wake_ud;
    pthread_mutex_unlock(&f->mu);
    if (wake && wake_now)
        wake(ud);
}

void gw_feed_attach(gw_feed *f, void (*wake)(void *ud), void *ud)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->wake = wake;
    f->wake_ud = ud;
    pthread_mutex_unlock(&f->mu);
}

void gw_feed_drain(gw_feed *f, void (*apply)(void *ud, const st_change *ch), void *ud)
{
    /* Called before every frame a session sends (server/gw_server.c): an empty feed costs
     * one atomic read, not the lock. */
    if (!f || !atomic_load(&f->waiting))
        return;
    pthread_mutex_lock(&f->mu);
    entry *e = f->head;
    f->head = f->tail = NULL;
    f->n = f->bytes = 0;
    atomic_store(&f->waiting, false);
    pthread_mutex_unlock(&f->mu);
    while (e) {
        entry *next = e->next;
        apply(ud, &e->ch);
        free(e);
        e = next;
    }
}

bool gw_feed_pending(gw_feed *f)
{
    return f && atomic_load(&f->waiting);
}

void gw_feed_figures(gw_feed *f, uint64_t *queued, uint64_t *dropped, uint64_t *overflows)
{
    *queued = *dropped = *overflows = 0;
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    *queued = f->queued;
    *dropped = f->dropped;
    *overflows = f->overflows;
    pthread_mutex_unlock(&f->mu);
}

/* ---- one queue per service thread ------------------------------------------------------ */

void gw_feeds_free(gw_feeds *fs)
{
    if (!fs)
        return;
    for (unsigned i = 0; i < fs->n; i++)
        feed_free(fs->f[i]);
    free(fs);
}

gw_feeds *gw_feeds_new(unsigned n)
{
    gw_feeds *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return NULL;
    fs->n = n ? n : 1;
    for (unsigned i = 0; i < fs->n; i++)
        if (!(fs->f[i] = feed_new(0, 0))) {
            gw_feeds_free(fs);
            return NULL;
        }
    return fs;
}

gw_feed *gw_feeds_at(gw_feeds *fs, unsigned i)
{
    return fs->f[i];
}

void gw_feeds_post(void *feeds, const st_change *ch, size_t n)
{
    gw_feeds *fs = feeds;
    for (size_t i = 0; fs->heard && i < n; i++)
        fs->heard(fs->heard_ud, &ch[i]);
    if (fs->heard)
        fs->heard(fs->heard_ud, NULL); /* the end of one announcement */
    for (unsigned i = 0; i < fs->n; i++)
        feed_post(fs->f[i], ch, n);
}

void gw_feeds_heard(gw_feeds *fs, void (*heard)(void *ud, const st_change *ch), void *ud)
{
    fs->heard = heard;
    fs->heard_ud = ud;
}

void gw_feeds_post_others(gw_feeds *fs, unsigned from, const st_change *ch, size_t n)
{
    for (unsigned i = 0; i < fs->n; i++)
        if (i != from)
            feed_post(fs->f[i], ch, n);
}
