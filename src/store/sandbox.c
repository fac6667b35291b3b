/*
 * store: the sandboxes table.
 */
#include "store/store_internal.h"

#include <inttypes.h>

/* The column order read_sandbox and bind_sandbox agree on. */
#define SANDBOX_COLUMNS                                                        \
  "id, name, image, state, spec_json, error, slot, created_ms, updated_ms, "   \
  "init_pid, init_start"

static void read_sandbox(sqlite3_stmt *stmt, void *out) {
  struct wr_sandbox_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->id = wr_store_column_str(stmt, 0);
  rec->name = wr_store_column_str(stmt, 1);
  rec->image = wr_store_column_str(stmt, 2);
  rec->state = wr_store_column_str(stmt, 3);
  rec->spec_json = wr_store_column_str(stmt, 4);
  rec->error = wr_store_column_str(stmt, 5);
  rec->slot = (uint32_t)sqlite3_column_int64(stmt, 6);
  rec->created_ms = sqlite3_column_int64(stmt, 7);
  rec->updated_ms = sqlite3_column_int64(stmt, 8);
  rec->init_pid = (int32_t)sqlite3_column_int64(stmt, 9);
  rec->init_start = (uint64_t)sqlite3_column_int64(stmt, 10);
}

/* SQLite integers are signed 64-bit; init_start keeps its bits through the
 * cast both ways. */
static int bind_sandbox(sqlite3_stmt *stmt, const struct wr_sandbox_rec *rec,
                        int64_t now) {
  if (wr_store_bind_str(stmt, 1, rec->id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->image) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, rec->state) != SQLITE_OK ||
      wr_store_bind_str(stmt, 5, rec->spec_json) != SQLITE_OK ||
      wr_store_bind_str(stmt, 6, rec->error) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 7, rec->slot) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 8, now) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 9, now) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 10, rec->init_pid) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 11, (int64_t)rec->init_start) != SQLITE_OK)
    return -1;
  return 0;
}

/*
 * SQLite names the index that refused an insert only in its message text;
 * ask the table instead, so the error names the clash (id, name or slot)
 * in words a user can act on. When no row clashes (a CHECK constraint
 * failed, say), SQLite's message already in err stays.
 */
static int explain_clash(wr_store_t *st, const struct wr_sandbox_rec *rec,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  bool id = false, name = false, slot = false;

  if (wr_store_prepare(st,
                       "SELECT id = ?1, name = ?2, slot = ?3 FROM sandboxes "
                       "WHERE id = ?1 OR name = ?2 OR slot = ?3",
                       &stmt, NULL) < 0 ||
      wr_store_bind_str(stmt, 1, rec->id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->name) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 3, rec->slot) != SQLITE_OK)
    return -1;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    id |= sqlite3_column_int(stmt, 0) != 0;
    name |= sqlite3_column_int(stmt, 1) != 0;
    slot |= sqlite3_column_int(stmt, 2) != 0;
  }
  if (id)
    return wr_store_error(err, EEXIST, "a sandbox with id `%s` already exists",
                          rec->id);
  if (name)
    return wr_store_error(err, EEXIST, "a sandbox named `%s` already exists",
                          rec->name);
  if (slot)
    return wr_store_error(err, EEXIST, "slot %" PRIu32 " is already taken",
                          rec->slot);
  return -1;
}

/*
 * The store owns the timestamps: created_ms and updated_ms are both set to
 * now, and ties in list order are broken by insertion order.
 */
int wr_store_sandbox_insert(wr_store_t *st, const struct wr_sandbox_rec *rec,
                            wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (rec->id == NULL || rec->name == NULL || rec->state == NULL ||
      rec->slot == 0)
    return wr_store_error(err, EINVAL,
                          "a sandbox needs an id, a name, a "
                          "state and a slot >= 1");
  if (wr_store_prepare(st,
                       "INSERT INTO sandboxes (" SANDBOX_COLUMNS ") "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                       &stmt, err) < 0)
    return wr_error_wrap(err, "insert sandbox `%s`", rec->name);
  if (bind_sandbox(stmt, rec, wr_now_ms()) < 0)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return 0;
  wr_store_fail(st, err);
  wr_error_wrap(err, "insert sandbox `%s`", rec->name);
  if ((rc & 0xff) == SQLITE_CONSTRAINT)
    explain_clash(st, rec, err);
  return -1;
}

/*
 * One query that prefers an id match: a sandbox can be named like
 * another's id, and the id is the name that cannot change.
 */
int wr_store_sandbox_get(wr_store_t *st, const char *id_or_name,
                         struct wr_sandbox_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st,
                       "SELECT " SANDBOX_COLUMNS " FROM sandboxes "
                       "WHERE id = ?1 OR name = ?1 "
                       "ORDER BY id = ?1 DESC LIMIT 1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id_or_name) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no sandbox `%s`", id_or_name);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_sandbox(stmt, rec);
  return 0;
}

int wr_store_sandbox_list(wr_store_t *st, struct wr_sandbox_rec **recs,
                          size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st,
                       "SELECT " SANDBOX_COLUMNS " FROM sandboxes "
                       "ORDER BY created_ms, rowid",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_sandbox_rec), read_sandbox,
                       &v, &len, err) < 0) {
    wr_sandbox_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

/* Run a bound UPDATE or DELETE of one sandbox; no row changed is ENOENT. */
static int change_one(wr_store_t *st, sqlite3_stmt *stmt, const char *id,
                      wr_error_t *err) {
  int changes = 0;

  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "sandbox `%s`", id);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no sandbox `%s`", id);
  return 0;
}

int wr_store_sandbox_set_state(wr_store_t *st, const char *id,
                               const char *state, const char *error,
                               wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (state == NULL)
    return wr_store_error(err, EINVAL, "sandbox `%s`: no state given", id);
  if (wr_store_prepare(st,
                       "UPDATE sandboxes SET state = ?2, error = ?3, "
                       "updated_ms = ?4 WHERE id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, state) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, error) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 4, wr_now_ms()) != SQLITE_OK)
    return wr_store_fail(st, err);
  return change_one(st, stmt, id, err);
}

/* A pid of 0 means no init runs, so its start time is cleared with it. */
int wr_store_sandbox_set_init(wr_store_t *st, const char *id, int32_t pid,
                              uint64_t start, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (pid < 0)
    return wr_store_error(err, EINVAL, "sandbox `%s`: invalid init pid %d", id,
                          (int)pid);
  if (wr_store_prepare(st,
                       "UPDATE sandboxes SET init_pid = ?2, init_start = ?3, "
                       "updated_ms = ?4 WHERE id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 2, pid) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 3, pid == 0 ? 0 : (int64_t)start) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 4, wr_now_ms()) != SQLITE_OK)
    return wr_store_fail(st, err);
  return change_one(st, stmt, id, err);
}

int wr_store_sandbox_delete(wr_store_t *st, const char *id, wr_error_t *err) {
  static const char sql[] = "DELETE FROM sandboxes WHERE id = ?1";
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, sql, &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK)
    return wr_store_fail(st, err);
  return change_one(st, stmt, id, err);
}

void wr_sandbox_rec_free(struct wr_sandbox_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->id);
  free(rec->name);
  free(rec->image);
  free(rec->state);
  free(rec->spec_json);
  free(rec->error);
  memset(rec, 0, sizeof(*rec));
}

void wr_sandbox_recs_free(struct wr_sandbox_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_sandbox_rec_free(&recs[i]);
  free(recs);
}
