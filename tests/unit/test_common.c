/* Unit tests for src/common. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "common/common.h"

static void test_error_wrap(void **state) {
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_error_set(&err, ENOENT, "open `%s`", "/x"), -1);
  assert_int_equal(err.code, ENOENT);
  assert_string_equal(err.msg, "open `/x`: No such file or directory");
  wr_error_wrap(&err, "create sandbox `%s`", "a");
  assert_string_equal(
      err.msg, "create sandbox `a`: open `/x`: No such file or directory");
}

/* A later value for a name replaces the earlier one, in place. */
static void test_strv_setenv(void **state) {
  char **env = NULL;
  (void)state;

  env = wr_strv_setenv(env, "A=1");
  env = wr_strv_setenv(env, "AB=2");
  env = wr_strv_setenv(env, "A=3");
  env = wr_strv_setenv(env, "B=");
  assert_int_equal(wr_strv_len(env), 3);
  assert_string_equal(env[0], "A=3");
  assert_string_equal(env[1], "AB=2");
  assert_string_equal(env[2], "B=");
  wr_strv_free(env);
}

static void test_parse_size(void **state) {
  uint64_t v;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_parse_size("512", &v, &err), 0);
  assert_int_equal(v, 512);
  assert_int_equal(wr_parse_size("1g", &v, &err), 0);
  assert_int_equal(v, 1ULL << 30);
  assert_int_equal(wr_parse_size("1.5M", &v, &err), 0);
  assert_int_equal(v, 3ULL << 19);
  assert_int_equal(wr_parse_size("64KiB", &v, &err), 0);
  assert_int_equal(v, 65536);
  assert_int_equal(wr_parse_size("-1", &v, &err), -1);
  assert_int_equal(wr_parse_size("1x", &v, &err), -1);
  assert_non_null(strstr(err.msg, "invalid size"));
  assert_int_equal(wr_parse_size("", &v, &err), -1);
  assert_int_equal(wr_parse_size("99999999999t", &v, &err), -1);
}

static void test_parse_duration(void **state) {
  uint64_t v;
  (void)state;

  assert_int_equal(wr_parse_duration_ms("30", &v, NULL), 0);
  assert_int_equal(v, 30000);
  assert_int_equal(wr_parse_duration_ms("250ms", &v, NULL), 0);
  assert_int_equal(v, 250);
  assert_int_equal(wr_parse_duration_ms("2m", &v, NULL), 0);
  assert_int_equal(v, 120000);
  assert_int_equal(wr_parse_duration_ms("1d", &v, NULL), -1);
}

static void test_names(void **state) {
  (void)state;
  assert_true(wr_name_valid("web-1"));
  assert_true(wr_name_valid("a.b_c"));
  assert_false(wr_name_valid(""));
  assert_false(wr_name_valid("-x"));
  assert_false(wr_name_valid("a/b"));
  assert_false(wr_name_valid(".."));
  assert_false(wr_name_valid("Upper"));
  assert_false(wr_name_valid(
      "a123456789012345678901234567890123456789012345678901234567890123"));
  assert_true(wr_env_key_valid("PATH"));
  assert_false(wr_env_key_valid("1X"));
  assert_false(wr_env_key_valid("A=B"));
}

static void test_signals(void **state) {
  (void)state;
  assert_int_equal(wr_signal_from_name("TERM"), 15);
  assert_int_equal(wr_signal_from_name("sigkill"), 9);
  assert_int_equal(wr_signal_from_name("2"), 2);
  assert_int_equal(wr_signal_from_name("NOPE"), -1);
  assert_int_equal(wr_signal_from_name("65"), -1);
  assert_string_equal(wr_signal_name(9), "KILL");
}

static void test_ring(void **state) {
  wr_ring_t r;
  char out[16];
  uint64_t next;
  size_t n;
  (void)state;

  wr_ring_init(&r, 8);
  wr_ring_write(&r, "abcdef", 6);
  n = wr_ring_read(&r, 0, out, sizeof(out), &next);
  assert_int_equal(n, 6);
  assert_memory_equal(out, "abcdef", 6);
  wr_ring_write(&r, "ghijk", 5); /* total 11, keeps "defghijk" */
  n = wr_ring_read(&r, 0, out, sizeof(out), &next);
  assert_int_equal(n, 8);
  assert_memory_equal(out, "defghijk", 8);
  assert_int_equal(next, 11);
  n = wr_ring_read(&r, 9, out, sizeof(out), &next);
  assert_int_equal(n, 2);
  assert_memory_equal(out, "jk", 2);
  wr_ring_write(&r, "0123456789", 10);
  n = wr_ring_read(&r, 0, out, sizeof(out), &next);
  assert_int_equal(n, 8);
  assert_memory_equal(out, "23456789", 8);
  wr_ring_free(&r);
}

static void test_json_unpack(void **state) {
  json_t *j = NULL;
  wr_error_t err = {0};
  const char *name = NULL;
  int64_t pids = 0;
  uint64_t mem = 0;
  bool present = false;
  struct wr_json_field fields[] = {
      {"name", WR_JSON_STRING, &name, true, NULL},
      {"pids", WR_JSON_INT, &pids, false, NULL},
      {"memory", WR_JSON_SIZE, &mem, false, &present},
  };
  (void)state;

  assert_int_equal(
      wr_json_parse_object("{\"name\":\"a\",\"memory\":\"1g\"}",
                           strlen("{\"name\":\"a\",\"memory\":\"1g\"}"), false,
                           &j, &err),
      0);
  assert_int_equal(wr_json_unpack(j, fields, 3, &err), 0);
  assert_string_equal(name, "a");
  assert_true(present);
  assert_int_equal(mem, 1ULL << 30);
  json_decref(j);

  assert_int_equal(wr_json_parse_object("{\"nam\":1}", strlen("{\"nam\":1}"),
                                        false, &j, &err),
                   0);
  assert_int_equal(wr_json_unpack(j, fields, 3, &err), -1);
  assert_string_equal(err.msg, "unknown field `nam`");
  json_decref(j);

  assert_int_equal(wr_json_parse_object("{\"name\":1}", strlen("{\"name\":1}"),
                                        false, &j, &err),
                   0);
  assert_int_equal(wr_json_unpack(j, fields, 3, &err), -1);
  assert_string_equal(err.msg, "field `name` must be a string");
  json_decref(j);

  assert_int_equal(wr_json_parse_object("{\"pids\":1}", strlen("{\"pids\":1}"),
                                        false, &j, &err),
                   0);
  assert_int_equal(wr_json_unpack(j, fields, 3, &err), -1);
  assert_string_equal(err.msg, "missing field `name`");
  json_decref(j);

  assert_int_equal(
      wr_json_parse_object("{\"a\":", strlen("{\"a\":"), false, &j, &err), -1);
  assert_non_null(strstr(err.msg, "line 1"));
  assert_int_equal(wr_json_parse_object("[1]", strlen("[1]"), false, &j, &err),
                   -1);
  assert_int_equal(wr_json_parse_object("{\"a\":1,\"a\":2}",
                                        strlen("{\"a\":1,\"a\":2}"), false, &j,
                                        &err),
                   -1);
}

/* The root-confined open never reaches outside the root, whatever the
 * symlinks inside say. */
static void test_open_in_root(void **state) {
  char tmpl[] = "/tmp/wr-test-XXXXXX";
  char *dir = mkdtemp(tmpl);
  _cleanup_free_ char *inside = NULL;
  int root, fd;
  char buf[32] = {0};
  wr_error_t err = {0};
  (void)state;

  assert_non_null(dir);
  inside = xasprintf("%s/etc", dir);
  assert_int_equal(mkdir(inside, 0755), 0);
  root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true(root >= 0);
  assert_int_equal(wr_write_file_at(root, "etc/hostname", "inside\n", 7, &err),
                   0);
  assert_int_equal(symlinkat("/etc", root, "abs"), 0);
  assert_int_equal(symlinkat("../../../../etc", root, "rel"), 0);

  fd = wr_open_in_root(root, "/abs/hostname", O_RDONLY, 0, &err);
  assert_true(fd >= 0);
  assert_int_equal(read(fd, buf, sizeof(buf) - 1), 7);
  assert_string_equal(buf, "inside\n");
  close(fd);
  fd = wr_open_in_root(root, "rel/hostname", O_RDONLY, 0, &err);
  assert_true(fd >= 0);
  close(fd);
  fd = wr_open_in_root(root, "../../etc/passwd", O_RDONLY, 0, &err);
  assert_int_equal(fd, -1);
  assert_int_equal(err.code, ENOENT);
  fd = wr_open_in_root(root, "/proc/self/root/etc/passwd", O_RDONLY, 0, &err);
  assert_int_equal(fd, -1);

  assert_int_equal(wr_rm_rf(dir, &err), 0);
  close(root);
}

/* A scratch root with the kinds of file a hostile sandbox plants. */
static char *hostile_root(int *rootfd) {
  char tmpl[] = "/tmp/wr-test-XXXXXX";
  char *dir = xstrdup(mkdtemp(tmpl));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int s;

  *rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true(*rootfd >= 0);
  assert_int_equal(mkdirat(*rootfd, "etc", 0755), 0);
  assert_int_equal(mkfifoat(*rootfd, "etc/fifo", 0644), 0);
  assert_int_equal(symlinkat("/etc/passwd", *rootfd, "etc/link"), 0);
  assert_int_equal(symlinkat("etc", *rootfd, "etcl"), 0);
  assert_int_equal(mkdirat(*rootfd, "etc/dir", 0755), 0);
  assert_int_equal(wr_write_file_at(*rootfd, "etc/small", "a:b\n", 4, NULL), 0);
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/etc/sock", dir);
  s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(s);
  return dir;
}

/* Reads in a root refuse every kind of file but a regular one, with a
 * message naming it, and never wait: a FIFO with no writer would block an
 * open for ever (the alarm fails the test instead). */
static void test_read_in_root_refuses_what_is_not_a_file(void **state) {
  static const struct {
    const char *path, *says;
    int code;
  } bad[] = {
      {"/etc/fifo", "/etc/fifo in the sandbox is a fifo, not a regular file",
       EINVAL},
      {"/etc/sock", "/etc/sock in the sandbox is a socket, not a regular file",
       EINVAL},
      {"/etc/link",
       "/etc/link in the sandbox is a symlink, not a regular "
       "file",
       EINVAL},
      {"/etc/dir",
       "/etc/dir in the sandbox is a directory, not a regular "
       "file",
       EINVAL},
      {"/etc/none", "/etc/none in the sandbox: No such file", ENOENT},
  };
  int root;
  char *dir = hostile_root(&root), *text = NULL;
  size_t len = 0;
  wr_error_t err = {0};
  (void)state;

  alarm(20);
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    assert_int_equal(wr_read_in_root(root, "in the sandbox", bad[i].path, 64,
                                     &text, &len, &err),
                     -1);
    if (strstr(err.msg, bad[i].says) == NULL)
      fail_msg("%s: `%s`", bad[i].path, err.msg);
    assert_int_equal(err.code, bad[i].code);
  }
  /* A symlink in the middle is followed, but only inside the root. */
  assert_int_equal(wr_read_in_root(root, "in the sandbox", "/etcl/small", 64,
                                   &text, &len, &err),
                   0);
  assert_string_equal(text, "a:b\n");
  assert_int_equal(len, 4);
  free(text);
  /* ...unless no symlink may be on the way at all. */
  assert_int_equal(wr_open_confined(root, "here", "etcl/small",
                                    WR_CONFINED_NO_SYMLINKS, NULL, &err),
                   -1);
  assert_int_equal(err.code, ELOOP);
  assert_non_null(strstr(err.msg, "etcl/small here leads through a symlink"));
  /* A directory when one is wanted; a file is not one. */
  int fd =
      wr_open_confined(root, "here", "etc/dir", WR_CONFINED_DIR, NULL, &err);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(
      wr_open_confined(root, "here", "etc/small", WR_CONFINED_DIR, NULL, &err),
      -1);
  assert_int_equal(err.code, ENOTDIR);
  assert_non_null(
      strstr(err.msg, "etc/small here is a regular file, not a directory"));
  /* Beneath: a way out is an error, not the root's own "/". */
  assert_int_equal(symlinkat("/etc", root, "etc/abs"), 0);
  assert_int_equal(wr_open_confined(root, "here", "etc/abs/passwd",
                                    WR_CONFINED_BENEATH, NULL, &err),
                   -1);
  assert_int_equal(err.code, EXDEV);
  assert_non_null(strstr(err.msg, "etc/abs/passwd here leads outside it"));
  alarm(0);
  assert_int_equal(wr_rm_rf(dir, &err), 0);
  close(root);
  free(dir);
}

/* A sparse file of a terabyte is refused by its size, before a byte is
 * read; a file within the bound is read whole. */
static void test_read_in_root_bounds_the_size(void **state) {
  int root, fd;
  char *dir = hostile_root(&root), *text = NULL;
  wr_error_t err = {0};
  (void)state;

  fd = openat(root, "etc/huge", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)1 << 40), 0);
  close(fd);
  assert_int_equal(wr_read_in_root(root, "in the sandbox", "/etc/huge",
                                   4u << 20, &text, NULL, &err),
                   -1);
  assert_int_equal(err.code, EFBIG);
  assert_non_null(strstr(err.msg, "/etc/huge in the sandbox is 1.0 TiB, more "
                                  "than the 4.0 MiB it may be"));
  assert_int_equal(
      wr_read_in_root(root, "in it", "etc/small", 4, &text, NULL, &err), 0);
  assert_string_equal(text, "a:b\n");
  free(text);
  assert_int_equal(
      wr_read_in_root(root, "in it", "etc/small", 3, &text, NULL, &err), -1);
  assert_int_equal(err.code, EFBIG);
  assert_int_equal(wr_rm_rf(dir, &err), 0);
  close(root);
  free(dir);
}

/* A write replaces a FIFO or a symlink standing at the name (never opening
 * it, never writing through it) and refuses a directory. */
static void test_write_in_root_replaces_never_opens(void **state) {
  int root;
  char *dir = hostile_root(&root), *text = NULL;
  _cleanup_free_ char *outside = NULL, *check = NULL;
  struct stat st;
  wr_error_t err = {0};
  (void)state;

  alarm(20);
  outside = xasprintf("%s/outside", dir);
  assert_int_equal(wr_write_file(outside, "keep", 4, 0644, NULL), 0);
  assert_int_equal(unlinkat(root, "etc/link", 0), 0);
  assert_int_equal(symlinkat(outside, root, "etc/link"), 0);
  assert_int_equal(wr_write_in_root(root, "in the sandbox", "/etc/fifo",
                                    "one\n", 4, 0640, getuid(), &err),
                   0);
  assert_int_equal(wr_write_in_root(root, "in the sandbox", "/etc/link",
                                    "two\n", 4, 0644, getuid(), &err),
                   0);
  assert_int_equal(fstatat(root, "etc/fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0640);
  assert_int_equal(
      wr_read_in_root(root, "in it", "etc/link", 64, &text, NULL, &err), 0);
  assert_string_equal(text, "two\n");
  free(text);
  assert_int_equal(wr_read_file(outside, 64, &text, NULL, &err), 0);
  assert_string_equal(text, "keep");
  free(text);
  assert_int_equal(wr_write_in_root(root, "in the sandbox", "/etc/dir", "x", 1,
                                    0644, getuid(), &err),
                   -1);
  assert_int_equal(err.code, EISDIR);
  assert_non_null(
      strstr(err.msg, "/etc/dir in the sandbox is a directory, not a file"));
  /* Nothing temporary is left behind. */
  check = xasprintf("test -z \"$(ls -A %s/etc | grep wr-tmp)\"", dir);
  assert_int_equal(system(check), 0);
  alarm(0);
  assert_int_equal(wr_rm_rf(dir, &err), 0);
  close(root);
  free(dir);
}

static void test_rm_rf_deep(void **state) {
  char tmpl[] = "/tmp/wr-test-XXXXXX";
  char *dir = mkdtemp(tmpl);
  wr_error_t err = {0};
  int fd;
  (void)state;

  fd = open(dir, O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < 2000; i++) {
    int next;
    assert_int_equal(mkdirat(fd, "d", 0755), 0);
    assert_int_equal(wr_write_file_at(fd, "f", "x", 1, &err), 0);
    next = openat(fd, "d", O_DIRECTORY | O_CLOEXEC);
    close(fd);
    fd = next;
  }
  assert_int_equal(symlinkat("/etc", fd, "link"), 0);
  close(fd);
  assert_int_equal(wr_rm_rf(dir, &err), 0);
  assert_int_equal(access(dir, F_OK), -1);
  assert_int_equal(access("/etc/passwd", F_OK), 0);
}

/* More non-empty subdirectories than one batch of names, a mount point
 * stops the removal without emptying it. */
static void test_rm_rf_wide(void **state) {
  char tmpl[] = "/tmp/wr-test-XXXXXX";
  char *dir = mkdtemp(tmpl);
  _cleanup_free_ char *mnt = NULL;
  wr_error_t err = {0};
  int fd;
  (void)state;

  fd = open(dir, O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < 1500; i++) {
    char name[16];
    int sub;
    snprintf(name, sizeof(name), "d%d", i);
    assert_int_equal(mkdirat(fd, name, 0755), 0);
    sub = openat(fd, name, O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(wr_write_file_at(sub, "f", "x", 1, &err), 0);
    close(sub);
  }
  close(fd);
  assert_int_equal(wr_rm_rf(dir, &err), 0);
  assert_int_equal(access(dir, F_OK), -1);

  /* A tmpfs mounted inside (when we may mount): refused, left as it is. */
  strcpy(tmpl, "/tmp/wr-test-XXXXXX");
  assert_non_null(mkdtemp(tmpl));
  mnt = xasprintf("%s/m", dir);
  assert_int_equal(mkdir(mnt, 0755), 0);
  if (mount("tmpfs", mnt, "tmpfs", 0, NULL) == 0) {
    _cleanup_free_ char *keep = xasprintf("%s/keep", mnt);
    assert_int_equal(wr_write_file(keep, "k", 1, 0644, &err), 0);
    assert_int_equal(wr_rm_rf(dir, &err), -1);
    assert_int_equal(err.code, EBUSY);
    assert_int_equal(access(keep, F_OK), 0);
    assert_int_equal(umount2(mnt, MNT_DETACH), 0);
  }
  assert_int_equal(wr_rm_rf(dir, &err), 0);
  assert_int_equal(access(dir, F_OK), -1);
}

/* What a terminal could obey instead of showing, and UTF-8 decoding at
 * the end of a buffer. */
static void test_text_safety(void **state) {
  static const char *const safe[] = {"", "plain text", "caf\xc3\xa9",
                                     "\xf0\x9f\x90\x87 rabbit", "tab-free"};
  static const char *const unsafe[] = {
      "\x1b[31m", "a\nb",     "a\tb",         "\x7f",
      "\xc2\x9b", "\xc2\x80", "\xe2\x80\xae", "\xe2\x81\xa6",
      "\xff",     "\xc3",     "\xed\xa0\x80", /* a surrogate */
      "\xc0\xaf",                             /* overlong "/" */
  };
  bool bad;
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(safe); i++)
    assert_true(wr_text_is_safe(safe[i]));
  for (size_t i = 0; i < WR_ARRAY_SIZE(unsafe); i++)
    assert_false(wr_text_is_safe(unsafe[i]));
  assert_int_equal(wr_utf8_seq("\xc3\xa9", 1), 0); /* cut by the end */
  assert_int_equal(wr_utf8_seq("\xc3\xa9", 2), 2);
  assert_int_equal(wr_text_unit("\xe2\x9c\x93x", 4, &bad), 3);
  assert_false(bad);
  assert_int_equal(wr_text_unit("\xe2\x9c", 2, &bad), 1);
  assert_true(bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_wrap),
      cmocka_unit_test(test_strv_setenv),
      cmocka_unit_test(test_parse_size),
      cmocka_unit_test(test_parse_duration),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_signals),
      cmocka_unit_test(test_ring),
      cmocka_unit_test(test_json_unpack),
      cmocka_unit_test(test_open_in_root),
      cmocka_unit_test(test_read_in_root_refuses_what_is_not_a_file),
      cmocka_unit_test(test_read_in_root_bounds_the_size),
      cmocka_unit_test(test_write_in_root_replaces_never_opens),
      cmocka_unit_test(test_rm_rf_deep),
      cmocka_unit_test(test_rm_rf_wide),
      cmocka_unit_test(test_text_safety),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
