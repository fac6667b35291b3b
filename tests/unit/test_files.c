/*
 * Unit tests for the files API (src/runtime/files.c): every operation on a
 * fake sandbox root full of hostile symlinks must stay inside it.
 *
 * The fixture is BASE/root (the root) next to BASE/sentinel, a host
 * directory holding one file, "canary". Links in the root point at "/",
 * at the host's /etc, upwards, and at the sentinel by its host path, so an
 * operation that escaped would change the sentinel, which every test
 * checks. Runs as root (ownership checks use fchown).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "common/common.h"
#include "common/tar.h"
#include "runtime/files.h"

#define ID_BASE 268500992u
#define ID_COUNT 65536u

struct fx {
  char base[64];
  char root[128];
  char sentinel[128];
  int rootfd;
  struct wr_files_ctx ctx;
};

static void put(const char *dir, const char *rel, const char *data) {
  char path[512];
  int fd;

  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(wr_write_all(fd, data, strlen(data), NULL), 0);
  close(fd);
}

static void link_at(const char *dir, const char *rel, const char *target) {
  char path[512];

  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  assert_int_equal(symlink(target, path), 0);
}

static void mkdir_at(const char *dir, const char *rel) {
  char path[512];

  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  assert_int_equal(mkdir(path, 0755), 0);
}

/* Host path of something in the root, for checking results. */
static const char *in_root(const struct fx *f, const char *rel) {
  static char path[4096];

  snprintf(path, sizeof(path), "%s/%s", f->root, rel);
  return path;
}

static char *slurp(const char *path) {
  char *data = NULL;
  size_t len;

  if (wr_read_file(path, 1 << 20, &data, &len, NULL) < 0)
    return NULL;
  return data;
}

/* The sentinel still holds exactly the canary, unchanged. */
static void assert_sentinel(const struct fx *f) {
  char canary[256];
  struct dirent *de;
  struct stat st;
  int entries = 0;
  DIR *d = opendir(f->sentinel);
  char *data;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    assert_string_equal(de->d_name, "canary");
    entries++;
  }
  closedir(d);
  assert_int_equal(entries, 1);
  snprintf(canary, sizeof(canary), "%s/canary", f->sentinel);
  assert_int_equal(lstat(canary, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0644);
  assert_int_equal(st.st_uid, 0);
  assert_int_equal(st.st_nlink, 1);
  data = slurp(canary);
  assert_string_equal(data, "keep");
  free(data);
  assert_int_equal(stat(f->sentinel, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0755);
}

static int setup(void **state) {
  struct fx *f = xcalloc(1, sizeof(*f));

  strcpy(f->base, "/tmp/wr-files-XXXXXX");
  assert_non_null(mkdtemp(f->base));
  snprintf(f->root, sizeof(f->root), "%s/root", f->base);
  snprintf(f->sentinel, sizeof(f->sentinel), "%s/sentinel", f->base);
  assert_int_equal(mkdir(f->root, 0755), 0);
  assert_int_equal(mkdir(f->sentinel, 0755), 0);
  put(f->sentinel, "canary", "keep");
  mkdir_at(f->root, "etc");
  put(f->root, "etc/hostname", "inside\n");
  mkdir_at(f->root, "d");
  put(f->root, "d/f", "data");
  link_at(f->root, "hostetc", "/etc");
  link_at(f->root, "abs", "/");
  link_at(f->root, "up", "../../..");
  link_at(f->root, "out", f->sentinel);
  link_at(f->root, "outrel", "../sentinel");
  f->rootfd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true(f->rootfd >= 0);
  f->ctx.rootfd = f->rootfd;
  f->ctx.id_base = ID_BASE;
  f->ctx.id_count = ID_COUNT;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;

  assert_sentinel(f);
  close(f->rootfd);
  assert_int_equal(wr_rm_rf(f->base, NULL), 0);
  free(f);
  return 0;
}

static int api_write(const struct fx *f, const char *path, const char *data,
                     uint32_t mode, bool parents, wr_error_t *err) {
  struct wr_files_writer *w;

  if (wr_files_write_begin(&f->ctx, path, mode, parents, &w, err) < 0)
    return -1;
  if (wr_write_all(wr_files_writer_fd(w), data, strlen(data), err) < 0) {
    wr_files_write_abort(w);
    return -1;
  }
  return wr_files_write_commit(w, err);
}

static char *api_read(const struct fx *f, const char *path) {
  int fd = -1;
  char buf[4096];
  ssize_t n;

  if (wr_files_open_read(&f->ctx, path, &fd, NULL, NULL) < 0)
    return NULL;
  n = wr_read_all(fd, buf, sizeof(buf) - 1);
  close(fd);
  assert_true(n >= 0);
  buf[n] = '\0';
  return xstrdup(buf);
}

static bool host_exists(const char *path) {
  struct stat st;

  return lstat(path, &st) == 0;
}

/* ---- tests ------------------------------------------------------------ */

static void test_stat(void **state) {
  struct fx *f = *state;
  struct wr_file_info info;
  wr_error_t err = {0};

  assert_int_equal(wr_files_stat(&f->ctx, "/", &info, &err), 0);
  assert_int_equal(info.type, 'd');
  assert_string_equal(info.name, "/");
  assert_string_equal(info.path, "/");
  wr_file_info_free(&info);

  assert_int_equal(wr_files_stat(&f->ctx, "/abs", &info, &err), 0);
  assert_int_equal(info.type, 'l');
  assert_string_equal(info.link_target, "/");
  wr_file_info_free(&info);

  assert_int_equal(wr_files_stat(&f->ctx, "abs/etc/hostname", &info, &err), 0);
  assert_int_equal(info.type, 'f');
  assert_int_equal(info.size, 7);
  assert_string_equal(info.name, "hostname");
  assert_string_equal(info.path, "/abs/etc/hostname");
  wr_file_info_free(&info);

  assert_int_equal(wr_files_stat(&f->ctx, "/d/.././d//f/", &info, &err), 0);
  assert_string_equal(info.path, "/d/f");
  wr_file_info_free(&info);

  /* Through "up" and ".." we stay at the root: /etc is ROOT/etc. */
  assert_int_equal(wr_files_stat(&f->ctx, "/up/up/../etc", &info, &err), 0);
  assert_int_equal(info.type, 'd');
  wr_file_info_free(&info);

  assert_int_equal(wr_files_stat(&f->ctx, "/out/canary", &info, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_stat(&f->ctx, "/outrel/canary", &info, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_stat(&f->ctx, "/hostetc/passwd", &info, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_sentinel(f);
}

static void test_stat_ids(void **state) {
  struct fx *f = *state;
  struct wr_file_info info;

  assert_int_equal(chown(in_root(f, "d/f"), ID_BASE + 5, ID_BASE + 7), 0);
  assert_int_equal(wr_files_stat(&f->ctx, "/d/f", &info, NULL), 0);
  assert_int_equal(info.uid, 5);
  assert_int_equal(info.gid, 7);
  wr_file_info_free(&info);
  /* Host root (outside the sandbox's range) shows as nobody. */
  assert_int_equal(wr_files_stat(&f->ctx, "/etc", &info, NULL), 0);
  assert_int_equal(info.uid, 65534);
  assert_int_equal(info.gid, 65534);
  wr_file_info_free(&info);
}

static void test_read(void **state) {
  struct fx *f = *state;
  struct wr_file_info info;
  wr_error_t err = {0};
  char *data;
  int fd = -1;

  data = api_read(f, "/hostetc/hostname");
  assert_string_equal(data, "inside\n");
  free(data);
  assert_int_equal(
      wr_files_open_read(&f->ctx, "/abs/etc/hostname", &fd, &info, &err), 0);
  close(fd);
  assert_int_equal(info.size, 7);
  assert_string_equal(info.path, "/abs/etc/hostname");
  wr_file_info_free(&info);

  assert_int_equal(wr_files_open_read(&f->ctx, "/d", &fd, NULL, &err), -1);
  assert_int_equal(err.code, EISDIR);
  assert_int_equal(
      wr_files_open_read(&f->ctx, "/hostetc/passwd", &fd, NULL, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_open_read(&f->ctx, "/out/canary", &fd, NULL, &err),
                   -1);
  assert_int_equal(err.code, ENOENT);
  /* A FIFO is refused without being opened (opening it would block). */
  assert_int_equal(mkfifo(in_root(f, "fifo"), 0644), 0);
  assert_int_equal(wr_files_open_read(&f->ctx, "/fifo", &fd, NULL, &err), -1);
  assert_int_equal(err.code, EINVAL);
}

/* /proc mounted inside the root: its magic links must not be followed. */
static void test_magic_links(void **state) {
  struct fx *f = *state;
  struct wr_files_writer *w = NULL;
  struct wr_file_info *v, info;
  wr_error_t err = {0};
  bool truncated;
  size_t n;
  int fd = -1;

  if (unshare(CLONE_NEWNS) < 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    skip();
    return;
  }
  mkdir_at(f->root, "proc");
  assert_int_equal(mount("proc", in_root(f, "proc"), "proc", 0, NULL), 0);
  assert_int_equal(wr_files_open_read(&f->ctx, "/proc/self/root/etc/passwd",
                                      &fd, NULL, &err),
                   -1);
  assert_int_equal(fd, -1);
  assert_true(err.code == ELOOP || err.code == ENOENT);
  assert_int_equal(
      wr_files_stat(&f->ctx, "/proc/self/root/etc/passwd", &info, &err), -1);
  assert_int_equal(
      wr_files_write_begin(&f->ctx, "/proc/self/cwd/x", 0644, false, &w, &err),
      -1);
  /* Listing does not descend into the other filesystem. */
  assert_int_equal(
      wr_files_list(&f->ctx, "/", 3, 10000, &v, &n, &truncated, &err), 0);
  for (size_t i = 0; i < n; i++)
    assert_false(wr_str_has_prefix(v[i].path, "/proc/"));
  wr_file_infos_free(v, n);
  assert_int_equal(umount2(in_root(f, "proc"), MNT_DETACH), 0);
}

static void test_write_confined(void **state) {
  struct fx *f = *state;
  char name[64], path[512], host[128];
  wr_error_t err = {0};
  struct stat st;
  char *data;

  snprintf(name, sizeof(name), "wr-files-test-%d", (int)getpid());
  snprintf(path, sizeof(path), "/hostetc/%s", name);
  snprintf(host, sizeof(host), "/etc/%s", name);
  assert_int_equal(api_write(f, path, "hello", 0640, false, &err), 0);
  assert_false(host_exists(host));
  snprintf(path, sizeof(path), "etc/%s", name);
  data = slurp(in_root(f, path));
  assert_string_equal(data, "hello");
  free(data);
  assert_int_equal(lstat(in_root(f, path), &st), 0);
  assert_int_equal(st.st_uid, ID_BASE);
  assert_int_equal(st.st_gid, ID_BASE);
  assert_int_equal(st.st_mode & 07777, 0640);

  /* Links to the sentinel dangle inside the root: nothing is made, not
   * even with parents (mkdir -p does not create a link's target). */
  assert_int_equal(api_write(f, "/out/x", "no", 0644, false, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(api_write(f, "/out/x", "no", 0644, true, &err), -1);
  assert_int_equal(api_write(f, "/outrel/y", "no", 0644, true, &err), -1);
  assert_sentinel(f);
  /* Once their targets exist inside the root, writes land there. */
  assert_int_equal(wr_mkdir_p(in_root(f, f->sentinel), 0755, NULL), 0);
  mkdir_at(f->root, "sentinel");
  assert_int_equal(api_write(f, "/out/x", "yes", 0644, false, &err), 0);
  snprintf(path, sizeof(path), "%s/x", f->sentinel);
  assert_true(host_exists(in_root(f, path)));
  assert_int_equal(api_write(f, "/outrel/y", "yes", 0644, false, &err), 0);
  assert_true(host_exists(in_root(f, "sentinel/y")));
  assert_sentinel(f);
}

static void test_write_replace(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  struct stat st;
  char *data;

  assert_int_equal(api_write(f, "/d", "x", 0644, false, &err), -1);
  assert_int_equal(err.code, EISDIR);
  assert_int_equal(api_write(f, "/", "x", 0644, false, &err), -1);
  assert_int_equal(err.code, EISDIR);
  assert_int_equal(api_write(f, "/d/s", "x", 04755, false, &err), -1);
  assert_int_equal(err.code, EINVAL);
  /* A symlink at the destination is replaced, its target left alone. */
  link_at(f->root, "lnk", "d/f");
  assert_int_equal(api_write(f, "/lnk", "new", 0644, false, &err), 0);
  assert_int_equal(lstat(in_root(f, "lnk"), &st), 0);
  assert_true(S_ISREG(st.st_mode));
  data = slurp(in_root(f, "d/f"));
  assert_string_equal(data, "data");
  free(data);
  /* Same for a link leaving the root. */
  assert_int_equal(api_write(f, "/out", "new", 0644, false, &err), 0);
  assert_int_equal(lstat(in_root(f, "out"), &st), 0);
  assert_true(S_ISREG(st.st_mode));
}

static void test_write_atomic(void **state) {
  struct fx *f = *state;
  struct wr_files_writer *w;
  struct wr_file_info *v;
  wr_error_t err = {0};
  bool truncated;
  char *data;
  size_t n;

  assert_int_equal(wr_files_write_begin(&f->ctx, "/d/f", 0644, false, &w, &err),
                   0);
  assert_int_equal(wr_write_all(wr_files_writer_fd(w), "new content", 11, NULL),
                   0);
  data = api_read(f, "/d/f");
  assert_string_equal(data, "data");
  free(data);
  assert_int_equal(wr_files_write_commit(w, &err), 0);
  data = api_read(f, "/d/f");
  assert_string_equal(data, "new content");
  free(data);

  assert_int_equal(wr_files_write_begin(&f->ctx, "/d/f", 0644, false, &w, &err),
                   0);
  assert_int_equal(wr_write_all(wr_files_writer_fd(w), "junk", 4, NULL), 0);
  wr_files_write_abort(w);
  data = api_read(f, "/d/f");
  assert_string_equal(data, "new content");
  free(data);
  /* No temporary file is left behind. */
  assert_int_equal(
      wr_files_list(&f->ctx, "/d", 1, 100, &v, &n, &truncated, &err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(v[0].name, "f");
  wr_file_infos_free(v, n);
}

static void assert_owned_dir(const char *path, mode_t mode) {
  struct stat st;

  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_uid, ID_BASE);
  assert_int_equal(st.st_gid, ID_BASE);
  assert_int_equal(st.st_mode & 07777, mode);
}

static void test_mkdir(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  char path[512];

  assert_int_equal(wr_files_mkdir(&f->ctx, "/abs/up/new/a/b", 0750, true, &err),
                   0);
  assert_owned_dir(in_root(f, "new"), 0750);
  assert_owned_dir(in_root(f, "new/a"), 0750);
  assert_owned_dir(in_root(f, "new/a/b"), 0750);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/new/a/b", 0750, true, &err), 0);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/new", 0755, false, &err), -1);
  assert_int_equal(err.code, EEXIST);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/x/y", 0755, false, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/d/f/z", 0755, true, &err), -1);
  assert_int_equal(err.code, ENOTDIR);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/single", 0711, false, &err), 0);
  assert_owned_dir(in_root(f, "single"), 0711);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/out/m", 0755, true, &err), -1);
  assert_sentinel(f);
  assert_int_equal(wr_mkdir_p(in_root(f, f->sentinel), 0755, NULL), 0);
  assert_int_equal(wr_files_mkdir(&f->ctx, "/out/m", 0755, true, &err), 0);
  snprintf(path, sizeof(path), "%s/m", f->sentinel);
  assert_owned_dir(in_root(f, path), 0755);
  assert_sentinel(f);
}

static void test_remove(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};

  assert_int_equal(wr_files_remove(&f->ctx, "/", true, &err), -1);
  assert_int_equal(err.code, EPERM);
  assert_int_equal(wr_files_remove(&f->ctx, "/abs/..", true, &err), -1);
  assert_int_equal(err.code, EPERM);
  assert_int_equal(wr_files_remove(&f->ctx, "/abs", true, &err), 0);
  assert_false(host_exists(in_root(f, "abs")));
  assert_true(host_exists(in_root(f, "d/f")));
  assert_true(host_exists(in_root(f, "etc/hostname")));
  assert_int_equal(wr_files_remove(&f->ctx, "/out", true, &err), 0);
  assert_false(host_exists(in_root(f, "out")));
  assert_int_equal(wr_files_remove(&f->ctx, "/outrel/canary", true, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_remove(&f->ctx, "/d", false, &err), -1);
  assert_int_equal(err.code, ENOTEMPTY);
  assert_int_equal(wr_files_remove(&f->ctx, "/up/up/etc/hostname", false, &err),
                   0);
  assert_false(host_exists(in_root(f, "etc/hostname")));
  assert_int_equal(wr_files_remove(&f->ctx, "/d", true, &err), 0);
  assert_false(host_exists(in_root(f, "d")));
  assert_sentinel(f);
}

/* A tree far deeper than PATH_MAX allows by name, with escaping links at
 * many levels: removed completely, links as links. */
static void test_remove_deep(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  int cur = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  assert_true(cur >= 0);
  assert_int_equal(mkdirat(cur, "deep", 0755), 0);
  for (int i = 0; i < 6000; i++) {
    int next =
        openat(cur, i == 0 ? "deep" : "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(next >= 0);
    close(cur);
    cur = next;
    assert_int_equal(mkdirat(cur, "a", 0755), 0);
    if (i % 1000 == 0) {
      assert_int_equal(symlinkat(f->sentinel, cur, "esc"), 0);
      assert_int_equal(symlinkat("../../../../../../..", cur, "up"), 0);
      assert_int_equal(mkdirat(cur, "side", 0755), 0);
    }
  }
  close(cur);
  assert_int_equal(wr_files_remove(&f->ctx, "/deep", true, &err), 0);
  assert_false(host_exists(in_root(f, "deep")));
  assert_true(host_exists(in_root(f, "d/f")));
  assert_sentinel(f);
}

static void test_move(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  char target[64];
  char *data;
  ssize_t n;

  assert_int_equal(wr_files_move(&f->ctx, "/d/f", "/d/g", false, &err), 0);
  assert_false(host_exists(in_root(f, "d/f")));
  put(f->root, "d/h", "other");
  assert_int_equal(wr_files_move(&f->ctx, "/d/g", "/d/h", false, &err), -1);
  assert_int_equal(err.code, EEXIST);
  data = slurp(in_root(f, "d/h"));
  assert_string_equal(data, "other");
  free(data);
  assert_int_equal(wr_files_move(&f->ctx, "/d/g", "/d/h", true, &err), 0);
  data = slurp(in_root(f, "d/h"));
  assert_string_equal(data, "data");
  free(data);
  /* Symlinks move as links. */
  assert_int_equal(wr_files_move(&f->ctx, "/abs", "/abs2", false, &err), 0);
  n = readlink(in_root(f, "abs2"), target, sizeof(target) - 1);
  assert_int_equal(n, 1);
  assert_int_equal(wr_files_move(&f->ctx, "/d/h", "/out/h", false, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_move(&f->ctx, "/d/h", "/up/up/h", false, &err), 0);
  assert_true(host_exists(in_root(f, "h")));
  assert_int_equal(wr_files_move(&f->ctx, "/", "/x", false, &err), -1);
  assert_int_equal(wr_files_move(&f->ctx, "/d", "/", true, &err), -1);
  assert_sentinel(f);
}

static void test_chmod(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  struct stat st, hostroot, after;

  assert_int_equal(stat("/", &hostroot), 0);
  assert_int_equal(wr_files_chmod(&f->ctx, "/d/f", 0600, &err), 0);
  assert_int_equal(lstat(in_root(f, "d/f"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(wr_files_chmod(&f->ctx, "/abs", 0700, &err), -1);
  assert_int_equal(err.code, ELOOP);
  assert_int_equal(wr_files_chmod(&f->ctx, "/out", 0700, &err), -1);
  assert_int_equal(err.code, ELOOP);
  assert_int_equal(wr_files_chmod(&f->ctx, "/out/canary", 0600, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_files_chmod(&f->ctx, "/abs/d", 01777, &err), 0);
  assert_int_equal(lstat(in_root(f, "d"), &st), 0);
  assert_int_equal(st.st_mode & 07777, 01777);
  assert_int_equal(wr_files_chmod(&f->ctx, "/d/f", 04755, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_int_equal(stat("/", &after), 0);
  assert_int_equal(after.st_mode, hostroot.st_mode);
  assert_sentinel(f);
}

static bool has_path(const struct wr_file_info *v, size_t n, const char *p) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].path, p) == 0)
      return true;
  return false;
}

static void test_list(void **state) {
  static const char *const top[] = {"abs", "d",      "etc", "hostetc",
                                    "out", "outrel", "up"};
  struct fx *f = *state;
  struct wr_file_info *v;
  wr_error_t err = {0};
  bool truncated;
  size_t n;

  assert_int_equal(
      wr_files_list(&f->ctx, "/", 1, 100, &v, &n, &truncated, &err), 0);
  assert_int_equal(n, WR_ARRAY_SIZE(top));
  assert_false(truncated);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(v[i].name, top[i]);
  assert_int_equal(v[0].type, 'l');
  assert_string_equal(v[0].link_target, "/");
  assert_int_equal(v[1].type, 'd');
  wr_file_infos_free(v, n);

  assert_int_equal(
      wr_files_list(&f->ctx, "/", 2, 100, &v, &n, &truncated, &err), 0);
  assert_int_equal(n, WR_ARRAY_SIZE(top) + 2);
  assert_true(has_path(v, n, "/d/f"));
  assert_true(has_path(v, n, "/etc/hostname"));
  for (size_t i = 0; i < n; i++)
    assert_false(wr_str_has_prefix(v[i].path, "/abs/"));
  wr_file_infos_free(v, n);

  assert_int_equal(wr_files_list(&f->ctx, "/", 10, 3, &v, &n, &truncated, &err),
                   0);
  assert_int_equal(n, 3);
  assert_true(truncated);
  wr_file_infos_free(v, n);
  assert_int_equal(wr_files_list(&f->ctx, "/d", 5, 1, &v, &n, &truncated, &err),
                   0);
  assert_int_equal(n, 1);
  assert_false(truncated);
  wr_file_infos_free(v, n);

  assert_int_equal(mkdir(in_root(f, "d/empty"), 0755), 0);
  assert_int_equal(
      wr_files_list(&f->ctx, "/d/empty", 3, 10, &v, &n, &truncated, &err), 0);
  assert_int_equal(n, 0);
  assert_false(truncated);
  wr_file_infos_free(v, n);

  /* The listed path itself is resolved in the root. */
  assert_int_equal(
      wr_files_list(&f->ctx, "/abs", 1, 100, &v, &n, &truncated, &err), 0);
  assert_int_equal(n, WR_ARRAY_SIZE(top));
  assert_string_equal(v[1].path, "/abs/d");
  wr_file_infos_free(v, n);
  assert_int_equal(
      wr_files_list(&f->ctx, "/out", 1, 100, &v, &n, &truncated, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(
      wr_files_list(&f->ctx, "/d/f", 1, 100, &v, &n, &truncated, &err), -1);
  assert_int_equal(err.code, ENOTDIR);
  assert_int_equal(
      wr_files_list(&f->ctx, "/", 0, 100, &v, &n, &truncated, &err), -1);
  assert_int_equal(err.code, EINVAL);
}

static void test_long_path(void **state) {
  struct fx *f = *state;
  struct wr_files_writer *w = NULL;
  struct wr_file_info info, *v;
  size_t len = 64 * 1024, n;
  wr_error_t err = {0};
  bool truncated;
  char *path = xmalloc(len + 1);
  int fd = -1;

  for (size_t i = 0; i < len; i += 2)
    memcpy(path + i, "a/", 2);
  path[len] = '\0';
  assert_int_equal(wr_files_stat(&f->ctx, path, &info, &err), -1);
  assert_non_null(strstr(err.msg, "longer than"));
  assert_int_equal(wr_files_open_read(&f->ctx, path, &fd, NULL, &err), -1);
  assert_int_equal(wr_files_write_begin(&f->ctx, path, 0644, true, &w, &err),
                   -1);
  assert_null(w);
  assert_int_equal(wr_files_mkdir(&f->ctx, path, 0755, true, &err), -1);
  assert_non_null(strstr(err.msg, "longer than"));
  assert_int_equal(wr_files_remove(&f->ctx, path, true, &err), -1);
  assert_int_equal(wr_files_move(&f->ctx, "/d", path, false, &err), -1);
  assert_int_equal(wr_files_chmod(&f->ctx, path, 0755, &err), -1);
  assert_int_equal(
      wr_files_list(&f->ctx, path, 1, 10, &v, &n, &truncated, &err), -1);
  assert_non_null(strstr(err.msg, "longer than"));
  free(path);
  assert_false(host_exists(in_root(f, "a")));
}

/* A wide tree: more non-empty subdirectories than the walk reads names at
 * once, each with a file and a link out. Everything goes, the sentinel
 * stays, and it is quick (the walk does not read the directory from its
 * start again after each subdirectory). */
static void test_remove_wide(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  int top, sub;
  uint64_t t0;

  mkdir_at(f->root, "wide");
  top = open(in_root(f, "wide"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(top >= 0);
  for (int i = 0; i < 1500; i++) {
    char name[16];
    snprintf(name, sizeof(name), "s%d", i);
    assert_int_equal(mkdirat(top, name, 0755), 0);
    sub = openat(top, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(sub >= 0);
    close(openat(sub, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    assert_int_equal(symlinkat(f->sentinel, sub, "out"), 0);
    close(sub);
    snprintf(name, sizeof(name), "f%d", i);
    close(openat(top, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  }
  close(top);
  t0 = wr_mono_ns();
  assert_int_equal(wr_files_remove(&f->ctx, "/wide", true, &err), 0);
  assert_true(wr_mono_ns() - t0 < 20ull * 1000 * 1000 * 1000);
  assert_false(host_exists(in_root(f, "wide")));
  assert_true(host_exists(in_root(f, "d/f")));
  assert_sentinel(f);
}

/* ---- race ------------------------------------------------------------- */

struct swapper {
  const struct fx *f;
  atomic_bool stop;
  long swaps;
};

/* The "sandbox": keep exchanging the directory `race` with symlinks that
 * lead out of the root (by host path, and by "..") */
static void *swap_loop(void *arg) {
  struct swapper *s = arg;
  char race[256], abs_link[256], rel_link[256];

  snprintf(race, sizeof(race), "%s/race", s->f->root);
  snprintf(abs_link, sizeof(abs_link), "%s/racelink", s->f->root);
  snprintf(rel_link, sizeof(rel_link), "%s/racerel", s->f->root);
  while (!atomic_load(&s->stop)) {
    const char *other = s->swaps % 4 < 2 ? abs_link : rel_link;
    if (renameat2(AT_FDCWD, race, AT_FDCWD, other, RENAME_EXCHANGE) == 0)
      s->swaps++;
  }
  return NULL;
}

static void test_race(void **state) {
  struct fx *f = *state;
  struct swapper s = {.f = f};
  int ok = 0, failed = 0;
  pthread_t t;

  mkdir_at(f->root, "race");
  link_at(f->root, "racelink", f->sentinel);
  link_at(f->root, "racerel", "../sentinel");
  atomic_init(&s.stop, false);
  assert_int_equal(pthread_create(&t, NULL, swap_loop, &s), 0);
  for (int i = 0; i < 3000; i++) {
    char path[64];
    struct wr_file_info info;

    snprintf(path, sizeof(path), "/race/f%d", i);
    if (api_write(f, path, "x", 0644, false, NULL) == 0)
      ok++;
    else
      failed++;
    snprintf(path, sizeof(path), "/race/d%d/sub", i);
    wr_files_mkdir(&f->ctx, path, 0755, true, NULL);
    wr_files_chmod(&f->ctx, "/race", 0777, NULL);
    if (wr_files_stat(&f->ctx, "/race/canary", &info, NULL) == 0)
      wr_file_info_free(&info);
    snprintf(path, sizeof(path), "/race/d%d", i - 1);
    wr_files_remove(&f->ctx, path, true, NULL);
    wr_files_move(&f->ctx, "/race/f0", "/race/moved", true, NULL);
  }
  atomic_store(&s.stop, true);
  pthread_join(t, NULL);
  assert_true(s.swaps > 100);
  assert_true(ok > 0);
  assert_sentinel(f);
}

struct mover {
  const struct fx *f;
  atomic_bool stop;
  long moves;
};

/* The "sandbox": keep swapping a subtree of /t with a directory under
 * /elsewhere, next to a file that removing /t must never reach. */
static void *move_loop(void *arg) {
  struct mover *m = arg;
  char sub[256], other[256];

  snprintf(sub, sizeof(sub), "%s/t/a/b", m->f->root);
  snprintf(other, sizeof(other), "%s/elsewhere/x", m->f->root);
  while (!atomic_load(&m->stop))
    if (renameat2(AT_FDCWD, sub, AT_FDCWD, other, RENAME_EXCHANGE) == 0)
      m->moves++;
  return NULL;
}

static void make_chain(const char *top, int depth) {
  int cur = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  assert_true(cur >= 0);
  for (int i = 0; i < depth; i++) {
    int next;
    assert_int_equal(mkdirat(cur, "c", 0755), 0);
    close(openat(cur, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    next = openat(cur, "c", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(next >= 0);
    close(cur);
    cur = next;
  }
  close(cur);
}

static void test_remove_race(void **state) {
  struct fx *f = *state;
  int failed = 0;

  mkdir_at(f->root, "elsewhere");
  for (int i = 0; i < 20; i++) {
    struct mover m = {.f = f};
    pthread_t t;

    assert_int_equal(wr_mkdir_p(in_root(f, "t/a/b"), 0755, NULL), 0);
    make_chain(in_root(f, "t/a/b"), 40);
    if (!host_exists(in_root(f, "elsewhere/x")))
      mkdir_at(f->root, "elsewhere/x");
    put(f->root, "elsewhere/keep", "keep");
    atomic_init(&m.stop, false);
    assert_int_equal(pthread_create(&t, NULL, move_loop, &m), 0);
    if (wr_files_remove(&f->ctx, "/t", true, NULL) < 0)
      failed++;
    atomic_store(&m.stop, true);
    pthread_join(t, NULL);
    assert_true(host_exists(in_root(f, "elsewhere/keep")));
    wr_rm_rf(in_root(f, "t"), NULL);
  }
  /* The race was real: some removals saw the tree move and stopped. */
  assert_true(failed > 0);
  assert_sentinel(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_stat, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stat_ids, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_confined, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_replace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_atomic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mkdir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remove_deep, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remove_wide, setup, teardown),
      cmocka_unit_test_setup_teardown(test_remove_race, setup, teardown),
      cmocka_unit_test_setup_teardown(test_move, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chmod, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_path, setup, teardown),
      cmocka_unit_test_setup_teardown(test_race, setup, teardown),
      cmocka_unit_test_setup_teardown(test_magic_links, setup, teardown),
  };

  if (getenv("WR_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("WR_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
