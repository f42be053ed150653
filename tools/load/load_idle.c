/*
 * load_idle: --idle (W4). Every session connects, signs in and joins as in a fan-out
 * run, then only holds: nothing is sent, the gateway's cost of idle sessions (its RSS and
 * CPU, with --interval over a long hold) is what is measured.
 */
#include "load_run.h"

int load_idle(const load_cfg *cfg)
{
    return load_run_sessions(cfg, &load_gw_mode);
}
