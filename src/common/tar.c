/*
 * tar archives of trees inside a sandbox's root, and the in-root path
 * helpers the files API shares (see tar.h).
 *
 * Everything that touches the filesystem does so through a directory fd
 * that was resolved in the root (openat2 RESOLVE_IN_ROOT) and an *at()
 * call on a single final component that is not followed. Nothing builds a
 * host path.
 */
#include "common/common.h"
#include "common/tar.h"
#include "common/tar_sparse.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#define BLOCK 512
#define CHUNK 65536
#define META_MAX (1u << 20)   /* a pax header or a GNU long name */
#define NAMES_MAX (64u << 20) /* directory entry names held by a walk */
#define LATER_MAX 65536       /* directories whose mode/mtime wait */
#define NOBODY 65534u

/* The POSIX ustar header. GNU tar uses the same layout. */
struct ustar {
  char name[100];
  char mode[8];
  char uid[8];
  char gid[8];
  char size[12];
  char mtime[12];
  char chksum[8];
  char typeflag;
  char linkname[100];
  char magic[6];
  char version[2];
  char uname[32];
  char gname[32];
  char devmajor[8];
  char devminor[8];
  char prefix[155];
  char pad[12];
};
_Static_assert(sizeof(struct ustar) == BLOCK, "a tar header is one block");

static const char zero_block[BLOCK];

/* ---- in-root paths ---------------------------------------------------- */

/* Remove the last "/component" of an absolute path being built. */
static void drop_last(wr_buf_t *b) {
  while (b->len > 0 && b->data[b->len - 1] != '/')
    b->len--;
  if (b->len > 0)
    b->len--;
  if (b->data != NULL)
    b->data[b->len] = '\0';
}

char *wr_path_normalize(const char *path) {
  wr_buf_t b;
  const char *p = path;

  wr_buf_init(&b);
  while (*p != '\0') {
    const char *start;
    size_t n;

    while (*p == '/')
      p++;
    start = p;
    while (*p != '\0' && *p != '/')
      p++;
    n = (size_t)(p - start);
    if (n == 0 || (n == 1 && start[0] == '.'))
      continue;
    if (n == 2 && start[0] == '.' && start[1] == '.') {
      drop_last(&b);
      continue;
    }
    wr_buf_append(&b, "/", 1);
    wr_buf_append(&b, start, n);
  }
  if (b.len == 0)
    wr_buf_puts(&b, "/");
  return wr_buf_steal(&b, NULL);
}

/*
 * One step of mkdir -p: `prefix` (the path up to and including `name`) is
 * resolved in the root; only when it is missing is `name` created in `cur`,
 * the directory its parent resolved to. A name that exists but does not
 * resolve (a dangling symlink) is an error, as for mkdir -p.
 */
static int mkdir_step(int rootfd, int cur, const char *prefix, const char *name,
                      mode_t mode, uid_t uid, gid_t gid, wr_error_t *err) {
  wr_error_t first = {0};
  int fd = wr_open_in_root(rootfd, prefix, O_PATH | O_DIRECTORY, 0, &first);

  if (fd >= 0)
    return fd;
  if (first.code != ENOENT) {
    if (err != NULL)
      *err = first;
    return -1;
  }
  if (mkdirat(cur, name, mode) < 0) {
    if (errno != EEXIST)
      return wr_error_set(err, errno, "mkdir `%s`", prefix);
    return wr_open_in_root(rootfd, prefix, O_PATH | O_DIRECTORY, 0, err);
  }
  fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open new directory `%s`", prefix);
  if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0) {
    int e = errno;
    close(fd);
    return wr_error_set(err, e, "set owner and mode of `%s`", prefix);
  }
  return fd;
}

int wr_mkdir_p_in_root(int rootfd, const char *path, mode_t mode, uid_t uid,
                       gid_t gid, wr_error_t *err) {
  _cleanup_free_ char *norm = NULL;
  _cleanup_close_ int cur = -1;
  char *p;

  if (wr_path_check(path, err) < 0)
    return -1;
  norm = wr_path_normalize(path);
  cur = wr_open_in_root(rootfd, "/", O_PATH | O_DIRECTORY, 0, err);
  if (cur < 0)
    return -1;
  for (p = norm + 1; *p != '\0';) {
    char *end = strchrnul(p, '/');
    char saved = *end;
    int next;

    *end = '\0';
    next = mkdir_step(rootfd, cur, norm, p, mode, uid, gid, err);
    *end = saved;
    if (next < 0)
      return -1;
    close(cur);
    cur = next;
    p = saved == '\0' ? end : end + 1;
  }
  return steal_fd(&cur);
}

/* ---- header fields ---------------------------------------------------- */

static void put_octal(char *field, size_t digits, uint64_t v) {
  for (size_t i = digits; i > 0; i--, v >>= 3)
    field[i - 1] = (char)('0' + (v & 7));
}

/* Octal when the value fits the field with its NUL, otherwise the base-256
 * form (GNU tar, bsdtar and Python all read it). */
static void put_num(char *field, size_t n, uint64_t v) {
  if (v < (1ull << (3 * (n - 1)))) {
    put_octal(field, n - 1, v);
    field[n - 1] = '\0';
    return;
  }
  memset(field, 0, n);
  for (size_t i = n - 1; i > 0; i--, v >>= 8)
    field[i] = (char)(v & 0xff);
  field[0] = (char)0x80;
}

/*
 * A numeric field, strictly: base-256 (positive only), or octal digits
 * with optional leading spaces and trailing NULs/spaces and nothing else.
 * An all-blank field is 0.
 */
static int parse_num(const char *field, size_t n, uint64_t *out) {
  const unsigned char *f = (const unsigned char *)field;
  uint64_t v = 0;
  size_t i = 0;

  if ((f[0] & 0xc0) == 0x80) {
    v = f[0] & 0x3f;
    for (i = 1; i < n; i++) {
      if (v > (UINT64_MAX >> 8))
        return -1;
      v = (v << 8) | f[i];
    }
    *out = v;
    return 0;
  }
  while (i < n && f[i] == ' ')
    i++;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
    if (v > (UINT64_MAX >> 3))
      return -1;
    v = v * 8 + (uint64_t)(f[i] - '0');
  }
  while (i < n && (f[i] == ' ' || f[i] == '\0'))
    i++;
  if (i != n)
    return -1;
  *out = v;
  return 0;
}

/* The unsigned and (for old writers) signed sums of a header, with the
 * checksum field counted as spaces. */
static void header_sums(const struct ustar *h, uint64_t *usum, int64_t *ssum) {
  const unsigned char *u = (const unsigned char *)h;
  size_t at = offsetof(struct ustar, chksum);

  *usum = 0;
  *ssum = 0;
  for (size_t i = 0; i < BLOCK; i++) {
    bool blank = i >= at && i < at + sizeof(h->chksum);
    *usum += blank ? ' ' : u[i];
    *ssum += blank ? ' ' : (signed char)u[i];
  }
}

static void set_checksum(struct ustar *h) {
  uint64_t usum;
  int64_t ssum;

  memset(h->chksum, ' ', sizeof(h->chksum));
  header_sums(h, &usum, &ssum);
  put_octal(h->chksum, 6, usum);
  h->chksum[6] = '\0';
}

static int check_header(const struct ustar *h, wr_error_t *err) {
  uint64_t want, usum;
  int64_t ssum;

  if (parse_num(h->chksum, sizeof(h->chksum), &want) < 0)
    return wr_error_set(err, 0, "malformed header checksum field");
  header_sums(h, &usum, &ssum);
  if (want != usum && (int64_t)want != ssum)
    return wr_error_set(err, 0,
                        "header checksum mismatch (not a tar "
                        "archive, or a corrupt one)");
  return 0;
}

static uint64_t pad_of(uint64_t size) {
  return (BLOCK - size % BLOCK) % BLOCK;
}

/* ---- create: output --------------------------------------------------- */

/* Where the archive goes; a measuring walk (wr_tar_measure) discards it. */
struct out {
  int fd;
  bool discard;
  wr_buf_t buf;
};

static int out_flush(struct out *o, wr_error_t *err) {
  int r = o->discard ? 0 : wr_write_all(o->fd, o->buf.data, o->buf.len, err);

  wr_buf_reset(&o->buf);
  return r < 0 ? wr_error_wrap(err, "write archive") : 0;
}

static int out_put(struct out *o, const void *p, size_t n, wr_error_t *err) {
  if (o->discard)
    return 0;
  wr_buf_append(&o->buf, p, n);
  return o->buf.len >= CHUNK ? out_flush(o, err) : 0;
}

static int out_zeros(struct out *o, uint64_t n, wr_error_t *err) {
  while (n > 0) {
    size_t k = (size_t)WR_MIN(n, (uint64_t)BLOCK);
    if (out_put(o, zero_block, k, err) < 0)
      return -1;
    n -= k;
  }
  return 0;
}

/* What one header says. */
struct meta {
  const char *name; /* archive name; directories end in '/' */
  const char *link; /* symlink target or NULL */
  char type;
  uint32_t mode, uid, gid;
  uint64_t size; /* bytes of data in the archive */
  int64_t mtime;
  const struct wr_sparse *sparse; /* a file kept with its holes, or NULL */
};

static size_t decimal_digits(size_t v) {
  size_t d = 1;

  while (v >= 10) {
    v /= 10;
    d++;
  }
  return d;
}

/* A pax record "LEN key=value\n", where LEN counts itself. */
static void pax_record(wr_buf_t *b, const char *key, const char *val) {
  size_t base = strlen(key) + strlen(val) + 3;
  size_t len = base + decimal_digits(base);

  if (decimal_digits(len) > decimal_digits(base))
    len++;
  wr_buf_printf(b, "%zu %s=%s\n", len, key, val);
}

static void fill_header(struct ustar *h, const struct meta *m) {
  memset(h, 0, sizeof(*h));
  memcpy(h->name, m->name, WR_MIN(strlen(m->name), sizeof(h->name)));
  put_num(h->mode, sizeof(h->mode), m->mode & 07777);
  put_num(h->uid, sizeof(h->uid), m->uid);
  put_num(h->gid, sizeof(h->gid), m->gid);
  put_num(h->size, sizeof(h->size), m->size);
  put_num(h->mtime, sizeof(h->mtime), m->mtime < 0 ? 0 : (uint64_t)m->mtime);
  h->typeflag = m->type;
  if (m->link != NULL)
    memcpy(h->linkname, m->link, WR_MIN(strlen(m->link), sizeof(h->linkname)));
  memcpy(h->magic, "ustar", sizeof(h->magic));
  memcpy(h->version, "00", sizeof(h->version));
  set_checksum(h);
}

/*
 * The pax records an entry needs: a name or link target that does not fit
 * the ustar fields, and for a sparse file GNU's 1.0 records (the real name
 * is GNU.sparse.name, so a reader that knows nothing of sparse files
 * extracts the map and data under GNUSparseFile.0/ rather than a wrong
 * file under the right name).
 */
static void pax_records(const struct meta *m, wr_buf_t *rec) {
  char num[24];

  if (m->sparse != NULL) {
    snprintf(num, sizeof(num), "%llu", (unsigned long long)m->sparse->realsize);
    pax_record(rec, "GNU.sparse.major", "1");
    pax_record(rec, "GNU.sparse.minor", "0");
    pax_record(rec, "GNU.sparse.name", m->name);
    pax_record(rec, "GNU.sparse.realsize", num);
  } else if (strlen(m->name) > sizeof(((struct ustar *)0)->name)) {
    pax_record(rec, "path", m->name);
  }
  if (m->link != NULL &&
      strlen(m->link) > sizeof(((struct ustar *)0)->linkname))
    pax_record(rec, "linkpath", m->link);
}

/* A pax 'x' header holding `rec`. */
static int emit_pax(struct out *o, int64_t mtime, const wr_buf_t *rec,
                    wr_error_t *err) {
  struct meta pm = {.name = "././@PaxHeader",
                    .type = 'x',
                    .mode = 0644,
                    .mtime = mtime,
                    .size = rec->len};
  struct ustar h;
  int r;

  fill_header(&h, &pm);
  r = out_put(o, &h, sizeof(h), err);
  if (r == 0)
    r = out_put(o, rec->data, rec->len, err);
  if (r == 0)
    r = out_zeros(o, pad_of(rec->len), err);
  return r;
}

/* The ustar name of a sparse file, as GNU tar makes it: DIR/GNUSparseFile.0/
 * BASE, or without DIR when that does not fit. */
static char *sparse_header_name(const char *name) {
  const char *slash = strrchr(name, '/');
  size_t dirlen = slash != NULL ? (size_t)(slash - name) : 0;
  const char *base = slash != NULL ? slash + 1 : name;

  if (dirlen > 0 && dirlen + strlen(base) + 17 <= 100)
    return xasprintf("%.*s/GNUSparseFile.0/%s", (int)dirlen, name, base);
  return xasprintf("GNUSparseFile.0/%s", base);
}

static int emit_header(struct out *o, const struct meta *m, wr_error_t *err) {
  _cleanup_free_ char *sparse_name = NULL;
  struct meta hm = *m;
  struct ustar h;
  wr_buf_t rec;
  int r = 0;

  wr_buf_init(&rec);
  pax_records(m, &rec);
  if (rec.len > 0)
    r = emit_pax(o, m->mtime, &rec, err);
  wr_buf_free(&rec);
  if (r < 0)
    return -1;
  if (m->sparse != NULL)
    hm.name = sparse_name = sparse_header_name(m->name);
  fill_header(&h, &hm);
  return out_put(o, &h, sizeof(h), err);
}

/* ---- create: the walk ------------------------------------------------- */

/* A directory on the walk's path: who it is, and the names still to do. */
struct frame {
  dev_t dev;
  ino_t ino;
  char *names; /* NUL-separated */
  size_t len, next;
  size_t rel_len; /* length of its entries' archive name prefix */
};

struct walk {
  const struct wr_tar_ctx *c;
  struct out out;
  wr_buf_t rel; /* archive name of the current entry */
  struct frame *stack;
  size_t depth, cap;
  dev_t dev; /* the archived tree's filesystem */
  size_t names_held;
  struct wr_tar_stats stats; /* what went into the archive */
};

static uint32_t id_out(const struct wr_tar_ctx *c, uint32_t host) {
  if (!c->map_ids)
    return host;
  if (host >= c->id_base && host - c->id_base < c->id_count)
    return host - c->id_base;
  return NOBODY;
}

static struct meta meta_of(const struct walk *wk, const struct stat *st,
                           char type) {
  struct meta m = {
      .name = wk->rel.data,
      .type = type,
      .mode = st->st_mode & 07777,
      .uid = id_out(wk->c, st->st_uid),
      .gid = id_out(wk->c, st->st_gid),
      .mtime = st->st_mtim.tv_sec,
  };
  return m;
}

static void rel_set(struct walk *wk, size_t len, const char *name) {
  wk->rel.len = len;
  wk->rel.data[len] = '\0';
  wr_buf_puts(&wk->rel, name);
}

/* Reopen the inode behind an O_PATH fd: /proc/self/fd/N (our own /proc)
 * names exactly that inode, so a type checked on the O_PATH fd holds. */
static int reopen(int pathfd, int flags) {
  char proc[64];

  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pathfd);
  return open(proc, flags | O_NOCTTY | O_CLOEXEC);
}

/*
 * Open a regular file for reading without ever opening anything else: an
 * O_PATH fd pins the inode, fstat checks it, and reopen() opens exactly
 * that inode. A name swapped for a FIFO or a device node is skipped
 * (*skip) instead of being opened.
 */
static int open_regular(int dir, const char *name, struct stat *st, bool *skip,
                        wr_error_t *err) {
  _cleanup_close_ int pfd = -1;
  int fd;

  *skip = false;
  pfd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0 || fstat(pfd, st) < 0 || !S_ISREG(st->st_mode)) {
    if (pfd < 0 && errno != ENOENT && errno != ELOOP)
      return wr_error_set(err, errno, "open `%s`", name);
    *skip = true;
    return -1;
  }
  fd = reopen(pfd, O_RDONLY);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  return fd;
}

/* Copy exactly `len` bytes from offset `off`: a file that shrank while
 * being read is padded with zeros, one that grew is cut, so the archive
 * stays valid. */
static int copy_range(struct out *o, int fd, uint64_t off, uint64_t len,
                      wr_error_t *err) {
  uint64_t left = len;

  if (o->discard)
    return 0;
  while (left > 0) {
    ssize_t n;

    wr_buf_reserve(&o->buf, CHUNK);
    n = pread(fd, o->buf.data + o->buf.len, (size_t)WR_MIN(left, CHUNK),
              (off_t)off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return wr_error_set(err, errno, "read");
    if (n == 0)
      break;
    o->buf.len += (size_t)n;
    o->buf.data[o->buf.len] = '\0';
    left -= (uint64_t)n;
    off += (uint64_t)n;
    if (o->buf.len >= CHUNK && out_flush(o, err) < 0)
      return -1;
  }
  return out_zeros(o, left, err);
}

/* A file with holes, in GNU's PAX 1.0 form: the map, then only the data
 * segments, so holes cost nothing in the archive. */
static int emit_sparse(struct out *o, int fd, struct meta *m,
                       const struct wr_sparse *sp, wr_error_t *err) {
  wr_buf_t map;
  int r;

  wr_buf_init(&map);
  wr_sparse_map_text(sp, &map);
  m->sparse = sp;
  m->size = map.len + sp->data;
  r = emit_header(o, m, err);
  if (r == 0)
    r = out_put(o, map.data, map.len, err);
  wr_buf_free(&map);
  for (size_t i = 0; r == 0 && i < sp->n; i++)
    r = copy_range(o, fd, sp->v[i].off, sp->v[i].len, err);
  if (r == 0)
    r = out_zeros(o, pad_of(m->size), err);
  return r;
}

static int emit_file(struct walk *wk, int dir, const char *name,
                     wr_error_t *err) {
  _cleanup_close_ int fd = -1;
  struct wr_sparse sp;
  struct stat st;
  struct meta m;
  bool skip;
  int r;

  fd = open_regular(dir, name, &st, &skip, err);
  if (fd < 0)
    return skip ? 0 : -1;
  m = meta_of(wk, &st, '0');
  if (wr_sparse_scan(fd, (uint64_t)st.st_size, &sp, err) < 0)
    return wr_error_wrap(err, "`%s`", wk->rel.data);
  if (sp.data < sp.realsize) {
    r = emit_sparse(&wk->out, fd, &m, &sp, err);
    wk->stats.bytes += sp.data;
  } else {
    m.size = (uint64_t)st.st_size;
    r = emit_header(&wk->out, &m, err);
    if (r == 0)
      r = copy_range(&wk->out, fd, 0, m.size, err);
    if (r == 0)
      r = out_zeros(&wk->out, pad_of(m.size), err);
    wk->stats.bytes += m.size;
  }
  wk->stats.files++;
  wr_sparse_free(&sp);
  return r < 0 ? wr_error_wrap(err, "`%s`", wk->rel.data) : 0;
}

static int emit_symlink(struct walk *wk, int dir, const char *name,
                        const struct stat *st, wr_error_t *err) {
  char target[PATH_MAX];
  struct meta m;
  ssize_t n = readlinkat(dir, name, target, sizeof(target) - 1);

  if (n < 0)
    return errno == ENOENT || errno == EINVAL
               ? 0
               : wr_error_set(err, errno, "readlink `%s`", wk->rel.data);
  target[n] = '\0';
  m = meta_of(wk, st, '2');
  m.link = target;
  wk->stats.links++;
  return emit_header(&wk->out, &m, err);
}

/* A directory's header; *child gets it opened for the walk to descend,
 * unless it is a mount point or changed since it was seen. */
static int emit_dir(struct walk *wk, int dir, const char *name,
                    const struct stat *st, int *child, wr_error_t *err) {
  struct meta m;
  struct stat now;
  int fd;

  wr_buf_puts(&wk->rel, "/");
  m = meta_of(wk, st, '5');
  wk->stats.dirs++;
  if (emit_header(&wk->out, &m, err) < 0)
    return -1;
  if (st->st_dev != wk->dev)
    return 0;
  fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
               ? 0
               : wr_error_set(err, errno, "open `%s`", wk->rel.data);
  if (fstat(fd, &now) < 0 || now.st_ino != st->st_ino ||
      now.st_dev != st->st_dev) {
    close(fd);
    return 0;
  }
  *child = fd;
  return 0;
}

static int emit_child(struct walk *wk, int dir, const char *name, int *child,
                      wr_error_t *err) {
  struct stat st;

  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT
               ? 0
               : wr_error_set(err, errno, "stat `%s`", wk->rel.data);
  switch (st.st_mode & S_IFMT) {
  case S_IFREG:
    return emit_file(wk, dir, name, err);
  case S_IFLNK:
    return emit_symlink(wk, dir, name, &st, err);
  case S_IFIFO: {
    struct meta m = meta_of(wk, &st, '6');
    wk->stats.files++;
    return emit_header(&wk->out, &m, err);
  }
  case S_IFDIR:
    return emit_dir(wk, dir, name, &st, child, err);
  default:
    return 0; /* sockets and device nodes are not archived */
  }
}

/* Every name in directory `fd`, read at once so the walk can close the
 * directory while it is below it. */
static int read_names(struct walk *wk, int fd, struct frame *f,
                      wr_error_t *err) {
  int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  struct dirent *de;
  wr_buf_t b;
  DIR *d;

  if (dupfd < 0 || (d = fdopendir(dupfd)) == NULL) {
    int e = errno;
    if (dupfd >= 0)
      close(dupfd);
    return wr_error_set(err, e, "read directory `%s`", wk->rel.data);
  }
  wr_buf_init(&b);
  while ((errno = 0, de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      wr_buf_append(&b, de->d_name, strlen(de->d_name) + 1);
  }
  if (errno != 0) {
    int e = errno;
    closedir(d);
    wr_buf_free(&b);
    return wr_error_set(err, e, "read directory `%s`", wk->rel.data);
  }
  closedir(d);
  wk->names_held += b.len;
  f->names = wr_buf_steal(&b, &f->len);
  f->next = 0;
  if (wk->names_held > NAMES_MAX)
    return wr_error_set(err, E2BIG, "directories too large to archive");
  return 0;
}

static int push(struct walk *wk, int fd, wr_error_t *err) {
  struct frame *f;
  struct stat st;

  if (fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "stat `%s`", wk->rel.data);
  if (wk->depth == wk->cap) {
    wk->cap = wk->cap ? wk->cap * 2 : 16;
    wk->stack = xrealloc(wk->stack, wk->cap * sizeof(*wk->stack));
  }
  f = &wk->stack[wk->depth++];
  memset(f, 0, sizeof(*f));
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  f->rel_len = wk->rel.len;
  return read_names(wk, fd, f, err);
}

/*
 * Done with the directory on top: drop it and go back to its parent
 * through "..", which must be the very directory we came down from. If the
 * sandbox moved things meanwhile, this is an error, never a walk
 * elsewhere; the top of the walk is never climbed out of.
 */
static int pop(struct walk *wk, int *cur, wr_error_t *err) {
  struct frame *f = &wk->stack[--wk->depth];
  struct stat st;
  int up;

  wk->names_held -= f->len;
  free(f->names);
  f->names = NULL;
  if (wk->depth == 0)
    return 0;
  f = &wk->stack[wk->depth - 1];
  up = openat(*cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (up < 0)
    return wr_error_set(err, errno, "open `..`");
  if (fstat(up, &st) < 0 || st.st_dev != f->dev || st.st_ino != f->ino) {
    close(up);
    return wr_error_set(err, ESTALE, "the tree changed while archiving");
  }
  close(*cur);
  *cur = up;
  return 0;
}

/* Archive everything below `top` (consumed), one directory fd at a time. */
static int walk(struct walk *wk, int top, wr_error_t *err) {
  _cleanup_close_ int cur = top;

  if (push(wk, cur, err) < 0)
    return -1;
  while (wk->depth > 0) {
    struct frame *f = &wk->stack[wk->depth - 1];
    const char *name;
    int child = -1;

    if (f->next >= f->len) {
      if (pop(wk, &cur, err) < 0)
        return -1;
      continue;
    }
    name = f->names + f->next;
    f->next += strlen(name) + 1;
    rel_set(wk, f->rel_len, name);
    if (emit_child(wk, cur, name, &child, err) < 0)
      return -1;
    if (child < 0)
      continue;
    close(cur);
    cur = child;
    if (push(wk, cur, err) < 0)
      return -1;
  }
  return 0;
}

static int create_contents(struct walk *wk, const char *norm, wr_error_t *err) {
  struct stat st;
  int fd = wr_open_in_root(wk->c->rootfd, norm, O_RDONLY | O_DIRECTORY, 0, err);

  if (fd < 0)
    return -1;
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    return wr_error_set(err, e, "stat");
  }
  wk->dev = st.st_dev;
  return walk(wk, fd, err);
}

/* The entry `norm` itself (not followed), under the archive name `name`. */
static int create_entry(struct walk *wk, const char *norm, const char *as,
                        wr_error_t *err) {
  _cleanup_free_ char *name = NULL;
  _cleanup_close_ int dir = -1;
  struct stat st;
  int child = -1;

  dir = wr_open_parent_in_root(wk->c->rootfd, norm, &name, err);
  if (dir < 0)
    return -1;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "`%s`", norm);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) &&
      !S_ISFIFO(st.st_mode))
    return wr_error_set(err, EINVAL, "`%s` is a device node or socket", norm);
  wk->dev = st.st_dev;
  rel_set(wk, 0, as != NULL ? as : name);
  if (emit_child(wk, dir, name, &child, err) < 0)
    return -1;
  return child < 0 ? 0 : walk(wk, child, err);
}

/* What the three public entry points share: `as` renames the top entry;
 * with discard nothing is read or written, only counted. */
struct create_req {
  const char *path;
  bool contents_only;
  const char *as;
  int outfd;
  bool discard;
};

static int create(const struct wr_tar_ctx *c, const struct create_req *q,
                  struct wr_tar_stats *stats, wr_error_t *err) {
  _cleanup_free_ char *norm = NULL;
  struct walk wk = {.c = c, .out = {.fd = q->outfd, .discard = q->discard}};
  int r;

  if (wr_path_check(q->path, err) < 0)
    return wr_error_wrap(err, "archive");
  norm = wr_path_normalize(q->path);
  wr_buf_init(&wk.out.buf);
  wr_buf_init(&wk.rel);
  wr_buf_puts(&wk.rel, "");
  if (q->as == NULL && (q->contents_only || strcmp(norm, "/") == 0))
    r = create_contents(&wk, norm, err);
  else
    r = create_entry(&wk, norm, q->as, err);
  if (r == 0)
    r = out_zeros(&wk.out, 2 * BLOCK, err);
  if (r == 0)
    r = out_flush(&wk.out, err);
  for (size_t i = 0; i < wk.depth; i++)
    free(wk.stack[i].names);
  free(wk.stack);
  wr_buf_free(&wk.rel);
  wr_buf_free(&wk.out.buf);
  if (stats != NULL)
    *stats = wk.stats;
  return r < 0 ? wr_error_wrap(err, "archive `%s`", q->path) : 0;
}

int wr_tar_create(const struct wr_tar_ctx *c, const char *path,
                  bool contents_only, int outfd, wr_error_t *err) {
  struct create_req q = {
      .path = path, .contents_only = contents_only, .outfd = outfd};

  return create(c, &q, NULL, err);
}

int wr_tar_create_as(const struct wr_tar_ctx *c, const char *path,
                     const char *name, int outfd, wr_error_t *err) {
  struct create_req q = {.path = path, .as = name, .outfd = outfd};

  if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
      strcmp(name, "..") == 0)
    return wr_error_setx(err, EINVAL, "`%s` is not a file name", name);
  return create(c, &q, NULL, err);
}

int wr_tar_measure(const struct wr_tar_ctx *c, const char *path,
                   bool contents_only, struct wr_tar_stats *stats,
                   wr_error_t *err) {
  struct create_req q = {.path = path,
                         .contents_only = contents_only,
                         .outfd = -1,
                         .discard = true};

  return create(c, &q, stats, err);
}

/* ---- extract: input --------------------------------------------------- */

struct reader {
  int fd;
  size_t pos, len;
  char buf[CHUNK];
};

/* Bytes available without blocking on more than one read; 0 at the end. */
static ssize_t rd_fill(struct reader *r) {
  ssize_t n;

  if (r->pos < r->len)
    return (ssize_t)(r->len - r->pos);
  do
    n = read(r->fd, r->buf, sizeof(r->buf));
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -1;
  r->pos = 0;
  r->len = (size_t)n;
  return n;
}

/* Take exactly n bytes into dst, or skip them when dst is NULL. */
static int rd_take(struct reader *r, void *dst, uint64_t n, wr_error_t *err) {
  char *d = dst;

  while (n > 0) {
    ssize_t avail = rd_fill(r);
    size_t k;

    if (avail < 0)
      return wr_error_set(err, errno, "read archive");
    if (avail == 0)
      return wr_error_set(err, 0, "archive is truncated");
    k = (size_t)WR_MIN(n, (uint64_t)avail);
    if (d != NULL) {
      memcpy(d, r->buf + r->pos, k);
      d += k;
    }
    r->pos += k;
    n -= k;
  }
  return 0;
}

/* Read one block; *eof when the stream ended cleanly before it. */
static int rd_block(struct reader *r, void *blk, bool *eof, wr_error_t *err) {
  ssize_t avail = rd_fill(r);

  if (avail < 0)
    return wr_error_set(err, errno, "read archive");
  *eof = avail == 0;
  return *eof ? 0 : rd_take(r, blk, BLOCK, err);
}

/* ---- extract: headers ------------------------------------------------- */

/* What 'x', 'L' and 'K' headers say about the next entry. */
struct pending {
  char *path, *linkpath;
  bool has_size, has_uid, has_gid, has_mtime;
  uint64_t size, uid, gid;
  int64_t mtime;
  /* GNU sparse 1.0: the real name and size; the map is in the data */
  char *sparse_name;
  bool has_major, has_minor, has_realsize;
  uint64_t major, minor, realsize;
};

/* One entry, from its header and what came before it. */
struct entry {
  char type;
  char *name; /* as the archive says it */
  char *link;
  uint32_t mode;
  uint64_t uid, gid, size;
  int64_t mtime;
  bool sparse;          /* a regular file with holes, described by map */
  bool map_in_data;     /* PAX 1.0: the map starts the entry's data */
  struct wr_sparse map; /* realsize is the file's size */
};

/* A directory whose mode and mtime are set once the archive is done, so
 * read-only directories can still be filled and mtimes survive. */
struct later_dir {
  char *path;
  dev_t dev;
  ino_t ino;
  uint32_t mode;
  int64_t mtime;
};

struct extract {
  const struct wr_tar_ctx *c;
  struct reader *r;
  char *dir; /* the extraction directory, normalised */
  struct wr_tar_stats stats;
  struct pending next;
  uint64_t left; /* data bytes of the current entry not read yet */
  struct later_dir *later;
  size_t nlater, cap_later;
};

static void pending_clear(struct pending *p) {
  free(p->path);
  free(p->linkpath);
  free(p->sparse_name);
  memset(p, 0, sizeof(*p));
}

static void entry_free(struct entry *e) {
  free(e->name);
  free(e->link);
  wr_sparse_free(&e->map);
}

/* Decimal digits only, at least one, no overflow. */
static int parse_dec(const char *s, size_t n, uint64_t *out) {
  uint64_t v = 0;

  if (n == 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10)
      return -1;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  *out = v;
  return 0;
}

/* A pax time: [-]seconds[.fraction]; the fraction is dropped. */
static int parse_time(const char *s, size_t n, int64_t *out) {
  bool neg = n > 0 && s[0] == '-';
  const char *dot = memchr(s, '.', n);
  size_t whole = dot ? (size_t)(dot - s) : n;
  uint64_t v, frac;

  if (parse_dec(s + neg, whole - neg, &v) < 0 || v > INT64_MAX)
    return -1;
  if (dot != NULL && parse_dec(dot + 1, n - whole - 1, &frac) < 0)
    return -1;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}

static int set_text(char **dst, const char *val, size_t n, wr_error_t *err) {
  if (memchr(val, '\0', n) != NULL)
    return wr_error_set(err, 0, "pax value contains a NUL byte");
  free(*dst);
  *dst = n > 0 ? xstrndup(val, n) : NULL;
  return 0;
}

static int set_num(bool *has, uint64_t *dst, const char *val, size_t n,
                   wr_error_t *err) {
  *has = n > 0;
  if (n > 0 && parse_dec(val, n, dst) < 0)
    return wr_error_set(err, 0, "malformed pax number `%.*s`", (int)n, val);
  return 0;
}

/*
 * GNU's sparse records. Format 1.0 (major, minor, name, realsize) is read;
 * the keys only formats 0.0 and 0.1 use are refused rather than ignored,
 * since ignoring them would write the file wrong.
 */
static int pax_sparse(struct pending *p, const char *key, size_t klen,
                      const char *val, size_t vlen, wr_error_t *err) {
#define KEY_IS(k) (klen == strlen(k) && memcmp(key, k, klen) == 0)
  if (KEY_IS("major"))
    return set_num(&p->has_major, &p->major, val, vlen, err);
  if (KEY_IS("minor"))
    return set_num(&p->has_minor, &p->minor, val, vlen, err);
  if (KEY_IS("name"))
    return set_text(&p->sparse_name, val, vlen, err);
  if (KEY_IS("realsize"))
    return set_num(&p->has_realsize, &p->realsize, val, vlen, err);
  if (KEY_IS("size") || KEY_IS("numblocks") || KEY_IS("offset") ||
      KEY_IS("numbytes") || KEY_IS("map"))
    return wr_error_set(err, 0,
                        "GNU sparse format 0.x (GNU.sparse.%.*s) is not "
                        "supported: make the archive with GNU tar's default "
                        "--sparse-version=1.0, or --format=gnu",
                        (int)klen, key);
  return 0;
#undef KEY_IS
}

/* Apply one pax record; keys other than these are ignored, as POSIX says
 * readers may. An empty value removes the override. */
static int pax_apply(struct pending *p, const char *key, size_t klen,
                     const char *val, size_t vlen, wr_error_t *err) {
#define KEY_IS(k) (klen == strlen(k) && memcmp(key, k, klen) == 0)
  if (KEY_IS("path"))
    return set_text(&p->path, val, vlen, err);
  if (KEY_IS("linkpath"))
    return set_text(&p->linkpath, val, vlen, err);
  if (KEY_IS("size"))
    return set_num(&p->has_size, &p->size, val, vlen, err);
  if (KEY_IS("uid"))
    return set_num(&p->has_uid, &p->uid, val, vlen, err);
  if (KEY_IS("gid"))
    return set_num(&p->has_gid, &p->gid, val, vlen, err);
  if (KEY_IS("mtime")) {
    p->has_mtime = vlen > 0;
    if (vlen > 0 && parse_time(val, vlen, &p->mtime) < 0)
      return wr_error_set(err, 0, "malformed pax mtime");
  }
  if (klen > 11 && memcmp(key, "GNU.sparse.", 11) == 0)
    return pax_sparse(p, key + 11, klen - 11, val, vlen, err);
  return 0;
#undef KEY_IS
}

/* Records "LEN key=value\n", strictly: LEN must cover the record exactly. */
static int parse_pax(struct pending *p, const char *data, size_t size,
                     wr_error_t *err) {
  size_t off = 0;

  while (off < size) {
    const char *rec = data + off, *key, *eq;
    size_t avail = size - off, len = 0, i = 0;

    for (; i < avail && rec[i] >= '0' && rec[i] <= '9' && len <= META_MAX; i++)
      len = len * 10 + (size_t)(rec[i] - '0');
    if (i == 0 || i >= avail || rec[i] != ' ' || len > avail || len < i + 4 ||
        rec[len - 1] != '\n')
      return wr_error_set(err, 0, "malformed pax record");
    key = rec + i + 1;
    eq = memchr(key, '=', (size_t)(rec + len - 1 - key));
    if (eq == NULL || eq == key)
      return wr_error_set(err, 0, "malformed pax record");
    if (pax_apply(p, key, (size_t)(eq - key), eq + 1,
                  (size_t)(rec + len - 1 - (eq + 1)), err) < 0)
      return -1;
    off += len;
  }
  return 0;
}

/* The data of a metadata entry ('x', 'L', 'K'), bounded. */
static char *read_meta(struct extract *x, uint64_t size, wr_error_t *err) {
  char *data;

  if (size > META_MAX) {
    wr_error_set(err, EFBIG, "metadata entry of %llu bytes",
                 (unsigned long long)size);
    return NULL;
  }
  data = xmalloc((size_t)size + 1);
  if (rd_take(x->r, data, size, err) < 0 ||
      rd_take(x->r, NULL, pad_of(size), err) < 0) {
    free(data);
    return NULL;
  }
  data[size] = '\0';
  return data;
}

static int read_pax(struct extract *x, uint64_t size, wr_error_t *err) {
  _cleanup_free_ char *data = read_meta(x, size, err);

  if (data == NULL)
    return -1;
  return parse_pax(&x->next, data, (size_t)size, err);
}

/* A GNU long name: the data up to its NUL. */
static int read_long(struct extract *x, uint64_t size, char **dst,
                     wr_error_t *err) {
  char *data = read_meta(x, size, err);

  if (data == NULL)
    return -1;
  free(*dst);
  *dst = data;
  return 0;
}

static char *header_name(const struct ustar *h) {
  size_t n = strnlen(h->name, sizeof(h->name));
  size_t p = strnlen(h->prefix, sizeof(h->prefix));

  /* Only POSIX ustar ("ustar\0") has a prefix; GNU keeps other data there. */
  if (memcmp(h->magic, "ustar", sizeof(h->magic)) == 0 && p > 0)
    return xasprintf("%.*s/%.*s", (int)p, h->prefix, (int)n, h->name);
  return xstrndup(h->name, n);
}

static int parse_entry(const struct ustar *h, struct entry *e,
                       wr_error_t *err) {
  uint64_t mode, mtime;

  if (parse_num(h->mode, sizeof(h->mode), &mode) < 0 ||
      parse_num(h->uid, sizeof(h->uid), &e->uid) < 0 ||
      parse_num(h->gid, sizeof(h->gid), &e->gid) < 0 ||
      parse_num(h->size, sizeof(h->size), &e->size) < 0 ||
      parse_num(h->mtime, sizeof(h->mtime), &mtime) < 0)
    return wr_error_set(err, 0, "malformed numeric field in a header");
  e->type = h->typeflag;
  e->mode = (uint32_t)(mode & 07777);
  e->mtime = mtime > INT64_MAX ? INT64_MAX : (int64_t)mtime;
  e->name = header_name(h);
  e->link = xstrndup(h->linkname, strnlen(h->linkname, sizeof(h->linkname)));
  return 0;
}

/* GNU sparse 1.0 records: the entry is a sparse file whose map starts its
 * data, with its real name and size. */
static int take_sparse(struct pending *p, struct entry *e, wr_error_t *err) {
  if (!p->has_major && !p->has_minor && p->sparse_name == NULL &&
      !p->has_realsize)
    return 0;
  if (!p->has_major || !p->has_minor)
    return wr_error_set(err, 0, "GNU sparse records without a version");
  if (p->major != 1 || p->minor != 0)
    return wr_error_set(err, 0, "GNU sparse format %llu.%llu is not supported",
                        (unsigned long long)p->major,
                        (unsigned long long)p->minor);
  if (!p->has_realsize)
    return wr_error_set(err, 0, "GNU sparse records without a realsize");
  if (e->sparse)
    return wr_error_set(err, 0, "an entry with two sparse maps");
  if (p->sparse_name != NULL) {
    free(e->name);
    e->name = steal_ptr(&p->sparse_name);
  }
  e->sparse = true;
  e->map_in_data = true;
  e->map.realsize = p->realsize;
  return 0;
}

/* Fold the pending pax/GNU overrides into a real entry. */
static int take_pending(struct pending *p, struct entry *e, wr_error_t *err) {
  if (p->path != NULL) {
    free(e->name);
    e->name = steal_ptr(&p->path);
  }
  if (p->linkpath != NULL) {
    free(e->link);
    e->link = steal_ptr(&p->linkpath);
  }
  if (p->has_size)
    e->size = p->size;
  if (p->has_uid)
    e->uid = p->uid;
  if (p->has_gid)
    e->gid = p->gid;
  if (p->has_mtime)
    e->mtime = p->mtime;
  if (take_sparse(p, e, err) < 0)
    return -1;
  pending_clear(p);
  if (e->type == '\0' || e->type == '7')
    e->type = '0';
  if (e->type == '0' && wr_str_has_suffix(e->name, "/"))
    e->type = '5';
  if (e->sparse && e->type != '0')
    return wr_error_set(err, 0, "a sparse map on an entry that is not a file");
  return 0;
}

/* ---- extract: sparse maps --------------------------------------------- */

/* GNU's old sparse header ('S'): entries of 12-byte offset and length
 * fields, four in the header, 21 in each extension block. */
#define OLDGNU_SP 386
#define OLDGNU_EXTENDED 482
#define OLDGNU_REALSIZE 483
#define EXT_ENTRIES 21
#define EXT_EXTENDED 504

/* Entries up to the first with an empty length, as GNU tar reads them. */
static int add_oldgnu(struct wr_sparse *sp, const char *ents, size_t count,
                      wr_error_t *err) {
  for (size_t i = 0; i < count; i++) {
    const char *ent = ents + 24 * i;
    uint64_t off, len;

    if (ent[12] == '\0')
      return 0;
    if (parse_num(ent, 12, &off) < 0 || parse_num(ent + 12, 12, &len) < 0)
      return wr_error_set(err, 0, "malformed sparse map entry");
    if (wr_sparse_add(sp, off, len, err) < 0)
      return -1;
  }
  return 0;
}

/* The map of an 'S' entry: its header, then any extension blocks, which
 * come before the data and are not counted in its size. */
static int read_oldgnu_map(struct extract *x, const struct ustar *h,
                           struct entry *e, wr_error_t *err) {
  const char *raw = (const char *)h;
  bool more = raw[OLDGNU_EXTENDED] != 0;
  char ext[BLOCK];

  if (parse_num(raw + OLDGNU_REALSIZE, 12, &e->map.realsize) < 0)
    return wr_error_set(err, 0, "malformed sparse header");
  if (add_oldgnu(&e->map, raw + OLDGNU_SP, 4, err) < 0)
    return -1;
  for (size_t blocks = 0; more; blocks++) {
    if (blocks > WR_SPARSE_MAX / EXT_ENTRIES)
      return wr_error_set(err, 0, "too many sparse extension headers");
    if (rd_take(x->r, ext, BLOCK, err) < 0)
      return -1;
    if (add_oldgnu(&e->map, ext, EXT_ENTRIES, err) < 0)
      return -1;
    more = ext[EXT_EXTENDED] != 0;
  }
  e->sparse = true;
  e->type = '0';
  return 0;
}

/* The PAX 1.0 map at the start of the data, whole blocks of it. */
static int read_map_text(struct extract *x, struct entry *e, wr_error_t *err) {
  struct wr_sparse_parser p = {0};
  char blk[BLOCK];

  for (;;) {
    int r;

    if (x->left < BLOCK)
      return wr_error_set(err, 0, "sparse map runs past the entry's data");
    if (rd_take(x->r, blk, BLOCK, err) < 0)
      return -1;
    x->left -= BLOCK;
    r = wr_sparse_parse(&p, &e->map, blk, BLOCK, err);
    if (r != 0)
      return r < 0 ? -1 : 0;
  }
}

/* Everything the header and the records before it say about an entry,
 * its sparse map included, read and checked before anything is made. */
static int start_entry(struct extract *x, const struct ustar *h,
                       struct entry *e, wr_error_t *err) {
  if (e->type == 'S' && read_oldgnu_map(x, h, e, err) < 0)
    return -1;
  if (take_pending(&x->next, e, err) < 0)
    return -1;
  x->left = e->size;
  if (!e->sparse)
    return 0;
  if (e->map_in_data && read_map_text(x, e, err) < 0)
    return -1;
  return wr_sparse_check(&e->map, x->left, err);
}

/*
 * An entry name relative to the extraction directory: "/", "" and "."
 * components are dropped and ".." anywhere is refused. "" names the
 * extraction directory itself.
 */
static int clean_name(const char *name, char **out, wr_error_t *err) {
  wr_buf_t b;
  const char *p = name;

  wr_buf_init(&b);
  wr_buf_puts(&b, "");
  while (*p != '\0') {
    const char *start = p;
    size_t n;

    while (*p != '\0' && *p != '/')
      p++;
    n = (size_t)(p - start);
    if (*p == '/')
      p++;
    if (n == 0 || (n == 1 && start[0] == '.'))
      continue;
    if (n == 2 && start[0] == '.' && start[1] == '.') {
      wr_buf_free(&b);
      return wr_error_set(err, EPERM, "entry `%s` has a `..` component", name);
    }
    if (b.len > 0)
      wr_buf_append(&b, "/", 1);
    wr_buf_append(&b, start, n);
  }
  *out = wr_buf_steal(&b, NULL);
  return 0;
}

/* ---- extract: entries ------------------------------------------------- */

static uint32_t id_in(const struct wr_tar_ctx *c, uint64_t id) {
  if (id < c->id_count)
    return c->id_base + (uint32_t)id;
  return c->id_base + WR_MIN(NOBODY, c->id_count - 1);
}

static char *join(const char *dir, const char *rel) {
  return strcmp(dir, "/") == 0 ? xasprintf("/%s", rel)
                               : xasprintf("%s/%s", dir, rel);
}

/* The parent directory of `full` (created if missing) and the final name. */
static int open_parent(struct extract *x, const char *full, char **name,
                       wr_error_t *err) {
  _cleanup_free_ char *parent = xstrdup(full);
  char *slash = strrchr(parent, '/');
  uid_t uid = x->c->map_ids ? id_in(x->c, 0) : (uid_t)-1;

  *name = xstrdup(slash + 1);
  slash[slash == parent ? 1 : 0] = '\0';
  return wr_mkdir_p_in_root(x->c->rootfd, parent, 0755, uid, (gid_t)uid, err);
}

/* Make room for a new entry: a file or symlink there is unlinked (never
 * followed), an empty directory removed. */
static int clear_slot(int dir, const char *name, wr_error_t *err) {
  if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR)
    return wr_error_set(err, errno, "remove old `%s`", name);
  if (unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    return 0;
  return wr_error_set(err, errno, "replace directory `%s`", name);
}

enum make_kind { MAKE_SYMLINK, MAKE_LINK, MAKE_FIFO };

struct make {
  enum make_kind kind;
  const char *target; /* symlink text */
  int tdir;           /* hardlink target: directory and name */
  const char *tname;
};

/* Create the entry once: an O_PATH fd for FIFOs, 0 for links. */
static int make_once(int dir, const char *name, const struct make *m) {
  switch (m->kind) {
  case MAKE_SYMLINK:
    return symlinkat(m->target, dir, name);
  case MAKE_LINK:
    return linkat(m->tdir, m->tname, dir, name, 0);
  case MAKE_FIFO:
    if (mkfifoat(dir, name, 0600) < 0)
      return -1;
    return openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  }
  errno = EINVAL;
  return -1;
}

/* Replace whatever is at `name` with a new entry. Creation is exclusive,
 * so if the sandbox puts something back in between we retry, and never
 * write through what it put there. */
static int make_replacing(int dir, const char *name, const struct make *m,
                          wr_error_t *err) {
  for (int tries = 0; tries < 3; tries++) {
    int r;

    if (clear_slot(dir, name, err) < 0)
      return -1;
    r = make_once(dir, name, m);
    if (r >= 0)
      return r;
    if (errno != EEXIST)
      return wr_error_set(err, errno, "create `%s`", name);
  }
  return wr_error_set(err, EEXIST, "create `%s`", name);
}

/* Mode (setuid/setgid dropped, sticky kept) and mtime, on the fd. */
static int set_mode_time(int fd, uint32_t mode, int64_t mtime,
                         wr_error_t *err) {
  struct timespec ts[2] = {{.tv_sec = mtime}, {.tv_sec = mtime}};

  if (fchmod(fd, mode & 01777) < 0)
    return wr_error_set(err, errno, "chmod");
  if (futimens(fd, ts) < 0)
    return wr_error_set(err, errno, "set mtime");
  return 0;
}

/* Owner (mapped, with map_ids only), then mode and mtime, on the fd. */
static int set_attrs(struct extract *x, int fd, const struct entry *e,
                     wr_error_t *err) {
  if (x->c->map_ids && fchown(fd, id_in(x->c, e->uid), id_in(x->c, e->gid)) < 0)
    return wr_error_set(err, errno, "chown");
  return set_mode_time(fd, e->mode, e->mtime, err);
}

/* Stream n bytes of the entry's data into fd, chunk by chunk. */
static int copy_out(struct extract *x, int fd, uint64_t n, wr_error_t *err) {
  while (n > 0) {
    ssize_t avail = rd_fill(x->r);
    size_t k;

    if (avail < 0)
      return wr_error_set(err, errno, "read archive");
    if (avail == 0)
      return wr_error_set(err, 0, "archive is truncated");
    k = (size_t)WR_MIN(n, (uint64_t)avail);
    if (wr_write_all(fd, x->r->buf + x->r->pos, k, err) < 0)
      return -1;
    x->r->pos += k;
    x->left -= k;
    n -= k;
    x->stats.bytes += k;
  }
  return 0;
}

/* Each segment at its offset, then the size: the holes are never written. */
static int write_sparse(struct extract *x, int fd, const struct wr_sparse *sp,
                        wr_error_t *err) {
  for (size_t i = 0; i < sp->n; i++) {
    if (lseek(fd, (off_t)sp->v[i].off, SEEK_SET) < 0)
      return wr_error_set(err, errno, "seek to %llu",
                          (unsigned long long)sp->v[i].off);
    if (copy_out(x, fd, sp->v[i].len, err) < 0)
      return -1;
  }
  if (ftruncate(fd, (off_t)sp->realsize) < 0)
    return wr_error_set(err, errno, "set the size to %llu",
                        (unsigned long long)sp->realsize);
  return 0;
}

/* The byte budget, checked before an entry's first byte is written. */
static int check_budget(const struct extract *x, uint64_t data,
                        wr_error_t *err) {
  uint64_t max = x->c->max_bytes;

  if (max == 0 || (x->stats.bytes <= max && data <= max - x->stats.bytes))
    return 0;
  return wr_error_setx(err, EDQUOT,
                       "more than %llu bytes of file data (the limit)",
                       (unsigned long long)max);
}

/* A new file under a random name in dir, for writing. */
static int make_temp(int dir, char **tmp, wr_error_t *err) {
  for (int tries = 0; tries < 8; tries++) {
    int fd;

    *tmp = wr_random_id(".warren-tar-", 12);
    fd = openat(dir, *tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd >= 0)
      return fd;
    free(*tmp);
    *tmp = NULL;
    if (errno != EEXIST)
      return wr_error_set(err, errno, "create a file");
  }
  return wr_error_set(err, EEXIST, "create a file");
}

/* Rename the finished file over whatever is at name (a file or a symlink is
 * replaced, not followed; an empty directory is removed first). */
static int place_temp(int dir, const char *tmp, const char *name,
                      wr_error_t *err) {
  if (renameat(dir, tmp, dir, name) == 0)
    return 0;
  if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST)
    return wr_error_set(err, errno, "rename into place");
  if (clear_slot(dir, name, err) < 0)
    return -1;
  if (renameat(dir, tmp, dir, name) < 0)
    return wr_error_set(err, errno, "rename into place");
  return 0;
}

static int fill_file(struct extract *x, int fd, const struct entry *e,
                     wr_error_t *err) {
  int r = e->sparse ? write_sparse(x, fd, &e->map, err)
                    : copy_out(x, fd, x->left, err);

  return r < 0 ? -1 : set_attrs(x, fd, e, err);
}

static int extract_file(struct extract *x, const struct entry *e,
                        const char *full, wr_error_t *err) {
  _cleanup_free_ char *name = NULL, *tmp = NULL;
  _cleanup_close_ int dir = -1, fd = -1;

  if (check_budget(x, e->sparse ? e->map.data : x->left, err) < 0)
    return -1;
  dir = open_parent(x, full, &name, err);
  if (dir < 0)
    return -1;
  fd = make_temp(dir, &tmp, err);
  if (fd < 0)
    return -1;
  if (fill_file(x, fd, e, err) < 0 || place_temp(dir, tmp, name, err) < 0) {
    unlinkat(dir, tmp, 0);
    return -1;
  }
  x->stats.files++;
  return 0;
}

static int extract_fifo(struct extract *x, const struct entry *e,
                        const char *full, wr_error_t *err) {
  struct make m = {.kind = MAKE_FIFO};
  _cleanup_free_ char *name = NULL;
  _cleanup_close_ int dir = -1, pfd = -1, fd = -1;
  struct stat st;

  dir = open_parent(x, full, &name, err);
  if (dir < 0)
    return -1;
  pfd = make_replacing(dir, name, &m, err);
  if (pfd < 0)
    return -1;
  if (fstat(pfd, &st) < 0 || !S_ISFIFO(st.st_mode))
    return wr_error_set(err, EAGAIN, "`%s` changed while extracting", name);
  fd = reopen(pfd, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return wr_error_set(err, errno, "open FIFO `%s`", name);
  x->stats.files++;
  return set_attrs(x, fd, e, err);
}

static int extract_symlink(struct extract *x, const struct entry *e,
                           const char *full, wr_error_t *err) {
  struct timespec ts[2] = {{.tv_sec = e->mtime}, {.tv_sec = e->mtime}};
  struct make m = {.kind = MAKE_SYMLINK, .target = e->link};
  _cleanup_free_ char *name = NULL;
  _cleanup_close_ int dir = -1;

  if (e->link[0] == '\0')
    return wr_error_set(err, EINVAL, "symlink without a target");
  dir = open_parent(x, full, &name, err);
  if (dir < 0 || make_replacing(dir, name, &m, err) < 0)
    return -1;
  x->stats.links++;
  if (x->c->map_ids && fchownat(dir, name, id_in(x->c, e->uid),
                                id_in(x->c, e->gid), AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "chown");
  if (utimensat(dir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "set mtime");
  return 0;
}

/* A hardlink to a regular file already extracted: both names are resolved
 * in the root, the target relative to the extraction directory. */
static int extract_hardlink(struct extract *x, const struct entry *e,
                            const char *full, wr_error_t *err) {
  _cleanup_free_ char *trel = NULL, *tfull = NULL, *tname = NULL;
  _cleanup_free_ char *name = NULL;
  _cleanup_close_ int tdir = -1, dir = -1;
  struct make m = {.kind = MAKE_LINK};
  struct stat st;

  if (clean_name(e->link, &trel, err) < 0)
    return -1;
  if (trel[0] == '\0')
    return wr_error_set(err, EINVAL, "hardlink without a target");
  tfull = join(x->dir, trel);
  tdir = wr_open_parent_in_root(x->c->rootfd, tfull, &tname, err);
  if (tdir < 0)
    return wr_error_wrap(err, "hardlink target");
  if (fstatat(tdir, tname, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "hardlink target `%s`", e->link);
  if (!S_ISREG(st.st_mode))
    return wr_error_set(err, EPERM, "hardlink target `%s` is not a file",
                        e->link);
  dir = open_parent(x, full, &name, err);
  if (dir < 0)
    return -1;
  m.tdir = tdir;
  m.tname = tname;
  if (make_replacing(dir, name, &m, err) < 0)
    return -1;
  x->stats.links++;
  return 0;
}

/* Remember a directory's final mode and mtime; past LATER_MAX they are
 * applied at once to keep memory bounded. */
static int defer_dir(struct extract *x, int fd, const char *full,
                     const struct entry *e, wr_error_t *err) {
  struct later_dir *l;
  struct stat st;

  if (x->nlater == LATER_MAX)
    return set_mode_time(fd, e->mode, e->mtime, err);
  if (fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "stat");
  if (x->nlater == x->cap_later) {
    x->cap_later = x->cap_later ? x->cap_later * 2 : 16;
    x->later = xrealloc(x->later, x->cap_later * sizeof(*x->later));
  }
  l = &x->later[x->nlater++];
  l->path = xstrdup(full);
  l->dev = st.st_dev;
  l->ino = st.st_ino;
  l->mode = e->mode;
  l->mtime = e->mtime;
  return 0;
}

/* Make directory `name` (0700 until the end), or keep the one that is
 * there; anything else in the way (a symlink, a file) is replaced. */
static int make_dir(int dir, const char *name, wr_error_t *err) {
  struct stat st;

  if (mkdirat(dir, name, 0700) == 0)
    return 0;
  if (errno != EEXIST)
    return wr_error_set(err, errno, "mkdir");
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(err, errno, "stat");
  if (S_ISDIR(st.st_mode))
    return 0;
  if (clear_slot(dir, name, err) < 0)
    return -1;
  if (mkdirat(dir, name, 0700) < 0)
    return wr_error_set(err, errno, "mkdir");
  return 0;
}

static int extract_dir(struct extract *x, const struct entry *e,
                       const char *full, wr_error_t *err) {
  _cleanup_free_ char *name = NULL;
  _cleanup_close_ int dir = -1, fd = -1;

  dir = open_parent(x, full, &name, err);
  if (dir < 0 || make_dir(dir, name, err) < 0)
    return -1;
  fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open");
  if (x->c->map_ids && fchown(fd, id_in(x->c, e->uid), id_in(x->c, e->gid)) < 0)
    return wr_error_set(err, errno, "chown");
  x->stats.dirs++;
  return defer_dir(x, fd, full, e, err);
}

static int extract_typed(struct extract *x, const struct entry *e,
                         const char *full, wr_error_t *err) {
  switch (e->type) {
  case '0':
    return extract_file(x, e, full, err);
  case '5':
    return extract_dir(x, e, full, err);
  case '2':
    return extract_symlink(x, e, full, err);
  case '1':
    return extract_hardlink(x, e, full, err);
  case '6':
    return extract_fifo(x, e, full, err);
  case '3':
  case '4':
    return wr_error_set(err, EPERM, "device nodes are refused");
  default:
    return wr_error_set(err, EINVAL, "unsupported entry type %#x",
                        (unsigned)(unsigned char)e->type);
  }
}

static int extract_entry(struct extract *x, const struct entry *e,
                         wr_error_t *err) {
  _cleanup_free_ char *rel = NULL, *full = NULL;

  if (clean_name(e->name, &rel, err) < 0)
    return -1;
  if (rel[0] == '\0') {
    if (e->type == '5')
      return 0; /* the extraction directory itself */
    return wr_error_set(err, EINVAL, "entry `%s` has no name", e->name);
  }
  full = join(x->dir, rel);
  if (wr_path_check(full, err) < 0 || extract_typed(x, e, full, err) < 0)
    return wr_error_wrap(err, "entry `%s`", e->name);
  return 0;
}

static int handle_header(struct extract *x, const struct ustar *h,
                         wr_error_t *err) {
  struct entry e = {0};
  int r;

  if (parse_entry(h, &e, err) < 0) {
    entry_free(&e);
    return -1;
  }
  switch (e.type) {
  case 'x': /* these read their data and its padding */
    r = read_pax(x, e.size, err);
    break;
  case 'L':
    r = read_long(x, e.size, &x->next.path, err);
    break;
  case 'K':
    r = read_long(x, e.size, &x->next.linkpath, err);
    break;
  case 'g': /* global pax headers: read, not applied */
  case 'V': /* GNU volume label */
    r = rd_take(x->r, NULL, e.size + pad_of(e.size), err);
    break;
  default:
    r = start_entry(x, h, &e, err);
    if (r < 0)
      wr_error_wrap(err, "entry `%s`", e.name);
    else
      r = extract_entry(x, &e, err);
    if (r == 0) /* what a file did not take, and other types' data */
      r = rd_take(x->r, NULL, x->left + pad_of(e.size), err);
    break;
  }
  entry_free(&e);
  return r;
}

/* 1: a header is in h; 0: the end-of-archive marker. */
static int next_header(struct extract *x, struct ustar *h, wr_error_t *err) {
  bool eof;

  if (rd_block(x->r, h, &eof, err) < 0)
    return -1;
  if (eof)
    return wr_error_set(err, 0, "archive ends without an end marker");
  if (memcmp(h, zero_block, BLOCK) != 0)
    return check_header(h, err) < 0 ? -1 : 1;
  if (rd_block(x->r, h, &eof, err) < 0)
    return -1;
  if (eof || memcmp(h, zero_block, BLOCK) == 0)
    return 0;
  return wr_error_set(err, 0, "a header follows an end-of-archive block");
}

static int extract_all(struct extract *x, wr_error_t *err) {
  struct ustar h;

  for (;;) {
    int r = next_header(x, &h, err);
    if (r <= 0)
      return r;
    if (handle_header(x, &h, err) < 0)
      return -1;
  }
}

/* Apply the deferred directory modes and mtimes, to the directories we
 * made (same inode), wherever they are now. */
static int apply_later(struct extract *x, wr_error_t *err) {
  int r = 0;

  for (size_t i = 0; i < x->nlater; i++) {
    const struct later_dir *l = &x->later[i];
    struct stat st;
    int fd = wr_open_in_root(x->c->rootfd, l->path,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, NULL);

    if (fd < 0)
      continue;
    if (fstat(fd, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino &&
        set_mode_time(fd, l->mode, l->mtime, r == 0 ? err : NULL) < 0)
      r = -1;
    close(fd);
  }
  return r;
}

static int check_ctx(const struct wr_tar_ctx *c, wr_error_t *err) {
  if (c->map_ids && (c->id_count == 0 ||
                     (uint64_t)c->id_base + c->id_count > (uint64_t)UINT32_MAX))
    return wr_error_set(err, EINVAL, "bad id range %u+%u", c->id_base,
                        c->id_count);
  return 0;
}

static int open_target(struct extract *x, bool parents, wr_error_t *err) {
  uid_t uid = x->c->map_ids ? id_in(x->c, 0) : (uid_t)-1;
  int fd;

  if (parents)
    fd = wr_mkdir_p_in_root(x->c->rootfd, x->dir, 0755, uid, (gid_t)uid, err);
  else
    fd = wr_open_in_root(x->c->rootfd, x->dir, O_PATH | O_DIRECTORY, 0, err);
  if (fd < 0)
    return -1;
  close(fd);
  return 0;
}

int wr_tar_extract(const struct wr_tar_ctx *c, const char *path, bool parents,
                   int infd, struct wr_tar_stats *stats, wr_error_t *err) {
  struct extract x = {.c = c};
  int r;

  if (check_ctx(c, err) < 0 || wr_path_check(path, err) < 0)
    return wr_error_wrap(err, "extract into `%s`", path);
  x.dir = wr_path_normalize(path);
  x.r = xmalloc(sizeof(*x.r));
  x.r->fd = infd;
  x.r->pos = x.r->len = 0;
  r = open_target(&x, parents, err);
  if (r == 0)
    r = extract_all(&x, err);
  if (apply_later(&x, r == 0 ? err : NULL) < 0)
    r = -1;
  if (stats != NULL)
    *stats = x.stats;
  for (size_t i = 0; i < x.nlater; i++)
    free(x.later[i].path);
  free(x.later);
  pending_clear(&x.next);
  free(x.r);
  free(x.dir);
  return r < 0 ? wr_error_wrap(err, "extract into `%s`", path) : 0;
}
