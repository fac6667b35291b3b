/*
 * Server-Sent Events (text/event-stream): the encoder the daemon streams
 * events with, and the decoder the CLI reads them with.
 *
 * The format is the WHATWG one: an event is a run of "field: value" lines
 * ended by a blank line; lines end in LF, CRLF or a lone CR; a line that
 * starts with a colon is a comment. The decoder reads what a daemon (or
 * anything that answers on its socket) sends, so it is strict about size:
 * a line or an event's data past the decoder's bound is an error rather
 * than memory without end.
 */
#include "api/api.h"

#include <string.h>

/* Data that holds line breaks goes out as one "data:" line per line, which
 * the reader joins back with LF. */
static void put_field(wr_buf_t *out, const char *name, const char *value) {
  const char *p = value;

  for (;;) {
    size_t n = strcspn(p, "\r\n");
    wr_buf_printf(out, "%s: ", name);
    wr_buf_append(out, p, n);
    wr_buf_puts(out, "\n");
    p += n;
    if (*p == '\0')
      return;
    p += (p[0] == '\r' && p[1] == '\n') ? 2 : 1;
  }
}

void wr_sse_encode(wr_buf_t *out, uint64_t id, const char *event,
                   const char *data) {
  if (id != 0)
    wr_buf_printf(out, "id: %llu\n", (unsigned long long)id);
  if (event != NULL)
    put_field(out, "event", event);
  put_field(out, "data", data != NULL ? data : "");
  wr_buf_puts(out, "\n");
}

void wr_sse_comment(wr_buf_t *out, const char *text) {
  put_field(out, "", text);
  wr_buf_puts(out, "\n");
}

/* ---- the decoder --------------------------------------------------------- */

void wr_sse_decoder_init(struct wr_sse_decoder *d, size_t max) {
  memset(d, 0, sizeof(*d));
  wr_buf_init(&d->line);
  wr_buf_init(&d->data);
  wr_buf_init(&d->event);
  d->max = max;
}

void wr_sse_decoder_free(struct wr_sse_decoder *d) {
  wr_buf_free(&d->line);
  wr_buf_free(&d->data);
  wr_buf_free(&d->event);
}

static void set_buf(wr_buf_t *b, const char *s, size_t n) {
  wr_buf_reset(b);
  wr_buf_append(b, s, n);
}

/* A blank line: hand the event over (when it has data, as the spec says)
 * and start the next one. The last event id persists across events. */
static int dispatch(struct wr_sse_decoder *d, wr_sse_event_fn fn, void *arg,
                    wr_error_t *err) {
  struct wr_sse_event ev;
  int rc = 0;

  if (d->has_data) {
    wr_buf_append(&d->data, "", 1);
    wr_buf_append(&d->event, "", 1);
    ev.id = d->last_id;
    ev.has_id = d->has_id;
    ev.event = d->event.data[0] != '\0' ? d->event.data : "message";
    ev.data = d->data.data;
    ev.data_len = d->data.len - 1;
    rc = fn(arg, &ev, err);
  }
  wr_buf_reset(&d->data);
  wr_buf_reset(&d->event);
  d->has_data = false;
  return rc;
}

/* The id field: digits only (warren's ids are numbers); anything else,
 * or a number that does not fit, is refused. */
static int take_id(struct wr_sse_decoder *d, const char *v, size_t n,
                   wr_error_t *err) {
  uint64_t id = 0;

  if (n == 0 || n > 19)
    return wr_error_setx(err, EPROTO, "event id `%.*s` is not a number",
                         (int)(n > 40 ? 40 : n), v);
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return wr_error_setx(err, EPROTO, "event id `%.*s` is not a number",
                           (int)(n > 40 ? 40 : n), v);
    id = id * 10 + (uint64_t)(v[i] - '0');
  }
  d->last_id = id;
  d->has_id = true;
  return 0;
}

static int field(struct wr_sse_decoder *d, const char *line, size_t len,
                 wr_error_t *err) {
  const char *colon = memchr(line, ':', len);
  size_t nlen = colon ? (size_t)(colon - line) : len;
  const char *v = colon ? colon + 1 : line + len;
  size_t vlen = colon ? len - nlen - 1 : 0;

  if (nlen == 0)
    return 0; /* a comment */
  if (vlen > 0 && *v == ' ') {
    v++;
    vlen--;
  }
  if (nlen == 4 && memcmp(line, "data", 4) == 0) {
    if (d->data.len + vlen + 1 > d->max)
      return wr_error_setx(err, E2BIG, "an event's data exceeds %zu bytes",
                           d->max);
    if (d->has_data)
      wr_buf_append(&d->data, "\n", 1);
    wr_buf_append(&d->data, v, vlen);
    d->has_data = true;
  } else if (nlen == 5 && memcmp(line, "event", 5) == 0) {
    set_buf(&d->event, v, vlen);
  } else if (nlen == 2 && memcmp(line, "id", 2) == 0) {
    if (memchr(v, '\0', vlen) == NULL && take_id(d, v, vlen, err) < 0)
      return -1;
  }
  /* "retry" and unknown fields are ignored, as the spec says. */
  return 0;
}

static int end_line(struct wr_sse_decoder *d, wr_sse_event_fn fn, void *arg,
                    wr_error_t *err) {
  int rc;

  if (d->line.len == 0)
    return dispatch(d, fn, arg, err);
  rc = field(d, d->line.data, d->line.len, err);
  wr_buf_reset(&d->line);
  return rc;
}

int wr_sse_feed(struct wr_sse_decoder *d, const char *data, size_t len,
                wr_sse_event_fn fn, void *arg, wr_error_t *err) {
  for (size_t i = 0; i < len; i++) {
    char c = data[i];
    int rc;

    if (c == '\n' && d->after_cr) { /* the LF of a CRLF */
      d->after_cr = false;
      continue;
    }
    d->after_cr = c == '\r';
    if (c != '\r' && c != '\n') {
      if (d->line.len >= d->max)
        return wr_error_setx(err, E2BIG, "an event line exceeds %zu bytes",
                             d->max);
      wr_buf_append(&d->line, &c, 1);
      continue;
    }
    if ((rc = end_line(d, fn, arg, err)) != 0)
      return rc;
  }
  return 0;
}
