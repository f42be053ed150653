/*
 * What reads hand back: a page of messages and a user's list of groups. Both own their
 * bytes, so they outlive the snapshot and the thread that read them. The backends build
 * them with the helpers in store_internal.h.
 */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

struct st_page {
    uint64_t last_mid;
    bool more;
    size_t n, cap;
    st_msg *msgs;
    size_t *offs; /* each record's offset in bytes, until finished */
    char *bytes;  /* every record, back to back; msgs[i].record points in here */
    size_t used, room;
};

struct st_groups {
    st_user_group *g;
    size_t n, cap;
    char *ids; /* every gid, back to back; g[i].gid points in here once finished */
    size_t *offs;
    size_t used, room;
};

bool st_page_range(enum st_dir dir, uint64_t from, size_t limit, uint64_t last_mid,
                   uint64_t *lo, uint64_t *hi)
{
    if (dir == ST_AFTER ? from >= last_mid : (from <= 1 || last_mid == 0))
        return false;
    if (dir == ST_AFTER) {
        *lo = from + 1;
        *hi = (last_mid - from > limit) ? from + limit : last_mid;
    } else {
        *hi = from - 1 < last_mid ? from - 1 : last_mid;
        *lo = *hi >= limit ? *hi - limit + 1 : 1;
    }
    return true;
}

st_page *st_page_new(uint64_t last_mid)
{
    st_page *p = calloc(1, sizeof(*p));
    if (p)
        p->last_mid = last_mid;
    return p;
}

/* Grows buf (of *room bytes, *used in use) to hold n more; false when out of memory. */
static bool grow_bytes(char **buf, size_t *used, size_t *room, size_t n)
{
    if (*used + n <= *room)
        return true;
    size_t nroom = *room ? *room * 2 : 4096;
    while (nroom < *used + n)
        nroom *= 2;
    char *nb = realloc(*buf, nroom);
    if (!nb)
        return false;
    *buf = nb;
    *room = nroom;
    return true;
}

/* Grows an array of entries (each esize bytes) and its array of byte offsets, side by
 * side, to room for n. ST_ENOMEM (both keep their contents). */
static int grow_entries(void **entries, size_t esize, size_t **offs, size_t *cap, size_t n)
{
    if (n <= *cap)
        return ST_OK;
    void *ne = realloc(*entries, n * esize);
    if (!ne)
        return ST_ENOMEM;
    *entries = ne;
    size_t *no = realloc(*offs, n * sizeof(*no));
    if (!no)
        return ST_ENOMEM;
    *offs = no;
    *cap = n;
    return ST_OK;
}

int st_page_reserve(st_page *p, size_t n)
{
    return grow_entries((void **)&p->msgs, sizeof(*p->msgs), &p->offs, &p->cap, n);
}

int st_page_add(st_page *p, uint64_t mid, uint64_t ts, const void *rec, size_t n)
{
    if (p->n == p->cap && st_page_reserve(p, p->cap ? p->cap * 2 : 16) != ST_OK)
        return ST_ENOMEM;
    if (!grow_bytes(&p->bytes, &p->used, &p->room, n))
        return ST_ENOMEM;
    if (n)
        memcpy(p->bytes + p->used, rec, n);
    p->offs[p->n] = p->used;
    p->msgs[p->n++] = (st_msg){.mid = mid, .ts = ts, .record = NULL, .record_n = n};
    p->used += n;
    return ST_OK;
}

size_t st_page_bytes(const st_page *p)
{
    return p->used;
}

void st_page_finish(st_page *p, bool reversed, bool more)
{
    if (reversed) { /* read newest first: turn it around */
        for (size_t i = 0, j = p->n ? p->n - 1 : 0; i < j; i++, j--) {
            st_msg tm = p->msgs[i];
            p->msgs[i] = p->msgs[j];
            p->msgs[j] = tm;
            size_t to = p->offs[i];
            p->offs[i] = p->offs[j];
            p->offs[j] = to;
        }
    }
    /* Pointers only now: the buffer may have moved while it grew. */
    for (size_t i = 0; i < p->n; i++)
        p->msgs[i].record = p->bytes + p->offs[i];
    p->more = more;
}

size_t st_page_count(const st_page *p)
{
    return p->n;
}

const st_msg *st_page_at(const st_page *p, size_t i)
{
    return i < p->n ? &p->msgs[i] : NULL;
}

uint64_t st_page_last_mid(const st_page *p)
{
    return p->last_mid;
}

bool st_page_more(const st_page *p)
{
    return p->more;
}

void st_page_free(st_page *p)
{
    if (!p)
        return;
    free(p->msgs);
    free(p->offs);
    free(p->bytes);
    free(p);
}

st_groups *st_groups_new(void)
{
    return calloc(1, sizeof(st_groups));
}

int st_groups_add(st_groups *g, st_id gid, uint64_t last_mid, uint64_t ack)
{
    if (g->n == g->cap &&
        grow_entries((void **)&g->g, sizeof(*g->g), &g->offs, &g->cap, g->cap ? g->cap * 2 : 8))
        return ST_ENOMEM;
    const char *base = g->ids;
    if (!grow_bytes(&g->ids, &g->used, &g->room, gid.n))
        return ST_ENOMEM;
    memcpy(g->ids + g->used, gid.p, gid.n);
    g->offs[g->n] = g->used;
    g->used += gid.n;
    g->g[g->n++] = (st_user_group){.gid = {NULL, gid.n},
                                   .last_mid = last_mid,
                                   .ack = ack,
                                   .unread = last_mid > ack ? last_mid - ack : 0};
    g->g[g->n - 1].gid.p = g->ids + g->offs[g->n - 1];
    if (base != g->ids) /* the ids moved: point the earlier entries again */
        for (size_t i = 0; i + 1 < g->n; i++)
            g->g[i].gid.p = g->ids + g->offs[i];
    return ST_OK;
}

size_t st_groups_count(const st_groups *g)
{
    return g->n;
}

const st_user_group *st_groups_at(const st_groups *g, size_t i)
{
    return i < g->n ? &g->g[i] : NULL;
}

void st_groups_free(st_groups *g)
{
    if (!g)
        return;
    free(g->g);
    free(g->offs);
    free(g->ids);
    free(g);
}
