/* Opening and closing the store, the write queue, and the blocking helpers. */
#include "store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const cf_names[ST_CF_COUNT] = {
    "default", "groups", "members", "user_groups", "msgs", "sends",
};

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

void st_db_close(st_db *d)
{
    for (int i = 0; i < ST_CF_COUNT; i++)
        if (d->cf[i])
            rocksdb_column_family_handle_destroy(d->cf[i]);
    if (d->db)
        rocksdb_close(d->db);
    memset(d, 0, sizeof(*d));
}

int st_db_open(st_store *s, st_db *d, bool read_only, char *why, size_t why_len)
{
    const rocksdb_options_t *cf_opts[ST_CF_COUNT];
    for (int i = 0; i < ST_CF_COUNT; i++)
        cf_opts[i] = s->opts;
    char *err = NULL;
    memset(d, 0, sizeof(*d));
    if (read_only)
        d->db = rocksdb_open_for_read_only_column_families(s->opts, s->path, ST_CF_COUNT, cf_names,
                                                           cf_opts, d->cf, 0, &err);
    else
        d->db = rocksdb_open_column_families(s->opts, s->path, ST_CF_COUNT, cf_names, cf_opts,
                                             d->cf, &err);
    if (err) {
        set_err(why, why_len, err, NULL);
        rocksdb_free(err);
        memset(d, 0, sizeof(*d)); /* RocksDB leaves nothing open when it fails */
        return ST_EIO;
    }
    return ST_OK;
}

static void free_handles(st_store *s)
{
    st_db_close(&s->rw);
    st_db_close(&s->ro);
    if (s->opts)
        rocksdb_options_destroy(s->opts);
    if (s->table)
        rocksdb_block_based_options_destroy(s->table);
    if (s->cache)
        rocksdb_cache_destroy(s->cache);
    if (s->wopts)
        rocksdb_writeoptions_destroy(s->wopts);
    if (s->ropts)
        rocksdb_readoptions_destroy(s->ropts);
    free(s->path);
}

/* Options shared by every column family: a bloom filter (most writer lookups, such as the
 * idempotency check of a new cid, are misses) and a shared block cache. */
static void make_options(st_store *s, const st_options *o)
{
    s->cache = rocksdb_cache_create_lru(o->cache_bytes ? o->cache_bytes : 64u << 20);
    s->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(s->table, s->cache);
    rocksdb_block_based_options_set_filter_policy(s->table, rocksdb_filterpolicy_create_bloom(10));
    s->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(s->opts, 1);
    rocksdb_options_set_create_missing_column_families(s->opts, 1);
    rocksdb_options_set_block_based_table_factory(s->opts, s->table);
    /* Two background threads: flushes and compactions must not wait on each other. */
    rocksdb_options_increase_parallelism(s->opts, 2);
    /* RocksDB's own LOG stays empty. Debian's librocksdb 7.8 is built with assertions on,
     * and once a write to LOG has failed (a full disk) the next one aborts the process
     * (WritableFileWriter asserts that no earlier write failed): a diagnostics file would
     * kill the gateway instead of the store refusing writes. At FATAL level nothing is
     * written, not even the options dump at open. What matters is told through on_event.
     * Each open rolls the empty LOG aside; keep few of those. */
    rocksdb_options_set_info_log_level(s->opts, 4 /* FATAL_LEVEL */);
    rocksdb_options_set_keep_log_file_num(s->opts, 2);
    s->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(s->wopts, o->sync);
    s->ropts = rocksdb_readoptions_create();
}

/* Messages and groups in the store: one scan of the groups (each row holds its last
 * mid, and mids are dense), at open and after a recovery (a batch whose sync failed may
 * have been stored after all); the writer keeps both current in between. */
void st_count_contents(st_store *s)
{
    uint64_t groups = 0, messages = 0;
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(s->rw.db, s->ropts, s->rw.cf[ST_CF_GROUPS]);
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t vn;
        const char *v = rocksdb_iter_value(it, &vn);
        if (vn == ST_GROUP_VAL) {
            groups++;
            messages += st_get_be64(v);
        }
    }
    rocksdb_iter_destroy(it);
    atomic_store(&s->groups, groups);
    atomic_store(&s->messages, messages);
}

int st_open(const st_options *o, st_store **out, char *errmsg, size_t errmsg_len)
{
    *out = NULL;
    if (!o || !o->path || !*o->path) {
        set_err(errmsg, errmsg_len, "store: no path given", NULL);
        return ST_EINVAL;
    }
    if (mkdir(o->path, 0700) != 0 && errno != EEXIST) {
        set_err(errmsg, errmsg_len, "store: cannot create folder", strerror(errno));
        return ST_EIO;
    }
    struct stat dir;
    if (stat(o->path, &dir) != 0) {
        set_err(errmsg, errmsg_len, "store: cannot read folder", strerror(errno));
        return ST_EIO;
    }
    st_store *s = calloc(1, sizeof(*s));
    if (!s)
        return ST_ENOMEM;
    s->path = strdup(o->path);
    s->open_groups = o->open_groups;
    s->max_batch = o->max_batch ? o->max_batch : 4096;
    s->on_event = o->on_event;
    s->event_ud = o->event_ud;
    s->dev = dir.st_dev;
    s->ino = dir.st_ino;
    make_options(s, o);

    char why[512];
    if (st_db_open(s, &s->rw, false, why, sizeof(why)) != ST_OK) {
        set_err(errmsg, errmsg_len, "store: cannot open database", why);
        goto fail;
    }
    /* From now on an open (a reopen after disk trouble) must find this database: never
     * put a new empty one in the place of a folder that went away. */
    rocksdb_options_set_create_if_missing(s->opts, 0);
    rocksdb_options_set_create_missing_column_families(s->opts, 0);
    st_count_contents(s);
    s->rd = &s->rw;
    atomic_store(&s->writable, true);
    pthread_rwlock_init(&s->rd_lock, NULL);
    pthread_mutex_init(&s->err_mu, NULL);
    pthread_mutex_init(&s->lat_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->writer, NULL, st_writer_main, s) != 0) {
        set_err(errmsg, errmsg_len, "store: cannot start writer thread", strerror(errno));
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->lat_mu);
        pthread_mutex_destroy(&s->err_mu);
        pthread_rwlock_destroy(&s->rd_lock);
        goto fail;
    }
    *out = s;
    return ST_OK;
fail:
    free_handles(s);
    free(s);
    return ST_EIO;
}

void st_close(st_store *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->writer, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->lat_mu);
    pthread_mutex_destroy(&s->err_mu);
    pthread_rwlock_destroy(&s->rd_lock);
    free_handles(s);
    free(s);
}

static bool op_valid(const st_op *op)
{
    if (!op || !op->done)
        return false;
    switch (op->kind) {
    case ST_OP_APPEND:
        return st_id_ok(op->gid) && st_id_ok(op->uid) && st_id_ok(op->cid) &&
               (op->record || op->record_n == 0);
    case ST_OP_JOIN:
    case ST_OP_LEAVE:
        return st_id_ok(op->gid) && st_id_ok(op->uid);
    case ST_OP_ACKS:
        for (size_t i = 0; i < op->n_acks; i++)
            if (!st_id_ok(op->acks[i].gid) || !st_id_ok(op->acks[i].uid))
                return false;
        return op->acks || op->n_acks == 0;
    }
    return false;
}

int st_submit(st_store *s, st_op *op)
{
    if (!op_valid(op))
        return ST_EINVAL;
    op->result = 0;
    op->mid = op->ts = op->last_mid = op->ack = 0;
    op->duplicate = op->created = op->joined = false;
    op->applied = 0;
    op->next_ = NULL;
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
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return ST_OK;
}

size_t st_pending(const st_store *s)
{
    return atomic_load(&((st_store *)s)->pending);
}

/* ---- blocking helpers ---------------------------------------------------------------- */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} waiter;

static void waiter_done(st_op *op)
{
    waiter *w = op->ud;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int submit_wait(st_store *s, st_op *op)
{
    waiter w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    op->done = waiter_done;
    op->ud = &w;
    int rc = st_submit(s, op);
    if (rc == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = op->result;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

int st_append_sync(st_store *s, st_id gid, st_id uid, st_id cid, const void *record,
                   size_t record_n, uint64_t *mid, uint64_t *ts, bool *duplicate)
{
    st_op op = {.kind = ST_OP_APPEND, .gid = gid, .uid = uid, .cid = cid, .record = record,
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

/* ---- figures ------------------------------------------------------------------------- */

/* Bytes of every file in the database folder: SST files, WAL, manifest. What an operator
 * sees with du, which is what matters when a disk fills up. */
static uint64_t folder_bytes(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    uint64_t total = 0;
    struct dirent *e;
    char buf[4096];
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(buf, sizeof(buf), "%s/%s", path, e->d_name);
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

bool st_writable(st_store *s)
{
    return atomic_load(&s->writable);
}

void st_write_error(st_store *s, char *buf, size_t len)
{
    if (!len)
        return;
    pthread_mutex_lock(&s->err_mu);
    snprintf(buf, len, "%s", s->err);
    pthread_mutex_unlock(&s->err_mu);
}

void st_read_stats(st_store *s, st_stats *out)
{
    out->commits = atomic_load(&s->commits);
    out->ops = atomic_load(&s->ops);
    out->appends = atomic_load(&s->appends);
    out->commit_failures = atomic_load(&s->commit_failures);
    out->messages = atomic_load(&s->messages);
    out->groups = atomic_load(&s->groups);
    out->commit_us_sum = atomic_load(&s->commit_us_sum);
    out->writable = atomic_load(&s->writable);
    out->write_errors = atomic_load(&s->write_errors);
    out->recoveries = atomic_load(&s->recoveries);
    uint64_t failed_at = atomic_load(&s->failed_at_ms), now = st_mono_ms();
    out->unwritable_ms = failed_at && now > failed_at ? now - failed_at : 0;
    uint32_t lat[ST_LAT_N];
    pthread_mutex_lock(&s->lat_mu);
    size_t n = s->lat_n;
    memcpy(lat, s->lat_us, n * sizeof(lat[0]));
    pthread_mutex_unlock(&s->lat_mu);
    qsort(lat, n, sizeof(lat[0]), cmp_u32);
    out->commit_p50_us = n ? lat[(n - 1) / 2] : 0;
    out->commit_p99_us = n ? lat[(n * 99 - 1) / 100] : 0;
    out->disk_bytes = folder_bytes(s->path);
}
