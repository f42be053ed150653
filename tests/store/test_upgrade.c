/* A store written by an older release opens with its data: tests/fixtures/release-21 holds
 * the RocksDB folder and the PostgreSQL dump that the build of issue 21's release made
 * (tests/fixtures/make.sh says how, and what is in them). Opened by this build, the groups,
 * members, acks and messages are there; members have no read until they send one; a read
 * a last_seen and a not-before written now stay across a reopen. */
#include "fixture.h"
#include "pgfx.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *where;
static st_store *s;

static void teardown(void)
{
    st_close(s);
    if (where) {
        fx_rmtree(where);
        free(where);
    }
}

TestSuite(upgrade, .fini = teardown, .timeout = 60);

/* The release's store, put where a store of this build can open it. */
static void restore(void)
{
    where = fx_tmpdir();
    fx_restore_release_21(where);
}

Test(upgrade, a_store_of_the_release_before_opens_with_its_data)
{
    PGFX_ONE_DATABASE();
    restore();
    s = fx_open(where, true);
    if (fx_is_url(where))
        cr_assert_eq(pgfx_scalar(where, "SELECT max(version) FROM gw.schema_version"), 9);
    uint64_t last = 0;
    cr_assert_eq(st_read_last_mid(s, st_id_str("team"), &last), 0);
    cr_assert_eq(last, 5);
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str("team"), ST_AFTER, 0, 10, &p), 0);
    cr_assert_eq(st_page_count(p), 5);
    st_page_free(p);
    st_user_group g = fx_user_group(s, "carol", "team");
    cr_assert_eq(g.ack, 2);
    cr_assert_not(g.has_read, "no read before this release");
    cr_assert_eq(g.unread, 3);
    cr_assert_eq(fx_user_group(s, "bob", "team").unread, 0);
    cr_assert_eq(fx_user_group(s, "alice", "side").unread, 1);

    /* This release writes on it: a read, a last_seen, a message; and they stay. */
    st_ack r = {.gid = st_id_str("team"), .uid = st_id_str("carol"), .read = 4, .has_read = true};
    size_t applied = 0;
    cr_assert_eq(st_acks_sync(s, &r, 1, &applied), 0);
    cr_assert_eq(applied, 1);
    st_seen seen = {st_id_str("carol"), 1234};
    st_op op = {.kind = ST_OP_SEEN, .seen = &seen, .n_seen = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    cr_assert_eq(fx_append(s, "team", "bob", "after-upgrade"), 6);
    /* A message stored before versions existed gets one. */
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(s, st_id_str("team"), 2, &ver, false, "edited", 6, NULL, NULL), 0);
    cr_assert_eq(ver, 1);
    /* Revocation, which the release had not: none until a sign-out. */
    uint64_t nbf = 1, set = 0;
    cr_assert_eq(st_read_not_before(s, st_id_str("carol"), &nbf), 0);
    cr_assert_eq(nbf, 0);
    cr_assert_eq(st_signout_sync(s, st_id_str("carol"), &set), 0);
    cr_assert_gt(set, 0);
    st_close(s);
    s = fx_open(where, true);
    cr_assert_eq(st_read_page(s, st_id_str("team"), ST_AFTER, 0, 10, &p), 0);
    cr_assert_eq(st_page_count(p), 6);
    cr_assert_eq(st_page_at(p, 1)->ver, 1);
    cr_assert(st_page_at(p, 1)->record_n == 6 &&
              memcmp(st_page_at(p, 1)->record, "edited", 6) == 0);
    cr_assert_eq(st_page_at(p, 0)->ver, 0, "the others as they were");
    st_page_free(p);
    g = fx_user_group(s, "carol", "team");
    cr_assert(g.has_read && g.read == 4 && g.ack == 2 && g.unread == 2);
    seen.ms = 0;
    op = (st_op){.kind = ST_OP_READ_SEEN, .seen = &seen, .n_seen = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(seen.ms, 1234);
    cr_assert_eq(st_read_not_before(s, st_id_str("carol"), &nbf), 0);
    cr_assert_eq(nbf, set);
}
