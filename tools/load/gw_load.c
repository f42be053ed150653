/*
 * gw_load: a load generator for the gateway (see --help and docs/BENCHMARKS.md).
 *
 * It opens many sessions on one client context (spread over several 127.x source
 * addresses, so the ephemeral port range of one address is no limit), joins them to
 * groups of a chosen size, then senders send at a fixed open-loop rate or flat out, and
 * every member acks as the protocol says. Each message carries the time it was *meant*
 * to be sent (the schedule, not when it went out), so a stalled server shows up in the
 * latency instead of silently lowering the load (no coordinated omission). It reports
 * confirmed sends/s, deliveries/s, send-to-deliver latency p50/p99/p99.9, ack frames,
 * errors, its own CPU time and the server's (from /proc), and stops by itself. Other
 * modes: --idle (hold sessions), --own-groups (durable sends without fan-out), --pull (a
 * returning user reads its unread messages page by page), --raw (a peer server), --xmpp
 * (an XMPP server's MUC and MAM under the same load).
 *
 * This file parses the options and runs the mode's driver; load_run.h says which file
 * holds what.
 */
#include "load_run.h"
#include "load_xmpp.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void usage(FILE *f)
{
    fprintf(
        f, "usage: gw_load --url ws://127.0.0.1:PORT/ws [options]\n"
           "       gw_load --xmpp ws://127.0.0.1:PORT/xmpp-websocket [options]\n"
           "  --url U1,U2,...  several gateways (a cluster, at most 8): receivers and senders\n"
           "                   round robin over them, latency reported per URL too\n"
           "  --sessions N     receiving sessions (default 100)\n"
           "  --group-size G   members per group (default 100; groups = N / G)\n"
           "  --senders S      sending sessions (default 1)\n"
           "  --rate R         messages per second in all, open loop (default 0: flat out)\n"
           "  --window W       flat out: unconfirmed sends per sender (default 64)\n"
           "  --body B         body bytes (default 200, at least 16)\n"
           "  --seconds S      run time after set-up (default 10, at most 3600)\n"
           "  --count C        stop after C sends (default: no limit)\n"
           "  --sources K      spread sessions over 127.0.0.1 .. 127.0.0.K (default 1)\n"
           "  --server-pid P   report the gateway's CPU seconds and RSS from /proc\n"
           "                   (P1,P2,...: several gateways', summed)\n"
           "  --idle           connect, sign in and join, then only hold the sessions\n"
           "  --own-groups     every sender sends to a group of its own with no other member\n"
           "                   (durable sends without fan-out; use with --sessions 0)\n"
           "  --reads          every ack is followed by a read of the same mid (the second\n"
           "                   cursor: what the person has seen)\n"
           "  --ack-every N    ack every N messages instead of the server's ack_every (1: one\n"
           "                   ack frame per message, the baseline of the batched acks)\n"
           "  --pull L         offline pull instead: a user joins --pull-groups groups and goes\n"
           "                   offline, a sender stores --count messages (default 25000) over\n"
           "                   them, then the user signs in again and reads every group in\n"
           "                   pages of L (enter, then pull after); pull.bytes: bytes it received\n"
           "  --pull-groups G  groups of the offline pull (default 40)\n"
           "  --pull-window K  pulls in flight at once, at most one per group: K groups are\n"
           "                   read at the same time (default 1: one request at a time)\n"
           "  --interval S     also print a line every S seconds with that interval's figures\n"
           "                   (deliveries/s, latency, server CPU and RSS; JSON with --json)\n"
           "  --uid-prefix P   put P before every user name (several gw_load processes on one\n"
           "                   store, each its own users; at most 16 characters)\n"
           "  --json           print the report as one JSON object\n"
           "SIGINT or SIGTERM once running (sessions set up) ends the run early: what is in\n"
           "  flight drains and the report is printed as at the end (before: exits at once).\n"
           "Peers (for side-by-side benchmarks), no protocol v1: every session subscribes at\n"
           "  --raw URL        and the senders publish frames at --raw-pub URL (default the\n"
           "                   same), with --raw-protocol NAME as subprotocol. A frame holds its\n"
           "                   due time as 16 hex digits. Flat out keeps --window frames in\n"
           "                   flight, measured at the first subscriber.\n"
           "XMPP servers (the same runs on MUC rooms, RFC 7395 XMPP over WebSocket):\n"
           "  --xmpp URL       instead of --url: ws://HOST:PORT/PATH, subprotocol xmpp. Users\n"
           "                   <uid-prefix>u<N> (receivers u0.., then the senders), registered\n"
           "                   beforehand; rooms <uid-prefix>room<N>, made by their first\n"
           "                   sender (or first receiver). A send is confirmed when the room\n"
           "                   reflects it to its sender; send_latency_us is send-to-confirm.\n"
           "                   With --pull: catch-up by MAM (XEP-0313) pages of L after the last\n"
           "                   archived id seen before leaving; pull.bytes is what was received\n"
           "  --xmpp-domain D  the users' domain (default localhost)\n"
           "  --xmpp-muc M     the MUC service (default conference.D)\n"
           "  --xmpp-password P  every user's password (default bench)\n"
           "  --xmpp-members M each room's members (affiliation member, online or not): users\n"
           "                   u<room * group-size> .. +M-1, and the senders (default: the\n"
           "                   room's online receivers)\n"
           "  --xmpp-preloaded with --pull: the rooms hold the messages already; read each whole\n"
           "                   archive (checked against --count when given)\n"
           "The token secret: --secret-file F or GW_SECRET.\n");
}

static int read_secret(load_cfg *cfg, const char *path)
{
    return load_read_file("gw_load", path, cfg->secret, sizeof(cfg->secret), &cfg->secret_n);
}

/* Names that go into JIDs and XML attributes unescaped: a small safe alphabet, and
 * lowercase (servers fold JIDs to lowercase: a nick compared as sent must match). */
static bool name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
              s[i] == '-' || s[i] == '_'))
            return false;
    return true;
}

static bool xmpp_names_ok(const load_cfg *cfg)
{
    return name_ok(cfg->uid_prefix, 16) && name_ok(cfg->xmpp_domain, 120) && cfg->xmpp_domain[0] &&
           name_ok(cfg->xmpp_muc, 120) && cfg->xmpp_muc[0];
}

static int parse(load_cfg *cfg, int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, 0, 'u'},
        {"sessions", required_argument, 0, 'n'},
        {"group-size", required_argument, 0, 'g'},
        {"senders", required_argument, 0, 's'},
        {"rate", required_argument, 0, 'r'},
        {"window", required_argument, 0, 'w'},
        {"body", required_argument, 0, 'b'},
        {"seconds", required_argument, 0, 't'},
        {"count", required_argument, 0, 'c'},
        {"sources", required_argument, 0, 'S'},
        {"server-pid", required_argument, 0, 'p'},
        {"idle", no_argument, 0, 'i'},
        {"json", no_argument, 0, 'j'},
        {"secret-file", required_argument, 0, 'f'},
        {"raw", required_argument, 0, 'R'},
        {"raw-pub", required_argument, 0, 'P'},
        {"raw-protocol", required_argument, 0, 'o'},
        {"own-groups", no_argument, 0, 'O'},
        {"ack-every", required_argument, 0, 'A'},
        {"reads", no_argument, 0, 'D'},
        {"pull", required_argument, 0, 'L'},
        {"pull-groups", required_argument, 0, 'G'},
        {"pull-window", required_argument, 0, 'K'},
        {"interval", required_argument, 0, 'I'},
        {"uid-prefix", required_argument, 0, 'U'},
        {"xmpp", required_argument, 0, 'X'},
        {"xmpp-domain", required_argument, 0, 1001},
        {"xmpp-muc", required_argument, 0, 1002},
        {"xmpp-password", required_argument, 0, 1003},
        {"xmpp-members", required_argument, 0, 1004},
        {"xmpp-preloaded", no_argument, 0, 1005},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *cfg = (load_cfg){.sessions = 100,
                      .group_size = 100,
                      .senders = 1,
                      .window = 64,
                      .body = 200,
                      .seconds = 10,
                      .sources = 1,
                      .pull_groups = 40,
                      .pull_window = 1,
                      .uid_prefix = "",
                      .xmpp_domain = "localhost",
                      .xmpp_password = "bench"};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            /* A cluster: one URL per node, comma-separated. */
            cfg->n_urls = 0;
            for (char *t = strtok(optarg, ","); t && cfg->n_urls < LOAD_MAX_URLS;
                 t = strtok(NULL, ","))
                cfg->urls[cfg->n_urls++] = t;
            cfg->url = cfg->n_urls ? cfg->urls[0] : NULL;
            break;
        case 'n': cfg->sessions = atoi(optarg); break;
        case 'g': cfg->group_size = atoi(optarg); break;
        case 's': cfg->senders = atoi(optarg); break;
        case 'r': cfg->rate = atof(optarg); break;
        case 'w': cfg->window = atoi(optarg); break;
        case 'b': cfg->body = atoi(optarg); break;
        case 't': cfg->seconds = atof(optarg); break;
        case 'c': cfg->count = atol(optarg); break;
        case 'S': cfg->sources = atoi(optarg); break;
        case 'p':
            cfg->n_server_pids = 0;
            for (char *t = strtok(optarg, ","); t && cfg->n_server_pids < LOAD_MAX_URLS;
                 t = strtok(NULL, ","))
                cfg->server_pids[cfg->n_server_pids++] = atoi(t);
            cfg->server_pid = cfg->n_server_pids ? cfg->server_pids[0] : 0;
            break;
        case 'i': cfg->idle = true; break;
        case 'O': cfg->own_groups = true; break;
        case 'A': cfg->ack_every = atoi(optarg); break;
        case 'D': cfg->reads = true; break;
        case 'L': cfg->pull = atoi(optarg); break;
        case 'G': cfg->pull_groups = atoi(optarg); break;
        case 'K': cfg->pull_window = atoi(optarg); break;
        case 'I': cfg->interval = atof(optarg); break;
        case 'R': cfg->raw_sub = optarg; break;
        case 'P': cfg->raw_pub = optarg; break;
        case 'o': cfg->raw_proto = optarg; break;
        case 'U': cfg->uid_prefix = optarg; break;
        case 'j': cfg->json = true; break;
        case 'X': cfg->xmpp = optarg; break;
        case 1001: cfg->xmpp_domain = optarg; break;
        case 1002: cfg->xmpp_muc = optarg; break;
        case 1003: cfg->xmpp_password = optarg; break;
        case 1004: cfg->xmpp_members = atoi(optarg); break;
        case 1005: cfg->xmpp_preloaded = true; break;
        case 'f':
            if (read_secret(cfg, optarg))
                return -1;
            break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    load_secret_from_env(cfg->secret, sizeof(cfg->secret), &cfg->secret_n);
    if (cfg->raw_sub) {
        cfg->url = cfg->urls[0] = cfg->raw_sub;
        cfg->n_urls = 1;
        if (!cfg->raw_pub)
            cfg->raw_pub = cfg->raw_sub;
        if (!cfg->secret_n) /* no tokens in raw mode */
            cfg->secret_n = 16;
    }
    bool url_given = cfg->url != NULL && !cfg->raw_sub;
    if (cfg->xmpp) {
        cfg->url = cfg->urls[0] = cfg->xmpp;
        cfg->n_urls = 1;
        if (cfg->secret_n < 16) /* no tokens: SASL PLAIN */
            cfg->secret_n = 16;
        if (!cfg->xmpp_muc) {
            snprintf(cfg->xmpp_muc_buf, sizeof(cfg->xmpp_muc_buf), "conference.%s",
                     cfg->xmpp_domain);
            cfg->xmpp_muc = cfg->xmpp_muc_buf;
        }
    }
    const char *bad =
        !cfg->url                                     ? "--url (or --raw) is required"
        : cfg->secret_n < 16                          ? "no secret (16+ bytes)"
        : cfg->sessions < 0 || cfg->sessions > 200000 ? "--sessions 0-200000"
        : cfg->group_size < 1                         ? "--group-size >= 1"
        : cfg->senders < 0 || cfg->senders > 10000    ? "--senders 0-10000"
        : cfg->rate < 0 || cfg->window < 1            ? "--rate >= 0, --window >= 1"
        : cfg->ack_every < 0                          ? "--ack-every >= 1"
        : cfg->pull < 0 || cfg->pull_groups < 1 || cfg->pull_groups > 10000
            ? "--pull >= 1, --pull-groups 1-10000"
        : cfg->pull_window < 1 || cfg->pull_window > 256 ? "--pull-window 1-256"
        : cfg->body < 16 || cfg->body > 60000            ? "--body 16-60000"
        : cfg->seconds <= 0 || cfg->seconds > 3600       ? "--seconds 0-3600"
        : cfg->interval < 0 || cfg->interval > 3600      ? "--interval 0-3600"
        : cfg->sources < 1 || cfg->sources > 250         ? "--sources 1-250"
        : cfg->xmpp && !xmpp_names_ok(cfg)
            ? "--uid-prefix, --xmpp-domain, --xmpp-muc: lowercase letters, digits, . - _"
        : cfg->xmpp &&
                (cfg->raw_sub || cfg->own_groups || cfg->reads || cfg->ack_every || url_given)
            ? "--xmpp: not with --raw, --own-groups, --reads, --ack-every, --url"
        : cfg->xmpp && (cfg->xmpp_members < 0 || cfg->xmpp_members > 100000)
            ? "--xmpp-members 0-100000"
        : cfg->xmpp && strlen(cfg->xmpp_password) > 128 ? "--xmpp-password: 128 bytes at most"
                                                        : NULL;
    if (bad) {
        fprintf(stderr, "gw_load: %s (see --help)\n", bad);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    load_cfg cfg;
    int prc = parse(&cfg, argc, argv);
    if (prc)
        return prc > 0 ? 0 : 2;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* one socket per session */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (cfg.xmpp)
        return cfg.pull ? load_xmpp_pull(&cfg) : load_xmpp(&cfg);
    if (cfg.pull)
        return load_pull(&cfg);
    if (cfg.raw_sub)
        return load_raw(&cfg);
    if (cfg.idle)
        return load_idle(&cfg);
    return load_fanout(&cfg);
}
