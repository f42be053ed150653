/*
 * The writer thread: group commit.
 *
 * It takes every queued op at once (up to max_batch), applies them in order to one
 * indexed write batch, and commits the batch with a single (synced) write. Reads inside
 * the batch go through the batch first, so a later op sees an earlier one's effect (two
 * sends with the same cid, a join then a send, mids handed out in the same batch). The
 * group's mid counter and the message are written together, so after a crash a mid is
 * never missing and never reused. Only then is each op's `done` called.
 *
 * After a failed write the store refuses ops (ST_EIO, nothing applied) until it has
 * recovered; store_recover.c holds that side.
 */
#include "store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct batch {
    st_store *s;
    rocksdb_writebatch_wi_t *wb;
    uint64_t now;  /* server time for every message of this batch */
    bool io_error; /* a read failed: the whole batch is refused */
} batch;

/* Reads key from the batch, then the database. Returns the value (rocksdb_free it) or
 * NULL when absent; sets io_error when the read itself failed. */
static char *get(batch *b, enum st_cf cf, const st_key *k, size_t *vlen)
{
    char *err = NULL;
    char *v = rocksdb_writebatch_wi_get_from_batch_and_db_cf(
        b->wb, b->s->rw.db, b->s->ropts, b->s->rw.cf[cf], k->b, k->n, vlen, &err);
    if (err) {
        rocksdb_free(err);
        b->io_error = true;
        return NULL;
    }
    return v;
}

static void put(batch *b, enum st_cf cf, const st_key *k, const char *v, size_t vlen)
{
    rocksdb_writebatch_wi_put_cf(b->wb, b->s->rw.cf[cf], k->b, k->n, v, vlen);
}

/* The group's row; false if the group does not exist. created may be NULL. */
static bool group_row(batch *b, st_id gid, uint64_t *last_mid, uint64_t *created)
{
    st_key k;
    size_t n = 0;
    st_key_id(&k, gid);
    char *v = get(b, ST_CF_GROUPS, &k, &n);
    bool found = v && n == ST_GROUP_VAL;
    if (found) {
        *last_mid = st_get_be64(v);
        if (created)
            *created = st_get_be64(v + 8);
    }
    rocksdb_free(v);
    return found;
}

static void put_group(batch *b, st_id gid, uint64_t last_mid, uint64_t created)
{
    st_key k;
    char v[ST_GROUP_VAL];
    st_key_id(&k, gid);
    st_put_be64(v, last_mid);
    st_put_be64(v + 8, created);
    put(b, ST_CF_GROUPS, &k, v, sizeof(v));
}

/* The member's ack; false if uid is not a member of gid. */
static bool member_ack(batch *b, st_id gid, st_id uid, uint64_t *ack, uint64_t *joined)
{
    st_key k;
    size_t n = 0;
    st_key_id2(&k, gid, uid);
    char *v = get(b, ST_CF_MEMBERS, &k, &n);
    bool found = v && n == ST_MEMBER_VAL;
    if (found) {
        *ack = st_get_be64(v);
        if (joined)
            *joined = st_get_be64(v + 8);
    }
    rocksdb_free(v);
    return found;
}

static void put_member(batch *b, st_id gid, st_id uid, uint64_t ack, uint64_t joined)
{
    st_key k;
    char v[ST_MEMBER_VAL];
    st_key_id2(&k, gid, uid);
    st_put_be64(v, ack);
    st_put_be64(v + 8, joined);
    put(b, ST_CF_MEMBERS, &k, v, sizeof(v));
}

static int apply_append(batch *b, st_op *op)
{
    st_key k;
    size_t n = 0;
    st_key_id2(&k, op->uid, op->cid);
    char *v = get(b, ST_CF_SENDS, &k, &n);
    if (v && n >= ST_SEND_HDR) {
        /* Seen before: answer with the first result, store nothing. */
        bool same_group = n - ST_SEND_HDR == op->gid.n &&
                          memcmp(v + ST_SEND_HDR, op->gid.p, op->gid.n) == 0;
        if (same_group) {
            op->mid = st_get_be64(v);
            op->ts = st_get_be64(v + 8);
            op->duplicate = true;
            group_row(b, op->gid, &op->last_mid, NULL);
        }
        rocksdb_free(v);
        return same_group ? ST_OK : ST_ECONFLICT;
    }
    rocksdb_free(v);

    uint64_t last_mid, created, ack;
    if (!group_row(b, op->gid, &last_mid, &created))
        return ST_ENOGROUP;
    if (!member_ack(b, op->gid, op->uid, &ack, NULL))
        return ST_ENOTMEMBER;

    uint64_t mid = last_mid + 1;
    char *msg = malloc(ST_MSG_HDR + op->record_n);
    if (!msg)
        return ST_ENOMEM;
    st_put_be64(msg, b->now);
    if (op->record_n)
        memcpy(msg + ST_MSG_HDR, op->record, op->record_n);
    st_key mk;
    st_key_msg(&mk, op->gid, mid);
    put(b, ST_CF_MSGS, &mk, msg, ST_MSG_HDR + op->record_n);
    free(msg);

    put_group(b, op->gid, mid, created);

    char sv[ST_SEND_HDR + ST_MAX_ID];
    st_put_be64(sv, mid);
    st_put_be64(sv + 8, b->now);
    memcpy(sv + ST_SEND_HDR, op->gid.p, op->gid.n);
    put(b, ST_CF_SENDS, &k, sv, ST_SEND_HDR + op->gid.n);

    op->mid = mid;
    op->ts = b->now;
    op->last_mid = mid;
    return ST_OK;
}

static int apply_join(batch *b, st_op *op)
{
    uint64_t last_mid = 0;
    if (!group_row(b, op->gid, &last_mid, NULL)) {
        if (!b->s->open_groups)
            return ST_ENOGROUP;
        put_group(b, op->gid, 0, b->now);
        op->created = true;
    }
    op->last_mid = last_mid;
    uint64_t ack;
    if (member_ack(b, op->gid, op->uid, &ack, NULL)) {
        op->ack = ack;
        return ST_OK;
    }
    /* A new member sees messages from now on: its ack starts at last_mid. */
    put_member(b, op->gid, op->uid, last_mid, b->now);
    st_key k;
    st_key_id2(&k, op->uid, op->gid);
    put(b, ST_CF_USER_GROUPS, &k, "", 0);
    op->ack = last_mid;
    op->joined = true;
    return ST_OK;
}

static int apply_leave(batch *b, st_op *op)
{
    uint64_t ack;
    if (!member_ack(b, op->gid, op->uid, &ack, NULL))
        return ST_ENOTMEMBER;
    st_key k;
    st_key_id2(&k, op->gid, op->uid);
    rocksdb_writebatch_wi_delete_cf(b->wb, b->s->rw.cf[ST_CF_MEMBERS], k.b, k.n);
    st_key_id2(&k, op->uid, op->gid);
    rocksdb_writebatch_wi_delete_cf(b->wb, b->s->rw.cf[ST_CF_USER_GROUPS], k.b, k.n);
    return ST_OK;
}

/* ack = max(old, min(M, last_mid)); acks of non-members are skipped, not errors: the
 * membership may have ended between the client's ack and this batch. */
static int apply_acks(batch *b, st_op *op)
{
    for (size_t i = 0; i < op->n_acks; i++) {
        const st_ack *a = &op->acks[i];
        uint64_t last_mid, old, joined;
        if (!group_row(b, a->gid, &last_mid, NULL) ||
            !member_ack(b, a->gid, a->uid, &old, &joined))
            continue;
        uint64_t want = a->mid < last_mid ? a->mid : last_mid;
        if (want > old) {
            put_member(b, a->gid, a->uid, want, joined);
            op->applied++;
        }
    }
    return ST_OK;
}

static int apply(batch *b, st_op *op)
{
    switch (op->kind) {
    case ST_OP_APPEND: return apply_append(b, op);
    case ST_OP_JOIN: return apply_join(b, op);
    case ST_OP_LEAVE: return apply_leave(b, op);
    case ST_OP_ACKS: return apply_acks(b, op);
    }
    return ST_EINVAL;
}

/* Takes up to max_batch ops off the queue. Waits while it is empty, for a second at most:
 * then *idle is set and NULL returned. NULL without idle: stop. */
static st_op *take(st_store *s, bool *idle)
{
    *idle = false;
    pthread_mutex_lock(&s->mu);
    if (!s->head && !s->closing) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
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

static uint64_t mono_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void record_latency(st_store *s, uint64_t us)
{
    atomic_fetch_add(&s->commit_us_sum, us);
    pthread_mutex_lock(&s->lat_mu);
    s->lat_us[s->lat_next] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    s->lat_next = (s->lat_next + 1) % ST_LAT_N;
    if (s->lat_n < ST_LAT_N)
        s->lat_n++;
    pthread_mutex_unlock(&s->lat_mu);
}

/* Idle for a second: one small synced write tells whether the disk still takes writes. */
static void probe(st_store *s)
{
    char why[512];
    if (!st_folder_same(s, why, sizeof(why)) || !st_probe_write(s, why, sizeof(why)))
        st_fail(s, why);
}

/* The store is not taking writes: every op of the batch is answered ST_EIO at once. */
static void refuse(st_store *s, st_op *ops)
{
    atomic_fetch_add(&s->commit_failures, 1);
    for (st_op *op = ops, *next; op; op = next) {
        next = op->next_;
        s->refused++;
        op->result = ST_EIO;
        op->done(op);
    }
}

/* One (synced) write of the whole batch. ST_EIO if it failed: the store is failing now. */
static int write_batch(batch *b)
{
    st_store *s = b->s;
    /* A folder removed or moved away: RocksDB would go on writing to its open files, no
     * longer under the store's path and gone at the next start. So the folder is checked
     * before the write (write nothing there) and after it (do not confirm a write it was
     * moved during). */
    char why[512];
    if (!st_folder_same(s, why, sizeof(why))) {
        st_fail(s, why);
        return ST_EIO;
    }
    char *err = NULL;
    uint64_t t0 = mono_us();
    rocksdb_write_writebatch_wi(s->rw.db, s->wopts, b->wb, &err);
    record_latency(s, mono_us() - t0);
    if (err) {
        st_fail(s, err);
        rocksdb_free(err);
        return ST_EIO;
    }
    if (!st_folder_same(s, why, sizeof(why))) {
        st_fail(s, why);
        return ST_EIO;
    }
    return ST_OK;
}

static void commit(batch *b, st_op *ops)
{
    st_store *s = b->s;
    size_t n_ops = 0, n_appends = 0, n_created = 0;
    b->now = st_now_ms();
    b->io_error = false;
    for (st_op *op = ops; op; op = op->next_) {
        /* A refused op must leave nothing behind in the batch. */
        rocksdb_writebatch_wi_set_save_point(b->wb);
        op->result = apply(b, op);
        if (op->result != ST_OK) {
            char *err = NULL;
            rocksdb_writebatch_wi_rollback_to_save_point(b->wb, &err);
            rocksdb_free(err);
        } else if (op->kind == ST_OP_APPEND && !op->duplicate) {
            n_appends++;
        } else if (op->kind == ST_OP_JOIN && op->created) {
            n_created++;
        }
        n_ops++;
    }
    int failure = b->io_error ? ST_EIO : ST_OK;
    if (!failure && rocksdb_writebatch_wi_count(b->wb) > 0)
        failure = write_batch(b);
    rocksdb_writebatch_wi_clear(b->wb);
    if (failure) {
        atomic_fetch_add(&s->commit_failures, 1);
    } else {
        atomic_fetch_add(&s->commits, 1);
        atomic_fetch_add(&s->ops, n_ops);
        atomic_fetch_add(&s->appends, n_appends);
        atomic_fetch_add(&s->messages, n_appends);
        atomic_fetch_add(&s->groups, n_created);
    }
    /* Completions last: `done` may free the op, so read the link first. */
    for (st_op *op = ops, *next; op; op = next) {
        next = op->next_;
        if (failure && op->result == ST_OK)
            op->result = failure;
        op->done(op);
    }
}

void *st_writer_main(void *arg)
{
    batch b = {.s = arg, .wb = rocksdb_writebatch_wi_create(0, 1)};
    st_op *ops;
    bool idle;
    while ((ops = take(b.s, &idle)) != NULL || idle) {
        bool writable = st_recover(b.s);
        if (ops && writable)
            commit(&b, ops);
        else if (ops)
            refuse(b.s, ops);
        else if (writable)
            probe(b.s);
    }
    rocksdb_writebatch_wi_destroy(b.wb);
    return NULL;
}
