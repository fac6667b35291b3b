/*
 * Unit tests for the egress engine (src/net: net.c, proxy.c, head.c,
 * connect.c, tunnel.c, dns.c, resolve.c, ports.c), run against a real
 * network namespace.
 *
 * A forked child makes a fresh namespace with only loopback (brought up)
 * and waits; the engine attaches to it as it would to a sandbox. Clients
 * are threads that enter the namespace with setns() and use blocking
 * sockets, while the test's main thread runs the loop. Destinations are
 * servers on the host at 127.0.0.2, named by the engine's hosts file.
 * Needs root; without it (or without network namespaces) the tests skip,
 * and fail with WARREN_MUST_WORK=1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "net/net_internal.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define SANDBOX "sb-test"
#define NS_PORT 8000
#define MAX_EVENTS 256

struct event {
  char kind[16], host[WR_HOST_MAX], addr[64], reason[256];
  uint16_t port;
  bool allow, intercepted;
  uint64_t up, down;
};

/* A server on the host: an echo server, or an HTTP server that answers
 * each request with the bytes it received. */
struct server {
  int fd;
  uint16_t port;
  bool http;
  volatile bool stop;
  int accepted; /* connections so far (atomic) */
  pthread_t th;
};

struct group {
  pid_t child;
  int hold; /* the child waits until this closes */
  int nsfd;
  char dir[64];
  char hosts[128];
  struct server echo, web;
  bool ok;
};

static struct group G;

struct fx {
  uv_loop_t loop;
  struct wr_net *n;
  struct wr_policy *policy;
  struct event events[MAX_EVENTS];
  size_t nevents;
  uv_async_t swap; /* a client asks the loop to change the policy */
  struct wr_policy *next_policy;
  bool swap_detaches; /* or to detach the sandbox instead */
  bool swap_closed;   /* the test closed swap itself */
  /* The daemon's hooks: activity reported, and wakes asked for. With
   * hold_wakes, a connection from the host waits for wake_timer, which
   * answers wake_ok. */
  int opened, bytes, closed, opened_from_host;
  int wakes;
  bool hold_wakes, wake_ok;
  uv_timer_t wake_timer;
};

static bool must_work(void) {
  const char *v = getenv("WARREN_MUST_WORK");
  return v != NULL && strcmp(v, "1") == 0;
}

static void copy(char *dst, size_t size, const char *src) {
  snprintf(dst, size, "%s", src ? src : "");
}

/* ---- the namespace ------------------------------------------------------ */

static void child_main(int ready, int hold) {
  struct ifreq ifr;
  int s;
  char c = 'E';

  if (unshare(CLONE_NEWNET) == 0) {
    s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags |= IFF_UP;
      if (ioctl(s, SIOCSIFFLAGS, &ifr) == 0)
        c = 'R';
    }
  }
  if (write(ready, &c, 1) != 1)
    _exit(1);
  while (read(hold, &c, 1) > 0)
    ;
  _exit(0);
}

static bool make_netns(void) {
  int ready[2], hold[2];
  char c = 0, path[64];

  if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0)
    return false;
  G.child = fork();
  if (G.child == 0) {
    close(ready[0]);
    close(hold[1]);
    child_main(ready[1], hold[0]);
  }
  close(ready[1]);
  close(hold[0]);
  G.hold = hold[1];
  if (read(ready[0], &c, 1) != 1 || c != 'R') {
    close(ready[0]);
    return false;
  }
  close(ready[0]);
  snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)G.child);
  G.nsfd = open(path, O_RDONLY | O_CLOEXEC);
  return G.nsfd >= 0;
}

/* ---- host-side servers -------------------------------------------------- */

static int listen_tcp(const char *ip, uint16_t port, uint16_t *bound) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  socklen_t len = sizeof(sin);
  int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  inet_pton(AF_INET, ip, &sin.sin_addr);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
      listen(fd, 64) < 0) {
    close(fd);
    return -1;
  }
  getsockname(fd, (struct sockaddr *)&sin, &len);
  if (bound != NULL)
    *bound = ntohs(sin.sin_port);
  return fd;
}

static void set_timeout(int fd, int ms) {
  struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static bool send_all(int fd, const void *data, size_t len) {
  const char *p = data;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}

static bool send_str(int fd, const char *s) {
  return send_all(fd, s, strlen(s));
}

/* Read until the peer closes, the buffer is full or the timeout hits. */
static size_t read_all(int fd, char *buf, size_t size) {
  size_t got = 0;

  while (got + 1 < size) {
    ssize_t n = recv(fd, buf + got, size - 1 - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  buf[got] = '\0';
  return got;
}

static size_t read_exact(int fd, char *buf, size_t len) {
  size_t got = 0;

  while (got < len) {
    ssize_t n = recv(fd, buf + got, len - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  return got;
}

/* Read a response or request head (up to and with the blank line). */
static size_t read_head(int fd, char *buf, size_t size) {
  size_t got = 0;

  while (got + 1 < size) {
    ssize_t n = recv(fd, buf + got, 1, 0);
    if (n <= 0)
      break;
    got++;
    buf[got] = '\0';
    if (got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0)
      break;
  }
  buf[got] = '\0';
  return got;
}

static void *echo_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  char buf[65536];
  ssize_t n;

  set_timeout(fd, 10000);
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
    if (!send_all(fd, buf, (size_t)n))
      break;
  close(fd);
  return NULL;
}

/* The HTTP server answers with the request it got (head, body, and any
 * bytes that follow). */
static void *http_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  char head[8192], body[4096], *cl, *resp;
  size_t hlen, blen = 0;

  set_timeout(fd, 5000);
  hlen = read_head(fd, head, sizeof(head));
  cl = strcasestr(head, "\r\nContent-Length: ");
  if (cl != NULL)
    blen = read_exact(fd, body, WR_MIN((size_t)atoi(cl + 18), sizeof(body)));
  /* Whatever else arrives soon is answered too: nothing should. */
  set_timeout(fd, 300);
  blen += read_all(fd, body + blen, sizeof(body) - blen);
  resp = xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                   hlen + blen, head);
  send_all(fd, resp, strlen(resp));
  send_all(fd, body, blen);
  free(resp);
  close(fd);
  return NULL;
}

static void *server_main(void *arg) {
  struct server *s = arg;

  while (!s->stop) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    pthread_t th;
    int c;

    if (poll(&p, 1, 100) <= 0)
      continue;
    c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
      continue;
    __atomic_fetch_add(&s->accepted, 1, __ATOMIC_SEQ_CST);
    pthread_create(&th, NULL, s->http ? http_conn : echo_conn,
                   (void *)(intptr_t)c);
    pthread_detach(th);
  }
  return NULL;
}

static bool server_start(struct server *s, bool http) {
  s->http = http;
  s->fd = listen_tcp("127.0.0.2", 0, &s->port);
  if (s->fd < 0)
    return false;
  return pthread_create(&s->th, NULL, server_main, s) == 0;
}

static void server_stop(struct server *s) {
  if (s->fd < 0)
    return;
  s->stop = true;
  pthread_join(s->th, NULL);
  close(s->fd);
}

/* ---- group fixture ------------------------------------------------------ */

static int group_setup(void **state) {
  FILE *f;

  (void)state;
  signal(SIGPIPE, SIG_IGN);
  G.nsfd = G.hold = G.echo.fd = G.web.fd = -1;
  strcpy(G.dir, "/tmp/test_proxy.XXXXXX");
  if (mkdtemp(G.dir) == NULL)
    return -1;
  snprintf(G.hosts, sizeof(G.hosts), "%s/hosts", G.dir);
  f = fopen(G.hosts, "w");
  if (f == NULL)
    return -1;
  fputs("127.0.0.2 echo.test web.test\n127.0.0.1 rebind.test\n", f);
  fputs("# a comment\n127.0.0.2 mixed.test\n10.9.9.9 mixed.test\n", f);
  fputs("127.0.0.2 secret.test\n", f);
  fclose(f);
  G.ok = geteuid() == 0 && make_netns() && server_start(&G.echo, false) &&
         server_start(&G.web, true);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  server_stop(&G.echo);
  server_stop(&G.web);
  if (G.nsfd >= 0)
    close(G.nsfd);
  if (G.hold >= 0)
    close(G.hold);
  if (G.child > 0)
    waitpid(G.child, NULL, 0);
  wr_rm_rf(G.dir, NULL);
  return 0;
}

/* ---- per-test fixture: an engine attached to the namespace -------------- */

static void on_event(void *arg, const struct wr_net_event *ev) {
  struct fx *fx = arg;
  struct event *e;

  if (fx->nevents >= MAX_EVENTS)
    return;
  e = &fx->events[fx->nevents++];
  copy(e->kind, sizeof(e->kind), ev->kind);
  copy(e->host, sizeof(e->host), ev->host);
  copy(e->addr, sizeof(e->addr), ev->addr);
  copy(e->reason, sizeof(e->reason), ev->reason);
  e->port = ev->port;
  e->allow = ev->allow;
  e->intercepted = ev->intercepted;
  e->up = ev->bytes_up;
  e->down = ev->bytes_down;
  if (getenv("TEST_PROXY_EVENTS") != NULL)
    fprintf(stderr,
            "event %s host=%s addr=%s port=%u allow=%d up=%llu "
            "down=%llu reason=%s\n",
            e->kind, e->host, e->addr, e->port, e->allow,
            (unsigned long long)e->up, (unsigned long long)e->down, e->reason);
}

static void add_rule(struct wr_policy *p, const char *spec, bool allow) {
  struct wr_rule r;
  wr_error_t err = {0};

  if (wr_rule_parse(spec, allow, &r, &err) < 0)
    fail_msg("rule %s: %s", spec, err.msg);
  wr_policy_add(p, &r);
  wr_rule_clear(&r);
}

static struct wr_policy *test_policy(bool with_echo) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_LOCKED);

  if (with_echo)
    add_rule(p, "echo.test", true);
  add_rule(p, "web.test", true);
  add_rule(p, "mixed.test", true);
  add_rule(p, "rebind.test", true);
  add_rule(p, "127.0.0.2", true);
  add_rule(p, "secret.test", true);
  return p;
}

static void on_swap(uv_async_t *a) {
  struct fx *fx = a->data;

  if (fx->swap_detaches)
    wr_net_detach(fx->n, SANDBOX);
  else
    wr_net_set_policy(fx->n, fx->next_policy);
}

static void on_activity(void *arg, const char *sandbox,
                        enum wr_net_activity what, bool from_host) {
  struct fx *fx = arg;

  assert_string_equal(sandbox, SANDBOX);
  if (what == WR_NET_CONN_OPENED) {
    fx->opened++;
    fx->opened_from_host += from_host;
  } else if (what == WR_NET_CONN_BYTES) {
    fx->bytes++;
  } else {
    fx->closed++;
  }
}

static void on_wake_timer(uv_timer_t *t) {
  struct fx *fx = t->data;

  wr_net_woken(fx->n, SANDBOX, fx->wake_ok);
}

static bool on_wake(void *arg, const char *sandbox) {
  struct fx *fx = arg;

  assert_string_equal(sandbox, SANDBOX);
  fx->wakes++;
  if (!fx->hold_wakes)
    return true;
  uv_timer_start(&fx->wake_timer, on_wake_timer, 200, 0);
  return false;
}

static int setup(void **state) {
  struct fx *fx;
  struct wr_net_config cfg = {0};
  wr_error_t err = {0};

  if (!G.ok) {
    if (must_work())
      fail_msg("network namespaces are needed (run as root)");
    skip();
  }
  fx = xcalloc(1, sizeof(*fx));
  uv_loop_init(&fx->loop);
  cfg.loop = &fx->loop;
  cfg.hosts_file = G.hosts;
  cfg.log = on_event;
  cfg.log_arg = fx;
  cfg.activity = on_activity;
  cfg.wake = on_wake;
  cfg.hook_arg = fx;
  uv_timer_init(&fx->loop, &fx->wake_timer);
  fx->wake_timer.data = fx;
  if (wr_net_new(&cfg, &fx->n, &err) < 0)
    fail_msg("wr_net_new: %s", err.msg);
  fx->policy = test_policy(true);
  wr_net_set_policy(fx->n, fx->policy);
  if (wr_net_attach(fx->n, SANDBOX, G.nsfd, NULL, &err) < 0)
    fail_msg("attach: %s", err.msg);
  uv_async_init(&fx->loop, &fx->swap, on_swap);
  fx->swap.data = fx;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fx *fx = *state;

  if (fx == NULL)
    return 0;
  if (!fx->swap_closed)
    uv_close((uv_handle_t *)&fx->swap, NULL);
  uv_close((uv_handle_t *)&fx->wake_timer, NULL);
  wr_net_shutdown(fx->n);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  wr_net_free(fx->n);
  if (fx->next_policy != NULL)
    wr_policy_unref(fx->next_policy);
  wr_policy_unref(fx->policy);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  free(fx);
  return 0;
}

/* ---- running clients ---------------------------------------------------- */

struct client {
  struct fx *fx;
  void (*fn)(struct client *);
  bool in_ns;
  uv_async_t done;
  /* what the client saw */
  char buf[65536];
  size_t len;
  int status;
  int rcode[4];
  char extra[256];
  bool flag;
};

static void *client_main(void *arg) {
  struct client *cl = arg;

  if (cl->in_ns && setns(G.nsfd, CLONE_NEWNET) < 0)
    cl->status = -1;
  else
    cl->fn(cl);
  uv_async_send(&cl->done);
  return NULL;
}

static void on_client_done(uv_async_t *a) {
  uv_stop(a->loop);
}

/* Run fn on a thread (inside the namespace when in_ns) while the loop
 * runs here. */
static void run_client(struct fx *fx, struct client *cl,
                       void (*fn)(struct client *), bool in_ns) {
  pthread_t th;

  cl->fx = fx;
  cl->fn = fn;
  cl->in_ns = in_ns;
  uv_async_init(&fx->loop, &cl->done, on_client_done);
  assert_int_equal(pthread_create(&th, NULL, client_main, cl), 0);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  pthread_join(th, NULL);
  uv_close((uv_handle_t *)&cl->done, NULL);
  uv_run(&fx->loop, UV_RUN_NOWAIT);
}

static void on_spin(uv_timer_t *t) {
  uv_stop(t->loop);
}

/* Let the loop run for a while (closes, logs). */
static void spin(struct fx *fx, uint64_t ms) {
  uv_timer_t t;

  uv_timer_init(&fx->loop, &t);
  uv_timer_start(&t, on_spin, ms, 0);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&fx->loop, UV_RUN_NOWAIT);
}

static const struct event *find_event(struct fx *fx, const char *kind,
                                      const char *host, bool allow) {
  for (size_t i = 0; i < fx->nevents; i++) {
    const struct event *e = &fx->events[i];
    if (strcmp(e->kind, kind) == 0 && strcmp(e->host, host) == 0 &&
        e->allow == allow)
      return e;
  }
  return NULL;
}

/* Wait (running the loop) until such an event has been logged. */
static const struct event *wait_event(struct fx *fx, const char *kind,
                                      const char *host, bool allow) {
  for (int i = 0; i < 50; i++) {
    const struct event *e = find_event(fx, kind, host, allow);
    if (e != NULL)
      return e;
    spin(fx, 20);
  }
  return NULL;
}

static int connect_to(const char *ip, uint16_t port) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  inet_pton(AF_INET, ip, &sin.sin_addr);
  set_timeout(fd, 5000);
  if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int status_of(const char *resp) {
  int status = 0;

  if (sscanf(resp, "HTTP/1.1 %d", &status) != 1)
    return 0;
  return status;
}

/* One request to the proxy; the whole answer lands in cl->buf. */
static void proxy_exchange(struct client *cl, const char *req, size_t len) {
  int fd = connect_to("127.0.0.1", WR_PROXY_PORT);

  if (fd < 0) {
    cl->status = -1;
    return;
  }
  send_all(fd, req, len);
  cl->len = read_all(fd, cl->buf, sizeof(cl->buf));
  cl->status = status_of(cl->buf);
  close(fd);
}

static void exchange_str(struct client *cl, const char *req) {
  proxy_exchange(cl, req, strlen(req));
}

/* ---- (a) a denied name -------------------------------------------------- */

static void client_connect_denied(struct client *cl) {
  static const char req[] =
      "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n";
  struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6,
                              .sin6_port = htons(WR_PROXY_PORT),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int fd;

  proxy_exchange(cl, req, sizeof(req) - 1);
  /* The same over [::1]:3128. */
  fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  set_timeout(fd, 5000);
  if (connect(fd, (struct sockaddr *)&sin6, sizeof(sin6)) == 0 &&
      send_all(fd, req, sizeof(req) - 1)) {
    read_all(fd, cl->extra, sizeof(cl->extra));
    cl->rcode[0] = status_of(cl->extra);
  }
  close(fd);
}

static void test_connect_denied(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  run_client(fx, &cl, client_connect_denied, true);
  assert_int_equal(cl.status, 403);
  assert_int_equal(cl.rcode[0], 403);
  assert_non_null(strstr(cl.buf, "no rule allows denied.test"));
  e = wait_event(fx, "connect", "denied.test", false);
  assert_non_null(e);
  assert_int_equal(e->port, 443);
}

/* ---- (b) a tunnel ------------------------------------------------------- */

/* CONNECT to echo.test, check bytes go both ways; leaves the socket open
 * in cl->status (>= 0) for callers that go on. */
static int open_tunnel(struct client *cl, const char *host) {
  char req[256], head[1024];
  int fd = connect_to("127.0.0.1", WR_PROXY_PORT);

  if (fd < 0)
    return -1;
  snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\nHost: x\r\n\r\n", host,
           G.echo.port);
  send_all(fd, req, strlen(req));
  read_head(fd, head, sizeof(head));
  cl->status = status_of(head);
  if (cl->status != 200) {
    close(fd);
    return -1;
  }
  return fd;
}

#define BIG (4u << 20)

struct sender {
  int fd;
  const char *data;
  size_t len;
};

static void *sender_main(void *arg) {
  struct sender *s = arg;

  send_all(s->fd, s->data, s->len);
  return NULL;
}

static void client_tunnel(struct client *cl) {
  char *big = xmalloc(BIG), *back = xmalloc(BIG);
  int fd = open_tunnel(cl, "echo.test");
  struct sender s = {fd, big, BIG};
  pthread_t th;

  if (fd < 0)
    goto out;
  for (size_t i = 0; i < BIG; i++)
    big[i] = (char)('a' + i % 26);
  send_all(fd, "ping", 4);
  cl->len = read_exact(fd, cl->buf, 4);
  /* Far more than the relay's high-water mark, read back while sent. */
  pthread_create(&th, NULL, sender_main, &s);
  cl->flag = read_exact(fd, back, BIG) == BIG && memcmp(big, back, BIG) == 0;
  pthread_join(th, NULL);
  shutdown(fd, SHUT_WR);
  cl->rcode[0] = (int)recv(fd, back, 1, 0); /* EOF: 0 */
  close(fd);
out:
  free(big);
  free(back);
}

static void test_connect_tunnel(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  run_client(fx, &cl, client_tunnel, true);
  assert_int_equal(cl.status, 200);
  assert_int_equal(cl.len, 4);
  assert_memory_equal(cl.buf, "ping", 4);
  assert_true(cl.flag);
  assert_int_equal(cl.rcode[0], 0);
  e = wait_event(fx, "connect", "echo.test", true);
  assert_non_null(e);
  assert_string_equal(e->addr, "127.0.0.2");
  assert_int_equal(e->up, BIG + 4);
  assert_int_equal(e->down, BIG + 4);
}

/* ---- (c) DNS ------------------------------------------------------------ */

static size_t dns_query(uint8_t *out, uint16_t id, const char *name,
                        uint16_t qtype) {
  size_t len = 12;
  const char *p = name;

  memset(out, 0, 12);
  out[0] = (uint8_t)(id >> 8);
  out[1] = (uint8_t)id;
  out[2] = 0x01; /* RD */
  out[5] = 1;    /* one question */
  while (*p != '\0') {
    const char *dot = strchr(p, '.');
    size_t l = dot ? (size_t)(dot - p) : strlen(p);
    out[len++] = (uint8_t)l;
    memcpy(out + len, p, l);
    len += l;
    p += l + (dot ? 1 : 0);
  }
  out[len++] = 0;
  out[len++] = (uint8_t)(qtype >> 8);
  out[len++] = (uint8_t)qtype;
  out[len++] = 0;
  out[len++] = 1; /* IN */
  return len;
}

/* Ask and return the reply's length (0 on timeout). */
static size_t dns_ask(const char *name, uint16_t qtype, uint8_t *reply) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(53)};
  uint8_t q[512];
  size_t len = dns_query(q, 0x4242, name, qtype);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ssize_t n;

  inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
  set_timeout(fd, 3000);
  sendto(fd, q, len, 0, (struct sockaddr *)&sin, sizeof(sin));
  n = recv(fd, reply, 512, 0);
  close(fd);
  return n > 0 ? (size_t)n : 0;
}

static void client_dns(struct client *cl) {
  uint8_t r[512];
  size_t n;

  n = dns_ask("echo.test", WR_DNS_A, r);
  cl->rcode[0] = n >= 12 ? r[3] & 0x0f : -1;
  cl->rcode[1] = n >= 12 ? (r[6] << 8 | r[7]) : -1; /* answers */
  if (n >= 16)
    inet_ntop(AF_INET, r + n - 4, cl->extra, sizeof(cl->extra));
  n = dns_ask("denied.test", WR_DNS_A, r);
  cl->rcode[2] = n >= 12 ? r[3] & 0x0f : -1;
  n = dns_ask("echo.test", WR_DNS_AAAA, r);
  cl->rcode[3] = n >= 12 ? (r[3] & 0x0f) * 100 + (r[6] << 8 | r[7]) : -1;
}

static void test_dns(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};

  run_client(fx, &cl, client_dns, true);
  assert_int_equal(cl.rcode[0], WR_DNS_NOERROR);
  assert_int_equal(cl.rcode[1], 1);
  assert_string_equal(cl.extra, "127.0.0.2");
  assert_int_equal(cl.rcode[2], WR_DNS_REFUSED);
  assert_int_equal(cl.rcode[3], 0); /* NOERROR, no AAAA */
  assert_non_null(find_event(fx, "dns", "denied.test", false));
  assert_non_null(find_event(fx, "dns", "echo.test", true));
}

/* ---- (d) rebinding ------------------------------------------------------ */

static void client_rebind(struct client *cl) {
  static const char req[] = "CONNECT rebind.test:80 HTTP/1.1\r\n\r\n";
  static const char req2[] = "CONNECT mixed.test:80 HTTP/1.1\r\n\r\n";

  proxy_exchange(cl, req, sizeof(req) - 1);
  cl->rcode[0] = cl->status;
  proxy_exchange(cl, req2, sizeof(req2) - 1);
}

/* A name a domain rule allows but that resolves to loopback is denied;
 * so is a name that mixes an allowed address with a private one. */
static void test_rebinding(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  run_client(fx, &cl, client_rebind, true);
  assert_int_equal(cl.rcode[0], 403);
  e = wait_event(fx, "connect", "rebind.test", false);
  assert_non_null(e);
  assert_non_null(strstr(e->reason, "loopback"));
  assert_string_equal(e->addr, "127.0.0.1");
  assert_int_equal(cl.status, 403);
  assert_non_null(strstr(cl.buf, "10.9.9.9 is private"));
}

/* ---- (e) refused heads -------------------------------------------------- */

static const struct {
  const char *req;
  int status;
} bad_heads[] = {
    {"POST http://web.test/ HTTP/1.1\r\nHost: web.test\r\nContent-Length: "
     "5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400},
    {"POST http://web.test/ HTTP/1.1\r\nHost: web.test\r\nContent-Length: "
     "5\r\nContent-Length: 5\r\n\r\nhello",
     400},
    {"POST http://web.test/ HTTP/1.1\r\nContent-Length: 5x\r\n\r\nhello", 400},
    {"POST http://web.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, "
     "chunked\r\n\r\n0\r\n\r\n",
     400},
    {"GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\nHost: "
     "evil.test\r\n\r\n",
     400},
    {"GET http://web.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n", 400},
    {"GET http://web.test/ HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400},
    {"GET https://web.test/ HTTP/1.1\r\n\r\n", 400},
};

static void client_bad_heads(struct client *cl) {
  char *huge = xmalloc(20000);

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad_heads); i++) {
    proxy_exchange(cl, bad_heads[i].req, strlen(bad_heads[i].req));
    if (cl->status != bad_heads[i].status) {
      snprintf(cl->extra, sizeof(cl->extra), "head %zu: got %d", i, cl->status);
      free(huge);
      return;
    }
  }
  snprintf(huge, 20000, "GET http://web.test/ HTTP/1.1\r\nX-Big: ");
  memset(huge + strlen(huge), 'a', 18000);
  memcpy(huge + 18000, "\r\n\r\n", 5);
  proxy_exchange(cl, huge, strlen(huge));
  cl->rcode[0] = cl->status;
  free(huge);
}

static void test_smuggling_refused(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};

  run_client(fx, &cl, client_bad_heads, true);
  assert_string_equal(cl.extra, "");
  assert_int_equal(cl.rcode[0], 431);
}

/* ---- absolute-URI requests ---------------------------------------------- */

static void client_forward(struct client *cl) {
  char req[512];

  snprintf(
      req, sizeof(req),
      "POST http://web.test:%u/p/a?q=1 HTTP/1.1\r\nHost: web.test:%u\r\n"
      "Proxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Hop\r\n"
      "X-Hop: 1\r\nKeep-Alive: 5\r\nX-Keep: yes\r\nContent-Length: 5\r\n"
      "\r\nhelloGET http://web.test/ HTTP/1.1\r\n\r\n",
      G.web.port, G.web.port);
  proxy_exchange(cl, req, strlen(req));
}

/* The request goes in origin-form with one Host, without what was meant
 * for the proxy, with its body and nothing after it. */
static void test_http_forward(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  char host[64];
  const struct event *e;

  run_client(fx, &cl, client_forward, true);
  assert_int_equal(cl.status, 200);
  snprintf(host, sizeof(host), "\r\nHost: web.test:%u\r\n", G.web.port);
  assert_non_null(strstr(cl.buf, "\r\n\r\nPOST /p/a?q=1 HTTP/1.1\r\n"));
  assert_non_null(strstr(cl.buf, host));
  assert_null(strcasestr(cl.buf, "Proxy-Authorization"));
  assert_null(strcasestr(cl.buf, "X-Hop"));
  assert_null(strcasestr(cl.buf, "Keep-Alive"));
  assert_non_null(strstr(cl.buf, "\r\nX-Keep: yes\r\n"));
  assert_non_null(strstr(cl.buf, "\r\nConnection: close\r\n\r\nhello"));
  assert_null(strstr(cl.buf, "GET http"));
  e = wait_event(fx, "http", "web.test", true);
  assert_non_null(e);
  assert_true(e->down > 0);
}

/* A chunked body that arrives in pieces goes on as framed, and stops at
 * its last chunk. */
static void client_chunked(struct client *cl) {
  char req[256];
  int fd = connect_to("127.0.0.1", WR_PROXY_PORT);

  if (fd < 0)
    return;
  snprintf(req, sizeof(req),
           "POST http://web.test:%u/c HTTP/1.1\r\nTransfer-Encoding: "
           "chunked\r\n\r\n5\r\nhel",
           G.web.port);
  send_all(fd, req, strlen(req));
  usleep(50 * 1000);
  send_str(fd, "lo\r\n0\r\n\r\nGARBAGE");
  cl->len = read_all(fd, cl->buf, sizeof(cl->buf));
  cl->status = status_of(cl->buf);
  close(fd);
}

static void test_http_chunked(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};

  run_client(fx, &cl, client_chunked, true);
  assert_int_equal(cl.status, 200);
  assert_non_null(strstr(cl.buf, "\r\nTransfer-Encoding: chunked\r\n"));
  assert_non_null(strstr(cl.buf, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
  assert_null(strstr(cl.buf, "GARBAGE"));
}

/* ---- wr_net_resolve ------------------------------------------------------ */

struct resolved {
  int calls;
  char first[64];
  int code;
};

static void on_resolved(void *arg, const struct wr_net_addr *addrs,
                        size_t naddrs, const wr_error_t *err) {
  struct resolved *r = arg;

  r->calls++;
  r->code = err ? err->code : 0;
  if (naddrs > 0)
    wr_net_addr_format(&addrs[0], r->first, sizeof(r->first));
}

static void test_resolve(void **state) {
  struct fx *fx = *state;
  struct resolved a = {0}, b = {0};
  wr_error_t err = {0};

  assert_int_equal(wr_net_resolve(fx->n, "ECHO.test.", on_resolved, &a, &err),
                   0);
  assert_int_equal(wr_net_resolve(fx->n, "127.1", on_resolved, &b, &err), 0);
  /* Never called back from inside the call. */
  assert_int_equal(a.calls + b.calls, 0);
  spin(fx, 20);
  assert_int_equal(a.calls, 1);
  assert_string_equal(a.first, "127.0.0.2");
  assert_int_equal(b.calls, 1);
  assert_string_equal(b.first, "127.0.0.1");
  assert_int_equal(wr_net_resolve(fx->n, "bad..name", on_resolved, &a, &err),
                   -1);
}

/* ---- (f) published ports ------------------------------------------------ */

static void *ns_server(void *arg) {
  int *lfd = arg, fd;
  char buf[256];
  ssize_t n;

  fd = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0)
    return NULL;
  set_timeout(fd, 5000);
  send_all(fd, "hello from sandbox\n", 19);
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
    send_all(fd, buf, (size_t)n);
  close(fd);
  return NULL;
}

static uint16_t free_port(void) {
  uint16_t port = 0;
  int fd = listen_tcp("127.0.0.1", 0, &port);

  close(fd);
  return port;
}

static void client_port(struct client *cl) {
  uint16_t port = (uint16_t)cl->rcode[0];
  int fd = connect_to("127.0.0.1", port);

  if (fd < 0)
    return;
  cl->len = read_exact(fd, cl->buf, 19);
  send_all(fd, "echo?", 5);
  cl->len += read_exact(fd, cl->buf + cl->len, 5);
  cl->buf[cl->len] = '\0';
  close(fd);
}

static void client_port_closed(struct client *cl) {
  int fd = connect_to("127.0.0.1", (uint16_t)cl->rcode[0]);
  char c;

  cl->status = fd < 0 ? -1 : (int)recv(fd, &c, 1, 0);
  if (fd >= 0)
    close(fd);
}

static int ns_listener(void) {
  int fd;

  if (setns(G.nsfd, CLONE_NEWNET) < 0)
    return -1;
  fd = listen_tcp("127.0.0.1", NS_PORT, NULL);
  return fd;
}

static void *ns_listener_thread(void *arg) {
  *(int *)arg = ns_listener();
  return NULL;
}

static void test_published_port(void **state) {
  struct fx *fx = *state;
  struct client cl = {0}, cl2 = {0};
  uint16_t port = free_port();
  pthread_t th;
  int lfd = -1;
  wr_error_t err = {0};

  pthread_create(&th, NULL, ns_listener_thread, &lfd);
  pthread_join(th, NULL);
  assert_true(lfd >= 0);
  pthread_create(&th, NULL, ns_server, &lfd);
  assert_int_equal(wr_net_publish(fx->n, SANDBOX, NULL, port, NS_PORT, &err),
                   0);
  assert_int_equal(wr_net_publish(fx->n, SANDBOX, NULL, port, NS_PORT, &err),
                   -1);
  assert_int_equal(err.code, EEXIST);
  cl.rcode[0] = port;
  run_client(fx, &cl, client_port, false);
  pthread_join(th, NULL);
  close(lfd);
  assert_string_equal(cl.buf, "hello from sandbox\necho?");
  /* Detached: connections are closed; the publication stays. */
  wr_net_detach(fx->n, SANDBOX);
  cl2.rcode[0] = port;
  run_client(fx, &cl2, client_port_closed, false);
  assert_true(cl2.status <= 0);
  assert_int_equal(wr_net_unpublish(fx->n, SANDBOX, port, &err), 0);
  assert_int_equal(wr_net_unpublish(fx->n, SANDBOX, port, &err), -1);
  assert_int_equal(err.code, ENOENT);
}

/* A published port's connection while the daemon wakes the sandbox: the
 * client is accepted and waits, then goes on (woken) or is closed (the
 * wake failed); the daemon hears of each connection opening and closing,
 * from the host. */
static void test_published_port_waits_for_wake(void **state) {
  struct fx *fx = *state;
  struct client cl = {0}, cl2 = {0};
  uint16_t port = free_port();
  uint64_t t0;
  pthread_t th;
  int lfd = -1;
  wr_error_t err = {0};

  pthread_create(&th, NULL, ns_listener_thread, &lfd);
  pthread_join(th, NULL);
  assert_true(lfd >= 0);
  pthread_create(&th, NULL, ns_server, &lfd);
  assert_int_equal(wr_net_publish(fx->n, SANDBOX, NULL, port, NS_PORT, &err),
                   0);
  fx->hold_wakes = fx->wake_ok = true;
  cl.rcode[0] = port;
  t0 = wr_mono_ns();
  run_client(fx, &cl, client_port, false);
  pthread_join(th, NULL);
  assert_string_equal(cl.buf, "hello from sandbox\necho?");
  assert_true(wr_mono_ns() - t0 >= 190 * 1000000ull); /* it was held */
  assert_int_equal(fx->wakes, 1);
  spin(fx, 50);
  assert_int_equal(fx->opened, 1);
  assert_int_equal(fx->opened_from_host, 1);
  assert_int_equal(fx->closed, 1);

  /* The wake fails: the held connection is reset, never dialed. */
  fx->wake_ok = false;
  cl2.rcode[0] = port;
  run_client(fx, &cl2, client_port_closed, false);
  assert_true(cl2.status <= 0);
  assert_int_equal(fx->wakes, 2);
  close(lfd);
  assert_int_equal(wr_net_unpublish(fx->n, SANDBOX, port, &err), 0);
}

static void test_publish_port_in_use(void **state) {
  struct fx *fx = *state;
  uint16_t port = 0;
  int fd = listen_tcp("127.0.0.1", 0, &port);
  wr_error_t err = {0};

  assert_int_equal(wr_net_publish(fx->n, SANDBOX, NULL, port, 80, &err), -1);
  assert_int_equal(err.code, EADDRINUSE);
  assert_non_null(strstr(err.msg, "is in use on the host"));
  close(fd);
}

/* ---- (g) a policy change closes tunnels it denies ---------------------- */

static void client_swap(struct client *cl) {
  int fd = open_tunnel(cl, "echo.test");
  char buf[8];

  if (fd < 0)
    return;
  send_all(fd, "ping", 4);
  cl->len = read_exact(fd, buf, 4);
  uv_async_send(&cl->fx->swap);
  cl->rcode[0] = (int)recv(fd, buf, sizeof(buf), 0); /* EOF or reset */
  close(fd);
}

static void test_policy_swap_closes(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  fx->next_policy = test_policy(false);
  run_client(fx, &cl, client_swap, true);
  assert_int_equal(cl.status, 200);
  assert_int_equal(cl.len, 4);
  assert_true(cl.rcode[0] <= 0);
  e = wait_event(fx, "connect", "echo.test", false);
  assert_non_null(e);
  assert_non_null(strstr(e->reason, "policy changed"));
  assert_int_equal(e->up, 4);
}

/* ---- limits ------------------------------------------------------------- */

/* Connections beyond the per-sandbox cap are reset at once; the ones
 * before it are served. */
static void client_cap(struct client *cl) {
  static int fds[WR_CONNS_PER_SANDBOX];
  size_t opened = 0;
  int extra;
  char c;

  for (; opened < WR_CONNS_PER_SANDBOX; opened++) {
    fds[opened] = connect_to("127.0.0.1", WR_PROXY_PORT);
    if (fds[opened] < 0)
      break;
  }
  cl->rcode[2] = (int)opened;
  usleep(200 * 1000); /* let the loop accept them all */
  extra = connect_to("127.0.0.1", WR_PROXY_PORT);
  cl->rcode[3] = extra < 0 ? -1 : (int)recv(extra, &c, 1, 0);
  if (extra >= 0)
    close(extra);
  for (size_t i = 0; i < opened; i++)
    close(fds[i]);
  /* Served again once the loop has seen them go, which a loaded host may
   * take a moment to do: a connection made before that is still reset. */
  for (int tries = 0; tries < 50 && cl->status != 403; tries++) {
    if (tries > 0)
      usleep(100 * 1000);
    cl->status = 0;
    client_connect_denied(cl);
  }
}

static void test_connection_cap(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  struct rlimit rl = {4096, 4096};

  setrlimit(RLIMIT_NOFILE, &rl);
  run_client(fx, &cl, client_cap, true);
  assert_int_equal(cl.rcode[2], WR_CONNS_PER_SANDBOX);
  assert_true(cl.rcode[3] <= 0);
  assert_int_equal(cl.status, 403);
}

/* ---- SNI must match the CONNECT host ------------------------------------ */

/* A minimal TLS 1.2 ClientHello naming host. */
static size_t client_hello(uint8_t *out, const char *host) {
  size_t hl = strlen(host), ext = 9 + hl, body = 2 + 32 + 1 + 4 + 2 + 2 + ext;
  size_t n = 0;

  out[n++] = 0x16, out[n++] = 3, out[n++] = 1;
  out[n++] = (uint8_t)((body + 4) >> 8), out[n++] = (uint8_t)(body + 4);
  out[n++] = 1, out[n++] = 0;
  out[n++] = (uint8_t)(body >> 8), out[n++] = (uint8_t)body;
  out[n++] = 3, out[n++] = 3;
  memset(out + n, 7, 32), n += 32;
  out[n++] = 0;               /* session id */
  out[n++] = 0, out[n++] = 2; /* cipher suites */
  out[n++] = 0x13, out[n++] = 0x01;
  out[n++] = 1, out[n++] = 0; /* compression */
  out[n++] = (uint8_t)(ext >> 8), out[n++] = (uint8_t)ext;
  out[n++] = 0, out[n++] = 0; /* server_name */
  out[n++] = (uint8_t)((hl + 5) >> 8), out[n++] = (uint8_t)(hl + 5);
  out[n++] = (uint8_t)((hl + 3) >> 8), out[n++] = (uint8_t)(hl + 3);
  out[n++] = 0;
  out[n++] = (uint8_t)(hl >> 8), out[n++] = (uint8_t)hl;
  memcpy(out + n, host, hl);
  return n + hl;
}

static void client_sni(struct client *cl) {
  uint8_t hello[512];
  char buf[600];
  size_t len;
  int fd = open_tunnel(cl, "echo.test");

  if (fd < 0)
    return;
  len = client_hello(hello, "echo.test");
  send_all(fd, hello, len);
  cl->flag = read_exact(fd, buf, len) == len; /* the echo server answered */
  close(fd);
  fd = open_tunnel(cl, "echo.test");
  if (fd < 0)
    return;
  len = client_hello(hello, "other.test");
  send_all(fd, hello, len);
  cl->rcode[0] = (int)recv(fd, buf, sizeof(buf), 0);
  close(fd);
}

static void test_sni_mismatch(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  run_client(fx, &cl, client_sni, true);
  assert_true(cl.flag);
  assert_true(cl.rcode[0] <= 0);
  e = wait_event(fx, "connect", "echo.test", false);
  assert_non_null(e);
  assert_string_equal(e->reason, "SNI other.test does not match CONNECT host");
}

/* ---- IP literals and dial failures --------------------------------------- */

static void client_literals(struct client *cl) {
  char req[256];

  char head[512];
  int fd = connect_to("127.0.0.1", WR_PROXY_PORT);

  /* 0x7f.0.0.2 is 127.0.0.2, which a rule allows. */
  snprintf(req, sizeof(req), "CONNECT 0x7f.0.0.2:%u HTTP/1.1\r\n\r\n",
           G.echo.port);
  if (fd >= 0) {
    send_all(fd, req, strlen(req));
    read_head(fd, head, sizeof(head));
    cl->rcode[0] = status_of(head);
    close(fd);
  }
  /* 2130706433 is 127.0.0.1: loopback, no rule names it. */
  exchange_str(cl, "CONNECT 2130706433:80 HTTP/1.1\r\n\r\n");
  cl->rcode[1] = cl->status;
  /* Nothing listens on web.test's port 1. */
  exchange_str(cl, "CONNECT web.test:1 HTTP/1.1\r\n\r\n");
  cl->rcode[2] = cl->status;
  exchange_str(cl, "CONNECT nxdomain.invalid:443 HTTP/1.1\r\n\r\n");
  cl->rcode[3] = cl->status;
}

static void test_literals_and_failures(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  struct wr_policy *p = test_policy(true);

  add_rule(p, "nxdomain.invalid", true);
  wr_net_set_policy(fx->n, p);
  wr_policy_unref(p);
  run_client(fx, &cl, client_literals, true);
  assert_int_equal(cl.rcode[0], 200);
  assert_int_equal(cl.rcode[1], 403);
  assert_int_equal(cl.rcode[2], 502);
  /* 504 if the host's resolver does not answer within the budget. */
  assert_true(cl.rcode[3] == 502 || cl.rcode[3] == 504);
  e = wait_event(fx, "connect", "", false);
  assert_non_null(e);
  assert_string_equal(e->addr, "127.0.0.1");
}

/* ---- redirected connections (a redirect in the namespace) --------------- */

/* The redirect that a sandbox's filter makes, in the child's namespace:
 * loaded with libnftables (as warrend loads its own) from a thread that
 * entered the namespace, since a thread's network namespace is its own. */
static void *load_redirect_thread(void *arg) {
  static const char rules[] =
      "table inet t {\n chain o {\n  type nat hook output priority -100;\n"
      "  ip daddr 127.0.0.0/8 accept\n"
      "  meta l4proto tcp redirect to :3128\n }\n}\n";
  char path[64];
  struct nft_ctx *ctx;
  int fd, ok = 0;

  (void)arg;
  snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)G.child);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
    if (fd >= 0)
      close(fd);
    return (void *)(intptr_t)0;
  }
  close(fd);
  ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx != NULL) {
    nft_ctx_buffer_output(ctx);
    nft_ctx_buffer_error(ctx);
    ok = nft_run_cmd_from_buffer(ctx, "list table inet t") == 0 ||
         nft_run_cmd_from_buffer(ctx, rules) == 0;
    nft_ctx_free(ctx);
  }
  return (void *)(intptr_t)ok;
}

static bool load_redirect(void) {
  char cmd[256];
  pthread_t t;
  void *ok = NULL;

  if (pthread_create(&t, NULL, load_redirect_thread, NULL) != 0 ||
      pthread_join(t, &ok) != 0 || ok == NULL)
    return false;
  snprintf(cmd, sizeof(cmd),
           "nsenter --net=/proc/%d/ns/net ip route replace default dev lo src "
           "127.0.0.1 >/dev/null 2>&1",
           (int)G.child);
  return system(cmd) == 0;
}

static void client_redirected(struct client *cl) {
  char req[256];
  int fd = connect_to("198.51.100.7", G.web.port);
  char c;

  if (fd < 0) {
    cl->status = -2;
    return;
  }
  snprintf(req, sizeof(req), "GET /r HTTP/1.1\r\nHost: web.test\r\n\r\n");
  send_all(fd, req, strlen(req));
  cl->len = read_all(fd, cl->buf, sizeof(cl->buf));
  cl->status = status_of(cl->buf);
  close(fd);
  /* Denied by name: an HTTP client gets an HTTP answer. */
  fd = connect_to("198.51.100.7", 80);
  if (fd >= 0) {
    send_str(fd, "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n");
    read_all(fd, cl->extra, sizeof(cl->extra));
    cl->rcode[0] = status_of(cl->extra);
    close(fd);
  }
  /* Nothing sent: decided on the address after a moment; none allowed. */
  fd = connect_to("198.51.100.7", 22);
  if (fd >= 0) {
    cl->rcode[1] = (int)recv(fd, &c, 1, 0);
    close(fd);
  }
}

static void test_redirected(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  const struct event *e;

  if (!load_redirect()) {
    if (must_work())
      fail_msg("cannot load nft rules in the namespace");
    skip();
  }
  run_client(fx, &cl, client_redirected, true);
  assert_int_equal(cl.status, 200);
  assert_non_null(strstr(cl.buf, "GET /r HTTP/1.1"));
  assert_int_equal(cl.rcode[0], 403);
  assert_true(cl.rcode[1] <= 0);
  assert_non_null(wait_event(fx, "tcp", "web.test", true));
  assert_non_null(wait_event(fx, "tcp", "denied.test", false));
  e = wait_event(fx, "tcp", "", false);
  assert_non_null(e);
  assert_string_equal(e->addr, "198.51.100.7");
  assert_int_equal(e->port, 22);
}

/* A redirected HTTP connection carries one request: whatever follows it,
 * pipelined, after its body, or after the response, and whatever Host it
 * names, never reaches the upstream. The web server echoes every byte it
 * got, so a second request that got through would show. */
static const char *const one_request_cases[] = {
    "GET /first HTTP/1.1\r\nHost: web.test\r\n\r\n"
    "GET /second HTTP/1.1\r\nHost: denied.test\r\n\r\n",
    "GET /first HTTP/1.1\r\nHost: web.test\r\n\r\n"
    "GET /second HTTP/1.1\r\nHost: web.test\r\n\r\n",
    "POST /first HTTP/1.1\r\nHost: web.test\r\nContent-Length: 5\r\n\r\n"
    "helloGET /second HTTP/1.1\r\nHost: denied.test\r\n\r\n",
    "POST /first HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n"
    "\r\n5\r\nhello\r\n0\r\n\r\nGET /second HTTP/1.1\r\nHost: denied.test\r\n"
    "\r\n",
};

/* One case: sent in two writes, cut at `cut` bytes (0: one write). */
static bool one_request(struct client *cl, const char *req, size_t cut) {
  size_t len = strlen(req);
  int fd = connect_to("198.51.100.7", G.web.port);

  if (fd < 0)
    return false;
  send_all(fd, req, cut ? cut : len);
  if (cut) {
    usleep(50 * 1000);
    send_all(fd, req + cut, len - cut);
  }
  cl->len = read_all(fd, cl->buf, sizeof(cl->buf));
  close(fd);
  return status_of(cl->buf) == 200 && strstr(cl->buf, " /first ") &&
         !strstr(cl->buf, "/second") && !strstr(cl->buf, "denied.test");
}

static void client_one_request(struct client *cl) {
  char buf[256];
  int fd;

  for (size_t i = 0; i < WR_ARRAY_SIZE(one_request_cases); i++) {
    const char *req = one_request_cases[i];
    const char *body = strstr(req, "\r\n\r\n") + 4;
    if (!one_request(cl, req, 0) ||
        !one_request(cl, req, (size_t)(body - req) + 2)) {
      snprintf(cl->extra, sizeof(cl->extra), "case %zu: %.200s", i, cl->buf);
      return;
    }
  }
  /* A second request after the response finds the connection closed. */
  fd = connect_to("198.51.100.7", G.web.port);
  if (fd < 0)
    return;
  send_str(fd, "GET /first HTTP/1.1\r\nHost: web.test\r\n\r\n");
  read_head(fd, buf, sizeof(buf));
  cl->status = status_of(buf);
  usleep(400 * 1000); /* the server's answer is complete and sent */
  send_str(fd, "GET /second HTTP/1.1\r\nHost: denied.test\r\n\r\n");
  cl->len = read_all(fd, cl->buf, sizeof(cl->buf));
  cl->flag = strstr(cl->buf, "/second") == NULL;
  close(fd);
}

static void test_redirected_one_request(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  int before = __atomic_load_n(&G.web.accepted, __ATOMIC_SEQ_CST);
  const struct event *e;

  if (!load_redirect()) {
    if (must_work())
      fail_msg("cannot load nft rules in the namespace");
    skip();
  }
  run_client(fx, &cl, client_one_request, true);
  assert_string_equal(cl.extra, "");
  assert_int_equal(cl.status, 200);
  assert_true(cl.flag);
  /* One upstream connection per client connection, no more. */
  assert_int_equal(__atomic_load_n(&G.web.accepted, __ATOMIC_SEQ_CST) - before,
                   2 * WR_ARRAY_SIZE(one_request_cases) + 1);
  e = wait_event(fx, "tcp", "web.test", true);
  assert_non_null(e);
  assert_int_equal(e->port, G.web.port);
  assert_string_equal(e->addr, "127.0.0.2");
  assert_null(find_event(fx, "tcp", "denied.test", true));
  assert_null(find_event(fx, "tcp", "denied.test", false));
}

/* A redirected HTTP request is held to the same rules as one sent to the
 * proxy: ambiguous framing, folded lines, two Hosts, no Host or a target
 * that is not origin-form get 400, and nothing reaches the upstream. */
static const char *const redirected_bad_heads[] = {
    "POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: 5\r\n"
    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\n"
    "Host: denied.test\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: 5\r\n"
    "Content-Length: 0\r\n\r\nhello",
    "POST / HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: gzip, chunked\r\n"
    "\r\n0\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: web.test\r\nX-A: 1\r\n folded\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: web.test\r\nHost: denied.test\r\n\r\n",
    "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
    "GET / HTTP/1.0\r\n\r\n",
    "GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n",
    "CONNECT web.test:80 HTTP/1.1\r\nHost: web.test\r\n\r\n",
};

static void client_redirected_bad(struct client *cl) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(redirected_bad_heads); i++) {
    int fd = connect_to("198.51.100.7", G.web.port);

    if (fd < 0) {
      cl->status = -1;
      return;
    }
    send_str(fd, redirected_bad_heads[i]);
    cl->len = read_all(fd, cl->buf, sizeof(cl->buf));
    close(fd);
    if (status_of(cl->buf) != 400) {
      snprintf(cl->extra, sizeof(cl->extra), "head %zu: %.200s", i, cl->buf);
      return;
    }
  }
}

static void test_redirected_smuggling_refused(void **state) {
  struct fx *fx = *state;
  struct client cl = {0};
  int before = __atomic_load_n(&G.web.accepted, __ATOMIC_SEQ_CST);
  const struct event *e;

  if (!load_redirect()) {
    if (must_work())
      fail_msg("cannot load nft rules in the namespace");
    skip();
  }
  run_client(fx, &cl, client_redirected_bad, true);
  assert_int_equal(cl.status, 0);
  assert_string_equal(cl.extra, "");
  assert_int_equal(__atomic_load_n(&G.web.accepted, __ATOMIC_SEQ_CST), before);
  e = wait_event(fx, "tcp", "", false);
  assert_non_null(e);
  assert_int_equal(e->port, G.web.port);
  assert_true(e->reason[0] != '\0');
  for (size_t i = 0; i < fx->nevents; i++)
    assert_false(fx->events[i].allow);
}

/* ---- the head parser on its own ---------------------------------------- */

static void test_head_parser(void **state) {
  static const char req[] = "CONNECT [::1]:443 HTTP/1.1\r\n\r\nTLS";
  static const char split[] = "GET http://a.test/x HTTP/1.1\r\nX-Long-Name: "
                              "value\r\n\r\n";
  struct wr_proxy_head h;
  char buf[256];

  (void)state;
  wr_proxy_head_init(&h, false, 0);
  assert_int_equal(wr_proxy_head_feed(&h, req, sizeof(req) - 1), 1);
  assert_true(h.connect && h.host_is_ip);
  assert_string_equal(h.host, "::1");
  assert_int_equal(h.port, 443);
  assert_int_equal(h.head_len, sizeof(req) - 4);
  /* Fed a byte at a time, names and values split across reads. */
  wr_proxy_head_init(&h, false, 0);
  memset(buf, 0, sizeof(buf));
  for (size_t i = 0; i < sizeof(split) - 1; i++) {
    buf[i] = split[i];
    assert_int_equal(wr_proxy_head_feed(&h, buf, i + 1),
                     i + 2 == sizeof(split) ? 1 : 0);
  }
  assert_int_equal(h.nfields, 1);
  assert_int_equal(h.fields[0].name_len, strlen("X-Long-Name"));
  assert_int_equal(h.fields[0].value_len, strlen("value"));
  assert_true(h.body_done);
}

/* Heads that must be refused whatever http-parser makes of them, and
 * some it must take. */
static void test_head_parser_edges(void **state) {
  static const struct {
    const char *req;
    size_t len;
    int rc;
  } cases[] = {
#define C(s, rc) {s, sizeof(s) - 1, rc}
      C("GET http://a.test/ HTTP/1.1\r\nX: a\rHost: b\r\n\r\n", -1),
      C("GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n", -1),
      C("GET http://a.test/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n",
        -1),
      C("POST http://a.test/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n", -1),
      C("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", -1),
      C("GET http://a.test:80@evil.test/ HTTP/1.1\r\n\r\n", -1),
      C("POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        -1),
      C("GET http://a.test/ HTTP/2.0\r\n\r\n", -1),
      C("CONNECT a.test HTTP/1.1\r\n\r\n", -1),
      C("GET http://a%2etest/ HTTP/1.1\r\n\r\n", -1),
      C("GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", 1),
      C("GET http://A.TEST./ HTTP/1.1\r\nHost: a.test:80\r\n\r\n", 1),
      C("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n",
        1),
#undef C
  };
  struct wr_proxy_head h;

  (void)state;
  for (size_t i = 0; i < WR_ARRAY_SIZE(cases); i++) {
    wr_proxy_head_init(&h, false, 0);
    if (wr_proxy_head_feed(&h, cases[i].req, cases[i].len) != cases[i].rc)
      fail_msg("case %zu: %s", i, h.error);
  }
}

/* LF-only lines and extra spaces come out in canonical form. */
static void test_head_forward(void **state) {
  static const char req[] = "GET http://A.test:8080/x?y=1#f HTTP/1.1\n"
                            "Host: a.test:8080\nAccept:  */*  \n"
                            "Proxy-Connection: keep-alive\nTE: trailers\n\n";
  struct wr_proxy_head h;
  wr_buf_t out;

  (void)state;
  wr_proxy_head_init(&h, false, 0);
  assert_int_equal(wr_proxy_head_feed(&h, req, sizeof(req) - 1), 1);
  wr_buf_init(&out);
  wr_proxy_head_forward(&h, &out);
  assert_string_equal(out.data, "GET /x?y=1 HTTP/1.1\r\nHost: a.test:8080\r\n"
                                "Accept: */*\r\nConnection: close\r\n\r\n");
  wr_buf_free(&out);
}

/* ---- interception of a host with a secret ------------------------------- */

/* An upstream TLS server for secret.test, its certificate from a CA of the
 * test's own (passed to the engine as upstream_ca), made with openssl(1). */
static bool make_upstream_pki(void) {
  char cmd[2048];

  snprintf(cmd, sizeof(cmd),
           "(cd %s && printf 'subjectAltName=DNS:secret.test\\n' >ext && "
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
           "-nodes -keyout upca.key -out upca.crt -subj /CN=test-ca -days 2 "
           "&& openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
           "-keyout up.key -out up.csr -subj /CN=secret.test && "
           "openssl x509 -req -in up.csr -CA upca.crt -CAkey upca.key "
           "-CAcreateserial -out up.crt -days 2 -extfile ext) >/dev/null 2>&1",
           G.dir);
  return system(cmd) == 0;
}

struct tls_server {
  int fd;
  uint16_t port;
  SSL_CTX *ctx;
  bool hold;      /* keep the connection after the response, until EOF */
  char got[4096]; /* the request upstream received */
  pthread_t th;
};

static void *tls_server_main(void *arg) {
  struct tls_server *ts = arg;
  int fd = accept4(ts->fd, NULL, NULL, SOCK_CLOEXEC);
  SSL *ssl;
  char resp[4300];
  size_t got = 0;
  int n;

  if (fd < 0)
    return NULL;
  set_timeout(fd, 5000);
  ssl = SSL_new(ts->ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) == 1) {
    while (got + 1 < sizeof(ts->got) &&
           (n = SSL_read(ssl, ts->got + got,
                         (int)(sizeof(ts->got) - 1 - got))) > 0) {
      got += (size_t)n;
      ts->got[got] = '\0';
      if (strstr(ts->got, "\r\n\r\n") != NULL)
        break;
    }
    snprintf(resp, sizeof(resp),
             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n%s\r\nok",
             ts->hold ? "" : "Connection: close\r\n");
    SSL_write(ssl, resp, (int)strlen(resp));
    while (ts->hold && SSL_read(ssl, resp, sizeof(resp)) > 0)
      ;
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  close(fd);
  return NULL;
}

static bool tls_server_start(struct tls_server *ts) {
  char crt[128], key[128];

  snprintf(crt, sizeof(crt), "%s/up.crt", G.dir);
  snprintf(key, sizeof(key), "%s/up.key", G.dir);
  ts->ctx = SSL_CTX_new(TLS_server_method());
  if (SSL_CTX_use_certificate_file(ts->ctx, crt, SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_use_PrivateKey_file(ts->ctx, key, SSL_FILETYPE_PEM) != 1)
    return false;
  ts->fd = listen_tcp("127.0.0.2", 0, &ts->port);
  return ts->fd >= 0 && pthread_create(&ts->th, NULL, tls_server_main, ts) == 0;
}

struct tls_client {
  struct client base;
  const char *ca_pem;
  uint16_t port;
};

/* Trust exactly warren's CA, as a sandbox does. */
static SSL_CTX *sandbox_ctx(const char *ca_pem) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  BIO *bio = BIO_new_mem_buf(ca_pem, -1);
  X509 *ca = PEM_read_bio_X509(bio, NULL, NULL, NULL);

  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  X509_free(ca);
  BIO_free(bio);
  return ctx;
}

/* CONNECT secret.test, the TLS handshake trusting warren's CA, and one
 * request; NULL (cl->extra says why) on failure. */
static SSL *intercepted_request(struct client *cl, SSL_CTX *ctx, int fd) {
  struct tls_client *tc = (struct tls_client *)cl;
  char req[256], head[512];
  SSL *ssl;

  snprintf(req, sizeof(req), "CONNECT secret.test:%u HTTP/1.1\r\n\r\n",
           tc->port);
  send_all(fd, req, strlen(req));
  read_head(fd, head, sizeof(head));
  cl->status = status_of(head);
  ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "secret.test");
  SSL_set1_host(ssl, "secret.test");
  if (SSL_connect(ssl) != 1) {
    snprintf(cl->extra, sizeof(cl->extra), "handshake failed");
    SSL_free(ssl);
    return NULL;
  }
  snprintf(req, sizeof(req),
           "GET /v1 HTTP/1.1\r\nHost: secret.test:%u\r\n"
           "x-api-key: " WR_SECRET_PLACEHOLDER "\r\n\r\n",
           tc->port);
  SSL_write(ssl, req, (int)strlen(req));
  return ssl;
}

static void client_intercepted(struct client *cl) {
  struct tls_client *tc = (struct tls_client *)cl;
  SSL_CTX *ctx = sandbox_ctx(tc->ca_pem);
  int fd = connect_to("127.0.0.1", WR_PROXY_PORT), n;
  SSL *ssl = fd >= 0 ? intercepted_request(cl, ctx, fd) : NULL;

  while (ssl != NULL &&
         (n = SSL_read(ssl, cl->buf + cl->len,
                       (int)(sizeof(cl->buf) - 1 - cl->len))) > 0)
    cl->len += (size_t)n;
  cl->buf[cl->len] = '\0';
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  if (fd >= 0)
    close(fd);
}

/* An engine with a CA this time, in place of the fixture's, and a secret
 * for secret.test, whose upstream has a CA of the test's own. */
static void use_ca_engine(struct fx *fx) {
  struct wr_net_config cfg = {0};
  char *hosts[] = {"secret.test", NULL};
  struct wr_secret sec = {.service = "test",
                          .hosts = hosts,
                          .header = "x-api-key",
                          .prefix = "",
                          .value = "sk-real-value"};
  _cleanup_free_ char *ca_dir = xasprintf("%s/ca", G.dir);
  _cleanup_free_ char *up_ca = xasprintf("%s/upca.crt", G.dir);
  wr_error_t err = {0};

  wr_net_shutdown(fx->n);
  uv_run(&fx->loop, UV_RUN_NOWAIT);
  spin(fx, 10);
  wr_net_free(fx->n);
  mkdir(ca_dir, 0700);
  cfg.loop = &fx->loop;
  cfg.hosts_file = G.hosts;
  cfg.ca_dir = ca_dir;
  cfg.upstream_ca = up_ca;
  cfg.log = on_event;
  cfg.log_arg = fx;
  if (wr_net_new(&cfg, &fx->n, &err) < 0)
    fail_msg("wr_net_new: %s", err.msg);
  wr_net_set_policy(fx->n, fx->policy);
  wr_net_set_secrets(fx->n, &sec, 1);
  assert_int_equal(wr_net_attach(fx->n, SANDBOX, G.nsfd, NULL, &err), 0);
}

static void test_secret_intercepted(void **state) {
  struct fx *fx = *state;
  struct tls_server ts = {0};
  struct tls_client tc = {0};
  const struct event *e;

  if (!make_upstream_pki() || !tls_server_start(&ts))
    fail_msg("upstream TLS server");
  use_ca_engine(fx);
  tc.ca_pem = wr_net_ca_pem(fx->n);
  tc.port = ts.port;
  assert_non_null(tc.ca_pem);
  run_client(fx, &tc.base, client_intercepted, true);
  pthread_join(ts.th, NULL);
  close(ts.fd);
  SSL_CTX_free(ts.ctx);
  assert_int_equal(tc.base.status, 200);
  assert_string_equal(tc.base.extra, "");
  assert_non_null(strstr(tc.base.buf, "HTTP/1.1 200 OK"));
  /* Upstream got the real credential, never the placeholder. */
  assert_non_null(strcasestr(ts.got, "x-api-key: sk-real-value\r\n"));
  assert_null(strstr(ts.got, WR_SECRET_PLACEHOLDER));
  e = wait_event(fx, "connect", "secret.test", true);
  assert_non_null(e);
  assert_true(e->intercepted);
  assert_string_equal(e->addr, "127.0.0.2");
}

/* One request and its response, then the connection stays open on both
 * sides; the loop is asked to act (fx->swap) and the client waits for the
 * proxy to end it: rcode[0] is the read's result, rcode[1] how long it
 * took (ms). */
static void client_intercepted_held(struct client *cl) {
  struct tls_client *tc = (struct tls_client *)cl;
  SSL_CTX *ctx = sandbox_ctx(tc->ca_pem);
  int fd = connect_to("127.0.0.1", WR_PROXY_PORT), n;
  SSL *ssl = fd >= 0 ? intercepted_request(cl, ctx, fd) : NULL;
  uint64_t start;

  while (ssl != NULL && strstr(cl->buf, "\r\n\r\nok") == NULL &&
         (n = SSL_read(ssl, cl->buf + cl->len,
                       (int)(sizeof(cl->buf) - 1 - cl->len))) > 0) {
    cl->len += (size_t)n;
    cl->buf[cl->len] = '\0';
  }
  if (ssl != NULL && strstr(cl->buf, "\r\n\r\nok") != NULL) {
    start = wr_mono_ns();
    uv_async_send(&cl->fx->swap);
    cl->rcode[0] = SSL_read(ssl, cl->extra, sizeof(cl->extra));
    cl->rcode[1] = (int)((wr_mono_ns() - start) / 1000000);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  if (fd >= 0)
    close(fd);
}

/* An intercepted connection that both peers keep open, until the loop
 * acts on it; returns the client's outcome. */
static void run_held_interception(struct fx *fx, struct tls_client *tc) {
  struct tls_server ts = {.hold = true};

  if (!make_upstream_pki() || !tls_server_start(&ts))
    fail_msg("upstream TLS server");
  use_ca_engine(fx);
  tc->ca_pem = wr_net_ca_pem(fx->n);
  tc->port = ts.port;
  run_client(fx, &tc->base, client_intercepted_held, true);
  /* The upstream saw its connection end too. */
  pthread_join(ts.th, NULL);
  close(ts.fd);
  SSL_CTX_free(ts.ctx);
  assert_int_equal(tc->base.status, 200);
  assert_non_null(strstr(tc->base.buf, "HTTP/1.1 200 OK"));
  assert_true(tc->base.rcode[0] <= 0);
  assert_in_range(tc->base.rcode[1], 0, 1500);
}

/* Detaching the sandbox ends its intercepted connections at once (not
 * when a peer closes or the idle timeout hits), and then nothing keeps
 * the loop running: the daemon's shutdown does not wait for them. */
static void test_detach_ends_interception(void **state) {
  struct fx *fx = *state;
  struct tls_client tc = {0};
  const struct event *e;
  uint64_t start;

  fx->swap_detaches = true;
  run_held_interception(fx, &tc);
  e = wait_event(fx, "connect", "secret.test", true);
  assert_non_null(e);
  assert_true(e->intercepted);
  assert_string_equal(e->reason, "cancelled");
  wr_net_shutdown(fx->n);
  uv_close((uv_handle_t *)&fx->swap, NULL);
  fx->swap_closed = true;
  start = wr_mono_ns();
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_true(wr_mono_ns() - start < 1000000000ull);
}

/* A policy that denies the intercepted host ends the connection, which is
 * logged as denied, like a tunnel. */
static void test_policy_swap_ends_interception(void **state) {
  struct fx *fx = *state;
  struct tls_client tc = {0};
  const struct event *e;

  fx->next_policy = test_policy(true);
  add_rule(fx->next_policy, "secret.test", false);
  run_held_interception(fx, &tc);
  e = wait_event(fx, "connect", "secret.test", false);
  assert_non_null(e);
  assert_true(e->intercepted);
  assert_non_null(strstr(e->reason, "policy changed"));
  assert_true(e->up > 0 && e->down > 0);
  assert_null(find_event(fx, "connect", "secret.test", true));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_parser),
      cmocka_unit_test(test_head_parser_edges),
      cmocka_unit_test(test_head_forward),
      cmocka_unit_test_setup_teardown(test_connect_denied, setup, teardown),
      cmocka_unit_test_setup_teardown(test_connect_tunnel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dns, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rebinding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_smuggling_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http_forward, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http_chunked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
      cmocka_unit_test_setup_teardown(test_published_port, setup, teardown),
      cmocka_unit_test_setup_teardown(test_published_port_waits_for_wake, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_publish_port_in_use, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_policy_swap_closes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sni_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_connection_cap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_literals_and_failures, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_secret_intercepted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_detach_ends_interception, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_policy_swap_ends_interception, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_redirected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_redirected_one_request, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_redirected_smuggling_refused, setup,
                                      teardown),
  };

  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
