/* `warren create`: POST /v1/sandboxes. */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren create [OPTIONS]\n"
    "\n"
    "Create a sandbox from an image and start it (unless --no-start).\n"
    "Prints the sandbox's name.\n"
    "\n"
    "Options:\n"
    "  --name NAME      the sandbox's name: lowercase letters, digits, '.',\n"
    "                   '_' and '-' (default: generated)\n"
    "  --image IMAGE    the image to start from (default: base)\n"
    "  --memory SIZE    memory limit, like 512m or 1g\n"
    "  --cpus N         CPU limit, like 1 or 1.5\n"
    "  --pids N         most processes at once\n"
    "  --disk SIZE      disk limit of the sandbox's own files, like 2g: they\n"
    "                   go on a filesystem of that size (at least 16m)\n"
    "  --env K=V        environment of every process (repeatable)\n"
    "  --label K=V      a label to find it by (repeatable)\n"
    "  --workdir DIR    working directory of processes (default: /)\n"
    "  --no-start       create it stopped\n"
    "  --json           print the sandbox as JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Examples:\n"
    "  warren create --name web --memory 1g --cpus 1.5 --disk 2g\n"
    "  warren create --name ci --label team=infra --env CI=1 --json\n";

enum {
  OPT_NAME = 256,
  OPT_IMAGE,
  OPT_MEMORY,
  OPT_CPUS,
  OPT_PIDS,
  OPT_DISK,
  OPT_ENV,
  OPT_LABEL,
  OPT_WORKDIR,
  OPT_NO_START,
  OPT_JSON,
  OPT_CLONE,
};

static const struct option longopts[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"env", required_argument, NULL, OPT_ENV},
    {"label", required_argument, NULL, OPT_LABEL},
    {"workdir", required_argument, NULL, OPT_WORKDIR},
    {"no-start", no_argument, NULL, OPT_NO_START},
    {"json", no_argument, NULL, OPT_JSON},
    {"clone", no_argument, NULL, OPT_CLONE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Options that take a value and need checking. */
static int parse_value(struct wr_cli_create_opts *o, int c, const char *arg,
                       wr_error_t *err) {
  switch (c) {
  case OPT_NAME:
    if (!wr_name_valid(arg))
      return wr_error_set(err, 0,
                          "invalid name `%s`: use lowercase letters, digits, "
                          "'.', '_' and '-' (at most 63)",
                          arg);
    o->name = arg;
    return 0;
  case OPT_MEMORY:
    o->has_memory = true;
    return wr_parse_size(arg, &o->memory, err) < 0
               ? wr_error_wrap(err, "--memory")
               : 0;
  case OPT_CPUS:
    o->has_cpus = true;
    return wr_cli_parse_cpus(arg, &o->cpus, err) < 0
               ? wr_error_wrap(err, "--cpus")
               : 0;
  case OPT_PIDS:
    o->has_pids = true;
    return wr_parse_u64(arg, 1, 1u << 22, &o->pids, err) < 0
               ? wr_error_wrap(err, "--pids")
               : 0;
  case OPT_DISK:
    o->has_disk = true;
    return wr_parse_size(arg, &o->disk, err) < 0 ? wr_error_wrap(err, "--disk")
                                                 : 0;
  case OPT_ENV:
    return wr_cli_push_kv(&o->env, arg, "--env", true, err);
  case OPT_LABEL:
    return wr_cli_push_kv(&o->labels, arg, "--label", false, err);
  }
  return 0;
}

/* Options without a value to check, and the ones refused for now. */
static int parse_option(struct wr_cli_create_opts *o, int c, const char *arg,
                        wr_error_t *err) {
  switch (c) {
  case 'h':
    o->help = true;
    return 0;
  case OPT_IMAGE:
    o->image = arg;
    return wr_cli_check_text(arg, "--image", err);
  case OPT_WORKDIR:
    o->workdir = arg;
    return wr_cli_check_text(arg, "--workdir", err);
  case OPT_NO_START:
    o->no_start = true;
    return 0;
  case OPT_JSON:
    o->json = true;
    return 0;
  case OPT_CLONE:
    return wr_error_set(err, 0, "--clone is not supported yet");
  }
  return parse_value(o, c, arg, err);
}

/* Options may come in any order; positional arguments are the future
 * AGENT and PATH. */
int wr_cli_create_parse(int argc, char **argv, struct wr_cli_create_opts *o,
                        wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, err)) != -1) {
    if (c == '?' || parse_option(o, c, optarg, err) < 0)
      return -1;
  }
  if (optind < argc && !o->help)
    return wr_error_set(err, 0,
                        "unexpected argument `%s` (AGENT and PATH are not "
                        "supported yet)",
                        argv[optind]);
  return 0;
}

void wr_cli_create_opts_free(struct wr_cli_create_opts *o) {
  wr_strv_free(o->env);
  wr_strv_free(o->labels);
  o->env = o->labels = NULL;
}

/* Only what was given is sent, so the daemon's defaults apply to the rest. */
json_t *wr_cli_create_body(const struct wr_cli_create_opts *o) {
  json_t *body = json_object();

  if (o->name != NULL)
    json_object_set_new(body, "name", json_string(o->name));
  if (o->image != NULL)
    json_object_set_new(body, "image", json_string(o->image));
  if (o->has_memory)
    json_object_set_new(body, "memory", json_integer((json_int_t)o->memory));
  if (o->has_cpus)
    json_object_set_new(body, "cpus", json_real(o->cpus));
  if (o->has_pids)
    json_object_set_new(body, "pids", json_integer((json_int_t)o->pids));
  if (o->has_disk)
    json_object_set_new(body, "disk", json_integer((json_int_t)o->disk));
  if (o->env != NULL)
    json_object_set_new(body, "env", wr_cli_kv_object(o->env));
  if (o->labels != NULL)
    json_object_set_new(body, "labels", wr_cli_kv_object(o->labels));
  if (o->workdir != NULL)
    json_object_set_new(body, "workdir", json_string(o->workdir));
  if (o->no_start)
    json_object_set_new(body, "start", json_false());
  return body;
}

/* Prints just the name so that scripts can write NAME=$(warren create). */
int wr_cli_cmd_create(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_create_opts o _cleanup_(wr_cli_create_opts_free) = {0};
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *sb = NULL;
  wr_error_t err = {0};

  if (wr_cli_create_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("create", &err);
  if (o.help)
    return wr_cli_help(help);
  body = wr_cli_create_body(&o);
  if (wr_cli_call(ctx, "POST", "/v1/sandboxes", body, &sb, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o.json)
    return wr_cli_print_json(sb) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  printf("%s\n", wr_cli_jstr(sb, "name"));
  return WR_CLI_EXIT_OK;
}
