/*
 * proto_encode: every message of protocol v1, appended to a caller's msgpack_sbuffer.
 *
 * Each encoder remembers where the buffer ended when it started and, if any write fails,
 * cuts the buffer back there: a failed encode leaves the buffer as it was, never with half
 * a message in it. Keys are the protocol's short strings; rid PR_NO_RID means "no rid".
 */
#include "proto.h"

#include <string.h>

const char *pr_err_name(int err)
{
    switch (err) {
    case PR_E_BAD_FRAME: return "bad_frame";
    case PR_E_BAD_TYPE: return "bad_type";
    case PR_E_BAD_FIELD: return "bad_field";
    case PR_E_TOO_LARGE: return "too_large";
    case PR_E_UNAUTHORIZED: return "unauthorized";
    case PR_E_NOT_MEMBER: return "not_member";
    case PR_E_NO_GROUP: return "no_group";
    case PR_E_RATE_LIMITED: return "rate_limited";
    case PR_E_OVERLOADED: return "overloaded";
    case PR_E_UNAVAILABLE: return "unavailable";
    case PR_E_CONFLICT: return "conflict";
    default: return "internal";
    }
}

/* An encode in progress. */
typedef struct enc {
    msgpack_packer pk;
    msgpack_sbuffer *b;
    size_t start; /* b->size before this encode */
    int rc;       /* first error, PR_E*; later writes are skipped */
} enc;

static enc enc_start(msgpack_sbuffer *b)
{
    enc e = {.b = b, .start = b->size, .rc = 0};
    msgpack_packer_init(&e.pk, b, msgpack_sbuffer_write);
    return e;
}

static int enc_end(enc *e)
{
    if (e->rc)
        e->b->size = e->start;
    return e->rc;
}

/* msgpack_pack_* return non-zero when the sbuffer cannot grow. */
static void check(enc *e, int r)
{
    if (r && !e->rc)
        e->rc = PR_E_NOMEM;
}

/* MessagePack lengths and counts are 32-bit; refuse rather than write a wrong header. */
static bool fits(enc *e, size_t n)
{
    if (n > UINT32_MAX && !e->rc)
        e->rc = PR_E_TOO_LARGE;
    return !e->rc;
}

static void map(enc *e, size_t n)
{
    if (fits(e, n))
        check(e, msgpack_pack_map(&e->pk, n));
}

static void array(enc *e, size_t n)
{
    if (fits(e, n))
        check(e, msgpack_pack_array(&e->pk, n));
}

static void bytes(enc *e, const void *p, size_t n, bool bin)
{
    if (!fits(e, n))
        return;
    check(e, bin ? msgpack_pack_bin(&e->pk, n) : msgpack_pack_str(&e->pk, n));
    if (n > 0 && !e->rc) /* n == 0: p may be NULL, which memcpy must not see */
        check(e, bin ? msgpack_pack_bin_body(&e->pk, p, n) : msgpack_pack_str_body(&e->pk, p, n));
}

static void raw(enc *e, pr_slice s)
{
    if (s.n > 0 && !e->rc)
        check(e, msgpack_sbuffer_write(e->b, (const char *)s.p, s.n));
}

static void key(enc *e, const char *k)
{
    bytes(e, k, strlen(k), false);
}

static void kv_str(enc *e, const char *k, pr_slice v)
{
    key(e, k);
    bytes(e, v.p, v.n, false);
}

static void kv_cstr(enc *e, const char *k, const char *v)
{
    key(e, k);
    bytes(e, v, strlen(v), false);
}

static void kv_u64(enc *e, const char *k, uint64_t v)
{
    key(e, k);
    if (!e->rc)
        check(e, msgpack_pack_uint64(&e->pk, v));
}

static void kv_bool(enc *e, const char *k, bool v)
{
    key(e, k);
    if (!e->rc)
        check(e, v ? msgpack_pack_true(&e->pk) : msgpack_pack_false(&e->pk));
}

/* The map header, `t` and (unless rid is PR_NO_RID) `rid`; n counts the other pairs. */
static void head(enc *e, const char *t, uint64_t rid, size_t n)
{
    map(e, n + 1 + (rid != PR_NO_RID));
    kv_cstr(e, "t", t);
    if (rid != PR_NO_RID)
        kv_u64(e, "rid", rid);
}

/* ---------------------------------------------------------------------------------------
 * Client to server
 */

/* A frame of its type alone: {t, rid?}. */
static int enc_bare(msgpack_sbuffer *b, const char *t, uint64_t rid)
{
    enc e = enc_start(b);
    head(&e, t, rid, 0);
    return enc_end(&e);
}

/* A frame about a group: {t, rid?, gid}. */
static int enc_gid(msgpack_sbuffer *b, const char *t, uint64_t rid, pr_slice gid)
{
    enc e = enc_start(b);
    head(&e, t, rid, 1);
    kv_str(&e, "gid", gid);
    return enc_end(&e);
}

/* The start of a push of a group's list: {t, gid, k: [n entries follow]}. */
static int enc_gid_list(msgpack_sbuffer *b, const char *t, pr_slice gid, const char *k, size_t n)
{
    enc e = enc_start(b);
    head(&e, t, PR_NO_RID, 2);
    kv_str(&e, "gid", gid);
    key(&e, k);
    array(&e, n);
    return enc_end(&e);
}

int pr_enc_hello(msgpack_sbuffer *b, uint64_t rid, pr_slice token)
{
    enc e = enc_start(b);
    head(&e, "hello", rid, 1);
    kv_str(&e, "token", token);
    return enc_end(&e);
}

int pr_enc_join(msgpack_sbuffer *b, uint64_t rid, pr_slice gid)
{
    return enc_gid(b, "join", rid, gid);
}

int pr_enc_leave(msgpack_sbuffer *b, uint64_t rid, pr_slice gid)
{
    return enc_gid(b, "leave", rid, gid);
}

int pr_enc_groups_req(msgpack_sbuffer *b, uint64_t rid)
{
    return enc_bare(b, "groups", rid);
}

int pr_enc_send(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, pr_slice cid, pr_body body)
{
    enc e = enc_start(b);
    head(&e, "send", rid, 3);
    kv_str(&e, "gid", gid);
    kv_str(&e, "cid", cid);
    key(&e, "body");
    bytes(&e, body.data.p, body.data.n, body.is_bin);
    return enc_end(&e);
}

static void kv_cursors(enc *e, const char *k, const pr_ack *a, size_t n);

int pr_enc_edit(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid, uint64_t ver,
                pr_body body)
{
    enc e = enc_start(b);
    head(&e, "edit", rid, 3 + (ver > 0));
    kv_str(&e, "gid", gid);
    kv_u64(&e, "mid", mid);
    if (ver)
        kv_u64(&e, "ver", ver);
    key(&e, "body");
    bytes(&e, body.data.p, body.data.n, body.is_bin);
    return enc_end(&e);
}

/* A request of one message: {t, rid?, gid, mid}. */
static int enc_gid_mid(msgpack_sbuffer *b, const char *t, uint64_t rid, pr_slice gid, uint64_t mid)
{
    enc e = enc_start(b);
    head(&e, t, rid, 2);
    kv_str(&e, "gid", gid);
    kv_u64(&e, "mid", mid);
    return enc_end(&e);
}

int pr_enc_recall(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid)
{
    return enc_gid_mid(b, "recall", rid, gid, mid);
}

int pr_enc_changes_req(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t after,
                       uint32_t limit)
{
    enc e = enc_start(b);
    head(&e, "changes", rid, 2 + (limit != 0));
    kv_str(&e, "gid", gid);
    kv_u64(&e, "after", after);
    if (limit)
        kv_u64(&e, "limit", limit);
    return enc_end(&e);
}

int pr_enc_react(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid, pr_slice key,
                 bool on)
{
    enc e = enc_start(b);
    head(&e, "react", rid, 4);
    kv_str(&e, "gid", gid);
    kv_u64(&e, "mid", mid);
    kv_str(&e, "key", key);
    kv_bool(&e, "on", on);
    return enc_end(&e);
}

int pr_enc_ack(msgpack_sbuffer *b, const pr_ack *acks, size_t n)
{
    enc e = enc_start(b);
    head(&e, "ack", PR_NO_RID, 1);
    kv_cursors(&e, "acks", acks, n);
    return enc_end(&e);
}

int pr_enc_enter(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint32_t limit)
{
    enc e = enc_start(b);
    head(&e, "enter", rid, 1 + (limit != 0));
    kv_str(&e, "gid", gid);
    if (limit)
        kv_u64(&e, "limit", limit);
    return enc_end(&e);
}

int pr_enc_pull(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, bool before, uint64_t mid,
                uint32_t limit)
{
    enc e = enc_start(b);
    head(&e, "pull", rid, 2 + (limit != 0));
    kv_str(&e, "gid", gid);
    kv_u64(&e, before ? "before" : "after", mid);
    if (limit)
        kv_u64(&e, "limit", limit);
    return enc_end(&e);
}

int pr_enc_ping(msgpack_sbuffer *b, uint64_t rid)
{
    return enc_bare(b, "ping", rid);
}

/* A map of gid -> mid under key: ack's acks, read's reads. */
static void kv_cursors(enc *e, const char *k, const pr_ack *a, size_t n)
{
    key(e, k);
    map(e, n);
    for (size_t i = 0; i < n; i++) {
        bytes(e, a[i].gid.p, a[i].gid.n, false);
        if (!e->rc)
            check(e, msgpack_pack_uint64(&e->pk, a[i].mid));
    }
}

int pr_enc_read(msgpack_sbuffer *b, const pr_ack *reads, size_t n)
{
    enc e = enc_start(b);
    head(&e, "read", PR_NO_RID, 1);
    kv_cursors(&e, "reads", reads, n);
    return enc_end(&e);
}

int pr_enc_receipts_req(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid)
{
    return enc_gid_mid(b, "receipts", rid, gid, mid);
}

int pr_enc_watch(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, const uint64_t *mids, size_t n)
{
    enc e = enc_start(b);
    head(&e, "watch", rid, 2);
    kv_str(&e, "gid", gid);
    key(&e, "mids");
    array(&e, n);
    for (size_t i = 0; i < n && !e.rc; i++)
        check(&e, msgpack_pack_uint64(&e.pk, mids[i]));
    return enc_end(&e);
}

int pr_enc_presence_req(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, int sub)
{
    enc e = enc_start(b);
    head(&e, "presence", rid, 1 + (sub >= 0));
    kv_str(&e, "gid", gid);
    if (sub >= 0)
        kv_bool(&e, "sub", sub > 0);
    return enc_end(&e);
}

int pr_enc_typing(msgpack_sbuffer *b, pr_slice gid)
{
    return enc_gid(b, "typing", PR_NO_RID, gid);
}

/* ---------------------------------------------------------------------------------------
 * Stored messages
 */

int pr_enc_record(msgpack_sbuffer *b, pr_slice from, pr_body body)
{
    enc e = enc_start(b);
    kv_str(&e, "from", from);
    key(&e, "body");
    bytes(&e, body.data.p, body.data.n, body.is_bin);
    return enc_end(&e);
}

int pr_enc_tombstone(msgpack_sbuffer *b, pr_slice from)
{
    enc e = enc_start(b);
    kv_str(&e, "from", from);
    return enc_end(&e);
}

/* The pairs of a version's record: a tombstone has `from` alone. */
static size_t record_pairs(const pr_version *v)
{
    return v && v->recalled ? 1 : PR_RECORD_PAIRS;
}

/* A stored message's pairs in a `msg` or a page entry: mid, ts, ver and recalled when it
 * has a later version, and its record. */
static size_t version_pairs(const pr_version *v)
{
    bool later = v && v->ver > 0;
    return 2 + later + (later && v->recalled) + record_pairs(later ? v : NULL);
}

static void kv_version(enc *e, uint64_t mid, uint64_t ts, const pr_version *v, pr_slice record)
{
    kv_u64(e, "mid", mid);
    kv_u64(e, "ts", ts);
    if (v && v->ver > 0) {
        kv_u64(e, "ver", v->ver);
        if (v->recalled)
            kv_bool(e, "recalled", true);
    }
    raw(e, record);
}

int pr_enc_msg(msgpack_sbuffer *b, pr_slice gid, uint64_t mid, uint64_t ts, pr_slice record)
{
    return pr_enc_msg_v(b, gid, mid, ts, NULL, record);
}

int pr_enc_msg_v(msgpack_sbuffer *b, pr_slice gid, uint64_t mid, uint64_t ts, const pr_version *v,
                 pr_slice record)
{
    enc e = enc_start(b);
    head(&e, "msg", PR_NO_RID, 1 + version_pairs(v));
    kv_str(&e, "gid", gid);
    kv_version(&e, mid, ts, v, record);
    return enc_end(&e);
}

int pr_enc_page_begin(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                      uint64_t last_mid, uint64_t gone_before, bool more, size_t n)
{
    return pr_enc_page_begin_c(b, rid, gid, first_mid, last_mid, gone_before, more, 0, n);
}

int pr_enc_page_begin_c(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                        uint64_t last_mid, uint64_t gone_before, bool more, uint64_t last_cseq,
                        size_t n)
{
    enc e = enc_start(b);
    head(&e, "page", rid, 6 + (gone_before != 0));
    kv_str(&e, "gid", gid);
    kv_u64(&e, "first_mid", first_mid ? first_mid : 1);
    kv_u64(&e, "last_mid", last_mid);
    kv_u64(&e, "last_cseq", last_cseq);
    if (gone_before)
        kv_u64(&e, "gone_before", gone_before);
    kv_bool(&e, "more", more);
    key(&e, "msgs");
    array(&e, n);
    return enc_end(&e);
}

int pr_enc_page_entry(msgpack_sbuffer *b, uint64_t mid, uint64_t ts, pr_slice record)
{
    return pr_enc_page_entry_v(b, mid, ts, NULL, record);
}

int pr_enc_page_entry_v(msgpack_sbuffer *b, uint64_t mid, uint64_t ts, const pr_version *v,
                        pr_slice record)
{
    enc e = enc_start(b);
    map(&e, version_pairs(v));
    kv_version(&e, mid, ts, v, record);
    return enc_end(&e);
}

int pr_enc_page_entry_r(msgpack_sbuffer *b, uint64_t mid, uint64_t ts, const pr_version *v,
                        pr_slice record, const pr_reaction *r, size_t n_r)
{
    enc e = enc_start(b);
    size_t n_mine = 0;
    for (size_t i = 0; i < n_r; i++)
        n_mine += r[i].mine;
    bool cseq = v && v->cseq > 0;
    map(&e, version_pairs(v) + cseq + (n_r > 0) + (n_mine > 0));
    kv_version(&e, mid, ts, v, record);
    if (cseq)
        kv_u64(&e, "cseq", v->cseq);
    if (n_r > 0) {
        key(&e, "reactions");
        map(&e, n_r);
        for (size_t i = 0; i < n_r && !e.rc; i++) {
            bytes(&e, r[i].key.p, r[i].key.n, false);
            if (!e.rc)
                check(&e, msgpack_pack_uint64(&e.pk, r[i].count));
        }
    }
    if (n_mine > 0) {
        key(&e, "mine");
        array(&e, n_mine);
        for (size_t i = 0; i < n_r; i++)
            if (r[i].mine)
                bytes(&e, r[i].key.p, r[i].key.n, false);
    }
    return enc_end(&e);
}

int pr_enc_changes_begin(msgpack_sbuffer *b, uint64_t rid, const pr_changes *c, size_t n)
{
    enc e = enc_start(b);
    head(&e, "changes", rid, 8 + (c->gone_before != 0));
    kv_str(&e, "gid", c->gid);
    kv_u64(&e, "after", c->after);
    kv_u64(&e, "upto", c->upto);
    kv_u64(&e, "last_cseq", c->last_cseq);
    kv_u64(&e, "first_mid", c->first_mid ? c->first_mid : 1);
    kv_u64(&e, "last_mid", c->last_mid);
    kv_bool(&e, "more", c->more);
    if (c->gone_before)
        kv_u64(&e, "changes_gone_before", c->gone_before);
    key(&e, "msgs");
    array(&e, n);
    return enc_end(&e);
}

int pr_enc_reacted(msgpack_sbuffer *b, uint64_t rid, const pr_reacted *r)
{
    enc e = enc_start(b);
    head(&e, "reacted", rid, 7 + r->duplicate);
    kv_str(&e, "gid", r->gid);
    kv_u64(&e, "mid", r->mid);
    kv_str(&e, "uid", r->uid);
    kv_str(&e, "key", r->key);
    kv_bool(&e, "on", r->on);
    kv_u64(&e, "count", r->count);
    kv_u64(&e, "cseq", r->cseq);
    if (r->duplicate)
        kv_bool(&e, "duplicate", true);
    return enc_end(&e);
}

int pr_enc_changed(msgpack_sbuffer *b, pr_slice gid, uint64_t last_cseq)
{
    enc e = enc_start(b);
    head(&e, "changed", PR_NO_RID, 2);
    kv_str(&e, "gid", gid);
    kv_u64(&e, "last_cseq", last_cseq);
    return enc_end(&e);
}

int pr_enc_version(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid,
                   const pr_version *v, pr_slice record)
{
    enc e = enc_start(b);
    head(&e, v->recalled ? "recalled" : "edited", rid, 4 + (v->cseq > 0) + record_pairs(v));
    kv_str(&e, "gid", gid);
    kv_u64(&e, "mid", mid);
    kv_u64(&e, "ver", v->ver);
    kv_u64(&e, "ts", v->ts);
    if (v->cseq > 0)
        kv_u64(&e, "cseq", v->cseq);
    raw(&e, record);
    return enc_end(&e);
}

/* ---------------------------------------------------------------------------------------
 * Server to client
 */

int pr_enc_welcome_begin(msgpack_sbuffer *b, uint64_t rid, const pr_welcome *w, size_t n_groups)
{
    enc e = enc_start(b);
    head(&e, "welcome", rid, 7 + w->partial);
    kv_str(&e, "uid", w->uid);
    kv_str(&e, "sid", w->sid);
    kv_u64(&e, "ts", w->ts);
    kv_u64(&e, "ack_every", w->ack_every);
    kv_u64(&e, "ack_delay_ms", w->ack_delay_ms);
    kv_u64(&e, "max_body", w->max_body);
    if (w->partial)
        kv_bool(&e, "partial", true);
    key(&e, "groups");
    array(&e, n_groups);
    return enc_end(&e);
}

int pr_enc_groups_begin(msgpack_sbuffer *b, uint64_t rid, size_t n_groups)
{
    return pr_enc_groups_begin_p(b, rid, n_groups, false);
}

int pr_enc_groups_begin_p(msgpack_sbuffer *b, uint64_t rid, size_t n_groups, bool partial)
{
    enc e = enc_start(b);
    head(&e, "groups", rid, 1 + partial);
    if (partial)
        kv_bool(&e, "partial", true);
    key(&e, "groups");
    array(&e, n_groups);
    return enc_end(&e);
}

int pr_enc_group_entry(msgpack_sbuffer *b, const pr_group *g)
{
    enc e = enc_start(b);
    map(&e, 6 + g->has_read);
    kv_str(&e, "gid", g->gid);
    kv_u64(&e, "first_mid", g->first_mid ? g->first_mid : 1);
    kv_u64(&e, "last_mid", g->last_mid);
    kv_u64(&e, "last_cseq", g->last_cseq);
    kv_u64(&e, "ack", g->ack);
    kv_u64(&e, "unread", g->unread);
    if (g->has_read)
        kv_u64(&e, "read", g->read);
    return enc_end(&e);
}

int pr_enc_joined(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                  uint64_t last_mid, uint64_t ack)
{
    return pr_enc_joined_c(b, rid, gid, first_mid, last_mid, ack, 0);
}

int pr_enc_joined_c(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                    uint64_t last_mid, uint64_t ack, uint64_t last_cseq)
{
    enc e = enc_start(b);
    head(&e, "joined", rid, 5);
    kv_str(&e, "gid", gid);
    kv_u64(&e, "first_mid", first_mid ? first_mid : 1);
    kv_u64(&e, "last_mid", last_mid);
    kv_u64(&e, "ack", ack);
    kv_u64(&e, "last_cseq", last_cseq);
    return enc_end(&e);
}

int pr_enc_left(msgpack_sbuffer *b, uint64_t rid, pr_slice gid)
{
    return pr_enc_left_c(b, rid, gid, 0);
}

int pr_enc_left_c(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t cseq)
{
    enc e = enc_start(b);
    head(&e, "left", rid, 1 + (cseq != 0));
    kv_str(&e, "gid", gid);
    if (cseq)
        kv_u64(&e, "cseq", cseq);
    return enc_end(&e);
}

int pr_enc_sent(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, pr_slice cid, uint64_t mid,
                uint64_t ts)
{
    enc e = enc_start(b);
    head(&e, "sent", rid, 4);
    kv_str(&e, "gid", gid);
    kv_str(&e, "cid", cid);
    kv_u64(&e, "mid", mid);
    kv_u64(&e, "ts", ts);
    return enc_end(&e);
}

int pr_enc_notify(msgpack_sbuffer *b, pr_slice gid, uint64_t last_mid)
{
    enc e = enc_start(b);
    head(&e, "notify", PR_NO_RID, 2);
    kv_str(&e, "gid", gid);
    kv_u64(&e, "last_mid", last_mid);
    return enc_end(&e);
}

int pr_enc_pong(msgpack_sbuffer *b, uint64_t rid, uint64_t ts)
{
    enc e = enc_start(b);
    head(&e, "pong", rid, 1);
    kv_u64(&e, "ts", ts);
    return enc_end(&e);
}

int pr_enc_err(msgpack_sbuffer *b, uint64_t rid, int code, const char *msg, pr_slice gid)
{
    return pr_enc_err_retry(b, rid, code, msg, gid, 0);
}

int pr_enc_err_retry(msgpack_sbuffer *b, uint64_t rid, int code, const char *msg, pr_slice gid,
                     uint64_t retry_ms)
{
    enc e = enc_start(b);
    /* Not head(): the protocol lists code and msg first, rid and gid after. */
    map(&e, 3 + (rid != PR_NO_RID) + (gid.n != 0) + (retry_ms != 0));
    kv_cstr(&e, "t", "err");
    kv_cstr(&e, "code", pr_err_name(code));
    kv_cstr(&e, "msg", msg ? msg : "");
    if (rid != PR_NO_RID)
        kv_u64(&e, "rid", rid);
    if (gid.n)
        kv_str(&e, "gid", gid);
    if (retry_ms)
        kv_u64(&e, "retry_ms", retry_ms);
    return enc_end(&e);
}

int pr_enc_receipts_begin(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid,
                          uint64_t delivered, uint64_t read, uint64_t of, size_t n_readers)
{
    enc e = enc_start(b);
    head(&e, "receipts", rid, 5 + (n_readers != SIZE_MAX));
    kv_str(&e, "gid", gid);
    kv_u64(&e, "mid", mid);
    kv_u64(&e, "delivered", delivered);
    kv_u64(&e, "read", read);
    kv_u64(&e, "of", of);
    if (n_readers != SIZE_MAX) {
        key(&e, "readers");
        array(&e, n_readers);
    }
    return enc_end(&e);
}

int pr_enc_uid_entry(msgpack_sbuffer *b, pr_slice uid)
{
    enc e = enc_start(b);
    bytes(&e, uid.p, uid.n, false);
    return enc_end(&e);
}

int pr_enc_cursors_begin(msgpack_sbuffer *b, pr_slice gid, size_t n)
{
    return enc_gid_list(b, "cursors", gid, "cursors", n);
}

int pr_enc_cursor_entry(msgpack_sbuffer *b, const pr_cursor *c)
{
    enc e = enc_start(b);
    map(&e, 2 + c->has_read);
    kv_str(&e, "uid", c->uid);
    kv_u64(&e, "ack", c->ack);
    if (c->has_read)
        kv_u64(&e, "read", c->read);
    return enc_end(&e);
}

int pr_enc_presence_begin(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t online,
                          uint64_t of, size_t n_members)
{
    enc e = enc_start(b);
    head(&e, "presence", rid, 3 + (n_members != SIZE_MAX));
    kv_str(&e, "gid", gid);
    kv_u64(&e, "online", online);
    kv_u64(&e, "of", of);
    if (n_members != SIZE_MAX) {
        key(&e, "members");
        array(&e, n_members);
    }
    return enc_end(&e);
}

int pr_enc_online_begin(msgpack_sbuffer *b, pr_slice gid, size_t n)
{
    return enc_gid_list(b, "online", gid, "changes", n);
}

int pr_enc_presence_entry(msgpack_sbuffer *b, const pr_presence *p)
{
    enc e = enc_start(b);
    map(&e, 3);
    kv_str(&e, "uid", p->uid);
    kv_bool(&e, "online", p->online);
    kv_u64(&e, "last_seen", p->last_seen);
    return enc_end(&e);
}

int pr_enc_typing_push(msgpack_sbuffer *b, pr_slice gid, pr_slice uid, uint32_t ttl_ms)
{
    enc e = enc_start(b);
    head(&e, "typing", PR_NO_RID, 3);
    kv_str(&e, "gid", gid);
    kv_str(&e, "uid", uid);
    kv_u64(&e, "ttl_ms", ttl_ms);
    return enc_end(&e);
}

int pr_enc_batch_begin(msgpack_sbuffer *b, size_t n)
{
    enc e = enc_start(b);
    array(&e, n);
    return enc_end(&e);
}
