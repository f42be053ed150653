/*
 * What the unread webhook's reads hand back (store.h: READ_UNSWEPT, TELL_ADOPT): a list
 * of items that owns its bytes. Few items (ST_LIST_MAX at most), each with its bytes in
 * one allocation of its own: simple, and the items never move once made.
 */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

struct st_list {
    st_item *items;
    size_t n, cap;
    bool more;
    char after[ST_MAX_ID]; /* READ_UNSWEPT: the last group looked at */
    size_t after_n;
};

st_list *st_list_new(void)
{
    return calloc(1, sizeof(st_list));
}

int st_list_add(st_list *l, st_id gid, uint64_t lo, uint64_t hi, uint64_t mark, const void *text,
                size_t text_n)
{
    if (!st_room(&l->items, &l->cap, l->n + 1, sizeof(*l->items), 16))
        return ST_ENOMEM;
    char *b = malloc(gid.n + text_n + 1);
    if (!b)
        return ST_ENOMEM;
    if (gid.n)
        memcpy(b, gid.p, gid.n);
    if (text_n)
        memcpy(b + gid.n, text, text_n);
    b[gid.n + text_n] = 0;
    l->items[l->n++] = (st_item){
        .gid = {b, gid.n}, .lo = lo, .hi = hi, .mark = mark, .text = b + gid.n, .text_n = text_n};
    return ST_OK;
}

int st_list_note_hi(st_list *l, st_id gid, uint64_t hi)
{
    for (size_t i = l->n; i-- > 0;) /* the latest first: a run of one group's changes */
        if (st_id_cmp(l->items[i].gid, gid) == 0) {
            if (hi > l->items[i].hi)
                l->items[i].hi = hi;
            return ST_OK;
        }
    return st_list_add(l, gid, 0, hi, 0, NULL, 0);
}

void st_list_set_more(st_list *l, bool more)
{
    l->more = more;
}

void st_list_set_after(st_list *l, st_id gid)
{
    l->after_n = gid.n <= ST_MAX_ID ? gid.n : 0;
    memcpy(l->after, gid.p, l->after_n);
}

st_id st_list_after(const st_list *l)
{
    return l ? (st_id){l->after, l->after_n} : (st_id){NULL, 0};
}

size_t st_list_count(const st_list *l)
{
    return l ? l->n : 0;
}

const st_item *st_list_at(const st_list *l, size_t i)
{
    return l && i < l->n ? &l->items[i] : NULL;
}

bool st_list_more(const st_list *l)
{
    return l && l->more;
}

void st_list_free(st_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free((char *)l->items[i].gid.p);
    free(l->items);
    free(l);
}

size_t st_list_limit(size_t limit)
{
    return limit > ST_LIST_MAX ? ST_LIST_MAX : limit;
}
