/*
 * store: the templates table (daemon/templates.c builds them).
 */
#include "store/store_internal.h"

#define TEMPLATE_COLUMNS                                                       \
  "name, base, parent, manifest_json, size_bytes, created_ms"

static void read_template(sqlite3_stmt *stmt, void *out) {
  struct wr_template_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->name = wr_store_column_str(stmt, 0);
  rec->base = wr_store_column_str(stmt, 1);
  rec->parent = wr_store_column_str(stmt, 2);
  rec->manifest_json = wr_store_column_str(stmt, 3);
  rec->size_bytes = (uint64_t)sqlite3_column_int64(stmt, 4);
  rec->created_ms = sqlite3_column_int64(stmt, 5);
}

/* An upsert, as images' (no ON DELETE action fires for a rebuild). */
int wr_store_template_put(wr_store_t *st, const struct wr_template_rec *rec,
                          wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (rec->name == NULL || rec->base == NULL || rec->parent == NULL ||
      rec->manifest_json == NULL)
    return wr_store_error(err, EINVAL, "a template needs all its fields");
  if (wr_store_prepare(st,
                       "INSERT INTO templates (" TEMPLATE_COLUMNS ") "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                       "ON CONFLICT (name) DO UPDATE SET "
                       "base = excluded.base, parent = excluded.parent, "
                       "manifest_json = excluded.manifest_json, "
                       "size_bytes = excluded.size_bytes, "
                       "created_ms = excluded.created_ms",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, rec->name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->base) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->parent) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, rec->manifest_json) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 5, (int64_t)rec->size_bytes) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 6, rec->created_ms) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "put template `%s`", rec->name);
  return 0;
}

int wr_store_template_get(wr_store_t *st, const char *name,
                          struct wr_template_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(
          st, "SELECT " TEMPLATE_COLUMNS " FROM templates WHERE name = ?1",
          &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no template `%s`", name);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_template(stmt, rec);
  return 0;
}

int wr_store_template_list(wr_store_t *st, struct wr_template_rec **recs,
                           size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(
          st, "SELECT " TEMPLATE_COLUMNS " FROM templates ORDER BY name", &stmt,
          err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_template_rec), read_template,
                       &v, &len, err) < 0) {
    wr_template_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

int wr_store_template_delete(wr_store_t *st, const char *name,
                             wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st, "DELETE FROM templates WHERE name = ?1", &stmt,
                       err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "delete template `%s`", name);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no template `%s`", name);
  return 0;
}

void wr_template_rec_free(struct wr_template_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->name);
  free(rec->base);
  free(rec->parent);
  free(rec->manifest_json);
  memset(rec, 0, sizeof(*rec));
}

void wr_template_recs_free(struct wr_template_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_template_rec_free(&recs[i]);
  free(recs);
}
