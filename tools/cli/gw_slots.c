/*
 * gw_slots: a sharded store's slot map (store.h, "Shards") as an operator sees and changes
 * it: `show` (the shards and their slots), `move` (slots from one shard to another, online:
 * slots_move.c), `unfence` (the way out of a move that stopped with its fence in place).
 */
#include "slots.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f, "usage: gw_slots show --map URL [--groups]\n"
           "       gw_slots move --map URL --slots A-B --to I [--new-shard URL] [--grace-ms N]\n"
           "       gw_slots unfence --map URL --slots A-B\n"
           "The slot map of a sharded store: URL is the store's, shards:PATH or\n"
           "etcd://HOST:PORT[,HOST:PORT...]/KEY. A group lives in slot st_slot_of(gid) (0..4095),\n"
           "a user's own rows in the slot of the uid. Databases are named host:port/db, never\n"
           "with their user or password.\n"
           "\n"
           "show: the map's version, each shard with its slots, and with --groups the groups\n"
           "  stored on each and the fences there (a move's: 'moving', then 'gone').\n"
           "\n"
           "move: slots A..B, all of one shard X, go to shard I (--to I), or to a new shard\n"
           "  (--new-shard URL: it becomes shard <number of shards>; --to may be left out).\n"
           "  The gateways keep running: the slots' writes are refused on X from step 3 to the\n"
           "  bump (the clients are told `unavailable` and retry), their reads never stop.\n"
           "  The messages are copied in two phases, so that the pause grows with what the\n"
           "  slots take during the move, not with their messages (but for step 4's count).\n"
           "  Each step is a line with the ms since start:\n"
           "  1 schema    X and I opened once as shards: a new database gets the schema\n"
           "  2 pre-copy  X still taking writes: the slots' messages (and their sends) as X has\n"
           "              them now copied to I in one transaction (what I had of the slots'\n"
           "              keys replaced); unused there until the bump; then catch-up\n"
           "              passes copy what the slots' groups took since, while a pass\n"
           "              copies more than 1,000 messages (3 at most), and a vacuum on I\n"
           "              makes step 4's count of the copies quick\n"
           "  3 fence     on X the slots are fenced ('moving'), once X's writes under way end\n"
           "              (it waits at most 5 s for them)\n"
           "  4 copy      in one transaction on I: the groups, members, reactions, users, tells\n"
           "              copied again in full, of the messages and sends only what came or\n"
           "              changed since step 2 (new, edited, recalled, reacted, trimmed); the\n"
           "              rows per table are printed, and checked equal on X and I\n"
           "  5 bump      the map's next version gives the slots to I, if nobody changed it\n"
           "              meanwhile; `write pause: N ms` is step 3's commit to here (each node\n"
           "              takes the new map within 0.5 s more)\n"
           "  6 gone      X's fences become 'gone'; after --grace-ms (default 5000: nodes whose\n"
           "              map is behind may still read X) the rows left on X are deleted\n"
           "  A failure before the bump undoes the move (the fence lifted, the copies deleted)\n"
           "  and exits 1 with the reason; a map changed meanwhile exits 3 with the fence kept:\n"
           "  run the same move again, or unfence. Anything that could not be undone is said,\n"
           "  with what to run.\n"
           "\n"
           "unfence: lifts the fences of slots A..B on the shard the map gives them to.\n"
           "\n"
           "Exit: 0 done, 1 failed (undone, or as said), 2 bad arguments or refused, 3 map\n"
           "changed (fence kept), 4 moved but the rows left on X not deleted (as said).\n");
}

static int parse_slots(const char *s, unsigned *a, unsigned *b)
{
    char *end;
    unsigned long x = strtoul(s, &end, 10), y = x;
    if (end == s)
        return -1;
    if (*end == '-') {
        const char *t = end + 1;
        y = strtoul(t, &end, 10);
        if (end == t)
            return -1;
    }
    if (*end || x > y || y >= ST_SLOTS)
        return -1;
    *a = (unsigned)x;
    *b = (unsigned)y;
    return 0;
}

/* "0-1023 2048-2050" (at most a few ranges, then "..."). */
static unsigned slot_ranges(const st_slot_map *m, unsigned shard, char *out, size_t n)
{
    unsigned count = 0, ranges = 0;
    size_t len = 0;
    out[0] = 0;
    for (unsigned s = 0; s < ST_SLOTS; s++) {
        if (st_slot_map_owner(m, s) != shard)
            continue;
        unsigned e = s;
        while (e + 1 < ST_SLOTS && st_slot_map_owner(m, e + 1) == shard)
            e++;
        count += e - s + 1;
        if (++ranges <= 6 && len < n)
            len += (size_t)snprintf(out + len, n - len, "%s%u-%u", len ? " " : "", s, e);
        else if (ranges == 7 && len < n)
            len += (size_t)snprintf(out + len, n - len, " ...");
        s = e;
    }
    return count;
}

static int show(const char *map_url, bool groups)
{
    st_slot_map *m = NULL;
    char why[600] = "";
    int rc = st_slot_map_read(map_url, &m, why, sizeof(why));
    if (rc != ST_OK) {
        fprintf(stderr, "gw_slots: %s: %s\n", st_strerror(rc), why);
        return 1;
    }
    printf("map version %" PRIu64 ", %u shards\n", st_slot_map_version(m), st_slot_map_shards(m));
    int failed = 0;
    for (unsigned i = 0; i < st_slot_map_shards(m); i++) {
        char name[300], ranges[200];
        sl_url_name(st_slot_map_url(m, i), name, sizeof(name));
        unsigned n = slot_ranges(m, i, ranges, sizeof(ranges));
        printf("shard %u %s: %u slots%s%s\n", i, name, n, n ? ": " : "", ranges);
        if (!groups)
            continue;
        PGconn *c = NULL;
        int64_t g = 0, moving = 0, gone = 0;
        if ((rc = sl_connect(st_slot_map_url(m, i), &c, why, sizeof(why))) == ST_OK &&
            (rc = sl_scalar(c, "SELECT count(*) FROM gw.groups", &g, why, sizeof(why))) == ST_OK &&
            (rc = sl_scalar(c, "SELECT count(*) FROM gw.fence WHERE state = 'moving'", &moving, why,
                            sizeof(why))) == ST_OK &&
            (rc = sl_scalar(c, "SELECT count(*) FROM gw.fence WHERE state = 'gone'", &gone, why,
                            sizeof(why))) == ST_OK)
            printf("  %" PRId64 " groups stored; fences: %" PRId64 " moving, %" PRId64 " gone\n", g,
                   moving, gone);
        else {
            printf("  (not read: %s)\n", why);
            failed = 1;
        }
        PQfinish(c);
    }
    st_slot_map_free(m);
    return failed;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"map", required_argument, 0, 'm'},      {"slots", required_argument, 0, 's'},
        {"to", required_argument, 0, 't'},       {"new-shard", required_argument, 0, 'n'},
        {"grace-ms", required_argument, 0, 'g'}, {"groups", no_argument, 0, 'G'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    sl_move mv = {.grace_ms = 5000, .to = ~0u};
    bool have_slots = false, groups = false;
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'm': mv.map_url = optarg; break;
        case 's':
            if (parse_slots(optarg, &mv.a, &mv.b) != 0) {
                fprintf(stderr, "gw_slots: --slots %s: A-B (or A), slots of 0..4095, A <= B\n",
                        optarg);
                return 2;
            }
            have_slots = true;
            break;
        case 't': mv.to = (unsigned)strtoul(optarg, &end, 10); break;
        case 'n': mv.new_url = optarg; break;
        case 'g': mv.grace_ms = strtoull(optarg, &end, 10); break;
        case 'G': groups = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (end && (*end || end == optarg)) {
            fprintf(stderr, "gw_slots: %s: not a number\n", optarg);
            return 2;
        }
    }
    if (!mv.map_url) {
        fprintf(stderr, "gw_slots: --map URL is needed (the store's shards:PATH or etcd://...)\n");
        return 2;
    }
    if (strcmp(cmd, "show") == 0)
        return show(mv.map_url, groups);
    if (strcmp(cmd, "move") != 0 && strcmp(cmd, "unfence") != 0) {
        fprintf(stderr, "gw_slots: %s: not a command (show, move, unfence; --help)\n", cmd);
        return 2;
    }
    if (!have_slots) {
        fprintf(stderr, "gw_slots %s: --slots A-B is needed\n", cmd);
        return 2;
    }
    char why[1000] = "";
    if (strcmp(cmd, "unfence") == 0) {
        int rc = sl_unfence(mv.map_url, mv.a, mv.b, why, sizeof(why));
        if (rc != ST_OK)
            fprintf(stderr, "gw_slots unfence: %s\n", why);
        return rc == ST_OK ? 0 : rc == ST_EINVAL ? 2 : 1;
    }
    if (mv.to == ~0u && mv.new_url) {
        st_slot_map *m = NULL;
        if (st_slot_map_read(mv.map_url, &m, why, sizeof(why)) == ST_OK)
            mv.to = st_slot_map_shards(m);
        st_slot_map_free(m);
    }
    if (mv.to == ~0u) {
        fprintf(stderr, "gw_slots move: --to I is needed (or --new-shard URL)\n");
        return 2;
    }
    int rc = sl_move_run(&mv, why, sizeof(why));
    if (rc == ST_OK) {
        sl_log("done: %zu groups of slots %u-%u moved to shard %u; write pause %" PRIu64 " ms",
               mv.groups, mv.a, mv.b, mv.to, mv.pause_ms);
        return 0;
    }
    fprintf(stderr, "gw_slots move: %s\n", why);
    return mv.made ? 4 : rc == ST_EINVAL ? 2 : rc == ST_ESTALE ? 3 : 1;
}
