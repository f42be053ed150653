/*
 * The gateway's HTTP side over a raw socket, as RFC 9110 and 9112 want it: a reason
 * phrase on every status line, the connection closed after an answer that says
 * `Connection: close` (and after a request that asks for it), `Retry-After` on 429,
 * and a declared body over the limit refused with 413 before any of it is read.
 */
#include "gwfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gwfx f;

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(http, .fini = teardown);

static void start(const char *const *more)
{
    const char *const base[] = {"--api-key-file", gwfx_api_key_file(), "--demo", NULL};
    gwfx_start_with(&f, NULL, base, more);
}

#define AUTH "Authorization: Bearer " GWFX_API_KEY "\r\n"

/* One request on its own connection: its first answer. */
static char *ask(const char *request)
{
    bool closed;
    return gwfx_raw_http(&f, request, 1, 5000, &closed);
}

/* Requests on one connection, read until the gateway closes it or 3 s pass (a keep-alive
 * connection stays open for longer: 10 s here). */
static char *ask_to_end(const char *request, bool *closed)
{
    return gwfx_raw_http(&f, request, 0, 3000, closed);
}

static bool starts(const char *out, const char *line)
{
    return strncmp(out, line, strlen(line)) == 0;
}

/* How many responses are in out. */
static int responses(const char *out)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, "HTTP/1.1 ")); p++)
        n++;
    return n;
}

Test(http, every_status_line_has_its_reason_phrase, .timeout = 60)
{
    static const char *const more[] = {"--api-rate", "1", "--rate-burst", "1", NULL};
    start(more);
    static const struct {
        const char *request, *line;
    } cases[] = {
        {"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", "HTTP/1.1 200 OK\r\n"},
        {"PUT /api/v1/groups/g/members/ann HTTP/1.1\r\nHost: t\r\n" AUTH
         "Content-Length: 0\r\n\r\n",
         "HTTP/1.1 201 Created\r\n"},
        /* over --api-rate 1 (the bucket is empty after the 201) */
        {"GET /api/v1/users/ann/groups HTTP/1.1\r\nHost: t\r\n" AUTH "\r\n",
         "HTTP/1.1 429 Too Many Requests\r\n"},
        {"GET /api/v1/users/ann/groups HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer no\r\n\r\n",
         "HTTP/1.1 401 Unauthorized\r\n"},
        {"GET /no-such-file HTTP/1.1\r\nHost: t\r\n\r\n", "HTTP/1.1 404 Not Found\r\n"},
        {"POST /demo/login HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}",
         "HTTP/1.1 400 Bad Request\r\n"},
        {"POST /demo/login HTTP/1.1\r\nHost: t\r\nContent-Length: 9999\r\n\r\n",
         "HTTP/1.1 413 Content Too Large\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = ask(cases[i].request);
        cr_expect(starts(out, cases[i].line), "case %zu: expected %.*s, got: %.80s", i,
                  (int)strlen(cases[i].line) - 2, cases[i].line, out);
        free(out);
    }
}

Test(http, a_429_says_when_to_try_again, .timeout = 60)
{
    static const char *const more[] = {"--api-rate", "1", "--rate-burst", "1", NULL};
    start(more);
    const char *get = "GET /api/v1/users/ann/groups HTTP/1.1\r\nHost: t\r\n" AUTH "\r\n";
    char *first = ask(get);
    cr_assert(starts(first, "HTTP/1.1 200 OK\r\n"), "%s", first);
    cr_assert_null(strstr(first, "retry-after:"), "no Retry-After on a 200: %s", first);
    free(first);
    char *out = ask(get);
    cr_assert(starts(out, "HTTP/1.1 429 "), "%s", out);
    cr_assert(strstr(out, "\r\nretry-after: 1\r\n"), "a whole second at --api-rate 1: %s", out);
    cr_assert(strstr(out, "\"retry_ms\":"), "and retry_ms in the body: %s", out);
    free(out);
}

Test(http, an_answer_that_says_close_closes_the_connection, .timeout = 60)
{
    start(NULL);
    /* A PUT without Content-Length: its body cannot be told from the next request, so the
     * answer says close, and the request sent behind it is not answered. */
    bool closed;
    char *out = ask_to_end("PUT /api/v1/groups/g/members/ann HTTP/1.1\r\nHost: t\r\n" AUTH "\r\n"
                           "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
                           &closed);
    cr_assert(starts(out, "HTTP/1.1 201 Created\r\n"), "%s", out);
    cr_assert(strstr(out, "\r\nconnection: close\r\n"), "%s", out);
    cr_assert(closed, "the gateway closed the connection after an answer that says close");
    cr_assert_eq(responses(out), 1, "the request behind it is not answered: %s", out);
    free(out);
    /* A POST to a path that takes no body: answered without reading it, and closed. */
    out = ask_to_end("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: 42\r\n\r\n", &closed);
    cr_assert(starts(out, "HTTP/1.1 404 Not Found\r\n"), "%s", out);
    cr_assert(strstr(out, "\r\nconnection: close\r\n") && closed, "%s", out);
    free(out);
}

Test(http, a_request_that_says_close_is_answered_then_closed, .timeout = 60)
{
    start(NULL);
    bool closed;
    char *out = ask_to_end("GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
                           "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
                           &closed);
    cr_assert(starts(out, "HTTP/1.1 200 OK\r\n"), "%s", out);
    cr_assert(closed, "closed after the answer");
    cr_assert_eq(responses(out), 1, "nothing after close is answered: %s", out);
    free(out);
    /* Keep-alive is the default: two requests on one connection, both answered, open. */
    out = ask_to_end(
        "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
        &closed);
    cr_assert_eq(responses(out), 2, "%s", out);
    cr_assert_not(closed, "a keep-alive connection stays open");
    free(out);
}

Test(http, a_declared_body_over_the_limit_gets_413_before_any_of_it_is_read, .timeout = 60)
{
    static const char *const more[] = {"--max-body", "1000", NULL};
    start(more);
    /* Only the headers are sent: the answer cannot have waited for the body. */
    bool closed;
    char *out = ask_to_end("POST /api/v1/groups/g/messages HTTP/1.1\r\nHost: t\r\n" AUTH
                           "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n",
                           &closed);
    cr_assert(starts(out, "HTTP/1.1 413 Content Too Large\r\n"), "%s", out);
    cr_assert(strstr(out, "\"error\":\"too_large\""), "%s", out);
    cr_assert(strstr(out, "\r\nconnection: close\r\n") && closed, "%s", out);
    free(out);
    out = ask_to_end("POST /demo/login HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n",
                     &closed);
    cr_assert(starts(out, "HTTP/1.1 413 Content Too Large\r\n") && closed, "%s", out);
    free(out);
    /* A body within the limit is read and stored as before. */
    free(ask("PUT /api/v1/groups/g/members/ann HTTP/1.1\r\nHost: t\r\n" AUTH
             "Content-Length: 0\r\n\r\n"));
    const char *ok = "POST /api/v1/groups/g/messages HTTP/1.1\r\nHost: t\r\n" AUTH
                     "Content-Type: application/json\r\nContent-Length: 42\r\n\r\n"
                     "{\"from\":\"ann\",\"cid\":\"c1\",\"body\":\"0123456\"}";
    out = ask(ok);
    cr_assert(starts(out, "HTTP/1.1 200 OK\r\n"), "%s", out);
    free(out);
}

/* A GET of prefix, n bytes of 'a', then suffix, with the API key. */
static char *long_get(const char *prefix, size_t n, const char *suffix, const char *headers)
{
    size_t len = strlen(prefix) + n + strlen(suffix) + strlen(headers) + 256;
    char *req = malloc(len);
    cr_assert_not_null(req);
    int k = snprintf(req, len, "GET %s", prefix);
    memset(req + k, 'a', n);
    snprintf(req + k + n, len - (size_t)k - n, "%s HTTP/1.1\r\nHost: t\r\n" AUTH "%s\r\n", suffix,
             headers);
    return req;
}

Test(http, a_url_over_the_limit_gets_414_however_long_it_is, .timeout = 60)
{
    start(NULL);
    free(ask("PUT /api/v1/groups/g/members/ann HTTP/1.1\r\nHost: t\r\n" AUTH
             "Content-Length: 0\r\n\r\n"));
    /* Over the limit (2,048 bytes of path and query), within libwebsockets' header buffer
     * (4 KiB) and far past it: a path, a query, a page, a WebSocket upgrade. */
    static const struct {
        const char *prefix, *suffix, *headers;
        size_t n;
        bool api;
    } cases[] = {
        {"/api/v1/groups/", "/messages", "", 3000, true},
        {"/api/v1/groups/", "/messages", "", 5000, true},
        {"/api/v1/groups/g/messages?after=", "", "", 5000, true},
        {"/api/v1/groups/g/messages?limit=1&x=", "&y=1", "", 100000, true},
        {"/", "", "", 5000, false},
        {"/ws?", "",
         "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
         "Sec-WebSocket-Protocol: gw.v1\r\n",
         5000, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *req = long_get(cases[i].prefix, cases[i].n, cases[i].suffix, cases[i].headers);
        bool closed;
        char *out = ask_to_end(req, &closed);
        /* A request line cut short is taken as HTTP/1.0 by libwebsockets: either version. */
        cr_expect(starts(out, "HTTP/1.") && starts(out + 8, " 414 URI Too Long\r\n"),
                  "case %zu (%zu bytes): %.300s", i, cases[i].n, out);
        if (cases[i].api)
            cr_expect(strstr(out, "\"error\":\"bad_field\"") && strstr(out, "2048"),
                      "case %zu: the API's JSON error, naming the limit: %.500s", i, out);
        else
            cr_expect(strstr(out, "text/plain") && strstr(out, "2048"), "case %zu: %.500s", i, out);
        cr_expect(closed, "case %zu: closed after the 414", i);
        free(out);
        free(req);
    }
    /* At the limit it is served; one byte more is not. */
    const char *page = "/api/v1/groups/g/messages?limit=1&pad=";
    char *req = long_get(page, 2048 - strlen(page), "", "");
    char *out = ask(req);
    cr_assert(starts(out, "HTTP/1.1 200 OK\r\n"), "2,048 bytes: %.300s", out);
    free(out);
    free(req);
    req = long_get(page, 2049 - strlen(page), "", "");
    out = ask(req);
    cr_assert(starts(out, "HTTP/1.1 414 URI Too Long\r\n"), "2,049 bytes: %.300s", out);
    free(out);
    free(req);
    /* The gateway goes on serving. */
    out = ask("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert(starts(out, "HTTP/1.1 200 OK\r\n"), "%s", out);
    free(out);
}
