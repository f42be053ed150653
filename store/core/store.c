/* Opening and closing the store, the queue, the blocking helpers, and the figures. */
#include "store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_options_init(st_options *o)
{
    memset(o, 0, sizeof(*o));
    o->sync = true;
    o->open_groups = true;
}

static void set_err(char *buf, size_t len, const char *what, const char *detail)
{
    if (buf && len)
        snprintf(buf, len, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
}

static void core_destroy(st_store *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->err_mu);
    st_lat_destroy(&s->commit_lat);
    st_lat_destroy(&s->read_lat);
    free(s);
}

int st_core_open(const st_backend *ops, const st_options *o, st_store **out, char *errmsg,
                 size_t errmsg_len)
{
    *out = NULL;
    bool pg = o && o->url && *o->url;
    if (!o || (!pg && (!o->path || !*o->path))) {
        set_err(errmsg, errmsg_len, "store: no folder or database URL given", NULL);
        return ST_EINVAL;
    }
    st_store *s = calloc(1, sizeof(*s));
    if (!s)
        return ST_ENOMEM;
    s->be_ops = ops;
    s->open_groups = o->open_groups;
    s->max_batch = o->max_batch ? o->max_batch : 4096;
    s->on_event = o->on_event;
    s->event_ud = o->event_ud;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->err_mu, NULL);
    st_lat_init(&s->commit_lat);
    st_lat_init(&s->read_lat);

    char why[512] = "";
    int rc = s->be_ops->open(o, &s->be, why, sizeof(why));
    if (rc != ST_OK && rc != ST_EDOWN) {
        set_err(errmsg, errmsg_len, "store", why);
        core_destroy(s);
        return rc == ST_ENOMEM || rc == ST_EBUSY ? rc : ST_EIO;
    }
    atomic_store(&s->writable, true);
    if (rc == ST_EDOWN) {
        /* Reachable later, perhaps: start failing; the store thread connects when it can
         * and tells on_event meanwhile. */
        st_fail(s, why);
    } else {
        uint64_t groups = 0, messages = 0;
        s->be_ops->count(s->be, &groups, &messages);
        atomic_store(&s->groups, groups);
        atomic_store(&s->messages, messages);
    }
    if (pthread_create(&s->thread, NULL, st_thread_main, s) != 0) {
        set_err(errmsg, errmsg_len, "store: cannot start its thread", NULL);
        s->be_ops->close(s->be);
        core_destroy(s);
        return ST_EIO;
    }
    *out = s;
    return ST_OK;
}

int st_core_open_router(const st_router *ops, void *r, st_store **out)
{
    st_store *s = calloc(1, sizeof(*s));
    if (!(*out = s))
        return ST_ENOMEM;
    s->router = ops;
    s->router_ud = r;
    return ST_OK;
}

const char *st_backend_name(const st_store *s)
{
    if (s->router)
        return s->router->name(s->router_ud);
    return s->be_ops->name;
}

const char *st_where(const st_store *s)
{
    if (s->router)
        return s->router->where(s->router_ud);
    return s->be_ops->where(s->be);
}

uint64_t st_origin(const st_store *s)
{
    if (s->router)
        return s->router->origin(s->router_ud);
    return s->be_ops->origin(s->be);
}

void st_close(st_store *s)
{
    if (!s)
        return;
    if (s->router) {
        s->router->close(s->router_ud);
        free(s);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->be_ops->close(s->be);
    core_destroy(s);
}

static bool is_read(enum st_op_kind k)
{
    return (k >= ST_OP_READ_PAGE && k <= ST_OP_READ_SEEN) || k == ST_OP_READ_CHANGES;
}

bool st_op_valid(const st_op *op)
{
    if (!op || !op->done)
        return false;
    switch (op->kind) {
    case ST_OP_APPEND:
        return st_id_ok(op->gid) && st_id_ok(op->uid) && st_id_ok(op->cid) &&
               (op->record || op->record_n == 0);
    case ST_OP_JOIN:
    case ST_OP_LEAVE: return st_id_ok(op->gid) && st_id_ok(op->uid);
    case ST_OP_SIGNOUT: return st_id_ok(op->uid);
    case ST_OP_SEEN:
    case ST_OP_READ_SEEN:
        if (!op->seen || op->n_seen == 0)
            return false;
        for (size_t i = 0; i < op->n_seen; i++)
            if (!st_id_ok(op->seen[i].uid))
                return false;
        return true;
    case ST_OP_ACKS:
        for (size_t i = 0; i < op->n_acks; i++)
            if (!st_id_ok(op->acks[i].gid) || !st_id_ok(op->acks[i].uid))
                return false;
        return op->acks || op->n_acks == 0;
    case ST_OP_READ_PAGE:
        return st_id_ok(op->gid) && op->limit > 0 &&
               (op->dir == ST_AFTER || op->dir == ST_BEFORE) &&
               (op->uid.n == 0 || st_id_ok(op->uid));
    case ST_OP_REACT:
        return st_id_ok(op->gid) && st_id_ok(op->uid) && op->mid >= 1 &&
               st_react_key_ok(op->key, op->key_n);
    case ST_OP_READ_CHANGES:
        return st_id_ok(op->gid) && op->limit > 0 && (op->uid.n == 0 || st_id_ok(op->uid));
    case ST_OP_READ_GROUPS: return st_id_ok(op->uid);
    case ST_OP_READ_GROUP: return st_id_ok(op->gid) && (op->uid.n == 0 || st_id_ok(op->uid));
    case ST_OP_READ_MEMBERS:
        return st_id_ok(op->gid) && op->limit > 0 && (op->uid.n == 0 || st_id_ok(op->uid));
    case ST_OP_TELL_CLAIM:
    case ST_OP_TELL_SENT:
        if (!op->tells || op->n_tells == 0)
            return false;
        for (size_t i = 0; i < op->n_tells; i++)
            if (!st_id_ok(op->tells[i].id) ||
                (op->kind == ST_OP_TELL_CLAIM && !op->tells[i].event && op->tells[i].event_n))
                return false;
        return true;
    case ST_OP_TELL_ADOPT: return op->limit > 0;
    case ST_OP_SWEPT: return st_id_ok(op->gid) && op->from >= 1 && op->upto >= op->from;
    case ST_OP_READ_UNSWEPT:
        return op->limit > 0 && op->upto >= op->from && (op->gid.n == 0 || st_id_ok(op->gid));
    case ST_OP_SIGNAL: return op->record && op->record_n > 0 && op->record_n <= ST_SIGNAL_MAX;
    case ST_OP_EDIT: return st_id_ok(op->gid) && op->mid >= 1 && op->record && op->record_n > 0;
    case ST_OP_ERASE_USER: return st_id_ok(op->uid) && op->record && op->record_n > 0;
    case ST_OP_DELETE_GROUP: return st_id_ok(op->gid);
    case ST_OP_RETAIN: return st_id_ok(op->gid) && op->retain.until_acked <= ST_ACKED_OFF;
    case ST_OP_TRIM: return (op->gid.n == 0 || st_id_ok(op->gid)) && op->limit > 0;
    }
    return false;
}

void st_op_reset(st_op *op)
{
    op->result = 0;
    if (op->kind != ST_OP_EDIT && op->kind != ST_OP_REACT) /* their mid (and ver) are inputs */
        op->mid = op->ver = 0;
    op->ver_asked_ = op->ver; /* ver is an output too: a batch applied again asks the same */
    op->ts = op->last_mid = op->first_mid = op->ack = op->read = op->not_before = 0;
    op->duplicate = op->created = op->joined = op->has_read = false;
    op->applied = 0;
    op->shards_away = 0;
    op->page = NULL;
    op->groups = NULL;
    op->members = NULL;
    op->list = NULL;
    op->changed = NULL;
    op->cseq = op->count = op->last_cseq = 0;
    if (op->kind == ST_OP_TELL_CLAIM)
        for (size_t i = 0; i < op->n_tells; i++)
            op->tells[i].claimed = false;
    op->next_ = NULL;
}

int st_submit(st_store *s, st_op *op)
{
    /* The store thread needs `done`; a read answered at once does not, but one rule for
     * every op keeps callers honest about backends that queue their reads. */
    if (!st_op_valid(op))
        return ST_EINVAL;
    if (s->router)
        return s->router->submit(s->router_ud, op);
    if ((op->kind == ST_OP_REACT || op->kind == ST_OP_READ_CHANGES) && !s->be_ops->changes)
        return ST_EINVAL; /* a backend without changes yet */
    st_op_reset(op);
    op->queued_us_ = st_mono_us();
    if (is_read(op->kind) && s->be_ops->inline_reads) {
        char why[256];
        s->be_ops->read(s->be, op, why, sizeof(why));
        uint64_t us = st_mono_us() - op->queued_us_;
        st_lat_add(&s->read_lat, us);
        atomic_fetch_add(&s->read_us_sum, us);
        atomic_fetch_add(&s->reads, 1);
        return ST_DONE;
    }
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        return ST_ECLOSED;
    }
    if (op->urgent) {
        /* Ahead of the queue: safe for acks, which only name mids already committed. */
        op->next_ = s->head;
        s->head = op;
        if (!s->tail)
            s->tail = op;
    } else {
        if (s->tail)
            s->tail->next_ = op;
        else
            s->head = op;
        s->tail = op;
    }
    atomic_fetch_add(&s->pending, 1);
    pthread_mutex_unlock(&s->mu);
    /* After the unlock: the store thread wakes to a free mutex instead of blocking on it
     * at once (one context switch less per wake-up, which a lone sender feels). */
    pthread_cond_signal(&s->cv);
    return ST_OK;
}

size_t st_pending(const st_store *s)
{
    if (s->router)
        return s->router->pending(s->router_ud);
    return atomic_load(&((st_store *)s)->pending);
}

/* ---- blocking helpers ---------------------------------------------------------------- */

/* The ops of one st_submit_all still to be answered. */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
} waiter;

static void waiter_done(st_op *op)
{
    waiter *w = op->ud;
    pthread_mutex_lock(&w->mu);
    if (--w->left == 0)
        pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void st_submit_all(st_store *s, st_op *ops, size_t n, int *rcs)
{
    waiter w = {.left = n};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    for (size_t i = 0; i < n; i++) {
        ops[i].done = waiter_done;
        ops[i].ud = &w;
        rcs[i] = st_submit(s, &ops[i]);
        if (rcs[i] != 0) { /* answered at once (ST_DONE) or refused: no completion comes */
            pthread_mutex_lock(&w.mu);
            w.left--;
            pthread_mutex_unlock(&w.mu);
        }
    }
    pthread_mutex_lock(&w.mu);
    while (w.left)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

/* One op, submitted and waited for: its result, or why st_submit refused it. */
static int submit_wait(st_store *s, st_op *op)
{
    int rc;
    st_submit_all(s, op, 1, &rc);
    return rc == 0 || rc == ST_DONE ? op->result : rc;
}

int st_append_sync(st_store *s, st_id gid, st_id uid, st_id cid, const void *record,
                   size_t record_n, uint64_t *mid, uint64_t *ts, bool *duplicate)
{
    st_op op = {.kind = ST_OP_APPEND,
                .gid = gid,
                .uid = uid,
                .cid = cid,
                .record = record,
                .record_n = record_n};
    int rc = submit_wait(s, &op);
    if (mid)
        *mid = op.mid;
    if (ts)
        *ts = op.ts;
    if (duplicate)
        *duplicate = op.duplicate;
    return rc;
}

int st_edit_sync(st_store *s, st_id gid, uint64_t mid, uint64_t *ver, bool recall,
                 const void *record, size_t record_n, uint64_t *ts, bool *duplicate)
{
    st_op op = {.kind = ST_OP_EDIT,
                .gid = gid,
                .mid = mid,
                .ver = *ver,
                .recall = recall,
                .record = record,
                .record_n = record_n};
    int rc = submit_wait(s, &op);
    *ver = op.ver;
    if (ts)
        *ts = op.ts;
    if (duplicate)
        *duplicate = op.duplicate;
    return rc;
}

int st_join_sync(st_store *s, st_id gid, st_id uid, uint64_t *last_mid, uint64_t *ack)
{
    st_op op = {.kind = ST_OP_JOIN, .gid = gid, .uid = uid};
    int rc = submit_wait(s, &op);
    if (last_mid)
        *last_mid = op.last_mid;
    if (ack)
        *ack = op.ack;
    return rc;
}

int st_leave_sync(st_store *s, st_id gid, st_id uid)
{
    st_op op = {.kind = ST_OP_LEAVE, .gid = gid, .uid = uid};
    return submit_wait(s, &op);
}

int st_acks_sync(st_store *s, const st_ack *acks, size_t n, size_t *applied)
{
    st_op op = {.kind = ST_OP_ACKS, .acks = acks, .n_acks = n};
    int rc = submit_wait(s, &op);
    if (applied)
        *applied = op.applied;
    return rc;
}

int st_react_sync(st_store *s, st_id gid, uint64_t mid, st_id uid, st_id key, bool on,
                  uint64_t *cseq, uint64_t *count, bool *duplicate)
{
    st_op op = {.kind = ST_OP_REACT,
                .gid = gid,
                .mid = mid,
                .uid = uid,
                .key = key.p,
                .key_n = key.n,
                .on = on};
    int rc = submit_wait(s, &op);
    if (cseq)
        *cseq = op.cseq;
    if (count)
        *count = op.count;
    if (duplicate)
        *duplicate = op.duplicate;
    return rc;
}

int st_read_changes(st_store *s, st_id gid, uint64_t after, size_t limit, st_id uid, st_page **out)
{
    st_op op = {.kind = ST_OP_READ_CHANGES, .gid = gid, .from = after, .limit = limit, .uid = uid};
    int rc = submit_wait(s, &op);
    *out = rc == 0 ? op.page : NULL;
    if (rc != 0)
        st_page_free(op.page);
    return rc;
}

int st_read_last_mid(st_store *s, st_id gid, uint64_t *last_mid)
{
    st_op op = {.kind = ST_OP_READ_GROUP, .gid = gid};
    int rc = submit_wait(s, &op);
    if (rc == 0)
        *last_mid = op.last_mid;
    return rc;
}

int st_read_ack(st_store *s, st_id gid, st_id uid, uint64_t *ack)
{
    if (!st_id_ok(uid))
        return ST_EINVAL;
    st_op op = {.kind = ST_OP_READ_GROUP, .gid = gid, .uid = uid};
    int rc = submit_wait(s, &op);
    if (rc == ST_ENOGROUP)
        rc = ST_ENOTMEMBER;
    if (rc == 0)
        *ack = op.ack;
    return rc;
}

int st_read_user_groups(st_store *s, st_id uid, int (*cb)(void *ud, const st_user_group *g),
                        void *ud)
{
    if (!cb)
        return ST_EINVAL;
    st_op op = {.kind = ST_OP_READ_GROUPS, .uid = uid};
    int rc = submit_wait(s, &op);
    for (size_t i = 0; rc == 0 && i < st_groups_count(op.groups); i++)
        rc = cb(ud, st_groups_at(op.groups, i));
    st_groups_free(op.groups);
    return rc;
}

int st_signout_sync(st_store *s, st_id uid, uint64_t *not_before)
{
    st_op op = {.kind = ST_OP_SIGNOUT, .uid = uid};
    int rc = submit_wait(s, &op);
    if (not_before)
        *not_before = op.not_before;
    return rc;
}

int st_read_not_before(st_store *s, st_id uid, uint64_t *not_before)
{
    st_op op = {.kind = ST_OP_READ_GROUPS, .uid = uid};
    int rc = submit_wait(s, &op);
    st_groups_free(op.groups);
    *not_before = rc == 0 ? op.not_before : 0;
    return rc;
}

int st_read_page(st_store *s, st_id gid, enum st_dir dir, uint64_t from, size_t limit,
                 st_page **out)
{
    return st_read_page_bounded(s, gid, dir, from, limit, 0, out);
}

int st_read_page_bounded(st_store *s, st_id gid, enum st_dir dir, uint64_t from, size_t limit,
                         size_t max_bytes, st_page **out)
{
    st_op op = {.kind = ST_OP_READ_PAGE,
                .gid = gid,
                .dir = dir,
                .from = from,
                .limit = limit,
                .max_bytes = max_bytes};
    int rc = submit_wait(s, &op);
    *out = rc == 0 ? op.page : NULL;
    if (rc != 0)
        st_page_free(op.page);
    return rc;
}

int st_read_members(st_store *s, st_id gid, st_id after, size_t limit, st_members **out)
{
    st_op op = {.kind = ST_OP_READ_MEMBERS, .gid = gid, .uid = after, .limit = limit};
    int rc = submit_wait(s, &op);
    *out = rc == 0 ? op.members : NULL;
    if (rc != 0)
        st_members_free(op.members);
    return rc;
}

/* ---- figures ------------------------------------------------------------------------- */

void st_lat_init(st_lat *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
}

void st_lat_destroy(st_lat *l)
{
    pthread_mutex_destroy(&l->mu);
}

void st_lat_add(st_lat *l, uint64_t us)
{
    pthread_mutex_lock(&l->mu);
    l->us[l->next] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    l->next = (l->next + 1) % ST_LAT_N;
    if (l->n < ST_LAT_N)
        l->n++;
    pthread_mutex_unlock(&l->mu);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void st_lat_quantiles(st_lat *l, uint64_t *p50, uint64_t *p99)
{
    uint32_t lat[ST_LAT_N];
    pthread_mutex_lock(&l->mu);
    size_t n = l->n;
    memcpy(lat, l->us, n * sizeof(lat[0]));
    pthread_mutex_unlock(&l->mu);
    qsort(lat, n, sizeof(lat[0]), cmp_u32);
    *p50 = n ? lat[(n - 1) / 2] : 0;
    *p99 = n ? lat[(n * 99 - 1) / 100] : 0;
}

bool st_writable(st_store *s)
{
    if (s->router)
        return s->router->writable(s->router_ud);
    return atomic_load(&s->writable);
}

void st_write_error(st_store *s, char *buf, size_t len)
{
    if (!len)
        return;
    if (s->router) {
        s->router->write_error(s->router_ud, buf, len);
        return;
    }
    pthread_mutex_lock(&s->err_mu);
    snprintf(buf, len, "%s", s->err);
    pthread_mutex_unlock(&s->err_mu);
}

void st_read_stats(st_store *s, st_stats *out)
{
    if (s->router) {
        s->router->stats(s->router_ud, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    out->backend = s->be_ops->name;
    out->commits = atomic_load(&s->commits);
    out->ops = atomic_load(&s->ops);
    out->appends = atomic_load(&s->appends);
    out->commit_failures = atomic_load(&s->commit_failures);
    out->commit_retries = atomic_load(&s->commit_retries);
    out->messages = atomic_load(&s->messages);
    out->groups = atomic_load(&s->groups);
    out->commit_us_sum = atomic_load(&s->commit_us_sum);
    out->reads = atomic_load(&s->reads);
    out->read_us_sum = atomic_load(&s->read_us_sum);
    out->writable = atomic_load(&s->writable);
    out->write_errors = atomic_load(&s->write_errors);
    out->recoveries = atomic_load(&s->recoveries);
    out->moved = atomic_load(&s->moved);
    uint64_t failed_at = atomic_load(&s->failed_at_ms), now = st_mono_ms();
    out->unwritable_ms = failed_at && now > failed_at ? now - failed_at : 0;
    st_lat_quantiles(&s->commit_lat, &out->commit_p50_us, &out->commit_p99_us);
    st_lat_quantiles(&s->read_lat, &out->read_p50_us, &out->read_p99_us);
    s->be_ops->figures(s->be, out);
}
