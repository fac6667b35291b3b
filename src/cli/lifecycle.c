/*
 * What start, stop, pause, resume and rm share: one request per sandbox
 * name, going on after a failure and exiting 1 if any failed.
 */
#include "cli/cli.h"

struct action {
  const char *suffix;
  const json_t *body;
};

int wr_cli_sandbox_post(const struct wr_cli_ctx *ctx, const char *name,
                        const char *suffix, const json_t *body,
                        wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, suffix);

  return wr_cli_call(ctx, "POST", path, body, NULL, NULL, err);
}

static int post_action(const struct wr_cli_ctx *ctx, const char *name,
                       void *arg, wr_error_t *err) {
  const struct action *a = arg;

  return wr_cli_sandbox_post(ctx, name, a->suffix, a->body, err);
}

int wr_cli_post_each(const struct wr_cli_ctx *ctx, char *const *names, size_t n,
                     const char *suffix, const json_t *body) {
  struct action a = {suffix, body};

  return wr_cli_each(ctx, names, n, post_action, &a);
}

/* start, pause and resume differ only in their help and their route. */
int wr_cli_simple_action(const struct wr_cli_ctx *ctx, int argc, char **argv,
                         const char *cmd, const char *help,
                         const char *suffix) {
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage(cmd, &err);
    return wr_cli_help(help);
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more sandbox names");
    return wr_cli_usage(cmd, &err);
  }
  return wr_cli_post_each(ctx, argv + optind, (size_t)(argc - optind), suffix,
                          NULL);
}
