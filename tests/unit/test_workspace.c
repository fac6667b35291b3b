/*
 * Unit tests for a workspace's identity (src/runtime/workspace.c): the
 * directory recorded at create is the only one a later open accepts,
 * whatever a neighbouring sandbox does to the path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/common.h"
#include "runtime/runtime.h"

struct fx {
  char base[64];
  char *ws;    /* base/outer/inner: the workspace */
  char *other; /* base/other: a directory of the same owner */
  struct wr_rt_spec spec;
};

static int setup(void **state) {
  struct fx *f = xcalloc(1, sizeof(*f));
  _cleanup_close_ int fd = -1;
  _cleanup_free_ char *outer = NULL;
  wr_error_t err = {0};

  snprintf(f->base, sizeof(f->base), "/tmp/wr-test-ws-XXXXXX");
  assert_non_null(mkdtemp(f->base));
  outer = xasprintf("%s/outer", f->base);
  f->ws = xasprintf("%s/inner", outer);
  f->other = xasprintf("%s/other", f->base);
  assert_int_equal(mkdir(outer, 0755), 0);
  assert_int_equal(mkdir(f->ws, 0755), 0);
  assert_int_equal(mkdir(f->other, 0755), 0);
  f->spec.ws_path = f->ws;
  f->spec.ws_uid = getuid();
  f->spec.ws_gid = getgid();
  fd = open(f->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(wr_workspace_identify(fd, &f->spec.ws_id, &err), 0);
  assert_true(f->spec.ws_id.known);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;

  assert_int_equal(wr_rm_rf(f->base, NULL), 0);
  free(f->ws);
  free(f->other);
  free(f);
  return 0;
}

/* The recorded directory opens, as an O_PATH fd or a readable one. */
static void test_recorded_directory_opens(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};
  int fd;

  fd = wr_workspace_open(&f->spec, true, &err);
  assert_true(fd >= 0);
  close(fd);
  fd = wr_workspace_open(&f->spec, false, &err);
  assert_true(fd >= 0);
  close(fd);
}

/* The workspace replaced by a symlink to another directory, or a
 * component of its path replaced so: refused, saying why. */
static void test_symlink_is_refused(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *moved = xasprintf("%s.moved", f->ws);
  _cleanup_free_ char *outer = xasprintf("%s/outer", f->base);
  _cleanup_free_ char *outer2 = xasprintf("%s/outer2", f->base);
  wr_error_t err = {0};

  assert_int_equal(rename(f->ws, moved), 0);
  assert_int_equal(symlink(f->other, f->ws), 0);
  assert_int_equal(wr_workspace_open(&f->spec, true, &err), -1);
  assert_int_equal(err.code, ESTALE);
  assert_non_null(strstr(err.msg, "is not the directory it was"));
  assert_non_null(strstr(err.msg, "is a symlink, not a directory"));
  assert_int_equal(unlink(f->ws), 0);
  assert_int_equal(rename(moved, f->ws), 0);
  /* A symlink higher up, even to where the directory really is. */
  assert_int_equal(rename(outer, outer2), 0);
  assert_int_equal(symlink(outer2, outer), 0);
  assert_int_equal(wr_workspace_open(&f->spec, true, &err), -1);
  assert_int_equal(err.code, ESTALE);
  assert_non_null(strstr(err.msg, "leads through a symlink"));
}

/* Another directory of the same owner at the very path: refused by its
 * identity. */
static void test_other_directory_is_refused(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *moved = xasprintf("%s.moved", f->ws);
  wr_error_t err = {0};

  assert_int_equal(rename(f->ws, moved), 0);
  assert_int_equal(rename(f->other, f->ws), 0);
  assert_int_equal(wr_workspace_open(&f->spec, true, &err), -1);
  assert_int_equal(err.code, ESTALE);
  assert_non_null(strstr(err.msg, "now inode"));
  assert_non_null(strstr(err.msg, "recorded inode"));
}

/* The rule itself: owner always; inode, with the device or the
 * filesystem id (a device number may change across a reboot); a record
 * without an identity (an older one) checks the owner only. */
static void test_same_rule(void **state) {
  struct fx *f = *state;
  struct wr_rt_spec s = f->spec;
  struct stat st = {0};

  (void)state;
  s.ws_id = (struct wr_ws_identity){true, 10, 20, 30};
  st.st_uid = s.ws_uid;
  st.st_gid = s.ws_gid;
  st.st_dev = 10;
  st.st_ino = 20;
  assert_true(wr_workspace_same(&s, &st, 30));
  assert_true(wr_workspace_same(&s, &st, 0));
  st.st_dev = 11;
  assert_true(wr_workspace_same(&s, &st, 30));
  assert_false(wr_workspace_same(&s, &st, 31));
  s.ws_id.fsid = 0; /* a filesystem without an id: the device decides */
  assert_false(wr_workspace_same(&s, &st, 0));
  st.st_dev = 10;
  st.st_ino = 21;
  assert_false(wr_workspace_same(&s, &st, 30));
  st.st_ino = 20;
  st.st_uid = s.ws_uid + 1;
  assert_false(wr_workspace_same(&s, &st, 30));
  s.ws_id.known = false;
  assert_false(wr_workspace_same(&s, &st, 30));
  st.st_uid = s.ws_uid;
  st.st_ino = 99;
  assert_true(wr_workspace_same(&s, &st, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_recorded_directory_opens, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_symlink_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_directory_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_same_rule, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
