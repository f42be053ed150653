/*
 * gw_crash's helpers for clusters (docs/RELIABILITY.md, "Across a cluster"): the gateway
 * nodes it starts, kills and restarts; the shell commands it runs while its clients keep
 * sending (tools/pg_server.sh kill, promote, rejoin take seconds, and the traffic must go
 * on through them); /healthz of a node; and the final check of what the database holds.
 * Declared in gw_crash.h.
 */
#include "gw_crash.h"
#include "proto.h" /* msgpack, to read the records */

#include <endian.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct node {
    pid_t pid; /* 0: down */
    int port;
    char url[64];
} node;

static node nodes[MAX_NODES];
static int n_nodes;
static const char *gw_bin, *store_url, *secret, *base_dir;
static pid_t cmd_pid;                 /* the command running now, if any (its own process group) */
static const char *const *extra_args; /* nodes_extra_args */
static int n_extra;

void nodes_init(const char *gw, const char *store, const char *secret_, const char *dir, int n)
{
    gw_bin = gw;
    store_url = store;
    secret = secret_;
    base_dir = dir;
    n_nodes = n < 1 ? 1 : n > MAX_NODES ? MAX_NODES : n;
}

void nodes_extra_args(const char *const *args, int n)
{
    extra_args = args;
    n_extra = n < 0 ? 0 : n > 8 ? 8 : n;
}

/* A child that must not keep the harness's sockets open (a gateway, or a database server
 * that a command starts and that outlives it: a copy of a client's socket would keep that
 * session open on its node after the client closed it), nor outlive the harness. */
static void child_setup(const char *log)
{
    if (log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
    }
    close_range(3, ~0u, 0);
}

/* One node: as a single gateway always was (DIR/port, DIR/data, DIR/gw.log, no name), or
 * node i+1 of several (DIR/n1.port, DIR/n1-data, DIR/n1.log, --node n1). */
static void node_paths(int i, char *pf, char *data, char *logf, char *name, size_t n)
{
    if (n_nodes == 1) {
        snprintf(pf, n, "%s/port", base_dir);
        snprintf(data, n, "%s/data", base_dir);
        snprintf(logf, n, "%s/gw.log", base_dir);
        name[0] = 0;
    } else {
        snprintf(pf, n, "%s/n%d.port", base_dir, i + 1);
        snprintf(data, n, "%s/n%d-data", base_dir, i + 1);
        snprintf(logf, n, "%s/n%d.log", base_dir, i + 1);
        snprintf(name, n, "n%d", i + 1);
    }
}

/* Starts node i on a free port (its data folder kept from before); false if it did not
 * write its port within 10 s. */
bool node_start(int i)
{
    char pf[300], data[300], logf[300], name[300];
    node_paths(i, pf, data, logf, name, sizeof(pf));
    unlink(pf);
    pid_t pid = fork();
    if (pid == 0) {
        /* Only stderr goes to the log, as before: the gateway writes nothing else. */
        FILE *l = freopen(logf, "a", stderr);
        (void)l;
        close_range(3, ~0u, 0);
        /* Killed with the harness, whatever kills it (a test's timeout). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setenv("GW_SECRET", secret, 1);
        /* Senders go flat out: the rate limits are off, they are not what is tested. */
        const char *argv[32] = {gw_bin,
                                "--insecure",
                                "--port",
                                "0",
                                "--port-file",
                                pf,
                                "--data",
                                data,
                                "--log-level",
                                "2", /* info: a failure's log says what the node did */
                                "--ack-flush-ms",
                                "200",
                                "--rate-sends",
                                "0",
                                "--rate-bytes",
                                "0",
                                NULL};
        int a = 16;
        if (store_url) {
            argv[a++] = "--store";
            argv[a++] = store_url;
        }
        if (name[0]) {
            argv[a++] = "--node";
            argv[a++] = name;
        }
        for (int x = 0; x < n_extra; x++)
            argv[a++] = extra_args[x];
        argv[a] = NULL;
        execv(gw_bin, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        return false;
    nodes[i].pid = pid;
    /* 60 s: a start during a failover waits for the database's connect timeouts. */
    for (int t = 0; t < 2400; t++) {
        FILE *f = fopen(pf, "r");
        int port = 0;
        if (f && fscanf(f, "%d", &port) == 1 && port > 0) {
            fclose(f);
            nodes[i].port = port;
            snprintf(nodes[i].url, sizeof(nodes[i].url), "ws://127.0.0.1:%d/ws", port);
            return true;
        }
        if (f)
            fclose(f);
        usleep(25000);
    }
    return false;
}

/* Its log, for messages to the person reading a failure. */
const char *node_log(int i)
{
    static char pf[300], data[300], logf[300], name[300];
    node_paths(i, pf, data, logf, name, sizeof(pf));
    return logf;
}

bool node_up(int i)
{
    return i >= 0 && i < n_nodes && nodes[i].pid > 0;
}

const char *node_url(int i)
{
    return nodes[i].url;
}

int node_port(int i)
{
    return node_up(i) ? nodes[i].port : 0;
}

/* SIGKILL, and reaped: no zombie holds its port or its pid. */
void node_kill(int i)
{
    if (nodes[i].pid <= 0)
        return;
    kill(nodes[i].pid, SIGKILL);
    waitpid(nodes[i].pid, NULL, 0);
    nodes[i].pid = 0;
}

/* SIGTERM: a clean stop (every write in flight confirmed, acks persisted). Returns its
 * wait status. */
int node_stop(int i)
{
    int st = 0;
    if (nodes[i].pid <= 0)
        return 0;
    kill(nodes[i].pid, SIGTERM);
    waitpid(nodes[i].pid, &st, 0);
    nodes[i].pid = 0;
    return st;
}

/* From die() and the signal handler: only async-signal-safe calls. */
void nodes_kill_all(void)
{
    for (int i = 0; i < n_nodes; i++)
        if (nodes[i].pid > 0)
            kill(nodes[i].pid, SIGKILL);
    if (cmd_pid > 0)
        kill(-cmd_pid, SIGKILL);
}

int node_connect(int port, int timeout_s)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {timeout_s, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The status code of GET /healthz on node i (200: its store takes writes), 0 if it did
 * not answer within a second. */
int node_healthz(int i)
{
    if (!node_up(i))
        return 0;
    int fd = node_connect(nodes[i].port, 1);
    if (fd < 0)
        return 0;
    int code = 0;
    char buf[64];
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
        ssize_t got = read(fd, buf, sizeof(buf) - 1);
        if (got > 0) {
            buf[got] = 0;
            if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
                code = 0;
        }
    }
    close(fd);
    return code;
}

long long node_metric(int i, const char *name)
{
    if (!node_up(i))
        return -1;
    int fd = node_connect(nodes[i].port, 2);
    if (fd < 0)
        return -1;
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    if (buf && write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1))
        for (ssize_t got; len < cap && (got = read(fd, buf + len, cap - len)) > 0;)
            len += (size_t)got;
    close(fd);
    long long v = -1;
    if (buf) {
        buf[len] = 0;
        size_t nl = strlen(name);
        for (const char *p = strstr(buf, name); p; p = strstr(p + 1, name))
            if (p > buf && p[-1] == '\n' && p[nl] == ' ') {
                v = strtoll(p + nl + 1, NULL, 10);
                break;
            }
    }
    free(buf);
    return v;
}

/* Runs `sh -c cmd` in the background (output to log), in a process group of its own so
 * that die() can end it with its children. One at a time. */
bool cmd_start(const char *cmd, const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        child_setup(log);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return false;
    setpgid(pid, pid); /* also here: die() may come before the child ran */
    cmd_pid = pid;
    return true;
}

/* True once the command has ended; *ok says whether it exited 0. */
bool cmd_done(bool *ok)
{
    int st;
    if (cmd_pid <= 0)
        return true;
    if (waitpid(cmd_pid, &st, WNOHANG) != cmd_pid)
        return false;
    cmd_pid = 0;
    *ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    return true;
}

/*
 * What the database holds of group gid, checked against what the senders saw confirmed
 * (confirmed[s][cid] = mid, 0 when not confirmed, cids 1..next_cid[s]-1 sent): the group's
 * messages are mids 1..last_mid, each once (dense); each record names its sender (from)
 * and the body "s<N>:<cid>" it sent (or "s<N>:<cid>:e", its edit), or is its sender's
 * tombstone (a recall: no body; its cid is the one gw.sends has for its mid); no
 * (sender, cid) is stored twice; every confirmed
 * cid is stored under its confirmed mid, in gw.msgs and in gw.sends. Prints its figures;
 * returns the number of problems, or -1 if the database could not be read.
 */
int db_acks(const char *url, const char *gid, const char *const *uids, int n, uint64_t *acks)
{
    PGconn *db = PQconnectdb(url);
    int rc = -1;
    if (PQstatus(db) == CONNECTION_OK) {
        const char *params[1] = {gid};
        PGresult *r = PQexecParams(db, "SELECT uid, ack FROM gw.members WHERE gid = $1", 1, NULL,
                                   params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            for (int row = 0; row < PQntuples(r); row++)
                for (int i = 0; i < n; i++)
                    if (strcmp(PQgetvalue(r, row, 0), uids[i]) == 0)
                        acks[i] = strtoull(PQgetvalue(r, row, 1), NULL, 10);
            rc = 0;
        }
        PQclear(r);
    }
    PQfinish(db);
    return rc;
}

long db_check(const char *url, const char *gid, int senders, uint64_t *const *confirmed,
              const uint64_t *next_cid, long *twice_out)
{
    PGconn *db = PQconnectdb(url);
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "gw_crash: cannot read the database: %s", PQerrorMessage(db));
        PQfinish(db);
        return -1;
    }
    long problems = 0;
    uint64_t **stored = calloc((size_t)senders, sizeof(*stored));
    for (int s = 0; s < senders; s++)
        stored[s] = calloc(next_cid[s], sizeof(uint64_t));
    const char *params[1] = {gid};
    PGresult *g = PQexecParams(db, "SELECT last_mid FROM gw.groups WHERE gid = $1", 1, NULL, params,
                               NULL, NULL, 0);
    /* Binary results: mid as 8 bytes in network order, the record as it is. */
    PGresult *m = PQexecParams(db, "SELECT mid, record FROM gw.msgs WHERE gid = $1 ORDER BY mid", 1,
                               NULL, params, NULL, NULL, 1);
    PGresult *sd = PQexecParams(db, "SELECT uid, cid, mid FROM gw.sends WHERE gid = $1", 1, NULL,
                                params, NULL, NULL, 0);
    if (PQresultStatus(g) != PGRES_TUPLES_OK || PQntuples(g) != 1 ||
        PQresultStatus(m) != PGRES_TUPLES_OK || PQresultStatus(sd) != PGRES_TUPLES_OK) {
        fprintf(stderr, "gw_crash: cannot read the group from the database: %s",
                PQerrorMessage(db));
        problems = -1;
        goto out;
    }
    uint64_t last_mid = strtoull(PQgetvalue(g, 0, 0), NULL, 10);
    /* mid -> the cid gw.sends has for it (a tombstone names no cid; its sender's row does). */
    uint64_t *cid_of = calloc(last_mid + 1, sizeof(*cid_of));
    for (int i = 0; cid_of && i < PQntuples(sd); i++) {
        uint64_t mid = strtoull(PQgetvalue(sd, i, 2), NULL, 10);
        if (mid <= last_mid)
            cid_of[mid] = strtoull(PQgetvalue(sd, i, 1), NULL, 10);
    }
    long rows = PQntuples(m), twice = 0, foreign = 0, wrong_mid = 0, missing = 0;
    long unconfirmed = 0, sends_off = 0;
    uint64_t top = 0;
    for (long i = 0; i < rows; i++) {
        uint64_t mid;
        memcpy(&mid, PQgetvalue(m, (int)i, 0), sizeof(mid));
        mid = be64toh(mid);
        top = mid > top ? mid : top;
        /* A record: the pairs "from" uid and "body" text, without a map header. */
        const char *rec = PQgetvalue(m, (int)i, 1);
        size_t rec_n = (size_t)PQgetlength(m, (int)i, 1), off = 0;
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        char from[32] = "", body[64] = "";
        for (int f = 0; f < 4; f++) {
            if (msgpack_unpack_next(&u, rec, rec_n, &off) != MSGPACK_UNPACK_SUCCESS)
                break;
            const msgpack_object *o = &u.data;
            const char *p = o->type == MSGPACK_OBJECT_STR   ? o->via.str.ptr
                            : o->type == MSGPACK_OBJECT_BIN ? o->via.bin.ptr
                                                            : NULL;
            uint32_t n = o->type == MSGPACK_OBJECT_STR   ? o->via.str.size
                         : o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size
                                                         : 0;
            if (f == 1 && p)
                snprintf(from, sizeof(from), "%.*s", (int)n, p);
            if (f == 3 && p)
                snprintf(body, sizeof(body), "%.*s", (int)n, p);
        }
        msgpack_unpacked_destroy(&u);
        if (!body[0] && from[0] == 's' && cid_of && cid_of[mid]) /* a tombstone */
            snprintf(body, sizeof(body), "%s:%lu", from, (unsigned long)cid_of[mid]);
        char *colon = strchr(body, ':');
        int s = body[0] == 's' && colon ? atoi(body + 1) : -1;
        uint64_t cid = colon ? strtoull(colon + 1, NULL, 10) : 0;
        if (s < 0 || s >= senders || !cid || cid >= next_cid[s] ||
            strncmp(from, body, (size_t)(colon - body)) != 0 || from[colon - body] != 0) {
            if (foreign++ < 3)
                fprintf(stderr,
                        "gw_crash: mid %lu holds a message the harness did not send "
                        "(from %s, body %s)\n",
                        (unsigned long)mid, from, body);
            continue;
        }
        if (stored[s][cid]) {
            if (twice++ < 3)
                fprintf(stderr, "gw_crash: %s stored twice, as mids %lu and %lu\n", body,
                        (unsigned long)stored[s][cid], (unsigned long)mid);
            continue;
        }
        stored[s][cid] = mid;
        if (!confirmed[s][cid]) {
            unconfirmed++;
        } else if (confirmed[s][cid] != mid) {
            if (wrong_mid++ < 3)
                fprintf(stderr, "gw_crash: %s confirmed as mid %lu, stored as mid %lu\n", body,
                        (unsigned long)confirmed[s][cid], (unsigned long)mid);
        }
    }
    for (int s = 0; s < senders; s++)
        for (uint64_t cid = 1; cid < next_cid[s]; cid++)
            if (confirmed[s][cid] && !stored[s][cid] && missing++ < 3)
                fprintf(stderr, "gw_crash: s%d:%lu confirmed as mid %lu, not in the database\n", s,
                        (unsigned long)cid, (unsigned long)confirmed[s][cid]);
    /* Each stored message has its row in gw.sends (the idempotency of a resend), under the
     * same mid. */
    long sends_rows = PQntuples(sd);
    for (long i = 0; i < sends_rows; i++) {
        const char *uid = PQgetvalue(sd, (int)i, 0);
        int s = uid[0] == 's' ? atoi(uid + 1) : -1;
        uint64_t cid = strtoull(PQgetvalue(sd, (int)i, 1), NULL, 10);
        uint64_t mid = strtoull(PQgetvalue(sd, (int)i, 2), NULL, 10);
        if (s < 0 || s >= senders || !cid || cid >= next_cid[s] || stored[s][cid] != mid)
            sends_off++;
    }
    if (sends_rows != rows)
        sends_off++;
    /* Distinct mids (the primary key) from 1: dense when the highest is their number. */
    long holes = (long)(top - (uint64_t)rows) + (last_mid != top);
    problems = holes + twice + foreign + wrong_mid + missing + sends_off;
    if (twice_out)
        *twice_out = twice;
    printf("gw_crash: the database holds %ld messages of the group (last_mid %lu), %ld "
           "stored but never confirmed, %ld holes, %ld stored twice, %ld not the harness's, "
           "%ld under another mid than confirmed, %ld confirmed and missing, %ld rows of "
           "sends that disagree\n",
           rows, (unsigned long)last_mid, unconfirmed, holes, twice, foreign, wrong_mid, missing,
           sends_off);
    free(cid_of);
out:
    PQclear(g);
    PQclear(m);
    PQclear(sd);
    PQfinish(db);
    for (int s = 0; s < senders; s++)
        free(stored[s]);
    free(stored);
    return problems;
}

long db_count(const char *url, const char *gid)
{
    PGconn *db = PQconnectdb(url);
    long n = -1;
    if (PQstatus(db) == CONNECTION_OK) {
        const char *params[1] = {gid};
        PGresult *r = PQexecParams(db, "SELECT count(*) FROM gw.msgs WHERE gid = $1", 1, NULL,
                                   params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    PQfinish(db);
    return n;
}
