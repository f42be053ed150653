/*
 * libFuzzer target: whole requests through the gateway's real session path, without
 * sockets. The input is a script (fuzz_session.h) of WebSocket messages and socket events
 * for four client connections. Each message goes through gw_sess_rx (reassembly, limits,
 * auth state), the session's request queue and the routes into the real registry and a
 * real RocksDB store (a temp folder, opened once per process); the bridge's completions
 * are drained here, as the service thread drains them; replies and pushes come out of
 * gw_out_writeable. Time steps run the once-a-second sweep (hello deadline, pings,
 * hang-ups, slow consumers) and the ack flush; a ping written is answered with a pong,
 * and a connection given a timeout (lws_set_timeout) is dropped when the fake clock
 * passes it. Everything is reached through the modules' faces (gw_server.h and below).
 *
 * The seam is the link: this file defines the few libwebsockets functions the session
 * layer calls (lws_write hands each frame to the checks below) and the gateway's clock
 * (gw_mono_ms, gw_now_ms: a fake one the script moves, so core/gw_clock.c is not
 * linked), and it is linked with the gateway's folder libraries built again for
 * fuzzing, of which only what it reaches is taken (not gw_server.c, gw_http.c or the
 * API), and not with libwebsockets. The gateway's sources are the ones the server runs,
 * unchanged, made by the same gw_modules_init (without a context or an event loop: the
 * ack timer is never armed, the time steps flush instead; the bridge is waited on
 * instead of woken).
 *
 * The store lives as long as the process, so groups, messages and used cids carry over
 * from one input to the next; memberships do not (every user leaves every group after
 * each input), or joins would soon all be refused for the group limit.
 *
 * Checks: every frame written decodes with the project's event decoder, fits in max_frame
 * (but a welcome or groups list), and says nothing beyond what the store holds; the mids
 * stored during an input are dense (read back from the store); pushes reach a session in
 * ascending mid order per group; a resent cid gets its first mid; lws is called only on
 * open connections and lws_write only from WRITEABLE; closes use the protocol's codes;
 * after each input every session, user, group, pending ack and store request is gone
 * from memory.
 */
#include "fuzz_session.h"
#include "gw_server.h"

#include <libwebsockets.h>

#include <ftw.h>
#include <stddef.h>
#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utlist.h>

static const char secret[] = "fuzz-secret-0123456789abcdef";

static gw_modules *mods;
static const gw_config *cfg; /* the modules' */
static st_store *store;
static gw_bridge *bridge;
static gw_sessions *sessions;
static gw_groups *groups;
static char dir[256];
static uint64_t clock_ms = 1000000;
static char *tokens[8];
/* The users the valid tokens name (tokens 0, 1, 2, 3 and 7). */
static const char *const uids[] = {
    "alice", "bob", "carol", "dave",
    "u234567890123456789012345678901234567890123456789012345678901234"};
static pr_decoder *out_dec; /* decodes what the gateway writes */
static bool trace;          /* FUZZ_SESSION_TRACE=1: print what each connection gets */

/* A mid by key: a group's id, or uid \1 cid. */
typedef struct mid_seen {
    char key[2 * PR_MAX_ID + 2];
    uint64_t mid;
    UT_hash_handle hh;
} mid_seen;

/* One client connection. The wsi handed to the gateway is the address of its byte in
 * wsi_mem: opaque to the gateway, and mapped back here. */
static struct slot {
    gw_sess *s;       /* NULL: not connected */
    bool choked;      /* lws_send_pipe_choked says so, and no WRITEABLE comes */
    bool rx_off;      /* lws_rx_flow_control(wsi, 0) in effect */
    bool freeing;     /* libwebsockets' CLOSED is under way: it must not be called about it */
    bool pong_due;    /* a ping went out: the client answers it */
    uint64_t kill_at; /* lws_set_timeout: libwebsockets drops the connection then (0: no) */
    mid_seen *pushed; /* per group: the last mid pushed to this connection */
} slots[FS_SLOTS];
static char wsi_mem[FS_SLOTS];
static bool in_writeable;

static mid_seen *checked; /* per group: mids up to this one were read back, dense */
static mid_seen *touched; /* this input: the groups a `sent` named */
static mid_seen *sends;   /* this input: uid \1 cid -> mid of its first `sent` */

static mid_seen *seen_get(mid_seen **h, const char *key, size_t n, bool add)
{
    mid_seen *e = NULL;
    HASH_FIND(hh, *h, key, n, e);
    if (!e && add) {
        e = calloc(1, sizeof(*e));
        if (!e)
            abort();
        memcpy(e->key, key, n);
        HASH_ADD(hh, *h, key, n, e);
    }
    return e;
}

static void seen_clear(mid_seen **h)
{
    mid_seen *e, *tmp;
    HASH_ITER (hh, *h, e, tmp) {
        HASH_DEL(*h, e);
        free(e);
    }
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_session: check failed at line %d: %s\n", __LINE__, #cond);       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- the seam: the gateway's clock and the libwebsockets calls it makes --------------- */

uint64_t gw_mono_ms(void)
{
    return clock_ms;
}

uint64_t gw_now_ms(void)
{
    return 1700000000000u + clock_ms;
}

static struct slot *slot_of(struct lws *wsi)
{
    ptrdiff_t i = (char *)wsi - wsi_mem;
    /* libwebsockets must never be asked about a connection it has closed. */
    CHECK(i >= 0 && i < FS_SLOTS && slots[i].s && !slots[i].freeing);
    return &slots[i];
}

int lws_callback_on_writable(struct lws *wsi)
{
    slot_of(wsi);
    return 1;
}

void lws_set_timeout(struct lws *wsi, enum pending_timeout reason, int secs)
{
    struct slot *sl = slot_of(wsi);
    if (secs == LWS_TO_KILL_ASYNC)
        sl->kill_at = clock_ms;
    else
        sl->kill_at = secs ? clock_ms + (uint64_t)secs * 1000u : 0;
}

int lws_send_pipe_choked(struct lws *wsi)
{
    return slot_of(wsi)->choked;
}

/* Asked only before writing outside WRITEABLE, which needs a loop: never here. */
int lws_partial_buffered(struct lws *wsi)
{
    CHECK(!"lws_partial_buffered without a loop");
    return slot_of(wsi)->choked;
}

int lws_rx_flow_control(struct lws *wsi, int enable)
{
    struct slot *sl = slot_of(wsi);
    CHECK(sl->rx_off == !!enable); /* only ever a change */
    sl->rx_off = !enable;
    return 0;
}

void lws_close_reason(struct lws *wsi, enum lws_close_status status, unsigned char *buf, size_t len)
{
    slot_of(wsi);
    CHECK(in_writeable);
    CHECK(status == 4001 || status == LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE ||
          status == LWS_CLOSE_STATUS_POLICY_VIOLATION || status == LWS_CLOSE_STATUS_GOINGAWAY ||
          status == LWS_CLOSE_STATUS_UNEXPECTED_CONDITION || status == 4013);
    CHECK(len <= 123); /* a close frame's payload is at most 125 bytes with the code */
    if (trace)
        fprintf(stderr, "  conn %d closed %d %.*s\n", (int)(slot_of(wsi) - slots), status, (int)len,
                (const char *)buf);
}

void lws_set_log_level(int level, void (*log_emit_function)(int level, const char *line)) {}

/* The largest mid the store holds for gid: nothing the gateway says may go beyond it. */
static uint64_t stored_last(pr_slice gid)
{
    char g[PR_MAX_ID + 1];
    CHECK(pr_id_valid(gid));
    memcpy(g, gid.p, gid.n);
    g[gid.n] = 0;
    uint64_t last = 0;
    int rc = st_read_last_mid(store, st_id_str(g), &last);
    CHECK(rc == 0 || rc == ST_ENOGROUP);
    return last;
}

/* What one written frame held. */
typedef struct frame_seen {
    struct slot *sl;
    size_t n; /* messages */
    enum pr_ev_type t;
} frame_seen;

static int check_event(void *ud, const pr_event *ev)
{
    frame_seen *f = ud;
    f->n++;
    f->t = ev->t;
    if (trace)
        fprintf(stderr, "  conn %d <- %d %.*s mid %lu last %lu ack %lu n %zu %.*s\n",
                (int)(f->sl - slots), ev->t, (int)ev->gid.n, (const char *)ev->gid.p,
                (unsigned long)(ev->mid ? ev->mid : ev->msg.mid), (unsigned long)ev->last_mid,
                (unsigned long)ev->ack, ev->n_items, (int)ev->err_msg.n,
                (const char *)ev->err_msg.p);
    switch (ev->t) {
    case PR_EV_WELCOME:
    case PR_EV_GROUPS:
        CHECK(ev->n_items <= cfg->max_groups); /* join refuses more: too_large */
        for (size_t i = 0; i < ev->n_items; i++) {
            pr_group g;
            CHECK(pr_event_group(ev, i, &g) == 0);
            /* Unread counts from the read once there is one, else from the ack, and never
             * count what is below the horizon. */
            uint64_t seen = g.has_read ? g.read : g.ack;
            CHECK(g.ack <= g.last_mid && seen <= g.last_mid && g.first_mid >= 1);
            if (g.first_mid > seen + 1)
                seen = g.first_mid - 1;
            CHECK(g.unread == g.last_mid - seen);
            CHECK(g.last_mid <= stored_last(g.gid));
        }
        break;
    case PR_EV_JOINED:
        CHECK(ev->ack <= ev->last_mid && ev->last_mid <= stored_last(ev->gid));
        break;
    case PR_EV_SENT: {
        uint64_t last = stored_last(ev->gid);
        CHECK(ev->mid >= 1 && ev->mid <= last);
        CHECK(gw_sess_uid(f->sl->s) && pr_id_valid(ev->cid));
        /* Idempotent send: the same (uid, cid) always gets its first mid. */
        char key[2 * PR_MAX_ID + 2];
        int n = snprintf(key, sizeof(key), "%s\x01%.*s", gw_sess_uid(f->sl->s), (int)ev->cid.n,
                         (const char *)ev->cid.p);
        mid_seen *e = seen_get(&sends, key, (size_t)n, false);
        if (e)
            CHECK(e->mid == ev->mid);
        else
            seen_get(&sends, key, (size_t)n, true)->mid = ev->mid;
        seen_get(&touched, (const char *)ev->gid.p, ev->gid.n, true);
        break;
    }
    case PR_EV_MSG: {
        CHECK(ev->msg.mid >= 1 && ev->msg.mid <= stored_last(ev->gid));
        mid_seen *e = seen_get(&f->sl->pushed, (const char *)ev->gid.p, ev->gid.n, true);
        CHECK(ev->msg.mid > e->mid); /* in commit order, each once */
        e->mid = ev->msg.mid;
        break;
    }
    case PR_EV_PAGE: {
        CHECK(ev->n_items <= cfg->page_max && ev->last_mid <= stored_last(ev->gid));
        uint64_t prev = 0;
        for (size_t i = 0; i < ev->n_items; i++) {
            pr_message m;
            CHECK(pr_event_message(ev, i, &m) == 0);
            CHECK(m.mid >= 1 && m.mid <= ev->last_mid && (i == 0 || m.mid == prev + 1));
            prev = m.mid;
        }
        break;
    }
    case PR_EV_NOTIFY: CHECK(ev->last_mid >= 1 && ev->last_mid <= stored_last(ev->gid)); break;
    case PR_EV_EDITED:
    case PR_EV_RECALLED:
        /* A version of a stored message; a tombstone has no body. */
        CHECK(ev->msg.mid >= 1 && ev->msg.mid <= stored_last(ev->gid) && ev->msg.ver >= 1);
        CHECK(ev->t == PR_EV_EDITED || ev->msg.body.data.n == 0);
        break;
    case PR_EV_ERR:
        CHECK(ev->err_code != 0); /* only the protocol's codes */
        break;
    case PR_EV_CHANGES: {
        /* Entries in ascending cseq, none past the group's last, bounded like a page. */
        CHECK(ev->n_items <= cfg->page_max && ev->upto <= ev->last_cseq);
        CHECK(ev->changes_gone_before == 0 || ev->n_items == 0);
        uint64_t prev = ev->after;
        for (size_t i = 0; i < ev->n_items; i++) {
            pr_message m;
            CHECK(pr_event_message(ev, i, &m) == 0);
            CHECK(m.cseq > prev && m.cseq <= ev->upto && m.n_reactions <= PR_REACT_KEYS_MAX);
            prev = m.cseq;
        }
        break;
    }
    case PR_EV_REACTED:
        CHECK(ev->mid >= 1 && ev->mid <= stored_last(ev->gid) && (ev->cseq >= 1 || ev->duplicate));
        CHECK(pr_react_key_valid(ev->key) && (ev->count >= 1 || !ev->on));
        break;
    default: break;
    }
    return 0;
}

int lws_write(struct lws *wsi, unsigned char *buf, size_t len, enum lws_write_protocol protocol)
{
    frame_seen f = {slot_of(wsi), 0, 0};
    CHECK(in_writeable && len > 0);
    if (protocol == LWS_WRITE_PING) {
        CHECK(len <= 125); /* a control frame's payload */
        f.sl->pong_due = true;
        return (int)len;
    }
    CHECK(protocol == LWS_WRITE_BINARY);
    pr_error err;
    CHECK(pr_decode_events(out_dec, buf, len, check_event, &f, &err) == 0 && f.n > 0);
    /* Within the frame limit, but for a lone welcome or groups list (sent whole). */
    CHECK(len <= cfg->max_frame || (f.n == 1 && (f.t == PR_EV_WELCOME || f.t == PR_EV_GROUPS)));
    return (int)len;
}

/* ---- the service thread's part ---------------------------------------------------------- */

/* Runs the store's completions as the server does when the bridge wakes it, until no
 * store request is in flight. */
static void drain(void)
{
    do {
        gw_bridge_wait(bridge);
        gw_bridge_drain(bridge);
        gw_sessions_store_calm(sessions);
    } while (gw_bridge_inflight(bridge));
}

/* The mids stored in each group sent to are dense: read back from the store, every mid
 * since the last check is there, in order. */
static void check_dense(void)
{
    mid_seen *t, *tmp;
    HASH_ITER (hh, touched, t, tmp) {
        char g[PR_MAX_ID + 1];
        snprintf(g, sizeof(g), "%s", t->key);
        mid_seen *c = seen_get(&checked, g, strlen(g), true);
        uint64_t last = stored_last((pr_slice){(const uint8_t *)g, strlen(g)});
        CHECK(last >= c->mid);
        if (last == c->mid)
            continue;
        st_page *p = NULL;
        CHECK(st_read_page(store, st_id_str(g), ST_AFTER, c->mid, last - c->mid, &p) == 0);
        CHECK(st_page_count(p) == last - c->mid);
        for (size_t i = 0; i < st_page_count(p); i++)
            CHECK(st_page_at(p, i)->mid == c->mid + 1 + i);
        st_page_free(p);
        c->mid = last;
    }
    seen_clear(&touched);
}

/* libwebsockets' CLOSED: the connection is gone. */
static void conn_closed(struct slot *sl)
{
    sl->freeing = true;
    gw_sess_free(sl->s);
    sl->freeing = false;
    sl->s = NULL;
    sl->rx_off = sl->pong_due = false;
    sl->kill_at = 0;
    seen_clear(&sl->pushed);
}

static gw_sess *conn_open(struct slot *sl)
{
    if (!sl->s) {
        sl->s = gw_sess_new(sessions, (struct lws *)&wsi_mem[sl - slots], false);
        CHECK(sl->s);
    }
    return sl->s;
}

/* WRITEABLE until the queue is empty; a -1 closes the connection as libwebsockets does. */
static void write_out(struct slot *sl)
{
    for (int i = 0; sl->s && !sl->choked && i < 100000; i++) {
        if (!gw_sess_wants_write(sl->s))
            return;
        in_writeable = true;
        int rc = gw_out_writeable(sl->s);
        in_writeable = false;
        if (rc < 0) {
            conn_closed(sl);
            return;
        }
    }
}

/* One received message, whole or in two pieces. */
static void deliver(struct slot *sl, const uint8_t *d, size_t n, size_t cut, bool binary)
{
    gw_sess *s = conn_open(sl);
    if (sl->rx_off) {
        /* libwebsockets does not read a paused socket: the bytes wait until it resumes. */
        drain();
        write_out(sl);
        if (!sl->s || sl->rx_off)
            return;
    }
    int rc;
    if (cut > 0 && cut < n) {
        rc = gw_sess_rx(s, d, cut, true, false, binary);
        if (rc == 0)
            rc = gw_sess_rx(s, d + cut, n - cut, false, true, binary);
    } else {
        rc = gw_sess_rx(s, d, n, true, true, binary);
    }
    if (rc < 0)
        conn_closed(sl);
}

static int collect_group(void *ud, const st_user_group *g)
{
    char(*gids)[PR_MAX_ID + 1] = ud;
    size_t i = 0;
    while (gids[i][0] && i < 63)
        i++;
    if (g->gid.n <= PR_MAX_ID && i < 63)
        memcpy(gids[i], g->gid.p, g->gid.n);
    return 0;
}

/* Each input starts with users in no group: memberships would otherwise pile up over the
 * run until every join is refused (max_groups), and inputs would mean less and less. */
static void leave_all(const char *uid)
{
    char gids[64][PR_MAX_ID + 1];
    memset(gids, 0, sizeof(gids));
    CHECK(st_read_user_groups(store, st_id_str(uid), collect_group, gids) == 0);
    for (size_t i = 0; i < 64 && gids[i][0]; i++)
        CHECK(st_leave_sync(store, st_id_str(gids[i]), st_id_str(uid)) == 0);
}

static void hello(struct slot *sl, unsigned which)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    const char *t = tokens[which];
    CHECK(pr_enc_hello(&sb, which, (pr_slice){(const uint8_t *)t, strlen(t)}) == 0);
    deliver(sl, (const uint8_t *)sb.data, sb.size, 0, true);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- set-up ------------------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void at_exit(void)
{
    st_close(store);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A token of uid that allows only the groups `room` and `r2` (a `groups` claim). */
static char *mint_restricted(const char *uid, long exp)
{
    jwt_t *jwt = NULL;
    char *out = NULL;
    if (jwt_new(&jwt) == 0 && jwt_add_grant(jwt, "sub", uid) == 0 &&
        jwt_add_grant_int(jwt, "exp", exp) == 0 &&
        jwt_add_grants_json(jwt, "{\"groups\":[\"room\",\"r2\"]}") == 0 &&
        jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)secret, sizeof(secret) - 1) == 0)
        out = jwt_encode_str(jwt);
    jwt_free(jwt);
    return out;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* Small limits, so that short inputs reach them: the cap on pushes, pages cut short,
     * paused reading, the group limit, the slow-consumer close. */
    char *args[] = {"gw",    "--max-frame",    "2048", "--max-body",
                    "512",   "--queue-cap",    "4",    "--queue-bytes",
                    "65536", "--max-groups",   "2",    "--inflight-max",
                    "4",     "--page-default", "5",    "--page-max",
                    "20",    "--slow-close",   "2",    NULL};
    gw_config c;
    CHECK(gw_config_parse(&c, (int)(sizeof(args) / sizeof(args[0])) - 1, args) == 0);
    memcpy(c.secret, secret, sizeof(secret) - 1);
    c.secret_n = sizeof(secret) - 1;
    trace = getenv("FUZZ_SESSION_TRACE") != NULL;
    gw_log_set_level(trace ? GW_LOG_DEBUG : GW_LOG_ERROR);

    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/fuzz-session-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir));
    st_options so;
    st_options_init(&so);
    so.path = dir;
    so.sync = false; /* a process crash loses nothing; fsyncs would only slow the fuzzing */
    char err[256];
    if (st_open(&so, &store, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_session: %s\n", err);
        abort();
    }

    /* The gateway's modules, as the server makes them, without a context or a loop. */
    gw_modules_parts parts;
    mods = gw_modules_new(&c, store, &parts);
    CHECK(mods);
    cfg = parts.cfg;
    bridge = parts.bridge;
    sessions = parts.sessions;
    groups = parts.groups;
    /* Frames from the server may be larger (a welcome is sent whole). */
    pr_limits out_lim = {.max_frame = 16u << 20,
                         .max_body = cfg->max_body,
                         .page_default = cfg->page_default,
                         .page_max = cfg->page_max};
    out_dec = pr_decoder_new(&out_lim);
    CHECK(out_dec);
    atexit(at_exit);

    /* Tokens by number: users with any group, one with a groups claim, and three that must
     * be refused (expired, another secret, a subject that is not an id). */
    long later = (long)time(NULL) + 10L * 365 * 86400;
    for (int i = 0; i < 3; i++)
        CHECK(gw_auth_mint(secret, sizeof(secret) - 1, uids[i], later, &tokens[i]) == 0);
    tokens[3] = mint_restricted(uids[3], later);
    CHECK(gw_auth_mint(secret, sizeof(secret) - 1, "eve", 1000, &tokens[4]) == 0);
    CHECK(gw_auth_mint("another-secret-0123456789", 25, "bob", later, &tokens[5]) == 0);
    CHECK(gw_auth_mint(secret, sizeof(secret) - 1, "not an id", later, &tokens[6]) == 0);
    CHECK(gw_auth_mint(secret, sizeof(secret) - 1, uids[4], later, &tokens[7]) == 0);
    CHECK(tokens[3]);
    return 0;
}

/* ---- one input ---------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned op = d[i++];
        struct slot *sl = &slots[op & 3];
        unsigned step = (op >> 2) & 7, arg = op >> 5;
        size_t len = 0;
        const uint8_t *msg = NULL;
        if (step == FS_FRAME || step == FS_SPLIT || step == FS_TEXT) {
            if (i + 2 > n)
                break;
            len = (size_t)d[i] << 8 | d[i + 1];
            i += 2;
            if (len > n - i)
                len = n - i;
            msg = d + i;
            i += len;
        }
        bool wait = true;
        switch (step) {
        case FS_FRAME:
            deliver(sl, msg, len, 0, true);
            wait = !(arg & 1);
            break;
        case FS_SPLIT: deliver(sl, msg, len, len * arg / 8, true); break;
        case FS_TEXT: deliver(sl, msg, len, 0, false); break;
        case FS_HELLO: hello(sl, arg); break;
        case FS_WRITE:
            conn_open(sl); /* also a connection that has sent nothing yet */
            write_out(sl);
            break;
        case FS_CLOSE:
            if (sl->s)
                conn_closed(sl);
            break;
        case FS_TICK:
            clock_ms += (arg + 1) * 250u;
            gw_sessions_sweep(sessions, gw_mono_ms());
            gw_acks_flush(gw_groups_acks(groups));
            break;
        case FS_CHOKE: sl->choked = !sl->choked; break;
        }
        if (wait)
            drain();
        for (int k = 0; k < FS_SLOTS; k++) {
            struct slot *c = &slots[k];
            if (c->s && c->kill_at && clock_ms >= c->kill_at)
                conn_closed(c); /* libwebsockets' timeout fired */
            if (c->s && c->pong_due) {
                c->pong_due = false; /* the client's pong (LWS_CALLBACK_RECEIVE_PONG) */
                gw_sess_alive(c->s);
            }
        }
    }

    /* The end: every reply goes out, acks are persisted, every client leaves. */
    drain();
    for (int k = 0; k < FS_SLOTS; k++) {
        slots[k].choked = false;
        write_out(&slots[k]);
    }
    gw_acks_flush(gw_groups_acks(groups));
    drain();
    for (int k = 0; k < FS_SLOTS; k++)
        if (slots[k].s)
            conn_closed(&slots[k]);
    CHECK(gw_sessions_count(sessions) == 0 && gw_registry_empty(gw_groups_registry(groups)) &&
          !gw_acks_waiting(gw_groups_acks(groups)) && gw_bridge_inflight(bridge) == 0);
    check_dense();
    for (size_t k = 0; k < sizeof(uids) / sizeof(uids[0]); k++)
        leave_all(uids[k]);
    seen_clear(&sends);
    return 0;
}
