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

/* One (uid, cid) row: its message a tombstone (unless recalled before), the row gone. */
static int erase_sent(rk *r, void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    st_op *op = ud;
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

/* A membership found from either side (an erased user's, user_groups: len uid, len gid;
 * a deleted group's, members: len gid, len uid): both its rows go, and the other side is
 * listed (the user's group; the group's member). */
static int drop_member(rk *r, void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    st_op *op = ud;
    (void)v;
    (void)vn;
    st_id other;
    if (!rk_key_second_id(k, kn, &other))
        return ST_OK;
    if (op->kind == ST_OP_ERASE_USER) {
        rk_del_member(r, other, op->uid);
        return st_list_add(op->list, other, 0, 0, 0, NULL, 0);
    }
    rk_del_member(r, op->gid, other);
    return st_list_add(op->list, (st_id){NULL, 0}, 0, 0, 0, other.p, other.n);
}

int rk_erase_user(rk *r, st_op *op, uint64_t now)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    op->ts = now;
    rk_key prefix;
    rk_key_id(&prefix, op->uid);
    int rc = rk_each(r, RK_CF_SENDS, &prefix, erase_sent, op);
    if (rc == ST_OK) /* after the tombstones, which dropped the reactions on them */
        rc = rk_erase_reactions(r, op, now);
    if (rc == ST_OK)
        rc = rk_each(r, RK_CF_USER_GROUPS, &prefix, drop_member, op);
    if (rc == ST_OK)
        rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_USERS], prefix.b, prefix.n);
    if (rc == ST_OK) { /* what revokes the erased user's tokens: it stays */
        op->not_before = now / 1000;
        rk_put_not_before(r, op->uid, op->not_before);
    }
    return rc; /* rk_unread writes the batch, or clears it */
}

/* One message of the group: it goes. */
static int drop_msg(rk *r, void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    (void)ud;
    (void)v;
    (void)vn;
    rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_MSGS], k, kn);
    return ST_OK;
}

int rk_delete_group(rk *r, st_op *op)
{
    if (!(op->list = st_list_new()))
        return ST_ENOMEM;
    st_group_row g;
    int rc = rk_group_row(r, op->gid, &g);
    if (rc <= 0)
        return rc < 0 ? rc : ST_ENOGROUP;
    op->applied = (size_t)g.last_mid; /* its last mid: the messages it had */
    op->cseq = g.last_cseq + 1;       /* the deletion's change (store.h, Changes) */
    rk_key gk;
    rk_key_id(&gk, op->gid);
    rc = rk_each(r, RK_CF_MSGS, &gk, drop_msg, op); /* msgs keys begin with len gid */
    if (rc == ST_OK)
        rc = rk_each(r, RK_CF_MEMBERS, &gk, drop_member, op);
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
