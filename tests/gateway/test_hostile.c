/*
 * Hostile and broken clients against the real gateway, each case with a well-behaved
 * bystander probed while the attack goes on (watch.h): the gateway stays up, the
 * bystander gets every message, and the gateway's memory stays bounded. The attackers use
 * raw sockets (rawws.h) from their own 127.0.0.x addresses, on a thread of their own.
 * Figures (the bystander's latency, RSS growth) go to the log for docs/RELIABILITY.md.
 */
#include "rawws.h"
#include "tclock.h"
#include "watch.h"
#include "store.h"

#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static gwfx f;
static watch w;

static void teardown(void)
{
    gwfx_cleanup(&f); /* also after a failed assertion: SIGTERM, and it must exit 0 */
}

#define S(str) ((pr_slice){(const uint8_t *)(str), strlen(str)})
#define MIB 1024L /* in KiB */
#define RSS_BOUND (64 * MIB)

/* What an attacker thread reports back; the test's thread asserts on it. */
typedef struct attack {
    int port;
    char fail[256]; /* empty: everything the attacker checked held */
    long n[8];      /* counts, per case */
    long took_ms;   /* how long the attack ran, by the test's clock */
} attack;

#define FAIL(a, ...) (snprintf((a)->fail, sizeof((a)->fail), __VA_ARGS__), (void)0)

static void start(const char *const *args)
{
    watch_prepare();
    gwfx_start(&f, args);
    watch_start(&w, &f);
}

/* Starts the gateway (args) and its bystander, then runs the attacker fn on a thread of its
 * own while the bystander is probed; fails the test with what the attacker found wrong.
 * Returns the attacker's counts. */
static attack run_attack(const char *const *args, void *(*fn)(void *))
{
    start(args);
    attack a = {.port = f.port};
    long t0 = tclock_ms();
    watch_during(&w, fn, &a);
    a.took_ms = tclock_since(t0);
    cr_assert_str_empty(a.fail, "%s", a.fail);
    return a;
}

/* ---- raw protocol helpers (thread-safe: no Criterion) ------------------------------- */

/* A token for uid, valid for an hour (malloc'd; NULL on failure). */
static char *mint(const char *uid)
{
    char *tok = NULL;
    gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), uid, (int64_t)time(NULL) + 3600, NULL, 0,
                   false, &tok);
    return tok;
}

/* Connects from src and signs in as uid; 0 or -1. */
static int raw_login(rawws *c, int port, const char *src, const char *uid)
{
    if (rawws_open(c, port, src, GWFX_WAIT) != 0)
        return -1;
    char *tok = mint(uid);
    int rc = tok ? rawws_hello(c, tok, false) : -1;
    free(tok);
    if (rc != 0)
        rawws_close(c);
    return rc;
}

static void send_timeout(rawws *c, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- floods ---------------------------------------------------------------------------- */

/* Frames that are not MessagePack, 100,000 per connection, after hello and before it, on
 * connection after connection for three seconds. */
static void *flood_bad_frames(void *p)
{
    attack *a = p;
    static uint8_t buf[1000 * 8];
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        n += rawws_frame(buf + n, sizeof(buf) - n, RAWWS_BIN, true, "\xc1", 1);
    long until = tclock_ms() + 3000;
    for (int round = 0; tclock_ms() < until; round++) {
        rawws c;
        bool signed_in = round % 2 == 0;
        if (signed_in ? raw_login(&c, a->port, "127.0.0.2", "flooder") != 0
                      : rawws_open(&c, a->port, "127.0.0.2", GWFX_WAIT) != 0) {
            /* Reconnecting this fast, it soon meets the per-address connection rate. */
            a->n[3]++;
            usleep(20 * 1000);
            continue;
        }
        send_timeout(&c, 2000);
        for (int k = 0; k < 100 && rawws_write(&c, buf, n, false) == 0; k++)
            a->n[0] += 1000;
        if (!rawws_wait_closed(&c, 15000)) {
            FAIL(a, "round %d: the flooder was never disconnected", round);
            return NULL;
        }
        a->n[1]++;
        /* The close frame can be lost to a reset when the client keeps writing after it
         * (TCP, not the gateway); count the ones that arrived. */
        a->n[2] += c.close_code == (signed_in ? 1008 : 4001);
        rawws_close(&c);
    }
    return NULL;
}

Test(hostile, flood_of_bad_frames_spends_the_error_budget, .fini = teardown, .timeout = 120)
{
    attack a = run_attack(NULL, flood_bad_frames);
    double policy = watch_stat(&f, "closes.policy"), unauth = watch_stat(&f, "closes.unauthorized");
    double refused = watch_stat(&f, "rate_limits.connections");
    cr_log_info("hostile: bad-frame flood: %ld frames written on %ld connections, each closed "
                "(%ld close frames read; gateway: %.0f closed 1008, %.0f closed 4001); %ld "
                "reconnects refused (gateway: %.0f over --rate-conns)",
                a.n[0], a.n[1], a.n[2], policy, unauth, a.n[3], refused);
    cr_assert_geq(refused, (double)a.n[3]);
    /* The gateway's own counts say why it closed each one. */
    cr_assert_eq(policy + unauth, (double)a.n[1]);
    watch_report(&w, "bad-frame flood", RSS_BOUND);
}

/* Pings as fast as the socket takes them, never reading a reply, for three seconds. */
static void *flood_pings_unread(void *p)
{
    attack *a = p;
    rawws c;
    if (raw_login(&c, a->port, "127.0.0.2", "pinger") != 0) {
        FAIL(a, "cannot sign in");
        return NULL;
    }
    static uint8_t buf[1000 * 16];
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_ping(&sb, 7);
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        n += rawws_frame(buf + n, sizeof(buf) - n, RAWWS_BIN, true, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    send_timeout(&c, 200);
    long until = tclock_ms() + 3000;
    while (tclock_ms() < until)
        if (rawws_write(&c, buf, n, false) == 0)
            a->n[0] += 1000;
    rawws_reset(&c);
    return NULL;
}

Test(hostile, ping_flood_from_a_client_that_never_reads, .fini = teardown, .timeout = 120)
{
    attack a = run_attack(NULL, flood_pings_unread);
    cr_log_info("hostile: ping flood: %ld pings written in 3 s, none read", a.n[0]);
    watch_report(&w, "ping flood, never reading", RSS_BOUND);
}

/* ---- slow and silent connections ------------------------------------------------------- */

#define SLOW 40
#define SILENT 300

/* SLOW connections trickle their upgrade request (a byte every 100 ms: it would take 20 s)
 * and SILENT ones connect and send nothing; the gateway must close every one. */
static void *slow_and_silent(void *p)
{
    attack *a = p;
    static rawws slow[SLOW], silent[SILENT];
    static const char req[] = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n";
    for (int i = 0; i < SLOW; i++)
        if (rawws_connect(&slow[i], a->port, "127.0.0.3") != 0)
            return FAIL(a, "slow connect %d failed", i), NULL;
    for (int i = 0; i < SILENT; i++)
        if (rawws_connect(&silent[i], a->port, "127.0.0.4") != 0)
            return FAIL(a, "silent connect %d failed", i), NULL;
    long t0 = tclock_ms();
    size_t pos = 0;
    int open = SLOW;
    while (open > 0 && tclock_ms() - t0 < 20000 && pos < sizeof(req) - 1) {
        open = 0;
        for (int i = 0; i < SLOW; i++) {
            if (slow[i].fd < 0)
                continue;
            if (send(slow[i].fd, req + pos, 1, MSG_NOSIGNAL) != 1) {
                rawws_close(&slow[i]);
                a->n[0]++;
                continue;
            }
            open++;
        }
        pos++;
        usleep(100 * 1000);
    }
    a->n[2] = tclock_ms() - t0;
    if (open)
        FAIL(a, "%d trickling connections still open after %ld ms", open, a->n[2]);
    for (int i = 0; i < SLOW; i++)
        rawws_close(&slow[i]);
    for (int i = 0; i < SILENT; i++) {
        if (rawws_wait_closed(&silent[i], 15000))
            a->n[1]++;
        rawws_close(&silent[i]);
    }
    a->n[3] = tclock_ms() - t0;
    return NULL;
}

Test(hostile, slowloris_and_half_open_connections_time_out, .fini = teardown, .timeout = 120)
{
    static const char *const args[] = {"--handshake-timeout", "2", NULL};
    attack a = run_attack(args, slow_and_silent);
    cr_log_info("hostile: slowloris: %ld of %d trickling upgrades closed by the gateway within "
                "%ld ms; %ld of %d silent connections closed within %ld ms "
                "(--handshake-timeout 2)",
                a.n[0], SLOW, a.n[2], a.n[1], SILENT, a.n[3]);
    cr_assert_eq(a.n[0], SLOW);
    cr_assert_eq(a.n[1], SILENT, "silent connections left open");
    cr_assert_leq(watch_fds(&f), w.fds0 + 2, "descriptors not returned: %ld, %ld at start",
                  watch_fds(&f), w.fds0);
    watch_report(&w, "slowloris and half-open", RSS_BOUND);
}

/* ---- a frame a byte at a time ----------------------------------------------------------- */

static void *one_byte_writes(void *p)
{
    attack *a = p;
    rawws c;
    pr_event ev;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (rawws_connect(&c, a->port, "127.0.0.5") != 0 ||
        rawws_handshake(&c, a->port, true, GWFX_WAIT) != 0)
        return FAIL(a, "bytewise upgrade failed"), NULL;
    char *tok = mint("trickler");
    int hello = rawws_hello(&c, tok, true);
    free(tok);
    if (hello != 0)
        return FAIL(a, "bytewise hello: no welcome"), NULL;
    pr_enc_join(&sb, 2, S("calm"));
    if (rawws_request(&c, &sb, true) || rawws_expect(&c, PR_EV_JOINED, &ev) || ev.rid != 2)
        return FAIL(a, "bytewise join: no joined"), NULL;
    /* A send of 300 bytes: the 16-bit length form, split too. */
    char body[301];
    memset(body, 'b', 300);
    body[300] = 0;
    sb.size = 0;
    pr_enc_send(&sb, 3, S("calm"), S("split-1"), (pr_body){S(body), false});
    if (rawws_request(&c, &sb, true) || rawws_expect(&c, PR_EV_SENT, &ev) || ev.rid != 3)
        return FAIL(a, "bytewise send: no sent"), NULL;
    a->n[0] = (long)ev.mid;
    /* One message in three fragments with a WebSocket ping between two of them, all of it
     * one byte per write. */
    sb.size = 0;
    pr_enc_send(&sb, 4, S("calm"), S("split-2"), (pr_body){S("fragments"), false});
    uint8_t out[512];
    size_t n = 0, third = sb.size / 3;
    n += rawws_frame(out + n, sizeof(out) - n, RAWWS_BIN, false, sb.data, third);
    n += rawws_frame(out + n, sizeof(out) - n, RAWWS_PING, true, "hi", 2);
    n += rawws_frame(out + n, sizeof(out) - n, RAWWS_CONT, false, sb.data + third, third);
    n += rawws_frame(out + n, sizeof(out) - n, RAWWS_CONT, true, sb.data + 2 * third,
                     sb.size - 2 * third);
    if (rawws_write(&c, out, n, true) || rawws_expect(&c, PR_EV_SENT, &ev) || ev.rid != 4)
        return FAIL(a, "fragmented send: no sent"), NULL;
    a->n[1] = (long)ev.mid;
    /* A 100 KiB frame (64-bit length form): its header a byte at a time, then the rest in
     * uneven pieces. A ping with a large unknown key is valid: unknown keys are ignored. */
    sb.size = 0;
    rawws_padded_ping(&sb, 5, 100 * 1024);
    static uint8_t big[110 * 1024];
    n = rawws_frame(big, sizeof(big), RAWWS_BIN, true, sb.data, sb.size);
    size_t off = rawws_write(&c, big, 14, true) == 0 ? 14 : n;
    for (size_t step = 1; off < n; step = step * 3 + 7) {
        size_t k = step < n - off ? step : n - off;
        if (rawws_write(&c, big + off, k, false) != 0)
            break;
        off += k;
    }
    if (off != n || rawws_expect(&c, PR_EV_PONG, &ev) || ev.rid != 5)
        return FAIL(a, "large split frame: no pong"), NULL;
    msgpack_sbuffer_destroy(&sb);
    rawws_close(&c);
    return NULL;
}

Test(hostile, frames_written_one_byte_at_a_time, .fini = teardown, .timeout = 120)
{
    attack a = run_attack(NULL, one_byte_writes);
    cr_assert_gt(a.n[0], 0);
    cr_assert_gt(a.n[1], a.n[0]);
    watch_report(&w, "frames split into 1-byte writes", RSS_BOUND);
}

/* ---- a member that never reads ----------------------------------------------------------- */

static void *never_reads(void *p)
{
    attack *a = p;
    rawws c;
    if (raw_login(&c, a->port, "127.0.0.6", "deaf") != 0 || rawws_join(&c, "calm") != 0)
        return FAIL(a, "cannot sign in and join"), NULL;
    __atomic_store_n(&a->n[0], 1, __ATOMIC_RELEASE); /* joined: the blaster may start */
    while (__atomic_load_n(&a->n[1], __ATOMIC_ACQUIRE) == 0)
        usleep(10 * 1000);
    /* Now read: the gateway closed it (slow consumer), or it sees a notify. */
    a->n[2] = rawws_wait_closed(&c, 20000);
    rawws_close(&c);
    return NULL;
}

Test(hostile, a_member_that_never_reads_is_cut_off, .fini = teardown, .timeout = 180)
{
    static const char *const args[] = {
        "--slow-close", "2", "--queue-cap", "64", "--rate-bytes", "0", "--rate-sends", "0", NULL};
    start(args);
    attack a = {.port = f.port};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, never_reads, &a), 0);
    while (!__atomic_load_n(&a.n[0], __ATOMIC_ACQUIRE) && !a.fail[0])
        usleep(10 * 1000);
    /* Messages of 16 KiB to the group until the gateway has cut the deaf member off (its
     * kernel buffers fill first: several MiB on loopback), at most 6,000 (94 MiB). The
     * bystander probes between, and its receiving side drains the bodies as it goes. */
    gwc_conn *blaster = gwfx_login(&f, "blaster", NULL);
    gwfx_join(blaster, "calm");
    static char body[16384];
    memset(body, 'x', sizeof(body));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int sent = 0, confirmed = 0, drained = 0;
    bool cut = false;
    pr_event ev;
    while (!cut && confirmed < 6000) {
        while (sent < 6000 && sent - confirmed < 32) {
            char cid[16];
            snprintf(cid, sizeof(cid), "b%d", ++sent);
            sb.size = 0;
            pr_enc_send(&sb, PR_NO_RID, S("calm"), S(cid),
                        (pr_body){{(const uint8_t *)body, sizeof(body)}, true});
            gwfx_send(blaster, &sb);
        }
        int rc;
        while ((rc = gwc_next(blaster, 20, &ev)) == 0)
            if (ev.t == PR_EV_SENT && ++confirmed % 100 == 0) {
                watch_probe(&w);
                cut = watch_stat(&f, "closes.slow_consumer") >= 1;
            }
        cr_assert_eq(rc, GWC_ETIMEDOUT, "blaster: %s", gwc_strerror(rc));
        while (gwc_next(w.rx, 0, &ev) == 0)
            drained++;
    }
    msgpack_sbuffer_destroy(&sb);
    __atomic_store_n(&a.n[1], 1, __ATOMIC_RELEASE);
    watch_probe(&w);
    pthread_join(t, NULL);
    cr_assert_str_empty(a.fail, "%s", a.fail);
    cr_log_info("hostile: never reads: cut off after %d messages of 16 KiB (%.0f switches to "
                "notify); the bystander drained %d bodies live",
                confirmed, watch_stat(&f, "slow_consumers.switches"), drained);
    cr_assert(cut, "the deaf member was not cut off after %d messages", confirmed);
    cr_assert(a.n[2], "the deaf member's connection was never closed");
    /* The store keeps what was sent meanwhile in memory too (RocksDB's memtable holds up
     * to 64 MiB): 16 KiB a message. A deaf member whose queue grew without bound would
     * hold as much again. */
    watch_report(&w, "member that never reads", 32 * MIB + (long)confirmed * 16);
}

/* ---- sessions that connect and vanish --------------------------------------------------- */

#define VANISH 2000
#define AT_ONCE 50

static void *connect_and_vanish(void *p)
{
    attack *a = p;
    static rawws live[AT_ONCE];
    static const char *const srcs[] = {"127.0.0.7", "127.0.0.8", "127.0.0.9", "127.0.0.10"};
    uint8_t half[16]; /* a frame's header and the start of its payload: cut short below */
    size_t hn = rawws_frame(half, sizeof(half), RAWWS_BIN, true, "\x81\xa1t", 3);
    if (hn < 8)
        return FAIL(a, "the half frame does not fit"), NULL;
    for (int i = 0; i < VANISH; i++) {
        rawws *c = &live[i % AT_ONCE];
        if (i >= AT_ONCE) {
            /* Vanish three ways: a reset, a plain close, a close mid-frame. */
            if (i % 3 == 0)
                rawws_reset(c);
            else if (i % 3 == 1)
                rawws_close(c);
            else {
                rawws_write(c, half, hn - 2, false);
                rawws_close(c);
            }
        }
        char uid[16];
        snprintf(uid, sizeof(uid), "ghost%d", i % 20);
        if (i % 2 == 0) {
            if (raw_login(c, a->port, srcs[i % 4], uid) != 0)
                return FAIL(a, "session %d could not sign in", i), NULL;
        } else if (rawws_open(c, a->port, srcs[i % 4], GWFX_WAIT) != 0) {
            return FAIL(a, "connection %d refused", i), NULL;
        }
        a->n[0]++;
    }
    for (int i = 0; i < AT_ONCE; i++)
        rawws_reset(&live[i]);
    return NULL;
}

Test(hostile, thousands_of_sessions_connect_and_vanish, .fini = teardown, .timeout = 180)
{
    attack a = run_attack(NULL, connect_and_vanish);
    /* Every vanished session is gone: only the bystander's two remain. */
    cr_assert(watch_sessions_at_most(&f, 2, 20000), "sessions left behind: %.0f",
              watch_stat(&f, "connections.now"));
    long fds = watch_fds(&f), rss = gwfx_rss_kib(&f);
    cr_log_info("hostile: vanish: %ld sessions in %ld ms; fds %ld -> %ld, RSS %ld -> %ld KiB",
                a.n[0], a.took_ms, w.fds0, fds, w.rss0_kib, rss);
    cr_assert_leq(fds, w.fds0 + 2, "descriptors leaked: %ld, %ld at start", fds, w.fds0);
    cr_assert_lt(rss - w.rss0_kib, 32 * MIB, "RSS did not come back: %ld -> %ld KiB", w.rss0_kib,
                 rss);
    watch_report(&w, "2,000 sessions connect and vanish", RSS_BOUND);
}

/* ---- a million acks with wild mids ------------------------------------------------------ */

#define ACK_GROUPS 32
#define ACK_FRAMES 31250 /* x 32 entries = 1,000,000 acks */

static uint64_t last_of(int g)
{
    return (uint64_t)(g % 4) + 1;
}

static void *wild_acks(void *p)
{
    attack *a = p;
    rawws c;
    pr_event ev;
    if (raw_login(&c, a->port, "127.0.0.11", "acker") != 0)
        return FAIL(a, "cannot sign in"), NULL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    char gids[ACK_GROUPS][8];
    for (int g = 0; g < ACK_GROUPS; g++) {
        snprintf(gids[g], sizeof(gids[g]), "w%d", g);
        if (rawws_join(&c, gids[g]) != 0)
            return FAIL(a, "join %s failed", gids[g]), NULL;
        for (uint64_t m = 1; m <= last_of(g); m++) {
            char cid[24];
            snprintf(cid, sizeof(cid), "w%d-%lu", g, (unsigned long)m);
            sb.size = 0;
            pr_enc_send(&sb, m, S(gids[g]), S(cid), (pr_body){S("x"), false});
            if (rawws_request(&c, &sb, false) || rawws_expect(&c, PR_EV_SENT, &ev) || ev.mid != m)
                return FAIL(a, "send to %s failed", gids[g]), NULL;
        }
    }
    /* Mids far past the last, 0, 1, the last, UINT64_MAX, 2^63, random 64-bit values. */
    uint64_t rnd = 0x9e3779b97f4a7c15ull;
    size_t cap = 1250 * 600, n = 0;
    uint8_t *buf = malloc(cap);
    for (int fr = 0; fr < ACK_FRAMES; fr++) {
        pr_ack acks[ACK_GROUPS];
        for (int g = 0; g < ACK_GROUPS; g++) {
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            static const uint64_t wild[] = {
                0, 1, 2, 3, 4, 5, 1000000, UINT64_MAX, UINT64_MAX - 1, 1ull << 63};
            uint64_t mid = (fr + g) % 3 ? wild[(fr + g) % 10] : rnd;
            acks[g] = (pr_ack){S(gids[g]), mid};
        }
        sb.size = 0;
        pr_enc_ack(&sb, acks, ACK_GROUPS);
        n += rawws_frame(buf + n, cap - n, RAWWS_BIN, true, sb.data, sb.size);
        if ((fr + 1) % 1250 == 0) {
            if (rawws_write(&c, buf, n, false) != 0)
                return FAIL(a, "the gateway stopped taking acks after %d frames", fr), NULL;
            a->n[0] += 1250L * ACK_GROUPS;
            n = 0;
        }
    }
    free(buf);
    /* Every ack is capped at its group's last mid. */
    sb.size = 0;
    pr_enc_groups_req(&sb, 77);
    if (rawws_request(&c, &sb, false) || rawws_expect(&c, PR_EV_GROUPS, &ev) ||
        ev.n_items != ACK_GROUPS)
        return FAIL(a, "no groups reply after the acks"), NULL;
    for (size_t i = 0; i < ev.n_items; i++) {
        pr_group g;
        pr_event_group(&ev, i, &g);
        int k = atoi((const char *)g.gid.p + 1);
        if (g.ack != last_of(k) || g.last_mid != last_of(k) || g.unread != 0)
            return FAIL(a, "group %.*s: ack %lu, last_mid %lu", (int)g.gid.n, g.gid.p,
                        (unsigned long)g.ack, (unsigned long)g.last_mid),
                   NULL;
        a->n[1]++;
    }
    msgpack_sbuffer_destroy(&sb);
    rawws_close(&c);
    return NULL;
}

Test(hostile, a_million_acks_with_wild_mids, .fini = teardown, .timeout = 180)
{
    static const char *const args[] = {"--rate-bytes", "0", NULL};
    attack a = run_attack(args, wild_acks);
    cr_assert_eq(a.n[0], (long)ACK_FRAMES * ACK_GROUPS);
    cr_assert_eq(a.n[1], ACK_GROUPS);
    cr_assert_geq(watch_stat(&f, "acks.received"), (double)ACK_FRAMES * ACK_GROUPS);
    cr_log_info("hostile: acks: %ld acks in %d frames, set-up included %ld ms", a.n[0], ACK_FRAMES,
                a.took_ms);
    /* The ack did not run ahead of the group: new messages count as unread. */
    gwc_conn *poster = gwfx_login(&f, "poster", NULL);
    gwfx_join(poster, "w0");
    for (int i = 0; i < 3; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "n%d", i);
        gwfx_send_msg(poster, "w0", cid, "new");
    }
    pr_event wel;
    gwfx_login(&f, "acker", &wel);
    for (size_t i = 0; i < wel.n_items; i++) {
        pr_group g;
        cr_assert_eq(pr_event_group(&wel, i, &g), 0);
        if (gwfx_slice_is(g.gid, "w0"))
            cr_assert_eq(g.unread, 3, "unread %lu after 3 new messages", (unsigned long)g.unread);
    }
    watch_report(&w, "a million acks with wild mids", RSS_BOUND);
    /* And so it is stored: never past the last mid. */
    gwfx_stop(&f, SIGTERM);
    st_store *st = gwfx_open_store(&f);
    for (int g = 0; g < ACK_GROUPS; g++) {
        char gid[8];
        snprintf(gid, sizeof(gid), "w%d", g);
        uint64_t ack = 0, last = 0;
        cr_assert_eq(st_read_ack(st, st_id_str(gid), st_id_str("acker"), &ack), 0);
        cr_assert_eq(st_read_last_mid(st, st_id_str(gid), &last), 0);
        cr_assert_eq(ack, last_of(g), "%s: stored ack %lu, last mid %lu", gid, (unsigned long)ack,
                     (unsigned long)last);
    }
    st_close(st);
}

/* ---- joins to 10,000 groups ---------------------------------------------------------------- */

#define JOINS 10000

static void *many_joins(void *p)
{
    attack *a = p;
    rawws c;
    pr_event ev;
    if (raw_login(&c, a->port, "127.0.0.12", "joiner") != 0)
        return FAIL(a, "cannot sign in"), NULL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    size_t cap = (size_t)JOINS * 40, n = 0;
    uint8_t *buf = malloc(cap);
    for (int i = 0; i < JOINS; i++) {
        char gid[16];
        snprintf(gid, sizeof(gid), "j%05d", i);
        sb.size = 0;
        pr_enc_join(&sb, (uint64_t)i + 1, S(gid));
        n += rawws_frame(buf + n, cap - n, RAWWS_BIN, true, sb.data, sb.size);
    }
    msgpack_sbuffer_destroy(&sb);
    send_timeout(&c, 20000);
    rawws_write(&c, buf, n, false); /* may stop early: the gateway closes on the budget */
    free(buf);
    int rc;
    while ((rc = rawws_next(&c, 20000, &ev)) == 0) {
        if (ev.t == PR_EV_JOINED) {
            a->n[0]++;
        } else if (ev.t == PR_EV_ERR && ev.err_code == PR_E_TOO_LARGE) {
            if (!a->n[1]++ && !memmem(ev.err_msg.p, ev.err_msg.n, "too many groups", 15))
                FAIL(a, "unclear refusal: %.*s", (int)ev.err_msg.n, ev.err_msg.p);
        } else {
            a->n[2]++;
        }
        if (a->n[0] + a->n[1] + a->n[2] == JOINS)
            break;
    }
    a->n[3] = c.close_code;
    rawws_close(&c);
    return NULL;
}

Test(hostile, joins_to_ten_thousand_groups, .fini = teardown, .timeout = 180)
{
    attack a = run_attack(NULL, many_joins); /* --max-groups 1000, the default */
    cr_log_info("hostile: joins: %ld joined, %ld refused too_large, %ld other, then close %ld",
                a.n[0], a.n[1], a.n[2], a.n[3]);
    cr_assert_eq(a.n[2], 0, "errors other than too_large");
    cr_assert_gt(a.n[1], 0, "no join was refused");
    /* Pipelined joins must not slip past the limit while earlier ones are in flight. */
    cr_assert_leq(a.n[0], 1000, "%ld joins accepted with --max-groups 1000", a.n[0]);
    /* Joins still in flight at the close completed: exactly the limit is stored. */
    pr_event wel;
    gwfx_login(&f, "joiner", &wel);
    cr_assert_eq(wel.n_items, 1000);
    watch_report(&w, "joins to 10,000 groups", RSS_BOUND);
}

/* ---- every byte that is not allowed in an id ------------------------------------------ */

static bool id_char(int b)
{
    return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '_' ||
           b == '.' || b == ':' || b == '-';
}

static void b64url(const uint8_t *in, size_t n, char *out)
{
    int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    while (len > 0 && out[len - 1] == '=')
        len--;
    out[len] = 0;
    for (char *q = out; *q; q++)
        *q = *q == '+' ? '-' : *q == '/' ? '_' : *q;
}

/* A JWT made by hand around the payload's raw bytes (which libjwt would not produce),
 * signed with secret; alg "HS256" or "HS512". Returns a malloc'd string. */
static char *hand_token(const char *alg, const void *payload, size_t n, const char *secret)
{
    char head[64], *out = malloc(4 * n / 3 + 300);
    char hj[64];
    snprintf(hj, sizeof(hj), "{\"alg\":\"%s\",\"typ\":\"JWT\"}", alg);
    b64url((const uint8_t *)hj, strlen(hj), head);
    char *pay = malloc(4 * n / 3 + 8);
    b64url(payload, n, pay);
    int k = sprintf(out, "%s.%s", head, pay);
    free(pay);
    uint8_t mac[64];
    unsigned mac_n = 0;
    HMAC(strcmp(alg, "HS512") == 0 ? EVP_sha512() : EVP_sha256(), secret, (int)strlen(secret),
         (const uint8_t *)out, (size_t)k, mac, &mac_n);
    out[k++] = '.';
    b64url(mac, mac_n, out + k);
    return out;
}

/* {"sub":<sub bytes as given, escaped the way JSON must>,"exp":now+3600}. */
static char *token_with_sub(const uint8_t *sub, size_t n)
{
    char pay[512];
    size_t k = (size_t)sprintf(pay, "{\"sub\":\"");
    for (size_t i = 0; i < n; i++) {
        if (sub[i] < 0x20)
            k += (size_t)sprintf(pay + k, "\\u%04x", sub[i]);
        else if (sub[i] == '"' || sub[i] == '\\')
            k += (size_t)sprintf(pay + k, "\\%c", sub[i]);
        else
            pay[k++] = (char)sub[i];
    }
    k += (size_t)sprintf(pay + k, "\",\"exp\":%ld}", (long)time(NULL) + 3600);
    return hand_token("HS256", pay, k, GWFX_SECRET);
}

/* Says hello with tok on a new connection: the close code (0 if it was welcomed). */
static int hello_close_code(int port, const char *src, const char *tok, char *reason,
                            size_t reason_n)
{
    rawws c;
    if (rawws_open(&c, port, src, GWFX_WAIT) != 0)
        return -1;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, S(tok));
    int rc = rawws_request(&c, &sb, false);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev;
    while (rc == 0 && (rc = rawws_next(&c, GWFX_WAIT, &ev)) == 0)
        if (ev.t == PR_EV_WELCOME)
            break;
    int code = rc == 0 ? 0 : c.close_code;
    if (reason)
        snprintf(reason, reason_n, "%s", c.close_reason);
    rawws_close(&c);
    return code;
}

static void *bad_ids(void *p)
{
    attack *a = p;
    rawws c;
    pr_event ev;
    if (raw_login(&c, a->port, "127.0.0.13", "idtester") != 0 || rawws_join(&c, "ok") != 0)
        return FAIL(a, "cannot sign in and join"), NULL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint8_t long_id[65];
    memset(long_id, 'a', sizeof(long_id));
    for (int b = -2; b < 256; b++) {
        if (b >= 0 && id_char(b))
            continue;
        /* The byte inside an id; then the empty id and one of 65 bytes. */
        uint8_t idb[3] = {'g', (uint8_t)b, 'x'};
        pr_slice id = b >= 0    ? (pr_slice){idb, 3}
                      : b == -1 ? (pr_slice){idb, 0}
                                : (pr_slice){long_id, 65};
        pr_slice cid = b >= 0 ? (pr_slice){idb + 1, 2} : id;
        static const char *const field[] = {"gid", "cid", "acks", "gid"};
        sb.size = 0;
        pr_enc_join(&sb, 1, id);
        rawws_request(&c, &sb, false);
        sb.size = 0;
        pr_enc_send(&sb, 2, S("ok"), cid, (pr_body){S("x"), false});
        rawws_request(&c, &sb, false);
        sb.size = 0;
        pr_ack ack = {id, 1};
        pr_enc_ack(&sb, &ack, 1);
        rawws_request(&c, &sb, false);
        sb.size = 0;
        pr_enc_pull(&sb, 4, id, false, 0, 10);
        rawws_request(&c, &sb, false);
        for (int k = 0; k < 4; k++) {
            if (rawws_next(&c, GWFX_WAIT, &ev) != 0)
                return FAIL(a, "byte %d: no answer to request %d (closed %d)", b, k, c.close_code),
                       NULL;
            if (ev.t != PR_EV_ERR || ev.err_code != PR_E_BAD_FIELD)
                return FAIL(a, "byte %d, request %d: event %d, not bad_field", b, k, ev.t), NULL;
            if (!memmem(ev.err_msg.p, ev.err_msg.n, field[k], strlen(field[k])))
                return FAIL(a, "byte %d: the error does not name %s: %.*s", b, field[k],
                            (int)ev.err_msg.n, ev.err_msg.p),
                       NULL;
            if (id.n && memmem(ev.err_msg.p, ev.err_msg.n, id.p, id.n))
                return FAIL(a, "byte %d: the error echoes the id", b), NULL;
        }
        a->n[0]++;
    }
    msgpack_sbuffer_destroy(&sb);
    rawws_close(&c);
    /* The same bytes in a token's user id: refused at hello, with a reason. */
    for (int b = 0; b < 256; b++) {
        if (id_char(b))
            continue;
        uint8_t sub[3] = {'u', (uint8_t)b, 'v'};
        char *tok = token_with_sub(sub, 3), reason[128];
        int code = hello_close_code(a->port, "127.0.0.14", tok, reason, sizeof(reason));
        free(tok);
        if (code != 4001 || strncmp(reason, "unauthorized: ", 14) != 0)
            return FAIL(a, "sub with byte %d: close %d (%s)", b, code, reason), NULL;
        a->n[1]++;
    }
    return NULL;
}

Test(hostile, ids_with_every_invalid_byte, .fini = teardown, .timeout = 120)
{
    /* Each bad request costs the error budget; here they are the point. */
    static const char *const args[] = {"--error-budget", "100000", NULL};
    attack a = run_attack(args, bad_ids);
    cr_log_info("hostile: ids: %ld bad ids x 4 requests refused with bad_field, %ld tokens "
                "with a bad user id refused with 4001",
                a.n[0], a.n[1]);
    cr_assert_eq(a.n[0], 256 - 66 + 2);
    cr_assert_eq(a.n[1], 256 - 66);
    watch_report(&w, "ids with every invalid byte", RSS_BOUND);
}

/* ---- tokens: another user's, replayed, expired ------------------------------------------ */

static void *bad_tokens(void *p)
{
    attack *a = p;
    char *tok = NULL, reason[128];
    pr_event ev;
    int code;
    const char *src = "127.0.0.15";
#define REFUSED(tok, what)                                                                         \
    do {                                                                                           \
        code = hello_close_code(a->port, src, tok, reason, sizeof(reason));                        \
        if (code != 4001)                                                                          \
            return FAIL(a, "%s: close %d (%s), not 4001", what, code, reason), NULL;               \
        a->n[0]++;                                                                                 \
    } while (0)
    /* The bystander's user id, signed with another secret. */
    gwc_token_mint("not-the-secret-0123456789", 25, "by-rx", time(NULL) + 60, NULL, 0, false, &tok);
    REFUSED(tok, "forged token for another user");
    free(tok);
    /* A user id with a NUL in it: must not pass for the user before the NUL. */
    tok = token_with_sub((const uint8_t *)"by-rx\0evil", 10);
    REFUSED(tok, "sub with a NUL");
    free(tok);
    char pay[256];
    int k = snprintf(pay, sizeof(pay), "{\"sub\":\"eve\"}");
    tok = hand_token("HS256", pay, (size_t)k, GWFX_SECRET);
    REFUSED(tok, "no exp");
    free(tok);
    k = snprintf(pay, sizeof(pay), "{\"sub\":\"eve\",\"exp\":\"%ld\"}", (long)time(NULL) + 60);
    tok = hand_token("HS256", pay, (size_t)k, GWFX_SECRET);
    REFUSED(tok, "exp as a string");
    free(tok);
    k = snprintf(pay, sizeof(pay), "{\"sub\":\"eve\",\"exp\":%ld}", (long)time(NULL) + 60);
    tok = hand_token("HS512", pay, (size_t)k, GWFX_SECRET);
    REFUSED(tok, "HS512");
    free(tok);
    k = snprintf(pay, sizeof(pay), "{\"sub\":\"eve\",\"exp\":%ld,\"groups\":[\"calm\\u0000x\"]}",
                 (long)time(NULL) + 60);
    tok = hand_token("HS256", pay, (size_t)k, GWFX_SECRET);
    REFUSED(tok, "groups claim with a NUL");
    free(tok);
    char *huge = malloc(9001);
    memset(huge, 'a', 9000);
    huge[9000] = 0;
    REFUSED(huge, "9,000-byte token");
    free(huge);

    /* A signed-in session cannot become someone else with a second hello. */
    rawws c, r[3];
    if (raw_login(&c, a->port, src, "mallory") != 0)
        return FAIL(a, "mallory cannot sign in"), NULL;
    gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), "by-rx", time(NULL) + 60, NULL, 0, false,
                   &tok);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 2, S(tok));
    rawws_request(&c, &sb, false);
    if (rawws_next(&c, GWFX_WAIT, &ev) || ev.t != PR_EV_ERR || ev.err_code != PR_E_BAD_TYPE)
        return FAIL(a, "a second hello was not refused"), NULL;
    sb.size = 0;
    pr_enc_groups_req(&sb, 3);
    rawws_request(&c, &sb, false);
    if (rawws_expect(&c, PR_EV_GROUPS, &ev) || ev.n_items != 0)
        return FAIL(a, "after a second hello the session sees another user's groups"), NULL;
    rawws_close(&c);
    a->n[1]++;

    /* Replayed: a token is a bearer token until it expires; three sessions at once. */
    for (int i = 0; i < 3; i++) {
        if (rawws_open(&r[i], a->port, src, GWFX_WAIT) != 0)
            return FAIL(a, "replay %d: cannot connect", i), NULL;
        sb.size = 0;
        pr_enc_hello(&sb, 1, S(tok));
        rawws_request(&r[i], &sb, false);
        if (rawws_expect(&r[i], PR_EV_WELCOME, &ev))
            return FAIL(a, "replay %d: no welcome", i), NULL;
        a->n[2]++;
    }
    for (int i = 0; i < 3; i++)
        rawws_close(&r[i]);
    free(tok);

    /* Replayed after its expiry: refused; a session opened before goes on. */
    int64_t exp = (int64_t)time(NULL) + 2;
    gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), "shortlived", exp, NULL, 0, false, &tok);
    if (rawws_open(&c, a->port, src, GWFX_WAIT) != 0)
        return FAIL(a, "cannot connect"), NULL;
    sb.size = 0;
    pr_enc_hello(&sb, 1, S(tok));
    rawws_request(&c, &sb, false);
    if (rawws_expect(&c, PR_EV_WELCOME, &ev))
        return FAIL(a, "short-lived token refused before its expiry"), NULL;
    while (time(NULL) <= exp)
        usleep(100 * 1000);
    code = hello_close_code(a->port, src, tok, reason, sizeof(reason));
    if (code != 4001 || !strstr(reason, "expired"))
        return FAIL(a, "expired token: close %d (%s)", code, reason), NULL;
    sb.size = 0;
    pr_enc_ping(&sb, 9);
    rawws_request(&c, &sb, false);
    if (rawws_expect(&c, PR_EV_PONG, &ev))
        return FAIL(a, "the session opened before the expiry was dropped"), NULL;
    a->n[3]++;
    free(tok);
    msgpack_sbuffer_destroy(&sb);
    rawws_close(&c);
    return NULL;
#undef REFUSED
}

Test(hostile, tokens_forged_replayed_and_expired, .fini = teardown, .timeout = 120)
{
    attack a = run_attack(NULL, bad_tokens);
    cr_log_info("hostile: tokens: %ld refused with 4001, second hello refused, %ld replays "
                "welcomed, expired replay refused",
                a.n[0], a.n[2]);
    cr_assert_eq(a.n[0], 7);
    cr_assert_eq(a.n[1], 1);
    cr_assert_eq(a.n[3], 1);
    watch_report(&w, "forged, replayed and expired tokens", RSS_BOUND);
}
