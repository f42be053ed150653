/*
 * gw_crash: crash-and-verify. Runs senders and receivers against a gateway it starts
 * itself, kills the gateway with SIGKILL at random moments, restarts it, and at the end
 * checks the invariants that make the system trustworthy:
 *   - every message a sender saw confirmed is stored exactly once, under its mid;
 *   - mids are dense (1..last, no hole);
 *   - every receiver, after dedup by mid, holds every message from its join to the end,
 *     each once, in order;
 *   - a stored ack never exceeds what the client acked, and never falls behind an ack
 *     the client sent more than the ack flush window before a kill.
 * It prints the counts (confirmed, kills, re-deliveries absorbed, losses) and exits 0
 * only if every invariant held.
 *
 * On PostgreSQL (--store URL) the gateway keeps its store in that database; with
 * --kill db (and --pg-dir, the folder of a server of tools/pg_server.sh) it is the
 * database that is restarted at random moments (pg_ctl restart -m immediate), under a
 * gateway that keeps running: writes in flight get `unavailable` and senders resend them
 * with the same cid, receivers fill the holes that leaves by pulling.
 *
 *   gw_crash --gw build/gw [--kills 20] [--senders 3] [--receivers 3] [--seed N]
 *            [--store URL [--kill gw|db --pg-dir DIR]]
 */
#include "gwc.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "crash-harness-secret-0123456789"
#define MAX_MSGS 1500000 /* mids the harness tracks; senders stop short of it */
#define GID "crash"
#define ACK_FLUSH_MS 200

typedef struct client {
    gwc_conn *k;
    char uid[16];
    bool sender;
    bool welcomed, entered;
    bool pulling;       /* receiver: a pull is on its way (holes are filled one at a time) */
    uint64_t pulled_at; /* ... since then (ms) */
    uint64_t retry_at;  /* sender: when to resend what was refused (0: nothing to) */
    uint64_t welcome_ack;
    /* sender */
    uint64_t next_cid;  /* cids 1..next_cid-1 were sent at least once */
    uint64_t confirmed; /* cids below this are all confirmed (tracked per cid below) */
    /* receiver */
    uint64_t join_mid;  /* messages after this belong to the receiver */
    uint64_t held;      /* contiguous watermark */
    uint64_t acked;     /* last ack sent */
    uint64_t acked_at_ms[2]; /* acked value and when, for the window check */
    uint64_t safe_ack;  /* the highest ack sent at least a flush window before the kill */
    uint64_t dups;
    uint8_t *seen;      /* by mid */
} client;

typedef struct opts {
    const char *gw;
    int kills, senders, receivers;
    unsigned seed;
    const char *store;  /* --store URL: PostgreSQL */
    bool kill_db;       /* restart the database, not the gateway */
    const char *pg_dir; /* its tools/pg_server.sh folder */
} opts;

static opts o = {.kills = 20, .senders = 3, .receivers = 3};
static char dir[256], url[96], tools_dir[400];
static pid_t gw_pid;
/* cid (per sender) -> confirmed mid; body is "<uid>:<cid>" so the stored message names it. */
static uint64_t *confirmed_mid[64];
static uint64_t n_confirmed[64]; /* confirmed cids of each sender, counted as they come */
static uint64_t n_refused;       /* sends answered with an error (then resent) */

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static pr_slice sl(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "gw_crash: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    if (gw_pid > 0)
        kill(gw_pid, SIGKILL);
    exit(1);
}

static void start_gw(void)
{
    char pf[300], data[300], logf[300];
    snprintf(pf, sizeof(pf), "%s/port", dir);
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(logf, sizeof(logf), "%s/gw.log", dir);
    unlink(pf);
    gw_pid = fork();
    if (gw_pid == 0) {
        FILE *l = freopen(logf, "a", stderr);
        (void)l;
        setenv("GW_SECRET", SECRET, 1);
        /* Senders go flat out: the rate limits are off, they are not what is tested. */
        const char *argv[20] = {o.gw, "--insecure", "--port", "0", "--port-file", pf,
                                "--data", data, "--log-level", "1", "--ack-flush-ms", "200",
                                "--rate-sends", "0", "--rate-bytes", "0", NULL};
        if (o.store) {
            argv[16] = "--store";
            argv[17] = o.store;
        }
        execv(o.gw, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        FILE *f = fopen(pf, "r");
        int port = 0;
        if (f && fscanf(f, "%d", &port) == 1 && port > 0) {
            fclose(f);
            snprintf(url, sizeof(url), "ws://127.0.0.1:%d/ws", port);
            return;
        }
        if (f)
            fclose(f);
        usleep(25000);
    }
    die("the gateway did not start (see %s/gw.log)", dir);
}

static void send_frame(client *c, msgpack_sbuffer *sb)
{
    gwc_send(c->k, sb->data, sb->size); /* a failure is a dead connection: seen later */
    sb->size = 0;
}

static void send_cid(client *c, uint64_t cid, msgpack_sbuffer *sb)
{
    char cids[32], body[48];
    snprintf(cids, sizeof(cids), "%lu", (unsigned long)cid);
    snprintf(body, sizeof(body), "%s:%lu", c->uid, (unsigned long)cid);
    pr_enc_send(sb, cid, sl(GID), sl(cids), (pr_body){sl(body), false});
    send_frame(c, sb);
}

static void ack(client *c, msgpack_sbuffer *sb)
{
    if (c->held <= c->acked)
        return;
    pr_ack a = {sl(GID), c->held};
    pr_enc_ack(sb, &a, 1);
    send_frame(c, sb);
    c->acked = c->held;
    c->acked_at_ms[0] = c->acked;
    c->acked_at_ms[1] = now_ms();
}

/* Receivers fill holes the way a real client does: one pull after what they hold. */
static void pull_after_held(client *c, msgpack_sbuffer *sb)
{
    if (c->pulling && now_ms() - c->pulled_at < 2000)
        return;
    c->pulling = true;
    c->pulled_at = now_ms();
    pr_enc_pull(sb, PR_NO_RID, sl(GID), false, c->held, 500);
    send_frame(c, sb);
}

static void take(client *c, uint64_t mid, pr_slice body, msgpack_sbuffer *sb)
{
    if (mid >= MAX_MSGS)
        die("more messages than the harness can track (%s)", "MAX_MSGS");
    if (mid <= c->join_mid)
        return;
    if (c->seen[mid]) {
        c->dups++; /* re-delivery: absorbed by dedup */
        return;
    }
    c->seen[mid] = 1;
    /* The body names the sender and cid: the stored mid must be the confirmed one. */
    char b[64];
    snprintf(b, sizeof(b), "%.*s", (int)body.n, body.p);
    char *colon = strchr(b, ':');
    int sender = colon ? atoi(b + 1) : -1; /* uid "s<N>" */
    uint64_t cid = colon ? strtoull(colon + 1, NULL, 10) : 0;
    if (sender < 0 || sender >= o.senders || !cid || cid >= MAX_MSGS)
        die("a stored message has a body the harness did not send: %s", b);
    uint64_t want = confirmed_mid[sender][cid];
    if (want && want != mid) {
        fprintf(stderr, "gw_crash: %s confirmed as mid %lu, delivered as mid %lu\n", b,
                (unsigned long)want, (unsigned long)mid);
        die("%s", "duplicate store");
    }
    while (c->held < MAX_MSGS - 1 && c->seen[c->held + 1])
        c->held++;
    if (c->held - c->acked >= 50)
        ack(c, sb);
    /* A message past a hole: a message committed while the database went away was not
     * pushed (its sender was told `unavailable`, and its resend is a duplicate). */
    if (mid > c->held + 1 && c->entered)
        pull_after_held(c, sb);
}

static void on_event(client *c, const pr_event *ev, msgpack_sbuffer *sb)
{
    switch (ev->t) {
    case PR_EV_WELCOME:
        c->welcomed = true;
        for (size_t i = 0; i < ev->n_items; i++) {
            pr_group g;
            if (pr_event_group(ev, i, &g) == 0 && g.gid.n == strlen(GID))
                c->welcome_ack = g.ack;
        }
        break;
    case PR_EV_JOINED:
        if (!c->sender && !c->join_mid && !c->held)
            c->join_mid = c->held = c->acked = ev->ack;
        c->entered = true; /* it holds everything from its join: holes can be filled */
        break;
    case PR_EV_SENT: {
        int s = atoi(c->uid + 1);
        uint64_t cid = ev->rid, prev = confirmed_mid[s][cid];
        if (prev && prev != ev->mid)
            die("%s", "a resent cid got a different mid: idempotency broken");
        if (!prev)
            n_confirmed[s]++;
        confirmed_mid[s][cid] = ev->mid;
        break;
    }
    case PR_EV_MSG:
        if (!c->sender) /* senders are members too: they see each other's messages */
            take(c, ev->msg.mid, ev->msg.body.data, sb);
        break;
    case PR_EV_PAGE:
        c->pulling = false;
        for (size_t i = 0; i < ev->n_items; i++) {
            pr_message m;
            if (pr_event_message(ev, i, &m) == 0)
                take(c, m.mid, m.body.data, sb);
        }
        ack(c, sb);
        if (ev->more) {
            pull_after_held(c, sb);
        } else {
            c->entered = true;
        }
        break;
    case PR_EV_NOTIFY:
        pr_enc_pull(sb, PR_NO_RID, sl(GID), false, c->held, 500);
        send_frame(c, sb);
        break;
    case PR_EV_ERR:
        /* unavailable (the database went away): a sender resends soon, with the same cid;
         * a receiver's pull is tried again. overloaded while stopping, or a session the
         * gateway closed: not a failure. */
        if (c->sender)
            n_refused++;
        if (c->sender && !c->retry_at)
            c->retry_at = now_ms() + 300;
        c->pulling = false;
        break;
    default:
        break;
    }
}

static uint64_t confirmed_count(int s)
{
    return n_confirmed[s] + 1;
}

static void pump(gwc_ctx *ctx, int ms, msgpack_sbuffer *sb)
{
    gwc_poll(ctx, ms);
    gwc_conn *k;
    while ((k = gwc_next_ready(ctx)) != NULL) {
        client *c = gwc_user(k);
        pr_event ev;
        while (gwc_next(k, 0, &ev) == 0)
            on_event(c, &ev, sb);
    }
}

/* Resends every cid of a sender not confirmed yet (the same cid: idempotent). */
static void resend_unconfirmed(client *c, msgpack_sbuffer *sb)
{
    int s = atoi(c->uid + 1);
    for (uint64_t cid = 1; cid < c->next_cid; cid++)
        if (!confirmed_mid[s][cid])
            send_cid(c, cid, sb);
    c->retry_at = 0;
}

/* Connects and signs in every client; receivers then pull after their stored ack and
 * senders resend every cid not confirmed yet. */
static void connect_all(gwc_ctx *ctx, client *cs, int n, bool first, msgpack_sbuffer *sb)
{
    for (int i = 0; i < n; i++) {
        client *c = &cs[i];
        if (c->k)
            gwc_close(c->k);
        c->k = NULL;
        c->welcomed = c->entered = false;
        if (gwc_connect(ctx, url, 5000, &c->k) != 0)
            die("cannot connect: %s", gwc_ctx_last_error(ctx));
        gwc_set_user(c->k, c);
        char *tok = NULL;
        gwc_token_mint(SECRET, strlen(SECRET), c->uid, (int64_t)time(NULL) + 3600, NULL, 0,
                       false, &tok);
        pr_enc_hello(sb, PR_NO_RID, sl(tok));
        send_frame(c, sb);
        free(tok);
    }
    uint64_t until = now_ms() + 10000;
    for (bool all = false; !all; pump(ctx, 5, sb)) {
        all = true;
        for (int i = 0; i < n; i++)
            all &= cs[i].welcomed;
        if (now_ms() > until)
            die("%s", "sign-in timed out");
    }
    for (int i = 0; i < n; i++) {
        client *c = &cs[i];
        if (first) {
            pr_enc_join(sb, PR_NO_RID, sl(GID));
            send_frame(c, sb);
        } else if (!c->sender) {
            /* The stored ack may trail the client's by at most the flush window. */
            if (c->welcome_ack > c->acked)
                die("%s: the stored ack is above what the client acked", c->uid);
            if (c->welcome_ack < c->safe_ack)
                die("%s: the stored ack went back more than the flush window", c->uid);
            pr_enc_enter(sb, PR_NO_RID, sl(GID), 500);
            send_frame(c, sb);
        }
        if (!first && c->sender)
            resend_unconfirmed(c, sb);
    }
    if (first)
        for (uint64_t t = now_ms() + 2000; now_ms() < t;)
            pump(ctx, 5, sb);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"gw", required_argument, 0, 'g'},        {"kills", required_argument, 0, 'k'},
        {"senders", required_argument, 0, 's'},   {"receivers", required_argument, 0, 'r'},
        {"seed", required_argument, 0, 'S'},      {"help", no_argument, 0, 'h'},
        {"store", required_argument, 0, 'u'},     {"kill", required_argument, 0, 'K'},
        {"pg-dir", required_argument, 0, 'P'},    {0, 0, 0, 0},
    };
    o.seed = (unsigned)time(NULL);
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'g': o.gw = optarg; break;
        case 'k': o.kills = atoi(optarg); break;
        case 's': o.senders = atoi(optarg); break;
        case 'r': o.receivers = atoi(optarg); break;
        case 'S': o.seed = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'u': o.store = optarg; break;
        case 'K':
            if (strcmp(optarg, "db") != 0 && strcmp(optarg, "gw") != 0) {
                fprintf(stderr, "gw_crash: --kill gw or --kill db\n");
                return 2;
            }
            o.kill_db = strcmp(optarg, "db") == 0;
            break;
        case 'P': o.pg_dir = optarg; break;
        case 'h':
            printf("usage: gw_crash --gw PATH [--kills N] [--senders N] [--receivers N] "
                   "[--seed N]\n"
                   "                [--store URL [--kill gw|db --pg-dir DIR]]\n"
                   "  --store URL   the gateway's store is PostgreSQL at URL\n"
                   "  --kill db     restart the database (pg_ctl restart -m immediate) instead\n"
                   "                of killing the gateway; DIR is its tools/pg_server.sh folder\n");
            return 0;
        default: return 2;
        }
    }
    if (o.kill_db && (!o.store || !o.pg_dir)) {
        fprintf(stderr, "gw_crash: --kill db needs --store URL and --pg-dir DIR\n");
        return 2;
    }
    if (!o.gw || o.kills < 1 || o.kills > 1000 || o.senders < 1 || o.senders > 64 ||
        o.receivers < 1 || o.receivers > 64) {
        fprintf(stderr, "gw_crash: --gw PATH is required; kills 1-1000, senders and "
                        "receivers 1-64 (see --help)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines as they happen */
    /* tools/pg_server.sh, beside the source of this build: GW_SOURCE_DIR. */
    snprintf(tools_dir, sizeof(tools_dir), "%s/tools", GW_SOURCE_DIR);
    srand(o.seed);
    signal(SIGPIPE, SIG_IGN);
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/gw-crash-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir))
        die("mkdtemp: %s", strerror(errno));
    int n = o.senders + o.receivers;
    client *cs = calloc((size_t)n, sizeof(*cs));
    for (int i = 0; i < n; i++) {
        cs[i].sender = i < o.senders;
        snprintf(cs[i].uid, sizeof(cs[i].uid), "%c%d", cs[i].sender ? 's' : 'r',
                 cs[i].sender ? i : i - o.senders);
        cs[i].next_cid = 1;
        if (cs[i].sender)
            confirmed_mid[i] = calloc(MAX_MSGS, sizeof(uint64_t));
        else
            cs[i].seen = calloc(MAX_MSGS, 1);
    }
    gwc_ctx *ctx = gwc_ctx_new(NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    start_gw();
    connect_all(ctx, cs, n, true, &sb);
    printf("gw_crash: seed %u, %d senders, %d receivers, %d kills of the %s, %s store, data "
           "in %s\n", o.seed, o.senders, o.receivers, o.kills, o.kill_db ? "database" : "gateway",
           o.store ? "PostgreSQL" : "RocksDB", dir);

    for (int kill_no = 1; kill_no <= o.kills; kill_no++) {
        uint64_t until = now_ms() + 200 + (uint64_t)(rand() % 1300);
        while (now_ms() < until) {
            uint64_t sent_all = 0; /* every cid sent makes at most one mid */
            for (int i = 0; i < o.senders; i++)
                sent_all += cs[i].next_cid - 1;
            for (int i = 0; i < o.senders; i++) /* at most 64 unconfirmed per sender */
                for (int j = 0; j < 4 && sent_all < MAX_MSGS - 1000 &&
                                cs[i].next_cid - confirmed_count(i) < 64;
                     j++, sent_all++)
                    send_cid(&cs[i], cs[i].next_cid++, &sb);
            pump(ctx, 2, &sb);
            for (int i = o.senders; i < n; i++)
                if (cs[i].acked < cs[i].held && now_ms() - cs[i].acked_at_ms[1] > 100)
                    ack(&cs[i], &sb);
            for (int i = 0; i < o.senders; i++)
                if (cs[i].retry_at && now_ms() >= cs[i].retry_at)
                    resend_unconfirmed(&cs[i], &sb);
        }
        if (o.kill_db) {
            /* The database crashes and comes back; the gateway and its sessions stay. */
            char cmd[600];
            snprintf(cmd, sizeof(cmd), "%s/pg_server.sh restart-immediate '%s'", tools_dir,
                     o.pg_dir);
            if (system(cmd) != 0)
                die("cannot restart the database (%s)", cmd);
            if (kill_no % 5 == 0)
                printf("gw_crash: %d database restarts so far\n", kill_no);
            continue;
        }
        /* What the store must hold at least: acks sent one flush window (and some slack
         * for the writer) before the kill. */
        uint64_t kill_at = now_ms();
        for (int i = o.senders; i < n; i++)
            if (cs[i].acked_at_ms[1] + 2 * ACK_FLUSH_MS + 100 < kill_at)
                cs[i].safe_ack = cs[i].acked_at_ms[0] > cs[i].safe_ack ? cs[i].acked_at_ms[0]
                                                                       : cs[i].safe_ack;
        kill(gw_pid, SIGKILL);
        waitpid(gw_pid, NULL, 0);
        pump(ctx, 20, &sb);
        start_gw();
        connect_all(ctx, cs, n, false, &sb);
        if (kill_no % 5 == 0)
            printf("gw_crash: %d kills so far\n", kill_no);
    }
    /* Quiet end: no more sends; wait (bounded) until every send is confirmed and every
     * receiver holds up to the last confirmed mid, then judge. Slow machines and sanitizer
     * builds need the time; a real loss never catches up. */
    for (uint64_t t = now_ms() + 60000; now_ms() < t;) {
        pump(ctx, 5, &sb);
        for (int i = 0; i < o.senders; i++)
            if (cs[i].retry_at && now_ms() >= cs[i].retry_at)
                resend_unconfirmed(&cs[i], &sb);
        for (int i = o.senders; i < n; i++)
            if (cs[i].entered)
                pull_after_held(&cs[i], &sb); /* at most one every two seconds */
        uint64_t top = 0;
        bool all_confirmed = true;
        for (int s = 0; s < o.senders; s++) {
            all_confirmed &= n_confirmed[s] + 1 >= cs[s].next_cid;
            for (uint64_t cid = 1; cid < cs[s].next_cid; cid++)
                if (confirmed_mid[s][cid] > top)
                    top = confirmed_mid[s][cid];
        }
        bool caught_up = all_confirmed;
        for (int i = o.senders; i < n; i++)
            caught_up &= cs[i].held >= top;
        if (caught_up)
            break;
    }
    /* Last mid, from a fresh receiver's view: pull everything from 0 with a new client. */
    uint64_t confirmed = 0, last = 0, losses = 0, dups = 0;
    for (int s = 0; s < o.senders; s++)
        for (uint64_t cid = 1; cid < cs[s].next_cid; cid++)
            if (confirmed_mid[s][cid]) {
                confirmed++;
                if (confirmed_mid[s][cid] > last)
                    last = confirmed_mid[s][cid];
            }
    for (int i = o.senders; i < n; i++) {
        client *c = &cs[i];
        dups += c->dups;
        /* Every confirmed message after the receiver's join must be held. */
        for (int s = 0; s < o.senders; s++)
            for (uint64_t cid = 1; cid < cs[s].next_cid; cid++) {
                uint64_t mid = confirmed_mid[s][cid];
                if (mid > c->join_mid && !c->seen[mid])
                    losses++;
            }
        /* Dense: every mid from the join up to the last it holds is held. */
        for (uint64_t mid = c->join_mid + 1; mid <= c->held; mid++)
            if (!c->seen[mid])
                losses++;
    }
    kill(gw_pid, SIGTERM);
    waitpid(gw_pid, NULL, 0);
    printf("gw_crash: confirmed %lu messages (last mid %lu), %d kills, %lu sends refused and "
           "resent, %lu re-deliveries absorbed by dedup, losses %lu\n",
           (unsigned long)confirmed, (unsigned long)last, o.kills, (unsigned long)n_refused,
           (unsigned long)dups, (unsigned long)losses);
    msgpack_sbuffer_destroy(&sb);
    gwc_ctx_free(ctx);
    for (int i = 0; i < n; i++)
        free(cs[i].sender ? (void *)confirmed_mid[i] : (void *)cs[i].seen);
    free(cs);
    if (losses == 0) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "gw_crash: could not remove %s\n", dir);
    }
    return losses ? 1 : 0;
}
