/*
 * For the store tests of the change feed (PostgreSQL): a store that listens and keeps
 * what it heard, copied (the callback's changes are borrowed), and the cut of its
 * connection that a failover or an operator makes.
 */
#ifndef GW_TEST_STORE_FIXTURE_FEED_H
#define GW_TEST_STORE_FIXTURE_FEED_H

#include "store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One change heard, with every field of st_change a test reads. */
typedef struct fx_heard_change {
    enum st_change_kind kind;
    char gid[64], uid[64], key[64];
    uint64_t mid, ts, ack, read, ver, cseq, count;
    bool has_record; /* record was not NULL (NULL: too large to announce, a hint) */
    bool recalled, on;
    size_t record_n;
    char record[64]; /* its first 64 bytes */
} fx_heard_change;

/* What a listening store heard, in order; written on the store's feed thread. */
typedef struct fx_heard {
    pthread_mutex_t mu;
    unsigned only; /* the kinds kept, as bits (FX_KIND); 0: every kind */
    fx_heard_change ch[256];
    size_t n;
} fx_heard;

#define FX_KIND(k) (1u << (k))

/* A listener's fx_heard, static (the feed thread writes into it until st_close), keeping
 * the kinds in only (0: all). */
#define FX_HEARD_INIT(only_kinds)                                                                  \
    {                                                                                              \
        .mu = PTHREAD_MUTEX_INITIALIZER, .only = (only_kinds)                                      \
    }

/* Opens a store at the place (a database's URL) whose feed copies what it hears into h,
 * or fails the test. node: a name of its own (tests run side by side on one server, and
 * the database shows every test's listeners as "gw-feed <node>"). */
st_store *fx_open_listening(const char *where, fx_heard *h, const char *node);
/* How many changes h holds now. */
size_t fx_heard_count(fx_heard *h);
/* Waits (bounded: 5 s) until h holds at least n changes, or fails the test. */
void fx_heard_await(fx_heard *h, size_t n);

/* The listener node loses its connection: the database takes no new ones (until
 * fx_feed_uncut) and the one of node is ended, or the test fails. */
void fx_feed_cut(const char *where, const char *node);
/* The database takes connections again: the listener comes back. */
void fx_feed_uncut(const char *where);

/* Closes the stores of a test on one database, removes it and frees where. */
void fx_feed_done(char *where, st_store *a, st_store *b);

#endif
