/* Small helpers every part of the store uses: ids, big-endian numbers, clocks, errors. */
#include "store_internal.h"

#include <string.h>
#include <time.h>

bool st_id_ok(st_id id)
{
    if (id.p == NULL || id.n < 1 || id.n > ST_MAX_ID)
        return false;
    /* Printable ASCII without space: a key as it is for RocksDB, and text that no
     * PostgreSQL encoding or collation treats specially. */
    for (size_t i = 0; i < id.n; i++)
        if ((unsigned char)id.p[i] < 0x21 || (unsigned char)id.p[i] > 0x7e)
            return false;
    return true;
}

/* Well-formed UTF-8 (no overlong form, no surrogate, nothing past U+10FFFF) and no
 * control character: C0, DEL and C1. */
bool st_react_key_ok(const char *p, size_t n)
{
    if (!p || n < 1 || n > ST_REACT_KEY_MAX)
        return false;
    const unsigned char *u = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return false;
            i++;
            continue;
        }
        size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (!len || c > 0xf4 || i + len > n)
            return false;
        uint32_t cp = c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (u[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
            return false;
        i += len;
    }
    return true;
}

int st_id_cmp(st_id a, st_id b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int c = n ? memcmp(a.p, b.p, n) : 0; /* an empty id may have no bytes at all */
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

st_id st_id_str(const char *s)
{
    return (st_id){s, s ? strlen(s) : 0};
}

void st_put_be64(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (char)(v & 0xff);
        v >>= 8;
    }
}

uint64_t st_get_be64(const char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | (unsigned char)p[i];
    return v;
}

static uint64_t clock_us(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

uint64_t st_now_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000u;
}

uint64_t st_mono_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000u;
}

uint64_t st_mono_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

const char *st_strerror(int err)
{
    switch (err) {
    case ST_OK: return "ok";
    case ST_EINVAL: return "invalid argument";
    case ST_ENOGROUP: return "no such group";
    case ST_ENOTMEMBER: return "not a member of the group";
    case ST_ECONFLICT: return "client message id already used for another group";
    case ST_EIO: return "storage error";
    case ST_ENOMEM: return "out of memory";
    case ST_ECLOSED: return "store is closing";
    case ST_ENOMSG: return "no such message";
    case ST_EGONE: return "the message was recalled";
    case ST_ESTALE: return "not the next version of the message";
    case ST_EBUSY: return "in use by another process";
    case ST_ETOOMANY: return "too many reaction keys on the message";
    default: return "unknown error";
    }
}

unsigned st_slot_of(st_id id)
{
    /* FNV-1a: a few instructions a byte, and its spread over 4,096 slots is even for ids
     * that differ only at the end ("g1", "g2", ...). Written down in ARCHITECTURE: the maps,
     * the shards' fences and the tools must agree on it forever, so it never changes. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < id.n; i++) {
        h ^= (unsigned char)id.p[i];
        h *= 16777619u;
    }
    return h % ST_SLOTS;
}
