/* `warren ls`: GET /v1/sandboxes as a table, names or JSON. */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren ls [OPTIONS]\n"
    "\n"
    "List sandboxes: NAME STATE IDLE AGENT MODE WORKSPACE PORTS IMAGE\n"
    "CREATED. IDLE is how long a running sandbox has had no activity (it\n"
    "pauses itself after its idle pause, and any request wakes it).\n"
    "MODE is direct or clone for a sandbox with a workspace (WORKSPACE is\n"
    "its host directory); PORTS are the published ports, HOST->PORT.\n"
    "`warren inspect NAME` shows limits and everything else.\n"
    "\n"
    "Options:\n"
    "  --label K=V    only sandboxes with this label (repeatable: all must\n"
    "                 match)\n"
    "  --state STATE  only sandboxes in this state: creating, running,\n"
    "                 paused, stopped or error\n"
    "  --all          also the sandboxes warm pools keep ready (`warren\n"
    "                 pool`), which a create takes\n"
    "  -q, --quiet    print names only\n"
    "  --json         print a JSON array of sandbox objects\n"
    "  -h, --help     show this help\n"
    "\n"
    "Examples:\n"
    "  warren ls\n"
    "  warren ls --label team=infra --state running -q\n";

enum { OPT_LABEL = 256, OPT_STATE, OPT_JSON, OPT_ALL };

static const struct option longopts[] = {
    {"label", required_argument, NULL, OPT_LABEL},
    {"state", required_argument, NULL, OPT_STATE},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, OPT_JSON},
    {"all", no_argument, NULL, OPT_ALL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static bool state_valid(const char *s) {
  static const char *const states[] = {"creating", "running", "paused",
                                       "stopped", "error"};

  for (size_t i = 0; i < WR_ARRAY_SIZE(states); i++)
    if (strcmp(s, states[i]) == 0)
      return true;
  return false;
}

/* One option of ls; the state is checked against the known ones. */
static int parse_option(struct wr_cli_ls_opts *o, int c, const char *arg,
                        wr_error_t *err) {
  switch (c) {
  case OPT_LABEL:
    return wr_cli_push_kv(&o->labels, arg, "--label", false, err);
  case OPT_STATE:
    if (!state_valid(arg))
      return wr_error_set(err, 0,
                          "invalid --state `%s` (creating, running, paused, "
                          "stopped or error)",
                          arg);
    o->state = arg;
    return 0;
  case 'q':
    o->quiet = true;
    return 0;
  case OPT_JSON:
    o->json = true;
    return 0;
  case OPT_ALL:
    o->all = true;
    return 0;
  default:
    o->help = true;
    return 0;
  }
}

/* Options in any order; ls takes no operands. */
int wr_cli_ls_parse(int argc, char **argv, struct wr_cli_ls_opts *o,
                    wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":hq", longopts, err)) != -1) {
    if (c == '?' || parse_option(o, c, optarg, err) < 0)
      return -1;
  }
  if (optind < argc && !o->help)
    return wr_error_set(err, 0, "unexpected argument `%s`", argv[optind]);
  return 0;
}

static void ls_opts_free(struct wr_cli_ls_opts *o) {
  wr_strv_free(o->labels);
}

/* The filters as query parameters ("label=K=V", escaped). */
char *wr_cli_ls_path(const struct wr_cli_ls_opts *o) {
  wr_buf_t b;
  char sep = '?';

  wr_buf_init(&b);
  wr_buf_puts(&b, "/v1/sandboxes");
  for (size_t i = 0; o->labels != NULL && o->labels[i] != NULL; i++) {
    _cleanup_free_ char *esc = wr_cli_escape(o->labels[i]);
    wr_buf_printf(&b, "%clabel=%s", sep, esc);
    sep = '&';
  }
  if (o->state != NULL)
    wr_buf_printf(&b, "%cstate=%s", sep, o->state);
  if (o->all)
    wr_buf_printf(&b, "%call=1", o->state != NULL || o->labels ? '&' : '?');
  return wr_buf_steal(&b, NULL);
}

/* The daemon filters too; checking again here keeps the output right
 * whatever subset of the filters it understood. */
static bool matches(const struct wr_cli_ls_opts *o, const json_t *sb) {
  json_t *labels = json_object_get(sb, "labels");

  if (o->state != NULL && strcmp(wr_cli_jstr(sb, "state"), o->state) != 0)
    return false;
  for (size_t i = 0; o->labels != NULL && o->labels[i] != NULL; i++) {
    const char *eq = strchr(o->labels[i], '=');
    _cleanup_free_ char *key =
        xstrndup(o->labels[i], (size_t)(eq - o->labels[i]));
    const char *v = json_string_value(json_object_get(labels, key));
    if (v == NULL || strcmp(v, eq + 1) != 0)
      return false;
  }
  return true;
}

/* "8080->8000,127.0.0.2:9000->9000", or "-" (caller frees). */
static char *ports_text(const json_t *sb) {
  json_t *ports = json_object_get(sb, "ports"), *p;
  wr_buf_t b;
  size_t i;

  wr_buf_init(&b);
  json_array_foreach (ports, i, p) {
    const char *addr = wr_cli_jstr(p, "addr");
    if (i > 0)
      wr_buf_puts(&b, ",");
    if (strcmp(addr, "127.0.0.1") != 0)
      wr_buf_printf(&b, "%s:", addr);
    wr_buf_printf(
        &b, "%lld->%lld",
        (long long)json_integer_value(json_object_get(p, "host_port")),
        (long long)json_integer_value(json_object_get(p, "port")));
  }
  if (b.len == 0)
    wr_buf_puts(&b, "-");
  return wr_buf_steal(&b, NULL);
}

/* A string field, or "-" when it is null or missing. */
static const char *or_dash(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));

  return s != NULL && *s != '\0' ? s : "-";
}

/* How long a running sandbox has been idle ("42s", "5m", "3h", "2d"),
 * "-" when it is not running or the daemon does not say. */
static void idle_text(const json_t *sb, char *out, size_t size) {
  json_t *idle = json_object_get(json_object_get(sb, "idle"), "idle_s");
  json_int_t s = json_is_integer(idle) ? json_integer_value(idle) : -1;

  if (s < 0)
    snprintf(out, size, "-");
  else if (s < 60)
    snprintf(out, size, "%llds", (long long)s);
  else if (s < 3600)
    snprintf(out, size, "%lldm", (long long)(s / 60));
  else if (s < 86400)
    snprintf(out, size, "%lldh", (long long)(s / 3600));
  else
    snprintf(out, size, "%lldd", (long long)(s / 86400));
}

/* One sandbox as a row, the age in words. */
static void add_row(struct wr_cli_table *t, const json_t *sb) {
  json_t *ws = json_object_get(sb, "workspace");
  _cleanup_free_ char *ports = ports_text(sb);
  char created[64], idle[32];

  wr_cli_field_ago(sb, "created_at", created, sizeof(created));
  idle_text(sb, idle, sizeof(idle));
  wr_cli_table_add(t, (const char *const[]){
                          wr_cli_jstr(sb, "name"), wr_cli_jstr(sb, "state"),
                          idle, or_dash(sb, "agent"), or_dash(ws, "mode"),
                          or_dash(ws, "path"), ports, wr_cli_jstr(sb, "image"),
                          created});
}

/* A table, or one name per line for scripts (-q). */
static int print_sandboxes(const struct wr_cli_ls_opts *o, json_t *list) {
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  size_t i;
  json_t *sb;

  wr_cli_table_init(&t, 9);
  wr_cli_table_add(&t, (const char *const[]){"NAME", "STATE", "IDLE", "AGENT",
                                             "MODE", "WORKSPACE", "PORTS",
                                             "IMAGE", "CREATED"});
  json_array_foreach (list, i, sb) {
    if (o->quiet)
      printf("%s\n", wr_cli_jstr(sb, "name"));
    else
      add_row(&t, sb);
  }
  if (!o->quiet)
    wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

/* `warren ls`. */
int wr_cli_cmd_ls(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_ls_opts o _cleanup_(ls_opts_free) = {0};
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_json_ json_t *list = json_array();
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};
  size_t i;
  json_t *sb;

  if (wr_cli_ls_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("ls", &err);
  if (o.help)
    return wr_cli_help(help);
  path = wr_cli_ls_path(&o);
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  json_array_foreach (json_object_get(reply, "sandboxes"), i, sb) {
    if (matches(&o, sb))
      json_array_append(list, sb);
  }
  if (o.json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  return print_sandboxes(&o, list);
}
