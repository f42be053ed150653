#include "gw_core.h"

#include <stdlib.h>
#include <string.h>

gw_buf *gw_buf_from(const msgpack_sbuffer *sb)
{
    gw_buf *b = malloc(sizeof(*b) + sb->size);
    if (!b)
        return NULL;
    b->refs = 1;
    b->len = sb->size;
    memcpy(b->data, sb->data, sb->size);
    return b;
}

gw_buf *gw_buf_ref(gw_buf *b)
{
    b->refs++;
    return b;
}

void gw_buf_unref(gw_buf *b)
{
    if (b && --b->refs == 0)
        free(b);
}
