/* Figures: exact message and group counts (also after reopen), commit latency, health. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

Test(stats, exact_counts_latency_and_health)
{
    char *dir = fx_tmpdir();
    st_store *s = fx_open(dir, true);
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_eq(st.messages, 0);
    cr_assert_eq(st.groups, 0);
    cr_assert(st.writable);
    fx_join(s, "a", "u");
    fx_join(s, "b", "u");
    fx_join(s, "b", "v"); /* joins an existing group: not a new one */
    for (int i = 0; i < 7; i++) {
        char cid[8];
        snprintf(cid, sizeof(cid), "c%d", i);
        fx_append(s, i < 3 ? "a" : "b", "u", cid);
    }
    fx_append(s, "b", "u", "c6"); /* duplicate: not counted */
    st_read_stats(s, &st);
    cr_assert_eq(st.groups, 2);
    cr_assert_eq(st.messages, 7);
    cr_assert_eq(st.appends, 7);
    cr_assert_gt(st.commits, 0);
    cr_assert_gt(st.commit_p50_us, 0);
    cr_assert_geq(st.commit_p99_us, st.commit_p50_us);
    cr_assert_gt(st.disk_bytes, 0);
    st_close(s);

    s = fx_open(dir, true);
    st_read_stats(s, &st);
    cr_assert_eq(st.groups, 2, "counted again at open");
    cr_assert_eq(st.messages, 7);
    cr_assert_eq(st.appends, 0);
    /* Idle for over a second: the writer's probe keeps the health current. */
    usleep(1300 * 1000);
    cr_assert(st_writable(s));
    st_close(s);
    fx_rmtree(dir);
    free(dir);
}
