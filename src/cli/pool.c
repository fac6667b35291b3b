/* `warren pool`: warm pools (GET /v1/pools, PUT and DELETE
 * /v1/pools/{image}). */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren pool set IMAGE --size N [--json]\n"
    "       warren pool ls [--json]\n"
    "       warren pool rm IMAGE\n"
    "\n"
    "A warm pool keeps N sandboxes of IMAGE (an image or a template)\n"
    "created, started and paused, so that `warren create --image IMAGE`\n"
    "takes one at once instead of starting a new one: it gets the\n"
    "create's name, environment, labels, limits and idle pause, its own\n"
    "hostname and machine id, and is resumed. The pool fills up again in\n"
    "the background. A create with a workspace, an agent, a snapshot,\n"
    "--no-start, another --disk or --no-pool makes its own sandbox.\n"
    "Pooled sandboxes are hidden from `warren ls` (see --all) and refuse\n"
    "requests until a create takes one.\n"
    "\n"
    "  set   make the pool of IMAGE, or change its size (0 removes it)\n"
    "  ls    IMAGE SIZE READY FILLING CLAIMED LAST ERROR\n"
    "  rm    remove the pool and its sandboxes\n"
    "\n"
    "Options:\n"
    "  --size N    how many sandboxes the pool keeps ready (0 to 64)\n"
    "  --json      print JSON\n"
    "  -h, --help  show this help\n"
    "\n"
    "Examples:\n"
    "  warren pool set base --size 2\n"
    "  warren pool ls\n"
    "  warren create --image base --name web   # takes one\n";

enum { OPT_SIZE = 256, OPT_JSON };

static const struct option opts[] = {
    {"size", required_argument, NULL, OPT_SIZE},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct pool_opts {
  uint64_t size;
  bool has_size, json, help;
  char **args; /* positional, after the subcommand */
  size_t nargs;
};

static int parse(int argc, char **argv, struct pool_opts *o, wr_error_t *err) {
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == 'h')
      o->help = true;
    else if (c == OPT_JSON)
      o->json = true;
    else if (c == OPT_SIZE && wr_parse_u64(optarg, 0, 64, &o->size, err) < 0)
      return wr_error_wrap(err, "--size");
    else if (c == OPT_SIZE)
      o->has_size = true;
  }
  o->args = argv + optind;
  o->nargs = (size_t)(argc - optind);
  for (size_t i = 0; i < o->nargs; i++)
    if (wr_cli_check_text(o->args[i], "the image", err) < 0)
      return -1;
  return 0;
}

static char *pool_path(const char *image) {
  _cleanup_free_ char *e = wr_cli_escape(image);

  return xasprintf("/v1/pools/%s", e);
}

static int cmd_set(const struct wr_cli_ctx *ctx, const struct pool_opts *o) {
  _cleanup_json_ json_t *body = NULL, *reply = NULL;
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};

  if (o->nargs != 1 || !o->has_size)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "usage: warren pool set IMAGE --size N");
  path = pool_path(o->args[0]);
  body = json_pack("{s:I}", "size", (json_int_t)o->size);
  if (wr_cli_call(ctx, "PUT", path, body, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o->json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  if (o->size == 0)
    printf("%s: no pool\n", o->args[0]);
  else
    printf("%s: pool of %llu\n", o->args[0], (unsigned long long)o->size);
  return WR_CLI_EXIT_OK;
}

static void add_row(struct wr_cli_table *t, const json_t *p) {
  char size[24], ready[24], filling[24], claimed[24];
  const char *e = json_string_value(json_object_get(p, "last_error"));

  snprintf(size, sizeof(size), "%lld", (long long)wr_cli_jint(p, "size"));
  snprintf(ready, sizeof(ready), "%lld", (long long)wr_cli_jint(p, "ready"));
  snprintf(filling, sizeof(filling), "%lld",
           (long long)wr_cli_jint(p, "filling"));
  snprintf(claimed, sizeof(claimed), "%lld",
           (long long)wr_cli_jint(p, "claimed"));
  wr_cli_table_add(t,
                   (const char *const[]){wr_cli_jstr(p, "image"), size, ready,
                                         filling, claimed, e ? e : "-"});
}

static int cmd_ls(const struct wr_cli_ctx *ctx, const struct pool_opts *o) {
  _cleanup_json_ json_t *reply = NULL;
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  json_t *list, *p;
  wr_error_t err = {0};
  size_t i;

  if (o->nargs != 0)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "pool ls takes no image");
  if (wr_cli_call(ctx, "GET", "/v1/pools", NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  list = json_object_get(reply, "pools");
  if (o->json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  wr_cli_table_init(&t, 6);
  wr_cli_table_add(&t,
                   (const char *const[]){"IMAGE", "SIZE", "READY", "FILLING",
                                         "CLAIMED", "LAST ERROR"});
  json_array_foreach (list, i, p)
    add_row(&t, p);
  wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

static int cmd_rm(const struct wr_cli_ctx *ctx, const struct pool_opts *o) {
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};

  if (o->nargs != 1)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "usage: warren pool rm IMAGE");
  path = pool_path(o->args[0]);
  if (wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  printf("%s\n", o->args[0]);
  return WR_CLI_EXIT_OK;
}

int wr_cli_cmd_pool(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct pool_opts o = {0};
  const char *sub = argc > 1 ? argv[1] : NULL;
  wr_error_t err = {0};

  if (sub == NULL)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "usage: warren pool set|ls|rm (see `warren pool "
                       "--help`)");
  if (parse(argc - 1, argv + 1, &o, &err) < 0)
    return wr_cli_usage("pool", &err);
  if (o.help || strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0)
    return wr_cli_help(help);
  if (strcmp(sub, "set") == 0)
    return cmd_set(ctx, &o);
  if (strcmp(sub, "ls") == 0)
    return cmd_ls(ctx, &o);
  if (strcmp(sub, "rm") == 0)
    return cmd_rm(ctx, &o);
  return wr_cli_fail(WR_CLI_EXIT_USAGE,
                     "unknown pool command `%s` (set, ls or rm)", sub);
}
