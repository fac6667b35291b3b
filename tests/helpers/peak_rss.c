/*
 * peak_rss: run a command and write the peak resident memory of the
 * largest process in its tree to a file, in KiB.
 *
 *   peak_rss FILE COMMAND [ARG...]
 *
 * The kernel carries a child's ru_maxrss up to whoever waits for it, but
 * a process that exits without waiting for its children (git fetch when
 * its remote helper fails) loses theirs. So peak_rss is a child
 * subreaper: orphans of the tree become its children, and it waits for
 * every one of them, keeping the largest figure.
 *
 * Exits with the command's status (128+N for signal N).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct rusage ru;
  long peak = 0;
  int ws, status = 2;
  pid_t pid, done;
  FILE *f;

  if (argc < 3) {
    fprintf(stderr, "usage: peak_rss FILE COMMAND [ARG...]\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
    perror("peak_rss: PR_SET_CHILD_SUBREAPER");
    return 2;
  }
  pid = fork();
  if (pid < 0) {
    perror("peak_rss: fork");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    perror("peak_rss: exec");
    _exit(127);
  }
  while ((done = wait4(-1, &ws, 0, &ru)) > 0 || errno == EINTR) {
    if (done <= 0)
      continue;
    if (ru.ru_maxrss > peak)
      peak = ru.ru_maxrss;
    if (done == pid)
      status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  }
  if (errno != ECHILD) {
    perror("peak_rss: wait");
    return 2;
  }
  f = fopen(argv[1], "w");
  if (f == NULL || fprintf(f, "%ld\n", peak) < 0 || fclose(f) != 0) {
    perror("peak_rss: write");
    return 2;
  }
  return status;
}
