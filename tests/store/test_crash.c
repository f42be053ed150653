/*
 * Crash safety: a child process appends with sync on and reports every completed append
 * on a pipe; it is killed with SIGKILL at a random moment. After reopening, every reported
 * append is there under its mid with its record, mids are dense, and appending continues
 * from the next mid. Several rounds on the same folder (or database).
 */
#include "fixture.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GROUPS 2
#define WRITERS 4
#define ROUNDS 5
#define MAX_REPORTS 200000

typedef struct report {
    int group;
    uint64_t mid;
    char cid[24];
} report;

typedef struct child_writer {
    st_store *s;
    int id;
    int round;
    int fd;
} child_writer;

static pthread_mutex_t pipe_mu = PTHREAD_MUTEX_INITIALIZER;

static void *child_append(void *arg)
{
    child_writer *w = arg;
    char gid[8], cid[24];
    snprintf(gid, sizeof(gid), "g%d", w->id % GROUPS);
    for (unsigned i = 0;; i++) {
        snprintf(cid, sizeof(cid), "r%dw%di%u", w->round, w->id, i);
        uint64_t mid = 0;
        if (st_append_sync(w->s, st_id_str(gid), st_id_str("writer"), st_id_str(cid), cid,
                           strlen(cid), &mid, NULL, NULL) != 0)
            _exit(3);
        report r = {.group = w->id % GROUPS, .mid = mid};
        snprintf(r.cid, sizeof(r.cid), "%s", cid);
        pthread_mutex_lock(&pipe_mu);
        /* Reports are smaller than PIPE_BUF: each write is atomic. */
        if (write(w->fd, &r, sizeof(r)) != sizeof(r))
            _exit(4);
        pthread_mutex_unlock(&pipe_mu);
    }
    return NULL;
}

static void child_main(const char *dir, int round, int fd)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, dir);
    st_store *s = NULL;
    if (st_open(&o, &s, NULL, 0) != 0)
        _exit(2);
    child_writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (child_writer){.s = s, .id = i, .round = round, .fd = fd};
        pthread_create(&th[i], NULL, child_append, &w[i]);
    }
    for (;;)
        pause();
}

static report reports[MAX_REPORTS];
static size_t n_reports;

static void read_reports(int fd)
{
    report r;
    ssize_t got;
    while ((got = read(fd, &r, sizeof(r))) == sizeof(r)) {
        cr_assert_lt(n_reports, MAX_REPORTS);
        reports[n_reports++] = r;
    }
    cr_assert(got == 0, "short read from the child's pipe");
}

/* Every reported append is stored under its mid with its record; mids are 1..last. */
static void verify(st_store *s)
{
    for (int g = 0; g < GROUPS; g++) {
        char gid[8];
        snprintf(gid, sizeof(gid), "g%d", g);
        uint64_t last = 0;
        cr_assert_eq(st_read_last_mid(s, st_id_str(gid), &last), 0);
        for (uint64_t next = 1; next <= last;) {
            st_page *p;
            cr_assert_eq(st_read_page(s, st_id_str(gid), ST_AFTER, next - 1, 500, &p), 0);
            cr_assert_gt(st_page_count(p), 0);
            for (size_t i = 0; i < st_page_count(p); i++, next++)
                cr_assert_eq(st_page_at(p, i)->mid, next, "%s: hole before mid %lu", gid,
                             (unsigned long)next);
            st_page_free(p);
        }
        for (size_t i = 0; i < n_reports; i++) {
            if (reports[i].group != g)
                continue;
            cr_assert_leq(reports[i].mid, last, "confirmed mid %lu of %s lost",
                          (unsigned long)reports[i].mid, gid);
            st_page *p;
            cr_assert_eq(st_read_page(s, st_id_str(gid), ST_AFTER, reports[i].mid - 1, 1, &p), 0);
            const st_msg *m = st_page_at(p, 0);
            cr_assert_not_null(m);
            cr_assert_eq(m->record_n, strlen(reports[i].cid));
            cr_assert_arr_eq(m->record, reports[i].cid, m->record_n,
                             "%s mid %lu holds another message", gid, (unsigned long)m->mid);
            st_page_free(p);
        }
    }
}

Test(crash, sigkill_during_synced_appends_loses_nothing_confirmed, .timeout = 120)
{
    char *dir = fx_tmpdir();
    st_store *s = fx_open(dir, true);
    for (int g = 0; g < GROUPS; g++) {
        char gid[8];
        snprintf(gid, sizeof(gid), "g%d", g);
        fx_join(s, gid, "writer");
    }
    st_close(s);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());

    for (int round = 0; round < ROUNDS; round++) {
        int fd;
        pid_t pid = fx_fork_reporter(&fd);
        if (pid == 0)
            child_main(dir, round, fd);
        /* The kill must land among appends, not in the child's open (which can take most
         * of a second under the sanitizers on a busy machine): the clock starts at its
         * first confirmed append. */
        report r0;
        cr_assert(fx_readable(fd, 20 * 1000) && read(fd, &r0, sizeof(r0)) == sizeof(r0),
                  "round %d: the child confirmed no append within 20 s", round);
        cr_assert_lt(n_reports, MAX_REPORTS);
        reports[n_reports++] = r0;
        /* Let it run 100..600 ms more, reading as we go so the pipe never fills. */
        long t0 = tclock_ms();
        long run_ms = 100 + rand() % 500;
        for (;;) {
            if (tclock_since(t0) >= run_ms)
                break;
            report r;
            if (fx_readable(fd, 10)) {
                ssize_t got = read(fd, &r, sizeof(r));
                if (got == sizeof(r) && n_reports < MAX_REPORTS)
                    reports[n_reports++] = r;
                else if (got <= 0)
                    break;
            }
        }
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "child ended by itself (status %d)", status);
        read_reports(fd);
        close(fd);

        s = fx_open(dir, true);
        verify(s);
        st_close(s);
    }
    cr_assert_gt(n_reports, 0, "the child confirmed no append at all");
    cr_log_info("crash: %zu confirmed appends checked over %d kills", n_reports, ROUNDS);

    /* Appending continues from the next mid. */
    s = fx_open(dir, true);
    uint64_t last;
    cr_assert_eq(st_read_last_mid(s, st_id_str("g0"), &last), 0);
    cr_assert_eq(fx_append(s, "g0", "writer", "after-crash"), last + 1);
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}
