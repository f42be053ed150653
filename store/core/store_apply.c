/*
 * The meaning of each write, written once for every backend: the rules of an append, a
 * join, a leave and a batch of acks, over the rows the backend reads and writes. Rows
 * read here include the writes of earlier ops of the same batch, so ops in one batch see
 * each other (two sends with the same cid, a join then a send, mids handed out in one
 * batch).
 *
 * Every op checks everything before it writes anything: a refused op leaves nothing in
 * the batch. The group's last_mid, the message and the (uid, cid) row are written by the
 * same op, so they commit together: after a crash a mid is never missing nor reused, and
 * an idempotent resend finds the original mid.
 */
#include "store_internal.h"

#include <string.h>

static int apply_append(st_store *s, st_op *op, uint64_t now)
{
    const st_backend *b = s->be_ops;
    st_send_row sent;
    int rc = b->get_send(s->be, op->uid, op->cid, &sent);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        /* Seen before: answer with the first result, store nothing. */
        if (sent.gid_n != op->gid.n || memcmp(sent.gid, op->gid.p, op->gid.n) != 0)
            return ST_ECONFLICT;
        st_group_row g = {0};
        if ((rc = b->get_group(s->be, op->gid, &g)) < 0)
            return rc;
        op->mid = sent.mid;
        op->ts = sent.ts;
        op->duplicate = true;
        op->last_mid = g.last_mid;
        return ST_OK;
    }
    st_group_row g;
    st_member_row m;
    if ((rc = b->get_group(s->be, op->gid, &g)) <= 0)
        return rc < 0 ? rc : ST_ENOGROUP;
    if (!op->any_sender && (rc = b->get_member(s->be, op->gid, op->uid, &m)) <= 0)
        return rc < 0 ? rc : ST_ENOTMEMBER;

    uint64_t mid = g.last_mid + 1;
    b->put_msg(s->be, op->gid, mid, now, op->record, op->record_n);
    g.last_mid = mid;
    b->put_group(s->be, op->gid, &g);
    st_send_row row = {.mid = mid, .ts = now, .gid_n = op->gid.n};
    memcpy(row.gid, op->gid.p, op->gid.n);
    b->put_send(s->be, op->uid, op->cid, &row);

    op->mid = mid;
    op->ts = now;
    op->last_mid = mid;
    return ST_OK;
}

static int apply_join(st_store *s, st_op *op, uint64_t now)
{
    const st_backend *b = s->be_ops;
    st_group_row g = {0};
    int rc = b->get_group(s->be, op->gid, &g);
    if (rc < 0)
        return rc;
    st_member_row m;
    int member = rc == 1 ? b->get_member(s->be, op->gid, op->uid, &m) : 0;
    if (member < 0)
        return member;
    if (rc == 0) {
        /* open_groups is the policy for clients' joins; `create` is a service's own
         * choice for a group it makes (and then adds members to). */
        if (!s->open_groups && !op->create)
            return ST_ENOGROUP;
        g = (st_group_row){.last_mid = 0, .created_ms = now};
        b->put_group(s->be, op->gid, &g);
        op->created = true;
    }
    op->last_mid = g.last_mid;
    op->first_mid = g.first_mid ? g.first_mid : 1;
    op->last_cseq = g.last_cseq;
    if (member == 1) {
        op->ack = m.ack;
        return ST_OK;
    }
    /* A new member sees messages from now on: its ack starts at last_mid. */
    m = (st_member_row){.ack = g.last_mid, .joined_ms = now};
    b->add_member(s->be, op->gid, op->uid, &m);
    op->ack = g.last_mid;
    op->joined = true;
    return ST_OK;
}

static int apply_leave(st_store *s, st_op *op)
{
    st_member_row m;
    int rc = s->be_ops->get_member(s->be, op->gid, op->uid, &m);
    if (rc <= 0)
        return rc < 0 ? rc : ST_ENOTMEMBER;
    s->be_ops->del_member(s->be, op->gid, op->uid);
    return ST_OK;
}

/* ack = max(old, min(M, last_mid)), and read the same way when the entry has one (a
 * member's first read makes it have one); entries of non-members are skipped, not
 * errors: the membership may have ended between the client's ack and this batch. */
static int apply_acks(st_store *s, st_op *op)
{
    const st_backend *b = s->be_ops;
    for (size_t i = 0; i < op->n_acks; i++) {
        const st_ack *a = &op->acks[i];
        st_group_row g;
        st_member_row m;
        int rc = b->get_group(s->be, a->gid, &g);
        if (rc == 1)
            rc = b->get_member(s->be, a->gid, a->uid, &m);
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
        uint64_t want = a->mid < g.last_mid ? a->mid : g.last_mid;
        bool moved = want > m.ack;
        if (moved)
            m.ack = want;
        uint64_t read = a->read < g.last_mid ? a->read : g.last_mid;
        if (a->has_read && (!m.has_read || read > m.read)) {
            m.read = read;
            m.has_read = moved = true;
        }
        if (moved) {
            b->put_member(s->be, a->gid, a->uid, &m);
            op->applied++;
        }
    }
    return ST_OK;
}

/* A later version of a message (store.h, ST_OP_EDIT): the next one, or the same one again
 * (a resent edit: the first answer), never one over a tombstone. */
static int apply_edit(st_store *s, st_op *op, uint64_t now)
{
    const st_backend *b = s->be_ops;
    st_group_row g;
    st_msg_row cur;
    int rc = b->get_group(s->be, op->gid, &g);
    if (rc <= 0)
        return rc < 0 ? rc : ST_ENOGROUP;
    if (op->mid > g.last_mid || (rc = b->get_msg(s->be, op->gid, op->mid, &cur)) == 0)
        return ST_ENOMSG;
    if (rc < 0)
        return rc;
    op->last_mid = g.last_mid;
    bool same = op->ver_asked_ == cur.ver && cur.ver > 0 && !cur.recalled && !op->recall &&
                op->record_n == cur.record_n && memcmp(op->record, cur.record, cur.record_n) == 0;
    if (same || (cur.recalled && op->recall)) {
        op->ver = cur.ver;
        op->ts = cur.ver_ts;
        op->cseq = cur.cseq;
        op->duplicate = true;
        return ST_OK;
    }
    if (cur.recalled)
        return ST_EGONE;
    uint64_t ver = op->recall || op->ver_asked_ == 0 ? cur.ver + 1 : op->ver_asked_;
    if (ver != cur.ver + 1)
        return ST_ESTALE;
    /* The change takes the group's next cseq in the same batch (store.h, Changes); a
     * recall drops the reactions with it. */
    uint64_t old_cseq = cur.cseq;
    st_msg_row next = {.ts = cur.ts,
                       .ver = ver,
                       .ver_ts = now,
                       .recalled = op->recall,
                       .record = op->record,
                       .record_n = op->record_n,
                       .cseq = b->changes ? g.last_cseq + 1 : 0,
                       .reactions = op->recall ? NULL : cur.reactions,
                       .n_reactions = op->recall ? 0 : cur.n_reactions};
    b->put_version(s->be, op->gid, op->mid, &next);
    if (b->changes) {
        g.last_cseq = next.cseq;
        b->put_group(s->be, op->gid, &g);
        b->put_log(s->be, op->gid, op->mid, old_cseq, next.cseq, now);
    }
    op->ver = ver;
    op->ts = now;
    op->cseq = next.cseq;
    return ST_OK;
}

/* A reaction set or cleared (store.h, ST_OP_REACT): the (gid, mid, uid, key) row, the
 * key's count in the message and the message's cseq change together; setting what is set
 * (or clearing what is not) changes nothing. */
static int apply_react(st_store *s, st_op *op, uint64_t now)
{
    const st_backend *b = s->be_ops;
    st_id key = {op->key, op->key_n};
    st_group_row g;
    st_member_row m;
    st_msg_row cur;
    int rc = b->get_group(s->be, op->gid, &g);
    if (rc <= 0)
        return rc < 0 ? rc : ST_ENOGROUP;
    if (!op->any_sender && (rc = b->get_member(s->be, op->gid, op->uid, &m)) <= 0)
        return rc < 0 ? rc : ST_ENOTMEMBER;
    op->last_mid = g.last_mid;
    if (op->mid > g.last_mid)
        return ST_ENOMSG;
    /* The reaction's row first: get_msg's row is lent until the backend's next call. */
    int set = b->get_reaction(s->be, op->gid, op->mid, op->uid, key);
    if (set < 0)
        return set;
    if ((rc = b->get_msg(s->be, op->gid, op->mid, &cur)) <= 0)
        return rc < 0 ? rc : ST_ENOMSG;
    if (cur.recalled)
        return ST_EGONE;
    size_t at = 0; /* where the key is, or goes, in the counts (byte order) */
    int cmp = 1;
    while (at < cur.n_reactions && (cmp = st_id_cmp(cur.reactions[at].key, key)) < 0)
        at++;
    bool found = at < cur.n_reactions && cmp == 0;
    uint64_t count = found ? cur.reactions[at].count : 0;
    if ((set == 1) == op->on) {
        op->cseq = cur.cseq;
        op->count = count;
        op->duplicate = true;
        return ST_OK;
    }
    if (op->on && !found && cur.n_reactions >= ST_REACT_KEYS_MAX)
        return ST_ETOOMANY;
    /* The counts after: the key's one up or down, a new key in its place, a key at 0 out. */
    st_reaction rx[ST_REACT_KEYS_MAX];
    size_t n = 0;
    count = op->on ? count + 1 : (count ? count - 1 : 0);
    for (size_t i = 0; i <= cur.n_reactions && n < ST_REACT_KEYS_MAX; i++) {
        if (i == at && count > 0)
            rx[n++] = (st_reaction){.key = key, .count = count};
        if (i == cur.n_reactions)
            break;
        if (i == at && found)
            continue; /* replaced above, or gone at 0 */
        rx[n++] = cur.reactions[i];
    }
    st_msg_row next = cur;
    next.cseq = g.last_cseq + 1;
    next.reactions = rx;
    next.n_reactions = n;
    b->put_react(s->be, op->gid, op->mid, &next, op->uid, key, op->on);
    g.last_cseq = next.cseq;
    b->put_group(s->be, op->gid, &g);
    b->put_log(s->be, op->gid, op->mid, cur.cseq, next.cseq, now);
    op->cseq = next.cseq;
    op->count = count;
    return ST_OK;
}

/* last_seen = max(old, ms): a blind write, the backend keeps the greater. */
static int apply_seen(st_store *s, st_op *op)
{
    for (size_t i = 0; i < op->n_seen; i++)
        s->be_ops->put_seen(s->be, op->seen[i].uid, op->seen[i].ms);
    return ST_OK;
}

int st_apply(st_store *s, st_op *op, uint64_t now)
{
    switch (op->kind) {
    case ST_OP_APPEND: return apply_append(s, op, now);
    case ST_OP_JOIN: return apply_join(s, op, now);
    case ST_OP_LEAVE: return apply_leave(s, op);
    case ST_OP_ACKS: return apply_acks(s, op);
    case ST_OP_SIGNOUT: /* and announced (store_pg_events.c) */
        op->not_before = now / 1000;
        s->be_ops->put_not_before(s->be, op->uid, op->not_before);
        return ST_OK;
    case ST_OP_SEEN: return apply_seen(s, op);
    case ST_OP_EDIT: return apply_edit(s, op, now);
    case ST_OP_REACT: return apply_react(s, op, now);
    default: return ST_EINVAL;
    }
}
