/*
 * probe: a small static program the isolation tests copy into a sandbox.
 * Each subcommand tries something a sandbox must not be able to do (or
 * measures something) and prints one line per attempt: "NAME: ok" when the
 * call succeeded, "NAME: ERRNO_NAME" when it failed. The tests assert on
 * those lines.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *errname(int e) {
  switch (e) {
  case EPERM:
    return "EPERM";
  case EACCES:
    return "EACCES";
  case ENOSYS:
    return "ENOSYS";
  case EINVAL:
    return "EINVAL";
  case ENETUNREACH:
    return "ENETUNREACH";
  case ECONNREFUSED:
    return "ECONNREFUSED";
  case ETIMEDOUT:
    return "ETIMEDOUT";
  case ESRCH:
    return "ESRCH";
  case ENOENT:
    return "ENOENT";
  case EROFS:
    return "EROFS";
  case EAGAIN:
    return "EAGAIN";
  case ENOMEM:
    return "ENOMEM";
  case EHOSTUNREACH:
    return "EHOSTUNREACH";
  case EBADF:
    return "EBADF";
  case EEXIST:
    return "EEXIST";
  case EOPNOTSUPP:
    return "EOPNOTSUPP";
  default:
    return "EOTHER";
  }
}

static void report(const char *name, long r) {
  if (r < 0)
    printf("%s: %s\n", name, errname(errno));
  else
    printf("%s: ok\n", name);
  fflush(stdout);
}

static int in_child(int (*fn)(void)) {
  pid_t pid = fork();
  int status;

  if (pid == 0)
    _exit(fn() < 0 ? errno : 0);
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    errno = WEXITSTATUS(status);
    return -1;
  }
  return WIFEXITED(status) ? 0 : (errno = EINTR, -1);
}

static int try_unshare_user(void) {
  return unshare(CLONE_NEWUSER);
}
static int try_unshare_mnt(void) {
  return unshare(CLONE_NEWNS);
}
static int try_unshare_net(void) {
  return unshare(CLONE_NEWNET);
}

static int setns_self_net(void) {
  int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int r;

  if (fd < 0)
    return -1;
  r = setns(fd, CLONE_NEWNET);
  close(fd);
  return r;
}

/* pidfd_open(1) is allowed; taking one of init's fds must not be. */
static int pidfd_getfd_init(void) {
  int pfd = (int)syscall(SYS_pidfd_open, 1, 0);
  int r, e;

  if (pfd < 0)
    return -1;
  r = (int)syscall(438, pfd, 0, 0);
  e = errno;
  close(pfd);
  errno = e;
  return r;
}

static int clock_settime_now(void) {
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return clock_settime(CLOCK_REALTIME, &ts);
}

static void syscalls(void) {
  union bpf_attr attr;

  report("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
  report("add_key", syscall(SYS_add_key, "user", "k", "v", 1, -3));
  memset(&attr, 0, sizeof(attr));
  report("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)));
  report("mount", mount("none", "/mnt", "tmpfs", 0, NULL));
  report("umount", umount2("/proc", MNT_DETACH));
  report("unshare_user", in_child(try_unshare_user));
  report("unshare_mnt", in_child(try_unshare_mnt));
  report("unshare_net", in_child(try_unshare_net));
  report("ptrace_init", ptrace(PTRACE_ATTACH, 1, 0, 0));
  report("sethostname", sethostname("x", 1));
  report("init_module", syscall(SYS_init_module, NULL, 0, ""));
  report("reboot",
         syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL));
  report("userfaultfd", syscall(SYS_userfaultfd, 0));
  report("io_uring_setup", syscall(425, 1, NULL));
  report("clone3", syscall(435, NULL, 0));
  report("setns_net", setns_self_net());
  report("open_by_handle_at",
         syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, O_RDONLY));
  report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
  report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
  report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
  report("fsopen", syscall(430, "tmpfs", 0));
  report("open_tree", syscall(428, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */));
  report("move_mount", syscall(429, -1, "", AT_FDCWD, "/mnt", 0));
  report("pidfd_getfd", pidfd_getfd_init());
  report("swapon", syscall(SYS_swapon, "/dev/null", 0));
  report("clock_settime", clock_settime_now());
  report("syslog",
         syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0));
  report("mknod_block", mknod("/dev/probe-sda", S_IFBLK | 0600, makedev(8, 0)));
  report("kill_init", kill(1, SIGKILL));
}

/* Connect to ADDR:PORT (IPv4, or IPv6 when ADDR has a colon) with a 2 s
 * timeout. */
static void net(const char *addr, int port) {
  struct sockaddr_storage ss;
  struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
  int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
  int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  socklen_t salen;
  char name[80];
  struct timeval tv = {2, 0};
  fd_set w;
  int r, e = 0;
  socklen_t len = sizeof(e);

  memset(&ss, 0, sizeof(ss));
  if (family == AF_INET6) {
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    inet_pton(AF_INET6, addr, &sin6->sin6_addr);
    salen = sizeof(*sin6);
  } else {
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    inet_pton(AF_INET, addr, &sin->sin_addr);
    salen = sizeof(*sin);
  }
  snprintf(name, sizeof(name), "connect_%s_%d", addr, port);
  r = connect(s, (struct sockaddr *)&ss, salen);
  if (r < 0 && errno == EINPROGRESS) {
    FD_ZERO(&w);
    FD_SET(s, &w);
    r = select(s + 1, NULL, &w, NULL, &tv);
    if (r == 0) {
      errno = ETIMEDOUT;
      r = -1;
    } else {
      getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len);
      errno = e;
      r = e ? -1 : 0;
    }
  }
  report(name, r);
}

static void memhog(long mb) {
  for (long i = 0; i < mb; i++) {
    char *p = malloc(1 << 20);
    if (p == NULL) {
      printf("malloc failed at %ld MiB\n", i);
      return;
    }
    memset(p, 1, 1 << 20);
  }
  printf("allocated %ld MiB\n", mb);
}

static void forkbomb(int seconds) {
  int made = 0, failed = 0;
  time_t end = time(NULL) + seconds;

  while (time(NULL) < end) {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid > 0)
      made++;
    else
      failed++;
  }
  printf("forks: %d made, %d refused\n", made, failed);
  fflush(stdout);
  kill(0, SIGKILL);
}

/* Ask the kernel for a route the way `ip route add` does; returns the
 * netlink acknowledgement's verdict. */
static int netlink_route_add(void) {
  struct {
    struct nlmsghdr nh;
    struct rtmsg rt;
    struct rtattr oif_hdr;
    int oif;
  } req;
  char buf[4096];
  struct nlmsghdr *nh = (struct nlmsghdr *)buf;
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  ssize_t n;

  if (s < 0)
    return -1;
  memset(&req, 0, sizeof(req));
  req.nh.nlmsg_len = sizeof(req);
  req.nh.nlmsg_type = RTM_NEWROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
  req.rt.rtm_family = AF_INET;
  req.rt.rtm_table = RT_TABLE_MAIN;
  req.rt.rtm_protocol = RTPROT_BOOT;
  req.rt.rtm_scope = RT_SCOPE_LINK;
  req.rt.rtm_type = RTN_UNICAST;
  req.oif_hdr.rta_len = RTA_LENGTH(sizeof(int));
  req.oif_hdr.rta_type = RTA_OIF;
  req.oif = (int)if_nametoindex("lo");
  if (send(s, &req, sizeof(req), 0) < 0) {
    close(s);
    return -1;
  }
  n = recv(s, buf, sizeof(buf), 0);
  close(s);
  if (n < 0)
    return -1;
  if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) &&
      nh->nlmsg_type == NLMSG_ERROR) {
    struct nlmsgerr *e = NLMSG_DATA(nh);
    if (e->error != 0) {
      errno = -e->error;
      return -1;
    }
    return 0;
  }
  errno = EINVAL;
  return -1;
}

/* What `ip link set lo up` and `ip route add default dev lo` do. */
static void netadmin(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  struct rtentry rt;

  memset(&ifr, 0, sizeof(ifr));
  strcpy(ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
    report("get_lo_flags", -1);
  } else {
    ifr.ifr_flags |= IFF_UP;
    report("ifup_lo", ioctl(s, SIOCSIFFLAGS, &ifr));
  }
  memset(&rt, 0, sizeof(rt));
  ((struct sockaddr_in *)&rt.rt_dst)->sin_family = AF_INET;
  ((struct sockaddr_in *)&rt.rt_genmask)->sin_family = AF_INET;
  rt.rt_flags = RTF_UP;
  rt.rt_dev = "lo";
  report("route_add_ioctl", ioctl(s, SIOCADDRT, &rt));
  report("route_add_netlink", netlink_route_add());
  close(s);
}

/* The classic chroot escape: chroot into a subdirectory while the cwd
 * stays outside it, climb with "..", chroot again. With the old root
 * unmounted, the climb ends at the sandbox's own root. */
static void escape(const char *path) {
  struct stat st;

  mkdir("/tmp/.probe-jail", 0700);
  if (chroot("/tmp/.probe-jail") < 0) {
    report("chroot", -1);
    return;
  }
  for (int i = 0; i < 64; i++)
    if (chdir("..") < 0)
      break;
  report("chroot_again", chroot("."));
  report("escape_stat", stat(path, &st));
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "syscalls") == 0)
    syscalls();
  else if (argc >= 4 && strcmp(argv[1], "net") == 0)
    net(argv[2], atoi(argv[3]));
  else if (argc >= 3 && strcmp(argv[1], "memhog") == 0)
    memhog(atol(argv[2]));
  else if (argc >= 3 && strcmp(argv[1], "forkbomb") == 0)
    forkbomb(atoi(argv[2]));
  else if (argc >= 2 && strcmp(argv[1], "netadmin") == 0)
    netadmin();
  else if (argc >= 3 && strcmp(argv[1], "escape") == 0)
    escape(argv[2]);
  else {
    fprintf(stderr, "usage: probe syscalls | net ADDR PORT | memhog MB | "
                    "forkbomb SECONDS | netadmin | escape PATH\n");
    return 2;
  }
  return 0;
}
