/*
 * proto: the wire format of protocol v1 (docs/PROTOCOL.md).
 *
 * Every frame is one MessagePack value: a map (one message) or an array of maps (a batch).
 * This module encodes and decodes every message in both directions with msgpack-c and
 * validates a frame before decoding it. It knows nothing of sockets or storage.
 *
 * Ownership: decoding never copies. Every pr_slice in a decoded message borrows from the
 * frame the caller passed in, and every array accessor borrows from the decoder; both stay
 * valid until the next decode with the same decoder or pr_decoder_free(), and only while
 * the frame's bytes are alive. Encoders append to a msgpack_sbuffer owned by the caller.
 *
 * Errors are negative PR_E* codes; pr_err_name() gives the protocol's `code` string and
 * pr_error.msg says in words what was wrong.
 */
#ifndef GW_PROTO_H
#define GW_PROTO_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Protocol limits (defaults; the decoder takes its own copy, see pr_limits). */
#define PR_MAX_FRAME_DEFAULT (256u * 1024u) /* bytes in one frame */
#define PR_MAX_BODY_DEFAULT (64u * 1024u)   /* bytes in one `body` */
#define PR_MAX_ID 64u                       /* bytes in gid, uid, cid */
#define PR_MAX_KEYS 32u                     /* entries in one map */
#define PR_MAX_DEPTH 5u       /* nesting of maps and arrays (a batch of pages of reactions) */
#define PR_PAGE_DEFAULT 100u  /* default `limit` of enter and pull */
#define PR_PAGE_MAX 500u      /* larger limits are clamped to this */
#define PR_NO_RID UINT64_MAX  /* encoders: leave `rid` out */
#define PR_MAX_WATCH 16u      /* mids one `watch` names */
#define PR_REACT_KEY_MAX 32u  /* bytes in a reaction's `key` */
#define PR_REACT_KEYS_MAX 20u /* distinct keys on one message */

enum pr_err {
    PR_OK = 0,
    PR_E_BAD_FRAME = -1, /* not MessagePack, truncated, trailing bytes, too deep */
    PR_E_BAD_TYPE = -2,  /* missing or unknown `t` */
    PR_E_BAD_FIELD = -3, /* a field missing, of the wrong type, or out of range */
    PR_E_TOO_LARGE = -4, /* a frame, body, map or array over its limit */
    PR_E_NOMEM = -5,     /* allocation failed; sent as "internal" */
    /* Codes the decoder never returns, so that the gateway can name every protocol error
     * (pr_err_name) and a client can recognise it (pr_event.err_code). */
    PR_E_UNAUTHORIZED = -6,
    PR_E_NOT_MEMBER = -7,
    PR_E_NO_GROUP = -8,
    PR_E_RATE_LIMITED = -9,
    PR_E_OVERLOADED = -10,
    PR_E_INTERNAL = -11,
    PR_E_UNAVAILABLE = -12, /* the server cannot store writes now (disk trouble): retry */
    PR_E_CONFLICT = -13,    /* edit: the message has another version by now: pull, retry */
};
#define PR_E_LAST PR_E_CONFLICT

/* Protocol error code string for a PR_E* value ("bad_frame", ...). */
const char *pr_err_name(int err);

/* Why a decode failed: the code, and a message fit to send back in `err.msg`. */
typedef struct pr_error {
    int code;      /* a PR_E* value */
    char msg[120]; /* NUL-terminated, never holds user data beyond a short field name */
} pr_error;

/* A borrowed run of bytes (see ownership above). Not NUL-terminated. */
typedef struct pr_slice {
    const uint8_t *p;
    size_t n;
} pr_slice;

/* A message body keeps its MessagePack type: str or bin. */
typedef struct pr_body {
    pr_slice data;
    bool is_bin; /* true: bin, false: str */
} pr_body;

/* Configurable limits; pr_limits_default() gives the protocol's defaults. */
typedef struct pr_limits {
    size_t max_frame;      /* whole frame */
    size_t max_body;       /* `body` of send */
    uint32_t page_default; /* `limit` of enter/pull when absent (0: PR_PAGE_DEFAULT) */
    uint32_t page_max;     /* larger limits are clamped to this (0: PR_PAGE_MAX) */
} pr_limits;

pr_limits pr_limits_default(void);

/* True if s is a valid id: 1..PR_MAX_ID bytes of [A-Za-z0-9_.:-]. */
bool pr_id_valid(pr_slice s);

/* ---------------------------------------------------------------------------------------
 * Client to server
 */

enum pr_req_type {
    PR_REQ_HELLO = 1,
    PR_REQ_JOIN,
    PR_REQ_LEAVE,
    PR_REQ_GROUPS,
    PR_REQ_SEND,
    PR_REQ_ACK,
    PR_REQ_ENTER,
    PR_REQ_PULL,
    PR_REQ_PING,
    /* What members see of each other (docs/PROTOCOL.md, Receipts, presence, typing). */
    PR_REQ_READ,     /* reads: the person has seen up to mid (a second cursor) */
    PR_REQ_RECEIPTS, /* gid, mid: how many have it, and have read it */
    PR_REQ_WATCH,    /* gid, mids: the mids on screen, whose receipts are pushed */
    PR_REQ_PRESENCE, /* gid, sub?: who of the group is online (and pushes of changes) */
    PR_REQ_TYPING,   /* gid: told to the group's other online members, never stored */
    /* A message's later versions (docs/PROTOCOL.md, Edits and recalls). */
    PR_REQ_EDIT,   /* gid, mid, body, ver?: the sender's new version of a message */
    PR_REQ_RECALL, /* gid, mid: the sender takes a message back (its body is deleted) */
    /* Changes to messages a client holds (docs/PROTOCOL.md, Changes and reactions). */
    PR_REQ_CHANGES, /* gid, after, limit?: the changes after a cseq */
    PR_REQ_REACT,   /* gid, mid, key, on: set or clear the person's reaction */
};

/* True if s is a valid reaction key: 1..PR_REACT_KEY_MAX bytes of UTF-8 with no control
 * characters (below 0x20, 0x7f). */
bool pr_react_key_valid(pr_slice s);

/* One entry of `ack.acks` (the client holds every message of gid with mid <= mid), or of
 * `read.reads` (the person has seen every message of gid with mid <= mid). */
typedef struct pr_ack {
    pr_slice gid;
    uint64_t mid;
} pr_ack;

/* A decoded client request. Fields not used by `t` are zero. */
typedef struct pr_req {
    enum pr_req_type t;
    bool has_rid;
    uint64_t rid;
    pr_slice token; /* hello */
    pr_slice gid;   /* join, leave, send, enter, pull, edit, recall */
    pr_slice cid;   /* send */
    pr_body body;   /* send, edit */
    uint64_t ver;   /* edit: the version it makes (0: not given, the next) */
    uint32_t limit; /* enter, pull: requested limit, defaulted and clamped (pr_limits) */
    bool has_after; /* pull: exactly one of after / before */
    bool has_before;
    uint64_t after;
    uint64_t before;
    pr_ack acks[PR_MAX_KEYS]; /* ack: acks; read: reads */
    size_t n_acks;
    uint64_t mid;                /* receipts, edit, recall (>= 1) */
    uint64_t mids[PR_MAX_WATCH]; /* watch (none: stop watching gid) */
    size_t n_mids;
    bool sub; /* presence: push the group's online changes (false: stop) */
    bool has_sub;
    pr_slice key; /* react: the reaction (pr_react_key_valid) */
    bool on;      /* react: set (true) or clear (false) */
} pr_req;

/* Decoder state: a reusable msgpack zone whose size is bounded by the frame size. */
typedef struct pr_decoder pr_decoder;

/* Allocates a decoder with the given limits (NULL: defaults). Free with pr_decoder_free. */
pr_decoder *pr_decoder_new(const pr_limits *lim);
void pr_decoder_free(pr_decoder *d);

/*
 * Decodes one client frame into *out. A client frame is a single map. Returns 0, or a
 * negative PR_E* code with *err filled in. When the frame was a map whose `rid` could be
 * read, out->has_rid/out->rid are set even on error, so the reply can carry it.
 */
int pr_decode_req(pr_decoder *d, const uint8_t *frame, size_t len, pr_req *out, pr_error *err);

/* Client-side encoders (used by the client library, tools and tests). */
int pr_enc_hello(msgpack_sbuffer *b, uint64_t rid, pr_slice token);
int pr_enc_join(msgpack_sbuffer *b, uint64_t rid, pr_slice gid);
int pr_enc_leave(msgpack_sbuffer *b, uint64_t rid, pr_slice gid);
int pr_enc_groups_req(msgpack_sbuffer *b, uint64_t rid);
int pr_enc_send(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, pr_slice cid, pr_body body);
int pr_enc_ack(msgpack_sbuffer *b, const pr_ack *acks, size_t n);
/* limit 0 = server default. */
int pr_enc_enter(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint32_t limit);
/* before = false: pull after `mid`; true: pull before `mid`. */
int pr_enc_pull(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, bool before, uint64_t mid,
                uint32_t limit);
int pr_enc_ping(msgpack_sbuffer *b, uint64_t rid);
int pr_enc_read(msgpack_sbuffer *b, const pr_ack *reads, size_t n);
int pr_enc_receipts_req(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid);
int pr_enc_watch(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, const uint64_t *mids, size_t n);
/* sub: -1 leaves `sub` out, 0 false, 1 true. */
int pr_enc_presence_req(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, int sub);
int pr_enc_typing(msgpack_sbuffer *b, pr_slice gid);
/* ver 0 leaves `ver` out (the next version, whichever it is). */
int pr_enc_edit(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid, uint64_t ver,
                pr_body body);
int pr_enc_recall(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid);
/* changes after cseq `after`; limit 0 = server default. */
int pr_enc_changes_req(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t after,
                       uint32_t limit);
int pr_enc_react(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid, pr_slice key,
                 bool on);
/* rid PR_NO_RID means "no rid" in every encoder; any other value, 0 included, is sent. */

/* ---------------------------------------------------------------------------------------
 * Stored messages: one representation for pushes and pages.
 *
 * A message is encoded once, when it is sent, as its "record": the MessagePack key/value
 * pairs `from` and `body` without a map header. The store keeps the record's bytes as they
 * are, next to the mid and ts it assigns. Both a `msg` push and a `page` entry are then
 * written as a map header, a few integer pairs (mid, ts, and for a push t and gid) and the
 * record's bytes copied verbatim: the body is never re-encoded field by field.
 */
#define PR_RECORD_PAIRS 2u /* key/value pairs in a record */

int pr_enc_record(msgpack_sbuffer *b, pr_slice from, pr_body body);
/* A recalled message's record, its tombstone: the pair `from` alone. */
int pr_enc_tombstone(msgpack_sbuffer *b, pr_slice from);

/* A stored message's version as pushes and pages show it: ver 0 is the message as sent;
 * a later one carries `ver`, and a recalled one `recalled: true` and a tombstone record. */
typedef struct pr_version {
    uint64_t ver;
    uint64_t ts; /* when the version was made */
    bool recalled;
    uint64_t cseq; /* the message's latest change (0: none; then left out) */
} pr_version;

/* One key of a message's reactions: how many set it, and whether the reader did. */
typedef struct pr_reaction {
    pr_slice key;
    uint64_t count;
    bool mine;
} pr_reaction;

/* A `msg` push: {t:"msg", gid, mid, ts} + record. */
int pr_enc_msg(msgpack_sbuffer *b, pr_slice gid, uint64_t mid, uint64_t ts, pr_slice record);

/* A `page`, written in three steps: begin (n = number of entries that follow), n entries,
 * then end. Entries must be in ascending mid order. first_mid: the group's horizon
 * (messages below it are gone: retention); gone_before: the horizon when the pull asked
 * for messages below it (0: left out). */
int pr_enc_page_begin(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                      uint64_t last_mid, uint64_t gone_before, bool more, size_t n);
int pr_enc_page_entry(msgpack_sbuffer *b, uint64_t mid, uint64_t ts, pr_slice record);
/* A `msg` push of a message read back from the store with a later version (v NULL or
 * v->ver 0: pr_enc_msg): `ver`, and `recalled: true` with no body for a tombstone. */
int pr_enc_msg_v(msgpack_sbuffer *b, pr_slice gid, uint64_t mid, uint64_t ts, const pr_version *v,
                 pr_slice record);
/* The same for a page entry (v NULL or v->ver 0: pr_enc_page_entry). */
int pr_enc_page_entry_v(msgpack_sbuffer *b, uint64_t mid, uint64_t ts, const pr_version *v,
                        pr_slice record);
/* A page or changes entry with everything: the version as above, `cseq` when v->cseq > 0
 * (even for ver 0: a reaction changes a message without a new version), `reactions`
 * {key: count} when n_r > 0 (at most PR_REACT_KEYS_MAX), `mine` [key, ...] for the ones
 * marked mine (when any). */
int pr_enc_page_entry_r(msgpack_sbuffer *b, uint64_t mid, uint64_t ts, const pr_version *v,
                        pr_slice record, const pr_reaction *r, size_t n_r);
/* A `page` with the group's `last_cseq` (pr_enc_page_begin: last_cseq 0). */
int pr_enc_page_begin_c(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                        uint64_t last_mid, uint64_t gone_before, bool more, uint64_t last_cseq,
                        size_t n);
/* A `changes` reply, begin + n entries (pr_enc_page_entry_r, ascending by cseq). */
typedef struct pr_changes {
    pr_slice gid;
    uint64_t after;       /* as asked */
    uint64_t upto;        /* complete up to this cseq: continue after it */
    uint64_t last_cseq;   /* the group's */
    uint64_t first_mid;   /* the group's horizon (0 is sent as 1) */
    uint64_t last_mid;    /* the group's newest mid */
    uint64_t gone_before; /* changes_gone_before: the log cannot serve `after` (0: none) */
    bool more;
} pr_changes;
int pr_enc_changes_begin(msgpack_sbuffer *b, uint64_t rid, const pr_changes *c, size_t n);
/* A `reacted` reply (duplicate: nothing changed; only replies carry it) or push. */
typedef struct pr_reacted {
    pr_slice gid;
    uint64_t mid;
    pr_slice uid;
    pr_slice key;
    bool on;
    uint64_t count; /* the key's count now */
    uint64_t cseq;  /* the change's, or on a duplicate the message's current cseq */
    bool duplicate;
} pr_reacted;
int pr_enc_reacted(msgpack_sbuffer *b, uint64_t rid, const pr_reacted *r);
/* `changed {gid, last_cseq}`: changes were made that were not pushed one by one. */
int pr_enc_changed(msgpack_sbuffer *b, pr_slice gid, uint64_t last_cseq);
/* An `edited` or (v->recalled) `recalled` reply or push: {t, rid?, gid, mid, ver, ts,
 * cseq (when v->cseq > 0)} + record (ts: when the version was made). */
int pr_enc_version(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid,
                   const pr_version *v, pr_slice record);

/* ---------------------------------------------------------------------------------------
 * Server to client
 */

enum pr_ev_type {
    PR_EV_WELCOME = 1,
    PR_EV_GROUPS,
    PR_EV_JOINED,
    PR_EV_LEFT,
    PR_EV_SENT,
    PR_EV_MSG,
    PR_EV_PAGE,
    PR_EV_NOTIFY,
    PR_EV_PONG,
    PR_EV_ERR,
    PR_EV_RECEIPTS, /* a reply to receipts, or a watched mid's (pushed) */
    PR_EV_CURSORS,  /* pushed: members' cursors moved (a small group) */
    PR_EV_PRESENCE, /* a reply to presence */
    PR_EV_ONLINE,   /* pushed: members came online or went */
    PR_EV_TYPING,   /* pushed: a member is typing */
    PR_EV_EDITED,   /* a reply to edit, or pushed: a message's new version (msg) */
    PR_EV_RECALLED, /* a reply to recall, or pushed: a message is a tombstone (msg) */
    PR_EV_CHANGES,  /* a reply to changes: the changed messages (like a page) */
    PR_EV_REACTED,  /* a reply to react, or pushed: a reaction was set or cleared */
    PR_EV_CHANGED,  /* pushed: pull changes after your cursor */
};

/* One entry of `groups` (in welcome and groups). */
typedef struct pr_group {
    pr_slice gid;
    uint64_t last_mid;
    uint64_t first_mid; /* the horizon: messages below it are gone (decoded: 1 if absent) */
    uint64_t ack;
    uint64_t unread; /* from `read` when the user has sent one for the group, else `ack` */
    uint64_t read;   /* when has_read */
    bool has_read;
    uint64_t last_cseq; /* the group's newest change (0: none, or not given) */
} pr_group;

/* One entry of a `cursors` push: where a member's two cursors are. */
typedef struct pr_cursor {
    pr_slice uid;
    uint64_t ack;
    uint64_t read; /* when has_read */
    bool has_read;
} pr_cursor;

/* One member of a `presence` reply or an `online` push. */
typedef struct pr_presence {
    pr_slice uid;
    bool online;
    uint64_t last_seen; /* ms since the epoch it was last online (0: never seen) */
} pr_presence;

/* One message as carried by `msg`, a `page` entry, `edited` and `recalled`. */
typedef struct pr_message {
    uint64_t mid;
    pr_slice from;
    uint64_t ts;            /* when it was sent (edited, recalled: when the version was made) */
    pr_body body;           /* none when recalled */
    uint64_t ver;           /* 0: as sent */
    bool recalled;          /* a tombstone: no body */
    uint64_t cseq;          /* its latest change (0: none, or not given) */
    size_t n_reactions;     /* keys in `reactions` (page and changes entries) */
    const void *reactions_; /* private: read with pr_message_reaction */
    const void *mine_;      /* private */
} pr_message;

/* The i-th reaction of a decoded page or changes entry (keys as sent). 0 or
 * PR_E_BAD_FIELD. */
int pr_message_reaction(const pr_message *m, size_t i, pr_reaction *out);

/* Reads a stored record back into out's from and body (mid and ts are left 0): slices
 * borrowed from rec. 0, or PR_E_BAD_FRAME for bytes that are not a record. Uses d's zone
 * (as a decode does). */
int pr_dec_record(pr_decoder *d, const uint8_t *rec, size_t n, pr_message *out);

/* Server encoders. rid PR_NO_RID = no rid. */
typedef struct pr_welcome {
    pr_slice uid;
    pr_slice sid;
    uint64_t ts;
    uint32_t ack_every;
    uint32_t ack_delay_ms;
    uint32_t max_body;
    bool partial; /* the groups of a database that is away are not listed yet (a sharded
                   * store): a `groups` push brings the whole list once it is back.
                   * Decoded into pr_event.partial (groups has it too) */
} pr_welcome;

/* welcome and groups are written as begin + n pr_enc_group_entry calls. */
int pr_enc_welcome_begin(msgpack_sbuffer *b, uint64_t rid, const pr_welcome *w, size_t n_groups);
int pr_enc_groups_begin(msgpack_sbuffer *b, uint64_t rid, size_t n_groups);
/* groups with `partial: true` when partial (as pr_welcome's). */
int pr_enc_groups_begin_p(msgpack_sbuffer *b, uint64_t rid, size_t n_groups, bool partial);
int pr_enc_group_entry(msgpack_sbuffer *b, const pr_group *g);
int pr_enc_joined(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                  uint64_t last_mid, uint64_t ack);
/* joined with the group's last_cseq (pr_enc_joined: 0). */
int pr_enc_joined_c(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t first_mid,
                    uint64_t last_mid, uint64_t ack, uint64_t last_cseq);
int pr_enc_left(msgpack_sbuffer *b, uint64_t rid, pr_slice gid);
/* left of a deleted group: with the deletion's cseq (0: left out). */
int pr_enc_left_c(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t cseq);
int pr_enc_sent(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, pr_slice cid, uint64_t mid,
                uint64_t ts);
int pr_enc_notify(msgpack_sbuffer *b, pr_slice gid, uint64_t last_mid);
int pr_enc_pong(msgpack_sbuffer *b, uint64_t rid, uint64_t ts);
/* gid may be empty (n == 0): then it is left out. */
int pr_enc_err(msgpack_sbuffer *b, uint64_t rid, int code, const char *msg, pr_slice gid);
/* The same with `retry_ms` (left out when 0): how long the client should wait before it
 * sends again (rate_limited). */
int pr_enc_err_retry(msgpack_sbuffer *b, uint64_t rid, int code, const char *msg, pr_slice gid,
                     uint64_t retry_ms);

/* What members see of each other. A list written as begin + n entries; n SIZE_MAX
 * leaves the list out (a group over the list limit: counts only). */
int pr_enc_receipts_begin(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t mid,
                          uint64_t delivered, uint64_t read, uint64_t of, size_t n_readers);
int pr_enc_uid_entry(msgpack_sbuffer *b, pr_slice uid);
int pr_enc_cursors_begin(msgpack_sbuffer *b, pr_slice gid, size_t n);
int pr_enc_cursor_entry(msgpack_sbuffer *b, const pr_cursor *c);
int pr_enc_presence_begin(msgpack_sbuffer *b, uint64_t rid, pr_slice gid, uint64_t online,
                          uint64_t of, size_t n_members);
int pr_enc_online_begin(msgpack_sbuffer *b, pr_slice gid, size_t n);
int pr_enc_presence_entry(msgpack_sbuffer *b, const pr_presence *p);
int pr_enc_typing_push(msgpack_sbuffer *b, pr_slice gid, pr_slice uid, uint32_t ttl_ms);

/* A batch frame: an array header for n messages, each then encoded as usual. The sbuffer
 * must hold nothing else; messages already encoded elsewhere can be appended as bytes. */
int pr_enc_batch_begin(msgpack_sbuffer *b, size_t n);

/* A decoded server message. Fields not used by `t` are zero. */
typedef struct pr_event {
    enum pr_ev_type t;
    bool has_rid;
    uint64_t rid;
    pr_welcome welcome;   /* welcome */
    bool partial;         /* welcome, groups: not every group is listed (pr_welcome) */
    pr_slice gid;         /* joined, left, sent, msg, page, notify, err (may be empty) */
    pr_slice cid;         /* sent */
    uint64_t mid;         /* sent, reacted */
    uint64_t ts;          /* sent, pong */
    uint64_t last_mid;    /* joined, page, notify */
    uint64_t first_mid;   /* joined, page: the group's horizon (1 when not given) */
    uint64_t gone_before; /* page: the pull asked below the horizon (0: not given) */
    uint64_t ack;         /* joined */
    bool more;            /* page */
    pr_message msg;       /* msg, edited, recalled */
    int err_code;         /* err: PR_E* for the protocol codes it knows, else 0 */
    pr_slice err_name;    /* err: the `code` string as sent */
    pr_slice err_msg;     /* err */
    uint64_t retry_ms;    /* err: wait this long before sending again (0: not given) */
    uint64_t delivered;   /* receipts: members whose ack is at or past mid */
    uint64_t read;        /* receipts: ... whose read is (their ack, if they never sent one) */
    uint64_t of;          /* receipts, presence: the group's members */
    uint64_t online;      /* presence: members online */
    bool has_list;        /* receipts: readers are listed; presence: members are */
    pr_slice uid;         /* typing, reacted */
    uint32_t ttl_ms;      /* typing: forget it after this long */
    uint64_t last_cseq;   /* joined, page, changes, changed (0: not given) */
    uint64_t cseq;        /* reacted; left of a deleted group; edited, recalled (= msg.cseq) */
    uint64_t after;       /* changes: as asked */
    uint64_t upto;        /* changes: continue after this */
    uint64_t changes_gone_before; /* changes: the log cannot serve `after` (0: not given) */
    pr_slice key;                 /* reacted */
    bool on;                      /* reacted */
    uint64_t count;               /* reacted: the key's count now */
    bool duplicate;               /* reacted: nothing changed */
    size_t n_items;     /* welcome, groups: groups; page, changes: msgs; receipts: readers;
                         * cursors: cursors; presence: members; online: changes */
    const void *items_; /* private: read with the pr_event_* accessors below */
} pr_event;

/* The i-th group of a welcome or groups event. Returns 0 or PR_E_BAD_FIELD. */
int pr_event_group(const pr_event *ev, size_t i, pr_group *out);
/* The i-th message of a page or changes event. Returns 0 or PR_E_BAD_FIELD. */
int pr_event_message(const pr_event *ev, size_t i, pr_message *out);
/* The i-th reader of a receipts event. Returns 0 or PR_E_BAD_FIELD. */
int pr_event_reader(const pr_event *ev, size_t i, pr_slice *out);
/* The i-th cursor of a cursors event. Returns 0 or PR_E_BAD_FIELD. */
int pr_event_cursor(const pr_event *ev, size_t i, pr_cursor *out);
/* The i-th member of a presence event or change of an online event. 0 or PR_E_BAD_FIELD. */
int pr_event_presence(const pr_event *ev, size_t i, pr_presence *out);

/*
 * Decodes one server frame: a map, or an array of maps (a batch). The whole frame, with
 * every group and page entry, is checked before cb is first called: a bad frame delivers
 * nothing, and pr_event_group / pr_event_message cannot fail for i < n_items. Calls cb
 * once per message in order; a non-zero return from cb stops the walk and is returned. Returns 0,
 * a PR_E* code with *err filled in, or cb's value. Events borrow as described above.
 */
typedef int (*pr_event_cb)(void *ud, const pr_event *ev);
int pr_decode_events(pr_decoder *d, const uint8_t *frame, size_t len, pr_event_cb cb, void *ud,
                     pr_error *err);

/*
 * Structural check of a frame without decoding it: well-formed MessagePack, exactly one
 * value and no trailing bytes, nesting <= PR_MAX_DEPTH, maps <= PR_MAX_KEYS entries, every
 * declared length or count covered by the bytes that remain, total <= lim->max_frame.
 * Allocates nothing. Both decoders call it first; exposed for tests and fuzzing.
 */
int pr_validate(const uint8_t *frame, size_t len, const pr_limits *lim, pr_error *err);

/*
 * The JSON form (subprotocol gw.v1.json, proto_json.c): the same messages as JSON text.
 * A session of that subprotocol has its text frames made MessagePack on the way in and
 * its frames made JSON on the way out; everything between is the MessagePack path. A
 * MessagePack bin (or a string that is not UTF-8) is the object {"base64": "..."}.
 */
/* One MessagePack frame (a map, or an array of maps) as JSON text: *out malloc'd (the
 * caller frees), *out_n its length. 0, or PR_E_BAD_FRAME. */
int pr_json_from_msgpack(const uint8_t *p, size_t n, char **out, size_t *out_n);
/* JSON text (an object or an array) appended to out as MessagePack. 0, or PR_E_BAD_FRAME
 * (not JSON, duplicate keys, nested too deep, a bad base64 object) with err, when not
 * NULL, saying which (pr_json_why for what jansson refused). */
int pr_msgpack_from_json_err(const char *p, size_t n, msgpack_sbuffer *out, pr_error *err);
/* The same without the why. */
int pr_msgpack_from_json(const char *p, size_t n, msgpack_sbuffer *out);

/* Why jansson refused a text (json_loadb's error), in words for whoever sent it, `what`
 * being "the body" or "the frame": "<what> has a \u0000 (NUL) character in a string, which
 * is not allowed (line L, column C)", or "<what> is not valid JSON at line L, column C:
 * <jansson's error>". The one wording for every JSON the gateway reads (the API's bodies,
 * the JSON subprotocol's frames). Printable ASCII only: jansson quotes the text near the
 * error, which may be any bytes. Written into out (n bytes, NUL-terminated, cut short to
 * fit; the place comes first so that a cut leaves it). */
struct json_error_t; /* jansson's json_error_t */
void pr_json_why(const struct json_error_t *e, const char *what, char *out, size_t n);

#endif
