/* `warren ps`: a sandbox's background processes. */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren ps [--json] NAME\n"
    "\n"
    "List the background processes of a sandbox (started with\n"
    "`warren exec -d`): TAG PID STATE EXIT CMD. STATE is running, exited,\n"
    "or killed (SIGNAL).\n"
    "\n"
    "Options:\n"
    "  --json      print a JSON array of process objects\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren exec -d --tag server web -- python3 -m http.server\n"
    "  warren ps web\n";

enum { OPT_JSON = 256 };

static const struct option longopts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The command as one line; arguments are not quoted. */
static char *join_cmd(const json_t *cmd) {
  wr_buf_t b;
  size_t i;
  json_t *arg;

  wr_buf_init(&b);
  json_array_foreach ((json_t *)cmd, i, arg) {
    if (i > 0)
      wr_buf_puts(&b, " ");
    wr_buf_puts(&b, json_string_value(arg) ? json_string_value(arg) : "");
  }
  return wr_buf_steal(&b, NULL);
}

/* STATE says how a finished process ended: its exit or its signal. */
static void add_row(struct wr_cli_table *t, const json_t *p) {
  _cleanup_free_ char *cmd = join_cmd(json_object_get(p, "cmd"));
  const char *signal = json_string_value(json_object_get(p, "signal"));
  char pid[32] = "-", state[48] = "exited", exit_code[32] = "-";

  if (wr_cli_jint(p, "pid") > 0)
    snprintf(pid, sizeof(pid), "%lld", (long long)wr_cli_jint(p, "pid"));
  if (wr_cli_jbool(p, "running"))
    snprintf(state, sizeof(state), "running");
  else if (signal != NULL)
    snprintf(state, sizeof(state), "killed (%s)", signal);
  if (!wr_cli_jbool(p, "running") && wr_cli_jint(p, "exit_code") >= 0)
    snprintf(exit_code, sizeof(exit_code), "%lld",
             (long long)wr_cli_jint(p, "exit_code"));
  wr_cli_table_add(t, (const char *const[]){wr_cli_jstr(p, "tag"), pid, state,
                                            exit_code, cmd});
}

/* TAG PID STATE EXIT CMD. */
static void print_processes(const json_t *list) {
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  size_t i;
  json_t *p;

  wr_cli_table_init(&t, 5);
  wr_cli_table_add(&t,
                   (const char *const[]){"TAG", "PID", "STATE", "EXIT", "CMD"});
  json_array_foreach ((json_t *)list, i, p)
    add_row(&t, p);
  wr_cli_table_print(&t, stdout);
}

/* `warren ps`. */
int wr_cli_cmd_ps(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  json_t *list;
  wr_error_t err = {0};
  bool json = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("ps", &err);
    if (c == 'h')
      return wr_cli_help(help);
    json = true;
  }
  if (argc - optind != 1) {
    wr_error_set(&err, 0, "expected one sandbox name");
    return wr_cli_usage("ps", &err);
  }
  path = wr_cli_sandbox_path(argv[optind], "/processes");
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  list = json_object_get(reply, "processes");
  if (!json_is_array(list))
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "invalid reply from warrend");
  if (json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  print_processes(list);
  return WR_CLI_EXIT_OK;
}
