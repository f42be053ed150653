/*
 * Opening a RocksDB folder that is open already: RocksDB locks it to one process, and its
 * own words for that ("While lock file: .../LOCK: Resource temporarily unavailable") tell
 * nobody what to do. st_open says ST_EBUSY, and who has it open: another process (by its
 * pid), or this one. Once the holder closes it, it opens. PostgreSQL takes any number of
 * stores: skipped there.
 */
#include "fixture.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static char *dir; /* made by each test, once it knows it runs */

static void teardown(void)
{
    if (dir)
        fx_rmtree(dir);
    free(dir);
    dir = NULL;
}

TestSuite(open, .fini = teardown, .timeout = 60);

/* Skips the test on PostgreSQL (before anything is made: a skipped test is not torn down),
 * else makes its folder. */
static void rocksdb_folder(void)
{
    if (pgfx_on())
        cr_skip_test("PostgreSQL: several stores share a database");
    dir = fx_tmpdir();
}

/* st_open on dir: its code, and its message in err. */
static int try_open(st_store **s, char *err, size_t n)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, dir);
    err[0] = 0;
    return st_open(&o, s, err, n);
}

Test(open, a_folder_another_process_has_open_is_busy_and_names_it)
{
    rocksdb_folder();
    int ready[2], done[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        /* The holder: opens, says so, and closes when told; a test killed for its timeout
         * takes it along. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        st_store *s = NULL;
        char err[512];
        char ok = try_open(&s, err, sizeof(err)) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(2);
        char c;
        if (read(done[0], &c, 1) < 0)
            _exit(3);
        if (s)
            st_close(s);
        _exit(0);
    }
    char ok = 0;
    cr_assert_eq(read(ready[0], &ok, 1), 1);
    cr_assert_eq(ok, 'y', "the holder opened the folder");

    st_store *s = NULL;
    char err[512];
    int rc = try_open(&s, err, sizeof(err));
    char pid[32];
    snprintf(pid, sizeof(pid), "process %ld ", (long)child);
    bool named = strstr(err, pid) && strstr(err, dir);
    if (rc == 0)
        st_close(s);
    cr_expect_eq(rc, ST_EBUSY, "%s: %s", st_strerror(rc), err);
    cr_expect(named, "names the holder and the folder: %s", err);
    cr_expect_null(strstr(err, "Resource temporarily unavailable"), "%s", err);
    cr_expect_str_eq(st_strerror(ST_EBUSY), "in use by another process");

    /* The holder closes it: now it opens. */
    cr_assert_eq(write(done[1], "x", 1), 1);
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    rc = try_open(&s, err, sizeof(err));
    cr_assert_eq(rc, 0, "after the holder closed it: %s", err);
    st_close(s);
}

Test(open, a_folder_this_process_has_open_is_busy_too)
{
    rocksdb_folder();
    st_store *first = fx_open(dir, true);
    st_store *s = NULL;
    char err[512];
    int rc = try_open(&s, err, sizeof(err));
    if (rc == 0)
        st_close(s);
    cr_expect_eq(rc, ST_EBUSY, "%s: %s", st_strerror(rc), err);
    cr_expect(strstr(err, "this process") && strstr(err, dir), "%s", err);
    /* Asking who holds the lock did not take it from the first store (closing any
     * descriptor of LOCK would drop this process's POSIX lock): another process still
     * sees it held, and the first store works on. The child makes system calls only: a
     * fork of a process whose RocksDB threads run may find a lock of theirs held for good
     * (a child that opened a store hung once under the sanitizers). */
    char lock[600];
    snprintf(lock, sizeof(lock), "%s/LOCK", dir);
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(lock, O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fd < 0 || fcntl(fd, F_GETLK, &fl) != 0)
            _exit(2);
        _exit(fl.l_type == F_WRLCK && fl.l_pid == getppid() ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "another process sees the lock held by this one (status %d)", status);
    fx_join(first, "g", "u");
    cr_assert_eq(fx_append(first, "g", "u", "c1"), 1);
    st_close(first);
}
