/*
 * `warren attach`: connect the terminal to a background process. The
 * process keeps running when we leave: Ctrl-P Ctrl-Q detaches from a tty
 * process, Ctrl-C from one without a tty, and INT/TERM/HUP sent to warren
 * always detach, so a closed terminal never kills the process.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren attach NAME TAG\n"
    "\n"
    "Attach to a background process (started with `warren exec -d`): its\n"
    "kept output is printed first, then live output. Typed input goes to\n"
    "the process when stdin is a terminal. warren exits with the process's\n"
    "exit code when it ends.\n"
    "\n"
    "Detach, leaving the process running:\n"
    "  Ctrl-P Ctrl-Q   for a process with a tty (started with -d -t); the\n"
    "                  terminal is in raw mode and this pair is not sent\n"
    "  Ctrl-C          for a process without a tty\n"
    "INT, TERM or HUP sent to warren detach too; they never reach the\n"
    "process.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren exec -d -t --tag repl web -- python3\n"
    "  warren attach web repl\n";

static const struct option longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Whether the process has a tty: it decides how the terminal is used. */
static int process_tty(const struct wr_cli_ctx *ctx, const char *path,
                       bool *tty, wr_error_t *err) {
  _cleanup_json_ json_t *proc = NULL;

  if (wr_cli_call(ctx, "GET", path, NULL, &proc, NULL, err) < 0)
    return -1;
  *tty = wr_cli_jbool(proc, "tty");
  return 0;
}

void wr_cli_attach_opts(bool proc_tty, struct wr_cli_stream_opts *so) {
  bool term = isatty(STDIN_FILENO);

  memset(so, 0, sizeof(*so));
  so->forward_stdin = term;
  so->tty = proc_tty && term;
  so->detach_keys = so->tty;
  so->signal_detach = true; /* the process outlives our terminal */
}

/* Detaching is a success; otherwise the process's own status, as exec. */
static int finish(const char *tag, const struct wr_cli_stream_result *res) {
  if (res->detached) {
    fprintf(stderr, "detached from %s\n", tag);
    return WR_CLI_EXIT_OK;
  }
  if (res->error != NULL)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s",
                       wr_cli_jstr(res->error, "message"));
  if (res->exit != NULL)
    return wr_cli_exit_code(res->exit);
  if (res->signal != 0)
    return 128 + res->signal;
  return wr_cli_fail(WR_CLI_EXIT_ERROR,
                     "the connection to warrend ended while attached to %s",
                     tag);
}

/* "/v1/sandboxes/NAME/processes/TAG<suffix>" (caller frees). */
static char *process_path(const char *sandbox, const char *tag,
                          const char *suffix) {
  _cleanup_free_ char *esc = wr_cli_escape(tag);
  _cleanup_free_ char *rest = xasprintf("/processes/%s%s", esc, suffix);

  return wr_cli_sandbox_path(sandbox, rest);
}

/* The upgrade on .../output; a refusal carries the API's message. */
int wr_cli_attach_stream(const struct wr_cli_ctx *ctx, const char *sandbox,
                         const char *tag, const struct wr_cli_stream_opts *so,
                         struct wr_cli_stream_result *res, wr_error_t *err) {
  _cleanup_free_ char *output = process_path(sandbox, tag, "/output");

  return wr_cli_stream_request(ctx, "GET", output, NULL, so, res, err);
}

static int attach(const struct wr_cli_ctx *ctx, const char *sandbox,
                  const char *tag, const struct wr_cli_stream_opts *so) {
  struct wr_cli_stream_result res _cleanup_(wr_cli_stream_result_free) = {0};
  wr_error_t err = {0};

  if (wr_cli_attach_stream(ctx, sandbox, tag, so, &res, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return finish(tag, &res);
}

/* The process is looked up first: its tty decides raw mode and the
 * detach keys. */
int wr_cli_cmd_attach(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_stream_opts so;
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};
  bool tty = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("attach", &err);
    return wr_cli_help(help);
  }
  if (argc - optind != 2) {
    wr_error_set(&err, 0, "expected a sandbox name and a process tag");
    return wr_cli_usage("attach", &err);
  }
  path = process_path(argv[optind], argv[optind + 1], "");
  if (process_tty(ctx, path, &tty, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  wr_cli_attach_opts(tty, &so);
  return attach(ctx, argv[optind], argv[optind + 1], &so);
}
