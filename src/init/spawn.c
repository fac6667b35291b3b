/*
 * Starting a process for SPAWN. The parent prepares everything that can
 * fail without side effects (the pty, the report pipe), forks, and waits
 * on a CLOEXEC pipe: EOF means execve succeeded, a report means a named
 * step failed in the child. So the daemon learns "ENOENT at exec" or
 * "EACCES at chdir" in SPAWNED instead of a bare exit status 127.
 */
#include "init/initd.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "groups are passed as is");

/* What the child writes to the report pipe when a step fails. */
struct child_report {
  int32_t err;
  char stage[16];
};

/* The child's side of a SPAWN, prepared by the parent before fork. */
struct child_plan {
  const struct wr_init_spawn *req;
  int stdio[3];  /* the fds that become 0, 1 and 2 */
  bool tty;      /* stdio[] is a pty slave to make the controlling tty */
  int report_fd; /* write end of the report pipe */
};

static int set_failure(struct wr_init_spawned *reply, int err,
                       const char *stage) {
  reply->err = err;
  reply->pid = 0;
  wr_strlcpy(reply->stage, stage, sizeof(reply->stage));
  return -1;
}

/* ---- the child -------------------------------------------------------- */

static _Noreturn void child_fail(int report_fd, const char *stage) {
  struct child_report r = {.err = errno};
  ssize_t n;

  wr_strlcpy(r.stage, stage, sizeof(r.stage));
  n = write(report_fd, &r, sizeof(r));
  (void)n;
  _exit(127);
}

/* init blocks every signal; its children start with the defaults. */
static void reset_signals(void) {
  sigset_t none;

  for (int sig = 1; sig < NSIG; sig++)
    signal(sig, SIG_DFL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Put the planned fds on 0, 1 and 2. Sources below 3 are first moved out
 * of the way, so that installing one cannot clobber another. */
static int install_stdio(const struct child_plan *p, const char **stage) {
  int src[3];

  *stage = "pty";
  if (p->tty && ioctl(p->stdio[0], TIOCSCTTY, 0) < 0)
    return -1;
  *stage = "stdio";
  for (int i = 0; i < 3; i++) {
    src[i] =
        p->stdio[i] >= 3 ? p->stdio[i] : fcntl(p->stdio[i], F_DUPFD_CLOEXEC, 3);
    if (src[i] < 0)
      return -1;
  }
  for (int i = 0; i < 3; i++)
    if (dup2(src[i], i) < 0)
      return -1;
  return 0;
}

/*
 * Close every fd of init's but the report pipe, which moves to 3 and is
 * close-on-exec. Closed, not only marked close-on-exec: the cwd and the
 * program's path come from the client, and through /proc/self/fd/N they
 * could otherwise reach whatever init holds until execve.
 */
static int close_init_fds(int *report_fd) {
  if (*report_fd != 3) {
    if (dup3(*report_fd, 3, O_CLOEXEC) < 0)
      return -1;
    *report_fd = 3;
  }
  return close_range(4, ~0U, 0);
}

/* The steps between fork and exec, in the order that lets each one work:
 * the session before the controlling tty, groups and gid while still
 * root, uid last. The report pipe stays open until execve, and nothing
 * of init's reaches the program. */
static _Noreturn void run_child(const struct child_plan *p) {
  const struct wr_init_spawn *req = p->req;
  int report_fd = p->report_fd;
  const char *stage;

  reset_signals();
  if (setsid() < 0)
    child_fail(report_fd, "setsid");
  if (install_stdio(p, &stage) < 0)
    child_fail(report_fd, stage);
  if (close_init_fds(&report_fd) < 0)
    child_fail(report_fd, "fds");
  if (setgroups(req->ngroups, (const gid_t *)req->groups) < 0)
    child_fail(report_fd, "setgroups");
  if (setresgid(req->gid, req->gid, req->gid) < 0)
    child_fail(report_fd, "setgid");
  if (setresuid(req->uid, req->uid, req->uid) < 0)
    child_fail(report_fd, "setuid");
  if (chdir(req->cwd) < 0)
    child_fail(report_fd, "chdir");
  /* execvp searches the PATH of the environment it runs in. */
  environ = (char **)req->env;
  execvp(req->argv[0], (char *const *)req->argv);
  child_fail(report_fd, "exec");
}

/* ---- the parent ------------------------------------------------------- */

/*
 * A pty pair in the sandbox's devpts. The slave comes from TIOCGPTPEER on
 * the master, never from a name under /dev/pts, which a sandbox process
 * could have swapped for something else. Returns 0 or a negative errno.
 */
static int open_pty(uint16_t rows, uint16_t cols, int *master, int *slave) {
  _cleanup_close_ int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  struct winsize ws = {.ws_row = rows, .ws_col = cols};
  int unlock = 0;

  if (m < 0 || ioctl(m, TIOCSPTLCK, &unlock) < 0 ||
      ioctl(m, TIOCSWINSZ, &ws) < 0)
    return -errno;
  *slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (*slave < 0)
    return -errno;
  *master = steal_fd(&m);
  return 0;
}

/* Wait for the child to exec (EOF: 0) or to report a failure (-1). */
static int read_report(int fd, struct child_report *r) {
  ssize_t n;

  do
    n = read(fd, r, sizeof(*r));
  while (n < 0 && errno == EINTR);
  if (n == 0)
    return 0;
  if (n != (ssize_t)sizeof(*r)) {
    r->err = n < 0 ? errno : EIO;
    wr_strlcpy(r->stage, "exec", sizeof(r->stage));
  }
  r->stage[sizeof(r->stage) - 1] = '\0';
  return -1;
}

static void reap_failed(pid_t pid) {
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
}

int wr_init_spawn_start(const struct wr_init_spawn *req, const int *fds,
                        struct wr_init_spawned *reply, int *master) {
  _cleanup_close_ int pty = -1, slave = -1, report_rd = -1, report_wr = -1;
  struct child_plan plan = {.req = req, .tty = req->flags & WR_SPAWN_TTY};
  struct child_report report;
  int pipefd[2], r;
  pid_t pid;

  memset(reply, 0, sizeof(*reply));
  *master = -1;
  if (plan.tty && (r = open_pty(req->rows, req->cols, &pty, &slave)) < 0)
    return set_failure(reply, -r, "pty");
  for (int i = 0; i < 3; i++)
    plan.stdio[i] = plan.tty ? slave : fds[i];
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return set_failure(reply, errno, "pipe");
  report_rd = pipefd[0];
  plan.report_fd = report_wr = pipefd[1];
  pid = fork();
  if (pid < 0)
    return set_failure(reply, errno, "fork");
  if (pid == 0)
    run_child(&plan);
  close(steal_fd(&report_wr));
  if (read_report(report_rd, &report) < 0) {
    reap_failed(pid);
    return set_failure(reply, report.err, report.stage);
  }
  reply->pid = pid;
  *master = steal_fd(&pty);
  return 0;
}
