/*
 * store: opening the database, its settings, and the schema migrations.
 */
#include "store/store_internal.h"

#include <fcntl.h>
#include <sys/stat.h>

/*
 * The schema, one script per version: version N is migrations[N - 1].
 * A script that has shipped never changes. A schema change is a new script
 * appended here (CREATE TABLE, ALTER TABLE ... ADD COLUMN, or the
 * create-copy-drop-rename dance for anything SQLite cannot alter), so
 * every database walks the same steps to the same schema. Scripts run
 * with foreign keys off and are checked with foreign_key_check before
 * they commit, which is what SQLite asks for table rebuilds.
 *
 * sandboxes.image is deliberately not a foreign key: a sandbox may name
 * an image that is still building or was removed by hand, and the daemon
 * asks wr_store_image_users before deleting an image.
 */
static const char *const migrations[] = {
    /* 1: sandboxes and base images. */
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT UNIQUE NOT NULL,"
    "  image TEXT,"
    "  state TEXT NOT NULL,"
    "  spec_json TEXT,"
    "  error TEXT,"
    "  slot INTEGER UNIQUE NOT NULL CHECK (slot >= 1),"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  init_pid INTEGER NOT NULL DEFAULT 0,"
    "  init_start INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE INDEX sandboxes_image ON sandboxes (image);"
    "CREATE INDEX sandboxes_created ON sandboxes (created_ms);"
    "CREATE TABLE images ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  state TEXT NOT NULL,"
    "  packages_json TEXT,"
    "  suite TEXT,"
    "  size_bytes INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL"
    ");",
    /* 2: the network: settings, policy rules and log, secrets, ports. A
     * global rule has a NULL sandbox, and NULLs are distinct in a UNIQUE
     * constraint, hence the index on IFNULL. The log names sandboxes
     * without a reference, so that it outlives them. */
    "CREATE TABLE settings ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT NOT NULL"
    ");"
    "CREATE TABLE policy_rules ("
    "  id INTEGER PRIMARY KEY,"
    "  sandbox_id TEXT REFERENCES sandboxes (id) ON DELETE CASCADE,"
    "  allow INTEGER NOT NULL CHECK (allow IN (0, 1)),"
    "  pattern TEXT NOT NULL,"
    "  port INTEGER NOT NULL DEFAULT 0 CHECK (port BETWEEN 0 AND 65535),"
    "  created_ms INTEGER NOT NULL"
    ");"
    "CREATE UNIQUE INDEX policy_rules_unique ON policy_rules "
    "  (IFNULL(sandbox_id, ''), allow, pattern, port);"
    "CREATE INDEX policy_rules_sandbox ON policy_rules (sandbox_id);"
    "CREATE TABLE policy_log ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  sandbox_id TEXT,"
    "  kind TEXT NOT NULL,"
    "  host TEXT,"
    "  addr TEXT,"
    "  port INTEGER NOT NULL DEFAULT 0,"
    "  allow INTEGER NOT NULL,"
    "  rule TEXT,"
    "  reason TEXT,"
    "  intercepted INTEGER NOT NULL DEFAULT 0,"
    "  bytes_up INTEGER NOT NULL DEFAULT 0,"
    "  bytes_down INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE INDEX policy_log_sandbox ON policy_log (sandbox_id, id);"
    "CREATE TABLE secrets ("
    "  service TEXT PRIMARY KEY NOT NULL,"
    "  hosts_json TEXT NOT NULL,"
    "  header TEXT NOT NULL,"
    "  prefix TEXT NOT NULL DEFAULT '',"
    "  env_json TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL"
    ");"
    "CREATE TABLE ports ("
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,"
    "  addr TEXT NOT NULL,"
    "  host_port INTEGER NOT NULL CHECK (host_port BETWEEN 1 AND 65535),"
    "  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
    "  created_ms INTEGER NOT NULL,"
    "  UNIQUE (addr, host_port),"
    "  UNIQUE (sandbox_id, host_port)"
    ");",
    /* 3: the policy log's retention (store.h): how many older entries
     * of each sandbox were dropped. '' stands for entries that name no
     * sandbox. */
    "CREATE TABLE policy_log_dropped ("
    "  sandbox_id TEXT PRIMARY KEY NOT NULL,"
    "  dropped INTEGER NOT NULL CHECK (dropped >= 0)"
    ") WITHOUT ROWID;",
    /* 4: which Node.js an image carries (JSON: version, source, npm) and
     * whether it was built --minimal. */
    ("ALTER TABLE images ADD COLUMN node_json TEXT;"
     "ALTER TABLE images ADD COLUMN minimal INTEGER NOT NULL DEFAULT 0;"),
    /* 5: the lifecycle events' journal (events.c). The id is the event's
     * own, handed out by the daemon; sandbox_id has no reference, so that
     * a sandbox's last events outlive it. */
    ("CREATE TABLE events ("
     "  id INTEGER PRIMARY KEY,"
     "  time_ms INTEGER NOT NULL,"
     "  type TEXT NOT NULL,"
     "  sandbox_id TEXT,"
     "  json TEXT NOT NULL"
     ");"),
    /* 6: disk snapshots (snapshot.c). layers_json lists the snapshots
     * whose layer directories a sandbox made from this one stacks, newest
     * first, this one first; the sandboxes that use one say so in their
     * spec_json ("snapshot"), so a sandbox's row and its use of a snapshot
     * are one write. */
    "CREATE TABLE snapshots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT UNIQUE NOT NULL,"
    "  state TEXT NOT NULL,"
    "  image TEXT NOT NULL,"
    "  source_id TEXT,"
    "  source_name TEXT,"
    "  parent_id TEXT,"
    "  layers_json TEXT NOT NULL,"
    "  info_json TEXT,"
    "  size_bytes INTEGER NOT NULL DEFAULT 0,"
    "  expires_ms INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL"
    ");",
    /* 7: templates (template.c), built from a Dockerfile in cached
     * layers. manifest_json holds the steps, the layer keys (oldest
     * first), CMD, EXPOSE, ENV, WORKDIR and USER; the sandboxes made from
     * one name it in sandboxes.image, as an image's do. */
    "CREATE TABLE templates ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  base TEXT NOT NULL,"
    "  parent TEXT NOT NULL,"
    "  manifest_json TEXT NOT NULL,"
    "  size_bytes INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL"
    ");",
    /* 8: warm pools (pool.c). A pool keeps `size` sandboxes of its image
     * started and paused; sandboxes.pool says what a sandbox is to its
     * pool: NULL for one that belongs to none, else 'filling' (being
     * created, started and paused), 'ready' (paused, waiting for a
     * create), or 'claiming' (a create is taking it). A claim ends in one
     * UPDATE that names the sandbox and clears the column, so a claim is
     * either done or, to a restarted daemon, a pooled sandbox that is not
     * ready, which it removes. */
    ("CREATE TABLE pools ("
     "  image TEXT PRIMARY KEY NOT NULL,"
     "  size INTEGER NOT NULL CHECK (size >= 1),"
     "  claimed INTEGER NOT NULL DEFAULT 0,"
     "  created_ms INTEGER NOT NULL,"
     "  updated_ms INTEGER NOT NULL"
     ");"
     "ALTER TABLE sandboxes ADD COLUMN pool TEXT"
     "  CHECK (pool IN ('filling', 'ready', 'claiming'));"),
    /* 9: projects (project.c). tier is where the project was last put:
     * 'hot' or 'warm' with a sandbox named sandbox, 'cool' with its
     * snapshot, 'cold' with only its git mirror (ROOT/projects/NAME.git);
     * the daemon reads hot and warm off the sandbox itself. generation
     * counts the demotions to cool, so that each names a snapshot of its
     * own (a rerun of a killed demote finds the one it was making). */
    "CREATE TABLE projects ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  template TEXT NOT NULL,"
    "  tier TEXT NOT NULL CHECK (tier IN ('hot', 'warm', 'cool', 'cold')),"
    "  sandbox TEXT,"
    "  snapshot TEXT,"
    "  generation INTEGER NOT NULL DEFAULT 0,"
    "  remote TEXT,"
    "  remote_secret TEXT,"
    "  labels_json TEXT NOT NULL DEFAULT '{}',"
    "  settings_json TEXT NOT NULL DEFAULT '{}',"
    "  revision TEXT,"
    "  last_edit_ms INTEGER NOT NULL,"
    "  created_ms INTEGER NOT NULL"
    ");",
};

/* A database's built-in scripts followed by a test's extra ones. */
struct migration_list {
  const char *const *base;
  size_t n_base;
  const char *const *extra;
  size_t n_extra;
};

static size_t known_version(const struct migration_list *ml) {
  return ml->n_base + ml->n_extra;
}

static const char *script_for(const struct migration_list *ml, int version) {
  size_t i = (size_t)version - 1;

  if (i < ml->n_base)
    return ml->base[i];
  return ml->extra[i - ml->n_base];
}

/*
 * Create the file ourselves so that it is private from its first byte:
 * SQLite gives the -wal and -shm files the mode of the database, and the
 * database holds every sandbox's spec. An existing file is tightened too.
 */
static int create_private(const char *path, wr_error_t *err) {
  _cleanup_close_ int fd = -1;
  struct stat sb;

  fd = open(path, O_RDWR | O_CREAT | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0)
    return wr_error_set(err, errno, "create");
  if (fstat(fd, &sb) < 0)
    return wr_error_set(err, errno, "stat");
  if (!S_ISREG(sb.st_mode))
    return wr_error_set(err, 0, "not a regular file");
  if ((sb.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
    return wr_error_set(err, errno, "chmod 0600");
  return 0;
}

/* One thread uses a handle (the loop's), so SQLite's mutexes are off. */
static int open_db(wr_store_t *st, const char *path, wr_error_t *err) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
              SQLITE_OPEN_EXRESCODE;

  if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK)
    return wr_store_fail(st, err);
  return 0;
}

/* Read the single text value a statement such as a PRAGMA returns. */
static int query_text(wr_store_t *st, const char *sql, char **out,
                      wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, sql, &stmt, err) < 0)
    return -1;
  if (sqlite3_step(stmt) != SQLITE_ROW)
    return wr_store_fail(st, err);
  *out = wr_store_column_str(stmt, 0);
  return 0;
}

/*
 * WAL lets readers (a CLI inspecting state) run beside the daemon's
 * writes; synchronous=NORMAL is durable across process crashes in WAL
 * mode and only risks the last commits on power loss. The busy timeout
 * comes first because switching to WAL needs the write lock. This is also
 * where a file that is not SQLite is first noticed.
 */
static int configure(wr_store_t *st, wr_error_t *err) {
  _cleanup_free_ char *mode = NULL;

  if (wr_store_exec(st, "PRAGMA busy_timeout = 5000", err) < 0)
    return -1;
  if (query_text(st, "PRAGMA journal_mode = WAL", &mode, err) < 0)
    return -1;
  if (mode == NULL || strcmp(mode, "wal") != 0)
    return wr_error_set(err, 0, "cannot use WAL mode (journal mode is `%s`)",
                        mode != NULL ? mode : "unknown");
  return wr_store_exec(st,
                       "PRAGMA synchronous = NORMAL;"
                       "PRAGMA foreign_keys = OFF;",
                       err);
}

static int read_version(wr_store_t *st, int *version, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "SELECT COALESCE(MAX(version), 0) "
                       "FROM schema_migrations",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_step(stmt) != SQLITE_ROW)
    return wr_store_fail(st, err);
  *version = sqlite3_column_int(stmt, 0);
  return 0;
}

static int record_version(wr_store_t *st, int version, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "INSERT INTO schema_migrations (version, applied_ms) "
                       "VALUES (?1, ?2)",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int(stmt, 1, version) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 2, wr_now_ms()) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

/* A migration must not leave a row pointing at nothing. */
static int check_references(wr_store_t *st, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st, "PRAGMA foreign_key_check", &stmt, err) < 0)
    return -1;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW)
    return wr_error_set(err, 0, "a row of table `%s` references nothing",
                        (const char *)sqlite3_column_text(stmt, 0));
  if (rc != SQLITE_DONE)
    return wr_store_fail(st, err);
  return 0;
}

/*
 * Inside an open transaction: read the version and apply the next
 * migration. Returns 1 when the schema is already current, 0 when one
 * migration was applied, -1 on failure (including a newer database).
 */
static int migrate_once(wr_store_t *st, const struct migration_list *ml,
                        int *version, wr_error_t *err) {
  size_t known = known_version(ml);

  if (wr_store_exec(st,
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    "  version INTEGER PRIMARY KEY,"
                    "  applied_ms INTEGER NOT NULL)",
                    err) < 0 ||
      read_version(st, version, err) < 0)
    return -1;
  if (*version < 0 || (size_t)*version > known)
    return wr_error_set(err, 0,
                        "schema version %d is newer than this warren "
                        "knows (%zu); upgrade warren to use this database",
                        *version, known);
  if ((size_t)*version == known)
    return 1;
  if (wr_store_exec(st, script_for(ml, *version + 1), err) < 0 ||
      check_references(st, err) < 0 ||
      record_version(st, *version + 1, err) < 0)
    return wr_error_wrap(err, "migration %d", *version + 1);
  return 0;
}

static void rollback(wr_store_t *st) {
  if (!sqlite3_get_autocommit(st->db))
    wr_store_exec(st, "ROLLBACK", NULL);
}

/*
 * Bring the schema up to the newest version this binary knows, one
 * migration per transaction. Each round takes the write lock first
 * (BEGIN IMMEDIATE) and reads the version under it, so two processes that
 * open the same database at once never apply a migration twice.
 */
static int migrate(wr_store_t *st, const struct migration_list *ml,
                   wr_error_t *err) {
  for (;;) {
    int version = 0, current;

    if (wr_store_exec(st, "BEGIN IMMEDIATE", err) < 0)
      return -1;
    current = migrate_once(st, ml, &version, err);
    if (current < 0 || wr_store_exec(st, "COMMIT", err) < 0) {
      rollback(st);
      return -1;
    }
    if (current == 1) {
      st->version = version;
      return wr_store_exec(st, "PRAGMA foreign_keys = ON", err);
    }
  }
}

static int open_migrated(const char *path, const struct migration_list *ml,
                         wr_store_t **out, wr_error_t *err) {
  wr_store_t *st;

  if (create_private(path, err) < 0)
    return wr_error_wrap(err, "database `%s`", path);
  st = xcalloc(1, sizeof(*st));
  st->netlog.max = WR_NETLOG_MAX;
  st->netlog.sandbox_max = WR_NETLOG_SANDBOX_MAX;
  if (open_db(st, path, err) < 0 || configure(st, err) < 0 ||
      migrate(st, ml, err) < 0) {
    wr_store_close(st);
    return wr_error_wrap(err, "database `%s`", path);
  }
  *out = st;
  return 0;
}

int wr_store_open_with(const char *path, const char *const *extra,
                       size_t n_extra, wr_store_t **out, wr_error_t *err) {
  struct migration_list ml = {migrations, WR_ARRAY_SIZE(migrations), extra,
                              n_extra};

  if (open_migrated(path, &ml, out, err) < 0)
    return -1;
  if (wr_store_netlog_load(*out, err) < 0) {
    wr_store_close(*out);
    *out = NULL;
    return wr_error_wrap(err, "database `%s`", path);
  }
  return 0;
}

int wr_store_open(const char *path, wr_store_t **out, wr_error_t *err) {
  return wr_store_open_with(path, NULL, 0, out, err);
}

int wr_store_open_roots_with(const char *path, const char *const *extra,
                             size_t n_extra, wr_store_t **out,
                             wr_error_t *err) {
  struct migration_list ml = {wr_roots_migrations, wr_roots_nmigrations, extra,
                              n_extra};

  return open_migrated(path, &ml, out, err);
}

int wr_roots_open(const char *path, wr_store_t **out, wr_error_t *err) {
  return wr_store_open_roots_with(path, NULL, 0, out, err);
}

/* BEGIN IMMEDIATE takes the write lock at once, so that what is read in
 * the transaction is still true when it commits. */
int wr_store_begin(wr_store_t *st, wr_error_t *err) {
  return wr_store_exec(st, "BEGIN IMMEDIATE", err);
}

int wr_store_commit(wr_store_t *st, wr_error_t *err) {
  if (wr_store_exec(st, "COMMIT", err) < 0) {
    wr_store_rollback(st);
    return -1;
  }
  return 0;
}

void wr_store_rollback(wr_store_t *st) {
  if (!sqlite3_get_autocommit(st->db))
    wr_store_exec(st, "ROLLBACK", NULL);
}

/* Statements are finalized where they are made, so nothing is pending. */
void wr_store_close(wr_store_t *st) {
  if (st == NULL)
    return;
  sqlite3_close_v2(st->db);
  json_decref(st->netlog_held);
  free(st);
}

int wr_store_version(wr_store_t *st) {
  return st->version;
}
