/*
 * Internal to the daemon module: sandboxes as the manager holds them, the
 * connection to each sandbox's warren-init, and the pieces the handler
 * files share. Loop thread only, unless a comment says otherwise.
 */
#ifndef WR_DAEMON_INTERNAL_H
#define WR_DAEMON_INTERNAL_H

#include <jansson.h>

#include "daemon/daemon.h"
#include "init/init.h"

struct wr_initconn;
struct wr_proc;
struct wr_outlog_op;
struct wr_outlog_loaded;

/* A sandbox's writer of kept output to disk: one job at a time on the
 * threadpool, ops first, then turns at the processes' new output
 * (outlog.c). */
struct wr_outlog {
  struct wr_outlog_op *ops, *ops_last; /* queued ops, oldest first */
  bool busy;                           /* a job is running */
  bool closed;   /* the sandbox is going away: no more jobs */
  bool clearing; /* every file goes: processes need not forget theirs */
  bool warned;   /* a failure was logged at warn level once */
  uint64_t turns;
  /* After the last job once closed (removal waits for this). */
  void (*then)(struct wr_sandbox *sb, void *arg);
  void *then_arg;
  /* Recovery: output read back, until init lists its processes. */
  struct wr_outlog_loaded *loaded;
};

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
  int refs;
  /* The last wake from paused: by what, and when (0: never). */
  enum wr_wake_by last_wake_by;
  int64_t last_wake_ms;
  /* Its connections through the net engine: how many are open, and when
   * bytes last moved on one (network.c). */
  unsigned net_conns;
  int64_t net_active_ms;

  struct wr_proc *procs; /* processes spawned through init */
  unsigned next_tag;
  struct wr_outlog outlog; /* their kept output on disk */
};

/* ---- sandboxes (sandbox.c) ---------------------------------------------- */

struct wr_sandbox *wr_sandbox_find(struct wr_daemon *d, const char *id_or_name);
/* Free a sandbox no one references (sandbox.c). */
void wr_sandbox_free(struct wr_sandbox *sb);
/* Take sb out of the table (it is freed once unreferenced). */
void wr_sandbox_table_remove(struct wr_sandbox *sb);
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
 * for a pause in flight to end first.
 */
int wr_sandbox_wake(struct wr_sandbox *sb, enum wr_wake_by by,
                    wr_sandbox_done_fn done, void *arg);
/*
 * wr_sandbox_wake for an API handler: true when the handler may go on
 * now; false when it must return at once, without answering: again(req,
 * daemon), the handler itself, is called once the sandbox runs, or the
 * request is answered with why the wake failed (500 wake_failed).
 */
bool wr_sandbox_awake(struct wr_sandbox *sb, wr_http_req_t *req,
                      enum wr_wake_by by, wr_http_handler_fn again);
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
void wr_api_sandbox_delete(wr_http_req_t *req, void *ctx);

/* ---- the connection to warren-init (initconn.c) -------------------------- */

/* Reply callback: msg is NULL when the connection failed or closed before
 * the reply came (err says why). fds received with the reply are owned by
 * the callback. */
typedef void (*wr_initconn_reply_fn)(void *arg, const struct wr_init_hdr *hdr,
                                     const void *payload, int *fds, size_t nfds,
                                     const wr_error_t *err);

struct wr_initconn *wr_initconn_new(struct wr_sandbox *sb, int fd,
                                    wr_error_t *err);
/* Close and fail every pending request. */
void wr_initconn_close(struct wr_initconn *c);
/* Send a request (already encoded in msg with a placeholder id, which is
 * rewritten) with fds; cb is called with the reply. The fds are borrowed
 * (sent, not closed). */
int wr_initconn_request(struct wr_initconn *c, wr_buf_t *msg, const int *fds,
                        size_t nfds, wr_initconn_reply_fn cb, void *arg,
                        wr_error_t *err);
/* Detach a callback's arg (its owner is going away): the reply, when it
 * comes, is dropped and its fds closed. */
void wr_initconn_cancel(struct wr_initconn *c, void *arg);

/* ---- processes (exec.c, procs.c) ---------------------------------------- */

/*
 * What an exec carries to warren-init is one datagram: the strings of its
 * command, environment, working directory and tag take at most
 * WR_INIT_SPAWN_STR_MAX bytes. So that every exec keeps room for its
 * command, a sandbox's own environment may take at most WR_SANDBOX_ENV_MAX
 * bytes in WR_SANDBOX_ENV_VARS variables (checked at create) and the
 * secrets' placeholders WR_SECRET_ENV_MAX (checked when a secret is set);
 * each exec is checked against the whole when it comes in.
 */
#define WR_SANDBOX_ENV_MAX (32u << 10)
#define WR_SANDBOX_ENV_VARS 1024
#define WR_SECRET_ENV_MAX (8u << 10)

/* The largest frame a client may send (api.h has the protocol). */
#define WR_FRAME_MAX_IN (1u << 20)

/* One output pipe (or the pty master) of a process. */
struct wr_outsrc {
  struct wr_proc *p;
  uv_poll_t poll;
  int fd;
  int stream; /* 1 stdout, 2 stderr */
  bool open;
  bool paused;
};

/* Bytes on their way into a process's stdin (or its pty). */
struct wr_inwriter {
  struct wr_proc *p;
  uv_poll_t poll;
  int fd;
  bool open;
  bool polling;
  bool eof_pending; /* close once the queue is empty */
  wr_buf_t queue;
};

/* What a background process keeps of its output: the newest bytes, in
 * memory for clients (procs.c) and on disk for a restarted daemon
 * (outlog.c). */
#define WR_PROC_RETAIN_BYTES (1u << 20)

/* Retained output of a background process: chunks, oldest first. */
struct wr_chunk {
  struct wr_chunk *next;
  uint64_t offset;
  int stream;
  size_t len;
  char data[];
};

/* A client following a process: the exec request itself, or an attach /
 * output request for a background process. */
struct wr_watcher {
  struct wr_watcher *next;
  struct wr_proc *p;
  wr_http_req_t *req;
  bool frames;                /* upgraded "warren-exec" stream; else NDJSON */
  bool interactive;           /* accepts STDIN/RESIZE/SIGNAL frames */
  bool follow;                /* stays for live output */
  bool input_paused;          /* stdin is full: client not read */
  struct wr_frame_decoder in; /* frames from the client */
};

/* Where a background process's kept output is on disk (outlog.c). */
struct wr_outfile {
  char inc[48];     /* the init that spawned it: "PID-STARTTIME" */
  uint64_t saved;   /* output offset the files have (or skipped) up to */
  uint64_t seq;     /* the segment being written */
  size_t seg_bytes; /* its size; 0: the next write starts it */
  bool any;         /* some segment exists */
  uint64_t turn;    /* when the writer last took from it */
};

struct wr_proc {
  struct wr_proc *next;
  struct wr_sandbox *sb;
  uint32_t proc_id; /* 0 until init has spawned it */
  int32_t pid;
  char *tag; /* background processes */
  char **argv;
  bool tty;
  bool background;
  bool running;
  bool have_status;
  bool timed_out;
  bool killed_on_abort;
  int status;
  int64_t started_ms, finished_ms;
  struct wr_outsrc out[2];
  struct wr_inwriter in;
  struct wr_chunk *chunks, *last_chunk;
  size_t held;
  uint64_t total;
  struct wr_outfile file;
  struct wr_watcher *watchers;
  uv_timer_t timer;
  bool timer_init;
  int refs;
  int handles; /* uv handles still open */
  bool gone;   /* removed from the sandbox's list */
};

struct wr_proc *wr_proc_new(struct wr_sandbox *sb);
void wr_proc_unref(struct wr_proc *p);
struct wr_proc *wr_proc_find_tag(struct wr_sandbox *sb, const char *tag);
/* Start reading the output fds (owned by the proc from now on). */
void wr_proc_set_outputs(struct wr_proc *p, int out_fd, int err_fd);
/* The fd that feeds stdin (owned); for a tty, a duplicate of the master. */
void wr_proc_set_input(struct wr_proc *p, int fd);
void wr_proc_write_input(struct wr_proc *p, const void *data, size_t len);
void wr_proc_close_input(struct wr_proc *p);
/* Send a signal through init (to the process group). */
void wr_proc_signal(struct wr_proc *p, int sig);
json_t *wr_proc_json(const struct wr_proc *p);
json_t *wr_proc_exit_json(const struct wr_proc *p);
/* Add a watcher for req; replays retained output from `offset`. */
struct wr_watcher *wr_watch(struct wr_proc *p, wr_http_req_t *req, bool frames,
                            bool interactive, bool follow, uint64_t offset);
/* Send one frame to an upgraded request. */
void wr_frame_send(wr_http_req_t *req, int type, const void *data, size_t len);
/* Feed bytes from an upgraded client; returns -1 on a protocol error. */
int wr_watcher_input(struct wr_watcher *w, const char *data, size_t len);
/* Drop a process record (after exit, or on FORGET). */
void wr_proc_remove(struct wr_proc *p);

void wr_api_exec(wr_http_req_t *req, void *ctx);
void wr_api_proc_list(wr_http_req_t *req, void *ctx);
void wr_api_proc_get(wr_http_req_t *req, void *ctx);
void wr_api_proc_output(wr_http_req_t *req, void *ctx);
void wr_api_proc_signal(wr_http_req_t *req, void *ctx);
void wr_api_proc_delete(wr_http_req_t *req, void *ctx);

/* EXIT event from init. */
void wr_procs_on_exit(struct wr_sandbox *sb, const struct wr_init_exit *ev);
/* The sandbox stopped or its init connection closed: end every session. */
void wr_procs_sandbox_gone(struct wr_sandbox *sb);
/* After a daemon restart: take background processes back from init. */
void wr_procs_recover(struct wr_sandbox *sb);
/* Drop every process record (their files stay: a stopping daemon, or a
 * sandbox whose directory goes). */
void wr_procs_free_all(struct wr_sandbox *sb);
/* Drop every process record and their kept output on disk (a new run). */
void wr_procs_forget_all(struct wr_sandbox *sb);

/* ---- kept output on disk (outlog.c) ------------------------------------ */

/*
 * Loop thread. Every call is a no-op once the sandbox's writer is closed,
 * and the ones that remove files are no-ops while the daemon stops (the
 * next daemon takes the files over).
 */
/* Note which init spawns the process (at wr_proc_new). */
void wr_outlog_proc_init(struct wr_proc *p);
/* The process has new output to write (background processes). */
void wr_outlog_kick(struct wr_sandbox *sb);
/* The process's record goes: remove its files. */
void wr_outlog_forget(struct wr_proc *p);
/* Every process of the sandbox goes (a new start): remove every file. */
void wr_outlog_clear(struct wr_sandbox *sb);
/* The daemon stops: queue what is not written yet, so that it is, before
 * the loop ends. */
void wr_outlog_flush(struct wr_sandbox *sb);
/* The sandbox is being removed: no more jobs; `then` runs once the one
 * running (if any) is done, before the directory goes. */
void wr_outlog_close(struct wr_sandbox *sb,
                     void (*then)(struct wr_sandbox *sb, void *arg), void *arg);
/* After a daemon restart: read back what the running init's processes
 * kept, then call `then` (which asks init for its processes). */
void wr_outlog_recover(struct wr_sandbox *sb,
                       void (*then)(struct wr_sandbox *sb));
/* A process init handed back: give it the output read back for it. */
void wr_outlog_adopt(struct wr_proc *p);
/* Init listed all its processes (or could not): drop what no process
 * took and, when `listed`, remove its files. */
void wr_outlog_recovered(struct wr_sandbox *sb, bool listed);

/*
 * The file format (pure, for tests and fuzzing): a segment is a run of
 * records, each a WR_OUTLOG_HDR-byte header ("wo", the stream, 0, the
 * length and the output offset, little endian) and that many bytes.
 */
#define WR_OUTLOG_HDR 16
typedef void (*wr_outlog_record_fn)(void *arg, int stream, uint64_t offset,
                                    const char *data, size_t len);
/* Append one record. */
void wr_outlog_put(wr_buf_t *b, int stream, uint64_t offset, const void *data,
                   size_t len);
/* Call fn for each well-formed record from the start of buf, whose offsets
 * must not go back below *end (nor each other); stop at the first that is
 * not. *end gets the offset after the last record taken. Returns how many
 * bytes were taken. */
size_t wr_outlog_parse(const void *buf, size_t len, uint64_t *end,
                       wr_outlog_record_fn fn, void *arg);

/* ---- files (files_api.c) ------------------------------------------------ */

void wr_api_files_read(wr_http_req_t *req, void *ctx);
void wr_api_files_write(wr_http_req_t *req, void *ctx);
void wr_api_files_stat(wr_http_req_t *req, void *ctx);
void wr_api_files_list(wr_http_req_t *req, void *ctx);
void wr_api_files_mkdir(wr_http_req_t *req, void *ctx);
void wr_api_files_delete(wr_http_req_t *req, void *ctx);
void wr_api_files_move(wr_http_req_t *req, void *ctx);
void wr_api_files_chmod(wr_http_req_t *req, void *ctx);
void wr_api_files_archive_get(wr_http_req_t *req, void *ctx);
void wr_api_files_archive_put(wr_http_req_t *req, void *ctx);

/* ---- users (users.c) ----------------------------------------------------- */

struct wr_user {
  uint32_t uid, gid;
  uint32_t groups[WR_INIT_MAX_GROUPS];
  uint32_t ngroups;
  char home[256];
  char name[64];
};

/* Resolve "root", "name", "uid" or "uid:gid" against /etc/passwd and
 * /etc/group inside the sandbox's root. */
int wr_user_resolve(int rootfd, const char *spec, struct wr_user *out,
                    wr_error_t *err);

/* ---- network: policy, secrets, ports (network.c) ------------------------ */

/* Make the egress engine (warren's CA on first start), load the policy,
 * secrets and port publications from the store. From wr_daemon_init. */
int wr_network_init(struct wr_daemon *d, wr_error_t *err);
/* Close every listener (daemon shutdown); wr_network_free after the loop
 * has let the handles close. */
void wr_network_shutdown(struct wr_daemon *d);
void wr_network_free(struct wr_daemon *d);
/* A sandbox's init is running: start its proxy and DNS server on the
 * listeners init holds (listen_fds: taken over, see wr_net_attach) and
 * with its network namespace (netns_fd borrowed). Before its first
 * process. */
int wr_network_sandbox_up(struct wr_sandbox *sb, int netns_fd,
                          const int listen_fds[WR_NET_NFDS], wr_error_t *err);
/* The sandbox stopped: close its listeners and connections. */
void wr_network_sandbox_down(struct wr_sandbox *sb);
/* The sandbox is being removed: drop its rules and publications. */
void wr_network_sandbox_removed(struct wr_sandbox *sb);
/* Variables every process in sb gets: the proxy (HTTP_PROXY, HTTPS_PROXY,
 * NO_PROXY in both cases), the CA bundle paths, and a placeholder for
 * each secret's variables. NULL-ended "K=V" list (caller frees). */
char **wr_network_env(struct wr_sandbox *sb);
/* Whether NAME is one of the variables wr_network_env always sets (the
 * proxy's and the CA's), which nothing else may set. */
bool wr_network_sets_env(const char *name);
/* Add "ports" (the sandbox's publications) to a sandbox object. */
void wr_network_sandbox_json_extras(const struct wr_sandbox *sb, json_t *json);
/* warren's CA certificate (PEM), for the sandbox's trust store. */
const char *wr_network_ca_pem(struct wr_daemon *d);
/* The scanner of the extra CAs sandboxes trust: thread-safe, so a start
 * job scans with it on its worker thread (wr_trust_scan). */
struct wr_trust *wr_network_trust(struct wr_daemon *d);
/* {"count","cas":[{subject,file,not_after,source}],"skipped":[...]}: the
 * extra CAs as the last scan found them (no I/O). */
json_t *wr_network_trust_json(struct wr_daemon *d);
/* The resolver's counters, for GET /v1/info: {"queries":{"A","AAAA"},
 * "hits", "coalesced", "failures" (the same), "hosts", "limited",
 * "entries", "inflight"}. */
json_t *wr_network_resolver_json(struct wr_daemon *d);
/* What the resolver's cache holds for a normalised name: {"queries": N
 * (upstream lookups for it, both families), "A": ENTRY|null, "AAAA":
 * ENTRY|null}, ENTRY being {"addresses", "age_s", "ttl_s", "ttl_left_s",
 * "fresh", "inflight", "queries", "error"}. */
json_t *wr_network_cached_json(struct wr_daemon *d, const char *host);
/* The registry URL the host's npm is configured with, or NULL when it is
 * unknown; *pending while npm is still being asked (at daemon start). */
const char *wr_network_npm_registry_url(struct wr_daemon *d, bool *pending);

void wr_api_policy_get(wr_http_req_t *req, void *ctx);
void wr_api_policy_init(wr_http_req_t *req, void *ctx);
void wr_api_policy_rule_add(wr_http_req_t *req, void *ctx);
void wr_api_policy_rule_delete(wr_http_req_t *req, void *ctx);
void wr_api_policy_check(wr_http_req_t *req, void *ctx);
void wr_api_policy_log(wr_http_req_t *req, void *ctx);
void wr_api_secret_list(wr_http_req_t *req, void *ctx);
void wr_api_secret_put(wr_http_req_t *req, void *ctx);
void wr_api_secret_delete(wr_http_req_t *req, void *ctx);
void wr_api_ports_list(wr_http_req_t *req, void *ctx);
void wr_api_ports_publish(wr_http_req_t *req, void *ctx);
void wr_api_ports_unpublish(wr_http_req_t *req, void *ctx);

/* ---- this root among the host's (roots.c) ------------------------------- */

/* Take the root's lock, or refuse naming the warrend that holds it. */
int wr_daemon_lock_root(struct wr_daemon *d, wr_error_t *err);
/* Refuse a socket another process listens on, naming it. */
int wr_daemon_check_socket(struct wr_daemon *d, wr_error_t *err);
/* The root's id and cgroup parent, and its record and slots in the host's
 * registry (which it keeps open). */
int wr_daemon_register_root(struct wr_daemon *d, wr_error_t *err);
/* A uid slot no sandbox on the host has, for a new sandbox. */
int wr_daemon_claim_slot(struct wr_daemon *d, const char *sandbox_id,
                         uint32_t *slot, wr_error_t *err);
/* The sandbox is gone from the store: its slot is free again. */
void wr_daemon_release_slot(struct wr_daemon *d, const char *sandbox_id);

/* ---- small helpers (daemon.c) ------------------------------------------- */

/* Parse and strictly unpack a JSON request body; replies 400 on failure. */
json_t *wr_req_json(wr_http_req_t *req, const struct wr_json_field *fields,
                    size_t n);
/* Query flag: "true"/"1"/"" -> true, "false"/"0" -> false; others 400. */
int wr_req_bool(wr_http_req_t *req, const char *name, bool def, bool *out);
/* Query number in [min, max], def when absent; others 400. */
int wr_req_u64(wr_http_req_t *req, const char *name, uint64_t def, uint64_t min,
               uint64_t max, uint64_t *out);
/* Run fn on the threadpool, then done on the loop. */
struct wr_job;
typedef void (*wr_job_fn)(struct wr_job *job);
struct wr_job {
  uv_work_t work;
  struct wr_daemon *d;
  wr_job_fn fn;   /* worker thread */
  wr_job_fn done; /* loop thread; frees the job */
  void *arg;
  wr_error_t err;
  int result;
};
void wr_job_queue(struct wr_daemon *d, struct wr_job *job);

/* ---- agent kits (kits.c) ------------------------------------------------ */

/* What `warren run` starts: data/kits/NAME.json or ROOT/kits/NAME.json
 * (docs/agents.md has the format). Every field is validated. */
struct wr_kit {
  char *name, *description; /* description: "" when the file has none */
  char *npm;                /* package providing command[0], or NULL */
  char *secret;             /* secret service the agent uses, or NULL */
  char *source;             /* the file it came from */
  char **command;           /* argv, at least one entry */
  char **env;               /* "K=V", sorted, never NULL */
  char **allow;             /* policy host patterns, never NULL */
};

/* ROOT/kits/NAME.json, else DATA/kits/NAME.json. err->code ENOENT: no
 * such kit (the message lists the kits there are); EINVAL: a bad name
 * or a broken file (the message names the file and the field). */
int wr_kit_load(struct wr_daemon *d, const char *name, struct wr_kit *out,
                wr_error_t *err);
void wr_kit_free(struct wr_kit *k);
json_t *wr_kit_json(const struct wr_kit *k);
/* The same search over the given directories (NULL-ended), in order. */
int wr_kit_find(char *const *dirs, const char *name, struct wr_kit *out,
                wr_error_t *err);
/* Parse one kit file's text; source names the file in messages. */
int wr_kit_parse(const char *name, const char *source, const char *text,
                 size_t len, struct wr_kit *out, wr_error_t *err);
/* Kit names: [a-z0-9][a-z0-9._-]{0,62}, as sandbox names. */
bool wr_kit_name_valid(const char *name);
/* An npm package spec: "name", "@scope/name", optionally "@VERSION". */
bool wr_kit_npm_valid(const char *spec);
/* The kit names found in dirs, sorted, without duplicates. */
char **wr_kit_names(char *const *dirs);

void wr_api_kit_list(wr_http_req_t *req, void *ctx); /* GET /v1/kits */
void wr_api_kit_get(wr_http_req_t *req, void *ctx);  /* GET /v1/kits/{name} */

/* ---- workspaces at create (workspaces.c) --------------------------------- */

/* A workspace a client asks for, and what checking it found. */
struct wr_ws_check {
  const char *path, *mode; /* as asked (borrowed); mode "direct"/"clone" */
  const char *state_root;  /* the daemon's --root (borrowed) */
  char *real;              /* the canonical path (owned) */
  uint32_t uid, gid;       /* its owner */
  struct wr_ws_identity id;
};

/* The fields of a create request's "workspace" object, checked without
 * touching the disk (loop thread): c->path and c->mode. */
int wr_ws_check_request(json_t *ws, struct wr_ws_check *c, wr_error_t *err);
/* Everything else, on a worker thread (it reads a directory the client
 * names, which may be inside another sandbox's workspace): a directory,
 * not the host's machinery or warren's state, not root's, and in clone
 * mode a git repository with a commit (src/common/gitrepo.c), the same
 * refusals whichever client asks; fills real, uid, gid and id. Errors
 * are EINVAL, with a message for the client. */
int wr_ws_check_host(struct wr_ws_check *c, wr_error_t *err);
void wr_ws_check_clear(struct wr_ws_check *c);

/* ---- workspace diff (diff_api.c) ----------------------------------------- */

/* GET /v1/sandboxes/{id}/diff: changes in a direct-mode workspace since
 * the sandbox was created. */
void wr_api_sandbox_diff(wr_http_req_t *req, void *ctx);

#endif
