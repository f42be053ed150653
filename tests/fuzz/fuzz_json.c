/* libFuzzer target: the JSON form (proto_json.c), what a gw.v1.json session's text frames
 * go through before anything else. Any bytes are JSON text to it: the answer is 0 or
 * PR_E_BAD_FRAME. What it made must be one MessagePack value that turns back into JSON,
 * and that JSON must turn into the very same MessagePack again (the mapping is exact),
 * and then go through validation and the request decoder like any frame. */
#include "proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static pr_decoder *dec;

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (!dec)
        dec = pr_decoder_new(NULL);
    msgpack_sbuffer a;
    msgpack_sbuffer_init(&a);
    int rc = pr_msgpack_from_json((const char *)d, n, &a);
    if (rc != 0 && rc != PR_E_BAD_FRAME)
        abort();
    if (rc == 0) {
        char *text;
        size_t text_n;
        if (pr_json_from_msgpack((const uint8_t *)a.data, a.size, &text, &text_n) != 0)
            abort();
        msgpack_sbuffer b;
        msgpack_sbuffer_init(&b);
        if (pr_msgpack_from_json(text, text_n, &b) != 0 || b.size != a.size ||
            memcmp(a.data, b.data, a.size) != 0)
            abort();
        msgpack_sbuffer_destroy(&b);
        free(text);
        pr_req r;
        pr_error err;
        int drc = pr_decode_req(dec, (const uint8_t *)a.data, a.size, &r, &err);
        if (drc > 0 || drc < PR_E_LAST)
            abort();
    }
    msgpack_sbuffer_destroy(&a);
    return 0;
}
