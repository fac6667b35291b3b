/*
 * `warren snapshot` and `warren fork`: disk snapshots of sandboxes
 * (/v1/sandboxes/{id}/snapshots, /v1/snapshots). A fork is a snapshot
 * and a create from it, with the source's limits, environment and
 * working directory.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren snapshot NAME [--name S] [--retention-days D] [--json]\n"
    "       warren snapshot ls [--json]\n"
    "       warren snapshot inspect S [--json]\n"
    "       warren snapshot rm S...\n"
    "       warren snapshot export S > FILE\n"
    "       warren snapshot import [--name S] < FILE\n"
    "\n"
    "Take a disk snapshot of sandbox NAME: a read-only copy of its own\n"
    "files (what it changed over its image). A running sandbox keeps\n"
    "running: it is frozen only for the last, short pass of the copy,\n"
    "and the time it was frozen is printed. Processes and memory are not\n"
    "carried. `warren create --snapshot S` makes a sandbox whose files\n"
    "start as the snapshot's, with no copy.\n"
    "\n"
    "Options:\n"
    "  --name S              the snapshot's name (default: its id)\n"
    "  --retention-days D    remove it D days from now (decimals allowed)\n"
    "                        once no sandbox uses it (default: kept)\n"
    "  --json                print the snapshot as JSON\n"
    "  -h, --help            show this help\n"
    "\n"
    "A snapshot that a sandbox or another snapshot's stack uses cannot be\n"
    "removed. `export` writes a snapshot (its whole stack, as one\n"
    "zstd-compressed stream) to stdout; `import` reads one from stdin and\n"
    "makes it a snapshot of its own (refusing a corrupt or hostile one,\n"
    "and leaving nothing behind).\n"
    "\n"
    "Examples:\n"
    "  warren snapshot web --name web-clean\n"
    "  warren create --name web2 --snapshot web-clean\n"
    "  warren snapshot ls\n";

static const char fork_help[] =
    "Usage: warren fork NAME [--name M] [--json]\n"
    "\n"
    "Snapshot sandbox NAME and create sandbox M from it, with NAME's\n"
    "limits, environment and working directory. The two then change\n"
    "independently; the snapshot stays (named M's name plus \"-base\")\n"
    "until both are removed. Prints M's name.\n"
    "\n"
    "Options:\n"
    "  --name M    the new sandbox's name (default: generated)\n"
    "  --json      print the new sandbox as JSON\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren fork web --name web-try\n";

enum { OPT_NAME = 256, OPT_RETENTION, OPT_JSON };

static const struct option opts[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"retention-days", required_argument, NULL, OPT_RETENTION},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct snap_opts {
  const char *name;
  double retention;
  bool has_retention, json, help;
  char **args; /* positional */
  size_t nargs;
};

static int parse_days(const char *s, double *out, wr_error_t *err) {
  char *end = NULL;
  double v;

  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 36500)
    return wr_error_setx(err, EINVAL,
                         "--retention-days must be a number of days between "
                         "0 and 36500, not `%s`",
                         s);
  *out = v;
  return 0;
}

static int parse(int argc, char **argv, struct snap_opts *o, wr_error_t *err) {
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", opts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == 'h')
      o->help = true;
    else if (c == OPT_NAME && wr_cli_check_text(optarg, "--name", err) < 0)
      return -1;
    else if (c == OPT_NAME)
      o->name = optarg;
    else if (c == OPT_RETENTION && parse_days(optarg, &o->retention, err) < 0)
      return -1;
    else if (c == OPT_RETENTION)
      o->has_retention = true;
    else if (c == OPT_JSON)
      o->json = true;
  }
  o->args = argv + optind;
  o->nargs = (size_t)(argc - optind);
  for (size_t i = 0; i < o->nargs; i++)
    if (wr_cli_check_text(o->args[i], "the name", err) < 0)
      return -1;
  return 0;
}

static char *snapshot_path(const char *name) {
  _cleanup_free_ char *e = wr_cli_escape(name);

  return xasprintf("/v1/snapshots/%s", e);
}

static void print_capture(const json_t *snap) {
  const json_t *cap = json_object_get(snap, "capture");
  char size[32];

  wr_format_size((uint64_t)WR_MAX(wr_cli_jint(snap, "size_bytes"), 0), size,
                 sizeof(size));
  fprintf(stderr, "%s: %lld files, %s, %s%.1f ms frozen, %.1f ms in all\n",
          wr_cli_jstr(snap, "name"), (long long)wr_cli_jint(cap, "files"), size,
          json_is_true(json_object_get(cap, "live")) ? "" : "not running: ",
          json_real_value(json_object_get(cap, "frozen_ms")),
          json_real_value(json_object_get(cap, "total_ms")));
}

static int take(const struct wr_cli_ctx *ctx, const char *sandbox,
                const char *name, const struct snap_opts *o, json_t **out,
                wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(sandbox, "/snapshots");
  _cleanup_json_ json_t *body = json_object();

  if (name != NULL)
    json_object_set_new(body, "name", json_string(name));
  if (o != NULL && o->has_retention)
    json_object_set_new(body, "retention_days", json_real(o->retention));
  return wr_cli_call(ctx, "POST", path, body, out, NULL, err);
}

static int cmd_take(const struct wr_cli_ctx *ctx, const struct snap_opts *o) {
  _cleanup_json_ json_t *snap = NULL;
  wr_error_t err = {0};

  if (o->nargs != 1)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "snapshot takes one sandbox name (see `warren snapshot "
                       "--help`)");
  if (take(ctx, o->args[0], o->name, o, &snap, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o->json)
    return wr_cli_print_json(snap) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  print_capture(snap);
  printf("%s\n", wr_cli_jstr(snap, "name"));
  return WR_CLI_EXIT_OK;
}

static void add_row(struct wr_cli_table *t, const json_t *s) {
  char size[32], age[48], depth[16];
  const json_t *src = json_object_get(s, "source");
  const char *parent = wr_cli_jstr(s, "parent");

  wr_format_size((uint64_t)WR_MAX(wr_cli_jint(s, "size_bytes"), 0), size,
                 sizeof(size));
  wr_cli_field_ago(s, "created_at", age, sizeof(age));
  snprintf(depth, sizeof(depth), "%lld", (long long)wr_cli_jint(s, "depth"));
  wr_cli_table_add(
      t, (const char *const[]){
             wr_cli_jstr(s, "name"), wr_cli_jstr(s, "id"),
             wr_cli_jstr(s, "state"), size, age,
             json_is_object(src) ? wr_cli_jstr(src, "name") : "(imported)",
             *parent ? parent : "-", depth,
             json_array_size(json_object_get(s, "used_by")) ? "yes" : "no"});
}

static int cmd_ls(const struct wr_cli_ctx *ctx, const struct snap_opts *o) {
  _cleanup_json_ json_t *reply = NULL;
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  json_t *list, *s;
  wr_error_t err = {0};
  size_t i;

  if (o->nargs != 0)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "snapshot ls takes no names");
  if (wr_cli_call(ctx, "GET", "/v1/snapshots", NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  list = json_object_get(reply, "snapshots");
  if (o->json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  wr_cli_table_init(&t, 9);
  wr_cli_table_add(&t, (const char *const[]){"NAME", "ID", "STATE", "SIZE",
                                             "CREATED", "SOURCE", "PARENT",
                                             "DEPTH", "IN USE"});
  json_array_foreach (list, i, s)
    add_row(&t, s);
  wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

static int cmd_inspect(const struct wr_cli_ctx *ctx,
                       const struct snap_opts *o) {
  _cleanup_json_ json_t *snap = NULL;
  _cleanup_free_ char *path = NULL;
  wr_error_t err = {0};

  if (o->nargs != 1)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "snapshot inspect takes one name");
  path = snapshot_path(o->args[0]);
  if (wr_cli_call(ctx, "GET", path, NULL, &snap, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  /* The object says everything; text is the same JSON, for now. */
  return wr_cli_print_json(snap) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
}

static int rm_one(const struct wr_cli_ctx *ctx, const char *name, void *arg,
                  wr_error_t *err) {
  _cleanup_free_ char *path = snapshot_path(name);

  (void)arg;
  if (wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err) < 0)
    return -1;
  printf("%s\n", name);
  return 0;
}

static int cmd_export(const struct wr_cli_ctx *ctx, const struct snap_opts *o) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = NULL, *e = NULL;
  wr_error_t err = {0};
  char buf[65536];
  ssize_t n;

  if (o->nargs != 1)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "snapshot export takes one name");
  if (isatty(STDOUT_FILENO))
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "the stream is binary: redirect stdout to a file");
  e = wr_cli_escape(o->args[0]);
  path = xasprintf("/v1/snapshots/%s/export", e);
  if (wr_cli_connect(ctx, &c, &err) < 0 ||
      wr_http_request_stream(c, "GET", path, NULL, NULL, 0, &resp, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (resp.status != 200) {
    wr_cli_stream_error(c, &resp, &err);
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  }
  while ((n = wr_http_read_body(c, buf, sizeof(buf), &err)) > 0)
    if (wr_write_all(STDOUT_FILENO, buf, (size_t)n, &err) < 0)
      return wr_cli_fail(WR_CLI_EXIT_ERROR, "write: %s", err.msg);
  if (n < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "the export was cut off: %s",
                       err.msg);
  return WR_CLI_EXIT_OK;
}

static ssize_t stdin_producer(void *arg, char *buf, size_t size) {
  ssize_t n;

  (void)arg;
  do
    n = read(STDIN_FILENO, buf, size);
  while (n < 0 && errno == EINTR);
  return n;
}

static int cmd_import(const struct wr_cli_ctx *ctx, const struct snap_opts *o) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *path = NULL, *e = NULL;
  _cleanup_json_ json_t *snap = NULL;
  wr_error_t err = {0};
  wr_buf_t body;
  char buf[4096];
  ssize_t n;

  if (o->nargs != 0)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "snapshot import reads stdin; it takes --name only");
  if (isatty(STDIN_FILENO))
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "redirect stdin from a file");
  e = o->name ? wr_cli_escape(o->name) : NULL;
  path = e ? xasprintf("/v1/snapshots/import?name=%s", e)
           : xstrdup("/v1/snapshots/import");
  if (wr_cli_connect(ctx, &c, &err) < 0 ||
      wr_http_request_upload(c, "POST", path, "application/zstd",
                             stdin_producer, NULL, &resp, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (resp.status != 201) {
    wr_cli_stream_error(c, &resp, &err);
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  }
  wr_buf_init(&body);
  while ((n = wr_http_read_body(c, buf, sizeof(buf), &err)) > 0)
    wr_buf_append(&body, buf, (size_t)n);
  snap = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
  wr_buf_free(&body);
  if (snap == NULL)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "the daemon's reply is not JSON");
  if (o->json)
    return wr_cli_print_json(snap) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  printf("%s\n", wr_cli_jstr(snap, "name"));
  return WR_CLI_EXIT_OK;
}

static int cmd_rm(const struct wr_cli_ctx *ctx, const struct snap_opts *o) {
  if (o->nargs == 0)
    return wr_cli_fail(WR_CLI_EXIT_USAGE, "snapshot rm takes names");
  return wr_cli_each(ctx, o->args, o->nargs, rm_one, NULL);
}

int wr_cli_cmd_snapshot(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct snap_opts o = {0};
  wr_error_t err = {0};
  const char *sub = argc > 1 ? argv[1] : "";

  if (strcmp(sub, "ls") == 0 || strcmp(sub, "inspect") == 0 ||
      strcmp(sub, "rm") == 0 || strcmp(sub, "export") == 0 ||
      strcmp(sub, "import") == 0) {
    if (parse(argc - 1, argv + 1, &o, &err) < 0)
      return wr_cli_usage("snapshot", &err);
  } else if (parse(argc, argv, &o, &err) < 0) {
    return wr_cli_usage("snapshot", &err);
  }
  if (o.help)
    return wr_cli_help(help);
  if (strcmp(sub, "ls") == 0)
    return cmd_ls(ctx, &o);
  if (strcmp(sub, "inspect") == 0)
    return cmd_inspect(ctx, &o);
  if (strcmp(sub, "rm") == 0)
    return cmd_rm(ctx, &o);
  if (strcmp(sub, "export") == 0)
    return cmd_export(ctx, &o);
  if (strcmp(sub, "import") == 0)
    return cmd_import(ctx, &o);
  return cmd_take(ctx, &o);
}

/* ---- fork ------------------------------------------------------------------
 */

/* The source's settings that a fork keeps: its limits, environment and
 * working directory (not its name, labels, workspace or ports). */
static json_t *fork_body(const json_t *src, const char *snapshot,
                         const char *name) {
  const json_t *lim = json_object_get(src, "limits");
  json_t *body = json_pack("{s:s}", "snapshot", snapshot);
  static const char *const limits[][2] = {{"memory_bytes", "memory"},
                                          {"cpus", "cpus"},
                                          {"pids", "pids"},
                                          {"disk_bytes", "disk"}};

  if (name != NULL)
    json_object_set_new(body, "name", json_string(name));
  for (size_t i = 0; i < WR_ARRAY_SIZE(limits); i++) {
    json_t *v = json_object_get(lim, limits[i][0]);
    if (v != NULL && !json_is_null(v))
      json_object_set(body, limits[i][1], v);
  }
  if (json_is_object(json_object_get(src, "env")))
    json_object_set(body, "env", json_object_get(src, "env"));
  if (json_is_string(json_object_get(src, "workdir")) &&
      json_is_null(json_object_get(src, "workspace")))
    json_object_set(body, "workdir", json_object_get(src, "workdir"));
  return body;
}

int wr_cli_cmd_fork(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct snap_opts o = {0};
  _cleanup_json_ json_t *src = NULL, *snap = NULL, *body = NULL, *sb = NULL;
  _cleanup_free_ char *path = NULL, *snap_name = NULL;
  wr_error_t err = {0};

  if (parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("fork", &err);
  if (o.help)
    return wr_cli_help(fork_help);
  if (o.nargs != 1 || o.has_retention)
    return wr_cli_fail(WR_CLI_EXIT_USAGE,
                       "fork takes one sandbox name and --name (see `warren "
                       "fork --help`)");
  path = wr_cli_sandbox_path(o.args[0], "");
  if (wr_cli_call(ctx, "GET", path, NULL, &src, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o.name != NULL)
    snap_name = xasprintf("%s-base", o.name);
  if (take(ctx, o.args[0], snap_name, NULL, &snap, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  body = fork_body(src, wr_cli_jstr(snap, "id"), o.name);
  /* The new sandbox may wait for a free one (warrend's --max-running). */
  if (wr_cli_call_in_line(ctx, "POST", "/v1/sandboxes", body, 0, &sb, &err) <
      0) {
    wr_error_t ignored = {0};
    _cleanup_free_ char *sp = snapshot_path(wr_cli_jstr(snap, "id"));
    wr_cli_call(ctx, "DELETE", sp, NULL, NULL, NULL, &ignored);
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  }
  if (o.json)
    return wr_cli_print_json(sb) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  print_capture(snap);
  printf("%s\n", wr_cli_jstr(sb, "name"));
  return WR_CLI_EXIT_OK;
}
