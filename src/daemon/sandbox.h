/*
 * Internal to the daemon module: sandboxes as the manager holds them
 * (sandbox.c), their lifecycle (lifecycle.c) and its API handlers. Loop
 * thread only, unless a comment says otherwise.
 */
#ifndef WR_DAEMON_SANDBOX_H
#define WR_DAEMON_SANDBOX_H

#include <jansson.h>

#include "daemon/daemon.h"
#include "daemon/idle.h"
#include "daemon/outlog.h"

struct wr_initconn;

/* The options a sandbox was created with; immutable afterwards. */
struct wr_sandbox_spec {
  uint64_t memory_bytes;
  double cpus;
  uint64_t pids;
  uint64_t disk_bytes; /* 0: no disk limit */
  char **env;          /* "K=V" */
  json_t *labels;      /* object of strings */
  char *workdir;
  /* The agent kit (NULL: none given) and the workspace: a host directory
   * mounted at /workspace ("direct") or read-only at /origin with a clone
   * of it at /workspace ("clone"); NULL without one. ws_uid/ws_gid own
   * ws_path on the host: root inside writes as them there; ws_id is the
   * directory as it was at create, checked at every mount. */
  char *agent;
  char *ws_mode;
  char *ws_path;
  uint32_t ws_uid, ws_gid;
  struct wr_ws_identity ws_id;
  /* Snapshots (snapshots.c): the snapshot the sandbox was made from, or
   * NULL, and its stack's layer directories, newest first (not stored:
   * found from the snapshot when the sandbox is loaded). */
  char *snapshot;
  char **layer_dirs;
  int64_t idle_pause_s; /* pause after this long idle; 0 never; -1: the
                           daemon's --idle-pause */
  bool restart_start;   /* pool.c: a claim restarts the start command */
  /* templates.c: what the template gave it (its layers, start command,
   * ready port, ENV, WORKDIR, USER), or NULL. Its layer directories are
   * at the end of layer_dirs. */
  json_t *template;
};

/* What a sandbox is to its warm pool (pool.c; sandboxes.pool). */
enum wr_pool_member {
  WR_POOL_NONE = 0, /* a pool's no longer, or never */
  WR_POOL_FILLING,  /* being created, started and paused */
  WR_POOL_READY,    /* paused, for a create to claim */
  WR_POOL_CLAIMING, /* a create is taking it */
  WR_POOL_DRAINING, /* being removed (the pool shrank, or it went wrong) */
};

/* templates.c: how the next create or start of a template sandbox waits
 * for its start command to answer (in memory; reset when used). */
struct wr_sandbox_tpl {
  bool no_wait;            /* return once it is started */
  double ready_timeout_s;  /* 0: the default */
  struct tpl_ready *ready; /* a wait in flight */
};

/* What a sandbox is (stored; `state` in the API). Transitions are checked
 * in one place (lifecycle.c; docs/lifecycle.md has the table). */
enum wr_sandbox_state {
  WR_SB_CREATING,
  WR_SB_RUNNING,
  WR_SB_PAUSED,
  WR_SB_STOPPED,
  WR_SB_ERROR,
};

/* The lifecycle operation in flight: at most one at a time (in memory
 * only; a restarted daemon has none). A client asking for another gets
 * 409 busy, naming it. */
enum wr_sandbox_op {
  WR_OP_NONE = 0,
  WR_OP_CREATING,
  WR_OP_STARTING,
  WR_OP_STOPPING,
  WR_OP_STOPPING_TO_REMOVE, /* rm --force: the stop, then the removal */
  WR_OP_PAUSING,
  WR_OP_RESUMING,
  WR_OP_REMOVING,
  WR_OP_SNAPSHOTTING, /* its layer is being copied (snapshots.c) */
};

/* What woke a paused sandbox (inspect's "last_wake"). */
enum wr_wake_by {
  WR_WAKE_API = 0, /* resume, start, or a create that reused it */
  WR_WAKE_EXEC,
  WR_WAKE_FILES,
  WR_WAKE_ATTACH,
  WR_WAKE_PORT,
};

/* Called once when a lifecycle operation ends: err is NULL when it did
 * what was asked. sb is alive for the call (it may be removed from the
 * table by then: a finished rm). */
typedef void (*wr_sandbox_done_fn)(struct wr_sandbox *sb, void *arg,
                                   const wr_error_t *err);

/* Someone waiting for the operation in flight to end. */
struct wr_sandbox_waiter {
  struct wr_sandbox_waiter *next;
  wr_sandbox_done_fn fn;
  void *arg;
};

struct wr_sandbox {
  struct wr_sandbox *next;
  struct wr_daemon *d;
  char *id;
  char *name;
  char *image;
  char *image_dir; /* lower layer path */
  uint32_t slot;
  struct wr_sandbox_spec spec;
  enum wr_sandbox_state state;
  char *error;
  int64_t created_ms, updated_ms;

  /* While running (or paused). */
  struct wr_rt_instance inst;
  uv_poll_t pidfd_poll; /* readable when warren-init exits */
  bool pidfd_polling;
  struct wr_initconn *conn;
  int rootfd;         /* O_PATH fd of the merged root, or -1 */
  int retired_rootfd; /* an old rootfd, now /dev/null, until freed */

  /* A lifecycle operation (create, start, stop, rm, pause, resume) runs
   * on a worker thread or waits for init to exit; whoever waits for it to
   * end is on `waiters`, oldest first. Only wr_sandbox_transition changes
   * `op` and `state`. */
  enum wr_sandbox_op op;
  struct wr_sandbox_waiter *waiters;
  uv_timer_t stop_timer; /* SIGKILL after the stop grace period */
  bool stop_timer_init;
  bool removed; /* gone from the table; freed when unreferenced */
  struct wr_sandbox *grave_next; /* in d->graveyard (sandbox.c) */
  int refs;
  /* The last wake from paused: by what, and when (0: never). */
  enum wr_wake_by last_wake_by;
  int64_t last_wake_ms;
  /* Its connections through the net engine: how many are open, and when
   * bytes last moved on one (network.c). */
  unsigned net_conns;
  int64_t net_active_ms;
  struct wr_sandbox_idle idle; /* idle.c */

  /* A warm pool's sandbox (pool.c) is hidden from lists and refuses
   * requests (409 pooled) until a create claims it. It counts toward the
   * running and resident sandboxes like any other. */
  bool pooled;
  enum wr_pool_member pool_state;

  struct wr_proc *procs; /* processes spawned through init */
  unsigned next_tag;
  struct wr_outlog outlog; /* their kept output on disk */
  /* Its template's start command being waited for (templates.c). */
  struct wr_sandbox_tpl tpl;
};

/* ---- sandboxes (sandbox.c) ---------------------------------------------- */

struct wr_sandbox *wr_sandbox_find(struct wr_daemon *d, const char *id_or_name);
/* Free a sandbox no one references (sandbox.c). */
void wr_sandbox_free(struct wr_sandbox *sb);
/* Take sb out of the table. The table's reference goes on the next turn
 * of the loop, so that whoever removed it may use it until its callback
 * returns; it is freed once no one else holds a reference. */
void wr_sandbox_table_remove(struct wr_sandbox *sb);
/* Drop the references of the removed sandboxes now, and their processes
 * (the reaper's work; the daemon's shutdown). */
void wr_sandbox_reap(struct wr_daemon *d);
/* Look up the {id} parameter; replies 404 and returns NULL when absent. */
struct wr_sandbox *wr_sandbox_from_req(struct wr_daemon *d, wr_http_req_t *req);
void wr_sandbox_ref(struct wr_sandbox *sb);
void wr_sandbox_unref(struct wr_sandbox *sb);
const char *wr_sandbox_state_name(enum wr_sandbox_state s);
/* -1 for a name that is not a state. */
int wr_sandbox_state_from_name(const char *name);
const char *wr_sandbox_op_name(enum wr_sandbox_op op); /* NULL for none */
const char *wr_wake_by_name(enum wr_wake_by by);

/* ---- the lifecycle (lifecycle.c) ------------------------------------------
 *
 * Operations the daemon calls itself (the API handlers are adapters over
 * them). Each returns -1 with err when it is refused at once: EBUSY when
 * another operation is in flight, ESRCH when the sandbox is not in a state
 * the operation applies to (err's message says which); done is then never
 * called. Otherwise it returns 0 and done is called exactly once, when the
 * operation ends, possibly before the call returns (when there is nothing
 * to do: pausing a paused sandbox). Loop thread.
 */

/*
 * The one place where a sandbox's state or operation changes: checked
 * against the table of transitions (a change the code must never make is
 * an assertion), stored when the state or its error changes, and the
 * place where every change is observed. error replaces the sandbox's
 * error when set_error (it may be sb->error itself).
 */
void wr_sandbox_transition(struct wr_sandbox *sb, enum wr_sandbox_state s,
                           enum wr_sandbox_op op, bool set_error,
                           const char *error);
/* The state, with that error (NULL: none), the operation unchanged. */
void wr_sandbox_set_state(struct wr_sandbox *sb, enum wr_sandbox_state s,
                          const char *error);
/* Whether sb is in a state and free of operations that let op begin: 0,
 * or -1 with EBUSY or ESRCH (a client asked for something it may not). */
int wr_sandbox_can(const struct wr_sandbox *sb, enum wr_sandbox_op op,
                   wr_error_t *err);
/* Make a new sandbox (in the table, state creating): prepare its root,
 * and start it when `start`. On failure it leaves the table (and the
 * store) before done is called. */
void wr_sandbox_create(struct wr_sandbox *sb, bool start,
                       wr_sandbox_done_fn done, void *arg);
/* Start a stopped sandbox; resume a paused one; nothing for a running one. */
int wr_sandbox_start(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg,
                     wr_error_t *err);
/* SIGTERM, then SIGKILL after grace_ms (0: at once); done once init has
 * exited and the sandbox is cleaned up. Nothing for a stopped one. */
int wr_sandbox_stop(struct wr_sandbox *sb, uint64_t grace_ms,
                    wr_sandbox_done_fn done, void *arg, wr_error_t *err);
int wr_sandbox_pause(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg,
                     wr_error_t *err);
int wr_sandbox_resume(struct wr_sandbox *sb, enum wr_wake_by by,
                      wr_sandbox_done_fn done, void *arg, wr_error_t *err);
/* Remove a stopped sandbox; with force, stop a running one first. */
int wr_sandbox_remove(struct wr_sandbox *sb, bool force,
                      wr_sandbox_done_fn done, void *arg, wr_error_t *err);
/*
 * Wake a paused sandbox for a request: 1 when there is nothing to wake
 * (it is not paused, or it is stopping), and done is never called.
 * Otherwise 0, and done is called once it runs (err: the wake failed):
 * a wake joins the one in flight (one thaw for every request), and waits
 * for a pause in flight to end first. Under --max-running it needs a
 * running slot (limiter.c): it may evict an idle sandbox or wait in line,
 * and done then gets ETIMEDOUT if no slot came in time.
 */
int wr_sandbox_wake(struct wr_sandbox *sb, enum wr_wake_by by,
                    wr_sandbox_done_fn done, void *arg);
/*
 * wr_sandbox_wake for an API handler: true when the handler may go on
 * now; false when it must return at once, without answering: again(req,
 * daemon), the handler itself, is called once the sandbox runs, or the
 * request is answered with why the wake failed (500 wake_failed, or 503
 * queue_timeout with Retry-After when no slot came in time).
 */
bool wr_sandbox_awake(struct wr_sandbox *sb, wr_http_req_t *req,
                      enum wr_wake_by by, wr_http_handler_fn again);
/* A snapshot of sb's layer (snapshots.c) is an operation like the
 * others: begin refuses (EBUSY) while another is in flight, and a wake
 * of a paused sandbox waits for it to end. */
int wr_sandbox_begin_snapshot(struct wr_sandbox *sb, wr_error_t *err);
void wr_sandbox_end_snapshot(struct wr_sandbox *sb);
/* Wait for the operation in flight (there must be one) to end. */
void wr_sandbox_wait(struct wr_sandbox *sb, wr_sandbox_done_fn done, void *arg);
json_t *wr_sandbox_json(const struct wr_sandbox *sb);
/* The rt spec that describes sb (borrows its strings). */
void wr_sandbox_rt_spec(const struct wr_sandbox *sb, struct wr_rt_spec *out);
/* Called when warren-init is known to have exited. */
void wr_sandbox_on_exit(struct wr_sandbox *sb);
/* Begin watching a running instance (pidfd, control connection). */
int wr_sandbox_attach(struct wr_sandbox *sb, struct wr_rt_instance *inst,
                      wr_error_t *err);
/* Start the proxy and DNS server of a running sandbox (network.c does the
 * work; this opens the namespace). */
int wr_sandbox_net_up(struct wr_sandbox *sb, const struct wr_rt_instance *inst,
                      wr_error_t *err);
/*
 * The merged root, for a handler that needs it (files API, exec's user
 * lookup): true with *fd (borrowed; see retire_rootfd in sandbox.c) when
 * it is open. Otherwise the handler returns at once, without answering:
 * the request has been answered (the sandbox is being created or
 * removed), or a job opens the root on the threadpool (mounting it after
 * a reboot, which blocks) and then either answers with what went wrong or
 * calls again(req, daemon), the handler itself, which finds the root open.
 */
bool wr_sandbox_root_ready(struct wr_sandbox *sb, wr_http_req_t *req,
                           wr_http_handler_fn again, int *fd);
/* A new sandbox with the defaults a create with only a name and an image
 * gets, in the table and the store (state creating), and its pool's
 * (sandboxes.pool = pool_state) when pool_state is not NULL, in the same
 * transaction. Then wr_sandbox_create it. */
struct wr_sandbox *wr_sandbox_add(struct wr_daemon *d, const char *name,
                                  const char *image, const char *pool_state,
                                  wr_error_t *err);
/* The spec as the store keeps it (caller frees). */
char *wr_sandbox_spec_json(const struct wr_sandbox *sb);
/* templates.c: a build sandbox for a template's RUN step, from `image`
 * with `layers` (newest first) below its own, `env` as its environment,
 * labelled warren.template-build=TEMPLATE; in the table, state creating,
 * for wr_sandbox_create. */
struct wr_sandbox *
wr_sandbox_new_for_build(struct wr_daemon *d, const char *image,
                         char *const *layers, char *const *env,
                         const char *template_name, wr_error_t *err);
/* Build a struct wr_sandbox from a store record (recovery). */
struct wr_sandbox *wr_sandbox_from_rec(struct wr_daemon *d,
                                       const struct wr_sandbox_rec *rec,
                                       wr_error_t *err);

void wr_api_info(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_create(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_list(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_get(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_start(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_stop(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_pause(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_resume(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_restart_start(wr_http_req_t *req, void *ctx);
void wr_api_sandbox_delete(wr_http_req_t *req, void *ctx);

#endif
