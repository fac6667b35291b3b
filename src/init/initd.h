/*
 * warren-init's own parts behind the protocol: its options, the setup
 * pipeline, the table of tracked processes, spawning, the queue of
 * datagrams waiting for the daemon, and the event loop.
 *
 * Internal to src/init: only warren-init's main and the files here include
 * it. The daemon links libinit.a for the protocol (init.h) and never calls
 * these, so the linker leaves them out of warrend.
 */
#ifndef WR_INITD_H
#define WR_INITD_H

#include "init/init.h"

/* ---- options and setup (setup.c) -------------------------------------- */

struct wr_init_opts {
  int ctl_fd;         /* listening SOCK_SEQPACKET socket */
  int seccomp_fd;     /* memfd with a BPF program, or -1 */
  int userns_fd;      /* user namespace to join, or -1 */
  uint64_t nofile;    /* RLIMIT_NOFILE, soft = hard */
  uint64_t nproc;     /* RLIMIT_NPROC, or 0 to leave it */
  uint64_t keep_caps; /* bit n set: keep capability n in the bounding set */
};

/* Parse warren-init's argv strictly: unknown or repeated options, missing
 * values and bad numbers are errors. */
int wr_init_parse_args(int argc, char **argv, struct wr_init_opts *o,
                       wr_error_t *err);
/* Run the setup pipeline on the calling process and return a signalfd for
 * every catchable signal (all of them blocked). Closes the seccomp and
 * userns fds. */
int wr_init_setup(const struct wr_init_opts *o, int *sig_fd, wr_error_t *err);

/* ---- tracked processes (procs.c) -------------------------------------- */

struct wr_init_rec {
  uint32_t proc_id;
  pid_t pid;
  uint32_t flags; /* spawn flags */
  bool running;   /* not yet reaped */
  int status;     /* wait status once reaped */
  int64_t started_ms;
  int kept[2];    /* a background process's output fds */
  unsigned nkept; /* 1 with TTY (the pty master), 2 without, 0 if none */
  char tag[WR_INIT_TAG_MAX + 1];
  char cmd[WR_INIT_CMD_MAX + 1];
};

/* Records in spawn order. proc_ids grow and are never 0. */
struct wr_init_table {
  struct wr_init_rec *recs;
  size_t n, cap;
  uint32_t last_id;
};

void wr_init_table_free(struct wr_init_table *t);
/* Add a record for a process that just started; the table gives it its
 * proc_id, start time, tag and command summary. The pointer is valid
 * until the next add or remove. */
struct wr_init_rec *wr_init_table_add(struct wr_init_table *t, pid_t pid,
                                      const struct wr_init_spawn *req);
struct wr_init_rec *wr_init_table_find(struct wr_init_table *t,
                                       uint32_t proc_id);
/* The running record with this pid; NULL for orphans and forgotten ones. */
struct wr_init_rec *wr_init_table_find_running(struct wr_init_table *t,
                                               pid_t pid);
/* Drop a record and close the fds kept for it. */
void wr_init_table_remove(struct wr_init_table *t, struct wr_init_rec *r);
/* A record as one LISTED entry. */
void wr_init_rec_to_proc(const struct wr_init_rec *r, struct wr_init_proc *p);

/* ---- spawning (spawn.c) ----------------------------------------------- */

/* Start the process `req` asks for, with stdio from fds (the SPAWN's
 * received fds, borrowed) or a new pty. Returns once the child has exec'd
 * (0: reply->pid set, and *master holds the pty master with TTY, else -1)
 * or failed (-1: reply->err and reply->stage say where). */
int wr_init_spawn_start(const struct wr_init_spawn *req, const int *fds,
                        struct wr_init_spawned *reply, int *master);

/* ---- datagrams waiting for the daemon (outq.c) ------------------------ */

struct wr_init_outmsg;

/* A bounded FIFO of encoded datagrams with their own fd duplicates. */
struct wr_init_outq {
  struct wr_init_outmsg *head;
  struct wr_init_outmsg **tail;
  size_t bytes;
};

void wr_init_outq_init(struct wr_init_outq *q);
/* Drop every queued datagram and close its fds. */
void wr_init_outq_clear(struct wr_init_outq *q);
bool wr_init_outq_empty(const struct wr_init_outq *q);
/* Queue a copy of msg with duplicates of fds. Fails (EMSGSIZE or the dup's
 * errno) when the queue would pass its bound or fds run out. */
int wr_init_outq_push(struct wr_init_outq *q, const void *msg, size_t len,
                      const int *fds, size_t nfds, wr_error_t *err);
/* Send queued datagrams on a non-blocking socket until it is full (0, some
 * may remain) or empty (0); -1 when the socket failed. */
int wr_init_outq_flush(struct wr_init_outq *q, int sock, wr_error_t *err);

/* ---- the event loop (loop.c) ------------------------------------------ */

/*
 * warren-init's state: one per process, made by main and used only by the
 * single thread of the loop.
 */
struct wr_init_loop {
  int listen_fd;
  int conn_fd;       /* the daemon's connection, or -1 */
  unsigned conn_gen; /* changes whenever conn_fd does */
  int sig_fd;
  bool pid1;         /* init of a pid namespace: kill(-1) is the sandbox */
  bool stopping;     /* a terminating signal came from the host */
  bool has_children; /* as of the last reap */
  struct wr_init_table procs;
  struct wr_init_outq out;
  char *rx; /* WR_INIT_MAX_MSG bytes for the datagram being read */
};

/* The loop owns listen_fd and sig_fd from here on. */
void wr_init_loop_init(struct wr_init_loop *l, int listen_fd, int sig_fd);
void wr_init_loop_free(struct wr_init_loop *l);
/* Serve until a terminating signal came and no child is left (0), or poll
 * itself fails (-1). */
int wr_init_loop_run(struct wr_init_loop *l, wr_error_t *err);

#endif
