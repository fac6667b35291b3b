/*
 * cgroups: detect the host's layout (pure v2, or v1 with an optional
 * unified hierarchy beside it, as on hybrid hosts) and dispatch to the
 * version's implementation.
 */
#include "runtime/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <mntent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

static const char *ctrl_names[WR_CG_NCTRL] = {"memory",  "pids",   "cpu",
                                              "freezer", "cpuset", "cpuacct"};

/* Whether another controller already uses the hierarchy at `dir` (cpu and
 * cpuacct are often mounted together): its groups are made once. */
static bool mount_taken(const struct wr_cgroup *cg, const char *dir) {
  for (int i = 0; i < WR_CG_NCTRL; i++)
    if (cg->v1_mount[i] != NULL && strcmp(cg->v1_mount[i], dir) == 0)
      return true;
  return false;
}

static bool is_cgroup2(const char *path) {
  struct statfs sf;

  return statfs(path, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* Find v1 controller mount points in /proc/self/mounts. */
static void find_v1_mounts(struct wr_cgroup *cg) {
  _cleanup_fclose_ FILE *f = setmntent("/proc/self/mounts", "re");
  struct mntent *m;

  if (f == NULL)
    return;
  while ((m = getmntent(f)) != NULL) {
    if (strcmp(m->mnt_type, "cgroup") != 0)
      continue;
    for (int i = 0; i < WR_CG_NCTRL; i++) {
      if (cg->v1_mount[i] == NULL && hasmntopt(m, ctrl_names[i]) != NULL &&
          !mount_taken(cg, m->mnt_dir))
        cg->v1_mount[i] = xstrdup(m->mnt_dir);
    }
  }
}

/* The first cgroup2 mount in /proc/self/mounts, or NULL. */
static char *find_v2_mount(void) {
  _cleanup_fclose_ FILE *f = setmntent("/proc/self/mounts", "re");
  struct mntent *m;

  if (f == NULL)
    return NULL;
  while ((m = getmntent(f)) != NULL)
    if (strcmp(m->mnt_type, "cgroup2") == 0)
      return xstrdup(m->mnt_dir);
  return NULL;
}

static int init_v2(struct wr_cgroup *cg, const char *v2_mount,
                   wr_error_t *err) {
  cg->version = 2;
  cg->ops = &wr_cgroup_v2_ops;
  cg->v2_mount = v2_mount ? xstrdup(v2_mount) : find_v2_mount();
  if (cg->v2_mount == NULL)
    return wr_error_set(err, ENOENT, "no cgroup2 hierarchy is mounted");
  if (!is_cgroup2(cg->v2_mount))
    return wr_error_set(err, EINVAL, "`%s` is not a cgroup2 mount",
                        cg->v2_mount);
  return 0;
}

static int init_v1(struct wr_cgroup *cg, wr_error_t *err) {
  cg->version = 1;
  cg->ops = &wr_cgroup_v1_ops;
  find_v1_mounts(cg);
  if (cg->v1_mount[WR_CG_FREEZER] == NULL)
    return wr_error_set(err, ENOENT,
                        "cgroup v1 host without a freezer hierarchy");
  return 0;
}

int wr_cgroup_init(struct wr_cgroup *cg, int force_version, const char *parent,
                   const char *v2_mount, wr_error_t *err) {
  int r;

  memset(cg, 0, sizeof(*cg));
  cg->parent = xstrdup(parent);
  /* v2 asked for: on a hybrid host the unified hierarchy is not at
   * /sys/fs/cgroup (that is a tmpfs of v1 mounts), so init_v2 looks for
   * the cgroup2 mount unless one is named. */
  if (force_version == 2)
    r = init_v2(cg, v2_mount, err);
  else if (force_version == 0 && is_cgroup2("/sys/fs/cgroup"))
    r = init_v2(cg, v2_mount ? v2_mount : "/sys/fs/cgroup", err);
  else
    r = init_v1(cg, err);
  if (r < 0)
    return wr_error_wrap(err, "cgroups");
  return cg->ops->setup(cg, err);
}

/*
 * On v1, moving a process into a cgroup takes the kernel's threadgroup
 * rwsem for writing, which first waits for an RCU grace period: measured
 * here, 16.8 ms for each sandbox's first move, the largest single cost of
 * a create, while the child waits for it. A hierarchy mounted with
 * favordynmods (Linux 6.0) keeps that rwsem ready for writers (0.03 ms a
 * move), at the cost of slightly dearer forks and exits on the whole host,
 * and from some 6.x kernels on it stays so until reboot even after the
 * unmount. So it is the operator's choice (--cgroup-favor-dynmods): a
 * named hierarchy with no controllers, mounted at DIR and left there. On
 * v2 nothing is needed: sandboxes are cloned into their group.
 */
int wr_cgroup_favor_dynmods(const struct wr_cgroup *cg, const char *dir,
                            wr_error_t *err) {
  static const char opts[] = "none,name=warren-dynmods,favordynmods";
  struct statfs sf;

  if (cg->version == 2)
    return 0;
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", dir);
  if (statfs(dir, &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC)
    return 0;
  if (mount("cgroup", dir, "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) <
      0)
    return wr_error_set(
        err, errno, "mount a cgroup hierarchy with favordynmods on `%s`%s", dir,
        errno == EINVAL ? " (it needs Linux 6.0 or later)" : "");
  return 0;
}

void wr_cgroup_fini(struct wr_cgroup *cg) {
  free(cg->parent);
  free(cg->v2_mount);
  for (int i = 0; i < WR_CG_NCTRL; i++)
    free(cg->v1_mount[i]);
  memset(cg, 0, sizeof(*cg));
}

uint64_t wr_cgroup_tcp_budget(const char *tcp_mem, uint64_t page_size) {
  unsigned long long low, pressure, high;

  if (tcp_mem == NULL ||
      sscanf(tcp_mem, "%llu %llu %llu", &low, &pressure, &high) != 3 ||
      pressure == 0 || pressure > UINT64_MAX / 2 / page_size)
    return 0;
  /* Whole pages: the kernel rounds a limit down to one, and half of an
   * odd pressure threshold is not. */
  return pressure / 2 * page_size;
}

uint64_t wr_cgroup_tcp_limit(uint64_t memory_bytes, uint64_t budget) {
  uint64_t want = memory_bytes > 0 ? memory_bytes : WR_CGROUP_TCP_UNLIMITED;

  return want < budget ? want : budget;
}

int wr_cgroup_write(const char *dir, const char *file, const char *value,
                    wr_error_t *err) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  size_t len = strlen(value);

  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  if (write(fd, value, len) != (ssize_t)len)
    return wr_error_set(err, errno, "write `%s` to `%s`", value, path);
  return 0;
}

int wr_cgroup_read(const char *dir, const char *file, char *buf, size_t size) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = read(fd, buf, size - 1);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return (int)n;
}

int wr_cgroup_rmdir(const char *dir, wr_error_t *err) {
  struct timespec pause = {0, 2 * 1000 * 1000};

  /* Tasks that were just killed may still be counted for a moment. */
  for (int i = 0; i < 500; i++) {
    if (rmdir(dir) == 0 || errno == ENOENT)
      return 0;
    if (errno != EBUSY)
      break;
    nanosleep(&pause, NULL);
  }
  return wr_error_set(err, errno, "remove cgroup `%s`", dir);
}
