/* Every limit and rule of the wire contract, rejected with its code. */
#include "proto_test.h"

#include <stdlib.h>

PROTO_DECODE_SUITE(limits);

static int req_of(const void *p, size_t n)
{
    memset(&err, 0, sizeof err);
    int rc = pr_decode_req(dec, p, n, &req, &err);
    if (rc)
        cr_assert_eq(err.code, rc, "err.code %d != rc %d", err.code, rc);
    return rc;
}

static int req_sb(void)
{
    return req_of(sb.data, sb.size);
}

static int events_of(const void *p, size_t n)
{
    collect c = {.n = 0};
    memset(&err, 0, sizeof err);
    return pr_decode_events(dec, p, n, collect_cb, &c, &err);
}

static void reset(void)
{
    sb.size = 0;
}

/* ---------------------------------------------------------------------------------------
 * Structure: size, nesting, counts, framing
 */

Test(limits, frame_over_max_frame)
{
    size_t n = PR_MAX_FRAME_DEFAULT;
    uint8_t *big = calloc(1, n);
    pr_body body = {{big, n}, true};
    cr_assert_eq(pr_enc_send(&sb, PR_NO_RID, S("g"), S("c"), body), 0);
    cr_assert_gt(sb.size, PR_MAX_FRAME_DEFAULT);
    cr_assert_eq(req_sb(), PR_E_TOO_LARGE);
    cr_assert_eq(events_of(sb.data, sb.size), PR_E_TOO_LARGE);
    cr_assert_eq(pr_validate((const uint8_t *)sb.data, sb.size, NULL, &err), PR_E_TOO_LARGE);
    free(big);
}

Test(limits, custom_limits)
{
    pr_limits lim = {.max_frame = 40, .max_body = 4};
    pr_decoder *d = pr_decoder_new(&lim);
    cr_assert_not_null(d);
    cr_assert_eq(pr_enc_send(&sb, PR_NO_RID, S("g"), S("c"), (pr_body){S("1234"), false}), 0);
    cr_assert_eq(pr_decode_req(d, (const uint8_t *)sb.data, sb.size, &req, &err), 0);
    reset();
    cr_assert_eq(pr_enc_send(&sb, PR_NO_RID, S("g"), S("c"), (pr_body){S("12345"), false}), 0);
    cr_assert_eq(pr_decode_req(d, (const uint8_t *)sb.data, sb.size, &req, &err), PR_E_TOO_LARGE);
    reset();
    cr_assert_eq(pr_enc_hello(&sb, PR_NO_RID, S("0123456789012345678901234567890123456789")), 0);
    cr_assert_eq(pr_decode_req(d, (const uint8_t *)sb.data, sb.size, &req, &err), PR_E_TOO_LARGE);
    pr_decoder_free(d);
}

static void body_limit(bool bin)
{
    uint8_t *big = malloc(PR_MAX_BODY_DEFAULT + 1);
    memset(big, 'a', PR_MAX_BODY_DEFAULT + 1);
    pr_body body = {{big, PR_MAX_BODY_DEFAULT}, bin};
    cr_assert_eq(pr_enc_send(&sb, 3, S("g"), S("c"), body), 0);
    cr_assert_eq(req_sb(), 0);
    cr_assert_eq(req.body.data.n, PR_MAX_BODY_DEFAULT);
    reset();
    body.data.n++;
    cr_assert_eq(pr_enc_send(&sb, 3, S("g"), S("c"), body), 0);
    cr_assert_eq(req_sb(), PR_E_TOO_LARGE);
    cr_assert(req.has_rid);
    cr_assert_eq(req.rid, 3);
    free(big);
}

Test(limits, body_over_max_body_str)
{
    body_limit(false);
}

Test(limits, body_over_max_body_bin)
{
    body_limit(true);
}

/* A ping map with `extra` unknown keys. */
static void ping_with_keys(size_t extra)
{
    msgpack_pack_map(&pk, 1 + extra);
    put_str(&pk, "t");
    put_str(&pk, "ping");
    for (size_t i = 0; i < extra; i++) {
        char k[24];
        snprintf(k, sizeof k, "x%zu", i);
        put_str(&pk, k);
        msgpack_pack_uint64(&pk, i);
    }
}

Test(limits, map_keys)
{
    ping_with_keys(PR_MAX_KEYS - 1);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_eq(req.t, PR_REQ_PING);
    reset();
    ping_with_keys(PR_MAX_KEYS);
    cr_assert_eq(req_sb(), PR_E_TOO_LARGE);
    cr_assert_eq(events_of(sb.data, sb.size), PR_E_TOO_LARGE);
}

Test(limits, nested_map_keys)
{
    msgpack_pack_map(&pk, 2);
    put_str(&pk, "t");
    put_str(&pk, "ping");
    put_str(&pk, "x");
    msgpack_pack_map(&pk, 33);
    for (int i = 0; i < 33; i++) {
        msgpack_pack_int(&pk, i);
        msgpack_pack_nil(&pk);
    }
    cr_assert_eq(req_sb(), PR_E_TOO_LARGE);
}

/* {t: "ping", x: [[[v]]]} where v is an int (depth 4) or an empty map (depth 5). */
static void nested_ping(bool five)
{
    msgpack_pack_map(&pk, 2);
    put_str(&pk, "t");
    put_str(&pk, "ping");
    put_str(&pk, "x");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 1);
    if (five)
        msgpack_pack_map(&pk, 0);
    else
        msgpack_pack_int(&pk, 1);
}

Test(limits, depth)
{
    nested_ping(false);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    reset();
    nested_ping(true);
    cr_assert_eq(req_sb(), PR_E_BAD_FRAME);
    cr_assert_eq(events_of(sb.data, sb.size), PR_E_BAD_FRAME);
}

/* batch -> page -> msgs -> entry -> reactions (or mine) is depth 5, the deepest thing the
 * server sends. */
Test(limits, batch_of_pages_is_depth_5)
{
    msgpack_sbuffer rec;
    msgpack_sbuffer_init(&rec);
    cr_assert_eq(pr_enc_record(&rec, S("u"), (pr_body){S("b"), false}), 0);
    pr_slice r = {(const uint8_t *)rec.data, rec.size};
    pr_reaction rx[1] = {{S("+1"), 2, true}};
    pr_version v = {.cseq = 3};
    cr_assert_eq(pr_enc_batch_begin(&sb, 2), 0);
    for (int p = 0; p < 2; p++) {
        cr_assert_eq(pr_enc_page_begin(&sb, PR_NO_RID, S("g"), 1, 2, 0, false, 2), 0);
        cr_assert_eq(pr_enc_page_entry(&sb, 1, 1, r), 0);
        cr_assert_eq(pr_enc_page_entry_r(&sb, 2, 2, &v, r, rx, 1), 0);
    }
    msgpack_sbuffer_destroy(&rec);
    collect c = {.n = 0};
    cr_assert_eq(pr_decode_events(dec, (const uint8_t *)sb.data, sb.size, collect_cb, &c, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(c.n, 2);
    cr_assert_eq(c.ev[1].n_items, 2);
}

Test(limits, truncated)
{
    cr_assert_eq(pr_enc_send(&sb, 1, S("g1"), S("c1"), (pr_body){S("body"), false}), 0);
    cr_assert_eq(req_of(sb.data, 0), PR_E_BAD_FRAME);
    cr_assert_eq(req_of(NULL, 0), PR_E_BAD_FRAME);
    for (size_t n = 1; n < sb.size; n++) {
        cr_assert_eq(req_of(sb.data, n), PR_E_BAD_FRAME, "prefix of %zu bytes", n);
        cr_assert_eq(events_of(sb.data, n), PR_E_BAD_FRAME, "prefix of %zu bytes", n);
    }
    cr_assert_eq(req_of(sb.data, sb.size), 0);
}

Test(limits, trailing_bytes)
{
    cr_assert_eq(pr_enc_ping(&sb, PR_NO_RID), 0);
    msgpack_pack_nil(&pk);
    cr_assert_eq(req_sb(), PR_E_BAD_FRAME);
    reset();
    cr_assert_eq(pr_enc_ping(&sb, PR_NO_RID), 0);
    cr_assert_eq(pr_enc_ping(&sb, PR_NO_RID), 0); /* two frames in one */
    cr_assert_eq(req_sb(), PR_E_BAD_FRAME);
    cr_assert_eq(events_of(sb.data, sb.size), PR_E_BAD_FRAME);
}

Test(limits, request_must_be_a_map)
{
    static const uint8_t frames[][4] = {
        {0x90}, {0xc0}, {0x01}, {0xa1, 't'}, {0x91, 0x80}, {0xc4, 0x00}, {0xc3},
    };
    static const size_t lens[] = {1, 1, 1, 2, 2, 2, 1};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        cr_assert_eq(req_of(frames[i], lens[i]), PR_E_BAD_FRAME, "frame %zu", i);
}

Test(limits, events_must_be_maps)
{
    static const uint8_t scalar[] = {0x05};
    static const uint8_t batch_with_int[] = {0x92, 0x82, 0xa1, 't', 0xa4, 'p',  'o',
                                             'n',  'g',  0xa2, 't', 's',  0x01, 0x05};
    cr_assert_eq(events_of(scalar, sizeof scalar), PR_E_BAD_FRAME);
    cr_assert_eq(events_of(batch_with_int, sizeof batch_with_int), PR_E_BAD_FRAME);
}

/* Frames that declare far more than they hold: validate refuses them before msgpack-c
 * would allocate for the declared count (~100 GB). Under ASan a huge malloc would abort. */
Test(limits, huge_declarations)
{
    static const uint8_t arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t bin32[] = {0xc6, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t arr16[] = {0xdc, 0xff, 0xff, 0xc0, 0xc0, 0xc0};
    static const uint8_t nested[] = {0x92, 0xdd, 0x00, 0x10, 0x00, 0x00, 0xc0};

    cr_assert_eq(pr_validate(arr32, sizeof arr32, NULL, &err), PR_E_BAD_FRAME);
    cr_assert(strstr(err.msg, "4294967295 elements but only 0 bytes remain"), "%s", err.msg);
    cr_assert_eq(req_of(arr32, sizeof arr32), PR_E_BAD_FRAME);
    cr_assert_eq(events_of(arr32, sizeof arr32), PR_E_BAD_FRAME);

    /* A map is first over PR_MAX_KEYS. */
    cr_assert_eq(req_of(map32, sizeof map32), PR_E_TOO_LARGE);
    cr_assert_eq(events_of(map32, sizeof map32), PR_E_TOO_LARGE);

    cr_assert_eq(req_of(bin32, sizeof bin32), PR_E_BAD_FRAME);
    cr_assert_eq(events_of(bin32, sizeof bin32), PR_E_BAD_FRAME);
    cr_assert_eq(req_of(str32, sizeof str32), PR_E_BAD_FRAME);
    cr_assert_eq(events_of(arr16, sizeof arr16), PR_E_BAD_FRAME);
    cr_assert(strstr(err.msg, "65535 elements but only 3 bytes remain"), "%s", err.msg);
    cr_assert_eq(events_of(nested, sizeof nested), PR_E_BAD_FRAME);

    /* Inside a request, too. */
    static const uint8_t in_send[] = {0x82, 0xa1, 't', 0xa4, 's',  'e',  'n',  'd',  0xa4,
                                      'b',  'o',  'd', 'y',  0xc6, 0xff, 0xff, 0xff, 0xff};
    cr_assert_eq(req_of(in_send, sizeof in_send), PR_E_BAD_FRAME);
}

Test(limits, unusable_bytes)
{
    static const uint8_t never[] = {0xc1};
    static const uint8_t fixext1[] = {0xd4, 0x01, 0x00};
    static const uint8_t ext8[] = {0xc7, 0x01, 0x05, 0x00};
    static const uint8_t ext_in_map[] = {0x81, 0xa1, 'x', 0xd6, 0xff, 0, 0, 0, 0};
    cr_assert_eq(pr_validate(never, 1, NULL, &err), PR_E_BAD_FRAME);
    cr_assert_eq(pr_validate(fixext1, sizeof fixext1, NULL, &err), PR_E_BAD_FRAME);
    cr_assert_eq(pr_validate(ext8, sizeof ext8, NULL, &err), PR_E_BAD_FRAME);
    cr_assert_eq(req_of(ext_in_map, sizeof ext_in_map), PR_E_BAD_FRAME);
}

/* Every non-ext format, written in its long forms by hand, is accepted. */
Test(limits, validate_accepts_every_format)
{
    static const uint8_t frame[] = {
        0xdc, 0x00, 0x1d,                                    /* array16 of 29 */
        0xc0, 0xc2, 0xc3, 0x7f, 0xe0,                        /* nil false true fixints */
        0xcc, 0xff, 0xcd, 0xff, 0xff,                        /* uint8 uint16 */
        0xce, 0xff, 0xff, 0xff, 0xff,                        /* uint32 */
        0xcf, 1,    2,    3,    4,    5,    6,    7,    8,   /* uint64 */
        0xd0, 0x80, 0xd1, 0x80, 0x00,                        /* int8 int16 */
        0xd2, 0x80, 0,    0,    0,                           /* int32 */
        0xd3, 0x80, 0,    0,    0,    0,    0,    0,    0,   /* int64 */
        0xca, 0,    0,    0,    0,                           /* float32 */
        0xcb, 0,    0,    0,    0,    0,    0,    0,    0,   /* float64 */
        0xa1, 'a',  0xd9, 0x01, 'b',  0xda, 0x00, 0x01, 'c', /* fixstr str8 str16 */
        0xdb, 0,    0,    0,    1,    'd',                   /* str32 */
        0xc4, 0x01, 0x00, 0xc5, 0x00, 0x01, 0x00,            /* bin8 bin16 */
        0xc6, 0,    0,    0,    1,    0x00,                  /* bin32 */
        0x91, 0xc0, 0xdd, 0,    0,    0,    1,    0xc0,      /* fixarray array32 */
        0x81, 0xc0, 0xc0, 0xde, 0x00, 0x01, 0xc0, 0xc0,      /* fixmap map16 */
        0xdf, 0,    0,    0,    1,    0xc0, 0xc0,            /* map32 */
        0x90, 0x80,                                          /* empty array, empty map */
    };
    cr_assert_eq(pr_validate(frame, sizeof frame, NULL, &err), 0, "%s", err.msg);
    /* And msgpack-c agrees, so the request decoder gets as far as "not a map". */
    cr_assert_eq(req_of(frame, sizeof frame), PR_E_BAD_FRAME);
    cr_assert(strstr(err.msg, "must be a map"), "%s", err.msg);
}

/* ---------------------------------------------------------------------------------------
 * Type
 */

Test(limits, bad_type)
{
    put_frame(&pk, "{s:u}", "rid", 9);
    cr_assert_eq(req_sb(), PR_E_BAD_TYPE); /* missing */
    cr_assert(req.has_rid);
    cr_assert_eq(req.rid, 9);

    reset();
    put_frame(&pk, "{s:u, s:s}", "rid", 9, "t", "launch_missiles");
    cr_assert_eq(req_sb(), PR_E_BAD_TYPE); /* unknown */
    cr_assert_null(strstr(err.msg, "launch"), "echoed user data: %s", err.msg);
    cr_assert(req.has_rid);

    reset();
    put_frame(&pk, "{s:u}", "t", 1);
    cr_assert_eq(req_sb(), PR_E_BAD_TYPE); /* not a string */

    reset();
    msgpack_pack_map(&pk, 1);
    put_str(&pk, "t");
    msgpack_pack_bin_with_body(&pk, "ping", 4);
    cr_assert_eq(req_sb(), PR_E_BAD_TYPE); /* bin, not str */

    reset();
    msgpack_pack_map(&pk, 1);
    put_str(&pk, "t");
    put_str(&pk, "welcome"); /* a server message is not a request */
    cr_assert_eq(req_sb(), PR_E_BAD_TYPE);

    reset();
    put_frame(&pk, "{s:s}", "t", "hello");
    cr_assert_eq(events_of(sb.data, sb.size), PR_E_BAD_TYPE); /* and vice versa */

    reset();
    msgpack_pack_map(&pk, 0);
    cr_assert_eq(req_sb(), PR_E_BAD_TYPE);
    cr_assert_not(req.has_rid);
}

Test(limits, duplicate_keys)
{
    put_frame(&pk, "{s:s, s:s, s:s}", "t", "join", "gid", "a", "gid", "b");
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "'gid'"), "%s", err.msg);

    reset();
    put_frame(&pk, "{s:s, s:s}", "t", "ping", "t", "ping");
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);

    /* Unknown keys may repeat: they are ignored. */
    reset();
    put_frame(&pk, "{s:s, s:n, s:n}", "t", "ping", "zz", "zz");
    cr_assert_eq(req_sb(), 0);
}

/* Unknown keys of any type, and non-string keys, are ignored. */
Test(limits, unknown_keys_ignored)
{
    msgpack_pack_map(&pk, 6);
    put_str(&pk, "t");
    put_str(&pk, "leave");
    put_str(&pk, "gid");
    put_str(&pk, "g");
    put_str(&pk, "future");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 1.5);
    msgpack_pack_map(&pk, 0);
    msgpack_pack_int(&pk, -3);
    put_str(&pk, "int key");
    msgpack_pack_nil(&pk);
    msgpack_pack_true(&pk);
    msgpack_pack_bin_with_body(&pk, "gid", 3);
    put_str(&pk, "not the gid");
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_eq(req.t, PR_REQ_LEAVE);
    cr_assert(slice_is(req.gid, "g"));
}
