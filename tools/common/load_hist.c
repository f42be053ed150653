#include "load_hist.h"

/* Values below 64 get a bucket each; above, each power of two is cut into 32 buckets. */
static int bucket(uint64_t v)
{
    if (v < 64)
        return (int)v;
    int e = 63 - __builtin_clzll(v); /* >= 6 */
    int sub = (int)((v >> (e - 5)) & 31);
    int i = 64 + (e - 6) * 32 + sub;
    return i < LOAD_HIST_BUCKETS ? i : LOAD_HIST_BUCKETS - 1;
}

/* The middle of bucket i. */
static int64_t value_of(int i)
{
    if (i < 64)
        return i;
    int e = (i - 64) / 32 + 6, sub = (i - 64) % 32;
    uint64_t lo = ((uint64_t)32 + (uint64_t)sub) << (e - 5);
    return (int64_t)(lo + ((uint64_t)1 << (e - 5)) / 2);
}

void load_hist_add(load_hist *h, int64_t us)
{
    uint64_t v = us < 0 ? 0 : (uint64_t)us;
    h->n[bucket(v)]++;
    h->count++;
    if ((int64_t)v > h->max)
        h->max = (int64_t)v;
}

int64_t load_hist_quantile(const load_hist *h, double q)
{
    if (!h->count)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->count);
    if (want >= h->count)
        want = h->count - 1;
    uint64_t seen = 0;
    for (int i = 0; i < LOAD_HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen > want)
            return value_of(i) < h->max ? value_of(i) : h->max;
    }
    return h->max;
}
