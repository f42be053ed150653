/*
 * Shards (store/shard/): one store over several PostgreSQL databases, by hash slots: the
 * face of the shard folder (store.h, "Shards", says what a user of the store sees).
 *
 * Owns: the slot map (its text, where it is kept: a file or etcd, and the thread that
 * watches it for new versions), and the router: a store whose ops go to the core of their
 * slot's shard, and whose reads of a user's groups (and the passes over every group) are
 * asked of every shard and merged.
 * Never calls: a backend but through the st_backend it is given (it opens one core per
 * shard over it), the core's private state (store_internal.h), the top (store_open.c).
 */
#ifndef GW_ST_SHARD_H
#define GW_ST_SHARD_H

#include "store_backend.h"

/* Does url name a slot map (shards:PATH or etcd://...) rather than one database? */
bool st_shard_url(const char *url);

/* Opens the store of o->url's slot map: one core over `be` per shard of the map, each with
 * o's options and the shard's URL, all of one origin. Like st_open: a shard that cannot
 * be reached now opens failing and recovers on its own; a map that cannot be read or is
 * malformed is an error (errmsg says why). */
int st_shard_open(const st_options *o, const st_backend *be, st_store **out, char *errmsg,
                  size_t errmsg_len);

#endif
