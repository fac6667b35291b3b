/*
 * store: the images table.
 */
#include "store/store_internal.h"

#define IMAGE_COLUMNS                                                          \
  "name, state, packages_json, suite, size_bytes, created_ms, node_json, "     \
  "minimal"

static void read_image(sqlite3_stmt *stmt, void *out) {
  struct wr_image_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->name = wr_store_column_str(stmt, 0);
  rec->state = wr_store_column_str(stmt, 1);
  rec->packages_json = wr_store_column_str(stmt, 2);
  rec->suite = wr_store_column_str(stmt, 3);
  rec->size_bytes = (uint64_t)sqlite3_column_int64(stmt, 4);
  rec->created_ms = sqlite3_column_int64(stmt, 5);
  rec->node_json = wr_store_column_str(stmt, 6);
  rec->minimal = sqlite3_column_int(stmt, 7) != 0;
}

/*
 * An upsert rather than INSERT OR REPLACE: REPLACE deletes the old row
 * first, which would fire ON DELETE actions of any later table that refers
 * to images. created_ms is set by the first put and kept by later ones, so
 * it says when the image was first recorded.
 */
int wr_store_image_put(wr_store_t *st, const struct wr_image_rec *rec,
                       wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (rec->name == NULL || rec->state == NULL)
    return wr_store_error(err, EINVAL, "an image needs a name and a state");
  if (wr_store_prepare(st,
                       "INSERT INTO images (" IMAGE_COLUMNS ") "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                       "ON CONFLICT (name) DO UPDATE SET "
                       "state = excluded.state, "
                       "packages_json = excluded.packages_json, "
                       "suite = excluded.suite, "
                       "size_bytes = excluded.size_bytes, "
                       "node_json = excluded.node_json, "
                       "minimal = excluded.minimal",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, rec->name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->state) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->packages_json) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, rec->suite) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 5, (int64_t)rec->size_bytes) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 6, wr_now_ms()) != SQLITE_OK ||
      wr_store_bind_str(stmt, 7, rec->node_json) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 8, rec->minimal ? 1 : 0) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "put image `%s`", rec->name);
  return 0;
}

int wr_store_image_get(wr_store_t *st, const char *name,
                       struct wr_image_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st,
                       "SELECT " IMAGE_COLUMNS " FROM images WHERE name = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no image `%s`", name);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_image(stmt, rec);
  return 0;
}

/* Ordered by name, as `warren image ls` shows them. */
int wr_store_image_list(wr_store_t *st, struct wr_image_rec **recs, size_t *n,
                        wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st, "SELECT " IMAGE_COLUMNS " FROM images ORDER BY name",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_image_rec), read_image, &v,
                       &len, err) < 0) {
    wr_image_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

int wr_store_image_delete(wr_store_t *st, const char *name, wr_error_t *err) {
  static const char sql[] = "DELETE FROM images WHERE name = ?1";
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st, sql, &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "delete image `%s`", name);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no image `%s`", name);
  return 0;
}

/* Counted through the index on sandboxes.image. */
int wr_store_image_users(wr_store_t *st, const char *name, unsigned *count,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, "SELECT COUNT(*) FROM sandboxes WHERE image = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (sqlite3_step(stmt) != SQLITE_ROW)
    return wr_store_fail(st, err);
  *count = (unsigned)sqlite3_column_int64(stmt, 0);
  return 0;
}

void wr_image_rec_free(struct wr_image_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->name);
  free(rec->state);
  free(rec->packages_json);
  free(rec->suite);
  free(rec->node_json);
  memset(rec, 0, sizeof(*rec));
}

void wr_image_recs_free(struct wr_image_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_image_rec_free(&recs[i]);
  free(recs);
}
