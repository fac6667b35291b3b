/*
 * `warren logs`: a background process's output, read from the NDJSON
 * output stream and written back to stdout and stderr as it was.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren logs [-f] NAME TAG\n"
    "\n"
    "Print the output a background process has kept (the last 1 MiB),\n"
    "its stdout to stdout and its stderr to stderr. With -f, keep\n"
    "printing new output until the process exits.\n"
    "\n"
    "Options:\n"
    "  -f, --follow  follow the output until the process exits\n"
    "  -h, --help    show this help\n"
    "\n"
    "Example:\n"
    "  warren exec -d --tag build web -- make\n"
    "  warren logs -f web build\n";

static const struct option longopts[] = {
    {"follow", no_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One event: output goes out decoded; the exit event ends the stream.
 * A closed stdout ends it quietly, as it would end `cat`. */
static int on_event(json_t *event, void *arg, wr_error_t *err) {
  const char *type = wr_cli_jstr(event, "type");
  const char *data = wr_cli_jstr(event, "data");
  _cleanup_(wr_buf_free) wr_buf_t bytes = {0};
  int fd;

  (void)arg;
  if (strcmp(type, "exit") == 0)
    return 1;
  if (strcmp(type, "stdout") == 0)
    fd = STDOUT_FILENO;
  else if (strcmp(type, "stderr") == 0)
    fd = STDERR_FILENO;
  else
    return 0;
  if (wr_base64_decode(data, strlen(data), &bytes, err) < 0)
    return -1;
  if (wr_write_all(fd, bytes.data, bytes.len, err) < 0)
    return err->code == EPIPE ? 1 : wr_error_wrap(err, "write output");
  return 0;
}

/* GET .../processes/TAG/output[?follow=true], as a stream. */
static int read_logs(const struct wr_cli_ctx *ctx, const char *name,
                     const char *tag, bool follow, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *esc = wr_cli_escape(tag);
  _cleanup_free_ char *suffix =
      xasprintf("/processes/%s/output%s", esc, follow ? "?follow=true" : "");
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, suffix);

  if (wr_cli_connect(ctx, &c, err) < 0)
    return -1;
  if (wr_http_request_stream(c, "GET", path, NULL, NULL, 0, &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(c, &resp, err);
  return wr_cli_ndjson_read(c, on_event, NULL, err);
}

/* `warren logs`. */
int wr_cli_cmd_logs(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};
  bool follow = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":fh", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("logs", &err);
    if (c == 'h')
      return wr_cli_help(help);
    follow = true;
  }
  if (argc - optind != 2) {
    wr_error_set(&err, 0, "expected a sandbox name and a process tag");
    return wr_cli_usage("logs", &err);
  }
  if (read_logs(ctx, argv[optind], argv[optind + 1], follow, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return WR_CLI_EXIT_OK;
}
