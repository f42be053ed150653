/* load_page: reading `page` frames in place, without decoding them; see load_page.h. */
#include "load_page.h"

#include <string.h>

#define LP_MAX_DEPTH 16

typedef struct cur {
    const uint8_t *p, *end;
} cur;

static bool take(cur *c, size_t n, const uint8_t **at)
{
    if ((size_t)(c->end - c->p) < n)
        return false;
    *at = c->p;
    c->p += n;
    return true;
}

/* A big-endian unsigned integer of n bytes (1, 2, 4 or 8). */
static bool be(cur *c, size_t n, uint64_t *v)
{
    const uint8_t *b;
    if (!take(c, n, &b))
        return false;
    *v = 0;
    for (size_t i = 0; i < n; i++)
        *v = *v << 8 | b[i];
    return true;
}

static bool u64(cur *c, uint64_t *v)
{
    if (c->p >= c->end)
        return false;
    uint8_t t = *c->p++;
    if (t <= 0x7f) {
        *v = t;
        return true;
    }
    if (t >= 0xcc && t <= 0xcf)
        return be(c, (size_t)1 << (t - 0xcc), v);
    return false;
}

/* A map or array header: its count. */
static bool container(cur *c, bool map, uint64_t *n)
{
    if (c->p >= c->end)
        return false;
    uint8_t t = *c->p++;
    if ((t & 0xf0) == (map ? 0x80 : 0x90)) {
        *n = t & 0x0f;
        return true;
    }
    uint8_t t16 = map ? 0xde : 0xdc;
    if (t == t16 || t == t16 + 1)
        return be(c, t == t16 ? 2 : 4, n);
    return false;
}

static bool str(cur *c, const uint8_t **s, size_t *n)
{
    if (c->p >= c->end)
        return false;
    uint8_t t = *c->p++;
    uint64_t len;
    if ((t & 0xe0) == 0xa0)
        len = t & 0x1f;
    else if (t < 0xd9 || t > 0xdb || !be(c, (size_t)1 << (t - 0xd9), &len))
        return false;
    *n = (size_t)len;
    return take(c, (size_t)len, s);
}

static bool is(const uint8_t *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* Skips one value of any type. */
static bool skip(cur *c, int depth)
{
    if (c->p >= c->end || depth > LP_MAX_DEPTH)
        return false;
    uint8_t t = *c->p++;
    uint64_t n = 0, items = 0;
    const uint8_t *at;
    if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3)
        return true; /* fixint, nil, bool */
    if ((t & 0xe0) == 0xa0)
        return take(c, t & 0x1f, &at);
    if ((t & 0xf0) == 0x80 || (t & 0xf0) == 0x90) {
        items = (t & 0x0f) * ((t & 0xf0) == 0x80 ? 2u : 1u);
    } else {
        switch (t) {
        case 0xc4:
        case 0xd9: return be(c, 1, &n) && take(c, (size_t)n, &at); /* bin8, str8 */
        case 0xc5:
        case 0xda: return be(c, 2, &n) && take(c, (size_t)n, &at);
        case 0xc6:
        case 0xdb: return be(c, 4, &n) && take(c, (size_t)n, &at);
        case 0xc7: return be(c, 1, &n) && take(c, (size_t)n + 1, &at); /* ext */
        case 0xc8: return be(c, 2, &n) && take(c, (size_t)n + 1, &at);
        case 0xc9: return be(c, 4, &n) && take(c, (size_t)n + 1, &at);
        case 0xca: return take(c, 4, &at);
        case 0xcb: return take(c, 8, &at);
        case 0xcc:
        case 0xd0: return take(c, 1, &at);
        case 0xcd:
        case 0xd1: return take(c, 2, &at);
        case 0xce:
        case 0xd2: return take(c, 4, &at);
        case 0xcf:
        case 0xd3: return take(c, 8, &at);
        case 0xd4: return take(c, 2, &at); /* fixext */
        case 0xd5: return take(c, 3, &at);
        case 0xd6: return take(c, 5, &at);
        case 0xd7: return take(c, 9, &at);
        case 0xd8: return take(c, 17, &at);
        case 0xdc:
        case 0xdd:
            if (!be(c, t == 0xdc ? 2 : 4, &items))
                return false;
            break;
        case 0xde:
        case 0xdf:
            if (!be(c, t == 0xde ? 2 : 4, &n))
                return false;
            items = 2 * n;
            break;
        default: return false;
        }
    }
    for (uint64_t i = 0; i < items; i++)
        if (!skip(c, depth + 1))
            return false;
    return true;
}

void load_frame_begin(load_frame *fr, const uint8_t *f, size_t n)
{
    cur c = {f, f + n};
    uint64_t items = 1;
    fr->bad = false;
    if (n && (*f & 0xf0) != 0x80 && *f != 0xde && *f != 0xdf) /* a batch */
        fr->bad = !container(&c, false, &items);
    fr->p = c.p;
    fr->end = c.end;
    fr->left = (uint32_t)items;
}

/* Reads a map's pairs: a page's fields up to its entries (when they come last, they are
 * left for load_page_walk), or skips what is not a page. */
static bool read_fields(cur *c, load_msg *m)
{
    uint64_t pairs;
    if (!container(c, true, &pairs))
        return false;
    for (uint64_t i = 0; i < pairs; i++) {
        const uint8_t *k;
        size_t kn;
        if (!str(c, &k, &kn))
            return false;
        bool ok = true;
        if (is(k, kn, "t")) {
            const uint8_t *v;
            size_t vn;
            ok = str(c, &v, &vn);
            m->is_page = ok && is(v, vn, "page");
        } else if (is(k, kn, "rid")) {
            ok = m->has_rid = u64(c, &m->rid);
        } else if (is(k, kn, "last_mid")) {
            ok = u64(c, &m->last_mid);
        } else if (is(k, kn, "more")) {
            ok = c->p < c->end && (*c->p == 0xc2 || *c->p == 0xc3);
            m->more = ok && *c->p++ == 0xc3;
        } else if (is(k, kn, "msgs") && m->is_page) {
            uint64_t n;
            ok = container(c, false, &n) && n <= UINT32_MAX;
            m->n = (uint32_t)n;
            m->entries = c->p;
            if (ok && i + 1 == pairs)
                return m->entries_last = true; /* walked next, by load_page_walk */
            for (uint64_t j = 0; ok && j < n; j++)
                ok = skip(c, 1);
        } else {
            ok = skip(c, 1);
        }
        if (!ok)
            return false;
    }
    return !m->is_page || m->entries; /* a page has its entries */
}

int load_frame_next(load_frame *fr, load_msg *m)
{
    if (fr->bad)
        return -1;
    if (!fr->left)
        return fr->p == fr->end ? 0 : -1;
    memset(m, 0, sizeof(*m));
    cur c = {fr->p, fr->end};
    fr->left--;
    if (!read_fields(&c, m)) {
        fr->bad = true;
        return -1;
    }
    if (!m->is_page) {
        m->raw = fr->p;
        m->raw_n = (size_t)(c.p - fr->p);
    }
    fr->p = c.p;
    return 1;
}

long load_page_walk(load_frame *fr, const load_msg *m, uint64_t first)
{
    cur c = {m->entries, fr->end};
    long off = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        uint64_t pairs, mid = 0;
        bool has_mid = false;
        if (!container(&c, true, &pairs))
            goto bad;
        for (uint64_t j = 0; j < pairs; j++) {
            const uint8_t *k;
            size_t kn;
            if (!str(&c, &k, &kn))
                goto bad;
            if (kn == 3 && memcmp(k, "mid", 3) == 0) {
                if (!u64(&c, &mid))
                    goto bad;
                has_mid = true;
            } else if (!skip(&c, 2)) {
                goto bad;
            }
        }
        off += !has_mid || mid != first + i;
    }
    if (m->entries_last)
        fr->p = c.p;
    return off;
bad:
    fr->bad = true;
    return -1;
}
