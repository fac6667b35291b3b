/*
 * The host's git, run with its memory and time bounded.
 *
 * git-remote-warren runs as whoever runs `git fetch`: root, or a member
 * of warrend's --socket-group who may make no cgroup. So the bounds come
 * in layers that each hold alone:
 *
 *   - GIT_ALLOC_LIMIT: git's own check of every allocation it makes,
 *     which fails cleanly ("attempting to allocate N over limit M");
 *   - RLIMIT_DATA: every private writable mapping (malloc's and the
 *     stacks), for what git allocates without its wrappers; read-only
 *     mappings of packs do not count, so large repositories still work;
 *   - a memory cgroup of its own, when we may make one (as root, or
 *     where our cgroup is delegated to us), which counts what it really
 *     touches, page cache included;
 *   - SIGKILL at the deadline, RLIMIT_CPU as a backstop, and
 *     PR_SET_PDEATHSIG so that it never outlives us.
 */
#include "gitremote/gitremote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define ERR_KEEP (64u << 10)
/* After the kill at the deadline, how long its pipes may stay open. */
#define DRAIN_NS (5ull * 1000000000)

/* ---- a memory cgroup ---------------------------------------------------- */

struct cgroup {
  char *dir; /* NULL: none */
  bool v2;
  int procs_fd; /* cgroup.procs, opened for the child to join */
};

/* Our own cgroup's directory in the memory hierarchy, v1 or v2. */
static char *own_cgroup(bool *v2) {
  _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
  _cleanup_free_ char *line = NULL, *unified = NULL;
  size_t cap = 0;

  while (f != NULL && getline(&line, &cap, f) > 0) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL || c2[1] != '/')
      continue;
    c2[strcspn(c2, "\n")] = '\0';
    *c2 = '\0';
    if (strcmp(c1 + 1, "memory") == 0 || wr_str_has_prefix(c1 + 1, "memory,") ||
        strstr(c1 + 1, ",memory")) {
      *v2 = false;
      return xasprintf("/sys/fs/cgroup/memory%s", c2 + 1);
    }
    if (c1[1] == '\0' && access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
      unified = xasprintf("/sys/fs/cgroup%s", c2 + 1);
  }
  *v2 = true;
  return steal_ptr(&unified);
}

static int write_text(const char *dir, const char *file, const char *text) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);

  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
    return -1;
  return 0;
}

/* Ours below parent, with the limit set and cgroup.procs open; false
 * when we may not make it there, or it has no memory controller. */
static bool cgroup_make_in(struct cgroup *cg, const char *parent,
                           uint64_t limit) {
  _cleanup_free_ char *name = wr_random_id("", 8);
  _cleanup_free_ char *procs = NULL;
  char text[32];
  int r;

  cg->dir =
      xasprintf("%s/git-remote-warren.%d.%s", parent, (int)getpid(), name);
  if (mkdir(cg->dir, 0755) < 0) {
    free(steal_ptr(&cg->dir));
    return false;
  }
  snprintf(text, sizeof(text), "%llu", (unsigned long long)limit);
  r = write_text(cg->dir, cg->v2 ? "memory.max" : "memory.limit_in_bytes",
                 text);
  /* No swapping instead of stopping (where swap is accounted). */
  if (cg->v2)
    write_text(cg->dir, "memory.swap.max", "0");
  else
    write_text(cg->dir, "memory.memsw.limit_in_bytes", text);
  procs = xasprintf("%s/cgroup.procs", cg->dir);
  if (r == 0 && (cg->procs_fd = open(procs, O_WRONLY | O_CLOEXEC)) >= 0)
    return true;
  rmdir(cg->dir);
  free(steal_ptr(&cg->dir));
  return false;
}

/* A child of our own cgroup (v1 has no rule against one beside our own
 * process); on v2, whose controllers reach only cgroups without
 * processes, else a child of the root, which only root may make. */
static bool cgroup_make(struct cgroup *cg, uint64_t limit) {
  _cleanup_free_ char *own = own_cgroup(&cg->v2);

  cg->procs_fd = -1;
  if (own == NULL)
    return false;
  if (cgroup_make_in(cg, own, limit))
    return true;
  return cg->v2 && strcmp(own, "/sys/fs/cgroup/") != 0 &&
         cgroup_make_in(cg, "/sys/fs/cgroup", limit);
}

/* Whether the kernel's OOM killer acted in it. */
static bool cgroup_oom_killed(const struct cgroup *cg) {
  _cleanup_free_ char *path = xasprintf(
      "%s/%s", cg->dir, cg->v2 ? "memory.events" : "memory.oom_control");
  _cleanup_free_ char *text = NULL;
  const char *p;
  size_t len;

  if (wr_read_file(path, 1u << 16, &text, &len, NULL) < 0)
    return false;
  p = strstr(text, "oom_kill ");
  return p != NULL && strtoull(p + strlen("oom_kill "), NULL, 10) > 0;
}

static void cgroup_remove(struct cgroup *cg) {
  if (cg->procs_fd >= 0)
    close(cg->procs_fd);
  if (cg->dir != NULL)
    rmdir(cg->dir);
  free(cg->dir);
}

/* ---- the child ------------------------------------------------------------
 */

/* Between fork and exec: async-signal-safe calls only. */
static void child(const struct wr_bounded_cmd *cmd, const struct cgroup *cg,
                  pid_t parent, const struct rlimit *cpu, int out_fd,
                  int err_fd) {
  struct rlimit data = {cmd->max_memory, cmd->max_memory};
  struct rlimit core = {0, 0};
  int in = cmd->stdin_fd;

  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
    _exit(127);
  if (cg->procs_fd >= 0 && write(cg->procs_fd, "0", 1) != 1)
    _exit(127);
  if (setrlimit(RLIMIT_DATA, &data) < 0 || setrlimit(RLIMIT_CORE, &core) < 0 ||
      setrlimit(RLIMIT_CPU, cpu) < 0)
    _exit(127);
  if (in < 0)
    in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || dup2(in, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
    _exit(127);
  execvpe(cmd->argv[0], cmd->argv, cmd->env);
  _exit(127);
}

/* ---- the parent ------------------------------------------------------------
 */

struct pipes {
  int fd[2]; /* stdout, stderr; -1 once at their end */
  bool overflow;
  bool refused;      /* on_out refused stdout: the child is killed */
  wr_error_t reason; /* why */
};

static void take(const struct wr_bounded_cmd *cmd, pid_t pid, struct pipes *p,
                 int i) {
  char buf[65536];
  ssize_t n = read(p->fd[i], buf, sizeof(buf));

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0) {
    close(p->fd[i]);
    p->fd[i] = -1;
    return;
  }
  if (i == 0 && cmd->on_out != NULL) {
    if (!p->refused &&
        cmd->on_out(cmd->on_out_ctx, buf, (size_t)n, &p->reason) < 0) {
      p->refused = true;
      kill(pid, SIGKILL);
    }
  } else if (i == 0 && cmd->out != NULL) {
    if (cmd->out->len + (size_t)n > cmd->max_out)
      p->overflow = true;
    else
      wr_buf_append(cmd->out, buf, (size_t)n);
  } else if (i == 1 && cmd->errout != NULL) {
    wr_buf_append(cmd->errout, buf, (size_t)n);
    if (cmd->errout->len > ERR_KEEP)
      wr_buf_consume(cmd->errout, cmd->errout->len - ERR_KEEP);
  }
}

/* Read both pipes to their end; SIGKILL the child at the deadline. */
static void watch(const struct wr_bounded_cmd *cmd, pid_t pid, struct pipes *p,
                  struct wr_bounded_exit *ex) {
  uint64_t until = cmd->deadline_ns;

  while (p->fd[0] >= 0 || p->fd[1] >= 0) {
    struct pollfd pfd[2] = {{p->fd[0], POLLIN, 0}, {p->fd[1], POLLIN, 0}};
    uint64_t now = wr_mono_ns();
    int ms = -1;

    if (until != 0 && now >= until) {
      if (ex->timed_out)
        return; /* something else holds the pipes open */
      kill(pid, SIGKILL);
      ex->timed_out = true;
      until = now + DRAIN_NS;
      continue;
    }
    if (until != 0)
      ms = (int)WR_MIN((until - now) / 1000000 + 1, 60000);
    if (poll(pfd, 2, ms) < 0 && errno != EINTR)
      return;
    for (int i = 0; i < 2; i++)
      if (pfd[i].revents != 0)
        take(cmd, pid, p, i);
  }
}

/* What git says when an allocation fails (wrapper.c, and xmmap). */
static bool said_out_of_memory(const wr_buf_t *errout) {
  static const char *const said[] = {"Out of memory", "over limit",
                                     "mmap failed", "Cannot allocate memory"};

  for (size_t i = 0; errout != NULL && errout->data && i < WR_ARRAY_SIZE(said);
       i++)
    if (strstr(errout->data, said[i]) != NULL)
      return true;
  return false;
}

static int reap(pid_t pid, struct wr_bounded_exit *ex, wr_error_t *err) {
  int ws;

  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR)
      return wr_error_set(err, errno, "wait for git");
  ex->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  return 0;
}

/* CPU seconds as a backstop for the deadline, should we die before it:
 * threads add up (index-pack runs three), and a margin. */
static void cpu_limit(const struct wr_bounded_cmd *cmd, struct rlimit *cpu) {
  uint64_t now = wr_mono_ns(), secs;

  cpu->rlim_cur = cpu->rlim_max = RLIM_INFINITY;
  if (cmd->deadline_ns == 0)
    return;
  secs = cmd->deadline_ns > now ? (cmd->deadline_ns - now) / 1000000000 : 0;
  cpu->rlim_cur = cpu->rlim_max = 3 * secs + 10;
}

/* The environment with GIT_ALLOC_LIMIT set (caller frees). */
static char **bounded_env(const struct wr_bounded_cmd *cmd) {
  _cleanup_free_ char *kv =
      xasprintf("GIT_ALLOC_LIMIT=%llu", (unsigned long long)cmd->max_memory);

  return wr_strv_setenv(wr_strv_dup(cmd->env), kv);
}

int wr_bounded_run(const struct wr_bounded_cmd *cmd, struct wr_bounded_exit *ex,
                   wr_error_t *err) {
  struct wr_bounded_cmd c = *cmd;
  _cleanup_strv_ char **env = bounded_env(cmd);
  struct cgroup cg = {0};
  struct pipes p = {.fd = {-1, -1}};
  struct rlimit cpu;
  int out[2], errp[2], r;
  pid_t pid, self = getpid();

  memset(ex, 0, sizeof(*ex));
  c.env = env;
  if (pipe2(out, O_CLOEXEC) < 0)
    return wr_error_set(err, errno, "pipe");
  if (pipe2(errp, O_CLOEXEC) < 0) {
    close(out[0]);
    close(out[1]);
    return wr_error_set(err, errno, "pipe");
  }
  ex->cgroup = cgroup_make(&cg, cmd->max_memory);
  cpu_limit(cmd, &cpu);
  fflush(NULL);
  pid = fork();
  if (pid == 0)
    child(&c, &cg, self, &cpu, out[1], errp[1]);
  close(out[1]);
  close(errp[1]);
  p.fd[0] = out[0];
  p.fd[1] = errp[0];
  if (pid < 0) {
    close(out[0]);
    close(errp[0]);
    cgroup_remove(&cg);
    return wr_error_set(err, errno, "fork");
  }
  watch(cmd, pid, &p, ex);
  for (int i = 0; i < 2; i++)
    if (p.fd[i] >= 0)
      close(p.fd[i]);
  r = reap(pid, ex, err);
  ex->out_of_memory =
      !ex->timed_out && ((ex->cgroup && cgroup_oom_killed(&cg)) ||
                         (ex->status != 0 && said_out_of_memory(cmd->errout)));
  cgroup_remove(&cg);
  if (r == 0 && p.refused)
    return wr_error_setx(err, p.reason.code, "%s", p.reason.msg);
  if (r == 0 && p.overflow)
    return wr_error_set(err, 0, "`%s` printed more than %zu bytes",
                        cmd->argv[0], cmd->max_out);
  return r;
}
