/*
 * `warren policy init|ls|allow|deny|rm|check|log`: where sandboxes may
 * connect. Every outgoing connection goes through warren's proxy, which
 * decides with a preset (open, balanced, locked) and the rules layered on
 * it, and logs each decision.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <time.h>

static const char help[] =
    "Usage: warren policy COMMAND [ARGS...]\n"
    "\n"
    "Control where sandboxes may connect. Every connection a sandbox makes\n"
    "goes through warren's proxy, which allows or denies it by a preset and\n"
    "the rules you add, and logs the decision.\n"
    "\n"
    "Presets:\n"
    "  open      every public host (private and local addresses stay shut)\n"
    "  balanced  package registries, source hosting and model APIs (the\n"
    "            default of a new installation)\n"
    "  locked    nothing but what your rules allow\n"
    "\n"
    "Commands:\n"
    "  init PRESET                           choose the preset\n"
    "  ls [SANDBOX] [--wide]                 show the preset and the rules\n"
    "  allow network [--sandbox N] HOST[:PORT]  add an allow rule\n"
    "  deny network [--sandbox N] HOST[:PORT]   add a deny rule\n"
    "  rm RULE_ID...                         remove rules\n"
    "  check network [--sandbox N] HOST[:PORT]  would a connection pass?\n"
    "  log [--sandbox N] [--follow]          what was allowed and denied\n"
    "\n"
    "Run `warren policy COMMAND --help` for more.\n"
    "\n"
    "Example:\n"
    "  warren policy init locked\n"
    "  warren policy allow network api.example.com\n"
    "  warren policy check network api.example.com:443\n";

static const char init_help[] =
    "Usage: warren policy init open|balanced|locked\n"
    "\n"
    "Choose the preset every sandbox's connections are judged by. Your\n"
    "rules are kept: they are layered on the preset, and a deny rule wins\n"
    "over everything. Private, loopback and link-local addresses stay shut\n"
    "under every preset unless a rule names them; under balanced, npm's\n"
    "registry and apt's mirrors, which this host's own configuration\n"
    "names, may be on private addresses (never loopback or link-local).\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren policy init balanced\n";

static const char ls_help[] =
    "Usage: warren policy ls [SANDBOX] [--wide] [--json]\n"
    "\n"
    "Show the preset and the rules: ID ACTION HOST PORT SCOPE SOURCE. With\n"
    "SANDBOX, only the global rules and that sandbox's.\n"
    "\n"
    "Options:\n"
    "  --wide      also list the preset's own domains, and when each rule\n"
    "              was added\n"
    "  --json      print the policy object\n"
    "  -h, --help  show this help\n"
    "\n"
    "Examples:\n"
    "  warren policy ls\n"
    "  warren policy ls web --wide\n";

static const char rule_help[] =
    "Usage: warren policy allow|deny network [--sandbox N] HOST[:PORT]\n"
    "\n"
    "Add a rule. HOST is a name (example.com: that name only), a wildcard\n"
    "(*.example.com: the names below it), an IP address or a network\n"
    "(10.0.0.0/8). With :PORT the rule applies to that port only. Deny\n"
    "rules win over allow rules. A rule is global unless --sandbox names\n"
    "the one sandbox it applies to; it goes away with that sandbox.\n"
    "Adding a rule that exists changes nothing.\n"
    "\n"
    "Options:\n"
    "  --sandbox N  the rule applies to this sandbox only\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  warren policy allow network api.example.com\n"
    "  warren policy allow network --sandbox web '*.example.org:443'\n"
    "  warren policy allow network 10.0.0.5:5432\n"
    "  warren policy deny network example.net\n";

static const char rm_help[] =
    "Usage: warren policy rm RULE_ID...\n"
    "\n"
    "Remove rules by the id `warren policy ls` shows. Prints each id once\n"
    "removed; goes on after a failure and then exits 1.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren policy rm 7\n";

static const char check_help[] =
    "Usage: warren policy check network [--sandbox N] HOST[:PORT] [--json]\n"
    "\n"
    "Say whether a sandbox may connect to HOST (port 443 unless given), as\n"
    "the proxy would decide: by the name first, then by every address the\n"
    "name resolves to. Prints `allowed: REASON` or `denied: REASON`, then\n"
    "one line per address, then what the proxy's resolver has cached for\n"
    "the name (each family's answer, its age, the TTL left and how many\n"
    "queries were sent upstream for it). Exits 0 when allowed, 1 when\n"
    "denied.\n"
    "\n"
    "Options:\n"
    "  --sandbox N  decide for this sandbox (its rules too)\n"
    "  --json       print the check's result object\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  warren policy check network api.example.com\n"
    "  warren policy check network --sandbox web 10.0.0.5:5432\n";

static const char log_help[] =
    "Usage: warren policy log [--sandbox N] [--limit N] [--follow] [--json]\n"
    "\n"
    "Show the proxy's and the DNS server's latest decisions, oldest first:\n"
    "TIME SANDBOX KIND DESTINATION PORT VERDICT RULE UP DOWN. KIND is dns,\n"
    "connect (a CONNECT request), http (a plain proxied request) or tcp (a\n"
    "connection that did not ask for the proxy); VERDICT secret means\n"
    "allowed with a secret's credential set on the way out. RULE is the\n"
    "deciding rule, or why when none decided.\n"
    "\n"
    "The log keeps the newest entries of each sandbox (warrend's\n"
    "--policy-log-sandbox-max) and of all (--policy-log-max); how many\n"
    "older ones were dropped is said after the table.\n"
    "\n"
    "Options:\n"
    "  --sandbox N  only this sandbox's decisions\n"
    "  --limit N    the last N decisions (default 100, at most 10000)\n"
    "  -f, --follow keep printing decisions as they are made\n"
    "  --json       print {\"entries\":[...],\"dropped\":N,...} (with\n"
    "               --follow, one entry object per line)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  warren policy log --sandbox web\n"
    "  warren policy log -f\n";

enum { OPT_SANDBOX = 256, OPT_JSON, OPT_WIDE, OPT_LIMIT };

/* ---- shared -------------------------------------------------------------- */

/* Sandbox ids to names, for the SCOPE and SANDBOX columns. A daemon that
 * cannot list them leaves the ids as they are. */
static json_t *sandbox_names(const struct wr_cli_ctx *ctx) {
  _cleanup_json_ json_t *reply = NULL;
  json_t *names = json_object(), *sb;
  size_t i;

  if (wr_cli_call(ctx, "GET", "/v1/sandboxes", NULL, &reply, NULL, NULL) < 0)
    return names;
  json_array_foreach (json_object_get(reply, "sandboxes"), i, sb)
    json_object_set(names, wr_cli_jstr(sb, "id"), json_object_get(sb, "name"));
  return names;
}

static const char *name_of(const json_t *names, const char *id) {
  const char *name = json_string_value(json_object_get(names, id));

  return name != NULL ? name : id;
}

/* "example.com", "example.com:443", "[::1]:443". */
static char *host_port(const json_t *obj) {
  const char *host = wr_cli_jstr(obj, "host");
  int64_t port = wr_cli_jint(obj, "port");

  if (port <= 0)
    return xstrdup(host);
  if (strchr(host, ':') != NULL && strchr(host, '/') == NULL)
    return xasprintf("[%s]:%lld", host, (long long)port);
  return xasprintf("%s:%lld", host, (long long)port);
}

static int print_json_exit(const json_t *j) {
  return wr_cli_print_json(j) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
}

/* The commands without options of their own take only --help. */
static int only_help(int argc, char **argv, const char *cmd, const char *text,
                     bool *helped, wr_error_t *err) {
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  *helped = false;
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, err)) != -1) {
    if (c == '?')
      return wr_cli_usage(cmd, err);
    *helped = true;
    return wr_cli_help(text);
  }
  return 0;
}

/* ---- init ---------------------------------------------------------------- */

static int cmd_init(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *reply = NULL;
  wr_error_t err = {0};
  bool helped;
  size_t n;
  int r = only_help(argc, argv, "policy init", init_help, &helped, &err);

  if (helped || r != 0)
    return r;
  if (argc - optind != 1) {
    wr_error_set(&err, 0, "expected one preset: open, balanced or locked");
    return wr_cli_usage("policy init", &err);
  }
  if (wr_cli_check_text(argv[optind], "the preset", &err) < 0)
    return wr_cli_usage("policy init", &err);
  body = json_pack("{s:s}", "preset", argv[optind]);
  if (wr_cli_call(ctx, "POST", "/v1/policy/init", body, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  n = json_array_size(json_object_get(reply, "rules"));
  printf("preset: %s (%zu rule%s of your own kept)\n",
         wr_cli_jstr(reply, "preset"), n, n == 1 ? "" : "s");
  return WR_CLI_EXIT_OK;
}

/* ---- ls ------------------------------------------------------------------ */

/* A rule for a name the host's own configuration chose (npm's registry,
 * apt's mirrors): such a name may resolve to a private address. */
#define HOST_CHOSEN_NOTE " (host-chosen: private addresses allowed)"

static void add_rule_row(struct wr_cli_table *t, const json_t *rule,
                         const json_t *names) {
  const char *sandbox = json_string_value(json_object_get(rule, "sandbox"));
  char id[32] = "-", port[16] = "-", created[64] = "-";
  _cleanup_free_ char *source =
      xasprintf("%s%s", wr_cli_jstr(rule, "source"),
                wr_cli_jbool(rule, "host_chosen") ? HOST_CHOSEN_NOTE : "");

  if (wr_cli_jint(rule, "id") > 0)
    snprintf(id, sizeof(id), "%lld", (long long)wr_cli_jint(rule, "id"));
  if (wr_cli_jint(rule, "port") > 0)
    snprintf(port, sizeof(port), "%lld", (long long)wr_cli_jint(rule, "port"));
  if (json_object_get(rule, "created_at") != NULL)
    wr_cli_field_ago(rule, "created_at", created, sizeof(created));
  wr_cli_table_add(
      t, (const char *const[]){
             id, wr_cli_jstr(rule, "action"), wr_cli_jstr(rule, "host"), port,
             sandbox ? name_of(names, sandbox) : "global", source, created});
}

static int print_policy(const struct wr_cli_ctx *ctx, const json_t *policy,
                        bool wide) {
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  _cleanup_json_ json_t *names = sandbox_names(ctx);
  json_t *preset_rules = json_object_get(policy, "preset_rules"), *rule;
  size_t i;

  printf("preset: %s\n", wr_cli_jstr(policy, "preset"));
  wr_cli_table_init(&t, wide ? 7 : 6);
  wr_cli_table_add(&t, (const char *const[]){"ID", "ACTION", "HOST", "PORT",
                                             "SCOPE", "SOURCE", "CREATED"});
  json_array_foreach (json_object_get(policy, "rules"), i, rule)
    add_rule_row(&t, rule, names);
  if (wide)
    json_array_foreach (preset_rules, i, rule)
      add_rule_row(&t, rule, names);
  wr_cli_table_print(&t, stdout);
  if (!wide && json_array_size(preset_rules) > 0)
    printf("(and the preset's %zu domains: see --wide)\n",
           json_array_size(preset_rules));
  return WR_CLI_EXIT_OK;
}

static int cmd_ls(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  static const struct option opts[] = {
      {"wide", no_argument, NULL, OPT_WIDE},
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  bool wide = false, json = false;
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("policy ls", &err);
    if (c == 'h')
      return wr_cli_help(ls_help);
    wide |= c == OPT_WIDE;
    json |= c == OPT_JSON;
  }
  if (argc - optind > 1) {
    wr_error_set(&err, 0, "unexpected argument `%s`", argv[optind + 1]);
    return wr_cli_usage("policy ls", &err);
  }
  if (optind < argc) {
    _cleanup_free_ char *esc = wr_cli_escape(argv[optind]);
    path = xasprintf("/v1/policy?sandbox=%s", esc);
  }
  if (wr_cli_call(ctx, "GET", path ? path : "/v1/policy", NULL, &reply, NULL,
                  &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (json)
    return print_json_exit(reply);
  return print_policy(ctx, reply, wide);
}

/* ---- allow, deny, check: parsing ----------------------------------------- */

static const struct option rule_opts[] = {
    {"sandbox", required_argument, NULL, OPT_SANDBOX},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The kind word first, so that other kinds of rules can come later
 * without changing what these commands mean. */
static int rule_operands(int argc, char **argv,
                         struct wr_cli_policy_rule_opts *o, wr_error_t *err) {
  if (argc - optind < 1)
    return wr_error_set(err, 0, "expected `network HOST[:PORT]`");
  if (strcmp(argv[optind], "network") != 0)
    return wr_error_set(err, 0,
                        "unknown kind of rule `%s` (only `network` exists)",
                        argv[optind]);
  if (argc - optind != 2)
    return wr_error_set(err, 0, "expected one HOST[:PORT] after `network`");
  o->host = argv[optind + 1];
  return wr_cli_check_text(o->host, "the host", err);
}

int wr_cli_policy_rule_parse(int argc, char **argv,
                             struct wr_cli_policy_rule_opts *o,
                             wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  o->verb = argc > 0 ? argv[0] : "";
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", rule_opts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == OPT_SANDBOX && wr_cli_check_text(optarg, "--sandbox", err) < 0)
      return -1;
    if (c == OPT_SANDBOX)
      o->sandbox = optarg;
    else if (c == OPT_JSON && strcmp(o->verb, "check") != 0)
      return wr_error_set(err, 0, "unknown option `--json`");
    else if (c == OPT_JSON)
      o->json = true;
    else if (c == 'h')
      o->help = true;
  }
  if (o->help)
    return 0;
  return rule_operands(argc, argv, o, err);
}

/* ---- allow, deny --------------------------------------------------------- */

static int cmd_rule(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_policy_rule_opts o;
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *cmd = xasprintf("policy %s", argv[0]);
  _cleanup_free_ char *target = NULL;
  wr_error_t err = {0};
  int status = 0;

  if (wr_cli_policy_rule_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage(cmd, &err);
  if (o.help)
    return wr_cli_help(rule_help);
  body = json_pack("{s:s,s:s}", "action", o.verb, "host", o.host);
  if (o.sandbox != NULL)
    json_object_set_new(body, "sandbox", json_string(o.sandbox));
  if (wr_cli_call(ctx, "POST", "/v1/policy/rules", body, &reply, &status,
                  &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  target = host_port(reply);
  wr_cli_line(stdout, "rule %lld: %s %s (%s%s%s)",
              (long long)wr_cli_jint(reply, "id"), wr_cli_jstr(reply, "action"),
              target, o.sandbox ? "sandbox " : "global",
              o.sandbox ? o.sandbox : "",
              status == 200 ? "; it was already there" : "");
  return WR_CLI_EXIT_OK;
}

/* ---- rm ------------------------------------------------------------------ */

static int delete_rule(const struct wr_cli_ctx *ctx, const char *id, void *arg,
                       wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(id);
  _cleanup_free_ char *path = xasprintf("/v1/policy/rules/%s", esc);

  (void)arg;
  return wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err);
}

static int cmd_rm(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};
  bool helped;
  int r = only_help(argc, argv, "policy rm", rm_help, &helped, &err);

  if (helped || r != 0)
    return r;
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more rule ids");
    return wr_cli_usage("policy rm", &err);
  }
  return wr_cli_each(ctx, argv + optind, (size_t)(argc - optind), delete_rule,
                     NULL);
}

/* ---- check --------------------------------------------------------------- */

/* One family's cached answer: its addresses or error, age and TTL left. */
static void print_cached(const char *family, const json_t *e) {
  json_t *addr;
  size_t i;
  wr_buf_t line;

  if (!json_is_object(e))
    return;
  wr_buf_init(&line);
  if (json_object_get(e, "error") != NULL &&
      !json_is_null(json_object_get(e, "error")))
    wr_buf_printf(&line, "%s", wr_cli_jstr(e, "error"));
  json_array_foreach (json_object_get(e, "addresses"), i, addr)
    wr_buf_printf(&line, "%s%s", i ? ", " : "", json_string_value(addr));
  wr_buf_append(&line, "", 1);
  wr_cli_line(stdout,
              "  cached %s: %s (age %lld s, %lld s left of %lld, %lld "
              "upstream %s)",
              family, line.data, (long long)wr_cli_jint(e, "age_s"),
              (long long)wr_cli_jint(e, "ttl_left_s"),
              (long long)wr_cli_jint(e, "ttl_s"),
              (long long)wr_cli_jint(e, "queries"),
              wr_cli_jint(e, "queries") == 1 ? "query" : "queries");
  wr_buf_free(&line);
}

static void print_check(const json_t *res) {
  const json_t *cache = json_object_get(res, "cache");
  json_t *addr;
  size_t i;

  wr_cli_line(stdout, "%s: %s",
              wr_cli_jbool(res, "allow") ? "allowed" : "denied",
              wr_cli_jstr(res, "reason"));
  if (wr_cli_jbool(res, "host_chosen"))
    wr_cli_line(stdout, "  host-chosen: private addresses allowed (the host's "
                        "own configuration names this host)");
  json_array_foreach (json_object_get(res, "addresses"), i, addr)
    wr_cli_line(stdout, "  %s: %s (%s)", wr_cli_jstr(addr, "addr"),
                wr_cli_jbool(addr, "allow") ? "allowed" : "denied",
                wr_cli_jstr(addr, "reason"));
  if (json_object_get(res, "resolve_error") != NULL)
    wr_cli_line(stdout, "  does not resolve: %s",
                wr_cli_jstr(res, "resolve_error"));
  print_cached("A", json_object_get(cache, "A"));
  print_cached("AAAA", json_object_get(cache, "AAAA"));
}

static int cmd_check(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_policy_rule_opts o;
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *reply = NULL;
  wr_error_t err = {0};

  if (wr_cli_policy_rule_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("policy check", &err);
  if (o.help)
    return wr_cli_help(check_help);
  body = json_pack("{s:s}", "host", o.host);
  if (o.sandbox != NULL)
    json_object_set_new(body, "sandbox", json_string(o.sandbox));
  if (wr_cli_call(ctx, "POST", "/v1/policy/check", body, &reply, NULL, &err) <
      0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o.json && wr_cli_print_json(reply) < 0)
    return WR_CLI_EXIT_ERROR;
  if (!o.json)
    print_check(reply);
  return wr_cli_jbool(reply, "allow") ? WR_CLI_EXIT_OK : WR_CLI_EXIT_ERROR;
}

/* ---- log: parsing -------------------------------------------------------- */

int wr_cli_policy_log_parse(int argc, char **argv,
                            struct wr_cli_policy_log_opts *o, wr_error_t *err) {
  static const struct option opts[] = {
      {"sandbox", required_argument, NULL, OPT_SANDBOX},
      {"limit", required_argument, NULL, OPT_LIMIT},
      {"follow", no_argument, NULL, 'f'},
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":fh", opts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == OPT_SANDBOX && wr_cli_check_text(optarg, "--sandbox", err) < 0)
      return -1;
    if (c == OPT_LIMIT && wr_parse_u64(optarg, 1, 10000, &o->limit, err) < 0)
      return wr_error_wrap(err, "--limit");
    o->sandbox = c == OPT_SANDBOX ? optarg : o->sandbox;
    o->follow |= c == 'f';
    o->json |= c == OPT_JSON;
    o->help |= c == 'h';
  }
  if (optind < argc && !o->help)
    return wr_error_set(err, 0, "unexpected argument `%s`", argv[optind]);
  return 0;
}

char *wr_cli_policy_log_path(const struct wr_cli_policy_log_opts *o,
                             int64_t after) {
  wr_buf_t b;

  wr_buf_init(&b);
  wr_buf_printf(&b, "/v1/policy/log?limit=%llu",
                (unsigned long long)(o->limit ? o->limit : 100));
  if (o->sandbox != NULL) {
    _cleanup_free_ char *esc = wr_cli_escape(o->sandbox);
    wr_buf_printf(&b, "&sandbox=%s", esc);
  }
  if (after > 0)
    wr_buf_printf(&b, "&after=%lld", (long long)after);
  if (o->follow)
    wr_buf_puts(&b, "&follow=true");
  return wr_buf_steal(&b, NULL);
}

/* ---- log: output --------------------------------------------------------- */

#define LOG_COLS 9

static const char *const log_header[LOG_COLS] = {
    "TIME",    "SANDBOX", "KIND", "DESTINATION", "PORT",
    "VERDICT", "RULE",    "UP",   "DOWN"};
/* Column widths when following: rows are printed as they come. */
static const int log_widths[LOG_COLS] = {14, 12, 7, 30, 5, 7, 30, 9, 0};

struct log_view {
  const struct wr_cli_ctx *ctx;
  json_t *names;  /* sandbox id -> name */
  bool refreshed; /* names were fetched again for an unknown id */
  bool json;
};

/* Local time, to the second: "11-30 14:02:41". */
static void log_time(const json_t *e, char *out, size_t size) {
  struct tm tm;
  int64_t ms;
  time_t t;

  if (wr_cli_parse_time(wr_cli_jstr(e, "time"), &ms, NULL) < 0) {
    snprintf(out, size, "-");
    return;
  }
  t = (time_t)(ms / 1000);
  localtime_r(&t, &tm);
  strftime(out, size, "%m-%d %H:%M:%S", &tm);
}

static void log_size(const json_t *e, const char *key, char *out, size_t size) {
  int64_t v = wr_cli_jint(e, key);

  if (v <= 0)
    snprintf(out, size, "-");
  else
    wr_format_size((uint64_t)v, out, size);
}

/* A sandbox created after the names were read is looked up once more. */
static const char *log_sandbox(struct log_view *v, const char *id) {
  if (json_object_get(v->names, id) == NULL && !v->refreshed) {
    json_decref(v->names);
    v->names = sandbox_names(v->ctx);
    v->refreshed = true;
  }
  return name_of(v->names, id);
}

static const char *verdict(const json_t *e) {
  if (!wr_cli_jbool(e, "allow"))
    return "denied";
  return wr_cli_jbool(e, "intercepted") ? "secret" : "allowed";
}

/* One entry as the nine cells of a row (owned). */
static char **log_row(struct log_view *v, const json_t *e) {
  const char *host = json_string_value(json_object_get(e, "host"));
  const char *rule = json_string_value(json_object_get(e, "rule"));
  const char *sandbox = wr_cli_jstr(e, "sandbox");
  char time[32], port[16] = "-", up[32], down[32];
  char **row = NULL;

  log_time(e, time, sizeof(time));
  if (wr_cli_jint(e, "port") > 0)
    snprintf(port, sizeof(port), "%lld", (long long)wr_cli_jint(e, "port"));
  log_size(e, "bytes_up", up, sizeof(up));
  log_size(e, "bytes_down", down, sizeof(down));
  row = wr_strv_push(row, time);
  row = wr_strv_push(row, *sandbox ? log_sandbox(v, sandbox) : "-");
  row = wr_strv_push(row, wr_cli_jstr(e, "kind"));
  row = wr_strv_push(row, host ? host : wr_cli_jstr(e, "addr"));
  row = wr_strv_push(row, port);
  row = wr_strv_push(row, verdict(e));
  row = wr_strv_push(row, rule ? rule : wr_cli_jstr(e, "reason"));
  row = wr_strv_push(row, up);
  return wr_strv_push(row, down);
}

static void print_fixed(const char *const *cells) {
  for (int i = 0; i < LOG_COLS; i++) {
    _cleanup_free_ char *shown = wr_cli_quote(cells[i]);
    if (i + 1 == LOG_COLS)
      printf("%s\n", shown);
    else
      printf("%-*s   ", log_widths[i], shown);
  }
  fflush(stdout);
}

/* A followed entry: a row of fixed widths, or a line of JSON. */
static int on_log_entry(json_t *e, void *arg, wr_error_t *err) {
  struct log_view *v = arg;
  _cleanup_strv_ char **row = NULL;

  (void)err;
  if (v->json) {
    json_dumpf(e, stdout, JSON_COMPACT | wr_cli_json_flags());
    fputc('\n', stdout);
    fflush(stdout);
    return 0;
  }
  row = log_row(v, e);
  print_fixed((const char *const *)row);
  return 0;
}

static int follow_log(struct log_view *v, const char *path, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};

  if (wr_cli_connect(v->ctx, &c, err) < 0 ||
      wr_http_request_stream(c, "GET", path, NULL, NULL, 0, &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(c, &resp, err);
  if (!v->json)
    print_fixed(log_header);
  return wr_cli_ndjson_read(c, on_log_entry, v, err);
}

/* What retention dropped, on stderr so that the table stays a table. */
static void print_dropped(const json_t *reply, const char *sandbox) {
  const json_t *retention = json_object_get(reply, "retention");
  int64_t dropped = wr_cli_jint(reply, "dropped");

  if (dropped <= 0)
    return;
  fprintf(stderr,
          "%lld older %s of %s %s dropped: the log keeps the newest %lld of "
          "each sandbox and %lld in all\n",
          (long long)dropped, dropped == 1 ? "entry" : "entries",
          sandbox ? sandbox : "all sandboxes", dropped == 1 ? "was" : "were",
          (long long)wr_cli_jint(retention, "per_sandbox"),
          (long long)wr_cli_jint(retention, "total"));
}

/* --json prints the reply as it is: {"entries":[...],"dropped":N,...}. */
static int print_log(struct log_view *v, const json_t *reply,
                     const char *sandbox) {
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  json_t *entries = json_object_get(reply, "entries"), *e;
  size_t i;

  if (v->json)
    return print_json_exit(reply);
  wr_cli_table_init(&t, LOG_COLS);
  wr_cli_table_add(&t, log_header);
  json_array_foreach ((json_t *)entries, i, e) {
    _cleanup_strv_ char **row = log_row(v, e);
    wr_cli_table_add(&t, (const char *const *)row);
  }
  wr_cli_table_print(&t, stdout);
  print_dropped(reply, sandbox);
  return WR_CLI_EXIT_OK;
}

static int cmd_log(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_policy_log_opts o;
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  struct log_view v = {.ctx = ctx};
  wr_error_t err = {0};
  int r;

  if (wr_cli_policy_log_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("policy log", &err);
  if (o.help)
    return wr_cli_help(log_help);
  v.json = o.json;
  v.names = o.json ? json_object() : sandbox_names(ctx);
  path = wr_cli_policy_log_path(&o, 0);
  if (o.follow)
    r = follow_log(&v, path, &err);
  else if ((r = wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err)) == 0)
    r = print_log(&v, reply, o.sandbox);
  json_decref(v.names);
  if (r < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return r;
}

/* ---- dispatch ------------------------------------------------------------ */

static const struct wr_cli_command policy_commands[] = {
    {"init", "Choose the preset", cmd_init},
    {"ls", "Show the preset and the rules", cmd_ls},
    {"allow", "Add an allow rule", cmd_rule},
    {"deny", "Add a deny rule", cmd_rule},
    {"rm", "Remove rules", cmd_rm},
    {"check", "Say whether a connection would be allowed", cmd_check},
    {"log", "Show the decisions made", cmd_log},
};

int wr_cli_cmd_policy(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};

  if (argc < 2) {
    wr_error_set(&err, 0,
                 "expected a subcommand: init, ls, allow, deny, rm, check or "
                 "log");
    return wr_cli_usage("policy", &err);
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    return wr_cli_help(help);
  return wr_cli_dispatch(ctx, policy_commands, WR_ARRAY_SIZE(policy_commands),
                         "policy", argc - 1, argv + 1);
}
