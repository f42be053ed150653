/*
 * Disk trouble: what the writer does after a write failed (a full disk, a folder turned
 * read-only, removed or moved away), until writes work again.
 *
 * RocksDB, once a write to its WAL or a flush has failed, keeps a background error and
 * refuses every later write; the C API of Debian's RocksDB 7.8 has no rocksdb_resume, so
 * the only way back is to close the database and open it again. So, while failing:
 *
 * - every op gets ST_EIO at once (store_writer.c), and nothing is confirmed;
 * - on a schedule (1 s after the failure, then 2, 4, and every 5 s), the writer tries to
 *   recover: if the folder is still the one it opened, a probe write on the open handle
 *   (enough when RocksDB did not keep the error); else it reopens the database, which
 *   replays the WAL, and probes again. The first working write ends the trouble;
 * - reads go on. Before the first reopen, readers are moved to a read-only handle (which
 *   writes nothing, so it opens on a full disk), so that no read waits for the reopen
 *   and none ever sees a handle being closed (see rd_lock in store_internal.h).
 */
#include "store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS 5000

static void tell(st_store *s, enum st_event_kind kind, const char *reason)
{
    if (!s->on_event)
        return;
    uint64_t failed_at = atomic_load(&s->failed_at_ms);
    st_event ev = {.kind = kind,
                   .reason = reason,
                   .down_ms = st_mono_ms() - failed_at,
                   .attempts = s->attempts,
                   .refused = s->refused};
    s->on_event(s->event_ud, &ev);
}

static void set_err(st_store *s, const char *why)
{
    pthread_mutex_lock(&s->err_mu);
    snprintf(s->err, sizeof(s->err), "%s", why);
    pthread_mutex_unlock(&s->err_mu);
}

/* Points readers at d (or at nothing). Waits for the reads under way to end, so that
 * the handle they used can be closed afterwards. */
static void set_readers(st_store *s, st_db *d)
{
    pthread_rwlock_wrlock(&s->rd_lock);
    s->rd = d;
    pthread_rwlock_unlock(&s->rd_lock);
}

bool st_folder_same(st_store *s, char *why, size_t why_len)
{
    struct stat st;
    if (stat(s->path, &st) != 0) {
        snprintf(why, why_len, "the store's folder %s is gone: %s", s->path, strerror(errno));
        return false;
    }
    if (st.st_dev != s->dev || st.st_ino != s->ino) {
        snprintf(why, why_len, "the store's folder %s was replaced by another one", s->path);
        return false;
    }
    return true;
}

bool st_probe_write(st_store *s, char *why, size_t why_len)
{
    static const char key[] = "probe";
    char val[8];
    st_put_be64(val, st_now_ms());
    char *err = NULL;
    rocksdb_put_cf(s->rw.db, s->wopts, s->rw.cf[ST_CF_DEFAULT], key, sizeof(key) - 1, val,
                   sizeof(val), &err);
    if (!err)
        return true;
    snprintf(why, why_len, "%s", err);
    rocksdb_free(err);
    return false;
}

void st_fail(st_store *s, const char *why)
{
    atomic_fetch_add(&s->write_errors, 1);
    if (s->failed)
        return;
    s->failed = true;
    atomic_store(&s->failed_at_ms, st_mono_ms());
    atomic_store(&s->writable, false);
    s->retry_ms = RETRY_FIRST_MS;
    s->retry_at_ms = st_mono_ms() + s->retry_ms;
    s->attempts = 0;
    s->refused = 0;
    snprintf(s->first_err, sizeof(s->first_err), "%s", why);
    set_err(s, why);
    tell(s, ST_EV_WRITE_FAILED, why);
}

/* Closes the writer's handle and opens it again; readers meanwhile use a read-only
 * handle. False with why if the database does not open (yet). */
static bool reopen(st_store *s, char *why, size_t why_len)
{
    char ro_why[512];
    if (s->rd == &s->rw) {
        bool ro = st_db_open(s, &s->ro, true, ro_why, sizeof(ro_why)) == ST_OK;
        /* Without a read-only handle reads fail (ST_EIO) until one opens: better than
         * waiting for the reopen. */
        set_readers(s, ro ? &s->ro : NULL);
    }
    st_db_close(&s->rw);
    if (st_db_open(s, &s->rw, false, why, why_len) == ST_OK)
        return true;
    if (!s->rd && st_db_open(s, &s->ro, true, ro_why, sizeof(ro_why)) == ST_OK)
        set_readers(s, &s->ro);
    return false;
}

static void recovered(st_store *s)
{
    if (s->rd != &s->rw) {
        set_readers(s, &s->rw);
        st_db_close(&s->ro);
    }
    /* A batch whose sync failed may have reached the disk after all: count again. */
    st_count_contents(s);
    s->failed = false;
    set_err(s, "");
    tell(s, ST_EV_RECOVERED, s->first_err);
    atomic_store(&s->failed_at_ms, 0);
    atomic_fetch_add(&s->recoveries, 1);
    atomic_store(&s->writable, true);
}

bool st_recover(st_store *s)
{
    if (!s->failed)
        return true;
    if (st_mono_ms() < s->retry_at_ms)
        return false;
    s->attempts++;
    char why[512];
    /* A folder that went away is not reopened (that would find nothing, or another
     * database); the handles stay as they are until it is back. */
    bool ok = st_folder_same(s, why, sizeof(why));
    if (ok && !(s->rw.db && st_probe_write(s, why, sizeof(why))))
        ok = reopen(s, why, sizeof(why)) && st_probe_write(s, why, sizeof(why));
    if (ok) {
        recovered(s);
        return true;
    }
    atomic_fetch_add(&s->write_errors, 1);
    set_err(s, why);
    s->retry_ms = s->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : s->retry_ms * 2;
    s->retry_at_ms = st_mono_ms() + s->retry_ms;
    tell(s, ST_EV_STILL_FAILING, why);
    return false;
}
