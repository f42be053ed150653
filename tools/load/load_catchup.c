/*
 * load_catchup: what W5's two drivers share (load_pull.c on the gateway, load_xmpp_pull.c
 * by MAM): a step's session closed after what it queued went out, and the returning
 * user's reading, timed from before its sign-in to the last page, with its JSON line.
 */
#include "load_run.h"

#include <stdio.h>

#define CATCHUP_WAIT_NS 30000000000LL /* no page for this long ends the reading */

void load_sess_close_drained(load_run *r, load_sess *s)
{
    for (int64_t until = load_now_ns() + 2000000000;
         lw_queued(s->k) && lw_state(s->k) == LW_OPEN && load_now_ns() < until;)
        load_pump(r, 5);
    lw_close(s->k);
}

void load_catchup_start(load_catchup *c, const load_cfg *cfg)
{
    c->cpu0 = load_self_cpu_s();
    c->srv0 = cfg->server_pid ? load_servers_cpu_s(cfg) : 0;
    c->t0 = load_now_ns();
}

void load_catchup_read(load_catchup *c, load_run *r, const load_sess *s, bool (*done)(const void *),
                       const void *arg, const char *who)
{
    c->last_page_ns = load_now_ns();
    while (!done(arg)) {
        if (r->st.errors || lw_state(s->k) == LW_CLOSED ||
            load_now_ns() - c->last_page_ns > CATCHUP_WAIT_NS) {
            fprintf(stderr, "gw_load: %s: reading: %s\n", who,
                    r->st.errors ? "failed" : "connection closed or timed out");
            break;
        }
        load_pump(r, 5);
    }
    c->secs = (double)(load_now_ns() - c->t0) / 1e9;
    c->cpu_self = load_self_cpu_s() - c->cpu0;
    c->cpu_srv = r->cfg->server_pid ? load_servers_cpu_s(r->cfg) - c->srv0 : 0;
}

void load_catchup_report(const load_catchup *c, const load_run *r, int groups, const char *extra,
                         double fill_s)
{
    const load_cfg *cfg = r->cfg;
    printf("{\"pull\":{\"limit\":%d,\"groups\":%d,\"messages\":%lu,\"pages\":%lu,"
           "\"seconds\":%.3f,\"messages_per_s\":%.1f,\"pages_per_s\":%.1f,\"bytes\":%lu},"
           "\"pull_window\":%d,%s\"stored\":%lu,"
           "\"fill_seconds\":%.2f,\"errors\":%lu,\"load_cpu_s\":%.3f,\"server_cpu_s\":%.3f}\n",
           cfg->pull, groups, (unsigned long)c->msgs, (unsigned long)c->pages, c->secs,
           (double)c->msgs / c->secs, (double)c->pages / c->secs, (unsigned long)c->bytes,
           cfg->pull_window, extra, (unsigned long)r->st.confirmed, fill_s,
           (unsigned long)r->st.errors, c->cpu_self, c->cpu_srv);
}
