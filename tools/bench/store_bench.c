/*
 * store_bench: durable appends and page reads against the store module, for
 * docs/BENCHMARKS.md (driven by tools/bench/store.sh, which also runs db_bench beside it).
 *
 *   store_bench append --path DIR --producers N [--seconds S] [--value-size B] [--no-sync]
 *   store_bench page   --path DIR --limit L [--messages M] [--seconds S] [--readers R]
 *
 * Output is one line of key=value figures, easy to read by a script and by a person.
 */
#include "store.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct config {
    const char *mode;
    const char *path;
    int producers;
    double seconds;
    size_t value_size;
    bool sync;
    size_t limit;
    uint64_t messages;
    int readers;
} config;

typedef struct worker {
    st_store *s;
    const config *cfg;
    int id;
    atomic_bool *stop;
    uint64_t done; /* appends or pages */
    uint64_t msgs; /* messages read (page mode) */
    uint64_t failed;
    unsigned seed;
} worker;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: store_bench append --path DIR --producers N [--seconds S] "
               "[--value-size B] [--no-sync]\n"
               "       store_bench page --path DIR --limit L [--messages M] [--seconds S] "
               "[--readers R]\n"
               "DIR must not exist or be empty: the benchmark fills it.\n");
}

static void *append_loop(void *arg)
{
    worker *w = arg;
    char gid[32], uid[32], cid[48];
    /* Every producer sends to the same group: the hardest case for the mid counter. */
    snprintf(gid, sizeof(gid), "bench");
    snprintf(uid, sizeof(uid), "p%d", w->id);
    char *value = malloc(w->cfg->value_size);
    memset(value, 'x', w->cfg->value_size);
    while (!atomic_load(w->stop)) {
        snprintf(cid, sizeof(cid), "p%d-%lu", w->id, (unsigned long)w->done + w->failed);
        if (st_append_sync(w->s, st_id_str(gid), st_id_str(uid), st_id_str(cid), value,
                           w->cfg->value_size, NULL, NULL, NULL) == 0)
            w->done++;
        else
            w->failed++;
    }
    free(value);
    return NULL;
}

static void *page_loop(void *arg)
{
    worker *w = arg;
    uint64_t span = w->cfg->messages - w->cfg->limit;
    while (!atomic_load(w->stop)) {
        uint64_t after = (uint64_t)rand_r(&w->seed) % (span + 1);
        st_page *p;
        if (st_read_page(w->s, st_id_str("bench"), ST_AFTER, after, w->cfg->limit, &p) != 0) {
            w->failed++;
            continue;
        }
        w->msgs += st_page_count(p);
        w->done++;
        st_page_free(p);
    }
    return NULL;
}

static void op_done_noop(st_op *op)
{
    (void)op;
}

/* Fills the group with cfg->messages messages quickly: a window of ops in flight at once
 * (they share commits), then one synchronous append as a barrier (the queue is FIFO). */
static int prefill(st_store *s, const config *cfg)
{
    enum { WINDOW = 1024 };
    static st_op ops[WINDOW];
    static char cids[WINDOW][24];
    char *value = malloc(cfg->value_size);
    memset(value, 'y', cfg->value_size);
    int rc = 0;
    for (uint64_t base = 0; base < cfg->messages && rc == 0; base += WINDOW) {
        size_t n = cfg->messages - base < WINDOW ? (size_t)(cfg->messages - base) : WINDOW;
        for (size_t i = 0; i < n; i++) {
            snprintf(cids[i], sizeof(cids[i]), "f%lu", (unsigned long)(base + i));
            ops[i] = (st_op){.kind = ST_OP_APPEND,
                             .gid = st_id_str("bench"),
                             .uid = st_id_str("filler"),
                             .cid = st_id_str(cids[i]),
                             .record = value,
                             .record_n = cfg->value_size,
                             .done = op_done_noop};
            if (i + 1 < n)
                rc = st_submit(s, &ops[i]);
            else
                rc = st_append_sync(s, ops[i].gid, ops[i].uid, ops[i].cid, value, cfg->value_size,
                                    NULL, NULL, NULL);
            if (rc)
                break;
        }
        for (size_t i = 0; i + 1 < n && rc == 0; i++)
            rc = ops[i].result;
    }
    free(value);
    return rc;
}

static int parse(int argc, char **argv, config *cfg)
{
    static const struct option opts[] = {
        {"path", required_argument, 0, 'p'},     {"producers", required_argument, 0, 'n'},
        {"seconds", required_argument, 0, 's'},  {"value-size", required_argument, 0, 'v'},
        {"no-sync", no_argument, 0, 'S'},        {"limit", required_argument, 0, 'l'},
        {"messages", required_argument, 0, 'm'}, {"readers", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    *cfg = (config){.producers = 1,
                    .seconds = 5,
                    .value_size = 200,
                    .sync = true,
                    .limit = 100,
                    .messages = 100000,
                    .readers = 1};
    if (argc < 2 || argv[1][0] == '-') {
        usage(argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
        return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 1 : -1;
    }
    cfg->mode = argv[1];
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': cfg->path = optarg; break;
        case 'n': cfg->producers = atoi(optarg); break;
        case 's': cfg->seconds = atof(optarg); break;
        case 'v': cfg->value_size = (size_t)atol(optarg); break;
        case 'S': cfg->sync = false; break;
        case 'l': cfg->limit = (size_t)atol(optarg); break;
        case 'm': cfg->messages = (uint64_t)atoll(optarg); break;
        case 'r': cfg->readers = atoi(optarg); break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    bool append = strcmp(cfg->mode, "append") == 0, page = strcmp(cfg->mode, "page") == 0;
    if (!cfg->path || (!append && !page) || cfg->producers < 1 || cfg->producers > 4096 ||
        cfg->seconds <= 0 || cfg->seconds > 600 || cfg->readers < 1 || cfg->readers > 64 ||
        cfg->limit < 1 || cfg->limit > 500 || cfg->messages < cfg->limit) {
        fprintf(stderr, "store_bench: bad arguments (producers 1-4096, seconds 0-600, "
                        "readers 1-64, limit 1-500, messages >= limit, --path required)\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    config cfg;
    int prc = parse(argc, argv, &cfg);
    if (prc)
        return prc > 0 ? 0 : 2;
    bool append = strcmp(cfg.mode, "append") == 0;

    st_options o;
    st_options_init(&o);
    o.path = cfg.path;
    o.sync = append ? cfg.sync : false;
    st_store *s;
    char err[256];
    if (st_open(&o, &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "store_bench: %s\n", err);
        return 1;
    }
    size_t n = (size_t)(append ? cfg.producers : cfg.readers);
    for (size_t i = 0; append && i < n; i++) {
        char uid[32];
        snprintf(uid, sizeof(uid), "p%zu", i);
        st_join_sync(s, st_id_str("bench"), st_id_str(uid), NULL, NULL);
    }
    if (!append) {
        st_join_sync(s, st_id_str("bench"), st_id_str("filler"), NULL, NULL);
        if (prefill(s, &cfg) != 0) {
            fprintf(stderr, "store_bench: prefill failed\n");
            st_close(s);
            return 1;
        }
    }

    atomic_bool stop = false;
    worker *ws = calloc(n, sizeof(*ws));
    pthread_t *th = calloc(n, sizeof(*th));
    st_stats before, after;
    st_read_stats(s, &before);
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        ws[i] = (worker){
            .s = s, .cfg = &cfg, .id = (int)i, .stop = &stop, .seed = 7u * (unsigned)i + 1};
        pthread_create(&th[i], NULL, append ? append_loop : page_loop, &ws[i]);
    }
    struct timespec nap = {(time_t)cfg.seconds,
                           (long)((cfg.seconds - (double)(time_t)cfg.seconds) * 1e9)};
    nanosleep(&nap, NULL);
    atomic_store(&stop, true);
    uint64_t done = 0, msgs = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        done += ws[i].done;
        msgs += ws[i].msgs;
        failed += ws[i].failed;
    }
    double el = now_s() - t0;
    st_read_stats(s, &after);
    if (append) {
        uint64_t commits = after.commits - before.commits;
        printf("mode=append producers=%d sync=%d value_size=%zu seconds=%.2f appends=%lu "
               "appends_per_s=%.0f commits=%lu msgs_per_commit=%.1f failed=%lu\n",
               cfg.producers, cfg.sync, cfg.value_size, el, (unsigned long)done, (double)done / el,
               (unsigned long)commits, commits ? (double)done / (double)commits : 0.0,
               (unsigned long)failed);
    } else {
        printf("mode=page limit=%zu readers=%d messages=%lu seconds=%.2f pages=%lu "
               "pages_per_s=%.0f msgs_per_s=%.0f failed=%lu\n",
               cfg.limit, cfg.readers, (unsigned long)cfg.messages, el, (unsigned long)done,
               (double)done / el, (double)msgs / el, (unsigned long)failed);
    }
    free(ws);
    free(th);
    st_close(s);
    return failed ? 1 : 0;
}
