/*
 * warren-init's options and its setup pipeline: the steps it takes on
 * itself, once, before serving the daemon. Each step is one short function
 * with one check; everything it sets (user namespace, limits, capability
 * bounding set, no_new_privs, seccomp filter) is inherited by every process
 * it later spawns.
 */
#include "init/initd.h"

#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define DEFAULT_NOFILE 65536
#define MAX_FILTER_INSNS 4096 /* BPF_MAXINSNS */

/* Docker's default capability set. */
#define DEFAULT_CAPS                                                           \
  ((1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FSETID) |   \
   (1ULL << CAP_FOWNER) | (1ULL << CAP_MKNOD) | (1ULL << CAP_NET_RAW) |        \
   (1ULL << CAP_SETGID) | (1ULL << CAP_SETUID) | (1ULL << CAP_SETFCAP) |       \
   (1ULL << CAP_SETPCAP) | (1ULL << CAP_NET_BIND_SERVICE) |                    \
   (1ULL << CAP_SYS_CHROOT) | (1ULL << CAP_KILL) | (1ULL << CAP_AUDIT_WRITE))

/* ---- options ---------------------------------------------------------- */

enum opt {
  OPT_CTL_FD,
  OPT_SECCOMP_FD,
  OPT_USERNS_FD,
  OPT_NOFILE,
  OPT_NPROC,
  OPT_KEEP_CAPS,
};

static const char *const opt_names[] = {
    "--ctl-fd", "--seccomp-fd", "--userns-fd",
    "--nofile", "--nproc",      "--keep-caps",
};

static int find_opt(const char *arg) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(opt_names); i++)
    if (strcmp(arg, opt_names[i]) == 0)
      return (int)i;
  return -1;
}

static int parse_fd(const char *s, int *out, wr_error_t *err) {
  uint64_t v;

  /* 0..2 are init's own stdio; handing one over is a runtime bug. */
  if (wr_parse_u64(s, 3, INT_MAX, &v, err) < 0)
    return -1;
  *out = (int)v;
  return 0;
}

/* "0,1,5" -> a bit mask; "" keeps nothing. */
static int parse_caps(const char *s, uint64_t *mask, wr_error_t *err) {
  _cleanup_free_ char *copy = xstrdup(s);
  char *save = NULL;

  *mask = 0;
  if (*s == '\0')
    return 0;
  if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,") != NULL)
    return wr_error_set(err, 0, "empty capability in `%s`", s);
  for (char *tok = strtok_r(copy, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    uint64_t cap;

    if (wr_parse_u64(tok, 0, 63, &cap, err) < 0)
      return -1;
    *mask |= 1ULL << cap;
  }
  return 0;
}

static int set_opt(struct wr_init_opts *o, enum opt which, const char *val,
                   wr_error_t *err) {
  switch (which) {
  case OPT_CTL_FD:
    return parse_fd(val, &o->ctl_fd, err);
  case OPT_SECCOMP_FD:
    return parse_fd(val, &o->seccomp_fd, err);
  case OPT_USERNS_FD:
    return parse_fd(val, &o->userns_fd, err);
  case OPT_NOFILE:
    return wr_parse_u64(val, 1, UINT32_MAX, &o->nofile, err);
  case OPT_NPROC:
    return wr_parse_u64(val, 1, UINT32_MAX, &o->nproc, err);
  case OPT_KEEP_CAPS:
    return parse_caps(val, &o->keep_caps, err);
  }
  return wr_error_set(err, 0, "unhandled option");
}

/* The options are written by the runtime, never by a person, so only the
 * one documented form is accepted: `--name VALUE`, each at most once. */
int wr_init_parse_args(int argc, char **argv, struct wr_init_opts *o,
                       wr_error_t *err) {
  unsigned seen = 0;

  *o = (struct wr_init_opts){.ctl_fd = -1,
                             .seccomp_fd = -1,
                             .userns_fd = -1,
                             .nofile = DEFAULT_NOFILE,
                             .keep_caps = DEFAULT_CAPS};
  for (int i = 1; i < argc; i++) {
    int which = find_opt(argv[i]);

    if (which < 0)
      return wr_error_set(err, 0, "unknown option `%s`", argv[i]);
    if (seen & (1u << which))
      return wr_error_set(err, 0, "%s given twice", argv[i]);
    if (i + 1 >= argc)
      return wr_error_set(err, 0, "%s needs a value", argv[i]);
    seen |= 1u << which;
    if (set_opt(o, (enum opt)which, argv[++i], err) < 0)
      return wr_error_wrap(err, "%s", opt_names[which]);
  }
  if (!(seen & (1u << OPT_CTL_FD)))
    return wr_error_set(err, 0, "--ctl-fd is required");
  if (o->ctl_fd == o->seccomp_fd || o->ctl_fd == o->userns_fd ||
      (o->seccomp_fd >= 0 && o->seccomp_fd == o->userns_fd))
    return wr_error_set(err, 0, "the same fd is given twice");
  return 0;
}

/* ---- setup steps ------------------------------------------------------ */

/* With 0, 1 or 2 closed, the first fd init opens would take its place and
 * could end up as some process's stdio; fill the gaps with /dev/null. */
static int open_stdio(wr_error_t *err) {
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
      continue;
    if (open("/dev/null", O_RDWR | O_CLOEXEC) != fd)
      return wr_error_set(err, errno, "open /dev/null as fd %d", fd);
  }
  return 0;
}

/* The fds the runtime passed are not CLOEXEC; make them so at once, and
 * make sure the control fd is what the protocol needs. */
static int check_fds(const struct wr_init_opts *o, wr_error_t *err) {
  const int fds[] = {o->ctl_fd, o->seccomp_fd, o->userns_fd};
  int type = 0, listening = 0;
  socklen_t len = sizeof(int);

  for (size_t i = 0; i < WR_ARRAY_SIZE(fds); i++)
    if (fds[i] >= 0 && wr_set_cloexec(fds[i]) < 0)
      return wr_error_set(err, errno, "fd %d", fds[i]);
  if (getsockopt(o->ctl_fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
      type != SOCK_SEQPACKET)
    return wr_error_set(err, 0, "control fd %d is not a SOCK_SEQPACKET socket",
                        o->ctl_fd);
  len = sizeof(int);
  if (getsockopt(o->ctl_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 ||
      !listening)
    return wr_error_set(err, 0, "control fd %d is not listening", o->ctl_fd);
  if (wr_set_nonblock(o->ctl_fd, true) < 0)
    return wr_error_set(err, errno, "control fd %d", o->ctl_fd);
  return 0;
}

/*
 * soft = hard = value. Raising a hard limit needs CAP_SYS_RESOURCE, which
 * the daemon may lack (run in a container, say); then the limit becomes
 * the current hard one, which still bounds the sandbox, only tighter, and
 * init says so on stderr.
 */
static int set_limit(int resource, const char *name, rlim_t value,
                     wr_error_t *err) {
  struct rlimit rl = {value, value}, cur;

  if (setrlimit(resource, &rl) == 0)
    return 0;
  if (errno != EPERM || getrlimit(resource, &cur) < 0 || cur.rlim_max >= value)
    return wr_error_set(err, errno, "setrlimit %s %llu", name,
                        (unsigned long long)value);
  fprintf(stderr,
          "warren-init: RLIMIT_%s %llu is above the hard limit; using %llu\n",
          name, (unsigned long long)value, (unsigned long long)cur.rlim_max);
  rl.rlim_cur = rl.rlim_max = cur.rlim_max;
  if (setrlimit(resource, &rl) < 0)
    return wr_error_set(err, errno, "setrlimit %s %llu", name,
                        (unsigned long long)cur.rlim_max);
  return 0;
}

/* Done before joining the user namespace: there init is still host root
 * and, if it holds CAP_SYS_RESOURCE, may raise a hard limit above the
 * daemon's own. */
static int set_limits(const struct wr_init_opts *o, wr_error_t *err) {
  if (set_limit(RLIMIT_NOFILE, "NOFILE", o->nofile, err) < 0 ||
      set_limit(RLIMIT_CORE, "CORE", 0, err) < 0)
    return -1;
  if (o->nproc > 0)
    return set_limit(RLIMIT_NPROC, "NPROC", o->nproc, err);
  return 0;
}

/* Become root of the sandbox's user namespace, with no supplementary
 * groups left from the host. */
static int join_userns(int fd, wr_error_t *err) {
  int r;

  if (fd < 0)
    return 0;
  r = setns(fd, CLONE_NEWUSER);
  close(fd);
  if (r < 0)
    return wr_error_set(err, errno, "setns user namespace");
  if (setgroups(0, NULL) < 0)
    return wr_error_set(err, errno, "setgroups");
  if (setresgid(0, 0, 0) < 0)
    return wr_error_set(err, errno, "setresgid 0");
  if (setresuid(0, 0, 0) < 0)
    return wr_error_set(err, errno, "setresuid 0");
  return 0;
}

/* Non-dumpable: sandbox processes cannot ptrace init or read its memory,
 * environ or root through /proc/1. Set after the uid change, which would
 * reset it. */
static int make_undumpable(wr_error_t *err) {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    return wr_error_set(err, errno, "prctl PR_SET_DUMPABLE");
  return 0;
}

static unsigned last_cap(void) {
  _cleanup_free_ char *text = NULL;
  size_t len;
  uint64_t v;

  if (wr_read_file("/proc/sys/kernel/cap_last_cap", 32, &text, &len, NULL) < 0)
    return CAP_LAST_CAP;
  if (len > 0 && text[len - 1] == '\n')
    text[len - 1] = '\0';
  if (wr_parse_u64(text, 0, 63, &v, NULL) < 0)
    return CAP_LAST_CAP;
  return (unsigned)v;
}

static int drop_bounding(uint64_t keep, wr_error_t *err) {
  unsigned last = last_cap();

  for (unsigned cap = 0; cap <= last; cap++) {
    if (keep & (1ULL << cap))
      continue;
    /* EINVAL: a capability this kernel does not know. */
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return wr_error_set(err, errno, "drop capability %u", cap);
  }
  return 0;
}

/*
 * Joining the user namespace gave init every capability in it; keep in
 * the permitted and effective sets only those in keep, and none in the
 * inheritable set. Init then holds nothing its processes could not get,
 * and neither does a child of init between fork and exec. Raw
 * capget/capset: init links nothing but libc.
 */
static int trim_sets(uint64_t keep, wr_error_t *err) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

  if (syscall(SYS_capget, &hdr, data) < 0)
    return wr_error_set(err, errno, "capget");
  for (size_t i = 0; i < WR_ARRAY_SIZE(data); i++) {
    uint32_t mask = (uint32_t)(keep >> (32 * i));
    data[i].permitted &= mask;
    data[i].effective &= mask;
    data[i].inheritable = 0;
  }
  if (syscall(SYS_capset, &hdr, data) < 0)
    return wr_error_set(err, errno, "capset");
  return 0;
}

/* What sandbox processes may ever hold is the bounding set; ambient and
 * inheritable capabilities could carry more across exec, so clear them. */
static int drop_caps(uint64_t keep, wr_error_t *err) {
  if (drop_bounding(keep, err) < 0)
    return -1;
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
    return wr_error_set(err, errno, "clear ambient capabilities");
  return trim_sets(keep, err);
}

static int set_no_new_privs(wr_error_t *err) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return wr_error_set(err, errno, "prctl PR_SET_NO_NEW_PRIVS");
  return 0;
}

/* Install one program (count instructions at insns). */
static int install_filter(struct sock_filter *insns, uint32_t count,
                          wr_error_t *err) {
  struct sock_fprog prog = {.len = (unsigned short)count, .filter = insns};

  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
    return wr_error_set(err, errno, "install seccomp filter");
  return 0;
}

/*
 * Read the filters the runtime compiled and install them on init, so that
 * every descendant inherits them. The fd holds one or more programs, each a
 * uint32 instruction count followed by that many struct sock_filter; the
 * kernel runs all of them and the strictest verdict wins. Sizes are
 * bounded by the kernel's own limit.
 */
static int load_seccomp(int fd, wr_error_t *err) {
  _cleanup_close_ int prog_fd = fd;
  _cleanup_free_ char *data = NULL;
  struct stat st;
  size_t size, off = 0;
  ssize_t got;

  if (prog_fd < 0)
    return 0;
  if (fstat(prog_fd, &st) < 0)
    return wr_error_set(err, errno, "seccomp fd");
  size = (size_t)st.st_size;
  if (st.st_size <= 0 ||
      size > 4 * (MAX_FILTER_INSNS + 1) * sizeof(struct sock_filter))
    return wr_error_set(err, 0, "seccomp programs of %lld bytes",
                        (long long)st.st_size);
  data = xmalloc(size);
  /* pread: the runtime may have left the offset at the end. */
  got = pread(prog_fd, data, size, 0);
  if (got != (ssize_t)size)
    return wr_error_set(err, got < 0 ? errno : EIO, "read seccomp program");
  while (off < size) {
    uint32_t count;
    struct sock_filter *insns;
    if (size - off < sizeof(count))
      return wr_error_set(err, 0, "truncated seccomp program");
    memcpy(&count, data + off, sizeof(count));
    off += sizeof(count);
    if (count == 0 || count > MAX_FILTER_INSNS ||
        size - off < count * sizeof(struct sock_filter))
      return wr_error_set(err, 0, "seccomp program of %u instructions", count);
    insns = xmemdup(data + off, count * sizeof(struct sock_filter));
    off += count * sizeof(struct sock_filter);
    if (install_filter(insns, count, err) < 0) {
      free(insns);
      return -1;
    }
    free(insns);
  }
  return 0;
}

/* Outside a pid namespace (tests, development) orphans would go to the
 * host's init; as a subreaper init still reaps them. */
static int become_subreaper(wr_error_t *err) {
  if (getpid() == 1)
    return 0;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
    return wr_error_set(err, errno, "prctl PR_SET_CHILD_SUBREAPER");
  return 0;
}

/* Every catchable signal is blocked and read from one signalfd, so none
 * interrupts the loop and none queues up unread. */
static int take_signals(int *sig_fd, wr_error_t *err) {
  sigset_t all;

  sigfillset(&all);
  if (sigprocmask(SIG_SETMASK, &all, NULL) < 0)
    return wr_error_set(err, errno, "sigprocmask");
  *sig_fd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
  if (*sig_fd < 0)
    return wr_error_set(err, errno, "signalfd");
  return 0;
}

int wr_init_setup(const struct wr_init_opts *o, int *sig_fd, wr_error_t *err) {
  if (open_stdio(err) < 0 || check_fds(o, err) < 0 || set_limits(o, err) < 0 ||
      join_userns(o->userns_fd, err) < 0 || make_undumpable(err) < 0 ||
      drop_caps(o->keep_caps, err) < 0 || set_no_new_privs(err) < 0 ||
      load_seccomp(o->seccomp_fd, err) < 0 || become_subreaper(err) < 0 ||
      take_signals(sig_fd, err) < 0)
    return -1;
  return 0;
}
