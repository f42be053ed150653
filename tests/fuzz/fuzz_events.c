/* libFuzzer target: a server frame (map or batch) through the event decoder that every
 * client uses, including the on-demand reads of group and page entries. */
#include "proto.h"

#include <stdint.h>
#include <stdlib.h>

static pr_decoder *dec;

static int each(void *ud, const pr_event *ev)
{
    (void)ud;
    for (size_t i = 0; i < ev->n_items; i++) {
        pr_group g;
        pr_message m;
        /* The whole frame was checked first: entries below n_items always read. */
        if ((ev->t == PR_EV_PAGE || ev->t == PR_EV_CHANGES) && pr_event_message(ev, i, &m) != 0)
            abort();
        /* ... and so do their reactions. */
        for (size_t k = 0; (ev->t == PR_EV_PAGE || ev->t == PR_EV_CHANGES) && k < m.n_reactions;
             k++) {
            pr_reaction r;
            if (pr_message_reaction(&m, k, &r) != 0)
                abort();
        }
        if ((ev->t == PR_EV_WELCOME || ev->t == PR_EV_GROUPS) && pr_event_group(ev, i, &g) != 0)
            abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (!dec)
        dec = pr_decoder_new(NULL);
    pr_error err;
    int rc = pr_decode_events(dec, d, n, each, NULL, &err);
    if (rc > 0 || rc < PR_E_LAST)
        abort();
    return 0;
}
