/* `warren plan`: the tier planner's steps, shown or run (/v1/plan). */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren plan [--dry-run | --apply] [--now MS] [--json]\n"
    "\n"
    "The tier planner keeps FREE of SLOTS live places (running or paused\n"
    "sandboxes) open by demoting the least recently edited warm projects\n"
    "to cool (snapshot the disk, delete the sandbox), keeps the memory\n"
    "reserve free the same way, and moves cool projects whose snapshot is\n"
    "older than --snapshot-days to cold. warrend runs it every\n"
    "--plan-interval; this command shows what it would do now, or does it.\n"
    "Hot projects and projects with an operation in flight are not moved.\n"
    "\n"
    "Options:\n"
    "  --dry-run   print the steps, change nothing (the default)\n"
    "  --apply     run the steps now and say how each went\n"
    "  --now MS    plan as if it were this time (ms since the epoch):\n"
    "              what would retention do in a month?\n"
    "  --json      print JSON\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren plan\n"
    "  p-07: warm -> cool (snapshot the disk, delete the sandbox)\n";

enum { OPT_DRY = 256, OPT_APPLY, OPT_NOW, OPT_JSON };

static const struct option opts[] = {
    {"dry-run", no_argument, NULL, OPT_DRY},
    {"apply", no_argument, NULL, OPT_APPLY},
    {"now", required_argument, NULL, OPT_NOW},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void print_plan(const json_t *plan, bool applied) {
  const json_t *steps = json_object_get(plan, "steps"), *s;
  const json_t *set = json_object_get(plan, "settings");
  size_t i;

  if (json_array_size(steps) == 0)
    wr_cli_line(stdout,
                "nothing to do (%lld projects, %lld live, %lld of "
                "%lld slots kept free)",
                (long long)wr_cli_jint(plan, "projects"),
                (long long)wr_cli_jint(plan, "live"),
                (long long)wr_cli_jint(set, "free"),
                (long long)wr_cli_jint(set, "slots"));
  json_array_foreach (steps, i, s) {
    const char *e = json_string_value(json_object_get(s, "error"));
    if (!applied)
      wr_cli_line(stdout, "%s", wr_cli_jstr(s, "text"));
    else if (e != NULL)
      wr_cli_line(stdout, "%s: failed: %s", wr_cli_jstr(s, "text"), e);
    else
      wr_cli_line(stdout, "%s: done", wr_cli_jstr(s, "text"));
  }
}

int wr_cli_cmd_plan(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  bool apply = false, json = false;
  uint64_t now = 0;
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("plan", &err);
    if (c == 'h')
      return wr_cli_help(help);
    if (c == OPT_APPLY)
      apply = true;
    else if (c == OPT_DRY)
      apply = false;
    else if (c == OPT_JSON)
      json = true;
    else if (c == OPT_NOW && wr_parse_u64(optarg, 1, INT64_MAX, &now, &err) < 0)
      return wr_cli_usage("plan", &err);
  }
  if (optind != argc)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "plan takes no arguments");
  path = now ? xasprintf("/v1/plan?now=%llu", (unsigned long long)now)
             : xstrdup("/v1/plan");
  if (wr_cli_call(ctx, apply ? "POST" : "GET", path, NULL, &reply, NULL, &err) <
      0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  print_plan(reply, apply);
  return WR_CLI_EXIT_OK;
}
