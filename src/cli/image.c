/*
 * `warren image build|ls|inspect|rm`: base images. A build is a long NDJSON
 * stream of progress lines ending in a "done" or "error" event.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren image COMMAND [ARGS...]\n"
    "\n"
    "Manage the images and templates sandboxes start from.\n"
    "\n"
    "Commands:\n"
    "  build [NAME]   build an image with mmdebstrap (default name: base)\n"
    "  build NAME -f Dockerfile [DIR]\n"
    "                 build a template from a Dockerfile (cached layers)\n"
    "  ls             list images\n"
    "  inspect NAME   show an image: its Node.js, packages, size\n"
    "  rm NAME...     delete images and templates no sandbox uses\n"
    "\n"
    "Run `warren image COMMAND --help` for more.\n"
    "\n"
    "Example:\n"
    "  warren image build --include git,python3\n";

static const char build_help[] =
    "Usage: warren image build [NAME] [--minimal] [--node MAJOR|debian]\n"
    "                          [--include PKG,...] [--force] [--json]\n"
    "       warren image build NAME -f Dockerfile [DIR] [--json]\n"
    "\n"
    "With -f, build a template from a Dockerfile (docs/templates.md): FROM\n"
    "an image or template, RUN, COPY/ADD from DIR (default: .), ENV,\n"
    "WORKDIR, USER, EXPOSE (the port that says CMD is ready) and CMD (what\n"
    "a sandbox made from it starts). Each step is a cached layer: a rebuild\n"
    "runs only the steps after the first that changed. DIR is sent whole;\n"
    "a .dockerignore in it leaves what it matches out of COPY.\n"
    "\n"
    "Build a Debian image with mmdebstrap from the host's apt sources.\n"
    "Progress is printed on stderr as it happens. An image that is already\n"
    "built is kept unless --force is given.\n"
    "\n"
    "By default the image has what coding agents and their users reach\n"
    "for (git, curl, gcc and make, python3 with pip and venv, zip/unzip,\n"
    "jq, ripgrep, less, nano, ssh, wget, file, tree, lsof, ip, ps) and the\n"
    "current LTS Node.js (24) with npm and npx, from the npm registry the\n"
    "host's npm uses; its tarballs are checked against the registry's\n"
    "sha512 and cached under the state root (about 810 MiB).\n"
    "--minimal is the small image: git, curl, python3, procps and\n"
    "Debian's Node.js 18 (about 550 MiB, and quicker to build).\n"
    "\n"
    "Options:\n"
    "  --minimal          the small package list, with Debian's Node.js\n"
    "  --node MAJOR       that Node.js major from the registry (18 or newer)\n"
    "  --node debian      Debian's own nodejs and npm packages\n"
    "  --include PKG,...  extra packages (repeatable, comma-separated)\n"
    "  --force            rebuild even if the image exists\n"
    "  -f, --file FILE    build a template from this Dockerfile\n"
    "  --json             print the image object when done\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  warren image build\n"
    "  warren image build node22 --node 22\n"
    "  warren image build small --minimal --include python3-pip\n"
    "  warren image build vite -f Dockerfile .\n";

static const char ls_help[] =
    "Usage: warren image ls [--json]\n"
    "\n"
    "List images and templates: NAME STATE SIZE NODE KIND PARENT CREATED.\n"
    "NODE is the version of Node.js and where it came from (registry or\n"
    "debian); KIND is default, minimal or template; PARENT is what a\n"
    "template's FROM names.\n"
    "\n"
    "Options:\n"
    "  --json      print a JSON array of image objects\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren image ls\n";

static const char inspect_help[] =
    "Usage: warren image inspect NAME [--json]\n"
    "\n"
    "Show an image: state, suite, size, whether minimal, its Node.js\n"
    "(version, source, npm) and its packages. For a template: what it is\n"
    "FROM, its size, CMD, EXPOSE, ENV, WORKDIR, USER and its steps.\n"
    "\n"
    "Options:\n"
    "  --json      print the image object\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren image inspect base\n";

static const char rm_help[] =
    "Usage: warren image rm NAME...\n"
    "\n"
    "Delete images and templates. One that sandboxes use (or templates\n"
    "are built on, or, for a template, snapshots are made from) cannot be\n"
    "deleted; a template's layers that no other template uses go with it.\n"
    "Prints each name once deleted; goes on after a failure and then\n"
    "exits 1.\n"
    "\n"
    "Options:\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren image rm py\n";

enum { OPT_INCLUDE = 256, OPT_FORCE, OPT_JSON, OPT_MINIMAL, OPT_NODE };

static const struct option build_opts[] = {
    {"include", required_argument, NULL, OPT_INCLUDE},
    {"minimal", no_argument, NULL, OPT_MINIMAL},
    {"node", required_argument, NULL, OPT_NODE},
    {"force", no_argument, NULL, OPT_FORCE},
    {"json", no_argument, NULL, OPT_JSON},
    {"file", required_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* ---- build --------------------------------------------------------------- */

struct build {
  json_t *body; /* the request */
  json_t *done; /* the "done" event */
  char *error;  /* the "error" event's message */
  bool json, help;
  const char *dockerfile; /* -f: a template */
  const char *dir;        /* its context */
};

/* "git,python3" appended to the include array, empty items skipped. */
static void add_includes(json_t *include, const char *arg) {
  _cleanup_free_ char *copy = xstrdup(arg);
  char *save = NULL;

  for (char *p = strtok_r(copy, ",", &save); p != NULL;
       p = strtok_r(NULL, ",", &save))
    json_array_append_new(include, json_string(p));
}

/* The request body is built while parsing: --include adds to its array. */
static int parse_build(int argc, char **argv, struct build *b,
                       wr_error_t *err) {
  json_t *include = json_array();
  int c;

  json_object_set_new(b->body, "include", include);
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":hf:", build_opts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == 'f') {
      b->dockerfile = optarg;
      continue;
    }
    if ((c == OPT_INCLUDE || c == OPT_NODE) &&
        wr_cli_check_text(optarg, c == OPT_NODE ? "--node" : "--include", err) <
            0)
      return -1;
    if (c == OPT_INCLUDE)
      add_includes(include, optarg);
    else if (c == OPT_NODE)
      json_object_set_new(b->body, "node", json_string(optarg));
    else if (c == OPT_MINIMAL)
      json_object_set_new(b->body, "minimal", json_true());
    else if (c == OPT_FORCE)
      json_object_set_new(b->body, "force", json_true());
    else if (c == OPT_JSON)
      b->json = true;
    else
      b->help = true;
  }
  if (b->dockerfile != NULL && argc - optind == 2)
    b->dir = argv[optind + 1];
  else if (argc - optind > 1)
    return wr_error_set(err, 0, "unexpected argument `%s`", argv[optind + 1]);
  if (optind < argc &&
      wr_cli_check_text(argv[optind], "the image name", err) < 0)
    return -1;
  if (optind < argc)
    json_object_set_new(b->body, "name", json_string(argv[optind]));
  return 0;
}

/* Progress goes to stderr at once, so a slow build shows its life. */
static int on_build_event(json_t *event, void *arg, wr_error_t *err) {
  struct build *b = arg;
  const char *type = wr_cli_jstr(event, "type");

  (void)err;
  if (strcmp(type, "progress") == 0) {
    wr_cli_line(stderr, "  %s", wr_cli_jstr(event, "message"));
    return 0;
  }
  if (strcmp(type, "done") == 0) {
    b->done = json_incref(event);
    return 1;
  }
  if (strcmp(type, "error") == 0) {
    b->error = xstrdup(wr_cli_jstr(json_object_get(event, "error"), "message"));
    return 1;
  }
  return 0;
}

/* Validation errors arrive as a normal error reply; failures during the
 * build arrive as an "error" event in the stream. */
static int stream_build(const struct wr_cli_ctx *ctx, struct build *b,
                        wr_error_t *err) {
  _cleanup_client_ wr_http_client_t *c = NULL;
  _cleanup_response_ struct wr_http_response resp = {0};
  _cleanup_free_ char *data = wr_json_dumps(b->body);

  if (wr_cli_connect(ctx, &c, err) < 0)
    return -1;
  if (wr_http_request_stream(c, "POST", "/v1/images", "application/json", data,
                             strlen(data), &resp, err) < 0)
    return -1;
  if (resp.status != 200)
    return wr_cli_stream_error(c, &resp, err);
  if (wr_cli_ndjson_read(c, on_build_event, b, err) < 0)
    return -1;
  if (b->error != NULL)
    return wr_error_set(err, 0, "%s", b->error);
  if (b->done == NULL)
    return wr_error_set(err, 0, "the build ended without a result");
  return 0;
}

/* A reused image is not an error, but the user may have wanted a rebuild. */
static int print_built(const struct build *b) {
  json_t *image = json_object_get(b->done, "image");
  char size[32];

  if (b->json)
    return wr_cli_print_json(image) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  if (wr_cli_jbool(b->done, "reused")) {
    printf("image `%s` already built (use --force to rebuild)\n",
           wr_cli_jstr(image, "name"));
    return WR_CLI_EXIT_OK;
  }
  wr_format_size((uint64_t)WR_MAX(wr_cli_jint(image, "size_bytes"), 0), size,
                 sizeof(size));
  printf("image `%s` ready (%s)\n", wr_cli_jstr(image, "name"), size);
  return WR_CLI_EXIT_OK;
}

static void build_free(struct build *b) {
  json_decref(b->body);
  json_decref(b->done);
  free(b->error);
}

/* `warren image build`. */
static int cmd_build(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct build b _cleanup_(build_free) = {.body = json_object()};
  wr_error_t err = {0};

  if (parse_build(argc, argv, &b, &err) < 0)
    return wr_cli_usage("image build", &err);
  if (b.help)
    return wr_cli_help(build_help);
  if (b.dockerfile != NULL)
    return wr_cli_template_build(
        ctx, json_string_value(json_object_get(b.body, "name")), b.dockerfile,
        b.dir, b.json);
  if (stream_build(ctx, &b, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return print_built(&b);
}

/* ---- ls and inspect ------------------------------------------------------ */

/* "24.1.0 (registry)", or "-" for an image that does not say. */
static char *node_text(const json_t *img) {
  const json_t *node = json_object_get(img, "node");
  const char *version = wr_cli_jstr(node, "version");

  if (!json_is_object(node) || version[0] == '\0')
    return xstrdup("-");
  return xasprintf("%s (%s)", version, wr_cli_jstr(node, "source"));
}

/* "git,curl" for the table; "-" when the image has no extra packages. */
static char *join_packages(const json_t *packages) {
  wr_buf_t b;
  size_t i;
  json_t *p;

  wr_buf_init(&b);
  json_array_foreach ((json_t *)packages, i, p) {
    if (json_string_value(p) == NULL)
      continue;
    if (b.len > 0)
      wr_buf_puts(&b, ",");
    wr_buf_puts(&b, json_string_value(p));
  }
  if (b.len == 0)
    wr_buf_puts(&b, "-");
  return wr_buf_steal(&b, NULL);
}

/* One image as a table row. */
static bool is_template(const json_t *img) {
  return strcmp(wr_cli_jstr(img, "kind"), "template") == 0;
}

static void add_image_row(struct wr_cli_table *t, const json_t *img) {
  _cleanup_free_ char *node = node_text(img);
  char size[32] = "-", created[64];

  if (wr_cli_jint(img, "size_bytes") >= 0)
    wr_format_size((uint64_t)wr_cli_jint(img, "size_bytes"), size,
                   sizeof(size));
  wr_cli_field_ago(img, "created_at", created, sizeof(created));
  wr_cli_table_add(
      t, (const char *const[]){
             wr_cli_jstr(img, "name"), wr_cli_jstr(img, "state"), size, node,
             is_template(img)               ? "template"
             : wr_cli_jbool(img, "minimal") ? "minimal"
                                            : "default",
             is_template(img) ? wr_cli_jstr(img, "parent") : "-", created});
}

/* `warren image ls`. */
static int cmd_ls(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  static const struct option ls_opts[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  struct wr_cli_table t _cleanup_(wr_cli_table_free) = {0};
  _cleanup_json_ json_t *reply = NULL;
  wr_error_t err = {0};
  bool json = false;
  json_t *list, *img;
  size_t i;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", ls_opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("image ls", &err);
    if (c == 'h')
      return wr_cli_help(ls_help);
    json = true;
  }
  if (optind < argc) {
    wr_error_set(&err, 0, "unexpected argument `%s`", argv[optind]);
    return wr_cli_usage("image ls", &err);
  }
  if (wr_cli_call(ctx, "GET", "/v1/images", NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  list = json_object_get(reply, "images");
  if (json)
    return wr_cli_print_json(list) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  wr_cli_table_init(&t, 7);
  wr_cli_table_add(&t, (const char *const[]){"NAME", "STATE", "SIZE", "NODE",
                                             "KIND", "PARENT", "CREATED"});
  json_array_foreach (list, i, img)
    add_image_row(&t, img);
  wr_cli_table_print(&t, stdout);
  return WR_CLI_EXIT_OK;
}

/* Aligned `key: value` lines, as `warren inspect`. */
/* A template: what it is made of and what a sandbox made from it runs. */
static void print_template(const json_t *t) {
  json_t *steps = json_object_get(t, "steps"), *st;
  _cleanup_free_ char *env = join_packages(json_object_get(t, "env"));
  _cleanup_free_ char *cmd =
      json_dumps(json_object_get(t, "cmd"), JSON_COMPACT);
  char size[32] = "-";
  size_t i;

  wr_format_size((uint64_t)WR_MAX(wr_cli_jint(t, "size_bytes"), 0), size,
                 sizeof(size));
  wr_cli_line(stdout, "name:     %s", wr_cli_jstr(t, "name"));
  wr_cli_line(stdout, "kind:     template");
  wr_cli_line(stdout, "from:     %s (image %s)", wr_cli_jstr(t, "parent"),
              wr_cli_jstr(t, "base"));
  wr_cli_line(stdout, "size:     %s", size);
  wr_cli_line(stdout, "cmd:      %s", cmd != NULL ? cmd : "-");
  if (wr_cli_jint(t, "expose") > 0)
    wr_cli_line(stdout, "expose:   %lld", (long long)wr_cli_jint(t, "expose"));
  else
    wr_cli_line(stdout, "expose:   -");
  wr_cli_line(stdout, "env:      %s", *env ? env : "-");
  wr_cli_line(stdout, "workdir:  %s", wr_cli_jstr(t, "workdir"));
  wr_cli_line(stdout, "user:     %s", wr_cli_jstr(t, "user"));
  wr_cli_line(stdout, "created:  %s", wr_cli_jstr(t, "created_at"));
  wr_cli_line(stdout, "steps:");
  json_array_foreach (steps, i, st)
    wr_cli_line(
        stdout, "  %2lld %s%s", (long long)wr_cli_jint(st, "step"),
        wr_cli_jstr(st, "instruction"),
        wr_cli_jbool(st, "layer")
            ? (wr_cli_jbool(st, "cached") ? "  [layer, cached]" : "  [layer]")
            : "");
}

static void print_image(const json_t *img) {
  _cleanup_free_ char *node = node_text(img);
  _cleanup_free_ char *packages =
      join_packages(json_object_get(img, "packages"));
  const json_t *n = json_object_get(img, "node");
  char size[32] = "-";

  if (wr_cli_jint(img, "size_bytes") > 0)
    wr_format_size((uint64_t)wr_cli_jint(img, "size_bytes"), size,
                   sizeof(size));
  wr_cli_line(stdout, "name:     %s", wr_cli_jstr(img, "name"));
  wr_cli_line(stdout, "state:    %s", wr_cli_jstr(img, "state"));
  wr_cli_line(stdout, "suite:    %s", wr_cli_jstr(img, "suite"));
  wr_cli_line(stdout, "kind:     %s",
              wr_cli_jbool(img, "minimal") ? "minimal" : "default");
  wr_cli_line(stdout, "size:     %s", size);
  wr_cli_line(stdout, "node:     %s", node);
  if (json_is_object(n))
    wr_cli_line(stdout, "npm:      %s", wr_cli_jstr(n, "npm"));
  if (json_is_object(n) && json_object_get(n, "registry") != NULL)
    wr_cli_line(stdout, "registry: %s", wr_cli_jstr(n, "registry"));
  wr_cli_line(stdout, "packages: %s", packages);
  wr_cli_line(stdout, "created:  %s", wr_cli_jstr(img, "created_at"));
}

/* `warren image inspect`. */
static int cmd_inspect(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  static const struct option inspect_opts[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *esc = NULL;
  wr_error_t err = {0};
  bool json = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", inspect_opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("image inspect", &err);
    if (c == 'h')
      return wr_cli_help(inspect_help);
    json = true;
  }
  if (argc - optind != 1) {
    wr_error_set(&err, 0, "expected one image name");
    return wr_cli_usage("image inspect", &err);
  }
  esc = wr_cli_escape(argv[optind]);
  path = xasprintf("/v1/images/%s", esc);
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  if (is_template(reply))
    print_template(reply);
  else
    print_image(reply);
  return WR_CLI_EXIT_OK;
}

/* ---- rm ------------------------------------------------------------------ */

static int delete_image(const struct wr_cli_ctx *ctx, const char *name,
                        void *arg, wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(name);
  _cleanup_free_ char *path = xasprintf("/v1/images/%s", esc);

  (void)arg;
  return wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err);
}

/* `warren image rm`: each name in turn, as `warren rm`. */
static int cmd_rm(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  static const struct option rm_opts[] = {
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  wr_error_t err = {0};
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", rm_opts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("image rm", &err);
    return wr_cli_help(rm_help);
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more image names");
    return wr_cli_usage("image rm", &err);
  }
  return wr_cli_each(ctx, argv + optind, (size_t)(argc - optind), delete_image,
                     NULL);
}

/* ---- dispatch ------------------------------------------------------------ */

static const struct wr_cli_command image_commands[] = {
    {"build", "Build an image", cmd_build},
    {"ls", "List images", cmd_ls},
    {"inspect", "Show an image", cmd_inspect},
    {"rm", "Delete images", cmd_rm},
};

/* Its own --help lists the subcommands; the rest is a dispatch. */
int wr_cli_cmd_image(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};

  if (argc < 2) {
    wr_error_set(&err, 0, "expected a subcommand: build, ls, inspect or rm");
    return wr_cli_usage("image", &err);
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    return wr_cli_help(help);
  return wr_cli_dispatch(ctx, image_commands, WR_ARRAY_SIZE(image_commands),
                         "image", argc - 1, argv + 1);
}
