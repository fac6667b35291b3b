/*
 * Unit tests for git-remote-warren's bounded fetch: the limits from git
 * config, git run with its memory and time bounded, the quarantine a
 * pack goes through and git's list of what its objects expand to, and
 * the download's deadline. The packs are git's own (git pack-objects).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "gitremote/gitremote.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* ---- repositories and packs made by git ------------------------------------
 */

static char *tmpdir;

static int repo_setup(void **state) {
  char tmpl[] = "/tmp/wr-gitremote-XXXXXX";
  _cleanup_free_ char *cmd = NULL;
  (void)state;

  assert_non_null(mkdtemp(tmpl));
  tmpdir = xstrdup(tmpl);
  cmd = xasprintf("git init -q '%s' && cd '%s' && git config user.name t && "
                  "git config user.email t@example.invalid",
                  tmpdir, tmpdir);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  cmd = xasprintf("%s/.git", tmpdir);
  setenv("GIT_DIR", cmd, 1);
  return 0;
}

static int repo_teardown(void **state) {
  _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmpdir);
  (void)state;

  unsetenv("GIT_DIR");
  assert_int_equal(system(cmd), 0);
  free(tmpdir);
  return 0;
}

static uint64_t shell_number(const char *cmd) {
  _cleanup_free_ char *full = xasprintf("cd '%s' && %s", tmpdir, cmd);
  FILE *f = popen(full, "r");
  unsigned long long v = 0;

  assert_non_null(f);
  assert_int_equal(fscanf(f, "%llu", &v), 1);
  assert_int_equal(pclose(f), 0);
  return v;
}

/* Run a shell command in dir, a repository of its own (not GIT_DIR's);
 * it must succeed. */
static void run_in(const char *dir, const char *script) {
  _cleanup_free_ char *cmd =
      xasprintf("unset GIT_DIR; cd '%s' && %s", dir, script);

  assert_int_equal(system(cmd), 0);
}

/*
 * A pack by git of everything a fresh repository tmpdir/NAME holds once
 * `script` has run in it, written to tmpdir/NAME.pack; returns its path.
 */
static char *make_pack(const char *name, const char *script) {
  _cleanup_free_ char *src = xasprintf("%s/%s", tmpdir, name);
  char *pack = xasprintf("%s/%s.pack", tmpdir, name);
  _cleanup_free_ char *cmd = xasprintf(
      "git cat-file --batch-all-objects --batch-check='%%(objectname)'"
      " | git pack-objects -q --stdout > '%s'",
      pack);

  assert_int_equal(mkdir(src, 0700), 0);
  run_in(src, "git init -q && git config user.name t && "
              "git config user.email t@example.invalid");
  run_in(src, script);
  run_in(src, cmd);
  return pack;
}

/* ---- limits from git config -----------------------------------------------
 */

#define CONFIG(s) s, sizeof(s) - 1

static void test_limits_defaults_and_config(void **state) {
  struct wr_fetch_limits l;
  wr_error_t err = {0};
  (void)state;

  wr_fetch_limits_default(&l);
  assert_int_equal(l.max_object, 256 * MiB);
  assert_int_equal(l.max_total, 4 * GiB);
  assert_int_equal(l.max_memory, 768 * MiB);
  assert_int_equal(l.timeout_ms, 300000);
  assert_false(l.memory_set);
  /* Keys as git prints them (lower case), the last one winning, others
   * ignored; memory follows the object limit unless it is set. */
  assert_int_equal(wr_fetch_limits_parse(CONFIG("warren.maxobjectsize\n1g\0"
                                                "warren.somethingelse\nx\0"
                                                "warren.maxtotalsize\n8g\0"
                                                "warren.maxtotalsize\n10G\0"
                                                "warren.fetchtimeout\n90s\0"),
                                         &l, &err),
                   0);
  assert_int_equal(l.max_object, 1 * GiB);
  assert_int_equal(l.max_total, 10 * GiB);
  assert_int_equal(l.max_memory, 2 * GiB + 256 * MiB);
  assert_false(l.memory_set);
  assert_int_equal(l.timeout_ms, 90000);
  wr_fetch_limits_default(&l);
  assert_int_equal(wr_fetch_limits_parse(CONFIG("warren.maxMemory\n100m\0"
                                                "warren.fetchTimeout\n5m\0"),
                                         &l, &err),
                   0);
  assert_int_equal(l.max_memory, 100 * MiB);
  assert_true(l.memory_set);
  assert_int_equal(l.timeout_ms, 300000);
  /* Once set, a later object limit leaves it as it is. */
  assert_int_equal(
      wr_fetch_limits_parse(CONFIG("warren.maxobjectsize\n1g\0"), &l, &err), 0);
  assert_int_equal(l.max_memory, 100 * MiB);
  assert_int_equal(wr_fetch_limits_parse("", 0, &l, &err), 0);
}

static void test_limits_bad_values_name_the_key(void **state) {
  static const struct {
    const char *text;
    size_t len;
    const char *says;
  } bad[] = {
      {CONFIG("warren.maxobjectsize\nlots\0"), "warren.maxObjectSize"},
      {CONFIG("warren.maxtotalsize\n-1\0"), "warren.maxTotalSize"},
      {CONFIG("warren.maxmemory\n1m\0"), "at least 32.0 MiB"},
      {CONFIG("warren.fetchtimeout\n10ms\0"), "at least 1 s"},
      {CONFIG("warren.fetchtimeout\nsoon\0"), "warren.fetchTimeout"},
      {CONFIG("warren.maxobjectsize\n0\0"), "warren.maxObjectSize"},
      {CONFIG("warren.maxobjectsize\0"), "needs a value"},
      {CONFIG("warren.maxobjectsize\n1g"), "unexpected output"},
  };
  struct wr_fetch_limits l;
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    wr_error_t err = {0};
    wr_fetch_limits_default(&l);
    if (wr_fetch_limits_parse(bad[i].text, bad[i].len, &l, &err) == 0)
      fail_msg("accepted entry %zu", i);
    if (strstr(err.msg, bad[i].says) == NULL)
      fail_msg("entry %zu: `%s` does not say `%s`", i, err.msg, bad[i].says);
  }
}

/* What the repository's config says, read by git. */
static void test_limits_read_from_the_repository(void **state) {
  _cleanup_free_ char *cmd =
      xasprintf("git -C '%s' config warren.maxObjectSize 3m && "
                "git -C '%s' config warren.fetchTimeout 2m",
                tmpdir, tmpdir);
  struct wr_fetch_limits l;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_fetch_limits_read(&l, &err), 0);
  assert_int_equal(l.max_object, 256 * MiB);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(wr_fetch_limits_read(&l, &err), 0);
  assert_int_equal(l.max_object, 3 * MiB);
  assert_int_equal(l.max_memory, 6 * MiB + 256 * MiB);
  assert_int_equal(l.timeout_ms, 120000);
}

/* ---- git, bounded ----------------------------------------------------------
 */

extern char **environ;

static void test_bounded_output_and_status(void **state) {
  char *argv[] = {"sh", "-c",
                  "echo out; echo err >&2; echo \"$GIT_ALLOC_LIMIT\"; "
                  "grep 'Max data size' /proc/self/limits; exit 3",
                  NULL};
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .env = environ,
                               .stdin_fd = -1,
                               .out = &out,
                               .max_out = 4096,
                               .errout = &errout,
                               .max_memory = 100 * MiB};
  struct wr_bounded_exit ex;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_int_equal(ex.status, 3);
  assert_false(ex.timed_out);
  assert_false(ex.out_of_memory);
  assert_non_null(strstr(out.data, "out\n104857600\nMax data size"));
  assert_non_null(strstr(out.data, " 104857600 "));
  assert_string_equal(errout.data, "err\n");
}

/* The deadline kills it, however long it meant to run. */
static void test_bounded_deadline(void **state) {
  char *argv[] = {"sleep", "60", NULL};
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .env = environ,
                               .stdin_fd = -1,
                               .max_memory = 100 * MiB,
                               .deadline_ns = wr_mono_ns() + 300000000ull};
  struct wr_bounded_exit ex;
  uint64_t start = wr_mono_ns();
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_true(ex.timed_out);
  assert_int_equal(ex.status, 128 + SIGKILL);
  assert_true(wr_mono_ns() - start < 10ull * 1000000000);
}

/* When it says it ran in a cgroup of its own, it did, and that cgroup is
 * gone afterwards. */
static void test_bounded_cgroup(void **state) {
  char *argv[] = {"cat", "/proc/self/cgroup", NULL};
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .env = environ,
                               .stdin_fd = -1,
                               .out = &out,
                               .max_out = 65536,
                               .max_memory = 100 * MiB};
  struct wr_bounded_exit ex;
  _cleanup_free_ char *dir = NULL;
  wr_error_t err = {0};
  char *p, *colon, *path;
  struct stat st;
  (void)state;

  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_int_equal(ex.status, 0);
  p = strstr(out.data, "/git-remote-warren.");
  if (!ex.cgroup) {
    assert_null(p);
    if (geteuid() == 0 && access("/sys/fs/cgroup/memory", F_OK) == 0)
      fail_msg("root made no memory cgroup");
    return;
  }
  assert_non_null(p);
  /* Its line, "N:memory:/path" (v1) or "0::/path" (v2). */
  while (p > out.data && p[-1] != '\n')
    p--;
  p[strcspn(p, "\n")] = '\0';
  colon = strchr(p, ':');
  path = strchr(colon + 1, ':') + 1;
  dir = strncmp(colon, ":memory:", 8) == 0
            ? xasprintf("/sys/fs/cgroup/memory%s", path)
            : xasprintf("/sys/fs/cgroup%s", path);
  assert_int_equal(stat(dir, &st), -1);
  assert_int_equal(errno, ENOENT);
}

/* Stdout piece by piece, past what one read gives; and a command whose
 * output is refused is killed, however much it meant to print. */
struct lines {
  size_t bytes, calls;
  size_t refuse_after; /* 0: never */
};

static int count_out(void *ctx, const char *data, size_t len, wr_error_t *err) {
  struct lines *l = ctx;

  (void)data;
  l->bytes += len;
  l->calls++;
  if (l->refuse_after != 0 && l->bytes > l->refuse_after)
    return wr_error_set(err, 0, "enough");
  return 0;
}

static void test_bounded_streams_stdout(void **state) {
  char *seq[] = {"seq", "1", "200000", NULL};
  char *yes[] = {"yes", NULL};
  struct lines l = {0};
  struct wr_bounded_cmd cmd = {.argv = seq,
                               .env = environ,
                               .stdin_fd = -1,
                               .on_out = count_out,
                               .on_out_ctx = &l,
                               .max_memory = 100 * MiB};
  struct wr_bounded_exit ex;
  uint64_t start;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_int_equal(ex.status, 0);
  assert_int_equal(l.bytes, 1288895); /* `seq 1 200000 | wc -c` */
  assert_true(l.calls > 1);
  l = (struct lines){.refuse_after = 1 << 20};
  cmd.argv = yes;
  start = wr_mono_ns();
  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), -1);
  assert_string_equal(err.msg, "enough");
  assert_int_equal(ex.status, 128 + SIGKILL);
  assert_true(wr_mono_ns() - start < 10ull * 1000000000);
}

/* A 64 MiB blob, a pack of 64 KiB: index-pack allocates it whole, which
 * a memory limit under it refuses; git stops and says why. */
static void test_bounded_memory(void **state) {
  char *argv[] = {"git", "index-pack", "--stdin", NULL};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  _cleanup_free_ char *path =
      make_pack("big", "head -c 64m /dev/zero > big && git add big");
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .env = environ,
                               .stdin_fd = fd,
                               .errout = &errout,
                               .max_memory = 32 * MiB};
  struct wr_bounded_exit ex;
  struct stat st;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(fstat(fd, &st), 0);
  assert_true((uint64_t)st.st_size < 1 * MiB);
  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_int_not_equal(ex.status, 0);
  assert_true(ex.out_of_memory);
  assert_false(ex.timed_out);
  assert_non_null(strstr(errout.data, "over limit"));
  /* With the memory, the same pack goes in. */
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  wr_buf_reset(&errout);
  cmd.max_memory = 256 * MiB;
  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_int_equal(ex.status, 0);
  assert_false(ex.out_of_memory);
}

/* ---- the quarantine ---------------------------------------------------------
 */

static char *objects_listing(void) {
  _cleanup_free_ char *cmd =
      xasprintf("cd '%s/.git/objects' && find . | sort", tmpdir);
  _cleanup_(wr_buf_free) wr_buf_t b = {0};
  FILE *f = popen(cmd, "r");
  char line[4096];

  assert_non_null(f);
  while (fgets(line, sizeof(line), f) != NULL)
    wr_buf_puts(&b, line);
  pclose(f);
  return wr_buf_steal(&b, NULL);
}

/* index-pack of the pack at path into a new quarantine; *hash is the
 * pack's name. Returns its exit status. */
static int index_into(const char *path, struct wr_quarantine *q, char **hash) {
  char *argv[] = {"git",      "index-pack",  "--stdin",
                  "--strict", "--keep=test", NULL};
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct wr_bounded_cmd cmd = {.argv = argv,
                               .stdin_fd = fd,
                               .out = &out,
                               .max_out = 4096,
                               .max_memory = 256 * MiB};
  struct wr_bounded_exit ex;
  wr_error_t err = {0};

  assert_int_equal(wr_quarantine_make(q, &err), 0);
  assert_true(wr_str_has_prefix(q->dir, q->objects));
  assert_non_null(strstr(q->dir, "/tmp_objdir-warren-"));
  cmd.env = q->env;
  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  if (ex.status == 0) {
    assert_true(wr_str_has_prefix(out.data, "keep\t"));
    out.data[strcspn(out.data, "\n")] = '\0';
    *hash = xstrdup(out.data + 5);
  }
  return ex.status;
}

/* index-pack into the quarantine; the pack moves in on commit, with a
 * .keep for git to let go. */
static void test_quarantine_commit(void **state) {
  _cleanup_(wr_quarantine_remove) struct wr_quarantine q = {0};
  _cleanup_(wr_quarantine_remove) struct wr_quarantine q2 = {0};
  _cleanup_free_ char *path = make_pack(
      "one", "printf 'quarantined\\n' | git hash-object -w --stdin >/dev/null");
  _cleanup_free_ char *keep = NULL, *keep2 = NULL, *idx = NULL;
  _cleanup_free_ char *hash = NULL, *hash2 = NULL, *check = NULL;
  struct stat st;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(index_into(path, &q, &hash), 0);
  /* Not in the repository yet. */
  idx = xasprintf("%s/pack/pack-%s.idx", q.objects, hash);
  assert_int_equal(stat(idx, &st), -1);
  assert_int_equal(wr_quarantine_commit(&q, hash, &keep, &err), 0);
  assert_int_equal(stat(idx, &st), 0);
  check = xasprintf("%s/pack/pack-%s.keep", q.objects, hash);
  assert_string_equal(keep, check);
  assert_int_equal(stat(keep, &st), 0);
  free(check);
  check = xasprintf("git -C '%s' cat-file -e $(printf 'quarantined\\n' | "
                    "git hash-object --stdin)",
                    tmpdir);
  assert_int_equal(system(check), 0);
  /* The same pack again: what is there is left as it is, and its .keep
   * is not ours to let go. */
  assert_int_equal(index_into(path, &q2, &hash2), 0);
  assert_string_equal(hash, hash2);
  assert_int_equal(wr_quarantine_commit(&q2, hash2, &keep2, &err), 0);
  assert_null(keep2);
  assert_int_equal(stat(keep, &st), 0);
}

/* Whatever git left in it goes, and the repository is as it was. */
static void test_quarantine_remove_leaves_nothing(void **state) {
  _cleanup_free_ char *before = objects_listing(), *after = NULL;
  _cleanup_free_ char *tmp = NULL, *keep = NULL;
  struct wr_quarantine q;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_quarantine_make(&q, &err), 0);
  tmp = xasprintf("%s/pack/tmp_pack_abc", q.dir);
  assert_int_equal(wr_write_file(tmp, "x", 1, 0444, &err), 0);
  assert_int_equal(wr_quarantine_commit(&q,
                                        "0123456789abcdef0123456789abcdef"
                                        "01234567",
                                        &keep, &err),
                   -1);
  wr_quarantine_remove(&q);
  after = objects_listing();
  assert_string_equal(before, after);
  /* An object id is all index-pack may name. */
  assert_int_equal(wr_quarantine_make(&q, &err), 0);
  assert_int_equal(wr_quarantine_commit(&q, "../../x", &keep, &err), -1);
  wr_quarantine_remove(&q);
}

/* ---- what the objects in it expand to ------------------------------------
 */

/* The same sizes, in pieces split at every place. */
static void test_sizes_read_in_any_pieces(void **state) {
  static const char text[] = "12\n0\n1073741824\n7\n";
  (void)state;

  for (size_t cut = 0; cut <= sizeof(text) - 1; cut++) {
    struct wr_object_sizes s = {0};
    wr_error_t err = {0};
    assert_int_equal(wr_object_sizes_feed(&s, text, cut, &err), 0);
    assert_int_equal(
        wr_object_sizes_feed(&s, text + cut, sizeof(text) - 1 - cut, &err), 0);
    assert_int_equal(wr_object_sizes_end(&s, &err), 0);
    assert_int_equal(s.objects, 4);
    assert_int_equal(s.largest, 1 * GiB);
    assert_int_equal(s.total, 1 * GiB + 19);
  }
}

static void test_sizes_refuse_what_git_does_not_print(void **state) {
  static const char *const bad[] = {
      "12x\n", "\n", "-1\n", "1 2\n", "12345678901234567890\n", "12\r\n",
  };
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    struct wr_object_sizes s = {0};
    wr_error_t err = {0};
    if (wr_object_sizes_feed(&s, bad[i], strlen(bad[i]), &err) == 0)
      fail_msg("accepted `%s`", bad[i]);
    assert_non_null(strstr(err.msg, "unexpected output from git cat-file"));
  }
  /* A line cut short at the end. */
  {
    struct wr_object_sizes s = {0};
    wr_error_t err = {0};
    assert_int_equal(wr_object_sizes_feed(&s, "12\n34", 5, &err), 0);
    assert_int_equal(wr_object_sizes_end(&s, &err), -1);
  }
  /* 19 digits at most, which never wrap; the total saturates. */
  {
    struct wr_object_sizes s = {0};
    wr_error_t err = {0};
    static const char big[] = "9999999999999999999\n9999999999999999999\n";
    assert_int_equal(wr_object_sizes_feed(&s, big, strlen(big), &err), 0);
    assert_int_equal(s.largest, 9999999999999999999ull);
    assert_int_equal(s.total, UINT64_MAX);
  }
}

/*
 * A pack by git of a history that makes deltas (a file grown a line at a
 * time), a 3 MiB blob and a tag, into the quarantine of a repository that
 * has a 5 MiB blob of its own: git lists every object of the pack at its
 * full size (a delta's result, not the delta), and none of the
 * repository's.
 */
static void test_quarantine_measure(void **state) {
  _cleanup_(wr_quarantine_remove) struct wr_quarantine q = {0};
  _cleanup_free_ char *path = make_pack(
      "hist", "for i in $(seq 1 60); do seq 1 $((i * 50)) > f; "
              "git add f; git commit -qm $i; done && "
              "head -c 3m /dev/zero > z && git add z && git commit -qm z && "
              "git tag -a v1 -m v1");
  _cleanup_free_ char *hash = NULL;
  struct wr_object_sizes s;
  struct wr_bounded_exit ex;
  uint64_t objects, total, deltas;
  wr_error_t err = {0};
  (void)state;

  run_in(tmpdir, "export GIT_DIR=.git; head -c 5m /dev/zero > own && "
                 "git add own && git commit -qm own");
  /* The sizes as the source repository has them, loose and whole. */
  objects = shell_number("cd hist && unset GIT_DIR && git cat-file "
                         "--batch-all-objects --batch-check | wc -l");
  total = shell_number("cd hist && unset GIT_DIR && git cat-file "
                       "--batch-all-objects --batch-check='%(objectsize)' | "
                       "awk '{s+=$1} END {print s}'");
  assert_int_equal(index_into(path, &q, &hash), 0);
  deltas = shell_number("git verify-pack -v .git/objects/tmp_objdir-warren-*/"
                        "pack/*.idx | awk 'NF >= 7 && $2 ~ /^(blob|tree|"
                        "commit|tag)$/ {n++} END {print n + 0}'");
  assert_true(deltas >= 30);
  assert_int_equal(wr_quarantine_measure(&q, 256 * MiB, 0, &s, &ex, &err), 0);
  assert_int_equal(ex.status, 0);
  assert_int_equal(s.objects, objects);
  assert_int_equal(s.largest, 3 * MiB);
  assert_int_equal(s.total, total);
  /* Within the fetch's memory and time: past the deadline, git is
   * stopped and says so. */
  assert_int_equal(
      wr_quarantine_measure(&q, 256 * MiB, wr_mono_ns() - 1, &s, &ex, &err), 0);
  assert_true(ex.timed_out);
}

/* ---- the download's deadline ------------------------------------------------
 */

/*
 * A server that answers with a head and the first bytes of a body, then
 * says nothing more: the read past the deadline fails with ETIMEDOUT,
 * within a bound, instead of waiting for ever.
 */
static void test_download_deadline(void **state) {
  static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
                               "\r\n0123456789";
  _cleanup_free_ char *sock = NULL;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  _cleanup_close_ int lfd = -1, sfd = -1;
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  uint64_t start;
  char buf[256];
  ssize_t n;
  wr_error_t err = {0};
  (void)state;

  sock = xasprintf("%s/s", tmpdir);
  wr_strlcpy(sa.sun_path, sock, sizeof(sa.sun_path));
  lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(lfd >= 0);
  assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(lfd, 1), 0);
  assert_int_equal(wr_http_client_open(sock, NULL, &c, &err), 0);
  /* The answer waits in the socket before the request is even sent. */
  sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  assert_true(sfd >= 0);
  assert_int_equal(write(sfd, answer, sizeof(answer) - 1),
                   (ssize_t)sizeof(answer) - 1);
  start = wr_mono_ns();
  wr_http_client_set_deadline(c, start + 300000000ull);
  assert_int_equal(
      wr_http_request_stream(c, "GET", "/x", NULL, NULL, 0, &resp, &err), 0);
  assert_int_equal(resp.status, 200);
  assert_int_equal(wr_http_read_body(c, buf, sizeof(buf), &err), 10);
  n = wr_http_read_body(c, buf, sizeof(buf), &err);
  assert_int_equal(n, -1);
  assert_int_equal(err.code, ETIMEDOUT);
  assert_true(wr_mono_ns() - start >= 300000000ull);
  assert_true(wr_mono_ns() - start < 10ull * 1000000000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_limits_defaults_and_config),
      cmocka_unit_test(test_limits_bad_values_name_the_key),
      cmocka_unit_test_setup_teardown(test_limits_read_from_the_repository,
                                      repo_setup, repo_teardown),
      cmocka_unit_test(test_bounded_output_and_status),
      cmocka_unit_test(test_bounded_streams_stdout),
      cmocka_unit_test(test_bounded_deadline),
      cmocka_unit_test(test_bounded_cgroup),
      cmocka_unit_test_setup_teardown(test_bounded_memory, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_quarantine_commit, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_quarantine_remove_leaves_nothing,
                                      repo_setup, repo_teardown),
      cmocka_unit_test(test_sizes_read_in_any_pieces),
      cmocka_unit_test(test_sizes_refuse_what_git_does_not_print),
      cmocka_unit_test_setup_teardown(test_quarantine_measure, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_download_deadline, repo_setup,
                                      repo_teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
