/*
 * erase_bench: what a person's erasure costs (docs/BENCHMARKS.md; store.h,
 * ST_OP_ERASE_USER), on the store itself, with no gateway: a user with M messages spread
 * over G groups (and a second user's as many, which must stay), written straight into a
 * fresh store, then erased in one op, timed; then the other user's messages are checked
 * to be there and the erased one's to be tombstones.
 *
 *   erase_bench --store PATH_OR_URL [--msgs M] [--groups G]
 *
 * PATH_OR_URL: an empty RocksDB folder (made if missing) or a PostgreSQL URL of an empty
 * database. Output: one line of key=value figures.
 */
#include "bench_store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "erase_bench: %s: %s\n", what, st_strerror(rc));
    exit(1);
}

/* n messages of uid, round robin over the groups, in batches of 1000 ops. */
static void fill(st_store *s, const char *uid, long n, int groups)
{
    enum { BATCH = 1000 };
    static st_op ops[BATCH];
    static char gids[BATCH][16], cids[BATCH][24];
    static int rcs[BATCH];
    for (long done = 0; done < n;) {
        size_t k = 0;
        for (; k < BATCH && done < n; k++, done++) {
            snprintf(gids[k], sizeof(gids[k]), "g%d", (int)(done % groups));
            snprintf(cids[k], sizeof(cids[k]), "c%ld", done);
            ops[k] = (st_op){.kind = ST_OP_APPEND,
                             .gid = st_id_str(gids[k]),
                             .uid = st_id_str(uid),
                             .cid = st_id_str(cids[k]),
                             .record = "a message of about a line's length, 64 bytes, or so..",
                             .record_n = 54};
        }
        st_submit_all(s, ops, k, rcs);
        for (size_t i = 0; i < k; i++)
            if (rcs[i] < 0 || ops[i].result)
                die("append", rcs[i] < 0 ? rcs[i] : ops[i].result);
    }
}

int main(int argc, char **argv)
{
    const char *where = NULL;
    long msgs = 100000;
    int groups = 100;
    static const struct option lo[] = {{"store", required_argument, 0, 's'},
                                       {"msgs", required_argument, 0, 'm'},
                                       {"groups", required_argument, 0, 'g'},
                                       {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 's': where = optarg; break;
        case 'm': msgs = atol(optarg); break;
        case 'g': groups = atoi(optarg); break;
        default: return 2;
        }
    }
    if (!where || msgs < 1 || groups < 1) {
        fprintf(stderr, "usage: erase_bench --store PATH_OR_URL [--msgs M] [--groups G]\n");
        return 2;
    }
    st_options o;
    st_options_init(&o);
    bench_store_where(&o, where);
    st_store *s = NULL;
    char err[256];
    int rc = st_open(&o, &s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "erase_bench: cannot open %s: %s\n", where, err);
        return 1;
    }
    for (int g = 0; g < groups; g++) {
        char gid[16];
        snprintf(gid, sizeof(gid), "g%d", g);
        if ((rc = st_join_sync(s, st_id_str(gid), st_id_str("erased"), NULL, NULL)) ||
            (rc = st_join_sync(s, st_id_str(gid), st_id_str("kept"), NULL, NULL)))
            die("join", rc);
    }
    double t0 = now_s();
    fill(s, "erased", msgs, groups);
    fill(s, "kept", msgs, groups);
    double fill_s = now_s() - t0;
    static const char tomb[] = "\xa4"
                               "from"
                               "\xa6"
                               "erased"; /* the pair, as the gateway's */
    st_op op = {.kind = ST_OP_ERASE_USER,
                .uid = st_id_str("erased"),
                .record = tomb,
                .record_n = sizeof(tomb) - 1};
    int src;
    t0 = now_s();
    st_submit_all(s, &op, 1, &src);
    double erase_s = now_s() - t0;
    if (src < 0 || op.result)
        die("erase", src < 0 ? src : op.result);
    /* Every message of g0: the erased one's tombstones, the kept one's as they were. */
    long tombs = 0, kept = 0;
    for (uint64_t after = 0;;) {
        st_page *p = NULL;
        if ((rc = st_read_page(s, st_id_str("g0"), ST_AFTER, after, 1000, &p)))
            die("page", rc);
        size_t n = st_page_count(p);
        for (size_t i = 0; i < n; i++) {
            const st_msg *m = st_page_at(p, i);
            tombs += m->recalled;
            kept += !m->recalled;
            after = m->mid;
        }
        bool more = st_page_more(p);
        st_page_free(p);
        if (!more || !n)
            break;
    }
    printf("backend=%s msgs=%ld groups=%d fill_s=%.1f erase_s=%.3f erased=%zu groups_left=%zu "
           "per_msg_us=%.1f g0_tombstones=%ld g0_kept=%ld\n",
           st_backend_name(s), msgs, groups, fill_s, erase_s, op.applied, st_list_count(op.list),
           erase_s * 1e6 / (double)(op.applied ? op.applied : 1), tombs, kept);
    st_list_free(op.list);
    st_close(s);
    bool ok = op.applied == (size_t)msgs && tombs == kept && tombs == (msgs + groups - 1) / groups;
    return ok ? 0 : 1;
}
