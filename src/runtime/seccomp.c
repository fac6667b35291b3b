/*
 * The sandbox's seccomp filters, built once per daemon with libseccomp.
 *
 * The main filter is a default-deny allowlist modelled on Docker's default
 * profile, minus what a sandbox never needs and what has a history of
 * kernel bugs: io_uring, the keyring, bpf, perf, userfaultfd, the mount
 * APIs, namespaces (unshare, setns, clone with namespace flags), module and
 * kexec loading, clock setting. clone3 fails with ENOSYS so that libc falls
 * back to clone, where the flags can be checked.
 *
 * libseccomp cannot express "allow ioctl except TIOCSTI" in one filter
 * whose default action is the same errno, so a second filter denies calls
 * by their arguments: the terminal-injection ioctls, and sockets of the
 * vsock family, which is not network-namespaced: on a virtual machine it
 * reaches the hypervisor and its services, past the sandbox's loopback-only
 * network and its egress policy. It compares only the low 32 bits of the
 * ioctl request and of the socket family, as the kernel reads them, so
 * high bits cannot smuggle either through. The kernel runs both filters
 * and the stricter verdict wins.
 *
 * Other ABIs get ENOSYS (the bad-arch action): the i386 one by its audit
 * arch, and x32, which shares x86-64's, because libseccomp sends every
 * number with bit 30 set (other than -1) to the bad-arch action when the
 * filter has no x32 arch of its own.
 *
 * Serialised form handed to warren-init: for each program a uint32 count
 * of instructions followed by that many struct sock_filter.
 */
#include "runtime/runtime_internal.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

static const char *const allowed[] = {
    "accept",
    "accept4",
    "access",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chroot",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "futex",
    "futex_requeue",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "get_robust_list",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresuid",
    "getrlimit",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "gettid",
    "gettimeofday",
    "getuid",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_setup",
    "io_submit",
    "ioprio_get",
    "ioprio_set",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "process_vm_readv",
    "process_vm_writev",
    "pselect6",
    "ptrace",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "sendfile",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "set_robust_list",
    "set_tid_address",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setrlimit",
    "setsid",
    "setsockopt",
    "setuid",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "socket",
    "socketpair",
    "splice",
    "stat",
    "statfs",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    "times",
    "tkill",
    "truncate",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "write",
    "writev",
    "ioctl",
};

#define NS_FLAGS                                                               \
  (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |  \
   CLONE_NEWNET | CLONE_NEWCGROUP)

/* personality(2) values Docker allows: Linux, Linux32, UNAME26 and the
 * query value. */
static const unsigned long personalities[] = {0x0, 0x8, 0x20000, 0x20008,
                                              0xffffffff};

/* One argument comparison (the SCMP_Ax macros leave fields implicit, which
 * clang's -Wmissing-field-initializers rejects). */
static struct scmp_arg_cmp arg_cmp(unsigned arg, enum scmp_compare op,
                                   scmp_datum_t a, scmp_datum_t b) {
  struct scmp_arg_cmp c = {.arg = arg, .op = op, .datum_a = a, .datum_b = b};

  return c;
}

static int add_allowlist(scmp_filter_ctx ctx, wr_error_t *err) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(allowed); i++) {
    int nr = seccomp_syscall_resolve_name(allowed[i]);
    int r;
    if (nr == __NR_SCMP_ERROR)
      continue; /* not on this architecture */
    r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    if (r < 0)
      return wr_error_set(err, -r, "seccomp: allow %s", allowed[i]);
  }
  return 0;
}

static int add_conditional(scmp_filter_ctx ctx, wr_error_t *err) {
  struct scmp_arg_cmp c = arg_cmp(0, SCMP_CMP_MASKED_EQ, NS_FLAGS, 0);
  int r;

  r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, &c);
  if (r == 0)
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  for (size_t i = 0; r == 0 && i < WR_ARRAY_SIZE(personalities); i++) {
    c = arg_cmp(0, SCMP_CMP_EQ, personalities[i], 0);
    r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                               &c);
  }
  if (r < 0)
    return wr_error_set(err, -r, "seccomp: conditional rules");
  return 0;
}

/* Deny syscall nr when its argument arg, read as 32 bits, is value. */
static int deny_low32(scmp_filter_ctx ctx, int nr, unsigned arg,
                      unsigned long value, wr_error_t *err) {
  struct scmp_arg_cmp c =
      arg_cmp(arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, value);
  int r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &c);

  if (r < 0)
    return wr_error_set(err, -r, "seccomp: deny syscall %d with %#lx", nr,
                        value);
  return 0;
}

static int add_arg_rules(scmp_filter_ctx ctx, wr_error_t *err) {
  if (deny_low32(ctx, SCMP_SYS(ioctl), 1, TIOCSTI, err) < 0 ||
      deny_low32(ctx, SCMP_SYS(ioctl), 1, TIOCLINUX, err) < 0 ||
      deny_low32(ctx, SCMP_SYS(socket), 0, AF_VSOCK, err) < 0)
    return -1;
  return 0;
}

/* Export ctx as BPF and append it, prefixed by its length, to out. */
static int export(scmp_filter_ctx ctx, wr_buf_t *out, wr_error_t *err) {
  _cleanup_close_ int fd = memfd_create("seccomp", MFD_CLOEXEC);
  char chunk[4096];
  size_t start = out->len;
  uint32_t count = 0;
  ssize_t n;
  int r;

  if (fd < 0)
    return wr_error_set(err, errno, "memfd_create");
  r = seccomp_export_bpf(ctx, fd);
  if (r < 0)
    return wr_error_set(err, -r, "seccomp: export");
  if (lseek(fd, 0, SEEK_SET) < 0)
    return wr_error_set(err, errno, "seccomp: rewind");
  wr_buf_append(out, &count, sizeof(count));
  while ((n = read(fd, chunk, sizeof(chunk))) > 0)
    wr_buf_append(out, chunk, (size_t)n);
  if (n < 0)
    return wr_error_set(err, errno, "seccomp: read program");
  n = (ssize_t)(out->len - start - sizeof(count));
  if (n == 0 || n % (ssize_t)sizeof(struct sock_filter) != 0)
    return wr_error_set(err, EINVAL, "seccomp: odd program size %zd", n);
  count = (uint32_t)(n / (ssize_t)sizeof(struct sock_filter));
  memcpy(out->data + start, &count, sizeof(count));
  return 0;
}

/* Build one filter with the given default action and rules. */
static int build_one(uint32_t def, int (*rules)(scmp_filter_ctx, wr_error_t *),
                     int (*more)(scmp_filter_ctx, wr_error_t *), wr_buf_t *out,
                     wr_error_t *err) {
  scmp_filter_ctx ctx = seccomp_init(def);
  int r;

  if (ctx == NULL)
    return wr_error_set(err, ENOMEM, "seccomp_init");
  /* Other ABIs (x32, i386 on x86-64) get ENOSYS for every call. */
  r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
  if (r < 0)
    wr_error_set(err, -r, "seccomp: bad-arch action");
  else if ((r = rules(ctx, err)) == 0 && more != NULL)
    r = more(ctx, err);
  if (r == 0)
    r = export(ctx, out, err);
  seccomp_release(ctx);
  return r < 0 ? -1 : 0;
}

int wr_seccomp_build(void **progs, size_t *len, wr_error_t *err) {
  wr_buf_t out;

  wr_buf_init(&out);
  if (build_one(SCMP_ACT_ERRNO(EPERM), add_allowlist, add_conditional, &out,
                err) < 0 ||
      build_one(SCMP_ACT_ALLOW, add_arg_rules, NULL, &out, err) < 0) {
    wr_buf_free(&out);
    return -1;
  }
  *progs = wr_buf_steal(&out, len);
  return 0;
}

int wr_seccomp_memfd(const void *progs, size_t len, wr_error_t *err) {
  int fd = memfd_create("warren-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  if (fd < 0)
    return wr_error_set(err, errno, "memfd_create");
  if (wr_write_all(fd, progs, len, err) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
      fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    int e = errno;
    close(fd);
    return wr_error_set(err, e, "seccomp memfd");
  }
  return fd;
}
