/* Key and value layouts of the RocksDB backend (see store_rocks.h). */
#include "store_rocks.h"

#include <string.h>

static void key_append_id(rk_key *k, st_id a)
{
    k->b[k->n++] = (char)(unsigned char)a.n;
    memcpy(k->b + k->n, a.p, a.n);
    k->n += a.n;
}

void rk_key_id(rk_key *k, st_id a)
{
    k->n = 0;
    key_append_id(k, a);
}

void rk_key_id2(rk_key *k, st_id a, st_id b)
{
    k->n = 0;
    key_append_id(k, a);
    key_append_id(k, b);
}

void rk_key_msg(rk_key *k, st_id gid, uint64_t mid)
{
    k->n = 0;
    key_append_id(k, gid);
    st_put_be64(k->b + k->n, mid);
    k->n += 8;
}

void rk_key_react(rk_key *k, st_id gid, uint64_t mid, st_id key, st_id uid)
{
    rk_key_msg(k, gid, mid);
    key_append_id(k, key);
    key_append_id(k, uid);
}

void rk_key_user_react(rk_key *k, st_id uid, st_id gid, uint64_t mid, st_id key)
{
    rk_key_id2(k, uid, gid);
    st_put_be64(k->b + k->n, mid);
    k->n += 8;
    if (key.n)
        key_append_id(k, key);
}

/* One length-prefixed id at *at of k (1..max bytes); false past the end. */
static bool take_id(const char *k, size_t kn, size_t *at, size_t max, st_id *out)
{
    if (*at >= kn)
        return false;
    size_t n = (unsigned char)k[*at];
    if (n < 1 || n > max || *at + 1 + n > kn)
        return false;
    *out = (st_id){k + *at + 1, n};
    *at += 1 + n;
    return true;
}

bool rk_react_key_parse(const char *k, size_t kn, st_id *gid, uint64_t *mid, st_id *key, st_id *uid)
{
    size_t at = 0;
    if (!take_id(k, kn, &at, ST_MAX_ID, gid) || at + 8 > kn)
        return false;
    *mid = st_get_be64(k + at);
    at += 8;
    return take_id(k, kn, &at, ST_REACT_KEY_MAX, key) && take_id(k, kn, &at, ST_MAX_ID, uid) &&
           at == kn;
}

bool rk_user_react_key_parse(const char *k, size_t kn, st_id *uid, st_id *gid, uint64_t *mid,
                             st_id *key)
{
    size_t at = 0;
    if (!take_id(k, kn, &at, ST_MAX_ID, uid) || !take_id(k, kn, &at, ST_MAX_ID, gid) || at + 8 > kn)
        return false;
    *mid = st_get_be64(k + at);
    at += 8;
    return take_id(k, kn, &at, ST_REACT_KEY_MAX, key) && at == kn;
}

bool rk_member_decode(const char *v, size_t n, st_member_row *m)
{
    if (n != RK_MEMBER_VAL && n != RK_MEMBER_VAL_READ)
        return false;
    *m = (st_member_row){.ack = st_get_be64(v), .joined_ms = st_get_be64(v + 8)};
    if (n == RK_MEMBER_VAL_READ) {
        m->read = st_get_be64(v + 16);
        m->has_read = true;
    }
    return true;
}

bool rk_key_prefix_end(const rk_key *k, rk_key *end)
{
    *end = *k;
    while (end->n > 0) {
        unsigned char c = (unsigned char)end->b[end->n - 1];
        if (c != 0xff) {
            end->b[end->n - 1] = (char)(c + 1);
            return true;
        }
        end->n--;
    }
    return false;
}

bool rk_msg_decode(const char *v, size_t n, st_msg *m, st_reaction *rx)
{
    if (n < RK_MSG_HDR)
        return false;
    uint64_t ts = st_get_be64(v);
    *m = (st_msg){.ts = ts & ~(RK_MSG_VERSIONED | RK_MSG_CHANGED)};
    size_t hdr = RK_MSG_HDR;
    if (ts & RK_MSG_VERSIONED) {
        if (n < RK_MSG_HDR_VER)
            return false;
        uint64_t vr = st_get_be64(v + 8);
        m->ver = vr >> 1;
        m->recalled = vr & 1;
        m->ver_ts = st_get_be64(v + 16);
        hdr = RK_MSG_HDR_VER;
    }
    if ((ts & RK_MSG_CHANGED) && (ts & RK_MSG_VERSIONED)) {
        if (n < hdr + 9)
            return false;
        m->cseq = st_get_be64(v + hdr);
        size_t nr = (unsigned char)v[hdr + 8];
        hdr += 9;
        if (nr > ST_REACT_KEYS_MAX)
            return false;
        for (size_t i = 0; i < nr; i++) {
            size_t kn = hdr < n ? (unsigned char)v[hdr] : 0;
            if (kn < 1 || kn > ST_REACT_KEY_MAX || hdr + 1 + kn + 8 > n)
                return false;
            if (rx)
                rx[i] =
                    (st_reaction){.key = {v + hdr + 1, kn}, .count = st_get_be64(v + hdr + 1 + kn)};
            hdr += 1 + kn + 8;
        }
        if (rx) {
            m->reactions = rx;
            m->n_reactions = nr;
        }
    }
    m->record = v + hdr;
    m->record_n = n - hdr;
    return true;
}

size_t rk_msg_encode_hdr(const st_msg_row *m, char *hdr)
{
    bool changed = m->cseq > 0;
    st_put_be64(hdr, m->ts | RK_MSG_VERSIONED | (changed ? RK_MSG_CHANGED : 0));
    st_put_be64(hdr + 8, m->ver << 1 | (m->recalled ? 1 : 0));
    st_put_be64(hdr + 16, m->ver_ts);
    size_t n = RK_MSG_HDR_VER;
    if (!changed)
        return n;
    size_t nr = m->recalled ? 0 : m->n_reactions; /* a tombstone has none */
    if (nr > ST_REACT_KEYS_MAX)
        nr = ST_REACT_KEYS_MAX;
    st_put_be64(hdr + n, m->cseq);
    hdr[n + 8] = (char)nr;
    n += 9;
    for (size_t i = 0; i < nr; i++) {
        const st_reaction *x = &m->reactions[i];
        hdr[n] = (char)x->key.n;
        memcpy(hdr + n + 1, x->key.p, x->key.n);
        st_put_be64(hdr + n + 1 + x->key.n, x->count);
        n += 1 + x->key.n + 8;
    }
    return n;
}

bool rk_key_second_id(const char *k, size_t kn, st_id *out)
{
    size_t an = kn ? (unsigned char)k[0] : 0;
    if (kn < 2 + an || kn != 2 + an + (unsigned char)k[1 + an])
        return false;
    *out = (st_id){k + 2 + an, kn - 2 - an};
    return true;
}

bool rk_group_decode(const char *v, size_t n, st_group_row *g)
{
    if (n != RK_GROUP_VAL && n != RK_GROUP_VAL_RETAIN && n != RK_GROUP_VAL_CSEQ)
        return false;
    *g = (st_group_row){
        .last_mid = st_get_be64(v), .created_ms = st_get_be64(v + 8), .first_mid = 1};
    g->changes_first = 1;
    if (n >= RK_GROUP_VAL_RETAIN) {
        g->first_mid = st_get_be64(v + 16);
        g->retain.messages = st_get_be64(v + 24);
        g->retain.ms = st_get_be64(v + 32);
        g->retain.cap = st_get_be64(v + 40);
        g->retain.until_acked = (enum st_acked)(unsigned char)v[48];
        if (g->first_mid < 1)
            g->first_mid = 1;
    }
    if (n == RK_GROUP_VAL_CSEQ) {
        g->last_cseq = st_get_be64(v + 49);
        g->changes_first = st_get_be64(v + 57);
        if (g->changes_first < 1)
            g->changes_first = 1;
    }
    return true;
}

size_t rk_group_encode(const st_group_row *g, char *v)
{
    st_put_be64(v, g->last_mid);
    st_put_be64(v + 8, g->created_ms);
    const st_retain *r = &g->retain;
    bool changes = g->last_cseq > 0 || g->changes_first > 1;
    if (g->first_mid <= 1 && !r->messages && !r->ms && !r->cap && !r->until_acked && !changes)
        return RK_GROUP_VAL; /* as every group was before retention */
    st_put_be64(v + 16, g->first_mid < 1 ? 1 : g->first_mid);
    st_put_be64(v + 24, r->messages);
    st_put_be64(v + 32, r->ms);
    st_put_be64(v + 40, r->cap);
    v[48] = (char)r->until_acked;
    if (!changes)
        return RK_GROUP_VAL_RETAIN;
    st_put_be64(v + 49, g->last_cseq);
    st_put_be64(v + 57, g->changes_first < 1 ? 1 : g->changes_first);
    return RK_GROUP_VAL_CSEQ;
}
