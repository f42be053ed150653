/*
 * Reference-counted bytes: one encoded message queued on many sessions. A push is encoded
 * once and every member's session queue holds a reference to the same buffer. Used on the
 * service thread only, so the count is a plain integer.
 */
#ifndef GW_BUF_H
#define GW_BUF_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gw_buf {
    unsigned refs; /* owners; the last gw_buf_unref frees */
    size_t len;
    uint8_t data[];
} gw_buf;

/* A buffer holding a copy of the sbuffer's bytes, with one reference. NULL on ENOMEM. */
gw_buf *gw_buf_from(const msgpack_sbuffer *sb);
gw_buf *gw_buf_ref(gw_buf *b);
void gw_buf_unref(gw_buf *b);

#endif
