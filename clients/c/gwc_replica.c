/*
 * gwc_replica: a client's copy of its groups, converging by the client rule (see
 * gwc_replica.h). Messages of a group are kept in an array indexed by mid (a replica of a
 * test or a tool holds thousands, not millions); frames are read as msgpack objects.
 */
#include "gwc_replica.h"
#include "gwc.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_LIMIT 200
#define CHANGES_LIMIT 200
#define RETRY_MS 300   /* a request refused (unavailable, rate_limited) is asked again then */
#define STALE_MS 10000 /* ... and one never answered */
#define KIND_PAGE 0
#define KIND_CHANGES 1

typedef struct rep_reaction {
    char key[GWC_REP_KEY_MAX + 1];
    uint64_t count;
    bool mine;
} rep_reaction;

typedef struct rep_msg {
    bool held;
    bool recalled;
    bool body_bin;
    uint64_t ver, cseq, ts;
    char *from;
    uint8_t *body;
    size_t body_n;
    rep_reaction *rx; /* by key, byte order */
    size_t n_rx;
} rep_msg;

typedef struct rep_group {
    char gid[PR_MAX_ID + 1];
    bool held;
    uint64_t cursor;    /* changes applied up to here */
    uint64_t first_mid; /* the horizon: nothing below it is held */
    uint64_t top;       /* every mid in [first_mid, top] is held */
    rep_msg *m;         /* by mid */
    uint64_t cap;
    /* what is wanted and in flight */
    bool want_changes, changes_busy;
    bool want_page, page_busy;
    uint64_t page_after; /* the next page begins after this mid */
    /* A re-read of the window held (changes_gone_before): its own position, which the
     * pages that fill the top, the horizon's moves and pushes do not move. It goes before
     * other pages; a second changes_gone_before starts it again (a new generation: the
     * reply of a page of the old one then does not move it). */
    bool repaging;
    uint64_t repage_after;
    unsigned repage_gen;
    bool page_is_repage;          /* the page in flight is one of the re-read's ... */
    unsigned page_gen;            /* ... of this generation */
    uint64_t changes_at, page_at; /* when sent, or (not busy) not before then */
    /* the catch-up under way */
    bool catching;
    gwc_rep_catchup cu;
} rep_group;

struct gwc_rep {
    char uid[PR_MAX_ID + 1];
    rep_group *g;
    size_t n_g, cap_g;
    gwc_rep_catchup_cb cb;
    void *ud;
    bool skip_armed;
    char skip_gid[PR_MAX_ID + 1];
    uint64_t skipped;
    uint64_t now; /* of the last gwc_rep_next_request */
};

/* --- msgpack reading ---------------------------------------------------------------- */

static const msgpack_object *get(const msgpack_object *map, const char *k)
{
    if (map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t kn = strlen(k);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *key = &map->via.map.ptr[i].key;
        if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == kn &&
            !memcmp(key->via.str.ptr, k, kn))
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

static uint64_t get_u64(const msgpack_object *map, const char *k, uint64_t dflt)
{
    const msgpack_object *v = get(map, k);
    return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : dflt;
}

static bool get_bool(const msgpack_object *map, const char *k)
{
    const msgpack_object *v = get(map, k);
    return v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
}

/* A str field copied into out (n bytes with its NUL); false when absent or too long. */
static bool get_str(const msgpack_object *map, const char *k, char *out, size_t n)
{
    const msgpack_object *v = get(map, k);
    if (!v || v->type != MSGPACK_OBJECT_STR || v->via.str.size >= n)
        return false;
    memcpy(out, v->via.str.ptr, v->via.str.size);
    out[v->via.str.size] = 0;
    return true;
}

/* --- groups and messages ------------------------------------------------------------ */

static rep_group *find(const gwc_rep *r, const char *gid)
{
    for (size_t i = 0; i < r->n_g; i++)
        if (r->g[i].held && !strcmp(r->g[i].gid, gid))
            return &r->g[i];
    return NULL;
}

static rep_group *find_obj(const gwc_rep *r, const msgpack_object *map)
{
    char gid[PR_MAX_ID + 1];
    return get_str(map, "gid", gid, sizeof gid) ? find(r, gid) : NULL;
}

static void msg_clear(rep_msg *m)
{
    free(m->from);
    free(m->body);
    free(m->rx);
    memset(m, 0, sizeof *m);
}

static void group_drop(rep_group *g)
{
    for (uint64_t i = 0; i < g->cap; i++)
        msg_clear(&g->m[i]);
    free(g->m);
    g->m = NULL;
    g->cap = 0;
    g->held = false;
}

static rep_group *group_add(gwc_rep *r, const char *gid, uint64_t first_mid, uint64_t last_cseq)
{
    if (r->n_g == r->cap_g) {
        size_t cap = r->cap_g ? 2 * r->cap_g : 8;
        rep_group *g = realloc(r->g, cap * sizeof *g);
        if (!g)
            return NULL;
        r->g = g;
        r->cap_g = cap;
    }
    rep_group *g = &r->g[r->n_g++];
    memset(g, 0, sizeof *g);
    snprintf(g->gid, sizeof g->gid, "%s", gid);
    g->held = true;
    /* A group first seen: its cursor is the snapshot's, taken before any page is read,
     * so every change after it is pushed (online) or pulled. */
    g->cursor = last_cseq;
    g->first_mid = first_mid ? first_mid : 1;
    g->top = g->first_mid - 1;
    g->want_page = true;
    g->page_after = g->top;
    return g;
}

/* Room for mid in g->m; NULL when out of memory. */
static rep_msg *slot(rep_group *g, uint64_t mid)
{
    if (mid >= g->cap) {
        uint64_t cap = g->cap ? g->cap : 64;
        while (cap <= mid)
            cap *= 2;
        rep_msg *m = realloc(g->m, cap * sizeof *m);
        if (!m)
            return NULL;
        memset(m + g->cap, 0, (cap - g->cap) * sizeof *m);
        g->m = m;
        g->cap = cap;
    }
    return &g->m[mid];
}

static rep_msg *held(rep_group *g, uint64_t mid)
{
    return mid < g->cap && g->m[mid].held ? &g->m[mid] : NULL;
}

static void advance_top(rep_group *g)
{
    while (held(g, g->top + 1))
        g->top++;
}

/* The horizon moved: what is below it goes. */
static void set_horizon(rep_group *g, uint64_t first_mid)
{
    if (first_mid <= g->first_mid)
        return;
    for (uint64_t mid = g->first_mid; mid < first_mid && mid < g->cap; mid++)
        msg_clear(&g->m[mid]);
    g->first_mid = first_mid;
    if (g->top < first_mid - 1)
        g->top = first_mid - 1;
    if (g->page_after < g->top)
        g->page_after = g->top;
    if (g->repage_after < first_mid - 1)
        g->repage_after = first_mid - 1;
    advance_top(g);
}

static int rx_cmp(const void *a, const void *b)
{
    return strcmp(((const rep_reaction *)a)->key, ((const rep_reaction *)b)->key);
}

/* Sets key's count (0: removes it) and, when mine >= 0, whether it is the reader's. */
static int rx_set(rep_msg *m, const char *key, uint64_t count, int mine)
{
    for (size_t i = 0; i < m->n_rx; i++) {
        if (strcmp(m->rx[i].key, key))
            continue;
        if (!count) {
            memmove(&m->rx[i], &m->rx[i + 1], (m->n_rx - i - 1) * sizeof *m->rx);
            m->n_rx--;
            return 0;
        }
        m->rx[i].count = count;
        if (mine >= 0)
            m->rx[i].mine = mine;
        return 0;
    }
    if (!count)
        return 0;
    rep_reaction *rx = realloc(m->rx, (m->n_rx + 1) * sizeof *rx);
    if (!rx)
        return GWC_ENOMEM;
    m->rx = rx;
    rep_reaction *x = &m->rx[m->n_rx++];
    snprintf(x->key, sizeof x->key, "%s", key);
    x->count = count;
    x->mine = mine > 0;
    qsort(m->rx, m->n_rx, sizeof *m->rx, rx_cmp);
    return 0;
}

/* A message's content from an entry or push (from, ts, body or recalled, ver). */
static int set_content(rep_msg *m, const msgpack_object *e)
{
    const msgpack_object *from = get(e, "from"), *body = get(e, "body");
    free(m->from);
    free(m->body);
    m->from = NULL;
    m->body = NULL;
    m->body_n = 0;
    m->recalled = get_bool(e, "recalled");
    m->ver = get_u64(e, "ver", 0);
    m->ts = get_u64(e, "ts", 0);
    if (from && from->type == MSGPACK_OBJECT_STR) {
        if (!(m->from = malloc(from->via.str.size + 1)))
            return GWC_ENOMEM;
        memcpy(m->from, from->via.str.ptr, from->via.str.size);
        m->from[from->via.str.size] = 0;
    }
    if (!m->recalled && body &&
        (body->type == MSGPACK_OBJECT_STR || body->type == MSGPACK_OBJECT_BIN)) {
        size_t n = body->via.str.size; /* str and bin share the layout */
        if (!(m->body = malloc(n ? n : 1)))
            return GWC_ENOMEM;
        memcpy(m->body, body->via.str.ptr, n);
        m->body_n = n;
        m->body_bin = body->type == MSGPACK_OBJECT_BIN;
    }
    return 0;
}

static void make_tombstone(rep_msg *m)
{
    m->recalled = true;
    free(m->body);
    m->body = NULL;
    m->body_n = 0;
    m->n_rx = 0;
}

/* A page or changes entry: the message's whole state (reactions and mine included). */
static int set_entry(rep_group *g, const msgpack_object *e)
{
    uint64_t mid = get_u64(e, "mid", 0);
    if (!mid || mid < g->first_mid)
        return 0;
    uint64_t cseq = get_u64(e, "cseq", 0);
    rep_msg *m = held(g, mid);
    if (m && cseq < m->cseq)
        return 0; /* older than what is held */
    if (!m) {
        if (!(m = slot(g, mid)))
            return GWC_ENOMEM;
        m->held = true;
    }
    int rc = set_content(m, e);
    if (rc)
        return rc;
    m->cseq = cseq;
    m->n_rx = 0;
    const msgpack_object *rx = get(e, "reactions"), *mine = get(e, "mine");
    if (rx && rx->type == MSGPACK_OBJECT_MAP && !m->recalled) {
        for (uint32_t i = 0; i < rx->via.map.size; i++) {
            const msgpack_object *k = &rx->via.map.ptr[i].key, *v = &rx->via.map.ptr[i].val;
            char key[GWC_REP_KEY_MAX + 1];
            if (k->type != MSGPACK_OBJECT_STR || k->via.str.size > GWC_REP_KEY_MAX ||
                v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                continue;
            memcpy(key, k->via.str.ptr, k->via.str.size);
            key[k->via.str.size] = 0;
            if ((rc = rx_set(m, key, v->via.u64, 0)))
                return rc;
        }
    }
    if (mine && mine->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < mine->via.array.size; i++) {
            const msgpack_object *k = &mine->via.array.ptr[i];
            if (k->type != MSGPACK_OBJECT_STR || k->via.str.size > GWC_REP_KEY_MAX)
                continue;
            for (size_t j = 0; j < m->n_rx; j++)
                if (strlen(m->rx[j].key) == k->via.str.size &&
                    !memcmp(m->rx[j].key, k->via.str.ptr, k->via.str.size))
                    m->rx[j].mine = true;
        }
    if (mid == g->top + 1)
        advance_top(g);
    return 0;
}

/* --- the client rule --------------------------------------------------------------- */

static void want_changes(rep_group *g)
{
    if (!g->want_changes && !g->changes_busy && !g->catching) {
        g->catching = true;
        g->cu = (gwc_rep_catchup){.gid = g->gid};
        for (uint64_t mid = g->first_mid; mid < g->cap; mid++)
            g->cu.held += g->m[mid].held;
    }
    g->want_changes = true;
}

static void want_page(rep_group *g)
{
    g->want_page = true;
    if (!g->page_busy && g->page_after < g->top)
        g->page_after = g->top;
    if (!g->page_busy && g->page_after > g->top)
        g->page_after = g->top;
}

/* The cursor after a push of cseq that was applied (or needs no applying). */
static void push_cursor(rep_group *g, uint64_t cseq)
{
    if (cseq <= g->cursor)
        return;
    if (cseq == g->cursor + 1 && !g->changes_busy && !g->want_changes)
        g->cursor = cseq;
    else
        want_changes(g); /* a hole before it: pull from the cursor */
}

/* edited / recalled, a reply or a push. */
static int on_version(gwc_rep *r, rep_group *g, const msgpack_object *e, bool recall)
{
    uint64_t mid = get_u64(e, "mid", 0), cseq = get_u64(e, "cseq", 0);
    if (!mid || mid < g->first_mid)
        return 0;
    rep_msg *m = held(g, mid);
    if (!cseq) { /* a server without change cursors: the page shows it again */
        if (m && (recall || get_u64(e, "ver", 0) > m->ver) && !m->recalled) {
            uint64_t c = m->cseq;
            int rc = set_content(m, e);
            m->cseq = c;
            if (recall)
                make_tombstone(m);
            return rc;
        }
        return 0;
    }
    if (!m) { /* not held: its whole state comes with the changes */
        if (cseq > g->cursor)
            want_changes(g);
        return 0;
    }
    if (cseq > m->cseq) {
        if (recall && r->skip_armed && !strcmp(g->gid, r->skip_gid)) {
            r->skip_armed = false; /* the fault: dropped, yet the cursor moves on */
            r->skipped++;
            m->cseq = cseq;
        } else {
            int rc = set_content(m, e); /* reactions stay on an edit, go with a recall */
            if (rc)
                return rc;
            m->cseq = cseq;
            if (recall)
                make_tombstone(m); /* `recalled` says so by its t alone */
        }
    }
    push_cursor(g, cseq);
    return 0;
}

static int on_reacted(gwc_rep *r, rep_group *g, const msgpack_object *e)
{
    uint64_t mid = get_u64(e, "mid", 0), cseq = get_u64(e, "cseq", 0);
    char key[GWC_REP_KEY_MAX + 1], uid[PR_MAX_ID + 1];
    if (!mid || mid < g->first_mid || !get_str(e, "key", key, sizeof key))
        return 0;
    if (get_bool(e, "duplicate")) { /* nothing changed; its cseq is the message's */
        if (cseq > g->cursor)
            want_changes(g);
        return 0;
    }
    rep_msg *m = held(g, mid);
    if (!m || !cseq) {
        if (cseq > g->cursor)
            want_changes(g);
        return 0;
    }
    if (cseq > m->cseq) {
        int mine = get_str(e, "uid", uid, sizeof uid) && !strcmp(uid, r->uid)
                       ? (int)get_bool(e, "on")
                       : -1;
        int rc = rx_set(m, key, get_u64(e, "count", 0), mine);
        if (rc)
            return rc;
        m->cseq = cseq;
    }
    push_cursor(g, cseq);
    return 0;
}

static void catchup_done(gwc_rep *r, rep_group *g)
{
    if (!g->catching)
        return;
    g->catching = false;
    if (r->cb)
        r->cb(r->ud, &g->cu);
}

static int on_changes(gwc_rep *r, rep_group *g, const msgpack_object *e, size_t bytes)
{
    g->changes_busy = false;
    g->cu.rounds++;
    g->cu.bytes += bytes;
    set_horizon(g, get_u64(e, "first_mid", 1));
    uint64_t gone = get_u64(e, "changes_gone_before", 0);
    if (gone) {
        /* The log no longer reaches the cursor: the window held is read again. */
        g->cursor = get_u64(e, "last_cseq", g->cursor);
        g->cu.gone = true;
        g->repaging = true;
        g->repage_after = g->first_mid - 1;
        g->repage_gen++;
        g->want_changes = false;
        catchup_done(r, g);
        return 0;
    }
    const msgpack_object *msgs = get(e, "msgs");
    if (msgs && msgs->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < msgs->via.array.size; i++) {
            int rc = set_entry(g, &msgs->via.array.ptr[i]);
            if (rc)
                return rc;
            g->cu.entries++;
        }
    uint64_t upto = get_u64(e, "upto", g->cursor);
    if (upto > g->cursor)
        g->cursor = upto;
    if (get_u64(e, "last_mid", 0) > g->top)
        want_page(g);
    /* A push with a hole that came while this was in flight has set want_changes
     * already: it stays (the reply's snapshot may be older than that push). */
    if (get_bool(e, "more") || get_u64(e, "last_cseq", 0) > g->cursor)
        g->want_changes = true;
    if (!g->want_changes)
        catchup_done(r, g);
    return 0;
}

static int on_page(rep_group *g, const msgpack_object *e)
{
    g->page_busy = false;
    bool repage = g->page_is_repage && g->page_gen == g->repage_gen;
    g->page_is_repage = false;
    set_horizon(g, get_u64(e, "first_mid", 1));
    const msgpack_object *msgs = get(e, "msgs");
    uint64_t last = 0;
    if (msgs && msgs->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < msgs->via.array.size; i++) {
            int rc = set_entry(g, &msgs->via.array.ptr[i]);
            if (rc)
                return rc;
            last = get_u64(&msgs->via.array.ptr[i], "mid", last);
        }
    advance_top(g);
    if (repage) { /* the re-read goes on or is done; the top is filled as ever */
        if (get_bool(e, "more") && last > g->repage_after)
            g->repage_after = last;
        else
            g->repaging = false;
        if (get_u64(e, "last_mid", 0) > g->top)
            want_page(g);
    } else if (get_bool(e, "more") && last > g->page_after) {
        g->page_after = last;
        g->want_page = true;
    } else {
        g->page_after = g->top;
        g->want_page = get_u64(e, "last_mid", 0) > g->top;
    }
    if (get_u64(e, "last_cseq", 0) > g->cursor && !g->changes_busy)
        want_changes(g);
    return 0;
}

static int on_msg(rep_group *g, const msgpack_object *e)
{
    uint64_t mid = get_u64(e, "mid", 0);
    if (!mid || mid < g->first_mid)
        return 0;
    if (!held(g, mid)) {
        rep_msg *m = slot(g, mid);
        if (!m)
            return GWC_ENOMEM;
        int rc = set_content(m, e);
        if (rc)
            return rc;
        m->held = true;
        m->cseq = get_u64(e, "cseq", 0);
    }
    advance_top(g);
    if (mid > g->top)
        want_page(g);
    return 0;
}

/* A group of welcome / groups / joined. */
static int on_group(gwc_rep *r, const msgpack_object *e)
{
    char gid[PR_MAX_ID + 1];
    if (!get_str(e, "gid", gid, sizeof gid))
        return 0;
    rep_group *g = find(r, gid);
    uint64_t first = get_u64(e, "first_mid", 1), last_cseq = get_u64(e, "last_cseq", 0);
    if (!g)
        return group_add(r, gid, first, last_cseq) ? 0 : GWC_ENOMEM;
    set_horizon(g, first);
    if (last_cseq > g->cursor)
        want_changes(g);
    if (get_u64(e, "last_mid", 0) > g->top)
        want_page(g);
    return 0;
}

static int on_err(rep_group *g, const msgpack_object *e, uint64_t now)
{
    uint64_t rid = get_u64(e, "rid", 0);
    char code[32] = "";
    get_str(e, "code", code, sizeof code);
    if ((rid - GWC_REP_RID_BASE) % 2 == KIND_CHANGES) {
        if (!strcmp(code, "no_group")) {
            group_drop(g);
            return 0;
        }
        g->changes_busy = false;
        g->want_changes = true;
        g->changes_at = now + RETRY_MS;
    } else {
        g->page_busy = false;
        g->want_page = true;
        g->page_at = now + RETRY_MS;
    }
    return 0;
}

static int on_event(gwc_rep *r, const msgpack_object *e, size_t bytes)
{
    if (e->type != MSGPACK_OBJECT_MAP)
        return 0;
    char t[24];
    if (!get_str(e, "t", t, sizeof t))
        return 0;
    if (!strcmp(t, "welcome") || !strcmp(t, "groups")) {
        const msgpack_object *gs = get(e, "groups");
        if (gs && gs->type == MSGPACK_OBJECT_ARRAY)
            for (uint32_t i = 0; i < gs->via.array.size; i++) {
                int rc = on_group(r, &gs->via.array.ptr[i]);
                if (rc)
                    return rc;
            }
        return 0;
    }
    if (!strcmp(t, "joined"))
        return on_group(r, e);
    if (!strcmp(t, "err")) { /* to a request of the replica's: its rid names the group */
        uint64_t rid = get_u64(e, "rid", 0);
        size_t gi = (size_t)((rid - GWC_REP_RID_BASE) / 2);
        if (rid < GWC_REP_RID_BASE || gi >= r->n_g || !r->g[gi].held)
            return 0;
        return on_err(&r->g[gi], e, r->now);
    }
    rep_group *g = find_obj(r, e);
    if (!g)
        return 0;
    if (!strcmp(t, "left")) {
        group_drop(g);
        return 0;
    }
    if (!strcmp(t, "changes"))
        return on_changes(r, g, e, bytes);
    if (!strcmp(t, "page"))
        return on_page(g, e);
    if (!strcmp(t, "msg"))
        return on_msg(g, e);
    if (!strcmp(t, "edited") || !strcmp(t, "recalled"))
        return on_version(r, g, e, t[0] == 'r');
    if (!strcmp(t, "reacted"))
        return on_reacted(r, g, e);
    if (!strcmp(t, "changed")) {
        if (get_u64(e, "last_cseq", 0) > g->cursor)
            want_changes(g);
        return 0;
    }
    if (!strcmp(t, "notify") || !strcmp(t, "sent")) {
        uint64_t mid = get_u64(e, strcmp(t, "sent") ? "last_mid" : "mid", 0);
        if (mid > g->top)
            want_page(g);
        return 0;
    }
    return 0;
}

int gwc_rep_frame(gwc_rep *r, const uint8_t *frame, size_t len)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (!r || msgpack_unpack_next(&u, (const char *)frame, len, &off) != MSGPACK_UNPACK_SUCCESS) {
        msgpack_unpacked_destroy(&u);
        return GWC_EPROTO;
    }
    int rc = 0;
    const msgpack_object *o = &u.data;
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t i = 0; i < o->via.array.size && !rc; i++)
            rc = on_event(r, &o->via.array.ptr[i],
                          len / (o->via.array.size ? o->via.array.size : 1));
    } else {
        rc = on_event(r, o, len);
    }
    msgpack_unpacked_destroy(&u);
    return rc;
}

/* --- requests ------------------------------------------------------------------------ */

int gwc_rep_next_request(gwc_rep *r, msgpack_sbuffer *b, uint64_t now_ms)
{
    r->now = now_ms;
    for (size_t i = 0; i < r->n_g; i++) {
        rep_group *g = &r->g[i];
        if (!g->held)
            continue;
        /* unanswered for too long (a node that hangs): asked again */
        if (g->changes_busy && now_ms > g->changes_at + STALE_MS) {
            g->changes_busy = false;
            g->want_changes = true;
        }
        if (g->page_busy && now_ms > g->page_at + STALE_MS) {
            g->page_busy = false;
            g->want_page = true;
        }
        pr_slice gid = {(const uint8_t *)g->gid, strlen(g->gid)};
        /* Pages first: a changes entry of a message above the top is kept either way, but
         * the window should be there before its changes are counted. */
        if ((g->want_page || g->repaging) && !g->page_busy && now_ms >= g->page_at) {
            bool re = g->repaging;
            if (pr_enc_pull(b, GWC_REP_RID_BASE + 2 * i + KIND_PAGE, gid, false,
                            re ? g->repage_after : g->page_after, PAGE_LIMIT))
                return GWC_ENOMEM;
            if (!re)
                g->want_page = false;
            g->page_is_repage = re;
            g->page_gen = g->repage_gen;
            g->page_busy = true;
            g->page_at = now_ms;
            return 1;
        }
        if (g->want_changes && !g->changes_busy && now_ms >= g->changes_at) {
            if (pr_enc_changes_req(b, GWC_REP_RID_BASE + 2 * i + KIND_CHANGES, gid, g->cursor,
                                   CHANGES_LIMIT))
                return GWC_ENOMEM;
            g->want_changes = false;
            g->changes_busy = true;
            g->changes_at = now_ms;
            return 1;
        }
    }
    return 0;
}

void gwc_rep_disconnected(gwc_rep *r)
{
    for (size_t i = 0; i < r->n_g; i++) {
        rep_group *g = &r->g[i];
        if (g->changes_busy)
            g->want_changes = true;
        if (g->page_busy)
            g->want_page = true;
        g->changes_busy = g->page_busy = false;
        g->changes_at = g->page_at = 0;
    }
}

void gwc_rep_catch_up(gwc_rep *r)
{
    for (size_t i = 0; i < r->n_g; i++)
        if (r->g[i].held) {
            want_changes(&r->g[i]);
            want_page(&r->g[i]);
        }
}

bool gwc_rep_idle(const gwc_rep *r)
{
    for (size_t i = 0; i < r->n_g; i++) {
        const rep_group *g = &r->g[i];
        if (g->held &&
            (g->want_changes || g->changes_busy || g->want_page || g->page_busy || g->repaging))
            return false;
    }
    return true;
}

/* --- life and reading ---------------------------------------------------------------- */

gwc_rep *gwc_rep_new(const char *uid, gwc_rep_catchup_cb cb, void *ud)
{
    gwc_rep *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    snprintf(r->uid, sizeof r->uid, "%s", uid ? uid : "");
    r->cb = cb;
    r->ud = ud;
    return r;
}

void gwc_rep_free(gwc_rep *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_g; i++)
        group_drop(&r->g[i]);
    free(r->g);
    free(r);
}

void gwc_rep_inject_skip(gwc_rep *r, const char *gid)
{
    r->skip_armed = true;
    snprintf(r->skip_gid, sizeof r->skip_gid, "%s", gid);
}

uint64_t gwc_rep_skipped(const gwc_rep *r)
{
    return r->skipped;
}

size_t gwc_rep_n_groups(const gwc_rep *r)
{
    return r->n_g;
}

const char *gwc_rep_group(const gwc_rep *r, size_t i)
{
    return i < r->n_g && r->g[i].held ? r->g[i].gid : NULL;
}

int gwc_rep_group_state(const gwc_rep *r, const char *gid, uint64_t *cursor, uint64_t *first_mid,
                        uint64_t *top)
{
    const rep_group *g = find(r, gid);
    if (!g)
        return -1;
    if (cursor)
        *cursor = g->cursor;
    if (first_mid)
        *first_mid = g->first_mid;
    if (top)
        *top = g->top;
    return 0;
}

int gwc_rep_get(const gwc_rep *r, const char *gid, uint64_t mid, gwc_rep_msg *out)
{
    rep_group *g = find(r, gid);
    const rep_msg *m = g ? held(g, mid) : NULL;
    if (!m)
        return -1;
    *out = (gwc_rep_msg){.mid = mid,
                         .ver = m->ver,
                         .cseq = m->cseq,
                         .ts = m->ts,
                         .recalled = m->recalled,
                         .from = m->from ? m->from : "",
                         .body = m->body,
                         .body_n = m->body_n,
                         .body_bin = m->body_bin,
                         .n_reactions = m->n_rx};
    return 0;
}

int gwc_rep_reaction(const gwc_rep *r, const char *gid, uint64_t mid, size_t i, const char **key,
                     uint64_t *count, bool *mine)
{
    rep_group *g = find(r, gid);
    const rep_msg *m = g ? held(g, mid) : NULL;
    if (!m || i >= m->n_rx)
        return -1;
    *key = m->rx[i].key;
    *count = m->rx[i].count;
    *mine = m->rx[i].mine;
    return 0;
}

uint64_t gwc_rep_max_mid(const gwc_rep *r, const char *gid)
{
    const rep_group *g = find(r, gid);
    if (!g)
        return 0;
    for (uint64_t mid = g->cap; mid-- > 0;)
        if (g->m[mid].held)
            return mid;
    return 0;
}

uint64_t gwc_rep_n_held(const gwc_rep *r, const char *gid)
{
    const rep_group *g = find(r, gid);
    uint64_t n = 0;
    for (uint64_t mid = 0; g && mid < g->cap; mid++)
        n += g->m[mid].held;
    return n;
}
