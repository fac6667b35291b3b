/*
 * `warren cp SRC DST`: which side is the sandbox, and the command itself.
 * The transfers are in cp_transfer.c.
 */
#include "cli/cli.h"

static const char help[] =
    "Usage: warren cp [OPTIONS] SRC DST\n"
    "\n"
    "Copy files and directories between the host and a sandbox (running,\n"
    "paused or stopped). Exactly one of SRC and DST is NAME:/PATH, an\n"
    "absolute path inside sandbox NAME. A local path with a colon is\n"
    "written with a slash before it (./a:b).\n"
    "\n"
    "Like `docker cp`:\n"
    "  a file to an existing directory (or to a path ending in /) goes\n"
    "    inside it, under its own name; to another path, it becomes that\n"
    "    file (replaced atomically)\n"
    "  a directory to an existing directory DEST becomes DEST/BASENAME;\n"
    "    to a path that does not exist, it becomes that path\n"
    "  SRC/. copies a directory's contents\n"
    "  `-` as SRC reads a tar stream from stdin and extracts it into the\n"
    "    sandbox directory DST; `-` as DST writes SRC as a tar to stdout\n"
    "Symlinks named on the command line are followed on the host; inside\n"
    "trees they are copied as links. Paths in the sandbox never resolve\n"
    "outside it.\n"
    "\n"
    "Sparse files keep their holes both ways: a 1 TiB file that holds a few\n"
    "blocks of data copies as a few blocks. A copy out of a sandbox is\n"
    "refused, with nothing written, when its data is more than the free\n"
    "space where it lands or --max-size; sizes count bytes of file data\n"
    "(holes are free). A copy that fails leaves nothing at DST.\n"
    "\n"
    "Options:\n"
    "      --max-size SIZE  copy at most SIZE bytes of file data (1g, 500m)\n"
    "  -h, --help           show this help\n"
    "\n"
    "Examples:\n"
    "  warren cp ./app web:/srv/        # -> /srv/app\n"
    "  warren cp web:/var/log/app.log .\n"
    "  warren cp web:/srv/app ./backup  # ./backup is the copy\n"
    "  tar -c src | warren cp - web:/work\n"
    "  warren cp web:/etc - | tar -t\n";

static const struct option longopts[] = {
    {"max-size", required_argument, NULL, 'M'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/*
 * Remote when the text before the first colon is a valid sandbox name or
 * id, so "./a:b", "/tmp/a:b" and "C:\x" stay local: a slash (or an upper
 * case letter) cannot be part of a name.
 */
int wr_cli_cp_parse_loc(const char *arg, struct wr_cli_cp_loc *loc,
                        wr_error_t *err) {
  const char *colon = strchr(arg, ':');
  _cleanup_free_ char *name = NULL;

  loc->sandbox = loc->path = NULL;
  if (*arg == '\0')
    return wr_error_set(err, 0, "empty path");
  if (colon != NULL)
    name = xstrndup(arg, (size_t)(colon - arg));
  if (name == NULL || !wr_name_valid(name)) {
    loc->path = xstrdup(arg);
    return 0;
  }
  if (colon[1] != '/')
    return wr_error_set(err, 0,
                        "`%s`: the path in the sandbox must be absolute "
                        "(%s:/PATH)",
                        arg, name);
  loc->sandbox = steal_ptr(&name);
  loc->path = xstrdup(colon + 1);
  return 0;
}

void wr_cli_cp_loc_free(struct wr_cli_cp_loc *loc) {
  free(loc->sandbox);
  free(loc->path);
  loc->sandbox = loc->path = NULL;
}

/* Exactly one side in a sandbox. */
static int check_sides(const struct wr_cli_cp_loc *src,
                       const struct wr_cli_cp_loc *dst, wr_error_t *err) {
  if (src->sandbox != NULL && dst->sandbox != NULL)
    return wr_error_set(err, 0,
                        "copying between two sandboxes is not supported");
  if (src->sandbox == NULL && dst->sandbox == NULL)
    return wr_error_set(err, 0,
                        "one of SRC and DST must be in a sandbox "
                        "(NAME:/PATH)");
  if (strcmp(src->path, "-") == 0 && strcmp(dst->path, "-") == 0)
    return wr_error_set(err, 0, "SRC and DST cannot both be `-`");
  return 0;
}

/* Both arguments are classified before anything is sent, so a mistake
 * is a usage error. */
int wr_cli_cmd_cp(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_cp_loc src _cleanup_(wr_cli_cp_loc_free) = {0};
  struct wr_cli_cp_loc dst _cleanup_(wr_cli_cp_loc_free) = {0};
  struct wr_cli_cp_opts opts = {0};
  wr_error_t err = {0};
  int c, r;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("cp", &err);
    if (c == 'h')
      return wr_cli_help(help);
    if (wr_parse_size(optarg, &opts.max_size, &err) < 0)
      return wr_cli_usage("cp", &err);
    if (opts.max_size == 0) {
      wr_error_set(&err, 0, "--max-size must be more than 0");
      return wr_cli_usage("cp", &err);
    }
  }
  if (argc - optind != 2) {
    wr_error_set(&err, 0, "expected SRC and DST");
    return wr_cli_usage("cp", &err);
  }
  if (wr_cli_cp_parse_loc(argv[optind], &src, &err) < 0 ||
      wr_cli_cp_parse_loc(argv[optind + 1], &dst, &err) < 0 ||
      check_sides(&src, &dst, &err) < 0)
    return wr_cli_usage("cp", &err);
  if (dst.sandbox != NULL)
    r = wr_cli_cp_upload(ctx, src.path, &dst, &opts, &err);
  else
    r = wr_cli_cp_download(ctx, &src, dst.path, &opts, &err);
  if (r < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  return WR_CLI_EXIT_OK;
}
