/* `warren resume`: POST /v1/sandboxes/{id}/resume for each name. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren resume [--queue-timeout T] NAME...\n"
    "\n"
    "Thaw paused sandboxes: their processes go on where they stopped.\n"
    "Prints each name once resumed; goes on after a failure and then\n"
    "exits 1.\n"
    "\n"
    "Under warrend's --max-running, it may pause an idle sandbox to make\n"
    "room, or wait in line (\"waiting for a free sandbox, #1 in line\"\n"
    "on stderr) until a slot frees or the wait times out; a timed out\n"
    "wait can be retried.\n"
    "\n"
    "Options:\n"
    "  --queue-timeout T  wait at most T in line, like 30 or 5m (default:\n"
    "                     warrend's --queue-timeout)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Example:\n"
    "  warren resume web\n";

int wr_cli_cmd_resume(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  return wr_cli_limited_action(ctx, argc, argv, "resume", help, "/resume");
}
