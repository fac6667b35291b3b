/*
 * Talking to warrend through the api module's blocking client: connecting
 * with a friendly error, one-shot JSON calls, streamed NDJSON bodies, and
 * the loop over several sandbox names that the lifecycle commands share.
 *
 * Each call opens its own connection: a unix socket connect costs a few
 * microseconds, and no call can then be confused by what an earlier one
 * left unread.
 */
#include "cli/cli.h"

#include <jansson.h>

#define MAX_NDJSON_LINE (64u << 20)

void wr_cli_client_closep(wr_http_client_t **c) {
  if (*c != NULL)
    wr_http_client_close(*c);
}

void wr_cli_responsep(struct wr_http_response *r) {
  wr_http_response_free(r);
}

/* The errors that mean "nobody listens there". */
static bool unreachable(int code) {
  return code == ENOENT || code == ECONNREFUSED || code == ENOTDIR ||
         code == EHOSTUNREACH || code == ENETUNREACH || code == ENOTSOCK;
}

/* Rewrite a transport error so that it says where we tried to go. */
static int reach_error(const struct wr_cli_ctx *ctx, wr_error_t *err) {
  if (unreachable(err->code))
    return wr_error_set(err, 0,
                        "cannot reach warrend at %s (is `warren daemon` "
                        "running?)",
                        ctx->host);
  return wr_error_wrap(err, "warrend at %s", ctx->host);
}

/* A tcp:// address without a key would only earn a 401; say so up front. */
int wr_cli_connect(const struct wr_cli_ctx *ctx, wr_http_client_t **out,
                   wr_error_t *err) {
  if (wr_str_has_prefix(ctx->host, "tcp://") &&
      (ctx->api_key == NULL || *ctx->api_key == '\0'))
    return wr_error_set(err, 0,
                        "an API key is needed for %s (use --api-key or "
                        "WARREN_API_KEY)",
                        ctx->host);
  if (wr_http_client_open(ctx->host, ctx->api_key, out, err) < 0)
    return reach_error(ctx, err);
  return 0;
}

/* Turn a non-2xx response into the API's own message. */
static int api_error(const struct wr_http_response *resp, wr_error_t *err) {
  _cleanup_free_ char *msg = wr_http_error_message(resp);

  return wr_error_set(err, 0, "%s", msg);
}

/* Parse a reply body; an empty body is NULL. */
static int parse_reply(const struct wr_http_response *resp, json_t **out,
                       wr_error_t *err) {
  json_error_t jerr;

  *out = NULL;
  if (resp->body.len == 0)
    return 0;
  *out = json_loadb(resp->body.data, resp->body.len, 0, &jerr);
  if (*out == NULL)
    return wr_error_set(err, 0, "invalid reply from warrend: %s", jerr.text);
  return 0;
}

/* The common case: a whole JSON request and reply on a fresh connection. */
int wr_cli_call(const struct wr_cli_ctx *ctx, const char *method,
                const char *path, const json_t *body, json_t **out, int *status,
                wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *data = NULL;
  size_t len = 0;

  if (wr_cli_connect(ctx, &c, err) < 0)
    return -1;
  if (body != NULL) {
    data = wr_json_dumps(body);
    len = strlen(data);
  }
  if (wr_http_request(c, method, path, body ? "application/json" : NULL, data,
                      len, &resp, err) < 0)
    return reach_error(ctx, err);
  if (status != NULL)
    *status = resp.status;
  if (resp.status < 200 || resp.status > 299)
    return api_error(&resp, err);
  if (out != NULL)
    return parse_reply(&resp, out, err);
  return 0;
}

/* The body of an error reply is small; it is read (bounded) only to
 * extract its message. */
int wr_cli_stream_error(wr_http_client_t *c, struct wr_http_response *resp,
                        wr_error_t *err) {
  char chunk[4096];
  ssize_t n;

  while (resp->body.len < (1u << 20) &&
         (n = wr_http_read_body(c, chunk, sizeof(chunk), NULL)) > 0)
    wr_buf_append(&resp->body, chunk, (size_t)n);
  return api_error(resp, err);
}

/* The code decides exec's exit status (127, 126, 125); a body that is not
 * an API error simply has none. */
char *wr_cli_error_code(const struct wr_http_response *resp) {
  _cleanup_json_ json_t *j = NULL;
  const char *code;

  if (resp->body.len > 0)
    j = json_loadb(resp->body.data, resp->body.len, 0, NULL);
  code =
      json_string_value(json_object_get(json_object_get(j, "error"), "code"));
  return xstrdup(code ? code : "");
}

/* Names and paths go into URLs; everything but the unreserved characters
 * is escaped, '/' included, and the server decodes it back. */
char *wr_cli_escape(const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  wr_buf_t b;

  wr_buf_init(&b);
  wr_buf_reserve(&b, strlen(s));
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
        (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL) {
      wr_buf_append(&b, p, 1);
    } else {
      char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      wr_buf_append(&b, esc, 3);
    }
  }
  return wr_buf_steal(&b, NULL);
}

char *wr_cli_sandbox_path(const char *name, const char *suffix) {
  _cleanup_free_ char *esc = wr_cli_escape(name);

  return xasprintf("/v1/sandboxes/%s%s", esc, suffix ? suffix : "");
}

/* Parse one NDJSON line and hand it to fn. */
static int ndjson_line(const char *line, size_t len, wr_cli_ndjson_fn fn,
                       void *arg, wr_error_t *err) {
  _cleanup_json_ json_t *event = NULL;
  json_error_t jerr;

  if (len == 0)
    return 0;
  event = json_loadb(line, len, 0, &jerr);
  if (!json_is_object(event))
    return wr_error_set(err, 0, "invalid event from warrend: %s",
                        event ? "not an object" : jerr.text);
  return fn(event, arg, err);
}

/* Hand every complete line in buf to fn and drop it. */
static int ndjson_lines(wr_buf_t *buf, wr_cli_ndjson_fn fn, void *arg,
                        wr_error_t *err) {
  char *nl;

  while (buf->len > 0 && (nl = memchr(buf->data, '\n', buf->len)) != NULL) {
    size_t len = (size_t)(nl - buf->data);
    int r = ndjson_line(buf->data, len, fn, arg, err);
    wr_buf_consume(buf, len + 1);
    if (r != 0)
      return r;
  }
  if (buf->len > MAX_NDJSON_LINE)
    return wr_error_set(err, 0, "event from warrend is too large");
  return 0;
}

/* Chunks from the client split lines anywhere, so bytes are kept until a
 * newline; a last line without one still counts. */
int wr_cli_ndjson_read(wr_http_client_t *c, wr_cli_ndjson_fn fn, void *arg,
                       wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t buf = {0};
  char chunk[65536];
  ssize_t n;
  int r;

  while ((n = wr_http_read_body(c, chunk, sizeof(chunk), err)) > 0) {
    wr_buf_append(&buf, chunk, (size_t)n);
    if ((r = ndjson_lines(&buf, fn, arg, err)) != 0)
      return r < 0 ? -1 : 0;
  }
  if (n < 0)
    return wr_error_wrap(err, "read from warrend");
  r = ndjson_line(buf.data, buf.len, fn, arg, err);
  return r < 0 ? -1 : 0;
}

/* A failure on one name must not keep the others from being handled. */
int wr_cli_each(const struct wr_cli_ctx *ctx, char *const *names, size_t n,
                wr_cli_each_fn fn, void *arg) {
  int rc = WR_CLI_EXIT_OK;

  for (size_t i = 0; i < n; i++) {
    wr_error_t err = {0};
    if (fn(ctx, names[i], arg, &err) < 0) {
      wr_cli_fail(0, "%s", err.msg);
      rc = WR_CLI_EXIT_ERROR;
      continue;
    }
    printf("%s\n", names[i]);
    fflush(stdout);
  }
  return rc;
}
