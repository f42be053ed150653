/*
 * gw_cli, the command-line client, run as a program against the real gateway: groups with
 * unread counts, join and send from stdin, tail printing each message once as JSON lines,
 * pull page by page, wss:// with and without the test certificate, refusals with clear
 * errors and exit codes, and a tail that resumes after the gateway is killed and restarted.
 * Also the client-side ack rule that gw_cli's tail and gw_load share (tools/common/ackrule.h),
 * as a unit: no gateway, times given.
 */
#include "../../tools/common/ackrule.h"
#include "gwfx.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 32
#define MAX_KIDS 8
#define TOKEN_CAP 1024

static gwfx f;
static pid_t kids[MAX_KIDS]; /* gw_cli processes still running, killed at the end */
static int n_runs;

typedef struct cli_run {
    pid_t pid;
    char out[320], err[320]; /* files holding its stdout and stderr */
} cli_run;

static void start_ws(void)
{
    gwfx_start(&f, NULL);
}

static void start_tls(void)
{
    gwfx_start_tls(&f, NULL);
}

static void stop(void)
{
    for (int i = 0; i < MAX_KIDS; i++)
        if (kids[i] > 0) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
            kids[i] = 0;
        }
    gwfx_cleanup(&f);
}

TestSuite(cli, .timeout = 90);

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* GW_BINARY is <build>/gw; the client is <build>/tools/gw_cli. */
static const char *cli_path(void)
{
    static char path[512];
    if (!path[0]) {
        snprintf(path, sizeof(path), "%s", GW_BINARY);
        char *slash = strrchr(path, '/');
        cr_assert_not_null(slash);
        snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "tools/gw_cli");
        cr_assert_eq(access(path, X_OK), 0, "%s is not built", path);
    }
    return path;
}

/* A token for uid in a static buffer (a few stay valid at once). */
static const char *tok(const char *uid)
{
    static char bufs[6][TOKEN_CAP];
    static int next;
    char *t = gwfx_token(uid), *b = bufs[next++ % 6];
    snprintf(b, TOKEN_CAP, "%s", t);
    free(t);
    return b;
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "cannot read %s", path);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)len + 1);
    size_t got = fread(s, 1, (size_t)len, fp);
    s[got] = '\0';
    fclose(fp);
    return s;
}

/*
 * Starts gw_cli --url <the fixture's> --timeout 5 ARGS... with GW_TOKEN = token (NULL:
 * unset) and stdin from input (NULL: /dev/null). args end with NULL.
 */
static void spawn_v(cli_run *r, const char *token, const char *input, va_list ap)
{
    const char *argv[MAX_ARGS] = {cli_path(), "--url", f.url, "--timeout", "5"};
    int n = 5;
    const char *a;
    while ((a = va_arg(ap, const char *))) {
        cr_assert_lt(n, MAX_ARGS - 1);
        argv[n++] = a;
    }
    argv[n] = NULL;
    int id = n_runs++;
    char in[320];
    snprintf(in, sizeof(in), "%s/cli-in-%d", f.dir, id);
    snprintf(r->out, sizeof(r->out), "%s/cli-out-%d", f.dir, id);
    snprintf(r->err, sizeof(r->err), "%s/cli-err-%d", f.dir, id);
    if (input) {
        FILE *fp = fopen(in, "wb");
        cr_assert_not_null(fp);
        fwrite(input, 1, strlen(input), fp);
        fclose(fp);
    }
    r->pid = fork();
    cr_assert_neq(r->pid, -1);
    if (r->pid == 0) {
        int fi = open(input ? in : "/dev/null", O_RDONLY);
        int fo = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(r->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fi < 0 || fo < 0 || fe < 0)
            _exit(126);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        if (token)
            setenv("GW_TOKEN", token, 1);
        else
            unsetenv("GW_TOKEN");
        unsetenv("GW_URL");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < MAX_KIDS; i++)
        if (kids[i] <= 0) {
            kids[i] = r->pid;
            break;
        }
}

static void spawn(cli_run *r, const char *token, const char *input, ...)
{
    va_list ap;
    va_start(ap, input);
    spawn_v(r, token, input, ap);
    va_end(ap);
}

/* Waits for it to exit; returns its exit code. */
static int finish(cli_run *r, int timeout_ms)
{
    long t0 = now_ms();
    int status = 0;
    pid_t got;
    while ((got = waitpid(r->pid, &status, WNOHANG)) == 0 && now_ms() - t0 < timeout_ms)
        usleep(10000);
    for (int i = 0; i < MAX_KIDS; i++)
        if (kids[i] == r->pid)
            kids[i] = 0;
    if (got == 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        char *err = slurp(r->err);
        cr_assert_fail("gw_cli did not finish within %d ms; stderr: %s", timeout_ms, err);
    }
    cr_assert(WIFEXITED(status), "gw_cli died of signal %d", WTERMSIG(status));
    return WEXITSTATUS(status);
}

/* Runs gw_cli to its end: its exit code, with stdout and stderr in *out and *err (malloc'd,
 * may be NULL to ignore). */
static int cli_v(const char *token, const char *input, char **out, char **err, va_list ap)
{
    cli_run r;
    spawn_v(&r, token, input, ap);
    int rc = finish(&r, 30000);
    if (out)
        *out = slurp(r.out);
    if (err)
        *err = slurp(r.err);
    return rc;
}

static int cli(const char *token, const char *input, char **out, char **err, ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = cli_v(token, input, out, err, ap);
    va_end(ap);
    return rc;
}

/* Runs gw_cli and requires exit 0. */
static void cli_ok(const char *token, const char *input, ...)
{
    char *err = NULL;
    va_list ap;
    va_start(ap, input);
    int rc = cli_v(token, input, NULL, &err, ap);
    va_end(ap);
    cr_assert_eq(rc, 0, "gw_cli exited %d: %s", rc, err);
    free(err);
}

/* Splits JSON lines: each line must parse. Returns a jansson array (caller frees). */
static json_t *json_lines(const char *text)
{
    json_t *arr = json_array();
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        cr_assert_not_null(nl, "output does not end with a newline: %s", p);
        json_error_t jerr;
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, &jerr);
        cr_assert_not_null(j, "not JSON (%s): %.*s", jerr.text, (int)(nl - p), p);
        json_array_append_new(arr, j);
        p = nl + 1;
    }
    return arr;
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "no integer %s", key);
    return (long long)json_integer_value(v);
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_string(v), "no string %s", key);
    return json_string_value(v);
}

/* The group's entry in `gw_cli --json groups` for uid (NULL if not a member). */
static json_t *group_of(const char *uid, const char *gid)
{
    char *out;
    cr_assert_eq(cli(tok(uid), NULL, &out, NULL, "--json", "groups", NULL), 0);
    json_t *all = json_lines(out), *found = NULL, *g;
    size_t i;
    json_array_foreach(all, i, g)
    {
        if (!strcmp(jstr(g, "gid"), gid))
            found = json_incref(g);
    }
    json_decref(all);
    free(out);
    return found;
}

static int count_lines(const char *path)
{
    FILE *fp = fopen(path, "r");
    int n = 0, ch;
    while (fp && (ch = fgetc(fp)) != EOF)
        n += ch == '\n';
    if (fp)
        fclose(fp);
    return n;
}

static int count_lines_in(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void wait_lines(const cli_run *r, int n)
{
    long t0 = now_ms();
    while (count_lines(r->out) < n && now_ms() - t0 < 10000)
        usleep(20000);
    cr_assert_geq(count_lines(r->out), n, "gw_cli printed %d of %d lines", count_lines(r->out), n);
}

Test(cli, usage_help_and_exit_codes, .init = start_ws, .fini = stop)
{
    char *out, *err;
    cr_assert_eq(cli(NULL, NULL, &out, NULL, "--help", NULL), 0);
    cr_assert(strstr(out, "usage: gw_cli"), "--help: %s", out);
    cr_assert(strstr(out, "Examples\n") && strstr(out, "Exit status\n"), "--help: %s", out);
    cr_assert(strstr(out, "tail GID"));
    free(out);
    cr_assert_eq(cli(NULL, NULL, &out, NULL, "help", NULL), 0);
    cr_assert(strstr(out, "usage: gw_cli"), "help: %s", out);
    free(out);
    cr_assert_eq(cli(NULL, NULL, NULL, NULL, NULL), 2, "no command is a usage error");
    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "frobnicate", NULL), 2);
    cr_assert(strstr(err, "unknown command"), "%s", err);
    free(err);
    cr_assert_eq(cli(tok("alice"), NULL, NULL, NULL, "join", NULL), 2, "join needs a GID");
    cr_assert_eq(cli(tok("alice"), NULL, NULL, NULL, "join", "not an id", NULL), 2);
    cr_assert_eq(cli(tok("alice"), NULL, NULL, NULL, "groups", "--count", "3", NULL), 2);
    cr_assert_eq(
        cli(tok("alice"), NULL, NULL, NULL, "pull", "g", "--after", "1", "--before", "3", NULL), 2);
    cr_assert_eq(cli(NULL, NULL, NULL, &err, "groups", NULL), 2, "no token is a usage error");
    cr_assert(strstr(err, "GW_TOKEN"), "%s", err);
    free(err);
}

Test(cli, groups_with_unread_counts, .init = start_ws, .fini = stop)
{
    cli_ok(tok("alice"), NULL, "join", "g1", NULL);
    char tok_file[320];
    snprintf(tok_file, sizeof(tok_file), "%s/alice.token", f.dir);
    FILE *tf = fopen(tok_file, "w");
    cr_assert_not_null(tf);
    fprintf(tf, "%s\n", tok("alice"));
    fclose(tf);
    cli_ok(NULL, NULL, "--token-file", tok_file, "join", "g2", NULL);
    cli_ok(tok("bob"), NULL, "join", "g1", NULL);
    cli_ok(tok("bob"), NULL, "send", "g1", "first", NULL);
    cli_ok(tok("bob"), NULL, "send", "g1", "second", "in", "words", NULL);
    cli_ok(tok("bob"), NULL, "send", "g1", "third", NULL);

    json_t *g1 = group_of("alice", "g1"), *g2 = group_of("alice", "g2");
    cr_assert_not_null(g1);
    cr_assert_not_null(g2);
    cr_assert_eq(jint(g1, "unread"), 3);
    cr_assert_eq(jint(g1, "last_mid"), 3);
    cr_assert_eq(jint(g1, "ack"), 0);
    cr_assert_eq(jint(g2, "unread"), 0);
    json_decref(g1);
    json_decref(g2);
    json_t *b1 = group_of("bob", "g1");
    cr_assert_eq(jint(b1, "last_mid"), 3); /* sending acks nothing: bob has 3 unread too */
    json_decref(b1);
    cr_assert_null(group_of("bob", "g2"));

    char *out;
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "groups", NULL), 0);
    cr_assert(strstr(out, "g1  unread=3 last_mid=3 ack=0\n"), "text groups: %s", out);
    cr_assert(strstr(out, "g2  unread=0"), "text groups: %s", out);
    free(out);

    cli_ok(tok("alice"), NULL, "leave", "g2", NULL);
    cr_assert_null(group_of("alice", "g2"));
}

/* alice and bob join gid, in that order, through the CLI; then alice sends each of
 * alice_says (NULL-terminated; may be NULL). */
static void alice_and_bob_in(const char *gid, const char *const *alice_says)
{
    cli_ok(tok("alice"), NULL, "join", gid, NULL);
    cli_ok(tok("bob"), NULL, "join", gid, NULL);
    for (int i = 0; alice_says && alice_says[i]; i++)
        cli_ok(tok("alice"), NULL, "send", gid, alice_says[i], NULL);
}

/* receipts GID MID and who GID, as text and as JSON. */
Test(cli, receipts_and_who_say_what_the_members_see, .init = start_ws, .fini = stop)
{
    alice_and_bob_in("r", (const char *const[]){"hello", NULL});
    /* bob reads it (pull --ack acks what it printed: with no read sent, his ack counts) */
    cli_ok(tok("bob"), NULL, "pull", "--ack", "r", NULL);
    char *out = NULL;
    for (int i = 0; i < 50; i++) { /* the ack is stored within --ack-flush-ms */
        free(out);
        cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "receipts", "r", "1", NULL), 0);
        if (strstr(out, "read by 1 of 2"))
            break;
        usleep(50 * 1000);
    }
    cr_assert(strstr(out, "r #1: delivered to 1, read by 1 of 2 (bob)\n"), "%s", out);
    free(out);
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "--json", "receipts", "r", "1", NULL), 0);
    json_t *all = json_lines(out), *o = json_array_get(all, 0);
    cr_assert_eq(jint(o, "delivered"), 1);
    cr_assert_eq(jint(o, "read"), 1);
    cr_assert_eq(jint(o, "of"), 2);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "readers"), 0)), "bob");
    json_decref(all);
    free(out);
    /* who: alice (asking) is online; bob was seen a moment ago. */
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "who", "r", NULL), 0);
    cr_assert(strstr(out, "r: 1 of 2 online\n"), "%s", out);
    cr_assert(strstr(out, "  alice  online\n"), "%s", out);
    cr_assert(strstr(out, "  bob  last seen "), "%s", out);
    free(out);
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "--json", "who", "r", NULL), 0);
    all = json_lines(out);
    o = json_array_get(all, 0);
    cr_assert_eq(jint(o, "online"), 1);
    cr_assert_eq(json_array_size(json_object_get(o, "members")), 2);
    json_decref(all);
    free(out);
    /* Usage and refusals. */
    char *err = NULL;
    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "receipts", "r", NULL), 2);
    free(err);
    cr_assert_eq(cli(tok("carol"), NULL, NULL, &err, "who", "r", NULL), 1);
    cr_assert(strstr(err, "not a member"), "%s", err);
    free(err);
}

/* edit and recall print the message's new version; pull shows it; others are refused. */
Test(cli, edit_and_recall_print_the_new_version, .init = start_ws, .fini = stop)
{
    alice_and_bob_in("e", (const char *const[]){"see you at 9", "oops", NULL});
    char *out = NULL, *err = NULL;
    cr_assert_eq(
        cli(tok("alice"), NULL, &out, NULL, "edit", "e", "1", "see", "you", "at", "10", NULL), 0);
    cr_assert_str_eq(out, "[e #1 edited v1] alice: see you at 10\n");
    free(out);
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "--json", "recall", "e", "2", NULL), 0);
    json_t *all = json_lines(out), *o = json_array_get(all, 0);
    cr_assert_eq(jint(o, "mid"), 2);
    cr_assert_eq(jint(o, "ver"), 1);
    cr_assert(json_is_true(json_object_get(o, "recalled")));
    cr_assert_null(json_object_get(o, "body"), "a tombstone has no body");
    json_decref(all);
    free(out);
    cr_assert_eq(cli(tok("bob"), NULL, &out, NULL, "pull", "--after", "0", "e", NULL), 0);
    cr_assert_str_eq(out, "[e #1 edited v1] alice: see you at 10\n[e #2] alice: (recalled)\n");
    free(out);
    cr_assert_eq(cli(tok("bob"), NULL, NULL, &err, "edit", "e", "1", "mine", "now", NULL), 1);
    cr_assert(strstr(err, "only its sender edits a message"), "%s", err);
    free(err);
    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "edit", "e", "1", NULL), 2, "no text");
    free(err);
}

/* react sets and clears a reaction (the count printed), and changes prints what changed
 * after a cursor in its state now, with the cursor to go on after. */
Test(cli, react_and_changes_after_a_cursor, .init = start_ws, .fini = stop)
{
    alice_and_bob_in("rc", (const char *const[]){"lunch?", "at noon", NULL});
    char *out = NULL, *err = NULL;
    /* Nothing changed yet: no messages, upto 0. */
    cr_assert_eq(cli(tok("bob"), NULL, &out, NULL, "changes", "rc", NULL), 0);
    cr_assert_str_eq(out, "# upto 0 last_cseq 0 first_mid 1\n");
    free(out);
    cr_assert_eq(cli(tok("bob"), NULL, &out, NULL, "react", "rc", "1", "ok", NULL), 0);
    cr_assert_str_eq(out, "[rc #1] ok on: 1 now (cseq 1)\n");
    free(out);
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "--json", "react", "rc", "1", "ok", NULL), 0);
    json_t *all = json_lines(out), *o = json_array_get(all, 0);
    cr_assert_eq(jint(o, "count"), 2);
    cr_assert_eq(jint(o, "cseq"), 2);
    cr_assert(json_is_true(json_object_get(o, "on")));
    json_decref(all);
    free(out);
    /* Again: idempotent, nothing changes. */
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "react", "rc", "1", "ok", NULL), 0);
    cr_assert_str_eq(out, "[rc #1] ok on: 2 now (cseq 2), unchanged\n");
    free(out);
    cli_ok(tok("alice"), NULL, "edit", "rc", "2", "at one", NULL);
    cr_assert_eq(cli(tok("bob"), NULL, &out, NULL, "react", "--off", "rc", "1", "ok", NULL), 0);
    cr_assert_str_eq(out, "[rc #1] ok off: 1 now (cseq 4)\n");
    free(out);
    /* After cseq 1: the edit (cseq 3) and #1 folded to its latest change (cseq 4). */
    cr_assert_eq(cli(tok("bob"), NULL, &out, NULL, "changes", "--after", "1", "rc", NULL), 0);
    cr_assert_str_eq(out, "[rc #2 edited v1] alice: at one\n[rc #1] alice: lunch?  {ok 1}\n"
                          "# upto 4 last_cseq 4 first_mid 1\n");
    free(out);
    cr_assert_eq(
        cli(tok("alice"), NULL, &out, NULL, "--json", "changes", "--limit", "1", "rc", NULL), 0);
    all = json_lines(out);
    cr_assert_eq(json_array_size(all), 3, "a page of one, twice, then the end: %s", out);
    o = json_array_get(all, 1);
    cr_assert_eq(jint(o, "mid"), 1);
    cr_assert_eq(jint(o, "cseq"), 4);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "reactions"), "ok")), 1);
    cr_assert_eq(json_array_size(json_object_get(o, "mine")), 1, "alice's ok: %s", out);
    cr_assert_eq(jint(json_array_get(all, 2), "upto"), 4);
    json_decref(all);
    free(out);
    /* Refusals: a bad key is a usage error; a mid the group does not have is refused. */
    cr_assert_eq(cli(tok("bob"), NULL, NULL, &err, "react", "rc", "1", "a\x01b", NULL), 2);
    cr_assert(strstr(err, "KEY"), "%s", err);
    free(err);
    cr_assert_eq(cli(tok("bob"), NULL, NULL, &err, "react", "rc", "99", "ok", NULL), 1);
    free(err);
    cr_assert_eq(cli(tok("bob"), NULL, NULL, &err, "react", "rc", "1", NULL), 2);
    free(err);
    cr_assert_eq(cli(tok("bob"), NULL, NULL, &err, "changes", "--off", "rc", NULL), 2);
    cr_assert(strstr(err, "--off is an option of react"), "%s", err);
    free(err);
    cr_assert_eq(cli(tok("carol"), NULL, NULL, &err, "changes", "rc", NULL), 1, "not a member");
    free(err);
}

Test(cli, send_stdin_lines_and_tail_them_as_json, .init = start_ws, .fini = stop)
{
    static const char *const lines[] = {
        "hello",
        "with \"quotes\" and \\backslash\\",
        "\ttab and \x01 control",
        "caf\xc3\xa9 \xe2\x82\xac",
        "",
        "last line",
    };
    const int n = (int)(sizeof(lines) / sizeof(lines[0]));
    char input[512] = "";
    for (int i = 0; i < n; i++) {
        strcat(input, lines[i]);
        strcat(input, i == n - 1 ? "\r\n" : "\n"); /* a CRLF line is the same text */
    }
    alice_and_bob_in("room", NULL);

    cli_run tail;
    char count[8];
    snprintf(count, sizeof(count), "%d", n);
    spawn(&tail, tok("alice"), NULL, "--json", "tail", "room", "--count", count, NULL);
    usleep(300000); /* mostly live pushes; entering after the ack would also get them */

    char *out, *err;
    cr_assert_eq(cli(tok("bob"), input, &out, &err, "--json", "send", "room", NULL), 0, "%s", err);
    json_t *sent = json_lines(out);
    cr_assert_eq(json_array_size(sent), (size_t)n, "one `sent` per line: %s", out);
    for (int i = 0; i < n; i++) {
        json_t *s = json_array_get(sent, (size_t)i);
        cr_assert_eq(jint(s, "mid"), i + 1);
        cr_assert_str_eq(jstr(s, "gid"), "room");
    }
    json_decref(sent);
    free(out);
    free(err);

    cr_assert_eq(finish(&tail, 15000), 0, "tail failed: %s", slurp(tail.err));
    out = slurp(tail.out);
    json_t *got = json_lines(out);
    cr_assert_eq(json_array_size(got), (size_t)n, "tail printed: %s", out);
    for (int i = 0; i < n; i++) {
        json_t *m = json_array_get(got, (size_t)i);
        cr_assert_str_eq(jstr(m, "gid"), "room");
        cr_assert_eq(jint(m, "mid"), i + 1);
        cr_assert_str_eq(jstr(m, "from"), "bob");
        cr_assert_gt(jint(m, "ts"), 0);
        cr_assert_str_eq(jstr(m, "body"), lines[i]);
        cr_assert_null(json_object_get(m, "enc"));
    }
    json_decref(got);
    free(out);

    /* tail acked what it printed when it ended. */
    json_t *g = group_of("alice", "room");
    cr_assert_eq(jint(g, "ack"), n);
    cr_assert_eq(jint(g, "unread"), 0);
    json_decref(g);

    /* A second tail starts after that ack: nothing is printed again. */
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "tail", "room", "--seconds", "0.5", NULL), 0);
    cr_assert_str_eq(out, "");
    free(out);

    /* Text output: [gid #mid] from: body, control characters escaped. */
    cr_assert_eq(
        cli(tok("alice"), NULL, &out, NULL, "pull", "room", "--after", "2", "--limit", "1", NULL),
        0);
    cr_assert_str_eq(out, "[room #3] bob: \\ttab and \\x01 control\n");
    free(out);
}

Test(cli, pull_all_prints_the_backlog_once, .init = start_ws, .fini = stop)
{
    enum { N = 23 };
    alice_and_bob_in("log", NULL);
    char input[N * 16] = "";
    for (int i = 1; i <= N; i++)
        sprintf(input + strlen(input), "line %d\n", i);
    cli_ok(tok("bob"), input, "send", "log", NULL);
    /* And one bin body, which JSON lines carry as base64. */
    gwc_conn *b = gwfx_login(&f, "bob", NULL);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    const uint8_t bin[] = {0x00, 0xff, 0x10, 'a'};
    pr_enc_send(&sb, 9, gwfx_sl("log"), gwfx_sl("b1"), (pr_body){{bin, sizeof(bin)}, true});
    pr_event ev = gwfx_request(b, &sb, PR_EV_SENT);
    cr_assert_eq(ev.mid, N + 1);
    msgpack_sbuffer_destroy(&sb);

    char *out, *err;
    cr_assert_eq(
        cli(tok("alice"), NULL, &out, &err, "--json", "pull", "log", "--all", "--limit", "5", NULL),
        0, "%s", err);
    json_t *got = json_lines(out);
    cr_assert_eq(json_array_size(got), N + 1, "pull --all printed: %s", out);
    for (int i = 0; i < N; i++) {
        json_t *m = json_array_get(got, (size_t)i);
        char want[16];
        snprintf(want, sizeof(want), "line %d", i + 1);
        cr_assert_eq(jint(m, "mid"), i + 1);
        cr_assert_str_eq(jstr(m, "body"), want);
    }
    json_t *last = json_array_get(got, N);
    cr_assert_str_eq(jstr(last, "body"), "AP8QYQ==");
    cr_assert_str_eq(jstr(last, "enc"), "base64");
    cr_assert(json_is_true(json_object_get(last, "bin")));
    json_decref(got);
    free(out);
    free(err);

    /* One page without --all: the newest five before mid 24, and a hint for the next. */
    cr_assert_eq(
        cli(tok("alice"), NULL, &out, &err, "pull", "log", "--before", "24", "--limit", "5", NULL),
        0);
    cr_assert(strncmp(out, "[log #19] bob: line 19\n", 23) == 0, "%s", out);
    cr_assert(strstr(out, "[log #23] bob: line 23\n"), "%s", out);
    cr_assert(!strstr(out, "#24"), "%s", out);
    cr_assert(strstr(err, "--before 19"), "no hint for the next page: %s", err);
    free(out);
    free(err);

    /* --before --all walks back to the first message, each one once. */
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "--json", "pull", "log", "--before", "24",
                     "--limit", "10", "--all", NULL),
                 0);
    got = json_lines(out);
    cr_assert_eq(json_array_size(got), N);
    bool seen[N + 1] = {false};
    size_t i;
    json_t *m;
    json_array_foreach(got, i, m)
    {
        long long mid = jint(m, "mid");
        cr_assert(mid >= 1 && mid <= N && !seen[mid], "mid %lld twice or out of range", mid);
        seen[mid] = true;
    }
    json_decref(got);
    free(out);

    /* --ack acks what was printed: the default pull (after the ack) then has nothing. */
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "pull", "log", "--all", "--ack", NULL), 0);
    cr_assert_eq(count_lines_in(out), N + 1);
    free(out);
    json_t *g = group_of("alice", "log");
    cr_assert_eq(jint(g, "ack"), N + 1);
    cr_assert_eq(jint(g, "unread"), 0);
    json_decref(g);
    cr_assert_eq(cli(tok("alice"), NULL, &out, NULL, "pull", "log", NULL), 0);
    cr_assert_str_eq(out, "");
    free(out);
}

Test(cli, send_again_with_the_same_cid_prefix_stores_nothing_twice, .init = start_ws, .fini = stop)
{
    cli_ok(tok("bob"), NULL, "join", "idem", NULL);
    char *out1, *out2;
    cr_assert_eq(
        cli(tok("bob"), "a\nb\nc\n", &out1, NULL, "send", "idem", "--cid-prefix", "batch7", NULL),
        0);
    cr_assert_eq(
        cli(tok("bob"), "a\nb\nc\n", &out2, NULL, "send", "idem", "--cid-prefix", "batch7", NULL),
        0);
    cr_assert_str_eq(out1, "sent [idem #1]\nsent [idem #2]\nsent [idem #3]\n");
    cr_assert_str_eq(out2, out1, "the same cids give the same mids");
    json_t *g = group_of("bob", "idem");
    cr_assert_eq(jint(g, "last_mid"), 3);
    json_decref(g);
    free(out1);
    free(out2);
}

Test(cli, refusals_say_why_and_exit_1, .init = start_ws, .fini = stop)
{
    char *err;
    cr_assert_eq(cli(NULL, NULL, NULL, &err, "--token", "not-a-token", "groups", NULL), 1);
    cr_assert(strstr(err, "unauthorized"), "%s", err);
    free(err);
    /* A well-formed token signed with another secret. */
    char *forged = NULL;
    const char *other = "another-secret-0123456789abcdef";
    cr_assert_eq(gwc_token_mint(other, strlen(other), "alice", (int64_t)time(NULL) + 600, NULL, 0,
                                false, &forged),
                 0);
    cr_assert_eq(cli(forged, NULL, NULL, &err, "groups", NULL), 1);
    cr_assert(strstr(err, "unauthorized"), "%s", err);
    free(err);
    free(forged);
    /* An expired one: the reason can be read from the token itself. */
    char *expired = NULL;
    cr_assert_eq(gwc_token_mint(GWFX_SECRET, strlen(GWFX_SECRET), "alice", (int64_t)time(NULL) - 10,
                                NULL, 0, false, &expired),
                 0);
    cr_assert_eq(cli(expired, NULL, NULL, &err, "groups", NULL), 1);
    cr_assert(strstr(err, "unauthorized") && strstr(err, "expired"), "%s", err);
    free(err);
    free(expired);

    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "tail", "nowhere", NULL), 1);
    cr_assert(strstr(err, "not a member"), "%s", err);
    free(err);
    cr_assert_eq(cli(tok("alice"), "x\n", NULL, &err, "send", "nowhere", NULL), 1);
    cr_assert(strstr(err, "not a member"), "%s", err);
    free(err);
    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "leave", "nowhere", NULL), 1);
    cr_assert(strstr(err, "not_member"), "%s", err);
    free(err);

    /* Nothing listens on the port of a gateway that has stopped. */
    gwfx_stop(&f, SIGTERM);
    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "groups", NULL), 1);
    cr_assert(strstr(err, "cannot connect"), "%s", err);
    free(err);
}

Test(cli, wss_trusts_the_ca_it_is_given_and_only_that, .init = start_tls, .fini = stop)
{
    cr_assert(strncmp(f.url, "wss://", 6) == 0);
    char ca[320], *out, *err;
    snprintf(ca, sizeof(ca), "%s/cert.pem", f.dir);
    cli_ok(tok("alice"), NULL, "--ca", ca, "join", "sec", NULL);
    cli_ok(tok("bob"), NULL, "--ca", ca, "join", "sec", NULL);
    cli_ok(tok("bob"), "over tls\n", "--ca", ca, "send", "sec", NULL);
    cr_assert_eq(cli(tok("alice"), NULL, &out, &err, "--ca", ca, "--json", "pull", "sec", NULL), 0,
                 "%s", err);
    json_t *got = json_lines(out);
    cr_assert_eq(json_array_size(got), 1);
    cr_assert_str_eq(jstr(json_array_get(got, 0), "body"), "over tls");
    json_decref(got);
    free(out);
    free(err);

    /* Without --ca the self-signed test certificate is refused, and the error says so. */
    cr_assert_eq(cli(tok("alice"), NULL, &out, &err, "groups", NULL), 1);
    cr_assert_str_eq(out, "");
    cr_assert(strstr(err, "certificate"), "no certificate problem named: %s", err);
    cr_assert(strstr(err, "--ca"), "no hint: %s", err);
    free(out);
    free(err);
    /* A --ca file that is not a certificate is refused before connecting. */
    char key[320];
    snprintf(key, sizeof(key), "%s/key.pem", f.dir);
    cr_assert_eq(cli(tok("alice"), NULL, NULL, &err, "--ca", key, "groups", NULL), 1);
    cr_assert(strstr(err, "certificate"), "%s", err);
    free(err);
}

/* A port that was free a moment ago, so that the gateway can come back on it. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof(a);
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &n), 0);
    close(s);
    return ntohs(a.sin_port);
}

static void send_n(gwc_conn *k, int from, int to)
{
    char cid[16], body[32];
    for (int i = from; i <= to; i++) {
        snprintf(cid, sizeof(cid), "c%d", i);
        snprintf(body, sizeof(body), "msg %d", i);
        cr_assert_eq(gwfx_send_msg(k, "live", cid, body), (uint64_t)i);
    }
}

Test(cli, tail_resumes_after_a_crash_and_prints_each_message_once, .fini = stop)
{
    /* The gateway comes back on the same port (the last --port wins), so the client's URL
     * stays right across the restart. */
    char port[16];
    snprintf(port, sizeof(port), "%d", free_port());
    const char *const extra[] = {"--port", port, NULL};
    gwfx_start(&f, extra);
    cr_assert_eq(f.port, atoi(port));
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    gwfx_join(bob, "live");
    cli_ok(tok("alice"), NULL, "join", "live", NULL);

    cli_run tail;
    spawn(&tail, tok("alice"), NULL, "--json", "--retry", "30", "tail", "live", "--count", "40",
          NULL);
    send_n(bob, 1, 10);
    wait_lines(&tail, 10); /* live before the crash */
    send_n(bob, 11, 20);   /* confirmed, then the gateway dies: tail may or may not have them */
    gwfx_stop(&f, SIGKILL);
    usleep(300000);
    gwfx_restart(&f);
    cr_assert_eq(f.port, atoi(port));
    bob = gwfx_login(&f, "bob", NULL);
    send_n(bob, 21, 40);

    cr_assert_eq(finish(&tail, 30000), 0, "tail failed: %s", slurp(tail.err));
    char *out = slurp(tail.out), *err = slurp(tail.err);
    json_t *got = json_lines(out);
    cr_assert_eq(json_array_size(got), 40, "tail printed %zu lines: %s", json_array_size(got), out);
    for (int i = 0; i < 40; i++) {
        json_t *m = json_array_get(got, (size_t)i);
        char want[32];
        snprintf(want, sizeof(want), "msg %d", i + 1);
        cr_assert_eq(jint(m, "mid"), i + 1, "line %d", i + 1);
        cr_assert_str_eq(jstr(m, "body"), want);
    }
    cr_assert(strstr(err, "reconnecting to "), "no word of the reconnection: %s", err);
    cr_assert(strstr(err, "reconnected after "), "no word of the reconnection: %s", err);
    json_decref(got);
    free(out);
    free(err);
}

/* Writes a token for uid issued at iat into path. */
static void token_file(const char *path, const char *uid, long iat)
{
    char *t = gwfx_token_issued(uid, iat);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "%s\n", t);
    fclose(fp);
    free(t);
}

/* A session signed out by the application (4003) is never opened again with the same
 * token (docs/API.md, Revoking a user): gw_cli reads --token-file again, goes on with the
 * new token it holds, and stops when it holds the same one. */
Test(cli, a_sign_out_stops_tail_unless_the_token_file_holds_a_new_token, .fini = stop)
{
    const char *const extra[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start(&f, extra);
    gwc_conn *bob = gwfx_login(&f, "bob", NULL);
    gwfx_join(bob, "live");
    cli_ok(tok("alice"), NULL, "join", "live", NULL);
    char path[400];
    snprintf(path, sizeof(path), "%s/token", f.dir);

    /* The file holds the token the session had: tail stops, and says why. */
    token_file(path, "alice", (long)time(NULL) - 60);
    cli_run tail;
    spawn(&tail, NULL, NULL, "--token-file", path, "--json", "--retry", "30", "tail", "live",
          "--count", "10", NULL);
    send_n(bob, 1, 1);
    wait_lines(&tail, 1);
    free(gwfx_api(&f, "DELETE", "/api/v1/users/alice/sessions", NULL, 200));
    cr_assert_eq(finish(&tail, 20000), 1);
    char *err = slurp(tail.err);
    cr_assert(strstr(err, "signed out by the application (4003)"), "%s", err);
    cr_assert(strstr(err, "not reconnecting with the same token"), "%s", err);
    cr_assert_null(strstr(err, "reconnected"), "%s", err);
    free(err);

    /* A new token in the file (issued after the sign-out to come): tail goes on with it
     * and prints every message once. */
    cli_ok(tok("carol"), NULL, "join", "live", NULL);
    token_file(path, "carol", (long)time(NULL) - 60);
    spawn(&tail, NULL, NULL, "--token-file", path, "--json", "--retry", "30", "tail", "live",
          "--count", "3", NULL);
    send_n(bob, 2, 2);
    wait_lines(&tail, 1);
    token_file(path, "carol", (long)time(NULL) + 2);
    free(gwfx_api(&f, "DELETE", "/api/v1/users/carol/sessions", NULL, 200));
    send_n(bob, 3, 4);
    cr_assert_eq(finish(&tail, 20000), 0, "tail failed: %s", slurp(tail.err));
    err = slurp(tail.err);
    char *out = slurp(tail.out);
    cr_assert(strstr(err, "a new token from"), "%s", err);
    cr_assert(strstr(err, "reconnected after 1 attempt"), "%s", err);
    json_t *got = json_lines(out);
    cr_assert_eq(json_array_size(got), 3, "%s", out);
    cr_assert_eq(jint(json_array_get(got, 2), "mid"), 4);
    json_decref(got);
    free(out);
    free(err);
}

/* ---- the ack rule (tools/common/ackrule.h), as a unit -----------------------------------------
 */

#define MS 1000000LL /* ackrule's times are nanoseconds */

Test(cli, ack_rule_acks_the_watermark_after_ack_every_messages)
{
    ackrule a = {0};
    ackrule_cadence(&a, 3, 1000);
    ackrule_start(&a, 10, 10, 0);
    cr_assert_eq(ackrule_due(&a, 0), 0);
    cr_assert_eq(ackrule_pending(&a), 0, "nothing unacked after the join");
    ackrule_hold(&a, 11, 1 * MS);
    ackrule_hold(&a, 12, 2 * MS);
    cr_assert_eq(ackrule_due(&a, 2 * MS), 0, "two of three");
    cr_assert_eq(ackrule_pending(&a), 12, "leaving acks what is held");
    ackrule_hold(&a, 13, 3 * MS);
    cr_assert_eq(ackrule_due(&a, 3 * MS), 13, "the third message: ack 13 at once");
    cr_assert_eq(ackrule_wait_ns(&a, 3 * MS), 0);
    ackrule_acked(&a, 13);
    cr_assert_eq(ackrule_due(&a, 4 * MS), 0);
    cr_assert_eq(ackrule_pending(&a), 0);
    cr_assert_eq(ackrule_wait_ns(&a, 4 * MS), -1, "nothing to wait for");
    ackrule_hold(&a, 12, 5 * MS); /* a duplicate changes nothing */
    cr_assert_eq(a.held, 13);
    cr_assert_eq(ackrule_pending(&a), 0);
}

Test(cli, ack_rule_acks_after_the_delay_from_the_first_unacked_message)
{
    ackrule a = {0};
    ackrule_cadence(&a, 50, 1000);
    ackrule_start(&a, 0, 0, 0);
    ackrule_hold(&a, 1, 5 * MS);
    ackrule_hold(&a, 2, 600 * MS); /* does not restart the delay */
    cr_assert_eq(ackrule_wait_ns(&a, 600 * MS), 405 * MS);
    cr_assert_eq(ackrule_due(&a, 1004 * MS), 0);
    cr_assert_eq(ackrule_due(&a, 1005 * MS), 2, "1000 ms after message 1: ack 2");
    ackrule_acked(&a, 2);
    ackrule_hold(&a, 3, 2000 * MS); /* the next unacked one starts a new delay */
    cr_assert_eq(ackrule_due(&a, 2999 * MS), 0);
    cr_assert_eq(ackrule_wait_ns(&a, 2999 * MS), 1 * MS);
    cr_assert_eq(ackrule_due(&a, 3000 * MS), 3);
}

Test(cli, ack_rule_takes_the_protocol_defaults_for_zero_and_resumes_below_a_lost_ack)
{
    ackrule a = {0};
    ackrule_cadence(&a, 0, 0); /* a welcome without the fields */
    cr_assert_eq(a.every, ACKRULE_EVERY_DEFAULT);
    cr_assert_eq(a.delay_ms, ACKRULE_DELAY_MS_DEFAULT);
    ackrule_start(&a, 0, 0, 0);
    for (uint64_t mid = 1; mid < ACKRULE_EVERY_DEFAULT; mid++)
        ackrule_hold(&a, mid, 0);
    cr_assert_eq(ackrule_due(&a, 0), 0);
    ackrule_hold(&a, ACKRULE_EVERY_DEFAULT, 0);
    cr_assert_eq(ackrule_due(&a, 0), ACKRULE_EVERY_DEFAULT);
    ackrule_acked(&a, ACKRULE_EVERY_DEFAULT);
    /* After a reconnect the server's stored ack (a crash lost the last batch) is below
     * what was acked: the watermark is acked again at once when forced... */
    ackrule_start(&a, ACKRULE_EVERY_DEFAULT, 20, 7 * MS);
    cr_assert_eq(ackrule_pending(&a), ACKRULE_EVERY_DEFAULT);
    /* ... and by the count, since 30 are unacked of 50, only after the delay. */
    cr_assert_eq(ackrule_due(&a, 7 * MS), 0);
    cr_assert_eq(ackrule_due(&a, 1007 * MS), ACKRULE_EVERY_DEFAULT);
    /* A stored ack above the watermark (acked from another device) counts as acked. */
    ackrule_start(&a, 5, 9, 0);
    cr_assert_eq(a.acked, 5);
    cr_assert_eq(ackrule_pending(&a), 0);
    ackrule_acked(&a, 3); /* an older ack never moves it back */
    cr_assert_eq(a.acked, 5);
}
