/* Helpers shared by the proto tests. */
#ifndef GW_PROTO_TEST_H
#define GW_PROTO_TEST_H

#include <criterion/criterion.h>
#include <string.h>

#include "proto.h"

/* A slice over a C string (not including the NUL). */
#define S(str) ((pr_slice){(const uint8_t *)(str), strlen(str)})

static inline bool slice_is(pr_slice s, const char *str)
{
    size_t n = strlen(str);
    return s.n == n && (n == 0 || memcmp(s.p, str, n) == 0);
}

static inline bool slice_eq(pr_slice a, pr_slice b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

/* A suite of decoding tests: a frame buffer `sb` with its packer `pk`, a decoder `dec`, and
 * the `req` and `err` a decode fills; made fresh for every test. */
#define PROTO_DECODE_SUITE(name)                                                                   \
    static msgpack_sbuffer sb;                                                                     \
    static msgpack_packer pk;                                                                      \
    static pr_decoder *dec;                                                                        \
    static pr_req req;                                                                             \
    static pr_error err;                                                                           \
    static void proto_suite_setup(void)                                                            \
    {                                                                                              \
        msgpack_sbuffer_init(&sb);                                                                 \
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);                                      \
        dec = pr_decoder_new(NULL);                                                                \
        cr_assert_not_null(dec);                                                                   \
    }                                                                                              \
    static void proto_suite_teardown(void)                                                         \
    {                                                                                              \
        pr_decoder_free(dec);                                                                      \
        msgpack_sbuffer_destroy(&sb);                                                              \
    }                                                                                              \
    TestSuite(name, .init = proto_suite_setup, .fini = proto_suite_teardown)

#define MAX_EVENTS 16

/* Copies every event of a frame; the copies borrow like the originals. */
typedef struct collect {
    pr_event ev[MAX_EVENTS];
    size_t n;
} collect;

static inline int collect_cb(void *ud, const pr_event *ev)
{
    collect *c = ud;
    cr_assert(c->n < MAX_EVENTS);
    c->ev[c->n++] = *ev;
    return 0;
}

/* Writes a str or bin with its header into b (for hand-made frames). */
static inline void put_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

#endif
