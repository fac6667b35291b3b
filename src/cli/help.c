/*
 * `warren help [COMMAND [SUBCOMMAND]]`: the same text as
 * `warren COMMAND --help`, reached by running the command with --help so
 * that each help text lives next to the code it describes.
 */
#include "cli/cli.h"

int wr_cli_cmd_help(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_free_ char **args = NULL;
  const struct wr_cli_command *table;
  size_t n;

  if (argc < 2 || argv[1][0] == '-') {
    wr_cli_print_usage(stdout);
    return WR_CLI_EXIT_OK;
  }
  /* argv[1..] plus "--help" and the terminating NULL. */
  args = xcalloc((size_t)argc + 1, sizeof(char *));
  for (int i = 1; i < argc; i++)
    args[i - 1] = argv[i];
  args[argc - 1] = (char *)"--help";
  table = wr_cli_commands(&n);
  return wr_cli_dispatch(ctx, table, n, NULL, argc, args);
}
