/* Every message, both directions: encode with pr_enc_*, decode, compare every field. */
#include "proto_test.h"

static msgpack_sbuffer sb;
static pr_decoder *dec;
static pr_req req;
static collect got;

static void setup(void)
{
    msgpack_sbuffer_init(&sb);
    dec = pr_decoder_new(NULL);
    cr_assert_not_null(dec);
    memset(&got, 0, sizeof got);
}

static void teardown(void)
{
    pr_decoder_free(dec);
    msgpack_sbuffer_destroy(&sb);
}

TestSuite(roundtrip, .init = setup, .fini = teardown);

/* Another frame in the same test: the buffer and the events collected start over. */
static void next_frame(void)
{
    sb.size = 0;
    got.n = 0;
}

static const uint8_t *buf_lo(void)
{
    return (const uint8_t *)sb.data;
}

/* Slices must borrow from the frame, not from a copy. */
static void assert_in_frame(pr_slice s)
{
    if (s.n == 0)
        return;
    cr_assert(s.p >= buf_lo() && s.p + s.n <= buf_lo() + sb.size, "slice outside the frame");
}

static void decode_req(void)
{
    pr_error err = {0};
    int rc = pr_decode_req(dec, buf_lo(), sb.size, &req, &err);
    cr_assert_eq(rc, 0, "pr_decode_req: %d %s", rc, err.msg);
    assert_in_frame(req.token);
    assert_in_frame(req.gid);
    assert_in_frame(req.cid);
    assert_in_frame(req.body.data);
}

static void decode_events(size_t want)
{
    pr_error err = {0};
    int rc = pr_decode_events(dec, buf_lo(), sb.size, collect_cb, &got, &err);
    cr_assert_eq(rc, 0, "pr_decode_events: %d %s", rc, err.msg);
    cr_assert_eq(got.n, want);
}

/* ---------------------------------------------------------------------------------------
 * Client to server
 */

Test(roundtrip, hello)
{
    cr_assert_eq(pr_enc_hello(&sb, 7, S("eyJhbGciOi.x.y")), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_HELLO);
    cr_assert(req.has_rid);
    cr_assert_eq(req.rid, 7);
    cr_assert(slice_is(req.token, "eyJhbGciOi.x.y"));
}

Test(roundtrip, rid_zero_is_omitted)
{
    cr_assert_eq(pr_enc_hello(&sb, PR_NO_RID, S("tok")), 0);
    decode_req();
    cr_assert_not(req.has_rid);
    cr_assert_eq(req.rid, 0);
}

Test(roundtrip, join_leave)
{
    cr_assert_eq(pr_enc_join(&sb, 1, S("room-1")), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_JOIN);
    cr_assert_eq(req.rid, 1);
    cr_assert(slice_is(req.gid, "room-1"));

    sb.size = 0;
    cr_assert_eq(pr_enc_leave(&sb, 2, S("A.b:c_d-9")), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_LEAVE);
    cr_assert_eq(req.rid, 2);
    cr_assert(slice_is(req.gid, "A.b:c_d-9"));
}

Test(roundtrip, groups_and_ping)
{
    cr_assert_eq(pr_enc_groups_req(&sb, UINT64_MAX - 1), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_GROUPS);
    cr_assert(req.has_rid);
    cr_assert_eq(req.rid, UINT64_MAX - 1);

    sb.size = 0;
    cr_assert_eq(pr_enc_ping(&sb, PR_NO_RID), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_PING);
    cr_assert_not(req.has_rid);
}

Test(roundtrip, send_str_body)
{
    pr_body body = {S("hello, world"), false};
    cr_assert_eq(pr_enc_send(&sb, 11, S("g1"), S("c-42"), body), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_SEND);
    cr_assert_eq(req.rid, 11);
    cr_assert(slice_is(req.gid, "g1"));
    cr_assert(slice_is(req.cid, "c-42"));
    cr_assert(slice_is(req.body.data, "hello, world"));
    cr_assert_not(req.body.is_bin);
}

Test(roundtrip, send_bin_body)
{
    static const uint8_t raw[] = {0x00, 0xff, 0xc1, 0x80, 0x00};
    pr_body body = {{raw, sizeof raw}, true};
    cr_assert_eq(pr_enc_send(&sb, PR_NO_RID, S("g1"), S("c1"), body), 0);
    decode_req();
    cr_assert_not(req.has_rid);
    cr_assert(req.body.is_bin);
    cr_assert(slice_eq(req.body.data, body.data));
}

Test(roundtrip, send_empty_bodies_keep_type)
{
    pr_body body = {{NULL, 0}, true};
    cr_assert_eq(pr_enc_send(&sb, PR_NO_RID, S("g"), S("c"), body), 0);
    decode_req();
    cr_assert(req.body.is_bin);
    cr_assert_eq(req.body.data.n, 0);

    sb.size = 0;
    body.is_bin = false;
    cr_assert_eq(pr_enc_send(&sb, PR_NO_RID, S("g"), S("c"), body), 0);
    decode_req();
    cr_assert_not(req.body.is_bin);
    cr_assert_eq(req.body.data.n, 0);
}

Test(roundtrip, ack)
{
    pr_ack acks[3] = {{S("g1"), 0}, {S("g2"), 17}, {S("g3"), UINT64_MAX}};
    cr_assert_eq(pr_enc_ack(&sb, acks, 3), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_ACK);
    cr_assert_not(req.has_rid);
    cr_assert_eq(req.n_acks, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_in_frame(req.acks[i].gid);
        cr_assert(slice_eq(req.acks[i].gid, acks[i].gid));
        cr_assert_eq(req.acks[i].mid, acks[i].mid);
    }
}

Test(roundtrip, ack_full_map)
{
    pr_ack acks[PR_MAX_KEYS];
    char names[PR_MAX_KEYS][24];
    for (size_t i = 0; i < PR_MAX_KEYS; i++) {
        snprintf(names[i], sizeof names[i], "g%zu", i);
        acks[i] = (pr_ack){S(names[i]), i * 1000};
    }
    cr_assert_eq(pr_enc_ack(&sb, acks, PR_MAX_KEYS), 0);
    decode_req();
    cr_assert_eq(req.n_acks, PR_MAX_KEYS);
    cr_assert(slice_is(req.acks[31].gid, "g31"));
    cr_assert_eq(req.acks[31].mid, 31000);
}

Test(roundtrip, enter)
{
    cr_assert_eq(pr_enc_enter(&sb, 3, S("g1"), 0), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_ENTER);
    cr_assert_eq(req.rid, 3);
    cr_assert(slice_is(req.gid, "g1"));
    cr_assert_eq(req.limit, PR_PAGE_DEFAULT);
    cr_assert_not(req.has_after);
    cr_assert_not(req.has_before);

    sb.size = 0;
    cr_assert_eq(pr_enc_enter(&sb, 3, S("g1"), 50), 0);
    decode_req();
    cr_assert_eq(req.limit, 50);
}

Test(roundtrip, pull_after)
{
    cr_assert_eq(pr_enc_pull(&sb, 4, S("g1"), false, 0, 10), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_PULL);
    cr_assert_eq(req.rid, 4);
    cr_assert(slice_is(req.gid, "g1"));
    cr_assert(req.has_after);
    cr_assert_not(req.has_before);
    cr_assert_eq(req.after, 0);
    cr_assert_eq(req.limit, 10);
}

Test(roundtrip, pull_before)
{
    cr_assert_eq(pr_enc_pull(&sb, PR_NO_RID, S("g1"), true, 42, 0), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_PULL);
    cr_assert_not(req.has_after);
    cr_assert(req.has_before);
    cr_assert_eq(req.before, 42);
    cr_assert_eq(req.limit, PR_PAGE_DEFAULT);
}

/* ---------------------------------------------------------------------------------------
 * Server to client
 */

static const pr_group test_groups[3] = {
    {{(const uint8_t *)"g1", 2}, 10, 1, 7, 3, 0, false, 0},
    {{(const uint8_t *)"other.group", 11}, 0, 1, 0, 0, 0, false, 0},
    {{(const uint8_t *)"g3", 2}, UINT64_MAX, 5, UINT64_MAX - 1, 1, 0, false, 0},
};

static void assert_groups(const pr_event *ev, size_t n)
{
    cr_assert_eq(ev->n_items, n);
    for (size_t i = 0; i < n; i++) {
        pr_group g;
        cr_assert_eq(pr_event_group(ev, i, &g), 0);
        assert_in_frame(g.gid);
        cr_assert(slice_eq(g.gid, test_groups[i].gid));
        cr_assert_eq(g.last_mid, test_groups[i].last_mid);
        cr_assert_eq(g.ack, test_groups[i].ack);
        cr_assert_eq(g.unread, test_groups[i].unread);
    }
    pr_group g;
    pr_message m;
    cr_assert_eq(pr_event_group(ev, n, &g), PR_E_BAD_FIELD);
    cr_assert_eq(pr_event_message(ev, 0, &m), PR_E_BAD_FIELD);
}

Test(roundtrip, welcome)
{
    pr_welcome w = {S("alice"), S("s-0001"), 1700000000123u, 20, 2000, PR_MAX_BODY_DEFAULT, false};
    cr_assert_eq(pr_enc_welcome_begin(&sb, 1, &w, 3), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(pr_enc_group_entry(&sb, &test_groups[i]), 0);
    decode_events(1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_WELCOME);
    cr_assert(ev->has_rid);
    cr_assert_eq(ev->rid, 1);
    cr_assert(slice_is(ev->welcome.uid, "alice"));
    cr_assert(slice_is(ev->welcome.sid, "s-0001"));
    cr_assert_eq(ev->welcome.ts, 1700000000123u);
    cr_assert_eq(ev->welcome.ack_every, 20);
    cr_assert_eq(ev->welcome.ack_delay_ms, 2000);
    cr_assert_eq(ev->welcome.max_body, PR_MAX_BODY_DEFAULT);
    assert_in_frame(ev->welcome.uid);
    assert_in_frame(ev->welcome.sid);
    assert_groups(ev, 3);
    cr_assert_not(ev->partial, "a whole list says nothing");
}

/* A sign-in while a shard is away (docs/PROTOCOL.md, Shards): welcome and groups say
 * `partial`, and the list still reads as ever. */
Test(roundtrip, partial_welcome_and_groups)
{
    pr_welcome w = {S("alice"), S("s-0002"), 1700000000123u, 20, 2000, PR_MAX_BODY_DEFAULT, true};
    cr_assert_eq(pr_enc_welcome_begin(&sb, 1, &w, 3), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(pr_enc_group_entry(&sb, &test_groups[i]), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_WELCOME);
    cr_assert(got.ev[0].partial);
    cr_assert_eq(got.ev[0].welcome.max_body, PR_MAX_BODY_DEFAULT);
    assert_groups(&got.ev[0], 3);

    next_frame();
    cr_assert_eq(pr_enc_groups_begin_p(&sb, 4, 3, true), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(pr_enc_group_entry(&sb, &test_groups[i]), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_GROUPS);
    cr_assert(got.ev[0].partial);
    assert_groups(&got.ev[0], 3);

    next_frame();
    cr_assert_eq(pr_enc_groups_begin_p(&sb, PR_NO_RID, 3, false), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(pr_enc_group_entry(&sb, &test_groups[i]), 0);
    decode_events(1);
    cr_assert_not(got.ev[0].has_rid, "the push once the list is whole");
    cr_assert_not(got.ev[0].partial);
    assert_groups(&got.ev[0], 3);
}

Test(roundtrip, groups)
{
    cr_assert_eq(pr_enc_groups_begin(&sb, PR_NO_RID, 0), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_GROUPS);
    cr_assert_not(got.ev[0].has_rid);
    assert_groups(&got.ev[0], 0);

    next_frame();
    cr_assert_eq(pr_enc_groups_begin(&sb, 9, 3), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(pr_enc_group_entry(&sb, &test_groups[i]), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].rid, 9);
    assert_groups(&got.ev[0], 3);
}

Test(roundtrip, joined_left)
{
    cr_assert_eq(pr_enc_joined(&sb, 5, S("g1"), 1, 99, 98), 0);
    decode_events(1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_JOINED);
    cr_assert_eq(ev->rid, 5);
    cr_assert(slice_is(ev->gid, "g1"));
    cr_assert_eq(ev->last_mid, 99);
    cr_assert_eq(ev->ack, 98);

    next_frame();
    cr_assert_eq(pr_enc_left(&sb, PR_NO_RID, S("g2")), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_LEFT);
    cr_assert_not(got.ev[0].has_rid);
    cr_assert(slice_is(got.ev[0].gid, "g2"));
}

Test(roundtrip, sent)
{
    cr_assert_eq(pr_enc_sent(&sb, 77, S("g1"), S("c-9"), 12345, 1700000000000u), 0);
    decode_events(1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_SENT);
    cr_assert_eq(ev->rid, 77);
    cr_assert(slice_is(ev->gid, "g1"));
    cr_assert(slice_is(ev->cid, "c-9"));
    assert_in_frame(ev->cid);
    cr_assert_eq(ev->mid, 12345);
    cr_assert_eq(ev->ts, 1700000000000u);
}

Test(roundtrip, notify_pong)
{
    cr_assert_eq(pr_enc_notify(&sb, S("g1"), 500), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_NOTIFY);
    cr_assert_not(got.ev[0].has_rid);
    cr_assert(slice_is(got.ev[0].gid, "g1"));
    cr_assert_eq(got.ev[0].last_mid, 500);

    next_frame();
    cr_assert_eq(pr_enc_pong(&sb, 8, 123), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_PONG);
    cr_assert_eq(got.ev[0].rid, 8);
    cr_assert_eq(got.ev[0].ts, 123);
}

Test(roundtrip, msg)
{
    msgpack_sbuffer rec;
    msgpack_sbuffer_init(&rec);
    pr_body body = {S("hi there"), false};
    cr_assert_eq(pr_enc_record(&rec, S("bob"), body), 0);
    cr_assert_eq(pr_enc_msg(&sb, S("g1"), 3, 1000, (pr_slice){(uint8_t *)rec.data, rec.size}), 0);
    msgpack_sbuffer_destroy(&rec);
    decode_events(1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_MSG);
    cr_assert_not(ev->has_rid);
    cr_assert(slice_is(ev->gid, "g1"));
    cr_assert_eq(ev->msg.mid, 3);
    cr_assert_eq(ev->msg.ts, 1000);
    cr_assert(slice_is(ev->msg.from, "bob"));
    cr_assert(slice_is(ev->msg.body.data, "hi there"));
    cr_assert_not(ev->msg.body.is_bin);
    assert_in_frame(ev->msg.body.data);
}

Test(roundtrip, record_is_two_pairs_without_header)
{
    static const uint8_t want[] = {0xa4, 'f', 'r', 'o', 'm',  0xa1, 'u',  0xa4,
                                   'b',  'o', 'd', 'y', 0xc4, 0x02, 0x00, 0xff};
    static const uint8_t raw[] = {0x00, 0xff};
    cr_assert_eq(pr_enc_record(&sb, S("u"), (pr_body){{raw, 2}, true}), 0);
    cr_assert_eq(sb.size, sizeof want);
    cr_assert_arr_eq(sb.data, want, sizeof want);
}

static msgpack_sbuffer make_record(const char *from, pr_body body)
{
    msgpack_sbuffer rec;
    msgpack_sbuffer_init(&rec);
    cr_assert_eq(pr_enc_record(&rec, S(from), body), 0);
    return rec;
}

#define REC(r) ((pr_slice){(const uint8_t *)(r).data, (r).size})

Test(roundtrip, page)
{
    static const uint8_t raw[] = {1, 2, 3, 0};
    pr_message want[3] = {
        {10, S("alice"), 100, {S("first"), false}, 0, false, 0, 0, NULL, NULL},
        {11, S("bob"), 101, {{raw, sizeof raw}, true}, 0, false, 0, 0, NULL, NULL},
        {12, S("alice"), 102, {{NULL, 0}, false}, 0, false, 0, 0, NULL, NULL},
    };
    cr_assert_eq(pr_enc_page_begin(&sb, 6, S("g1"), 1, 20, 0, true, 3), 0);
    for (size_t i = 0; i < 3; i++) {
        msgpack_sbuffer rec = make_record((const char *)want[i].from.p, want[i].body);
        cr_assert_eq(pr_enc_page_entry(&sb, want[i].mid, want[i].ts, REC(rec)), 0);
        msgpack_sbuffer_destroy(&rec);
    }
    decode_events(1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_PAGE);
    cr_assert_eq(ev->rid, 6);
    cr_assert(slice_is(ev->gid, "g1"));
    cr_assert_eq(ev->last_mid, 20);
    cr_assert(ev->more);
    cr_assert_eq(ev->n_items, 3);
    for (size_t i = 0; i < 3; i++) {
        pr_message m;
        cr_assert_eq(pr_event_message(ev, i, &m), 0);
        cr_assert_eq(m.mid, want[i].mid);
        cr_assert_eq(m.ts, want[i].ts);
        cr_assert(slice_eq(m.from, want[i].from));
        cr_assert(slice_eq(m.body.data, want[i].body.data));
        cr_assert_eq(m.body.is_bin, want[i].body.is_bin);
        assert_in_frame(m.from);
        assert_in_frame(m.body.data);
    }
    pr_message m;
    pr_group g;
    cr_assert_eq(pr_event_message(ev, 3, &m), PR_E_BAD_FIELD);
    cr_assert_eq(pr_event_group(ev, 0, &g), PR_E_BAD_FIELD);
}

/* Retention's horizon: a page says first_mid, and gone_before when it was asked from below
 * it; joined says first_mid; a server before retention says neither (read as 1 and 0). */
Test(roundtrip, the_horizon_in_pages_and_joined)
{
    cr_assert_eq(pr_enc_batch_begin(&sb, 2), 0);
    cr_assert_eq(pr_enc_page_begin(&sb, 7, S("g1"), 16, 20, 16, false, 0), 0);
    cr_assert_eq(pr_enc_joined(&sb, 8, S("g1"), 16, 20, 3), 0);
    decode_events(2);
    cr_assert_eq(got.ev[0].first_mid, 16);
    cr_assert_eq(got.ev[0].gone_before, 16);
    cr_assert_eq(got.ev[1].t, PR_EV_JOINED);
    cr_assert_eq(got.ev[1].first_mid, 16);
    sb.size = got.n = 0;
    cr_assert_eq(pr_enc_page_begin(&sb, 9, S("g1"), 1, 20, 0, false, 0), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].first_mid, 1);
    cr_assert_eq(got.ev[0].gone_before, 0, "left out when nothing below was asked");
    /* An older server's page: no first_mid at all. */
    static const uint8_t old[] = {0x86, 0xa1, 't',  0xa4, 'p', 'a', 'g', 'e',  0xa3, 'g', 'i',
                                  'd',  0xa1, 'g',  0xa8, 'l', 'a', 's', 't',  '_',  'm', 'i',
                                  'd',  0x05, 0xa4, 'm',  'o', 'r', 'e', 0xc2, 0xa4, 'm', 's',
                                  'g',  's',  0x90, 0xa3, 'r', 'i', 'd', 0x01};
    sb.size = got.n = 0;
    msgpack_sbuffer_write(&sb, (const char *)old, sizeof old);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_PAGE);
    cr_assert_eq(got.ev[0].first_mid, 1, "nothing is gone");
    cr_assert_eq(got.ev[0].last_mid, 5);
}

Test(roundtrip, empty_page)
{
    cr_assert_eq(pr_enc_page_begin(&sb, PR_NO_RID, S("g1"), 1, 0, 0, false, 0), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_PAGE);
    cr_assert_not(got.ev[0].more);
    cr_assert_eq(got.ev[0].n_items, 0);
}

Test(roundtrip, err)
{
    cr_assert_eq(pr_enc_err(&sb, 5, PR_E_BAD_FIELD, "send: field 'gid' is missing", S("g1")), 0);
    decode_events(1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_ERR);
    cr_assert(ev->has_rid);
    cr_assert_eq(ev->rid, 5);
    cr_assert_eq(ev->err_code, PR_E_BAD_FIELD);
    cr_assert(slice_is(ev->err_name, "bad_field"));
    cr_assert(slice_is(ev->err_msg, "send: field 'gid' is missing"));
    cr_assert(slice_is(ev->gid, "g1"));

    next_frame();
    cr_assert_eq(pr_enc_err(&sb, PR_NO_RID, PR_E_TOO_LARGE, NULL, (pr_slice){NULL, 0}), 0);
    decode_events(1);
    cr_assert_not(got.ev[0].has_rid);
    cr_assert_eq(got.ev[0].err_code, PR_E_TOO_LARGE);
    cr_assert_eq(got.ev[0].err_msg.n, 0);
    cr_assert_eq(got.ev[0].gid.n, 0);
}

Test(roundtrip, err_with_retry_hint)
{
    cr_assert_eq(pr_enc_err_retry(&sb, 3, PR_E_RATE_LIMITED, "too many sends", S("g1"), 250), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].err_code, PR_E_RATE_LIMITED);
    cr_assert_eq(got.ev[0].retry_ms, 250);
    cr_assert(slice_is(got.ev[0].gid, "g1"));
    /* 0 leaves the field out; an err without it decodes with retry_ms 0. */
    next_frame();
    cr_assert_eq(pr_enc_err_retry(&sb, PR_NO_RID, PR_E_OVERLOADED, "busy", S(""), 0), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].retry_ms, 0);
}

Test(roundtrip, err_unknown_code)
{
    cr_assert_eq(pr_enc_err(&sb, PR_NO_RID, -99, "boom", (pr_slice){NULL, 0}), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].err_code, PR_E_INTERNAL);
    cr_assert(slice_is(got.ev[0].err_name, "internal"));

    /* A code this module has no PR_E* for still decodes, with err_code 0. */
    next_frame();
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    put_frame(&pk, "{s:s, s:s, s:s}", "t", "err", "code", "teapot", "msg",
              "a code from a newer server");
    decode_events(1);
    cr_assert_eq(got.ev[0].err_code, 0);
    cr_assert(slice_is(got.ev[0].err_name, "teapot"));
}

Test(roundtrip, err_names)
{
    /* Every protocol code survives a round trip to its PR_E* value. */
    for (int code = PR_E_BAD_FRAME; code >= PR_E_LAST; code--) {
        if (code == PR_E_NOMEM)
            continue;
        next_frame();
        cr_assert_eq(pr_enc_err(&sb, PR_NO_RID, code, "x", (pr_slice){NULL, 0}), 0);
        decode_events(1);
        cr_assert_eq(got.ev[0].err_code, code, "code %s", pr_err_name(code));
    }
    cr_assert_str_eq(pr_err_name(PR_E_BAD_FRAME), "bad_frame");
    cr_assert_str_eq(pr_err_name(PR_E_BAD_TYPE), "bad_type");
    cr_assert_str_eq(pr_err_name(PR_E_BAD_FIELD), "bad_field");
    cr_assert_str_eq(pr_err_name(PR_E_TOO_LARGE), "too_large");
    cr_assert_str_eq(pr_err_name(PR_E_UNAUTHORIZED), "unauthorized");
    cr_assert_str_eq(pr_err_name(PR_E_NOT_MEMBER), "not_member");
    cr_assert_str_eq(pr_err_name(PR_E_NO_GROUP), "no_group");
    cr_assert_str_eq(pr_err_name(PR_E_RATE_LIMITED), "rate_limited");
    cr_assert_str_eq(pr_err_name(PR_E_OVERLOADED), "overloaded");
    cr_assert_str_eq(pr_err_name(PR_E_INTERNAL), "internal");
    cr_assert_str_eq(pr_err_name(PR_E_UNAVAILABLE), "unavailable");
    cr_assert_str_eq(pr_err_name(PR_E_NOMEM), "internal");
    cr_assert_str_eq(pr_err_name(0), "internal");
    cr_assert_str_eq(pr_err_name(12345), "internal");
}

/* A batch of server messages decodes to the same events, in order. */
Test(roundtrip, batch)
{
    cr_assert_eq(pr_enc_batch_begin(&sb, 5), 0);
    cr_assert_eq(pr_enc_pong(&sb, 1, 10), 0);
    msgpack_sbuffer rec = make_record("carol", (pr_body){S("x"), false});
    cr_assert_eq(pr_enc_msg(&sb, S("g1"), 4, 44, REC(rec)), 0);
    cr_assert_eq(pr_enc_page_begin(&sb, 2, S("g2"), 1, 9, 0, false, 2), 0);
    cr_assert_eq(pr_enc_page_entry(&sb, 8, 80, REC(rec)), 0);
    cr_assert_eq(pr_enc_page_entry(&sb, 9, 90, REC(rec)), 0);
    msgpack_sbuffer_destroy(&rec);
    cr_assert_eq(pr_enc_notify(&sb, S("g3"), 33), 0);
    cr_assert_eq(pr_enc_err(&sb, 3, PR_E_BAD_TYPE, "nope", (pr_slice){NULL, 0}), 0);
    decode_events(5);

    cr_assert_eq(got.ev[0].t, PR_EV_PONG);
    cr_assert_eq(got.ev[0].ts, 10);
    cr_assert_eq(got.ev[1].t, PR_EV_MSG);
    cr_assert_eq(got.ev[1].msg.mid, 4);
    cr_assert(slice_is(got.ev[1].msg.from, "carol"));
    cr_assert_eq(got.ev[2].t, PR_EV_PAGE);
    cr_assert_eq(got.ev[2].rid, 2);
    cr_assert_eq(got.ev[2].n_items, 2);
    pr_message m;
    cr_assert_eq(pr_event_message(&got.ev[2], 1, &m), 0);
    cr_assert_eq(m.mid, 9);
    cr_assert_eq(m.ts, 90);
    cr_assert(slice_is(m.body.data, "x"));
    cr_assert_eq(got.ev[3].t, PR_EV_NOTIFY);
    cr_assert(slice_is(got.ev[3].gid, "g3"));
    cr_assert_eq(got.ev[4].t, PR_EV_ERR);
    cr_assert_eq(got.ev[4].err_code, PR_E_BAD_TYPE);
}

Test(roundtrip, empty_batch)
{
    cr_assert_eq(pr_enc_batch_begin(&sb, 0), 0);
    decode_events(0);
}

/* A push and a page entry made from the same record carry the same message. */
static void same_record(pr_body body)
{
    msgpack_sbuffer rec = make_record("dave", body);
    cr_assert_eq(pr_enc_batch_begin(&sb, 2), 0);
    cr_assert_eq(pr_enc_msg(&sb, S("g1"), 7, 70, REC(rec)), 0);
    cr_assert_eq(pr_enc_page_begin(&sb, PR_NO_RID, S("g1"), 1, 7, 0, false, 1), 0);
    cr_assert_eq(pr_enc_page_entry(&sb, 7, 70, REC(rec)), 0);
    msgpack_sbuffer_destroy(&rec);
    decode_events(2);

    pr_message push = got.ev[0].msg, entry;
    cr_assert_eq(pr_event_message(&got.ev[1], 0, &entry), 0);
    cr_assert_eq(push.mid, entry.mid);
    cr_assert_eq(push.ts, entry.ts);
    cr_assert(slice_eq(push.from, entry.from));
    cr_assert(slice_eq(push.body.data, entry.body.data));
    cr_assert(slice_eq(push.body.data, body.data));
    cr_assert_eq(push.body.is_bin, body.is_bin);
    cr_assert_eq(entry.body.is_bin, body.is_bin);
}

Test(roundtrip, push_and_page_entry_agree_str)
{
    same_record((pr_body){S("same text"), false});
}

Test(roundtrip, push_and_page_entry_agree_bin)
{
    static const uint8_t raw[300] = {0xde, 0xad, 0xbe, 0xef};
    same_record((pr_body){{raw, sizeof raw}, true});
}

/* The decoder is reusable: each decode replaces the previous one's objects. */
Test(roundtrip, decoder_reuse)
{
    for (int i = 0; i < 1000; i++) {
        sb.size = 0;
        cr_assert_eq(pr_enc_pull(&sb, (uint64_t)i + 1, S("g1"), i % 2, (uint64_t)i + 1, 7), 0);
        decode_req();
        cr_assert_eq(req.rid, (uint64_t)i + 1);
        cr_assert_eq(req.limit, 7);
    }
}

/* A count or length MessagePack cannot express is refused, and the buffer is left as it
 * was (the same rollback covers PR_E_NOMEM). */
Test(roundtrip, encoder_refuses_oversized_and_rolls_back)
{
    cr_assert_eq(pr_enc_ping(&sb, 1), 0);
    size_t before = sb.size;
    cr_assert_eq(pr_enc_batch_begin(&sb, (size_t)UINT32_MAX + 1), PR_E_TOO_LARGE);
    cr_assert_eq(sb.size, before);
    /* The length is checked before the bytes are read, so a short buffer is safe here. */
    pr_slice huge = {(const uint8_t *)"x", (size_t)UINT32_MAX + 1};
    cr_assert_eq(pr_enc_hello(&sb, 5, huge), PR_E_TOO_LARGE);
    cr_assert_eq(sb.size, before);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_PING);
}

/* rid 0 is a rid like any other: sent, decoded and echoed; PR_NO_RID leaves it out. */
Test(roundtrip, rid_zero_is_a_rid)
{
    cr_assert_eq(pr_enc_ping(&sb, 0), 0);
    decode_req();
    cr_assert(req.has_rid);
    cr_assert_eq(req.rid, 0);
    sb.size = 0;
    cr_assert_eq(pr_enc_pong(&sb, 0, 5), 0);
    decode_events(1);
    cr_assert(got.ev[0].has_rid);
    cr_assert_eq(got.ev[0].rid, 0);
    next_frame();
    cr_assert_eq(pr_enc_pong(&sb, PR_NO_RID, 5), 0);
    decode_events(1);
    cr_assert_not(got.ev[0].has_rid);
}

/* A message's later versions: edit and recall requests, the edited and recalled events,
 * and page entries that carry ver, or recalled with no body. */
Test(roundtrip, edits_and_recalls)
{
    pr_body body = {S("fixed typo"), false};
    cr_assert_eq(pr_enc_edit(&sb, 3, S("g1"), 7, 2, body), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_EDIT);
    cr_assert(slice_is(req.gid, "g1"));
    cr_assert_eq(req.mid, 7);
    cr_assert_eq(req.ver, 2);
    cr_assert(slice_eq(req.body.data, body.data));
    msgpack_sbuffer_clear(&sb);
    cr_assert_eq(pr_enc_edit(&sb, 4, S("g1"), 7, 0, body), 0);
    decode_req();
    cr_assert_eq(req.ver, 0, "left out: the next");
    msgpack_sbuffer_clear(&sb);
    cr_assert_eq(pr_enc_recall(&sb, 5, S("g1"), 7), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_RECALL);
    cr_assert_eq(req.mid, 7);

    msgpack_sbuffer rec = make_record("alice", body);
    pr_version v = {.ver = 2, .ts = 1234};
    msgpack_sbuffer_clear(&sb);
    cr_assert_eq(pr_enc_version(&sb, 9, S("g1"), 7, &v, REC(rec)), 0);
    got.n = 0;
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_EDITED);
    cr_assert_eq(got.ev[0].rid, 9);
    cr_assert_eq(got.ev[0].msg.mid, 7);
    cr_assert_eq(got.ev[0].msg.ver, 2);
    cr_assert_eq(got.ev[0].msg.ts, 1234);
    cr_assert(slice_is(got.ev[0].msg.from, "alice"));
    cr_assert(slice_eq(got.ev[0].msg.body.data, body.data));
    cr_assert_not(got.ev[0].msg.recalled);

    msgpack_sbuffer tomb;
    msgpack_sbuffer_init(&tomb);
    cr_assert_eq(pr_enc_tombstone(&tomb, S("alice")), 0);
    pr_version r = {.ver = 3, .ts = 1300, .recalled = true};
    msgpack_sbuffer_clear(&sb);
    cr_assert_eq(pr_enc_version(&sb, PR_NO_RID, S("g1"), 7, &r, REC(tomb)), 0);
    got.n = 0;
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_RECALLED);
    cr_assert_not(got.ev[0].has_rid);
    cr_assert_eq(got.ev[0].msg.ver, 3);
    cr_assert(got.ev[0].msg.recalled);
    cr_assert(slice_is(got.ev[0].msg.from, "alice"));
    cr_assert_eq(got.ev[0].msg.body.data.n, 0);

    msgpack_sbuffer_clear(&sb);
    cr_assert_eq(pr_enc_page_begin(&sb, 6, S("g1"), 1, 8, 0, false, 3), 0);
    cr_assert_eq(pr_enc_page_entry(&sb, 6, 90, REC(rec)), 0);
    cr_assert_eq(pr_enc_page_entry_v(&sb, 7, 100, &r, REC(tomb)), 0);
    cr_assert_eq(pr_enc_page_entry_v(&sb, 8, 110, &v, REC(rec)), 0);
    got.n = 0;
    decode_events(1);
    pr_message m;
    cr_assert_eq(pr_event_message(&got.ev[0], 0, &m), 0);
    cr_assert(m.ver == 0 && !m.recalled && m.body.data.n == body.data.n);
    cr_assert_eq(pr_event_message(&got.ev[0], 1, &m), 0);
    cr_assert(m.ver == 3 && m.recalled && m.body.data.n == 0 && m.ts == 100);
    cr_assert(slice_is(m.from, "alice"));
    cr_assert_eq(pr_event_message(&got.ev[0], 2, &m), 0);
    cr_assert(m.ver == 2 && !m.recalled && slice_eq(m.body.data, body.data));

    /* A stored tombstone reads back as recalled; a record is not. */
    pr_message d;
    cr_assert_eq(pr_dec_record(dec, (const uint8_t *)tomb.data, tomb.size, &d), 0);
    cr_assert(d.recalled && slice_is(d.from, "alice"));
    cr_assert_eq(pr_dec_record(dec, (const uint8_t *)rec.data, rec.size, &d), 0);
    cr_assert_not(d.recalled);
    msgpack_sbuffer_destroy(&tomb);
    msgpack_sbuffer_destroy(&rec);
}
