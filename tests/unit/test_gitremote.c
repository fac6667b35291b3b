/*
 * Unit tests for git-remote-warren's bounded fetch: what a pack expands
 * to (against crafted packs, and against git's own reading of real ones),
 * the limits from git config, git run with its memory and time bounded,
 * and the quarantine a pack goes through.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <zlib.h>

#include "gitremote/gitremote.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* ---- packs made here ------------------------------------------------------
 */

enum { BLOB = 3, OFS_DELTA = 6, REF_DELTA = 7 };

struct pack {
  wr_buf_t b;
  uint32_t count;
};

static void put(struct pack *p, const void *data, size_t n) {
  wr_buf_append(&p->b, data, n);
}

static void put_byte(struct pack *p, unsigned char c) {
  put(p, &c, 1);
}

static void pack_start(struct pack *p) {
  static const unsigned char head[12] = {'P', 'A', 'C', 'K', 0, 0, 0, 2};
  memset(p, 0, sizeof(*p));
  put(p, head, sizeof(head));
}

static void put_entry_header(struct pack *p, int type, uint64_t size) {
  unsigned char c = (unsigned char)(type << 4 | (size & 15));

  for (size >>= 4; size > 0; size >>= 7) {
    put_byte(p, c | 0x80);
    c = size & 0x7f;
  }
  put_byte(p, c);
}

static void put_zlib(struct pack *p, const void *data, size_t n) {
  uLongf zlen = compressBound(n);
  unsigned char *z = xmalloc(zlen);

  assert_int_equal(compress2(z, &zlen, data, n, 9), Z_OK);
  put(p, z, zlen);
  free(z);
}

/* An entry whose header says `size` and whose data is `data`. Returns its
 * offset. */
static size_t entry_sized(struct pack *p, int type, uint64_t size,
                          const void *data, size_t n) {
  size_t at = p->b.len;

  put_entry_header(p, type, size);
  put_zlib(p, data, n);
  p->count++;
  return at;
}

static size_t entry(struct pack *p, int type, const void *data, size_t n) {
  return entry_sized(p, type, n, data, n);
}

static void put_varint(wr_buf_t *b, uint64_t v) {
  for (; v >= 0x80; v >>= 7) {
    unsigned char c = (unsigned char)(v | 0x80);
    wr_buf_append(b, &c, 1);
  }
  unsigned char c = (unsigned char)v;
  wr_buf_append(b, &c, 1);
}

static void put_ofs(struct pack *p, uint64_t ofs) {
  unsigned char b[16];
  size_t pos = sizeof(b) - 1;

  b[pos] = ofs & 127;
  while (ofs >>= 7)
    b[--pos] = (unsigned char)(128 | (--ofs & 127));
  put(p, b + pos, sizeof(b) - pos);
}

/* A delta at the end of the pack on the entry at base_at (of base_size
 * bytes): target bytes copied from its start, in pieces of at most
 * base_size. Returns its offset. */
static size_t delta(struct pack *p, size_t base_at, uint64_t base_size,
                    uint64_t target) {
  _cleanup_(wr_buf_free) wr_buf_t d = {0};
  size_t at = p->b.len;
  uint64_t left = target, chunk = WR_MIN(base_size, 0x800000);

  put_varint(&d, base_size);
  put_varint(&d, target);
  for (; left > 0; left -= WR_MIN(left, chunk)) {
    uint32_t n = (uint32_t)WR_MIN(left, chunk);
    unsigned char cmd = 0x80, sz[3];
    size_t k = 0;
    for (int i = 0; i < 3; i++)
      if ((n >> (8 * i)) & 0xff) {
        cmd |= (unsigned char)(0x10 << i);
        sz[k++] = (unsigned char)(n >> (8 * i));
      }
    wr_buf_append(&d, &cmd, 1);
    wr_buf_append(&d, sz, k);
  }
  put_entry_header(p, OFS_DELTA, d.len);
  put_ofs(p, at - base_at);
  put_zlib(p, d.data, d.len);
  p->count++;
  return at;
}

static void sha1(const void *data, size_t n, unsigned char out[20]) {
  unsigned int len = 20;
  assert_int_equal(EVP_Digest(data, n, out, &len, EVP_sha1(), NULL), 1);
}

/* The count into the header and the hash at the end. */
static void pack_end(struct pack *p) {
  unsigned char h[20];

  p->b.data[8] = (char)(p->count >> 24);
  p->b.data[9] = (char)(p->count >> 16);
  p->b.data[10] = (char)(p->count >> 8);
  p->b.data[11] = (char)p->count;
  sha1(p->b.data, p->b.len, h);
  put(p, h, sizeof(h));
}

/* A blob of zeros expanded to `size` through deltas of 64 B, 4 KiB, 256
 * KiB and 16 MiB: a pack under a KiB. */
static void bomb(struct pack *p, uint64_t size) {
  static const char zeros[64];
  size_t at;

  pack_start(p);
  at = entry(p, BLOB, zeros, sizeof(zeros));
  at = delta(p, at, 64, 4096);
  at = delta(p, at, 4096, 256 << 10);
  at = delta(p, at, 256 << 10, 16 * MiB);
  delta(p, at, 16 * MiB, size);
  pack_end(p);
}

/* ---- scanning them ----------------------------------------------------------
 */

struct memsrc {
  const char *data;
  size_t len, pos, chunk;
};

static ssize_t mem_read(void *ctx, void *buf, size_t len) {
  struct memsrc *m = ctx;
  size_t n = WR_MIN(WR_MIN(len, m->chunk), m->len - m->pos);

  memcpy(buf, m->data + m->pos, n);
  m->pos += n;
  return (ssize_t)n;
}

/* Scan with the given limits, reading in pieces of 1, 7 and 64 KiB bytes
 * (a header split anywhere must read the same); all three agree. */
static int scan(const wr_buf_t *b, uint64_t max_object, uint64_t max_total,
                struct wr_pack_scan *out, wr_error_t *err) {
  static const size_t chunks[] = {65536, 7, 1};
  int r = 0;

  for (size_t i = 0; i < WR_ARRAY_SIZE(chunks); i++) {
    struct memsrc m = {b->data, b->len, 0, chunks[i]};
    struct wr_pack_scan s = {
        .oid_len = 20, .max_object = max_object, .max_total = max_total};
    int ri = wr_pack_scan(&s, mem_read, &m, err);
    if (i > 0) {
      assert_int_equal(ri, r);
      assert_int_equal(s.refused, out->refused);
      assert_int_equal(s.total, out->total);
    }
    r = ri;
    *out = s;
  }
  return r;
}

static void test_scan_counts_what_deltas_expand_to(void **state) {
  struct pack p;
  struct wr_pack_scan s;
  wr_error_t err = {0};
  (void)state;

  bomb(&p, 1 * GiB);
  assert_true(p.b.len < 1024);
  assert_int_equal(scan(&p.b, 2 * GiB, 4 * GiB, &s, &err), 0);
  assert_int_equal(s.refused, WR_PACK_OK);
  assert_int_equal(s.objects, 5);
  assert_int_equal(s.largest, 1 * GiB);
  assert_true(s.total > GiB + 16 * MiB && s.total < GiB + 17 * MiB);
  wr_buf_free(&p.b);
}

static void test_scan_refuses_the_bomb(void **state) {
  struct pack p;
  struct wr_pack_scan s;
  wr_error_t err = {0};
  (void)state;

  bomb(&p, 1 * GiB);
  assert_int_equal(scan(&p.b, 256 * MiB, 4 * GiB, &s, &err), -1);
  assert_int_equal(s.refused, WR_PACK_OBJECT_LIMIT);
  assert_int_equal(s.largest, 1 * GiB);
  assert_int_equal(s.objects, 4);
  /* Or by the total, for a limit per object that lets it through. */
  assert_int_equal(scan(&p.b, 2 * GiB, 512 * MiB, &s, &err), -1);
  assert_int_equal(s.refused, WR_PACK_TOTAL_LIMIT);
  wr_buf_free(&p.b);
}

/* An object's header alone decides: its data is never inflated (here
 * there is none to inflate). */
static void test_scan_refuses_before_inflating(void **state) {
  struct pack p;
  struct wr_pack_scan s;
  wr_error_t err = {0};
  (void)state;

  pack_start(&p);
  put_entry_header(&p, BLOB, 1ull << 40);
  p.count = 1;
  pack_end(&p);
  assert_int_equal(scan(&p.b, 256 * MiB, 4 * GiB, &s, &err), -1);
  assert_int_equal(s.refused, WR_PACK_OBJECT_LIMIT);
  assert_int_equal(s.largest, 1ull << 40);
  wr_buf_free(&p.b);
}

/* Many objects under the limit each, over it together. */
static void test_scan_refuses_many_over_the_total(void **state) {
  static const char zeros[4096];
  struct pack p;
  struct wr_pack_scan s;
  wr_error_t err = {0};
  (void)state;

  pack_start(&p);
  for (int i = 0; i < 100; i++)
    entry(&p, BLOB, zeros, sizeof(zeros));
  pack_end(&p);
  assert_int_equal(scan(&p.b, 4096, 100 * 4096, &s, &err), 0);
  assert_int_equal(s.total, 100 * 4096);
  assert_int_equal(scan(&p.b, 4096, 100 * 4096 - 1, &s, &err), -1);
  assert_int_equal(s.refused, WR_PACK_TOTAL_LIMIT);
  assert_int_equal(s.objects, 99);
  assert_int_equal(scan(&p.b, 4095, 1 * GiB, &s, &err), -1);
  assert_int_equal(s.refused, WR_PACK_OBJECT_LIMIT);
  wr_buf_free(&p.b);
}

/* A pack changed by one step from a valid one: each is refused as
 * malformed, never read more generously than git reads it. */
static void expect_malformed(struct pack *p, const char *what,
                             const char *says) {
  struct wr_pack_scan s;
  wr_error_t err = {0};

  if (scan(&p->b, 1 * GiB, 4 * GiB, &s, &err) == 0)
    fail_msg("accepted: %s", what);
  if (s.refused != WR_PACK_MALFORMED)
    fail_msg("%s: refused as %d (%s)", what, s.refused, err.msg);
  assert_non_null(strstr(err.msg, "the pack is malformed"));
  if (strstr(err.msg, says) == NULL)
    fail_msg("%s: `%s` does not say `%s`", what, err.msg, says);
  wr_buf_free(&p->b);
}

static void test_scan_refuses_malformed_packs(void **state) {
  static const char data[] = "hello";
  unsigned char junk[20] = {0};
  struct pack p;
  size_t at;
  (void)state;

  pack_start(&p);
  p.b.data[0] = 'X';
  expect_malformed(&p, "signature", "does not start with PACK");
  pack_start(&p);
  p.b.data[7] = 4;
  expect_malformed(&p, "version 4", "version is not 2 or 3");
  pack_start(&p);
  entry(&p, 5, data, 5);
  pack_end(&p);
  expect_malformed(&p, "type 5", "unknown type");
  pack_start(&p);
  entry(&p, BLOB, data, 5);
  pack_end(&p);
  p.b.len -= 21;
  expect_malformed(&p, "cut short", "cut short");
  pack_start(&p);
  entry(&p, BLOB, data, 5);
  pack_end(&p);
  put(&p, "x", 1);
  expect_malformed(&p, "junk after the trailer", "junk after its end");
  pack_start(&p);
  entry_sized(&p, BLOB, 4, data, 5);
  pack_end(&p);
  expect_malformed(&p, "data longer than the header", "longer than its header");
  pack_start(&p);
  entry_sized(&p, BLOB, 6, data, 5);
  pack_end(&p);
  expect_malformed(&p, "data shorter than the header",
                   "shorter than its header");
  pack_start(&p);
  put(&p, "\xb3\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11);
  p.count = 1;
  pack_end(&p);
  expect_malformed(&p, "size varint past 64 bits", "size overflows");
  pack_start(&p);
  at = entry(&p, BLOB, data, 5);
  (void)at;
  put_entry_header(&p, OFS_DELTA, 8);
  put_ofs(&p, 1000);
  put_zlib(&p, "\x05\x05\x90\x05\x00\x00\x00\x00", 8);
  p.count++;
  pack_end(&p);
  expect_malformed(&p, "a base before the pack", "base is outside the pack");
  pack_start(&p);
  at = entry(&p, BLOB, data, 5);
  put_entry_header(&p, OFS_DELTA, 4);
  put_ofs(&p, p.b.len - 1 - at);
  put_zlib(&p, "\x05\x80\x80\x80", 4);
  p.count++;
  pack_end(&p);
  expect_malformed(&p, "a delta header cut short",
                   "delta's header is cut short");
  pack_start(&p);
  put_entry_header(&p, REF_DELTA, 4);
  put(&p, junk, 10);
  p.count = 1;
  expect_malformed(&p, "a base id cut short", "cut short");
  pack_start(&p);
  put_entry_header(&p, BLOB, 5);
  put(&p, "\x78\x9c\xff\xff\xff\xff", 6);
  p.count = 1;
  pack_end(&p);
  expect_malformed(&p, "corrupt zlib", "zlib data is corrupt");
}

static void test_scan_stops_at_the_deadline(void **state) {
  struct pack p;
  struct memsrc m;
  struct wr_pack_scan s = {
      .oid_len = 20, .max_object = 2 * GiB, .max_total = 4 * GiB};
  wr_error_t err = {0};
  (void)state;

  bomb(&p, 1 * GiB);
  m = (struct memsrc){p.b.data, p.b.len, 0, 65536};
  s.deadline_ns = wr_mono_ns() - 1;
  assert_int_equal(wr_pack_scan(&s, mem_read, &m, &err), -1);
  assert_int_equal(s.refused, WR_PACK_TIMEOUT);
  wr_buf_free(&p.b);
}

/* ---- against git's own packs ----------------------------------------------
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

/* A repository whose history makes deltas (a file grown a line at a
 * time), repacked: our total is git's sizes of every object plus the
 * sizes of the deltas' data, as verify-pack lists them. */
static void test_scan_agrees_with_git(void **state) {
  _cleanup_free_ char *cmd = NULL, *pack = NULL, *data = NULL;
  struct memsrc m = {0};
  struct wr_pack_scan s = {
      .oid_len = 20, .max_object = 1 * GiB, .max_total = 4 * GiB};
  wr_error_t err = {0};
  uint64_t objects, sizes, deltas;
  size_t len;
  (void)state;

  cmd = xasprintf("cd '%s' && for i in $(seq 1 60); do seq 1 $((i * 50)) > f; "
                  "echo $i > g.$((i %% 7)); git add -A; git commit -qm $i; "
                  "done && git tag -a v1 -m v1 && git repack -adq",
                  tmpdir);
  assert_int_equal(system(cmd), 0);
  objects = shell_number("git count-objects -v | sed -n 's/^in-pack: //p'");
  sizes = shell_number("git cat-file --batch-all-objects "
                       "--batch-check='%(objectsize)' | awk '{s+=$1} END "
                       "{print s}'");
  deltas = shell_number("git verify-pack -v .git/objects/pack/*.idx | awk "
                        "'NF >= 7 && $2 ~ /^(blob|tree|commit|tag)$/ "
                        "{d+=$3; n++} END {if (n < 10) exit 1; print d}'");
  free(cmd);
  cmd = xasprintf("ls %s/.git/objects/pack/*.pack", tmpdir);
  {
    FILE *f = popen(cmd, "r");
    char path[4096];
    assert_non_null(fgets(path, sizeof(path), f));
    pclose(f);
    path[strcspn(path, "\n")] = '\0';
    pack = xstrdup(path);
  }
  assert_int_equal(wr_read_file(pack, 1 << 26, &data, &len, &err), 0);
  m = (struct memsrc){data, len, 0, 4096};
  assert_int_equal(wr_pack_scan(&s, mem_read, &m, &err), 0);
  assert_int_equal(s.objects, objects);
  assert_int_equal(s.total, sizes + deltas);
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
  assert_int_equal(l.timeout_ms, 90000);
  wr_fetch_limits_default(&l);
  assert_int_equal(wr_fetch_limits_parse(CONFIG("warren.maxMemory\n100m\0"
                                                "warren.fetchTimeout\n5m\0"),
                                         &l, &err),
                   0);
  assert_int_equal(l.max_memory, 100 * MiB);
  assert_int_equal(l.timeout_ms, 300000);
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

/* A delta bomb under a memory limit: git stops, and says why. */
static void test_bounded_memory(void **state) {
  char *argv[] = {"git", "index-pack", "--stdin", NULL};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  _cleanup_free_ char *path = xasprintf("%s/bomb.pack", tmpdir);
  _cleanup_close_ int fd = -1;
  struct wr_bounded_cmd cmd = {
      .argv = argv, .env = environ, .errout = &errout, .max_memory = 64 * MiB};
  struct wr_bounded_exit ex;
  struct pack p;
  wr_error_t err = {0};
  (void)state;

  bomb(&p, 512 * MiB);
  assert_int_equal(wr_write_file(path, p.b.data, p.b.len, 0600, &err), 0);
  wr_buf_free(&p.b);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  cmd.stdin_fd = fd;
  assert_int_equal(wr_bounded_run(&cmd, &ex, &err), 0);
  assert_int_not_equal(ex.status, 0);
  assert_true(ex.out_of_memory);
  assert_false(ex.timed_out);
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
  static const char data[] = "quarantined\n";
  _cleanup_(wr_quarantine_remove) struct wr_quarantine q = {0};
  _cleanup_(wr_quarantine_remove) struct wr_quarantine q2 = {0};
  _cleanup_free_ char *path = xasprintf("%s/one.pack", tmpdir);
  _cleanup_free_ char *keep = NULL, *keep2 = NULL, *idx = NULL;
  _cleanup_free_ char *hash = NULL, *hash2 = NULL, *check = NULL;
  struct pack p;
  struct stat st;
  wr_error_t err = {0};
  (void)state;

  pack_start(&p);
  entry(&p, BLOB, data, sizeof(data) - 1);
  pack_end(&p);
  assert_int_equal(wr_write_file(path, p.b.data, p.b.len, 0600, &err), 0);
  wr_buf_free(&p.b);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scan_counts_what_deltas_expand_to),
      cmocka_unit_test(test_scan_refuses_the_bomb),
      cmocka_unit_test(test_scan_refuses_before_inflating),
      cmocka_unit_test(test_scan_refuses_many_over_the_total),
      cmocka_unit_test(test_scan_refuses_malformed_packs),
      cmocka_unit_test(test_scan_stops_at_the_deadline),
      cmocka_unit_test_setup_teardown(test_scan_agrees_with_git, repo_setup,
                                      repo_teardown),
      cmocka_unit_test(test_limits_defaults_and_config),
      cmocka_unit_test(test_limits_bad_values_name_the_key),
      cmocka_unit_test_setup_teardown(test_limits_read_from_the_repository,
                                      repo_setup, repo_teardown),
      cmocka_unit_test(test_bounded_output_and_status),
      cmocka_unit_test(test_bounded_deadline),
      cmocka_unit_test(test_bounded_cgroup),
      cmocka_unit_test_setup_teardown(test_bounded_memory, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_quarantine_commit, repo_setup,
                                      repo_teardown),
      cmocka_unit_test_setup_teardown(test_quarantine_remove_leaves_nothing,
                                      repo_setup, repo_teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
