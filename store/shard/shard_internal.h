/*
 * Private to store/shard/: the slot map, where it is kept, and the router's state.
 */
#ifndef GW_SHARD_INTERNAL_H
#define GW_SHARD_INTERNAL_H

#include "st_shard.h"

#include <pthread.h>
#include <stdatomic.h>

#define SH_MAX 64u /* shards a map may name */

/* ---- the map (shard_map.c) ----------------------------------------------------------- */

typedef struct sh_map {
    uint64_t version;
    unsigned n;              /* shards: 0 .. n - 1 */
    char *url[SH_MAX];       /* owned */
    uint8_t owner[ST_SLOTS]; /* each slot's shard */
} sh_map;

/* Parses the map's text (n bytes; store.h, "Shards"): 0, or ST_EINVAL with why (the line
 * and what is wrong). Every slot must be given exactly once, to a shard the map names. On
 * success *m holds it (free with sh_map_free); on failure *m is empty. */
int sh_map_parse(const char *text, size_t n, sh_map *m, char *why, size_t why_len);
void sh_map_free(sh_map *m);
/* The map as text that sh_map_parse reads back (malloc'd), or NULL. */
char *sh_map_text(const sh_map *m);

/* ---- where the map is kept (shard_source.c) ------------------------------------------ */

typedef struct sh_source sh_source;

/* From a store URL: shards:PATH, or etcd://HOST:PORT[,HOST:PORT...]/KEY. ST_EINVAL (why)
 * for anything else; ST_ENOMEM. */
int sh_source_new(const char *url, sh_source **out, char *why, size_t why_len);
void sh_source_free(sh_source *s);
/* The map's text as kept now (*text malloc'd, NUL-terminated, the caller's): 0, or ST_EIO
 * (why: the file or every etcd member could not be read, or the key is absent). */
int sh_source_read(sh_source *s, char **text, size_t *n, char *why, size_t why_len);
/* Replaces the map's text with `text` if it is still `old` (etcd: one transaction comparing
 * the value; a file: read again and compared, then a new file renamed over it, fsynced).
 * 0, ST_ESTALE (it changed meanwhile), ST_EIO (why). */
int sh_source_swap(sh_source *s, const char *old, const char *text, char *why, size_t why_len);
/* For log lines: the file's path, or etcd's members and the key. */
const char *sh_source_where(const sh_source *s);

/* ---- the router (shard.c, shard_route.c) --------------------------------------------- */

typedef struct sh_router sh_router;

/* One shard: its core, and what the router's callbacks need to name it. */
typedef struct sh_shard {
    sh_router *r;
    unsigned index;
    st_store *core; /* NULL until opened (a shard the map named later) */
    char *url;      /* owned */
} sh_shard;

struct sh_router {
    const st_backend *be;
    st_options o; /* the caller's options; url and node point at copies below */
    char *url, *node;
    st_event_fn user_event;
    void *user_event_ud;
    st_change_fn user_change;
    void *user_change_ud;
    pthread_mutex_t cb_mu; /* one shard's callback at a time, as one store would call */

    sh_shard shard[SH_MAX];
    atomic_uint n_open;              /* shard[0 .. n_open - 1] have their core */
    _Atomic uint8_t owner[ST_SLOTS]; /* each slot's shard, as the map in force says */
    atomic_uint_fast64_t version, reloads;

    sh_source *src;
    char *text; /* the map's text in force */
    pthread_t watcher;
    pthread_mutex_t mu; /* the watcher's wait, and closing */
    pthread_cond_t cv;
    bool closing;
    atomic_bool watching; /* the watcher was started */
    char where[512];
};

/* The watcher's pause between two reads of the map (ms). */
#define SH_WATCH_MS 500u

/* The shard an id's slot belongs to now. */
static inline sh_shard *sh_of(sh_router *r, st_id id)
{
    return &r->shard[atomic_load_explicit(&r->owner[st_slot_of(id)], memory_order_relaxed)];
}

/* st_submit's work for the router (shard_route.c): to one shard, or split or asked of
 * every shard and merged. */
int sh_submit(void *r, st_op *op);

#endif
