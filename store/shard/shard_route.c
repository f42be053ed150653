/*
 * The router's st_submit: each op goes to the core of its slot's shard, and the ops that
 * are about many groups or many users are split by shard, or asked of every shard, and
 * their answers merged into the op the caller gave:
 *   - by the group's slot: messages, memberships, reads of a group, edits, reactions, a
 *     group's deletion, retention and swept mark;
 *   - by the user's slot: a sign-out (the not-before is the user's);
 *   - split by slot: acks (by group), last_seen (SEEN, READ_SEEN, by user), the unread
 *     webhook's tells (by the event's id);
 *   - every shard: a user's groups (READ_GROUPS: its memberships are wherever its groups
 *     are), an erasure, the passes of retention and of the unread webhook (TRIM,
 *     READ_UNSWEPT: in gid order on each shard, merged into one pass with one cursor),
 *     and adopting the tells of gateways gone;
 *   - a signal (nothing stored): one shard that takes writes, as every node listens to
 *     every shard.
 * A merged op is answered when its last part is, on that part's store thread. Its result
 * is the worst part's. A user's groups read while one shard is away are not read (a
 * partial list would say the user left the groups of that shard), unless the caller
 * asked for what the others have (partial_ok: a sign-in, which is told so) and the
 * user's own shard answered (its not-before, which revocation needs).
 */
#include "shard_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- a split or asked-of-all op ------------------------------------------------------ */

typedef struct fan {
    st_op *parent;
    sh_router *r;
    atomic_uint left; /* parts not answered yet */
    unsigned n;       /* parts */
    unsigned home;    /* READ_GROUPS: the part of the user's own shard */
    /* Split ops: element i of the parent's array is element at[i] of part part[i]. */
    unsigned *part, *at;
    void *arrays[SH_MAX]; /* each part's elements (the parent's, copied) */
    st_op sub[];
} fan;

static void fan_free(fan *f)
{
    for (unsigned i = 0; i < SH_MAX; i++)
        free(f->arrays[i]);
    free(f->part);
    free(f->at);
    free(f);
}

static int worse(int a, int b)
{
    if (a == ST_EMOVED)
        a = ST_EIO; /* a slot that moved meanwhile: the caller retries, as after a failure */
    if (b == ST_EMOVED)
        b = ST_EIO;
    if (a == ST_EIO || b == ST_EIO)
        return ST_EIO;
    return a ? a : b;
}

/* Merges the parts' lists of a pass in gid order (TRIM, READ_UNSWEPT) into one, with one
 * cursor: the pass is complete up to the least `after` of the parts that have more, so
 * only what lies up to there is listed, and the next pass starts after it. */
static st_list *merge_pass(fan *f, size_t limit)
{
    st_id bound = {NULL, 0}, last = {NULL, 0};
    bool bounded = false;
    size_t total = 0;
    for (unsigned i = 0; i < f->n; i++) {
        st_list *l = f->sub[i].list;
        if (!l)
            continue;
        total += st_list_count(l);
        st_id a = st_list_after(l);
        if (st_list_more(l) && (!bounded || st_id_cmp(a, bound) < 0)) {
            bound = a;
            bounded = true;
        }
        if (a.n && (!last.n || st_id_cmp(a, last) > 0))
            last = a;
    }
    const st_item **items = calloc(total ? total : 1, sizeof(*items));
    st_list *out = st_list_new();
    if (!items || !out) {
        free(items);
        st_list_free(out);
        return NULL;
    }
    size_t n = 0;
    for (unsigned i = 0; i < f->n; i++)
        for (size_t j = 0; f->sub[i].list && j < st_list_count(f->sub[i].list); j++) {
            const st_item *it = st_list_at(f->sub[i].list, j);
            if (!bounded || st_id_cmp(it->gid, bound) <= 0)
                items[n++] = it;
        }
    /* Insertion into order: a pass lists at most a few thousand groups. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && st_id_cmp(items[j - 1]->gid, items[j]->gid) > 0; j--) {
            const st_item *t = items[j];
            items[j] = items[j - 1];
            items[j - 1] = t;
        }
    bool cut = limit && n > limit;
    if (cut)
        n = limit;
    for (size_t i = 0; i < n; i++)
        if (st_list_add(out, items[i]->gid, items[i]->lo, items[i]->hi, items[i]->mark,
                        items[i]->text, items[i]->text_n) != ST_OK) {
            free(items);
            st_list_free(out);
            return NULL;
        }
    st_list_set_more(out, cut || bounded);
    st_list_set_after(out, cut ? items[n - 1]->gid : bounded ? bound : last);
    free(items);
    return out;
}

/* Every part's list, one after another (the groups of an erasure or of `changed`, the
 * adopted tells); NULL when none has one. *err on memory. */
static st_list *merge_all(fan *f, size_t off, bool *err)
{
    st_list *out = NULL;
    for (unsigned i = 0; i < f->n; i++) {
        st_list *l = *(st_list **)((char *)&f->sub[i] + off);
        for (size_t j = 0; l && j < st_list_count(l); j++) {
            const st_item *it = st_list_at(l, j);
            if ((!out && !(out = st_list_new())) ||
                st_list_add(out, it->gid, it->lo, it->hi, it->mark, it->text, it->text_n)) {
                *err = true;
                return out;
            }
        }
    }
    return out;
}

static int merge_groups(fan *f, st_op *p)
{
    if (!(p->groups = st_groups_new()))
        return ST_ENOMEM;
    for (unsigned i = 0; i < f->n; i++) {
        st_groups *g = f->sub[i].groups;
        for (size_t j = 0; g && j < st_groups_count(g); j++) {
            const st_user_group *u = st_groups_at(g, j);
            if (st_groups_add(p->groups, u->gid, u->first_mid, u->last_mid, u->ack, u->read,
                              u->has_read) != ST_OK)
                return ST_ENOMEM;
            st_groups_set_last_cseq(p->groups, u->last_cseq);
        }
    }
    return ST_OK;
}

/* Frees what a part's op owns (its outputs were merged, or are dropped). */
static void free_outputs(st_op *op)
{
    st_groups_free(op->groups);
    st_list_free(op->list);
    st_list_free(op->changed);
    op->groups = NULL;
    op->list = op->changed = NULL;
}

/* READ_GROUPS with partial_ok: part i is away (unavailable, or its slots moving) and may
 * be left out. */
static bool away_ok(const fan *f, unsigned i)
{
    int rc = f->sub[i].result;
    return f->parent->kind == ST_OP_READ_GROUPS && f->parent->partial_ok && i != f->home &&
           (rc == ST_EIO || rc == ST_EMOVED);
}

static void finish(fan *f)
{
    st_op *p = f->parent;
    int rc = ST_OK;
    for (unsigned i = 0; i < f->n; i++) {
        if (away_ok(f, i)) {
            p->shards_away++;
            continue;
        }
        rc = worse(rc, f->sub[i].result);
        p->applied += f->sub[i].applied;
        if (f->sub[i].not_before > p->not_before)
            p->not_before = f->sub[i].not_before;
    }
    bool err = false;
    if (rc == ST_OK) {
        switch (p->kind) {
        case ST_OP_READ_GROUPS: rc = merge_groups(f, p); break;
        case ST_OP_READ_SEEN:
            for (size_t i = 0; i < p->n_seen; i++)
                p->seen[i].ms = ((st_seen *)f->arrays[f->part[i]])[f->at[i]].ms;
            break;
        case ST_OP_TELL_CLAIM:
            for (size_t i = 0; i < p->n_tells; i++)
                p->tells[i].claimed = ((st_tell *)f->arrays[f->part[i]])[f->at[i]].claimed;
            break;
        case ST_OP_TRIM:
        case ST_OP_READ_UNSWEPT: err = !(p->list = merge_pass(f, p->limit)); break;
        case ST_OP_ERASE_USER: p->list = merge_all(f, offsetof(st_op, list), &err); break;
        case ST_OP_TELL_ADOPT:
            p->list = merge_all(f, offsetof(st_op, list), &err);
            if (!p->list && !err)
                err = !(p->list = st_list_new());
            break;
        default: break;
        }
        if (!err && (p->kind == ST_OP_TRIM || p->kind == ST_OP_ERASE_USER))
            p->changed = merge_all(f, offsetof(st_op, changed), &err);
        if (err)
            rc = ST_ENOMEM;
    }
    for (unsigned i = 0; i < f->n; i++)
        free_outputs(&f->sub[i]);
    if (rc != ST_OK) {
        free_outputs(p);
        p->applied = 0;
    }
    p->result = rc;
    fan_free(f);
    p->done(p);
}

static void part_done(st_op *sub)
{
    fan *f = sub->ud;
    if (atomic_fetch_sub(&f->left, 1) == 1)
        finish(f);
}

static fan *fan_new(st_op *parent, sh_router *r, unsigned n)
{
    fan *f = calloc(1, sizeof(*f) + n * sizeof(st_op));
    if (!f)
        return NULL;
    f->parent = parent;
    f->r = r;
    f->n = n;
    for (unsigned i = 0; i < n; i++) {
        f->sub[i] = *parent;
        f->sub[i].done = part_done;
        f->sub[i].ud = f;
        f->sub[i].next_ = NULL;
    }
    return f;
}

/* Submits the parts (part i to shard[i]). Each part counts down once, when it is answered
 * (on its store thread) or refused at once (here), so the last part answered finishes the
 * op on a store thread, as one store would. */
static int fan_go(fan *f, sh_shard **to)
{
    atomic_store(&f->left, f->n);
    bool queued = false;
    for (unsigned i = 0; i < f->n; i++) {
        st_op *part = &f->sub[i];
        int rc = st_submit(to[i]->core, part);
        if (rc == ST_OK) {
            queued = true;
            continue;
        }
        /* Refused at once (the store closing; a read answered at once, on a backend whose
         * reads are inline, would come here too, with its answer in the part). */
        if (rc != ST_DONE)
            part->result = rc;
        if (atomic_fetch_sub(&f->left, 1) != 1)
            continue;
        if (!queued) { /* none was queued: answered at once, and done is not called */
            st_op *p = f->parent;
            for (unsigned j = 0; j < f->n; j++)
                rc = worse(rc, f->sub[j].result);
            for (unsigned j = 0; j < f->n; j++)
                free_outputs(&f->sub[j]);
            fan_free(f);
            p->result = rc;
            return rc < 0 ? rc : ST_EIO;
        }
        /* Parts were queued and answered before this last one was refused: only while the
         * store closes. done is called here, on the submitting thread. */
        finish(f);
        return ST_OK;
    }
    return ST_OK;
}

/* ---- by kind ------------------------------------------------------------------------- */

/* Every shard. Adopting tells takes what it lists (a write): each shard is asked for its
 * share of the limit, so that nothing adopted is cut from the answer. The shares start at
 * a shard that turns with each call, so that a limit below the shards' count still gets
 * to every shard in time. */
static int to_all(sh_router *r, st_op *op)
{
    unsigned k = atomic_load(&r->n_open), n = k;
    size_t share[SH_MAX];
    if (op->kind == ST_OP_TELL_ADOPT) {
        static atomic_uint turn;
        size_t limit = op->limit < ST_LIST_MAX ? op->limit : ST_LIST_MAX;
        unsigned first = atomic_fetch_add(&turn, 1) % k;
        n = 0;
        for (unsigned j = 0; j < k; j++) {
            unsigned i = (first + j) % k;
            share[i] = limit / k + (j < limit % k);
            n += share[i] > 0;
        }
    }
    fan *f = fan_new(op, r, n);
    if (!f)
        return ST_ENOMEM;
    sh_shard *to[SH_MAX];
    for (unsigned i = 0, p = 0; i < k; i++) {
        if (op->kind == ST_OP_TELL_ADOPT) {
            if (!share[i])
                continue;
            f->sub[p].limit = share[i];
        }
        if (op->kind == ST_OP_READ_GROUPS && &r->shard[i] == sh_of(r, op->uid))
            f->home = p;
        to[p++] = &r->shard[i];
    }
    return fan_go(f, to);
}

/* The id of element i of a split op's array. */
static st_id key_of(const st_op *op, size_t i)
{
    switch (op->kind) {
    case ST_OP_ACKS: return op->acks[i].gid;
    case ST_OP_SEEN:
    case ST_OP_READ_SEEN: return op->seen[i].uid;
    default: return op->tells[i].id;
    }
}

/* Split by the slot of each element. */
static int split(sh_router *r, st_op *op)
{
    size_t n, size;
    const void *src;
    switch (op->kind) {
    case ST_OP_ACKS: n = op->n_acks, size = sizeof(st_ack), src = op->acks; break;
    case ST_OP_SEEN:
    case ST_OP_READ_SEEN: n = op->n_seen, size = sizeof(st_seen), src = op->seen; break;
    default: n = op->n_tells, size = sizeof(st_tell), src = op->tells; break;
    }
    unsigned count[SH_MAX] = {0}, idx[SH_MAX], parts = 0;
    unsigned *part = malloc((n ? n : 1) * sizeof(unsigned)),
             *at = malloc((n ? n : 1) * sizeof(unsigned));
    if (!part || !at) {
        free(part);
        free(at);
        return ST_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sh_shard *sh = sh_of(r, key_of(op, i));
        part[i] = sh->index;
        at[i] = count[sh->index]++;
    }
    if (n == 0) /* acks of nothing: one shard answers it, as one store would */
        count[0] = 1;
    sh_shard *to[SH_MAX];
    for (unsigned s = 0; s < SH_MAX; s++)
        if (count[s]) {
            idx[s] = parts;
            to[parts++] = &r->shard[s];
        }
    fan *f = fan_new(op, r, parts);
    if (!f) {
        free(part);
        free(at);
        return ST_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) /* part[i] becomes the part's number, not the shard's */
        part[i] = idx[part[i]];
    f->part = part;
    f->at = at;
    for (unsigned p = 0; p < parts && n; p++) {
        unsigned c = count[to[p]->index];
        if (!(f->arrays[p] = malloc(c * size))) {
            fan_free(f);
            return ST_ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++)
        memcpy((char *)f->arrays[part[i]] + at[i] * size, (const char *)src + i * size, size);
    for (unsigned p = 0; p < parts && n; p++) {
        st_op *s = &f->sub[p];
        size_t c = count[to[p]->index];
        switch (op->kind) {
        case ST_OP_ACKS: s->acks = f->arrays[p], s->n_acks = c; break;
        case ST_OP_SEEN:
        case ST_OP_READ_SEEN: s->seen = f->arrays[p], s->n_seen = c; break;
        default: s->tells = f->arrays[p], s->n_tells = c; break;
        }
    }
    return fan_go(f, to);
}

/* A signal: the first shard that takes writes (shard 0 when none does). */
static sh_shard *any_writable(sh_router *r)
{
    for (unsigned i = 0, k = atomic_load(&r->n_open); i < k; i++)
        if (st_writable(r->shard[i].core))
            return &r->shard[i];
    return &r->shard[0];
}

int sh_submit(void *ud, st_op *op)
{
    sh_router *r = ud;
    st_op_reset(op);
    if (atomic_load(&r->n_open) == 1) /* one shard: nothing to route or merge */
        return st_submit(r->shard[0].core, op);
    switch (op->kind) {
    case ST_OP_SIGNOUT: return st_submit(sh_of(r, op->uid)->core, op);
    case ST_OP_SIGNAL: return st_submit(any_writable(r)->core, op);
    case ST_OP_ACKS:
    case ST_OP_SEEN:
    case ST_OP_READ_SEEN:
    case ST_OP_TELL_CLAIM:
    case ST_OP_TELL_SENT: return split(r, op);
    case ST_OP_READ_GROUPS:
    case ST_OP_ERASE_USER:
    case ST_OP_TRIM:
    case ST_OP_READ_UNSWEPT:
    case ST_OP_TELL_ADOPT: return to_all(r, op);
    default: return st_submit(sh_of(r, op->gid)->core, op);
    }
}
