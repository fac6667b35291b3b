/* Unit tests for src/store: warren's state in SQLite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "store/store_internal.h"

/* The schema version this build creates, and what a test's extra
 * migration makes of it. */
#define VERSION 9
#define NEXT_VERSION (VERSION + 1)

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
  assert_int_equal(wr_store_version(st), VERSION);
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
  assert_int_equal(wr_store_version(st), VERSION);
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

static void put_image(wr_store_t *st, const char *name, const char *state,
                      uint64_t size) {
  struct wr_image_rec rec = {
      .name = (char *)name,
      .state = (char *)state,
      .packages_json = "[\"git\",\"curl\"]",
      .suite = "bookworm",
      .size_bytes = size,
      .node_json =
          strcmp(state, "ready") == 0 ? "{\"version\":\"24.1.0\"}" : NULL,
      .minimal = size == 1,
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
  assert_null(rec.node_json);
  created = rec.created_ms;
  wr_image_rec_free(&rec);

  sleep_ms(2);
  put_image(st, "base", "ready", 5ULL << 32); /* replaces, above 32 bits */
  assert_int_equal(wr_store_image_get(st, "base", &rec, &err), 0);
  assert_string_equal(rec.state, "ready");
  assert_int_equal(rec.size_bytes, 5ULL << 32);
  assert_int_equal(rec.created_ms, created);
  assert_string_equal(rec.node_json, "{\"version\":\"24.1.0\"}");
  assert_false(rec.minimal);
  wr_image_rec_free(&rec);

  put_image(st, "alpine-ish", "ready", 1);
  assert_int_equal(wr_store_image_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(recs[0].name, "alpine-ish");
  assert_string_equal(recs[1].name, "base");
  assert_true(recs[0].minimal);
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
static const char *const later[] = {
    "ALTER TABLE sandboxes ADD COLUMN labels_json TEXT;"
    "CREATE TABLE later_things ("
    "  id TEXT PRIMARY KEY,"
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE"
    ");",
};

static void test_migration_upgrades_database(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *count = NULL;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  wr_store_close(st);

  assert_int_equal(wr_store_open_with(fx->db, later, 1, &st, &err), 0);
  assert_int_equal(wr_store_version(st), NEXT_VERSION);
  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, &err), 0);
  wr_sandbox_rec_free(&rec);
  assert_int_equal(
      wr_store_exec(st,
                    "UPDATE sandboxes SET labels_json = '{}';"
                    "INSERT INTO later_things VALUES ('sn-1', 'sb-1')",
                    &err),
      0);
  /* Foreign keys are enforced again after migrating. */
  assert_int_equal(wr_store_sandbox_delete(st, "sb-1", &err), 0);
  assert_int_equal(
      wr_store_exec(st, "INSERT INTO later_things VALUES ('sn-2', 'sb-9')",
                    &err),
      -1);
  wr_store_close(st);

  /* Opening again applies nothing twice (ALTER TABLE would fail). */
  assert_int_equal(wr_store_open_with(fx->db, later, 1, &st, &err), 0);
  assert_int_equal(wr_store_version(st), NEXT_VERSION);
  wr_store_close(st);
  count = raw_query(fx->db, "SELECT COUNT(*) FROM schema_migrations");
  assert_int_equal(atoi(count), NEXT_VERSION);
}

static void test_failed_migration_rolls_back(void **state) {
  struct fixture *fx = *state;
  static const char *const broken[] = {
      "CREATE TABLE half (x INTEGER);"
      "INSERT INTO nowhere VALUES (1);",
  };
  _cleanup_free_ char *tables = NULL;
  _cleanup_free_ char *msg = NULL;
  wr_error_t err = {0};
  wr_store_t *st = NULL;

  wr_store_close(open_ok(fx));
  assert_int_equal(wr_store_open_with(fx->db, broken, 1, &st, &err), -1);
  assert_null(st);
  msg = xasprintf("migration %d: no such table: nowhere", NEXT_VERSION);
  assert_non_null(strstr(err.msg, msg));
  st = open_ok(fx);
  assert_int_equal(wr_store_version(st), VERSION);
  wr_store_close(st);
  tables = raw_query(fx->db,
                     "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'half'");
  assert_string_equal(tables, "0");
}

static void test_newer_database_is_refused(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *msg = NULL;
  wr_error_t err = {0};
  wr_store_t *st = NULL;

  assert_int_equal(wr_store_open_with(fx->db, later, 1, &st, &err), 0);
  wr_store_close(st);
  st = NULL;
  assert_int_equal(wr_store_open(fx->db, &st, &err), -1);
  assert_null(st);
  msg = xasprintf("schema version %d is newer than this warren knows (%d)",
                  NEXT_VERSION, VERSION);
  assert_non_null(strstr(err.msg, msg));
  assert_non_null(strstr(err.msg, fx->db));
  /* The refusal left the database as it was. */
  assert_int_equal(wr_store_open_with(fx->db, later, 1, &st, &err), 0);
  assert_int_equal(wr_store_version(st), NEXT_VERSION);
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

/* ---- the network's tables ----------------------------------------------- */

static void raw_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  char *msg = NULL;

  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL),
                   SQLITE_OK);
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
    fail_msg("%s: %s", sql, msg);
  sqlite3_close(db);
}

/* A database from before the network existed gains its tables and keeps
 * its sandboxes. */
static void test_migration_2_adds_network_tables(void **state) {
  struct fixture *fx = *state;
  struct wr_sandbox_rec rec = {0};
  _cleanup_free_ char *preset = NULL;
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  wr_store_close(st);
  raw_exec(fx->db, "DROP TABLE settings; DROP TABLE policy_rules;"
                   "DROP TABLE policy_log; DROP TABLE secrets;"
                   "DROP TABLE ports; DROP TABLE policy_log_dropped;"
                   "ALTER TABLE images DROP COLUMN node_json;"
                   "ALTER TABLE images DROP COLUMN minimal;"
                   "DROP TABLE events;"
                   "DROP TABLE snapshots;"
                   "DROP TABLE pools;"
                   "ALTER TABLE sandboxes DROP COLUMN pool;"
                   "DROP TABLE templates;"
                   "DROP TABLE projects;"
                   "DELETE FROM schema_migrations WHERE version >= 2");
  st = open_ok(fx);
  assert_int_equal(wr_store_version(st), VERSION);
  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, NULL), 0);
  wr_sandbox_rec_free(&rec);
  assert_int_equal(wr_store_setting_set(st, "policy.preset", "open", NULL), 0);
  assert_int_equal(wr_store_setting_get(st, "policy.preset", &preset, NULL), 0);
  assert_string_equal(preset, "open");
  wr_store_close(st);
}

/* Pools: set makes or resizes one, a sandbox is a member in a state,
 * and a claim names it and takes it out of its pool in one go, once. */
static void test_pools(void **state) {
  struct fixture *fx = *state;
  wr_store_t *st = open_ok(fx);
  struct wr_pool_rec *pools = NULL;
  struct wr_pool_member_rec *members = NULL;
  struct wr_sandbox_rec rec = {0};
  wr_error_t err = {0};
  size_t n = 0;

  assert_int_equal(wr_store_pool_set(st, "base", 2, &err), 0);
  assert_int_equal(wr_store_pool_set(st, "base", 3, &err), 0);
  assert_int_equal(wr_store_pool_set(st, "vite", 0, &err), -1);
  assert_int_equal(wr_store_pool_list(st, &pools, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(pools[0].image, "base");
  assert_int_equal(pools[0].size, 3);
  wr_pool_recs_free(pools, n);
  insert_ok(st, "sb-p1", "pool-base-aaaaaa", "base", 1);
  insert_ok(st, "sb-p2", "other", "base", 2);
  assert_int_equal(wr_store_sandbox_set_pool(st, "sb-p1", "ready", &err), 0);
  assert_int_equal(wr_store_sandbox_set_pool(st, "sb-p1", "bogus", &err), -1);
  assert_int_equal(wr_store_pool_members(st, &members, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(members[0].sandbox_id, "sb-p1");
  assert_string_equal(members[0].state, "ready");
  wr_pool_member_recs_free(members, n);
  /* Only a sandbox being claimed can be claimed. */
  assert_int_equal(
      wr_store_pool_claimed(st, "sb-p1", "base", "web", "{}", 5, &err), -1);
  assert_int_equal(wr_store_sandbox_set_pool(st, "sb-p1", "claiming", &err), 0);
  assert_int_equal(wr_store_pool_claimed(st, "sb-p1", "base", "web",
                                         "{\"env\":{}}", 5, &err),
                   0);
  assert_int_equal(wr_store_sandbox_get(st, "web", &rec, &err), 0);
  assert_string_equal(rec.id, "sb-p1");
  assert_string_equal(rec.spec_json, "{\"env\":{}}");
  wr_sandbox_rec_free(&rec);
  assert_int_equal(wr_store_pool_members(st, &members, &n, &err), 0);
  assert_int_equal(n, 0);
  wr_pool_member_recs_free(members, n);
  assert_int_equal(wr_store_pool_list(st, &pools, &n, &err), 0);
  assert_int_equal(pools[0].claimed, 1);
  wr_pool_recs_free(pools, n);
  assert_int_equal(wr_store_pool_delete(st, "base", &err), 0);
  assert_int_equal(wr_store_pool_delete(st, "base", &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_store_close(st);
}

/* Projects: insert refuses a second of a name, update moves the tier
 * and its snapshot and nothing else, delete says when there was none. */
static void test_projects(void **state) {
  struct fixture *fx = *state;
  struct wr_project_rec in = {.name = "shop",
                              .template_name = "vite",
                              .tier = "cold",
                              .remote = "http://git.test/shop.git",
                              .labels_json = "{\"owner\":\"ann\"}",
                              .last_edit_ms = 10,
                              .created_ms = 10};
  struct wr_project_rec r = {0}, *recs = NULL;
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);
  size_t n = 0;

  assert_int_equal(wr_store_project_insert(st, &in, &err), 0);
  assert_int_equal(wr_store_project_insert(st, &in, &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_int_equal(wr_store_project_get(st, "shop", &r, &err), 0);
  assert_string_equal(r.tier, "cold");
  assert_string_equal(r.labels_json, "{\"owner\":\"ann\"}");
  assert_string_equal(r.settings_json, "{}");
  assert_null(r.snapshot);
  free(r.tier);
  r.tier = xstrdup("cool");
  r.snapshot = xstrdup("project-shop-1");
  r.generation = 1;
  r.last_edit_ms = 20;
  assert_int_equal(wr_store_project_update(st, &r, &err), 0);
  wr_project_rec_free(&r);
  assert_int_equal(wr_store_project_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(recs[0].tier, "cool");
  assert_string_equal(recs[0].snapshot, "project-shop-1");
  assert_string_equal(recs[0].remote, "http://git.test/shop.git");
  assert_int_equal(recs[0].last_edit_ms, 20);
  wr_project_recs_free(recs, n);
  in.tier = "lukewarm";
  in.name = "other";
  assert_int_equal(wr_store_project_insert(st, &in, &err), -1);
  assert_int_equal(wr_store_project_delete(st, "shop", &err), 0);
  assert_int_equal(wr_store_project_delete(st, "shop", &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_store_close(st);
}

/* Templates: a put replaces by name (a rebuild), get and list read it
 * back, delete says when there was none. */
static void test_templates(void **state) {
  struct fixture *fx = *state;
  struct wr_template_rec in = {.name = "vite",
                               .base = "base",
                               .parent = "base",
                               .manifest_json = "{\"layers\":[]}",
                               .size_bytes = 7,
                               .created_ms = 1};
  struct wr_template_rec r = {0}, *recs = NULL;
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);
  size_t n = 0;

  assert_int_equal(wr_store_template_put(st, &in, &err), 0);
  in.manifest_json = "{\"layers\":[\"k\"]}";
  in.size_bytes = 9;
  assert_int_equal(wr_store_template_put(st, &in, &err), 0);
  assert_int_equal(wr_store_template_get(st, "vite", &r, &err), 0);
  assert_string_equal(r.manifest_json, "{\"layers\":[\"k\"]}");
  assert_int_equal(r.size_bytes, 9);
  wr_template_rec_free(&r);
  assert_int_equal(wr_store_template_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 1);
  wr_template_recs_free(recs, n);
  assert_int_equal(wr_store_template_delete(st, "vite", &err), 0);
  assert_int_equal(wr_store_template_delete(st, "vite", &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_store_template_get(st, "vite", &r, &err), -1);
  in.base = NULL;
  assert_int_equal(wr_store_template_put(st, &in, &err), -1);
  wr_store_close(st);
}

/* Snapshots: names are unique (and never another's id), a row is
 * "creating" until set ready. */
static void test_snapshots(void **state) {
  struct fixture *fx = *state;
  struct wr_snapshot_rec r = {0}, *recs = NULL;
  struct wr_snapshot_rec in = {.id = "snap-a1",
                               .name = "one",
                               .state = "creating",
                               .image = "base",
                               .source_id = "sb-1",
                               .layers_json = "[\"snap-a1\"]",
                               .created_ms = 1};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);
  size_t n = 0;

  assert_int_equal(wr_store_snapshot_insert(st, &in, &err), 0);
  in.id = "snap-b2";
  assert_int_equal(wr_store_snapshot_insert(st, &in, &err), -1);
  assert_int_equal(err.code, EEXIST);
  in.name = "snap-a1"; /* named like the other's id: ambiguous */
  assert_int_equal(wr_store_snapshot_insert(st, &in, &err), -1);
  assert_int_equal(err.code, EEXIST);
  in.name = "two";
  in.created_ms = 2;
  assert_int_equal(wr_store_snapshot_insert(st, &in, &err), 0);
  assert_int_equal(wr_store_snapshot_get(st, "snap-a1", &r, &err), 0);
  assert_string_equal(r.name, "one");
  assert_string_equal(r.state, "creating");
  wr_snapshot_rec_free(&r);
  assert_int_equal(
      wr_store_snapshot_set_ready(st, "snap-a1", 42, "{\"live\":true}", &err),
      0);
  assert_int_equal(wr_store_snapshot_get(st, "one", &r, &err), 0);
  assert_string_equal(r.state, "ready");
  assert_int_equal(r.size_bytes, 42);
  wr_snapshot_rec_free(&r);
  assert_int_equal(wr_store_snapshot_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(recs[0].id, "snap-a1");
  wr_snapshot_recs_free(recs, n);
  assert_int_equal(wr_store_snapshot_delete(st, "snap-a1", &err), 0);
  assert_int_equal(wr_store_snapshot_get(st, "one", &r, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_store_snapshot_set_ready(st, "snap-a1", 1, NULL, &err),
                   -1);
  wr_store_close(st);
}

static void test_settings(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *v1 = NULL;
  _cleanup_free_ char *v2 = NULL;
  char *none = NULL;
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_setting_get(st, "policy.preset", &none, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_null(none);
  assert_int_equal(wr_store_setting_set(st, "policy.preset", "locked", &err),
                   0);
  assert_int_equal(wr_store_setting_get(st, "policy.preset", &v1, &err), 0);
  assert_string_equal(v1, "locked");
  assert_int_equal(wr_store_setting_set(st, "policy.preset", "balanced", &err),
                   0);
  assert_int_equal(wr_store_setting_get(st, "policy.preset", &v2, &err), 0);
  assert_string_equal(v2, "balanced");
  assert_int_equal(wr_store_setting_set(st, "x", NULL, &err), -1);
  assert_int_equal(err.code, EINVAL);
  wr_store_close(st);
}

static int64_t add_rule(wr_store_t *st, const char *sandbox, bool allow,
                        const char *pattern, uint16_t port, bool want_added) {
  struct wr_rule_rec in = {.sandbox_id = (char *)sandbox,
                           .allow = allow,
                           .pattern = (char *)pattern,
                           .port = port};
  struct wr_rule_rec rec = {0};
  wr_error_t err = {0};
  bool added = !want_added;
  int64_t id;

  if (wr_store_rule_add(st, &in, &rec, &added, &err) < 0)
    fail_msg("add rule %s: %s", pattern, err.msg);
  assert_int_equal(added, want_added);
  assert_string_equal(rec.pattern, pattern);
  assert_int_equal(rec.allow, allow);
  assert_int_equal(rec.port, port);
  if (sandbox == NULL)
    assert_null(rec.sandbox_id);
  else
    assert_string_equal(rec.sandbox_id, sandbox);
  assert_true(rec.created_ms > 0);
  id = rec.id;
  wr_rule_rec_free(&rec);
  return id;
}

/* Global rules (NULL sandbox) are unique too, though NULLs are distinct
 * in SQL; sandbox, action and port all tell rules apart. */
static void test_rules_are_unique(void **state) {
  struct fixture *fx = *state;
  wr_store_t *st = open_ok(fx);
  int64_t a, b, c, d, e;

  insert_ok(st, "sb-1", "web", NULL, 1);
  a = add_rule(st, NULL, true, "example.com", 0, true);
  assert_int_equal(add_rule(st, NULL, true, "example.com", 0, false), a);
  b = add_rule(st, "sb-1", true, "example.com", 0, true);
  assert_int_equal(add_rule(st, "sb-1", true, "example.com", 0, false), b);
  c = add_rule(st, NULL, false, "example.com", 0, true);
  d = add_rule(st, NULL, true, "example.com", 443, true);
  e = add_rule(st, NULL, true, "*.example.com", 0, true);
  assert_true(a < b && b < c && c < d && d < e);
  wr_store_close(st);
}

static void test_rules_list_get_delete(void **state) {
  struct fixture *fx = *state;
  struct wr_rule_rec *recs = NULL, rec = {0};
  struct wr_rule_rec bad = {.sandbox_id = "sb-9", .pattern = "x.org"};
  wr_error_t err = {0};
  size_t n = 0;
  wr_store_t *st = open_ok(fx);
  int64_t g, one, two;

  insert_ok(st, "sb-1", "web", NULL, 1);
  insert_ok(st, "sb-2", "api", NULL, 2);
  g = add_rule(st, NULL, false, "10.0.0.0/8", 0, true);
  one = add_rule(st, "sb-1", true, "one.example", 0, true);
  two = add_rule(st, "sb-2", true, "two.example", 8443, true);

  assert_int_equal(wr_store_rule_list(st, NULL, &recs, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_int_equal(recs[0].id, g);
  assert_int_equal(recs[2].id, two);
  wr_rule_recs_free(recs, n);
  assert_int_equal(wr_store_rule_list(st, "sb-2", &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_int_equal(recs[0].id, g);
  assert_null(recs[0].sandbox_id);
  assert_int_equal(recs[1].id, two);
  assert_int_equal(recs[1].port, 8443);
  wr_rule_recs_free(recs, n);

  assert_int_equal(wr_store_rule_get(st, one, &rec, &err), 0);
  assert_string_equal(rec.pattern, "one.example");
  assert_string_equal(rec.sandbox_id, "sb-1");
  wr_rule_rec_free(&rec);
  assert_int_equal(wr_store_rule_delete(st, one, &err), 0);
  assert_int_equal(wr_store_rule_get(st, one, &rec, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_store_rule_delete(st, one, &err), -1);
  assert_int_equal(err.code, ENOENT);

  /* A rule for a sandbox that does not exist is refused. */
  assert_int_equal(wr_store_rule_add(st, &bad, &rec, NULL, &err), -1);
  assert_int_equal(err.code, EINVAL);
  bad.pattern = "";
  assert_int_equal(wr_store_rule_add(st, &bad, &rec, NULL, &err), -1);
  assert_int_equal(err.code, EINVAL);
  wr_store_close(st);
}

static size_t count_rows(const struct fixture *fx, const char *sql) {
  _cleanup_free_ char *count = raw_query(fx->db, sql);

  return (size_t)strtoull(count, NULL, 10);
}

/* Removing a sandbox takes its rules and ports along, whether the network
 * forgets it first or the row goes. */
static void test_forget_sandbox(void **state) {
  struct fixture *fx = *state;
  struct wr_port_rec p1 = {
      .sandbox_id = "sb-1", .addr = "127.0.0.1", .host_port = 8080, .port = 80};
  struct wr_port_rec p2 = {
      .sandbox_id = "sb-2", .addr = "127.0.0.1", .host_port = 8081, .port = 80};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  insert_ok(st, "sb-2", "api", NULL, 2);
  add_rule(st, NULL, true, "example.com", 0, true);
  add_rule(st, "sb-1", true, "one.example", 0, true);
  add_rule(st, "sb-2", true, "two.example", 0, true);
  assert_int_equal(wr_store_port_add(st, &p1, &err), 0);
  assert_int_equal(wr_store_port_add(st, &p2, &err), 0);

  assert_int_equal(wr_store_net_forget_sandbox(st, "sb-1", &err), 0);
  assert_int_equal(wr_store_sandbox_delete(st, "sb-2", &err), 0);
  wr_store_close(st);
  assert_int_equal(count_rows(fx, "SELECT COUNT(*) FROM policy_rules"), 1);
  assert_int_equal(count_rows(fx, "SELECT COUNT(*) FROM ports"), 0);
  assert_int_equal(count_rows(fx, "SELECT COUNT(*) FROM policy_rules "
                                  "WHERE sandbox_id IS NULL"),
                   1);
}

static void log_ok(wr_store_t *st, const char *sandbox, const char *host,
                   bool allow, int64_t *id) {
  struct wr_netlog_rec rec = {
      .time_ms = wr_now_ms(),
      .sandbox_id = (char *)sandbox,
      .kind = "connect",
      .host = (char *)host,
      .addr = "93.184.215.14",
      .port = 443,
      .allow = allow,
      .rule = allow ? "allow example.com" : NULL,
      .reason = "preset balanced",
      .intercepted = true,
      .bytes_up = 5ULL << 32,
      .bytes_down = 7,
  };
  wr_error_t err = {0};

  if (wr_store_netlog_add(st, &rec, id, &err) < 0)
    fail_msg("log: %s", err.msg);
}

static void test_netlog(void **state) {
  struct fixture *fx = *state;
  struct wr_netlog_rec *recs = NULL;
  struct wr_netlog_rec bare = {.sandbox_id = "sb-1", .kind = "dns"};
  wr_error_t err = {0};
  int64_t ids[6];
  size_t n = 0;
  wr_store_t *st = open_ok(fx);

  for (size_t i = 0; i < 5; i++)
    log_ok(st, i % 2 ? "sb-2" : "sb-1", "example.com", i != 3, &ids[i]);
  assert_int_equal(wr_store_netlog_add(st, &bare, &ids[5], &err), 0);
  assert_int_equal(ids[5], ids[0] + 5);

  /* The newest three, oldest first. */
  assert_int_equal(wr_store_netlog_list(st, NULL, 0, 3, &recs, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_int_equal(recs[0].id, ids[3]);
  assert_false(recs[0].allow);
  assert_null(recs[0].rule);
  assert_string_equal(recs[0].sandbox_id, "sb-2");
  assert_string_equal(recs[1].kind, "connect");
  assert_string_equal(recs[1].host, "example.com");
  assert_string_equal(recs[1].addr, "93.184.215.14");
  assert_string_equal(recs[1].rule, "allow example.com");
  assert_string_equal(recs[1].reason, "preset balanced");
  assert_int_equal(recs[1].port, 443);
  assert_true(recs[1].intercepted);
  assert_int_equal(recs[1].bytes_up, 5ULL << 32);
  assert_int_equal(recs[1].bytes_down, 7);
  assert_int_equal(recs[2].id, ids[5]);
  assert_null(recs[2].host);
  assert_null(recs[2].addr);
  assert_false(recs[2].intercepted);
  wr_netlog_recs_free(recs, n);

  /* One sandbox's, after an id: the first ones, for paging forward. */
  assert_int_equal(wr_store_netlog_list(st, "sb-1", ids[0], 1, &recs, &n, &err),
                   0);
  assert_int_equal(n, 1);
  assert_int_equal(recs[0].id, ids[2]);
  wr_netlog_recs_free(recs, n);
  assert_int_equal(
      wr_store_netlog_list(st, "sb-2", ids[4], 100, &recs, &n, &err), 0);
  assert_int_equal(n, 0);
  wr_netlog_recs_free(recs, n);
  assert_int_equal(wr_store_netlog_list(st, "sb-1", 0, 100, &recs, &n, &err),
                   0);
  assert_int_equal(n, 4);
  wr_netlog_recs_free(recs, n);
  wr_store_close(st);
}

/* Counted on the store's own connection, which sees its open
 * transaction. */
static size_t log_rows(wr_store_t *st) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  assert_int_equal(
      wr_store_prepare(st, "SELECT COUNT(*) FROM policy_log", &stmt, NULL), 0);
  assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
  return (size_t)sqlite3_column_int64(stmt, 0);
}

/* How many entries one sandbox holds now, on the store's connection. */
static int64_t held_by(wr_store_t *st, const char *sandbox) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  assert_int_equal(wr_store_prepare(st,
                                    "SELECT COUNT(*) FROM policy_log WHERE "
                                    "sandbox_id = ?1",
                                    &stmt, NULL),
                   0);
  assert_int_equal(wr_store_bind_str(stmt, 1, sandbox), SQLITE_OK);
  assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
  return sqlite3_column_int64(stmt, 0);
}

static uint64_t dropped_of(wr_store_t *st, const char *sandbox) {
  uint64_t n = UINT64_MAX;
  wr_error_t err = {0};

  if (wr_store_netlog_dropped(st, sandbox, &n, &err) < 0)
    fail_msg("dropped: %s", err.msg);
  return n;
}

static void log_many(wr_store_t *st, const char *sandbox, int count) {
  for (int i = 0; i < count; i++)
    log_ok(st, sandbox, "flood.example", false, NULL);
}

/* The counts in memory agree with the rows they count. */
static void assert_counts_match(wr_store_t *st) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int64_t total = 0;
  size_t holders = 0;

  assert_int_equal(wr_store_prepare(st,
                                    "SELECT IFNULL(sandbox_id, ''), COUNT(*) "
                                    "FROM policy_log GROUP BY 1",
                                    &stmt, NULL),
                   0);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    json_t *n = json_object_get(st->netlog_held,
                                (const char *)sqlite3_column_text(stmt, 0));
    assert_non_null(n);
    assert_int_equal(json_integer_value(n), sqlite3_column_int64(stmt, 1));
    total += sqlite3_column_int64(stmt, 1);
    holders++;
  }
  assert_int_equal(json_object_size(st->netlog_held), holders);
  assert_int_equal(st->netlog_total, total);
}

/* A sandbox that floods the log loses its own oldest entries, never a
 * neighbour's, and each one it loses is counted. */
static void test_netlog_sandbox_quota(void **state) {
  struct fixture *fx = *state;
  struct wr_netlog_limits limits = {.max = 1000, .sandbox_max = 100};
  struct wr_netlog_rec *recs = NULL;
  wr_error_t err = {0};
  int64_t neighbour = 0, last = 0;
  size_t n = 0;
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_netlog_set_limits(st, &limits, &err), 0);
  log_ok(st, "sb-b", "neighbour.example", true, &neighbour);
  log_many(st, "sb-a", 499);
  log_ok(st, "sb-a", "flood.example", false, &last);

  assert_true(held_by(st, "sb-a") >= 100);
  assert_true(held_by(st, "sb-a") <= 100 + WR_NETLOG_SLACK(100));
  assert_int_equal(dropped_of(st, "sb-a"), 500 - held_by(st, "sb-a"));
  assert_int_equal(dropped_of(st, "sb-b"), 0);
  assert_int_equal(dropped_of(st, "sb-never"), 0);
  assert_int_equal(dropped_of(st, NULL), dropped_of(st, "sb-a"));
  assert_int_equal(wr_store_netlog_list(st, "sb-b", 0, 10, &recs, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(recs[0].id, neighbour);
  assert_string_equal(recs[0].host, "neighbour.example");
  wr_netlog_recs_free(recs, n);
  /* What is kept is the flood's newest part. */
  assert_int_equal(wr_store_netlog_list(st, "sb-a", 0, 1, &recs, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(recs[0].id, last);
  wr_netlog_recs_free(recs, n);
  assert_counts_match(st);
  wr_store_close(st);
}

/*
 * Past the cap on all entries by its slack, the largest holder gives
 * first, down to the next largest; the small holders keep everything.
 * With a cap of 300 (slack 30), B logs 100, C 20, A 190 and D 21: the
 * 331st entry is one too many, and the 31 entries that bring the log back
 * to 300 are all A's.
 */
static void test_netlog_cap_takes_from_the_largest_first(void **state) {
  struct fixture *fx = *state;
  struct wr_netlog_limits limits = {.max = 300, .sandbox_max = 200};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  assert_int_equal(WR_NETLOG_SLACK(300), 30);
  assert_int_equal(wr_store_netlog_set_limits(st, &limits, &err), 0);
  log_many(st, "sb-b", 100);
  log_many(st, "sb-c", 20);
  log_many(st, "sb-a", 190);
  log_many(st, "sb-d", 20);
  assert_int_equal(log_rows(st), 330);
  log_many(st, "sb-d", 1);

  assert_int_equal(log_rows(st), 300);
  assert_int_equal(held_by(st, "sb-a"), 159);
  assert_int_equal(dropped_of(st, "sb-a"), 31);
  assert_int_equal(held_by(st, "sb-b"), 100);
  assert_int_equal(held_by(st, "sb-c"), 20);
  assert_int_equal(held_by(st, "sb-d"), 21);
  assert_int_equal(dropped_of(st, NULL), 31);

  /* Equal holders take turns, and the total stays bounded. */
  log_many(st, "sb-b", 60);
  log_many(st, "sb-c", 140);
  log_many(st, "sb-d", 140);
  assert_true(log_rows(st) <= 300 + WR_NETLOG_SLACK(300));
  assert_true(held_by(st, "sb-a") <= 159);
  assert_int_equal(dropped_of(st, NULL), 331 + 340 - log_rows(st));
  assert_counts_match(st);
  wr_store_close(st);
}

static void test_netlog_limits_are_checked(void **state) {
  struct fixture *fx = *state;
  struct wr_netlog_limits none = {.max = 0, .sandbox_max = 0};
  struct wr_netlog_limits upside = {.max = 10, .sandbox_max = 11};
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_netlog_set_limits(st, &none, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_int_equal(wr_store_netlog_set_limits(st, &upside, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_int_equal(st->netlog.max, WR_NETLOG_MAX);
  assert_int_equal(st->netlog.sandbox_max, WR_NETLOG_SANDBOX_MAX);
  wr_store_close(st);
}

/* A log from before retention was per sandbox is counted when the store
 * opens, and over-full holders are trimmed at their next entry. The table
 * is filled by one statement: 1000 entries of sb-a, 10 of sb-b, 5 of
 * none. */
static void test_existing_log_is_counted_at_open(void **state) {
  struct fixture *fx = *state;
  struct wr_netlog_limits limits = {.max = 10000, .sandbox_max = 500};
  wr_store_t *st = open_ok(fx);

  wr_store_close(st);
  raw_exec(fx->db, "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                   "FROM n WHERE i < 1015) INSERT INTO policy_log (time_ms, "
                   "sandbox_id, kind, allow) SELECT i, CASE WHEN i <= 1000 "
                   "THEN 'sb-a' WHEN i <= 1010 THEN 'sb-b' END, 'dns', 0 "
                   "FROM n");
  st = open_ok(fx);
  assert_counts_match(st);
  assert_int_equal(st->netlog_total, 1015);
  assert_int_equal(wr_store_netlog_set_limits(st, &limits, NULL), 0);
  log_ok(st, "sb-a", "flood.example", false, NULL);
  assert_int_equal(held_by(st, "sb-a"), 500);
  assert_int_equal(dropped_of(st, "sb-a"), 501);
  assert_int_equal(held_by(st, "sb-b"), 10);
  assert_counts_match(st);
  wr_store_close(st);
}

static int count_statements(unsigned type, void *arg, void *p, void *x) {
  (void)type;
  (void)p;
  (void)x;
  ++*(int *)arg;
  return 0;
}

/* The insert path runs for every connection on the daemon's loop: one
 * statement per entry, and the trimming a batch at a time (a few
 * statements per slack's worth of entries). Statements are counted, not
 * timed, so a loaded machine cannot make this flaky. */
static void test_netlog_insert_is_one_statement(void **state) {
  struct fixture *fx = *state;
  struct wr_netlog_limits limits = {.max = 100000, .sandbox_max = 100};
  int statements = 0;
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_netlog_set_limits(st, &limits, NULL), 0);
  log_many(st, "sb-a", 100);
  sqlite3_trace_v2(st->db, SQLITE_TRACE_STMT, count_statements, &statements);
  log_many(st, "sb-a", 1);
  assert_int_equal(statements, 1);
  statements = 0;
  log_many(st, "sb-a", 10 * WR_NETLOG_SLACK(100));
  assert_true(statements <= 10 * WR_NETLOG_SLACK(100) + 10 * 6);
  assert_true(dropped_of(st, "sb-a") >= 9 * WR_NETLOG_SLACK(100));
  sqlite3_trace_v2(st->db, 0, NULL, NULL);
  wr_store_close(st);
}

/* ---- the host's registry of state roots -----------------------------------
 */

static wr_store_t *roots_ok(const struct fixture *fx) {
  _cleanup_free_ char *path = xasprintf("%s/roots.db", fx->dir);
  wr_store_t *st = NULL;
  wr_error_t err = {0};

  if (wr_roots_open(path, &st, &err) < 0)
    fail_msg("open roots: %s", err.msg);
  return st;
}

static int register_root(wr_store_t *st, const char *id, const char *path,
                         const char *parent, wr_error_t *err) {
  struct wr_root_rec rec = {
      .id = (char *)id, .path = (char *)path, .cgroup_parent = (char *)parent};

  return wr_roots_register(st, &rec, err);
}

static uint32_t claim_free_ok(wr_store_t *st, const char *root,
                              const char *sandbox) {
  wr_error_t err = {0};
  uint32_t slot = 0;

  if (wr_roots_claim_free(st, root, sandbox, 1000, &slot, &err) < 0)
    fail_msg("claim: %s", err.msg);
  return slot;
}

static void test_roots_parents_overlap(void **state) {
  (void)state;
  assert_true(wr_roots_parents_overlap("warren", "warren"));
  assert_true(wr_roots_parents_overlap("warren", "warren/test"));
  assert_true(wr_roots_parents_overlap("warren/test", "warren"));
  assert_false(wr_roots_parents_overlap("warren", "warren-test"));
  assert_false(wr_roots_parents_overlap("warren-test", "warren"));
  assert_false(wr_roots_parents_overlap("a/b", "a/c"));
}

/* Two daemons may not put their cgroups below one parent (nor one below
 * the other's), nor take one root's path; a root that moved keeps its
 * record under its id. */
static void test_roots_register_refuses_clashes(void **state) {
  struct fixture *fx = *state;
  struct wr_root_rec *recs = NULL;
  wr_error_t err = {0};
  size_t n = 0;
  wr_store_t *st = roots_ok(fx);

  assert_int_equal(register_root(st, "aaaa", "/r/a", "warren", &err), 0);
  assert_int_equal(register_root(st, "bbbb", "/r/b", "warren-b", &err), 0);
  assert_int_equal(register_root(st, "cccc", "/r/c", "warren", &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_non_null(strstr(err.msg, "state root `/r/a`"));
  assert_int_equal(register_root(st, "cccc", "/r/c", "warren/c", &err), -1);
  assert_int_equal(register_root(st, "cccc", "/r/c", "warren-b/c", &err), -1);
  assert_non_null(strstr(err.msg, "/r/b"));
  assert_int_equal(register_root(st, "cccc", "/r/a", "warren-c", &err), -1);
  assert_non_null(strstr(err.msg, "another id"));
  assert_int_equal(register_root(st, "cccc", "/r/c", "warrenc", &err), 0);
  /* A's daemon starts again from where A moved to. */
  assert_int_equal(register_root(st, "aaaa", "/r/moved", "warren", &err), 0);
  assert_int_equal(wr_roots_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_string_equal(recs[0].path, "/r/b");
  assert_string_equal(recs[2].path, "/r/moved");
  assert_string_equal(recs[2].id, "aaaa");
  wr_root_recs_free(recs, n);
  wr_store_close(st);
}

/* New sandboxes of any root get slots no root claims: one host, one
 * allocation, whichever daemon (and database handle) asks. */
static void test_roots_slots_are_unique_across_roots(void **state) {
  struct fixture *fx = *state;
  wr_store_t *a = roots_ok(fx), *b = roots_ok(fx);
  _cleanup_strv_ char **ids = NULL;
  wr_error_t err = {0};
  uint32_t slot = 0;

  assert_int_equal(register_root(a, "aaaa", "/r/a", "warren", &err), 0);
  assert_int_equal(register_root(b, "bbbb", "/r/b", "warren-b", &err), 0);
  assert_int_equal(claim_free_ok(a, "aaaa", "sb-a1"), 1);
  assert_int_equal(claim_free_ok(b, "bbbb", "sb-b1"), 2);
  assert_int_equal(claim_free_ok(a, "aaaa", "sb-a2"), 3);
  assert_int_equal(wr_roots_release(a, "aaaa", "sb-a1", &err), 0);
  assert_int_equal(claim_free_ok(b, "bbbb", "sb-b2"), 1);
  assert_int_equal(claim_free_ok(a, "aaaa", "sb-a3"), 4);
  assert_int_equal(wr_roots_claimed(a, "aaaa", &ids, &err), 0);
  assert_int_equal(wr_strv_len(ids), 2);
  assert_string_equal(ids[0], "sb-a2");
  assert_string_equal(ids[1], "sb-a3");
  /* A full range is a clear error. */
  assert_int_equal(wr_roots_claim_free(a, "aaaa", "sb-x", 4, &slot, &err), -1);
  assert_int_equal(err.code, ENOSPC);
  assert_non_null(strstr(err.msg, "no free uid range"));
  wr_store_close(a);
  wr_store_close(b);
}

/* The smallest slot nobody claims, gaps first. */
static void test_roots_claim_free_fills_gaps(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *other = NULL;
  wr_error_t err = {0};
  wr_store_t *st = roots_ok(fx);

  assert_int_equal(register_root(st, "aaaa", "/r/a", "warren", &err), 0);
  assert_int_equal(wr_roots_claim(st, "aaaa", "sb-2", 2, &other, &err), 0);
  assert_int_equal(wr_roots_claim(st, "aaaa", "sb-3", 3, &other, &err), 0);
  assert_int_equal(claim_free_ok(st, "aaaa", "sb-1"), 1);
  assert_int_equal(claim_free_ok(st, "aaaa", "sb-4"), 4);
  assert_int_equal(wr_roots_release(st, "aaaa", "sb-3", &err), 0);
  assert_int_equal(claim_free_ok(st, "aaaa", "sb-5"), 3); /* 1, 2, 4 used */
  wr_store_close(st);
}

/* Two roots that both had slot 1 before the registry keep it (their
 * sandboxes' files are owned by it) and are told; slot 1 stays claimed
 * until both let go, so no third sandbox gets it. A forgotten root's
 * slots are free again. */
static void test_roots_old_slots_are_kept_and_shared(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *first = NULL;
  _cleanup_free_ char *second = NULL;
  wr_error_t err = {0};
  wr_store_t *st = roots_ok(fx);

  assert_int_equal(register_root(st, "aaaa", "/r/a", "warren", &err), 0);
  assert_int_equal(register_root(st, "bbbb", "/r/b", "warren-b", &err), 0);
  assert_int_equal(register_root(st, "cccc", "/r/c", "warren-c", &err), 0);
  assert_int_equal(wr_roots_claim(st, "aaaa", "sb-a1", 1, &first, &err), 0);
  assert_null(first);
  assert_int_equal(wr_roots_claim(st, "bbbb", "sb-b1", 1, &second, &err), 0);
  assert_non_null(second);
  assert_string_equal(second, "/r/a");
  assert_int_equal(wr_roots_release(st, "aaaa", "sb-a1", &err), 0);
  assert_int_equal(claim_free_ok(st, "cccc", "sb-c1"), 2);
  assert_int_equal(wr_roots_forget(st, "bbbb", &err), 0);
  assert_int_equal(claim_free_ok(st, "aaaa", "sb-a2"), 1);
  wr_store_close(st);
}

static struct wr_secret_rec secret_rec(const char *service) {
  return (struct wr_secret_rec){
      .service = (char *)service,
      .hosts_json = "[\"api.example.com\"]",
      .header = "x-api-key",
      .prefix = "",
      .env_json = "[\"EXAMPLE_API_KEY\"]",
  };
}

static void assert_mode(const char *path, mode_t mode) {
  struct stat sb;

  assert_int_equal(lstat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, mode);
}

/* The value is a file of its own, private from its first byte whatever
 * the umask, replaced atomically, never in the database. */
static void test_secret_value_file(void **state) {
  struct fixture *fx = *state;
  struct wr_secret_rec rec = secret_rec("example");
  _cleanup_free_ char *dir = xasprintf("%s/secrets", fx->dir);
  _cleanup_free_ char *file = xasprintf("%s/example", dir);
  _cleanup_free_ char *v1 = NULL;
  _cleanup_free_ char *v2 = NULL;
  _cleanup_free_ char *in_db = NULL;
  wr_error_t err = {0};
  size_t len = 0;
  mode_t old = umask(0);
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_secret_put(st, &rec, "sk-one", 6, &err), 0);
  umask(old);
  assert_mode(dir, 0700);
  assert_mode(file, 0600);
  assert_int_equal(wr_store_secret_value(st, "example", &v1, &len, &err), 0);
  assert_int_equal(len, 6);
  assert_string_equal(v1, "sk-one");

  assert_int_equal(chmod(dir, 0755), 0);
  assert_int_equal(wr_store_secret_put(st, &rec, "sk-two\nx", 8, &err), 0);
  assert_mode(dir, 0700);
  assert_mode(file, 0600);
  assert_int_equal(wr_store_secret_value(st, "example", &v2, &len, &err), 0);
  assert_int_equal(len, 8);
  assert_memory_equal(v2, "sk-two\nx", 8);
  wr_store_close(st);
  /* Nothing but the value is left in the directory. */
  assert_int_equal(count_rows(fx, "SELECT COUNT(*) FROM secrets"), 1);
  in_db = raw_query(fx->db, "SELECT COUNT(*) FROM secrets WHERE "
                            "hosts_json LIKE '%sk-%' OR header LIKE '%sk-%' "
                            "OR prefix LIKE '%sk-%' OR env_json LIKE '%sk-%'");
  assert_string_equal(in_db, "0");
  {
    _cleanup_free_ char *tmp = xasprintf("%s/.example.tmp", dir);
    assert_int_equal(access(tmp, F_OK), -1);
  }
}

static void test_secret_records(void **state) {
  struct fixture *fx = *state;
  struct wr_secret_rec a = secret_rec("zeta"), b = secret_rec("alpha");
  struct wr_secret_rec got = {0}, *recs = NULL;
  _cleanup_free_ char *file = xasprintf("%s/secrets/zeta", fx->dir);
  char *value = NULL;
  wr_error_t err = {0};
  size_t n = 0, len = 0;
  int64_t created;
  wr_store_t *st = open_ok(fx);

  assert_int_equal(wr_store_secret_put(st, &a, "v", 1, &err), 0);
  assert_int_equal(wr_store_secret_put(st, &b, "v", 1, &err), 0);
  assert_int_equal(wr_store_secret_get(st, "zeta", &got, &err), 0);
  assert_string_equal(got.hosts_json, "[\"api.example.com\"]");
  assert_string_equal(got.header, "x-api-key");
  assert_string_equal(got.prefix, "");
  assert_string_equal(got.env_json, "[\"EXAMPLE_API_KEY\"]");
  created = got.created_ms;
  wr_secret_rec_free(&got);

  sleep_ms(2);
  a.header = "Authorization";
  a.prefix = "Bearer ";
  assert_int_equal(wr_store_secret_put(st, &a, "w", 1, &err), 0);
  assert_int_equal(wr_store_secret_list(st, &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(recs[0].service, "alpha");
  assert_string_equal(recs[1].service, "zeta");
  assert_string_equal(recs[1].header, "Authorization");
  assert_string_equal(recs[1].prefix, "Bearer ");
  assert_int_equal(recs[1].created_ms, created);
  wr_secret_recs_free(recs, n);

  assert_int_equal(wr_store_secret_delete(st, "zeta", &err), 0);
  assert_int_equal(access(file, F_OK), -1);
  assert_int_equal(wr_store_secret_get(st, "zeta", &got, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_store_secret_value(st, "zeta", &value, &len, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_null(value);
  assert_int_equal(wr_store_secret_delete(st, "zeta", &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_store_close(st);
}

/* Service names become file names: nothing that could leave the
 * directory or hide in it is accepted. */
static void test_secret_names(void **state) {
  static const char *const bad[] = {
      "",
      "../x",
      "a/b",
      ".hidden",
      "A",
      "x y",
      "too-long-0123456789-0123456789-0123456789-0123456789-0123456789-x"};
  struct fixture *fx = *state;
  wr_error_t err = {0};
  wr_store_t *st = open_ok(fx);

  assert_true(wr_store_secret_name_valid("openai"));
  assert_true(wr_store_secret_name_valid("my_service-2"));
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    struct wr_secret_rec rec = secret_rec(bad[i]);
    assert_false(wr_store_secret_name_valid(bad[i]));
    assert_int_equal(wr_store_secret_put(st, &rec, "v", 1, &err), -1);
    assert_int_equal(err.code, EINVAL);
  }
  wr_store_close(st);
}

static void test_ports(void **state) {
  struct fixture *fx = *state;
  struct wr_port_rec p = {.sandbox_id = "sb-1",
                          .addr = "127.0.0.1",
                          .host_port = 8080,
                          .port = 8000};
  struct wr_port_rec *recs = NULL;
  wr_error_t err = {0};
  size_t n = 0;
  wr_store_t *st = open_ok(fx);

  insert_ok(st, "sb-1", "web", NULL, 1);
  insert_ok(st, "sb-2", "api", NULL, 2);
  assert_int_equal(wr_store_port_add(st, &p, &err), 0);
  /* The same address and host port, from another sandbox. */
  p.sandbox_id = "sb-2";
  assert_int_equal(wr_store_port_add(st, &p, &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_string_equal(err.msg,
                      "host port 8080 is already published by sandbox `sb-1`");
  /* The same host port of one sandbox on another address. */
  p.sandbox_id = "sb-1";
  p.addr = "0.0.0.0";
  assert_int_equal(wr_store_port_add(st, &p, &err), -1);
  assert_int_equal(err.code, EEXIST);
  /* Another address is another socket. */
  p.sandbox_id = "sb-2";
  assert_int_equal(wr_store_port_add(st, &p, &err), 0);
  p.host_port = 3000;
  assert_int_equal(wr_store_port_add(st, &p, &err), 0);
  p.port = 0;
  assert_int_equal(wr_store_port_add(st, &p, &err), -1);
  assert_int_equal(err.code, EINVAL);

  assert_int_equal(wr_store_port_list(st, NULL, &recs, &n, &err), 0);
  assert_int_equal(n, 3);
  assert_int_equal(recs[0].host_port, 3000);
  assert_string_equal(recs[1].addr, "0.0.0.0");
  assert_string_equal(recs[2].sandbox_id, "sb-1");
  assert_int_equal(recs[2].port, 8000);
  assert_true(recs[2].created_ms > 0);
  wr_port_recs_free(recs, n);
  assert_int_equal(wr_store_port_list(st, "sb-2", &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  wr_port_recs_free(recs, n);

  assert_int_equal(wr_store_port_delete(st, "sb-2", 8080, &err), 0);
  assert_int_equal(wr_store_port_delete(st, "sb-2", 8080, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_store_port_delete(st, "sb-2", 8081, &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_store_close(st);
}

/* Events keep their own ids; the journal is trimmed to the newest, which
 * come back oldest first, and survive a reopen. */
static void test_events_journal(void **state) {
  struct fixture *fx = *state;
  wr_store_t *st = open_ok(fx);
  struct wr_event_rec *recs = NULL;
  size_t n = 0;
  int64_t max = -1;
  wr_error_t err;

  assert_int_equal(wr_store_event_max_id(st, &max, &err), 0);
  assert_int_equal(max, 0);
  for (int64_t id = 1; id <= 10; id++) {
    _cleanup_free_ char *json = xasprintf("{\"id\":%lld}", (long long)id);
    struct wr_event_rec rec = {.id = id * 3,
                               .time_ms = id,
                               .type = "paused",
                               .sandbox_id = id % 2 ? "sb-1" : NULL,
                               .json = json};
    assert_int_equal(wr_store_event_add(st, &rec, &err), 0);
  }
  assert_int_equal(
      wr_store_event_add(
          st, &(struct wr_event_rec){.id = 3, .type = "x", .json = "{}"}, &err),
      -1); /* an id is given once */
  assert_int_equal(wr_store_event_trim(st, 4, &err), 0);
  wr_store_close(st);
  st = open_ok(fx);
  assert_int_equal(wr_store_event_list_last(st, 100, &recs, &n, &err), 0);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(recs[i].id, (int64_t)(7 + i) * 3);
  assert_string_equal(recs[3].json, "{\"id\":10}");
  assert_null(recs[3].sandbox_id);
  assert_string_equal(recs[2].sandbox_id, "sb-1");
  wr_event_recs_free(recs, n);
  assert_int_equal(wr_store_event_list_last(st, 2, &recs, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_int_equal(recs[0].id, 27);
  wr_event_recs_free(recs, n);
  assert_int_equal(wr_store_event_max_id(st, &max, &err), 0);
  assert_int_equal(max, 30);
  wr_store_close(st);
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
      T(test_images),
      T(test_migration_upgrades_database),
      T(test_failed_migration_rolls_back),
      T(test_newer_database_is_refused),
      T(test_corrupt_file_is_an_error),
      T(test_directory_is_an_error),
      T(test_migration_2_adds_network_tables),
      T(test_snapshots),
      T(test_pools),
      T(test_templates),
      T(test_projects),
      T(test_settings),
      T(test_rules_are_unique),
      T(test_rules_list_get_delete),
      T(test_forget_sandbox),
      T(test_netlog),
      T(test_netlog_sandbox_quota),
      T(test_netlog_cap_takes_from_the_largest_first),
      T(test_netlog_limits_are_checked),
      T(test_existing_log_is_counted_at_open),
      T(test_netlog_insert_is_one_statement),
      T(test_roots_parents_overlap),
      T(test_roots_register_refuses_clashes),
      T(test_roots_slots_are_unique_across_roots),
      T(test_roots_claim_free_fills_gaps),
      T(test_roots_old_slots_are_kept_and_shared),
      T(test_secret_value_file),
      T(test_secret_records),
      T(test_secret_names),
      T(test_ports),
      T(test_events_journal),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
