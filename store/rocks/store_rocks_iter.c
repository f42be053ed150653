/*
 * Walks over a column family's rows, for the RocksDB backend's writes (store thread):
 *   - rk_range: the database's rows in [lo, hi) (or lo's whole prefix);
 *   - rk_each: the database's rows under a prefix, one callback a row;
 *   - rk_each_in_batch: the same with the batch's writes over the database's;
 *   - rk_iter_end: the end of any of them (an iterator's error is the walk's).
 * The readers' scans (store_rocks_read.c) use a snapshot of their own and stay there.
 */
#include "store_rocks.h"

#include <string.h>

rocksdb_iterator_t *rk_range(rk *r, enum rk_cf cf, const rk_key *lo, const rk_key *hi,
                             rocksdb_readoptions_t **ro, rk_key *end)
{
    *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_lower_bound(*ro, lo->b, lo->n);
    if (hi)
        rocksdb_readoptions_set_iterate_upper_bound(*ro, hi->b, hi->n);
    else if (rk_key_prefix_end(lo, end)) /* always: ids are printable ASCII */
        rocksdb_readoptions_set_iterate_upper_bound(*ro, end->b, end->n);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(r->rw.db, *ro, r->rw.cf[cf]);
    rocksdb_iter_seek(it, lo->b, lo->n);
    return it;
}

int rk_iter_end(rocksdb_iterator_t *it, rocksdb_readoptions_t *ro, int rc)
{
    char *err = NULL;
    rocksdb_iter_get_error(it, &err);
    if (err) {
        rocksdb_free(err);
        rc = ST_EIO;
    }
    rocksdb_iter_destroy(it);
    if (ro)
        rocksdb_readoptions_destroy(ro);
    return rc;
}

int rk_each(rk *r, enum rk_cf cf, const rk_key *prefix, rk_row_fn *fn, void *ud)
{
    rk_key end;
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it = rk_range(r, cf, prefix, NULL, &ro, &end);
    int rc = ST_OK;
    for (; rc == ST_OK && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kn, vn;
        const char *k = rocksdb_iter_key(it, &kn);
        const char *v = rocksdb_iter_value(it, &vn);
        rc = fn(r, ud, k, kn, v, vn);
    }
    return rk_iter_end(it, ro, rc);
}

int rk_each_in_batch(rk *r, enum rk_cf cf, const rk_key *prefix,
                     int (*fn)(rk *r, void *ud, const char *k, size_t kn), void *ud)
{
    rocksdb_iterator_t *base = rocksdb_create_iterator_cf(r->rw.db, r->ropts, r->rw.cf[cf]);
    /* The batch's view over the database's; it owns base from here. Bounds are not
     * promised over the batch's part: the prefix is checked on each key. */
    rocksdb_iterator_t *it =
        rocksdb_writebatch_wi_create_iterator_with_base_cf(r->wb, base, r->rw.cf[cf]);
    int rc = ST_OK;
    for (rocksdb_iter_seek(it, prefix->b, prefix->n); rc == ST_OK && rocksdb_iter_valid(it);
         rocksdb_iter_next(it)) {
        size_t kn;
        const char *k = rocksdb_iter_key(it, &kn);
        if (kn < prefix->n || memcmp(k, prefix->b, prefix->n) != 0)
            break;
        /* fn may write into the batch, which the iterator reads: work on a copy. */
        char copy[RK_KEY_MAX];
        if (kn > sizeof(copy))
            continue; /* no key of ours is so long */
        memcpy(copy, k, kn);
        rc = fn(r, ud, copy, kn);
    }
    return rk_iter_end(it, NULL, rc);
}
