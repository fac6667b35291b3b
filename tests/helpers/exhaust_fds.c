/*
 * exhaust_fds: opens file descriptors until the kernel refuses, for the
 * resource tests. Each opener first raises its soft RLIMIT_NOFILE to the
 * hard one, as an attacker would.
 *
 *   exhaust_fds one          one process; also tries to raise the hard
 *                            limit. Prints "nofile: SOFT HARD",
 *                            "raise_hard: ERRNO|ok", "fds: N opened, ERRNO"
 *   exhaust_fds many N SECS  N processes at once (fork may be refused),
 *                            each holding what it opened for SECS seconds.
 *                            Prints "procs: K started, R refused",
 *                            "fds: TOTAL opened, EMFILE=a ENFILE=b other=c"
 *                            and "holding" while they hold.
 *
 * A struct file is made per open (of /dev/null), so the fds count against
 * the host's fs.file-max: EMFILE is the per-process limit stopping an
 * opener, ENFILE would be the whole host running out.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

struct result {
  long opened;
  int err;
};

static const char *errname(int e) {
  const char *name = e ? strerrorname_np(e) : "ok";

  return name ? name : "EOTHER";
}

static void raise_soft(void) {
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static struct result open_all(void) {
  struct result r = {0, 0};

  for (;;) {
    if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0) {
      r.err = errno;
      return r;
    }
    r.opened++;
  }
}

static int one(void) {
  struct rlimit rl;
  struct result r;

  raise_soft();
  getrlimit(RLIMIT_NOFILE, &rl);
  printf("nofile: %llu %llu\n", (unsigned long long)rl.rlim_cur,
         (unsigned long long)rl.rlim_max);
  rl.rlim_max = rl.rlim_max * 2 + 1;
  rl.rlim_cur = rl.rlim_max;
  printf("raise_hard: %s\n",
         setrlimit(RLIMIT_NOFILE, &rl) < 0 ? errname(errno) : "ok");
  r = open_all();
  printf("fds: %ld opened, %s\n", r.opened, errname(r.err));
  return 0;
}

static int many(int n, int secs) {
  int started = 0, refused = 0, p[2];
  long total = 0, emfile = 0, enfile = 0, other = 0;
  struct result r;

  if (pipe(p) < 0)
    return 1;
  for (int i = 0; i < n; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      refused++;
      continue;
    }
    if (pid == 0) {
      close(p[0]);
      raise_soft();
      /* fd p[1] stays: the report needs it, so one fewer is opened. */
      r = open_all();
      if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
        _exit(1);
      sleep((unsigned)secs);
      _exit(0);
    }
    started++;
  }
  close(p[1]);
  for (int i = 0; i < started && read(p[0], &r, sizeof(r)) == sizeof(r); i++) {
    total += r.opened;
    if (r.err == EMFILE)
      emfile++;
    else if (r.err == ENFILE)
      enfile++;
    else
      other++;
  }
  printf("procs: %d started, %d refused\n", started, refused);
  printf("fds: %ld opened, EMFILE=%ld ENFILE=%ld other=%ld\n", total, emfile,
         enfile, other);
  printf("holding\n");
  while (wait(NULL) > 0 || errno == EINTR)
    ;
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && strcmp(argv[1], "one") == 0)
    return one();
  if (argc == 4 && strcmp(argv[1], "many") == 0)
    return many(atoi(argv[2]), atoi(argv[3]));
  fprintf(stderr, "usage: exhaust_fds one | many N SECS\n");
  return 2;
}
