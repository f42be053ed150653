/*
 * The event loop's own lag (server_internal.h): how long each iteration of a service
 * thread's loop keeps it from polling again. An iteration's busy time runs from the moment
 * the poll returns (an ev_check watcher, at the highest priority: the first thing run)
 * to the moment the loop is about to poll again (an ev_prepare watcher). Everything
 * the thread does in between (callbacks, writes, encodes, timers) is in it, so a stall
 * of any kind shows, whatever caused it: a session waits at most that long for its turn.
 * Two clock reads an iteration (vDSO, tens of ns).
 */
#include "server_internal.h"

#include <stdlib.h>
#include <time.h>

/* The histogram's buckets: upper bounds in µs, and the same in seconds as Prometheus'
 * le labels (literals: the figures' table keeps the pointers). The last is +Inf. */
static const struct {
    uint64_t us;
    const char *le;
} buckets[GW_LAG_BUCKETS] = {
    {100, "0.0001"}, {250, "0.00025"}, {500, "0.0005"},  {1000, "0.001"},
    {2000, "0.002"}, {5000, "0.005"},  {10000, "0.01"},  {25000, "0.025"},
    {50000, "0.05"}, {100000, "0.1"},  {250000, "0.25"}, {0, "+Inf"},
};

struct gw_looplag {
    ev_check check;
    ev_prepare prepare;
    struct ev_loop *loop;
    uint64_t polled_ns; /* when the last poll returned; 0: none since the last prepare */
    gw_lag_figs figs;
    uint64_t max_us;           /* since start */
    uint64_t window_max_us[2]; /* this window and the one before */
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void on_check(struct ev_loop *loop, ev_check *w, int revents)
{
    (void)loop;
    (void)revents;
    gw_looplag *l = (gw_looplag *)w; /* check is first */
    l->polled_ns = now_ns();
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    gw_looplag *l = (gw_looplag *)((char *)w - offsetof(gw_looplag, prepare));
    if (!l->polled_ns)
        return; /* the first iteration: nothing polled yet */
    uint64_t us = (now_ns() - l->polled_ns) / 1000;
    l->polled_ns = 0;
    size_t b = 0;
    while (b < GW_LAG_BUCKETS - 1 && us > buckets[b].us)
        b++;
    l->figs.le[b]++;
    l->figs.iterations++;
    l->figs.busy_us += us;
    if (us > l->max_us)
        l->max_us = us;
    if (us > l->window_max_us[0])
        l->window_max_us[0] = us;
}

gw_looplag *gw_looplag_new(struct ev_loop *loop)
{
    gw_looplag *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->loop = loop;
    ev_check_init(&l->check, on_check);
    ev_set_priority(&l->check, EV_MAXPRI);
    ev_check_start(loop, &l->check);
    ev_prepare_init(&l->prepare, on_prepare);
    ev_set_priority(&l->prepare, EV_MINPRI);
    ev_prepare_start(loop, &l->prepare);
    /* Neither keeps the loop alive on its own. */
    ev_unref(loop);
    ev_unref(loop);
    return l;
}

void gw_looplag_free(gw_looplag *l)
{
    if (!l)
        return;
    ev_ref(l->loop);
    ev_ref(l->loop);
    ev_check_stop(l->loop, &l->check);
    ev_prepare_stop(l->loop, &l->prepare);
    free(l);
}

void gw_looplag_tick(gw_looplag *l)
{
    l->window_max_us[1] = l->window_max_us[0];
    l->window_max_us[0] = 0;
}

void gw_looplag_figures(const gw_looplag *l, gw_lag_figs *f, uint64_t *max_us,
                        uint64_t *recent_max_us)
{
    *f = l->figs;
    *max_us = l->max_us;
    *recent_max_us =
        l->window_max_us[0] > l->window_max_us[1] ? l->window_max_us[0] : l->window_max_us[1];
}

uint64_t gw_looplag_bound_us(size_t bucket)
{
    return bucket < GW_LAG_BUCKETS ? buckets[bucket].us : 0;
}

const char *gw_looplag_bound_label(size_t bucket)
{
    return bucket < GW_LAG_BUCKETS ? buckets[bucket].le : "+Inf";
}
