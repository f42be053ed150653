/*
 * peers_bench: what members see of each other, measured (docs/BENCHMARKS.md, driven by
 * tools/bench/peers.sh).
 *
 *   peers_bench fill --store PATH_OR_URL [--members N] [--msgs M] [--seed S]
 *       a group "big" of N members (uids m0000000 ...) and M messages, each member with a
 *       random ack and, for four in five, a random read: written straight into a store
 *       (a RocksDB folder or a PostgreSQL URL) before a gateway opens it.
 *   peers_bench receipts --url WS [--queries Q]
 *       signs in as m0000000 and asks `receipts` of random mids of "big", one at a time:
 *       the first (which reads the roster from the store) and the others' p50 and p99.
 *   peers_bench typing --url WS [--sessions N] [--rounds R]
 *       N sessions join "ty"; R of them type, one after another: how long until every
 *       other session has the push (per receiver: p50 and p99; per round: the last one).
 *
 * The token secret: GW_SECRET. Output: one line of key=value figures.
 */
#include "gwc.h"
#include "bench_store.h"
#include "store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static pr_slice sl(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t quantile(int64_t *v, size_t n, double q)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), cmp_i64);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static void die(const char *what)
{
    fprintf(stderr, "peers_bench: %s\n", what);
    exit(1);
}

/* ---- fill --------------------------------------------------------------------------------- */

static void fill(const char *where, int members, int msgs, unsigned seed)
{
    st_options o;
    st_options_init(&o);
    bench_store_where(&o, where);
    o.sync = false;
    st_store *s = NULL;
    char err[512];
    if (st_open(&o, &s, err, sizeof(err)) != 0)
        die(err);
    enum { CHUNK = 2000 };
    static st_op ops[CHUNK];
    static st_ack acks[CHUNK];
    static char uids[CHUNK][16];
    int rcs[CHUNK];
    int64_t t0 = now_us();
    for (int base = 0; base < members; base += CHUNK) {
        int n = members - base < CHUNK ? members - base : CHUNK;
        for (int i = 0; i < n; i++) {
            snprintf(uids[i], sizeof(uids[i]), "m%07d", base + i);
            ops[i] =
                (st_op){.kind = ST_OP_JOIN, .gid = st_id_str("big"), .uid = st_id_str(uids[i])};
        }
        st_submit_all(s, ops, (size_t)n, rcs);
        for (int i = 0; i < n; i++)
            if (rcs[i] != 0 || ops[i].result != 0) {
                fprintf(stderr, "peers_bench: join of %s: %d %d\n", uids[i], rcs[i], ops[i].result);
                exit(1);
            }
    }
    for (int m = 1; m <= msgs; m++) {
        char cid[16], rec[32];
        snprintf(cid, sizeof(cid), "c%d", m);
        snprintf(rec, sizeof(rec), "message %d", m);
        if (st_append_sync(s, st_id_str("big"), st_id_str("m0000000"), st_id_str(cid), rec,
                           strlen(rec), NULL, NULL, NULL) != 0)
            die("an append failed");
    }
    srand(seed);
    for (int base = 0; base < members; base += CHUNK) {
        int n = members - base < CHUNK ? members - base : CHUNK;
        for (int i = 0; i < n; i++) {
            snprintf(uids[i], sizeof(uids[i]), "m%07d", base + i);
            /* Most members near the end, some far behind: cursors bunch, as they do. */
            uint64_t ack =
                rand() % 4 ? (uint64_t)(msgs - rand() % 10) : (uint64_t)(rand() % (msgs + 1));
            uint64_t read = ack > 3 ? ack - (uint64_t)(rand() % 4) : ack;
            acks[i] = (st_ack){.gid = st_id_str("big"),
                               .uid = st_id_str(uids[i]),
                               .mid = ack,
                               .read = read,
                               .has_read = rand() % 5 != 0};
        }
        size_t applied;
        if (st_acks_sync(s, acks, (size_t)n, &applied) != 0)
            die("acks failed");
    }
    st_close(s);
    printf("fill members=%d msgs=%d seconds=%.1f\n", members, msgs, (now_us() - t0) / 1e6);
}

/* ---- clients -------------------------------------------------------------------------------- */

static const char *secret(void)
{
    const char *s = getenv("GW_SECRET");
    if (!s || strlen(s) < 16)
        die("GW_SECRET (16 bytes or more) is needed for tokens");
    return s;
}

static gwc_conn *sign_in(gwc_ctx *ctx, const char *url, const char *uid)
{
    gwc_conn *k = NULL;
    if (gwc_connect(ctx, url, 10000, &k) != 0)
        die(gwc_ctx_last_error(ctx));
    char *tok = NULL;
    const char *sec = secret();
    gwc_token_mint(sec, strlen(sec), uid, (int64_t)time(NULL) + 3600, NULL, 0, false, &tok);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, sl(tok));
    gwc_send(k, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    free(tok);
    pr_event ev;
    if (gwc_next(k, 10000, &ev) != 0 || ev.t != PR_EV_WELCOME)
        die("no welcome");
    return k;
}

/* Waits for the event of type t on k (others skipped); false after ms. */
static bool wait_for(gwc_conn *k, enum pr_ev_type t, int ms, pr_event *ev)
{
    int64_t until = now_us() + (int64_t)ms * 1000;
    while (now_us() < until) {
        int rc = gwc_next(k, (int)((until - now_us()) / 1000) + 1, ev);
        if (rc == GWC_ETIMEDOUT)
            return false;
        if (rc != 0)
            die("a session ended");
        if (ev->t == PR_EV_ERR) {
            fprintf(stderr, "peers_bench: the gateway answered an error: %d %.*s\n", ev->err_code,
                    (int)ev->err_msg.n, (const char *)ev->err_msg.p);
            exit(1);
        }
        if (ev->t == t)
            return true;
    }
    return false;
}

static void receipts(const char *url, int queries)
{
    gwc_ctx *ctx = gwc_ctx_new(NULL);
    gwc_conn *k = sign_in(ctx, url, "m0000000");
    int64_t *lat = calloc((size_t)queries, sizeof(*lat)), first = 0;
    uint64_t of = 0, last_mid = 1000;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    srand(7);
    for (int i = 0; i <= queries; i++) {
        sb.size = 0;
        uint64_t mid = 1 + (uint64_t)rand() % last_mid;
        pr_enc_receipts_req(&sb, (uint64_t)i + 2, sl("big"), mid);
        int64_t t0 = now_us();
        gwc_send(k, sb.data, sb.size);
        pr_event ev;
        if (!wait_for(k, PR_EV_RECEIPTS, 60000, &ev))
            die("no receipts within 60 s");
        int64_t us = now_us() - t0;
        of = ev.of;
        if (i == 0)
            first = us;
        else
            lat[i - 1] = us;
    }
    msgpack_sbuffer_destroy(&sb);
    printf("receipts members=%llu queries=%d first_us=%lld p50_us=%lld p99_us=%lld max_us=%lld\n",
           (unsigned long long)of, queries, (long long)first,
           (long long)quantile(lat, (size_t)queries, 0.5),
           (long long)quantile(lat, (size_t)queries, 0.99),
           (long long)quantile(lat, (size_t)queries, 1.0));
    free(lat);
    gwc_close(k);
    gwc_ctx_free(ctx);
}

static void typing(const char *url, int sessions, int rounds)
{
    gwc_ctx *ctx = gwc_ctx_new(NULL);
    gwc_conn **k = calloc((size_t)sessions, sizeof(*k));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (int i = 0; i < sessions; i++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "ty%05d", i);
        k[i] = sign_in(ctx, url, uid);
        sb.size = 0;
        pr_enc_join(&sb, 2, sl("ty"));
        gwc_send(k[i], sb.data, sb.size);
        pr_event ev;
        if (!wait_for(k[i], PR_EV_JOINED, 10000, &ev))
            die("no joined");
    }
    int64_t *lat = calloc((size_t)sessions * (size_t)rounds, sizeof(*lat));
    int64_t *last = calloc((size_t)rounds, sizeof(*last));
    size_t n = 0;
    for (int r = 0; r < rounds; r++) {
        int who = r % sessions;
        sb.size = 0;
        pr_enc_typing(&sb, sl("ty"));
        int64_t t0 = now_us();
        gwc_send(k[who], sb.data, sb.size);
        int64_t worst = 0;
        /* Every other session's push, in whatever order they come. */
        for (int got = 0; got < sessions - 1;) {
            gwc_poll(ctx, 1000);
            gwc_conn *c;
            while ((c = gwc_next_ready(ctx)) != NULL) {
                pr_event ev;
                while (gwc_next(c, 0, &ev) == 0)
                    if (ev.t == PR_EV_TYPING) {
                        int64_t us = now_us() - t0;
                        lat[n++] = us;
                        worst = us > worst ? us : worst;
                        got++;
                    }
            }
            if (now_us() - t0 > 30000000)
                die("typing did not reach everyone within 30 s");
        }
        last[r] = worst;
    }
    printf(
        "typing sessions=%d rounds=%d p50_us=%lld p99_us=%lld last_p50_us=%lld last_max_us=%lld\n",
        sessions, rounds, (long long)quantile(lat, n, 0.5), (long long)quantile(lat, n, 0.99),
        (long long)quantile(last, (size_t)rounds, 0.5),
        (long long)quantile(last, (size_t)rounds, 1.0));
    msgpack_sbuffer_destroy(&sb);
    free(lat);
    free(last);
    for (int i = 0; i < sessions; i++)
        gwc_close(k[i]);
    free(k);
    gwc_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: peers_bench fill|receipts|typing [options] (see the source's top)\n");
        return 2;
    }
    const char *mode = argv[1], *store = NULL, *url = NULL;
    int members = 100000, msgs = 1000, queries = 1000, sessions = 1000, rounds = 20;
    unsigned seed = 23;
    static const struct option opts[] = {
        {"store", required_argument, 0, 's'},
        {"url", required_argument, 0, 'u'},
        {"members", required_argument, 0, 'm'},
        {"msgs", required_argument, 0, 'M'},
        {"queries", required_argument, 0, 'q'},
        {"sessions", required_argument, 0, 'n'},
        {"rounds", required_argument, 0, 'r'},
        {"seed", required_argument, 0, 'S'},
        {0, 0, 0, 0},
    };
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': store = optarg; break;
        case 'u': url = optarg; break;
        case 'm': members = atoi(optarg); break;
        case 'M': msgs = atoi(optarg); break;
        case 'q': queries = atoi(optarg); break;
        case 'n': sessions = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'S': seed = (unsigned)atoi(optarg); break;
        default: return 2;
        }
    }
    if (!strcmp(mode, "fill") && store && members > 0 && msgs > 0)
        fill(store, members, msgs, seed);
    else if (!strcmp(mode, "receipts") && url && queries > 0)
        receipts(url, queries);
    else if (!strcmp(mode, "typing") && url && sessions > 1 && rounds > 0)
        typing(url, sessions, rounds);
    else {
        fprintf(stderr, "peers_bench: missing or bad options (see the source's top)\n");
        return 2;
    }
    return 0;
}
