/*
 * store: the lifecycle events' journal (the daemon's events.c keeps the
 * same events in memory and writes them here in batches).
 *
 * Rows keep their event's id, which the daemon hands out, so that a
 * client's Last-Event-ID means the same event before and after a restart.
 * The table is trimmed to the newest rows by the daemon after each batch.
 */
#include "store/store_internal.h"

int wr_store_event_add(wr_store_t *st, const struct wr_event_rec *rec,
                       wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (rec->id <= 0 || rec->type == NULL || rec->json == NULL)
    return wr_store_error(err, EINVAL, "an event needs an id, type and body");
  if (wr_store_prepare(st,
                       "INSERT INTO events (id, time_ms, type, sandbox_id, "
                       "json) VALUES (?1, ?2, ?3, ?4, ?5)",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, rec->id) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 2, rec->time_ms) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->type) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, rec->sandbox_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 5, rec->json) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "add event %lld", (long long)rec->id);
  return 0;
}

/* One statement: the keep-th newest id is the oldest that stays. */
int wr_store_event_trim(wr_store_t *st, size_t keep, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (keep == 0)
    return wr_store_exec(st, "DELETE FROM events", err);
  if (wr_store_prepare(st,
                       "DELETE FROM events WHERE id < (SELECT id FROM events "
                       "ORDER BY id DESC LIMIT 1 OFFSET ?1)",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, (int64_t)keep - 1) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

static void read_event(sqlite3_stmt *stmt, void *out) {
  struct wr_event_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->id = sqlite3_column_int64(stmt, 0);
  rec->time_ms = sqlite3_column_int64(stmt, 1);
  rec->type = wr_store_column_str(stmt, 2);
  rec->sandbox_id = wr_store_column_str(stmt, 3);
  rec->json = wr_store_column_str(stmt, 4);
}

int wr_store_event_list_last(wr_store_t *st, size_t limit,
                             struct wr_event_rec **recs, size_t *n,
                             wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  *recs = NULL;
  *n = 0;
  if (wr_store_prepare(st,
                       "SELECT id, time_ms, type, sandbox_id, json FROM "
                       "(SELECT * FROM events ORDER BY id DESC LIMIT ?1) "
                       "ORDER BY id",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, (int64_t)limit) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_collect(st, stmt, sizeof(**recs), read_event, (void **)recs,
                          n, err);
}

int wr_store_event_max_id(wr_store_t *st, int64_t *id, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  *id = 0;
  if (wr_store_prepare(st, "SELECT IFNULL(MAX(id), 0) FROM events", &stmt,
                       err) < 0)
    return -1;
  if (sqlite3_step(stmt) != SQLITE_ROW)
    return wr_store_fail(st, err);
  *id = sqlite3_column_int64(stmt, 0);
  return 0;
}

void wr_event_recs_free(struct wr_event_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(recs[i].type);
    free(recs[i].sandbox_id);
    free(recs[i].json);
  }
  free(recs);
}
