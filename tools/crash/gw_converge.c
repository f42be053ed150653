/*
 * gw_converge: the convergence checker (docs/RELIABILITY.md, Convergence). Client
 * replicas (gwc_replica: they keep what they receive and follow the client rule) live
 * through random sends, edits, recalls and reactions made over their WebSockets,
 * messages and reactions of other people made through the API and those people then
 * erased (DELETE /users/{uid}), retention passes that move a group's horizon (PUT
 * /groups/{gid}/retention with a small count), replicas going offline for random spans,
 * gateway nodes killed with SIGKILL and, on PostgreSQL under Patroni, failovers of the
 * database. At the end every replica catches up, and its state of every group it holds
 * must equal the server's, read through the API message by message: version, body or
 * tombstone, cseq, reaction counts; and every message ever confirmed must be there
 * (above the horizon).
 *
 * It prints each catch-up (the changes it carried against the messages the replica held:
 * O(changes), not O(history)) and a last line of totals; it exits 0 only with 0
 * divergent replicas and 0 lost messages. --inject-skip-change makes one replica drop
 * one change (a recall), to show that the check catches it.
 *
 *   gw_converge --gw build/gw [--replicas 4] [--groups 3] [--ops 600] [--kills 3]
 *               [--seed N] [--time-limit S] [--retain-changes N] [--inject-skip-change]
 *               [--store URL [--nodes N] [--failovers F --ha-dir DIR]]
 */
#include "conv.h"
#include "gw_crash.h"
#include "gwc.h"
#include "gwc_replica.h"

#include <getopt.h>
#include <msgpack.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECRET "converge-checker-secret-0123456789"
#define API_KEY "converge-checker-api-key-0123456789"
#define MAX_REPLICAS 32
#define MAX_GROUPS 16
#define KEYS_N 5
#define RETAIN_GROUP 0 /* the group whose horizon retention moves */

static const char *const react_keys[KEYS_N] = {"\xf0\x9f\x91\x8d", "\xe2\x9d\xa4", "ok", "+1",
                                               "\xf0\x9f\x8e\x89"};

typedef struct replica {
    int i;
    char uid[16];
    gwc_conn *k;
    gwc_rep *rep;
    int node;
    bool up;              /* welcomed: requests may go out */
    uint64_t hello_at;    /* when the hello went out (a session not welcomed is retried) */
    uint64_t offline_til; /* taken offline on purpose until then */
    uint64_t connect_at;  /* without a session: when to connect again */
    uint64_t n;           /* its sends and versions, for cids and bodies */
    bool member[MAX_GROUPS];
} replica;

typedef struct opts {
    const char *gw, *store, *ha_dir;
    int replicas, groups, ops, kills, nodes, failovers, time_limit;
    unsigned seed;
    const char *retain_changes;
    bool inject;
} opts;

static opts o = {.replicas = 4, .groups = 3, .ops = 600, .kills = 3, .nodes = 1, .time_limit = 300};
static char dir[64], key_file[100], tools_dir[400];
static replica reps[MAX_REPLICAS];
static char gids[MAX_GROUPS][16];
static uint64_t t_start;

/* Figures. */
static uint64_t n_confirmed, n_kills, n_failovers, n_offline, n_erasures, n_retention, n_api_reacts,
    n_reacts, n_edits, n_recalls, n_refused, n_reconnects;
static uint64_t cu_n, cu_entries, cu_held, cu_gone, cu_rounds, cu_bytes, cu_max_entries;
static double cu_max_ratio; /* entries / held, of catch-ups holding >= 100 */

/* Confirmed messages: (group, mid), from `sent` and the API's answers. */
static uint64_t *conf_mid[MAX_GROUPS];
static size_t conf_n[MAX_GROUPS], conf_cap[MAX_GROUPS];

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void die(const char *fmt, ...)
{
    va_list ap;
    nodes_kill_all();
    va_start(ap, fmt);
    printf("gw_converge: FAILED: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(2);
}

static void on_signal(int sig)
{
    nodes_kill_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static pr_slice sl(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

static void confirm(int g, uint64_t mid)
{
    if (conf_n[g] == conf_cap[g]) {
        conf_cap[g] = conf_cap[g] ? 2 * conf_cap[g] : 1024;
        if (!(conf_mid[g] = realloc(conf_mid[g], conf_cap[g] * sizeof(uint64_t))))
            die("out of memory");
    }
    conf_mid[g][conf_n[g]++] = mid;
    n_confirmed++;
}

static int group_of(const char *gid)
{
    for (int g = 0; g < o.groups; g++)
        if (!strcmp(gids[g], gid))
            return g;
    return -1;
}

/* A live node, at random (-1: none). */
static int live_node(void)
{
    int live[MAX_NODES], n = 0;
    for (int d = 0; d < o.nodes; d++)
        if (node_up(d))
            live[n++] = d;
    return n ? live[rand() % n] : -1;
}

static int api_port(void)
{
    for (int d = 0; d < o.nodes; d++)
        if (node_up(d))
            return node_port(d);
    return 0;
}

/* --- catch-ups ------------------------------------------------------------------------ */

static bool quiet_catchups; /* the final catch-ups are counted, not printed one by one */

static void on_catchup(void *ud, const gwc_rep_catchup *c)
{
    replica *r = ud;
    cu_n++;
    cu_entries += c->entries;
    cu_held += c->held;
    cu_gone += c->gone;
    cu_rounds += c->rounds;
    cu_bytes += c->bytes;
    if (c->entries > cu_max_entries)
        cu_max_entries = c->entries;
    if (c->held >= 100 && (double)c->entries / (double)c->held > cu_max_ratio)
        cu_max_ratio = (double)c->entries / (double)c->held;
    if (!quiet_catchups)
        printf("gw_converge: catch-up %s %s: %llu changes in %llu round trips (%llu bytes), "
               "%llu messages held%s\n",
               r->uid, c->gid, (unsigned long long)c->entries, (unsigned long long)c->rounds,
               (unsigned long long)c->bytes, (unsigned long long)c->held,
               c->gone ? ", changes_gone_before: window paged again" : "");
}

/* --- sessions ------------------------------------------------------------------------- */

static msgpack_sbuffer sb;

static void send_sb(replica *r)
{
    if (r->k && sb.size)
        gwc_send(r->k, sb.data, sb.size);
    msgpack_sbuffer_clear(&sb);
}

static void disconnect(replica *r, uint64_t again_at)
{
    if (r->k)
        gwc_close(r->k);
    r->k = NULL;
    r->up = false;
    r->connect_at = again_at;
    gwc_rep_disconnected(r->rep);
}

static void connect_replica(gwc_ctx *ctx, replica *r)
{
    int d = live_node();
    if (d < 0)
        return;
    r->connect_at = now_ms() + 200;
    if (gwc_connect(ctx, node_url(d), 2000, &r->k)) {
        r->k = NULL;
        return;
    }
    r->node = d;
    char *tok = NULL;
    if (gwc_token_mint(SECRET, strlen(SECRET), r->uid, time(NULL) + 7200, NULL, 0, false, &tok))
        die("token");
    pr_enc_hello(&sb, 1, sl(tok));
    free(tok);
    send_sb(r);
    r->hello_at = now_ms();
    n_reconnects++;
}

/* The checker's own look at a frame: `sent` (a confirmed message), errors, welcome. */
static const msgpack_object *get(const msgpack_object *m, const char *k)
{
    if (m->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *key = &m->via.map.ptr[i].key;
        if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == strlen(k) &&
            !memcmp(key->via.str.ptr, k, key->via.str.size))
            return &m->via.map.ptr[i].val;
    }
    return NULL;
}

static bool t_is(const msgpack_object *m, const char *t)
{
    const msgpack_object *v = get(m, "t");
    return v && v->type == MSGPACK_OBJECT_STR && v->via.str.size == strlen(t) &&
           !memcmp(v->via.str.ptr, t, v->via.str.size);
}

static void look(replica *r, const msgpack_object *m)
{
    if (t_is(m, "welcome")) {
        r->up = true;
        return;
    }
    if (t_is(m, "err")) {
        const msgpack_object *rid = get(m, "rid");
        if (rid && rid->type == MSGPACK_OBJECT_POSITIVE_INTEGER && rid->via.u64 > 1 &&
            rid->via.u64 < GWC_REP_RID_BASE)
            n_refused++;
        return;
    }
    if (t_is(m, "sent")) {
        const msgpack_object *gid = get(m, "gid"), *mid = get(m, "mid");
        if (gid && gid->type == MSGPACK_OBJECT_STR && mid &&
            mid->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            char g[PR_MAX_ID + 1];
            snprintf(g, sizeof g, "%.*s", (int)gid->via.str.size, gid->via.str.ptr);
            int gi = group_of(g);
            if (gi >= 0)
                confirm(gi, mid->via.u64);
        }
    }
}

static void take_frame(replica *r, const uint8_t *f, size_t n)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, (const char *)f, n, &off) == MSGPACK_UNPACK_SUCCESS) {
        if (u.data.type == MSGPACK_OBJECT_ARRAY)
            for (uint32_t i = 0; i < u.data.via.array.size; i++)
                look(r, &u.data.via.array.ptr[i]);
        else
            look(r, &u.data);
    }
    msgpack_unpacked_destroy(&u);
    if (gwc_rep_frame(r->rep, f, n) == GWC_ENOMEM)
        die("out of memory");
}

/* One pass: frames in, the replicas' requests out, sessions kept as they should be. */
static void pump(gwc_ctx *ctx)
{
    gwc_poll(ctx, 5);
    uint64_t now = now_ms();
    for (int i = 0; i < o.replicas; i++) {
        replica *r = &reps[i];
        if (r->k) {
            const uint8_t *f;
            size_t n;
            int rc;
            while ((rc = gwc_recv(r->k, 0, &f, &n)) == 0)
                take_frame(r, f, n);
            if (rc == GWC_ECLOSED || (!r->up && now > r->hello_at + 5000))
                disconnect(r, now + 100 + (uint64_t)(rand() % 300));
        }
        if (!r->k && now >= r->offline_til && now >= r->connect_at)
            connect_replica(ctx, r);
        if (r->k && r->up) {
            int w;
            while ((w = gwc_rep_next_request(r->rep, &sb, now)) == 1)
                send_sb(r);
            if (w < 0)
                die("out of memory");
        }
    }
}

/* --- operations ----------------------------------------------------------------------- */

static replica *online_replica(void)
{
    for (int t = 0; t < 8; t++) {
        replica *r = &reps[rand() % o.replicas];
        if (r->k && r->up)
            return r;
    }
    return NULL;
}

static int random_group_of(const replica *r)
{
    for (int t = 0; t < 16; t++) {
        int g = rand() % o.groups;
        if (r->member[g])
            return g;
    }
    return -1;
}

/* A message r holds in group g, at random among the last 200: its own (own) or anyone's;
 * not recalled. 0: none found. */
static uint64_t pick_msg(const replica *r, int g, bool own)
{
    uint64_t top = gwc_rep_max_mid(r->rep, gids[g]);
    for (int t = 0; t < 12 && top; t++) {
        uint64_t mid = top - (uint64_t)(rand() % (top < 200 ? top : 200));
        gwc_rep_msg m;
        if (mid && !gwc_rep_get(r->rep, gids[g], mid, &m) && !m.recalled &&
            (!own || !strcmp(m.from, r->uid)))
            return mid;
    }
    return 0;
}

static uint64_t rid_next = 100;

static void op_ws(replica *r, int kind)
{
    int g = random_group_of(r);
    if (g < 0)
        return;
    char body[64], cid[32];
    r->n++;
    if (kind == 0) { /* send */
        snprintf(cid, sizeof cid, "c%llu", (unsigned long long)r->n);
        snprintf(body, sizeof body, "%s:%llu", r->uid, (unsigned long long)r->n);
        pr_enc_send(&sb, rid_next++, sl(gids[g]), sl(cid), (pr_body){sl(body), false});
    } else if (kind == 1 || kind == 2) { /* edit, recall: its own */
        uint64_t mid = pick_msg(r, g, true);
        if (!mid)
            return;
        if (kind == 1) {
            snprintf(body, sizeof body, "%s:%llu:e", r->uid, (unsigned long long)r->n);
            pr_enc_edit(&sb, rid_next++, sl(gids[g]), mid, 0, (pr_body){sl(body), false});
            n_edits++;
        } else {
            pr_enc_recall(&sb, rid_next++, sl(gids[g]), mid);
            n_recalls++;
        }
    } else { /* react: a key on or off, as the replica holds it */
        uint64_t mid = pick_msg(r, g, false);
        gwc_rep_msg m;
        if (!mid || gwc_rep_get(r->rep, gids[g], mid, &m))
            return;
        const char *key = react_keys[rand() % KEYS_N];
        bool mine = false;
        for (size_t i = 0; i < m.n_reactions; i++) {
            const char *k;
            uint64_t c;
            bool me;
            if (!gwc_rep_reaction(r->rep, gids[g], mid, i, &k, &c, &me) && !strcmp(k, key))
                mine = me;
        }
        pr_enc_react(&sb, rid_next++, sl(gids[g]), mid, sl(key), !mine);
        n_reacts++;
    }
    send_sb(r);
}

/* The people who post and react through the API and are then erased: v1, v2, ... */
static int victim = 1;
static uint64_t victim_n;

static void url_key(const char *key, char *out, size_t n)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)key; *p && w + 4 < n; p++)
        w += (size_t)snprintf(out + w, n - w, "%%%02X", *p);
}

static void op_api(int kind)
{
    int port = api_port(), g = rand() % o.groups;
    char path[256], body[200], *resp = NULL;
    if (!port)
        return;
    if (kind == 0) { /* a message of the victim */
        victim_n++;
        snprintf(path, sizeof path, "/groups/%s/messages", gids[g]);
        snprintf(body, sizeof body, "{\"from\":\"v%d\",\"cid\":\"p%llu\",\"body\":\"v%d:%llu\"}",
                 victim, (unsigned long long)victim_n, victim, (unsigned long long)victim_n);
        int st = conv_api(port, API_KEY, "POST", path, body, &resp);
        if (st == 200 || st == 201) {
            const char *m = resp ? strstr(resp, "\"mid\":") : NULL;
            if (m && !strstr(resp, "\"duplicate\":true"))
                confirm(g, strtoull(m + 6, NULL, 10));
        } else {
            n_refused++;
        }
    } else if (kind == 1) { /* a reaction of the victim's, on a recent message */
        uint64_t top = 0;
        for (int i = 0; i < o.replicas; i++)
            if (gwc_rep_max_mid(reps[i].rep, gids[g]) > top)
                top = gwc_rep_max_mid(reps[i].rep, gids[g]);
        if (!top)
            return;
        char k[64];
        url_key(react_keys[rand() % KEYS_N], k, sizeof k);
        snprintf(path, sizeof path, "/groups/%s/messages/%llu/reactions/%s?uid=v%d", gids[g],
                 (unsigned long long)(top - (uint64_t)(rand() % (top < 50 ? top : 50))), k, victim);
        conv_api(port, API_KEY, rand() % 4 ? "PUT" : "DELETE", path, NULL, &resp);
        n_api_reacts++;
    } else if (kind == 2) { /* the victim erased; the next one takes over */
        snprintf(path, sizeof path, "/users/v%d", victim);
        if (conv_api(port, API_KEY, "DELETE", path, NULL, &resp) == 200) {
            n_erasures++;
            victim++;
        } else {
            n_refused++;
        }
    } else { /* a retention pass will move the horizon of RETAIN_GROUP */
        snprintf(path, sizeof path, "/groups/%s/retention", gids[RETAIN_GROUP]);
        snprintf(body, sizeof body, "{\"messages\":%d}", 60 + rand() % 120);
        if (conv_api(port, API_KEY, "PUT", path, body, &resp) == 200)
            n_retention++;
    }
    free(resp);
}

static void op_offline(void)
{
    replica *r = online_replica();
    if (!r)
        return;
    uint64_t span = 200 + (uint64_t)(rand() % 2500);
    disconnect(r, 0);
    r->offline_til = now_ms() + span;
    n_offline++;
}

static void one_op(void)
{
    int x = rand() % 100;
    replica *r = online_replica();
    if (x < 30) {
        if (r)
            op_ws(r, 0);
    } else if (x < 40) {
        if (r)
            op_ws(r, 1);
    } else if (x < 45) {
        if (r)
            op_ws(r, 2);
    } else if (x < 68) {
        if (r)
            op_ws(r, 3);
    } else if (x < 80) {
        op_api(0);
    } else if (x < 90) {
        op_api(1);
    } else if (x < 92) {
        op_api(2);
    } else if (x < 94) {
        op_api(3);
    } else {
        op_offline();
    }
}

/* --- kills and failovers -------------------------------------------------------------- */

static uint64_t restart_at[MAX_NODES];

static void kill_node(void)
{
    int d = rand() % o.nodes;
    if (!node_up(d))
        return;
    node_kill(d);
    restart_at[d] = now_ms() + 100 + (uint64_t)(rand() % 500);
    n_kills++;
}

static void restart_nodes(void)
{
    for (int d = 0; d < o.nodes; d++)
        if (!node_up(d) && restart_at[d] && now_ms() >= restart_at[d]) {
            if (!node_start(d))
                die("node %d did not start again (see %s)", d + 1, node_log(d));
            restart_at[d] = 0;
        }
}

/* An automatic failover: the leader's postmaster and Patroni killed; then writes back on
 * every node, then the old leader back as the replica. Traffic goes on throughout. */
enum { FO_NONE, FO_KILLING, FO_WAIT_WRITES, FO_REJOINING };
static int fo_state;
static uint64_t fo_t0;

static void failover_step(void)
{
    char cmd[900];
    bool ok = true;
    switch (fo_state) {
    case FO_NONE: return;
    case FO_KILLING:
        if (!cmd_done(&ok))
            return;
        if (!ok)
            die("ha-kill-leader failed (see %s/cmd.log)", dir);
        fo_state = FO_WAIT_WRITES;
        return;
    case FO_WAIT_WRITES:
        for (int d = 0; d < o.nodes; d++)
            if (node_healthz(d) != 200)
                return;
        printf("gw_converge: failover %llu: writes back on every node %.1f s after the "
               "leader's kill\n",
               (unsigned long long)n_failovers + 1, (double)(now_ms() - fo_t0) / 1000);
        snprintf(cmd, sizeof cmd, "'%s/pg_server.sh' ha-wait '%s' 120 >/dev/null", tools_dir,
                 o.ha_dir);
        char log[300];
        snprintf(log, sizeof log, "%s/cmd.log", dir);
        if (!cmd_start(cmd, log))
            die("cannot run %s", cmd);
        fo_state = FO_REJOINING;
        return;
    case FO_REJOINING:
        if (!cmd_done(&ok))
            return;
        if (!ok)
            die("ha-wait failed");
        n_failovers++;
        fo_state = FO_NONE;
        return;
    }
}

static void failover_start(void)
{
    char cmd[900], log[300];
    snprintf(cmd, sizeof cmd, "'%s/pg_server.sh' ha-kill-leader '%s' >/dev/null", tools_dir,
             o.ha_dir);
    snprintf(log, sizeof log, "%s/cmd.log", dir);
    if (!cmd_start(cmd, log))
        die("cannot run %s", cmd);
    fo_state = FO_KILLING;
    fo_t0 = now_ms();
}

/* --- the end -------------------------------------------------------------------------- */

static bool all_idle(void)
{
    for (int i = 0; i < o.replicas; i++)
        if (!reps[i].k || !reps[i].up || !gwc_rep_idle(reps[i].rep))
            return false;
    return true;
}

static void settle(gwc_ctx *ctx, uint64_t ms)
{
    for (uint64_t until = now_ms() + ms; now_ms() < until;) {
        pump(ctx);
        restart_nodes();
    }
}

static void wait_idle(gwc_ctx *ctx, const char *what)
{
    uint64_t until = now_ms() + 120000;
    while (!all_idle()) {
        pump(ctx);
        restart_nodes();
        if (now_ms() > until)
            die("the replicas were not caught up within 120 s (%s)", what);
    }
}

/* --inject-skip-change when the run happened to recall nothing that replica 0 held in
 * gids[1]: it sends a message there and recalls it itself, so that the fault is made. */
static void force_skip(gwc_ctx *ctx)
{
    replica *r = &reps[0];
    for (uint64_t until = now_ms() + 30000; !gwc_rep_skipped(r->rep);) {
        if (now_ms() > until)
            die("--inject-skip-change: no recall reached %s within 30 s", r->uid);
        if (r->k && r->up) {
            uint64_t mid = pick_msg(r, 1, true);
            char body[48];
            if (mid) {
                pr_enc_recall(&sb, rid_next++, sl(gids[1]), mid);
                n_recalls++;
            } else {
                snprintf(body, sizeof body, "%s:forced", r->uid);
                pr_enc_send(&sb, rid_next++, sl(gids[1]), sl("forced"), (pr_body){sl(body), false});
            }
            send_sb(r);
        }
        settle(ctx, 300);
    }
    wait_idle(ctx, "after the injected fault");
}

static conv_group server[MAX_GROUPS];

static void read_server(conv_group *out)
{
    for (int g = 0; g < o.groups; g++)
        if (conv_read_group(api_port(), API_KEY, gids[g], &out[g]))
            die("the server's state of %s could not be read", gids[g]);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gw_converge --gw PATH [options]\n"
            "  --replicas N        client replicas (default 4, at most 32)\n"
            "  --groups N          groups (default 3, at most 16)\n"
            "  --ops N             random operations (default 600)\n"
            "  --kills N           gateway node kills among them (default 3)\n"
            "  --seed N            random seed (default: the time)\n"
            "  --time-limit S      give up after S seconds (default 300)\n"
            "  --retain-changes N  the nodes' --retain-changes (a small count sends replicas\n"
            "                      that were away long through changes_gone_before)\n"
            "  --inject-skip-change  one replica drops one change: the check must fail\n"
            "  --store URL [--nodes N]      PostgreSQL, N nodes on it\n"
            "  --failovers F --ha-dir DIR   F automatic failovers of a Patroni cluster\n"
            "                               (tools/pg_server.sh ha-up DIR; --store its URL)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"gw", required_argument, 0, 'g'},           {"replicas", required_argument, 0, 'r'},
        {"groups", required_argument, 0, 'G'},       {"ops", required_argument, 0, 'o'},
        {"kills", required_argument, 0, 'k'},        {"seed", required_argument, 0, 's'},
        {"time-limit", required_argument, 0, 't'},   {"retain-changes", required_argument, 0, 'c'},
        {"inject-skip-change", no_argument, 0, 'i'}, {"store", required_argument, 0, 'S'},
        {"nodes", required_argument, 0, 'n'},        {"failovers", required_argument, 0, 'F'},
        {"ha-dir", required_argument, 0, 'H'},       {0, 0, 0, 0}};
    o.seed = (unsigned)time(NULL);
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'g': o.gw = optarg; break;
        case 'r': o.replicas = atoi(optarg); break;
        case 'G': o.groups = atoi(optarg); break;
        case 'o': o.ops = atoi(optarg); break;
        case 'k': o.kills = atoi(optarg); break;
        case 's': o.seed = (unsigned)strtoul(optarg, NULL, 10); break;
        case 't': o.time_limit = atoi(optarg); break;
        case 'c': o.retain_changes = optarg; break;
        case 'i': o.inject = true; break;
        case 'S': o.store = optarg; break;
        case 'n': o.nodes = atoi(optarg); break;
        case 'F': o.failovers = atoi(optarg); break;
        case 'H': o.ha_dir = optarg; break;
        default: usage();
        }
    }
    if (!o.gw || o.replicas < 1 || o.replicas > MAX_REPLICAS || o.groups < 1 ||
        o.groups > MAX_GROUPS || o.ops < 1 || o.kills < 0 || o.nodes < 1 || o.nodes > MAX_NODES ||
        o.failovers < 0 || (o.nodes > 1 && !o.store) || (o.failovers && (!o.store || !o.ha_dir)) ||
        (o.inject && o.groups < 2))
        usage();
    srand(o.seed);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(tools_dir, sizeof tools_dir, "%s/tools", GW_SOURCE_DIR);

    snprintf(dir, sizeof dir, "/tmp/gw_converge.XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp");
    snprintf(key_file, sizeof key_file, "%s/api-key", dir);
    FILE *kf = fopen(key_file, "w");
    if (!kf)
        die("cannot write %s", key_file);
    fprintf(kf, "%s\n", API_KEY);
    fclose(kf);
    /* --retain-messages: a default retention makes a pass every second (a group's own,
     * set through the API, then takes effect within a second); far above what a run
     * sends, so that only RETAIN_GROUP's own retention moves a horizon. */
    static const char *extra[8];
    int n_extra = 0;
    extra[n_extra++] = "--api-key-file";
    extra[n_extra++] = key_file;
    extra[n_extra++] = "--retain-messages";
    extra[n_extra++] = "100000000";
    extra[n_extra++] = "--api-rate";
    extra[n_extra++] = "0";
    if (o.retain_changes) {
        extra[n_extra++] = "--retain-changes";
        extra[n_extra++] = o.retain_changes;
    }
    nodes_extra_args(extra, n_extra);
    nodes_init(o.gw, o.store, SECRET, dir, o.nodes);
    for (int d = 0; d < o.nodes; d++)
        if (!node_start(d))
            die("node %d did not start (see %s)", d + 1, node_log(d));
    t_start = now_ms();
    printf("gw_converge: seed %u, %d replicas, %d groups, %d ops, %d kills, %d failovers, "
           "%d node(s) on %s, in %s\n",
           o.seed, o.replicas, o.groups, o.ops, o.kills, o.failovers, o.nodes,
           o.store ? "PostgreSQL" : "RocksDB", dir);

    /* Groups, and who is in which: replica i in group g unless (i + g) % 3 == 2; replica 0
     * in every group. Made members through the API before they first sign in. */
    for (int g = 0; g < o.groups; g++)
        snprintf(gids[g], sizeof gids[g], "cv%d", g);
    for (int i = 0; i < o.replicas; i++) {
        replica *r = &reps[i];
        r->i = i;
        snprintf(r->uid, sizeof r->uid, "r%d", i);
        if (!(r->rep = gwc_rep_new(r->uid, on_catchup, r)))
            die("out of memory");
        for (int g = 0; g < o.groups; g++) {
            r->member[g] = i == 0 || (i + g) % 3 != 2;
            if (!r->member[g])
                continue;
            char path[320];
            snprintf(path, sizeof path, "/groups/%s/members/%s", gids[g], r->uid);
            int st = conv_api(api_port(), API_KEY, "PUT", path, NULL, NULL);
            if (st != 200 && st != 201)
                die("PUT %s: status %d (see %s)", path, st, node_log(0));
        }
    }
    if (o.inject)
        gwc_rep_inject_skip(reps[0].rep, gids[1]); /* not RETAIN_GROUP: no horizon heals it */
    msgpack_sbuffer_init(&sb);
    gwc_ctx *ctx = gwc_ctx_new(NULL);
    if (!ctx)
        die("gwc_ctx_new");

    /* The run: an operation every few ms; the kills and failovers spread evenly. */
    int events = o.kills + o.failovers, ev_done = 0;
    uint64_t deadline = t_start + (uint64_t)o.time_limit * 1000;
    for (int op = 0; op < o.ops;) {
        pump(ctx);
        restart_nodes();
        failover_step();
        if (now_ms() > deadline)
            die("out of time after %d of %d operations", op, o.ops);
        if (ev_done < events && op >= (ev_done + 1) * o.ops / (events + 1) && fo_state == FO_NONE) {
            /* event e is a failover when it passes the next multiple, as gw_crash's */
            bool fo = o.failovers &&
                      (ev_done + 1) * o.failovers / events > ev_done * o.failovers / events;
            if (fo)
                failover_start();
            else
                kill_node();
            ev_done++;
        }
        static uint64_t next_op;
        if (now_ms() >= next_op) {
            one_op();
            op++;
            next_op = now_ms() + 4 + (uint64_t)(rand() % 8);
        }
    }
    while (fo_state != FO_NONE) {
        pump(ctx);
        restart_nodes();
        failover_step();
        if (now_ms() > deadline)
            die("out of time waiting for the last failover");
    }

    /* The end: everyone back, retention's last pass, then every replica caught up. */
    for (int i = 0; i < o.replicas; i++)
        reps[i].offline_til = 0;
    settle(ctx, 2500);
    wait_idle(ctx, "after the run");
    if (o.inject)
        force_skip(ctx);
    printf("gw_converge: the run's catch-ups: %llu, carrying %llu changes for %llu messages "
           "held (%.3f a message held; the largest %llu changes), %llu round trips, %llu "
           "bytes, %llu answered changes_gone_before\n",
           (unsigned long long)cu_n, (unsigned long long)cu_entries, (unsigned long long)cu_held,
           cu_held ? (double)cu_entries / (double)cu_held : 0.0, (unsigned long long)cu_max_entries,
           (unsigned long long)cu_rounds, (unsigned long long)cu_bytes,
           (unsigned long long)cu_gone);
    quiet_catchups = true;
    conv_group again[MAX_GROUPS];
    bool stable = false;
    for (int round = 0; round < 5 && !stable; round++) {
        read_server(server);
        for (int i = 0; i < o.replicas; i++)
            gwc_rep_catch_up(reps[i].rep);
        wait_idle(ctx, "the final catch-up");
        read_server(again);
        stable = true;
        for (int g = 0; g < o.groups; g++) {
            stable &= conv_group_equal(&server[g], &again[g]);
            conv_group_free(&server[g]);
            server[g] = again[g];
        }
        if (!stable)
            for (int g = 0; g < o.groups; g++)
                conv_group_free(&server[g]);
    }
    if (!stable)
        die("the server's state kept changing after the run");

    /* The check. */
    uint64_t divergent = 0, lost = 0, held_total = 0, checked = 0;
    for (int i = 0; i < o.replicas; i++) {
        uint64_t bad = 0;
        for (int g = 0; g < o.groups; g++) {
            bool holds = false;
            for (size_t x = 0; x < gwc_rep_n_groups(reps[i].rep); x++)
                holds |= gwc_rep_group(reps[i].rep, x) &&
                         !strcmp(gwc_rep_group(reps[i].rep, x), gids[g]);
            if (holds != reps[i].member[g]) {
                printf("gw_converge: %s %s: %s\n", reps[i].uid, gids[g],
                       holds ? "held, but not a member" : "a member, but not held");
                bad++;
                continue;
            }
            if (!holds)
                continue;
            uint64_t missing, extra_n, differ;
            conv_compare(reps[i].rep, reps[i].uid, gids[g], &server[g], &missing, &extra_n,
                         &differ);
            bad += missing + extra_n + differ;
            lost += missing;
            held_total += gwc_rep_n_held(reps[i].rep, gids[g]);
            checked += server[g].n;
        }
        divergent += bad > 0;
    }
    /* Every message confirmed is on the server (at or above the horizon). */
    uint64_t server_lost = 0;
    for (int g = 0; g < o.groups; g++) {
        uint8_t *have = calloc(server[g].last_mid + 2, 1);
        if (!have)
            die("out of memory");
        for (size_t x = 0; x < server[g].n; x++)
            have[server[g].m[x].mid] = 1;
        for (size_t x = 0; x < conf_n[g]; x++) {
            uint64_t mid = conf_mid[g][x];
            if (mid >= server[g].first_mid && (mid > server[g].last_mid || !have[mid])) {
                if (server_lost++ < 5)
                    printf("gw_converge: %s mid %llu was confirmed but is not on the server\n",
                           gids[g], (unsigned long long)mid);
            }
        }
        free(have);
    }
    lost += server_lost;
    uint64_t skipped = 0;
    for (int i = 0; i < o.replicas; i++)
        skipped += gwc_rep_skipped(reps[i].rep);
    bool ok = divergent == 0 && lost == 0;
    printf("gw_converge: %s in %.1f s: %llu confirmed, %llu edits, %llu recalls, %llu "
           "reactions, %llu API reactions, %llu erasures, %llu retention changes, %llu offline "
           "spans, %llu sessions, %llu refused; %llu kills, %llu failovers; %llu catch-ups "
           "carried %llu changes for %llu messages held, %llu answered changes_gone_before; "
           "%llu messages checked in %llu held; %llu changes skipped; %llu divergent replicas, "
           "%llu lost messages\n",
           ok ? "ok" : "DIVERGED", (double)(now_ms() - t_start) / 1000,
           (unsigned long long)n_confirmed, (unsigned long long)n_edits,
           (unsigned long long)n_recalls, (unsigned long long)n_reacts,
           (unsigned long long)n_api_reacts, (unsigned long long)n_erasures,
           (unsigned long long)n_retention, (unsigned long long)n_offline,
           (unsigned long long)n_reconnects, (unsigned long long)n_refused,
           (unsigned long long)n_kills, (unsigned long long)n_failovers, (unsigned long long)cu_n,
           (unsigned long long)cu_entries, (unsigned long long)cu_held, (unsigned long long)cu_gone,
           (unsigned long long)checked, (unsigned long long)held_total, (unsigned long long)skipped,
           (unsigned long long)divergent, (unsigned long long)lost);
    for (int i = 0; i < o.replicas; i++)
        gwc_rep_free(reps[i].rep);
    gwc_ctx_free(ctx);
    for (int d = 0; d < o.nodes; d++)
        node_stop(d);
    msgpack_sbuffer_destroy(&sb);
    return ok ? 0 : 1;
}
