/*
 * gw_cli_conn: one signed-in connection to the gateway, opened again after a loss.
 *
 * Every wait is bounded by the --timeout (connect, welcome, each reply); reconnecting is
 * bounded by --retry. A refused token is never retried, nor the token of a session the
 * application signed out (4003): the same token would be refused again (docs/API.md,
 * Revoking a user). Then --token-file, if given, is read again: a new token there is the
 * application's answer, else gw_cli stops. The server's close reason is not available from gwc, so
 * an unauthorized close is explained with what can be read from the token itself (expired, or not a
 * JWT).
 */
#include "gw_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define TOKEN_MAX 8192

volatile sig_atomic_t cli_stop;

/* Kinds of open() failures. */
enum {
    OPEN_RETRY = -1, /* the network or the server: a later attempt may work */
    OPEN_FATAL = -2, /* the token, the URL: retrying is useless */
};

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cli_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL); /* a signal cuts it short: the callers check cli_stop */
}

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(CLI_NAME ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

pr_slice cli_slice(const char *s)
{
    return (pr_slice){(const uint8_t *)s, strlen(s)};
}

/* What the token itself says about a refusal: expired, or not a JWT at all. */
static void token_hint(const char *tok, char *buf, size_t cap)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *p = strchr(tok, '.'), *end = p ? strchr(p + 1, '.') : NULL;
    buf[0] = '\0';
    if (!end || strchr(end + 1, '.')) {
        snprintf(buf, cap, "; the token is not a JWT (header.payload.signature)");
        return;
    }
    char claims[2048];
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (p++; p < end && n < sizeof(claims) - 1; p++) {
        const char *at = memchr(b64, *p, 64);
        if (!at)
            break;
        acc = acc << 6 | (uint32_t)(at - b64);
        if ((bits += 6) >= 8) {
            bits -= 8;
            claims[n++] = (char)(acc >> bits & 0xFF);
        }
    }
    claims[n] = '\0';
    const char *e = strstr(claims, "\"exp\"");
    if (!e)
        return;
    e += 5;
    e += strspn(e, " \t:");
    char *num_end;
    long long exp = strtoll(e, &num_end, 10);
    if (num_end == e || exp > (long long)time(NULL))
        return;
    time_t t = (time_t)exp;
    struct tm tm;
    char when[32];
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(buf, cap, "; the token expired at %s", when);
}

const char *cli_close_reason(const cli *c)
{
    static char buf[320];
    int code = gwc_close_code(c->k);
    const char *what;
    switch (code) {
    case -1: what = "the connection is open"; break;
    case 0: what = "the connection dropped"; break;
    case 1000: what = "the gateway closed the connection (1000)"; break;
    case 1001: what = "the gateway is shutting down (1001)"; break;
    case 1008:
        what = "the gateway closed the connection for policy (1008: too many bad "
               "requests, or a reader too slow)";
        break;
    case 1009: what = "a frame over the size limit (1009)"; break;
    case 4001: what = "unauthorized (4001)"; break;
    case 4003: what = "signed out by the application (4003)"; break;
    default: what = "the connection closed"; break;
    }
    const char *detail = gwc_last_error(c->k);
    if (code > 1001 && code != 1008 && code != 1009 && code != 4001 && code != 4003)
        snprintf(buf, sizeof(buf), "%s with code %d", what, code);
    else
        snprintf(buf, sizeof(buf), "%s", what);
    if (detail && *detail)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), " (%s)", detail);
    return buf;
}

/* Connects and signs in; 0 with c->k open and c->welcome set, else an OPEN_* kind and
 * c->why. Closes the previous connection first. */
static int open_session(cli *c)
{
    gwc_close(c->k);
    c->k = NULL;
    c->why[0] = '\0';
    int rc = gwc_connect(c->ctx, c->o.url, c->o.timeout_ms, &c->k);
    if (rc != 0) {
        const char *e = gwc_ctx_last_error(c->ctx);
        bool cert = strstr(e, "certificate") != NULL;
        snprintf(c->why, sizeof(c->why), "cannot connect: %s%s", *e ? e : gwc_strerror(rc),
                 !cert          ? ""
                 : c->o.ca_file ? " (the --ca file does not vouch for this server's certificate)"
                                : " (trust the server's certificate or its CA with --ca FILE)");
        c->k = NULL;
        return rc == GWC_EINVAL ? OPEN_FATAL : OPEN_RETRY;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_hello(&sb, 0, cli_slice(c->token));
    rc = cli_send(c, &sb);
    msgpack_sbuffer_destroy(&sb);
    int64_t deadline = cli_now_ms() + c->o.timeout_ms;
    pr_event ev;
    while (rc == 0) {
        int64_t left = deadline - cli_now_ms();
        if (left <= 0) {
            rc = GWC_ETIMEDOUT;
            break;
        }
        rc = gwc_next(c->k, (int)left, &ev);
        if (rc == GWC_EPROTO) {
            cli_err("ignoring a frame from the server: %s", gwc_last_error(c->k));
            rc = 0;
        } else if (rc == 0 && ev.t == PR_EV_WELCOME) {
            break;
        } else if (rc == 0 && ev.t == PR_EV_ERR) {
            snprintf(c->why, sizeof(c->why), "the gateway refused hello: %.*s: %.*s",
                     (int)ev.err_name.n, ev.err_name.p, (int)ev.err_msg.n, ev.err_msg.p);
            return OPEN_FATAL;
        }
    }
    if (rc == GWC_ECLOSED && gwc_close_code(c->k) == 4001) {
        char hint[160];
        token_hint(c->token, hint, sizeof(hint));
        snprintf(c->why, sizeof(c->why),
                 "unauthorized: the gateway refused the token (closed with 4001)%s", hint);
        return OPEN_FATAL;
    }
    if (rc == GWC_ECLOSED) {
        snprintf(c->why, sizeof(c->why), "signing in: %s", cli_close_reason(c));
        return OPEN_RETRY;
    }
    if (rc != 0) {
        snprintf(c->why, sizeof(c->why), "signing in: no welcome within %d ms (%s)",
                 c->o.timeout_ms, gwc_strerror(rc));
        return OPEN_RETRY;
    }
    c->welcome = ev;
    c->ack_every = ev.welcome.ack_every ? ev.welcome.ack_every : ACKRULE_EVERY_DEFAULT;
    c->ack_delay_ms = ev.welcome.ack_delay_ms ? ev.welcome.ack_delay_ms : ACKRULE_DELAY_MS_DEFAULT;
    c->max_body = ev.welcome.max_body ? ev.welcome.max_body : PR_MAX_BODY_DEFAULT;
    return 0;
}

int cli_open_or_say(cli *c)
{
    if (open_session(c) == 0)
        return 0;
    cli_err("%s", c->why);
    return -1;
}

/* The token is spent (signed out, or refused): a new one from the application, or stop. */
static int token_spent(cli *c, const char *what)
{
    if (cli_token_again(c) == 0) {
        cli_err("%s; a new token from %s", what, c->o.token_file);
        return 0;
    }
    cli_err("%s; not reconnecting with the same token (%s)", what,
            c->o.token_file ? "--token-file holds no new one"
                            : "give a new one: --token-file F is read again after a sign-out");
    return -1;
}

int cli_reopen(cli *c, const char *what, int64_t until)
{
    if (c->k && gwc_close_code(c->k) == 4003 && token_spent(c, what) != 0)
        return -1;
    cli_err("%s; reconnecting to %s", what, c->o.url);
    int backoff = BACKOFF_FIRST_MS;
    int64_t since = cli_now_ms();
    for (int attempt = 1;; attempt++) {
        if (cli_stop)
            return -1;
        int rc = open_session(c);
        if (rc == 0) {
            cli_err("reconnected after %d attempt%s (%.1f s)", attempt, attempt == 1 ? "" : "s",
                    (double)(cli_now_ms() - since) / 1000.0);
            return 0;
        }
        if (rc == OPEN_FATAL && c->k && gwc_close_code(c->k) == 4001 && token_spent(c, c->why) == 0)
            continue; /* at once: the new token is not the network's trouble */
        if (rc == OPEN_FATAL) {
            cli_err("%s", c->why);
            return -1;
        }
        int64_t left = until - cli_now_ms();
        if (left <= 0) {
            cli_err("gave up reconnecting: %s", c->why);
            return -1;
        }
        int wait = backoff + rand() % (backoff / 2 + 1); /* jitter: clients do not stampede */
        if (wait > left)
            wait = (int)left;
        cli_err("attempt %d failed (%s); next in %.1f s", attempt, c->why, (double)wait / 1000.0);
        sleep_ms(wait);
        backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
    }
}

bool cli_welcome_group(const cli *c, const char *gid, pr_group *g)
{
    for (size_t i = 0; i < c->welcome.n_items; i++)
        if (pr_event_group(&c->welcome, i, g) == 0 && g->gid.n == strlen(gid) &&
            memcmp(g->gid.p, gid, g->gid.n) == 0)
            return true;
    return false;
}

int cli_send(cli *c, const msgpack_sbuffer *sb)
{
    return c->k ? gwc_send(c->k, sb->data, sb->size) : GWC_ECLOSED;
}

int cli_send_ack(cli *c, const char *gid, uint64_t mid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_ack a = {cli_slice(gid), mid};
    int rc = pr_enc_ack(&sb, &a, 1) ? GWC_ENOMEM : cli_send(c, &sb);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

int cli_send_built(cli *c, msgpack_sbuffer *sb, int enc_rc, const char *what)
{
    int rc = enc_rc ? GWC_ENOMEM : cli_send(c, sb);
    msgpack_sbuffer_destroy(sb);
    if (rc == GWC_ECLOSED)
        return 0;
    if (rc) {
        cli_err("cannot send%s%s: %s", what ? " " : "", what ? what : "", gwc_strerror(rc));
        return -1;
    }
    return 1;
}

int cli_open_member(cli *c, const char *gid, pr_group *g)
{
    if (cli_open_or_say(c))
        return -1;
    if (!cli_welcome_group(c, gid, g)) {
        cli_err("%s: not a member of this group (join it first)", gid);
        return -1;
    }
    return 0;
}

void cli_say_err(const pr_event *ev, const char *gid)
{
    const char *hint = "";
    switch (ev->err_code) {
    case PR_E_NOT_MEMBER: hint = " (join the group first)"; break;
    case PR_E_NO_GROUP: hint = " (the gateway only joins groups that exist)"; break;
    case PR_E_RATE_LIMITED:
    case PR_E_OVERLOADED: hint = " (the gateway is busy: try again later)"; break;
    case PR_E_UNAVAILABLE: hint = " (the gateway cannot store now: try again later)"; break;
    default: break;
    }
    char where[PR_MAX_ID + 3] = "";
    if (gid)
        snprintf(where, sizeof(where), "%s: ", gid);
    cli_err("%s%.*s: %.*s%s", where, (int)ev->err_name.n, ev->err_name.p, (int)ev->err_msg.n,
            ev->err_msg.p, hint);
}

int cli_request(cli *c, const msgpack_sbuffer *sb, uint64_t rid, enum pr_ev_type want,
                const char *gid, pr_event *ev)
{
    int rc = cli_send(c, sb);
    int64_t deadline = cli_now_ms() + c->o.timeout_ms;
    while (rc == 0 || rc == GWC_EPROTO) {
        if (rc == GWC_EPROTO)
            cli_err("ignoring a frame from the server: %s", gwc_last_error(c->k));
        int64_t left = deadline - cli_now_ms();
        if (left <= 0) {
            rc = GWC_ETIMEDOUT;
            break;
        }
        rc = gwc_next(c->k, (int)left, ev);
        if (rc != 0 || !ev->has_rid || ev->rid != rid)
            continue; /* pushes, other replies */
        if (ev->t == want)
            return 0;
        if (ev->t == PR_EV_ERR) {
            cli_say_err(ev, gid);
            return -1;
        }
        cli_err("unexpected reply of type %d from the server", (int)ev->t);
        return -1;
    }
    if (rc == GWC_ECLOSED)
        cli_err("connection lost: %s", cli_close_reason(c));
    else if (rc == GWC_ETIMEDOUT)
        cli_err("no reply from the gateway within %d ms", c->o.timeout_ms);
    else
        cli_err("request failed: %s", gwc_strerror(rc));
    return -1;
}

int cli_load_token(const char *arg, const char *file, char **out)
{
    char buf[TOKEN_MAX + 1];
    size_t n;
    if (arg && file) {
        cli_err("give --token or --token-file, not both");
        return CLI_EXIT_USAGE;
    }
    if (!arg && !file)
        arg = getenv("GW_TOKEN");
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            cli_err("--token-file %s: %s", file, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        n = fread(buf, 1, TOKEN_MAX, f);
        bool more = fgetc(f) != EOF;
        fclose(f);
        if (more) {
            cli_err("--token-file %s: over %d bytes: not a token", file, TOKEN_MAX);
            return CLI_EXIT_FAIL;
        }
    } else if (arg && *arg) {
        n = strlen(arg);
        if (n > TOKEN_MAX) {
            cli_err("the token is over %d bytes", TOKEN_MAX);
            return CLI_EXIT_USAGE;
        }
        memcpy(buf, arg, n);
    } else {
        cli_err("no token: give --token T, --token-file F or set GW_TOKEN (see gw_token)");
        return CLI_EXIT_USAGE;
    }
    buf[n] = '\0';
    char *s = buf + strspn(buf, " \t\r\n");
    size_t len = strlen(s);
    while (len && strchr(" \t\r\n", s[len - 1]))
        s[--len] = '\0';
    if (!len) {
        cli_err("the token is empty");
        return CLI_EXIT_FAIL;
    }
    if (!(*out = strdup(s))) {
        cli_err("out of memory");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cli_token_again(cli *c)
{
    char *fresh = NULL;
    if (!c->o.token_file || cli_load_token(NULL, c->o.token_file, &fresh) != CLI_EXIT_OK)
        return -1;
    if (strcmp(fresh, c->token) == 0) {
        free(fresh);
        return -1; /* the same token would be refused the same way */
    }
    free(c->token);
    c->token = fresh;
    return 0;
}
