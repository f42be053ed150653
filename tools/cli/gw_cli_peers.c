/* gw_cli receipts GID MID and gw_cli who GID: what the members of a group see of each
 * other (docs/PROTOCOL.md, Receipts and presence); gw_cli edit GID MID TEXT and gw_cli
 * recall GID MID: a message's later versions (Edits and recalls). One request each. */
#include "gw_cli.h"

#include <stdlib.h>
#include <string.h>

int cli_cmd_receipts(cli *c, const char *gid, uint64_t mid)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t rid = ++c->next_rid;
    pr_enc_receipts_req(&sb, rid, cli_slice(gid), mid);
    pr_event ev;
    int rc = cli_request(c, &sb, rid, PR_EV_RECEIPTS, gid, &ev);
    msgpack_sbuffer_destroy(&sb);
    if (rc)
        return CLI_EXIT_FAIL;
    out_receipts(c, &ev);
    return out_flush() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_cmd_who(cli *c, const char *gid)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t rid = ++c->next_rid;
    pr_enc_presence_req(&sb, rid, cli_slice(gid), -1);
    pr_event ev;
    int rc = cli_request(c, &sb, rid, PR_EV_PRESENCE, gid, &ev);
    msgpack_sbuffer_destroy(&sb);
    if (rc)
        return CLI_EXIT_FAIL;
    out_presence(c, &ev, (uint64_t)cli_wall_ms());
    return out_flush() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_cmd_edit(cli *c, const char *gid, uint64_t mid, const char *text)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t rid = ++c->next_rid;
    bool recall = text == NULL;
    if (recall)
        pr_enc_recall(&sb, rid, cli_slice(gid), mid);
    else /* no ver: the next version, whichever it is */
        pr_enc_edit(&sb, rid, cli_slice(gid), mid, 0, (pr_body){cli_slice(text), false});
    pr_event ev;
    int rc = cli_request(c, &sb, rid, recall ? PR_EV_RECALLED : PR_EV_EDITED, gid, &ev);
    msgpack_sbuffer_destroy(&sb);
    if (rc)
        return CLI_EXIT_FAIL;
    out_message(c, ev.gid, &ev.msg);
    return out_flush() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
