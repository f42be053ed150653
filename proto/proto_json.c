/*
 * The JSON form of the protocol (subprotocol gw.v1.json, docs/PROTOCOL.md): the same
 * messages as JSON text, transcoded to and from MessagePack at the edge of a session, so
 * that everything between (validation, limits, errors) is the one MessagePack path.
 *
 * The mapping is structural: maps are objects, arrays arrays, strings strings, integers
 * integers, nil null. MessagePack bin (a binary body) has no JSON type: it is the object
 * {"base64": "..."}, both ways; a string that is not UTF-8 goes out the same way.
 */
#include "proto.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 16 /* deeper than any message of the protocol */

/* Standard base64 with its padding, nothing else: EVP_DecodeBlock alone would also take
 * spaces, newlines and '=' anywhere, and count them into the length. */
static bool b64_strict(const char *s, size_t n)
{
    if (n % 4)
        return false;
    size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < n - pad; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return false;
    }
    return true;
}

static json_t *b64_object(const char *p, size_t n)
{
    size_t cap = 4 * ((n + 2) / 3) + 1;
    unsigned char *b = malloc(cap);
    if (!b)
        return NULL;
    int k = EVP_EncodeBlock(b, (const unsigned char *)p, (int)n);
    json_t *o = json_pack("{s:s%}", "base64", (const char *)b, (size_t)k);
    free(b);
    return o;
}

/* msgpack-c gives an empty string or bin a NULL pointer, which jansson refuses. */
static const char *bytes(const char *p, uint32_t n)
{
    return n ? p : "";
}

static json_t *to_json(const msgpack_object *o, int depth)
{
    if (depth > DEPTH_MAX)
        return NULL;
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return json_null();
    case MSGPACK_OBJECT_BOOLEAN: return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        /* Above 2^63 JSON readers lose it anyway; the protocol's numbers stay far below. */
        return json_integer((json_int_t)o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer((json_int_t)o->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return json_real(o->via.f64);
    case MSGPACK_OBJECT_STR: {
        json_t *s = json_stringn(bytes(o->via.str.ptr, o->via.str.size), o->via.str.size);
        return s ? s : b64_object(bytes(o->via.str.ptr, o->via.str.size), o->via.str.size);
    }
    case MSGPACK_OBJECT_BIN:
        return b64_object(bytes(o->via.bin.ptr, o->via.bin.size), o->via.bin.size);
    case MSGPACK_OBJECT_ARRAY: {
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < o->via.array.size; i++)
            if (json_array_append_new(a, to_json(&o->via.array.ptr[i], depth + 1)) != 0) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *m = json_object();
        for (uint32_t i = 0; m && i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (kv->key.type != MSGPACK_OBJECT_STR ||
                json_object_setn_new(m, bytes(kv->key.via.str.ptr, kv->key.via.str.size),
                                     kv->key.via.str.size, to_json(&kv->val, depth + 1)) != 0) {
                json_decref(m);
                return NULL;
            }
        }
        return m;
    }
    default: return json_null(); /* ext: the protocol has none */
    }
}

int pr_json_from_msgpack(const uint8_t *p, size_t n, char **out, size_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc = PR_E_BAD_FRAME;
    if (msgpack_unpack_next(&u, (const char *)p, n, &off) == MSGPACK_UNPACK_SUCCESS && off == n) {
        json_t *j = to_json(&u.data, 0);
        *out = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(j);
        if (*out) {
            *out_n = strlen(*out);
            rc = 0;
        }
    }
    msgpack_unpacked_destroy(&u);
    return rc;
}

static int pack(msgpack_packer *pk, json_t *j, int depth)
{
    if (depth > DEPTH_MAX)
        return -1;
    switch (json_typeof(j)) {
    case JSON_NULL: return msgpack_pack_nil(pk);
    case JSON_TRUE: return msgpack_pack_true(pk);
    case JSON_FALSE: return msgpack_pack_false(pk);
    case JSON_INTEGER: {
        json_int_t v = json_integer_value(j);
        return v < 0 ? msgpack_pack_int64(pk, v) : msgpack_pack_uint64(pk, (uint64_t)v);
    }
    case JSON_REAL: return msgpack_pack_double(pk, json_real_value(j));
    case JSON_STRING: {
        size_t n = json_string_length(j);
        return msgpack_pack_str_with_body(pk, json_string_value(j), n);
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j), i;
        json_t *v;
        if (msgpack_pack_array(pk, n))
            return -1;
        json_array_foreach(j, i, v) if (pack(pk, v, depth + 1)) return -1;
        return 0;
    }
    case JSON_OBJECT: {
        json_t *b64 = json_object_get(j, "base64");
        if (json_object_size(j) == 1 && json_is_string(b64)) { /* a binary body */
            size_t n = json_string_length(b64);
            if (!b64_strict(json_string_value(b64), n))
                return -1;
            unsigned char *b = malloc(n / 4 * 3 + 1);
            int k =
                b ? EVP_DecodeBlock(b, (const unsigned char *)json_string_value(b64), (int)n) : -1;
            /* EVP_DecodeBlock counts the padding as bytes: take them off again. */
            const char *s = json_string_value(b64);
            if (k >= 0 && n && s[n - 1] == '=')
                k -= 1 + (n > 1 && s[n - 2] == '=');
            int rc = k < 0 ? -1 : msgpack_pack_bin_with_body(pk, b, (size_t)k);
            free(b);
            return rc;
        }
        const char *key;
        json_t *v;
        if (msgpack_pack_map(pk, json_object_size(j)))
            return -1;
        json_object_foreach(j, key, v)
        {
            if (msgpack_pack_str_with_body(
                    pk, key, json_object_iter_key_len(json_object_key_to_iter(key))) ||
                pack(pk, v, depth + 1))
                return -1;
        }
        return 0;
    }
    }
    return -1;
}

void pr_json_why(const json_error_t *e, const char *what, char *out, size_t n)
{
    if (!n)
        return;
    int k;
    /* jansson's own words for it ("\u0000 is not allowed without JSON_ALLOW_NUL") name a
     * flag of its API, which means nothing to whoever sent the text. */
    if (json_error_code(e) == json_error_null_character)
        k = snprintf(out, n,
                     "%s has a \\u0000 (NUL) character in a string, which is not allowed "
                     "(line %d, column %d)",
                     what, e->line, e->column);
    else
        k = snprintf(out, n, "%s is not valid JSON at line %d, column %d: %s", what, e->line,
                     e->column, e->text);
    /* What jansson quotes may be cut in the middle of a UTF-8 character, or not be UTF-8
     * at all: an answer's JSON (jansson again) would refuse it. */
    size_t len = k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
            out[i] = '?';
    out[len] = 0;
}

int pr_msgpack_from_json_err(const char *p, size_t n, msgpack_sbuffer *out, pr_error *err)
{
    pr_error none;
    if (!err)
        err = &none;
    err->code = PR_E_BAD_FRAME;
    json_error_t jerr;
    json_t *j = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        pr_json_why(&jerr, "the frame", err->msg, sizeof(err->msg));
        return PR_E_BAD_FRAME;
    }
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    int rc = PR_E_BAD_FRAME;
    if (!json_is_object(j) && !json_is_array(j))
        snprintf(err->msg, sizeof(err->msg), "the frame must be a JSON object or array");
    else if (pack(&pk, j, 0) != 0)
        snprintf(err->msg, sizeof(err->msg),
                 "a bad {\"base64\"} body, or JSON nested deeper than %d", DEPTH_MAX);
    else
        rc = 0;
    json_decref(j);
    if (rc == 0)
        err->code = PR_OK, err->msg[0] = 0;
    return rc;
}

int pr_msgpack_from_json(const char *p, size_t n, msgpack_sbuffer *out)
{
    return pr_msgpack_from_json_err(p, n, out, NULL);
}
