/* libFuzzer target: a client frame through validation and the request decoder, the
 * gateway's first contact with untrusted bytes. Every result must be 0 or a PR_E* code,
 * and every slice of a decoded request must lie inside the frame. */
#include "proto.h"

#include <stdint.h>
#include <stdlib.h>

static pr_decoder *dec;

static void inside(pr_slice s, const uint8_t *d, size_t n)
{
    if (s.n && (s.p < d || s.p + s.n > d + n))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (!dec)
        dec = pr_decoder_new(NULL);
    pr_req r;
    pr_error err;
    int rc = pr_decode_req(dec, d, n, &r, &err);
    if (rc > 0 || rc < PR_E_LAST)
        abort();
    if (rc == 0) {
        inside(r.token, d, n);
        inside(r.gid, d, n);
        inside(r.cid, d, n);
        inside(r.body.data, d, n);
        for (size_t i = 0; i < r.n_acks; i++)
            inside(r.acks[i].gid, d, n);
        if (r.n_acks > PR_MAX_KEYS)
            abort();
    }
    return 0;
}
