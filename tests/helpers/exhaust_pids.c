/*
 * exhaust_pids: processes that multiply or refuse to die, for the
 * resource tests.
 *
 *   exhaust_pids forkbomb   every process ignores and blocks every signal
 *                           it can, then forks for ever (retrying when a
 *                           fork is refused); never exits by itself
 *   exhaust_pids threads    creates sleeping threads until one is refused
 *                           (the pids limit counts threads too); prints
 *                           "threads: N made, ERRNO"
 *   exhaust_pids immortal   ignores and blocks every signal it can, prints
 *                           "immortal" and sleeps for ever
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *errname(int e) {
  const char *name = e ? strerrorname_np(e) : "ok";

  return name ? name : "EOTHER";
}

/* Only SIGKILL and SIGSTOP are left to stop us. */
static void harden(void) {
  sigset_t all;

  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      signal(sig, SIG_IGN);
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
}

static void nap(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

  nanosleep(&ts, NULL);
}

static _Noreturn void forkbomb(void) {
  harden();
  printf("bomb\n");
  fflush(stdout);
  for (;;)
    if (fork() < 0)
      nap(10);
}

static void *sleeper(void *arg) {
  (void)arg;
  for (;;)
    pause();
  return NULL;
}

static _Noreturn void threads(void) {
  pthread_attr_t attr;
  long made = 0;
  int r;

  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (;;) {
    pthread_t t;
    if ((r = pthread_create(&t, &attr, sleeper, NULL)) != 0)
      break;
    made++;
  }
  printf("threads: %ld made, %s\n", made, errname(r));
  fflush(stdout);
  _exit(0);
}

static _Noreturn void immortal(void) {
  harden();
  printf("immortal\n");
  fflush(stdout);
  for (;;)
    nap(1000);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "forkbomb") == 0)
    forkbomb();
  if (argc == 2 && strcmp(argv[1], "threads") == 0)
    threads();
  if (argc == 2 && strcmp(argv[1], "immortal") == 0)
    immortal();
  fprintf(stderr, "usage: exhaust_pids forkbomb | threads | immortal\n");
  return 2;
}
