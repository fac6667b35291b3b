/* `warren start`: POST /v1/sandboxes/{id}/start for each name. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren start NAME...\n"
    "\n"
    "Start stopped sandboxes (running ones are left as they are). Prints\n"
    "each name once started; goes on after a failure and then exits 1.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren start web worker\n";

int wr_cli_cmd_start(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  return wr_cli_simple_action(ctx, argc, argv, "start", help, "/start");
}
