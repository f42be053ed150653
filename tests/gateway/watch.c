#include "watch.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROBE_WAIT 15000 /* ms: generous, the machine is shared */

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

long watch_fds(gwfx *f)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)f->pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

double watch_stat(gwfx *f, const char *path)
{
    int status = 0;
    char *body = gwfx_http(f, "/stats", NULL, &status);
    json_t *root = json_loads(body, 0, NULL);
    free(body);
    double v = -1;
    char key[128];
    snprintf(key, sizeof(key), "%s", path);
    char *dot = strchr(key, '.');
    json_t *o = root;
    if (o && dot) {
        *dot = 0;
        o = json_object_get(o, key);
        o = o ? json_object_get(o, dot + 1) : NULL;
    } else if (o) {
        o = json_object_get(o, key);
    }
    if (o && json_is_number(o))
        v = json_number_value(o);
    json_decref(root);
    return v;
}

bool watch_sessions_at_most(gwfx *f, double n, int ms)
{
    long until = now_ms() + ms;
    do {
        double now = watch_stat(f, "connections.now");
        if (now >= 0 && now <= n)
            return true;
        usleep(100 * 1000);
    } while (now_ms() < until);
    return false;
}

void watch_prepare(void)
{
    const char *cur = getenv("ASAN_OPTIONS");
    if (cur && strstr(cur, "quarantine_size_mb"))
        return;
    char opts[1024];
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=8", cur ? cur : "",
             cur && *cur ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

void watch_start(watch *w, gwfx *f)
{
    memset(w, 0, sizeof(*w));
    w->f = f;
    w->tx = gwfx_login(f, "by-tx", NULL);
    w->rx = gwfx_login(f, "by-rx", NULL);
    gwfx_join(w->tx, "calm");
    gwfx_join(w->rx, "calm");
    w->rss0_kib = w->rss_peak_kib = gwfx_rss_kib(f);
    w->fds0 = watch_fds(f);
}

void watch_probe(watch *w)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "p%d", ++w->probes);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, (uint64_t)w->probes, gwfx_sl("calm"), gwfx_sl(cid),
                (pr_body){{(const uint8_t *)cid, strlen(cid)}, false});
    long t0 = now_ms();
    int rc = gwc_send(w->tx, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev;
    bool got = false;
    while (rc == 0 && !got) {
        long left = PROBE_WAIT - (now_ms() - t0);
        if (left <= 0)
            break;
        rc = gwc_next(w->rx, (int)left, &ev);
        got = rc == 0 && ev.t == PR_EV_MSG && gwfx_slice_is(ev.msg.body.data, cid);
    }
    if (got) {
        long ms = now_ms() - t0;
        w->delivered++;
        w->sum_ms += (double)ms;
        if (ms > w->max_ms)
            w->max_ms = ms;
    }
    /* The sender's `sent` (and anything else) must not pile up in its queue. */
    while (gwc_next(w->tx, 0, &ev) == 0)
        ;
    long rss = gwfx_rss_kib(w->f);
    if (rss > w->rss_peak_kib)
        w->rss_peak_kib = rss;
}

typedef struct runner {
    void *(*fn)(void *);
    void *arg;
    volatile int done;
} runner;

static void *run(void *p)
{
    runner *r = p;
    r->fn(r->arg);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void watch_during(watch *w, void *(*fn)(void *), void *arg)
{
    runner r = {fn, arg, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run, &r), 0);
    while (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE)) {
        watch_probe(w);
        usleep(50 * 1000);
    }
    pthread_join(t, NULL);
    watch_probe(w); /* and once after */
}

void watch_report(watch *w, const char *what, long max_growth_kib)
{
    cr_assert(gwfx_alive(w->f), "%s: the gateway died", what);
    long growth = w->rss_peak_kib - w->rss0_kib;
    cr_log_info("%s: bystander %d/%d probes delivered, max %ld ms, mean %.1f ms; "
                "gateway RSS %ld KiB at start, peak +%ld KiB; fds %ld at start, %ld now",
                what, w->delivered, w->probes, w->max_ms,
                w->delivered ? w->sum_ms / w->delivered : 0.0, w->rss0_kib, growth, w->fds0,
                watch_fds(w->f));
    cr_assert_eq(w->delivered, w->probes, "%s: the bystander missed %d of %d messages", what,
                 w->probes - w->delivered, w->probes);
    cr_assert_lt(growth, max_growth_kib, "%s: RSS grew by %ld KiB", what, growth);
}
