/*
 * store: the SQL helpers every table's file uses. Errors from SQLite become
 * wr_error_t values here, in one place.
 */
#include "store/store_internal.h"

/* Classify a SQLite result code as the errno a caller can act on. */
static int errno_of(int rc) {
  switch (rc & 0xff) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    return EBUSY;
  case SQLITE_FULL:
    return ENOSPC;
  case SQLITE_PERM:
  case SQLITE_READONLY:
  case SQLITE_AUTH:
    return EACCES;
  case SQLITE_NOMEM:
    return ENOMEM;
  case SQLITE_TOOBIG:
    return E2BIG;
  case SQLITE_CONSTRAINT:
  case SQLITE_MISMATCH:
  case SQLITE_RANGE:
    return EINVAL;
  default:
    return EIO;
  }
}

int wr_store_error(wr_error_t *err, int code, const char *fmt, ...) {
  va_list ap;
  int n;

  if (err == NULL)
    return -1;
  va_start(ap, fmt);
  n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
  va_end(ap);
  if (n < 0)
    err->msg[0] = '\0';
  err->code = code;
  return -1;
}

/*
 * SQLite's own message already says what went wrong ("database is locked",
 * "file is not a database"), so the errno only classifies it and is not
 * appended as text. When SQLite could not open the file, the system's
 * errno is the real cause and is shown.
 */
int wr_store_fail(wr_store_t *st, wr_error_t *err) {
  int rc, sys;

  if (st->db == NULL)
    return wr_error_set(err, ENOMEM, "sqlite");
  rc = sqlite3_extended_errcode(st->db);
  sys = sqlite3_system_errno(st->db);
  if ((rc & 0xff) == SQLITE_CANTOPEN && sys != 0)
    return wr_error_set(err, sys, "%s", sqlite3_errmsg(st->db));
  return wr_store_error(err, errno_of(rc), "%s", sqlite3_errmsg(st->db));
}

int wr_store_prepare(wr_store_t *st, const char *sql, sqlite3_stmt **out,
                     wr_error_t *err) {
  if (sqlite3_prepare_v3(st->db, sql, -1, 0, out, NULL) != SQLITE_OK)
    return wr_store_fail(st, err);
  return 0;
}

/*
 * Scripts (migrations, pragmas) hold several statements; prepare and step
 * them one at a time so that even these go through prepared statements.
 */
int wr_store_exec(wr_store_t *st, const char *sql, wr_error_t *err) {
  while (*sql != '\0') {
    _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
    const char *tail = NULL;
    int rc;

    if (sqlite3_prepare_v3(st->db, sql, -1, 0, &stmt, &tail) != SQLITE_OK)
      return wr_store_fail(st, err);
    if (stmt == NULL)
      break; /* only whitespace or comments were left */
    sql = tail;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
      ;
    if (rc != SQLITE_DONE)
      return wr_store_fail(st, err);
  }
  return 0;
}

int wr_store_run(wr_store_t *st, sqlite3_stmt *stmt, int *changes,
                 wr_error_t *err) {
  if (sqlite3_step(stmt) != SQLITE_DONE)
    return wr_store_fail(st, err);
  if (changes != NULL)
    *changes = sqlite3_changes(st->db);
  return 0;
}

char *wr_store_column_str(sqlite3_stmt *stmt, int col) {
  const unsigned char *s = sqlite3_column_text(stmt, col);

  return s == NULL ? NULL : xstrdup((const char *)s);
}

int wr_store_bind_str(sqlite3_stmt *stmt, int idx, const char *s) {
  if (s == NULL)
    return sqlite3_bind_null(stmt, idx);
  return sqlite3_bind_text(stmt, idx, s, -1, SQLITE_STATIC);
}

/* Room for one more element of `size` bytes in a growing array. */
static void *grow(void *v, size_t *cap, size_t len, size_t size) {
  size_t bytes;

  if (len < *cap)
    return v;
  *cap = *cap == 0 ? 16 : *cap * 2;
  if (__builtin_mul_overflow(*cap, size, &bytes))
    abort();
  return xrealloc(v, bytes);
}

int wr_store_collect(wr_store_t *st, sqlite3_stmt *stmt, size_t size,
                     wr_store_read_fn read, void **recs, size_t *n,
                     wr_error_t *err) {
  size_t cap = 0;
  int rc;

  *recs = NULL;
  *n = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    *recs = grow(*recs, &cap, *n, size);
    read(stmt, (char *)*recs + *n * size);
    (*n)++;
  }
  return rc == SQLITE_DONE ? 0 : wr_store_fail(st, err);
}
