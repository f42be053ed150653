/*
 * proto_validate: a structural walk over MessagePack bytes, run before msgpack_unpack.
 *
 * msgpack-c's C unpacker allocates the element storage of an array or map as soon as it
 * reads the header, from the count the header declares. A 5-byte frame declaring an array
 * of 2^32-1 elements would make it ask for ~100 GB. The walk below checks every declared
 * count and length against the bytes that actually follow, so an accepted frame holds at
 * most one value per byte and msgpack-c allocates O(frame size). It allocates nothing.
 */
#include "proto_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

pr_limits pr_limits_default(void)
{
    pr_limits lim = {.max_frame = PR_MAX_FRAME_DEFAULT,
                     .max_body = PR_MAX_BODY_DEFAULT,
                     .page_default = PR_PAGE_DEFAULT,
                     .page_max = PR_PAGE_MAX};
    return lim;
}

bool pr_id_valid(pr_slice s)
{
    if (s.n == 0 || s.n > PR_MAX_ID || s.p == NULL)
        return false;
    for (size_t i = 0; i < s.n; i++) {
        uint8_t c = s.p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

bool pr_react_key_valid(pr_slice s)
{
    if (s.n == 0 || s.n > PR_REACT_KEY_MAX || s.p == NULL)
        return false;
    /* UTF-8 as RFC 3629 has it: no overlong forms, no surrogates, nothing past U+10FFFF. */
    for (size_t i = 0; i < s.n;) {
        uint8_t c = s.p[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : 0;
        if (k == 0 || c > 0xf4 || i + k >= s.n)
            return false;
        uint8_t c1 = s.p[i + 1];
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
            (c == 0xf4 && c1 > 0x8f))
            return false;
        for (size_t j = 1; j <= k; j++)
            if ((s.p[i + j] & 0xc0) != 0x80)
                return false;
        i += k + 1;
    }
    return true;
}

int pr_fail(pr_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

/* Big-endian unsigned integer of n (1, 2 or 4) bytes. */
static uint32_t be(const uint8_t *p, size_t n)
{
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* What one header byte introduces. */
enum hkind { H_NEVER, H_SCALAR, H_BYTES, H_ARRAY, H_MAP, H_EXT };

typedef struct head {
    enum hkind kind;
    size_t size;  /* bytes of the header itself, including any fixed-size payload */
    size_t lenb;  /* bytes of the big-endian length/count that follow the type byte */
    uint32_t len; /* fix* formats: the length or count packed into the type byte */
} head;

/* 0xc0..0xdf; a gap (0xc1, never used) stays H_NEVER. */
#define AT(b) [(b)-0xc0]
static const head long_forms[32] = {
    AT(0xc0) = {H_SCALAR, 1, 0, 0}, /* nil */
    AT(0xc2) = {H_SCALAR, 1, 0, 0}, /* false */
    AT(0xc3) = {H_SCALAR, 1, 0, 0}, /* true */
    AT(0xc4) = {H_BYTES, 2, 1, 0},  /* bin8 */
    AT(0xc5) = {H_BYTES, 3, 2, 0},  /* bin16 */
    AT(0xc6) = {H_BYTES, 5, 4, 0},  /* bin32 */
    AT(0xc7) = {H_EXT, 1, 0, 0},    /* ext8 */
    AT(0xc8) = {H_EXT, 1, 0, 0},    /* ext16 */
    AT(0xc9) = {H_EXT, 1, 0, 0},    /* ext32 */
    AT(0xca) = {H_SCALAR, 5, 0, 0}, /* float32 */
    AT(0xcb) = {H_SCALAR, 9, 0, 0}, /* float64 */
    AT(0xcc) = {H_SCALAR, 2, 0, 0}, /* uint8 */
    AT(0xcd) = {H_SCALAR, 3, 0, 0}, /* uint16 */
    AT(0xce) = {H_SCALAR, 5, 0, 0}, /* uint32 */
    AT(0xcf) = {H_SCALAR, 9, 0, 0}, /* uint64 */
    AT(0xd0) = {H_SCALAR, 2, 0, 0}, /* int8 */
    AT(0xd1) = {H_SCALAR, 3, 0, 0}, /* int16 */
    AT(0xd2) = {H_SCALAR, 5, 0, 0}, /* int32 */
    AT(0xd3) = {H_SCALAR, 9, 0, 0}, /* int64 */
    AT(0xd4) = {H_EXT, 1, 0, 0},    /* fixext1 */
    AT(0xd5) = {H_EXT, 1, 0, 0},    /* fixext2 */
    AT(0xd6) = {H_EXT, 1, 0, 0},    /* fixext4 */
    AT(0xd7) = {H_EXT, 1, 0, 0},    /* fixext8 */
    AT(0xd8) = {H_EXT, 1, 0, 0},    /* fixext16 */
    AT(0xd9) = {H_BYTES, 2, 1, 0},  /* str8 */
    AT(0xda) = {H_BYTES, 3, 2, 0},  /* str16 */
    AT(0xdb) = {H_BYTES, 5, 4, 0},  /* str32 */
    AT(0xdc) = {H_ARRAY, 3, 2, 0},  /* array16 */
    AT(0xdd) = {H_ARRAY, 5, 4, 0},  /* array32 */
    AT(0xde) = {H_MAP, 3, 2, 0},    /* map16 */
    AT(0xdf) = {H_MAP, 5, 4, 0},    /* map32 */
};
#undef AT

static head classify(uint8_t b)
{
    if (b <= 0x7f || b >= 0xe0)
        return (head){H_SCALAR, 1, 0, 0}; /* positive / negative fixint */
    if (b <= 0x8f)
        return (head){H_MAP, 1, 0, b & 0x0fu};
    if (b <= 0x9f)
        return (head){H_ARRAY, 1, 0, b & 0x0fu};
    if (b <= 0xbf)
        return (head){H_BYTES, 1, 0, b & 0x1fu};
    return long_forms[b - 0xc0];
}

/*
 * rem[i] counts the values still expected by the i-th open container; rem[0] is a virtual
 * container holding the one top-level value, so sp (the number of entries in rem) is also
 * the depth a container opened now would have.
 */
int pr_validate(const uint8_t *frame, size_t len, const pr_limits *lim, pr_error *err)
{
    pr_limits def = pr_limits_default();
    if (!lim)
        lim = &def;
    if (len > lim->max_frame)
        return pr_fail(err, PR_E_TOO_LARGE, "frame of %zu bytes is over the %zu-byte limit", len,
                       lim->max_frame);
    if (len == 0 || frame == NULL)
        return pr_fail(err, PR_E_BAD_FRAME, "empty frame");

    uint64_t rem[PR_MAX_DEPTH + 1];
    size_t sp = 1, pos = 0;
    rem[0] = 1;
    while (sp > 0) {
        if (pos >= len)
            return pr_fail(err, PR_E_BAD_FRAME, "truncated frame: a value is missing at the end");
        head h = classify(frame[pos]);
        if (h.kind == H_NEVER)
            return pr_fail(err, PR_E_BAD_FRAME, "byte 0xc1 at offset %zu is not MessagePack", pos);
        /* The protocol defines no extension types; refusing them keeps every decoded
         * value one of the types the decoders check for. */
        if (h.kind == H_EXT)
            return pr_fail(err, PR_E_BAD_FRAME,
                           "MessagePack ext types are not allowed (offset %zu)", pos);
        if (h.size > len - pos)
            return pr_fail(err, PR_E_BAD_FRAME, "truncated frame: a %zu-byte header at offset %zu",
                           h.size, pos);
        uint32_t n = h.lenb ? be(frame + pos + 1, h.lenb) : h.len;
        pos += h.size;
        size_t left = len - pos;
        rem[sp - 1]--;

        switch (h.kind) {
        case H_BYTES:
            if (n > left)
                return pr_fail(err, PR_E_BAD_FRAME,
                               "str/bin declares %" PRIu32 " bytes but only %zu remain", n, left);
            pos += n;
            break;
        case H_ARRAY:
        case H_MAP: {
            const char *what = h.kind == H_MAP ? "map" : "array";
            if (sp > PR_MAX_DEPTH)
                return pr_fail(err, PR_E_BAD_FRAME, "nesting deeper than %u levels", PR_MAX_DEPTH);
            if (h.kind == H_MAP && n > PR_MAX_KEYS)
                return pr_fail(err, PR_E_TOO_LARGE, "map of %" PRIu32 " entries (limit %u)", n,
                               PR_MAX_KEYS);
            /* Each element takes at least one byte, each map entry two. */
            uint64_t values = h.kind == H_MAP ? 2 * (uint64_t)n : n;
            if (values > left)
                return pr_fail(err, PR_E_BAD_FRAME,
                               "%s declares %" PRIu32 " %s but only %zu bytes remain", what, n,
                               h.kind == H_MAP ? "entries" : "elements", left);
            if (values > 0)
                rem[sp++] = values;
            break;
        }
        default: break;
        }
        while (sp > 0 && rem[sp - 1] == 0)
            sp--;
    }
    if (pos != len)
        return pr_fail(err, PR_E_BAD_FRAME, "%zu trailing bytes after the value", len - pos);
    return 0;
}
