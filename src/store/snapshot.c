/*
 * store: the snapshots table.
 */
#include "store/store_internal.h"

#define SNAPSHOT_COLUMNS                                                       \
  "id, name, state, image, source_id, source_name, parent_id, layers_json, "   \
  "info_json, size_bytes, expires_ms, created_ms"

static void read_snapshot(sqlite3_stmt *stmt, void *out) {
  struct wr_snapshot_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->id = wr_store_column_str(stmt, 0);
  rec->name = wr_store_column_str(stmt, 1);
  rec->state = wr_store_column_str(stmt, 2);
  rec->image = wr_store_column_str(stmt, 3);
  rec->source_id = wr_store_column_str(stmt, 4);
  rec->source_name = wr_store_column_str(stmt, 5);
  rec->parent_id = wr_store_column_str(stmt, 6);
  rec->layers_json = wr_store_column_str(stmt, 7);
  rec->info_json = wr_store_column_str(stmt, 8);
  rec->size_bytes = (uint64_t)sqlite3_column_int64(stmt, 9);
  rec->expires_ms = sqlite3_column_int64(stmt, 10);
  rec->created_ms = sqlite3_column_int64(stmt, 11);
}

static int bind_snapshot(sqlite3_stmt *stmt, const struct wr_snapshot_rec *r) {
  if (wr_store_bind_str(stmt, 1, r->id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, r->name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, r->state) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, r->image) != SQLITE_OK ||
      wr_store_bind_str(stmt, 5, r->source_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 6, r->source_name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 7, r->parent_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 8, r->layers_json) != SQLITE_OK ||
      wr_store_bind_str(stmt, 9, r->info_json) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 10, (int64_t)r->size_bytes) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 11, r->expires_ms) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 12, r->created_ms) != SQLITE_OK)
    return -1;
  return 0;
}

int wr_store_snapshot_insert(wr_store_t *st, const struct wr_snapshot_rec *rec,
                             wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  struct wr_snapshot_rec old;

  if (rec->id == NULL || rec->name == NULL || rec->state == NULL ||
      rec->image == NULL || rec->layers_json == NULL)
    return wr_store_error(err, EINVAL,
                          "a snapshot needs an id, a name, a "
                          "state, an image and its layers");
  if (wr_store_snapshot_get(st, rec->name, &old, NULL) == 0) {
    wr_snapshot_rec_free(&old);
    return wr_store_error(err, EEXIST,
                          "a snapshot named `%s` already exists (or has that "
                          "id)",
                          rec->name);
  }
  if (wr_store_prepare(st,
                       "INSERT INTO snapshots (" SNAPSHOT_COLUMNS ") VALUES "
                       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                       &stmt, err) < 0)
    return -1;
  if (bind_snapshot(stmt, rec) < 0)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "insert snapshot `%s`", rec->name);
  return 0;
}

/* The id first: a snapshot may be named like another's id. */
int wr_store_snapshot_get(wr_store_t *st, const char *key,
                          struct wr_snapshot_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st,
                       "SELECT " SNAPSHOT_COLUMNS " FROM snapshots "
                       "WHERE id = ?1 OR name = ?1 ORDER BY id = ?1 DESC "
                       "LIMIT 1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, key) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no snapshot `%s`", key);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_snapshot(stmt, rec);
  return 0;
}

int wr_store_snapshot_list(wr_store_t *st, struct wr_snapshot_rec **recs,
                           size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  *recs = NULL;
  *n = 0;
  if (wr_store_prepare(st,
                       "SELECT " SNAPSHOT_COLUMNS " FROM snapshots "
                       "ORDER BY created_ms, id",
                       &stmt, err) < 0)
    return -1;
  return wr_store_collect(st, stmt, sizeof(**recs), read_snapshot,
                          (void **)recs, n, err);
}

int wr_store_snapshot_set_ready(wr_store_t *st, const char *id, uint64_t size,
                                const char *info_json, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st,
                       "UPDATE snapshots SET state = 'ready', size_bytes = ?2, "
                       "info_json = ?3 WHERE id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 2, (int64_t)size) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, info_json) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return -1;
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no snapshot `%s`", id);
  return 0;
}

int wr_store_snapshot_set_image(wr_store_t *st, const char *id,
                                const char *image, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, "UPDATE snapshots SET image = ?2 WHERE id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, image) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

int wr_store_snapshot_delete(wr_store_t *st, const char *id, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, "DELETE FROM snapshots WHERE id = ?1", &stmt, err) <
      0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

void wr_snapshot_rec_free(struct wr_snapshot_rec *rec) {
  free(rec->id);
  free(rec->name);
  free(rec->state);
  free(rec->image);
  free(rec->source_id);
  free(rec->source_name);
  free(rec->parent_id);
  free(rec->layers_json);
  free(rec->info_json);
  memset(rec, 0, sizeof(*rec));
}

void wr_snapshot_recs_free(struct wr_snapshot_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_snapshot_rec_free(&recs[i]);
  free(recs);
}
