/*
 * Ack coalescing. Clients ack cumulatively and in batches; the gateway keeps only the
 * highest ack per (group, user) in memory and hands them all to the store writer as one
 * op ack_flush_ms after the first of them came (and at shutdown). A crash loses at most the
 * last interval's acks, which means re-delivery (absorbed by client dedup), never loss.
 */
#include "gw_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t make_key(char *key, const char *gid, const char *uid)
{
    return (size_t)snprintf(key, 2 * PR_MAX_ID + 2, "%s\x01%s", gid, uid);
}

static void on_flush_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    gw_acks_flush(lws_container_of(w, gw_server, ack_timer));
}

static void arm_flush(gw_server *srv)
{
    if (!srv->loop || ev_is_active(&srv->ack_timer))
        return;
    ev_timer_init(&srv->ack_timer, on_flush_timer, srv->cfg.ack_flush_ms / 1000.0, 0);
    ev_timer_start(srv->loop, &srv->ack_timer);
}

void gw_acks_add(gw_server *srv, const char *gid, const char *uid, uint64_t mid)
{
    char key[2 * PR_MAX_ID + 2];
    size_t n = make_key(key, gid, uid);
    gw_ack_entry *e = NULL;
    /* The flush timer runs only while acks wait: a gateway with nothing to flush is not
     * woken five times a second (each wake-up polls every socket). */
    if (!srv->acks)
        arm_flush(srv);
    HASH_FIND(hh, srv->acks, key, n, e);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e)
            return; /* the ack is lost: only a re-delivery later */
        memcpy(e->key, key, n + 1);
        HASH_ADD(hh, srv->acks, key, n, e);
    }
    if (mid > e->mid)
        e->mid = mid;
}

/* A user who signs in again while its acks are being written must see them: its groups
 * come from the store, which does not hold them yet (a second `tail` would otherwise
 * print again what the first one acked). */
uint64_t gw_acks_pending(gw_server *srv, const char *gid, const char *uid)
{
    char key[2 * PR_MAX_ID + 2];
    size_t n = make_key(key, gid, uid);
    gw_ack_entry *e = NULL, *w = NULL;
    HASH_FIND(hh, srv->acks, key, n, e);
    HASH_FIND(hh, srv->acks_writing, key, n, w);
    uint64_t a = e ? e->mid : 0, b = w ? w->mid : 0;
    return a > b ? a : b;
}

void gw_acks_written(gw_server *srv, const st_ack *acks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char key[2 * PR_MAX_ID + 2];
        int kn = snprintf(key, sizeof(key), "%.*s\x01%.*s", (int)acks[i].gid.n, acks[i].gid.p,
                          (int)acks[i].uid.n, acks[i].uid.p);
        gw_ack_entry *w = NULL;
        HASH_FIND(hh, srv->acks_writing, key, (size_t)kn, w);
        if (w && w->mid <= acks[i].mid) { /* a later batch may carry a higher one */
            HASH_DEL(srv->acks_writing, w);
            free(w);
        }
    }
}

void gw_acks_flush(gw_server *srv)
{
    size_t n = HASH_COUNT(srv->acks);
    if (n == 0)
        return;
    /* While the store takes no writes the acks wait here, and the timer looks again
     * after the next interval (a batch would only fail and come back); when stopping
     * they go, and a failure drops them (re-delivery). */
    if (!st_writable(srv->store) && !srv->stopping) {
        arm_flush(srv);
        return;
    }
    gw_pending *p = calloc(1, sizeof(*p));
    size_t ids_n = 0;
    gw_ack_entry *e, *tmp;
    HASH_ITER(hh, srv->acks, e, tmp)
        ids_n += strlen(e->key) + 1;
    if (p) {
        p->acks = calloc(n, sizeof(*p->acks));
        p->ack_ids = malloc(ids_n);
    }
    if (!p || !p->acks || !p->ack_ids) {
        if (p)
            gw_pending_free(p);
        gw_err("acks: out of memory; %zu acks kept for the next flush", n);
        arm_flush(srv);
        return;
    }
    msgpack_sbuffer_init(&p->record);
    p->srv = srv;
    size_t i = 0, off = 0;
    HASH_ITER(hh, srv->acks, e, tmp)
    {
        /* The key is "gid\1uid": copy it and split it in place. */
        size_t kl = strlen(e->key);
        char *k = p->ack_ids + off;
        memcpy(k, e->key, kl + 1);
        char *sep = strchr(k, '\x01');
        p->acks[i++] = (st_ack){.gid = {k, (size_t)(sep - k)},
                                .uid = {sep + 1, kl - (size_t)(sep - k) - 1},
                                .mid = e->mid};
        off += kl + 1;
        HASH_DEL(srv->acks, e);
        gw_ack_entry *w = NULL; /* visible to gw_acks_pending until written */
        HASH_FIND(hh, srv->acks_writing, e->key, kl, w);
        if (w) {
            if (e->mid > w->mid)
                w->mid = e->mid;
            free(e);
        } else {
            HASH_ADD(hh, srv->acks_writing, key, kl, e);
        }
    }
    p->op.kind = ST_OP_ACKS;
    p->op.urgent = true; /* a backlog of sends must not hold acks back */
    p->op.acks = p->acks;
    p->op.n_acks = n;
    gw_route_submit(srv, p);
}

void gw_acks_free(gw_server *srv)
{
    gw_ack_entry *e, *tmp;
    HASH_ITER(hh, srv->acks, e, tmp)
    {
        HASH_DEL(srv->acks, e);
        free(e);
    }
    HASH_ITER(hh, srv->acks_writing, e, tmp)
    {
        HASH_DEL(srv->acks_writing, e);
        free(e);
    }
}
