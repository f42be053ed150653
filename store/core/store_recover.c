/*
 * Trouble: what the store thread does after a write failed (a full disk, a folder turned
 * read-only or moved away, a database that went away or turned read-only), until writes
 * work again. The same for every backend; what "recover" means is the backend's (reopen
 * the database, connect again).
 *
 * - every op gets ST_EIO at once (store_writer.c), and nothing is confirmed;
 * - on a schedule the store thread asks the backend to recover: the backend's first
 *   pause after the failure, then twice the pause before, up to its longest
 *   (st_backend.retry_first_ms, retry_max_ms), each counted from the end of the attempt
 *   before. RocksDB keeps the core's 1 s, 2, 4 and every 5 s: its attempt reopens the
 *   database, and what broke it (a full disk, a folder turned read-only) waits for a
 *   person. PostgreSQL's are 0.25 s, 0.5 s, then every second (store_pg.h says why).
 *   The store thread wakes for an attempt (store_writer.c), not only when an op comes.
 *   The first working write ends the trouble, the counts of messages and groups are
 *   taken again (a batch whose answer was lost may have been stored after all), and
 *   on_event is told;
 * - reads go on where the backend can serve them.
 */
#include "store_internal.h"

#include <stdio.h>
#include <string.h>

#define RETRY_FIRST_MS 1000 /* a backend's schedule when it names none */
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

void st_fail(st_store *s, const char *why)
{
    atomic_fetch_add(&s->write_errors, 1);
    if (s->failed)
        return;
    s->failed = true;
    atomic_store(&s->failed_at_ms, st_mono_ms());
    atomic_store(&s->writable, false);
    s->retry_ms = s->be_ops->retry_first_ms ? s->be_ops->retry_first_ms : RETRY_FIRST_MS;
    s->retry_at_ms = st_mono_ms() + s->retry_ms;
    s->attempts = 0;
    s->refused = 0;
    snprintf(s->first_err, sizeof(s->first_err), "%s", why);
    set_err(s, why);
    tell(s, ST_EV_WRITE_FAILED, why);
}

static void recovered(st_store *s)
{
    uint64_t groups = 0, messages = 0;
    if (s->be_ops->count(s->be, &groups, &messages) == 0) {
        atomic_store(&s->groups, groups);
        atomic_store(&s->messages, messages);
    }
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
    char why[512] = "";
    if (s->be_ops->recover(s->be, why, sizeof(why)) == 0) {
        recovered(s);
        return true;
    }
    atomic_fetch_add(&s->write_errors, 1);
    set_err(s, why);
    uint64_t max = s->be_ops->retry_max_ms ? s->be_ops->retry_max_ms : RETRY_MAX_MS;
    s->retry_ms = s->retry_ms * 2 > max ? max : s->retry_ms * 2;
    s->retry_at_ms = st_mono_ms() + s->retry_ms;
    tell(s, ST_EV_STILL_FAILING, why);
    return false;
}
