/*
 * Published ports: a listener on the host that forwards each connection to
 * 127.0.0.1:PORT inside a sandbox's network namespace.
 *
 * A publication outlives attach and detach: it finds its sandbox by id for
 * each connection, which is forwarded while the sandbox is attached and
 * closed otherwise. A connection for a paused sandbox waits, accepted,
 * while the daemon wakes it (the wake hook of net.h). The socket towards
 * the sandbox is made inside its namespace (wr_net_socket_in_ns) and
 * connected without blocking; from then on it is the same byte relay as the
 * proxy's tunnels, so WebSocket upgrades and any other protocol pass unchanged.
 * Unpublishing closes the listener and the connections it accepted.
 */
#include "net/net_internal.h"

static struct wr_net_pub *find_pub(struct wr_net *n, uint16_t host_port) {
  for (struct wr_net_pub *p = n->pubs; p != NULL; p = p->next)
    if (p->host_port == host_port)
      return p;
  return NULL;
}

static void on_pub_closed(uv_handle_t *h) {
  struct wr_net_pub *p = h->data;

  free(p->sandbox);
  free(p);
}

static void unlink_pub(struct wr_net_pub *p) {
  struct wr_net *n = p->n;

  if (p->prev != NULL)
    p->prev->next = p->next;
  else if (n->pubs == p)
    n->pubs = p->next;
  if (p->next != NULL)
    p->next->prev = p->prev;
  p->prev = p->next = NULL;
}

/* The connection goes to 127.0.0.1:port in the sandbox; dialing is the
 * proxy's (connect.c), with a socket made in the namespace. */
static void forward(struct wr_net_pub *p, struct wr_net_sb *sb,
                    uv_stream_t *server) {
  struct wr_net_conn *c = wr_conn_new(p->n, sb, WR_CONN_PORT);

  c->pub = p;
  if (uv_accept(server, (uv_stream_t *)&c->client.tcp) < 0) {
    wr_conn_close(c);
    return;
  }
  memset(&c->addrs[0], 0, sizeof(c->addrs[0]));
  c->addrs[0].family = AF_INET;
  memcpy(c->addrs[0].bytes, "\x7f\x00\x00\x01", 4);
  c->naddrs = 1;
  c->port = p->port;
  if (c->n->wake != NULL && !c->n->wake(c->n->hook_arg, sb->id)) {
    c->state = WR_CS_WAKE;
    wr_conn_set_timer(c, WR_WAKE_TIMEOUT_MS);
    return;
  }
  wr_conn_dial(c);
}

/* Closing is asynchronous (tunnel.c): the list stays whole meanwhile. */
void wr_net_woken(struct wr_net *n, const char *sandbox, bool ok) {
  struct wr_net_sb *sb = wr_net_sb_find(n, sandbox);

  if (sb == NULL)
    return;
  for (struct wr_net_conn *c = sb->conns; c != NULL; c = c->next) {
    if (c->closing || c->state != WR_CS_WAKE)
      continue;
    if (ok)
      wr_conn_dial(c);
    else
      wr_conn_reset(c);
  }
}

static void on_pub_connection(uv_stream_t *server, int status) {
  struct wr_net_pub *p = server->data;
  struct wr_net *n = p->n;
  struct wr_net_sb *sb;

  if (status < 0) {
    wr_debug("net: port %u: accept: %s", p->host_port, uv_strerror(status));
    return;
  }
  sb = wr_net_sb_find(n, p->sandbox);
  if (sb == NULL || n->nconns >= WR_CONNS_MAX) {
    wr_net_reject(n, server);
    return;
  }
  forward(p, sb, server);
}

static int listen_error(int rc, const char *addr, uint16_t port,
                        wr_error_t *err) {
  switch (rc) {
  case UV_EADDRINUSE:
    return wr_error_setx(err, EADDRINUSE, "port %u is in use on the host",
                         port);
  case UV_EACCES:
    return wr_error_setx(err, EACCES, "port %u needs privileges on the host",
                         port);
  case UV_EADDRNOTAVAIL:
    return wr_error_setx(err, EADDRNOTAVAIL,
                         "%s is not an address of this host", addr);
  default:
    return wr_error_set(err, -rc, "listen on %s port %u", addr, port);
  }
}

static int bind_listen(struct wr_net_pub *p, const char *addr,
                       wr_error_t *err) {
  struct sockaddr_storage ss;
  int rc;

  wr_net_addr_to_sockaddr(&p->addr, p->host_port, &ss);
  rc = uv_tcp_bind(&p->listener, (const struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&p->listener, 511, on_pub_connection);
  if (rc < 0)
    return listen_error(rc, addr, p->host_port, err);
  return 0;
}

/* A failed bind leaves nothing behind: the handle is closed and freed, and
 * the publication never joins the list. */
int wr_net_publish(struct wr_net *n, const char *sandbox, const char *addr,
                   uint16_t host_port, uint16_t port, wr_error_t *err) {
  struct wr_net_pub *p;
  struct wr_net_addr a;

  if (addr == NULL)
    addr = "127.0.0.1";
  if (n->shut)
    return wr_error_setx(err, ESHUTDOWN, "the network engine is shut down");
  if (host_port == 0 || port == 0)
    return wr_error_setx(err, EINVAL, "a port must be between 1 and 65535");
  if (!wr_net_parse_ip(addr, &a))
    return wr_error_setx(err, EINVAL, "`%s` is not an IP address", addr);
  if (find_pub(n, host_port) != NULL)
    return wr_error_setx(err, EEXIST, "port %u is already published",
                         host_port);
  p = xcalloc(1, sizeof(*p));
  p->n = n;
  p->sandbox = xstrdup(sandbox);
  p->addr = a;
  p->host_port = host_port;
  p->port = port;
  uv_tcp_init(n->loop, &p->listener);
  p->listener.data = p;
  if (bind_listen(p, addr, err) < 0) {
    uv_close((uv_handle_t *)&p->listener, on_pub_closed);
    return -1;
  }
  p->next = n->pubs;
  if (n->pubs != NULL)
    n->pubs->prev = p;
  n->pubs = p;
  return 0;
}

/* The connections this publication accepted go with it. */
static void close_pub(struct wr_net_pub *p) {
  for (struct wr_net_sb *sb = p->n->sandboxes; sb != NULL; sb = sb->next)
    for (struct wr_net_conn *c = sb->conns; c != NULL; c = c->next)
      if (c->pub == p) {
        c->pub = NULL;
        wr_conn_close(c);
      }
  unlink_pub(p);
  uv_close((uv_handle_t *)&p->listener, on_pub_closed);
}

int wr_net_unpublish(struct wr_net *n, const char *sandbox, uint16_t host_port,
                     wr_error_t *err) {
  struct wr_net_pub *p = find_pub(n, host_port);

  if (p == NULL || strcmp(p->sandbox, sandbox) != 0)
    return wr_error_setx(err, ENOENT,
                         "port %u is not published for sandbox `%s`", host_port,
                         sandbox);
  close_pub(p);
  return 0;
}

void wr_ports_shutdown(struct wr_net *n) {
  while (n->pubs != NULL)
    close_pub(n->pubs);
}
