/*
 * The slot map as tools see it (store.h: st_slot_map_*): read it, write its next version
 * with slots given to another shard (tools/gw_slots moves their rows first).
 */
#include "shard_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_slot_map {
    sh_map m;
    char *text; /* as read: what a write compares with */
};

int st_slot_map_read(const char *url, st_slot_map **out, char *why, size_t why_len)
{
    *out = NULL;
    sh_source *src;
    int rc = sh_source_new(url, &src, why, why_len);
    if (rc != ST_OK)
        return rc;
    st_slot_map *m = calloc(1, sizeof(*m));
    size_t n = 0;
    rc = m ? sh_source_read(src, &m->text, &n, why, why_len) : ST_ENOMEM;
    if (rc == ST_OK)
        rc = sh_map_parse(m->text, n, &m->m, why, why_len);
    sh_source_free(src);
    if (rc != ST_OK) {
        st_slot_map_free(m);
        return rc;
    }
    *out = m;
    return ST_OK;
}

void st_slot_map_free(st_slot_map *m)
{
    if (!m)
        return;
    sh_map_free(&m->m);
    free(m->text);
    free(m);
}

uint64_t st_slot_map_version(const st_slot_map *m)
{
    return m->m.version;
}

unsigned st_slot_map_shards(const st_slot_map *m)
{
    return m->m.n;
}

const char *st_slot_map_url(const st_slot_map *m, unsigned shard)
{
    return shard < m->m.n ? m->m.url[shard] : NULL;
}

unsigned st_slot_map_owner(const st_slot_map *m, unsigned slot)
{
    return slot < ST_SLOTS ? m->m.owner[slot] : 0;
}

char *st_slot_map_text(const st_slot_map *m)
{
    return sh_map_text(&m->m);
}

int st_slot_map_move(const char *url, const st_slot_map *m, unsigned a, unsigned b, unsigned to,
                     const char *new_url, char *why, size_t why_len)
{
    if (a > b || b >= ST_SLOTS || to > m->m.n || (to == m->m.n) != (new_url != NULL) ||
        to >= SH_MAX) {
        snprintf(why, why_len,
                 "slots %u-%u to shard %u: not slots of 0..4095 in order, or not "
                 "a shard of the map (a new one is the next index, with its URL)",
                 a, b, to);
        return ST_EINVAL;
    }
    sh_map next = m->m;
    memset(next.url, 0, sizeof(next.url));
    int rc = ST_OK;
    for (unsigned i = 0; i < m->m.n && rc == ST_OK; i++)
        rc = (next.url[i] = strdup(m->m.url[i])) ? ST_OK : ST_ENOMEM;
    if (rc == ST_OK && new_url) {
        rc = (next.url[to] = strdup(new_url)) ? ST_OK : ST_ENOMEM;
        next.n = to + 1;
    }
    next.version = m->m.version + 1;
    for (unsigned s = a; s <= b; s++)
        next.owner[s] = (uint8_t)to;
    char *text = rc == ST_OK ? sh_map_text(&next) : NULL;
    sh_map_free(&next);
    if (!text)
        return ST_ENOMEM;
    /* What is written must read back as a map: checked before it goes. */
    sh_map check;
    rc = sh_map_parse(text, strlen(text), &check, why, why_len);
    sh_map_free(&check);
    sh_source *src = NULL;
    if (rc == ST_OK)
        rc = sh_source_new(url, &src, why, why_len);
    if (rc == ST_OK)
        rc = sh_source_swap(src, m->text, text, why, why_len);
    sh_source_free(src);
    free(text);
    return rc;
}
