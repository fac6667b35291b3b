/*
 * cgroups v1: one directory per controller hierarchy (memory, pids, cpu,
 * freezer; and cpuset and cpuacct, without limits, for LXCFS: see
 * cgroup.h). Hierarchies that are not mounted are skipped; their limits
 * are then not enforced (wr_rt_can_limit says so).
 *
 * Every sandbox's memory group also gets a TCP buffer limit, with or
 * without --memory, and the parent one for all of them (see
 * wr_cgroup_tcp_budget): v1 charges socket buffers to nobody otherwise.
 */
#include "runtime/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

static char *dir_of(const struct wr_cgroup *cg, int ctrl, const char *id) {
  if (cg->v1_mount[ctrl] == NULL)
    return NULL;
  if (id == NULL)
    return xasprintf("%s/%s", cg->v1_mount[ctrl], cg->parent);
  return xasprintf("%s/%s/%s", cg->v1_mount[ctrl], cg->parent, id);
}

static int set_limits(const struct wr_cgroup *cg, const char *id,
                      const struct wr_cgroup_limits *lim, wr_error_t *err) {
  _cleanup_free_ char *mem = dir_of(cg, WR_CG_MEMORY, id);
  _cleanup_free_ char *pids = dir_of(cg, WR_CG_PIDS, id);
  _cleanup_free_ char *cpu = dir_of(cg, WR_CG_CPU, id);
  char v[64];

  if (mem != NULL && cg->tcp_budget > 0) {
    snprintf(v, sizeof(v), "%llu",
             (unsigned long long)wr_cgroup_tcp_limit(lim->memory_bytes,
                                                     cg->tcp_budget));
    if (wr_cgroup_write(mem, "memory.kmem.tcp.limit_in_bytes", v, err) < 0)
      return -1;
  }
  if (lim->memory_bytes > 0 && mem != NULL) {
    snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->memory_bytes);
    if (wr_cgroup_write(mem, "memory.limit_in_bytes", v, err) < 0)
      return -1;
    /* Without swap accounting the file is absent; that is fine. */
    wr_cgroup_write(mem, "memory.memsw.limit_in_bytes", v, NULL);
  }
  if (lim->pids > 0 && pids != NULL) {
    snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->pids);
    if (wr_cgroup_write(pids, "pids.max", v, err) < 0)
      return -1;
  }
  if (lim->cpus > 0 && cpu != NULL) {
    snprintf(v, sizeof(v), "%lld", (long long)(lim->cpus * 100000));
    if (wr_cgroup_write(cpu, "cpu.cfs_period_us", "100000", err) < 0 ||
        wr_cgroup_write(cpu, "cpu.cfs_quota_us", v, err) < 0)
      return -1;
  }
  return 0;
}

/* The budget of socket buffers for all sandboxes, on the parent group
 * (charges go up the hierarchy). A kernel without the file (v1 memory
 * controller compiled out, or the file gone) leaves the budget 0, and
 * socket buffers are then bounded only by the host's tcp_mem. */
static void set_tcp_budget(struct wr_cgroup *cg, const char *parent) {
  char text[128], v[32];
  uint64_t budget;

  if (wr_cgroup_read("/proc/sys/net/ipv4", "tcp_mem", text, sizeof(text)) < 0)
    return;
  budget = wr_cgroup_tcp_budget(text, (uint64_t)sysconf(_SC_PAGESIZE));
  snprintf(v, sizeof(v), "%llu", (unsigned long long)budget);
  if (budget > 0 &&
      wr_cgroup_write(parent, "memory.kmem.tcp.limit_in_bytes", v, NULL) == 0)
    cg->tcp_budget = budget;
  else
    wr_warn("cgroup v1: cannot limit socket buffers in `%s`: sandboxes' TCP "
            "buffers are bounded only by the host's tcp_mem",
            parent);
}

/* A cpuset group takes no task until it has CPUs and memory nodes: the
 * parent gets the root's, and passes them on to each sandbox's group
 * (cgroup.clone_children). */
static void init_cpuset(const struct wr_cgroup *cg, const char *parent) {
  static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
  char have[256], root[256];

  for (size_t i = 0; i < WR_ARRAY_SIZE(files); i++)
    if (wr_cgroup_read(parent, files[i], have, sizeof(have)) >= 0 &&
        (have[0] == '\0' || have[0] == '\n') &&
        wr_cgroup_read(cg->v1_mount[WR_CG_CPUSET], files[i], root,
                       sizeof(root)) > 0)
      wr_cgroup_write(parent, files[i], root, NULL);
  wr_cgroup_write(parent, "cgroup.clone_children", "1", NULL);
}

static int v1_setup(struct wr_cgroup *cg, wr_error_t *err) {
  for (int i = 0; i < WR_CG_NCTRL; i++) {
    _cleanup_free_ char *parent = dir_of(cg, i, NULL);
    if (parent == NULL)
      continue;
    if (mkdir(parent, 0755) < 0 && errno != EEXIST)
      return wr_error_set(err, errno, "create cgroup `%s`", parent);
    if (i == WR_CG_MEMORY) {
      wr_cgroup_write(parent, "memory.use_hierarchy", "1", NULL);
      set_tcp_budget(cg, parent);
    }
    if (i == WR_CG_CPUSET)
      init_cpuset(cg, parent);
    cg->available[i] = true;
  }
  return 0;
}

static int v1_create(const struct wr_cgroup *cg, const char *id,
                     const struct wr_cgroup_limits *lim, wr_error_t *err) {
  for (int i = 0; i < WR_CG_NCTRL; i++) {
    _cleanup_free_ char *dir = dir_of(cg, i, id);
    if (dir != NULL && mkdir(dir, 0755) < 0 && errno != EEXIST)
      return wr_error_set(err, errno, "create cgroup `%s`", dir);
  }
  return lim ? set_limits(cg, id, lim, err) : 0;
}

static int v1_open_procs(const struct wr_cgroup *cg, const char *id, int *fds,
                         size_t *n, wr_error_t *err) {
  *n = 0;
  for (int i = 0; i < WR_CG_NCTRL; i++) {
    _cleanup_free_ char *dir = dir_of(cg, i, id);
    _cleanup_free_ char *path = NULL;
    int fd;
    if (dir == NULL)
      continue;
    path = xasprintf("%s/cgroup.procs", dir);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      for (size_t j = 0; j < *n; j++)
        close(fds[j]);
      return wr_error_set(err, errno, "open `%s`", path);
    }
    fds[(*n)++] = fd;
  }
  return 0;
}

static int v1_open_dir(const struct wr_cgroup *cg, const char *id) {
  (void)cg;
  (void)id;
  return -1;
}

/* Wait until freezer.state reads `want` (FROZEN or THAWED). */
static int freezer_wait(const char *dir, const char *want, wr_error_t *err) {
  struct timespec pause = {0, 1000 * 1000};
  char state[32];

  for (int i = 0; i < 5000; i++) {
    if (wr_cgroup_read(dir, "freezer.state", state, sizeof(state)) < 0)
      return wr_error_set(err, errno, "read `%s/freezer.state`", dir);
    if (strncmp(state, want, strlen(want)) == 0)
      return 0;
    /* A task that was mid-fork can leave the group FREEZING: ask again. */
    if (strcmp(want, "FROZEN") == 0)
      wr_cgroup_write(dir, "freezer.state", "FROZEN", NULL);
    nanosleep(&pause, NULL);
  }
  return wr_error_set(err, ETIMEDOUT, "cgroup `%s` did not become %s", dir,
                      want);
}

static int v1_freeze(const struct wr_cgroup *cg, const char *id, bool frozen,
                     wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, WR_CG_FREEZER, id);
  const char *state = frozen ? "FROZEN" : "THAWED";

  if (wr_cgroup_write(dir, "freezer.state", state, err) < 0)
    return -1;
  return freezer_wait(dir, state, err);
}

/* Send SIGKILL to every task listed in dir/cgroup.procs; returns how many
 * were listed. */
static int kill_listed(const char *dir) {
  _cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir);
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  int count = 0, pid;

  if (f == NULL)
    return 0;
  while (fscanf(f, "%d", &pid) == 1) {
    if (pid > 0)
      kill(pid, SIGKILL);
    count++;
  }
  return count;
}

/*
 * v1 has no cgroup.kill: freeze so nothing can fork, SIGKILL every task,
 * thaw so the signals are delivered, and repeat until the group is empty.
 */
static int v1_kill(const struct wr_cgroup *cg, const char *id,
                   wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, WR_CG_FREEZER, id);
  struct timespec pause = {0, 1000 * 1000};

  for (int round = 0; round < 5000; round++) {
    int n;
    wr_cgroup_write(dir, "freezer.state", "FROZEN", NULL);
    n = kill_listed(dir);
    wr_cgroup_write(dir, "freezer.state", "THAWED", NULL);
    if (n == 0)
      return 0;
    nanosleep(&pause, NULL);
  }
  return wr_error_set(err, ETIMEDOUT, "processes in `%s` would not die", dir);
}

static int v1_remove(const struct wr_cgroup *cg, const char *id,
                     wr_error_t *err) {
  int r = 0;

  for (int i = 0; i < WR_CG_NCTRL; i++) {
    _cleanup_free_ char *dir = dir_of(cg, i, id);
    if (dir != NULL && wr_cgroup_rmdir(dir, r == 0 ? err : NULL) < 0)
      r = -1;
  }
  return r;
}

static bool v1_populated(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, WR_CG_FREEZER, id);
  char buf[64];

  return wr_cgroup_read(dir, "cgroup.procs", buf, sizeof(buf)) > 0;
}

static uint64_t v1_memory(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, WR_CG_MEMORY, id);
  char buf[64];

  if (dir == NULL ||
      wr_cgroup_read(dir, "memory.usage_in_bytes", buf, sizeof(buf)) < 0)
    return 0;
  return strtoull(buf, NULL, 10);
}

static uint64_t v1_cpu_ns(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, WR_CG_CPUACCT, id);
  char buf[64];
  uint64_t ns;

  buf[0] = '\0';
  if (dir == NULL || wr_cgroup_read(dir, "cpuacct.usage", buf, sizeof(buf)) < 0)
    return WR_CGROUP_CPU_UNKNOWN;
  buf[strcspn(buf, "\n")] = '\0';
  if (wr_parse_u64(buf, 0, UINT64_MAX - 1, &ns, NULL) < 0)
    return WR_CGROUP_CPU_UNKNOWN;
  return ns;
}

const struct wr_cgroup_ops wr_cgroup_v1_ops = {
    .setup = v1_setup,
    .create = v1_create,
    .open_procs = v1_open_procs,
    .open_dir = v1_open_dir,
    .freeze = v1_freeze,
    .set_limits = set_limits,
    .kill = v1_kill,
    .remove = v1_remove,
    .populated = v1_populated,
    .memory = v1_memory,
    .cpu_ns = v1_cpu_ns,
};
