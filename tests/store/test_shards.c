/*
 * Shards (store.h, "Shards"): one store over several PostgreSQL databases by hash slots.
 * Each group lives whole on its slot's shard, a user's groups are read from every shard,
 * acks and last_seen are split by slot, a shard that fails stalls only its own groups,
 * the slot map is watched (a file, and etcd), and a fenced slot's writes are refused
 * until the fence goes. PostgreSQL pass only: the suite's server holds the shards'
 * databases; the failing shard is a server of the test's own.
 */
#include "fixture.h"
#include "fixture_feed.h"
#include "pgfx.h"
#include "trun.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------------------- */

/* A folder of the test's own (fx_tmpdir gives a database in this pass). */
static char *local_dir(void)
{
    const char *base = getenv("TMPDIR");
    char buf[512];
    snprintf(buf, sizeof(buf), "%s/gw-shards-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(buf));
    return strdup(buf);
}

/* The map's path (after "shards:"). */
static const char *map_path(const char *url)
{
    return url + 7;
}

/* Shard i's URL as the map file names it (static buffer). */
static const char *shard_url(const char *url, unsigned want)
{
    static char u[900];
    FILE *f = fopen(map_path(url), "r");
    cr_assert_not_null(f);
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned i;
        found = sscanf(line, "shard %u %899s", &i, u) == 2 && i == want;
    }
    fclose(f);
    cr_assert(found, "no shard %u in %s", want, url);
    return u;
}

/* The shard of a group in a map that splits the slots in two halves. */
static unsigned half_of(const char *gid)
{
    return st_slot_of(st_id_str(gid)) < ST_SLOTS / 2 ? 0 : 1;
}

/* A gid of the given half: "<prefix><n>" with the least n that lands there. */
static void gid_in(unsigned half, const char *prefix, int from, char *out, size_t n)
{
    for (int i = from;; i++) {
        snprintf(out, n, "%s%d", prefix, i);
        if (half_of(out) == half)
            return;
    }
}

static int64_t rows_of(const char *shard, const char *table, const char *gid)
{
    char sql[300];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM gw.%s WHERE gid = '%s'", table, gid);
    return pgfx_scalar(shard, sql);
}

static void write_map(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(rename(tmp, path), 0);
}

/* An op submitted and waited for: its result. */
static int run_op(st_store *s, st_op *op)
{
    cr_assert_eq(fx_submit_wait(s, op), 0, "taken by the store");
    return op->result;
}

static st_stats stats_of(st_store *s)
{
    st_stats st;
    st_read_stats(s, &st);
    return st;
}

/* Waits (5 s at most) until the store's map is at version v. */
static void await_version(st_store *s, uint64_t v)
{
    for (int i = 0; i < 100 && stats_of(s).map_version != v; i++)
        usleep(50 * 1000);
    cr_assert_eq(stats_of(s).map_version, v, "the map's version %llu taken", (unsigned long long)v);
}

/* Most tests' start: 2 databases of the suite's server under a map that splits the slots
 * in halves (pgfx_shards_new), and a store over them; *url is the map's (malloc'd). */
static st_store *two_shards(char **url)
{
    PGFX_OWN_SHARDS();
    *url = pgfx_shards_new(2);
    return fx_open(*url, true);
}

/* ---- where rows live ----------------------------------------------------------------- */

Test(shards, each_group_lives_whole_on_its_slots_shard, .timeout = 60)
{
    char *url;
    st_store *s = two_shards(&url);
    cr_assert_str_eq(st_backend_name(s), "postgres");
    unsigned on[2] = {0, 0};
    for (int i = 0; i < 40; i++) {
        char g[32], cid[32];
        snprintf(g, sizeof(g), "room%d", i);
        fx_join(s, g, "alice");
        snprintf(cid, sizeof(cid), "c%d", i);
        cr_assert_eq(fx_append(s, g, "alice", cid), 1);
        on[half_of(g)]++;
    }
    cr_assert(on[0] > 5 && on[1] > 5, "the slots spread the groups: %u and %u", on[0], on[1]);
    for (int i = 0; i < 40; i++) {
        char g[32];
        snprintf(g, sizeof(g), "room%d", i);
        unsigned home = half_of(g);
        static const char *const tables[] = {"groups", "members", "msgs", "sends"};
        for (size_t t = 0; t < 4; t++) {
            cr_assert_eq(rows_of(shard_url(url, home), tables[t], g), 1, "%s of %s at home",
                         tables[t], g);
            cr_assert_eq(rows_of(shard_url(url, 1 - home), tables[t], g), 0,
                         "%s of %s not on the other shard", tables[t], g);
        }
    }
    st_stats st = stats_of(s);
    cr_assert_eq(st.shards, 2);
    cr_assert_eq(st.map_version, 1);
    cr_assert_eq(st.groups, 40, "groups summed over the shards");
    cr_assert_eq(st.messages, 40);
    cr_assert(st.writable && st.connected);
    st_close(s);
    fx_rmtree(url);
    free(url);
}

Test(shards, a_users_groups_acks_and_last_seen_come_from_every_shard, .timeout = 60)
{
    char *url;
    st_store *s = two_shards(&url);
    enum { N = 50 };
    static char gids[N][32];
    st_ack acks[N];
    for (int i = 0; i < N; i++) {
        snprintf(gids[i], sizeof(gids[i]), "g%d", i);
        fx_join(s, gids[i], "bob");
        fx_append_n(s, gids[i], "bob", gids[i], 0, 3);
        acks[i] = (st_ack){.gid = st_id_str(gids[i]), .uid = st_id_str("bob"), .mid = 1 + (i % 3)};
    }
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, acks, N, &applied), 0);
    cr_assert_eq(applied, N, "every ack, on whichever shard, moved its cursor");
    for (int i = 0; i < N; i++) {
        st_user_group g = fx_user_group(s, "bob", gids[i]);
        cr_assert_eq(g.last_mid, 3);
        cr_assert_eq(g.unread, 3 - (1 + (uint64_t)(i % 3)), "%s", gids[i]);
    }
    st_op rg = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str("bob")};
    cr_assert_eq(run_op(s, &rg), 0);
    cr_assert_eq(st_groups_count(rg.groups), N, "one list, merged, each group once");
    st_groups_free(rg.groups);

    /* last_seen and the not-before: a user's own, on the user's shard. */
    static st_seen seen[20];
    static char uids[20][16];
    for (int i = 0; i < 20; i++) {
        snprintf(uids[i], sizeof(uids[i]), "u%d", i);
        seen[i] = (st_seen){.uid = st_id_str(uids[i]), .ms = 1000 + (uint64_t)i};
    }
    st_op so = {.kind = ST_OP_SEEN, .seen = seen, .n_seen = 20};
    cr_assert_eq(run_op(s, &so), 0);
    for (int i = 0; i < 20; i++)
        seen[i].ms = 0;
    st_op rs = {.kind = ST_OP_READ_SEEN, .seen = seen, .n_seen = 20};
    cr_assert_eq(run_op(s, &rs), 0);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(seen[i].ms, 1000 + (uint64_t)i, "%s's last_seen, back in its place", uids[i]);
    uint64_t nbf = 0, read_back = 0;
    cr_assert_eq(st_signout_sync(s, st_id_str("bob"), &nbf), 0);
    cr_assert(nbf > 0);
    cr_assert_eq(st_read_not_before(s, st_id_str("bob"), &read_back), 0);
    cr_assert_eq(read_back, nbf, "the not-before, read with the groups from every shard");
    st_close(s);
    fx_rmtree(url);
    free(url);
}

/* The passes over every group (the unread webhook's, retention's) page through the
 * shards' groups merged in gid order: each group once, whatever the page size. */
Test(shards, a_pass_over_every_group_sees_each_once, .timeout = 60)
{
    char *url;
    st_store *s = two_shards(&url);
    uint64_t t0 = (uint64_t)time(NULL) * 1000 - 1000;
    enum { N = 23 };
    for (int i = 0; i < N; i++) {
        char g[32];
        snprintf(g, sizeof(g), "p%02d", i);
        fx_join(s, g, "carol");
        fx_append(s, g, "carol", g);
    }
    for (size_t limit = 1; limit <= 7; limit += 3) {
        int seen[N] = {0};
        char after[64] = "";
        for (int page = 0; page < 100; page++) {
            st_op op = {.kind = ST_OP_READ_UNSWEPT,
                        .from = t0,
                        .upto = t0 + 3600 * 1000,
                        .gid = st_id_str(after),
                        .limit = limit};
            if (!*after)
                op.gid = (st_id){NULL, 0};
            cr_assert_eq(run_op(s, &op), 0);
            cr_assert(st_list_count(op.list) <= limit, "a page holds at most its limit");
            for (size_t i = 0; i < st_list_count(op.list); i++) {
                const st_item *it = st_list_at(op.list, i);
                int n = atoi(it->gid.p + 1);
                cr_assert(n >= 0 && n < N);
                seen[n]++;
            }
            bool more = st_list_more(op.list);
            st_id a = st_list_after(op.list);
            snprintf(after, sizeof(after), "%.*s", (int)a.n, a.p);
            st_list_free(op.list);
            if (!more)
                break;
        }
        for (int i = 0; i < N; i++)
            cr_assert_eq(seen[i], 1, "p%02d listed %d times at limit %zu", i, seen[i], limit);
    }
    st_close(s);
    fx_rmtree(url);
    free(url);
}

/* ---- failure of one shard ----------------------------------------------------------- */

Test(shards, a_shard_that_fails_stalls_only_its_own_groups, .timeout = 120)
{
    PGFX_OWN_SHARDS();
    pgfx_server one;
    pgfx_server_start(&one);
    char *db0 = pgfx_db_new(), *db1 = pgfx_server_db_new(&one);
    char *dir = local_dir();
    char path[600], text[2400], url[620];
    snprintf(path, sizeof(path), "%s/slots.map", dir);
    snprintf(text, sizeof(text),
             "version 1\nshard 0 %s\nshard 1 %s\nslots 0-2047 0\nslots 2048-4095 1\n", db0, db1);
    write_map(path, text);
    snprintf(url, sizeof(url), "shards:%s", path);
    st_store *s = fx_open(url, true);
    char g0[32], g1[32];
    gid_in(0, "h", 0, g0, sizeof(g0));
    gid_in(1, "h", 0, g1, sizeof(g1));
    fx_join(s, g0, "dave");
    fx_join(s, g1, "dave");
    fx_append(s, g1, "dave", "before");
    char u0[32], u1[32]; /* users whose own rows (the not-before) are on shard 0, and 1 */
    gid_in(0, "u", 0, u0, sizeof(u0));
    gid_in(1, "u", 0, u1, sizeof(u1));
    const char *both[] = {u0, u1};
    for (int i = 0; i < 2; i++) {
        fx_join(s, g0, both[i]);
        fx_join(s, g1, both[i]);
    }

    pgfx_server_stop(&one); /* shard 1 goes away */
    uint64_t mid = 0;
    int rc = 0;
    for (int i = 0;
         i < 100 && (rc = st_append_sync(s, st_id_str(g1), st_id_str("dave"), st_id_str("away"),
                                         "x", 1, &mid, NULL, NULL)) == 0;
         i++)
        usleep(50 * 1000);
    cr_assert_eq(rc, ST_EIO, "shard 1's groups refuse while it is away");
    for (int i = 0; i < 20; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "ok%d", i);
        cr_assert_eq(fx_append(s, g0, "dave", cid), (uint64_t)i + 1,
                     "shard 0's groups confirm throughout");
    }
    st_stats st = stats_of(s);
    cr_assert(st.writable && st_writable(s), "writable while a shard is: its groups go on");
    cr_assert_eq(st.shards_unwritable, 1, "and says that one shard does not take writes");
    char err[600];
    st_write_error(s, err, sizeof(err));
    cr_assert(strstr(err, "shard 1: "), "which shard, and why: %s", err);
    st_op rg = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str("dave")};
    cr_assert_eq(run_op(s, &rg), ST_EIO, "a user's groups are not read in part");
    /* ... unless the caller takes a part (a sign-in) and the user's own shard answers. */
    rg = (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u0), .partial_ok = true};
    cr_assert_eq(run_op(s, &rg), 0, "the groups of the shards that answered");
    cr_assert_eq(rg.shards_away, 1);
    cr_assert_eq(st_groups_count(rg.groups), 1);
    const st_user_group *ug = st_groups_at(rg.groups, 0);
    cr_assert(ug->gid.n == strlen(g0) && !memcmp(ug->gid.p, g0, ug->gid.n), "only %s", g0);
    st_groups_free(rg.groups);
    rg = (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u1), .partial_ok = true};
    cr_assert_eq(run_op(s, &rg), ST_EIO, "not without the user's own shard (its not-before)");

    pgfx_server_restart(&one);
    for (int i = 0; i < 300 && stats_of(s).shards_unwritable; i++)
        usleep(100 * 1000);
    cr_assert_eq(stats_of(s).shards_unwritable, 0, "shard 1 recovered");
    cr_assert_eq(st_append_sync(s, st_id_str(g1), st_id_str("dave"), st_id_str("away"), "x", 1,
                                &mid, NULL, NULL),
                 0);
    cr_assert_eq(mid, 2, "dense after the failure");
    cr_assert_eq(fx_user_group(s, "dave", g0).last_mid, 20);
    rg = (st_op){.kind = ST_OP_READ_GROUPS, .uid = st_id_str(u1), .partial_ok = true};
    cr_assert_eq(run_op(s, &rg), 0);
    cr_assert_eq(rg.shards_away, 0, "whole again");
    cr_assert_eq(st_groups_count(rg.groups), 2);
    st_groups_free(rg.groups);
    st_close(s);
    pgfx_db_drop(db0);
    free(db0);
    free(db1);
    pgfx_server_cleanup(&one);
    fx_rmtree(dir);
    free(dir);
}

/* ---- the map ---------------------------------------------------------------------- */

Test(shards, the_map_is_watched_and_only_moves_forward, .timeout = 60)
{
    char *url;
    st_store *s = two_shards(&url);
    char u0[900], u1[900], text[2400];
    snprintf(u0, sizeof(u0), "%s", shard_url(url, 0));
    snprintf(u1, sizeof(u1), "%s", shard_url(url, 1));
    /* A group of slot 0's half, whose slot goes to shard 1 in version 2 (no rows are moved
     * here: the group is new after the change). */
    char g[32];
    gid_in(0, "w", 0, g, sizeof(g));
    unsigned slot = st_slot_of(st_id_str(g));
    snprintf(text, sizeof(text),
             "version 2\nshard 0 %s\nshard 1 %s\nslots 0-%u 0\nslots %u-%u 1\nslots %u-4095 0\n",
             u0, u1, slot - 1, slot, slot, slot + 1);
    cr_assert(slot > 0 && slot + 1 < ST_SLOTS / 2);
    write_map(map_path(url), text);
    await_version(s, 2);
    fx_join(s, g, "erin");
    cr_assert_eq(rows_of(u1, "groups", g), 1, "the group made where version 2 says");
    cr_assert_eq(rows_of(u0, "groups", g), 0);

    /* An older version, and a malformed map: the one in force stays. */
    snprintf(text, sizeof(text), "version 1\nshard 0 %s\nshard 1 %s\nslots 0-4095 0\n", u0, u1);
    write_map(map_path(url), text);
    write_map(map_path(url), "version 3\nshard 0 nonsense\n");
    usleep(1500 * 1000);
    cr_assert_eq(stats_of(s).map_version, 2);
    cr_assert_eq(stats_of(s).map_reloads, 2, "the first read, then version 2");
    st_close(s);
    snprintf(text, sizeof(text), "version 1\nshard 0 %s\nshard 1 %s\nslots 0-4095 0\n", u0, u1);
    write_map(map_path(url), text); /* what fx_rmtree drops */
    fx_rmtree(url);
    free(url);
}

Test(shards, a_malformed_map_is_refused_with_its_line)
{
    char *dir = local_dir();
    char path[600], url[620], err[600];
    snprintf(path, sizeof(path), "%s/bad.map", dir);
    snprintf(url, sizeof(url), "shards:%s", path);
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"version 1\nshard 0 postgresql://x/y\nslots 0-4094 0\n", "a slot belongs to no shard"},
        {"version 1\nshard 0 postgresql://x/y\nslots 0-4095 0\nslots 7 0\n",
         "line 4: a slot is given twice"},
        {"version 1\nshard 0 mysql://x/y\nslots 0-4095 0\n",
         "line 2: a shard's URL is a PostgreSQL URI"},
        {"shard 0 postgresql://x/y\nslots 0-4095 0\n", "no version line"},
        {"version 1\nshard 0 postgresql://x/y\nslots 0-4095 1\n", "a shard the map does not name"},
        {"version 1\nshard 1 postgresql://x/y\nslots 0-4095 1\n", "without a gap"},
        {"version 1\nhello\n", "line 2: not a line of a slot map"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_map(path, cases[i].text);
        st_options o;
        st_options_init(&o);
        o.url = url;
        st_store *s = NULL;
        err[0] = 0;
        cr_assert_neq(st_open(&o, &s, err, sizeof(err)), 0, "case %zu opened", i);
        cr_assert_null(s);
        cr_assert(strstr(err, cases[i].says), "case %zu: %s", i, err);
    }
    st_options o;
    st_options_init(&o);
    o.url = "shards:/nonexistent/slots.map";
    st_store *s = NULL;
    cr_assert_eq(st_open(&o, &s, err, sizeof(err)), ST_EIO);
    cr_assert(strstr(err, "cannot open it"), "%s", err);
    fx_rmtree(dir);
    free(dir);
}

/* The map kept in etcd, as on real machines: read, watched, and moved forward by the
 * compare-and-swap the tools use. One etcd member of the test's own, stopped by the
 * test's .fini also when an assertion ends the test first. */
static pid_t etcd = -1;

static void etcd_stop(void)
{
    if (etcd > 0) {
        kill(etcd, SIGTERM);
        waitpid(etcd, NULL, 0);
        etcd = -1;
    }
}

Test(shards, the_map_in_etcd_is_read_watched_and_swapped, .fini = etcd_stop, .timeout = 90)
{
    PGFX_OWN_SHARDS();
    char *url = pgfx_shards_new(2);
    char *dir = local_dir();
    char port[16];
    cr_assert_eq(trun(port, sizeof(port), "%s/tools/pg_server.sh free-port", GW_SOURCE_DIR), 0);
    port[strcspn(port, "\n")] = 0;
    etcd = fork();
    if (etcd == 0) {
        char data[700], client[64];
        snprintf(data, sizeof(data), "%s/etcd", dir);
        snprintf(client, sizeof(client), "http://127.0.0.1:%s", port);
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execlp("etcd", "etcd", "--data-dir", data, "--listen-client-urls", client,
               "--advertise-client-urls", client, "--listen-peer-urls", "http://127.0.0.1:0",
               "--log-level", "error", (char *)NULL);
        _exit(127);
    }
    char cmd[2000], eurl[200];
    snprintf(cmd, sizeof(cmd),
             "for i in $(seq 100); do ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:%s put "
             "/gw/slots <'%s' >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1",
             port, map_path(url));
    cr_assert_eq(system(cmd), 0, "etcd took the map (is Debian's etcd-server installed?)");
    snprintf(eurl, sizeof(eurl), "etcd://127.0.0.1:%s/gw/slots", port);
    st_store *s = fx_open(eurl, true);
    cr_assert(strstr(st_where(s), "etcd://127.0.0.1:"), "%s", st_where(s));
    fx_join(s, "e1", "frank");
    cr_assert_eq(fx_append(s, "e1", "frank", "c1"), 1);

    st_slot_map *m = NULL;
    char why[512];
    cr_assert_eq(st_slot_map_read(eurl, &m, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(st_slot_map_version(m), 1);
    cr_assert_eq(st_slot_map_shards(m), 2);
    cr_assert_eq(st_slot_map_owner(m, 4095), 1);
    /* Slots nobody uses here (the group e1's is elsewhere) go to shard 0. */
    unsigned e1 = st_slot_of(st_id_str("e1")), a = e1 == 4095 ? 4000 : 4095;
    int mv = st_slot_map_move(eurl, m, a, a, 0, NULL, why, sizeof(why));
    cr_assert_eq(mv, 0, "%d %s", mv, why);
    await_version(s, 2);
    /* The same old map again: another version came meanwhile. */
    cr_assert_eq(st_slot_map_move(eurl, m, a, a, 1, NULL, why, sizeof(why)), ST_ESTALE);
    st_slot_map_free(m);
    cr_assert_eq(st_slot_map_read(eurl, &m, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(st_slot_map_version(m), 2);
    cr_assert_eq(st_slot_map_owner(m, a), 0);
    st_slot_map_free(m);
    cr_assert_eq(fx_append(s, "e1", "frank", "c2"), 2);
    st_close(s);
    etcd_stop();
    fx_rmtree(url);
    free(url);
    fx_rmtree(dir);
    free(dir);
}

/* ---- fences ---------------------------------------------------------------------------- */

/* A slot fenced on its shard (as a move does): its writes are refused (unavailable,
 * retried by the clients), the other slots' go on, and once the fence goes they are
 * taken again. */
Test(shards, a_fenced_slot_refuses_its_writes_until_the_fence_goes, .timeout = 60)
{
    char *url;
    st_store *s = two_shards(&url);
    char gf[32], go[32], sql[200];
    gid_in(0, "f", 0, gf, sizeof(gf));
    for (int i = 0;; i++) { /* another group of shard 0, of another slot */
        gid_in(0, "o", i, go, sizeof(go));
        if (st_slot_of(st_id_str(go)) != st_slot_of(st_id_str(gf)))
            break;
    }
    fx_join(s, gf, "gina");
    fx_join(s, go, "gina");
    const char *u0 = shard_url(url, 0);
    snprintf(sql, sizeof(sql), "INSERT INTO gw.fence VALUES (%u, 'moving', 0)",
             st_slot_of(st_id_str(gf)));
    pgfx_scalar(u0, sql);
    uint64_t mid = 0;
    cr_assert_eq(st_append_sync(s, st_id_str(gf), st_id_str("gina"), st_id_str("c1"), "x", 1, &mid,
                                NULL, NULL),
                 ST_EIO, "a fenced slot's write is refused");
    /* In one batch with a fenced one, the others commit. */
    st_op ops[2] = {
        {.kind = ST_OP_APPEND,
         .gid = st_id_str(gf),
         .uid = st_id_str("gina"),
         .cid = st_id_str("c2"),
         .record = "y",
         .record_n = 1},
        {.kind = ST_OP_APPEND,
         .gid = st_id_str(go),
         .uid = st_id_str("gina"),
         .cid = st_id_str("c3"),
         .record = "z",
         .record_n = 1},
    };
    fx_run_all(s, ops, 2);
    cr_assert_eq(ops[0].result, ST_EIO);
    cr_assert_eq(ops[1].result, 0);
    cr_assert_eq(ops[1].mid, 1);
    cr_assert(st_writable(s), "a fence is no failure of the store");
    cr_assert(stats_of(s).moved >= 2, "refused writes counted: %llu",
              (unsigned long long)stats_of(s).moved);
    /* A group deletion of the slot is refused too; an erasure waits for the move. */
    st_op del = {.kind = ST_OP_DELETE_GROUP, .gid = st_id_str(gf)};
    cr_assert_eq(run_op(s, &del), ST_EIO);
    st_list_free(del.list);
    st_op er = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("gina"), .record = "t", .record_n = 1};
    cr_assert_eq(run_op(s, &er), ST_EIO, "no erasure while a move is under way");
    st_list_free(er.list);
    st_list_free(er.changed);
    /* So is a retention setting of the group (it would stay behind on the old shard). */
    st_op keep = {.kind = ST_OP_RETAIN, .gid = st_id_str(gf), .retain = {.messages = 5}};
    cr_assert_eq(run_op(s, &keep), ST_EIO, "no retention setting of a fenced slot");
    keep.result = 0;
    keep.gid = st_id_str(go);
    cr_assert_eq(run_op(s, &keep), 0, "another slot's is taken");
    cr_assert_eq(rows_of(u0, "msgs", gf), 0, "nothing of the fenced slot stored");

    pgfx_scalar(u0, "DELETE FROM gw.fence");
    int rc = ST_EIO;
    for (int i = 0; i < 100 && rc != 0; i++) {
        rc = st_append_sync(s, st_id_str(gf), st_id_str("gina"), st_id_str("c1"), "x", 1, &mid,
                            NULL, NULL);
        if (rc)
            usleep(100 * 1000);
    }
    cr_assert_eq(rc, 0, "taken again once the fence is gone");
    cr_assert_eq(mid, 1, "dense: nothing of the refused writes was stored");
    keep.gid = st_id_str(gf);
    cr_assert_eq(run_op(s, &keep), 0, "the retention setting taken once the fence is gone");
    snprintf(sql, sizeof(sql), "SELECT keep_msgs FROM gw.groups WHERE gid = '%s'", gf);
    cr_assert_eq(pgfx_scalar(u0, sql), 5);
    st_close(s);
    fx_rmtree(url);
    free(url);
}

/* ---- two nodes ---------------------------------------------------------------------- */

Test(shards, two_nodes_hear_each_other_on_every_shard, .timeout = 60)
{
    PGFX_OWN_SHARDS();
    static fx_heard h = FX_HEARD_INIT(FX_KIND(ST_CH_MSG));
    char *url = pgfx_shards_new(2);
    st_store *b = fx_open_listening(url, &h, "shards-b");
    st_store *a = fx_open(url, true);
    cr_assert_neq(st_origin(a), st_origin(b));
    char g0[32], g1[32];
    gid_in(0, "n", 0, g0, sizeof(g0));
    gid_in(1, "n", 0, g1, sizeof(g1));
    fx_join(a, g0, "hal");
    fx_join(a, g1, "hal");
    fx_append(a, g0, "hal", "m0");
    fx_append(a, g1, "hal", "m1");
    fx_append(b, g0, "hal", "mine"); /* b's own: not handed back to it */
    fx_heard_await(&h, 2);
    usleep(300 * 1000);
    cr_assert_eq(fx_heard_count(&h), 2, "each of a's messages once, none of b's own");
    bool got[2] = {false, false};
    for (size_t i = 0; i < 2; i++)
        got[strcmp(h.ch[i].gid, g0) == 0 ? 0 : 1] = true;
    cr_assert(got[0] && got[1], "heard from both shards");
    st_close(a);
    st_close(b);
    fx_rmtree(url);
    free(url);
}
