/*
 * Private to the store module: the RocksDB handles, the write queue, and the key and
 * value layouts shared by the writer (store_writer.c) and the readers (store_read.c).
 */
#ifndef GW_STORE_INTERNAL_H
#define GW_STORE_INTERNAL_H

#include "store.h"

#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <sys/types.h>

/* Column families, in the order they are opened. */
enum st_cf {
    ST_CF_DEFAULT = 0, /* unused, RocksDB requires it */
    ST_CF_GROUPS,      /* gid -> last_mid, created */
    ST_CF_MEMBERS,     /* gid | uid -> ack, joined */
    ST_CF_USER_GROUPS, /* uid | gid -> (empty) */
    ST_CF_MSGS,        /* gid | be64(mid) -> ts, record */
    ST_CF_SENDS,       /* uid | cid -> mid, ts, gid */
    ST_CF_COUNT,
};

/* One open RocksDB handle and its column families (db NULL: not open). */
typedef struct st_db {
    rocksdb_t *db;
    rocksdb_column_family_handle_t *cf[ST_CF_COUNT];
} st_db;

struct st_store {
    st_db rw; /* the writer's handle; only the writer thread uses or changes it */
    st_db ro; /* read-only handle that serves reads while rw is reopened (store_recover.c) */
    /* The handle readers use (&rw, &ro, or NULL when neither is open). Readers hold
     * rd_lock shared for a whole read; the writer takes it exclusively only to switch rd,
     * and closes a handle only once no reader can be using it. */
    st_db *rd;
    pthread_rwlock_t rd_lock;
    rocksdb_options_t *opts;
    rocksdb_cache_t *cache;
    rocksdb_block_based_table_options_t *table;
    rocksdb_writeoptions_t *wopts; /* sync per options */
    rocksdb_readoptions_t *ropts;  /* plain reads on the writer thread */
    char *path;
    bool open_groups;
    size_t max_batch;
    st_event_fn on_event;
    void *event_ud;
    dev_t dev; /* the folder as opened: a folder removed or replaced is noticed */
    ino_t ino;

    /* The write queue, filled by st_submit, drained by the writer. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    st_op *head;
    st_op *tail;
    atomic_size_t pending; /* ops queued, not yet taken */
    bool closing;          /* under mu: refuse new ops, drain and stop */
    pthread_t writer;

    /* Figures (written by the writer, read by anyone). */
    atomic_uint_fast64_t commits;
    atomic_uint_fast64_t ops;
    atomic_uint_fast64_t appends;
    atomic_uint_fast64_t commit_failures;
    atomic_uint_fast64_t messages; /* counted at open, then kept by the writer */
    atomic_uint_fast64_t groups;
    atomic_uint_fast64_t commit_us_sum;
    atomic_bool writable;
    atomic_uint_fast64_t write_errors;
    atomic_uint_fast64_t recoveries;
    atomic_uint_fast64_t failed_at_ms; /* monotonic ms of the first failed write; 0: none */

    /* Disk trouble (store_recover.c): writer thread only, except err under err_mu. */
    bool failed;          /* refuse ops until recovered */
    uint64_t retry_at_ms; /* next recovery attempt (monotonic) */
    uint64_t retry_ms;    /* pause before the attempt after that */
    uint64_t attempts;
    uint64_t refused;
    char first_err[512];  /* the failure that started it, for the recovery's log line */
    pthread_mutex_t err_mu;
    char err[512]; /* the latest failure's message, "" while writable */

    /* Latency of the last ST_LAT_N commits (a ring, under lat_mu). */
    pthread_mutex_t lat_mu;
    uint32_t lat_us[1024];
    size_t lat_n, lat_next;
};

#define ST_LAT_N 1024

/* Writer thread body (store_writer.c). */
void *st_writer_main(void *arg);

/* Opens the database at s->path into *d with s->opts, read-write or read-only. Returns 0,
 * or ST_EIO with the backend's message in why. */
int st_db_open(st_store *s, st_db *d, bool read_only, char *why, size_t why_len);
/* Closes *d (if open) and clears it. */
void st_db_close(st_db *d);
/* Counts the messages and groups in the store (at open, and after a recovery). */
void st_count_contents(st_store *s);

/* ---- disk trouble (store_recover.c), writer thread only ------------------------------ */

/* A write failed (why: the backend's message): start refusing ops, schedule recovery. */
void st_fail(st_store *s, const char *why);
/* False while the store refuses ops. While failing, makes a recovery attempt when one
 * is due (it may reopen the database) and returns true if that worked. */
bool st_recover(st_store *s);
/* One small synced write: does the backend take writes? false with why if not. */
bool st_probe_write(st_store *s, char *why, size_t why_len);
/* Is the folder still the one opened? false with why if it was removed or replaced. */
bool st_folder_same(st_store *s, char *why, size_t why_len);

/* ---- keys and values (store_keys.c) ---------------------------------------------------
 * Ids are length-prefixed (one byte), numbers big-endian, so one group's messages are one
 * contiguous ordered range and a user's rows sort together. */
#define ST_KEY_MAX (2 * (1 + ST_MAX_ID) + 8)

typedef struct st_key {
    char b[ST_KEY_MAX];
    size_t n;
} st_key;

bool st_id_ok(st_id id);
void st_key_id(st_key *k, st_id a);                   /* groups */
void st_key_id2(st_key *k, st_id a, st_id b);         /* members, user_groups, sends */
void st_key_msg(st_key *k, st_id gid, uint64_t mid);  /* msgs */
/* The smallest key greater than every key starting with k (for an upper bound). Returns
 * false when there is none (all bytes 0xff). */
bool st_key_prefix_end(const st_key *k, st_key *end);

void st_put_be64(char *p, uint64_t v);
uint64_t st_get_be64(const char *p);
uint64_t st_now_ms(void);  /* wall clock, for timestamps */
uint64_t st_mono_ms(void); /* monotonic, for durations */

/* Fixed-size values. */
#define ST_GROUP_VAL 16  /* be64 last_mid, be64 created_ms */
#define ST_MEMBER_VAL 16 /* be64 ack, be64 joined_ms */
#define ST_MSG_HDR 8     /* be64 ts, then the record */
#define ST_SEND_HDR 16   /* be64 mid, be64 ts, then the gid bytes */

#endif
