/*
 * hostile_fs: a static program the files API security tests copy into a
 * sandbox. It builds the trees a hostile sandbox would plant for the
 * daemon to trip on, and races the daemon while it works:
 *
 *   hostile_fs exchange A B SECONDS STOPFILE
 *       swap A and B with renameat2(RENAME_EXCHANGE) as fast as it can,
 *       until SECONDS pass or STOPFILE exists; prints "swaps N"
 *   hostile_fs deep DIR LEVELS      DIR/d/d/d/... LEVELS deep, a file at
 *                                   the bottom (made fd-relative, so the
 *                                   depth is not limited by PATH_MAX)
 *   hostile_fs many DIR COUNT       COUNT names in DIR (empty files and
 *                                   hardlinks to them)
 *   hostile_fs sock PATH            a unix socket bound at PATH, left there
 *   hostile_fs chain DIR N TARGET   DIR/l0 -> l1 -> ... -> l{N-1} -> TARGET
 *
 * Each prints what it did on one line, or "ERROR: ..." and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int die(const char *what) {
  printf("ERROR: %s: %s\n", what, strerror(errno));
  return 1;
}

static double now(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The race: between the daemon resolving a path and using what it
 * resolved, the directory and the symlink trade places. */
static int cmd_exchange(const char *a, const char *b, double secs,
                        const char *stop) {
  double end = now() + secs;
  unsigned long swaps = 0, fails = 0;

  while (now() < end) {
    for (int i = 0; i < 1000; i++) {
      if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0)
        swaps++;
      else
        fails++;
    }
    if (access(stop, F_OK) == 0)
      break;
  }
  printf("swaps %lu failed %lu\n", swaps, fails);
  return 0;
}

static int cmd_deep(const char *dir, long levels) {
  int fd, leaf;

  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return die("mkdir");
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return die("open");
  for (long i = 0; i < levels; i++) {
    int next;
    if (mkdirat(fd, "d", 0755) < 0 && errno != EEXIST)
      return die("mkdirat");
    next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      return die("openat");
    close(fd);
    fd = next;
  }
  leaf = openat(fd, "leaf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (leaf < 0 || write(leaf, "bottom\n", 7) != 7)
    return die("leaf");
  close(leaf);
  close(fd);
  printf("deep %ld\n", levels);
  return 0;
}

/* COUNT names in DIR. Creating an inode costs this host's filesystem tens
 * of microseconds, so most names are hardlinks to a few files (ext4 allows
 * 65000 links to one inode): a directory just as large, made in seconds. */
static int cmd_many(const char *dir, long count) {
  char name[32], base[32] = "";
  int fd, f;

  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return die("mkdir");
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return die("open");
  for (long i = 0; i < count; i++) {
    snprintf(name, sizeof(name), "f%07ld", i);
    if (i % 50000 != 0) {
      if (linkat(fd, base, fd, name, 0) < 0)
        return die("link");
      continue;
    }
    f = openat(fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
      return die("create");
    close(f);
    snprintf(base, sizeof(base), "%s", name);
  }
  close(fd);
  printf("many %ld\n", count);
  return 0;
}

static int cmd_sock(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return die("socket");
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
    return die("bind");
  printf("sock %s\n", path);
  return 0;
}

static int cmd_chain(const char *dir, long n, const char *target) {
  char name[32], next[32];

  if (mkdir(dir, 0755) < 0 && errno != EEXIST)
    return die("mkdir");
  if (chdir(dir) < 0)
    return die("chdir");
  for (long i = 0; i < n; i++) {
    snprintf(name, sizeof(name), "l%ld", i);
    snprintf(next, sizeof(next), "l%ld", i + 1);
    if (symlink(i + 1 < n ? next : target, name) < 0)
      return die("symlink");
  }
  printf("chain %ld\n", n);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 6 && strcmp(argv[1], "exchange") == 0)
    return cmd_exchange(argv[2], argv[3], atof(argv[4]), argv[5]);
  if (argc == 4 && strcmp(argv[1], "deep") == 0)
    return cmd_deep(argv[2], atol(argv[3]));
  if (argc == 4 && strcmp(argv[1], "many") == 0)
    return cmd_many(argv[2], atol(argv[3]));
  if (argc == 3 && strcmp(argv[1], "sock") == 0)
    return cmd_sock(argv[2]);
  if (argc == 5 && strcmp(argv[1], "chain") == 0)
    return cmd_chain(argv[2], atol(argv[3]), argv[4]);
  fprintf(stderr, "usage: hostile_fs exchange|deep|many|sock|chain ...\n");
  return 2;
}
