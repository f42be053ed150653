/*
 * gw_cli: the gateway's command-line client (docs/PROTOCOL.md), over wss:// or ws://.
 *
 *   gw_cli [--url URL] [--token T | --token-file F] [--ca FILE | --insecure] [--json]
 *          [--timeout S] [--retry S] COMMAND [ARGS]
 *
 * Commands: groups, join GID, leave GID, send GID [TEXT], tail GID, pull GID, receipts GID
 * MID, who GID (see usage()).
 * Exit status: 0 done, 1 failed (the reason is on stderr), 2 bad usage.
 */
#include "gw_cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_URL "wss://localhost:8443/ws"
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_RETRY_MS 60000

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gw_cli [OPTIONS] COMMAND [ARGS]\n"
        "A command-line client of the group-messaging gateway.\n"
        "\n"
        "Commands\n"
        "  groups                 the groups you are in, with unread counts\n"
        "  join GID               join a group (created if the gateway allows it)\n"
        "  leave GID              leave a group\n"
        "  send GID [TEXT...]     send TEXT (words joined by spaces), or else each line of\n"
        "                         standard input as one message; prints each message's mid\n"
        "  tail GID               print the unread messages, then live ones, acking them;\n"
        "                         reconnects after a disconnect and prints nothing twice\n"
        "  pull GID               print a page of the group's messages (default: after your\n"
        "                         ack, that is the unread ones)\n"
        "  receipts GID MID       how many members have message MID and have read it, and\n"
        "                         who read it (in a small group)\n"
        "  who GID                who of the group is online, and when the others were last\n"
        "                         seen\n"
        "  edit GID MID TEXT...   replace the text of your message MID (a new version of it;\n"
        "                         everyone online sees it)\n"
        "  recall GID MID         take your message MID back: its text is deleted, its mid\n"
        "                         stays as \"(recalled)\"\n"
        "  changes GID            the messages changed (edited, recalled, erased, reacted to)\n"
        "                         after a change cursor, in their state now, then a line\n"
        "                         \"# upto C ...\": the cursor to go on after next time\n"
        "  react GID MID KEY      set your reaction KEY (an emoji or a word, at most 32 bytes)\n"
        "                         on message MID; prints how many have set it\n"
        "\n"
        "Options\n"
        "  --url URL              wss://HOST:PORT/ws or ws://... (default $GW_URL, else\n"
        "                         " DEFAULT_URL ")\n"
        "  --token T              the token (default $GW_TOKEN; see gw_token)\n"
        "  --token-file F         read the token from F\n"
        "  --ca FILE              wss: trust this CA or certificate (PEM) besides the system's\n"
        "                         (default $GW_CA; tools/run.sh's is DATA/tls/ca.pem)\n"
        "  --insecure             wss: do not verify the server's certificate (testing only)\n"
        "  --json                 JSON lines on stdout instead of text\n"
        "  --timeout S            wait at most S seconds to connect and for each reply\n"
        "                         (default 10)\n"
        "  --retry S              after a lost connection keep reconnecting for S seconds\n"
        "                         (default 60; 0: do not reconnect)\n"
        "  --help                 this text\n"
        "send\n"
        "  --cid-prefix P         client ids P-1, P-2, ... by line: sending the same lines\n"
        "                         again with the same P stores nothing twice (default: random)\n"
        "tail\n"
        "  --count N              stop after N messages\n"
        "  --seconds S            stop after S seconds\n"
        "pull\n"
        "  --after M | --before M messages after mid M, or just before mid M\n"
        "  --limit N              messages per page (default: the gateway's)\n"
        "  --all                  page on until there are no more\n"
        "  --ack                  ack what was printed (not with --before)\n"
        "changes\n"
        "  --after C              the changes after cseq C (default 0: all the log keeps)\n"
        "  --limit N              changes per request (default: the gateway's)\n"
        "react\n"
        "  --off                  clear your reaction instead\n"
        "\n"
        "Text output: [gid #mid] from: body. JSON lines: "
        "{\"gid\",\"mid\",\"from\",\"ts\",\"body\"};\n"
        "a bin body (\"bin\":true), or one that is not UTF-8, is base64 with \"enc\":\"base64\".\n"
        "\n"
        "Examples\n"
        "  export GW_URL=wss://localhost:8443/ws GW_CA=$GW_HOME/data/tls/ca.pem\n"
        "  export GW_TOKEN=$(gw_token --user alice --secret-file $GW_HOME/data/token-secret)\n"
        "  gw_cli join lobby && gw_cli send lobby hello everyone\n"
        "  gw_cli tail lobby                        # unread, then live; Ctrl-C stops\n"
        "  gw_cli --json tail lobby | jq -r .body   # JSON lines for scripts\n"
        "  printf 'one\\ntwo\\n' | gw_cli send --cid-prefix batch-7 lobby  # again: stored once\n"
        "  gw_cli pull --all --after 0 lobby        # the whole history, page by page\n"
        "  gw_cli receipts lobby 42                 # delivered to 3, read by 2 of 4\n"
        "  gw_cli who lobby                         # online, and last seen\n"
        "  gw_cli edit lobby 42 see you at 10, not 9  # prints [lobby #42 edited v1] ...\n"
        "  gw_cli recall lobby 42                   # prints [lobby #42] alice: (recalled)\n"
        "  gw_cli react lobby 42 ok                 # prints [lobby #42] ok on: 3 now (cseq 9)\n"
        "  gw_cli changes --after 7 lobby           # what changed since cseq 7; # upto 9 ...\n"
        "\n"
        "Exit status\n"
        "  0  done (tail: --count or --seconds reached, or Ctrl-C)\n"
        "  1  failed: refused (a bad token, not a member, ...), the connection was lost\n"
        "     past --retry, or no reply within --timeout; the reason is on stderr\n"
        "  2  bad usage (unknown option or command, a missing argument)\n"
        "Progress, reconnects and errors go to stderr; stdout has only messages and mids.\n");
}

enum {
    O_URL = 256,
    O_TOKEN,
    O_TOKEN_FILE,
    O_CA,
    O_INSECURE,
    O_JSON,
    O_TIMEOUT,
    O_RETRY,
    O_CID_PREFIX,
    O_COUNT,
    O_SECONDS,
    O_AFTER,
    O_BEFORE,
    O_LIMIT,
    O_ALL,
    O_ACK,
    O_OFF,
    O_HELP,
};

/* Seconds (fractions allowed) from min to max, as ms. */
static int parse_seconds(const char *name, const char *s, double min, double max, int *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < min || v > max) {
        cli_err("--%s %s: seconds from %g to %g", name, s, min, max);
        return -1;
    }
    *ms = (int)(v * 1000 + 0.5);
    return 0;
}

static int parse_u64(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || x < min || x > max) {
        cli_err("--%s %s: a whole number from %llu to %llu", name, s, (unsigned long long)min,
                (unsigned long long)max);
        return -1;
    }
    *v = x;
    return 0;
}

static bool id_ok(const char *what, const char *s)
{
    if (pr_id_valid(cli_slice(s)))
        return true;
    cli_err("%s '%s' is not a valid id (1-64 of [A-Za-z0-9_.:-])", what, s);
    return false;
}

/* True if path holds a PEM certificate: libwebsockets only logs a file it cannot use. */
static bool has_pem_certificate(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (f && !found && getline(&line, &cap, f) > 0)
        found = !strncmp(line, "-----BEGIN ", 11) && strstr(line, "CERTIFICATE-----");
    free(line);
    if (f)
        fclose(f);
    return found;
}

static int cmd_groups(cli *c)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    pr_group g;
    for (size_t i = 0; i < c->welcome.n_items; i++)
        if (pr_event_group(&c->welcome, i, &g) == 0)
            out_group(c, &g);
    return out_flush() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static int cmd_join_leave(cli *c, const char *gid, bool join)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t rid = ++c->next_rid;
    if (join)
        pr_enc_join(&sb, rid, cli_slice(gid));
    else
        pr_enc_leave(&sb, rid, cli_slice(gid));
    pr_event ev;
    int rc = cli_request(c, &sb, rid, join ? PR_EV_JOINED : PR_EV_LEFT, gid, &ev);
    msgpack_sbuffer_destroy(&sb);
    if (rc)
        return CLI_EXIT_FAIL;
    if (join)
        out_joined(c, &ev);
    else
        out_left(c, &ev);
    return out_flush() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static void on_signal(int sig)
{
    cli_stop = 1;
}

/* Which command an option belongs to (NULL: every command). */
static const char *option_command(int opt)
{
    switch (opt) {
    case O_CID_PREFIX: return "send";
    case O_COUNT:
    case O_SECONDS: return "tail";
    case O_AFTER:
    case O_LIMIT: return "pull or changes";
    case O_BEFORE:
    case O_ALL:
    case O_ACK: return "pull";
    case O_OFF: return "react";
    default: return NULL;
    }
}

/* What the command line holds besides the options in cli_opts. */
typedef struct cli_args {
    const char *token, *token_file;
    const char *used[O_HELP + 1]; /* the long name of each option given */
    const char *cmd;
    int nargs; /* arguments after the command */
    char **args;
} cli_args;

/* Fills c->o and *a from argv. Returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, cli *c, cli_args *a)
{
    static const struct option opts[] = {
        {"url", required_argument, 0, O_URL},
        {"token", required_argument, 0, O_TOKEN},
        {"token-file", required_argument, 0, O_TOKEN_FILE},
        {"ca", required_argument, 0, O_CA},
        {"insecure", no_argument, 0, O_INSECURE},
        {"json", no_argument, 0, O_JSON},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"retry", required_argument, 0, O_RETRY},
        {"cid-prefix", required_argument, 0, O_CID_PREFIX},
        {"count", required_argument, 0, O_COUNT},
        {"seconds", required_argument, 0, O_SECONDS},
        {"after", required_argument, 0, O_AFTER},
        {"before", required_argument, 0, O_BEFORE},
        {"limit", required_argument, 0, O_LIMIT},
        {"all", no_argument, 0, O_ALL},
        {"ack", no_argument, 0, O_ACK},
        {"off", no_argument, 0, O_OFF},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    cli_opts *o = &c->o;
    const char *env_url = getenv("GW_URL"), *env_ca = getenv("GW_CA");
    uint64_t v;
    int opt, li = 0;
    o->url = env_url && *env_url ? env_url : DEFAULT_URL;
    o->ca_file = env_ca && *env_ca ? env_ca : NULL;
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->retry_ms = DEFAULT_RETRY_MS;
    while ((opt = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        if (opt >= O_URL && opt <= O_HELP)
            a->used[opt] = opts[li].name;
        switch (opt) {
        case O_URL: o->url = optarg; break;
        case O_TOKEN: a->token = optarg; break;
        case O_TOKEN_FILE: a->token_file = optarg; break;
        case O_CA: o->ca_file = optarg; break;
        case O_INSECURE:
            o->insecure = true;
            if (o->ca_file == env_ca) /* --insecure on the command line wins over $GW_CA */
                o->ca_file = NULL;
            break;
        case O_JSON: o->json = true; break;
        case O_TIMEOUT:
            if (parse_seconds("timeout", optarg, 0.1, 3600, &o->timeout_ms))
                return CLI_EXIT_USAGE;
            break;
        case O_RETRY:
            if (parse_seconds("retry", optarg, 0, 86400, &o->retry_ms))
                return CLI_EXIT_USAGE;
            break;
        case O_CID_PREFIX:
            if (!id_ok("--cid-prefix", optarg))
                return CLI_EXIT_USAGE;
            if (strlen(optarg) > CLI_CID_PREFIX_MAX) {
                cli_err("--cid-prefix: at most %d characters", CLI_CID_PREFIX_MAX);
                return CLI_EXIT_USAGE;
            }
            o->cid_prefix = optarg;
            break;
        case O_COUNT:
            if (parse_u64("count", optarg, 1, 1000000000, &v))
                return CLI_EXIT_USAGE;
            o->count = (long)v;
            break;
        case O_SECONDS:
            if (parse_seconds("seconds", optarg, 0.001, 2000000, &o->seconds_ms))
                return CLI_EXIT_USAGE;
            break;
        case O_AFTER:
            if (parse_u64("after", optarg, 0, UINT64_MAX - 1, &o->after))
                return CLI_EXIT_USAGE;
            o->has_after = true;
            break;
        case O_BEFORE:
            if (parse_u64("before", optarg, 1, UINT64_MAX, &o->before))
                return CLI_EXIT_USAGE;
            o->has_before = true;
            break;
        case O_LIMIT:
            if (parse_u64("limit", optarg, 1, 100000, &v))
                return CLI_EXIT_USAGE;
            o->limit = (uint32_t)v;
            break;
        case O_ALL: o->all = true; break;
        case O_ACK: o->ack = true; break;
        case O_OFF: o->off = true; break;
        case 'h':
        case O_HELP: usage(stdout); return CLI_EXIT_OK;
        default: fprintf(stderr, "try 'gw_cli --help'\n"); return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    a->cmd = argv[optind];
    a->nargs = argc - optind - 1;
    a->args = argv + optind + 1;
    return -1;
}

/* True if word is one of the words of list ("pull or changes"). */
static bool has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
            return true;
    return false;
}

/* Checks the command, its arguments and the options together. -1 to go on, else the exit
 * code. */
static int check_command(const cli *c, const cli_args *a)
{
    static const char *const cmds[] = {"groups",  "join",     "leave", "send", "tail",
                                       "pull",    "receipts", "who",   "edit", "recall",
                                       "changes", "react",    "help"};
    const cli_opts *o = &c->o;
    const char *cmd = a->cmd;
    bool known = false;
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        known |= strcmp(cmd, cmds[i]) == 0;
    if (!known) {
        cli_err("unknown command '%s' (try 'gw_cli --help')", cmd);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(cmd, "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (int i = O_URL; i <= O_HELP; i++) {
        const char *for_cmd = option_command(i);
        if (a->used[i] && for_cmd && !has_word(for_cmd, cmd)) {
            cli_err("--%s is an option of %s, not of %s", a->used[i], for_cmd, cmd);
            return CLI_EXIT_USAGE;
        }
    }
    bool is_send = !strcmp(cmd, "send"), group_cmd = strcmp(cmd, "groups") != 0;
    bool is_receipts = !strcmp(cmd, "receipts") || !strcmp(cmd, "recall");
    if (!strcmp(cmd, "edit") && a->nargs < 3) {
        cli_err("usage: gw_cli edit GID MID TEXT...");
        return CLI_EXIT_USAGE;
    }
    is_send |= !strcmp(cmd, "edit"); /* words after the group */
    if (!strcmp(cmd, "react")) {
        if (a->nargs != 3) {
            cli_err("usage: gw_cli react GID MID KEY [--off]");
            return CLI_EXIT_USAGE;
        }
        if (!pr_react_key_valid(cli_slice(a->args[2]))) {
            cli_err("KEY: 1-%u bytes of UTF-8 without control characters (an emoji, a word)",
                    PR_REACT_KEY_MAX);
            return CLI_EXIT_USAGE;
        }
        is_receipts = true; /* GID MID, checked below like receipts' */
    }
    if (!group_cmd && a->nargs) {
        cli_err("groups takes no arguments");
        return CLI_EXIT_USAGE;
    }
    if (is_receipts && a->nargs != 2 && strcmp(cmd, "react")) {
        cli_err("usage: gw_cli %s GID MID", cmd);
        return CLI_EXIT_USAGE;
    }
    if (group_cmd && !is_receipts && (a->nargs < 1 || (a->nargs > 1 && !is_send))) {
        cli_err("usage: gw_cli %s GID%s", cmd, is_send ? " [TEXT...]" : "");
        return CLI_EXIT_USAGE;
    }
    if (group_cmd && !id_ok("group", a->args[0]))
        return CLI_EXIT_USAGE;
    if (o->has_after && o->has_before) {
        cli_err("give --after or --before, not both");
        return CLI_EXIT_USAGE;
    }
    if (o->ack && o->has_before) {
        cli_err("--ack acks what was read up from your ack: not with --before");
        return CLI_EXIT_USAGE;
    }
    if (o->ca_file && o->insecure) {
        cli_err("--ca and --insecure contradict each other");
        return CLI_EXIT_USAGE;
    }
    if (strncmp(o->url, "ws://", 5) && strncmp(o->url, "wss://", 6)) {
        cli_err("--url %s: give ws://HOST:PORT/PATH or wss://HOST:PORT/PATH", o->url);
        return CLI_EXIT_USAGE;
    }
    if (o->ca_file && access(o->ca_file, R_OK)) {
        cli_err("--ca %s: %s", o->ca_file, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (o->ca_file && !has_pem_certificate(o->ca_file)) {
        cli_err("--ca %s: no PEM certificate in it (-----BEGIN CERTIFICATE-----)", o->ca_file);
        return CLI_EXIT_FAIL;
    }
    return -1;
}

static int run(int argc, char **argv, cli *c)
{
    cli_args a;
    memset(&a, 0, sizeof(a));
    int rc = parse_options(argc, argv, c, &a);
    if (rc >= 0 || (rc = check_command(c, &a)) >= 0)
        return rc;
    if ((rc = cli_load_token(a.token, a.token_file, &c->token)))
        return rc;
    c->o.token_file = a.token_file;
    gwc_options go = {.ca_file = c->o.ca_file, .insecure = c->o.insecure};
    if (!(c->ctx = gwc_ctx_new(&go))) {
        cli_err("cannot set up the client (TLS settings or memory)");
        return CLI_EXIT_FAIL;
    }
    const char *cmd = a.cmd, *gid = a.nargs ? a.args[0] : NULL;
    if (!strcmp(cmd, "groups"))
        return cmd_groups(c);
    if (!strcmp(cmd, "join"))
        return cmd_join_leave(c, gid, true);
    if (!strcmp(cmd, "leave"))
        return cmd_join_leave(c, gid, false);
    if (!strcmp(cmd, "send"))
        return cli_cmd_send(c, gid, a.nargs - 1, a.args + 1);
    if (!strcmp(cmd, "tail"))
        return cli_cmd_tail(c, gid);
    if (!strcmp(cmd, "receipts")) {
        uint64_t mid;
        if (parse_u64("MID", a.args[1], 1, UINT64_MAX, &mid))
            return CLI_EXIT_USAGE;
        return cli_cmd_receipts(c, gid, mid);
    }
    if (!strcmp(cmd, "who"))
        return cli_cmd_who(c, gid);
    if (!strcmp(cmd, "changes"))
        return cli_cmd_changes(c, gid);
    if (!strcmp(cmd, "react")) {
        uint64_t mid;
        if (parse_u64("MID", a.args[1], 1, UINT64_MAX, &mid))
            return CLI_EXIT_USAGE;
        return cli_cmd_react(c, gid, mid, a.args[2]);
    }
    if (!strcmp(cmd, "edit") || !strcmp(cmd, "recall")) {
        uint64_t mid;
        if (parse_u64("MID", a.args[1], 1, UINT64_MAX, &mid))
            return CLI_EXIT_USAGE;
        if (!strcmp(cmd, "recall"))
            return cli_cmd_edit(c, gid, mid, NULL);
        char text[65536] = "";
        for (int i = 2; i < a.nargs; i++) /* the words, joined by spaces (as send does) */
            snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s%s", i > 2 ? " " : "",
                     a.args[i]);
        return cli_cmd_edit(c, gid, mid, text);
    }
    return cli_cmd_pull(c, gid);
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: waits end early and the loops see cli_stop */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is reported by out_flush */
    srand((unsigned)time(NULL) ^ (unsigned)getpid());

    cli c;
    memset(&c, 0, sizeof(c));
    int rc = run(argc, argv, &c);
    gwc_close(c.k);
    gwc_ctx_free(c.ctx);
    free(c.token);
    return rc;
}
