/*
 * load_pull: --pull (W5), the offline pull. A user joins --pull-groups groups and goes
 * offline, another member stores --count messages round robin over them, then the user
 * signs in again and reads every group in pages of --pull (enter, then pull after), and
 * acks each group once it has read it. Timed from the sign-in to the last page.
 *
 * Pipelined (--pull-window K): up to K requests in flight on the one session, at most one
 * per group, so K groups are read at once. Replies come in the order of their rids, so
 * the requests in flight are a queue. Mids are dense per group, so a page after A with n
 * entries ends at A + n: the group's next pull goes out as soon as the page's fields are
 * read, before its entries are walked. Pages are read in place (load_page.h): only each
 * entry's mid, checked to follow the one before (no duplicate, no gap). K = 1 is one
 * request at a time, group after group.
 */
#include "load_page.h"
#include "load_run.h"

#include <stdlib.h>
#include <string.h>

#define PULL_WAIT_NS 30000000000LL /* longest wait for any one step of the run */

typedef struct pull_req {
    uint64_t rid;
    uint64_t after; /* the page holds mids after this */
    int g;
} pull_req;

typedef struct puller {
    load_run *r;
    const load_cfg *cfg;
    load_sess *s; /* the session of the current phase */
    char (*gids)[32];
    uint64_t *acks; /* by group: the stored ack, from the welcome */
    bool reading;   /* the timed phase: pages, read in place */
    int welcome_groups;
    /* Requests in flight: a ring of cfg->pull_window. */
    pull_req *q;
    int q_head, q_n;
    uint64_t next_rid;
    int next_group, groups_done;
    uint64_t unread;
    load_catchup c; /* the reading's figures (bytes: the returning user's session's) */
} puller;

static void say_err(puller *p, const pr_event *ev)
{
    if (++p->r->st.errors <= 5)
        fprintf(stderr, "gw_load: pull: err %.*s: %.*s\n", (int)ev->err_name.n, ev->err_name.p,
                (int)ev->err_msg.n, ev->err_msg.p);
}

/* The index of one of our groups, from its name ("pull<run>-<g>"), or -1. */
static int group_index(const puller *p, pr_slice gid)
{
    const char *dash = gid.n ? memchr(gid.p, '-', gid.n) : NULL;
    if (!dash)
        return -1;
    int g = 0;
    for (const char *c = dash + 1; c < (const char *)gid.p + gid.n; c++) {
        if (*c < '0' || *c > '9' || g > p->cfg->pull_groups)
            return -1;
        g = g * 10 + (*c - '0');
    }
    size_t pre = (size_t)(dash - (const char *)gid.p);
    bool ours = g < p->cfg->pull_groups && memcmp(gid.p, p->gids[g], pre + 1) == 0;
    return ours ? g : -1;
}

static void on_welcome(puller *p, const pr_event *ev)
{
    p->welcome_groups = 0;
    p->unread = 0;
    for (size_t i = 0; i < ev->n_items; i++) {
        pr_group gr;
        int g = pr_event_group(ev, i, &gr) == 0 ? group_index(p, gr.gid) : -1;
        if (g < 0)
            continue;
        p->acks[g] = gr.ack;
        p->unread += gr.unread;
        p->welcome_groups++;
    }
}

static int on_event(void *ud, const pr_event *ev)
{
    puller *p = ud;
    load_sess *s = p->s;
    switch (ev->t) {
    case PR_EV_WELCOME:
        on_welcome(p, ev);
        s->welcomed = true;
        break;
    case PR_EV_JOINED: s->inflight--; break;
    case PR_EV_SENT:
        s->inflight--;
        p->r->st.confirmed++;
        break;
    case PR_EV_ERR: say_err(p, ev); break;
    default: break;
    }
    return 0;
}

static void decode(puller *p, const uint8_t *f, size_t n)
{
    pr_error perr;
    if (pr_decode_events(p->r->dec, f, n, on_event, p, &perr) != 0 && ++p->r->st.errors <= 5)
        fprintf(stderr, "gw_load: pull: bad frame from the server: %s: %s\n",
                pr_err_name(perr.code), perr.msg);
}

/* Sends the group's first request (enter) or its next one (pull after `after`). */
static void request(puller *p, int g, bool first, uint64_t after)
{
    load_run *r = p->r;
    uint64_t rid = p->next_rid++;
    uint32_t limit = (uint32_t)p->cfg->pull;
    if (first)
        pr_enc_enter(&r->sb, rid, load_sl(p->gids[g]), limit);
    else
        pr_enc_pull(&r->sb, rid, load_sl(p->gids[g]), false, after, limit);
    load_send_frame(p->s, &r->sb);
    p->q[(p->q_head + p->q_n++) % p->cfg->pull_window] = (pull_req){rid, after, g};
}

static void start_next_group(puller *p)
{
    if (p->next_group < p->cfg->pull_groups) {
        int g = p->next_group++;
        request(p, g, true, p->acks[g]);
    }
}

/* A page: the group's next request goes out first, then the entries are walked. */
static void on_page(puller *p, load_frame *fr, const load_msg *m)
{
    load_run *r = p->r;
    if (!p->q_n || !m->has_rid || m->rid != p->q[p->q_head].rid) {
        if (++r->st.errors <= 5)
            fprintf(stderr, "gw_load: pull: a page out of turn\n");
        load_page_walk(fr, m, 0);
        return;
    }
    pull_req q = p->q[p->q_head];
    p->q_head = (p->q_head + 1) % p->cfg->pull_window;
    p->q_n--;
    p->c.pages++;
    p->c.msgs += m->n;
    p->c.last_page_ns = load_now_ns();
    uint64_t end = q.after + m->n;
    if (m->more && m->n) {
        request(p, q.g, false, end);
    } else {
        pr_ack a = {load_sl(p->gids[q.g]), end};
        pr_enc_ack(&r->sb, &a, 1);
        load_send_frame(p->s, &r->sb);
        p->groups_done++;
        start_next_group(p);
    }
    long off = load_page_walk(fr, m, q.after + 1);
    if (off != 0 && ++r->st.errors <= 5)
        fprintf(stderr, "gw_load: pull: %s: page after %lu: %ld of %u entries out of sequence\n",
                p->gids[q.g], (unsigned long)q.after, off, m->n);
}

static void read_frame(puller *p, const uint8_t *f, size_t n)
{
    load_frame fr;
    load_msg m;
    int rc;
    load_frame_begin(&fr, f, n);
    while ((rc = load_frame_next(&fr, &m)) == 1) {
        if (m.is_page)
            on_page(p, &fr, &m);
        else
            decode(p, m.raw, m.raw_n);
    }
    if (rc < 0 && ++p->r->st.errors <= 5)
        fprintf(stderr, "gw_load: pull: a frame that is not MessagePack as the gateway sends\n");
}

static void on_frame(load_sess *s, const uint8_t *f, size_t n)
{
    puller *p = s->run->mode_data;
    if (s == &p->r->ss[2])
        p->c.bytes += n;
    if (p->reading)
        read_frame(p, f, n);
    else
        decode(p, f, n);
}

static void on_open(load_sess *s)
{
    puller *p = s->run->mode_data;
    char uid[32];
    snprintf(uid, sizeof(uid), "%s-%x", s->sender ? "filler" : "puller", p->r->run_id);
    if (load_enc_hello(p->cfg, uid, &p->r->sb) != 0) {
        p->r->st.errors++;
        return;
    }
    load_send_frame(s, &p->r->sb);
}

/* Closes are seen where they matter: wait_for and the reading loop say them. */
static void on_close(load_sess *s, int code)
{
    (void)s;
    (void)code;
}

typedef bool (*pull_done_fn)(const puller *p);

/* Runs the loop until done(p); false (said why) after an error, a close or 30 s. */
static bool wait_for(puller *p, pull_done_fn done, const char *what)
{
    int64_t until = load_now_ns() + PULL_WAIT_NS;
    while (!done(p)) {
        const char *why = p->r->st.errors                  ? "an error from the server"
                          : lw_state(p->s->k) == LW_CLOSED ? "connection closed"
                          : load_now_ns() > until          ? "timed out"
                                                           : NULL;
        if (why) {
            fprintf(stderr, "gw_load: pull: %s: %s%s%s\n", what, why,
                    lw_error(p->s->k)[0] ? ": " : "", lw_error(p->s->k));
            return false;
        }
        load_pump(p->r, 5);
    }
    return true;
}

static bool welcomed(const puller *p)
{
    return p->s->welcomed;
}

static bool settled(const puller *p)
{
    return p->s->inflight == 0;
}

static bool read_all(const void *arg)
{
    const puller *p = arg;
    return p->groups_done == p->cfg->pull_groups && !p->q_n;
}

/* Connects session i (0: the user, 1: the filler) and signs it in; joins every group. */
static bool sign_in(puller *p, int i, bool join)
{
    load_sess *s = p->s = &p->r->ss[i];
    *s = (load_sess){.run = p->r, .sender = i == 1};
    if (lw_connect(p->r->loop, p->cfg->url, NULL, s, &s->k) != 0) {
        fprintf(stderr, "gw_load: pull: connect: %s\n", lw_loop_error(p->r->loop));
        return false;
    }
    if (!wait_for(p, welcomed, "signing in"))
        return false;
    for (int g = 0; join && g < p->cfg->pull_groups; g++) {
        pr_enc_join(&p->r->sb, PR_NO_RID, load_sl(p->gids[g]));
        load_send_frame(s, &p->r->sb);
        s->inflight++;
    }
    return wait_for(p, settled, "joining");
}

/* The filler stores count messages round robin over the groups, --window in flight. */
static bool fill(puller *p, long count)
{
    load_run *r = p->r;
    const load_cfg *cfg = p->cfg;
    char cid[32];
    int64_t until = load_now_ns() + PULL_WAIT_NS;
    for (long sent = 0; sent < count;) {
        while (p->s->inflight < cfg->window && sent < count) {
            int64_t t = load_now_ns();
            load_vary_body(r, r->body);
            memcpy(r->body, &t, sizeof(t));
            snprintf(cid, sizeof(cid), "%x-%ld", r->run_id, sent);
            pr_enc_send(&r->sb, PR_NO_RID, load_sl(p->gids[sent % cfg->pull_groups]), load_sl(cid),
                        (pr_body){{r->body, (size_t)cfg->body}, true});
            load_send_frame(p->s, &r->sb);
            p->s->inflight++;
            sent++;
            until = load_now_ns() + PULL_WAIT_NS;
        }
        if (r->st.errors || lw_state(p->s->k) == LW_CLOSED || load_now_ns() > until) {
            fprintf(stderr, "gw_load: pull: storing: %s\n",
                    r->st.errors ? "an error from the server" : "connection closed or timed out");
            return false;
        }
        load_pump(r, 5);
    }
    return wait_for(p, settled, "storing");
}

/* Closes the phase's session, after what it queued went out (bounded). */
static void sign_out(puller *p)
{
    load_sess_close_drained(p->r, p->s);
}

static int run_pull(puller *p)
{
    const load_cfg *cfg = p->cfg;
    load_run *r = p->r;
    long count = cfg->count ? cfg->count : 25000;
    for (int g = 0; g < cfg->pull_groups; g++)
        snprintf(p->gids[g], sizeof(p->gids[g]), "pull%x-%d", r->run_id, g);

    /* 1. The user joins every group and goes offline. */
    if (!sign_in(p, 0, true))
        return 1;
    sign_out(p);

    /* 2. Another member stores the messages, round robin over the groups. */
    int64_t f0 = load_now_ns();
    if (!sign_in(p, 1, true) || !fill(p, count))
        return 1;
    double fill_s = (double)(load_now_ns() - f0) / 1e9;
    sign_out(p);

    /* 3. The user comes back and reads every group. */
    load_catchup_start(&p->c, cfg);
    if (!sign_in(p, 2, false))
        return 1;
    if (p->welcome_groups != cfg->pull_groups) {
        fprintf(stderr, "gw_load: pull: the welcome lists %d of the %d groups\n", p->welcome_groups,
                cfg->pull_groups);
        return 1;
    }
    p->reading = true;
    for (int i = 0; i < cfg->pull_window; i++)
        start_next_group(p);
    load_catchup_read(&p->c, r, p->s, read_all, p, "pull");
    sign_out(p); /* the acks out */
    load_catchup_report(&p->c, r, cfg->pull_groups, "", fill_s);
    int rc = p->c.msgs == (uint64_t)count && p->unread == (uint64_t)count && !r->st.errors ? 0 : 1;
    if (rc)
        fprintf(stderr, "gw_load: pull: read %lu of %ld messages (%lu unread at sign-in)\n",
                (unsigned long)p->c.msgs, count, (unsigned long)p->unread);
    return rc;
}

int load_pull(const load_cfg *cfg)
{
    static const load_mode mode = {
        .subprotocol = "gw.v1", .on_open = on_open, .on_frame = on_frame, .on_close = on_close};
    puller p = {.cfg = cfg, .next_rid = 1};
    p.r = load_run_new(cfg, &mode, 3);
    p.gids = calloc((size_t)cfg->pull_groups, sizeof(*p.gids));
    p.acks = calloc((size_t)cfg->pull_groups, sizeof(*p.acks));
    p.q = calloc((size_t)cfg->pull_window, sizeof(*p.q));
    int rc = 1;
    if (p.r && p.gids && p.acks && p.q) {
        p.r->mode_data = &p;
        rc = run_pull(&p);
    } else {
        fprintf(stderr, "gw_load: pull: out of memory\n");
    }
    load_run_free(p.r);
    free(p.gids);
    free(p.acks);
    free(p.q);
    return rc;
}
