/*
 * Recalled bodies off the disk (RocksDB). A recall overwrites the message's value with
 * its tombstone at once, so no read sees the body again; but an LSM keeps the old value
 * in its write-ahead log, its memtable and its table files until they are rewritten. So
 * after a recall commits, the memtables of every column family are flushed (the log that
 * held the body is then no longer needed and is deleted) and the key range of the
 * recalled messages is compacted (the table files that held it are rewritten without
 * it). That costs milliseconds to seconds on a large store, so it runs at most once every
 * SCRUB_EVERY_MS, over the range of every message recalled since the last one, after a
 * commit or when the store thread is idle.
 */
#include "store_rocks.h"

#include <stdio.h>
#include <string.h>

#define SCRUB_EVERY_MS 1000

/* Widens [lo, hi] to take k. */
static void widen(rk_key *lo, rk_key *hi, bool *any, const rk_key *k)
{
    if (!*any || memcmp(k->b, lo->b, k->n < lo->n ? k->n : lo->n) < 0 ||
        (memcmp(k->b, lo->b, k->n < lo->n ? k->n : lo->n) == 0 && k->n < lo->n))
        *lo = *k;
    if (!*any || memcmp(k->b, hi->b, k->n < hi->n ? k->n : hi->n) > 0 ||
        (memcmp(k->b, hi->b, k->n < hi->n ? k->n : hi->n) == 0 && k->n > hi->n))
        *hi = *k;
    *any = true;
}

void rk_scrub_note(rk *r, st_id gid, uint64_t mid)
{
    rk_key k;
    rk_key_msg(&k, gid, mid);
    widen(&r->scrub.batch_lo, &r->scrub.batch_hi, &r->scrub.batch_any, &k);
}

void rk_scrub_batch_end(rk *r, bool committed)
{
    if (committed && r->scrub.batch_any) {
        widen(&r->scrub.lo, &r->scrub.hi, &r->scrub.due, &r->scrub.batch_lo);
        widen(&r->scrub.lo, &r->scrub.hi, &r->scrub.due, &r->scrub.batch_hi);
    }
    r->scrub.batch_any = false;
}

int rk_scrub(rk *r, char *why, size_t why_len)
{
    uint64_t mono = st_mono_ms();
    if (!r->scrub.due || mono < r->scrub.at)
        return ST_OK;
    r->scrub.at = mono + SCRUB_EVERY_MS;
    char *err = NULL;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    for (int cf = 0; cf < RK_CF_COUNT && !err; cf++)
        rocksdb_flush_cf(r->rw.db, fo, r->rw.cf[cf], &err);
    rocksdb_flushoptions_destroy(fo);
    if (err) {
        snprintf(why, why_len, "flushing after a recall failed: %s", err);
        rocksdb_free(err);
        return ST_EIO;
    }
    /* The range's end is exclusive: one past the last key. */
    rk_key end = r->scrub.hi;
    end.b[end.n++] = 0;
    rocksdb_compact_range_cf(r->rw.db, r->rw.cf[RK_CF_MSGS], r->scrub.lo.b, r->scrub.lo.n, end.b,
                             end.n);
    r->scrub.due = false;
    r->scrubs++;
    return ST_OK;
}
