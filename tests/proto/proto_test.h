/* Helpers shared by the proto tests. */
#ifndef GW_PROTO_TEST_H
#define GW_PROTO_TEST_H

#include <criterion/criterion.h>
#include <stdarg.h>
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

/* How many values stand in fmt before the bracket that closes the one just opened. */
static inline uint32_t frame_count(const char *fmt)
{
    uint32_t n = 0;
    for (int depth = 0; *fmt && depth >= 0; fmt++) {
        if (*fmt == '{' || *fmt == '[') {
            n += depth == 0;
            depth++;
        } else if (*fmt == '}' || *fmt == ']')
            depth--;
        else if (depth == 0 && strchr("subFTn", *fmt))
            n++;
    }
    return n;
}

static inline void put_frame_v(msgpack_packer *pk, const char **fmt, va_list *ap)
{
    for (; **fmt; (*fmt)++) {
        switch (**fmt) {
        case 's': put_str(pk, va_arg(*ap, const char *)); break;
        case 'u': msgpack_pack_uint64(pk, va_arg(*ap, unsigned)); break;
        case 'F': msgpack_pack_false(pk); break;
        case 'T': msgpack_pack_true(pk); break;
        case 'n': msgpack_pack_nil(pk); break;
        case '{':
        case '[': {
            bool map = **fmt == '{';
            uint32_t n = frame_count(*fmt + 1);
            cr_assert(!map || n % 2 == 0, "a map of keys and values: %s", *fmt);
            if (map)
                msgpack_pack_map(pk, n / 2);
            else
                msgpack_pack_array(pk, n);
            (*fmt)++;
            put_frame_v(pk, fmt, ap);
            if (!**fmt)
                return;
            break;
        }
        case '}':
        case ']': return;
        }
    }
}

/* Writes into pk the values fmt describes, taking their arguments in order (for hand-made
 * frames): s a str (const char *), u a uint (unsigned), F false, T true, n nil, {...} a
 * map of the values inside in pairs (key, value), [...] an array of them; other
 * characters (':', ',', ' ') are for the reader. */
static inline void put_frame(msgpack_packer *pk, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_frame_v(pk, &fmt, &ap);
    va_end(ap);
}

#endif
