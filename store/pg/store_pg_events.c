/*
 * The change feed's wire format: what a batch announces with pg_notify, in its own
 * transaction, and how a listener reads it back.
 *
 * A payload is text (NOTIFY's payload is a string, shorter than 8000 bytes), lines
 * separated by '\n':
 *   gw1 ORIGIN                 the announcing store (16 hex digits, random per open)
 *   j GID UID ACK              a membership made (ack = the group's last mid then)
 *   m GID MID TS RECORD        a message, its record in base64
 *   h GID MID TS               a message whose record did not fit: read it
 *   h GID MID 0 LO             (the change log's) the batch's messages LO..MID: read them
 *   e GID MID VER TS R CSEQ RECORD  a message's version VER, made at TS (R 1: recalled),
 *                              the change's cseq, its record in base64
 *   E GID MID VER TS R CSEQ    the same without the record (it did not fit, or the change
 *                              log's, which keeps no body): read it (CSEQ is missing from
 *                              the rows of a release before it: 0)
 *   k GID MID UID ON COUNT CSEQ KEY  a reaction KEY set (ON 1) or cleared by UID, the key's
 *                              COUNT after it, the change's CSEQ; KEY last (it may hold
 *                              spaces, never a control character)
 *   c GID CSEQ                 GID's last cseq moved to CSEQ by changes not told one by one
 *                              (an erasure, a retention pass): pull them
 *   a GID UID ACK              an ack moved forward
 *   v GID UID READ             a read moved forward (the person has seen up to READ)
 *   l GID UID [CSEQ]           a membership ended (CSEQ: the group was deleted, with that
 *                              cseq)
 *   s UID                      a user's sessions are to end (signed out)
 *   r                          changes of this store's may be missing: catch up (a
 *                              batch whose commit's outcome it could not learn, and
 *                              whose announcement was to follow that commit)
 * Ids are printable ASCII without spaces (st_id_ok), so spaces separate the fields. A
 * batch whose changes do not fit one payload makes several, sent in order by one
 * statement; each starts with the header line. Joins come before the batch's messages
 * and leaves after them, so that a listener that applies them in order pushes a message
 * to whoever was a member when it was stored.
 *
 * A batch that makes or ends memberships announces in its own transaction (in commit
 * order with the other changes to those groups); one of messages and acks only, in a
 * transaction of its own right after its commit (store_pg.c, announce_in_tx). Such an
 * announcement that could not go (the connection lost between the two) is kept and sent
 * first with the next one.
 */
#include "store_pg.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest payload made: PostgreSQL refuses 8000 bytes and more. */
#define PAYLOAD_MAX 7900

/* Starts a payload: its header. */
static void payload_begin(pg_announce *a)
{
    char h[32];
    int n = snprintf(h, sizeof(h), "gw1 %016" PRIx64, a->origin);
    pg_text(&a->cur, h, (size_t)n);
}

/* Closes the payload being made (if it holds a change) into the list. */
static void payload_end(pg_announce *a)
{
    if (a->cur_changes == 0)
        return;
    if (!st_room(&a->list, &a->cap, a->n + 1, sizeof(*a->list), 4)) {
        a->oom = true;
        return;
    }
    a->list[a->n++] = a->cur;
    memset(&a->cur, 0, sizeof(a->cur));
    a->cur_changes = 0;
}

void pg_announce_reset(pg_announce *a, uint64_t origin)
{
    for (size_t i = 0; i < a->n; i++)
        pg_buf_free(&a->list[i]);
    a->n = 0;
    a->origin = origin;
    a->cur_changes = 0;
    a->hints = 0;
    a->oom = false;
    payload_begin(a);
}

void pg_announce_free(pg_announce *a)
{
    pg_announce_reset(a, 0);
    free(a->list);
    pg_buf_free(&a->cur);
    memset(a, 0, sizeof(*a));
}

/* Appends one line (without its '\n'), starting a new payload when it would not fit. */
static void line(pg_announce *a, const char *head, size_t head_n, const void *b64, size_t b64_n)
{
    size_t need = 1 + head_n + b64_n;
    if (a->cur.n + need > PAYLOAD_MAX) {
        payload_end(a);
        payload_begin(a);
    }
    pg_buf_put(&a->cur, "\n", 1);
    pg_buf_put(&a->cur, head, head_n);
    pg_buf_put(&a->cur, b64, b64_n);
    a->oom |= a->cur.oom;
    a->cur_changes++;
}

void pg_announce_member(pg_announce *a, char kind, st_id gid, st_id uid, uint64_t ack)
{
    char h[16 + 2 * ST_MAX_ID + 32];
    int n = kind == 'l'
                ? snprintf(h, sizeof(h), "l %.*s %.*s", (int)gid.n, gid.p, (int)uid.n, uid.p)
                : snprintf(h, sizeof(h), "%c %.*s %.*s %" PRIu64, kind, (int)gid.n, gid.p,
                           (int)uid.n, uid.p, ack);
    line(a, h, (size_t)n, NULL, 0);
}

void pg_announce_leave(pg_announce *a, st_id gid, st_id uid, uint64_t cseq)
{
    if (!cseq) {
        pg_announce_member(a, 'l', gid, uid, 0);
        return;
    }
    char h[16 + 2 * ST_MAX_ID + 32];
    int n =
        snprintf(h, sizeof(h), "l %.*s %.*s %" PRIu64, (int)gid.n, gid.p, (int)uid.n, uid.p, cseq);
    line(a, h, (size_t)n, NULL, 0);
}

void pg_announce_react(pg_announce *a, st_id gid, uint64_t mid, st_id uid, st_id key, bool on,
                       uint64_t count, uint64_t cseq)
{
    char h[16 + 2 * ST_MAX_ID + ST_REACT_KEY_MAX + 80];
    int n = snprintf(h, sizeof(h), "k %.*s %" PRIu64 " %.*s %d %" PRIu64 " %" PRIu64 " %.*s",
                     (int)gid.n, gid.p, mid, (int)uid.n, uid.p, on ? 1 : 0, count, cseq, (int)key.n,
                     key.p);
    line(a, h, (size_t)n, NULL, 0);
}

void pg_announce_changed(pg_announce *a, st_id gid, uint64_t cseq)
{
    char h[16 + ST_MAX_ID + 32];
    int n = snprintf(h, sizeof(h), "c %.*s %" PRIu64, (int)gid.n, gid.p, cseq);
    line(a, h, (size_t)n, NULL, 0);
}

void pg_announce_signout(pg_announce *a, st_id uid)
{
    char h[8 + ST_MAX_ID];
    int n = snprintf(h, sizeof(h), "s %.*s", (int)uid.n, uid.p);
    line(a, h, (size_t)n, NULL, 0);
}

void pg_announce_msg(pg_announce *a, st_id gid, uint64_t mid, uint64_t ts, const void *rec,
                     size_t n)
{
    char h[16 + ST_MAX_ID + 48];
    size_t b64_n = 4 * ((n + 2) / 3);
    /* Header line, this line's fields and the base64 must fit one payload. */
    bool fits = 40 + ST_MAX_ID + 48 + b64_n <= PAYLOAD_MAX;
    int hn = snprintf(h, sizeof(h), "%c %.*s %" PRIu64 " %" PRIu64 "%s", fits ? 'm' : 'h',
                      (int)gid.n, gid.p, mid, ts, fits ? " " : "");
    if (!fits) {
        a->hints++;
        line(a, h, (size_t)hn, NULL, 0);
        return;
    }
    unsigned char b64[PAYLOAD_MAX + 4];
    int bn = n ? EVP_EncodeBlock(b64, rec, (int)n) : 0;
    line(a, h, (size_t)hn, b64, (size_t)bn);
}

void pg_announce_version(pg_announce *a, st_id gid, uint64_t mid, const st_msg_row *m,
                         bool with_record)
{
    char h[16 + ST_MAX_ID + 96];
    size_t b64_n = 4 * ((m->record_n + 2) / 3);
    bool fits = with_record && 60 + ST_MAX_ID + 96 + b64_n <= PAYLOAD_MAX;
    int hn = snprintf(h, sizeof(h), "%c %.*s %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %" PRIu64 "%s",
                      fits ? 'e' : 'E', (int)gid.n, gid.p, mid, m->ver, m->ver_ts,
                      m->recalled ? 1 : 0, m->cseq, fits ? " " : "");
    if (!fits) {
        line(a, h, (size_t)hn, NULL, 0);
        return;
    }
    unsigned char b64[PAYLOAD_MAX + 4];
    int bn = m->record_n ? EVP_EncodeBlock(b64, m->record, (int)m->record_n) : 0;
    line(a, h, (size_t)hn, b64, (size_t)bn);
}

void pg_announce_hint(pg_announce *a, st_id gid, uint64_t lo, uint64_t hi)
{
    char h[16 + ST_MAX_ID + 56];
    int n = snprintf(h, sizeof(h), "h %.*s %" PRIu64 " 0 %" PRIu64, (int)gid.n, gid.p, hi, lo);
    line(a, h, (size_t)n, NULL, 0);
}

int pg_log_send(pg *p, pg_announce *log, int *n_stmts)
{
    payload_end(log);
    if (log->oom)
        return ST_ENOMEM;
    if (log->n == 0)
        return ST_OK;
    pg_buf arr = {0};
    pg_arr_begin(&arr, PG_OID_TEXT, log->n);
    for (size_t i = 0; i < log->n; i++)
        pg_arr_bytes(&arr, log->list[i].p, log->list[i].n);
    pg_buf *params[1] = {&arr};
    int rc = arr.oom ? ST_ENOMEM : pg_send(p, PG_LOG, params, 1);
    pg_buf_free(&arr);
    if (rc == ST_OK)
        (*n_stmts)++;
    return rc;
}

size_t pg_announce_pending(pg *p, pg_announce *a)
{
    payload_end(a);
    return a->n + p->n_late + p->owe_resync;
}

int pg_announce_send(pg *p, pg_announce *a, int *n_stmts, bool after)
{
    payload_end(a);
    p->late_sent = 0;
    p->resync_sent = false;
    if (a->oom)
        return ST_ENOMEM;
    if (a->n + p->n_late == 0 && !p->owe_resync)
        return ST_OK;
    pg_buf arr = {0};
    pg_arr_begin(&arr, PG_OID_TEXT, p->n_late + a->n + p->owe_resync);
    if (p->owe_resync) {
        char r[32];
        int rn = snprintf(r, sizeof(r), "gw1 %016" PRIx64 "\nr", p->origin);
        pg_arr_bytes(&arr, r, (size_t)rn);
    }
    for (size_t i = 0; i < p->n_late; i++) /* older: first */
        pg_arr_bytes(&arr, p->late[i].p, p->late[i].n);
    for (size_t i = 0; i < a->n; i++)
        pg_arr_bytes(&arr, a->list[i].p, a->list[i].n);
    pg_buf *params[1] = {&arr};
    int rc = arr.oom ? ST_ENOMEM : pg_send(p, after ? PG_NOTIFY_AFTER : PG_NOTIFY, params, 1);
    pg_buf_free(&arr);
    if (rc == ST_OK) {
        (*n_stmts)++;
        p->late_sent = p->n_late;
        p->resync_sent = p->owe_resync;
        p->announced += a->n;
        p->hints += a->hints;
    }
    return rc;
}

/* Late payloads kept at most (about 8 MB): past it the oldest go, and the listeners of
 * other gateways learn of those messages from the change log (an 'r' line makes them
 * catch up). */
#define LATE_MAX 1024

void pg_announce_done(pg *p, pg_announce *a, bool committed, bool sent)
{
    if (sent) {
        if (p->resync_sent)
            p->owe_resync = false;
        p->resync_sent = false;
        for (size_t i = 0; i < p->late_sent; i++)
            pg_buf_free(&p->late[i]);
        if (p->late_sent) /* p->late may be NULL: none ever kept */
            memmove(p->late, p->late + p->late_sent, (p->n_late - p->late_sent) * sizeof(*p->late));
        p->n_late -= p->late_sent;
        p->late_sent = 0;
        return;
    }
    p->late_sent = 0;
    p->resync_sent = false;
    if (!committed || a->n == 0)
        return; /* not committed: nothing of it to tell (the late ones wait on) */
    atomic_fetch_add(&p->late_total, 1);
    if (!st_room(&p->late, &p->cap_late, p->n_late + a->n, sizeof(*p->late), 16)) {
        p->owe_resync = true;
        atomic_fetch_add(&p->late_dropped, a->n);
        return;
    }
    for (size_t i = 0; i < a->n; i++) { /* moved: the batch's list forgets them */
        p->late[p->n_late++] = a->list[i];
        memset(&a->list[i], 0, sizeof(a->list[i]));
    }
    a->n = 0;
    if (p->n_late > LATE_MAX) {
        size_t drop = p->n_late - LATE_MAX;
        p->owe_resync = true; /* the listeners catch up from the change log instead */
        atomic_fetch_add(&p->late_dropped, drop);
        for (size_t i = 0; i < drop; i++)
            pg_buf_free(&p->late[i]);
        memmove(p->late, p->late + drop, LATE_MAX * sizeof(*p->late));
        p->n_late = LATE_MAX;
    }
}

/* ---- reading it back ------------------------------------------------------------------ */

/* The next space-separated field of [*at, end); false when there is none. */
static bool field(const char **at, const char *end, st_id *out)
{
    const char *s = *at;
    if (s >= end)
        return false;
    const char *e = memchr(s, ' ', (size_t)(end - s));
    if (!e)
        e = end;
    *out = (st_id){s, (size_t)(e - s)};
    *at = e < end ? e + 1 : e;
    return out->n > 0;
}

static bool number(const char **at, const char *end, uint64_t *v)
{
    st_id f;
    if (!field(at, end, &f) || f.n > 20)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] < '0' || f.p[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(f.p[i] - '0');
    }
    *v = x;
    return true;
}

/* One line into ch; record bytes are decoded into dec (room for the line's length). */
static bool parse_line(const char *s, const char *end, st_change *ch, unsigned char *dec)
{
    memset(ch, 0, sizeof(*ch));
    if (end - s == 1 && s[0] == 'r') {
        ch->kind = ST_CH_RESYNC;
        return true;
    }

    if (end - s < 2 || s[1] != ' ')
        return false;
    char k = s[0];
    const char *at = s + 2;
    if (k == 's') {
        ch->kind = ST_CH_SIGNOUT;
        return field(&at, end, &ch->uid) && st_id_ok(ch->uid) && at == end;
    }
    /* Signals (store.h): nothing stored. */
    if (k == 'o') {
        ch->kind = ST_CH_ONLINE;
        if (!field(&at, end, &ch->uid) || !st_id_ok(ch->uid) || !number(&at, end, &ch->ack) ||
            ch->ack > 1)
            return false;
        return ch->ack == 1 ? at == end : number(&at, end, &ch->ts) && at == end;
    }
    if (k == 'b' || k == 'q') {
        ch->kind = k == 'b' ? ST_CH_BEAT : ST_CH_ASK;
        return number(&at, end, &ch->ack) && at == end;
    }
    if (!field(&at, end, &ch->gid) || !st_id_ok(ch->gid))
        return false;
    switch (k) {
    case 't': ch->kind = ST_CH_TYPING; return field(&at, end, &ch->uid) && st_id_ok(ch->uid);
    case 'j':
    case 'a':
        ch->kind = k == 'j' ? ST_CH_JOIN : ST_CH_ACK;
        return field(&at, end, &ch->uid) && st_id_ok(ch->uid) && number(&at, end, &ch->ack);
    case 'v':
        ch->kind = ST_CH_READ;
        return field(&at, end, &ch->uid) && st_id_ok(ch->uid) && number(&at, end, &ch->read);
    case 'l':
        ch->kind = ST_CH_LEAVE;
        if (!field(&at, end, &ch->uid) || !st_id_ok(ch->uid))
            return false;
        return at == end || (number(&at, end, &ch->cseq) && ch->cseq > 0 && at == end);
    case 'c':
        ch->kind = ST_CH_CHANGED;
        return number(&at, end, &ch->cseq) && ch->cseq > 0 && at == end;
    case 'k': {
        ch->kind = ST_CH_REACT;
        uint64_t on = 0;
        if (!number(&at, end, &ch->mid) || ch->mid == 0 || !field(&at, end, &ch->uid) ||
            !st_id_ok(ch->uid) || !number(&at, end, &on) || on > 1 ||
            !number(&at, end, &ch->count) || !number(&at, end, &ch->cseq) || ch->cseq == 0)
            return false;
        ch->on = on == 1;
        /* The key: the rest of the line, as a reaction's key may be (store.h). */
        ch->key = (st_id){at, (size_t)(end - at)};
        return st_react_key_ok(ch->key.p, ch->key.n);
    }
    case 'E':
    case 'e':
    case 'h':
    case 'm': {
        ch->kind = k == 'e' || k == 'E' ? ST_CH_EDIT : ST_CH_MSG;
        if (!number(&at, end, &ch->mid) || ch->mid == 0)
            return false;
        uint64_t recalled = 0;
        if (ch->kind == ST_CH_EDIT &&
            (!number(&at, end, &ch->ver) || ch->ver == 0 || !number(&at, end, &ch->ts) ||
             !number(&at, end, &recalled) || recalled > 1))
            return false;
        /* The change's cseq: an 'E' of the change log of a release before it has none. */
        if (ch->kind == ST_CH_EDIT && !(k == 'E' && at == end) && !number(&at, end, &ch->cseq))
            return false;
        ch->recalled = recalled == 1;
        if (ch->kind == ST_CH_MSG && !number(&at, end, &ch->ts))
            return false;
        if (k == 'h' || k == 'E')
            return k == 'h' || at == end;
        size_t n = (size_t)(end - at);
        if (n % 4)
            return false;
        int d = n ? EVP_DecodeBlock(dec, (const unsigned char *)at, (int)n) : 0;
        if (d < 0)
            return false;
        /* EVP_DecodeBlock counts the padding's zero bytes too. */
        size_t pad = n && at[n - 1] == '=' ? (n > 1 && at[n - 2] == '=' ? 2 : 1) : 0;
        ch->record = dec;
        ch->record_n = (size_t)d - pad;
        return true;
    }
    default: return false;
    }
}

/* "LIST PART PARTS UID..." (after "O "): a LISTED change a user, or one with no user for
 * a part without any. */
static bool parse_listing(const char *at, const char *end, st_change *out, size_t max,
                          size_t *n_out)
{
    uint64_t list, part, parts;
    if (!number(&at, end, &list) || !number(&at, end, &part) || !number(&at, end, &parts) ||
        part >= parts)
        return false;
    st_change c = {.kind = ST_CH_LISTED, .mid = list, .ack = part, .ts = parts};
    if (at == end && *n_out < max)
        out[(*n_out)++] = c;
    while (at < end && *n_out < max) {
        if (!field(&at, end, &c.uid) || !st_id_ok(c.uid))
            return false;
        out[(*n_out)++] = c;
    }
    return true;
}

int pg_announce_parse(const char *payload, size_t len, uint64_t own_origin, st_change *out,
                      size_t max, unsigned char *dec, size_t *n_out)
{
    *n_out = 0;
    const char *end = payload + len, *s = payload;
    const char *nl = memchr(s, '\n', len);
    const char *hend = nl ? nl : end;
    char hex[17];
    if (hend - s != 20 || memcmp(s, "gw1 ", 4) != 0)
        return ST_EINVAL;
    memcpy(hex, s + 4, 16);
    hex[16] = 0;
    char *e = NULL;
    uint64_t origin = strtoull(hex, &e, 16);
    if (!e || *e)
        return ST_EINVAL;
    if (origin == own_origin)
        return 1; /* this store's own: its completions told already */
    s = nl ? nl + 1 : end;
    while (s < end && *n_out < max) {
        const char *le = memchr(s, '\n', (size_t)(end - s));
        if (!le)
            le = end;
        if (le - s > 2 && s[0] == 'O' && s[1] == ' ') {
            if (!parse_listing(s + 2, le, out, max, n_out))
                return ST_EINVAL;
        } else {
            if (!parse_line(s, le, &out[*n_out], dec))
                return ST_EINVAL;
            if (out[*n_out].record)
                dec += out[*n_out].record_n;
            (*n_out)++;
        }
        s = le < end ? le + 1 : le;
    }
    for (size_t i = 0; i < *n_out; i++)
        out[i].origin = origin;
    return ST_OK;
}
