/*
 * gw_crash: crash-and-verify. Runs senders and receivers against a gateway it starts
 * itself, kills the gateway with SIGKILL at random moments, restarts it, and at the end
 * checks the invariants that make the system trustworthy:
 *   - every message a sender saw confirmed is stored exactly once, under its mid;
 *   - mids are dense (1..last, no hole);
 *   - every receiver, after dedup by mid, holds every message from its join to the end,
 *     each once, in order;
 *   - a stored ack never exceeds what the client acked, and never falls behind an ack
 *     the client sent more than two ack flush windows and a second before a kill.
 * It prints the counts (confirmed, kills, re-deliveries absorbed, losses) and exits 0
 * only if every invariant held.
 *
 * On PostgreSQL (--store URL) the gateway keeps its store in that database; with
 * --kill db (and --pg-dir, the folder of a server of tools/pg_server.sh) it is the
 * database that is restarted at random moments (pg_ctl restart -m immediate), under a
 * gateway that keeps running: writes in flight get `unavailable` and senders resend them
 * with the same cid, receivers fill the holes that leaves by pulling. At the end the
 * harness also reads the group from the database itself (gw.msgs, gw.sends) and checks
 * it against what was confirmed.
 *
 * A cluster (--nodes N, with --store): N gateways on the one database, client i on node
 * i % N, so that receivers get most messages from senders on other nodes (pushed through
 * the database's NOTIFY). --kill gw then kills a random node at each kill and restarts it
 * after a short pause; its clients reconnect to the live node with the fewest clients
 * (as a load balancer with least_conn would), senders resend what was not confirmed and
 * receivers pull after their stored ack. --kill primary (--pg-dir the primary's folder,
 * --pg-standby-dir its synchronous standby's, --store their tools/pg_server.sh
 * multi-url) kills the primary at each kill, promotes the standby, and once every node
 * takes writes again rejoins the old primary as the new standby. --failovers F
 * (--ha-dir DIR: a cluster of tools/pg_server.sh ha-up, --store its URL) interleaves F
 * automatic failovers with the node kills of --kill gw: the leader's postmaster and its
 * Patroni are killed and nothing else is done: Patroni promotes the replica by itself,
 * the nodes find it by the URL, and the old leader comes back as its replica (waited for
 * under the load before the next kill of any kind).
 *
 *   gw_crash --gw build/gw [--kills 20] [--senders 3] [--receivers 3] [--seed N]
 *            [--store URL [--nodes N] [--kill gw|db|primary --pg-dir DIR
 *            [--pg-standby-dir DIR2]] [--failovers F --ha-dir DIR]]
 */
#include "crash_shards.h"
#include "gw_crash.h"
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
/* Mids the harness tracks; senders stop short of it, and a run that still waits for new
 * confirmations then says so (senders' arrays are calloc'd: pages never written cost no
 * memory, so the bound is about the longest run, not the size of a short one). */
#define MAX_MSGS 16000000
#define GID "crash"
#define ACK_FLUSH_MS 200

typedef struct client {
    gwc_conn *k;
    char uid[16];
    bool sender;
    int group; /* its group: gids[group] (0, "crash", without --shards) */
    bool welcomed, entered;
    bool pulling;       /* receiver: a pull is on its way (holes are filled one at a time) */
    uint64_t pulled_at; /* ... since then (ms) */
    uint64_t retry_at;  /* sender: when to resend what was refused (0: nothing to) */
    uint64_t welcome_ack;
    /* sender */
    uint64_t next_cid;  /* cids 1..next_cid-1 were sent at least once */
    uint64_t confirmed; /* cids below this are all confirmed (tracked per cid below) */
    /* receiver */
    uint64_t join_mid;       /* messages after this belong to the receiver */
    uint64_t held;           /* contiguous watermark */
    uint64_t acked;          /* last ack sent */
    uint64_t acked_at_ms[2]; /* acked value and when it went out, for the window check */
    bool ack_queued;         /* the last ack is queued; pump() stamps when it went out */
    uint64_t safe_ack;       /* the highest ack sent at least a flush window before the kill */
    uint64_t dups;
    uint8_t *seen; /* by mid */
    /* Where it is connected. In a cluster its session may end at any moment (its node
     * killed, a sign-in refused while the database is away): it connects again by
     * itself (keep_connected), and sends nothing while it has no session. */
    int node;              /* the node of its session (or of its last one) */
    bool up;               /* signed in and resumed: requests may go out */
    uint64_t reconnect_at; /* without a session: when to connect again */
    uint64_t hello_at;     /* when its hello went out */
    uint64_t last_push;    /* receiver: mid of the last push of this session */
    uint64_t queued;       /* frames given to the connection, this session's */
} client;

typedef struct opts {
    const char *gw;
    int kills, senders, receivers, nodes;
    unsigned seed;
    const char *store;          /* --store URL: PostgreSQL */
    bool kill_db;               /* restart the database, not the gateway */
    bool kill_primary;          /* fail the primary over to its standby */
    const char *pg_dir;         /* its tools/pg_server.sh folder (the primary's, at first) */
    const char *pg_standby_dir; /* the synchronous standby's */
    int failovers;              /* automatic failovers among the node kills */
    const char *ha_dir;         /* their cluster's tools/pg_server.sh ha-up folder */
    bool edits;                 /* senders edit and recall some of their messages */
    int shards;                 /* --shards K: the store's slot map has K shards */
    int moves;                  /* slot moves (gw_slots) among the kills */
} opts;

static opts o = {.kills = 20, .senders = 3, .receivers = 3, .nodes = 1};
static char dir[256], tools_dir[400];
static bool cluster; /* clients keep themselves connected (several nodes, or failovers) */
/* cid (per sender) -> confirmed mid; body is "<uid>:<cid>" so the stored message names it. */
static uint64_t *confirmed_mid[64];
static uint8_t *sent_via[64];    /* cid (per sender) -> the node it was last sent through */
static uint64_t n_confirmed[64]; /* confirmed cids of each sender, counted as they come */
static uint64_t top_cid[64];     /* the highest cid of each sender confirmed */
static uint64_t n_refused;       /* sends answered with an error (then resent) */
static uint64_t n_cross;         /* first deliveries that were pushes from another node */
static uint64_t n_disorder;      /* pushes whose mid was not above the session's last push */
static uint64_t n_reconnects;    /* sessions that cluster clients opened again */
static uint64_t n_notifies;      /* notify instead of pushes (a session behind, a hole) */
/* --edits: a message's later version, by sender and cid: what was asked (VER_EDIT, or
 * VER_RECALL) and, with VER_DONE, confirmed (`edited`, `recalled`). Every 7th confirmed
 * message is edited (version 1, body "sN:cid:e") and every 11th recalled; an edit or
 * recall not confirmed is sent again like a send (the same version: idempotent). */
#define VER_EDIT 1
#define VER_RECALL 2
#define VER_DONE 4
#define VER_RID (1ull << 40) /* the rid of a version request: VER_RID | cid */
static uint8_t *ver_state[64];
static uint64_t n_versions; /* edits and recalls confirmed */
static client *clients;     /* every client, for pump() */
static int n_clients;
/* The groups: one ("crash") without --shards; with it two a shard (crash_shards.h), each
 * with its own senders and receivers, checked as the one group is. */
static char gids[SHARDS_MAX_GROUPS][SHARDS_GID_MAX] = {GID};
static int n_groups = 1;
static unsigned group_shard[SHARDS_MAX_GROUPS]; /* as the map said when last read */

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
    nodes_kill_all();
    exit(1);
}

/* Killed itself (a test's timeout, ^C): the nodes go with it, and the reason is said
 * (with async-signal-safe calls only). */
static void on_signal(int sig)
{
    char m[] = "gw_crash: stopped by signal 00\n";
    m[sizeof(m) - 4] = (char)('0' + sig / 10 % 10);
    m[sizeof(m) - 3] = (char)('0' + sig % 10);
    nodes_kill_all();
    ssize_t w = write(2, m, sizeof(m) - 1);
    (void)w;
    _exit(128 + sig);
}

static void send_frame(client *c, msgpack_sbuffer *sb)
{
    if (gwc_send(c->k, sb->data, sb->size) == 0) /* a failure is a dead connection: seen later */
        c->queued++;
    sb->size = 0;
}

static void send_cid(client *c, uint64_t cid, msgpack_sbuffer *sb)
{
    char cids[32], body[48];
    snprintf(cids, sizeof(cids), "%lu", (unsigned long)cid);
    snprintf(body, sizeof(body), "%s:%lu", c->uid, (unsigned long)cid);
    pr_enc_send(sb, cid, sl(gids[c->group]), sl(cids), (pr_body){sl(body), false});
    send_frame(c, sb);
    sent_via[atoi(c->uid + 1)][cid] = (uint8_t)c->node;
}

/* Sender c's edit or recall of its message cid (already confirmed), as ver_state says. */
static void send_version(client *c, uint64_t cid, msgpack_sbuffer *sb)
{
    int s = atoi(c->uid + 1);
    uint64_t mid = confirmed_mid[s][cid];
    if (ver_state[s][cid] & VER_RECALL) {
        pr_enc_recall(sb, VER_RID | cid, sl(gids[c->group]), mid);
    } else {
        char body[56];
        snprintf(body, sizeof(body), "%s:%lu:e", c->uid, (unsigned long)cid);
        pr_enc_edit(sb, VER_RID | cid, sl(gids[c->group]), mid, 1, (pr_body){sl(body), false});
    }
    send_frame(c, sb);
}

static void ack(client *c, msgpack_sbuffer *sb)
{
    if (c->held <= c->acked || !c->up)
        return;
    pr_ack a = {sl(gids[c->group]), c->held};
    pr_enc_ack(sb, &a, 1);
    send_frame(c, sb);
    c->acked = c->held;
    c->acked_at_ms[0] = c->acked;
    c->acked_at_ms[1] = now_ms();
    c->ack_queued = true;
}

/* Receivers fill holes the way a real client does: one pull after what they hold. */
static void pull_after_held(client *c, msgpack_sbuffer *sb)
{
    if (!c->up || (c->pulling && now_ms() - c->pulled_at < 2000))
        return;
    c->pulling = true;
    c->pulled_at = now_ms();
    pr_enc_pull(sb, PR_NO_RID, sl(gids[c->group]), false, c->held, 500);
    send_frame(c, sb);
}

static void take(client *c, uint64_t mid, pr_slice body, bool recalled, bool push,
                 msgpack_sbuffer *sb)
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
    if (recalled) { /* a tombstone: its version is checked at the end (check_versions) */
        while (c->held < MAX_MSGS - 1 && c->seen[c->held + 1])
            c->held++;
        return;
    }
    /* The body names the sender and cid: the stored mid must be the confirmed one. */
    char b[64];
    snprintf(b, sizeof(b), "%.*s", (int)body.n, body.p);
    char *colon = strchr(b, ':');
    int sender = colon ? atoi(b + 1) : -1; /* uid "s<N>" */
    uint64_t cid = colon ? strtoull(colon + 1, NULL, 10) : 0;
    if (sender < 0 || sender >= o.senders || !cid || cid >= MAX_MSGS ||
        clients[sender].group != c->group)
        die("a stored message has a body the harness did not send: %s", b);
    uint64_t want = confirmed_mid[sender][cid];
    if (want && want != mid) {
        fprintf(stderr, "gw_crash: %s confirmed as mid %lu, delivered as mid %lu\n", b,
                (unsigned long)want, (unsigned long)mid);
        die("%s", "duplicate store");
    }
    if (push && sent_via[sender][cid] != c->node)
        n_cross++; /* it came through the database's NOTIFY from the sender's node */
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
            if (pr_event_group(ev, i, &g) == 0 && g.gid.n == strlen(gids[c->group]) &&
                memcmp(g.gid.p, gids[c->group], g.gid.n) == 0)
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
        if (!prev) {
            n_confirmed[s]++;
            watch_confirmed(c->group);
        }
        confirmed_mid[s][cid] = ev->mid;
        if (cid > top_cid[s])
            top_cid[s] = cid;
        if (o.edits && !prev && (cid % 11 == 0 || cid % 7 == 0)) {
            ver_state[s][cid] = cid % 11 == 0 ? VER_RECALL : VER_EDIT;
            send_version(c, cid, sb);
        }
        break;
    }
    case PR_EV_EDITED:
    case PR_EV_RECALLED:
        if (c->sender && ev->has_rid && (ev->rid & VER_RID)) {
            int s = atoi(c->uid + 1);
            uint64_t cid = ev->rid & ~VER_RID;
            if (cid >= MAX_MSGS || ev->msg.ver != 1 || ev->msg.mid != confirmed_mid[s][cid] ||
                (ev->t == PR_EV_RECALLED) != !!(ver_state[s][cid] & VER_RECALL))
                die("%s", "a version's answer is not the version asked for");
            if (!(ver_state[s][cid] & VER_DONE))
                n_versions++;
            ver_state[s][cid] |= VER_DONE;
        }
        break;
    case PR_EV_MSG:
        if (!c->sender) { /* senders are members too: they see each other's messages */
            /* Pushes come in mid order (holes are filled by pages, not pushes). */
            if (ev->msg.mid <= c->last_push)
                n_disorder++;
            c->last_push = ev->msg.mid;
            take(c, ev->msg.mid, ev->msg.body.data, ev->msg.recalled, true, sb);
        }
        break;
    case PR_EV_PAGE:
        if (c->sender)
            break; /* never asked for, but see notify */
        c->pulling = false;
        for (size_t i = 0; i < ev->n_items; i++) {
            pr_message m;
            if (pr_event_message(ev, i, &m) == 0)
                take(c, m.mid, m.body.data, m.recalled, false, sb);
        }
        ack(c, sb);
        if (ev->more) {
            pull_after_held(c, sb);
        } else {
            c->entered = true;
        }
        break;
    case PR_EV_NOTIFY:
        n_notifies++;
        /* Senders keep no messages: they need not catch up. (A notify comes when a
         * session falls behind, or when a node could not read a hole in what it
         * pushes, e.g. after a failover.) */
        if (c->sender)
            break;
        pr_enc_pull(sb, PR_NO_RID, sl(gids[c->group]), false, c->held, 500);
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
    default: break;
    }
}

static uint64_t confirmed_count(int s)
{
    return n_confirmed[s] + 1;
}

static void pump(gwc_ctx *ctx, int ms, msgpack_sbuffer *sb)
{
    gwc_poll(ctx, ms);
    /* A frame goes out in the poll after it was queued: an ack queued before the harness
     * was busy elsewhere (a node starting) counts as sent from here, not from then. */
    for (int i = 0; i < n_clients; i++)
        if (clients[i].ack_queued) {
            clients[i].ack_queued = false;
            clients[i].acked_at_ms[1] = now_ms();
        }
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
    for (uint64_t cid = 1; cid < c->next_cid; cid++) {
        if (!confirmed_mid[s][cid])
            send_cid(c, cid, sb);
        else if (ver_state[s] && ver_state[s][cid] && !(ver_state[s][cid] & VER_DONE))
            send_version(c, cid, sb); /* refused or lost with its node: the same again */
    }
    c->retry_at = 0;
}

static void hello(client *c, msgpack_sbuffer *sb)
{
    char *tok = NULL;
    gwc_token_mint(SECRET, strlen(SECRET), c->uid, (int64_t)time(NULL) + 3600, NULL, 0, false,
                   &tok);
    pr_enc_hello(sb, PR_NO_RID, sl(tok));
    send_frame(c, sb);
    free(tok);
}

/* After a new sign-in: a receiver checks its stored ack and pulls after it (enter), a
 * sender resends every cid not confirmed yet. */
static void resume(client *c, msgpack_sbuffer *sb)
{
    if (!c->sender) {
        /* The stored ack may trail the client's by at most the flush window. */
        if (c->welcome_ack > c->acked)
            die("%s: the stored ack is above what the client acked", c->uid);
        if (c->welcome_ack < c->safe_ack)
            die("%s: the stored ack went back more than the flush window", c->uid);
        /* What the store holds is what counts from here: an ack above it went to a
         * session that ended (its node killed) and is sent again, as a real client
         * would, instead of being taken for one the gateway received. */
        c->acked = c->acked_at_ms[0] = c->welcome_ack;
        c->acked_at_ms[1] = now_ms();
        c->ack_queued = false;
        pr_enc_enter(sb, PR_NO_RID, sl(gids[c->group]), 500);
        send_frame(c, sb);
    } else {
        resend_unconfirmed(c, sb);
    }
}

/* Connects and signs in every client, each to its node; the first time they join,
 * afterwards they resume. */
static void connect_all(gwc_ctx *ctx, client *cs, int n, bool first, msgpack_sbuffer *sb)
{
    for (int i = 0; i < n; i++) {
        client *c = &cs[i];
        if (c->k)
            gwc_close(c->k);
        c->k = NULL;
        c->welcomed = c->entered = false;
        if (gwc_connect(ctx, node_url(c->node), 5000, &c->k) != 0)
            die("cannot connect: %s", gwc_ctx_last_error(ctx));
        gwc_set_user(c->k, c);
        c->last_push = c->queued = 0;
        hello(c, sb);
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
        c->up = true;
        if (first) {
            pr_enc_join(sb, PR_NO_RID, sl(gids[c->group]));
            send_frame(c, sb);
        } else {
            resume(c, sb);
        }
    }
    if (first)
        for (uint64_t t = now_ms() + 2000; now_ms() < t;)
            pump(ctx, 5, sb);
}

/* The live node with the fewest clients: where a load balancer with least_conn puts a
 * new connection. -1 while none is up. */
static int least_loaded(const client *cs, int n)
{
    int load[MAX_NODES] = {0}, best = -1;
    for (int i = 0; i < n; i++)
        if (cs[i].k)
            load[cs[i].node]++;
    for (int d = 0; d < o.nodes; d++)
        if (node_up(d) && (best < 0 || load[d] < load[best]))
            best = d;
    return best;
}

/* A cluster's clients, as real ones behind a load balancer: a session that ended (its
 * node was killed, or the sign-in was refused with 4013 while the database was away) or
 * that got no welcome in 10 s is dropped, and 100 to 300 ms later the client connects to
 * the least loaded live node and signs in; once welcomed it resumes. */
static void keep_connected(gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb)
{
    uint64_t now = now_ms();
    for (int i = 0; i < n; i++) {
        client *c = &cs[i];
        if (c->k && (!gwc_is_open(c->k) || (!c->up && now - c->hello_at > 10000))) {
            gwc_close(c->k);
            c->k = NULL;
            c->up = c->welcomed = c->entered = c->pulling = false;
            c->reconnect_at = now + 100 + (uint64_t)(rand() % 200);
        }
        if (c->k && !c->up && c->welcomed) {
            c->up = true;
            resume(c, sb);
        }
        if (!c->k && now >= c->reconnect_at) {
            int d = least_loaded(cs, n);
            c->reconnect_at = now + 200; /* the next try, if this one fails */
            if (d < 0 || gwc_connect(ctx, node_url(d), 3000, &c->k) != 0) {
                c->k = NULL;
                continue;
            }
            n_reconnects++;
            c->node = d;
            c->queued = 0;
            c->last_push = 0;
            gwc_set_user(c->k, c);
            hello(c, sb);
            c->hello_at = now_ms();
        }
    }
}

static bool budget_spent; /* the senders sent all the harness can track */

/* One turn of the load: senders top up their unconfirmed sends (at most 64 each),
 * events are taken, receivers ack what they hold (after 100 ms at most), refused sends
 * are resent. */
static void one_round(gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb)
{
    uint64_t sent_all = 0; /* every cid sent makes at most one mid */
    for (int i = 0; i < o.senders; i++)
        sent_all += cs[i].next_cid - 1;
    if (sent_all >= MAX_MSGS - 1000 && !budget_spent) {
        budget_spent = true;
        printf("gw_crash: the %d messages the harness tracks are sent: the senders stop\n",
               MAX_MSGS);
    }
    for (int i = 0; i < o.senders; i++) /* at most 64 unconfirmed per sender */
        for (int j = 0; j < 4 && cs[i].up && sent_all < MAX_MSGS - 1000 &&
                        cs[i].next_cid - confirmed_count(i) < 64;
             j++, sent_all++)
            send_cid(&cs[i], cs[i].next_cid++, sb);
    pump(ctx, 2, sb);
    for (int i = o.senders; i < n; i++)
        if (cs[i].acked < cs[i].held && now_ms() - cs[i].acked_at_ms[1] > 100)
            ack(&cs[i], sb);
    for (int i = 0; i < o.senders; i++)
        if (cs[i].up && cs[i].retry_at && now_ms() >= cs[i].retry_at)
            resend_unconfirmed(&cs[i], sb);
    if (cluster)
        keep_connected(ctx, cs, n, sb);
}

static void traffic(gwc_ctx *ctx, client *cs, int n, uint64_t ms, msgpack_sbuffer *sb)
{
    for (uint64_t until = now_ms() + ms; now_ms() < until;)
        one_round(ctx, cs, n, sb);
}

/* Runs a shell command (tools/pg_server.sh, gw_slots) in the background while the load
 * goes on, until it ends (5 minutes at most); dies if it fails. Its output goes to
 * log_as in the run's folder (NULL: pg_server.log). */
static void traffic_during(const char *cmd, const char *log_as, gwc_ctx *ctx, client *cs, int n,
                           msgpack_sbuffer *sb)
{
    char log[300], why[1500];
    snprintf(log, sizeof(log), "%s/%s", dir, log_as ? log_as : "pg_server.log");
    if (!cmd_start(cmd, log))
        die("cannot run %s", cmd);
    bool ok = false;
    for (uint64_t until = now_ms() + 300000; !cmd_done(&ok);) {
        if (now_ms() > until) {
            snprintf(why, sizeof(why), "%s did not end within 5 minutes", cmd);
            die("%s", why);
        }
        one_round(ctx, cs, n, sb);
    }
    if (!ok) {
        snprintf(why, sizeof(why), "%s failed (see %s)", cmd, log);
        die("%s", why);
    }
}

/* What the store must hold at least: acks sent two flush windows and a second before a
 * kill. The second is slack for a loaded machine (the suite runs tests side by side on two
 * cores): a node that reads its frames late flushes late, and an ack flushed late is
 * re-delivery, not loss; an ack never stored is still caught at a later kill. */
#define ACK_SLACK_MS 1000
/* When the nodes took writes again after the last failover (await_writes): an ack sent
 * while the database was away can be stored from then on, not before. */
static uint64_t writes_back_ms;
static void note_safe_acks(client *cs, int n)
{
    uint64_t kill_at = now_ms();
    if (o.store) {
        /* On PostgreSQL, read the floor itself: what the database holds before the kill
         * cannot be lost by it (a synchronous standby keeps it through a failover). Time
         * alone is not enough there: with four tests side by side a node's flush lagged
         * more than 1.4 s behind its acks (CI), re-delivery and not loss. */
        for (int g = 0; g < n_groups; g++) {
            const char *uids[64]; /* --receivers is at most 64 */
            uint64_t acks[64];
            client *of[64];
            int k = 0;
            for (int i = o.senders; i < n; i++)
                if (cs[i].group == g) {
                    uids[k] = cs[i].uid;
                    acks[k] = cs[i].safe_ack;
                    of[k++] = &cs[i];
                }
            if (db_acks(o.shards ? shards_db(gids[g]) : o.store, gids[g], uids, k, acks) == 0)
                for (int i = 0; i < k; i++)
                    if (acks[i] > of[i]->safe_ack)
                        of[i]->safe_ack = acks[i];
        }
        return;
    }
    for (int i = o.senders; i < n; i++)
        if ((cs[i].acked_at_ms[1] > writes_back_ms ? cs[i].acked_at_ms[1] : writes_back_ms) +
                2 * ACK_FLUSH_MS + ACK_SLACK_MS <
            kill_at)
            cs[i].safe_ack =
                cs[i].acked_at_ms[0] > cs[i].safe_ack ? cs[i].acked_at_ms[0] : cs[i].safe_ack;
}

/* A node of the cluster killed: its clients move to the others (keep_connected) while it
 * is down, 50 to 500 ms; then it starts again, on its data folder and a new port. */
static void kill_a_node(gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb)
{
    note_safe_acks(cs, n);
    int d = rand() % o.nodes;
    node_kill(d);
    traffic(ctx, cs, n, 50 + (uint64_t)(rand() % 450), sb);
    if (!node_start(d))
        die("a node did not start again (see %s)", node_log(d));
}

/* Under the load until each sender s has had a message confirmed of a cid at or above
 * after[s] and node_ok(d) holds for every node (probed every 200 ms): true, or false once
 * bound_ms have passed. */
static bool await_confirmed(gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb,
                            const uint64_t *after, bool (*node_ok)(int), uint64_t bound_ms)
{
    for (uint64_t until = now_ms() + bound_ms, probe = 0;;) {
        one_round(ctx, cs, n, sb);
        if (budget_spent) /* nothing new will be confirmed: not the gateway's doing */
            die("the run sent every message the harness can track (%s) before its last event: "
                "fewer events, or a machine this fast needs a larger MAX_MSGS",
                "MAX_MSGS");
        if (now_ms() < probe)
            continue;
        probe = now_ms() + 200;
        bool back = true;
        for (int s = 0; s < o.senders; s++)
            back &= top_cid[s] >= after[s];
        for (int d = 0; d < o.nodes && back; d++)
            back &= node_ok(d);
        if (back)
            return true;
        if (now_ms() > until)
            return false;
    }
}

static bool node_healthy(int d)
{
    return node_healthz(d) == 200;
}

/* Under the load until writes are back after `since` (a kill, a promotion): every node
 * answers /healthz with 200 and each sender has a message confirmed that it sent after
 * this call (what was in flight before may have been committed before the kill); with
 * shard >= 0, each sender of that shard's groups (the others' never stopped). */
static void await_writes(gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb, const char *since,
                         int shard)
{
    uint64_t after[64];
    for (int s = 0; s < o.senders; s++)
        after[s] = shard < 0 || group_shard[cs[s].group] == (unsigned)shard ? cs[s].next_cid : 0;
    if (!await_confirmed(ctx, cs, n, sb, after, node_healthy, 120000))
        die("the nodes did not take writes again within 120 s of %s", since);
    writes_back_ms = now_ms();
}

/* Failovers: which folder holds the primary now, and the worst time without writes. */
static const char *pg_primary, *pg_standby;
static uint64_t worst_outage_ms;

/* The primary killed (SIGKILL), its standby promoted, under the load. Once every node
 * answers /healthz with 200 and every sender has had a message confirmed since the
 * promotion, the old primary is rejoined as the new one's synchronous standby (a new
 * base backup), still under the load, so that the next failover loses nothing either. */
static void fail_over(int no, gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb)
{
    char cmd[1300];
    uint64_t t0 = now_ms();
    snprintf(cmd, sizeof(cmd), "'%s/pg_server.sh' kill '%s' && '%s/pg_server.sh' promote '%s'",
             tools_dir, pg_primary, tools_dir, pg_standby);
    traffic_during(cmd, NULL, ctx, cs, n, sb);
    uint64_t promoted = now_ms();
    await_writes(ctx, cs, n, sb, "the promotion", -1);
    uint64_t back = now_ms();
    if (back - t0 > worst_outage_ms)
        worst_outage_ms = back - t0;
    snprintf(cmd, sizeof(cmd), "'%s/pg_server.sh' rejoin '%s' '%s' >/dev/null", tools_dir,
             pg_primary, pg_standby);
    traffic_during(cmd, NULL, ctx, cs, n, sb);
    const char *t = pg_primary;
    pg_primary = pg_standby;
    pg_standby = t;
    printf("gw_crash: failover %d: primary killed and standby promoted in %.1f s, writes "
           "back on every node %.1f s after the kill, the old primary rejoined as the "
           "standby in %.1f s\n",
           no, (double)(promoted - t0) / 1000, (double)(back - t0) / 1000,
           (double)(now_ms() - back) / 1000);
}

/* An automatic failover (Patroni): the leader killed, nothing else done; then, once
 * every node takes writes again, the old leader back as the replica, all under the load. */
static uint64_t ha_times[1000];
static int n_ha;
/* Sharded: failovers during which no other shard confirmed anything, and the longest gap
 * between two confirmations on the other shards during one. */
static int n_stalled;
static uint64_t worst_other_gap_ms;

static void ha_fail_over(int no, bool last, gwc_ctx *ctx, client *cs, int n, msgpack_sbuffer *sb)
{
    char cmd[900], ha[300];
    /* Sharded: the shards' leaders in turn (DIR/s0, DIR/s1, ...), and the window of the
     * outage watched on the others. */
    int shard = o.shards ? (no - 1) % o.shards : -1;
    if (shard >= 0)
        snprintf(ha, sizeof(ha), "%s/s%d", o.ha_dir, shard);
    else
        snprintf(ha, sizeof(ha), "%s", o.ha_dir);
    snprintf(cmd, sizeof(cmd), "'%s/pg_server.sh' ha-kill-leader '%s' >/dev/null", tools_dir, ha);
    traffic_during(cmd, NULL, ctx, cs, n, sb); /* it returns once the postmaster is gone */
    uint64_t t0 = now_ms();
    /* The kill's wall-clock time, to line up with Patroni's log and the nodes' (where the
     * time between goes: the key's lapse, the promotion, the nodes' reconnects). */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    struct tm tm;
    gmtime_r(&wall.tv_sec, &tm);
    char killed_at[32];
    snprintf(killed_at, sizeof(killed_at), "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
             wall.tv_nsec / 1000000);
    watch_start(n_groups);
    await_writes(ctx, cs, n, sb, "the leader's kill", shard);
    watch_stop();
    uint64_t back = now_ms();
    ha_times[n_ha++] = back - t0;
    if (back - t0 > worst_outage_ms)
        worst_outage_ms = back - t0;
    /* Sharded, the run's last event: nothing comes after that the replica matters for (the
     * final check reads the leader), so it is not waited for (tests stay short). */
    bool wait_replica = shard < 0 || !last;
    snprintf(cmd, sizeof(cmd), "'%s/pg_server.sh' ha-wait '%s' 120 >/dev/null", tools_dir, ha);
    if (wait_replica)
        traffic_during(cmd, NULL, ctx, cs, n, sb);
    char replica[80] = "the old leader not waited for (the run's last event)";
    if (wait_replica)
        snprintf(replica, sizeof(replica), "the old leader back as the replica %.1f s later",
                 (double)(now_ms() - back) / 1000);
    if (shard < 0) {
        printf("gw_crash: automatic failover %d: writes back on every node %.1f s after the "
               "leader's kill (%s UTC), the old leader back as the replica %.1f s later\n",
               no, (double)(back - t0) / 1000, killed_at, (double)(now_ms() - back) / 1000);
        return;
    }
    /* The other shards' groups: confirmations in the window, and the longest time without
     * one on any of them. */
    uint64_t others = 0, gap = 0;
    for (int g = 0; g < n_groups; g++)
        if (group_shard[g] != (unsigned)shard) {
            others += watch_count(g);
            gap = watch_gap_ms(g) > gap ? watch_gap_ms(g) : gap;
        }
    if (!others)
        n_stalled++;
    if (gap > worst_other_gap_ms)
        worst_other_gap_ms = gap;
    printf("gw_crash: automatic failover %d of shard %d: writes back on its groups on every "
           "node %.1f s after the leader's kill (%s UTC); meanwhile the other shards confirmed "
           "%lu messages, longest gap %.2f s; %s\n",
           no, shard, (double)(back - t0) / 1000, killed_at, (unsigned long)others,
           (double)gap / 1000, replica);
}

/* Sharded: slot moves (gw_slots move) under the load. Moves 2j+1 and 2j+2 take the first
 * group of shard j % K to the next shard and back, so that every shard always keeps a
 * group. After each, until every node serves the group again: every node's map is the
 * new version (gw_store_slot_map_version in its /metrics) and each sender of the group
 * has had a message confirmed that it sent after the move. */
static long worst_pause_ms = -1; /* as gw_slots printed it */
static uint64_t worst_move_gap_ms;
static int n_moves;

/* Node d is on the map as last read, or does not tell (a gw without the figure). */
static bool node_on_new_map(int d)
{
    long long v = node_metric(d, "gw_store_slot_map_version");
    return v < 0 || (uint64_t)v >= shards_version();
}

static void slot_move(int no, const char *self, gwc_ctx *ctx, client *cs, int n,
                      msgpack_sbuffer *sb)
{
    int g = 2 * (((no - 1) / 2) % o.shards);
    unsigned from = group_shard[g],
             to = no % 2 ? (unsigned)(g / 2 + 1) % (unsigned)o.shards : (unsigned)(g / 2);
    char cmd[1600], log[32], path[300], why[300];
    if (!shards_move_cmd(self, o.store, gids[g], to, cmd, sizeof(cmd)))
        die("%s", "--moves needs gw_slots beside gw_crash (make gw_slots)");
    snprintf(log, sizeof(log), "move-%d.log", no);
    uint64_t t0 = now_ms();
    watch_start(n_groups);
    traffic_during(cmd, log, ctx, cs, n, sb);
    uint64_t moved = now_ms();
    if (shards_reload(why, sizeof(why)) != 0)
        die("cannot read the slot map after a move: %s", why);
    if (shards_of(gids[g]) != to)
        die("the map does not give the moved group to its new shard (%s)", gids[g]);
    group_shard[g] = to;
    uint64_t after[64];
    for (int s = 0; s < o.senders; s++)
        after[s] = cs[s].group == g ? cs[s].next_cid : 0;
    if (!await_confirmed(ctx, cs, n, sb, after, node_on_new_map, 60000)) {
        /* What each node says, and where each sender of the group is. */
        for (int d = 0; d < o.nodes; d++)
            printf("gw_crash: node %d: map version %lld (the map's %llu), moved %lld, writable "
                   "%lld, shards unwritable %lld\n",
                   d + 1, node_metric(d, "gw_store_slot_map_version"),
                   (unsigned long long)shards_version(), node_metric(d, "gw_store_moved_total"),
                   node_metric(d, "gw_store_writable"),
                   node_metric(d, "gw_store_shards_unwritable"));
        for (int s = 0; s < o.senders; s++)
            if (cs[s].group == g)
                printf("gw_crash: sender %d of %s: on node %d (%s), next cid %llu, %llu "
                       "confirmed, after the move from %llu, resend at %llu (now %llu), frames "
                       "queued %llu and written %llu on its connection\n",
                       s, gids[g], cs[s].node + 1, cs[s].up ? "up" : "without a session",
                       (unsigned long long)cs[s].next_cid, (unsigned long long)n_confirmed[s],
                       (unsigned long long)after[s], (unsigned long long)cs[s].retry_at,
                       (unsigned long long)now_ms(), (unsigned long long)cs[s].queued,
                       (unsigned long long)(cs[s].k ? gwc_frames_out(cs[s].k) : 0));
        die("the nodes did not serve a moved group within 60 s (%s)", gids[g]);
    }
    watch_stop();
    int told = 0; /* nodes that told their map's version */
    for (int d = 0; d < o.nodes; d++)
        told += node_metric(d, "gw_store_slot_map_version") >= 0;
    snprintf(path, sizeof(path), "%s/%s", dir, log);
    long pause = shards_move_pause(path);
    uint64_t gap = watch_gap_ms(g);
    n_moves++;
    worst_pause_ms = pause > worst_pause_ms ? pause : worst_pause_ms;
    worst_move_gap_ms = gap > worst_move_gap_ms ? gap : worst_move_gap_ms;
    printf("gw_crash: slot move %d: group %s (slot %u) from shard %u to %u in %.1f s: write "
           "pause %ld ms as gw_slots says, longest gap between the group's confirmations "
           "%.2f s, every node serving it %.1f s after the move (%d of %d nodes on the "
           "new map)\n",
           no, gids[g], shards_slot(gids[g]), from, to, (double)(moved - t0) / 1000, pause,
           (double)gap / 1000, (double)(now_ms() - moved) / 1000, told, o.nodes);
}

/* --edits, at the quiet end: group g read back from its start by a receiver's session,
 * page by page. Each message must be the last version its sender saw confirmed (an edit
 * or a recall never confirmed may be there or not: its sender stopped asking). Returns the
 * messages that are not, and counts those checked. */
static uint64_t check_versions(int g, client *cs, int n, msgpack_sbuffer *sb, uint64_t *checked)
{
    client *c = NULL;
    for (int i = o.senders; i < n && !c; i++)
        if (cs[i].up && cs[i].group == g)
            c = &cs[i];
    if (!c)
        die("%s", "no receiver is connected for the check of versions");
    uint64_t last = 0;
    for (int s = 0; s < o.senders; s++)
        for (uint64_t cid = 1; cid < cs[s].next_cid && cs[s].group == g; cid++)
            if (confirmed_mid[s][cid] > last)
                last = confirmed_mid[s][cid];
    uint64_t *who = calloc(last + 1, sizeof(*who)); /* mid -> (sender + 1) << 40 | cid */
    if (!who)
        die("%s", "out of memory");
    for (int s = 0; s < o.senders; s++)
        for (uint64_t cid = 1; cid < cs[s].next_cid && cs[s].group == g; cid++)
            if (confirmed_mid[s][cid])
                who[confirmed_mid[s][cid]] = ((uint64_t)(s + 1) << 40) | cid;
    uint64_t wrong = 0, after = 0;
    for (bool more = true; more;) {
        pr_enc_pull(sb, VER_RID, sl(gids[g]), false, after, 500);
        send_frame(c, sb);
        pr_event ev;
        int rc = GWC_ETIMEDOUT;
        for (uint64_t t = now_ms() + 10000; now_ms() < t;) {
            rc = gwc_next(c->k, 1000, &ev);
            if (rc == 0 && ev.t == PR_EV_PAGE && ev.has_rid && ev.rid == VER_RID)
                break;
            if (rc != 0 && rc != GWC_ETIMEDOUT)
                die("the check of versions lost its session: %s", gwc_strerror(rc));
            rc = GWC_ETIMEDOUT;
        }
        if (rc != 0)
            die("%s", "no page within 10 s for the check of versions");
        more = ev.more && ev.n_items > 0;
        for (size_t i = 0; i < ev.n_items; i++) {
            pr_message m;
            if (pr_event_message(&ev, i, &m) != 0 || m.mid > last || !who[m.mid]) {
                after = m.mid > after ? m.mid : after;
                continue;
            }
            after = m.mid;
            int s = (int)(who[m.mid] >> 40) - 1;
            uint64_t cid = who[m.mid] & (VER_RID - 1);
            uint8_t st = ver_state[s][cid];
            char want[56];
            snprintf(want, sizeof(want), "s%d:%lu%s", s, (unsigned long)cid,
                     st & VER_EDIT ? ":e" : "");
            bool body_ok =
                m.body.data.n == strlen(want) && memcmp(m.body.data.p, want, m.body.data.n) == 0;
            bool ok = !(st & VER_DONE)         ? st != 0 || (m.ver == 0 && body_ok)
                      : (st & VER_RECALL) != 0 ? m.recalled && m.ver == 1
                                               : !m.recalled && m.ver == 1 && body_ok;
            (*checked)++;
            if (!ok && wrong++ < 5)
                fprintf(stderr, "gw_crash: mid %lu (%s) is version %lu%s, not the one confirmed\n",
                        (unsigned long)m.mid, want, (unsigned long)m.ver,
                        m.recalled ? " (recalled)" : "");
        }
    }
    free(who);
    return wrong;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"gw", required_argument, 0, 'g'},
        {"kills", required_argument, 0, 'k'},
        {"senders", required_argument, 0, 's'},
        {"receivers", required_argument, 0, 'r'},
        {"seed", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},
        {"store", required_argument, 0, 'u'},
        {"kill", required_argument, 0, 'K'},
        {"pg-dir", required_argument, 0, 'P'},
        {"nodes", required_argument, 0, 'n'},
        {"pg-standby-dir", required_argument, 0, 'B'},
        {"failovers", required_argument, 0, 'F'},
        {"ha-dir", required_argument, 0, 'H'},
        {"edits", no_argument, 0, 'E'},
        {"shards", required_argument, 0, 'D'},
        {"moves", required_argument, 0, 'M'},
        {0, 0, 0, 0},
    };
    o.seed = (unsigned)time(NULL);
    bool senders_set = false, receivers_set = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'g': o.gw = optarg; break;
        case 'k': o.kills = atoi(optarg); break;
        case 's': o.senders = atoi(optarg), senders_set = true; break;
        case 'r': o.receivers = atoi(optarg), receivers_set = true; break;
        case 'S': o.seed = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'u': o.store = optarg; break;
        case 'n': o.nodes = atoi(optarg); break;
        case 'K':
            if (strcmp(optarg, "db") != 0 && strcmp(optarg, "gw") != 0 &&
                strcmp(optarg, "primary") != 0) {
                fprintf(stderr, "gw_crash: --kill gw, --kill db or --kill primary\n");
                return 2;
            }
            o.kill_db = strcmp(optarg, "db") == 0;
            o.kill_primary = strcmp(optarg, "primary") == 0;
            break;
        case 'P': o.pg_dir = optarg; break;
        case 'B': o.pg_standby_dir = optarg; break;
        case 'F': o.failovers = atoi(optarg); break;
        case 'H': o.ha_dir = optarg; break;
        case 'E': o.edits = true; break;
        case 'D': o.shards = atoi(optarg); break;
        case 'M': o.moves = atoi(optarg); break;
        case 'h':
            printf("usage: gw_crash --gw PATH [--kills N] [--senders N] [--receivers N] "
                   "[--seed N]\n"
                   "                [--store URL [--nodes N] [--kill gw|db|primary "
                   "--pg-dir DIR [--pg-standby-dir DIR2]]]\n"
                   "  --store URL   the gateway's store is PostgreSQL at URL\n"
                   "  --nodes N     N gateways (a cluster) on that database; client i on "
                   "node i %% N;\n"
                   "                --kill gw kills a random node each time\n"
                   "  --kill db     restart the database (pg_ctl restart -m immediate) instead\n"
                   "                of killing the gateway; DIR is its tools/pg_server.sh folder\n"
                   "  --kill primary  kill the primary (DIR), promote its synchronous standby\n"
                   "                (DIR2), rejoin the old one as the new standby; each kill is\n"
                   "                a failover. URL: tools/pg_server.sh multi-url DIR DIR2 DB\n"
                   "  --failovers F --ha-dir DIR  F automatic failovers (Patroni: the leader\n"
                   "                killed, nothing else done) among the node kills; DIR is a\n"
                   "                tools/pg_server.sh ha-up folder, URL its ha-url\n"
                   "  --edits       senders edit every 7th message and recall every 11th;\n"
                   "                the last version of each is checked at the end\n"
                   "  --shards K    URL is a slot map of K shards (shards:PATH, etcd://...): two\n"
                   "                groups a shard, senders and receivers spread over them\n"
                   "                (default: nodes x groups of each); --failovers then fails\n"
                   "                the shards over in turn (DIR/s0, DIR/s1, ...: a\n"
                   "                pg_server.sh shards-up DIR K ha folder)\n"
                   "  --moves M     with --shards: M slot moves (gw_slots move) among the kills\n");
            return 0;
        default: return 2;
        }
    }
    if (o.kill_db && (!o.store || !o.pg_dir)) {
        fprintf(stderr, "gw_crash: --kill db needs --store URL and --pg-dir DIR\n");
        return 2;
    }
    if (o.kill_primary && (!o.store || !o.pg_dir || !o.pg_standby_dir)) {
        fprintf(stderr, "gw_crash: --kill primary needs --store URL (naming both servers), "
                        "--pg-dir DIR and --pg-standby-dir DIR2\n");
        return 2;
    }
    if (o.failovers &&
        (!o.store || !o.ha_dir || o.kill_db || o.kill_primary || o.failovers > 1000)) {
        fprintf(stderr, "gw_crash: --failovers F (at most 1000) needs --store URL and --ha-dir "
                        "DIR, with --kill gw\n");
        return 2;
    }
    if (o.nodes < 1 || o.nodes > MAX_NODES || (o.nodes > 1 && !o.store)) {
        fprintf(stderr, "gw_crash: --nodes 1-%d; more than one needs --store URL\n", MAX_NODES);
        return 2;
    }
    if (o.shards && (o.shards < 2 || o.shards > SHARDS_MAX_GROUPS / 2 || !o.store || o.kill_db ||
                     o.kill_primary)) {
        fprintf(stderr,
                "gw_crash: --shards K (2-%d) needs --store URL of a slot map, with "
                "--kill gw\n",
                SHARDS_MAX_GROUPS / 2);
        return 2;
    }
    if (o.moves < 0 || o.moves > 1000 || (o.moves && !o.shards)) {
        fprintf(stderr, "gw_crash: --moves M (at most 1000) needs --shards K\n");
        return 2;
    }
    char why[300];
    if (o.shards) {
        if (shards_open(o.store, why, sizeof(why)) != 0 || shards_count() != (unsigned)o.shards) {
            fprintf(stderr, "gw_crash: %s: not a slot map of %d shards (%s)\n", o.store, o.shards,
                    why);
            return 2;
        }
        n_groups = shards_pick(2, gids, SHARDS_MAX_GROUPS);
        if (n_groups < 0) {
            fprintf(stderr, "gw_crash: no groups found for every shard of %s\n", o.store);
            return 2;
        }
        for (int g = 0; g < n_groups; g++)
            group_shard[g] = shards_of(gids[g]);
        int each = o.nodes * n_groups > 64 ? 64 : o.nodes * n_groups;
        o.senders = senders_set ? o.senders : each;
        o.receivers = receivers_set ? o.receivers : each;
        if (o.senders < n_groups || o.receivers < n_groups) {
            fprintf(stderr,
                    "gw_crash: --shards %d: at least %d senders and receivers (one a "
                    "group)\n",
                    o.shards, n_groups);
            return 2;
        }
    }
    /* Kills may be none when other events (failovers, moves) are asked for. */
    int min_kills = o.failovers || o.moves ? 0 : 1;
    if (!o.gw || o.kills < min_kills || o.kills > 1000 || o.senders < 1 || o.senders > 64 ||
        o.receivers < 1 || o.receivers > 64) {
        fprintf(stderr, "gw_crash: --gw PATH is required; kills 1-1000 (0 with failovers or "
                        "moves), senders and "
                        "receivers 1-64 (see --help)\n");
        return 2;
    }
    cluster = o.nodes > 1 || o.kill_primary || o.failovers || o.shards;
    pg_primary = o.pg_dir;
    pg_standby = o.pg_standby_dir;
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines as they happen */
    /* tools/pg_server.sh, beside the source of this build: GW_SOURCE_DIR. */
    snprintf(tools_dir, sizeof(tools_dir), "%s/tools", GW_SOURCE_DIR);
    srand(o.seed);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/gw-crash-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir))
        die("mkdtemp: %s", strerror(errno));
    int n = o.senders + o.receivers;
    client *cs = calloc((size_t)n, sizeof(*cs));
    clients = cs;
    n_clients = n;
    for (int i = 0; i < n; i++) {
        cs[i].sender = i < o.senders;
        snprintf(cs[i].uid, sizeof(cs[i].uid), "%c%d", cs[i].sender ? 's' : 'r',
                 cs[i].sender ? i : i - o.senders);
        cs[i].next_cid = 1;
        cs[i].node = i % o.nodes;
        /* Sharded: consecutive clients on the nodes in turn share a group, so that each
         * group has a sender on each node at the start (with the default counts). */
        int k = cs[i].sender ? i : i - o.senders, of = cs[i].sender ? o.senders : o.receivers;
        cs[i].group = (k / (of >= o.nodes * n_groups ? o.nodes : 1)) % n_groups;
        if (cs[i].sender) {
            confirmed_mid[i] = calloc(MAX_MSGS, sizeof(uint64_t));
            sent_via[i] = calloc(MAX_MSGS, 1);
            ver_state[i] = calloc(MAX_MSGS, 1);
        } else {
            cs[i].seen = calloc(MAX_MSGS, 1);
        }
    }
    gwc_ctx *ctx = gwc_ctx_new(NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    nodes_init(o.gw, o.store, SECRET, dir, o.nodes);
    for (int d = 0; d < o.nodes; d++)
        if (!node_start(d))
            die("the gateway did not start (see %s)", node_log(d));
    connect_all(ctx, cs, n, true, &sb);
    uint64_t started = now_ms();
    if (cluster)
        printf("gw_crash: seed %u, %d nodes, %d senders, %d receivers, %d %s, PostgreSQL "
               "store, data in %s\n",
               o.seed, o.nodes, o.senders, o.receivers, o.kills,
               o.kill_primary ? "failovers of the primary"
               : o.kill_db    ? "database restarts"
                              : "kills of a random node",
               dir);
    else
        printf("gw_crash: seed %u, %d senders, %d receivers, %d kills of the %s, %s store, "
               "data in %s\n",
               o.seed, o.senders, o.receivers, o.kills, o.kill_db ? "database" : "gateway",
               o.store ? "PostgreSQL" : "RocksDB", dir);
    for (int g = 0; o.shards && g < n_groups; g++)
        printf("gw_crash: group %s: slot %u, shard %u\n", gids[g], shards_slot(gids[g]),
               group_shard[g]);

    /* The failovers spread evenly among the kills: event e (0-based) of kills + failovers
     * (+ moves) is a failover when it passes the next multiple; the moves spread the same
     * way among the events that are not failovers. */
    for (int e = 0, kill_no = 0, fo_no = 0, mv_no = 0; e < o.kills + o.failovers + o.moves; e++) {
        int total = o.kills + o.failovers + o.moves, rest = o.kills + o.moves, r = e - fo_no;
        if (o.failovers && (e + 1) * o.failovers / total > e * o.failovers / total) {
            traffic(ctx, cs, n, 200 + (uint64_t)(rand() % 1300), &sb);
            ha_fail_over(++fo_no, e + 1 == total, ctx, cs, n, &sb);
            continue;
        }
        if (o.moves && (r + 1) * o.moves / rest > r * o.moves / rest) {
            traffic(ctx, cs, n, 200 + (uint64_t)(rand() % 1300), &sb);
            slot_move(++mv_no, argv[0], ctx, cs, n, &sb);
            continue;
        }
        kill_no++;
        traffic(ctx, cs, n, 200 + (uint64_t)(rand() % 1300), &sb);
        if (o.kill_primary) {
            fail_over(kill_no, ctx, cs, n, &sb);
            continue;
        }
        if (o.kill_db) {
            /* The database crashes and comes back under the load; the gateway and its
             * sessions stay. Sends meanwhile are refused and sent again (with the store's
             * reconnect within a second, a restart with the load paused would see none). */
            char cmd[600];
            snprintf(cmd, sizeof(cmd), "'%s/pg_server.sh' restart-immediate '%s' >/dev/null",
                     tools_dir, o.pg_dir);
            traffic_during(cmd, NULL, ctx, cs, n, &sb);
            if (kill_no % 5 == 0)
                printf("gw_crash: %d database restarts so far\n", kill_no);
            continue;
        }
        if (o.nodes > 1) {
            kill_a_node(ctx, cs, n, &sb);
        } else {
            note_safe_acks(cs, n);
            node_kill(0);
            pump(ctx, 20, &sb);
            if (!node_start(0))
                die("the gateway did not start (see %s)", node_log(0));
            connect_all(ctx, cs, n, false, &sb);
        }
        if (kill_no % 5 == 0)
            printf("gw_crash: %d kills so far\n", kill_no);
    }
    /* Quiet end: no more sends; wait (bounded) until every send is confirmed and every
     * receiver holds up to the last confirmed mid, then judge. Slow machines and sanitizer
     * builds need the time; a real loss never catches up. */
    for (uint64_t t = now_ms() + 60000; now_ms() < t;) {
        pump(ctx, 5, &sb);
        for (int i = 0; i < o.senders; i++)
            if (cs[i].up && cs[i].retry_at && now_ms() >= cs[i].retry_at)
                resend_unconfirmed(&cs[i], &sb);
        for (int i = o.senders; i < n; i++)
            if (cs[i].entered)
                pull_after_held(&cs[i], &sb); /* at most one every two seconds */
        if (cluster)
            keep_connected(ctx, cs, n, &sb);
        uint64_t top[SHARDS_MAX_GROUPS] = {0}; /* of each group */
        bool all_confirmed = true;
        for (int s = 0; s < o.senders; s++) {
            all_confirmed &= n_confirmed[s] + 1 >= cs[s].next_cid;
            for (uint64_t cid = 1; cid < cs[s].next_cid; cid++)
                if (confirmed_mid[s][cid] > top[cs[s].group])
                    top[cs[s].group] = confirmed_mid[s][cid];
        }
        bool caught_up = all_confirmed;
        for (int i = o.senders; i < n; i++)
            caught_up &= cs[i].held >= top[cs[i].group];
        if (caught_up)
            break;
    }
    /* The last mid: the highest confirmed. */
    uint64_t confirmed = 0, last = 0, losses = 0, dups = 0, checked = 0;
    for (int g = 0; o.edits && g < n_groups; g++) /* a version lost counts as a loss */
        losses += check_versions(g, cs, n, &sb, &checked);
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
        /* Every confirmed message of its group after the receiver's join must be held. */
        for (int s = 0; s < o.senders; s++)
            for (uint64_t cid = 1; cid < cs[s].next_cid && cs[s].group == c->group; cid++) {
                uint64_t mid = confirmed_mid[s][cid];
                if (mid > c->join_mid && !c->seen[mid])
                    losses++;
            }
        /* Dense: every mid from the join up to the last it holds is held. */
        for (uint64_t mid = c->join_mid + 1; mid <= c->held; mid++)
            if (!c->seen[mid])
                losses++;
    }
    double secs = (double)(now_ms() - started) / 1000;
    bool unclean = false; /* said, and its log kept, but not judged here */
    for (int d = 0; d < o.nodes; d++) {
        int st = node_stop(d);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "gw_crash: a gateway did not stop cleanly (status %d, see %s)\n", st,
                    node_log(d));
            unclean = true;
        }
    }
    /* The store itself, read from the database: each problem it finds counts as a loss.
     * Sharded: each group from the shard the map gives it now (with only its own senders'
     * cids expected there), and none of its messages left on the other shards. */
    long stored_twice = 0;
    if (o.shards && shards_reload(why, sizeof(why)) != 0)
        die("cannot read the slot map at the end: %s", why);
    for (int g = 0; o.store && g < n_groups; g++) {
        uint64_t next_cids[64];
        for (int s = 0; s < o.senders; s++)
            next_cids[s] = cs[s].group == g ? cs[s].next_cid : 1;
        long twice = 0, problems;
        if (o.shards)
            printf("gw_crash: group %s on shard %u:\n", gids[g], shards_of(gids[g]));
        problems = db_check(o.shards ? shards_db(gids[g]) : o.store, gids[g], o.senders,
                            confirmed_mid, next_cids, &twice);
        if (problems < 0)
            die("%s", "the final check could not read the database");
        losses += (uint64_t)problems;
        stored_twice += twice;
        for (unsigned sh = 0; o.shards && sh < shards_count(); sh++) {
            long left = sh == shards_of(gids[g]) ? 0 : db_count(shards_db_of(sh), gids[g]);
            if (left)
                fprintf(stderr, "gw_crash: shard %u holds %ld messages of %s, not its own\n", sh,
                        left, gids[g]);
            losses += left < 0 ? 1 : (uint64_t)left;
        }
    }
    if (o.kill_primary)
        printf("gw_crash: at most %.1f s from a kill of the primary until every node took "
               "writes again\n",
               (double)worst_outage_ms / 1000);
    if (n_ha) {
        qsort(ha_times, (size_t)n_ha, sizeof(ha_times[0]), by_u64);
        printf("gw_crash: %d automatic failovers: from the leader's kill to writes on every "
               "node, median %.1f s, worst %.1f s\n",
               n_ha, (double)ha_times[n_ha / 2] / 1000, (double)ha_times[n_ha - 1] / 1000);
    }
    if (o.shards && n_ha)
        printf("gw_crash: during the %d shard failovers the other shards confirmed in all but "
               "%d, longest gap %.2f s\n",
               n_ha, n_stalled, (double)worst_other_gap_ms / 1000);
    if (n_moves)
        printf("gw_crash: %d slot moves: write pause at most %ld ms as gw_slots says, longest "
               "gap between a moved group's confirmations %.2f s\n",
               n_moves, worst_pause_ms, (double)worst_move_gap_ms / 1000);
    char also[300] = "";
    if (o.failovers)
        snprintf(also, sizeof(also), ", %d automatic failovers", n_ha);
    if (o.shards)
        snprintf(also + strlen(also), sizeof(also) - strlen(also),
                 ", %d shards, %d groups, %d slot moves, %d failovers that stalled other "
                 "shards, %ld stored twice",
                 o.shards, n_groups, n_moves, n_stalled, stored_twice);
    if (o.edits)
        snprintf(also + strlen(also), sizeof(also) - strlen(also),
                 ", %lu versions confirmed, %lu messages checked", (unsigned long)n_versions,
                 (unsigned long)checked);
    if (cluster)
        printf("gw_crash: confirmed %lu messages (last mid %lu), %d nodes, %d %s%s, %lu sends "
               "refused and resent, %lu re-deliveries absorbed by dedup, %lu pushes across "
               "nodes, %lu pushes out of order, %lu notifies, %lu reconnects, %.1f s, "
               "losses %lu\n",
               (unsigned long)confirmed, (unsigned long)last, o.nodes, o.kills,
               o.kill_primary ? "failovers"
               : o.kill_db    ? "database restarts"
                              : "node kills",
               also, (unsigned long)n_refused, (unsigned long)dups, (unsigned long)n_cross,
               (unsigned long)n_disorder, (unsigned long)n_notifies, (unsigned long)n_reconnects,
               secs, (unsigned long)losses);
    else
        printf("gw_crash: confirmed %lu messages (last mid %lu), %d kills%s, %lu sends refused "
               "and resent, %lu re-deliveries absorbed by dedup, losses %lu\n",
               (unsigned long)confirmed, (unsigned long)last, o.kills, also,
               (unsigned long)n_refused, (unsigned long)dups, (unsigned long)losses);
    msgpack_sbuffer_destroy(&sb);
    gwc_ctx_free(ctx);
    for (int i = 0; i < n; i++) {
        free(cs[i].sender ? (void *)confirmed_mid[i] : (void *)cs[i].seen);
        free(cs[i].sender ? sent_via[i] : NULL);
        free(cs[i].sender ? ver_state[i] : NULL);
    }
    free(cs);
    if (losses == 0 && !unclean) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "gw_crash: could not remove %s\n", dir);
    }
    shards_close();
    return losses || n_stalled ? 1 : 0;
}
