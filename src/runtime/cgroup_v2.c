/*
 * cgroups v2: one directory per sandbox in the unified hierarchy, with the
 * memory, pids and cpu controllers enabled on the parent when the host
 * offers them. Freezing uses cgroup.freeze and killing cgroup.kill.
 */
#include "runtime/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

static char *dir_of(const struct wr_cgroup *cg, const char *id) {
  if (id == NULL)
    return xasprintf("%s/%s", cg->v2_mount, cg->parent);
  return xasprintf("%s/%s/%s", cg->v2_mount, cg->parent, id);
}

/* The value of a "key value" line in dir/file, copied into out; false
 * when the file or the key is missing. */
static bool keyed_value(const char *dir, const char *file, const char *key,
                        char *out, size_t size) {
  char buf[1024], *save = NULL;
  size_t klen = strlen(key);

  if (wr_cgroup_read(dir, file, buf, sizeof(buf)) < 0)
    return false;
  for (char *line = strtok_r(buf, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save))
    if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
      snprintf(out, size, "%s", line + klen + 1);
      return true;
    }
  return false;
}

/* Whether a "key value" line in dir/file has value `want`. */
static bool keyed_equals(const char *dir, const char *file, const char *key,
                         const char *want) {
  char v[64];

  return keyed_value(dir, file, key, v, sizeof(v)) && strcmp(v, want) == 0;
}

/* Enable the controllers the root offers on the root and on the parent, so
 * that sandbox groups can use them. Missing ones are recorded. */
static void enable_controllers(struct wr_cgroup *cg, const char *parent) {
  static const struct {
    int ctrl;
    const char *name;
  } ctrls[] = {
      {WR_CG_MEMORY, "memory"}, {WR_CG_PIDS, "pids"}, {WR_CG_CPU, "cpu"}};
  char have[512];

  if (wr_cgroup_read(cg->v2_mount, "cgroup.controllers", have, sizeof(have)) <
      0)
    have[0] = '\0';
  for (size_t i = 0; i < WR_ARRAY_SIZE(ctrls); i++) {
    _cleanup_free_ char *plus = xasprintf("+%s", ctrls[i].name);
    if (strstr(have, ctrls[i].name) == NULL)
      continue;
    wr_cgroup_write(cg->v2_mount, "cgroup.subtree_control", plus, NULL);
    cg->available[ctrls[i].ctrl] =
        wr_cgroup_write(parent, "cgroup.subtree_control", plus, NULL) == 0;
  }
  cg->available[WR_CG_FREEZER] = true;
}

static int set_limits(const char *dir, const struct wr_cgroup_limits *lim,
                      wr_error_t *err) {
  char v[64];

  if (lim->memory_bytes > 0) {
    snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->memory_bytes);
    if (wr_cgroup_write(dir, "memory.max", v, err) < 0)
      return -1;
    wr_cgroup_write(dir, "memory.swap.max", "0", NULL);
  }
  if (lim->pids > 0) {
    snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->pids);
    if (wr_cgroup_write(dir, "pids.max", v, err) < 0)
      return -1;
  }
  if (lim->cpus > 0) {
    snprintf(v, sizeof(v), "%lld 100000", (long long)(lim->cpus * 100000));
    if (wr_cgroup_write(dir, "cpu.max", v, err) < 0)
      return -1;
  }
  return 0;
}

static int v2_setup(struct wr_cgroup *cg, wr_error_t *err) {
  _cleanup_free_ char *parent = dir_of(cg, NULL);

  if (mkdir(parent, 0755) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "create cgroup `%s`", parent);
  enable_controllers(cg, parent);
  return 0;
}

static int v2_create(const struct wr_cgroup *cg, const char *id,
                     const struct wr_cgroup_limits *lim, wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "create cgroup `%s`", dir);
  return lim ? set_limits(dir, lim, err) : 0;
}

static int v2_set_limits(const struct wr_cgroup *cg, const char *id,
                         const struct wr_cgroup_limits *lim, wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  return set_limits(dir, lim, err);
}

static int v2_open_procs(const struct wr_cgroup *cg, const char *id, int *fds,
                         size_t *n, wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, id);
  _cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir);

  fds[0] = open(path, O_WRONLY | O_CLOEXEC);
  if (fds[0] < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  *n = 1;
  return 0;
}

/* Wait until cgroup.events says `key want`. A group removed meanwhile (a
 * clean-up job racing a kill job) will never say anything again; it has
 * nothing left in it, which is what a kill waits for. */
static int v2_open_dir(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int wait_events(const char *dir, const char *key, const char *want,
                       wr_error_t *err) {
  struct timespec pause = {0, 1000 * 1000};
  bool emptied = strcmp(key, "populated") == 0 && strcmp(want, "0") == 0;

  for (int i = 0; i < 5000; i++) {
    if (keyed_equals(dir, "cgroup.events", key, want))
      return 0;
    if (access(dir, F_OK) < 0 && errno == ENOENT)
      return emptied ? 0
                     : wr_error_set(err, ENOENT, "cgroup `%s` is gone", dir);
    nanosleep(&pause, NULL);
  }
  return wr_error_set(err, ETIMEDOUT, "cgroup `%s`: %s did not become %s", dir,
                      key, want);
}

static int v2_freeze(const struct wr_cgroup *cg, const char *id, bool frozen,
                     wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  if (wr_cgroup_write(dir, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
    return -1;
  return wait_events(dir, "frozen", frozen ? "1" : "0", err);
}

static int v2_kill(const struct wr_cgroup *cg, const char *id,
                   wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  if (access(dir, F_OK) < 0)
    return 0;
  if (wr_cgroup_write(dir, "cgroup.kill", "1", err) < 0)
    return -1;
  return wait_events(dir, "populated", "0", err);
}

static int v2_remove(const struct wr_cgroup *cg, const char *id,
                     wr_error_t *err) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  return wr_cgroup_rmdir(dir, err);
}

static bool v2_populated(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, id);

  return keyed_equals(dir, "cgroup.events", "populated", "1");
}

static uint64_t v2_memory(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, id);
  char buf[64];

  if (wr_cgroup_read(dir, "memory.current", buf, sizeof(buf)) < 0)
    return 0;
  return strtoull(buf, NULL, 10);
}

/* cpu.stat's usage_usec is there without the cpu controller too. */
static uint64_t v2_cpu_ns(const struct wr_cgroup *cg, const char *id) {
  _cleanup_free_ char *dir = dir_of(cg, id);
  char v[32];
  uint64_t usec;

  if (!keyed_value(dir, "cpu.stat", "usage_usec", v, sizeof(v)) ||
      wr_parse_u64(v, 0, UINT64_MAX / 1000, &usec, NULL) < 0)
    return WR_CGROUP_CPU_UNKNOWN;
  return usec * 1000;
}

const struct wr_cgroup_ops wr_cgroup_v2_ops = {
    .setup = v2_setup,
    .create = v2_create,
    .open_procs = v2_open_procs,
    .open_dir = v2_open_dir,
    .freeze = v2_freeze,
    .set_limits = v2_set_limits,
    .kill = v2_kill,
    .remove = v2_remove,
    .populated = v2_populated,
    .memory = v2_memory,
    .cpu_ns = v2_cpu_ns,
};
