/* `warren create`: POST /v1/sandboxes. */
#include "cli/cli.h"

#include <jansson.h>
#include <sys/stat.h>

static const char help[] =
    "Usage: warren create [OPTIONS] [--clone] [AGENT] [PATH]\n"
    "\n"
    "Create a sandbox from an image and start it (unless --no-start).\n"
    "Prints the sandbox's name.\n"
    "\n"
    "With PATH, a directory of this host is the sandbox's workspace, and\n"
    "processes start in /workspace:\n"
    "  direct mode (default)  PATH is /workspace, read-write: edits made\n"
    "                         inside are on the host at once, owned by\n"
    "                         PATH's owner (`warren diff` lists them)\n"
    "  clone mode (--clone)   PATH must be a git repository with a commit;\n"
    "                         the sandbox works on its own clone in\n"
    "                         /workspace (branches and tags; no hooks, no\n"
    "                         untracked files), PATH is read-only at\n"
    "                         /origin, and the repository gets a remote\n"
    "                         warren-NAME: git fetch warren-NAME BRANCH\n"
    "AGENT is an agent kit (shell, claude, codex, or your own): what\n"
    "`warren run --name NAME` starts, its environment and the hosts its\n"
    "policy allows. Default: shell. With a single argument, an existing\n"
    "directory (or anything with a '/') is PATH, anything else AGENT.\n"
    "\n"
    "Options:\n"
    "  --name NAME      the sandbox's name: lowercase letters, digits, '.',\n"
    "                   '_' and '-' (default: generated)\n"
    "  --image IMAGE    the image to start from (default: base)\n"
    "  --snapshot S     stack snapshot S (and its image) under the\n"
    "                   sandbox's own files, with no copy\n"
    "  --memory SIZE    memory limit, like 512m or 1g\n"
    "  --cpus N         CPU limit, like 1 or 1.5\n"
    "  --pids N         most processes at once\n"
    "  --disk SIZE      disk limit of the sandbox's own files, like 2g: they\n"
    "                   go on a filesystem of that size (at least 16m)\n"
    "  --env K=V        environment of every process (repeatable)\n"
    "  --label K=V      a label to find it by (repeatable)\n"
    "  --workdir DIR    working directory of processes (default: /)\n"
    "  --idle-pause T   pause it after T without activity (requests,\n"
    "                   attached clients, connections, CPU use), like 300,\n"
    "                   10m or 1h; 0: never (default: warrend's, 300s);\n"
    "                   any request wakes it\n"
    "  --no-start       create it stopped\n"
    "  --no-pool        never take a sandbox from the image's warm pool\n"
    "                   (`warren pool`; by default a create takes one when\n"
    "                   it can, and prints its name as usual)\n"
    "  --restart-start  taken from a pool: restart the template's start\n"
    "                   command with this create's environment (otherwise it\n"
    "                   keeps the pool's; processes started later get it)\n"
    "  --no-wait        from a template: return once its CMD is started,\n"
    "                   not once its EXPOSE port answers\n"
    "  --ready-timeout T\n"
    "                   from a template: how long to wait for the port\n"
    "                   (default 120s); past it the create fails with the\n"
    "                   CMD's last output and the sandbox is left running\n"
    "  --reuse          if a sandbox named NAME exists, use it: start it if\n"
    "                   it is stopped, wake it if it is paused (refused if\n"
    "                   its image, agent or workspace differ)\n"
    "  --clone          clone mode (see above)\n"
    "  --queue-timeout T\n"
    "                   under warrend's --max-running or --max-resident, wait\n"
    "                   at most T in line for a free sandbox, like 30 or 5m\n"
    "                   (default: warrend's); the wait shows on stderr as\n"
    "                   \"waiting for a free sandbox, #1 in line\", and a\n"
    "                   timed out wait exits 124 and can be retried\n"
    "  --json           print the sandbox as JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Examples:\n"
    "  warren create --name my-project claude .\n"
    "  warren create --name review --clone codex ~/src/app\n"
    "  warren create --name web --memory 1g --cpus 1.5 --disk 2g\n"
    "  warren create --name web --reuse\n"
    "  warren create --name ci --label team=infra --env CI=1 --json\n"
    "  warren create --name app --image vite --ready-timeout 60\n";

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
  OPT_SNAPSHOT,
  OPT_REUSE,
  OPT_IDLE_PAUSE,
  OPT_NO_POOL,
  OPT_RESTART_START,
  OPT_QUEUE_TIMEOUT,
  OPT_NO_WAIT,
  OPT_READY_TIMEOUT,
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
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    {"reuse", no_argument, NULL, OPT_REUSE},
    {"idle-pause", required_argument, NULL, OPT_IDLE_PAUSE},
    {"no-pool", no_argument, NULL, OPT_NO_POOL},
    {"restart-start", no_argument, NULL, OPT_RESTART_START},
    {"queue-timeout", required_argument, NULL, OPT_QUEUE_TIMEOUT},
    {"no-wait", no_argument, NULL, OPT_NO_WAIT},
    {"ready-timeout", required_argument, NULL, OPT_READY_TIMEOUT},
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
  case OPT_IDLE_PAUSE: {
    uint64_t ms;
    if (wr_parse_duration_ms(arg, &ms, err) < 0)
      return wr_error_wrap(err, "--idle-pause");
    if (ms % 1000 != 0 || ms > 30ull * 86400 * 1000)
      return wr_error_set(err, 0,
                          "--idle-pause takes whole seconds up to 30 days "
                          "(like 300, 10m, 1h; 0: never), not `%s`",
                          arg);
    o->has_idle_pause = true;
    o->idle_pause_s = ms / 1000;
    return 0;
  }
  case OPT_QUEUE_TIMEOUT:
    return wr_cli_parse_queue_timeout(arg, &o->queue_timeout_s, err);
  case OPT_READY_TIMEOUT:
    if (wr_parse_duration_ms(arg, &o->ready_timeout_ms, err) < 0)
      return wr_error_wrap(err, "--ready-timeout");
    if (o->ready_timeout_ms == 0 || o->ready_timeout_ms > 86400ull * 1000)
      return wr_error_set(err, 0,
                          "--ready-timeout is more than 0 and at most a day, "
                          "not `%s`",
                          arg);
    o->has_ready_timeout = true;
    return 0;
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
  case OPT_SNAPSHOT:
    o->snapshot = arg;
    return wr_cli_check_text(arg, "--snapshot", err);
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
    o->clone = true;
    return 0;
  case OPT_REUSE:
    o->reuse = true;
    return 0;
  case OPT_NO_POOL:
    o->no_pool = true;
    return 0;
  case OPT_RESTART_START:
    o->restart_start = true;
    return 0;
  case OPT_NO_WAIT:
    o->no_wait = true;
    return 0;
  }
  return parse_value(o, c, arg, err);
}

/* PATH: made absolute here, so the daemon (another working directory)
 * gets the directory the user meant. */
static int set_path(struct wr_cli_create_opts *o, const char *arg,
                    wr_error_t *err) {
  struct stat st;

  o->path = realpath(arg, NULL);
  if (o->path == NULL)
    return wr_error_set(err, errno, "workspace `%s`", arg);
  if (stat(o->path, &st) < 0 || !S_ISDIR(st.st_mode))
    return wr_error_set(err, 0, "workspace `%s` is not a directory", arg);
  return 0;
}

static int set_agent(struct wr_cli_create_opts *o, const char *arg,
                     wr_error_t *err) {
  if (!wr_name_valid(arg))
    return wr_error_set(err, 0,
                        "invalid agent `%s`: a kit's name, like shell, "
                        "claude or codex",
                        arg);
  o->agent = arg;
  return 0;
}

/* One argument is PATH when it is a directory or looks like a path. */
static bool looks_like_path(const char *arg) {
  struct stat st;

  return strchr(arg, '/') != NULL || strcmp(arg, ".") == 0 ||
         strcmp(arg, "..") == 0 || (stat(arg, &st) == 0 && S_ISDIR(st.st_mode));
}

static int parse_positional(struct wr_cli_create_opts *o, int argc, char **argv,
                            wr_error_t *err) {
  int n = argc - optind;

  if (n > 2)
    return wr_error_set(err, 0,
                        "unexpected argument `%s` (expected [AGENT] "
                        "[PATH])",
                        argv[optind + 2]);
  if (n == 2 && (set_agent(o, argv[optind], err) < 0 ||
                 set_path(o, argv[optind + 1], err) < 0))
    return -1;
  if (n == 1 && looks_like_path(argv[optind]) &&
      set_path(o, argv[optind], err) < 0)
    return -1;
  if (n == 1 && o->path == NULL && set_agent(o, argv[optind], err) < 0)
    return -1;
  if (o->clone && o->path == NULL)
    return wr_error_set(err, 0, "--clone needs a PATH: a git repository");
  if (o->reuse && o->name == NULL)
    return wr_error_set(err, 0, "--reuse needs --name: the sandbox to reuse");
  return 0;
}

/* Options may come in any order, before or after AGENT and PATH. */
int wr_cli_create_parse(int argc, char **argv, struct wr_cli_create_opts *o,
                        wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, err)) != -1) {
    if (c == '?' || parse_option(o, c, optarg, err) < 0)
      return -1;
  }
  if (o->help)
    return 0;
  return parse_positional(o, argc, argv, err);
}

void wr_cli_create_opts_free(struct wr_cli_create_opts *o) {
  wr_strv_free(o->env);
  wr_strv_free(o->labels);
  o->env = o->labels = NULL;
  free(o->path);
  o->path = NULL;
}

/* Only what was given is sent, so the daemon's defaults apply to the rest. */
json_t *wr_cli_create_body(const struct wr_cli_create_opts *o) {
  json_t *body = json_object();

  if (o->name != NULL)
    json_object_set_new(body, "name", json_string(o->name));
  if (o->image != NULL)
    json_object_set_new(body, "image", json_string(o->image));
  if (o->snapshot != NULL)
    json_object_set_new(body, "snapshot", json_string(o->snapshot));
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
  if (o->agent != NULL)
    json_object_set_new(body, "agent", json_string(o->agent));
  if (o->reuse)
    json_object_set_new(body, "reuse", json_true());
  if (o->has_idle_pause)
    json_object_set_new(body, "idle_pause",
                        json_integer((json_int_t)o->idle_pause_s));
  if (o->no_pool)
    json_object_set_new(body, "pool", json_false());
  if (o->restart_start)
    json_object_set_new(body, "restart_start", json_true());
  if (o->no_wait)
    json_object_set_new(body, "wait", json_false());
  if (o->has_ready_timeout)
    json_object_set_new(body, "ready_timeout",
                        json_real((double)o->ready_timeout_ms / 1000.0));
  if (o->path != NULL)
    json_object_set_new(body, "workspace",
                        json_pack("{s:s,s:s}", "path", o->path, "mode",
                                  o->clone ? "clone" : "direct"));
  return body;
}

/* Clone mode: the sandbox clones PATH into /workspace and the host
 * repository gets its remote; if that fails, the sandbox goes again. */
static int setup_clone(const struct wr_cli_ctx *ctx, const json_t *sb,
                       const struct wr_cli_create_opts *o, const char *git_dir,
                       wr_error_t *err) {
  const char *name = wr_cli_jstr(sb, "name");
  _cleanup_free_ char *path = NULL;
  wr_error_t ignored = {0};

  if (wr_cli_clone_setup(ctx, name, o->path, git_dir, err) == 0)
    return 0;
  path = wr_cli_sandbox_path(name, "?force=true");
  wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, &ignored);
  return -1;
}

/* Where things are, on stderr (stdout is the name, for scripts). */
static void say_workspace(const json_t *sb,
                          const struct wr_cli_create_opts *o) {
  const char *name = wr_cli_jstr(sb, "name");

  if (o->path == NULL)
    return;
  if (o->clone)
    fprintf(stderr,
            "%s: a clone of %s in /workspace (the original is read-only at "
            "/origin)\nfetch its work with: git fetch warren-%s BRANCH\n",
            name, o->path, name);
  else
    fprintf(stderr, "%s: %s is /workspace, read-write\n", name, o->path);
}

/* Prints just the name so that scripts can write NAME=$(warren create). */
int wr_cli_cmd_create(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_create_opts o _cleanup_(wr_cli_create_opts_free) = {0};
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *sb = NULL;
  _cleanup_free_ char *git_dir = NULL;
  wr_error_t err = {0};
  bool reused;

  if (wr_cli_create_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("create", &err);
  if (o.help)
    return wr_cli_help(help);
  if (o.clone && o.no_start)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "--clone cannot be used with --no-start: the clone is "
                       "made by the running sandbox");
  if (o.clone && wr_cli_clone_check(o.path, &git_dir, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  body = wr_cli_create_body(&o);
  if (wr_cli_call_in_line(ctx, "POST", "/v1/sandboxes", body, o.queue_timeout_s,
                          &sb, &err) < 0)
    return wr_cli_fail(err.code == ETIMEDOUT ? WR_CLI_EXIT_TIMEOUT
                                             : WR_CLI_EXIT_ERROR,
                       "%s", err.msg);
  reused = json_is_true(json_object_get(sb, "reused"));
  /* A reused clone-mode sandbox has its clone and its remote already. */
  if (o.clone && !reused && setup_clone(ctx, sb, &o, git_dir, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (!o.json && reused)
    fprintf(stderr, "%s: reused (it existed)\n", wr_cli_jstr(sb, "name"));
  else if (!o.json)
    say_workspace(sb, &o);
  if (o.json)
    return wr_cli_print_json(sb) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  printf("%s\n", wr_cli_jstr(sb, "name"));
  return WR_CLI_EXIT_OK;
}
