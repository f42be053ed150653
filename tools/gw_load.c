/*
 * gw_load: a load generator for the gateway (see --help and docs/BENCHMARKS.md).
 *
 * It opens many sessions on one client context (spread over several 127.x source
 * addresses, so the ephemeral port range of one address is no limit), joins them to
 * groups of a chosen size, then senders send at a fixed open-loop rate or flat out, and
 * every member acks as the protocol says. Each message carries the time it was *meant*
 * to be sent (the schedule, not when it went out), so a stalled server shows up in the
 * latency instead of silently lowering the load (no coordinated omission). It reports
 * confirmed sends/s, deliveries/s, send-to-deliver latency p50/p99/p99.9, ack frames,
 * errors, its own CPU time and the server's (from /proc), and stops by itself. Other
 * modes: --idle (hold sessions), --own-groups (durable sends without fan-out), --pull (a
 * returning user reads its unread messages page by page), --raw (a peer server).
 */
#include "gwc.h"
#include "load_hist.h"
#include "load_ws.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_URLS 8

typedef struct config {
    const char *url;
    char secret[257];
    size_t secret_n;
    int sessions;   /* members that receive */
    int group_size; /* members per group */
    int senders;    /* extra sessions that send (members of every group they send to) */
    double rate;    /* messages per second in all; 0 = flat out */
    int window;     /* flat out: unconfirmed sends per sender */
    int body;       /* bytes */
    double seconds; /* run time after setup */
    long count;     /* stop after this many sends (0: no limit) */
    int sources;    /* source addresses 127.0.0.1 .. 127.0.0.N */
    int server_pid; /* for CPU and RSS; 0: not reported */
    /* Several gateways (a cluster): sessions spread over the URLs, CPU and RSS summed. */
    const char *urls[MAX_URLS];
    int n_urls;
    int server_pids[MAX_URLS];
    int n_server_pids;
    const char *uid_prefix; /* before every user name: several gw_load, distinct users */
    bool idle;              /* only connect, sign in and join, then hold */
    bool own_groups;        /* every sender sends to a group of its own (no receivers) */
    int ack_every;          /* > 0: ack after this many messages, not what welcome says */
    int pull;               /* > 0: the offline-pull run, pages of this many messages */
    int pull_groups;        /* ... over this many groups */
    const char *raw_sub;    /* raw mode: subscribers' URL (a peer server, not the gateway) */
    const char *raw_pub;    /* raw mode: the publisher's URL (default: raw_sub) */
    const char *raw_proto;  /* raw mode: subprotocol to ask for ("" for none) */
    double interval;        /* > 0: a report line every this many seconds (soak runs) */
    bool json;
} config;

typedef struct sess {
    lw_conn *k;
    int id;
    int group; /* receivers: the group; senders: the next group to send to */
    int url;   /* index in cfg.urls */
    bool sender;
    bool hello_sent, welcomed, joined;
    uint64_t held, acked; /* contiguous watermark and last ack sent */
    int64_t first_unacked_ns;
    int inflight;
} sess;

typedef struct stats {
    uint64_t sends, confirmed, deliveries, ack_frames, notifies, errors, gaps;
    load_hist lat;
    load_hist lat_url[MAX_URLS]; /* by the receiver's URL (--url with several) */
    uint64_t deliveries_url[MAX_URLS];
} stats;

static config cfg;
static stats st;
static load_hist lat_iv; /* --interval: latencies since the last interval line */
static uint32_t ack_every = 50, ack_delay_ms = 1000;
static unsigned run_id; /* makes cids unique across runs */
/* The run's start and its last delivery: a run's drain waits up to 2 s for frames a peer
 * never sends (it dropped or split them), which must not count as time spent delivering. */
static int64_t run_t0, last_delivery_ns;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gw_load --url ws://127.0.0.1:PORT/ws [options]\n"
            "  --url U1,U2,...  several gateways (a cluster, at most 8): receivers and senders\n"
            "                   round robin over them, latency reported per URL too\n"
            "  --sessions N     receiving sessions (default 100)\n"
            "  --group-size G   members per group (default 100; groups = N / G)\n"
            "  --senders S      sending sessions (default 1)\n"
            "  --rate R         messages per second in all, open loop (default 0: flat out)\n"
            "  --window W       flat out: unconfirmed sends per sender (default 64)\n"
            "  --body B         body bytes (default 200, at least 16)\n"
            "  --seconds S      run time after set-up (default 10, at most 3600)\n"
            "  --count C        stop after C sends (default: no limit)\n"
            "  --sources K      spread sessions over 127.0.0.1 .. 127.0.0.K (default 1)\n"
            "  --server-pid P   report the gateway's CPU seconds and RSS from /proc\n"
            "                   (P1,P2,...: several gateways', summed)\n"
            "  --idle           connect, sign in and join, then only hold the sessions\n"
            "  --own-groups     every sender sends to a group of its own with no other member\n"
            "                   (durable sends without fan-out; use with --sessions 0)\n"
            "  --ack-every N    ack every N messages instead of the server's ack_every (1: one\n"
            "                   ack frame per message, the baseline of the batched acks)\n"
            "  --pull L         offline pull instead: a user joins --pull-groups groups and goes\n"
            "                   offline, a sender stores --count messages (default 25000) over\n"
            "                   them, then the user signs in again and reads every group in\n"
            "                   pages of L (enter, then pull after), one request in flight\n"
            "  --pull-groups G  groups of the offline pull (default 40)\n"
            "  --interval S     also print a line every S seconds with that interval's figures\n"
            "                   (deliveries/s, latency, server CPU and RSS; JSON with --json)\n"
            "  --uid-prefix P   put P before every user name (several gw_load processes on one\n"
            "                   store, each its own users; at most 16 characters)\n"
            "  --json           print the report as one JSON object\n"
            "Peers (for side-by-side benchmarks), no protocol v1: every session subscribes at\n"
            "  --raw URL        and the senders publish frames at --raw-pub URL (default the\n"
            "                   same), with --raw-protocol NAME as subprotocol. A frame holds its\n"
            "                   due time as 16 hex digits. Flat out keeps --window frames in\n"
            "                   flight, measured at the first subscriber.\n"
            "The token secret: --secret-file F or GW_SECRET.\n");
}

static int read_secret(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "gw_load: %s: %s\n", path, strerror(errno));
        return -1;
    }
    cfg.secret_n = fread(cfg.secret, 1, sizeof(cfg.secret) - 1, f);
    fclose(f);
    while (cfg.secret_n && (cfg.secret[cfg.secret_n - 1] == '\n'))
        cfg.secret_n--;
    return 0;
}

static int parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, 0, 'u'},
        {"sessions", required_argument, 0, 'n'},
        {"group-size", required_argument, 0, 'g'},
        {"senders", required_argument, 0, 's'},
        {"rate", required_argument, 0, 'r'},
        {"window", required_argument, 0, 'w'},
        {"body", required_argument, 0, 'b'},
        {"seconds", required_argument, 0, 't'},
        {"count", required_argument, 0, 'c'},
        {"sources", required_argument, 0, 'S'},
        {"server-pid", required_argument, 0, 'p'},
        {"idle", no_argument, 0, 'i'},
        {"json", no_argument, 0, 'j'},
        {"secret-file", required_argument, 0, 'f'},
        {"raw", required_argument, 0, 'R'},
        {"raw-pub", required_argument, 0, 'P'},
        {"raw-protocol", required_argument, 0, 'o'},
        {"own-groups", no_argument, 0, 'O'},
        {"ack-every", required_argument, 0, 'A'},
        {"pull", required_argument, 0, 'L'},
        {"pull-groups", required_argument, 0, 'G'},
        {"interval", required_argument, 0, 'I'},
        {"uid-prefix", required_argument, 0, 'U'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    cfg = (config){.sessions = 100,
                   .group_size = 100,
                   .senders = 1,
                   .window = 64,
                   .body = 200,
                   .seconds = 10,
                   .sources = 1,
                   .pull_groups = 40,
                   .uid_prefix = ""};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            /* A cluster: one URL per node, comma-separated. */
            cfg.n_urls = 0;
            for (char *t = strtok(optarg, ","); t && cfg.n_urls < MAX_URLS; t = strtok(NULL, ","))
                cfg.urls[cfg.n_urls++] = t;
            cfg.url = cfg.n_urls ? cfg.urls[0] : NULL;
            break;
        case 'n': cfg.sessions = atoi(optarg); break;
        case 'g': cfg.group_size = atoi(optarg); break;
        case 's': cfg.senders = atoi(optarg); break;
        case 'r': cfg.rate = atof(optarg); break;
        case 'w': cfg.window = atoi(optarg); break;
        case 'b': cfg.body = atoi(optarg); break;
        case 't': cfg.seconds = atof(optarg); break;
        case 'c': cfg.count = atol(optarg); break;
        case 'S': cfg.sources = atoi(optarg); break;
        case 'p':
            cfg.n_server_pids = 0;
            for (char *t = strtok(optarg, ","); t && cfg.n_server_pids < MAX_URLS;
                 t = strtok(NULL, ","))
                cfg.server_pids[cfg.n_server_pids++] = atoi(t);
            cfg.server_pid = cfg.n_server_pids ? cfg.server_pids[0] : 0;
            break;
        case 'i': cfg.idle = true; break;
        case 'O': cfg.own_groups = true; break;
        case 'A': cfg.ack_every = atoi(optarg); break;
        case 'L': cfg.pull = atoi(optarg); break;
        case 'G': cfg.pull_groups = atoi(optarg); break;
        case 'I': cfg.interval = atof(optarg); break;
        case 'R': cfg.raw_sub = optarg; break;
        case 'P': cfg.raw_pub = optarg; break;
        case 'o': cfg.raw_proto = optarg; break;
        case 'U': cfg.uid_prefix = optarg; break;
        case 'j': cfg.json = true; break;
        case 'f':
            if (read_secret(optarg))
                return -1;
            break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    const char *env = getenv("GW_SECRET");
    if (!cfg.secret_n && env && strlen(env) < sizeof(cfg.secret)) {
        cfg.secret_n = strlen(env);
        memcpy(cfg.secret, env, cfg.secret_n);
    }
    if (cfg.raw_sub) {
        cfg.url = cfg.urls[0] = cfg.raw_sub;
        cfg.n_urls = 1;
        if (!cfg.raw_pub)
            cfg.raw_pub = cfg.raw_sub;
        if (!cfg.secret_n) /* no tokens in raw mode */
            cfg.secret_n = 16;
    }
    const char *bad = !cfg.url                                    ? "--url (or --raw) is required"
                      : cfg.secret_n < 16                         ? "no secret (16+ bytes)"
                      : cfg.sessions < 0 || cfg.sessions > 200000 ? "--sessions 0-200000"
                      : cfg.group_size < 1                        ? "--group-size >= 1"
                      : cfg.senders < 0 || cfg.senders > 10000    ? "--senders 0-10000"
                      : cfg.rate < 0 || cfg.window < 1            ? "--rate >= 0, --window >= 1"
                      : cfg.ack_every < 0                         ? "--ack-every >= 1"
                      : cfg.pull < 0 || cfg.pull_groups < 1 || cfg.pull_groups > 10000
                          ? "--pull >= 1, --pull-groups 1-10000"
                      : cfg.body < 16 || cfg.body > 60000       ? "--body 16-60000"
                      : cfg.seconds <= 0 || cfg.seconds > 3600  ? "--seconds 0-3600"
                      : cfg.interval < 0 || cfg.interval > 3600 ? "--interval 0-3600"
                      : cfg.sources < 1 || cfg.sources > 250    ? "--sources 1-250"
                                                                : NULL;
    if (bad) {
        fprintf(stderr, "gw_load: %s (see --help)\n", bad);
        return -1;
    }
    return 0;
}

/* ---- protocol helpers ------------------------------------------------------------------ */

/* Every body is new random lowercase letters (after the time stamp): text a peer accepts
 * as UTF-8, and no two bodies alike, so the store's block compression cannot fold them
 * into one another (storage figures). xorshift64: a few ns a byte. */
static uint64_t body_rng = 88172645463325252ULL;

static void vary_body(uint8_t *b)
{
    for (int i = 0; i < cfg.body; i++) {
        body_rng ^= body_rng << 13;
        body_rng ^= body_rng >> 7;
        body_rng ^= body_rng << 17;
        b[i] = (uint8_t)('a' + body_rng % 26);
    }
}

static pr_slice sl(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

static void send_frame(sess *s, msgpack_sbuffer *sb)
{
    if (lw_send(s->k, sb->data, sb->size, false) != 0)
        st.errors++;
    sb->size = 0;
}

static int n_groups(void)
{
    return cfg.sessions ? (cfg.sessions + cfg.group_size - 1) / cfg.group_size : 1;
}

/* A sender's own group (--own-groups): its only member is the sender. */
static void own_gid(const sess *s, char *gid, size_t n)
{
    snprintf(gid, n, "own%d-%x", s->id, run_id);
}

static void send_message(sess *s, msgpack_sbuffer *sb, int64_t meant_ns, uint8_t *body)
{
    char gid[24], cid[32];
    if (cfg.own_groups) {
        own_gid(s, gid, sizeof(gid));
    } else {
        snprintf(gid, sizeof(gid), "g%d", s->group);
        s->group = (s->group + 1) % n_groups();
    }
    /* Unique across runs too: the same cid from the same user would be a resend. */
    snprintf(cid, sizeof(cid), "%x-%lu", run_id, (unsigned long)st.sends);
    vary_body(body);
    memcpy(body, &meant_ns, sizeof(meant_ns)); /* one clock: this process */
    pr_enc_send(sb, PR_NO_RID, sl(gid), sl(cid), (pr_body){{body, (size_t)cfg.body}, true});
    send_frame(s, sb);
    s->inflight++;
    st.sends++;
}

static void maybe_ack(sess *s, msgpack_sbuffer *sb, bool force, int64_t now)
{
    if (s->held <= s->acked)
        return;
    bool due = s->held - s->acked >= ack_every ||
               now - s->first_unacked_ns >= (int64_t)ack_delay_ms * 1000000;
    if (!due && !force)
        return;
    char gid[24];
    snprintf(gid, sizeof(gid), "g%d", s->group);
    pr_ack a = {sl(gid), s->held};
    pr_enc_ack(sb, &a, 1);
    send_frame(s, sb);
    s->acked = s->held;
    st.ack_frames++;
}

static void on_event(sess *s, const pr_event *ev, msgpack_sbuffer *sb)
{
    switch (ev->t) {
    case PR_EV_WELCOME:
        s->welcomed = true;
        ack_every = cfg.ack_every > 0       ? (uint32_t)cfg.ack_every
                    : ev->welcome.ack_every ? ev->welcome.ack_every
                                            : ack_every;
        ack_delay_ms = ev->welcome.ack_delay_ms ? ev->welcome.ack_delay_ms : ack_delay_ms;
        break;
    case PR_EV_JOINED:
        if (!s->sender) {
            s->held = s->acked = ev->last_mid;
            s->joined = true;
        } else if (--s->inflight == 0) {
            s->joined = true; /* joined every group */
        }
        break;
    case PR_EV_SENT:
        s->inflight--;
        st.confirmed++;
        break;
    case PR_EV_MSG: {
        int64_t now = now_ns(), meant;
        st.deliveries++;
        last_delivery_ns = now;
        if (ev->msg.body.data.n >= sizeof(meant)) {
            memcpy(&meant, ev->msg.body.data.p, sizeof(meant));
            load_hist_add(&st.lat, (now - meant) / 1000);
            load_hist_add(&st.lat_url[s->url], (now - meant) / 1000);
            st.deliveries_url[s->url]++;
            if (cfg.interval > 0)
                load_hist_add(&lat_iv, (now - meant) / 1000);
        }
        if (s->sender)
            break; /* a sender is a member of many groups: only receivers track and ack */
        if (ev->msg.mid == s->held + 1) {
            if (s->held == s->acked)
                s->first_unacked_ns = now;
            s->held++;
        } else if (ev->msg.mid > s->held + 1) {
            st.gaps++; /* only after a notify; counted, not pulled: this is a load tool */
            s->held = ev->msg.mid;
        }
        maybe_ack(s, sb, false, now);
        break;
    }
    case PR_EV_NOTIFY: st.notifies++; break;
    case PR_EV_ERR:
        st.errors++;
        if (st.errors <= 5)
            fprintf(stderr, "gw_load: err %.*s: %.*s\n", (int)ev->err_name.n, ev->err_name.p,
                    (int)ev->err_msg.n, ev->err_msg.p);
        break;
    default: break;
    }
}

/* Raw mode: any frame is a delivery; its first 16 bytes are the due time in hex. */
static uint64_t raw_first_received;

static void on_raw_frame(sess *s, const uint8_t *f, size_t n)
{
    if (s->sender)
        return; /* a mirror also echoes to the publisher: not a delivery */
    char hex[17];
    if (n < 16)
        return;
    memcpy(hex, f, 16);
    hex[16] = 0;
    for (int i = 0; i < 16; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) {
            st.gaps++; /* not one of ours: a peer split or merged frames */
            return;
        }
    st.deliveries++;
    last_delivery_ns = now_ns();
    if (s->id == 0)
        raw_first_received++;
    load_hist_add(&st.lat, (now_ns() - (int64_t)strtoull(hex, NULL, 16)) / 1000);
}

static void send_raw(sess *s, int64_t meant_ns, uint8_t *body)
{
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)meant_ns);
    vary_body(body);
    memcpy(body, hex, 16);
    if (lw_send(s->k, body, (size_t)cfg.body, true) != 0)
        st.errors++;
    st.sends++;
    st.confirmed++; /* no confirmation from a peer: a send is a send */
}

/* Signs a session in. Sent as soon as its handshake is done: with thousands of sessions
 * still connecting, the first ones would otherwise outlive the server's hello timeout. */
static bool send_hello(sess *s, msgpack_sbuffer *sb)
{
    char uid[32];
    snprintf(uid, sizeof(uid), "%.16s%s%d", cfg.uid_prefix, s->sender ? "s" : "u", s->id);
    char *tok = NULL;
    if (gwc_token_mint(cfg.secret, cfg.secret_n, uid, (int64_t)time(NULL) + 86400, NULL, 0, false,
                       &tok) != 0)
        return false;
    pr_enc_hello(sb, PR_NO_RID, sl(tok));
    send_frame(s, sb);
    free(tok);
    s->hello_sent = true;
    return true;
}

/* ---- the sessions' callbacks (load_ws) ---------------------------------------------- */

static msgpack_sbuffer out_sb; /* every frame the sessions send is encoded here */
static pr_decoder *dec;
static int opened_sessions, closed_sessions;

static int on_event_cb(void *ud, const pr_event *ev)
{
    on_event(ud, ev, &out_sb);
    return 0;
}

static void on_open(lw_conn *k, void *user)
{
    (void)k;
    opened_sessions++;
    if (!cfg.raw_sub && !send_hello(user, &out_sb))
        st.errors++;
}

static void on_msg(lw_conn *k, const uint8_t *f, size_t n, void *user)
{
    (void)k;
    if (cfg.raw_sub) {
        on_raw_frame(user, f, n);
        return;
    }
    pr_error perr;
    if (pr_decode_events(dec, f, n, on_event_cb, user, &perr) != 0 && ++st.errors <= 5)
        fprintf(stderr, "gw_load: bad frame from the server: %s: %s\n", pr_err_name(perr.code),
                perr.msg);
}

static void on_close(lw_conn *k, int code, void *user)
{
    sess *s = user;
    if (++closed_sessions <= 5)
        fprintf(stderr, "gw_load: session %s%d closed (%d%s%s)\n", s->sender ? "s" : "u", s->id,
                code, lw_error(k)[0] ? ": " : "", lw_error(k));
}

/* Runs the loop once: every ready session's frames go to on_event or on_raw_frame. */
static void pump(lw_loop *l, int wait_ms)
{
    if (lw_poll(l, wait_ms) < 0) {
        fprintf(stderr, "gw_load: epoll: %s\n", strerror(errno));
        st.errors++;
    }
}

/* ---- the server's CPU and memory, from /proc ---------------------------------------- */

static double proc_cpu_s(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, stt = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stt) != 2)
        return -1;
    return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

static long proc_rss_kib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The gateways' (--server-pid P1,P2,...) CPU seconds and RSS, summed. */
static double servers_cpu_s(void)
{
    double s = 0;
    for (int i = 0; i < cfg.n_server_pids; i++)
        s += proc_cpu_s(cfg.server_pids[i]);
    return s;
}

static long servers_rss_kib(void)
{
    long kib = 0;
    for (int i = 0; i < cfg.n_server_pids; i++)
        kib += proc_rss_kib(cfg.server_pids[i]);
    return kib;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- phases -------------------------------------------------------------------------- */

/* Waits until done(s) holds for every session, running the loop; false after timeout. */
static bool wait_all(lw_loop *c, sess *ss, int n, bool (*done)(const sess *), double timeout_s,
                     const char *what)
{
    int64_t until = now_ns() + (int64_t)(timeout_s * 1e9), last_print = now_ns();
    for (;;) {
        int ok = 0, dead = 0;
        for (int i = 0; i < n; i++) {
            ok += done(&ss[i]);
            dead += lw_state(ss[i].k) == LW_CLOSED;
        }
        if (ok == n)
            return true;
        if (now_ns() > until || dead) {
            fprintf(stderr, "gw_load: %s: %d of %d ready, %d closed: %s\n", what, ok, n, dead,
                    dead ? "sessions were closed (see the gateway's log)" : "timed out");
            return false;
        }
        if (now_ns() - last_print > 1000000000) {
            fprintf(stderr, "gw_load: %s: %d of %d\n", what, ok, n);
            last_print = now_ns();
        }
        pump(c, 5);
    }
}

static bool is_open(const sess *s)
{
    return lw_state(s->k) == LW_OPEN;
}

static bool is_welcomed(const sess *s)
{
    return s->welcomed;
}

static bool is_joined(const sess *s)
{
    return s->joined;
}

static bool setup_sessions(lw_loop *c, sess *ss, int n)
{
    msgpack_sbuffer *sb = &out_sb;
    for (int i = 0; i < n; i++) {
        char src[32];
        snprintf(src, sizeof(src), "127.0.0.%d", 1 + i % cfg.sources);
        const char *url = cfg.raw_sub && ss[i].sender ? cfg.raw_pub : cfg.urls[ss[i].url];
        if (lw_connect(c, url, src, &ss[i], &ss[i].k) != 0) {
            fprintf(stderr, "gw_load: connect %d: %s\n", i, lw_loop_error(c));
            return false;
        }
        /* A ramp: at most 256 handshakes at a time. Started all at once, thousands of TLS
         * handshakes queue on both sides, and the first sessions would be signed in only
         * after the server's hello timeout. */
        while (i + 1 - opened_sessions - closed_sessions >= 256)
            pump(c, 5);
    }
    if (!wait_all(c, ss, n, is_open, 60 + n / 500.0, "connecting"))
        return false;
    if (cfg.raw_sub)
        return true; /* a peer has no sign-in and no groups */
    for (int i = 0; i < n; i++)
        if (!ss[i].hello_sent && !send_hello(&ss[i], sb))
            return false;
    if (!wait_all(c, ss, n, is_welcomed, 60 + n / 500.0, "signing in"))
        return false;
    for (int i = 0; i < n; i++) {
        int first = ss[i].sender ? 0 : ss[i].group, last = ss[i].sender ? n_groups() : first + 1;
        if (ss[i].sender && cfg.own_groups)
            last = 1;
        for (int g = first; g < last; g++) {
            char gid[24];
            if (ss[i].sender && cfg.own_groups)
                own_gid(&ss[i], gid, sizeof(gid));
            else
                snprintf(gid, sizeof(gid), "g%d", g);
            pr_enc_join(sb, PR_NO_RID, sl(gid));
            send_frame(&ss[i], sb);
            ss[i].inflight += ss[i].sender;
        }
    }
    return wait_all(c, ss, n, is_joined, 60 + n / 200.0, "joining");
}

/* One --interval line: the figures of the last interval (and the run so far). */
static void interval_line(double at_s, double iv_s, uint64_t deliveries, uint64_t confirmed,
                          double srv_cpu, long rss)
{
    double d = (double)deliveries / iv_s, c = (double)confirmed / iv_s;
    long p50 = (long)load_hist_quantile(&lat_iv, 0.5),
         p99 = (long)load_hist_quantile(&lat_iv, 0.99),
         p999 = (long)load_hist_quantile(&lat_iv, 0.999);
    if (cfg.json)
        printf("{\"interval\":{\"at_s\":%.1f,\"seconds\":%.2f,\"confirmed_per_s\":%.1f,"
               "\"deliveries_per_s\":%.1f,\"latency_us\":{\"p50\":%ld,\"p99\":%ld,\"p999\":%ld,"
               "\"max\":%ld},\"server_cpu_s\":%.3f,\"server_rss_kib\":%ld,\"errors\":%lu,"
               "\"notifies\":%lu,\"gaps\":%lu}}\n",
               at_s, iv_s, c, d, p50, p99, p999, (long)lat_iv.max, srv_cpu, rss,
               (unsigned long)st.errors, (unsigned long)st.notifies, (unsigned long)st.gaps);
    else
        printf("%7.0f s: %.0f confirmed/s, %.0f deliveries/s, p50 %.2f ms, p99 %.2f ms, "
               "p99.9 %.2f ms, server CPU %.2f s, RSS %ld KiB, errors %lu\n",
               at_s, c, d, (double)p50 / 1000.0, (double)p99 / 1000.0, (double)p999 / 1000.0,
               srv_cpu, rss, (unsigned long)st.errors);
    fflush(stdout);
    memset(&lat_iv, 0, sizeof(lat_iv));
}

static void report(double secs, double cpu_self, double cpu_srv, long rss, int n)
{
    double d = st.deliveries ? (double)st.deliveries : 1;
    double active = last_delivery_ns > run_t0 ? (double)(last_delivery_ns - run_t0) / 1e9 : secs;
    if (cfg.json) {
        printf("{\"seconds\":%.2f,\"sessions\":%d,\"sends\":%lu,\"confirmed\":%lu,"
               "\"confirmed_per_s\":%.1f,\"deliveries\":%lu,\"deliveries_per_s\":%.1f,"
               "\"active_s\":%.2f,\"deliveries_per_active_s\":%.1f,"
               "\"latency_us\":{\"p50\":%ld,\"p99\":%ld,\"p999\":%ld,\"max\":%ld},"
               "\"ack_frames\":%lu,\"notifies\":%lu,\"gaps\":%lu,\"errors\":%lu,"
               "\"load_cpu_s\":%.3f,\"server_cpu_s\":%.3f,\"server_rss_kib\":%ld,"
               "\"load_cpu_us_per_delivery\":%.3f,\"server_cpu_us_per_delivery\":%.3f",
               secs, n, (unsigned long)st.sends, (unsigned long)st.confirmed,
               (double)st.confirmed / secs, (unsigned long)st.deliveries,
               (double)st.deliveries / secs, active, (double)st.deliveries / active,
               (long)load_hist_quantile(&st.lat, 0.5), (long)load_hist_quantile(&st.lat, 0.99),
               (long)load_hist_quantile(&st.lat, 0.999), (long)st.lat.max,
               (unsigned long)st.ack_frames, (unsigned long)st.notifies, (unsigned long)st.gaps,
               (unsigned long)st.errors, cpu_self, cpu_srv, rss, cpu_self * 1e6 / d,
               cpu_srv * 1e6 / d);
        /* A cluster: the latency by the receiver's node (the senders' are on the first). */
        for (int u = 0; cfg.n_urls > 1 && u < cfg.n_urls; u++)
            printf("%s{\"url\":\"%s\",\"deliveries\":%lu,\"p50\":%ld,\"p99\":%ld,\"p999\":%ld}%s",
                   u ? "," : ",\"by_url\":[", cfg.urls[u], (unsigned long)st.deliveries_url[u],
                   (long)load_hist_quantile(&st.lat_url[u], 0.5),
                   (long)load_hist_quantile(&st.lat_url[u], 0.99),
                   (long)load_hist_quantile(&st.lat_url[u], 0.999), u == cfg.n_urls - 1 ? "]" : "");
        printf("}\n");
        return;
    }
    printf("sessions %d, %.1f s\n", n, secs);
    printf("sends %lu, confirmed %lu (%.0f/s)\n", (unsigned long)st.sends,
           (unsigned long)st.confirmed, (double)st.confirmed / secs);
    printf("deliveries %lu (%.0f/s), ack frames %lu, notifies %lu, gaps %lu, errors %lu\n",
           (unsigned long)st.deliveries, (double)st.deliveries / secs, (unsigned long)st.ack_frames,
           (unsigned long)st.notifies, (unsigned long)st.gaps, (unsigned long)st.errors);
    printf("send-to-deliver latency: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
           (double)load_hist_quantile(&st.lat, 0.5) / 1000.0,
           (double)load_hist_quantile(&st.lat, 0.99) / 1000.0,
           (double)load_hist_quantile(&st.lat, 0.999) / 1000.0, (double)st.lat.max / 1000.0);
    for (int u = 0; cfg.n_urls > 1 && u < cfg.n_urls; u++)
        printf("  receivers at %s: %lu deliveries, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n",
               cfg.urls[u], (unsigned long)st.deliveries_url[u],
               (double)load_hist_quantile(&st.lat_url[u], 0.5) / 1000.0,
               (double)load_hist_quantile(&st.lat_url[u], 0.99) / 1000.0,
               (double)load_hist_quantile(&st.lat_url[u], 0.999) / 1000.0);
    printf("CPU: load generator %.2f s (%.2f us/delivery)", cpu_self, cpu_self * 1e6 / d);
    if (cfg.server_pid)
        printf(", server %.2f s (%.2f us/delivery), server RSS %ld KiB", cpu_srv, cpu_srv * 1e6 / d,
               rss);
    printf("\n");
}

/* ---- offline pull (--pull) ---------------------------------------------------------- */

/* The next event of type t on k, skipping others; false on an err, a close or 30 s. */
static bool wait_event(gwc_conn *k, enum pr_ev_type t, pr_event *ev)
{
    int64_t until = now_ns() + 30000000000LL;
    while (now_ns() < until) {
        int rc = gwc_next(k, 1000, ev);
        if (rc == GWC_ETIMEDOUT)
            continue;
        if (rc != 0) {
            fprintf(stderr, "gw_load: pull: %s\n", gwc_strerror(rc));
            return false;
        }
        if (ev->t == PR_EV_ERR) {
            st.errors++;
            fprintf(stderr, "gw_load: pull: err %.*s: %.*s\n", (int)ev->err_name.n, ev->err_name.p,
                    (int)ev->err_msg.n, ev->err_msg.p);
            return false;
        }
        if (ev->t == t)
            return true;
    }
    fprintf(stderr, "gw_load: pull: timed out\n");
    return false;
}

/* Connects, signs in as uid and joins every group; NULL on failure. */
static gwc_conn *pull_session(gwc_ctx *c, const char *uid, char (*gids)[32], bool join,
                              msgpack_sbuffer *sb)
{
    gwc_conn *k = NULL;
    pr_event ev;
    char *tok = NULL;
    if (gwc_connect(c, cfg.url, 10000, &k) != 0) {
        fprintf(stderr, "gw_load: pull: connect: %s\n", gwc_ctx_last_error(c));
        return NULL;
    }
    if (gwc_token_mint(cfg.secret, cfg.secret_n, uid, (int64_t)time(NULL) + 86400, NULL, 0, false,
                       &tok) != 0)
        goto fail;
    pr_enc_hello(sb, PR_NO_RID, sl(tok));
    free(tok);
    if (gwc_send(k, sb->data, sb->size) != 0 || (sb->size = 0, !wait_event(k, PR_EV_WELCOME, &ev)))
        goto fail;
    for (int g = 0; join && g < cfg.pull_groups; g++) {
        pr_enc_join(sb, PR_NO_RID, sl(gids[g]));
        if (gwc_send(k, sb->data, sb->size) != 0 ||
            (sb->size = 0, !wait_event(k, PR_EV_JOINED, &ev)))
            goto fail;
    }
    return k;
fail:
    sb->size = 0;
    gwc_close(k);
    return NULL;
}

static int run_pull(gwc_ctx *c, msgpack_sbuffer *sb)
{
    char puller[32], filler[32], cid[32];
    char(*gids)[32] = calloc((size_t)cfg.pull_groups, sizeof(*gids));
    uint8_t *body = calloc(1, (size_t)cfg.body);
    long count = cfg.count ? cfg.count : 25000;
    int rc = 1;
    pr_event ev;
    if (!gids || !body)
        goto out;
    snprintf(puller, sizeof(puller), "puller-%x", run_id);
    snprintf(filler, sizeof(filler), "filler-%x", run_id);
    for (int g = 0; g < cfg.pull_groups; g++)
        snprintf(gids[g], sizeof(gids[g]), "pull%x-%d", run_id, g);

    /* 1. The user joins every group and goes offline. */
    gwc_conn *k = pull_session(c, puller, gids, true, sb);
    if (!k)
        goto out;
    gwc_close(k);

    /* 2. Another member stores the messages, round robin over the groups. */
    k = pull_session(c, filler, gids, true, sb);
    if (!k)
        goto out;
    int64_t f0 = now_ns();
    long sent = 0, confirmed = 0;
    int inflight = 0;
    while (confirmed < count) {
        while (inflight < cfg.window && sent < count) {
            int64_t t = now_ns();
            vary_body(body);
            memcpy(body, &t, sizeof(t));
            snprintf(cid, sizeof(cid), "%x-%ld", run_id, sent);
            pr_enc_send(sb, PR_NO_RID, sl(gids[sent % cfg.pull_groups]), sl(cid),
                        (pr_body){{body, (size_t)cfg.body}, true});
            if (gwc_send(k, sb->data, sb->size) != 0) {
                gwc_close(k);
                goto out;
            }
            sb->size = 0;
            sent++;
            inflight++;
        }
        if (!wait_event(k, PR_EV_SENT, &ev)) {
            gwc_close(k);
            goto out;
        }
        inflight--;
        confirmed++;
    }
    double fill_s = (double)(now_ns() - f0) / 1e9;
    gwc_close(k);

    /* 3. The user comes back and reads every group in pages, one request in flight, and
     * acks each group once it has read it. Timed from sign-in to the last page. */
    double cpu0 = self_cpu_s(), srv0 = cfg.server_pid ? servers_cpu_s() : 0;
    int64_t t0 = now_ns();
    k = pull_session(c, puller, gids, false, sb);
    if (!k)
        goto out;
    uint64_t msgs = 0, pages = 0;
    for (int g = 0; g < cfg.pull_groups; g++) {
        uint64_t after = 0;
        pr_enc_enter(sb, PR_NO_RID, sl(gids[g]), (uint32_t)cfg.pull);
        for (;;) {
            if (gwc_send(k, sb->data, sb->size) != 0 ||
                (sb->size = 0, !wait_event(k, PR_EV_PAGE, &ev))) {
                gwc_close(k);
                goto out;
            }
            pages++;
            msgs += ev.n_items;
            pr_message m;
            if (ev.n_items && pr_event_message(&ev, ev.n_items - 1, &m) == 0)
                after = m.mid;
            if (!ev.more || !ev.n_items)
                break;
            pr_enc_pull(sb, PR_NO_RID, sl(gids[g]), false, after, (uint32_t)cfg.pull);
        }
        pr_ack a = {sl(gids[g]), after};
        pr_enc_ack(sb, &a, 1);
        if (gwc_send(k, sb->data, sb->size) != 0)
            st.errors++;
        sb->size = 0;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    double cpu_self = self_cpu_s() - cpu0;
    double cpu_srv = cfg.server_pid ? servers_cpu_s() - srv0 : 0;
    gwc_close(k);
    printf("{\"pull\":{\"limit\":%d,\"groups\":%d,\"messages\":%lu,\"pages\":%lu,"
           "\"seconds\":%.3f,\"messages_per_s\":%.1f,\"pages_per_s\":%.1f},"
           "\"stored\":%ld,\"fill_seconds\":%.2f,\"errors\":%lu,\"load_cpu_s\":%.3f,"
           "\"server_cpu_s\":%.3f}\n",
           cfg.pull, cfg.pull_groups, (unsigned long)msgs, (unsigned long)pages, secs,
           (double)msgs / secs, (double)pages / secs, confirmed, fill_s, (unsigned long)st.errors,
           cpu_self, cpu_srv);
    rc = msgs == (uint64_t)count && !st.errors ? 0 : 1;
    if (rc)
        fprintf(stderr, "gw_load: pull: read %lu of %ld messages\n", (unsigned long)msgs, count);
out:
    free(gids);
    free(body);
    return rc;
}

int main(int argc, char **argv)
{
    int prc = parse(argc, argv);
    if (prc)
        return prc > 0 ? 0 : 2;
    run_id = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    body_rng ^= run_id;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* one socket per session */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int n = cfg.sessions + cfg.senders;
    sess *ss = calloc((size_t)n, sizeof(*ss));
    msgpack_sbuffer_init(&out_sb);
    msgpack_sbuffer *sb = &out_sb;
    pr_limits lim = pr_limits_default();
    lim.max_frame = 4u << 20;
    int rc = 1;
    if (cfg.pull) { /* one session, one request at a time: the blocking client library */
        gwc_ctx *gc = gwc_ctx_new(&(gwc_options){.insecure = true, .max_frame = lim.max_frame});
        if (gc)
            rc = run_pull(gc, sb);
        else
            fprintf(stderr, "gw_load: cannot make a client context\n");
        gwc_ctx_free(gc);
        goto out;
    }
    static const lw_callbacks cbs = {on_open, on_msg, on_close};
    const char *proto = cfg.raw_sub ? cfg.raw_proto : "gw.v1";
    lw_loop *c = lw_loop_new(&cbs, proto, lim.max_frame);
    dec = pr_decoder_new(&lim);
    if (!ss || !c || !dec) {
        fprintf(stderr, "gw_load: cannot start (out of memory)\n");
        lw_loop_free(c);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        ss[i].sender = i >= cfg.sessions;
        ss[i].id = ss[i].sender ? i - cfg.sessions : i;
        ss[i].group = ss[i].sender ? ss[i].id % n_groups() : i / cfg.group_size;
        ss[i].url = ss[i].id % cfg.n_urls;
    }
    if (!setup_sessions(c, ss, n))
        goto done;
    fprintf(stderr, "gw_load: %d sessions in %d groups, %d senders: running %.0f s\n", n,
            n_groups(), cfg.senders, cfg.seconds);

    double cpu0 = self_cpu_s(), srv0 = cfg.server_pid ? servers_cpu_s() : 0;
    int64_t t0 = now_ns(), until = t0 + (int64_t)(cfg.seconds * 1e9), last_print = t0,
            last_sweep = t0, last_iv = t0;
    uint64_t iv_deliveries = 0, iv_confirmed = 0;
    double iv_cpu = srv0;
    run_t0 = t0;
    uint8_t *body = calloc(1, (size_t)cfg.body);
    int next_sender = 0;
    while (now_ns() < until && (!cfg.count || st.sends < (uint64_t)cfg.count)) {
        int64_t now = now_ns();
        if (!cfg.idle && cfg.senders) {
            if (cfg.rate > 0) {
                /* Open loop: every message due by now goes, stamped with when it was due. */
                /* Message k is due at t0 + k / rate: k = 0 goes at once. */
                uint64_t due = (uint64_t)((double)(now - t0) / 1e9 * cfg.rate) + 1;
                while (st.sends < due && (!cfg.count || st.sends < (uint64_t)cfg.count)) {
                    int64_t meant = t0 + (int64_t)((double)st.sends * 1e9 / cfg.rate);
                    sess *s = &ss[cfg.sessions + next_sender];
                    next_sender = (next_sender + 1) % cfg.senders;
                    if (cfg.raw_sub)
                        send_raw(s, meant, body);
                    else
                        send_message(s, sb, meant, body);
                }
            } else if (cfg.raw_sub) {
                /* A peer confirms nothing: the window is what the first subscriber has not
                 * received yet. */
                for (int i = 0;
                     cfg.sessions && st.sends - raw_first_received < (uint64_t)cfg.window &&
                     (!cfg.count || st.sends < (uint64_t)cfg.count);
                     i = (i + 1) % cfg.senders)
                    send_raw(&ss[cfg.sessions + i], now_ns(), body);
            } else {
                for (int i = 0; i < cfg.senders; i++) {
                    sess *s = &ss[cfg.sessions + i];
                    while (s->inflight < cfg.window &&
                           (!cfg.count || st.sends < (uint64_t)cfg.count))
                        send_message(s, sb, now_ns(), body);
                }
            }
        }
        pump(c, cfg.rate > 0 ? 1 : 5);
        /* Acks that are due by time, not count (a quiet group): a sweep every 20 ms is
         * well inside the server's ack_delay and costs nothing per delivery. */
        if (now - last_sweep >= 20000000) {
            last_sweep = now;
            for (int i = 0; i < cfg.sessions && !cfg.raw_sub; i++)
                maybe_ack(&ss[i], sb, false, now);
        }
        if (cfg.interval > 0 && now - last_iv >= (int64_t)(cfg.interval * 1e9)) {
            double srv_cpu = cfg.server_pid ? servers_cpu_s() : 0;
            interval_line((double)(now - t0) / 1e9, (double)(now - last_iv) / 1e9,
                          st.deliveries - iv_deliveries, st.confirmed - iv_confirmed,
                          srv_cpu - iv_cpu, cfg.server_pid ? servers_rss_kib() : -1);
            last_iv = now;
            iv_deliveries = st.deliveries;
            iv_confirmed = st.confirmed;
            iv_cpu = srv_cpu;
        }
        if (now - last_print >= 1000000000) {
            last_print = now;
            fprintf(
                stderr, "gw_load: %.0f s: sent %lu, confirmed %lu, delivered %lu, p99 %.2f ms\n",
                (double)(now - t0) / 1e9, (unsigned long)st.sends, (unsigned long)st.confirmed,
                (unsigned long)st.deliveries, (double)load_hist_quantile(&st.lat, 0.99) / 1000.0);
        }
    }
    /* Let what is in flight arrive (bounded), then ack the rest as a client leaving would. */
    int64_t drain = now_ns() + 2000000000;
    while (!cfg.idle && now_ns() < drain &&
           (cfg.raw_sub ? raw_first_received < st.sends : st.confirmed < st.sends))
        pump(c, 5);
    double secs = (double)(now_ns() - t0) / 1e9;
    for (int i = 0; i < cfg.sessions && !cfg.raw_sub; i++)
        maybe_ack(&ss[i], sb, true, 0);
    for (int64_t flush = now_ns() + 100000000; now_ns() < flush;)
        pump(c, 10); /* the last acks out */
    double cpu_self = self_cpu_s() - cpu0;
    double cpu_srv = cfg.server_pid ? servers_cpu_s() - srv0 : 0;
    long rss = cfg.server_pid ? servers_rss_kib() : -1;
    report(secs, cpu_self, cpu_srv, rss, n);
    free(body);
    rc = st.errors ? 1 : 0;
done:
    lw_loop_free(c);
out:
    pr_decoder_free(dec);
    msgpack_sbuffer_destroy(sb);
    free(ss);
    return rc;
}
