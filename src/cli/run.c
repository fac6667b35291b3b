/*
 * `warren run`: the terminal, attached to the agent of a sandbox.
 *
 * The agent runs as a background process with a pty, tagged `agent`, so
 * the daemon keeps it (and its last 1 MiB of output) when the terminal
 * goes away: detaching, closing the terminal or losing the connection
 * leaves it running, and the next `warren run` attaches to it again. Only
 * when there is none does `run` start one, from the sandbox's agent kit
 * (GET /v1/kits/AGENT): it installs the kit's npm package first when the
 * command is missing, and says when the kit's secret is not set.
 *
 * `warren run --name N -- CMD` runs CMD the same way in a session of its
 * own (run-1, run-2, ...), which `warren attach N run-1` reaches later.
 */
#include "cli/cli.h"

#include <jansson.h>

#define AGENT_TAG "agent"
#define DEFAULT_KIT "shell"
#define RUN_TAGS_MAX 1000
#define START_TRIES 3

static const char help[] =
    "Usage: warren run --name NAME [--detach-keys KEYS] [-- COMMAND "
    "[ARG...]]\n"
    "\n"
    "Attach the terminal to the agent of sandbox NAME: the one its agent\n"
    "kit names (`warren create --name NAME [AGENT] PATH`; shell when none).\n"
    "The sandbox is started first if it is stopped, resumed if paused.\n"
    "\n"
    "The agent runs in a session that the daemon keeps: when you detach,\n"
    "close the terminal or lose the connection, it keeps running, and the\n"
    "next `warren run --name NAME` attaches to it again and shows its\n"
    "recent screen. When there is no session, one starts: in the\n"
    "workspace (/workspace) when the sandbox has one, with the kit's\n"
    "command. A kit's npm package is installed on first run if its command\n"
    "is missing (through the sandbox's network policy); a kit whose\n"
    "secret is not set gets a hint about `warren secret set`.\n"
    "\n"
    "With `-- COMMAND`, COMMAND runs instead, in a session of its own\n"
    "(run-1, run-2, ...; see `warren ps NAME`), which you reach again with\n"
    "`warren attach NAME run-1`.\n"
    "\n"
    "warren exits with the session's exit code when it ends; the sandbox\n"
    "keeps running (`warren stop NAME` stops it; its files stay).\n"
    "\n"
    "Options:\n"
    "  -n, --name NAME       the sandbox\n"
    "      --detach-keys K   the keys that detach, instead of Ctrl-P Ctrl-Q:\n"
    "                        comma-separated, each a character or ctrl-X\n"
    "                        (e.g. ctrl-a,d or ctrl-])\n"
    "  -h, --help            show this help\n"
    "\n"
    "Detach, leaving the session running: Ctrl-P Ctrl-Q (or --detach-keys).\n"
    "INT, TERM or HUP sent to warren detach too; Ctrl-C typed at the\n"
    "terminal goes to the program, as usual.\n"
    "\n"
    "Kits: GET /v1/kits lists them; docs/agents.md says how to write one.\n"
    "\n"
    "Examples:\n"
    "  warren create --name my-project claude .\n"
    "  warren run --name my-project\n"
    "  warren run --name my-project -- bash -l\n"
    "  warren attach my-project run-1\n";

enum { OPT_DETACH_KEYS = 256 };

static const struct option longopts[] = {
    {"name", required_argument, NULL, 'n'},
    {"detach-keys", required_argument, NULL, OPT_DETACH_KEYS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Options, then nothing, or `--` and the command. */
int wr_cli_run_parse(int argc, char **argv, struct wr_cli_run_opts *o,
                     wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, "+:n:h", longopts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == 'h')
      o->help = true;
    else if (c == 'n')
      o->name = optarg;
    else if (wr_cli_parse_detach_keys(optarg, &o->keys, err) < 0)
      return wr_error_wrap(err, "--detach-keys");
  }
  if (o->help)
    return 0;
  if (o->name == NULL)
    return wr_error_setx(err, EINVAL, "--name is required");
  if (optind < argc && strcmp(argv[optind - 1], "--") != 0)
    return wr_error_setx(err, EINVAL,
                         "unexpected `%s` (a command comes after `--`)",
                         argv[optind]);
  if (optind > 0 && strcmp(argv[optind - 1], "--") == 0 && optind == argc)
    return wr_error_setx(err, EINVAL, "`--` must be followed by a command");
  o->cmd = argv + optind;
  o->ncmd = (size_t)(argc - optind);
  if (o->ncmd == 0)
    o->cmd = NULL;
  return 0;
}

/* ---- the sandbox --------------------------------------------------------- */

static int get_sandbox(const struct wr_cli_ctx *ctx, const char *name,
                       json_t **sb) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, "");
  wr_error_t err = {0};
  int status = 0;

  if (wr_cli_call(ctx, "GET", path, NULL, sb, &status, &err) == 0)
    return 0;
  if (status == 404)
    return wr_cli_fail(-1,
                       "no sandbox `%s`: create one with "
                       "warren create --name %s [AGENT] PATH",
                       name, name);
  return wr_cli_fail(-1, "%s", err.msg);
}

/* Running it is: start a stopped one, resume a paused one (the daemon's
 * start does both and answers when it runs; under warrend's limits it
 * may wait in line, which stderr shows). */
static int ensure_running(const struct wr_cli_ctx *ctx, const char *name,
                          const json_t *sb) {
  const char *state = wr_cli_jstr(sb, "state");
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, "/start");
  _cleanup_json_ json_t *started = NULL;
  wr_error_t err = {0};

  if (strcmp(state, "running") == 0)
    return 0;
  if (strcmp(state, "stopped") == 0)
    fprintf(stderr, "starting sandbox `%s`\n", name);
  else if (strcmp(state, "paused") == 0)
    fprintf(stderr, "resuming sandbox `%s`\n", name);
  if (wr_cli_call_in_line(ctx, "POST", path, NULL, 0, &started, &err) < 0)
    return wr_cli_fail(-1, "start sandbox `%s`: %s", name, err.msg);
  return 0;
}

/* Where sessions start: the workspace, else the sandbox's own default. */
static const char *session_cwd(const json_t *sb) {
  const json_t *ws = json_object_get(sb, "workspace");
  const char *mount = json_string_value(json_object_get(ws, "mount"));

  return mount != NULL && *mount != '\0' ? mount : NULL;
}

/* ---- processes ----------------------------------------------------------- */

static char *process_path(const char *name, const char *tag) {
  _cleanup_free_ char *esc = wr_cli_escape(tag);
  _cleanup_free_ char *suffix = xasprintf("/processes/%s", esc);

  return wr_cli_sandbox_path(name, suffix);
}

/* The process tagged tag: 1 and *proc, 0 when there is none. */
static int get_process(const struct wr_cli_ctx *ctx, const char *name,
                       const char *tag, json_t **proc, wr_error_t *err) {
  _cleanup_free_ char *path = process_path(name, tag);
  int status = 0;

  if (wr_cli_call(ctx, "GET", path, NULL, proc, &status, err) == 0)
    return 1;
  return status == 404 ? 0 : -1;
}

/* A finished session is history once its exit has been seen. */
static void forget_process(const struct wr_cli_ctx *ctx, const char *name,
                           const char *tag) {
  _cleanup_free_ char *path = process_path(name, tag);
  wr_error_t err;

  wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, &err);
}

/* The first of run-1, run-2, ... that no process has. */
static char *free_run_tag(const struct wr_cli_ctx *ctx, const char *name,
                          wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, "/processes");
  _cleanup_json_ json_t *list = NULL;
  const json_t *procs;

  if (wr_cli_call(ctx, "GET", path, NULL, &list, NULL, err) < 0)
    return NULL;
  procs = json_object_get(list, "processes");
  for (int i = 1; i <= RUN_TAGS_MAX; i++) {
    char *tag = xasprintf("run-%d", i);
    bool taken = false;
    size_t k;
    json_t *p;
    json_array_foreach ((json_t *)procs, k, p)
      taken = taken || strcmp(wr_cli_jstr(p, "tag"), tag) == 0;
    if (!taken)
      return tag;
    free(tag);
  }
  wr_error_setx(err, EBUSY,
                "sandbox `%s` has %d sessions already; end some "
                "(warren ps %s, warren kill)",
                name, RUN_TAGS_MAX, name);
  return NULL;
}

/* Start cmd as a background tty process tagged tag, of our size. On
 * failure *code is the API's error code (exit codes depend on it). */
static int start_session(const struct wr_cli_ctx *ctx, const char *name,
                         const char *tag, const json_t *cmd, const char *cwd,
                         char **code, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, "/exec");
  _cleanup_json_ json_t *body = NULL;
  _cleanup_free_ char *data = NULL;
  unsigned rows = 0, cols = 0;

  body = json_pack("{s:O,s:b,s:b,s:s}", "cmd", cmd, "tty", true, "background",
                   true, "tag", tag);
  wr_cli_tty_size(&rows, &cols);
  if (rows > 0 && cols > 0) {
    json_object_set_new(body, "rows", json_integer(WR_MIN(rows, 10000u)));
    json_object_set_new(body, "cols", json_integer(WR_MIN(cols, 10000u)));
  }
  if (cwd != NULL)
    json_object_set_new(body, "cwd", json_string(cwd));
  data = wr_json_dumps(body);
  *code = NULL;
  if (wr_cli_connect(ctx, &c, err) < 0 ||
      wr_http_request(c, "POST", path, "application/json", data, strlen(data),
                      &resp, err) < 0)
    return -1;
  if (resp.status >= 200 && resp.status <= 299)
    return 0;
  {
    _cleanup_free_ char *msg = wr_http_error_message(&resp);
    *code = wr_cli_error_code(&resp);
    return wr_error_setx(err, 0, "%s", msg);
  }
}

/* ---- the kit: secret, npm package ---------------------------------------- */

/* One line of advice when the kit's secret is not set; never fatal. */
static void advise_secret(const struct wr_cli_ctx *ctx, const json_t *kit) {
  const char *secret = json_string_value(json_object_get(kit, "secret"));
  _cleanup_json_ json_t *list = NULL;
  wr_error_t err;
  size_t i;
  json_t *s;

  if (secret == NULL ||
      wr_cli_call(ctx, "GET", "/v1/secrets", NULL, &list, NULL, &err) < 0)
    return;
  json_array_foreach (json_object_get(list, "secrets"), i, s)
    if (strcmp(wr_cli_jstr(s, "service"), secret) == 0)
      return;
  fprintf(stderr,
          "secret `%s` is not set: the agent will ask you to log in; to use "
          "an API key instead: warren secret set %s\n",
          secret, secret);
}

/* Run cmd in the sandbox in the foreground, its output on ours; *code is
 * its exit status. */
static int run_inside(const struct wr_cli_ctx *ctx, const char *name,
                      const json_t *cmd, const char *cwd, int *code,
                      wr_error_t *err) {
  struct wr_cli_stream_result res _cleanup_(wr_cli_stream_result_free) = {0};
  struct wr_cli_stream_opts so = {.send_eof = true};
  _cleanup_free_ char *path = wr_cli_sandbox_path(name, "/exec");
  _cleanup_json_ json_t *body = json_pack("{s:O}", "cmd", cmd);
  _cleanup_free_ char *data = NULL;

  if (cwd != NULL)
    json_object_set_new(body, "cwd", json_string(cwd));
  data = wr_json_dumps(body);
  if (wr_cli_stream_request(ctx, "POST", path, data, &so, &res, err) < 0)
    return -1;
  if (res.error != NULL)
    return wr_error_setx(err, 0, "%s", wr_cli_jstr(res.error, "message"));
  if (res.exit == NULL)
    return wr_error_setx(err, 0, "the connection to warrend ended");
  *code = wr_cli_exit_code(res.exit);
  return 0;
}

/* `sh -c 'command -v "$1"' sh PROGRAM`: 0 when the program is there. */
static int have_program(const struct wr_cli_ctx *ctx, const char *name,
                        const char *program, bool *found, wr_error_t *err) {
  _cleanup_json_ json_t *cmd =
      json_pack("[s,s,s,s,s]", "sh", "-c", "command -v \"$1\" >/dev/null 2>&1",
                "sh", program);
  int code = 0;

  if (run_inside(ctx, name, cmd, NULL, &code, err) < 0)
    return -1;
  *found = code == 0;
  return 0;
}

/* The kit's command, installed with npm when it is missing. */
static int ensure_installed(const struct wr_cli_ctx *ctx, const char *name,
                            const json_t *kit) {
  const char *npm = json_string_value(json_object_get(kit, "npm"));
  const char *program =
      json_string_value(json_array_get(json_object_get(kit, "command"), 0));
  _cleanup_json_ json_t *install = NULL;
  wr_error_t err = {0};
  bool found = false;
  int code = 0;

  if (npm == NULL || program == NULL)
    return 0;
  if (have_program(ctx, name, program, &found, &err) < 0)
    return wr_cli_fail(-1, "look for `%s` in sandbox `%s`: %s", program, name,
                       err.msg);
  if (found)
    return 0;
  if (have_program(ctx, name, "npm", &found, &err) < 0)
    return wr_cli_fail(-1, "look for npm in sandbox `%s`: %s", name, err.msg);
  if (!found)
    return wr_cli_fail(-1,
                       "`%s` is not installed in sandbox `%s`, and there is "
                       "no npm there to install %s with (use an image with "
                       "npm: warren image build NAME --include nodejs,npm)",
                       program, name, npm);
  fprintf(stderr, "installing %s in sandbox `%s` (npm install -g)...\n", npm,
          name);
  install = json_pack("[s,s,s,s]", "npm", "install", "-g", npm);
  if (run_inside(ctx, name, install, NULL, &code, &err) < 0)
    return wr_cli_fail(-1, "install %s: %s", npm, err.msg);
  if (code != 0)
    return wr_cli_fail(-1,
                       "could not install %s in sandbox `%s` (npm exited with "
                       "%d); if the network policy refused it, "
                       "`warren policy log --sandbox %s` shows what",
                       npm, name, code, name);
  if (have_program(ctx, name, program, &found, &err) < 0 || !found)
    return wr_cli_fail(-1,
                       "installed %s, but `%s` is still not found in sandbox "
                       "`%s`: the kit's command and package do not match",
                       npm, program, name);
  return 0;
}

/* ---- sessions ------------------------------------------------------------ */

struct session {
  const char *name; /* the sandbox */
  const char *tag;
  bool agent;    /* the kit's session, not `-- CMD` */
  bool reattach; /* it was running already */
};

/* After the stream: a detach says how to come back; an exit is the exit
 * code, and the finished session is forgotten. */
static int finish(const struct wr_cli_ctx *ctx, const struct session *s,
                  const struct wr_cli_stream_result *res) {
  if (res->detached) {
    if (s->agent)
      fprintf(stderr,
              "\ndetached; the agent keeps running in `%s`\n"
              "come back with: warren run --name %s\n",
              s->name, s->name);
    else
      fprintf(stderr,
              "\ndetached; %s keeps running in `%s`\n"
              "come back with: warren attach %s %s\n",
              s->tag, s->name, s->name, s->tag);
    return WR_CLI_EXIT_OK;
  }
  if (res->error != NULL)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s",
                       wr_cli_jstr(res->error, "message"));
  if (res->exit != NULL) {
    forget_process(ctx, s->name, s->tag);
    if (s->agent)
      fprintf(stderr,
              "the session ended; sandbox `%s` keeps running (`warren stop "
              "%s` stops it)\n",
              s->name, s->name);
    return wr_cli_exit_code(res->exit);
  }
  if (res->signal != 0)
    return 128 + res->signal;
  return wr_cli_fail(WR_CLI_EXIT_ERROR,
                     "the connection to warrend ended while attached to `%s`",
                     s->name);
}

static int attach(const struct wr_cli_ctx *ctx, const struct session *s,
                  const struct wr_cli_run_opts *o) {
  struct wr_cli_stream_result res _cleanup_(wr_cli_stream_result_free) = {0};
  struct wr_cli_stream_opts so;
  wr_error_t err = {0};

  wr_cli_attach_opts(true, &so);
  so.keys = o->keys.nkeys > 0 ? &o->keys : NULL;
  so.redraw = s->reattach;
  if (wr_cli_attach_stream(ctx, s->name, s->tag, &so, &res, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_API, "%s", err.msg);
  return finish(ctx, s, &res);
}

/* Start cmd: 0, or the exit code for the failure (exec's: 127 when the
 * command is not found, 126 when it cannot run, else 125). */
static int start(const struct wr_cli_ctx *ctx, const struct session *s,
                 const json_t *cmd, const char *cwd) {
  _cleanup_free_ char *code = NULL;
  wr_error_t err = {0};

  if (start_session(ctx, s->name, s->tag, cmd, cwd, &code, &err) == 0)
    return 0;
  wr_cli_fail(0, "%s", err.msg);
  return wr_cli_exec_error_exit(code);
}

/* `-- CMD`: a new run-N session; another client may take the same tag
 * between our look and our start, hence a few tries. */
static int run_command(const struct wr_cli_ctx *ctx,
                       const struct wr_cli_run_opts *o, const char *cwd) {
  _cleanup_json_ json_t *cmd = json_array();
  _cleanup_free_ char *tag = NULL;
  _cleanup_free_ char *code = NULL;
  struct session s = {.name = o->name};
  wr_error_t err = {0};
  int r = -1;

  for (size_t i = 0; i < o->ncmd; i++)
    json_array_append_new(cmd, json_string(o->cmd[i]));
  for (int i = 0; i < START_TRIES && r < 0; i++) {
    free(tag);
    free(code);
    code = NULL;
    tag = free_run_tag(ctx, o->name, &err);
    if (tag == NULL)
      return wr_cli_fail(WR_CLI_EXIT_API, "%s", err.msg);
    r = start_session(ctx, o->name, tag, cmd, cwd, &code, &err);
    if (r < 0 && (code == NULL || strcmp(code, "conflict") != 0))
      break;
  }
  if (r < 0) {
    wr_cli_fail(0, "%s", err.msg);
    return wr_cli_exec_error_exit(code);
  }
  s.tag = tag;
  return attach(ctx, &s, o);
}

/* The sandbox's kit: its secret advice, its package, its command. 0, or
 * the exit code for the failure. */
static int start_agent(const struct wr_cli_ctx *ctx, const struct session *s,
                       const char *agent, const char *cwd) {
  _cleanup_free_ char *esc = wr_cli_escape(agent);
  _cleanup_free_ char *path = xasprintf("/v1/kits/%s", esc);
  _cleanup_json_ json_t *kit = NULL;
  wr_error_t err = {0};

  if (wr_cli_call(ctx, "GET", path, NULL, &kit, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_API, "the agent kit of `%s`: %s", s->name,
                       err.msg);
  advise_secret(ctx, kit);
  if (ensure_installed(ctx, s->name, kit) < 0)
    return WR_CLI_EXIT_API;
  return start(ctx, s, json_object_get(kit, "command"), cwd);
}

/* Attach to the running agent, or start it. A finished one is forgotten
 * first (its tag is taken until then). */
static int run_agent(const struct wr_cli_ctx *ctx,
                     const struct wr_cli_run_opts *o, const json_t *sb,
                     const char *cwd) {
  const char *agent = json_string_value(json_object_get(sb, "agent"));
  struct session s = {.name = o->name, .tag = AGENT_TAG, .agent = true};
  _cleanup_json_ json_t *proc = NULL;
  wr_error_t err = {0};
  int r;

  r = get_process(ctx, o->name, AGENT_TAG, &proc, &err);
  if (r < 0)
    return wr_cli_fail(WR_CLI_EXIT_API, "%s", err.msg);
  if (r == 1 && wr_cli_jbool(proc, "running")) {
    s.reattach = true;
    return attach(ctx, &s, o);
  }
  if (r == 1)
    forget_process(ctx, o->name, AGENT_TAG);
  r = start_agent(ctx, &s, agent != NULL ? agent : DEFAULT_KIT, cwd);
  if (r != 0)
    return r;
  return attach(ctx, &s, o);
}

int wr_cli_cmd_run(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_run_opts o;
  _cleanup_json_ json_t *sb = NULL;
  wr_error_t err = {0};

  if (wr_cli_run_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("run", &err);
  if (o.help)
    return wr_cli_help(help);
  if (get_sandbox(ctx, o.name, &sb) < 0 || ensure_running(ctx, o.name, sb) < 0)
    return WR_CLI_EXIT_API;
  if (o.cmd != NULL)
    return run_command(ctx, &o, session_cwd(sb));
  return run_agent(ctx, &o, sb, session_cwd(sb));
}
