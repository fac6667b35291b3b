/*
 * attack_runtime: attacks on the runtime for tests/security/30-runtime.sh.
 * One line per attempt, "NAME: ok" or "NAME: ERRNO", as probe does.
 *
 *   fds                   this process's fds (other than the listing's)
 *   exe PATH...           open each PATH (a /proc/PID/exe) for writing,
 *                         and write to it if that worked
 *   seals PATH            the seals of the memfd PATH leads to (host)
 *   cwd [PATH]            where the working directory is; PATH, relative
 *                         to it, must not be readable
 *   proc1                 init's sensitive /proc entries, read and write
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* "fds: 0 1 2", then one line per fd beyond stdio with its target. */
static void fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  char list[512] = "", extra[4096] = "", path[64], target[256];

  if (d == NULL) {
    report("opendir", -1);
    return;
  }
  while ((e = readdir(d)) != NULL) {
    int fd;
    ssize_t n;
    if (e->d_name[0] == '.')
      continue;
    fd = atoi(e->d_name);
    if (fd == dirfd(d))
      continue;
    snprintf(list + strlen(list), sizeof(list) - strlen(list), " %d", fd);
    if (fd <= 2)
      continue;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
             "fd %d: %s\n", fd, target);
  }
  closedir(d);
  printf("fds:%s\n%s", list, extra);
}

static void exe(int argc, char **argv) {
  char name[PATH_MAX + 32];

  for (int i = 0; i < argc; i++) {
    int fd;

    snprintf(name, sizeof(name), "open_wronly %s", argv[i]);
    fd = open(argv[i], O_WRONLY | O_CLOEXEC);
    report(name, fd);
    if (fd >= 0) {
      snprintf(name, sizeof(name), "write %s", argv[i]);
      report(name, pwrite(fd, "EVIL", 4, 0));
      close(fd);
    }
    snprintf(name, sizeof(name), "open_rdwr %s", argv[i]);
    fd = open(argv[i], O_RDWR | O_CLOEXEC);
    report(name, fd);
    if (fd >= 0)
      close(fd);
  }
}

static void seals(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int s = fd < 0 ? -1 : fcntl(fd, F_GET_SEALS);

  if (s < 0) {
    report("seals", -1);
  } else {
    printf("seals:%s%s%s%s\n", s & F_SEAL_SEAL ? " seal" : "",
           s & F_SEAL_SHRINK ? " shrink" : "", s & F_SEAL_GROW ? " grow" : "",
           s & F_SEAL_WRITE ? " write" : "");
    fflush(stdout);
  }
  if (fd >= 0)
    close(fd);
}

static void cwd(const char *relative) {
  char buf[PATH_MAX];
  int fd;

  if (getcwd(buf, sizeof(buf)) == NULL)
    report("cwd", -1);
  else
    printf("cwd: %s\n", buf);
  if (relative != NULL) {
    fd = open(relative, O_RDONLY | O_CLOEXEC);
    report("relative", fd);
  }
  fflush(stdout);
}

/* Reading, listing and following init's entries; writing the ones that
 * change a process. Each must fail, or be harmless (the tests say which). */
static void proc1(void) {
  static const char *const readable[] = {
      "environ", "mem",   "auxv",        "maps", "smaps",          "pagemap",
      "syscall", "stack", "personality", "io",   "task/1/environ", "task/1/mem",
  };
  static const char *const links[] = {"root", "cwd",         "exe",    "fd/0",
                                      "fd/3", "task/1/root", "ns/user"};
  static const char *const dirs[] = {"fd",        "fdinfo", "map_files",
                                     "task/1/fd", "root/",  "cwd/"};
  static const char *const writable[][2] = {
      {"timerslack_ns", "1"}, {"oom_score_adj", "1000"},   {"comm", "pwned"},
      {"mem", "x"},           {"setgroups", "allow"},      {"uid_map", "0 0 1"},
      {"attr/current", "x"},  {"coredump_filter", "0xff"},
  };
  char path[128], name[128], target[256];

  for (size_t i = 0; i < sizeof(readable) / sizeof(readable[0]); i++) {
    int fd;
    char c;
    snprintf(path, sizeof(path), "/proc/1/%s", readable[i]);
    snprintf(name, sizeof(name), "read_%s", readable[i]);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    report(name, fd < 0 ? -1 : read(fd, &c, 1));
    if (fd >= 0)
      close(fd);
  }
  for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
    snprintf(path, sizeof(path), "/proc/1/%s", links[i]);
    snprintf(name, sizeof(name), "readlink_%s", links[i]);
    report(name, readlink(path, target, sizeof(target)));
  }
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    DIR *d;
    snprintf(path, sizeof(path), "/proc/1/%s", dirs[i]);
    snprintf(name, sizeof(name), "list_%s", dirs[i]);
    d = opendir(path);
    report(name, d == NULL ? -1 : 0);
    if (d != NULL)
      closedir(d);
  }
  for (size_t i = 0; i < sizeof(writable) / sizeof(writable[0]); i++) {
    int fd;
    long r;
    snprintf(path, sizeof(path), "/proc/1/%s", writable[i][0]);
    snprintf(name, sizeof(name), "write_%s", writable[i][0]);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    r = fd < 0 ? -1 : write(fd, writable[i][1], strlen(writable[i][1]));
    report(name, r);
    if (fd >= 0)
      close(fd);
  }
}

int main(int argc, char **argv) {
  const char *cmd = argc >= 2 ? argv[1] : "";

  if (strcmp(cmd, "fds") == 0)
    fds();
  else if (strcmp(cmd, "exe") == 0)
    exe(argc - 2, argv + 2);
  else if (strcmp(cmd, "seals") == 0 && argc == 3)
    seals(argv[2]);
  else if (strcmp(cmd, "cwd") == 0)
    cwd(argc >= 3 ? argv[2] : NULL);
  else if (strcmp(cmd, "proc1") == 0)
    proc1();
  else {
    fprintf(
        stderr,
        "usage: attack_runtime fds | exe PATH... | seals PATH | cwd [PATH] | "
        "proc1\n");
    return 2;
  }
  return 0;
}
