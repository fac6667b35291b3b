/*
 * pin_kernel: makes the kernel hold memory and objects for it that no
 * process frees by exiting early, for the kernel-memory tests: socket
 * buffers nobody reads, full pipes, inotify instances, POSIX message
 * queues. Each command pins up to its target, prints one line saying what
 * it got and why it stopped, prints "holding" and keeps everything for
 * SECS seconds (0: exits at once).
 *
 *   pin_kernel tcp MIB SECS      loopback TCP connections whose data nobody
 *                                reads, both sides' buffers made as large
 *                                as an unprivileged process may.
 *                                "tcp: X MiB queued in N connections, WHY"
 *   pin_kernel pipes MIB SECS    pipes grown to 1 MiB (F_SETPIPE_SZ) and
 *                                filled. "pipes: X MiB in N pipes, WHY"
 *   pin_kernel unix MIB SECS     unix stream socket pairs with the largest
 *                                buffers, filled and never read.
 *                                "unix: X MiB in N pairs, WHY"
 *   pin_kernel inotify MAX SECS  inotify instances, at most MAX.
 *                                "inotify: N instances, WHY"
 *   pin_kernel mqueue MAX SECS   POSIX message queues of 10 x 8 KiB, at
 *                                most MAX. "mqueue: N queues, WHY"
 *
 * WHY is "target" (it got what it asked for) or the errno that stopped it.
 */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MIB (1L << 20)
#define CHUNK 65536
#define MAX_CONNS 1024

static char chunk[CHUNK];

static const char *errname(int e) {
  const char *name = e ? strerrorname_np(e) : "target";

  return name ? name : "EOTHER";
}

static void hold(int secs) {
  printf("holding\n");
  fflush(stdout);
  if (secs > 0)
    sleep((unsigned)secs);
}

static void nap_ms(long ms) {
  struct timespec t = {0, ms * 1000 * 1000};

  nanosleep(&t, NULL);
}

static void raise_nofile(void) {
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static void big_buffers(int fd) {
  int size = 4 << 20; /* net.core.[rw]mem_max caps it (the kernel doubles) */

  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

/* Write to a non-blocking fd until it would block, again while that
 * gets more in (the receiver's window opens as its buffer grows);
 * returns bytes written or -errno of a hard error. */
static long fill(int fd, long room, int flags) {
  long total = 0, before = -1;

  for (int round = 0; round < 8 && total < room && total > before; round++) {
    before = total;
    if (round > 0)
      nap_ms(2);
    for (;;) {
      long want = room - total < CHUNK ? room - total : CHUNK;
      ssize_t n = flags >= 0 ? send(fd, chunk, (size_t)want, flags)
                             : write(fd, chunk, (size_t)want);
      if (n > 0) {
        total += n;
        if (total >= room)
          break;
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return total > 0 ? total : -errno;
      break;
    }
  }
  return total;
}

static int tcp_listener(struct sockaddr_in *sa) {
  socklen_t len = sizeof(*sa);
  int l = socket(AF_INET, SOCK_STREAM, 0);

  if (l < 0)
    return -1;
  big_buffers(l); /* accepted sockets inherit it, and the window scale */
  sa->sin_family = AF_INET;
  sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa->sin_port = 0;
  if (bind(l, (struct sockaddr *)sa, sizeof(*sa)) < 0 ||
      listen(l, MAX_CONNS) < 0 ||
      getsockname(l, (struct sockaddr *)sa, &len) < 0)
    return -1;
  return l;
}

/* One connection; both ends stay open and unread. */
static int tcp_pair(int l, const struct sockaddr_in *sa) {
  int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), s;

  if (c < 0)
    return -errno;
  big_buffers(c);
  if (connect(c, (const struct sockaddr *)sa, sizeof(*sa)) < 0 &&
      errno != EINPROGRESS)
    return -errno;
  s = accept4(l, NULL, NULL, SOCK_NONBLOCK);
  if (s < 0)
    return -errno;
  return c;
}

static int tcp(long mib, int secs) {
  struct sockaddr_in sa;
  long total = 0, target = mib * MIB;
  int l = tcp_listener(&sa), conns = 0, why = 0;

  if (l < 0) {
    printf("tcp: listener: %s\n", errname(errno));
    return 1;
  }
  while (total < target && conns < MAX_CONNS) {
    int c = tcp_pair(l, &sa);
    long n;
    if (c < 0) {
      why = -c;
      break;
    }
    conns++;
    n = fill(c, target - total, MSG_DONTWAIT);
    if (n < 0) {
      why = (int)-n;
      break;
    }
    total += n;
  }
  if (why == 0 && total < target)
    why = EAGAIN;
  printf("tcp: %ld MiB queued in %d connections, %s\n", total / MIB, conns,
         errname(why));
  hold(secs);
  return 0;
}

static int pipes(long mib, int secs) {
  long total = 0, target = mib * MIB;
  int n = 0, why = 0;

  raise_nofile();
  while (total < target) {
    int p[2];
    long got;
    if (pipe2(p, O_NONBLOCK) < 0) {
      why = errno;
      break;
    }
    n++;
    /* Past the per-user soft limit the kernel refuses to grow a pipe. */
    if (fcntl(p[1], F_SETPIPE_SZ, (int)MIB) < 0 && n == 1) {
      why = errno;
      break;
    }
    got = fill(p[1], target - total, -1);
    if (got < 0) {
      why = (int)-got;
      break;
    }
    total += got;
  }
  printf("pipes: %ld MiB in %d pipes, %s\n", total / MIB, n, errname(why));
  hold(secs);
  return 0;
}

static int unix_pairs(long mib, int secs) {
  long total = 0, target = mib * MIB;
  int n = 0, why = 0;

  raise_nofile();
  while (total < target) {
    int sv[2];
    long got;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
      why = errno;
      break;
    }
    n++;
    big_buffers(sv[0]);
    big_buffers(sv[1]);
    got = fill(sv[0], target - total, MSG_DONTWAIT);
    if (got < 0) {
      why = (int)-got;
      break;
    }
    total += got;
  }
  printf("unix: %ld MiB in %d pairs, %s\n", total / MIB, n, errname(why));
  hold(secs);
  return 0;
}

static int inotify(long max, int secs) {
  long n = 0;
  int why = 0;

  raise_nofile();
  for (; n < max; n++)
    if (inotify_init1(IN_CLOEXEC) < 0) {
      why = errno;
      break;
    }
  printf("inotify: %ld instances, %s\n", n, errname(why));
  hold(secs);
  return 0;
}

static int mqueue(long max, int secs) {
  struct mq_attr attr = {.mq_maxmsg = 10, .mq_msgsize = 8192};
  char name[64];
  long n = 0;
  int why = 0;

  raise_nofile();
  for (; n < max; n++) {
    snprintf(name, sizeof(name), "/pin-%d-%ld", (int)getpid(), n);
    if (mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr) < 0) {
      why = errno;
      break;
    }
    /* Unlinked at once: the queue lives as long as this process. */
    mq_unlink(name);
  }
  printf("mqueue: %ld queues, %s\n", n, errname(why));
  hold(secs);
  return 0;
}

int main(int argc, char **argv) {
  long amount;
  int secs;

  if (argc != 4) {
    fprintf(stderr, "usage: pin_kernel tcp|pipes|unix MIB SECS | "
                    "inotify|mqueue MAX SECS\n");
    return 2;
  }
  amount = atol(argv[2]);
  secs = atoi(argv[3]);
  memset(chunk, 'x', sizeof(chunk));
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(argv[1], "tcp") == 0)
    return tcp(amount, secs);
  if (strcmp(argv[1], "pipes") == 0)
    return pipes(amount, secs);
  if (strcmp(argv[1], "unix") == 0)
    return unix_pairs(amount, secs);
  if (strcmp(argv[1], "inotify") == 0)
    return inotify(amount, secs);
  if (strcmp(argv[1], "mqueue") == 0)
    return mqueue(amount, secs);
  fprintf(stderr, "pin_kernel: unknown command `%s`\n", argv[1]);
  return 2;
}
