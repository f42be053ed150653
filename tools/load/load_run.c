/*
 * load_run: one run of gw_load's sessions, whatever they speak (see load_run.h): the
 * connecting ramp, the timed loop that a mode's hooks plug into, the drain, the report,
 * and the server's CPU and memory from /proc.
 */
#include "load_run.h"
#include "load_proc.h"

#include "gwc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Set by SIGINT/SIGTERM: the timed part ends early, then drains and reports as at its end.
 * Several gw_load processes sharing one group (tools/bench/run.sh's w1big) stop those that
 * only receive this way when the one that sends is done. File scope: a signal handler can
 * reach nothing else. */
static volatile sig_atomic_t stop_early;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_early = 1;
}

static void run_init(load_run *r, const load_cfg *cfg)
{
    r->cfg = cfg;
    r->run_id = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    r->body_rng = 88172645463325252ULL ^ r->run_id;
}

/* xorshift64: a few ns a byte. */
void load_vary_body(load_run *r, uint8_t *b)
{
    uint64_t x = r->body_rng;
    for (int i = 0; i < r->cfg->body; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)('a' + x % 26);
    }
    r->body_rng = x;
}

int load_enc_hello(const load_cfg *cfg, const char *uid, msgpack_sbuffer *sb)
{
    return load_enc_hello_with(cfg->secret, cfg->secret_n, uid, sb);
}

void load_pump(load_run *r, int wait_ms)
{
    if (lw_poll(r->loop, wait_ms) < 0) {
        fprintf(stderr, "gw_load: epoll: %s\n", strerror(errno));
        r->st.errors++;
    }
}

void load_send_frame(load_sess *s, msgpack_sbuffer *sb)
{
    if (lw_send(s->k, sb->data, sb->size, false) != 0)
        s->run->st.errors++;
    sb->size = 0;
}

bool load_wait_all(load_run *r, bool (*done)(const load_sess *), double timeout_s, const char *what)
{
    int64_t until = load_now_ns() + (int64_t)(timeout_s * 1e9), last_print = load_now_ns();
    for (;;) {
        int ok = 0, dead = 0;
        for (int i = 0; i < r->n; i++) {
            ok += done(&r->ss[i]);
            dead += lw_state(r->ss[i].k) == LW_CLOSED;
        }
        if (ok == r->n)
            return true;
        if (load_now_ns() > until || dead) {
            fprintf(stderr, "gw_load: %s: %d of %d ready, %d closed: %s\n", what, ok, r->n, dead,
                    dead ? "sessions were closed (see the gateway's log)" : "timed out");
            return false;
        }
        if (load_now_ns() - last_print > 1000000000) {
            fprintf(stderr, "gw_load: %s: %d of %d\n", what, ok, r->n);
            last_print = load_now_ns();
        }
        load_pump(r, 5);
    }
}

/* ---- the server's CPU and memory, from /proc ---------------------------------------- */

/* The gateways' (--server-pid P1,P2,...) CPU seconds and RSS, summed. */
double load_servers_cpu_s(const load_cfg *cfg)
{
    double s = 0;
    for (int i = 0; i < cfg->n_server_pids; i++)
        s += load_proc_cpu_s(cfg->server_pids[i]);
    return s;
}

long load_servers_rss_kib(const load_cfg *cfg)
{
    long kib = 0;
    for (int i = 0; i < cfg->n_server_pids; i++)
        kib += load_proc_rss_kib(cfg->server_pids[i]);
    return kib;
}

double load_self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- the sessions' callbacks (load_ws): to the mode's hooks ------------------------- */

static void on_open(lw_conn *k, void *user)
{
    (void)k;
    load_sess *s = user;
    s->run->opened++;
    if (s->run->mode->on_open)
        s->run->mode->on_open(s);
}

static void on_msg(lw_conn *k, const uint8_t *f, size_t n, void *user)
{
    (void)k;
    load_sess *s = user;
    s->run->mode->on_frame(s, f, n);
}

static void on_close(lw_conn *k, int code, void *user)
{
    load_sess *s = user;
    s->run->closed++;
    if (s->run->mode->on_close)
        s->run->mode->on_close(s, code);
    else if (s->run->closed <= 5)
        fprintf(stderr, "gw_load: session %s%d closed (%d%s%s)\n", s->sender ? "s" : "u", s->id,
                code, lw_error(k)[0] ? ": " : "", lw_error(k));
}

/* ---- phases -------------------------------------------------------------------------- */

static bool is_open(const load_sess *s)
{
    return lw_state(s->k) == LW_OPEN;
}

static bool connect_all(load_run *r)
{
    const load_cfg *cfg = r->cfg;
    for (int i = 0; i < r->n; i++) {
        load_sess *s = &r->ss[i];
        char src[32];
        snprintf(src, sizeof(src), "127.0.0.%d", 1 + i % cfg->sources);
        const char *url = cfg->raw_sub && s->sender ? cfg->raw_pub : cfg->urls[s->url];
        if (lw_connect(r->loop, url, src, s, &s->k) != 0) {
            fprintf(stderr, "gw_load: connect %d: %s\n", i, lw_loop_error(r->loop));
            return false;
        }
        /* A ramp: at most 256 handshakes at a time. Started all at once, thousands of TLS
         * handshakes queue on both sides, and the first sessions would be signed in only
         * after the server's hello timeout. */
        while (i + 1 - r->opened - r->closed >= 256)
            load_pump(r, 5);
    }
    return load_wait_all(r, is_open, 60 + r->n / 500.0, "connecting");
}

/* One --interval line: the figures of the last interval (and the run so far). */
static void interval_line(load_run *r, double at_s, double iv_s, uint64_t deliveries,
                          uint64_t confirmed, double srv_cpu, long rss)
{
    const load_stats *st = &r->st;
    double d = (double)deliveries / iv_s, c = (double)confirmed / iv_s;
    long p50 = (long)load_hist_quantile(&r->lat_iv, 0.5),
         p99 = (long)load_hist_quantile(&r->lat_iv, 0.99),
         p999 = (long)load_hist_quantile(&r->lat_iv, 0.999);
    if (r->cfg->json)
        printf("{\"interval\":{\"at_s\":%.1f,\"seconds\":%.2f,\"confirmed_per_s\":%.1f,"
               "\"deliveries_per_s\":%.1f,\"latency_us\":{\"p50\":%ld,\"p99\":%ld,\"p999\":%ld,"
               "\"max\":%ld},\"server_cpu_s\":%.3f,\"server_rss_kib\":%ld,\"errors\":%lu,"
               "\"notifies\":%lu,\"gaps\":%lu}}\n",
               at_s, iv_s, c, d, p50, p99, p999, (long)r->lat_iv.max, srv_cpu, rss,
               (unsigned long)st->errors, (unsigned long)st->notifies, (unsigned long)st->gaps);
    else
        printf("%7.0f s: %.0f confirmed/s, %.0f deliveries/s, p50 %.2f ms, p99 %.2f ms, "
               "p99.9 %.2f ms, server CPU %.2f s, RSS %ld KiB, errors %lu\n",
               at_s, c, d, (double)p50 / 1000.0, (double)p99 / 1000.0, (double)p999 / 1000.0,
               srv_cpu, rss, (unsigned long)st->errors);
    fflush(stdout);
    memset(&r->lat_iv, 0, sizeof(r->lat_iv));
}

static void report(const load_run *r, double secs, double cpu_self, double cpu_srv, long rss)
{
    const load_cfg *cfg = r->cfg;
    const load_stats *st = &r->st;
    double d = st->deliveries ? (double)st->deliveries : 1;
    double active =
        r->last_delivery_ns > r->t0 ? (double)(r->last_delivery_ns - r->t0) / 1e9 : secs;
    if (cfg->json) {
        printf("{\"seconds\":%.2f,\"sessions\":%d,\"sends\":%lu,\"confirmed\":%lu,"
               "\"confirmed_per_s\":%.1f,\"deliveries\":%lu,\"deliveries_per_s\":%.1f,"
               "\"active_s\":%.2f,\"deliveries_per_active_s\":%.1f,"
               "\"latency_us\":{\"p50\":%ld,\"p99\":%ld,\"p999\":%ld,\"max\":%ld},"
               "\"ack_frames\":%lu,\"read_frames\":%lu,\"notifies\":%lu,\"gaps\":%lu,"
               "\"errors\":%lu,"
               "\"load_cpu_s\":%.3f,\"server_cpu_s\":%.3f,\"server_rss_kib\":%ld,"
               "\"load_cpu_us_per_delivery\":%.3f,\"server_cpu_us_per_delivery\":%.3f",
               secs, r->n, (unsigned long)st->sends, (unsigned long)st->confirmed,
               (double)st->confirmed / secs, (unsigned long)st->deliveries,
               (double)st->deliveries / secs, active, (double)st->deliveries / active,
               (long)load_hist_quantile(&st->lat, 0.5), (long)load_hist_quantile(&st->lat, 0.99),
               (long)load_hist_quantile(&st->lat, 0.999), (long)st->lat.max,
               (unsigned long)st->ack_frames, (unsigned long)st->read_frames,
               (unsigned long)st->notifies, (unsigned long)st->gaps, (unsigned long)st->errors,
               cpu_self, cpu_srv, rss, cpu_self * 1e6 / d, cpu_srv * 1e6 / d);
        /* A cluster: the latency by the receiver's node (the senders' are on the first). */
        for (int u = 0; cfg->n_urls > 1 && u < cfg->n_urls; u++)
            printf("%s{\"url\":\"%s\",\"deliveries\":%lu,\"p50\":%ld,\"p99\":%ld,\"p999\":%ld}%s",
                   u ? "," : ",\"by_url\":[", cfg->urls[u], (unsigned long)st->deliveries_url[u],
                   (long)load_hist_quantile(&st->lat_url[u], 0.5),
                   (long)load_hist_quantile(&st->lat_url[u], 0.99),
                   (long)load_hist_quantile(&st->lat_url[u], 0.999),
                   u == cfg->n_urls - 1 ? "]" : "");
        /* Send-to-confirm, as the sender sees it (from when the send was meant to go). */
        if (st->lat_send.count)
            printf(",\"send_latency_us\":{\"p50\":%ld,\"p99\":%ld,\"p999\":%ld,\"max\":%ld}",
                   (long)load_hist_quantile(&st->lat_send, 0.5),
                   (long)load_hist_quantile(&st->lat_send, 0.99),
                   (long)load_hist_quantile(&st->lat_send, 0.999), (long)st->lat_send.max);
        printf("}\n");
        return;
    }
    printf("sessions %d, %.1f s\n", r->n, secs);
    printf("sends %lu, confirmed %lu (%.0f/s)\n", (unsigned long)st->sends,
           (unsigned long)st->confirmed, (double)st->confirmed / secs);
    printf("deliveries %lu (%.0f/s), ack frames %lu, notifies %lu, gaps %lu, errors %lu\n",
           (unsigned long)st->deliveries, (double)st->deliveries / secs,
           (unsigned long)st->ack_frames, (unsigned long)st->notifies, (unsigned long)st->gaps,
           (unsigned long)st->errors);
    printf("send-to-deliver latency: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
           (double)load_hist_quantile(&st->lat, 0.5) / 1000.0,
           (double)load_hist_quantile(&st->lat, 0.99) / 1000.0,
           (double)load_hist_quantile(&st->lat, 0.999) / 1000.0, (double)st->lat.max / 1000.0);
    if (st->lat_send.count)
        printf("send-to-confirm latency: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n",
               (double)load_hist_quantile(&st->lat_send, 0.5) / 1000.0,
               (double)load_hist_quantile(&st->lat_send, 0.99) / 1000.0,
               (double)load_hist_quantile(&st->lat_send, 0.999) / 1000.0);
    for (int u = 0; cfg->n_urls > 1 && u < cfg->n_urls; u++)
        printf("  receivers at %s: %lu deliveries, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n",
               cfg->urls[u], (unsigned long)st->deliveries_url[u],
               (double)load_hist_quantile(&st->lat_url[u], 0.5) / 1000.0,
               (double)load_hist_quantile(&st->lat_url[u], 0.99) / 1000.0,
               (double)load_hist_quantile(&st->lat_url[u], 0.999) / 1000.0);
    printf("CPU: load generator %.2f s (%.2f us/delivery)", cpu_self, cpu_self * 1e6 / d);
    if (cfg->server_pid)
        printf(", server %.2f s (%.2f us/delivery), server RSS %ld KiB", cpu_srv, cpu_srv * 1e6 / d,
               rss);
    printf("\n");
}

/* Sends what is due now: open loop at --rate, or flat out as the mode's window allows. */
static void send_due(load_run *r, int64_t now, int *next_sender)
{
    const load_cfg *cfg = r->cfg;
    if (cfg->idle || !cfg->senders || !r->mode->send)
        return;
    if (cfg->rate <= 0) {
        r->mode->flat_out(r);
        return;
    }
    /* Open loop: every message due by now goes, stamped with when it was due. Message k
     * is due at t0 + k / rate: k = 0 goes at once. */
    uint64_t due = (uint64_t)((double)(now - r->t0) / 1e9 * cfg->rate) + 1;
    while (r->st.sends < due && (!cfg->count || r->st.sends < (uint64_t)cfg->count)) {
        int64_t meant = r->t0 + (int64_t)((double)r->st.sends * 1e9 / cfg->rate);
        load_sess *s = &r->ss[cfg->sessions + *next_sender];
        *next_sender = (*next_sender + 1) % cfg->senders;
        r->mode->send(s, meant);
    }
}

/* The timed part: sends, the loop, the 20 ms tick, interval and progress lines. */
static void run_timed(load_run *r, double srv0)
{
    const load_cfg *cfg = r->cfg;
    const load_stats *st = &r->st;
    int64_t t0 = r->t0, until = t0 + (int64_t)(cfg->seconds * 1e9), last_print = t0,
            last_sweep = t0, last_iv = t0;
    uint64_t iv_deliveries = 0, iv_confirmed = 0;
    double iv_cpu = srv0;
    int next_sender = 0;
    while (!stop_early && load_now_ns() < until &&
           (!cfg->count || st->sends < (uint64_t)cfg->count)) {
        int64_t now = load_now_ns();
        send_due(r, now, &next_sender);
        load_pump(r, cfg->rate > 0 ? 1 : 5);
        /* Acks that are due by time, not count (a quiet group): a sweep every 20 ms is
         * well inside the server's ack_delay and costs nothing per delivery. */
        if (now - last_sweep >= 20000000) {
            last_sweep = now;
            if (r->mode->tick)
                r->mode->tick(r, now);
        }
        if (cfg->interval > 0 && now - last_iv >= (int64_t)(cfg->interval * 1e9)) {
            double srv_cpu = cfg->server_pid ? load_servers_cpu_s(cfg) : 0;
            interval_line(r, (double)(now - t0) / 1e9, (double)(now - last_iv) / 1e9,
                          st->deliveries - iv_deliveries, st->confirmed - iv_confirmed,
                          srv_cpu - iv_cpu, cfg->server_pid ? load_servers_rss_kib(cfg) : -1);
            last_iv = now;
            iv_deliveries = st->deliveries;
            iv_confirmed = st->confirmed;
            iv_cpu = srv_cpu;
        }
        if (now - last_print >= 1000000000) {
            last_print = now;
            fprintf(
                stderr, "gw_load: %.0f s: sent %lu, confirmed %lu, delivered %lu, p99 %.2f ms\n",
                (double)(now - t0) / 1e9, (unsigned long)st->sends, (unsigned long)st->confirmed,
                (unsigned long)st->deliveries, (double)load_hist_quantile(&st->lat, 0.99) / 1000.0);
        }
    }
}

int load_run_go(load_run *r)
{
    const load_cfg *cfg = r->cfg;
    for (int i = 0; i < r->n; i++) {
        load_sess *s = &r->ss[i];
        s->run = r;
        s->sender = i >= cfg->sessions;
        s->id = s->sender ? i - cfg->sessions : i;
        s->group = s->sender ? s->id % load_n_groups(cfg) : i / cfg->group_size;
        s->url = s->id % cfg->n_urls;
    }
    if (!connect_all(r) || (r->mode->set_up && !r->mode->set_up(r)))
        return 1;
    fprintf(stderr, "gw_load: %d sessions in %d groups, %d senders: running %.0f s\n", r->n,
            load_n_groups(cfg), cfg->senders, cfg->seconds);

    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    double cpu0 = load_self_cpu_s(), srv0 = cfg->server_pid ? load_servers_cpu_s(cfg) : 0;
    r->t0 = load_now_ns();
    run_timed(r, srv0);
    /* Let what is in flight arrive (bounded), then ack the rest as a client leaving would. */
    int64_t drain = load_now_ns() + 2000000000;
    while (!cfg->idle && r->mode->in_flight && load_now_ns() < drain && r->mode->in_flight(r))
        load_pump(r, 5);
    double secs = (double)(load_now_ns() - r->t0) / 1e9;
    if (r->mode->finish)
        r->mode->finish(r);
    for (int64_t flush = load_now_ns() + 100000000; load_now_ns() < flush;)
        load_pump(r, 10); /* the last acks out */
    double cpu_self = load_self_cpu_s() - cpu0;
    double cpu_srv = cfg->server_pid ? load_servers_cpu_s(cfg) - srv0 : 0;
    long rss = cfg->server_pid ? load_servers_rss_kib(cfg) : -1;
    report(r, secs, cpu_self, cpu_srv, rss);
    return r->st.errors ? 1 : 0;
}

load_run *load_run_new(const load_cfg *cfg, const load_mode *m, int n)
{
    static const lw_callbacks cbs = {on_open, on_msg, on_close};
    pr_limits lim = pr_limits_default();
    lim.max_frame = 4u << 20;
    load_run *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    run_init(r, cfg);
    r->mode = m;
    r->n = n;
    msgpack_sbuffer_init(&r->sb);
    r->ss = calloc((size_t)n + 1, sizeof(*r->ss));
    r->body = calloc(1, (size_t)cfg->body);
    r->loop = lw_loop_new(&cbs, m->subprotocol, lim.max_frame);
    r->dec = pr_decoder_new(&lim);
    if (r->ss && r->body && r->loop && r->dec)
        return r;
    load_run_free(r);
    return NULL;
}

void load_run_free(load_run *r)
{
    if (!r)
        return;
    lw_loop_free(r->loop);
    pr_decoder_free(r->dec);
    msgpack_sbuffer_destroy(&r->sb);
    free(r->ss);
    free(r->body);
    free(r);
}

int load_run_sessions(const load_cfg *cfg, const load_mode *m)
{
    load_run *r = load_run_new(cfg, m, cfg->sessions + cfg->senders);
    if (!r) {
        fprintf(stderr, "gw_load: cannot start (out of memory)\n");
        return 1;
    }
    int rc = load_run_go(r);
    load_run_free(r);
    return rc;
}
