/*
 * The JSON form of a stored message. jansson refuses a string that is not UTF-8, which is
 * how a text body that is not (the wire allows any bytes in a bin body, and text is only
 * checked by clients) ends up in base64 like a binary one: a reader always gets valid JSON.
 */
#include "app_internal.h"

#include <openssl/evp.h>
#include <stdlib.h>

json_t *gw_json_message(uint64_t mid, uint64_t ts, const pr_message *r, bool with_body)
{
    json_t *e = json_pack("{s:I, s:s%, s:I}", "mid", (json_int_t)mid, "from",
                          (const char *)r->from.p, r->from.n, "ts", (json_int_t)ts);
    if (!e || !with_body)
        return e;
    json_t *text =
        r->body.is_bin ? NULL : json_stringn((const char *)r->body.data.p, r->body.data.n);
    if (text) {
        json_object_set_new(e, "body", text);
        return e;
    }
    size_t b64n = 4 * ((r->body.data.n + 2) / 3) + 1;
    unsigned char *b64 = malloc(b64n);
    if (!b64) {
        json_decref(e);
        return NULL;
    }
    int k = EVP_EncodeBlock(b64, r->body.data.p, (int)r->body.data.n);
    json_object_set_new(e, "body", json_stringn((const char *)b64, (size_t)k));
    json_object_set_new(e, "encoding", json_string("base64"));
    free(b64);
    return e;
}
