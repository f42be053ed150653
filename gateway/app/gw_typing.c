/*
 * Typing (app_internal.h; docs/PROTOCOL.md, Typing): `typing {gid}` of a member goes to
 * the group's other online members, on this service thread, the process's others (the
 * hub) and the other nodes (a signal: a NOTIFY that stores nothing), and is never stored.
 * A receiver forgets it after its ttl_ms (5 s) unless another comes.
 *
 * At most one per user and group per GW_TYPING_EVERY_MS (whichever of the user's sessions
 * types: groups/ keeps the time on the membership), and a session's typing across all its
 * groups within GW_TYPING_RATE a second (session/): more are dropped without an error (a
 * client that sends one a keystroke is not wrong, only eager), and counted, before
 * anything is told to anyone (no hub message, no signal to the store). What is told is
 * then pushed to each session within its outbound budget (session/, gw_out_push).
 */
#include "app_internal.h"

#include <stdio.h>
#include <string.h>

void gw_typing_request(gw_app *a, gw_sess *s, const pr_req *r)
{
    app_sess *as = gw_sess_ext(s);
    a->figs.typing_received++;
    if (!gw_registry_member(&as->seat, r->gid, NULL)) {
        const char *msg = "not a member of this group";
        gw_sess_error(s, r->rid, gw_route_not_member(s, &msg), msg, r->gid);
        return;
    }
    /* The group's limit first: a typing it drops costs the session's rate nothing. */
    if (!gw_registry_typing_due(&as->seat, r->gid, gw_mono_ms()) || !gw_throttle_typing(s)) {
        a->figs.typing_dropped++;
        return;
    }
    char gid[PR_MAX_ID + 1];
    snprintf(gid, sizeof(gid), "%.*s", (int)r->gid.n, r->gid.p);
    const char *uid = gw_sess_uid(s);
    a->figs.typing_pushes += gw_registry_typing(a->d.registry, gid, uid);
    if (a->d.hub) {
        gw_hub_tell_typing(a->d.hub, a->d.thread, gid, uid);
        gw_presence_typing(gw_hub_presence(a->d.hub), gid, uid);
    }
}
