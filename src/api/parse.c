/*
 * http-parser callbacks for requests. They only collect (URL, headers,
 * body pieces) and check framing; anything that runs handler code happens
 * after http_parser_execute() returns, because each event pauses the
 * parser. A callback that refuses the input records a status and returns
 * non-zero, which stops the parser with an error.
 *
 * http-parser 2.9.4 (as packaged, non-strict) already refuses
 * Content-Length together with Transfer-Encoding, duplicate
 * Content-Length, a bad Content-Length, and "chunked" that is not the final
 * coding. It lets through "Transfer-Encoding: identity, chunked", repeated
 * Transfer-Encoding, Transfer-Encoding in HTTP/1.0, a space before the
 * colon ("Transfer-Encoding : chunked") and obsolete line folding. Those
 * are refused here, since a proxy in front may read them differently.
 */
#include "api/api_internal.h"

#include <strings.h>

static struct wr_http_conn *conn_of(http_parser *p) {
  return p->data;
}

static int refuse(struct wr_http_conn *c, int status, const char *code,
                  const char *msg) {
  c->fail_status = status;
  c->fail_code = code;
  c->fail_msg = msg;
  return -1;
}

static int too_large(struct wr_http_conn *c) {
  return refuse(c, 431, "header_too_large", "request head is too large");
}

/* Append to a head buffer; the whole head is bounded, so is each piece. */
static int append(struct wr_http_conn *c, wr_buf_t *b, const char *at,
                  size_t len) {
  if (b->len + len > c->srv->limits.max_header_bytes)
    return too_large(c);
  wr_buf_append(b, at, len);
  return 0;
}

static int on_message_begin(http_parser *p) {
  struct wr_http_conn *c = conn_of(p);

  if (c->req == NULL)
    c->req = wr_api_req_new(c);
  c->trailer_bytes = 0;
  if (c->timer_mode != WR_TIMER_HEAD)
    wr_api_conn_set_timer(c, WR_TIMER_HEAD, c->srv->limits.header_timeout_ms);
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  struct wr_http_conn *c = conn_of(p);

  return append(c, &c->req->url, at, len);
}

/* Trailers of a chunked body are read and dropped, within the head limit. */
static int trailer(struct wr_http_conn *c, size_t len) {
  c->trailer_bytes += len;
  return c->trailer_bytes > c->srv->limits.max_header_bytes ? too_large(c) : 0;
}

static void trim_ows(wr_buf_t *b) {
  while (b->len > 0 &&
         (b->data[b->len - 1] == ' ' || b->data[b->len - 1] == '\t'))
    b->data[--b->len] = '\0';
}

/* Framing headers must be unambiguous (framing.c). Two Host lines are
 * refused too (RFC 9112 3.2), since a proxy in front may route by either. */
static int check_framing_header(struct wr_http_conn *c, const char *name,
                                size_t name_len, const char *value,
                                size_t value_len) {
  const char *why = wr_http_framing_header(&c->req->framing, name, name_len,
                                           value, value_len);

  return why != NULL ? refuse(c, 400, "bad_request", why) : 0;
}

static int commit_header(struct wr_http_conn *c) {
  wr_http_req_t *req = c->req;
  const char *name = req->field.data ? req->field.data : "";

  trim_ows(&req->value);
  if (!wr_api_is_token(name, req->field.len))
    return refuse(c, 400, "bad_request", "invalid header name");
  if (req->headers.n >= WR_HTTP_MAX_HEADERS)
    return refuse(c, 431, "header_too_large", "too many headers");
  if (check_framing_header(c, name, req->field.len,
                           req->value.data ? req->value.data : "",
                           req->value.len) < 0)
    return -1;
  wr_api_kv_add(&req->headers, name, req->field.len,
                req->value.data ? req->value.data : "", req->value.len);
  wr_buf_reset(&req->field);
  wr_buf_reset(&req->value);
  req->hstate = WR_H_NONE;
  return 0;
}

/*
 * http-parser reports a field or value in several calls when it spans two
 * reads; the only other way to get a second call is a folded line (or, for
 * names, a line without a colon). A true split ends exactly at the end of
 * one input and starts exactly at the start of the next.
 */
static bool is_split(const struct wr_http_conn *c, const char *at,
                     bool prev_at_end) {
  return prev_at_end && at == c->feed_start;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  struct wr_http_conn *c = conn_of(p);
  wr_http_req_t *req = c->req;

  if (req->head_done)
    return trailer(c, len);
  if (req->hstate == WR_H_VALUE && commit_header(c) < 0)
    return -1;
  if (req->hstate == WR_H_FIELD && !is_split(c, at, c->field_at_end))
    return refuse(c, 400, "bad_request", "malformed header line");
  req->hstate = WR_H_FIELD;
  c->field_at_end = at + len == c->feed_end;
  c->field_end = at + len;
  c->field_feed = c->feed_no;
  c->gap_newline = false;
  return append(c, &req->field, at, len);
}

static bool has_newline(const char *from, const char *to) {
  for (; from < to; from++)
    if (*from == '\r' || *from == '\n')
      return true;
  return false;
}

/* Where the gap between the current name and its value starts in the
 * current input. */
static const char *gap_start(const struct wr_http_conn *c) {
  return c->field_feed == c->feed_no ? c->field_end : c->feed_start;
}

/*
 * http-parser takes "Name:\r\n value" as "Name: value": a folded first
 * line looks like leading whitespace. A proxy may not see it that way, so
 * a line break between the colon and a non-empty value is refused. (An
 * empty value followed by the next header arrives as a zero-length value.)
 */
static bool folded_first_line(const struct wr_http_conn *c, const char *at,
                              size_t len) {
  return len > 0 && (c->gap_newline || has_newline(gap_start(c), at));
}

void wr_api_parse_note_gap(struct wr_http_conn *c) {
  const wr_http_req_t *req = c->req;

  if (req == NULL || req->head_done || req->hstate != WR_H_FIELD)
    return;
  if (has_newline(gap_start(c), c->feed_end))
    c->gap_newline = true;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  struct wr_http_conn *c = conn_of(p);
  wr_http_req_t *req = c->req;

  if (req->head_done)
    return trailer(c, len);
  if (req->hstate == WR_H_VALUE && !is_split(c, at, c->value_at_end))
    return refuse(c, 400, "bad_request", "folded header lines are refused");
  if (req->hstate == WR_H_NONE)
    return refuse(c, 400, "bad_request", "malformed header line");
  if (req->hstate == WR_H_FIELD && folded_first_line(c, at, len))
    return refuse(c, 400, "bad_request", "folded header lines are refused");
  req->hstate = WR_H_VALUE;
  c->value_at_end = at + len == c->feed_end;
  return append(c, &req->value, at, len);
}

static int on_headers_complete(http_parser *p) {
  struct wr_http_conn *c = conn_of(p);
  wr_http_req_t *req = c->req;

  if (req->head_done) /* end of the trailers */
    return 0;
  if (req->hstate == WR_H_FIELD)
    return refuse(c, 400, "bad_request", "malformed header line");
  if (req->hstate == WR_H_VALUE && commit_header(c) < 0)
    return -1;
  wr_buf_free(&req->field);
  wr_buf_free(&req->value);
  req->head_done = true;
  c->event = WR_EV_HEAD;
  http_parser_pause(p, 1);
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  struct wr_http_conn *c = conn_of(p);
  wr_http_req_t *req = c->req;

  if (c->skip_message || req == NULL)
    return 0;
  if (req->dispatched) {
    c->chunk = at;
    c->chunk_len = len;
    c->event = WR_EV_BODY;
    http_parser_pause(p, 1);
    return 0;
  }
  if (req->body.len + len > c->srv->limits.max_body_bytes)
    return refuse(c, 413, "payload_too_large", "request body is too large");
  wr_buf_append(&req->body, at, len);
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct wr_http_conn *c = conn_of(p);

  c->event = WR_EV_DONE;
  http_parser_pause(p, 1);
  return 0;
}

const http_parser_settings wr_api_parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};
