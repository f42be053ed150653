/*
 * load_util: small things gw_load and gw_attack both need: a clock, slices of C strings,
 * the token secret, a hello.
 */
#ifndef LOAD_UTIL_H
#define LOAD_UTIL_H

#include "proto.h"

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t load_now_ns(void);
/* A slice of s (borrowed: as long as s). */
pr_slice load_sl(const char *s);
/* Reads a small file (a secret, a key) into buf (cap bytes, NUL-terminated), final
 * newlines dropped; *n its length. 0, or -1 said on stderr as prog's. */
int load_read_file(const char *prog, const char *path, char *buf, size_t cap, size_t *n);
/* When *n is still 0: the secret from GW_SECRET, if set and shorter than cap. */
void load_secret_from_env(char *buf, size_t cap, size_t *n);
/* Encodes a hello for uid into sb with a fresh token (a day long) signed with secret: 0
 * or -1. */
int load_enc_hello_with(const char *secret, size_t secret_n, const char *uid, msgpack_sbuffer *sb);

#endif
