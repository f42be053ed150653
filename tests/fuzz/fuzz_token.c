/* libFuzzer target: the token check of `hello` (libjwt under the gateway's rules). Any
 * input is a token; none may crash it, and a token that passes must name a valid user. */
#include "gw_session.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char secret[] = "fuzz-secret-0123456789abcdef";

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    gw_identity id;
    const char *why = NULL;
    if (gw_auth_check(secret, sizeof(secret) - 1, (pr_slice){d, n}, 1700000000, &id, &why) == 0) {
        if (!pr_id_valid((pr_slice){(const uint8_t *)id.uid, strlen(id.uid)}))
            abort();
        gw_identity_release(&id);
    } else if (!why) {
        abort();
    }
    return 0;
}
