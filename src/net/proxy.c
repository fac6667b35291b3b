/*
 * The proxy listeners inside a sandbox: what a new connection is, and what
 * it asks for.
 *
 * A connection reaches 127.0.0.1:3128 (or [::1]:3128) either because the
 * client spoke to the proxy (its original destination is the listener
 * itself) or because the namespace's filter rules redirected it there
 * (SO_ORIGINAL_DST says where it was going).
 *
 *  - An explicit client sends an HTTP/1.1 request head: CONNECT host:port
 *    opens a tunnel; GET http://host/... is forwarded as one request, in
 *    origin-form with "Connection: close", and the connection ends with
 *    the response (one request per connection: clients open another).
 *  - A redirected client is judged by its first bytes: a TLS ClientHello's
 *    SNI, or, for anything else (or silence for WR_SNIFF_WAIT_MS, as when
 *    the server speaks first), the original address without a name; the
 *    bytes read are sent upstream first, then the rest as it comes. An
 *    HTTP request is handled as an absolute-URI one instead: its head is
 *    checked the same way, its Host header names the destination (on the
 *    original port), and that one request is forwarded. A second request
 *    on the connection, which could name any host, never reaches the
 *    upstream.
 *
 * A connection's states, in order (a refusal can end any of them):
 *   HEAD or SNIFF -> DECIDE (name, resolve, every address) -> DIAL
 *   -> RELAY (tunnel.c) -> closed;  or DECIDE -> HANDOVER -> closed, the
 *   socket now owned by the interception thread (intercept.c).
 */
#include "net/net_internal.h"

#define WR_SO_ORIGINAL_DST 80      /* <linux/netfilter_ipv4.h> */
#define WR_IP6T_SO_ORIGINAL_DST 80 /* <linux/netfilter_ipv6/ip6_tables.h> */

/* ---- where the client was going ---------------------------------------- */

static bool is_listener(const struct wr_net_addr *a, uint16_t port) {
  static const uint8_t v6_loopback[16] = {[15] = 1};

  if (port != WR_PROXY_PORT)
    return false;
  if (a->family == AF_INET)
    return memcmp(a->bytes, "\x7f\x00\x00\x01", 4) == 0;
  return memcmp(a->bytes, v6_loopback, 16) == 0;
}

/*
 * The original destination of a redirected connection. Without a NAT entry
 * (no filter rules, or a direct connection) the kernel has none to give,
 * and then the client connected to the listener itself.
 */
static bool redirected(struct wr_net_conn *c) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  uv_os_fd_t fd;
  int rc;

  if (uv_fileno((uv_handle_t *)&c->client.tcp, &fd) < 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
    return false;
  len = sizeof(ss);
  if (ss.ss_family == AF_INET)
    rc = getsockopt(fd, SOL_IP, WR_SO_ORIGINAL_DST, &ss, &len);
  else
    rc = getsockopt(fd, SOL_IPV6, WR_IP6T_SO_ORIGINAL_DST, &ss, &len);
  if (rc < 0 || !wr_net_addr_from_sockaddr((struct sockaddr *)&ss, &c->orig,
                                           &c->orig_port))
    return false;
  return !is_listener(&c->orig, c->orig_port);
}

/* ---- reading the first bytes -------------------------------------------- */

static void in_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct wr_net_side *s = h->data;
  struct wr_net_conn *c = s->c;

  (void)suggested;
  buf->base = c->in + c->in_len;
  buf->len = WR_IN_MAX - c->in_len;
}

/* Refused heads are logged like any other denial; the host is named when
 * the head got far enough to say it. */
static void head_refused(struct wr_net_conn *c) {
  struct wr_proxy_head *h = c->head;

  if (h->host[0] != '\0' && !h->host_is_ip)
    wr_strlcpy(c->host, h->host, sizeof(c->host));
  c->port = h->port;
  wr_conn_refuse(c, h->status, NULL, h->error);
}

/*
 * Parse what has arrived of a head; once it is whole, refuse it or decide
 * on what it names. The bytes land in c->in, which does not move, so the
 * parser works on it in place. A redirected client's own destination is
 * what it dials when its Host header holds an address: an address there
 * changes nothing.
 */
static void head_step(struct wr_net_conn *c) {
  struct wr_proxy_head *h = c->head;
  int rc = wr_proxy_head_feed(h, c->in, c->in_len);

  if (rc == 0)
    return;
  if (!h->transparent)
    c->kind = h->parser.method == HTTP_CONNECT ? WR_CONN_CONNECT : WR_CONN_HTTP;
  if (rc < 0) {
    head_refused(c);
    return;
  }
  c->in_off = h->head_len;
  if (h->host_is_ip && h->transparent)
    wr_conn_decide(c, NULL, &c->orig, h->port);
  else if (h->host_is_ip)
    wr_conn_decide(c, NULL, &h->host_addr, h->port);
  else
    wr_conn_decide(c, h->host, NULL, h->port);
}

static void head_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  struct wr_net_side *s = stream->data;
  struct wr_net_conn *c = s->c;

  (void)buf;
  if (nread == 0 || c->closing)
    return;
  if (nread < 0) {
    wr_conn_close(c);
    return;
  }
  c->in_len += (size_t)nread;
  head_step(c);
}

static void start_head(struct wr_net_conn *c) {
  c->state = WR_CS_HEAD;
  c->head = xmalloc(sizeof(*c->head));
  wr_proxy_head_init(c->head, false, 0);
  wr_conn_set_timer(c, WR_FIRST_BYTES_MS);
  if (uv_read_start((uv_stream_t *)&c->client.tcp, in_alloc, head_read) < 0)
    wr_conn_close(c);
}

/* Decide as soon as the first bytes say what they are; an HTTP request
 * then needs its whole head. */
static void sniff_step(struct wr_net_conn *c) {
  char sni[WR_HOST_MAX];

  if (c->head != NULL) {
    head_step(c);
    return;
  }
  switch (wr_sniff_client((const uint8_t *)c->in, c->in_len, sni)) {
  case WR_SNIFF_MORE:
    return;
  case WR_SNIFF_TLS:
    c->tls = true;
    if (sni[0] != '\0')
      wr_conn_decide_name(c, sni, c->orig_port);
    else
      wr_conn_decide(c, NULL, &c->orig, c->orig_port);
    return;
  case WR_SNIFF_HTTP:
    c->http = true;
    c->head = xmalloc(sizeof(*c->head));
    wr_proxy_head_init(c->head, true, c->orig_port);
    head_step(c);
    return;
  case WR_SNIFF_OTHER:
    wr_conn_decide(c, NULL, &c->orig, c->orig_port);
    return;
  }
}

static void sniff_read(uv_stream_t *stream, ssize_t nread,
                       const uv_buf_t *buf) {
  struct wr_net_side *s = stream->data;
  struct wr_net_conn *c = s->c;

  (void)buf;
  if (nread == 0 || c->closing)
    return;
  if (nread < 0) {
    wr_conn_close(c);
    return;
  }
  c->in_len += (size_t)nread;
  c->got_bytes = true;
  sniff_step(c);
}

/* Silence for WR_SNIFF_WAIT_MS: a protocol where the server speaks first
 * (SSH, SMTP). Bytes that began but never finished a ClientHello or a head
 * within WR_FIRST_BYTES_MS: give up. */
void wr_proxy_sniff_timer(struct wr_net_conn *c) {
  uint64_t now = uv_now(c->n->loop);

  if (!c->got_bytes) {
    wr_conn_decide(c, NULL, &c->orig, c->orig_port);
    return;
  }
  if (now >= c->deadline) {
    wr_conn_reset(c);
    return;
  }
  wr_conn_set_timer(c, c->deadline - now);
}

static void start_sniff(struct wr_net_conn *c) {
  c->kind = WR_CONN_TCP;
  c->state = WR_CS_SNIFF;
  c->port = c->orig_port;
  c->deadline = uv_now(c->n->loop) + WR_FIRST_BYTES_MS;
  wr_conn_set_timer(c, WR_SNIFF_WAIT_MS);
  if (uv_read_start((uv_stream_t *)&c->client.tcp, in_alloc, sniff_read) < 0)
    wr_conn_close(c);
}

/* Connections beyond the caps, or beyond what the budgets of held buffers
 * allow (held.c), are reset before anything is read. */
void wr_proxy_on_connection(uv_stream_t *server, int status) {
  struct wr_net_sb *sb = server->data;
  struct wr_net *n = sb->n;
  struct wr_net_conn *c;

  if (status < 0) {
    wr_debug("net: %s: accept: %s", sb->id, uv_strerror(status));
    return;
  }
  if (sb->detached || n->nconns >= WR_CONNS_MAX ||
      sb->nconns >= WR_CONNS_PER_SANDBOX ||
      !wr_net_can_hold(n, sb, wr_conn_base_held())) {
    wr_debug("net: %s: connection refused (limit reached)", sb->id);
    wr_net_reject(n, server);
    return;
  }
  c = wr_conn_new(n, sb, WR_CONN_EXPLICIT);
  wr_conn_hold(c, wr_conn_base_held());
  wr_conn_choose_tier(c);
  if (uv_accept(server, (uv_stream_t *)&c->client.tcp) < 0) {
    wr_conn_close(c);
    return;
  }
  wr_conn_size_client(c);
  c->in = xmalloc(WR_IN_MAX + 1);
  if (redirected(c))
    start_sniff(c);
  else
    start_head(c);
}

/* ---- connected upstream ------------------------------------------------- */

/* The head's bytes go; those after it (the first bytes of the tunnel)
 * move to the front of the buffer. */
static void drop_head(struct wr_net_conn *c) {
  memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
  c->in_len -= c->in_off;
  c->in_off = 0;
  free(c->head);
  c->head = NULL;
}

static void connected_connect(struct wr_net_conn *c) {
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

  drop_head(c);
  wr_conn_write(c, &c->client, xmemdup(ok, sizeof(ok) - 1), sizeof(ok) - 1);
  c->sniffing = c->host[0] != '\0';
  wr_conn_relay(c);
  if (c->sniffing && c->in_len > 0 && !c->closing)
    wr_conn_sni_check(c);
}

/* The request goes in origin-form, then those of the bytes read after its
 * head that belong to its body; the body's remainder follows through the
 * relay (tunnel.c, body_filter), and nothing after it. */
static void connected_http(struct wr_net_conn *c) {
  struct wr_proxy_head *h = c->head;
  size_t extra = c->in_len - h->head_len, used = 0;
  wr_buf_t out;
  size_t len;
  char *data;

  wr_buf_init(&out);
  wr_proxy_head_forward(h, &out);
  data = wr_buf_steal(&out, &len);
  c->upstream.sent += len;
  wr_conn_write(c, &c->upstream, data, len);
  if (wr_proxy_body_feed(h, c->in + h->head_len, extra, &used) < 0) {
    wr_conn_close(c);
    return;
  }
  c->in_off = h->head_len;
  c->in_len = h->head_len + used;
  c->client.done = h->body_done;
  wr_conn_relay(c);
}

void wr_proxy_connected(struct wr_net_conn *c) {
  if (c->closing)
    return;
  c->allowed = wr_conn_kinds[c->kind].policed;
  if (wr_conn_one_request(c)) {
    connected_http(c);
  } else if (c->kind == WR_CONN_CONNECT) {
    connected_connect(c);
  } else {
    c->in_off = 0;
    wr_conn_relay(c);
  }
}
