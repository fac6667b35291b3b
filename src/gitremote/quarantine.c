/*
 * A quarantine for a pack from a sandbox: `git index-pack` writes into a
 * temporary object directory, with the repository's own objects as an
 * alternate (so that --strict can check links to what the repository
 * already has), and the pack's files are moved in only once git has
 * taken the pack in full.
 *
 * index-pack writes its tmp_pack_* file into the object directory as it
 * reads, and leaves it there when it dies: at a memory limit, killed at
 * the deadline, or refusing a broken object. In the quarantine all of
 * that is ours to remove, so a refused fetch leaves the repository as it
 * was. This is what git's receive-pack does with pushes (tmp-objdir.c).
 *
 * It is also where the pack's objects are measured before they may move
 * in: git lists the size of each (wr_quarantine_measure), read from the
 * pack index and the deltas' headers, so that an object or a total over
 * the limits is refused without git expanding anything again.
 */
#include "gitremote/gitremote.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

extern char **environ;

/* The object directory, as git sees it (GIT_OBJECT_DIRECTORY, or the
 * git directory's, or the common directory's in a linked worktree). */
static int objects_dir(char **out, wr_error_t *err) {
  char *argv[] = {"git", "rev-parse", "--git-path", "objects", NULL};
  _cleanup_(wr_buf_free) wr_buf_t buf = {0};
  struct wr_cli_host_cmd cmd = {
      .argv = argv, .stdin_fd = -1, .out = &buf, .max_out = PATH_MAX + 1};
  int status;

  if (wr_cli_host_run(&cmd, &status, err) < 0)
    return -1;
  if (status != 0 || buf.data == NULL)
    return wr_error_set(err, 0, "git rev-parse --git-path objects failed");
  buf.data[strcspn(buf.data, "\n")] = '\0';
  *out = realpath(buf.data, NULL);
  if (*out == NULL)
    return wr_error_set(err, errno, "the object directory `%s`", buf.data);
  return 0;
}

/* A path for GIT_ALTERNATE_OBJECT_DIRECTORIES: quoted as git unquotes it
 * when it holds the separator or starts with a quote. */
static char *alternate(const char *path) {
  _cleanup_(wr_buf_free) wr_buf_t b = {0};

  if (strchr(path, ':') == NULL && path[0] != '"')
    return xstrdup(path);
  wr_buf_puts(&b, "\"");
  for (const char *p = path; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\')
      wr_buf_puts(&b, "\\");
    wr_buf_append(&b, p, 1);
  }
  wr_buf_puts(&b, "\"");
  return wr_buf_steal(&b, NULL);
}

static char **quarantine_env(const struct wr_quarantine *q) {
  const char *alt = getenv("GIT_ALTERNATE_OBJECT_DIRECTORIES");
  _cleanup_free_ char *ours = alternate(q->objects);
  _cleanup_free_ char *odb = xasprintf("GIT_OBJECT_DIRECTORY=%s", q->dir);
  _cleanup_free_ char *alts =
      xasprintf("GIT_ALTERNATE_OBJECT_DIRECTORIES=%s%s%s", ours,
                alt && *alt ? ":" : "", alt && *alt ? alt : "");
  char **env = wr_strv_dup(environ);

  env = wr_strv_setenv(env, odb);
  return wr_strv_setenv(env, alts);
}

int wr_quarantine_make(struct wr_quarantine *q, wr_error_t *err) {
  _cleanup_free_ char *pack = NULL;

  memset(q, 0, sizeof(*q));
  if (objects_dir(&q->objects, err) < 0)
    return -1;
  q->dir = xasprintf("%s/tmp_objdir-warren-XXXXXX", q->objects);
  if (mkdtemp(q->dir) == NULL) {
    wr_error_set(err, errno, "make a quarantine in `%s`", q->objects);
    free(steal_ptr(&q->dir));
    return -1;
  }
  pack = xasprintf("%s/pack", q->dir);
  if (mkdir(pack, 0700) < 0)
    return wr_error_set(err, errno, "make `%s`", pack);
  q->env = quarantine_env(q);
  return 0;
}

/* "pack-HASH": what index-pack printed must be an object id in hex. */
static bool hash_valid(const char *hash) {
  size_t n = strlen(hash);

  return (n == 40 || n == 64) && strspn(hash, "0123456789abcdef") == n;
}

/* Move one file in without replacing one that is there: *existed then. */
static int move_in(int from, int to, const char *name, bool *existed,
                   wr_error_t *err) {
  *existed = false;
  if (linkat(from, name, to, name, 0) == 0) {
    unlinkat(from, name, 0);
    return 0;
  }
  if (errno != EEXIST && renameat2(from, name, to, name, RENAME_NOREPLACE) == 0)
    return 0;
  if (errno == EEXIST) {
    *existed = true;
    return 0;
  }
  return wr_error_set(err, errno, "move `%s` into the repository", name);
}

int wr_quarantine_commit(struct wr_quarantine *q, const char *hash, char **keep,
                         wr_error_t *err) {
  static const char *const order[] = {".keep", ".pack", ".rev", ".idx"};
  _cleanup_free_ char *qpack = xasprintf("%s/pack", q->dir);
  _cleanup_free_ char *rpack = xasprintf("%s/pack", q->objects);
  _cleanup_close_ int from = -1, to = -1;
  bool moved[WR_ARRAY_SIZE(order)] = {false}, existed, keep_ours = false;
  size_t i;

  *keep = NULL;
  if (!hash_valid(hash))
    return wr_error_set(err, 0, "unexpected pack name from git index-pack");
  if (mkdir(rpack, 0755) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "make `%s`", rpack);
  from = open(qpack, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  to = open(rpack, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (from < 0 || to < 0)
    return wr_error_set(err, errno, "open `%s`", from < 0 ? qpack : rpack);
  for (i = 0; i < WR_ARRAY_SIZE(order); i++) {
    char name[128];
    struct stat st;
    snprintf(name, sizeof(name), "pack-%s%s", hash, order[i]);
    if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
        strcmp(order[i], ".rev") == 0)
      continue;
    if (move_in(from, to, name, &existed, err) < 0)
      break;
    moved[i] = !existed;
    if (i == 0)
      keep_ours = !existed;
  }
  if (i < WR_ARRAY_SIZE(order)) {
    /* Take back what we moved: a pack without its index is litter. */
    while (i-- > 0)
      if (moved[i]) {
        char name[128];
        snprintf(name, sizeof(name), "pack-%s%s", hash, order[i]);
        unlinkat(to, name, 0);
      }
    return -1;
  }
  if (keep_ours)
    *keep = xasprintf("%s/pack-%s.keep", rpack, hash);
  return 0;
}

/* ---- measuring it ---------------------------------------------------------
 */

/* The largest size a line may give: 19 digits never overflow. */
#define SIZE_DIGITS_MAX 19

static int end_line(struct wr_object_sizes *s, wr_error_t *err) {
  if (s->digits == 0)
    return wr_error_set(err, 0, "unexpected output from git cat-file");
  s->objects++;
  s->largest = WR_MAX(s->largest, s->value);
  /* Saturating: index-pack checked each size, but they are a sandbox's. */
  s->total = s->total + s->value < s->total ? UINT64_MAX : s->total + s->value;
  s->value = 0;
  s->digits = 0;
  return 0;
}

int wr_object_sizes_feed(struct wr_object_sizes *s, const char *data,
                         size_t len, wr_error_t *err) {
  for (size_t i = 0; i < len; i++) {
    char c = data[i];
    if (c == '\n') {
      if (end_line(s, err) < 0)
        return -1;
    } else if (c >= '0' && c <= '9' && s->digits < SIZE_DIGITS_MAX) {
      s->value = s->value * 10 + (uint64_t)(c - '0');
      s->digits++;
    } else {
      return wr_error_set(err, 0, "unexpected output from git cat-file");
    }
  }
  return 0;
}

int wr_object_sizes_end(const struct wr_object_sizes *s, wr_error_t *err) {
  if (s->digits != 0)
    return wr_error_set(err, 0, "unexpected output from git cat-file");
  return 0;
}

static int sizes_out(void *ctx, const char *data, size_t len, wr_error_t *err) {
  return wr_object_sizes_feed(ctx, data, len, err);
}

/* The quarantine's environment without the alternates: git then lists
 * the quarantine's objects only. */
static char **measure_env(const struct wr_quarantine *q) {
  static const char alt[] = "GIT_ALTERNATE_OBJECT_DIRECTORIES=";
  char **env = NULL;

  for (size_t i = 0; q->env[i] != NULL; i++)
    if (!wr_str_has_prefix(q->env[i], alt))
      env = wr_strv_push(env, q->env[i]);
  return env;
}

int wr_quarantine_measure(const struct wr_quarantine *q, uint64_t max_memory,
                          uint64_t deadline_ns, struct wr_object_sizes *s,
                          struct wr_bounded_exit *ex, wr_error_t *err) {
  /* --unordered: in pack order, reading each pack once from start to end. */
  char *argv[] = {"git",
                  "cat-file",
                  "--batch-all-objects",
                  "--unordered",
                  "--batch-check=%(objectsize)",
                  NULL};
  _cleanup_strv_ char **env = measure_env(q);
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .env = env,
                               .stdin_fd = -1,
                               .on_out = sizes_out,
                               .on_out_ctx = s,
                               .errout = &errout,
                               .max_memory = max_memory,
                               .deadline_ns = deadline_ns};

  memset(s, 0, sizeof(*s));
  if (wr_bounded_run(&cmd, ex, err) < 0)
    return wr_error_wrap(err, "measure the pack's objects");
  if (ex->timed_out || ex->out_of_memory)
    return 0; /* the caller names the limit */
  if (ex->status != 0) {
    _cleanup_free_ char *said = wr_cli_said(&errout);
    return wr_error_set(err, 0, "git cat-file failed (exit %d)%s%s", ex->status,
                        said[0] ? ": " : "", said);
  }
  return wr_object_sizes_end(s, err);
}

void wr_quarantine_remove(struct wr_quarantine *q) {
  wr_error_t err = {0};

  if (q->dir != NULL && wr_rm_rf(q->dir, &err) < 0)
    fprintf(stderr, "warren: could not remove the quarantine %s: %s\n", q->dir,
            err.msg);
  wr_strv_free(q->env);
  free(q->dir);
  free(q->objects);
  memset(q, 0, sizeof(*q));
}
