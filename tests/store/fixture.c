#include "fixture.h"
#include "pgfx.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

char *fx_tmpdir(void)
{
    if (pgfx_on())
        return pgfx_db_new();
    const char *base = getenv("TMPDIR");
    char buf[512];
    snprintf(buf, sizeof(buf), "%s/gw-store-test-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp failed");
    return strdup(buf);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

void fx_rmtree(const char *path)
{
    if (fx_is_url(path)) {
        pgfx_db_drop(path);
        return;
    }
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

st_store *fx_open(const char *path, bool sync)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, path);
    o.sync = sync;
    return fx_open_options(&o);
}

st_store *fx_open_options(const st_options *o)
{
    st_store *s = NULL;
    char err[256] = "";
    int rc = st_open(o, &s, err, sizeof(err));
    cr_assert_eq(rc, 0, "st_open: %s (%s)", st_strerror(rc), err);
    return s;
}

pid_t fx_fork_reporter(int *fd)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    close(fds[pid == 0 ? 0 : 1]);
    *fd = fds[pid == 0 ? 1 : 0];
    return pid;
}

bool fx_wait_writable(st_store *s, bool want, long ms)
{
    long t0 = tclock_ms();
    while (st_writable(s) != want && tclock_since(t0) < ms)
        usleep(20 * 1000);
    return st_writable(s) == want;
}

bool fx_is_url(const char *where)
{
    return strncmp(where, "postgresql://", 13) == 0 || strncmp(where, "shards:", 7) == 0 ||
           strncmp(where, "etcd://", 7) == 0;
}

void fx_locate(st_options *o, const char *where)
{
    if (fx_is_url(where))
        o->url = where;
    else
        o->path = where;
}

void fx_join(st_store *s, const char *gid, const char *uid)
{
    int rc = st_join_sync(s, st_id_str(gid), st_id_str(uid), NULL, NULL);
    cr_assert_eq(rc, 0, "join %s %s: %s", gid, uid, st_strerror(rc));
}

uint64_t fx_append(st_store *s, const char *gid, const char *uid, const char *cid)
{
    uint64_t mid = 0;
    int rc = st_append_sync(s, st_id_str(gid), st_id_str(uid), st_id_str(cid), cid, strlen(cid),
                            &mid, NULL, NULL);
    cr_assert_eq(rc, 0, "append %s: %s", cid, st_strerror(rc));
    return mid;
}

uint64_t fx_append_n(st_store *s, const char *gid, const char *uid, const char *prefix, int first,
                     int n)
{
    uint64_t mid = 0;
    for (int i = first; i < first + n; i++) {
        char cid[64];
        snprintf(cid, sizeof(cid), "%s%d", prefix, i);
        mid = fx_append(s, gid, uid, cid);
    }
    return mid;
}

st_user_group fx_user_group(st_store *s, const char *uid, const char *gid)
{
    st_op op = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str(uid)};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    for (size_t i = 0; i < st_groups_count(op.groups); i++) {
        st_user_group g = *st_groups_at(op.groups, i);
        if (g.gid.n == strlen(gid) && memcmp(g.gid.p, gid, g.gid.n) == 0) {
            g.gid = (st_id){NULL, 0};
            st_groups_free(op.groups);
            return g;
        }
    }
    cr_assert_fail("%s is not in %s", uid, gid);
    return (st_user_group){0};
}

void fx_restore_release_21(const char *where)
{
    char cmd[1200];
    if (fx_is_url(where))
        snprintf(cmd, sizeof(cmd),
                 "psql -q -v ON_ERROR_STOP=1 '%s' -f %s/tests/fixtures/release-21/postgres.sql "
                 ">/dev/null",
                 where, GW_SOURCE_DIR);
    else
        snprintf(
            cmd, sizeof(cmd),
            "tar xzf %s/tests/fixtures/release-21/rocks-store.tar.gz -C '%s' --strip-components=1",
            GW_SOURCE_DIR, where);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

bool fx_readable(int fd, long ms)
{
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(fd, &rd);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return select(fd + 1, &rd, NULL, NULL, &tv) > 0;
}

/* The tables' rows and the bytes of their tuples (the groups' rows are updated in place,
 * and keep their size). */
static void count_pg_rows(const char *url, uint64_t *rows, uint64_t *bytes)
{
    static const char *const tables[] = {"groups", "members", "msgs", "sends"};
    *rows = *bytes = 0;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        char sql[160];
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM gw.%s", tables[i]);
        *rows += (uint64_t)pgfx_scalar(url, sql);
        snprintf(sql, sizeof(sql), "SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM gw.%s t",
                 tables[i]);
        *bytes += (uint64_t)pgfx_scalar(url, sql);
    }
}

void fx_count_rows(const char *path, uint64_t *rows, uint64_t *bytes)
{
    if (fx_is_url(path)) {
        count_pg_rows(path, rows, bytes);
        return;
    }
    rocksdb_options_t *o = rocksdb_options_create();
    char *err = NULL;
    size_t n_cf = 0;
    char **names = rocksdb_list_column_families(o, path, &n_cf, &err);
    cr_assert_null(err, "list column families: %s", err);
    const rocksdb_options_t **opts = calloc(n_cf, sizeof(*opts));
    rocksdb_column_family_handle_t **cfs = calloc(n_cf, sizeof(*cfs));
    for (size_t i = 0; i < n_cf; i++)
        opts[i] = o;
    rocksdb_t *db = rocksdb_open_for_read_only_column_families(
        o, path, (int)n_cf, (const char *const *)names, opts, cfs, 0, &err);
    cr_assert_null(err, "open read-only: %s", err);
    *rows = *bytes = 0;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    for (size_t i = 0; i < n_cf; i++) {
        if (strcmp(names[i], "default") == 0) { /* the writer's health probe, not data */
            rocksdb_column_family_handle_destroy(cfs[i]);
            continue;
        }
        rocksdb_iterator_t *it = rocksdb_create_iterator_cf(db, ro, cfs[i]);
        for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
            size_t kn, vn;
            rocksdb_iter_key(it, &kn);
            rocksdb_iter_value(it, &vn);
            (*rows)++;
            *bytes += kn + vn;
        }
        rocksdb_iter_destroy(it);
        rocksdb_column_family_handle_destroy(cfs[i]);
    }
    rocksdb_readoptions_destroy(ro);
    rocksdb_close(db);
    rocksdb_list_column_families_destroy(names, n_cf);
    free(opts);
    free(cfs);
    rocksdb_options_destroy(o);
}

void fx_run_all(st_store *s, st_op *ops, size_t n)
{
    int *rcs = calloc(n, sizeof(*rcs));
    cr_assert_not_null(rcs);
    st_submit_all(s, ops, n, rcs);
    for (size_t i = 0; i < n; i++)
        cr_assert(rcs[i] == 0 || rcs[i] == ST_DONE, "submit %zu: %s", i, st_strerror(rcs[i]));
    free(rcs);
}

int fx_submit_wait(st_store *s, st_op *op)
{
    int rc;
    st_submit_all(s, op, 1, &rc);
    return rc;
}
