/*
 * store internals: the handle, the SQL helpers shared by the store's files,
 * and a test hook that opens a database with extra migrations.
 *
 * Only the store's own files and tests/unit/test_store.c include it; the
 * rest of warren sees store.h and never SQLite.
 */
#ifndef WR_STORE_INTERNAL_H
#define WR_STORE_INTERNAL_H

#include "store/store.h"

#include <jansson.h>
#include <sqlite3.h>

struct wr_store {
  sqlite3 *db;
  int version;                    /* schema version after migrations */
  struct wr_netlog_limits netlog; /* the policy log's retention */
  /* How many entries of the policy log each holder (a sandbox id, or ""
   * for entries that name none) holds, and all together: counted at open
   * and kept here rather than in a table, so that an insert writes one row
   * and nothing else. This process is the log's only writer. */
  json_t *netlog_held;
  int64_t netlog_total;
};

/* The host registry's schema (roots.c) and its test hook, as above. */
extern const char *const wr_roots_migrations[];
extern const size_t wr_roots_nmigrations;
int wr_store_open_roots_with(const char *path, const char *const *extra,
                             size_t n_extra, wr_store_t **out, wr_error_t *err);

/* Count the policy log's entries per holder (at open). */
int wr_store_netlog_load(wr_store_t *st, wr_error_t *err);

/* sqlite3_finalize(NULL) is a no-op, so an unused statement is fine. */
static inline void wr_store_finalizep(sqlite3_stmt **stmt) {
  sqlite3_finalize(*stmt);
}
#define _cleanup_stmt_ _cleanup_(wr_store_finalizep)

/*
 * Open like wr_store_open, but with `extra` migration scripts appended after
 * the built-in ones (version = built-in count + index + 1). Tests use it to
 * show that a later migration upgrades an existing database.
 */
int wr_store_open_with(const char *path, const char *const *extra,
                       size_t n_extra, wr_store_t **out, wr_error_t *err);

/* Fill err from the database's last error and return -1. */
int wr_store_fail(wr_store_t *st, wr_error_t *err);
/* A message that says everything by itself, plus a code that only
 * classifies it (EEXIST, ENOENT): no ": strerror" tail. Returns -1. */
int wr_store_error(wr_error_t *err, int code, const char *fmt, ...)
    WR_PRINTF(3, 4);

int wr_store_prepare(wr_store_t *st, const char *sql, sqlite3_stmt **out,
                     wr_error_t *err);
/* Run every statement in sql (a script), discarding rows. */
int wr_store_exec(wr_store_t *st, const char *sql, wr_error_t *err);
/* Step a bound statement that returns no rows, and report how many rows it
 * changed. */
int wr_store_run(wr_store_t *st, sqlite3_stmt *stmt, int *changes,
                 wr_error_t *err);

/* Text column as an owned copy; NULL for SQL NULL. */
char *wr_store_column_str(sqlite3_stmt *stmt, int col);
/* Bind a C string, or NULL as SQL NULL. The string must outlive the step. */
int wr_store_bind_str(sqlite3_stmt *stmt, int idx, const char *s);
/* Reads the current row into the record at rec. */
typedef void (*wr_store_read_fn)(sqlite3_stmt *stmt, void *rec);
/* Step a bound SELECT to its end, reading each row with `read` into a
 * growing array of `size`-byte records. On failure *recs and *n still
 * hold the rows read so far, for the caller to free. */
int wr_store_collect(wr_store_t *st, sqlite3_stmt *stmt, size_t size,
                     wr_store_read_fn read, void **recs, size_t *n,
                     wr_error_t *err);

#endif
