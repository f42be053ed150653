/* Writes a seed corpus of valid frames for the fuzz targets: one file per message, and
 * for fuzz_session scripts of requests in its format (fuzz_session.h). */
#include "fuzz_session.h"
#include "proto.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define S(x) ((pr_slice){(const uint8_t *)(x), strlen(x)})

static void put(const char *dir, const char *name, msgpack_sbuffer *sb)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(sb->data, 1, sb->size, f);
        fclose(f);
    }
    sb->size = 0;
}

/* A session script being written: steps appended to one sbuffer. */
static void step(msgpack_sbuffer *script, enum fs_step st, int slot, int arg)
{
    unsigned char op = FS_OP(st, slot, arg);
    msgpack_sbuffer_write(script, (const char *)&op, 1);
}

/* A frame step carrying the frame in sb (then emptied). */
static void frame(msgpack_sbuffer *script, enum fs_step st, int slot, int arg, msgpack_sbuffer *sb)
{
    step(script, st, slot, arg);
    unsigned char len[2] = {(unsigned char)(sb->size >> 8), (unsigned char)sb->size};
    msgpack_sbuffer_write(script, (const char *)len, 2);
    msgpack_sbuffer_write(script, sb->data, sb->size);
    sb->size = 0;
}

/* Slots 0 and 1 each write what they have queued. */
static void both_write(msgpack_sbuffer *script)
{
    step(script, FS_WRITE, 0, 0);
    step(script, FS_WRITE, 1, 0);
}

/* Two slots say hello (slot[i] with token[i]), then both join gid: two users in a group. */
static void both_join(msgpack_sbuffer *script, msgpack_sbuffer *sb, const int slot[2],
                      const int token[2], const char *gid)
{
    for (int i = 0; i < 2; i++)
        step(script, FS_HELLO, slot[i], token[i]);
    for (int i = 0; i < 2; i++) {
        pr_enc_join(sb, 1, S(gid));
        frame(script, FS_FRAME, slot[i], 0, sb);
    }
}

/* Scripts for fuzz_session: users signed in with the harness's tokens (0 alice, 1 bob,
 * 2 carol, 3 dave who may join only room and r2) doing what clients do. */
static void session_seeds(const char *dir)
{
    mkdir(dir, 0755);
    msgpack_sbuffer sc, sb;
    msgpack_sbuffer_init(&sc);
    msgpack_sbuffer_init(&sb);
    pr_body hi = {S("hi"), false}, bin = {S("\x01\x02"), true};

    /* One user: join, send twice, read back every way, ack, leave. */
    step(&sc, FS_HELLO, 0, 0);
    pr_enc_join(&sb, 1, S("room"));
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_send(&sb, 2, S("room"), S("c1"), hi);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_send(&sb, 3, S("room"), S("c2"), bin);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_enter(&sb, 4, S("room"), 0);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_pull(&sb, 5, S("room"), true, 3, 1);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_pull(&sb, 6, S("room"), false, 0, 20);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_ack a1 = {S("room"), 2};
    pr_enc_ack(&sb, &a1, 1);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_groups_req(&sb, 7);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    step(&sc, FS_WRITE, 0, 0);
    step(&sc, FS_TICK, 0, 0);
    pr_enc_leave(&sb, 8, S("room"));
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_ping(&sb, 9);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    put(dir, "one-user", &sc);

    /* Before hello: a message over the 10 KiB a hello may take, in two pieces (closed
     * 1009), on another slot a JSON array as a first text frame (4001), then a hello. */
    static char big[12000];
    memset(big, 'x', sizeof(big));
    msgpack_sbuffer_write(&sb, big, sizeof(big));
    frame(&sc, FS_SPLIT, 2, 3, &sb);
    msgpack_sbuffer_write(&sb, "[{},{}]", 7);
    frame(&sc, FS_TEXT, 3, 0, &sb);
    step(&sc, FS_WRITE, 2, 0);
    step(&sc, FS_WRITE, 3, 0);
    step(&sc, FS_HELLO, 1, 1);
    put(dir, "before-hello", &sc);

    /* One user joining three groups at once (joins pipelined, as a client does at start),
     * a send to each, its group list. */
    step(&sc, FS_HELLO, 1, 0);
    static const char *const three[] = {"room", "r2", "busy"};
    for (int i = 0; i < 3; i++) {
        pr_enc_join(&sb, (uint64_t)i, S(three[i]));
        frame(&sc, FS_FRAME, 1, i < 2, &sb);
    }
    for (int i = 0; i < 3; i++) {
        pr_enc_send(&sb, 10 + (uint64_t)i, S(three[i]), S(three[i]), hi);
        frame(&sc, FS_FRAME, 1, 0, &sb);
    }
    pr_enc_groups_req(&sb, 20);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    step(&sc, FS_WRITE, 1, 0);
    put(dir, "three-groups", &sc);

    /* Two users: pushes, a resend, a reconnect that enters after its ack. */
    both_join(&sc, &sb, (int[2]){0, 1}, (int[2]){0, 1}, "r2");
    pr_enc_send(&sb, 2, S("r2"), S("m1"), hi);
    frame(&sc, FS_FRAME, 0, 1, &sb); /* pipelined with the next */
    pr_enc_send(&sb, 3, S("r2"), S("m2"), hi);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_send(&sb, 4, S("r2"), S("m1"), hi); /* resend: the first mid again */
    frame(&sc, FS_FRAME, 0, 0, &sb);
    step(&sc, FS_WRITE, 1, 0);
    pr_ack a2 = {S("r2"), 1};
    pr_enc_ack(&sb, &a2, 1);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    step(&sc, FS_TICK, 0, 0);
    step(&sc, FS_CLOSE, 1, 0);
    step(&sc, FS_HELLO, 1, 1);
    pr_enc_enter(&sb, 5, S("r2"), 0);
    frame(&sc, FS_SPLIT, 1, 4, &sb);
    both_write(&sc);
    put(dir, "two-users", &sc);

    /* What members see of each other: reads, receipts, a watch and its end, presence with
     * a subscription, typing (twice: the second dropped). */
    both_join(&sc, &sb, (int[2]){0, 1}, (int[2]){0, 1}, "room");
    pr_enc_send(&sb, 2, S("room"), S("p1"), hi);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    step(&sc, FS_WRITE, 1, 0);
    pr_ack r1 = {S("room"), 1};
    pr_enc_read(&sb, &r1, 1); /* a read ahead of the ack */
    frame(&sc, FS_FRAME, 1, 0, &sb);
    step(&sc, FS_TICK, 0, 0);
    pr_enc_groups_req(&sb, 8); /* unread counts from the read now */
    frame(&sc, FS_FRAME, 1, 0, &sb);
    step(&sc, FS_WRITE, 1, 0);
    pr_enc_ack(&sb, &r1, 1);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    step(&sc, FS_TICK, 0, 0);
    pr_enc_receipts_req(&sb, 3, S("room"), 1);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    uint64_t mids[2] = {1, 2};
    pr_enc_watch(&sb, 4, S("room"), mids, 2);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_presence_req(&sb, 5, S("room"), 1);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_typing(&sb, S("room"));
    frame(&sc, FS_FRAME, 1, 0, &sb);
    pr_enc_typing(&sb, S("room"));
    frame(&sc, FS_FRAME, 1, 0, &sb);
    pr_enc_watch(&sb, 6, S("room"), NULL, 0);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_presence_req(&sb, 7, S("room"), 0);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    both_write(&sc);
    put(dir, "peers", &sc);

    /* A message's versions: an edit, the same again, one by another member (refused), a
     * recall, an edit of the tombstone (refused), a page over them. */
    both_join(&sc, &sb, (int[2]){0, 1}, (int[2]){0, 1}, "room");
    pr_enc_send(&sb, 2, S("room"), S("v1"), hi);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    both_write(&sc);
    pr_enc_edit(&sb, 3, S("room"), 1, 1, (pr_body){S("hi!"), false});
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_edit(&sb, 4, S("room"), 1, 1, (pr_body){S("hi!"), false});
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_edit(&sb, 5, S("room"), 1, 0, (pr_body){S("not mine"), false});
    frame(&sc, FS_FRAME, 1, 0, &sb);
    both_write(&sc);
    pr_enc_recall(&sb, 6, S("room"), 1);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_edit(&sb, 7, S("room"), 1, 0, (pr_body){S("back"), false});
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_pull(&sb, 8, S("room"), false, 0, 10);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    both_write(&sc);
    put(dir, "versions", &sc);

    /* Changes and reactions (issue 36): reactions set, again (a duplicate), by the other
     * member, cleared, a bad key, on a recalled message; the changes after 0 and after 1. */
    both_join(&sc, &sb, (int[2]){0, 1}, (int[2]){0, 1}, "rx");
    pr_enc_send(&sb, 2, S("rx"), S("r1"), hi);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    both_write(&sc);
    pr_enc_react(&sb, 3, S("rx"), 1, S("+1"), true);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_react(&sb, 4, S("rx"), 1, S("+1"), true);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_react(&sb, 5, S("rx"), 1, S("\xe2\x9d\xa4"), true);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    pr_enc_react(&sb, 6, S("rx"), 1, S("+1"), false);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_react(&sb, 7, S("rx"), 1, S("a\tb"), true);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    both_write(&sc);
    pr_enc_recall(&sb, 8, S("rx"), 1);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    pr_enc_react(&sb, 9, S("rx"), 1, S("+1"), true);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    pr_enc_changes_req(&sb, 10, S("rx"), 0, 10);
    frame(&sc, FS_FRAME, 1, 0, &sb);
    pr_enc_changes_req(&sb, 11, S("rx"), 1, 0);
    frame(&sc, FS_FRAME, 0, 0, &sb);
    both_write(&sc);
    put(dir, "changes", &sc);

    /* A slow consumer: its socket backs up while sends pile up, then it drains. */
    both_join(&sc, &sb, (int[2]){0, 2}, (int[2]){2, 0}, "busy");
    step(&sc, FS_WRITE, 2, 0);
    step(&sc, FS_CHOKE, 2, 0);
    for (int i = 0; i < 12; i++) {
        char cid[16];
        snprintf(cid, sizeof(cid), "s%d", i);
        pr_enc_send(&sb, (uint64_t)i, S("busy"), S(cid), hi);
        frame(&sc, FS_FRAME, 0, 0, &sb);
    }
    step(&sc, FS_CHOKE, 2, 0);
    step(&sc, FS_WRITE, 2, 0);
    pr_enc_pull(&sb, 20, S("busy"), false, 0, 20);
    frame(&sc, FS_FRAME, 2, 0, &sb);
    put(dir, "slow-consumer", &sc);

    /* A restricted token, a text frame, a bad frame, a request before hello. */
    pr_enc_join(&sb, 1, S("room"));
    frame(&sc, FS_FRAME, 3, 0, &sb);
    step(&sc, FS_HELLO, 2, 3);
    pr_enc_join(&sb, 1, S("room"));
    frame(&sc, FS_FRAME, 2, 0, &sb);
    pr_enc_join(&sb, 2, S("elsewhere"));
    frame(&sc, FS_FRAME, 2, 0, &sb);
    pr_enc_ping(&sb, 3);
    frame(&sc, FS_TEXT, 2, 0, &sb);
    msgpack_sbuffer_write(&sb, "\x81\xa1t", 3);
    frame(&sc, FS_FRAME, 2, 0, &sb);
    step(&sc, FS_HELLO, 1, 4); /* an expired token */
    step(&sc, FS_WRITE, 1, 0);
    step(&sc, FS_WRITE, 2, 0);
    step(&sc, FS_WRITE, 3, 0);
    put(dir, "refusals", &sc);

    /* Time passing: pings answered, a backed-up client hung up, no hello in time. */
    step(&sc, FS_HELLO, 0, 0);
    step(&sc, FS_HELLO, 1, 1);
    step(&sc, FS_CHOKE, 1, 0);
    step(&sc, FS_WRITE, 2, 0); /* connects, says nothing */
    for (int i = 0; i < 20; i++)
        step(&sc, FS_TICK, 0, 7); /* 2 s each */
    step(&sc, FS_WRITE, 0, 0);
    step(&sc, FS_WRITE, 2, 0);
    for (int i = 0; i < 20; i++)
        step(&sc, FS_TICK, 0, 7);
    put(dir, "idle", &sc);
    msgpack_sbuffer_destroy(&sc);
    msgpack_sbuffer_destroy(&sb);
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: make_seeds REQ_DIR EVENTS_DIR [SESSION_DIR]\n");
        return 2;
    }
    if (argc == 4)
        session_seeds(argv[3]);
    mkdir(argv[1], 0755);
    mkdir(argv[2], 0755);
    msgpack_sbuffer sb, rec;
    msgpack_sbuffer_init(&sb);
    msgpack_sbuffer_init(&rec);
    const char *q = argv[1], *e = argv[2];
    pr_enc_hello(&sb, 1, S("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.sig"));
    put(q, "hello", &sb);
    pr_enc_join(&sb, 2, S("room"));
    put(q, "join", &sb);
    pr_enc_leave(&sb, 3, S("room"));
    put(q, "leave", &sb);
    pr_enc_groups_req(&sb, 4);
    put(q, "groups", &sb);
    pr_enc_send(&sb, 5, S("room"), S("c1"), (pr_body){S("hello"), false});
    put(q, "send", &sb);
    pr_ack acks[2] = {{S("room"), 7}, {S("other"), 9}};
    pr_enc_ack(&sb, acks, 2);
    put(q, "ack", &sb);
    pr_enc_enter(&sb, 6, S("room"), 20);
    put(q, "enter", &sb);
    pr_enc_pull(&sb, 7, S("room"), true, 50, 100);
    put(q, "pull", &sb);
    pr_enc_ping(&sb, 8);
    put(q, "ping", &sb);
    pr_enc_read(&sb, acks, 2);
    put(q, "read", &sb);
    pr_enc_receipts_req(&sb, 9, S("room"), 7);
    put(q, "receipts", &sb);
    uint64_t mids[3] = {5, 6, 7};
    pr_enc_watch(&sb, 10, S("room"), mids, 3);
    put(q, "watch", &sb);
    pr_enc_presence_req(&sb, 11, S("room"), 1);
    put(q, "presence", &sb);
    pr_enc_typing(&sb, S("room"));
    put(q, "typing", &sb);
    pr_enc_edit(&sb, 12, S("room"), 7, 2, (pr_body){S("fixed"), false});
    put(q, "edit", &sb);
    pr_enc_recall(&sb, 13, S("room"), 7);
    put(q, "recall", &sb);
    pr_enc_changes_req(&sb, 14, S("room"), 3, 50);
    put(q, "changes", &sb);
    pr_enc_react(&sb, 15, S("room"), 7, S("\xf0\x9f\x91\x8d"), true);
    put(q, "react", &sb);

    pr_welcome w = {S("alice"), S("s-1"), 1, 50, 1000, 65536, false};
    pr_enc_welcome_begin(&sb, 1, &w, 1);
    pr_group g = {.gid = S("room"), .last_mid = 10, .ack = 4, .unread = 6};
    pr_enc_group_entry(&sb, &g);
    put(e, "welcome", &sb);
    pr_enc_record(&rec, S("alice"), (pr_body){S("hi"), false});
    pr_enc_msg(&sb, S("room"), 11, 1700000000000, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "msg", &sb);
    pr_enc_page_begin(&sb, 2, S("room"), 1, 11, 0, true, 2);
    pr_enc_page_entry(&sb, 9, 1, (pr_slice){(const uint8_t *)rec.data, rec.size});
    pr_enc_page_entry(&sb, 10, 2, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "page", &sb);
    /* A page from below the horizon (retention): it starts there and says so. */
    pr_enc_page_begin(&sb, 3, S("room"), 9, 11, 9, true, 2);
    pr_enc_page_entry(&sb, 9, 1, (pr_slice){(const uint8_t *)rec.data, rec.size});
    pr_enc_page_entry(&sb, 10, 2, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "page-gone", &sb);
    pr_enc_batch_begin(&sb, 3);
    pr_enc_sent(&sb, 5, S("room"), S("c1"), 11, 1);
    pr_enc_notify(&sb, S("room"), 12);
    pr_enc_err(&sb, 9, PR_E_NOT_MEMBER, "not a member", S("room"));
    put(e, "batch", &sb);
    pr_enc_receipts_begin(&sb, 9, S("room"), 7, 2, 1, 3, 1);
    pr_enc_uid_entry(&sb, S("bob"));
    put(e, "receipts", &sb);
    pr_enc_cursors_begin(&sb, S("room"), 2);
    pr_cursor c1 = {S("bob"), 7, 5, true}, c2 = {S("carol"), 6, 0, false};
    pr_enc_cursor_entry(&sb, &c1);
    pr_enc_cursor_entry(&sb, &c2);
    put(e, "cursors", &sb);
    pr_enc_presence_begin(&sb, 11, S("room"), 1, 2, 2);
    pr_presence p1 = {S("bob"), true, 1700000000000}, p2 = {S("carol"), false, 1690000000000};
    pr_enc_presence_entry(&sb, &p1);
    pr_enc_presence_entry(&sb, &p2);
    put(e, "presence", &sb);
    pr_enc_online_begin(&sb, S("room"), 1);
    pr_enc_presence_entry(&sb, &p2);
    put(e, "online", &sb);
    pr_enc_typing_push(&sb, S("room"), S("bob"), 5000);
    put(e, "typing", &sb);
    pr_version v1 = {.ver = 2, .ts = 1700000000001};
    pr_enc_version(&sb, 12, S("room"), 7, &v1, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "edited", &sb);
    msgpack_sbuffer tomb;
    msgpack_sbuffer_init(&tomb);
    pr_enc_tombstone(&tomb, S("alice"));
    pr_version v2 = {.ver = 3, .ts = 1700000000002, .recalled = true};
    pr_enc_version(&sb, PR_NO_RID, S("room"), 7, &v2,
                   (pr_slice){(const uint8_t *)tomb.data, tomb.size});
    put(e, "recalled", &sb);
    pr_enc_page_begin(&sb, 2, S("room"), 1, 8, 0, false, 2);
    pr_enc_page_entry_v(&sb, 7, 1, &v2, (pr_slice){(const uint8_t *)tomb.data, tomb.size});
    pr_enc_page_entry_v(&sb, 8, 2, &v1, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "page-versions", &sb);
    pr_changes ch = {S("room"), 2, 9, 12, 1, 8, 0, true};
    pr_enc_changes_begin(&sb, 14, &ch, 2);
    pr_reaction rx[2] = {{S("+1"), 2, true}, {S("ok"), 1, false}};
    pr_version v3 = {.ver = 2, .ts = 1700000000003, .cseq = 8};
    pr_enc_page_entry_r(&sb, 7, 1, &v3, (pr_slice){(const uint8_t *)rec.data, rec.size}, rx, 2);
    pr_version v4 = {.cseq = 9};
    pr_enc_page_entry_r(&sb, 8, 2, &v4, (pr_slice){(const uint8_t *)rec.data, rec.size}, rx, 1);
    put(e, "changes", &sb);
    pr_reacted rd = {S("room"), 7, S("bob"), S("+1"), true, 2, 10, false};
    pr_enc_batch_begin(&sb, 2);
    pr_enc_reacted(&sb, PR_NO_RID, &rd);
    pr_enc_changed(&sb, S("room"), 12);
    put(e, "reacted-changed", &sb);
    msgpack_sbuffer_destroy(&tomb);
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_destroy(&rec);
    return 0;
}
