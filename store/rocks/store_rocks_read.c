/*
 * Reads of the RocksDB backend: committed state only, from any thread, answered at once.
 * Each read that combines several rows (a page and its group's last_mid, a user's groups
 * with their acks, a page of members and the last_mid) uses one snapshot so the figures
 * agree with each other.
 *
 * A read holds rd_lock shared from start to end and uses the handle rd points to: the
 * store thread may reopen the database after disk trouble, and it switches rd (and
 * closes the old handle) only under the lock held exclusively.
 */
#include "store_rocks.h"

#include <stdlib.h>
#include <string.h>

typedef struct reader {
    rk *r;
    const rk_db *d; /* the handle of this read, pinned by rd_lock */
    const rocksdb_snapshot_t *snap;
    rocksdb_readoptions_t *ro;
    /* The reader's reactions (mark_mine), made when a message first needs them: options
     * of their own, as ro's bounds are the scan's. */
    rocksdb_readoptions_t *ro_mine;
    rocksdb_iterator_t *mine;
} reader;

/* ST_EIO when no handle is open (both the reopen and the read-only open failed). */
static int reader_open(reader *rd, rk *r)
{
    pthread_rwlock_rdlock(&r->rd_lock);
    rd->r = r;
    rd->d = r->rd;
    rd->ro_mine = NULL;
    rd->mine = NULL;
    if (!rd->d) {
        pthread_rwlock_unlock(&r->rd_lock);
        return ST_EIO;
    }
    rd->snap = rocksdb_create_snapshot(rd->d->db);
    rd->ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_snapshot(rd->ro, rd->snap);
    return ST_OK;
}

static void reader_close(reader *rd)
{
    if (rd->mine)
        rocksdb_iter_destroy(rd->mine);
    if (rd->ro_mine)
        rocksdb_readoptions_destroy(rd->ro_mine);
    rocksdb_readoptions_destroy(rd->ro);
    rocksdb_release_snapshot(rd->d->db, rd->snap);
    pthread_rwlock_unlock(&rd->r->rd_lock);
}

/* Ends a scan: frees the iterator; ST_EIO if it stopped on an error, else rc. */
static int iter_done(rocksdb_iterator_t *it, int rc)
{
    char *err = NULL;
    if (rc == ST_OK)
        rocksdb_iter_get_error(it, &err);
    rocksdb_iter_destroy(it);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    return rc;
}

/* Reads a fixed-size row into out. Returns 1 found, 0 absent, ST_EIO on error. */
static int get_row(reader *rd, enum rk_cf cf, const rk_key *k, char *out, size_t want)
{
    char *err = NULL;
    size_t n = 0;
    char *v = rocksdb_get_cf(rd->d->db, rd->ro, rd->d->cf[cf], k->b, k->n, &n, &err);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    int found = v && n == want;
    if (found)
        memcpy(out, v, want);
    rocksdb_free(v);
    return found;
}

/* A group's row (either size of value). ST_OK, ST_ENOGROUP or ST_EIO. */
static int read_group_row(reader *rd, st_id gid, st_group_row *g)
{
    rk_key k;
    rk_key_id(&k, gid);
    char *err = NULL;
    size_t n = 0;
    char *v = rocksdb_get_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_GROUPS], k.b, k.n, &n, &err);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    bool found = v && rk_group_decode(v, n, g);
    rocksdb_free(v);
    return found ? ST_OK : ST_ENOGROUP;
}

static int read_last_mid(reader *rd, st_id gid, uint64_t *last_mid)
{
    st_group_row g;
    int rc = read_group_row(rd, gid, &g);
    if (rc == ST_OK)
        *last_mid = g.last_mid;
    return rc;
}

static int read_member(reader *rd, st_id gid, st_id uid, st_member_row *m)
{
    rk_key k;
    rk_key_id2(&k, gid, uid);
    char *err = NULL;
    size_t n = 0;
    char *v = rocksdb_get_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_MEMBERS], k.b, k.n, &n, &err);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    bool found = v && rk_member_decode(v, n, m);
    rocksdb_free(v);
    return found ? ST_OK : ST_ENOTMEMBER;
}

static int read_group(reader *rd, st_op *op)
{
    st_group_row g;
    int rc = read_group_row(rd, op->gid, &g);
    if (rc == ST_OK) {
        op->last_mid = g.last_mid;
        op->first_mid = g.first_mid;
        op->retain = g.retain;
        op->last_cseq = g.last_cseq;
    }
    st_member_row m;
    if (rc == ST_OK && op->uid.n && (rc = read_member(rd, op->gid, op->uid, &m)) == ST_OK) {
        op->ack = m.ack;
        op->read = m.read;
        op->has_read = m.has_read;
    }
    return rc;
}

static int read_seen(reader *rd, st_op *op)
{
    for (size_t i = 0; i < op->n_seen; i++) {
        rk_key k;
        char v[8];
        rk_key_id(&k, op->seen[i].uid);
        int rc = get_row(rd, RK_CF_USERS, &k, v, sizeof(v));
        if (rc < 0)
            return rc;
        op->seen[i].ms = rc == 1 ? st_get_be64(v) : 0;
    }
    return ST_OK;
}

static int read_groups(reader *rd, st_op *op)
{
    rk_key lo, hi;
    rk_key_id(&lo, op->uid);
    bool bounded = rk_key_prefix_end(&lo, &hi);
    if (!(op->groups = st_groups_new()))
        return ST_ENOMEM;
    if (bounded)
        rocksdb_readoptions_set_iterate_upper_bound(rd->ro, hi.b, hi.n);
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_USER_GROUPS]);
    int rc = ST_OK;
    for (rocksdb_iter_seek(it, lo.b, lo.n); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kn;
        const char *kp = rocksdb_iter_key(it, &kn);
        if (kn <= lo.n + 1 || memcmp(kp, lo.b, lo.n) != 0)
            break; /* past this user's rows (only reached when unbounded) */
        st_id gid = {kp + lo.n + 1, (unsigned char)kp[lo.n]};
        st_group_row g;
        st_member_row m;
        if (read_group_row(rd, gid, &g) != ST_OK || read_member(rd, gid, op->uid, &m) != ST_OK)
            continue; /* a row left over from a half-applied leave cannot exist (one batch) */
        if ((rc = st_groups_add(op->groups, gid, g.first_mid, g.last_mid, m.ack, m.read,
                                m.has_read)) != ST_OK)
            break;
        st_groups_set_last_cseq(op->groups, g.last_cseq);
    }
    rc = iter_done(it, rc);
    char v[8];
    int got = rc == ST_OK ? get_row(rd, RK_CF_REVOKED, &lo, v, sizeof(v)) : 0;
    if (got < 0)
        return got;
    op->not_before = got == 1 ? st_get_be64(v) : 0;
    return rc;
}

/*
 * A page of a group's members in byte order of uid. A members key is len gid, len uid:
 * within a group the keys sort by the uid's length first ("b" before "aa"), which is no
 * order to promise a client. But the uids of one length are one run in byte order, so
 * the scan takes each length the group holds in turn: it seeks to the first uid of that
 * length above `after` and offers uids to the page, which keeps the smallest limit + 1,
 * until one is not kept (the rest of that run is greater still). That is a seek or two
 * per length present (a few in practice, 255 at most) and at most limit + 1 members read
 * per length, whatever the group's size.
 */
static int read_members(reader *rd, st_op *op)
{
    uint64_t last_mid = 0;
    int rc = read_last_mid(rd, op->gid, &last_mid);
    if (rc != ST_OK)
        return rc;
    if (!(op->members = st_members_new(last_mid, op->limit)))
        return ST_ENOMEM;
    rk_key group, end, seek;
    rk_key_id(&group, op->gid);          /* the group's members: every key that starts so */
    if (rk_key_prefix_end(&group, &end)) /* always: ids are printable ASCII */
        rocksdb_readoptions_set_iterate_upper_bound(rd->ro, end.b, end.n);
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_MEMBERS]);
    st_id after = op->uid;
    size_t len = 1;
    while (rc == ST_OK && len <= ST_MAX_ID) {
        /* The uids of this length above `after` are the keys from len | after on (but
         * after itself): a uid compares with after as its key with that one, and the
         * two that differ in length agree too: a uid that after begins with sorts
         * below both, one that begins with after above both. */
        seek = group;
        seek.b[seek.n++] = (char)len;
        if (after.n)
            memcpy(seek.b + seek.n, after.p, after.n);
        seek.n += after.n;
        size_t next = ST_MAX_ID + 1; /* the group's keys ran out: done */
        for (rocksdb_iter_seek(it, seek.b, seek.n); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
            size_t kn, vn;
            const char *kp = rocksdb_iter_key(it, &kn);
            const char *vp = rocksdb_iter_value(it, &vn);
            size_t un = kn > group.n ? (unsigned char)kp[group.n] : 0;
            st_member_row m;
            if (kn != group.n + 1 + un || un == 0 || !rk_member_decode(vp, vn, &m))
                continue; /* not a member row: none is written so */
            if (un != len) {
                next = un > len ? un : len + 1; /* the next length the group holds */
                break;
            }
            st_id uid = {kp + group.n + 1, un};
            if (st_id_cmp(uid, after) == 0)
                continue; /* after itself: the page starts above it */
            int kept = st_members_offer(op->members, uid, m.ack, m.read, m.has_read);
            if (kept < 0)
                rc = kept;
            if (kept <= 0) {
                next = len + 1;
                break;
            }
        }
        len = next;
    }
    rc = iter_done(it, rc);
    st_members_finish(op->members);
    return rc;
}

/*
 * The reader's own reactions (st_reaction.mine) on a message that has some: its rows in
 * user_reactions, uid | gid | mid | key, one seek. The iterator is made at the first
 * message that needs it, so a page without reactions makes none.
 */
static int mark_mine(reader *rd, st_id uid, st_id gid, uint64_t mid, st_reaction *rx, size_t n)
{
    if (!uid.n || !n)
        return ST_OK;
    if (!rd->mine) {
        rd->ro_mine = rocksdb_readoptions_create();
        rocksdb_readoptions_set_snapshot(rd->ro_mine, rd->snap);
        rd->mine =
            rocksdb_create_iterator_cf(rd->d->db, rd->ro_mine, rd->d->cf[RK_CF_USER_REACTIONS]);
    }
    rocksdb_iterator_t **it = &rd->mine;
    rk_key prefix;
    rk_key_user_react(&prefix, uid, gid, mid, (st_id){NULL, 0});
    for (rocksdb_iter_seek(*it, prefix.b, prefix.n); rocksdb_iter_valid(*it);
         rocksdb_iter_next(*it)) {
        size_t kn;
        const char *k = rocksdb_iter_key(*it, &kn);
        if (kn <= prefix.n + 1 || memcmp(k, prefix.b, prefix.n) != 0)
            break;
        st_id key = {k + prefix.n + 1, kn - prefix.n - 1};
        for (size_t i = 0; i < n; i++)
            if (st_id_cmp(rx[i].key, key) == 0)
                rx[i].mine = true;
    }
    char *err = NULL;
    rocksdb_iter_get_error(*it, &err);
    if (err) {
        rocksdb_free(err);
        return ST_EIO;
    }
    return ST_OK;
}

/*
 * One bounded scan over mids [lo, hi] in the direction of reading (ascending after a mid,
 * descending before one), so that when max_bytes cuts the page short it keeps the
 * messages nearest to where the client is reading. At least one message is always kept.
 */
static int scan(reader *rd, st_id gid, st_id uid, uint64_t lo, uint64_t hi, enum st_dir dir,
                size_t max_bytes, st_page *p, bool *cut)
{
    st_reaction rx[ST_REACT_KEYS_MAX];
    rk_key klo, khi;
    rk_key_msg(&klo, gid, lo);
    rk_key_msg(&khi, gid, hi + 1);
    size_t cap = (size_t)(hi - lo + 1), n = 0;
    if (st_page_reserve(p, cap) != ST_OK)
        return ST_ENOMEM;
    rocksdb_readoptions_set_iterate_lower_bound(rd->ro, klo.b, klo.n);
    rocksdb_readoptions_set_iterate_upper_bound(rd->ro, khi.b, khi.n);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_MSGS]);
    bool back = dir == ST_BEFORE;
    if (back)
        rocksdb_iter_seek_to_last(it);
    else
        rocksdb_iter_seek_to_first(it);
    int rc = ST_OK;
    *cut = false;
    for (; rocksdb_iter_valid(it) && n < cap;
         back ? rocksdb_iter_prev(it) : rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *kp = rocksdb_iter_key(it, &kn);
        const char *vp = rocksdb_iter_value(it, &vn);
        st_msg m;
        if (kn != klo.n || !rk_msg_decode(vp, vn, &m, rx))
            continue;
        if (n > 0 && st_page_bytes(p) + m.record_n > max_bytes) {
            *cut = true;
            break;
        }
        m.mid = st_get_be64(kp + kn - 8);
        if ((rc = mark_mine(rd, uid, gid, m.mid, rx, m.n_reactions)) || (rc = st_page_add(p, &m)))
            break;
        n++;
    }
    return iter_done(it, rc);
}

static int read_page(reader *rd, st_op *op)
{
    st_group_row g;
    uint64_t lo, hi, gone;
    int rc = read_group_row(rd, op->gid, &g);
    if (rc != ST_OK)
        return rc;
    bool cut = false, more = false;
    bool any =
        st_page_range(op->dir, op->from, op->limit, g.first_mid, g.last_mid, &lo, &hi, &gone);
    if (!(op->page = st_page_new(g.first_mid, g.last_mid, gone)))
        return ST_ENOMEM;
    st_page_set_last_cseq(op->page, g.last_cseq);
    if (any) {
        rc = scan(rd, op->gid, op->uid, lo, hi, op->dir, op->max_bytes ? op->max_bytes : SIZE_MAX,
                  op->page, &cut);
        more = cut || (op->dir == ST_AFTER ? hi < g.last_mid : lo > g.first_mid);
    }
    st_page_finish(op->page, op->dir == ST_BEFORE, more);
    return rc;
}

/* Entries below the horizon skipped in one read at most, beyond its limit: a read stays
 * bounded while a trim has not deleted them yet (more says to go on). */
#define SKIP_MAX 4096

/*
 * The changes after `from` (store.h, ST_OP_READ_CHANGES): the log's entries from from + 1
 * in cseq order, each message read as it is now (the entry is its latest change, so its
 * state is that change's). From below the log's start: nothing, and changes_gone says
 * where it starts. The page is complete up to the last entry it holds when more, else up
 * to the group's last_cseq (horizon moves and a deletion take cseqs with no entry).
 */
static int read_changes(reader *rd, st_op *op)
{
    st_group_row g;
    int rc = read_group_row(rd, op->gid, &g);
    if (rc != ST_OK)
        return rc;
    if (!(op->page = st_page_new(g.first_mid, g.last_mid, 0)))
        return ST_ENOMEM;
    st_page_set_last_cseq(op->page, g.last_cseq);
    if (op->from + 1 < g.changes_first) {
        st_page_set_changes(op->page, op->from, g.changes_first);
        st_page_finish(op->page, false, false);
        return ST_OK;
    }
    size_t limit = op->limit > ST_CHANGES_LIMIT_MAX ? ST_CHANGES_LIMIT_MAX : op->limit;
    size_t max_bytes = op->max_bytes ? op->max_bytes : SIZE_MAX, n = 0, skipped = 0;
    uint64_t upto = g.last_cseq;
    bool more = false;
    rk_key klo, khi;
    rk_key_msg(&klo, op->gid, op->from + 1);
    rk_key_msg(&khi, op->gid, g.last_cseq + 1);
    rocksdb_readoptions_set_iterate_lower_bound(rd->ro, klo.b, klo.n);
    rocksdb_readoptions_set_iterate_upper_bound(rd->ro, khi.b, khi.n);
    rocksdb_iterator_t *it =
        rocksdb_create_iterator_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_CHANGES]);
    st_reaction rx[ST_REACT_KEYS_MAX];
    uint64_t last = op->from; /* the last entry taken or skipped */
    for (rocksdb_iter_seek_to_first(it); rc == ST_OK && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *kp = rocksdb_iter_key(it, &kn);
        const char *vp = rocksdb_iter_value(it, &vn);
        if (kn != klo.n || vn != 16)
            continue;
        uint64_t cseq = st_get_be64(kp + kn - 8), mid = st_get_be64(vp);
        if (n == limit || skipped == limit + SKIP_MAX) {
            more = true;
            break;
        }
        rk_key mk;
        rk_key_msg(&mk, op->gid, mid);
        char *err = NULL;
        size_t mn = 0;
        char *v = mid >= g.first_mid ? rocksdb_get_cf(rd->d->db, rd->ro, rd->d->cf[RK_CF_MSGS],
                                                      mk.b, mk.n, &mn, &err)
                                     : NULL;
        if (err) {
            rocksdb_free(err);
            rc = ST_EIO;
            break;
        }
        st_msg m;
        if (!v || !rk_msg_decode(v, mn, &m, rx) || m.cseq != cseq) {
            rocksdb_free(v); /* below the horizon (or not this entry's state: none is) */
            skipped++;
            last = cseq;
            continue;
        }
        if (n > 0 && st_page_bytes(op->page) + m.record_n > max_bytes) {
            rocksdb_free(v);
            more = true;
            break;
        }
        m.mid = mid;
        rc = mark_mine(rd, op->uid, op->gid, mid, rx, m.n_reactions);
        if (rc == ST_OK)
            rc = st_page_add(op->page, &m);
        rocksdb_free(v);
        n++;
        last = cseq;
    }
    rc = iter_done(it, rc);
    if (more)
        upto = last;
    st_page_set_changes(op->page, upto, 0);
    st_page_finish(op->page, false, more);
    return rc;
}

int rk_read(void *be, st_op *reads, char *why, size_t why_len)
{
    for (st_op *op = reads; op; op = op->next_) {
        reader rd;
        op->result = reader_open(&rd, be);
        if (op->result != ST_OK)
            continue;
        switch (op->kind) {
        case ST_OP_READ_PAGE: op->result = read_page(&rd, op); break;
        case ST_OP_READ_GROUPS: op->result = read_groups(&rd, op); break;
        case ST_OP_READ_GROUP: op->result = read_group(&rd, op); break;
        case ST_OP_READ_MEMBERS: op->result = read_members(&rd, op); break;
        case ST_OP_READ_SEEN: op->result = read_seen(&rd, op); break;
        case ST_OP_READ_CHANGES: op->result = read_changes(&rd, op); break;
        default: op->result = ST_EINVAL; break;
        }
        reader_close(&rd);
        if (op->result != ST_OK)
            st_read_discard(op);
    }
    return ST_OK; /* a failed read says so in its result; the store is not in trouble */
}
