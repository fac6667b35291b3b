/*
 * What a sandbox sees of the host's size: /proc files that programs size
 * themselves by, and the CPUs it may run on.
 *
 * /proc/meminfo, cpuinfo, stat, uptime, loadavg and swaps come from LXCFS,
 * a FUSE filesystem that answers each read by the reading process's
 * cgroups: MemTotal is the memory limit, the CPUs are the cfs quota
 * (--enable-cfs), uptime counts from the start of the reader's pid
 * namespace, and the load average is its cgroup's (-l). spawn.c binds
 * those files over the sandbox's /proc.
 *
 * One lxcfs serves every sandbox of a state root. warrend starts it
 * detached (its own session, reparented to init) with its mount at
 * ROOT/lxcfs, so that it outlives warrend as the sandboxes do, and finds
 * it again after a restart. When it dies, the files bound into running
 * sandboxes answer ENOTCONN until those sandboxes restart (a FUSE mount
 * whose daemon is gone cannot be revived); the next sandbox start notices,
 * detaches the dead mount and starts a new one. Without lxcfs on the host
 * sandboxes see the host's figures.
 *
 * `nproc` and Node's os.availableParallelism() count the CPUs of the
 * process's affinity mask, not /proc: a sandbox with --cpus N is started
 * on ceil(N) of the host's CPUs (wr_view_affinity).
 *
 * Threads: wr_view_lxcfs may run on several worker threads at once; the
 * restart is serialised by the lock inside struct wr_view.
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

#define LXCFS_START_MS 5000

struct wr_view {
  char *bin;     /* lxcfs, or NULL when the host has none */
  char *setsid;  /* util-linux setsid, to detach it */
  char *dir;     /* ROOT/lxcfs, the mount */
  char *pidfile; /* ROOT/lxcfs.pid */
  char *log;     /* ROOT/lxcfs.log */
  pthread_mutex_t lock;
};

static char *find_program(const char *const *paths, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (access(paths[i], X_OK) == 0)
      return xstrdup(paths[i]);
  return NULL;
}

enum mount_state { LXCFS_ABSENT, LXCFS_ALIVE, LXCFS_DEAD };

/* statfs on a FUSE mount always asks the daemon (no cache), so it tells a
 * live lxcfs from a dead one (ENOTCONN) and from no mount at all. */
static enum mount_state lxcfs_state(const char *dir, bool *ro) {
  struct statfs sf;

  if (statfs(dir, &sf) < 0)
    return errno == ENOTCONN || errno == ECONNABORTED ? LXCFS_DEAD
                                                      : LXCFS_ABSENT;
  if (ro != NULL)
    *ro = (sf.f_flags & ST_RDONLY) != 0;
  return sf.f_type == FUSE_SUPER_MAGIC ? LXCFS_ALIVE : LXCFS_ABSENT;
}

/* setsid --fork lxcfs ...: setsid's child execs lxcfs in a session of its
 * own and setsid returns at once, so lxcfs is nobody's child but init's
 * and no zombie of it waits on warrend. stdio: /dev/null and the log.
 * Read-only (-o ro), so that files bound from it refuse writers (lxcfs
 * itself would let a file open for writing). */
static int spawn_lxcfs(const struct wr_view *v, wr_error_t *err) {
  char *const argv[] = {"setsid",
                        "--fork",
                        v->bin,
                        "--pidfile",
                        v->pidfile,
                        "--enable-cfs",
                        "--enable-loadavg",
                        "-o",
                        "ro",
                        v->dir,
                        NULL};
  char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t none, all;
  int r, status;
  pid_t pid;

  sigemptyset(&none);
  sigfillset(&all);
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) ||
      posix_spawn_file_actions_addopen(&fa, 1, v->log,
                                       O_WRONLY | O_CREAT | O_TRUNC, 0600) ||
      posix_spawn_file_actions_adddup2(&fa, 1, 2) ||
      posix_spawn_file_actions_addclosefrom_np(&fa, 3) ||
      posix_spawn_file_actions_addchdir_np(&fa, "/") ||
      posix_spawnattr_setsigmask(&at, &none) ||
      posix_spawnattr_setsigdefault(&at, &all) ||
      posix_spawnattr_setflags(&at,
                               POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (r == 0)
    r = posix_spawn(&pid, v->setsid, &fa, &at, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (r != 0)
    return wr_error_set(err, r > 0 ? r : ENOMEM, "run `%s`", v->bin);
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return wr_error_set(err, errno, "wait for `%s`", v->setsid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return wr_error_setx(err, EIO, "`%s --fork` failed", v->setsid);
  return 0;
}

/* Wait for the new lxcfs's mount (it mounts, then serves). */
static int wait_mounted(const struct wr_view *v, wr_error_t *err) {
  struct timespec pause = {0, 2 * 1000 * 1000};

  for (int i = 0; i < LXCFS_START_MS / 2; i++) {
    if (lxcfs_state(v->dir, NULL) == LXCFS_ALIVE)
      return 0;
    nanosleep(&pause, NULL);
  }
  return wr_error_setx(err, ETIMEDOUT, "lxcfs did not mount `%s` (see `%s`)",
                       v->dir, v->log);
}

/* Called with the lock held: a dead mount is detached (sandboxes keep
 * their own binds of it) and a new lxcfs started. */
static int ensure_lxcfs(struct wr_view *v, wr_error_t *err) {
  enum mount_state st = lxcfs_state(v->dir, NULL);

  if (st == LXCFS_ALIVE)
    return 0;
  if (st == LXCFS_DEAD && umount2(v->dir, MNT_DETACH) < 0)
    return wr_error_set(err, errno, "unmount the dead lxcfs at `%s`", v->dir);
  if (mkdir(v->dir, 0755) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", v->dir);
  if (spawn_lxcfs(v, err) < 0 || wait_mounted(v, err) < 0)
    return -1;
  wr_info("lxcfs serves sandboxes' /proc views from `%s`", v->dir);
  return 0;
}

struct wr_view *wr_view_new(const char *root) {
  static const char *const lxcfs[] = {"/usr/bin/lxcfs", "/usr/local/bin/lxcfs",
                                      "/bin/lxcfs"};
  static const char *const setsid[] = {"/usr/bin/setsid", "/bin/setsid"};
  struct wr_view *v = xcalloc(1, sizeof(*v));
  wr_error_t e = {0};

  pthread_mutex_init(&v->lock, NULL);
  v->bin = find_program(lxcfs, WR_ARRAY_SIZE(lxcfs));
  v->setsid = find_program(setsid, WR_ARRAY_SIZE(setsid));
  v->dir = xasprintf("%s/lxcfs", root);
  v->pidfile = xasprintf("%s/lxcfs.pid", root);
  v->log = xasprintf("%s/lxcfs.log", root);
  if (v->bin == NULL || v->setsid == NULL) {
    wr_warn("no %s on this host: sandboxes see the host's memory, CPUs, "
            "uptime and load in /proc (install lxcfs)",
            v->bin == NULL ? "lxcfs" : "setsid");
    return v;
  }
  /* A failure here is not the daemon's: each start tries again. */
  if (ensure_lxcfs(v, &e) < 0)
    wr_warn("lxcfs: %s", e.msg);
  return v;
}

void wr_view_free(struct wr_view *v) {
  if (v == NULL)
    return;
  pthread_mutex_destroy(&v->lock);
  free(v->bin);
  free(v->setsid);
  free(v->dir);
  free(v->pidfile);
  free(v->log);
  free(v);
}

char *wr_view_lxcfs(struct wr_view *v, bool *ro) {
  wr_error_t e = {0};
  int r;

  if (v == NULL || v->bin == NULL || v->setsid == NULL)
    return NULL;
  if (lxcfs_state(v->dir, ro) == LXCFS_ALIVE)
    return xstrdup(v->dir);
  pthread_mutex_lock(&v->lock);
  r = ensure_lxcfs(v, &e);
  pthread_mutex_unlock(&v->lock);
  *ro = true;
  if (r < 0) {
    wr_warn("lxcfs: %s; the sandbox sees the host's figures", e.msg);
    return NULL;
  }
  return xstrdup(v->dir);
}

bool wr_view_affinity(double cpus, uint32_t slot, const cpu_set_t *allowed,
                      cpu_set_t *out) {
  int have = CPU_COUNT(allowed), want, start, taken = 0;

  if (cpus <= 0 || have <= 0)
    return false;
  want = (int)ceil(cpus - 1e-9);
  if (want >= have)
    return false;
  /* Sandboxes with consecutive slots start on different CPUs. */
  start = (int)(((uint64_t)slot * (uint64_t)want) % (uint64_t)have);
  CPU_ZERO(out);
  for (int i = 0, seen = 0; i < CPU_SETSIZE && taken < want; i++) {
    if (!CPU_ISSET(i, allowed))
      continue;
    if (seen++ >= start) {
      CPU_SET(i, out);
      taken++;
    }
  }
  for (int i = 0; i < CPU_SETSIZE && taken < want; i++) {
    if (CPU_ISSET(i, allowed) && !CPU_ISSET(i, out)) {
      CPU_SET(i, out);
      taken++;
    }
  }
  return true;
}
