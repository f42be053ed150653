/*
 * Reads: committed state only, from any thread. Each read that combines several rows
 * (a page and its group's last_mid, a user's groups with their acks) uses one snapshot so
 * the figures agree with each other.
 *
 * A read holds the store's rd_lock shared from start to end and uses the handle s->rd
 * points to: the writer may reopen the database after disk trouble, and it switches rd
 * (and closes the old handle) only under the lock held exclusively.
 */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

struct st_page {
    uint64_t last_mid;
    bool more;
    size_t n;
    st_msg *msgs;
    char *bytes; /* every record, back to back; msgs[i].record points in here */
};

typedef struct reader {
    st_store *s;
    const st_db *d; /* the handle of this read, pinned by rd_lock */
    const rocksdb_snapshot_t *snap;
    rocksdb_readoptions_t *ro;
} reader;

/* ST_EIO when no handle is open (both the reopen and the read-only open failed). */
static int reader_open(reader *r, st_store *s)
{
    pthread_rwlock_rdlock(&s->rd_lock);
    r->s = s;
    r->d = s->rd;
    if (!r->d) {
        pthread_rwlock_unlock(&s->rd_lock);
        return ST_EIO;
    }
    r->snap = rocksdb_create_snapshot(r->d->db);
    r->ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_snapshot(r->ro, r->snap);
    return ST_OK;
}

static void reader_close(reader *r)
{
    rocksdb_readoptions_destroy(r->ro);
    rocksdb_release_snapshot(r->d->db, r->snap);
    pthread_rwlock_unlock(&r->s->rd_lock);
}

/* Reads a fixed-size row into out. Returns 1 found, 0 absent, ST_EIO on error. */
static int get_row(reader *r, enum st_cf cf, const st_key *k, char *out, size_t want)
{
    char *err = NULL;
    size_t n = 0;
    char *v = rocksdb_get_cf(r->d->db, r->ro, r->d->cf[cf], k->b, k->n, &n, &err);
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

static int read_last_mid(reader *r, st_id gid, uint64_t *last_mid)
{
    st_key k;
    char v[ST_GROUP_VAL];
    st_key_id(&k, gid);
    int rc = get_row(r, ST_CF_GROUPS, &k, v, sizeof(v));
    if (rc < 0)
        return rc;
    if (rc == 0)
        return ST_ENOGROUP;
    *last_mid = st_get_be64(v);
    return ST_OK;
}

static int read_ack(reader *r, st_id gid, st_id uid, uint64_t *ack)
{
    st_key k;
    char v[ST_MEMBER_VAL];
    st_key_id2(&k, gid, uid);
    int rc = get_row(r, ST_CF_MEMBERS, &k, v, sizeof(v));
    if (rc < 0)
        return rc;
    if (rc == 0)
        return ST_ENOTMEMBER;
    *ack = st_get_be64(v);
    return ST_OK;
}

int st_read_last_mid(st_store *s, st_id gid, uint64_t *last_mid)
{
    if (!st_id_ok(gid))
        return ST_EINVAL;
    reader r;
    int rc = reader_open(&r, s);
    if (rc != ST_OK)
        return rc;
    rc = read_last_mid(&r, gid, last_mid);
    reader_close(&r);
    return rc;
}

int st_read_ack(st_store *s, st_id gid, st_id uid, uint64_t *ack)
{
    if (!st_id_ok(gid) || !st_id_ok(uid))
        return ST_EINVAL;
    reader r;
    int rc = reader_open(&r, s);
    if (rc != ST_OK)
        return rc;
    rc = read_ack(&r, gid, uid, ack);
    reader_close(&r);
    return rc;
}

int st_read_user_groups(st_store *s, st_id uid, int (*cb)(void *ud, const st_user_group *g),
                        void *ud)
{
    if (!st_id_ok(uid) || !cb)
        return ST_EINVAL;
    st_key lo, hi;
    st_key_id(&lo, uid);
    bool bounded = st_key_prefix_end(&lo, &hi);
    reader r;
    int rc = reader_open(&r, s);
    if (rc != ST_OK)
        return rc;
    if (bounded)
        rocksdb_readoptions_set_iterate_upper_bound(r.ro, hi.b, hi.n);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r.d->db, r.ro, r.d->cf[ST_CF_USER_GROUPS]);
    for (rocksdb_iter_seek(it, lo.b, lo.n); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kn;
        const char *kp = rocksdb_iter_key(it, &kn);
        if (kn <= lo.n + 1 || memcmp(kp, lo.b, lo.n) != 0)
            break; /* past this user's rows (only reached when unbounded) */
        st_user_group g = {.gid = {kp + lo.n + 1, (unsigned char)kp[lo.n]}};
        if (read_last_mid(&r, g.gid, &g.last_mid) != ST_OK ||
            read_ack(&r, g.gid, uid, &g.ack) != ST_OK)
            continue; /* a row left over from a half-applied leave cannot exist (one batch) */
        g.unread = g.last_mid > g.ack ? g.last_mid - g.ack : 0;
        rc = cb(ud, &g);
        if (rc)
            break;
    }
    if (rc == ST_OK) {
        char *err = NULL;
        rocksdb_iter_get_error(it, &err);
        if (err) {
            rocksdb_free(err);
            rc = ST_EIO;
        }
    }
    rocksdb_iter_destroy(it);
    reader_close(&r);
    return rc;
}

/* The mids [lo, hi] of a page: mids are dense, so the range is known before the scan. */
static void page_range(enum st_dir dir, uint64_t from, size_t limit, uint64_t last_mid,
                       uint64_t *lo, uint64_t *hi)
{
    if (dir == ST_AFTER) {
        *lo = from + 1;
        *hi = (last_mid - from > limit) ? from + limit : last_mid;
    } else {
        *hi = from - 1 < last_mid ? from - 1 : last_mid;
        *lo = *hi >= limit ? *hi - limit + 1 : 1;
    }
}

/* Appends one record to the page's byte buffer; returns its offset or SIZE_MAX. */
static size_t page_keep(st_page *p, size_t *used, size_t *room, const char *rec, size_t rn)
{
    if (*used + rn > *room) {
        size_t nroom = *room ? *room * 2 : 4096;
        while (nroom < *used + rn)
            nroom *= 2;
        char *nb = realloc(p->bytes, nroom);
        if (!nb)
            return SIZE_MAX;
        p->bytes = nb;
        *room = nroom;
    }
    memcpy(p->bytes + *used, rec, rn);
    size_t off = *used;
    *used += rn;
    return off;
}

/*
 * One bounded scan over mids [lo, hi] in the direction of reading (ascending after a mid,
 * descending before one), so that when max_bytes cuts the page short it keeps the
 * messages nearest to where the client is reading. At least one message is always kept.
 * Returns with the page's messages ascending; *short_ tells whether it stopped early.
 */
static int scan(reader *r, st_id gid, uint64_t lo, uint64_t hi, enum st_dir dir,
                size_t max_bytes, st_page *p, bool *short_)
{
    st_key klo, khi;
    st_key_msg(&klo, gid, lo);
    st_key_msg(&khi, gid, hi + 1);
    size_t cap = (size_t)(hi - lo + 1), used = 0, room = 0;
    size_t *offs = calloc(cap, sizeof(*offs));
    p->msgs = calloc(cap, sizeof(*p->msgs));
    if (!p->msgs || !offs) {
        free(offs);
        return ST_ENOMEM;
    }
    rocksdb_readoptions_set_iterate_lower_bound(r->ro, klo.b, klo.n);
    rocksdb_readoptions_set_iterate_upper_bound(r->ro, khi.b, khi.n);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->d->db, r->ro, r->d->cf[ST_CF_MSGS]);
    bool back = dir == ST_BEFORE;
    if (back)
        rocksdb_iter_seek_to_last(it);
    else
        rocksdb_iter_seek_to_first(it);
    int rc = ST_OK;
    *short_ = false;
    for (; rocksdb_iter_valid(it) && p->n < cap; back ? rocksdb_iter_prev(it) : rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *kp = rocksdb_iter_key(it, &kn);
        const char *vp = rocksdb_iter_value(it, &vn);
        if (kn != klo.n || vn < ST_MSG_HDR)
            continue;
        size_t rn = vn - ST_MSG_HDR;
        if (p->n > 0 && used + rn > max_bytes) {
            *short_ = true;
            break;
        }
        size_t off = page_keep(p, &used, &room, vp + ST_MSG_HDR, rn);
        if (off == SIZE_MAX) {
            rc = ST_ENOMEM;
            break;
        }
        st_msg *m = &p->msgs[p->n];
        m->mid = st_get_be64(kp + kn - 8);
        m->ts = st_get_be64(vp);
        m->record_n = rn;
        offs[p->n++] = off;
    }
    if (rc == ST_OK) {
        char *err = NULL;
        rocksdb_iter_get_error(it, &err);
        if (err) {
            rocksdb_free(err);
            rc = ST_EIO;
        }
    }
    rocksdb_iter_destroy(it);
    if (back) { /* read newest first: turn it around */
        for (size_t i = 0, j = p->n ? p->n - 1 : 0; i < j; i++, j--) {
            st_msg tm = p->msgs[i];
            p->msgs[i] = p->msgs[j];
            p->msgs[j] = tm;
            size_t to = offs[i];
            offs[i] = offs[j];
            offs[j] = to;
        }
    }
    /* Pointers only now: the buffer may have moved while it grew. */
    for (size_t i = 0; i < p->n; i++)
        p->msgs[i].record = p->bytes + offs[i];
    free(offs);
    return rc;
}

int st_read_page(st_store *s, st_id gid, enum st_dir dir, uint64_t from, size_t limit,
                 st_page **out)
{
    return st_read_page_bounded(s, gid, dir, from, limit, SIZE_MAX, out);
}

int st_read_page_bounded(st_store *s, st_id gid, enum st_dir dir, uint64_t from, size_t limit,
                         size_t max_bytes, st_page **out)
{
    *out = NULL;
    if (!st_id_ok(gid) || limit == 0 || (dir != ST_AFTER && dir != ST_BEFORE))
        return ST_EINVAL;
    st_page *p = calloc(1, sizeof(*p));
    if (!p)
        return ST_ENOMEM;
    reader r;
    int rc = reader_open(&r, s);
    if (rc != ST_OK) {
        st_page_free(p);
        return rc;
    }
    rc = read_last_mid(&r, gid, &p->last_mid);
    if (rc == ST_OK) {
        bool empty = dir == ST_AFTER ? from >= p->last_mid : (from <= 1 || p->last_mid == 0);
        if (!empty) {
            uint64_t lo, hi;
            bool cut = false;
            page_range(dir, from, limit, p->last_mid, &lo, &hi);
            rc = scan(&r, gid, lo, hi, dir, max_bytes, p, &cut);
            p->more = cut || (dir == ST_AFTER ? hi < p->last_mid : lo > 1);
        }
    }
    reader_close(&r);
    if (rc != ST_OK) {
        st_page_free(p);
        return rc;
    }
    *out = p;
    return ST_OK;
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

bool st_page_more(const st_page *p)
{
    return p->more;
}

void st_page_free(st_page *p)
{
    if (!p)
        return;
    free(p->msgs);
    free(p->bytes);
    free(p);
}
