/*
 * Unit tests for clone mode's host side and git-remote-warren: ref names,
 * bundle headers from a hostile sandbox, the git directory read without
 * git, the answer of rm's check, defused text, and the host runner.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "gitremote/gitremote.h"

#define OID1 "207ab24dd9ba67a6645a23bbf4abf2efef505785"
#define OID2 "7ab938566d6c6ad50027c75191032b26e8a44ef1"
#define OID256                                                                 \
  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* ---- ref names ----------------------------------------------------------- */

static void test_refname_rules(void **state) {
  static const char *const good[] = {
      "refs/heads/main",  "refs/heads/feature/x",   "refs/tags/v1.0",
      "refs/heads/a-b_c", "refs/heads/caf\xc3\xa9", "refs/heads/a.b",
      "refs/heads/@x"};
  static const char *const bad[] = {"HEAD",
                                    "main",
                                    "refs/heads/a..b",
                                    "refs/heads/.x",
                                    "refs/heads/x.lock",
                                    "refs/heads/a b",
                                    "refs/heads/a~1",
                                    "refs/heads/a^",
                                    "refs/heads/a:b",
                                    "refs/heads/a?",
                                    "refs/heads/a*",
                                    "refs/heads/a[",
                                    "refs/heads/a\\b",
                                    "refs/heads//a",
                                    "refs/heads/a/",
                                    "/refs/heads/a",
                                    "refs/heads/a.",
                                    "refs/heads/a@{1}",
                                    "@",
                                    "refs/heads/a\tb",
                                    "refs/heads/a\x7f",
                                    "",
                                    "refs/heads/x.lock/y"};
  char longname[1100];
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(good); i++)
    assert_true(wr_cli_git_refname_valid(good[i]));
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    if (wr_cli_git_refname_valid(bad[i]))
      fail_msg("accepted `%s`", bad[i]);
  }
  memset(longname, 'a', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  memcpy(longname, "refs/heads/", 11);
  assert_false(wr_cli_git_refname_valid(longname));
  longname[1024] = '\0';
  assert_true(wr_cli_git_refname_valid(longname));
}

/* ---- bundle headers ------------------------------------------------------ */

static int parse(const char *text, struct wr_bundle_header *h,
                 wr_error_t *err) {
  return wr_bundle_header_parse(text, strlen(text), h, err);
}

static void test_bundle_v2(void **state) {
  static const char b[] =
      "# v2 git bundle\n" OID1 " refs/heads/feature\n" OID2
      " refs/heads/main\n" OID1 " refs/tags/v1\n" OID2 " HEAD\n\nPACK\0\0\0\2";
  struct wr_bundle_header h;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_bundle_header_parse(b, sizeof(b) - 1, &h, &err), 0);
  assert_int_equal(h.version, 2);
  assert_int_equal(h.oid_len, 40);
  assert_int_equal(h.nrefs, 4);
  assert_int_equal(h.pack_offset, strstr(b, "PACK") - b);
  assert_string_equal(wr_bundle_find(&h, "refs/heads/main")->oid, OID2);
  assert_string_equal(wr_bundle_find(&h, "HEAD")->oid, OID2);
  assert_string_equal(wr_bundle_find(&h, "refs/tags/v1")->oid, OID1);
  assert_null(wr_bundle_find(&h, "refs/heads/nope"));
  wr_bundle_header_free(&h);
  assert_int_equal(h.nrefs, 0);
}

static void test_bundle_v3_sha256(void **state) {
  struct wr_bundle_header h;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(parse("# v3 git bundle\n@object-format=sha256\n" OID256
                         " refs/heads/main\n\nPACK",
                         &h, &err),
                   0);
  assert_int_equal(h.version, 3);
  assert_int_equal(h.oid_len, 64);
  assert_string_equal(h.refs[0].oid, OID256);
  wr_bundle_header_free(&h);
  /* A sha1 id in a sha256 bundle, and the other way round. */
  assert_int_equal(parse("# v3 git bundle\n@object-format=sha256\n" OID1
                         " refs/heads/main\n\nPACK",
                         &h, &err),
                   -1);
  assert_int_equal(
      parse("# v2 git bundle\n" OID256 " refs/heads/main\n\nPACK", &h, &err),
      -1);
}

/* Each of these is refused, with a message. */
static void test_bundle_hostile(void **state) {
  static const char *const bad[] = {
      /* not a bundle, or another version */
      "PACK", "# v4 git bundle\n" OID1 " refs/heads/a\n\nPACK",
      "# v2 git bundle \n" OID1 " refs/heads/a\n\nPACK",
      /* capabilities: only object-format; none in v2 */
      "# v3 git bundle\n@filter=blob:none\n" OID1 " refs/heads/a\n\nPACK",
      "# v3 git bundle\n@object-format=md5\n" OID1 " refs/heads/a\n\nPACK",
      "# v2 git bundle\n@object-format=sha1\n" OID1 " refs/heads/a\n\nPACK",
      /* prerequisites: an incremental bundle */
      "# v2 git bundle\n-" OID2 " base\n" OID1 " refs/heads/a\n\nPACK",
      /* ids */
      "# v2 git bundle\n"
      "207AB24DD9BA67A6645A23BBF4ABF2EFEF505785"
      " refs/heads/a\n\nPACK",
      "# v2 git bundle\n207ab24 refs/heads/a\n\nPACK",
      "# v2 git bundle\n" OID1 "  refs/heads/a\n\nPACK",
      "# v2 git bundle\n" OID1 "\trefs/heads/a\n\nPACK",
      "# v2 git bundle\n0000000000000000000000000000000000000000"
      " refs/heads/a\n\nPACK",
      "# v2 git bundle\n" OID1 "\n\nPACK",
      /* names: invalid, or not a branch, tag or HEAD */
      "# v2 git bundle\n" OID1 " refs/heads/../../etc\n\nPACK",
      "# v2 git bundle\n" OID1 " refs/heads/a\x1b[2J\n\nPACK",
      "# v2 git bundle\n" OID1 " refs/remotes/origin/a\n\nPACK",
      "# v2 git bundle\n" OID1 " refs/warren/fetched/a\n\nPACK",
      "# v2 git bundle\n" OID1 " refs/heads\n\nPACK",
      "# v2 git bundle\n" OID1 " FETCH_HEAD\n\nPACK",
      "# v2 git bundle\n" OID1 " refs/heads/a\r\n\nPACK",
      /* twice the same name */
      "# v2 git bundle\n" OID1 " refs/heads/a\n" OID2 " refs/heads/a\n\nPACK",
      /* no refs, no end, no pack */
      "# v2 git bundle\n\nPACK", "# v2 git bundle\n" OID1 " refs/heads/a\n",
      "# v2 git bundle\n" OID1 " refs/heads/a",
      "# v2 git bundle\n" OID1 " refs/heads/a\n\n",
      "# v2 git bundle\n" OID1 " refs/heads/a\n\nPACX",
      "# v2 git bundle\n" OID1 " refs/heads/a\n\nPA", ""};
  struct wr_bundle_header h;
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    wr_error_t err = {0};
    if (parse(bad[i], &h, &err) != -1)
      fail_msg("accepted bundle #%zu", i);
    assert_true(err.msg[0] != '\0');
    assert_int_equal(h.nrefs, 0);
    assert_null(h.refs);
  }
}

/* Bytes that do not stop a naive parser: NULs, an endless line. */
static void test_bundle_limits(void **state) {
  static const char nul[] = "# v2 git bundle\n" OID1 " refs/heads/a\0b\n\nPACK";
  struct wr_bundle_header h;
  wr_error_t err = {0};
  size_t len = 2u << 20;
  char *big = xmalloc(len);
  (void)state;

  assert_int_equal(wr_bundle_header_parse(nul, sizeof(nul) - 1, &h, &err), -1);
  memcpy(big, "# v2 git bundle\n" OID1 " refs/heads/", 16 + 41 + 11);
  memset(big + 16 + 41 + 11, 'a', len - (16 + 41 + 11));
  assert_int_equal(wr_bundle_header_parse(big, len, &h, &err), -1);
  assert_non_null(strstr(err.msg, "too long"));
  free(big);
}

/* As many refs as allowed, then one more. */
static void test_bundle_many_refs(void **state) {
  wr_buf_t b;
  struct wr_bundle_header h;
  wr_error_t err = {0};
  (void)state;

  wr_buf_init(&b);
  wr_buf_puts(&b, "# v2 git bundle\n");
  for (int i = 0; i < WR_BUNDLE_REFS_MAX; i++)
    wr_buf_printf(&b, "%s refs/tags/t%d\n", OID1, i);
  wr_buf_puts(&b, "\nPACK");
  assert_int_equal(wr_bundle_header_parse(b.data, b.len, &h, &err), 0);
  assert_int_equal(h.nrefs, WR_BUNDLE_REFS_MAX);
  assert_non_null(wr_bundle_find(&h, "refs/tags/t99999"));
  wr_bundle_header_free(&h);
  wr_buf_reset(&b);
  wr_buf_puts(&b, "# v2 git bundle\n");
  for (int i = 0; i <= WR_BUNDLE_REFS_MAX; i++)
    wr_buf_printf(&b, "%s refs/tags/t%d\n", OID1, i);
  wr_buf_puts(&b, "\nPACK");
  assert_int_equal(wr_bundle_header_parse(b.data, b.len, &h, &err), -1);
  wr_buf_free(&b);
}

static void test_sandbox_name(void **state) {
  char *n;
  (void)state;

  n = wr_gitremote_sandbox_name("web");
  assert_string_equal(n, "web");
  free(n);
  n = wr_gitremote_sandbox_name("warren://web-2");
  assert_string_equal(n, "web-2");
  free(n);
  assert_null(wr_gitremote_sandbox_name(""));
  assert_null(wr_gitremote_sandbox_name("Web"));
  assert_null(wr_gitremote_sandbox_name("../x"));
  assert_null(wr_gitremote_sandbox_name("warren://"));
  assert_null(wr_gitremote_sandbox_name("a/b"));
}

/* ---- the git directory --------------------------------------------------- */

struct repo {
  char top[64];
};

static void put(const char *dir, const char *name, const char *text) {
  char *p = xasprintf("%s/%s", dir, name);

  assert_int_equal(wr_write_file(p, text, strlen(text), 0644, NULL), 0);
  free(p);
}

static void mkdirs(const char *dir, const char *name) {
  char *p = xasprintf("%s/%s", dir, name);

  assert_int_equal(wr_mkdir_p(p, 0755, NULL), 0);
  free(p);
}

/* The skeleton `git init` makes, in dir. */
static void git_skeleton(const char *dir) {
  mkdirs(dir, "objects/pack");
  mkdirs(dir, "refs/heads");
  mkdirs(dir, "refs/tags");
  put(dir, "HEAD", "ref: refs/heads/main\n");
  put(dir, "config", "[core]\n\tbare = false\n");
}

static int repo_setup(void **state) {
  struct repo *r = xcalloc(1, sizeof(*r));

  snprintf(r->top, sizeof(r->top), "/tmp/wr-test-clone-XXXXXX");
  assert_non_null(mkdtemp(r->top));
  *state = r;
  return 0;
}

static int repo_teardown(void **state) {
  struct repo *r = *state;

  wr_rm_rf(r->top, NULL);
  free(r);
  return 0;
}

static void test_git_dir_plain(void **state) {
  struct repo *r = *state;
  char *gd = NULL, *dotgit = xasprintf("%s/.git", r->top);
  char *rel = xasprintf("%s/./", r->top);
  wr_error_t err = {0};

  /* Nothing yet: not a repository. */
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "is not a git repository"));
  assert_non_null(strstr(err.msg, "git commit"));
  /* An empty .git directory is not one either. */
  mkdirs(r->top, ".git");
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "is not a git repository"));
  /* A fresh `git init`: a repository without commits. */
  git_skeleton(dotgit);
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), 0);
  assert_string_equal(gd, dotgit);
  free(gd);
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "has no commits"));
  /* A loose branch, deep down. */
  mkdirs(dotgit, "refs/heads/feature/x");
  put(dotgit, "refs/heads/feature/x/y", OID1 "\n");
  assert_int_equal(wr_cli_clone_check(rel, &gd, &err), 0);
  assert_string_equal(gd, dotgit);
  free(gd);
  free(dotgit);
  free(rel);
}

static void test_git_dir_packed(void **state) {
  struct repo *r = *state;
  char *gd = NULL, *dotgit = xasprintf("%s/.git", r->top);
  wr_error_t err = {0};

  git_skeleton(dotgit);
  put(dotgit, "packed-refs",
      "# pack-refs with: peeled fully-peeled sorted\n" OID1 " refs/tags/v1\n");
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), -1);
  put(dotgit, "packed-refs",
      "# pack-refs with: peeled fully-peeled sorted\n" OID1
      " refs/heads/main\n^" OID2 "\n");
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), 0);
  free(gd);
  free(dotgit);
}

/* A .git file: followed inside the tree; a worktree or a git directory
 * outside it cannot be seen from the sandbox, so they are refused. */
static void test_git_dir_gitfile(void **state) {
  struct repo *r = *state;
  char *inner = xasprintf("%s/store", r->top);
  char *wt = xasprintf("%s/wt", r->top);
  char *gd = NULL;
  wr_error_t err = {0};

  git_skeleton(inner);
  put(inner, "refs/heads/main", OID1 "\n");
  put(r->top, ".git", "gitdir: store\n");
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), 0);
  assert_string_equal(gd, inner);
  free(gd);
  /* From a subdirectory, the store is outside. */
  mkdirs(r->top, "wt");
  put(wt, ".git", "gitdir: ../store\n");
  assert_int_equal(wr_cli_clone_git_dir(wt, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "outside"));
  /* A linked worktree. */
  put(inner, "commondir", "..\n");
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "worktree"));
  /* Garbage and dangling .git files. */
  put(r->top, ".git", "hello\n");
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), -1);
  put(r->top, ".git", "gitdir: \n");
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), -1);
  put(r->top, ".git", "gitdir: nowhere\n");
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), -1);
  free(inner);
  free(wt);
}

static void test_git_dir_not_a_dir(void **state) {
  struct repo *r = *state;
  char *file = xasprintf("%s/f", r->top);
  char *gd = NULL;
  wr_error_t err = {0};

  put(r->top, "f", "x");
  assert_int_equal(wr_cli_clone_git_dir(file, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "not a directory"));
  assert_int_equal(wr_cli_clone_git_dir("/nonexistent/x", &gd, &err), -1);
  free(file);
}

/* A repository inside another sandbox's workspace may be hostile: a FIFO
 * where a file is read never blocks (the alarm fails the test instead),
 * and nothing leads out of the tree. */
static void test_git_dir_hostile(void **state) {
  struct repo *r = *state;
  char *dotgit = xasprintf("%s/.git", r->top);
  char *out = xasprintf("%s-outside", r->top);
  char *p = NULL, *q = NULL, *gd = NULL;
  wr_error_t err = {0};

  alarm(20);
  /* .git itself a FIFO. */
  assert_int_equal(mkfifo(dotgit, 0644), 0);
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "is a fifo"));
  unlink(dotgit);
  /* .git a symlink to a repository outside the tree. */
  git_skeleton(out);
  put(out, "refs/heads/main", OID1 "\n");
  assert_int_equal(symlink(out, dotgit), 0);
  assert_int_equal(wr_cli_clone_git_dir(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "outside"));
  unlink(dotgit);
  /* A real one whose packed-refs is a FIFO and whose refs/heads leads out
   * of the tree: no branch is seen, nothing blocks. */
  git_skeleton(dotgit);
  p = xasprintf("%s/packed-refs", dotgit);
  assert_int_equal(mkfifo(p, 0644), 0);
  free(p);
  p = xasprintf("%s/refs/heads", dotgit);
  q = xasprintf("%s/refs/heads", out);
  assert_int_equal(rmdir(p), 0);
  assert_int_equal(symlink(q, p), 0);
  free(p);
  free(q);
  assert_int_equal(wr_cli_clone_check(r->top, &gd, &err), -1);
  assert_non_null(strstr(err.msg, "has no commits"));
  alarm(0);
  wr_rm_rf(out, NULL);
  free(out);
  free(dotgit);
}

/* ---- rm's check ---------------------------------------------------------- */

static int parse_unfetched(const char *text, struct wr_cli_unfetched **u,
                           size_t *n) {
  wr_error_t err = {0};

  return wr_cli_clone_parse_unfetched(text, strlen(text), u, n, &err);
}

static void test_unfetched_answer(void **state) {
  static const char *const bad[] = {
      "main\n",           "x main\n",
      "0 main\n",         "-1 main\n",
      "2 ma..in\n",       "2 \n",
      "2 main\x1b[31m\n", "99999999999999999999999 main\n",
      "2  main\n"};
  struct wr_cli_unfetched *u = NULL;
  size_t n = 9;
  (void)state;

  assert_int_equal(parse_unfetched("", &u, &n), 0);
  assert_int_equal(n, 0);
  wr_cli_unfetched_free(u, n);
  assert_int_equal(parse_unfetched("2 main\n1 feature/x\n", &u, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(u[0].branch, "main");
  assert_int_equal(u[0].commits, 2);
  assert_string_equal(u[1].branch, "feature/x");
  assert_int_equal(u[1].commits, 1);
  wr_cli_unfetched_free(u, n);
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    if (parse_unfetched(bad[i], &u, &n) != -1)
      fail_msg("accepted `%s`", bad[i]);
    assert_null(u);
  }
  {
    static const char nul[] = "2 main\0x\n";
    wr_error_t err = {0};
    assert_int_equal(
        wr_cli_clone_parse_unfetched(nul, sizeof(nul) - 1, &u, &n, &err), -1);
  }
}

/* ---- text from a sandbox, programs on the host --------------------------- */

static void test_defuse(void **state) {
  static const char in[] = "a\x1b[31mb\n\tc\x7f\xc2\x9b"
                           "d\r\xc3\xa9\xc2";
  wr_buf_t out;
  (void)state;

  wr_buf_init(&out);
  wr_cli_defuse(in, sizeof(in) - 1, &out);
  assert_string_equal(out.data, "a?[31mb\n\tc??d?\xc3\xa9\xc2");
  wr_buf_free(&out);
}

static void test_host_run(void **state) {
  char *echo[] = {"sh", "-c", "echo hello; exit 3", NULL};
  char *big[] = {"sh", "-c", "head -c 100000 /dev/zero", NULL};
  char *missing[] = {"wr-no-such-program", NULL};
  wr_buf_t out;
  struct wr_cli_host_cmd cmd = {
      .argv = echo, .stdin_fd = -1, .out = &out, .max_out = 64};
  wr_error_t err = {0};
  int status = -1;
  (void)state;

  wr_buf_init(&out);
  assert_int_equal(wr_cli_host_run(&cmd, &status, &err), 0);
  assert_int_equal(status, 3);
  assert_string_equal(out.data, "hello\n");
  cmd.argv = big;
  assert_int_equal(wr_cli_host_run(&cmd, &status, &err), -1);
  assert_non_null(strstr(err.msg, "more than 64 bytes"));
  cmd.argv = missing;
  assert_int_equal(wr_cli_host_run(&cmd, &status, &err), -1);
  assert_non_null(strstr(err.msg, "cannot run `wr-no-such-program`"));
  wr_buf_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refname_rules),
      cmocka_unit_test(test_bundle_v2),
      cmocka_unit_test(test_bundle_v3_sha256),
      cmocka_unit_test(test_bundle_hostile),
      cmocka_unit_test(test_bundle_limits),
      cmocka_unit_test(test_bundle_many_refs),
      cmocka_unit_test(test_sandbox_name),
      cmocka_unit_test_setup_teardown(test_git_dir_plain, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_git_dir_packed, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_git_dir_gitfile, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_git_dir_hostile, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_git_dir_not_a_dir, repo_setup,
                                      repo_teardown),
      cmocka_unit_test(test_unfetched_answer),
      cmocka_unit_test(test_defuse),
      cmocka_unit_test(test_host_run),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
