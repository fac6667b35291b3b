/*
 * warren-init's event loop: one thread and one poll() over the signalfd,
 * the listening socket and the daemon's connection (at most one; a new
 * connection replaces the old, since the daemon may have restarted). It
 * reaps every child, answers the daemon's requests and tells it when a
 * tracked process ends. Nothing here ever waits on the daemon: replies go
 * out on a non-blocking socket, through a bounded queue when it is full.
 */
#include "init/initd.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define MAX_SIGNAL 64

/* A request as received: the header, its payload in the loop's buffer,
 * and the fds that came with it (-1 once a handler took one). */
struct request {
  struct wr_init_hdr hdr;
  const void *payload;
  int fds[WR_INIT_MAX_FDS];
  size_t nfds;
};

/* A handler answers its request itself and returns -1, or returns the
 * errno (0 for success) that the loop sends back as RESULT. */
typedef int (*handler_fn)(struct wr_init_loop *l, struct request *rq);

void wr_init_loop_init(struct wr_init_loop *l, int listen_fd, int sig_fd) {
  *l = (struct wr_init_loop){
      .listen_fd = listen_fd,
      .conn_fd = -1,
      .sig_fd = sig_fd,
      .pid1 = getpid() == 1,
  };
  wr_init_outq_init(&l->out);
  l->rx = xmalloc(WR_INIT_MAX_MSG);
}

void wr_init_loop_free(struct wr_init_loop *l) {
  wr_init_outq_clear(&l->out);
  wr_init_table_free(&l->procs);
  if (l->conn_fd >= 0)
    close(l->conn_fd);
  close(l->listen_fd);
  close(l->sig_fd);
  free(l->rx);
  l->rx = NULL;
}

/* ---- talking to the daemon -------------------------------------------- */

/* Forget the daemon's connection and whatever still waited for it. `why`
 * is logged; NULL for the routine cases (the daemon closed it, or a new
 * connection replaced it). */
static void drop_daemon(struct wr_init_loop *l, const char *why) {
  if (l->conn_fd < 0)
    return;
  if (why != NULL)
    wr_info("dropping the daemon's connection: %s", why);
  close(l->conn_fd);
  l->conn_fd = -1;
  l->conn_gen++;
  wr_init_outq_clear(&l->out);
}

/* The daemon closed its end: routine, not worth a log line. */
static const char *unless_gone(const wr_error_t *err) {
  return err->code == EPIPE || err->code == ECONNRESET ? NULL : err->msg;
}

/* Send one datagram now if the socket takes it, else queue it behind the
 * others; a daemon that lets the queue overflow is dropped. */
static void send_msg(struct wr_init_loop *l, const wr_buf_t *msg,
                     const int *fds, size_t nfds) {
  wr_error_t err = {0};

  if (l->conn_fd < 0)
    return;
  if (wr_init_outq_empty(&l->out)) {
    if (wr_init_send(l->conn_fd, msg->data, msg->len, fds, nfds, &err) == 0)
      return;
    if (err.code != EAGAIN) {
      drop_daemon(l, unless_gone(&err));
      return;
    }
  }
  if (wr_init_outq_push(&l->out, msg->data, msg->len, fds, nfds, &err) < 0)
    drop_daemon(l, err.msg);
}

static void send_simple(struct wr_init_loop *l, uint16_t type, uint32_t id,
                        const void *payload, uint32_t len, const int *fds,
                        uint16_t nfds) {
  wr_buf_t b;

  wr_buf_init(&b);
  if (wr_init_encode_simple(&b, type, id, payload, len, nfds) == 0)
    send_msg(l, &b, fds, nfds);
  wr_buf_free(&b);
}

static void reply_result(struct wr_init_loop *l, uint32_t id, int err) {
  struct wr_init_result r = {err};

  send_simple(l, WR_INIT_RESULT, id, &r, sizeof(r), NULL, 0);
}

/* ---- children --------------------------------------------------------- */

/* A tracked process ended: tell the daemon, and drop the record unless it
 * is a background one, which stays (with its fds) until FORGET. */
static void on_reaped(struct wr_init_loop *l, pid_t pid, int status) {
  struct wr_init_rec *r = wr_init_table_find_running(&l->procs, pid);
  struct wr_init_exit ev;

  if (r == NULL)
    return; /* an orphan, or a process the daemon forgot */
  r->running = false;
  r->status = status;
  ev = (struct wr_init_exit){r->proc_id, pid, status};
  send_simple(l, WR_INIT_EXIT, 0, &ev, sizeof(ev), NULL, 0);
  if (!(r->flags & WR_SPAWN_BACKGROUND))
    wr_init_table_remove(&l->procs, r);
}

/* Reap every zombie, orphans included, and note whether any child is
 * left: SIGCHLDs merge, so one signal may stand for many exits. */
static void reap(struct wr_init_loop *l) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);

    if (pid > 0) {
      on_reaped(l, pid, status);
      continue;
    }
    if (pid < 0 && errno == EINTR)
      continue;
    l->has_children = pid == 0 || errno != ECHILD;
    return;
  }
}

/*
 * Signal every process in the sandbox. As PID 1 of the sandbox's pid
 * namespace that is kill(-1). Anywhere else kill(-1) would reach every
 * process the caller may signal (for root, the whole host), so outside
 * PID 1 it means the group of each running tracked process.
 */
static int signal_all(struct wr_init_loop *l, int sig) {
  if (l->pid1)
    return kill(-1, sig) < 0 && errno != ESRCH ? errno : 0;
  for (size_t i = 0; i < l->procs.n; i++) {
    const struct wr_init_rec *r = &l->procs.recs[i];

    if (r->running && kill(-r->pid, sig) < 0)
      kill(r->pid, sig);
  }
  return 0;
}

static bool is_terminating(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

static bool is_forwarded(int sig) {
  return is_terminating(sig) || sig == SIGUSR1 || sig == SIGUSR2;
}

/*
 * A signal for init itself. Forwarded ones come from the host: ssi_pid is
 * 0 for a sender outside init's pid namespace. Because init blocks its
 * signals instead of leaving them at SIG_DFL, a sandbox process can queue
 * one for PID 1 too; that one is ignored, so nothing inside can make init
 * stop the sandbox.
 */
static void on_signal(struct wr_init_loop *l,
                      const struct signalfd_siginfo *si) {
  int sig = (int)si->ssi_signo;

  if (!is_forwarded(sig))
    return;
  if (l->pid1 && si->ssi_pid != 0) {
    wr_debug("ignoring signal %d from pid %u", sig, si->ssi_pid);
    return;
  }
  signal_all(l, sig);
  if (is_terminating(sig))
    l->stopping = true;
}

static void on_signals(struct wr_init_loop *l) {
  struct signalfd_siginfo si;

  while (read(l->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
    on_signal(l, &si);
  reap(l);
}

/* ---- requests --------------------------------------------------------- */

static int handle_hello(struct wr_init_loop *l, struct request *rq) {
  struct wr_init_hello_ok ok = {WR_INIT_VERSION, (uint32_t)l->procs.n};

  if (rq->hdr.len != 0)
    return EINVAL;
  send_simple(l, WR_INIT_HELLO_OK, rq->hdr.id, &ok, sizeof(ok), NULL, 0);
  return -1;
}

/* Record a started process. A background one keeps its output fds (the
 * daemon's read ends, or a duplicate of the pty master) so that a later
 * daemon can take them back and no writer meets EPIPE meanwhile. */
static void track(struct wr_init_loop *l, const struct wr_init_spawn *req,
                  struct request *rq, struct wr_init_spawned *reply,
                  int master) {
  struct wr_init_rec *r = wr_init_table_add(&l->procs, reply->pid, req);

  reply->proc_id = r->proc_id;
  l->has_children = true;
  if (!(req->flags & WR_SPAWN_BACKGROUND))
    return;
  if (req->flags & WR_SPAWN_TTY) {
    r->kept[0] = fcntl(master, F_DUPFD_CLOEXEC, 3);
    r->nkept = r->kept[0] >= 0 ? 1 : 0;
    return;
  }
  r->kept[0] = steal_fd(&rq->fds[3]);
  r->kept[1] = steal_fd(&rq->fds[4]);
  r->nkept = 2;
}

static void spawn_and_reply(struct wr_init_loop *l, struct request *rq,
                            const struct wr_init_spawn *req) {
  struct wr_init_spawned reply = {0};
  _cleanup_close_ int master = -1;

  if (l->procs.n >= WR_INIT_MAX_PROCS) {
    reply.err = EAGAIN;
    wr_strlcpy(reply.stage, "limit", sizeof(reply.stage));
  } else if (wr_init_spawn_start(req, rq->fds, &reply, &master) == 0) {
    track(l, req, rq, &reply, master);
  }
  send_simple(l, WR_INIT_SPAWNED, rq->hdr.id, &reply, sizeof(reply), &master,
              master >= 0 ? 1 : 0);
}

static int handle_spawn(struct wr_init_loop *l, struct request *rq) {
  struct wr_init_spawn req;
  wr_error_t err = {0};
  int result = -1;

  if (wr_init_decode_spawn(rq->payload, rq->hdr.len, &req, &err) < 0) {
    wr_info("bad request: %s", err.msg);
    return EINVAL;
  }
  if (rq->nfds != wr_init_spawn_nfds(req.flags))
    result = EINVAL;
  else
    spawn_and_reply(l, rq, &req);
  free(req.argv);
  free(req.env);
  return result;
}

static int handle_signal(struct wr_init_loop *l, struct request *rq) {
  const uint32_t known = WR_SIGNAL_GROUP | WR_SIGNAL_ALL;
  struct wr_init_signal s;
  struct wr_init_rec *r;

  if (wr_init_decode_fixed(rq->payload, rq->hdr.len, &s, sizeof(s), NULL) < 0 ||
      s.sig < 1 || s.sig > MAX_SIGNAL || (s.flags & ~known))
    return EINVAL;
  if (s.flags & WR_SIGNAL_ALL)
    return signal_all(l, s.sig);
  r = wr_init_table_find(&l->procs, s.proc_id);
  if (r == NULL || !r->running)
    return ESRCH;
  if (kill((s.flags & WR_SIGNAL_GROUP) ? -r->pid : r->pid, s.sig) < 0)
    return errno;
  return 0;
}

static int handle_forget(struct wr_init_loop *l, struct request *rq) {
  struct wr_init_forget f;
  struct wr_init_rec *r;

  if (wr_init_decode_fixed(rq->payload, rq->hdr.len, &f, sizeof(f), NULL) < 0)
    return EINVAL;
  r = wr_init_table_find(&l->procs, f.proc_id);
  if (r == NULL)
    return ESRCH;
  wr_init_table_remove(&l->procs, r);
  return 0;
}

static void send_listed(struct wr_init_loop *l, uint32_t id,
                        const struct wr_init_proc *procs, size_t n,
                        const int *fds, size_t nfds, bool more) {
  wr_buf_t b;
  wr_error_t err = {0};

  wr_buf_init(&b);
  if (wr_init_encode_listed(&b, id, procs, (uint32_t)n, more, (uint16_t)nfds,
                            &err) == 0)
    send_msg(l, &b, fds, nfds);
  else
    wr_err("encode LISTED: %s", err.msg);
  wr_buf_free(&b);
}

/* LISTED, in as many datagrams as the entries and their fds need. The fds
 * sent are init's own; the kernel passes duplicates, and init keeps its
 * copies until FORGET. */
static int handle_list(struct wr_init_loop *l, struct request *rq) {
  _cleanup_free_ struct wr_init_proc *batch = NULL;
  int fds[WR_INIT_MAX_FDS];
  size_t n = 0, nfds = 0;

  if (rq->hdr.len != 0)
    return EINVAL;
  batch = xcalloc(WR_MIN(l->procs.n, WR_INIT_LISTED_MAX), sizeof(*batch));
  for (size_t i = 0; i < l->procs.n; i++) {
    const struct wr_init_rec *r = &l->procs.recs[i];

    if (n == WR_INIT_LISTED_MAX || nfds + r->nkept > WR_INIT_MAX_FDS) {
      send_listed(l, rq->hdr.id, batch, n, fds, nfds, true);
      n = nfds = 0;
    }
    wr_init_rec_to_proc(r, &batch[n++]);
    for (unsigned k = 0; k < r->nkept; k++)
      fds[nfds++] = r->kept[k];
  }
  send_listed(l, rq->hdr.id, batch, n, fds, nfds, false);
  return -1;
}

static handler_fn handler_for(uint16_t type) {
  switch (type) {
  case WR_INIT_HELLO:
    return handle_hello;
  case WR_INIT_SPAWN:
    return handle_spawn;
  case WR_INIT_SIGNAL:
    return handle_signal;
  case WR_INIT_LIST:
    return handle_list;
  case WR_INIT_FORGET:
    return handle_forget;
  default:
    return NULL; /* a reply type: not a request */
  }
}

static void close_request_fds(struct request *rq) {
  for (size_t i = 0; i < rq->nfds; i++)
    if (rq->fds[i] >= 0)
      close(rq->fds[i]);
}

/* Read and answer one request. A datagram whose header does not hold up
 * ends the connection; anything else malformed gets RESULT EINVAL. The
 * fds that came with it are closed unless a handler kept them. */
static void on_request(struct wr_init_loop *l) {
  struct request rq = {0};
  wr_error_t err = {0};
  ssize_t n;
  handler_fn handler;
  int result;

  n = wr_init_recv(l->conn_fd, l->rx, WR_INIT_MAX_MSG, rq.fds, &rq.nfds, &err);
  if (n < 0 && err.code == EAGAIN)
    return;
  if (n <= 0) {
    drop_daemon(l, n == 0 ? NULL : unless_gone(&err));
    return;
  }
  if (wr_init_decode_hdr(l->rx, (size_t)n, rq.nfds, &rq.hdr, &rq.payload,
                         &err) < 0) {
    close_request_fds(&rq);
    drop_daemon(l, err.msg);
    return;
  }
  handler = handler_for(rq.hdr.type);
  result = handler != NULL ? handler(l, &rq) : EINVAL;
  if (result >= 0)
    reply_result(l, rq.hdr.id, result);
  close_request_fds(&rq);
}

/* ---- the loop --------------------------------------------------------- */

static void on_accept(struct wr_init_loop *l) {
  int fd = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

  if (fd < 0) {
    if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR)
      wr_warn("accept: %s", strerror(errno));
    return;
  }
  drop_daemon(l, NULL);
  l->conn_fd = fd;
  l->conn_gen++;
}

static void on_conn(struct wr_init_loop *l, short revents) {
  wr_error_t err = {0};

  if ((revents & POLLOUT) &&
      wr_init_outq_flush(&l->out, l->conn_fd, &err) < 0) {
    drop_daemon(l, unless_gone(&err));
    return;
  }
  if (revents & POLLIN)
    on_request(l);
  else if (revents & (POLLHUP | POLLERR | POLLNVAL))
    drop_daemon(l, NULL);
}

/* While replies wait in the queue, init reads no further request: the
 * daemon's own pace bounds what init holds for it. */
int wr_init_loop_run(struct wr_init_loop *l, wr_error_t *err) {
  reap(l);
  while (!l->stopping || l->has_children) {
    struct pollfd p[3] = {
        {l->sig_fd, POLLIN, 0},
        {l->listen_fd, POLLIN, 0},
        {l->conn_fd, wr_init_outq_empty(&l->out) ? POLLIN : POLLOUT, 0},
    };
    unsigned gen = l->conn_gen;

    if (poll(p, WR_ARRAY_SIZE(p), -1) < 0) {
      if (errno == EINTR)
        continue;
      return wr_error_set(err, errno, "poll");
    }
    if (p[0].revents)
      on_signals(l);
    if (p[1].revents)
      on_accept(l);
    /* The connection may have changed above; its revents are stale. */
    if (p[2].revents && gen == l->conn_gen)
      on_conn(l, p[2].revents);
  }
  /* Best effort, without waiting: the daemon sees the EOF either way. */
  if (l->conn_fd >= 0)
    wr_init_outq_flush(&l->out, l->conn_fd, NULL);
  return 0;
}
