/*
 * The unread webhook (docs/API.md) against a real receiver over HTTP: a Python server
 * started by each test (webhook_receiver.py) checks every POST's signature as the docs
 * tell receivers to, answers as the test asks (500s, a 400, an answer held past the
 * timeout) and logs what came; the test checks the signatures again itself (OpenSSL),
 * and who was told of what: batched, once per member until it acks, again after an ack,
 * never a member who read in time, retried until taken, and the same across two nodes.
 */
#include "gwfx.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "webhook-test-secret-0123456789"

static gwfx f, g2;
static pid_t rx_pid;
static char rx_dir[256], rx_url[128];

static void rx_stop(void)
{
    if (rx_pid > 0) {
        kill(rx_pid, SIGTERM);
        waitpid(rx_pid, NULL, 0);
        rx_pid = 0;
    }
    if (rx_dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", rx_dir);
        cr_expect_eq(system(cmd), 0);
        rx_dir[0] = 0;
    }
}

static void teardown(void)
{
    /* A node a test stopped (SIGSTOP) and did not get to wake: it must hear SIGTERM. */
    if (f.pid > 0)
        kill(f.pid, SIGCONT);
    gwfx_cleanup(&g2);
    gwfx_cleanup(&f);
    rx_stop();
}

TestSuite(webhook, .fini = teardown, .timeout = 90);

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", rx_dir, name);
}

/* Starts the receiver with its flags (NULL-terminated, may be NULL). */
static void rx_start(const char *const *flags)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(rx_dir, sizeof(rx_dir), "%s/gw-webhook-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(rx_dir));
    char secret[300], port[300], log[300], script[300];
    path_in(secret, sizeof(secret), "secret");
    path_in(port, sizeof(port), "port");
    path_in(log, sizeof(log), "log");
    snprintf(script, sizeof(script), "%s/tests/gateway/webhook_receiver.py", GW_SOURCE_DIR);
    FILE *s = fopen(secret, "w");
    cr_assert_not_null(s);
    fprintf(s, "%s\n", SECRET);
    fclose(s);
    const char *argv[16] = {"python3",     script, "--secret-file", secret,
                            "--port-file", port,   "--log",         log};
    int n = 8;
    for (; flags && flags[n - 8]; n++)
        argv[n] = flags[n - 8];
    argv[n] = NULL;
    rx_pid = fork();
    cr_assert_geq(rx_pid, 0);
    if (rx_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test killed for its timeout takes it along */
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        FILE *p = fopen(port, "r");
        int v = 0;
        if (p && fscanf(p, "%d", &v) == 1 && v > 0) {
            fclose(p);
            snprintf(rx_url, sizeof(rx_url), "http://127.0.0.1:%d/hook", v);
            return;
        }
        if (p)
            fclose(p);
        usleep(50 * 1000);
    }
    cr_assert_fail("the webhook receiver did not start");
}

/* Starts x (beside `other` when not NULL) with the API and the webhook to url. */
static void start_gw(gwfx *x, gwfx *other, const char *url, const char *delay_ms,
                     const char *const *more)
{
    char secret[300];
    path_in(secret, sizeof(secret), "secret");
    const char *const base[] = {
        "--api-key-file", gwfx_api_key_file(), "--webhook-url", url, "--webhook-secret-file",
        secret,           "--webhook-delay",   delay_ms,        NULL};
    gwfx_start_with(x, other, base, more);
}

static void add_member(gwfx *x, const char *gid, const char *uid)
{
    char path[200];
    snprintf(path, sizeof(path), "/api/v1/groups/%s/members/%s", gid, uid);
    free(gwfx_api(x, "PUT", path, NULL, 201));
}

static void post(gwfx *x, const char *gid, const char *from, const char *cid, const char *body)
{
    char path[200], json[300];
    snprintf(path, sizeof(path), "/api/v1/groups/%s/messages", gid);
    snprintf(json, sizeof(json), "{\"from\":\"%s\",\"cid\":\"%s\",\"body\":\"%s\"}", from, cid,
             body);
    free(gwfx_api(x, "POST", path, json, 200));
}

/* Every request the receiver has logged, in order (a JSON array). */
static json_t *rx_requests(void)
{
    char log[300];
    path_in(log, sizeof(log), "log");
    json_t *all = json_array();
    FILE *l = fopen(log, "r");
    if (!l)
        return all;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, l) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        cr_assert_not_null(r, "a log line that is not JSON: %s", line);
        json_array_append_new(all, r);
    }
    free(line);
    fclose(l);
    return all;
}

/* The events of request r (its body parsed; owned by the caller). */
static json_t *events_of(json_t *r)
{
    json_t *body = json_loads(json_string_value(json_object_get(r, "body")), 0, NULL);
    cr_assert_not_null(body, "a body that is not JSON");
    json_t *ev = json_incref(json_object_get(body, "events"));
    json_decref(body);
    cr_assert(json_is_array(ev));
    return ev;
}

static json_int_t ival(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* Events for uid in requests the receiver answered 2xx: how many, and the last one
 * (a new reference in *last when not NULL). */
static size_t told(json_t *reqs, const char *uid, json_t **last)
{
    size_t n = 0, i, j;
    json_t *r, *e;
    if (last)
        *last = NULL;
    json_array_foreach(reqs, i, r)
    {
        json_int_t st = json_integer_value(json_object_get(r, "answered"));
        if (st < 200 || st > 299)
            continue;
        json_t *evs = events_of(r);
        json_array_foreach(evs, j, e)
        {
            if (strcmp(sval(e, "uid"), uid) != 0)
                continue;
            n++;
            if (last) {
                json_decref(*last);
                *last = json_incref(e);
            }
        }
        json_decref(evs);
    }
    return n;
}

/* Waits until uid has been told n times (delivered); the last event (owned). */
static json_t *wait_told(const char *uid, size_t n)
{
    json_t *last = NULL;
    for (int i = 0; i < 300; i++) {
        json_t *reqs = rx_requests();
        size_t k = told(reqs, uid, &last);
        json_decref(reqs);
        if (k >= n)
            return last;
        json_decref(last);
        usleep(50 * 1000);
    }
    cr_assert_fail("%s was not told %zu times within 15 s", uid, n);
    return NULL;
}

static size_t told_now(const char *uid)
{
    json_t *reqs = rx_requests();
    size_t k = told(reqs, uid, NULL);
    json_decref(reqs);
    return k;
}

/* The signature header checked here too, with OpenSSL: v1 is HMAC-SHA256 over "t." +
 * body under the secret. */
static void check_signature(json_t *r)
{
    cr_assert(json_is_true(json_object_get(r, "valid")), "the receiver refused a signature");
    const char *sig = sval(r, "signature"), *body = sval(r, "body");
    unsigned long long t;
    char v1[65];
    cr_assert_eq(sscanf(sig, "t=%llu,v1=%64[0-9a-f]", &t, v1), 2, "signature header: %s", sig);
    cr_assert_lt(llabs((long long)t - (long long)time(NULL)), 60);
    char *msg = NULL;
    cr_assert_gt(asprintf(&msg, "%llu.%s", t, body), 0);
    unsigned char mac[32];
    unsigned int n = 0;
    HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (unsigned char *)msg, strlen(msg), mac, &n);
    free(msg);
    char hex[65];
    for (unsigned i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    cr_assert_str_eq(hex, v1);
    cr_assert_str_eq(sval(r, "content_type"), "application/json");
}

/* The webhook's figure `key` in /stats. */
static json_int_t stat(gwfx *x, const char *key)
{
    int status;
    char *b = gwfx_http(x, "/stats", NULL, &status);
    cr_assert_eq(status, 200);
    json_t *s = json_loads(b, 0, NULL);
    free(b);
    json_int_t v = ival(json_object_get(s, "webhook"), key);
    json_decref(s);
    return v;
}

static void ack(gwc_conn *k, const char *gid, uint64_t mid)
{
    gwfx_ack(k, gid, mid);
    (void)gwfx_quiet(k, 200); /* the client writes while it waits for events */
}

/* Waits until uid's stored ack of gid is mid (the API's member list shows it). */
static void wait_stored_ack(gwfx *x, const char *gid, const char *uid, uint64_t mid)
{
    char path[200], want[200];
    snprintf(path, sizeof(path), "/api/v1/groups/%s/members", gid);
    snprintf(want, sizeof(want), "\"uid\":\"%s\",\"ack\":%llu,", uid, (unsigned long long)mid);
    for (int i = 0; i < 100; i++) {
        char *b = gwfx_api(x, "GET", path, NULL, 200);
        bool ok = strstr(b, want) != NULL;
        free(b);
        if (ok)
            return;
        usleep(50 * 1000);
    }
    cr_assert_fail("%s's ack of %s never became %llu", uid, gid, (unsigned long long)mid);
}

Test(webhook, unread_members_are_told_once_in_one_signed_batch_until_they_ack)
{
    rx_start(NULL);
    start_gw(&f, NULL, rx_url, "300", NULL);
    const char *who[] = {"alice", "bob", "carol", "dave"};
    for (int i = 0; i < 4; i++)
        add_member(&f, "team", who[i]);
    post(&f, "team", "alice", "m1", "standup in 5");
    post(&f, "team", "alice", "m2", "room 2");
    post(&f, "team", "alice", "m3", "bring coffee");
    for (int i = 1; i < 4; i++)
        json_decref(wait_told(who[i], 1));
    usleep(800 * 1000);

    json_t *reqs = rx_requests();
    size_t i;
    json_t *r;
    long batch = -1;
    json_array_foreach(reqs, i, r)
    {
        check_signature(r);
        json_t *evs = events_of(r);
        size_t j;
        json_t *e;
        json_array_foreach(evs, j, e)
        {
            cr_assert_str_eq(sval(e, "type"), "unread");
            cr_assert_str_eq(sval(e, "gid"), "team");
            cr_assert_eq(strlen(sval(e, "id")), 32);
            cr_assert_eq(ival(e, "first_unread"), 1, "the first unread message is told");
            cr_assert(ival(e, "unread") >= 1 && ival(e, "unread") <= 3);
            json_t *m = json_object_get(e, "message");
            cr_assert_eq(ival(m, "mid"), 1);
            cr_assert_str_eq(sval(m, "from"), "alice");
            cr_assert(ival(m, "ts") > 0);
            cr_assert_null(json_object_get(m, "body"), "no body without --webhook-body");
            if (batch < 0)
                batch = (long)i;
            cr_assert_eq((long)i, batch, "the three events came in one POST");
        }
        json_decref(evs);
    }
    json_decref(reqs);
    cr_assert_eq(told_now("alice"), 0, "the sender is not told of her own message");
    for (int k = 1; k < 4; k++)
        cr_assert_eq(told_now(who[k]), 1, "%s is told once", who[k]);

    /* More messages while they have not acked: nobody is told again. */
    post(&f, "team", "alice", "m4", "starting");
    post(&f, "team", "alice", "m5", "started");
    usleep(1200 * 1000);
    for (int k = 1; k < 4; k++)
        cr_assert_eq(told_now(who[k]), 1, "%s is not told again before acking", who[k]);

    /* Bob reads everything; the next message is news to him again, not to carol. */
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    ack(bob, "team", 5);
    wait_stored_ack(&f, "team", "bob", 5);
    post(&f, "team", "alice", "m6", "done");
    json_t *e = wait_told("bob", 2);
    cr_assert_eq(ival(e, "first_unread"), 6);
    cr_assert_eq(ival(e, "unread"), 1);
    json_decref(e);
    usleep(500 * 1000);
    cr_assert_eq(told_now("carol"), 1);
    cr_assert_eq(stat(&f, "delivered"), 4);
    cr_assert_eq(stat(&f, "failures"), 0);
}

Test(webhook, a_member_who_reads_in_time_is_not_told)
{
    rx_start(NULL);
    start_gw(&f, NULL, rx_url, "1500", NULL);
    add_member(&f, "ops", "bob");
    add_member(&f, "ops", "carol");
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    post(&f, "ops", "pager", "p1", "disk full");
    pr_event ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 1);
    ack(bob, "ops", 1);
    json_decref(wait_told("carol", 1));
    usleep(500 * 1000);
    cr_assert_eq(told_now("bob"), 0, "bob read it in time");
    cr_assert_eq(stat(&f, "events"), 1);
}

Test(webhook, a_member_who_read_part_is_told_of_the_rest)
{
    rx_start(NULL);
    start_gw(&f, NULL, rx_url, "300", NULL);
    add_member(&f, "g", "bob");
    post(&f, "g", "pager", "a1", "one");
    post(&f, "g", "pager", "a2", "two");
    post(&f, "g", "pager", "a3", "three");
    json_t *e = wait_told("bob", 1);
    cr_assert_eq(ival(e, "first_unread"), 1);
    json_decref(e);
    /* He reads two of three and goes: told of the third, once his ack has waited. */
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    ack(bob, "g", 2);
    e = wait_told("bob", 2);
    cr_assert_eq(ival(e, "first_unread"), 3);
    cr_assert_eq(ival(e, "unread"), 1);
    cr_assert_str_eq(sval(json_object_get(e, "message"), "from"), "pager");
    json_decref(e);
}

Test(webhook, a_batch_is_retried_after_500s_until_it_is_taken)
{
    const char *flags[] = {"--fail", "2", NULL};
    rx_start(flags);
    const char *more[] = {"--webhook-body", NULL};
    start_gw(&f, NULL, rx_url, "300", more);
    add_member(&f, "g", "bob");
    post(&f, "g", "pager", "r1", "hi bob");
    json_t *e = wait_told("bob", 1);
    cr_assert_str_eq(sval(json_object_get(e, "message"), "body"), "hi bob", "--webhook-body");
    json_t *reqs = rx_requests();
    cr_assert_eq(json_array_size(reqs), 3, "two 500s, then taken");
    const char *id = sval(e, "id");
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(reqs, i);
        check_signature(r);
        cr_assert_eq(ival(r, "answered"), i < 2 ? 500 : 200);
        char want[8];
        snprintf(want, sizeof(want), "%zu", i + 1);
        cr_assert_str_eq(sval(r, "attempt"), want);
        cr_assert_str_eq(sval(r, "delivery"), sval(json_array_get(reqs, 0), "delivery"),
                         "the same batch each time");
        json_t *evs = events_of(r);
        cr_assert_eq(json_array_size(evs), 1);
        cr_assert_str_eq(sval(json_array_get(evs, 0), "id"), id, "the same event id");
        json_decref(evs);
    }
    json_decref(reqs);
    json_decref(e);
    cr_assert_eq(stat(&f, "failures"), 2);
    cr_assert_eq(stat(&f, "attempts"), 3);
    cr_assert_eq(stat(&f, "delivered"), 1);
}

Test(webhook, a_receiver_too_slow_is_timed_out_and_tried_again)
{
    const char *flags[] = {"--hang", "1", NULL};
    rx_start(flags);
    const char *more[] = {"--webhook-timeout", "1000", NULL};
    start_gw(&f, NULL, rx_url, "300", more);
    add_member(&f, "g", "bob");
    post(&f, "g", "pager", "t1", "slow");
    json_decref(wait_told("bob", 1));
    for (int i = 0; i < 100 && stat(&f, "delivered") < 1; i++)
        usleep(50 * 1000);
    cr_assert_eq(stat(&f, "delivered"), 1);
    cr_assert_geq(stat(&f, "timeouts"), 1);
    cr_assert_geq(stat(&f, "attempts"), 2);
}

Test(webhook, a_batch_the_receiver_refuses_is_dropped_and_counted)
{
    const char *flags[] = {"--fail", "1", "--status", "400", NULL};
    rx_start(flags);
    start_gw(&f, NULL, rx_url, "300", NULL);
    add_member(&f, "g", "bob");
    add_member(&f, "h", "bob");
    post(&f, "g", "pager", "x1", "refused");
    for (int i = 0; i < 100 && stat(&f, "rejected") < 1; i++)
        usleep(50 * 1000);
    cr_assert_eq(stat(&f, "rejected"), 1);
    post(&f, "h", "pager", "x2", "taken");
    json_t *e = wait_told("bob", 1);
    cr_assert_str_eq(sval(e, "gid"), "h", "the refused one is not sent again");
    json_decref(e);
    json_t *reqs = rx_requests();
    cr_assert_eq(json_array_size(reqs), 2);
    json_decref(reqs);
}

Test(webhook, a_full_queue_drops_and_counts_and_the_gateway_goes_on)
{
    rx_start(NULL);
    rx_stop(); /* its port is closed now: nothing answers there */
    char url[128];
    snprintf(url, sizeof(url), "%s", rx_url);
    rx_start(NULL); /* only for the secret file */
    const char *more[] = {"--webhook-queue", "2", NULL};
    start_gw(&f, NULL, url, "300", more);
    const char *who[] = {"m1", "m2", "m3", "m4", "m5"};
    for (int i = 0; i < 5; i++)
        add_member(&f, "g", who[i]);
    post(&f, "g", "pager", "q1", "anyone?");
    for (int i = 0; i < 100 && stat(&f, "dropped") < 3; i++)
        usleep(50 * 1000);
    cr_assert_eq(stat(&f, "events"), 5);
    cr_assert_eq(stat(&f, "dropped"), 3);
    cr_assert_eq(stat(&f, "queued"), 2, "kept, and tried again and again");
    for (int i = 0; i < 100 && stat(&f, "failures") < 2; i++)
        usleep(50 * 1000);
    cr_assert_geq(stat(&f, "failures"), 2);
    post(&f, "g", "pager", "q2", "still here"); /* the gateway does not wait for it */
    cr_assert_eq(stat(&f, "delivered"), 0);
}

Test(webhook, two_nodes_tell_each_member_once_from_the_stored_acks)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
    rx_start(NULL);
    start_gw(&f, NULL, rx_url, "1000", NULL);
    start_gw(&g2, &f, rx_url, "1000", NULL);
    add_member(&f, "ops", "bob");
    add_member(&f, "ops", "carol");
    gwc_conn *bob = gwfx_login(&g2, "bob", NULL); /* on the other node */
    post(&f, "ops", "pager", "c1", "one");        /* stored by node 1 */
    post(&g2, "ops", "pager", "c2", "two");       /* stored by node 2 */
    pr_event ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 1);
    ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 2);
    ack(bob, "ops", 2); /* read in time, on node 2: node 1 sees it in the store */
    json_t *e = wait_told("carol", 1);
    cr_assert_eq(ival(e, "first_unread"), 1);
    json_decref(e);
    usleep(1500 * 1000);
    cr_assert_eq(told_now("carol"), 1, "told once, by the node that stored mid 1");
    cr_assert_eq(told_now("bob"), 0);
    json_t *reqs = rx_requests();
    char node[64];
    snprintf(node, sizeof(node), "\"node\":\"127.0.0.1:%d\"", f.port);
    cr_assert_not_null(strstr(sval(json_array_get(reqs, 0), "body"), node));
    json_decref(reqs);
}

/* The node that sent the last request the receiver logged ("127.0.0.1:PORT"). */
static bool last_from(gwfx *x)
{
    json_t *reqs = rx_requests();
    char node[64];
    snprintf(node, sizeof(node), "\"node\":\"127.0.0.1:%d\"", x->port);
    size_t n = json_array_size(reqs);
    bool is = n && strstr(sval(json_array_get(reqs, n - 1), "body"), node);
    json_decref(reqs);
    return is;
}

/* Waits (at most 15 s) until x's figure `key` is at least want. */
static json_int_t wait_stat(gwfx *x, const char *key, json_int_t want)
{
    json_int_t v = 0;
    for (int i = 0; i < 300 && (v = stat(x, key)) < want; i++)
        usleep(50 * 1000);
    return v;
}

/* f, and in the PostgreSQL pass g2 beside it, with webhooks after delay_ms to the
 * receiver: returns the node that is to tell of f's messages once f dies (g2, or f itself
 * once it is back on RocksDB). */
static gwfx *start_teller(const char *delay_ms)
{
    start_gw(&f, NULL, rx_url, delay_ms, NULL);
    if (!pgfx_on())
        return &f;
    start_gw(&g2, &f, rx_url, delay_ms, NULL);
    return &g2;
}

/* A message stored by a node that dies before the delay is up is still told, once: by
 * another node (PostgreSQL), or by the same one once it is back (RocksDB). What was to
 * be looked at is found in the store, not in the dead node's memory. */
Test(webhook, a_message_whose_node_died_before_the_delay_is_told_once, .timeout = 120)
{
    rx_start(NULL);
    gwfx *teller = start_teller("1000");
    add_member(&f, "g", "bob");
    add_member(&f, "g", "carol");
    gwc_conn *carol = gwfx_login(&f, "carol", NULL);
    post(&f, "g", "pager", "k1", "before the crash");
    pr_event ev = gwfx_expect(carol, PR_EV_MSG); /* stored and pushed */
    cr_assert_eq(ev.msg.mid, 1);
    ack(carol, "g", 1);
    usleep(400 * 1000);     /* carol's ack is stored (--ack-flush-ms 200): she read in time */
    gwfx_stop(&f, SIGKILL); /* before its delay is up: its look dies with it */
    if (!pgfx_on())
        gwfx_restart(&f);
    json_t *e = wait_told("bob", 1);
    cr_assert_eq(ival(e, "first_unread"), 1);
    cr_assert_str_eq(sval(json_object_get(e, "message"), "from"), "pager");
    json_decref(e);
    cr_assert(last_from(teller), "told by the node that took the look up");
    cr_assert_geq(stat(teller, "taken_up"), 1);
    if (pgfx_on())
        gwfx_restart(&f); /* back too: its first look at the store finds it done */
    usleep(3000 * 1000);
    cr_assert_eq(told_now("bob"), 1, "told once");
    cr_assert_eq(told_now("carol"), 0, "she had read it");
    cr_assert_eq(stat(teller, "events"), 1);
}

/* An event made and not taken when its node died (the receiver was failing) is sent by
 * another node (PostgreSQL), or by the same one once it is back (RocksDB): the same
 * event, with the same id, taken once. */
Test(webhook, an_event_not_taken_when_its_node_died_is_sent_by_another, .timeout = 120)
{
    const char *flags[] = {"--fail", "2", NULL};
    rx_start(flags);
    gwfx *teller = start_teller("300");
    add_member(&f, "g", "bob");
    post(&f, "g", "pager", "u1", "to be adopted");
    json_t *reqs = NULL;
    for (int i = 0; i < 200; i++) { /* its first POST, answered 500 */
        reqs = rx_requests();
        if (json_array_size(reqs) >= 1)
            break;
        json_decref(reqs);
        reqs = NULL;
        usleep(25 * 1000);
    }
    cr_assert_not_null(reqs, "the node made the event");
    json_t *evs = events_of(json_array_get(reqs, 0));
    char id[40];
    snprintf(id, sizeof(id), "%s", sval(json_array_get(evs, 0), "id"));
    json_decref(evs);
    json_decref(reqs);
    gwfx_stop(&f, SIGKILL); /* with the event queued, to be tried again */
    if (!pgfx_on())
        gwfx_restart(&f);
    json_t *e = wait_told("bob", 1);
    cr_assert_str_eq(sval(e, "id"), id, "the same event");
    cr_assert_eq(ival(e, "first_unread"), 1);
    json_decref(e);
    cr_assert(last_from(teller));
    cr_assert_eq(wait_stat(teller, "adopted", 1), 1);
    if (pgfx_on()) { /* marked taken: nothing is left for anyone to adopt */
        int64_t unsent = -1;
        for (int i = 0; i < 100 && unsent != 0; i++, usleep(50 * 1000))
            unsent =
                pgfx_scalar(f.store_url, "SELECT count(*) FROM gw.unread_tells WHERE NOT sent");
        cr_assert_eq(unsent, 0);
    }
    usleep(1000 * 1000);
    cr_assert_eq(told_now("bob"), 1, "taken once");
    cr_assert_eq(stat(teller, "adopted"), 1);
}

/* Two nodes look at the same messages (one was late: stopped past the delay and the
 * grace, so the other took its look up): each member is told once. The late one finds
 * the event claimed. */
Test(webhook, a_late_node_and_the_one_that_took_its_look_up_tell_once, .timeout = 120)
{
    pgfx_need(PGFX_ONLY);
    rx_start(NULL);
    start_gw(&f, NULL, rx_url, "1000", NULL);
    start_gw(&g2, &f, rx_url, "1000", NULL);
    add_member(&f, "g", "bob");
    post(&f, "g", "pager", "s1", "late");
    cr_assert_eq(kill(f.pid, SIGSTOP), 0);
    json_t *e = wait_told("bob", 1); /* node 2 took it up */
    json_decref(e);
    cr_assert(last_from(&g2));
    cr_assert_eq(kill(f.pid, SIGCONT), 0); /* node 1 looks now, its delay long past */
    cr_assert_eq(wait_stat(&f, "claimed_before", 1), 1, "node 1 found the event made");
    usleep(1500 * 1000);
    cr_assert_eq(told_now("bob"), 1, "told once");
    cr_assert_eq(stat(&f, "events"), 0);
}

/* The gateway's exit status for these flags (it stops at parsing). */
static int run_gw(const char *flags)
{
    char cmd[1200];
    /* timeout: a gateway that took the flags would run on. */
    snprintf(cmd, sizeof(cmd), "timeout 10 %s --insecure --port 0 %s >/dev/null 2>&1", GW_BINARY,
             flags);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(webhook, its_flags_are_checked)
{
    cr_assert_eq(run_gw("--webhook-url http://127.0.0.1:1/hook"), 2, "needs a secret");
    cr_assert_eq(run_gw("--webhook-url ftp://127.0.0.1/x --webhook-secret-file /etc/hostname"), 2,
                 "http or https");
    cr_assert_eq(run_gw("--webhook-url http://127.0.0.1:1/ --webhook-secret-file /nonexistent"), 2);
    cr_assert_eq(run_gw("--webhook-delay 5"), 2, "at least 100 ms");
    rx_start(NULL); /* for its secret file */
    char flags[700];
    snprintf(flags, sizeof(flags),
             "--webhook-url http://127.0.0.1:1/ --webhook-secret-file %s/secret "
             "--webhook-delay 200 --ack-flush-ms 500 --data %s/data",
             rx_dir, rx_dir);
    cr_assert_eq(run_gw(flags), 2, "acks are stored before they are read");
}
