/*
 * The engine's life: making it, attaching sandboxes (listeners inside their
 * network namespaces), swapping the policy and the secrets, and shutting
 * down.
 *
 * A socket keeps the network namespace it was made in, so the loop thread
 * steps into a sandbox's namespace only for the socket() call and steps
 * straight back; everything else (bind, listen, accept, the relay) works
 * on the socket from the host's namespace. Failing to step back would
 * leave the daemon dialing from inside a sandbox, so that aborts.
 *
 * Ownership: a sandbox (struct wr_net_sb) is counted: one reference while
 * attached, one per open listener handle, one per connection, interception
 * and DNS query in flight. Detaching drops the first, closes the handles
 * and cancels the interceptions; the struct goes when the last close
 * callback or interception report has run.
 */
#include "net/net_internal.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sched.h>

/* ---- sockets inside a namespace ----------------------------------------- */

int wr_net_socket_in_ns(int self_fd, int netns_fd, int domain, int type,
                        wr_error_t *err) {
  int fd, saved;

  if (setns(netns_fd, CLONE_NEWNET) < 0)
    return wr_error_set(err, errno, "enter the sandbox's network namespace");
  fd = socket(domain, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  saved = errno;
  if (setns(self_fd, CLONE_NEWNET) < 0) {
    wr_err("net: cannot return to the daemon's network namespace: %s",
           strerror(errno));
    abort();
  }
  if (fd < 0)
    return wr_error_set(err, saved, "socket in the sandbox's namespace");
  return fd;
}

/* The public form has no engine at hand, so it opens the calling thread's
 * own namespace for the call (the engine keeps one open instead). */
int wr_net_socket_in(int netns_fd, int domain, int type, wr_error_t *err) {
  _cleanup_close_ int self = -1;

  self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0)
    return wr_error_set(err, errno, "open /proc/thread-self/ns/net");
  return wr_net_socket_in_ns(self, netns_fd, domain, type, err);
}

/* ---- making and freeing ------------------------------------------------- */

/* The budget of buffers held for all sandboxes (held.c). */
static size_t held_budget(void) {
  _cleanup_free_ char *text = NULL;
  size_t len = 0;

  if (wr_read_file("/proc/sys/net/ipv4/tcp_mem", 4096, &text, &len, NULL) < 0)
    return WR_HELD_FALLBACK;
  return wr_net_held_budget(text, (size_t)sysconf(_SC_PAGESIZE));
}

int wr_net_new(const struct wr_net_config *cfg, struct wr_net **out,
               wr_error_t *err) {
  struct wr_net *n = xcalloc(1, sizeof(*n));

  n->loop = cfg->loop;
  n->log = cfg->log;
  n->log_arg = cfg->log_arg;
  n->activity = cfg->activity;
  n->wake = cfg->wake;
  n->hook_arg = cfg->hook_arg;
  n->hosts_file = cfg->hosts_file ? xstrdup(cfg->hosts_file) : NULL;
  n->self_netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (n->self_netns < 0) {
    wr_error_set(err, errno, "open /proc/thread-self/ns/net");
    wr_net_free(n);
    return -1;
  }
  if (cfg->ca_dir != NULL &&
      wr_tls_new(cfg->ca_dir, cfg->upstream_ca, &n->tls, err) < 0) {
    wr_error_wrap(err, "warren's CA");
    wr_net_free(n);
    return -1;
  }
  if (wr_resolve_init(n, cfg->resolvers, err) < 0) {
    wr_error_wrap(err, "the resolver");
    wr_net_free(n);
    return -1;
  }
  n->held_max = held_budget();
  *out = n;
  return 0;
}

static void detach_sb(struct wr_net_sb *sb);

void wr_net_shutdown(struct wr_net *n) {
  if (n->shut)
    return;
  n->shut = true;
  while (n->sandboxes != NULL)
    detach_sb(n->sandboxes);
  wr_ports_shutdown(n);
  wr_resolve_shutdown(n);
}

static void secrets_free(struct wr_secret *s, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (s[i].value != NULL)
      OPENSSL_cleanse(s[i].value, strlen(s[i].value));
    wr_secret_clear(&s[i]);
  }
  free(s);
}

void wr_net_free(struct wr_net *n) {
  if (n == NULL)
    return;
  if (n->policy != NULL)
    wr_policy_unref(n->policy);
  secrets_free(n->secrets, n->nsecrets);
  if (n->tls != NULL)
    wr_tls_free(n->tls);
  if (n->self_netns >= 0)
    close(n->self_netns);
  wr_resolve_free(n);
  wr_splice_free(n);
  free(n->self);
  free(n->hosts_file);
  free(n);
}

const char *wr_net_ca_pem(const struct wr_net *n) {
  return n->tls != NULL ? wr_tls_ca_pem(n->tls) : NULL;
}

void wr_net_emit(struct wr_net *n, struct wr_net_event *ev) {
  ev->time_ms = wr_now_ms();
  if (n->log != NULL)
    n->log(n->log_arg, ev);
}

/* ---- secrets ------------------------------------------------------------ */

void wr_net_secret_copy(struct wr_secret *dst, const struct wr_secret *src) {
  memset(dst, 0, sizeof(*dst));
  dst->service = src->service ? xstrdup(src->service) : NULL;
  dst->hosts = src->hosts ? wr_strv_dup(src->hosts) : NULL;
  dst->header = src->header ? xstrdup(src->header) : NULL;
  dst->prefix = src->prefix ? xstrdup(src->prefix) : NULL;
  dst->env = src->env ? wr_strv_dup(src->env) : NULL;
  dst->value = src->value ? xstrdup(src->value) : NULL;
}

void wr_net_set_secrets(struct wr_net *n, const struct wr_secret *s,
                        size_t count) {
  struct wr_secret *copy = count ? xcalloc(count, sizeof(*copy)) : NULL;

  for (size_t i = 0; i < count; i++)
    wr_net_secret_copy(&copy[i], &s[i]);
  secrets_free(n->secrets, n->nsecrets);
  n->secrets = copy;
  n->nsecrets = count;
}

const struct wr_secret *wr_net_secret_for(const struct wr_net *n,
                                          const char *host) {
  if (host == NULL || host[0] == '\0')
    return NULL;
  for (size_t i = 0; i < n->nsecrets; i++)
    for (char **h = n->secrets[i].hosts; h != NULL && *h != NULL; h++)
      if (strcmp(*h, host) == 0)
        return &n->secrets[i];
  return NULL;
}

/* ---- the policy --------------------------------------------------------- */

/* A connection that the new policy denies is closed, and the close is
 * logged as a denial (with what it had relayed); one still being decided
 * or dialed is refused as it would have been. Intercepted connections are
 * cancelled, and logged the same way once their threads have ended. */
static void recheck_conns(struct wr_net_sb *sb) {
  struct wr_net_conn *c = sb->conns, *next;

  for (; c != NULL; c = next) {
    struct wr_verdict v;
    _cleanup_free_ char *rule = NULL;
    char reason[256];

    next = c->next;
    if (c->closing || !wr_conn_kinds[c->kind].policed || wr_conn_recheck(c, &v))
      continue;
    rule = v.rule ? wr_rule_format(v.rule) : NULL;
    snprintf(reason, sizeof(reason), "policy changed: %s", v.reason);
    if (c->state == WR_CS_DECIDE || c->state == WR_CS_DIAL) {
      wr_conn_refuse(c, 403, rule, reason);
      continue;
    }
    c->allowed = false;
    wr_conn_log(c, false, rule, reason, false);
    wr_conn_close(c);
  }
  wr_icpt_recheck_all(sb);
}

void wr_net_set_policy(struct wr_net *n, struct wr_policy *p) {
  struct wr_policy *old = n->policy;

  n->policy = p ? wr_policy_ref(p) : NULL;
  if (old != NULL)
    wr_policy_unref(old);
  for (struct wr_net_sb *sb = n->sandboxes; sb != NULL; sb = sb->next)
    recheck_conns(sb);
}

/* ---- sandboxes ---------------------------------------------------------- */

void wr_net_sb_ref(struct wr_net_sb *sb) {
  sb->refs++;
}

void wr_net_sb_unref(struct wr_net_sb *sb) {
  if (--sb->refs > 0)
    return;
  if (sb->netns_fd >= 0)
    close(sb->netns_fd);
  free(sb->id);
  free(sb);
}

struct wr_net_sb *wr_net_sb_find(struct wr_net *n, const char *sandbox) {
  for (struct wr_net_sb *sb = n->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->id, sandbox) == 0)
      return sb;
  return NULL;
}

static void on_sb_handle_closed(uv_handle_t *h) {
  wr_net_sb_unref(h->data);
}

static void close_sb_handle(struct wr_net_sb *sb, uv_handle_t *h, bool *open) {
  if (!*open)
    return;
  *open = false;
  h->data = sb;
  uv_close(h, on_sb_handle_closed);
}

/* Close the listeners and every connection, and cancel the intercepted
 * ones; the struct goes when the last handle has closed and the last
 * interception has reported. Safe for a sandbox that never made it to the
 * list. */
static void detach_sb(struct wr_net_sb *sb) {
  struct wr_net *n = sb->n;

  if (sb->detached)
    return;
  sb->detached = true;
  if (sb->prev != NULL)
    sb->prev->next = sb->next;
  else if (n->sandboxes == sb)
    n->sandboxes = sb->next;
  if (sb->next != NULL)
    sb->next->prev = sb->prev;
  sb->prev = sb->next = NULL;
  close_sb_handle(sb, (uv_handle_t *)&sb->listen4, &sb->has4);
  close_sb_handle(sb, (uv_handle_t *)&sb->listen6, &sb->has6);
  close_sb_handle(sb, (uv_handle_t *)&sb->dns, &sb->has_dns);
  close_sb_handle(sb, (uv_handle_t *)&sb->dns_tcp, &sb->has_dns_tcp);
  wr_dns_close_all(sb);
  for (struct wr_net_conn *c = sb->conns; c != NULL; c = c->next)
    wr_conn_close(c);
  wr_icpt_cancel_all(sb);
  wr_net_sb_unref(sb);
}

/* A loopback socket inside the sandbox, bound to port. */
static int bound_socket(struct wr_net_sb *sb, int family, int type,
                        uint16_t port, wr_error_t *err) {
  _cleanup_close_ int fd = -1;
  struct sockaddr_storage ss;
  struct wr_net_addr lo = {.family = (sa_family_t)family};
  int one = 1;
  socklen_t len;

  fd = wr_net_socket_in_ns(sb->n->self_netns, sb->netns_fd, family, type, err);
  if (fd < 0)
    return -1;
  if (family == AF_INET)
    memcpy(lo.bytes, "\x7f\x00\x00\x01", 4);
  else
    lo.bytes[15] = 1;
  /* TCP only: a UDP socket with SO_REUSEADDR could be joined by another
   * (a sandbox process may bind low ports), which would get the queries. */
  if (type == SOCK_STREAM)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6 &&
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
    return wr_error_set(err, errno, "IPV6_V6ONLY");
  len = wr_net_addr_to_sockaddr(&lo, port, &ss);
  if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
    if (errno == EADDRINUSE)
      return wr_error_set(err, errno,
                          "port %u is taken in the sandbox's network "
                          "namespace",
                          port);
    return wr_error_set(err, errno, "bind %s port %u in the sandbox",
                        family == AF_INET ? "127.0.0.1" : "[::1]", port);
  }
  return steal_fd(&fd);
}

/* The handle counts as open (and holds a reference) from uv_tcp_init on,
 * so that detach_sb closes it whatever step failed. */
/* given: a listener made by the runtime (taken over), or -1 to make one. */
static int listen_on(struct wr_net_sb *sb, uv_tcp_t *tcp, bool *open,
                     int family, int given, wr_error_t *err) {
  int fd = given >= 0
               ? given
               : bound_socket(sb, family, SOCK_STREAM, WR_PROXY_PORT, err);
  int rc;

  if (fd < 0)
    return -1;
  uv_tcp_init(sb->n->loop, tcp);
  tcp->data = sb;
  *open = true;
  sb->refs++;
  rc = uv_tcp_open(tcp, fd);
  if (rc < 0) {
    close(fd);
    return wr_error_set(err, -rc, "open the proxy listener");
  }
  rc = uv_listen((uv_stream_t *)tcp, 511, wr_proxy_on_connection);
  if (rc < 0)
    return wr_error_set(err, -rc, "listen on port %u in the sandbox",
                        WR_PROXY_PORT);
  return 0;
}

/* Without IPv6 in the namespace, [::1] cannot be bound, and nothing can
 * leave over IPv6 either: the proxy then listens on IPv4 only. */
static int listen_v6(struct wr_net_sb *sb, const int *given, wr_error_t *err) {
  wr_error_t e6 = {0};

  if (given != NULL && given[1] < 0)
    return 0;
  if (listen_on(sb, &sb->listen6, &sb->has6, AF_INET6,
                given != NULL ? given[1] : -1, &e6) == 0)
    return 0;
  if (e6.code == EADDRNOTAVAIL || e6.code == EAFNOSUPPORT) {
    wr_debug("net: %s: no IPv6 proxy listener: %s", sb->id, e6.msg);
    close_sb_handle(sb, (uv_handle_t *)&sb->listen6, &sb->has6);
    return 0;
  }
  *err = e6;
  return -1;
}

static int dns_socket(struct wr_net_sb *sb, int given, wr_error_t *err) {
  int fd = given >= 0 ? given
                      : bound_socket(sb, AF_INET, SOCK_DGRAM, WR_DNS_PORT, err);
  int rc;

  if (fd < 0)
    return -1;
  uv_udp_init(sb->n->loop, &sb->dns);
  sb->dns.data = sb;
  sb->has_dns = true;
  sb->refs++;
  rc = uv_udp_open(&sb->dns, fd);
  if (rc < 0) {
    close(fd);
    return wr_error_set(err, -rc, "open the DNS socket");
  }
  /* uv_udp_open turns SO_REUSEADDR on, and on a UDP socket that lets a
   * second socket, a sandbox process's, bind the same port beside it. */
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){0}, sizeof(int)) < 0)
    return wr_error_set(err, errno, "clear SO_REUSEADDR on the DNS socket");
  return wr_dns_start(sb, err);
}

/* DNS over TCP. A sandbox started by an older warrend has no such
 * listener (given -1 with the others given): it then has UDP only. */
static int dns_tcp_socket(struct wr_net_sb *sb, const int *given,
                          wr_error_t *err) {
  int fd = given != NULL
               ? given[WR_NET_LISTEN_DNS_TCP]
               : bound_socket(sb, AF_INET, SOCK_STREAM, WR_DNS_PORT, err);
  int rc;

  if (given != NULL && fd < 0)
    return 0;
  if (fd < 0)
    return -1;
  uv_tcp_init(sb->n->loop, &sb->dns_tcp);
  sb->dns_tcp.data = sb;
  sb->has_dns_tcp = true;
  sb->refs++;
  rc = uv_tcp_open(&sb->dns_tcp, fd);
  if (rc < 0) {
    close(fd);
    return wr_error_set(err, -rc, "open the DNS TCP listener");
  }
  return wr_dns_tcp_start(sb, err);
}

/* Close the listeners a failed attach did not take over. */
static void close_given(const int *given, const bool *taken) {
  for (int i = 0; given != NULL && i < WR_NET_LISTENERS; i++)
    if (given[i] >= 0 && !taken[i])
      close(given[i]);
}

/* The sandbox joins the list only when every listener is up; on failure
 * what was opened is closed again through detach_sb. */
int wr_net_attach(struct wr_net *n, const char *sandbox, int netns_fd,
                  const int listen_fds[WR_NET_LISTENERS], wr_error_t *err) {
  struct wr_net_sb *sb;
  bool taken[WR_NET_LISTENERS] = {false};

  if (n->shut || wr_net_sb_find(n, sandbox) != NULL) {
    close_given(listen_fds, taken);
    if (n->shut)
      return wr_error_setx(err, ESHUTDOWN, "the network engine is shut down");
    return wr_error_setx(err, EEXIST, "sandbox `%s` is already attached",
                         sandbox);
  }
  sb = xcalloc(1, sizeof(*sb));
  sb->n = n;
  sb->id = xstrdup(sandbox);
  sb->refs = 1;
  sb->netns_fd = fcntl(netns_fd, F_DUPFD_CLOEXEC, 3);
  if (sb->netns_fd < 0) {
    wr_error_set(err, errno, "duplicate the network namespace fd");
    close_given(listen_fds, taken);
    wr_net_sb_unref(sb);
    return -1;
  }
  /* Each listen step owns its fd from the start, failing or not. */
  taken[0] = true;
  if (listen_on(sb, &sb->listen4, &sb->has4, AF_INET,
                listen_fds != NULL ? listen_fds[0] : -1, err) < 0 ||
      !(taken[1] = true) || listen_v6(sb, listen_fds, err) < 0 ||
      !(taken[2] = true) ||
      dns_socket(sb, listen_fds != NULL ? listen_fds[2] : -1, err) < 0 ||
      !(taken[3] = true) || dns_tcp_socket(sb, listen_fds, err) < 0) {
    close_given(listen_fds, taken);
    detach_sb(sb);
    return wr_error_wrap(err, "sandbox `%s`", sandbox);
  }
  sb->next = n->sandboxes;
  if (n->sandboxes != NULL)
    n->sandboxes->prev = sb;
  n->sandboxes = sb;
  return 0;
}

void wr_net_detach(struct wr_net *n, const char *sandbox) {
  struct wr_net_sb *sb = wr_net_sb_find(n, sandbox);

  if (sb != NULL)
    detach_sb(sb);
}

/* ---- refusing ----------------------------------------------------------- */

static void on_reject_closed(uv_handle_t *h) {
  free(h);
}

/* libuv stops accepting until the pending connection is taken, so a
 * connection beyond a cap is accepted and reset at once. */
void wr_net_reject(struct wr_net *n, uv_stream_t *server) {
  uv_tcp_t *tcp = xmalloc(sizeof(*tcp));
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  uv_os_fd_t fd;

  uv_tcp_init(n->loop, tcp);
  if (uv_accept(server, (uv_stream_t *)tcp) == 0 &&
      uv_fileno((uv_handle_t *)tcp, &fd) == 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  uv_close((uv_handle_t *)tcp, on_reject_closed);
}
