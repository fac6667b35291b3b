/*
 * store: warm pools (the pools table) and which sandboxes are their
 * members (sandboxes.pool). See migration 8 in store.c.
 */
#include "store/store_internal.h"

int wr_store_pool_set(wr_store_t *st, const char *image, uint64_t size,
                      wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int64_t now = wr_now_ms();

  if (size < 1 || size > INT64_MAX)
    return wr_store_error(err, EINVAL, "pool `%s`: a size of at least 1",
                          image);
  if (wr_store_prepare(st,
                       "INSERT INTO pools (image, size, created_ms, "
                       "updated_ms) VALUES (?1, ?2, ?3, ?3) "
                       "ON CONFLICT (image) DO UPDATE SET size = ?2, "
                       "updated_ms = ?3",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, image) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 2, (int64_t)size) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 3, now) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

int wr_store_pool_delete(wr_store_t *st, const char *image, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st, "DELETE FROM pools WHERE image = ?1", &stmt, err) <
      0)
    return -1;
  if (wr_store_bind_str(stmt, 1, image) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return -1;
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no pool for image `%s`", image);
  return 0;
}

static void read_pool(sqlite3_stmt *stmt, void *out) {
  struct wr_pool_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->image = wr_store_column_str(stmt, 0);
  rec->size = (uint64_t)sqlite3_column_int64(stmt, 1);
  rec->claimed = (uint64_t)sqlite3_column_int64(stmt, 2);
  rec->created_ms = sqlite3_column_int64(stmt, 3);
  rec->updated_ms = sqlite3_column_int64(stmt, 4);
}

int wr_store_pool_list(wr_store_t *st, struct wr_pool_rec **recs, size_t *n,
                       wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st,
                       "SELECT image, size, claimed, created_ms, updated_ms "
                       "FROM pools ORDER BY image",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_pool_rec), read_pool, &v,
                       &len, err) < 0) {
    wr_pool_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

void wr_pool_recs_free(struct wr_pool_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(recs[i].image);
  free(recs);
}

int wr_store_sandbox_set_pool(wr_store_t *st, const char *id, const char *state,
                              wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st, "UPDATE sandboxes SET pool = ?2 WHERE id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, state) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "sandbox `%s`", id);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no sandbox `%s`", id);
  return 0;
}

static void read_member(sqlite3_stmt *stmt, void *out) {
  struct wr_pool_member_rec *rec = out;

  rec->sandbox_id = wr_store_column_str(stmt, 0);
  rec->state = wr_store_column_str(stmt, 1);
}

int wr_store_pool_members(wr_store_t *st, struct wr_pool_member_rec **recs,
                          size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st,
                       "SELECT id, pool FROM sandboxes WHERE pool IS NOT NULL "
                       "ORDER BY created_ms, rowid",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_pool_member_rec), read_member,
                       &v, &len, err) < 0) {
    wr_pool_member_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

void wr_pool_member_recs_free(struct wr_pool_member_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(recs[i].sandbox_id);
    free(recs[i].state);
  }
  free(recs);
}

static int name_member(wr_store_t *st, const char *id, const char *name,
                       const char *spec_json, int64_t created_ms,
                       wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st,
                       "UPDATE sandboxes SET name = ?2, spec_json = ?3, "
                       "created_ms = ?4, updated_ms = ?4, pool = NULL "
                       "WHERE id = ?1 AND pool = 'claiming'",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, name) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, spec_json) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 4, created_ms) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "name sandbox `%s` `%s`", id, name);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no sandbox `%s` being claimed", id);
  return 0;
}

static int count_claim(wr_store_t *st, const char *image, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "UPDATE pools SET claimed = claimed + 1 "
                       "WHERE image = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, image) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

int wr_store_pool_claimed(wr_store_t *st, const char *id, const char *image,
                          const char *name, const char *spec_json,
                          int64_t created_ms, wr_error_t *err) {
  if (wr_store_begin(st, err) < 0)
    return -1;
  if (name_member(st, id, name, spec_json, created_ms, err) < 0 ||
      count_claim(st, image, err) < 0) {
    wr_store_rollback(st);
    return -1;
  }
  return wr_store_commit(st, err);
}
