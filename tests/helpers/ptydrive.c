/*
 * ptydrive: run a command on a fresh pseudo-terminal and drive it with a
 * script, as a person at a terminal would. The tty tests use it to run
 * `warren exec -it` and `warren attach` with a real terminal on stdin.
 *
 *   ptydrive ROWS COLS COMMAND [ARG...]  < SCRIPT
 *
 * The command is a session leader with the pty's slave as its controlling
 * terminal and stdio, sized ROWS x COLS. Everything it writes is copied to
 * our stdout as it arrives. The script, one step per line:
 *
 *   send TEXT         write TEXT to the terminal (escapes: \r \n \t \\ \xHH)
 *   wait TEXT [SECS]  wait until TEXT appears in the output after the end
 *                     of the previous match (default 10 s)
 *   resize ROWS COLS  resize the terminal: the kernel sends SIGWINCH to
 *                     the command, as a terminal emulator's resize does
 *   sleep MS          pause
 *   kill SIGNUM       send a signal to the command
 *   exit CODE [SECS]  wait for the command to end with status CODE
 *                     (128+N for signal N; default 10 s)
 *
 * Exit status: 0 when every step passed; 1 with a message on stderr when
 * one did not (the output seen so far is on stdout); 2 for usage errors.
 * Without an `exit` step the command's own status is returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

struct drive {
  int master;
  pid_t pid;
  char *seen; /* all output so far, NUL-terminated */
  size_t len, cap;
  size_t cursor; /* where the next `wait` starts looking */
  bool exited;
  int status;   /* shell-style: code, or 128+signal */
  bool checked; /* an `exit` step passed */
};

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "ptydrive: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(1);
}

static long long now_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void append(struct drive *d, const char *buf, size_t n) {
  if (d->len + n + 1 > d->cap) {
    d->cap = (d->len + n + 1) * 2;
    d->seen = realloc(d->seen, d->cap);
    if (d->seen == NULL)
      abort();
  }
  memcpy(d->seen + d->len, buf, n);
  d->len += n;
  d->seen[d->len] = '\0';
  fwrite(buf, 1, n, stdout);
  fflush(stdout);
}

static void reap(struct drive *d, bool block) {
  int st;

  if (d->exited || waitpid(d->pid, &st, block ? 0 : WNOHANG) != d->pid)
    return;
  d->exited = true;
  d->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Read what the terminal has for up to `ms`; false once it is closed
 * (every slave fd gone: EIO) and the command has ended. */
static bool pump(struct drive *d, int ms) {
  struct pollfd p = {d->master, POLLIN, 0};
  char buf[4096];
  ssize_t n;

  if (d->master < 0) {
    reap(d, false);
    if (!d->exited)
      usleep((useconds_t)ms * 1000);
    return !d->exited;
  }
  if (poll(&p, 1, ms) <= 0)
    return true;
  n = read(d->master, buf, sizeof(buf));
  if (n > 0) {
    append(d, buf, (size_t)n);
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  close(d->master);
  d->master = -1;
  return true;
}

/* C-style escapes in place; returns the decoded length. */
static size_t unescape(char *s) {
  char *out = s;

  for (char *p = s; *p != '\0'; p++) {
    if (*p != '\\' || p[1] == '\0') {
      *out++ = *p;
      continue;
    }
    p++;
    switch (*p) {
    case 'r':
      *out++ = '\r';
      break;
    case 'n':
      *out++ = '\n';
      break;
    case 't':
      *out++ = '\t';
      break;
    case 'x': {
      char hex[3] = {p[1], p[1] ? p[2] : 0, 0};
      *out++ = (char)strtol(hex, NULL, 16);
      p += 2;
      break;
    }
    default:
      *out++ = *p;
      break;
    }
  }
  return (size_t)(out - s);
}

static void step_send(struct drive *d, char *text) {
  size_t n = unescape(text);

  for (size_t off = 0; off < n;) {
    ssize_t w = write(d->master, text + off, n - off);
    if (w < 0 && errno != EINTR)
      die("send: %s", strerror(errno));
    if (w > 0)
      off += (size_t)w;
  }
}

static void step_wait(struct drive *d, char *arg) {
  char *secs = strrchr(arg, ' ');
  long long deadline;
  char *hit;

  deadline = now_ms() + 10000;
  if (secs != NULL && strspn(secs + 1, "0123456789") == strlen(secs + 1) &&
      secs[1] != '\0') {
    deadline = now_ms() + atoll(secs + 1) * 1000;
    *secs = '\0';
  }
  unescape(arg);
  while ((hit = strstr(d->seen + d->cursor, arg)) == NULL) {
    if (now_ms() > deadline || (d->master < 0 && d->exited)) {
      fprintf(stderr, "ptydrive: `%s` did not appear\n", arg);
      exit(1);
    }
    pump(d, 50);
  }
  d->cursor = (size_t)(hit - d->seen) + strlen(arg);
}

static void step_resize(struct drive *d, const char *arg) {
  struct winsize ws = {0};
  unsigned rows, cols;

  if (sscanf(arg, "%u %u", &rows, &cols) != 2)
    die("resize: `%s`", arg);
  ws.ws_row = (unsigned short)rows;
  ws.ws_col = (unsigned short)cols;
  if (ioctl(d->master, TIOCSWINSZ, &ws) < 0)
    die("TIOCSWINSZ: %s", strerror(errno));
}

static void step_exit(struct drive *d, const char *arg) {
  int want = 0, secs = 10;
  long long deadline;

  if (sscanf(arg, "%d %d", &want, &secs) < 1)
    die("exit: `%s`", arg);
  deadline = now_ms() + secs * 1000LL;
  for (;;) {
    reap(d, false);
    if (d->exited && d->master < 0)
      break;
    if (d->exited) { /* drain what is left, briefly */
      for (int i = 0; i < 10 && d->master >= 0; i++)
        pump(d, 20);
      break;
    }
    if (now_ms() > deadline) {
      fprintf(stderr, "ptydrive: the command did not exit within %d s\n", secs);
      exit(1);
    }
    pump(d, 50);
  }
  if (d->status != want) {
    fprintf(stderr, "ptydrive: exit status %d, expected %d\n", d->status, want);
    exit(1);
  }
  d->checked = true;
}

static void run_step(struct drive *d, char *line) {
  char *arg = strchr(line, ' ');

  if (arg != NULL)
    *arg++ = '\0';
  else
    arg = line + strlen(line);
  if (strcmp(line, "send") == 0)
    step_send(d, arg);
  else if (strcmp(line, "wait") == 0)
    step_wait(d, arg);
  else if (strcmp(line, "resize") == 0)
    step_resize(d, arg);
  else if (strcmp(line, "sleep") == 0) {
    long long end = now_ms() + atoll(arg);
    while (now_ms() < end)
      pump(d, (int)(end - now_ms()));
  } else if (strcmp(line, "kill") == 0)
    kill(d->pid, atoi(arg));
  else if (strcmp(line, "exit") == 0)
    step_exit(d, arg);
  else if (line[0] != '\0' && line[0] != '#')
    die("unknown step `%s`", line);
}

static pid_t spawn(int master, char **argv) {
  const char *slave_name = ptsname(master);
  pid_t pid = fork();
  int slave;

  if (pid != 0)
    return pid;
  setsid();
  slave = open(slave_name, O_RDWR);
  if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
    _exit(126);
  dup2(slave, 0);
  dup2(slave, 1);
  dup2(slave, 2);
  if (slave > 2)
    close(slave);
  close(master);
  execvp(argv[0], argv);
  _exit(127);
}

int main(int argc, char **argv) {
  struct drive d = {.master = -1};
  struct winsize ws = {0};
  char line[65536];

  if (argc < 4) {
    fprintf(stderr, "usage: ptydrive ROWS COLS COMMAND [ARG...] < SCRIPT\n");
    return 2;
  }
  d.master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (d.master < 0 || grantpt(d.master) < 0 || unlockpt(d.master) < 0)
    die("openpt: %s", strerror(errno));
  ws.ws_row = (unsigned short)atoi(argv[1]);
  ws.ws_col = (unsigned short)atoi(argv[2]);
  ioctl(d.master, TIOCSWINSZ, &ws);
  append(&d, "", 0);
  d.pid = spawn(d.master, argv + 3);
  while (fgets(line, sizeof(line), stdin) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    run_step(&d, line);
  }
  if (!d.exited) {
    while (d.master >= 0)
      pump(&d, 100);
    reap(&d, true);
  }
  return d.checked ? 0 : d.status;
}
