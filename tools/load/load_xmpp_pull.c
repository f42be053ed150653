/*
 * load_xmpp_pull: gw_load --xmpp --pull L, the XMPP side of W5: a returning user catches up
 * on its rooms by MAM (XEP-0313), as the gateway's --pull reads its groups.
 *
 *   1. User u0 signs in, joins --pull-groups rooms (creating them), asks each room's
 *      archive for its last id (RSM <before/>, one item: what it had seen when it leaves),
 *      and goes offline.
 *   2. User u1 signs in, joins the rooms and stores --count messages round robin over
 *      them, --window in flight, each confirmed by the room's reflection; then leaves.
 *   3. User u0 comes back (timed from its connect, as the gateway's from the sign-in) and
 *      queries each room's archive in pages of L after the id of step 1, paging by <fin>'s
 *      RSM <last> until complete="true", with --pull-window rooms in flight at once. Every
 *      <result> is one message; pull.bytes counts every byte received in this step.
 *
 * --xmpp-preloaded skips 1 and 2: each room's whole archive is read.
 */
#include "load_xmpp.h"

#include <stdlib.h>
#include <string.h>

#define XP_WAIT_NS 30000000000LL /* longest wait for any one step */
#define XP_MAX_PAGES 1000000     /* pages per room: a server that never says complete */

typedef struct xpull {
    load_run *r;
    const load_cfg *cfg;
    xs_parser *xp;
    load_sess *s; /* the session of the current step */
    lx_sess x;
    int rooms;
    char (*last)[128]; /* by room: the archive id to read after ("" = from the start) */
    int joined, cfg_pending, lasts_known;
    char *text; /* a body: cfg->body bytes and a NUL */
    /* step 3 */
    bool reading;
    int *page_no;
    long *page_results;
    int next_room, rooms_done, in_flight;
    load_catchup c; /* the reading's figures */
} xpull;

static void query_page(xpull *p, int room, bool before_last)
{
    char rname[48], after[160] = "";
    lx_room(p->cfg, room, rname, sizeof(rname));
    if (before_last) {
        lx_sendf(
            p->s,
            "<iq xmlns=\"jabber:client\" type=\"set\" to=\"%s@%s\" id=\"l%d\"><query "
            "xmlns=\"urn:xmpp:mam:2\" queryid=\"l%d\"><set "
            "xmlns=\"http://jabber.org/protocol/rsm\"><max>1</max><before/></set></query></iq>",
            rname, p->cfg->xmpp_muc, room, room);
        return;
    }
    if (p->last[room][0])
        snprintf(after, sizeof(after), "<after>%s</after>", p->last[room]);
    int k = p->page_no[room]++;
    p->page_results[room] = 0;
    p->in_flight++;
    lx_sendf(p->s,
             "<iq xmlns=\"jabber:client\" type=\"set\" to=\"%s@%s\" id=\"p%d-%d\"><query "
             "xmlns=\"urn:xmpp:mam:2\" queryid=\"p%d-%d\"><set "
             "xmlns=\"http://jabber.org/protocol/rsm\"><max>%d</max>%s</set></query></iq>",
             rname, p->cfg->xmpp_muc, room, k, room, k, p->cfg->pull, after);
}

static void start_next_room(xpull *p)
{
    if (p->next_room < p->rooms)
        query_page(p, p->next_room++, false);
}

/* A page's iq result: the room's next page, or the room is done and the next starts. */
static void on_page(xpull *p, int room, const xs_stanza *st)
{
    p->in_flight--;
    p->c.pages++;
    p->c.last_page_ns = load_now_ns();
    if (!st->fin) {
        if (++p->r->st.errors <= 5)
            fprintf(stderr, "gw_load: xmpp pull: room %d: a MAM answer without <fin>\n", room);
        p->rooms_done++;
        return;
    }
    bool more = !st->complete && p->page_results[room] > 0 && st->rsm_last[0];
    if (more && p->page_no[room] >= XP_MAX_PAGES) {
        if (++p->r->st.errors <= 5)
            fprintf(stderr, "gw_load: xmpp pull: room %d: over %d pages\n", room, XP_MAX_PAGES);
        more = false;
    }
    if (more) {
        snprintf(p->last[room], sizeof(p->last[room]), "%s", st->rsm_last);
        query_page(p, room, false);
    } else {
        p->rooms_done++;
        start_next_room(p);
    }
}

static void on_iq(xpull *p, const xs_stanza *st)
{
    int room, k;
    if (strcmp(st->type, "error") == 0) {
        lx_stanza_error(p->r, p->reading ? "reading an archive" : "setting up", st);
        if (p->reading && sscanf(st->id, "p%d-%d", &room, &k) == 2) {
            p->in_flight--;
            p->rooms_done++;
        }
        return;
    }
    if (strcmp(st->type, "result") != 0)
        return;
    if (sscanf(st->id, "cfg%d", &room) == 1)
        p->cfg_pending--;
    else if (sscanf(st->id, "l%d", &room) == 1 && room >= 0 && room < p->rooms) {
        snprintf(p->last[room], sizeof(p->last[room]), "%s", st->rsm_last);
        p->lasts_known++;
    } else if (p->reading && sscanf(st->id, "p%d-%d", &room, &k) == 2 && room >= 0 &&
               room < p->rooms)
        on_page(p, room, st);
}

static void on_presence(xpull *p, const xs_stanza *st)
{
    const char *nick;
    int room = lx_room_of(p->cfg, st->from, &nick);
    if (strcmp(st->type, "error") == 0) {
        lx_stanza_error(p->r, "joining a room", st);
        return;
    }
    if (room < 0 || strcmp(st->type, "unavailable") == 0 ||
        !(st->status110 || strcmp(nick, p->x.name) == 0))
        return;
    p->joined++;
    if (st->status201) {
        char id[24];
        snprintf(id, sizeof(id), "cfg%d", room);
        lx_instant_room(p->s, room, id);
        p->cfg_pending++;
    }
}

static void on_message(xpull *p, const xs_stanza *st)
{
    int room, k;
    const char *nick;
    if (strcmp(st->type, "error") == 0) {
        lx_stanza_error(p->r, "sending", st);
        return;
    }
    if (st->mam_result) {
        if (p->reading && sscanf(st->queryid, "p%d-%d", &room, &k) == 2 && room >= 0 &&
            room < p->rooms) {
            p->page_results[room]++;
            p->c.msgs++;
        }
        return;
    }
    if (strcmp(st->type, "groupchat") == 0 && st->body &&
        lx_room_of(p->cfg, st->from, &nick) >= 0 && strcmp(nick, p->x.name) == 0 &&
        p->s->inflight > 0) {
        p->s->inflight--; /* the room's reflection of the filler's message */
        p->r->st.confirmed++;
    }
}

static void on_frame(load_sess *s, const uint8_t *f, size_t n)
{
    xpull *p = s->run->mode_data;
    if (s != p->s)
        return; /* a session of an earlier step, closing */
    if (p->reading)
        p->c.bytes += n;
    xs_stanza st;
    if (!lx_parse(p->r, p->xp, f, n, &st) || lx_sign_in_step(s, &p->x, &st))
        return;
    switch (st.kind) {
    case XS_PRESENCE: on_presence(p, &st); break;
    case XS_IQ: on_iq(p, &st); break;
    case XS_MESSAGE: on_message(p, &st); break;
    default: break;
    }
}

static void on_open(load_sess *s)
{
    xpull *p = s->run->mode_data;
    lx_begin(s, &p->x, s->sender ? 1 : 0);
}

/* Closes are seen where they matter: wait_for says them. */
static void on_close(load_sess *s, int code)
{
    (void)s;
    (void)code;
}

typedef bool (*xp_done_fn)(const xpull *p);

/* Runs the loop until done(p); false (said why) after an error, a close or 30 s. */
static bool wait_for(xpull *p, xp_done_fn done, const char *what)
{
    int64_t until = load_now_ns() + XP_WAIT_NS;
    while (!done(p)) {
        const char *why = p->r->st.errors                  ? "an error (above)"
                          : p->x.state == LX_FAILED        ? "signing in failed"
                          : lw_state(p->s->k) == LW_CLOSED ? "connection closed"
                          : load_now_ns() > until          ? "timed out"
                                                           : NULL;
        if (why) {
            fprintf(stderr, "gw_load: xmpp pull: %s: %s%s%s\n", what, why,
                    lw_error(p->s->k)[0] ? ": " : "", lw_error(p->s->k));
            return false;
        }
        load_pump(p->r, 5);
    }
    return true;
}

static bool signed_in(const xpull *p)
{
    return p->x.state == LX_READY;
}

static bool all_joined(const xpull *p)
{
    return p->joined == p->rooms && p->cfg_pending == 0;
}

static bool lasts_known(const xpull *p)
{
    return p->lasts_known == p->rooms;
}

static bool settled(const xpull *p)
{
    return p->s->inflight == 0;
}

/* Connects session i (0, 2: user u0; 1: the filler u1) and signs it in. */
static bool sign_in(xpull *p, int i)
{
    load_sess *s = p->s = &p->r->ss[i];
    *s = (load_sess){.run = p->r, .sender = i == 1};
    p->x.state = LX_OPENING; /* not the last step's session, READY */
    if (lw_connect(p->r->loop, p->cfg->url, NULL, s, &s->k) != 0) {
        fprintf(stderr, "gw_load: xmpp pull: connect: %s\n", lw_loop_error(p->r->loop));
        return false;
    }
    return wait_for(p, signed_in, "signing in");
}

static bool join_all(xpull *p)
{
    p->joined = p->cfg_pending = 0;
    for (int room = 0; room < p->rooms; room++)
        lx_join(p->s, &p->x, room);
    return wait_for(p, all_joined, "joining the rooms");
}

/* Leaves: the framing's <close/>, what was queued out (bounded), then the socket. */
static void sign_out(xpull *p)
{
    lx_sendf(p->s, "<close xmlns=\"urn:ietf:params:xml:ns:xmpp-framing\"/>");
    load_sess_close_drained(p->r, p->s);
}

/* The filler stores count messages round robin, --window awaiting their reflection. */
static bool fill(xpull *p, long count)
{
    load_run *r = p->r;
    int64_t until = load_now_ns() + XP_WAIT_NS;
    for (long sent = 0; sent < count;) {
        while (p->s->inflight < p->cfg->window && sent < count) {
            char rname[48], hex[17];
            lx_room(p->cfg, (int)(sent % p->rooms), rname, sizeof(rname));
            load_vary_body(r, (uint8_t *)p->text);
            snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)load_now_ns());
            memcpy(p->text, hex, 16);
            lx_sendf(p->s,
                     "<message xmlns=\"jabber:client\" to=\"%s@%s\" type=\"groupchat\" "
                     "id=\"%x-%ld\"><body>%s</body></message>",
                     rname, p->cfg->xmpp_muc, r->run_id, sent, p->text);
            p->s->inflight++;
            r->st.sends++;
            sent++;
            until = load_now_ns() + XP_WAIT_NS;
        }
        if (r->st.errors || lw_state(p->s->k) == LW_CLOSED || load_now_ns() > until) {
            fprintf(stderr, "gw_load: xmpp pull: storing: %s\n",
                    r->st.errors ? "an error (above)" : "connection closed or timed out");
            return false;
        }
        load_pump(r, 5);
    }
    return wait_for(p, settled, "storing");
}

static bool read_all(const void *arg)
{
    const xpull *p = arg;
    return p->rooms_done == p->rooms && !p->in_flight;
}

static int run_pull(xpull *p)
{
    const load_cfg *cfg = p->cfg;
    load_run *r = p->r;
    long count = cfg->count ? cfg->count : cfg->xmpp_preloaded ? 0 : 25000;
    double fill_s = 0;
    if (!cfg->xmpp_preloaded) {
        /* 1. The user joins every room, notes each archive's last id, goes offline. */
        if (!sign_in(p, 0) || !join_all(p))
            return 1;
        for (int room = 0; room < p->rooms; room++)
            query_page(p, room, true);
        if (!wait_for(p, lasts_known, "asking the archives for their last id"))
            return 1;
        sign_out(p);
        /* 2. Another member stores the messages. */
        int64_t f0 = load_now_ns();
        if (!sign_in(p, 1) || !join_all(p) || !fill(p, count))
            return 1;
        fill_s = (double)(load_now_ns() - f0) / 1e9;
        sign_out(p);
    }
    /* 3. The user comes back and reads every archive after what it had seen. */
    load_catchup_start(&p->c, cfg);
    p->reading = true;
    if (!sign_in(p, 2))
        return 1;
    for (int i = 0; i < cfg->pull_window; i++)
        start_next_room(p);
    load_catchup_read(&p->c, r, p->s, read_all, p, "xmpp pull");
    p->reading = false;
    sign_out(p);
    load_catchup_report(&p->c, r, p->rooms,
                        cfg->xmpp_preloaded ? "\"xmpp\":true,\"preloaded\":true,"
                                            : "\"xmpp\":true,\"preloaded\":false,",
                        fill_s);
    int rc = (!count || p->c.msgs == (uint64_t)count) && !r->st.errors ? 0 : 1;
    if (rc)
        fprintf(stderr, "gw_load: xmpp pull: read %lu of %ld messages\n", (unsigned long)p->c.msgs,
                count);
    return rc;
}

int load_xmpp_pull(const load_cfg *cfg)
{
    static const load_mode mode = {
        .subprotocol = "xmpp", .on_open = on_open, .on_frame = on_frame, .on_close = on_close};
    xpull p = {.cfg = cfg, .rooms = cfg->pull_groups};
    p.r = load_run_new(cfg, &mode, 3);
    p.xp = xs_parser_new();
    p.last = calloc((size_t)p.rooms, sizeof(*p.last));
    p.page_no = calloc((size_t)p.rooms, sizeof(*p.page_no));
    p.page_results = calloc((size_t)p.rooms, sizeof(*p.page_results));
    p.text = calloc(1, (size_t)cfg->body + 1);
    int rc = 1;
    if (p.r && p.xp && p.last && p.page_no && p.page_results && p.text) {
        p.r->mode_data = &p;
        rc = run_pull(&p);
    } else {
        fprintf(stderr, "gw_load: xmpp pull: out of memory\n");
    }
    load_run_free(p.r);
    xs_parser_free(p.xp);
    free(p.last);
    free(p.page_no);
    free(p.page_results);
    free(p.text);
    return rc;
}
