/*
 * attack_flood: one session floods typing, edits or recalls (of its own messages) over a
 * few groups in turn, as fast as the server takes them, while the groups' other members
 * never read: every push for them piles up on the server (see attack.h).
 *
 * A reading member (the observer) counts what the server let through: each typing,
 * edited or recalled push it gets is one the attacker's requests made.
 */
#include "attack.h"

#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 64
#define ATTACKER_QUEUE (64 * 1024) /* bytes queued on the attacker: flat out, not hoarding */

typedef struct flood {
    int kind; /* PR_REQ_TYPING, PR_REQ_EDIT or PR_REQ_RECALL */
    char gids[MAX_GROUPS][40];
    uint64_t mids[MAX_GROUPS]; /* edit, recall: the attacker's message in each group */
    int n_groups, n_mids;
    uint64_t seen; /* the observer's pushes of that kind */
} flood;

static int group_of(const flood *fl, pr_slice gid)
{
    for (int i = 0; i < fl->n_groups; i++)
        if (strlen(fl->gids[i]) == gid.n && !memcmp(fl->gids[i], gid.p, gid.n))
            return i;
    return -1;
}

static void attacker_ev(atk_sess *s, const pr_event *ev)
{
    flood *fl = s->ud;
    int g = ev->t == PR_EV_SENT ? group_of(fl, ev->gid) : -1;
    if (g >= 0 && !fl->mids[g]) {
        fl->mids[g] = ev->mid;
        fl->n_mids++;
    }
}

static void observer_ev(atk_sess *s, const pr_event *ev)
{
    flood *fl = s->ud;
    enum pr_ev_type want = fl->kind == PR_REQ_TYPING ? PR_EV_TYPING
                           : fl->kind == PR_REQ_EDIT ? PR_EV_EDITED
                                                     : PR_EV_RECALLED;
    fl->seen += ev->t == want;
}

/* The attacker's own message in every group, for the edits and recalls to name. */
static bool send_originals(atk_ctx *c, atk_sess *a, flood *fl)
{
    for (int g = 0; g < fl->n_groups; g++) {
        char cid[24];
        snprintf(cid, sizeof(cid), "orig%d", g);
        pr_enc_send(&c->sb, PR_NO_RID, load_sl(fl->gids[g]), load_sl(cid),
                    (pr_body){load_sl("the original"), false});
        atk_send(a);
    }
    for (int64_t until = load_now_ns() + 10000000000LL; fl->n_mids < fl->n_groups;) {
        if (a->closed || load_now_ns() > until) {
            fprintf(stderr, "gw_attack: %s: the attacker's messages were not confirmed\n", c->name);
            return false;
        }
        atk_pump(c, 5);
    }
    return true;
}

static void enc_one(atk_ctx *c, flood *fl, uint64_t i)
{
    int g = (int)(i % (uint64_t)fl->n_groups);
    pr_slice gid = load_sl(fl->gids[g]);
    if (fl->kind == PR_REQ_TYPING)
        pr_enc_typing(&c->sb, gid);
    else if (fl->kind == PR_REQ_EDIT)
        pr_enc_edit(&c->sb, PR_NO_RID, gid, fl->mids[g], 0,
                    (pr_body){load_sl("edited again and again"), false});
    else
        pr_enc_recall(&c->sb, PR_NO_RID, gid, fl->mids[g]);
}

int atk_flood(atk_ctx *c, int kind)
{
    const atk_cfg *cfg = c->cfg;
    flood *fl = calloc(1, sizeof(*fl));
    atk_sess **vs = calloc((size_t)cfg->members + 2, sizeof(*vs));
    int rc = -1;
    if (!fl || !vs)
        goto out;
    fl->kind = kind;
    fl->n_groups = cfg->groups < 1 ? 1 : cfg->groups > MAX_GROUPS ? MAX_GROUPS : cfg->groups;
    for (int g = 0; g < fl->n_groups; g++)
        snprintf(fl->gids[g], sizeof(fl->gids[g]), "flood%d-%x", g, c->run_id);
    /* vs: the members that never read, then the observer, then the attacker. */
    int n = cfg->members + 2;
    for (int i = 0; i < cfg->members; i++) {
        char uid[24];
        snprintf(uid, sizeof(uid), "victim%d", i);
        if (!(vs[i] = atk_open(c, uid, NULL, NULL)))
            goto out;
    }
    atk_sess *obs = vs[n - 2] = atk_open(c, "observer", observer_ev, fl);
    atk_sess *a = vs[n - 1] = atk_open(c, "attacker", attacker_ev, fl);
    if (!obs || !a || !atk_wait_ready(c, vs, n, 0, 20))
        goto out;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < fl->n_groups; g++)
            atk_join(vs[i], fl->gids[g]);
    if (!atk_wait_ready(c, vs, n, fl->n_groups, 30))
        goto out;
    if (kind != PR_REQ_TYPING && !send_originals(c, a, fl))
        goto out;
    for (int i = 0; i < cfg->members; i++)
        lw_pause(vs[i]->k, true);
    c->sent_requests = c->sent_bytes = 0;
    c->sent_conns = 1;
    atk_begin(c);
    int64_t t0 = load_now_ns(), until = t0 + (int64_t)(cfg->seconds * 1e9);
    uint64_t i = 0;
    while (load_now_ns() < until && !a->closed) {
        for (int burst = 0; burst < 256 && lw_queued(a->k) < ATTACKER_QUEUE; burst++) {
            enc_one(c, fl, i++);
            atk_send(a);
        }
        atk_pump(c, lw_queued(a->k) < ATTACKER_QUEUE ? 0 : 1);
    }
    double secs = (double)(load_now_ns() - t0) / 1e9;
    uint64_t seen_at_end = fl->seen;
    int victims_closed = 0;
    for (int v = 0; v < cfg->members; v++)
        victims_closed += vs[v]->closed;
    atk_end(c, 2);
    const char *what = kind == PR_REQ_TYPING ? "typing" : kind == PR_REQ_EDIT ? "edits" : "recalls";
    atk_say(c,
            "%llu %s sent in %.1f s; %llu pushed to a reading member (%.0f/s); %llu "
            "rate_limited; attacker %s",
            (unsigned long long)c->sent_requests, what, secs, (unsigned long long)seen_at_end,
            (double)seen_at_end / secs, (unsigned long long)a->limited,
            a->closed ? "closed" : "still open");
    if (a->closed)
        atk_say(c, " (%d)", a->close_code);
    atk_say(c, "; %d of %d non-readers closed", victims_closed, cfg->members);
    rc = 0;
out:
    free(vs);
    free(fl);
    return rc;
}
