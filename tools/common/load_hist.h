/* A log-linear latency histogram (about 3% resolution), fixed size, no allocation. */
#ifndef GW_LOAD_HIST_H
#define GW_LOAD_HIST_H

#include <stdint.h>

#define LOAD_HIST_BUCKETS (64 + 40 * 32)

typedef struct load_hist {
    uint64_t n[LOAD_HIST_BUCKETS];
    uint64_t count;
    int64_t max;
} load_hist;

/* Adds one value (microseconds; negative counts as 0). */
void load_hist_add(load_hist *h, int64_t us);
/* The value at quantile q (0..1), in microseconds; 0 when empty. */
int64_t load_hist_quantile(const load_hist *h, double q);

#endif
