/* What members see of each other (docs/PROTOCOL.md, Receipts, presence, typing): every new
 * message both ways, and what the decoder refuses in them. */
#include "proto_test.h"

PROTO_DECODE_SUITE(peers);

static collect got;

static const uint8_t *frame(void)
{
    return (const uint8_t *)sb.data;
}

static void decode_req(void)
{
    err = (pr_error){0};
    int rc = pr_decode_req(dec, frame(), sb.size, &req, &err);
    cr_assert_eq(rc, 0, "pr_decode_req: %d %s", rc, err.msg);
}

static int decode_req_rc(void)
{
    err = (pr_error){0};
    return pr_decode_req(dec, frame(), sb.size, &req, &err);
}

static void decode_events(size_t want)
{
    got.n = 0;
    err = (pr_error){0};
    int rc = pr_decode_events(dec, frame(), sb.size, collect_cb, &got, &err);
    cr_assert_eq(rc, 0, "pr_decode_events: %d %s", rc, err.msg);
    cr_assert_eq(got.n, want);
}

Test(peers, read_is_a_map_of_cursors_like_ack)
{
    pr_ack r[2] = {{S("g1"), 7}, {S("g2"), 0}};
    cr_assert_eq(pr_enc_read(&sb, r, 2), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_READ);
    cr_assert_eq(req.n_acks, 2);
    cr_assert(slice_is(req.acks[0].gid, "g1"));
    cr_assert_eq(req.acks[0].mid, 7);
    cr_assert_eq(req.acks[1].mid, 0);
    /* The same rules as acks: a gid twice is bad_field. */
    sb.size = 0;
    pr_ack twice[2] = {{S("g"), 1}, {S("g"), 2}};
    cr_assert_eq(pr_enc_read(&sb, twice, 2), 0);
    cr_assert_eq(decode_req_rc(), PR_E_BAD_FIELD);
    cr_assert_not_null(strstr(err.msg, "'reads'"), "%s", err.msg);
}

Test(peers, receipts_watch_presence_typing_requests)
{
    cr_assert_eq(pr_enc_receipts_req(&sb, 3, S("g"), 42), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_RECEIPTS);
    cr_assert_eq(req.rid, 3);
    cr_assert(slice_is(req.gid, "g"));
    cr_assert_eq(req.mid, 42);

    sb.size = 0;
    uint64_t mids[3] = {5, 9, 12};
    cr_assert_eq(pr_enc_watch(&sb, PR_NO_RID, S("g"), mids, 3), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_WATCH);
    cr_assert_eq(req.n_mids, 3);
    cr_assert_eq(req.mids[2], 12);
    sb.size = 0;
    cr_assert_eq(pr_enc_watch(&sb, PR_NO_RID, S("g"), NULL, 0), 0);
    decode_req();
    cr_assert_eq(req.n_mids, 0, "an empty watch stops watching");

    sb.size = 0;
    cr_assert_eq(pr_enc_presence_req(&sb, 4, S("g"), 1), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_PRESENCE);
    cr_assert(req.has_sub && req.sub);
    sb.size = 0;
    cr_assert_eq(pr_enc_presence_req(&sb, 4, S("g"), -1), 0);
    decode_req();
    cr_assert_not(req.has_sub);

    sb.size = 0;
    cr_assert_eq(pr_enc_typing(&sb, S("g")), 0);
    decode_req();
    cr_assert_eq(req.t, PR_REQ_TYPING);
    cr_assert(slice_is(req.gid, "g"));
}

Test(peers, bad_requests_are_refused_with_the_field_named)
{
    cr_assert_eq(pr_enc_receipts_req(&sb, 1, S("g"), 0), 0);
    cr_assert_eq(decode_req_rc(), PR_E_BAD_FIELD, "mid 0 names no message");
    cr_assert_not_null(strstr(err.msg, "'mid'"));

    sb.size = 0;
    uint64_t many[PR_MAX_WATCH + 1];
    for (size_t i = 0; i <= PR_MAX_WATCH; i++)
        many[i] = i + 1;
    cr_assert_eq(pr_enc_watch(&sb, 1, S("g"), many, PR_MAX_WATCH + 1), 0);
    cr_assert_eq(decode_req_rc(), PR_E_TOO_LARGE);

    sb.size = 0;
    uint64_t zero[1] = {0};
    cr_assert_eq(pr_enc_watch(&sb, 1, S("g"), zero, 1), 0);
    cr_assert_eq(decode_req_rc(), PR_E_BAD_FIELD);

    sb.size = 0; /* sub that is not a boolean */
    put_frame(&pk, "{s:s, s:s, s:u}", "t", "presence", "gid", "g", "sub", 1);
    cr_assert_eq(decode_req_rc(), PR_E_BAD_FIELD);
    cr_assert_not_null(strstr(err.msg, "'sub'"));

    sb.size = 0; /* typing without a gid */
    put_frame(&pk, "{s:s}", "t", "typing");
    cr_assert_eq(decode_req_rc(), PR_E_BAD_FIELD);
}

Test(peers, receipts_with_and_without_readers)
{
    cr_assert_eq(pr_enc_receipts_begin(&sb, 9, S("g"), 5, 3, 2, 4, 2), 0);
    cr_assert_eq(pr_enc_uid_entry(&sb, S("alice")), 0);
    cr_assert_eq(pr_enc_uid_entry(&sb, S("bob")), 0);
    decode_events(1);
    pr_event *e = &got.ev[0];
    cr_assert_eq(e->t, PR_EV_RECEIPTS);
    cr_assert_eq(e->rid, 9);
    cr_assert_eq(e->mid, 5);
    cr_assert_eq(e->delivered, 3);
    cr_assert_eq(e->read, 2);
    cr_assert_eq(e->of, 4);
    cr_assert(e->has_list);
    cr_assert_eq(e->n_items, 2);
    pr_slice u;
    cr_assert_eq(pr_event_reader(e, 1, &u), 0);
    cr_assert(slice_is(u, "bob"));
    cr_assert_eq(pr_event_reader(e, 2, &u), PR_E_BAD_FIELD);

    sb.size = 0; /* a large group: counts only */
    cr_assert_eq(pr_enc_receipts_begin(&sb, PR_NO_RID, S("big"), 5, 90000, 1200, 100000, SIZE_MAX),
                 0);
    decode_events(1);
    cr_assert_not(got.ev[0].has_list);
    cr_assert_eq(got.ev[0].of, 100000);
}

Test(peers, cursors_and_group_entries_with_read)
{
    cr_assert_eq(pr_enc_cursors_begin(&sb, S("g"), 2), 0);
    pr_cursor a = {S("alice"), 7, 5, true}, b = {S("bob"), 3, 0, false};
    cr_assert_eq(pr_enc_cursor_entry(&sb, &a), 0);
    cr_assert_eq(pr_enc_cursor_entry(&sb, &b), 0);
    decode_events(1);
    cr_assert_eq(got.ev[0].t, PR_EV_CURSORS);
    pr_cursor k;
    cr_assert_eq(pr_event_cursor(&got.ev[0], 0, &k), 0);
    cr_assert(slice_is(k.uid, "alice") && k.ack == 7 && k.has_read && k.read == 5);
    cr_assert_eq(pr_event_cursor(&got.ev[0], 1, &k), 0);
    cr_assert(slice_is(k.uid, "bob") && k.ack == 3 && !k.has_read);

    sb.size = 0;
    cr_assert_eq(pr_enc_groups_begin(&sb, 1, 2), 0);
    pr_group g1 = {S("g1"), 10, 3, 8, 6, 4, true, 0}, g2 = {S("g2"), 10, 0, 8, 2, 0, false, 0};
    cr_assert_eq(pr_enc_group_entry(&sb, &g1), 0);
    cr_assert_eq(pr_enc_group_entry(&sb, &g2), 0);
    decode_events(1);
    pr_group g;
    cr_assert_eq(pr_event_group(&got.ev[0], 0, &g), 0);
    cr_assert(g.has_read && g.read == 4 && g.unread == 6);
    cr_assert_eq(g.first_mid, 3, "the horizon");
    cr_assert_eq(pr_event_group(&got.ev[0], 1, &g), 0);
    cr_assert_not(g.has_read, "no read sent: the field is left out");
    cr_assert_eq(g.first_mid, 1, "none given: nothing is gone");
}

Test(peers, presence_online_and_typing)
{
    cr_assert_eq(pr_enc_presence_begin(&sb, 2, S("g"), 1, 2, 2), 0);
    pr_presence a = {S("alice"), true, 1796000000000ull}, b = {S("bob"), false, 0};
    cr_assert_eq(pr_enc_presence_entry(&sb, &a), 0);
    cr_assert_eq(pr_enc_presence_entry(&sb, &b), 0);
    decode_events(1);
    pr_event *e = &got.ev[0];
    cr_assert_eq(e->t, PR_EV_PRESENCE);
    cr_assert_eq(e->online, 1);
    cr_assert_eq(e->of, 2);
    pr_presence p;
    cr_assert_eq(pr_event_presence(e, 0, &p), 0);
    cr_assert(slice_is(p.uid, "alice") && p.online && p.last_seen == 1796000000000ull);
    cr_assert_eq(pr_event_presence(e, 1, &p), 0);
    cr_assert(!p.online && p.last_seen == 0);

    sb.size = 0;
    cr_assert_eq(pr_enc_batch_begin(&sb, 2), 0);
    cr_assert_eq(pr_enc_online_begin(&sb, S("g"), 1), 0);
    cr_assert_eq(pr_enc_presence_entry(&sb, &b), 0);
    cr_assert_eq(pr_enc_typing_push(&sb, S("g"), S("alice"), 5000), 0);
    decode_events(2);
    cr_assert_eq(got.ev[0].t, PR_EV_ONLINE);
    cr_assert_eq(pr_event_presence(&got.ev[0], 0, &p), 0);
    cr_assert(slice_is(p.uid, "bob"));
    cr_assert_eq(got.ev[1].t, PR_EV_TYPING);
    cr_assert(slice_is(got.ev[1].uid, "alice"));
    cr_assert_eq(got.ev[1].ttl_ms, 5000);
}

Test(peers, a_bad_entry_refuses_the_whole_frame)
{
    cr_assert_eq(pr_enc_cursors_begin(&sb, S("g"), 1), 0);
    put_frame(&pk, "{s:s, s:u}", "uid", "not an id!", "ack", 1);
    got.n = 0;
    cr_assert_eq(pr_decode_events(dec, frame(), sb.size, collect_cb, &got, &err), PR_E_BAD_FIELD);
    cr_assert_eq(got.n, 0);
}
