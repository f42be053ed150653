/*
 * The harnesses of tools/ (gw_crash, gw_converge: next to the gw binary under test) run
 * from a test: their output read line by line, their summary line kept, and the figures
 * in it read back ("... 3 kills, 0 lost messages, ...").
 */
#ifndef GW_TEST_HARNESS_H
#define GW_TEST_HARNESS_H

#include "pgfx.h"

#include <stddef.h>

/* Runs build/tools/<tool> --gw <the gw binary> extra; returns its exit status (128 + the
 * signal if one ended it). The last line starting with one of summary (NULL-terminated)
 * is copied into last ("" when none came). Lines starting with quiet are dropped; the
 * last others are logged as errors only when the status is not expect, as an error log
 * makes Criterion exit non-zero even when every test passed. */
int harness_run(const char *tool, const char *extra, int expect, const char *const *summary,
                const char *quiet, char *last, size_t last_n);
/* The figure just before `what` in a summary line ("... 3 kills" for " kills"); fails
 * the test when `what` is not in it. */
unsigned long harness_figure(const char *last, const char *what);
/* Patroni over etcd for a harness run, stopped by harness_ha_stop (a test's .fini: also
 * after a failed assertion). */
extern pgfx_ha harness_ha;
/* Skips the test outside the suite's PostgreSQL pass and in the sanitizer build (the
 * normal build's PostgreSQL pass runs it: why_long says what takes long); otherwise
 * starts harness_ha and returns a new database on it (malloc'd). */
char *harness_ha_db(const char *why_long);
void harness_ha_stop(void);

#endif
