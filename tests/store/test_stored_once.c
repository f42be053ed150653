/* Read diffusion: a message costs the same rows and bytes in a group of 500 members as in
 * a group of one. Counted straight from the RocksDB folder, or the database's tables. */
#include "fixture.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define MESSAGES 100

/* Rows and bytes that MESSAGES appends add to a group of `members` members. */
static void cost(int members, uint64_t *rows, uint64_t *bytes)
{
    char *dir = fx_tmpdir();
    st_store *s = fx_open(dir, false);
    char uid[16], cid[16];
    for (int i = 0; i < members; i++) {
        snprintf(uid, sizeof(uid), "u%03d", i);
        fx_join(s, "g", uid);
    }
    st_close(s);
    uint64_t rows0, bytes0, rows1, bytes1;
    fx_count_rows(dir, &rows0, &bytes0);

    s = fx_open(dir, false);
    for (int i = 0; i < MESSAGES; i++) {
        snprintf(cid, sizeof(cid), "c%03d", i);
        fx_append(s, "g", "u000", cid);
    }
    st_close(s);
    fx_count_rows(dir, &rows1, &bytes1);
    *rows = rows1 - rows0;
    *bytes = bytes1 - bytes0;
    fx_rmtree(dir);
    free(dir);
}

Test(stored_once, message_cost_does_not_grow_with_members)
{
    PGFX_ONE_DATABASE();
    uint64_t rows1, bytes1, rows500, bytes500;
    cost(1, &rows1, &bytes1);
    cost(500, &rows500, &bytes500);
    /* Each message: one msgs row and one sends row; the group row is overwritten. */
    cr_assert_eq(rows1, 2 * MESSAGES, "rows added for 1 member: %lu", (unsigned long)rows1);
    cr_assert_eq(rows500, rows1, "rows added: %lu for 500 members, %lu for 1",
                 (unsigned long)rows500, (unsigned long)rows1);
    cr_assert_eq(bytes500, bytes1, "bytes added: %lu for 500 members, %lu for 1",
                 (unsigned long)bytes500, (unsigned long)bytes1);
}
