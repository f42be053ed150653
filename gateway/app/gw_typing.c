/*
 * Typing (app_internal.h; docs/PROTOCOL.md, Typing): `typing {gid}` of a member goes to
 * the group's other online members, on this service thread, the process's others (the
 * hub) and the other nodes (a signal: a NOTIFY that stores nothing), and is never stored.
 * A receiver forgets it after its ttl_ms (5 s) unless another comes.
 *
 * At most one a session and group per TYPING_EVERY_MS: more are dropped without an error
 * (a client that sends one a keystroke is not wrong, only eager), and counted. The last
 * groups typed in are kept per session (TYPING_SLOTS); a session typing in more at once
 * is rate-limited per slot.
 */
#include "app_internal.h"

#include <stdio.h>
#include <string.h>

#define TYPING_EVERY_MS 2000

/* The slot of gid in the session's table: its own, or the oldest. */
static struct typed *slot_of(app_sess *as, const char *gid, uint32_t h, bool *mine)
{
    struct typed *oldest = &as->typed[0];
    for (size_t i = 0; i < TYPING_SLOTS; i++) {
        if (as->typed[i].hash == h && as->typed[i].at_ms) {
            *mine = true;
            return &as->typed[i];
        }
        if (as->typed[i].at_ms < oldest->at_ms)
            oldest = &as->typed[i];
    }
    (void)gid;
    *mine = false;
    return oldest;
}

static uint32_t hash_of(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a: a slot's key, no more */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h ? h : 1;
}

void gw_typing_request(gw_app *a, gw_sess *s, const pr_req *r)
{
    app_sess *as = gw_sess_ext(s);
    a->figs.typing_received++;
    if (!gw_registry_member(&as->seat, r->gid, NULL)) {
        gw_sess_error(s, r->rid, PR_E_NOT_MEMBER, "not a member of this group", r->gid);
        return;
    }
    char gid[PR_MAX_ID + 1];
    snprintf(gid, sizeof(gid), "%.*s", (int)r->gid.n, r->gid.p);
    uint64_t now = gw_mono_ms();
    uint32_t h = hash_of(gid);
    bool mine = false;
    struct typed *t = slot_of(as, gid, h, &mine);
    if (mine && now - t->at_ms < TYPING_EVERY_MS) {
        a->figs.typing_dropped++;
        return;
    }
    t->hash = h;
    t->at_ms = now;
    const char *uid = gw_sess_uid(s);
    a->figs.typing_pushes += gw_registry_typing(a->d.registry, gid, uid);
    if (a->d.hub) {
        gw_hub_tell_typing(a->d.hub, a->d.thread, gid, uid);
        gw_presence_typing(gw_hub_presence(a->d.hub), gid, uid);
    }
}
