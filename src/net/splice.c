/*
 * The relay of a pure byte tunnel, in the kernel: socket -> pipe -> socket
 * with splice(2), so that relayed bytes are never copied into warrend.
 *
 * Only connections the proxy no longer needs to look at come here: a
 * CONNECT tunnel once its SNI (if any) has passed, a redirected TCP
 * connection that is neither TLS to intercept nor an HTTP request to
 * parse, and a published port. tunnel.c switches a connection over once
 * libuv's queues are empty, with the tcp handles neither reading nor
 * writing: from then on libuv only tells readiness, through a uv_poll
 * handle on each socket (one io watcher per fd: the tcp handle's stays
 * stopped for good, so its shutdown is shutdown(2) here, not uv_shutdown).
 *
 * Each direction has a pipe of its tier's size (held.c: WR_PIPE_SIZE, the
 * kernel's default of 16 pages, or two pages for a small connection),
 * grown to WR_PIPE_BULK for a direction that carries bulk while the
 * budget allows (grow). A direction whose pipe holds bytes stops
 * watching its source for readable until the destination has taken them all:
 * that is the backpressure, and it bounds what a tunnel holds to its sockets'
 * buffers and the two pipes (held.c). EOF from a side, once its pipe is
 * empty, becomes shutdown(SHUT_WR) of the other side (half-close); a read
 * or write error (a reset, EPIPE) ends the connection, as in libuv's path.
 * A wakeup moves at most WR_SPLICE_ROUNDS pipe-fulls each way, so one
 * fast tunnel cannot hold the loop; level-triggered readiness brings it
 * back for the rest.
 *
 * Loop thread only. The pipes are ours (closed in wr_splice_stop); the
 * sockets stay owned by the tcp handles, whose close comes after the
 * poll handles' (wr_conn_close).
 */
#include "net/net_internal.h"

#include <assert.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#define SPLICE_FLAGS (SPLICE_F_MOVE | SPLICE_F_NONBLOCK)

static struct wr_net_side *other_side(struct wr_net_conn *c,
                                      struct wr_net_side *s) {
  return s == &c->client ? &c->upstream : &c->client;
}

static int side_fd(struct wr_net_side *s) {
  uv_os_fd_t fd;

  return uv_fileno((uv_handle_t *)&s->tcp, &fd) == 0 ? fd : -1;
}

static bool would_block(int e) {
  return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

/* A direction that fills its pipe in one read carries bulk: a pipe of
 * WR_PIPE_BULK takes a quarter of the system calls and wakeups per byte
 * (measured: a third less of warrend's CPU per GiB than with 64 KiB).
 * It grows once, when the budget has room for it (held.c); otherwise it
 * stays as it is, which only costs speed. */
static void grow(struct wr_net_conn *c, struct wr_net_side *from) {
  if (from->pipe_size >= WR_PIPE_BULK || !wr_conn_hold_pipe(c))
    return;
  if (fcntl(from->pipe[1], F_SETPIPE_SZ, WR_PIPE_BULK) < 0) {
    wr_conn_release_pipe(c);
    from->pipe_size = WR_PIPE_BULK; /* do not try again */
    return;
  }
  from->pipe_size = WR_PIPE_BULK;
}

/* Source bytes into from's pipe: > 0 moved, 0 nothing now, -errno. EOF is
 * noted in from->eof. */
static ssize_t fill(struct wr_net_conn *c, struct wr_net_side *from) {
  ssize_t n = splice(side_fd(from), NULL, from->pipe[1], NULL, from->pipe_size,
                     SPLICE_FLAGS);

  if (n == 0)
    from->eof = true;
  if (n < 0)
    return would_block(errno) ? 0 : -errno;
  from->piped += (size_t)n;
  if ((size_t)n == from->pipe_size)
    grow(c, from);
  return n;
}

/* from's pipe into the other side: > 0 moved, 0 nothing now, -errno. */
static ssize_t drain(struct wr_net_side *from, struct wr_net_side *to) {
  ssize_t n =
      splice(from->pipe[0], NULL, side_fd(to), NULL, from->piped, SPLICE_FLAGS);

  if (n < 0)
    return would_block(errno) ? 0 : -errno;
  from->piped -= (size_t)n;
  to->sent += (uint64_t)n;
  return n;
}

/* The source ended and everything it sent is out: FIN the other side. */
static int half_close(struct wr_net_side *from, struct wr_net_side *to) {
  if (!from->eof || from->piped > 0 || to->shut)
    return 0;
  to->shut = true;
  if (shutdown(side_fd(to), SHUT_WR) < 0 && errno != ENOTCONN)
    return -errno;
  to->shut_done = true;
  return 0;
}

/* Move what can move from `from` to its other side now. */
static int pump(struct wr_net_conn *c, struct wr_net_side *from) {
  struct wr_net_side *to = other_side(c, from);
  ssize_t n;

  for (int round = 0; round < WR_SPLICE_ROUNDS; round++) {
    size_t room = from->pipe_size;
    bool more = false;

    if (from->piped == 0 && !from->eof) {
      if ((n = fill(c, from)) <= 0) {
        if (n < 0)
          return (int)n;
        break;
      }
      /* Less than a pipe-full: the socket is drained for now, and its
       * readiness says when there is more (no read just for EAGAIN). */
      more = (size_t)n == room;
    }
    if (from->piped > 0 && ((n = drain(from, to)) < 0))
      return (int)n;
    wr_conn_active(c);
    if (from->piped > 0 || from->eof || !more)
      break; /* the destination is full, or there is no more */
  }
  return half_close(from, to);
}

static void on_poll(uv_poll_t *p, int status, int events);

/* What s's socket is watched for: readable while its pipe is empty (and
 * it has not ended), writable while the other side's pipe waits for it. */
static int watch(struct wr_net_conn *c, struct wr_net_side *s) {
  struct wr_net_side *o = other_side(c, s);
  int ev = 0;

  if (!s->eof && s->piped == 0)
    ev |= UV_READABLE;
  if (o->piped > 0)
    ev |= UV_WRITABLE;
  if (ev == s->pevents)
    return 0;
  s->pevents = ev;
  if (ev == 0)
    return uv_poll_stop(&s->poll);
  return uv_poll_start(&s->poll, ev, on_poll);
}

static void step(struct wr_net_conn *c, struct wr_net_side *readable,
                 struct wr_net_side *writable) {
  int rc = 0;

  if (readable != NULL)
    rc = pump(c, readable);
  if (rc == 0 && writable != NULL)
    rc = pump(c, other_side(c, writable));
  if (rc == 0)
    rc = watch(c, &c->client);
  if (rc == 0)
    rc = watch(c, &c->upstream);
  if (rc < 0) {
    wr_conn_close(c);
    return;
  }
  wr_conn_check_done(c);
}

/* A poll error (POLLERR: a reset, say) ends the connection; libuv has
 * stopped the handle already. */
static void on_poll(uv_poll_t *p, int status, int events) {
  struct wr_net_side *s = p->data;
  struct wr_net_conn *c = s->c;

  if (c->closing)
    return;
  if (status < 0) {
    s->pevents = 0;
    wr_conn_close(c);
    return;
  }
  step(c, (events & (UV_READABLE | UV_DISCONNECT)) ? s : NULL,
       (events & UV_WRITABLE) ? s : NULL);
}

/*
 * Most tunnels are short (a request and its answer), so their pipes are
 * kept for the next ones: an empty pipe of the default size goes back to
 * a small cache instead of being closed, which saves a pipe2 and two
 * closes per direction. Nothing else is in a cached pipe (piped counts
 * every byte in it exactly), and a grown one is closed, so the cache
 * holds no memory but the pipes themselves.
 */
static int take_pipe(struct wr_net *n, int fds[2]) {
  if (n->npipes > 0) {
    n->npipes--;
    fds[0] = n->pipes[n->npipes][0];
    fds[1] = n->pipes[n->npipes][1];
    return 0;
  }
  return pipe2(fds, O_CLOEXEC | O_NONBLOCK);
}

static void close_pipe(struct wr_net *n, struct wr_net_side *s) {
  if (s->pipe[0] < 0)
    return;
  if (s->piped == 0 && s->pipe_size == WR_PIPE_SIZE &&
      n->npipes < WR_PIPE_CACHE && !n->shut) {
    n->pipes[n->npipes][0] = s->pipe[0];
    n->pipes[n->npipes][1] = s->pipe[1];
    n->npipes++;
  } else {
    close(s->pipe[0]);
    close(s->pipe[1]);
  }
  s->pipe[0] = s->pipe[1] = -1;
}

void wr_splice_free(struct wr_net *n) {
  for (size_t i = 0; i < n->npipes; i++) {
    close(n->pipes[i][0]);
    close(n->pipes[i][1]);
  }
  n->npipes = 0;
}

static void side_stop(struct wr_net_conn *c, struct wr_net_side *s) {
  close_pipe(c->n, s);
  if (s->polled && !uv_is_closing((uv_handle_t *)&s->poll))
    uv_close((uv_handle_t *)&s->poll, wr_conn_on_closed);
}

/* A pipe is what it holds: one larger than its tier's would hold more
 * than was charged, so a pipe the kernel will not size ends the splice
 * (the caller relays through libuv instead). */
static int resize_pipe(struct wr_net_side *s, size_t size) {
  int got = fcntl(s->pipe[1], F_SETPIPE_SZ, (int)size);

  if (got < 0 || (size_t)got > size)
    return -1;
  s->pipe_size = (size_t)got;
  return 0;
}

static int side_start(struct wr_net_conn *c, struct wr_net_side *s) {
  int fd = side_fd(s);

  s->pipe[0] = s->pipe[1] = -1;
  s->piped = 0;
  s->pevents = 0;
  if (fd < 0 || take_pipe(c->n, s->pipe) < 0) {
    s->pipe[0] = s->pipe[1] = -1;
    return -1;
  }
  s->pipe_size = WR_PIPE_SIZE;
  if (c->tier->pipe != WR_PIPE_SIZE && resize_pipe(s, c->tier->pipe) < 0) {
    close_pipe(c->n, s);
    return -1;
  }
  if (uv_poll_init_socket(c->n->loop, &s->poll, fd) < 0) {
    close_pipe(c->n, s);
    return -1;
  }
  s->poll.data = s;
  s->polled = true;
  c->handles++;
  return 0;
}

bool wr_splice_start(struct wr_net_conn *c) {
  assert(c->client.queued == 0 && c->upstream.queued == 0);
  assert(!c->client.reading && !c->upstream.reading);
  if (side_start(c, &c->client) < 0)
    return false;
  if (side_start(c, &c->upstream) < 0) {
    side_stop(c, &c->client);
    return false;
  }
  c->splicing = true;
  /* Bytes already waiting in a socket make it readable at once
   * (level-triggered): watching is enough, no read to try first. */
  step(c, NULL, NULL);
  return true;
}

void wr_splice_stop(struct wr_net_conn *c) {
  if (!c->splicing)
    return;
  c->splicing = false;
  side_stop(c, &c->client);
  side_stop(c, &c->upstream);
}
