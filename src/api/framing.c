/*
 * Message framing that two HTTP parsers could read differently, judged
 * the same way everywhere warren parses a request: the API server, the
 * egress proxy and TLS interception. A request whose body length another
 * hop could compute differently (request smuggling) is refused, never
 * guessed at.
 */
#include "api/api.h"

#include <strings.h>

static bool is(const char *s, size_t len, const char *word) {
  return len == strlen(word) && strncasecmp(s, word, len) == 0;
}

/* 1 to 18 digits: longer ones could overflow the 64-bit lengths that
 * parsers keep. */
static bool length_ok(const char *s, size_t len) {
  if (len == 0 || len > 18)
    return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

const char *wr_http_framing_header(struct wr_http_framing *f, const char *name,
                                   size_t name_len, const char *value,
                                   size_t value_len) {
  if (is(name, name_len, "content-length")) {
    if (++f->content_length > 1)
      return "more than one Content-Length";
    return length_ok(value, value_len) ? NULL : "invalid Content-Length";
  }
  if (is(name, name_len, "transfer-encoding")) {
    if (++f->transfer_encoding > 1 || !is(value, value_len, "chunked"))
      return "unsupported Transfer-Encoding (only chunked)";
    return NULL;
  }
  if (is(name, name_len, "host") && ++f->host > 1)
    return "more than one Host header";
  return NULL;
}

const char *wr_http_framing_end(const struct wr_http_framing *f, bool http10) {
  if (f->content_length > 0 && f->transfer_encoding > 0)
    return "both Content-Length and Transfer-Encoding";
  if (f->transfer_encoding > 0 && http10)
    return "Transfer-Encoding is not allowed in HTTP/1.0";
  return NULL;
}
