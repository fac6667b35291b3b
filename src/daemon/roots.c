/*
 * This daemon's state root among the host's.
 *
 * One warrend per root: an exclusive flock on ROOT/warrend.lock, held for
 * the daemon's life (it holds the pid, for the message a second daemon
 * gets). One daemon per socket: a socket something listens on is never
 * taken over, and only the socket this daemon made is removed at its
 * stop (src/api/server.c). And two roots, two worlds: every root is
 * recorded in the host's registry (store.h, WR_ROOTS_DB), which hands out
 * uid slots that no sandbox of any root has and refuses a cgroup parent
 * that another root's daemon uses.
 *
 * A root is known there by the id in ROOT/root-id, so that it keeps its
 * record when it moves, and a record whose path no longer holds that id
 * is a root that is gone: any daemon's start forgets it and frees its
 * slots. The cgroup parent is recorded in the root itself (the setting
 * cgroup.parent), because its sandboxes' cgroups stay under it across
 * restarts.
 */
#include "daemon/roots.h"
#include "daemon/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/file.h>

#define LOCK_NAME "warrend.lock"
#define ID_NAME "root-id"
#define ID_HEX 16
#define DEFAULT_ROOT "/var/lib/warren"
#define DEFAULT_PARENT "warren"
#define PARENT_SETTING "cgroup.parent"
#define PARENT_MAX 128

/* ---- one daemon per root --------------------------------------------------
 */

static int read_pid(int fd) {
  char buf[32] = {0};
  uint64_t pid = 0;

  if (pread(fd, buf, sizeof(buf) - 1, 0) <= 0)
    return 0;
  buf[strcspn(buf, "\n")] = '\0';
  return wr_parse_u64(buf, 1, INT32_MAX, &pid, NULL) == 0 ? (int)pid : 0;
}

/* The lock is taken before anything in the root is touched; the file
 * then says whose it is. It is close-on-exec, so no child keeps it. */
int wr_daemon_lock_root(struct wr_daemon *d, wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/%s", d->cfg.root, LOCK_NAME);
  _cleanup_close_ int fd = -1;
  char pid[32];
  int holder;

  fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    if (errno != EWOULDBLOCK)
      return wr_error_set(err, errno, "lock `%s`", path);
    holder = read_pid(fd);
    return wr_error_setx(err, EBUSY,
                         "state root `%s` is in use by another warrend "
                         "(pid %d); stop it first, or give this one another "
                         "--root",
                         d->cfg.root, holder);
  }
  snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
  if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, strlen(pid), 0) < 0)
    return wr_error_set(err, errno, "write `%s`", path);
  d->lock_fd = steal_fd(&fd);
  return 0;
}

/* The state root of a running warrend: the directory of the lock file it
 * holds open. NULL when pid holds none (or is not a warrend). */
static char *root_of_pid(pid_t pid) {
  _cleanup_free_ char *dir = xasprintf("/proc/%d/fd", (int)pid);
  DIR *d = opendir(dir);
  struct dirent *e;
  char *root = NULL;

  while (d != NULL && root == NULL && (e = readdir(d)) != NULL) {
    _cleanup_free_ char *link = xasprintf("%s/%s", dir, e->d_name);
    char target[PATH_MAX];
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    size_t tail = strlen("/" LOCK_NAME);
    if (n <= (ssize_t)tail)
      continue;
    target[n] = '\0';
    if (strcmp(target + n - tail, "/" LOCK_NAME) == 0)
      root = xstrndup(target, (size_t)n - tail);
  }
  if (d != NULL)
    closedir(d);
  return root;
}

/* Before anything is done: a socket another process serves (a warrend of
 * another root, say) is not ours to take, and the message names it. */
int wr_daemon_check_socket(struct wr_daemon *d, wr_error_t *err) {
  _cleanup_free_ char *root = NULL;
  pid_t pid = 0;
  int live = wr_http_unix_listener(d->cfg.socket_path, &pid, err);

  if (live <= 0)
    return live;
  root = pid > 0 ? root_of_pid(pid) : NULL;
  if (root != NULL)
    return wr_error_setx(err, EADDRINUSE,
                         "socket `%s` is served by the warrend of state root "
                         "`%s` (pid %d); give this one another --socket",
                         d->cfg.socket_path, root, (int)pid);
  return wr_error_setx(err, EADDRINUSE,
                       "socket `%s` is served by another process (pid %d); "
                       "give this warrend another --socket",
                       d->cfg.socket_path, (int)pid);
}

/* ---- the root's identity ----------------------------------------------------
 */

static bool id_valid(const char *id) {
  return strlen(id) == ID_HEX && strspn(id, "0123456789abcdef") == ID_HEX;
}

/* The id recorded in a root, or NULL when it has none (or is gone). */
static char *read_id(const char *root) {
  _cleanup_free_ char *path = xasprintf("%s/%s", root, ID_NAME);
  char *text = NULL;
  size_t len = 0;

  if (wr_read_file(path, 64, &text, &len, NULL) < 0)
    return NULL;
  text[strcspn(text, "\n")] = '\0';
  if (!id_valid(text)) {
    free(text);
    return NULL;
  }
  return text;
}

/* A root's id, made at its first start with this version. */
static int root_id(struct wr_daemon *d, wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/%s", d->cfg.root, ID_NAME);
  unsigned char raw[ID_HEX / 2];
  char hex[ID_HEX + 2];

  d->root_id = read_id(d->cfg.root);
  if (d->root_id != NULL)
    return 0;
  wr_random_bytes(raw, sizeof(raw));
  for (size_t i = 0; i < sizeof(raw); i++)
    snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  strcat(hex, "\n");
  if (wr_write_file(path, hex, strlen(hex), 0644, err) < 0)
    return -1;
  hex[ID_HEX] = '\0';
  d->root_id = xstrdup(hex);
  return 0;
}

/* Whether `path` is (still) the root with this id. */
static bool root_is(const char *path, const char *id) {
  _cleanup_free_ char *there = read_id(path);

  return there != NULL && strcmp(there, id) == 0;
}

/* ---- the cgroup parent ------------------------------------------------------
 */

/* Relative, below the hierarchy's root: components of [A-Za-z0-9._-],
 * none empty, "." or "..". */
static bool parent_valid(const char *p) {
  size_t len = strlen(p);

  if (len == 0 || len > PARENT_MAX || p[0] == '/' || p[len - 1] == '/' ||
      strstr(p, "//") != NULL ||
      strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789._-/") != len)
    return false;
  for (const char *c = p; c != NULL; c = strchr(c, '/')) {
    c += *c == '/';
    if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0'))
      return false;
    if (c[0] == '.' && (c[1] == '/' || c[1] == '\0'))
      return false;
  }
  return true;
}

static bool has_sandboxes(struct wr_daemon *d) {
  struct wr_sandbox_rec *recs = NULL;
  size_t n = 0;

  if (wr_store_sandbox_list(d->store, &recs, &n, NULL) < 0)
    return false;
  wr_sandbox_recs_free(recs, n);
  return n > 0;
}

/*
 * The option when given; else what the root recorded; else, for a root
 * with sandboxes from before parents were recorded, the old default
 * (their cgroups are there); else `warren` for the default root and
 * `warren-` and the id's first 8 digits for any other.
 */
static int choose_parent(struct wr_daemon *d, const char *real,
                         wr_error_t *err) {
  char *recorded = NULL;

  if (d->cfg.cgroup_parent != NULL)
    d->cgroup_parent = xstrdup(d->cfg.cgroup_parent);
  else if (wr_store_setting_get(d->store, PARENT_SETTING, &recorded, NULL) == 0)
    d->cgroup_parent = recorded;
  else if (has_sandboxes(d) || strcmp(real, DEFAULT_ROOT) == 0)
    d->cgroup_parent = xstrdup(DEFAULT_PARENT);
  else
    d->cgroup_parent = xasprintf("%s-%.8s", DEFAULT_PARENT, d->root_id);
  if (!parent_valid(d->cgroup_parent))
    return wr_error_setx(err, EINVAL,
                         "invalid cgroup parent `%s` (a relative cgroup "
                         "path of letters, digits, `.`, `_` and `-`)",
                         d->cgroup_parent);
  return 0;
}

/* ---- the registry -----------------------------------------------------------
 */

/* Forget roots that are gone; refuse a copy of this root (the same id at
 * another path that still holds it): its sandboxes' files would be the
 * same host users as ours. */
static int prune(struct wr_daemon *d, const char *real, wr_error_t *err) {
  struct wr_root_rec *recs = NULL;
  size_t n = 0;
  int r = 0;

  if (wr_roots_list(d->roots, &recs, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n && r == 0; i++) {
    const struct wr_root_rec *rec = &recs[i];
    if (strcmp(rec->id, d->root_id) != 0) {
      if (!root_is(rec->path, rec->id)) {
        wr_info("host registry: state root %s is gone; its uid slots are "
                "free",
                rec->path);
        r = wr_roots_forget(d->roots, rec->id, err);
      }
    } else if (strcmp(rec->path, real) != 0 && root_is(rec->path, rec->id)) {
      r = wr_error_setx(err, EEXIST,
                        "state root `%s` is a copy of `%s` (the same %s); "
                        "give it an identity of its own by removing "
                        "`%s/%s`",
                        real, rec->path, ID_NAME, real, ID_NAME);
    }
  }
  wr_root_recs_free(recs, n);
  return r;
}

static bool in_store(const struct wr_sandbox_rec *recs, size_t n,
                     const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(recs[i].id, id) == 0)
      return true;
  return false;
}

/*
 * The registry holds a slot for each sandbox of this root, and no other:
 * slots of sandboxes made before the registry are claimed as they are,
 * and one that another root claims too is reported (the two sandboxes
 * are the same host user until one of them goes).
 */
static int reconcile_slots(struct wr_daemon *d, wr_error_t *err) {
  struct wr_sandbox_rec *recs = NULL;
  _cleanup_strv_ char **claimed = NULL;
  size_t n = 0;
  int r = 0;

  if (wr_store_sandbox_list(d->store, &recs, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n && r == 0; i++) {
    _cleanup_free_ char *other = NULL;
    r = wr_roots_claim(d->roots, d->root_id, recs[i].id, recs[i].slot, &other,
                       err);
    if (r == 0 && other != NULL)
      wr_warn("sandbox %s (uid slot %u) has the host uids of a sandbox of "
              "state root %s, made before uid slots were allocated for the "
              "whole host: remove one of the two",
              recs[i].name, (unsigned)recs[i].slot, other);
  }
  if (r == 0)
    r = wr_roots_claimed(d->roots, d->root_id, &claimed, err);
  for (size_t i = 0; r == 0 && claimed[i] != NULL; i++)
    if (!in_store(recs, n, claimed[i]))
      r = wr_roots_release(d->roots, d->root_id, claimed[i], err);
  wr_sandbox_recs_free(recs, n);
  return r;
}

static int register_in(struct wr_daemon *d, const char *real, wr_error_t *err) {
  struct wr_root_rec rec = {.id = d->root_id,
                            .path = (char *)real,
                            .cgroup_parent = d->cgroup_parent};

  if (wr_store_begin(d->roots, err) < 0)
    return -1;
  if (prune(d, real, err) < 0 || wr_roots_register(d->roots, &rec, err) < 0 ||
      reconcile_slots(d, err) < 0) {
    wr_store_rollback(d->roots);
    return -1;
  }
  return wr_store_commit(d->roots, err);
}

int wr_daemon_register_root(struct wr_daemon *d, wr_error_t *err) {
  _cleanup_free_ char *dir = xstrdup(d->cfg.roots_db);
  char real[PATH_MAX];

  if (realpath(d->cfg.root, real) == NULL)
    return wr_error_set(err, errno, "resolve `%s`", d->cfg.root);
  if (root_id(d, err) < 0 || choose_parent(d, real, err) < 0 ||
      wr_mkdir_p(dirname(dir), 0700, err) < 0 ||
      wr_roots_open(d->cfg.roots_db, &d->roots, err) < 0)
    return wr_error_wrap(err, "register the state root");
  if (register_in(d, real, err) < 0)
    return wr_error_wrap(err, "register state root `%s` in `%s`", real,
                         d->cfg.roots_db);
  if (wr_store_setting_set(d->store, PARENT_SETTING, d->cgroup_parent, err) < 0)
    return -1;
  wr_info("state root %s (id %s): cgroups below %s", real, d->root_id,
          d->cgroup_parent);
  return 0;
}

int wr_daemon_claim_slot(struct wr_daemon *d, const char *sandbox_id,
                         uint32_t *slot, wr_error_t *err) {
  return wr_roots_claim_free(d->roots, d->root_id, sandbox_id, WR_MAX_SLOT,
                             slot, err);
}

void wr_daemon_release_slot(struct wr_daemon *d, const char *sandbox_id) {
  wr_error_t err;

  if (wr_roots_release(d->roots, d->root_id, sandbox_id, &err) < 0)
    wr_warn("sandbox %s: release its uid slot: %s", sandbox_id, err.msg);
}
