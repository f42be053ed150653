/*
 * Shared by the store tests: a real store in a fresh place of its own. The suite runs
 * twice: on RocksDB in a temporary folder, and (GW_TEST_STORE=postgres) on PostgreSQL in a
 * new database of the suite's server. A "place" is the folder or the database's URL.
 */
#ifndef GW_TEST_STORE_FIXTURE_H
#define GW_TEST_STORE_FIXTURE_H

#include "store.h"

#include <stdint.h>
#include <sys/types.h>

/* A new empty place: a folder under $TMPDIR (or /tmp), or a new database; the caller
 * frees the string. */
char *fx_tmpdir(void);
/* Removes a place and everything in it. */
void fx_rmtree(const char *path);
/* True when the place is a database's URL. */
bool fx_is_url(const char *where);
/* Points the options at the place (path or url). */
void fx_locate(st_options *o, const char *where);
/* Opens a store at path (sync as given, open groups on) or fails the test. */
st_store *fx_open(const char *path, bool sync);
/* Opens a store with these options or fails the test (saying st_open's error). */
st_store *fx_open_options(const st_options *o);
/* Joins uid to gid or fails the test. */
void fx_join(st_store *s, const char *gid, const char *uid);
/* Forks a child that reports through a pipe, or fails the test: in the child it returns
 * 0 with *fd the pipe's write end; in the parent the child's pid with *fd the read end. */
pid_t fx_fork_reporter(int *fd);

/* Appends a message whose record is the text "<cid>" and returns its mid, or fails. */
uint64_t fx_append(st_store *s, const char *gid, const char *uid, const char *cid);
/* Appends n messages with cids "<prefix><first>", "<prefix><first + 1>"... as fx_append;
 * returns the last one's mid (0 if n is 0). */
uint64_t fx_append_n(st_store *s, const char *gid, const char *uid, const char *prefix, int first,
                     int n);
/* Submits n ops at once (their done and ud are set here) and waits for every one; each
 * submit must be accepted (0, or ST_DONE for a read answered at once). Their results are
 * in the ops. */
void fx_run_all(st_store *s, st_op *ops, size_t n);
/* One op as a server submits it (done and ud set here): answered at once (ST_DONE) or
 * later through done, which this waits for. Returns what st_submit returned. */
int fx_submit_wait(st_store *s, st_op *op);

/* uid's entry for gid in uid's groups (its gid cleared: borrowed from the list, which
 * goes), or fails the test when uid is not in gid. */
st_user_group fx_user_group(st_store *s, const char *uid, const char *gid);

/* Puts the store that the build of issue 21's release wrote (tests/fixtures/release-21:
 * its RocksDB folder or its PostgreSQL dump, as the place is) at the empty place. */
void fx_restore_release_21(const char *where);

/* Waits (at most ms) until fd has something to read, or its end; returns whether. */
bool fx_readable(int fd, long ms);

/* Waits (at most ms) until the store's writability is `want`; returns whether it is. */
bool fx_wait_writable(st_store *s, bool want, long ms);

/* Backend figures read straight from the place (the store must be closed): the number of
 * entries and the bytes of keys plus values, over every column family that holds data
 * (not `default`, where the health probe lives); or the rows and their bytes over the
 * database's tables. */
void fx_count_rows(const char *path, uint64_t *rows, uint64_t *bytes);

/* A suite whose every test has a fresh place (`dir`) and a store open on it (`s`, sync as
 * given), closed and removed after the test. */
#define FX_STORE_SUITE(name, sync_on) FX_STORE_SUITE_(name, sync_on, (void)0)

/* As FX_STORE_SUITE, and each test begins with what the file's own fx_suite_fill() (defined
 * after this) puts into the store. */
#define FX_STORE_SUITE_FILLED(name, sync_on)                                                       \
    static void fx_suite_fill(void);                                                               \
    FX_STORE_SUITE_(name, sync_on, fx_suite_fill())

#define FX_STORE_SUITE_(name, sync_on, fill)                                                       \
    static char *dir;                                                                              \
    static st_store *s;                                                                            \
    static void fx_suite_setup(void)                                                               \
    {                                                                                              \
        dir = fx_tmpdir();                                                                         \
        s = fx_open(dir, sync_on);                                                                 \
        fill;                                                                                      \
    }                                                                                              \
    static void fx_suite_teardown(void)                                                            \
    {                                                                                              \
        st_close(s);                                                                               \
        fx_rmtree(dir);                                                                            \
        free(dir);                                                                                 \
    }                                                                                              \
    TestSuite(name, .init = fx_suite_setup, .fini = fx_suite_teardown)

#endif
