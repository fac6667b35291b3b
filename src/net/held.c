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
 * on the host fails. So every connection holds, from its accept until it
 * closes, the most its buffers can take: its sockets' (SO_SNDBUF and
 * SO_RCVBUF set before any data; the kernel doubles the figures), the
 * relay's queues (queue_high and one more read each way) or, once
 * spliced, its two pipes (splice.c), and the head buffer; out of a budget
 * of WR_HELD_PER_SANDBOX for its sandbox, and its kernel buffers out of
 * one for all sandboxes together (half the host's tcp_mem pressure
 * threshold, see wr_net_held_budget).
 *
 * Charging every connection the sizes a fast download wants (1.4 MiB)
 * let only about 90 fit in a sandbox, and a real npm install opens more
 * than 100 at once: the rest were refused. Most of them are idle or carry
 * a few KiB. So a connection has one of two tiers, chosen at its accept:
 *
 * - small (wr_tier_small, about 163 KiB in all): 16 KiB out and 8 KiB in on the
 *   sandbox's side, WR_SOCKBUF_UP_MIN (16 KiB) each way upstream, queues
 *   of 8 KiB read 8 KiB at a time, pipes of 8 KiB (two pages): loopback
 *   moves that in a wakeup, a slow upstream fills it in a round trip;
 * - big (wr_tier_big): what one fast tunnel wants (256 KiB out and 128 KiB
 *   in on the sandbox's side, queues of 128 KiB read 64 KiB at a time,
 *   pipes of 64 KiB), with the upstream side stepping from
 *   WR_SOCKBUF_UP_MAX (a window of about half a MiB: 5 MB/s per
 *   connection at 100 ms round trips, 50 MB/s at 10 ms) down to the
 *   minimum, and a bulk pipe growing to WR_PIPE_BULK (splice.c).
 *
 * Every connection holds the small tier's worst case; anything more (the
 * big tier, a larger upstream buffer, a bulk pipe) is growth, held first
 * (wr_conn_hold) and only while the sandbox's budget still keeps the
 * small tier for every connection it may yet open up to
 * WR_CONNS_PER_SANDBOX (the reserve), and all sandboxes hold under half
 * the global budget. So the first connections of a quiet sandbox go fast,
 * the budget leaves room for more connections rather than for faster
 * ones, and 512 connections of one sandbox always fit (512 x 163 KiB is
 * 81 MiB: the other 47 MiB is the room to grow, about 40 big connections
 * or 15 with the largest upstream buffers). WR_CONNS_PER_SANDBOX stays at
 * 512: twice as many would leave a few MiB to grow, and a build that
 * opens more than 512 at once waits on the network, not on warrend. Growth that
 * does not fit is not refused: the connection stays small, which costs speed
 * only. A tier does not change once chosen: socket buffers and TCP's window
 * scale are settled before the first byte.
 *
 * An interception (intercept.c) has a thread and its own buffers instead
 * of the relay's: it holds the big tier's relay share whatever its tier,
 * and is refused when that does not fit the budget.
 *
 * So whatever a sandbox does, warrend holds at most WR_HELD_PER_SANDBOX
 * for it, and all sandboxes together never push the host's TCP memory
 * into pressure. Published ports (connections from the host) are not
 * counted: they have the big tier.
 *
 * Loop thread only.
 */
#include "net/net_internal.h"

#include <assert.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

const struct wr_conn_tier wr_tier_small = {
    .client_snd = 16 * 1024,
    .client_rcv = 8 * 1024,
    .queue_high = 8 * 1024,
    .queue_low = 2 * 1024,
    .chunk = 8 * 1024,
    .pipe = 8 * 1024,
};

const struct wr_conn_tier wr_tier_big = {
    .client_snd = WR_SOCKBUF_CLIENT_SND,
    .client_rcv = WR_SOCKBUF_CLIENT_RCV,
    .queue_high = WR_QUEUE_HIGH,
    .queue_low = WR_QUEUE_LOW,
    .chunk = WR_RELAY_CHUNK,
    .pipe = WR_PIPE_SIZE,
};

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

/* The relay holds, each way, either libuv's queue (up to queue_high and
 * one more read) or, once spliced, a pipe: never both, so the larger of
 * the two is what it may hold. */
static size_t relay_bytes(const struct wr_conn_tier *t) {
  return WR_MAX(2 * (t->queue_high + t->chunk), 2 * t->pipe);
}

struct wr_held wr_conn_tier_held(const struct wr_conn_tier *t) {
  size_t kernel = socket_bytes((size_t)t->client_snd) +
                  socket_bytes((size_t)t->client_rcv) +
                  2 * socket_bytes(WR_SOCKBUF_UP_MIN);

  return (struct wr_held){
      .all = kernel + relay_bytes(t) + WR_IN_MAX + sizeof(struct wr_proxy_head),
      .kernel = kernel,
  };
}

struct wr_held wr_conn_base_held(void) {
  return wr_conn_tier_held(&wr_tier_small);
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

/* The small tier for every connection the sandbox may still open. */
size_t wr_net_reserve(const struct wr_net_sb *sb) {
  size_t left =
      sb->nconns < WR_CONNS_PER_SANDBOX ? WR_CONNS_PER_SANDBOX - sb->nconns : 0;

  return left * wr_conn_base_held().all;
}

/* Hold extra for growth, if the reserve and half the global budget stay
 * free after it. */
static bool hold_growth(struct wr_net_conn *c, struct wr_held extra) {
  return c->sb->held + extra.all + wr_net_reserve(c->sb) <=
             WR_HELD_PER_SANDBOX &&
         c->n->held_kernel + extra.kernel <= c->n->held_max / 2 &&
         wr_conn_hold(c, extra);
}

static struct wr_held held_diff(struct wr_held a, struct wr_held b) {
  return (struct wr_held){.all = a.all - b.all, .kernel = a.kernel - b.kernel};
}

void wr_conn_choose_tier(struct wr_net_conn *c) {
  struct wr_held big = wr_conn_tier_held(&wr_tier_big);

  c->tier = &wr_tier_small;
  if (hold_growth(c, held_diff(big, wr_conn_base_held())))
    c->tier = &wr_tier_big;
}

static void set_buffers(uv_handle_t *h, int snd, int rcv) {
  uv_os_fd_t fd;

  if (uv_fileno(h, &fd) < 0)
    return;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
}

void wr_conn_size_client(struct wr_net_conn *c) {
  set_buffers((uv_handle_t *)&c->client.tcp, c->tier->client_snd,
              c->tier->client_rcv);
}

/* The largest upstream size a big connection can grow to; a small one
 * keeps the minimum. Chosen once per connection (a second address reuses
 * it). */
size_t wr_conn_upstream_size(struct wr_net_conn *c) {
  struct wr_held extra;

  if (c->upbuf != 0)
    return c->upbuf;
  c->upbuf = WR_SOCKBUF_UP_MIN;
  if (c->tier != &wr_tier_big)
    return c->upbuf;
  for (size_t s = WR_SOCKBUF_UP_MAX; s > WR_SOCKBUF_UP_MIN; s /= 2) {
    extra.all = extra.kernel =
        2 * (socket_bytes(s) - socket_bytes(WR_SOCKBUF_UP_MIN));
    if (hold_growth(c, extra)) {
      c->upbuf = s;
      break;
    }
  }
  return c->upbuf;
}

/* Pipe pages are kernel memory, but not TCP's (tcp_mem): they count in
 * the sandbox's budget only. */
static struct wr_held pipe_extra(const struct wr_net_conn *c) {
  return (struct wr_held){.all = WR_PIPE_BULK - c->tier->pipe, .kernel = 0};
}

bool wr_conn_hold_pipe(struct wr_net_conn *c) {
  return hold_growth(c, pipe_extra(c));
}

void wr_conn_release_pipe(struct wr_net_conn *c) {
  struct wr_held extra = pipe_extra(c);

  assert(c->held.all >= extra.all);
  c->held.all -= extra.all;
  c->sb->held -= extra.all;
}

bool wr_conn_hold_intercept(struct wr_net_conn *c) {
  size_t want = relay_bytes(&wr_tier_big), has = relay_bytes(c->tier);

  return want <= has ||
         wr_conn_hold(c, (struct wr_held){.all = want - has, .kernel = 0});
}

void wr_conn_size_upstream(struct wr_net_conn *c) {
  int s = (int)wr_conn_upstream_size(c);

  set_buffers((uv_handle_t *)&c->upstream.tcp, s, s);
}
