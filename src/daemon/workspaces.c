/*
 * The workspace a client asks for at create, checked. The API must be as
 * safe as the CLI: whoever asks, the daemon refuses what `warren create`
 * refuses, clone mode's "a git repository with a commit" included (a
 * client asking for clone mode on /etc would otherwise get the host's
 * /etc, shadow and all, read-only inside).
 *
 * The directory is named by the client and may be inside another
 * sandbox's workspace, so it is read as a sandbox's files are: on a
 * worker thread, opened with no symlink on the way once its path is
 * resolved, never opening anything but directories and regular files,
 * bounded (src/common/gitrepo.c). What is found there (device, inode,
 * owner) is recorded, so that every later mount can tell it is still the
 * same directory (src/runtime/workspace.c).
 */
#include "daemon/workspaces.h"

#include <sys/stat.h>

/* Whether `path` is `dir` or below it. */
static bool path_within(const char *path, const char *dir) {
  size_t n = strlen(dir);

  while (n > 1 && dir[n - 1] == '/')
    n--;
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int wr_ws_check_request(json_t *ws, struct wr_ws_check *c, wr_error_t *err) {
  struct wr_json_field f[] = {
      {"path", WR_JSON_STRING, &c->path, true, NULL},
      {"mode", WR_JSON_STRING, &c->mode, false, NULL},
  };

  c->mode = "direct";
  if (wr_json_unpack(ws, f, WR_ARRAY_SIZE(f), err) < 0)
    return wr_error_wrap(err, "workspace");
  if (strcmp(c->mode, "direct") != 0 && strcmp(c->mode, "clone") != 0)
    return wr_error_setx(err, EINVAL,
                         "workspace mode must be direct or clone, not `%s`",
                         c->mode);
  if (c->path[0] != '/' || wr_path_check(c->path, err) < 0)
    return wr_error_setx(err, EINVAL,
                         "workspace path must be absolute, not `%s`", c->path);
  return 0;
}

/* The host's machinery is refused: the root, the state root (every
 * sandbox's files) or a directory holding it, /proc, /sys, /dev, /run,
 * /boot. */
static int check_place(const struct wr_ws_check *c, wr_error_t *err) {
  static const char *const refused[] = {"/proc", "/sys", "/dev", "/run",
                                        "/boot"};
  _cleanup_free_ char *state = realpath(c->state_root, NULL);

  if (strcmp(c->real, "/") == 0 ||
      (state != NULL &&
       (path_within(c->real, state) || path_within(state, c->real))))
    return wr_error_setx(err, EINVAL,
                         "workspace `%s` would expose the host or warren's "
                         "state: choose a project directory",
                         c->path);
  for (size_t i = 0; i < WR_ARRAY_SIZE(refused); i++)
    if (path_within(c->real, refused[i]))
      return wr_error_setx(err, EINVAL,
                           "workspace `%s` is in %s: choose a project "
                           "directory",
                           c->path, refused[i]);
  return 0;
}

/* Root inside writes as the owner: in direct mode a root-owned folder
 * would let the sandbox leave setuid-root programs on the host, and in
 * either mode a root-owned folder is the host's (/etc, /root), not a
 * project. */
static int check_owner(const struct wr_ws_check *c, const struct stat *st,
                       wr_error_t *err) {
  if (st->st_uid != 0 && st->st_gid != 0)
    return 0;
  return wr_error_setx(err, EINVAL,
                       "workspace `%s` is owned by root (uid or gid 0): a "
                       "workspace is a user's project, and what the sandbox "
                       "made there would be root's on the host, setuid bits "
                       "included; chown it to a user",
                       c->path);
}

/* Clone mode copies a repository: anything else is refused, as the CLI
 * refuses it. */
static int check_repository(const struct wr_ws_check *c, int fd,
                            wr_error_t *err) {
  _cleanup_free_ char *git_dir = NULL;

  if (strcmp(c->mode, "clone") != 0)
    return 0;
  if (wr_gitrepo_check(fd, c->path, &git_dir, err) < 0) {
    err->code = EINVAL;
    return -1;
  }
  return 0;
}

int wr_ws_check_host(struct wr_ws_check *c, wr_error_t *err) {
  const unsigned flags =
      WR_CONFINED_DIR | WR_CONFINED_NO_SYMLINKS | WR_CONFINED_PATH;
  _cleanup_close_ int fd = -1;
  struct stat st;

  c->real = realpath(c->path, NULL);
  if (c->real == NULL)
    return wr_error_setx(err, EINVAL, "workspace `%s`: %s", c->path,
                         strerror(errno));
  /* Resolved, the path has no symlink left: one now is a swap. */
  fd = wr_open_host_confined(c->real, flags, &st, err);
  if (fd < 0) {
    err->code = EINVAL;
    return wr_error_wrap(err, "workspace `%s`", c->path);
  }
  if (check_place(c, err) < 0 || check_owner(c, &st, err) < 0 ||
      check_repository(c, fd, err) < 0)
    return -1;
  if (wr_workspace_identify(fd, &c->id, err) < 0)
    return wr_error_wrap(err, "workspace `%s`", c->path);
  c->uid = st.st_uid;
  c->gid = st.st_gid;
  return 0;
}

void wr_ws_check_clear(struct wr_ws_check *c) {
  free(c->real);
  c->real = NULL;
}
