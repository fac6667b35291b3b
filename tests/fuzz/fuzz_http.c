/*
 * Fuzz the HTTP server with whatever a client can send: the input is
 * written into one end of a socketpair whose other end the server adopts,
 * then the writing side is shut down and the loop runs until the
 * connection is closed. Routes cover a strictly decoded JSON body, a
 * streamed reply, a streamed request body and an upgrade to raw bytes.
 * Each input runs twice, as a trusted client and as an untrusted one (no
 * API key: everything must be 401). Any input must end with every handle
 * closed and nothing leaked; what the server sends must start as HTTP.
 */
#include <fcntl.h>
#include <jansson.h>
#include <sys/socket.h>

#include "api/api.h"

/* ---- routes ------------------------------------------------------------- */

static void h_create(wr_http_req_t *req, void *ctx) {
  _cleanup_json_ json_t *obj = NULL;
  const char *name = NULL;
  int64_t count = 0;
  const struct wr_json_field fields[] = {
      {"name", WR_JSON_STRING, &name, true, NULL},
      {"count", WR_JSON_INT, &count, false, NULL},
  };
  wr_error_t err = {0};
  size_t len;
  const char *body = wr_http_body(req, &len);
  (void)ctx;

  if (wr_json_parse_object(body, len, false, &obj, &err) < 0 ||
      wr_json_unpack(obj, fields, WR_ARRAY_SIZE(fields), &err) < 0) {
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return;
  }
  wr_http_reply_json(
      req, 201,
      json_pack("{s:s,s:I}", "name", name, "count", (json_int_t)count));
}

static void h_get(wr_http_req_t *req, void *ctx) {
  const char *q = wr_http_query(req, "q");
  json_t *j =
      json_pack("{s:s,s:s}", "id", wr_http_param(req, "id"), "q", q ? q : "");
  (void)ctx;

  /* Decoded input need not be UTF-8; then there is nothing to echo. */
  if (j == NULL)
    wr_http_reply_empty(req, 204);
  else
    wr_http_reply_json(req, 200, j);
}

static void h_delete(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_reply_empty(req, 204);
}

static void h_stream(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_stream_begin(req, 200, "text/plain", NULL);
  for (int i = 0; i < 3; i++)
    wr_http_stream_write(req, "line\n", 5);
  wr_http_stream_end(req);
}

struct upload {
  size_t total;
};

static void upload_data(wr_http_req_t *req, const char *data, size_t len,
                        void *arg) {
  struct upload *u = arg;
  (void)data;

  u->total += len;
  /* Exercise backpressure: stop and resume on the next turn. */
  wr_http_body_pause(req, true);
  wr_http_body_pause(req, false);
}

static void upload_end(wr_http_req_t *req, int status, void *arg) {
  struct upload *u = arg;
  size_t total = u->total;

  free(u);
  if (status < 0)
    wr_http_reply_error(req, 400, "bad_request", "upload failed");
  else
    wr_http_reply_json(req, 200, json_pack("{s:I}", "len", (json_int_t)total));
}

static void h_upload(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  wr_http_body_read(req, upload_data, upload_end,
                    xcalloc(1, sizeof(struct upload)));
}

static void raw_data(wr_http_req_t *req, const char *data, size_t len,
                     void *arg) {
  (void)arg;
  wr_http_raw_write(req, data, len);
}

static void raw_closed(wr_http_req_t *req, void *arg) {
  (void)arg;
  wr_http_raw_close(req);
}

static void h_attach(wr_http_req_t *req, void *ctx) {
  (void)ctx;
  if (wr_http_upgrade(req, "fuzz", raw_data, raw_closed, NULL) < 0)
    wr_http_reply_error(req, 400, "bad_request", "upgrade required");
}

static const struct wr_http_route routes[] = {
    {"POST", "/v1/things", h_create, 0},
    {"GET", "/v1/things/{id}", h_get, 0},
    {"DELETE", "/v1/things/{id}", h_delete, 0},
    {"GET", "/v1/things/{id}/logs", h_stream, 0},
    {"PUT", "/v1/things/{id}/files", h_upload, WR_ROUTE_STREAM_BODY},
    {"GET", "/v1/things/{id}/attach", h_attach, 0},
};

/* ---- the client side of the socketpair ---------------------------------- */

struct peer {
  uv_poll_t poll;
  const uint8_t *data;
  size_t len;
  size_t sent;
  size_t received;
  char first[5];
  bool write_done;
};

static void on_peer(uv_poll_t *h, int status, int events);

static void peer_write(struct peer *p, int fd) {
  while (p->sent < p->len) {
    ssize_t n = send(fd, p->data + p->sent, p->len - p->sent, MSG_NOSIGNAL);
    if (n < 0)
      break;
    p->sent += (size_t)n;
  }
  if (p->sent == p->len || (errno != EAGAIN && errno != EINTR)) {
    shutdown(fd, SHUT_WR);
    p->write_done = true;
    uv_poll_start(&p->poll, UV_READABLE | UV_DISCONNECT, on_peer);
  }
}

/* Read and drop what the server says; the connection is done at EOF. */
static void peer_read(struct peer *p, int fd) {
  char buf[65536];
  ssize_t n;

  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
    if (p->received < sizeof(p->first))
      memcpy(p->first + p->received, buf,
             WR_MIN((size_t)n, sizeof(p->first) - p->received));
    p->received += (size_t)n;
  }
  if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    uv_poll_stop(&p->poll);
    uv_close((uv_handle_t *)&p->poll, NULL);
  }
}

static void on_peer(uv_poll_t *h, int status, int events) {
  struct peer *p = h->data;
  int fd;

  uv_fileno((uv_handle_t *)h, &fd);
  if (status < 0) {
    uv_poll_stop(h);
    uv_close((uv_handle_t *)h, NULL);
    return;
  }
  if ((events & UV_WRITABLE) && !p->write_done)
    peer_write(p, fd);
  if (events & (UV_READABLE | UV_DISCONNECT))
    peer_read(p, fd);
}

static void poll_start(struct peer *p) {
  uv_poll_start(&p->poll, UV_READABLE | UV_WRITABLE | UV_DISCONNECT, on_peer);
}

static void run_once(const uint8_t *data, size_t size, bool trusted) {
  const struct wr_http_limits limits = {
      .max_header_bytes = 2048,
      .max_body_bytes = 4096,
      .max_conns = 4,
  };
  struct peer p = {.data = data, .len = size};
  wr_http_server_t *srv;
  wr_error_t err = {0};
  uv_loop_t loop;
  int sv[2];

  if (uv_loop_init(&loop) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  if (wr_http_server_new(&loop, routes, WR_ARRAY_SIZE(routes), NULL, &limits,
                         &srv, &err) < 0 ||
      wr_http_server_adopt(srv, sv[0], trusted, &err) < 0)
    abort();
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  uv_poll_init(&loop, &p.poll, sv[1]);
  p.poll.data = &p;
  poll_start(&p);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (p.received > 0 && memcmp(p.first, "HTTP/", WR_MIN(p.received, 5)))
    abort();
  wr_http_server_close(srv, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0)
    abort(); /* a handle was left open */
  close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run_once(data, size, true);
  run_once(data, size, false);
  return 0;
}
