/*
 * Disk trouble: the store's disk fills up while the gateway runs. Sends and joins get
 * `unavailable` (never `sent`), /healthz turns 503 with the reason, /metrics shows it,
 * reads go on; when space returns the gateway recovers by itself, and in the end every
 * message that got `sent` is stored exactly once with dense mids.
 *
 * "Full" without mount privileges: the gateway's RLIMIT_FSIZE is set to 0 (prlimit), so
 * every write to any of its files fails with EFBIG (the gateway ignores SIGXFSZ), the
 * way a full disk fails them with ENOSPC; lifting the limit is "space returns".
 */
#include "gwfx.h"
#include "pgfx.h"
#include "store.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define RECOVERY_WAIT_MS 30000 /* the store retries 1, 2, 4, then every 5 s */
#define N_BEFORE 5             /* messages sent before the disk fills up */
/* Each message's body: its cid, then dots up to this size. Larger than a page, so that
 * on a real full filesystem a message's WAL record needs a new block (the slack of the
 * WAL's last block takes small writes even then). */
#define BODY_N 8192

static gwfx f;

static void setup(void)
{
    if (!pgfx_on()) /* RocksDB's disk: nothing to start on PostgreSQL (the tests skip) */
        gwfx_start(&f, NULL);
}

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(disk, .init = setup, .fini = teardown, .timeout = 120);

/* Sets the gateway's file size limit (soft limit only: lifting it needs no privilege). */
static void gateway_file_limit(rlim_t bytes)
{
    struct rlimit r;
    cr_assert_eq(prlimit(f.pid, RLIMIT_FSIZE, NULL, &r), 0, "prlimit: %m");
    r.rlim_cur = bytes == RLIM_INFINITY ? r.rlim_max : bytes;
    cr_assert_eq(prlimit(f.pid, RLIMIT_FSIZE, &r, NULL), 0, "prlimit: %m");
}

/* A sample of /metrics ("name" or "name{label=\"v\"}"); -1 if it is not there. */
static double metric(const char *name)
{
    char *body = gwfx_metrics(&f);
    char key[200];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *at = strstr(body, key);
    double v = at ? strtod(at + strlen(key), NULL) : -1;
    free(body);
    return v;
}

static int health(char **body)
{
    int status;
    char *b = gwfx_http(&f, "/healthz", NULL, &status);
    if (body)
        *body = b;
    else
        free(b);
    return status;
}

/* The body of the message with cid "m<i>" (NUL-terminated, BODY_N long). */
static const char *body_of(const char *cid)
{
    static char b[BODY_N + 1];
    memset(b, '.', BODY_N);
    b[BODY_N] = 0;
    memcpy(b, cid, strlen(cid));
    return b;
}

/* A request that must be refused with `unavailable` (and nothing else for it). */
static void expect_unavailable(gwc_conn *k, const msgpack_sbuffer *sb, uint64_t rid)
{
    pr_event ev = gwfx_request(k, sb, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_UNAVAILABLE, "expected unavailable, got %.*s: %.*s",
                 (int)ev.err_name.n, ev.err_name.p, (int)ev.err_msg.n, ev.err_msg.p);
    cr_assert(gwfx_slice_is(ev.err_name, "unavailable"));
    cr_assert(ev.has_rid && ev.rid == rid);
}

static void send_unavailable(gwc_conn *k, const char *cid, uint64_t rid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, rid, gwfx_sl("g"), gwfx_sl(cid), (pr_body){gwfx_sl(body_of(cid)), false});
    expect_unavailable(k, &sb, rid);
    msgpack_sbuffer_destroy(&sb);
}

/* Pulls g after 0 to the end and checks it holds exactly m1..mN under mids 1..N. */
static void pull_all(gwc_conn *k, uint64_t n)
{
    uint64_t after = 0;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (;;) {
        sb.size = 0;
        pr_enc_pull(&sb, 3, gwfx_sl("g"), false, after, 500);
        pr_event page = gwfx_request(k, &sb, PR_EV_PAGE);
        cr_assert_eq(page.last_mid, n);
        for (size_t i = 0; i < page.n_items; i++) {
            pr_message m;
            cr_assert_eq(pr_event_message(&page, i, &m), 0);
            cr_assert_eq(m.mid, after + 1, "dense mids");
            after = m.mid;
            char cid[32];
            snprintf(cid, sizeof(cid), "m%lu", (unsigned long)m.mid);
            cr_assert(gwfx_slice_is(m.body.data, body_of(cid)), "mid %lu holds %.*s..., not %s",
                      (unsigned long)m.mid, 12, m.body.data.p, cid);
        }
        if (!page.more)
            break;
    }
    msgpack_sbuffer_destroy(&sb);
    cr_assert_eq(after, n);
}

static bool log_has(const char *needle)
{
    return gwfx_log_has(&f, needle);
}

/* Sends m<i> with its body; returns the reply, `sent` or `err` (borrowed from k). */
static pr_event send_m(gwc_conn *k, int i)
{
    char cid[32];
    snprintf(cid, sizeof(cid), "m%d", i);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, (uint64_t)i, gwfx_sl("g"), gwfx_sl(cid),
                (pr_body){gwfx_sl(body_of(cid)), false});
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev;
    int rc = gwc_next(k, GWFX_WAIT, &ev);
    cr_assert_eq(rc, 0, "no reply to m%d: %s", i, gwc_strerror(rc));
    cr_assert(ev.t == PR_EV_SENT || ev.t == PR_EV_ERR, "unexpected event %d", ev.t);
    cr_assert(ev.has_rid && ev.rid == (uint64_t)i);
    return ev;
}

/* alice and bob in g (bob then goes away), and m1..mN_BEFORE sent by alice. */
static gwc_conn *start_group(void)
{
    gwc_conn *alice, *bob;
    gwfx_login_two(&f, "alice", &f, "bob", "g", &alice, &bob);
    gwc_close(bob); /* bob reads it all at the end */
    /* Each message's cid is "m<the mid it must get>" (and its body starts with it). */
    for (int i = 1; i <= N_BEFORE; i++) {
        char cid[32];
        snprintf(cid, sizeof(cid), "m%d", i);
        cr_assert_eq(gwfx_send_msg(alice, "g", cid, body_of(cid)), (uint64_t)i);
    }
    cr_assert_eq(health(NULL), 200);
    cr_assert_eq(metric("gw_store_writable"), 1);
    return alice;
}

static void wait_healthy(void)
{
    long t0 = tclock_ms();
    while (health(NULL) != 200 && tclock_since(t0) < RECOVERY_WAIT_MS)
        usleep(100 * 1000);
    cr_assert_eq(health(NULL), 200, "not healthy within %d ms of space returning",
                 RECOVERY_WAIT_MS);
    cr_assert_eq(metric("gw_store_writable"), 1);
    cr_assert_geq(metric("gw_store_recoveries_total"), 1);
    cr_assert(log_has("store: recovered after"), "gw.log tells the recovery");
}

/* In the end: a receiver that was away pulls m1..mN once, in order, and the stopped
 * gateway's store holds exactly those: every `sent` stored once, nothing else. */
static void check_all_stored_once(uint64_t n)
{
    pr_event w;
    gwc_conn *bob = gwfx_login(&f, "bob", &w);
    pr_group g = gwfx_first_group(&w);
    cr_assert_eq(g.last_mid, n);
    pull_all(bob, n);

    gwfx_stop(&f, SIGTERM);
    st_store *s = gwfx_open_store(&f);
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, 1000, &p), 0);
    cr_assert_eq(st_page_count(p), n);
    cr_assert_eq(st_page_last_mid(p), n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(st_page_at(p, i)->mid, i + 1);
    st_page_free(p);
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_eq(st.messages, n, "stored exactly once");
    st_close(s);
}

/* ---- full by RLIMIT_FSIZE: works anywhere, no privilege --------------------------- */

Test(disk, full_disk_refuses_writes_then_recovers)
{
    gwfx_rocksdb_only("a full disk under RocksDB (the database going away: test_database.c)");
    gwc_conn *alice = start_group();

    /* The disk is full. */
    gateway_file_limit(0);
    send_unavailable(alice, "m6", 106);
    send_unavailable(alice, "m7", 107);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 108, gwfx_sl("h"));
    expect_unavailable(alice, &sb, 108);
    char *body = NULL;
    cr_assert_eq(health(&body), 503, "/healthz while the disk is full");
    /* Only that: the reason goes to the log (which cannot grow here: test_database reads
     * it there). */
    cr_assert_str_eq(body, "store unavailable\n", "/healthz: %s", body);
    free(body);
    /* Its status line has the reason phrase, and it says when to ask again. */
    bool closed;
    body = gwfx_raw_http(&f, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", 1, 5000, &closed);
    cr_assert(strncmp(body, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0, "%s", body);
    cr_assert(strstr(body, "\r\nretry-after: 5\r\n"), "%s", body);
    free(body);
    cr_assert_eq(metric("gw_store_writable"), 0);
    cr_assert_geq(metric("gw_store_write_errors_total"), 1);
    cr_assert_eq(metric("gw_errors_total{code=\"unavailable\"}"), 3);
    cr_assert_eq(metric("gw_store_recoveries_total"), 0);
    /* Reads go on, and show that nothing refused was stored. */
    sb.size = 0;
    pr_enc_pull(&sb, 109, gwfx_sl("g"), false, 0, 100);
    pr_event page = gwfx_request(alice, &sb, PR_EV_PAGE);
    cr_assert_eq(page.last_mid, N_BEFORE);
    cr_assert_eq(page.n_items, N_BEFORE);
    msgpack_sbuffer_destroy(&sb);
    /* A recovery attempt (a reopen) fails while the disk stays full. */
    long t0 = tclock_ms();
    while (metric("gw_store_write_errors_total") < 2 && tclock_since(t0) < RECOVERY_WAIT_MS)
        usleep(100 * 1000);
    cr_assert_geq(metric("gw_store_write_errors_total"), 2, "no recovery attempt was made");
    cr_assert_eq(health(NULL), 503);
    send_unavailable(alice, "m6", 110);
    /* An ack (it has no reply: a ping after it tells it was taken) waits in the gateway
     * while the store is failing. */
    msgpack_sbuffer_init(&sb);
    pr_ack a = {gwfx_sl("g"), N_BEFORE};
    pr_enc_ack(&sb, &a, 1);
    gwfx_send(alice, &sb);
    sb.size = 0;
    pr_enc_ping(&sb, 111);
    gwfx_request(alice, &sb, PR_EV_PONG);
    msgpack_sbuffer_destroy(&sb);
    cr_assert_eq(metric("gw_acks_received_total"), 1);
    usleep(600 * 1000); /* past the ack flush interval (200 ms) */
    cr_assert_eq(metric("gw_ack_writes_total"), 0);

    /* Space returns: the gateway recovers by itself. */
    gateway_file_limit(RLIM_INFINITY);
    wait_healthy();
    cr_assert_eq(metric("gw_store_recoveries_total"), 1);
    /* The ack that waited is written now, not only at the stop. */
    t0 = tclock_ms();
    while (metric("gw_ack_writes_total") < 1 && tclock_since(t0) < GWFX_WAIT)
        usleep(50 * 1000);
    cr_assert_eq(metric("gw_ack_writes_total"), 1, "the waiting ack was not written");
    /* The refused messages are sent again (same cids) and stored once; new ones too. */
    for (int i = N_BEFORE + 1; i <= N_BEFORE + 4; i++) {
        pr_event ev = send_m(alice, i);
        cr_assert_eq(ev.t, PR_EV_SENT);
        cr_assert_eq(ev.mid, (uint64_t)i);
    }
    gwfx_join(alice, "h");
    check_all_stored_once(N_BEFORE + 4);
    st_store *s = gwfx_open_store(&f);
    uint64_t ack = 0;
    cr_assert_eq(st_read_ack(s, st_id_str("g"), st_id_str("alice"), &ack), 0);
    cr_assert_eq(ack, N_BEFORE, "the ack sent while the disk was full is stored");
    st_close(s);
}

/* ---- really full: a small tmpfs filled up (needs the right to mount) ---------------- */

static char mnt[300]; /* the tmpfs under the data folder, "" when none */

static void umount_tmpfs(void)
{
    if (f.pid > 0)
        gwfx_stop(&f, SIGKILL); /* the test failed while it ran: it must let go of mnt */
    if (mnt[0])
        umount2(mnt, MNT_DETACH);
    mnt[0] = 0;
    gwfx_cleanup(&f);
}

/* Fills the filesystem of path with one file, to the last byte. */
static void fill(const char *path)
{
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    static char chunk[65536];
    while (fwrite(chunk, 1, sizeof(chunk), fp) == sizeof(chunk))
        ;
    fclose(fp);
    int fd = open(path, O_WRONLY | O_APPEND);
    while (fd >= 0 && write(fd, chunk, 1) == 1)
        ;
    if (fd >= 0)
        close(fd);
}

/*
 * A real ENOSPC, where the RLIMIT test cannot go: RocksDB's own handling of a full
 * filesystem (and the LOG that must not abort the process). Less can be asserted about
 * its timing: RocksDB keeps space it reserved (its MANIFEST is preallocated), and a
 * reopen gives that back, so the store may take writes again before the filler goes.
 * What holds: a send is refused with `unavailable`, the gateway says why and lives on,
 * and every `sent` message is stored exactly once.
 */
Test(disk, enospc_on_a_real_full_filesystem, .fini = umount_tmpfs)
{
    gwfx_rocksdb_only("a full filesystem under RocksDB");
    /* The gateway starts again on a data folder that is a 16 MiB tmpfs. */
    gwfx_stop(&f, SIGTERM);
    snprintf(mnt, sizeof(mnt), "%s/data", f.dir);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=16m,mode=0700") != 0) {
        mnt[0] = 0;
        cr_skip_test("cannot mount a tmpfs here (%s): disk/full_disk_* covers a full disk",
                     strerror(errno));
    }
    gwfx_restart(&f);
    gwc_conn *alice = start_group();
    char filler[400];
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    fill(filler);
    /* Large messages until one does not fit (the few that still do are confirmed). */
    int i = N_BEFORE + 1, refused = 0;
    for (; i < N_BEFORE + 64 && !refused; i++) {
        pr_event ev = send_m(alice, i);
        if (ev.t == PR_EV_SENT)
            cr_assert_eq(ev.mid, (uint64_t)i);
        else if (ev.err_code == PR_E_UNAVAILABLE)
            refused = i;
        else
            cr_assert_fail("m%d: %.*s", i, (int)ev.err_name.n, ev.err_name.p);
    }
    cr_assert(refused, "64 messages of 8 KiB fitted on a full filesystem");
    cr_assert(gwfx_alive(&f));
    cr_assert_geq(metric("gw_store_write_errors_total"), 1);
    cr_assert(log_has("store: write failed") && log_has("No space left on device"),
              "gw.log (not on the full disk) tells the failure and why");

    cr_assert_eq(unlink(filler), 0);
    wait_healthy();
    for (i = refused; i <= refused + 2; i++) {
        pr_event ev = send_m(alice, i);
        cr_assert_eq(ev.t, PR_EV_SENT);
        cr_assert_eq(ev.mid, (uint64_t)i);
    }
    check_all_stored_once((uint64_t)refused + 2);
}
