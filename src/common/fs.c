/*
 * File helpers. Host paths that warren owns use the plain helpers; paths
 * that come from a client or a sandbox go through wr_open_in_root, which
 * never leaves the given root.
 */
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

int wr_write_all(int fd, const void *data, size_t len, wr_error_t *err) {
  const char *p = data;

  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return wr_error_set(err, errno, "write");
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

ssize_t wr_read_all(int fd, void *data, size_t len) {
  char *p = data;
  size_t done = 0;

  while (done < len) {
    ssize_t n = read(fd, p + done, len - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (n == 0)
      break;
    done += (size_t)n;
  }
  return (ssize_t)done;
}

static int read_fd(int fd, const char *path, size_t max, char **out,
                   size_t *len, wr_error_t *err) {
  wr_buf_t b;
  char chunk[16384];

  wr_buf_init(&b);
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      wr_buf_free(&b);
      return wr_error_set(err, errno, "read `%s`", path);
    }
    if (n == 0)
      break;
    if (b.len + (size_t)n > max) {
      wr_buf_free(&b);
      return wr_error_set(err, EFBIG, "read `%s`", path);
    }
    wr_buf_append(&b, chunk, (size_t)n);
  }
  *out = wr_buf_steal(&b, len);
  return 0;
}

int wr_read_file_at(int dirfd, const char *path, size_t max, char **out,
                    size_t *len, wr_error_t *err) {
  _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  return read_fd(fd, path, max, out, len, err);
}

int wr_read_file(const char *path, size_t max, char **out, size_t *len,
                 wr_error_t *err) {
  return wr_read_file_at(AT_FDCWD, path, max, out, len, err);
}

int wr_write_file_at(int dirfd, const char *name, const void *data, size_t len,
                     wr_error_t *err) {
  _cleanup_close_ int fd = -1;

  fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  return wr_write_all(fd, data, len, err);
}

int wr_write_file(const char *path, const void *data, size_t len, mode_t mode,
                  wr_error_t *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
  _cleanup_close_ int fd = -1;

  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    return wr_error_set(err, errno, "create `%s`", tmp);
  if (wr_write_all(fd, data, len, err) < 0 || fsync(fd) < 0) {
    if (err != NULL && err->msg[0] == '\0')
      wr_error_set(err, errno, "fsync `%s`", tmp);
    unlink(tmp);
    return wr_error_wrap(err, "write `%s`", path);
  }
  if (rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return wr_error_set(err, e, "rename `%s`", path);
  }
  return 0;
}

int wr_mkdir_p(const char *path, mode_t mode, wr_error_t *err) {
  _cleanup_free_ char *copy = xstrdup(path);

  for (char *p = copy + 1; *p != '\0'; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(copy, mode) < 0 && errno != EEXIST)
      return wr_error_set(err, errno, "mkdir `%s`", copy);
    *p = '/';
  }
  if (mkdir(copy, mode) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", copy);
  return 0;
}

/*
 * rm -rf, confined and without recursion. A hostile tree may be very deep,
 * very wide, and may move while it is removed (the files API removes trees
 * inside running sandboxes), so the walk:
 *
 *  - holds one directory fd at a time, descends with O_NOFOLLOW into
 *    directories of the tree's filesystem only (a mount point is an
 *    error), and climbs back through "..", checking that it reached the
 *    very directory it came from (a stack of dev/inode pairs). A tree
 *    moved meanwhile stops the removal with ESTALE instead of letting it
 *    go on wherever ".." leads;
 *  - reads a directory's names in batches and works through a batch
 *    before reading again, so that a directory with many subdirectories
 *    is not read from its start again after each one (which made removing
 *    20000 of them take 20 s). The names held are bounded; past the bound
 *    a batch is one name.
 */
#define RM_BATCH 1024
#define RM_NAMES_MAX (16u << 20)

struct rm_frame {
  dev_t dev;
  ino_t ino;
  char *names; /* the current batch, NUL-separated */
  size_t len, next;
};

struct rm_walk {
  struct rm_frame *stack;
  size_t depth, cap;
  dev_t dev;   /* the tree's filesystem */
  size_t held; /* bytes of names in all batches */
};

static int rm_push(struct rm_walk *w, int fd, wr_error_t *err) {
  struct rm_frame *f;
  struct stat st;

  if (fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "stat");
  if (w->depth == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 64;
    w->stack = xrealloc(w->stack, w->cap * sizeof(*w->stack));
  }
  f = &w->stack[w->depth++];
  memset(f, 0, sizeof(*f));
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  return 0;
}

static void rm_drop_batch(struct rm_walk *w, struct rm_frame *f) {
  w->held -= f->len;
  free(f->names);
  f->names = NULL;
  f->len = f->next = 0;
}

/* Read the next batch of names of directory `cur` (from its start: what
 * earlier batches named is gone by now). An empty batch means the
 * directory is empty. */
static int rm_fill(struct rm_walk *w, int cur, struct rm_frame *f,
                   wr_error_t *err) {
  int e = 0, dupfd = fcntl(cur, F_DUPFD_CLOEXEC, 0);
  struct dirent *de;
  size_t count = 0;
  wr_buf_t b;
  DIR *d;

  rm_drop_batch(w, f);
  if (dupfd < 0 || (d = fdopendir(dupfd)) == NULL) {
    e = errno;
    if (dupfd >= 0)
      close(dupfd);
    return wr_error_set(err, e, "read directory");
  }
  rewinddir(d);
  wr_buf_init(&b);
  while (count < RM_BATCH && (count == 0 || w->held + b.len < RM_NAMES_MAX)) {
    errno = 0;
    de = readdir(d);
    if (de == NULL) {
      e = errno;
      break;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    wr_buf_append(&b, de->d_name, strlen(de->d_name) + 1);
    count++;
  }
  closedir(d);
  if (e != 0) {
    wr_buf_free(&b);
    return wr_error_set(err, e, "read directory");
  }
  f->names = wr_buf_steal(&b, &f->len);
  w->held += f->len;
  return 0;
}

/*
 * Remove one entry of `cur`: a non-directory is unlinked (a symlink is the
 * link itself), an empty directory removed; a non-empty directory on the
 * tree's filesystem is opened (O_NOFOLLOW) into *child for the walk to
 * descend. An entry that vanished or changed kind is left for the next
 * batch.
 */
static int rm_entry(int cur, dev_t dev, const char *name, int *child,
                    wr_error_t *err) {
  struct stat st;
  int fd;

  if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "stat `%s`", name);
  if (!S_ISDIR(st.st_mode) && (unlinkat(cur, name, 0) == 0 || errno == ENOENT))
    return 0;
  if (!S_ISDIR(st.st_mode) && errno != EISDIR)
    return wr_error_set(err, errno, "unlink `%s`", name);
  if (st.st_dev != dev)
    return wr_error_set(err, EBUSY, "`%s` is a mount point", name);
  if (unlinkat(cur, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    return 0;
  if (errno != ENOTEMPTY && errno != EEXIST)
    return wr_error_set(err, errno, "rmdir `%s`", name);
  fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) /* swapped for a non-directory: the next batch unlinks it */
    return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
               ? 0
               : wr_error_set(err, errno, "open `%s`", name);
  if (fstat(fd, &st) < 0 || st.st_dev != dev) {
    close(fd);
    return wr_error_set(err, EBUSY, "`%s` is a mount point", name);
  }
  *child = fd;
  return 0;
}

/* Climb from *cur to its parent, which must be the directory below it on
 * the walk's stack. */
static int rm_climb(struct rm_walk *w, int *cur, wr_error_t *err) {
  const struct rm_frame *want = &w->stack[w->depth - 2];
  struct stat st;
  int up = openat(*cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (up < 0)
    return wr_error_set(err, errno, "open `..`");
  if (fstat(up, &st) < 0 || st.st_dev != want->dev || st.st_ino != want->ino) {
    close(up);
    return wr_error_set(err, ESTALE, "the tree was moved while removing it");
  }
  close(*cur);
  *cur = up;
  rm_drop_batch(w, &w->stack[--w->depth]);
  return 0;
}

/* One step of the walk: the next name of the current batch, a new batch,
 * or, once the directory is empty, the climb to its parent. *done when
 * the top directory is empty. */
static int rm_step(struct rm_walk *w, int *cur, bool *done, wr_error_t *err) {
  struct rm_frame *f = &w->stack[w->depth - 1];
  const char *name;
  int child = -1;

  if (f->next >= f->len) {
    if (rm_fill(w, *cur, f, err) < 0)
      return -1;
    if (f->len > 0)
      return 0;
    if (w->depth == 1) {
      *done = true;
      return 0;
    }
    return rm_climb(w, cur, err);
  }
  name = f->names + f->next;
  f->next += strlen(name) + 1;
  if (rm_entry(*cur, w->dev, name, &child, err) < 0)
    return -1;
  if (child < 0)
    return 0;
  close(*cur);
  *cur = child;
  return rm_push(w, child, err);
}

/* Empty the directory `name` of `dirfd` (as checked in `top`), then
 * remove it. */
static int rm_tree(int dirfd, const char *name, const struct stat *top,
                   wr_error_t *err) {
  struct rm_walk w = {.dev = top->st_dev};
  _cleanup_close_ int cur = -1;
  bool done = false;
  int r;

  cur = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cur < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  r = rm_push(&w, cur, err);
  if (r == 0 &&
      (w.stack[0].dev != top->st_dev || w.stack[0].ino != top->st_ino))
    r = wr_error_set(err, ESTALE, "`%s` changed while removing it", name);
  while (r == 0 && !done)
    r = rm_step(&w, &cur, &done, err);
  for (size_t i = 0; i < w.depth; i++)
    free(w.stack[i].names);
  free(w.stack);
  if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    r = wr_error_set(err, errno, "rmdir `%s`", name);
  return r;
}

int wr_dir_each(int dirfd, wr_dir_entry_fn fn, void *arg, wr_error_t *err) {
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *e;
  int r = 0;

  if (dir == NULL) {
    if (fd >= 0)
      close(fd);
    return wr_error_set(err, errno, "read a directory");
  }
  rewinddir(dir);
  while (r == 0 && (e = readdir(dir)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      r = fn(dirfd, e->d_name, arg, err);
  closedir(dir);
  return r;
}

int wr_rm_rf_at(int dirfd, const char *name, wr_error_t *err) {
  struct stat st;

  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "stat `%s`", name);
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
      return wr_error_set(err, errno, "unlink `%s`", name);
    return 0;
  }
  if (rm_tree(dirfd, name, &st, err) < 0)
    return wr_error_wrap(err, "remove `%s`", name);
  return 0;
}

int wr_rm_rf(const char *path, wr_error_t *err) {
  return wr_rm_rf_at(AT_FDCWD, path, err);
}

int wr_path_check(const char *path, wr_error_t *err) {
  size_t comp = 0;

  if (path == NULL || *path == '\0')
    return wr_error_set(err, 0, "empty path");
  if (strlen(path) >= PATH_MAX)
    return wr_error_set(err, 0, "path is longer than %d bytes", PATH_MAX - 1);
  for (const char *p = path; *p != '\0'; p++) {
    comp = *p == '/' ? 0 : comp + 1;
    if (comp > NAME_MAX)
      return wr_error_set(err, 0, "a path component is longer than %d bytes",
                          NAME_MAX);
  }
  return 0;
}

/* openat2 says EAGAIN when a rename raced the lookup. A sandbox renaming
 * in a loop must not hold a daemon thread for ever: give up after a while
 * and let the client retry. */
static int openat2_retry(int dirfd, const char *path, struct open_how *how) {
  int fd, tries = 0;

  do
    fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
  while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 128);
  return fd;
}

int wr_open_in_root(int rootfd, const char *path, int flags, mode_t mode,
                    wr_error_t *err) {
  struct open_how how = {
      .flags = (uint64_t)(flags | O_CLOEXEC),
      .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  int fd;

  if (wr_path_check(path, err) < 0)
    return -1;
  fd = openat2_retry(rootfd, path, &how);
  if (fd < 0)
    return wr_error_set(err, errno, "`%s`", path);
  return fd;
}

int wr_open_parent_in_root(int rootfd, const char *path, char **name,
                           wr_error_t *err) {
  _cleanup_free_ char *copy = NULL;
  char *slash, *base;
  size_t n;
  int fd;

  if (wr_path_check(path, err) < 0)
    return -1;
  copy = xstrdup(path);
  n = strlen(copy);
  while (n > 1 && copy[n - 1] == '/')
    copy[--n] = '\0';
  slash = strrchr(copy, '/');
  base = slash ? slash + 1 : copy;
  if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
    return wr_error_set(err, EINVAL, "`%s` does not name an entry", path);
  if (slash == NULL)
    fd = wr_open_in_root(rootfd, ".", O_PATH | O_DIRECTORY, 0, err);
  else if (slash == copy)
    fd = wr_open_in_root(rootfd, "/", O_PATH | O_DIRECTORY, 0, err);
  else {
    *slash = '\0';
    fd = wr_open_in_root(rootfd, copy, O_PATH | O_DIRECTORY, 0, err);
  }
  if (fd < 0)
    return -1;
  *name = xstrdup(base);
  return fd;
}

/* ---- files in a root that someone else controls ------------------------ */

const char *wr_file_kind(mode_t mode) {
  switch (mode & S_IFMT) {
  case S_IFREG:
    return "a regular file";
  case S_IFDIR:
    return "a directory";
  case S_IFLNK:
    return "a symlink";
  case S_IFIFO:
    return "a fifo";
  case S_IFSOCK:
    return "a socket";
  case S_IFCHR:
    return "a character device";
  case S_IFBLK:
    return "a block device";
  }
  return "a file of unknown type";
}

int wr_fd_reopen(int pathfd, int flags, wr_error_t *err) {
  char proc[64];
  int fd;

  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pathfd);
  fd = open(proc, flags | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "reopen");
  return fd;
}

/* The O_PATH fd of what `path` names, the final component not followed
 * (a symlink there is the link itself), nothing opened yet. */
static int open_path_confined(int rootfd, const char *where, const char *path,
                              unsigned flags, wr_error_t *err) {
  struct open_how how = {
      .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
      .resolve =
          RESOLVE_NO_MAGICLINKS |
          ((flags & WR_CONFINED_BENEATH) ? RESOLVE_BENEATH : RESOLVE_IN_ROOT) |
          ((flags & WR_CONFINED_NO_SYMLINKS) ? RESOLVE_NO_SYMLINKS : 0),
  };
  int fd;

  if (wr_path_check(path, err) < 0)
    return wr_error_wrap(err, "%s %s", path, where);
  fd = openat2_retry(rootfd, path, &how);
  if (fd >= 0)
    return fd;
  if (errno == ELOOP && (flags & WR_CONFINED_NO_SYMLINKS))
    return wr_error_setx(err, ELOOP, "%s %s leads through a symlink", path,
                         where);
  if (errno == EXDEV && (flags & WR_CONFINED_BENEATH))
    return wr_error_setx(err, EXDEV, "%s %s leads outside it", path, where);
  return wr_error_set(err, errno, "%s %s", path, where);
}

int wr_open_confined(int rootfd, const char *where, const char *path,
                     unsigned flags, struct stat *st, wr_error_t *err) {
  mode_t want = (flags & WR_CONFINED_DIR) ? S_IFDIR : S_IFREG;
  _cleanup_close_ int pfd = -1;
  struct stat local;

  st = st != NULL ? st : &local;
  pfd = open_path_confined(rootfd, where, path, flags, err);
  if (pfd < 0)
    return -1;
  if (fstat(pfd, st) < 0)
    return wr_error_set(err, errno, "stat %s %s", path, where);
  if ((st->st_mode & S_IFMT) != want)
    return wr_error_setx(err, want == S_IFDIR ? ENOTDIR : EINVAL,
                         "%s %s is %s, not %s", path, where,
                         wr_file_kind(st->st_mode), wr_file_kind(want));
  if (flags & WR_CONFINED_PATH)
    return steal_fd(&pfd);
  /* Only now is anything opened: the very inode just checked, through the
   * daemon's own /proc, which no rename can change. */
  return wr_fd_reopen(
      pfd, want == S_IFDIR ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK,
      err);
}

/* "4.0 MiB", for messages about sizes. */
static char *size_text(uint64_t bytes) {
  char buf[32];

  wr_format_size(bytes, buf, sizeof(buf));
  return xstrdup(buf);
}

/* A file that grew while it was read: from its start again, in chunks,
 * never past the bound. */
static int read_grown(int fd, const char *where, const char *path, size_t max,
                      char **out, size_t *len, wr_error_t *err) {
  _cleanup_free_ char *most = size_text(max);
  wr_error_t rerr;

  if (lseek(fd, 0, SEEK_SET) < 0)
    return wr_error_set(err, errno, "read %s %s", path, where);
  if (read_fd(fd, path, max, out, len, &rerr) == 0)
    return 0;
  if (rerr.code == EFBIG)
    return wr_error_setx(err, EFBIG, "%s %s is more than the %s it may be",
                         path, where, most);
  return wr_error_set(err, rerr.code, "read %s %s", path, where);
}

int wr_read_in_root(int rootfd, const char *where, const char *path, size_t max,
                    char **out, size_t *len, wr_error_t *err) {
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *data = NULL;
  struct stat st;
  ssize_t n;

  fd = wr_open_confined(rootfd, where, path, 0, &st, err);
  if (fd < 0)
    return -1;
  /* A sparse file of a terabyte costs the sandbox nothing: refuse it by
   * its size, before reading, and read no more than the bound anyway (it
   * may grow meanwhile). */
  if ((uint64_t)st.st_size > max) {
    _cleanup_free_ char *have = size_text((uint64_t)st.st_size);
    _cleanup_free_ char *most = size_text(max);
    return wr_error_setx(err, EFBIG, "%s %s is %s, more than the %s it may be",
                         path, where, have, most);
  }
  data = xmalloc((size_t)st.st_size + 2);
  n = wr_read_all(fd, data, (size_t)st.st_size + 1);
  if (n < 0)
    return wr_error_set(err, errno, "read %s %s", path, where);
  if (n > st.st_size) /* it grew: read it again, within the bound */
    return read_grown(fd, where, path, max, out, len, err);
  data[n] = '\0';
  if (len != NULL)
    *len = (size_t)n;
  *out = steal_ptr(&data);
  return 0;
}

/* A new temporary file in dir (O_EXCL: never one someone else put
 * there), with its name in *tmp. */
static int create_tmp_at(int dir, char **tmp, wr_error_t *err) {
  for (int i = 0; i < 8; i++) {
    int fd;
    free(*tmp);
    *tmp = wr_random_id(".wr-tmp-", 12);
    fd = openat(dir, *tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd >= 0 || errno != EEXIST)
      return fd >= 0 ? fd : wr_error_set(err, errno, "create a temporary file");
  }
  return wr_error_set(err, EEXIST, "create a temporary file");
}

/* Fill the temporary file and give it its owner and mode. */
static int fill_tmp(int fd, const void *data, size_t len, mode_t mode,
                    uid_t owner, wr_error_t *err) {
  if (fchown(fd, owner, owner) < 0 || fchmod(fd, mode) < 0)
    return wr_error_set(err, errno, "set owner and mode");
  return wr_write_all(fd, data, len, err);
}

int wr_write_in_root(int rootfd, const char *where, const char *path,
                     const void *data, size_t len, mode_t mode, uid_t owner,
                     wr_error_t *err) {
  _cleanup_free_ char *name = NULL, *tmp = NULL;
  _cleanup_close_ int dir = -1, fd = -1;
  struct stat st;
  int r;

  dir = wr_open_parent_in_root(rootfd, path, &name, err);
  if (dir < 0)
    return wr_error_wrap(err, "write %s %s", path, where);
  /* Whatever stands there is replaced, never opened; only a directory,
   * which a rename cannot replace, is in the way. */
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    return wr_error_setx(err, EISDIR, "%s %s is a directory, not a file", path,
                         where);
  fd = create_tmp_at(dir, &tmp, err);
  if (fd < 0)
    return wr_error_wrap(err, "write %s %s", path, where);
  r = fill_tmp(fd, data, len, mode, owner, err);
  if (r == 0 && close(steal_fd(&fd)) < 0)
    r = wr_error_set(err, errno, "close");
  if (r == 0 && renameat(dir, tmp, dir, name) < 0)
    r = errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST
            ? wr_error_setx(err, EISDIR, "%s %s is a directory, not a file",
                            path, where)
            : wr_error_set(err, errno, "rename into place");
  if (r < 0) {
    unlinkat(dir, tmp, 0);
    return err != NULL && err->code == EISDIR
               ? -1
               : wr_error_wrap(err, "write %s %s", path, where);
  }
  return 0;
}

int wr_open_host_confined(const char *path, unsigned flags, struct stat *st,
                          wr_error_t *err) {
  _cleanup_close_ int host = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (host < 0)
    return wr_error_set(err, errno, "open `/`");
  return wr_open_confined(host, "on the host", path, flags, st, err);
}
