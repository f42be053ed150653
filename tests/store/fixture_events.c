#include "fixture_events.h"
#include "fixture.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <unistd.h>

static void on_event(void *ud, const st_event *ev)
{
    fx_events *e = ud;
    if (ev->kind == ST_EV_WRITE_FAILED)
        atomic_fetch_add(&e->failed, 1);
    else if (ev->kind == ST_EV_STILL_FAILING)
        atomic_fetch_add(&e->still, 1);
    else if (ev->kind == ST_EV_RECOVERED)
        atomic_fetch_add(&e->recovered, 1);
}

st_store *fx_open_events(const char *where, fx_events *e)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.on_event = on_event;
    o.event_ud = e;
    return fx_open_options(&o);
}

bool fx_wait_count(atomic_int *count, int n, long ms)
{
    long t0 = tclock_ms();
    while (atomic_load(count) < n && tclock_since(t0) < ms)
        usleep(20 * 1000);
    return atomic_load(count) >= n;
}
