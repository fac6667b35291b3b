/*
 * Request heads sent to the proxy, parsed in place with http-parser.
 *
 * The whole head stays in one buffer that does not move while it is parsed
 * (the connection's first-bytes buffer), so a header name or value that
 * arrives in two reads is simply a longer run of the same buffer, and a
 * second piece that does not continue the first is a folded line.
 *
 * The proxy forwards the request body as framed, so the framing must mean
 * one thing to us and to the upstream: one Content-Length of digits, or one
 * Transfer-Encoding that is exactly "chunked", never both. Two Host lines,
 * a Host that disagrees with the absolute URI, and requests that are
 * neither CONNECT nor absolute-URI are refused too. http-parser 2.9.4
 * already refuses some of these; the rest are checked here, as the API
 * server does (src/api/parse.c).
 *
 * A redirected client (one that ignored the proxy variables) sends what it
 * would send to the server: an origin-form request whose Host header names
 * the destination. Its head goes through the same checks and is forwarded
 * the same way, to the port the client connected to.
 */
#include "net/net_internal.h"

#include <strings.h>

enum { HS_NONE = 0, HS_FIELD, HS_VALUE };

static int refuse(struct wr_proxy_head *h, int status, const char *msg) {
  h->status = status;
  wr_strlcpy(h->error, msg, sizeof(h->error));
  return -1;
}

static uint32_t offset_of(const struct wr_proxy_head *h, const char *at) {
  return (uint32_t)(at - h->base);
}

static bool is_tchar(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
         (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool is_token(const char *s, size_t len) {
  if (len == 0)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!is_tchar((unsigned char)s[i]))
      return false;
  return true;
}

static bool has_newline(const char *from, const char *to) {
  for (; from < to; from++)
    if (*from == '\r' || *from == '\n')
      return true;
  return false;
}

static bool name_is(const struct wr_proxy_head *h,
                    const struct wr_head_field *f, const char *name) {
  return f->name_len == strlen(name) &&
         strncasecmp(h->base + f->name, name, f->name_len) == 0;
}

/* ---- header lines ------------------------------------------------------- */

/* Framing and routing headers must be unambiguous (see the file comment
 * and src/api/framing.c). */
static int check_field(struct wr_proxy_head *h, const struct wr_head_field *f) {
  const char *why =
      wr_http_framing_header(&h->framing, h->base + f->name, f->name_len,
                             h->base + f->value, f->value_len);

  return why != NULL ? refuse(h, 400, why) : 0;
}

/* Values are sent on as they came, so they may hold no control bytes but
 * tabs (http-parser refuses them too; this does not depend on how it was
 * built). */
static bool value_ok(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
      return false;
  }
  return true;
}

static int commit_field(struct wr_proxy_head *h) {
  struct wr_head_field *f = &h->fields[h->nfields];

  while (f->value_len > 0 && (h->base[f->value + f->value_len - 1] == ' ' ||
                              h->base[f->value + f->value_len - 1] == '\t'))
    f->value_len--;
  if (!is_token(h->base + f->name, f->name_len))
    return refuse(h, 400, "invalid header name");
  if (!value_ok(h->base + f->value, f->value_len))
    return refuse(h, 400, "invalid header value");
  if (check_field(h, f) < 0)
    return -1;
  h->nfields++;
  h->hstate = HS_NONE;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  struct wr_proxy_head *h = p->data;

  if (h->url_len == 0)
    h->url = offset_of(h, at);
  else if (offset_of(h, at) != h->url + h->url_len)
    return refuse(h, 400, "malformed request line");
  h->url_len += (uint32_t)len;
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  struct wr_proxy_head *h = p->data;
  struct wr_head_field *f;

  if (h->hstate == HS_VALUE && commit_field(h) < 0)
    return -1;
  if (h->nfields >= WR_HEAD_FIELDS)
    return refuse(h, 431, "too many header lines");
  f = &h->fields[h->nfields];
  if (h->hstate == HS_FIELD) {
    /* Only a name split across two reads continues; anything else is a
     * line without a colon. */
    if (offset_of(h, at) != f->name + f->name_len)
      return refuse(h, 400, "malformed header line");
    f->name_len += (uint32_t)len;
    return 0;
  }
  memset(f, 0, sizeof(*f));
  f->name = offset_of(h, at);
  f->name_len = (uint32_t)len;
  h->hstate = HS_FIELD;
  return 0;
}

/*
 * http-parser joins obsolete folded lines ("Name: a\r\n b") and takes
 * "Name:\r\n value" as "Name: value". Another server may read either
 * differently, so a value that does not continue the previous piece, or
 * that begins after a line break, is refused.
 */
static int on_header_value(http_parser *p, const char *at, size_t len) {
  struct wr_proxy_head *h = p->data;
  struct wr_head_field *f = &h->fields[h->nfields];

  if (h->hstate == HS_NONE)
    return refuse(h, 400, "malformed header line");
  if (h->hstate == HS_VALUE) {
    if (offset_of(h, at) != f->value + f->value_len)
      return refuse(h, 400, "folded header lines are refused");
    f->value_len += (uint32_t)len;
    return 0;
  }
  if (len > 0 && has_newline(h->base + f->name + f->name_len, at))
    return refuse(h, 400, "folded header lines are refused");
  f->value = offset_of(h, at);
  f->value_len = (uint32_t)len;
  h->hstate = HS_VALUE;
  return 0;
}

static int on_headers_complete(http_parser *p) {
  struct wr_proxy_head *h = p->data;

  if (h->hstate == HS_FIELD)
    return refuse(h, 400, "malformed header line");
  if (h->hstate == HS_VALUE && commit_field(h) < 0)
    return -1;
  http_parser_pause(p, 1);
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct wr_proxy_head *h = p->data;

  h->body_done = true;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings head_settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
};

/* After the head only the end of the message matters; trailers of a
 * chunked body are bounded by http-parser itself. */
static const http_parser_settings body_settings = {
    .on_message_complete = on_message_complete,
};

/* ---- what the head asks for --------------------------------------------- */

static const struct wr_head_field *find_field(const struct wr_proxy_head *h,
                                              const char *name) {
  for (size_t i = 0; i < h->nfields; i++)
    if (name_is(h, &h->fields[i], name))
      return &h->fields[i];
  return NULL;
}

static int set_host(struct wr_proxy_head *h, const char *raw) {
  wr_error_t err = {0};

  if (wr_net_normalize_host(raw, h->host, &h->host_is_ip, &h->host_addr, &err) <
      0)
    return refuse(h, 400, err.msg);
  return 0;
}

/* The Host header, split into a normalised name and a port (0: none). */
static int host_header(struct wr_proxy_head *h, char host[WR_HOST_MAX],
                       uint16_t *port) {
  const struct wr_head_field *f = find_field(h, "host");
  _cleanup_free_ char *value = NULL;
  wr_error_t err = {0};

  host[0] = '\0';
  *port = 0;
  if (f == NULL)
    return 0;
  value = xstrndup(h->base + f->value, f->value_len);
  if (wr_net_split_hostport(value, false, host, port, &err) < 0)
    return refuse(h, 400, "invalid Host header");
  return 0;
}

static int connect_target(struct wr_proxy_head *h) {
  _cleanup_free_ char *target = xstrndup(h->base + h->url, h->url_len);
  char host[WR_HOST_MAX];
  wr_error_t err = {0};

  if (wr_net_split_hostport(target, false, host, &h->port, &err) < 0)
    return refuse(h, 400, "invalid CONNECT target");
  if (h->port == 0)
    return refuse(h, 400, "CONNECT needs HOST:PORT");
  h->connect = true;
  return set_host(h, host);
}

/* The Host header, when there is one, must name what the URI names. */
static int host_agrees(struct wr_proxy_head *h) {
  char host[WR_HOST_MAX];
  uint16_t port;

  if (host_header(h, host, &port) < 0)
    return -1;
  if (host[0] == '\0')
    return 0;
  if (strcmp(host, h->host) != 0 || (port ? port : 80) != h->port)
    return refuse(h, 400, "Host header does not match the request URI");
  return 0;
}

/* The path and query of a parsed request target, for the request sent
 * upstream. */
static void take_path(struct wr_proxy_head *h,
                      const struct http_parser_url *u) {
  h->path = h->url + u->field_data[UF_PATH].off;
  h->path_len =
      (u->field_set & (1 << UF_PATH)) ? u->field_data[UF_PATH].len : 0;
  h->query = h->url + u->field_data[UF_QUERY].off;
  h->query_len =
      (u->field_set & (1 << UF_QUERY)) ? u->field_data[UF_QUERY].len : 0;
}

static int absolute_target(struct wr_proxy_head *h) {
  const char *url = h->base + h->url;
  struct http_parser_url u;
  _cleanup_free_ char *host = NULL;

  http_parser_url_init(&u);
  if (h->url_len > 0 && url[0] == '/')
    return refuse(h, 400, "the proxy takes CONNECT or absolute-URI requests");
  if (http_parser_parse_url(url, h->url_len, 0, &u) != 0 ||
      !(u.field_set & (1 << UF_SCHEMA)) || !(u.field_set & (1 << UF_HOST)))
    return refuse(h, 400, "invalid request URI");
  if (u.field_data[UF_SCHEMA].len != 4 ||
      strncasecmp(url + u.field_data[UF_SCHEMA].off, "http", 4) != 0)
    return refuse(h, 400, "only http:// URIs can be proxied; use CONNECT");
  if (u.field_set & (1 << UF_USERINFO))
    return refuse(h, 400, "user information in the request URI");
  if ((u.field_set & (1 << UF_PORT)) && u.port == 0)
    return refuse(h, 400, "invalid port in the request URI");
  h->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
  take_path(h, &u);
  host = xstrndup(url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
  if (set_host(h, host) < 0)
    return -1;
  return host_agrees(h);
}

/* An origin-form target ("/path?query"): what a client that does not
 * know about the proxy sends. */
static int origin_target(struct wr_proxy_head *h) {
  const char *url = h->base + h->url;
  struct http_parser_url u;

  http_parser_url_init(&u);
  if (h->url_len == 0 || url[0] != '/' ||
      http_parser_parse_url(url, h->url_len, 0, &u) != 0 ||
      (u.field_set & ((1 << UF_SCHEMA) | (1 << UF_HOST))))
    return refuse(h, 400, "a redirected request must be in origin form");
  take_path(h, &u);
  return 0;
}

/* A redirected client: the Host header names the destination, which is
 * reached on the port the client connected to (h->port, set at the
 * start); a port in the header changes nothing. */
static int transparent_target(struct wr_proxy_head *h) {
  char host[WR_HOST_MAX];
  uint16_t port;

  if (h->parser.method == HTTP_CONNECT)
    return refuse(h, 400, "CONNECT to a redirected destination");
  if (origin_target(h) < 0 || host_header(h, host, &port) < 0)
    return -1;
  if (host[0] == '\0')
    return refuse(h, 400, "a Host header is required");
  return set_host(h, host);
}

static int interpret(struct wr_proxy_head *h) {
  const http_parser *p = &h->parser;
  const char *why;

  if (p->http_major != 1 || p->http_minor > 1)
    return refuse(h, 400, "unsupported HTTP version");
  why = wr_http_framing_end(&h->framing, p->http_minor == 0);
  if (why != NULL)
    return refuse(h, 400, why);
  if (h->transparent)
    return transparent_target(h);
  if (p->method == HTTP_CONNECT)
    return connect_target(h);
  return absolute_target(h);
}

/* ---- feeding ------------------------------------------------------------ */

void wr_proxy_head_init(struct wr_proxy_head *h, bool transparent,
                        uint16_t port) {
  memset(h, 0, sizeof(*h));
  h->transparent = transparent;
  h->port = transparent ? port : 0;
  http_parser_init(&h->parser, HTTP_REQUEST);
  h->parser.data = h;
}

static int parser_failed(struct wr_proxy_head *h) {
  enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);

  if (h->status != 0)
    return -1;
  if (e == HPE_HEADER_OVERFLOW)
    return refuse(h, 431, "request head is too large");
  return refuse(h, 400, http_errno_description(e));
}

/*
 * The head is complete: the parser stopped on the final LF, which it has
 * not counted yet. Feeding it that byte alone moves it to the body, or to
 * the end of a message that has none (a GET, a CONNECT).
 */
static int head_complete(struct wr_proxy_head *h) {
  h->head_len = h->parsed + 1;
  if (h->head_len > WR_HEAD_MAX)
    return refuse(h, 431, "request head is too large");
  http_parser_pause(&h->parser, 0);
  http_parser_execute(&h->parser, &body_settings, h->base + h->parsed, 1);
  if (HTTP_PARSER_ERRNO(&h->parser) == HPE_PAUSED)
    http_parser_pause(&h->parser, 0);
  else if (HTTP_PARSER_ERRNO(&h->parser) != HPE_OK)
    return parser_failed(h);
  h->parsed = h->head_len;
  if (h->connect || h->parser.method == HTTP_CONNECT)
    h->body_done = true;
  h->done = true;
  return interpret(h) < 0 ? -1 : 1;
}

int wr_proxy_head_feed(struct wr_proxy_head *h, const char *base, size_t len) {
  size_t n;

  if (h->done)
    return 1;
  if (h->status != 0)
    return -1;
  h->base = base;
  n = http_parser_execute(&h->parser, &head_settings, base + h->parsed,
                          len - h->parsed);
  if (HTTP_PARSER_ERRNO(&h->parser) == HPE_PAUSED) {
    h->parsed += n;
    return head_complete(h);
  }
  if (HTTP_PARSER_ERRNO(&h->parser) != HPE_OK)
    return parser_failed(h);
  h->parsed += n;
  if (h->parsed > WR_HEAD_MAX)
    return refuse(h, 431, "request head is too large");
  return 0;
}

int wr_proxy_body_feed(struct wr_proxy_head *h, const char *data, size_t len,
                       size_t *used) {
  size_t n;

  *used = 0;
  if (h->body_done || len == 0)
    return 0;
  n = http_parser_execute(&h->parser, &body_settings, data, len);
  if (HTTP_PARSER_ERRNO(&h->parser) == HPE_PAUSED)
    http_parser_pause(&h->parser, 0);
  else if (HTTP_PARSER_ERRNO(&h->parser) != HPE_OK)
    return -1;
  *used = n;
  return 0;
}

/* ---- the request sent upstream ------------------------------------------ */

/* Whether a Connection header lists name (as one of its tokens). */
static bool connection_lists(const struct wr_proxy_head *h,
                             const struct wr_head_field *f) {
  for (size_t i = 0; i < h->nfields; i++) {
    const struct wr_head_field *c = &h->fields[i];
    const char *s = h->base + c->value, *end = s + c->value_len;

    if (!name_is(h, c, "connection"))
      continue;
    while (s < end) {
      const char *tok;
      while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
        s++;
      tok = s;
      while (s < end && *s != ',' && *s != ' ' && *s != '\t')
        s++;
      if ((size_t)(s - tok) == f->name_len &&
          strncasecmp(tok, h->base + f->name, f->name_len) == 0)
        return true;
    }
  }
  return false;
}

/* Hop-by-hop headers stay here; so does anything addressed to the proxy.
 * The framing headers always go on, whatever Connection lists, since the
 * body is relayed as it was framed. */
static bool dropped(const struct wr_proxy_head *h,
                    const struct wr_head_field *f) {
  static const char *const hop[] = {"connection", "keep-alive", "te",
                                    "trailer",    "upgrade",    "host"};

  if (name_is(h, f, "content-length") || name_is(h, f, "transfer-encoding"))
    return false;
  if (f->name_len >= 6 && strncasecmp(h->base + f->name, "proxy-", 6) == 0)
    return true;
  for (size_t i = 0; i < WR_ARRAY_SIZE(hop); i++)
    if (name_is(h, f, hop[i]))
      return true;
  return connection_lists(h, f);
}

static void put_authority(const struct wr_proxy_head *h, wr_buf_t *out) {
  if (h->host_is_ip && h->host_addr.family == AF_INET6)
    wr_buf_printf(out, "[%s]", h->host);
  else
    wr_buf_puts(out, h->host);
  if (h->port != 80)
    wr_buf_printf(out, ":%u", h->port);
}

void wr_proxy_head_forward(const struct wr_proxy_head *h, wr_buf_t *out) {
  const http_parser *p = &h->parser;

  wr_buf_printf(out, "%s ", http_method_str((enum http_method)p->method));
  if (h->path_len > 0)
    wr_buf_append(out, h->base + h->path, h->path_len);
  else
    wr_buf_puts(out, "/");
  if (h->query_len > 0) {
    wr_buf_puts(out, "?");
    wr_buf_append(out, h->base + h->query, h->query_len);
  }
  wr_buf_printf(out, " HTTP/1.%u\r\nHost: ", p->http_minor);
  put_authority(h, out);
  wr_buf_puts(out, "\r\n");
  for (size_t i = 0; i < h->nfields; i++) {
    const struct wr_head_field *f = &h->fields[i];
    if (dropped(h, f))
      continue;
    wr_buf_append(out, h->base + f->name, f->name_len);
    wr_buf_puts(out, ": ");
    wr_buf_append(out, h->base + f->value, f->value_len);
    wr_buf_puts(out, "\r\n");
  }
  wr_buf_puts(out, "Connection: close\r\n\r\n");
}
