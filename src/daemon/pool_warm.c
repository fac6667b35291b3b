/*
 * A spare's warm-up (pool.h): before a pool pauses a sandbox it has just
 * filled, the sandbox serves its first page and goes quiet, so that the
 * create that claims it finds a dev server that has done its first
 * request's work. A Vite server answers its port long before it has
 * transformed index.html and scanned the imports behind it: its first
 * page took 30 ms and its second 270 ms, against 2-6 ms once warm, and a
 * paused spare keeps that state.
 *
 * With a template's ready port: one GET / on a socket made inside the
 * sandbox's network namespace (as the readiness probe and published ports
 * do), read to its end and thrown away (nothing of it is parsed; at most
 * WARM_MAX_BYTES is read). Then, for any image: the sandbox's CPU use is
 * sampled every SETTLE_TICK_MS until two ticks in a row use less than
 * SETTLE_QUIET_NS each. All of it within SETTLE_MAX_MS; a failure at any
 * step only ends the warm-up early. Loop thread only.
 */
#include "daemon/pool.h"

#include <fcntl.h>
#include <netinet/in.h>

#include "net/net.h"

#define SETTLE_TICK_MS 100
#define SETTLE_MAX_MS 10000
#define SETTLE_QUIET_NS (5ull * 1000000) /* 5% of a CPU over a tick */
#define SETTLE_QUIET_TICKS 2
#define WARM_MAX_BYTES (1u << 20)

static const char warm_request[] = "GET / HTTP/1.1\r\n"
                                   "Host: localhost\r\n"
                                   "Accept: text/html\r\n"
                                   "Connection: close\r\n\r\n";

struct warm {
  struct wr_sandbox *sb;
  void (*then)(struct wr_sandbox *sb);
  uv_timer_t timer;
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  bool tcp_open, settling;
  int handles;
  int64_t deadline_ms;
  uint64_t cpu_ns;
  unsigned quiet;
  size_t got;
  char buf[16384];
};

static void warm_closed(uv_handle_t *h) {
  struct warm *w = h->data;

  if (--w->handles > 0)
    return;
  if (!w->sb->removed)
    w->then(w->sb);
  wr_sandbox_unref(w->sb);
  free(w);
}

static void warm_end(struct warm *w) {
  if (w->tcp_open && !uv_is_closing((uv_handle_t *)&w->tcp))
    uv_close((uv_handle_t *)&w->tcp, warm_closed);
  if (!uv_is_closing((uv_handle_t *)&w->timer))
    uv_close((uv_handle_t *)&w->timer, warm_closed);
}

static bool still_filling(const struct warm *w) {
  return !w->sb->removed && w->sb->state == WR_SB_RUNNING &&
         w->sb->pool_state == WR_POOL_FILLING;
}

static void settle_tick(uv_timer_t *t) {
  struct warm *w = t->data;
  uint64_t now = wr_rt_cpu_usage(w->sb->d->rt, w->sb->id);

  if (!still_filling(w) || wr_now_ms() >= w->deadline_ms || now == 0) {
    warm_end(w);
    return;
  }
  w->quiet = now - w->cpu_ns < SETTLE_QUIET_NS ? w->quiet + 1 : 0;
  w->cpu_ns = now;
  if (w->quiet >= SETTLE_QUIET_TICKS)
    warm_end(w);
}

/* The page is served (or could not be): wait for the quiet. */
static void settle(struct warm *w) {
  if (w->settling)
    return;
  w->settling = true;
  if (w->tcp_open && !uv_is_closing((uv_handle_t *)&w->tcp))
    uv_close((uv_handle_t *)&w->tcp, warm_closed);
  w->cpu_ns = wr_rt_cpu_usage(w->sb->d->rt, w->sb->id);
  uv_timer_start(&w->timer, settle_tick, SETTLE_TICK_MS, SETTLE_TICK_MS);
}

/* The GET's own limit: the warm-up's deadline. */
static void page_timeout(uv_timer_t *t) {
  settle(t->data);
}

static void page_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  struct warm *w = h->data;

  (void)size;
  *buf = uv_buf_init(w->buf, sizeof(w->buf));
}

static void page_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct warm *w = s->data;

  (void)buf;
  if (n > 0)
    w->got += (size_t)n;
  if (n < 0 || w->got > WARM_MAX_BYTES)
    settle(w);
}

static void page_written(uv_write_t *req, int status) {
  struct warm *w = req->data;

  if (status < 0 || w->settling ||
      uv_read_start((uv_stream_t *)&w->tcp, page_alloc, page_read) < 0)
    settle(w);
}

static void page_connected(uv_connect_t *c, int status) {
  struct warm *w = c->data;
  uv_buf_t b = uv_buf_init((char *)warm_request, sizeof(warm_request) - 1);

  if (w->settling)
    return;
  w->write.data = w;
  if (status < 0 ||
      uv_write(&w->write, (uv_stream_t *)&w->tcp, &b, 1, page_written) < 0)
    settle(w);
}

/* 0 when the GET is on its way, -1 when there is none to make. */
static int page_begin(struct warm *w, uint16_t port) {
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  _cleanup_close_ int netns = -1;
  wr_error_t err;
  int fd;

  if (port == 0 || (netns = wr_rt_open_netns(&w->sb->inst, &err)) < 0 ||
      (fd = wr_net_socket_in(netns, AF_INET, SOCK_STREAM, &err)) < 0)
    return -1;
  uv_tcp_init(w->sb->d->loop, &w->tcp);
  w->tcp.data = w;
  w->tcp_open = true;
  w->handles++;
  if (uv_tcp_open(&w->tcp, fd) < 0) {
    close(fd);
    return -1;
  }
  w->connect.data = w;
  if (uv_tcp_connect(&w->connect, &w->tcp, (struct sockaddr *)&addr,
                     page_connected) < 0)
    return -1;
  uv_timer_start(&w->timer, page_timeout, SETTLE_MAX_MS, 0);
  return 0;
}

void wr_pool_warm(struct wr_sandbox *sb, void (*then)(struct wr_sandbox *sb)) {
  struct warm *w = xcalloc(1, sizeof(*w));
  json_t *port = sb->spec.template != NULL
                     ? json_object_get(sb->spec.template, "port")
                     : NULL;

  w->sb = sb;
  wr_sandbox_ref(sb);
  w->then = then;
  w->deadline_ms = wr_now_ms() + SETTLE_MAX_MS;
  uv_timer_init(sb->d->loop, &w->timer);
  w->timer.data = w;
  w->handles = 1;
  if (page_begin(w, (uint16_t)json_integer_value(port)) < 0)
    settle(w);
}
