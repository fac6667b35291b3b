/*
 * exhaust_mem: memory bombs for the resource tests.
 *
 *   exhaust_mem procs N MIB HOLD   N processes at once, each touching MIB
 *                                  MiB and holding it for HOLD seconds.
 *                                  Prints "procs: S started, R refused,
 *                                  K killed, F filled" (killed: by SIGKILL,
 *                                  the OOM killer's signal)
 *   exhaust_mem shm FILE MIB       writes MIB MiB into FILE (on a tmpfs:
 *                                  memory no process owns, that no kill
 *                                  frees). Prints "shm: W MiB, ERRNO"
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *errname(int e) {
  const char *name = e ? strerrorname_np(e) : "ok";

  return name ? name : "EOTHER";
}

static void touch(long mib, int hold) {
  size_t len = (size_t)mib << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);

  if (p == MAP_FAILED)
    _exit(2);
  for (size_t i = 0; i < len; i += 4096)
    p[i] = 1;
  sleep((unsigned)hold);
  _exit(0);
}

static int procs(int n, long mib, int hold) {
  int started = 0, refused = 0, killed = 0, filled = 0, status;

  for (int i = 0; i < n; i++) {
    pid_t pid = fork();
    if (pid < 0)
      refused++;
    else if (pid == 0)
      touch(mib, hold);
    else
      started++;
  }
  while (wait(&status) > 0 || errno == EINTR) {
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      killed++;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      filled++;
  }
  printf("procs: %d started, %d refused, %d killed, %d filled\n", started,
         refused, killed, filled);
  return 0;
}

static int shm(const char *path, long mib) {
  static char block[1 << 20];
  long done = 0;
  int fd, e = 0;

  memset(block, 'm', sizeof(block));
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    printf("shm: 0 MiB, %s\n", errname(errno));
    return 1;
  }
  for (; done < mib; done++) {
    if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block)) {
      e = errno ? errno : ENOSPC;
      break;
    }
  }
  close(fd);
  printf("shm: %ld MiB, %s\n", done, errname(e));
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 5 && strcmp(argv[1], "procs") == 0)
    return procs(atoi(argv[2]), atol(argv[3]), atoi(argv[4]));
  if (argc == 4 && strcmp(argv[1], "shm") == 0)
    return shm(argv[2], atol(argv[3]));
  fprintf(stderr, "usage: exhaust_mem procs N MIB HOLD | shm FILE MIB\n");
  return 2;
}
