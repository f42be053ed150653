/* Issue 36 on the wire: changes and react both ways, the server's changes, reacted and
 * changed, and the cseq/last_cseq fields the older messages gained. */
#include "proto_test.h"

PROTO_DECODE_SUITE(changes);

static int req_sb(void)
{
    memset(&err, 0, sizeof err);
    return pr_decode_req(dec, (const uint8_t *)sb.data, sb.size, &req, &err);
}

static collect got;

static int events_sb(void)
{
    memset(&got, 0, sizeof got);
    memset(&err, 0, sizeof err);
    return pr_decode_events(dec, (const uint8_t *)sb.data, sb.size, collect_cb, &got, &err);
}

Test(changes, changes_request_roundtrip)
{
    cr_assert_eq(pr_enc_changes_req(&sb, 7, S("g1"), 42, 10), 0);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_eq(req.t, PR_REQ_CHANGES);
    cr_assert(slice_is(req.gid, "g1"));
    cr_assert_eq(req.after, 42);
    cr_assert_eq(req.limit, 10);
    cr_assert_eq(req.rid, 7);

    /* No limit: the page default; over the maximum: clamped. */
    sb.size = 0;
    cr_assert_eq(pr_enc_changes_req(&sb, PR_NO_RID, S("g1"), 0, 0), 0);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_eq(req.limit, PR_PAGE_DEFAULT);
    cr_assert_eq(req.after, 0);
    sb.size = 0;
    cr_assert_eq(pr_enc_changes_req(&sb, PR_NO_RID, S("g1"), 0, 100000), 0);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_eq(req.limit, PR_PAGE_MAX);
}

Test(changes, changes_request_errors)
{
    /* after is required. */
    put_frame(&pk, "{s:s, s:s}", "t", "changes", "gid", "g");
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "after"), "%s", err.msg);
    /* limit 0 */
    sb.size = 0;
    put_frame(&pk, "{s:s, s:s, s:u, s:u}", "t", "changes", "gid", "g", "after", 1, "limit", 0);
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "limit"), "%s", err.msg);
}

Test(changes, react_roundtrip)
{
    cr_assert_eq(pr_enc_react(&sb, 3, S("g1"), 9, S("\xf0\x9f\x91\x8d"), true), 0);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_eq(req.t, PR_REQ_REACT);
    cr_assert(slice_is(req.key, "\xf0\x9f\x91\x8d"));
    cr_assert_eq(req.mid, 9);
    cr_assert(req.on);
    sb.size = 0;
    cr_assert_eq(pr_enc_react(&sb, 3, S("g1"), 9, S("+1"), false), 0);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    cr_assert_not(req.on);
}

Test(changes, react_errors)
{
    static const char *const bad[] = {
        "",                                  /* empty */
        "123456789012345678901234567890123", /* 33 bytes */
        "a\tb",                              /* a control character */
        "a\x7f",                             /* DEL */
        "\xc3",                              /* cut UTF-8 */
        "\xc0\xaf",                          /* overlong */
        "\xed\xa0\x80",                      /* a surrogate */
        "\xff",                              /* never UTF-8 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sb.size = 0;
        cr_assert_eq(pr_enc_react(&sb, 1, S("g"), 1, S(bad[i]), true), 0);
        cr_assert_eq(req_sb(), PR_E_BAD_FIELD, "key %zu", i);
        cr_assert(strstr(err.msg, "key"), "%s", err.msg);
        cr_assert(req.has_rid);
    }
    /* 32 bytes exactly is fine, and a 4-byte emoji too. */
    sb.size = 0;
    cr_assert_eq(pr_enc_react(&sb, 1, S("g"), 1, S("12345678901234567890123456789012"), true), 0);
    cr_assert_eq(req_sb(), 0, "%s", err.msg);
    /* mid 0, on missing, on not a bool */
    sb.size = 0;
    cr_assert_eq(pr_enc_react(&sb, 1, S("g"), 0, S("x"), true), 0);
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
    sb.size = 0;
    put_frame(&pk, "{s:s, s:s, s:u, s:s}", "t", "react", "gid", "g", "mid", 1, "key", "x");
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "'on'"), "%s", err.msg);
    sb.size = 0;
    put_frame(&pk, "{s:s, s:s, s:u, s:s, s:u}", "t", "react", "gid", "g", "mid", 1, "key", "x",
              "on", 1);
    cr_assert_eq(req_sb(), PR_E_BAD_FIELD);
}

Test(changes, changes_reply_roundtrip)
{
    msgpack_sbuffer rec;
    msgpack_sbuffer_init(&rec);
    cr_assert_eq(pr_enc_record(&rec, S("alice"), (pr_body){S("hi"), false}), 0);
    pr_slice r = {(const uint8_t *)rec.data, rec.size};
    msgpack_sbuffer tomb;
    msgpack_sbuffer_init(&tomb);
    cr_assert_eq(pr_enc_tombstone(&tomb, S("bob")), 0);
    pr_slice t = {(const uint8_t *)tomb.data, tomb.size};

    pr_changes c = {S("g1"), 4, 9, 12, 2, 30, 0, true};
    cr_assert_eq(pr_enc_changes_begin(&sb, 5, &c, 3), 0);
    pr_reaction rx[2] = {{S("+1"), 3, false}, {S("\xe2\x9d\xa4"), 1, true}};
    pr_version v1 = {.ver = 2, .ts = 77, .cseq = 6};
    cr_assert_eq(pr_enc_page_entry_r(&sb, 3, 50, &v1, r, rx, 2), 0);
    pr_version v2 = {.ver = 1, .ts = 78, .recalled = true, .cseq = 7};
    cr_assert_eq(pr_enc_page_entry_r(&sb, 4, 51, &v2, t, NULL, 0), 0);
    pr_version v3 = {.cseq = 9}; /* a reaction's change: no new version */
    cr_assert_eq(pr_enc_page_entry_r(&sb, 5, 52, &v3, r, rx, 1), 0);
    cr_assert_eq(events_sb(), 0, "%s", err.msg);
    cr_assert_eq(got.n, 1);
    const pr_event *ev = &got.ev[0];
    cr_assert_eq(ev->t, PR_EV_CHANGES);
    cr_assert_eq(ev->rid, 5);
    cr_assert(slice_is(ev->gid, "g1"));
    cr_assert_eq(ev->after, 4);
    cr_assert_eq(ev->upto, 9);
    cr_assert_eq(ev->last_cseq, 12);
    cr_assert_eq(ev->first_mid, 2);
    cr_assert_eq(ev->last_mid, 30);
    cr_assert_eq(ev->changes_gone_before, 0);
    cr_assert(ev->more);
    cr_assert_eq(ev->n_items, 3);

    pr_message m;
    pr_reaction x;
    cr_assert_eq(pr_event_message(ev, 0, &m), 0);
    cr_assert_eq(m.mid, 3);
    cr_assert_eq(m.ver, 2);
    cr_assert_eq(m.cseq, 6);
    cr_assert(slice_is(m.body.data, "hi"));
    cr_assert_eq(m.n_reactions, 2);
    cr_assert_eq(pr_message_reaction(&m, 0, &x), 0);
    cr_assert(slice_is(x.key, "+1"));
    cr_assert_eq(x.count, 3);
    cr_assert_not(x.mine);
    cr_assert_eq(pr_message_reaction(&m, 1, &x), 0);
    cr_assert(slice_is(x.key, "\xe2\x9d\xa4"));
    cr_assert_eq(x.count, 1);
    cr_assert(x.mine);
    cr_assert_eq(pr_message_reaction(&m, 2, &x), PR_E_BAD_FIELD);

    cr_assert_eq(pr_event_message(ev, 1, &m), 0);
    cr_assert(m.recalled);
    cr_assert_eq(m.cseq, 7);
    cr_assert_eq(m.n_reactions, 0);
    cr_assert(slice_is(m.from, "bob"));

    cr_assert_eq(pr_event_message(ev, 2, &m), 0);
    cr_assert_eq(m.ver, 0);
    cr_assert_eq(m.cseq, 9);
    cr_assert_eq(m.n_reactions, 1);
    cr_assert_eq(pr_message_reaction(&m, 0, &x), 0);
    cr_assert_not(x.mine);

    /* changes_gone_before, no entries */
    sb.size = 0;
    pr_changes g = {S("g1"), 1, 12, 12, 1, 30, 10, false};
    cr_assert_eq(pr_enc_changes_begin(&sb, PR_NO_RID, &g, 0), 0);
    cr_assert_eq(events_sb(), 0, "%s", err.msg);
    cr_assert_eq(got.ev[0].changes_gone_before, 10);
    cr_assert_eq(got.ev[0].n_items, 0);
    msgpack_sbuffer_destroy(&rec);
    msgpack_sbuffer_destroy(&tomb);
}

Test(changes, reacted_and_changed_roundtrip)
{
    pr_reacted r = {S("g1"), 4, S("bob"), S("+1"), true, 2, 11, false};
    cr_assert_eq(pr_enc_reacted(&sb, PR_NO_RID, &r), 0);
    r.duplicate = true;
    r.on = false;
    cr_assert_eq(pr_enc_reacted(&sb, 8, &r), 0);
    cr_assert_eq(pr_enc_changed(&sb, S("g2"), 99), 0);
    /* three maps in a row are not one frame: wrap them in a batch */
    msgpack_sbuffer body = sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    cr_assert_eq(pr_enc_batch_begin(&sb, 3), 0);
    msgpack_sbuffer_write(&sb, body.data, body.size);
    msgpack_sbuffer_destroy(&body);
    cr_assert_eq(events_sb(), 0, "%s", err.msg);
    cr_assert_eq(got.n, 3);
    cr_assert_eq(got.ev[0].t, PR_EV_REACTED);
    cr_assert_not(got.ev[0].has_rid);
    cr_assert(slice_is(got.ev[0].uid, "bob"));
    cr_assert(slice_is(got.ev[0].key, "+1"));
    cr_assert(got.ev[0].on);
    cr_assert_eq(got.ev[0].count, 2);
    cr_assert_eq(got.ev[0].cseq, 11);
    cr_assert_eq(got.ev[0].mid, 4);
    cr_assert_not(got.ev[0].duplicate);
    cr_assert_eq(got.ev[1].rid, 8);
    cr_assert(got.ev[1].duplicate);
    cr_assert_not(got.ev[1].on);
    cr_assert_eq(got.ev[2].t, PR_EV_CHANGED);
    cr_assert(slice_is(got.ev[2].gid, "g2"));
    cr_assert_eq(got.ev[2].last_cseq, 99);
}

Test(changes, cseq_on_older_messages)
{
    msgpack_sbuffer rec;
    msgpack_sbuffer_init(&rec);
    cr_assert_eq(pr_enc_record(&rec, S("alice"), (pr_body){S("new"), false}), 0);
    pr_slice r = {(const uint8_t *)rec.data, rec.size};
    pr_version v = {.ver = 1, .ts = 5, .cseq = 3};
    cr_assert_eq(pr_enc_batch_begin(&sb, 6), 0);
    cr_assert_eq(pr_enc_version(&sb, PR_NO_RID, S("g"), 2, &v, r), 0);
    cr_assert_eq(pr_enc_joined_c(&sb, 1, S("g"), 1, 10, 0, 4), 0);
    cr_assert_eq(pr_enc_left_c(&sb, PR_NO_RID, S("g"), 5), 0);
    cr_assert_eq(pr_enc_page_begin_c(&sb, 2, S("g"), 1, 10, 0, false, 6, 0), 0);
    cr_assert_eq(pr_enc_groups_begin(&sb, 3, 1), 0);
    pr_group g = {.gid = S("g"), .last_mid = 10, .first_mid = 1, .last_cseq = 8};
    cr_assert_eq(pr_enc_group_entry(&sb, &g), 0);
    cr_assert_eq(pr_enc_left(&sb, 4, S("h")), 0);
    cr_assert_eq(events_sb(), 0, "%s", err.msg);
    cr_assert_eq(got.n, 6);
    cr_assert_eq(got.ev[0].t, PR_EV_EDITED);
    cr_assert_eq(got.ev[0].msg.cseq, 3);
    cr_assert_eq(got.ev[0].cseq, 3);
    cr_assert_eq(got.ev[1].last_cseq, 4);
    cr_assert_eq(got.ev[2].cseq, 5);
    cr_assert_eq(got.ev[3].last_cseq, 6);
    pr_group gg;
    cr_assert_eq(pr_event_group(&got.ev[4], 0, &gg), 0);
    cr_assert_eq(gg.last_cseq, 8);
    cr_assert_eq(got.ev[5].cseq, 0);
    msgpack_sbuffer_destroy(&rec);
}

Test(changes, bad_reactions_refused)
{
    /* a page entry whose reactions map a key to a string */
    put_frame(&pk, "{s:s, s:s, s:u, s:u, s:F, s:[{s:u, s:s, s:u, s:s, s:{s:s}}]}", "t", "page",
              "gid", "g", "last_mid", 1, "first_mid", 1, "more", "msgs", "mid", 1, "from", "a",
              "ts", 1, "body", "b", "reactions", "+1", "two");
    cr_assert_eq(events_sb(), PR_E_BAD_FIELD);
    cr_assert(strstr(err.msg, "reactions"), "%s", err.msg);
}
