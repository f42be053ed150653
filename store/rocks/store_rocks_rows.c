/*
 * The RocksDB backend's rows (st_backend's get_ and put_ operations, and the ones its other
 * files share): each read goes through the batch over the database (a batch's earlier ops
 * included), each write into the batch, which rk_write (here too) commits. Apart from
 * the backend's table and batch (store_rocks.c), so that the files the table names (change
 * log, trims, erasures, the webhook's rows) call rows without calling the table's file
 * back.
 */
#include "store_rocks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int rk_get_row(rk *r, enum rk_cf cf, const char *key, size_t key_n, char **v, size_t *n)
{
    char *err = NULL;
    *v = rocksdb_writebatch_wi_get_from_batch_and_db_cf(r->wb, r->rw.db, r->ropts, r->rw.cf[cf],
                                                        key, key_n, n, &err);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    return *v != NULL;
}

/* Reads key from the batch, then the database, into out (want bytes, or at least want
 * when more is set). Returns 1 found, 0 absent, ST_EIO (the batch is then unreadable). */
static int get(rk *r, enum rk_cf cf, const rk_key *k, char *out, size_t want, size_t *got)
{
    char *v;
    size_t n = 0;
    int rc = rk_get_row(r, cf, k->b, k->n, &v, &n);
    if (rc < 0) {
        r->unreadable = true;
        return rc;
    }
    int found = v && (got ? n >= want && n - want <= ST_MAX_ID : n == want);
    if (found) {
        memcpy(out, v, got ? n : want);
        if (got)
            *got = n;
    }
    rocksdb_free(v);
    return found;
}

/* get() of the row keyed by two ids (a, b: members, sends). */
static int get_id2(rk *r, enum rk_cf cf, st_id a, st_id b, char *out, size_t want, size_t *got)
{
    rk_key k;
    rk_key_id2(&k, a, b);
    return get(r, cf, &k, out, want, got);
}

static void put(rk *r, enum rk_cf cf, const rk_key *k, const char *v, size_t vlen)
{
    rocksdb_writebatch_wi_put_cf(r->wb, r->rw.cf[cf], k->b, k->n, v, vlen);
}

int rk_group_row(rk *r, st_id gid, st_group_row *g)
{
    rk_key k;
    rk_key_id(&k, gid);
    char *v;
    size_t n = 0;
    int rc = rk_get_row(r, RK_CF_GROUPS, k.b, k.n, &v, &n);
    if (rc == 1 && !rk_group_decode(v, n, g))
        rc = 0; /* no row of ours is written so */
    if (rc >= 0)
        rocksdb_free(v);
    return rc;
}

/* st_backend.get_group: rk_group_row, a failed read making the batch unreadable (get's
 * way). */
int rk_get_group(void *be, st_id gid, st_group_row *g)
{
    rk *r = be;
    int rc = rk_group_row(r, gid, g);
    if (rc < 0)
        r->unreadable = true;
    return rc;
}

void rk_put_group(void *be, st_id gid, const st_group_row *g)
{
    rk_key k;
    char v[RK_GROUP_VAL_MAX];
    rk_key_id(&k, gid);
    put(be, RK_CF_GROUPS, &k, v, rk_group_encode(g, v));
}

int rk_get_member(void *be, st_id gid, st_id uid, st_member_row *m)
{
    char v[RK_MEMBER_VAL_READ + ST_MAX_ID];
    size_t n = 0;
    int rc = get_id2(be, RK_CF_MEMBERS, gid, uid, v, RK_MEMBER_VAL, &n);
    if (rc == 1 && !rk_member_decode(v, n, m))
        rc = 0; /* no row of ours is written so */
    return rc;
}

/* A member that never sent a read keeps the 16 bytes of the releases before reads. */
void rk_put_member(void *be, st_id gid, st_id uid, const st_member_row *m)
{
    rk_key k;
    char v[RK_MEMBER_VAL_READ];
    rk_key_id2(&k, gid, uid);
    st_put_be64(v, m->ack);
    st_put_be64(v + 8, m->joined_ms);
    st_put_be64(v + 16, m->read);
    put(be, RK_CF_MEMBERS, &k, v, m->has_read ? RK_MEMBER_VAL_READ : RK_MEMBER_VAL);
}

/* A user's time that only moves forward (last_seen, not-before). */
static void put_later(void *be, enum rk_cf cf, st_id uid, uint64_t t)
{
    rk_key k;
    char v[8];
    rk_key_id(&k, uid);
    if (get(be, cf, &k, v, sizeof(v), NULL) == 1 && st_get_be64(v) >= t)
        return;
    st_put_be64(v, t);
    put(be, cf, &k, v, sizeof(v));
}

void rk_put_seen(void *be, st_id uid, uint64_t ms)
{
    put_later(be, RK_CF_USERS, uid, ms);
}

void rk_put_not_before(void *be, st_id uid, uint64_t secs)
{
    put_later(be, RK_CF_REVOKED, uid, secs);
}

void rk_add_member(void *be, st_id gid, st_id uid, const st_member_row *m)
{
    rk_put_member(be, gid, uid, m);
    rk_key k;
    rk_key_id2(&k, uid, gid);
    put(be, RK_CF_USER_GROUPS, &k, "", 0);
}

void rk_del_member(void *be, st_id gid, st_id uid)
{
    rk *r = be;
    rk_key k;
    rk_key_id2(&k, gid, uid);
    rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_MEMBERS], k.b, k.n);
    rk_key_id2(&k, uid, gid);
    rocksdb_writebatch_wi_delete_cf(r->wb, r->rw.cf[RK_CF_USER_GROUPS], k.b, k.n);
}

int rk_get_send(void *be, st_id uid, st_id cid, st_send_row *row)
{
    char v[RK_SEND_HDR + ST_MAX_ID];
    size_t n = 0;
    int rc = get_id2(be, RK_CF_SENDS, uid, cid, v, RK_SEND_HDR, &n);
    if (rc == 1) {
        row->mid = st_get_be64(v);
        row->ts = st_get_be64(v + 8);
        row->gid_n = n - RK_SEND_HDR;
        memcpy(row->gid, v + RK_SEND_HDR, row->gid_n);
    }
    return rc;
}

void rk_put_send(void *be, st_id uid, st_id cid, const st_send_row *row)
{
    rk_key k;
    char v[RK_SEND_HDR + ST_MAX_ID];
    rk_key_id2(&k, uid, cid);
    st_put_be64(v, row->mid);
    st_put_be64(v + 8, row->ts);
    memcpy(v + RK_SEND_HDR, row->gid, row->gid_n);
    put(be, RK_CF_SENDS, &k, v, RK_SEND_HDR + row->gid_n);
}

void rk_put_msg(void *be, st_id gid, uint64_t mid, uint64_t ts, const void *rec, size_t n)
{
    rk *r = be;
    rk_key k;
    rk_key_msg(&k, gid, mid);
    /* The value is the timestamp and the record: given to RocksDB in two slices. */
    char hdr[RK_MSG_HDR];
    st_put_be64(hdr, ts);
    const char *parts[2] = {hdr, rec ? rec : ""};
    size_t sizes[2] = {RK_MSG_HDR, n};
    const char *kp[1] = {k.b};
    size_t ks[1] = {k.n};
    rocksdb_writebatch_wi_putv_cf(r->wb, r->rw.cf[RK_CF_MSGS], 1, kp, ks, 2, parts, sizes);
    rk_unread_msg(r, gid, mid, ts);
}

int rk_get_msg(void *be, st_id gid, uint64_t mid, st_msg_row *row)
{
    rk *r = be;
    rk_key k;
    rk_key_msg(&k, gid, mid);
    size_t n = 0;
    rocksdb_free(r->msg_val);
    if (rk_get_row(r, RK_CF_MSGS, k.b, k.n, &r->msg_val, &n) < 0) {
        r->unreadable = true;
        return ST_EIO;
    }
    st_msg m;
    if (!r->msg_val || !rk_msg_decode(r->msg_val, n, &m, r->msg_rx))
        return 0;
    *row = (st_msg_row){.ts = m.ts,
                        .ver = m.ver,
                        .ver_ts = m.ver_ts,
                        .recalled = m.recalled,
                        .record = m.record,
                        .record_n = m.record_n,
                        .cseq = m.cseq,
                        .reactions = m.reactions,
                        .n_reactions = m.n_reactions};
    return 1;
}

/* The message's value as m says (its header, then the record), into the batch. */
void rk_put_msg_row(rk *r, st_id gid, uint64_t mid, const st_msg_row *m)
{
    rk_key k;
    rk_key_msg(&k, gid, mid);
    char hdr[RK_MSG_HDR_VER + RK_MSG_EXT_MAX];
    const char *parts[2] = {hdr, m->record ? m->record : ""};
    size_t sizes[2] = {rk_msg_encode_hdr(m, hdr), m->record_n};
    const char *kp[1] = {k.b};
    size_t ks[1] = {k.n};
    rocksdb_writebatch_wi_putv_cf(r->wb, r->rw.cf[RK_CF_MSGS], 1, kp, ks, 2, parts, sizes);
}

/* The version replaces the value: what the message said before is gone from the store's
 * reads at once, and from its files once compaction has rewritten them. */
void rk_put_version(void *be, st_id gid, uint64_t mid, const st_msg_row *m)
{
    rk *r = be;
    rk_put_msg_row(r, gid, mid, m);
    if (m->recalled) {
        rk_scrub_note(r, gid, mid);
        /* Its reactions go with it. A failed read of them fails the batch (get's way). */
        if (rk_drop_reactions(r, gid, mid) != ST_OK)
            r->unreadable = true;
    }
}

/* ---- the batch's write ---------------------------------------------------------------- */

/* Is the folder still the one opened? false with why if it was removed or replaced. */
bool rk_folder_same(rk *r, char *why, size_t why_len)
{
    struct stat st;
    if (stat(r->path, &st) != 0) {
        snprintf(why, why_len, "the store's folder %s is gone: %s", r->path, strerror(errno));
        return false;
    }
    if (st.st_dev != r->dev || st.st_ino != r->ino) {
        snprintf(why, why_len, "the store's folder %s was replaced by another one", r->path);
        return false;
    }
    return true;
}

/* One (synced) write of the whole batch. The folder is checked before the write (write
 * nothing into a folder that moved) and after it (do not confirm a write it was moved
 * during). */
int rk_write(rk *r, char *why, size_t why_len)
{
    int rc = ST_OK;
    if (r->unreadable) { /* a row the batch rests on could not be read: write none of it */
        r->unreadable = false;
        rocksdb_writebatch_wi_clear(r->wb);
        snprintf(why, why_len, "reading the rows of a write failed");
        return ST_EIO;
    }
    if (rocksdb_writebatch_wi_count(r->wb) == 0)
        return ST_OK;
    char *err = NULL;
    if (!rk_folder_same(r, why, why_len)) {
        rc = ST_EIO;
    } else {
        rocksdb_write_writebatch_wi(r->rw.db, r->wopts, r->wb, &err);
        if (err) {
            snprintf(why, why_len, "%s", err);
            rocksdb_free(err);
            rc = ST_EIO;
        } else if (!rk_folder_same(r, why, why_len)) {
            rc = ST_EIO;
        }
    }
    rocksdb_writebatch_wi_clear(r->wb);
    return rc;
}
