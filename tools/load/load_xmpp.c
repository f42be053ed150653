/*
 * load_xmpp: gw_load --xmpp, an XMPP server's MUC under the load gw_load puts on the
 * gateway (see load_xmpp.h for the sign-in and names this file also holds).
 *
 * Receiver i is user u<i>, an occupant of room i / --group-size; sender j is user
 * u<sessions + j>, an occupant of every room, sending round robin over them. Each room is
 * created by its owner (the first sender, or with no senders the room's first receiver)
 * before anyone else joins: the owner makes it an instant room when the server says it
 * is new (status 201), and gives --xmpp-members users (u<r * group-size> on, default the
 * room's online receivers) and every sender the affiliation "member" (muc#admin), so a
 * room can hold members who are offline. A groupchat message is CONFIRMED when the room
 * reflects it back to its sender (the message from ROOM/<own nick>; XEP-0045 rooms echo
 * to the sender after they took it, archive included), and DELIVERED at every other online
 * occupant that receives it. Each body starts with the time it was meant to be sent as 16
 * hex digits (text: a body is XML character data), then random lowercase letters.
 */
#include "load_xmpp.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the shared part: names, sending, sign-in ----------------------------------------- */

const char *lx_muc(const load_cfg *cfg)
{
    return cfg->xmpp_muc;
}

void lx_sendf(load_sess *s, const char *fmt, ...)
{
    char small[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    char *buf = small;
    if (n >= (int)sizeof(small)) { /* a long body or member list */
        buf = malloc((size_t)n + 1);
        if (!buf) {
            s->run->st.errors++;
            return;
        }
        va_start(ap, fmt);
        vsnprintf(buf, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (n < 0 || lw_send(s->k, buf, (size_t)n, true) != 0)
        s->run->st.errors++;
    if (buf != small)
        free(buf);
}

void lx_room(const load_cfg *cfg, int r, char *buf, size_t n)
{
    snprintf(buf, n, "%sroom%d", cfg->uid_prefix, r);
}

int lx_room_of(const load_cfg *cfg, const char *jid, const char **nick)
{
    size_t pre = strlen(cfg->uid_prefix), muc = strlen(cfg->xmpp_muc);
    *nick = "";
    if (strncmp(jid, cfg->uid_prefix, pre) != 0 || strncmp(jid + pre, "room", 4) != 0)
        return -1;
    const char *c = jid + pre + 4;
    long r = 0;
    if (*c < '0' || *c > '9')
        return -1;
    for (; *c >= '0' && *c <= '9'; c++)
        if ((r = r * 10 + (*c - '0')) > 1000000)
            return -1;
    if (*c != '@' || strncmp(c + 1, cfg->xmpp_muc, muc) != 0)
        return -1;
    c += 1 + muc;
    if (*c == '/')
        *nick = c + 1;
    else if (*c)
        return -1;
    return (int)r;
}

static void send_open(load_sess *s)
{
    lx_sendf(s, "<open xmlns=\"urn:ietf:params:xml:ns:xmpp-framing\" to=\"%s\" version=\"1.0\"/>",
             s->run->cfg->xmpp_domain);
}

void lx_begin(load_sess *s, lx_sess *x, int user)
{
    const load_cfg *cfg = s->run->cfg;
    x->state = LX_OPENING;
    x->user = user;
    x->rooms_joined = 0;
    snprintf(x->name, sizeof(x->name), "%.16su%d", cfg->uid_prefix, user);
    send_open(s);
}

static void fail(load_sess *s, lx_sess *x, const char *why, const xs_stanza *st)
{
    x->state = LX_FAILED;
    if (++s->run->st.errors <= 5)
        fprintf(stderr, "gw_load: xmpp: %s: signing in: %s%s%s\n", x->name, why,
                st->error_cond[0] ? ": " : "", st->error_cond);
}

/* SASL PLAIN (RFC 4616): base64 of "\0user\0password". */
static void send_auth(load_sess *s, const lx_sess *x)
{
    const load_cfg *cfg = s->run->cfg;
    unsigned char plain[256], b64[352];
    size_t u = strlen(x->name), p = strlen(cfg->xmpp_password);
    if (u + p + 2 > sizeof(plain)) {
        s->run->st.errors++;
        return;
    }
    plain[0] = 0;
    memcpy(plain + 1, x->name, u);
    plain[1 + u] = 0;
    memcpy(plain + 2 + u, cfg->xmpp_password, p);
    EVP_EncodeBlock(b64, plain, (int)(u + p + 2));
    lx_sendf(s, "<auth xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\" mechanism=\"PLAIN\">%s</auth>",
             (const char *)b64);
}

bool lx_sign_in_step(load_sess *s, lx_sess *x, const xs_stanza *st)
{
    if (st->kind == XS_CLOSE && x->state == LX_READY)
        return true; /* the answer to our <close/>, or a server ending a stream (its
                      * WebSocket close follows and is said as a close) */
    if (st->kind == XS_STREAM_ERROR || st->kind == XS_CLOSE) {
        fail(s, x, st->kind == XS_CLOSE ? "the server closed the stream" : "stream error", st);
        return true;
    }
    if (st->kind == XS_OPEN)
        return true;
    if (x->state >= LX_READY)
        return false;
    switch (x->state) {
    case LX_OPENING:
        if (st->kind != XS_FEATURES)
            break;
        if (!st->mech_plain) {
            fail(s, x, "the server does not offer SASL PLAIN", st);
            break;
        }
        send_auth(s, x);
        x->state = LX_AUTH;
        break;
    case LX_AUTH:
        if (st->kind == XS_FAILURE)
            fail(s, x, "SASL PLAIN failed (no such user, or not --xmpp-password)", st);
        if (st->kind != XS_SUCCESS)
            break;
        send_open(s); /* a new stream after SASL (RFC 6120 6.4.6), here a new <open/> */
        x->state = LX_REOPEN;
        break;
    case LX_REOPEN:
        if (st->kind != XS_FEATURES)
            break;
        if (!st->bind) {
            fail(s, x, "the server does not offer resource binding", st);
            break;
        }
        x->need_session = st->session && !st->session_optional;
        lx_sendf(s,
                 "<iq xmlns=\"jabber:client\" type=\"set\" id=\"bind\"><bind "
                 "xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><resource>r</resource></bind></iq>");
        x->state = LX_BIND;
        break;
    case LX_BIND:
    case LX_SESSION:
        if (st->kind != XS_IQ)
            break;
        if (strcmp(st->type, "result") != 0) {
            fail(s, x, x->state == LX_BIND ? "bind refused" : "session refused", st);
            break;
        }
        if (x->state == LX_BIND && x->need_session) {
            lx_sendf(s, "<iq xmlns=\"jabber:client\" type=\"set\" id=\"sess\"><session "
                        "xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></iq>");
            x->state = LX_SESSION;
        } else {
            x->state = LX_READY;
        }
        break;
    case LX_READY:
    case LX_FAILED: break;
    }
    return true;
}

bool lx_parse(load_run *r, xs_parser *xp, const uint8_t *f, size_t n, xs_stanza *st)
{
    int rc = xs_parse(xp, (const char *)f, n, st);
    if (rc == 0)
        return true;
    if (++r->st.errors <= 5)
        fprintf(stderr, "gw_load: xmpp: %s from the server: %.*s\n",
                rc == XS_E_NOMEM ? "out of memory reading a message" : "not XML",
                (int)(n < 200 ? n : 200), (const char *)f);
    return false;
}

void lx_stanza_error(load_run *r, const char *what, const xs_stanza *st)
{
    if (++r->st.errors <= 5)
        fprintf(stderr, "gw_load: xmpp: %s: error from %s (id %s): %s\n", what,
                st->from[0] ? st->from : "the server", st->id,
                st->error_cond[0] ? st->error_cond : "no condition given");
}

void lx_join(load_sess *s, const lx_sess *x, int r)
{
    char room[48];
    lx_room(s->run->cfg, r, room, sizeof(room));
    lx_sendf(s,
             "<presence xmlns=\"jabber:client\" to=\"%s@%s/%s\"><x "
             "xmlns=\"http://jabber.org/protocol/muc\"><history maxstanzas=\"0\"/></x></presence>",
             room, s->run->cfg->xmpp_muc, x->name);
}

void lx_instant_room(load_sess *s, int r, const char *id)
{
    char room[48];
    lx_room(s->run->cfg, r, room, sizeof(room));
    lx_sendf(s,
             "<iq xmlns=\"jabber:client\" type=\"set\" to=\"%s@%s\" id=\"%s\"><query "
             "xmlns=\"http://jabber.org/protocol/muc#owner\"><x xmlns=\"jabber:x:data\" "
             "type=\"submit\"/></query></iq>",
             room, s->run->cfg->xmpp_muc, id);
}

/* ---- the fan-out driver ---------------------------------------------------------------- */

typedef struct xfan {
    xs_parser *xp;
    lx_sess *xs; /* by session index */
    int n_rooms, rooms_ready;
    bool *room_ready;
    char *text;   /* the body as text: cfg->body bytes and a NUL */
    bool leaving; /* fan_finish sent <close/>: closes are expected */
} xfan;

static xfan *fan_of(const load_run *r)
{
    return r->mode_data;
}

static lx_sess *lx_of(load_sess *s)
{
    return &fan_of(s->run)->xs[s - s->run->ss];
}

/* The owner of room r: the first sender (in every room), else the room's first receiver. */
static load_sess *owner_of(load_run *r, int room)
{
    const load_cfg *cfg = r->cfg;
    return cfg->senders ? &r->ss[cfg->sessions] : &r->ss[room * cfg->group_size];
}

static int rooms_of(const load_sess *s)
{
    return s->sender ? fan_of(s->run)->n_rooms : 1;
}

/* The owner gives the room's members their affiliation: one muc#admin iq for them all. */
static void send_members(load_sess *o, int room)
{
    load_run *r = o->run;
    const load_cfg *cfg = r->cfg;
    int first = room * cfg->group_size, online = cfg->sessions - first;
    if (online > cfg->group_size)
        online = cfg->group_size;
    int m = cfg->xmpp_members > 0 ? cfg->xmpp_members : online;
    size_t cap = (size_t)(m + cfg->senders + 1) * 128 + 256, len = 0;
    char *items = malloc(cap), rname[48];
    if (!items) {
        r->st.errors++;
        return;
    }
    items[0] = 0;
    int own = lx_of(o)->user;
    for (int k = 0; k < m + cfg->senders; k++) {
        int u = k < m ? first + k : cfg->sessions + (k - m);
        if (u == own || (k >= m && u >= first && u < first + m))
            continue; /* the owner stays owner; a sender already listed */
        len += (size_t)snprintf(items + len, cap - len,
                                "<item affiliation=\"member\" jid=\"%.16su%d@%s\"/>",
                                cfg->uid_prefix, u, cfg->xmpp_domain);
    }
    lx_room(cfg, room, rname, sizeof(rname));
    lx_sendf(o,
             "<iq xmlns=\"jabber:client\" type=\"set\" to=\"%s@%s\" id=\"aff%d\"><query "
             "xmlns=\"http://jabber.org/protocol/muc#admin\">%s</query></iq>",
             rname, cfg->xmpp_muc, room, items);
    free(items);
}

static void on_presence(load_sess *s, lx_sess *x, const xs_stanza *st)
{
    load_run *r = s->run;
    const char *nick;
    int room = lx_room_of(r->cfg, st->from, &nick);
    if (strcmp(st->type, "error") == 0) {
        lx_stanza_error(r, "joining a room", st);
        return;
    }
    if (room < 0 || !(st->status110 || strcmp(nick, x->name) == 0))
        return; /* another occupant's presence */
    if (strcmp(st->type, "unavailable") == 0) {
        if (++r->st.errors <= 5)
            fprintf(stderr, "gw_load: xmpp: %s left room %d (kicked?)\n", x->name, room);
        return;
    }
    x->rooms_joined++;
    if (x->rooms_joined == rooms_of(s))
        s->joined = true;
    xfan *fx = fan_of(r);
    if (room < fx->n_rooms && owner_of(r, room) == s && !fx->room_ready[room]) {
        char id[24];
        snprintf(id, sizeof(id), "cfg%d", room);
        if (st->status201)
            lx_instant_room(s, room, id); /* new and locked until its owner configures it */
        send_members(s, room);
    }
}

static void on_iq(load_sess *s, const xs_stanza *st)
{
    xfan *fx = fan_of(s->run);
    if (strcmp(st->type, "error") == 0) {
        lx_stanza_error(s->run, "setting a room up", st);
        if (strncmp(st->id, "aff", 3) == 0)
            fprintf(stderr, "gw_load: xmpp: (rooms persist: a room an earlier run made has that "
                            "run's owner; another --uid-prefix gives new rooms)\n");
        return;
    }
    int room;
    if (strcmp(st->type, "result") == 0 && sscanf(st->id, "aff%d", &room) == 1 && room >= 0 &&
        room < fx->n_rooms && !fx->room_ready[room]) {
        fx->room_ready[room] = true;
        fx->rooms_ready++;
    }
}

/* The 16 hex digits a body starts with: when it was meant to be sent; -1 if not ours. */
static int64_t meant_of(const xs_stanza *st)
{
    if (st->body_n < 16)
        return -1;
    int64_t t = 0;
    for (int i = 0; i < 16; i++) {
        char c = st->body_head[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        t = t * 16 + v;
    }
    return t;
}

static void on_message(load_sess *s, lx_sess *x, const xs_stanza *st)
{
    load_run *r = s->run;
    load_stats *sts = &r->st;
    if (strcmp(st->type, "error") == 0) {
        lx_stanza_error(r, "sending", st);
        return;
    }
    const char *nick;
    if (strcmp(st->type, "groupchat") != 0 || !st->body || lx_room_of(r->cfg, st->from, &nick) < 0)
        return; /* a subject, a chat state, an invitation: not one of ours */
    int64_t now = load_now_ns(), meant = meant_of(st);
    if (meant < 0) {
        sts->gaps++; /* a body not of this run's making */
        return;
    }
    if (strcmp(nick, x->name) == 0) { /* the room's reflection: confirmed */
        if (s->sender && s->inflight > 0) {
            s->inflight--;
            sts->confirmed++;
            load_hist_add(&sts->lat_send, (now - meant) / 1000);
        }
        return;
    }
    sts->deliveries++;
    r->last_delivery_ns = now;
    load_hist_add(&sts->lat, (now - meant) / 1000);
    load_hist_add(&sts->lat_url[0], (now - meant) / 1000);
    sts->deliveries_url[0]++;
    if (r->cfg->interval > 0)
        load_hist_add(&r->lat_iv, (now - meant) / 1000);
}

static void fan_frame(load_sess *s, const uint8_t *f, size_t n)
{
    load_run *r = s->run;
    lx_sess *x = lx_of(s);
    xs_stanza st;
    if (!lx_parse(r, fan_of(r)->xp, f, n, &st))
        return;
    if (lx_sign_in_step(s, x, &st)) {
        s->welcomed = x->state == LX_READY;
        return;
    }
    switch (st.kind) {
    case XS_PRESENCE: on_presence(s, x, &st); break;
    case XS_IQ: on_iq(s, &st); break;
    case XS_MESSAGE: on_message(s, x, &st); break;
    default: break;
    }
}

static void fan_close(load_sess *s, int code)
{
    load_run *r = s->run;
    if (!fan_of(r)->leaving && r->closed <= 5)
        fprintf(stderr, "gw_load: xmpp: session of %.16su%d closed (%d%s%s)\n", r->cfg->uid_prefix,
                s->sender ? r->cfg->sessions + s->id : s->id, code, lw_error(s->k)[0] ? ": " : "",
                lw_error(s->k));
}

static void fan_open(load_sess *s)
{
    const load_cfg *cfg = s->run->cfg;
    lx_begin(s, lx_of(s), s->sender ? cfg->sessions + s->id : s->id);
}

static bool is_signed_in(const load_sess *s)
{
    return s->welcomed || s->run->st.errors;
}

/* The waits of the set-up end early on an error (said when it came): true then too, and
 * fan_set_up looks at the error count. */
static bool rooms_ready(const load_sess *s)
{
    const xfan *fx = fan_of(s->run);
    return fx->rooms_ready == fx->n_rooms || s->run->st.errors;
}

static bool is_joined(const load_sess *s)
{
    return s->joined || s->run->st.errors;
}

/* Signed in; the owners create and set up the rooms; then everyone else joins. */
static bool fan_set_up(load_run *r)
{
    const load_cfg *cfg = r->cfg;
    xfan *fx = fan_of(r);
    if (!load_wait_all(r, is_signed_in, 60 + r->n / 200.0, "signing in (xmpp)") || r->st.errors)
        return false;
    for (int room = 0; room < fx->n_rooms && r->n; room++) {
        load_sess *o = owner_of(r, room);
        lx_join(o, lx_of(o), room);
    }
    if (r->n && (!load_wait_all(r, rooms_ready, 60 + fx->n_rooms / 50.0, "creating the rooms") ||
                 r->st.errors))
        return false;
    for (int i = 0; i < r->n; i++) {
        load_sess *s = &r->ss[i];
        for (int room = s->sender ? 0 : s->group; room < (s->sender ? fx->n_rooms : s->group + 1);
             room++)
            if (owner_of(r, room) != s)
                lx_join(s, lx_of(s), room);
    }
    (void)cfg;
    return load_wait_all(r, is_joined, 60 + r->n / 100.0, "joining the rooms") && !r->st.errors;
}

static void fan_send(load_sess *s, int64_t meant_ns)
{
    load_run *r = s->run;
    xfan *fx = fan_of(r);
    char room[48];
    int g = s->group;
    s->group = (s->group + 1) % fx->n_rooms;
    lx_room(r->cfg, g, room, sizeof(room));
    load_vary_body(r, (uint8_t *)fx->text);
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)meant_ns);
    memcpy(fx->text, hex, 16);
    lx_sendf(s,
             "<message xmlns=\"jabber:client\" to=\"%s@%s\" type=\"groupchat\" id=\"%x-%lu\">"
             "<body>%s</body></message>",
             room, r->cfg->xmpp_muc, r->run_id, (unsigned long)r->st.sends, fx->text);
    s->inflight++;
    r->st.sends++;
}

static void fan_flat_out(load_run *r)
{
    const load_cfg *cfg = r->cfg;
    for (int i = 0; i < cfg->senders; i++) {
        load_sess *s = &r->ss[cfg->sessions + i];
        while (s->inflight < cfg->window && (!cfg->count || r->st.sends < (uint64_t)cfg->count))
            fan_send(s, load_now_ns());
    }
}

static bool fan_in_flight(const load_run *r)
{
    return r->st.confirmed < r->st.sends;
}

/* Leaving: the framing's <close/>, as a client signing off sends. */
static void fan_finish(load_run *r)
{
    fan_of(r)->leaving = true;
    for (int i = 0; i < r->n; i++)
        if (lw_state(r->ss[i].k) == LW_OPEN)
            lx_sendf(&r->ss[i], "<close xmlns=\"urn:ietf:params:xml:ns:xmpp-framing\"/>");
}

int load_xmpp(const load_cfg *cfg)
{
    static const load_mode mode = {.subprotocol = "xmpp",
                                   .on_open = fan_open,
                                   .on_frame = fan_frame,
                                   .on_close = fan_close,
                                   .set_up = fan_set_up,
                                   .send = fan_send,
                                   .flat_out = fan_flat_out,
                                   .in_flight = fan_in_flight,
                                   .finish = fan_finish};
    int n = cfg->sessions + cfg->senders;
    xfan fx = {.n_rooms = load_n_groups(cfg)};
    load_run *r = load_run_new(cfg, &mode, n);
    fx.xp = xs_parser_new();
    fx.xs = calloc((size_t)n + 1, sizeof(*fx.xs));
    fx.room_ready = calloc((size_t)fx.n_rooms, sizeof(*fx.room_ready));
    fx.text = calloc(1, (size_t)cfg->body + 1);
    int rc = 1;
    if (r && fx.xp && fx.xs && fx.room_ready && fx.text) {
        r->mode_data = &fx;
        rc = load_run_go(r);
    } else {
        fprintf(stderr, "gw_load: xmpp: out of memory\n");
    }
    load_run_free(r);
    xs_parser_free(fx.xp);
    free(fx.xs);
    free(fx.room_ready);
    free(fx.text);
    return rc;
}
