/*
 * gw_cli changes and react: what changed in a group after a change cursor (cseq), and a
 * reaction set or cleared (docs/PROTOCOL.md, Changes and reactions). A script that keeps
 * messages calls `changes --after CURSOR`, applies each message printed (its state now)
 * and keeps the `upto` of the last line as its next cursor.
 */
#include "gw_cli.h"

#include <stdlib.h>
#include <string.h>

#define CHANGES_PAGES_MAX 100000 /* a bound on the walk: 500 a page, 50 million changes */

int cli_cmd_changes(cli *c, const char *gid)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t after = c->o.has_after ? c->o.after : 0;
    int rc = CLI_EXIT_OK;
    for (int page = 0; page < CHANGES_PAGES_MAX; page++) {
        uint64_t rid = ++c->next_rid;
        msgpack_sbuffer_clear(&sb);
        pr_enc_changes_req(&sb, rid, cli_slice(gid), after, c->o.limit);
        pr_event ev;
        if (cli_request(c, &sb, rid, PR_EV_CHANGES, gid, &ev)) {
            rc = CLI_EXIT_FAIL;
            break;
        }
        for (size_t i = 0; i < ev.n_items; i++) {
            pr_message m;
            if (pr_event_message(&ev, i, &m) == 0)
                out_message(c, ev.gid, &m);
        }
        if (ev.changes_gone_before)
            cli_err("the change log of %s begins after cseq %llu now: read the messages you "
                    "hold again (pull), then go on after last_cseq %llu",
                    gid, (unsigned long long)ev.changes_gone_before - 1,
                    (unsigned long long)ev.last_cseq);
        bool more = ev.more && !ev.changes_gone_before && ev.upto > after;
        after = ev.upto;
        if (!more) {
            out_changes_end(c, ev.gid, &ev);
            break;
        }
        if (out_flush()) {
            rc = CLI_EXIT_FAIL;
            break;
        }
    }
    msgpack_sbuffer_destroy(&sb);
    if (out_flush())
        return CLI_EXIT_FAIL;
    return rc;
}

int cli_cmd_react(cli *c, const char *gid, uint64_t mid, const char *key)
{
    if (cli_open_or_say(c))
        return CLI_EXIT_FAIL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t rid = ++c->next_rid;
    pr_enc_react(&sb, rid, cli_slice(gid), mid, cli_slice(key), !c->o.off);
    pr_event ev;
    int rc = cli_request(c, &sb, rid, PR_EV_REACTED, gid, &ev);
    msgpack_sbuffer_destroy(&sb);
    if (rc)
        return CLI_EXIT_FAIL;
    out_reacted(c, &ev);
    return out_flush() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
