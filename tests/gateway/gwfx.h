/*
 * Gateway test fixture: the real gw binary on 127.0.0.1 with a free port and a fresh data
 * folder, and real WebSocket clients (clients/c/gwc.h) that speak to it. Its store is RocksDB
 * in the data folder, or (GW_TEST_STORE=postgres, the suite's second pass) a new database
 * of the suite's PostgreSQL server, given with --store.
 */
#ifndef GW_TEST_GWFX_H
#define GW_TEST_GWFX_H

#include "gwc.h"
#include "proto.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define GWFX_SECRET "test-secret-0123456789abcdef"
#define GWFX_WAIT 5000 /* ms: how long a test waits for something that should come */

typedef struct gwfx {
    pid_t pid;
    int port;
    char dir[256];      /* data folder (and the log) */
    char url[96];       /* ws://127.0.0.1:PORT/ws */
    char args[16][300]; /* extra gateway flags, kept across restarts */
    bool tls;           /* wss:// with a self-signed certificate made for the test */
    bool own_cert;      /* ... or with the one the gateway makes itself (not trusted here) */
    int n_args;
    char *store_url; /* PostgreSQL: the test's database (NULL: RocksDB in the folder) */
    bool own_store;  /* ... made for this gateway: dropped at cleanup */
    bool shared_ctx; /* ctx is another fixture's (gwfx_start_beside): not freed here */
    gwc_ctx *ctx;
} gwfx;

/* Starts a gateway with extra flags (NULL-terminated list, may be NULL). */
void gwfx_start(gwfx *f, const char *const *extra);
/* The same over TLS: makes a self-signed certificate for 127.0.0.1 and localhost in the
 * data folder (dir/cert.pem, dir/key.pem); the clients trust exactly that certificate. */
void gwfx_start_tls(gwfx *f, const char *const *extra);
/* TLS as a default start serves it: no --cert, so the gateway makes its own self-signed
 * certificate (dir/data/tls/); the fixture's clients do not trust it. */
void gwfx_start_tls_own(gwfx *f, const char *const *extra);
/* Starts a gateway on the given PostgreSQL database (one of a test's own server), which
 * cleanup leaves alone. */
void gwfx_start_on(gwfx *f, const char *store_url, const char *const *extra);
/* Starts a second gateway on other's database, whose clients share other's client
 * context (one libwebsockets client context per process: two leave OpenSSL state behind
 * at exit). Clean it up before other. */
void gwfx_start_beside(gwfx *f, gwfx *other, const char *const *extra);
/* Node a, and in the PostgreSQL pass node b beside it on the same database: returns the
 * node where a test's other members sign in (b, or a itself on RocksDB). */
gwfx *gwfx_start_nodes(gwfx *a, gwfx *b, const char *const *extra);
/* The same on another store URL (a proxy's in front of other's database, say). */
void gwfx_start_beside_on(gwfx *f, gwfx *other, const char *store_url, const char *const *extra);
/* Starts f (beside `beside`, as gwfx_start_beside, when not NULL) with the flags of base
 * followed by those of more (both NULL-terminated; more may be NULL). */
void gwfx_start_with(gwfx *f, gwfx *beside, const char *const *base, const char *const *more);
/* Stops it with sig (SIGTERM: graceful, SIGKILL: crash) and waits for it. */
void gwfx_stop(gwfx *f, int sig);
/* Waits for a gateway told to stop to exit, and checks it exited 0. */
void gwfx_wait_exit(gwfx *f);
/* Starts it again on the same data folder (a new port). */
void gwfx_restart(gwfx *f);
/* Stops (if running), frees the clients and removes the data folder. */
void gwfx_cleanup(gwfx *f);

/* A suite (Criterion's TestSuite, timeout in seconds) whose tests each get a gateway of
 * their own in `fx` (a static gwfx), made by start(&fx, NULL) before each test and cleaned
 * up after it (gwfx_cleanup: SIGTERM, which must end in exit 0). */
#define GWFX_SUITE(suite, fx, start, secs)                                                         \
    static gwfx fx;                                                                                \
    static void suite##_setup(void)                                                                \
    {                                                                                              \
        start(&fx, NULL);                                                                          \
    }                                                                                              \
    static void suite##_teardown(void)                                                             \
    {                                                                                              \
        gwfx_cleanup(&fx);                                                                         \
    }                                                                                              \
    TestSuite(suite, .init = suite##_setup, .fini = suite##_teardown, .timeout = secs)
/* A suite of tests on two gateways fa and fb (static gwfx, started by each test: fb often
 * beside fa), both cleaned up after each test, fb first (it may share fa's client context). */
#define GWFX_PAIR_SUITE(suite, fa, fb, secs)                                                       \
    static gwfx fa, fb;                                                                            \
    static void suite##_teardown(void)                                                             \
    {                                                                                              \
        gwfx_cleanup(&fb);                                                                         \
        gwfx_cleanup(&fa);                                                                         \
    }                                                                                              \
    TestSuite(suite, .fini = suite##_teardown, .timeout = secs)
/* True if the gateway process is still alive. */
bool gwfx_alive(gwfx *f);
/* True if the gateway's log (gw.log in its folder) has a line containing needle. */
bool gwfx_log_has(gwfx *f, const char *needle);
/* The end of the file at path (its last n - 1 bytes at most) into out, NUL-terminated; ""
 * when it cannot be read. */
void gwfx_file_tail(const char *path, char *out, size_t n);
/* The gateway's resident memory in KiB (from /proc). */
long gwfx_rss_kib(gwfx *f);

/* Opens the store of a stopped gateway (its data folder or database), to check what it
 * persisted. */
struct st_store *gwfx_open_store(gwfx *f);

/* A token for uid valid for an hour (malloc'd). */
char *gwfx_token(const char *uid);
/* The same issued at iat (Unix seconds; GWFX_NO_IAT: without the claim): revocation's. */
#define GWFX_NO_IAT (-1)
char *gwfx_token_issued(const char *uid, long iat);

/* Connects a raw session (no hello). */
gwc_conn *gwfx_connect_raw(gwfx *f);
/* Connects and signs in as uid; fails the test unless `welcome` comes. The welcome event
 * is copied into *welcome when not NULL (its slices borrow from the connection). */
gwc_conn *gwfx_login(gwfx *f, const char *uid, pr_event *welcome);
/* Signs n users in (uids[i], in order) and then has each join gid, in the same order; the
 * connections in out[0..n-1]. */
void gwfx_login_joined(gwfx *f, const char *gid, int n, const char *const *uids, gwc_conn **out);
/* Two members of gid, each on its gateway (or both on one): ua signs in on fa, ub on fb,
 * then both join gid, in that order. */
void gwfx_login_two(gwfx *fa, const char *ua, gwfx *fb, const char *ub, const char *gid,
                    gwc_conn **ka, gwc_conn **kb);

/* The first group of a welcome (asserted to be there), as gwfx_login copied it. */
pr_group gwfx_first_group(const pr_event *welcome);

/* Pulls gid after `after` a page of 500 at a time (each request with rid) until the last
 * page, asserting the mids dense (after + 1, after + 2, ...), and calls each(m, ud) on
 * every message (its slices valid during the call). Returns the last mid pulled. */
uint64_t gwfx_pull_all(gwc_conn *k, const char *gid, uint64_t rid, uint64_t after,
                       void (*each)(const pr_message *m, void *ud), void *ud);

/* Sends one encoded frame (fails the test on error). */
void gwfx_send(gwc_conn *k, const msgpack_sbuffer *sb);
/* Waits for the next event and checks its type; returns it (borrowed). */
pr_event gwfx_expect(gwc_conn *k, enum pr_ev_type t);
/* Waits for the next event, whatever it is (borrowed). */
pr_event gwfx_expect_any(gwc_conn *k);
/* Sends a request built by the caller and waits for an event of type t. */
pr_event gwfx_request(gwc_conn *k, const msgpack_sbuffer *sb, enum pr_ev_type t);

/* Convenience requests. */
void gwfx_join(gwc_conn *k, const char *gid);
/* Sends an ack of gid up to mid (written while the client next waits for events). */
void gwfx_ack(gwc_conn *k, const char *gid, uint64_t mid);
/* Sends a text body with the given cid and waits for `sent`; returns the mid. Events that
 * arrive meanwhile (pushes) fail the test: use it on sessions that get no pushes. */
uint64_t gwfx_send_msg(gwc_conn *k, const char *gid, const char *cid, const char *text);
/* The next event of type t, skipping others (pushes of messages, say), within ms; an
 * `err` when t is not PR_EV_ERR fails the test. Its slices are valid until the next call
 * on k. */
bool gwfx_next_of(gwc_conn *k, enum pr_ev_type t, int ms, pr_event *out);
/* The same, failing the test unless it comes within GWFX_WAIT. */
pr_event gwfx_expect_of(gwc_conn *k, enum pr_ev_type t);
/* Makes a member that does not read a slow consumer: sends messages of 60,000 bytes to gid
 * from sender, 20 at a time (each followed by pause_ms), reading away what sender got
 * after each 20 (until drain_ms pass without an event), until at least min went and f
 * counts a switch to notify, within 30 s (asserted). Returns how many were sent (cids
 * "m<call>-<n>": each call's are new). */
int gwfx_fill_slow(gwfx *f, gwc_conn *sender, const char *gid, int min, int pause_ms, int drain_ms);
/* After gwfx_fill_slow: a member that stopped reading is not at once a slow consumer for
 * good. For a few seconds the kernel may still grow the connection's buffers, the queue
 * drains into them and the member leaves notify mode (with a notify) until the next
 * message backs it up again. Sends more rounds of 20 messages (21 ms apart: within a send
 * rate of 50) until one passes with no switch and no notify on f, 30 s at most (asserted):
 * the members that were slow consumers then stayed so through a whole round. The members
 * that read must have read everything before (they would count). */
void gwfx_settle_slow(gwfx *f, gwc_conn *sender, const char *gid);
/* A figure of f's /stats (group.key), failing the test when there is none. */
long long gwfx_stat(gwfx *f, const char *group, const char *key);
/* True if nothing arrives on k within ms. */
bool gwfx_quiet(gwc_conn *k, int ms);
/* Waits until the connection is closed by the server; returns its close code. */
int gwfx_closed(gwc_conn *k);

bool gwfx_slice_is(pr_slice s, const char *str);
/* The slice of a C string (borrowed). */
pr_slice gwfx_sl(const char *s);

/* The reply of rid: the next event of type want, pushes before it skipped (within
 * GWFX_WAIT, and carrying rid: both asserted). Borrowed, as gwfx_next_of's. */
pr_event gwfx_reply(gwc_conn *k, uint64_t rid, enum pr_ev_type want);
/* Sends an edit of gid's mid to version ver (0: the next) with a text body, or a recall
 * of it, and returns the reply of rid, asserted to be of type want. */
pr_event gwfx_edit(gwc_conn *k, uint64_t rid, const char *gid, uint64_t mid, uint64_t ver,
                   const char *text, enum pr_ev_type want);
pr_event gwfx_recall(gwc_conn *k, uint64_t rid, const char *gid, uint64_t mid,
                     enum pr_ev_type want);

/* Skips the test on PostgreSQL (why: what it needs that only RocksDB has). */
void gwfx_rocksdb_only(const char *why);

/* GET (or POST body, when not NULL) path on the gateway's HTTP side with curl; returns
 * the body (malloc'd) and sets *status (0 if the request failed). */
char *gwfx_http(gwfx *f, const char *path, const char *post_body, int *status);
/* Any method on path, with `Authorization: Bearer KEY` when bearer is not NULL and a
 * JSON body when body is not NULL; returns the answer's body (malloc'd), *status. */
char *gwfx_call(gwfx *f, const char *method, const char *path, const char *bearer, const char *body,
                int *status);
#define GWFX_API_KEY "test-api-key-0123456789abcdef"
/* A file holding GWFX_API_KEY (after a comment line), for --api-key-file: made once per
 * process in TMPDIR, removed at exit. */
const char *gwfx_api_key_file(void);
/* Calls the server API with GWFX_API_KEY and asserts the answer's status; returns its
 * body (malloc'd). */
char *gwfx_api(gwfx *f, const char *method, const char *path, const char *body, int want);
/* Sends request as it is over a plain TCP connection to the gateway (started without TLS)
 * and reads until the gateway closes it, `answers` whole responses are in (0: no such
 * limit) or timeout_ms passes; returns what came (malloc'd, NUL-terminated) and whether
 * the gateway closed the connection. */
char *gwfx_raw_http(gwfx *f, const char *request, int answers, int timeout_ms, bool *closed);
/* Polls GET /healthz until it answers want (30 s at most: asserted); returns its body
 * (malloc'd). */
char *gwfx_wait_health(gwfx *f, int want);
/* GET /metrics (200 asserted), with the node label that every sample carries taken out
 * (and asserted on each): tests look samples up as "name" or "name{label=\"v\"}". */
char *gwfx_metrics(gwfx *f);

#endif
