/*
 * bench_store: where the benchmarks' programs (erase_bench, peers_bench) keep the store
 * they fill: a RocksDB folder, or a PostgreSQL database named by a libpq URI.
 */
#ifndef GW_BENCH_STORE_H
#define GW_BENCH_STORE_H

#include "store.h"

#include <string.h>

/* Sets o->url when where is a PostgreSQL URI (postgresql:// or postgres://, libpq's two
 * schemes) or a slot map's (shards:PATH, etcd://...), as gw --store takes, else o->path:
 * where is borrowed for as long as o is. */
static inline void bench_store_where(st_options *o, const char *where)
{
    if (strncmp(where, "postgresql://", 13) == 0 || strncmp(where, "postgres://", 11) == 0 ||
        strncmp(where, "shards:", 7) == 0 || strncmp(where, "etcd://", 7) == 0)
        o->url = where;
    else
        o->path = where;
}

#endif
