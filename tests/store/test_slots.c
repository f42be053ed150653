/*
 * Slot moves (tools/gw_slots, the real binary) under a sharded store that stays open: a
 * moved group reads back as it was, on its new shard's database and no longer on the old
 * one's; appends made throughout a move are each stored once (some refused while the
 * slots are fenced, and retried); a move to a new shard; a move that is refused does
 * nothing. PostgreSQL pass only: a map over databases of the suite's server.
 */
#include "fixture.h"
#include "pgfx.h"
#include "tclock.h"
#include "trun.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GW_SLOTS_BINARY
#error "GW_SLOTS_BINARY: the gw_slots of the build (tests/CMakeLists.txt)"
#endif

/* The test's map and its store over it (closed, and the databases dropped, after it). */
static char *map;
static st_store *s;

static void slots_fini(void)
{
    st_close(s);
    s = NULL;
    if (map)
        pgfx_db_drop(map);
    free(map);
    map = NULL;
}

TestSuite(slots, .fini = slots_fini);

/* A map of two shards and a store over it. */
static void start(void)
{
    PGFX_OWN_SHARDS();
    map = pgfx_shards_new(2);
    st_options o;
    st_options_init(&o);
    o.url = map;
    s = fx_open_options(&o);
}

static unsigned slot(const char *id)
{
    return st_slot_of(st_id_str(id));
}

/* Runs gw_slots with the arguments; its stdout and stderr in out (the test's log gets
 * them too); its exit status. */
static int gw_slots(char *out, size_t n, const char *fmt, ...)
{
    char args[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    int rc = trun(out, n, "%s %s 2>&1", GW_SLOTS_BINARY, args);
    cr_log_info("gw_slots %s:\n%s", args, out);
    return rc;
}

/* Shard i's database URL as the map has it now (malloc'd). */
static char *shard_url(unsigned i)
{
    st_slot_map *m = NULL;
    char why[300];
    cr_assert_eq(st_slot_map_read(map, &m, why, sizeof(why)), 0, "%s", why);
    const char *u = st_slot_map_url(m, i);
    cr_assert_not_null(u, "no shard %u", i);
    char *copy = strdup(u);
    st_slot_map_free(m);
    return copy;
}

/* Waits (at most 5 s: ten reads of the map) until the store has taken map version v. */
static void wait_map(uint64_t v)
{
    long t0 = tclock_ms();
    st_stats st;
    do {
        st_read_stats(s, &st);
        if (st.map_version == v)
            return;
        usleep(20000);
    } while (tclock_since(t0) < 5000);
    cr_assert_fail("the store has map version %lu after 5 s, not %lu",
                   (unsigned long)st.map_version, (unsigned long)v);
}

/* ---- a group as text: what must read back the same after a move ---------------------- */

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + (size_t)need + 1 > t->cap) {
        t->cap = 2 * (t->n + (size_t)need + 1);
        t->p = realloc(t->p, t->cap);
        cr_assert_not_null(t->p);
    }
    va_start(ap, fmt);
    vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    t->n += (size_t)need;
}

/* Every message (mid, times, version, record, cseq, reactions: dense mids checked), then
 * every member with its ack and read. */
static char *group_text(const char *gid)
{
    text t = {0};
    uint64_t from = 0, next = 1;
    for (;;) {
        st_page *p = NULL;
        cr_assert_eq(st_read_page(s, st_id_str(gid), ST_AFTER, from, 100, &p), 0, "%s", gid);
        put(&t, "last %lu first %lu cseq %lu\n", (unsigned long)st_page_last_mid(p),
            (unsigned long)st_page_first_mid(p), (unsigned long)st_page_last_cseq(p));
        for (size_t i = 0; i < st_page_count(p); i++) {
            const st_msg *m = st_page_at(p, i);
            cr_assert_eq(m->mid, next++, "%s: mids are dense", gid);
            put(&t, "%lu %lu v%lu %lu %d c%lu [%.*s]", (unsigned long)m->mid, (unsigned long)m->ts,
                (unsigned long)m->ver, (unsigned long)m->ver_ts, m->recalled,
                (unsigned long)m->cseq, (int)m->record_n, (const char *)m->record);
            for (size_t r = 0; r < m->n_reactions; r++)
                put(&t, " %.*s=%lu", (int)m->reactions[r].key.n, m->reactions[r].key.p,
                    (unsigned long)m->reactions[r].count);
            put(&t, "\n");
            from = m->mid;
        }
        bool more = st_page_more(p);
        st_page_free(p);
        if (!more)
            break;
    }
    st_members *ms = NULL;
    cr_assert_eq(st_read_members(s, st_id_str(gid), (st_id){0}, ST_MEMBERS_MAX, &ms), 0);
    for (size_t i = 0; i < st_members_count(ms); i++) {
        st_member m = st_members_at(ms, i);
        put(&t, "member %.*s ack %lu read %lu %d\n", (int)m.uid.n, m.uid.p, (unsigned long)m.ack,
            (unsigned long)m.read, m.has_read);
    }
    st_members_free(ms);
    return t.p;
}

/* A user's own rows (by the uid's slot): its last_seen and its not-before. */
static char *user_text(const char *uid)
{
    st_seen seen = {st_id_str(uid), 0};
    st_op op = {.kind = ST_OP_READ_SEEN, .seen = &seen, .n_seen = 1};
    fx_submit_wait(s, &op);
    cr_assert_eq(op.result, 0);
    uint64_t nbf = 0;
    cr_assert_eq(st_read_not_before(s, st_id_str(uid), &nbf), 0);
    text t = {0};
    put(&t, "%s seen %lu nbf %lu", uid, (unsigned long)seen.ms, (unsigned long)nbf);
    return t.p;
}

/* How many of the ids are on the database at url: `table`'s rows whose `col` is one. */
static int64_t rows_of(const char *url, const char *table, const char *col, char **ids, size_t n)
{
    text sql = {0};
    put(&sql, "SELECT count(*) FROM gw.%s WHERE %s IN (''", table, col);
    for (size_t i = 0; i < n; i++)
        put(&sql, ",'%s'", ids[i]);
    put(&sql, ")");
    int64_t v = pgfx_scalar(url, sql.p);
    free(sql.p);
    return v;
}

/* ---- 1. a move keeps everything ------------------------------------------------------ */

#define GROUPS 30
#define USERS 9

Test(slots, a_move_keeps_every_message_of_its_groups, .timeout = 120)
{
    start();
    char gid[GROUPS][16], *moved[GROUPS];
    char *before[GROUPS], *users_before[USERS];
    size_t n_moved = 0;
    /* Shard 0 has 0-2047: 0-2046 go, and shard 1 gets about half of the groups. */
    for (int g = 0; g < GROUPS; g++) {
        snprintf(gid[g], sizeof(gid[g]), "g%02d", g);
        fx_join(s, gid[g], "u1");
        fx_join(s, gid[g], "u2");
        fx_join(s, gid[g], "u3");
        char prefix[20]; /* a user's cids are its own across groups */
        snprintf(prefix, sizeof(prefix), "%s-", gid[g]);
        fx_append_n(s, gid[g], "u1", prefix, 1, 5);
        st_ack ack = {st_id_str(gid[g]), st_id_str("u2"), 3, 2, true};
        cr_assert_eq(st_acks_sync(s, &ack, 1, NULL), 0);
        uint64_t ver = 0;
        cr_assert_eq(st_edit_sync(s, st_id_str(gid[g]), 2, &ver, false, "edited", 6, NULL, NULL),
                     0);
        cr_assert_eq(st_react_sync(s, st_id_str(gid[g]), 1, st_id_str("u3"), st_id_str("+1"), true,
                                   NULL, NULL, NULL),
                     0);
        if (slot(gid[g]) <= 2046)
            moved[n_moved++] = gid[g];
        before[g] = group_text(gid[g]);
    }
    cr_assert(n_moved >= 5 && n_moved <= GROUPS - 5, "%zu of %d groups in slots 0-2046", n_moved,
              GROUPS);
    for (int u = 0; u < USERS; u++) {
        char uid[8];
        snprintf(uid, sizeof(uid), "u%d", u + 1);
        st_seen seen = {st_id_str(uid), 1000 + (uint64_t)u};
        st_op op = {.kind = ST_OP_SEEN, .seen = &seen, .n_seen = 1};
        fx_submit_wait(s, &op);
        cr_assert_eq(op.result, 0);
        cr_assert_eq(st_signout_sync(s, st_id_str(uid), NULL), 0);
        users_before[u] = user_text(uid);
    }

    char out[16384];
    cr_assert_eq(
        gw_slots(out, sizeof(out), "move --map %s --slots 0-2046 --to 1 --grace-ms 300", map), 0,
        "%s", out);
    cr_assert_not_null(strstr(out, "write pause: "), "%s", out);
    wait_map(2);

    for (int g = 0; g < GROUPS; g++) {
        char *after = group_text(gid[g]);
        cr_assert_str_eq(after, before[g], "%s (slot %u) reads back otherwise", gid[g],
                         slot(gid[g]));
        free(after);
        free(before[g]);
    }
    for (int u = 0; u < USERS; u++) {
        char uid[8];
        snprintf(uid, sizeof(uid), "u%d", u + 1);
        char *after = user_text(uid);
        cr_assert_str_eq(after, users_before[u], "slot %u", slot(uid));
        free(after);
        free(users_before[u]);
    }
    /* Where the rows are: the moved groups' on shard 1 only (the grace was over when
     * gw_slots ended), the others' where they were. */
    char *url0 = shard_url(0), *url1 = shard_url(1);
    cr_assert_eq(rows_of(url1, "groups", "gid", moved, n_moved), (int64_t)n_moved);
    cr_assert_eq(rows_of(url1, "msgs", "gid", moved, n_moved), (int64_t)(5 * n_moved));
    cr_assert_eq(rows_of(url1, "members", "gid", moved, n_moved), (int64_t)(3 * n_moved));
    cr_assert_eq(rows_of(url1, "reactions", "gid", moved, n_moved), (int64_t)n_moved);
    cr_assert_eq(rows_of(url0, "groups", "gid", moved, n_moved), 0);
    cr_assert_eq(rows_of(url0, "msgs", "gid", moved, n_moved), 0);
    cr_assert_eq(rows_of(url0, "sends", "gid", moved, n_moved), 0);
    int64_t kept = 0; /* shard 0 keeps slot 2047 */
    for (int g = 0; g < GROUPS; g++)
        kept += slot(gid[g]) == 2047;
    cr_assert_eq(pgfx_scalar(url0, "SELECT count(*) FROM gw.groups"), kept);
    cr_assert_eq(pgfx_scalar(url0, "SELECT count(*) FROM gw.fence WHERE state = 'gone'"), 2047);
    cr_assert_eq(pgfx_scalar(url1, "SELECT count(*) FROM gw.fence"), 0);
    /* A moved group takes writes on its new shard; a duplicate cid is still one. */
    bool dup = false;
    uint64_t mid = 0;
    char cid[20];
    snprintf(cid, sizeof(cid), "%s-1", moved[0]);
    cr_assert_eq(st_append_sync(s, st_id_str(moved[0]), st_id_str("u1"), st_id_str(cid), cid,
                                strlen(cid), &mid, NULL, &dup),
                 0);
    cr_assert(dup && mid == 1, "the sends rows moved with the group");
    cr_assert_eq(fx_append(s, moved[0], "u1", "new"), 6);
    free(url0);
    free(url1);
}

/* ---- 2. appends throughout a move ------------------------------------------------------ */

#define WRITERS 4
#define LOAD_GROUPS 20
#define MAX_SENT 200000

typedef struct writer {
    pthread_t t;
    int index;
    atomic_bool *stop;
    char (*gids)[16];
    /* Confirmed appends: group index and mid, by the n-th cid of this writer. */
    int *group;
    uint64_t *mid;
    size_t sent;
    uint64_t refused; /* ST_EIO answers (each retried with the same cid) */
    long longest_ms;  /* the longest one append waited, retries included */
    int failed;       /* another error: the test fails */
} writer;

static void *write_loop(void *arg)
{
    writer *w = arg;
    while (!atomic_load(w->stop) && w->sent < MAX_SENT) {
        int g = (int)((w->sent * WRITERS + (size_t)w->index) % LOAD_GROUPS);
        char cid[32];
        snprintf(cid, sizeof(cid), "w%d-%zu", w->index, w->sent);
        long t0 = tclock_ms();
        int rc;
        uint64_t mid = 0;
        while ((rc = st_append_sync(s, st_id_str(w->gids[g]), st_id_str("writer"), st_id_str(cid),
                                    cid, strlen(cid), &mid, NULL, NULL)) == ST_EIO) {
            w->refused++;
            usleep(5000);
        }
        if (rc != 0) {
            w->failed = rc;
            break;
        }
        if (tclock_since(t0) > w->longest_ms)
            w->longest_ms = tclock_since(t0);
        w->group[w->sent] = g;
        w->mid[w->sent++] = mid;
    }
    return NULL;
}

typedef struct load {
    atomic_bool stop;
    char gids[LOAD_GROUPS][16];
    writer w[WRITERS];
} load;

static void load_start(load *l, const char *prefix)
{
    atomic_init(&l->stop, false);
    for (int g = 0; g < LOAD_GROUPS; g++) {
        snprintf(l->gids[g], sizeof(l->gids[g]), "%s%02d", prefix, g);
        fx_join(s, l->gids[g], "writer");
    }
    for (int i = 0; i < WRITERS; i++) {
        writer *w = &l->w[i];
        *w = (writer){.index = i, .stop = &l->stop, .gids = l->gids};
        w->group = calloc(MAX_SENT, sizeof(*w->group));
        w->mid = calloc(MAX_SENT, sizeof(*w->mid));
        cr_assert(w->group && w->mid);
        cr_assert_eq(pthread_create(&w->t, NULL, write_loop, w), 0);
    }
}

/* Stops the writers, then checks every group: mids dense from 1, no cid twice, and every
 * confirmed append at its mid. The ST_EIO answers and the longest wait into *refused and
 * *longest_ms. */
static void load_stop_and_check(load *l, uint64_t *refused, long *longest_ms)
{
    atomic_store(&l->stop, true);
    *refused = 0;
    *longest_ms = 0;
    size_t confirmed = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(l->w[i].t, NULL);
        cr_assert_eq(l->w[i].failed, 0, "writer %d: %s", i, st_strerror(l->w[i].failed));
        *refused += l->w[i].refused;
        confirmed += l->w[i].sent;
        if (l->w[i].longest_ms > *longest_ms)
            *longest_ms = l->w[i].longest_ms;
    }
    cr_assert_gt(confirmed, 0);
    for (int g = 0; g < LOAD_GROUPS; g++) {
        /* cids[mid]: the cid stored at mid. */
        uint64_t last = 0;
        cr_assert_eq(st_read_last_mid(s, st_id_str(l->gids[g]), &last), 0);
        char **cids = calloc(last + 1, sizeof(*cids));
        uint64_t from = 0;
        for (;;) {
            st_page *p = NULL;
            cr_assert_eq(st_read_page(s, st_id_str(l->gids[g]), ST_AFTER, from, 500, &p), 0);
            for (size_t i = 0; i < st_page_count(p); i++) {
                const st_msg *m = st_page_at(p, i);
                cr_assert_eq(m->mid, from + 1, "%s: mids dense", l->gids[g]);
                cr_assert_leq(m->mid, last);
                cids[m->mid] = strndup(m->record, m->record_n);
                from = m->mid;
            }
            bool more = st_page_more(p);
            st_page_free(p);
            if (!more)
                break;
        }
        cr_assert_eq(from, last, "%s: messages 1..%lu", l->gids[g], (unsigned long)last);
        for (int i = 0; i < WRITERS; i++)
            for (size_t n = 0; n < l->w[i].sent; n++) {
                if (l->w[i].group[n] != g)
                    continue;
                char cid[32];
                snprintf(cid, sizeof(cid), "w%d-%zu", i, n);
                uint64_t mid = l->w[i].mid[n];
                cr_assert(mid >= 1 && mid <= last && strcmp(cids[mid], cid) == 0,
                          "%s: %s confirmed at mid %lu, which holds %s", l->gids[g], cid,
                          (unsigned long)mid, mid <= last && cids[mid] ? cids[mid] : "nothing");
            }
        /* No cid twice: sorted, no neighbours equal. */
        qsort(cids + 1, last, sizeof(*cids), (int (*)(const void *, const void *))strcmp);
        for (uint64_t m = 1; m <= last; m++) {
            cr_assert(m == 1 || strcmp(cids[m], cids[m - 1]) != 0, "%s: %s stored twice",
                      l->gids[g], cids[m]);
        }
        for (uint64_t m = 0; m <= last; m++)
            free(cids[m]);
        free(cids);
    }
    for (int i = 0; i < WRITERS; i++) {
        free(l->w[i].group);
        free(l->w[i].mid);
    }
}

Test(slots, a_move_under_load_loses_nothing, .timeout = 180)
{
    start();
    static load l;
    load_start(&l, "L");
    int in_range = 0;
    for (int g = 0; g < LOAD_GROUPS; g++)
        in_range += slot(l.gids[g]) <= 2046;
    cr_assert(in_range >= 3 && in_range <= LOAD_GROUPS - 3, "%d of the groups move", in_range);
    usleep(300000);
    char out[16384];
    int rc = gw_slots(out, sizeof(out), "move --map %s --slots 0-2046 --to 1 --grace-ms 300", map);
    wait_map(2);
    usleep(500000); /* appends to the moved groups on their new shard */
    uint64_t refused;
    long longest;
    load_stop_and_check(&l, &refused, &longest);
    cr_assert_eq(rc, 0, "%s", out);
    /* The writers append without a pause to groups of the moved slots: the fence refuses
     * them from its commit until the store reads the new map (0.5 s at the most after the
     * bump), which no move can make shorter than the copy. */
    cr_assert_gt(refused, 0, "no append was refused while the slots were fenced");
    cr_log_info("appends refused and retried: %lu; the longest append took %ld ms",
                (unsigned long)refused, longest);
}

/* ---- 2b. changes between the pre-copy and the fence ------------------------------------ */

/* What the store's writes made while gw_slots waited between its phases (an edit, a
 * recall, a reaction to pre-copied messages, a message more, a new group, a group deleted
 * and made again) is on the new shard after the move, without a copy in full: the message
 * more by the catch-up before the fence, the rest by the copy after it. */
Test(slots, changes_between_the_pre_copy_and_the_fence_move_too, .timeout = 120)
{
    start();
    char gid[12][16], *moved[13];
    size_t n_moved = 0;
    for (int g = 0; g < 12; g++) {
        snprintf(gid[g], sizeof(gid[g]), "c%02d", g);
        fx_join(s, gid[g], "u1");
        char prefix[20];
        snprintf(prefix, sizeof(prefix), "%s-", gid[g]);
        fx_append_n(s, gid[g], "u1", prefix, 1, 5);
        if (slot(gid[g]) <= 2046)
            moved[n_moved++] = gid[g];
    }
    cr_assert_geq(n_moved, 2, "fewer than 2 groups in slots 0-2046");
    const char *mg = moved[0], *reborn = moved[1];
    cr_assert_eq(st_react_sync(s, st_id_str(mg), 1, st_id_str("u1"), st_id_str("ok"), true, NULL,
                               NULL, NULL),
                 0);
    /* A group that is made between the phases, in a moved slot. */
    char fresh[16] = "";
    for (int i = 0; !fresh[0]; i++) {
        char id[16];
        snprintf(id, sizeof(id), "cnew%d", i);
        if (slot(id) <= 2046)
            snprintf(fresh, sizeof(fresh), "%s", id);
    }

    setenv("GW_SLOTS_TEST_PAUSE_MS", "6000", 1); /* room for the changes on a loaded machine */
    char cmd[1500];
    snprintf(cmd, sizeof(cmd), "%s move --map %s --slots 0-2046 --to 1 --grace-ms 300 2>&1",
             GW_SLOTS_BINARY, map);
    FILE *p = popen(cmd, "r");
    unsetenv("GW_SLOTS_TEST_PAUSE_MS");
    cr_assert_not_null(p);
    static char out[32768];
    size_t len = 0;
    bool between = false;
    while (!between && fgets(out + len, (int)(sizeof(out) - len), p)) {
        between = strstr(out + len, "pre-copy: committed") != NULL;
        len += strlen(out + len);
    }
    cr_assert(between, "gw_slots ended before its pre-copy:\n%s", out);
    long t0 = tclock_ms();
    uint64_t ver = 0;
    cr_assert_eq(st_edit_sync(s, st_id_str(mg), 2, &ver, false, "edited", 6, NULL, NULL), 0);
    ver = 0;
    cr_assert_eq(st_edit_sync(s, st_id_str(mg), 3, &ver, true, "u1", 2, NULL, NULL), 0);
    cr_assert_eq(st_react_sync(s, st_id_str(mg), 4, st_id_str("u1"), st_id_str("+1"), true, NULL,
                               NULL, NULL),
                 0);
    cr_assert_eq(st_react_sync(s, st_id_str(mg), 1, st_id_str("u1"), st_id_str("ok"), false, NULL,
                               NULL, NULL),
                 0);
    cr_assert_eq(fx_append(s, mg, "u1", "after-pre-copy"), 6);
    fx_join(s, fresh, "u2");
    cr_assert_eq(fx_append(s, fresh, "u2", "fresh-1"), 1);
    st_op del = {.kind = ST_OP_DELETE_GROUP, .gid = st_id_str(reborn)};
    fx_submit_wait(s, &del);
    cr_assert_eq(del.result, 0);
    st_list_free(del.list); /* its members: the caller's */
    fx_join(s, reborn, "u3");
    cr_assert_eq(fx_append(s, reborn, "u3", "reborn-1"), 1);
    cr_assert_lt(tclock_since(t0), 5000, "the changes took longer than gw_slots waits");
    char *before[12], *fresh_before = group_text(fresh);
    for (int g = 0; g < 12; g++)
        before[g] = group_text(gid[g]);
    len += fread(out + len, 1, sizeof(out) - 1 - len, p);
    out[len] = 0;
    int st = pclose(p);
    cr_log_info("gw_slots move:\n%s", out);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
    /* The message more went before the fence, in the catch-up (the group made again is
     * not the one pre-copied: the copy after the fence takes it whole, as the new one). */
    cr_assert_not_null(strstr(out, "catch-up 1: messages the groups took since: 1,"), "%s", out);
    /* The edit, the recall, the reaction set and the one cleared: four messages again. */
    cr_assert_not_null(strstr(out, " 4 of their messages changed since"), "%s", out);
    cr_assert_null(strstr(out, "copied again in full"), "%s", out);
    wait_map(2);

    for (int g = 0; g < 12; g++) {
        char *after = group_text(gid[g]);
        cr_assert_str_eq(after, before[g], "%s (slot %u) reads back otherwise", gid[g],
                         slot(gid[g]));
        free(after);
        free(before[g]);
    }
    char *fresh_after = group_text(fresh);
    cr_assert_str_eq(fresh_after, fresh_before);
    free(fresh_after);
    free(fresh_before);
    /* On the new shard's database itself. */
    char *url0 = shard_url(0), *url1 = shard_url(1), sql[300];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM gw.msgs WHERE gid = '%s' AND mid = 2 AND ver = 1"
             " AND record = 'edited'::bytea",
             mg);
    cr_assert_eq(pgfx_scalar(url1, sql), 1, "the edit");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM gw.msgs WHERE gid = '%s' AND mid = 3 AND recalled", mg);
    cr_assert_eq(pgfx_scalar(url1, sql), 1, "the recall");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM gw.reactions WHERE gid = '%s' AND mid = 4",
             mg);
    cr_assert_eq(pgfx_scalar(url1, sql), 1, "the reaction set");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM gw.reactions WHERE gid = '%s' AND mid = 1",
             mg);
    cr_assert_eq(pgfx_scalar(url1, sql), 0, "the reaction cleared");
    moved[n_moved++] = fresh;
    cr_assert_eq(rows_of(url1, "groups", "gid", moved, n_moved), (int64_t)n_moved);
    /* 5 each, mg's one more, reborn's 1 (not 5), fresh's 1. */
    cr_assert_eq(rows_of(url1, "msgs", "gid", moved, n_moved), (int64_t)(5 * (n_moved - 1) - 2));
    cr_assert_eq(rows_of(url1, "sends", "gid", moved, n_moved), (int64_t)(5 * (n_moved - 1) - 2));
    cr_assert_eq(rows_of(url0, "msgs", "gid", moved, n_moved), 0);
    free(url0);
    free(url1);
}

/* ---- 3. a new shard ------------------------------------------------------------------ */

Test(slots, a_move_to_a_new_shard, .timeout = 120)
{
    start();
    char *url0 = shard_url(0);
    /* A third database on the suite's server, named beside shard 0's. */
    char admin[600], db[200], url2[700], sql[300];
    pgfx_admin_url(url0, admin, sizeof(admin), db, sizeof(db));
    const char *slash = strrchr(url0, '/'), *q = strchr(slash, '?');
    snprintf(url2, sizeof(url2), "%.*s/%s_new%s", (int)(slash - url0), url0, db, q ? q : "");
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s_new", db);
    pgfx_scalar(admin, sql);

    char gid[10][16], *before[10], *moved[10];
    size_t n_moved = 0;
    for (int g = 0; g < 10; g++) {
        snprintf(gid[g], sizeof(gid[g]), "n%02d", g);
        fx_join(s, gid[g], "u1");
        char prefix[20];
        snprintf(prefix, sizeof(prefix), "%s-", gid[g]);
        fx_append_n(s, gid[g], "u1", prefix, 1, 3);
        before[g] = group_text(gid[g]);
        if (slot(gid[g]) <= 1023)
            moved[n_moved++] = gid[g];
    }
    cr_assert_gt(n_moved, 0, "no group in slots 0-1023");
    char out[16384];
    int rc = gw_slots(out, sizeof(out),
                      "move --map %s --slots 0-1023 --new-shard '%s' --grace-ms 0", map, url2);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_null(strstr(out, url2), "a URL printed whole: %s", out);
    wait_map(2);
    st_stats st;
    st_read_stats(s, &st);
    cr_assert_eq(st.shards, 3);
    for (int g = 0; g < 10; g++) {
        char *after = group_text(gid[g]);
        cr_assert_str_eq(after, before[g]);
        free(after);
        free(before[g]);
    }
    char *new_url = shard_url(2);
    cr_assert_str_eq(new_url, url2);
    cr_assert_eq(rows_of(url2, "groups", "gid", moved, n_moved), (int64_t)n_moved);
    cr_assert_eq(rows_of(url0, "groups", "gid", moved, n_moved), 0);
    cr_assert_eq(fx_append(s, moved[0], "u1", "later"), 4);
    cr_assert_eq(gw_slots(out, sizeof(out), "show --map %s --groups", map), 0, "%s", out);
    cr_assert_not_null(strstr(out, "shard 2 "), "%s", out);
    free(new_url);
    free(url0);
}

/* ---- 4. refused ----------------------------------------------------------------------- */

Test(slots, a_move_of_two_shards_slots_is_refused_and_fences_nothing)
{
    start();
    char out[8192];
    int rc = gw_slots(out, sizeof(out), "move --map %s --slots 2000-2100 --to 1", map);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert_not_null(strstr(out, "more than one shard"), "%s", out);
    cr_assert_eq(gw_slots(out, sizeof(out), "move --map %s --slots 0-10 --to 0", map), 2, "%s",
                 out);
    cr_assert_eq(gw_slots(out, sizeof(out), "move --map %s --slots 0-10 --to 5", map), 2, "%s",
                 out);
    for (unsigned i = 0; i < 2; i++) {
        char *u = shard_url(i);
        cr_assert_eq(pgfx_scalar(u, "SELECT count(*) FROM gw.fence"), 0, "shard %u", i);
        free(u);
    }
    st_slot_map *m = NULL;
    char why[200];
    cr_assert_eq(st_slot_map_read(map, &m, why, sizeof(why)), 0);
    cr_assert_eq(st_slot_map_version(m), 1);
    st_slot_map_free(m);
}

/* ---- the write pause of a large move (a measurement: GW_SLOTS_MEASURE=1) ------------- */

#define BIG_GROUPS 1000
#define BIG_MSGS 50

/* BIG_GROUPS groups in slots 0..1023, each with one member and BIG_MSGS messages. */
static void fill_big(void)
{
    static char gid[BIG_GROUPS][16], cid[BIG_GROUPS * BIG_MSGS][32];
    static st_op ops[BIG_GROUPS * BIG_MSGS];
    int g = 0;
    for (int i = 0; g < BIG_GROUPS; i++) {
        snprintf(gid[g], sizeof(gid[g]), "big%05d", i);
        if (slot(gid[g]) <= 1023)
            g++;
    }
    for (g = 0; g < BIG_GROUPS; g++)
        ops[g] = (st_op){.kind = ST_OP_JOIN, .gid = st_id_str(gid[g]), .uid = st_id_str("u1")};
    fx_run_all(s, ops, BIG_GROUPS);
    size_t n = 0;
    for (g = 0; g < BIG_GROUPS; g++)
        for (int m = 0; m < BIG_MSGS; m++, n++) {
            snprintf(cid[n], sizeof(cid[n]), "%.15s-%d", gid[g], m);
            ops[n] = (st_op){.kind = ST_OP_APPEND,
                             .gid = st_id_str(gid[g]),
                             .uid = st_id_str("u1"),
                             .cid = st_id_str(cid[n]),
                             .record = cid[n],
                             .record_n = strlen(cid[n])};
        }
    for (size_t i = 0; i < n; i += 2000)
        fx_run_all(s, ops + i, n - i < 2000 ? n - i : 2000);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ops[i].result, 0);
}

Test(slots, the_write_pause_of_a_large_move, .timeout = 600)
{
    if (!getenv("GW_SLOTS_MEASURE"))
        cr_skip_test("a measurement: GW_SLOTS_MEASURE=1");
    start();
    long t0 = tclock_ms();
    fill_big();
    cr_log_info("filled %d groups of %d messages in slots 0-1023 in %ld ms", BIG_GROUPS, BIG_MSGS,
                tclock_since(t0));
    static load l;
    load_start(&l, "P");
    usleep(500000);
    char out[16384];
    int rc = gw_slots(out, sizeof(out), "move --map %s --slots 0-1023 --to 1 --grace-ms 1000", map);
    wait_map(2);
    usleep(500000);
    uint64_t refused;
    long longest;
    load_stop_and_check(&l, &refused, &longest);
    cr_assert_eq(rc, 0, "%s", out);
    const char *p = strstr(out, "write pause: ");
    cr_assert_not_null(p, "%s", out);
    fprintf(stderr,
            "slots: a move of 1024 slots holding %d groups of %d messages under 4 writers: "
            "%.*s; appends refused and retried %lu, the longest append %ld ms\n",
            BIG_GROUPS, BIG_MSGS, (int)strcspn(p, "("), p, (unsigned long)refused, longest);
}
