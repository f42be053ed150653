/*
 * The store thread: group commit, then reads.
 *
 * It takes every queued op at once (up to max_batch). The writes among them are applied
 * in queue order (store_apply.c) to one batch of the backend and committed together:
 * one synced write (RocksDB) or one transaction (PostgreSQL). A commit that lost to
 * another writer of the same database (ST_EAGAIN) is applied again from the start, a few
 * times at most. Then the reads taken with them are answered, so they see the batch.
 * Only then is each op's `done` called: the writes' in queue order, then the reads'.
 *
 * After a failed write the store refuses ops (ST_EIO, nothing applied) until it has
 * recovered; store_recover.c holds that side.
 */
#include "store_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_ATTEMPTS 8 /* a batch that keeps losing to other writers fails (ST_EIO) */

/* How long take() may wait for an op: a second (the idle probe's beat), or while the store
 * is failing until its next recovery attempt is due, so that the attempt is made on time
 * with no op coming (the backend's schedule may be shorter than a second). */
static uint64_t wait_ms(const st_store *s)
{
    if (!s->failed)
        return 1000;
    uint64_t now = st_mono_ms();
    if (s->retry_at_ms <= now)
        return 0;
    return s->retry_at_ms - now < 1000 ? s->retry_at_ms - now : 1000;
}

/* Takes up to max_batch ops off the queue. Waits while it is empty, for wait_ms() at
 * most: then *idle is set and NULL returned. NULL without idle: stop. */
static st_op *take(st_store *s, bool *idle)
{
    *idle = false;
    pthread_mutex_lock(&s->mu);
    if (!s->head && !s->closing) {
        uint64_t ms = wait_ms(s);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(ms / 1000);
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!s->head && !s->closing && !*idle)
            *idle = pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT;
        if (s->head)
            *idle = false;
    }
    st_op *first = s->head, *last = first;
    size_t n = first ? 1 : 0;
    while (last && last->next_ && n < s->max_batch) {
        last = last->next_;
        n++;
    }
    if (last) {
        s->head = last->next_;
        if (!s->head)
            s->tail = NULL;
        last->next_ = NULL;
    }
    atomic_fetch_sub(&s->pending, n);
    pthread_mutex_unlock(&s->mu);
    return first;
}

/* Completions last: `done` may free the op, so read the link first. */
static void complete(st_op *ops)
{
    for (st_op *op = ops, *next; op; op = next) {
        next = op->next_;
        op->done(op);
    }
}

/* The store is not taking writes: every op is answered ST_EIO at once. */
static void refuse(st_store *s, st_op *ops)
{
    for (st_op *op = ops; op; op = op->next_) {
        s->refused++;
        op->result = ST_EIO;
    }
}

static void clear_outputs(st_op *op)
{
    op->result = 0;
    if (op->kind != ST_OP_EDIT && op->kind != ST_OP_REACT) /* their mid is an input */
        op->mid = 0;
    op->ts = op->last_mid = op->ack = op->read = 0;
    op->cseq = op->count = op->last_cseq = 0;
    op->duplicate = op->created = op->joined = op->has_read = false;
    op->applied = 0;
}

/* Applies and commits the writes. A failed begin or commit puts the store in trouble; a
 * row that could not be read, or a batch that kept losing to other writers, only fails
 * this batch. */
static void commit_writes(st_store *s, st_op *writes)
{
    const st_backend *b = s->be_ops;
    char why[512] = "";
    int rc;
    bool unreadable = false;
    size_t n_ops, n_appends, n_created;
    for (int attempt = 1;; attempt++) {
        uint64_t now = st_now_ms(), t0 = st_mono_us();
        n_ops = n_appends = n_created = 0;
        unreadable = false;
        rc = b->begin(s->be, writes, why, sizeof(why));
        for (st_op *op = writes; rc == 0 && op; op = op->next_) {
            clear_outputs(op);
            if (b->refuses && b->refuses(s->be, op)) {
                op->result = ST_EMOVED; /* its slot is moving: not applied */
                continue;
            }
            op->result = st_apply(s, op, now);
            n_ops++;
            if (op->result == ST_EIO || op->result == ST_ENOMEM)
                unreadable = true;
            else if (op->result == ST_OK && op->kind == ST_OP_APPEND && !op->duplicate)
                n_appends++;
            else if (op->result == ST_OK && op->kind == ST_OP_JOIN && op->created)
                n_created++;
        }
        if (rc == 0 && unreadable) {
            b->rollback(s->be);
            break;
        }
        if (rc == 0) {
            rc = b->commit(s->be, why, sizeof(why));
            uint64_t us = st_mono_us() - t0;
            st_lat_add(&s->commit_lat, us);
            atomic_fetch_add(&s->commit_us_sum, us);
        }
        if (rc != ST_EAGAIN || attempt == MAX_ATTEMPTS)
            break;
        atomic_fetch_add(&s->commit_retries, 1);
    }
    if (rc == 0 && !unreadable) {
        for (st_op *op = writes; op; op = op->next_)
            if (op->result == ST_EMOVED) { /* the caller retries it, as after a failure */
                op->result = ST_EIO;
                atomic_fetch_add(&s->moved, 1);
            }
        atomic_fetch_add(&s->commits, 1);
        atomic_fetch_add(&s->ops, n_ops);
        atomic_fetch_add(&s->appends, n_appends);
        atomic_fetch_add(&s->messages, n_appends);
        atomic_fetch_add(&s->groups, n_created);
        return;
    }
    atomic_fetch_add(&s->commit_failures, 1);
    if (rc == ST_EIO)
        st_fail(s, why);
    /* Nothing of the batch is stored, and what an op was told while it was applied (a
     * refusal too) may have rested on an earlier op of it: every op gets ST_EIO. */
    for (st_op *op = writes; op; op = op->next_)
        op->result = ST_EIO;
}

static void answer_reads(st_store *s, st_op *reads)
{
    char why[512] = "";
    if (s->failed)
        refuse(s, reads);
    else if (s->be_ops->read(s->be, reads, why, sizeof(why)) == ST_EIO)
        st_fail(s, why);
    uint64_t now = st_mono_us();
    for (st_op *op = reads; op; op = op->next_) {
        st_lat_add(&s->read_lat, now - op->queued_us_);
        atomic_fetch_add(&s->read_us_sum, now - op->queued_us_);
        atomic_fetch_add(&s->reads, 1);
    }
}

/* The unread webhook's bookkeeping: after the batch's writes, each op on its own. */
static void answer_unread(st_store *s, st_op *ops, bool writable)
{
    char why[512] = "";
    if (!writable || s->failed)
        refuse(s, ops);
    else if (s->be_ops->unread(s->be, ops, st_now_ms(), why, sizeof(why)) == ST_EIO)
        st_fail(s, why);
    for (st_op *op = ops; op; op = op->next_) /* messages retention deleted */
        if (op->kind == ST_OP_TRIM && op->result == ST_OK && op->applied)
            atomic_fetch_sub(&s->messages, op->applied);
}

/* Which of a batch's lists an op goes to: writes, the unread webhook's, reads. */
static int list_of(const st_op *op)
{
    if (op->kind <= ST_OP_SEEN || op->kind == ST_OP_EDIT || op->kind == ST_OP_REACT)
        return 0;
    if (op->kind == ST_OP_READ_CHANGES)
        return 2;
    return op->kind >= ST_OP_TELL_CLAIM ? 1 : 2;
}

/* One batch: the writes, the unread webhook's ops, then the reads, each in queue order. */
static void run_batch(st_store *s, st_op *ops, bool writable)
{
    st_op *lists[3] = {NULL, NULL, NULL}, **tails[3] = {&lists[0], &lists[1], &lists[2]};
    for (st_op *op = ops, *next; op; op = next) {
        next = op->next_;
        op->next_ = NULL;
        int l = list_of(op);
        *tails[l] = op;
        tails[l] = &op->next_;
    }
    st_op *writes = lists[0], *unread = lists[1], *reads = lists[2];
    if (writes && writable) {
        commit_writes(s, writes);
    } else if (writes) {
        atomic_fetch_add(&s->commit_failures, 1);
        refuse(s, writes);
    }
    if (unread)
        answer_unread(s, unread, writable);
    if (reads)
        answer_reads(s, reads);
    complete(writes);
    complete(unread);
    complete(reads);
}

void *st_thread_main(void *arg)
{
    st_store *s = arg;
    st_op *ops;
    bool idle;
    pthread_setname_np(pthread_self(), "gw-store"); /* in top -H, perf and gdb */
    /* SCHED_BATCH: its wake-ups do not preempt a running service thread. Without it, a
     * service thread that shares a core with this one (one core, or more service threads
     * than cores) was cut off mid fan-out each time it queued an op, and its sessions
     * waited for the commit's fsync to finish: W3 on one core, 50% load, p99 13-21 ms
     * under the normal policy, about 5 ms under this one. Commits still get their share
     * of the core. Linux grants it without privilege; were it refused, the thread would
     * keep the normal policy, which is only slower, so the result is not checked (and
     * the store never prints). */
    struct sched_param sp = {0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    while ((ops = take(s, &idle)) != NULL || idle) {
        bool was_failed = s->failed;
        bool writable = st_recover(s);
        if (ops) {
            run_batch(s, ops, writable);
        } else if (writable && !was_failed) {
            /* Idle for a second: can the backend still write? (A recovery has just
             * asked.) */
            char why[512] = "";
            if (s->be_ops->probe(s->be, why, sizeof(why)) != 0)
                st_fail(s, why);
        }
    }
    return NULL;
}
