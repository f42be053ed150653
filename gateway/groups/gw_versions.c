/*
 * A message's later versions (docs/PROTOCOL.md, Edits and recalls): an `edited` or a
 * `recalled` goes to every online session of the group's members here, once, as soon as
 * the version is committed (this thread's, another thread's or another node's). Unlike
 * new messages they need no order among themselves: a client keeps, per (gid, mid), the
 * highest `ver` it has seen, so a version that overtakes another (or the message itself)
 * is still the one shown. A version announced without its record (too large for a
 * notification) is read from the store first; the store may hold a later one by then,
 * which is pushed instead: the later the better.
 */
#include "groups_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

/* A version's read of the store (announced without its record). */
typedef struct version_job {
    gw_job job; /* first */
    gw_deliver *d;
    char gid[PR_MAX_ID + 1];
} version_job;

static unsigned push(gw_deliver *d, const char *gid, uint64_t mid, const pr_version *v,
                     const void *rec, size_t n, gw_sess *except)
{
    gw_groups *gs = gw_deliver_groups(d);
    gw_group *g = gw_group_find(gs->reg, gid, strlen(gid));
    if (g && v->cseq > g->last_cseq)
        g->last_cseq = v->cseq;
    if (!g || !g->n_online)
        return 0;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    unsigned sessions = 0;
    gw_buf *b = NULL;
    if (pr_enc_version(&sb, PR_NO_RID, (pr_slice){(const uint8_t *)gid, strlen(gid)}, mid, v,
                       (pr_slice){rec, n}) == 0 &&
        (b = gw_buf_from(&sb))) {
        /* One frame shared by every session, each counting it against its budget. */
        gw_online *o, *tmp;
        HASH_ITER (hh, g->online, o, tmp) {
            gw_seat *s;
            DL_FOREACH (o->user->sessions, s)
                if (s->sess != except && gw_out_push(s->sess, GW_PUSH_VERSION, gid, mid, b) == 0)
                    sessions++;
        }
        gs->figs.version_pushes += sessions;
        gw_buf_unref(b);
    } else {
        gw_err("versions: cannot encode %s/%lu version %lu", gid, (unsigned long)mid,
               (unsigned long)v->ver);
    }
    msgpack_sbuffer_destroy(&sb);
    return sessions;
}

static void version_read(gw_job *j)
{
    version_job *vj = (version_job *)j;
    st_op *op = &j->op;
    if (op->result == 0 && st_page_count(op->page) == 1) {
        const st_msg *m = st_page_at(op->page, 0);
        pr_version v = {.ver = m->ver, .ts = m->ver_ts, .recalled = m->recalled, .cseq = m->cseq};
        if (m->ver > 0)
            push(vj->d, vj->gid, m->mid, &v, m->record, m->record_n, NULL);
    }
    st_page_free(op->page);
    free(vj);
}

void gw_deliver_react(gw_deliver *d, const pr_reacted *r, gw_sess *except)
{
    gw_groups *gs = gw_deliver_groups(d);
    char gid[PR_MAX_ID + 1];
    if (!gw_id_copy(gid, r->gid.p, r->gid.n))
        return;
    gw_group *g = gw_group_find(gs->reg, gid, strlen(gid));
    if (g && r->cseq > g->last_cseq)
        g->last_cseq = r->cseq;
    if (!g || !g->n_online)
        return;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    gw_buf *b = NULL;
    pr_reacted push = *r;
    push.duplicate = false;
    if (pr_enc_reacted(&sb, PR_NO_RID, &push) == 0 && (b = gw_buf_from(&sb))) {
        gw_online *o, *tmp;
        HASH_ITER (hh, g->online, o, tmp) {
            gw_seat *s;
            DL_FOREACH (o->user->sessions, s)
                if (s->sess != except && gw_out_push(s->sess, GW_PUSH_REACT, gid, r->cseq, b) == 0)
                    gs->figs.react_pushes++;
        }
        gw_buf_unref(b);
    }
    msgpack_sbuffer_destroy(&sb);
}

void gw_deliver_changed(gw_deliver *d, const char *gid, uint64_t last_cseq)
{
    gw_groups *gs = gw_deliver_groups(d);
    gw_group *g = gw_group_find(gs->reg, gid, strlen(gid));
    if (g && last_cseq > g->last_cseq)
        g->last_cseq = last_cseq;
    if (!g || !g->n_online)
        return;
    gw_online *o, *tmp;
    HASH_ITER (hh, g->online, o, tmp) {
        gw_seat *s;
        DL_FOREACH (o->user->sessions, s) {
            gw_out_changed(s->sess, gid, last_cseq);
            gs->figs.changed_pushes++;
        }
    }
}

void gw_deliver_version(gw_deliver *d, const char *gid, uint64_t mid, const pr_version *v,
                        const void *rec, size_t n, gw_sess *except)
{
    if (rec) {
        push(d, gid, mid, v, rec, n, except);
        return;
    }
    gw_groups *gs = gw_deliver_groups(d);
    gw_group *g = gw_group_find(gs->reg, gid, strlen(gid));
    if (!g || !g->n_online)
        return; /* nobody here to tell: no read */
    version_job *vj = calloc(1, sizeof(*vj));
    if (!vj)
        return;
    vj->d = d;
    strcpy(vj->gid, gid);
    vj->job.op = (st_op){.kind = ST_OP_READ_PAGE,
                         .gid = st_id_str(vj->gid),
                         .dir = ST_AFTER,
                         .from = mid - 1,
                         .limit = 1};
    vj->job.complete = version_read;
    if (gw_bridge_submit(gs->deps.bridge, &vj->job) < 0)
        free(vj); /* the store is away: a client sees the version when it pages over it */
}
