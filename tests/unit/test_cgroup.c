/*
 * Unit tests for what the runtime gives a sandbox of the host's kernel
 * memory and size: the socket buffer limits on cgroup v1 (written into a
 * fake hierarchy of plain files) and the CPUs a --cpus sandbox runs on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/common.h"
#include "runtime/runtime_internal.h"

#define MIB (1ull << 20)

/* tcp_mem is "low pressure high" in pages; the budget is half of the
 * pressure threshold, and nothing when the text makes no sense. */
static void test_tcp_budget(void **state) {
  (void)state;
  assert_int_equal(wr_cgroup_tcp_budget("287892\t383858\t575784\n", 4096),
                   383858ull * 4096 / 2);
  assert_int_equal(wr_cgroup_tcp_budget("1 2 3", 4096), 4096);
  /* An odd threshold: whole pages, as the kernel stores a limit. */
  assert_int_equal(wr_cgroup_tcp_budget("287889 383855 575778", 4096),
                   191927ull * 4096);
  assert_int_equal(wr_cgroup_tcp_budget("", 4096), 0);
  assert_int_equal(wr_cgroup_tcp_budget("12 x 3", 4096), 0);
  assert_int_equal(wr_cgroup_tcp_budget("1 0 3", 4096), 0);
  assert_int_equal(wr_cgroup_tcp_budget(NULL, 4096), 0);
  assert_int_equal(wr_cgroup_tcp_budget("1 18446744073709551615 3", 4096), 0);
}

/* A sandbox's limit is its memory limit, or the default without one, and
 * never above the budget of all sandboxes together. */
static void test_tcp_limit(void **state) {
  (void)state;
  assert_int_equal(wr_cgroup_tcp_limit(64 * MIB, 1024 * MIB), 64 * MIB);
  assert_int_equal(wr_cgroup_tcp_limit(0, 1024 * MIB), WR_CGROUP_TCP_UNLIMITED);
  assert_int_equal(wr_cgroup_tcp_limit(8192 * MIB, 1024 * MIB), 1024 * MIB);
  assert_int_equal(wr_cgroup_tcp_limit(0, 100 * MIB), 100 * MIB);
}

struct fake_v1 {
  char root[64];
  struct wr_cgroup cg;
};

static void touch(const char *dir, const char *file) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  assert_true(fd >= 0);
  close(fd);
}

static char *slurp(const char *dir, const char *file) {
  char buf[128];

  if (wr_cgroup_read(dir, file, buf, sizeof(buf)) < 0)
    return NULL;
  return xstrdup(buf);
}

/* A v1 layout of plain directories: ROOT/CTRL/warren/sb-1, each with the
 * files the driver writes. */
static int setup_v1(void **state) {
  static const char *const ctrls[] = {"memory", "pids", "cpu", "freezer"};
  struct fake_v1 *f = xcalloc(1, sizeof(*f));

  snprintf(f->root, sizeof(f->root), "/tmp/wr-test-cgroup-XXXXXX");
  assert_non_null(mkdtemp(f->root));
  f->cg.version = 1;
  f->cg.ops = &wr_cgroup_v1_ops;
  f->cg.parent = xstrdup("warren");
  f->cg.tcp_budget = 512 * MIB;
  for (size_t i = 0; i < WR_ARRAY_SIZE(ctrls); i++) {
    _cleanup_free_ char *dir =
        xasprintf("%s/%s/warren/sb-1", f->root, ctrls[i]);
    assert_int_equal(wr_mkdir_p(dir, 0755, NULL), 0);
    f->cg.v1_mount[i] = xasprintf("%s/%s", f->root, ctrls[i]);
  }
  {
    _cleanup_free_ char *mem = xasprintf("%s/memory/warren/sb-1", f->root);
    touch(mem, "memory.limit_in_bytes");
    touch(mem, "memory.memsw.limit_in_bytes");
    touch(mem, "memory.kmem.tcp.limit_in_bytes");
  }
  *state = f;
  return 0;
}

static int teardown_v1(void **state) {
  struct fake_v1 *f = *state;

  wr_rm_rf(f->root, NULL);
  wr_cgroup_fini(&f->cg);
  free(f);
  return 0;
}

/* With --memory the TCP limit is the memory limit; without, the default;
 * and a kernel without the file (budget 0) gets no write at all. */
static void test_v1_create_sets_tcp_limit(void **state) {
  struct fake_v1 *f = *state;
  _cleanup_free_ char *mem = xasprintf("%s/memory/warren/sb-1", f->root);
  struct wr_cgroup_limits lim = {.memory_bytes = 64 * MIB};
  wr_error_t err = {0};
  char *v;

  assert_int_equal(f->cg.ops->create(&f->cg, "sb-1", &lim, &err), 0);
  v = slurp(mem, "memory.kmem.tcp.limit_in_bytes");
  assert_string_equal(v, "67108864");
  free(v);
  v = slurp(mem, "memory.limit_in_bytes");
  assert_string_equal(v, "67108864");
  free(v);

  lim.memory_bytes = 0;
  touch(mem, "memory.limit_in_bytes");
  assert_int_equal(f->cg.ops->create(&f->cg, "sb-1", &lim, &err), 0);
  v = slurp(mem, "memory.kmem.tcp.limit_in_bytes");
  assert_string_equal(v, "268435456");
  free(v);
  v = slurp(mem, "memory.limit_in_bytes");
  assert_string_equal(v, ""); /* no memory limit written */
  free(v);

  f->cg.tcp_budget = 0;
  touch(mem, "memory.kmem.tcp.limit_in_bytes");
  assert_int_equal(f->cg.ops->create(&f->cg, "sb-1", &lim, &err), 0);
  v = slurp(mem, "memory.kmem.tcp.limit_in_bytes");
  assert_string_equal(v, "");
  free(v);
}

/* A kernel that had the file at setup but refuses it for a sandbox fails
 * the create: a sandbox that would be unbounded is not started. */
static void test_v1_create_fails_without_tcp_file(void **state) {
  struct fake_v1 *f = *state;
  _cleanup_free_ char *file = xasprintf(
      "%s/memory/warren/sb-1/memory.kmem.tcp.limit_in_bytes", f->root);
  struct wr_cgroup_limits lim = {.memory_bytes = 64 * MIB};
  wr_error_t err = {0};

  assert_int_equal(unlink(file), 0);
  assert_int_equal(f->cg.ops->create(&f->cg, "sb-1", &lim, &err), -1);
  assert_non_null(strstr(err.msg, "memory.kmem.tcp.limit_in_bytes"));
}

static void set_cpus(cpu_set_t *s, const int *cpus, size_t n) {
  CPU_ZERO(s);
  for (size_t i = 0; i < n; i++)
    CPU_SET(cpus[i], s);
}

/* ceil(N) CPUs of those allowed, at a place that moves with the slot; no
 * pinning when it would be all of them or there is no limit. */
static void test_affinity(void **state) {
  static const int four[] = {0, 1, 2, 3};
  static const int odd[] = {1, 3, 5};
  cpu_set_t allowed, out;

  (void)state;
  set_cpus(&allowed, four, 4);
  assert_false(wr_view_affinity(0, 0, &allowed, &out));
  assert_false(wr_view_affinity(4, 0, &allowed, &out));
  assert_false(wr_view_affinity(3.5, 0, &allowed, &out));
  assert_true(wr_view_affinity(1, 0, &allowed, &out));
  assert_int_equal(CPU_COUNT(&out), 1);
  assert_true(CPU_ISSET(0, &out));
  assert_true(wr_view_affinity(1, 1, &allowed, &out));
  assert_true(CPU_ISSET(1, &out));
  assert_true(wr_view_affinity(0.5, 6, &allowed, &out));
  assert_int_equal(CPU_COUNT(&out), 1);
  assert_true(CPU_ISSET(2, &out));
  /* 1.5 CPUs: two, wrapping around the end. */
  assert_true(wr_view_affinity(1.5, 3, &allowed, &out));
  assert_int_equal(CPU_COUNT(&out), 2);
  assert_true(CPU_ISSET(2, &out) && CPU_ISSET(3, &out));
  assert_true(wr_view_affinity(2, 3, &allowed, &out));
  assert_true(CPU_ISSET(2, &out) && CPU_ISSET(3, &out));
  assert_true(wr_view_affinity(3, 1, &allowed, &out));
  assert_int_equal(CPU_COUNT(&out), 3);
  assert_true(CPU_ISSET(3, &out) && CPU_ISSET(0, &out) && CPU_ISSET(1, &out));
  /* Only allowed CPUs are ever chosen. */
  set_cpus(&allowed, odd, 3);
  for (uint32_t slot = 0; slot < 7; slot++) {
    assert_true(wr_view_affinity(1, slot, &allowed, &out));
    assert_int_equal(CPU_COUNT(&out), 1);
    assert_true(CPU_ISSET(odd[slot % 3], &out));
  }
}

static void put(const char *dir, const char *file, const char *text) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);

  assert_int_equal(wr_write_file(path, text, strlen(text), 0644, NULL), 0);
}

/* The CPU time the idle pause reads: cpuacct.usage (ns) on v1, cpu.stat's
 * usage_usec on v2; unknown, never 0, when the file is missing or junk
 * (0 would read as "idle"). */
static void test_cpu_usage(void **state) {
  struct fake_v1 *f = *state;
  _cleanup_free_ char *acct = xasprintf("%s/cpuacct/warren/sb-1", f->root);
  _cleanup_free_ char *v2 = xasprintf("%s/v2/warren/sb-1", f->root);
  struct wr_cgroup cg2 = {.version = 2, .ops = &wr_cgroup_v2_ops};

  assert_int_equal(f->cg.ops->cpu_ns(&f->cg, "sb-1"), WR_CGROUP_CPU_UNKNOWN);
  assert_int_equal(wr_mkdir_p(acct, 0755, NULL), 0);
  f->cg.v1_mount[WR_CG_CPUACCT] = xasprintf("%s/cpuacct", f->root);
  assert_int_equal(f->cg.ops->cpu_ns(&f->cg, "sb-1"), WR_CGROUP_CPU_UNKNOWN);
  put(acct, "cpuacct.usage", "123456789\n");
  assert_int_equal(f->cg.ops->cpu_ns(&f->cg, "sb-1"), 123456789);
  put(acct, "cpuacct.usage", "12x\n");
  assert_int_equal(f->cg.ops->cpu_ns(&f->cg, "sb-1"), WR_CGROUP_CPU_UNKNOWN);

  cg2.parent = xstrdup("warren");
  cg2.v2_mount = xasprintf("%s/v2", f->root);
  assert_int_equal(wr_mkdir_p(v2, 0755, NULL), 0);
  assert_int_equal(cg2.ops->cpu_ns(&cg2, "sb-1"), WR_CGROUP_CPU_UNKNOWN);
  put(v2, "cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n");
  assert_int_equal(cg2.ops->cpu_ns(&cg2, "sb-1"), 2500000);
  put(v2, "cpu.stat", "user_usec 2000\nsystem_usec 500\n");
  assert_int_equal(cg2.ops->cpu_ns(&cg2, "sb-1"), WR_CGROUP_CPU_UNKNOWN);
  wr_cgroup_fini(&cg2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tcp_budget),
      cmocka_unit_test(test_tcp_limit),
      cmocka_unit_test_setup_teardown(test_v1_create_sets_tcp_limit, setup_v1,
                                      teardown_v1),
      cmocka_unit_test_setup_teardown(test_v1_create_fails_without_tcp_file,
                                      setup_v1, teardown_v1),
      cmocka_unit_test(test_affinity),
      cmocka_unit_test_setup_teardown(test_cpu_usage, setup_v1, teardown_v1),
  };

  if (getenv("WR_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("WR_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
