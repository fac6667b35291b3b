/* `warren project`: projects in four tiers with git as the record
 * (/v1/projects; docs/projects.md). */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren project create NAME --image TEMPLATE [--remote URL\n"
    "                             [--remote-secret SECRET]] [--label K=V]...\n"
    "                             [--author 'NAME <EMAIL>'] [--install CMD]\n"
    "       warren project ls [--json]\n"
    "       warren project inspect NAME\n"
    "       warren project open NAME [--json]\n"
    "       warren project commit NAME -m MESSAGE [--author 'NAME <EMAIL>']\n"
    "       warren project log NAME [--limit N] [--json]\n"
    "       warren project diff NAME REV [REV2]\n"
    "       warren project restore NAME REV\n"
    "       warren project remix NAME NEW [--label K=V]...\n"
    "       warren project demote NAME [--to cool|cold]\n"
    "       warren project rm NAME\n"
    "       warren project lease NAME ... (see `warren project lease --help`)\n"
    "\n"
    "A project is a git mirror on the host and, while someone works on it,\n"
    "a sandbox made from its template (named project-NAME). It is in one\n"
    "of four tiers: hot (the sandbox runs), warm (paused), cool (a disk\n"
    "snapshot; no sandbox), cold (only git). `open` brings it back from\n"
    "any tier and says what it did; the planner (`warren plan`) moves the\n"
    "least recently edited ones down. Git is the record: `commit` commits\n"
    "in the sandbox, takes the commit into the mirror through a checked\n"
    "bundle, and pushes the mirror to --remote with the credential in\n"
    "--remote-secret (a `warren secret`, USER:PASSWORD or a token), which\n"
    "never enters the sandbox.\n"
    "\n"
    "  create   a project (cold: nothing runs until it is opened)\n"
    "  ls       NAME TIER TEMPLATE LAST EDIT SANDBOX\n"
    "  inspect  everything about one, as JSON\n"
    "  open     a running sandbox for it, from whichever tier it is in\n"
    "  commit   stage everything, commit, take it in, push\n"
    "  log      its versions, newest first (version 1 is the first)\n"
    "  diff     what changed from REV to REV2 (default: the last version);\n"
    "           a REV is a version number (3, v3) or a commit\n"
    "  restore  make the files as they were at REV, as a new version\n"
    "  remix    a new project NEW from this one's history (cold; the\n"
    "           source's sandbox is not touched)\n"
    "  demote   down without waking it: to cool (snapshot the disk, delete\n"
    "           the sandbox; the default), or --to cold (remove the\n"
    "           snapshot too); running it again changes nothing\n"
    "  rm       the project, its sandbox, its snapshot and its mirror\n"
    "  lease    one unit of work at a time: take, renew, release\n"
    "\n"
    "Options:\n"
    "  --image, --template T  the template (or image) its sandbox is made\n"
    "                         from; its WORKDIR is the repository\n"
    "  --remote URL           an http(s) git remote the mirror is pushed to\n"
    "  --remote-secret NAME   the secret holding its credential\n"
    "  --label K=V            a label (an owner, say); repeatable\n"
    "  --author 'N <E>'       who commits (default warren <warren@localhost>)\n"
    "  --install CMD          the install step after a checkout from git\n"
    "                         (default: npm install --prefer-offline when\n"
    "                         there is a package.json; '' for none)\n"
    "  -m, --message MSG      the commit's message\n"
    "  --to TIER              demote to cool or cold\n"
    "  --limit N              log: at most N versions\n"
    "  --json                 print JSON\n"
    "  -h, --help             show this help\n"
    "\n"
    "Examples:\n"
    "  warren image build vite -f Dockerfile .\n"
    "  warren project create shop --image vite --label owner=ann\n"
    "  warren project open shop\n"
    "  warren exec project-shop -- sh -c 'echo hi > /app/hello.txt'\n"
    "  warren project commit shop -m 'Say hello'\n"
    "  warren project demote shop --to cold && warren project open shop\n";

enum {
  OPT_IMAGE = 256,
  OPT_REMOTE,
  OPT_SECRET,
  OPT_LABEL,
  OPT_AUTHOR,
  OPT_INSTALL,
  OPT_TO,
  OPT_LIMIT,
  OPT_JSON,
};

static const struct option opts[] = {
    {"image", required_argument, NULL, OPT_IMAGE},
    {"template", required_argument, NULL, OPT_IMAGE},
    {"remote", required_argument, NULL, OPT_REMOTE},
    {"remote-secret", required_argument, NULL, OPT_SECRET},
    {"label", required_argument, NULL, OPT_LABEL},
    {"author", required_argument, NULL, OPT_AUTHOR},
    {"install", required_argument, NULL, OPT_INSTALL},
    {"message", required_argument, NULL, 'm'},
    {"to", required_argument, NULL, OPT_TO},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct project_opts {
  const char *image, *remote, *secret, *author, *install, *message, *to;
  char **labels; /* "K=V" */
  uint64_t limit;
  bool json, help;
  char **args; /* positional, after the subcommand */
  size_t nargs;
};

static int parse_one(struct project_opts *o, int c, wr_error_t *err) {
  switch (c) {
  case 'h':
    o->help = true;
    return 0;
  case OPT_JSON:
    o->json = true;
    return 0;
  case OPT_IMAGE:
    o->image = optarg;
    return 0;
  case OPT_REMOTE:
    o->remote = optarg;
    return 0;
  case OPT_SECRET:
    o->secret = optarg;
    return 0;
  case OPT_AUTHOR:
    o->author = optarg;
    return 0;
  case OPT_INSTALL:
    o->install = optarg;
    return 0;
  case 'm':
    o->message = optarg;
    return 0;
  case OPT_TO:
    o->to = optarg;
    return 0;
  case OPT_LABEL:
    return wr_cli_push_kv(&o->labels, optarg, "--label", false, err);
  case OPT_LIMIT:
    if (wr_parse_u64(optarg, 1, 1000000, &o->limit, err) < 0)
      return wr_error_wrap(err, "--limit");
    return 0;
  default:
    return -1;
  }
}

static int parse(int argc, char **argv, struct project_opts *o,
                 wr_error_t *err) {
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":hm:", opts, err)) != -1)
    if (c == '?' || parse_one(o, c, err) < 0)
      return -1;
  o->args = argv + optind;
  o->nargs = (size_t)(argc - optind);
  for (size_t i = 0; i < o->nargs; i++)
    if (wr_cli_check_text(o->args[i], "an argument", err) < 0)
      return -1;
  return 0;
}

static char *project_path(const char *name, const char *suffix) {
  _cleanup_free_ char *e = wr_cli_escape(name);

  return xasprintf("/v1/projects/%s%s", e, suffix ? suffix : "");
}

static json_t *labels_json(char *const *labels) {
  json_t *l = json_object();

  for (size_t i = 0; labels != NULL && labels[i] != NULL; i++) {
    const char *eq = strchr(labels[i], '=');
    _cleanup_free_ char *k = xstrndup(labels[i], (size_t)(eq - labels[i]));
    json_object_set_new(l, k, json_string(eq + 1));
  }
  return l;
}

/* "2 hours ago" for a time in ms. */
static void ago(int64_t ms, char *out, size_t size) {
  wr_cli_format_ago(wr_now_ms(), ms, out, size);
}

/* What an operation did, step by step. */
static void print_steps(const json_t *reply) {
  const json_t *steps = json_object_get(reply, "steps"), *s;
  size_t i;

  json_array_foreach (steps, i, s)
    wr_cli_line(stdout, "  %-28s %8.1f ms", wr_cli_jstr(s, "step"),
                json_real_value(json_object_get(s, "ms")));
}

/* POST path with body; prints the reply as JSON or through show. */
static int post(const struct wr_cli_ctx *ctx, const struct project_opts *o,
                const char *path, json_t *body,
                void (*show)(const struct project_opts *o, const json_t *r)) {
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_json_ json_t *b = body;
  wr_error_t err = {0};

  if (wr_cli_call(ctx, "POST", path, b, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o->json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  show(o, reply);
  return WR_CLI_EXIT_OK;
}

static void show_created(const struct project_opts *o, const json_t *r) {
  (void)o;
  wr_cli_line(stdout, "%s: created (cold, template %s)", wr_cli_jstr(r, "name"),
              wr_cli_jstr(r, "template"));
}

static int cmd_create(const struct wr_cli_ctx *ctx,
                      const struct project_opts *o) {
  json_t *body;

  if (o->nargs != 1 || o->image == NULL)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "usage: warren project create NAME --image TEMPLATE");
  body = json_pack("{s:s, s:s, s:o}", "name", o->args[0], "template", o->image,
                   "labels", labels_json(o->labels));
  if (o->remote)
    json_object_set_new(body, "remote", json_string(o->remote));
  if (o->secret)
    json_object_set_new(body, "remote_secret", json_string(o->secret));
  if (o->author)
    json_object_set_new(body, "author", json_string(o->author));
  if (o->install)
    json_object_set_new(body, "install", json_string(o->install));
  return post(ctx, o, "/v1/projects", body, show_created);
}

static void add_row(struct wr_cli_table *t, const json_t *p) {
  char edit[48];
  const char *sb = wr_cli_jstr(p, "sandbox");

  ago(wr_cli_jint(p, "last_edit_ms"), edit, sizeof(edit));
  wr_cli_table_add(t, (const char *const[]){
                          wr_cli_jstr(p, "name"), wr_cli_jstr(p, "tier"),
                          wr_cli_jstr(p, "template"), edit, sb[0] ? sb : "-"});
}

static int cmd_ls(const struct wr_cli_ctx *ctx, const struct project_opts *o) {
  _cleanup_json_ json_t *reply = NULL;
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  json_t *list, *p;
  wr_error_t err = {0};
  size_t i;

  if (o->nargs != 0)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "project ls takes no name");
  if (wr_cli_call(ctx, "GET", "/v1/projects", NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  list = json_object_get(reply, "projects");
  if (o->json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  wr_cli_table_init(&t, 5);
  wr_cli_table_add(&t, (const char *const[]){"NAME", "TIER", "TEMPLATE",
                                             "LAST EDIT", "SANDBOX"});
  json_array_foreach (list, i, p)
    add_row(&t, p);
  wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

static int cmd_inspect(const struct wr_cli_ctx *ctx,
                       const struct project_opts *o) {
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};

  if (o->nargs != 1)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "usage: warren project inspect NAME");
  path = project_path(o->args[0], NULL);
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
}

static void show_opened(const struct project_opts *o, const json_t *r) {
  (void)o;
  wr_cli_line(stdout, "%s: open from %s in %.1f ms: sandbox %s",
              wr_cli_jstr(r, "name"), wr_cli_jstr(r, "from"),
              json_real_value(json_object_get(r, "ms")),
              wr_cli_jstr(r, "sandbox"));
  print_steps(r);
}

static void show_committed(const struct project_opts *o, const json_t *r) {
  const char *rev = wr_cli_jstr(r, "revision");

  (void)o;
  if (!json_is_true(json_object_get(r, "committed")))
    wr_cli_line(stdout, "%s: nothing to commit (version %lld)",
                wr_cli_jstr(r, "name"), (long long)wr_cli_jint(r, "version"));
  else
    wr_cli_line(stdout, "%s: version %lld (%.12s)", wr_cli_jstr(r, "name"),
                (long long)wr_cli_jint(r, "version"), rev);
  if (json_is_true(json_object_get(r, "pushed")))
    wr_cli_line(stdout, "pushed to %s", wr_cli_jstr(r, "remote"));
  else if (json_object_get(r, "push_error") != NULL)
    wr_cli_line(stderr,
                "warren: the push to %s failed (the version is in "
                "the mirror; the next commit pushes again): %s",
                wr_cli_jstr(r, "remote"), wr_cli_jstr(r, "push_error"));
}

static void show_demoted(const struct project_opts *o, const json_t *r) {
  (void)o;
  wr_cli_line(stdout, "%s: %s -> %s", wr_cli_jstr(r, "name"),
              wr_cli_jstr(r, "from"), wr_cli_jstr(r, "to"));
  print_steps(r);
}

static void show_remixed(const struct project_opts *o, const json_t *r) {
  (void)o;
  wr_cli_line(stdout, "%s: remixed from %s (cold)", wr_cli_jstr(r, "name"),
              wr_cli_jstr(r, "from"));
}

static void show_removed(const struct project_opts *o, const json_t *r) {
  (void)o;
  wr_cli_line(stdout, "%s", wr_cli_jstr(r, "name"));
}

/* Before a slow open, what it is about to do (a terminal only). */
static void say_tier(const struct wr_cli_ctx *ctx, const char *name) {
  _cleanup_free_ char *path = project_path(name, NULL);
  _cleanup_json_ json_t *p = NULL;
  const char *tier;

  if (wr_cli_call(ctx, "GET", path, NULL, &p, NULL, NULL) < 0)
    return;
  tier = wr_cli_jstr(p, "tier");
  if (strcmp(tier, "cold") == 0)
    wr_cli_line(stderr,
                "%s is cold: a sandbox from its template, its "
                "history checked out, the install, the start "
                "command...",
                name);
  else if (strcmp(tier, "cool") == 0)
    wr_cli_line(stderr, "%s is cool: a sandbox from its snapshot...", name);
}

/* open, commit, demote, restore, remix, rm: a POST (rm: DELETE) on one
 * project. */
static int cmd_action(const struct wr_cli_ctx *ctx,
                      const struct project_opts *o, const char *sub) {
  _cleanup_free_ char *path = NULL;
  json_t *body = json_object();
  size_t want =
      strcmp(sub, "restore") == 0 || strcmp(sub, "remix") == 0 ? 2 : 1;
  void (*show)(const struct project_opts *, const json_t *) = show_opened;

  if (o->nargs != want) {
    json_decref(body);
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "usage: warren project %s NAME%s (see `warren "
                       "project --help`)",
                       sub,
                       strcmp(sub, "restore") == 0 ? " REV"
                       : strcmp(sub, "remix") == 0 ? " NEW"
                                                   : "");
  }
  if (strcmp(sub, "commit") == 0) {
    if (o->message == NULL) {
      json_decref(body);
      return wr_cli_fail(WR_CLI_EXIT_USAGE, "commit needs -m MESSAGE");
    }
    json_object_set_new(body, "message", json_string(o->message));
    show = show_committed;
  } else if (strcmp(sub, "restore") == 0) {
    json_object_set_new(body, "revision", json_string(o->args[1]));
    show = show_committed;
  } else if (strcmp(sub, "remix") == 0) {
    json_object_set_new(body, "name", json_string(o->args[1]));
    json_object_set_new(body, "labels", labels_json(o->labels));
    show = show_remixed;
  } else if (strcmp(sub, "demote") == 0) {
    if (o->to)
      json_object_set_new(body, "to", json_string(o->to));
    show = show_demoted;
  }
  if (o->author)
    json_object_set_new(body, "author", json_string(o->author));
  if (strcmp(sub, "rm") == 0) {
    _cleanup_json_ json_t *reply = NULL;
    wr_error_t err = {0};
    json_decref(body);
    path = project_path(o->args[0], NULL);
    if (wr_cli_call(ctx, "DELETE", path, NULL, &reply, NULL, &err) < 0)
      return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
    show_removed(o, reply);
    return WR_CLI_EXIT_OK;
  }
  if (strcmp(sub, "open") == 0 && !o->json && isatty(STDERR_FILENO))
    say_tier(ctx, o->args[0]);
  _cleanup_free_ char *suffix = xasprintf("/%s", sub);
  path = project_path(o->args[0], suffix);
  return post(ctx, o, path, body, show);
}

static int cmd_log(const struct wr_cli_ctx *ctx, const struct project_opts *o) {
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *q = NULL;
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  json_t *list, *v;
  wr_error_t err = {0};
  size_t i;

  if (o->nargs != 1)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "usage: warren project log NAME");
  q = xasprintf("/log?limit=%llu", (unsigned long long)o->limit);
  path = project_path(o->args[0], q);
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  list = json_object_get(reply, "versions");
  if (o->json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  wr_cli_table_init(&t, 5);
  wr_cli_table_add(&t, (const char *const[]){"VERSION", "COMMIT", "WHEN",
                                             "AUTHOR", "SUBJECT"});
  json_array_foreach (list, i, v) {
    char ver[24], when[48], commit[16];
    snprintf(ver, sizeof(ver), "%lld", (long long)wr_cli_jint(v, "version"));
    snprintf(commit, sizeof(commit), "%.12s", wr_cli_jstr(v, "commit"));
    ago(wr_cli_jint(v, "time") * 1000, when, sizeof(when));
    wr_cli_table_add(&t, (const char *const[]){ver, commit, when,
                                               wr_cli_jstr(v, "author"),
                                               wr_cli_jstr(v, "subject")});
  }
  wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

static int cmd_diff(const struct wr_cli_ctx *ctx,
                    const struct project_opts *o) {
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *q = NULL;
  _cleanup_free_ char *from = NULL;
  _cleanup_free_ char *to = NULL;
  wr_error_t err = {0};
  _cleanup_(wr_buf_free) wr_buf_t safe = {0};
  const char *patch;

  if (o->nargs != 2 && o->nargs != 3)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "usage: warren project diff NAME REV [REV2]");
  from = wr_cli_escape(o->args[1]);
  to = wr_cli_escape(o->nargs == 3 ? o->args[2] : "HEAD");
  q = xasprintf("/diff?from=%s&to=%s", from, to);
  path = project_path(o->args[0], q);
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o->json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  patch = wr_cli_jstr(reply, "patch");
  wr_cli_defuse(patch, strlen(patch), &safe);
  if (safe.len > 0)
    fwrite(safe.data, 1, safe.len, stdout);
  if (json_is_true(json_object_get(reply, "truncated")))
    fputs("warren: the patch is longer than the daemon sends; see --json "
          "for the files\n",
          stderr);
  return WR_CLI_EXIT_OK;
}

int wr_cli_cmd_project(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct project_opts o = {0};
  const char *sub = argc > 1 ? argv[1] : NULL;
  wr_error_t err = {0};
  int r;

  if (sub == NULL)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "usage: warren project COMMAND (see `warren project "
                       "--help`)");
  if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0)
    return wr_cli_help(help);
  if (strcmp(sub, "lease") == 0)
    return wr_cli_project_lease(ctx, argc - 1, argv + 1);
  if (parse(argc - 1, argv + 1, &o, &err) < 0) {
    wr_strv_free(o.labels);
    return wr_cli_usage("project", &err);
  }
  if (o.help)
    r = wr_cli_help(help);
  else if (strcmp(sub, "create") == 0)
    r = cmd_create(ctx, &o);
  else if (strcmp(sub, "ls") == 0)
    r = cmd_ls(ctx, &o);
  else if (strcmp(sub, "inspect") == 0)
    r = cmd_inspect(ctx, &o);
  else if (strcmp(sub, "log") == 0)
    r = cmd_log(ctx, &o);
  else if (strcmp(sub, "diff") == 0)
    r = cmd_diff(ctx, &o);
  else if (strcmp(sub, "open") == 0 || strcmp(sub, "commit") == 0 ||
           strcmp(sub, "demote") == 0 || strcmp(sub, "restore") == 0 ||
           strcmp(sub, "remix") == 0 || strcmp(sub, "rm") == 0)
    r = cmd_action(ctx, &o, sub);
  else
    r = wr_cli_fail(WR_CLI_EXIT_USAGE,
                    "unknown project command `%s` (see `warren project "
                    "--help`)",
                    sub);
  wr_strv_free(o.labels);
  return r;
}
