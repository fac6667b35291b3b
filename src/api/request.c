/*
 * Requests: what happens once the head is in (framing and version checks,
 * authentication, routing, decoding), handing the request to its handler,
 * streamed request bodies, the client going away, and the accessors.
 *
 * Checks run in an order that leaks nothing: framing first (a request we
 * cannot delimit is answered 400 and the connection closed), then the API
 * key (so an unauthenticated client cannot probe which paths exist), then
 * routing and decoding.
 */
#include "api/api_internal.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <strings.h>

static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

wr_http_req_t *wr_api_req_new(struct wr_http_conn *c) {
  wr_http_req_t *req = xcalloc(1, sizeof(*req));

  req->conn = c;
  req->method = "";
  req->start_ns = wr_mono_ns();
  return req;
}

static void free_req(wr_http_req_t *req) {
  wr_buf_free(&req->url);
  wr_buf_free(&req->field);
  wr_buf_free(&req->value);
  wr_buf_free(&req->body);
  wr_api_kv_free(&req->headers);
  wr_api_kv_free(&req->params);
  wr_api_kv_free(&req->query);
  free(req->path);
  free(req);
}

void wr_api_req_hold(wr_http_req_t *req) {
  req->holds++;
}

void wr_api_req_release(wr_http_req_t *req) {
  if (--req->holds == 0 && req->finished)
    free_req(req);
}

/* ---- after the head ----------------------------------------------------- */

static void read_head_facts(wr_http_req_t *req) {
  const http_parser *p = &req->conn->parser;
  const char *expect = wr_http_header(req, "Expect");

  req->method = http_method_str((enum http_method)p->method);
  req->no_body = p->method == HTTP_HEAD;
  req->old_http =
      p->http_major == 0 || (p->http_major == 1 && p->http_minor == 0);
  req->keep_alive = !req->old_http && http_should_keep_alive(p);
  req->has_body = (p->flags & F_CHUNKED) ||
                  (p->content_length > 0 && p->content_length != UINT64_MAX);
  req->parser_upgrade = p->upgrade;
  req->expect_continue = !req->old_http && expect != NULL &&
                         strcasecmp(expect, "100-continue") == 0;
}

static bool authorized(const wr_http_req_t *req) {
  const wr_http_server_t *srv = req->conn->srv;
  const char *h = wr_http_header(req, "Authorization");
  unsigned char digest[SHA256_DIGEST_LENGTH];

  if (req->conn->trusted)
    return true;
  if (!srv->has_key || h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
    return false;
  h += 7;
  while (*h == ' ')
    h++;
  SHA256((const unsigned char *)h, strlen(h), digest);
  return CRYPTO_memcmp(digest, srv->key_digest, sizeof(digest)) == 0;
}

/* Split the request target and decode its path and query. Returns 0 or
 * refuses the request and returns -1. */
static int decode_target(wr_http_req_t *req) {
  const char *url = req->url.data;
  bool connect = req->conn->parser.method == HTTP_CONNECT;
  struct http_parser_url u;
  wr_error_t err = {0};

  http_parser_url_init(&u);
  if (req->url.len == 0 ||
      http_parser_parse_url(url, req->url.len, connect, &u) ||
      !(u.field_set & (1 << UF_PATH))) {
    wr_api_req_refuse(req, 400, "bad_request", NULL, "invalid request target");
    return -1;
  }
  if (wr_api_decode(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len,
                    &req->path, &err) < 0 ||
      ((u.field_set & (1 << UF_QUERY)) &&
       wr_api_parse_query(url + u.field_data[UF_QUERY].off,
                          u.field_data[UF_QUERY].len, &req->query, &err) < 0)) {
    wr_api_req_refuse(req, 400, "bad_request", NULL, err.msg);
    return -1;
  }
  return 0;
}

/* Find the route, or answer 404, or 405 with the methods that exist. */
static int find_route(wr_http_req_t *req) {
  const wr_http_server_t *srv = req->conn->srv;
  _cleanup_(wr_buf_free) wr_buf_t allow = {0};
  _cleanup_free_ char *extra = NULL;
  int r;

  r = wr_api_route_find(srv->routes, srv->nroutes, req->method, req->path,
                        &req->route, &req->params, &allow);
  if (r == 404) {
    wr_api_req_refuse(req, 404, "not_found", NULL, "no such API path");
    return -1;
  }
  if (r == 405) {
    extra = xasprintf("Allow: %s\r\n", allow.data);
    wr_api_req_refuse(req, 405, "method_not_allowed", extra,
                      "method not allowed here");
    return -1;
  }
  return 0;
}

/* A parameter names one thing; "." and ".." would name its neighbours
 * once a handler joins it into a path. */
static int check_params(wr_http_req_t *req) {
  for (size_t i = 0; i < req->params.n; i++) {
    const char *v = req->params.items[i].value;
    if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0) {
      wr_api_req_refuse(req, 400, "bad_request", NULL,
                        "invalid path parameter");
      return -1;
    }
  }
  return 0;
}

static int check_protocol(wr_http_req_t *req) {
  const http_parser *p = &req->conn->parser;
  const char *why;

  if (p->http_major != 1) {
    req->conn->must_close = true;
    wr_api_req_refuse(req, 505, "bad_request", NULL,
                      "unsupported HTTP version");
    return -1;
  }
  why = wr_http_framing_end(&req->framing, req->old_http);
  if (why != NULL) {
    req->conn->must_close = true;
    wr_api_req_refuse(req, 400, "bad_request", NULL, why);
    return -1;
  }
  return 0;
}

static void send_continue(wr_http_req_t *req) {
  if (!req->expect_continue || req->continue_sent || req->msg_complete ||
      req->conn == NULL)
    return;
  req->continue_sent = true;
  wr_api_conn_send(req->conn, xstrdup(continue_line),
                   sizeof(continue_line) - 1);
}

static void dispatch(wr_http_req_t *req) {
  struct wr_http_conn *c = req->conn;

  req->dispatched = true;
  wr_api_conn_set_timer(c, WR_TIMER_NONE, 0);
  wr_api_req_hold(req);
  req->route->fn(req, c->srv->ctx);
  wr_api_req_release(req);
}

/*
 * Upgrade requests are always dispatched at the end of their message, with
 * any body buffered: what follows belongs to the raw stream, and the
 * handler can only switch once the parser has stopped.
 */
static bool streams_body(const wr_http_req_t *req) {
  return (req->route->flags & WR_ROUTE_STREAM_BODY) && !req->parser_upgrade;
}

void wr_api_req_head(wr_http_req_t *req) {
  struct wr_http_conn *c = req->conn;
  const http_parser *p = &c->parser;

  read_head_facts(req);
  wr_api_conn_set_timer(c, WR_TIMER_NONE, 0);
  if (check_protocol(req) < 0)
    return;
  if (!authorized(req)) {
    /* One answer per connection: a client without the key cannot hold a
     * slot with keep-alive, nor learn anything from a second request. */
    c->must_close = true;
    wr_api_req_refuse(req, 401, "unauthorized", "WWW-Authenticate: Bearer\r\n",
                      "a valid API key is required "
                      "(Authorization: Bearer KEY)");
    return;
  }
  if (decode_target(req) < 0 || find_route(req) < 0 || check_params(req) < 0)
    return;
  if (streams_body(req)) {
    dispatch(req);
    return;
  }
  if (!(p->flags & F_CHUNKED) && p->content_length != UINT64_MAX &&
      p->content_length > c->srv->limits.max_body_bytes) {
    wr_api_req_refuse(req, 413, "payload_too_large", NULL,
                      "request body is too large");
    return;
  }
  if (req->has_body) {
    send_continue(req);
    wr_api_conn_set_timer(c, WR_TIMER_BODY, c->srv->limits.idle_timeout_ms);
  }
}

void wr_api_req_message_done(wr_http_req_t *req) {
  req->msg_complete = true;
  if (!req->dispatched)
    dispatch(req);
  else
    wr_api_req_body_ended(req, 0);
}

bool wr_api_req_wants_input(const wr_http_req_t *req) {
  if (!req->head_done)
    return true;
  if (req->msg_complete || req->finished)
    return false;
  if (!req->dispatched)
    return true;
  return req->body_data != NULL && !req->body_paused;
}

void wr_api_req_refuse(wr_http_req_t *req, int status, const char *code,
                       const char *extra_headers, const char *msg) {
  size_t len;
  _cleanup_free_ char *body = wr_api_error_body(code, msg, &len);

  wr_api_reply(req, status, "application/json", extra_headers, body, len);
}

/* ---- streamed request bodies -------------------------------------------- */

void wr_api_req_body_piece(wr_http_req_t *req, const char *data, size_t len) {
  if (req->body_data == NULL || req->finished)
    return;
  wr_api_req_hold(req);
  req->body_data(req, data, len, req->body_arg);
  wr_api_req_release(req);
}

/* The first outcome sticks: a body that ended cleanly stays ended even if
 * the client leaves before the handler asked for it. */
void wr_api_req_body_ended(wr_http_req_t *req, int status) {
  if (req->end_sent)
    return;
  if (!req->end_pending) {
    req->end_pending = true;
    req->end_status = status;
  }
  if (req->body_end == NULL || req->finished)
    return;
  req->end_pending = false;
  req->end_sent = true;
  wr_api_req_hold(req);
  req->body_end(req, req->end_status, req->body_arg);
  wr_api_req_release(req);
}

/* For a buffered route the body is already here: hand it over at once. */
static void read_buffered(wr_http_req_t *req) {
  wr_api_req_hold(req);
  if (req->body.len > 0)
    req->body_data(req, req->body.data, req->body.len, req->body_arg);
  wr_api_req_body_ended(req, req->aborted ? -ECONNRESET : 0);
  wr_api_req_release(req);
}

void wr_http_body_read(wr_http_req_t *req,
                       void (*on_data)(wr_http_req_t *req, const char *data,
                                       size_t len, void *arg),
                       void (*on_end)(wr_http_req_t *req, int status,
                                      void *arg),
                       void *arg) {
  req->body_data = on_data;
  req->body_end = on_end;
  req->body_arg = arg;
  if (req->route == NULL || !streams_body(req)) {
    read_buffered(req);
    return;
  }
  if (req->conn == NULL) {
    wr_api_req_body_ended(req, -ECONNRESET);
    return;
  }
  send_continue(req);
  wr_api_conn_kick(req->conn);
}

/* A streamed body and an upgraded stream both come from the socket:
 * pausing either stops reading it; resuming kicks the connection so bytes
 * already buffered flow again. */
void wr_api_req_set_paused(wr_http_req_t *req, bool *flag, bool pause) {
  *flag = pause;
  if (req->conn == NULL)
    return;
  if (pause)
    wr_api_conn_update_reading(req->conn);
  else
    wr_api_conn_kick(req->conn);
}

void wr_http_body_pause(wr_http_req_t *req, bool pause) {
  wr_api_req_set_paused(req, &req->body_paused, pause);
}

/* ---- the end of a request ----------------------------------------------- */

void wr_api_req_detach(wr_http_req_t *req) {
  req->conn = NULL;
  if (req->finished)
    return; /* a final call is under way and frees it */
  if (!req->dispatched) {
    req->finished = true;
    if (req->holds == 0)
      free_req(req);
    return;
  }
  req->aborted = true;
  wr_api_req_hold(req);
  if (req->abort_cb != NULL)
    req->abort_cb(req, req->abort_arg);
  if (!req->finished)
    wr_api_req_body_ended(req, -ECONNRESET);
  if (!req->finished && req->upgraded)
    wr_api_raw_closed(req);
  wr_api_req_release(req);
}

static void log_access(const wr_http_req_t *req) {
  double ms = (double)(wr_mono_ns() - req->start_ns) / 1e6;
  const char *path = req->path ? req->path : "-";

  wr_debug("%s %s %d %" PRIu64 " bytes %.1f ms%s", req->method, path,
           req->status, req->bytes_out, ms, req->aborted ? " (aborted)" : "");
}

/* Called by every final call, after it set `finished` and queued its
 * output. The request is freed here unless a callback still runs on it. */
void wr_api_req_finish(wr_http_req_t *req) {
  struct wr_http_conn *c = req->conn;

  log_access(req);
  if (c != NULL) {
    req->conn = NULL;
    wr_api_conn_request_done(c, !req->close_after, req->msg_complete);
  }
  if (req->holds == 0)
    free_req(req);
}

/* ---- accessors ---------------------------------------------------------- */

const char *wr_http_method(const wr_http_req_t *req) {
  return req->method;
}

const char *wr_http_path(const wr_http_req_t *req) {
  return req->path ? req->path : "";
}

const char *wr_http_param(const wr_http_req_t *req, const char *name) {
  return wr_api_kv_find(&req->params, name, false);
}

const char *wr_http_query(const wr_http_req_t *req, const char *name) {
  return wr_api_kv_find(&req->query, name, false);
}

const char *wr_http_header(const wr_http_req_t *req, const char *name) {
  return wr_api_kv_find(&req->headers, name, true);
}

const char *wr_http_body(const wr_http_req_t *req, size_t *len) {
  if (len != NULL)
    *len = req->body.len;
  return req->body.data ? req->body.data : "";
}

void wr_http_set_data(wr_http_req_t *req, void *data) {
  req->data = data;
}

void *wr_http_get_data(const wr_http_req_t *req) {
  return req->data;
}

bool wr_http_aborted(const wr_http_req_t *req) {
  return req->aborted;
}

void wr_http_on_abort(wr_http_req_t *req,
                      void (*cb)(wr_http_req_t *req, void *arg), void *arg) {
  req->abort_cb = cb;
  req->abort_arg = arg;
}

void wr_http_on_drain(wr_http_req_t *req,
                      void (*cb)(wr_http_req_t *req, void *arg), void *arg) {
  req->drain_cb = cb;
  req->drain_arg = arg;
}
