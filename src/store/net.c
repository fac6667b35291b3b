/*
 * store: the network's tables. Settings, policy rules, the policy log,
 * secrets (their descriptions; the values are files) and published ports.
 */
#include "store/store_internal.h"

#include <fcntl.h>
#include <sys/stat.h>

/* A secret's value is a credential header; this bounds what is read back. */
#define SECRET_VALUE_MAX (64u << 10)

/* ---- settings ------------------------------------------------------------ */

int wr_store_setting_get(wr_store_t *st, const char *key, char **value,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st, "SELECT value FROM settings WHERE key = ?1", &stmt,
                       err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, key) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "setting `%s` is not set", key);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  *value = wr_store_column_str(stmt, 0);
  return 0;
}

int wr_store_setting_set(wr_store_t *st, const char *key, const char *value,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (key == NULL || value == NULL)
    return wr_store_error(err, EINVAL, "a setting needs a key and a value");
  if (wr_store_prepare(st,
                       "INSERT INTO settings (key, value) VALUES (?1, ?2) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, key) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, value) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "set `%s`", key);
  return 0;
}

/* ---- policy rules -------------------------------------------------------- */

#define RULE_COLUMNS "id, sandbox_id, allow, pattern, port, created_ms"

static void read_rule(sqlite3_stmt *stmt, void *out) {
  struct wr_rule_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->id = sqlite3_column_int64(stmt, 0);
  rec->sandbox_id = wr_store_column_str(stmt, 1);
  rec->allow = sqlite3_column_int(stmt, 2) != 0;
  rec->pattern = wr_store_column_str(stmt, 3);
  rec->port = (uint16_t)sqlite3_column_int(stmt, 4);
  rec->created_ms = sqlite3_column_int64(stmt, 5);
}

/* Step a statement that yields at most one rule. */
static int one_rule(wr_store_t *st, sqlite3_stmt *stmt, struct wr_rule_rec *rec,
                    const char *what, wr_error_t *err) {
  int rc = sqlite3_step(stmt);

  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no rule %s", what);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_rule(stmt, rec);
  return 0;
}

/* `sandbox_id IS ?1` matches NULL to NULL, as the unique index does. */
static int find_rule(wr_store_t *st, const struct wr_rule_rec *in,
                     struct wr_rule_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "SELECT " RULE_COLUMNS " FROM policy_rules "
                       "WHERE sandbox_id IS ?1 AND allow = ?2 AND "
                       "pattern = ?3 AND port = ?4",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, in->sandbox_id) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 2, in->allow) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, in->pattern) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 4, in->port) != SQLITE_OK)
    return wr_store_fail(st, err);
  return one_rule(st, stmt, rec, in->pattern, err);
}

/*
 * ON CONFLICT DO NOTHING makes adding a rule that exists a no-op rather
 * than an error, so that `policy allow` twice leaves one rule; the row is
 * then read back either way. A rule naming a sandbox that is not there
 * fails the foreign key.
 */
int wr_store_rule_add(wr_store_t *st, const struct wr_rule_rec *in,
                      struct wr_rule_rec *rec, bool *added, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (in->pattern == NULL || *in->pattern == '\0')
    return wr_store_error(err, EINVAL, "a rule needs a pattern");
  if (wr_store_prepare(st,
                       "INSERT INTO policy_rules "
                       "(sandbox_id, allow, pattern, port, created_ms) "
                       "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, in->sandbox_id) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 2, in->allow) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, in->pattern) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 4, in->port) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 5, wr_now_ms()) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "add rule `%s`", in->pattern);
  if (added != NULL)
    *added = changes > 0;
  return find_rule(st, in, rec, err);
}

int wr_store_rule_get(wr_store_t *st, int64_t id, struct wr_rule_rec *rec,
                      wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  char what[32];

  if (wr_store_prepare(st,
                       "SELECT " RULE_COLUMNS " FROM policy_rules "
                       "WHERE id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, id) != SQLITE_OK)
    return wr_store_fail(st, err);
  snprintf(what, sizeof(what), "%lld", (long long)id);
  return one_rule(st, stmt, rec, what, err);
}

int wr_store_rule_list(wr_store_t *st, const char *sandbox_id,
                       struct wr_rule_rec **recs, size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st,
                       "SELECT " RULE_COLUMNS " FROM policy_rules "
                       "WHERE ?1 IS NULL OR sandbox_id IS NULL OR "
                       "sandbox_id = ?1 ORDER BY id",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, sandbox_id) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_collect(st, stmt, sizeof(struct wr_rule_rec), read_rule, &v,
                       &len, err) < 0) {
    wr_rule_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

int wr_store_rule_delete(wr_store_t *st, int64_t id, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st, "DELETE FROM policy_rules WHERE id = ?1", &stmt,
                       err) < 0)
    return -1;
  if (sqlite3_bind_int64(stmt, 1, id) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "delete rule %lld", (long long)id);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no rule %lld", (long long)id);
  return 0;
}

void wr_rule_rec_free(struct wr_rule_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->sandbox_id);
  free(rec->pattern);
  memset(rec, 0, sizeof(*rec));
}

void wr_rule_recs_free(struct wr_rule_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_rule_rec_free(&recs[i]);
  free(recs);
}

/* ---- the policy log: entries --------------------------------------------- */

#define NETLOG_COLUMNS                                                         \
  "id, time_ms, sandbox_id, kind, host, addr, port, allow, rule, reason, "     \
  "intercepted, bytes_up, bytes_down"

static void read_netlog(sqlite3_stmt *stmt, void *out) {
  struct wr_netlog_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->id = sqlite3_column_int64(stmt, 0);
  rec->time_ms = sqlite3_column_int64(stmt, 1);
  rec->sandbox_id = wr_store_column_str(stmt, 2);
  rec->kind = wr_store_column_str(stmt, 3);
  rec->host = wr_store_column_str(stmt, 4);
  rec->addr = wr_store_column_str(stmt, 5);
  rec->port = (uint16_t)sqlite3_column_int(stmt, 6);
  rec->allow = sqlite3_column_int(stmt, 7) != 0;
  rec->rule = wr_store_column_str(stmt, 8);
  rec->reason = wr_store_column_str(stmt, 9);
  rec->intercepted = sqlite3_column_int(stmt, 10) != 0;
  rec->bytes_up = (uint64_t)sqlite3_column_int64(stmt, 11);
  rec->bytes_down = (uint64_t)sqlite3_column_int64(stmt, 12);
}

static int bind_netlog(sqlite3_stmt *stmt, const struct wr_netlog_rec *rec) {
  if (sqlite3_bind_int64(stmt, 1, rec->time_ms) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->sandbox_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->kind) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, rec->host) != SQLITE_OK ||
      wr_store_bind_str(stmt, 5, rec->addr) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 6, rec->port) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 7, rec->allow) != SQLITE_OK ||
      wr_store_bind_str(stmt, 8, rec->rule) != SQLITE_OK ||
      wr_store_bind_str(stmt, 9, rec->reason) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 10, rec->intercepted) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 11, (int64_t)rec->bytes_up) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 12, (int64_t)rec->bytes_down) != SQLITE_OK)
    return -1;
  return 0;
}

/* ---- the policy log: retention ------------------------------------------ */

int wr_store_netlog_set_limits(wr_store_t *st,
                               const struct wr_netlog_limits *limits,
                               wr_error_t *err) {
  if (limits->max < 1 || limits->max > INT64_MAX || limits->sandbox_max < 1 ||
      limits->sandbox_max > limits->max)
    return wr_store_error(err, EINVAL,
                          "the log must keep at least one entry, and no "
                          "more per sandbox than in all");
  st->netlog = *limits;
  return 0;
}

/* The holder's key of an entry's sandbox; NULL names no sandbox. */
static const char *holder_key(const char *sandbox_id) {
  return sandbox_id != NULL ? sandbox_id : "";
}

static int64_t held(const wr_store_t *st, const char *key) {
  return json_integer_value(json_object_get(st->netlog_held, key));
}

/* Record a change in what a holder holds; one that holds nothing more is
 * forgotten (its dropped count stays in the table). */
static void add_held(wr_store_t *st, const char *key, int64_t delta) {
  json_t *v = json_object_get(st->netlog_held, key);
  int64_t now = json_integer_value(v) + delta;

  st->netlog_total += delta;
  if (now <= 0)
    json_object_del(st->netlog_held, key);
  else if (v != NULL)
    json_integer_set(v, now);
  else
    json_object_set_new(st->netlog_held, key, json_integer(now));
}

/* Uses the index on (sandbox_id, id), so this reads no entry's row. */
int wr_store_netlog_load(wr_store_t *st, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  json_decref(st->netlog_held);
  st->netlog_held = json_object();
  st->netlog_total = 0;
  if (wr_store_prepare(st,
                       "SELECT IFNULL(sandbox_id, ''), COUNT(*) FROM "
                       "policy_log GROUP BY sandbox_id",
                       &stmt, err) < 0)
    return -1;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    add_held(st, (const char *)sqlite3_column_text(stmt, 0),
             sqlite3_column_int64(stmt, 1));
  return rc == SQLITE_DONE ? 0 : wr_store_fail(st, err);
}

/*
 * Drop up to `count` of a holder's oldest entries and count them as
 * dropped; *done gets how many went. The newest entry of the whole log is
 * never among them: ids are the largest id plus one, so deleting it would
 * hand its id out again, and a client paging with `after` would miss the
 * entry that got it.
 */
static int delete_oldest(wr_store_t *st, const char *key, int64_t count,
                         int64_t *done, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *del = NULL;
  _cleanup_stmt_ sqlite3_stmt *add = NULL;
  int changes = 0;

  if (wr_store_prepare(st,
                       "DELETE FROM policy_log WHERE id IN (SELECT id FROM "
                       "policy_log WHERE sandbox_id IS ?1 AND id < (SELECT "
                       "MAX(id) FROM policy_log) ORDER BY id LIMIT ?2)",
                       &del, err) < 0 ||
      wr_store_prepare(st,
                       "INSERT INTO policy_log_dropped (sandbox_id, dropped) "
                       "VALUES (?1, ?2) ON CONFLICT (sandbox_id) DO UPDATE "
                       "SET dropped = dropped + excluded.dropped",
                       &add, err) < 0)
    return -1;
  if (wr_store_bind_str(del, 1, *key != '\0' ? key : NULL) != SQLITE_OK ||
      sqlite3_bind_int64(del, 2, count) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, del, &changes, err) < 0)
    return -1;
  if (wr_store_bind_str(add, 1, key) != SQLITE_OK ||
      sqlite3_bind_int64(add, 2, changes) != SQLITE_OK)
    return wr_store_fail(st, err);
  *done = changes;
  return wr_store_run(st, add, NULL, err);
}

/* The deletion and its count commit together, and only then is the
 * count in memory changed. */
static int evict(wr_store_t *st, const char *key, int64_t count, int64_t *done,
                 wr_error_t *err) {
  if (wr_store_exec(st, "SAVEPOINT evict", err) < 0)
    return -1;
  if (delete_oldest(st, key, count, done, err) < 0 ||
      wr_store_exec(st, "RELEASE evict", err) < 0) {
    wr_store_exec(st, "ROLLBACK TO evict; RELEASE evict", NULL);
    return -1;
  }
  add_held(st, key, -*done);
  return 0;
}

/* The largest holder (its key, borrowed from the map until it changes)
 * and what the next largest holds (0 when there is none). */
static const char *largest_holders(const wr_store_t *st, int64_t *first,
                                   int64_t *second) {
  const char *key, *top = NULL;
  json_t *v;

  *first = *second = 0;
  json_object_foreach (st->netlog_held, key, v) {
    int64_t n = json_integer_value(v);
    if (n > *first) {
      *second = *first;
      *first = n;
      top = key;
    } else if (n > *second) {
      *second = n;
    }
  }
  return top;
}

/*
 * Bring all holders together back to the cap, taking from the largest
 * first: down to the next largest holder, at least a small batch each
 * round, so that holders of equal size take turns. A sandbox's own quota
 * keeps any one holder near sandbox_max, so this acts only when many
 * sandboxes are full.
 */
static int enforce_cap(wr_store_t *st, wr_error_t *err) {
  int64_t max = (int64_t)st->netlog.max;
  int64_t batch = WR_MAX(WR_NETLOG_SLACK(max) / 10, 1);

  while (st->netlog_total > max) {
    int64_t first, second, done = 0;
    const char *top = largest_holders(st, &first, &second);
    _cleanup_free_ char *key = xstrdup(top != NULL ? top : "");

    if (evict(st, key,
              WR_MIN(WR_MAX(first - second, batch), st->netlog_total - max),
              &done, err) < 0)
      return -1;
    if (done == 0)
      break; /* only the newest entry is left to that holder */
  }
  return 0;
}

/*
 * One INSERT, as cheap as a log can be; the counts are in memory. Past a
 * limit by its slack, a batch of old entries goes. A failure there is
 * reported, but the entry itself is logged.
 */
int wr_store_netlog_add(wr_store_t *st, const struct wr_netlog_rec *rec,
                        int64_t *id, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int64_t quota = (int64_t)st->netlog.sandbox_max;
  int64_t max = (int64_t)st->netlog.max, done = 0;
  const char *key = holder_key(rec->sandbox_id);

  if (rec->kind == NULL)
    return wr_store_error(err, EINVAL, "a log entry needs a kind");
  if (wr_store_prepare(st,
                       "INSERT INTO policy_log (time_ms, sandbox_id, kind, "
                       "host, addr, port, allow, rule, reason, intercepted, "
                       "bytes_up, bytes_down) VALUES "
                       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                       &stmt, err) < 0)
    return -1;
  if (bind_netlog(stmt, rec) < 0)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, NULL, err) < 0)
    return wr_error_wrap(err, "log");
  if (id != NULL)
    *id = sqlite3_last_insert_rowid(st->db);
  add_held(st, key, 1);
  if (held(st, key) > quota + WR_NETLOG_SLACK(quota) &&
      evict(st, key, held(st, key) - quota, &done, err) < 0)
    return wr_error_wrap(err, "trim the log of `%s`", key);
  if (st->netlog_total > max + WR_NETLOG_SLACK(max) && enforce_cap(st, err) < 0)
    return wr_error_wrap(err, "trim the log");
  return 0;
}

int wr_store_netlog_dropped(wr_store_t *st, const char *sandbox_id,
                            uint64_t *dropped, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "SELECT IFNULL(SUM(dropped), 0) FROM policy_log_dropped "
                       "WHERE ?1 IS NULL OR sandbox_id = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, sandbox_id) != SQLITE_OK ||
      sqlite3_step(stmt) != SQLITE_ROW)
    return wr_store_fail(st, err);
  *dropped = (uint64_t)sqlite3_column_int64(stmt, 0);
  return 0;
}

/* The newest entries are read newest first (that is what LIMIT keeps)
 * and put back in order by the outer query. */
static const char netlog_newest_sql[] =
    "SELECT * FROM (SELECT " NETLOG_COLUMNS " FROM policy_log "
    "WHERE ?1 IS NULL OR sandbox_id = ?1 ORDER BY id DESC LIMIT ?3) "
    "ORDER BY id";
static const char netlog_after_sql[] =
    "SELECT " NETLOG_COLUMNS " FROM policy_log "
    "WHERE (?1 IS NULL OR sandbox_id = ?1) AND id > ?2 ORDER BY id LIMIT ?3";

int wr_store_netlog_list(wr_store_t *st, const char *sandbox_id, int64_t after,
                         size_t limit, struct wr_netlog_rec **recs, size_t *n,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st, after > 0 ? netlog_after_sql : netlog_newest_sql,
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, sandbox_id) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 2, after) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 3, (int64_t)WR_MIN(limit, INT64_MAX)) !=
          SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_collect(st, stmt, sizeof(struct wr_netlog_rec), read_netlog, &v,
                       &len, err) < 0) {
    wr_netlog_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

void wr_netlog_rec_free(struct wr_netlog_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->sandbox_id);
  free(rec->kind);
  free(rec->host);
  free(rec->addr);
  free(rec->rule);
  free(rec->reason);
  memset(rec, 0, sizeof(*rec));
}

void wr_netlog_recs_free(struct wr_netlog_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_netlog_rec_free(&recs[i]);
  free(recs);
}

/* ---- secrets: the values' files ------------------------------------------ */

bool wr_store_secret_name_valid(const char *service) {
  size_t len = service != NULL ? strlen(service) : 0;

  if (len == 0 || len > 64)
    return false;
  for (const char *p = service; *p != '\0'; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
          *p == '-'))
      return false;
  return true;
}

/* The values live beside the database (SQLite reports its absolute path),
 * so the store needs no other configuration. */
static char *secrets_dir(wr_store_t *st) {
  const char *db = sqlite3_db_filename(st->db, "main");
  const char *slash = db != NULL ? strrchr(db, '/') : NULL;

  if (slash == NULL)
    return xstrdup("secrets");
  return xasprintf("%.*s/secrets", (int)(slash - db), db);
}

/*
 * Open the secrets directory, making it when asked. It must be a real
 * directory (not a symlink someone put there) and is kept at 0700 so that
 * only root can even list which services have secrets.
 */
static int open_secrets_dir(wr_store_t *st, bool create, wr_error_t *err) {
  _cleanup_free_ char *dir = secrets_dir(st);
  _cleanup_close_ int fd = -1;
  struct stat sb;

  if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", dir);
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", dir);
  if (fstat(fd, &sb) < 0)
    return wr_error_set(err, errno, "stat `%s`", dir);
  if ((sb.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
    return wr_error_set(err, errno, "chmod 0700 `%s`", dir);
  return steal_fd(&fd);
}

/* Write to a fresh temporary file (O_EXCL: never one left behind with
 * another mode), make it durable, then rename it over the old value, so a
 * reader sees the old value or the new one and never a mix. */
static int write_value(int dirfd, const char *service, const char *value,
                       size_t len, wr_error_t *err) {
  _cleanup_free_ char *tmp = xasprintf(".%s.tmp", service);
  _cleanup_close_ int fd = -1;

  unlinkat(dirfd, tmp, 0);
  fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
              0600);
  if (fd < 0)
    return wr_error_set(err, errno, "create the value of `%s`", service);
  if (fchmod(fd, 0600) < 0 || wr_write_all(fd, value, len, err) < 0 ||
      fsync(fd) < 0) {
    if (err != NULL && err->msg[0] == '\0')
      wr_error_set(err, errno, "write the value of `%s`", service);
    unlinkat(dirfd, tmp, 0);
    return -1;
  }
  if (renameat(dirfd, tmp, dirfd, service) < 0) {
    int e = errno;
    unlinkat(dirfd, tmp, 0);
    return wr_error_set(err, e, "rename the value of `%s`", service);
  }
  fsync(dirfd);
  return 0;
}

/* Read into a buffer of exactly the file's size, so that no copy of the
 * value is left in freed memory along the way. */
static int read_value(int dirfd, const char *service, char **value, size_t *len,
                      wr_error_t *err) {
  _cleanup_close_ int fd = -1;
  struct stat sb;
  char *buf;
  ssize_t n;

  fd = openat(dirfd, service, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return wr_store_error(err, ENOENT, "secret `%s` has no value", service);
  if (fd < 0 || fstat(fd, &sb) < 0)
    return wr_error_set(err, errno, "open the value of `%s`", service);
  if (!S_ISREG(sb.st_mode) || sb.st_size > (off_t)SECRET_VALUE_MAX)
    return wr_store_error(err, EINVAL, "the value of `%s` is not a small file",
                          service);
  buf = xmalloc((size_t)sb.st_size + 1);
  n = wr_read_all(fd, buf, (size_t)sb.st_size);
  if (n != (ssize_t)sb.st_size) {
    explicit_bzero(buf, (size_t)sb.st_size);
    free(buf);
    return wr_error_set(err, n < 0 ? errno : EIO, "read the value of `%s`",
                        service);
  }
  buf[n] = '\0';
  *value = buf;
  *len = (size_t)n;
  return 0;
}

/* ---- secrets: the records ------------------------------------------------ */

#define SECRET_COLUMNS                                                         \
  "service, hosts_json, header, prefix, env_json, created_ms"

static void read_secret(sqlite3_stmt *stmt, void *out) {
  struct wr_secret_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->service = wr_store_column_str(stmt, 0);
  rec->hosts_json = wr_store_column_str(stmt, 1);
  rec->header = wr_store_column_str(stmt, 2);
  rec->prefix = wr_store_column_str(stmt, 3);
  rec->env_json = wr_store_column_str(stmt, 4);
  rec->created_ms = sqlite3_column_int64(stmt, 5);
}

static int check_secret(const struct wr_secret_rec *rec, wr_error_t *err) {
  if (!wr_store_secret_name_valid(rec->service))
    return wr_store_error(err, EINVAL,
                          "invalid service name `%s` (1 to 64 of a-z, 0-9, "
                          "_ and -)",
                          rec->service ? rec->service : "");
  if (rec->hosts_json == NULL || rec->header == NULL || rec->env_json == NULL)
    return wr_store_error(
        err, EINVAL, "secret `%s` needs hosts, a header and env", rec->service);
  return 0;
}

static int upsert_secret(wr_store_t *st, const struct wr_secret_rec *rec,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st,
                       "INSERT INTO secrets (" SECRET_COLUMNS ") "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                       "ON CONFLICT (service) DO UPDATE SET "
                       "hosts_json = excluded.hosts_json, "
                       "header = excluded.header, prefix = excluded.prefix, "
                       "env_json = excluded.env_json",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, rec->service) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->hosts_json) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->header) != SQLITE_OK ||
      wr_store_bind_str(stmt, 4, rec->prefix ? rec->prefix : "") != SQLITE_OK ||
      wr_store_bind_str(stmt, 5, rec->env_json) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 6, wr_now_ms()) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

/* The value first: a record never describes a value that was not
 * written. A value written for a record that then failed is harmless: it
 * is overwritten by the next put and unused until then. */
int wr_store_secret_put(wr_store_t *st, const struct wr_secret_rec *rec,
                        const char *value, size_t len, wr_error_t *err) {
  _cleanup_close_ int dirfd = -1;

  if (check_secret(rec, err) < 0)
    return -1;
  dirfd = open_secrets_dir(st, true, err);
  if (dirfd < 0 || write_value(dirfd, rec->service, value, len, err) < 0 ||
      upsert_secret(st, rec, err) < 0)
    return wr_error_wrap(err, "secret `%s`", rec->service);
  return 0;
}

int wr_store_secret_get(wr_store_t *st, const char *service,
                        struct wr_secret_rec *rec, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (wr_store_prepare(st,
                       "SELECT " SECRET_COLUMNS " FROM secrets "
                       "WHERE service = ?1",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, service) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return wr_store_error(err, ENOENT, "no secret `%s`", service);
  if (rc != SQLITE_ROW)
    return wr_store_fail(st, err);
  read_secret(stmt, rec);
  return 0;
}

int wr_store_secret_list(wr_store_t *st, struct wr_secret_rec **recs, size_t *n,
                         wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st,
                       "SELECT " SECRET_COLUMNS " FROM secrets "
                       "ORDER BY service",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_collect(st, stmt, sizeof(struct wr_secret_rec), read_secret, &v,
                       &len, err) < 0) {
    wr_secret_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

int wr_store_secret_value(wr_store_t *st, const char *service, char **value,
                          size_t *len, wr_error_t *err) {
  _cleanup_close_ int dirfd = -1;

  if (!wr_store_secret_name_valid(service))
    return wr_store_error(err, EINVAL, "invalid service name `%s`", service);
  dirfd = open_secrets_dir(st, false, err);
  if (dirfd < 0 || read_value(dirfd, service, value, len, err) < 0)
    return wr_error_wrap(err, "secret `%s`", service);
  return 0;
}

/* The record goes first: without it the file is never read again, and a
 * file that could not be removed is at worst a stale value on disk. */
int wr_store_secret_delete(wr_store_t *st, const char *service,
                           wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  _cleanup_close_ int dirfd = -1;
  int changes = 0;

  if (!wr_store_secret_name_valid(service))
    return wr_store_error(err, ENOENT, "no secret `%s`", service);
  if (wr_store_prepare(st, "DELETE FROM secrets WHERE service = ?1", &stmt,
                       err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, service) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "delete secret `%s`", service);
  dirfd = open_secrets_dir(st, false, NULL);
  if (dirfd >= 0 && unlinkat(dirfd, service, 0) < 0 && errno != ENOENT)
    return wr_error_set(err, errno, "remove the value of `%s`", service);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "no secret `%s`", service);
  return 0;
}

void wr_secret_rec_free(struct wr_secret_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->service);
  free(rec->hosts_json);
  free(rec->header);
  free(rec->prefix);
  free(rec->env_json);
  memset(rec, 0, sizeof(*rec));
}

void wr_secret_recs_free(struct wr_secret_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_secret_rec_free(&recs[i]);
  free(recs);
}

/* ---- published ports ----------------------------------------------------- */

#define PORT_COLUMNS "sandbox_id, addr, host_port, port, created_ms"

static void read_port(sqlite3_stmt *stmt, void *out) {
  struct wr_port_rec *rec = out;

  memset(rec, 0, sizeof(*rec));
  rec->sandbox_id = wr_store_column_str(stmt, 0);
  rec->addr = wr_store_column_str(stmt, 1);
  rec->host_port = (uint16_t)sqlite3_column_int(stmt, 2);
  rec->port = (uint16_t)sqlite3_column_int(stmt, 3);
  rec->created_ms = sqlite3_column_int64(stmt, 4);
}

/* Name the sandbox that holds the port, in words a user can act on. */
static int explain_port_clash(wr_store_t *st, const struct wr_port_rec *rec,
                              wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  const unsigned char *holder;

  if (wr_store_prepare(st,
                       "SELECT sandbox_id FROM ports WHERE host_port = ?2 "
                       "AND (addr = ?1 OR sandbox_id = ?3) LIMIT 1",
                       &stmt, NULL) < 0 ||
      wr_store_bind_str(stmt, 1, rec->addr) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 2, rec->host_port) != SQLITE_OK ||
      wr_store_bind_str(stmt, 3, rec->sandbox_id) != SQLITE_OK ||
      sqlite3_step(stmt) != SQLITE_ROW)
    return -1;
  holder = sqlite3_column_text(stmt, 0);
  return wr_store_error(
      err, EEXIST, "host port %u is already published by sandbox `%s`",
      (unsigned)rec->host_port, holder ? (const char *)holder : "?");
}

int wr_store_port_add(wr_store_t *st, const struct wr_port_rec *rec,
                      wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int rc;

  if (rec->sandbox_id == NULL || rec->addr == NULL || rec->host_port == 0 ||
      rec->port == 0)
    return wr_store_error(err, EINVAL,
                          "a publication needs a sandbox, an address and two "
                          "ports");
  if (wr_store_prepare(st,
                       "INSERT INTO ports (" PORT_COLUMNS ") "
                       "VALUES (?1, ?2, ?3, ?4, ?5)",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, rec->sandbox_id) != SQLITE_OK ||
      wr_store_bind_str(stmt, 2, rec->addr) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 3, rec->host_port) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 4, rec->port) != SQLITE_OK ||
      sqlite3_bind_int64(stmt, 5, wr_now_ms()) != SQLITE_OK)
    return wr_store_fail(st, err);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE)
    return 0;
  wr_store_fail(st, err);
  if ((rc & 0xff) == SQLITE_CONSTRAINT)
    explain_port_clash(st, rec, err);
  return -1;
}

int wr_store_port_list(wr_store_t *st, const char *sandbox_id,
                       struct wr_port_rec **recs, size_t *n, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  void *v = NULL;
  size_t len = 0;

  if (wr_store_prepare(st,
                       "SELECT " PORT_COLUMNS " FROM ports "
                       "WHERE ?1 IS NULL OR sandbox_id = ?1 "
                       "ORDER BY host_port, addr",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, sandbox_id) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_collect(st, stmt, sizeof(struct wr_port_rec), read_port, &v,
                       &len, err) < 0) {
    wr_port_recs_free(v, len);
    return -1;
  }
  *recs = v;
  *n = len;
  return 0;
}

int wr_store_port_delete(wr_store_t *st, const char *sandbox_id,
                         uint16_t host_port, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;
  int changes = 0;

  if (wr_store_prepare(st,
                       "DELETE FROM ports WHERE sandbox_id = ?1 AND "
                       "host_port = ?2",
                       &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, sandbox_id) != SQLITE_OK ||
      sqlite3_bind_int(stmt, 2, host_port) != SQLITE_OK)
    return wr_store_fail(st, err);
  if (wr_store_run(st, stmt, &changes, err) < 0)
    return wr_error_wrap(err, "unpublish port %u", (unsigned)host_port);
  if (changes == 0)
    return wr_store_error(err, ENOENT, "sandbox `%s` does not publish port %u",
                          sandbox_id, (unsigned)host_port);
  return 0;
}

void wr_port_rec_free(struct wr_port_rec *rec) {
  if (rec == NULL)
    return;
  free(rec->sandbox_id);
  free(rec->addr);
  memset(rec, 0, sizeof(*rec));
}

void wr_port_recs_free(struct wr_port_rec *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    wr_port_rec_free(&recs[i]);
  free(recs);
}

static int delete_by_sandbox(wr_store_t *st, const char *sql,
                             const char *sandbox_id, wr_error_t *err) {
  _cleanup_stmt_ sqlite3_stmt *stmt = NULL;

  if (wr_store_prepare(st, sql, &stmt, err) < 0)
    return -1;
  if (wr_store_bind_str(stmt, 1, sandbox_id) != SQLITE_OK)
    return wr_store_fail(st, err);
  return wr_store_run(st, stmt, NULL, err);
}

/* One transaction, so a sandbox never keeps half of what it had. */
int wr_store_net_forget_sandbox(wr_store_t *st, const char *sandbox_id,
                                wr_error_t *err) {
  if (wr_store_exec(st, "BEGIN IMMEDIATE", err) < 0)
    return -1;
  if (delete_by_sandbox(st, "DELETE FROM policy_rules WHERE sandbox_id = ?1",
                        sandbox_id, err) < 0 ||
      delete_by_sandbox(st, "DELETE FROM ports WHERE sandbox_id = ?1",
                        sandbox_id, err) < 0 ||
      wr_store_exec(st, "COMMIT", err) < 0) {
    wr_store_exec(st, "ROLLBACK", NULL);
    return wr_error_wrap(err, "forget sandbox `%s`", sandbox_id);
  }
  return 0;
}
