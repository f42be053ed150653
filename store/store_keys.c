/* Key and value layouts of the RocksDB backend (see store_internal.h). */
#include "store_internal.h"

#include <string.h>
#include <time.h>

bool st_id_ok(st_id id)
{
    return id.p != NULL && id.n >= 1 && id.n <= ST_MAX_ID;
}

st_id st_id_str(const char *s)
{
    return (st_id){s, s ? strlen(s) : 0};
}

static void key_append_id(st_key *k, st_id a)
{
    k->b[k->n++] = (char)(unsigned char)a.n;
    memcpy(k->b + k->n, a.p, a.n);
    k->n += a.n;
}

void st_key_id(st_key *k, st_id a)
{
    k->n = 0;
    key_append_id(k, a);
}

void st_key_id2(st_key *k, st_id a, st_id b)
{
    k->n = 0;
    key_append_id(k, a);
    key_append_id(k, b);
}

void st_key_msg(st_key *k, st_id gid, uint64_t mid)
{
    k->n = 0;
    key_append_id(k, gid);
    st_put_be64(k->b + k->n, mid);
    k->n += 8;
}

bool st_key_prefix_end(const st_key *k, st_key *end)
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

uint64_t st_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

uint64_t st_mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
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
    default: return "unknown error";
    }
}
