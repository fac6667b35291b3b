/*
 * Copying overlay layers: a sandbox's upper directory into a snapshot's
 * layer (a capture), and layers onto one another (flattening a stack).
 *
 * A capture of a running sandbox is two walks of one function: the first
 * copies everything while the sandbox runs, the second, with the sandbox
 * frozen, copies only what changed since the first began (by ctime, which
 * every change to data, metadata or xattrs moves, and by the fields it
 * copied) and deletes what went. So the frozen pass costs one readdir and
 * one fstatat per entry plus the changes, not the data.
 *
 * The source is hostile: the sandbox owns every name in it and may change
 * it during the first pass. Every step is an *at() call on one final
 * component of a directory fd opened with O_NOFOLLOW, nothing is ever
 * followed, a file is checked to be the one that was stat'ed once opened,
 * and nesting is bounded (WR_LAYERS_MAX_NEST), so a planted symlink or a
 * swapped directory can make a pass fail but never reach outside.
 *
 * What is carried: regular files (data, mode with setuid/setgid, owner,
 * mtime), directories, symlinks, FIFOs, hard links among the files one
 * pass copies, whiteouts, and the xattrs overlayfs and programs use:
 * user.*, trusted.overlay.opaque and security.capability (a namespaced v3
 * capability of the sandbox's root becomes the v2 form, valid for
 * whichever sandbox mounts the layer, as an image's are). Other xattrs
 * (POSIX ACLs, which hold host ids, and overlayfs's own bookkeeping such
 * as origin file handles) and sockets are not.
 */
#include "runtime/layers.h"
#include "runtime/runtime.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#define OPAQUE_XATTR "trusted.overlay.opaque"
#define CAPS_XATTR "security.capability"
#define XATTR_LIST_MAX 65536
#define XATTR_VALUE_MAX 65536
#define NOBODY 65534u
#define COPY_CHUNK (8u << 20)
#define COPY_BUF (64u << 10) /* read/write when copy_file_range cannot */

bool wr_layer_is_whiteout(const struct stat *st) {
  return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/* ---- hard links --------------------------------------------------------- */

/* The files with several links one pass has written: source inode to the
 * path of its copy, so the next name of that inode becomes a link. */
struct link_ent {
  dev_t dev;
  ino_t ino;
  char *path;
};

struct link_map {
  struct link_ent *ents;
  size_t cap, len;
};

static size_t link_slot(const struct link_map *m, dev_t dev, ino_t ino) {
  size_t h = (size_t)(ino * 0x9e3779b97f4a7c15ull ^ dev) & (m->cap - 1);

  while (m->ents[h].path != NULL &&
         (m->ents[h].dev != dev || m->ents[h].ino != ino))
    h = (h + 1) & (m->cap - 1);
  return h;
}

static const char *link_find(const struct link_map *m, const struct stat *st) {
  if (m->cap == 0)
    return NULL;
  return m->ents[link_slot(m, st->st_dev, st->st_ino)].path;
}

static void link_add(struct link_map *m, const struct stat *st,
                     const char *path) {
  if (2 * (m->len + 1) > m->cap) {
    struct link_map bigger = {.cap = m->cap ? 2 * m->cap : 64};
    bigger.ents = xcalloc(bigger.cap, sizeof(*bigger.ents));
    for (size_t i = 0; i < m->cap; i++) {
      if (m->ents[i].path != NULL)
        bigger.ents[link_slot(&bigger, m->ents[i].dev, m->ents[i].ino)] =
            m->ents[i];
    }
    bigger.len = m->len;
    free(m->ents);
    *m = bigger;
  }
  size_t h = link_slot(m, st->st_dev, st->st_ino);
  if (m->ents[h].path != NULL)
    return;
  m->ents[h] = (struct link_ent){st->st_dev, st->st_ino, xstrdup(path)};
  m->len++;
}

static void link_map_free(struct link_map *m) {
  for (size_t i = 0; i < m->cap; i++)
    free(m->ents[i].path);
  free(m->ents);
}

/* ---- one walk ------------------------------------------------------------ */

struct walk {
  const struct wr_layer_opts *o;
  struct wr_layer_stats *st;
  int dst_root;
  char path[PATH_MAX]; /* of the directory being walked, "" at the top */
  size_t path_len;
  unsigned depth;
  struct link_map links;
  wr_error_t *err;
};

static uint32_t shift_id(const struct walk *w, uint32_t id) {
  if (w->o->id_base == 0)
    return id;
  if (id >= w->o->id_base && id - w->o->id_base < WR_ID_COUNT)
    return id - w->o->id_base;
  return NOBODY;
}

static int64_t ts_ns(const struct timespec *ts) {
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* dst (an entry written by an earlier pass) still matches src. */
static bool matches(const struct walk *w, const struct stat *s,
                    const struct stat *d) {
  return (s->st_mode & S_IFMT) == (d->st_mode & S_IFMT) &&
         (s->st_mode & 07777) == (d->st_mode & 07777) &&
         shift_id(w, s->st_uid) == d->st_uid &&
         shift_id(w, s->st_gid) == d->st_gid && s->st_size == d->st_size &&
         ts_ns(&s->st_mtim) == ts_ns(&d->st_mtim) &&
         ts_ns(&s->st_ctim) < w->o->since_ns;
}

/* The entry's path inside the layer, for messages and the link map. */
static const char *entry_path(struct walk *w, const char *name, char *buf,
                              size_t size) {
  int n = snprintf(buf, size, "%s%s%s", w->path, w->path_len ? "/" : "", name);

  return n >= 0 && (size_t)n < size ? buf : NULL;
}

/*
 * The walk recurses once per directory level, up to WR_LAYERS_MAX_NEST
 * deep, on a worker thread's stack, and the sandbox chooses how deep its
 * directories go. So the frames that recurse stay small (about 1 KiB
 * each): the functions with a path-sized buffer are leaves kept out of
 * them, whatever the compiler would inline.
 */
#define WR_NOINLINE __attribute__((noinline))

WR_NOINLINE static int fail(struct walk *w, int e, const char *what,
                            const char *name) {
  char p[PATH_MAX];

  const char *path = entry_path(w, name, p, sizeof(p));

  return wr_error_set(w->err, e, "%s `/%s`", what, path ? path : name);
}

/* A namespaced (v3) capability of the sandbox's root, as the v2 form that
 * holds for every namespace that maps host root (every sandbox mounting
 * the layer id-maps it); a v2 one is kept; others (another root's, or
 * junk) are dropped. Returns the size to write, 0 to drop. */
static size_t convert_caps(const struct walk *w, char *val, size_t len) {
  uint32_t magic, rootid;

  if (len < sizeof(magic))
    return 0;
  memcpy(&magic, val, sizeof(magic));
  if ((magic & VFS_CAP_REVISION_MASK) == VFS_CAP_REVISION_2 &&
      len == XATTR_CAPS_SZ_2)
    return len;
  if ((magic & VFS_CAP_REVISION_MASK) != VFS_CAP_REVISION_3 ||
      len != XATTR_CAPS_SZ_3)
    return 0;
  memcpy(&rootid, val + XATTR_CAPS_SZ_2, sizeof(rootid));
  if (w->o->id_base == 0 || rootid != w->o->id_base)
    return 0;
  magic = (magic & ~VFS_CAP_REVISION_MASK) | VFS_CAP_REVISION_2;
  memcpy(val, &magic, sizeof(magic));
  return XATTR_CAPS_SZ_2;
}

static bool xattr_carried(const char *name) {
  return wr_str_has_prefix(name, "user.") || strcmp(name, OPAQUE_XATTR) == 0 ||
         strcmp(name, CAPS_XATTR) == 0;
}

/* Copy the carried xattrs of the open file s to the open file d. */
static int copy_xattrs(struct walk *w, int s, int d, const char *name) {
  _cleanup_free_ char *list = NULL, *val = NULL;
  ssize_t n = flistxattr(s, NULL, 0);

  if (n < 0)
    return errno == ENOTSUP ? 0 : fail(w, errno, "list xattrs of", name);
  if (n == 0)
    return 0;
  if (n > XATTR_LIST_MAX)
    return fail(w, E2BIG, "too many xattrs on", name);
  list = xmalloc((size_t)n);
  val = xmalloc(XATTR_VALUE_MAX);
  n = flistxattr(s, list, (size_t)n);
  if (n < 0)
    return fail(w, errno, "list xattrs of", name);
  for (char *k = list; k < list + n; k += strlen(k) + 1) {
    ssize_t len;
    size_t put;
    if (!xattr_carried(k))
      continue;
    len = fgetxattr(s, k, val, XATTR_VALUE_MAX);
    if (len < 0 && errno == ENODATA)
      continue;
    if (len < 0)
      return fail(w, errno, "read an xattr of", name);
    put = strcmp(k, CAPS_XATTR) == 0 ? convert_caps(w, val, (size_t)len)
                                     : (size_t)len;
    if (strcmp(k, CAPS_XATTR) == 0 && put == 0)
      continue;
    if (fsetxattr(d, k, val, put, 0) < 0)
      return fail(w, errno, "set an xattr on", name);
  }
  return 0;
}

static bool is_opaque(int dirfd) {
  char v[4];
  ssize_t n = fgetxattr(dirfd, OPAQUE_XATTR, v, sizeof(v));

  return n == 1 && v[0] == 'y';
}

/* Owner, mode, times of an entry just written (fd open on it). The mode
 * comes after the owner: chown clears setuid. */
static int set_meta(struct walk *w, int fd, const struct stat *s,
                    const char *name) {
  struct timespec times[2] = {s->st_atim, s->st_mtim};

  if (fchown(fd, shift_id(w, s->st_uid), shift_id(w, s->st_gid)) < 0 ||
      fchmod(fd, s->st_mode & 07777) < 0 || futimens(fd, times) < 0)
    return fail(w, errno, "set the owner and mode of", name);
  return 0;
}

static int copy_data(struct walk *w, int s, int d, const char *name) {
  for (;;) {
    ssize_t n = copy_file_range(s, NULL, d, NULL, COPY_CHUNK, 0);
    if (n == 0)
      return 0;
    if (n > 0)
      continue;
    if (errno == EINTR)
      continue;
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
        errno != EOPNOTSUPP)
      return fail(w, errno, "copy", name);
    break;
  }
  /* A filesystem without copy_file_range between these two. The buffer
   * is the heap's: this runs at the bottom of a recursion as deep as the
   * sandbox made its directories (see WR_NOINLINE below). */
  _cleanup_free_ char *buf = xmalloc(COPY_BUF);
  for (;;) {
    ssize_t n = read(s, buf, COPY_BUF);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(w, errno, "read", name);
    if (n == 0)
      return 0;
    if (wr_write_all(d, buf, (size_t)n, w->err) < 0)
      return fail(w, w->err->code, "write", name);
  }
}

/* Open the source file stat'ed as st, and make sure it is that file. */
static int open_source(struct walk *w, int dirfd, const char *name,
                       const struct stat *st) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat now;

  if (fd < 0)
    return errno == ENOENT || errno == ELOOP ? -2
                                             : fail(w, errno, "open", name);
  if (fstat(fd, &now) < 0 || now.st_ino != st->st_ino ||
      now.st_dev != st->st_dev || !S_ISREG(now.st_mode)) {
    close(fd);
    return -2; /* replaced meanwhile: the next pass sees what is there */
  }
  return fd;
}

WR_NOINLINE static int write_file(struct walk *w, int s, int d,
                                  const char *name, const struct stat *st) {
  _cleanup_close_ int in = open_source(w, s, name, st), out = -1;
  char p[PATH_MAX];

  if (in == -2)
    return 0;
  if (in < 0)
    return -1;
  out = openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               0600);
  if (out < 0)
    return fail(w, errno, "create", name);
  if (copy_data(w, in, out, name) < 0 || copy_xattrs(w, in, out, name) < 0 ||
      set_meta(w, out, st, name) < 0)
    return -1;
  if (st->st_nlink > 1 && entry_path(w, name, p, sizeof(p)) != NULL)
    link_add(&w->links, st, p);
  return 0;
}

WR_NOINLINE static int write_symlink(struct walk *w, int s, int d,
                                     const char *name, const struct stat *st) {
  char target[PATH_MAX];
  struct timespec times[2] = {st->st_atim, st->st_mtim};
  ssize_t n = readlinkat(s, name, target, sizeof(target) - 1);

  if (n < 0)
    return errno == ENOENT || errno == EINVAL ? 0
                                              : fail(w, errno, "read", name);
  target[n] = '\0';
  if (symlinkat(target, d, name) < 0 ||
      fchownat(d, name, shift_id(w, st->st_uid), shift_id(w, st->st_gid),
               AT_SYMLINK_NOFOLLOW) < 0 ||
      utimensat(d, name, times, AT_SYMLINK_NOFOLLOW) < 0)
    return fail(w, errno, "make the symlink", name);
  return 0;
}

static int write_fifo(struct walk *w, int d, const char *name,
                      const struct stat *st) {
  struct timespec times[2] = {st->st_atim, st->st_mtim};

  if (mknodat(d, name, S_IFIFO | 0600, 0) < 0 ||
      fchownat(d, name, shift_id(w, st->st_uid), shift_id(w, st->st_gid),
               AT_SYMLINK_NOFOLLOW) < 0 ||
      fchmodat(d, name, st->st_mode & 07777, 0) < 0 ||
      utimensat(d, name, times, AT_SYMLINK_NOFOLLOW) < 0)
    return fail(w, errno, "make the FIFO", name);
  return 0;
}

static int remove_entry(struct walk *w, int d, const char *name) {
  wr_error_t e;

  if (wr_rm_rf_at(d, name, &e) < 0)
    return fail(w, e.code, "remove", name);
  return 0;
}

/* A regular file, symlink or FIFO. */
static int sync_leaf(struct walk *w, int s, int d, const char *name,
                     const struct stat *ss, const struct stat *ds) {
  const char *linked = S_ISREG(ss->st_mode) && ss->st_nlink > 1
                           ? link_find(&w->links, ss)
                           : NULL;

  if (ds != NULL && linked == NULL && matches(w, ss, ds))
    return 0;
  if (ds != NULL && remove_entry(w, d, name) < 0)
    return -1;
  w->st->copied++;
  if (linked != NULL) {
    w->st->links++;
    if (linkat(w->dst_root, linked, d, name, 0) < 0)
      return fail(w, errno, "link", name);
    return 0;
  }
  if (S_ISREG(ss->st_mode))
    return write_file(w, s, d, name, ss);
  if (S_ISLNK(ss->st_mode))
    return write_symlink(w, s, d, name, ss);
  return write_fifo(w, d, name, ss);
}

static int sync_whiteout(struct walk *w, int d, const char *name,
                         const struct stat *ds) {
  w->st->whiteouts++;
  if (ds != NULL && wr_layer_is_whiteout(ds))
    return 0;
  if (ds != NULL && remove_entry(w, d, name) < 0)
    return -1;
  w->st->copied++;
  if (mknodat(d, name, S_IFCHR | 0600, makedev(0, 0)) < 0)
    return fail(w, errno, "make the whiteout", name);
  return 0;
}

static int sync_dir(struct walk *w, int s, int d, const char *name,
                    const struct stat *ss, const struct stat *ds);

static int sync_entry(struct walk *w, int s, int d, const char *name) {
  struct stat ss, ds;
  bool have;

  if (fstatat(s, name, &ss, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : fail(w, errno, "stat", name);
  have = fstatat(d, name, &ds, AT_SYMLINK_NOFOLLOW) == 0;
  if (!have && errno != ENOENT)
    return fail(w, errno, "stat the copy of", name);
  if (wr_layer_is_whiteout(&ss))
    return sync_whiteout(w, d, name, have ? &ds : NULL);
  if (S_ISDIR(ss.st_mode)) {
    w->st->dirs++;
    return sync_dir(w, s, d, name, &ss, have ? &ds : NULL);
  }
  if (!S_ISREG(ss.st_mode) && !S_ISLNK(ss.st_mode) && !S_ISFIFO(ss.st_mode)) {
    w->st->skipped++;
    return 0;
  }
  w->st->files++;
  if (S_ISREG(ss.st_mode))
    w->st->bytes += (uint64_t)ss.st_size;
  return sync_leaf(w, s, d, name, &ss, have ? &ds : NULL);
}

struct pair {
  struct walk *w;
  int other; /* the source for prune, the copy for walk_children */
};

static int prune_entry(int d, const char *name, void *arg, wr_error_t *err) {
  struct pair *p = arg;
  struct stat st;

  (void)err; /* p->w->err, the same */
  if (fstatat(p->other, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
    return remove_entry(p->w, d, name);
  return 0;
}

/* Mirror mode, in a directory that changed: what the copy has that the
 * source no longer has goes. */
static int prune(struct walk *w, int s, int d) {
  struct pair p = {w, s};

  return wr_dir_each(d, prune_entry, &p, w->err);
}

static int child_entry(int s, const char *name, void *arg, wr_error_t *err) {
  struct pair *p = arg;

  (void)err; /* p->w->err, the same */
  return sync_entry(p->w, s, p->other, name);
}

static int walk_children(struct walk *w, int s, int d) {
  struct pair p = {w, d};

  return wr_dir_each(s, child_entry, &p, w->err);
}

/* Open (making it if needed) the copy of directory `name`. A non-directory
 * in the way goes, and so does a directory an opaque one replaces. */
static int open_dst_dir(struct walk *w, int s_child, int d, const char *name,
                        const struct stat *ds, bool *fresh) {
  int fd;

  *fresh = ds == NULL;
  if (ds != NULL &&
      (!S_ISDIR(ds->st_mode) || (w->o->merge && is_opaque(s_child)))) {
    if (remove_entry(w, d, name) < 0)
      return -1;
    *fresh = true;
  }
  if (*fresh && mkdirat(d, name, 0700) < 0)
    return fail(w, errno, "make the directory", name);
  fd = openat(d, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fail(w, errno, "open the copy of", name);
  return fd;
}

/* Descend: path and depth follow the walk. */
static int enter(struct walk *w, const char *name, size_t *saved) {
  size_t n = strlen(name);

  *saved = w->path_len;
  if (w->depth + 1 > WR_LAYERS_MAX_NEST)
    return fail(w, ELOOP, "directories nested too deep at", name);
  if (w->path_len + n + 2 > sizeof(w->path))
    return fail(w, ENAMETOOLONG, "path too long at", name);
  w->depth++;
  if (w->path_len)
    w->path[w->path_len++] = '/';
  memcpy(w->path + w->path_len, name, n + 1);
  w->path_len += n;
  return 0;
}

static void leave(struct walk *w, size_t saved) {
  w->depth--;
  w->path_len = saved;
  w->path[saved] = '\0';
}

/* A directory's metadata goes on after its children (which move its
 * mtime), and only when it changed. */
static int dir_meta(struct walk *w, int s_child, int d_child, const char *name,
                    const struct stat *ss, bool fresh) {
  struct stat now;

  if (fstat(d_child, &now) < 0)
    return fail(w, errno, "stat the copy of", name);
  if (!fresh && ts_ns(&ss->st_ctim) < w->o->since_ns &&
      (ss->st_mode & 07777) == (now.st_mode & 07777) &&
      ts_ns(&ss->st_mtim) == ts_ns(&now.st_mtim))
    return 0;
  if (!fresh && !w->o->merge && !is_opaque(s_child) && is_opaque(d_child) &&
      fremovexattr(d_child, OPAQUE_XATTR) < 0)
    return fail(w, errno, "clear the opaque mark of", name);
  if (copy_xattrs(w, s_child, d_child, name) < 0)
    return -1;
  return set_meta(w, d_child, ss, name);
}

static int sync_dir(struct walk *w, int s, int d, const char *name,
                    const struct stat *ss, const struct stat *ds) {
  _cleanup_close_ int sc = -1, dc = -1;
  struct stat now;
  bool fresh;
  size_t saved = 0;
  int r;

  sc = openat(s, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sc < 0)
    return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
               ? 0
               : fail(w, errno, "open", name);
  if (fstat(sc, &now) < 0 || now.st_ino != ss->st_ino)
    return 0; /* replaced meanwhile: the next pass sees what is there */
  if ((dc = open_dst_dir(w, sc, d, name, ds, &fresh)) < 0)
    return -1;
  if (fresh)
    w->st->copied++;
  if (enter(w, name, &saved) < 0)
    return -1;
  r = 0;
  if (!fresh && !w->o->merge &&
      (ts_ns(&ss->st_ctim) >= w->o->since_ns ||
       ts_ns(&ss->st_mtim) != ts_ns(&ds->st_mtim)))
    r = prune(w, sc, dc);
  if (r == 0)
    r = walk_children(w, sc, dc);
  leave(w, saved);
  return r < 0 ? -1 : dir_meta(w, sc, dc, name, ss, fresh);
}

int wr_layer_sync(int src, int dst, const struct wr_layer_opts *opts,
                  struct wr_layer_stats *stats, wr_error_t *err) {
  struct walk w = {.o = opts, .st = stats, .dst_root = dst, .err = err};
  struct stat ss, ds;
  int r;

  memset(stats, 0, sizeof(*stats));
  if (fstat(src, &ss) < 0 || fstat(dst, &ds) < 0)
    return wr_error_set(err, errno, "stat a layer");
  if (!opts->merge && ts_ns(&ss.st_ctim) >= opts->since_ns &&
      prune(&w, src, dst) < 0) {
    link_map_free(&w.links);
    return -1;
  }
  r = walk_children(&w, src, dst);
  if (r == 0)
    r = dir_meta(&w, src, dst, ".", &ss, opts->since_ns == 0);
  link_map_free(&w.links);
  return r;
}

/* ---- measuring ------------------------------------------------------------
 */

struct measure {
  unsigned depth;
  struct wr_layer_stats *st;
};

static int measure_dir(int fd, unsigned depth, struct wr_layer_stats *st,
                       wr_error_t *err);

static int measure_entry(int fd, const char *name, void *arg, wr_error_t *err) {
  struct measure *m = arg;
  struct stat s;

  if (fstatat(fd, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  if (S_ISDIR(s.st_mode)) {
    _cleanup_close_ int c =
        openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    m->st->dirs++;
    return c >= 0 ? measure_dir(c, m->depth + 1, m->st, err) : 0;
  }
  if (wr_layer_is_whiteout(&s)) {
    m->st->whiteouts++;
  } else {
    m->st->files++;
    if (S_ISREG(s.st_mode))
      m->st->bytes += (uint64_t)s.st_size;
  }
  return 0;
}

static int measure_dir(int fd, unsigned depth, struct wr_layer_stats *st,
                       wr_error_t *err) {
  struct measure m = {depth, st};

  if (depth > WR_LAYERS_MAX_NEST)
    return wr_error_setx(err, ELOOP, "a layer nests too deep");
  return wr_dir_each(fd, measure_entry, &m, err);
}

int wr_layer_measure(const char *dir, struct wr_layer_stats *stats,
                     wr_error_t *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int r;

  memset(stats, 0, sizeof(*stats));
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", dir);
  r = measure_dir(fd, 0, stats, err);
  close(fd);
  return r;
}

int wr_layer_flatten(const char *const *layers, size_t n, const char *dst,
                     struct wr_layer_stats *stats, wr_error_t *err) {
  _cleanup_close_ int d = -1;
  struct wr_layer_opts o = {.merge = true};
  struct wr_layer_stats one;

  memset(stats, 0, sizeof(*stats));
  if (mkdir(dst, 0755) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", dst);
  d = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d < 0)
    return wr_error_set(err, errno, "open `%s`", dst);
  for (size_t i = 0; i < n; i++) {
    _cleanup_close_ int s =
        open(layers[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0)
      return wr_error_set(err, errno, "open `%s`", layers[i]);
    if (wr_layer_sync(s, d, &o, &one, err) < 0)
      return wr_error_wrap(err, "flatten `%s`", layers[i]);
    stats->copied += one.copied;
  }
  return 0;
}
