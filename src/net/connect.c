/*
 * Deciding where a connection may go, and getting it there.
 *
 * A decision is a pipeline: the name alone (deny early, before any DNS
 * traffic), then every address the name resolves to (one denied address
 * denies the lot, so that a name cannot mix a public address with a
 * private one and hope the dialer picks the private one), then a dial of
 * exactly the addresses that were checked, in order, within one
 * WR_CONNECT_TIMEOUT_MS budget. A host with a secret is handed to TLS
 * interception instead of being dialed here.
 *
 * Addresses of this host's own interfaces count as not public: a sandbox
 * must not reach the daemon's API or anything else listening on the host
 * through the host's public address, unless a rule names it.
 */
#include "net/net_internal.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <openssl/crypto.h>

/* ---- this host's addresses ---------------------------------------------- */

static void self_refresh(struct wr_net *n) {
  uint64_t now = uv_now(n->loop);
  struct ifaddrs *list = NULL;

  if (n->self_known && now - n->self_at < WR_SELF_ADDRS_MS)
    return;
  if (getifaddrs(&list) < 0) {
    wr_debug("net: getifaddrs: %s", strerror(errno));
    return;
  }
  n->nself = 0;
  for (struct ifaddrs *i = list; i != NULL; i = i->ifa_next) {
    struct wr_net_addr a;
    if (i->ifa_addr == NULL ||
        !wr_net_addr_from_sockaddr(i->ifa_addr, &a, NULL))
      continue;
    n->self = xrealloc(n->self, (n->nself + 1) * sizeof(*n->self));
    n->self[n->nself++] = a;
  }
  freeifaddrs(list);
  n->self_known = true;
  n->self_at = now;
}

static bool same_addr(const struct wr_net_addr *a,
                      const struct wr_net_addr *b) {
  size_t len = a->family == AF_INET ? 4 : 16;

  return a->family == b->family && memcmp(a->bytes, b->bytes, len) == 0;
}

/* ::ffff:a.b.c.d reaches a.b.c.d. */
static bool unmap(const struct wr_net_addr *a, struct wr_net_addr *v4) {
  static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};

  if (a->family != AF_INET6 || memcmp(a->bytes, mapped, 12) != 0)
    return false;
  memset(v4, 0, sizeof(*v4));
  v4->family = AF_INET;
  memcpy(v4->bytes, a->bytes + 12, 4);
  return true;
}

static bool is_self(struct wr_net *n, const struct wr_net_addr *a) {
  struct wr_net_addr v4;
  bool mapped = unmap(a, &v4);

  self_refresh(n);
  for (size_t i = 0; i < n->nself; i++)
    if (same_addr(&n->self[i], a) || (mapped && same_addr(&n->self[i], &v4)))
      return true;
  return false;
}

/* Whether an IP or CIDR allow rule that applies to this sandbox and port
 * covers a: the policy's own matching, on the address alone (only such
 * rules match an address). */
static bool rule_names(const struct wr_policy *p, const char *sandbox,
                       const struct wr_net_addr *a, uint16_t port) {
  struct wr_verdict v;

  wr_policy_check(p, sandbox, NULL, a, port, &v);
  return v.allow && v.rule != NULL &&
         (v.rule->kind == WR_RULE_IP || v.rule->kind == WR_RULE_CIDR);
}

void wr_net_check(struct wr_net *n, const char *sandbox, const char *host,
                  const struct wr_net_addr *addr, uint16_t port,
                  struct wr_verdict *v) {
  char text[INET6_ADDRSTRLEN];

  memset(v, 0, sizeof(*v));
  if (n->policy == NULL) {
    snprintf(v->reason, sizeof(v->reason), "no network policy is loaded");
    return;
  }
  wr_policy_check(n->policy, sandbox, host, addr, port, v);
  if (!v->allow || addr == NULL || !is_self(n, addr) ||
      rule_names(n->policy, sandbox, addr, port))
    return;
  wr_net_addr_format(addr, text, sizeof(text));
  v->allow = false;
  v->rule = NULL;
  snprintf(v->reason, sizeof(v->reason),
           "%s is an address of this host and no rule names it", text);
}

/* ---- answers ------------------------------------------------------------ */

static const char *status_text(int status) {
  switch (status) {
  case 400:
    return "Bad Request";
  case 403:
    return "Forbidden";
  case 431:
    return "Request Header Fields Too Large";
  case 502:
    return "Bad Gateway";
  case 504:
    return "Gateway Timeout";
  default:
    return "Error";
  }
}

/* The client spoke HTTP to the proxy, or, redirected, sent an HTTP request
 * of its own: either way it can read an answer. */
static bool speaks_http(const struct wr_net_conn *c) {
  return wr_conn_kinds[c->kind].speaks_http || c->http;
}

/* One line of text says why; the connection then closes. */
static void answer(struct wr_net_conn *c, int status, const char *reason) {
  wr_buf_t b;
  size_t len;
  char *data;

  wr_buf_init(&b);
  wr_buf_printf(&b,
                "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                status, status_text(status), strlen(reason) + 1, reason);
  data = wr_buf_steal(&b, &len);
  wr_conn_write(c, &c->client, data, len);
  wr_conn_finish(c);
}

void wr_conn_refuse(struct wr_net_conn *c, int status, const char *rule,
                    const char *reason) {
  if (c->closing)
    return;
  c->allowed = false;
  wr_conn_log(c, false, rule, reason, false);
  if (speaks_http(c))
    answer(c, status, reason);
  else if (wr_conn_kinds[c->kind].reset_on_refusal)
    wr_conn_reset(c);
  else
    wr_conn_close(c);
}

static void refuse_verdict(struct wr_net_conn *c, const struct wr_verdict *v) {
  _cleanup_free_ char *rule = v->rule ? wr_rule_format(v->rule) : NULL;

  wr_conn_refuse(c, 403, rule, v->reason);
}

/* ---- interception ------------------------------------------------------- */

/* Logged when the interception ends: as allowed, with what it relayed, or
 * as denied when a new policy cut it. */
static void on_intercept_done(void *arg, uint64_t bytes_up, uint64_t bytes_down,
                              const char *error) {
  struct wr_net_icpt *r = arg;
  struct wr_net_sb *sb = r->sb;
  char addr[INET6_ADDRSTRLEN];
  struct wr_net_event ev = {
      .sandbox = sb->id,
      .kind = wr_conn_kind_name(r->kind),
      .host = r->host,
      .addr = addr,
      .port = r->port,
      .allow = !r->denied,
      .rule = r->denied ? r->deny_rule : r->rule,
      .reason = r->denied ? r->deny_reason
                : error   ? error
                          : r->reason,
      .intercepted = true,
      .bytes_up = bytes_up,
      .bytes_down = bytes_down,
  };

  wr_net_addr_format(&r->addr, addr, sizeof(addr));
  wr_net_emit(r->n, &ev);
  if (r->prev != NULL)
    r->prev->next = r->next;
  else if (sb->icpts == r)
    sb->icpts = r->next;
  if (r->next != NULL)
    r->next->prev = r->prev;
  r->n->nconns--;
  sb->nconns--;
  wr_net_release(r->n, sb, &r->held);
  free(r->rule);
  free(r->deny_rule);
  free(r);
  wr_net_sb_unref(sb);
}

/* Not in the sandbox's list until the thread runs: until then there is
 * nothing to cancel. */
static struct wr_net_icpt *icpt_new(struct wr_net_conn *c) {
  struct wr_net_icpt *r = xcalloc(1, sizeof(*r));

  r->n = c->n;
  r->sb = c->sb;
  r->kind = c->kind;
  memcpy(r->host, c->host, sizeof(r->host));
  r->addr = c->addr;
  r->port = c->port;
  r->rule = c->rule ? xstrdup(c->rule) : NULL;
  memcpy(r->reason, c->reason, sizeof(r->reason));
  /* The connection's share of the budgets goes with it. */
  r->held = c->held;
  c->held = (struct wr_held){0, 0};
  wr_net_sb_ref(r->sb);
  r->n->nconns++;
  r->sb->nconns++;
  return r;
}

static void icpt_link(struct wr_net_icpt *r) {
  struct wr_net_sb *sb = r->sb;

  r->next = sb->icpts;
  if (sb->icpts != NULL)
    sb->icpts->prev = r;
  sb->icpts = r;
}

/*
 * The client socket leaves libuv: a duplicate goes to the interception
 * thread and our handle is closed (the socket stays open through the
 * duplicate). Nothing is buffered inside libuv, and reading stopped at the
 * decision, so the bytes after those held in c->in are still in the
 * kernel for the thread to read.
 */
void wr_conn_handover(struct wr_net_conn *c) {
  struct wr_intercept_args a = {0};
  struct wr_net_icpt *rec;
  wr_error_t err = {0};
  uv_os_fd_t fd;

  if (!wr_conn_hold_intercept(c)) {
    wr_debug("net: %s: interception of %s refused (limit reached)", c->sb->id,
             c->host);
    wr_conn_close(c);
    return;
  }
  if (uv_fileno((uv_handle_t *)&c->client.tcp, &fd) < 0 ||
      (a.client_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
    wr_conn_close(c);
    return;
  }
  a.sockbuf = (int)wr_conn_upstream_size(c);
  rec = icpt_new(c);
  a.tls = c->n->tls;
  memcpy(a.host, c->host, sizeof(a.host));
  a.addr = c->addr;
  a.port = c->port;
  a.secret = c->secret;
  c->has_secret = false;
  memset(&c->secret, 0, sizeof(c->secret));
  a.prefix = (const uint8_t *)(c->in ? c->in + c->in_off : NULL);
  a.prefix_len = c->in ? c->in_len - c->in_off : 0;
  a.loop = c->n->loop;
  a.done = on_intercept_done;
  a.arg = rec;
  if (wr_intercept_start(&a, &rec->handle, &err) == 0) {
    icpt_link(rec);
  } else {
    /* Nothing was taken: the fd and the secret are still ours. */
    wr_warn("net: %s: interception of %s: %s", c->sb->id, c->host, err.msg);
    close(a.client_fd);
    if (a.secret.value != NULL)
      OPENSSL_cleanse(a.secret.value, strlen(a.secret.value));
    wr_secret_clear(&a.secret);
    on_intercept_done(rec, 0, 0, err.msg);
  }
  wr_conn_close(c);
}

void wr_icpt_cancel_all(struct wr_net_sb *sb) {
  for (struct wr_net_icpt *r = sb->icpts; r != NULL; r = r->next)
    wr_intercept_cancel(r->handle);
}

/* A denied one is logged as such when its thread has ended (done). */
void wr_icpt_recheck_all(struct wr_net_sb *sb) {
  for (struct wr_net_icpt *r = sb->icpts; r != NULL; r = r->next) {
    struct wr_verdict v;

    if (r->denied)
      continue;
    wr_net_check(r->n, sb->id, r->host, &r->addr, r->port, &v);
    if (v.allow)
      continue;
    r->denied = true;
    r->deny_rule = v.rule ? wr_rule_format(v.rule) : NULL;
    snprintf(r->deny_reason, sizeof(r->deny_reason), "policy changed: %s",
             v.reason);
    wr_intercept_cancel(r->handle);
  }
}

static void start_handover(struct wr_net_conn *c, const struct wr_secret *s) {
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

  wr_net_secret_copy(&c->secret, s);
  c->has_secret = true;
  c->addr = c->addrs[0];
  c->has_addr = true;
  c->state = WR_CS_HANDOVER;
  wr_conn_set_timer(c, WR_CONNECT_TIMEOUT_MS);
  if (c->kind != WR_CONN_CONNECT) {
    wr_conn_handover(c);
    return;
  }
  /* wr_conn_handover runs once the 200 is out (tunnel.c, on_written). */
  wr_conn_write(c, &c->client, xmemdup(ok, sizeof(ok) - 1), sizeof(ok) - 1);
}

/* ---- dialing ------------------------------------------------------------ */

static void dial_failed(struct wr_net_conn *c) {
  char addr[INET6_ADDRSTRLEN], reason[256];

  wr_net_addr_format(&c->addr, addr, sizeof(addr));
  snprintf(reason, sizeof(reason), "connect to %s port %u: %s", addr, c->port,
           uv_strerror(c->dial_error ? c->dial_error : UV_EHOSTUNREACH));
  wr_conn_refuse(c, 502, NULL, reason);
}

static void on_connected(uv_connect_t *req, int status) {
  struct wr_net_conn *c = req->data;

  if (c->closing || status == UV_ECANCELED)
    return;
  if (status < 0) {
    c->dial_error = status;
    wr_conn_drop_upstream(c);
    return;
  }
  uv_timer_stop(&c->timer);
  wr_proxy_connected(c);
}

/* Each attempt gets a fresh socket: a failed one is closed, and its close
 * callback (tunnel.c) comes back here for the next address. */
void wr_conn_dial_next(struct wr_net_conn *c) {
  struct sockaddr_storage ss;
  int rc;

  if (c->closing)
    return;
  if (c->next_addr >= c->naddrs) {
    dial_failed(c);
    return;
  }
  c->addr = c->addrs[c->next_addr++];
  c->has_addr = true;
  rc = wr_conn_open_upstream(c);
  if (rc == 0) {
    wr_net_addr_to_sockaddr(&c->addr, c->port, &ss);
    c->connect.data = c;
    rc = uv_tcp_connect(&c->connect, &c->upstream.tcp,
                        (const struct sockaddr *)&ss, on_connected);
    if (rc == 0 && wr_conn_kinds[c->kind].budgeted)
      wr_conn_size_upstream(c);
  }
  if (rc < 0) {
    c->dial_error = rc;
    wr_conn_drop_upstream(c);
  }
}

void wr_conn_dial(struct wr_net_conn *c) {
  c->state = WR_CS_DIAL;
  c->next_addr = 0;
  c->dial_error = 0;
  wr_conn_set_timer(c, WR_CONNECT_TIMEOUT_MS);
  wr_conn_dial_next(c);
}

void wr_conn_timed_out(struct wr_net_conn *c) {
  char addr[INET6_ADDRSTRLEN], reason[WR_HOST_MAX + 64];

  if (c->state == WR_CS_DECIDE) {
    snprintf(reason, sizeof(reason), "resolving %s timed out", c->host);
  } else {
    wr_net_addr_format(&c->addr, addr, sizeof(addr));
    snprintf(reason, sizeof(reason), "connect to %s port %u timed out", addr,
             c->port);
  }
  wr_conn_refuse(c, 504, NULL, reason);
}

/* ---- deciding ----------------------------------------------------------- */

static void keep_verdict(struct wr_net_conn *c, const struct wr_verdict *v) {
  free(c->rule);
  c->rule = v->rule ? wr_rule_format(v->rule) : NULL;
  wr_strlcpy(c->reason, v->reason, sizeof(c->reason));
}

/* Every address must pass; the first one's verdict is the one logged. */
static void check_addrs(struct wr_net_conn *c) {
  const char *host = c->host[0] ? c->host : NULL;
  const struct wr_secret *secret;
  struct wr_verdict v;

  for (size_t i = 0; i < c->naddrs; i++) {
    wr_net_check(c->n, c->sb->id, host, &c->addrs[i], c->port, &v);
    if (!v.allow) {
      c->addr = c->addrs[i];
      c->has_addr = true;
      refuse_verdict(c, &v);
      return;
    }
    if (i == 0)
      keep_verdict(c, &v);
  }
  secret = wr_net_secret_for(c->n, host);
  if (wr_conn_kinds[c->kind].policed && secret != NULL && c->n->tls != NULL &&
      (c->kind == WR_CONN_CONNECT || c->tls))
    start_handover(c, secret);
  else
    wr_conn_dial(c);
}

static void on_resolved(void *arg, const struct wr_net_addr *addrs,
                        size_t naddrs, const wr_error_t *err) {
  struct wr_net_conn *c = arg;
  char reason[WR_HOST_MAX + sizeof(err->msg) + 32];

  c->resolve = NULL;
  if (err != NULL || naddrs == 0) {
    snprintf(reason, sizeof(reason), "cannot resolve %s: %s", c->host,
             err == NULL            ? "no address"
             : err->code == ENOENT  ? "no such host"
             : err->code == ENODATA ? "no address"
                                    : err->msg);
    wr_conn_refuse(c, 502, NULL, reason);
    return;
  }
  c->naddrs = WR_MIN(naddrs, WR_RESOLVE_ADDRS);
  memcpy(c->addrs, addrs, c->naddrs * sizeof(*addrs));
  check_addrs(c);
}

static void stop_client(struct wr_net_conn *c) {
  uv_read_stop((uv_stream_t *)&c->client.tcp);
  c->client.reading = false;
}

void wr_conn_decide(struct wr_net_conn *c, const char *host,
                    const struct wr_net_addr *addr, uint16_t port) {
  struct wr_verdict v;
  wr_error_t err = {0};

  stop_client(c);
  c->state = WR_CS_DECIDE;
  c->port = port;
  if (host == NULL) {
    c->host[0] = '\0';
    c->addrs[0] = *addr;
    c->naddrs = 1;
    check_addrs(c);
    return;
  }
  wr_strlcpy(c->host, host, sizeof(c->host));
  wr_net_check(c->n, c->sb->id, host, NULL, port, &v);
  if (!v.allow) {
    refuse_verdict(c, &v);
    return;
  }
  wr_conn_set_timer(c, WR_CONNECT_TIMEOUT_MS);
  if (wr_resolve_start(c->n, c->sb, host, AF_UNSPEC, on_resolved, c,
                       &c->resolve, &err) < 0)
    wr_conn_refuse(c, 502, NULL, err.msg);
}

void wr_conn_decide_name(struct wr_net_conn *c, const char *raw,
                         uint16_t port) {
  char host[WR_HOST_MAX], reason[sizeof(((wr_error_t *)0)->msg) + 32];
  bool is_ip = false;
  wr_error_t err = {0};

  if (wr_net_normalize_host(raw, host, &is_ip, NULL, &err) < 0) {
    stop_client(c);
    snprintf(reason, sizeof(reason), "invalid host name: %s", err.msg);
    c->port = port;
    wr_conn_refuse(c, 400, NULL, reason);
    return;
  }
  /* A redirected client's own destination is what it dials; an address
   * in its SNI or Host header changes nothing. */
  if (is_ip)
    wr_conn_decide(c, NULL, &c->orig, port);
  else
    wr_conn_decide(c, host, NULL, port);
}

/* ---- the SNI of a CONNECT tunnel ---------------------------------------- */

/* For the log: the SNI as sent, printable bytes only. */
static void printable(const char *in, char *out, size_t size) {
  size_t i = 0;

  for (; in[i] != '\0' && i + 1 < size; i++)
    out[i] = (in[i] > 0x20 && in[i] < 0x7f) ? in[i] : '?';
  out[i] = '\0';
}

void wr_conn_sni_check(struct wr_net_conn *c) {
  char sni[WR_HOST_MAX], norm[WR_HOST_MAX], shown[WR_HOST_MAX];
  char reason[2 * WR_HOST_MAX + 64];
  enum wr_sniff r;

  r = wr_sniff_client((const uint8_t *)c->in, c->in_len, sni);
  if (r == WR_SNIFF_MORE)
    return;
  if (r != WR_SNIFF_TLS || sni[0] == '\0' ||
      (wr_net_normalize_host(sni, norm, NULL, NULL, NULL) == 0 &&
       strcmp(norm, c->host) == 0)) {
    wr_conn_sni_passed(c);
    return;
  }
  printable(sni, shown, sizeof(shown));
  snprintf(reason, sizeof(reason), "SNI %s does not match CONNECT host", shown);
  c->allowed = false;
  wr_conn_log(c, false, NULL, reason, false);
  wr_conn_close(c);
}

/* ---- the policy changed ------------------------------------------------- */

bool wr_conn_recheck(struct wr_net_conn *c, struct wr_verdict *v) {
  const char *host = c->host[0] ? c->host : NULL;

  switch (c->state) {
  case WR_CS_DECIDE:
    if (host == NULL)
      return true;
    wr_net_check(c->n, c->sb->id, host, NULL, c->port, v);
    return v->allow;
  case WR_CS_DIAL:
  case WR_CS_HANDOVER:
    for (size_t i = 0; i < c->naddrs; i++) {
      wr_net_check(c->n, c->sb->id, host, &c->addrs[i], c->port, v);
      if (!v->allow)
        return false;
    }
    return true;
  case WR_CS_RELAY:
    if (!c->allowed || !c->has_addr)
      return true;
    wr_net_check(c->n, c->sb->id, host, &c->addr, c->port, v);
    return v->allow;
  default:
    return true;
  }
}
