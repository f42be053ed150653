/*
 * The top of the store: st_open's choice of a backend, the only place that names them all.
 * The core (core/) opens over whichever table it is given; the backends (rocks/, pg/)
 * never see each other; shard/ opens one core per shard over the PostgreSQL table it is
 * given here.
 */
#include "st_pg.h"
#include "st_rocks.h"
#include "st_shard.h"

int st_open(const st_options *o, st_store **out, char *errmsg, size_t errmsg_len)
{
    bool pg = o && o->url && *o->url;
    if (pg && st_shard_url(o->url))
        return st_shard_open(o, &st_pg_backend, out, errmsg, errmsg_len);
    return st_core_open(pg ? &st_pg_backend : &st_rocks_backend, o, out, errmsg, errmsg_len);
}
