/*
 * attack_syscalls: hostile system calls for tests/security/10-syscalls.sh.
 * Each subcommand makes the calls of one theme with real arguments (the
 * ones an exploit would use, harmless if a call ever went through) and
 * prints one line per attempt, "NAME: ok" or "NAME: ERRNO", as probe does.
 *
 *   keyring | userfaultfd | io_uring | namespaces | clone3 | mount | setns
 *   kernel | handle | clock | tty | tty_stdin | abi | vsock | sibling
 *   trace PID              ptrace and friends against PID
 *   personality HEX...     personality(2) with each value
 *   filter PID             run on the host: read PID's seccomp filters
 *                          (ptrace) and evaluate them for other ABIs and
 *                          masked arguments, whatever this kernel supports
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/kcmp.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#define X32_BIT 0x40000000UL

extern char **environ;

static void report(const char *name, long r) {
  if (r < 0) {
    const char *e = strerrorname_np(errno);
    printf("%s: %s\n", name, e ? e : "EUNKNOWN");
  } else {
    printf("%s: ok\n", name);
  }
  fflush(stdout);
}

/* Run fn in a child, so that a call that works cannot change this
 * process; the child's errno comes back as its exit status. */
static long in_child(long (*fn)(unsigned long), unsigned long arg) {
  int status;
  pid_t pid = fork();

  if (pid == 0)
    _exit(fn(arg) < 0 ? errno : 0);
  if (pid < 0 || waitpid(pid, &status, 0) < 0)
    return -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  errno = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  return -1;
}

/* ---- the keyring, userfaultfd, io_uring --------------------------------- */

static void keyring(void) {
  report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                           KEY_SPEC_SESSION_KEYRING, 1));
  report("keyctl_join",
         syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "warren-attack"));
  report("add_key", syscall(SYS_add_key, "user", "warren-attack", "v", 1,
                            KEY_SPEC_PROCESS_KEYRING));
  report("request_key", syscall(SYS_request_key, "user", "warren-attack", NULL,
                                KEY_SPEC_PROCESS_KEYRING));
}

static void userfaultfd(void) {
  report("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
  report("userfaultfd_user_mode_only",
         syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
  report("open_dev_userfaultfd", open("/dev/userfaultfd", O_RDWR));
}

static void io_uring(void) {
  char params[120]; /* struct io_uring_params */

  memset(params, 0, sizeof(params));
  report("io_uring_setup", syscall(SYS_io_uring_setup, 8, params));
  report("io_uring_enter", syscall(SYS_io_uring_enter, 0, 1, 0, 0, NULL, 0));
  report("io_uring_register", syscall(SYS_io_uring_register, 0, 0, NULL, 0));
}

/* ---- other processes -------------------------------------------------- */

/* ptrace, cross-memory access, fd theft and comparison against PID. */
static void trace(pid_t pid) {
  char buf[16];
  struct iovec local = {buf, sizeof(buf)};
  struct iovec remote = {(void *)0x400000, sizeof(buf)};
  long pidfd = syscall(SYS_pidfd_open, pid, 0);
  int e = errno;
  char path[64];

  report("ptrace_attach", ptrace(PTRACE_ATTACH, pid, 0, 0));
  report("ptrace_seize", ptrace(PTRACE_SEIZE, pid, 0, 0));
  report("process_vm_readv", process_vm_readv(pid, &local, 1, &remote, 1, 0));
  report("process_vm_writev", process_vm_writev(pid, &local, 1, &remote, 1, 0));
  errno = e;
  report("pidfd_open", pidfd);
  /* Denied by the filter whatever the pidfd; try init's fd 3 (its
   * control socket) with a real pidfd when there is one. */
  report("pidfd_getfd", syscall(SYS_pidfd_getfd, pidfd, 3, 0));
  report("kcmp", syscall(SYS_kcmp, getpid(), pid, KCMP_FILE, 0, 0));
  report("kill_0", kill(pid, 0));
  snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
  report("open_mem", open(path, O_RDWR));
  if (pidfd >= 0)
    close((int)pidfd);
}

/* The same tenant may debug its own processes (strace, gdb): ptrace and
 * process_vm_readv work on a child; kcmp and pidfd_getfd are still not
 * allowed, for anyone. */
static void sibling(void) {
  char buf[16] = "", secret[16] = "sibling-secret";
  struct iovec local = {buf, sizeof(buf)};
  struct iovec remote = {secret, sizeof(secret)};
  pid_t pid = fork();
  int status;
  long pidfd;

  if (pid == 0) {
    pause();
    _exit(0);
  }
  report("ptrace_attach_child", ptrace(PTRACE_ATTACH, pid, 0, 0));
  waitpid(pid, &status, 0);
  report("process_vm_readv_child",
         process_vm_readv(pid, &local, 1, &remote, 1, 0));
  printf("read_from_child: %s\n", buf);
  pidfd = syscall(SYS_pidfd_open, pid, 0);
  report("pidfd_getfd_child", syscall(SYS_pidfd_getfd, pidfd, 1, 0));
  report("kcmp_child", syscall(SYS_kcmp, getpid(), pid, KCMP_FILE, 1, 1));
  ptrace(PTRACE_DETACH, pid, 0, 0);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
}

/* ---- namespaces ------------------------------------------------------- */

static const struct {
  const char *name;
  unsigned long flag;
} ns_flags[] = {
    {"newns", CLONE_NEWNS},         {"newuts", CLONE_NEWUTS},
    {"newipc", CLONE_NEWIPC},       {"newuser", CLONE_NEWUSER},
    {"newpid", CLONE_NEWPID},       {"newnet", CLONE_NEWNET},
    {"newcgroup", CLONE_NEWCGROUP}, {"newtime", CLONE_NEWTIME},
};

static long do_unshare(unsigned long flags) {
  return unshare((int)flags);
}

/* A raw clone: the child, if one is ever made, exits at once. */
static long do_clone(unsigned long flags) {
  long r = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);

  if (r == 0)
    _exit(0);
  if (r > 0)
    waitpid((pid_t)r, NULL, 0);
  return r;
}

static void namespaces(void) {
  char name[64];

  for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
    snprintf(name, sizeof(name), "unshare_%s", ns_flags[i].name);
    report(name, in_child(do_unshare, ns_flags[i].flag));
    /* clone's low byte is the exit signal: CLONE_NEWTIME (0x80) is only
     * for unshare and clone3. */
    if (ns_flags[i].flag == CLONE_NEWTIME)
      continue;
    snprintf(name, sizeof(name), "clone_%s", ns_flags[i].name);
    report(name, in_child(do_clone, ns_flags[i].flag));
  }
  /* The kernel reads clone's flags as 32 bits; high bits must not hide
   * a namespace flag from the filter. */
  report("clone_newuser_high_bits",
         in_child(do_clone, (1UL << 32) | CLONE_NEWUSER));
  report("unshare_files", in_child(do_unshare, CLONE_FILES));
}

/* ---- clone3 and libc's fallback --------------------------------------- */

static void *thread_main(void *arg) {
  return arg;
}

static void clone3_and_fallback(void) {
  struct clone_args ca = {.exit_signal = SIGCHLD};
  pthread_t t;
  void *ret = NULL;
  char *const argv[] = {"true", NULL};
  pid_t pid;
  int status = -1, r;
  long c;

  c = syscall(SYS_clone3, &ca, sizeof(ca));
  if (c == 0)
    _exit(0);
  report("clone3", c);
  ca.flags = CLONE_NEWUSER;
  c = syscall(SYS_clone3, &ca, sizeof(ca));
  if (c == 0)
    _exit(0);
  report("clone3_newuser", c);
  r = pthread_create(&t, NULL, thread_main, (void *)0x2a);
  if (r == 0)
    r = pthread_join(t, &ret);
  errno = r;
  report("pthread_create", r != 0 || ret != (void *)0x2a ? -1 : 0);
  pid = fork();
  if (pid == 0)
    _exit(7);
  waitpid(pid, &status, 0);
  errno = EINVAL;
  report("fork",
         pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : -1);
  r = posix_spawnp(&pid, "true", NULL, NULL, argv, environ);
  if (r == 0 && waitpid(pid, &status, 0) == pid && status == 0)
    r = 0;
  else if (r == 0)
    r = EINVAL;
  errno = r;
  report("posix_spawn", r ? -1 : 0);
}

/* ---- mounts ----------------------------------------------------------- */

static void mounts(void) {
  struct {
    uint64_t set, clr, propagation, userns_fd;
  } attr = {.set = 0x1 /* MOUNT_ATTR_RDONLY */};

  mkdir("/tmp/.attack-mnt", 0700);
  report("mount_tmpfs", mount("none", "/tmp/.attack-mnt", "tmpfs", 0, NULL));
  report("mount_bind_root", mount("/", "/tmp/.attack-mnt", NULL, MS_BIND, 0));
  report("mount_remount_proc",
         mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL));
  report("mount_make_shared", mount(NULL, "/", NULL, MS_SHARED, NULL));
  report("umount2_proc_keys", umount2("/proc/keys", MNT_DETACH));
  report("umount2_proc_sys", umount2("/proc/sys", 0));
  report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
  report("open_tree",
         syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
  report("move_mount", syscall(SYS_move_mount, AT_FDCWD, "/proc", AT_FDCWD,
                               "/tmp/.attack-mnt", 0));
  report("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
  report("fsconfig",
         syscall(SYS_fsconfig, 3, 6 /* FSCONFIG_CMD_CREATE */, NULL, NULL, 0));
  report("fsmount", syscall(SYS_fsmount, 3, 0, 0));
  report("fspick", syscall(SYS_fspick, AT_FDCWD, "/proc/sys", 0));
  report("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, "/proc/sys", 0,
                                  &attr, sizeof(attr)));
}

/* setns into every kind of namespace: with init's namespace files (which
 * cannot even be opened) and with the caller's own. */
static void setns_all(void) {
  static const char *const kinds[] = {"cgroup", "ipc",  "mnt",  "net",
                                      "pid",    "time", "user", "uts"};
  char path[64], name[64];
  long pidfd;

  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    int fd;

    snprintf(path, sizeof(path), "/proc/1/ns/%s", kinds[i]);
    snprintf(name, sizeof(name), "open_init_ns_%s", kinds[i]);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    report(name, fd);
    if (fd >= 0) {
      snprintf(name, sizeof(name), "setns_init_%s", kinds[i]);
      report(name, setns(fd, 0));
      close(fd);
    }
    snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[i]);
    snprintf(name, sizeof(name), "setns_%s", kinds[i]);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    report(name, fd < 0 ? -1 : setns(fd, 0));
    if (fd >= 0)
      close(fd);
  }
  pidfd = syscall(SYS_pidfd_open, 1, 0);
  report("setns_pidfd_init",
         pidfd < 0 ? -1 : setns((int)pidfd, CLONE_NEWNET | CLONE_NEWNS));
}

/* ---- the kernel itself ------------------------------------------------ */

static void kernel(void) {
  struct perf_event_attr pe = {.type = PERF_TYPE_SOFTWARE,
                               .size = sizeof(pe),
                               .config = PERF_COUNT_SW_CPU_CLOCK};
  char attr[128];
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

  memset(attr, 0, sizeof(attr));
  attr[0] = 2; /* BPF_MAP_TYPE_ARRAY */
  attr[4] = 4;
  attr[8] = 4;
  attr[12] = 1;
  report("bpf_map_create", syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, 64));
  report("bpf_prog_load", syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, attr, 64));
  report("perf_event_open", syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
  report("init_module", syscall(SYS_init_module, attr, sizeof(attr), ""));
  report("finit_module", syscall(SYS_finit_module, null, "", 0));
  report("delete_module", syscall(SYS_delete_module, "loop", O_NONBLOCK));
  report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
  report("kexec_file_load", syscall(SYS_kexec_file_load, null, null, 1, "", 0));
  /* CAD_OFF only turns Ctrl-Alt-Del off: harmless if it ever worked. */
  report("reboot", syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
                           LINUX_REBOOT_CMD_CAD_OFF, 0));
  report("iopl", syscall(SYS_iopl, 3));
  report("ioperm", syscall(SYS_ioperm, 0x80, 1, 1));
  report("acct", syscall(SYS_acct, NULL));
  report("swapoff", syscall(SYS_swapoff, "/dev/null"));
}

/* open_by_handle_at with a real handle (of /dev/shm: the overlay root
 * has no handles): the shocker escape walks the host's filesystem from
 * one. */
static void handle(void) {
  struct {
    unsigned int bytes;
    int type;
    unsigned char f[128];
  } h = {.bytes = 128};
  int mount_id;

  report("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD,
                                      "/dev/shm", &h, &mount_id, 0));
  report("open_by_handle_at",
         syscall(SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY));
}

static void personalities(int argc, char **argv) {
  char name[64];

  for (int i = 0; i < argc; i++) {
    unsigned long v = strtoul(argv[i], NULL, 16);
    snprintf(name, sizeof(name), "personality_%#lx", v);
    report(name, syscall(SYS_personality, v));
  }
  syscall(SYS_personality, 0UL);
}

static void clocks(void) {
  struct timespec ts;
  struct timeval tv;
  struct timex tx = {0};

  clock_gettime(CLOCK_REALTIME, &ts);
  report("clock_settime", clock_settime(CLOCK_REALTIME, &ts));
  gettimeofday(&tv, NULL);
  report("settimeofday", settimeofday(&tv, NULL));
  /* modes 0 only reads: the call itself is refused. */
  report("adjtimex", syscall(SYS_adjtimex, &tx));
  report("clock_adjtime", syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx));
}

/* ---- terminals -------------------------------------------------------- */

/* The injection ioctls on fd, which must be the caller's controlling
 * terminal (otherwise the kernel refuses TIOCSTI by itself). The request
 * is passed as a full 64-bit value; the kernel only reads the low 32. */
static void tty_ioctls(int fd) {
  char c = 'x', sub = 6; /* TIOCL_GETSHIFTSTATE */
  struct winsize ws;

  report("tiocgwinsz", syscall(SYS_ioctl, fd, (unsigned long)TIOCGWINSZ, &ws));
  report("tiocgwinsz_high_bits",
         syscall(SYS_ioctl, fd, (1UL << 32) | TIOCGWINSZ, &ws));
  report("tiocsti", syscall(SYS_ioctl, fd, (unsigned long)TIOCSTI, &c));
  report("tiocsti_high_bits",
         syscall(SYS_ioctl, fd, (1UL << 32) | TIOCSTI, &c));
  report("tiocsti_all_high_bits",
         syscall(SYS_ioctl, fd, 0xffffffff00000000UL | TIOCSTI, &c));
  report("tioclinux", syscall(SYS_ioctl, fd, (unsigned long)TIOCLINUX, &sub));
  report("tioclinux_high_bits",
         syscall(SYS_ioctl, fd, (1UL << 32) | TIOCLINUX, &sub));
}

/* A fresh pty whose slave becomes the controlling terminal of a new
 * session; afterwards the master shows whether anything was injected. */
static void tty_pty(void) {
  int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  int unlock = 0, status, queued = 0;
  pid_t pid;

  if (master < 0 || ioctl(master, TIOCSPTLCK, &unlock) < 0) {
    report("open_ptmx", -1);
    return;
  }
  pid = fork();
  if (pid == 0) {
    int slave;
    if (setsid() < 0)
      _exit(1);
    slave = ioctl(master, TIOCGPTPEER, O_RDWR);
    if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0) {
      report("controlling_tty", -1);
      _exit(1);
    }
    report("controlling_tty", 0);
    tty_ioctls(slave);
    /* TIOCSTI puts bytes in the terminal's input queue. */
    if (ioctl(slave, FIONREAD, &queued) < 0)
      queued = -1;
    printf("injected: %s\n", queued == 0 ? "none" : "yes");
    fflush(stdout);
    _exit(0);
  }
  waitpid(pid, &status, 0);
}

/* ---- other ABIs ------------------------------------------------------- */

/* A 32-bit system call through int $0x80 from 64-bit code. */
static long int80(long nr, long a, long b, long c) {
  long r;

  __asm__ volatile("int $0x80"
                   : "=a"(r)
                   : "a"(nr), "b"(a), "c"(b), "d"(c)
                   : "r8", "r9", "r10", "r11", "memory");
  return r;
}

static void report_raw(const char *name, long r) {
  if (r < 0 && r > -4096) {
    errno = (int)-r;
    r = -1;
  }
  report(name, r);
}

static long int80_child(unsigned long nr) {
  long r = int80((long)nr, 0, 0, 0);

  if (r < 0 && r > -4096) {
    errno = (int)-r;
    return -1;
  }
  return 0;
}

static void abi(void) {
  /* x32: the x86-64 entry with bit 30 set in the number. */
  report("x32_getpid", syscall(X32_BIT | SYS_getpid));
  report("x32_keyctl", syscall(X32_BIT | SYS_keyctl, 0, -3, 0));
  report("x32_unshare", syscall(X32_BIT | SYS_unshare, CLONE_NEWUSER));
  report("x32_ioctl_512_range", syscall(X32_BIT | 514, 0, TIOCSTI, "x"));
  /* i386: getpid is 20, mount 21, unshare 310, keyctl 288. */
  report_raw("int80_getpid", int80(20, 0, 0, 0));
  report_raw("int80_mount", int80(21, 0, 0, 0));
  report("int80_unshare", in_child(int80_child, 310));
  report_raw("int80_keyctl", int80(288, 0, -3, 0));
}

static void vsock(void) {
  report("socket_vsock", socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
  report("socket_vsock_dgram", socket(AF_VSOCK, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  /* The kernel reads the family as an int: high bits must not help. */
  report("socket_vsock_high_bits",
         syscall(SYS_socket, (1UL << 32) | AF_VSOCK, SOCK_STREAM, 0));
  report("socket_inet", socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  report("socket_unix", socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

/* ---- the installed filters, evaluated -------------------------------- */

#define MAX_FILTERS 8
#define MAX_INSNS 4096

struct filters {
  int n;
  unsigned len[MAX_FILTERS];
  struct sock_filter insns[MAX_FILTERS][MAX_INSNS];
};

static uint32_t load_word(const struct seccomp_data *d, uint32_t off,
                          int *bad) {
  uint32_t v;

  if (off + 4 > sizeof(*d) || off % 4 != 0) {
    *bad = 1;
    return 0;
  }
  memcpy(&v, (const char *)d + off, 4);
  return v;
}

static uint32_t alu(uint16_t op, uint32_t a, uint32_t v, int *bad) {
  switch (op) {
  case BPF_ADD:
    return a + v;
  case BPF_SUB:
    return a - v;
  case BPF_MUL:
    return a * v;
  case BPF_DIV:
    return v ? a / v : (*bad = 1, 0);
  case BPF_AND:
    return a & v;
  case BPF_OR:
    return a | v;
  case BPF_XOR:
    return a ^ v;
  case BPF_LSH:
    return v < 32 ? a << v : 0;
  case BPF_RSH:
    return v < 32 ? a >> v : 0;
  case BPF_NEG:
    return -a;
  default:
    *bad = 1;
    return 0;
  }
}

static int jump(uint16_t op, uint32_t a, uint32_t v, int *bad) {
  switch (op) {
  case BPF_JEQ:
    return a == v;
  case BPF_JGT:
    return a > v;
  case BPF_JGE:
    return a >= v;
  case BPF_JSET:
    return (a & v) != 0;
  default:
    *bad = 1;
    return 0;
  }
}

/* A classic BPF interpreter for the instructions seccomp accepts. */
static uint32_t run_bpf(const struct sock_filter *f, unsigned len,
                        const struct seccomp_data *d, int *bad) {
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};

  for (unsigned pc = 0; pc < len && !*bad; pc++) {
    const struct sock_filter *i = &f[pc];
    uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
    switch (BPF_CLASS(i->code)) {
    case BPF_LD:
      if (BPF_MODE(i->code) == BPF_ABS)
        a = load_word(d, i->k, bad);
      else if (BPF_MODE(i->code) == BPF_IMM)
        a = i->k;
      else if (BPF_MODE(i->code) == BPF_MEM && i->k < BPF_MEMWORDS)
        a = mem[i->k];
      else if (BPF_MODE(i->code) == BPF_LEN)
        a = sizeof(*d);
      else
        *bad = 1;
      break;
    case BPF_LDX:
      if (BPF_MODE(i->code) == BPF_IMM)
        x = i->k;
      else if (BPF_MODE(i->code) == BPF_MEM && i->k < BPF_MEMWORDS)
        x = mem[i->k];
      else if (BPF_MODE(i->code) == BPF_LEN)
        x = sizeof(*d);
      else
        *bad = 1;
      break;
    case BPF_ST:
    case BPF_STX:
      if (i->k >= BPF_MEMWORDS)
        *bad = 1;
      else
        mem[i->k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
      break;
    case BPF_ALU:
      a = alu(BPF_OP(i->code), a, src, bad);
      break;
    case BPF_JMP:
      if (BPF_OP(i->code) == BPF_JA)
        pc += i->k;
      else
        pc += jump(BPF_OP(i->code), a, src, bad) ? i->jt : i->jf;
      break;
    case BPF_RET:
      return BPF_RVAL(i->code) == BPF_A ? a : i->k;
    case BPF_MISC:
      if (BPF_MISCOP(i->code) == BPF_TAX)
        x = a;
      else
        a = x;
      break;
    }
  }
  *bad = 1;
  return 0;
}

/* What the kernel does with several filters: it runs all of them and the
 * action that comes first in precedence wins (the lowest value, compared
 * as signed); on a tie the newest filter's data. */
static uint32_t verdict(const struct filters *fs, uint32_t arch, uint32_t nr,
                        const uint64_t *args, int *bad) {
  struct seccomp_data d = {.nr = (int)nr, .arch = arch};
  uint32_t ret = SECCOMP_RET_ALLOW;

  for (int i = 0; i < 6; i++)
    d.args[i] = args ? args[i] : 0;
  for (int i = 0; i < fs->n; i++) { /* index 0 is the newest */
    uint32_t cur = run_bpf(fs->insns[i], fs->len[i], &d, bad);
    if ((int32_t)(cur & SECCOMP_RET_ACTION_FULL) <
        (int32_t)(ret & SECCOMP_RET_ACTION_FULL))
      ret = cur;
  }
  return ret;
}

static const char *verdict_name(uint32_t v, char *buf, size_t size) {
  uint32_t action = v & SECCOMP_RET_ACTION_FULL;

  if (action == SECCOMP_RET_ALLOW)
    return "ALLOW";
  if (action == SECCOMP_RET_ERRNO) {
    const char *e = strerrorname_np((int)(v & SECCOMP_RET_DATA));
    snprintf(buf, size, "ERRNO(%s)", e ? e : "?");
    return buf;
  }
  snprintf(buf, size, "ACTION(%#x)", action);
  return buf;
}

static int read_filters(pid_t pid, struct filters *fs) {
  int status;

  if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0 ||
      ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0 ||
      waitpid(pid, &status, __WALL) < 0)
    return -1;
  for (fs->n = 0; fs->n < MAX_FILTERS; fs->n++) {
    long n = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)(long)fs->n, NULL);
    if (n < 0 && errno == ENOENT)
      break;
    if (n <= 0 || n > MAX_INSNS ||
        ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)(long)fs->n,
               fs->insns[fs->n]) != n) {
      int e = errno;
      ptrace(PTRACE_DETACH, pid, 0, 0);
      errno = e;
      return -1;
    }
    fs->len[fs->n] = (unsigned)n;
  }
  ptrace(PTRACE_DETACH, pid, 0, 0);
  return 0;
}

/* Every distinct verdict over the numbers first..first+count-1 of arch. */
static void sweep(const struct filters *fs, const char *name, uint32_t arch,
                  uint32_t first, uint32_t count) {
  uint32_t seen[8];
  int nseen = 0, bad = 0;
  char buf[32];

  for (uint32_t nr = first; nr - first < count; nr++) {
    uint32_t v = verdict(fs, arch, nr, NULL, &bad);
    int k = 0;
    while (k < nseen && seen[k] != v)
      k++;
    if (k == nseen && nseen < 8)
      seen[nseen++] = v;
  }
  printf("%s:", name);
  for (int k = 0; k < nseen; k++)
    printf(" %s", verdict_name(seen[k], buf, sizeof(buf)));
  printf("%s\n", bad ? " EVAL_ERROR" : "");
}

static void one(const struct filters *fs, const char *name, uint32_t nr,
                uint64_t a0, uint64_t a1) {
  uint64_t args[6] = {a0, a1};
  int bad = 0;
  char buf[32];
  uint32_t v = verdict(fs, AUDIT_ARCH_X86_64, nr, args, &bad);

  printf("%s: %s\n", name,
         bad ? "EVAL_ERROR" : verdict_name(v, buf, sizeof(buf)));
}

static struct filters fs_storage;

static void filter(pid_t pid) {
  struct filters *fs = &fs_storage;

  if (read_filters(pid, fs) < 0) {
    report("read_filters", -1);
    return;
  }
  printf("filters: %d\n", fs->n);
  one(fs, "x86_64_getpid", SYS_getpid, 0, 0);
  one(fs, "x86_64_keyctl", SYS_keyctl, 0, 0);
  one(fs, "x86_64_ioctl_tiocsti_high_bits", SYS_ioctl, 0,
      (1UL << 32) | TIOCSTI);
  one(fs, "x86_64_socket_vsock_high_bits", SYS_socket, (1UL << 32) | AF_VSOCK,
      0);
  one(fs, "x86_64_clone_newuser_high_bits", SYS_clone,
      (1UL << 32) | CLONE_NEWUSER, 0);
  one(fs, "x86_64_clone3", SYS_clone3, 0, 0);
  one(fs, "x32_getpid", X32_BIT | SYS_getpid, 0, 0);
  /* Every x32 number (the x86-64 ones and x32's own 512..547), every
   * i386 number, and numbers beyond any table. */
  sweep(fs, "x32_all", AUDIT_ARCH_X86_64, X32_BIT, 1024);
  sweep(fs, "i386_all", AUDIT_ARCH_I386, 0, 1024);
  sweep(fs, "x86_64_out_of_range", AUDIT_ARCH_X86_64, 1024, 1024);
  sweep(fs, "x86_64_top", AUDIT_ARCH_X86_64, 0xfffff000U, 0x1000);
}

int main(int argc, char **argv) {
  const char *cmd = argc >= 2 ? argv[1] : "";

  if (strcmp(cmd, "keyring") == 0)
    keyring();
  else if (strcmp(cmd, "userfaultfd") == 0)
    userfaultfd();
  else if (strcmp(cmd, "io_uring") == 0)
    io_uring();
  else if (strcmp(cmd, "trace") == 0 && argc == 3)
    trace((pid_t)atoi(argv[2]));
  else if (strcmp(cmd, "sibling") == 0)
    sibling();
  else if (strcmp(cmd, "namespaces") == 0)
    namespaces();
  else if (strcmp(cmd, "clone3") == 0)
    clone3_and_fallback();
  else if (strcmp(cmd, "mount") == 0)
    mounts();
  else if (strcmp(cmd, "setns") == 0)
    setns_all();
  else if (strcmp(cmd, "kernel") == 0)
    kernel();
  else if (strcmp(cmd, "handle") == 0)
    handle();
  else if (strcmp(cmd, "personality") == 0)
    personalities(argc - 2, argv + 2);
  else if (strcmp(cmd, "clock") == 0)
    clocks();
  else if (strcmp(cmd, "tty") == 0)
    tty_pty();
  else if (strcmp(cmd, "tty_stdin") == 0)
    tty_ioctls(0);
  else if (strcmp(cmd, "abi") == 0)
    abi();
  else if (strcmp(cmd, "vsock") == 0)
    vsock();
  else if (strcmp(cmd, "filter") == 0 && argc == 3)
    filter((pid_t)atoi(argv[2]));
  else {
    fprintf(stderr, "usage: attack_syscalls THEME (see the source)\n");
    return 2;
  }
  return 0;
}
