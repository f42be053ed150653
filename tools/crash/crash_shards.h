/*
 * gw_crash's sharded runs (--shards K, a store URL of a slot map: store.h, "Shards"): the
 * map read through the store's tools API, groups picked so that every shard holds two,
 * each group's shard and database as the map says now, the confirmations of each group
 * watched over a window (a failover's, a move's), and gw_slots' moves.
 */
#ifndef CRASH_SHARDS_H
#define CRASH_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHARDS_MAX_GROUPS 32 /* groups of a sharded run: two a shard */
#define SHARDS_GID_MAX 24    /* a group's id and its NUL */

/* Reads the map of url (shards:PATH or etcd://...): 0, or a negative ST_E* with why. */
int shards_open(const char *url, char *why, size_t why_n);
/* Reads it again (after a move): 0, or a negative ST_E* with why. */
int shards_reload(char *why, size_t why_n);
void shards_close(void);
unsigned shards_count(void);
uint64_t shards_version(void);
/* Picks per_shard groups for each shard: the ids "crash-0", "crash-1", ... tried in turn,
 * each kept when its slot's shard has fewer than per_shard, until each has them. Group
 * i is gids[i]; its shard per_shard-th in turn: groups 2j and 2j+1 are shard j's with two
 * a shard. Returns how many (shards * per_shard), or -1 if none fit within 100,000 ids. */
int shards_pick(int per_shard, char (*gids)[SHARDS_GID_MAX], int max);
/* The shard that holds gid in the map as last read, and that shard's URL (borrowed until
 * the next shards_reload or shards_close). */
unsigned shards_of(const char *gid);
unsigned shards_slot(const char *gid); /* st_slot_of */
const char *shards_db(const char *gid);
const char *shards_db_of(unsigned shard);

/* Confirmations watched per group between watch_start and watch_stop: how many, and the
 * longest time without one (from the start to the first, between two, from the last to
 * the stop). */
void watch_start(int groups);
void watch_confirmed(int group); /* cheap: called at every confirmation */
void watch_stop(void);
uint64_t watch_count(int group);
uint64_t watch_gap_ms(int group);

/* The command of a move of gid's slot to shard `to`: gw_slots, found beside self (the
 * path gw_crash runs as), with a grace of 1,000 ms; false if gw_slots is not there. */
bool shards_move_cmd(const char *self, const char *url, const char *gid, unsigned to, char *cmd,
                     size_t n);
/* The write pause gw_slots printed in log ("write pause: N ms"): N, or -1 if none. */
long shards_move_pause(const char *log);

#endif
