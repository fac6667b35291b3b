/*
 * A project's git mirror on the host: a bare repository under
 * ROOT/projects that only warren writes. Everything here is git run on
 * the host, bounded in memory and time (wr_bounded_run), with an
 * environment of our own: no user or system configuration, no hooks, no
 * prompt. Nothing of a sandbox runs here; its commits arrive through
 * git-remote-warren (wr_mirror_intake), which treats them as hostile.
 */
#include "projects/projects.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "gitremote/gitremote.h"

#define GIT_MAX_OUT (16u << 20)
#define GIT_TIMEOUT_MS (300ull * 1000)
/* Host git's memory: as a fetch's (gitremote.h) for a mirror's work. */
#define GIT_MEMORY (1ull << 30)
/* The most diff text a reply carries. */
#define DIFF_MAX (4u << 20)

/* Append s (owned) to v. */
static char **push(char **v, char *s) {
  v = wr_strv_push(v, s);
  free(s);
  return v;
}

/* Our environment for host git: PATH finds git-remote-warren first,
 * HOME is the projects directory (no one's ~/.gitconfig), and the
 * configuration that matters is set here, where no repository can
 * override it. */
static char **git_environment(const struct wr_git_run *r) {
  const struct wr_projects_env *env = r->env;
  char **v = NULL;

  v = push(v, xasprintf("PATH=%s:/usr/local/bin:/usr/bin:/bin", env->bin_dir));
  v = push(v, xasprintf("HOME=%s/projects", env->root));
  v = push(v, xstrdup("LC_ALL=C"));
  v = push(v, xstrdup("GIT_CONFIG_NOSYSTEM=1"));
  v = push(v, xstrdup("GIT_TERMINAL_PROMPT=0"));
  v = push(v, xstrdup("GIT_ASKPASS=/bin/false"));
  v = push(v, xasprintf("WARREN_HOST=%s", env->api.host));
  if (env->api.api_key != NULL)
    v = push(v, xasprintf("WARREN_API_KEY=%s", env->api.api_key));
  if (r->git_dir != NULL)
    v = push(v, xasprintf("GIT_DIR=%s", r->git_dir));
  for (size_t i = 0; r->extra_env != NULL && r->extra_env[i] != NULL; i++)
    v = push(v, xstrdup(r->extra_env[i]));
  return v;
}

/* "git fetch ..." for a message. */
static char *command_text(const char *const *argv) {
  _cleanup_(wr_buf_free) wr_buf_t b = {0};

  wr_buf_puts(&b, "git");
  for (size_t i = 0; argv[i] != NULL && i < 3; i++) {
    wr_buf_puts(&b, " ");
    wr_buf_puts(&b, argv[i]);
  }
  return wr_buf_steal(&b, NULL);
}

/* git's stderr, its last line or two, for a message. */
static char *last_words(const wr_buf_t *errout) {
  _cleanup_(wr_buf_free) wr_buf_t safe = {0};
  size_t start = errout->len > 400 ? errout->len - 400 : 0;

  if (errout->data != NULL)
    wr_cli_defuse(errout->data + start, errout->len - start, &safe);
  while (safe.len > 0 && safe.data[safe.len - 1] == '\n')
    safe.data[--safe.len] = '\0';
  return wr_buf_steal(&safe, NULL);
}

int wr_git(const struct wr_git_run *r, const char *const *argv,
           wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  _cleanup_strv_ char **env = git_environment(r);
  _cleanup_strv_ char **full = NULL;
  _cleanup_free_ char *what = command_text(argv);
  _cleanup_free_ char *said = NULL;
  struct wr_bounded_exit ex = {0};
  uint64_t timeout = r->timeout_ms ? r->timeout_ms : GIT_TIMEOUT_MS;

  full = push(full, xstrdup("git"));
  for (size_t i = 0; argv[i] != NULL; i++)
    full = push(full, xstrdup(argv[i]));
  struct wr_bounded_cmd cmd = {
      .argv = full,
      .env = env,
      .stdin_fd = r->stdin_fd,
      .out = r->out,
      .max_out = r->max_out ? r->max_out : GIT_MAX_OUT,
      .errout = &errout,
      .max_memory = GIT_MEMORY,
      .deadline_ns = wr_mono_ns() + timeout * 1000000ull,
  };
  wr_buf_t discard = {0};
  if (cmd.out == NULL)
    cmd.out = &discard;
  if (wr_bounded_run(&cmd, &ex, err) < 0) {
    wr_buf_free(&discard);
    return wr_error_wrap(err, "%s", what);
  }
  wr_buf_free(&discard);
  if (ex.timed_out)
    return wr_error_set(err, ETIMEDOUT, "%s took longer than %llu s", what,
                        (unsigned long long)(timeout / 1000));
  if (ex.out_of_memory)
    return wr_error_set(err, ENOMEM, "%s ran out of memory", what);
  if (ex.status != 0) {
    said = last_words(&errout);
    return wr_error_setx(err, EIO, "%s failed (exit %d)%s%s", what, ex.status,
                         said[0] ? ": " : "", said);
  }
  return 0;
}

/* The first line of out, trimmed, or NULL when empty (caller frees). */
static char *first_line(const wr_buf_t *out) {
  size_t n;

  if (out->data == NULL || out->len == 0)
    return NULL;
  n = strcspn(out->data, "\n");
  return n ? xstrndup(out->data, n) : NULL;
}

int wr_mirror_init(const struct wr_projects_env *env, const char *path,
                   wr_error_t *err) {
  _cleanup_free_ char *dir = xasprintf("%s/projects", env->root);
  struct wr_git_run r = {.env = env, .git_dir = path, .stdin_fd = -1};
  const char *const init[] = {"init",   "-q",
                              "--bare", "--initial-branch=" WR_PROJECT_BRANCH,
                              path,     NULL};
  /* No gc that could drop what a snapshot's clone still refers to, and
   * every object taken in checked. */
  const char *const settings[][3] = {
      {"config", "gc.auto", "0"},
      {"config", "transfer.fsckObjects", "true"},
      {"config", "core.hooksPath", "/dev/null"},
  };
  struct stat st;

  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "make `%s`", dir);
  if (lstat(path, &st) == 0)
    return wr_error_setx(err, EEXIST, "a mirror `%s` is already there", path);
  r.git_dir = NULL;
  if (wr_git(&r, init, err) < 0)
    return -1;
  r.git_dir = path;
  for (size_t i = 0; i < WR_ARRAY_SIZE(settings); i++) {
    const char *const argv[] = {settings[i][0], settings[i][1], settings[i][2],
                                NULL};
    if (wr_git(&r, argv, err) < 0)
      return -1;
  }
  return 0;
}

int wr_mirror_head(const struct wr_projects_env *env, const char *path,
                   char **rev, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  struct wr_git_run r = {
      .env = env, .git_dir = path, .out = &out, .stdin_fd = -1};
  const char *const has[] = {"for-each-ref", "--count=1", "--format=x",
                             "refs/heads/", NULL};
  const char *const head[] = {"rev-parse", "-q", "--verify", "HEAD^{commit}",
                              NULL};

  *rev = NULL;
  if (wr_git(&r, has, err) < 0)
    return -1;
  if (out.len == 0)
    return 0;
  wr_buf_reset(&out);
  if (wr_git(&r, head, err) < 0)
    return -1;
  *rev = first_line(&out);
  return 0;
}

int wr_mirror_count(const struct wr_projects_env *env, const char *path,
                    const char *rev, uint64_t *count, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_free_ char *line = NULL;
  struct wr_git_run r = {
      .env = env, .git_dir = path, .out = &out, .stdin_fd = -1};
  const char *const argv[] = {"rev-list", "--count", rev, NULL};

  if (wr_git(&r, argv, err) < 0)
    return -1;
  line = first_line(&out);
  return wr_parse_u64(line ? line : "", 0, UINT64_MAX, count, err);
}

int wr_mirror_bundle(const struct wr_projects_env *env, const char *path,
                     const char *dir, char **file, wr_error_t *err) {
  _cleanup_free_ char *f = xasprintf("%s/bundle-XXXXXX", dir);
  _cleanup_close_ int fd = mkstemp(f);
  struct wr_git_run r = {.env = env, .git_dir = path, .stdin_fd = -1};
  const char *const argv[] = {"bundle",     "create", "-q", f,
                              "--branches", "--tags", NULL};

  if (fd < 0)
    return wr_error_set(err, errno, "make a bundle file in `%s`", dir);
  if (wr_git(&r, argv, err) < 0) {
    unlink(f);
    return -1;
  }
  *file = steal_ptr(&f);
  return 0;
}

int wr_mirror_intake(const struct wr_projects_env *env, const char *path,
                     const char *sandbox, wr_error_t *err) {
  _cleanup_free_ char *url = xasprintf("warren::%s", sandbox);
  struct wr_git_run r = {.env = env, .git_dir = path, .stdin_fd = -1};
  /* No '+': a sandbox that rewrote history is refused, not obeyed. Not
   * quiet: a refusal's line ("! [rejected] ... (non-fast-forward)") is
   * the message. */
  const char *const argv[] = {"fetch",
                              "--no-write-fetch-head",
                              url,
                              "refs/heads/*:refs/heads/*",
                              "refs/tags/*:refs/tags/*",
                              NULL};

  if (wr_git(&r, argv, err) < 0)
    return wr_error_wrap(err, "take the commits of sandbox `%s`", sandbox);
  return 0;
}

/* The secret's value, trimmed as `warren secret set` trims it. */
static int read_secret(const struct wr_projects_env *env, const char *secret,
                       char **value, wr_error_t *err) {
  _cleanup_free_ char *file = xasprintf("%s/secrets/%s", env->root, secret);
  _cleanup_free_ char *data = NULL;
  size_t len = 0;

  if (!wr_store_secret_name_valid(secret))
    return wr_error_setx(err, EINVAL, "`%s` is not a secret's name", secret);
  if (wr_read_file(file, 64 << 10, &data, &len, err) < 0)
    return wr_error_wrap(err, "secret `%s`", secret);
  wr_cli_secret_trim(data, &len);
  *value = xstrndup(data, len);
  explicit_bzero(data, len);
  return 0;
}

int wr_mirror_push(const struct wr_projects_env *env, const char *path,
                   const char *url, const char *secret, wr_error_t *err) {
  _cleanup_free_ char *value = NULL;
  _cleanup_free_ char *userpass = NULL;
  _cleanup_strv_ char **extra = NULL;
  _cleanup_free_ char *b64 = NULL;
  struct wr_git_run r = {.env = env, .git_dir = path, .stdin_fd = -1};
  const char *const argv[] = {"push",
                              "-q",
                              "--porcelain",
                              url,
                              "refs/heads/*:refs/heads/*",
                              "refs/tags/*:refs/tags/*",
                              NULL};

  if (secret != NULL) {
    if (read_secret(env, secret, &value, err) < 0)
      return -1;
    userpass = strchr(value, ':') ? xstrdup(value) : xasprintf("git:%s", value);
    b64 = wr_base64_encode(userpass, strlen(userpass));
    extra = push(extra, xstrdup("GIT_CONFIG_COUNT=1"));
    extra = push(extra, xstrdup("GIT_CONFIG_KEY_0=http.extraHeader"));
    extra = push(extra,
                 xasprintf("GIT_CONFIG_VALUE_0=Authorization: Basic %s", b64));
    explicit_bzero(userpass, strlen(userpass));
    explicit_bzero(value, strlen(value));
  }
  r.extra_env = extra;
  if (wr_git(&r, argv, err) < 0)
    return wr_error_wrap(err, "push to `%s`", url);
  return 0;
}

int wr_mirror_log_parse(const char *data, size_t len, uint64_t total,
                        uint64_t limit, json_t **out, wr_error_t *err) {
  _cleanup_json_ json_t *list = json_array();
  uint64_t version = total;
  size_t pos = 0;

  /* -z and %x00: each commit is five fields, each ended by a NUL (the
   * last by the terminator -z makes of a --format's newline). */
  while (pos < len && (limit == 0 || json_array_size(list) < limit)) {
    const char *f[5];
    for (int i = 0; i < 5; i++) {
      const char *nul = memchr(data + pos, '\0', len - pos);
      if (nul == NULL)
        return wr_error_setx(err, EPROTO, "git log: a commit is cut short");
      f[i] = data + pos;
      pos = (size_t)(nul - data) + 1;
    }
    if (strlen(f[0]) < 40 || strspn(f[0], "0123456789abcdef") != strlen(f[0]))
      return wr_error_setx(err, EPROTO, "git log: `%.80s` is no commit", f[0]);
    if (version == 0)
      return wr_error_setx(err, EPROTO, "git log: more commits than counted");
    /* Names and subjects are the sandbox's: any bytes git allows. */
    json_array_append_new(list,
                          json_pack("{s:I, s:s, s:o, s:o, s:I, s:o}", "version",
                                    (json_int_t)version--, "commit", f[0],
                                    "author", wr_json_string_lossy(f[1]),
                                    "email", wr_json_string_lossy(f[2]), "time",
                                    (json_int_t)strtoll(f[3], NULL, 10),
                                    "subject", wr_json_string_lossy(f[4])));
  }
  *out = steal_ptr(&list);
  return 0;
}

int wr_mirror_log(const struct wr_projects_env *env, const char *path,
                  uint64_t limit, json_t **out, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t o = {0};
  _cleanup_free_ char *head = NULL;
  struct wr_git_run r = {
      .env = env, .git_dir = path, .out = &o, .stdin_fd = -1};
  const char *const argv[] = {
      "log", "-z", "--format=%H%x00%an%x00%ae%x00%at%x00%s", "HEAD", NULL};
  uint64_t total = 0;

  if (wr_mirror_head(env, path, &head, err) < 0)
    return -1;
  if (head == NULL) {
    *out = json_array();
    return 0;
  }
  if (wr_mirror_count(env, path, head, &total, err) < 0 ||
      wr_git(&r, argv, err) < 0)
    return -1;
  return wr_mirror_log_parse(o.data, o.len, total, limit, out, err);
}

/* "3" or "v3": a version number. */
static bool version_number(const char *rev, uint64_t *n) {
  const char *d = rev[0] == 'v' ? rev + 1 : rev;

  if (d[0] == '\0' || strspn(d, "0123456789") != strlen(d) || strlen(d) > 9)
    return false;
  *n = strtoull(d, NULL, 10);
  return true;
}

int wr_mirror_resolve(const struct wr_projects_env *env, const char *path,
                      const char *rev, char **commit, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_free_ char *head = NULL;
  _cleanup_free_ char *spec = NULL;
  struct wr_git_run r = {
      .env = env, .git_dir = path, .out = &out, .stdin_fd = -1};
  uint64_t n, total;

  if (wr_mirror_head(env, path, &head, err) < 0)
    return -1;
  if (head == NULL)
    return wr_error_setx(err, ENOENT, "the project has no version yet");
  if (version_number(rev, &n)) {
    if (wr_mirror_count(env, path, head, &total, err) < 0)
      return -1;
    if (n < 1 || n > total)
      return wr_error_setx(err, ENOENT,
                           "no version %llu: the project has versions 1 to "
                           "%llu",
                           (unsigned long long)n, (unsigned long long)total);
    spec = xasprintf("HEAD~%llu^{commit}", (unsigned long long)(total - n));
  } else {
    if (rev[0] == '-' || strlen(rev) > 200)
      return wr_error_setx(err, EINVAL, "`%s` is not a revision", rev);
    spec = xasprintf("%s^{commit}", rev);
  }
  const char *const argv[] = {"rev-parse",        "-q", "--verify",
                              "--end-of-options", spec, NULL};
  if (wr_git(&r, argv, NULL) < 0 || (*commit = first_line(&out)) == NULL)
    return wr_error_setx(err, ENOENT, "no revision `%s` in the project", rev);
  return 0;
}

int wr_mirror_names_parse(const char *data, size_t len, json_t **out,
                          wr_error_t *err) {
  _cleanup_json_ json_t *files = json_array();
  size_t pos = 0;

  /* --name-status -z: STATUS NUL PATH NUL, and a second path for a
   * rename or copy (status R... or C...). */
  while (pos < len) {
    const char *status = data + pos, *nul = memchr(status, '\0', len - pos);
    const char *path, *end;
    if (nul == NULL || nul == status)
      return wr_error_setx(err, EPROTO, "git diff: a status is cut short");
    path = nul + 1;
    if (path >= data + len ||
        (end = memchr(path, '\0', (size_t)(data + len - path))) == NULL)
      return wr_error_setx(err, EPROTO, "git diff: a path is cut short");
    pos = (size_t)(end - data) + 1;
    if ((status[0] == 'R' || status[0] == 'C') && pos < len) {
      const char *to = data + pos;
      const char *e2 = memchr(to, '\0', len - pos);
      if (e2 == NULL)
        return wr_error_setx(err, EPROTO, "git diff: a path is cut short");
      pos = (size_t)(e2 - data) + 1;
      path = to;
    }
    json_array_append_new(files, json_pack("{s:o, s:o}", "status",
                                           wr_json_string_lossy(status), "path",
                                           wr_json_string_lossy(path)));
  }
  *out = steal_ptr(&files);
  return 0;
}

int wr_mirror_diff(const struct wr_projects_env *env, const char *path,
                   const char *a, const char *b, json_t **out,
                   wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t patch = {0};
  _cleanup_(wr_buf_free) wr_buf_t names = {0};
  _cleanup_json_ json_t *files = NULL;
  struct wr_git_run r = {.env = env,
                         .git_dir = path,
                         .out = &names,
                         .stdin_fd = -1,
                         .max_out = DIFF_MAX};
  const char *const stat[] = {"diff", "--name-status", "-z", a, b, NULL};
  const char *const text[] = {"diff", "--no-color", "--no-ext-diff", a,
                              b,      NULL};
  bool truncated = false;

  if (wr_git(&r, stat, err) < 0 ||
      wr_mirror_names_parse(names.data, names.len, &files, err) < 0)
    return -1;
  r.out = &patch;
  r.max_out = DIFF_MAX;
  if (wr_git(&r, text, err) < 0) {
    if (err->code != EIO)
      return -1;
    truncated = true; /* more than DIFF_MAX: the files list still says */
  }
  wr_buf_append(&patch, "", 1);
  *out = json_pack("{s:s, s:s, s:O, s:o, s:b}", "from", a, "to", b, "files",
                   files, "patch", wr_json_string_lossy(patch.data),
                   "truncated", truncated);
  return 0;
}

int wr_mirror_copy(const struct wr_projects_env *env, const char *src,
                   const char *dst, wr_error_t *err) {
  struct wr_git_run r = {.env = env, .git_dir = dst, .stdin_fd = -1};
  const char *const fetch[] = {"fetch",
                               "-q",
                               "--no-write-fetch-head",
                               src,
                               "refs/heads/*:refs/heads/*",
                               "refs/tags/*:refs/tags/*",
                               NULL};

  if (wr_mirror_init(env, dst, err) < 0)
    return -1;
  if (wr_git(&r, fetch, err) < 0)
    return -1;
  return 0;
}
