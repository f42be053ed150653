/*
 * What reads hand back: a page of messages, a user's list of groups and a page of a
 * group's members. Each owns its bytes, so it outlives the snapshot and the thread that
 * read it. The backends build them with the helpers in store_internal.h.
 */
#include "store_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct st_page {
    uint64_t last_mid;
    uint64_t first_mid;   /* the horizon */
    uint64_t gone_before; /* the range asked reached below it: the horizon; else 0 */
    bool more;
    uint64_t last_cseq;    /* Changes: the group's, in that snapshot */
    uint64_t upto;         /* a changes page: complete up to this cseq */
    uint64_t changes_gone; /* ... or changes_first, when `from` is below the log's start */
    size_t n, cap;
    st_msg *msgs;
    size_t *offs; /* each record's offset in bytes, until finished */
    char *bytes;  /* every record and reaction key, back to back; msgs[i].record and the
                   * reactions' keys point in here once finished */
    size_t used, room;
    /* Every message's reactions, back to back. Until finished, msgs[i].reactions holds
     * the index of its first one and each key.p the key's offset in bytes (both move
     * while the arrays grow, so pointers are made at the end). */
    st_reaction *rx;
    size_t n_rx, cap_rx;
};

struct st_groups {
    st_user_group *g;
    size_t n, cap;
    char *ids; /* every gid, back to back; g[i].gid points in here once finished */
    size_t *offs;
    size_t used, room;
};

/* A member of a page, in a slot of its own: a page being filled replaces its greatest
 * uid when a smaller one comes, and fixed slots make that a copy, with no bytes to free
 * or compact. At most ST_MEMBERS_MAX + 1 of them: under 270 KB. */
typedef struct member_slot {
    uint64_t ack;
    uint64_t read;
    bool has_read;
    unsigned char n;
    char uid[ST_MAX_ID];
} member_slot;

/* Until finished, slots[0..n) is a max-heap by uid (the greatest on top, the first to
 * go); then it is in ascending order and n at most limit. */
struct st_members {
    uint64_t last_mid;
    bool more;
    size_t limit; /* the page's most members; it keeps one more, to know about more */
    size_t n, cap;
    member_slot *slots;
};

bool st_page_range(enum st_dir dir, uint64_t from, size_t limit, uint64_t first_mid,
                   uint64_t last_mid, uint64_t *lo, uint64_t *hi, uint64_t *gone)
{
    if (first_mid < 1)
        first_mid = 1;
    *gone = 0;
    if (dir == ST_AFTER) {
        if (from + 1 < first_mid) {
            *gone = first_mid; /* asked from below the horizon: the page starts there */
            from = first_mid - 1;
        }
        if (from >= last_mid)
            return false;
        *lo = from + 1;
        *hi = (last_mid - from > limit) ? from + limit : last_mid;
        return true;
    }
    if (from <= 1 || last_mid == 0)
        return false;
    *hi = from - 1 < last_mid ? from - 1 : last_mid;
    uint64_t want = *hi >= limit ? *hi - limit + 1 : 1;
    if (want < first_mid)
        *gone = first_mid; /* the page would reach below the horizon: it stops there */
    if (*hi < first_mid)
        return false;
    *lo = want < first_mid ? first_mid : want;
    return true;
}

st_page *st_page_new(uint64_t first_mid, uint64_t last_mid, uint64_t gone_before)
{
    st_page *p = calloc(1, sizeof(*p));
    if (p) {
        p->last_mid = last_mid;
        p->first_mid = first_mid < 1 ? 1 : first_mid;
        p->gone_before = gone_before;
    }
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

int st_page_add(st_page *p, const st_msg *m)
{
    size_t n = m->record_n, keys = 0;
    for (size_t i = 0; i < m->n_reactions; i++)
        keys += m->reactions[i].key.n;
    if (p->n == p->cap && st_page_reserve(p, p->cap ? p->cap * 2 : 16) != ST_OK)
        return ST_ENOMEM;
    if (!grow_bytes(&p->bytes, &p->used, &p->room, n + keys))
        return ST_ENOMEM;
    if (!st_room(&p->rx, &p->cap_rx, p->n_rx + m->n_reactions, sizeof(*p->rx), 16))
        return ST_ENOMEM;
    if (n)
        memcpy(p->bytes + p->used, m->record, n);
    p->offs[p->n] = p->used;
    p->msgs[p->n] = *m;
    p->msgs[p->n].record = NULL; /* set from offs when the page is finished */
    p->msgs[p->n++].reactions = (const st_reaction *)(uintptr_t)p->n_rx;
    p->used += n;
    for (size_t i = 0; i < m->n_reactions; i++) {
        st_reaction r = m->reactions[i];
        memcpy(p->bytes + p->used, r.key.p, r.key.n);
        r.key.p = (const char *)(uintptr_t)p->used;
        p->used += r.key.n;
        p->rx[p->n_rx++] = r;
    }
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
    for (size_t i = 0; i < p->n; i++) {
        p->msgs[i].record = p->bytes + p->offs[i];
        size_t at = (uintptr_t)p->msgs[i].reactions;
        p->msgs[i].reactions = p->msgs[i].n_reactions ? p->rx + at : NULL;
    }
    for (size_t i = 0; i < p->n_rx; i++)
        p->rx[i].key.p = p->bytes + (uintptr_t)p->rx[i].key.p;
    p->more = more;
}

void st_page_set_last_cseq(st_page *p, uint64_t last_cseq)
{
    p->last_cseq = last_cseq;
}

void st_page_set_changes(st_page *p, uint64_t upto, uint64_t changes_gone)
{
    p->upto = upto;
    p->changes_gone = changes_gone;
}

uint64_t st_page_last_cseq(const st_page *p)
{
    return p->last_cseq;
}

uint64_t st_page_upto(const st_page *p)
{
    return p->upto;
}

uint64_t st_page_changes_gone(const st_page *p)
{
    return p->changes_gone;
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

uint64_t st_page_first_mid(const st_page *p)
{
    return p->first_mid;
}

uint64_t st_page_gone_before(const st_page *p)
{
    return p->gone_before;
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
    free(p->rx);
    free(p);
}

st_groups *st_groups_new(void)
{
    return calloc(1, sizeof(st_groups));
}

int st_groups_add(st_groups *g, st_id gid, uint64_t first_mid, uint64_t last_mid, uint64_t ack,
                  uint64_t read, bool has_read)
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
    /* Unread counts from the read once there is one, and never below the horizon. */
    uint64_t seen = st_seen_from(has_read ? read : ack, first_mid);
    g->g[g->n++] = (st_user_group){.gid = {NULL, gid.n},
                                   .last_mid = last_mid,
                                   .first_mid = first_mid < 1 ? 1 : first_mid,
                                   .ack = ack,
                                   .unread = last_mid > seen ? last_mid - seen : 0,
                                   .read = has_read ? read : 0,
                                   .has_read = has_read};
    g->g[g->n - 1].gid.p = g->ids + g->offs[g->n - 1];
    if (base != g->ids) /* the ids moved: point the earlier entries again */
        for (size_t i = 0; i + 1 < g->n; i++)
            g->g[i].gid.p = g->ids + g->offs[i];
    return ST_OK;
}

void st_groups_set_last_cseq(st_groups *g, uint64_t last_cseq)
{
    if (g->n)
        g->g[g->n - 1].last_cseq = last_cseq;
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

/* ---- members ---------------------------------------------------------------------------- */

static st_id slot_id(const member_slot *m)
{
    return (st_id){m->uid, m->n};
}

static int slot_cmp(const void *a, const void *b)
{
    return st_id_cmp(slot_id(a), slot_id(b));
}

static void slot_swap(member_slot *a, member_slot *b)
{
    member_slot t = *a;
    *a = *b;
    *b = t;
}

size_t st_members_limit(size_t limit)
{
    return limit < ST_MEMBERS_MAX ? limit : ST_MEMBERS_MAX;
}

st_members *st_members_new(uint64_t last_mid, size_t limit)
{
    st_members *m = calloc(1, sizeof(*m));
    if (m) {
        m->last_mid = last_mid;
        m->limit = st_members_limit(limit);
    }
    return m;
}

int st_members_offer(st_members *m, st_id uid, uint64_t ack, uint64_t read, bool has_read)
{
    size_t keep = m->limit + 1, i;
    if (m->n == keep) {
        /* Full: uid takes the place of the greatest, if it is smaller, and sinks. */
        if (st_id_cmp(uid, slot_id(&m->slots[0])) >= 0)
            return 0;
        m->slots[0].ack = ack;
        m->slots[0].read = has_read ? read : 0;
        m->slots[0].has_read = has_read;
        m->slots[0].n = (unsigned char)uid.n;
        memcpy(m->slots[0].uid, uid.p, uid.n);
        for (i = 0;;) {
            size_t l = 2 * i + 1, r = l + 1, top = i;
            if (l < m->n && slot_cmp(&m->slots[l], &m->slots[top]) > 0)
                top = l;
            if (r < m->n && slot_cmp(&m->slots[r], &m->slots[top]) > 0)
                top = r;
            if (top == i)
                break;
            slot_swap(&m->slots[i], &m->slots[top]);
            i = top;
        }
        return 1;
    }
    if (m->n == m->cap) { /* grows as members come: a small group needs a small page */
        size_t cap = m->cap ? m->cap * 2 : 16;
        cap = cap < keep ? cap : keep;
        member_slot *ns = realloc(m->slots, cap * sizeof(*ns));
        if (!ns)
            return ST_ENOMEM;
        m->slots = ns;
        m->cap = cap;
    }
    /* Not full: in at the bottom, and up while greater than its parent. */
    i = m->n++;
    m->slots[i].ack = ack;
    m->slots[i].read = has_read ? read : 0;
    m->slots[i].has_read = has_read;
    m->slots[i].n = (unsigned char)uid.n;
    memcpy(m->slots[i].uid, uid.p, uid.n);
    for (; i > 0 && slot_cmp(&m->slots[i], &m->slots[(i - 1) / 2]) > 0; i = (i - 1) / 2)
        slot_swap(&m->slots[i], &m->slots[(i - 1) / 2]);
    return 1;
}

void st_members_finish(st_members *m)
{
    if (m->n > 1)
        qsort(m->slots, m->n, sizeof(*m->slots), slot_cmp);
    m->more = m->n > m->limit;
    if (m->more)
        m->n = m->limit; /* the one more only told that there are more */
}

size_t st_members_count(const st_members *m)
{
    return m->n;
}

st_member st_members_at(const st_members *m, size_t i)
{
    if (i >= m->n)
        return (st_member){{NULL, 0}, 0, 0, false};
    const member_slot *s = &m->slots[i];
    return (st_member){slot_id(s), s->ack, s->read, s->has_read};
}

uint64_t st_members_last_mid(const st_members *m)
{
    return m->last_mid;
}

bool st_members_more(const st_members *m)
{
    return m->more;
}

void st_members_free(st_members *m)
{
    if (!m)
        return;
    free(m->slots);
    free(m);
}

void st_read_discard(st_op *op)
{
    st_page_free(op->page);
    op->page = NULL;
    st_groups_free(op->groups);
    op->groups = NULL;
    st_members_free(op->members);
    op->members = NULL;
    st_list_free(op->list);
    op->list = NULL;
    st_list_free(op->changed);
    op->changed = NULL;
}
