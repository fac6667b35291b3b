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
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *errname(int e) {
  switch (e) {
  case EPERM: return "EPERM";
  case EACCES: return "EACCES";
  case ENOSYS: return "ENOSYS";
  case EINVAL: return "EINVAL";
  case ENETUNREACH: return "ENETUNREACH";
  case ECONNREFUSED: return "ECONNREFUSED";
  case ETIMEDOUT: return "ETIMEDOUT";
  case ESRCH: return "ESRCH";
  case ENOENT: return "ENOENT";
  case EROFS: return "EROFS";
  case EAGAIN: return "EAGAIN";
  case ENOMEM: return "ENOMEM";
  case EHOSTUNREACH: return "EHOSTUNREACH";
  default: return "EOTHER";
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

static int try_unshare_user(void) { return unshare(CLONE_NEWUSER); }
static int try_unshare_mnt(void) { return unshare(CLONE_NEWNS); }
static int try_unshare_net(void) { return unshare(CLONE_NEWNET); }

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
  report("reboot", syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc,
                           NULL));
  report("userfaultfd", syscall(SYS_userfaultfd, 0));
  report("io_uring_setup", syscall(425, 1, NULL));
  report("clone3", syscall(435, NULL, 0));
  report("kill_init", kill(1, SIGKILL));
}

/* Connect to ADDR:PORT with a 2 s timeout. */
static void net(const char *addr, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  char name[64];
  struct timeval tv = {2, 0};
  fd_set w;
  int r, e = 0;
  socklen_t len = sizeof(e);

  inet_pton(AF_INET, addr, &sa.sin_addr);
  snprintf(name, sizeof(name), "connect_%s_%d", addr, port);
  r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
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

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "syscalls") == 0)
    syscalls();
  else if (argc >= 4 && strcmp(argv[1], "net") == 0)
    net(argv[2], atoi(argv[3]));
  else if (argc >= 3 && strcmp(argv[1], "memhog") == 0)
    memhog(atol(argv[2]));
  else if (argc >= 3 && strcmp(argv[1], "forkbomb") == 0)
    forkbomb(atoi(argv[2]));
  else {
    fprintf(stderr, "usage: probe syscalls | net ADDR PORT | memhog MB | "
                    "forkbomb SECONDS\n");
    return 2;
  }
  return 0;
}
