/* `warren project lease`: one unit of work at a time per project
 * (/v1/projects/{name}/lease; docs/projects.md). */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren project lease NAME [--ttl S] [--holder TEXT] [--no-wait]\n"
    "                            [--timeout S] [--json]\n"
    "       warren project lease NAME --renew TOKEN [--ttl S]\n"
    "       warren project lease NAME --release TOKEN\n"
    "       warren project lease NAME --show [--json]\n"
    "\n"
    "Take the project's lease, so that one unit of work (an agent's turn,\n"
    "a build) runs at a time: it prints the lease's token. While someone\n"
    "holds it, the next asker waits in line (`waiting for project NAME,\n"
    "#N in line`), or with --no-wait is told at once who holds it (exit\n"
    "1). The lease ends when released or when its TTL passes unrenewed.\n"
    "It is advisory: reading files, logs and the project's versions never\n"
    "waits for it, and only the planner leaves a leased project alone.\n"
    "\n"
    "Options:\n"
    "  --ttl S          seconds the lease runs unrenewed (1 to 3600,\n"
    "                   default 60)\n"
    "  --holder TEXT    who holds it, shown to the others (default: "
    "user@host)\n"
    "  --no-wait        do not wait in line\n"
    "  --timeout S      the longest to wait in line (default 300)\n"
    "  --renew TOKEN    run the lease TTL seconds more from now\n"
    "  --release TOKEN  let it go (the next in line gets it at once)\n"
    "  --show           who holds it and how many wait\n"
    "  --json           print JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Example:\n"
    "  t=$(warren project lease shop --holder agent-1 --ttl 120)\n"
    "  warren exec project-shop -- npm run build\n"
    "  warren project lease shop --release \"$t\"\n";

enum {
  OPT_TTL = 256,
  OPT_HOLDER,
  OPT_NO_WAIT,
  OPT_TIMEOUT,
  OPT_RENEW,
  OPT_RELEASE,
  OPT_SHOW,
  OPT_JSON
};

static const struct option opts[] = {
    {"ttl", required_argument, NULL, OPT_TTL},
    {"holder", required_argument, NULL, OPT_HOLDER},
    {"no-wait", no_argument, NULL, OPT_NO_WAIT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"renew", required_argument, NULL, OPT_RENEW},
    {"release", required_argument, NULL, OPT_RELEASE},
    {"show", no_argument, NULL, OPT_SHOW},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct lease_opts {
  uint64_t ttl, timeout;
  const char *holder, *renew, *release;
  bool no_wait, show, json, help;
  const char *name;
};

static int parse(int argc, char **argv, struct lease_opts *o, wr_error_t *err) {
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == 'h')
      o->help = true;
    else if (c == OPT_TTL && wr_parse_u64(optarg, 1, 3600, &o->ttl, err) < 0)
      return wr_error_wrap(err, "--ttl");
    else if (c == OPT_TIMEOUT &&
             wr_parse_u64(optarg, 1, 3600, &o->timeout, err) < 0)
      return wr_error_wrap(err, "--timeout");
    else if (c == OPT_HOLDER)
      o->holder = optarg;
    else if (c == OPT_NO_WAIT)
      o->no_wait = true;
    else if (c == OPT_RENEW)
      o->renew = optarg;
    else if (c == OPT_RELEASE)
      o->release = optarg;
    else if (c == OPT_SHOW)
      o->show = true;
    else if (c == OPT_JSON)
      o->json = true;
  }
  if (o->help)
    return 0;
  if (argc - optind != 1)
    return wr_error_set(err, 0, "name one project");
  o->name = argv[optind];
  return wr_cli_check_text(o->name, "the project", err);
}

static char *lease_path(const char *name, const char *query) {
  _cleanup_free_ char *e = wr_cli_escape(name);

  return xasprintf("/v1/projects/%s/lease%s", e, query ? query : "");
}

struct in_line {
  const char *name;
  json_t *result;
  bool shown;
};

static int on_line(json_t *ev, void *arg, wr_error_t *err) {
  struct in_line *w = arg;
  const json_t *q = json_object_get(ev, "queued");
  const json_t *e = json_object_get(ev, "error");

  if (q != NULL) {
    wr_cli_line(stderr, "waiting for project %s, #%lld in line", w->name,
                (long long)json_integer_value(json_object_get(q, "position")));
    w->shown = true;
    return 0;
  }
  if (json_is_object(e))
    return wr_error_set(err, 0, "%s", wr_cli_jstr(e, "message"));
  w->result = json_incref(ev);
  return 1;
}

/* POST, streamed: the token at once or after the wait. */
static int take(const struct wr_cli_ctx *ctx, const struct lease_opts *o,
                json_t **out, wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = lease_path(o->name, NULL);
  _cleanup_json_ json_t *body = json_object();
  _cleanup_free_ char *text = NULL;
  char host[128] = "host";
  const char *user = getenv("USER");
  _cleanup_free_ char *holder = NULL;
  struct in_line w = {.name = o->name};

  gethostname(host, sizeof(host) - 1);
  holder = o->holder ? xstrdup(o->holder)
                     : xasprintf("%s@%s", user && *user ? user : "root", host);
  json_object_set_new(body, "holder", json_string(holder));
  json_object_set_new(body, "wait", json_boolean(!o->no_wait));
  if (o->ttl)
    json_object_set_new(body, "ttl", json_integer((json_int_t)o->ttl));
  if (o->timeout)
    json_object_set_new(body, "timeout", json_integer((json_int_t)o->timeout));
  text = wr_json_dumps(body);
  if (wr_cli_connect(ctx, &c, err) < 0 ||
      wr_http_request_stream(c, "POST", path, "application/json", text,
                             strlen(text), &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(c, &resp, err);
  if (resp.content_type == NULL ||
      !wr_str_has_prefix(resp.content_type, "application/x-ndjson")) {
    char chunk[4096];
    ssize_t n;
    while ((n = wr_http_read_body(c, chunk, sizeof(chunk), err)) > 0)
      wr_buf_append(&resp.body, chunk, (size_t)n);
    if (n < 0)
      return -1;
    *out = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0,
                      NULL);
    return *out ? 0 : wr_error_set(err, 0, "an answer that is not JSON");
  }
  if (wr_cli_ndjson_read(c, on_line, &w, err) < 0)
    return -1;
  if (w.result == NULL)
    return wr_error_set(err, EAGAIN,
                        "warrend went away while we waited: try again");
  *out = w.result;
  return 0;
}

static int show(const struct wr_cli_ctx *ctx, const struct lease_opts *o) {
  _cleanup_free_ char *path = lease_path(o->name, NULL);
  _cleanup_json_ json_t *j = NULL;
  wr_error_t err = {0};

  if (wr_cli_call(ctx, "GET", path, NULL, &j, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o->json)
    return wr_cli_print_json(j) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  if (!json_is_true(json_object_get(j, "held"))) {
    wr_cli_line(stdout, "%s: not leased", o->name);
    return WR_CLI_EXIT_OK;
  }
  wr_cli_line(stdout, "%s: leased to %s for %lld s more, %lld waiting", o->name,
              wr_cli_jstr(j, "holder"),
              (long long)((wr_cli_jint(j, "expires_ms") - wr_now_ms()) / 1000),
              (long long)wr_cli_jint(j, "waiting"));
  return WR_CLI_EXIT_OK;
}

int wr_cli_project_lease(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct lease_opts o = {0};
  _cleanup_json_ json_t *j = NULL;
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};

  if (parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("project lease", &err);
  if (o.help)
    return wr_cli_help(help);
  if (o.show)
    return show(ctx, &o);
  if (o.release != NULL) {
    _cleanup_free_ char *tok = wr_cli_escape(o.release);
    _cleanup_free_ char *q = xasprintf("?token=%s", tok);
    path = lease_path(o.name, q);
    if (wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, &err) < 0)
      return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
    return WR_CLI_EXIT_OK;
  }
  if (o.renew != NULL) {
    _cleanup_json_ json_t *body = json_pack("{s:s}", "token", o.renew);
    if (o.ttl)
      json_object_set_new(body, "ttl", json_integer((json_int_t)o.ttl));
    path = lease_path(o.name, NULL);
    if (wr_cli_call(ctx, "PUT", path, body, &j, NULL, &err) < 0)
      return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  } else if (take(ctx, &o, &j, &err) < 0) {
    return wr_cli_fail(err.code == EAGAIN ? WR_CLI_EXIT_TIMEOUT
                                          : WR_CLI_EXIT_ERROR,
                       "%s", err.msg);
  }
  if (o.json)
    return wr_cli_print_json(j) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  printf("%s\n", wr_cli_jstr(j, "token"));
  return WR_CLI_EXIT_OK;
}
