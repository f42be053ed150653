/*
 * The server API (/api/v1/, docs/API.md) over real HTTP (curl) against the real gateway:
 * keys, every endpoint and its errors, and that what it does reaches the sessions (a
 * message pushed, a member added or removed, sessions closed), also from another node.
 */
#include "gwfx.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY GWFX_API_KEY

static gwfx f, g2;

static void teardown(void)
{
    gwfx_cleanup(&g2);
    gwfx_cleanup(&f);
}

TestSuite(api, .fini = teardown);

/* Starts the gateway with the API on (one key, and a comment line in the file). */
static void start_api(gwfx *x, const char *const *more)
{
    const char *const base[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start_with(x, NULL, base, more);
}

#define call gwfx_api

static bool has(const char *body, const char *part)
{
    return strstr(body, part) != NULL;
}

Test(api, is_off_without_keys_and_refuses_wrong_ones, .timeout = 60)
{
    gwfx_start(&f, NULL);
    int status;
    char *b = gwfx_call(&f, "GET", "/api/v1/users/alice/groups", KEY, NULL, &status);
    cr_assert_eq(status, 404, "%d %s", status, b);
    cr_assert(has(b, "--api-key-file"), "%s", b);
    free(b);
    gwfx_cleanup(&f);

    start_api(&f, NULL);
    b = gwfx_call(&f, "GET", "/api/v1/users/alice/groups", NULL, NULL, &status);
    cr_assert_eq(status, 401, "no key: %d", status);
    cr_assert(has(b, "\"error\":\"unauthorized\""), "%s", b);
    free(b);
    b = gwfx_call(&f, "GET", "/api/v1/users/alice/groups", "test-api-key-0123456789abcdeX", NULL,
                  &status);
    cr_assert_eq(status, 401, "a wrong key: %d", status);
    free(b);
    b = gwfx_call(&f, "GET", "/api/v1/users/alice/groups", KEY, NULL, &status);
    cr_assert_eq(status, 200, "the key: %d %s", status, b);
    free(b);
}

Test(api, a_posted_message_is_stored_once_and_pushed, .timeout = 60)
{
    start_api(&f, NULL);
    gwc_conn *a = gwfx_login(&f, "alice", NULL);
    gwfx_join(a, "news");
    /* From a sender that is no member: a bot of the application. */
    const char *msg = "{\"from\":\"bot\",\"cid\":\"n-1\",\"body\":\"the server says h\\u00e9\"}";
    char *b = call(&f, "POST", "/api/v1/groups/news/messages", msg, 200);
    cr_assert(has(b, "\"mid\":1") && has(b, "\"duplicate\":false"), "%s", b);
    free(b);
    pr_event ev = gwfx_expect(a, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 1);
    cr_assert(gwfx_slice_is(ev.msg.from, "bot"));
    cr_assert(gwfx_slice_is(ev.msg.body.data, "the server says h\xc3\xa9"));
    /* The same (from, cid) again: the first answer, nothing stored or pushed. */
    b = call(&f, "POST", "/api/v1/groups/news/messages", msg, 200);
    cr_assert(has(b, "\"mid\":1") && has(b, "\"duplicate\":true"), "%s", b);
    free(b);
    cr_assert(gwfx_quiet(a, 300), "pushed once");
    /* The page as JSON, after and before. */
    uint64_t m2 = gwfx_send_msg(a, "news", "a-1", "from alice");
    cr_assert_eq(m2, 2);
    b = call(&f, "GET", "/api/v1/groups/news/messages?after=0&limit=10", NULL, 200);
    cr_assert(has(b, "\"last_mid\":2") && has(b, "\"more\":false"), "%s", b);
    cr_assert(has(b, "\"from\":\"bot\"") && has(b, "\"from\":\"alice\"") &&
                  has(b, "\"body\":\"from alice\""),
              "%s", b);
    free(b);
    b = call(&f, "GET", "/api/v1/groups/news/messages?before=2&limit=1", NULL, 200);
    cr_assert(has(b, "\"mid\":1") && !has(b, "\"mid\":2") && has(b, "\"more\":false"), "%s", b);
    free(b);
}

Test(api, members_are_added_and_removed_and_their_sessions_follow, .timeout = 60)
{
    static const char *const closed[] = {"--closed-groups", NULL};
    start_api(&f, closed);
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    /* PUT makes the group (whatever --closed-groups says) and the member. */
    char *b = call(&f, "PUT", "/api/v1/groups/team/members/bob", NULL, 201);
    cr_assert(has(b, "\"created\":true") && has(b, "\"joined\":true"), "%s", b);
    free(b);
    b = call(&f, "PUT", "/api/v1/groups/team/members/bob", NULL, 200);
    cr_assert(has(b, "\"joined\":false"), "again: nothing changes: %s", b);
    free(b);
    /* Bob's open session is a member at once: it sends, and gets the group's pushes. */
    cr_assert_eq(gwfx_send_msg(bob, "team", "b-1", "hi"), 1);
    b = call(&f, "POST", "/api/v1/groups/team/messages",
             "{\"from\":\"system\",\"cid\":\"s-1\",\"body\":\"welcome\"}", 200);
    free(b);
    pr_event ev = gwfx_expect(bob, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 2);
    b = call(&f, "GET", "/api/v1/users/bob/groups", NULL, 200);
    cr_assert(has(b, "\"gid\":\"team\"") && has(b, "\"last_mid\":2") && has(b, "\"unread\":2"),
              "%s", b);
    free(b);
    /* DELETE: bob's session is told (`left` without a rid), gets no more pushes, and a
     * send is refused. */
    b = call(&f, "DELETE", "/api/v1/groups/team/members/bob", NULL, 200);
    free(b);
    ev = gwfx_expect(bob, PR_EV_LEFT);
    cr_assert(gwfx_slice_is(ev.gid, "team") && !ev.has_rid);
    b = call(&f, "POST", "/api/v1/groups/team/messages",
             "{\"from\":\"system\",\"cid\":\"s-2\",\"body\":\"bye\"}", 200);
    free(b);
    cr_assert(gwfx_quiet(bob, 300), "no push after the removal");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, 9, gwfx_sl("team"), gwfx_sl("b-2"), (pr_body){gwfx_sl("x"), false});
    ev = gwfx_request(bob, &sb, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_NOT_MEMBER);
    msgpack_sbuffer_destroy(&sb);
    b = call(&f, "DELETE", "/api/v1/groups/team/members/bob", NULL, 404);
    cr_assert(has(b, "not_member"), "%s", b);
    free(b);
}

Test(api, members_are_listed_page_by_page, .timeout = 60)
{
    start_api(&f, NULL);
    gwc_conn *m3 = gwfx_login(&f, "m3", NULL); /* online */
    for (int i = 1; i <= 5; i++) {
        char path[80];
        snprintf(path, sizeof(path), "/api/v1/groups/club/members/m%d", i);
        /* One with a body it does not need: still done once, and answered once. */
        free(call(&f, "PUT", path, i == 5 ? "{\"ignored\":true}" : NULL, 201));
    }
    free(call(&f, "POST", "/api/v1/groups/club/messages",
              "{\"from\":\"bot\",\"cid\":\"c1\",\"body\":\"one\"}", 200));
    gwfx_expect(m3, PR_EV_MSG);
    char *b = call(&f, "GET", "/api/v1/groups/club/members?limit=3", NULL, 200);
    cr_assert(has(b, "\"uid\":\"m1\"") && has(b, "\"uid\":\"m3\"") && !has(b, "\"m4\""), "%s", b);
    cr_assert(has(b, "\"next\":\"m3\"") && has(b, "\"unread\":1"), "%s", b);
    cr_assert(has(b, "\"uid\":\"m3\",\"ack\":0,\"unread\":1,\"online\":true"), "%s", b);
    free(b);
    b = call(&f, "GET", "/api/v1/groups/club/members?limit=3&after=m3", NULL, 200);
    cr_assert(has(b, "\"uid\":\"m4\"") && has(b, "\"uid\":\"m5\"") && has(b, "\"next\":null"), "%s",
              b);
    cr_assert(has(b, "\"online\":false"), "%s", b);
    free(b);
    b = call(&f, "GET", "/api/v1/groups/nope/members", NULL, 404);
    free(b);
    b = call(&f, "GET", "/api/v1/groups/club/members?limit=5000", NULL, 400);
    cr_assert(has(b, "\"field\":\"limit\""), "%s", b);
    free(b);
}

Test(api, sessions_of_a_user_are_closed, .timeout = 60)
{
    start_api(&f, NULL);
    gwc_conn *k1 = gwfx_login(&f, "carol", NULL);
    gwc_conn *k2 = gwfx_login(&f, "carol", NULL);
    gwc_conn *other = gwfx_login(&f, "dave", NULL);
    char *b = call(&f, "DELETE", "/api/v1/users/carol/sessions", NULL, 200);
    cr_assert(has(b, "\"closed\":2"), "%s", b);
    free(b);
    cr_assert_eq(gwfx_closed(k1), 4003);
    cr_assert_eq(gwfx_closed(k2), 4003);
    cr_assert(gwfx_quiet(other, 200) && gwc_is_open(other), "another user's session stays");
}

Test(api, bad_requests_name_the_field_and_store_nothing, .timeout = 60)
{
    start_api(&f, NULL);
    gwc_conn *a = gwfx_login(&f, "alice", NULL);
    gwfx_join(a, "g");
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *has;
    } cases[] = {
        {"POST", "/api/v1/groups/g/messages", "{\"cid\":\"c\",\"body\":\"x\"}", 400,
         "\"field\":\"from\""},
        {"POST", "/api/v1/groups/g/messages", "{\"from\":\"a b\",\"cid\":\"c\",\"body\":\"x\"}",
         400, "\"field\":\"from\""},
        {"POST", "/api/v1/groups/g/messages", "{\"from\":\"bot\",\"body\":\"x\"}", 400,
         "\"field\":\"cid\""},
        {"POST", "/api/v1/groups/g/messages", "{\"from\":\"bot\",\"cid\":\"c\",\"body\":7}", 400,
         "\"field\":\"body\""},
        {"POST", "/api/v1/groups/g/messages", "not json", 400, "bad_frame"},
        {"POST", "/api/v1/groups/no%20such/messages", "{}", 400, "\"field\":\"gid\""},
        {"POST", "/api/v1/groups/nogroup/messages",
         "{\"from\":\"bot\",\"cid\":\"c\",\"body\":\"x\"}", 404, "no_group"},
        {"GET", "/api/v1/groups/g/messages?after=1&before=3", NULL, 400, "\"field\":"},
        {"GET", "/api/v1/groups/g/messages?limit=0", NULL, 400, "\"field\":\"limit\""},
        {"GET", "/api/v1/groups/g/messages?after=x", NULL, 400, "\"field\":\"after\""},
        {"GET", "/api/v1/groups/nogroup/messages", NULL, 404, "no_group"},
        {"PUT", "/api/v1/groups/g/members/a%20b", NULL, 400, "\"field\":\"uid\""},
        {"PUT", "/api/v1/groups/g/messages", NULL, 405, "bad_type"},
        {"GET", "/api/v1/nothing/here", NULL, 404, "not_found"},
        {"GET", "/api/v1/groups/g/members/alice/extra/more", NULL, 404, "not_found"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *b = call(&f, cases[i].method, cases[i].path, cases[i].body, cases[i].status);
        cr_assert(has(b, cases[i].has), "%s %s: %s", cases[i].method, cases[i].path, b);
        cr_assert(has(b, "\"message\":"), "%s", b);
        free(b);
    }
    /* Too large: a body over --max-body. */
    size_t big = 70 * 1024;
    char *json = malloc(big + 64);
    int n = snprintf(json, 64, "{\"from\":\"bot\",\"cid\":\"big\",\"body\":\"");
    memset(json + n, 'x', big);
    strcpy(json + n + big, "\"}");
    char *b = call(&f, "POST", "/api/v1/groups/g/messages", json, 413);
    cr_assert(has(b, "too_large"), "%s", b);
    free(b);
    free(json);
    /* Nothing was stored by any of them. */
    b = call(&f, "GET", "/api/v1/groups/g/messages", NULL, 200);
    cr_assert(has(b, "\"last_mid\":0") && has(b, "\"messages\":[]"), "%s", b);
    free(b);
    cr_assert(gwfx_quiet(a, 200));
}

Test(api, a_member_added_through_one_node_gets_pushes_on_another, .timeout = 60)
{
    if (!pgfx_on())
        cr_skip_test("PostgreSQL only (the suite's PostgreSQL pass)");
    start_api(&f, NULL);
    gwfx_start_beside(&g2, &f, NULL);
    gwc_conn *erin = gwfx_login(&g2, "erin", NULL); /* on node 2 */
    char *b = call(&f, "PUT", "/api/v1/groups/ops/members/erin", NULL, 201);
    free(b);
    b = call(&f, "POST", "/api/v1/groups/ops/messages",
             "{\"from\":\"pager\",\"cid\":\"p-1\",\"body\":\"disk full\"}", 200);
    free(b);
    pr_event ev = gwfx_expect(erin, PR_EV_MSG);
    cr_assert_eq(ev.msg.mid, 1);
    cr_assert(gwfx_slice_is(ev.msg.from, "pager"));
    /* Signed out through node 1: her session on node 2 is closed too. */
    b = call(&f, "DELETE", "/api/v1/users/erin/sessions", NULL, 200);
    cr_assert(has(b, "\"closed\":0"), "none on the node that answered: %s", b);
    free(b);
    cr_assert_eq(gwfx_closed(erin), 4003);
}

/* Signs in with a token whose groups claim names only `claim`. */
static gwc_conn *login_claiming(gwfx *x, const char *uid, const char *claim)
{
    char *tok = NULL;
    const char *groups[1] = {claim};
    cr_assert_eq(gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), uid, (int64_t)time(NULL) + 3600,
                                groups, 1, false, &tok),
                 0);
    gwc_conn *k = gwfx_connect_raw(x);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 1, gwfx_sl(tok));
    gwfx_request(k, &sb, PR_EV_WELCOME);
    msgpack_sbuffer_destroy(&sb);
    free(tok);
    return k;
}

static int join_result(gwc_conn *k, const char *gid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_join(&sb, 3, gwfx_sl(gid));
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev = gwfx_expect_any(k);
    return ev.t == PR_EV_JOINED ? 0 : ev.t == PR_EV_ERR ? ev.err_code : -100;
}

Test(api, managed_groups_take_members_from_the_application_only, .timeout = 60)
{
    static const char *const managed[] = {"--groups", "managed", NULL};
    start_api(&f, managed);
    gwc_conn *a = gwfx_login(&f, "alice", NULL);
    free(call(&f, "PUT", "/api/v1/groups/made/members/bob", NULL, 201)); /* the group exists */
    /* A client joins neither a new group nor an existing one by itself. */
    cr_assert_eq(join_result(a, "new-one"), PR_E_UNAUTHORIZED);
    cr_assert_eq(join_result(a, "made"), PR_E_UNAUTHORIZED);
    /* The application adds alice: her join now answers (she is a member) and she sends. */
    free(call(&f, "PUT", "/api/v1/groups/made/members/alice", NULL, 201));
    cr_assert_eq(join_result(a, "made"), 0);
    cr_assert_eq(gwfx_send_msg(a, "made", "a-1", "in"), 1);
    /* A token whose groups claim the application chose makes the member (and the group). */
    gwc_conn *c = login_claiming(&f, "carol", "claimed");
    cr_assert_eq(join_result(c, "claimed"), 0);
    cr_assert_eq(join_result(c, "made"), PR_E_UNAUTHORIZED);
    char *b = call(&f, "GET", "/api/v1/groups/claimed/members", NULL, 200);
    cr_assert(has(b, "\"uid\":\"carol\""), "%s", b);
    free(b);
    /* Nothing was made by the refused joins. */
    int status;
    b = gwfx_call(&f, "GET", "/api/v1/groups/new-one/members", KEY, NULL, &status);
    cr_assert_eq(status, 404, "nothing was made by the refused joins: %d %s", status, b);
    free(b);
}

Test(api, each_key_has_a_rate, .timeout = 60)
{
    static const char *const slow[] = {"--api-rate", "1", "--rate-burst", "1", NULL};
    start_api(&f, slow);
    free(call(&f, "GET", "/api/v1/users/zoe/groups", NULL, 200));
    char *b = call(&f, "GET", "/api/v1/users/zoe/groups", NULL, 429);
    cr_assert(has(b, "\"error\":\"rate_limited\"") && has(b, "\"retry_ms\":"), "%s", b);
    free(b);
    usleep(1100 * 1000);
    free(call(&f, "GET", "/api/v1/users/zoe/groups", NULL, 200));
}

Test(api, requests_without_a_length_leave_the_connection_usable, .timeout = 60)
{
    /* libwebsockets would read the request after a PUT without Content-Length as its
     * body; the idle timeout is long here so that a stall shows as curl's -m 5. */
    const char *more[] = {"--handshake-timeout", "60", NULL};
    start_api(&f, more);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "curl -s -m 5 -w '%%{http_code} ' -H @%s/auth -X PUT "
             "-o /dev/null http://127.0.0.1:%d/api/v1/groups/k/members/a "
             "-o /dev/null http://127.0.0.1:%d/api/v1/groups/k/members/b "
             "-o /dev/null http://127.0.0.1:%d/api/v1/groups/k/members/c",
             f.dir, f.port, f.port, f.port);
    char auth[400];
    snprintf(auth, sizeof(auth), "%s/auth", f.dir);
    FILE *a = fopen(auth, "w");
    cr_assert_not_null(a);
    fprintf(a, "Authorization: Bearer %s\n", KEY);
    fclose(a);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[64] = "";
    cr_assert_not_null(fgets(out, sizeof(out), p));
    pclose(p);
    cr_assert_str_eq(out, "201 201 201 ", "each answered at once: %s", out);
}

Test(api, a_body_jansson_refuses_is_refused_for_what_is_wrong_with_it, .timeout = 60)
{
    start_api(&f, NULL);
    free(call(&f, "PUT", "/api/v1/groups/g/members/alice", NULL, 201));
    /* A JSON object with \u0000 in a string: jansson takes none without JSON_ALLOW_NUL.
     * The answer names the NUL (escaped again in the answer's JSON: \\u0000) and where. */
    static const struct {
        const char *method, *path, *body;
    } nul[] = {
        {"POST", "/api/v1/groups/g/messages",
         "{\"from\":\"a\",\"cid\":\"x\",\"body\":\"a\\u0000b\"}"},
        {"PUT", "/api/v1/groups/g/messages/1", "{\"body\":\"a\\u0000b\"}"},
        {"PUT", "/api/v1/groups/g/retention", "{\"messages\":1,\"x\":\"\\u0000\"}"},
    };
    for (size_t i = 0; i < sizeof(nul) / sizeof(nul[0]); i++) {
        char *b = call(&f, nul[i].method, nul[i].path, nul[i].body, 400);
        cr_assert(has(b, "\"error\":\"bad_frame\""), "%s %s: %s", nul[i].method, nul[i].path, b);
        cr_assert(has(b, "\\\\u0000") && has(b, "NUL") && has(b, "line 1, column "), "%s: %s",
                  nul[i].path, b);
        cr_assert(!has(b, "must be a JSON object"), "it is one: %s", b);
        free(b);
    }
    /* JSON that is malformed: jansson's own words, and where. */
    char *b = call(&f, "POST", "/api/v1/groups/g/messages", "{\"from\":\"a\",\"cid\":}", 400);
    cr_assert(has(b, "\"error\":\"bad_frame\"") && has(b, "not valid JSON") &&
                  has(b, "line 1, column 19"),
              "%s", b);
    free(b);
    b = call(&f, "PUT", "/api/v1/groups/g/retention", "{\"messages\":1", 400);
    cr_assert(has(b, "not valid JSON") && has(b, "line 1"), "%s", b);
    free(b);
    /* Valid JSON of another kind: what it must be. */
    b = call(&f, "POST", "/api/v1/groups/g/messages", "[1]", 400);
    cr_assert(has(b, "\"error\":\"bad_frame\"") && has(b, "must be a JSON object"), "%s", b);
    free(b);
    b = call(&f, "GET", "/api/v1/groups/g/messages", NULL, 200);
    cr_assert(has(b, "\"last_mid\":0"), "nothing was stored: %s", b);
    free(b);
}
