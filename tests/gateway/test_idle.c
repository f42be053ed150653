/*
 * Idle sessions: the gateway pings them at the WebSocket level; one that answers stays,
 * one that stops answering (here: stops reading its socket) is closed.
 */
#include "gwfx.h"

#include <criterion/criterion.h>

static gwfx f;

static void setup(void)
{
    /* Ping after 2 s: a live client then has at least a second (one sweep) to answer,
     * which a loaded test machine needs. */
    static const char *const args[] = {"--ping", "2", NULL};
    gwfx_start(&f, args);
}

static void teardown(void)
{
    gwfx_cleanup(&f);
}

TestSuite(idle, .init = setup, .fini = teardown, .timeout = 60);

Test(idle, silent_sessions_are_closed_live_ones_stay)
{
    gwc_conn *live = gwfx_login(&f, "live", NULL);
    gwc_conn *gone = gwfx_login(&f, "gone", NULL);
    cr_assert_eq(gwc_pause(gone, true), 0);
    /* Ping after 2 s idle, hang up after 4 s without a pong (checked once a second): wait
     * well past that while the live session's loop keeps answering pings. */
    gwc_service(f.ctx, 8000);
    cr_assert_eq(gwc_pause(gone, false), 0);
    gwc_service(f.ctx, 500);
    cr_assert_not(gwc_is_open(gone), "a session that never answered pings is still open");
    cr_assert(gwc_is_open(live), "a session that answers pings was closed");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_ping(&sb, 1);
    gwfx_request(live, &sb, PR_EV_PONG);
    msgpack_sbuffer_destroy(&sb);
}
