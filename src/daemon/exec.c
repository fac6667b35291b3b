/*
 * POST /v1/sandboxes/{id}/exec and the background process routes.
 *
 * The daemon makes the pipes, resolves the user inside the sandbox, and
 * asks warren-init to spawn the process with the pipes' child ends (or a
 * pty that init allocates inside the sandbox). Only when init has answered
 * does the HTTP reply start, so a command that cannot start is a plain 4xx
 * error rather than a stream that ends badly.
 */
#include "daemon/files.h"
#include "daemon/initconn.h"
#include "daemon/jobs.h"
#include "daemon/network.h"
#include "daemon/procs.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"

#include <fcntl.h>
#include <signal.h>

#define MAX_ARGS 4096
#define MAX_PROCS_PER_SANDBOX 256

static const char default_path[] =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct exec_req {
  json_t *cmd, *env;
  const char *cwd, *user, *stdin_text, *tag;
  double timeout;
  bool tty, background;
  int64_t rows, cols;
  bool upgrade;
};

/* What a spawn needs until init replies. From the request until the
 * user is resolved, x borrows its strings from body. */
struct spawn_ctx {
  struct wr_job job; /* the user lookup */
  struct wr_sandbox *sb;
  wr_http_req_t *req;
  struct wr_proc *p;
  json_t *body;
  struct exec_req x;
  char **argv, **extra;
  int rootfd; /* borrowed from sb, for the user lookup */
  struct wr_user u;
  char *stdin_text;
  int stdin_w;  /* our end of stdin (pipe), or -1 */
  int out_r[2]; /* our ends of stdout, stderr */
  bool aborted;
};

/* Unless set, PATH, HOME, USER, HOSTNAME and (with a tty) TERM get values a
 * login would give; then come the network's variables (proxy, CA bundle,
 * secret placeholders); the sandbox's env then the exec's env override
 * them. */
static char **build_env(struct wr_sandbox *sb, const struct wr_user *u,
                        char **extra, bool tty) {
  char **env = wr_strv_push(NULL, default_path);
  _cleanup_free_ char *home = xasprintf("HOME=%s", u->home);
  _cleanup_free_ char *user = xasprintf("USER=%s", u->name);
  _cleanup_free_ char *host = xasprintf("HOSTNAME=%s", sb->name);
  _cleanup_strv_ char **net = wr_network_env(sb);
  char **layers[] = {net, sb->spec.env, extra};

  env = wr_strv_push(env, home);
  env = wr_strv_push(env, user);
  env = wr_strv_push(env, host);
  if (tty)
    env = wr_strv_push(env, "TERM=xterm-256color");
  for (size_t l = 0; l < WR_ARRAY_SIZE(layers); l++) {
    for (size_t i = 0; layers[l] != NULL && layers[l][i] != NULL; i++)
      env = wr_strv_setenv(env, layers[l][i]);
  }
  return env;
}

static void spawn_ctx_free(struct spawn_ctx *c) {
  if (c->stdin_w >= 0)
    close(c->stdin_w);
  for (int i = 0; i < 2; i++)
    if (c->out_r[i] >= 0)
      close(c->out_r[i]);
  free(c->stdin_text);
  wr_strv_free(c->argv);
  wr_strv_free(c->extra);
  json_decref(c->body);
  wr_sandbox_unref(c->sb);
  free(c);
}

static int reply_spawn_error(wr_http_req_t *req,
                             const struct wr_init_spawned *s, const char *cmd) {
  const char *stage = s->stage;

  if (strcmp(stage, "exec") == 0 && s->err == ENOENT)
    wr_http_reply_error(req, 400, "command_not_found",
                        "`%s`: command not found", cmd);
  else if (strcmp(stage, "exec") == 0 && (s->err == EACCES || s->err == EPERM))
    wr_http_reply_error(req, 400, "permission_denied",
                        "`%s`: permission denied", cmd);
  else if (strcmp(stage, "chdir") == 0)
    wr_http_reply_error(req, 400, "exec_failed",
                        "cannot enter the working directory: %s",
                        strerror(s->err));
  else if (strcmp(stage, "limit") == 0)
    wr_http_reply_error(req, 409, "busy", "too many processes in flight");
  else
    wr_http_reply_error(req, 400, "exec_failed", "`%s`: %s failed: %s", cmd,
                        stage, strerror(s->err));
  return -1;
}

static void on_timeout(uv_timer_t *t) {
  struct wr_proc *p = t->data;

  p->timed_out = true;
  wr_proc_signal(p, SIGKILL);
}

static void start_timer(struct wr_proc *p, double seconds) {
  if (seconds <= 0)
    return;
  uv_timer_init(p->sb->d->loop, &p->timer);
  p->timer.data = p;
  p->timer_init = true;
  p->refs++;
  uv_timer_start(&p->timer, on_timeout, (uint64_t)(seconds * 1000), 0);
}

/* init has started the process: wire its fds and answer the client. */
static void spawned(struct spawn_ctx *c, const struct wr_init_spawned *s,
                    int master) {
  struct wr_proc *p = c->p;
  bool frames = c->x.upgrade;

  p->proc_id = s->proc_id;
  p->pid = s->pid;
  if (p->tty) {
    wr_proc_set_input(p, fcntl(master, F_DUPFD_CLOEXEC, 3));
    wr_proc_set_outputs(p, master, -1);
  } else {
    wr_proc_set_input(p, steal_fd(&c->stdin_w));
    wr_proc_set_outputs(p, steal_fd(&c->out_r[0]), steal_fd(&c->out_r[1]));
  }
  if (c->stdin_text != NULL) {
    wr_proc_write_input(p, c->stdin_text, strlen(c->stdin_text));
    wr_proc_close_input(p);
  } else if (!frames && !p->tty) {
    wr_proc_close_input(p);
  }
  start_timer(p, c->x.timeout);
  if (c->x.background) {
    wr_http_reply_json(c->req, 201, wr_proc_json(p));
    return;
  }
  if (wr_watch(p, c->req, frames, frames, true, 0) == NULL)
    return;
  {
    _cleanup_free_ char *started = xasprintf("{\"pid\":%d}", p->pid);
    if (frames)
      wr_frame_send(c->req, WR_FRAME_STARTED, started, strlen(started));
    else {
      _cleanup_free_ char *line =
          xasprintf("{\"type\":\"started\",\"pid\":%d}\n", p->pid);
      wr_http_stream_write(c->req, line, strlen(line));
    }
  }
}

static void on_spawned(void *arg, const struct wr_init_hdr *hdr,
                       const void *payload, int *fds, size_t nfds,
                       const wr_error_t *err) {
  struct spawn_ctx *c = arg;
  struct wr_init_spawned s;
  wr_error_t derr;
  int master = nfds > 0 ? fds[0] : -1;

  for (size_t i = 1; i < nfds; i++)
    close(fds[i]);
  /* From here the request is answered or watched; c goes away. */
  wr_http_on_abort(c->req, NULL, NULL);
  if (hdr == NULL) {
    wr_http_reply_error(c->req, 409, "not_running", "%s", err->msg);
  } else if (hdr->type != WR_INIT_SPAWNED ||
             wr_init_decode_spawned(payload, hdr->len, &s, &derr) < 0) {
    wr_http_reply_error(c->req, 500, "internal", "bad reply from init");
  } else if (s.err != 0) {
    reply_spawn_error(c->req, &s, c->p->argv[0]);
  } else if (c->p->tty && master < 0) {
    wr_http_reply_error(c->req, 500, "internal", "init sent no pty");
  } else {
    spawned(c, &s, steal_fd(&master));
    if (c->aborted && !c->x.background)
      wr_proc_signal(c->p, SIGKILL);
    spawn_ctx_free(c);
    return;
  }
  if (master >= 0)
    close(master);
  wr_proc_remove(c->p);
  spawn_ctx_free(c);
}

/* Pipes for a non-tty process: the child's ends go to init and are closed
 * here once sent. */
static int make_pipes(struct spawn_ctx *c, int child[3], wr_error_t *err) {
  int p[3][2];

  for (int i = 0; i < 3; i++) {
    if (pipe2(p[i], O_CLOEXEC) < 0) {
      for (int k = 0; k < i; k++) {
        close(p[k][0]);
        close(p[k][1]);
      }
      return wr_error_set(err, errno, "pipe");
    }
  }
  child[0] = p[0][0];
  c->stdin_w = p[0][1];
  child[1] = p[1][1];
  c->out_r[0] = p[1][0];
  child[2] = p[2][1];
  c->out_r[1] = p[2][0];
  return 0;
}

static int send_spawn(struct spawn_ctx *c, const struct wr_user *u, char **argv,
                      char **env, wr_error_t *err) {
  struct wr_init_spawn s = {
      .flags = (c->x.tty ? WR_SPAWN_TTY : 0) |
               (c->x.background ? WR_SPAWN_BACKGROUND : 0),
      .uid = u->uid,
      .gid = u->gid,
      .ngroups = u->ngroups,
      .rows = (uint16_t)c->x.rows,
      .cols = (uint16_t)c->x.cols,
      .tag = c->p->tag ? c->p->tag : "",
      .cwd = c->x.cwd,
      .argc = (uint32_t)wr_strv_len(argv),
      .envc = (uint32_t)wr_strv_len(env),
      .argv = (const char **)argv,
      .env = (const char **)env,
  };
  int fds[5], child[3] = {-1, -1, -1};
  size_t nfds = 0;
  wr_buf_t msg;
  int r;

  memcpy(s.groups, u->groups, sizeof(u->groups));
  if (!c->x.tty) {
    if (make_pipes(c, child, err) < 0)
      return -1;
    memcpy(fds, child, sizeof(child));
    nfds = 3;
    if (c->x.background) {
      fds[nfds++] = c->out_r[0];
      fds[nfds++] = c->out_r[1];
    }
  }
  wr_buf_init(&msg);
  r = wr_init_encode_spawn(&msg, 0, &s, (uint16_t)nfds, err);
  if (r == 0)
    r = wr_initconn_request(c->sb->conn, &msg, fds, nfds, on_spawned, c, err);
  wr_buf_free(&msg);
  for (int i = 0; i < 3; i++)
    if (child[i] >= 0)
      close(child[i]);
  return r;
}

static void on_early_abort(wr_http_req_t *req, void *arg) {
  struct spawn_ctx *c = arg;

  (void)req;
  c->aborted = true;
}

static int parse_exec(wr_http_req_t *req, struct exec_req *x, json_t **body) {
  struct wr_json_field f[] = {
      {"cmd", WR_JSON_ARRAY, &x->cmd, true, NULL},
      {"env", WR_JSON_OBJECT, &x->env, false, NULL},
      {"cwd", WR_JSON_STRING, &x->cwd, false, NULL},
      {"user", WR_JSON_STRING, &x->user, false, NULL},
      {"timeout", WR_JSON_NUMBER, &x->timeout, false, NULL},
      {"stdin", WR_JSON_STRING, &x->stdin_text, false, NULL},
      {"tty", WR_JSON_BOOL, &x->tty, false, NULL},
      {"rows", WR_JSON_INT, &x->rows, false, NULL},
      {"cols", WR_JSON_INT, &x->cols, false, NULL},
      {"background", WR_JSON_BOOL, &x->background, false, NULL},
      {"tag", WR_JSON_STRING, &x->tag, false, NULL},
  };

  x->user = "root";
  x->rows = 24;
  x->cols = 80;
  *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  if (*body == NULL)
    return -1;
  x->upgrade = wr_http_wants_upgrade(req, "warren-exec");
  return 0;
}

/* The most bytes of the variables build_env sets before the network's and
 * the sandbox's: HOME and USER come from the sandbox's /etc/passwd, bounded
 * by struct wr_user. */
static size_t login_env_max(const struct wr_sandbox *sb) {
  const struct wr_user *u = NULL;

  return sizeof(default_path) + sizeof("HOME=") + sizeof(u->home) +
         sizeof("USER=") + sizeof(u->name) + sizeof("HOSTNAME=") +
         strlen(sb->name) + sizeof("TERM=xterm-256color");
}

/* Whether the command and everything that goes with it fit in one SPAWN
 * (see WR_INIT_SPAWN_STR_MAX), counted before the user is looked up, so
 * that a request too large for init gets a 400 that says so. */
static int check_spawn_size(struct wr_sandbox *sb, const struct exec_req *x,
                            char *const *argv, char *const *extra,
                            wr_error_t *err) {
  _cleanup_strv_ char **net = wr_network_env(sb);
  const char *cwd = x->cwd ? x->cwd : sb->spec.workdir;
  size_t cmd = wr_strv_bytes(argv), own = wr_strv_bytes(extra);
  size_t theirs =
      login_env_max(sb) + wr_strv_bytes(net) + wr_strv_bytes(sb->spec.env);
  size_t rest = strlen(cwd) + 1 + WR_INIT_TAG_MAX + 1;
  size_t vars =
      5 + wr_strv_len(net) + wr_strv_len(sb->spec.env) + wr_strv_len(extra);

  if (vars > WR_INIT_MAX_ARGS)
    return wr_error_setx(err, E2BIG,
                         "the exec's environment would have %zu variables "
                         "(%zu of its own); an exec carries at most %d",
                         vars, wr_strv_len(extra), WR_INIT_MAX_ARGS);
  if (cmd + own + theirs + rest > WR_INIT_SPAWN_STR_MAX)
    return wr_error_setx(err, E2BIG,
                         "the exec takes %zu bytes (cmd %zu, env %zu, the "
                         "sandbox's and warren's variables up to %zu, cwd and "
                         "tag up to %zu); an exec carries at most %d bytes",
                         cmd + own + theirs + rest, cmd, own, theirs, rest,
                         WR_INIT_SPAWN_STR_MAX);
  return 0;
}

/* What is checked once the command and env are decoded. */
static int check_exec_strings(struct wr_sandbox *sb, const struct exec_req *x,
                              char *const *argv, char *const *extra,
                              wr_error_t *err) {
  if (argv[0][0] == '\0')
    return wr_error_setx(err, EINVAL, "cmd[0] must name a program, not \"\"");
  if (x->cwd != NULL && wr_path_check(x->cwd, err) < 0)
    return wr_error_wrap(err, "cwd");
  return check_spawn_size(sb, x, argv, extra, err);
}

static int check_exec(struct wr_sandbox *sb, struct exec_req *x,
                      wr_error_t *err) {
  size_t nprocs = 0;

  if (json_array_size(x->cmd) == 0)
    return wr_error_setx(err, EINVAL, "cmd must name a program");
  if (x->cwd != NULL && x->cwd[0] != '/')
    return wr_error_setx(err, EINVAL, "cwd must be an absolute path");
  if (x->timeout < 0 || x->timeout > 31 * 86400)
    return wr_error_setx(err, EINVAL, "timeout must be 0 to 2678400 seconds");
  if (x->rows < 1 || x->rows > 10000 || x->cols < 1 || x->cols > 10000)
    return wr_error_setx(err, EINVAL, "rows and cols must be 1 to 10000");
  if (x->tty && !x->upgrade && !x->background)
    return wr_error_setx(err, EINVAL,
                         "a tty needs an interactive connection "
                         "(Upgrade: warren-exec) or background");
  if (x->tag != NULL && !x->background)
    return wr_error_setx(err, EINVAL, "tag is only for background processes");
  if (x->tag != NULL && !wr_name_valid(x->tag))
    return wr_error_setx(err, EINVAL, "invalid tag `%s`", x->tag);
  if (x->tag != NULL && wr_proc_find_tag(sb, x->tag) != NULL)
    return wr_error_setx(err, EEXIST, "a process tagged `%s` exists", x->tag);
  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    nprocs++;
  /* The way out depends on what fills the table: running processes must be
   * signalled, finished ones forgotten. */
  if (nprocs >= MAX_PROCS_PER_SANDBOX)
    return wr_error_setx(err, EBUSY,
                         "sandbox `%s` has %d processes, the most it may "
                         "have; kill background processes that run "
                         "(warren kill) or forget finished ones "
                         "(DELETE .../processes/TAG)",
                         sb->name, MAX_PROCS_PER_SANDBOX);
  return 0;
}

static bool check_running(struct wr_sandbox *sb, wr_http_req_t *req) {
  if (sb->state == WR_SB_RUNNING && sb->op == WR_OP_NONE && sb->conn != NULL)
    return true;
  if (sb->state == WR_SB_PAUSED)
    wr_http_reply_error(req, 409, "paused",
                        "sandbox `%s` is paused (resume it first)", sb->name);
  else
    wr_http_reply_error(req, 409, "not_running",
                        "sandbox `%s` is not running%s", sb->name,
                        sb->op != WR_OP_NONE ? " (busy)" : "");
  return false;
}

static char *next_tag(struct wr_sandbox *sb) {
  for (;;) {
    char *tag = xasprintf("p-%u", ++sb->next_tag);
    if (wr_proc_find_tag(sb, tag) == NULL)
      return tag;
    free(tag);
  }
}

/* Ask init to spawn the process, the user being known. */
static void spawn(struct spawn_ctx *c) {
  _cleanup_strv_ char **env = NULL;
  struct wr_sandbox *sb = c->sb;
  wr_error_t err;

  if (c->x.cwd == NULL)
    c->x.cwd = sb->spec.workdir;
  env = build_env(sb, &c->u, c->extra, c->x.tty);
  c->p = wr_proc_new(sb);
  c->p->argv = wr_strv_dup(c->argv);
  c->p->tty = c->x.tty;
  c->p->background = c->x.background;
  if (c->x.background)
    c->p->tag = c->x.tag ? xstrdup(c->x.tag) : next_tag(sb);
  if (c->x.stdin_text != NULL)
    c->stdin_text = xstrdup(c->x.stdin_text);
  if (send_spawn(c, &c->u, c->argv, env, &err) < 0) {
    wr_http_on_abort(c->req, NULL, NULL);
    wr_proc_remove(c->p);
    wr_reply_err(c->req, &err);
    spawn_ctx_free(c);
  }
  /* Otherwise on_spawned has c now. */
}

/* The user is looked up in the sandbox's own files, which may be hostile
 * (a FIFO, a terabyte): on the threadpool, bounded (users.c). */
static void user_work(struct wr_job *job) {
  struct spawn_ctx *c = job->arg;

  job->result = wr_user_resolve(c->rootfd, c->x.user, &c->u, &job->err);
}

/* Back on the loop: the lookup may have failed, and meanwhile the client
 * may have gone, the sandbox stopped, or another exec taken the tag or
 * the last process slot. False when that answered the request. */
static bool still_wanted(struct spawn_ctx *c, const struct wr_job *job) {
  wr_error_t err;

  /* An answer below ends the request: nothing may call back into it. */
  wr_http_on_abort(c->req, NULL, NULL);
  if (job->result < 0) {
    wr_reply_err(c->req, &job->err);
    return false;
  }
  if (c->aborted || wr_http_aborted(c->req)) {
    wr_http_reply_error(c->req, 499, "aborted", "the client went away");
    return false;
  }
  if (!check_running(c->sb, c->req))
    return false;
  if (check_exec(c->sb, &c->x, &err) < 0) {
    wr_reply_err(c->req, &err);
    return false;
  }
  wr_http_on_abort(c->req, on_early_abort, c);
  return true;
}

static void user_done(struct wr_job *job);

/* Paused again while the user was looked up: woken again, go on. */
static void woken_again(struct wr_sandbox *sb, void *arg,
                        const wr_error_t *err) {
  struct spawn_ctx *c = arg;

  if (err == NULL) {
    user_done(&c->job);
    return;
  }
  wr_http_on_abort(c->req, NULL, NULL);
  wr_http_reply_error(c->req, 500, "wake_failed", "wake sandbox `%s`: %s",
                      sb->name, err->msg);
  spawn_ctx_free(c);
}

static void user_done(struct wr_job *job) {
  struct spawn_ctx *c = job->arg;

  if (job->result == 0 &&
      wr_sandbox_wake(c->sb, WR_WAKE_EXEC, woken_again, c) == 0)
    return;
  if (!still_wanted(c, job)) {
    spawn_ctx_free(c);
    return;
  }
  spawn(c);
}

void wr_api_exec(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct spawn_ctx *c;
  wr_error_t err;
  int rootfd;

  if (sb == NULL || !wr_sandbox_awake(sb, req, WR_WAKE_EXEC, wr_api_exec) ||
      !check_running(sb, req) ||
      !wr_sandbox_root_ready(sb, req, wr_api_exec, &rootfd))
    return;
  c = xcalloc(1, sizeof(*c));
  c->stdin_w = c->out_r[0] = c->out_r[1] = -1;
  c->sb = sb;
  c->req = req;
  c->rootfd = rootfd;
  wr_sandbox_ref(sb);
  if (parse_exec(req, &c->x, &c->body) < 0) {
    spawn_ctx_free(c);
    return;
  }
  if (check_exec(sb, &c->x, &err) < 0 ||
      wr_json_strv(c->x.cmd, "cmd", MAX_ARGS, &c->argv, &err) < 0 ||
      (c->x.env && wr_json_env(c->x.env, "env", &c->extra, &err) < 0) ||
      check_exec_strings(sb, &c->x, c->argv, c->extra, &err) < 0) {
    wr_reply_err(req, &err);
    spawn_ctx_free(c);
    return;
  }
  wr_http_on_abort(req, on_early_abort, c);
  c->job.fn = user_work;
  c->job.done = user_done;
  c->job.arg = c;
  wr_job_queue(sb->d, &c->job);
}

/* ---- background processes ------------------------------------------------ */

static struct wr_proc *proc_from_req(struct wr_sandbox *sb,
                                     wr_http_req_t *req) {
  const char *tag = wr_http_param(req, "tag");
  struct wr_proc *p = tag ? wr_proc_find_tag(sb, tag) : NULL;

  if (p == NULL)
    wr_http_reply_error(req, 404, "not_found",
                        "no process tagged `%s` in sandbox `%s`",
                        tag ? tag : "", sb->name);
  return p;
}

void wr_api_proc_list(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  json_t *arr;

  if (sb == NULL)
    return;
  arr = json_array();
  for (struct wr_proc *p = sb->procs; p != NULL; p = p->next)
    if (p->background && p->proc_id != 0)
      json_array_insert_new(arr, 0, wr_proc_json(p));
  wr_http_reply_json(req, 200, json_pack("{s:o}", "processes", arr));
}

void wr_api_proc_get(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct wr_proc *p = sb ? proc_from_req(sb, req) : NULL;

  if (p != NULL)
    wr_http_reply_json(req, 200, wr_proc_json(p));
}

void wr_api_proc_output(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct wr_proc *p = sb ? proc_from_req(sb, req) : NULL;
  uint64_t offset;
  bool follow, frames;

  if (p == NULL || wr_req_bool(req, "follow", false, &follow) < 0 ||
      wr_req_u64(req, "offset", 0, 0, UINT64_MAX, &offset) < 0 ||
      !wr_sandbox_awake(sb, req, WR_WAKE_ATTACH, wr_api_proc_output))
    return;
  frames = wr_http_wants_upgrade(req, "warren-exec");
  wr_watch(p, req, frames, frames, frames || follow, offset);
}

void wr_api_proc_signal(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct wr_proc *p = sb ? proc_from_req(sb, req) : NULL;
  const char *name = "TERM";
  struct wr_json_field f[] = {
      {"signal", WR_JSON_STRING, &name, false, NULL},
  };
  _cleanup_json_ json_t *body = NULL;
  int sig;

  if (p == NULL || (body = wr_req_json(req, f, WR_ARRAY_SIZE(f))) == NULL)
    return;
  sig = wr_signal_from_name(name);
  if (sig <= 0) {
    wr_http_reply_error(req, 400, "bad_request", "unknown signal `%s`", name);
    return;
  }
  if (!p->running) {
    wr_http_reply_error(req, 409, "not_running", "process `%s` has exited",
                        p->tag);
    return;
  }
  wr_proc_signal(p, sig);
  wr_http_reply_empty(req, 204);
}

static void forget_reply(void *arg, const struct wr_init_hdr *hdr,
                         const void *payload, int *fds, size_t nfds,
                         const wr_error_t *err) {
  (void)arg;
  (void)hdr;
  (void)payload;
  (void)err;
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
}

void wr_api_proc_delete(wr_http_req_t *req, void *ctx) {
  struct wr_sandbox *sb = wr_sandbox_from_req(ctx, req);
  struct wr_proc *p = sb ? proc_from_req(sb, req) : NULL;
  struct wr_init_forget f;
  wr_buf_t msg;

  if (p == NULL)
    return;
  if (p->running) {
    wr_http_reply_error(req, 409, "running",
                        "process `%s` is still running (signal it first)",
                        p->tag);
    return;
  }
  f.proc_id = p->proc_id;
  wr_buf_init(&msg);
  wr_init_encode_simple(&msg, WR_INIT_FORGET, 0, &f, sizeof(f), 0);
  wr_initconn_request(sb->conn, &msg, NULL, 0, forget_reply, NULL, NULL);
  wr_buf_free(&msg);
  wr_proc_remove(p);
  wr_http_reply_empty(req, 204);
}

/* ---- processes the daemon starts itself ----------------------------------
 *
 * The same steps as an exec (the user looked up on the threadpool, the
 * pipes made here, init asked to spawn) with no request behind them.
 */

struct own_spawn {
  struct wr_job job;
  struct wr_sandbox *sb;
  char **argv, **env;
  char *cwd, *user, *tag;
  int rootfd; /* borrowed from sb */
  struct wr_user u;
  struct wr_proc *p;
  int child[3];
  int out_r[2];
  wr_exec_started_fn started;
  void *arg;
};

static void own_spawn_free(struct own_spawn *o) {
  for (int i = 0; i < 3; i++)
    if (o->child[i] >= 0)
      close(o->child[i]);
  for (int i = 0; i < 2; i++)
    if (o->out_r[i] >= 0)
      close(o->out_r[i]);
  wr_strv_free(o->argv);
  wr_strv_free(o->env);
  free(o->cwd);
  free(o->user);
  free(o->tag);
  wr_sandbox_unref(o->sb);
  free(o);
}

static void own_fail(struct own_spawn *o, const wr_error_t *err) {
  if (o->p != NULL)
    wr_proc_remove(o->p);
  o->started(NULL, o->arg, err);
  own_spawn_free(o);
}

static void own_spawned(void *arg, const struct wr_init_hdr *hdr,
                        const void *payload, int *fds, size_t nfds,
                        const wr_error_t *err) {
  struct own_spawn *o = arg;
  struct wr_init_spawned s;
  wr_error_t e;

  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
  if (hdr == NULL) {
    own_fail(o, err);
    return;
  }
  if (hdr->type != WR_INIT_SPAWNED ||
      wr_init_decode_spawned(payload, hdr->len, &s, &e) < 0) {
    wr_error_setx(&e, EPROTO, "bad reply from init");
    own_fail(o, &e);
    return;
  }
  if (s.err != 0) {
    wr_error_set(&e, s.err, "`%s`: %s failed", o->argv[0], s.stage);
    own_fail(o, &e);
    return;
  }
  o->p->proc_id = s.proc_id;
  o->p->pid = s.pid;
  wr_proc_set_outputs(o->p, steal_fd(&o->out_r[0]), steal_fd(&o->out_r[1]));
  o->started(o->p, o->arg, NULL);
  own_spawn_free(o);
}

static int own_send(struct own_spawn *o, wr_error_t *err) {
  _cleanup_strv_ char **env = build_env(o->sb, &o->u, o->env, false);
  struct wr_init_spawn s = {
      .flags = WR_SPAWN_BACKGROUND,
      .uid = o->u.uid,
      .gid = o->u.gid,
      .ngroups = o->u.ngroups,
      .rows = 24,
      .cols = 80,
      .tag = o->tag,
      .cwd = o->cwd ? o->cwd : o->sb->spec.workdir,
      .argc = (uint32_t)wr_strv_len(o->argv),
      .envc = (uint32_t)wr_strv_len(env),
      .argv = (const char **)o->argv,
      .env = (const char **)env,
  };
  int p[3][2], fds[5];
  wr_buf_t msg;
  int r;

  memcpy(s.groups, o->u.groups, sizeof(o->u.groups));
  for (int i = 0; i < 3; i++) {
    if (pipe2(p[i], O_CLOEXEC) < 0)
      return wr_error_set(err, errno, "pipe");
    o->child[i] = i == 0 ? p[i][0] : p[i][1];
    if (i == 0)
      close(p[i][1]); /* no input: stdin reads end-of-file */
    else
      o->out_r[i - 1] = p[i][0];
  }
  memcpy(fds, o->child, sizeof(o->child));
  fds[3] = o->out_r[0];
  fds[4] = o->out_r[1];
  wr_buf_init(&msg);
  r = wr_init_encode_spawn(&msg, 0, &s, 5, err);
  if (r == 0)
    r = wr_initconn_request(o->sb->conn, &msg, fds, 5, own_spawned, o, err);
  wr_buf_free(&msg);
  for (int i = 0; i < 3; i++)
    wr_closep(&o->child[i]);
  return r;
}

static void own_user_work(struct wr_job *job) {
  struct own_spawn *o = job->arg;

  job->result =
      wr_user_resolve(o->rootfd, o->user ? o->user : "root", &o->u, &job->err);
}

static void own_user_done(struct wr_job *job) {
  struct own_spawn *o = job->arg;
  struct wr_sandbox *sb = o->sb;
  wr_error_t err;

  if (job->result < 0) {
    own_fail(o, &job->err);
    return;
  }
  if (sb->state != WR_SB_RUNNING || sb->conn == NULL) {
    wr_error_setx(&err, ESRCH, "sandbox `%s` is not running", sb->name);
    own_fail(o, &err);
    return;
  }
  o->p = wr_proc_new(sb);
  o->p->argv = wr_strv_dup(o->argv);
  o->p->background = true;
  o->p->tag = xstrdup(o->tag);
  if (own_send(o, &err) < 0)
    own_fail(o, &err);
}

int wr_exec_start(struct wr_sandbox *sb, const struct wr_exec_opts *opts,
                  wr_exec_started_fn started, void *arg, wr_error_t *err) {
  struct own_spawn *o;

  if (sb->state != WR_SB_RUNNING || sb->conn == NULL || sb->rootfd < 0)
    return wr_error_setx(err, ESRCH, "sandbox `%s` is not running", sb->name);
  if (wr_proc_find_tag(sb, opts->tag) != NULL)
    return wr_error_setx(err, EEXIST, "a process tagged `%s` exists",
                         opts->tag);
  o = xcalloc(1, sizeof(*o));
  o->child[0] = o->child[1] = o->child[2] = -1;
  o->out_r[0] = o->out_r[1] = -1;
  o->sb = sb;
  wr_sandbox_ref(sb);
  o->argv = wr_strv_dup(opts->argv);
  o->env = opts->env ? wr_strv_dup(opts->env) : NULL;
  o->cwd = opts->cwd ? xstrdup(opts->cwd) : NULL;
  o->user = opts->user ? xstrdup(opts->user) : NULL;
  o->tag = xstrdup(opts->tag);
  o->rootfd = sb->rootfd;
  o->started = started;
  o->arg = arg;
  o->job.fn = own_user_work;
  o->job.done = own_user_done;
  o->job.arg = o;
  wr_job_queue(sb->d, &o->job);
  return 0;
}
