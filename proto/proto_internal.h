/* Private to the proto module. */
#ifndef GW_PROTO_INTERNAL_H
#define GW_PROTO_INTERNAL_H

#include "proto.h"

/* Fills *err (if not NULL) with code and a formatted message; returns code. */
__attribute__((format(printf, 3, 4))) int pr_fail(pr_error *err, int code, const char *fmt, ...);

#endif
