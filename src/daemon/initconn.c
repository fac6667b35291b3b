/*
 * The daemon's end of a sandbox's control connection to warren-init.
 *
 * Requests carry an id; replies are matched to the pending request with
 * that id, and EXIT events (id 0) go to the process table. Everything init
 * sends is untrusted: a datagram that does not decode closes the
 * connection, and the sandbox is then treated as unreachable (its pidfd
 * still tells when it exits). The socket is non-blocking: a sandbox whose
 * init does not read (it may be frozen) makes requests fail with EAGAIN
 * rather than stall the loop.
 */
#include "daemon/initconn.h"
#include "daemon/procs.h"
#include "daemon/sandbox.h"

#include <fcntl.h>

struct pending {
  struct pending *next;
  uint32_t id;
  wr_initconn_reply_fn cb;
  void *arg;
};

struct wr_initconn {
  struct wr_sandbox *sb;
  int fd;
  uv_poll_t poll;
  bool closed;
  uint32_t next_id;
  struct pending *pending;
};

static void conn_closed(uv_handle_t *h) {
  struct wr_initconn *c = h->data;

  close(c->fd);
  free(c);
}

static void close_fds(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

static void fail_pending(struct wr_initconn *c, const char *why) {
  wr_error_t err;

  wr_error_set(&err, ECONNRESET, "%s", why);
  while (c->pending != NULL) {
    struct pending *p = c->pending;
    c->pending = p->next;
    if (p->cb != NULL)
      p->cb(p->arg, NULL, NULL, NULL, 0, &err);
    free(p);
  }
}

void wr_initconn_close(struct wr_initconn *c) {
  if (c == NULL || c->closed)
    return;
  c->closed = true;
  uv_poll_stop(&c->poll);
  fail_pending(c, "the sandbox's init connection closed");
  uv_close((uv_handle_t *)&c->poll, conn_closed);
}

/* The connection broke or init sent garbage: stop talking to it. */
static void conn_broken(struct wr_initconn *c, const char *why) {
  struct wr_sandbox *sb = c->sb;

  wr_warn("sandbox %s: control connection: %s", sb->name, why);
  if (sb->conn == c)
    sb->conn = NULL;
  wr_initconn_close(c);
  wr_procs_sandbox_gone(sb);
}

static struct pending *take_pending(struct wr_initconn *c, uint32_t id,
                                    bool keep) {
  for (struct pending **pp = &c->pending; *pp != NULL; pp = &(*pp)->next) {
    struct pending *p = *pp;
    if (p->id != id)
      continue;
    if (!keep)
      *pp = p->next;
    return p;
  }
  return NULL;
}

/* LISTED replies come in parts; the request stays pending until the last. */
static bool is_last_part(const struct wr_init_hdr *hdr, const void *payload) {
  struct wr_init_listed l;

  if (hdr->type != WR_INIT_LISTED)
    return true;
  if (wr_init_decode_listed(payload, hdr->len, &l, NULL) < 0)
    return true;
  free(l.procs);
  return !l.more;
}

static int dispatch(struct wr_initconn *c, const struct wr_init_hdr *hdr,
                    const void *payload, int *fds, size_t nfds) {
  struct pending *p;
  bool last;

  if (hdr->type == WR_INIT_EXIT) {
    struct wr_init_exit ev;
    close_fds(fds, nfds);
    if (wr_init_decode_fixed(payload, hdr->len, &ev, sizeof(ev), NULL) < 0)
      return -1;
    wr_procs_on_exit(c->sb, &ev);
    return 0;
  }
  last = is_last_part(hdr, payload);
  p = take_pending(c, hdr->id, !last);
  if (p == NULL) {
    close_fds(fds, nfds);
    return -1; /* a reply nobody asked for */
  }
  if (p->cb != NULL)
    p->cb(p->arg, hdr, payload, fds, nfds, NULL);
  else
    close_fds(fds, nfds);
  if (last)
    free(p);
  return 0;
}

static void on_readable(uv_poll_t *h, int status, int events) {
  struct wr_initconn *c = h->data;
  char *buf = c->sb->d->init_buf;

  (void)events;
  if (status < 0) {
    conn_broken(c, uv_strerror(status));
    return;
  }
  while (!c->closed) {
    int fds[WR_INIT_MAX_FDS];
    size_t nfds = 0;
    struct wr_init_hdr hdr;
    const void *payload;
    wr_error_t err;
    ssize_t n = wr_init_recv(c->fd, buf, WR_INIT_MAX_MSG, fds, &nfds, &err);

    if (n < 0 && err.code == EAGAIN)
      return;
    if (n <= 0) {
      conn_broken(c, n == 0 ? "closed by warren-init" : err.msg);
      return;
    }
    if (wr_init_decode_hdr(buf, (size_t)n, nfds, &hdr, &payload, &err) < 0 ||
        dispatch(c, &hdr, payload, fds, nfds) < 0) {
      close_fds(fds, nfds);
      conn_broken(c, "malformed message from warren-init");
      return;
    }
  }
}

struct wr_initconn *wr_initconn_new(struct wr_sandbox *sb, int fd,
                                    wr_error_t *err) {
  struct wr_initconn *c = xcalloc(1, sizeof(*c));

  c->sb = sb;
  c->fd = fd;
  c->next_id = 2; /* 1 was used for the first HELLO */
  if (wr_set_nonblock(fd, true) < 0 ||
      uv_poll_init(sb->d->loop, &c->poll, fd) < 0) {
    free(c);
    wr_error_set(err, EIO, "watch the control socket");
    return NULL;
  }
  c->poll.data = c;
  uv_poll_start(&c->poll, UV_READABLE, on_readable);
  return c;
}

int wr_initconn_request(struct wr_initconn *c, wr_buf_t *msg, const int *fds,
                        size_t nfds, wr_initconn_reply_fn cb, void *arg,
                        wr_error_t *err) {
  struct wr_init_hdr *hdr = (struct wr_init_hdr *)msg->data;
  struct pending *p;

  if (c == NULL || c->closed)
    return wr_error_setx(err, ENOTCONN, "the sandbox's init is not reachable");
  if (msg->len < sizeof(*hdr))
    return wr_error_set(err, EINVAL, "short message");
  hdr->id = c->next_id++;
  if (c->next_id == 0)
    c->next_id = 2;
  if (wr_init_send(c->fd, msg->data, msg->len, fds, nfds, err) < 0) {
    if (err != NULL && err->code == EAGAIN)
      wr_error_setx(err, EAGAIN, "the sandbox is not responding");
    return -1;
  }
  p = xcalloc(1, sizeof(*p));
  p->id = hdr->id;
  p->cb = cb;
  p->arg = arg;
  p->next = c->pending;
  c->pending = p;
  return 0;
}

void wr_initconn_cancel(struct wr_initconn *c, void *arg) {
  if (c == NULL)
    return;
  for (struct pending *p = c->pending; p != NULL; p = p->next)
    if (p->arg == arg)
      p->cb = NULL;
}
