/*
 * attack_privs: privilege attacks for tests/security/20-privileges.sh.
 * One line per attempt, "NAME: ok" or "NAME: ERRNO", as probe does.
 *
 *   caps                  this process's ids and capability sets
 *   setfcap PATH HEX      give PATH the file capabilities HEX (by hand:
 *                         the image has no setcap), effective bit set
 *   procwrite DIR...      try to open every file under each DIR for
 *                         writing (not following links, and leaving out
 *                         /proc/PID); print the ones that open, a count
 *   userns                re-enable nested user namespaces, then use one
 *   cgroupfs              mount cgroup v1 (with a release agent), cgroup2
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static void report(const char *name, long r) {
  if (r < 0) {
    const char *e = strerrorname_np(errno);
    printf("%s: %s\n", name, e ? e : "EUNKNOWN");
  } else {
    printf("%s: ok\n", name);
  }
  fflush(stdout);
}

/* The lines of /proc/self/status a test asserts on. */
static void caps(void) {
  static const char *const keys[] = {
      "Uid:",    "Gid:",    "CapInh:", "CapPrm:",
      "CapEff:", "CapBnd:", "CapAmb:", "NoNewPrivs:"};
  char line[256];
  FILE *f = fopen("/proc/self/status", "re");

  if (f == NULL) {
    report("status", -1);
    return;
  }
  while (fgets(line, sizeof(line), f) != NULL)
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
      if (strncmp(line, keys[i], strlen(keys[i])) == 0)
        fputs(line, stdout);
  fclose(f);
}

/* security.capability, revision 2: the capabilities in mask permitted
 * and effective. In a user namespace the kernel stores it as revision 3,
 * tied to the namespace's root. (The kernel refuses to exec a file whose
 * effective bit asks for more than the bounding set allows, so a mask
 * within it is what tests no_new_privs.) */
static void setfcap(const char *path, unsigned long long mask) {
  struct {
    uint32_t magic_etc;
    struct {
      uint32_t permitted, inheritable;
    } data[2];
  } cap = {
      .magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
      .data = {{(uint32_t)mask, 0}, {(uint32_t)(mask >> 32), 0}},
  };

  report("setfcap",
         setxattr(path, "security.capability", &cap, sizeof(cap), 0));
  report("getfcap", getxattr(path, "security.capability", &cap, sizeof(cap)));
}

static int nfiles, nwritable;

/* Under /proc, processes' own entries are not the kernel's: skip them. */
static int per_process(const char *path, const struct FTW *ftw) {
  const char *name = path + ftw->base;

  return ftw->level == 1 && strncmp(path, "/proc/", 6) == 0 &&
         (strspn(name, "0123456789") == strlen(name) ||
          strcmp(name, "self") == 0 || strcmp(name, "thread-self") == 0);
}

static int try_write(const char *path, const struct stat *st, int type,
                     struct FTW *ftw) {
  int fd;

  (void)st;
  if (per_process(path, ftw))
    return FTW_SKIP_SUBTREE;
  if (type != FTW_F)
    return FTW_CONTINUE;
  nfiles++;
  fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    nwritable++;
    printf("writable: %s\n", path);
    close(fd);
  }
  return FTW_CONTINUE;
}

static void procwrite(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    nfiles = nwritable = 0;
    if (nftw(argv[i], try_write, 16, FTW_PHYS | FTW_ACTIONRETVAL) < 0) {
      report(argv[i], -1);
      continue;
    }
    printf("%s: %d files, %d writable\n", argv[i], nfiles, nwritable);
  }
  fflush(stdout);
}

static int write_file(const char *path, const char *value) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int r, e;

  if (fd < 0)
    return -1;
  r = (int)write(fd, value, strlen(value));
  e = errno;
  close(fd);
  errno = e;
  return r < 0 ? -1 : 0;
}

/* The sysctl that would allow nested user namespaces, written through
 * every way to reach it: the masked /proc/sys and a fresh proc mount. */
static void userns(void) {
  pid_t pid;
  int status;

  report("write_max_user_namespaces",
         write_file("/proc/sys/user/max_user_namespaces", "1000"));
  report("write_unprivileged_userns_clone",
         write_file("/proc/sys/kernel/unprivileged_userns_clone", "1"));
  mkdir("/tmp/.attack-proc", 0700);
  report("mount_fresh_proc",
         mount("proc", "/tmp/.attack-proc", "proc", 0, NULL));
  pid = fork();
  if (pid == 0)
    _exit(unshare(CLONE_NEWUSER) < 0 ? errno : 0);
  waitpid(pid, &status, 0);
  errno = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  report("unshare_newuser", errno ? -1 : 0);
}

static void cgroupfs(void) {
  mkdir("/tmp/.attack-cg", 0700);
  report("mount_cgroup_v1_release_agent",
         mount("cgroup", "/tmp/.attack-cg", "cgroup", 0,
               "none,name=attack,release_agent=/tmp/.attack-payload"));
  report("mount_cgroup_v1_memory",
         mount("cgroup", "/tmp/.attack-cg", "cgroup", 0, "memory"));
  report("mount_cgroup2",
         mount("cgroup2", "/tmp/.attack-cg", "cgroup2", 0, NULL));
  report("fsopen_cgroup2", syscall(SYS_fsopen, "cgroup2", 0));
  report("fsopen_cgroup", syscall(SYS_fsopen, "cgroup", 0));
}

int main(int argc, char **argv) {
  const char *cmd = argc >= 2 ? argv[1] : "";

  if (strcmp(cmd, "caps") == 0)
    caps();
  else if (strcmp(cmd, "setfcap") == 0 && argc == 4)
    setfcap(argv[2], strtoull(argv[3], NULL, 16));
  else if (strcmp(cmd, "procwrite") == 0)
    procwrite(argc - 2, argv + 2);
  else if (strcmp(cmd, "userns") == 0)
    userns();
  else if (strcmp(cmd, "cgroupfs") == 0)
    cgroupfs();
  else {
    fprintf(stderr, "usage: attack_privs caps | setfcap PATH HEX | "
                    "procwrite DIR... | userns | cgroupfs\n");
    return 2;
  }
  return 0;
}
