/*
 * gw_cli internals: what the files of the command-line client share.
 *
 *   gw_cli.c       options, usage, and the one-request commands (groups, join, leave)
 *   gw_cli_conn.c  the token, connecting, signing in, requests with bounded waits,
 *                  reconnecting, cli_stop; it calls none of the other files
 *   gw_cli_out.c   printing messages and replies as text or as JSON lines
 *   gw_cli_send.c  send: one message, or each line of standard input
 *   gw_cli_tail.c  tail (live, acked, resumed after a disconnect) and pull (pages)
 *   gw_cli_peers.c receipts and who (what the members see of each other)
 *   gw_cli_changes.c changes (what changed after a cseq) and react
 *
 * Everything is single-threaded. Failures are reported on stderr where they are found;
 * functions return 0 or -1, or an exit code (CLI_EXIT_*) for the commands.
 */
#ifndef GW_CLI_H
#define GW_CLI_H

#include "ackrule.h"
#include "gwc.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2
#define CLI_NAME "gw_cli"
#define CLI_CID_PREFIX_MAX 40 /* leaves room for "-" and a line number in a 64-byte cid */
#define CLI_DRAIN_MAX 256     /* events handled in a row before timers are looked at */

/* What the command line asked for. Strings borrow from argv or the environment. */
typedef struct cli_opts {
    const char *url;
    const char *ca_file;    /* wss: trust this CA or certificate (PEM) */
    bool insecure;          /* wss: do not verify the certificate */
    bool json;              /* JSON lines instead of text */
    int timeout_ms;         /* connect and every reply */
    int retry_ms;           /* keep reconnecting this long after a lost connection; 0: never */
    const char *cid_prefix; /* send */
    long count;             /* tail: stop after this many messages (0: no limit) */
    int seconds_ms;         /* tail: stop after this long (0: no limit) */
    bool has_after, has_before;
    uint64_t after, before; /* pull */
    uint32_t limit;         /* pull: page size (0: the server's default) */
    bool all;               /* pull: page until more is false */
    bool off;               /* react: clear the reaction */
    bool ack;               /* pull: ack what was printed */
    const char *token_file; /* read again for a new token after a sign-out (NULL: none) */
} cli_opts;

/* One client: options, the token, and the current connection. */
typedef struct cli {
    cli_opts o;
    char *token;       /* owned */
    gwc_ctx *ctx;      /* owned */
    gwc_conn *k;       /* the current connection, NULL while there is none */
    uint64_t next_rid; /* rids of requests; hello uses 0 */
    char why[512];     /* why the last attempt to sign in failed */
    /* From the latest welcome (the ack cadence for ackrule.h). */
    uint32_t ack_every, ack_delay_ms, max_body;
    pr_event welcome; /* borrows from k until the next gwc_next on it */
} cli;

/* Set by SIGINT and SIGTERM (gw_cli.c's handler): long-running commands finish cleanly. */
extern volatile sig_atomic_t cli_stop;

/* gw_cli_conn.c */
int64_t cli_now_ms(void);
int64_t cli_wall_ms(void); /* ms since the epoch */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
pr_slice cli_slice(const char *s);
/* Connects and signs in (closing the previous connection first): 0 with c->k open and
 * c->welcome set, or -1 after saying why. */
int cli_open_or_say(cli *c);
/* After a lost connection: says so, then signs in again with backoff until it works, a
 * fatal failure, cli_stop, or `until` (ms, cli_now_ms clock). Returns 0 or -1 (said why). */
int cli_reopen(cli *c, const char *what, int64_t until);
/* The token: --token (arg), --token-file (file) or $GW_TOKEN, trimmed of surrounding white
 * space, into *out (the caller's, to free). CLI_EXIT_OK, or CLI_EXIT_USAGE or CLI_EXIT_FAIL
 * after saying why. */
int cli_load_token(const char *arg, const char *file, char **out);
/* The application's new token, after a sign-out or a refusal: --token-file read again.
 * 0 when it holds a token other than c->token (now in it), else -1 (quietly). */
int cli_token_again(cli *c);
/* Why c->k closed, in words (a static buffer). */
const char *cli_close_reason(const cli *c);
/* Finds gid in c->welcome; true and *g if the user is a member. */
bool cli_welcome_group(const cli *c, const char *gid, pr_group *g);
/* cli_open_or_say, then the group in the welcome: 0 with *g, or -1 after saying why (not a
 * member). */
int cli_open_member(cli *c, const char *gid, pr_group *g);
/* Sends an encoded frame on c->k. Returns 0 or a GWC_E* code. */
int cli_send(cli *c, const msgpack_sbuffer *sb);
/* Sends a request with rid and waits up to the timeout for the reply with that rid,
 * skipping pushes. 0 with *ev of type want; -1 after saying why (an `err` reply, a
 * closed connection, or no reply in time). */
int cli_request(cli *c, const msgpack_sbuffer *sb, uint64_t rid, enum pr_ev_type want,
                const char *gid, pr_event *ev);
/* Says what an `err` event means, for gid when not NULL. */
void cli_say_err(const pr_event *ev, const char *gid);
/* Sends ack {gid: mid}. Returns 0 or a GWC_E* code. */
int cli_send_ack(cli *c, const char *gid, uint64_t mid);
/* Sends what an encoder just wrote into sb (enc_rc: the encoder's return, nonzero when out
 * of memory), then destroys sb: for the loops that reconnect. 1 sent; 0 the connection is
 * closed (the loop reconnects); -1 failed, said ("cannot send[ what]: ..."). */
int cli_send_built(cli *c, msgpack_sbuffer *sb, int enc_rc, const char *what);

/* gw_cli_out.c: every function writes to stdout. */
void out_message(const cli *c, pr_slice gid, const pr_message *m);
void out_group(const cli *c, const pr_group *g);
void out_joined(const cli *c, const pr_event *ev);
void out_left(const cli *c, const pr_event *ev);
void out_sent(const cli *c, const pr_event *ev);
void out_receipts(const cli *c, const pr_event *ev);
/* now: wall-clock ms, for "last seen ... ago". */
void out_presence(const cli *c, const pr_event *ev, uint64_t now);
/* A reacted reply; the end of a changes walk (upto, last_cseq, first_mid, gone). */
void out_reacted(const cli *c, const pr_event *ev);
void out_changes_end(const cli *c, pr_slice gid, const pr_event *ev);
/* Flushes stdout; -1 after saying why if the output cannot be written. */
int out_flush(void);

/* Commands: each returns an exit code. */
int cli_cmd_send(cli *c, const char *gid, int argc, char **argv);
int cli_cmd_tail(cli *c, const char *gid);
int cli_cmd_pull(cli *c, const char *gid);
int cli_cmd_receipts(cli *c, const char *gid, uint64_t mid);
int cli_cmd_who(cli *c, const char *gid);
/* edit GID MID TEXT (text NULL: recall GID MID): prints the message's new version. */
int cli_cmd_edit(cli *c, const char *gid, uint64_t mid, const char *text);

/* changes GID [--after C] [--limit N]: every change after cseq C (0: all the log keeps),
 * page by page, as messages in their current state, then a line with `upto`. */
int cli_cmd_changes(cli *c, const char *gid);
/* react GID MID KEY [--off]: sets (clears) the reaction; prints the key's count. */
int cli_cmd_react(cli *c, const char *gid, uint64_t mid, const char *key);

#endif
