/*
 * The RocksDB backend (store/rocks/), as the top of the store sees it: the face of the
 * rocks folder.
 *
 * Owns: the embedded database in one local folder: its handles and column families, the
 * key and value layouts, the batch (one indexed write batch), the reads answered at once on
 * the caller's thread, the unread webhook's bookkeeping, trims, erasures, the scrub of
 * tombstones, and the reopen after a failed write.
 * Never calls: the PostgreSQL backend (pg/) nor includes its headers; the core's private
 * state (store_internal.h); the top (store_open.c). It is called through the table below
 * by the core, and calls the core only through store_backend.h.
 * Internal header: store_rocks.h (for rocks/ only).
 */
#ifndef GW_ST_ROCKS_H
#define GW_ST_ROCKS_H

#include "store_backend.h"

/* The backend's table: st_open picks it when st_options has no url (store_open.c). */
extern const st_backend st_rocks_backend;

#endif
