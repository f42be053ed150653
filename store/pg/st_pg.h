/*
 * The PostgreSQL backend (store/pg/), as the top of the store sees it: the face of the pg
 * folder.
 *
 * Owns: the connection (libpq's pipeline mode, binary arrays), the schema and its
 * migrations, the batch's rows and the fast path's cache, reads, the change feed between
 * gateways (LISTEN/NOTIFY), the unread webhook's bookkeeping, trims and erasures.
 * Never calls: the RocksDB backend (rocks/) nor includes its headers; the core's private
 * state (store_internal.h); the top (store_open.c). It is called through the table below
 * by the core, and calls the core only through store_backend.h.
 * Internal header: store_pg.h (for pg/ only).
 */
#ifndef GW_ST_PG_H
#define GW_ST_PG_H

#include "store_backend.h"

/* The backend's table: st_open picks it when st_options has a url (store_open.c). */
extern const st_backend st_pg_backend;

#endif
