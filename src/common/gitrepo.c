/*
 * A git repository recognised on disk by reading its files, never by
 * running git: for clone mode, both in the CLI (to say early what is
 * wrong) and in the daemon (which must refuse what the CLI would, since
 * any API client can ask). See gitrepo.h.
 *
 * The directory may be inside another sandbox's workspace, so everything
 * in it is read the way files of a sandbox are (wr_open_confined): the
 * .git file, refs and packed-refs are opened only if they are regular
 * files, nothing is followed out of the working tree (RESOLVE_BENEATH),
 * and what is read or walked is bounded.
 */
#include "common/common.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#define GITFILE_MAX 4096
/* Bounds on the walk of refs/heads when looking for a branch. */
#define REFS_DEPTH_MAX 32
#define REFS_ENTRIES_MAX 100000
/* Bytes of packed-refs read when looking for a branch (branches sort
 * before tags, so one is found early in any real file). */
#define PACKED_REFS_MAX (64u << 20)

static int not_a_repository(const char *name, wr_error_t *err) {
  return wr_error_setx(err, EINVAL,
                       "`%s` is not a git repository: clone mode needs one "
                       "with a commit (git init && git add -A && git commit)",
                       name);
}

static int outside(const char *name, const char *gd, wr_error_t *err) {
  return wr_error_setx(err, EINVAL,
                       "the git directory of `%s` is outside it (`%s`; a "
                       "submodule or a separate git dir): clone mode needs "
                       "a repository whose .git is inside it",
                       name, gd);
}

/* The canonical path of what an fd names. */
static char *fd_path(int fd) {
  char proc[64], buf[PATH_MAX];
  ssize_t n;

  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  n = readlink(proc, buf, sizeof(buf) - 1);
  if (n < 0)
    return NULL;
  buf[n] = '\0';
  return xstrdup(buf);
}

static bool is_kind_at(int dir, const char *name, mode_t kind) {
  struct stat st;

  return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         (st.st_mode & S_IFMT) == kind;
}

/* "gitdir: DIR" of a .git file, as a path relative to the tree. An
 * absolute DIR must name a place below the tree (`top_path`). */
static int gitfile_target(int top, const char *name, const char *top_path,
                          char **rel, wr_error_t *err) {
  _cleanup_free_ char *text = NULL;
  size_t len = 0, n = strlen(top_path);
  char *dir;

  if (wr_read_in_root(top, "in the working tree", ".git", GITFILE_MAX, &text,
                      &len, err) < 0)
    return -1;
  if (len < 8 || memcmp(text, "gitdir: ", 8) != 0 || memchr(text, 0, len))
    return wr_error_setx(err, EINVAL,
                         "`%s/.git` is neither a directory nor a gitdir file",
                         name);
  while (len > 8 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
    text[--len] = '\0';
  dir = text + 8;
  if (*dir == '\0')
    return wr_error_setx(err, EINVAL, "`%s/.git` names no git directory", name);
  if (dir[0] != '/') {
    *rel = xstrdup(dir);
    return 0;
  }
  if (strcmp(top_path, "/") == 0)
    n = 0;
  if (strncmp(dir, top_path, n) != 0 || dir[n] != '/' || dir[n + 1] == '\0')
    return outside(name, dir, err);
  *rel = xstrdup(dir + n + 1);
  return 0;
}

/* The git directory, as an O_PATH fd, from the tree's .git (a directory,
 * a symlink to one inside the tree, or a gitdir file). */
static int open_git_dir(int top, const char *name, wr_error_t *err) {
  _cleanup_free_ char *top_path = fd_path(top), *rel = NULL;
  struct stat st;
  wr_error_t oerr;
  int fd;

  if (top_path == NULL)
    return wr_error_set(err, errno, "`%s`", name);
  if (fstatat(top, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? not_a_repository(name, err)
                           : wr_error_set(err, errno, "`%s/.git`", name);
  if (S_ISREG(st.st_mode) && gitfile_target(top, name, top_path, &rel, err) < 0)
    return -1;
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
    return wr_error_setx(err, EINVAL,
                         "`%s/.git` is %s: %s is not a git "
                         "repository",
                         name, wr_file_kind(st.st_mode), name);
  /* A symlink on the way is followed, but never out of the tree. */
  fd = wr_open_confined(
      top, "in the working tree", rel ? rel : ".git/.",
      WR_CONFINED_DIR | WR_CONFINED_BENEATH | WR_CONFINED_PATH, NULL, &oerr);
  if (fd >= 0)
    return fd;
  if (oerr.code == EXDEV)
    return outside(name, rel ? rel : ".git", err);
  if (rel != NULL)
    return wr_error_setx(err, oerr.code, "`%s/.git` names `%s`: %s", name, rel,
                         oerr.msg);
  *err = oerr;
  return -1;
}

/* What `git init` makes; a linked worktree shares another's objects. */
static int check_git_dir(int gd, const char *name, wr_error_t *err) {
  if (is_kind_at(gd, "commondir", S_IFREG))
    return wr_error_setx(err, EINVAL,
                         "`%s` is a linked worktree (git worktree): clone "
                         "mode needs the repository's main working tree",
                         name);
  if (!is_kind_at(gd, "HEAD", S_IFREG) || !is_kind_at(gd, "objects", S_IFDIR) ||
      !is_kind_at(gd, "refs", S_IFDIR) || !is_kind_at(gd, "config", S_IFREG))
    return not_a_repository(name, err);
  return 0;
}

int wr_gitrepo_find(int top, const char *name, char **git_dir, int *gd_out,
                    wr_error_t *err) {
  _cleanup_close_ int gd = open_git_dir(top, name, err);

  if (gd < 0 || check_git_dir(gd, name, err) < 0)
    return -1;
  *git_dir = fd_path(gd);
  if (*git_dir == NULL)
    return wr_error_set(err, errno, "the git directory of `%s`", name);
  if (gd_out != NULL)
    *gd_out = steal_fd(&gd);
  return 0;
}

/* A regular file (a loose ref) anywhere below dir, bounded in depth and
 * entries; dir is consumed. */
static bool has_file_below(int dirfd, int depth, size_t *entries) {
  struct dirent *e;
  bool found = false;
  DIR *d;

  if (dirfd < 0 || depth > REFS_DEPTH_MAX || (d = fdopendir(dirfd)) == NULL) {
    if (dirfd >= 0)
      close(dirfd);
    return false;
  }
  while (!found && (e = readdir(d)) != NULL && ++*entries < REFS_ENTRIES_MAX) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (is_kind_at(dirfd, e->d_name, S_IFREG))
      found = true;
    else if (is_kind_at(dirfd, e->d_name, S_IFDIR))
      found = has_file_below(
          openat(dirfd, e->d_name,
                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
          depth + 1, entries);
  }
  closedir(d);
  return found;
}

/* A "<oid> refs/heads/..." line in packed-refs. */
static bool packed_branch(int gd) {
  _cleanup_fclose_ FILE *f = NULL;
  _cleanup_free_ char *line = NULL;
  size_t cap = 0, read_bytes = 0;
  ssize_t n;
  int fd;

  fd = wr_open_confined(gd, "in the git directory", "packed-refs",
                        WR_CONFINED_BENEATH, NULL, NULL);
  if (fd < 0 || (f = fdopen(fd, "r")) == NULL) {
    if (fd >= 0)
      close(fd);
    return false;
  }
  while (read_bytes < PACKED_REFS_MAX && (n = getline(&line, &cap, f)) > 0) {
    const char *sp = memchr(line, ' ', (size_t)n);
    read_bytes += (size_t)n;
    if (line[0] != '#' && line[0] != '^' && sp != NULL &&
        wr_str_has_prefix(sp + 1, "refs/heads/"))
      return true;
  }
  return false;
}

bool wr_gitrepo_has_branch(int gd) {
  size_t entries = 0;

  if (is_kind_at(gd, "reftable", S_IFDIR))
    return true;
  if (has_file_below(wr_open_confined(gd, "in the git directory", "refs/heads",
                                      WR_CONFINED_DIR | WR_CONFINED_BENEATH,
                                      NULL, NULL),
                     0, &entries))
    return true;
  return packed_branch(gd);
}

int wr_gitrepo_check(int top, const char *name, char **git_dir,
                     wr_error_t *err) {
  _cleanup_free_ char *path = NULL;
  _cleanup_close_ int gd = -1;

  if (wr_gitrepo_find(top, name, &path, &gd, err) < 0)
    return -1;
  if (!wr_gitrepo_has_branch(gd))
    return wr_error_setx(err, EINVAL,
                         "`%s` has no commits: commit the starting code first "
                         "(git add -A && git commit)",
                         name);
  *git_dir = steal_ptr(&path);
  return 0;
}
