/*
 * Unit tests for src/common/tar.c: round trips, GNU tar interoperability,
 * and hostile archives written by hand, which must never touch anything
 * outside the extraction root.
 *
 * The fixture is BASE/src and BASE/dst (roots) next to BASE/sentinel (a
 * host directory holding "canary") and BASE/victim (a host file); hostile
 * archives aim at those, and teardown checks they are unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/common.h"
#include "common/tar.h"
#include "common/tar_sparse.h"

#define ID_BASE 268500992u
#define ID_BASE2 (ID_BASE + 65536u)
#define ID_COUNT 65536u

struct tx {
  char base[64];
  char src[128], dst[128], sentinel[128], victim[128];
  int srcfd, dstfd;
  struct wr_tar_ctx sctx, dctx;
};

/* ---- host helpers (trusted paths) -------------------------------------- */

/* dir/rel, valid until 8 more calls. */
static const char *at(const char *dir, const char *rel) {
  static char *ring[8];
  static int slot;

  slot = (slot + 1) % 8;
  free(ring[slot]);
  ring[slot] = xasprintf("%s/%s", dir, rel);
  return ring[slot];
}

static void put(const char *path, const char *data, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

  assert_true(fd >= 0);
  assert_int_equal(wr_write_all(fd, data, strlen(data), NULL), 0);
  assert_int_equal(fchmod(fd, mode), 0);
  close(fd);
}

static char *slurp(const char *path) {
  char *data = NULL;
  size_t len;

  if (wr_read_file(path, 64 << 20, &data, &len, NULL) < 0)
    return NULL;
  return data;
}

static bool exists(const char *path) {
  struct stat st;

  return lstat(path, &st) == 0;
}

static void set_mtime(const char *path, time_t t) {
  struct timespec ts[2] = {{.tv_sec = t}, {.tv_sec = t}};

  assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static void run(const char *cmd) {
  int status = system(cmd);

  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void assert_host_untouched(const struct tx *t) {
  struct dirent *de;
  struct stat st;
  int entries = 0;
  DIR *d = opendir(t->sentinel);
  char *data;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      entries++;
  closedir(d);
  assert_int_equal(entries, 1);
  assert_true(exists(at(t->sentinel, "canary")));
  assert_int_equal(lstat(t->victim, &st), 0);
  assert_int_equal(st.st_nlink, 1);
  assert_int_equal(st.st_mode & 07777, 0644);
  assert_int_equal(st.st_uid, 0);
  data = slurp(t->victim);
  assert_string_equal(data, "victim");
  free(data);
  assert_false(exists(at(t->base, "x")));
  assert_false(exists(at(t->base, "outside")));
}

static int setup(void **state) {
  struct tx *t = xcalloc(1, sizeof(*t));

  strcpy(t->base, "/tmp/wr-tar-XXXXXX");
  assert_non_null(mkdtemp(t->base));
  snprintf(t->src, sizeof(t->src), "%s/src", t->base);
  snprintf(t->dst, sizeof(t->dst), "%s/dst", t->base);
  snprintf(t->sentinel, sizeof(t->sentinel), "%s/sentinel", t->base);
  snprintf(t->victim, sizeof(t->victim), "%s/victim", t->base);
  assert_int_equal(mkdir(t->src, 0755), 0);
  assert_int_equal(mkdir(t->dst, 0755), 0);
  assert_int_equal(mkdir(t->sentinel, 0755), 0);
  put(at(t->sentinel, "canary"), "keep", 0644);
  put(t->victim, "victim", 0644);
  t->srcfd = open(t->src, O_PATH | O_DIRECTORY | O_CLOEXEC);
  t->dstfd = open(t->dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true(t->srcfd >= 0 && t->dstfd >= 0);
  t->sctx = (struct wr_tar_ctx){.rootfd = t->srcfd,
                                .id_base = ID_BASE,
                                .id_count = ID_COUNT,
                                .map_ids = true};
  t->dctx = (struct wr_tar_ctx){.rootfd = t->dstfd,
                                .id_base = ID_BASE2,
                                .id_count = ID_COUNT,
                                .map_ids = true};
  *state = t;
  return 0;
}

static int teardown(void **state) {
  struct tx *t = *state;

  assert_host_untouched(t);
  close(t->srcfd);
  close(t->dstfd);
  assert_int_equal(wr_rm_rf(t->base, NULL), 0);
  free(t);
  return 0;
}

/* ---- streams ----------------------------------------------------------- */

struct feed {
  int fd;
  const char *data;
  size_t len;
};

static void *feed_loop(void *arg) {
  struct feed *f = arg;

  wr_write_all(f->fd, f->data, f->len, NULL);
  close(f->fd);
  return NULL;
}

/* Extract an archive held in memory, through a pipe (no seeking). */
static int extract_mem(const struct wr_tar_ctx *c, const char *dir,
                       const wr_buf_t *a, struct wr_tar_stats *stats,
                       wr_error_t *err) {
  struct feed f = {.data = a->data, .len = a->len};
  pthread_t th;
  int p[2], r;

  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  f.fd = p[1];
  assert_int_equal(pthread_create(&th, NULL, feed_loop, &f), 0);
  r = wr_tar_extract(c, dir, true, p[0], stats, err);
  close(p[0]);
  pthread_join(th, NULL);
  return r;
}

struct producer {
  const struct wr_tar_ctx *c;
  const char *path;
  bool contents_only;
  int fd, result;
  wr_error_t err;
};

static void *produce(void *arg) {
  struct producer *p = arg;

  p->result = wr_tar_create(p->c, p->path, p->contents_only, p->fd, &p->err);
  close(p->fd);
  return NULL;
}

/* wr_tar_create piped straight into wr_tar_extract. */
static void pipe_through(const struct wr_tar_ctx *from, const char *path,
                         bool contents_only, const struct wr_tar_ctx *to,
                         const char *dir, struct wr_tar_stats *stats) {
  struct producer p = {.c = from, .path = path, .contents_only = contents_only};
  wr_error_t err = {0};
  pthread_t th;
  int fds[2];

  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  p.fd = fds[1];
  assert_int_equal(pthread_create(&th, NULL, produce, &p), 0);
  if (wr_tar_extract(to, dir, true, fds[0], stats, &err) < 0)
    fail_msg("extract: %s", err.msg);
  close(fds[0]);
  pthread_join(th, NULL);
  if (p.result < 0)
    fail_msg("create: %s", p.err.msg);
}

static void create_file(const struct wr_tar_ctx *c, const char *path,
                        bool contents_only, const char *file) {
  wr_error_t err = {0};
  int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  assert_true(fd >= 0);
  if (wr_tar_create(c, path, contents_only, fd, &err) < 0)
    fail_msg("create: %s", err.msg);
  close(fd);
}

/* ---- hand-made archives ------------------------------------------------ */

struct th {
  char name[100], mode[8], uid[8], gid[8], size[12], mtime[12], chksum[8];
  char type, linkname[100], magic[6], version[2], uname[32], gname[32];
  char devmajor[8], devminor[8], prefix[155], pad[12];
};

static void octal(char *field, size_t n, uint64_t v) {
  for (size_t i = n - 1; i > 0; i--, v >>= 3)
    field[i - 1] = (char)('0' + (v & 7));
  field[n - 1] = '\0';
}

static void th_init(struct th *h, const char *name, char type, size_t size,
                    unsigned mode) {
  memset(h, 0, sizeof(*h));
  memcpy(h->name, name, WR_MIN(strlen(name), sizeof(h->name)));
  octal(h->mode, sizeof(h->mode), mode);
  octal(h->uid, sizeof(h->uid), 0);
  octal(h->gid, sizeof(h->gid), 0);
  octal(h->size, sizeof(h->size), size);
  octal(h->mtime, sizeof(h->mtime), 1600000000);
  h->type = type;
  memcpy(h->magic, "ustar", 6);
  memcpy(h->version, "00", 2);
}

static void th_sum(struct th *h) {
  const unsigned char *p = (const unsigned char *)h;
  unsigned sum = 0;

  memset(h->chksum, ' ', sizeof(h->chksum));
  for (size_t i = 0; i < sizeof(*h); i++)
    sum += p[i];
  octal(h->chksum, 7, sum);
}

static void arc_raw(wr_buf_t *a, const struct th *h, const char *data,
                    size_t len) {
  static const char zero[512];

  wr_buf_append(a, h, sizeof(*h));
  wr_buf_append(a, data, len);
  wr_buf_append(a, zero, (512 - len % 512) % 512);
}

static void arc_add(wr_buf_t *a, struct th *h, const char *data, size_t len) {
  th_sum(h);
  arc_raw(a, h, data, len);
}

static void arc_file(wr_buf_t *a, const char *name, const char *data,
                     unsigned mode) {
  struct th h;

  th_init(&h, name, '0', strlen(data), mode);
  arc_add(a, &h, data, strlen(data));
}

static void arc_link(wr_buf_t *a, const char *name, char type,
                     const char *target) {
  struct th h;

  th_init(&h, name, type, 0, 0777);
  memcpy(h.linkname, target, WR_MIN(strlen(target), sizeof(h.linkname)));
  arc_add(a, &h, NULL, 0);
}

static void arc_end(wr_buf_t *a) {
  static const char zero[1024];

  wr_buf_append(a, zero, sizeof(zero));
}

/* Extract a one-entry-at-a-time archive and expect failure mentioning
 * `needle`. */
static void expect_refused(struct tx *t, wr_buf_t *a, const char *needle) {
  wr_error_t err = {0};

  arc_end(a);
  assert_int_equal(extract_mem(&t->dctx, "/", a, NULL, &err), -1);
  if (needle != NULL && strstr(err.msg, needle) == NULL)
    fail_msg("error `%s` does not mention `%s`", err.msg, needle);
  wr_buf_free(a);
}

/* ---- round trips ------------------------------------------------------- */

static const char *long_name(void) {
  return "n123456789n123456789n123456789n123456789n123456789"
         "n123456789n123456789n123456789n123456789n123456789"
         "n123456789n123456789n123456789n123456789n123456789";
}

/* A tree with what a sandbox's files usually are, and some that are long
 * or large. */
static void make_tree(const char *dir) {
  char path[4096];
  wr_buf_t big;

  assert_int_equal(mkdir(at(dir, "a"), 0755), 0);
  put(at(dir, "a/file"), "hello", 0640);
  assert_int_equal(chown(at(dir, "a/file"), ID_BASE + 1000, ID_BASE + 1001), 0);
  set_mtime(at(dir, "a/file"), 1500000000);
  assert_int_equal(mkdir(at(dir, "a/sub"), 0755), 0);
  wr_buf_init(&big);
  for (int i = 0; i < 300000; i++)
    wr_buf_printf(&big, "%09d\n", i);
  wr_buf_puts(&big, "tail");
  put(at(dir, "a/sub/big"), big.data, 0644);
  wr_buf_free(&big);
  assert_int_equal(symlink("file", at(dir, "a/link")), 0);
  assert_int_equal(symlink("/etc/passwd", at(dir, "a/abs")), 0);
  snprintf(path, sizeof(path), "a/%s", long_name());
  put(at(dir, path), "long", 0644);
  snprintf(path, sizeof(path), "a/%.90s/%.90s/%.90s", long_name(),
           long_name() + 1, long_name() + 2);
  assert_int_equal(wr_mkdir_p(at(dir, path), 0755, NULL), 0);
  strcat(path, "/deep");
  put(at(dir, path), "deep", 0600);
  snprintf(path, sizeof(path), "../../%s/%s", long_name(), long_name());
  assert_int_equal(symlink(path, at(dir, "a/longlink")), 0);
  assert_int_equal(mkfifo(at(dir, "a/fifo"), 0620), 0);
  assert_int_equal(mkdir(at(dir, "a/empty"), 0700), 0);
  set_mtime(at(dir, "a/empty"), 1400000000);
  set_mtime(at(dir, "a"), 1300000000);
}

static void assert_same_file(const char *a, const char *b) {
  char *x = slurp(a), *y = slurp(b);

  if (x == NULL || y == NULL)
    fail_msg("cannot read `%s` or `%s`", a, b);
  assert_string_equal(x, y);
  free(x);
  free(y);
}

static void assert_tree_copied(const char *src_dir, const char *dst_dir,
                               uint32_t id_base) {
  _cleanup_free_ char *src = xstrdup(src_dir), *dst = xstrdup(dst_dir);
  char path[4096], target[4096];
  struct stat st;
  ssize_t n;

  assert_same_file(at(src, "a/file"), at(dst, "a/file"));
  assert_int_equal(lstat(at(dst, "a/file"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  assert_int_equal(st.st_mtim.tv_sec, 1500000000);
  if (id_base != 0) {
    assert_int_equal(st.st_uid, id_base + 1000);
    assert_int_equal(st.st_gid, id_base + 1001);
  }
  assert_same_file(at(src, "a/sub/big"), at(dst, "a/sub/big"));
  n = readlink(at(dst, "a/link"), target, sizeof(target) - 1);
  assert_int_equal(n, 4);
  n = readlink(at(dst, "a/abs"), target, sizeof(target) - 1);
  assert_int_equal(n, 11);
  target[n] = '\0';
  assert_string_equal(target, "/etc/passwd");
  snprintf(path, sizeof(path), "a/%s", long_name());
  assert_same_file(at(src, path), at(dst, path));
  snprintf(path, sizeof(path), "a/%.90s/%.90s/%.90s/deep", long_name(),
           long_name() + 1, long_name() + 2);
  assert_true(strlen(path) > 255);
  assert_same_file(at(src, path), at(dst, path));
  n = readlink(at(dst, "a/longlink"), target, sizeof(target) - 1);
  assert_int_equal(n, 6 + 2 * strlen(long_name()) + 1);
  assert_int_equal(lstat(at(dst, "a/fifo"), &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  assert_int_equal(lstat(at(dst, "a/empty"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 0700);
  assert_int_equal(st.st_mtim.tv_sec, 1400000000);
  assert_int_equal(lstat(at(dst, "a"), &st), 0);
  assert_int_equal(st.st_mtim.tv_sec, 1300000000);
}

/* ---- sparse files ------------------------------------------------------ */

#define TIB (1ull << 40)

/* Where the data of the sparse test file is, and what it is. */
static const struct {
  uint64_t off;
  const char *text;
} sparse_bits[] = {
    {0, "head"},
    {(1ull << 30) + 5, "a gigabyte in"},
    {TIB / 2, "middle"},
    {TIB - 4, "tail"},
};

/* A 1 TiB file holding only sparse_bits. */
static void make_sparse(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);

  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)TIB), 0);
  for (size_t i = 0; i < WR_ARRAY_SIZE(sparse_bits); i++) {
    size_t n = strlen(sparse_bits[i].text);
    assert_int_equal(
        pwrite(fd, sparse_bits[i].text, n, (off_t)sparse_bits[i].off),
        (ssize_t)n);
  }
  close(fd);
}

/* The copy has the size, the data and (nearly) none of the disk. */
static void assert_sparse_copy(const char *path) {
  char buf[64];
  struct stat st;
  int fd;

  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal((uint64_t)st.st_size, TIB);
  if ((uint64_t)st.st_blocks * 512 > (1u << 20))
    fail_msg("`%s` takes %llu bytes of disk", path,
             (unsigned long long)st.st_blocks * 512);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  for (size_t i = 0; i < WR_ARRAY_SIZE(sparse_bits); i++) {
    size_t n = strlen(sparse_bits[i].text);
    assert_int_equal(pread(fd, buf, n, (off_t)sparse_bits[i].off), (ssize_t)n);
    assert_memory_equal(buf, sparse_bits[i].text, n);
  }
  /* A hole reads as zeros. */
  assert_int_equal(pread(fd, buf, 8, (off_t)(TIB / 4)), 8);
  assert_memory_equal(buf, "\0\0\0\0\0\0\0\0", 8);
  close(fd);
}

static void test_roundtrip(void **state) {
  struct tx *t = *state;
  struct wr_tar_stats stats;
  char restore[256];

  make_tree(t->src);
  pipe_through(&t->sctx, "/a", false, &t->dctx, "/restore/here", &stats);
  snprintf(restore, sizeof(restore), "%s/restore/here", t->dst);
  assert_tree_copied(t->src, restore, ID_BASE2);
  assert_int_equal(stats.files, 5); /* file, big, long, deep, fifo */
  assert_int_equal(stats.links, 3);
  assert_int_equal(stats.dirs, 6);
  assert_true(stats.bytes > 3000000);
}

/* What we write, GNU tar reads; what GNU tar writes, we read. */
static void test_gnu_tar_interop(void **state) {
  struct tx *t = *state;
  char cmd[2048], out[256], file[256];
  char *listing;

  make_tree(t->src);
  snprintf(file, sizeof(file), "%s/ours.tar", t->base);
  create_file(&t->sctx, "/a", false, file);
  snprintf(out, sizeof(out), "%s/list", t->base);
  snprintf(cmd, sizeof(cmd), "tar -tvf %s > %s", file, out);
  run(cmd);
  listing = slurp(out);
  assert_non_null(strstr(listing, long_name()));
  assert_non_null(strstr(listing, "a/sub/big"));
  assert_non_null(strstr(listing, "a/link -> file"));
  free(listing);
  assert_int_equal(mkdir(at(t->base, "gnu"), 0755), 0);
  snprintf(cmd, sizeof(cmd), "tar -C %s/gnu -xf %s", t->base, file);
  run(cmd);
  assert_tree_copied(t->src, at(t->base, "gnu"), 0);

  /* GNU format (long names as 'L'/'K' entries), pax, with a hardlink. */
  assert_int_equal(link(at(t->src, "a/file"), at(t->src, "a/hard")), 0);
  set_mtime(at(t->src, "a"), 1300000000);
  for (int i = 0; i < 2; i++) {
    const char *format = i == 0 ? "gnu" : "posix";
    char dir[64], hard[512], plain[512];
    struct stat a, b;

    snprintf(cmd, sizeof(cmd), "tar --format=%s -C %s -cf %s/%s.tar a", format,
             t->src, t->base, format);
    run(cmd);
    snprintf(dir, sizeof(dir), "/%s", format);
    snprintf(file, sizeof(file), "%s/%s.tar", t->base, format);
    {
      wr_error_t err = {0};
      int fd = open(file, O_RDONLY | O_CLOEXEC);
      assert_true(fd >= 0);
      if (wr_tar_extract(&t->dctx, dir, true, fd, NULL, &err) < 0)
        fail_msg("extract %s: %s", format, err.msg);
      close(fd);
    }
    snprintf(out, sizeof(out), "%s/%s", t->dst, format);
    assert_tree_copied(t->src, out, 0); /* GNU tar stores host ids */
    snprintf(hard, sizeof(hard), "%s/a/hard", out);
    snprintf(plain, sizeof(plain), "%s/a/file", out);
    assert_int_equal(lstat(hard, &a), 0);
    assert_int_equal(lstat(plain, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);
  }
}

/* A terabyte of holes goes through as a few blocks, and comes out as one. */
static void test_sparse_roundtrip(void **state) {
  struct tx *t = *state;
  struct wr_tar_stats stats, measured;
  struct wr_tar_ctx bounded = t->dctx;
  wr_error_t err = {0};
  struct stat st;

  /* Should holes ever become zeros again, this fails instead of filling
   * the disk. */
  bounded.max_bytes = 16u << 20;
  assert_int_equal(mkdir(at(t->src, "s"), 0755), 0);
  make_sparse(at(t->src, "s/big"));
  put(at(t->src, "s/plain"), "no holes here", 0644);
  assert_int_equal(close(open(at(t->src, "s/allhole"),
                              O_WRONLY | O_CREAT | O_CLOEXEC, 0600)),
                   0);
  assert_int_equal(truncate(at(t->src, "s/allhole"), (off_t)TIB), 0);
  assert_int_equal(wr_tar_measure(&t->sctx, "/s", false, &measured, &err), 0);
  assert_true(measured.bytes < (1u << 20));
  pipe_through(&t->sctx, "/s", false, &bounded, "/", &stats);
  assert_sparse_copy(at(t->dst, "s/big"));
  assert_same_file(at(t->src, "s/plain"), at(t->dst, "s/plain"));
  assert_int_equal(lstat(at(t->dst, "s/allhole"), &st), 0);
  assert_int_equal((uint64_t)st.st_size, TIB);
  assert_int_equal(st.st_blocks, 0);
  assert_int_equal(lstat(at(t->dst, "s/big"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 0640);
  /* Data counts, holes do not: the big file's blocks plus the plain one. */
  assert_true(stats.bytes < (1u << 20));
  assert_int_equal(measured.bytes, stats.bytes);
  assert_int_equal(measured.files, stats.files);
  assert_int_equal(measured.dirs, stats.dirs);
}

/* GNU tar reads our sparse files and we read its, in both of its formats;
 * its PAX 0.x formats are refused, never written wrong. */
static void test_sparse_gnu_interop(void **state) {
  struct tx *t = *state;
  const char *formats[] = {"--format=posix", "--format=gnu"};
  char cmd[1024], file[256];
  wr_error_t err = {0};
  int fd;

  struct wr_tar_ctx bounded = t->dctx;
  struct wr_tar_stats measured;

  bounded.max_bytes = 16u << 20;
  make_sparse(at(t->src, "big"));
  assert_int_equal(wr_tar_measure(&t->sctx, "/big", false, &measured, &err), 0);
  assert_true(measured.bytes < (1u << 20)); /* else the next line fills /tmp */
  snprintf(file, sizeof(file), "%s/ours.tar", t->base);
  create_file(&t->sctx, "/big", false, file);
  assert_int_equal(mkdir(at(t->base, "gnu"), 0755), 0);
  snprintf(cmd, sizeof(cmd), "tar -C %s/gnu -xf %s", t->base, file);
  run(cmd);
  assert_sparse_copy(at(t->base, "gnu/big"));

  for (size_t i = 0; i < WR_ARRAY_SIZE(formats); i++) {
    char dir[32];

    snprintf(cmd, sizeof(cmd), "tar %s --sparse -C %s -cf %s/gnu%zu.tar big",
             formats[i], t->src, t->base, i);
    run(cmd);
    snprintf(file, sizeof(file), "%s/gnu%zu.tar", t->base, i);
    snprintf(dir, sizeof(dir), "/from%zu", i);
    fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    if (wr_tar_extract(&bounded, dir, true, fd, NULL, &err) < 0)
      fail_msg("extract %s: %s", formats[i], err.msg);
    close(fd);
    snprintf(file, sizeof(file), "from%zu/big", i);
    assert_sparse_copy(at(t->dst, file));
  }

  snprintf(cmd, sizeof(cmd),
           "tar --format=posix --sparse --sparse-version=0.1 -C %s "
           "-cf %s/old.tar big",
           t->src, t->base);
  run(cmd);
  snprintf(file, sizeof(file), "%s/old.tar", t->base);
  fd = open(file, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(wr_tar_extract(&bounded, "/old", true, fd, NULL, &err), -1);
  assert_non_null(strstr(err.msg, "format 0.x"));
  close(fd);
  assert_false(exists(at(t->dst, "old/big")));
}

/* The map text round trip, and the checks a map from outside must pass. */
static void test_sparse_maps(void **state) {
  struct wr_sparse a = {.realsize = 10000}, b = {0};
  struct wr_sparse_parser p = {0};
  wr_error_t err = {0};
  wr_buf_t text;
  (void)state;

  assert_int_equal(wr_sparse_add(&a, 0, 100, &err), 0);
  assert_int_equal(wr_sparse_add(&a, 4096, 4096, &err), 0);
  wr_buf_init(&text);
  wr_sparse_map_text(&a, &text);
  assert_int_equal(text.len % 512, 0);
  assert_string_equal(text.data, "3\n0\n100\n4096\n4096\n10000\n0\n");
  assert_int_equal(wr_sparse_parse(&p, &b, text.data, text.len, &err), 1);
  b.realsize = 10000;
  assert_int_equal(b.n, 3);
  assert_int_equal(b.v[1].off, 4096);
  assert_int_equal(b.data, 4196);
  assert_int_equal(wr_sparse_check(&b, 4196, &err), 0);
  assert_int_equal(wr_sparse_check(&b, 4195, &err), -1);
  assert_non_null(strstr(err.msg, "claims 4196 bytes"));
  b.realsize = 8000;
  assert_int_equal(wr_sparse_check(&b, 4196, &err), -1);
  assert_non_null(strstr(err.msg, "past the file's size"));
  b.realsize = 1ull << 63;
  assert_int_equal(wr_sparse_check(&b, 4196, &err), -1);
  assert_non_null(strstr(err.msg, "too large"));
  wr_sparse_free(&b);
  /* Out of order, and overlapping. */
  b.realsize = 10000;
  assert_int_equal(wr_sparse_add(&b, 500, 10, &err), 0);
  assert_int_equal(wr_sparse_add(&b, 100, 10, &err), 0);
  assert_int_equal(wr_sparse_check(&b, 20, &err), -1);
  assert_non_null(strstr(err.msg, "out of order"));
  wr_sparse_free(&b);
  b.realsize = 10000;
  assert_int_equal(wr_sparse_add(&b, 100, 50, &err), 0);
  assert_int_equal(wr_sparse_add(&b, 120, 50, &err), 0);
  assert_int_equal(wr_sparse_check(&b, 100, &err), -1);
  assert_non_null(strstr(err.msg, "overlap"));
  wr_sparse_free(&b);
  /* Counts and numbers beyond the bounds, junk. */
  memset(&p, 0, sizeof(p));
  assert_int_equal(wr_sparse_parse(&p, &b, "1000000\n", 8, &err), -1);
  assert_non_null(strstr(err.msg, "at most 65536"));
  memset(&p, 0, sizeof(p));
  assert_int_equal(
      wr_sparse_parse(&p, &b, "1\n99999999999999999999999\n", 27, &err), -1);
  assert_non_null(strstr(err.msg, "too large"));
  memset(&p, 0, sizeof(p));
  assert_int_equal(wr_sparse_parse(&p, &b, "1\n-5\n", 5, &err), -1);
  assert_non_null(strstr(err.msg, "malformed"));
  memset(&p, 0, sizeof(p));
  assert_int_equal(wr_sparse_parse(&p, &b, "2\n0\n", 4, &err), 0); /* more */
  wr_sparse_free(&b);
  wr_sparse_free(&a);
  wr_buf_free(&text);
}

/* A pax record "LEN key=value\n" with the right LEN. */
static void pax_rec(wr_buf_t *b, const char *key, const char *val) {
  size_t base = strlen(key) + strlen(val) + 3;
  size_t len = base + (base + 1 >= 10 ? (base + 2 >= 100 ? 3 : 2) : 1);

  wr_buf_printf(b, "%zu %s=%s\n", len, key, val);
}

/* A PAX 1.0 sparse entry, written by hand: `map` is the map text (padded
 * here), then `data`. */
static void arc_sparse(wr_buf_t *a, const char *name, const char *realsize,
                       const char *map, const char *data) {
  static const char zero[512];
  wr_buf_t rec, body;
  struct th h;

  wr_buf_init(&rec);
  wr_buf_init(&body);
  pax_rec(&rec, "GNU.sparse.major", "1");
  pax_rec(&rec, "GNU.sparse.minor", "0");
  pax_rec(&rec, "GNU.sparse.name", name);
  pax_rec(&rec, "GNU.sparse.realsize", realsize);
  th_init(&h, "pax", 'x', rec.len, 0644);
  arc_add(a, &h, rec.data, rec.len);
  wr_buf_puts(&body, map);
  wr_buf_append(&body, zero, (512 - body.len % 512) % 512);
  wr_buf_puts(&body, data);
  th_init(&h, "GNUSparseFile.0/x", '0', body.len, 0644);
  arc_add(a, &h, body.data, body.len);
  wr_buf_free(&rec);
  wr_buf_free(&body);
}

/* Directory entries of dir other than . and .. */
static int entries_in(const char *dir) {
  struct dirent *de;
  DIR *d = opendir(dir);
  int n = 0;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      n++;
  closedir(d);
  return n;
}

/* Hostile sparse maps are refused before anything is written. */
static void test_sparse_hostile_maps(void **state) {
  struct tx *t = *state;
  struct th h;
  wr_buf_t a, m;

  wr_buf_init(&a);
  arc_sparse(&a, "over", "100", "2\n0\n10\n5\n10\n", "01234567890123456789");
  expect_refused(t, &a, "overlap");
  arc_sparse(&a, "order", "100", "2\n50\n10\n0\n10\n", "01234567890123456789");
  expect_refused(t, &a, "out of order");
  arc_sparse(&a, "more", "100", "1\n0\n50\n", "only ten b");
  expect_refused(t, &a, "claims 50 bytes");
  arc_sparse(&a, "huge", "9223372036854775808", "1\n0\n4\n", "data");
  expect_refused(t, &a, "too large");
  arc_sparse(&a, "past", "100", "1\n98\n4\n", "data");
  expect_refused(t, &a, "past the file's size");
  arc_sparse(&a, "junk", "100", "1\nzero\nfour\n", "data");
  expect_refused(t, &a, "malformed sparse map");
  /* A million segments: refused at the count, before any is held. */
  wr_buf_init(&m);
  wr_buf_puts(&m, "1000000\n");
  for (int i = 0; i < 1000; i++)
    wr_buf_printf(&m, "%d\n1\n", 2 * i);
  arc_sparse(&a, "million", "10000000", m.data, "");
  wr_buf_free(&m);
  expect_refused(t, &a, "at most 65536");
  /* A map that fills the entry's one block and is still not complete. */
  wr_buf_init(&m);
  wr_buf_puts(&m, "65536\n");
  while (m.len < 512)
    wr_buf_puts(&m, "1\n");
  arc_sparse(&a, "endless", "100", m.data, "");
  wr_buf_free(&m);
  expect_refused(t, &a, "runs past");
  /* An old GNU 'S' header whose segments go backwards. */
  th_init(&h, "oldgnu", 'S', 8, 0644);
  memcpy(h.magic, "ustar  ", 8); /* GNU's magic and version */
  octal((char *)&h + 386, 12, 50);
  octal((char *)&h + 398, 12, 4);
  octal((char *)&h + 410, 12, 0);
  octal((char *)&h + 422, 12, 4);
  octal((char *)&h + 483, 12, 100);
  arc_add(&a, &h, "datadata", 8);
  expect_refused(t, &a, "out of order");
  /* Sparse records on a symlink, and an unknown version. */
  {
    wr_buf_t rec;
    wr_buf_init(&rec);
    pax_rec(&rec, "GNU.sparse.major", "1");
    pax_rec(&rec, "GNU.sparse.minor", "0");
    pax_rec(&rec, "GNU.sparse.realsize", "10");
    th_init(&h, "pax", 'x', rec.len, 0644);
    arc_add(&a, &h, rec.data, rec.len);
    arc_link(&a, "link", '2', "target");
    expect_refused(t, &a, "not a file");
    wr_buf_reset(&rec);
    pax_rec(&rec, "GNU.sparse.major", "2");
    pax_rec(&rec, "GNU.sparse.minor", "0");
    th_init(&h, "pax", 'x', rec.len, 0644);
    arc_add(&a, &h, rec.data, rec.len);
    arc_file(&a, "v2", "data", 0644);
    expect_refused(t, &a, "format 2.0");
    wr_buf_free(&rec);
  }
  assert_int_equal(entries_in(t->dst), 0);
}

/* max_bytes counts data, not holes, and stops an entry before it is made. */
static void test_byte_budget(void **state) {
  struct tx *t = *state;
  struct wr_tar_ctx c = t->dctx;
  struct wr_tar_stats stats;
  wr_error_t err = {0};
  wr_buf_t a;

  c.max_bytes = 1000;
  wr_buf_init(&a);
  arc_sparse(&a, "holes", "1099511627776", "2\n0\n4\n1099511627772\n4\n",
             "headtail");
  arc_file(&a, "small", "0123456789", 0644);
  arc_end(&a);
  assert_int_equal(extract_mem(&c, "/ok", &a, &stats, &err), 0);
  assert_int_equal(stats.bytes, 18);
  wr_buf_free(&a);
  assert_int_equal(lstat(at(t->dst, "ok/holes"), &(struct stat){0}), 0);

  {
    char big[1200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    arc_file(&a, "first", big + 600, 0644); /* 599 bytes */
    arc_file(&a, "second", big + 600, 0644);
    arc_end(&a);
  }
  assert_int_equal(extract_mem(&c, "/over", &a, NULL, &err), -1);
  assert_int_equal(err.code, EDQUOT);
  assert_non_null(strstr(err.msg, "more than 1000 bytes"));
  assert_true(exists(at(t->dst, "over/first")));
  assert_false(exists(at(t->dst, "over/second")));
  assert_int_equal(entries_in(at(t->dst, "over")), 1); /* no temporary file */
  wr_buf_free(&a);
}

/* wr_tar_create_as names the top entry. */
static void test_create_as(void **state) {
  struct tx *t = *state;
  struct producer p = {.c = &t->sctx};
  wr_error_t err = {0};
  int fds[2];

  put(at(t->src, "file"), "renamed", 0600);
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  assert_int_equal(wr_tar_create_as(&t->sctx, "/file", "../x", fds[1], &err),
                   -1);
  assert_int_equal(wr_tar_create_as(&t->sctx, "/file", "other", fds[1], &err),
                   0);
  close(fds[1]);
  assert_int_equal(wr_tar_extract(&t->dctx, "/", false, fds[0], NULL, &err), 0);
  close(fds[0]);
  (void)p;
  assert_same_file(at(t->src, "file"), at(t->dst, "other"));
  assert_false(exists(at(t->dst, "file")));
}

static void test_contents_only(void **state) {
  struct tx *t = *state;
  char cmd[2048], file[256], out[256];
  char *listing;

  make_tree(t->src);
  snprintf(file, sizeof(file), "%s/c.tar", t->base);
  snprintf(out, sizeof(out), "%s/list", t->base);
  create_file(&t->sctx, "/a/", true, file);
  snprintf(cmd, sizeof(cmd), "tar -tf %s > %s", file, out);
  run(cmd);
  listing = slurp(out);
  assert_true(wr_str_has_prefix(listing, "file\n") ||
              strstr(listing, "\nfile\n") != NULL);
  assert_non_null(strstr(listing, "sub/big\n"));
  assert_null(strstr(listing, "a/"));
  free(listing);

  /* A single file is one entry named by its basename. */
  create_file(&t->sctx, "/a/sub/../file", false, file);
  run(cmd);
  listing = slurp(out);
  assert_string_equal(listing, "file\n");
  free(listing);

  /* "/" is its contents; extraction elsewhere recreates the tree. */
  pipe_through(&t->sctx, "/", false, &t->dctx, "/copy", NULL);
  assert_tree_copied(t->src, at(t->dst, "copy"), ID_BASE2);
}

static void test_create_errors(void **state) {
  struct tx *t = *state;
  wr_error_t err = {0};
  int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

  make_tree(t->src);
  assert_int_equal(wr_tar_create(&t->sctx, "/missing", false, fd, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_tar_create(&t->sctx, "/a/file", true, fd, &err), -1);
  assert_int_equal(err.code, ENOTDIR);
  /* A link out of the root is stored as a link, not followed. */
  assert_int_equal(symlink(t->sentinel, at(t->src, "out")), 0);
  assert_int_equal(wr_tar_create(&t->sctx, "/out", true, fd, &err), -1);
  assert_int_equal(err.code, ENOENT);
  close(fd);
}

/* ---- hostile archives -------------------------------------------------- */

static void test_dotdot(void **state) {
  struct tx *t = *state;
  struct th h;
  wr_buf_t a;
  char pax[64];

  wr_buf_init(&a);
  arc_file(&a, "../x", "escaped", 0644);
  expect_refused(t, &a, "../x");
  arc_file(&a, "ok/../../x", "escaped", 0644);
  expect_refused(t, &a, "ok/../../x");
  arc_file(&a, "..", "escaped", 0644);
  expect_refused(t, &a, "`..`");
  /* The same through a pax path and a GNU long name. */
  snprintf(pax, sizeof(pax), "16 path=../../x\n");
  th_init(&h, "pax", 'x', strlen(pax), 0644);
  arc_add(&a, &h, pax, strlen(pax));
  arc_file(&a, "innocent", "escaped", 0644);
  expect_refused(t, &a, "../../x");
  th_init(&h, "././@LongLink", 'L', 5, 0644);
  arc_add(&a, &h, "../x", 5);
  arc_file(&a, "innocent", "escaped", 0644);
  expect_refused(t, &a, "../x");
  arc_link(&a, "h", '1', "../victim");
  expect_refused(t, &a, "../victim");
  assert_false(exists(at(t->dst, "innocent")));
  assert_false(exists(at(t->dst, "ok")));
}

static void test_absolute_names(void **state) {
  struct tx *t = *state;
  wr_error_t err = {0};
  char *data;
  wr_buf_t a;

  wr_buf_init(&a);
  arc_file(&a, "/abs/x", "in", 0644);
  arc_file(&a, "./././/rel//y", "in", 0644);
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);
  data = slurp(at(t->dst, "abs/x"));
  assert_string_equal(data, "in");
  free(data);
  assert_true(exists(at(t->dst, "rel/y")));
}

static void test_symlink_then_file(void **state) {
  struct tx *t = *state;
  char name[64], path[128], host[128], rel[256];
  wr_error_t err = {0};
  wr_buf_t a;

  snprintf(name, sizeof(name), "wr-tar-owned-%d", (int)getpid());
  snprintf(host, sizeof(host), "/etc/%s", name);
  wr_buf_init(&a);
  arc_link(&a, "l", '2', "/");
  snprintf(path, sizeof(path), "l/etc/%s", name);
  arc_file(&a, path, "owned", 0644);
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);
  snprintf(rel, sizeof(rel), "etc/%s", name);
  assert_true(exists(at(t->dst, rel)));
  assert_false(exists(host));

  /* Links to the sentinel (by host path and by ".."): dangling inside the
   * root, so files through them fail; nothing lands in the sentinel. */
  wr_buf_init(&a);
  arc_link(&a, "s", '2', t->sentinel);
  arc_file(&a, "s/owned", "owned", 0644);
  expect_refused(t, &a, "s/owned");
  arc_link(&a, "r", '2', "../sentinel");
  arc_file(&a, "r/owned", "owned", 0644);
  expect_refused(t, &a, "r/owned");
  /* A directory entry replaces such a link instead of following it. */
  arc_link(&a, "s", '2', t->sentinel);
  arc_link(&a, "s/", '5', "");
  arc_file(&a, "s/owned", "owned", 0644);
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);
  assert_true(exists(at(t->dst, "s/owned")));
}

static void test_replace_symlink(void **state) {
  struct tx *t = *state;
  wr_error_t err = {0};
  struct stat st;
  wr_buf_t a;

  assert_int_equal(symlink(t->victim, at(t->dst, "victimlink")), 0);
  assert_int_equal(symlink("../victim", at(t->dst, "victimrel")), 0);
  wr_buf_init(&a);
  arc_file(&a, "victimlink", "pwned", 0644);
  arc_file(&a, "victimrel", "pwned", 0644);
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);
  assert_int_equal(lstat(at(t->dst, "victimlink"), &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(lstat(at(t->dst, "victimrel"), &st), 0);
  assert_true(S_ISREG(st.st_mode));
}

static void test_hardlinks(void **state) {
  struct tx *t = *state;
  char path[256];
  struct stat before, after;
  wr_error_t err = {0};
  wr_buf_t a;

  assert_int_equal(stat("/etc/passwd", &before), 0);
  wr_buf_init(&a);
  arc_link(&a, "h1", '1', "/etc/passwd");
  expect_refused(t, &a, "h1");
  arc_link(&a, "sv", '2', t->victim);
  arc_link(&a, "h2", '1', "sv");
  expect_refused(t, &a, "not a file");
  arc_link(&a, "sr", '2', "/");
  snprintf(path, sizeof(path), "sr%s", t->victim);
  arc_link(&a, "h3", '1', path);
  expect_refused(t, &a, "h3");
  arc_link(&a, "dir/", '5', "");
  arc_link(&a, "h4", '1', "dir");
  expect_refused(t, &a, "not a file");
  assert_int_equal(stat("/etc/passwd", &after), 0);
  assert_int_equal(after.st_nlink, before.st_nlink);

  /* A hardlink to a file of the archive works, even through an in-root
   * symlink. */
  arc_file(&a, "real", "shared", 0644);
  arc_link(&a, "up", '2', "/");
  arc_link(&a, "h5", '1', "up/real");
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);
  assert_int_equal(lstat(at(t->dst, "h5"), &after), 0);
  assert_int_equal(after.st_nlink, 2);
}

static void test_devices_and_types(void **state) {
  struct tx *t = *state;
  wr_buf_t a;
  struct th h;

  wr_buf_init(&a);
  arc_link(&a, "dev/evil", '3', "");
  expect_refused(t, &a, "dev/evil");
  arc_link(&a, "blk", '4', "");
  expect_refused(t, &a, "device");
  th_init(&h, "volume", 'M', 0, 0644); /* a multi-volume continuation */
  arc_add(&a, &h, NULL, 0);
  expect_refused(t, &a, "unsupported entry type");
  assert_false(exists(at(t->dst, "dev")));
  assert_false(exists(at(t->dst, "blk")));
}

static void test_corrupt(void **state) {
  struct tx *t = *state;
  wr_error_t err = {0};
  struct th h;
  wr_buf_t a;

  wr_buf_init(&a);
  th_init(&h, "f", '0', 4, 0644);
  th_sum(&h);
  h.name[0] = 'g'; /* after the checksum */
  arc_raw(&a, &h, "data", 4);
  expect_refused(t, &a, "checksum");
  assert_false(exists(at(t->dst, "g")));

  th_init(&h, "f", '0', 4, 0644);
  memcpy(h.mode, "0000088", 8);
  arc_add(&a, &h, "data", 4);
  expect_refused(t, &a, "malformed");

  /* Truncated: in the data, in a header, and with no end marker. */
  th_init(&h, "big", '0', 100000, 0644);
  arc_add(&a, &h, "only this", 9);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), -1);
  assert_non_null(strstr(err.msg, "truncated"));
  wr_buf_free(&a);
  arc_file(&a, "ok", "data", 0644);
  a.len -= 700;
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), -1);
  assert_non_null(strstr(err.msg, "truncated"));
  wr_buf_free(&a);
  arc_file(&a, "ok", "data", 0644);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), -1);
  assert_non_null(strstr(err.msg, "end marker"));
  wr_buf_free(&a);
  /* A single zero block at the very end is accepted. */
  arc_file(&a, "ok", "data", 0644);
  arc_end(&a);
  a.len -= 512;
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);

  /* Oversized and malformed metadata. */
  th_init(&h, "pax", 'x', 2 << 20, 0644);
  arc_add(&a, &h, NULL, 0);
  expect_refused(t, &a, "metadata");
  th_init(&h, "pax", 'x', 12, 0644);
  arc_add(&a, &h, "99 path=abc\n", 12);
  expect_refused(t, &a, "pax record");
  th_init(&h, "pax", 'x', 11, 0644);
  arc_add(&a, &h, "11 size=1x\n", 11);
  expect_refused(t, &a, "pax number");
}

static void test_modes_and_ids(void **state) {
  struct tx *t = *state;
  struct wr_tar_ctx plain = t->dctx;
  wr_error_t err = {0};
  struct stat st;
  struct th h;
  wr_buf_t a;

  wr_buf_init(&a);
  arc_file(&a, "suid", "x", 04755);
  arc_file(&a, "sgid", "x", 02750);
  th_init(&h, "tmp/", '5', 0, 01777);
  arc_add(&a, &h, NULL, 0);
  th_init(&h, "user", '0', 1, 0644);
  octal(h.uid, sizeof(h.uid), 1000);
  octal(h.gid, sizeof(h.gid), 70000);
  arc_add(&a, &h, "u", 1);
  /* A base-256 size and uid, as GNU tar writes big numbers. */
  th_init(&h, "b256", '0', 0, 0644);
  memset(h.size, 0, sizeof(h.size));
  h.size[0] = (char)0x80;
  h.size[11] = 3;
  memset(h.uid, 0, sizeof(h.uid));
  h.uid[0] = (char)0x80;
  h.uid[7] = 7;
  arc_add(&a, &h, "abc", 3);
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  assert_int_equal(lstat(at(t->dst, "suid"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 0755);
  assert_int_equal(lstat(at(t->dst, "sgid"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 0750);
  assert_int_equal(lstat(at(t->dst, "tmp"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 01777);
  assert_int_equal(lstat(at(t->dst, "user"), &st), 0);
  assert_int_equal(st.st_uid, ID_BASE2 + 1000);
  assert_int_equal(st.st_gid, ID_BASE2 + 65534);
  assert_int_equal(lstat(at(t->dst, "b256"), &st), 0);
  assert_int_equal(st.st_size, 3);
  assert_int_equal(st.st_uid, ID_BASE2 + 7);

  /* Without map_ids (the CLI as a user) nothing is chowned. */
  plain.map_ids = false;
  assert_int_equal(extract_mem(&plain, "/plain", &a, NULL, &err), 0);
  wr_buf_free(&a);
  assert_int_equal(lstat(at(t->dst, "plain/user"), &st), 0);
  assert_int_equal(st.st_uid, 0);
  assert_int_equal(st.st_gid, 0);
  assert_int_equal(st.st_mode & 07777, 0644);
}

static void test_replace_existing(void **state) {
  struct tx *t = *state;
  wr_error_t err = {0};
  char *data;
  wr_buf_t a;

  assert_int_equal(mkdir(at(t->dst, "emptydir"), 0755), 0);
  assert_int_equal(wr_mkdir_p(at(t->dst, "full/x"), 0755, NULL), 0);
  put(at(t->dst, "f"), "old", 0644);
  wr_buf_init(&a);
  arc_file(&a, "f", "new", 0644);
  arc_file(&a, "emptydir", "now a file", 0644);
  arc_end(&a);
  assert_int_equal(extract_mem(&t->dctx, "/", &a, NULL, &err), 0);
  wr_buf_free(&a);
  data = slurp(at(t->dst, "f"));
  assert_string_equal(data, "new");
  free(data);
  data = slurp(at(t->dst, "emptydir"));
  assert_string_equal(data, "now a file");
  free(data);
  arc_file(&a, "full", "x", 0644);
  expect_refused(t, &a, "full");
  assert_true(exists(at(t->dst, "full/x")));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gnu_tar_interop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_gnu_interop, setup, teardown),
      cmocka_unit_test(test_sparse_maps),
      cmocka_unit_test_setup_teardown(test_sparse_hostile_maps, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_byte_budget, setup, teardown),
      cmocka_unit_test_setup_teardown(test_create_as, setup, teardown),
      cmocka_unit_test_setup_teardown(test_contents_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dotdot, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absolute_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlink_then_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replace_symlink, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hardlinks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_devices_and_types, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_modes_and_ids, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replace_existing, setup, teardown),
  };

  signal(SIGPIPE, SIG_IGN);
  if (getenv("WR_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("WR_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
