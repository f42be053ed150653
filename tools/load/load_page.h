/*
 * load_page: the lean reader of server frames that gw_load's offline pull uses.
 *
 * A page of 500 messages through pr_decode_events is unpacked into objects and checked
 * field by field, bodies included, before the first byte of it is used; the pull only
 * needs a page's rid, last_mid, more, its number of entries, and each entry's mid (to
 * check they are dense, with no duplicate and no gap). This reader walks the MessagePack
 * bytes in place: it reads a page's fields up to its entries, so the next pull can go
 * out at once, then walks the entries reading only `mid` and skipping the rest by their
 * lengths. Any other message is handed back as its bytes, for pr_decode_events.
 *
 * A frame is one message (a map) or a batch (an array of maps), as the gateway writes.
 */
#ifndef LOAD_PAGE_H
#define LOAD_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A cursor over a frame's messages. */
typedef struct load_frame {
    const uint8_t *p, *end;
    uint32_t left; /* messages not read yet */
    bool bad;      /* not what the gateway sends: stop reading */
} load_frame;

/* One message of a frame. */
typedef struct load_msg {
    const uint8_t *raw; /* not a page: the message's bytes (a frame of its own) */
    size_t raw_n;
    bool is_page;
    bool has_rid;
    uint64_t rid;
    uint64_t last_mid; /* the group's last mid when the page was read */
    bool more;
    uint32_t n;             /* entries */
    const uint8_t *entries; /* private: where the entries start */
    bool entries_last;      /* private: the frame goes on after them */
} load_msg;

void load_frame_begin(load_frame *fr, const uint8_t *f, size_t n);
/* The next message: 1 and *m, 0 at the end of the frame, -1 for bytes that are not what
 * the gateway sends. After a page, load_page_walk it before the next call. */
int load_frame_next(load_frame *fr, load_msg *m);
/* Walks a page's entries: they must carry the mids first, first + 1, ... in order.
 * Returns how many do not (0: dense, no duplicate, no gap), or -1 for bad bytes. */
long load_page_walk(load_frame *fr, const load_msg *m, uint64_t first);

#endif
