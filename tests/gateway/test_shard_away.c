/*
 * A sign-in while a shard is away (docs/PROTOCOL.md, "welcome"; store.h, READ_GROUPS'
 * partial_ok): a gateway over two shards, shard 1 a PostgreSQL server of the test's own
 * that it stops. A user whose own rows are on shard 0 still signs in: the welcome lists
 * shard 0's groups and says `partial`; a request for a group of shard 1 is answered
 * `unavailable`, not `not_member`; once shard 1 is back a `groups` push lists every
 * group, and its groups take writes again. A user whose own rows are on the shard that
 * is away cannot sign in (its not-before is there): `unavailable`, as before.
 * PostgreSQL pass only.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "store.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gwfx f;
static pgfx_server one;
static char map[600];

static void teardown(void)
{
    gwfx_cleanup(&f);
    pgfx_server_cleanup(&one);
    if (map[0])
        unlink(map);
}

/* The shard of an id in a map that splits the slots in halves. */
static unsigned half_of(const char *id)
{
    return st_slot_of(st_id_str(id)) < ST_SLOTS / 2 ? 0 : 1;
}

/* "<prefix><n>" with the least n whose slot is on shard `half`. */
static void id_in(unsigned half, const char *prefix, char *out, size_t n)
{
    for (int i = 0;; i++) {
        snprintf(out, n, "%s%d", prefix, i);
        if (half_of(out) == half)
            return;
    }
}

/* A send of one text message; the reply (sent, or err). */
static pr_event send_one(gwc_conn *k, uint64_t rid, const char *gid, const char *cid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_body body = {gwfx_sl("x"), false};
    cr_assert_eq(pr_enc_send(&sb, rid, gwfx_sl(gid), gwfx_sl(cid), body), 0);
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    pr_event ev;
    do
        ev = gwfx_expect_any(k);
    while (ev.t != PR_EV_SENT && ev.t != PR_EV_ERR);
    return ev;
}

static bool lists(const pr_event *ev, const char *gid)
{
    for (size_t i = 0; i < ev->n_items; i++) {
        pr_group g;
        cr_assert_eq(pr_event_group(ev, i, &g), 0);
        if (gwfx_slice_is(g.gid, gid))
            return true;
    }
    return false;
}

Test(shard_away, a_user_signs_in_without_the_shard_that_is_away_and_hears_of_the_rest,
     .fini = teardown, .timeout = 120)
{
    PGFX_OWN_SHARDS();
    pgfx_server_start(&one);
    char *db0 = pgfx_db_new(), *db1 = pgfx_server_db_new(&one);
    const char *base = getenv("TMPDIR");
    snprintf(map, sizeof(map), "%s/gw-away-%d.map", base && *base ? base : "/tmp", (int)getpid());
    FILE *m = fopen(map, "w");
    cr_assert_not_null(m);
    fprintf(m, "version 1\nshard 0 %s\nshard 1 %s\nslots 0-2047 0\nslots 2048-4095 1\n", db0, db1);
    cr_assert_eq(fclose(m), 0);
    char url[620];
    snprintf(url, sizeof(url), "shards:%s", map);
    gwfx_start_on(&f, url, NULL);

    char u0[32], u1[32], g0[32], g1[32];
    id_in(0, "user", u0, sizeof(u0)); /* its own rows on shard 0 */
    id_in(1, "user", u1, sizeof(u1)); /* ... on shard 1 */
    id_in(0, "room", g0, sizeof(g0));
    id_in(1, "room", g1, sizeof(g1));
    gwc_conn *k = gwfx_login(&f, u0, NULL);
    gwfx_join(k, g0);
    gwfx_join(k, g1);
    cr_assert_eq(gwfx_send_msg(k, g1, "before", "x"), 1);
    gwc_conn *k1 = gwfx_login(&f, u1, NULL);
    gwfx_join(k1, g0);
    gwc_close(k1);
    gwc_close(k); /* the user leaves this gateway: its next hello reads its groups again */
    usleep(300 * 1000);

    pgfx_server_stop(&one); /* shard 1 goes away */
    pr_event w;
    k = gwfx_login(&f, u0, &w);
    cr_assert(w.partial, "the welcome says a part is missing");
    cr_assert_eq(w.n_items, 1, "shard 0's group alone");
    cr_assert(lists(&w, g0));
    pr_event ev = send_one(k, 7, g1, "away");
    cr_assert_eq(ev.t, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_UNAVAILABLE, "a group of the shard away: not not_member");
    ev = send_one(k, 8, g0, "here");
    cr_assert_eq(ev.t, PR_EV_SENT, "shard 0's group takes writes");

    /* Its own rows on the shard away: no sign-in (its not-before cannot be read). */
    gwc_conn *r = gwfx_connect_raw(&f);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    char *tok = gwfx_token(u1);
    cr_assert_eq(pr_enc_hello(&sb, 1, gwfx_sl(tok)), 0);
    gwfx_send(r, &sb);
    msgpack_sbuffer_destroy(&sb);
    free(tok);
    ev = gwfx_expect(r, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_UNAVAILABLE);
    cr_assert_eq(gwfx_closed(r), 4013);

    /* More sessions of the user meanwhile, each signed in from memory: partial too. */
    enum { MORE = 8 };
    gwc_conn *more[MORE];
    for (int i = 0; i < MORE; i++) {
        more[i] = gwfx_login(&f, u0, &w);
        cr_assert(w.partial && w.n_items == 1);
    }

    pgfx_server_restart(&one);
    /* The push of the whole list (no rid), once the shard takes writes again. */
    bool whole = false;
    while (!whole && gwfx_next_of(k, PR_EV_GROUPS, 30000, &ev)) {
        cr_assert_not(ev.has_rid);
        whole = !ev.partial;
    }
    cr_assert(whole, "a groups push with every group");
    cr_assert_eq(ev.n_items, 2);
    cr_assert(lists(&ev, g0) && lists(&ev, g1));
    /* Each session is pushed the list once, and once only (GW_PUSH_GROUPS: one a session
     * each time the list turns whole, however many sessions and seconds went by). */
    for (int i = 0; i < MORE; i++) {
        cr_assert(gwfx_next_of(more[i], PR_EV_GROUPS, 10000, &ev) && !ev.partial && ev.n_items == 2,
                  "session %d pushed the whole list", i);
        cr_assert_not(gwfx_next_of(more[i], PR_EV_GROUPS, i ? 50 : 2500, &ev),
                      "session %d pushed it once", i);
    }
    int rc = -1;
    for (int i = 0; i < 50 && rc != PR_EV_SENT; i++) {
        ev = send_one(k, 100 + (uint64_t)i, g1, "away"); /* the same cid, as a client resends */
        rc = ev.t;
        if (rc != PR_EV_SENT)
            usleep(200 * 1000);
    }
    cr_assert_eq(rc, PR_EV_SENT, "shard 1's group takes writes again");
    cr_assert_eq(ev.mid, 2, "dense: the refused send was not stored");
    free(db0);
    free(db1);
}
