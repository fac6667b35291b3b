/* `warren kill`: signal a background process. */
#include "cli/cli.h"

#include <jansson.h>
#include <signal.h>

static const char help[] =
    "Usage: warren kill [-s SIGNAL] NAME TAG\n"
    "\n"
    "Send a signal to a background process (default TERM). Prints the\n"
    "process's tag.\n"
    "\n"
    "Options:\n"
    "  -s, --signal SIGNAL  a name (TERM, SIGKILL, int) or a number\n"
    "  -h, --help           show this help\n"
    "\n"
    "Example:\n"
    "  warren kill -s INT web server\n";

static const struct option longopts[] = {
    {"signal", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The daemon gets the canonical name, whatever spelling was typed. */
static int send_signal(const struct wr_cli_ctx *ctx, const char *name,
                       const char *tag, int sig, wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(tag);
  _cleanup_free_ char *suffix = xasprintf("/processes/%s/signal", esc);
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, suffix);
  _cleanup_json_ json_t *body =
      json_pack("{s:s}", "signal", wr_signal_name(sig));

  return wr_cli_call(ctx, "POST", path, body, NULL, NULL, err);
}

/* The signal is checked locally so that a typo is a usage error. */
int wr_cli_cmd_kill(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};
  int c, sig = SIGTERM;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":s:h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("kill", &err);
    if (c == 'h')
      return wr_cli_help(help);
    sig = wr_signal_from_name(optarg);
    if (sig < 0 || strcmp(wr_signal_name(sig), "UNKNOWN") == 0) {
      wr_error_set(&err, 0, "unknown signal `%s`", optarg);
      return wr_cli_usage("kill", &err);
    }
  }
  if (argc - optind != 2) {
    wr_error_set(&err, 0, "expected a sandbox name and a process tag");
    return wr_cli_usage("kill", &err);
  }
  if (send_signal(ctx, argv[optind], argv[optind + 1], sig, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  printf("%s\n", argv[optind + 1]);
  return WR_CLI_EXIT_OK;
}
