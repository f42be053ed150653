/* Changes (store.h, Changes): every change to a message and every group-level change takes
 * the group's next cseq, dense per group, in the same write as the change (a kill does
 * not split them); the log holds each changed message once, at its latest change
 * (folding); READ_CHANGES pages it with more and upto; its own horizon (changes_keep,
 * changes_keep_ms) answers changes_gone instead of a short page; horizon moves and the
 * deletion take a cseq; entries below the horizon are not returned; erasures take cseqs
 * and say which groups moved. */
#include "fixture.h"
#include "pgfx.h"
#include "tclock.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

FX_STORE_SUITE(changes, true);

/* An op submitted and waited for; the store must take it (a backend without changes
 * refuses the new kinds at submit: a failure here, not a crash further on). */
static void run(st_store *st, st_op *op)
{
    int rc = fx_submit_wait(st, op);
    cr_assert(rc == 0 || rc == ST_DONE, "submit: %s", st_strerror(rc));
}

static uint64_t edit_in(st_store *st, const char *gid, uint64_t mid, const char *record,
                        bool recall)
{
    st_op op = {.kind = ST_OP_EDIT,
                .gid = st_id_str(gid),
                .mid = mid,
                .recall = recall,
                .record = record,
                .record_n = strlen(record)};
    run(st, &op);
    cr_assert_eq(op.result, 0, "edit %s/%lu: %s", gid, (unsigned long)mid, st_strerror(op.result));
    return op.cseq;
}

static uint64_t edit(const char *gid, uint64_t mid, const char *record)
{
    return edit_in(s, gid, mid, record, false);
}

static uint64_t react(const char *gid, uint64_t mid, const char *uid, const char *key, bool on)
{
    uint64_t cseq = 0;
    int rc = st_react_sync(s, st_id_str(gid), mid, st_id_str(uid), st_id_str(key), on, &cseq, NULL,
                           NULL);
    cr_assert_eq(rc, 0, "react: %s", st_strerror(rc));
    return cseq;
}

static st_op read_group(st_store *st, const char *gid)
{
    st_op op = {.kind = ST_OP_READ_GROUP, .gid = st_id_str(gid)};
    run(st, &op);
    cr_assert_eq(op.result, 0, "read group %s: %s", gid, st_strerror(op.result));
    return op;
}

static st_page *changes_in(st_store *st, const char *gid, uint64_t after, size_t limit,
                           size_t max_bytes)
{
    st_op op = {.kind = ST_OP_READ_CHANGES,
                .gid = st_id_str(gid),
                .from = after,
                .limit = limit,
                .max_bytes = max_bytes};
    run(st, &op);
    cr_assert_eq(op.result, 0, "changes %s: %s", gid, st_strerror(op.result));
    return op.page;
}

static st_page *changes(const char *gid, uint64_t after, size_t limit)
{
    return changes_in(s, gid, after, limit, 0);
}

static void fill(const char *gid, const char *uid, int n)
{
    fx_join(s, gid, uid);
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%s-%s-", gid, uid);
    fx_append_n(s, gid, uid, prefix, 0, n);
}

/* A store at a new place with the changes' retention given. */
static st_store *open_keeping(const char *where, uint64_t keep, uint64_t keep_ms)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    o.changes_keep = keep;
    o.changes_keep_ms = keep_ms;
    return fx_open_options(&o);
}

/* A TRIM pass over every group (retain: the defaults); its `changed` list is returned
 * (the caller frees it). */
static st_list *trim_in(st_store *st, st_retain dflt, size_t *deleted)
{
    st_op op = {.kind = ST_OP_TRIM, .limit = 100, .retain = dflt};
    run(st, &op);
    cr_assert_eq(op.result, 0, "trim: %s", st_strerror(op.result));
    if (deleted)
        *deleted = op.applied;
    st_list_free(op.list);
    return op.changed;
}

/* The cseq the changed list says for gid (0: not in it). */
static uint64_t changed_hi(const st_list *l, const char *gid)
{
    for (size_t i = 0; i < st_list_count(l); i++) {
        const st_item *it = st_list_at(l, i);
        if (it->gid.n == strlen(gid) && memcmp(it->gid.p, gid, it->gid.n) == 0)
            return it->hi;
    }
    return 0;
}

static bool record_is(const st_msg *m, const char *text)
{
    return m->record_n == strlen(text) && memcmp(m->record, text, m->record_n) == 0;
}

Test(changes, cseq_is_dense_per_group_and_every_read_says_the_last)
{
    fill("g", "alice", 3);
    fill("h", "alice", 3);
    cr_assert_eq(read_group(s, "g").last_cseq, 0, "no change yet");
    cr_assert_eq(edit("g", 1, "g1 v1"), 1);
    cr_assert_eq(edit("h", 2, "h2 v1"), 1, "each group counts its own");
    cr_assert_eq(react("g", 2, "alice", "+1", true), 2);
    cr_assert_eq(edit_in(s, "g", 3, "T", true), 3, "a recall");
    cr_assert_eq(react("h", 2, "alice", "+1", true), 2);
    cr_assert_eq(react("g", 2, "alice", "+1", false), 4, "a reaction cleared");
    /* New messages take none. */
    fx_append(s, "g", "alice", "more");
    cr_assert_eq(read_group(s, "g").last_cseq, 4);
    cr_assert_eq(read_group(s, "h").last_cseq, 2);
    /* A join, a page and the user's groups say it too. */
    st_op join = {.kind = ST_OP_JOIN, .gid = st_id_str("g"), .uid = st_id_str("bob")};
    run(s, &join);
    cr_assert_eq(join.result, 0);
    cr_assert_eq(join.last_cseq, 4);
    st_page *p = NULL;
    cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, 10, &p), 0);
    cr_assert_eq(st_page_last_cseq(p), 4);
    cr_assert_eq(st_page_at(p, 0)->cseq, 1);
    cr_assert_eq(st_page_at(p, 1)->cseq, 4);
    cr_assert_eq(st_page_at(p, 2)->cseq, 3);
    cr_assert_eq(st_page_at(p, 3)->cseq, 0, "never changed");
    st_page_free(p);
    st_op groups = {.kind = ST_OP_READ_GROUPS, .uid = st_id_str("alice")};
    run(s, &groups);
    cr_assert_eq(groups.result, 0);
    cr_assert_eq(st_groups_count(groups.groups), 2);
    for (size_t i = 0; i < 2; i++) {
        const st_user_group *g = st_groups_at(groups.groups, i);
        cr_assert_eq(g->last_cseq, g->gid.p[0] == 'g' ? 4 : 2);
    }
    st_groups_free(groups.groups);
    /* It all survives a reopen, and counting goes on from there. */
    st_close(s);
    s = fx_open(dir, true);
    cr_assert_eq(read_group(s, "g").last_cseq, 4);
    cr_assert_eq(edit("g", 1, "g1 v2"), 5);
}

Test(changes, a_message_changed_ten_times_is_one_entry_at_its_latest)
{
    fill("g", "alice", 3);
    for (int i = 1; i <= 10; i++) {
        char rec[32];
        snprintf(rec, sizeof(rec), "two v%d", i);
        cr_assert_eq(edit("g", 2, rec), (uint64_t)i);
    }
    cr_assert_eq(edit("g", 3, "three v1"), 11);
    st_page *p = changes("g", 0, 100);
    cr_assert_eq(st_page_count(p), 2, "one entry per message: %zu", st_page_count(p));
    const st_msg *a = st_page_at(p, 0), *b = st_page_at(p, 1);
    cr_assert_eq(a->mid, 2);
    cr_assert_eq(a->cseq, 10);
    cr_assert_eq(a->ver, 10);
    cr_assert(record_is(a, "two v10"), "its state now");
    cr_assert_eq(b->mid, 3);
    cr_assert_eq(b->cseq, 11);
    cr_assert_not(st_page_more(p));
    cr_assert_eq(st_page_upto(p), 11);
    cr_assert_eq(st_page_changes_gone(p), 0);
    st_page_free(p);
    /* After an entry's old cseq: the message comes once, at its latest. */
    p = changes("g", 5, 100);
    cr_assert_eq(st_page_count(p), 2);
    st_page_free(p);
    p = changes("g", 10, 100);
    cr_assert_eq(st_page_count(p), 1);
    cr_assert_eq(st_page_at(p, 0)->mid, 3);
    st_page_free(p);
    p = changes("g", 11, 100);
    cr_assert_eq(st_page_count(p), 0, "nothing after the last");
    cr_assert_eq(st_page_upto(p), 11);
    st_page_free(p);
}

Test(changes, pages_go_on_with_more_and_upto)
{
    fill("g", "alice", 7);
    for (uint64_t mid = 1; mid <= 7; mid++)
        edit("g", mid, "edited");
    edit("g", 1, "edited again"); /* cseq 8: mid 1 moves to the end */
    uint64_t after = 0, seen[8] = {0};
    size_t n = 0, pages = 0;
    for (bool more = true; more; pages++) {
        st_page *p = changes("g", after, 3);
        for (size_t i = 0; i < st_page_count(p); i++) {
            const st_msg *m = st_page_at(p, i);
            cr_assert_gt(m->cseq, after, "after the cursor");
            cr_assert_leq(m->cseq, st_page_upto(p), "within upto");
            cr_assert_lt(n, 8);
            seen[n++] = m->mid;
        }
        more = st_page_more(p);
        if (more)
            cr_assert_eq(st_page_upto(p), st_page_at(p, st_page_count(p) - 1)->cseq);
        else
            cr_assert_eq(st_page_upto(p), 8, "the group's last_cseq");
        cr_assert_eq(st_page_last_cseq(p), 8);
        after = st_page_upto(p);
        st_page_free(p);
        cr_assert_lt(pages, 10);
    }
    cr_assert_eq(n, 7, "each changed message once");
    uint64_t want[7] = {2, 3, 4, 5, 6, 7, 1};
    for (size_t i = 0; i < 7; i++)
        cr_assert_eq(seen[i], want[i], "in cseq order");
    cr_assert_eq(pages, 3);
    /* A byte bound cuts a page short, at least one entry still in it. */
    st_page *p = changes_in(s, "g", 0, 100, 1);
    cr_assert_eq(st_page_count(p), 1);
    cr_assert(st_page_more(p));
    cr_assert_eq(st_page_upto(p), 2);
    st_page_free(p);
}

Test(changes, a_cursor_below_the_logs_start_gets_changes_gone_never_a_short_page)
{
    st_close(s);
    s = open_keeping(dir, 3, 0);
    fill("g", "alice", 6);
    for (uint64_t mid = 1; mid <= 6; mid++)
        edit("g", mid, "edited");
    st_list_free(trim_in(s, (st_retain){0}, NULL));
    st_page *p = changes("g", 0, 100);
    cr_assert_eq(st_page_changes_gone(p), 4, "the log starts after 3 now");
    cr_assert_eq(st_page_count(p), 0, "nothing, rather than 4..6 alone");
    cr_assert_not(st_page_more(p));
    cr_assert_eq(st_page_last_cseq(p), 6);
    st_page_free(p);
    p = changes("g", 2, 100);
    cr_assert_eq(st_page_changes_gone(p), 4);
    st_page_free(p);
    p = changes("g", 3, 100);
    cr_assert_eq(st_page_changes_gone(p), 0, "complete after 3");
    cr_assert_eq(st_page_count(p), 3);
    cr_assert_eq(st_page_at(p, 0)->mid, 4);
    st_page_free(p);
    /* The start survives a reopen (and a group with few changes keeps them all). */
    st_close(s);
    s = open_keeping(dir, 3, 0);
    fill("h", "alice", 2);
    edit("h", 1, "x");
    st_list_free(trim_in(s, (st_retain){0}, NULL));
    p = changes("g", 0, 100);
    cr_assert_eq(st_page_changes_gone(p), 4);
    st_page_free(p);
    p = changes("h", 0, 100);
    cr_assert_eq(st_page_changes_gone(p), 0);
    cr_assert_eq(st_page_count(p), 1);
    st_page_free(p);
}

Test(changes, changes_older_than_the_age_go)
{
    st_close(s);
    s = open_keeping(dir, ST_KEEP_ALL, 1);
    fill("g", "alice", 3);
    edit("g", 1, "old");
    edit("g", 2, "old");
    usleep(20 * 1000); /* older than 1 ms by then: no assertion on time, only on order */
    st_list_free(trim_in(s, (st_retain){0}, NULL));
    st_page *p = changes("g", 0, 100);
    cr_assert_eq(st_page_changes_gone(p), 3, "past both");
    st_page_free(p);
    p = changes("g", 2, 100);
    cr_assert_eq(st_page_changes_gone(p), 0);
    cr_assert_eq(st_page_count(p), 0);
    cr_assert_eq(st_page_upto(p), 2);
    st_page_free(p);
}

Test(changes, a_horizon_move_takes_a_cseq_and_entries_below_it_are_not_returned)
{
    fill("g", "alice", 10);
    fill("h", "alice", 2);
    edit("g", 2, "below soon");
    edit("g", 8, "stays");
    size_t deleted = 0;
    st_list *moved = trim_in(s, (st_retain){.messages = 5}, &deleted);
    cr_assert_eq(deleted, 5);
    cr_assert_eq(changed_hi(moved, "g"), 3, "the move is change 3");
    cr_assert_eq(changed_hi(moved, "h"), 0, "h kept all: no change");
    st_list_free(moved);
    st_op g = read_group(s, "g");
    cr_assert_eq(g.first_mid, 6);
    cr_assert_eq(g.last_cseq, 3);
    st_page *p = changes("g", 0, 100);
    cr_assert_eq(st_page_count(p), 1, "mid 2 is below the horizon");
    cr_assert_eq(st_page_at(p, 0)->mid, 8);
    cr_assert_eq(st_page_first_mid(p), 6, "the new horizon, for the client to apply");
    cr_assert_eq(st_page_upto(p), 3);
    cr_assert_not(st_page_more(p));
    st_page_free(p);
    /* A pass that moves nothing takes nothing. */
    moved = trim_in(s, (st_retain){.messages = 5}, NULL);
    cr_assert_eq(changed_hi(moved, "g"), 0);
    st_list_free(moved);
    cr_assert_eq(read_group(s, "g").last_cseq, 3);
}

Test(changes, a_deletion_answers_its_cseq_and_the_group_is_gone)
{
    fill("g", "alice", 2);
    edit("g", 1, "a");
    react("g", 2, "alice", "ok", true);
    st_op del = {.kind = ST_OP_DELETE_GROUP, .gid = st_id_str("g")};
    run(s, &del);
    cr_assert_eq(del.result, 0);
    cr_assert_eq(del.cseq, 3);
    st_list_free(del.list);
    st_op op = {.kind = ST_OP_READ_CHANGES, .gid = st_id_str("g"), .limit = 10};
    run(s, &op);
    cr_assert_eq(op.result, ST_ENOGROUP);
    cr_assert_null(op.page);
    /* Made again, it starts afresh: no change, no reaction of the old one. (New cids: the
     * old ones' rows outlive a deletion.) */
    fx_join(s, "g", "alice");
    fx_append(s, "g", "alice", "again-1");
    fx_append(s, "g", "alice", "again-2");
    cr_assert_eq(read_group(s, "g").last_cseq, 0);
    st_page *p = changes("g", 0, 10);
    cr_assert_eq(st_page_count(p), 0);
    st_page_free(p);
    bool dup = true;
    int rc = st_react_sync(s, st_id_str("g"), 2, st_id_str("alice"), st_id_str("ok"), true, NULL,
                           NULL, &dup);
    cr_assert_eq(rc, 0, "%s", st_strerror(rc));
    cr_assert_not(dup, "alice's reaction went with the old group");
}

Test(changes, an_erasure_takes_a_cseq_per_message_in_every_group_and_lists_them)
{
    fx_join(s, "g", "alice");
    fx_join(s, "g", "bob");
    fx_join(s, "h", "bob");
    fx_join(s, "h", "alice");
    fx_append(s, "g", "alice", "a1"); /* g 1 */
    fx_append(s, "g", "bob", "b1");   /* g 2 */
    fx_append(s, "h", "bob", "b2");   /* h 1 */
    react("g", 2, "alice", "+1", true);
    react("g", 2, "bob", "+1", true);
    react("g", 1, "bob", "+1", true);
    react("h", 1, "alice", "ha", true);
    st_op op = {.kind = ST_OP_ERASE_USER, .uid = st_id_str("alice"), .record = "T", .record_n = 1};
    run(s, &op);
    cr_assert_eq(op.result, 0, "%s", st_strerror(op.result));
    cr_assert_eq(op.applied, 1);
    st_list_free(op.list);
    uint64_t g_last = read_group(s, "g").last_cseq, h_last = read_group(s, "h").last_cseq;
    cr_assert_eq(g_last, 5, "3 reactions, then the tombstone of 1 and alice's +1 on 2");
    cr_assert_eq(h_last, 2, "a reaction, then alice's going");
    cr_assert_eq(changed_hi(op.changed, "g"), g_last);
    cr_assert_eq(changed_hi(op.changed, "h"), h_last);
    cr_assert_eq(st_list_count(op.changed), 2);
    st_list_free(op.changed);
    /* The changes say the new state: 1 a tombstone without reactions, 2 with bob's +1. */
    st_page *p = changes("g", 3, 10);
    cr_assert_eq(st_page_count(p), 2);
    for (size_t i = 0; i < 2; i++) {
        const st_msg *m = st_page_at(p, i);
        if (m->mid == 1) {
            cr_assert(m->recalled);
            cr_assert_eq(m->n_reactions, 0);
        } else {
            cr_assert_eq(m->mid, 2);
            cr_assert_not(m->recalled);
            cr_assert_eq(m->n_reactions, 1);
            cr_assert_eq(m->reactions[0].count, 1);
        }
    }
    st_page_free(p);
    p = changes("h", 1, 10);
    cr_assert_eq(st_page_count(p), 1);
    cr_assert_eq(st_page_at(p, 0)->n_reactions, 0, "alice's was the only one");
    st_page_free(p);
}

/* Atomicity: a child edits and reacts with sync on, reporting each confirmed change, and
 * is killed; after reopening, each message holds exactly the state of its latest change
 * at or below the group's last_cseq (a change is never there without its cseq, nor a
 * cseq without its change), and no confirmed change is lost. */
#define KILL_MSGS 5
#define KILL_ROUNDS 3

static void kill_child(const char *where, int fd)
{
    st_options o;
    st_options_init(&o);
    fx_locate(&o, where);
    st_store *st = NULL;
    if (st_open(&o, &st, NULL, 0) != 0)
        _exit(2);
    st_op g = {.kind = ST_OP_READ_GROUP, .gid = st_id_str("g")};
    int rc;
    st_submit_all(st, &g, 1, &rc);
    for (uint64_t i = g.last_cseq + 1;; i++) {
        /* Change i on mid (i - 1) % KILL_MSGS + 1: odd ones edit, even ones set or clear
         * the key "k" in turn (the even changes of one mid are 10 apart). */
        uint64_t mid = (i - 1) % KILL_MSGS + 1, cseq = 0;
        char rec[32];
        snprintf(rec, sizeof(rec), "v%llu", (unsigned long long)i);
        if (i % 2) {
            uint64_t ver = 0;
            if (st_edit_sync(st, st_id_str("g"), mid, &ver, false, rec, strlen(rec), NULL, NULL))
                _exit(3);
            st_op r = {.kind = ST_OP_READ_GROUP, .gid = st_id_str("g")};
            st_submit_all(st, &r, 1, &rc);
            cseq = r.last_cseq;
        } else {
            bool on = ((i - 1) / 10) % 2 == 0;
            if (st_react_sync(st, st_id_str("g"), mid, st_id_str("w"), st_id_str("k"), on, &cseq,
                              NULL, NULL))
                _exit(3);
        }
        if (cseq != i || write(fd, &cseq, sizeof(cseq)) != sizeof(cseq))
            _exit(4);
    }
}

Test(changes, a_kill_never_splits_a_change_from_its_cseq, .timeout = 120)
{
    fill("g", "w", KILL_MSGS);
    st_close(s);
    s = NULL; /* (the suite's teardown closes it; none is open here) */
    uint64_t confirmed = 0;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        int fd;
        pid_t pid = fx_fork_reporter(&fd);
        if (pid == 0)
            kill_child(dir, fd);
        /* The kill lands among changes: wait for the first one, then a while. */
        uint64_t c;
        cr_assert(fx_readable(fd, 20 * 1000) && read(fd, &c, sizeof(c)) == sizeof(c),
                  "round %d: no change within 20 s", round);
        confirmed = c;
        long t0 = tclock_ms(), run_ms = 50 + rand() % 300;
        while (tclock_since(t0) < run_ms) {
            if (fx_readable(fd, 10) && read(fd, &c, sizeof(c)) == sizeof(c))
                confirmed = c;
        }
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status), "the child ended by itself (status %d)", status);
        while (read(fd, &c, sizeof(c)) == sizeof(c))
            confirmed = c;
        close(fd);

        s = fx_open(dir, true);
        uint64_t last = read_group(s, "g").last_cseq;
        cr_assert_geq(last, confirmed, "confirmed change %llu lost", (unsigned long long)confirmed);
        st_page *p = NULL;
        cr_assert_eq(st_read_page(s, st_id_str("g"), ST_AFTER, 0, KILL_MSGS, &p), 0);
        for (size_t i = 0; i < KILL_MSGS; i++) {
            const st_msg *m = st_page_at(p, i);
            /* The latest change of this mid at or below last, and its latest edit. */
            uint64_t latest = 0, latest_edit = 0, latest_react = 0;
            for (uint64_t j = 1; j <= last; j++)
                if ((j - 1) % KILL_MSGS + 1 == m->mid) {
                    latest = j;
                    *(j % 2 ? &latest_edit : &latest_react) = j;
                }
            bool set = latest_react && ((latest_react - 1) / 10) % 2 == 0;
            cr_assert_eq(m->n_reactions, set ? 1 : 0, "mid %lu: its count with its cseq",
                         (unsigned long)m->mid);
            cr_assert_eq(m->cseq, latest, "mid %lu: cseq %lu, its latest change %lu",
                         (unsigned long)m->mid, (unsigned long)m->cseq, (unsigned long)latest);
            char rec[32];
            snprintf(rec, sizeof(rec), "v%llu", (unsigned long long)latest_edit);
            if (latest_edit)
                cr_assert(record_is(m, rec), "mid %lu holds its latest edit",
                          (unsigned long)m->mid);
        }
        st_page_free(p);
        /* The log agrees: each changed message once, at its cseq, in order. */
        p = changes("g", 0, 100);
        uint64_t prev = 0;
        for (size_t i = 0; i < st_page_count(p); i++) {
            cr_assert_gt(st_page_at(p, i)->cseq, prev);
            prev = st_page_at(p, i)->cseq;
        }
        cr_assert_eq(st_page_count(p), last < KILL_MSGS ? last : KILL_MSGS);
        cr_assert_eq(prev, last);
        st_page_free(p);
        st_close(s);
        s = NULL;
    }
    s = fx_open(dir, true);
    cr_log_info("changes: %llu changes, %d kills", (unsigned long long)confirmed, KILL_ROUNDS);
}

/* A store of the release before (tests/fixtures/release-21, as test_upgrade.c restores
 * it) opens with no change anywhere and takes changes from 1. */
Test(changes, a_store_of_an_older_release_takes_changes_from_one)
{
    PGFX_ONE_DATABASE();
    char *old = fx_tmpdir();
    fx_restore_release_21(old);
    st_store *st = fx_open(old, true);
    cr_assert_eq(read_group(st, "team").last_cseq, 0);
    st_page *p = changes_in(st, "team", 0, 10, 0);
    cr_assert_eq(st_page_count(p), 0);
    cr_assert_eq(st_page_changes_gone(p), 0, "a log complete from 1");
    st_page_free(p);
    cr_assert_eq(edit_in(st, "team", 2, "edited", false), 1);
    uint64_t cseq = 0, count = 0;
    cr_assert_eq(st_react_sync(st, st_id_str("team"), 3, st_id_str("bob"), st_id_str("ok"), true,
                               &cseq, &count, NULL),
                 0);
    cr_assert_eq(cseq, 2);
    cr_assert_eq(count, 1);
    st_close(st);
    st = fx_open(old, true);
    p = changes_in(st, "team", 0, 10, 0);
    cr_assert_eq(st_page_count(p), 2);
    cr_assert_eq(st_page_at(p, 0)->mid, 2);
    cr_assert_eq(st_page_at(p, 1)->mid, 3);
    cr_assert_eq(st_page_at(p, 1)->n_reactions, 1);
    cr_assert_eq(st_page_last_cseq(p), 2);
    st_page_free(p);
    st_close(st);
    fx_rmtree(old);
    free(old);
}

/* A read is bounded whatever it asks: at most ST_CHANGES_LIMIT_MAX (500) entries. */
Test(changes, a_huge_limit_is_clamped)
{
    fx_join(s, "g", "alice");
    enum { N = 600 };
    static st_op ops[N];
    static char cids[N][16];
    for (size_t i = 0; i < N; i++) {
        snprintf(cids[i], sizeof(cids[i]), "c%zu", i);
        ops[i] = (st_op){.kind = ST_OP_APPEND,
                         .gid = st_id_str("g"),
                         .uid = st_id_str("alice"),
                         .cid = st_id_str(cids[i]),
                         .record = "m",
                         .record_n = 1};
    }
    fx_run_all(s, ops, N);
    for (size_t i = 0; i < N; i++)
        ops[i] = (st_op){.kind = ST_OP_EDIT,
                         .gid = st_id_str("g"),
                         .mid = i + 1,
                         .record = "edited",
                         .record_n = 6};
    fx_run_all(s, ops, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(ops[i].result, 0);
    st_page *p = changes("g", 0, 1000000);
    cr_assert_eq(st_page_count(p), 500);
    cr_assert(st_page_more(p));
    cr_assert_eq(st_page_upto(p), 500);
    st_page_free(p);
    p = changes("g", 500, 1000000);
    cr_assert_eq(st_page_count(p), 100);
    cr_assert_not(st_page_more(p));
    st_page_free(p);
}
