/*
 * A message's later versions (docs/PROTOCOL.md, Edits and recalls), against the real
 * gateway on the suite's backend, and on two nodes over one database in the PostgreSQL
 * pass:
 *   - an edit keeps the mid, gets the next version, is replied to its sender's session
 *     and pushed to the group's other sessions (the sender's other devices too, and on
 *     another node), and pages show it; a resent edit (same ver, same body) is replied
 *     again and not pushed; another body under a taken ver is a conflict;
 *   - only the sender edits or recalls; unknown mids, recalled messages and the edit
 *     window are refused with the code that says which;
 *   - a recall leaves a tombstone in pages (mids stay dense), pushed as `recalled`;
 *   - all of it survives a restart;
 *   - a recalled body is not on disk afterwards: not in the RocksDB folder once its
 *     scrub (flush and compaction) ran, not in the PostgreSQL heap after VACUUM.
 */
#include "gwfx.h"
#include "pgfx.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

GWFX_PAIR_SUITE(edits, fa, fb, 120);

static pr_event edit(gwc_conn *k, uint64_t rid, uint64_t mid, uint64_t ver, const char *text,
                     enum pr_ev_type want)
{
    return gwfx_edit(k, rid, "g", mid, ver, text, want);
}

static pr_event recall(gwc_conn *k, uint64_t rid, uint64_t mid, enum pr_ev_type want)
{
    return gwfx_recall(k, rid, "g", mid, want);
}

/* The page of gid after 0 as k gets it: each message's text (or "-" for a tombstone),
 * version and recalled flag checked by the caller through the out arrays. */
typedef struct seen {
    char text[4][64];
    uint64_t ver[4];
    bool recalled[4];
    size_t n;
} seen;

static seen page_of(gwc_conn *k)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    cr_assert_eq(pr_enc_pull(&sb, 77, gwfx_sl("g"), false, 0, 10), 0);
    pr_event ev;
    gwfx_send(k, &sb);
    msgpack_sbuffer_destroy(&sb);
    cr_assert(gwfx_next_of(k, PR_EV_PAGE, GWFX_WAIT, &ev));
    seen s = {.n = ev.n_items};
    cr_assert_leq(s.n, 4);
    for (size_t i = 0; i < s.n; i++) {
        pr_message m;
        cr_assert_eq(pr_event_message(&ev, i, &m), 0);
        cr_assert_eq(m.mid, i + 1, "mids stay dense");
        if (m.recalled)
            snprintf(s.text[i], sizeof(s.text[i]), "-");
        else
            snprintf(s.text[i], sizeof(s.text[i]), "%.*s", (int)m.body.data.n,
                     (const char *)m.body.data.p);
        s.ver[i] = m.ver;
        s.recalled[i] = m.recalled;
    }
    return s;
}

static void check_page(gwc_conn *k)
{
    seen s = page_of(k);
    cr_assert_eq(s.n, 3);
    cr_assert_str_eq(s.text[0], "one");
    cr_assert_eq(s.ver[0], 0);
    cr_assert_str_eq(s.text[1], "two, edited");
    cr_assert_eq(s.ver[1], 1);
    cr_assert_str_eq(s.text[2], "-");
    cr_assert(s.recalled[2]);
    cr_assert_eq(s.ver[2], 1);
}

Test(edits, edits_and_recalls_are_pushed_paged_and_survive_a_restart)
{
    bool two = pgfx_on();
    gwfx *other = gwfx_start_nodes(&fa, &fb, NULL);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwc_conn *bob = gwfx_login(other, "bob", NULL);
    gwc_conn *alice_phone = gwfx_login(other, "alice", NULL);
    gwfx_join(alice, "g");
    gwfx_join(bob, "g");
    gwfx_send_msg(alice, "g", "c1", "one");
    gwfx_send_msg(alice, "g", "c2", "two");
    gwfx_send_msg(alice, "g", "c3", "three");

    pr_event ev = edit(alice, 5, 2, 1, "two, edited", PR_EV_EDITED);
    cr_assert_eq(ev.msg.mid, 2);
    cr_assert_eq(ev.msg.ver, 1);
    cr_assert(gwfx_slice_is(ev.msg.from, "alice"));
    cr_assert(gwfx_slice_is(ev.msg.body.data, "two, edited"));
    uint64_t ver_ts = ev.msg.ts;
    cr_assert_gt(ver_ts, 0);
    /* Pushed to the others, the sender's other device too, as one version. */
    gwc_conn *others[2] = {bob, alice_phone};
    for (int i = 0; i < 2; i++) {
        ev = gwfx_expect_of(others[i], PR_EV_EDITED);
        cr_assert_not(ev.has_rid);
        cr_assert(gwfx_slice_is(ev.gid, "g"));
        cr_assert(ev.msg.mid == 2 && ev.msg.ver == 1 && ev.msg.ts == ver_ts);
        cr_assert(gwfx_slice_is(ev.msg.body.data, "two, edited"));
    }
    cr_assert_not(gwfx_next_of(alice, PR_EV_EDITED, 300, &ev),
                  "the editor's session has the reply");

    /* The same edit again: the same answer, no second push; another body: a conflict. */
    ev = edit(alice, 6, 2, 1, "two, edited", PR_EV_EDITED);
    cr_assert(ev.msg.ver == 1 && ev.msg.ts == ver_ts);
    cr_assert_not(gwfx_next_of(bob, PR_EV_EDITED, 500, &ev), "a resent edit is not pushed again");
    ev = edit(alice, 7, 2, 1, "two, other", PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_CONFLICT, "%.*s", (int)ev.err_msg.n, ev.err_msg.p);

    /* Only the sender; a mid the group does not have. */
    ev = edit(bob, 8, 1, 0, "bob was here", PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_UNAUTHORIZED);
    ev = recall(bob, 9, 1, PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_UNAUTHORIZED);
    ev = edit(alice, 10, 99, 0, "x", PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_BAD_FIELD);
    cr_assert(gwfx_slice_is(ev.gid, "g"), "the error names the group");

    /* A recall: replied, pushed, a tombstone from then on. */
    ev = recall(alice, 11, 3, PR_EV_RECALLED);
    cr_assert(ev.msg.mid == 3 && ev.msg.ver == 1 && ev.msg.recalled);
    cr_assert_eq(ev.msg.body.data.n, 0);
    ev = gwfx_expect_of(bob, PR_EV_RECALLED);
    cr_assert(ev.msg.mid == 3 && ev.msg.recalled && gwfx_slice_is(ev.msg.from, "alice"));
    ev = edit(alice, 12, 3, 0, "back", PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_BAD_FIELD, "a recalled message is not edited");
    ev = recall(alice, 13, 3, PR_EV_RECALLED);
    cr_assert_eq(ev.msg.ver, 1, "a recall again: the first answer");

    check_page(bob);
    check_page(alice);
    cr_assert_eq(gwfx_stat(&fa, "versions", "edits"), 1);
    cr_assert_eq(gwfx_stat(&fa, "versions", "recalls"), 1);
    cr_assert_geq(gwfx_stat(other, "versions", "pushes"), two ? 3 : 4);

    gwfx_stop(&fa, SIGTERM);
    gwfx_restart(&fa);
    if (two) {
        gwfx_stop(&fb, SIGTERM);
        gwfx_restart(&fb);
    }
    gwc_conn *carol = gwfx_login(&fa, "carol", NULL);
    gwfx_join(carol, "g");
    check_page(carol);
}

Test(edits, the_edit_window_closes_and_recalls_stay_open)
{
    static const char *const window[] = {"--edit-window", "1", NULL};
    gwfx_start(&fa, window);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    gwfx_send_msg(alice, "g", "c1", "one");
    edit(alice, 1, 1, 0, "one, at once", PR_EV_EDITED);
    usleep(1300 * 1000);
    pr_event ev = edit(alice, 2, 1, 0, "one, too late", PR_EV_ERR);
    cr_assert_eq(ev.err_code, PR_E_UNAUTHORIZED);
    cr_assert(strstr((const char *)ev.err_msg.p, "edit window"), "%.*s", (int)ev.err_msg.n,
              ev.err_msg.p);
    recall(alice, 3, 1, PR_EV_RECALLED);
}

/* Does the file (or any file under the folder) hold marker? */
static bool on_disk(const char *path, const char *marker)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "grep -r -a -q -F '%s' '%s'", marker, path);
    return system(cmd) == 0;
}

/* Where f keeps marker's bytes, read as they are on disk: is it there? RocksDB: any file of
 * its data folder; PostgreSQL: the heap file of gw.msgs (after a checkpoint, and first a
 * VACUUM when vacuum). */
static bool stored_bytes(gwfx *f, const char *marker, bool vacuum)
{
    if (!f->store_url) {
        char data[300];
        snprintf(data, sizeof(data), "%s/data", f->dir);
        return on_disk(data, marker);
    }
    char sql[400];
    snprintf(sql, sizeof(sql),
             "SELECT position(convert_to('%s', 'UTF8') IN"
             " pg_read_binary_file(pg_relation_filepath('gw.msgs')))",
             marker);
    if (vacuum)
        pgfx_scalar(f->store_url, "VACUUM gw.msgs");
    pgfx_scalar(f->store_url, "CHECKPOINT");
    return pgfx_scalar(f->store_url, sql) > 0;
}

/* marker's bytes leave f's disk: RocksDB within a few seconds (the scrub runs after a
 * commit or when idle, at most once a second); PostgreSQL at a VACUUM. */
static void assert_gone(gwfx *f, const char *marker, const char *what)
{
    bool gone = !stored_bytes(f, marker, true);
    for (int i = 0; i < 100 && !gone && !f->store_url; i++) {
        usleep(100 * 1000);
        gone = !stored_bytes(f, marker, false);
    }
    cr_assert(gone, "%s is still on disk", what);
}

/* A text that nothing else on disk has: prefix-<time>-<pid>. */
static void marker_of(char *out, size_t n, const char *prefix)
{
    snprintf(out, n, "%s-%ld-%d", prefix, (long)time(NULL), getpid());
}

Test(edits, a_recalled_body_is_not_on_disk_afterwards, .timeout = 60)
{
    gwfx_start(&fa, NULL);
    gwc_conn *alice = gwfx_login(&fa, "alice", NULL);
    gwfx_join(alice, "g");
    char marker[64];
    marker_of(marker, sizeof(marker), "secret");
    gwfx_send_msg(alice, "g", "c1", "kept");
    gwfx_send_msg(alice, "g", "c2", marker);
    gwfx_send_msg(alice, "g", "c3", "kept too");
    cr_assert(stored_bytes(&fa, marker, false), "the marker is on disk before the recall");
    recall(alice, 1, 2, PR_EV_RECALLED);
    assert_gone(&fa, marker, "the recalled body");
    seen s = page_of(alice);
    cr_assert_eq(s.n, 3);
    cr_assert_str_eq(s.text[0], "kept");
    cr_assert(s.recalled[1]);
    cr_assert_str_eq(s.text[2], "kept too");
}

/* The application's edit and recall (docs/API.md): any sender's message, pushed the same. */
Test(edits, the_api_edits_and_recalls_any_message)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx_start(&fa, args);
    gwc_conn *alice, *bob;
    gwfx_login_two(&fa, "alice", &fa, "bob", "g", &alice, &bob);
    gwfx_send_msg(alice, "g", "c1", "one");
    gwfx_send_msg(alice, "g", "c2", "two");
    char *out =
        gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1", "{\"body\":\"moderated\"}", 200);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(o, "from")), "alice", "%s", out);
    cr_assert_str_eq(json_string_value(json_object_get(o, "body")), "moderated", "%s", out);
    cr_assert_eq(json_integer_value(json_object_get(o, "ver")), 1, "%s", out);
    json_decref(o);
    free(out);
    pr_event ev = gwfx_expect_of(bob, PR_EV_EDITED);
    cr_assert(ev.msg.mid == 1 && gwfx_slice_is(ev.msg.body.data, "moderated"));
    ev = gwfx_expect_of(alice, PR_EV_EDITED);
    cr_assert(gwfx_slice_is(ev.msg.from, "alice"), "the sender's own session is told too");
    out = gwfx_api(&fa, "DELETE", "/api/v1/groups/g/messages/2", NULL, 200);
    cr_assert(strstr(out, "\"recalled\":true"), "%s", out);
    cr_assert_null(strstr(out, "\"body\""), "%s", out);
    free(out);
    ev = gwfx_expect_of(bob, PR_EV_RECALLED);
    cr_assert_eq(ev.msg.mid, 2);
    free(gwfx_api(&fa, "DELETE", "/api/v1/groups/g/messages/2", NULL, 200)); /* again: same */
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/9", "{\"body\":\"x\"}", 404));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/2", "{\"body\":\"x\"}", 410));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1", "{\"body\":\"y\",\"ver\":1}", 409));
    free(gwfx_api(&fa, "PUT", "/api/v1/groups/g/messages/1", "{\"text\":\"y\"}", 400));
    free(gwfx_api(&fa, "POST", "/api/v1/groups/g/messages/1", "{}", 405));
    out = gwfx_api(&fa, "GET", "/api/v1/groups/g/messages", NULL, 200);
    cr_assert(strstr(out, "\"body\":\"moderated\",\"ver\":1,\"cseq\":1}"), "%s", out);
    cr_assert(strstr(out, "\"mid\":2,\"from\":\"alice\",\"ts\":"), "%s", out);
    cr_assert(strstr(out, "\"ver\":1,\"recalled\":true,\"cseq\":2}"), "%s", out);
    free(out);
}

/* Nodes with the API on (gwfx_start_nodes): alice signs in on fa and joins shared and
 * hers, bob on the other node (returned) and joins shared. */
static gwfx *start_api_nodes(gwc_conn **alice, gwc_conn **bob, const char *shared, const char *hers)
{
    const char *args[] = {"--api-key-file", gwfx_api_key_file(), NULL};
    gwfx *other = gwfx_start_nodes(&fa, &fb, args);
    *alice = gwfx_login(&fa, "alice", NULL);
    *bob = gwfx_login(other, "bob", NULL);
    gwfx_join(*alice, shared);
    gwfx_join(*alice, hers);
    gwfx_join(*bob, shared);
    return other;
}

/* A person's erasure through the API (docs/API.md, DELETE /users/{uid}): every message
 * the user sent a tombstone, on disk too; its memberships gone; its sessions ended on
 * every node; the others' messages kept. */
Test(edits, erasing_a_user_leaves_no_body_of_theirs, .timeout = 90)
{
    gwc_conn *alice, *bob;
    gwfx *other = start_api_nodes(&alice, &bob, "g", "h");
    gwc_conn *alice_phone = gwfx_login(other, "alice", NULL);
    char marker[64];
    marker_of(marker, sizeof(marker), "alices-secret");
    gwfx_send_msg(alice, "g", "c1", marker);
    gwfx_send_msg(alice, "g", "c2", marker);
    gwfx_send_msg(alice, "h", "c3", marker);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, 9, gwfx_sl("g"), gwfx_sl("b1"), (pr_body){gwfx_sl("bob stays"), false});
    gwfx_send(bob, &sb);
    msgpack_sbuffer_destroy(&sb);
    gwfx_reply(bob, 9, PR_EV_SENT);
    cr_assert(stored_bytes(&fa, marker, false), "the marker is on disk before");

    char *out = gwfx_api(&fa, "DELETE", "/api/v1/users/alice", NULL, 200);
    cr_assert(strstr(out, "\"erased\":3"), "%s", out);
    cr_assert(strstr(out, "\"groups\":[\"g\",\"h\"]"), "%s", out);
    free(out);
    cr_assert_eq(gwfx_closed(alice), 4003, "signed out here");
    cr_assert_eq(gwfx_closed(alice_phone), 4003, "and on the other node");

    seen s = page_of(bob);
    cr_assert_eq(s.n, 3);
    cr_assert(s.recalled[0] && s.recalled[1], "alice's are tombstones");
    cr_assert_str_eq(s.text[2], "bob stays");
    out = gwfx_api(other, "GET", "/api/v1/groups/g/members", NULL, 200);
    cr_assert_null(strstr(out, "\"alice\""), "%s", out);
    free(out);
    out = gwfx_api(&fa, "GET", "/api/v1/users/alice/groups", NULL, 200);
    cr_assert_null(strstr(out, "\"gid\""), "%s", out);
    free(out);
    out = gwfx_api(&fa, "DELETE", "/api/v1/users/alice", NULL, 200);
    cr_assert(strstr(out, "\"erased\":0"), "again: nothing left: %s", out);
    free(out);

    assert_gone(&fa, marker, "a body of alice's");
}

/* A group's deletion through the API (docs/API.md, DELETE /groups/{gid}): its members are
 * told `left` on every node, it is gone from their groups, and its messages from disk. */
Test(edits, deleting_a_group_tells_its_members_and_leaves_nothing, .timeout = 90)
{
    gwc_conn *alice, *bob;
    gwfx *other = start_api_nodes(&alice, &bob, "doomed", "g");
    char marker[64];
    marker_of(marker, sizeof(marker), "doomed");
    gwfx_send_msg(alice, "doomed", "c1", marker);
    gwfx_send_msg(alice, "doomed", "c2", marker);
    char *out = gwfx_api(&fa, "DELETE", "/api/v1/groups/doomed", NULL, 200);
    cr_assert(strstr(out, "\"deleted\":2"), "%s", out);
    cr_assert(strstr(out, "\"alice\"") && strstr(out, "\"bob\""), "%s", out);
    free(out);
    gwc_conn *both[2] = {alice, bob};
    for (int i = 0; i < 2; i++) {
        pr_event ev = gwfx_expect_of(both[i], PR_EV_LEFT);
        cr_assert(gwfx_slice_is(ev.gid, "doomed"));
        cr_assert_not(ev.has_rid, "a push");
    }
    free(gwfx_api(&fa, "GET", "/api/v1/groups/doomed/messages", NULL, 404));
    free(gwfx_api(other, "DELETE", "/api/v1/groups/doomed", NULL, 404));
    out = gwfx_api(&fa, "GET", "/api/v1/users/alice/groups", NULL, 200);
    cr_assert(strstr(out, "\"g\"") && !strstr(out, "doomed"), "%s", out);
    free(out);
    /* A message to it now: alice is no member any more. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pr_enc_send(&sb, 5, gwfx_sl("doomed"), gwfx_sl("c3"), (pr_body){gwfx_sl("late"), false});
    gwfx_send(alice, &sb);
    msgpack_sbuffer_destroy(&sb);
    cr_assert_eq(gwfx_reply(alice, 5, PR_EV_ERR).err_code, PR_E_NOT_MEMBER);
    assert_gone(&fa, marker, "a message of the group");
}
