/* Unit tests for src/store: warren's state in SQLite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "store/store_internal.h"

/* Each test gets its own directory and database path. */
struct fixture {
  char dir[64];
  char *db;
};

static int setup(void **state) {
  struct fixture *fx = xcalloc(1, sizeof(*fx));

  strcpy(fx->dir, "/tmp/test_store.XXXXXX");
  if (mkdtemp(fx->dir) == NULL)
    return -1;
  fx->db = xasprintf("%s/warren.db", fx->dir);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fixture *fx = *state;

  wr_rm_rf(fx->dir, NULL);
  free(fx->db);
  free(fx);
  return 0;
}

static wr_store_t *open_ok(const struct fixture *fx) {
  wr_store_t *st = NULL;
  wr_error_t err = {0};

  if (wr_store_open(fx->db, &st, &err) < 0)
    fail_msg("open: %s", err.msg);
  return st;
}

static void insert_ok(wr_store_t *st, const char *id, const char *name,
                      const char *image, uint32_t slot) {
  struct wr_sandbox_rec rec = {
      .id = (char *)id,
      .name = (char *)name,
      .image = (char *)image,
      .state = "creating",
      .spec_json = "{\"memory\":1073741824}",
      .slot = slot,
  };
  wr_error_t err = {0};

  if (wr_store_sandbox_insert(st, &rec, &err) < 0)
    fail_msg("insert %s: %s", name, err.msg);
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000};

  nanosleep(&ts, NULL);
}

/* Run one query on a raw connection and return its first column as text. */
static char *raw_query(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  sqlite3_stmt *stmt = NULL;
  char *out = NULL;

  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), SQLITE_OK);
  if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
    out = xstrdup((const char *)sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

static void test_open_creates_private_wal_db(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *wal = xasprintf("%s-wal", fx->db);
  _cleanup_free_ char *mode = NULL;
  mode_t old = umask(022);
  wr_store_t *st = open_ok(fx);
  struct stat sb;

  umask(old);
  assert_int_equal(wr_store_version(st), 1);
  assert_int_equal(stat(fx->db, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0600);
  insert_ok(st, "sb-1", "web", "base", 1);
  assert_int_equal(stat(wal, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0600);
  wr_store_close(st);
  mode = raw_query(fx->db, "PRAGMA journal_mode");
  assert_string_equal(mode, "wal");
}

static void test_open_tightens_existing_file(void **state) {
  struct fixture *fx = *state;
  int fd = open(fx->db, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  struct stat sb;

  assert_true(fd >= 0);
  assert_int_equal(fchmod(fd, 0644), 0);
  close(fd);
  wr_store_close(open_ok(fx));
  assert_int_equal(stat(fx->db, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0600);
}

static void test_reopen_keeps_data(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", "base", 1);
  wr_store_close(st);
  st = open_ok(fx);
  assert_int_equal(wr_store_version(st), 1);
  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, NULL), 0);
  assert_string_equal(rec.id, "sb-1");
  wr_sandbox_rec_free(&rec);
  wr_store_close(st);
}

static void test_insert_and_get(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  int64_t before = wr_now_ms();
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-3f9k2a", "web", NULL, 7);
  assert_int_equal(wr_store_sandbox_get(st, "sb-3f9k2a", &rec, &err), 0);
  assert_string_equal(rec.id, "sb-3f9k2a");
  assert_string_equal(rec.name, "web");
  assert_null(rec.image);
  assert_null(rec.error);
  assert_string_equal(rec.state, "creating");
  assert_string_equal(rec.spec_json, "{\"memory\":1073741824}");
  assert_int_equal(rec.slot, 7);
  assert_true(rec.created_ms >= before && rec.created_ms <= wr_now_ms());
  assert_int_equal(rec.updated_ms, rec.created_ms);
  assert_int_equal(rec.init_pid, 0);
  wr_sandbox_rec_free(&rec);
  assert_null(rec.id);

  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, &err), 0);
  assert_string_equal(rec.id, "sb-3f9k2a");
  wr_sandbox_rec_free(&rec);
  wr_store_close(st);
}

static void test_get_prefers_id_over_name(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  wr_store_t *st = open_ok(fx);

  /* A sandbox whose name is another sandbox's id, inserted first. */
  insert_ok(st, "sb-2", "sb-1", NULL, 2);
  insert_ok(st, "sb-1", "api", NULL, 1);
  assert_int_equal(wr_store_sandbox_get(st, "sb-1", &rec, NULL), 0);
  assert_string_equal(rec.name, "api");
  wr_sandbox_rec_free(&rec);
  wr_store_close(st);
}

static void test_insert_clashes(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {
      .id = "sb-2", .name = "web", .state = "creating", .slot = 2};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  assert_int_equal(wr_store_sandbox_insert(st, &rec, &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_string_equal(err.msg, "a sandbox named `web` already exists");

  rec.id = "sb-1";
  rec.name = "api";
  assert_int_equal(wr_store_sandbox_insert(st, &rec, &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_string_equal(err.msg, "a sandbox with id `sb-1` already exists");

  rec.id = "sb-2";
  rec.slot = 1;
  assert_int_equal(wr_store_sandbox_insert(st, &rec, &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_string_equal(err.msg, "slot 1 is already taken");

  rec.slot = 2;
  assert_int_equal(wr_store_sandbox_insert(st, &rec, &err), 0);
  wr_store_close(st);
}

static void test_insert_rejects_incomplete_record(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {.id = "sb-1", .state = "creating", .slot = 1};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_sandbox_insert(st, &rec, &err), -1);
  assert_int_equal(err.code, EINVAL);
  rec.name = "web";
  rec.slot = 0;
  assert_int_equal(wr_store_sandbox_insert(st, &rec, &err), -1);
  assert_int_equal(err.code, EINVAL);
  wr_store_close(st);
}

static void test_list_in_creation_order(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec *recs = NULL;
  size_t n = 99;
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_sandbox_list(st, &recs, &n, NULL), 0);
  assert_int_equal(n, 0);
  wr_sandbox_recs_free(recs, n);

  insert_ok(st, "sb-c", "zeta", NULL, 1);
  sleep_ms(2);
  insert_ok(st, "sb-a", "alpha", NULL, 2);
  insert_ok(st, "sb-b", "mid", NULL, 3); /* same ms likely: insertion order */
  assert_int_equal(wr_store_sandbox_list(st, &recs, &n, NULL), 0);
  assert_int_equal(n, 3);
  assert_string_equal(recs[0].name, "zeta");
  assert_string_equal(recs[1].name, "alpha");
  assert_string_equal(recs[2].name, "mid");
  assert_true(recs[0].created_ms <= recs[1].created_ms);
  wr_sandbox_recs_free(recs, n);
  wr_store_close(st);
}

static void test_set_state(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  sleep_ms(3);
  assert_int_equal(
      wr_store_sandbox_set_state(st, "sb-1", "error", "mount failed", &err), 0);
  assert_int_equal(wr_store_sandbox_get(st, "sb-1", &rec, NULL), 0);
  assert_string_equal(rec.state, "error");
  assert_string_equal(rec.error, "mount failed");
  assert_true(rec.updated_ms > rec.created_ms);
  wr_sandbox_rec_free(&rec);

  assert_int_equal(
      wr_store_sandbox_set_state(st, "sb-1", "running", NULL, &err), 0);
  assert_int_equal(wr_store_sandbox_get(st, "sb-1", &rec, NULL), 0);
  assert_string_equal(rec.state, "running");
  assert_null(rec.error);
  wr_sandbox_rec_free(&rec);

  assert_int_equal(
      wr_store_sandbox_set_state(st, "sb-9", "running", NULL, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_string_equal(err.msg, "no sandbox `sb-9`");
  wr_store_close(st);
}

static void test_set_init(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  assert_int_equal(
      wr_store_sandbox_set_init(st, "sb-1", 4242, 98765432100ULL, &err), 0);
  assert_int_equal(wr_store_sandbox_get(st, "sb-1", &rec, NULL), 0);
  assert_int_equal(rec.init_pid, 4242);
  assert_int_equal(rec.init_start, 98765432100ULL);
  wr_sandbox_rec_free(&rec);

  assert_int_equal(wr_store_sandbox_set_init(st, "sb-1", 0, 5, &err), 0);
  assert_int_equal(wr_store_sandbox_get(st, "sb-1", &rec, NULL), 0);
  assert_int_equal(rec.init_pid, 0);
  assert_int_equal(rec.init_start, 0);
  wr_sandbox_rec_free(&rec);

  assert_int_equal(wr_store_sandbox_set_init(st, "sb-1", -5, 0, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_int_equal(wr_store_sandbox_set_init(st, "nope", 1, 1, &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_store_close(st);
}

static void test_delete(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  insert_ok(st, "sb-2", "api", NULL, 2);
  assert_int_equal(wr_store_sandbox_delete(st, "sb-1", &err), 0);
  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_string_equal(err.msg, "no sandbox `web`");
  assert_int_equal(wr_store_sandbox_delete(st, "sb-1", &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_store_sandbox_get(st, "api", &rec, &err), 0);
  wr_sandbox_rec_free(&rec);
  /* The name is free again. */
  insert_ok(st, "sb-3", "web", NULL, 1);
  wr_store_close(st);
}

static uint32_t free_slot(wr_store_t *st) {
  uint32_t slot = 0;
  wr_error_t err = {0};

  if (wr_store_sandbox_free_slot(st, &slot, &err) < 0)
    fail_msg("free_slot: %s", err.msg);
  return slot;
}

static void test_free_slot_fills_gaps(void **state) {
  struct fixture *fx = *state;
  wr_store_t *st = open_ok(fx);

  assert_int_equal(free_slot(st), 1);
  insert_ok(st, "sb-2", "b", NULL, 2);
  insert_ok(st, "sb-3", "c", NULL, 3);
  assert_int_equal(free_slot(st), 1);
  insert_ok(st, "sb-1", "a", NULL, 1);
  assert_int_equal(free_slot(st), 4);
  assert_int_equal(wr_store_sandbox_delete(st, "sb-3", NULL), 0);
  insert_ok(st, "sb-4", "d", NULL, 4);
  assert_int_equal(free_slot(st), 3); /* 1, 2, 4 used */
  wr_store_close(st);
}

static void put_image(wr_store_t *st, const char *name, const char *state,
                      uint64_t size) {
  struct wr_image_rec rec = {
      .name = (char *)name,
      .state = (char *)state,
      .packages_json = "[\"git\",\"curl\"]",
      .suite = "bookworm",
      .size_bytes = size,
  };
  wr_error_t err = {0};

  if (wr_store_image_put(st, &rec, &err) < 0)
    fail_msg("put image %s: %s", name, err.msg);
}

static void test_images(void **state) {
  struct fixture *fx = *state;
  struct wr_image_rec rec = {0}, *recs = NULL;
  wr_error_t err = {0};
  unsigned users = 99;
  size_t n = 0;
  int64_t created;
  wr_store_t *st = open_ok(fx);

  put_image(st, "base", "building", 0);
  assert_int_equal(wr_store_image_get(st, "base", &rec, &err), 0);
  assert_string_equal(rec.state, "building");
  assert_string_equal(rec.packages_json, "[\"git\",\"curl\"]");
  assert_string_equal(rec.suite, "bookworm");
  created = rec.created_ms;
  wr_image_rec_free(&rec);

  sleep_ms(2);
  put_image(st, "base", "ready", 5ULL << 32); /* replaces, above 32 bits */
  assert_int_equal(wr_store_image_get(st, "base", &rec, &err), 0);
  assert_string_equal(rec.state, "ready");
  assert_int_equal(rec.size_bytes, 5ULL << 32);
  assert_int_equal(rec.created_ms, created);
  wr_image_rec_free(&rec);

  put_image(st, "alpine-ish", "ready", 1);
  assert_int_equal(wr_store_image_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(recs[0].name, "alpine-ish");
  assert_string_equal(recs[1].name, "base");
  wr_image_recs_free(recs, n);

  insert_ok(st, "sb-1", "a", "base", 1);
  insert_ok(st, "sb-2", "b", "base", 2);
  insert_ok(st, "sb-3", "c", "alpine-ish", 3);
  assert_int_equal(wr_store_image_users(st, "base", &users, &err), 0);
  assert_int_equal(users, 2);
  assert_int_equal(wr_store_image_users(st, "none", &users, &err), 0);
  assert_int_equal(users, 0);

  assert_int_equal(wr_store_image_delete(st, "base", &err), 0);
  assert_int_equal(wr_store_image_get(st, "base", &rec, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_string_equal(err.msg, "no image `base`");
  assert_int_equal(wr_store_image_delete(st, "base", &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_store_close(st);
}

/* What a later release might add: a column and a table that refers to
 * sandboxes. */
static const char *const v2[] = {
    "ALTER TABLE sandboxes ADD COLUMN labels_json TEXT;"
    "CREATE TABLE snapshots ("
    "  id TEXT PRIMARY KEY,"
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE"
    ");",
};

static void test_migration_upgrades_v1_database(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *count = NULL;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  wr_store_close(st);

  assert_int_equal(wr_store_open_with(fx->db, v2, 1, &st, &err), 0);
  assert_int_equal(wr_store_version(st), 2);
  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, &err), 0);
  wr_sandbox_rec_free(&rec);
  assert_int_equal(
      wr_store_exec(st,
                    "UPDATE sandboxes SET labels_json = '{}';"
                    "INSERT INTO snapshots VALUES ('sn-1', 'sb-1')",
                    &err),
      0);
  /* Foreign keys are enforced again after migrating. */
  assert_int_equal(wr_store_sandbox_delete(st, "sb-1", &err), 0);
  assert_int_equal(
      wr_store_exec(st, "INSERT INTO snapshots VALUES ('sn-2', 'sb-9')", &err),
      -1);
  wr_store_close(st);

  /* Opening again applies nothing twice (ALTER TABLE would fail). */
  assert_int_equal(wr_store_open_with(fx->db, v2, 1, &st, &err), 0);
  assert_int_equal(wr_store_version(st), 2);
  wr_store_close(st);
  count = raw_query(fx->db, "SELECT COUNT(*) FROM schema_migrations");
  assert_string_equal(count, "2");
}

static void test_failed_migration_rolls_back(void **state) {
  struct fixture *fx = *state;
  static const char *const broken[] = {
      "CREATE TABLE half (x INTEGER);"
      "INSERT INTO nowhere VALUES (1);",
  };
  _cleanup_free_ char *tables = NULL;
  wr_error_t err = {0};
  wr_store_t *st = NULL;

  wr_store_close(open_ok(fx));
  assert_int_equal(wr_store_open_with(fx->db, broken, 1, &st, &err), -1);
  assert_null(st);
  assert_non_null(strstr(err.msg, "migration 2: no such table: nowhere"));
  st = open_ok(fx);
  assert_int_equal(wr_store_version(st), 1);
  wr_store_close(st);
  tables = raw_query(fx->db,
                     "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'half'");
  assert_string_equal(tables, "0");
}

static void test_newer_database_is_refused(void **state) {
  struct fixture *fx = *state;
  wr_error_t err = {0};
  wr_store_t *st = NULL;

  assert_int_equal(wr_store_open_with(fx->db, v2, 1, &st, &err), 0);
  wr_store_close(st);
  st = NULL;
  assert_int_equal(wr_store_open(fx->db, &st, &err), -1);
  assert_null(st);
  assert_non_null(strstr(err.msg, "schema version 2 is newer than this "
                                  "warren knows (1)"));
  assert_non_null(strstr(err.msg, fx->db));
  /* The refusal left the database as it was. */
  assert_int_equal(wr_store_open_with(fx->db, v2, 1, &st, &err), 0);
  assert_int_equal(wr_store_version(st), 2);
  wr_store_close(st);
}

static void test_corrupt_file_is_an_error(void **state) {
  struct fixture *fx = *state;
  char junk[4096];
  _cleanup_free_ char *back = NULL;
  size_t len = 0;
  wr_error_t err = {0};
  wr_store_t *st = NULL;

  for (size_t i = 0; i < sizeof(junk); i++)
    junk[i] = "not a database, just text\n"[i % 26];
  assert_int_equal(wr_write_file(fx->db, junk, sizeof(junk), 0600, &err), 0);
  assert_int_equal(wr_store_open(fx->db, &st, &err), -1);
  assert_null(st);
  assert_non_null(strstr(err.msg, "file is not a database"));
  assert_non_null(strstr(err.msg, fx->db));
  assert_int_equal(wr_read_file(fx->db, 1 << 20, &back, &len, &err), 0);
  assert_int_equal(len, sizeof(junk));
  assert_memory_equal(back, junk, len);
}

static void test_directory_is_an_error(void **state) {
  struct fixture *fx = *state;
  wr_error_t err = {0};
  wr_store_t *st = NULL;

  assert_int_equal(wr_store_open(fx->dir, &st, &err), -1);
  assert_null(st);
  assert_int_equal(err.code, EISDIR);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_open_creates_private_wal_db),
      T(test_open_tightens_existing_file),
      T(test_reopen_keeps_data),
      T(test_insert_and_get),
      T(test_get_prefers_id_over_name),
      T(test_insert_clashes),
      T(test_insert_rejects_incomplete_record),
      T(test_list_in_creation_order),
      T(test_set_state),
      T(test_set_init),
      T(test_delete),
      T(test_free_slot_fills_gaps),
      T(test_images),
      T(test_migration_upgrades_v1_database),
      T(test_failed_migration_rolls_back),
      T(test_newer_database_is_refused),
      T(test_corrupt_file_is_an_error),
      T(test_directory_is_an_error),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
