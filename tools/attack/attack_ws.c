/*
 * attack_ws: WebSocket frames no client should send (see attack.h).
 *
 *   pre-hello   connections that upgrade, then send a 256 KiB binary fragment that is
 *               not final and never send the hello: what does the server hold for them,
 *               and how long
 *   json        a JSON-subprotocol (gw.v1.json) first frame that is a 256 KiB array of
 *               `{}`: the server's CPU for each
 *   pipelined   a signed-in session writes N bad requests in one write: does it read
 *               every error and then the 1008 close, or is it reset (1006)
 */
#include "attack.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FRAGMENT (256 * 1024)
#define WS_BIN 2
#define WS_TEXT 1
#define WS_CLOSE 8

int atk_prehello(atk_ctx *c)
{
    const atk_cfg *cfg = c->cfg;
    int n = cfg->conns, *fds = calloc((size_t)n, sizeof(int));
    uint8_t *payload = calloc(1, FRAGMENT);
    int64_t *closed_at = calloc((size_t)n, sizeof(int64_t));
    if (!fds || !payload || !closed_at) {
        free(fds), free(payload), free(closed_at);
        return -1;
    }
    atk_begin(c);
    int64_t t0 = load_now_ns();
    int failed = 0, open_n = 0;
    for (int i = 0; i < n; i++) {
        if ((fds[i] = atk_raw_ws(cfg, "gw.v1", 2000)) < 0) {
            failed++;
            continue;
        }
        c->sent_conns++;
        c->sent_requests++;
        c->sent_bytes += atk_raw_frame(fds[i], WS_BIN, false, payload, FRAGMENT, 100);
        open_n++;
        atk_pump(c, 0);
    }
    int64_t until = t0 + (int64_t)(cfg->seconds * 1e9), last = 0;
    int closed = 0;
    while (load_now_ns() < until && closed < open_n) {
        for (int i = 0; i < n; i++) {
            bool answered = false;
            if (fds[i] < 0 || closed_at[i] || !atk_raw_closed(fds[i], &answered))
                continue;
            closed_at[i] = last = load_now_ns() - t0;
            closed++;
        }
        atk_pump(c, 50);
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    atk_end(c, 2);
    atk_say(c,
            "%d connections each sent a %d KiB fragment and no hello: %d closed by the server in "
            "%.0f s",
            open_n, FRAGMENT / 1024, closed, cfg->seconds);
    if (closed)
        atk_say(c, " (the last at %.1f s)", (double)last / 1e9);
    if (failed)
        atk_say(c, "; %d could not upgrade", failed);
    free(fds), free(payload), free(closed_at);
    return 0;
}

static int count_err(void *ud, const pr_event *ev)
{
    *(int *)ud += ev->t == PR_EV_ERR;
    return 0;
}

/* What the server answered to one frame: its close code, 0 for a close frame without one,
 * -1 nothing within the wait, -2 EOF without a close, -3 a reset. Counts the err events
 * in its data frames. The legitimate clients keep going meanwhile. */
static int answer(atk_ctx *c, int fd, int wait_ms, int *errs)
{
    static uint8_t buf[65536];
    int64_t until = load_now_ns() + (int64_t)wait_ms * 1000000;
    for (;;) {
        int left = (int)((until - load_now_ns()) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0)
            return -1;
        if (poll(&p, 1, left < 20 ? left : 20) != 1) {
            atk_pump(c, 0);
            continue;
        }
        size_t n = 0;
        int op = atk_raw_read_frame(fd, buf, sizeof(buf), &n, left);
        if (op == WS_CLOSE)
            return n >= 2 ? buf[0] << 8 | buf[1] : 0;
        if (op < 0)
            return op;
        pr_error perr;
        if (op == WS_BIN) /* gw.v1: MessagePack */
            pr_decode_events(c->dec, buf, n, count_err, errs, &perr);
        else if (op == WS_TEXT) /* gw.v1.json */
            *errs += memmem(buf, n, "\"err\"", 5) != NULL;
    }
}

/* Tallies answers by kind for the outcome: a close code, nothing, EOF, a reset. */
typedef struct tally {
    int codes[8], code_n[8], n_codes;
    int none, eof, reset;
} tally;

static void tally_add(tally *t, int a)
{
    if (a == -1)
        t->none++;
    else if (a == -2)
        t->eof++;
    else if (a == -3)
        t->reset++;
    else {
        int i = 0;
        while (i < t->n_codes && t->codes[i] != a)
            i++;
        if (i == t->n_codes && t->n_codes < 8)
            t->codes[t->n_codes++] = a;
        if (i < 8)
            t->code_n[i]++;
    }
}

static void tally_say(atk_ctx *c, const tally *t)
{
    for (int i = 0; i < t->n_codes; i++)
        atk_say(c, "%sclose %d x%d", i ? ", " : "", t->codes[i], t->code_n[i]);
    if (t->none)
        atk_say(c, "%sno answer x%d", t->n_codes ? ", " : "", t->none);
    if (t->eof)
        atk_say(c, "%sEOF without a close x%d", t->n_codes || t->none ? ", " : "", t->eof);
    if (t->reset)
        atk_say(c, "%sreset (1006) x%d", t->n_codes || t->none || t->eof ? ", " : "", t->reset);
}

int atk_json(atk_ctx *c)
{
    /* "[{},{},...{}]" just under 256 KiB: the largest frame the default --max-frame takes. */
    size_t k = (FRAGMENT - 16) / 3, n = 0;
    char *text = malloc(k * 3 + 4);
    if (!text)
        return -1;
    text[n++] = '[';
    for (size_t i = 0; i < k; i++) {
        memcpy(text + n, "{},", 3);
        n += 3;
    }
    text[n - 1] = ']';
    tally t = {0};
    int errs = 0, failed = 0;
    atk_begin(c);
    for (int i = 0; i < c->cfg->tries; i++) {
        int fd = atk_raw_ws(c->cfg, "gw.v1.json", 2000);
        if (fd < 0) {
            failed++;
            continue;
        }
        c->sent_conns++;
        c->sent_requests++;
        c->sent_bytes += atk_raw_frame(fd, WS_TEXT, true, text, n, 2000);
        tally_add(&t, answer(c, fd, 2000, &errs));
        close(fd);
    }
    free(text);
    atk_end(c, 1);
    double cpu = c->figs.cpu_end_s - c->figs.cpu0_s;
    int sent = c->cfg->tries - failed;
    atk_say(c, "%d first frames of %zu KiB of `[{},...]`: %.1f ms of server CPU each; %d err; ",
            sent, n / 1024, sent ? cpu * 1000 / sent : 0, errs);
    tally_say(c, &t);
    return 0;
}

/* One try: a session signs in, then writes n_bad bad requests in one write. */
static int pipelined_once(atk_ctx *c, int n_bad, int *errs)
{
    int fd = atk_raw_ws(c->cfg, "gw.v1", 2000), a = -3;
    char uid[40];
    snprintf(uid, sizeof(uid), "piper-%x", c->run_id);
    if (fd < 0 || load_enc_hello_with(c->cfg->secret, c->cfg->secret_n, uid, &c->sb) != 0)
        goto out;
    atk_raw_frame(fd, WS_BIN, true, c->sb.data, c->sb.size, 1000);
    c->sb.size = 0;
    uint8_t welcome[4096];
    size_t wn;
    if (atk_raw_read_frame(fd, welcome, sizeof(welcome), &wn, 5000) != WS_BIN)
        goto out;
    /* {t: "nope", rid: i}: an unknown type, an error each, against the error budget. */
    size_t cap = (size_t)n_bad * (32 + ATK_FRAME_HEAD), len = 0;
    uint8_t *all = malloc(cap);
    if (!all)
        goto out;
    for (int i = 0; i < n_bad; i++) {
        msgpack_packer pk;
        msgpack_packer_init(&pk, &c->sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        msgpack_pack_str_with_body(&pk, "t", 1);
        msgpack_pack_str_with_body(&pk, "nope", 4);
        msgpack_pack_str_with_body(&pk, "rid", 3);
        msgpack_pack_uint32(&pk, (uint32_t)i);
        len += atk_raw_frame_enc(all + len, WS_BIN, true, c->sb.data, c->sb.size);
        c->sb.size = 0;
    }
    c->sent_requests += (uint64_t)n_bad;
    c->sent_bytes += atk_raw_write(fd, all, len, 2000);
    free(all);
    a = answer(c, fd, 5000, errs);
out:
    c->sb.size = 0;
    if (fd >= 0) {
        c->sent_conns++;
        close(fd);
    }
    return a;
}

int atk_pipelined(atk_ctx *c)
{
    atk_begin(c);
    const int sizes[2] = {c->cfg->bad, c->cfg->bad * 5};
    for (int s = 0; s < 2; s++) {
        tally t = {0};
        int errs = 0;
        for (int i = 0; i < c->cfg->tries; i++)
            tally_add(&t, pipelined_once(c, sizes[s], &errs));
        atk_say(c, "%s%d bad requests in one write, %d tries: ", s ? "; " : "", sizes[s],
                c->cfg->tries);
        tally_say(c, &t);
        atk_say(c, " (%.1f errors read a try)", (double)errs / c->cfg->tries);
    }
    atk_end(c, 1);
    return 0;
}
