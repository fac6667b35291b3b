/*
 * A sandbox's lifecycle, apart from HTTP: the state machine and the
 * operations that move it, which the API handlers, a create that reuses a
 * sandbox and a request that wakes one all call.
 *
 *   creating -> running <-> paused -> stopped -> (deleted)     error
 *
 * A sandbox has a state (stored) and at most one operation in flight (in
 * memory); both change only in wr_sandbox_transition, against the tables
 * below. Each operation that blocks (mounting, cloning, freezing,
 * cleaning up) runs as a job on the threadpool; whoever waits for it is a
 * waiter, told when it ends. Stopping is asynchronous: SIGTERM now,
 * SIGKILL when the grace period ends, and the sandbox is stopped when
 * warren-init's pidfd says it has exited.
 */
#include "daemon/events.h"
#include "daemon/initconn.h"
#include "daemon/jobs.h"
#include "daemon/limiter.h"
#include "daemon/procs.h"
#include "daemon/roots.h"
#include "daemon/sandbox.h"
#include "daemon/network.h"
#include "daemon/templates.h"

#include <assert.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define B(x) (1u << (x))

static const char *const state_names[] = {"creating", "running", "paused",
                                          "stopped", "error"};

/* An operation's name is what a 409 busy answer says it is doing. */
static const char *const op_names[] = {
    [WR_OP_NONE] = NULL,
    [WR_OP_CREATING] = "creating",
    [WR_OP_STARTING] = "starting",
    [WR_OP_STOPPING] = "stopping",
    [WR_OP_STOPPING_TO_REMOVE] = "stopping",
    [WR_OP_PAUSING] = "pausing",
    [WR_OP_RESUMING] = "resuming",
    [WR_OP_REMOVING] = "removing",
    [WR_OP_SNAPSHOTTING] = "snapshotting",
};

static const char *const wake_names[] = {"api", "exec", "files", "attach",
                                         "port"};

/* The states each state may become. A state may follow itself only where
 * its error changes (a start that failed, a removal that failed again). */
static const unsigned state_next[] = {
    [WR_SB_CREATING] = B(WR_SB_RUNNING) | B(WR_SB_STOPPED) | B(WR_SB_ERROR),
    [WR_SB_RUNNING] = B(WR_SB_PAUSED) | B(WR_SB_STOPPED),
    [WR_SB_PAUSED] = B(WR_SB_RUNNING) | B(WR_SB_STOPPED),
    [WR_SB_STOPPED] = B(WR_SB_RUNNING) | B(WR_SB_STOPPED) | B(WR_SB_ERROR),
    [WR_SB_ERROR] = B(WR_SB_RUNNING) | B(WR_SB_STOPPED) | B(WR_SB_ERROR),
};

/* The operations each operation may become: it ends (none), or init's
 * exit turns a pause or resume into a stop, or a forced removal's stop
 * turns into the removal. */
static const unsigned op_next[] = {
    [WR_OP_NONE] = ~B(WR_OP_NONE),
    [WR_OP_CREATING] = B(WR_OP_NONE),
    [WR_OP_STARTING] = B(WR_OP_NONE),
    [WR_OP_STOPPING] = B(WR_OP_NONE),
    [WR_OP_STOPPING_TO_REMOVE] = B(WR_OP_REMOVING),
    [WR_OP_PAUSING] = B(WR_OP_NONE) | B(WR_OP_STOPPING),
    [WR_OP_RESUMING] = B(WR_OP_NONE) | B(WR_OP_STOPPING),
    [WR_OP_REMOVING] = B(WR_OP_NONE),
    [WR_OP_SNAPSHOTTING] = B(WR_OP_NONE) | B(WR_OP_STOPPING),
};

/* The states in which a client may ask for each operation. */
static const unsigned op_from[] = {
    [WR_OP_NONE] = 0,
    [WR_OP_CREATING] = B(WR_SB_CREATING),
    [WR_OP_STARTING] = B(WR_SB_STOPPED) | B(WR_SB_ERROR),
    [WR_OP_STOPPING] = B(WR_SB_RUNNING) | B(WR_SB_PAUSED),
    [WR_OP_STOPPING_TO_REMOVE] = B(WR_SB_RUNNING) | B(WR_SB_PAUSED),
    [WR_OP_PAUSING] = B(WR_SB_RUNNING),
    [WR_OP_RESUMING] = B(WR_SB_PAUSED),
    [WR_OP_REMOVING] = B(WR_SB_STOPPED) | B(WR_SB_ERROR),
    [WR_OP_SNAPSHOTTING] =
        B(WR_SB_RUNNING) | B(WR_SB_PAUSED) | B(WR_SB_STOPPED),
};

const char *wr_sandbox_state_name(enum wr_sandbox_state s) {
  return state_names[s];
}

int wr_sandbox_state_from_name(const char *s) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(state_names); i++)
    if (strcmp(s, state_names[i]) == 0)
      return (int)i;
  return -1;
}

const char *wr_sandbox_op_name(enum wr_sandbox_op op) {
  return op_names[op];
}

const char *wr_wake_by_name(enum wr_wake_by by) {
  return wake_names[by];
}

/* Store the state and its error. */
static void store_state(struct wr_sandbox *sb, enum wr_sandbox_state s,
                        bool set_error, const char *error) {
  wr_error_t err;

  if (set_error) {
    /* `error` may be sb->error itself (a stop keeps the reason it had). */
    char *copy = error ? xstrdup(error) : NULL;
    free(sb->error);
    sb->error = copy;
  }
  sb->state = s;
  sb->updated_ms = wr_now_ms();
  if (wr_store_sandbox_set_state(sb->d->store, sb->id, state_names[s],
                                 sb->error, &err) < 0)
    wr_err("sandbox %s: %s", sb->id, err.msg);
}

void wr_sandbox_transition(struct wr_sandbox *sb, enum wr_sandbox_state s,
                           enum wr_sandbox_op op, bool set_error,
                           const char *error) {
  enum wr_sandbox_state from = sb->state;
  enum wr_sandbox_op from_op = sb->op;

  assert(s == from || (state_next[from] & B(s)) != 0);
  assert(s != from || set_error || op != from_op);
  assert(op == from_op || (op_next[from_op] & B(op)) != 0);
  sb->op = op;
  if (s != from || set_error) {
    store_state(sb, s, set_error, error);
    wr_events_state_change(sb, from);
    wr_idle_on_state(sb);
  }
  /* Every change is observed here, from (from, from_op) to (s, op), with
   * what caused it in sb (last_wake_by for a wake, removed for a removal
   * that ended): the event stream, idle timers and the limiter. */
  wr_debug("sandbox %s: %s (%s) -> %s (%s)", sb->name, state_names[from],
           op_names[from_op] ? op_names[from_op] : "-", state_names[s],
           op_names[op] ? op_names[op] : "-");
  wr_limiter_on_transition(sb);
}

void wr_sandbox_set_state(struct wr_sandbox *sb, enum wr_sandbox_state s,
                          const char *error) {
  wr_sandbox_transition(sb, s, sb->op, true, error);
}

static void set_op(struct wr_sandbox *sb, enum wr_sandbox_op op) {
  wr_sandbox_transition(sb, sb->state, op, false, NULL);
}

int wr_sandbox_can(const struct wr_sandbox *sb, enum wr_sandbox_op op,
                   wr_error_t *err) {
  if (sb->op != WR_OP_NONE)
    return wr_error_setx(err, EBUSY, "sandbox `%s` is busy (%s)", sb->name,
                         op_names[sb->op]);
  if ((op_from[op] & B(sb->state)) == 0)
    return wr_error_setx(err, ESRCH, "sandbox `%s` is %s", sb->name,
                         state_names[sb->state]);
  return 0;
}

/* ---- waiters ------------------------------------------------------------ */

static void add_waiter(struct wr_sandbox *sb, wr_sandbox_done_fn fn,
                       void *arg) {
  struct wr_sandbox_waiter *w = xcalloc(1, sizeof(*w)), **pp = &sb->waiters;

  w->fn = fn;
  w->arg = arg;
  while (*pp != NULL)
    pp = &(*pp)->next;
  *pp = w;
}

void wr_sandbox_wait(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                     void *arg) {
  assert(sb->op != WR_OP_NONE);
  add_waiter(sb, done, arg);
}

/* The operation ended: tell everyone who waited, oldest first. A waiter
 * may begin the next operation; its own waiters wait for that one. */
static void finish_op(struct wr_sandbox *sb, const wr_error_t *err) {
  struct wr_sandbox_waiter *w = sb->waiters;

  sb->waiters = NULL;
  set_op(sb, WR_OP_NONE);
  wr_sandbox_ref(sb);
  while (w != NULL) {
    struct wr_sandbox_waiter *next = w->next;
    w->fn(sb, w->arg, err);
    free(w);
    w = next;
  }
  wr_sandbox_unref(sb);
}

/* Begin op for done (may be NULL: no one waits), or refuse it. */
static int begin_op(struct wr_sandbox *sb, enum wr_sandbox_op op,
                    wr_sandbox_done_fn done, void *arg, wr_error_t *err) {
  if (wr_sandbox_can(sb, op, err) < 0)
    return -1;
  set_op(sb, op);
  if (done != NULL)
    add_waiter(sb, done, arg);
  return 0;
}

/* ---- snapshots ------------------------------------------------------------
 */

int wr_sandbox_begin_snapshot(struct wr_sandbox *sb, wr_error_t *err) {
  return begin_op(sb, WR_OP_SNAPSHOTTING, NULL, NULL, err);
}

void wr_sandbox_end_snapshot(struct wr_sandbox *sb) {
  /* Init's exit may have turned it into a stop meanwhile: that one ends
   * on its own. */
  if (sb->op == WR_OP_SNAPSHOTTING)
    finish_op(sb, NULL);
}

/* ---- watching a running sandbox ----------------------------------------- */

static void pidfd_closed(uv_handle_t *h) {
  struct wr_sandbox *sb = h->data;

  wr_sandbox_unref(sb);
}

static void stop_watching(struct wr_sandbox *sb) {
  if (sb->pidfd_polling) {
    sb->pidfd_polling = false;
    uv_poll_stop(&sb->pidfd_poll);
    uv_close((uv_handle_t *)&sb->pidfd_poll, pidfd_closed);
  }
  if (sb->conn != NULL) {
    wr_initconn_close(sb->conn);
    sb->conn = NULL;
  }
}

static void on_pidfd(uv_poll_t *h, int status, int events) {
  struct wr_sandbox *sb = h->data;
  siginfo_t info;

  (void)status;
  (void)events;
  /* Reap warren-init if this daemon started it (otherwise ECHILD). */
  memset(&info, 0, sizeof(info));
  waitid((idtype_t)3 /* P_PIDFD */, (id_t)sb->inst.pidfd, &info,
         WEXITED | WNOHANG);
  wr_sandbox_on_exit(sb);
}

int wr_sandbox_attach(struct wr_sandbox *sb, struct wr_rt_instance *inst,
                      wr_error_t *err) {
  sb->inst = *inst;
  sb->conn = wr_initconn_new(sb, inst->ctl, err);
  if (sb->conn == NULL)
    return -1;
  if (uv_poll_init(sb->d->loop, &sb->pidfd_poll, inst->pidfd) < 0) {
    wr_initconn_close(sb->conn);
    sb->conn = NULL;
    return wr_error_set(err, EIO, "watch warren-init");
  }
  sb->pidfd_poll.data = sb;
  sb->pidfd_polling = true;
  wr_sandbox_ref(sb);
  uv_poll_start(&sb->pidfd_poll, UV_READABLE, on_pidfd);
  wr_store_sandbox_set_init(sb->d->store, sb->id, inst->pid, inst->start_time,
                            NULL);
  return 0;
}

/* ---- jobs --------------------------------------------------------------- */

struct sb_job {
  struct wr_job job;
  struct wr_sandbox *sb;
  enum wr_sandbox_op op; /* the operation the job does */
  struct wr_rt_spec spec;
  struct wr_trust *trust;         /* the scanner of the extra CAs */
  struct wr_trust_set *trust_set; /* what a create or start installed */
  struct wr_rt_instance inst;
  bool start;         /* create: start after preparing */
  bool frozen;        /* pause/resume */
  enum wr_wake_by by; /* resume: what woke it */
};

static struct sb_job *sb_job_new(struct wr_sandbox *sb, wr_job_fn fn,
                                 wr_job_fn done) {
  struct sb_job *j = xcalloc(1, sizeof(*j));

  j->sb = sb;
  j->op = sb->op;
  j->job.fn = fn;
  j->job.done = done;
  j->job.arg = j;
  j->inst.pidfd = j->inst.ctl = j->inst.rootfd = -1;
  wr_sandbox_rt_spec(sb, &j->spec);
  j->trust = wr_network_trust(sb->d);
  wr_sandbox_ref(sb);
  return j;
}

static void sb_job_end(struct sb_job *j) {
  wr_trust_set_unref(j->trust_set);
  wr_sandbox_unref(j->sb);
  free(j);
}

int wr_sandbox_net_up(struct wr_sandbox *sb, const struct wr_rt_instance *inst,
                      wr_error_t *err) {
  _cleanup_close_ int netns = wr_rt_open_netns(inst, err);
  int fds[WR_NET_NFDS];

  if (netns < 0 || wr_rt_net_fds(inst, fds, err) < 0 ||
      wr_network_sandbox_up(sb, netns, fds, err) < 0)
    return wr_error_wrap(err, "start the network of sandbox `%s`", sb->name);
  return 0;
}

/* Adopt a freshly started instance: its proxy and DNS server listen before
 * its first process runs. On failure kill it. The root the start opened
 * becomes the sandbox's (see wr_sandbox_root_ready), unless it has one. */
static int adopt_instance(struct wr_sandbox *sb, struct wr_rt_instance *inst,
                          wr_error_t *err) {
  if (sb->rootfd < 0)
    sb->rootfd = steal_fd(&inst->rootfd);
  wr_closep(&inst->rootfd);
  if (wr_sandbox_net_up(sb, inst, err) < 0 ||
      wr_sandbox_attach(sb, inst, err) < 0) {
    wr_network_sandbox_down(sb);
    wr_rt_kill(sb->d->rt, sb->id, inst->pidfd, NULL);
    close(inst->pidfd);
    close(inst->ctl);
    return -1;
  }
  wr_sandbox_set_state(sb, WR_SB_RUNNING, NULL);
  return 0;
}

/* The extra CAs as the host has them now, so that a CA added on the host
 * reaches a sandbox at its next start. On the job's worker thread: it
 * reads the host's CA directory (when something in it changed). */
static void scan_cas(struct sb_job *j) {
  j->trust_set = wr_trust_scan(j->trust);
  j->spec.extra_cas = wr_trust_set_pem(j->trust_set);
}

/* ---- create ------------------------------------------------------------- */

static void create_work(struct wr_job *job) {
  struct sb_job *j = job->arg;
  uint64_t t0 = wr_mono_ns(), t1;

  scan_cas(j);
  if (j->start)
    job->result = wr_rt_create(job->d->rt, &j->spec, &j->inst, &job->err);
  else
    job->result = wr_rt_prepare(job->d->rt, &j->spec, &job->err);
  t1 = wr_mono_ns();
  wr_debug("sandbox %s: created in %.2f ms", j->spec.id,
           (double)(t1 - t0) / 1e6);
  if (job->result < 0)
    wr_rt_remove(job->d->rt, j->spec.id, NULL);
}

static void create_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result == 0 && j->start &&
      adopt_instance(sb, &j->inst, &job->err) < 0)
    job->result = -1;
  if (job->result < 0) {
    wr_warn("create sandbox %s: %s", sb->name, job->err.msg);
    wr_events_emit(
        sb->d, "error", sb,
        json_pack("{s:s,s:s}", "during", "create", "message", job->err.msg));
    wr_store_sandbox_delete(sb->d->store, sb->id, NULL);
    wr_daemon_release_slot(sb->d, sb->id);
    wr_sandbox_table_remove(sb);
    finish_op(sb, &job->err);
  } else {
    if (!j->start)
      wr_sandbox_set_state(sb, WR_SB_STOPPED, NULL);
    wr_info("sandbox %s (%s) created", sb->name, sb->id);
    finish_op(sb, NULL);
  }
  sb_job_end(j);
}

void wr_sandbox_create(struct wr_sandbox *sb, bool start,
                       wr_sandbox_done_fn done, void *arg) {
  struct sb_job *j;
  wr_error_t err;

  assert(sb->state == WR_SB_CREATING);
  if (start) /* templates: done once its start command answers */
    wr_template_wrap_done(sb, &done, &arg);
  if (begin_op(sb, WR_OP_CREATING, done, arg, &err) < 0)
    assert(!"a new sandbox has no operation in flight");
  j = sb_job_new(sb, create_work, create_done);
  j->start = start;
  wr_job_queue(sb->d, &j->job);
}

/* ---- start -------------------------------------------------------------- */

static void start_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  scan_cas(j);
  job->result = wr_rt_start(job->d->rt, &j->spec, &j->inst, &job->err);
}

static void start_done(struct wr_job *job) {
  struct sb_job *j = job->arg;

  if (job->result == 0)
    job->result = adopt_instance(j->sb, &j->inst, &job->err);
  if (job->result < 0) {
    wr_sandbox_set_state(j->sb, WR_SB_STOPPED, job->err.msg);
    finish_op(j->sb, &job->err);
  } else {
    wr_info("sandbox %s started", j->sb->name);
    finish_op(j->sb, NULL);
  }
  sb_job_end(j);
}

int wr_sandbox_start(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg,
                     wr_error_t *err) {
  if (sb->op == WR_OP_NONE && sb->state == WR_SB_PAUSED)
    return wr_sandbox_resume(sb, WR_WAKE_API, done, arg, err);
  if (sb->op == WR_OP_NONE && sb->state == WR_SB_RUNNING) {
    done(sb, arg, NULL);
    return 0;
  }
  if (wr_sandbox_can(sb, WR_OP_STARTING, err) < 0)
    return -1;
  wr_template_wrap_done(sb, &done, &arg); /* templates, as for a create */
  if (begin_op(sb, WR_OP_STARTING, done, arg, err) < 0)
    return -1;
  wr_procs_forget_all(sb); /* the processes of the last run are history */
  wr_job_queue(sb->d, &sb_job_new(sb, start_work, start_done)->job);
  return 0;
}

/* ---- stop and exit ------------------------------------------------------ */

static void cleanup_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_cleanup(job->d->rt, j->spec.id, &job->err);
}

static void remove_after_stop(struct wr_sandbox *sb);

static void cleanup_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result < 0)
    wr_warn("sandbox %s: clean up: %s", sb->name, job->err.msg);
  wr_sandbox_set_state(sb, WR_SB_STOPPED, sb->error);
  wr_info("sandbox %s stopped", sb->name);
  if (sb->op == WR_OP_STOPPING_TO_REMOVE)
    remove_after_stop(sb);
  else
    finish_op(sb, NULL);
  sb_job_end(j);
}

static void stop_timer_closed(uv_handle_t *h) {
  wr_sandbox_unref(h->data);
}

/* Init's exit is expected while a stop is in flight; otherwise it turns
 * the operation in flight (none, a pause, a resume) into a stop, whose
 * end its waiters then see. */
void wr_sandbox_on_exit(struct wr_sandbox *sb) {
  bool expected =
      sb->op == WR_OP_STOPPING || sb->op == WR_OP_STOPPING_TO_REMOVE;

  stop_watching(sb);
  wr_network_sandbox_down(sb);
  wr_procs_sandbox_gone(sb);
  if (sb->stop_timer_init) {
    sb->stop_timer_init = false;
    uv_close((uv_handle_t *)&sb->stop_timer, stop_timer_closed);
  }
  if (sb->inst.pidfd >= 0)
    close(sb->inst.pidfd);
  sb->inst.pidfd = -1;
  sb->inst.pid = 0;
  wr_store_sandbox_set_init(sb->d->store, sb->id, 0, 0, NULL);
  if (!expected) {
    free(sb->error);
    sb->error = xstrdup("warren-init exited unexpectedly");
    wr_warn("sandbox %s: %s", sb->name, sb->error);
    set_op(sb, WR_OP_STOPPING);
  }
  wr_job_queue(sb->d, &sb_job_new(sb, cleanup_work, cleanup_done)->job);
}

static void kill_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_kill(job->d->rt, j->spec.id, -1, &job->err);
}

static void kill_done(struct wr_job *job) {
  struct sb_job *j = job->arg;

  if (job->result < 0)
    wr_warn("sandbox %s: kill: %s", j->sb->name, job->err.msg);
  sb_job_end(j);
}

/* SIGKILL everything; the pidfd then reports init's exit. Runs on the
 * threadpool because v1 cgroups need freeze-kill-thaw rounds. */
static void kill_now(struct wr_sandbox *sb) {
  if (sb->inst.pidfd >= 0)
    syscall(SYS_pidfd_send_signal, sb->inst.pidfd, SIGKILL, NULL, 0);
  wr_job_queue(sb->d, &sb_job_new(sb, kill_work, kill_done)->job);
}

static void on_stop_timeout(uv_timer_t *t) {
  struct wr_sandbox *sb = t->data;

  wr_info("sandbox %s: grace period over, killing", sb->name);
  kill_now(sb);
}

/* Begin stopping: thaw (a frozen process cannot handle SIGTERM), SIGTERM to
 * init, which forwards it to every process and exits when they are gone;
 * SIGKILL after the grace period (0: at once). */
static void begin_stop(struct wr_sandbox *sb, uint64_t grace_ms) {
  if (sb->state == WR_SB_PAUSED)
    wr_rt_freeze(sb->d->rt, sb->id, false, NULL);
  if (grace_ms == 0) {
    kill_now(sb);
    return;
  }
  syscall(SYS_pidfd_send_signal, sb->inst.pidfd, SIGTERM, NULL, 0);
  uv_timer_init(sb->d->loop, &sb->stop_timer);
  sb->stop_timer.data = sb;
  sb->stop_timer_init = true;
  wr_sandbox_ref(sb);
  uv_timer_start(&sb->stop_timer, on_stop_timeout, grace_ms, 0);
}

int wr_sandbox_stop(struct wr_sandbox *sb, uint64_t grace_ms,
                    wr_sandbox_done_fn done, void *arg, wr_error_t *err) {
  if (sb->op == WR_OP_NONE && sb->state != WR_SB_RUNNING &&
      sb->state != WR_SB_PAUSED) {
    done(sb, arg, NULL);
    return 0;
  }
  if (begin_op(sb, WR_OP_STOPPING, done, arg, err) < 0)
    return -1;
  begin_stop(sb, grace_ms);
  return 0;
}

/* ---- pause and resume ---------------------------------------------------- */

static void freeze_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_freeze(job->d->rt, j->spec.id, j->frozen, &job->err);
}

/* Init may have exited meanwhile: the stop that took the operation over
 * tells the waiters when it ends. */
static void freeze_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (sb->op != j->op) {
    sb_job_end(j);
    return;
  }
  if (job->result < 0) {
    finish_op(sb, &job->err);
  } else {
    if (!j->frozen) {
      sb->last_wake_by = j->by;
      sb->last_wake_ms = wr_now_ms();
      wr_info("sandbox %s woken by %s", sb->name, wake_names[j->by]);
    }
    wr_sandbox_set_state(sb, j->frozen ? WR_SB_PAUSED : WR_SB_RUNNING, NULL);
    finish_op(sb, NULL);
  }
  sb_job_end(j);
}

static int freeze(struct wr_sandbox *sb, bool frozen, enum wr_wake_by by,
                  wr_sandbox_done_fn done, void *arg, wr_error_t *err) {
  enum wr_sandbox_state want = frozen ? WR_SB_PAUSED : WR_SB_RUNNING;
  struct sb_job *j;

  if (sb->op == WR_OP_NONE && sb->state == want) {
    done(sb, arg, NULL);
    return 0;
  }
  if (begin_op(sb, frozen ? WR_OP_PAUSING : WR_OP_RESUMING, done, arg, err) < 0)
    return -1;
  j = sb_job_new(sb, freeze_work, freeze_done);
  j->frozen = frozen;
  j->by = by;
  wr_job_queue(sb->d, &j->job);
  return 0;
}

int wr_sandbox_pause(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg,
                     wr_error_t *err) {
  return freeze(sb, true, WR_WAKE_API, done, arg, err);
}

int wr_sandbox_resume(struct wr_sandbox *sb, enum wr_wake_by by,
                      wr_sandbox_done_fn done, void *arg, wr_error_t *err) {
  return freeze(sb, false, by, done, arg, err);
}

/* ---- wake ---------------------------------------------------------------- */

/* A wake that waits for a pause in flight: once it ends, wake again. */
struct wake_retry {
  enum wr_wake_by by;
  wr_sandbox_done_fn done;
  void *arg;
};

static void wake_after_pause(struct wr_sandbox *sb, void *arg,
                             const wr_error_t *err) {
  struct wake_retry *r = arg;

  (void)err; /* a failed pause leaves it running; either way, wake again */
  if (wr_sandbox_wake(sb, r->by, r->done, r->arg) == 1)
    r->done(sb, r->arg, NULL);
  free(r);
}

int wr_sandbox_wake(struct wr_sandbox *sb, enum wr_wake_by by,
                    wr_sandbox_done_fn done, void *arg) {
  struct wake_retry *r;

  /* Every request that may wake a sandbox is activity (idle.c). */
  wr_idle_touch(sb, WR_IDLE_REQUEST);
  if (sb->op == WR_OP_RESUMING) {
    add_waiter(sb, done, arg);
    return 0;
  }
  if (sb->op == WR_OP_PAUSING ||
      (sb->op == WR_OP_SNAPSHOTTING && sb->state == WR_SB_PAUSED)) {
    r = xcalloc(1, sizeof(*r));
    *r = (struct wake_retry){.by = by, .done = done, .arg = arg};
    add_waiter(sb, wake_after_pause, r);
    return 0;
  }
  if (sb->op != WR_OP_NONE || sb->state != WR_SB_PAUSED)
    return 1;
  /* It needs a running slot: now, or after an eviction or a wait. */
  wr_limiter_wake(sb, by, done, arg);
  return 0;
}

/* A request waiting for its sandbox to wake. */
struct awake_req {
  wr_http_req_t *req;
  wr_http_handler_fn again;
  struct wr_sandbox *sb; /* alive while a waits: it is one of its waiters */
};

static void awake_done(struct wr_sandbox *sb, void *arg,
                       const wr_error_t *err) {
  struct awake_req *a = arg;

  wr_http_on_abort(a->req, NULL, NULL);
  if (wr_limiter_wait_error(err))
    wr_limiter_reply_wait_err(sb->d, a->req, err);
  else if (err != NULL)
    wr_http_reply_error(a->req, 500, "wake_failed", "wake sandbox `%s`: %s",
                        sb->name, err->msg);
  else
    a->again(a->req, sb->d);
  free(a);
}

/* A client that goes away while its wake waits in the limiter's line
 * leaves it (a wake under way goes on for the others). */
static void awake_abort(wr_http_req_t *req, void *arg) {
  struct awake_req *a = arg;
  wr_error_t err;

  if (!wr_limiter_wake_leave(a->sb, awake_done, a))
    return;
  wr_error_setx(&err, ECONNRESET, "the client went away while in line");
  awake_done(a->sb, a, &err);
  (void)req;
}

bool wr_sandbox_awake(struct wr_sandbox *sb, wr_http_req_t *req,
                      enum wr_wake_by by, wr_http_handler_fn again) {
  struct awake_req *a = xcalloc(1, sizeof(*a));

  a->req = req;
  a->again = again;
  a->sb = sb;
  if (wr_sandbox_wake(sb, by, awake_done, a) == 0) {
    wr_http_on_abort(req, awake_abort, a);
    return false;
  }
  free(a);
  return true;
}

/* ---- remove ------------------------------------------------------------- */

static void remove_work(struct wr_job *job) {
  struct sb_job *j = job->arg;

  job->result = wr_rt_remove(job->d->rt, j->spec.id, &job->err);
}

static void remove_done(struct wr_job *job) {
  struct sb_job *j = job->arg;
  struct wr_sandbox *sb = j->sb;

  if (job->result < 0) {
    wr_sandbox_set_state(sb, WR_SB_ERROR, job->err.msg);
    finish_op(sb, &job->err);
  } else {
    wr_network_sandbox_removed(sb);
    wr_store_sandbox_delete(sb->d->store, sb->id, NULL);
    wr_daemon_release_slot(sb->d, sb->id);
    wr_info("sandbox %s removed", sb->name);
    wr_events_emit(sb->d, "removed", sb, NULL);
    wr_sandbox_table_remove(sb);
    finish_op(sb, NULL);
  }
  sb_job_end(j);
}

/*
 * Let go of the root before it is unmounted. Files API jobs on worker
 * threads borrow sb->rootfd (they hold a reference to sb, not to the fd):
 * closing it under them would free its number for the next open, which
 * may be another sandbox's root, and a tar upload still running would
 * write its entries there. So the number stays taken until the sandbox is
 * freed, after the last job, pointed at /dev/null (no path resolves below
 * it: ENOTDIR) so that it does not keep the root mounted. Should that
 * fail, it keeps pointing at this sandbox's own root: the unmount is then
 * lazy, which is slower to free, not unsafe.
 */
static void retire_rootfd(struct wr_sandbox *sb) {
  _cleanup_close_ int null = -1;

  if (sb->rootfd < 0)
    return;
  if (sb->retired_rootfd >= 0)
    close(sb->retired_rootfd);
  sb->retired_rootfd = sb->rootfd;
  sb->rootfd = -1;
  null = open("/dev/null", O_PATH | O_CLOEXEC);
  if (null < 0 || dup3(null, sb->retired_rootfd, O_CLOEXEC) < 0)
    wr_warn("sandbox %s: retire its root fd: %s", sb->name, strerror(errno));
}

static void remove_now(struct wr_sandbox *sb, void *arg) {
  (void)arg;
  wr_job_queue(sb->d, &sb_job_new(sb, remove_work, remove_done)->job);
}

/* The kept output's writer lets go of the directory first (outlog.c). */
static void remove_begin(struct wr_sandbox *sb) {
  retire_rootfd(sb);
  wr_outlog_close(sb, remove_now, NULL);
}

static void remove_after_stop(struct wr_sandbox *sb) {
  set_op(sb, WR_OP_REMOVING);
  remove_begin(sb);
}

int wr_sandbox_remove(struct wr_sandbox *sb, bool force,
                      wr_sandbox_done_fn done, void *arg, wr_error_t *err) {
  bool live = sb->state == WR_SB_RUNNING || sb->state == WR_SB_PAUSED;

  if (live && !force && sb->op == WR_OP_NONE)
    return wr_error_setx(err, ESRCH,
                         "sandbox `%s` is %s: stop it first or force removal",
                         sb->name, state_names[sb->state]);
  if (live) {
    if (begin_op(sb, WR_OP_STOPPING_TO_REMOVE, done, arg, err) < 0)
      return -1;
    begin_stop(sb, 0);
    return 0;
  }
  if (begin_op(sb, WR_OP_REMOVING, done, arg, err) < 0)
    return -1;
  remove_begin(sb);
  return 0;
}
