/*
 * gw_crash's cluster helpers (gw_crash_nodes.c), for gw_crash.c: the gateway nodes it
 * starts, kills and restarts; the shell commands it runs while its clients keep sending
 * (tools/pg_server.sh kill, promote, rejoin take seconds, and the traffic goes on through
 * them); a node's /healthz; and the final check of what the database holds.
 */
#ifndef GW_CRASH_H
#define GW_CRASH_H

#include <stdbool.h>
#include <stdint.h>

#define MAX_NODES 16

/* The gw binary, the store's URL, the token secret, the folder the nodes' data folders go
 * in, and how many nodes (1..MAX_NODES). Borrowed: they must outlive the nodes. */
void nodes_init(const char *gw, const char *store, const char *secret, const char *dir, int n);
/* More arguments for every node's command line (at most 8; borrowed, like the above):
 * gw_converge's API key file and retention. */
void nodes_extra_args(const char *const *args, int n);
/* Starts node i (again: on its data folder, a new free port); false if it did not come up. */
bool node_start(int i);
const char *node_log(int i);
bool node_up(int i);
/* ws://127.0.0.1:PORT/ws of node i (valid until it is started again). */
const char *node_url(int i);
/* The port of node i (its WebSocket and its API), 0 when it is down. */
int node_port(int i);
/* SIGKILL of node i (waits for it). */
void node_kill(int i);
/* SIGTERM of node i; its exit status. */
int node_stop(int i);
void nodes_kill_all(void);
/* GET /healthz of node i: the status, 0 when it does not answer. */
int node_healthz(int i);
/* A TCP connection to port on 127.0.0.1 (a node's), its reads and writes bounded by
 * timeout_s: the socket (the caller's to close), or -1. */
int node_connect(int port, int timeout_s);
/* Runs cmd through the shell in the background (its output to log); one at a time. */
bool cmd_start(const char *cmd, const char *log);
/* True once the command has ended (*ok: it exited 0). */
bool cmd_done(bool *ok);
/* The value of a gauge or counter in node i's /metrics (e.g. gw_store_slot_map_version):
 * -1 when the node does not answer or has no such line. */
long long node_metric(int i, const char *name);
/* The stored acks of uids[0..n) in group gid (acks[i] left as it is for a uid that is not
 * a member): 0, or -1 if the database could not be read. */
int db_acks(const char *url, const char *gid, const char *const *uids, int n, uint64_t *acks);
/* Checks what the database at url holds of gid against what the senders saw confirmed
 * (confirmed[s][cid] = mid, cids below next_cid[s]); prints its figures and returns the
 * number of problems, or -1 if the database could not be read. *twice (NULL: not asked)
 * gets the (sender, cid) pairs stored more than once. */
long db_check(const char *url, const char *gid, int senders, uint64_t *const *confirmed,
              const uint64_t *next_cid, long *twice);
/* The messages of gid in the database at url (a shard it has left holds none): their
 * number, or -1 if the database could not be read. */
long db_count(const char *url, const char *gid);

#endif
