/*
 * gw_cli send: one message from the command line, or each line of standard input.
 *
 * Line n gets the client id PREFIX-n, so a message sent again after a reconnect (or by a
 * second run with the same --cid-prefix) is stored once: the gateway answers a known cid
 * with the first `sent`. Up to WINDOW messages are in flight at once; their mids are
 * printed in input order as the `sent` replies come. Standard input is polled, not read
 * blocking, so the connection keeps being served (pings, closes) while a person types.
 */
#include "gw_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 64        /* messages in flight */
#define READ_CHUNK 65536 /* bytes read from stdin at a time */
#define BUSY_WAIT_MS 200 /* first wait before sending again after overloaded/unavailable */
#define BUSY_WAIT_MAX_MS 5000

typedef struct send_item {
    uint64_t n; /* line number (1-based), also the request's rid */
    char cid[PR_MAX_ID + 1];
    uint8_t *body; /* owned */
    size_t len;
    bool on_wire; /* sent on the current connection, waiting for `sent` */
    bool done;    /* `sent` came (or given up: mid 0) */
    uint64_t mid, ts;
    int64_t due, sent_at; /* cli_now_ms: send no earlier than due */
    int busy_wait_ms;     /* doubles with every overloaded reply, up to BUSY_WAIT_MAX_MS */
} send_item;

typedef struct sender {
    cli *c;
    const char *gid;
    char prefix[CLI_CID_PREFIX_MAX + 1];
    send_item win[WINDOW]; /* a ring: head, count */
    size_t head, count;
    uint64_t lines; /* messages taken from the input so far */
    bool eof;       /* no more input will be taken */
    bool failed;    /* a message was refused: exit 1 once the rest is in */
    char *lb;       /* stdin bytes not yet cut into lines */
    size_t lb_n, lb_cap;
} sender;

static send_item *at(sender *s, size_t i)
{
    return &s->win[(s->head + i) % WINDOW];
}

static void random_prefix(char *out, size_t cap)
{
    unsigned char r[6] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, r, sizeof(r)) != (ssize_t)sizeof(r))
        for (size_t i = 0; i < sizeof(r); i++)
            r[i] = (unsigned char)rand();
    if (fd >= 0)
        close(fd);
    snprintf(out, cap, "cli-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

static int add_item(sender *s, const char *data, size_t len)
{
    if (len > s->c->max_body) {
        cli_err("message %" PRIu64 ": %zu bytes, over the gateway's limit of %u bytes",
                s->lines + 1, len, s->c->max_body);
        return -1;
    }
    send_item *it = at(s, s->count);
    memset(it, 0, sizeof(*it));
    if (!(it->body = malloc(len ? len : 1))) {
        cli_err("out of memory");
        return -1;
    }
    if (len)
        memcpy(it->body, data, len);
    it->len = len;
    it->n = ++s->lines;
    snprintf(it->cid, sizeof(it->cid), "%s-%" PRIu64, s->prefix, it->n);
    s->count++;
    return 0;
}

/* Cuts complete lines (and a last one without '\n' at EOF) into the window. */
static int take_lines(sender *s)
{
    while (s->count < WINDOW && s->lb_n) {
        char *nl = memchr(s->lb, '\n', s->lb_n);
        if (!nl && !s->eof) {
            if (s->lb_n > (size_t)s->c->max_body + 1) {
                cli_err("message %" PRIu64 ": %zu+ bytes, over the gateway's limit of %u bytes",
                        s->lines + 1, s->lb_n, s->c->max_body);
                return -1;
            }
            return 0;
        }
        size_t len = nl ? (size_t)(nl - s->lb) : s->lb_n, used = nl ? len + 1 : len;
        if (len && s->lb[len - 1] == '\r')
            len--;
        if (add_item(s, s->lb, len))
            return -1;
        memmove(s->lb, s->lb + used, s->lb_n - used);
        s->lb_n -= used;
    }
    return 0;
}

/* Reads what stdin has, waiting at most wait_ms for it: 1 if it read (or met EOF). */
static int read_input(sender *s, int wait_ms)
{
    struct pollfd p = {STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0)
        return 0; /* nothing yet, or a signal */
    if (s->lb_cap - s->lb_n < READ_CHUNK) {
        char *nb = realloc(s->lb, s->lb_n + READ_CHUNK);
        if (!nb) {
            cli_err("out of memory");
            return -1;
        }
        s->lb = nb;
        s->lb_cap = s->lb_n + READ_CHUNK;
    }
    ssize_t n = read(STDIN_FILENO, s->lb + s->lb_n, READ_CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n < 0) {
        cli_err("reading standard input: %s", strerror(errno));
        return -1;
    }
    if (n == 0)
        s->eof = true;
    s->lb_n += (size_t)n;
    return 1;
}

/* Stops taking input; messages not sent yet are given up. */
static void give_up_rest(sender *s)
{
    s->eof = true;
    s->lb_n = 0;
    for (size_t i = 0; i < s->count; i++)
        if (!at(s, i)->on_wire)
            at(s, i)->done = true;
}

static void on_event(sender *s, const pr_event *ev)
{
    if (!ev->has_rid || !s->count)
        return; /* pushes of other groups, and the like */
    uint64_t first = at(s, 0)->n;
    if (ev->rid < first || ev->rid - first >= s->count)
        return;
    send_item *it = at(s, (size_t)(ev->rid - first));
    if (it->done || !it->on_wire)
        return;
    if (ev->t == PR_EV_SENT) {
        it->done = true;
        it->mid = ev->mid;
        it->ts = ev->ts;
    } else if (ev->t == PR_EV_ERR &&
               (ev->err_code == PR_E_OVERLOADED || ev->err_code == PR_E_RATE_LIMITED ||
                ev->err_code == PR_E_UNAVAILABLE)) {
        it->on_wire = false;
        it->busy_wait_ms = it->busy_wait_ms ? 2 * it->busy_wait_ms : BUSY_WAIT_MS;
        if (it->busy_wait_ms > BUSY_WAIT_MAX_MS)
            it->busy_wait_ms = BUSY_WAIT_MAX_MS;
        it->due = cli_now_ms() + it->busy_wait_ms;
    } else if (ev->t == PR_EV_ERR) {
        char where[PR_MAX_ID + 40];
        snprintf(where, sizeof(where), "%s (message %" PRIu64 ")", s->gid, it->n);
        cli_say_err(ev, where);
        it->done = true;
        s->failed = true;
        give_up_rest(s);
    }
}

/* Prints the `sent` of the messages at the head of the window that have one. */
static int pop_done(sender *s)
{
    while (s->count && at(s, 0)->done) {
        send_item *it = at(s, 0);
        if (it->mid) {
            pr_event ev = {.t = PR_EV_SENT,
                           .gid = cli_slice(s->gid),
                           .cid = cli_slice(it->cid),
                           .mid = it->mid,
                           .ts = it->ts};
            out_sent(s->c, &ev);
        }
        free(it->body);
        s->head = (s->head + 1) % WINDOW;
        s->count--;
    }
    return out_flush();
}

static int send_due(sender *s)
{
    int64_t now = cli_now_ms();
    for (size_t i = 0; i < s->count; i++) {
        send_item *it = at(s, i);
        if (it->done || it->on_wire)
            continue;
        if (cli_stop) { /* interrupted: a message waiting to be retried is given up */
            it->done = true;
            s->failed = true;
            continue;
        }
        if (it->due > now)
            continue;
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        pr_body body = {{it->body, it->len}, false};
        int rc = cli_send_built(
            s->c, &sb, pr_enc_send(&sb, it->n, cli_slice(s->gid), cli_slice(it->cid), body), NULL);
        if (rc <= 0)
            return rc; /* closed (0): the loop reconnects */
        it->on_wire = true;
        it->sent_at = now;
    }
    return 0;
}

/* After a lost connection: a new one, and every message without `sent` goes again. */
static int reconnect(sender *s)
{
    char what[400];
    snprintf(what, sizeof(what), "connection lost: %s", cli_close_reason(s->c));
    if (s->c->o.retry_ms == 0) {
        cli_err("%s", what);
        return -1;
    }
    if (cli_reopen(s->c, what, cli_now_ms() + s->c->o.retry_ms))
        return -1;
    for (size_t i = 0; i < s->count; i++)
        at(s, i)->on_wire = false;
    return 0;
}

static int run(sender *s, bool from_stdin)
{
    cli *c = s->c;
    pr_event ev;
    for (;;) {
        if (cli_stop && !s->eof) {
            cli_err("interrupted: waiting for the messages already sent");
            s->failed = true;
            give_up_rest(s);
        }
        if (from_stdin && take_lines(s))
            return -1;
        if (pop_done(s))
            return -1;
        if (!s->count && (s->eof || !from_stdin))
            return 0;
        if (s->count && !gwc_is_open(c->k) && reconnect(s))
            return -1;
        if (send_due(s))
            return -1;
        int64_t now = cli_now_ms();
        for (size_t i = 0; i < s->count; i++) {
            send_item *it = at(s, i);
            if (it->on_wire && !it->done && now - it->sent_at > c->o.timeout_ms) {
                cli_err("no reply to message %" PRIu64 " within %d ms", it->n, c->o.timeout_ms);
                return -1;
            }
        }
        bool can_read = from_stdin && !s->eof && s->count < WINDOW &&
                        !(s->lb_n && memchr(s->lb, '\n', s->lb_n));
        int got = can_read ? read_input(s, s->count ? 0 : 200) : 0;
        if (got < 0)
            return -1;
        if (!c->k)
            continue;
        int rc = gwc_next(c->k, s->count && !got ? (can_read ? 20 : 100) : 0, &ev);
        for (int n = 0; rc == 0 || rc == GWC_EPROTO;) {
            if (rc == 0)
                on_event(s, &ev);
            else
                cli_err("ignoring a frame from the server: %s", gwc_last_error(c->k));
            if (++n == CLI_DRAIN_MAX)
                break;
            rc = gwc_next(c->k, 0, &ev);
        }
    }
}

int cli_cmd_send(cli *c, const char *gid, int argc, char **argv)
{
    sender s;
    memset(&s, 0, sizeof(s));
    s.c = c;
    s.gid = gid;
    if (c->o.cid_prefix)
        snprintf(s.prefix, sizeof(s.prefix), "%s", c->o.cid_prefix);
    else
        random_prefix(s.prefix, sizeof(s.prefix));
    pr_group g;
    if (cli_open_member(c, gid, &g))
        return CLI_EXIT_FAIL;
    int rc = 0;
    if (argc > 0) { /* the words of TEXT, joined by spaces, are one message */
        size_t len = 0;
        for (int i = 0; i < argc; i++)
            len += strlen(argv[i]) + 1;
        char *text = malloc(len);
        if (!text) {
            cli_err("out of memory");
            return CLI_EXIT_FAIL;
        }
        text[0] = '\0';
        for (int i = 0; i < argc; i++) {
            if (i)
                strcat(text, " ");
            strcat(text, argv[i]);
        }
        rc = add_item(&s, text, strlen(text));
        free(text);
        s.eof = true;
    }
    if (rc == 0)
        rc = run(&s, argc == 0);
    for (size_t i = 0; i < s.count; i++)
        free(at(&s, i)->body);
    free(s.lb);
    return rc || s.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
