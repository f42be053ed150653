/*
 * The load generator's report (tools/gw_load's last line, JSON: {"sends":N,...}) as the
 * tests that run it read it: tests/gateway/test_load.c and tests/tools/test_floor.c.
 */
#ifndef GW_TEST_LOADREPORT_H
#define GW_TEST_LOADREPORT_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* The whole number under "name" in report; fails the test when there is none. */
static inline unsigned long loadreport_field(const char *report, const char *name)
{
    char key[64];
    unsigned long v = 0;
    snprintf(key, sizeof(key), "\"%s\":", name);
    const char *p = strstr(report, key);
    cr_assert(p && sscanf(p + strlen(key), "%lu", &v) == 1, "no %s in: %s", name, report);
    return v;
}

#endif
