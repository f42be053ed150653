/*
 * Retention's passes (store.h, Retention): the first service thread of every node walks
 * the store's groups a page at a time (ST_OP_TRIM with --retain-* as the defaults; a
 * group's own retention, set through the API, wins), and the store deletes what each
 * group's retention lets go and moves its horizon. The horizons a page reports go to
 * every service thread's registry (unread counts and `groups` say them at once).
 *
 * Cadence: a page every PAGE_EVERY_S while a pass goes on, then the next pass PASS_EVERY_S
 * later; with no default retention (only groups' own, if any), PASS_IDLE_S later: a
 * gateway that keeps everything spends next to nothing on passes, and a group's own
 * retention set through the API takes effect within a minute there. Several
 * nodes on one database each make passes: a horizon only moves up, so a group is trimmed
 * once, and each node's registry learns every horizon from its own pass.
 */
#include "app_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_EVERY_S 0.05
#define PASS_EVERY_S 1.0
#define PASS_IDLE_S 60.0
#define PAGE_GROUPS 500    /* groups a page */
#define LOG_EVERY_MS 60000 /* a line says what was deleted, at most this often */

typedef struct retain_job {
    gw_job job; /* first: the completion finds it from its job */
    gw_retain *r;
} retain_job;

struct gw_retain {
    gw_app *a;
    ev_timer timer;
    char after[PR_MAX_ID + 1]; /* the pass's next page begins after this group ("": first) */
    bool busy;                 /* a page is being trimmed */
    uint64_t unlogged;         /* messages deleted since the last line */
    uint64_t logged_at;        /* monotonic ms of that line */
    uint64_t next_pass;        /* monotonic ms: the next pass begins then */
    retain_job page;
};

st_retain gw_retain_defaults(const gw_config *cfg)
{
    return (st_retain){
        .messages = cfg->retain_messages ? cfg->retain_messages : ST_KEEP_ALL,
        .ms = cfg->retain_days ? (uint64_t)cfg->retain_days * 86400000u : ST_KEEP_ALL,
        .cap = cfg->retain_cap,
        .until_acked = cfg->retain_until_acked ? ST_ACKED_ON : ST_ACKED_OFF,
    };
}

static bool any_default(const gw_config *cfg)
{
    /* A change log kept short (--retain-changes) is trimmed by the passes too. */
    return cfg->retain_messages || cfg->retain_days ||
           (cfg->retain_changes && cfg->retain_changes != UINT64_MAX) || cfg->retain_changes_ms;
}

static void trimmed(gw_job *j)
{
    gw_retain *r = ((retain_job *)j)->r;
    gw_app *a = r->a;
    st_op *op = &j->op;
    r->busy = false;
    if (op->result != 0) {
        a->figs.retain_errors++;
        gw_warn("retention: a pass over the groups after '%s' failed: %s (tried again in %.0f s)",
                r->after, st_strerror(op->result), PASS_EVERY_S);
        r->next_pass = gw_mono_ms() + (uint64_t)(PASS_EVERY_S * 1000);
        return;
    }
    a->figs.retain_deleted += op->applied;
    for (size_t i = 0; i < st_list_count(op->list); i++) {
        const st_item *it = st_list_at(op->list, i);
        char gid[PR_MAX_ID + 1];
        if (!gw_id_copy(gid, it->gid.p, it->gid.n))
            continue; /* not an id this gateway makes */
        gw_registry_horizon(a->d.registry, gid, it->lo);
        gw_hub_tell_horizon(a->d.hub, a->d.thread, gid, it->lo);
    }
    /* Horizons that moved took a cseq each: the online members pull their changes. */
    for (size_t i = 0; i < st_list_count(op->changed); i++) {
        const st_item *it = st_list_at(op->changed, i);
        char gid[PR_MAX_ID + 1];
        if (gw_id_copy(gid, it->gid.p, it->gid.n))
            gw_deliver_changed(a->d.deliver, gid, it->hi);
    }
    st_list_free(op->changed);
    op->changed = NULL;
    bool more = st_list_more(op->list);
    st_id after = st_list_after(op->list);
    snprintf(r->after, sizeof(r->after), "%.*s", (int)(after.n <= PR_MAX_ID ? after.n : 0),
             after.p);
    st_list_free(op->list);
    r->unlogged += op->applied;
    if (r->unlogged && gw_mono_ms() >= r->logged_at + LOG_EVERY_MS) {
        gw_info("retention: %llu messages deleted past their groups' retention since the last "
                "line",
                (unsigned long long)r->unlogged);
        r->unlogged = 0;
        r->logged_at = gw_mono_ms();
    }
    if (!more || !r->after[0]) {
        a->figs.retain_passes++;
        r->after[0] = 0;
        double wait = any_default(a->d.cfg) ? PASS_EVERY_S : PASS_IDLE_S;
        r->next_pass = gw_mono_ms() + (uint64_t)(wait * 1000);
    }
}

static void on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    gw_retain *r = (gw_retain *)((char *)t - offsetof(gw_retain, timer));
    gw_app *a = r->a;
    if (a->stopping || r->busy || (!r->after[0] && gw_mono_ms() < r->next_pass))
        return;
    st_op *op = &r->page.job.op;
    memset(op, 0, sizeof(*op));
    op->kind = ST_OP_TRIM;
    op->gid = st_id_str(r->after);
    op->limit = PAGE_GROUPS;
    op->retain = gw_retain_defaults(a->d.cfg);
    r->page.job.complete = trimmed;
    r->busy = true;
    if (gw_bridge_submit(a->d.bridge, &r->page.job) < 0)
        r->busy = false; /* closing */
}

gw_retain *gw_retain_new(gw_app *a)
{
    gw_retain *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->a = a;
    r->page.r = r;
    ev_timer_init(&r->timer, on_tick, PAGE_EVERY_S, PAGE_EVERY_S);
    ev_timer_start(a->d.loop, &r->timer);
    return r;
}

void gw_retain_free(gw_retain *r)
{
    if (!r)
        return;
    /* No page is under way: the server frees this after the store closed and every
     * completion ran. */
    ev_timer_stop(r->a->d.loop, &r->timer);
    free(r);
}
