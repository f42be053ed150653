#include "crash_shards.h"

#include "store.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static st_slot_map *map;
static char map_url[1024];

int shards_open(const char *url, char *why, size_t why_n)
{
    snprintf(map_url, sizeof(map_url), "%s", url);
    return shards_reload(why, why_n);
}

int shards_reload(char *why, size_t why_n)
{
    st_slot_map *m = NULL;
    int rc = st_slot_map_read(map_url, &m, why, why_n);
    if (rc != 0)
        return rc;
    st_slot_map_free(map);
    map = m;
    return 0;
}

void shards_close(void)
{
    st_slot_map_free(map);
    map = NULL;
}

unsigned shards_count(void)
{
    return st_slot_map_shards(map);
}

uint64_t shards_version(void)
{
    return st_slot_map_version(map);
}

int shards_pick(int per_shard, char (*gids)[SHARDS_GID_MAX], int max)
{
    unsigned k = shards_count();
    int want = (int)k * per_shard, n = 0;
    if (want > max)
        return -1;
    int *held = calloc(k, sizeof(*held));
    for (int i = 0; held && i < 100000 && n < want; i++) {
        char gid[SHARDS_GID_MAX];
        snprintf(gid, sizeof(gid), "crash-%d", i);
        unsigned s = shards_of(gid);
        if (held[s] >= per_shard)
            continue;
        /* Group per_shard * s + held[s]: a shard's groups side by side. */
        snprintf(gids[per_shard * (int)s + held[s]], SHARDS_GID_MAX, "%s", gid);
        held[s]++;
        n++;
    }
    free(held);
    return n == want ? n : -1;
}

unsigned shards_of(const char *gid)
{
    return st_slot_map_owner(map, st_slot_of(st_id_str(gid)));
}

unsigned shards_slot(const char *gid)
{
    return st_slot_of(st_id_str(gid));
}

const char *shards_db_of(unsigned shard)
{
    return st_slot_map_url(map, shard);
}

const char *shards_db(const char *gid)
{
    return shards_db_of(shards_of(gid));
}

/* ---- confirmations over a window ---------------------------------------------------- */

static struct {
    uint64_t count, gap_ms, last_ms;
} watched[SHARDS_MAX_GROUPS];
static int n_watched;
static bool watching;

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

void watch_start(int groups)
{
    uint64_t now = mono_ms();
    n_watched = groups < SHARDS_MAX_GROUPS ? groups : SHARDS_MAX_GROUPS;
    for (int g = 0; g < n_watched; g++)
        watched[g].count = watched[g].gap_ms = 0, watched[g].last_ms = now;
    watching = true;
}

void watch_confirmed(int group)
{
    if (!watching || group < 0 || group >= n_watched)
        return;
    uint64_t now = mono_ms();
    if (now - watched[group].last_ms > watched[group].gap_ms)
        watched[group].gap_ms = now - watched[group].last_ms;
    watched[group].last_ms = now;
    watched[group].count++;
}

void watch_stop(void)
{
    uint64_t now = mono_ms();
    for (int g = 0; g < n_watched; g++)
        if (now - watched[g].last_ms > watched[g].gap_ms)
            watched[g].gap_ms = now - watched[g].last_ms;
    watching = false;
}

uint64_t watch_count(int group)
{
    return watched[group].count;
}

uint64_t watch_gap_ms(int group)
{
    return watched[group].gap_ms;
}

/* ---- moves --------------------------------------------------------------------------- */

bool shards_move_cmd(const char *self, const char *url, const char *gid, unsigned to, char *cmd,
                     size_t n)
{
    char buf[1024], tool[1100];
    ssize_t got = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (got > 0)
        buf[got] = 0;
    else
        snprintf(buf, sizeof(buf), "%s", self);
    snprintf(tool, sizeof(tool), "%s/gw_slots", dirname(buf));
    if (access(tool, X_OK) != 0)
        return false;
    unsigned slot = shards_slot(gid);
    snprintf(cmd, n, "'%s' move --map '%s' --slots %u-%u --to %u --grace-ms 1000", tool, url, slot,
             slot, to);
    return true;
}

long shards_move_pause(const char *log)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return -1;
    char line[512];
    long pause = -1;
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "write pause: ");
        if (p)
            pause = strtol(p + strlen("write pause: "), NULL, 10);
    }
    fclose(f);
    return pause;
}
