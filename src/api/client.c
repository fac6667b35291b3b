/*
 * The blocking HTTP/1.1 client used by the CLI, tests and benchmarks.
 *
 * One request at a time on one connection, kept alive between requests
 * and reopened when the server closed it. Responses are parsed with
 * http-parser: its callbacks collect the status, Content-Type and body
 * bytes, and the parser pauses at the end of each message so that bytes
 * after it (the raw stream after a 101) stay in `in`.
 */
#include "api/api_internal.h"

#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#define MAX_RESPONSE_HEAD (1024 * 1024)

struct wr_http_client {
  char *address;
  char *api_key;
  char *host; /* for the Host header */
  int fd;
  http_parser parser;
  wr_buf_t in;   /* read, not yet parsed */
  wr_buf_t body; /* decoded body bytes not yet handed out */
  wr_buf_t field, value;
  size_t head_bytes;
  struct wr_http_response *resp;
  bool in_value;
  bool head_done;
  bool done;
  bool interim; /* a 1xx response before the real one */
  bool active;  /* a response is being read */
  bool upgraded;
  bool head_request;
  uint64_t deadline_ns; /* wr_mono_ns() past which a read fails; 0: none */
};

/* ---- connecting --------------------------------------------------------- */

static int connect_unix(const char *path, wr_error_t *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  _cleanup_close_ int fd = -1;

  if (wr_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) < 0)
    return wr_error_set(err, 0, "socket path `%s` is too long", path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return wr_error_set(err, errno, "socket");
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
    return wr_error_set(err, errno, "connect to `%s`", path);
  return steal_fd(&fd);
}

/* "host:port" or "[v6]:port" into its two parts (host copied). */
static int split_host_port(const char *s, char **host, const char **port,
                           wr_error_t *err) {
  const char *colon = strrchr(s, ':');

  if (colon == NULL || colon[1] == '\0')
    return wr_error_set(err, 0, "invalid address `%s` (HOST:PORT)", s);
  if (s[0] == '[') {
    if (colon == s || colon[-1] != ']')
      return wr_error_set(err, 0, "invalid address `%s`", s);
    *host = xstrndup(s + 1, (size_t)(colon - s - 2));
  } else {
    *host = xstrndup(s, (size_t)(colon - s));
  }
  *port = colon + 1;
  return 0;
}

static int connect_tcp(const char *hostport, wr_error_t *err) {
  _cleanup_free_ char *host = NULL;
  const char *port = NULL;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int fd = -1, r, e = 0;

  if (split_host_port(hostport, &host, &port, err) < 0)
    return -1;
  r = getaddrinfo(host, port, &hints, &res);
  if (r != 0)
    return wr_error_set(err, 0, "resolve `%s`: %s", host, gai_strerror(r));
  for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
      e = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    return wr_error_set(err, e, "connect to %s", hostport);
  return fd;
}

static int connect_address(const char *address, wr_error_t *err) {
  if (wr_str_has_prefix(address, "tcp://"))
    return connect_tcp(address + 6, err);
  if (wr_str_has_prefix(address, "unix:"))
    return connect_unix(address + 5, err);
  if (strstr(address, "://") != NULL)
    return wr_error_set(err, 0, "unsupported address `%s`", address);
  return connect_unix(address, err);
}

int wr_http_client_open(const char *address, const char *api_key,
                        wr_http_client_t **out, wr_error_t *err) {
  wr_http_client_t *c;
  int fd = connect_address(address, err);

  if (fd < 0)
    return -1;
  c = xcalloc(1, sizeof(*c));
  c->fd = fd;
  c->address = xstrdup(address);
  c->api_key = api_key ? xstrdup(api_key) : NULL;
  c->host = wr_str_has_prefix(address, "tcp://") ? xstrdup(address + 6)
                                                 : xstrdup("localhost");
  c->parser.data = c;
  *out = c;
  return 0;
}

void wr_http_client_set_deadline(wr_http_client_t *c, uint64_t deadline_ns) {
  c->deadline_ns = deadline_ns;
}

static void drop_connection(wr_http_client_t *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  c->active = false;
  wr_buf_reset(&c->in);
  wr_buf_reset(&c->body);
}

void wr_http_client_close(wr_http_client_t *c) {
  if (c == NULL)
    return;
  drop_connection(c);
  wr_buf_free(&c->in);
  wr_buf_free(&c->body);
  wr_buf_free(&c->field);
  wr_buf_free(&c->value);
  free(c->address);
  free(c->api_key);
  free(c->host);
  free(c);
}

/* ---- parsing responses -------------------------------------------------- */

static wr_http_client_t *client_of(http_parser *p) {
  return p->data;
}

static int bounded_append(wr_http_client_t *c, wr_buf_t *b, const char *at,
                          size_t len) {
  c->head_bytes += len;
  if (c->head_bytes > MAX_RESPONSE_HEAD)
    return -1;
  wr_buf_append(b, at, len);
  return 0;
}

static void commit_header(wr_http_client_t *c) {
  const char *value = c->value.data ? c->value.data : "";

  if (c->field.len > 0 && strcasecmp(c->field.data, "content-type") == 0) {
    free(c->resp->content_type);
    c->resp->content_type = xstrdup(value);
  }
  if (c->field.len > 0) {
    wr_buf_append(&c->resp->headers, c->field.data, c->field.len + 1);
    wr_buf_append(&c->resp->headers, value, strlen(value) + 1);
  }
  wr_buf_reset(&c->field);
  wr_buf_reset(&c->value);
  c->in_value = false;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  wr_http_client_t *c = client_of(p);

  if (c->in_value)
    commit_header(c);
  return bounded_append(c, &c->field, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  wr_http_client_t *c = client_of(p);

  c->in_value = true;
  return bounded_append(c, &c->value, at, len);
}

static int on_headers_complete(http_parser *p) {
  wr_http_client_t *c = client_of(p);

  if (c->in_value)
    commit_header(c);
  c->resp->status = p->status_code;
  c->interim = p->status_code / 100 == 1 && p->status_code != 101;
  c->head_done = !c->interim;
  return c->head_request ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  wr_buf_append(&client_of(p)->body, at, len);
  return 0;
}

static int on_message_complete(http_parser *p) {
  wr_http_client_t *c = client_of(p);

  if (c->interim) {
    c->interim = false;
    return 0;
  }
  c->done = true;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static int pump(wr_http_client_t *c, const char *data, size_t len,
                wr_error_t *err) {
  size_t n = http_parser_execute(&c->parser, &settings, data, len);
  enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);

  if (e == HPE_PAUSED)
    http_parser_pause(&c->parser, 0);
  else if (e != HPE_OK)
    return wr_error_set(err, 0, "invalid response from the server: %s",
                        http_errno_description(e));
  if (data != NULL)
    wr_buf_consume(&c->in, n);
  return 0;
}

/* Wait until the socket is readable or the deadline has passed. */
static int wait_readable(wr_http_client_t *c, wr_error_t *err) {
  struct pollfd pfd = {c->fd, POLLIN, 0};
  uint64_t now;
  int r;

  if (c->deadline_ns == 0)
    return 0;
  do {
    now = wr_mono_ns();
    if (now >= c->deadline_ns)
      return wr_error_set(err, ETIMEDOUT, "read from the server");
    r = poll(&pfd, 1, (int)WR_MIN((c->deadline_ns - now) / 1000000 + 1, 60000));
  } while (r == 0 || (r < 0 && errno == EINTR));
  return r < 0 ? wr_error_set(err, errno, "poll") : 0;
}

/* Parse what is buffered, or read more; EOF ends a body that runs to the
 * end of the connection, and is an error anywhere else. */
static int advance(wr_http_client_t *c, wr_error_t *err) {
  char buf[WR_HTTP_READ_SIZE];
  ssize_t n;

  if (c->in.len > 0)
    return pump(c, c->in.data, c->in.len, err);
  if (wait_readable(c, err) < 0)
    return -1;
  do
    n = recv(c->fd, buf, sizeof(buf), 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return wr_error_set(err, errno, "read from the server");
  if (n > 0) {
    wr_buf_append(&c->in, buf, (size_t)n);
    return pump(c, c->in.data, c->in.len, err);
  }
  if (pump(c, NULL, 0, err) < 0)
    return -1;
  if (!c->done)
    return wr_error_set(err, 0, "the server closed the connection");
  return 0;
}

static int read_head(wr_http_client_t *c, wr_error_t *err) {
  while (!c->head_done)
    if (advance(c, err) < 0) {
      drop_connection(c);
      return -1;
    }
  return 0;
}

/* The response is complete: keep the connection for the next request, or
 * close it if the server said so. */
static void end_response(wr_http_client_t *c) {
  c->active = false;
  if (c->upgraded)
    return;
  if (!http_should_keep_alive(&c->parser))
    drop_connection(c);
}

ssize_t wr_http_read_body(wr_http_client_t *c, char *buf, size_t size,
                          wr_error_t *err) {
  while (c->active) {
    if (c->body.len > 0) {
      size_t n = WR_MIN(size, c->body.len);
      memcpy(buf, c->body.data, n);
      wr_buf_consume(&c->body, n);
      return (ssize_t)n;
    }
    if (c->done)
      break;
    if (advance(c, err) < 0) {
      drop_connection(c);
      return -1;
    }
  }
  end_response(c);
  return 0;
}

/* ---- sending requests --------------------------------------------------- */

static int send_all(wr_http_client_t *c, const char *data, size_t len,
                    wr_error_t *err) {
  while (len > 0) {
    ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return wr_error_set(err, errno, "send to the server");
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

static bool safe_text(const char *s, bool allow_space) {
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch < 0x20 || ch == 0x7f || (ch == ' ' && !allow_space))
      return false;
  }
  return true;
}

static int check_request(const char *method, const char *path,
                         const char *content_type, wr_error_t *err) {
  if (!wr_api_is_token(method, strlen(method)))
    return wr_error_set(err, 0, "invalid method `%s`", method);
  if (path[0] != '/' || !safe_text(path, false))
    return wr_error_set(err, 0, "invalid request path `%s`", path);
  if (content_type != NULL && !safe_text(content_type, true))
    return wr_error_set(err, 0, "invalid content type");
  return 0;
}

/* Finish any earlier response, reconnect if needed, reset the parser. */
static int prepare(wr_http_client_t *c, struct wr_http_response *resp,
                   wr_error_t *err) {
  char scratch[4096];

  if (c->upgraded)
    return wr_error_set(err, 0, "the connection was upgraded");
  while (c->active)
    if (wr_http_read_body(c, scratch, sizeof(scratch), err) < 0)
      drop_connection(c);
  if (c->fd < 0) {
    c->fd = connect_address(c->address, err);
    if (c->fd < 0)
      return -1;
  }
  http_parser_init(&c->parser, HTTP_RESPONSE);
  wr_buf_reset(&c->in);
  wr_buf_reset(&c->body);
  c->head_bytes = 0;
  c->in_value = c->head_done = c->done = c->interim = false;
  memset(resp, 0, sizeof(*resp));
  c->resp = resp;
  return 0;
}

static void put_head(const wr_http_client_t *c, wr_buf_t *b, const char *method,
                     const char *path, const char *content_type,
                     const char *extra) {
  wr_buf_printf(b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, c->host);
  wr_buf_puts(b, "User-Agent: warren/" WR_VERSION "\r\n");
  if (c->api_key != NULL)
    wr_buf_printf(b, "Authorization: Bearer %s\r\n", c->api_key);
  if (content_type != NULL)
    wr_buf_printf(b, "Content-Type: %s\r\n", content_type);
  if (extra != NULL)
    wr_buf_puts(b, extra);
  wr_buf_puts(b, "\r\n");
}

/* Read the response head after sending; when that fails too, the
 * sending error is the one worth reporting. */
static int finish_exchange(wr_http_client_t *c, struct wr_http_response *resp,
                           const wr_error_t *send_err, wr_error_t *err) {
  if (read_head(c, err) == 0)
    return 0;
  if (send_err->msg[0] != '\0' && err != NULL)
    *err = *send_err;
  wr_http_response_free(resp);
  return -1;
}

static bool sends_length(const char *method, const void *body) {
  return body != NULL || strcmp(method, "POST") == 0 ||
         strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
}

/*
 * Send head and body, then read the response head. A server may answer
 * and close before reading a body it refuses (413): a failed send is then
 * forgiven if a response can still be read.
 */
static int exchange(wr_http_client_t *c, const char *method, const char *path,
                    const char *content_type, const char *extra,
                    const void *body, size_t len, struct wr_http_response *resp,
                    wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t head = {0};
  _cleanup_free_ char *framing = NULL;
  wr_error_t send_err = {0};

  if (check_request(method, path, content_type, err) < 0 ||
      prepare(c, resp, err) < 0)
    return -1;
  if (sends_length(method, body))
    framing = xasprintf("%sContent-Length: %zu\r\n", extra ? extra : "", len);
  put_head(c, &head, method, path, content_type, framing ? framing : extra);
  c->head_request = strcmp(method, "HEAD") == 0;
  c->active = true;
  if (send_all(c, head.data, head.len, &send_err) == 0 && len > 0)
    send_all(c, body, len, &send_err);
  return finish_exchange(c, resp, &send_err, err);
}

int wr_http_request_stream(wr_http_client_t *c, const char *method,
                           const char *path_and_query, const char *content_type,
                           const void *body, size_t body_len,
                           struct wr_http_response *resp, wr_error_t *err) {
  return exchange(c, method, path_and_query, content_type, NULL, body, body_len,
                  resp, err);
}

static int read_whole_body(wr_http_client_t *c, struct wr_http_response *resp,
                           wr_error_t *err) {
  char buf[WR_HTTP_READ_SIZE];
  ssize_t n;

  while ((n = wr_http_read_body(c, buf, sizeof(buf), err)) > 0)
    wr_buf_append(&resp->body, buf, (size_t)n);
  return n < 0 ? -1 : 0;
}

int wr_http_request(wr_http_client_t *c, const char *method,
                    const char *path_and_query, const char *content_type,
                    const void *body, size_t body_len,
                    struct wr_http_response *resp, wr_error_t *err) {
  if (wr_http_request_stream(c, method, path_and_query, content_type, body,
                             body_len, resp, err) < 0)
    return -1;
  if (read_whole_body(c, resp, err) < 0) {
    wr_http_response_free(resp);
    return -1;
  }
  return 0;
}

/* Send the body as chunks from the producer; false when sending failed
 * (the response may still say why). */
static int send_chunks(wr_http_client_t *c,
                       ssize_t (*producer)(void *arg, char *buf, size_t size),
                       void *arg, wr_error_t *err) {
  char buf[WR_HTTP_READ_SIZE];
  wr_buf_t chunk = {0};
  int r = 0;

  for (;;) {
    ssize_t n = producer(arg, buf, sizeof(buf));
    if (n < 0) {
      r = wr_error_set(err, 0, "upload: reading the data failed");
      break;
    }
    wr_buf_reset(&chunk);
    wr_buf_printf(&chunk, "%zx\r\n", (size_t)n);
    wr_buf_append(&chunk, buf, (size_t)n);
    wr_buf_puts(&chunk, "\r\n");
    if ((r = send_all(c, chunk.data, chunk.len, err)) < 0 || n == 0)
      break;
  }
  wr_buf_free(&chunk);
  return r;
}

int wr_http_request_upload(wr_http_client_t *c, const char *method,
                           const char *path_and_query, const char *content_type,
                           ssize_t (*producer)(void *arg, char *buf,
                                               size_t size),
                           void *arg, struct wr_http_response *resp,
                           wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t head = {0};
  wr_error_t send_err = {0};

  if (check_request(method, path_and_query, content_type, err) < 0 ||
      prepare(c, resp, err) < 0)
    return -1;
  put_head(c, &head, method, path_and_query, content_type,
           "Transfer-Encoding: chunked\r\n");
  c->head_request = false;
  c->active = true;
  if (send_all(c, head.data, head.len, &send_err) == 0 &&
      send_chunks(c, producer, arg, &send_err) < 0 && send_err.code == 0) {
    /* The producer failed: the request cannot be completed. */
    drop_connection(c);
    if (err != NULL)
      *err = send_err;
    return -1;
  }
  return finish_exchange(c, resp, &send_err, err);
}

/* ---- upgrades ----------------------------------------------------------- */

int wr_http_request_upgrade(wr_http_client_t *c, const char *method,
                            const char *path_and_query, const char *protocol,
                            const void *body, size_t body_len,
                            struct wr_http_response *resp, int *raw_fd,
                            wr_error_t *err) {
  _cleanup_free_ char *extra = NULL;

  *raw_fd = -1;
  if (!wr_api_is_token(protocol, strlen(protocol)))
    return wr_error_set(err, 0, "invalid protocol `%s`", protocol);
  extra = xasprintf("Connection: Upgrade\r\nUpgrade: %s\r\n", protocol);
  if (exchange(c, method, path_and_query, NULL, extra, body, body_len, resp,
               err) < 0)
    return -1;
  if (resp->status != 101)
    return read_whole_body(c, resp, err);
  while (!c->done)
    if (advance(c, err) < 0) {
      drop_connection(c);
      return -1;
    }
  if (!c->parser.upgrade) {
    drop_connection(c);
    return wr_error_set(err, 0, "the server did not switch protocols");
  }
  c->upgraded = true;
  c->active = false;
  *raw_fd = c->fd;
  return 0;
}

size_t wr_http_client_leftover(wr_http_client_t *c, char *buf, size_t size) {
  size_t n;

  if (!c->upgraded)
    return 0;
  n = WR_MIN(size, c->in.len);
  if (n > 0) {
    memcpy(buf, c->in.data, n);
    wr_buf_consume(&c->in, n);
  }
  return n;
}

/* ---- responses ---------------------------------------------------------- */

void wr_http_response_free(struct wr_http_response *resp) {
  free(resp->content_type);
  resp->content_type = NULL;
  wr_buf_free(&resp->body);
  wr_buf_free(&resp->headers);
}

const char *wr_http_response_header(const struct wr_http_response *resp,
                                    const char *name) {
  const char *p = resp->headers.data;
  const char *end = p + resp->headers.len;

  while (p != NULL && p < end) {
    const char *value = p + strlen(p) + 1;

    if (value >= end)
      break;
    if (strcasecmp(p, name) == 0)
      return value;
    p = value + strlen(value) + 1;
  }
  return NULL;
}

char *wr_http_error_message(const struct wr_http_response *resp) {
  _cleanup_json_ json_t *j = NULL;
  json_t *msg;

  if (resp->body.len > 0)
    j = json_loadb(resp->body.data, resp->body.len, 0, NULL);
  msg = json_object_get(json_object_get(j, "error"), "message");
  if (json_is_string(msg))
    return xstrdup(json_string_value(msg));
  return xasprintf("HTTP %d %s", resp->status, wr_api_reason(resp->status));
}
