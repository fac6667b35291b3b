/* `warren stop`: POST /v1/sandboxes/{id}/stop for each name. */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren stop [--timeout TIME] NAME...\n"
    "\n"
    "Stop sandboxes: every process gets SIGTERM, and SIGKILL once TIME\n"
    "has passed (default 10s). The sandbox's files are kept; `warren\n"
    "start` starts it again. Prints each name once stopped; goes on after\n"
    "a failure and then exits 1.\n"
    "\n"
    "Options:\n"
    "  --timeout TIME  grace period before SIGKILL (10, 500ms, 1m; 0 kills\n"
    "                  at once)\n"
    "  -h, --help      show this help\n"
    "\n"
    "Examples:\n"
    "  warren stop web\n"
    "  warren stop --timeout 0 web worker\n";

enum { OPT_TIMEOUT = 256 };

static const struct option longopts[] = {
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Without --timeout no body is sent and the daemon's default applies. */
int wr_cli_cmd_stop(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_json_ json_t *body = NULL;
  wr_error_t err = {0};
  uint64_t ms;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("stop", &err);
    if (c == 'h')
      return wr_cli_help(help);
    if (wr_parse_duration_ms(optarg, &ms, &err) < 0) {
      wr_error_wrap(&err, "--timeout");
      return wr_cli_usage("stop", &err);
    }
    json_decref(body);
    body = json_pack("{s:o}", "timeout", wr_cli_seconds_json(ms));
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more sandbox names");
    return wr_cli_usage("stop", &err);
  }
  return wr_cli_post_each(ctx, argv + optind, (size_t)(argc - optind), "/stop",
                          body);
}
