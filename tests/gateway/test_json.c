/*
 * The JSON subprotocol (gw.v1.json, docs/PROTOCOL.md) with a generic WebSocket client:
 * raw text frames of JSON written by hand (rawws.c, no protocol library), beside a
 * MessagePack session in the same group. They see the same messages, binary bodies
 * included, and a JSON session gets the protocol's errors and limits.
 */
#include "gwfx.h"
#include "rawws.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

GWFX_SUITE(json, f, gwfx_start, 60);

/* A JSON session: its socket, and the messages of a batch not handed out yet. */
typedef struct jconn {
    rawws ws;
    json_t *pending;
} jconn;

static void jopen(jconn *c)
{
    cr_assert_eq(rawws_connect(&c->ws, f.port, NULL), 0);
    c->ws.subprotocol = "gw.v1.json";
    cr_assert_eq(rawws_handshake(&c->ws, f.port, false, GWFX_WAIT), 0);
    cr_assert_str_eq(c->ws.agreed, "gw.v1.json");
    c->pending = json_array();
}

static void jclose(jconn *c)
{
    rawws_close(&c->ws);
    json_decref(c->pending);
}

static void jsend(jconn *c, const char *text)
{
    cr_assert_eq(rawws_send_text(&c->ws, text), 0);
}

/* The next server message (a batch's one at a time); owned by the caller. */
static json_t *jnext(jconn *c)
{
    if (json_array_size(c->pending) == 0) {
        int op;
        const uint8_t *p;
        size_t n;
        int rc = rawws_read_frame(&c->ws, GWFX_WAIT, &op, &p, &n);
        cr_assert_eq(rc, 0, "no frame (%d, close %d)", rc, c->ws.close_code);
        cr_assert_eq(op, RAWWS_TEXT, "a JSON session gets text frames");
        json_error_t err;
        json_t *j = json_loadb((const char *)p, n, 0, &err);
        cr_assert_not_null(j, "not JSON: %.*s", (int)n, p);
        if (json_is_array(j))
            json_array_extend(c->pending, j);
        else
            json_array_append(c->pending, j);
        json_decref(j);
    }
    json_t *m = json_incref(json_array_get(c->pending, 0));
    json_array_remove(c->pending, 0);
    return m;
}

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_int_t ival(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* The next message, which must be of type t. */
static json_t *jexpect(jconn *c, const char *t)
{
    json_t *m = jnext(c);
    char *text = json_dumps(m, JSON_COMPACT);
    cr_assert_str_eq(sval(m, "t"), t, "expected %s, got %s", t, text);
    free(text);
    return m;
}

/* Opens a JSON session and signs it in as uid. */
static void jlogin(jconn *c, const char *uid)
{
    jopen(c);
    char *tok = gwfx_token(uid);
    char req[2048];
    snprintf(req, sizeof(req), "{\"t\":\"hello\",\"rid\":1,\"token\":\"%s\"}", tok);
    free(tok);
    jsend(c, req);
    json_t *w = jexpect(c, "welcome");
    cr_assert_str_eq(sval(w, "uid"), uid);
    cr_assert_eq(ival(w, "rid"), 1);
    json_decref(w);
}

Test(json, json_and_msgpack_sessions_see_the_same_messages)
{
    jconn alice;
    jlogin(&alice, "alice");
    jsend(&alice, "{\"t\":\"join\",\"rid\":2,\"gid\":\"g\"}");
    json_decref(jexpect(&alice, "joined"));
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    gwfx_join(bob, "g");

    /* Text from JSON to MessagePack. */
    jsend(&alice,
          "{\"t\":\"send\",\"rid\":3,\"gid\":\"g\",\"cid\":\"c1\",\"body\":\"hi from json\"}");
    json_t *m = jexpect(&alice, "sent");
    cr_assert_eq(ival(m, "mid"), 1);
    cr_assert_eq(ival(m, "rid"), 3);
    cr_assert_str_eq(sval(m, "cid"), "c1");
    json_decref(m);
    pr_event ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 1);
    cr_assert(gwfx_slice_is(ev.msg.from, "alice"));
    cr_assert(!ev.msg.body.is_bin);
    cr_assert(gwfx_slice_is(ev.msg.body.data, "hi from json"));

    /* Text from MessagePack to JSON. */
    cr_assert_eq(gwfx_send_msg(bob, "g", "b1", "hi back"), 2);
    m = jexpect(&alice, "msg");
    cr_assert_eq(ival(m, "mid"), 2);
    cr_assert_str_eq(sval(m, "from"), "bob");
    cr_assert_str_eq(sval(m, "body"), "hi back");
    cr_assert(ival(m, "ts") > 0);
    json_decref(m);

    /* A binary body, as {"base64": ...}: bytes on the MessagePack side. */
    jsend(&alice, "{\"t\":\"send\",\"rid\":4,\"gid\":\"g\",\"cid\":\"c2\","
                  "\"body\":{\"base64\":\"AAEC/w==\"}}");
    json_decref(jexpect(&alice, "sent"));
    ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 3);
    cr_assert(ev.msg.body.is_bin);
    cr_assert_eq(ev.msg.body.data.n, 4);
    cr_assert_eq(memcmp(ev.msg.body.data.p, "\x00\x01\x02\xff", 4), 0);

    /* An empty body is an empty string both ways (not an empty binary). */
    cr_assert_eq(gwfx_send_msg(bob, "g", "b2", ""), 4);
    m = jexpect(&alice, "msg");
    cr_assert(json_is_string(json_object_get(m, "body")), "an empty text body stays text");
    cr_assert_str_eq(sval(m, "body"), "");
    json_decref(m);

    /* A page in JSON: all of them, the binary one in base64 again. */
    jsend(&alice, "{\"t\":\"pull\",\"rid\":5,\"gid\":\"g\",\"after\":0}");
    m = jexpect(&alice, "page");
    json_t *msgs = json_object_get(m, "msgs");
    cr_assert_eq(json_array_size(msgs), 4);
    cr_assert_str_eq(sval(json_array_get(msgs, 0), "body"), "hi from json");
    cr_assert_str_eq(sval(json_array_get(msgs, 1), "from"), "bob");
    cr_assert_str_eq(sval(json_object_get(json_array_get(msgs, 2), "body"), "base64"), "AAEC/w==");
    json_decref(m);

    /* An ack in JSON is stored: a new session's welcome shows it. */
    jsend(&alice, "{\"t\":\"ack\",\"acks\":{\"g\":4}}");
    jsend(&alice, "{\"t\":\"ping\",\"rid\":6}");
    json_decref(jexpect(&alice, "pong"));
    usleep(600 * 1000); /* the ack flush (200 ms) */
    jconn again;
    jopen(&again);
    char *tok = gwfx_token("alice");
    char req[2048];
    snprintf(req, sizeof(req), "{\"t\":\"hello\",\"token\":\"%s\"}", tok);
    free(tok);
    jsend(&again, req);
    m = jexpect(&again, "welcome");
    json_t *g = json_array_get(json_object_get(m, "groups"), 0);
    cr_assert_str_eq(sval(g, "gid"), "g");
    cr_assert_eq(ival(g, "ack"), 4);
    cr_assert_eq(ival(g, "unread"), 0);
    json_decref(m);
    jclose(&again);
    jclose(&alice);
}

/* The next message must be an err with this code. */
static void expect_err(jconn *c, const char *code)
{
    json_t *e = jexpect(c, "err");
    cr_assert_str_eq(sval(e, "code"), code, "%s: %s", code, sval(e, "msg"));
    json_decref(e);
}

Test(json, a_json_session_gets_the_protocols_errors_and_limits)
{
    jconn c;
    jlogin(&c, "carol");
    static const struct {
        const char *frame, *code;
    } refused[] = {
        {"{\"t\":\"send\",\"gid\":\"nope\",\"cid\":\"x\",\"body\":\"x\"}", "not_member"},
        {"{\"t\":\"dance\"}", "bad_type"},
        {"{\"t\":\"join\",\"gid\":\"not an id!\"}", "bad_field"},
        {"[1, 2", "bad_frame"},
        {"{\"t\":\"join\",\"gid\":\"a\",\"gid\":\"b\"}", "bad_frame"}, /* duplicate keys */
        {"{\"t\":\"send\",\"gid\":\"a\",\"cid\":\"y\",\"body\":{\"base64\":\"%%%\"}}", "bad_frame"},
        /* Base64 with anything but its alphabet and final padding (OpenSSL alone would take
         * the newlines and count them as bytes). */
        {"{\"t\":\"send\",\"gid\":\"a\",\"cid\":\"y\",\"body\":{\"base64\":\"AA==\\n\\n\\n\\n\"}}",
         "bad_frame"},
        {"{\"t\":\"send\",\"gid\":\"a\",\"cid\":\"y\",\"body\":{\"base64\":\"A=AA\"}}",
         "bad_frame"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        jsend(&c, refused[i].frame);
        json_t *e = jexpect(&c, "err");
        cr_assert_str_eq(sval(e, "code"), refused[i].code, "%s: %s: %s", refused[i].frame,
                         refused[i].code, sval(e, "msg"));
        json_decref(e);
    }
    cr_assert_eq(rawws_send(&c.ws, "\x81\xa1t\xa4ping", 7, false), 0);
    expect_err(&c, "bad_frame"); /* a binary frame on a JSON session */
    /* A body over max_body (64 KiB) is too_large, as it is in MessagePack. */
    jsend(&c, "{\"t\":\"join\",\"rid\":9,\"gid\":\"big\"}");
    json_decref(jexpect(&c, "joined"));
    size_t n = 64 * 1024 + 1;
    char *big = malloc(n + 128);
    int k = snprintf(big, n + 128, "{\"t\":\"send\",\"gid\":\"big\",\"cid\":\"z\",\"body\":\"");
    memset(big + k, 'a', n);
    strcpy(big + k + n, "\"}");
    jsend(&c, big);
    free(big);
    expect_err(&c, "too_large");
    jclose(&c);

    /* Before hello, something that is not JSON closes with 4001. */
    jconn d;
    jopen(&d);
    jsend(&d, "hello?");
    int op;
    const uint8_t *p;
    size_t len;
    while (rawws_read_frame(&d.ws, GWFX_WAIT, &op, &p, &len) == 0)
        ;
    cr_assert_eq(d.ws.close_code, 4001);
    jclose(&d);
}

Test(json, a_frame_jansson_refuses_is_refused_for_what_is_wrong_with_it)
{
    jconn c;
    jlogin(&c, "dora");
    jsend(&c, "{\"t\":\"join\",\"rid\":2,\"gid\":\"nul\"}");
    json_decref(jexpect(&c, "joined"));
    /* A JSON object with \u0000 in a string (jansson takes none): said so, and where. */
    jsend(&c, "{\"t\":\"send\",\"rid\":3,\"gid\":\"nul\",\"cid\":\"n1\",\"body\":\"a\\u0000b\"}");
    json_t *e = jexpect(&c, "err");
    cr_assert_str_eq(sval(e, "code"), "bad_frame");
    const char *msg = sval(e, "msg");
    cr_assert(strstr(msg, "\\u0000") && strstr(msg, "NUL") && strstr(msg, "line 1, column "), "%s",
              msg);
    json_decref(e);
    /* Malformed JSON: jansson's words and where. */
    jsend(&c, "{\"t\":\"join\",\"gid\":}");
    e = jexpect(&c, "err");
    msg = sval(e, "msg");
    cr_assert_str_eq(sval(e, "code"), "bad_frame");
    cr_assert(strstr(msg, "not valid JSON") && strstr(msg, "line 1, column 19"), "%s", msg);
    json_decref(e);
    /* Nothing was stored, and the session goes on. */
    jsend(&c, "{\"t\":\"send\",\"rid\":4,\"gid\":\"nul\",\"cid\":\"n2\",\"body\":\"ok\"}");
    e = jexpect(&c, "sent");
    cr_assert_eq(ival(e, "mid"), 1);
    json_decref(e);
    jclose(&c);
}
