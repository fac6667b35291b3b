/*
 * Unit tests for disk limits (src/runtime/disk.c and wr_rt_check_disk):
 * the sizes refused, the image made once and sparse, and the loop device
 * that comes and goes with the mount, never attached twice. The mount
 * tests need root and loop devices; they run in a private mount
 * namespace and skip (fail with WARREN_MUST_WORK=1) without them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include "cli/cli.h"
#include "common/common.h"
#include "runtime/runtime_internal.h"

#define OWNER 268500992u
#define EXT4_MAGIC 0xEF53

struct fx {
  char dir[64];
  char *mkfs;
};

static bool must_work(void) {
  const char *v = getenv("WARREN_MUST_WORK");
  return v != NULL && strcmp(v, "1") == 0;
}

static int setup(void **state) {
  struct fx *f = xcalloc(1, sizeof(*f));

  snprintf(f->dir, sizeof(f->dir), "/tmp/wr-test-disk-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->mkfs = wr_disk_find_mkfs();
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;

  wr_disk_umount(f->dir, NULL);
  wr_rm_rf(f->dir, NULL);
  free(f->mkfs);
  free(f);
  return 0;
}

/* A runtime with only what wr_rt_check_disk looks at. */
static struct wr_runtime fake_runtime(struct fx *f, bool loop_ok) {
  struct wr_runtime rt = {0};

  rt.sandboxes_dir = f->dir;
  rt.mkfs_path = f->mkfs;
  rt.loop_ok = loop_ok;
  return rt;
}

static void test_check_disk(void **state) {
  struct fx *f = *state;
  struct wr_runtime rt = fake_runtime(f, true), none = fake_runtime(f, false);
  wr_error_t err = {0};

  if (f->mkfs == NULL)
    skip();
  assert_int_equal(wr_rt_check_disk(&rt, WR_DISK_MIN, &err), 0);
  assert_int_equal(wr_rt_check_disk(&rt, 1ull << 30, &err), 0);
  assert_int_equal(wr_rt_check_disk(&rt, WR_DISK_MIN - 1, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_non_null(strstr(err.msg, "at least 16 MiB"));
  assert_int_equal(wr_rt_check_disk(&rt, 1ull << 60, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_non_null(strstr(err.msg, "more than the host has free"));
  assert_int_equal(wr_rt_check_disk(&none, 1ull << 30, &err), -1);
  assert_non_null(strstr(err.msg, "cannot limit disk"));
  assert_false(wr_rt_can_limit(&none, "disk"));
  assert_true(wr_rt_can_limit(&rt, "disk"));
}

static void image_path(const struct fx *f, char *out, size_t size) {
  snprintf(out, size, "%s/disk.img", f->dir);
}

/* Made once: a second create keeps the image (and what is in it); a
 * leftover of a create that died half way is replaced. */
static void test_create_once_and_sparse(void **state) {
  struct fx *f = *state;
  char image[128], leftover[128];
  struct stat a, b;
  uint16_t magic = 0;
  wr_error_t err = {0};
  int fd;

  if (f->mkfs == NULL)
    skip();
  snprintf(leftover, sizeof(leftover), "%s/disk.img.new", f->dir);
  fd = open(leftover, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "junk", 4), 4);
  close(fd);
  assert_int_equal(wr_disk_create(f->dir, 64ull << 20, OWNER, f->mkfs, &err),
                   0);
  image_path(f, image, sizeof(image));
  assert_int_equal(stat(image, &a), 0);
  assert_int_equal(access(leftover, F_OK), -1);
  assert_int_equal(a.st_size, 64ll << 20);
  assert_true(a.st_blocks * 512 < (4ll << 20)); /* sparse */
  assert_int_equal(a.st_mode & 0777, 0600);
  fd = open(image, O_RDONLY | O_CLOEXEC);
  assert_int_equal(pread(fd, &magic, 2, 1024 + 56), 2);
  close(fd);
  assert_int_equal(magic, EXT4_MAGIC);

  assert_int_equal(wr_disk_create(f->dir, 32ull << 20, OWNER, f->mkfs, &err),
                   0);
  assert_int_equal(stat(image, &b), 0);
  assert_int_equal(a.st_ino, b.st_ino);
  assert_int_equal(b.st_size, 64ll << 20);
}

static void test_create_fails_cleanly(void **state) {
  struct fx *f = *state;
  char image[128];
  wr_error_t err = {0};

  image_path(f, image, sizeof(image));
  assert_int_equal(wr_disk_create(f->dir, 64ull << 20, OWNER, NULL, &err), -1);
  assert_non_null(strstr(err.msg, "mkfs.ext4"));
  /* mkfs refuses a size too small for ext4; its message comes back. */
  if (f->mkfs == NULL)
    return;
  assert_int_equal(wr_disk_create(f->dir, 4096, OWNER, f->mkfs, &err), -1);
  assert_non_null(strstr(err.msg, "format the disk image"));
  assert_int_equal(access(image, F_OK), -1);
}

/* Loop devices whose backing file is the image. */
static int loops_backing(const struct fx *f) {
  char image[128], *real;
  struct dirent *e;
  int n = 0;
  DIR *d;

  image_path(f, image, sizeof(image));
  real = realpath(image, NULL);
  d = opendir("/sys/block");
  assert_non_null(d);
  while (real != NULL && (e = readdir(d)) != NULL) {
    char path[300], *data = NULL;
    size_t len = 0;
    if (strncmp(e->d_name, "loop", 4) != 0)
      continue;
    snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
    if (wr_read_file(path, 8192, &data, &len, NULL) == 0) {
      if (len > 0 && data[len - 1] == '\n')
        data[len - 1] = '\0';
      n += strcmp(data, real) == 0;
      free(data);
    }
  }
  closedir(d);
  free(real);
  return n;
}

static bool can_mount(struct fx *f) {
  if (f->mkfs != NULL && geteuid() == 0 && wr_disk_supported() &&
      unshare(CLONE_NEWNS) == 0 &&
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
    return true;
  if (must_work())
    fail_msg("disk images cannot be mounted here (root, loop devices and "
             "mkfs.ext4 needed)");
  return false;
}

static void put(const char *dir, const char *name, const char *text) {
  char path[256];

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  assert_int_equal(wr_write_file(path, text, strlen(text), 0644, NULL), 0);
}

/* Mounted with the sandbox's root owning it; idempotent; unmounting frees
 * the loop device (AUTOCLEAR); the files survive a remount. */
static void test_mount_cycle(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *disk = wr_disk_layers_dir(f->dir);
  _cleanup_free_ char *kept = xasprintf("%s/kept", disk);
  _cleanup_free_ char *data = NULL;
  wr_error_t err = {0};
  struct statfs sfs;
  struct stat st;
  size_t len;

  if (!can_mount(f))
    skip();
  assert_int_equal(wr_disk_create(f->dir, 32ull << 20, OWNER, f->mkfs, &err),
                   0);
  assert_false(wr_disk_is_mounted(f->dir));
  assert_int_equal(wr_disk_mount(f->dir, &err), 0);
  assert_true(wr_disk_is_mounted(f->dir));
  assert_int_equal(statfs(disk, &sfs), 0);
  assert_int_equal(sfs.f_type, EXT4_MAGIC);
  assert_true(sfs.f_flags & ST_NODEV);
  assert_true(sfs.f_flags & ST_NOSUID);
  assert_int_equal(stat(disk, &st), 0);
  assert_int_equal(st.st_uid, OWNER);
  assert_int_equal(st.st_gid, OWNER);
  assert_int_equal(loops_backing(f), 1);
  assert_int_equal(wr_disk_mount(f->dir, &err), 0);
  assert_int_equal(loops_backing(f), 1);
  put(disk, "kept", "data\n");

  assert_int_equal(wr_disk_umount(f->dir, &err), 0);
  assert_false(wr_disk_is_mounted(f->dir));
  assert_int_equal(loops_backing(f), 0);
  assert_int_equal(wr_disk_umount(f->dir, &err), 0);

  assert_int_equal(wr_disk_mount(f->dir, &err), 0);
  assert_int_equal(wr_read_file(kept, 64, &data, &len, &err), 0);
  assert_string_equal(data, "data\n");
  assert_int_equal(wr_disk_umount(f->dir, &err), 0);
  assert_int_equal(loops_backing(f), 0);
}

/* An image still attached (its filesystem held by another mount) is
 * mounted from the same loop device, never attached a second time: two
 * filesystems on one image would corrupt it. */
static void test_mount_reuses_attached_image(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *disk = wr_disk_layers_dir(f->dir);
  _cleanup_free_ char *other = xasprintf("%s/other", f->dir);
  _cleanup_free_ char *seen = xasprintf("%s/seen", disk);
  wr_error_t err = {0};

  if (!can_mount(f))
    skip();
  assert_int_equal(wr_disk_create(f->dir, 32ull << 20, OWNER, f->mkfs, &err),
                   0);
  assert_int_equal(wr_disk_mount(f->dir, &err), 0);
  assert_int_equal(mkdir(other, 0700), 0);
  assert_int_equal(mount(disk, other, NULL, MS_BIND, NULL), 0);
  assert_int_equal(wr_disk_umount(f->dir, &err), 0);
  assert_int_equal(loops_backing(f), 1);

  assert_int_equal(wr_disk_mount(f->dir, &err), 0);
  assert_int_equal(loops_backing(f), 1);
  put(other, "seen", "same filesystem\n");
  assert_int_equal(access(seen, F_OK), 0);

  assert_int_equal(umount2(other, 0), 0);
  assert_int_equal(wr_disk_umount(f->dir, &err), 0);
  assert_int_equal(loops_backing(f), 0);
}

static void test_missing_image(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};

  assert_int_equal(wr_disk_mount(f->dir, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_non_null(strstr(err.msg, "disk.img"));
}

/* `warren create --disk SIZE` sends the size in bytes. */
static void test_cli_disk_option(void **state) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char *ok[] = {"create", "--disk", "2g", NULL};
  char *bad[] = {"create", "--disk", "lots", NULL};
  _cleanup_json_ json_t *body = NULL;
  (void)state;

  assert_int_equal(wr_cli_create_parse(3, ok, &o, &err), 0);
  assert_true(o.has_disk);
  assert_int_equal(o.disk, 2ull << 30);
  body = wr_cli_create_body(&o);
  assert_int_equal(json_integer_value(json_object_get(body, "disk")),
                   2ll << 30);
  wr_cli_create_opts_free(&o);
  assert_int_equal(wr_cli_create_parse(3, bad, &o, &err), -1);
  assert_non_null(strstr(err.msg, "--disk"));
  wr_cli_create_opts_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_check_disk, setup, teardown),
      cmocka_unit_test_setup_teardown(test_create_once_and_sparse, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_create_fails_cleanly, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_mount_cycle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mount_reuses_attached_image, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_missing_image, setup, teardown),
      cmocka_unit_test(test_cli_disk_option),
  };

  if (getenv("WR_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("WR_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
