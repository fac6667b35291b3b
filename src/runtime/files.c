/*
 * The files API on a sandbox's root (see files.h). Every operation starts
 * with wr_open_in_root (openat2, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 * and goes on with *at() calls on the fds that gave, one final component
 * at a time, never following it.
 */
#include "common/common.h"
#include "common/tar.h"
#include "runtime/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#define NOBODY 65534u
#define TMP_TRIES 8

struct wr_files_writer {
  int dirfd;  /* the target's directory, resolved in the root */
  int fd;     /* the temporary file, open for writing */
  char *tmp;  /* its name in dirfd, while it exists */
  char *name; /* the target's name in dirfd */
  char *path; /* the target, for messages */
};

/* ---- helpers ---------------------------------------------------------- */

static uint32_t id_inside(const struct wr_files_ctx *c, uint32_t host) {
  if (host >= c->id_base && host - c->id_base < c->id_count)
    return host - c->id_base;
  return NOBODY;
}

static int check_mode(uint32_t mode, wr_error_t *err) {
  if ((mode & ~01777u) != 0)
    return wr_error_set(err, EINVAL,
                        "mode %04o: only permission bits and the sticky "
                        "bit may be set",
                        mode);
  return 0;
}

/* A client path, checked (length, NAME_MAX) and normalised; NULL if bad. */
static char *clean_path(const char *path, wr_error_t *err) {
  if (wr_path_check(path, err) < 0)
    return NULL;
  return wr_path_normalize(path);
}

/* The final component of a normalised path; "/" for the root. */
static const char *base_name(const char *norm) {
  const char *slash = strrchr(norm, '/');

  return slash[1] != '\0' ? slash + 1 : norm;
}

/* Split a normalised path other than "/" into a parent path and a name. */
static char *split_parent(const char *norm, char **name) {
  char *parent = xstrdup(norm);
  char *slash = strrchr(parent, '/');

  *name = xstrdup(slash + 1);
  slash[slash == parent ? 1 : 0] = '\0';
  return parent;
}

static char type_of(mode_t mode) {
  switch (mode & S_IFMT) {
  case S_IFDIR:
    return 'd';
  case S_IFLNK:
    return 'l';
  case S_IFCHR:
    return 'c';
  case S_IFBLK:
    return 'b';
  case S_IFIFO:
    return 'p';
  case S_IFSOCK:
    return 's';
  default:
    return 'f';
  }
}

/* Describe the file behind fd (an O_PATH fd may be a symlink itself) under
 * the normalised path `norm`. st (may be NULL) receives its stat. */
static int fill_info(const struct wr_files_ctx *c, int fd, const char *norm,
                     struct wr_file_info *out, struct stat *st,
                     wr_error_t *err) {
  char target[PATH_MAX];
  struct stat local;
  ssize_t n;

  st = st != NULL ? st : &local;
  if (fstat(fd, st) < 0)
    return wr_error_set(err, errno, "stat `%s`", norm);
  memset(out, 0, sizeof(*out));
  if (S_ISLNK(st->st_mode)) {
    n = readlinkat(fd, "", target, sizeof(target) - 1);
    if (n < 0)
      return wr_error_set(err, errno, "readlink `%s`", norm);
    target[n] = '\0';
    out->link_target = xstrdup(target);
  }
  out->name = xstrdup(base_name(norm));
  out->path = xstrdup(norm);
  out->type = type_of(st->st_mode);
  out->size = (uint64_t)st->st_size;
  out->allocated = (uint64_t)st->st_blocks * 512;
  out->mode = st->st_mode & 07777;
  out->uid = id_inside(c, st->st_uid);
  out->gid = id_inside(c, st->st_gid);
  out->mtime_ms =
      (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
  return 0;
}

void wr_file_info_free(struct wr_file_info *info) {
  if (info == NULL)
    return;
  free(info->name);
  free(info->path);
  free(info->link_target);
  memset(info, 0, sizeof(*info));
}

void wr_file_infos_free(struct wr_file_info *v, size_t n) {
  for (size_t i = 0; i < n && v != NULL; i++)
    wr_file_info_free(&v[i]);
  free(v);
}

/* ---- stat, read, chmod ------------------------------------------------ */

int wr_files_stat(const struct wr_files_ctx *c, const char *path,
                  struct wr_file_info *out, wr_error_t *err) {
  _cleanup_free_ char *norm = clean_path(path, err);
  _cleanup_close_ int fd = -1;

  if (norm == NULL)
    return wr_error_wrap(err, "stat");
  fd = wr_open_in_root(c->rootfd, norm, O_PATH | O_NOFOLLOW, 0, err);
  if (fd < 0)
    return wr_error_wrap(err, "stat");
  return fill_info(c, fd, norm, out, NULL, err);
}

int wr_files_open_read(const struct wr_files_ctx *c, const char *path, int *fd,
                       struct wr_file_info *info, wr_error_t *err) {
  _cleanup_free_ char *norm = clean_path(path, err);
  _cleanup_close_ int pfd = -1, rfd = -1;
  struct stat st;

  if (norm == NULL)
    return wr_error_wrap(err, "read");
  pfd = wr_open_in_root(c->rootfd, norm, O_PATH, 0, err);
  if (pfd < 0)
    return wr_error_wrap(err, "read");
  if (fstat(pfd, &st) < 0)
    return wr_error_set(err, errno, "read `%s`", norm);
  if (S_ISDIR(st.st_mode))
    return wr_error_set(err, EISDIR, "read `%s`", norm);
  if (!S_ISREG(st.st_mode))
    return wr_error_set(err, EINVAL, "read `%s`: not a regular file", norm);
  /* /proc/self/fd/N names exactly the inode checked on the O_PATH fd,
   * whatever has happened to its path since: no race. */
  rfd = wr_fd_reopen(pfd, O_RDONLY, err);
  if (rfd < 0)
    return wr_error_wrap(err, "read `%s`", norm);
  if (info != NULL && fill_info(c, rfd, norm, info, NULL, err) < 0)
    return -1;
  *fd = steal_fd(&rfd);
  return 0;
}

/* chmod on an O_PATH fd of the checked non-symlink, through /proc/self/fd
 * (see reopen): no path from the client is followed at the end. */
int wr_files_chmod(const struct wr_files_ctx *c, const char *path,
                   uint32_t mode, wr_error_t *err) {
  _cleanup_free_ char *norm = NULL;
  _cleanup_close_ int fd = -1;
  struct stat st;
  char proc[64];

  if (check_mode(mode, err) < 0 || (norm = clean_path(path, err)) == NULL)
    return wr_error_wrap(err, "chmod");
  fd = wr_open_in_root(c->rootfd, norm, O_PATH | O_NOFOLLOW, 0, err);
  if (fd < 0)
    return wr_error_wrap(err, "chmod");
  if (fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "chmod `%s`", norm);
  if (S_ISLNK(st.st_mode))
    return wr_error_set(err, ELOOP, "chmod `%s`: a symbolic link", norm);
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  if (chmod(proc, mode) < 0)
    return wr_error_set(err, errno, "chmod `%s`", norm);
  return 0;
}

/* ---- list ------------------------------------------------------------- */

struct item {
  struct wr_file_info info;
  unsigned level; /* 1: a child of the listed directory */
  dev_t dev;
  ino_t ino;
};

struct listing {
  const struct wr_files_ctx *c;
  struct item *items;
  size_t n, cap, max;
  dev_t dev; /* the listed directory's filesystem */
  bool truncated;
};

static int item_cmp(const void *a, const void *b) {
  return strcmp(((const struct item *)a)->info.name,
                ((const struct item *)b)->info.name);
}

static int add_item(struct listing *l, int dir, const char *dirpath,
                    const char *name, unsigned level, wr_error_t *err) {
  _cleanup_close_ int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_free_ char *path = NULL;
  struct item *it;
  struct stat st;

  if (fd < 0)
    return errno == ENOENT ? 0 : wr_error_set(err, errno, "open `%s`", name);
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->items = xrealloc(l->items, l->cap * sizeof(*l->items));
  }
  path = strcmp(dirpath, "/") == 0 ? xasprintf("/%s", name)
                                   : xasprintf("%s/%s", dirpath, name);
  it = &l->items[l->n];
  if (fill_info(l->c, fd, path, &it->info, &st, err) < 0) {
    wr_file_info_free(&it->info);
    return -1;
  }
  it->level = level;
  it->dev = st.st_dev;
  it->ino = st.st_ino;
  l->n++;
  return 0;
}

/* Add the entries of directory `dir` (listed as dirpath), sorted by name,
 * until max_entries is reached. */
static int list_dir(struct listing *l, int dir, const char *dirpath,
                    unsigned level, wr_error_t *err) {
  int dupfd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
  size_t first = l->n;
  struct dirent *de;
  int r = 0;
  DIR *d;

  if (dupfd < 0 || (d = fdopendir(dupfd)) == NULL) {
    int e = errno;
    if (dupfd >= 0)
      close(dupfd);
    return wr_error_set(err, e, "read directory `%s`", dirpath);
  }
  while (r == 0 && (de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (l->n == l->max) {
      l->truncated = true;
      break;
    }
    r = add_item(l, dir, dirpath, de->d_name, level, err);
  }
  closedir(d);
  if (l->n > first)
    qsort(l->items + first, l->n - first, sizeof(*l->items), item_cmp);
  return r;
}

/* Open a listed directory again by its path, and only if it is still the
 * same directory (it may have been swapped for a symlink meanwhile). */
static int reopen_item(const struct listing *l, const struct item *it) {
  struct stat st;
  int fd = wr_open_in_root(l->c->rootfd, it->info.path,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, NULL);

  if (fd < 0)
    return -1;
  if (fstat(fd, &st) < 0 || st.st_dev != it->dev || st.st_ino != it->ino) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Breadth first: the items list is also the queue of directories. */
static int list_tree(struct listing *l, const char *norm, unsigned depth,
                     wr_error_t *err) {
  struct stat st;
  int r,
      fd = wr_open_in_root(l->c->rootfd, norm, O_RDONLY | O_DIRECTORY, 0, err);

  if (fd < 0)
    return -1;
  if (fstat(fd, &st) < 0) {
    r = wr_error_set(err, errno, "stat");
  } else {
    l->dev = st.st_dev;
    r = list_dir(l, fd, norm, 1, err);
  }
  close(fd);
  for (size_t i = 0; r == 0 && i < l->n && !l->truncated; i++) {
    const struct item *it = &l->items[i];
    _cleanup_free_ char *dirpath = NULL;
    unsigned level = it->level;

    if (it->info.type != 'd' || level >= depth || it->dev != l->dev)
      continue;
    fd = reopen_item(l, it);
    if (fd < 0)
      continue;
    dirpath = xstrdup(it->info.path); /* items may move as they grow */
    r = list_dir(l, fd, dirpath, level + 1, err);
    close(fd);
  }
  return r;
}

int wr_files_list(const struct wr_files_ctx *c, const char *path,
                  unsigned depth, size_t max_entries, struct wr_file_info **out,
                  size_t *n, bool *truncated, wr_error_t *err) {
  _cleanup_free_ char *norm = clean_path(path, err);
  struct listing l = {.c = c, .max = max_entries};

  *out = NULL;
  *n = 0;
  *truncated = false;
  if (norm == NULL)
    return wr_error_wrap(err, "list");
  if (depth == 0 || max_entries == 0)
    return wr_error_set(err, EINVAL,
                        "list `%s`: depth and max_entries "
                        "must be at least 1",
                        norm);
  if (list_tree(&l, norm, depth, err) < 0) {
    for (size_t i = 0; i < l.n; i++)
      wr_file_info_free(&l.items[i].info);
    free(l.items);
    return wr_error_wrap(err, "list `%s`", norm);
  }
  *out = l.n ? xcalloc(l.n, sizeof(**out)) : NULL;
  for (size_t i = 0; i < l.n; i++)
    (*out)[i] = l.items[i].info;
  free(l.items);
  *n = l.n;
  *truncated = l.truncated;
  return 0;
}

/* ---- mkdir, move ------------------------------------------------------ */

int wr_files_mkdir(const struct wr_files_ctx *c, const char *path,
                   uint32_t mode, bool parents, wr_error_t *err) {
  _cleanup_free_ char *norm = NULL, *name = NULL;
  _cleanup_close_ int dir = -1, fd = -1;

  if (check_mode(mode, err) < 0 || (norm = clean_path(path, err)) == NULL)
    return wr_error_wrap(err, "mkdir");
  if (parents) {
    fd = wr_mkdir_p_in_root(c->rootfd, norm, mode, c->id_base, c->id_base, err);
    return fd < 0 ? wr_error_wrap(err, "mkdir -p `%s`", norm) : 0;
  }
  dir = wr_open_parent_in_root(c->rootfd, norm, &name, err);
  if (dir < 0)
    return wr_error_wrap(err, "mkdir");
  if (mkdirat(dir, name, mode) < 0)
    return wr_error_set(err, errno, "mkdir `%s`", norm);
  fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fchown(fd, c->id_base, c->id_base) < 0 || fchmod(fd, mode) < 0)
    return wr_error_set(err, errno, "mkdir `%s`: set owner and mode", norm);
  return 0;
}

int wr_files_move(const struct wr_files_ctx *c, const char *from,
                  const char *to, bool overwrite, wr_error_t *err) {
  _cleanup_free_ char *nfrom = NULL, *nto = NULL, *bfrom = NULL, *bto = NULL;
  _cleanup_close_ int dfrom = -1, dto = -1;

  if ((nfrom = clean_path(from, err)) == NULL ||
      (nto = clean_path(to, err)) == NULL)
    return wr_error_wrap(err, "move");
  dfrom = wr_open_parent_in_root(c->rootfd, nfrom, &bfrom, err);
  if (dfrom < 0)
    return wr_error_wrap(err, "move");
  dto = wr_open_parent_in_root(c->rootfd, nto, &bto, err);
  if (dto < 0)
    return wr_error_wrap(err, "move to");
  if (renameat2(dfrom, bfrom, dto, bto, overwrite ? 0 : RENAME_NOREPLACE) < 0)
    return wr_error_set(err, errno, "move `%s` to `%s`", nfrom, nto);
  return 0;
}

/* ---- remove ----------------------------------------------------------- */

int wr_files_remove(const struct wr_files_ctx *c, const char *path,
                    bool recursive, wr_error_t *err) {
  _cleanup_free_ char *norm = clean_path(path, err), *name = NULL;
  _cleanup_close_ int dir = -1;
  struct stat st;

  if (norm == NULL)
    return wr_error_wrap(err, "remove");
  if (strcmp(norm, "/") == 0)
    return wr_error_set(err, EPERM, "remove: refusing to remove `/`");
  dir = wr_open_parent_in_root(c->rootfd, norm, &name, err);
  if (dir < 0)
    return wr_error_wrap(err, "remove");
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "remove `%s`", norm);
  /* wr_rm_rf_at's walk is the confined one files.h describes. */
  if (S_ISDIR(st.st_mode) && recursive) {
    if (wr_rm_rf_at(dir, name, err) < 0)
      return wr_error_wrap(err, "remove `%s`", norm);
  } else if (unlinkat(dir, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
    return wr_error_set(err, errno, "remove `%s`", norm);
  }
  return 0;
}

/* ---- write ------------------------------------------------------------ */

static void writer_free(struct wr_files_writer *w) {
  if (w->fd >= 0)
    close(w->fd);
  if (w->tmp != NULL && w->dirfd >= 0)
    unlinkat(w->dirfd, w->tmp, 0);
  if (w->dirfd >= 0)
    close(w->dirfd);
  free(w->tmp);
  free(w->name);
  free(w->path);
  free(w);
}

/* The target's directory (made with mkdir -p when parents), and refuse a
 * directory already standing at the target. */
static int open_target(const struct wr_files_ctx *c, bool parents,
                       struct wr_files_writer *w, wr_error_t *err) {
  _cleanup_free_ char *parent = split_parent(w->path, &w->name);
  struct stat st;

  if (parents)
    w->dirfd = wr_mkdir_p_in_root(c->rootfd, parent, 0755, c->id_base,
                                  c->id_base, err);
  else
    w->dirfd = wr_open_in_root(c->rootfd, parent, O_PATH | O_DIRECTORY, 0, err);
  if (w->dirfd < 0)
    return -1;
  if (fstatat(w->dirfd, w->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(st.st_mode))
    return wr_error_set(err, EISDIR, "`%s`", w->path);
  return 0;
}

/* A fresh temporary file next to the target (O_EXCL: never one the
 * sandbox planted), owned by id_base, with `mode`. */
static int create_tmp(const struct wr_files_ctx *c, struct wr_files_writer *w,
                      uint32_t mode, wr_error_t *err) {
  for (int i = 0; i < TMP_TRIES && w->fd < 0; i++) {
    free(w->tmp);
    w->tmp = wr_random_id(".wr-write-", 12);
    w->fd = openat(w->dirfd, w->tmp,
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w->fd < 0 && errno != EEXIST) {
      int e = errno;
      free(w->tmp);
      w->tmp = NULL;
      return wr_error_set(err, e, "create a temporary file");
    }
  }
  if (w->fd < 0)
    return wr_error_set(err, EEXIST, "create a temporary file");
  if (fchown(w->fd, c->id_base, c->id_base) < 0 || fchmod(w->fd, mode) < 0)
    return wr_error_set(err, errno, "set owner and mode");
  return 0;
}

int wr_files_write_begin(const struct wr_files_ctx *c, const char *path,
                         uint32_t mode, bool parents,
                         struct wr_files_writer **out, wr_error_t *err) {
  struct wr_files_writer *w;
  char *norm = NULL;

  *out = NULL;
  if (check_mode(mode, err) < 0 || (norm = clean_path(path, err)) == NULL)
    return wr_error_wrap(err, "write");
  if (strcmp(norm, "/") == 0) {
    free(norm);
    return wr_error_set(err, EISDIR, "write `/`");
  }
  w = xcalloc(1, sizeof(*w));
  w->dirfd = w->fd = -1;
  w->path = norm;
  if (open_target(c, parents, w, err) < 0 || create_tmp(c, w, mode, err) < 0) {
    wr_error_wrap(err, "write `%s`", w->path);
    writer_free(w);
    return -1;
  }
  *out = w;
  return 0;
}

int wr_files_writer_fd(const struct wr_files_writer *w) {
  return w->fd;
}

int wr_files_write_commit(struct wr_files_writer *w, wr_error_t *err) {
  int r = 0;

  if (close(steal_fd(&w->fd)) < 0)
    r = wr_error_set(err, errno, "write `%s`", w->path);
  else if (renameat(w->dirfd, w->tmp, w->dirfd, w->name) < 0)
    r = wr_error_set(err, errno, "write `%s`: rename into place", w->path);
  else {
    free(w->tmp);
    w->tmp = NULL;
  }
  writer_free(w);
  return r;
}

void wr_files_write_abort(struct wr_files_writer *w) {
  if (w != NULL)
    writer_free(w);
}
