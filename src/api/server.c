/*
 * The server object: routes, limits, listeners (unix and TCP), accepting
 * and adopting connections, and shutting everything down.
 */
#include "api/api_internal.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define BACKLOG 511

static int check_routes(const struct wr_http_route *routes, size_t n,
                        wr_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    const struct wr_http_route *r = &routes[i];
    if (r->method == NULL || r->pattern == NULL || r->fn == NULL ||
        r->pattern[0] != '/')
      return wr_error_set(err, 0, "route %zu is incomplete", i);
  }
  return 0;
}

static void override_limits(struct wr_http_limits *l,
                            const struct wr_http_limits *given) {
  if (given->max_header_bytes)
    l->max_header_bytes = given->max_header_bytes;
  if (given->max_body_bytes)
    l->max_body_bytes = given->max_body_bytes;
  if (given->max_conns)
    l->max_conns = given->max_conns;
  if (given->header_timeout_ms)
    l->header_timeout_ms = given->header_timeout_ms;
  if (given->idle_timeout_ms)
    l->idle_timeout_ms = given->idle_timeout_ms;
  l->max_untrusted_conns = given->max_untrusted_conns;
}

/* The untrusted share keeps an eighth of the connections (at least one)
 * for the unix socket. */
static void set_limits(struct wr_http_limits *l,
                       const struct wr_http_limits *given) {
  static const struct wr_http_limits defaults = {
      .max_header_bytes = 16 * 1024,
      .max_body_bytes = 1024 * 1024,
      .max_conns = 1024,
      .header_timeout_ms = 10 * 1000,
      .idle_timeout_ms = 60 * 1000,
  };

  *l = defaults;
  if (given != NULL)
    override_limits(l, given);
  if (l->max_untrusted_conns == 0 || l->max_untrusted_conns > l->max_conns)
    l->max_untrusted_conns =
        l->max_conns - WR_MIN(l->max_conns - 1, WR_MAX(1u, l->max_conns / 8));
}

/*
 * libuv writes to sockets with write(2), so a client that goes away while
 * a response is being written raises SIGPIPE, which by default kills the
 * process: any client could stop the daemon. A process serving HTTP must
 * ignore it; this is done here unless the program chose a handler itself.
 */
static void ignore_sigpipe(void) {
  struct sigaction old;
  struct sigaction ign = {.sa_handler = SIG_IGN};

  if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
    sigaction(SIGPIPE, &ign, NULL);
}

int wr_http_server_new(uv_loop_t *loop, const struct wr_http_route *routes,
                       size_t nroutes, void *ctx,
                       const struct wr_http_limits *limits,
                       wr_http_server_t **out, wr_error_t *err) {
  wr_http_server_t *srv;

  if (check_routes(routes, nroutes, err) < 0)
    return -1;
  ignore_sigpipe();
  srv = xcalloc(1, sizeof(*srv));
  srv->loop = loop;
  srv->routes = routes;
  srv->nroutes = nroutes;
  srv->ctx = ctx;
  set_limits(&srv->limits, limits);
  *out = srv;
  return 0;
}

/* ---- listeners ---------------------------------------------------------- */

/* The server is freed when it is closing and its last handle is gone. */
static void maybe_free_server(wr_http_server_t *srv) {
  if (!srv->closing || srv->open_handles > 0)
    return;
  if (srv->close_cb != NULL)
    srv->close_cb(srv->close_arg);
  free(srv);
}

void wr_api_server_handle_closed(wr_http_server_t *srv) {
  srv->open_handles--;
  maybe_free_server(srv);
}

static void on_listener_closed(uv_handle_t *h) {
  struct wr_http_listener *l = h->data;
  wr_http_server_t *srv = l->srv;

  free(l->path);
  free(l);
  wr_api_server_handle_closed(srv);
}

static struct wr_http_listener *listener_new(wr_http_server_t *srv,
                                             bool trusted, bool tcp) {
  struct wr_http_listener *l = xcalloc(1, sizeof(*l));

  l->srv = srv;
  l->trusted = trusted;
  if (tcp)
    uv_tcp_init(srv->loop, &l->io.tcp);
  else
    uv_pipe_init(srv->loop, &l->io.pipe, 0);
  l->io.handle.data = l;
  srv->open_handles++;
  return l;
}

/*
 * Untrusted clients share a smaller budget than the whole, so a flood of
 * TCP connections that never send a request (slowloris) is refused at
 * accept while the root-only unix socket keeps its reserve.
 */
bool wr_api_server_has_room(const wr_http_server_t *srv, bool trusted) {
  if (srv->closing || srv->nactive >= srv->limits.max_conns)
    return false;
  return trusted || srv->nuntrusted < srv->limits.max_untrusted_conns;
}

static void on_connection(uv_stream_t *server, int status) {
  struct wr_http_listener *l = server->data;
  wr_http_server_t *srv = l->srv;
  bool tcp = l->io.handle.type == UV_TCP;
  struct wr_http_conn *c;

  if (status < 0) {
    wr_warn("http: accept: %s", uv_strerror(status));
    return;
  }
  c = wr_api_conn_new(srv, l->trusted, tcp);
  if (uv_accept(server, &c->io.stream) < 0) {
    wr_api_conn_close(c);
    return;
  }
  if (!wr_api_server_has_room(srv, l->trusted)) {
    wr_debug("http: refusing a connection: %u are open (%u untrusted)",
             srv->nactive, srv->nuntrusted);
    wr_api_conn_close(c);
    return;
  }
  if (tcp)
    uv_tcp_nodelay(&c->io.tcp, 1);
  wr_api_conn_start(c);
}

static void unlink_own(const struct wr_http_listener *l);

/* Start listening; on failure the listener is closed and freed. */
static int start_listener(struct wr_http_listener *l, const char *what,
                          wr_error_t *err) {
  int r = uv_listen(&l->io.stream, BACKLOG, on_connection);

  if (r < 0) {
    unlink_own(l);
    uv_close(&l->io.handle, on_listener_closed);
    return wr_error_set(err, -r, "listen on %s", what);
  }
  l->next = l->srv->listeners;
  l->srv->listeners = l;
  return 0;
}

int wr_http_unix_listener(const char *path, pid_t *pid, wr_error_t *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  struct ucred cred = {0};
  socklen_t len = sizeof(cred);
  _cleanup_close_ int fd = -1;
  struct stat st;

  *pid = 0;
  if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
    return 0;
  if (wr_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) < 0)
    return wr_error_set(err, 0, "socket path `%s` is too long", path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return wr_error_set(err, errno, "socket");
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    /* A full backlog (EAGAIN) is a listener too busy to accept. */
    if (errno == ECONNREFUSED || errno == ENOENT)
      return 0;
    if (errno != EAGAIN)
      return wr_error_set(err, errno, "connect to `%s`", path);
    return 1;
  }
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
    *pid = cred.pid;
  return 1;
}

/* The socket file may be replaced only when nobody listens on it. */
static int check_replaceable(const char *path, wr_error_t *err) {
  struct stat st;
  pid_t pid = 0;
  int live;

  if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
    return wr_error_set(err, 0, "`%s` exists and is not a socket", path);
  live = wr_http_unix_listener(path, &pid, err);
  if (live < 0)
    return -1;
  if (live > 0)
    return wr_error_setx(err, EADDRINUSE,
                         "`%s` is served by a running process (pid %d)", path,
                         (int)pid);
  return 0;
}

/*
 * Bind under a temporary name, set the mode, then rename over `path`: the
 * socket never exists at `path` with the process's umask, and a stale
 * socket left by a previous daemon is replaced in one step. The inode is
 * noted, so that closing removes this socket and never one that another
 * process put there since.
 */
static int bind_unix(struct wr_http_listener *l, const char *path, int mode,
                     wr_error_t *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  _cleanup_free_ char *tmp = xasprintf("%s.%d.tmp", path, (int)getpid());
  _cleanup_close_ int fd = -1;
  struct stat st;

  if (check_replaceable(path, err) < 0)
    return -1;
  if (wr_strlcpy(sa.sun_path, tmp, sizeof(sa.sun_path)) < 0)
    return wr_error_set(err, 0, "socket path `%s` is too long", path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return wr_error_set(err, errno, "socket");
  unlink(tmp);
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
    return wr_error_set(err, errno, "bind `%s`", tmp);
  if (chmod(tmp, (mode_t)mode) < 0 || lstat(tmp, &st) < 0 ||
      rename(tmp, path) < 0) {
    int e = errno;
    unlink(tmp);
    return wr_error_set(err, e, "install socket `%s`", path);
  }
  l->path = xstrdup(path);
  l->dev = st.st_dev;
  l->ino = st.st_ino;
  return steal_fd(&fd);
}

/* Remove the socket file if it is still the one this listener made. */
static void unlink_own(const struct wr_http_listener *l) {
  struct stat st;

  if (l->path == NULL || lstat(l->path, &st) < 0)
    return;
  if (st.st_dev == l->dev && st.st_ino == l->ino)
    unlink(l->path);
  else
    wr_info("http: `%s` is another socket now; left in place", l->path);
}

int wr_http_listen_unix(wr_http_server_t *srv, const char *path, int mode,
                        wr_error_t *err) {
  struct wr_http_listener *l = listener_new(srv, true, false);
  int fd, r;

  fd = bind_unix(l, path, mode, err);
  if (fd < 0) {
    uv_close(&l->io.handle, on_listener_closed);
    return wr_error_wrap(err, "listen on `%s`", path);
  }
  r = uv_pipe_open(&l->io.pipe, fd);
  if (r < 0) {
    close(fd);
    unlink_own(l);
    uv_close(&l->io.handle, on_listener_closed);
    return wr_error_set(err, -r, "listen on `%s`", path);
  }
  return start_listener(l, path, err);
}

/* "127.0.0.1:7070" or "[::1]:7070" into a socket address. */
static int parse_tcp_addr(const char *addr, struct sockaddr_storage *ss,
                          wr_error_t *err) {
  _cleanup_free_ char *host = NULL;
  const char *colon = strrchr(addr, ':');
  uint64_t port;
  bool v6 = addr[0] == '[';

  if (colon == NULL || (v6 && (colon == addr || colon[-1] != ']')))
    return wr_error_set(err, 0, "invalid address `%s` (HOST:PORT)", addr);
  if (wr_parse_u64(colon + 1, 0, 65535, &port, err) < 0)
    return wr_error_wrap(err, "port of `%s`", addr);
  host = v6 ? xstrndup(addr + 1, (size_t)(colon - addr - 2))
            : xstrndup(addr, (size_t)(colon - addr));
  if (v6 ? uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) < 0
         : uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) < 0)
    return wr_error_set(err, 0, "invalid address `%s`", addr);
  return 0;
}

int wr_http_listen_tcp(wr_http_server_t *srv, const char *addr,
                       const char *api_key, wr_error_t *err) {
  struct sockaddr_storage ss = {0};
  struct wr_http_listener *l;
  int r;

  if (api_key == NULL || api_key[0] == '\0')
    return wr_error_set(err, 0, "listening on TCP needs an API key");
  if (parse_tcp_addr(addr, &ss, err) < 0)
    return -1;
  l = listener_new(srv, false, true);
  r = uv_tcp_bind(&l->io.tcp, (struct sockaddr *)&ss,
                  ss.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
  if (r < 0) {
    uv_close(&l->io.handle, on_listener_closed);
    return wr_error_set(err, -r, "bind %s", addr);
  }
  if (start_listener(l, addr, err) < 0)
    return -1;
  SHA256((const unsigned char *)api_key, strlen(api_key), srv->key_digest);
  srv->has_key = true;
  return 0;
}

int wr_http_server_tcp_port(const wr_http_server_t *srv) {
  for (struct wr_http_listener *l = srv->listeners; l != NULL; l = l->next) {
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (l->io.handle.type != UV_TCP ||
        uv_tcp_getsockname(&l->io.tcp, (struct sockaddr *)&ss, &len) < 0)
      continue;
    if (ss.ss_family == AF_INET)
      return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  return -1;
}

/* ---- adopting a connected socket ---------------------------------------- */

static int socket_family(int fd, wr_error_t *err) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  int type;
  socklen_t tlen = sizeof(type);

  if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0)
    return wr_error_set(err, errno, "adopt fd %d", fd);
  if (type != SOCK_STREAM)
    return wr_error_set(err, 0, "adopt fd %d: not a stream socket", fd);
  if (ss.ss_family != AF_UNIX && ss.ss_family != AF_INET &&
      ss.ss_family != AF_INET6)
    return wr_error_set(err, 0, "adopt fd %d: unsupported family", fd);
  return ss.ss_family;
}

int wr_http_server_adopt(wr_http_server_t *srv, int fd, bool trusted,
                         wr_error_t *err) {
  _cleanup_close_ int owned = fd;
  struct wr_http_conn *c;
  int family, r;

  family = socket_family(fd, err);
  if (family < 0)
    return -1;
  if (!wr_api_server_has_room(srv, trusted))
    return wr_error_set(err, 0, "adopt fd %d: too many connections", fd);
  if (wr_set_cloexec(fd) < 0)
    return wr_error_set(err, errno, "adopt fd %d", fd);
  c = wr_api_conn_new(srv, trusted, family != AF_UNIX);
  r = family == AF_UNIX ? uv_pipe_open(&c->io.pipe, fd)
                        : uv_tcp_open(&c->io.tcp, fd);
  if (r < 0) {
    wr_api_conn_close(c);
    return wr_error_set(err, -r, "adopt fd %d", fd);
  }
  steal_fd(&owned);
  wr_api_conn_start(c);
  return 0;
}

/* ---- shutting down ------------------------------------------------------ */

void wr_http_server_close(wr_http_server_t *srv, void (*cb)(void *arg),
                          void *arg) {
  struct wr_http_listener *l = srv->listeners;
  struct wr_http_conn *c = srv->conns;

  if (srv->closing)
    return;
  srv->closing = true;
  srv->close_cb = cb;
  srv->close_arg = arg;
  srv->listeners = NULL;
  while (l != NULL) {
    struct wr_http_listener *next = l->next;
    unlink_own(l);
    uv_close(&l->io.handle, on_listener_closed);
    l = next;
  }
  while (c != NULL) {
    struct wr_http_conn *next = c->next;
    wr_api_conn_close(c);
    c = next;
  }
  maybe_free_server(srv);
}
