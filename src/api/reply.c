/*
 * Answers: whole replies, chunked streams and the upgrade to a raw byte
 * stream. Every final call marks the request finished before it writes, so
 * that a write failing at once (which closes the connection) cannot run
 * the abort callback in the middle of the handler's own final call.
 */
#include "api/api_internal.h"

#include <jansson.h>
#include <strings.h>

static bool will_close(const wr_http_req_t *req) {
  const struct wr_http_conn *c = req->conn;

  return c->must_close || c->broken || c->eof || c->srv->closing ||
         !req->keep_alive || req->parser_upgrade ||
         (req->has_body && !req->msg_complete);
}

static bool has_no_body(int status) {
  return status < 200 || status == 204 || status == 304;
}

/* Extra headers are "Name: value\r\n" lines; anything else would let a
 * caller end the head early, so it is dropped. */
static bool extra_ok(const char *extra) {
  size_t len = strlen(extra);

  if (len < 2 || strcmp(extra + len - 2, "\r\n") != 0 ||
      strstr(extra, "\r\n\r\n") != NULL)
    return false;
  for (const char *p = extra; *p != '\0'; p++)
    if ((*p == '\n' && (p == extra || p[-1] != '\r')) ||
        (*p == '\r' && p[1] != '\n'))
      return false;
  return true;
}

static void put_head(wr_buf_t *b, const wr_http_req_t *req,
                     const char *content_type, const char *extra) {
  wr_buf_printf(b, "HTTP/1.1 %d %s\r\n", req->status,
                wr_api_reason(req->status));
  if (content_type != NULL)
    wr_buf_printf(b, "Content-Type: %s\r\n", content_type);
  if (req->close_after)
    wr_buf_puts(b, "Connection: close\r\n");
  if (extra != NULL && extra[0] != '\0') {
    if (extra_ok(extra))
      wr_buf_puts(b, extra);
    else
      wr_warn("http: dropping malformed extra headers");
  }
}

static void send_buf(struct wr_http_conn *c, wr_buf_t *b) {
  size_t len;
  char *data = wr_buf_steal(b, &len);

  wr_api_conn_send(c, data, len);
}

/* Start a final call; false if one was already made. */
static bool begin_final(wr_http_req_t *req, int status) {
  if (req->finished)
    return false;
  req->finished = true;
  if (status < 100 || status > 999)
    status = 500;
  req->status = status;
  return true;
}

void wr_api_reply(wr_http_req_t *req, int status, const char *content_type,
                  const char *extra_headers, const char *body, size_t len) {
  wr_buf_t b = {0};

  if (!begin_final(req, status))
    return;
  wr_api_req_hold(req);
  if (req->conn != NULL) {
    req->close_after = will_close(req);
    put_head(&b, req, content_type, extra_headers);
    if (!has_no_body(req->status))
      wr_buf_printf(&b, "Content-Length: %zu\r\n", len);
    wr_buf_puts(&b, "\r\n");
    if (!has_no_body(req->status) && !req->no_body) {
      wr_buf_append(&b, body, len);
      req->bytes_out = len;
    }
    send_buf(req->conn, &b);
  }
  wr_api_req_finish(req);
  wr_api_req_release(req);
}

void wr_http_reply_json(wr_http_req_t *req, int status, json_t *body) {
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *line = NULL;

  if (body == NULL) {
    wr_api_reply(req, status, "application/json", NULL, NULL, 0);
    return;
  }
  text = wr_json_dumps(body);
  json_decref(body);
  line = xasprintf("%s\n", text);
  wr_api_reply(req, status, "application/json", NULL, line, strlen(line));
}

static void reply_error_v(wr_http_req_t *req, int status, const char *code,
                          const char *extra_headers, const char *fmt,
                          va_list ap) {
  char msg[1024];

  vsnprintf(msg, sizeof(msg), fmt, ap);
  wr_api_req_refuse(req, status, code, extra_headers, msg);
}

void wr_http_reply_error(wr_http_req_t *req, int status, const char *code,
                         const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  reply_error_v(req, status, code, NULL, fmt, ap);
  va_end(ap);
}

void wr_http_reply_error_headers(wr_http_req_t *req, int status,
                                 const char *code, const char *extra_headers,
                                 const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  reply_error_v(req, status, code, extra_headers, fmt, ap);
  va_end(ap);
}

void wr_http_reply_empty(wr_http_req_t *req, int status) {
  wr_api_reply(req, status, "application/json", NULL, NULL, 0);
}

void wr_http_reply_json_text(wr_http_req_t *req, int status, const char *text,
                             size_t len) {
  wr_api_reply(req, status, "application/json", NULL, text, len);
}

/* ---- streamed replies --------------------------------------------------- */

/*
 * HTTP/1.0 has no chunked coding: such a client gets the body delimited by
 * the end of the connection instead.
 */
void wr_http_stream_begin(wr_http_req_t *req, int status,
                          const char *content_type, const char *extra_headers) {
  wr_buf_t b = {0};

  if (req->finished || req->streaming || req->upgraded)
    return;
  req->streaming = true;
  req->status = status < 100 || status > 999 ? 500 : status;
  if (req->conn == NULL)
    return;
  req->chunked = !req->old_http;
  req->close_after = will_close(req) || req->old_http;
  put_head(&b, req, content_type ? content_type : "application/octet-stream",
           extra_headers);
  if (req->chunked)
    wr_buf_puts(&b, "Transfer-Encoding: chunked\r\n");
  wr_buf_puts(&b, "\r\n");
  wr_api_req_hold(req);
  send_buf(req->conn, &b);
  wr_api_req_release(req);
}

/* Queue bytes on the request's connection; returns what is still queued.
 * The request is held, since a failing write runs the abort callback. */
static size_t queue(wr_http_req_t *req, wr_buf_t *b, size_t payload) {
  struct wr_http_conn *c = req->conn;

  req->bytes_out += payload;
  wr_api_req_hold(req);
  send_buf(c, b);
  wr_api_req_release(req);
  return c->closing ? 0 : c->queued;
}

size_t wr_http_stream_write(wr_http_req_t *req, const void *data, size_t len) {
  wr_buf_t b = {0};

  if (req->conn == NULL || req->finished || !req->streaming)
    return 0;
  if (len == 0 || req->no_body)
    return req->conn->queued;
  if (req->chunked)
    wr_buf_printf(&b, "%zx\r\n", len);
  wr_buf_append(&b, data, len);
  if (req->chunked)
    wr_buf_puts(&b, "\r\n");
  return queue(req, &b, len);
}

void wr_http_stream_end(wr_http_req_t *req) {
  static const char last[] = "0\r\n\r\n";

  if (!req->streaming)
    wr_http_stream_begin(req, 200, NULL, NULL);
  if (!begin_final(req, req->status))
    return;
  wr_api_req_hold(req);
  if (req->conn != NULL && req->chunked && !req->no_body)
    wr_api_conn_send(req->conn, xstrdup(last), sizeof(last) - 1);
  wr_api_req_finish(req);
  wr_api_req_release(req);
}

void wr_http_stream_abort(wr_http_req_t *req) {
  if (!req->streaming) {
    wr_http_reply_error(req, 500, "internal", "the reply failed");
    return;
  }
  if (!begin_final(req, req->status))
    return;
  req->close_after = true;
  wr_api_req_hold(req);
  wr_api_req_finish(req);
  wr_api_req_release(req);
}

/* ---- upgrade ------------------------------------------------------------ */

/* Both what the client asked and what the parser did must agree: only when
 * http-parser stopped at the head are the following bytes raw. */
bool wr_http_wants_upgrade(const wr_http_req_t *req, const char *protocol) {
  const char *connection = wr_http_header(req, "Connection");
  const char *upgrade = wr_http_header(req, "Upgrade");

  return req->parser_upgrade && connection != NULL && upgrade != NULL &&
         wr_api_has_token(connection, "upgrade") &&
         strcasecmp(upgrade, protocol) == 0;
}

int wr_http_upgrade(wr_http_req_t *req, const char *protocol,
                    void (*on_data)(wr_http_req_t *req, const char *data,
                                    size_t len, void *arg),
                    void (*on_close)(wr_http_req_t *req, void *arg),
                    void *arg) {
  wr_buf_t b = {0};
  struct wr_http_conn *c = req->conn;

  if (c == NULL || req->finished || req->streaming || req->upgraded ||
      !req->msg_complete || !wr_api_is_token(protocol, strlen(protocol)) ||
      !wr_http_wants_upgrade(req, protocol))
    return -1;
  req->upgraded = true;
  req->status = 101;
  req->raw_data = on_data;
  req->raw_closed = on_close;
  req->raw_arg = arg;
  c->upgraded = true;
  wr_buf_printf(&b,
                "HTTP/1.1 101 Switching Protocols\r\n"
                "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n",
                protocol);
  queue(req, &b, 0);
  if (req->conn != NULL)
    wr_api_conn_kick(req->conn);
  return 0;
}

size_t wr_http_raw_write(wr_http_req_t *req, const void *data, size_t len) {
  wr_buf_t b = {0};

  if (req->conn == NULL || req->finished || !req->upgraded)
    return 0;
  if (len == 0)
    return req->conn->queued;
  wr_buf_append(&b, data, len);
  return queue(req, &b, len);
}

void wr_http_raw_pause(wr_http_req_t *req, bool pause) {
  wr_api_req_set_paused(req, &req->raw_paused, pause);
}

void wr_http_raw_close(wr_http_req_t *req) {
  if (!begin_final(req, req->upgraded ? 101 : 500))
    return;
  req->close_after = true;
  wr_api_req_hold(req);
  wr_api_req_finish(req);
  wr_api_req_release(req);
}

void wr_api_raw_deliver(wr_http_req_t *req, const char *data, size_t len) {
  if (req->raw_data == NULL || req->finished)
    return;
  wr_api_req_hold(req);
  req->raw_data(req, data, len, req->raw_arg);
  wr_api_req_release(req);
}

void wr_api_raw_closed(wr_http_req_t *req) {
  if (req->raw_close_sent || req->finished)
    return;
  req->raw_close_sent = true;
  if (req->raw_closed == NULL)
    return;
  wr_api_req_hold(req);
  req->raw_closed(req, req->raw_arg);
  wr_api_req_release(req);
}
