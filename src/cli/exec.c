/*
 * `warren exec`: run a command in a sandbox.
 *
 * In the foreground the request is upgraded to the warren-exec frame
 * protocol, so stdout and stderr arrive separately and as they happen,
 * stdin can be forwarded, and a tty can be resized. With -d the process
 * runs in the background and only its tag is printed.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren exec [OPTIONS] NAME [--] COMMAND [ARG...]\n"
    "\n"
    "Run a command in a running sandbox. Its stdout and stderr are\n"
    "written to warren's stdout and stderr as they come, and warren exits\n"
    "with the command's exit code (128+N when killed by signal N).\n"
    "Everything after `--`, or after NAME when there is no `--`, is the\n"
    "command. Options must come before NAME.\n"
    "\n"
    "Options:\n"
    "  -i, --interactive   forward stdin to the command (else it gets EOF)\n"
    "  -t, --tty           run the command on a terminal; needs a terminal\n"
    "                      on stdin, which is put in raw mode and forwarded\n"
    "  -d, --detach        run in the background and print its tag\n"
    "      --tag TAG       the background process's tag (with -d)\n"
    "  -e, --env K=V       set an environment variable (repeatable)\n"
    "  -w, --cwd DIR       working directory (default: the sandbox's)\n"
    "  -u, --user USER     root, a name, a uid or uid:gid\n"
    "      --timeout TIME  kill the command after TIME (30, 500ms, 2m)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Signals INT, TERM, HUP and QUIT sent to warren are passed on to the\n"
    "command; the third one makes warren give up and exit.\n"
    "\n"
    "Exit status:\n"
    "  the command's own   when it ran\n"
    "  124                 it was killed by --timeout\n"
    "  125                 warren or warrend failed (no such sandbox, ...)\n"
    "  126                 the command could not be run (permission denied)\n"
    "  127                 the command was not found\n"
    "  2                   the options were wrong (nothing was run)\n"
    "\n"
    "Examples:\n"
    "  warren exec web -- ls -l /\n"
    "  warren exec --timeout 2m -e CI=1 -w /src web -- make test\n"
    "  echo hello | warren exec -i web -- tr a-z A-Z\n"
    "  warren exec -it web -- python3\n"
    "  warren exec -d --tag server web -- python3 -m http.server 8000\n";

enum { OPT_TAG = 256, OPT_TIMEOUT };

static const struct option longopts[] = {
    {"interactive", no_argument, NULL, 'i'},
    {"tty", no_argument, NULL, 't'},
    {"detach", no_argument, NULL, 'd'},
    {"tag", required_argument, NULL, OPT_TAG},
    {"env", required_argument, NULL, 'e'},
    {"cwd", required_argument, NULL, 'w'},
    {"user", required_argument, NULL, 'u'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One option of exec; values that must be JSON text are checked here. */
static int parse_option(struct wr_cli_exec_opts *o, int c, const char *arg,
                        wr_error_t *err) {
  switch (c) {
  case 'i':
    o->interactive = true;
    return 0;
  case 't':
    o->tty = true;
    return 0;
  case 'd':
    o->detach = true;
    return 0;
  case OPT_TAG:
    o->tag = arg;
    return wr_cli_check_text(arg, "--tag", err);
  case 'e':
    return wr_cli_push_kv(&o->env, arg, "--env", true, err);
  case 'w':
    o->cwd = arg;
    return wr_cli_check_text(arg, "--cwd", err);
  case 'u':
    o->user = arg;
    return wr_cli_check_text(arg, "--user", err);
  case OPT_TIMEOUT:
    o->has_timeout = true;
    if (wr_parse_duration_ms(arg, &o->timeout_ms, err) < 0)
      return wr_error_wrap(err, "--timeout");
    if (o->timeout_ms == 0)
      return wr_error_set(err, 0, "--timeout must be above 0");
    return 0;
  default:
    o->help = true;
    return 0;
  }
}

/* Combinations that cannot mean anything. */
static int check_combination(const struct wr_cli_exec_opts *o,
                             wr_error_t *err) {
  if (o->tag != NULL && !o->detach)
    return wr_error_set(err, 0, "--tag names a background process: add -d");
  if (o->detach && o->interactive)
    return wr_error_set(err, 0,
                        "-d and -i cannot be combined (use `warren attach` "
                        "to talk to a background process)");
  return 0;
}

/* NAME, an optional "--", then the command. */
static int parse_operands(int argc, char **argv, struct wr_cli_exec_opts *o,
                          wr_error_t *err) {
  if (optind >= argc)
    return wr_error_set(err, 0, "expected a sandbox name and a command");
  o->sandbox = argv[optind++];
  if (optind < argc && strcmp(argv[optind], "--") == 0)
    optind++;
  if (optind >= argc)
    return wr_error_set(err, 0,
                        "no command given (warren exec NAME -- COMMAND...)");
  o->cmd = argv + optind;
  o->ncmd = (size_t)(argc - optind);
  for (size_t i = 0; i < o->ncmd; i++)
    if (wr_cli_check_text(o->cmd[i], "the command", err) < 0)
      return -1;
  return 0;
}

/* "+" makes getopt stop at NAME, so the command's own options are never
 * taken for ours. */
int wr_cli_exec_parse(int argc, char **argv, struct wr_cli_exec_opts *o,
                      wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, "+:itde:w:u:h", longopts, err)) != -1) {
    if (c == '?' || parse_option(o, c, optarg, err) < 0)
      return -1;
  }
  if (o->help)
    return 0;
  if (parse_operands(argc, argv, o, err) < 0)
    return -1;
  return check_combination(o, err);
}

void wr_cli_exec_opts_free(struct wr_cli_exec_opts *o) {
  wr_strv_free(o->env);
  o->env = NULL;
}

/* Only what was asked for is sent; the daemon fills in its defaults. */
json_t *wr_cli_exec_body(const struct wr_cli_exec_opts *o, unsigned rows,
                         unsigned cols) {
  json_t *body = json_object();
  json_t *cmd = json_array();

  for (size_t i = 0; i < o->ncmd; i++)
    json_array_append_new(cmd, json_string(o->cmd[i]));
  json_object_set_new(body, "cmd", cmd);
  if (o->env != NULL)
    json_object_set_new(body, "env", wr_cli_kv_object(o->env));
  if (o->cwd != NULL)
    json_object_set_new(body, "cwd", json_string(o->cwd));
  if (o->user != NULL)
    json_object_set_new(body, "user", json_string(o->user));
  if (o->has_timeout)
    json_object_set_new(body, "timeout", wr_cli_seconds_json(o->timeout_ms));
  if (o->tty)
    json_object_set_new(body, "tty", json_true());
  if (o->tty && rows > 0 && cols > 0) {
    json_object_set_new(body, "rows", json_integer(rows));
    json_object_set_new(body, "cols", json_integer(cols));
  }
  if (o->detach)
    json_object_set_new(body, "background", json_true());
  if (o->tag != NULL)
    json_object_set_new(body, "tag", json_string(o->tag));
  return body;
}

/* docker's convention, so that scripts can tell "not found" from "could
 * not run" from "warren failed". */
int wr_cli_exec_error_exit(const char *code) {
  if (code == NULL)
    return WR_CLI_EXIT_API;
  if (strcmp(code, "command_not_found") == 0)
    return WR_CLI_EXIT_NOT_FOUND;
  if (strcmp(code, "permission_denied") == 0 ||
      strcmp(code, "exec_failed") == 0)
    return WR_CLI_EXIT_CANNOT_EXEC;
  return WR_CLI_EXIT_API;
}

/* An API error response: its message, and the exit code its code maps to. */
static int response_failure(const struct wr_http_response *resp) {
  _cleanup_free_ char *msg = wr_http_error_message(resp);
  _cleanup_free_ char *code = wr_cli_error_code(resp);

  wr_cli_fail(0, "%s", msg);
  return wr_cli_exec_error_exit(code);
}

/* -d: POST without an upgrade; the reply is the Process object. */
static int run_detached(const struct wr_cli_ctx *ctx, const char *path,
                        const char *body) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_json_ json_t *proc = NULL;
  wr_error_t err = {0};

  if (wr_cli_connect(ctx, &c, &err) < 0 ||
      wr_http_request(c, "POST", path, "application/json", body, strlen(body),
                      &resp, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_API, "%s", err.msg);
  if (resp.status < 200 || resp.status > 299)
    return response_failure(&resp);
  proc = json_loadb(resp.body.data, resp.body.len, 0, NULL);
  printf("%s\n", wr_cli_jstr(proc, "tag"));
  return WR_CLI_EXIT_OK;
}

/* "make test" for messages; arguments are joined, not quoted. */
static char *cmd_text(const struct wr_cli_exec_opts *o) {
  wr_buf_t b;

  wr_buf_init(&b);
  for (size_t i = 0; i < o->ncmd; i++) {
    if (i > 0)
      wr_buf_puts(&b, " ");
    wr_buf_puts(&b, o->cmd[i]);
  }
  return wr_buf_steal(&b, NULL);
}

/* The exit code once the stream has ended, with a message where due. */
static int finish(const struct wr_cli_exec_opts *o,
                  const struct wr_cli_stream_result *res) {
  _cleanup_free_ char *text = cmd_text(o);
  char secs[32] = "its timeout";

  if (res->error != NULL) {
    wr_cli_fail(0, "%s", wr_cli_jstr(res->error, "message"));
    return wr_cli_exec_error_exit(wr_cli_jstr(res->error, "code"));
  }
  if (res->exit != NULL && wr_cli_jbool(res->exit, "timed_out")) {
    if (o->has_timeout)
      wr_cli_format_seconds(o->timeout_ms, secs, sizeof(secs));
    return wr_cli_fail(WR_CLI_EXIT_TIMEOUT, "`%s` timed out after %s", text,
                       secs);
  }
  if (res->exit != NULL)
    return wr_cli_exit_code(res->exit);
  if (res->signal != 0)
    return 128 + res->signal;
  return wr_cli_fail(WR_CLI_EXIT_API,
                     "the connection to warrend ended before `%s` exited",
                     text);
}

/* Bytes that came in with the 101 response belong to the stream. */
static void take_leftover(wr_http_client_t *c, wr_buf_t *out) {
  char buf[4096];
  size_t n;

  while ((n = wr_http_client_leftover(c, buf, sizeof(buf))) > 0)
    wr_buf_append(out, buf, n);
}

/* The foreground path: upgrade, hand the socket to the stream loop, and
 * turn how it ended into an exit status. */
static int run_attached(const struct wr_cli_ctx *ctx,
                        const struct wr_cli_exec_opts *o, const char *path,
                        const char *body) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_(wr_buf_free) wr_buf_t leftover = {0};
  struct wr_cli_stream_result res _cleanup_(wr_cli_stream_result_free) = {0};
  struct wr_cli_stream_opts so = {
      .forward_stdin = o->interactive || o->tty,
      .send_eof = true,
      .tty = o->tty,
  };
  wr_error_t err = {0};
  int fd = -1;

  if (wr_cli_connect(ctx, &c, &err) < 0 ||
      wr_http_request_upgrade(c, "POST", path, "warren-exec", body,
                              strlen(body), &resp, &fd, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_API, "%s", err.msg);
  if (resp.status != 101 || fd < 0)
    return response_failure(&resp);
  take_leftover(c, &leftover);
  if (wr_cli_stream_run(fd, leftover.data, leftover.len, &so, &res, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_API, "%s", err.msg);
  return finish(o, &res);
}

/* A tty needs a terminal to put in raw mode; check before the daemon
 * starts anything. */
int wr_cli_cmd_exec(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_exec_opts o _cleanup_(wr_cli_exec_opts_free) = {0};
  _cleanup_json_ json_t *body = NULL;
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *data = NULL;
  wr_error_t err = {0};
  unsigned rows = 0, cols = 0;

  if (wr_cli_exec_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("exec", &err);
  if (o.help)
    return wr_cli_help(help);
  if (o.tty && !o.detach && !isatty(STDIN_FILENO))
    return wr_cli_fail(WR_CLI_EXIT_API,
                       "-t needs a terminal on stdin, and stdin is not one "
                       "(drop -t; use -i alone to pass piped input)");
  if (o.tty)
    wr_cli_tty_size(&rows, &cols);
  body = wr_cli_exec_body(&o, rows, cols);
  data = wr_json_dumps(body);
  path = wr_cli_sandbox_path(o.sandbox, "/exec");
  if (o.detach)
    return run_detached(ctx, path, data);
  return run_attached(ctx, &o, path, data);
}
