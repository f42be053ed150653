/* The completion bridge (gw_core.h): store thread to service thread. */
#include "gw_core.h"

#include <pthread.h>
#include <stdlib.h>

struct gw_bridge {
    st_store *store;
    void (*wake)(void *ud);
    void *wake_ud;
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* for gw_bridge_wait */
    gw_job *head, *tail; /* posted, not drained: under mu */
    unsigned inflight;   /* service thread only */
    bool closed;         /* the store is closed: submits are refused (service thread) */
    void (*observe)(void *ud, const st_op *op); /* gw_bridge_observe */
    void *observe_ud;
};

gw_bridge *gw_bridge_new(st_store *store, void (*wake)(void *ud), void *ud)
{
    gw_bridge *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->store = store;
    b->wake = wake;
    b->wake_ud = ud;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    return b;
}

void gw_bridge_free(gw_bridge *b)
{
    if (!b)
        return;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Store thread: link the finished job for the service thread and wake it. */
static void posted(st_op *op)
{
    gw_job *j = op->ud;
    gw_bridge *b = j->bridge_;
    j->next_ = NULL;
    pthread_mutex_lock(&b->mu);
    if (b->tail)
        b->tail->next_ = j;
    else
        b->head = j;
    b->tail = j;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (b->wake)
        b->wake(b->wake_ud);
}

int gw_bridge_submit(gw_bridge *b, gw_job *j)
{
    j->op.done = posted;
    j->op.ud = j;
    j->bridge_ = b;
    j->next_ = NULL;
    if (b->closed)
        return ST_ECLOSED; /* st_close freed the store: a completion drained after it may
                            * still want to read on */
    int rc = st_submit(b->store, &j->op);
    if (rc == ST_DONE) {
        j->complete(j);
        return 1;
    }
    if (rc == 0)
        b->inflight++;
    return rc;
}

void gw_bridge_observe(gw_bridge *b, void (*fn)(void *ud, const st_op *op), void *ud)
{
    b->observe = fn;
    b->observe_ud = ud;
}

void gw_bridge_close(gw_bridge *b)
{
    b->closed = true;
}

void gw_bridge_drain(gw_bridge *b)
{
    pthread_mutex_lock(&b->mu);
    gw_job *j = b->head;
    b->head = b->tail = NULL;
    pthread_mutex_unlock(&b->mu);
    while (j) {
        gw_job *next = j->next_;
        j->next_ = NULL;
        b->inflight--;
        if (b->observe)
            b->observe(b->observe_ud, &j->op);
        j->complete(j);
        j = next;
    }
}

unsigned gw_bridge_inflight(const gw_bridge *b)
{
    return b->inflight;
}

void gw_bridge_wait(gw_bridge *b)
{
    pthread_mutex_lock(&b->mu);
    while (!b->head && b->inflight)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

void gw_op_release(st_op *op)
{
    st_page_free(op->page);
    st_groups_free(op->groups);
    st_members_free(op->members);
    st_list_free(op->changed);
    op->changed = NULL;
    op->page = NULL;
    op->groups = NULL;
    op->members = NULL;
}
