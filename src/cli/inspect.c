/* `warren inspect`: GET /v1/sandboxes/{id}, as aligned lines or JSON. */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren inspect [--json] NAME\n"
    "\n"
    "Show a sandbox's details: state, image, agent, workspace, times,\n"
    "limits, environment, labels, published ports and the network policy\n"
    "in force for it (the preset and the global and sandbox rules).\n"
    "NAME may also be the sandbox's id.\n"
    "\n"
    "Options:\n"
    "  --json      print the sandbox object as JSON, with the policy under\n"
    "              \"policy\"\n"
    "  -h, --help  show this help\n"
    "\n"
    "Examples:\n"
    "  warren inspect web\n"
    "  warren inspect --json web | jq .limits\n";

enum { OPT_JSON = 256 };

static const struct option longopts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void line(const char *key, const char *value) {
  _cleanup_free_ char *shown = wr_cli_quote(value);

  printf("%-10s %s\n", key, shown);
}

/* A JSON value as text: strings as they are, null as "-". */
static void field(const char *key, const json_t *v) {
  char buf[64] = "-";

  if (json_is_string(v)) {
    line(key, json_string_value(v));
    return;
  }
  if (json_is_integer(v))
    snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
  else if (json_is_real(v))
    snprintf(buf, sizeof(buf), "%g", json_real_value(v));
  line(key, buf);
}

static void time_field(const char *key, const json_t *sb, const char *name) {
  char ago[64];
  _cleanup_free_ char *text = NULL;

  wr_cli_field_ago(sb, name, ago, sizeof(ago));
  text = xasprintf("%s (%s)", wr_cli_jstr(sb, name), ago);
  line(key, text);
}

/* What last woke it from paused (nothing when nothing has). */
static void wake_field(const json_t *sb) {
  const json_t *w = json_object_get(sb, "last_wake");
  char ago[64];
  _cleanup_free_ char *text = NULL;

  if (!json_is_object(w))
    return;
  wr_cli_field_ago(w, "at", ago, sizeof(ago));
  text = xasprintf("by %s, %s (%s)", wr_cli_jstr(w, "by"), wr_cli_jstr(w, "at"),
                   ago);
  line("woken:", text);
}

/* The idle pause: "after 300s; idle 12s (last: network)", or "never". */
static void idle_field(const json_t *sb) {
  const json_t *i = json_object_get(sb, "idle");
  const json_t *after = json_object_get(i, "pause_after_s");
  const json_t *idle = json_object_get(i, "idle_s");
  const char *kind = wr_cli_jstr(json_object_get(i, "last_activity"), "kind");
  _cleanup_free_ char *text = NULL;

  if (!json_is_integer(after))
    return;
  if (json_integer_value(after) == 0)
    text = xstrdup("never");
  else if (json_is_integer(idle))
    text = xasprintf("after %llds; idle %llds (last: %s)",
                     (long long)json_integer_value(after),
                     (long long)json_integer_value(idle), kind);
  else
    text = xasprintf("after %llds%s", (long long)json_integer_value(after),
                     json_is_true(json_object_get(i, "paused_by_idle"))
                         ? "; paused by it"
                         : "");
  line("idle:", text);
}

/* K=V lines under one key, "-" when there are none. */
static void map_field(const char *key, const json_t *map) {
  const char *k;
  json_t *v;
  bool first = true;

  json_object_foreach ((json_t *)map, k, v) {
    _cleanup_free_ char *kv = xasprintf("%s=%s", k, json_string_value(v));
    line(first ? key : "", kv);
    first = false;
  }
  if (first)
    line(key, "-");
}

/* A size in binary units; an unset limit is "-". */
static void size_field(const char *key, const json_t *v) {
  char text[32] = "-";

  if (json_is_integer(v))
    wr_format_size((uint64_t)json_integer_value(v), text, sizeof(text));
  line(key, text);
}

static void print_limits(const json_t *limits) {
  size_field("memory:", json_object_get(limits, "memory_bytes"));
  field("cpus:", json_object_get(limits, "cpus"));
  field("pids:", json_object_get(limits, "pids"));
  size_field("disk:", json_object_get(limits, "disk_bytes"));
}

/* Where the workspace is, host and sandbox side. */
static void print_workspace(const json_t *ws) {
  _cleanup_free_ char *where = NULL, *owner = NULL;
  const char *mode = wr_cli_jstr(ws, "mode");
  bool clone = strcmp(mode, "clone") == 0;

  if (!json_is_object(ws)) {
    line("workspace:", "-");
    return;
  }
  where =
      xasprintf("%s (%s mode): %s %s", wr_cli_jstr(ws, "path"), mode,
                clone ? wr_cli_jstr(ws, "origin") : wr_cli_jstr(ws, "mount"),
                clone ? "read-only, a clone in /workspace" : "read-write");
  owner = xasprintf("%lld:%lld on the host (root inside)",
                    (long long)json_integer_value(json_object_get(ws, "uid")),
                    (long long)json_integer_value(json_object_get(ws, "gid")));
  line("workspace:", where);
  line("owner:", owner);
}

static void print_ports(const json_t *ports) {
  size_t i;
  json_t *p;

  json_array_foreach (ports, i, p) {
    _cleanup_free_ char *text = xasprintf(
        "%s:%lld -> %lld", wr_cli_jstr(p, "addr"),
        (long long)json_integer_value(json_object_get(p, "host_port")),
        (long long)json_integer_value(json_object_get(p, "port")));
    line(i == 0 ? "ports:" : "", text);
  }
  if (json_array_size(ports) == 0)
    line("ports:", "-");
}

/* The preset, then each stored rule that applies (global or this
 * sandbox's); the preset's own rules are counted, not listed. */
static void print_policy(const json_t *policy, const char *name) {
  _cleanup_free_ char *head = NULL;
  size_t i;
  json_t *r;

  if (policy == NULL)
    return;
  head =
      xasprintf("%s preset, %zu rules of its own (warren policy ls %s "
                "--wide)",
                wr_cli_jstr(policy, "preset"),
                json_array_size(json_object_get(policy, "preset_rules")), name);
  line("policy:", head);
  json_array_foreach (json_object_get(policy, "rules"), i, r) {
    json_t *port = json_object_get(r, "port");
    _cleanup_free_ char *host =
        json_is_integer(port) ? xasprintf("%s:%lld", wr_cli_jstr(r, "host"),
                                          (long long)json_integer_value(port))
                              : xstrdup(wr_cli_jstr(r, "host"));
    _cleanup_free_ char *text = xasprintf(
        "%-5s %s (%s rule %lld)", wr_cli_jstr(r, "action"), host,
        json_is_string(json_object_get(r, "sandbox")) ? "sandbox" : "global",
        (long long)json_integer_value(json_object_get(r, "id")));
    line("", text);
  }
}

/* The order is the one a person looks for: who, what state, what from,
 * when, then limits and settings. */
static void print_sandbox(const json_t *sb) {
  json_t *error = json_object_get(sb, "error");

  line("name:", wr_cli_jstr(sb, "name"));
  line("id:", wr_cli_jstr(sb, "id"));
  line("state:", wr_cli_jstr(sb, "state"));
  if (json_is_string(error))
    line("error:", json_string_value(error));
  line("image:", wr_cli_jstr(sb, "image"));
  field("agent:", json_object_get(sb, "agent"));
  print_workspace(json_object_get(sb, "workspace"));
  line("hostname:", wr_cli_jstr(sb, "hostname"));
  line("workdir:", wr_cli_jstr(sb, "workdir"));
  time_field("created:", sb, "created_at");
  time_field("updated:", sb, "updated_at");
  wake_field(sb);
  idle_field(sb);
  field("pid:", json_object_get(sb, "pid"));
  field("uid base:", json_object_get(sb, "uid_base"));
  print_limits(json_object_get(sb, "limits"));
  map_field("env:", json_object_get(sb, "env"));
  map_field("labels:", json_object_get(sb, "labels"));
  print_ports(json_object_get(sb, "ports"));
  print_policy(json_object_get(sb, "policy"), wr_cli_jstr(sb, "name"));
}

/* The policy in force for the sandbox, added to its object. */
static int add_policy(const struct wr_cli_ctx *ctx, json_t *sb,
                      wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(wr_cli_jstr(sb, "id"));
  _cleanup_free_ char *path = xasprintf("/v1/policy?sandbox=%s", esc);
  json_t *policy = NULL;

  if (wr_cli_call(ctx, "GET", path, NULL, &policy, NULL, err) < 0)
    return -1;
  json_object_set_new(sb, "policy", policy);
  return 0;
}

/* `warren inspect`. */
int wr_cli_cmd_inspect(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_json_ json_t *sb = NULL;
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};
  bool json = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("inspect", &err);
    if (c == 'h')
      return wr_cli_help(help);
    json = true;
  }
  if (argc - optind != 1) {
    wr_error_set(&err, 0, "expected one sandbox name");
    return wr_cli_usage("inspect", &err);
  }
  path = wr_cli_sandbox_path(argv[optind], NULL);
  if (wr_cli_call(ctx, "GET", path, NULL, &sb, NULL, &err) < 0 ||
      add_policy(ctx, sb, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (json)
    return wr_cli_print_json(sb) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  print_sandbox(sb);
  return WR_CLI_EXIT_OK;
}
