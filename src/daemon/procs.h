/*
 * Internal to the daemon module: processes spawned through warren-init,
 * exec and background processes, and the clients that follow them
 * (exec.c, procs.c). Loop thread.
 */
#ifndef WR_DAEMON_PROCS_H
#define WR_DAEMON_PROCS_H

#include <jansson.h>

#include "daemon/daemon.h"
#include "daemon/outlog.h"
#include "init/init.h"

struct wr_sandbox;

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

/* Someone inside the daemon following a process (templates.c): called
 * with each piece of output, then once with data NULL when it has ended
 * (have_status says whether its exit status is known). */
typedef void (*wr_proc_observer_fn)(struct wr_proc *p, int stream,
                                    const char *data, size_t len, void *arg);

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
  /* Who follows it inside the daemon (templates.c), or NULL. */
  wr_proc_observer_fn observer;
  void *observer_arg;
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

/*
 * A process the daemon starts itself (templates.c: a build's RUN, a
 * template's start command): a background process (so `warren ps` and
 * `logs` show it) tagged `tag`, run as `user` in `cwd` with the
 * sandbox's environment and `env` over it. started is called once: with
 * the process (its record belongs to the sandbox) or with why it could
 * not start (p NULL). -1 with err when refused at once.
 */
struct wr_exec_opts {
  char *const *argv;
  char *const *env; /* or NULL */
  const char *cwd;  /* NULL: the sandbox's workdir */
  const char *user; /* NULL: root */
  const char *tag;
};
typedef void (*wr_exec_started_fn)(struct wr_proc *p, void *arg,
                                   const wr_error_t *err);
int wr_exec_start(struct wr_sandbox *sb, const struct wr_exec_opts *o,
                  wr_exec_started_fn started, void *arg, wr_error_t *err);

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

#endif
