/*
 * Changes and reactions on RocksDB (store.h, Changes; the rules in store_apply.c):
 *   - the change log, gid | be64(cseq) -> mid, at_ms: one entry per changed message, the
 *     message's latest; the message's value holds that cseq, so a change deletes the
 *     entry it replaces in the same batch (folding);
 *   - a message's reaction counts live in its value (store_rocks.h), so a page reads
 *     them with the message; who set what is kept twice, by message (a recall, a trim
 *     and a deletion find the users there) and by user (idempotency, the reader's `mine`
 *     and an erasure find the messages there);
 *   - the erasure of a user's reactions and a deleted group's rows, in their ops' writes.
 * Everything here goes into the store thread's batch (r->wb): a change and its cseq are
 * one write.
 */
#include "store_rocks.h"

#include <stdlib.h>
#include <string.h>

static void del(rk *r, enum rk_cf cf, const char *k, size_t kn)
{
    rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[cf], k, kn);
}

int rk_get_reaction(void *be, st_id gid, uint64_t mid, st_id uid, st_id key)
{
    rk *r = be;
    rk_key k;
    rk_key_user_react(&k, uid, gid, mid, key);
    char *v;
    size_t n = 0;
    int found = rk_get_row(r, RK_CF_USER_REACTIONS, k.b, k.n, &v, &n);
    if (found < 0) {
        r->unreadable = true;
        return found;
    }
    rocksdb_free(v);
    return found;
}

void rk_put_react(void *be, st_id gid, uint64_t mid, const st_msg_row *m, st_id uid, st_id key,
                  bool on)
{
    rk *r = be;
    rk_key km, ku;
    rk_key_react(&km, gid, mid, key, uid);
    rk_key_user_react(&ku, uid, gid, mid, key);
    if (on) {
        rocksdb_writebatch_wi_put_cf(r->wb, r->rw.cf[RK_CF_REACTIONS], km.b, km.n, "", 0);
        rocksdb_writebatch_wi_put_cf(r->wb, r->rw.cf[RK_CF_USER_REACTIONS], ku.b, ku.n, "", 0);
    } else {
        del(r, RK_CF_REACTIONS, km.b, km.n);
        del(r, RK_CF_USER_REACTIONS, ku.b, ku.n);
    }
    rk_put_msg_row(r, gid, mid, m);
}

void rk_put_log(void *be, st_id gid, uint64_t mid, uint64_t old_cseq, uint64_t cseq, uint64_t now)
{
    rk *r = be;
    rk_key k;
    if (old_cseq) { /* folding: the message's earlier entry goes */
        rk_key_msg(&k, gid, old_cseq);
        del(r, RK_CF_CHANGES, k.b, k.n);
    }
    char v[16];
    st_put_be64(v, mid);
    st_put_be64(v + 8, now);
    rk_key_msg(&k, gid, cseq);
    rocksdb_writebatch_wi_put_cf(r->wb, r->rw.cf[RK_CF_CHANGES], k.b, k.n, v, sizeof(v));
}

/* One (gid, mid, key, uid) row of a message losing its reactions: both rows go. */
static int drop_one(rk *r, void *ud, const char *k, size_t kn)
{
    (void)ud;
    st_id gid, key, uid;
    uint64_t mid;
    del(r, RK_CF_REACTIONS, k, kn);
    if (rk_react_key_parse(k, kn, &gid, &mid, &key, &uid)) {
        rk_key ku;
        rk_key_user_react(&ku, uid, gid, mid, key);
        del(r, RK_CF_USER_REACTIONS, ku.b, ku.n);
    }
    return ST_OK;
}

int rk_drop_reactions(rk *r, st_id gid, uint64_t mid)
{
    rk_key prefix;
    rk_key_msg(&prefix, gid, mid);
    return rk_each_in_batch(r, RK_CF_REACTIONS, &prefix, drop_one, NULL);
}

int rk_take_cseq(rk *r, st_id gid, uint64_t *cseq)
{
    st_group_row g;
    int rc = rk_group_row(r, gid, &g);
    if (rc <= 0)
        return rc;
    *cseq = ++g.last_cseq;
    rk_put_group(r, gid, &g);
    return 1;
}

/* One of an erased user's reactions (user_reactions: uid, gid, mid, key): both rows go,
 * and the message, when it still has the key, loses one of it and takes a cseq. */
static int erase_one(rk *r, void *ud, const char *k, size_t kn)
{
    st_op *op = ud;
    st_id uid, gid, key;
    uint64_t mid;
    del(r, RK_CF_USER_REACTIONS, k, kn);
    if (!rk_user_react_key_parse(k, kn, &uid, &gid, &mid, &key))
        return ST_OK;
    rk_key km;
    rk_key_react(&km, gid, mid, key, uid);
    del(r, RK_CF_REACTIONS, km.b, km.n);
    st_msg_row cur;
    int rc = rk_get_msg(r, gid, mid, &cur);
    if (rc <= 0)
        return rc; /* gone (below the horizon, a deleted group): nothing to change */
    size_t at = 0;
    while (at < cur.n_reactions && st_id_cmp(cur.reactions[at].key, key) != 0)
        at++;
    if (cur.recalled || at == cur.n_reactions)
        return ST_OK; /* dropped with a recall already */
    st_reaction rx[ST_REACT_KEYS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < cur.n_reactions; i++) {
        rx[n] = cur.reactions[i];
        if (i == at && --rx[n].count == 0)
            continue;
        n++;
    }
    uint64_t cseq;
    if ((rc = rk_take_cseq(r, gid, &cseq)) <= 0)
        return rc;
    uint64_t old = cur.cseq;
    cur.cseq = cseq;
    cur.reactions = rx;
    cur.n_reactions = n;
    rk_put_msg_row(r, gid, mid, &cur);
    rk_put_log(r, gid, mid, old, cseq, op->ts);
    return rk_changed(op, gid, cseq);
}

int rk_erase_reactions(rk *r, st_op *op, uint64_t now)
{
    (void)now; /* op->ts: the erasure's time, set by rk_erase_user */
    rk_key prefix;
    rk_key_id(&prefix, op->uid);
    return rk_each_in_batch(r, RK_CF_USER_REACTIONS, &prefix, erase_one, op);
}

/* A deleted group's change entries: they go. */
static int drop_entry(rk *r, void *ud, const char *k, size_t kn)
{
    (void)ud;
    del(r, RK_CF_CHANGES, k, kn);
    return ST_OK;
}

int rk_drop_group_changes(rk *r, st_id gid)
{
    rk_key prefix;
    rk_key_id(&prefix, gid);
    int rc = rk_each_in_batch(r, RK_CF_CHANGES, &prefix, drop_entry, NULL);
    if (rc == ST_OK) /* every reaction of the group, both rows */
        rc = rk_each_in_batch(r, RK_CF_REACTIONS, &prefix, drop_one, NULL);
    return rc;
}
