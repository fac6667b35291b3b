/*
 * Unit tests for layer copies (src/runtime/layers.c): a capture is an
 * exact copy with ids shifted, a second pass copies only what changed and
 * removes what went, and flattening stacks layers as overlayfs would
 * (whiteouts delete, opaque directories replace). Runs as root (mknod of
 * whiteouts, chown, trusted xattrs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "runtime/layers.h"
#include "runtime/runtime.h"

#define BASE 0x20000000u

struct fx {
  char dir[64];
};

static int setup(void **state) {
  struct fx *f = xcalloc(1, sizeof(*f));

  snprintf(f->dir, sizeof(f->dir), "/tmp/test_layers.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;

  wr_rm_rf(f->dir, NULL);
  free(f);
  return 0;
}

static char *path(const struct fx *f, const char *rel) {
  return xasprintf("%s/%s", f->dir, rel);
}

static void put(const struct fx *f, const char *rel, const char *data) {
  _cleanup_free_ char *p = path(f, rel);

  assert_int_equal(wr_write_file(p, data, strlen(data), 0644, NULL), 0);
}

static void mk(const struct fx *f, const char *rel) {
  _cleanup_free_ char *p = path(f, rel);

  assert_int_equal(mkdir(p, 0755), 0);
}

static char *get(const struct fx *f, const char *rel) {
  _cleanup_free_ char *p = path(f, rel);
  char *data = NULL;
  size_t len = 0;

  if (wr_read_file(p, 1 << 20, &data, &len, NULL) < 0)
    return NULL;
  return data;
}

static bool exists(const struct fx *f, const char *rel) {
  _cleanup_free_ char *p = path(f, rel);
  struct stat st;

  return lstat(p, &st) == 0;
}

static int sync_dirs(const struct fx *f, const char *src, const char *dst,
                     const struct wr_layer_opts *o, struct wr_layer_stats *st) {
  _cleanup_free_ char *s = path(f, src), *d = path(f, dst);
  _cleanup_close_ int sfd = open(s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  wr_error_t err;

  assert_true(sfd >= 0 && dfd >= 0);
  return wr_layer_sync(sfd, dfd, o, st, &err);
}

/* An upper layer as a sandbox in range BASE leaves it. */
static void make_upper(const struct fx *f) {
  _cleanup_free_ char *wh = path(f, "up/gone");
  _cleanup_free_ char *opq = path(f, "up/replaced");
  _cleanup_free_ char *own = path(f, "up/owned");
  _cleanup_free_ char *h1 = path(f, "up/h1"), *h2 = path(f, "up/h2");
  _cleanup_free_ char *ln = path(f, "up/link");

  mk(f, "up");
  mk(f, "up/replaced");
  put(f, "up/replaced/only", "only");
  put(f, "up/owned", "owned");
  put(f, "up/h1", "linked");
  assert_int_equal(mknod(wh, S_IFCHR | 0, makedev(0, 0)), 0);
  assert_int_equal(setxattr(opq, "trusted.overlay.opaque", "y", 1, 0), 0);
  assert_int_equal(setxattr(own, "user.color", "blue", 4, 0), 0);
  assert_int_equal(setxattr(own, "trusted.overlay.origin", "x", 1, 0), 0);
  assert_int_equal(chown(own, BASE + 1000, BASE + 1001), 0);
  assert_int_equal(chmod(own, 04750), 0);
  assert_int_equal(link(h1, h2), 0);
  assert_int_equal(symlink("/etc/passwd", ln), 0);
}

static void test_capture_is_exact(void **state) {
  struct fx *f = *state;
  struct wr_layer_opts o = {.id_base = BASE};
  struct wr_layer_stats st;
  _cleanup_free_ char *owned = path(f, "lay/owned"), *opq = NULL;
  _cleanup_free_ char *h1 = path(f, "lay/h1"), *h2 = path(f, "lay/h2");
  _cleanup_free_ char *wh = path(f, "lay/gone"), *ln = path(f, "lay/link");
  _cleanup_free_ char *data = NULL;
  struct stat a, b;
  char v[16], target[64];

  make_upper(f);
  mk(f, "lay");
  assert_int_equal(sync_dirs(f, "up", "lay", &o, &st), 0);
  assert_int_equal(stat(owned, &a), 0);
  assert_int_equal(a.st_uid, 1000);
  assert_int_equal(a.st_gid, 1001);
  assert_int_equal(a.st_mode & 07777, 04750);
  assert_int_equal(getxattr(owned, "user.color", v, sizeof(v)), 4);
  assert_int_equal(getxattr(owned, "trusted.overlay.origin", v, sizeof(v)), -1);
  opq = path(f, "lay/replaced");
  assert_int_equal(getxattr(opq, "trusted.overlay.opaque", v, sizeof(v)), 1);
  assert_int_equal(stat(h1, &a), 0);
  assert_int_equal(stat(h2, &b), 0);
  assert_int_equal(a.st_ino, b.st_ino);
  assert_int_equal(lstat(wh, &a), 0);
  assert_true(wr_layer_is_whiteout(&a));
  assert_int_equal(readlink(ln, target, sizeof(target)), 11);
  data = get(f, "lay/replaced/only");
  assert_string_equal(data, "only");
  assert_int_equal(st.whiteouts, 1);
  assert_int_equal(st.links, 1);
}

/* The second pass keeps what matches and did not change since the first
 * began, copies the rest and removes what went. */
static void test_second_pass_copies_changes_only(void **state) {
  struct fx *f = *state;
  struct wr_layer_opts o = {.id_base = BASE};
  struct wr_layer_stats st;
  _cleanup_free_ char *data = NULL;
  struct timespec ts;

  make_upper(f);
  mk(f, "lay");
  assert_int_equal(sync_dirs(f, "up", "lay", &o, &st), 0);
  clock_gettime(CLOCK_REALTIME, &ts);
  o.since_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  /* Nothing changed: nothing copied. */
  assert_int_equal(sync_dirs(f, "up", "lay", &o, &st), 0);
  assert_int_equal(st.copied, 0);
  usleep(20000);
  put(f, "up/new", "new");
  put(f, "up/owned", "changed");
  {
    _cleanup_free_ char *p = path(f, "up/replaced/only");
    assert_int_equal(unlink(p), 0);
  }
  assert_int_equal(sync_dirs(f, "up", "lay", &o, &st), 0);
  assert_true(st.copied >= 2 && st.copied <= 4);
  data = get(f, "lay/new");
  assert_string_equal(data, "new");
  free(data);
  data = get(f, "lay/owned");
  assert_string_equal(data, "changed");
  assert_false(exists(f, "lay/replaced/only"));
}

/* Flattening: a whiteout in a newer layer deletes and stays (for the
 * image below); an opaque directory replaces; others merge. */
static void test_flatten_stacks_like_overlayfs(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *l1 = path(f, "l1"), *l2 = path(f, "l2");
  _cleanup_free_ char *out = path(f, "out"), *wh = path(f, "l2/a");
  _cleanup_free_ char *opq = path(f, "l2/d"), *whout = path(f, "out/a");
  const char *layers[] = {l1, l2};
  struct wr_layer_stats st;
  struct stat s;
  wr_error_t err;

  mk(f, "l1");
  mk(f, "l1/d");
  mk(f, "l1/m");
  put(f, "l1/a", "a");
  put(f, "l1/d/old", "old");
  put(f, "l1/m/one", "1");
  mk(f, "l2");
  mk(f, "l2/d");
  mk(f, "l2/m");
  put(f, "l2/d/new", "new");
  put(f, "l2/m/two", "2");
  assert_int_equal(mknod(wh, S_IFCHR | 0, makedev(0, 0)), 0);
  assert_int_equal(setxattr(opq, "trusted.overlay.opaque", "y", 1, 0), 0);
  assert_int_equal(wr_layer_flatten(layers, 2, out, &st, &err), 0);
  assert_int_equal(lstat(whout, &s), 0);
  assert_true(wr_layer_is_whiteout(&s));
  assert_false(exists(f, "out/d/old"));
  assert_true(exists(f, "out/d/new"));
  assert_true(exists(f, "out/m/one"));
  assert_true(exists(f, "out/m/two"));
}

/* A tree nested deeper than the bound is refused, not walked. */
static void test_nesting_is_bounded(void **state) {
  struct fx *f = *state;
  struct wr_layer_opts o = {0};
  struct wr_layer_stats st;
  _cleanup_free_ char *rel = xstrdup("deep");

  mk(f, "deep");
  for (int i = 0; i < WR_LAYERS_MAX_NEST + 2; i++) {
    char *next = xasprintf("%s/d", rel);
    free(rel);
    rel = next;
    mk(f, rel);
  }
  mk(f, "copy");
  assert_int_equal(sync_dirs(f, "deep", "copy", &o, &st), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_capture_is_exact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_second_pass_copies_changes_only,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_flatten_stacks_like_overlayfs, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_nesting_is_bounded, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
