/*
 * exhaust_disk: fills a sandbox's filesystem, for the resource tests.
 *
 *   exhaust_disk fill FILE            write 1 MiB blocks until a write fails
 *   exhaust_disk fallocate FILE MIB   reserve MIB MiB at once
 *   exhaust_disk inodes DIR MAX       create empty files until one fails
 *
 * Each prints one line: what it managed, then the errno name of the
 * failure that stopped it ("ok" when nothing failed), e.g.
 * "fill: 58 MiB, ENOSPC".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *errname(int e) {
  const char *name = e ? strerrorname_np(e) : "ok";

  return name ? name : "EOTHER";
}

static int fill(const char *path) {
  static char block[1 << 20];
  long mib = 0;
  int fd, e = 0;

  memset(block, 'x', sizeof(block));
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    printf("fill: 0 MiB, %s\n", errname(errno));
    return 1;
  }
  for (;;) {
    ssize_t n = write(fd, block, sizeof(block));
    if (n < 0) {
      e = errno;
      break;
    }
    /* A short write is the last that fits; the next one says why. */
    if ((size_t)n == sizeof(block))
      mib++;
  }
  if (fsync(fd) < 0 && e == 0)
    e = errno;
  close(fd);
  printf("fill: %ld MiB, %s\n", mib, errname(e));
  return 0;
}

static int reserve(const char *path, long mib) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int r;

  if (fd < 0) {
    printf("fallocate: %s\n", errname(errno));
    return 1;
  }
  r = posix_fallocate(fd, 0, (off_t)mib << 20);
  close(fd);
  printf("fallocate: %s\n", errname(r));
  return 0;
}

static int inodes(const char *dir, long max) {
  char path[4096];
  long made = 0;
  int e = 0;

  if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
    printf("inodes: 0 made, %s\n", errname(errno));
    return 1;
  }
  for (; made < max; made++) {
    int fd;
    snprintf(path, sizeof(path), "%s/f%ld", dir, made);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      e = errno;
      break;
    }
    close(fd);
  }
  printf("inodes: %ld made, %s\n", made, errname(e));
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "fill") == 0)
    return fill(argv[2]);
  if (argc == 4 && strcmp(argv[1], "fallocate") == 0)
    return reserve(argv[2], atol(argv[3]));
  if (argc == 4 && strcmp(argv[1], "inodes") == 0)
    return inodes(argv[2], atol(argv[3]));
  fprintf(stderr, "usage: exhaust_disk fill FILE | fallocate FILE MIB | "
                  "inodes DIR MAX\n");
  return 2;
}
