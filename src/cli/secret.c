/*
 * `warren secret set|ls|rm`: credentials the proxy sets on the way out,
 * so that sandboxes never hold them. A value is read from stdin (never
 * from argv, where other users and shell history would see it) and can
 * never be read back.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>

/* As the daemon takes them: a credential header is short. */
#define VALUE_MAX (16u << 10)

static const char help[] =
    "Usage: warren secret COMMAND [ARGS...]\n"
    "\n"
    "Store credentials that warren's proxy adds to sandboxes' requests.\n"
    "A sandbox sees only the placeholder `warren-proxy-placeholder` in the\n"
    "service's variables (so SDKs start); the proxy replaces the request's\n"
    "credential header with the real one on the way to the service's hosts.\n"
    "\n"
    "Commands:\n"
    "  set SERVICE [--host H]... [--header NAME]   store a value from stdin\n"
    "  ls                                        list services (no values)\n"
    "  rm SERVICE...                             delete secrets\n"
    "\n"
    "Built-in services: anthropic, openai, github (hosts, header and\n"
    "variables known). Run `warren secret COMMAND --help` for more.\n"
    "\n"
    "Example:\n"
    "  warren secret set anthropic < ~/.anthropic-key\n";

static const char set_help[] =
    "Usage: warren secret set SERVICE [--host H]... [--header NAME]\n"
    "                         [--prefix P] [--env VAR]...\n"
    "\n"
    "Store SERVICE's credential. The value is read from stdin: typed at a\n"
    "prompt without echo when stdin is a terminal, else everything on\n"
    "stdin (one trailing newline removed). It replaces any earlier value.\n"
    "\n"
    "For anthropic, openai and github every option has a default. Any other\n"
    "SERVICE (a-z, 0-9, _ and -) needs --host and --header.\n"
    "\n"
    "Options:\n"
    "  --host H       a host the credential is sent to (repeatable)\n"
    "  --header NAME  the request header that carries it\n"
    "  --prefix P     put before the value, like 'Bearer ' (default: none)\n"
    "  --env VAR      a variable set to the placeholder in every sandbox\n"
    "                 (repeatable)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Examples:\n"
    "  warren secret set openai\n"
    "  printf %s \"$TOKEN\" | warren secret set internal --host "
    "api.example.com \\\n"
    "      --header Authorization --prefix 'Bearer ' --env INTERNAL_TOKEN\n";

static const char ls_help[] =
    "Usage: warren secret ls [--json]\n"
    "\n"
    "List the services with a secret: SERVICE HOSTS HEADER ENV CREATED.\n"
    "Values are never shown.\n"
    "\n"
    "Options:\n"
    "  --json      print {\"secrets\":[...]}, the API's reply\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren secret ls\n";

static const char rm_help[] =
    "Usage: warren secret rm SERVICE...\n"
    "\n"
    "Delete secrets: the proxy stops setting them at once. Prints each\n"
    "service once deleted; goes on after a failure and then exits 1.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren secret rm openai\n";

enum { OPT_HOST = 256, OPT_HEADER, OPT_PREFIX, OPT_ENV, OPT_JSON };

/* ---- set: parsing -------------------------------------------------------- */

static int set_option(struct wr_cli_secret_set_opts *o, int c, const char *arg,
                      wr_error_t *err) {
  if (c == 'h') {
    o->help = true;
    return 0;
  }
  if (wr_cli_check_text(arg, "an option's value", err) < 0)
    return -1;
  if (c == OPT_HOST)
    o->hosts = wr_strv_push(o->hosts, arg);
  else if (c == OPT_HEADER)
    o->header = arg;
  else if (c == OPT_PREFIX)
    o->prefix = arg;
  else if (!wr_env_key_valid(arg))
    return wr_error_set(err, 0, "invalid --env `%s`: not a variable name", arg);
  else
    o->env = wr_strv_push(o->env, arg);
  return 0;
}

int wr_cli_secret_set_parse(int argc, char **argv,
                            struct wr_cli_secret_set_opts *o, wr_error_t *err) {
  static const struct option opts[] = {
      {"host", required_argument, NULL, OPT_HOST},
      {"header", required_argument, NULL, OPT_HEADER},
      {"prefix", required_argument, NULL, OPT_PREFIX},
      {"env", required_argument, NULL, OPT_ENV},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  memset(o, 0, sizeof(*o));
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, err)) != -1) {
    if (c == '?' || set_option(o, c, optarg, err) < 0)
      return -1;
  }
  if (o->help)
    return 0;
  if (argc - optind != 1)
    return wr_error_set(err, 0,
                        argc - optind == 0
                            ? "expected a service name"
                            : "expected one service name (the value is read "
                              "from stdin, not from the command line)");
  o->service = argv[optind];
  return wr_cli_check_text(o->service, "the service", err);
}

void wr_cli_secret_set_opts_free(struct wr_cli_secret_set_opts *o) {
  wr_strv_free(o->hosts);
  wr_strv_free(o->env);
  o->hosts = o->env = NULL;
}

static json_t *strv_json(char *const *v) {
  json_t *a = json_array();

  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

/* Options left out are left out of the body, so the daemon fills in a
 * built-in service's defaults. NULL when the value is not UTF-8 (JSON
 * cannot carry it). */
json_t *wr_cli_secret_body(const struct wr_cli_secret_set_opts *o,
                           const char *value, size_t len) {
  json_t *v = json_stringn(value, len);
  json_t *body;

  if (v == NULL)
    return NULL;
  body = json_object();
  json_object_set_new(body, "value", v);
  if (o->hosts != NULL)
    json_object_set_new(body, "hosts", strv_json(o->hosts));
  if (o->header != NULL)
    json_object_set_new(body, "header", json_string(o->header));
  if (o->prefix != NULL)
    json_object_set_new(body, "prefix", json_string(o->prefix));
  if (o->env != NULL)
    json_object_set_new(body, "env", strv_json(o->env));
  return body;
}

void wr_cli_secret_trim(char *value, size_t *len) {
  if (*len > 0 && value[*len - 1] == '\n')
    value[--*len] = '\0';
  if (*len > 0 && value[*len - 1] == '\r')
    value[--*len] = '\0';
}

/* ---- set: reading the value ---------------------------------------------- */

/* Zero the buffer before it goes back to the allocator. */
static void wipe_free(char *buf, size_t cap) {
  if (buf == NULL)
    return;
  explicit_bzero(buf, cap);
  free(buf);
}

/* Everything on stdin, bounded. */
static int read_piped(char *buf, size_t cap, size_t *len, wr_error_t *err) {
  ssize_t n;

  *len = 0;
  while ((n = read(STDIN_FILENO, buf + *len, cap - 1 - *len)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return wr_error_set(err, errno, "read the value from stdin");
    *len += (size_t)n;
    if (*len == cap - 1)
      return wr_error_set(err, 0, "the value is longer than %u bytes",
                          VALUE_MAX);
  }
  buf[*len] = '\0';
  return 0;
}

/* One line from the terminal, or -1 when a signal (sfd) came first. */
static int read_line(int sfd, char *buf, size_t cap, size_t *len,
                     wr_error_t *err) {
  struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                          {.fd = sfd, .events = POLLIN}};

  *len = 0;
  while (*len == 0 || buf[*len - 1] != '\n') {
    ssize_t n;
    if (poll(pfd, 2, -1) < 0 && errno != EINTR)
      return wr_error_set(err, errno, "poll");
    if (pfd[1].revents != 0)
      return wr_error_set(err, 0, "cancelled");
    if (pfd[0].revents == 0)
      continue;
    n = read(STDIN_FILENO, buf + *len, cap - 1 - *len);
    if (n < 0 && errno != EINTR)
      return wr_error_set(err, errno, "read the value");
    if (n == 0)
      break;
    *len += n > 0 ? (size_t)n : 0;
    if (*len == cap - 1)
      return wr_error_set(err, 0, "the value is too long to type");
  }
  buf[*len] = '\0';
  return 0;
}

/*
 * Prompt with echo off. The signals that would end the program are
 * blocked and read from a signalfd instead, so Ctrl-C cancels the prompt
 * and the terminal gets its echo back on every way out.
 */
static int read_hidden(const char *service, char *buf, size_t cap, size_t *len,
                       wr_error_t *err) {
  struct termios saved, quiet;
  sigset_t sigs, old;
  int sfd, r;

  if (tcgetattr(STDIN_FILENO, &saved) < 0)
    return wr_error_set(err, errno, "read terminal settings");
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  sigaddset(&sigs, SIGQUIT);
  sigprocmask(SIG_BLOCK, &sigs, &old);
  sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
  quiet = saved;
  quiet.c_lflag &= ~(tcflag_t)ECHO;
  if (sfd < 0 || tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0) {
    r = wr_error_set(err, errno, "turn off the terminal's echo");
  } else {
    fprintf(stderr, "Value for %s: ", service);
    fflush(stderr);
    r = read_line(sfd, buf, cap, len, err);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    fputc('\n', stderr);
  }
  if (sfd >= 0)
    close(sfd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return r;
}

static int read_value(const char *service, char **out, size_t *len,
                      wr_error_t *err) {
  size_t cap = VALUE_MAX + 2;
  char *buf = xmalloc(cap);
  int r;

  if (isatty(STDIN_FILENO))
    r = read_hidden(service, buf, cap, len, err);
  else
    r = read_piped(buf, cap, len, err);
  if (r == 0)
    wr_cli_secret_trim(buf, len);
  if (r == 0 && *len == 0)
    r = wr_error_set(err, 0, "the value is empty");
  if (r < 0) {
    wipe_free(buf, cap);
    return -1;
  }
  *out = buf;
  return 0;
}

/* ---- set ----------------------------------------------------------------- */

static int put_secret(const struct wr_cli_ctx *ctx,
                      const struct wr_cli_secret_set_opts *o, json_t **reply,
                      wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(o->service);
  _cleanup_free_ char *path = xasprintf("/v1/secrets/%s", esc);
  char *value = NULL;
  size_t len = 0;
  json_t *body;
  int r;

  if (read_value(o->service, &value, &len, err) < 0)
    return -1;
  body = wr_cli_secret_body(o, value, len);
  wipe_free(value, VALUE_MAX + 2);
  if (body == NULL)
    return wr_error_set(err, 0, "the value is not valid UTF-8");
  r = wr_cli_call(ctx, "PUT", path, body, reply, NULL, err);
  json_decref(body);
  return r;
}

static char *join(const json_t *arr) {
  wr_buf_t b;
  json_t *v;
  size_t i;

  wr_buf_init(&b);
  json_array_foreach ((json_t *)arr, i, v) {
    if (i > 0)
      wr_buf_puts(&b, ",");
    wr_buf_puts(&b, json_string_value(v) ? json_string_value(v) : "");
  }
  if (b.len == 0)
    wr_buf_puts(&b, "-");
  return wr_buf_steal(&b, NULL);
}

static int cmd_set(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_secret_set_opts o _cleanup_(wr_cli_secret_set_opts_free) = {0};
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *hosts = NULL;
  wr_error_t err = {0};

  if (wr_cli_secret_set_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("secret set", &err);
  if (o.help)
    return wr_cli_help(set_help);
  if (put_secret(ctx, &o, &reply, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  hosts = join(json_object_get(reply, "hosts"));
  printf("secret %s set: sent as %s to %s\n", wr_cli_jstr(reply, "service"),
         wr_cli_jstr(reply, "header"), hosts);
  return WR_CLI_EXIT_OK;
}

/* ---- ls, rm -------------------------------------------------------------- */

static void add_secret_row(struct wr_cli_table *t, const json_t *s) {
  _cleanup_free_ char *hosts = join(json_object_get(s, "hosts"));
  _cleanup_free_ char *env = join(json_object_get(s, "env"));
  char created[64];

  wr_cli_field_ago(s, "created_at", created, sizeof(created));
  wr_cli_table_add(t, (const char *const[]){wr_cli_jstr(s, "service"), hosts,
                                            wr_cli_jstr(s, "header"), env,
                                            created});
}

static int cmd_ls(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  _cleanup_json_ json_t *reply = NULL;
  wr_error_t err = {0};
  bool json = false;
  json_t *list, *s;
  size_t i;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("secret ls", &err);
    if (c == 'h')
      return wr_cli_help(ls_help);
    json = true;
  }
  if (optind < argc) {
    wr_error_set(&err, 0, "unexpected argument `%s`", argv[optind]);
    return wr_cli_usage("secret ls", &err);
  }
  if (wr_cli_call(ctx, "GET", "/v1/secrets", NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  list = json_object_get(reply, "secrets");
  wr_cli_table_init(&t, 5);
  wr_cli_table_add(&t, (const char *const[]){"SERVICE", "HOSTS", "HEADER",
                                             "ENV", "CREATED"});
  json_array_foreach (list, i, s)
    add_secret_row(&t, s);
  wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

static int delete_secret(const struct wr_cli_ctx *ctx, const char *service,
                         void *arg, wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(service);
  _cleanup_free_ char *path = xasprintf("/v1/secrets/%s", esc);

  (void)arg;
  return wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err);
}

static int cmd_rm(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("secret rm", &err);
    return wr_cli_help(rm_help);
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more services");
    return wr_cli_usage("secret rm", &err);
  }
  return wr_cli_each(ctx, argv + optind, (size_t)(argc - optind), delete_secret,
                     NULL);
}

/* ---- dispatch ------------------------------------------------------------ */

static const struct wr_cli_command secret_commands[] = {
    {"set", "Store a service's credential", cmd_set},
    {"ls", "List the services with a secret", cmd_ls},
    {"rm", "Delete secrets", cmd_rm},
};

int wr_cli_cmd_secret(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};

  if (argc < 2) {
    wr_error_set(&err, 0, "expected a subcommand: set, ls or rm");
    return wr_cli_usage("secret", &err);
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    return wr_cli_help(help);
  return wr_cli_dispatch(ctx, secret_commands, WR_ARRAY_SIZE(secret_commands),
                         "secret", argc - 1, argv + 1);
}
