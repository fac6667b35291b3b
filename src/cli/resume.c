/* `warren resume`: POST /v1/sandboxes/{id}/resume for each name. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren resume NAME...\n"
    "\n"
    "Thaw paused sandboxes: their processes go on where they stopped.\n"
    "Prints each name once resumed; goes on after a failure and then\n"
    "exits 1.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren resume web\n";

int wr_cli_cmd_resume(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  return wr_cli_simple_action(ctx, argc, argv, "resume", help, "/resume");
}
