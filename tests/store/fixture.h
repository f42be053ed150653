/* Shared by the store tests: a real RocksDB store in a fresh temporary folder. */
#ifndef GW_TEST_STORE_FIXTURE_H
#define GW_TEST_STORE_FIXTURE_H

#include "store.h"

#include <stdint.h>

/* A new empty folder under $TMPDIR (or /tmp); the caller frees the string. */
char *fx_tmpdir(void);
/* Removes a folder and everything in it. */
void fx_rmtree(const char *path);
/* Opens a store at path (sync as given, open groups on) or fails the test. */
st_store *fx_open(const char *path, bool sync);
/* Joins uid to gid or fails the test. */
void fx_join(st_store *s, const char *gid, const char *uid);
/* Appends a message whose record is the text "<cid>" and returns its mid, or fails. */
uint64_t fx_append(st_store *s, const char *gid, const char *uid, const char *cid);

/* Backend figures read straight from the database folder (the store must be closed):
 * the number of entries and the bytes of keys plus values, over every column family that
 * holds data (not `default`, where the writer's health probe lives). */
void fx_count_rows(const char *path, uint64_t *rows, uint64_t *bytes);

#endif
