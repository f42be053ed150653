/* The JSON form of a stored message (gw_json.c), the same wherever the gateway speaks JSON:
 * the server API's pages and the unread webhook's events (docs/API.md). */
#ifndef GW_JSON_H
#define GW_JSON_H

#include "proto.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* {mid, from, ts} and, with_body, `body`: a text body as a string; a binary one (or text
 * that is not UTF-8) in base64, with "encoding": "base64". New reference, or NULL when
 * out of memory. */
json_t *gw_json_message(uint64_t mid, uint64_t ts, const pr_message *r, bool with_body);

#endif
