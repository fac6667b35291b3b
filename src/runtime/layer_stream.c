/*
 * Layer streams (see layer_stream.h): the decoder, the exporter that
 * walks layers into a zstd stream, and the importer that applies a
 * stream to a new directory.
 *
 * The importer treats the stream as hostile: every record is checked by
 * the decoder before anything is made (type, clean path, sizes, ids,
 * mode bits, allowed xattrs), each entry is made by an *at() call in a
 * parent opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_XDEV), so a symlink from the stream can never lead a later
 * entry outside, the only device made is a whiteout, file data is bounded
 * by max_bytes, zstd's window by WINDOW_LOG_MAX (its memory), and a
 * failed import removes everything it made.
 */
#include "runtime/layer_stream.h"
#include "runtime/layers.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <zstd.h>

#define WINDOW_LOG_MAX 27
#define ZSTD_LEVEL 3
#define CHUNK (128u << 10)

enum { ST_MAGIC, ST_METALEN, ST_META, ST_HDR, ST_VAR, ST_DATA, ST_END };

static uint16_t le16(const unsigned char *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

bool wr_lstream_path_ok(const char *p, size_t len) {
  size_t comp = 0, start = 0;

  if (len == 0 || len >= PATH_MAX || p[0] == '/')
    return false;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && p[i] == '\0')
      return false;
    if (i < len && p[i] != '/') {
      comp++;
      continue;
    }
    if (comp == 0 || comp > NAME_MAX || (comp == 1 && p[start] == '.') ||
        (comp == 2 && p[start] == '.' && p[start + 1] == '.'))
      return false;
    comp = 0;
    start = i + 1;
  }
  return true;
}

void wr_lstream_dec_init(struct wr_lstream_dec *d,
                         const struct wr_lstream_ops *ops, void *arg) {
  memset(d, 0, sizeof(*d));
  d->ops = ops;
  d->arg = arg;
  d->buf = xmalloc(WR_LSTREAM_META_MAX + PATH_MAX * 2 + 65536 + 64);
  d->want = strlen(WR_LSTREAM_MAGIC);
}

void wr_lstream_dec_free(struct wr_lstream_dec *d) {
  free(d->buf);
  d->buf = NULL;
}

static bool xattr_ok(const char *name, size_t nlen, const unsigned char *v,
                     size_t vlen) {
  uint32_t magic;

  if (nlen > 5 && memcmp(name, "user.", 5) == 0)
    return true;
  if (nlen == 22 && memcmp(name, "trusted.overlay.opaque", 22) == 0)
    return vlen == 1 && (v[0] == 'y' || v[0] == 'x');
  if (nlen == 19 && memcmp(name, "security.capability", 19) == 0) {
    if (vlen != XATTR_CAPS_SZ_2)
      return false;
    memcpy(&magic, v, sizeof(magic));
    return (magic & VFS_CAP_REVISION_MASK) == VFS_CAP_REVISION_2;
  }
  return false;
}

static int check_xattrs(const unsigned char *p, size_t len, wr_error_t *err) {
  size_t i = 0;

  while (i < len) {
    size_t nlen = p[i], vlen;
    if (nlen == 0 || i + 1 + nlen + 2 > len)
      return wr_error_setx(err, EINVAL, "a bad xattr list");
    vlen = le16(p + i + 1 + nlen);
    if (i + 3 + nlen + vlen > len || memchr(p + i + 1, '\0', nlen) != NULL ||
        !xattr_ok((const char *)p + i + 1, nlen, p + i + 3 + nlen, vlen))
      return wr_error_setx(err, EINVAL, "an xattr that is not allowed");
    i += 3 + nlen + vlen;
  }
  return 0;
}

/* The header is in d->buf: check it and say how much follows. */
static int parse_hdr(struct wr_lstream_dec *d, size_t *var, wr_error_t *err) {
  const unsigned char *h = d->buf;
  struct wr_lstream_rec *r = &d->rec;
  size_t plen = le16(h + 2), llen = le16(h + 4), xlen = le16(h + 6);

  memset(r, 0, sizeof(*r));
  r->type = (char)h[0];
  r->opaque = h[1] & 1;
  r->mode = le32(h + 8);
  r->uid = le32(h + 12);
  r->gid = le32(h + 16);
  r->mtime_nsec = le32(h + 20);
  r->mtime_sec = (int64_t)le64(h + 24);
  r->data_len = le64(h + 32);
  if (r->type == '\0' || strchr("LdflhpwE", r->type) == NULL)
    return wr_error_setx(err, EINVAL, "an unknown record type %u",
                         (unsigned)h[0]);
  if ((h[1] & ~1u) != 0 || (r->opaque && r->type != 'd'))
    return wr_error_setx(err, EINVAL, "bad record flags");
  if (r->mode & ~07777u || r->uid >= 65536 || r->gid >= 65536 ||
      r->mtime_nsec >= 1000000000)
    return wr_error_setx(err, EINVAL, "a bad mode, owner or time");
  if ((r->type == 'L' || r->type == 'E') != (plen == 0))
    return wr_error_setx(err, EINVAL, "a record without its path");
  if (plen >= PATH_MAX)
    return wr_error_setx(err, ENAMETOOLONG, "a path too long");
  if ((r->type == 'l' || r->type == 'h') != (llen > 0) || llen >= PATH_MAX)
    return wr_error_setx(err, EINVAL, "a bad link");
  if (r->type != 'f' && r->data_len != 0)
    return wr_error_setx(err, EINVAL, "data on an entry that is not a file");
  if (r->data_len > WR_LSTREAM_FILE_MAX)
    return wr_error_setx(err, E2BIG, "a file larger than 1 TiB");
  if (xlen > 0 && r->type != 'f' && r->type != 'd')
    return wr_error_setx(err, EINVAL, "xattrs on a link or a whiteout");
  if (r->type == 'L' && ++d->layers > WR_LAYERS_MAX_DEPTH)
    return wr_error_setx(err, EINVAL, "more than %d layers",
                         WR_LAYERS_MAX_DEPTH);
  if (r->type != 'L' && r->type != 'E' && d->layers == 0)
    return wr_error_setx(err, EINVAL, "an entry before the first layer");
  *var = plen + 1 + llen + 1 + xlen;
  r->xattr_len = xlen;
  return 0;
}

/* Path, link and xattrs are in d->buf + WR_LSTREAM_HDR, each string
 * followed by a NUL the parser put there. */
static int parse_var(struct wr_lstream_dec *d, wr_error_t *err) {
  unsigned char *v = d->buf + WR_LSTREAM_HDR;
  size_t plen = le16(d->buf + 2), llen = le16(d->buf + 4);
  struct wr_lstream_rec *r = &d->rec;

  /* The wire has no NULs: shift link and xattrs to make room for them. */
  memmove(v + plen + 1, v + plen, llen + r->xattr_len);
  v[plen] = '\0';
  memmove(v + plen + 1 + llen + 1, v + plen + 1 + llen, r->xattr_len);
  v[plen + 1 + llen] = '\0';
  r->path = (const char *)v;
  r->link = (const char *)v + plen + 1;
  r->xattrs = v + plen + 1 + llen + 1;
  if (plen > 0 && !wr_lstream_path_ok(r->path, plen))
    return wr_error_setx(err, EINVAL, "a path that is not clean");
  if (r->type == 'h' && !wr_lstream_path_ok(r->link, llen))
    return wr_error_setx(err, EINVAL,
                         "a hard link to a path that is not "
                         "clean");
  if (r->type == 'l' && memchr(r->link, '\0', llen) != NULL)
    return wr_error_setx(err, EINVAL, "a symlink with a NUL");
  return check_xattrs(r->xattrs, r->xattr_len, err);
}

/* A complete piece (d->want bytes in d->buf) for the current stage. */
static int step(struct wr_lstream_dec *d, wr_error_t *err) {
  size_t var = 0;

  switch (d->stage) {
  case ST_MAGIC:
    if (memcmp(d->buf, WR_LSTREAM_MAGIC, d->want) != 0)
      return wr_error_setx(err, EINVAL, "not a warren snapshot stream");
    d->stage = ST_METALEN;
    d->want = 4;
    return 0;
  case ST_METALEN:
    d->want = le32(d->buf);
    if (d->want == 0 || d->want > WR_LSTREAM_META_MAX)
      return wr_error_setx(err, EINVAL, "bad metadata length");
    d->stage = ST_META;
    return 0;
  case ST_META:
    if (d->ops->meta && d->ops->meta(d->arg, (char *)d->buf, d->want, err) < 0)
      return -1;
    d->stage = ST_HDR;
    d->want = WR_LSTREAM_HDR;
    return 0;
  case ST_HDR:
    if (parse_hdr(d, &var, err) < 0)
      return -1;
    d->stage = ST_VAR;
    d->want = WR_LSTREAM_HDR + var - 2; /* the two NULs are not sent */
    return 0;
  }
  if (parse_var(d, err) < 0)
    return -1;
  if (d->rec.type == 'E') {
    d->ended = true;
    d->stage = ST_END;
    return 0;
  }
  if (d->ops->record && d->ops->record(d->arg, &d->rec, err) < 0)
    return -1;
  d->data_left = d->rec.data_len;
  d->stage = d->data_left > 0 ? ST_DATA : ST_HDR;
  d->want = WR_LSTREAM_HDR;
  return 0;
}

int wr_lstream_feed(struct wr_lstream_dec *d, const void *data, size_t len,
                    wr_error_t *err) {
  const unsigned char *p = data;

  /* A record with no path, link or xattrs is complete with its header:
   * hence the second condition. */
  while (len > 0 || (d->stage == ST_VAR && d->len == d->want)) {
    size_t n;
    int old;
    if (d->stage == ST_END)
      return wr_error_setx(err, EINVAL, "bytes after the end of the stream");
    if (d->stage == ST_DATA) {
      n = d->data_left < len ? (size_t)d->data_left : len;
      if (d->ops->data && d->ops->data(d->arg, p, n, err) < 0)
        return -1;
      d->data_left -= n;
      p += n;
      len -= n;
      if (d->data_left == 0) {
        d->stage = ST_HDR;
        d->want = WR_LSTREAM_HDR;
        d->len = 0;
      }
      continue;
    }
    n = d->want - d->len < len ? d->want - d->len : len;
    memcpy(d->buf + d->len, p, n);
    d->len += n;
    p += n;
    len -= n;
    if (d->len < d->want)
      continue;
    old = d->stage;
    if (step(d, err) < 0)
      return -1;
    /* The header stays in the buffer while its path and the rest come. */
    if (!(old == ST_HDR && d->stage == ST_VAR))
      d->len = 0;
  }
  return 0;
}

int wr_lstream_finish(struct wr_lstream_dec *d, wr_error_t *err) {
  if (!d->ended)
    return wr_error_setx(err, EINVAL, "the stream ends before its end record");
  return 0;
}

/* ---- export ---------------------------------------------------------------
 */

struct zout {
  ZSTD_CCtx *cctx;
  int fd;
  unsigned char out[CHUNK];
};

static int zwrite(struct zout *z, const void *data, size_t len,
                  ZSTD_EndDirective end, wr_error_t *err) {
  ZSTD_inBuffer in = {data, len, 0};

  for (;;) {
    ZSTD_outBuffer out = {z->out, sizeof(z->out), 0};
    size_t left = ZSTD_compressStream2(z->cctx, &out, &in, end);
    if (ZSTD_isError(left))
      return wr_error_setx(err, EIO, "compress: %s", ZSTD_getErrorName(left));
    if (out.pos > 0 && wr_write_all(z->fd, z->out, out.pos, err) < 0)
      return -1;
    if (end == ZSTD_e_end ? left == 0 : in.pos == in.size)
      return 0;
  }
}

static void put16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v) {
  put16(p, (uint16_t)v);
  put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(unsigned char *p, uint64_t v) {
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}

static int emit(struct zout *z, char type, bool opaque, const struct stat *st,
                const char *path, const char *link, const wr_buf_t *xattrs,
                uint64_t data_len, wr_error_t *err) {
  unsigned char h[WR_LSTREAM_HDR] = {0};
  size_t plen = path ? strlen(path) : 0, llen = link ? strlen(link) : 0;

  h[0] = (unsigned char)type;
  h[1] = opaque ? 1 : 0;
  put16(h + 2, (uint16_t)plen);
  put16(h + 4, (uint16_t)llen);
  put16(h + 6, (uint16_t)(xattrs ? xattrs->len : 0));
  if (st != NULL) {
    put32(h + 8, st->st_mode & 07777);
    put32(h + 12, st->st_uid < 65536 ? st->st_uid : 65534);
    put32(h + 16, st->st_gid < 65536 ? st->st_gid : 65534);
    put32(h + 20, (uint32_t)st->st_mtim.tv_nsec);
    put64(h + 24, (uint64_t)st->st_mtim.tv_sec);
  }
  put64(h + 32, data_len);
  if (zwrite(z, h, sizeof(h), ZSTD_e_continue, err) < 0 ||
      zwrite(z, path, plen, ZSTD_e_continue, err) < 0 ||
      zwrite(z, link, llen, ZSTD_e_continue, err) < 0)
    return -1;
  if (xattrs != NULL && xattrs->len > 0)
    return zwrite(z, xattrs->data, xattrs->len, ZSTD_e_continue, err);
  return 0;
}

/* The allowed xattrs of an open file, encoded. */
static int read_xattrs(int fd, wr_buf_t *out, wr_error_t *err) {
  char list[4096], val[4096];
  ssize_t n = flistxattr(fd, list, sizeof(list));

  if (n < 0)
    return errno == ENOTSUP ? 0 : wr_error_set(err, errno, "list xattrs");
  for (char *k = list; k < list + n; k += strlen(k) + 1) {
    size_t klen = strlen(k);
    ssize_t vlen = fgetxattr(fd, k, val, sizeof(val));
    unsigned char b[2];
    if (vlen < 0 || klen > 255 ||
        !xattr_ok(k, klen, (unsigned char *)val, (size_t)vlen) ||
        out->len + 3 + klen + (size_t)vlen > 65535)
      continue;
    b[0] = (unsigned char)klen;
    wr_buf_append(out, b, 1);
    wr_buf_append(out, k, klen);
    put16(b, (uint16_t)vlen);
    wr_buf_append(out, b, 2);
    wr_buf_append(out, val, (size_t)vlen);
  }
  return 0;
}

struct ewalk {
  struct zout *z;
  char path[PATH_MAX];
  size_t len;
  unsigned depth;
  json_t *links; /* "dev:ino" -> first path */
  wr_error_t *err;
};

static int export_file(struct ewalk *w, int dir, const char *name,
                       const struct stat *st) {
  _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char key[48], buf[CHUNK];
  wr_buf_t x;
  json_t *first;
  uint64_t left = (uint64_t)st->st_size;
  int r;

  snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)st->st_dev,
           (unsigned long long)st->st_ino);
  first = st->st_nlink > 1 ? json_object_get(w->links, key) : NULL;
  if (first != NULL)
    return emit(w->z, 'h', false, st, w->path, json_string_value(first), NULL,
                0, w->err);
  if (fd < 0)
    return wr_error_set(w->err, errno, "open `%s`", w->path);
  if (st->st_nlink > 1)
    json_object_set_new(w->links, key, json_string(w->path));
  wr_buf_init(&x);
  r = read_xattrs(fd, &x, w->err);
  if (r == 0)
    r = emit(w->z, 'f', false, st, w->path, NULL, &x, left, w->err);
  wr_buf_free(&x);
  while (r == 0 && left > 0) {
    ssize_t n = read(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return wr_error_set(w->err, n < 0 ? errno : EIO,
                          "read `%s` (it changed while exported)", w->path);
    r = zwrite(w->z, buf, (size_t)n, ZSTD_e_continue, w->err);
    left -= (uint64_t)n;
  }
  return r;
}

static int export_dir(struct ewalk *w, int dir);

static int export_entry(struct ewalk *w, int dir, const char *name) {
  size_t saved = w->len, n = strlen(name);
  struct stat st;
  int r = 0;

  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return wr_error_set(w->err, errno, "stat `%s`", name);
  if (w->len + n + 2 > sizeof(w->path))
    return wr_error_setx(w->err, ENAMETOOLONG, "a path too long");
  if (w->len)
    w->path[w->len++] = '/';
  memcpy(w->path + w->len, name, n + 1);
  w->len += n;
  if (S_ISDIR(st.st_mode)) {
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char v[2];
    wr_buf_t x;
    if (fd < 0)
      r = wr_error_set(w->err, errno, "open `%s`", w->path);
    wr_buf_init(&x);
    if (r == 0 && (r = read_xattrs(fd, &x, w->err)) == 0)
      r = emit(w->z, 'd',
               fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1 &&
                   v[0] == 'y',
               &st, w->path, NULL, &x, 0, w->err);
    wr_buf_free(&x);
    if (r == 0 && ++w->depth > WR_LAYERS_MAX_NEST)
      r = wr_error_setx(w->err, ELOOP, "directories nested too deep");
    if (r == 0)
      r = export_dir(w, fd);
    w->depth--;
    if (fd >= 0)
      close(fd);
  } else if (S_ISREG(st.st_mode)) {
    r = export_file(w, dir, name, &st);
  } else if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t len = readlinkat(dir, name, target, sizeof(target) - 1);
    if (len <= 0)
      r = wr_error_set(w->err, errno, "readlink `%s`", w->path);
    else {
      target[len] = '\0';
      r = emit(w->z, 'l', false, &st, w->path, target, NULL, 0, w->err);
    }
  } else if (S_ISFIFO(st.st_mode) || wr_layer_is_whiteout(&st)) {
    r = emit(w->z, S_ISFIFO(st.st_mode) ? 'p' : 'w', false, &st, w->path, NULL,
             NULL, 0, w->err);
  }
  w->len = saved;
  w->path[saved] = '\0';
  return r;
}

static int export_child(int dir, const char *name, void *arg, wr_error_t *err) {
  (void)err; /* the walk's, the same */
  return export_entry(arg, dir, name);
}

static int export_dir(struct ewalk *w, int dir) {
  return wr_dir_each(dir, export_child, w, w->err);
}

static int export_layers(struct zout *z, const char *const *layers, size_t n,
                         const char *meta, wr_error_t *err) {
  unsigned char len[4];

  put32(len, (uint32_t)strlen(meta));
  if (zwrite(z, WR_LSTREAM_MAGIC, strlen(WR_LSTREAM_MAGIC), ZSTD_e_continue,
             err) < 0 ||
      zwrite(z, len, 4, ZSTD_e_continue, err) < 0 ||
      zwrite(z, meta, strlen(meta), ZSTD_e_continue, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    _cleanup_close_ int fd =
        open(layers[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct ewalk w = {.z = z, .links = json_object(), .err = err};
    int r;
    if (fd < 0) {
      json_decref(w.links);
      return wr_error_set(err, errno, "open `%s`", layers[i]);
    }
    r = emit(z, 'L', false, NULL, NULL, NULL, NULL, 0, err);
    if (r == 0)
      r = export_dir(&w, fd);
    json_decref(w.links);
    if (r < 0)
      return -1;
  }
  if (emit(z, 'E', false, NULL, NULL, NULL, NULL, 0, err) < 0)
    return -1;
  return zwrite(z, NULL, 0, ZSTD_e_end, err);
}

int wr_lstream_export(const char *const *layers, size_t n, const char *meta,
                      int fd, wr_error_t *err) {
  struct zout *z = xcalloc(1, sizeof(*z));
  int r;

  z->fd = fd;
  z->cctx = ZSTD_createCCtx();
  if (z->cctx == NULL) {
    free(z);
    return wr_error_setx(err, ENOMEM, "zstd");
  }
  ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
  ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
  r = export_layers(z, layers, n, meta, err);
  ZSTD_freeCCtx(z->cctx);
  free(z);
  return r;
}

/* ---- import ----------------------------------------------------------------
 */

struct dir_time {
  char *path;
  struct timespec t[2];
};

struct iwalk {
  int root;
  uint64_t max_bytes, bytes;
  char *meta;
  int file; /* the file being written, or -1 */
  char file_path[PATH_MAX];
  struct timespec file_times[2]; /* set once its data is written */
  struct dir_time *dirs;
  size_t ndirs;
  wr_error_t *err;
};

/* The parent of path, opened beneath the root with no symlink on the way
 * (they are the stream's), and its last component. */
static int open_parent(struct iwalk *w, const char *path, const char **name) {
  _cleanup_free_ char *dir = xstrdup(path);
  char *slash = strrchr(dir, '/');
  struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                         .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
  int fd;

  *name = slash ? path + (slash - dir) + 1 : path;
  if (slash == NULL)
    return dup(w->root);
  *slash = '\0';
  fd = (int)syscall(SYS_openat2, w->root, dir, &how, sizeof(how));
  if (fd < 0)
    return wr_error_set(w->err, errno, "the directory of `%s`", path);
  return fd;
}

static int set_xattrs(int fd, const struct wr_lstream_rec *r, wr_error_t *err) {
  size_t i = 0;

  while (i < r->xattr_len) {
    size_t nlen = r->xattrs[i], vlen = le16(r->xattrs + i + 1 + nlen);
    char name[256];
    memcpy(name, r->xattrs + i + 1, nlen);
    name[nlen] = '\0';
    if (fsetxattr(fd, name, r->xattrs + i + 3 + nlen, vlen, 0) < 0)
      return wr_error_set(err, errno, "set xattr `%s` on `%s`", name, r->path);
    i += 3 + nlen + vlen;
  }
  return 0;
}

static int import_meta(void *arg, const char *json, size_t len,
                       wr_error_t *err) {
  struct iwalk *w = arg;
  _cleanup_json_ json_t *j = NULL;

  if (wr_json_parse_object(json, len, false, &j, err) < 0)
    return wr_error_wrap(err, "the stream's metadata");
  w->meta = xstrndup(json, len);
  return 0;
}

static int close_file(struct iwalk *w) {
  int fd = w->file;

  w->file = -1;
  if (fd >= 0 && futimens(fd, w->file_times) < 0) {
    close(fd);
    return wr_error_set(w->err, errno, "set the time of `%s`", w->file_path);
  }
  if (fd >= 0 && close(fd) < 0)
    return wr_error_set(w->err, errno, "write `%s`", w->file_path);
  return 0;
}

static int make_entry(struct iwalk *w, int parent, const char *name,
                      const struct wr_lstream_rec *r) {
  struct timespec t[2] = {{r->mtime_sec, r->mtime_nsec},
                          {r->mtime_sec, r->mtime_nsec}};
  int fd = -1;

  switch (r->type) {
  case 'd':
    if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
      return wr_error_set(w->err, errno, "mkdir `%s`", r->path);
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    break;
  case 'f':
    if (r->data_len > w->max_bytes - w->bytes)
      return wr_error_setx(w->err, EDQUOT,
                           "the stream holds more than the %llu bytes there "
                           "is room for",
                           (unsigned long long)w->max_bytes);
    w->bytes += r->data_len;
    fd = openat(parent, name,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    break;
  case 'l':
    if (symlinkat(r->link, parent, name) < 0)
      return wr_error_set(w->err, errno, "symlink `%s`", r->path);
    if (fchownat(parent, name, r->uid, r->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
        utimensat(parent, name, t, AT_SYMLINK_NOFOLLOW) < 0)
      return wr_error_set(w->err, errno, "symlink `%s`", r->path);
    return 0;
  case 'h': {
    const char *tname;
    _cleanup_close_ int tdir = open_parent(w, r->link, &tname);
    struct stat st;
    if (tdir < 0)
      return -1;
    if (fstatat(tdir, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(st.st_mode))
      return wr_error_setx(w->err, EINVAL,
                           "a hard link `%s` to `%s`, which is no file",
                           r->path, r->link);
    if (linkat(tdir, tname, parent, name, 0) < 0)
      return wr_error_set(w->err, errno, "link `%s`", r->path);
    return 0;
  }
  case 'p':
  case 'w':
    if (mknodat(parent, name, r->type == 'p' ? S_IFIFO | 0600 : S_IFCHR | 0600,
                makedev(0, 0)) < 0)
      return wr_error_set(w->err, errno, "make `%s`", r->path);
    fd = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    break;
  }
  if (fd < 0)
    return wr_error_set(w->err, errno, "make `%s`", r->path);
  if ((r->type == 'f' || r->type == 'd') && set_xattrs(fd, r, w->err) < 0) {
    close(fd);
    return -1;
  }
  if (r->type == 'd' && r->opaque &&
      fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0) < 0) {
    close(fd);
    return wr_error_set(w->err, errno, "mark `%s` opaque", r->path);
  }
  if (r->type != 'p' && r->type != 'w') {
    if (fchown(fd, r->uid, r->gid) < 0 || fchmod(fd, r->mode) < 0) {
      close(fd);
      return wr_error_set(w->err, errno, "set the owner of `%s`", r->path);
    }
  } else {
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
    if (fchownat(AT_FDCWD, p, r->uid, r->gid, 0) < 0 ||
        (r->type == 'p' && chmod(p, r->mode) < 0)) {
      close(fd);
      return wr_error_set(w->err, errno, "set the owner of `%s`", r->path);
    }
  }
  if (r->type == 'd') {
    w->dirs = xrealloc(w->dirs, (w->ndirs + 1) * sizeof(*w->dirs));
    w->dirs[w->ndirs++] = (struct dir_time){xstrdup(r->path), {t[0], t[1]}};
    close(fd);
    return 0;
  }
  if (r->type == 'f') {
    w->file = fd;
    snprintf(w->file_path, sizeof(w->file_path), "%s", r->path);
    w->file_times[0] = t[0];
    w->file_times[1] = t[1];
    return 0;
  }
  close(fd);
  return 0;
}

static int import_record(void *arg, const struct wr_lstream_rec *r,
                         wr_error_t *err) {
  struct iwalk *w = arg;
  _cleanup_close_ int parent = -1;
  const char *name;
  struct stat st;

  (void)err;
  if (close_file(w) < 0)
    return -1;
  if (r->type == 'L')
    return 0;
  if ((parent = open_parent(w, r->path, &name)) < 0)
    return -1;
  /* A later layer replaces what it names; a directory merges unless it
   * is opaque, as overlayfs stacks them. */
  if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      (r->type != 'd' || !S_ISDIR(st.st_mode) || r->opaque) &&
      wr_rm_rf_at(parent, name, w->err) < 0)
    return -1;
  return make_entry(w, parent, name, r);
}

static int import_data(void *arg, const void *buf, size_t len,
                       wr_error_t *err) {
  struct iwalk *w = arg;

  (void)err;
  if (w->file < 0)
    return wr_error_setx(w->err, EINVAL, "data without a file");
  if (wr_write_all(w->file, buf, len, w->err) < 0)
    return wr_error_wrap(w->err, "write `%s`", w->file_path);
  return 0;
}

static const struct wr_lstream_ops import_ops = {import_meta, import_record,
                                                 import_data};

/* Directory times last: what was made in them moved theirs. */
static void apply_dir_times(struct iwalk *w) {
  for (size_t i = w->ndirs; i-- > 0;) {
    utimensat(w->root, w->dirs[i].path, w->dirs[i].t, AT_SYMLINK_NOFOLLOW);
    free(w->dirs[i].path);
  }
  free(w->dirs);
}

static int import_from(int fd, struct iwalk *w, struct wr_lstream_dec *d,
                       wr_error_t *err) {
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  unsigned char *in = xmalloc(CHUNK), *out = xmalloc(ZSTD_DStreamOutSize());
  size_t last = 0;
  int r = 0;

  if (dctx == NULL) {
    free(in);
    free(out);
    return wr_error_setx(err, ENOMEM, "zstd");
  }
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, WINDOW_LOG_MAX);
  while (r == 0) {
    ssize_t n = read(fd, in, CHUNK);
    ZSTD_inBuffer ib = {in, n > 0 ? (size_t)n : 0, 0};
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      r = wr_error_set(err, errno, "read the stream");
      break;
    }
    if (n == 0) {
      if (last != 0)
        r = wr_error_setx(err, EINVAL, "the stream is cut short");
      break;
    }
    while (r == 0 && ib.pos < ib.size) {
      ZSTD_outBuffer ob = {out, ZSTD_DStreamOutSize(), 0};
      last = ZSTD_decompressStream(dctx, &ob, &ib);
      if (ZSTD_isError(last))
        r = wr_error_setx(err, EINVAL,
                          "not a zstd stream, or a corrupt one: "
                          "%s",
                          ZSTD_getErrorName(last));
      else
        r = wr_lstream_feed(d, out, ob.pos, err);
    }
  }
  if (r == 0)
    r = wr_lstream_finish(d, err);
  ZSTD_freeDCtx(dctx);
  free(in);
  free(out);
  if (close_file(w) < 0 && r == 0)
    r = -1;
  return r;
}

int wr_lstream_import(int fd, const char *dst, uint64_t max_bytes, char **meta,
                      wr_error_t *err) {
  struct iwalk w = {.max_bytes = max_bytes, .file = -1, .err = err};
  struct wr_lstream_dec d;
  int r;

  if (mkdir(dst, 0755) < 0)
    return wr_error_set(err, errno, "mkdir `%s`", dst);
  w.root = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (w.root < 0) {
    r = wr_error_set(err, errno, "open `%s`", dst);
    wr_rm_rf(dst, NULL);
    return r;
  }
  wr_lstream_dec_init(&d, &import_ops, &w);
  r = import_from(fd, &w, &d, err);
  wr_lstream_dec_free(&d);
  apply_dir_times(&w);
  close(w.root);
  if (r < 0) {
    free(w.meta);
    wr_rm_rf(dst, NULL);
    return wr_error_wrap(err, "import");
  }
  *meta = w.meta;
  return 0;
}
