/*
 * What warrend holds in buffers for a sandbox's egress connections, and
 * the budget that bounds it.
 *
 * A connection through the proxy has two sockets of warrend's: the one
 * the sandbox connected to (in its network namespace) and the one to
 * upstream. Their kernel buffers are charged to warrend, not to the
 * sandbox, and autotuning lets each grow to tcp_wmem/tcp_rmem's maximum
 * (4 and 32 MiB here): a sandbox that never read what its connections
 * received made warrend hold 4 MiB or more per connection, and with 512
 * connections it pushed the whole host to tcp_mem, where every TCP socket
 * on the host fails. So:
 *
 * - the sandbox side has fixed buffers (WR_SOCKBUF_CLIENT_SND and _RCV;
 *   the kernel doubles the figures): loopback needs little, and more does
 *   not go faster;
 * - the upstream side gets WR_SOCKBUF_UP_MAX each way (a window of about
 *   half a MiB: 5 MB/s per connection at 100 ms round trips, 50 MB/s at
 *   10 ms) while its sandbox and all of them hold less than half their
 *   budgets, and less beyond, down to WR_SOCKBUF_UP_MIN: so that the
 *   budget leaves room for more connections rather than for faster ones;
 * - every connection holds, from its accept until it closes, the most its
 *   buffers and the relay's queues (WR_QUEUE_HIGH each way, or a spliced
 *   tunnel's pipes of WR_PIPE_SIZE, splice.c) can take, out
 *   of a budget of WR_HELD_PER_SANDBOX for its sandbox; and its kernel
 *   buffers out of one for all sandboxes together (half the host's
 *   tcp_mem pressure threshold, see wr_net_held_budget). A connection that
 *   does not fit is refused, as one beyond the connection caps is.
 *
 * - a spliced direction that carries bulk grows its pipe to WR_PIPE_BULK
 *   while its sandbox holds less than half its budget, holding the
 *   difference; beyond, pipes stay small (slower, never refused).
 *
 * So whatever a sandbox does, warrend holds at most WR_HELD_PER_SANDBOX
 * for it, and all sandboxes together never push the host's TCP memory
 * into pressure. Interceptions hold their connection's share until they
 * end. Published ports (connections from the host) are not counted.
 *
 * Loop thread only.
 */
#include "net/net_internal.h"

#include <assert.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* What the kernel may hold for SO_*BUF = size (it doubles the figure). */
static size_t socket_bytes(size_t size) {
  return 2 * size;
}

size_t wr_net_held_budget(const char *tcp_mem, size_t page_size) {
  unsigned long long low, pressure, high;
  size_t budget;

  if (tcp_mem == NULL ||
      sscanf(tcp_mem, "%llu %llu %llu", &low, &pressure, &high) != 3 ||
      pressure > SIZE_MAX / 2 / page_size)
    return WR_HELD_FALLBACK;
  budget = (size_t)pressure * page_size / 2;
  return budget < WR_HELD_PER_SANDBOX ? WR_HELD_PER_SANDBOX : budget;
}

/* The relay holds, each way, either libuv's queue (up to WR_QUEUE_HIGH
 * and one more read) or, once spliced, a pipe of WR_PIPE_SIZE: never
 * both, so the larger of the two is what it may hold. */
static size_t relay_bytes(void) {
  return WR_MAX(2 * (WR_QUEUE_HIGH + WR_RELAY_CHUNK), 2 * WR_PIPE_SIZE);
}

struct wr_held wr_conn_base_held(void) {
  size_t kernel = socket_bytes(WR_SOCKBUF_CLIENT_SND) +
                  socket_bytes(WR_SOCKBUF_CLIENT_RCV) +
                  2 * socket_bytes(WR_SOCKBUF_UP_MIN);

  return (struct wr_held){
      .all = kernel + relay_bytes() + WR_IN_MAX + WR_HEAD_MAX,
      .kernel = kernel,
  };
}

bool wr_net_can_hold(const struct wr_net *n, const struct wr_net_sb *sb,
                     struct wr_held h) {
  return sb->held + h.all <= WR_HELD_PER_SANDBOX &&
         n->held_kernel + h.kernel <= n->held_max;
}

bool wr_conn_hold(struct wr_net_conn *c, struct wr_held h) {
  if (!wr_net_can_hold(c->n, c->sb, h))
    return false;
  c->held.all += h.all;
  c->held.kernel += h.kernel;
  c->sb->held += h.all;
  c->n->held_kernel += h.kernel;
  return true;
}

void wr_net_release(struct wr_net *n, struct wr_net_sb *sb, struct wr_held *h) {
  assert(sb->held >= h->all && n->held_kernel >= h->kernel);
  sb->held -= h->all;
  n->held_kernel -= h->kernel;
  *h = (struct wr_held){0, 0};
}

static void set_buffers(uv_handle_t *h, int snd, int rcv) {
  uv_os_fd_t fd;

  if (uv_fileno(h, &fd) < 0)
    return;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
}

void wr_conn_size_client(struct wr_net_conn *c) {
  set_buffers((uv_handle_t *)&c->client.tcp, WR_SOCKBUF_CLIENT_SND,
              WR_SOCKBUF_CLIENT_RCV);
}

/* The largest upstream size whose extra over the minimum keeps the
 * sandbox and everyone under half their budgets; chosen once per
 * connection (a second address reuses it). */
size_t wr_conn_upstream_size(struct wr_net_conn *c) {
  struct wr_held extra;

  if (c->upbuf != 0)
    return c->upbuf;
  c->upbuf = WR_SOCKBUF_UP_MIN;
  for (size_t s = WR_SOCKBUF_UP_MAX; s > WR_SOCKBUF_UP_MIN; s /= 2) {
    extra.all = extra.kernel =
        2 * (socket_bytes(s) - socket_bytes(WR_SOCKBUF_UP_MIN));
    if (c->sb->held + extra.all <= WR_HELD_PER_SANDBOX / 2 &&
        c->n->held_kernel + extra.kernel <= c->n->held_max / 2 &&
        wr_conn_hold(c, extra)) {
      c->upbuf = s;
      break;
    }
  }
  return c->upbuf;
}

/* Pipe pages are kernel memory, but not TCP's (tcp_mem): they count in
 * the sandbox's budget only. */
static struct wr_held pipe_extra(void) {
  return (struct wr_held){.all = WR_PIPE_BULK - WR_PIPE_SIZE, .kernel = 0};
}

bool wr_conn_hold_pipe(struct wr_net_conn *c) {
  struct wr_held extra = pipe_extra();

  return c->sb->held + extra.all <= WR_HELD_PER_SANDBOX / 2 &&
         wr_conn_hold(c, extra);
}

void wr_conn_release_pipe(struct wr_net_conn *c) {
  struct wr_held extra = pipe_extra();

  assert(c->held.all >= extra.all);
  c->held.all -= extra.all;
  c->sb->held -= extra.all;
}

void wr_conn_size_upstream(struct wr_net_conn *c) {
  int s = (int)wr_conn_upstream_size(c);

  set_buffers((uv_handle_t *)&c->upstream.tcp, s, s);
}
