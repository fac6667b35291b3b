/*
 * Requests that may wait in warrend's line for a free sandbox (create,
 * start, resume): they ask for the streamed form, print their place in
 * line on stderr while they wait ("waiting for a free sandbox, #2 in
 * line", updated in place on a terminal, one line per change otherwise)
 * and end with the API's answer, which is the last line of the stream or
 * a whole reply when there was no wait.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <unistd.h>

struct in_line {
  json_t *result; /* the final object */
  bool tty, shown;
  bool api_error; /* the last line was the API's error */
};

/* After a wait, warrend may have gone: say that asking again may work. */
static int lost(wr_error_t *err) {
  return wr_error_setx(err, EAGAIN,
                       "lost the connection to warrend while waiting for a "
                       "free sandbox: it can be retried");
}

static void show_position(struct in_line *w, json_int_t pos) {
  if (w->tty)
    fprintf(stderr, "\r\033[Kwaiting for a free sandbox, #%lld in line",
            (long long)pos);
  else
    fprintf(stderr, "waiting for a free sandbox, #%lld in line\n",
            (long long)pos);
  fflush(stderr);
  w->shown = true;
}

static int api_error_of(const json_t *ev, wr_error_t *err) {
  const json_t *e = json_object_get(ev, "error");
  const char *code = wr_cli_jstr(e, "code"), *msg = wr_cli_jstr(e, "message");

  if (strcmp(code, "queue_timeout") == 0)
    return wr_error_setx(err, ETIMEDOUT, "%s (it can be retried)", msg);
  return wr_error_set(err, 0, "%s", msg[0] ? msg : "error from warrend");
}

static int on_line(json_t *ev, void *arg, wr_error_t *err) {
  struct in_line *w = arg;
  const json_t *q = json_object_get(ev, "queued");

  if (q != NULL) {
    show_position(w, json_integer_value(json_object_get(q, "position")));
    return 0;
  }
  if (json_is_object(json_object_get(ev, "error"))) {
    w->api_error = true;
    return api_error_of(ev, err);
  }
  w->result = json_incref(ev);
  return 1;
}

/* A whole reply: the answer at once, or an error (a queue_timeout among
 * them, for a request that waited without a stream). */
static int whole_reply(wr_http_client_t *c, struct wr_http_response *resp,
                       json_t **out, wr_error_t *err) {
  _cleanup_json_ json_t *j = NULL;
  char chunk[4096];
  ssize_t n = 0;

  while (resp->body.len < (1u << 20) &&
         (n = wr_http_read_body(c, chunk, sizeof(chunk), err)) > 0)
    wr_buf_append(&resp->body, chunk, (size_t)n);
  if (n < 0)
    return lost(err);
  if (resp->body.len > 0)
    j = json_loadb(resp->body.data, resp->body.len, 0, NULL);
  if (resp->status >= 200 && resp->status <= 299) {
    if (j == NULL)
      return wr_error_set(err, 0, "invalid reply from warrend");
    *out = steal_ptr(&j);
    return 0;
  }
  if (json_is_object(json_object_get(j, "error")))
    return api_error_of(j, err);
  return wr_cli_stream_error(c, resp, err);
}

int wr_cli_call_in_line(const struct wr_cli_ctx *ctx, const char *method,
                        const char *path, const json_t *body,
                        uint64_t queue_timeout_s, json_t **out,
                        wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *data = body ? wr_json_dumps(body) : NULL;
  _cleanup_free_ char *full = NULL;
  struct in_line w = {.tty = isatty(STDERR_FILENO)};
  int r;

  full = queue_timeout_s > 0 ? xasprintf("%s%cstream=true&queue_timeout=%llu",
                                         path, strchr(path, '?') ? '&' : '?',
                                         (unsigned long long)queue_timeout_s)
                             : xasprintf("%s%cstream=true", path,
                                         strchr(path, '?') ? '&' : '?');
  *out = NULL;
  if (wr_cli_connect(ctx, &c, err) < 0)
    return -1;
  if (wr_http_request_stream(c, method, full, data ? "application/json" : NULL,
                             data, data ? strlen(data) : 0, &resp, err) < 0)
    return lost(err);
  if (resp.content_type == NULL ||
      !wr_str_has_prefix(resp.content_type, "application/x-ndjson"))
    return whole_reply(c, &resp, out, err);
  r = wr_cli_ndjson_read(c, on_line, &w, err);
  if (w.shown && w.tty)
    fputs("\r\033[K", stderr);
  if (r < 0 && w.api_error)
    return -1;
  if (w.result == NULL) /* cut off: warrend went away */
    return lost(err);
  *out = w.result;
  return 0;
}

/* ---- start and resume ------------------------------------------------------
 */

struct limited {
  const char *suffix;
  uint64_t queue_timeout_s;
};

static int limited_one(const struct wr_cli_ctx *ctx, const char *name,
                       void *arg, wr_error_t *err) {
  const struct limited *a = arg;
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, a->suffix);
  _cleanup_json_ json_t *sb = NULL;

  return wr_cli_call_in_line(ctx, "POST", path, NULL, a->queue_timeout_s, &sb,
                             err);
}

int wr_cli_parse_queue_timeout(const char *arg, uint64_t *out,
                               wr_error_t *err) {
  uint64_t ms;

  if (wr_parse_duration_ms(arg, &ms, err) < 0)
    return wr_error_wrap(err, "--queue-timeout");
  if (ms % 1000 != 0 || ms < 1000 || ms > 3600 * 1000)
    return wr_error_set(err, 0,
                        "--queue-timeout takes whole seconds from 1 to 3600 "
                        "(like 30, 5m), not `%s`",
                        arg);
  *out = ms / 1000;
  return 0;
}

int wr_cli_limited_action(const struct wr_cli_ctx *ctx, int argc, char **argv,
                          const char *cmd, const char *help,
                          const char *suffix) {
  static const struct option longopts[] = {
      {"queue-timeout", required_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  struct limited a = {.suffix = suffix};
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage(cmd, &err);
    if (c == 'h')
      return wr_cli_help(help);
    if (wr_cli_parse_queue_timeout(optarg, &a.queue_timeout_s, &err) < 0)
      return wr_cli_usage(cmd, &err);
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more sandbox names");
    return wr_cli_usage(cmd, &err);
  }
  return wr_cli_each(ctx, argv + optind, (size_t)(argc - optind), limited_one,
                     &a);
}
