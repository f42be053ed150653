/*
 * The gateway on the internet: what one client, signed in or not, can make it hold, and
 * what a refused client still hears. Each test makes the attack for real against the real
 * gateway, bounded in count and time, and asserts a bound on what the gateway spends
 * (descriptors, RSS with a margin) and on what the client is told:
 *   - connections open at once per source address (--conns-per-address);
 *   - an HTTP body that trickles in (--body-timeout), and answers known before the body
 *     (401, 404, 413) given at once, then the body read and dropped so that the client
 *     reads the answer instead of a reset (20 tries each);
 *   - two Content-Length headers (request smuggling): 400, the rest never a request;
 *   - before hello, a message is at most 10 KiB, paid for piece by piece;
 *   - 40 and 200 bad requests pipelined: every error, then the 1008 close (20 tries);
 *   - --demo only on loopback; connections that go before they are taken are not
 *     logged as a lack of memory.
 */
#include "rawws.h"
#include "watch.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static gwfx f;
static watch w;

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(exposed, .fini = teardown);

static void start(const char *const *args)
{
    watch_prepare();
    gwfx_start(&f, args);
    watch_start(&w, &f);
}

/* A TCP connection to the gateway from src (any port), or -1. */
static int tcp_from(const char *src)
{
    rawws c;
    if (rawws_connect(&c, f.port, src) != 0)
        return -1;
    int fd = c.fd;
    c.fd = -1;
    rawws_close(&c);
    return fd;
}

/* Did the gateway end the connection (EOF or reset) within ms? */
static bool ended(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b[256];
    for (int waited = 0; waited < ms; waited += 50) {
        if (poll(&p, 1, 50) == 1) {
            ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN))
                return true;
        }
    }
    return false;
}

Test(exposed, connections_open_at_once_are_capped_per_source_address, .timeout = 120)
{
    static const char *const args[] = {"--conns-per-address", "20", NULL};
    start(args);
    long fds0 = watch_fds(&f);
    int fds[60], in = 0;
    for (int i = 0; i < 60; i++)
        fds[i] = tcp_from("127.0.0.41");
    for (int i = 0; i < 60; i++) {
        cr_assert_geq(fds[i], 0, "connect");
        in += !ended(fds[i], i < 20 ? 0 : 2000);
    }
    long fds_held = watch_fds(&f);
    cr_log_info("exposed: 60 connections from one address at --conns-per-address 20: %d held "
                "open, gateway descriptors %ld -> %ld",
                in, fds0, fds_held);
    cr_assert_eq(in, 20, "the first 20 held, the other 40 closed at accept");
    cr_assert_leq(fds_held - fds0, 20 + 2);
    /* Another address is let in; the count is per address. */
    int other = tcp_from("127.0.0.42");
    cr_assert(!ended(other, 300), "another address is let in");
    close(other);
    cr_assert_eq(watch_stat(&f, "rate_limits.connections_open"), 40);
    /* Closed connections give their places back. */
    for (int i = 0; i < 60; i++)
        close(fds[i]);
    bool back = false;
    for (int tries = 0; tries < 50 && !back; tries++) {
        usleep(100 * 1000);
        int fd = tcp_from("127.0.0.41");
        back = !ended(fd, 200);
        close(fd);
    }
    cr_assert(back, "the address is let in again once its connections are closed");
    rawws ws;
    cr_assert_eq(rawws_open(&ws, f.port, "127.0.0.41", GWFX_WAIT), 0);
    rawws_close(&ws);
    watch_report(&w, "connections per address", 8 * 1024);
}

Test(exposed, the_default_cap_holds_256_per_address, .timeout = 120)
{
    start(NULL);
    static int fds[300];
    int in = 0;
    for (int i = 0; i < 300; i++)
        fds[i] = tcp_from("127.0.0.43");
    for (int i = 0; i < 300; i++)
        in += fds[i] >= 0 && !ended(fds[i], i < 250 ? 0 : 300);
    cr_log_info("exposed: 300 connections from one address, default cap: %d held", in);
    cr_assert_eq(in, 256);
    for (int i = 0; i < 300; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    watch_report(&w, "default connection cap", 8 * 1024);
}

/* Sends request (headers), then body_n bytes of body as fast as the gateway takes them,
 * then reads the answer to its end: its status line's code, or 0 if none came (a reset). */
static int post_then_read(const char *request, size_t body_n)
{
    int fd = tcp_from(NULL);
    cr_assert_geq(fd, 0);
    if (write(fd, request, strlen(request)) != (ssize_t)strlen(request))
        return 0;
    static char chunk[65536];
    memset(chunk, 'x', sizeof(chunk));
    for (size_t sent = 0; sent < body_n;) {
        size_t n = body_n - sent < sizeof(chunk) ? body_n - sent : sizeof(chunk);
        ssize_t k = send(fd, chunk, n, MSG_NOSIGNAL);
        if (k <= 0)
            break; /* the gateway closed: what it said is read below */
        sent += (size_t)k;
    }
    char out[4096];
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got < sizeof(out) - 1 && poll(&p, 1, 10000) == 1) {
        ssize_t k = recv(fd, out + got, sizeof(out) - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    out[got] = 0;
    close(fd);
    int code = 0;
    return sscanf(out, "HTTP/1.1 %d", &code) == 1 ? code : 0;
}

Test(exposed, an_answer_known_before_the_body_is_read_every_time, .timeout = 240)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    start(args);
    char req[512];
    static const struct {
        const char *what, *head;
        bool key;
        size_t body;
        int want;
    } cases[] = {
        {"no key", "POST /api/v1/groups/g/messages", false, 2 << 20, 401},
        {"a body over the limit", "POST /api/v1/groups/g/messages", true, 8 << 20, 413},
        {"POST to a path that is not there", "POST /nothing", false, 2 << 20, 404},
        {"PUT to a static path", "PUT /index.html", false, 2 << 20, 404},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int right = 0;
        for (int i = 0; i < 20; i++) {
            snprintf(req, sizeof(req),
                     "%s HTTP/1.1\r\nHost: t\r\n%sContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     cases[c].head,
                     cases[c].key ? "Authorization: Bearer " GWFX_API_KEY "\r\n" : "",
                     cases[c].body);
            right += post_then_read(req, cases[c].body) == cases[c].want;
        }
        cr_log_info("exposed: %s: %d answered in 20 tries", cases[c].what, right);
        cr_assert_eq(right, 20, "%s: %d of 20 read the %d", cases[c].what, right, cases[c].want);
    }
    watch_report(&w, "answers before the body", 16 * 1024);
}

Test(exposed, a_body_that_trickles_in_meets_its_deadline, .timeout = 120)
{
    static const char *const args[] = {"--body-timeout", "2", "--demo", NULL};
    start(args);
    /* A byte a second: each piece is in time for libwebsockets (--handshake-timeout, 10 s,
     * between two pieces), the whole never is. */
    const char *head = "POST /demo/login HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n";
    int fd = tcp_from(NULL);
    cr_assert_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    char out[1024];
    size_t got = 0;
    bool closed = false;
    for (int i = 0; i < 30 && !closed; i++) {
        sleep(1);
        if (send(fd, "x", 1, MSG_NOSIGNAL) != 1)
            closed = true;
        ssize_t k = recv(fd, out + got, sizeof(out) - 1 - got, MSG_DONTWAIT);
        if (k > 0)
            got += (size_t)k;
        else if (k == 0)
            closed = true;
    }
    out[got] = 0;
    close(fd);
    cr_log_info("exposed: a body of a byte a second at --body-timeout 2: %s",
                closed ? "closed" : "still open after 30 s");
    cr_assert(closed, "the connection is closed at the body's deadline");
    cr_assert(strncmp(out, "HTTP/1.1 408 Request Timeout\r\n", 30) == 0, "answered 408: %s", out);
}

Test(exposed, two_content_lengths_are_refused, .timeout = 60)
{
    start(NULL);
    bool closed;
    char *out =
        gwfx_raw_http(&f,
                      "POST /demo/login HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
                      "Content-Length: 41\r\n\r\n{}GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
                      0, 3000, &closed);
    cr_assert(strncmp(out, "HTTP/1.1 400 Bad Request\r\n", 26) == 0, "%s", out);
    cr_assert(strstr(out, "one Content-Length header"), "%s", out);
    cr_assert_null(strstr(out + 1, "HTTP/1.1 "), "the body was never taken for a request: %s", out);
    cr_assert(closed);
    free(out);
    out = gwfx_raw_http(&f, "POST /demo/login HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n", 0,
                        3000, &closed);
    cr_assert(strncmp(out, "HTTP/1.1 400 Bad Request\r\n", 26) == 0, "%s", out);
    free(out);
}

/* What the client read: `err` replies, and the close code (0: a reset or EOF). */
typedef struct heard {
    int errs, close_code;
} heard;

/* Opens a WebSocket session, JSON (gw.v1.json) or MessagePack. */
static void open_as(rawws *c, bool json)
{
    cr_assert_eq(rawws_connect(c, f.port, NULL), 0);
    if (json)
        c->subprotocol = "gw.v1.json";
    cr_assert_eq(rawws_handshake(c, f.port, false, GWFX_WAIT), 0);
}

/* Signs in, pipelines n bad requests in one write, and reads to the end. */
static heard pipeline_bad(int n, bool json)
{
    heard h = {0, 0};
    rawws c;
    open_as(&c, json);
    char *tok = gwfx_token("pipeliner");
    int op;
    const uint8_t *p;
    size_t pn;
    if (json) {
        char hello[9000];
        snprintf(hello, sizeof(hello), "{\"t\":\"hello\",\"rid\":1,\"token\":\"%s\"}", tok);
        cr_assert_eq(rawws_send_text(&c, hello), 0);
        cr_assert_eq(rawws_read_frame(&c, GWFX_WAIT, &op, &p, &pn), 0);
        cr_assert(memmem(p, pn, "welcome", 7), "%.*s", (int)pn, p);
    } else {
        cr_assert_eq(rawws_hello(&c, tok, false), 0);
    }
    free(tok);
    size_t cap = (size_t)n * 64, len = 0;
    uint8_t *buf = malloc(cap);
    for (int i = 0; i < n; i++) {
        char req[48];
        int rn = snprintf(req, sizeof(req), json ? "{\"t\":\"nosuch\",\"rid\":%d}" : "%c%c%c%c",
                          i + 2, 0xc1, 0xc1, 0xc1);
        len += rawws_frame(buf + len, cap - len, json ? RAWWS_TEXT : RAWWS_BIN, true, req,
                           json ? (size_t)rn : 4);
    }
    cr_assert_eq(rawws_write(&c, buf, len, false), 0);
    free(buf);
    pr_event ev;
    int rc;
    if (json) { /* every `err` in the text frames (a batch is an array of them) */
        while ((rc = rawws_read_frame(&c, 10000, &op, &p, &pn)) == 0)
            for (const uint8_t *at = p; (at = memmem(at, pn - (size_t)(at - p), "\"err\"", 5));
                 at++)
                h.errs++;
    } else {
        while ((rc = rawws_next(&c, 10000, &ev)) != -1 && rc != -2)
            h.errs += rc == 0 && ev.t == PR_EV_ERR;
    }
    h.close_code = c.close_code;
    rawws_close(&c);
    return h;
}

Test(exposed, pipelined_bad_requests_hear_every_error_then_1008, .timeout = 300)
{
    start(NULL);
    static const int counts[] = {40, 200};
    for (int json = 0; json < 2; json++) {
        for (size_t k = 0; k < 2; k++) {
            int whole = 0;
            for (int i = 0; i < 20; i++) {
                heard h = pipeline_bad(counts[k], json);
                /* The budget (20) is spent at the 21st: every error up to it, then 1008. */
                whole += h.errs == 21 && h.close_code == 1008;
            }
            cr_log_info("exposed: %d bad requests pipelined (%s): errors then 1008 in %d of 20",
                        counts[k], json ? "JSON" : "MessagePack", whole);
            cr_assert_eq(whole, 20);
        }
    }
    watch_report(&w, "pipelined bad requests", 16 * 1024);
}

/* The attacker of the pre-hello test: 200 connections, each a 256 KiB message in pieces
 * that never ends, before any hello. */
typedef struct prehello {
    int port;
    int closed_1009, held;
} prehello;

static void *prehello_attack(void *arg)
{
    prehello *a = arg;
    static rawws cs[200];
    static uint8_t piece[16384 + 16], payload[16384];
    memset(payload, 'a', sizeof(payload));
    for (int i = 0; i < 200; i++) {
        if (rawws_open(&cs[i], a->port, "127.0.0.44", GWFX_WAIT) != 0)
            continue;
        /* The first piece says binary, not final; the rest continue it: 16 of 16 KiB. */
        for (int k = 0; k < 16; k++) {
            size_t n = rawws_frame(piece, sizeof(piece), k ? RAWWS_CONT : RAWWS_BIN, false, payload,
                                   sizeof(payload));
            if (rawws_write(&cs[i], piece, n, false) != 0)
                break;
        }
    }
    for (int i = 0; i < 200; i++) {
        if (cs[i].fd < 0)
            continue;
        if (rawws_wait_closed(&cs[i], 5000))
            a->closed_1009 += cs[i].close_code == 1009;
        else
            a->held++;
        rawws_close(&cs[i]);
    }
    return NULL;
}

Test(exposed, before_hello_a_message_is_small, .timeout = 180)
{
    static const char *const args[] = {"--hello-timeout", "30", NULL};
    start(args);
    prehello a = {.port = f.port};
    watch_during(&w, prehello_attack, &a);
    cr_log_info("exposed: 200 connections each sending 256 KiB of one message before hello: "
                "%d closed 1009, %d held",
                a.closed_1009, a.held);
    cr_assert_eq(a.held, 0, "no such connection is held");
    cr_assert_geq(a.closed_1009, 190);
    watch_report(&w, "big messages before hello", 24 * 1024);

    /* A JSON session's first message that is not an object is not parsed: closed 4001. */
    rawws c;
    open_as(&c, true);
    cr_assert_eq(rawws_send_text(&c, "[{},{},{}]"), 0);
    cr_assert(rawws_wait_closed(&c, GWFX_WAIT));
    cr_assert_eq(c.close_code, 4001);
    rawws_close(&c);
    /* A hello with a token of 8 KiB still fits. */
    cr_assert_eq(rawws_open(&c, f.port, NULL, GWFX_WAIT), 0);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    char big[8193];
    memset(big, 'a', 8192);
    big[8192] = 0;
    pr_enc_hello(&sb, 1, (pr_slice){(const uint8_t *)big, 8192});
    cr_assert_eq(rawws_request(&c, &sb, false), 0);
    msgpack_sbuffer_destroy(&sb);
    cr_assert(rawws_wait_closed(&c, GWFX_WAIT));
    cr_assert_eq(c.close_code, 4001, "refused for its token, not its size (%d)", c.close_code);
    rawws_close(&c);
}

Test(exposed, demo_mode_listens_on_loopback_unless_told, .timeout = 60)
{
    char cmd[512];
    snprintf(
        cmd, sizeof(cmd),
        "%s --demo --listen 0.0.0.0 --port 0 --data /nonexistent-gw-dir >/dev/null 2>%s/err.txt",
        GW_BINARY, getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "refused at start (status %d)", st);
    char path[300], line[512] = "";
    snprintf(path, sizeof(path), "%s/err.txt", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    FILE *e = fopen(path, "r");
    cr_assert_not_null(e);
    cr_assert_not_null(fgets(line, sizeof(line), e));
    fclose(e);
    cr_assert(strstr(line, "--demo-any-address"), "says how: %s", line);
    /* With the second flag it starts (here on loopback's 127.0.0.45, as the suite binds). */
    static const char *const args[] = {"--demo", "--demo-any-address", NULL};
    gwfx_start(&f, args);
}

Test(exposed, connections_gone_before_they_are_taken_are_not_an_alarm, .timeout = 60)
{
    gwfx_start_tls(&f, NULL);
    for (int i = 0; i < 5; i++) {
        int fd = tcp_from(NULL);
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(fd); /* a reset */
        close(tcp_from(NULL));
    }
    /* The gateway is fine, and its log says nothing of memory. */
    int status;
    free(gwfx_http(&f, "/healthz", NULL, &status));
    cr_assert_eq(status, 200);
    cr_assert(!gwfx_log_has(&f, "out of memory"), "a reset is not a lack of memory");
}
