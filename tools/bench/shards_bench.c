/*
 * shards_bench: what a user's groups cost to read (welcome, `groups`, the API's user
 * groups) when the store is one database or several shards (store.h, "Shards"), read
 * through the store as the gateway reads them: one user in G groups (each with a message
 * and an ack), then R reads of the user's groups one after another (the latency of one
 * sign-in's read), then R reads from T threads at once (the rate). Prints one JSON line:
 * latencies (p50, p99, in µs), reads per second, and the CPU seconds per read of this
 * process (the gateway's share) and of every process named postgres (the databases').
 *
 *   shards_bench --store URL [--groups 200] [--reads 2000] [--threads 8]
 */
#include "bench_store.h"
#include "load_proc.h"
#include "store.h"

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double self_cpu_s(void)
{
    return load_proc_cpu_s((int)getpid());
}

static int count_one(void *ud, const st_user_group *g)
{
    (void)g;
    (*(size_t *)ud)++;
    return 0;
}

static st_store *store;
static int groups = 200, reads = 2000, threads = 8;

/* One read of the user's groups; exits on a wrong answer (the figures would mean nothing). */
static void read_once(void)
{
    size_t n = 0;
    int rc = st_read_user_groups(store, st_id_str("reader"), count_one, &n);
    if (rc != 0 || n != (size_t)groups) {
        fprintf(stderr, "shards_bench: a read answered %s with %zu groups of %d\n", st_strerror(rc),
                n, groups);
        exit(1);
    }
}

static void *reader(void *arg)
{
    int n = *(int *)arg;
    for (int i = 0; i < n; i++)
        read_once();
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *where = NULL;
    static const struct option opts[] = {
        {"store", required_argument, 0, 's'}, {"groups", required_argument, 0, 'g'},
        {"reads", required_argument, 0, 'r'}, {"threads", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': where = optarg; break;
        case 'g': groups = atoi(optarg); break;
        case 'r': reads = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: shards_bench --store URL [--groups 200] [--reads 2000] "
                            "[--threads 8]\n  URL: postgresql://..., shards:PATH or etcd://...\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (!where || groups < 1 || groups > 100000 || reads < 1 || threads < 1 || threads > 256) {
        fprintf(stderr, "shards_bench: --store URL is needed; --groups 1..100000, --reads >= 1, "
                        "--threads 1..256\n");
        return 2;
    }
    st_options o;
    st_options_init(&o);
    bench_store_where(&o, where);
    char err[512] = "";
    if (st_open(&o, &store, err, sizeof(err)) != 0) {
        fprintf(stderr, "shards_bench: %s\n", err);
        return 1;
    }
    /* The user's groups, each with one message it acked: what a sign-in reads. */
    for (int i = 0; i < groups; i++) {
        char gid[32];
        snprintf(gid, sizeof(gid), "welcome-%d", i);
        uint64_t last = 0, ack = 0, mid = 0;
        st_ack a = {.gid = st_id_str(gid), .uid = st_id_str("reader"), .mid = 1};
        size_t applied;
        if (st_join_sync(store, st_id_str(gid), st_id_str("reader"), &last, &ack) != 0 ||
            st_append_sync(store, st_id_str(gid), st_id_str("reader"), st_id_str(gid), "m", 1, &mid,
                           NULL, NULL) != 0 ||
            st_acks_sync(store, &a, 1, &applied) != 0) {
            fprintf(stderr, "shards_bench: filling group %s failed\n", gid);
            return 1;
        }
    }
    for (int i = 0; i < 50; i++) /* warm: connections, caches, prepared plans */
        read_once();

    double *lat = calloc((size_t)reads, sizeof(double));
    double c0 = self_cpu_s(), d0 = load_proc_cpu_of_name("postgres"), t0 = now_s();
    for (int i = 0; i < reads; i++) {
        double a = now_s();
        read_once();
        lat[i] = (now_s() - a) * 1e6;
    }
    double t1 = now_s(), c1 = self_cpu_s(), d1 = load_proc_cpu_of_name("postgres");
    qsort(lat, (size_t)reads, sizeof(double), cmp_d);

    pthread_t th[256];
    int share = reads / threads > 0 ? reads / threads : 1;
    double t2 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, reader, &share);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double t3 = now_s(), c2 = self_cpu_s(), d2 = load_proc_cpu_of_name("postgres");
    int n2 = share * threads;
    st_stats st;
    st_read_stats(store, &st);
    printf("{\"shards\":%u,\"groups\":%d,\"reads\":%d,\"latency_us\":{\"p50\":%.0f,\"p99\":%.0f},"
           "\"one_at_a_time_per_s\":%.0f,\"threads\":%d,\"concurrent_per_s\":%.0f,"
           "\"store_cpu_ms_per_read\":%.3f,\"db_cpu_ms_per_read\":%.3f}\n",
           st.shards ? st.shards : 1, groups, reads, lat[(reads - 1) / 2],
           lat[(reads * 99 - 1) / 100], reads / (t1 - t0), threads, n2 / (t3 - t2),
           1000 * ((c1 - c0) + (c2 - c1)) / (reads + n2),
           1000 * ((d1 - d0) + (d2 - d1)) / (reads + n2));
    free(lat);
    st_close(store);
    return 0;
}
