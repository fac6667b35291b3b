/*
 * A connection through the engine: its handles, the byte relay between the
 * two sides, and the ways it ends.
 *
 * The struct owns three handles (client socket, timer, and the upstream
 * socket once dialing starts), all embedded, and is freed when the last of
 * them has closed. Writes own their buffers; libuv cancels pending writes
 * and shutdowns before the close callbacks run, so nothing outlives it.
 *
 * The relay reads each side into fresh buffers and hands them to a write
 * on the other side. A side whose write queue passes its tier's queue_high
 * (held.c) stops the reads that feed it until it drains below queue_low, so a
 * fast sender never makes the daemon buffer without bound. EOF from one side
 * becomes a shutdown of the other (half-close); the connection closes once
 * both directions are done, or after WR_IDLE_TIMEOUT_MS without traffic.
 */
#include "net/net_internal.h"

struct conn_write {
  uv_write_t req;
  struct wr_net_side *to;
  char *data;
  size_t len;
};

static struct wr_net_side *other_side(struct wr_net_conn *c,
                                      struct wr_net_side *s) {
  return s == &c->client ? &c->upstream : &c->client;
}

const struct wr_conn_kind_info wr_conn_kinds[] = {
    [WR_CONN_EXPLICIT] = {.name = "tcp",
                          .policed = true,
                          .budgeted = true,
                          .speaks_http = true},
    [WR_CONN_CONNECT] = {.name = "connect",
                         .policed = true,
                         .budgeted = true,
                         .speaks_http = true},
    [WR_CONN_HTTP] = {.name = "http",
                      .policed = true,
                      .budgeted = true,
                      .speaks_http = true,
                      .one_request = true},
    [WR_CONN_TCP] = {.name = "tcp",
                     .policed = true,
                     .budgeted = true,
                     .reset_on_refusal = true},
    [WR_CONN_PORT] = {.name = "port", .from_host = true},
};

const char *wr_conn_kind_name(enum wr_conn_kind k) {
  return wr_conn_kinds[k].name;
}

static void report(struct wr_net_conn *c, enum wr_net_activity what) {
  if (c->n->activity != NULL)
    c->n->activity(c->n->hook_arg, c->sb->id, what,
                   wr_conn_kinds[c->kind].from_host);
}

void wr_conn_active(struct wr_net_conn *c) {
  c->last_active = uv_now(c->n->loop);
  if (c->last_active - c->reported < WR_ACTIVITY_MS)
    return;
  c->reported = c->last_active;
  report(c, WR_NET_CONN_BYTES);
}

bool wr_conn_one_request(const struct wr_net_conn *c) {
  return wr_conn_kinds[c->kind].one_request || c->http;
}

void wr_conn_log(struct wr_net_conn *c, bool allow, const char *rule,
                 const char *reason, bool intercepted) {
  char addr[INET6_ADDRSTRLEN] = "";
  struct wr_net_event ev = {
      .sandbox = c->sb->id,
      .kind = wr_conn_kind_name(c->kind),
      .host = c->host[0] ? c->host : NULL,
      .addr = c->has_addr ? addr : NULL,
      .port = c->port,
      .allow = allow,
      .rule = rule,
      .reason = reason,
      .intercepted = intercepted,
      .bytes_up = c->upstream.sent,
      .bytes_down = c->client.sent,
  };

  if (!wr_conn_kinds[c->kind].policed)
    return;
  if (c->has_addr)
    wr_net_addr_format(&c->addr, addr, sizeof(addr));
  wr_net_emit(c->n, &ev);
}

/* ---- life --------------------------------------------------------------- */

static void on_timer(uv_timer_t *t);

static void side_init(struct wr_net_conn *c, struct wr_net_side *s) {
  s->c = c;
  uv_tcp_init(c->n->loop, &s->tcp);
  s->tcp.data = s;
  s->open = true;
  c->handles++;
}

/* The client handle and the timer exist from the start, so closing is the
 * same for every state; the upstream handle comes with the first dial. */
struct wr_net_conn *wr_conn_new(struct wr_net *n, struct wr_net_sb *sb,
                                enum wr_conn_kind kind) {
  struct wr_net_conn *c = xcalloc(1, sizeof(*c));

  c->n = n;
  c->sb = sb;
  c->kind = kind;
  c->client.c = c;
  c->upstream.c = c;
  /* Until held.c chooses; published ports are not counted (held.c). */
  c->tier = wr_conn_kinds[kind].budgeted ? &wr_tier_small : &wr_tier_big;
  wr_net_sb_ref(sb);
  n->nconns++;
  if (wr_conn_kinds[kind].budgeted)
    sb->nconns++;
  c->next = sb->conns;
  if (sb->conns != NULL)
    sb->conns->prev = c;
  sb->conns = c;
  side_init(c, &c->client);
  uv_timer_init(n->loop, &c->timer);
  c->timer.data = c;
  c->handles++;
  c->last_active = c->reported = uv_now(n->loop);
  report(c, WR_NET_CONN_OPENED);
  return c;
}

/* After the last handle's close callback: nothing refers to c any more. */
static void conn_free(struct wr_net_conn *c) {
  struct wr_net_sb *sb = c->sb;

  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    sb->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  c->n->nconns--;
  if (wr_conn_kinds[c->kind].budgeted)
    sb->nconns--;
  report(c, WR_NET_CONN_CLOSED);
  wr_net_release(c->n, sb, &c->held);
  if (c->has_secret) {
    if (c->secret.value != NULL)
      OPENSSL_cleanse(c->secret.value, strlen(c->secret.value));
    wr_secret_clear(&c->secret);
  }
  free(c->in);
  free(c->head);
  free(c->rule);
  free(c);
  wr_net_sb_unref(sb);
}

/* The upstream socket of a failed dial attempt closes while the
 * connection lives on: its close is the cue for the next address. */
void wr_conn_on_closed(uv_handle_t *h) {
  struct wr_net_conn *c;

  if (h->type == UV_TIMER) {
    c = h->data;
  } else if (h->type == UV_POLL) {
    struct wr_net_side *s = h->data;
    c = s->c;
    s->polled = false;
  } else {
    struct wr_net_side *s = h->data;
    c = s->c;
    s->open = false;
    s->reading = false;
    if (s == &c->upstream && !c->closing && c->state == WR_CS_DIAL) {
      c->handles--;
      wr_conn_dial_next(c);
      return;
    }
  }
  if (--c->handles == 0 && c->closing)
    conn_free(c);
}

static void close_side(struct wr_net_side *s) {
  if (!s->open || uv_is_closing((uv_handle_t *)&s->tcp))
    return;
  uv_close((uv_handle_t *)&s->tcp, wr_conn_on_closed);
}

void wr_conn_drop_upstream(struct wr_net_conn *c) {
  close_side(&c->upstream);
}

void wr_conn_close(struct wr_net_conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  if (c->allowed) {
    c->allowed = false;
    wr_conn_log(c, true, c->rule, c->reason, false);
  }
  wr_resolve_cancel(c->resolve);
  c->resolve = NULL;
  wr_splice_stop(c); /* the poll handles go before the sockets */
  close_side(&c->client);
  close_side(&c->upstream);
  uv_close((uv_handle_t *)&c->timer, wr_conn_on_closed);
}

void wr_conn_reset(struct wr_net_conn *c) {
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  uv_os_fd_t fd;

  if (!c->closing && c->client.open &&
      uv_fileno((uv_handle_t *)&c->client.tcp, &fd) == 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  wr_conn_close(c);
}

int wr_conn_open_upstream(struct wr_net_conn *c) {
  wr_error_t err = {0};
  int fd, rc;

  side_init(c, &c->upstream);
  if (!wr_conn_kinds[c->kind].from_host)
    return 0;
  fd = wr_net_socket_in_ns(c->n->self_netns, c->sb->netns_fd, AF_INET,
                           SOCK_STREAM, &err);
  if (fd < 0)
    return -err.code;
  rc = uv_tcp_open(&c->upstream.tcp, fd);
  if (rc < 0)
    close(fd);
  return rc;
}

/* ---- writing ------------------------------------------------------------ */

static void relay_resume(struct wr_net_side *s);
static void try_splice(struct wr_net_conn *c);

/* A write done: resume the side that was paused for it, or, for a CONNECT
 * to a host with a secret, hand over once the 200 is out. */
static void on_written(uv_write_t *req, int status) {
  struct conn_write *w = (struct conn_write *)req;
  struct wr_net_side *to = w->to;
  struct wr_net_conn *c = to->c;
  struct wr_net_side *from = other_side(c, to);

  to->queued -= w->len;
  free(w->data);
  free(w);
  if (c->closing)
    return;
  if (status < 0) {
    wr_conn_close(c);
    return;
  }
  if (c->state == WR_CS_HANDOVER && to == &c->client && to->queued == 0) {
    wr_conn_handover(c);
    return;
  }
  if (c->want_splice) {
    try_splice(c);
    return;
  }
  if (from->paused && to->queued <= c->tier->queue_low) {
    from->paused = false;
    relay_resume(from);
  }
}

void wr_conn_write(struct wr_net_conn *c, struct wr_net_side *to, char *data,
                   size_t len) {
  struct conn_write *w;
  uv_buf_t buf;
  int rc;

  if (c->closing || !to->open || len == 0 || len > UINT32_MAX) {
    free(data);
    return;
  }
  w = xmalloc(sizeof(*w));
  w->to = to;
  w->data = data;
  w->len = len;
  buf = uv_buf_init(data, (unsigned)len);
  rc = uv_write(&w->req, (uv_stream_t *)&to->tcp, &buf, 1, on_written);
  if (rc < 0) {
    free(data);
    free(w);
    wr_conn_close(c);
    return;
  }
  to->queued += len;
}

/* ---- the relay ---------------------------------------------------------- */

static void relay_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct wr_net_side *s = h->data;
  struct wr_net_conn *c = s->c;

  (void)suggested;
  if (s == &c->client && c->sniffing) {
    buf->base = c->in + c->in_len;
    buf->len = WR_IN_MAX - c->in_len;
    return;
  }
  buf->base = xmalloc(c->tier->chunk);
  buf->len = c->tier->chunk;
}

/* Send relayed bytes on (takes data); stop reading `from` while `to` is
 * backed up. */
static void relay_forward(struct wr_net_conn *c, struct wr_net_side *from,
                          char *data, size_t len) {
  struct wr_net_side *to = other_side(c, from);

  to->sent += len;
  wr_conn_write(c, to, data, len);
  if (c->closing || to->queued <= c->tier->queue_high)
    return;
  from->paused = true;
  if (from->reading) {
    from->reading = false;
    uv_read_stop((uv_stream_t *)&from->tcp);
  }
}

void wr_conn_check_done(struct wr_net_conn *c) {
  if (c->client.eof && c->upstream.eof && c->client.shut_done &&
      c->upstream.shut_done)
    wr_conn_close(c);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  struct wr_net_side *s = req->handle->data;
  struct wr_net_conn *c = s->c;

  if (c->closing)
    return;
  if (status < 0) {
    wr_conn_close(c);
    return;
  }
  s->shut_done = true;
  if (c->state == WR_CS_RELAY)
    wr_conn_check_done(c);
}

static void shutdown_side(struct wr_net_conn *c, struct wr_net_side *s) {
  if (s->shut || !s->open)
    return;
  s->shut = true;
  if (uv_shutdown(&s->shutdown, (uv_stream_t *)&s->tcp, on_shutdown) < 0)
    wr_conn_close(c);
}

/* A plain HTTP request is forwarded with "Connection: close": the answer
 * ends when upstream closes. The client's EOF before its request is
 * complete abandons it; after, it means nothing more. */
static void on_eof(struct wr_net_conn *c, struct wr_net_side *s) {
  s->eof = true;
  s->reading = false;
  if (wr_conn_one_request(c)) {
    if (s == &c->upstream)
      wr_conn_finish(c);
    else if (!s->done)
      wr_conn_close(c);
    return;
  }
  shutdown_side(c, other_side(c, s));
  if (!c->closing)
    wr_conn_check_done(c);
}

/* A request's body ends where its framing says; what follows (a second,
 * pipelined request) is not forwarded, and reading stops. */
static size_t body_filter(struct wr_net_conn *c, const char *data, size_t len) {
  size_t used = 0;

  if (wr_proxy_body_feed(c->head, data, len, &used) < 0) {
    wr_conn_close(c);
    return 0;
  }
  if (c->head->body_done) {
    c->client.done = true;
    c->client.reading = false;
    uv_read_stop((uv_stream_t *)&c->client.tcp);
  }
  return used;
}

/* Relay buffers are ours to free unless they are the held-bytes buffer of
 * a CONNECT tunnel whose SNI is still being read (see relay_alloc). */
static void relay_read(uv_stream_t *stream, ssize_t nread,
                       const uv_buf_t *buf) {
  struct wr_net_side *s = stream->data;
  struct wr_net_conn *c = s->c;
  bool held = s == &c->client && c->sniffing;
  size_t len = nread > 0 ? (size_t)nread : 0;

  if (nread <= 0 || c->closing) {
    if (!held)
      free(buf->base);
    if (nread == UV_EOF && held && !c->closing) {
      /* A ClientHello cut short by EOF cannot start TLS: pass it on. */
      s->eof = true;
      s->reading = false;
      wr_conn_sni_passed(c);
    } else if (nread == UV_EOF && !c->closing)
      on_eof(c, s);
    else if (nread < 0 && !c->closing)
      wr_conn_close(c);
    return;
  }
  wr_conn_active(c);
  if (held) {
    c->in_len += len;
    wr_conn_sni_check(c);
    return;
  }
  if (s == &c->client && wr_conn_one_request(c) && c->head != NULL)
    len = body_filter(c, buf->base, len);
  if (len == 0 || c->closing) {
    free(buf->base);
    return;
  }
  relay_forward(c, s,
                len < c->tier->chunk / 2 ? xrealloc(buf->base, len) : buf->base,
                len);
}

static void relay_resume(struct wr_net_side *s) {
  struct wr_net_conn *c = s->c;

  if (c->closing || c->state != WR_CS_RELAY || c->want_splice || s->reading ||
      s->paused || s->eof || s->done || !s->open)
    return;
  if (uv_read_start((uv_stream_t *)&s->tcp, relay_alloc, relay_read) < 0) {
    wr_conn_close(c);
    return;
  }
  s->reading = true;
}

/* Hand held client bytes (after a head, or a checked ClientHello) on to
 * upstream before anything read later. */
static void flush_held(struct wr_net_conn *c) {
  size_t len = c->in_len - c->in_off;

  if (c->in != NULL && len > 0)
    relay_forward(c, &c->client, xmemdup(c->in + c->in_off, len), len);
  free(c->in);
  c->in = NULL;
  c->in_len = c->in_off = 0;
}

/* A pure byte relay (nothing left to parse or check, neither side ended
 * yet) moves to splice.c. */
static bool splice_wanted(const struct wr_net_conn *c) {
  return !c->closing && !wr_conn_one_request(c) && !c->sniffing &&
         !c->client.eof && !c->upstream.eof && !c->client.shut &&
         !c->upstream.shut;
}

static void stop_reading(struct wr_net_side *s) {
  if (!s->reading)
    return;
  s->reading = false;
  uv_read_stop((uv_stream_t *)&s->tcp);
}

/* libuv reads no more; once the writes already queued (the CONNECT
 * answer, held bytes, what was read before) are out, the fds are free for
 * splice.c. Where it cannot start, the relay goes on here. */
static void try_splice(struct wr_net_conn *c) {
  c->want_splice = true;
  stop_reading(&c->client);
  stop_reading(&c->upstream);
  if (c->client.queued > 0 || c->upstream.queued > 0)
    return;
  c->want_splice = false;
  if (wr_splice_start(c))
    return;
  c->client.paused = c->upstream.paused = false;
  relay_resume(&c->upstream);
  relay_resume(&c->client);
}

void wr_conn_relay(struct wr_net_conn *c) {
  if (c->closing)
    return;
  c->state = WR_CS_RELAY;
  c->last_active = uv_now(c->n->loop);
  uv_tcp_nodelay(&c->client.tcp, 1);
  uv_tcp_nodelay(&c->upstream.tcp, 1);
  uv_timer_start(&c->timer, on_timer, WR_IDLE_TIMEOUT_MS, 0);
  if (!c->sniffing)
    flush_held(c);
  if (splice_wanted(c)) {
    try_splice(c);
    return;
  }
  relay_resume(&c->upstream);
  relay_resume(&c->client);
}

/* The CONNECT tunnel's first client bytes were held for the SNI check and
 * passed it: send them, then relay as usual. */
void wr_conn_sni_passed(struct wr_net_conn *c) {
  c->sniffing = false;
  flush_held(c);
  if (c->closing)
    return;
  if (c->client.eof)
    on_eof(c, &c->client);
  else if (splice_wanted(c))
    try_splice(c);
  else
    relay_resume(&c->client);
}

/* ---- finishing ---------------------------------------------------------- */

static void discard_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct wr_net_side *s = h->data;

  (void)suggested;
  buf->base = s->c->n->discard;
  buf->len = sizeof(s->c->n->discard);
}

static void discard_read(uv_stream_t *stream, ssize_t nread,
                         const uv_buf_t *buf) {
  struct wr_net_side *s = stream->data;

  (void)buf;
  if (nread < 0)
    wr_conn_close(s->c);
}

/* After the FIN, what the client still sends is read and dropped for a
 * moment, so that unread bytes do not turn our close into a reset that
 * could destroy the answer before the client has read it. */
static void on_finish_shutdown(uv_shutdown_t *req, int status) {
  struct wr_net_side *s = req->handle->data;
  struct wr_net_conn *c = s->c;

  if (c->closing)
    return;
  if (status < 0 || s->eof) {
    wr_conn_close(c);
    return;
  }
  uv_timer_start(&c->timer, on_timer, WR_LINGER_MS, 0);
  if (uv_read_start((uv_stream_t *)&s->tcp, discard_alloc, discard_read) < 0)
    wr_conn_close(c);
}

void wr_conn_finish(struct wr_net_conn *c) {
  struct wr_net_side *s = &c->client;

  if (c->closing || c->state == WR_CS_FINISH)
    return;
  c->state = WR_CS_FINISH;
  if (c->allowed) {
    c->allowed = false;
    wr_conn_log(c, true, c->rule, c->reason, false);
  }
  wr_resolve_cancel(c->resolve);
  c->resolve = NULL;
  close_side(&c->upstream);
  uv_timer_start(&c->timer, on_timer, WR_LINGER_MS, 0);
  uv_read_stop((uv_stream_t *)&s->tcp);
  s->reading = false;
  if (s->shut) {
    wr_conn_close(c); /* the relay had already sent FIN */
    return;
  }
  s->shut = true;
  if (uv_shutdown(&s->shutdown, (uv_stream_t *)&s->tcp, on_finish_shutdown) < 0)
    wr_conn_close(c);
}

/* ---- time --------------------------------------------------------------- */

static void idle_check(struct wr_net_conn *c) {
  uint64_t now = uv_now(c->n->loop);
  uint64_t idle = now - c->last_active;

  if (idle >= WR_IDLE_TIMEOUT_MS) {
    wr_conn_close(c);
    return;
  }
  uv_timer_start(&c->timer, on_timer, WR_IDLE_TIMEOUT_MS - idle, 0);
}

static void on_timer(uv_timer_t *t) {
  struct wr_net_conn *c = t->data;

  if (c->closing)
    return;
  switch (c->state) {
  case WR_CS_SNIFF:
    wr_proxy_sniff_timer(c);
    break;
  case WR_CS_DECIDE:
  case WR_CS_DIAL:
    wr_conn_timed_out(c);
    break;
  case WR_CS_RELAY:
    idle_check(c);
    break;
  case WR_CS_HEAD:
  case WR_CS_WAKE: /* the sandbox did not wake in time */
  case WR_CS_HANDOVER:
  case WR_CS_FINISH:
    wr_conn_close(c);
    break;
  }
}

/* Phases before the relay start the same timer. */
void wr_conn_set_timer(struct wr_net_conn *c, uint64_t ms) {
  if (!c->closing)
    uv_timer_start(&c->timer, on_timer, ms, 0);
}
