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
 * Remove one entry of `dir`: files are unlinked, empty directories removed,
 * and for a non-empty directory *descend receives an fd to it. Mount points
 * (another device) are refused rather than emptied.
 */
static int rm_entry(int dir, dev_t dev, const char *name, int *descend,
                    wr_error_t *err) {
  struct stat st;

  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "stat `%s`", name);
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
      return wr_error_set(err, errno, "unlink `%s`", name);
    return 0;
  }
  if (st.st_dev != dev)
    return wr_error_set(err, EBUSY, "`%s` is a mount point", name);
  if (unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    return 0;
  if (errno != ENOTEMPTY && errno != EEXIST)
    return wr_error_set(err, errno, "rmdir `%s`", name);
  *descend = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (*descend < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  return 0;
}

/* Empty the directory `cur` (scan once); *child gets a subdirectory that
 * still has entries, or stays -1 when `cur` is now empty. */
static int rm_scan(int cur, dev_t dev, int *child, wr_error_t *err) {
  int dupfd = fcntl(cur, F_DUPFD_CLOEXEC, 0);
  DIR *d;
  struct dirent *de;
  int r = 0;

  if (dupfd < 0)
    return wr_error_set(err, errno, "dup");
  d = fdopendir(dupfd);
  if (d == NULL) {
    close(dupfd);
    return wr_error_set(err, errno, "opendir");
  }
  rewinddir(d);
  while (*child < 0 && (de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    r = rm_entry(cur, dev, de->d_name, child, err);
    if (r < 0)
      break;
  }
  closedir(d);
  return r;
}

/*
 * rm -rf without recursion (a hostile tree may be very deep): descend into
 * the first non-empty subdirectory, and climb back through ".." when a
 * directory is empty. Only used on trees no process is using any more.
 */
int wr_rm_rf_at(int dirfd, const char *name, wr_error_t *err) {
  struct stat st;
  int cur, depth = 0;

  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "stat `%s`", name);
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
      return wr_error_set(err, errno, "unlink `%s`", name);
    return 0;
  }
  cur = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cur < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  for (;;) {
    int child = -1;
    if (rm_scan(cur, st.st_dev, &child, err) < 0) {
      close(cur);
      return wr_error_wrap(err, "remove `%s`", name);
    }
    if (child >= 0) {
      close(cur);
      cur = child;
      depth++;
      continue;
    }
    if (depth == 0)
      break;
    child = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    if (child < 0)
      return wr_error_set(err, errno, "open `..` below `%s`", name);
    cur = child;
    depth--;
  }
  close(cur);
  if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return wr_error_set(err, errno, "rmdir `%s`", name);
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

int wr_open_in_root(int rootfd, const char *path, int flags, mode_t mode,
                    wr_error_t *err) {
  struct open_how how = {
      .flags = (uint64_t)(flags | O_CLOEXEC),
      .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  int fd, tries = 0;

  if (wr_path_check(path, err) < 0)
    return -1;
  /* openat2 says EAGAIN when a rename raced the lookup. A sandbox renaming
   * in a loop must not hold a daemon thread for ever: give up after a
   * while and let the client retry. */
  do
    fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
  while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 128);
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
