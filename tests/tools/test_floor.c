/*
 * gw_floor (tools/bench/gw_floor.c), the benchmarks' floor, run for real: the binary of
 * the same build on a port of its own, real WebSocket clients over TCP (the tests' raw
 * client, tests/gateway/rawws.c; python3-websockets in tests/tools/floor_client.py; the
 * load generator's wslay client). Every test ends with SIGTERM, which must end the floor
 * with exit status 0 (under the sanitizer build: no report, no leak).
 */
#include "loadreport.h"
#include "rawws.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FRAMES 50
#define WAIT_MS 10000

static pid_t floor_pid = -1;
static int floor_port;

/* Starts gw_floor on a port of its choosing (--port 0) and reads it from its first line. */
static void floor_start(void)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    floor_pid = fork();
    cr_assert_geq(floor_pid, 0);
    if (floor_pid == 0) {
        dup2(p[1], STDOUT_FILENO);
        execl(GW_FLOOR_BINARY, "gw_floor", "--port", "0", "--max-sessions", "64", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    char line[128] = "";
    cr_assert(fgets(line, sizeof(line), f), "gw_floor printed nothing (did it start?)");
    fclose(f); /* it prints nothing else */
    cr_assert_eq(sscanf(line, "gw_floor: listening on 127.0.0.1:%d", &floor_port), 1,
                 "unexpected first line: %s", line);
}

/* SIGTERM: the floor must exit 0. */
static void floor_stop(void)
{
    int st;
    cr_assert_eq(kill(floor_pid, SIGTERM), 0);
    cr_assert_eq(waitpid(floor_pid, &st, 0), floor_pid);
    floor_pid = -1;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gw_floor ended with status %#x", st);
}

static void teardown(void)
{
    if (floor_pid > 0) { /* a test that failed before floor_stop */
        kill(floor_pid, SIGKILL);
        waitpid(floor_pid, NULL, 0);
        floor_pid = -1;
    }
}

TestSuite(floor, .init = floor_start, .fini = teardown, .timeout = 60);

/* Everything the peer sends until it ends the connection (EOF or reset), at most cap
 * bytes; -1 if it does not end it within WAIT_MS. */
static ssize_t read_to_end(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, WAIT_MS) <= 0)
            return -1;
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0) {
            buf[n] = 0;
            return (ssize_t)n; /* EOF or a reset: ended */
        }
        n += (size_t)r;
        if (n == cap - 1)
            n = 0; /* only the end matters past this */
    }
}

static void open_client(rawws *c)
{
    cr_assert_eq(rawws_open(c, floor_port, NULL, WAIT_MS), 0, "handshake failed");
}

/* The next data frame must be (op, p, n). */
static void expect_frame(rawws *c, int op, const void *p, size_t n, const char *who, int i)
{
    int got_op;
    const uint8_t *got;
    size_t got_n;
    cr_assert_eq(rawws_read_frame(c, WAIT_MS, &got_op, &got, &got_n), 0,
                 "%s: frame %d did not come (close code %d)", who, i, c->close_code);
    cr_assert_eq(got_op, op, "%s: frame %d: opcode %d, sent %d", who, i, got_op, op);
    cr_assert_eq(got_n, n, "%s: frame %d: %zu bytes, sent %zu", who, i, got_n, n);
    cr_assert(n == 0 || memcmp(got, p, n) == 0, "%s: frame %d differs from what was sent", who, i);
}

/* The handshake by hand, RFC 6455's own example key: the answer must carry its accept
 * value and the first subprotocol offered. */
static void open_checked(rawws *c)
{
    static const char req[] = "GET /any/path HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                              "Sec-WebSocket-Protocol: chat, superchat\r\n"
                              "Sec-WebSocket-Version: 13\r\n\r\n";
    cr_assert_eq(rawws_connect(c, floor_port, NULL), 0);
    cr_assert_eq(rawws_write(c, req, sizeof(req) - 1, false), 0);
    char head[1024];
    size_t n = 0;
    while (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0) { /* byte by byte: no frame */
        struct pollfd pfd = {c->fd, POLLIN, 0};
        cr_assert_gt(poll(&pfd, 1, WAIT_MS), 0, "no answer to the handshake");
        cr_assert_eq(recv(c->fd, head + n, 1, 0), 1, "the handshake's answer ended early");
        cr_assert_lt(++n, sizeof(head) - 1);
    }
    head[n] = 0;
    cr_assert(strncmp(head, "HTTP/1.1 101 ", 13) == 0, "answer: %s", head);
    cr_assert(strstr(head, "\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
              "wrong or missing accept: %s", head);
    cr_assert(strstr(head, "\r\nSec-WebSocket-Protocol: chat\r\n"), "subprotocol: %s", head);
    c->upgraded = true;
}

/* Frame i's payload: sizes that take every length encoding (7 bits, 16, 64), an empty one,
 * text and binary. */
static size_t make_payload(int i, uint8_t *p, int *op)
{
    size_t n = i == 7 ? 0 : i == 20 ? 70000 : i == 33 ? 65535 : (size_t)(i * 997) % 3000 + 1;
    *op = i % 5 == 0 ? RAWWS_TEXT : RAWWS_BIN;
    for (size_t k = 0; k < n; k++)
        p[k] = *op == RAWWS_TEXT ? (uint8_t)('a' + (i + k) % 26) : (uint8_t)(i * 31 + k * 7);
    return n;
}

Test(floor, three_clients_get_every_frame_in_order)
{
    rawws a, b, c;
    open_client(&a);
    cr_assert_str_eq(a.agreed, "gw.v1", "the subprotocol offered is echoed");
    open_checked(&b);
    open_client(&c);

    static uint8_t sent[FRAMES][70000];
    size_t len[FRAMES];
    int op[FRAMES];
    for (int i = 0; i < FRAMES; i++) {
        len[i] = make_payload(i, sent[i], &op[i]);
        uint8_t *buf = malloc(len[i] + 14);
        size_t fn = rawws_frame(buf, len[i] + 14, op[i], true, sent[i], len[i]);
        cr_assert_eq(rawws_write(&a, buf, fn, false), 0);
        free(buf);
    }
    /* b and c: all 50, in order, each as sent, so the same bytes at both. */
    for (int i = 0; i < FRAMES; i++)
        expect_frame(&b, op[i], sent[i], len[i], "b", i);
    for (int i = 0; i < FRAMES; i++)
        expect_frame(&c, op[i], sent[i], len[i], "c", i);

    /* No echo to the sender: the first frame a gets is the one b sends now, which would
     * stand behind any of a's own. */
    cr_assert_eq(rawws_send(&b, "from b", 6, false), 0);
    expect_frame(&a, RAWWS_BIN, "from b", 6, "a", 0);
    expect_frame(&c, RAWWS_BIN, "from b", 6, "c", FRAMES);

    rawws_close(&a);
    rawws_close(&b);
    rawws_close(&c);
    floor_stop();
}

/* Sends req on a new connection: the floor must answer 400 and end that connection. */
static void expect_refused(const char *req, size_t n, const char *what)
{
    rawws x;
    cr_assert_eq(rawws_connect(&x, floor_port, NULL), 0);
    cr_assert_eq(rawws_write(&x, req, n, false), 0, "%s: write", what);
    static char got[16384];
    ssize_t r = read_to_end(x.fd, got, sizeof(got));
    cr_assert_geq(r, 0, "%s: the connection was not ended", what);
    cr_assert(strncmp(got, "HTTP/1.1 400 ", 13) == 0, "%s: answer %s", what, got);
    rawws_close(&x);
}

Test(floor, a_bad_handshake_closes_only_that_socket)
{
    rawws a, b;
    open_client(&a);
    open_client(&b);

    static const char no_key[] = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n";
    static const char old_version[] = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                      "Connection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
                                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    static const char not_get[] = "POST / HTTP/1.1\r\nUpgrade: websocket\r\n"
                                  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    expect_refused(no_key, sizeof(no_key) - 1, "no key");
    expect_refused(old_version, sizeof(old_version) - 1, "version 8");
    expect_refused(not_get, sizeof(not_get) - 1, "POST");
    static char endless[8192]; /* a head that never ends: refused at 8 KiB */
    memset(endless, 'A', sizeof(endless));
    expect_refused(endless, sizeof(endless), "8 KiB without an end");

    /* The others were not touched, and a newcomer is served. */
    rawws c;
    open_client(&c);
    cr_assert_eq(rawws_send(&a, "still here", 10, false), 0);
    expect_frame(&b, RAWWS_BIN, "still here", 10, "b", 0);
    expect_frame(&c, RAWWS_BIN, "still here", 10, "c", 0);
    rawws_close(&a);
    rawws_close(&b);
    rawws_close(&c);
    floor_stop();
}

/* The next thing from c must be the end of the connection, with close code code. */
static void expect_closed(rawws *c, int code, const char *what)
{
    int op;
    const uint8_t *p;
    size_t n;
    cr_assert_eq(rawws_read_frame(c, WAIT_MS, &op, &p, &n), -1, "%s: not closed", what);
    cr_assert_eq(c->close_code, code, "%s: close code %d", what, c->close_code);
}

Test(floor, an_oversized_or_unmasked_frame_closes_only_that_socket)
{
    rawws a, b, big, bare;
    open_client(&a);
    open_client(&b);
    open_client(&big);
    open_client(&bare);

    /* A header that announces 1 MiB + 1: refused (1009, message too big) before its
     * payload, which is never sent. */
    const uint8_t too_big[14] = {0x82, 0xff, 0, 0, 0, 0, 0, 0x10, 0, 0x01, 1, 2, 3, 4};
    cr_assert_eq(rawws_write(&big, too_big, sizeof(too_big), false), 0);
    expect_closed(&big, 1009, "1 MiB + 1");
    /* An unmasked client frame: a protocol error (1002). */
    const uint8_t unmasked[7] = {0x82, 0x05, 'h', 'e', 'l', 'l', 'o'};
    cr_assert_eq(rawws_write(&bare, unmasked, sizeof(unmasked), false), 0);
    expect_closed(&bare, 1002, "unmasked");

    /* 1 MiB exactly is allowed, and the others are served as before. */
    size_t n = 1u << 20;
    uint8_t *p = malloc(n);
    for (size_t k = 0; k < n; k++)
        p[k] = (uint8_t)(k * 13 + k / 251);
    cr_assert_eq(rawws_send(&a, p, n, false), 0);
    expect_frame(&b, RAWWS_BIN, p, n, "b", 0);
    free(p);
    cr_assert_eq(rawws_send(&b, "after", 5, false), 0);
    expect_frame(&a, RAWWS_BIN, "after", 5, "a", 0);
    rawws_close(&a);
    rawws_close(&b);
    rawws_close(&big);
    rawws_close(&bare);
    floor_stop();
}

Test(floor, an_independent_client_sees_fragments_pings_and_closes_right)
{
    char cmd[1024], out[256] = "";
    snprintf(cmd, sizeof(cmd), "timeout 60 /usr/bin/python3 %s/tests/tools/floor_client.py %d 2>&1",
             GW_SOURCE_DIR, floor_port);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char line[256];
    while (fgets(line, sizeof(line), f))
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s", line);
    int st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "floor_client: ok"),
              "floor_client.py: %s", out);
    floor_stop();
}

/* The load generator's own client (wslay, which checks every frame) as in the benchmark:
 * every frame to every subscriber, none split or merged. */
Test(floor, the_load_generator_gets_every_frame)
{
    char cmd[1024], line[2048], report[2048] = "";
    snprintf(cmd, sizeof(cmd),
             "%s --raw ws://127.0.0.1:%d/ --sessions 20 --group-size 20 --senders 1 "
             "--count 500 --seconds 1 --json --server-pid %d 2>/dev/null",
             GW_LOAD_BINARY, floor_port, (int)floor_pid);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    while (fgets(line, sizeof(line), p))
        if (line[0] == '{')
            snprintf(report, sizeof(report), "%s", line);
    int st = pclose(p);
    cr_log_info("gw_load against the floor: %s", report);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gw_load failed: %s", report);
    unsigned long sends = loadreport_field(report, "sends");
    cr_assert_eq(sends, 500);
    cr_assert_eq(loadreport_field(report, "deliveries"), 20 * sends);
    cr_assert_eq(loadreport_field(report, "gaps"), 0);
    cr_assert_eq(loadreport_field(report, "errors"), 0);
    floor_stop();
}

/* The queue bound: a session that does not read while 40 MiB are sent past it is closed
 * once 8 MiB wait for it (beyond what the kernel's buffers hold), before it got them all;
 * a session that reads gets every one. */
Test(floor, a_reader_that_does_not_read_is_closed_past_8_MiB_queued)
{
    rawws a, reader, stuck;
    open_client(&a);
    open_client(&reader);
    open_client(&stuck);
    size_t n = 1u << 20;
    uint8_t *p = malloc(n);
    for (int i = 0; i < 40; i++) { /* one at a time: the reader never falls behind */
        memset(p, 'a' + i % 26, n);
        cr_assert_eq(rawws_send(&a, p, n, false), 0, "send %d", i);
        expect_frame(&reader, RAWWS_BIN, p, n, "reader", i);
    }
    free(p);
    int got = 0, op;
    const uint8_t *f;
    size_t fn;
    while (rawws_read_frame(&stuck, WAIT_MS, &op, &f, &fn) == 0)
        got++;
    cr_assert_lt(got, 40, "the stuck session was not closed (it got all %d frames)", got);
    cr_log_info("the stuck session got %d of 40 frames of 1 MiB before it was closed", got);
    cr_assert_eq(rawws_send(&reader, "on", 2, false), 0);
    expect_frame(&a, RAWWS_BIN, "on", 2, "a", 0);
    rawws_close(&a);
    rawws_close(&reader);
    rawws_close(&stuck);
    floor_stop();
}

/* --max-sessions (64 here): the 65th connection is closed at once, the others served. */
Test(floor, connections_past_max_sessions_are_closed)
{
    static rawws c[64];
    for (int i = 0; i < 64; i++)
        cr_assert_eq(rawws_open(&c[i], floor_port, NULL, WAIT_MS), 0, "client %d", i);
    rawws extra;
    cr_assert_eq(rawws_connect(&extra, floor_port, NULL), 0); /* the kernel accepts it */
    cr_assert_neq(rawws_handshake(&extra, floor_port, false, WAIT_MS), 0,
                  "the 65th session was upgraded");
    rawws_close(&extra);
    cr_assert_eq(rawws_send(&c[0], "all", 3, false), 0);
    expect_frame(&c[63], RAWWS_BIN, "all", 3, "client 63", 0);
    for (int i = 0; i < 64; i++)
        rawws_close(&c[i]);
    floor_stop();
}
