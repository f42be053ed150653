/* The rank multiset (core/gw_rank.c) against a brute-force count: random adds and
 * removes of bunched values (as cursors bunch near the last message), and every count of
 * "at least v" checked after each step. */
#include "gw_core.h"

#include <criterion/criterion.h>
#include <stdlib.h>

#define N_VALUES 2000
#define MAX_VALUE 300

static size_t brute(const uint64_t *v, size_t n, uint64_t x)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += v[i] >= x;
    return c;
}

Test(rank, counts_what_is_at_least_v_through_adds_and_removes)
{
    gw_rank *r = gw_rank_new();
    cr_assert_not_null(r);
    static uint64_t v[N_VALUES];
    size_t n = 0;
    srand(7);
    for (int step = 0; step < 20000; step++) {
        if (n < N_VALUES && (n == 0 || rand() % 3)) {
            /* Most values near the top, some far behind. */
            uint64_t x =
                rand() % 4 ? MAX_VALUE - (uint64_t)(rand() % 20) : (uint64_t)(rand() % MAX_VALUE);
            cr_assert_eq(gw_rank_add(r, x), 0);
            v[n++] = x;
        } else {
            size_t i = (size_t)rand() % n;
            gw_rank_remove(r, v[i]);
            v[i] = v[--n];
        }
        cr_assert_eq(gw_rank_count(r), n);
        uint64_t x = (uint64_t)(rand() % (MAX_VALUE + 2));
        cr_assert_eq(gw_rank_at_least(r, x), brute(v, n, x), "step %d, at least %llu", step,
                     (unsigned long long)x);
    }
    for (uint64_t x = 0; x <= MAX_VALUE + 1; x++)
        cr_assert_eq(gw_rank_at_least(r, x), brute(v, n, x));
    gw_rank_remove(r, MAX_VALUE + 100); /* not there: nothing changes */
    cr_assert_eq(gw_rank_count(r), n);
    gw_rank_free(r);
}
