/*
 * Random and mutated frames through both decoders: no crash, no read outside the frame
 * (each input sits in its own exactly-sized allocation, so ASan sees any overrun), every
 * result 0 or a PR_E* code, and on success every slice inside the frame. The seed is fixed
 * so a failure reproduces; the iteration is printed in the assertion message.
 */
#include "proto_test.h"

#include <stdlib.h>

#define ITERATIONS 100000
#define MAX_RANDOM 300

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    /* xorshift64*: small, fast, and the same on every platform */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1du;
}

static size_t below(size_t n)
{
    return n ? (size_t)(next() % n) : 0;
}

/* ---------------------------------------------------------------------------------------
 * Seeds: one valid frame of every type
 */

#define MAX_SEEDS 32

static msgpack_sbuffer seeds[MAX_SEEDS];
static size_t n_seeds;

static msgpack_sbuffer *new_seed(void)
{
    cr_assert(n_seeds < MAX_SEEDS);
    msgpack_sbuffer_init(&seeds[n_seeds]);
    return &seeds[n_seeds++];
}

static void make_seeds(void)
{
    static const uint8_t raw[] = {0, 1, 0xc1, 0xff};
    pr_body str = {S("hello"), false}, bin = {{raw, sizeof raw}, true};
    pr_ack acks[3] = {{S("g1"), 1}, {S("g2"), 200}, {S("g3"), 70000}};
    pr_welcome w = {S("alice"), S("s1"), 1700000000000u, 20, 2000, 65536, false};
    pr_group g = {.gid = S("g1"), .last_mid = 9, .ack = 4, .unread = 5};

    msgpack_sbuffer rec;
    msgpack_sbuffer_init(&rec);
    cr_assert_eq(pr_enc_record(&rec, S("bob"), bin), 0);
    pr_slice r = {(const uint8_t *)rec.data, rec.size};

    pr_enc_hello(new_seed(), 1, S("a.b.c"));
    pr_enc_join(new_seed(), 2, S("g1"));
    pr_enc_leave(new_seed(), PR_NO_RID, S("g1"));
    pr_enc_groups_req(new_seed(), 3);
    pr_enc_send(new_seed(), 4, S("g1"), S("c1"), str);
    pr_enc_send(new_seed(), PR_NO_RID, S("g1"), S("c2"), bin);
    pr_enc_ack(new_seed(), acks, 3);
    pr_enc_enter(new_seed(), 5, S("g1"), 50);
    pr_enc_pull(new_seed(), 6, S("g1"), false, 10, 0);
    pr_enc_pull(new_seed(), PR_NO_RID, S("g1"), true, 300, 1000);
    pr_enc_ping(new_seed(), 7);

    msgpack_sbuffer *b = new_seed();
    pr_enc_welcome_begin(b, 1, &w, 2);
    pr_enc_group_entry(b, &g);
    pr_enc_group_entry(b, &g);
    b = new_seed();
    pr_enc_groups_begin(b, 3, 1);
    pr_enc_group_entry(b, &g);
    pr_enc_joined(new_seed(), 2, S("g1"), 1, 10, 10);
    pr_enc_left(new_seed(), PR_NO_RID, S("g1"));
    pr_enc_sent(new_seed(), 4, S("g1"), S("c1"), 11, 12);
    pr_enc_msg(new_seed(), S("g1"), 11, 12, r);
    b = new_seed();
    pr_enc_page_begin(b, 6, S("g1"), 3, 12, 3, true, 2);
    pr_enc_page_entry(b, 10, 100, r);
    pr_enc_page_entry(b, 11, 110, r);
    pr_enc_notify(new_seed(), S("g1"), 12);
    pr_enc_pong(new_seed(), 7, 99);
    pr_enc_err(new_seed(), 8, PR_E_BAD_FIELD, "send: field 'gid' is missing", S("g1"));
    b = new_seed();
    pr_enc_batch_begin(b, 3);
    pr_enc_msg(b, S("g2"), 1, 2, r);
    pr_enc_page_begin(b, PR_NO_RID, S("g2"), 1, 1, 0, false, 1);
    pr_enc_page_entry(b, 1, 2, r);
    pr_enc_notify(b, S("g3"), 4);
    msgpack_sbuffer_destroy(&rec);
}

static void free_seeds(void)
{
    for (size_t i = 0; i < n_seeds; i++)
        msgpack_sbuffer_destroy(&seeds[i]);
    n_seeds = 0;
}

/* ---------------------------------------------------------------------------------------
 * Inputs
 */

/* Bytes that steer a parser to its edges: long headers, huge counts, ext, never-used. */
static const uint8_t interesting[] = {0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
                                      0xc0, 0xc1, 0xc4, 0xc6, 0xc7, 0xd4, 0xd9, 0xdb,
                                      0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff};

static size_t make_input(uint8_t *buf, size_t cap)
{
    if (below(4) == 0) { /* pure noise, any length including 0 */
        size_t n = below(MAX_RANDOM + 1);
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)next();
        return n;
    }
    const msgpack_sbuffer *s = &seeds[below(n_seeds)];
    size_t n = s->size;
    memcpy(buf, s->data, n);
    for (size_t m = 1 + below(3); m > 0; m--) {
        switch (below(6)) {
        case 0: /* bit flip */
            if (n)
                buf[below(n)] ^= (uint8_t)(1u << below(8));
            break;
        case 1: /* truncate */ n = below(n + 1); break;
        case 2: /* insert a byte */
            if (n < cap) {
                size_t at = below(n + 1);
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = below(2) ? (uint8_t)next() : interesting[below(sizeof interesting)];
                n++;
            }
            break;
        case 3: /* delete a byte */
            if (n) {
                size_t at = below(n);
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
            }
            break;
        case 4: /* overwrite with an interesting byte */
            if (n)
                buf[below(n)] = interesting[below(sizeof interesting)];
            break;
        default: /* set a byte to random */
            if (n)
                buf[below(n)] = (uint8_t)next();
            break;
        }
    }
    return n;
}

/* ---------------------------------------------------------------------------------------
 * Checks
 */

static const uint8_t *lo, *hi;
static size_t iter;

static void in_frame(pr_slice s, const char *what)
{
    if (s.n == 0)
        return;
    cr_assert((uintptr_t)s.p >= (uintptr_t)lo && (uintptr_t)s.p + s.n <= (uintptr_t)hi,
              "iteration %zu: %s outside the frame", iter, what);
}

static bool is_code(int rc)
{
    return rc == 0 || (rc <= PR_E_BAD_FRAME && rc >= PR_E_NOMEM);
}

static int check_event(void *ud, const pr_event *ev)
{
    (void)ud;
    in_frame(ev->welcome.uid, "uid");
    in_frame(ev->welcome.sid, "sid");
    in_frame(ev->gid, "gid");
    in_frame(ev->cid, "cid");
    in_frame(ev->msg.from, "from");
    in_frame(ev->msg.body.data, "body");
    in_frame(ev->err_name, "err code");
    in_frame(ev->err_msg, "err msg");
    for (size_t i = 0; i < ev->n_items; i++) {
        pr_group g;
        pr_message m;
        if (ev->t == PR_EV_PAGE) {
            cr_assert_eq(pr_event_message(ev, i, &m), 0, "iteration %zu", iter);
            in_frame(m.from, "entry from");
            in_frame(m.body.data, "entry body");
        } else {
            cr_assert_eq(pr_event_group(ev, i, &g), 0, "iteration %zu", iter);
            in_frame(g.gid, "group gid");
        }
    }
    return 0;
}

static void check_req(const pr_req *r)
{
    in_frame(r->token, "token");
    in_frame(r->gid, "gid");
    in_frame(r->cid, "cid");
    in_frame(r->body.data, "body");
    cr_assert_leq(r->n_acks, PR_MAX_KEYS);
    for (size_t i = 0; i < r->n_acks; i++)
        in_frame(r->acks[i].gid, "ack gid");
    if (r->t == PR_REQ_ENTER || r->t == PR_REQ_PULL)
        cr_assert(r->limit >= 1 && r->limit <= PR_PAGE_MAX, "iteration %zu", iter);
    if (r->t == PR_REQ_PULL)
        cr_assert(r->has_after != r->has_before, "iteration %zu", iter);
}

Test(random, mutated_frames_do_not_crash, .timeout = 120)
{
    make_seeds();
    pr_decoder *d = pr_decoder_new(NULL);
    cr_assert_not_null(d);
    msgpack_zone zone;
    cr_assert(msgpack_zone_init(&zone, MSGPACK_ZONE_CHUNK_SIZE));
    uint8_t *scratch = malloc(4096);
    size_t accepted = 0, decoded_req = 0, decoded_ev = 0;

    for (iter = 0; iter < ITERATIONS; iter++) {
        size_t n = make_input(scratch, 4096);
        uint8_t *frame = malloc(n ? n : 1); /* exactly sized: ASan flags any overrun */
        memcpy(frame, scratch, n);
        lo = frame;
        hi = frame + n;

        pr_error err = {0};
        int v = pr_validate(frame, n, NULL, &err);
        cr_assert(v == 0 || v == PR_E_BAD_FRAME || v == PR_E_TOO_LARGE,
                  "iteration %zu: validate %d", iter, v);
        if (v == 0) {
            /* Whatever validate accepts, msgpack-c parses whole. */
            msgpack_object o;
            size_t off = 0;
            msgpack_zone_clear(&zone);
            cr_assert_eq(msgpack_unpack((const char *)frame, n, &off, &zone, &o),
                         MSGPACK_UNPACK_SUCCESS, "iteration %zu", iter);
            cr_assert_eq(off, n);
            accepted++;
        }

        pr_req r;
        int rc = pr_decode_req(d, frame, n, &r, &err);
        cr_assert(is_code(rc), "iteration %zu: decode_req %d", iter, rc);
        if (v)
            cr_assert_eq(rc, v, "iteration %zu: decode_req disagrees with validate", iter);
        if (rc == 0) {
            check_req(&r);
            decoded_req++;
        } else {
            cr_assert_eq(err.code, rc);
            cr_assert(memchr(err.msg, 0, sizeof err.msg), "message not terminated");
        }

        rc = pr_decode_events(d, frame, n, check_event, NULL, &err);
        cr_assert(is_code(rc), "iteration %zu: decode_events %d", iter, rc);
        if (rc == 0)
            decoded_ev++;
        free(frame);
    }
    /* The mutations must leave enough valid frames to exercise the decoders fully. */
    cr_assert_gt(accepted, ITERATIONS / 10);
    cr_assert_gt(decoded_req, ITERATIONS / 100);
    cr_assert_gt(decoded_ev, ITERATIONS / 100);
    cr_log_info("random: %zu valid, %zu requests, %zu server frames decoded", accepted, decoded_req,
                decoded_ev);

    free(scratch);
    msgpack_zone_destroy(&zone);
    pr_decoder_free(d);
    free_seeds();
}

/* Every seed decodes cleanly before mutation (so the seeds are worth mutating). */
Test(random, seeds_are_valid)
{
    make_seeds();
    pr_decoder *d = pr_decoder_new(NULL);
    size_t ok = 0;
    for (size_t i = 0; i < n_seeds; i++) {
        pr_req r;
        pr_error err;
        const uint8_t *p = (const uint8_t *)seeds[i].data;
        if (pr_decode_req(d, p, seeds[i].size, &r, &err) == 0 ||
            pr_decode_events(d, p, seeds[i].size, NULL, NULL, &err) == 0)
            ok++;
        else
            cr_assert_fail("seed %zu: %s", i, err.msg);
    }
    cr_assert_eq(ok, n_seeds);
    pr_decoder_free(d);
    free_seeds();
}
