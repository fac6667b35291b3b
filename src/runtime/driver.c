/*
 * The ns driver's entry points: prepare, start, stop, freeze, remove and
 * re-attach sandboxes, each a short pipeline over the steps in userns.c,
 * mount.c, disk.c, cgroup*.c, seccomp.c and spawn.c.
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "init/init.h"

#define HELLO_TIMEOUT_MS 10000

/* Copy warren-init into a sealed, executable memfd: sandboxes exec it from
 * there, so nothing inside can reach (let alone overwrite) a host file
 * through /proc/1/exe. */
static int load_init(const char *path, wr_error_t *err) {
  _cleanup_free_ char *data = NULL;
  size_t len = 0;
  int fd;

  if (wr_read_file(path, 64 << 20, &data, &len, err) < 0)
    return wr_error_wrap(err, "load warren-init");
#ifdef MFD_EXEC
  fd = memfd_create("warren-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL)
#endif
    fd = memfd_create("warren-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return wr_error_set(err, errno, "memfd_create");
  if (wr_write_all(fd, data, len, err) < 0 ||
      fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    int e = errno;
    close(fd);
    return wr_error_set(err, e, "seal warren-init");
  }
  return fd;
}

/* --cgroup-favor-dynmods: its hierarchy lives in the state root, like
 * everything else warrend mounts (see wr_cgroup_favor_dynmods). */
static int favor_dynmods(struct wr_runtime *rt,
                         const struct wr_runtime_config *cfg, wr_error_t *err) {
  _cleanup_free_ char *dir = NULL;

  if (!cfg->cgroup_favor_dynmods)
    return 0;
  dir = xasprintf("%s/cgroup-dynmods", cfg->root);
  return wr_cgroup_favor_dynmods(&rt->cg, dir, err);
}

int wr_rt_new(const struct wr_runtime_config *cfg, struct wr_runtime **out,
              wr_error_t *err) {
  struct wr_runtime *rt = xcalloc(1, sizeof(*rt));
  int force = cfg->cgroup_mode == WR_CGROUP_V1   ? 1
              : cfg->cgroup_mode == WR_CGROUP_V2 ? 2
                                                 : 0;

  rt->init_memfd = -1;
  rt->root = xstrdup(cfg->root);
  rt->sandboxes_dir = xasprintf("%s/sandboxes", cfg->root);
  rt->mkfs_path = wr_disk_find_mkfs();
  rt->loop_ok = wr_disk_supported();
  if (sched_getaffinity(0, sizeof(rt->cpus), &rt->cpus) < 0)
    CPU_ZERO(&rt->cpus);
  if (wr_mkdir_p(rt->sandboxes_dir, 0700, err) < 0 ||
      (rt->init_memfd = load_init(cfg->init_path, err)) < 0 ||
      wr_seccomp_build(&rt->seccomp_progs, &rt->seccomp_len, err) < 0 ||
      wr_cgroup_init(&rt->cg, force, cfg->cgroup_parent, cfg->cgroup_v2_mount,
                     err) < 0 ||
      favor_dynmods(rt, cfg, err) < 0 ||
      (!cfg->cgroup_favor_dynmods &&
       wr_cgroup_primer_new(&rt->cg, &rt->primer, err) < 0) ||
      wr_netns_pool_new(cfg->netns_pool, &rt->netns_pool, err) < 0) {
    wr_rt_free(rt);
    return -1;
  }
  rt->view = wr_view_new(cfg->root);
  *out = rt;
  return 0;
}

void wr_rt_free(struct wr_runtime *rt) {
  if (rt == NULL)
    return;
  if (rt->init_memfd >= 0)
    close(rt->init_memfd);
  free(rt->seccomp_progs);
  wr_cgroup_fini(&rt->cg);
  free(rt->root);
  free(rt->sandboxes_dir);
  free(rt->mkfs_path);
  wr_netns_pool_free(rt->netns_pool);
  wr_cgroup_primer_free(rt->primer);
  wr_view_free(rt->view);
  free(rt);
}

const char *wr_rt_cgroup_version(const struct wr_runtime *rt) {
  return rt->cg.version == 2 ? "v2" : "v1";
}

bool wr_rt_can_limit(const struct wr_runtime *rt, const char *what) {
  if (strcmp(what, "memory") == 0)
    return rt->cg.available[WR_CG_MEMORY];
  if (strcmp(what, "pids") == 0)
    return rt->cg.available[WR_CG_PIDS];
  if (strcmp(what, "cpus") == 0)
    return rt->cg.available[WR_CG_CPU];
  if (strcmp(what, "disk") == 0)
    return rt->mkfs_path != NULL && rt->loop_ok;
  return false;
}

/* The image is sparse, so this only refuses what can never fit; many
 * sandboxes together may still promise more than the host has (see
 * docs/isolation.md). */
int wr_rt_check_disk(const struct wr_runtime *rt, uint64_t bytes,
                     wr_error_t *err) {
  char want[32], have[32];
  struct statvfs st;
  uint64_t avail;

  if (!wr_rt_can_limit(rt, "disk"))
    return wr_error_setx(err, EINVAL, "this host cannot limit disk (%s)",
                         rt->mkfs_path == NULL ? "no mkfs.ext4: install "
                                                 "e2fsprogs"
                                               : "no /dev/loop-control");
  wr_format_size(bytes, want, sizeof(want));
  if (bytes < WR_DISK_MIN)
    return wr_error_setx(err, EINVAL, "disk must be at least 16 MiB, not %s",
                         want);
  if (statvfs(rt->sandboxes_dir, &st) < 0)
    return wr_error_set(err, errno, "statvfs `%s`", rt->sandboxes_dir);
  avail = (uint64_t)st.f_bavail * st.f_frsize;
  wr_format_size(avail, have, sizeof(have));
  if (bytes > avail)
    return wr_error_setx(
        err, EINVAL, "disk %s is more than the host has free (%s)", want, have);
  return 0;
}

char *wr_rt_sandbox_dir(const struct wr_runtime *rt, const char *id) {
  return xasprintf("%s/%s", rt->sandboxes_dir, id);
}

/* mkdir and chown a new directory; an existing one is left alone (it may
 * be the mounted root, where a chown would change the sandbox's "/"). */
static int mkdir_owned(const char *path, mode_t mode, uid_t owner,
                       wr_error_t *err) {
  if (mkdir(path, mode) < 0)
    return errno == EEXIST ? 0 : wr_error_set(err, errno, "mkdir `%s`", path);
  if (chown(path, owner, owner) < 0)
    return wr_error_set(err, errno, "chown `%s`", path);
  return 0;
}

/* With a disk limit: the image (formatted when the sandbox is created;
 * later it must exist, or the sandbox's files are gone) mounted at
 * DIR/disk. */
static int ensure_disk(const struct wr_runtime *rt, const struct wr_rt_spec *s,
                       const char *dir, bool create, wr_error_t *err) {
  if (create && wr_disk_create(dir, s->disk_bytes, wr_rt_id_base(s->slot),
                               rt->mkfs_path, err) < 0)
    return -1;
  return wr_disk_mount(dir, err);
}

/* The sandbox's layers (in the disk image's filesystem when it has a disk
 * limit) and the mount point of its root. */
static int make_dirs(const struct wr_runtime *rt, const struct wr_rt_spec *s,
                     const char *dir, const char *layers, bool create,
                     wr_error_t *err) {
  _cleanup_free_ char *upper = xasprintf("%s/upper", layers);
  _cleanup_free_ char *work = xasprintf("%s/work", layers);
  _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", dir);

  if (s->disk_bytes > 0 && ensure_disk(rt, s, dir, create, err) < 0)
    return -1;
  if (mkdir_owned(upper, 0755, wr_rt_id_base(s->slot), err) < 0 ||
      mkdir_owned(work, 0700, 0, err) < 0 ||
      mkdir_owned(rootfs, 0755, 0, err) < 0)
    return -1;
  return 0;
}

/* A small file inside the sandbox's root, owned by its root. Whatever
 * the sandbox put at that name (a FIFO, a symlink) is replaced, never
 * opened; a directory there fails the operation with a clear error. */
static int write_in_root(int rootfd, const char *path, const char *text,
                         uid_t owner, wr_error_t *err) {
  return wr_write_in_root(rootfd, "in the sandbox", path, text, strlen(text),
                          0644, owner, err);
}

int wr_rt_seed_names(int rootfd, const char *hostname, uint32_t slot,
                     wr_error_t *err) {
  _cleanup_free_ char *hosts = NULL;
  _cleanup_free_ char *line = xasprintf("%s\n", hostname);
  uid_t owner = wr_rt_id_base(slot);

  hosts = xasprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
                    "ip6-loopback\n127.0.1.1\t%s\n",
                    hostname);
  if (write_in_root(rootfd, "/etc/hostname", line, owner, err) < 0 ||
      write_in_root(rootfd, "/etc/hosts", hosts, owner, err) < 0)
    return -1;
  return 0;
}

/* The mount points warren needs, and the files that name the sandbox. */
static int seed_root(int rootfd, const struct wr_rt_spec *s, wr_error_t *err) {
  static const char *const dirs[] = {"proc", "dev", "sys", "tmp", "etc"};

  for (size_t i = 0; i < WR_ARRAY_SIZE(dirs); i++) {
    if (mkdirat(rootfd, dirs[i], 0755) < 0 && errno != EEXIST)
      return wr_error_set(err, errno, "mkdir `/%s`", dirs[i]);
  }
  if (wr_rt_seed_names(rootfd, s->hostname, s->slot, err) < 0)
    return wr_error_wrap(err, "seed root");
  return 0;
}

/*
 * One mount or unmount of a sandbox's root at a time. After a reboot, a
 * start on a worker thread and a files API call on the loop thread may
 * both find the root unmounted; two attachments of one disk image would be
 * two filesystems on it, and two overlays would share one upper layer. An
 * flock on the sandbox's directory serialises them (and rm against both).
 */
static int lock_dir(const char *dir, wr_error_t *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", dir);
  while (flock(fd, LOCK_EX) < 0) {
    if (errno != EINTR) {
      int e = errno;
      close(fd);
      return wr_error_set(err, e, "lock `%s`", dir);
    }
  }
  return fd;
}

/* Mount what is missing, the disk image before the overlay on it. A
 * mounted root is left alone: its disk is in use even if someone unmounted
 * DIR/disk, and mounting the image again would be a second filesystem on
 * it. Only `create` (when the sandbox is made) makes its directory and
 * formats a new image; later, a missing directory or image is an error,
 * never an empty sandbox. */
static int ensure_mounted(const struct wr_runtime *rt,
                          const struct wr_rt_spec *s, int userns_fd,
                          bool create, wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, s->id);
  _cleanup_free_ char *layers =
      s->disk_bytes > 0 ? wr_disk_layers_dir(dir) : xstrdup(dir);
  _cleanup_close_ int lock = -1;

  if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
    return wr_error_set(err, errno, "mkdir `%s`", dir);
  if ((lock = lock_dir(dir, err)) < 0)
    return -1;
  if (wr_rootfs_is_mounted(dir))
    return 0;
  if (make_dirs(rt, s, dir, layers, create, err) < 0)
    return -1;
  return wr_rootfs_mount(dir, layers, s, userns_fd, err);
}

/* Where warren's CA goes inside: its own file, with the extra CAs after
 * it (NODE_EXTRA_CA_CERTS points there: Node reads one extra file), and
 * appended with them to the system bundle that OpenSSL, curl, Python,
 * pip and git read. The image's bundle is the base each time, so a
 * sandbox that is started again gets the current CAs once, and a CA the
 * host no longer has leaves it. The file sits where Debian's
 * update-ca-certificates looks, so running that inside keeps them. */
#define CA_DIR "/usr/local/share/ca-certificates"
#define CA_FILE CA_DIR "/warren-ca.crt"
#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BUNDLE_MAX (16u << 20)

static char *own_cas(const struct wr_rt_spec *s) {
  const char *extra = s->extra_cas != NULL ? s->extra_cas : "";

  return xasprintf("%s%s%s", s->ca_pem != NULL ? s->ca_pem : "",
                   *extra != '\0' ? "# CAs of the host and --sandbox-ca\n" : "",
                   extra);
}

static int seed_trust(int rootfd, const struct wr_rt_spec *s, wr_error_t *err) {
  struct wr_files_ctx fc = {.rootfd = rootfd,
                            .id_base = wr_rt_id_base(s->slot),
                            .id_count = WR_ID_COUNT};
  _cleanup_free_ char *image_bundle = NULL, *bundle = NULL, *own = NULL;
  _cleanup_free_ char *path = NULL;
  size_t len = 0;

  if (s->ca_pem == NULL && (s->extra_cas == NULL || *s->extra_cas == '\0'))
    return 0;
  own = own_cas(s);
  if (wr_files_mkdir(&fc, CA_DIR, 0755, true, err) < 0 ||
      write_in_root(rootfd, CA_FILE, own, fc.id_base, err) < 0)
    return wr_error_wrap(err, "install warren's CA");
  path = xasprintf("%s" CA_BUNDLE, s->image_dir);
  if (wr_read_file(path, BUNDLE_MAX, &image_bundle, &len, NULL) < 0)
    image_bundle = xstrdup("");
  bundle = xasprintf("%s%s# warren's CA (the egress proxy)\n%s", image_bundle,
                     len > 0 && image_bundle[len - 1] != '\n' ? "\n" : "", own);
  if (wr_files_mkdir(&fc, "/etc/ssl/certs", 0755, true, err) < 0 ||
      write_in_root(rootfd, CA_BUNDLE, bundle, fc.id_base, err) < 0)
    return wr_error_wrap(err, "install warren's CA");
  return 0;
}

/* A direct-mode workspace's state before the sandbox's first process, for
 * `warren diff` (see manifest.c). */
static int save_baseline(const struct wr_runtime *rt,
                         const struct wr_rt_spec *spec, wr_error_t *err) {
  _cleanup_free_ char *dir = NULL, *file = NULL;
  _cleanup_close_ int ws = -1;

  if (spec->ws_path == NULL || spec->ws_clone)
    return 0;
  dir = wr_rt_sandbox_dir(rt, spec->id);
  file = xasprintf("%s/" WR_WS_MANIFEST, dir);
  ws = wr_workspace_open(spec, false, err);
  if (ws < 0 || wr_manifest_save(ws, file, err) < 0)
    return wr_error_wrap(err, "record the workspace `%s`", spec->ws_path);
  return 0;
}

/* Mount the root with an id-mapped image and write the files that name the
 * sandbox; returns the root (wr_rt_open_root's fd). */
static int prepare_in(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                      int userns, wr_error_t *err) {
  _cleanup_close_ int rootfd = -1;

  if (ensure_mounted(rt, spec, userns, true, err) < 0)
    return wr_error_wrap(err, "prepare sandbox `%s`", spec->id);
  rootfd = wr_rt_open_root(rt, spec, err);
  if (rootfd < 0 || seed_root(rootfd, spec, err) < 0 ||
      wr_snapshot_seed_unique(rootfd, spec, err) < 0 ||
      seed_trust(rootfd, spec, err) < 0)
    return wr_error_wrap(err, "prepare sandbox `%s`", spec->id);
  return steal_fd(&rootfd);
}

int wr_rt_prepare(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                  wr_error_t *err) {
  _cleanup_close_ int userns = -1, rootfd = -1;

  if (wr_userns_create(spec->slot, &userns, err) < 0 ||
      (rootfd = prepare_in(rt, spec, userns, err)) < 0 ||
      save_baseline(rt, spec, err) < 0)
    return wr_error_wrap(err, "prepare sandbox `%s`", spec->id);
  return 0;
}

int wr_rt_open_root(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                    wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, spec->id);
  _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", dir);
  int fd;

  if (!wr_rootfs_is_mounted(dir)) {
    _cleanup_close_ int userns = -1;
    if (wr_userns_create(spec->slot, &userns, err) < 0 ||
        ensure_mounted(rt, spec, userns, false, err) < 0)
      return -1;
  }
  fd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", rootfs);
  if (wr_workspace_mount(fd, spec, err) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A connection to warren-init's control socket. nonblock: fail with
 * EAGAIN instead of waiting when its backlog is full (a frozen init
 * accepts nothing, and each daemon start that reattached to it left one
 * connection queued). */
static int connect_ctl(const char *ctl_path, bool nonblock, wr_error_t *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int s;

  if (wr_strlcpy(sa.sun_path, ctl_path, sizeof(sa.sun_path)) < 0)
    return wr_error_set(err, ENAMETOOLONG, "`%s`", ctl_path);
  s = socket(AF_UNIX,
             SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
  if (s < 0)
    return wr_error_set(err, errno, "socket");
  if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(s);
    return wr_error_set(err, e, "connect to warren-init");
  }
  return s;
}

/* Connect to warren-init and wait for its HELLO_OK: that is when its setup
 * (user namespace, capabilities, seccomp) is done. */
static int hello(const char *ctl_path, int *out, wr_error_t *err) {
  _cleanup_close_ int s = connect_ctl(ctl_path, false, err);
  char buf[WR_INIT_MAX_MSG];
  int fds[WR_INIT_MAX_FDS];
  size_t nfds = 0;
  struct pollfd p;
  wr_buf_t msg;
  ssize_t n;

  if (s < 0)
    return -1;
  wr_buf_init(&msg);
  wr_init_encode_simple(&msg, WR_INIT_HELLO, 1, NULL, 0, 0);
  n = wr_init_send(s, msg.data, msg.len, NULL, 0, err);
  wr_buf_free(&msg);
  if (n < 0)
    return -1;
  p = (struct pollfd){.fd = s, .events = POLLIN};
  if (poll(&p, 1, HELLO_TIMEOUT_MS) != 1)
    return wr_error_set(err, ETIMEDOUT, "warren-init did not answer");
  n = wr_init_recv(s, buf, sizeof(buf), fds, &nfds, err);
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
  if (n <= 0)
    return n == 0 ? wr_error_set(err, ECONNRESET, "warren-init exited") : -1;
  *out = steal_fd(&s);
  return 0;
}

uint64_t wr_rt_proc_start_time(pid_t pid) {
  char path[64], buf[1024];
  _cleanup_close_ int fd = -1;
  unsigned long long start = 0;
  ssize_t n;
  char *p;

  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
    return 0;
  buf[n] = '\0';
  /* The command name may contain spaces and parentheses: skip past the
   * last ')', then field 22 (starttime) is the 20th after it. */
  p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  for (int field = 2; field < 22 && p != NULL; field++)
    p = strchr(p + 1, ' ');
  if (p != NULL)
    start = strtoull(p + 1, NULL, 10);
  return start;
}

struct start_fds {
  int log, seccomp, cgroup_dir;
  int cgroups[WR_CGROUP_MAX_HIER];
  size_t ncgroups;
};

static void close_start_fds(struct start_fds *f) {
  wr_closep(&f->log);
  wr_closep(&f->cgroup_dir);
  wr_closep(&f->seccomp);
  for (size_t i = 0; i < f->ncgroups; i++)
    close(f->cgroups[i]);
}

/*
 * The sandbox's cgroups, first thing in a start. On v1 the start then
 * begins the grace period that moving warren-init in will wait for
 * (cgprime.c), while it mounts the root and prepares the rest. Making a
 * cgroup takes the kernel's cgroup_mutex, which a move holds through its
 * wait: so the groups are made before, not after.
 */
static int make_cgroups(struct wr_runtime *rt, const struct wr_rt_spec *s,
                        wr_error_t *err) {
  struct wr_cgroup_limits lim = {s->memory_bytes, s->cpus, s->pids};

  /* A cgroup left by a sandbox that died with the host is emptied first. */
  if (rt->cg.ops->kill(&rt->cg, s->id, NULL) < 0 ||
      rt->cg.ops->create(&rt->cg, s->id, &lim, err) < 0)
    return wr_error_wrap(err, "start sandbox `%s`", s->id);
  wr_cgroup_prime(rt->primer);
  return 0;
}

static int open_start_fds(struct wr_runtime *rt, const struct wr_rt_spec *s,
                          const char *dir, struct start_fds *f,
                          wr_error_t *err) {
  _cleanup_free_ char *log = xasprintf("%s/init.log", dir);

  f->log = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f->log < 0)
    return wr_error_set(err, errno, "open `%s`", log);
  f->seccomp = wr_seccomp_memfd(rt->seccomp_progs, rt->seccomp_len, err);
  if (f->seccomp < 0)
    return -1;
  f->cgroup_dir = rt->cg.ops->open_dir(&rt->cg, s->id);
  return rt->cg.ops->open_procs(&rt->cg, s->id, f->cgroups, &f->ncgroups, err);
}

/* What the sandbox sees of the host's size (view.c): the lxcfs mount its
 * /proc files are bound from (returned, caller frees) and its CPUs. */
static char *view_args(struct wr_runtime *rt, const struct wr_rt_spec *s,
                       struct wr_spawn_args *a) {
  a->pin_cpus = wr_view_affinity(s->cpus, s->slot, &rt->cpus, &a->cpus);
  a->lxcfs = wr_view_lxcfs(rt->view, &a->lxcfs_ro);
  return (char *)a->lxcfs;
}

static void fail_start(struct wr_runtime *rt, const char *id, int pidfd) {
  if (pidfd >= 0) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
  }
  wr_rt_cleanup(rt, id, NULL);
}

/* Start warren-init in the user namespace `userns` (the root is mounted). */
static int start_in(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                    int userns, struct wr_rt_instance *inst, wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, spec->id);
  _cleanup_free_ char *ctl = xasprintf("%s/ctl.sock", dir);
  struct start_fds f = {.log = -1, .seccomp = -1, .cgroup_dir = -1};
  struct wr_spawn_args a = {
      .rootfs = NULL,
      .ctl_path = ctl,
      .hostname = spec->hostname,
      .id_base = wr_rt_id_base(spec->slot),
      .init_memfd = rt->init_memfd,
      .nofile = spec->nofile ? spec->nofile : 65536,
      .nproc = 0,
  };
  _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", dir);
  _cleanup_free_ char *lxcfs = NULL;
  int r, pidfd = -1;

  struct wr_netns netns = {.fd = -1};

  a.rootfs = rootfs;
  a.netns = &netns;
  lxcfs = view_args(rt, spec, &a);
  memset(inst, 0, sizeof(*inst));
  inst->pidfd = inst->ctl = inst->rootfd = -1;
  r = open_start_fds(rt, spec, dir, &f, err);
  if (r == 0)
    r = wr_netns_take(rt->netns_pool, &netns, err);
  if (r == 0) {
    a.userns_fd = userns;
    a.log_fd = f.log;
    a.seccomp_fd = f.seccomp;
    a.cgroup_dir = f.cgroup_dir;
    memcpy(a.cgroup_fds, f.cgroups, sizeof(f.cgroups));
    a.ncgroup_fds = f.ncgroups;
    unlink(ctl);
    r = wr_spawn_init(&a, &inst->pid, &pidfd, err);
  }
  close_start_fds(&f);
  wr_netns_close(&netns);
  if (r == 0 && hello(ctl, &inst->ctl, err) < 0) {
    _cleanup_free_ char *tail = wr_rt_init_log_tail(rt, spec->id, 400);
    if (tail != NULL && *tail != '\0')
      wr_error_wrap(err, "%s", tail);
    r = -1;
  }
  if (r < 0) {
    fail_start(rt, spec->id, pidfd);
    return wr_error_wrap(err, "start sandbox `%s`", spec->id);
  }
  inst->pidfd = pidfd;
  inst->start_time = wr_rt_proc_start_time(inst->pid);
  return 0;
}

int wr_rt_start(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                struct wr_rt_instance *inst, wr_error_t *err) {
  _cleanup_close_ int userns = -1;

  _cleanup_close_ int rootfd = -1;

  if (make_cgroups(rt, spec, err) < 0)
    return -1;
  if (wr_userns_create(spec->slot, &userns, err) < 0 ||
      ensure_mounted(rt, spec, userns, false, err) < 0 ||
      (rootfd = wr_rt_open_root(rt, spec, err)) < 0 ||
      seed_trust(rootfd, spec, err) < 0)
    return wr_error_wrap(err, "start sandbox `%s`", spec->id);
  if (start_in(rt, spec, userns, inst, err) < 0)
    return -1;
  inst->rootfd = steal_fd(&rootfd);
  return 0;
}

/* The workspace's baseline on a thread of its own, while init starts. */
struct baseline_job {
  const struct wr_runtime *rt;
  const struct wr_rt_spec *spec;
  wr_error_t err;
  int result;
};

static void *baseline_thread(void *arg) {
  struct baseline_job *b = arg;

  b->result = save_baseline(b->rt, b->spec, &b->err);
  return NULL;
}

/* One user namespace serves both the id-mapped mount and warren-init. A
 * direct-mode workspace is recorded while warren-init starts: init runs
 * nothing of the sandbox's own until a client asks, and no client can
 * before this returns, so the record is the state before any of the
 * sandbox's code ran. */
int wr_rt_create(struct wr_runtime *rt, const struct wr_rt_spec *spec,
                 struct wr_rt_instance *inst, wr_error_t *err) {
  _cleanup_close_ int userns = -1, rootfd = -1;
  struct baseline_job b = {.rt = rt, .spec = spec};
  pthread_t thread;
  bool walking = false;
  int r;

  if (make_cgroups(rt, spec, err) < 0)
    return -1;
  if (wr_userns_create(spec->slot, &userns, err) < 0)
    return wr_error_wrap(err, "create sandbox `%s`", spec->id);
  if ((rootfd = prepare_in(rt, spec, userns, err)) < 0)
    return -1;
  if (spec->ws_path != NULL && !spec->ws_clone)
    walking = pthread_create(&thread, NULL, baseline_thread, &b) == 0;
  if (!walking)
    b.result = save_baseline(rt, spec, &b.err);
  r = b.result < 0 && !walking ? -1 : start_in(rt, spec, userns, inst, err);
  if (walking)
    pthread_join(thread, NULL);
  if (b.result < 0) {
    if (r == 0) {
      wr_closep(&inst->pidfd);
      wr_closep(&inst->ctl);
    }
    *err = b.err;
    return wr_error_wrap(err, "create sandbox `%s`", spec->id);
  }
  if (r == 0)
    inst->rootfd = steal_fd(&rootfd);
  return r;
}

int wr_rt_kill(struct wr_runtime *rt, const char *id, int pidfd,
               wr_error_t *err) {
  if (pidfd >= 0)
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
  return rt->cg.ops->kill(&rt->cg, id, err);
}

int wr_rt_freeze(struct wr_runtime *rt, const char *id, bool frozen,
                 wr_error_t *err) {
  return rt->cg.ops->freeze(&rt->cg, id, frozen, err);
}

bool wr_rt_populated(struct wr_runtime *rt, const char *id) {
  return rt->cg.ops->populated(&rt->cg, id);
}

uint64_t wr_rt_memory_usage(struct wr_runtime *rt, const char *id) {
  return rt->cg.ops->memory(&rt->cg, id);
}

uint64_t wr_rt_cpu_usage(struct wr_runtime *rt, const char *id) {
  return rt->cg.ops->cpu_ns(&rt->cg, id);
}

int wr_rt_cleanup(struct wr_runtime *rt, const char *id, wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, id);
  _cleanup_free_ char *ctl = xasprintf("%s/ctl.sock", dir);
  int r;

  r = rt->cg.ops->kill(&rt->cg, id, err);
  if (r == 0)
    r = rt->cg.ops->remove(&rt->cg, id, err);
  if (unlink(ctl) < 0 && errno != ENOENT && r == 0)
    r = wr_error_set(err, errno, "remove `%s`", ctl);
  return r;
}

int wr_rt_remove(struct wr_runtime *rt, const char *id, wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, id);
  _cleanup_free_ char *gone = xasprintf("%s.removing", dir);
  _cleanup_close_ int lock = lock_dir(dir, NULL);

  (void)lock; /* held (or not, if the directory is gone) until we return */
  if (wr_rt_cleanup(rt, id, err) < 0 || wr_workspace_umount(dir, err) < 0 ||
      wr_rootfs_umount(dir, err) < 0 || wr_disk_umount(dir, err) < 0)
    return wr_error_wrap(err, "remove sandbox `%s`", id);
  /* Out of its place first, in one step: a daemon killed during the
   * removal leaves either the whole directory or none at its path, and
   * the next one finishes a removal it finds so (wr_rt_sandbox_present);
   * it never mistakes half a directory for a stopped sandbox's. */
  if (rename(dir, gone) < 0 && errno != ENOENT)
    return wr_error_set(err, errno, "remove sandbox `%s`: rename", id);
  if (wr_rm_rf(gone, err) < 0)
    return wr_error_wrap(err, "remove sandbox `%s`", id);
  return 0;
}

bool wr_rt_sandbox_present(const struct wr_runtime *rt, const char *id) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, id);
  struct stat st;

  return lstat(dir, &st) == 0 || errno != ENOENT;
}

static bool ctl_hung_up(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};

  return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

int wr_rt_reattach(struct wr_runtime *rt, const char *id,
                   struct wr_rt_instance *inst, wr_error_t *err) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, id);
  _cleanup_free_ char *ctl = xasprintf("%s/ctl.sock", dir);
  struct ucred cred;
  socklen_t len = sizeof(cred);

  memset(inst, 0, sizeof(*inst));
  inst->pidfd = inst->ctl = inst->rootfd = -1;
  /* No HELLO here: a paused sandbox's init cannot answer until it is
   * thawed, but the kernel completes the connection and names the peer
   * while the socket's backlog has room (EAGAIN when not: the caller
   * thaws the sandbox for a moment; see recover_one in daemon.c). */
  inst->ctl = connect_ctl(ctl, true, err);
  if (inst->ctl < 0)
    return -1;
  if (getsockopt(inst->ctl, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
      cred.pid <= 0) {
    wr_closep(&inst->ctl);
    return wr_error_set(err, errno ? errno : ESRCH, "identify warren-init");
  }
  inst->pid = cred.pid;
  inst->pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
  if (inst->pidfd < 0) {
    wr_closep(&inst->ctl);
    return wr_error_set(err, errno, "pidfd_open %d", (int)cred.pid);
  }
  /* If init died between connect and pidfd_open, its pid may already name
   * another process. Init's death hangs up our connection first, so a live
   * connection now proves the pidfd is init's. */
  if (ctl_hung_up(inst->ctl)) {
    wr_closep(&inst->pidfd);
    wr_closep(&inst->ctl);
    return wr_error_setx(err, ECONNREFUSED, "warren-init exited");
  }
  inst->start_time = wr_rt_proc_start_time(inst->pid);
  return 0;
}

char *wr_rt_init_log_tail(struct wr_runtime *rt, const char *id, size_t max) {
  _cleanup_free_ char *dir = wr_rt_sandbox_dir(rt, id);
  _cleanup_free_ char *path = xasprintf("%s/init.log", dir);
  _cleanup_free_ char *data = NULL;
  size_t len = 0;

  if (wr_read_file(path, 1 << 20, &data, &len, NULL) < 0)
    return NULL;
  while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' '))
    data[--len] = '\0';
  if (len > max)
    return xstrdup(data + len - max);
  return steal_ptr(&data);
}
