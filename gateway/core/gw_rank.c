/*
 * A multiset of numbers that says how many are at least x in O(log n) (gw_core.h): the
 * cursors of a group's members, for its receipts ("read by 7 of 12" is how many read
 * cursors are at or past the message).
 *
 * A treap: a binary search tree by value whose nodes also keep a random priority, the
 * parent's never below its children's, which keeps the expected depth O(log n) whatever
 * the order of the values. One node per distinct value, with how many times it is there,
 * and the total of its subtree: a count of the values >= x walks one path from the root.
 * Cursors bunch (most members have read up to the last message), so there are far fewer
 * nodes than members.
 */
#include "gw_core.h"

#include <stdlib.h>

typedef struct rank_node {
    uint64_t value;
    uint32_t prio;
    size_t n;     /* times value is there */
    size_t total; /* values in this subtree */
    struct rank_node *left, *right;
} rank_node;

struct gw_rank {
    rank_node *root;
    uint64_t seed; /* the priorities' xorshift state */
};

gw_rank *gw_rank_new(void)
{
    gw_rank *r = calloc(1, sizeof(*r));
    if (r)
        r->seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)r;
    return r;
}

static void free_nodes(rank_node *t)
{
    while (t) {
        free_nodes(t->left);
        rank_node *right = t->right;
        free(t);
        t = right;
    }
}

void gw_rank_free(gw_rank *r)
{
    if (!r)
        return;
    free_nodes(r->root);
    free(r);
}

static size_t total(const rank_node *t)
{
    return t ? t->total : 0;
}

static void fix(rank_node *t)
{
    t->total = t->n + total(t->left) + total(t->right);
}

static rank_node *rotate_right(rank_node *t)
{
    rank_node *l = t->left;
    t->left = l->right;
    l->right = t;
    fix(t);
    fix(l);
    return l;
}

static rank_node *rotate_left(rank_node *t)
{
    rank_node *r = t->right;
    t->right = r->left;
    r->left = t;
    fix(t);
    fix(r);
    return r;
}

static uint32_t next_prio(gw_rank *r)
{
    r->seed ^= r->seed << 13;
    r->seed ^= r->seed >> 7;
    r->seed ^= r->seed << 17;
    return (uint32_t)(r->seed >> 32);
}

/* Adds one v under t; *oom when a node could not be made. */
static rank_node *insert(gw_rank *r, rank_node *t, uint64_t v, bool *oom)
{
    if (!t) {
        rank_node *nn = calloc(1, sizeof(*nn));
        if (!nn) {
            *oom = true;
            return NULL;
        }
        nn->value = v;
        nn->prio = next_prio(r);
        nn->n = nn->total = 1;
        return nn;
    }
    if (v == t->value) {
        t->n++;
    } else if (v < t->value) {
        rank_node *l = insert(r, t->left, v, oom);
        if (*oom)
            return t;
        t->left = l;
        if (l->prio > t->prio)
            return rotate_right(t);
    } else {
        rank_node *rr = insert(r, t->right, v, oom);
        if (*oom)
            return t;
        t->right = rr;
        if (rr->prio > t->prio)
            return rotate_left(t);
    }
    fix(t);
    return t;
}

int gw_rank_add(gw_rank *r, uint64_t v)
{
    bool oom = false;
    rank_node *t = insert(r, r->root, v, &oom);
    if (oom)
        return -1;
    r->root = t;
    return 0;
}

/* Removes one v under t (nothing if it is not there). */
static rank_node *erase(rank_node *t, uint64_t v)
{
    if (!t)
        return NULL;
    if (v < t->value) {
        t->left = erase(t->left, v);
    } else if (v > t->value) {
        t->right = erase(t->right, v);
    } else if (t->n > 1) {
        t->n--;
    } else {
        /* The node goes: rotated down below the child of the higher priority until it
         * has at most one child. */
        if (!t->left || !t->right) {
            rank_node *child = t->left ? t->left : t->right;
            free(t);
            return child;
        }
        if (t->left->prio > t->right->prio) {
            t = rotate_right(t);
            t->right = erase(t->right, v);
        } else {
            t = rotate_left(t);
            t->left = erase(t->left, v);
        }
    }
    fix(t);
    return t;
}

void gw_rank_remove(gw_rank *r, uint64_t v)
{
    r->root = erase(r->root, v);
}

size_t gw_rank_at_least(const gw_rank *r, uint64_t v)
{
    size_t n = 0;
    for (const rank_node *t = r->root; t;) {
        if (t->value >= v) {
            n += t->n + total(t->right);
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return n;
}

size_t gw_rank_count(const gw_rank *r)
{
    return total(r->root);
}
