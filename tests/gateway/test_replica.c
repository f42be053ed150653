/*
 * gwc_replica's client rule, frame by frame, with no server: what it asks next after a
 * given sequence of answers and pushes. gw_converge runs it against the real gateway
 * (test_converge.c); here the orderings that a run meets only now and then are played
 * in a fixed order.
 */
#include "gwc_replica.h"

#include <criterion/criterion.h>
#include <msgpack.h>
#include <string.h>

/* ---- frames ----------------------------------------------------------------------- */

static void kv_s(msgpack_packer *p, const char *k, const char *v)
{
    msgpack_pack_str_with_body(p, k, strlen(k));
    msgpack_pack_str_with_body(p, v, strlen(v));
}

static void kv_u(msgpack_packer *p, const char *k, uint64_t v)
{
    msgpack_pack_str_with_body(p, k, strlen(k));
    msgpack_pack_uint64(p, v);
}

static void kv_b(msgpack_packer *p, const char *k, bool v)
{
    msgpack_pack_str_with_body(p, k, strlen(k));
    if (v)
        msgpack_pack_true(p);
    else
        msgpack_pack_false(p);
}

/* A message entry as pages and `msg` carry it (6 pairs). */
static void entry(msgpack_packer *p, uint64_t mid, uint64_t ver, uint64_t cseq, const char *body)
{
    msgpack_pack_map(p, 6);
    kv_u(p, "mid", mid);
    kv_u(p, "ts", 1000 + mid);
    kv_u(p, "ver", ver);
    kv_s(p, "from", "bob");
    kv_s(p, "body", body);
    kv_u(p, "cseq", cseq);
}

/* A frame being written: begin, pack its map, then feed it to the replica. */
typedef struct frame {
    msgpack_sbuffer sb;
    msgpack_packer p;
} frame;

static msgpack_packer *begin(frame *f)
{
    msgpack_sbuffer_init(&f->sb);
    msgpack_packer_init(&f->p, &f->sb, msgpack_sbuffer_write);
    return &f->p;
}

static void feed(gwc_rep *r, frame *f)
{
    cr_assert_eq(gwc_rep_frame(r, (const uint8_t *)f->sb.data, f->sb.size), 0);
    msgpack_sbuffer_destroy(&f->sb);
}

static void welcome(gwc_rep *r, uint64_t last_mid)
{
    frame f;
    msgpack_packer *p = begin(&f);
    msgpack_pack_map(p, 2);
    kv_s(p, "t", "welcome");
    msgpack_pack_str_with_body(p, "groups", 6);
    msgpack_pack_array(p, 1);
    msgpack_pack_map(p, 4);
    kv_s(p, "gid", "g");
    kv_u(p, "first_mid", 1);
    kv_u(p, "last_mid", last_mid);
    kv_u(p, "last_cseq", 0);
    feed(r, &f);
}

/* A page of mids [from, to], each of version ver and change cseq. */
static void page(gwc_rep *r, uint64_t first_mid, uint64_t from, uint64_t to, uint64_t last_mid,
                 uint64_t last_cseq, bool more, uint64_t ver, uint64_t cseq)
{
    frame f;
    msgpack_packer *p = begin(&f);
    msgpack_pack_map(p, 7);
    kv_s(p, "t", "page");
    kv_s(p, "gid", "g");
    kv_u(p, "first_mid", first_mid);
    kv_u(p, "last_mid", last_mid);
    kv_u(p, "last_cseq", last_cseq);
    kv_b(p, "more", more);
    msgpack_pack_str_with_body(p, "msgs", 4);
    msgpack_pack_array(p, (uint32_t)(to - from + 1));
    for (uint64_t m = from; m <= to; m++)
        entry(p, m, ver, cseq, ver ? "edited" : "first");
    feed(r, &f);
}

static void push_msg(gwc_rep *r, uint64_t mid)
{
    frame f;
    msgpack_packer *p = begin(&f);
    msgpack_pack_map(p, 8);
    kv_s(p, "t", "msg");
    kv_s(p, "gid", "g");
    kv_u(p, "mid", mid);
    kv_u(p, "ts", 1000 + mid);
    kv_u(p, "ver", 0);
    kv_s(p, "from", "bob");
    kv_s(p, "body", "first");
    kv_u(p, "cseq", 0);
    feed(r, &f);
}

static void changed(gwc_rep *r, uint64_t last_cseq)
{
    frame f;
    msgpack_packer *p = begin(&f);
    msgpack_pack_map(p, 3);
    kv_s(p, "t", "changed");
    kv_s(p, "gid", "g");
    kv_u(p, "last_cseq", last_cseq);
    feed(r, &f);
}

/* The answer to `changes` when the log no longer reaches the cursor. */
static void changes_gone(gwc_rep *r, uint64_t first_mid, uint64_t last_mid, uint64_t last_cseq)
{
    frame f;
    msgpack_packer *p = begin(&f);
    msgpack_pack_map(p, 10);
    kv_s(p, "t", "changes");
    kv_s(p, "gid", "g");
    kv_u(p, "after", 0);
    kv_u(p, "upto", 0);
    kv_u(p, "last_cseq", last_cseq);
    kv_u(p, "first_mid", first_mid);
    kv_u(p, "last_mid", last_mid);
    kv_b(p, "more", false);
    kv_u(p, "changes_gone_before", last_cseq - 2);
    msgpack_pack_str_with_body(p, "msgs", 4);
    msgpack_pack_array(p, 0);
    feed(r, &f);
}

/* The replica's next request: its t and its after ("" and 0 when it has none). */
static void next(gwc_rep *r, char t[16], uint64_t *after)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    t[0] = 0;
    *after = 0;
    int rc = gwc_rep_next_request(r, &sb, 1000000);
    cr_assert_geq(rc, 0);
    if (rc == 1) {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        cr_assert_eq(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
        const msgpack_object_map *m = &u.data.via.map;
        for (uint32_t i = 0; i < m->size; i++) {
            const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
            if (k->via.str.size == 1 && k->via.str.ptr[0] == 't')
                snprintf(t, 16, "%.*s", (int)v->via.str.size, v->via.str.ptr);
            if (k->via.str.size == 5 && !memcmp(k->via.str.ptr, "after", 5))
                *after = v->via.u64;
        }
        msgpack_unpacked_destroy(&u);
    }
    msgpack_sbuffer_destroy(&sb);
}

static void expect(gwc_rep *r, const char *t, uint64_t after)
{
    char got[16];
    uint64_t a;
    next(r, got, &a);
    cr_assert_str_eq(got, t, "the next request: %s, not %s", got[0] ? got : "none", t);
    cr_assert_eq(a, after, "%s after %llu, not %llu", t, (unsigned long long)a,
                 (unsigned long long)after);
}

/* Mids 1-3 held at version 0, the cursor 0. */
static gwc_rep *three_held(void)
{
    gwc_rep *r = gwc_rep_new("alice", NULL, NULL);
    cr_assert_not_null(r);
    welcome(r, 3);
    expect(r, "pull", 0);
    page(r, 1, 1, 3, 3, 0, false, 0, 0);
    expect(r, "", 0);
    cr_assert(gwc_rep_idle(r));
    return r;
}

static void assert_edited(gwc_rep *r, uint64_t from, uint64_t to)
{
    for (uint64_t mid = from; mid <= to; mid++) {
        gwc_rep_msg m;
        cr_assert_eq(gwc_rep_get(r, "g", mid, &m), 0, "mid %llu held", (unsigned long long)mid);
        cr_assert_eq(m.ver, 1, "mid %llu: the edit the re-read carried", (unsigned long long)mid);
    }
}

/* changes_gone_before while a page that fills the top is in flight: that page's answer
 * does not end the re-read of the window held, which still starts at the horizon. */
Test(replica, a_reread_after_changes_gone_before_outlives_a_page_in_flight)
{
    gwc_rep *r = three_held();
    changed(r, 10);
    expect(r, "changes", 0);
    push_msg(r, 5); /* 4 is missing: a page after the top (3) */
    expect(r, "pull", 3);
    changes_gone(r, 1, 5, 10);
    page(r, 1, 4, 5, 5, 10, false, 0, 0); /* the page of 4 and 5 answers */
    cr_assert_not(gwc_rep_idle(r), "the window is still to be read again");
    expect(r, "pull", 0);
    page(r, 1, 1, 5, 5, 10, false, 1, 9); /* the edits the log no longer held */
    assert_edited(r, 1, 5);
    expect(r, "", 0);
    cr_assert(gwc_rep_idle(r));
    uint64_t cursor;
    cr_assert_eq(gwc_rep_group_state(r, "g", &cursor, NULL, NULL), 0);
    cr_assert_eq(cursor, 10);
    gwc_rep_free(r);
}

/* The horizon moving and a push between the re-read's pages: it goes on where it was. */
Test(replica, a_reread_goes_on_through_a_horizon_move_and_pushes)
{
    gwc_rep *r = three_held();
    page(r, 1, 4, 6, 6, 0, false, 0, 0); /* 4-6 held too (a page read on the way) */
    changed(r, 10);
    expect(r, "changes", 0);
    changes_gone(r, 1, 6, 10);
    expect(r, "pull", 0);
    page(r, 2, 2, 3, 6, 10, true, 1, 9); /* the horizon is 2 now; more to come */
    push_msg(r, 8);                      /* 7 missing: the top wants a page too */
    expect(r, "pull", 3);                /* the re-read first, from where it was */
    page(r, 2, 4, 6, 8, 10, false, 1, 9);
    assert_edited(r, 2, 6);
    expect(r, "pull", 6); /* then the top: 7 */
    page(r, 2, 7, 8, 8, 10, false, 0, 0);
    expect(r, "", 0);
    cr_assert(gwc_rep_idle(r));
    gwc_rep_msg m;
    cr_assert_neq(gwc_rep_get(r, "g", 1, &m), 0, "mid 1 went with the horizon");
    gwc_rep_free(r);
}
