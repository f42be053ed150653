/* Field rules: every field of every message against values of every type, ids, limits. */
#include "proto_test.h"

PROTO_DECODE_SUITE(fields);

static int req_sb(void)
{
    memset(&err, 0, sizeof err);
    return pr_decode_req(dec, (const uint8_t *)sb.data, sb.size, &req, &err);
}

static int events_sb(void)
{
    collect c = {.n = 0};
    memset(&err, 0, sizeof err);
    return pr_decode_events(dec, (const uint8_t *)sb.data, sb.size, collect_cb, &c, &err);
}

/* ---------------------------------------------------------------------------------------
 * Every field against every type
 */

/* Sample values of every MessagePack type the decoders may meet. */
enum v {
    V_STR,
    V_EMPTY,
    V_BIN,
    V_UINT,
    V_ZERO,
    V_BIG,
    V_NEG,
    V_NIL,
    V_BOOL,
    V_FLOAT,
    V_ARRAY,
    V_EARRAY,
    V_MAP,
    V_COUNT
};
#define B(x) (1u << (x))
#define UINTS (B(V_UINT) | B(V_ZERO) | B(V_BIG))

static void put_value(enum v v)
{
    switch (v) {
    case V_STR: put_str(&pk, "abc"); break; /* also a valid id */
    case V_EMPTY: put_str(&pk, ""); break;
    case V_BIN: msgpack_pack_bin_with_body(&pk, "abc", 3); break;
    case V_UINT: msgpack_pack_uint64(&pk, 5); break;
    case V_ZERO: msgpack_pack_uint64(&pk, 0); break;
    case V_BIG: msgpack_pack_uint64(&pk, (uint64_t)UINT32_MAX + 1); break;
    case V_NEG: msgpack_pack_int64(&pk, -5); break;
    case V_NIL: msgpack_pack_nil(&pk); break;
    case V_BOOL: msgpack_pack_true(&pk); break;
    case V_FLOAT: msgpack_pack_double(&pk, 5.0); break;
    case V_ARRAY:
        msgpack_pack_array(&pk, 1);
        msgpack_pack_uint64(&pk, 1);
        break;
    case V_EARRAY: msgpack_pack_array(&pk, 0); break;
    case V_MAP: put_frame(&pk, "{s:u}", "a", 1); break;
    default: cr_assert_fail("bad value kind");
    }
}

typedef struct fdesc {
    const char *key;
    unsigned accept; /* B(V_*) of the values that decode */
    enum v good;     /* the value written when another field is under test */
} fdesc;

enum wrap { W_NONE, W_GROUP_ENTRY, W_PAGE_ENTRY };

typedef struct mdesc {
    const char *t;
    enum wrap wrap; /* where the fields go: the message itself, or one entry of its array */
    size_t n;
    fdesc f[7];
} mdesc;

#define RID                                                                                        \
    {                                                                                              \
        "rid", UINTS, V_UINT                                                                       \
    }
#define STRS (B(V_STR) | B(V_EMPTY))

static const mdesc reqs[] = {
    {"hello", W_NONE, 2, {RID, {"token", B(V_STR), V_STR}}},
    {"join", W_NONE, 2, {RID, {"gid", B(V_STR), V_STR}}},
    {"leave", W_NONE, 2, {RID, {"gid", B(V_STR), V_STR}}},
    {"groups", W_NONE, 1, {RID}},
    {"send",
     W_NONE,
     4,
     {RID, {"gid", B(V_STR), V_STR}, {"cid", B(V_STR), V_STR}, {"body", STRS | B(V_BIN), V_STR}}},
    {"ack", W_NONE, 1, {{"acks", B(V_MAP), V_MAP}}},
    {"enter", W_NONE, 3, {RID, {"gid", B(V_STR), V_STR}, {"limit", B(V_UINT) | B(V_BIG), V_UINT}}},
    {"pull",
     W_NONE,
     4,
     {RID,
      {"gid", B(V_STR), V_STR},
      {"after", UINTS, V_UINT},
      {"limit", B(V_UINT) | B(V_BIG), V_UINT}}},
    {"pull", W_NONE, 3, {RID, {"gid", B(V_STR), V_STR}, {"before", B(V_UINT) | B(V_BIG), V_UINT}}},
    {"ping", W_NONE, 1, {RID}},
};

#define U64(k)                                                                                     \
    {                                                                                              \
        k, UINTS, V_UINT                                                                           \
    }
#define U32(k)                                                                                     \
    {                                                                                              \
        k, B(V_UINT) | B(V_ZERO), V_UINT                                                           \
    }

static const mdesc events[] = {
    {"welcome",
     W_NONE,
     7,
     {{"uid", B(V_STR), V_STR},
      {"sid", STRS, V_STR},
      U64("ts"),
      U32("ack_every"),
      U32("ack_delay_ms"),
      U32("max_body"),
      {"groups", B(V_EARRAY), V_EARRAY}}},
    {"groups", W_NONE, 2, {RID, {"groups", B(V_EARRAY), V_EARRAY}}},
    {"joined", W_NONE, 4, {RID, {"gid", B(V_STR), V_STR}, U64("last_mid"), U64("ack")}},
    {"left", W_NONE, 2, {RID, {"gid", B(V_STR), V_STR}}},
    {"sent",
     W_NONE,
     5,
     {RID, {"gid", B(V_STR), V_STR}, {"cid", B(V_STR), V_STR}, U64("mid"), U64("ts")}},
    {"msg",
     W_NONE,
     5,
     {{"gid", B(V_STR), V_STR},
      U64("mid"),
      {"from", B(V_STR), V_STR},
      U64("ts"),
      {"body", STRS | B(V_BIN), V_BIN}}},
    {"page",
     W_NONE,
     5,
     {RID,
      {"gid", B(V_STR), V_STR},
      U64("last_mid"),
      {"more", B(V_BOOL), V_BOOL},
      {"msgs", B(V_EARRAY), V_EARRAY}}},
    {"notify", W_NONE, 2, {{"gid", B(V_STR), V_STR}, U64("last_mid")}},
    {"pong", W_NONE, 2, {RID, U64("ts")}},
    {"err", W_NONE, 4, {RID, {"code", STRS, V_STR}, {"msg", STRS, V_STR}, {"gid", STRS, V_STR}}},
    {"groups",
     W_GROUP_ENTRY,
     4,
     {{"gid", B(V_STR), V_STR}, U64("last_mid"), U64("ack"), U64("unread")}},
    {"page",
     W_PAGE_ENTRY,
     4,
     {U64("mid"), {"from", B(V_STR), V_STR}, U64("ts"), {"body", STRS | B(V_BIN), V_STR}}},
};

/* Writes message m with field `bad` set to value v (bad == m->n: all good). */
static void write_msg(const mdesc *m, size_t bad, enum v v)
{
    sb.size = 0;
    if (m->wrap == W_NONE) {
        msgpack_pack_map(&pk, m->n + 1);
        put_str(&pk, "t");
        put_str(&pk, m->t);
    } else if (m->wrap == W_GROUP_ENTRY) {
        msgpack_pack_map(&pk, 2);
        put_str(&pk, "t");
        put_str(&pk, "groups");
        put_str(&pk, "groups");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, m->n);
    } else {
        msgpack_pack_map(&pk, 5);
        put_str(&pk, "t");
        put_str(&pk, "page");
        put_str(&pk, "gid");
        put_str(&pk, "g");
        put_str(&pk, "last_mid");
        msgpack_pack_uint64(&pk, 1);
        put_str(&pk, "more");
        msgpack_pack_false(&pk);
        put_str(&pk, "msgs");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, m->n);
    }
    for (size_t i = 0; i < m->n; i++) {
        put_str(&pk, m->f[i].key);
        put_value(i == bad ? v : m->f[i].good);
    }
}

/* Writes message m (unwrapped) with all its fields good but field `drop`, left out. */
static void write_without(const mdesc *m, size_t drop)
{
    sb.size = 0;
    msgpack_pack_map(&pk, m->n);
    put_str(&pk, "t");
    put_str(&pk, m->t);
    for (size_t i = 0; i < m->n; i++) {
        if (i == drop)
            continue;
        put_str(&pk, m->f[i].key);
        put_value(m->f[i].good);
    }
}

static void every_type(const mdesc *tab, size_t n_tab, int (*decode)(void))
{
    for (size_t k = 0; k < n_tab; k++) {
        const mdesc *m = &tab[k];
        write_msg(m, m->n, V_STR);
        cr_assert_eq(decode(), 0, "%s: all good: %s", m->t, err.msg);
        for (size_t i = 0; i < m->n; i++) {
            for (enum v v = 0; v < V_COUNT; v++) {
                write_msg(m, i, v);
                int want = (m->f[i].accept & B(v)) ? 0 : PR_E_BAD_FIELD;
                int rc = decode();
                cr_assert_eq(rc, want, "%s.%s = value kind %d: got %d (%s)", m->t, m->f[i].key,
                             (int)v, rc, err.msg);
                if (rc) {
                    char quoted[32];
                    snprintf(quoted, sizeof quoted, "'%s'", m->f[i].key);
                    cr_assert(strstr(err.msg, quoted), "message names no field: %s", err.msg);
                }
            }
        }
    }
}

Test(fields, requests_every_type)
{
    every_type(reqs, sizeof reqs / sizeof reqs[0], req_sb);
}

Test(fields, events_every_type)
{
    every_type(events, sizeof events / sizeof events[0], events_sb);
}

/* Each required field, left out, is bad_field; optional ones (rid, limit, err's gid) not. */
Test(fields, missing_fields)
{
    for (size_t k = 0; k < sizeof reqs / sizeof reqs[0]; k++) {
        const mdesc *m = &reqs[k];
        for (size_t drop = 0; drop < m->n; drop++) {
            write_without(m, drop);
            bool opt = !strcmp(m->f[drop].key, "rid") || !strcmp(m->f[drop].key, "limit");
            cr_assert_eq(req_sb(), opt ? 0 : PR_E_BAD_FIELD, "%s without %s", m->t, m->f[drop].key);
        }
    }
    for (size_t k = 0; k < sizeof events / sizeof events[0]; k++) {
        const mdesc *m = &events[k];
        if (m->wrap != W_NONE)
            continue;
        for (size_t drop = 0; drop < m->n; drop++) {
            write_without(m, drop);
            bool opt = !strcmp(m->f[drop].key, "rid") ||
                       (!strcmp(m->t, "err") && !strcmp(m->f[drop].key, "gid"));
            cr_assert_eq(events_sb(), opt ? 0 : PR_E_BAD_FIELD, "%s without %s", m->t,
                         m->f[drop].key);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Ids
 */

static const pr_slice bad_ids[] = {
    {(const uint8_t *)"", 0},
    {(const uint8_t *)"SECRET cd", 9},
    {(const uint8_t *)"SECRET/cd", 9},
    {(const uint8_t *)"SECRET\0cd", 9},
    {(const uint8_t *)"SECRET\xff"
                      "cd",
     9},
    {(const uint8_t *)"SECRET\"cd", 9},
    {(const uint8_t *)"SECRET<cd", 9},
    {(const uint8_t *)"SECRETcd\n", 9},
    {(const uint8_t *)"SECRET\xc3\xa9", 8}, /* non-ASCII letter */
};

static const char long_id[] = "SECRET78901234567890123456789012345678901234567890123456789012345";

Test(fields, id_rules)
{
    cr_assert_eq(strlen(long_id), PR_MAX_ID + 1);
    cr_assert_not(pr_id_valid((pr_slice){(const uint8_t *)long_id, PR_MAX_ID + 1}));
    cr_assert(pr_id_valid((pr_slice){(const uint8_t *)long_id, PR_MAX_ID}));
    cr_assert(pr_id_valid(S("x")));
    cr_assert(pr_id_valid(S("AZaz09_.:-")));
    cr_assert_not(pr_id_valid((pr_slice){NULL, 0}));
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++)
        cr_assert_not(pr_id_valid(bad_ids[i]), "bad id %zu", i);
}

static void expect_bad_id(const char *field)
{
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD, "%s", field);
    cr_assert(strstr(err.msg, field), "%s", err.msg);
    cr_assert_null(strstr(err.msg, "SECRET"), "echoed user data: %s", err.msg);
    cr_assert(req.has_rid, "rid lost on error");
    cr_assert_eq(req.rid, 4);
}

Test(fields, bad_ids_rejected)
{
    pr_slice ids[sizeof bad_ids / sizeof bad_ids[0] + 1];
    memcpy(ids, bad_ids, sizeof bad_ids);
    ids[sizeof bad_ids / sizeof bad_ids[0]] = (pr_slice){(const uint8_t *)long_id, PR_MAX_ID + 1};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        sb.size = 0;
        cr_assert_eq(pr_enc_join(&sb, 4, ids[i]), 0);
        expect_bad_id("'gid'");
        sb.size = 0;
        cr_assert_eq(pr_enc_send(&sb, 4, S("g"), ids[i], (pr_body){S("b"), false}), 0);
        expect_bad_id("'cid'");
        sb.size = 0;
        cr_assert_eq(pr_enc_pull(&sb, 4, ids[i], false, 1, 0), 0);
        expect_bad_id("'gid'");

        sb.size = 0;
        pr_ack acks[2] = {{S("ok"), 1}, {ids[i], 2}};
        cr_assert_eq(pr_enc_ack(&sb, acks, 2), 0);
        cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
        cr_assert_null(strstr(err.msg, "SECRET"), "echoed user data: %s", err.msg);
    }
    sb.size = 0;
    cr_assert_eq(pr_enc_join(&sb, 4, (pr_slice){(const uint8_t *)long_id, PR_MAX_ID}), 0);
    cr_assert_eq(req_sb(), 0);
    cr_assert_eq(req.gid.n, PR_MAX_ID);
}

Test(fields, empty_token)
{
    cr_assert_eq(pr_enc_hello(&sb, PR_NO_RID, (pr_slice){NULL, 0}), 0);
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "'token'"), "%s", err.msg);
}

/* ---------------------------------------------------------------------------------------
 * enter / pull: limit, after, before
 */

static uint32_t limit_of(bool has, uint64_t v)
{
    sb.size = 0;
    msgpack_pack_map(&pk, 2 + has);
    put_str(&pk, "t");
    put_str(&pk, "enter");
    put_str(&pk, "gid");
    put_str(&pk, "g");
    if (has) {
        put_str(&pk, "limit");
        msgpack_pack_uint64(&pk, v);
    }
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    return req.limit;
}

Test(fields, limit_clamping)
{
    cr_assert_eq(limit_of(false, 0), PR_PAGE_DEFAULT);
    cr_assert_eq(limit_of(true, 1), 1);
    cr_assert_eq(limit_of(true, 100), 100);
    cr_assert_eq(limit_of(true, 500), 500);
    cr_assert_eq(limit_of(true, 501), PR_PAGE_MAX);
    cr_assert_eq(limit_of(true, 1000), PR_PAGE_MAX);
    cr_assert_eq(limit_of(true, (uint64_t)UINT32_MAX + 7), PR_PAGE_MAX);
    cr_assert_eq(limit_of(true, UINT64_MAX), PR_PAGE_MAX);

    sb.size = 0;
    cr_assert_eq(pr_enc_pull(&sb, PR_NO_RID, S("g"), false, 5, 1000), 0);
    cr_assert_eq(req_sb(), 0);
    cr_assert_eq(req.limit, PR_PAGE_MAX);
}

/* pull with the given keys (after, before: < 0 = absent). */
static int pull_with(int64_t after, int64_t before)
{
    sb.size = 0;
    msgpack_pack_map(&pk, 3 + (after >= 0) + (before >= 0));
    put_str(&pk, "t");
    put_str(&pk, "pull");
    put_str(&pk, "rid");
    msgpack_pack_uint64(&pk, 12);
    put_str(&pk, "gid");
    put_str(&pk, "g");
    if (after >= 0) {
        put_str(&pk, "after");
        msgpack_pack_uint64(&pk, (uint64_t)after);
    }
    if (before >= 0) {
        put_str(&pk, "before");
        msgpack_pack_uint64(&pk, (uint64_t)before);
    }
    return req_sb();
}

Test(fields, after_and_before)
{
    cr_assert_eq(pull_with(5, 9), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "'after'") && strstr(err.msg, "'before'"), "%s", err.msg);
    cr_assert_eq(req.rid, 12);
    cr_assert_eq(pull_with(-1, -1), PR_E_BAD_FIELD);
    cr_assert_eq(pull_with(-1, 0), PR_E_BAD_FIELD);
    cr_assert_eq(pull_with(-1, 1), 0);
    cr_assert_eq(req.before, 1);
    cr_assert_eq(pull_with(0, -1), 0);
    cr_assert(req.has_after);
    cr_assert_eq(req.after, 0);
    cr_assert_eq(req.limit, PR_PAGE_DEFAULT);
}

/* ---------------------------------------------------------------------------------------
 * ack
 */

/* An ack whose single entry has key k (a str unless k is NULL: then an int) and value v. */
static int ack_with(const char *k, enum v v)
{
    sb.size = 0;
    msgpack_pack_map(&pk, 2);
    put_str(&pk, "t");
    put_str(&pk, "ack");
    put_str(&pk, "acks");
    msgpack_pack_map(&pk, 1);
    if (k)
        put_str(&pk, k);
    else
        msgpack_pack_uint64(&pk, 7);
    put_value(v);
    return req_sb();
}

Test(fields, ack_values)
{
    for (enum v v = 0; v < V_COUNT; v++) {
        bool ok = v == V_UINT || v == V_ZERO || v == V_BIG;
        cr_assert_eq(ack_with("g1", v), ok ? 0 : PR_E_BAD_FIELD, "value kind %d", (int)v);
    }
    cr_assert_eq(ack_with(NULL, V_UINT), PR_E_BAD_FIELD);
    cr_assert_eq(ack_with("", V_UINT), PR_E_BAD_FIELD);
    cr_assert_eq(ack_with("a b", V_UINT), PR_E_BAD_FIELD);
}

Test(fields, ack_map_shape)
{
    /* empty */
    cr_assert_eq(pr_enc_ack(&sb, NULL, 0), 0);
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);

    /* a gid twice */
    pr_ack acks[PR_MAX_KEYS + 1];
    char names[PR_MAX_KEYS + 1][24];
    acks[0] = (pr_ack){S("g"), 1};
    acks[1] = (pr_ack){S("g"), 2};
    sb.size = 0;
    cr_assert_eq(pr_enc_ack(&sb, acks, 2), 0);
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);

    /* 33 groups */
    for (size_t i = 0; i < PR_MAX_KEYS + 1; i++) {
        snprintf(names[i], sizeof names[i], "g%zu", i);
        acks[i] = (pr_ack){S(names[i]), i};
    }
    sb.size = 0;
    cr_assert_eq(pr_enc_ack(&sb, acks, PR_MAX_KEYS + 1), 0);
    cr_assert_eq(req_sb(), PR_E_TOO_LARGE);
}

/* ---------------------------------------------------------------------------------------
 * Server frames: all or nothing, callbacks
 */

static int count_cb(void *ud, const pr_event *ev)
{
    (void)ev;
    return ++*(int *)ud == 2 ? 42 : 0;
}

Test(fields, callback_stops_the_walk)
{
    cr_assert_eq(pr_enc_batch_begin(&sb, 3), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pr_enc_pong(&sb, PR_NO_RID, (uint64_t)i), 0);
    int calls = 0;
    cr_assert_eq(pr_decode_events(dec, (const uint8_t *)sb.data, sb.size, count_cb, &calls, &err),
                 42);
    cr_assert_eq(calls, 2);
}

Test(fields, bad_batch_calls_nothing)
{
    cr_assert_eq(pr_enc_batch_begin(&sb, 3), 0);
    cr_assert_eq(pr_enc_pong(&sb, PR_NO_RID, 1), 0);
    cr_assert_eq(pr_enc_pong(&sb, PR_NO_RID, 2), 0);
    cr_assert_eq(pr_enc_left(&sb, PR_NO_RID, S("bad gid")), 0);
    int calls = 0;
    cr_assert_eq(pr_decode_events(dec, (const uint8_t *)sb.data, sb.size, count_cb, &calls, &err),
                 PR_E_BAD_FIELD);
    cr_assert_eq(calls, 0);
}

Test(fields, unknown_event_type)
{
    put_frame(&pk, "{s:s}", "t", "teleport");
    cr_assert_eq(events_sb(), PR_E_BAD_TYPE);
    sb.size = 0;
    msgpack_pack_map(&pk, 0);
    cr_assert_eq(events_sb(), PR_E_BAD_TYPE);
}

/* Group entries of a welcome with a bad entry are refused up front. */
Test(fields, bad_entry_in_welcome)
{
    pr_welcome w = {S("u"), S("s"), 1, 2, 3, 4, false};
    cr_assert_eq(pr_enc_welcome_begin(&sb, PR_NO_RID, &w, 2), 0);
    pr_group g = {.gid = S("g1"), .last_mid = 1, .ack = 1};
    cr_assert_eq(pr_enc_group_entry(&sb, &g), 0);
    msgpack_pack_uint64(&pk, 5); /* not a map */
    cr_assert_eq(events_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "entry of 'groups'"), "%s", err.msg);
}
