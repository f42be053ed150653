/*
 * The RocksDB backend: the embedded default, one process owning a local folder.
 *
 * Writes: a batch is one indexed write batch (WriteBatchWithIndex), so the rows the
 * batch reads come from the batch first and then the database; the commit is one write,
 * synced when the store's sync option is on. Reads (store_rocks_read.c) are answered at
 * once on the caller's thread: RocksDB is thread-safe, and they read the memtable and the
 * block cache.
 *
 * Trouble. RocksDB, once a write to its WAL or a flush has failed, keeps a background
 * error and refuses every later write; the C API of Debian's RocksDB 7.8 has no
 * rocksdb_resume, so the only way back is to close the database and open it again.
 * recover() first tries a probe write on the open handle (enough when RocksDB did not
 * keep the error), and otherwise reopens, which replays the WAL. Before the first reopen,
 * readers are moved to a read-only handle (which writes nothing, so it opens on a full
 * disk), so that no read waits for the reopen and none ever sees a handle being closed.
 * A reopen never creates a database: a folder that went away must not come back as an
 * empty store. The folder is checked (device and inode, as opened) before and after
 * every commit and at each probe: RocksDB would go on writing into files of a removed or
 * moved folder, gone at the next start, so such a write is not confirmed.
 */
#include "store_rocks.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *const cf_names[RK_CF_COUNT] = {
    "default", "groups",     "members",      "user_groups",    "msgs",
    "sends",   "unread_log", "unread_swept", "unread_tells",   "users",
    "revoked", "changes",    "reactions",    "user_reactions",
};

static void set_why(char *why, size_t len, const char *what, const char *detail)
{
    snprintf(why, len, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
}

static void db_close(rk_db *d)
{
    for (int i = 0; i < RK_CF_COUNT; i++)
        if (d->cf[i])
            rocksdb_column_family_handle_destroy(d->cf[i]);
    if (d->db)
        rocksdb_close(d->db);
    memset(d, 0, sizeof(*d));
}

/* Opens the database at r->path into *d, read-write or read-only. 0 or ST_EIO. */
static int db_open(rk *r, rk_db *d, bool read_only, char *why, size_t why_len)
{
    const rocksdb_options_t *cf_opts[RK_CF_COUNT];
    for (int i = 0; i < RK_CF_COUNT; i++)
        cf_opts[i] = r->opts;
    cf_opts[RK_CF_SENDS] = r->trim.sends_opts;
    char *err = NULL;
    memset(d, 0, sizeof(*d));
    if (read_only)
        d->db = rocksdb_open_for_read_only_column_families(r->opts, r->path, RK_CF_COUNT, cf_names,
                                                           cf_opts, d->cf, 0, &err);
    else
        d->db = rocksdb_open_column_families(r->opts, r->path, RK_CF_COUNT, cf_names, cf_opts,
                                             d->cf, &err);
    if (err) {
        snprintf(why, why_len, "%s", err);
        rocksdb_free(err);
        memset(d, 0, sizeof(*d)); /* RocksDB leaves nothing open when it fails */
        return ST_EIO;
    }
    if (!read_only)
        rk_sends_filter_db(r, d);
    return ST_OK;
}

static void rk_close(void *be)
{
    rk *r = be;
    if (!r)
        return;
    rk_sends_filter_db(r, NULL);
    db_close(&r->rw);
    db_close(&r->ro);
    if (r->wb)
        rocksdb_writebatch_wi_destroy(r->wb);
    if (r->opts)
        rocksdb_options_destroy(r->opts);
    if (r->trim.sends_opts)
        rocksdb_options_destroy(r->trim.sends_opts);
    if (r->trim.filter)
        rocksdb_compactionfilter_destroy(r->trim.filter);
    if (r->table)
        rocksdb_block_based_options_destroy(r->table);
    if (r->cache)
        rocksdb_cache_destroy(r->cache);
    if (r->wopts)
        rocksdb_writeoptions_destroy(r->wopts);
    if (r->ropts)
        rocksdb_readoptions_destroy(r->ropts);
    pthread_rwlock_destroy(&r->rd_lock);
    rocksdb_free(r->msg_val);
    free(r->lines);
    free(r->trim.ranges);
    free(r->path);
    free(r);
}

/* Options shared by every column family: a bloom filter (most lookups of a batch, such as
 * the idempotency check of a new cid, are misses) and a shared block cache. */
static void make_options(rk *r, const st_options *o)
{
    r->cache = rocksdb_cache_create_lru(o->cache_bytes ? o->cache_bytes : 64u << 20);
    r->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(r->table, r->cache);
    rocksdb_block_based_options_set_filter_policy(r->table, rocksdb_filterpolicy_create_bloom(10));
    r->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(r->opts, 1);
    rocksdb_options_set_create_missing_column_families(r->opts, 1);
    rocksdb_options_set_block_based_table_factory(r->opts, r->table);
    /* Two background threads: flushes and compactions must not wait on each other. */
    rocksdb_options_increase_parallelism(r->opts, 2);
    /* RocksDB's own LOG stays empty. Debian's librocksdb 7.8 is built with assertions on,
     * and once a write to LOG has failed (a full disk) the next one aborts the process
     * (WritableFileWriter asserts that no earlier write failed): a diagnostics file would
     * kill the gateway instead of the store refusing writes. At FATAL level nothing is
     * written, not even the options dump at open. What matters is told through on_event.
     * Each open rolls the empty LOG aside; keep few of those. */
    rocksdb_options_set_info_log_level(r->opts, 4 /* FATAL_LEVEL */);
    rocksdb_options_set_keep_log_file_num(r->opts, 2);
    /* The write-ahead log is shared by the families, and a log file goes only once every
     * family with data in it has flushed: the groups' rows (a few bytes a batch) would
     * keep every log since their last flush, hundreds of MiB under a steady load, and
     * the disk would grow even with retention deleting as fast as messages come. Past
     * this much log the families holding the oldest file are flushed. */
    rocksdb_options_set_max_total_wal_size(r->opts, 64u << 20);
    r->trim.sends_opts = rocksdb_options_create_copy(r->opts);
    r->trim.filter = rk_sends_filter_new(r);
    rocksdb_options_set_compaction_filter(r->trim.sends_opts, r->trim.filter);
    r->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(r->wopts, o->sync);
    r->ropts = rocksdb_readoptions_create();
}

/* Does the database in the folder have this column family? (false: none yet, or no
 * database yet.) */
static bool has_cf(rk *r, const char *name)
{
    size_t n = 0;
    char *err = NULL;
    char **names = rocksdb_list_column_families(r->opts, r->path, &n, &err);
    rocksdb_free(err);
    bool found = false;
    for (size_t i = 0; names && i < n; i++)
        found |= strcmp(names[i], name) == 0;
    if (names)
        rocksdb_list_column_families_destroy(names, n);
    return found;
}

/* The process that holds the folder's LOCK file, on which RocksDB takes a POSIX lock for
 * as long as it has the folder open: its pid as /proc/locks lists it, or 0 (none listed:
 * gone by now, or no /proc). Only read: opening LOCK to ask fcntl would, once closed,
 * drop this process's own lock on it if another store of this process holds it. */
static long lock_holder(const char *path)
{
    char lock[4200];
    struct stat st;
    snprintf(lock, sizeof(lock), "%s/LOCK", path);
    FILE *f = stat(lock, &st) == 0 ? fopen("/proc/locks", "r") : NULL;
    if (!f)
        return 0;
    /* "1: POSIX  ADVISORY  WRITE 1234 fe:00:10953106 0 EOF": pid, device (hex), inode.
     * A waiter's line ("1: -> POSIX ...") does not match. */
    char line[256];
    long pid = 0;
    while (!pid && fgets(line, sizeof(line), f)) {
        long p;
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*d: POSIX %*s %*s %ld %x:%x:%llu", &p, &maj, &min, &ino) == 4 &&
            maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino)
            pid = p;
    }
    fclose(f);
    return pid;
}

/* Why db_open failed, when it is because the folder is in use (RocksDB's words for it,
 * "While lock file: ...: Resource temporarily unavailable" or "lock hold by current
 * process", name no cause a reader would act on): ST_EBUSY with why naming the holder,
 * else ST_EIO with RocksDB's error as it is. */
static int open_failure(const char *path, const char *err, char *why, size_t why_len)
{
    long pid = lock_holder(path);
    if (!pid && !strstr(err, "lock file") && !strstr(err, "lock hold")) {
        set_why(why, why_len, "cannot open database", err);
        return ST_EIO;
    }
    if (pid == (long)getpid())
        snprintf(why, why_len, "this process has %s open already", path);
    else if (pid)
        snprintf(why, why_len, "process %ld has %s open", pid, path);
    else
        snprintf(why, why_len, "another process has %s open (RocksDB: %s)", path, err);
    return ST_EBUSY;
}

static int rk_open(const st_options *o, void **be, char *why, size_t why_len)
{
    *be = NULL;
    if (mkdir(o->path, 0700) != 0 && errno != EEXIST) {
        set_why(why, why_len, "cannot create folder", strerror(errno));
        return ST_EIO;
    }
    struct stat dir;
    if (stat(o->path, &dir) != 0) {
        set_why(why, why_len, "cannot read folder", strerror(errno));
        return ST_EIO;
    }
    rk *r = calloc(1, sizeof(*r));
    if (!r)
        return ST_ENOMEM;
    pthread_rwlock_init(&r->rd_lock, NULL);
    r->path = strdup(o->path);
    r->unread_log = o->unread_log;
    r->changes_keep = st_changes_keep(o->changes_keep);
    r->changes_keep_ms = o->changes_keep_ms;
    r->opened_ms = st_now_ms();
    if (RAND_bytes((unsigned char *)&r->origin, sizeof(r->origin)) != 1)
        r->origin = st_now_ms() ^ ((uint64_t)getpid() << 40);
    r->dev = dir.st_dev;
    r->ino = dir.st_ino;
    make_options(r, o);
    r->wb = rocksdb_writebatch_wi_create(0, 1);
    char err[512];
    bool had_swept = r->path && has_cf(r, "unread_swept");
    if (!r->path) {
        set_why(why, why_len, "out of memory", NULL);
        rk_close(r);
        return ST_ENOMEM;
    }
    if (db_open(r, &r->rw, false, err, sizeof(err)) != ST_OK) {
        int rc = open_failure(r->path, err, why, why_len);
        rk_close(r);
        return rc;
    }
    if (!had_swept && rk_unread_mark_all(r, err, sizeof(err)) != ST_OK) {
        set_why(why, why_len, "cannot add the unread webhook's marks", err);
        rk_close(r);
        return ST_EIO;
    }
    /* From now on an open (a reopen after disk trouble) must find this database: never
     * put a new empty one in the place of a folder that went away. */
    rocksdb_options_set_create_if_missing(r->opts, 0);
    rocksdb_options_set_create_missing_column_families(r->opts, 0);
    r->rd = &r->rw;
    *be = r;
    return ST_OK;
}

/* ---- a batch ---------------------------------------------------------------------------- */

static int rk_begin(void *be, st_op *writes, char *why, size_t why_len)
{
    rk *r = be;
    r->unreadable = false;
    return ST_OK;
}

static void rk_rollback(void *be)
{
    rk *r = be;
    rocksdb_writebatch_wi_clear(r->wb);
    r->unreadable = false;
    r->n_lines = 0;
    rk_scrub_batch_end(r, false);
}

static int rk_commit(void *be, char *why, size_t why_len)
{
    rk *r = be;
    rk_unread_lines(r);
    int rc = rk_write(r, why, why_len);
    rk_scrub_batch_end(r, rc == ST_OK);
    char scrub_why[256];
    if (rc == ST_OK) /* the batch stands whatever the scrub does (it is tried again later) */
        rk_scrub(r, scrub_why, sizeof(scrub_why));
    return rc;
}

/* st_backend.unread: the ops that are not messages (the unread webhook's, erasures,
 * deletions, retention), each a write of its own, in order. Here, over the files that
 * carry each op out, which never call this one back. */
static int rk_unread(void *be, st_op *ops, uint64_t now, char *why, size_t why_len)
{
    rk *r = be;
    for (st_op *op = ops; op; op = op->next_) {
        int rc;
        r->unreadable = false;
        switch (op->kind) {
        case ST_OP_ERASE_USER: rc = rk_erase_user(r, op, now); break;
        case ST_OP_DELETE_GROUP: rc = rk_delete_group(r, op); break;
        case ST_OP_RETAIN: rc = rk_retain(r, op); break;
        case ST_OP_TRIM: rc = rk_trim(r, op, now, why, why_len); break;
        default: rc = rk_unread_op(r, op, now); break;
        }
        /* Each op is a write of its own: what it changed, or nothing (a read). */
        if (rc == ST_OK)
            rc = rk_write(r, why, why_len);
        else
            rocksdb_writebatch_wi_clear(r->wb);
        rk_scrub_batch_end(r, rc == ST_OK); /* an erasure's tombstones (store_rocks_erase.c) */
        op->result = rc;
        if (rc != ST_OK) {
            st_read_discard(op);
            if (op->kind == ST_OP_TELL_CLAIM)
                for (size_t i = 0; i < op->n_tells; i++)
                    op->tells[i].claimed = false;
            if (rc == ST_EIO) {
                for (st_op *rest = op->next_; rest; rest = rest->next_)
                    rest->result = ST_EIO;
                return ST_EIO;
            }
        }
    }
    char scrub_why[256];
    rk_scrub(r, scrub_why, sizeof(scrub_why));
    rk_unread_prune(r, now);
    return ST_OK;
}

/* ---- trouble ------------------------------------------------------------------------------ */

/* One small synced write: does the database take writes? */
static bool probe_write(rk *r, char *why, size_t why_len)
{
    static const char key[] = "probe";
    char val[8];
    st_put_be64(val, st_now_ms());
    char *err = NULL;
    rocksdb_put_cf(r->rw.db, r->wopts, r->rw.cf[RK_CF_DEFAULT], key, sizeof(key) - 1, val,
                   sizeof(val), &err);
    if (!err)
        return true;
    snprintf(why, why_len, "%s", err);
    rocksdb_free(err);
    return false;
}

static int rk_probe(void *be, char *why, size_t why_len)
{
    rk *r = be;
    if (!rk_folder_same(r, why, why_len) || !probe_write(r, why, why_len))
        return ST_EIO;
    char scrub_why[256]; /* idle: the recalls' scrub need not wait (a failed one waits) */
    rk_scrub(r, scrub_why, sizeof(scrub_why));
    return ST_OK;
}

/* Points readers at d (or at nothing). Waits for the reads under way to end, so that
 * the handle they used can be closed afterwards. */
static void set_readers(rk *r, rk_db *d)
{
    pthread_rwlock_wrlock(&r->rd_lock);
    r->rd = d;
    pthread_rwlock_unlock(&r->rd_lock);
}

/* Closes the writer's handle and opens it again; readers meanwhile use a read-only
 * handle. False with why if the database does not open (yet). */
static bool reopen(rk *r, char *why, size_t why_len)
{
    char ro_why[512];
    if (r->rd == &r->rw) {
        bool ro = db_open(r, &r->ro, true, ro_why, sizeof(ro_why)) == ST_OK;
        /* Without a read-only handle reads fail (ST_EIO) until one opens: better than
         * waiting for the reopen. */
        set_readers(r, ro ? &r->ro : NULL);
    }
    rk_sends_filter_db(r, NULL);
    db_close(&r->rw);
    atomic_fetch_add(&r->reopens, 1);
    if (db_open(r, &r->rw, false, why, why_len) == ST_OK)
        return true;
    if (!r->rd && db_open(r, &r->ro, true, ro_why, sizeof(ro_why)) == ST_OK)
        set_readers(r, &r->ro);
    return false;
}

static int rk_recover(void *be, char *why, size_t why_len)
{
    rk *r = be;
    /* A folder that went away is not reopened (that would find nothing, or another
     * database); the handles stay as they are until it is back. */
    bool ok = rk_folder_same(r, why, why_len);
    if (ok && !(r->rw.db && probe_write(r, why, why_len)))
        ok = reopen(r, why, why_len) && probe_write(r, why, why_len);
    if (!ok)
        return ST_EIO;
    if (r->rd != &r->rw) {
        set_readers(r, &r->rw);
        db_close(&r->ro);
    }
    return ST_OK;
}

/* Messages and groups in the store: one scan of the groups (each row holds its last
 * mid, and mids are dense). */
static int rk_count(void *be, uint64_t *groups, uint64_t *messages)
{
    rk *r = be;
    *groups = *messages = 0;
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->rw.db, r->ropts, r->rw.cf[RK_CF_GROUPS]);
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t vn;
        const char *v = rocksdb_iter_value(it, &vn);
        st_group_row g;
        if (rk_group_decode(v, vn, &g)) {
            (*groups)++;
            *messages += g.last_mid - (g.first_mid - 1); /* dense above the horizon */
        }
    }
    rocksdb_iter_destroy(it);
    return ST_OK;
}

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

static void rk_figures(void *be, st_stats *out)
{
    rk *r = be;
    pthread_rwlock_rdlock(&r->rd_lock);
    out->connected = r->rd != NULL;
    pthread_rwlock_unlock(&r->rd_lock);
    out->reconnects = atomic_load(&r->reopens);
    out->disk_bytes = folder_bytes(r->path);
}

static uint64_t rk_origin(void *be)
{
    return ((rk *)be)->origin;
}

static const char *rk_where(void *be)
{
    return ((rk *)be)->path;
}

const st_backend st_rocks_backend = {
    .name = "rocksdb",
    .inline_reads = true,
    .open = rk_open,
    .close = rk_close,
    .begin = rk_begin,
    .get_group = rk_get_group,
    .put_group = rk_put_group,
    .get_member = rk_get_member,
    .add_member = rk_add_member,
    .put_member = rk_put_member,
    .del_member = rk_del_member,
    .get_send = rk_get_send,
    .put_send = rk_put_send,
    .put_msg = rk_put_msg,
    .get_msg = rk_get_msg,
    .put_version = rk_put_version,
    .changes = true,
    .get_reaction = rk_get_reaction,
    .put_react = rk_put_react,
    .put_log = rk_put_log,
    .put_seen = rk_put_seen,
    .put_not_before = rk_put_not_before,
    .commit = rk_commit,
    .rollback = rk_rollback,
    .read = rk_read,
    .unread = rk_unread,
    .probe = rk_probe,
    .recover = rk_recover,
    .count = rk_count,
    .figures = rk_figures,
    .where = rk_where,
    .origin = rk_origin,
};
