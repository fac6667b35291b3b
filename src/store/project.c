/*
 * store: projects (the projects table, migration 9 in store.c). What a
 * project is made of and which tier it was last put in; the projects code
 * (src/projects/) decides what the rows mean.
 */
#include "store/store_internal.h"

#define PROJECT_COLUMNS                                                        \
  "name, template, tier, sandbox, snapshot, generation, remote, "              \
  "remote_secret, labels_json, settings_json, revision, last_edit_ms, "        \
  "created_ms"

static void read_project(sqlite3_stmt *stmt, void *out) {
  struct wr_project_rec *rec = out;

  rec->name = wr_store_column_str(stmt, 0);
  rec->template_name = wr_store_column_str(stmt, 1);
  rec->tier = wr_store_column_str(stmt, 2);
  rec->sandbox = wr_store_column_str(stmt, 3);
  rec->snapshot = wr_store_column_str(stmt, 4);
  rec->generation = sqlite3_column_int64(stmt, 5);
  rec->remote = wr_store_column_str(stmt, 6);
  rec->remote_secret = wr_store_column_str(stmt, 7);
  rec->labels_json = wr_store_column_str(stmt, 8);
  rec->settings_json = wr_store_column_str(stmt, 9);
  rec->revision = wr_store_column_str(stmt, 10);
  rec->last_edit_ms = sqlite3_column_int64(stmt, 11);
  rec->created_ms = sqlite3_column_int64(stmt, 12);
}

int wr_store_project_insert(wr_store_t *st, const struct wr_project_rec *r,
                            wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  struct wr_project_rec old;

  if (r->name == NULL || r->template_name == NULL || r->tier == NULL)
    return wr_store_error(err, EINVAL,
                          "a project needs a name, a template and a tier");
  if (wr_store_project_get(st, r->name, &old, NULL) == 0) {
    wr_project_rec_free(&old);
    return wr_store_error(err, EEXIST, "a project named `%s` already exists",
                          r->name);
  }
  if (wr_store_prepare(st,
                       "INSERT INTO projects (" PROJECT_COLUMNS ") VALUES "
                       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                       "?13)",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, r->name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, r->template_name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, r->tier) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, r->sandbox) != SQLITE_OK ||
      wr_store_bind_str(stmt, 5, r->snapshot) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 6, r->generation) != SQLITE_OK ||
      wr_store_bind_str(stmt, 7, r->remote) != SQLITE_OK ||
      wr_store_bind_str(stmt, 8, r->remote_secret) != SQLITE_OK ||
      wr_store_bind_str(stmt, 9, r->labels_json ? r->labels_json : "{}") !=
          SQLITE_OK ||
      wr_store_bind_str(stmt, 10, r->settings_json ? r->settings_json : "{}") !=
          SQLITE_OK ||
      wr_store_bind_str(stmt, 11, r->revision) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 12, r->last_edit_ms) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 13, r->created_ms) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "insert project `%s`", r->name);
  return 0;
}

int wr_store_project_get(wr_store_t *st, const char *name,
                         struct wr_project_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st,
                       "SELECT " PROJECT_COLUMNS " FROM projects "
                       "WHERE name = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no project `%s`", name);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_project(stmt, rec);
  return 0;
}

int wr_store_project_list(wr_store_t *st, struct wr_project_rec **recs,
                          size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  *recs = NULL;
  *n = 0;
  if (wr_store_prepare(st,
                       "SELECT " PROJECT_COLUMNS " FROM projects "
                       "ORDER BY name",
                       &stmt, err) < 0)
    return -1;
  return wr_store_collect(st, stmt, sizeof(**recs), read_project, (void **)recs,
                          n, err);
}

int wr_store_project_update(wr_store_t *st, const struct wr_project_rec *r,
                            wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st,
                       "UPDATE projects SET tier = ?2, sandbox = ?3, "
                       "snapshot = ?4, generation = ?5, revision = ?6, "
                       "last_edit_ms = ?7 WHERE name = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, r->name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, r->tier) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, r->sandbox) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, r->snapshot) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 5, r->generation) != SQLITE_OK ||
      wr_store_bind_str(stmt, 6, r->revision) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 7, r->last_edit_ms) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "project `%s`", r->name);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no project `%s`", r->name);
  return 0;
}

int wr_store_project_delete(wr_store_t *st, const char *name, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st, "DELETE FROM projects WHERE name = ?1", &stmt, err) <
      0)
    return -1;
  if (wr_store_bind_str(stmt, 1, name) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return -1;
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no project `%s`", name);
  return 0;
}

void wr_project_rec_free(struct wr_project_rec *rec) {
  free(rec->name);
  free(rec->template_name);
  free(rec->tier);
  free(rec->sandbox);
  free(rec->snapshot);
  free(rec->remote);
  free(rec->remote_secret);
  free(rec->labels_json);
  free(rec->settings_json);
  free(rec->revision);
  memset(rec, 0, sizeof(*rec));
}

void wr_project_recs_free(struct wr_project_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_project_rec_free(&recs[i]);
  free(recs);
}
