/*
 * hostile_ns: a static program the neighbour tests copy into two
 * sandboxes. One side offers something (a loopback listener, an abstract
 * unix socket, System V IPC objects); the other tries to reach it, or to
 * signal the first one's processes. Every attempt prints one line,
 * "WHAT: ok ..." or "WHAT: ERRNO_NAME", for the test to assert on.
 *
 *   hostile_ns tcp-listen PORT MARKER SECONDS   on 127.0.0.1, answer MARKER
 *   hostile_ns tcp-connect PORT                 to 127.0.0.1, print answer
 *   hostile_ns unix-listen NAME MARKER SECONDS  abstract socket @NAME
 *   hostile_ns unix-connect NAME
 *   hostile_ns ipc-create KEY MARKER    shm (with MARKER), msg queue, sem
 *   hostile_ns ipc-probe KEY [SHMID MSQID SEMID]
 *   hostile_ns kill PID...              kill(PID, SIGKILL) each
 *   hostile_ns kill-scan MAX            kill(p, 0) for p in 1..MAX; prints
 *                                       the pids that answered, then those
 *                                       of them not in its own /proc
 *   hostile_ns pidfd PID...             pidfd_open each
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *err_name(int e) {
  const char *n = strerrorname_np(e);

  return n != NULL ? n : "E?";
}

static void report(const char *what, int r) {
  if (r < 0)
    printf("%s: %s\n", what, err_name(errno));
  else
    printf("%s: ok\n", what);
}

/* Serve MARKER to whoever connects, for SECONDS. */
static int serve(int fd, const char *what, const char *marker, int secs) {
  time_t end = time(NULL) + secs;
  struct timeval tv = {.tv_sec = 1};

  if (listen(fd, 16) < 0) {
    report(what, -1);
    return 1;
  }
  printf("%s: listening\n", what);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  while (time(NULL) < end) {
    int c = accept(fd, NULL, NULL);
    if (c < 0)
      continue;
    if (write(c, marker, strlen(marker)) < 0)
      perror("write");
    close(c);
  }
  return 0;
}

/* Connect and print what the other side says. */
static int fetch(int fd, const struct sockaddr *sa, socklen_t len,
                 const char *what) {
  char buf[256];
  ssize_t n;

  if (connect(fd, sa, len) < 0) {
    report(what, -1);
    return 0;
  }
  n = read(fd, buf, sizeof(buf) - 1);
  buf[n > 0 ? n : 0] = '\0';
  printf("%s: ok %s\n", what, buf);
  return 0;
}

static struct sockaddr_in loopback(int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sa;
}

static int cmd_tcp_listen(int port, const char *marker, int secs) {
  struct sockaddr_in sa = loopback(port);
  int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    report("tcp-listen", -1);
    return 1;
  }
  return serve(fd, "tcp-listen", marker, secs);
}

static int cmd_tcp_connect(int port) {
  struct sockaddr_in sa = loopback(port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  return fetch(fd, (struct sockaddr *)&sa, sizeof(sa), "tcp-connect");
}

/* An abstract address: a NUL, then the name; no file anywhere. */
static socklen_t abstract_addr(struct sockaddr_un *sa, const char *name) {
  size_t n = strlen(name);

  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  if (n > sizeof(sa->sun_path) - 1)
    n = sizeof(sa->sun_path) - 1;
  memcpy(sa->sun_path + 1, name, n);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int cmd_unix_listen(const char *name, const char *marker, int secs) {
  struct sockaddr_un sa;
  socklen_t len = abstract_addr(&sa, name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (bind(fd, (struct sockaddr *)&sa, len) < 0) {
    report("unix-listen", -1);
    return 1;
  }
  return serve(fd, "unix-listen", marker, secs);
}

static int cmd_unix_connect(const char *name) {
  struct sockaddr_un sa;
  socklen_t len = abstract_addr(&sa, name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  return fetch(fd, (struct sockaddr *)&sa, len, "unix-connect");
}

static int cmd_ipc_create(key_t key, const char *marker) {
  int shm = shmget(key, 4096, IPC_CREAT | 0600);
  int msq = msgget(key, IPC_CREAT | 0600);
  int sem = semget(key, 1, IPC_CREAT | 0600);
  char *p;

  if (shm < 0 || msq < 0 || sem < 0) {
    report("ipc-create", -1);
    return 1;
  }
  p = shmat(shm, NULL, 0);
  if (p == (void *)-1) {
    report("shmat", -1);
    return 1;
  }
  snprintf(p, 4096, "%s", marker);
  shmdt(p);
  printf("ipc-create: ok %d %d %d\n", shm, msq, sem);
  return 0;
}

/* Look for the objects by key, and by the ids the other side was given. */
static int cmd_ipc_probe(key_t key, int argc, char **argv) {
  struct shmid_ds sds;
  struct msqid_ds mds;
  int shm = shmget(key, 0, 0);

  if (shm >= 0) {
    char *p = shmat(shm, NULL, SHM_RDONLY);
    printf("shmget: ok %s\n", p == (void *)-1 ? "?" : p);
  } else {
    report("shmget", -1);
  }
  report("msgget", msgget(key, 0));
  report("semget", semget(key, 0, 0));
  if (argc >= 3) {
    report("shmctl-id", shmctl(atoi(argv[0]), IPC_STAT, &sds));
    report("msgctl-id", msgctl(atoi(argv[1]), IPC_STAT, &mds));
    report("semctl-id", semctl(atoi(argv[2]), 0, GETVAL));
  }
  return 0;
}

static int cmd_kill(int argc, char **argv) {
  char what[64];

  for (int i = 0; i < argc; i++) {
    snprintf(what, sizeof(what), "kill %s", argv[i]);
    report(what, kill(atoi(argv[i]), SIGKILL));
  }
  return 0;
}

/* Every pid this process may signal must be one it can also see in its
 * own /proc; a pid that answers but is hidden would be someone else's. */
static int cmd_kill_scan(int max) {
  char proc[32], hidden[4096] = "";

  printf("kill-scan:");
  for (int p = 1; p <= max; p++) {
    if (kill(p, 0) != 0)
      continue;
    printf(" %d", p);
    snprintf(proc, sizeof(proc), "/proc/%d", p);
    if (access(proc, F_OK) != 0 && strlen(hidden) + 16 < sizeof(hidden))
      snprintf(hidden + strlen(hidden), 16, " %d", p);
  }
  printf("\nhidden:%s\n", hidden);
  return 0;
}

static int cmd_pidfd(int argc, char **argv) {
  char what[64];

  for (int i = 0; i < argc; i++) {
    snprintf(what, sizeof(what), "pidfd %s", argv[i]);
    report(what, (int)syscall(SYS_pidfd_open, atoi(argv[i]), 0));
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "";

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 5 && strcmp(cmd, "tcp-listen") == 0)
    return cmd_tcp_listen(atoi(argv[2]), argv[3], atoi(argv[4]));
  if (argc == 3 && strcmp(cmd, "tcp-connect") == 0)
    return cmd_tcp_connect(atoi(argv[2]));
  if (argc == 5 && strcmp(cmd, "unix-listen") == 0)
    return cmd_unix_listen(argv[2], argv[3], atoi(argv[4]));
  if (argc == 3 && strcmp(cmd, "unix-connect") == 0)
    return cmd_unix_connect(argv[2]);
  if (argc == 4 && strcmp(cmd, "ipc-create") == 0)
    return cmd_ipc_create((key_t)strtol(argv[2], NULL, 0), argv[3]);
  if (argc >= 3 && strcmp(cmd, "ipc-probe") == 0)
    return cmd_ipc_probe((key_t)strtol(argv[2], NULL, 0), argc - 3, argv + 3);
  if (argc >= 3 && strcmp(cmd, "kill") == 0)
    return cmd_kill(argc - 2, argv + 2);
  if (argc == 3 && strcmp(cmd, "kill-scan") == 0)
    return cmd_kill_scan(atoi(argv[2]));
  if (argc >= 3 && strcmp(cmd, "pidfd") == 0)
    return cmd_pidfd(argc - 2, argv + 2);
  fprintf(stderr, "usage: hostile_ns tcp-listen|tcp-connect|unix-listen|"
                  "unix-connect|ipc-create|ipc-probe|kill|kill-scan|pidfd\n");
  return 2;
}
