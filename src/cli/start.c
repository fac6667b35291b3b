/* `warren start`: POST /v1/sandboxes/{id}/start for each name. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren start [--queue-timeout T] NAME...\n"
    "\n"
    "Start stopped sandboxes (running ones are left as they are). Prints\n"
    "each name once started; goes on after a failure and then exits 1.\n"
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
    "  warren start web worker\n";

int wr_cli_cmd_start(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  return wr_cli_limited_action(ctx, argc, argv, "start", help, "/start");
}
