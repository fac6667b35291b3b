/*
 * Starting warren-init in a new sandbox.
 *
 * The daemon clones a child into new pid, mount, uts and ipc namespaces.
 * Still host root, and so owning all of them, the child binds the control
 * socket (in the host's network namespace, so that its host path is not in
 * the sandbox's /proc/net/unix), joins the network namespace prepared for
 * it (netns.c: loopback, the filter that sends everything else to
 * warrend, warrend's listeners, which it hands on to warren-init), builds
 * /proc and /dev inside the sandbox's root, pivots into it, enters a new
 * cgroup namespace once it is in the sandbox's cgroups, and execs
 * warren-init from a sealed memfd.
 *
 * Joining cgroups: on cgroup v2 the child is cloned straight into its group
 * (CLONE_INTO_CGROUP). Moving a process between cgroups waits for an RCU
 * grace period (7-20 ms measured here), so on v1 the parent moves the child
 * while the child builds its root, and the child waits for that only at the
 * end. warren-init
 * then joins the sandbox's user namespace and drops privileges itself
 * (see src/init). Because the namespaces belong to the host's user
 * namespace, root inside the sandbox can never change its mounts, network,
 * hostname or cgroups.
 *
 * The child may be forked from a threaded daemon, so between clone and
 * exec it only makes system calls: every string it needs is prepared
 * beforehand, and it reports a failure as an errno and a step name through
 * a pipe.
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

struct child_report {
  int err;
  char step[64];
};

/* Everything the child needs, formatted before clone. */
struct child_ctx {
  const struct wr_spawn_args *a;
  /* The child's copies of its fds, moved above 63 so that placing them at
   * 0..5 for warren-init cannot clobber one another. */
  int report_fd, ctl, log, sec, uns, exe;
  int netns;            /* the prepared network namespace */
  int net[WR_NET_NFDS]; /* warrend's listeners, for init to hold */
  int joined_fd;        /* the parent closes its end once the child is moved */
  char dev_opts[96];
  char pts_opts[96];
  char shm_opts[96];
  char nofile[24], nproc[24];
  char *argv[16];
  char *view_src[WR_VIEW_NFILES]; /* lxcfs's files, or NULL */
};

static const char *const view_files[] = {WR_VIEW_FILES};
_Static_assert(WR_ARRAY_SIZE(view_files) == WR_VIEW_NFILES, "view files");

static void child_fail(const struct child_ctx *c, const char *step) {
  struct child_report r = {.err = errno};
  size_t n = strlen(step);

  memcpy(r.step, step, n < sizeof(r.step) ? n : sizeof(r.step) - 1);
  if (write(c->report_fd, &r, sizeof(r)) < 0)
    _exit(126);
  _exit(127);
}

#define CHECK(c, expr, step)                                                   \
  do {                                                                         \
    if ((expr) < 0)                                                            \
      child_fail(c, step);                                                     \
  } while (0)

/* Wait until the parent says it has moved us into the sandbox's cgroups
 * (one byte; EOF alone means it failed), then make that the root of a new
 * cgroup namespace. */
static void enter_cgroups(const struct child_ctx *c) {
  char byte;
  ssize_t n;

  do
    n = read(c->joined_fd, &byte, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) {
    errno = EIO;
    child_fail(c, "join cgroups");
  }
  close(c->joined_fd);
  CHECK(c, unshare(CLONE_NEWCGROUP), "unshare cgroup namespace");
}

/* Join the network namespace prepared for the sandbox (netns.c: lo, routes
 * through it, the filter, warrend's listeners), owned by the host's user
 * namespace like the others. */
static void setup_net(const struct child_ctx *c) {
  CHECK(c, setns(c->netns, CLONE_NEWNET), "join the network namespace");
}

/* The control socket is bound on the host path before the pivot, by the
 * process that becomes warren-init, so SO_PEERCRED names init itself; and
 * before joining the sandbox's network namespace: a socket is listed in
 * /proc/net/unix of the namespace it was made in, and a pathname socket
 * is reached by its path from any namespace. */
static void bind_ctl(struct child_ctx *c) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  mode_t old;
  int s;

  memcpy(sa.sun_path, c->a->ctl_path, strlen(c->a->ctl_path) + 1);
  s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  CHECK(c, s, "control socket");
  old = umask(0077);
  CHECK(c, bind(s, (struct sockaddr *)&sa, sizeof(sa)), "bind control");
  umask(old);
  CHECK(c, listen(s, 8), "listen control");
  c->ctl = fcntl(s, F_DUPFD_CLOEXEC, 64);
  CHECK(c, c->ctl, "dup control");
  close(s);
}

/* Move the inherited fds out of the way (see struct child_ctx). */
static void lift_fds(struct child_ctx *c, int report_fd, int joined_fd) {
  c->report_fd = fcntl(report_fd, F_DUPFD_CLOEXEC, 64);
  if (c->report_fd < 0)
    _exit(125);
  c->joined_fd = fcntl(joined_fd, F_DUPFD_CLOEXEC, 64);
  c->log = fcntl(c->a->log_fd, F_DUPFD_CLOEXEC, 64);
  c->sec = fcntl(c->a->seccomp_fd, F_DUPFD_CLOEXEC, 64);
  c->uns = fcntl(c->a->userns_fd, F_DUPFD_CLOEXEC, 64);
  c->exe = fcntl(c->a->init_memfd, F_DUPFD_CLOEXEC, 64);
  c->netns = fcntl(c->a->netns->fd, F_DUPFD_CLOEXEC, 64);
  for (int i = 0; i < WR_NET_NFDS; i++)
    c->net[i] = c->a->netns->listen[i] < 0
                    ? -1
                    : fcntl(c->a->netns->listen[i], F_DUPFD_CLOEXEC, 64);
  if (c->netns < 0 || c->net[WR_NET_PROXY4] < 0 || c->net[WR_NET_DNS4] < 0)
    child_fail(c, "dup network fds");
  if (c->log < 0 || c->sec < 0 || c->uns < 0 || c->exe < 0 || c->joined_fd < 0)
    child_fail(c, "dup fds");
}

static void mknod_dev(const struct child_ctx *c, const char *name, unsigned maj,
                      unsigned min) {
  CHECK(c, mknodat(AT_FDCWD, name, S_IFCHR | 0666, makedev(maj, min)), name);
  CHECK(c, chmod(name, 0666), name);
  CHECK(c, lchown(name, c->a->id_base, c->a->id_base), name);
}

/* A minimal /dev: the safe character devices, a private devpts, shm. */
static void setup_dev(const struct child_ctx *c) {
  static const char *const links[][2] = {
      {"/proc/self/fd", "dev/fd"},       {"/proc/self/fd/0", "dev/stdin"},
      {"/proc/self/fd/1", "dev/stdout"}, {"/proc/self/fd/2", "dev/stderr"},
      {"pts/ptmx", "dev/ptmx"},
  };

  CHECK(c, mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, c->dev_opts),
        "mount /dev");
  mknod_dev(c, "dev/null", 1, 3);
  mknod_dev(c, "dev/zero", 1, 5);
  mknod_dev(c, "dev/full", 1, 7);
  mknod_dev(c, "dev/random", 1, 8);
  mknod_dev(c, "dev/urandom", 1, 9);
  mknod_dev(c, "dev/tty", 5, 0);
  for (size_t i = 0; i < WR_ARRAY_SIZE(links); i++)
    CHECK(c, symlink(links[i][0], links[i][1]), links[i][1]);
  CHECK(c, mkdir("dev/pts", 0755), "mkdir /dev/pts");
  CHECK(c, mkdir("dev/shm", 01777), "mkdir /dev/shm");
  CHECK(
      c,
      mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, c->pts_opts),
      "mount devpts");
  CHECK(c, mount("shm", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, c->shm_opts),
        "mount /dev/shm");
}

static void bind_ro(const struct child_ctx *c, const char *src, const char *dst,
                    unsigned long extra) {
  CHECK(c, mount(src, dst, NULL, MS_BIND | MS_REC, NULL), dst);
  CHECK(c,
        mount(NULL, dst, NULL,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
              NULL),
        dst);
}

/* The files programs size themselves by, from lxcfs (view.c): the
 * sandbox's own memory, CPUs, uptime and load, read-only (lxcfs would let
 * a file open for writing; its mount is read-only, unless an older warrend
 * started it). A bind that fails (lxcfs died since the daemon looked)
 * leaves the host's file: a start never fails for a view. */
static void bind_views(const struct child_ctx *c) {
  const unsigned long ro =
      MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
  char dst[32];

  for (size_t i = 0; i < WR_ARRAY_SIZE(view_files); i++) {
    if (c->view_src[i] == NULL)
      continue;
    snprintf(dst, sizeof(dst), "proc/%s", view_files[i]);
    if (mount(c->view_src[i], dst, NULL, MS_BIND, NULL) < 0)
      return;
    if (!c->a->lxcfs_ro)
      CHECK(c, mount(NULL, dst, NULL, ro, NULL), dst);
  }
}

/* /proc for the new pid namespace, with the entries that expose or affect
 * the host hidden (kernel memory, keys, timers; the host's boot command
 * line, its disks and their statistics, its modules) or read-only
 * (sysctls, irqs, sysrq, and the host-wide pressure files, where any
 * writer could otherwise add triggers that the kernel polls on every
 * pressure change). Entries missing on this kernel are skipped. */
static void setup_proc(const struct child_ctx *c) {
  static const char *const hidden[] = {
      "proc/kcore",       "proc/keys",          "proc/timer_list",
      "proc/sched_debug", "proc/latency_stats", "proc/kallsyms",
      "proc/kpagecount",  "proc/kpageflags",    "proc/kpagecgroup",
      "proc/config.gz",   "proc/cmdline",       "proc/diskstats",
      "proc/partitions",  "proc/modules"};
  static const char *const empty[] = {"proc/acpi", "proc/scsi", "proc/driver"};
  static const char *const ro[] = {"proc/sys",           "proc/irq",
                                   "proc/bus",           "proc/fs",
                                   "proc/sysrq-trigger", "proc/pressure"};

  CHECK(c,
        mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
        "mount /proc");
  for (size_t i = 0; i < WR_ARRAY_SIZE(hidden); i++)
    if (access(hidden[i], F_OK) == 0)
      CHECK(c, mount("dev/null", hidden[i], NULL, MS_BIND, NULL), hidden[i]);
  bind_views(c);
  for (size_t i = 0; i < WR_ARRAY_SIZE(empty); i++)
    if (access(empty[i], F_OK) == 0)
      CHECK(c,
            mount("tmpfs", empty[i], "tmpfs",
                  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0"),
            empty[i]);
  for (size_t i = 0; i < WR_ARRAY_SIZE(ro); i++)
    if (access(ro[i], F_OK) == 0)
      bind_ro(c, ro[i], ro[i], MS_NOEXEC);
}

static void setup_root(const struct child_ctx *c) {
  CHECK(c, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
        "make mounts private");
  CHECK(c, chdir(c->a->rootfs), "chdir rootfs");
  /* The root is a mount point already; binding it onto itself gives the
   * sandbox a mount of its own to pivot into. Recursively: a workspace is
   * mounted below it (workspace.c). */
  CHECK(c, mount(".", ".", NULL, MS_BIND | MS_REC, NULL), "bind rootfs");
  CHECK(c, chdir(c->a->rootfs), "chdir rootfs");
  setup_dev(c);
  setup_proc(c);
  CHECK(c, syscall(SYS_pivot_root, ".", "."), "pivot_root");
  CHECK(c, umount2(".", MNT_DETACH), "detach old root");
  CHECK(c, chdir("/"), "chdir /");
}

/* Put the fds warren-init expects in place (0 /dev/null, 1-2 the log, 3
 * control, 4 seccomp, 5 userns, 6-9 warrend's listeners, which it only
 * holds) and mark every other one close-on-exec. */
static void setup_fds(const struct child_ctx *c) {
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);

  CHECK(c, null, "open /dev/null");
  CHECK(c, dup2(null, 0), "dup2 stdin");
  CHECK(c, dup2(c->log, 1), "dup2 stdout");
  CHECK(c, dup2(c->log, 2), "dup2 stderr");
  CHECK(c, dup2(c->ctl, 3), "dup2 control");
  CHECK(c, dup2(c->sec, 4), "dup2 seccomp");
  CHECK(c, dup2(c->uns, 5), "dup2 userns");
  /* A listener the host cannot have (IPv6) is /dev/null (fd 0 by now). */
  for (int i = 0; i < WR_NET_NFDS; i++)
    CHECK(c, dup2(c->net[i] >= 0 ? c->net[i] : 0, WR_NET_FD_BASE + i),
          "dup2 listener");
  CHECK(c,
        syscall(SYS_close_range, WR_NET_FD_BASE + WR_NET_NFDS, ~0U,
                CLOSE_RANGE_CLOEXEC),
        "close_range");
}

static _Noreturn void child_main(struct child_ctx *c, int report_fd,
                                 int joined_fd) {
  static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
  sigset_t all;

  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  lift_fds(c, report_fd, joined_fd);
  bind_ctl(c);
  setup_net(c);
  CHECK(c, sethostname(c->a->hostname, strlen(c->a->hostname)), "sethostname");
  if (c->a->pin_cpus)
    CHECK(c, sched_setaffinity(0, sizeof(c->a->cpus), &c->a->cpus),
          "set the CPUs");
  setup_root(c);
  enter_cgroups(c);
  setup_fds(c);
  syscall(SYS_execveat, c->exe, "", c->argv, envp, AT_EMPTY_PATH);
  child_fail(c, "exec warren-init");
  _exit(127);
}

static void prepare_ctx(struct child_ctx *c, const struct wr_spawn_args *a) {
  size_t n = 0;

  memset(c, 0, sizeof(*c));
  c->a = a;
  snprintf(c->dev_opts, sizeof(c->dev_opts), "mode=755,size=64k,uid=%u,gid=%u",
           a->id_base, a->id_base);
  snprintf(c->pts_opts, sizeof(c->pts_opts),
           "newinstance,ptmxmode=0666,mode=0620,gid=%u", a->id_base + 5);
  snprintf(c->shm_opts, sizeof(c->shm_opts), "mode=1777,uid=%u,gid=%u",
           a->id_base, a->id_base);
  snprintf(c->nofile, sizeof(c->nofile), "%llu", (unsigned long long)a->nofile);
  snprintf(c->nproc, sizeof(c->nproc), "%llu", (unsigned long long)a->nproc);
  for (size_t i = 0; a->lxcfs != NULL && i < WR_ARRAY_SIZE(view_files); i++)
    c->view_src[i] = xasprintf("%s/proc/%s", a->lxcfs, view_files[i]);
  c->argv[n++] = "warren-init";
  c->argv[n++] = "--ctl-fd";
  c->argv[n++] = "3";
  c->argv[n++] = "--seccomp-fd";
  c->argv[n++] = "4";
  c->argv[n++] = "--userns-fd";
  c->argv[n++] = "5";
  c->argv[n++] = "--nofile";
  c->argv[n++] = c->nofile;
  if (a->nproc > 0) {
    c->argv[n++] = "--nproc";
    c->argv[n++] = c->nproc;
  }
  c->argv[n] = NULL;
}

static void free_ctx(struct child_ctx *c) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(c->view_src); i++)
    free(c->view_src[i]);
}

/* Read the child's report: nothing (EOF) means warren-init was exec'd. */
static int read_report(int fd, pid_t pid, wr_error_t *err) {
  struct child_report r;
  ssize_t n;
  int status;

  do
    n = read(fd, &r, sizeof(r));
  while (n < 0 && errno == EINTR);
  if (n == 0)
    return 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (n != (ssize_t)sizeof(r))
    return wr_error_set(err, EIO, "sandbox setup failed without a report");
  r.step[sizeof(r.step) - 1] = '\0';
  return wr_error_set(err, r.err, "sandbox setup: %s", r.step);
}

/* Move the child into the sandbox's cgroups (v1; see the top comment). */
static int move_child(const struct wr_spawn_args *a, pid_t child,
                      wr_error_t *err) {
  char pid[16];
  int len = snprintf(pid, sizeof(pid), "%d", (int)child);

  for (size_t i = 0; i < a->ncgroup_fds; i++)
    if (write(a->cgroup_fds[i], pid, (size_t)len) != len)
      return wr_error_set(err, errno, "move the sandbox into its cgroups");
  return 0;
}

static pid_t clone_child(const struct wr_spawn_args *a, int *pidfd) {
  struct clone_args ca = {
      .flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
               CLONE_PIDFD,
      .pidfd = (uint64_t)(uintptr_t)pidfd,
      .exit_signal = SIGCHLD,
  };

  if (a->cgroup_dir >= 0) {
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = (uint64_t)a->cgroup_dir;
  }
  return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}

int wr_spawn_init(const struct wr_spawn_args *a, pid_t *pid, int *pidfd,
                  wr_error_t *err) {
  struct child_ctx c;
  int report[2], joined[2], fd = -1, r = 0;
  pid_t child;

  if (pipe2(report, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  if (pipe2(joined, O_CLOEXEC) < 0) {
    close(report[0]);
    close(report[1]);
    return wr_error_set(err, errno, "pipe");
  }
  prepare_ctx(&c, a);
  child = clone_child(a, &fd);
  if (child == 0) {
    close(report[0]);
    close(joined[1]);
    child_main(&c, report[1], joined[0]);
  }
  free_ctx(&c);
  close(report[1]);
  close(joined[0]);
  if (child < 0)
    r = wr_error_set(err, errno, "clone");
  else if (a->cgroup_dir < 0)
    r = move_child(a, child, err);
  if (r == 0 && write(joined[1], "1", 1) != 1)
    r = wr_error_set(err, errno, "signal the sandbox");
  close(joined[1]);
  if (r < 0 && child > 0) {
    syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
      ;
  } else if (r == 0 && read_report(report[0], child, err) < 0) {
    r = -1;
  }
  close(report[0]);
  if (r < 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *pid = child;
  *pidfd = fd;
  return 0;
}
