/*
 * One client connection: reading into a buffer, feeding http-parser one
 * event at a time, timers, the write queue and closing.
 *
 * Requests on a connection are served one at a time. Bytes of pipelined
 * requests wait in `in` (reading stops once that holds more than a head's
 * worth) until the current request's final call. Each parser event pauses
 * the parser so that handler code never runs inside http-parser.
 *
 * Closing comes in two kinds. A graceful close (after a response that says
 * "Connection: close") shuts down our side once queued writes are out,
 * then waits briefly for the client's EOF, so a client still sending a
 * refused body reads our answer instead of a reset. A hard close (client
 * gone, timeout, server shutdown) aborts the request in flight.
 */
#include "api/api_internal.h"

#define LINGER_MS 2000

struct write_req {
  uv_write_t w;
  struct wr_http_conn *conn;
  char *data;
  size_t len;
};

static void on_handle_closed(uv_handle_t *h) {
  struct wr_http_conn *c = h->data;
  wr_http_server_t *srv = c->srv;

  if (--c->open_handles > 0)
    return;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  wr_buf_free(&c->in);
  free(c);
  wr_api_server_handle_closed(srv);
}

/* Both handles are initialised here, so that from now on closing the
 * connection is always the same two uv_close calls. */
struct wr_http_conn *wr_api_conn_new(wr_http_server_t *srv, bool trusted,
                                     bool tcp) {
  struct wr_http_conn *c = xcalloc(1, sizeof(*c));

  c->srv = srv;
  c->trusted = trusted;
  if (tcp)
    uv_tcp_init(srv->loop, &c->io.tcp);
  else
    uv_pipe_init(srv->loop, &c->io.pipe, 0);
  c->io.handle.data = c;
  uv_timer_init(srv->loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 2;
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  wr_buf_init(&c->in);
  c->next = srv->conns;
  if (srv->conns != NULL)
    srv->conns->prev = c;
  srv->conns = c;
  srv->open_handles++;
  return c;
}

void wr_api_conn_close(struct wr_http_conn *c) {
  wr_http_req_t *req = c->req;

  if (c->closing)
    return;
  c->closing = true;
  if (c->counted) {
    c->srv->nactive--;
    if (!c->trusted)
      c->srv->nuntrusted--;
  }
  c->req = NULL;
  uv_close(&c->io.handle, on_handle_closed);
  uv_close((uv_handle_t *)&c->timer, on_handle_closed);
  if (req != NULL)
    wr_api_req_detach(req);
}

static void on_timer(uv_timer_t *t);

void wr_api_conn_set_timer(struct wr_http_conn *c, enum wr_http_timer mode,
                           uint64_t ms) {
  if (c->closing)
    return;
  c->timer_mode = mode;
  if (mode == WR_TIMER_NONE)
    uv_timer_stop(&c->timer);
  else
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- writing ------------------------------------------------------------ */

static void notify_drain(struct wr_http_conn *c) {
  wr_http_req_t *req = c->req;

  if (req == NULL || req->drain_cb == NULL || req->finished)
    return;
  wr_api_req_hold(req);
  req->drain_cb(req, req->drain_arg);
  wr_api_req_release(req);
}

static void on_write(uv_write_t *w, int status) {
  struct write_req *wr = (struct write_req *)w;
  struct wr_http_conn *c = wr->conn;

  c->queued -= wr->len;
  free(wr->data);
  free(wr);
  if (status < 0) {
    if (status != UV_ECANCELED)
      wr_debug("http: write failed: %s", uv_strerror(status));
    wr_api_conn_close(c);
    return;
  }
  if (c->queued == 0 && !c->closing)
    notify_drain(c);
}

void wr_api_conn_send(struct wr_http_conn *c, char *data, size_t len) {
  struct write_req *wr;
  uv_buf_t buf;
  int r;

  if (c->closing || c->shutting_down || len == 0) {
    free(data);
    return;
  }
  if (len > UINT32_MAX) {
    wr_warn("http: refusing to send %zu bytes at once", len);
    free(data);
    wr_api_conn_close(c);
    return;
  }
  wr = xmalloc(sizeof(*wr));
  wr->conn = c;
  wr->data = data;
  wr->len = len;
  buf = uv_buf_init(data, (unsigned)len);
  r = uv_write(&wr->w, &c->io.stream, &buf, 1, on_write);
  if (r < 0) {
    wr_debug("http: write: %s", uv_strerror(r));
    free(data);
    free(wr);
    wr_api_conn_close(c);
    return;
  }
  c->queued += len;
}

/* ---- closing gracefully ------------------------------------------------- */

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf);

static void on_shutdown(uv_shutdown_t *sr, int status) {
  struct wr_http_conn *c = sr->handle->data;

  if (c->closing)
    return;
  if (status < 0 || c->eof) {
    wr_api_conn_close(c);
    return;
  }
  c->lingering = true;
  wr_api_conn_set_timer(c, WR_TIMER_LINGER, LINGER_MS);
  if (uv_read_start(&c->io.stream, on_alloc, on_read) < 0)
    wr_api_conn_close(c);
}

/* Flush what is queued, then close. Only called with no request pending. */
static void shutdown_conn(struct wr_http_conn *c) {
  if (c->closing || c->shutting_down)
    return;
  c->shutting_down = true;
  uv_read_stop(&c->io.stream);
  c->reading = false;
  wr_api_conn_set_timer(c, WR_TIMER_LINGER, c->srv->limits.idle_timeout_ms);
  if (uv_shutdown(&c->shutdown, &c->io.stream, on_shutdown) < 0)
    wr_api_conn_close(c);
}

/* ---- the input loop ----------------------------------------------------- */

static bool can_parse(const struct wr_http_conn *c) {
  if (c->closing || c->shutting_down || c->broken || c->upgrade_done)
    return false;
  if (c->req == NULL || c->skip_message)
    return true;
  return wr_api_req_wants_input(c->req);
}

static void parse_failed(struct wr_http_conn *c, enum http_errno e) {
  wr_http_req_t *req = c->req;
  int status = c->fail_status;
  const char *code = c->fail_code ? c->fail_code : "bad_request";
  const char *msg = c->fail_msg ? c->fail_msg : http_errno_description(e);

  if (status == 0)
    status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
  if (e == HPE_HEADER_OVERFLOW)
    code = "header_too_large";
  c->broken = true;
  c->must_close = true;
  wr_debug("http: refused request: %s", msg);
  if (req != NULL && req->dispatched) {
    wr_api_req_body_ended(req, -EBADMSG);
    return;
  }
  if (req == NULL)
    req = c->req = wr_api_req_new(c);
  wr_api_req_refuse(req, status, code, NULL, msg);
}

static void handle_event(struct wr_http_conn *c, enum wr_http_event ev) {
  wr_http_req_t *req = c->req;

  if (req == NULL && !c->skip_message)
    return;
  switch (ev) {
  case WR_EV_HEAD:
    if (c->head_bytes + 1 > c->srv->limits.max_header_bytes) {
      c->must_close = true;
      wr_api_req_refuse(req, 431, "header_too_large", NULL,
                        "request head is too large");
      return;
    }
    wr_api_req_head(req);
    break;
  case WR_EV_BODY:
    wr_api_req_body_piece(req, c->chunk, c->chunk_len);
    break;
  case WR_EV_DONE:
    if (c->skip_message) {
      c->skip_message = false;
      c->head_bytes = 0;
    } else {
      c->upgrade_done = c->parser.upgrade;
      wr_api_req_message_done(req);
    }
    break;
  case WR_EV_NONE:
    break;
  }
}

/* Run the parser once over the buffered input, up to one event. */
static void feed(struct wr_http_conn *c) {
  bool in_head = !c->skip_message && (c->req == NULL || !c->req->head_done);
  size_t max = c->srv->limits.max_header_bytes;
  size_t limit = c->in.len;
  enum http_errno e;
  size_t n;

  if (in_head)
    limit = WR_MIN(limit, max - WR_MIN(max, c->head_bytes) + 1);
  c->feed_start = c->in.data;
  c->feed_end = c->in.data + limit;
  c->event = WR_EV_NONE;
  c->feed_no++;
  n = http_parser_execute(&c->parser, &wr_api_parser_settings, c->in.data,
                          limit);
  wr_api_parse_note_gap(c);
  e = HTTP_PARSER_ERRNO(&c->parser);
  if (e == HPE_PAUSED)
    http_parser_pause(&c->parser, 0);
  if (in_head)
    c->head_bytes += n;
  if (e != HPE_OK && e != HPE_PAUSED) {
    parse_failed(c, e);
  } else if (in_head && c->event == WR_EV_NONE && c->head_bytes > max) {
    c->fail_status = 431;
    parse_failed(c, HPE_HEADER_OVERFLOW);
  } else {
    handle_event(c, c->event);
  }
  wr_buf_consume(&c->in, n);
}

static void deliver_raw(struct wr_http_conn *c) {
  _cleanup_free_ char *data = NULL;
  size_t len;

  data = wr_buf_steal(&c->in, &len);
  wr_api_raw_deliver(c->req, data, len);
}

static bool raw_ready(const struct wr_http_conn *c) {
  return c->upgraded && !c->closing && c->req != NULL && !c->req->raw_paused &&
         c->in.len > 0;
}

/* A pending end of a streamed body that the handler can now receive. */
static void flush_body_end(struct wr_http_conn *c) {
  wr_http_req_t *req = c->req;

  if (req != NULL && req->end_pending && req->body_end != NULL)
    wr_api_req_body_ended(req, req->end_status);
}

/* At EOF, a connection with no request in the handler's hands is done:
 * whatever is buffered has been parsed as far as it goes. */
static void close_if_finished(struct wr_http_conn *c) {
  if (!c->eof || c->closing || c->shutting_down || c->upgraded)
    return;
  if (c->req == NULL || !c->req->dispatched)
    shutdown_conn(c);
}

void wr_api_conn_process(struct wr_http_conn *c) {
  if (c->in_process || c->closing)
    return;
  c->in_process = true;
  flush_body_end(c);
  for (;;) {
    if (raw_ready(c))
      deliver_raw(c);
    else if (!c->upgraded && c->in.len > 0 && can_parse(c))
      feed(c);
    else
      break;
  }
  c->in_process = false;
  if (c->broken && c->req == NULL)
    shutdown_conn(c);
  close_if_finished(c);
  wr_api_conn_update_reading(c);
}

void wr_api_conn_kick(struct wr_http_conn *c) {
  wr_api_conn_set_timer(c, WR_TIMER_KICK, 0);
}

/* ---- reading ------------------------------------------------------------ */

static bool wants_read(const struct wr_http_conn *c) {
  const wr_http_req_t *req = c->req;

  if (c->closing || c->shutting_down || c->eof)
    return false;
  if (c->upgraded)
    return req != NULL && !req->raw_paused;
  if (can_parse(c))
    return true;
  /* A request is with its handler. Keep reading a little, to notice the
   * client leaving, unless a streamed body is paused or not yet asked for:
   * then the socket itself must stop, for backpressure. */
  if (req != NULL && req->dispatched && !req->msg_complete &&
      !c->upgrade_done && !c->broken)
    return false;
  return c->in.len < c->srv->limits.max_header_bytes;
}

void wr_api_conn_update_reading(struct wr_http_conn *c) {
  bool want = wants_read(c);

  if (want == c->reading)
    return;
  if (!want) {
    uv_read_stop(&c->io.stream);
    c->reading = false;
    return;
  }
  if (uv_read_start(&c->io.stream, on_alloc, on_read) < 0) {
    wr_api_conn_close(c);
    return;
  }
  c->reading = true;
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  (void)size;
  buf->base = xmalloc(WR_HTTP_READ_SIZE);
  buf->len = WR_HTTP_READ_SIZE;
}

/* The client sent EOF or the connection failed. */
static void on_eof(struct wr_http_conn *c) {
  wr_http_req_t *req = c->req;

  c->eof = true;
  uv_read_stop(&c->io.stream);
  c->reading = false;
  if (c->lingering) {
    wr_api_conn_close(c);
  } else if (c->upgraded && req != NULL) {
    wr_api_raw_closed(req);
  } else if (req != NULL && req->dispatched) {
    wr_api_conn_close(c);
  } else {
    wr_api_conn_process(c);
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct wr_http_conn *c = s->data;

  if (n > 0 && !c->lingering)
    wr_buf_append(&c->in, buf->base, (size_t)n);
  free(buf->base);
  if (n == 0 || c->closing)
    return;
  if (n < 0) {
    on_eof(c);
    return;
  }
  if (c->lingering)
    return;
  if (c->timer_mode == WR_TIMER_BODY)
    wr_api_conn_set_timer(c, WR_TIMER_BODY, c->srv->limits.idle_timeout_ms);
  wr_api_conn_process(c);
}

static void on_timer(uv_timer_t *t) {
  struct wr_http_conn *c = t->data;
  enum wr_http_timer mode = c->timer_mode;

  c->timer_mode = WR_TIMER_NONE;
  if (mode == WR_TIMER_KICK) {
    wr_api_conn_process(c);
    if (!c->closing && c->req == NULL && c->timer_mode == WR_TIMER_NONE &&
        !c->upgraded)
      wr_api_conn_set_timer(c, WR_TIMER_IDLE, c->srv->limits.idle_timeout_ms);
    return;
  }
  if (mode == WR_TIMER_HEAD)
    wr_debug("http: closing a connection whose request head is too slow");
  wr_api_conn_close(c);
}

void wr_api_conn_start(struct wr_http_conn *c) {
  c->counted = true;
  c->srv->nactive++;
  if (!c->trusted)
    c->srv->nuntrusted++;
  wr_api_conn_set_timer(c, WR_TIMER_HEAD, c->srv->limits.header_timeout_ms);
  wr_api_conn_update_reading(c);
}

/*
 * After a final call: carry on with the next request (keep-alive), or
 * close. A refused request whose body was never read cannot be followed by
 * another, since we would not know where it ends; that case arrives here
 * with keep == false.
 */
void wr_api_conn_request_done(struct wr_http_conn *c, bool keep,
                              bool msg_complete) {
  c->req = NULL;
  if (c->closing)
    return;
  if (!keep || c->broken || c->must_close) {
    shutdown_conn(c);
    return;
  }
  c->head_bytes = 0;
  c->skip_message = !msg_complete;
  if (c->in_process) {
    wr_api_conn_set_timer(c, WR_TIMER_IDLE, c->srv->limits.idle_timeout_ms);
    return;
  }
  /* Pipelined requests wait for the next turn of the loop, so that a
   * handler never runs inside another handler's final call. */
  wr_api_conn_kick(c);
  wr_api_conn_update_reading(c);
}
