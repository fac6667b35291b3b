/*
 * Clone mode, the client's side: the host repository is checked, the
 * sandbox clones it into its own workspace, and the host repository gets a
 * remote `warren-NAME` that git-remote-warren serves.
 *
 * The host never runs git on a repository the sandbox can write, and never
 * runs git as root in a repository that belongs to someone else: the git
 * directory is found by reading files (src/common/gitrepo.c, which the
 * daemon uses too), and the remote is written by
 * `git config --file` run as the repository's owner, with no discovery,
 * no system or global configuration and no hooks. Everything that needs
 * git on the repository's contents runs inside the sandbox.
 */
#include "cli/cli.h"

#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define REFNAME_MAX 1024
/* The most an answer from a sandbox's check may be. */
#define UNFETCHED_MAX (1u << 20)
#define UNFETCHED_LINES_MAX 10000

/* ---- ref names ----------------------------------------------------------- */

/* One component of a ref name: not empty, no leading dot, no ".lock". */
static bool component_valid(const char *s, size_t len) {
  if (len == 0 || s[0] == '.')
    return false;
  return !(len >= 5 && memcmp(s + len - 5, ".lock", 5) == 0);
}

/* The bytes git never allows in a ref name. */
static bool byte_valid(unsigned char c) {
  return c >= 0x20 && c != 0x7f && strchr(" ~^:?*[\\", c) == NULL;
}

/* git check-ref-format, for full names (at least two components). */
bool wr_cli_git_refname_valid(const char *name) {
  size_t len = strlen(name);
  const char *start = name;

  if (len == 0 || len > REFNAME_MAX || strchr(name, '/') == NULL)
    return false;
  if (strstr(name, "..") != NULL || strstr(name, "@{") != NULL ||
      name[len - 1] == '.' || strcmp(name, "@") == 0)
    return false;
  for (const char *p = name;; p++) {
    if (*p == '/' || *p == '\0') {
      if (!component_valid(start, (size_t)(p - start)))
        return false;
      if (*p == '\0')
        return true;
      start = p + 1;
    } else if (!byte_valid((unsigned char)*p)) {
      return false;
    }
  }
}

/* ---- the git directory, read without git --------------------------------- */

/* The working tree at `path`, resolved (the user's own path, symlinks
 * and all), then opened with no symlink on the way, since part of it may
 * be another sandbox's workspace. */
static int open_tree_dir(const char *path, wr_error_t *err) {
  _cleanup_free_ char *top = realpath(path, NULL);

  if (top == NULL)
    return wr_error_set(err, errno, "`%s`", path);
  return wr_open_host_confined(
      top, WR_CONFINED_DIR | WR_CONFINED_NO_SYMLINKS | WR_CONFINED_PATH, NULL,
      err);
}

int wr_cli_clone_git_dir(const char *path, char **git_dir, wr_error_t *err) {
  _cleanup_close_ int top = open_tree_dir(path, err);

  if (top < 0)
    return -1;
  return wr_gitrepo_find(top, path, git_dir, NULL, err);
}

int wr_cli_clone_check(const char *path, char **git_dir, wr_error_t *err) {
  _cleanup_close_ int top = open_tree_dir(path, err);

  if (top < 0)
    return -1;
  return wr_gitrepo_check(top, path, git_dir, err);
}

/* ---- running programs on the host ---------------------------------------- */

/* Between fork and exec: only async-signal-safe calls; a failure sends
 * errno up the error pipe. */
static void child_exec(const struct wr_cli_host_cmd *cmd, int out_fd,
                       int errpipe) {
  int in = cmd->stdin_fd;
  int e;

  if (in < 0)
    in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || dup2(in, 0) < 0 || dup2(out_fd, 1) < 0)
    goto fail;
  if (cmd->cwd != NULL && chdir(cmd->cwd) < 0)
    goto fail;
  if (cmd->as_user &&
      (setgroups(0, NULL) < 0 || setgid(cmd->gid) < 0 || setuid(cmd->uid) < 0))
    goto fail;
  if (cmd->env != NULL)
    execvpe(cmd->argv[0], cmd->argv, cmd->env);
  else
    execvp(cmd->argv[0], cmd->argv);
fail:
  e = errno;
  if (write(errpipe, &e, sizeof(e)) < 0)
    _exit(127);
  _exit(127);
}

/* Read the child's stdout to the end; past max_out it is drained and
 * counted as an overflow. */
static void read_output(int fd, const struct wr_cli_host_cmd *cmd,
                        bool *overflow) {
  char buf[65536];
  ssize_t n;

  while ((n = read(fd, buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    if (cmd->out == NULL)
      continue;
    if (cmd->out->len + (size_t)n > cmd->max_out)
      *overflow = true;
    else
      wr_buf_append(cmd->out, buf, (size_t)n);
  }
}

/* How the child ended, or why it could not start. */
static int reap(pid_t pid, int errpipe, const char *prog, int *status,
                wr_error_t *err) {
  int ws, child_errno = 0;
  ssize_t n;

  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR)
      return wr_error_set(err, errno, "wait for `%s`", prog);
  n = read(errpipe, &child_errno, sizeof(child_errno));
  if (n == (ssize_t)sizeof(child_errno))
    return wr_error_set(err, child_errno, "cannot run `%s`", prog);
  *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  return 0;
}

int wr_cli_host_run(const struct wr_cli_host_cmd *cmd, int *status,
                    wr_error_t *err) {
  int out[2], errp[2];
  bool overflow = false;
  pid_t pid;
  int r;

  if (pipe2(out, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  if (pipe2(errp, O_CLOEXEC) < 0) {
    close(out[0]);
    close(out[1]);
    return wr_error_set(err, errno, "pipe");
  }
  fflush(NULL);
  pid = fork();
  if (pid == 0)
    child_exec(cmd, out[1], errp[1]);
  close(out[1]);
  close(errp[1]);
  if (pid < 0) {
    close(out[0]);
    close(errp[0]);
    return wr_error_set(err, errno, "fork");
  }
  read_output(out[0], cmd, &overflow);
  close(out[0]);
  r = reap(pid, errp[0], cmd->argv[0], status, err);
  close(errp[0]);
  if (r == 0 && overflow)
    return wr_error_set(err, 0, "`%s` printed more than %zu bytes",
                        cmd->argv[0], cmd->max_out);
  return r;
}

/* ---- the host repository's remote ---------------------------------------- */

/*
 * Who runs `git config` on the repository: its owner (the git directory's,
 * else the working tree's) when we are root and that is someone else, so
 * that root never writes where another user could plant a symlink, and
 * the file keeps its owner. No system or global configuration is read,
 * and `/` is the working directory, so no repository is discovered.
 */
static int git_config(const char *top, const char *gd, char *const *args,
                      wr_buf_t *out, int *status, wr_error_t *err) {
  static char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                              "HOME=/",
                              "LC_ALL=C",
                              "GIT_CONFIG_NOSYSTEM=1",
                              "GIT_CONFIG_GLOBAL=/dev/null",
                              NULL};
  _cleanup_free_ char *file = xasprintf("%s/config", gd);
  char *argv[16] = {"git", "config", "--file", file};
  struct wr_cli_host_cmd cmd = {.argv = argv,
                                .env = env,
                                .cwd = "/",
                                .stdin_fd = -1,
                                .out = out,
                                .max_out = 1u << 16};
  struct stat st;
  size_t n = 4;

  for (size_t i = 0; args[i] != NULL && n < WR_ARRAY_SIZE(argv) - 1; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  if (geteuid() == 0 && ((stat(gd, &st) == 0 && st.st_uid != 0) ||
                         (stat(top, &st) == 0 && st.st_uid != 0))) {
    cmd.as_user = true;
    cmd.uid = st.st_uid;
    cmd.gid = st.st_gid;
  }
  return wr_cli_host_run(&cmd, status, err);
}

/* The URL of remote `remote`, or NULL (*url) when it has none. */
static int remote_url(const char *top, const char *gd, const char *remote,
                      char **url, wr_error_t *err) {
  _cleanup_free_ char *key = xasprintf("remote.%s.url", remote);
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  char *args[] = {"--get", key, NULL};
  int status;

  *url = NULL;
  if (git_config(top, gd, args, &out, &status, err) < 0)
    return -1;
  if (status == 1)
    return 0;
  if (status != 0)
    return wr_error_set(err, 0, "git config --get %s failed (exit %d)", key,
                        status);
  while (out.len > 0 && out.data[out.len - 1] == '\n')
    out.data[--out.len] = '\0';
  *url = wr_buf_steal(&out, NULL);
  return 0;
}

/* Run `git config --file ... ARGS`, which must succeed. */
static int git_config_set(const char *top, const char *gd, char *const *args,
                          wr_error_t *err) {
  int status;

  if (git_config(top, gd, args, NULL, &status, err) < 0)
    return -1;
  if (status != 0)
    return wr_error_set(err, 0, "git config %s %s failed (exit %d)", args[0],
                        args[1], status);
  return 0;
}

/* A sandbox name makes a remote name and a ref path component. */
static int remote_name(const char *name, char **remote, wr_error_t *err) {
  _cleanup_free_ char *probe = xasprintf("refs/remotes/warren-%s/x", name);

  if (!wr_cli_git_refname_valid(probe))
    return wr_error_set(err, 0,
                        "sandbox name `%s` cannot name a git remote (no `..`, "
                        "no `.lock` at the end)",
                        name);
  *remote = xasprintf("warren-%s", name);
  return 0;
}

/* An existing remote `warren-NAME` must already be ours. */
static int remote_check(const char *top, const char *gd, const char *name,
                        char **remote, wr_error_t *err) {
  _cleanup_free_ char *url = NULL;
  _cleanup_free_ char *want = xasprintf("warren::%s", name);

  if (remote_name(name, remote, err) < 0 ||
      remote_url(top, gd, *remote, &url, err) < 0)
    return -1;
  if (url != NULL && strcmp(url, want) != 0)
    return wr_error_set(err, 0,
                        "`%s` already has a remote `%s` with URL `%s`: remove "
                        "it (git remote remove %s) or choose another name",
                        top, *remote, url, *remote);
  return 0;
}

/* remote.warren-NAME.url = warren::NAME, and a fetch refspec of its own. */
static int remote_add(const char *top, const char *gd, const char *name,
                      wr_error_t *err) {
  _cleanup_free_ char *remote = NULL;
  _cleanup_free_ char *want = xasprintf("warren::%s", name);
  _cleanup_free_ char *url_key = NULL;
  _cleanup_free_ char *fetch_key = NULL;
  _cleanup_free_ char *refspec = NULL;

  if (remote_check(top, gd, name, &remote, err) < 0)
    return -1;
  url_key = xasprintf("remote.%s.url", remote);
  fetch_key = xasprintf("remote.%s.fetch", remote);
  refspec = xasprintf("+refs/heads/*:refs/remotes/%s/*", remote);
  {
    char *set_url[] = {url_key, want, NULL};
    char *set_fetch[] = {"--replace-all", fetch_key, refspec, NULL};
    if (git_config_set(top, gd, set_url, err) < 0 ||
        git_config_set(top, gd, set_fetch, err) < 0)
      return wr_error_wrap(err, "add remote `%s` to `%s`", remote, top);
  }
  return 0;
}

int wr_cli_clone_remote_remove(const char *host_path, const char *name,
                               bool *removed, wr_error_t *err) {
  _cleanup_free_ char *gd = NULL;
  _cleanup_free_ char *top = NULL;
  _cleanup_free_ char *remote = NULL;
  _cleanup_free_ char *url = NULL;
  _cleanup_free_ char *want = xasprintf("warren::%s", name);
  _cleanup_free_ char *section = NULL;

  *removed = false;
  if (wr_cli_clone_git_dir(host_path, &gd, err) < 0 ||
      remote_name(name, &remote, err) < 0)
    return -1;
  top = realpath(host_path, NULL);
  if (top == NULL)
    return wr_error_set(err, errno, "`%s`", host_path);
  if (remote_url(top, gd, remote, &url, err) < 0)
    return -1;
  if (url == NULL || strcmp(url, want) != 0)
    return 0;
  section = xasprintf("remote.%s", remote);
  {
    char *args[] = {"--remove-section", section, NULL};
    if (git_config_set(top, gd, args, err) < 0)
      return -1;
  }
  *removed = true;
  return 0;
}

/* ---- the sandbox's side -------------------------------------------------- */

void wr_cli_clone_info_free(struct wr_cli_clone_info *i) {
  free(i->state);
  free(i->host_path);
  free(i->mount);
  free(i->origin);
  memset(i, 0, sizeof(*i));
}

/* A path field of the workspace, or its default. */
static char *ws_field(const json_t *ws, const char *key, const char *def) {
  const char *v = wr_cli_jstr(ws, key);

  return xstrdup(v[0] == '/' ? v : def);
}

int wr_cli_clone_info(const struct wr_cli_ctx *ctx, const char *name,
                      struct wr_cli_clone_info *info, bool *clone,
                      wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, NULL);
  _cleanup_json_ json_t *sb = NULL;
  const json_t *ws;

  memset(info, 0, sizeof(*info));
  *clone = false;
  if (wr_cli_call(ctx, "GET", path, NULL, &sb, NULL, err) < 0)
    return -1;
  ws = json_object_get(sb, "workspace");
  if (strcmp(wr_cli_jstr(ws, "mode"), "clone") != 0)
    return 0;
  *clone = true;
  info->state = xstrdup(wr_cli_jstr(sb, "state"));
  info->host_path = xstrdup(wr_cli_jstr(ws, "path"));
  info->mount = ws_field(ws, "mount", "/workspace");
  info->origin = ws_field(ws, "origin", "/origin");
  return 0;
}

/*
 * The clone, inside. `--no-local` copies the objects through a pack, so
 * the clone shares no file with /origin (no hard links, no alternates);
 * hooks come from git's template (only inactive samples); untracked and
 * ignored files are not in the repository, so they are not copied. Every
 * branch of the original becomes a local branch tracking it. /origin may
 * belong to another uid inside, hence safe.directory: in the environment
 * (WR_CLI_GIT_ENV_SH), and on upload-pack's command line, since git starts
 * it with a clean environment; that command stays in the clone's config,
 * so that `git fetch origin` works there later too.
 */
static const char setup_script[] = WR_CLI_GIT_ENV_SH
    "set -eu\n"
    "o=$1 w=$2\n"
    "up=\"git -c safe.directory=* upload-pack\"\n"
    "git -C \"$o\" rev-parse --git-dir >/dev/null 2>&1 || exit 3\n"
    "[ -n \"$(git -C \"$o\" for-each-ref --count=1 --format=x refs/heads/)\" ]"
    " || exit 4\n"
    "git clone -q --no-local --upload-pack=\"$up\" -- \"$o\" \"$w\"\n"
    "cd \"$w\"\n"
    "git config remote.origin.uploadpack \"$up\"\n"
    "git for-each-ref --format='%(refname:lstrip=3)' refs/remotes/origin/ |\n"
    "while IFS= read -r b; do\n"
    "  [ \"$b\" = HEAD ] && continue\n"
    "  git show-ref -q --verify \"refs/heads/$b\" ||\n"
    "    git branch -q --track \"$b\" \"origin/$b\"\n"
    "done\n";

static int clone_inside(const struct wr_cli_ctx *ctx, const char *name,
                        const char *host_path,
                        const struct wr_cli_clone_info *info, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  char *argv[] = {"sh",        "-c", (char *)setup_script, "sh", info->origin,
                  info->mount, NULL};
  struct wr_cli_run_in r = {.argv = argv, .cwd = "/", .errout = &errout};
  _cleanup_free_ char *said = NULL;

  if (wr_cli_run_in(ctx, name, &r, err) < 0)
    return wr_error_wrap(err, "clone `%s` in sandbox `%s`", host_path, name);
  if (r.exit_code == 0)
    return 0;
  if (r.exit_code == 3)
    return wr_error_set(err, 0,
                        "`%s` is not a git repository inside the sandbox "
                        "(at %s): clone mode needs one with a commit",
                        host_path, info->origin);
  if (r.exit_code == 4)
    return wr_error_set(err, 0,
                        "`%s` has no commits: commit the starting code first",
                        host_path);
  said = wr_cli_said(&errout);
  return wr_error_set(err, 0,
                      "cloning `%s` in sandbox `%s` failed (exit %d)%s%s",
                      host_path, name, r.exit_code, said[0] ? ": " : "", said);
}

int wr_cli_clone_setup(const struct wr_cli_ctx *ctx, const char *name,
                       const char *host_path, const char *git_dir,
                       wr_error_t *err) {
  struct wr_cli_clone_info info _cleanup_(wr_cli_clone_info_free) = {0};
  _cleanup_free_ char *top = realpath(host_path, NULL);
  _cleanup_free_ char *remote = NULL;
  bool clone;

  if (top == NULL)
    return wr_error_set(err, errno, "`%s`", host_path);
  /* A clash is found before the clone, which may take a while. */
  if (remote_check(top, git_dir, name, &remote, err) < 0 ||
      wr_cli_clone_info(ctx, name, &info, &clone, err) < 0)
    return -1;
  if (!clone)
    return wr_error_set(err, 0, "sandbox `%s` is not in clone mode", name);
  if (clone_inside(ctx, name, host_path, &info, err) < 0)
    return -1;
  return remote_add(top, git_dir, name, err);
}

/* ---- commits that were never fetched ------------------------------------- */

void wr_cli_unfetched_free(struct wr_cli_unfetched *u, size_t n) {
  for (size_t i = 0; u != NULL && i < n; i++)
    free(u[i].branch);
  free(u);
}

/* One line "COUNT BRANCH". */
static int parse_unfetched_line(const char *line, struct wr_cli_unfetched *u,
                                wr_error_t *err) {
  const char *sp = strchr(line, ' ');
  _cleanup_free_ char *count = NULL;
  _cleanup_free_ char *ref = NULL;

  if (sp == NULL)
    return wr_error_set(err, 0, "no count");
  count = xstrndup(line, (size_t)(sp - line));
  ref = xasprintf("refs/heads/%s", sp + 1);
  if (wr_parse_u64(count, 1, UINT64_MAX, &u->commits, err) < 0)
    return -1;
  if (!wr_cli_git_refname_valid(ref))
    return wr_error_set(err, 0, "not a branch name");
  u->branch = xstrdup(sp + 1);
  return 0;
}

int wr_cli_clone_parse_unfetched(const char *text, size_t len,
                                 struct wr_cli_unfetched **out, size_t *n,
                                 wr_error_t *err) {
  _cleanup_free_ char *copy = xstrndup(text, len);
  struct wr_cli_unfetched *v;
  size_t count = 0, lines = 1;
  char *save = NULL;

  *out = NULL;
  *n = 0;
  if (strlen(copy) != len)
    return wr_error_set(err, 0, "unexpected answer from the sandbox: a NUL");
  for (const char *p = copy; (p = strchr(p, '\n')) != NULL; p++)
    lines++;
  if (lines > UNFETCHED_LINES_MAX)
    return wr_error_set(err, 0,
                        "unexpected answer from the sandbox: too many lines");
  v = xcalloc(lines, sizeof(*v));
  for (char *line = strtok_r(copy, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    if (parse_unfetched_line(line, &v[count], err) < 0) {
      wr_cli_unfetched_free(v, count);
      return wr_error_wrap(err, "unexpected answer from the sandbox");
    }
    count++;
  }
  *out = v;
  *n = count;
  return 0;
}

/* For each branch: the commits reachable from it and from no mark. A
 * workspace that is not (or no longer) a repository has nothing to lose
 * that git could tell. */
static const char unfetched_script[] = WR_CLI_GIT_ENV_SH
    "cd \"$1\" 2>/dev/null || exit 0\n"
    "git rev-parse --git-dir >/dev/null 2>&1 || exit 0\n"
    "git for-each-ref --format='%(refname)' refs/heads/ |\n"
    "while IFS= read -r r; do\n"
    "  n=$(git rev-list --count \"$r\" --not --remotes=origin "
    "--glob='refs/warren/fetched/*' --)\n"
    "  [ \"$n\" = 0 ] || printf '%s %s\\n' \"$n\" \"${r#refs/heads/}\"\n"
    "done\n";

int wr_cli_clone_unfetched(const struct wr_cli_ctx *ctx, const char *name,
                           const char *mount, struct wr_cli_unfetched **out,
                           size_t *n, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t text = {0};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  char *argv[] = {"sh", "-c",          (char *)unfetched_script,
                  "sh", (char *)mount, NULL};
  struct wr_cli_run_in r = {.argv = argv,
                            .cwd = "/",
                            .out = &text,
                            .max_out = UNFETCHED_MAX,
                            .errout = &errout};

  if (wr_cli_run_in(ctx, name, &r, err) < 0)
    return -1;
  if (r.exit_code != 0) {
    _cleanup_free_ char *said = wr_cli_said(&errout);
    return wr_error_set(err, 0, "the check failed (exit %d)%s%s", r.exit_code,
                        said[0] ? ": " : "", said);
  }
  return wr_cli_clone_parse_unfetched(text.data ? text.data : "", text.len, out,
                                      n, err);
}
