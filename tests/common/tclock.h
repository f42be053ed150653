/*
 * The tests' clock: milliseconds on CLOCK_MONOTONIC, for deadlines and for how long
 * something took (it does not jump when the wall clock is set). Header only, so every
 * test binary has it without building anything more.
 */
#ifndef GW_TEST_TCLOCK_H
#define GW_TEST_TCLOCK_H

#include <time.h>

/* Now, in ms since an arbitrary start: compare only with other values of it. */
static inline long tclock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Milliseconds since t0, a value of tclock_ms(). */
static inline long tclock_since(long t0)
{
    return tclock_ms() - t0;
}

#endif
