/*
 * Disk trouble: a full disk (simulated with RLIMIT_FSIZE, so no mount is needed) and a
 * folder moved away. Writes fail with ST_EIO and nothing is confirmed, reads go on (also
 * while the writer reopens the database), and the store recovers by itself once writes
 * work again, with dense mids and nothing lost.
 */
#include "fixture.h"
#include "fixture_events.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20000 /* bounded waits: the store retries 1, 2, 4, then every 5 s */

static bool wait_writable(st_store *s, bool want)
{
    return fx_wait_writable(s, want, WAIT_MS);
}

/* Files this process writes may grow to `bytes` at most; RLIM_INFINITY lifts it. Only
 * the soft limit moves, so raising it back needs no privilege. */
static void file_size_limit(rlim_t bytes)
{
    struct rlimit r;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &r), 0);
    r.rlim_cur = bytes == RLIM_INFINITY ? r.rlim_max : bytes;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
}

static int append(st_store *s, const char *cid, uint64_t *mid)
{
    return st_append_sync(s, st_id_str("g"), st_id_str("u"), st_id_str(cid), cid, strlen(cid), mid,
                          NULL, NULL);
}

/* Every mid 1..n is there, in order, and holds the record "c<mid>". */
static void check_dense(st_store *s, uint64_t n)
{
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, 1000, &p), 0);
    cr_assert_eq(st_page_count(p), n);
    cr_assert_eq(st_page_last_mid(p), n);
    for (size_t i = 0; i < n; i++) {
        const st_msg *m = st_page_at(p, i);
        char want[32];
        snprintf(want, sizeof(want), "c%zu", i + 1);
        cr_assert_eq(m->mid, i + 1);
        cr_assert_eq(m->record_n, strlen(want));
        cr_assert(memcmp(m->record, want, m->record_n) == 0, "mid %zu holds another record", i + 1);
    }
    st_page_free(p);
}

/* A reader thread that keeps reading while the writer fails, reopens and recovers: no
 * read may fail or see anything but the committed messages. */
typedef struct reader_arg {
    st_store *s;
    atomic_bool stop;
    long reads, failures;
} reader_arg;

static void *reader_main(void *arg)
{
    reader_arg *a = arg;
    while (!atomic_load(&a->stop)) {
        uint64_t last = 0;
        st_page *p = NULL;
        int rc = st_read_last_mid(a->s, st_id_str("g"), &last);
        int rc2 = st_read_page(a->s, st_id_str("g"), ST_AFTER, 0, 100, &p);
        a->reads++;
        if (rc != 0 || rc2 != 0 || last < 3 || st_page_count(p) != st_page_last_mid(p))
            a->failures++;
        st_page_free(p);
        usleep(1000);
    }
    return NULL;
}

Test(disk, full_then_space_returns)
{
    if (pgfx_on())
        cr_skip_test("RocksDB's disk trouble; a database that goes away: test_database.c");
    /* A write past the limit must fail with EFBIG, not kill the process. */
    signal(SIGXFSZ, SIG_IGN);
    char *dir = fx_tmpdir();
    fx_events ev = {0};
    st_store *s = fx_open_events(dir, &ev);
    fx_join(s, "g", "u");
    uint64_t mid = 0;
    for (int i = 1; i <= 3; i++) {
        char cid[32];
        snprintf(cid, sizeof(cid), "c%d", i);
        cr_assert_eq(append(s, cid, &mid), 0);
        cr_assert_eq(mid, (uint64_t)i);
    }
    reader_arg ra = {.s = s};
    pthread_t rt;
    cr_assert_eq(pthread_create(&rt, NULL, reader_main, &ra), 0);

    /* The disk is full: not one more byte in any file. */
    file_size_limit(0);
    cr_assert_eq(append(s, "c4", &mid), ST_EIO, "a write on a full disk must fail");
    cr_assert_not(st_writable(s));
    cr_assert_eq(atomic_load(&ev.failed), 1);
    char why[512];
    st_write_error(s, why, sizeof(why));
    cr_assert(strstr(why, "File too large"), "the reason is the backend's: %s", why);
    /* Refused at once from now on, also a join and a new group. */
    cr_assert_eq(append(s, "c5", &mid), ST_EIO);
    cr_assert_eq(st_join_sync(s, st_id_str("h"), st_id_str("u"), NULL, NULL), ST_EIO);
    /* Recovery attempts (reopens) fail while the disk stays full; reads go on. */
    cr_assert(fx_wait_count(&ev.still, 2, WAIT_MS), "no second recovery attempt");
    cr_assert_not(st_writable(s));
    check_dense(s, 3);
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_geq(st.write_errors, 3, "the failed write and two failed attempts");
    cr_assert_geq(st.commit_failures, 3);
    cr_assert_gt(st.unwritable_ms, 0);
    cr_assert_eq(st.messages, 3);

    /* Space returns: the store recovers by itself. */
    file_size_limit(RLIM_INFINITY);
    cr_assert(wait_writable(s, true), "the store did not recover within %d ms", WAIT_MS);
    cr_assert_eq(atomic_load(&ev.recovered), 1);
    st_read_stats(s, &st);
    cr_assert_eq(st.recoveries, 1);
    cr_assert_eq(st.unwritable_ms, 0);
    st_write_error(s, why, sizeof(why));
    cr_assert_str_eq(why, "");
    /* The refused messages were not stored: resending them gives the next mids. */
    cr_assert_eq(append(s, "c4", &mid), 0);
    cr_assert_eq(mid, 4);
    cr_assert_eq(append(s, "c5", &mid), 0);
    cr_assert_eq(mid, 5);
    check_dense(s, 5);

    atomic_store(&ra.stop, true);
    pthread_join(rt, NULL);
    cr_assert_gt(ra.reads, 0);
    cr_assert_eq(ra.failures, 0, "%ld of %ld reads failed during the trouble", ra.failures,
                 ra.reads);
    st_close(s);

    /* And it is all on disk. */
    s = fx_open(dir, true);
    check_dense(s, 5);
    st_read_stats(s, &st);
    cr_assert_eq(st.messages, 5);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}

Test(disk, folder_moved_away_and_back)
{
    if (pgfx_on())
        cr_skip_test("RocksDB's folder; a database that goes away: test_database.c");
    char *dir = fx_tmpdir();
    char moved[600];
    snprintf(moved, sizeof(moved), "%s.moved", dir);
    fx_events ev = {0};
    st_store *s = fx_open_events(dir, &ev);
    fx_join(s, "g", "u");
    uint64_t mid = 0;
    cr_assert_eq(append(s, "c1", &mid), 0);

    cr_assert_eq(rename(dir, moved), 0);
    cr_assert_eq(append(s, "c2", &mid), ST_EIO,
                 "a write to a folder no longer at its path must not be confirmed");
    cr_assert_not(st_writable(s));
    char why[512];
    st_write_error(s, why, sizeof(why));
    cr_assert(strstr(why, "is gone"), "%s", why);

    cr_assert_eq(rename(moved, dir), 0);
    cr_assert(wait_writable(s, true), "the store did not recover within %d ms", WAIT_MS);
    cr_assert_eq(atomic_load(&ev.recovered), 1);
    cr_assert_eq(append(s, "c2", &mid), 0);
    cr_assert_eq(mid, 2);
    check_dense(s, 2);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}
