/* `warren sh`: an interactive login shell, bash when the image has it. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren sh NAME\n"
    "\n"
    "Open an interactive login shell in a running sandbox: bash if the\n"
    "image has it, else sh. Needs a terminal. The same as\n"
    "  warren exec -i -t NAME -- /bin/sh -c '...exec bash -l or sh -l...'\n"
    "and it exits with the shell's exit status.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren sh web\n";

static const char shell_script[] =
    "if command -v bash >/dev/null 2>&1; then exec bash -l; "
    "else exec sh -l; fi";

static const struct option longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Not every image has bash; the shell decides at run time which to use. */
int wr_cli_cmd_sh(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("sh", &err);
    return wr_cli_help(help);
  }
  if (argc - optind != 1) {
    wr_error_set(&err, 0, "expected one sandbox name");
    return wr_cli_usage("sh", &err);
  }
  char *args[] = {
      (char *)"exec", (char *)"-i",         (char *)"-t",
      argv[optind],   (char *)"--",         (char *)"/bin/sh",
      (char *)"-c",   (char *)shell_script, NULL,
  };
  return wr_cli_cmd_exec(ctx, (int)WR_ARRAY_SIZE(args) - 1, args);
}
