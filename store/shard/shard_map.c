/* The slot map's text, and a slot's hash (store.h, "Shards"). */
#include "shard_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sh_map_free(sh_map *m)
{
    for (unsigned i = 0; i < SH_MAX; i++)
        free(m->url[i]);
    memset(m, 0, sizeof(*m));
}

/* A whole decimal number at *p (advanced past it), at most max. */
static bool number(const char **p, uint64_t max, uint64_t *out)
{
    if (!isdigit((unsigned char)**p))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(*p, &end, 10);
    if (errno || v > max)
        return false;
    *p = end;
    *out = v;
    return true;
}

static const char *skip_blank(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static bool at_end(const char *p)
{
    p = skip_blank(p);
    return *p == 0 || *p == '#';
}

/* One line (NUL-terminated, no newline) into m; seen[] marks the slots given so far. */
static const char *parse_line(const char *line, sh_map *m, bool *seen, bool *has_version)
{
    const char *p = skip_blank(line);
    uint64_t a, b, i;
    if (at_end(p))
        return NULL;
    if (strncmp(p, "version", 7) == 0 && (p[7] == ' ' || p[7] == '\t')) {
        p = skip_blank(p + 7);
        if (*has_version)
            return "a second version line";
        if (!number(&p, UINT64_MAX, &m->version) || m->version == 0 || !at_end(p))
            return "version takes a whole number above 0";
        *has_version = true;
        return NULL;
    }
    if (strncmp(p, "shard", 5) == 0 && (p[5] == ' ' || p[5] == '\t')) {
        p = skip_blank(p + 5);
        if (!number(&p, SH_MAX - 1, &i))
            return "shard takes an index from 0 to 63, then the shard's PostgreSQL URL";
        if (m->url[i])
            return "that shard is named twice";
        p = skip_blank(p);
        size_t n = strcspn(p, " \t#");
        if (n == 0 || !at_end(p + n))
            return "shard takes an index, then one URL (no spaces)";
        if (strncmp(p, "postgresql://", 13) != 0 && strncmp(p, "postgres://", 11) != 0)
            return "a shard's URL is a PostgreSQL URI (postgresql://host/dbname)";
        if (!(m->url[i] = strndup(p, n)))
            return "out of memory";
        return NULL;
    }
    if (strncmp(p, "slots", 5) == 0 && (p[5] == ' ' || p[5] == '\t')) {
        p = skip_blank(p + 5);
        if (!number(&p, ST_SLOTS - 1, &a))
            return "slots takes A-B (0 to 4095) and a shard's index";
        b = a;
        if (*p == '-') {
            p++;
            if (!number(&p, ST_SLOTS - 1, &b) || b < a)
                return "slots takes A-B with A <= B <= 4095";
        }
        p = skip_blank(p);
        if (!number(&p, SH_MAX - 1, &i) || !at_end(p))
            return "slots takes A-B, then a shard's index";
        for (uint64_t s = a; s <= b; s++) {
            if (seen[s])
                return "a slot is given twice";
            seen[s] = true;
            m->owner[s] = (uint8_t)i;
        }
        return NULL;
    }
    return "not a line of a slot map (version, shard or slots)";
}

int sh_map_parse(const char *text, size_t n, sh_map *m, char *why, size_t why_len)
{
    memset(m, 0, sizeof(*m));
    bool seen[ST_SLOTS] = {false}, has_version = false;
    const char *err = NULL;
    unsigned line_no = 0;
    char line[1024];
    for (size_t at = 0; at < n && !err;) {
        size_t len = 0;
        while (at + len < n && text[at + len] != '\n')
            len++;
        line_no++;
        if (len >= sizeof(line)) {
            err = "a line longer than 1023 bytes";
            break;
        }
        memcpy(line, text + at, len);
        line[len] = 0;
        if (memchr(line, 0, len))
            err = "a NUL byte";
        else
            err = parse_line(line, m, seen, &has_version);
        at += len + 1;
    }
    if (!err) {
        line_no = 0;
        if (!has_version)
            err = "no version line";
        for (unsigned s = 0; !err && s < ST_SLOTS; s++) {
            if (!seen[s])
                err = "a slot belongs to no shard (every slot from 0 to 4095 must be given)";
            else if (!m->url[m->owner[s]])
                err = "a slot belongs to a shard the map does not name";
        }
        for (unsigned i = 0; i < SH_MAX; i++)
            if (m->url[i])
                m->n = i + 1;
        for (unsigned i = 0; !err && i < m->n; i++)
            if (!m->url[i])
                err = "shards must be numbered 0, 1, 2, ... without a gap";
    }
    if (err) {
        if (line_no)
            snprintf(why, why_len, "slot map, line %u: %s", line_no, err);
        else
            snprintf(why, why_len, "slot map: %s", err);
        sh_map_free(m);
        return ST_EINVAL;
    }
    return ST_OK;
}

char *sh_map_text(const sh_map *m)
{
    /* At most 64 shard lines of a URL each (kept under 900 bytes by the parser's line
     * bound) and a slots line per run of one owner (4,096 at worst). */
    size_t room = 128 + m->n * 1100 + ST_SLOTS * 24;
    char *t = malloc(room);
    if (!t)
        return NULL;
    size_t at = (size_t)snprintf(t, room, "# gw slot map (store.h, \"Shards\")\nversion %llu\n",
                                 (unsigned long long)m->version);
    for (unsigned i = 0; i < m->n; i++)
        at += (size_t)snprintf(t + at, room - at, "shard %u %s\n", i, m->url[i]);
    for (unsigned s = 0; s < ST_SLOTS;) {
        unsigned e = s;
        while (e + 1 < ST_SLOTS && m->owner[e + 1] == m->owner[s])
            e++;
        at += (size_t)snprintf(t + at, room - at, "slots %u-%u %u\n", s, e, m->owner[s]);
        s = e + 1;
    }
    return t;
}
