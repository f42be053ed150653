/*
 * gw_attack: attacks a gateway the way a hostile client on the internet could, and
 * measures what each costs it (see --help and docs/RELIABILITY.md, Attacks).
 *
 * One attack a run, bounded in count and time. It reports what the client sent, what the
 * server spent (RSS at the start, its peak and after; descriptors; CPU seconds: from
 * /proc), what the attacker saw (errors, throttling, close codes), and what legitimate
 * clients saw meanwhile: a group of a few members sending at a steady rate (p99 of
 * send-to-deliver) and a /healthz probe. With --row it also prints a markdown table row;
 * tools/bench/attacks.sh runs every attack on a fresh gateway and prints the table.
 *
 * attack.h says which file holds what.
 */
#include "attack.h"
#include "load_proc.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static int typing(atk_ctx *c)
{
    return atk_flood(c, PR_REQ_TYPING);
}

static int edit(atk_ctx *c)
{
    return atk_flood(c, PR_REQ_EDIT);
}

static int recall(atk_ctx *c)
{
    return atk_flood(c, PR_REQ_RECALL);
}

static const struct {
    const char *name;
    int (*run)(atk_ctx *c);
    const char *what;
} attacks[] = {
    {"typing", typing,
     "one session types in --groups groups in turn as fast as the server takes it;\n"
     "     --members members of those groups never read"},
    {"edit", edit, "the same with edits of the attacker's own message in each group"},
    {"recall", recall, "the same with recalls of the attacker's own message in each group"},
    {"slow-body", atk_slow_body,
     "--conns requests announcing a body, then a byte every --trickle-ms: /api/v1/\n"
     "     with no key and with the key (60,000 bytes), a static PUT (1,000,000 bytes)"},
    {"idle", atk_idle, "--conns connections from one address that send nothing"},
    {"prehello", atk_prehello,
     "--conns WebSocket connections each sending a 256 KiB fragment that is not\n"
     "     final, and no hello"},
    {"json", atk_json, "--tries gw.v1.json first frames, each a 256 KiB JSON array of {}"},
    {"pipelined", atk_pipelined,
     "--tries sessions each writing --bad bad requests in one write, then --tries\n"
     "     with 5 x --bad: every error then the 1008 close, or a reset?"},
    {"oversized", atk_oversized,
     "--tries API POSTs with an 8 MiB body written whole: the 413, or a reset?"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gw_attack --url ws://127.0.0.1:PORT/ws ATTACK [options]\n"
               "Attacks a gateway you run, bounded in count and time, and reports what the\n"
               "client sent, what the server spent (RSS, descriptors, CPU from /proc), what\n"
               "the attacker saw and what legitimate clients saw meanwhile.\n"
               "Attacks:\n");
    for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++)
        fprintf(f, "  %-10s %s\n", attacks[i].name, attacks[i].what);
    fprintf(f, "Options:\n"
               "  --server-pid P     the gateway's pid (default: the process listening on the "
               "URL's port)\n"
               "  --seconds S        how long typing, edit, recall, slow-body, idle and prehello "
               "run\n"
               "                     (default 10, at most 600)\n"
               "  --conns N          connections of slow-body, idle, prehello (default 200)\n"
               "  --members N        the floods' members that never read (default 20)\n"
               "  --groups N         the floods' groups (default 5)\n"
               "  --tries N          json, pipelined, oversized: how many (default 10)\n"
               "  --bad N            pipelined: bad requests in a write (default 40)\n"
               "  --trickle-ms MS    slow-body: a byte this often (default 2000)\n"
               "  --legit-rate R     the legitimate group's messages a second (default 20; 0: "
               "none)\n"
               "  --legit-members N  ... its members, one of them sending (default 4)\n"
               "  --legit-from ADDR  ... the address they and /healthz connect from: not the\n"
               "                     attacker's, as a monitor's is not (default 127.0.0.2)\n"
               "  --api-key-file F   the API key (slow-body's keyed third, oversized)\n"
               "  --row              also print a markdown table row, after \"ROW \":\n"
               "                     attack | RSS MiB start -> peak | fds peak | CPU s |\n"
               "                     legit p99 ms | attacker outcome\n"
               "The token secret: --secret-file F or GW_SECRET.\n");
}

static int parse(atk_cfg *cfg, int argc, char **argv, const char **attack)
{
    static const struct option opts[] = {
        {"url", required_argument, 0, 'u'},
        {"server-pid", required_argument, 0, 'p'},
        {"seconds", required_argument, 0, 't'},
        {"conns", required_argument, 0, 'c'},
        {"members", required_argument, 0, 'm'},
        {"groups", required_argument, 0, 'g'},
        {"tries", required_argument, 0, 'T'},
        {"bad", required_argument, 0, 'b'},
        {"trickle-ms", required_argument, 0, 'k'},
        {"legit-rate", required_argument, 0, 'r'},
        {"legit-members", required_argument, 0, 'L'},
        {"legit-from", required_argument, 0, 'F'},
        {"api-key-file", required_argument, 0, 'a'},
        {"secret-file", required_argument, 0, 'f'},
        {"row", no_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *cfg = (atk_cfg){.seconds = 10,
                     .conns = 200,
                     .members = 20,
                     .groups = 5,
                     .tries = 10,
                     .bad = 40,
                     .trickle_ms = 2000,
                     .legit_rate = 20,
                     .legit_members = 4,
                     .legit_from = "127.0.0.2"};
    size_t n;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u': cfg->url = optarg; break;
        case 'p': cfg->pid = atoi(optarg); break;
        case 't': cfg->seconds = atof(optarg); break;
        case 'c': cfg->conns = atoi(optarg); break;
        case 'm': cfg->members = atoi(optarg); break;
        case 'g': cfg->groups = atoi(optarg); break;
        case 'T': cfg->tries = atoi(optarg); break;
        case 'b': cfg->bad = atoi(optarg); break;
        case 'k': cfg->trickle_ms = atoi(optarg); break;
        case 'r': cfg->legit_rate = atof(optarg); break;
        case 'L': cfg->legit_members = atoi(optarg); break;
        case 'F': cfg->legit_from = optarg; break;
        case 'R': cfg->row = true; break;
        case 'a':
            if (load_read_file("gw_attack", optarg, cfg->api_key, sizeof(cfg->api_key), &n))
                return -1;
            break;
        case 'f':
            if (load_read_file("gw_attack", optarg, cfg->secret, sizeof(cfg->secret),
                               &cfg->secret_n))
                return -1;
            break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    load_secret_from_env(cfg->secret, sizeof(cfg->secret), &cfg->secret_n);
    *attack = optind < argc ? argv[optind] : NULL;
    const char *bad = !cfg->url  ? "--url is required"
                      : !*attack ? "which attack?"
                      : sscanf(cfg->url, "ws://%63[^:/]:%d", cfg->host, &cfg->port) != 2
                          ? "--url: ws://HOST:PORT/... (an IPv4 address; no TLS)"
                      : cfg->secret_n < 16                                 ? "no secret (16+ bytes)"
                      : cfg->seconds <= 0 || cfg->seconds > 600            ? "--seconds 0-600"
                      : cfg->conns < 1 || cfg->conns > 20000               ? "--conns 1-20000"
                      : cfg->members < 0 || cfg->members > 1000            ? "--members 0-1000"
                      : cfg->groups < 1 || cfg->groups > 64                ? "--groups 1-64"
                      : cfg->tries < 1 || cfg->tries > 10000               ? "--tries 1-10000"
                      : cfg->bad < 1 || cfg->bad > 10000                   ? "--bad 1-10000"
                      : cfg->trickle_ms < 10 || cfg->trickle_ms > 60000    ? "--trickle-ms 10-60000"
                      : cfg->legit_rate < 0 || cfg->legit_rate > 1000      ? "--legit-rate 0-1000"
                      : cfg->legit_members < 2 || cfg->legit_members > 100 ? "--legit-members 2-100"
                                                                           : NULL;
    if (bad) {
        fprintf(stderr, "gw_attack: %s\n", bad);
        usage(stderr);
        return -1;
    }
    if (!cfg->pid && (cfg->pid = load_proc_pid_of_port(cfg->port)) <= 0) {
        fprintf(stderr, "gw_attack: no process of ours listens on port %d (--server-pid)\n",
                cfg->port);
        return -1;
    }
    return 0;
}

static int run(atk_ctx *c, const char *attack)
{
    for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++)
        if (!strcmp(attack, attacks[i].name))
            return attacks[i].run(c);
    fprintf(stderr, "gw_attack: no attack %s (see --help)\n", attack);
    return -1;
}

int main(int argc, char **argv)
{
    atk_cfg cfg;
    const char *attack;
    int rc = parse(&cfg, argc, argv, &attack);
    if (rc)
        return rc < 0 ? 2 : 0;
    signal(SIGPIPE, SIG_IGN); /* a reset under a write is a result, not the end */
    atk_ctx c;
    rc = atk_ctx_init(&c, &cfg, attack);
    if (rc == 0 && atk_legit_start(&c) != 0) {
        fprintf(stderr, "gw_attack: the legitimate group could not start\n");
        rc = -1;
    }
    if (rc == 0 && (rc = run(&c, attack)) == 0)
        atk_report(&c);
    atk_ctx_release(&c);
    return rc ? 1 : 0;
}
