/* Writes a seed corpus of valid frames for the fuzz targets: one file per message. */
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

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_seeds REQ_DIR EVENTS_DIR\n");
        return 2;
    }
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

    pr_welcome w = {S("alice"), S("s-1"), 1, 50, 1000, 65536};
    pr_enc_welcome_begin(&sb, 1, &w, 1);
    pr_group g = {S("room"), 10, 4, 6};
    pr_enc_group_entry(&sb, &g);
    put(e, "welcome", &sb);
    pr_enc_record(&rec, S("alice"), (pr_body){S("hi"), false});
    pr_enc_msg(&sb, S("room"), 11, 1700000000000, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "msg", &sb);
    pr_enc_page_begin(&sb, 2, S("room"), 11, true, 2);
    pr_enc_page_entry(&sb, 9, 1, (pr_slice){(const uint8_t *)rec.data, rec.size});
    pr_enc_page_entry(&sb, 10, 2, (pr_slice){(const uint8_t *)rec.data, rec.size});
    put(e, "page", &sb);
    pr_enc_batch_begin(&sb, 3);
    pr_enc_sent(&sb, 5, S("room"), S("c1"), 11, 1);
    pr_enc_notify(&sb, S("room"), 12);
    pr_enc_err(&sb, 9, PR_E_NOT_MEMBER, "not a member", S("room"));
    put(e, "batch", &sb);
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_destroy(&rec);
    return 0;
}
