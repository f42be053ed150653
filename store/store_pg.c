/* placeholder while the RocksDB side is checked */
#include "store_internal.h"
#include <stdio.h>
static int pg_open(const st_options *o, void **be, char *why, size_t why_len)
{
    snprintf(why, why_len, "postgres backend not built");
    return ST_EINVAL;
}
const st_backend st_pg_backend = {.name = "postgres", .open = pg_open};
