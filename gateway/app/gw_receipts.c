/*
 * The receipts of a message, said (app_internal.h): "delivered to 9, read by 7 of 12"
 * from the group's roster (cluster/gw_roster.c), and for a group of at most
 * --receipt-list-max members who read it. A `receipts` answer (gw_peers.c) and a watch's
 * push in a large group (gw_watch.c) are both made here.
 */
#include "app_internal.h"

#include <stdio.h>

static gw_roster *roster(gw_app *a)
{
    return gw_hub_roster(a->d.hub);
}

typedef struct readers {
    msgpack_sbuffer *sb;
    int rc;
} readers;

static void add_reader(void *ud, const char *uid)
{
    readers *rd = ud;
    rd->rc = rd->rc ? rd->rc : pr_enc_uid_entry(rd->sb, gw_cstr(uid));
}

int gw_peers_enc_receipt(gw_app *a, const char *gid, uint64_t mid, uint64_t rid,
                         msgpack_sbuffer *sb)
{
    gw_receipt rc;
    size_t max = a->d.cfg->receipt_list_max;
    if (!gw_roster_receipt(roster(a), gid, mid, &rc, max, NULL, NULL))
        return -1;
    bool list = rc.of <= max;
    size_t start = sb->size;
    int e = pr_enc_receipts_begin(sb, rid, gw_cstr(gid), mid, rc.delivered, rc.read, rc.of,
                                  list ? rc.read : SIZE_MAX);
    if (e || !list)
        return e;
    /* The readers, walked under the roster's lock once more: if a cursor moved in between,
     * the count above is not theirs, and the whole is made again. */
    readers rd = {sb, 0};
    gw_receipt again;
    if (!gw_roster_receipt(roster(a), gid, mid, &again, max, add_reader, &rd))
        return -1;
    if (again.read != rc.read || again.of != rc.of) {
        sb->size = start;
        return gw_peers_enc_receipt(a, gid, mid, rid, sb);
    }
    return rd.rc;
}
