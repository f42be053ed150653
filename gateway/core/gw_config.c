#include "gw_core.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    O_LISTEN = 256,
    O_PORT,
    O_PORT_FILE,
    O_DATA,
    O_INSECURE,
    O_CERT,
    O_KEY,
    O_SECRET_FILE,
    O_NO_SYNC,
    O_CLOSED_GROUPS,
    O_DEMO,
    O_WEB_ROOT,
    O_MAX_FRAME,
    O_MAX_BODY,
    O_QUEUE_CAP,
    O_SLOW_CLOSE,
    O_ACK_FLUSH,
    O_QUEUE_BYTES,
    O_MAX_GROUPS,
    O_ACK_EVERY,
    O_ACK_DELAY,
    O_PAGE_DEFAULT,
    O_PAGE_MAX,
    O_HELLO_TIMEOUT,
    O_ERROR_BUDGET,
    O_PING,
    O_INFLIGHT,
    O_RATE_SENDS,
    O_RATE_BYTES,
    O_RATE_CONNS,
    O_RATE_BURST,
    O_HANDSHAKE_TIMEOUT,
    O_CONNS_PER_ADDR,
    O_BODY_TIMEOUT,
    O_DEMO_ANY_ADDRESS,
    O_LOG_LEVEL,
    O_HELP,
    O_STORE,
    O_NODE,
    O_API_KEY_FILE,
    O_GROUPS,
    O_API_RATE,
    O_WEBHOOK_URL,
    O_WEBHOOK_SECRET,
    O_WEBHOOK_DELAY,
    O_WEBHOOK_TIMEOUT,
    O_WEBHOOK_QUEUE,
    O_WEBHOOK_BATCH,
    O_RECEIPT_LIST_MAX,
    O_RECEIPT_PUSH_MS,
    O_EDIT_WINDOW,
    O_RETAIN_MESSAGES,
    O_RETAIN_DAYS,
    O_RETAIN_UNTIL_ACKED,
    O_RETAIN_CAP,
    O_RETAIN_CHANGES,
    O_PRESENCE_LIST_MAX,
    O_WEBHOOK_BODY,
    O_THREADS,
    O_TEST_LOAD_STALL,
    O_TEST_DROP_ANNOUNCE,
};

static const struct option options[] = {
    {"listen", required_argument, 0, O_LISTEN},
    {"port", required_argument, 0, O_PORT},
    {"port-file", required_argument, 0, O_PORT_FILE},
    {"threads", required_argument, 0, O_THREADS},
    {"test-load-stall-ms", required_argument, 0, O_TEST_LOAD_STALL},
    {"test-drop-announcements", required_argument, 0, O_TEST_DROP_ANNOUNCE},
    {"data", required_argument, 0, O_DATA},
    {"store", required_argument, 0, O_STORE},
    {"node", required_argument, 0, O_NODE},
    {"api-key-file", required_argument, 0, O_API_KEY_FILE},
    {"api-rate", required_argument, 0, O_API_RATE},
    {"webhook-url", required_argument, 0, O_WEBHOOK_URL},
    {"webhook-secret-file", required_argument, 0, O_WEBHOOK_SECRET},
    {"webhook-delay", required_argument, 0, O_WEBHOOK_DELAY},
    {"webhook-timeout", required_argument, 0, O_WEBHOOK_TIMEOUT},
    {"webhook-queue", required_argument, 0, O_WEBHOOK_QUEUE},
    {"webhook-batch", required_argument, 0, O_WEBHOOK_BATCH},
    {"receipt-list-max", required_argument, 0, O_RECEIPT_LIST_MAX},
    {"receipt-push-ms", required_argument, 0, O_RECEIPT_PUSH_MS},
    {"edit-window", required_argument, 0, O_EDIT_WINDOW},
    {"retain-messages", required_argument, 0, O_RETAIN_MESSAGES},
    {"retain-days", required_argument, 0, O_RETAIN_DAYS},
    {"retain-until-acked", no_argument, 0, O_RETAIN_UNTIL_ACKED},
    {"retain-cap", required_argument, 0, O_RETAIN_CAP},
    {"retain-changes", required_argument, 0, O_RETAIN_CHANGES},
    {"presence-list-max", required_argument, 0, O_PRESENCE_LIST_MAX},
    {"webhook-body", no_argument, 0, O_WEBHOOK_BODY},
    {"insecure", no_argument, 0, O_INSECURE},
    {"cert", required_argument, 0, O_CERT},
    {"key", required_argument, 0, O_KEY},
    {"secret-file", required_argument, 0, O_SECRET_FILE},
    {"no-sync", no_argument, 0, O_NO_SYNC},
    {"closed-groups", no_argument, 0, O_CLOSED_GROUPS},
    {"groups", required_argument, 0, O_GROUPS},
    {"demo", no_argument, 0, O_DEMO},
    {"web-root", required_argument, 0, O_WEB_ROOT},
    {"max-frame", required_argument, 0, O_MAX_FRAME},
    {"max-body", required_argument, 0, O_MAX_BODY},
    {"queue-cap", required_argument, 0, O_QUEUE_CAP},
    {"slow-close", required_argument, 0, O_SLOW_CLOSE},
    {"queue-bytes", required_argument, 0, O_QUEUE_BYTES},
    {"max-groups", required_argument, 0, O_MAX_GROUPS},
    {"ack-flush-ms", required_argument, 0, O_ACK_FLUSH},
    {"ack-every", required_argument, 0, O_ACK_EVERY},
    {"ack-delay-ms", required_argument, 0, O_ACK_DELAY},
    {"page-default", required_argument, 0, O_PAGE_DEFAULT},
    {"page-max", required_argument, 0, O_PAGE_MAX},
    {"hello-timeout", required_argument, 0, O_HELLO_TIMEOUT},
    {"error-budget", required_argument, 0, O_ERROR_BUDGET},
    {"ping", required_argument, 0, O_PING},
    {"inflight-max", required_argument, 0, O_INFLIGHT},
    {"rate-sends", required_argument, 0, O_RATE_SENDS},
    {"rate-bytes", required_argument, 0, O_RATE_BYTES},
    {"rate-conns", required_argument, 0, O_RATE_CONNS},
    {"rate-burst", required_argument, 0, O_RATE_BURST},
    {"handshake-timeout", required_argument, 0, O_HANDSHAKE_TIMEOUT},
    {"conns-per-address", required_argument, 0, O_CONNS_PER_ADDR},
    {"body-timeout", required_argument, 0, O_BODY_TIMEOUT},
    {"demo-any-address", no_argument, 0, O_DEMO_ANY_ADDRESS},
    {"log-level", required_argument, 0, O_LOG_LEVEL},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* 127.0.0.0/8 or localhost: only this machine reaches it. */
static bool listen_is_loopback(const char *addr)
{
    struct in_addr a;
    if (strcmp(addr, "localhost") == 0)
        return true;
    return inet_pton(AF_INET, addr, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static void help(void)
{
    printf(
        "usage: gw [options]\n"
        "A group-messaging gateway: WebSocket sessions at /ws (subprotocol gw.v1), messages\n"
        "stored once per group in RocksDB (embedded) or PostgreSQL (--store). See\n"
        "docs/PROTOCOL.md.\n"
        "\n"
        "Network\n"
        "  --listen ADDR        address to bind (default 127.0.0.1)\n"
        "  --port N             port (default 8443; 0 = any free port, logged)\n"
        "  --port-file PATH     write the bound port to PATH once listening\n"
        "  --threads N          service threads, each with its own share of the sessions on\n"
        "                       the one port (default: the number of cores; 1..64)\n"
        "  --cert PATH          TLS certificate, PEM (wss:// and https://); default: a\n"
        "                       self-signed one for localhost, made in DIR/tls/ at first start\n"
        "  --key PATH           TLS private key, PEM (with --cert)\n"
        "  --insecure           plain ws:// and http:// without TLS (development only)\n"
        "Storage\n"
        "  --data DIR           data folder (default ./data): the token secret, the TLS files\n"
        "                       made at first start and, without --store, the RocksDB store\n"
        "  --store URL          keep the store in PostgreSQL instead: a libpq connection URI,\n"
        "                       postgresql://[user@]host[:port][,host2[:port2]...]/dbname[?...]\n"
        "                       (several hosts with target_session_attrs=read-write follow a\n"
        "                       failover). No password in it: libpq reads ~/.pgpass,\n"
        "                       PGPASSFILE, a service file or PGPASSWORD. The schema is made\n"
        "                       at first start. If the database is down, gw starts anyway and\n"
        "                       connects when it can (/healthz says 503 meanwhile)\n"
        "                       Groups spread over several databases (shards) by hash\n"
        "                       slots: --store shards:PATH (a slot map in a file) or\n"
        "                       etcd://HOST:PORT[,HOST:PORT...]/KEY (in etcd, watched);\n"
        "                       docs/DEPLOY.md, \"Shards\"\n"
        "  --no-sync            do not fsync commits (PostgreSQL: synchronous_commit off;\n"
        "                       faster; a machine or database crash may lose the last\n"
        "                       confirmed messages; a crash of gw loses nothing)\n"
        "  --groups MODE        who makes groups and members (default open):\n"
        "                       open      a client's join creates the group if missing\n"
        "                       existing  a client joins only groups that exist\n"
        "                       managed   only the server API (docs/API.md), or a token's\n"
        "                                 groups claim, makes members: any other join is\n"
        "                                 refused with unauthorized\n"
        "  --closed-groups      the same as --groups existing\n"
        "Cluster (several gw nodes over one PostgreSQL: docs/DEPLOY.md)\n"
        "  --node NAME          this node's name in logs, /stats, /metrics (label node) and\n"
        "                       the database's pg_stat_activity; letters, digits and ._:-\n"
        "                       (default: the listen address and port, e.g. 127.0.0.1:8443;\n"
        "                       with --port 0 the database sees port 0: name it)\n"
        "Identity\n"
        "  --secret-file PATH   HS256 token secret (or env GW_SECRET); default: DIR/token-secret,\n"
        "                       created with random bytes on first start\n"
        "  --demo               POST /demo/login issues a token for any name (insecure);\n"
        "                       only with a loopback --listen (127.x, localhost)\n"
        "  --demo-any-address   ... or on any --listen address: anyone who reaches it can\n"
        "                       sign in as anyone\n"
        "  --api-key-file PATH  turn the server API on (/api/v1/, docs/API.md): its keys,\n"
        "                       one a line, at least 16 characters; requests send\n"
        "                       Authorization: Bearer KEY\n"
        "  --api-rate N         API requests per second per key, bursts of --rate-burst\n"
        "                       seconds (default 1000; 0 = no limit); more get 429\n"
        "  --web-root DIR       static files served at / (default: none)\n"
        "Unread webhook (docs/API.md: tells the application who has not read a message)\n"
        "  --webhook-url URL    POST events there (http:// or https://); off without it\n"
        "  --webhook-secret-file PATH  the key events are signed with (HMAC-SHA256), 16 to\n"
        "                       256 bytes; needed with --webhook-url\n"
        "  --webhook-delay MS   a member who has not acked a message this long after it was\n"
        "                       stored is told about (default 5000; longer than\n"
        "                       --ack-flush-ms)\n"
        "  --webhook-timeout MS one POST may take this long, then it is retried (default\n"
        "                       10000)\n"
        "  --webhook-queue N    events waiting at most; more are dropped and counted\n"
        "                       (default 10000)\n"
        "  --webhook-batch N    events in one POST at most (default 100)\n"
        "  --webhook-body       events carry the unread message's body (default: not)\n"
        "Receipts and presence (docs/PROTOCOL.md: what members see of each other)\n"
        "  --receipt-list-max N receipts name who read, and a watching session is told who\n"
        "                       moved, in groups of at most N members (default 100); larger\n"
        "                       groups get counts\n"
        "  --receipt-push-ms MS a watching session gets one receipt push a group this often\n"
        "                       at most (default 1000)\n"
        "  --presence-list-max N  presence lists the members of groups of at most N\n"
        "                       members (default 100); larger groups get counts\n"
        "Edits and recalls (docs/PROTOCOL.md)\n"
        "  --edit-window S      a message can be edited for S seconds after it was sent\n"
        "                       (default 0: always); recalls are not limited\n"
        "Retention (defaults; the API sets a group's own: docs/API.md)\n"
        "  --retain-messages N  keep each group's last N messages (default 0: all)\n"
        "  --retain-days D      keep messages younger than D days (default 0: all)\n"
        "  --retain-until-acked and beyond those (alone: until every member acked it),\n"
        "                       what a member has not acked yet ...\n"
        "  --retain-cap N       ... up to N messages a group (default 1000000)\n"
        "  --retain-changes N|Dd  the change log (`changes`) serves each group's last N\n"
        "                       changes (default 100000), or its changes of the last D\n"
        "                       days; 0 or all: every change\n"
        "Limits and cadence\n"
        "  --max-frame BYTES    largest frame accepted (default 262144; larger closes 1009)\n"
        "  --max-body BYTES     largest message body (default 65536)\n"
        "  --queue-cap N        pushes queued per session before it gets notify (default 1024)\n"
        "  --queue-bytes BYTES  ... or bytes of pushes queued (default 4194304)\n"
        "  --slow-close S       close a session stuck over its cap this long (default 60)\n"
        "  --max-groups N       groups one user may belong to (default 1000)\n"
        "  --ack-flush-ms MS    persist coalesced acks this often (default 200)\n"
        "  --ack-every N        clients ack after N messages (default 50)\n"
        "  --ack-delay-ms MS    ... or MS after the first unacked one (default 1000)\n"
        "  --page-default N     page size when a request gives none (default 100)\n"
        "  --page-max N         larger page requests are clamped (default 500)\n"
        "  --hello-timeout S    close sessions that send no hello (default 10)\n"
        "  --handshake-timeout S  close connections whose TLS handshake and HTTP request or\n"
        "                       WebSocket upgrade take longer (default 10)\n"
        "  --body-timeout S     an HTTP request's body must be in S seconds after its\n"
        "                       headers, however it trickles in; else 408 (default 30)\n"
        "  --error-budget N     bad requests in a burst before closing with 1008 (default 20)\n"
        "  --ping S             ping idle sessions after S, close after 2*S (default 30)\n"
        "  --inflight-max N     writes in flight per session before reading it pauses\n"
        "                       (default 256)\n"
        "Rate limits (token buckets; 0 = no limit; see docs/PROTOCOL.md)\n"
        "  --rate-sends N       sends per second per session; more get err rate_limited\n"
        "                       (default 200)\n"
        "  --rate-bytes BYTES   bytes per second a session may send (default 1048576)\n"
        "  --rate-conns N       new connections per second per source address; more are\n"
        "                       closed at once (default 1000; behind a proxy every client\n"
        "                       has the proxy's address: raise it, or 0)\n"
        "  --rate-burst S       each limit allows bursts of S seconds' worth (default 10)\n"
        "  --conns-per-address N  connections open at once from one source address; more\n"
        "                       are closed at accept (default 256; 0 = no cap; behind a\n"
        "                       proxy every client has the proxy's address: 0 there, and\n"
        "                       let the proxy cap each client, docs/DEPLOY.md)\n"
        "Logging\n"
        "  --log-level N        0 error, 1 warn, 2 info (default), 3 debug\n"
        "  --test-load-stall-ms N  tests only: a service thread stops for N ms when a read of\n"
        "                       a user's groups comes back, before it is applied (the\n"
        "                       window of a thread held up by others' work; default 0)\n"
        "  --test-drop-announcements N  tests only (PostgreSQL): the next N announcements\n"
        "                       made after their batch's commit are lost, as when the\n"
        "                       database dies between the two (default 0)\n"
        "  --help               this text\n");
}

static const char *option_name(int val)
{
    for (const struct option *o = options; o->name; o++)
        if (o->val == val)
            return o->name;
    return "";
}

static int number(const char *name, const char *arg, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || *end || end == arg || v < lo || v > hi) {
        fprintf(stderr, "gw: --%s %s: expected a whole number from %lld to %lld\n", name, arg, lo,
                hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* The options that take a whole number: its bounds, and the field it is stored in (an
 * int or unsigned of 4 bytes, a size_t or uint64_t of 8; every bound is >= 0). */
typedef struct num_option {
    int opt;
    long long lo, hi;
    size_t off, size;
} num_option;

#define NUM(o, lo, hi, field)                                                                      \
    {                                                                                              \
        o, lo, hi, offsetof(gw_config, field), sizeof(((gw_config *)0)->field)                     \
    }
static const num_option num_options[] = {
    NUM(O_PORT, 0, 65535, port),
    NUM(O_THREADS, 1, GW_THREADS_MAX, threads),
    NUM(O_TEST_LOAD_STALL, 0, 10000, test_load_stall_ms),
    NUM(O_TEST_DROP_ANNOUNCE, 0, 1000000, test_drop_announcements),
    NUM(O_API_RATE, 0, 1000000, api_rate),
    NUM(O_WEBHOOK_DELAY, 100, 86400000, webhook_delay_ms),
    NUM(O_WEBHOOK_TIMEOUT, 100, 600000, webhook_timeout_ms),
    NUM(O_WEBHOOK_QUEUE, 1, 10000000, webhook_queue),
    NUM(O_WEBHOOK_BATCH, 1, 1000, webhook_batch),
    NUM(O_RECEIPT_LIST_MAX, 0, 100000, receipt_list_max),
    NUM(O_RECEIPT_PUSH_MS, 10, 3600000, receipt_push_ms),
    NUM(O_EDIT_WINDOW, 0, 315360000, edit_window_s),
    NUM(O_RETAIN_MESSAGES, 0, 1000000000000LL, retain_messages),
    NUM(O_RETAIN_DAYS, 0, 36500, retain_days),
    NUM(O_RETAIN_CAP, 1, 1000000000000LL, retain_cap),
    NUM(O_PRESENCE_LIST_MAX, 0, 100000, presence_list_max),
    NUM(O_MAX_FRAME, 1024, 16 << 20, max_frame),
    NUM(O_MAX_BODY, 1, 16 << 20, max_body),
    NUM(O_QUEUE_CAP, 1, 1 << 20, queue_cap),
    NUM(O_QUEUE_BYTES, 65536, 1 << 30, queue_bytes),
    NUM(O_MAX_GROUPS, 1, 100000, max_groups),
    NUM(O_SLOW_CLOSE, 1, 86400, slow_close_s),
    NUM(O_ACK_FLUSH, 1, 60000, ack_flush_ms),
    NUM(O_ACK_EVERY, 1, 100000, ack_every),
    NUM(O_ACK_DELAY, 1, 600000, ack_delay_ms),
    NUM(O_PAGE_DEFAULT, 1, 10000, page_default),
    NUM(O_PAGE_MAX, 1, 10000, page_max),
    NUM(O_HELLO_TIMEOUT, 1, 3600, hello_timeout_s),
    NUM(O_ERROR_BUDGET, 1, 100000, error_budget),
    NUM(O_PING, 1, 3600, ping_s),
    NUM(O_INFLIGHT, 1, 100000, inflight_max),
    NUM(O_RATE_SENDS, 0, 1000000, rate_sends),
    NUM(O_RATE_BYTES, 0, 1ll << 32, rate_bytes),
    NUM(O_RATE_CONNS, 0, 1000000, rate_conns),
    NUM(O_RATE_BURST, 1, 3600, rate_burst_s),
    NUM(O_HANDSHAKE_TIMEOUT, 1, 3600, handshake_timeout_s),
    NUM(O_CONNS_PER_ADDR, 0, 1000000, conns_per_addr),
    NUM(O_BODY_TIMEOUT, 1, 3600, body_timeout_s),
    NUM(O_LOG_LEVEL, 0, 3, log_level),
};
#undef NUM

static const num_option *num_option_of(int opt)
{
    for (size_t i = 0; i < sizeof(num_options) / sizeof(num_options[0]); i++)
        if (num_options[i].opt == opt)
            return &num_options[i];
    return NULL;
}

/* v (within the option's bounds) into its field. */
static void num_store(gw_config *c, const num_option *no, long long v)
{
    char *field = (char *)c + no->off;
    if (no->size == sizeof(uint32_t)) {
        uint32_t x = (uint32_t)v;
        memcpy(field, &x, sizeof(x));
    } else {
        uint64_t x = (uint64_t)v;
        memcpy(field, &x, sizeof(x));
    }
}

/* A secret of 16 to 256 bytes from the file of option --opt (a final newline is not
 * part of it) into buf (256 bytes). */
static int read_secret(const char *opt, const char *path, char *buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "gw: --%s %s: %s\n", opt, path, strerror(errno));
        return -1;
    }
    size_t n = fread(buf, 1, 256, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (more || n < 16) {
        fprintf(stderr, "gw: --%s %s: the secret must be 16 to 256 bytes\n", opt, path);
        return -1;
    }
    *len = n;
    return 0;
}

static void defaults(gw_config *c)
{
    memset(c, 0, sizeof(*c));
    c->listen = "127.0.0.1";
    c->port = 8443;
    c->data = "data";
    c->sync = true;
    c->open_groups = true;
    c->max_frame = 256 * 1024;
    c->max_body = 64 * 1024;
    c->queue_cap = 1024;
    c->queue_bytes = 4u << 20;
    c->max_groups = 1000;
    c->slow_close_s = 60;
    c->ack_flush_ms = 200;
    c->ack_every = 50;
    c->ack_delay_ms = 1000;
    c->page_default = 100;
    c->page_max = 500;
    c->hello_timeout_s = 10;
    c->error_budget = 20;
    c->ping_s = 30;
    c->inflight_max = 256;
    /* One service thread per core: each has its own sessions, so the fan-out of a large
     * group runs on every core. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = cores < 1 ? 1 : cores > GW_THREADS_MAX ? GW_THREADS_MAX : (unsigned)cores;
    /* Far above a person at a keyboard, a bot, or the web demo pasting hundreds of lines
     * (all within one burst); a flat-out load generator is not a normal client and runs
     * with the limits off (tools/bench, tests/gateway/test_load.c). */
    c->rate_sends = 200;
    c->rate_bytes = 1u << 20;
    /* Generous: a NAT of many users reconnecting at once after a restart, or a load
     * generator's thousands of sessions from a few 127.x addresses, fit in one burst; a
     * single address flooding faster than the server can do TLS handshakes does not. */
    c->rate_conns = 1000;
    c->rate_burst_s = 10;
    c->handshake_timeout_s = 10;
    /* A household or an office behind one NAT, each person with a few tabs, fits; one
     * address holding the descriptors of the whole process does not. */
    c->conns_per_addr = 256;
    c->body_timeout_s = 30;
    c->store_high = 20000;
    c->store_overload = 200000;
    c->log_level = 2;
    c->api_rate = 1000;
    c->webhook_delay_ms = 5000;
    c->webhook_timeout_ms = 10000;
    c->webhook_queue = 10000;
    c->webhook_batch = 100;
    c->receipt_list_max = 100;
    c->receipt_push_ms = 1000;
    c->presence_list_max = 100;
    c->retain_cap = 1000000;
}

bool gw_config_node_ok(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == ':' || ch == '-'))
            return false;
    }
    return true;
}

void gw_config_set_node(gw_config *c, const char *name, int port)
{
    if (name)
        snprintf(c->node, sizeof(c->node), "%s", name);
    else if (!c->node_given)
        snprintf(c->node, sizeof(c->node), "%.40s:%d", c->listen, port);
    c->node_given = c->node_given || name;
}

int gw_config_parse(gw_config *c, int argc, char **argv)
{
    defaults(c);
    const char *secret_file = NULL, *node = NULL, *webhook_secret = NULL;
    int opt;
    long long v;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        const char *name = option_name(opt);
        const num_option *no = num_option_of(opt);
        if (no) {
            if (number(name, optarg, no->lo, no->hi, &v))
                return -1;
            num_store(c, no, v);
            continue;
        }
        int rc = 0;
        switch (opt) {
        case O_LISTEN: c->listen = optarg; break;
        case O_PORT_FILE: c->port_file = optarg; break;
        case O_DATA: c->data = optarg; break;
        case O_STORE: c->store_url = optarg; break;
        case O_NODE: node = optarg; break;
        case O_API_KEY_FILE: c->api_key_file = optarg; break;
        case O_WEBHOOK_URL: c->webhook_url = optarg; break;
        case O_WEBHOOK_SECRET: webhook_secret = optarg; break;
        case O_WEBHOOK_BODY: c->webhook_body = true; break;
        case O_RETAIN_UNTIL_ACKED: c->retain_until_acked = true; break;
        case O_RETAIN_CHANGES: {
            size_t n = strlen(optarg);
            c->retain_changes = c->retain_changes_ms = 0;
            if (strcmp(optarg, "all") == 0) {
                c->retain_changes = UINT64_MAX;
            } else if (n > 1 && optarg[n - 1] == 'd') {
                char days[32];
                snprintf(days, sizeof(days), "%.*s", (int)(n - 1), optarg);
                rc = number(name, days, 1, 36500, &v);
                c->retain_changes_ms = (uint64_t)v * 86400000u;
            } else {
                rc = number(name, optarg, 0, 1000000000000LL, &v);
                c->retain_changes = v ? (uint64_t)v : UINT64_MAX;
            }
            break;
        }
        case O_INSECURE: c->insecure = true; break;
        case O_CERT: c->cert = optarg; break;
        case O_KEY: c->key = optarg; break;
        case O_SECRET_FILE: secret_file = optarg; break;
        case O_NO_SYNC: c->sync = false; break;
        case O_CLOSED_GROUPS: c->open_groups = false, c->managed_groups = false; break;
        case O_GROUPS:
            if (strcmp(optarg, "open") == 0 || strcmp(optarg, "existing") == 0 ||
                strcmp(optarg, "managed") == 0) {
                c->open_groups = strcmp(optarg, "open") == 0;
                c->managed_groups = strcmp(optarg, "managed") == 0;
            } else {
                fprintf(stderr, "gw: --groups %s: open, existing or managed\n", optarg);
                rc = -1;
            }
            break;
        case O_DEMO: c->demo = true; break;
        case O_WEB_ROOT: c->web_root = optarg; break;
        case O_DEMO_ANY_ADDRESS: c->demo_any_address = true; break;
        case O_HELP: help(); return 1;
        default: fprintf(stderr, "gw: see --help\n"); return -1;
        }
        if (rc)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "gw: unexpected argument '%s' (see --help)\n", argv[optind]);
        return -1;
    }
    if (!c->cert != !c->key) {
        fprintf(stderr, "gw: --cert and --key go together (give both, or neither for a "
                        "self-signed certificate made in the data folder)\n");
        return -1;
    }
    if (c->insecure && c->cert) {
        fprintf(stderr, "gw: --insecure turns TLS off: it cannot be used with --cert/--key\n");
        return -1;
    }
    if (c->store_url && strncmp(c->store_url, "postgresql://", 13) != 0 &&
        strncmp(c->store_url, "postgres://", 11) != 0 && strncmp(c->store_url, "shards:", 7) != 0 &&
        strncmp(c->store_url, "etcd://", 7) != 0) {
        fprintf(stderr, "gw: --store takes a PostgreSQL URI (postgresql://host/dbname), or a "
                        "slot map of several (shards:PATH, etcd://HOST:PORT/KEY); without it "
                        "the store is RocksDB in --data\n");
        return -1;
    }
    if (node && !gw_config_node_ok(node)) {
        fprintf(stderr,
                "gw: --node '%s': 1 to 64 letters, digits and . _ : - only (it is a "
                "Prometheus label value and an application_name)\n",
                node);
        return -1;
    }
    gw_config_set_node(c, node, c->port);
    if (c->demo && !c->demo_any_address && !listen_is_loopback(c->listen)) {
        fprintf(stderr,
                "gw: --demo gives a token to anyone who asks, and --listen %s is not a "
                "loopback address: add --demo-any-address to do it anyway, or listen on "
                "127.0.0.1\n",
                c->listen);
        return -1;
    }
    if (c->page_default > c->page_max) {
        fprintf(stderr, "gw: --page-default %u is above --page-max %u\n", c->page_default,
                c->page_max);
        return -1;
    }
    if (c->max_body + 1024 > c->max_frame) {
        fprintf(stderr,
                "gw: --max-body %zu leaves no room in --max-frame %zu for the other "
                "fields (need 1024 bytes more)\n",
                c->max_body, c->max_frame);
        return -1;
    }
    /* A frame is paid for from the byte bucket; one that can never fit in it would make
     * every full-size send wait forever. */
    if (c->rate_bytes && (uint64_t)c->rate_bytes * c->rate_burst_s < c->max_frame) {
        fprintf(stderr,
                "gw: --rate-bytes %zu with --rate-burst %u holds less than one "
                "--max-frame (%zu bytes): a full-size frame could never be sent\n",
                c->rate_bytes, c->rate_burst_s, c->max_frame);
        return -1;
    }
    if (c->webhook_url && strncmp(c->webhook_url, "http://", 7) != 0 &&
        strncmp(c->webhook_url, "https://", 8) != 0) {
        fprintf(stderr, "gw: --webhook-url %s: an http:// or https:// URL\n", c->webhook_url);
        return -1;
    }
    if (!c->webhook_url != !webhook_secret) {
        fprintf(stderr, "gw: --webhook-url and --webhook-secret-file go together (events are "
                        "always signed: docs/API.md)\n");
        return -1;
    }
    /* A pass reads the stored acks: one not yet persisted would look unread. */
    if (c->webhook_url && c->webhook_delay_ms <= c->ack_flush_ms) {
        fprintf(stderr,
                "gw: --webhook-delay %u must be longer than --ack-flush-ms %u (acks "
                "are read from the store)\n",
                c->webhook_delay_ms, c->ack_flush_ms);
        return -1;
    }
    if (webhook_secret &&
        read_secret("webhook-secret-file", webhook_secret, c->webhook_secret, &c->webhook_secret_n))
        return -1;
    const char *env = getenv("GW_SECRET");
    if (secret_file) {
        if (read_secret("secret-file", secret_file, c->secret, &c->secret_n))
            return -1;
    } else if (env && *env) {
        size_t n = strlen(env);
        if (n < 16 || n > sizeof(c->secret)) {
            fprintf(stderr, "gw: GW_SECRET must be 16 to 256 bytes\n");
            return -1;
        }
        memcpy(c->secret, env, n);
        c->secret_n = n;
    }
    return 0;
}
