/* libFuzzer target: the change feed's payloads (store_pg_events.c), which come from the
 * database, written by other gateways (of this build or another). Any input is a
 * payload: none may crash the parser, every change it reads must be well formed, and
 * what it reads, announced again, must read back the same. */
#include "store_pg.h"

#include <stdlib.h>
#include <string.h>

#define MAX 1024

static bool same_id(st_id a, st_id b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    /* A notification's payload is a NUL-terminated string under 8000 bytes. */
    if (n >= 8000 || memchr(d, 0, n))
        return 0;
    static st_change ch[MAX], back[MAX];
    static unsigned char dec[8192], dec2[8192];
    size_t k = 0, k2 = 0;
    int rc = pg_announce_parse((const char *)d, n, 0, ch, MAX, dec, &k);
    if (rc == 1 || rc == ST_EINVAL)
        return 0;
    if (rc != ST_OK)
        abort();
    pg_announce a = {0};
    pg_announce_reset(&a, 1);
    /* An 'r' line (no ids) and the signals (presence, typing: ST_OP_SIGNAL) are not
     * announced again by a batch: a payload with one is not read back. */
    bool resync = false;
    for (size_t i = 0; i < k; i++) {
        const st_change *c = &ch[i];
        if (c->kind == ST_CH_RESYNC || c->kind == ST_CH_BEAT || c->kind == ST_CH_ASK) {
            if (c->gid.n || c->uid.n || c->record)
                abort();
            resync = true;
            continue;
        }
        if (c->kind == ST_CH_ONLINE || c->kind == ST_CH_LISTED) {
            /* a part of a listing may name nobody */
            if (c->gid.n || c->record || (c->kind == ST_CH_ONLINE && !st_id_ok(c->uid)) ||
                (c->uid.n && !st_id_ok(c->uid)))
                abort();
            resync = true;
            continue;
        }
        /* a message's, a group's changes */
        bool no_uid = c->kind == ST_CH_MSG || c->kind == ST_CH_EDIT || c->kind == ST_CH_CHANGED;
        if ((c->kind != ST_CH_SIGNOUT && !st_id_ok(c->gid)) || (no_uid && c->uid.n) ||
            (!no_uid && !st_id_ok(c->uid)) || (c->kind == ST_CH_EDIT && (!c->mid || !c->ver)) ||
            (c->kind == ST_CH_CHANGED && !c->cseq) ||
            (c->kind == ST_CH_REACT &&
             (!c->mid || !c->cseq || !st_react_key_ok(c->key.p, c->key.n))) ||
            (c->kind != ST_CH_REACT && c->key.n))
            abort();
        if (c->kind == ST_CH_TYPING) {
            resync = true;
            continue;
        }
        if (c->record && c->record_n > n)
            abort();
        if (c->kind == ST_CH_SIGNOUT)
            pg_announce_signout(&a, c->uid);
        else if (c->kind == ST_CH_MSG)
            pg_announce_msg(&a, c->gid, c->mid, c->ts, c->record ? c->record : "", c->record_n);
        else if (c->kind == ST_CH_EDIT) /* the same line again: with its record or without */
            pg_announce_version(&a, c->gid, c->mid,
                                &(st_msg_row){.ver = c->ver,
                                              .ver_ts = c->ts,
                                              .recalled = c->recalled,
                                              .record = c->record ? c->record : "",
                                              .record_n = c->record_n,
                                              .cseq = c->cseq},
                                c->record != NULL);
        else if (c->kind == ST_CH_REACT)
            pg_announce_react(&a, c->gid, c->mid, c->uid, c->key, c->on, c->count, c->cseq);
        else if (c->kind == ST_CH_CHANGED)
            pg_announce_changed(&a, c->gid, c->cseq);
        else if (c->kind == ST_CH_LEAVE)
            pg_announce_leave(&a, c->gid, c->uid, c->cseq);
        else
            pg_announce_member(&a,
                               c->kind == ST_CH_JOIN   ? 'j'
                               : c->kind == ST_CH_ACK  ? 'a'
                               : c->kind == ST_CH_READ ? 'v'
                                                       : 'l',
                               c->gid, c->uid, c->kind == ST_CH_READ ? c->read : c->ack);
    }
    /* Announced again, it reads back the same (when it fits one payload: a hint comes
     * back as a message with an empty record, which the check allows). */
    if (!resync && a.n == 0 && a.cur_changes == k) {
        pg_buf *c = &a.cur;
        if (pg_announce_parse(c->p, c->n, 0, back, MAX, dec2, &k2) != ST_OK || k2 != k)
            abort();
        for (size_t i = 0; i < k; i++) {
            if (back[i].kind != ch[i].kind || !same_id(back[i].gid, ch[i].gid) ||
                back[i].mid != ch[i].mid || back[i].ack != ch[i].ack ||
                back[i].read != ch[i].read || back[i].ver != ch[i].ver ||
                back[i].recalled != ch[i].recalled || back[i].ts != ch[i].ts ||
                back[i].cseq != ch[i].cseq || back[i].count != ch[i].count ||
                back[i].on != ch[i].on || !same_id(back[i].key, ch[i].key) ||
                (ch[i].kind != ST_CH_MSG && !same_id(back[i].uid, ch[i].uid)))
                abort();
            if (ch[i].record && (back[i].record_n != ch[i].record_n ||
                                 memcmp(back[i].record, ch[i].record, ch[i].record_n) != 0))
                abort();
        }
    }
    pg_announce_free(&a);
    return 0;
}
