/*
 * Unit tests for src/api: a real server on a libuv loop in a thread,
 * driven by the real client and by raw sockets for malformed input.
 * Responses on raw sockets are parsed with http-parser too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <ctype.h>
#include <fcntl.h>
#include <http_parser.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "api/api.h"

#define API_KEY "test-key-0123"
#define BIG_TOTAL (8u * 1024 * 1024)
#define UPLOAD_TOTAL (4u * 1024 * 1024)

struct fx {
  uv_loop_t loop;
  uv_async_t stop;
  uv_async_t go;
  pthread_t thread;
  wr_http_server_t *srv;
  char dir[64];
  char sock[128];
  char addr[160];
  int tcp_port;
  wr_http_req_t *waiting; /* loop thread only */
  bool stopped;
  atomic_int aborts;
  atomic_int bad_writes;
  atomic_int finished;
  atomic_int smuggled;
  atomic_int drains;
  atomic_int upload_errors;
  atomic_int pauses;
  atomic_size_t produced;
  atomic_size_t produced_at_resume;
};

/* ---- handlers (loop thread) --------------------------------------------- */

static void h_ping(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static json_t *str_or_null(const char *s) {
  return s ? json_string(s) : json_null();
}

static void h_item(wr_http_req_t *req, void *ctx) {
  struct fx *fx = ctx;
  const char *id = wr_http_param(req, "id");

  if (strcmp(id, "smuggled") == 0)
    fx->smuggled++;
  wr_http_reply_json(req, 200,
                     json_pack("{s:s,s:o,s:o}", "id", id, "q",
                               str_or_null(wr_http_query(req, "q")), "flag",
                               str_or_null(wr_http_query(req, "flag"))));
}

static void h_item_delete(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_reply_empty(req, 204);
}

static void h_echo(wr_http_req_t *req, void *ctx) {
  size_t len;
  const char *body = wr_http_body(req, &len);
  (void)ctx;

  wr_http_reply_json(
      req, 200,
      json_pack("{s:i,s:s%}", "len", (json_int_t)len, "body", body, len));
}

static void h_files(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_reply_json(req, 200,
                     json_pack("{s:s,s:s}", "a", wr_http_param(req, "a"), "b",
                               wr_http_param(req, "b")));
}

static void h_strict(wr_http_req_t *req, void *ctx) {
  json_t *obj = NULL;
  char *name = NULL;
  struct wr_json_field fields[] = {{"name", WR_JSON_STRING, &name, true, NULL}};
  wr_error_t err = {0};
  size_t len;
  const char *body = wr_http_body(req, &len);
  (void)ctx;

  if (wr_json_parse_object(body, len, false, &obj, &err) < 0 ||
      wr_json_unpack(obj, fields, 1, &err) < 0) {
    json_decref(obj);
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return;
  }
  wr_http_reply_json(req, 200, json_pack("{s:s}", "hello", name));
  json_decref(obj);
}

static void wait_aborted(wr_http_req_t *req, void *arg) {
  struct fx *fx = arg;

  fx->aborts++;
  if (fx->waiting == req) {
    fx->waiting = NULL;
    wr_http_stream_end(req);
  }
}

static void h_wait_stream(wr_http_req_t *req, void *ctx) {
  struct fx *fx = ctx;

  wr_http_stream_begin(req, 200, "text/plain", NULL);
  wr_http_stream_write(req, "first\n", 6);
  wr_http_on_abort(req, wait_aborted, fx);
  fx->waiting = req;
}

static void on_go(uv_async_t *a) {
  struct fx *fx = a->data;
  wr_http_req_t *req = fx->waiting;

  if (req == NULL)
    return;
  fx->waiting = NULL;
  wr_http_stream_write(req, "second\n", 7);
  wr_http_stream_end(req);
}

static void h_small_stream(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_stream_begin(req, 200, "text/plain", "X-Test: yes\r\n");
  wr_http_stream_write(req, "a", 1);
  wr_http_stream_write(req, "b", 1);
  wr_http_stream_end(req);
}

/* A big reply written under backpressure: stop above 256 KiB queued and
 * go on in on_drain. */
struct big {
  struct fx *fx;
  size_t sent;
};

static void big_pump(wr_http_req_t *req, void *arg) {
  struct big *b = arg;
  char chunk[65536];

  if (b->sent > 0)
    b->fx->drains++;
  while (b->sent < BIG_TOTAL) {
    size_t queued;
    for (size_t i = 0; i < sizeof(chunk); i++)
      chunk[i] = (char)((b->sent + i) % 251);
    queued = wr_http_stream_write(req, chunk, sizeof(chunk));
    b->sent += sizeof(chunk);
    if (queued > 256 * 1024 && !wr_http_aborted(req))
      return;
  }
  wr_http_stream_end(req);
  free(b);
}

static void h_big(wr_http_req_t *req, void *ctx) {
  struct big *b = calloc(1, sizeof(*b));

  b->fx = ctx;
  wr_http_on_drain(req, big_pump, b);
  wr_http_stream_begin(req, 200, "application/octet-stream", NULL);
  big_pump(req, b);
}

/* A streamed upload that pauses for 150 ms after its first piece. */
struct upload {
  struct fx *fx;
  wr_http_req_t *req;
  uv_timer_t timer;
  size_t total;
  uint32_t sum;
  size_t during_pause;
  bool paused;
  bool paused_once;
};

static void upload_free(uv_handle_t *h) {
  free(h->data);
}

static void upload_resume(uv_timer_t *t) {
  struct upload *u = t->data;

  u->fx->produced_at_resume = u->fx->produced;
  u->paused = false;
  wr_http_body_pause(u->req, false);
}

static void upload_data(wr_http_req_t *req, const char *data, size_t len,
                        void *arg) {
  struct upload *u = arg;

  if (u->paused)
    u->during_pause += len;
  u->total += len;
  for (size_t i = 0; i < len; i++)
    u->sum += (unsigned char)data[i];
  if (!u->paused_once) {
    u->paused_once = u->paused = true;
    u->fx->pauses++;
    wr_http_body_pause(req, true);
    uv_timer_start(&u->timer, upload_resume, 150, 0);
  }
}

static void upload_end(wr_http_req_t *req, int status, void *arg) {
  struct upload *u = arg;

  if (status < 0) {
    u->fx->upload_errors++;
    wr_http_reply_error(req, 400, "bad_request", "upload failed");
  } else {
    wr_http_reply_json(req, 200,
                       json_pack("{s:I,s:I,s:I}", "len", (json_int_t)u->total,
                                 "sum", (json_int_t)u->sum, "during_pause",
                                 (json_int_t)u->during_pause));
  }
  u->fx->finished++;
  uv_close((uv_handle_t *)&u->timer, upload_free);
}

static void count_abort(wr_http_req_t *req, void *arg) {
  struct fx *fx = arg;
  (void)req;
  fx->aborts++;
}

static void h_upload(wr_http_req_t *req, void *ctx) {
  struct upload *u = calloc(1, sizeof(*u));
  struct fx *fx = ctx;

  u->fx = fx;
  u->req = req;
  uv_timer_init(&fx->loop, &u->timer);
  u->timer.data = u;
  wr_http_on_abort(req, count_abort, fx);
  wr_http_body_read(req, upload_data, upload_end, u);
}

static void attach_data(wr_http_req_t *req, const char *data, size_t len,
                        void *arg) {
  (void)arg;
  wr_http_raw_write(req, data, len);
}

static void attach_close(wr_http_req_t *req, void *arg) {
  (void)arg;
  wr_http_raw_close(req);
}

static void h_attach(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  if (wr_http_upgrade(req, "warren-test", attach_data, attach_close, NULL) < 0)
    wr_http_reply_error(req, 400, "bad_request", "upgrade required");
}

/* A stream that keeps writing every 20 ms; once aborted it writes three
 * more times (those writes must be dropped) and then ends. */
struct hang {
  struct fx *fx;
  wr_http_req_t *req;
  uv_timer_t timer;
  int after_abort;
};

static void hang_closed(uv_handle_t *h) {
  free(h->data);
}

static void hang_tick(uv_timer_t *t) {
  struct hang *h = t->data;
  size_t queued = wr_http_stream_write(h->req, "tick\n", 5);

  if (!wr_http_aborted(h->req))
    return;
  if (queued != 0)
    h->fx->bad_writes++;
  if (++h->after_abort < 3)
    return;
  wr_http_stream_end(h->req);
  h->fx->finished++;
  uv_timer_stop(t);
  uv_close((uv_handle_t *)t, hang_closed);
}

static void h_hang(wr_http_req_t *req, void *ctx) {
  struct hang *h = calloc(1, sizeof(*h));
  struct fx *fx = ctx;

  h->fx = fx;
  h->req = req;
  uv_timer_init(&fx->loop, &h->timer);
  h->timer.data = h;
  wr_http_on_abort(req, count_abort, fx);
  wr_http_stream_begin(req, 200, "text/plain", NULL);
  wr_http_stream_write(req, "tick\n", 5);
  uv_timer_start(&h->timer, hang_tick, 20, 20);
}

/* A reply that fails half way: the client must not see it complete. */
static void h_abort_stream(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_stream_begin(req, 200, "text/plain", NULL);
  wr_http_stream_write(req, "partial", 7);
  wr_http_stream_abort(req);
}

static void h_abort_early(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_stream_abort(req);
}

static void h_json_text(wr_http_req_t *req, void *ctx) {
  static const char text[] = "{\"built\":\"elsewhere\"}\n";
  (void)ctx;
  wr_http_reply_json_text(req, 200, text, sizeof(text) - 1);
}

static const struct wr_http_route routes[] = {
    {"GET", "/v1/ping", h_ping, 0},
    {"GET", "/v1/items/{id}", h_item, 0},
    {"DELETE", "/v1/items/{id}", h_item_delete, 0},
    {"POST", "/v1/items/{id}/echo", h_echo, 0},
    {"GET", "/v1/files/{a}/{b}", h_files, 0},
    {"POST", "/v1/strict", h_strict, 0},
    {"GET", "/v1/wait-stream", h_wait_stream, 0},
    {"GET", "/v1/small-stream", h_small_stream, 0},
    {"GET", "/v1/big", h_big, 0},
    {"POST", "/v1/upload", h_upload, WR_ROUTE_STREAM_BODY},
    {"GET", "/v1/attach", h_attach, 0},
    {"GET", "/v1/hang", h_hang, 0},
    {"GET", "/v1/abort-stream", h_abort_stream, 0},
    {"GET", "/v1/abort-early", h_abort_early, 0},
    {"GET", "/v1/json-text", h_json_text, 0},
};

/* ---- fixture ------------------------------------------------------------ */

static void on_stop(uv_async_t *a) {
  struct fx *fx = a->data;

  wr_http_server_close(fx->srv, NULL, NULL);
  uv_close((uv_handle_t *)&fx->stop, NULL);
  uv_close((uv_handle_t *)&fx->go, NULL);
}

static void *loop_thread(void *arg) {
  struct fx *fx = arg;

  uv_run(&fx->loop, UV_RUN_DEFAULT);
  return NULL;
}

static int start(void **state, const struct wr_http_limits *limits) {
  struct fx *fx = calloc(1, sizeof(*fx));
  wr_error_t err = {0};

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  strcpy(fx->dir, "/tmp/wr-api-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  snprintf(fx->sock, sizeof(fx->sock), "%s/api.sock", fx->dir);
  snprintf(fx->addr, sizeof(fx->addr), "unix:%s", fx->sock);
  assert_int_equal(wr_http_server_new(&fx->loop, routes, WR_ARRAY_SIZE(routes),
                                      fx, limits, &fx->srv, &err),
                   0);
  assert_int_equal(wr_http_listen_unix(fx->srv, fx->sock, 0600, &err), 0);
  assert_int_equal(wr_http_listen_tcp(fx->srv, "127.0.0.1:0", API_KEY, &err),
                   0);
  fx->tcp_port = wr_http_server_tcp_port(fx->srv);
  assert_true(fx->tcp_port > 0);
  uv_async_init(&fx->loop, &fx->stop, on_stop);
  fx->stop.data = fx;
  uv_async_init(&fx->loop, &fx->go, on_go);
  fx->go.data = fx;
  assert_int_equal(pthread_create(&fx->thread, NULL, loop_thread, fx), 0);
  *state = fx;
  return 0;
}

static int setup(void **state) {
  return start(state, NULL);
}

static int setup_tight(void **state) {
  struct wr_http_limits l = {
      .max_header_bytes = 1024,
      .max_body_bytes = 1024,
      .max_conns = 3,
      .header_timeout_ms = 300,
      .idle_timeout_ms = 400,
  };
  return start(state, &l);
}

/* Stop the server; the loop must end with every handle closed. */
static int teardown(void **state) {
  struct fx *fx = *state;

  if (!fx->stopped) {
    uv_async_send(&fx->stop);
    pthread_join(fx->thread, NULL);
  }
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  unlink(fx->sock);
  rmdir(fx->dir);
  free(fx);
  return 0;
}

/* ---- helpers (test thread) ---------------------------------------------- */

static void set_timeout(int fd, int ms) {
  struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int raw_connect(const struct fx *fx) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  strcpy(sa.sun_path, fx->sock);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  set_timeout(fd, 5000);
  return fd;
}

static void send_str(int fd, const char *s) {
  assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* One response read from a raw socket. */
struct raw_resp {
  int status;
  char headers[4096]; /* "name: value\n", names lowercased */
  size_t hlen;
  wr_buf_t body;
  bool done;
  bool in_value;
};

struct reader {
  int fd;
  http_parser p;
  wr_buf_t in;
  struct raw_resp *r;
};

static int rd_field(http_parser *p, const char *at, size_t len) {
  struct raw_resp *r = ((struct reader *)p->data)->r;

  if (r->in_value || r->hlen == 0) {
    if (r->hlen > 0)
      r->headers[r->hlen++] = '\n';
    r->in_value = false;
  }
  for (size_t i = 0; i < len && r->hlen + 2 < sizeof(r->headers); i++)
    r->headers[r->hlen++] = (char)tolower((unsigned char)at[i]);
  r->headers[r->hlen] = '\0';
  return 0;
}

static int rd_value(http_parser *p, const char *at, size_t len) {
  struct raw_resp *r = ((struct reader *)p->data)->r;

  if (!r->in_value && r->hlen + 3 < sizeof(r->headers)) {
    memcpy(r->headers + r->hlen, ": ", 2);
    r->hlen += 2;
  }
  r->in_value = true;
  for (size_t i = 0; i < len && r->hlen + 2 < sizeof(r->headers); i++)
    r->headers[r->hlen++] = at[i];
  r->headers[r->hlen] = '\0';
  return 0;
}

static int rd_body(http_parser *p, const char *at, size_t len) {
  wr_buf_append(&((struct reader *)p->data)->r->body, at, len);
  return 0;
}

static int rd_done(http_parser *p) {
  struct reader *rd = p->data;

  rd->r->status = p->status_code;
  rd->r->done = true;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings rd_settings = {
    .on_header_field = rd_field,
    .on_header_value = rd_value,
    .on_body = rd_body,
    .on_message_complete = rd_done,
};

static void reader_init(struct reader *rd, int fd) {
  memset(rd, 0, sizeof(*rd));
  rd->fd = fd;
  http_parser_init(&rd->p, HTTP_RESPONSE);
  rd->p.data = rd;
}

/* Read one whole response; returns 0, or -1 if the connection ended or
 * timed out first. */
static int read_resp(struct reader *rd, struct raw_resp *r) {
  char buf[65536];

  memset(r, 0, sizeof(*r));
  rd->r = r;
  while (!r->done) {
    size_t n;
    if (rd->in.len == 0) {
      ssize_t got = recv(rd->fd, buf, sizeof(buf), 0);
      if (got <= 0) {
        http_parser_execute(&rd->p, &rd_settings, NULL, 0);
        return r->done ? 0 : -1;
      }
      wr_buf_append(&rd->in, buf, (size_t)got);
    }
    n = http_parser_execute(&rd->p, &rd_settings, rd->in.data, rd->in.len);
    if (HTTP_PARSER_ERRNO(&rd->p) == HPE_PAUSED)
      http_parser_pause(&rd->p, 0);
    else if (HTTP_PARSER_ERRNO(&rd->p) != HPE_OK)
      return -1;
    wr_buf_consume(&rd->in, n);
  }
  return 0;
}

static const char *header_of(const struct raw_resp *r, const char *name) {
  static char value[512];
  char key[64];
  const char *p;

  snprintf(key, sizeof(key), "%s: ", name);
  for (p = r->headers; p != NULL && *p != '\0';
       p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    if (strncmp(p, key, strlen(key)) == 0) {
      const char *v = p + strlen(key);
      size_t len = strcspn(v, "\n");
      snprintf(value, sizeof(value), "%.*s", (int)len, v);
      return value;
    }
  }
  return NULL;
}

/* Did the server close the connection (EOF) within the socket timeout? */
static bool peer_closed(int fd) {
  char buf[4096];
  ssize_t n;

  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
    ;
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Send raw bytes on a new connection; read one response. */
static int raw_exchange(const struct fx *fx, const char *req,
                        struct raw_resp *r, bool *closed) {
  struct reader rd;
  int fd = raw_connect(fx);
  int ret;

  reader_init(&rd, fd);
  send_str(fd, req);
  ret = read_resp(&rd, r);
  if (closed != NULL)
    *closed = rd.in.len == 0 && peer_closed(fd);
  wr_buf_free(&rd.in);
  close(fd);
  return ret;
}

static json_t *body_json(const struct wr_http_response *r) {
  json_t *j =
      json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, NULL);
  assert_non_null(j);
  return j;
}

static const char *jstr(const json_t *j, const char *key) {
  return json_string_value(json_object_get(j, key));
}

static const char *error_code(const wr_buf_t *body) {
  static char code[64];
  json_t *j = json_loadb(body->data ? body->data : "", body->len, 0, NULL);
  const char *c =
      json_string_value(json_object_get(json_object_get(j, "error"), "code"));

  snprintf(code, sizeof(code), "%s", c ? c : "(none)");
  json_decref(j);
  return code;
}

static void get(wr_http_client_t *c, const char *method, const char *path,
                struct wr_http_response *resp) {
  wr_error_t err = {0};

  assert_int_equal(wr_http_request(c, method, path, NULL, NULL, 0, resp, &err),
                   0);
}

static bool wait_for(atomic_int *v, int want, int ms) {
  for (int i = 0; i < ms / 10 && *v != want; i++)
    usleep(10000);
  return *v == want;
}

static uint64_t now_ms(void) {
  return wr_mono_ns() / 1000000;
}

/* ---- routing and replies ------------------------------------------------ */

static void test_routing(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  struct raw_resp raw;
  wr_error_t err = {0};
  json_t *j;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  get(c, "GET", "/v1/items/abc", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.content_type, "application/json");
  j = body_json(&r);
  assert_string_equal(jstr(j, "id"), "abc");
  json_decref(j);
  wr_http_response_free(&r);

  get(c, "GET", "/v1/files/x/y", &r);
  j = body_json(&r);
  assert_string_equal(jstr(j, "a"), "x");
  assert_string_equal(jstr(j, "b"), "y");
  json_decref(j);
  wr_http_response_free(&r);

  get(c, "DELETE", "/v1/items/abc", &r);
  assert_int_equal(r.status, 204);
  assert_int_equal(r.body.len, 0);
  wr_http_response_free(&r);

  const char *missing[] = {"/nope", "/v1/items/", "/v1/items/abc/",
                           "/v1//items/abc", "/v1/files/x"};
  for (size_t i = 0; i < WR_ARRAY_SIZE(missing); i++) {
    get(c, "GET", missing[i], &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(error_code(&r.body), "not_found");
    wr_http_response_free(&r);
  }

  get(c, "PUT", "/v1/items/abc", &r);
  assert_int_equal(r.status, 405);
  assert_string_equal(error_code(&r.body), "method_not_allowed");
  wr_http_response_free(&r);
  wr_http_client_close(c);

  assert_int_equal(raw_exchange(fx,
                                "PATCH /v1/items/abc HTTP/1.1\r\n"
                                "Host: x\r\n\r\n",
                                &raw, NULL),
                   0);
  assert_int_equal(raw.status, 405);
  assert_non_null(header_of(&raw, "allow"));
  assert_string_equal(header_of(&raw, "allow"), "GET, DELETE");
  wr_buf_free(&raw.body);
}

static void test_json_reply_and_errors(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  char *msg;
  json_t *j;

  assert_int_equal(wr_http_client_open(fx->sock, NULL, &c, &err), 0);
  assert_int_equal(wr_http_request(c, "POST", "/v1/strict", "application/json",
                                   "{\"name\":\"w\"}", 12, &r, &err),
                   0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body.data[r.body.len - 1], '\n');
  assert_string_equal(r.body.data, "{\"hello\":\"w\"}\n");
  wr_http_response_free(&r);

  assert_int_equal(wr_http_request(c, "POST", "/v1/strict", "application/json",
                                   "{\"nam", 5, &r, &err),
                   0);
  assert_int_equal(r.status, 400);
  assert_string_equal(r.content_type, "application/json");
  j = body_json(&r);
  assert_true(json_is_object(json_object_get(j, "error")));
  assert_int_equal(json_object_size(j), 1);
  assert_string_equal(error_code(&r.body), "bad_request");
  msg = wr_http_error_message(&r);
  assert_non_null(strstr(msg, "invalid JSON"));
  free(msg);
  json_decref(j);
  wr_http_response_free(&r);

  assert_int_equal(wr_http_request(c, "POST", "/v1/strict", "application/json",
                                   "{\"name\":\"w\",\"x\":1}", 18, &r, &err),
                   0);
  assert_int_equal(r.status, 400);
  msg = wr_http_error_message(&r);
  assert_non_null(strstr(msg, "x"));
  free(msg);
  wr_http_response_free(&r);
  wr_http_client_close(c);

  /* Not an error body: the status line stands in. */
  memset(&r, 0, sizeof(r));
  r.status = 502;
  wr_buf_append(&r.body, "<html>", 6);
  msg = wr_http_error_message(&r);
  assert_string_equal(msg, "HTTP 502 Bad Gateway");
  free(msg);
  wr_http_response_free(&r);
}

/* ---- connections -------------------------------------------------------- */

static void test_keep_alive(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  struct reader rd;
  struct raw_resp r;
  wr_http_client_t *c;
  struct wr_http_response resp;
  wr_error_t err = {0};

  reader_init(&rd, fd);
  for (int i = 0; i < 3; i++) {
    send_str(fd, "GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(read_resp(&rd, &r), 0);
    assert_int_equal(r.status, 200);
    assert_null(header_of(&r, "connection"));
    assert_string_equal(r.body.data, "{\"ok\":true}\n");
    wr_buf_free(&r.body);
  }
  send_str(fd, "GET /v1/ping HTTP/1.1\r\nConnection: close\r\n\r\n");
  assert_int_equal(read_resp(&rd, &r), 0);
  assert_string_equal(header_of(&r, "connection"), "close");
  assert_true(peer_closed(fd));
  wr_buf_free(&r.body);
  wr_buf_free(&rd.in);
  close(fd);

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  for (int i = 0; i < 5; i++) {
    get(c, "GET", "/v1/ping", &resp);
    assert_int_equal(resp.status, 200);
    wr_http_response_free(&resp);
    /* A HEAD answer has no body, or the next response would be garbled. */
    get(c, "HEAD", "/v1/ping", &resp);
    assert_int_equal(resp.status, 405);
    assert_int_equal(resp.body.len, 0);
    wr_http_response_free(&resp);
  }
  wr_http_client_close(c);
}

static void test_pipelined(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  struct reader rd;
  struct raw_resp r;

  reader_init(&rd, fd);
  send_str(fd, "GET /v1/items/one HTTP/1.1\r\n\r\n"
               "POST /v1/items/two/echo HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
               "hello"
               "GET /v1/items/three?q=3 HTTP/1.1\r\n\r\n");
  assert_int_equal(read_resp(&rd, &r), 0);
  assert_non_null(strstr(r.body.data, "\"id\":\"one\""));
  wr_buf_free(&r.body);
  assert_int_equal(read_resp(&rd, &r), 0);
  assert_string_equal(r.body.data, "{\"len\":5,\"body\":\"hello\"}\n");
  wr_buf_free(&r.body);
  assert_int_equal(read_resp(&rd, &r), 0);
  assert_non_null(strstr(r.body.data, "\"id\":\"three\",\"q\":\"3\""));
  wr_buf_free(&r.body);
  wr_buf_free(&rd.in);
  close(fd);
}

static void test_http10(void **state) {
  struct fx *fx = *state;
  struct raw_resp r;
  bool closed;

  assert_int_equal(
      raw_exchange(fx, "GET /v1/ping HTTP/1.0\r\n\r\n", &r, &closed), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(header_of(&r, "connection"), "close");
  assert_true(closed);
  wr_buf_free(&r.body);

  /* A stream to HTTP/1.0 is delimited by the end of the connection. */
  assert_int_equal(
      raw_exchange(fx, "GET /v1/small-stream HTTP/1.0\r\n\r\n", &r, &closed),
      0);
  assert_int_equal(r.status, 200);
  assert_null(header_of(&r, "transfer-encoding"));
  assert_string_equal(r.body.data, "ab");
  wr_buf_free(&r.body);

  assert_int_equal(
      raw_exchange(fx, "GET /v1/small-stream HTTP/1.1\r\n\r\n", &r, NULL), 0);
  assert_string_equal(header_of(&r, "transfer-encoding"), "chunked");
  assert_string_equal(header_of(&r, "x-test"), "yes");
  assert_string_equal(r.body.data, "ab");
  wr_buf_free(&r.body);
}

/* ---- request bodies ----------------------------------------------------- */

struct producer {
  struct fx *fx;
  size_t total;
  size_t sent;
  uint32_t sum;
};

static ssize_t produce(void *arg, char *buf, size_t size) {
  struct producer *p = arg;
  size_t n = WR_MIN(size, p->total - p->sent);

  for (size_t i = 0; i < n; i++) {
    buf[i] = (char)('a' + (p->sent + i) % 26);
    p->sum += (unsigned char)buf[i];
  }
  p->sent += n;
  if (p->fx != NULL)
    p->fx->produced = p->sent;
  return (ssize_t)n;
}

static void test_chunked_body(void **state) {
  struct fx *fx = *state;
  struct raw_resp r;
  wr_http_client_t *c;
  struct wr_http_response resp;
  struct producer p = {.total = 1000};
  wr_error_t err = {0};
  json_t *j;

  assert_int_equal(raw_exchange(fx,
                                "POST /v1/items/x/echo HTTP/1.1\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n"
                                "3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\n"
                                "Trailer-X: y\r\n\r\n",
                                &r, NULL),
                   0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body.data, "{\"len\":7,\"body\":\"abcdefg\"}\n");
  wr_buf_free(&r.body);

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  assert_int_equal(wr_http_request_upload(c, "POST", "/v1/items/x/echo",
                                          "text/plain", produce, &p, &resp,
                                          &err),
                   0);
  assert_int_equal(resp.status, 200);
  {
    char buf[4096];
    ssize_t n;
    while ((n = wr_http_read_body(c, buf, sizeof(buf), &err)) > 0)
      wr_buf_append(&resp.body, buf, (size_t)n);
    assert_int_equal(n, 0);
  }
  j = body_json(&resp);
  assert_int_equal(json_integer_value(json_object_get(j, "len")), 1000);
  assert_int_equal(strncmp(jstr(j, "body"), "abcdefghij", 10), 0);
  json_decref(j);
  wr_http_response_free(&resp);
  wr_http_client_close(c);
}

static void test_body_limit(void **state) {
  struct fx *fx = *state;
  struct raw_resp r;
  bool closed;
  char req[4096];
  char body[1100];

  /* Refused from Content-Length alone, before any body byte. */
  assert_int_equal(raw_exchange(fx,
                                "POST /v1/items/x/echo HTTP/1.1\r\n"
                                "Content-Length: 5000\r\n\r\n",
                                &r, &closed),
                   0);
  assert_int_equal(r.status, 413);
  assert_string_equal(error_code(&r.body), "payload_too_large");
  assert_true(closed);
  wr_buf_free(&r.body);

  /* A chunked body is cut off while it is read. */
  memset(body, 'z', sizeof(body));
  snprintf(req, sizeof(req),
           "POST /v1/items/x/echo HTTP/1.1\r\n"
           "Transfer-Encoding: chunked\r\n\r\n"
           "200\r\n%.512s\r\n200\r\n%.512s\r\n200\r\n%.512s\r\n0\r\n\r\n",
           body, body, body);
  assert_int_equal(raw_exchange(fx, req, &r, &closed), 0);
  assert_int_equal(r.status, 413);
  assert_true(closed);
  wr_buf_free(&r.body);

  /* Within the limit it works. */
  snprintf(req, sizeof(req),
           "POST /v1/items/x/echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\n"
           "%.1000s",
           body);
  assert_int_equal(raw_exchange(fx, req, &r, NULL), 0);
  assert_int_equal(r.status, 200);
  wr_buf_free(&r.body);
}

static void test_header_limit(void **state) {
  struct fx *fx = *state;
  struct raw_resp r;
  bool closed;
  char req[4096];
  char big[2000];

  memset(big, 'h', sizeof(big));
  snprintf(req, sizeof(req), "GET /v1/ping HTTP/1.1\r\nX-Big: %.2000s\r\n\r\n",
           big);
  assert_int_equal(raw_exchange(fx, req, &r, &closed), 0);
  assert_int_equal(r.status, 431);
  assert_string_equal(error_code(&r.body), "header_too_large");
  assert_true(closed);
  wr_buf_free(&r.body);

  /* The limit counts the whole head, not one line. */
  snprintf(req, sizeof(req), "GET /v1/ping HTTP/1.1\r\n");
  for (int i = 0; i < 120; i++)
    snprintf(req + strlen(req), sizeof(req) - strlen(req), "X-%02d: v\r\n", i);
  strcat(req, "\r\n");
  assert_int_equal(raw_exchange(fx, req, &r, &closed), 0);
  assert_int_equal(r.status, 431);
  wr_buf_free(&r.body);

  assert_int_equal(
      raw_exchange(fx, "GET /v1/ping HTTP/1.1\r\nX-A: b\r\n\r\n", &r, NULL), 0);
  assert_int_equal(r.status, 200);
  wr_buf_free(&r.body);
}

/* Each form gets 400 and a closed connection, and the request hidden in
 * its body never reaches a handler. */
static void test_smuggling(void **state) {
  static const char *const forms[] = {
      "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
      "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
      "Content-Length: 4\r\nContent-Length: 4\r\n",
      "Content-Length: 4\r\nContent-Length: 40\r\n",
      "Transfer-Encoding: chunked, identity\r\n",
      "Transfer-Encoding: identity, chunked\r\n",
      "Transfer-Encoding: xchunked\r\n",
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
      "Transfer-Encoding:\r\n chunked\r\n",
      "X-Pad: a\r\n Transfer-Encoding: chunked\r\n",
      "Transfer-Encoding : chunked\r\n",
      "Content-Length : 4\r\n",
      "Content-Length: abc\r\n",
      "Content-Length: 1 2\r\n",
      "Content-Length: +4\r\n",
      "Content-Length: -1\r\n",
      "Content-Length: \r\n",
      "Host: y\r\nTransfer-Encoding: chunked\r\n",
  };
  struct fx *fx = *state;
  char req[1024];

  for (size_t i = 0; i < WR_ARRAY_SIZE(forms); i++) {
    struct raw_resp r;
    bool closed = false;
    snprintf(req, sizeof(req),
             "POST /v1/items/x/echo HTTP/1.1\r\nHost: x\r\n%s\r\n"
             "0\r\n\r\nGET /v1/items/smuggled HTTP/1.1\r\n\r\n",
             forms[i]);
    assert_int_equal(raw_exchange(fx, req, &r, &closed), 0);
    if (r.status != 400 || !closed)
      fail_msg("form %zu (%s): status %d closed %d", i, forms[i], r.status,
               closed);
    assert_string_equal(error_code(&r.body), "bad_request");
    wr_buf_free(&r.body);
  }
  {
    struct raw_resp r;
    bool closed = false;
    assert_int_equal(raw_exchange(fx,
                                  "POST /v1/items/x/echo HTTP/1.0\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n"
                                  "0\r\n\r\n",
                                  &r, &closed),
                     0);
    assert_int_equal(r.status, 400);
    assert_true(closed);
    wr_buf_free(&r.body);
  }
  assert_int_equal(fx->smuggled, 0);
}

/* ---- decoding ----------------------------------------------------------- */

static void test_query_decoding(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  json_t *j;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  get(c, "GET", "/v1/items/a%20b?q=x%2By%26z&flag&other=1", &r);
  assert_int_equal(r.status, 200);
  j = body_json(&r);
  assert_string_equal(jstr(j, "id"), "a b");
  assert_string_equal(jstr(j, "q"), "x+y&z");
  assert_string_equal(jstr(j, "flag"), "");
  json_decref(j);
  wr_http_response_free(&r);

  get(c, "GET", "/v1/items/a?other=1", &r);
  j = body_json(&r);
  assert_true(json_is_null(json_object_get(j, "q")));
  json_decref(j);
  wr_http_response_free(&r);

  const char *bad[] = {"/v1/items/a?q=%00", "/v1/items/a?q=a%00b",
                       "/v1/items/a%00b",   "/v1/items/a?q=%zz",
                       "/v1/items/a%4",     "/v1/items/a?%00=1"};
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    get(c, "GET", bad[i], &r);
    if (r.status != 400)
      fail_msg("%s: status %d", bad[i], r.status);
    assert_string_equal(error_code(&r.body), "bad_request");
    wr_http_response_free(&r);
  }
  wr_http_client_close(c);
}

static void test_dot_params(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  json_t *j;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  const char *bad[] = {"/v1/items/..", "/v1/items/.", "/v1/items/%2e%2E",
                       "/v1/files/../x", "/v1/files/x/%2E"};
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    get(c, "GET", bad[i], &r);
    if (r.status != 400)
      fail_msg("%s: status %d", bad[i], r.status);
    wr_http_response_free(&r);
  }
  /* An encoded slash is a separator, so it cannot end up in a param. */
  get(c, "GET", "/v1/items/a%2Fb", &r);
  assert_int_equal(r.status, 404);
  wr_http_response_free(&r);
  get(c, "GET", "/v1/items/..a", &r);
  assert_int_equal(r.status, 200);
  j = body_json(&r);
  assert_string_equal(jstr(j, "id"), "..a");
  json_decref(j);
  wr_http_response_free(&r);
  wr_http_client_close(c);
}

/* ---- TCP and the API key ------------------------------------------------ */

static void test_tcp_auth(void **state) {
  struct fx *fx = *state;
  char addr[64];
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  const char *paths[] = {"/v1/ping", "/nope", "/v1/items/..", "/v1/ping"};

  snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%d", fx->tcp_port);
  assert_int_equal(wr_http_client_open(addr, NULL, &c, &err), 0);
  for (size_t i = 0; i < WR_ARRAY_SIZE(paths); i++) {
    get(c, "GET", paths[i], &r);
    assert_int_equal(r.status, 401);
    assert_string_equal(error_code(&r.body), "unauthorized");
    wr_http_response_free(&r);
  }
  get(c, "PUT", "/v1/ping", &r);
  assert_int_equal(r.status, 401);
  wr_http_response_free(&r);
  wr_http_client_close(c);

  assert_int_equal(wr_http_client_open(addr, "test-key-0124", &c, &err), 0);
  get(c, "GET", "/v1/ping", &r);
  assert_int_equal(r.status, 401);
  wr_http_response_free(&r);
  wr_http_client_close(c);

  assert_int_equal(wr_http_client_open(addr, "test-key-012", &c, &err), 0);
  get(c, "GET", "/v1/ping", &r);
  assert_int_equal(r.status, 401);
  wr_http_response_free(&r);
  wr_http_client_close(c);

  assert_int_equal(wr_http_client_open(addr, API_KEY, &c, &err), 0);
  get(c, "GET", "/v1/ping", &r);
  assert_int_equal(r.status, 200);
  wr_http_response_free(&r);
  get(c, "GET", "/nope", &r);
  assert_int_equal(r.status, 404);
  wr_http_response_free(&r);
  wr_http_client_close(c);

  /* The challenge header, seen on a raw socket. */
  {
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)fx->tcp_port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct reader rd;
    struct raw_resp raw;

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    set_timeout(fd, 5000);
    reader_init(&rd, fd);
    send_str(fd, "GET /v1/ping HTTP/1.1\r\n"
                 "Authorization: Basic dGVzdA==\r\n\r\n");
    assert_int_equal(read_resp(&rd, &raw), 0);
    assert_int_equal(raw.status, 401);
    assert_string_equal(header_of(&raw, "www-authenticate"), "Bearer");
    wr_buf_free(&raw.body);
    wr_buf_free(&rd.in);
    close(fd);
  }
}

/* ---- streamed replies --------------------------------------------------- */

static void test_stream_incremental(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  char buf[256];
  ssize_t n;
  size_t got = 0;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  assert_int_equal(wr_http_request_stream(c, "GET", "/v1/wait-stream", NULL,
                                          NULL, 0, &r, &err),
                   0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.content_type, "text/plain");
  /* The server holds the rest until told to go on: this read can only
   * return if the client hands out data as it arrives. */
  n = wr_http_read_body(c, buf, sizeof(buf), &err);
  assert_int_equal(n, 6);
  assert_memory_equal(buf, "first\n", 6);
  uv_async_send(&fx->go);
  while ((n = wr_http_read_body(c, buf + got, sizeof(buf) - got, &err)) > 0)
    got += (size_t)n;
  assert_int_equal(n, 0);
  assert_int_equal(got, 7);
  assert_memory_equal(buf, "second\n", 7);
  wr_http_response_free(&r);
  /* The connection is still good for another request. */
  get(c, "GET", "/v1/ping", &r);
  assert_int_equal(r.status, 200);
  wr_http_response_free(&r);
  wr_http_client_close(c);
}

static void test_stream_big(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  char buf[65536];
  size_t got = 0;
  ssize_t n;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  assert_int_equal(
      wr_http_request_stream(c, "GET", "/v1/big", NULL, NULL, 0, &r, &err), 0);
  while ((n = wr_http_read_body(c, buf, sizeof(buf), &err)) > 0) {
    for (ssize_t i = 0; i < n; i++)
      if ((unsigned char)buf[i] != (got + (size_t)i) % 251)
        fail_msg("byte %zu differs", got + (size_t)i);
    got += (size_t)n;
    if (got < 1024 * 1024)
      usleep(1000); /* a slow reader makes the server queue */
  }
  assert_int_equal(n, 0);
  assert_int_equal(got, BIG_TOTAL);
  assert_true(fx->drains > 0);
  wr_http_response_free(&r);
  wr_http_client_close(c);
}

/* ---- streamed request bodies -------------------------------------------- */

static void test_stream_body_backpressure(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  struct producer p = {.fx = fx, .total = UPLOAD_TOTAL};
  wr_error_t err = {0};
  json_t *j;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  assert_int_equal(wr_http_request_upload(c, "POST", "/v1/upload",
                                          "application/octet-stream", produce,
                                          &p, &r, &err),
                   0);
  {
    char buf[4096];
    ssize_t n;
    while ((n = wr_http_read_body(c, buf, sizeof(buf), &err)) > 0)
      wr_buf_append(&r.body, buf, (size_t)n);
  }
  assert_int_equal(r.status, 200);
  j = body_json(&r);
  assert_int_equal(json_integer_value(json_object_get(j, "len")), UPLOAD_TOTAL);
  assert_int_equal(json_integer_value(json_object_get(j, "sum")), p.sum);
  /* Nothing was delivered while paused, and the sender was held back. */
  assert_int_equal(json_integer_value(json_object_get(j, "during_pause")), 0);
  assert_int_equal(fx->pauses, 1);
  assert_true(fx->produced_at_resume < UPLOAD_TOTAL);
  json_decref(j);
  wr_http_response_free(&r);

  /* An empty streamed body still ends. */
  assert_int_equal(
      wr_http_request(c, "POST", "/v1/upload", NULL, NULL, 0, &r, &err), 0);
  assert_int_equal(r.status, 200);
  j = body_json(&r);
  assert_int_equal(json_integer_value(json_object_get(j, "len")), 0);
  json_decref(j);
  wr_http_response_free(&r);
  wr_http_client_close(c);
}

/* ---- upgrades ----------------------------------------------------------- */

static void test_upgrade_raw(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  char buf[4096];
  size_t got = 0;
  const char *end;

  /* Bytes right behind the head belong to the raw stream. */
  send_str(fd, "GET /v1/attach HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n"
               "Upgrade: Warren-Test\r\n\r\nhello");
  while ((end = memmem(buf, got, "hello", 5)) == NULL) {
    ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
    assert_true(n > 0);
    got += (size_t)n;
  }
  assert_true(wr_str_has_prefix(buf, "HTTP/1.1 101 Switching Protocols\r\n"));
  assert_non_null(memmem(buf, got, "\r\nUpgrade: warren-test\r\n", 24));
  assert_ptr_equal(end, (char *)memmem(buf, got, "\r\n\r\n", 4) + 4);
  send_str(fd, "more");
  got = 0;
  while (got < 4) {
    ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
    assert_true(n > 0);
    got += (size_t)n;
  }
  assert_memory_equal(buf, "more", 4);
  shutdown(fd, SHUT_WR);
  assert_true(peer_closed(fd));
  close(fd);
}

static void test_upgrade_client(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  int raw = -1;
  char buf[64];
  ssize_t n;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  assert_int_equal(wr_http_request_upgrade(c, "GET", "/v1/attach", "other",
                                           NULL, 0, &r, &raw, &err),
                   0);
  assert_int_equal(raw, -1);
  assert_int_equal(r.status, 400);
  wr_http_response_free(&r);
  wr_http_client_close(c);

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  assert_int_equal(wr_http_request_upgrade(c, "GET", "/v1/attach",
                                           "warren-test", NULL, 0, &r, &raw,
                                           &err),
                   0);
  assert_int_equal(r.status, 101);
  assert_true(raw >= 0);
  set_timeout(raw, 5000);
  assert_int_equal(wr_http_client_leftover(c, buf, sizeof(buf)), 0);
  assert_int_equal(send(raw, "ping", 4, MSG_NOSIGNAL), 4);
  n = recv(raw, buf, sizeof(buf), 0);
  assert_int_equal(n, 4);
  assert_memory_equal(buf, "ping", 4);
  /* No more HTTP on an upgraded connection. */
  assert_int_equal(
      wr_http_request(c, "GET", "/v1/ping", NULL, NULL, 0, &r, &err), -1);
  wr_http_response_free(&r);
  wr_http_client_close(c);
}

/* ---- clients that go away ----------------------------------------------- */

static void test_disconnect_mid_stream(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  char buf[256];

  send_str(fd, "GET /v1/hang HTTP/1.1\r\n\r\n");
  assert_true(recv(fd, buf, sizeof(buf), 0) > 0);
  close(fd);
  assert_true(wait_for(&fx->finished, 1, 3000));
  assert_int_equal(fx->aborts, 1);
  usleep(100000);
  assert_int_equal(fx->aborts, 1);
  assert_int_equal(fx->bad_writes, 0);

  /* The server is fine afterwards. */
  struct raw_resp r;
  assert_int_equal(raw_exchange(fx, "GET /v1/ping HTTP/1.1\r\n\r\n", &r, NULL),
                   0);
  assert_int_equal(r.status, 200);
  wr_buf_free(&r.body);
}

static void test_disconnect_mid_upload(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);

  send_str(fd, "POST /v1/upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               "10\r\n0123456789");
  usleep(50000);
  close(fd);
  assert_true(wait_for(&fx->finished, 1, 3000));
  assert_int_equal(fx->upload_errors, 1);
  assert_int_equal(fx->aborts, 1);
}

/* Closing the server aborts what is in flight; teardown checks that every
 * handle is gone. */
static void test_close_with_request_in_flight(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  char buf[256];

  send_str(fd, "GET /v1/wait-stream HTTP/1.1\r\n\r\n");
  assert_true(recv(fd, buf, sizeof(buf), 0) > 0);
  uv_async_send(&fx->stop);
  pthread_join(fx->thread, NULL);
  fx->stopped = true;
  assert_int_equal(fx->aborts, 1);
  assert_true(peer_closed(fd));
  close(fd);
}

/* ---- limits on connections ---------------------------------------------- */

static void test_header_timeout(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  uint64_t t0 = now_ms();
  bool closed = false;

  /* Slowloris: a header line every 50 ms never completes the head. */
  send_str(fd, "GET /v1/ping HTTP/1.1\r\n");
  while (!closed && now_ms() - t0 < 3000) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    char buf[64];
    send(fd, "X-A: b\r\n", 8, MSG_NOSIGNAL);
    if (poll(&pfd, 1, 50) == 1)
      closed = recv(fd, buf, sizeof(buf), 0) <= 0;
  }
  assert_true(closed);
  assert_true(now_ms() - t0 >= 250);
  assert_true(now_ms() - t0 < 1500);
  close(fd);
}

static void test_idle_timeout(void **state) {
  struct fx *fx = *state;
  int fd = raw_connect(fx);
  struct reader rd;
  struct raw_resp r;
  uint64_t t0;

  reader_init(&rd, fd);
  send_str(fd, "GET /v1/ping HTTP/1.1\r\n\r\n");
  assert_int_equal(read_resp(&rd, &r), 0);
  wr_buf_free(&r.body);
  t0 = now_ms();
  assert_true(peer_closed(fd));
  assert_true(now_ms() - t0 >= 300);
  assert_true(now_ms() - t0 < 2000);
  wr_buf_free(&rd.in);
  close(fd);

  /* A body that stops arriving is given up too, without an answer. */
  fd = raw_connect(fx);
  reader_init(&rd, fd);
  t0 = now_ms();
  send_str(fd, "POST /v1/items/x/echo HTTP/1.1\r\nContent-Length: 10\r\n\r\n"
               "12345");
  assert_int_equal(read_resp(&rd, &r), -1);
  assert_true(now_ms() - t0 >= 300);
  assert_true(now_ms() - t0 < 2000);
  wr_buf_free(&r.body);
  wr_buf_free(&rd.in);
  close(fd);
}

static void test_max_conns(void **state) {
  struct fx *fx = *state;
  int fds[3];
  struct reader rd;
  struct raw_resp r;
  int extra;

  for (int i = 0; i < 3; i++) {
    fds[i] = raw_connect(fx);
    reader_init(&rd, fds[i]);
    send_str(fds[i], "GET /v1/ping HTTP/1.1\r\n\r\n");
    assert_int_equal(read_resp(&rd, &r), 0);
    wr_buf_free(&r.body);
    wr_buf_free(&rd.in);
  }
  extra = raw_connect(fx);
  send(extra, "GET /v1/ping HTTP/1.1\r\n\r\n", 26, MSG_NOSIGNAL);
  reader_init(&rd, extra);
  assert_int_equal(read_resp(&rd, &r), -1);
  assert_int_equal(r.status, 0);
  wr_buf_free(&r.body);
  wr_buf_free(&rd.in);
  close(extra);

  close(fds[0]);
  usleep(100000);
  assert_int_equal(raw_exchange(fx, "GET /v1/ping HTTP/1.1\r\n\r\n", &r, NULL),
                   0);
  assert_int_equal(r.status, 200);
  wr_buf_free(&r.body);
  close(fds[1]);
  close(fds[2]);
}

static int tcp_connect(const struct fx *fx) {
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)fx->tcp_port)};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  set_timeout(fd, 2000);
  return fd;
}

/* One GET on fd; returns the status, or 0 if the connection ended first. */
static int get_on(int fd, const char *head) {
  struct reader rd;
  struct raw_resp r;
  int status;

  reader_init(&rd, fd);
  send(fd, head, strlen(head), MSG_NOSIGNAL);
  status = read_resp(&rd, &r) == 0 ? r.status : 0;
  wr_buf_free(&r.body);
  wr_buf_free(&rd.in);
  return status;
}

/* Clients without the key (TCP) fill at most their share of the cap; the
 * unix socket keeps a slot, and gets it even while TCP is full. */
static void test_untrusted_share(void **state) {
  struct fx *fx = *state;
  int tcp[2], extra, local;

  for (int i = 0; i < 2; i++) {
    tcp[i] = tcp_connect(fx);
    assert_int_equal(get_on(tcp[i], "GET /v1/ping HTTP/1.1\r\n"
                                    "Authorization: Bearer " API_KEY "\r\n"
                                    "\r\n"),
                     200);
  }
  extra = tcp_connect(fx);
  assert_int_equal(get_on(extra, "GET /v1/ping HTTP/1.1\r\n\r\n"), 0);
  close(extra);
  local = raw_connect(fx);
  assert_int_equal(get_on(local, "GET /v1/ping HTTP/1.1\r\n\r\n"), 200);
  close(tcp[0]);
  usleep(100000);
  extra = tcp_connect(fx);
  assert_int_equal(get_on(extra, "GET /v1/ping HTTP/1.1\r\n"
                                 "Authorization: Bearer " API_KEY "\r\n\r\n"),
                   200);
  close(extra);
  close(local);
  close(tcp[1]);
}

/* A client without the key gets one 401 and a closed connection; a client
 * with it keeps its connection. */
static void test_unauthorized_closes(void **state) {
  struct fx *fx = *state;
  int fd = tcp_connect(fx);

  assert_int_equal(get_on(fd, "GET /v1/ping HTTP/1.1\r\n\r\n"), 401);
  assert_true(peer_closed(fd));
  close(fd);
  fd = tcp_connect(fx);
  for (int i = 0; i < 3; i++)
    assert_int_equal(get_on(fd, "GET /v1/ping HTTP/1.1\r\n"
                                "Authorization: Bearer " API_KEY "\r\n\r\n"),
                     200);
  close(fd);
}

static void test_stream_abort(void **state) {
  struct fx *fx = *state;
  struct reader rd;
  struct raw_resp r;
  int fd = raw_connect(fx);

  /* The head and what was written arrive; the last chunk never does. */
  reader_init(&rd, fd);
  send_str(fd, "GET /v1/abort-stream HTTP/1.1\r\n\r\n");
  assert_int_equal(read_resp(&rd, &r), -1);
  assert_int_equal(rd.p.status_code, 200);
  assert_int_equal(r.body.len, 7);
  assert_memory_equal(r.body.data, "partial", 7);
  wr_buf_free(&r.body);
  wr_buf_free(&rd.in);
  close(fd);
  /* Before the stream began, an abort is a whole 500. */
  assert_int_equal(
      raw_exchange(fx, "GET /v1/abort-early HTTP/1.1\r\n\r\n", &r, NULL), 0);
  assert_int_equal(r.status, 500);
  assert_string_equal(error_code(&r.body), "internal");
  wr_buf_free(&r.body);
}

static void test_json_text(void **state) {
  struct fx *fx = *state;
  wr_http_client_t *c;
  struct wr_http_response r;
  wr_error_t err = {0};
  json_t *j;

  assert_int_equal(wr_http_client_open(fx->addr, NULL, &c, &err), 0);
  get(c, "GET", "/v1/json-text", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.content_type, "application/json");
  j = body_json(&r);
  assert_string_equal(jstr(j, "built"), "elsewhere");
  json_decref(j);
  wr_http_response_free(&r);
  wr_http_client_close(c);
}

/* ---- adopt, driven from the test thread --------------------------------- */

static void run_until_readable(uv_loop_t *loop, int fd) {
  for (int i = 0; i < 1000; i++) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    uv_run(loop, UV_RUN_NOWAIT);
    if (poll(&pfd, 1, 1) == 1)
      return;
  }
  fail_msg("no response");
}

static void closed_cb(void *arg) {
  *(bool *)arg = true;
}

static void test_adopt(void **state) {
  uv_loop_t loop;
  wr_http_server_t *srv;
  wr_error_t err = {0};
  int sv[2];
  char buf[4096];
  ssize_t n;
  bool closed = false;
  (void)state;

  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(wr_http_server_new(&loop, routes, WR_ARRAY_SIZE(routes),
                                      NULL, NULL, &srv, &err),
                   0);
  for (int trusted = 1; trusted >= 0; trusted--) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(wr_http_server_adopt(srv, sv[0], trusted, &err), 0);
    send_str(sv[1], "GET /v1/ping HTTP/1.1\r\n\r\n");
    run_until_readable(&loop, sv[1]);
    n = recv(sv[1], buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    /* Untrusted without any key configured: always 401. */
    assert_true(
        wr_str_has_prefix(buf, trusted ? "HTTP/1.1 200 " : "HTTP/1.1 401 "));
    close(sv[1]);
  }
  assert_int_equal(
      wr_http_server_adopt(srv, open("/dev/null", O_RDONLY), true, &err), -1);
  wr_http_server_close(srv, closed_cb, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(closed);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_unix_socket_file(void **state) {
  char dir[] = "/tmp/wr-api-sock-XXXXXX";
  char path[128];
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  uv_loop_t loop;
  wr_http_server_t *srv;
  wr_error_t err = {0};
  struct stat st;
  int fd;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/s.sock", dir);
  /* A stale socket file from an earlier run. */
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  strcpy(sa.sun_path, path);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(fd);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(wr_http_server_new(&loop, routes, WR_ARRAY_SIZE(routes),
                                      NULL, NULL, &srv, &err),
                   0);
  assert_int_equal(wr_http_listen_unix(srv, path, 0600, &err), 0);
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  unlink(path);
  /* Something that is not a socket is left alone. */
  fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  close(fd);
  assert_int_equal(wr_http_listen_unix(srv, path, 0600, &err), -1);
  assert_non_null(strstr(err.msg, "not a socket"));
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(wr_http_listen_tcp(srv, "127.0.0.1:0", "", &err), -1);
  assert_int_equal(wr_http_listen_tcp(srv, "nonsense", "k", &err), -1);
  wr_http_server_close(srv, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  unlink(path);
  rmdir(dir);
}

/* A socket someone listens on is never taken over; closing removes the
 * server's own socket file, and leaves one another process put there. */
static void test_unix_socket_ownership(void **state) {
  char dir[] = "/tmp/wr-api-own-XXXXXX";
  char path[128], other[128];
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  uv_loop_t loop;
  wr_http_server_t *a, *b;
  wr_error_t err = {0};
  struct stat st, mine;
  pid_t pid = 0;
  int fd;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/s.sock", dir);
  snprintf(other, sizeof(other), "%s/other.sock", dir);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(wr_http_server_new(&loop, routes, WR_ARRAY_SIZE(routes),
                                      NULL, NULL, &a, &err),
                   0);
  assert_int_equal(wr_http_server_new(&loop, routes, WR_ARRAY_SIZE(routes),
                                      NULL, NULL, &b, &err),
                   0);
  assert_int_equal(wr_http_unix_listener(path, &pid, &err), 0);
  assert_int_equal(wr_http_listen_unix(a, path, 0600, &err), 0);
  assert_int_equal(wr_http_unix_listener(path, &pid, &err), 1);
  assert_int_equal(pid, getpid());
  assert_int_equal(lstat(path, &mine), 0);

  /* A second server may not take the live socket. */
  assert_int_equal(wr_http_listen_unix(b, path, 0600, &err), -1);
  assert_int_equal(err.code, EADDRINUSE);
  assert_non_null(strstr(err.msg, "served by a running process"));
  assert_int_equal(lstat(path, &st), 0);
  assert_int_equal(st.st_ino, mine.st_ino);

  /* Replaced by another socket (as another daemon's start would), the
   * file is not the first server's to remove. */
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  strcpy(sa.sun_path, other);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(rename(other, path), 0);
  wr_http_server_close(a, NULL, NULL);
  assert_int_equal(lstat(path, &st), 0);
  assert_true(st.st_ino != mine.st_ino);
  close(fd);

  /* Its own socket is removed at close. */
  assert_int_equal(wr_http_listen_unix(b, path, 0600, &err), 0);
  wr_http_server_close(b, NULL, NULL);
  assert_int_equal(lstat(path, &st), -1);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  rmdir(dir);
}

/* The framing rules every parser in warren shares (src/api/framing.c). */
static const char *framing_of(const char *const *headers, bool http10) {
  struct wr_http_framing f = {0};
  const char *why = NULL;

  for (size_t i = 0; headers[i] != NULL && why == NULL; i += 2)
    why = wr_http_framing_header(&f, headers[i], strlen(headers[i]),
                                 headers[i + 1], strlen(headers[i + 1]));
  return why != NULL ? why : wr_http_framing_end(&f, http10);
}

static void test_framing_rules(void **state) {
  static const char *const ok1[] = {"Content-Length", "12", "Host", "a", NULL};
  static const char *const ok2[] = {"transfer-encoding", "Chunked", NULL};
  static const char *const two_cl[] = {"Content-Length", "1", "content-length",
                                       "1", NULL};
  static const char *const bad_cl[] = {"Content-Length", "+1", NULL};
  static const char *const long_cl[] = {"Content-Length", "1234567890123456789",
                                        NULL};
  static const char *const empty_cl[] = {"Content-Length", "", NULL};
  static const char *const cl_te[] = {"Content-Length", "3",
                                      "Transfer-Encoding", "chunked", NULL};
  static const char *const te_list[] = {"Transfer-Encoding",
                                        "identity, chunked", NULL};
  static const char *const two_te[] = {"Transfer-Encoding", "chunked",
                                       "Transfer-Encoding", "chunked", NULL};
  static const char *const two_host[] = {"Host", "a", "HOST", "b", NULL};
  (void)state;

  assert_null(framing_of(ok1, false));
  assert_null(framing_of(ok2, false));
  assert_string_equal(framing_of(two_cl, false),
                      "more than one Content-Length");
  assert_string_equal(framing_of(bad_cl, false), "invalid Content-Length");
  assert_string_equal(framing_of(long_cl, false), "invalid Content-Length");
  assert_string_equal(framing_of(empty_cl, false), "invalid Content-Length");
  assert_string_equal(framing_of(cl_te, false),
                      "both Content-Length and Transfer-Encoding");
  assert_non_null(framing_of(te_list, false));
  assert_non_null(framing_of(two_te, false));
  assert_string_equal(framing_of(two_host, false), "more than one Host header");
  assert_string_equal(framing_of(ok2, true),
                      "Transfer-Encoding is not allowed in HTTP/1.0");
}

int main(void) {
  if (getenv("WR_TEST_DEBUG") != NULL)
    wr_log_init("test_api", WR_LOG_DEBUG, false);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_routing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json_reply_and_errors, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http10, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunked_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_body_limit, setup_tight, teardown),
      cmocka_unit_test_setup_teardown(test_header_limit, setup_tight, teardown),
      cmocka_unit_test_setup_teardown(test_smuggling, setup, teardown),
      cmocka_unit_test_setup_teardown(test_query_decoding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dot_params, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tcp_auth, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_incremental, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_big, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_body_backpressure, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_upgrade_raw, setup, teardown),
      cmocka_unit_test_setup_teardown(test_upgrade_client, setup, teardown),
      cmocka_unit_test_setup_teardown(test_disconnect_mid_stream, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_disconnect_mid_upload, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_close_with_request_in_flight, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_header_timeout, setup_tight,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_idle_timeout, setup_tight, teardown),
      cmocka_unit_test_setup_teardown(test_max_conns, setup_tight, teardown),
      cmocka_unit_test_setup_teardown(test_untrusted_share, setup_tight,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unauthorized_closes, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stream_abort, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json_text, setup, teardown),
      cmocka_unit_test(test_adopt),
      cmocka_unit_test(test_unix_socket_file),
      cmocka_unit_test(test_unix_socket_ownership),
      cmocka_unit_test(test_framing_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
