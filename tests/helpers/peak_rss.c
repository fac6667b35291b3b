/*
 * peak_rss: run a command and write the peak resident memory of the
 * largest process in its tree (ru_maxrss of every waited-for
 * descendant, as the kernel carries it up) to a file, in KiB.
 *
 *   peak_rss FILE COMMAND [ARG...]
 *
 * Exits with the command's status (128+N for signal N).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct rusage ru;
  FILE *f;
  pid_t pid;
  int ws;

  if (argc < 3) {
    fprintf(stderr, "usage: peak_rss FILE COMMAND [ARG...]\n");
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
  if (wait4(pid, &ws, 0, &ru) < 0) {
    perror("peak_rss: wait");
    return 2;
  }
  f = fopen(argv[1], "w");
  if (f == NULL || fprintf(f, "%ld\n", ru.ru_maxrss) < 0 || fclose(f) != 0) {
    perror("peak_rss: write");
    return 2;
  }
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}
