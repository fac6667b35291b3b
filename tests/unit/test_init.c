/*
 * Unit tests for src/init: the protocol's encoders, decoders and transport,
 * then the real warren-init binary, started as a child with a listening
 * socket on fd 3 and driven through the protocol as the daemon would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "init/init.h"

#define TIMEOUT_MS 5000
#define HDR_SIZE sizeof(struct wr_init_hdr)
/* Offsets in SPAWN's fixed part (see init.h). */
#define SPAWN_NGROUPS 12
#define SPAWN_ARGC 20
#define SPAWN_ENVC 24
#define SPAWN_FIXED 28
/* Docker's default capability set, as /proc/PID/status prints it. */
#define DOCKER_CAPS 0xa80425fbULL

static const char *const test_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                       "LC_ALL=C", NULL};

/* ---- helpers: protocol ------------------------------------------------ */

static size_t count_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  size_t n = 0;

  assert_non_null(d);
  while (readdir(d) != NULL)
    n++;
  closedir(d);
  return n;
}

static void close_all(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

static struct wr_init_spawn sample_spawn(void) {
  static const char *argv[] = {"sh", "-c", "echo hi", NULL};
  static const char *env[] = {"PATH=/bin", "A=b=c", NULL};
  struct wr_init_spawn s = {
      .flags = WR_SPAWN_BACKGROUND,
      .uid = 1000,
      .gid = 1001,
      .ngroups = 2,
      .groups = {5, 6},
      .tag = "build",
      .cwd = "/work",
      .argc = 3,
      .envc = 2,
      .argv = argv,
      .env = env,
  };
  return s;
}

/* Encode sample_spawn() and return its payload in b (header dropped). */
static void sample_spawn_payload(wr_buf_t *b) {
  struct wr_init_spawn s = sample_spawn();

  wr_buf_init(b);
  assert_int_equal(wr_init_encode_spawn(b, 1, &s, 5, NULL), 0);
  wr_buf_consume(b, HDR_SIZE);
}

static int decode_spawn_bytes(const wr_buf_t *b) {
  struct wr_init_spawn d;
  wr_error_t err = {0};
  int r = wr_init_decode_spawn(b->data, b->len, &d, &err);

  if (r == 0) {
    free(d.argv);
    free(d.env);
  } else {
    assert_int_equal(err.code, EINVAL);
  }
  return r;
}

static void patch_u32(wr_buf_t *b, size_t off, uint32_t v) {
  memcpy(b->data + off, &v, 4);
}

static struct wr_init_proc sample_proc(uint32_t id, uint32_t flags,
                                       bool has_fds) {
  struct wr_init_proc p = {
      .proc_id = id,
      .pid = (int32_t)(100 + id),
      .flags = flags,
      .running = 1,
      .has_fds = has_fds,
      .status = 0,
      .started_ms = 1700000000000LL + id,
  };
  snprintf(p.tag, sizeof(p.tag), "tag-%u", id);
  snprintf(p.cmd, sizeof(p.cmd), "sleep %u", id);
  return p;
}

/* ---- protocol: round trips -------------------------------------------- */

static void test_spawn_roundtrip(void **state) {
  struct wr_init_spawn s = sample_spawn(), d;
  struct wr_init_hdr hdr;
  const void *payload;
  wr_error_t err = {0};
  wr_buf_t b;
  (void)state;

  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_spawn(&b, 42, &s, 5, &err), 0);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 5, &hdr, &payload, &err),
                   0);
  assert_int_equal(hdr.type, WR_INIT_SPAWN);
  assert_int_equal(hdr.id, 42);
  assert_int_equal(hdr.nfds, 5);
  assert_int_equal(wr_init_decode_spawn(payload, hdr.len, &d, &err), 0);
  assert_int_equal(d.flags, WR_SPAWN_BACKGROUND);
  assert_int_equal(d.uid, 1000);
  assert_int_equal(d.gid, 1001);
  assert_int_equal(d.ngroups, 2);
  assert_int_equal(d.groups[0], 5);
  assert_int_equal(d.groups[1], 6);
  assert_string_equal(d.tag, "build");
  assert_string_equal(d.cwd, "/work");
  assert_int_equal(d.argc, 3);
  assert_string_equal(d.argv[2], "echo hi");
  assert_null(d.argv[3]);
  assert_int_equal(d.envc, 2);
  assert_string_equal(d.env[1], "A=b=c");
  assert_null(d.env[2]);
  assert_int_equal(wr_init_spawn_nfds(d.flags), 5);
  free(d.argv);
  free(d.env);
  wr_buf_free(&b);
}

static void test_spawn_tty_roundtrip(void **state) {
  static const char *argv[] = {"bash", NULL};
  struct wr_init_spawn s = {.flags = WR_SPAWN_TTY,
                            .rows = 40,
                            .cols = 120,
                            .tag = "",
                            .cwd = "/",
                            .argc = 1,
                            .argv = argv};
  struct wr_init_spawn d;
  struct wr_init_hdr hdr;
  const void *payload;
  wr_buf_t b;
  (void)state;

  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_spawn(&b, 3, &s, 0, NULL), 0);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 0, &hdr, &payload, NULL),
                   0);
  assert_int_equal(wr_init_decode_spawn(payload, hdr.len, &d, NULL), 0);
  assert_int_equal(d.rows, 40);
  assert_int_equal(d.cols, 120);
  assert_string_equal(d.tag, "");
  assert_int_equal(d.envc, 0);
  assert_null(d.env[0]);
  assert_int_equal(wr_init_spawn_nfds(d.flags), 0);
  assert_int_equal(wr_init_spawn_nfds(0), 3);
  free(d.argv);
  free(d.env);
  wr_buf_free(&b);
}

/* Encode a fixed payload, decode it back and compare the bytes. */
static void roundtrip_fixed(uint16_t type, const void *in, size_t size) {
  char out[64];
  struct wr_init_hdr hdr;
  const void *payload;
  wr_buf_t b;

  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_simple(&b, type, 9, in, (uint32_t)size, 0),
                   0);
  assert_int_equal(b.len, HDR_SIZE + size);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 0, &hdr, &payload, NULL),
                   0);
  assert_int_equal(hdr.type, type);
  assert_int_equal(hdr.id, 9);
  assert_int_equal(wr_init_decode_fixed(payload, hdr.len, out, size, NULL), 0);
  assert_memory_equal(out, in, size);
  wr_buf_free(&b);
}

static void test_fixed_roundtrips(void **state) {
  struct wr_init_signal sig = {7, SIGTERM, WR_SIGNAL_GROUP};
  struct wr_init_forget forget = {8};
  struct wr_init_result result = {ESRCH};
  struct wr_init_hello_ok hello = {WR_INIT_VERSION, 3};
  struct wr_init_exit ex = {4, 99, 0x0f00};
  (void)state;

  roundtrip_fixed(WR_INIT_SIGNAL, &sig, sizeof(sig));
  roundtrip_fixed(WR_INIT_FORGET, &forget, sizeof(forget));
  roundtrip_fixed(WR_INIT_RESULT, &result, sizeof(result));
  roundtrip_fixed(WR_INIT_HELLO_OK, &hello, sizeof(hello));
  roundtrip_fixed(WR_INIT_EXIT, &ex, sizeof(ex));
  roundtrip_fixed(WR_INIT_HELLO, NULL, 0);
  roundtrip_fixed(WR_INIT_LIST, NULL, 0);
}

static void test_spawned_roundtrip(void **state) {
  struct wr_init_spawned ok = {0, 1234, 5, ""}, fail = {ENOENT, 0, 0, "exec"};
  struct wr_init_spawned d;
  struct wr_init_hdr hdr;
  const void *payload;
  wr_buf_t b;
  (void)state;

  wr_buf_init(&b);
  assert_int_equal(
      wr_init_encode_simple(&b, WR_INIT_SPAWNED, 2, &ok, sizeof(ok), 1), 0);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 1, &hdr, &payload, NULL),
                   0);
  assert_int_equal(wr_init_decode_spawned(payload, hdr.len, &d, NULL), 0);
  assert_int_equal(d.pid, 1234);
  assert_int_equal(d.proc_id, 5);
  assert_int_equal(wr_init_decode_spawned(&fail, sizeof(fail), &d, NULL), 0);
  assert_int_equal(d.err, ENOENT);
  assert_string_equal(d.stage, "exec");
  wr_buf_free(&b);
}

static void test_listed_roundtrip(void **state) {
  struct wr_init_proc procs[3] = {
      sample_proc(1, 0, false),
      sample_proc(2, WR_SPAWN_BACKGROUND, true),
      sample_proc(3, WR_SPAWN_BACKGROUND | WR_SPAWN_TTY, true),
  };
  struct wr_init_listed l;
  struct wr_init_hdr hdr;
  const void *payload;
  wr_error_t err = {0};
  wr_buf_t b;
  (void)state;

  procs[0].running = 0;
  procs[0].status = 0x0100;
  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_listed(&b, 11, procs, 3, true, 3, &err), 0);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 3, &hdr, &payload, &err),
                   0);
  assert_int_equal(hdr.type, WR_INIT_LISTED);
  assert_int_equal(wr_init_decode_listed(payload, hdr.len, &l, &err), 0);
  assert_int_equal(l.count, 3);
  assert_int_equal(l.more, 1);
  assert_int_equal(wr_init_listed_nfds(&l), 3);
  assert_int_equal(l.procs[0].running, 0);
  assert_int_equal(l.procs[0].status, 0x0100);
  assert_int_equal(l.procs[2].pid, 103);
  assert_int_equal(l.procs[2].started_ms, 1700000000003LL);
  assert_string_equal(l.procs[1].tag, "tag-2");
  assert_string_equal(l.procs[2].cmd, "sleep 3");
  free(l.procs);
  wr_buf_free(&b);
}

static void test_listed_limits(void **state) {
  size_t max = WR_INIT_LISTED_MAX;
  struct wr_init_proc *procs = calloc(max + 1, sizeof(*procs));
  struct wr_init_proc one = sample_proc(1, 0, false);
  struct wr_init_listed l;
  struct wr_init_hdr hdr;
  const void *payload;
  wr_error_t err = {0};
  wr_buf_t b;
  (void)state;

  for (size_t i = 0; i <= max; i++)
    procs[i] = sample_proc((uint32_t)i + 1, 0, false);
  wr_buf_init(&b);
  assert_int_equal(
      wr_init_encode_listed(&b, 1, procs, (uint32_t)max, false, 0, &err), 0);
  assert_true(b.len <= WR_INIT_MAX_MSG);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 0, &hdr, &payload, &err),
                   0);
  assert_int_equal(wr_init_decode_listed(payload, hdr.len, &l, &err), 0);
  assert_int_equal(l.count, max);
  free(l.procs);
  wr_buf_reset(&b);
  assert_int_equal(
      wr_init_encode_listed(&b, 1, procs, (uint32_t)max + 1, false, 0, &err),
      -1);
  assert_int_equal(err.code, EMSGSIZE);
  /* An empty list is one datagram with no entries. */
  assert_int_equal(wr_init_encode_listed(&b, 1, NULL, 0, false, 0, &err), 0);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 0, &hdr, &payload, &err),
                   0);
  assert_int_equal(wr_init_decode_listed(payload, hdr.len, &l, &err), 0);
  assert_int_equal(l.count, 0);
  /* The fds announced must be the fds attached. */
  wr_buf_reset(&b);
  one.flags = WR_SPAWN_BACKGROUND;
  one.has_fds = 1;
  assert_int_equal(wr_init_encode_listed(&b, 1, &one, 1, false, 1, &err), -1);
  assert_int_equal(err.code, EINVAL);
  assert_int_equal(b.len, 0);
  free(procs);
  wr_buf_free(&b);
}

/* ---- protocol: rejections --------------------------------------------- */

static void test_hdr_rejects(void **state) {
  struct wr_init_result res = {0};
  struct wr_init_hdr hdr;
  const void *payload;
  wr_error_t err = {0};
  char *big;
  wr_buf_t b;
  (void)state;

  wr_buf_init(&b);
  assert_int_equal(
      wr_init_encode_simple(&b, WR_INIT_RESULT, 1, &res, sizeof(res), 0), 0);
  /* Truncated: shorter than a header, or than the header says. */
  assert_int_equal(wr_init_decode_hdr(b.data, 10, 0, &hdr, &payload, &err), -1);
  assert_int_equal(
      wr_init_decode_hdr(b.data, b.len - 1, 0, &hdr, &payload, &err), -1);
  /* Fds that were announced but did not come, or the reverse. */
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 1, &hdr, &payload, &err),
                   -1);
  /* Wrong magic. */
  b.data[0] ^= 0x55;
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 0, &hdr, &payload, &err),
                   -1);
  assert_non_null(strstr(err.msg, "magic"));
  b.data[0] ^= 0x55;
  /* Unknown type. */
  hdr.type = 77;
  memcpy(b.data + 4, &hdr.type, 2);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 0, &hdr, &payload, &err),
                   -1);
  /* A type that never carries fds, announcing and bringing one. */
  hdr.type = WR_INIT_HELLO;
  hdr.nfds = 1;
  memcpy(b.data + 4, &hdr.type, 2);
  memcpy(b.data + 6, &hdr.nfds, 2);
  assert_int_equal(wr_init_decode_hdr(b.data, b.len, 1, &hdr, &payload, &err),
                   -1);
  /* Oversized: more than WR_INIT_MAX_MSG, with a header that agrees. */
  big = calloc(1, WR_INIT_MAX_MSG + 1);
  hdr = (struct wr_init_hdr){WR_INIT_MAGIC, WR_INIT_RESULT, 0, 1,
                             WR_INIT_MAX_MSG + 1 - HDR_SIZE};
  memcpy(big, &hdr, HDR_SIZE);
  assert_int_equal(
      wr_init_decode_hdr(big, WR_INIT_MAX_MSG + 1, 0, &hdr, &payload, &err),
      -1);
  free(big);
  wr_buf_free(&b);
}

static void test_spawn_decode_rejects(void **state) {
  wr_buf_t b;
  (void)state;

  sample_spawn_payload(&b);
  assert_int_equal(decode_spawn_bytes(&b), 0);
  /* Missing NUL: the last env string runs to the end of the payload. */
  b.data[b.len - 1] = 'x';
  assert_int_equal(decode_spawn_bytes(&b), -1);
  b.data[b.len - 1] = '\0';
  /* Counts that do not match the strings present. */
  patch_u32(&b, SPAWN_ENVC, 3);
  assert_int_equal(decode_spawn_bytes(&b), -1);
  patch_u32(&b, SPAWN_ENVC, 1);
  assert_int_equal(decode_spawn_bytes(&b), -1); /* a string left over */
  patch_u32(&b, SPAWN_ENVC, 2);
  patch_u32(&b, SPAWN_ARGC, 0);
  assert_int_equal(decode_spawn_bytes(&b), -1);
  patch_u32(&b, SPAWN_ARGC, WR_INIT_MAX_ARGS + 1);
  assert_int_equal(decode_spawn_bytes(&b), -1);
  patch_u32(&b, SPAWN_ARGC, 3);
  patch_u32(&b, SPAWN_NGROUPS, WR_INIT_MAX_GROUPS + 1);
  assert_int_equal(decode_spawn_bytes(&b), -1);
  patch_u32(&b, SPAWN_NGROUPS, 2);
  patch_u32(&b, 0, 1u << 7); /* unknown flag */
  assert_int_equal(decode_spawn_bytes(&b), -1);
  patch_u32(&b, 0, 0);
  assert_int_equal(decode_spawn_bytes(&b), 0);
  /* Truncated inside the fixed part and inside the strings. */
  b.len = SPAWN_FIXED - 1;
  assert_int_equal(decode_spawn_bytes(&b), -1);
  b.len = SPAWN_FIXED + 8 + 3;
  assert_int_equal(decode_spawn_bytes(&b), -1);
  b.len = 0;
  assert_int_equal(decode_spawn_bytes(&b), -1);
  wr_buf_free(&b);
}

/* Strings that break the rules for their role. */
static void test_spawn_string_rules(void **state) {
  static const char *noeq[] = {"NOEQUALS", NULL};
  static const char *empty0[] = {"", NULL};
  static const char *huge_argv[2];
  char tag[WR_INIT_TAG_MAX + 2];
  struct wr_init_spawn s = sample_spawn();
  wr_error_t err = {0};
  wr_buf_t b;
  char *huge;
  (void)state;

  wr_buf_init(&b);
  memset(tag, 'a', sizeof(tag) - 1);
  tag[sizeof(tag) - 1] = '\0';
  s.tag = tag;
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 5, &err), -1);
  assert_int_equal(err.code, EINVAL);
  s = sample_spawn();
  s.cwd = "";
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 5, &err), -1);
  s = sample_spawn();
  s.env = noeq;
  s.envc = 1;
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 5, &err), -1);
  s = sample_spawn();
  s.argv = empty0;
  s.argc = 1;
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 5, &err), -1);
  s = sample_spawn();
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 3, &err), -1); /* fds */
  s.argc = 0;
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 5, &err), -1);
  /* Too big for one datagram. */
  huge = malloc(WR_INIT_MAX_MSG + 1);
  memset(huge, 'x', WR_INIT_MAX_MSG);
  huge[WR_INIT_MAX_MSG] = '\0';
  huge_argv[0] = huge;
  s = sample_spawn();
  s.argv = huge_argv;
  s.argc = 1;
  assert_int_equal(wr_init_encode_spawn(&b, 1, &s, 5, &err), -1);
  assert_int_equal(err.code, EMSGSIZE);
  /* Nothing was appended by any failed encode. */
  assert_int_equal(b.len, 0);
  free(huge);
  wr_buf_free(&b);
}

static void test_listed_spawned_rejects(void **state) {
  struct wr_init_proc p = sample_proc(1, 0, false);
  struct wr_init_spawned sp = {0, 0, 3, ""}, out;
  struct wr_init_listed l;
  wr_error_t err = {0};
  wr_buf_t b;
  char *pl;
  (void)state;

  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_listed(&b, 1, &p, 1, false, 0, &err), 0);
  pl = b.data + HDR_SIZE;
  /* A count that does not fill the payload. */
  patch_u32(&b, HDR_SIZE, 2);
  assert_int_equal(wr_init_decode_listed(pl, b.len - HDR_SIZE, &l, &err), -1);
  patch_u32(&b, HDR_SIZE, 1);
  assert_int_equal(wr_init_decode_listed(pl, b.len - HDR_SIZE - 1, &l, &err),
                   -1);
  /* more must be 0 or 1. */
  pl[4] = 2;
  assert_int_equal(wr_init_decode_listed(pl, b.len - HDR_SIZE, &l, &err), -1);
  pl[4] = 0;
  /* fds on an entry that is not background: has_fds is at offset 25. */
  pl[8 + 25] = 1;
  assert_int_equal(wr_init_decode_listed(pl, b.len - HDR_SIZE, &l, &err), -1);
  pl[8 + 25] = 0;
  /* An unterminated tag. */
  memset(pl + 8 + 26, 'a', WR_INIT_TAG_MAX + 1);
  assert_int_equal(wr_init_decode_listed(pl, b.len - HDR_SIZE, &l, &err), -1);
  assert_null(l.procs);
  /* SPAWNED: success without a pid, an unterminated stage, a negative
   * errno. */
  assert_int_equal(wr_init_decode_spawned(&sp, sizeof(sp), &out, &err), -1);
  sp = (struct wr_init_spawned){ENOENT, 0, 0, ""};
  memset(sp.stage, 'x', sizeof(sp.stage));
  assert_int_equal(wr_init_decode_spawned(&sp, sizeof(sp), &out, &err), -1);
  sp = (struct wr_init_spawned){-1, 0, 0, "exec"};
  assert_int_equal(wr_init_decode_spawned(&sp, sizeof(sp), &out, &err), -1);
  assert_int_equal(wr_init_decode_spawned(&sp, sizeof(sp) - 1, &out, &err), -1);
  /* Fixed payloads must have exactly their size. */
  assert_int_equal(wr_init_decode_fixed("abc", 3, &out, 4, &err), -1);
  wr_buf_free(&b);
}

static void test_encode_simple_rejects(void **state) {
  int x = 0;
  wr_buf_t b;
  (void)state;

  wr_buf_init(&b);
  errno = 0;
  assert_int_equal(wr_init_encode_simple(&b, 77, 1, &x, sizeof(x), 0), -1);
  assert_int_equal(errno, EINVAL);
  assert_int_equal(wr_init_encode_simple(&b, WR_INIT_HELLO, 1, NULL, 0, 1), -1);
  assert_int_equal(errno, EINVAL);
  assert_int_equal(
      wr_init_encode_simple(&b, WR_INIT_RESULT, 1, &x, WR_INIT_MAX_MSG, 0), -1);
  assert_int_equal(errno, EMSGSIZE);
  assert_int_equal(b.len, 0);
  wr_buf_free(&b);
}

/* ---- protocol: transport ---------------------------------------------- */

static void test_transport_fds(void **state) {
  int sv[2], p[2], fds[WR_INIT_MAX_FDS];
  char buf[WR_INIT_MAX_MSG];
  size_t nfds;
  wr_error_t err = {0};
  char c;
  (void)state;

  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
                   0);
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  assert_int_equal(wr_init_send(sv[0], "hello", 5, p, 2, &err), 0);
  assert_int_equal(wr_init_recv(sv[1], buf, sizeof(buf), fds, &nfds, &err), 5);
  assert_memory_equal(buf, "hello", 5);
  assert_int_equal(nfds, 2);
  assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
  assert_true(fcntl(fds[1], F_GETFD) & FD_CLOEXEC);
  /* They are the same pipe. */
  assert_int_equal(write(fds[1], "z", 1), 1);
  assert_int_equal(read(p[0], &c, 1), 1);
  assert_int_equal(c, 'z');
  close_all(fds, nfds);
  close_all(p, 2);
  /* More fds than one message may carry. */
  assert_int_equal(wr_init_send(sv[0], "x", 1, fds, WR_INIT_MAX_FDS + 1, &err),
                   -1);
  /* Non-blocking and nothing to read. */
  assert_int_equal(wr_set_nonblock(sv[1], true), 0);
  assert_int_equal(wr_init_recv(sv[1], buf, sizeof(buf), fds, &nfds, &err), -1);
  assert_int_equal(err.code, EAGAIN);
  /* Orderly EOF. */
  close(sv[0]);
  assert_int_equal(wr_init_recv(sv[1], buf, sizeof(buf), fds, &nfds, &err), 0);
  close(sv[1]);
}

/* A datagram larger than the buffer, or with more fds than fit, is an
 * error and every fd that came with it is closed. */
static void test_transport_truncation(void **state) {
  int sv[2], many[WR_INIT_MAX_FDS + 2], fds[WR_INIT_MAX_FDS];
  char buf[64], big[200] = {0};
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(many))];
  } ctl;
  struct iovec iov = {big, 10};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  struct cmsghdr *c;
  wr_error_t err = {0};
  size_t nfds, before;
  (void)state;

  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
                   0);
  for (size_t i = 0; i < WR_ARRAY_SIZE(many); i++)
    many[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  before = count_open_fds();
  assert_int_equal(wr_init_send(sv[0], big, sizeof(big), many, 2, &err), 0);
  assert_int_equal(wr_init_recv(sv[1], buf, sizeof(buf), fds, &nfds, &err), -1);
  assert_int_equal(err.code, EMSGSIZE);
  assert_int_equal(nfds, 0);
  assert_int_equal(count_open_fds(), before);
  /* Ten fds: the control buffer holds eight. */
  memset(&ctl, 0, sizeof(ctl));
  mh.msg_control = ctl.b;
  mh.msg_controllen = sizeof(ctl.b);
  c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(many));
  memcpy(CMSG_DATA(c), many, sizeof(many));
  assert_int_equal(sendmsg(sv[0], &mh, 0), 10);
  assert_int_equal(wr_init_recv(sv[1], buf, sizeof(buf), fds, &nfds, &err), -1);
  assert_int_equal(nfds, 0);
  assert_int_equal(count_open_fds(), before);
  close_all(many, WR_ARRAY_SIZE(many));
  close_all(sv, 2);
}

/* ---- helpers: a real warren-init -------------------------------------- */

/* A warren-init under test and the daemon's side of its connection. */
struct init_proc {
  pid_t pid;      /* what to wait for: init, or the pid namespace helper */
  pid_t init_pid; /* init as the host sees it */
  char dir[64];
  char path[128];
  int conn;
  uint32_t next_id;
  struct wr_init_exit events[2048]; /* EXITs that came while waiting */
  size_t nevents;
  char *rx;
};

/* A received datagram. */
struct msg {
  struct wr_init_hdr hdr;
  const void *payload;
  int fds[WR_INIT_MAX_FDS];
  size_t nfds;
};

static bool must_work(void) {
  const char *v = getenv("WARREN_MUST_WORK");
  return v != NULL && strcmp(v, "1") == 0;
}

static const char *init_binary(void) {
  static char path[PATH_MAX + 32];
  char self[PATH_MAX];
  ssize_t n;

  if (getenv("WARREN_INIT") != NULL)
    return getenv("WARREN_INIT");
  /* Next to the test binary (BUILD/tests -> BUILD/bin), else the default
   * build directory (the asan tests use the regular binary). */
  n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(path, sizeof(path), "%s/../bin/warren-init", self);
    if (access(path, X_OK) == 0)
      return path;
  }
  return "build/bin/warren-init";
}

static int64_t now_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* waitpid with a deadline; -1 if the process is still there. */
static int wait_timeout(pid_t pid, int *status, int ms) {
  int64_t end = now_ms() + ms;

  do {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid)
      return 0;
    assert_true(r == 0);
    sleep_ms(5);
  } while (now_ms() < end);
  return -1;
}

static int connect_to(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

  assert_true(fd >= 0);
  wr_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

/* In a child about to exec: make fd 3 a copy of fd that survives exec. */
static void put_on_fd3(int fd) {
  if (fd == 3)
    fcntl(3, F_SETFD, 0);
  else if (dup2(fd, 3) != 3)
    _exit(126);
}

static _Noreturn void exec_init(int lfd, const char *const *extra) {
  const char *argv[16] = {"warren-init", "--ctl-fd", "3"};
  size_t n = 3;

  put_on_fd3(lfd);
  for (; extra != NULL && *extra != NULL && n < 15; extra++)
    argv[n++] = *extra;
  argv[n] = NULL;
  execv(init_binary(), (char *const *)argv);
  _exit(127);
}

/* For the pid namespace variant: unshare, fork init as its PID 1, tell the
 * test init's host pid, and exit with init's status. */
static _Noreturn void run_pidns_helper(int lfd, int report_fd,
                                       const char *const *extra) {
  pid_t inner;
  int status;

  if (unshare(CLONE_NEWPID) < 0)
    _exit(77);
  inner = fork();
  if (inner < 0)
    _exit(1);
  if (inner == 0)
    exec_init(lfd, extra);
  if (write(report_fd, &inner, sizeof(inner)) != sizeof(inner))
    _exit(1);
  while (waitpid(inner, &status, 0) < 0)
    if (errno != EINTR)
      _exit(1);
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static int listen_at(struct init_proc *ip) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int lfd;

  snprintf(ip->dir, sizeof(ip->dir), "/tmp/wr-init-test-XXXXXX");
  assert_non_null(mkdtemp(ip->dir));
  snprintf(ip->path, sizeof(ip->path), "%s/ctl.sock", ip->dir);
  lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  assert_true(lfd >= 0);
  wr_strlcpy(sa.sun_path, ip->path, sizeof(sa.sun_path));
  assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(lfd, 8), 0);
  return lfd;
}

/* Start warren-init (optionally as PID 1 of a new pid namespace) with a
 * listening socket on fd 3, and connect to it. Returns false when a pid
 * namespace cannot be made here. */
static bool start_init_ex(struct init_proc *ip, bool pidns,
                          const char *const *extra) {
  int lfd, rp[2];

  memset(ip, 0, sizeof(*ip));
  lfd = listen_at(ip);
  assert_int_equal(pipe2(rp, O_CLOEXEC), 0);
  ip->pid = fork();
  assert_true(ip->pid >= 0);
  if (ip->pid == 0) {
    if (pidns)
      run_pidns_helper(lfd, rp[1], extra);
    exec_init(lfd, extra);
  }
  close(lfd);
  close(rp[1]);
  ip->init_pid = ip->pid;
  if (pidns && read(rp[0], &ip->init_pid, sizeof(pid_t)) != sizeof(pid_t)) {
    int status;
    close(rp[0]);
    assert_int_equal(wait_timeout(ip->pid, &status, TIMEOUT_MS), 0);
    ip->pid = 0;
    unlink(ip->path);
    rmdir(ip->dir);
    return false;
  }
  close(rp[0]);
  ip->conn = connect_to(ip->path);
  ip->rx = malloc(WR_INIT_MAX_MSG);
  return true;
}

static void start_init(struct init_proc *ip) {
  start_init_ex(ip, false, NULL);
}

/* Stop init the way the host does (SIGTERM, which it forwards), and make
 * sure it is gone even if a test failed halfway. Returns init's status. */
static int stop_init(struct init_proc *ip) {
  int status = -1;

  if (ip->conn >= 0)
    close(ip->conn);
  ip->conn = -1;
  if (ip->pid > 0) {
    kill(ip->init_pid, SIGTERM);
    if (wait_timeout(ip->pid, &status, TIMEOUT_MS) < 0) {
      kill(ip->init_pid, SIGKILL);
      kill(ip->pid, SIGKILL);
      waitpid(ip->pid, &status, 0);
    }
    ip->pid = 0;
  }
  unlink(ip->path);
  rmdir(ip->dir);
  free(ip->rx);
  ip->rx = NULL;
  return status;
}

/* Every behaviour test gets a fresh struct and, whatever happens in the
 * test, its warren-init is gone afterwards: a failed assertion must not
 * leave one running (it would hold the test's stdout open forever). */
static int init_setup(void **state) {
  struct init_proc *ip = calloc(1, sizeof(*ip));

  ip->conn = -1;
  *state = ip;
  return 0;
}

static int init_teardown(void **state) {
  struct init_proc *ip = *state;

  if (ip->pid > 0 || ip->rx != NULL)
    stop_init(ip);
  free(ip);
  return 0;
}

static void reconnect(struct init_proc *ip) {
  close(ip->conn);
  ip->conn = connect_to(ip->path);
}

static uint32_t send_req(struct init_proc *ip, uint16_t type,
                         const void *payload, uint32_t len) {
  uint32_t id = ++ip->next_id;
  wr_error_t err = {0};
  wr_buf_t b;

  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_simple(&b, type, id, payload, len, 0), 0);
  assert_int_equal(wr_init_send(ip->conn, b.data, b.len, NULL, 0, &err), 0);
  wr_buf_free(&b);
  return id;
}

/* Receive one datagram, failing the test after TIMEOUT_MS. Returns false
 * on EOF (init closed the connection). */
static bool recv_msg(struct init_proc *ip, struct msg *m) {
  struct pollfd p = {ip->conn, POLLIN, 0};
  wr_error_t err = {0};
  ssize_t n;

  if (poll(&p, 1, TIMEOUT_MS) != 1)
    fail_msg("no message from warren-init in %d ms", TIMEOUT_MS);
  n = wr_init_recv(ip->conn, ip->rx, WR_INIT_MAX_MSG, m->fds, &m->nfds, &err);
  if (n == 0)
    return false;
  if (n < 0)
    fail_msg("recv: %s", err.msg);
  if (wr_init_decode_hdr(ip->rx, (size_t)n, m->nfds, &m->hdr, &m->payload,
                         &err) < 0)
    fail_msg("from warren-init: %s", err.msg);
  return true;
}

/* Wait for the reply to `id`, keeping EXIT events that come first. */
static void await(struct init_proc *ip, uint32_t id, uint16_t type,
                  struct msg *m) {
  for (;;) {
    if (!recv_msg(ip, m))
      fail_msg("warren-init closed the connection");
    if (m->hdr.type == WR_INIT_EXIT && m->hdr.id == 0) {
      assert_true(ip->nevents < WR_ARRAY_SIZE(ip->events));
      assert_int_equal(wr_init_decode_fixed(m->payload, m->hdr.len,
                                            &ip->events[ip->nevents++],
                                            sizeof(struct wr_init_exit), NULL),
                       0);
      continue;
    }
    assert_int_equal(m->hdr.id, id);
    assert_int_equal(m->hdr.type, type);
    return;
  }
}

static int32_t await_result(struct init_proc *ip, uint32_t id) {
  struct wr_init_result r;
  struct msg m;

  await(ip, id, WR_INIT_RESULT, &m);
  assert_int_equal(
      wr_init_decode_fixed(m.payload, m.hdr.len, &r, sizeof(r), NULL), 0);
  return r.err;
}

static void hello(struct init_proc *ip, uint32_t *nprocs) {
  struct wr_init_hello_ok ok;
  uint32_t id = send_req(ip, WR_INIT_HELLO, NULL, 0);
  struct msg m;

  await(ip, id, WR_INIT_HELLO_OK, &m);
  assert_int_equal(
      wr_init_decode_fixed(m.payload, m.hdr.len, &ok, sizeof(ok), NULL), 0);
  assert_int_equal(ok.version, WR_INIT_VERSION);
  if (nprocs != NULL)
    *nprocs = ok.nprocs;
}

/* The wait status in the EXIT for proc_id. */
static int await_exit(struct init_proc *ip, uint32_t proc_id) {
  for (;;) {
    struct msg m;

    for (size_t i = 0; i < ip->nevents; i++) {
      if (ip->events[i].proc_id == proc_id) {
        int status = ip->events[i].status;
        ip->events[i] = ip->events[--ip->nevents];
        return status;
      }
    }
    if (!recv_msg(ip, &m))
      fail_msg("warren-init closed the connection");
    assert_int_equal(m.hdr.type, WR_INIT_EXIT);
    assert_int_equal(m.hdr.id, 0);
    assert_true(ip->nevents < WR_ARRAY_SIZE(ip->events));
    assert_int_equal(wr_init_decode_fixed(m.payload, m.hdr.len,
                                          &ip->events[ip->nevents++],
                                          sizeof(struct wr_init_exit), NULL),
                     0);
  }
}

struct spawn_args {
  const char *const *argv;
  uint32_t flags;
  const char *cwd;
  const char *tag;
  uint16_t rows, cols;
  const int *fds;
};

/* SPAWN and wait for SPAWNED; *master gets the fd that came with it. */
static struct wr_init_spawned spawn(struct init_proc *ip,
                                    const struct spawn_args *a, int *master) {
  struct wr_init_spawn s = {
      .flags = a->flags,
      .rows = a->rows,
      .cols = a->cols,
      .tag = a->tag ? a->tag : "",
      .cwd = a->cwd ? a->cwd : "/",
      .argv = (const char **)a->argv,
      .env = (const char **)test_env,
      .envc = 2,
  };
  unsigned nfds = wr_init_spawn_nfds(a->flags);
  struct wr_init_spawned sp;
  wr_error_t err = {0};
  uint32_t id = ++ip->next_id;
  struct msg m;
  wr_buf_t b;

  while (a->argv[s.argc] != NULL)
    s.argc++;
  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_spawn(&b, id, &s, (uint16_t)nfds, &err), 0);
  assert_int_equal(wr_init_send(ip->conn, b.data, b.len, a->fds, nfds, &err),
                   0);
  wr_buf_free(&b);
  await(ip, id, WR_INIT_SPAWNED, &m);
  assert_int_equal(wr_init_decode_spawned(m.payload, m.hdr.len, &sp, &err), 0);
  if (master != NULL)
    *master = m.nfds == 1 ? m.fds[0] : -1;
  else
    close_all(m.fds, m.nfds);
  return sp;
}

/* Spawn with stdin from /dev/null and stdout+stderr into one pipe whose
 * read end is returned in *out. */
static struct wr_init_spawned spawn_piped(struct init_proc *ip,
                                          const char *const *argv, int *out) {
  int p[2], fds[3];
  struct spawn_args a = {.argv = argv, .fds = fds};
  struct wr_init_spawned sp;

  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  fds[1] = fds[2] = p[1];
  sp = spawn(ip, &a, NULL);
  close(fds[0]);
  close(p[1]);
  *out = p[0];
  return sp;
}

/* Read until EOF (or EIO, a pty whose slave closed), with a deadline. */
static size_t read_all(int fd, char *buf, size_t size) {
  size_t len = 0;

  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    ssize_t n;

    if (poll(&p, 1, TIMEOUT_MS) != 1)
      fail_msg("no output in %d ms", TIMEOUT_MS);
    n = read(fd, buf + len, size - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  buf[len] = '\0';
  return len;
}

/* Whether pid is gone from /proc (reaped), waiting up to TIMEOUT_MS. */
static bool gone_eventually(pid_t pid) {
  char path[64];
  int64_t end = now_ms() + TIMEOUT_MS;

  snprintf(path, sizeof(path), "/proc/%d", (int)pid);
  while (now_ms() < end) {
    if (access(path, F_OK) < 0)
      return true;
    sleep_ms(10);
  }
  return false;
}

/* Gather every datagram of the LISTED reply to `id`. */
static size_t collect_listed(struct init_proc *ip, uint32_t id,
                             struct wr_init_proc *out, size_t max, int *fds,
                             size_t max_fds, size_t *nfds, size_t *ndgrams) {
  size_t n = 0;
  struct wr_init_listed l;

  *nfds = 0;
  *ndgrams = 0;
  do {
    struct msg m;

    await(ip, id, WR_INIT_LISTED, &m);
    (*ndgrams)++;
    assert_int_equal(wr_init_decode_listed(m.payload, m.hdr.len, &l, NULL), 0);
    assert_int_equal(wr_init_listed_nfds(&l), m.nfds);
    assert_true(n + l.count <= max && *nfds + m.nfds <= max_fds);
    if (l.count > 0)
      memcpy(out + n, l.procs, l.count * sizeof(*out));
    memcpy(fds + *nfds, m.fds, m.nfds * sizeof(int));
    n += l.count;
    *nfds += m.nfds;
    free(l.procs);
  } while (l.more);
  return n;
}

static size_t list(struct init_proc *ip, struct wr_init_proc *out, size_t max,
                   int *fds, size_t max_fds, size_t *nfds, size_t *ndgrams) {
  return collect_listed(ip, send_req(ip, WR_INIT_LIST, NULL, 0), out, max, fds,
                        max_fds, nfds, ndgrams);
}

static int32_t send_signal(struct init_proc *ip, uint32_t proc_id, int sig,
                           uint32_t flags) {
  struct wr_init_signal s = {proc_id, sig, flags};

  return await_result(ip, send_req(ip, WR_INIT_SIGNAL, &s, sizeof(s)));
}

static int32_t forget(struct init_proc *ip, uint32_t proc_id) {
  struct wr_init_forget f = {proc_id};

  return await_result(ip, send_req(ip, WR_INIT_FORGET, &f, sizeof(f)));
}

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- warren-init: behaviour ------------------------------------------- */

static void test_init_echo(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  char out[256];
  int fd, status;

  start_init(ip);
  hello(ip, NULL);
  sp = spawn_piped(ip, ARGV("echo", "hi"), &fd);
  assert_int_equal(sp.err, 0);
  assert_true(sp.pid > 0);
  assert_true(sp.proc_id > 0);
  read_all(fd, out, sizeof(out));
  close(fd);
  assert_string_equal(out, "hi\n");
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_spawn_failures(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  struct spawn_args a = {.argv = ARGV("true"), .cwd = "/nonexistent-dir"};
  int fds[3], fd;
  uint32_t nprocs;

  start_init(ip);
  sp = spawn_piped(ip, ARGV("/nonexistent"), &fd);
  close(fd);
  assert_int_equal(sp.err, ENOENT);
  assert_string_equal(sp.stage, "exec");
  assert_int_equal(sp.pid, 0);
  for (int i = 0; i < 3; i++)
    fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
  a.fds = fds;
  sp = spawn(ip, &a, NULL);
  close_all(fds, 3);
  assert_int_equal(sp.err, ENOENT);
  assert_string_equal(sp.stage, "chdir");
  /* PATH comes from the given environment: a name found nowhere on it. */
  sp = spawn_piped(ip, ARGV("warren-no-such-command"), &fd);
  close(fd);
  assert_int_equal(sp.err, ENOENT);
  assert_string_equal(sp.stage, "exec");
  /* Nothing failed is tracked, and the failed children were reaped. */
  hello(ip, &nprocs);
  assert_int_equal(nprocs, 0);
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_exit_status(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  int fd, status;

  start_init(ip);
  sp = spawn_piped(ip, ARGV("sh", "-c", "exit 3"), &fd);
  close(fd);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
  sp = spawn_piped(ip, ARGV("sh", "-c", "kill -KILL $$"), &fd);
  close(fd);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_stdin(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  int in[2], out[2], fds[3];
  struct spawn_args a = {.argv = ARGV("cat"), .fds = fds};
  char buf[64];

  start_init(ip);
  assert_int_equal(pipe2(in, O_CLOEXEC), 0);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  fds[0] = in[0];
  fds[1] = fds[2] = out[1];
  sp = spawn(ip, &a, NULL);
  close(in[0]);
  close(out[1]);
  assert_int_equal(sp.err, 0);
  assert_int_equal(write(in[1], "abc", 3), 3);
  close(in[1]);
  read_all(out[0], buf, sizeof(buf));
  close(out[0]);
  assert_string_equal(buf, "abc");
  assert_int_equal(await_exit(ip, sp.proc_id), 0);
  assert_int_equal(stop_init(ip), 0);
}

/* The sandbox's processes see only 0, 1 and 2: nothing of init's leaks. */
static void test_init_no_fd_leak(void **state) {
  struct init_proc *ip = *state;
  char out[256];
  int fd;

  start_init(ip);
  spawn_piped(ip, ARGV("sh", "-c", "ls /proc/$$/fd"), &fd);
  read_all(fd, out, sizeof(out));
  close(fd);
  assert_string_equal(out, "0\n1\n2\n");
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_tty(void **state) {
  struct init_proc *ip = *state;
  struct spawn_args a = {.argv = ARGV("sh", "-c", "tty; stty size"),
                         .flags = WR_SPAWN_TTY,
                         .rows = 33,
                         .cols = 77};
  struct wr_init_spawned sp;
  char out[256];
  int master;

  start_init(ip);
  sp = spawn(ip, &a, &master);
  assert_int_equal(sp.err, 0);
  assert_true(master >= 0);
  read_all(master, out, sizeof(out));
  close(master);
  assert_non_null(strstr(out, "/dev/pts/"));
  assert_non_null(strstr(out, "33 77"));
  assert_int_equal(await_exit(ip, sp.proc_id), 0);
  assert_int_equal(stop_init(ip), 0);
}

/* A background process outlives the daemon's connection: init keeps its
 * output pipes, so it never meets EPIPE, and a new connection gets them
 * back in LISTED with the output still unread. */
static void test_init_background_reconnect(void **state) {
  struct init_proc *ip = *state;
  int out[2], err[2], fds[5], kept[8];
  struct spawn_args a = {
      .argv = ARGV("sh", "-c", "sleep 0.2; echo out; echo err >&2"),
      .flags = WR_SPAWN_BACKGROUND,
      .tag = "job",
      .fds = fds};
  struct wr_init_proc procs[4];
  struct wr_init_spawned sp;
  size_t n, nfds, ndgrams;
  char buf[64];

  start_init(ip);
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  assert_int_equal(pipe2(err, O_CLOEXEC), 0);
  fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  fds[1] = out[1];
  fds[2] = err[1];
  fds[3] = out[0];
  fds[4] = err[0];
  sp = spawn(ip, &a, NULL);
  assert_int_equal(sp.err, 0);
  /* The daemon goes away, taking every fd it had. */
  close_all(fds, 5);
  reconnect(ip);
  n = list(ip, procs, 4, kept, 8, &nfds, &ndgrams);
  assert_int_equal(n, 1);
  assert_int_equal(nfds, 2);
  assert_int_equal(procs[0].proc_id, sp.proc_id);
  assert_int_equal(procs[0].pid, sp.pid);
  assert_int_equal(procs[0].has_fds, 1);
  assert_string_equal(procs[0].tag, "job");
  assert_string_equal(procs[0].cmd, "sh -c sleep 0.2; echo out; echo err >&2");
  assert_true(procs[0].started_ms > 0);
  read_all(kept[0], buf, sizeof(buf));
  assert_string_equal(buf, "out\n");
  read_all(kept[1], buf, sizeof(buf));
  assert_string_equal(buf, "err\n");
  close_all(kept, nfds);
  /* It ended normally, and its record stays until FORGET. */
  assert_int_equal(await_exit(ip, sp.proc_id), 0);
  n = list(ip, procs, 4, kept, 8, &nfds, &ndgrams);
  assert_int_equal(n, 1);
  assert_int_equal(procs[0].running, 0);
  assert_int_equal(procs[0].status, 0);
  close_all(kept, nfds);
  assert_int_equal(forget(ip, sp.proc_id), 0);
  assert_int_equal(list(ip, procs, 4, kept, 8, &nfds, &ndgrams), 0);
  assert_int_equal(forget(ip, sp.proc_id), ESRCH);
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_background_tty(void **state) {
  struct init_proc *ip = *state;
  struct spawn_args a = {.argv = ARGV("sh", "-c", "sleep 0.2; echo late"),
                         .flags = WR_SPAWN_BACKGROUND | WR_SPAWN_TTY};
  struct wr_init_proc procs[2];
  struct wr_init_spawned sp;
  size_t nfds, ndgrams;
  int master, kept[2];
  char buf[64];

  start_init(ip);
  sp = spawn(ip, &a, &master);
  assert_int_equal(sp.err, 0);
  close(master);
  reconnect(ip);
  assert_int_equal(list(ip, procs, 2, kept, 2, &nfds, &ndgrams), 1);
  assert_int_equal(nfds, 1);
  read_all(kept[0], buf, sizeof(buf));
  assert_string_equal(buf, "late\r\n");
  close(kept[0]);
  assert_int_equal(forget(ip, sp.proc_id), 0);
  assert_int_equal(stop_init(ip), 0);
}

/* LISTED splits across datagrams when the fds would pass WR_INIT_MAX_FDS:
 * six background processes bring twelve fds. */
static void test_init_list_split(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_proc procs[8];
  uint32_t ids[6];
  int fds[5], kept[16];
  struct spawn_args a = {
      .argv = ARGV("sleep", "100"), .flags = WR_SPAWN_BACKGROUND, .fds = fds};
  size_t n, nfds, ndgrams;

  start_init(ip);
  for (int i = 0; i < 5; i++)
    fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int i = 0; i < 6; i++)
    ids[i] = spawn(ip, &a, NULL).proc_id;
  close_all(fds, 5);
  n = list(ip, procs, 8, kept, 16, &nfds, &ndgrams);
  assert_int_equal(n, 6);
  assert_int_equal(nfds, 12);
  assert_int_equal(ndgrams, 2);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(procs[i].proc_id, ids[i]);
    assert_int_equal(procs[i].running, 1);
  }
  close_all(kept, nfds);
  assert_int_equal(send_signal(ip, 0, SIGKILL, WR_SIGNAL_ALL), 0);
  for (int i = 0; i < 6; i++) {
    int status = await_exit(ip, ids[i]);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(forget(ip, ids[i]), 0);
  }
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_signal(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  char out[64];
  pid_t grandchild;
  int fd, status;

  start_init(ip);
  sp = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  assert_int_equal(send_signal(ip, sp.proc_id, 0, 0), EINVAL);
  assert_int_equal(send_signal(ip, sp.proc_id, 65, 0), EINVAL);
  assert_int_equal(send_signal(ip, sp.proc_id, SIGTERM, 1u << 5), EINVAL);
  assert_int_equal(send_signal(ip, 999999, SIGTERM, 0), ESRCH);
  assert_int_equal(send_signal(ip, sp.proc_id, SIGTERM, 0), 0);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGTERM);
  assert_int_equal(send_signal(ip, sp.proc_id, SIGTERM, 0), ESRCH);
  /* The group: the shell and the sleep it started both get it. */
  sp = spawn_piped(ip, ARGV("sh", "-c", "sleep 100 & echo $!; wait"), &fd);
  {
    struct pollfd p = {fd, POLLIN, 0};
    ssize_t n;

    assert_int_equal(poll(&p, 1, TIMEOUT_MS), 1);
    n = read(fd, out, sizeof(out) - 1);
    assert_true(n > 0);
    out[n] = '\0';
  }
  grandchild = (pid_t)atoi(out);
  assert_true(grandchild > 0);
  assert_int_equal(send_signal(ip, sp.proc_id, SIGKILL, WR_SIGNAL_GROUP), 0);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
  assert_true(gone_eventually(grandchild));
  close(fd);
  assert_int_equal(stop_init(ip), 0);
}

/* FORGET leaves a running process running but untracked: no EXIT comes
 * for it, and init still reaps it. */
static void test_init_forget_running(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  struct wr_init_proc procs[2];
  int kept[4], fd;
  size_t nfds, ndgrams;
  struct msg m;
  uint32_t id;

  start_init(ip);
  sp = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  assert_int_equal(forget(ip, sp.proc_id), 0);
  assert_int_equal(forget(ip, sp.proc_id), ESRCH);
  assert_int_equal(send_signal(ip, sp.proc_id, SIGTERM, 0), ESRCH);
  assert_int_equal(list(ip, procs, 2, kept, 4, &nfds, &ndgrams), 0);
  assert_int_equal(kill(sp.pid, 0), 0);
  kill(sp.pid, SIGKILL);
  assert_true(gone_eventually(sp.pid));
  id = send_req(ip, WR_INIT_HELLO, NULL, 0);
  assert_true(recv_msg(ip, &m));
  assert_int_equal(m.hdr.type, WR_INIT_HELLO_OK);
  assert_int_equal(m.hdr.id, id);
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_reaps_orphans(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  char out[64];
  pid_t orphan;
  int fd;

  start_init(ip);
  sp = spawn_piped(ip, ARGV("sh", "-c", "sleep 0.1 & echo $!; exit 0"), &fd);
  read_all(fd, out, sizeof(out));
  close(fd);
  orphan = (pid_t)atoi(out);
  assert_true(orphan > 0);
  assert_int_equal(await_exit(ip, sp.proc_id), 0);
  /* Not left a zombie: reaped by init, its subreaper. */
  assert_true(gone_eventually(orphan));
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_sigterm(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned sp;
  int fd, status;

  start_init(ip);
  /* SIGUSR1 is forwarded, and init carries on. */
  sp = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  kill(ip->init_pid, SIGUSR1);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGUSR1);
  sleep_ms(50);
  hello(ip, NULL);
  /* SIGTERM is forwarded, and init leaves once its children are gone. */
  sp = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  kill(ip->init_pid, SIGTERM);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGTERM);
  assert_int_equal(wait_timeout(ip->pid, &status, TIMEOUT_MS), 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  ip->pid = 0;
  stop_init(ip);
}

static void send_raw(int conn, const void *data, size_t len, const int *fds,
                     size_t nfds) {
  assert_int_equal(wr_init_send(conn, data, len, fds, nfds, NULL), 0);
}

static void test_init_malformed(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_hdr hdr = {WR_INIT_MAGIC, WR_INIT_SPAWN, 0, 77, 2};
  char garbage[40], buf[HDR_SIZE + 2], c;
  struct wr_init_result res = {0};
  struct wr_init_spawn s = sample_spawn();
  int p[2];
  char *big;
  wr_buf_t b;
  struct msg m;

  start_init(ip);
  /* A bad header ends the connection, and only that. */
  memset(garbage, 0xa5, sizeof(garbage));
  send_raw(ip->conn, garbage, sizeof(garbage), NULL, 0);
  assert_false(recv_msg(ip, &m));
  reconnect(ip);
  hello(ip, NULL);
  /* A good header with a bad payload gets RESULT EINVAL under its id. */
  memcpy(buf, &hdr, HDR_SIZE);
  memcpy(buf + HDR_SIZE, "xx", 2);
  send_raw(ip->conn, buf, sizeof(buf), NULL, 0);
  assert_int_equal(await_result(ip, 77), EINVAL);
  /* So do a reply type sent as a request and a HELLO with a payload. */
  assert_int_equal(
      await_result(ip, send_req(ip, WR_INIT_RESULT, &res, sizeof(res))),
      EINVAL);
  assert_int_equal(
      await_result(ip, send_req(ip, WR_INIT_HELLO, &res, sizeof(res))), EINVAL);
  /* A SPAWN whose fds do not match its flags: refused, and init closes the
   * fd it got (our read end sees EOF). */
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  s.flags = 0;
  wr_buf_init(&b);
  assert_int_equal(wr_init_encode_spawn(&b, 78, &s, 3, NULL), 0);
  hdr.nfds = 1;
  memcpy(b.data + 6, &hdr.nfds, 2);
  send_raw(ip->conn, b.data, b.len, &p[1], 1);
  close(p[1]);
  assert_int_equal(await_result(ip, 78), EINVAL);
  assert_int_equal(read(p[0], &c, 1), 0);
  close(p[0]);
  wr_buf_free(&b);
  hello(ip, NULL);
  /* Larger than any datagram: the connection ends, init carries on. */
  big = calloc(1, WR_INIT_MAX_MSG + 100);
  send_raw(ip->conn, big, WR_INIT_MAX_MSG + 100, NULL, 0);
  free(big);
  assert_false(recv_msg(ip, &m));
  reconnect(ip);
  hello(ip, NULL);
  assert_int_equal(stop_init(ip), 0);
}

/* A new connection replaces the old one (the daemon restarted). */
static void test_init_replace_connection(void **state) {
  struct init_proc *ip = *state;
  struct msg m;
  int old;

  start_init(ip);
  hello(ip, NULL);
  old = ip->conn;
  ip->conn = connect_to(ip->path);
  hello(ip, NULL);
  {
    int cur = ip->conn;
    ip->conn = old;
    assert_false(recv_msg(ip, &m));
    ip->conn = cur;
  }
  close(old);
  assert_int_equal(stop_init(ip), 0);
}

/* At WR_INIT_MAX_PROCS tracked processes, SPAWN fails with EAGAIN. The
 * full LIST that follows is read only after a pause: its 256 datagrams
 * overflow the socket buffer, so init must queue the rest rather than
 * give up on a daemon that is merely slow. */
static void test_init_proc_limit(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_proc *procs = calloc(WR_INIT_MAX_PROCS, sizeof(*procs));
  int *kept = calloc(2 * WR_INIT_MAX_PROCS, sizeof(int));
  int fds[5];
  struct spawn_args a = {
      .argv = ARGV("true"), .flags = WR_SPAWN_BACKGROUND, .fds = fds};
  struct wr_init_spawned sp;
  size_t n, nfds, ndgrams;
  uint32_t first = 0, id;

  start_init(ip);
  for (int i = 0; i < 5; i++)
    fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int i = 0; i < WR_INIT_MAX_PROCS; i++) {
    sp = spawn(ip, &a, NULL);
    assert_int_equal(sp.err, 0);
    if (i == 0)
      first = sp.proc_id;
  }
  sp = spawn(ip, &a, NULL);
  assert_int_equal(sp.err, EAGAIN);
  assert_string_equal(sp.stage, "limit");
  id = send_req(ip, WR_INIT_LIST, NULL, 0);
  sleep_ms(300);
  n = collect_listed(ip, id, procs, WR_INIT_MAX_PROCS, kept,
                     2 * WR_INIT_MAX_PROCS, &nfds, &ndgrams);
  assert_int_equal(n, WR_INIT_MAX_PROCS);
  assert_int_equal(nfds, 2 * WR_INIT_MAX_PROCS);
  assert_int_equal(ndgrams, WR_INIT_MAX_PROCS / 4);
  close_all(kept, nfds);
  assert_int_equal(forget(ip, first), 0);
  sp = spawn(ip, &a, NULL);
  assert_int_equal(sp.err, 0);
  close_all(fds, 5);
  free(procs);
  free(kept);
  assert_int_equal(stop_init(ip), 0);
}

/* ---- warren-init: options and setup ----------------------------------- */

/* Run warren-init with these arguments and fd 3 as given; its status. */
static int run_init_args(const char *const *args, int fd3) {
  pid_t pid = fork();
  int status;

  assert_true(pid >= 0);
  if (pid == 0) {
    const char *argv[16] = {"warren-init"};
    int devnull = open("/dev/null", O_WRONLY);
    size_t n = 1;

    dup2(devnull, 2);
    if (fd3 >= 0)
      put_on_fd3(fd3);
    for (; *args != NULL && n < 15; args++)
      argv[n++] = *args;
    execv(init_binary(), (char *const *)argv);
    _exit(127);
  }
  assert_int_equal(wait_timeout(pid, &status, TIMEOUT_MS), 0);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void test_init_args(void **state) {
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  (void)state;

  assert_int_equal(run_init_args(ARGV("--bogus"), -1), 2);
  assert_int_equal(run_init_args((const char *const[]){NULL}, -1), 2);
  assert_int_equal(run_init_args(ARGV("--ctl-fd"), -1), 2);
  assert_int_equal(run_init_args(ARGV("--ctl-fd", "x"), -1), 2);
  assert_int_equal(run_init_args(ARGV("--ctl-fd", "1"), -1), 2);
  assert_int_equal(run_init_args(ARGV("--ctl-fd", "3", "--ctl-fd", "3"), -1),
                   2);
  assert_int_equal(
      run_init_args(ARGV("--ctl-fd", "3", "--keep-caps", "1,,2"), -1), 2);
  assert_int_equal(
      run_init_args(ARGV("--ctl-fd", "3", "--keep-caps", "64"), -1), 2);
  assert_int_equal(
      run_init_args(ARGV("--ctl-fd", "3", "--seccomp-fd", "3"), -1), 2);
  /* Well-formed, but fd 3 is not a listening SEQPACKET socket. */
  assert_int_equal(run_init_args(ARGV("--ctl-fd", "3"), devnull), 1);
  assert_int_equal(run_init_args(ARGV("--ctl-fd", "3"), sock), 1);
  close(devnull);
  close(sock);
}

/* A line "Name:\tVALUE" of a process's status file, as seen by a process
 * warren-init spawned. */
static void spawned_status(struct init_proc *ip, const char *name, char *out,
                           size_t size) {
  char cmd[128];
  int fd;

  snprintf(cmd, sizeof(cmd), "grep '^%s:' /proc/self/status | cut -f2", name);
  spawn_piped(ip, ARGV("sh", "-c", cmd), &fd);
  read_all(fd, out, size);
  close(fd);
}

/* What warren-init's default RLIMIT_NOFILE comes to in this test. */
static rlim_t expected_nofile(void) {
  char out[4096], *cap;
  struct rlimit rl;
  uint64_t eff;
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = read(fd, out, sizeof(out) - 1);

  close(fd);
  assert_true(n > 0);
  out[n] = '\0';
  cap = strstr(out, "CapEff:");
  assert_non_null(cap);
  eff = strtoull(cap + 7, NULL, 16);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if ((eff & (1ULL << 24)) || rl.rlim_max >= 65536) /* CAP_SYS_RESOURCE */
    return 65536;
  return rl.rlim_max;
}

/* A capability set ("CapPrm", ...) of process pid, as a mask. */
static uint64_t cap_set_of(pid_t pid, const char *name) {
  char path[64], out[4096], *line;
  ssize_t n;
  int fd;

  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  n = read(fd, out, sizeof(out) - 1);
  close(fd);
  assert_true(n > 0);
  out[n] = '\0';
  line = strstr(out, name);
  assert_non_null(line);
  return strtoull(line + strlen(name) + 2, NULL, 16);
}

static void test_init_setup_applies(void **state) {
  struct init_proc *ip = *state;
  char out[128];

  start_init(ip);
  spawned_status(ip, "CapBnd", out, sizeof(out));
  assert_int_equal(strtoull(out, NULL, 16), DOCKER_CAPS);
  spawned_status(ip, "CapInh", out, sizeof(out));
  assert_int_equal(strtoull(out, NULL, 16), 0);
  /* init itself holds no more than its processes may. */
  assert_int_equal(cap_set_of(ip->init_pid, "CapPrm"), DOCKER_CAPS);
  assert_int_equal(cap_set_of(ip->init_pid, "CapEff"), DOCKER_CAPS);
  assert_int_equal(cap_set_of(ip->init_pid, "CapInh"), 0);
  spawned_status(ip, "NoNewPrivs", out, sizeof(out));
  assert_string_equal(out, "1\n");
  /* RLIMIT_NOFILE is 65536 unless the hard limit is lower and cannot be
   * raised here; either way soft = hard. */
  {
    char want[64];
    int fd;

    snprintf(want, sizeof(want), "%llu\n%llu\n",
             (unsigned long long)expected_nofile(),
             (unsigned long long)expected_nofile());
    spawn_piped(ip, ARGV("sh", "-c", "ulimit -n; ulimit -Hn"), &fd);
    read_all(fd, out, sizeof(out));
    close(fd);
    assert_string_equal(out, want);
  }
  assert_int_equal(stop_init(ip), 0);

  /* CHOWN, KILL; SETGID and SETUID, which init needs to spawn. */
  start_init_ex(ip, false, ARGV("--keep-caps", "0,5,6,7", "--nofile", "1000"));
  spawned_status(ip, "CapBnd", out, sizeof(out));
  assert_int_equal(strtoull(out, NULL, 16), 0xe1ULL);
  assert_int_equal(cap_set_of(ip->init_pid, "CapEff"), 0xe1ULL);
  {
    int fd;
    spawn_piped(ip, ARGV("sh", "-c", "ulimit -n; ulimit -Hn; ulimit -c"), &fd);
    read_all(fd, out, sizeof(out));
    close(fd);
    assert_string_equal(out, "1000\n1000\n0\n");
  }
  assert_int_equal(stop_init(ip), 0);
}

static void test_init_seccomp(void **state) {
  /* Allow everything but uname(2), which fails with ENOSYS. */
  struct sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_uname, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  int mfd = memfd_create("filter", MFD_CLOEXEC);
  struct init_proc *ip = *state;
  char out[128];
  int fd, lfd, status;
  struct wr_init_spawned sp;

  /* The runtime's format: programs, each prefixed by its length; the
   * second one here allows everything, so the first decides. */
  struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  uint32_t count = WR_ARRAY_SIZE(prog), one = 1;

  assert_true(mfd >= 0);
  assert_int_equal(write(mfd, &count, sizeof(count)), sizeof(count));
  assert_int_equal(write(mfd, prog, sizeof(prog)), sizeof(prog));
  assert_int_equal(write(mfd, &one, sizeof(one)), sizeof(one));
  assert_int_equal(write(mfd, allow, sizeof(allow)), sizeof(allow));
  /* exec_init puts the listening socket on 3; the filter goes on 4. */
  assert_int_equal(dup2(mfd, 4), 4);
  start_init_ex(ip, false, ARGV("--seccomp-fd", "4"));
  close(4);
  spawned_status(ip, "Seccomp", out, sizeof(out));
  assert_string_equal(out, "2\n");
  sp = spawn_piped(ip, ARGV("uname"), &fd);
  read_all(fd, out, sizeof(out));
  close(fd);
  status = await_exit(ip, sp.proc_id);
  assert_true(WIFEXITED(status));
  assert_int_not_equal(WEXITSTATUS(status), 0);
  assert_int_equal(stop_init(ip), 0);
  /* A program cut short. */
  assert_int_equal(ftruncate(mfd, sizeof(count) + sizeof(prog) - 1), 0);
  assert_int_equal(dup2(mfd, 4), 4);
  lfd = listen_at(ip);
  assert_int_equal(
      run_init_args(ARGV("--ctl-fd", "3", "--seccomp-fd", "4"), lfd), 1);
  close(lfd);
  close(4);
  close(mfd);
  unlink(ip->path);
  rmdir(ip->dir);
}

/* As PID 1 of a pid namespace: "all" is kill(-1), a signal from inside
 * the sandbox does not reach init, and SIGTERM from the host stops it. */
static void test_init_pid1(void **state) {
  struct init_proc *ip = *state;
  struct wr_init_spawned a, b, k;
  int fd, status;
  uint32_t nprocs;

  if (!start_init_ex(ip, true, NULL)) {
    if (must_work())
      fail_msg("cannot make a pid namespace here");
    skip();
  }
  a = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  b = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  assert_true(a.pid > 1 && a.pid < 100); /* pids of the new namespace */
  k = spawn_piped(ip, ARGV("sh", "-c", "kill -TERM 1; kill -USR1 1"), &fd);
  close(fd);
  assert_int_equal(await_exit(ip, k.proc_id), 0);
  sleep_ms(100);
  hello(ip, &nprocs);
  assert_int_equal(nprocs, 2); /* both sleeps still run */
  assert_int_equal(send_signal(ip, 0, SIGKILL, WR_SIGNAL_ALL), 0);
  assert_int_equal(WTERMSIG(await_exit(ip, a.proc_id)), SIGKILL);
  assert_int_equal(WTERMSIG(await_exit(ip, b.proc_id)), SIGKILL);
  a = spawn_piped(ip, ARGV("sleep", "100"), &fd);
  close(fd);
  kill(ip->init_pid, SIGTERM);
  assert_int_equal(WTERMSIG(await_exit(ip, a.proc_id)), SIGTERM);
  assert_int_equal(wait_timeout(ip->pid, &status, TIMEOUT_MS), 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  ip->pid = 0;
  stop_init(ip);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spawn_roundtrip),
      cmocka_unit_test(test_spawn_tty_roundtrip),
      cmocka_unit_test(test_fixed_roundtrips),
      cmocka_unit_test(test_spawned_roundtrip),
      cmocka_unit_test(test_listed_roundtrip),
      cmocka_unit_test(test_listed_limits),
      cmocka_unit_test(test_hdr_rejects),
      cmocka_unit_test(test_spawn_decode_rejects),
      cmocka_unit_test(test_spawn_string_rules),
      cmocka_unit_test(test_listed_spawned_rejects),
      cmocka_unit_test(test_encode_simple_rejects),
      cmocka_unit_test(test_transport_fds),
      cmocka_unit_test(test_transport_truncation),
      cmocka_unit_test_setup_teardown(test_init_echo, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_spawn_failures, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_exit_status, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_stdin, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_no_fd_leak, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_tty, init_setup, init_teardown),
      cmocka_unit_test_setup_teardown(test_init_background_reconnect,
                                      init_setup, init_teardown),
      cmocka_unit_test_setup_teardown(test_init_background_tty, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_list_split, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_signal, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_forget_running, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_reaps_orphans, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_sigterm, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_malformed, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_replace_connection, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_proc_limit, init_setup,
                                      init_teardown),
      cmocka_unit_test(test_init_args),
      cmocka_unit_test_setup_teardown(test_init_setup_applies, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_seccomp, init_setup,
                                      init_teardown),
      cmocka_unit_test_setup_teardown(test_init_pid1, init_setup,
                                      init_teardown),
  };

  signal(SIGPIPE, SIG_IGN);
  if (access(init_binary(), X_OK) < 0) {
    fprintf(stderr, "%s missing: run `make build/bin/warren-init`\n",
            init_binary());
    return 1;
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
