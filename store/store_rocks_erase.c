/*
 * Erasures on RocksDB, each in one synced write:
 *   - a person's (store.h, ST_OP_ERASE_USER): every message the user sent (its (uid, cid)
 *     rows say where each is) becomes a tombstone, as a recall makes it, and the rows go;
 *     so do its memberships (and their cursors), found through user_groups, and its
 *     last_seen. The recalled range is scrubbed off the disk like a recall's
 *     (store_rocks_scrub.c). Each tombstone takes its group's next cseq, and so does each
 *     message that loses one of the user's reactions (store_rocks_change.c): op->changed
 *     lists the groups whose last_cseq moved;
 *   - a group's (ST_OP_DELETE_GROUP): its messages, memberships, row and swept mark go,
 *     and its key range is scrubbed; its change log and reactions go too, and the
 *     deletion answers the cseq it takes (never stored: the group is gone). Its (uid,
 *     cid) rows stay: they are keyed by sender,
 *     and finding them would mean reading every sender's; a resend of one answers its old
 *     mid in a group that is gone (the API refuses further sends there: no group).
 */
#include "store_rocks.h"

#include <stdlib.h>
#include <string.h>

/* Each key of cf starting with prefix: fn(ud, key, key_n, value, value_n); stops at the
 * first error fn returns. */
static int each(rk *r, enum rk_cf cf, const rk_key *prefix,
                int (*fn)(rk *r, st_op *op, const char *k, size_t kn, const char *v, size_t vn),
                st_op *op)
{
    rk_key end;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_lower_bound(ro, prefix->b, prefix->n);
    if (rk_key_prefix_end(prefix, &end)) /* always: ids are printable ASCII */
        rocksdb_readoptions_set_iterate_upper_bound(ro, end.b, end.n);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->rw.db, ro, r->rw.cf[cf]);
    int rc = ST_OK;
    for (rocksdb_iter_seek(it, prefix->b, prefix->n); rc == ST_OK && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        rc = fn(r, op, k, kn, v, vn);
    }
    char *err = NULL;
    rocksdb_iter_get_error(it, &err);
    if (err) {
        rocksdb_free(err);
        rc = ST_EIO;
    }
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return rc;
}

/* One (uid, cid) row: its message a tombstone (unless recalled before), the row gone. */
static int erase_sent(rk *r, st_op *op, const char *k, size_t kn, const char *v, size_t vn)
{
    if (vn < RK_SEND_HDR)
        return ST_OK;
    st_id gid = {v + RK_SEND_HDR, vn - RK_SEND_HDR};
    uint64_t mid = st_get_be64(v);
    st_msg_row m;
    int rc = rk_get_msg(r, gid, mid, &m);
    if (rc < 0)
        return rc;
    if (rc == 1 && !m.recalled) {
        /* A change like a recall: the group's next cseq, the log's entry moved, the
         * message's reactions gone (rk_put_version). */
        uint64_t old = m.cseq, cseq = 0;
        if ((rc = rk_take_cseq(r, gid, &cseq)) < 0)
            return rc;
        st_msg_row t = {.ts = m.ts,
                        .ver = m.ver + 1,
                        .ver_ts = op->ts,
                        .recalled = true,
                        .record = op->record,
                        .record_n = op->record_n,
                        .cseq = cseq};
        rk_put_version(r, gid, mid, &t);
        if (rc == 1) {
            rk_put_log(r, gid, mid, old, cseq, op->ts);
            if ((rc = rk_changed(op, gid, cseq)) != ST_OK)
                return rc;
        }
        op->applied++;
    }
    rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_SENDS], k, kn);
    return ST_OK;
}

/* One of the user's groups (user_groups: len uid, len gid): the membership goes. */
static int erase_member(rk *r, st_op *op, const char *k, size_t kn, const char *v, size_t vn)
{
    (void)v;
    (void)vn;
    st_id gid;
    if (!rk_key_second_id(k, kn, &gid))
        return ST_OK;
    rk_del_member(r, gid, op->uid);
    return st_list_add(op->list, gid, 0, 0, 0, NULL, 0);
}

int rk_erase_user(rk *r, st_op *op, uint64_t now)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    op->ts = now;
    rk_key prefix;
    rk_key_id(&prefix, op->uid);
    int rc = each(r, RK_CF_SENDS, &prefix, erase_sent, op);
    if (rc == ST_OK) /* after the tombstones, which dropped the reactions on them */
        rc = rk_erase_reactions(r, op, now);
    if (rc == ST_OK)
        rc = each(r, RK_CF_USER_GROUPS, &prefix, erase_member, op);
    if (rc == ST_OK)
        rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_USERS], prefix.b, prefix.n);
    if (rc == ST_OK) { /* what revokes the erased user's tokens: it stays */
        op->not_before = now / 1000;
        rk_put_not_before(r, op->uid, op->not_before);
    }
    return rc; /* rk_unread writes the batch, or clears it */
}

/* One message of the group: it goes. */
static int drop_msg(rk *r, st_op *op, const char *k, size_t kn, const char *v, size_t vn)
{
    (void)op;
    (void)v;
    (void)vn;
    rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_MSGS], k, kn);
    return ST_OK;
}

/* One member of the group (members: len gid, len uid): the membership goes, both rows. */
static int drop_member(rk *r, st_op *op, const char *k, size_t kn, const char *v, size_t vn)
{
    (void)v;
    (void)vn;
    st_id uid;
    if (!rk_key_second_id(k, kn, &uid))
        return ST_OK;
    rk_del_member(r, op->gid, uid);
    return st_list_add(op->list, (st_id){NULL, 0}, 0, 0, 0, uid.p, uid.n);
}

int rk_delete_group(rk *r, st_op *op)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    rk_key gk;
    rk_key_id(&gk, op->gid);
    char *err = NULL;
    size_t n = 0;
    char *v = rocksdb_writebatch_wi_get_from_batch_and_db_cf(
        r->wb, r->rw.db, r->ropts, r->rw.cf[RK_CF_GROUPS], gk.b, gk.n, &n, &err);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    st_group_row g;
    if (!v || !rk_group_decode(v, n, &g)) {
        rocksdb_free(v);
        return ST_ENOGROUP;
    }
    op->applied = (size_t)g.last_mid; /* its last mid: the messages it had */
    op->cseq = g.last_cseq + 1;       /* the deletion's change (store.h, Changes) */
    rocksdb_free(v);
    int rc = each(r, RK_CF_MSGS, &gk, drop_msg, op); /* msgs keys begin with len gid */
    if (rc == ST_OK)
        rc = each(r, RK_CF_MEMBERS, &gk, drop_member, op);
    if (rc == ST_OK) /* its change log and reactions (a gid made again starts afresh) */
        rc = rk_drop_group_changes(r, op->gid);
    if (rc == ST_OK) {
        rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_GROUPS], gk.b, gk.n);
        rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_UNREAD_SWEPT], gk.b, gk.n);
        rk_scrub_note(r, op->gid, 0);
        rk_scrub_note(r, op->gid, UINT64_MAX);
    }
    return rc;
}
