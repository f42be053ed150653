/*
 * Retention's rules (store.h, Retention), written once for both backends: which horizon a
 * group's retention asks for, from what the backend reads of it (its first and last mid,
 * the first message young enough to keep, its members' lowest ack). The backends read
 * those and delete below the horizon (store_rocks_trim.c, store_pg_trim.c).
 */
#include "store_internal.h"

st_retain st_retain_of(const st_retain *own, const st_retain *dflt)
{
    st_retain e = *dflt;
    if (own->messages)
        e.messages = own->messages;
    if (own->ms)
        e.ms = own->ms;
    if (own->cap)
        e.cap = own->cap;
    if (own->until_acked != ST_ACKED_DEFAULT)
        e.until_acked = own->until_acked;
    return e;
}

static bool limited(uint64_t v)
{
    return v != 0 && v != ST_KEEP_ALL;
}

bool st_retain_by_age(const st_retain *eff)
{
    return limited(eff->ms);
}

bool st_retain_by_acks(const st_retain *eff)
{
    return eff->until_acked == ST_ACKED_ON;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

uint64_t st_retain_horizon(const st_retain *eff, uint64_t first_mid, uint64_t last_mid,
                           uint64_t young, uint64_t min_ack)
{
    if (first_mid < 1)
        first_mid = 1;
    uint64_t h = first_mid;
    bool limits = limited(eff->messages) || st_retain_by_age(eff);
    /* What the count and the age let go (a message goes when either says so). */
    if (limited(eff->messages) && last_mid > eff->messages)
        h = max64(h, last_mid - eff->messages + 1);
    if (st_retain_by_age(eff))
        h = max64(h, young);
    /* Until acked: what some member still lacks stays, up to the cap; alone (no count, no
     * age), a message goes once every member has acked it. */
    if (st_retain_by_acks(eff)) {
        uint64_t acked = max64(min_ack + 1, first_mid);
        if (!limits || h > acked)
            h = acked;
        if (limited(eff->cap) && last_mid > eff->cap)
            h = max64(h, last_mid - eff->cap + 1);
    }
    if (h > last_mid + 1)
        h = last_mid + 1;
    if (h - first_mid > ST_TRIM_STEP)
        h = first_mid + ST_TRIM_STEP; /* the next pass goes on */
    return h;
}
