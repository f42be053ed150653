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

bool rk_msg_decode(const char *v, size_t n, st_msg *m)
{
    if (n < RK_MSG_HDR)
        return false;
    uint64_t ts = st_get_be64(v);
    *m = (st_msg){.ts = ts & ~RK_MSG_VERSIONED};
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
    m->record = v + hdr;
    m->record_n = n - hdr;
    return true;
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
    if (n != RK_GROUP_VAL && n != RK_GROUP_VAL_RETAIN)
        return false;
    *g = (st_group_row){
        .last_mid = st_get_be64(v), .created_ms = st_get_be64(v + 8), .first_mid = 1};
    if (n == RK_GROUP_VAL_RETAIN) {
        g->first_mid = st_get_be64(v + 16);
        g->retain.messages = st_get_be64(v + 24);
        g->retain.ms = st_get_be64(v + 32);
        g->retain.cap = st_get_be64(v + 40);
        g->retain.until_acked = (enum st_acked)(unsigned char)v[48];
        if (g->first_mid < 1)
            g->first_mid = 1;
    }
    return true;
}

size_t rk_group_encode(const st_group_row *g, char *v)
{
    st_put_be64(v, g->last_mid);
    st_put_be64(v + 8, g->created_ms);
    const st_retain *r = &g->retain;
    if (g->first_mid <= 1 && !r->messages && !r->ms && !r->cap && !r->until_acked)
        return RK_GROUP_VAL; /* as every group was before retention */
    st_put_be64(v + 16, g->first_mid < 1 ? 1 : g->first_mid);
    st_put_be64(v + 24, r->messages);
    st_put_be64(v + 32, r->ms);
    st_put_be64(v + 40, r->cap);
    v[48] = (char)r->until_acked;
    return RK_GROUP_VAL_RETAIN;
}
