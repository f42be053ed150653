/*
 * load_raw: --raw, a peer server for side-by-side figures (no protocol v1). Every
 * receiving session subscribes at --raw URL, the senders publish at --raw-pub URL; any
 * frame a subscriber gets is a delivery, timed by the due time its first 16 bytes hold
 * in hex. A peer confirms nothing: flat out keeps --window frames in flight as seen by
 * the first subscriber.
 */
#include "load_run.h"

#include <stdlib.h>
#include <string.h>

static void on_frame(load_sess *s, const uint8_t *f, size_t n)
{
    if (s->sender)
        return; /* a mirror also echoes to the publisher: not a delivery */
    load_run *r = s->run;
    char hex[17];
    if (n < 16)
        return;
    memcpy(hex, f, 16);
    hex[16] = 0;
    for (int i = 0; i < 16; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) {
            r->st.gaps++; /* not one of ours: a peer split or merged frames */
            return;
        }
    r->st.deliveries++;
    r->last_delivery_ns = load_now_ns();
    if (s->id == 0)
        r->raw_first_received++;
    load_hist_add(&r->st.lat, (load_now_ns() - (int64_t)strtoull(hex, NULL, 16)) / 1000);
}

static void send_raw(load_sess *s, int64_t meant_ns)
{
    load_run *r = s->run;
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)meant_ns);
    load_vary_body(r, r->body);
    memcpy(r->body, hex, 16);
    if (lw_send(s->k, r->body, (size_t)r->cfg->body, true) != 0)
        r->st.errors++;
    r->st.sends++;
    r->st.confirmed++; /* no confirmation from a peer: a send is a send */
}

/* The window is what the first subscriber has not received yet. */
static void flat_out(load_run *r)
{
    const load_cfg *cfg = r->cfg;
    for (int i = 0; cfg->sessions && r->st.sends - r->raw_first_received < (uint64_t)cfg->window &&
                    (!cfg->count || r->st.sends < (uint64_t)cfg->count);
         i = (i + 1) % cfg->senders)
        send_raw(&r->ss[cfg->sessions + i], load_now_ns());
}

static bool in_flight(const load_run *r)
{
    return r->raw_first_received < r->st.sends;
}

int load_raw(const load_cfg *cfg)
{
    const load_mode mode = {.subprotocol = cfg->raw_proto,
                            .on_frame = on_frame,
                            .send = send_raw,
                            .flat_out = flat_out,
                            .in_flight = in_flight};
    return load_run_sessions(cfg, &mode);
}
