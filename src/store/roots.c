/*
 * store: the host's registry of state roots (store.h has the why). Its
 * own schema, with migrations like warren.db's.
 *
 * A slot is claimed per (slot, root): a root's sandboxes from before the
 * registry keep the slots they have even where another root has the same
 * one (their files are owned by those uids), and such a slot stays
 * claimed until both let go, so no third sandbox is ever given it. New
 * sandboxes only get slots that nobody claims.
 */
#include "store/store_internal.h"

const char *const wr_roots_migrations[] = {
    /* 1: roots and the uid slots their sandboxes hold. */
    "CREATE TABLE roots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  path TEXT UNIQUE NOT NULL,"
    "  cgroup_parent TEXT UNIQUE NOT NULL,"
    "  registered_ms INTEGER NOT NULL,"
    "  seen_ms INTEGER NOT NULL"
    ");"
    "CREATE TABLE uid_slots ("
    "  slot INTEGER NOT NULL CHECK (slot >= 1),"
    "  root_id TEXT NOT NULL REFERENCES roots (id) ON DELETE CASCADE,"
    "  sandbox_id TEXT NOT NULL,"
    "  PRIMARY KEY (slot, root_id)"
    ");"
    "CREATE INDEX uid_slots_root ON uid_slots (root_id, sandbox_id);",
};
const size_t wr_roots_nmigrations = WR_ARRAY_SIZE(wr_roots_migrations);

#define ROOT_COLUMNS "id, path, cgroup_parent, registered_ms, seen_ms"

static void read_root(sqlite3_stmt *stmt, void *out) {
  struct wr_root_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->id = wr_store_column_str(stmt, 0);
  rec->path = wr_store_column_str(stmt, 1);
  rec->cgroup_parent = wr_store_column_str(stmt, 2);
  rec->registered_ms = sqlite3_column_int64(stmt, 3);
  rec->seen_ms = sqlite3_column_int64(stmt, 4);
}

int wr_roots_list(wr_store_t *st, struct wr_root_rec **recs, size_t *n,
                  wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st, "SELECT " ROOT_COLUMNS " FROM roots ORDER BY path",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_root_rec), read_root, &v,
                       &len, err) < 0) {
    wr_root_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

static int run_with_id(wr_store_t *st, const char *sql, const char *id,
                       wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, sql, &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, id) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

int wr_roots_forget(wr_store_t *st, const char *id, wr_error_t *err) {
  return run_with_id(st, "DELETE FROM roots WHERE id = ?1", id, err);
}

bool wr_roots_parents_overlap(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);

  if (la > lb)
    return wr_roots_parents_overlap(b, a);
  return strncmp(a, b, la) == 0 && (b[la] == '\0' || b[la] == '/');
}

/* Another root that has rec's path or a cgroup parent overlapping its
 * own: an EEXIST error naming it, else 0. */
static int check_clash(wr_store_t *st, const struct wr_root_rec *rec,
                       wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st,
                       "SELECT path, cgroup_parent FROM roots WHERE id != ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, rec->id) != SQLITE_OK)
    return wr_store_fail(st, err);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char *path = (const char *)sqlite3_column_text(stmt, 0);
    const char *parent = (const char *)sqlite3_column_text(stmt, 1);
    if (strcmp(path, rec->path) == 0)
      return wr_store_error(
          err, EEXIST, "state root `%s` is registered under another id", path);
    if (wr_roots_parents_overlap(parent, rec->cgroup_parent))
      return wr_store_error(err, EEXIST,
                            "cgroup parent `%s` overlaps `%s`, which the "
                            "warrend of state root `%s` uses",
                            rec->cgroup_parent, parent, path);
  }
  return rc == SQLITE_DONE ? 0 : wr_store_fail(st, err);
}

int wr_roots_register(wr_store_t *st, const struct wr_root_rec *rec,
                      wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int64_t now = wr_now_ms();

  if (rec->id == NULL || rec->path == NULL || rec->cgroup_parent == NULL)
    return wr_store_error(err, EINVAL,
                          "a root needs an id, a path and a cgroup parent");
  if (check_clash(st, rec, err) < 0)
    return -1;
  if (wr_store_prepare(st,
                       "INSERT INTO roots (" ROOT_COLUMNS ") "
                       "VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (id) DO "
                       "UPDATE SET path = excluded.path, cgroup_parent = "
                       "excluded.cgroup_parent, seen_ms = excluded.seen_ms",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, rec->id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->path) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->cgroup_parent) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 4, now) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "register state root `%s`", rec->path);
  return 0;
}

/* The path of another root that claims the slot, or NULL. */
static int other_claimant(wr_store_t *st, const char *root_id, uint32_t slot,
                          char **other, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  *other = NULL;
  if (wr_store_prepare(st,
                       "SELECT r.path FROM uid_slots s JOIN roots r ON "
                       "r.id = s.root_id WHERE s.slot = ?1 AND "
                       "s.root_id != ?2 LIMIT 1",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, slot) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, root_id) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW)
    *other = wr_store_column_str(stmt, 0);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : wr_store_fail(st, err);
}

int wr_roots_claim(wr_store_t *st, const char *root_id, const char *sandbox_id,
                   uint32_t slot, char **other, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "INSERT INTO uid_slots (slot, root_id, sandbox_id) "
                       "VALUES (?1, ?2, ?3) ON CONFLICT (slot, root_id) DO "
                       "UPDATE SET sandbox_id = excluded.sandbox_id",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, slot) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, root_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, sandbox_id) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "claim uid slot %u", (unsigned)slot);
  return other_claimant(st, root_id, slot, other, err);
}

/*
 * The smallest unclaimed slot is 1 when nobody claims 1, otherwise one
 * past the first claimed slot whose successor nobody claims; both probes
 * use the primary key's index. Found and claimed in one transaction, so
 * two daemons never take the same slot.
 */
static int find_free(wr_store_t *st, int64_t *slot, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "SELECT CASE WHEN NOT EXISTS "
                       "  (SELECT 1 FROM uid_slots WHERE slot = 1) THEN 1 "
                       "ELSE (SELECT MIN(a.slot) + 1 FROM uid_slots a "
                       "  WHERE NOT EXISTS (SELECT 1 FROM uid_slots b "
                       "    WHERE b.slot = a.slot + 1)) END",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_step(stmt) != SQLITE_ROW)
    return wr_store_fail(st, err);
  *slot = sqlite3_column_int64(stmt, 0);
  return 0;
}

static int claim_free(wr_store_t *st, const char *root_id,
                      const char *sandbox_id, uint32_t max, uint32_t *slot,
                      wr_error_t *err) {
  _cleanup_free_ char *other = NULL;
  int64_t v = 0;

  if (find_free(st, &v, err) < 0)
    return -1;
  if (v < 1 || v > max)
    return wr_store_error(err, ENOSPC,
                          "no free uid range for a new sandbox (all %u "
                          "are taken on this host)",
                          (unsigned)max);
  *slot = (uint32_t)v;
  return wr_roots_claim(st, root_id, sandbox_id, *slot, &other, err);
}

int wr_roots_claim_free(wr_store_t *st, const char *root_id,
                        const char *sandbox_id, uint32_t max, uint32_t *slot,
                        wr_error_t *err) {
  if (wr_store_begin(st, err) < 0)
    return -1;
  if (claim_free(st, root_id, sandbox_id, max, slot, err) < 0) {
    wr_store_rollback(st);
    return -1;
  }
  return wr_store_commit(st, err);
}

int wr_roots_release(wr_store_t *st, const char *root_id,
                     const char *sandbox_id, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "DELETE FROM uid_slots WHERE root_id = ?1 AND "
                       "sandbox_id = ?2",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, root_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, sandbox_id) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

int wr_roots_claimed(wr_store_t *st, const char *root_id, char ***sandbox_ids,
                     wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  char **ids = xcalloc(1, sizeof(*ids));
  int rc;

  if (wr_store_prepare(st,
                       "SELECT DISTINCT sandbox_id FROM uid_slots WHERE "
                       "root_id = ?1 ORDER BY sandbox_id",
                       &stmt, err) < 0 ||
      wr_store_bind_str(stmt, 1, root_id) != SQLITE_OK) {
    wr_strv_free(ids);
    return stmt == NULL ? -1 : wr_store_fail(st, err);
  }
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    ids = wr_strv_push(ids, (const char *)sqlite3_column_text(stmt, 0));
  if (rc != SQLITE_DONE) {
    wr_strv_free(ids);
    return wr_store_fail(st, err);
  }
  *sandbox_ids = ids;
  return 0;
}

void wr_root_rec_free(struct wr_root_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->id);
  free(rec->path);
  free(rec->cgroup_parent);
  memset(rec, 0, sizeof(*rec));
}

void wr_root_recs_free(struct wr_root_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_root_rec_free(&recs[i]);
  free(recs);
}
