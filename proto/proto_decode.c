/*
 * proto_decode: client requests and server messages, from validated frames.
 *
 * A frame is first checked by pr_validate() (so msgpack-c allocates O(frame size)), then
 * unpacked into the decoder's zone. msgpack-c's C unpacker does not copy str/bin payloads:
 * every str/bin object points into the buffer it was given, which is what lets every
 * pr_slice borrow from the caller's frame. Fields are read through small tables (key, kind,
 * offset in the output struct) so each message type is described once, as data.
 */
#include "proto_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pr_decoder {
    pr_limits lim;     /* limits this decoder enforces */
    msgpack_zone zone; /* objects of the last decoded frame; cleared by the next decode */
};

pr_decoder *pr_decoder_new(const pr_limits *lim)
{
    pr_decoder *d = malloc(sizeof *d);
    if (!d)
        goto fail;
    d->lim = lim ? *lim : pr_limits_default();
    if (!d->lim.page_default)
        d->lim.page_default = PR_PAGE_DEFAULT;
    if (!d->lim.page_max)
        d->lim.page_max = PR_PAGE_MAX;
    if (d->lim.page_default > d->lim.page_max)
        d->lim.page_default = d->lim.page_max;
    if (!msgpack_zone_init(&d->zone, MSGPACK_ZONE_CHUNK_SIZE))
        goto fail_zone;
    return d;

fail_zone:
    free(d);
fail:
    return NULL;
}

void pr_decoder_free(pr_decoder *d)
{
    if (!d)
        return;
    msgpack_zone_destroy(&d->zone);
    free(d);
}

static int unpack(pr_decoder *d, const uint8_t *frame, size_t len, msgpack_object *root,
                  pr_error *err)
{
    int rc = pr_validate(frame, len, &d->lim, err);
    if (rc)
        return rc;
    msgpack_zone_clear(&d->zone);
    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack((const char *)frame, len, &off, &d->zone, root);
    /* The frame is known to be well-formed, so the only failure left is the zone's. */
    if (r != MSGPACK_UNPACK_SUCCESS)
        return pr_fail(err, PR_E_NOMEM, "out of memory decoding a frame (msgpack-c: %d)", (int)r);
    return 0;
}

static pr_slice slice_of(const msgpack_object *o)
{
    if (o->type == MSGPACK_OBJECT_BIN)
        return (pr_slice){(const uint8_t *)o->via.bin.ptr, o->via.bin.size};
    return (pr_slice){(const uint8_t *)o->via.str.ptr, o->via.str.size};
}

static bool slice_is(pr_slice s, const char *str)
{
    size_t n = strlen(str);
    return s.n == n && (n == 0 || memcmp(s.p, str, n) == 0);
}

static bool slice_eq(pr_slice a, pr_slice b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

/* ---------------------------------------------------------------------------------------
 * Reading fields
 */

enum kind { K_ID, K_STR, K_NONEMPTY, K_U64, K_U32, K_BOOL, K_BODY, K_ARRAY };

static const char *const kind_rule[] = {
    [K_ID] = "an id of 1-64 chars [A-Za-z0-9_.:-]",
    [K_STR] = "a string",
    [K_NONEMPTY] = "a non-empty string",
    [K_U64] = "an unsigned integer",
    [K_U32] = "an unsigned integer below 2^32",
    [K_BOOL] = "a boolean",
    [K_BODY] = "a str or bin",
    [K_ARRAY] = "an array",
};

typedef struct field {
    const char *key;
    enum kind kind;
    size_t off;    /* where the value goes in the output struct (K_ARRAY: unused) */
    bool optional; /* absent leaves the output untouched */
} field;

#define SPEC(a) a, sizeof a / sizeof a[0]

/* What is being read, and how to report it. */
typedef struct dctx {
    const msgpack_object *map; /* the map holding the fields */
    const char *what;          /* its name in error messages: never user data */
    size_t max_body;           /* K_BODY over this is PR_E_TOO_LARGE */
    pr_error *err;             /* may be NULL */
    uint32_t page_default;     /* `limit` when absent */
    uint32_t page_max;         /* larger limits are clamped to this */
} dctx;

/* *o = the value of key in the map, or NULL when absent. Repeating a key is an error:
 * "last one wins" would let two readers of the same frame disagree. */
static int lookup(const dctx *c, const char *key, const msgpack_object **o)
{
    const msgpack_object_map *m = &c->map->via.map;
    size_t kn = strlen(key);
    *o = NULL;
    /* Length and first byte before memcmp: this runs for every field against every key of
     * every map, and a client decodes one map per message it receives. */
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR || k->via.str.size != kn || kn == 0 ||
            k->via.str.ptr[0] != key[0] || memcmp(k->via.str.ptr, key, kn) != 0)
            continue;
        if (*o)
            return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field '%s' appears more than once", c->what,
                           key);
        *o = &m->ptr[i].val;
    }
    return 0;
}

/* Stores o into dst as kind; false if o is not of that kind. */
static bool convert(enum kind kind, const msgpack_object *o, void *dst)
{
    switch (kind) {
    case K_ID:
    case K_STR:
    case K_NONEMPTY: {
        if (o->type != MSGPACK_OBJECT_STR)
            return false;
        pr_slice s = slice_of(o);
        if ((kind == K_ID && !pr_id_valid(s)) || (kind == K_NONEMPTY && s.n == 0))
            return false;
        *(pr_slice *)dst = s;
        return true;
    }
    case K_U64:
    case K_U32:
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return false;
        if (kind == K_U64)
            *(uint64_t *)dst = o->via.u64;
        else if (o->via.u64 <= UINT32_MAX)
            *(uint32_t *)dst = (uint32_t)o->via.u64;
        else
            return false;
        return true;
    case K_BOOL:
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
            return false;
        *(bool *)dst = o->via.boolean;
        return true;
    case K_BODY:
        if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
            return false;
        ((pr_body *)dst)->data = slice_of(o);
        ((pr_body *)dst)->is_bin = o->type == MSGPACK_OBJECT_BIN;
        return true;
    case K_ARRAY:
        if (o->type != MSGPACK_OBJECT_ARRAY)
            return false;
        *(const msgpack_object **)dst = o;
        return true;
    }
    return false;
}

/* Reads one field into dst; *present (may be NULL) is set only when it was read. */
static int read_field(const dctx *c, const char *key, enum kind kind, bool optional, void *dst,
                      bool *present)
{
    const msgpack_object *o;
    int rc = lookup(c, key, &o);
    if (rc)
        return rc;
    if (!o)
        return optional
                   ? 0
                   : pr_fail(c->err, PR_E_BAD_FIELD, "%s: field '%s' is missing", c->what, key);
    if (!convert(kind, o, dst))
        return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field '%s' must be %s", c->what, key,
                       kind_rule[kind]);
    if (kind == K_BODY && ((pr_body *)dst)->data.n > c->max_body)
        return pr_fail(c->err, PR_E_TOO_LARGE, "%s: field '%s' is over the %zu-byte limit", c->what,
                       key, c->max_body);
    if (present)
        *present = true;
    return 0;
}

/* Reads every field of a table into base; a K_ARRAY field's object goes to *array. */
static int read_fields(const dctx *c, const field *f, size_t n, void *base,
                       const msgpack_object **array)
{
    for (size_t i = 0; i < n; i++) {
        void *dst = f[i].kind == K_ARRAY ? (void *)array : (char *)base + f[i].off;
        int rc = read_field(c, f[i].key, f[i].kind, f[i].optional, dst, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* The type name in `t`; a missing or non-string `t` is PR_E_BAD_TYPE. */
static int read_t(const dctx *c, pr_slice *t)
{
    const msgpack_object *o;
    int rc = lookup(c, "t", &o);
    if (rc)
        return rc;
    if (!o)
        return pr_fail(c->err, PR_E_BAD_TYPE, "%s: field 't' is missing", c->what);
    if (o->type != MSGPACK_OBJECT_STR)
        return pr_fail(c->err, PR_E_BAD_TYPE, "%s: field 't' must be a string", c->what);
    *t = slice_of(o);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Client requests
 */

#define RQ(m) offsetof(pr_req, m)
static const field f_hello[] = {{"token", K_NONEMPTY, RQ(token), false}};
static const field f_gid[] = {{"gid", K_ID, RQ(gid), false}};
static const field f_send[] = {
    {"gid", K_ID, RQ(gid), false},
    {"cid", K_ID, RQ(cid), false},
    {"body", K_BODY, RQ(body), false},
};

static const field f_receipts_req[] = {
    {"gid", K_ID, RQ(gid), false},
    {"mid", K_U64, RQ(mid), false},
};
static const field f_edit[] = {
    {"gid", K_ID, RQ(gid), false},
    {"mid", K_U64, RQ(mid), false},
    {"body", K_BODY, RQ(body), false},
    {"ver", K_U64, RQ(ver), true},
};

static const field f_changes_req[] = {
    {"gid", K_ID, RQ(gid), false},
    {"after", K_U64, RQ(after), false},
};
static const field f_react[] = {
    {"gid", K_ID, RQ(gid), false},
    {"mid", K_U64, RQ(mid), false},
    {"key", K_STR, RQ(key), false},
    {"on", K_BOOL, RQ(on), false},
};

static const struct req_type {
    const char *name;
    enum pr_req_type t;
    const field *fields;
    size_t n_fields;
} req_types[] = {
    {"hello", PR_REQ_HELLO, SPEC(f_hello)},
    {"join", PR_REQ_JOIN, SPEC(f_gid)},
    {"leave", PR_REQ_LEAVE, SPEC(f_gid)},
    {"groups", PR_REQ_GROUPS, NULL, 0},
    {"send", PR_REQ_SEND, SPEC(f_send)},
    {"ack", PR_REQ_ACK, NULL, 0},
    {"enter", PR_REQ_ENTER, SPEC(f_gid)},
    {"pull", PR_REQ_PULL, SPEC(f_gid)},
    {"ping", PR_REQ_PING, NULL, 0},
    {"read", PR_REQ_READ, NULL, 0},
    {"receipts", PR_REQ_RECEIPTS, SPEC(f_receipts_req)},
    {"watch", PR_REQ_WATCH, SPEC(f_gid)},
    {"presence", PR_REQ_PRESENCE, SPEC(f_gid)},
    {"typing", PR_REQ_TYPING, SPEC(f_gid)},
    {"edit", PR_REQ_EDIT, SPEC(f_edit)},
    {"recall", PR_REQ_RECALL, SPEC(f_receipts_req)},
    {"changes", PR_REQ_CHANGES, SPEC(f_changes_req)},
    {"react", PR_REQ_REACT, SPEC(f_react)},
};

static int read_limit(const dctx *c, pr_req *out)
{
    uint64_t v = c->page_default;
    int rc = read_field(c, "limit", K_U64, true, &v, NULL);
    if (rc)
        return rc;
    if (v == 0)
        return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field 'limit' must be at least 1", c->what);
    out->limit = v > c->page_max ? c->page_max : (uint32_t)v;
    return 0;
}

static int read_after_before(const dctx *c, pr_req *out)
{
    int rc = read_field(c, "after", K_U64, true, &out->after, &out->has_after);
    if (!rc)
        rc = read_field(c, "before", K_U64, true, &out->before, &out->has_before);
    if (rc)
        return rc;
    if (out->has_after == out->has_before)
        return pr_fail(c->err, PR_E_BAD_FIELD, "%s: exactly one of 'after' and 'before' is needed",
                       c->what);
    if (out->has_before && out->before == 0)
        return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field 'before' must be at least 1", c->what);
    return 0;
}

/* ack's `acks` or read's `reads`: a map of gid -> mid, into out->acks. */
static int read_acks(const dctx *c, const char *k, pr_req *out)
{
    const msgpack_object *o;
    int rc = lookup(c, k, &o);
    if (rc)
        return rc;
    if (!o)
        return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field '%s' is missing", c->what, k);
    if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size == 0)
        return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field '%s' must be a non-empty map", c->what,
                       k);
    const msgpack_object_map *m = &o->via.map;
    if (m->size > PR_MAX_KEYS) /* pr_validate already refuses this; out->acks relies on it */
        return pr_fail(c->err, PR_E_TOO_LARGE, "%s: too many entries in '%s'", c->what, k);
    for (uint32_t i = 0; i < m->size; i++) {
        pr_ack *a = &out->acks[i];
        if (!convert(K_ID, &m->ptr[i].key, &a->gid))
            return pr_fail(c->err, PR_E_BAD_FIELD, "%s: every key of '%s' must be %s", c->what, k,
                           kind_rule[K_ID]);
        if (!convert(K_U64, &m->ptr[i].val, &a->mid))
            return pr_fail(c->err, PR_E_BAD_FIELD,
                           "%s: every value of '%s' must be an unsigned integer (a mid)", c->what,
                           k);
        for (uint32_t j = 0; j < i; j++)
            if (slice_eq(out->acks[j].gid, a->gid))
                return pr_fail(c->err, PR_E_BAD_FIELD, "%s: a gid appears twice in '%s'", c->what,
                               k);
    }
    out->n_acks = m->size;
    return 0;
}

/* watch's `mids`: 0 to PR_MAX_WATCH mids, each at least 1. */
static int read_mids(const dctx *c, pr_req *out)
{
    const msgpack_object *o = NULL;
    int rc = read_field(c, "mids", K_ARRAY, false, &o, NULL);
    if (rc)
        return rc;
    if (o->via.array.size > PR_MAX_WATCH)
        return pr_fail(c->err, PR_E_TOO_LARGE, "%s: field 'mids' holds more than %u mids", c->what,
                       PR_MAX_WATCH);
    for (uint32_t i = 0; i < o->via.array.size; i++)
        if (!convert(K_U64, &o->via.array.ptr[i], &out->mids[i]) || out->mids[i] == 0)
            return pr_fail(c->err, PR_E_BAD_FIELD,
                           "%s: every entry of 'mids' must be a mid (an integer of at least 1)",
                           c->what);
    out->n_mids = o->via.array.size;
    return 0;
}

int pr_decode_req(pr_decoder *d, const uint8_t *frame, size_t len, pr_req *out, pr_error *err)
{
    msgpack_object root;
    memset(out, 0, sizeof *out);
    int rc = unpack(d, frame, len, &root, err);
    if (rc)
        return rc;
    if (root.type != MSGPACK_OBJECT_MAP)
        return pr_fail(err, PR_E_BAD_FRAME, "a request must be a map");

    /* rid first, so that an error about anything else can still carry it. */
    dctx c = {&root, "request", d->lim.max_body, err, d->lim.page_default, d->lim.page_max};
    rc = read_field(&c, "rid", K_U64, true, &out->rid, &out->has_rid);
    if (rc)
        return rc;
    pr_slice t;
    if ((rc = read_t(&c, &t)))
        return rc;
    const struct req_type *ty = NULL;
    for (size_t i = 0; i < sizeof req_types / sizeof req_types[0] && !ty; i++)
        if (slice_is(t, req_types[i].name))
            ty = &req_types[i];
    if (!ty)
        return pr_fail(err, PR_E_BAD_TYPE, "request: unknown type in field 't'");

    c.what = ty->name;
    if ((rc = read_fields(&c, ty->fields, ty->n_fields, out, NULL)))
        return rc;
    switch (ty->t) {
    case PR_REQ_PULL:
        if ((rc = read_after_before(&c, out)))
            return rc;
        /* fall through */
    case PR_REQ_ENTER:
    case PR_REQ_CHANGES: rc = read_limit(&c, out); break;
    case PR_REQ_ACK: rc = read_acks(&c, "acks", out); break;
    case PR_REQ_READ: rc = read_acks(&c, "reads", out); break;
    case PR_REQ_RECEIPTS:
    case PR_REQ_EDIT:
    case PR_REQ_RECALL:
        if (out->mid == 0)
            rc = pr_fail(err, PR_E_BAD_FIELD, "%s: field 'mid' must be at least 1", ty->name);
        break;
    case PR_REQ_REACT:
        if (out->mid == 0)
            rc = pr_fail(err, PR_E_BAD_FIELD, "react: field 'mid' must be at least 1");
        else if (!pr_react_key_valid(out->key))
            rc = pr_fail(err, PR_E_BAD_FIELD,
                         "react: field 'key' must be 1-%u bytes of UTF-8 without control "
                         "characters",
                         PR_REACT_KEY_MAX);
        break;
    case PR_REQ_WATCH: rc = read_mids(&c, out); break;
    case PR_REQ_PRESENCE: rc = read_field(&c, "sub", K_BOOL, true, &out->sub, &out->has_sub); break;
    default: break;
    }
    if (!rc)
        out->t = ty->t;
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Server messages
 */

#define EV(m) offsetof(pr_event, m)
static const field f_welcome[] = {
    {"uid", K_ID, EV(welcome.uid), false},
    {"sid", K_STR, EV(welcome.sid), false},
    {"ts", K_U64, EV(welcome.ts), false},
    {"ack_every", K_U32, EV(welcome.ack_every), false},
    {"ack_delay_ms", K_U32, EV(welcome.ack_delay_ms), false},
    {"max_body", K_U32, EV(welcome.max_body), false},
    {"partial", K_BOOL, EV(partial), true},
    {"groups", K_ARRAY, 0, false},
};
static const field f_groups[] = {{"partial", K_BOOL, EV(partial), true},
                                 {"groups", K_ARRAY, 0, false}};
static const field f_joined[] = {
    {"gid", K_ID, EV(gid), false},
    {"first_mid", K_U64, EV(first_mid), true},
    {"last_mid", K_U64, EV(last_mid), false},
    {"ack", K_U64, EV(ack), false},
    {"last_cseq", K_U64, EV(last_cseq), true},
};
static const field f_left[] = {
    {"gid", K_ID, EV(gid), false},
    {"cseq", K_U64, EV(cseq), true},
};
static const field f_sent[] = {
    {"gid", K_ID, EV(gid), false},
    {"cid", K_ID, EV(cid), false},
    {"mid", K_U64, EV(mid), false},
    {"ts", K_U64, EV(ts), false},
};
/* msg: `body` unless recalled (decode_event). */
static const field f_msg[] = {
    {"gid", K_ID, EV(gid), false},       {"mid", K_U64, EV(msg.mid), false},
    {"from", K_ID, EV(msg.from), false}, {"ts", K_U64, EV(msg.ts), false},
    {"ver", K_U64, EV(msg.ver), true},   {"recalled", K_BOOL, EV(msg.recalled), true},
};
static const field f_page[] = {
    {"gid", K_ID, EV(gid), false},
    {"first_mid", K_U64, EV(first_mid), true},
    {"gone_before", K_U64, EV(gone_before), true},
    {"last_mid", K_U64, EV(last_mid), false},
    {"last_cseq", K_U64, EV(last_cseq), true},
    {"more", K_BOOL, EV(more), false},
    {"msgs", K_ARRAY, 0, false},
};
static const field f_changes[] = {
    {"gid", K_ID, EV(gid), false},
    {"after", K_U64, EV(after), false},
    {"upto", K_U64, EV(upto), false},
    {"last_cseq", K_U64, EV(last_cseq), false},
    {"first_mid", K_U64, EV(first_mid), false},
    {"last_mid", K_U64, EV(last_mid), false},
    {"more", K_BOOL, EV(more), false},
    {"changes_gone_before", K_U64, EV(changes_gone_before), true},
    {"msgs", K_ARRAY, 0, false},
};
static const field f_reacted[] = {
    {"gid", K_ID, EV(gid), false},    {"mid", K_U64, EV(mid), false},
    {"uid", K_ID, EV(uid), false},    {"key", K_STR, EV(key), false},
    {"on", K_BOOL, EV(on), false},    {"count", K_U64, EV(count), false},
    {"cseq", K_U64, EV(cseq), false}, {"duplicate", K_BOOL, EV(duplicate), true},
};
static const field f_changed[] = {
    {"gid", K_ID, EV(gid), false},
    {"last_cseq", K_U64, EV(last_cseq), false},
};
static const field f_notify[] = {
    {"gid", K_ID, EV(gid), false},
    {"last_mid", K_U64, EV(last_mid), false},
};
static const field f_pong[] = {{"ts", K_U64, EV(ts), false}};
/* err's gid is only a string: an err may be about a gid, not necessarily a valid one. */
static const field f_err[] = {
    {"code", K_STR, EV(err_name), false},
    {"msg", K_STR, EV(err_msg), false},
    {"gid", K_STR, EV(gid), true},
    {"retry_ms", K_U64, EV(retry_ms), true},
};
static const field f_receipts[] = {
    {"gid", K_ID, EV(gid), false},
    {"mid", K_U64, EV(mid), false},
    {"delivered", K_U64, EV(delivered), false},
    {"read", K_U64, EV(read), false},
    {"of", K_U64, EV(of), false},
    {"readers", K_ARRAY, 0, true},
};
static const field f_cursors[] = {
    {"gid", K_ID, EV(gid), false},
    {"cursors", K_ARRAY, 0, false},
};
static const field f_presence[] = {
    {"gid", K_ID, EV(gid), false},
    {"online", K_U64, EV(online), false},
    {"of", K_U64, EV(of), false},
    {"members", K_ARRAY, 0, true},
};
static const field f_online[] = {
    {"gid", K_ID, EV(gid), false},
    {"changes", K_ARRAY, 0, false},
};
static const field f_typing[] = {
    {"gid", K_ID, EV(gid), false},
    {"uid", K_ID, EV(uid), false},
    {"ttl_ms", K_U32, EV(ttl_ms), false},
};
static const field f_group[] = {
    {"gid", K_ID, offsetof(pr_group, gid), false},
    {"first_mid", K_U64, offsetof(pr_group, first_mid), true},
    {"last_mid", K_U64, offsetof(pr_group, last_mid), false},
    {"ack", K_U64, offsetof(pr_group, ack), false},
    {"unread", K_U64, offsetof(pr_group, unread), false},
    {"last_cseq", K_U64, offsetof(pr_group, last_cseq), true},
};
static const field f_cursor[] = {
    {"uid", K_ID, offsetof(pr_cursor, uid), false},
    {"ack", K_U64, offsetof(pr_cursor, ack), false},
};
static const field f_member[] = {
    {"uid", K_ID, offsetof(pr_presence, uid), false},
    {"online", K_BOOL, offsetof(pr_presence, online), false},
    {"last_seen", K_U64, offsetof(pr_presence, last_seen), false},
};
/* A page entry: `body` unless recalled (read_message). */
static const field f_message[] = {
    {"mid", K_U64, offsetof(pr_message, mid), false},
    {"from", K_ID, offsetof(pr_message, from), false},
    {"ts", K_U64, offsetof(pr_message, ts), false},
    {"ver", K_U64, offsetof(pr_message, ver), true},
    {"recalled", K_BOOL, offsetof(pr_message, recalled), true},
    {"cseq", K_U64, offsetof(pr_message, cseq), true},
};
static const field f_edited[] = {
    {"gid", K_ID, EV(gid), false},       {"mid", K_U64, EV(msg.mid), false},
    {"from", K_ID, EV(msg.from), false}, {"ts", K_U64, EV(msg.ts), false},
    {"ver", K_U64, EV(msg.ver), false},  {"body", K_BODY, EV(msg.body), false},
    {"cseq", K_U64, EV(msg.cseq), true},
};
static const field f_recalled[] = {
    {"gid", K_ID, EV(gid), false},       {"mid", K_U64, EV(msg.mid), false},
    {"from", K_ID, EV(msg.from), false}, {"ts", K_U64, EV(msg.ts), false},
    {"ver", K_U64, EV(msg.ver), false},  {"cseq", K_U64, EV(msg.cseq), true},
};

enum elem { E_NONE, E_GROUP, E_MESSAGE, E_UID, E_CURSOR, E_PRESENCE };

static const struct ev_type {
    const char *name;
    enum pr_ev_type t;
    const field *fields;
    size_t n_fields;
    enum elem elem; /* what the K_ARRAY field holds */
} ev_types[] = {
    {"welcome", PR_EV_WELCOME, SPEC(f_welcome), E_GROUP},
    {"groups", PR_EV_GROUPS, SPEC(f_groups), E_GROUP},
    {"joined", PR_EV_JOINED, SPEC(f_joined), E_NONE},
    {"left", PR_EV_LEFT, SPEC(f_left), E_NONE},
    {"sent", PR_EV_SENT, SPEC(f_sent), E_NONE},
    {"msg", PR_EV_MSG, SPEC(f_msg), E_NONE},
    {"page", PR_EV_PAGE, SPEC(f_page), E_MESSAGE},
    {"notify", PR_EV_NOTIFY, SPEC(f_notify), E_NONE},
    {"pong", PR_EV_PONG, SPEC(f_pong), E_NONE},
    {"err", PR_EV_ERR, SPEC(f_err), E_NONE},
    {"receipts", PR_EV_RECEIPTS, SPEC(f_receipts), E_UID},
    {"cursors", PR_EV_CURSORS, SPEC(f_cursors), E_CURSOR},
    {"presence", PR_EV_PRESENCE, SPEC(f_presence), E_PRESENCE},
    {"online", PR_EV_ONLINE, SPEC(f_online), E_PRESENCE},
    {"typing", PR_EV_TYPING, SPEC(f_typing), E_NONE},
    {"edited", PR_EV_EDITED, SPEC(f_edited), E_NONE},
    {"recalled", PR_EV_RECALLED, SPEC(f_recalled), E_NONE},
    {"changes", PR_EV_CHANGES, SPEC(f_changes), E_MESSAGE},
    {"reacted", PR_EV_REACTED, SPEC(f_reacted), E_NONE},
    {"changed", PR_EV_CHANGED, SPEC(f_changed), E_NONE},
};

/* A page or changes entry's `reactions` {key: count} and `mine` [key, ...], both
 * optional: checked here, read later by pr_message_reaction. */
static int read_reactions(const dctx *c, pr_message *m)
{
    const msgpack_object *r, *mine = NULL;
    int rc = lookup(c, "reactions", &r);
    if (!rc)
        rc = read_field(c, "mine", K_ARRAY, true, &mine, NULL);
    if (rc)
        return rc;
    if (r) {
        if (r->type != MSGPACK_OBJECT_MAP)
            return pr_fail(c->err, PR_E_BAD_FIELD, "%s: field 'reactions' must be a map", c->what);
        for (uint32_t i = 0; i < r->via.map.size; i++)
            if (r->via.map.ptr[i].key.type != MSGPACK_OBJECT_STR ||
                r->via.map.ptr[i].val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return pr_fail(c->err, PR_E_BAD_FIELD, "%s: 'reactions' must map strings to counts",
                               c->what);
        m->reactions_ = &r->via.map;
        m->n_reactions = r->via.map.size;
    }
    if (mine) {
        for (uint32_t i = 0; i < mine->via.array.size; i++)
            if (mine->via.array.ptr[i].type != MSGPACK_OBJECT_STR)
                return pr_fail(c->err, PR_E_BAD_FIELD, "%s: 'mine' must hold strings", c->what);
        m->mine_ = &mine->via.array;
    }
    return 0;
}

int pr_message_reaction(const pr_message *m, size_t i, pr_reaction *out)
{
    memset(out, 0, sizeof *out);
    if (!m || i >= m->n_reactions || !m->reactions_)
        return PR_E_BAD_FIELD;
    const msgpack_object_kv *kv = &((const msgpack_object_map *)m->reactions_)->ptr[i];
    out->key = slice_of(&kv->key);
    out->count = kv->val.via.u64;
    const msgpack_object_array *mine = m->mine_;
    for (uint32_t j = 0; mine && j < mine->size && !out->mine; j++)
        out->mine = slice_eq(slice_of(&mine->ptr[j]), out->key);
    return 0;
}

/* One entry of an event's array into *out (a pr_group, pr_message, pr_slice, pr_cursor or
 * pr_presence, as elem says). */
static int read_elem(const msgpack_object *o, enum elem elem, void *out, pr_error *err)
{
    static const char *const whats[] = {
        [E_GROUP] = "entry of 'groups'",
        [E_MESSAGE] = "entry of 'msgs'",
        [E_UID] = "entry of 'readers'",
        [E_CURSOR] = "entry of 'cursors'",
        [E_PRESENCE] = "entry of 'members' or 'changes'",
    };
    const char *what = whats[elem] ? whats[elem] : "entry";
    if (elem == E_UID) {
        if (!convert(K_ID, o, out))
            return pr_fail(err, PR_E_BAD_FIELD, "%s: must be %s", what, kind_rule[K_ID]);
        return 0;
    }
    if (o->type != MSGPACK_OBJECT_MAP)
        return pr_fail(err, PR_E_BAD_FIELD, "%s: must be a map", what);
    dctx c = {o, what, SIZE_MAX, err, PR_PAGE_DEFAULT, PR_PAGE_MAX};
    switch (elem) {
    case E_GROUP: {
        pr_group *g = out;
        memset(g, 0, sizeof(*g));
        int rc = read_fields(&c, SPEC(f_group), out, NULL);
        if (!g->first_mid)
            g->first_mid = 1; /* a server before retention: nothing is gone */
        return rc ? rc : read_field(&c, "read", K_U64, true, &g->read, &g->has_read);
    }
    case E_CURSOR: {
        pr_cursor *k = out;
        memset(k, 0, sizeof(*k));
        int rc = read_fields(&c, SPEC(f_cursor), out, NULL);
        return rc ? rc : read_field(&c, "read", K_U64, true, &k->read, &k->has_read);
    }
    case E_PRESENCE:
        memset(out, 0, sizeof(pr_presence));
        return read_fields(&c, SPEC(f_member), out, NULL);
    default: {
        pr_message *m = out;
        memset(m, 0, sizeof(*m));
        bool body = false;
        int rc = read_fields(&c, SPEC(f_message), out, NULL);
        if (!rc)
            rc = read_field(&c, "body", K_BODY, m->recalled, &m->body, &body);
        if (!rc && m->recalled && body)
            rc = pr_fail(err, PR_E_BAD_FIELD, "%s: a recalled message has no 'body'", what);
        return rc ? rc : read_reactions(&c, m);
    }
    }
}

int pr_event_group(const pr_event *ev, size_t i, pr_group *out)
{
    if (!ev || (ev->t != PR_EV_WELCOME && ev->t != PR_EV_GROUPS) || i >= ev->n_items) {
        memset(out, 0, sizeof *out);
        return PR_E_BAD_FIELD;
    }
    return read_elem((const msgpack_object *)ev->items_ + i, E_GROUP, out, NULL);
}

int pr_event_message(const pr_event *ev, size_t i, pr_message *out)
{
    if (!ev || (ev->t != PR_EV_PAGE && ev->t != PR_EV_CHANGES) || i >= ev->n_items) {
        memset(out, 0, sizeof *out);
        return PR_E_BAD_FIELD;
    }
    return read_elem((const msgpack_object *)ev->items_ + i, E_MESSAGE, out, NULL);
}

/* The i-th entry of ev's array, if ev is of type t or t2. */
static int event_elem(const pr_event *ev, enum pr_ev_type t, enum pr_ev_type t2, size_t i,
                      enum elem elem, void *out, size_t out_n)
{
    if (!ev || (ev->t != t && ev->t != t2) || i >= ev->n_items) {
        memset(out, 0, out_n);
        return PR_E_BAD_FIELD;
    }
    return read_elem((const msgpack_object *)ev->items_ + i, elem, out, NULL);
}

int pr_event_reader(const pr_event *ev, size_t i, pr_slice *out)
{
    return event_elem(ev, PR_EV_RECEIPTS, PR_EV_RECEIPTS, i, E_UID, out, sizeof(*out));
}

int pr_event_cursor(const pr_event *ev, size_t i, pr_cursor *out)
{
    return event_elem(ev, PR_EV_CURSORS, PR_EV_CURSORS, i, E_CURSOR, out, sizeof(*out));
}

int pr_event_presence(const pr_event *ev, size_t i, pr_presence *out)
{
    return event_elem(ev, PR_EV_PRESENCE, PR_EV_ONLINE, i, E_PRESENCE, out, sizeof(*out));
}

static int err_code_of(pr_slice name)
{
    for (int code = PR_E_BAD_FRAME; code >= PR_E_LAST; code--)
        if (code != PR_E_NOMEM && slice_is(name, pr_err_name(code)))
            return code;
    return 0;
}

static int decode_event(const msgpack_object *o, pr_event *ev, pr_error *err)
{
    memset(ev, 0, sizeof *ev);
    if (o->type != MSGPACK_OBJECT_MAP)
        return pr_fail(err, PR_E_BAD_FRAME, "a server message must be a map");
    dctx c = {o, "message", SIZE_MAX, err, PR_PAGE_DEFAULT, PR_PAGE_MAX};
    pr_slice t;
    int rc = read_field(&c, "rid", K_U64, true, &ev->rid, &ev->has_rid);
    if (rc || (rc = read_t(&c, &t)))
        return rc;
    const struct ev_type *ty = NULL;
    for (size_t i = 0; i < sizeof ev_types / sizeof ev_types[0] && !ty; i++)
        if (slice_is(t, ev_types[i].name))
            ty = &ev_types[i];
    if (!ty)
        return pr_fail(err, PR_E_BAD_TYPE, "message: unknown type in field 't'");

    c.what = ty->name;
    const msgpack_object *arr = NULL;
    if ((rc = read_fields(&c, ty->fields, ty->n_fields, ev, &arr)))
        return rc;
    if ((ty->t == PR_EV_JOINED || ty->t == PR_EV_PAGE) && !ev->first_mid)
        ev->first_mid = 1; /* not given (a server before retention): nothing is gone */
    if (arr) {
        ev->items_ = arr->via.array.ptr;
        ev->n_items = arr->via.array.size;
        ev->has_list = true;
    }
    /* Check every entry now, so that the accessors cannot fail on a decoded event for an
     * index below n_items. */
    for (size_t i = 0; i < ev->n_items; i++) {
        union {
            pr_group g;
            pr_message m;
            pr_slice s;
            pr_cursor k;
            pr_presence p;
        } tmp;
        if ((rc = read_elem(&arr->via.array.ptr[i], ty->elem, &tmp, err)))
            return rc;
    }
    if (ty->t == PR_EV_ERR)
        ev->err_code = err_code_of(ev->err_name);
    if (ty->t == PR_EV_RECALLED)
        ev->msg.recalled = true;
    if (ty->t == PR_EV_EDITED || ty->t == PR_EV_RECALLED)
        ev->cseq = ev->msg.cseq;
    if (ty->t == PR_EV_MSG) {
        bool body = false;
        if ((rc = read_field(&c, "body", K_BODY, ev->msg.recalled, &ev->msg.body, &body)))
            return rc;
        if (ev->msg.recalled && body)
            return pr_fail(err, PR_E_BAD_FIELD, "msg: a recalled message has no 'body'");
    }
    ev->t = ty->t;
    return 0;
}

int pr_decode_events(pr_decoder *d, const uint8_t *frame, size_t len, pr_event_cb cb, void *ud,
                     pr_error *err)
{
    msgpack_object root;
    int rc = unpack(d, frame, len, &root, err);
    if (rc)
        return rc;
    const msgpack_object *msgs = &root;
    size_t n = 1;
    if (root.type == MSGPACK_OBJECT_ARRAY) {
        msgs = root.via.array.ptr;
        n = root.via.array.size;
    } else if (root.type != MSGPACK_OBJECT_MAP) {
        return pr_fail(err, PR_E_BAD_FRAME, "a server frame must be a map or an array of maps");
    }

    /* Check the whole batch first: cb then sees all of a frame or none of it. */
    pr_event ev;
    for (size_t i = 0; i < n; i++)
        if ((rc = decode_event(&msgs[i], &ev, err)))
            return rc;
    for (size_t i = 0; i < n && cb; i++) {
        decode_event(&msgs[i], &ev, NULL);
        if ((rc = cb(ud, &ev)))
            return rc;
    }
    return 0;
}

/* One object of several: msgpack-c says EXTRA_BYTES while more follow. */
static bool unpacked(msgpack_unpack_return r)
{
    return r == MSGPACK_UNPACK_SUCCESS || r == MSGPACK_UNPACK_EXTRA_BYTES;
}

int pr_dec_record(pr_decoder *d, const uint8_t *rec, size_t n, pr_message *out)
{
    memset(out, 0, sizeof *out);
    msgpack_zone_clear(&d->zone);
    size_t off = 0;
    bool from = false, body = false;
    /* Key/value pairs without a map header (pr_enc_record): two keys, two values, or the
     * `from` pair alone (pr_enc_tombstone: a recalled message). The strings stay in rec
     * (msgpack-c points into the buffer it unpacks). */
    for (unsigned i = 0; i < PR_RECORD_PAIRS && off < n; i++) {
        msgpack_object k, v;
        if (!unpacked(msgpack_unpack((const char *)rec, n, &off, &d->zone, &k)) ||
            !unpacked(msgpack_unpack((const char *)rec, n, &off, &d->zone, &v)) ||
            k.type != MSGPACK_OBJECT_STR)
            return PR_E_BAD_FRAME;
        pr_slice key = slice_of(&k);
        if (slice_is(key, "from") && v.type == MSGPACK_OBJECT_STR) {
            out->from = slice_of(&v);
            from = pr_id_valid(out->from);
        } else if (slice_is(key, "body") &&
                   (v.type == MSGPACK_OBJECT_STR || v.type == MSGPACK_OBJECT_BIN)) {
            out->body = (pr_body){slice_of(&v), v.type == MSGPACK_OBJECT_BIN};
            body = true;
        } else {
            return PR_E_BAD_FRAME;
        }
    }
    out->recalled = !body;
    return from && off == n ? 0 : PR_E_BAD_FRAME;
}
