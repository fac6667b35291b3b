/* `warren pause`: POST /v1/sandboxes/{id}/pause for each name. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren pause NAME...\n"
    "\n"
    "Freeze every process of running sandboxes (cgroup freezer); memory\n"
    "is kept and `warren resume` thaws them. Prints each name once\n"
    "paused; goes on after a failure and then exits 1.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren pause web\n";

int wr_cli_cmd_pause(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  return wr_cli_simple_action(ctx, argc, argv, "pause", help, "/pause");
}
