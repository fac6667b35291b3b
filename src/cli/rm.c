/* `warren rm`: DELETE /v1/sandboxes/{id} for each name. */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren rm [-f] NAME...\n"
    "\n"
    "Delete sandboxes and everything in them: files, processes, cgroups,\n"
    "mounts. A running sandbox must be stopped first, unless -f is given.\n"
    "Prints each name once deleted; goes on after a failure and then\n"
    "exits 1.\n"
    "\n"
    "Options:\n"
    "  -f, --force  delete running sandboxes too (their processes are\n"
    "               killed)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  warren rm old\n"
    "  warren rm -f $(warren ls -q --label team=ci)\n";

static const struct option longopts[] = {
    {"force", no_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int delete_one(const struct wr_cli_ctx *ctx, const char *name, void *arg,
                      wr_error_t *err) {
  const bool *force = arg;
  _cleanup_free_ char *path =
      wr_cli_sandbox_path(name, *force ? "?force=true" : NULL);

  return wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err);
}

/* `warren rm`: -f becomes ?force=true on each DELETE. */
int wr_cli_cmd_rm(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};
  bool force = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":fh", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("rm", &err);
    if (c == 'h')
      return wr_cli_help(help);
    force = true;
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more sandbox names");
    return wr_cli_usage("rm", &err);
  }
  return wr_cli_each(ctx, argv + optind, (size_t)(argc - optind), delete_one,
                     &force);
}
