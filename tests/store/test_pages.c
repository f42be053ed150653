/* Pages after and before a mid: bounded, ascending, with `more` right at both ends. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FX_STORE_SUITE_FILLED(pages, false);

static void fx_suite_fill(void)
{
    fx_join(s, "empty", "a");
    fx_join(s, "g", "a");
    fx_append_n(s, "g", "a", "m", 1, 25);
}

/* Reads a page and checks it holds exactly mids lo..hi with their records, and more. */
static void expect(const char *gid, enum st_dir dir_, uint64_t from, size_t limit, uint64_t lo,
                   uint64_t hi, bool more)
{
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str(gid), dir_, from, limit, &p), 0);
    size_t n = hi >= lo ? (size_t)(hi - lo + 1) : 0;
    cr_assert_eq(st_page_count(p), n, "%s from %lu limit %zu: %zu messages, expected %zu",
                 dir_ == ST_AFTER ? "after" : "before", (unsigned long)from, limit,
                 st_page_count(p), n);
    for (size_t i = 0; i < n; i++) {
        const st_msg *m = st_page_at(p, i);
        char want[16];
        snprintf(want, sizeof(want), "m%lu", (unsigned long)(lo + i));
        cr_assert_eq(m->mid, lo + i);
        cr_assert_eq(m->record_n, strlen(want));
        cr_assert_arr_eq(m->record, want, m->record_n);
        cr_assert_gt(m->ts, 0);
    }
    cr_assert_eq(st_page_more(p), more, "%s from %lu limit %zu: more",
                 dir_ == ST_AFTER ? "after" : "before", (unsigned long)from, limit);
    cr_assert_null(st_page_at(p, n));
    st_page_free(p);
}

Test(pages, after)
{
    expect("g", ST_AFTER, 0, 10, 1, 10, true);
    expect("g", ST_AFTER, 10, 10, 11, 20, true);
    expect("g", ST_AFTER, 20, 10, 21, 25, false);
    expect("g", ST_AFTER, 15, 10, 16, 25, false); /* exactly limit left */
    expect("g", ST_AFTER, 14, 10, 15, 24, true);  /* one more than limit left */
    expect("g", ST_AFTER, 25, 10, 1, 0, false);   /* nothing after the last */
    expect("g", ST_AFTER, 99, 10, 1, 0, false);   /* past the end */
    expect("g", ST_AFTER, 0, 500, 1, 25, false);
}

Test(pages, before)
{
    expect("g", ST_BEFORE, 26, 10, 16, 25, true);
    expect("g", ST_BEFORE, 16, 10, 6, 15, true);
    expect("g", ST_BEFORE, 6, 10, 1, 5, false);
    expect("g", ST_BEFORE, 11, 10, 1, 10, false); /* exactly limit left */
    expect("g", ST_BEFORE, 12, 10, 2, 11, true);  /* one more than limit left */
    expect("g", ST_BEFORE, 1, 10, 1, 0, false);   /* nothing below the first */
    expect("g", ST_BEFORE, 0, 10, 1, 0, false);
    expect("g", ST_BEFORE, 1000, 5, 21, 25, true); /* from past the end: the newest */
}

Test(pages, empty_group)
{
    expect("empty", ST_AFTER, 0, 100, 1, 0, false);
    expect("empty", ST_BEFORE, 1, 100, 1, 0, false);
    st_page *p;
    cr_assert_eq(st_read_page(s, st_id_str("empty"), ST_AFTER, 0, 10, &p), 0);
    cr_assert_eq(st_page_last_mid(p), 0);
    st_page_free(p);
}

Test(pages, last_mid_and_errors)
{
    st_page *p;
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 3, 2, &p), 0);
    cr_assert_eq(st_page_last_mid(p), 25);
    st_page_free(p);
    cr_assert_eq(st_read_page(s, st_id_str("missing"), ST_AFTER, 0, 2, &p), ST_ENOGROUP);
    cr_assert_null(p);
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, 0, &p), ST_EINVAL);
    cr_assert_eq(st_read_page(s, st_id_str(""), ST_AFTER, 0, 1, &p), ST_EINVAL);
}

Test(pages, groups_do_not_bleed_into_each_other)
{
    /* "g" and "g1" share a prefix as strings but not as length-prefixed keys. */
    fx_join(s, "g1", "a");
    fx_append(s, "g1", "a", "g1-1");
    fx_join(s, "f", "a");
    fx_append(s, "f", "a", "f-1");
    expect("g", ST_AFTER, 0, 100, 1, 25, false);
    expect("g", ST_BEFORE, 100, 100, 1, 25, false);
    st_page *p;
    cr_assert_eq(st_read_page(s, st_id_str("g1"), ST_AFTER, 0, 100, &p), 0);
    cr_assert_eq(st_page_count(p), 1);
    cr_assert_arr_eq(st_page_at(p, 0)->record, "g1-1", 4);
    st_page_free(p);
}

/* A byte budget cuts a page short on the side away from `from`, keeping at least one. */
Test(pages, bounded_by_bytes)
{
    /* Records "m1".."m9" are 2 bytes, "m10".."m25" 3 bytes. */
    st_page *p;
    cr_assert_eq(st_read_page_bounded(s, st_id_str("g"), ST_AFTER, 0, 100, 7, &p), 0);
    cr_assert_eq(st_page_count(p), 3); /* m1 m2 m3: 6 bytes; m4 would make 8 */
    cr_assert_eq(st_page_at(p, 0)->mid, 1);
    cr_assert(st_page_more(p));
    st_page_free(p);

    cr_assert_eq(st_read_page_bounded(s, st_id_str("g"), ST_BEFORE, 26, 100, 7, &p), 0);
    cr_assert_eq(st_page_count(p), 2); /* the newest: m24 m25 */
    cr_assert_eq(st_page_at(p, 0)->mid, 24);
    cr_assert_eq(st_page_at(p, 1)->mid, 25);
    cr_assert_arr_eq(st_page_at(p, 1)->record, "m25", 3);
    cr_assert(st_page_more(p));
    st_page_free(p);

    cr_assert_eq(st_read_page_bounded(s, st_id_str("g"), ST_AFTER, 20, 100, 1, &p), 0);
    cr_assert_eq(st_page_count(p), 1, "at least one message, whatever the budget");
    cr_assert_eq(st_page_at(p, 0)->mid, 21);
    cr_assert(st_page_more(p));
    st_page_free(p);

    cr_assert_eq(st_read_page_bounded(s, st_id_str("g"), ST_AFTER, 22, 100, 1000, &p), 0);
    cr_assert_eq(st_page_count(p), 3);
    cr_assert_not(st_page_more(p), "not cut: the end of the group");
    st_page_free(p);
}
