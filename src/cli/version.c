/* `warren version`: the client's version and, if reachable, the daemon's. */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren version [--json]\n"
    "\n"
    "Print the version of this client and, when warrend can be reached,\n"
    "the daemon's /v1/info: its version, API version, driver, cgroup\n"
    "version, kernel, sandbox counts, and the CAs sandboxes trust besides\n"
    "their image's bundle and warren's own (the host's added CAs and\n"
    "warrend's --sandbox-ca files; --json lists each by subject, file and\n"
    "expiry). An unreachable daemon is reported but is not an error.\n"
    "\n"
    "Options:\n"
    "  --json      print {\"client\":{\"version\"},\"daemon\":INFO|null}\n"
    "  -h, --help  show this help\n"
    "\n"
    "Example:\n"
    "  warren version\n";

enum { OPT_JSON = 256 };

static const struct option longopts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* How many extra CAs sandboxes trust, and how many files were left out
 * (a daemon older than this client says nothing about them). */
static void print_cas(const json_t *cas) {
  size_t skipped = json_array_size(json_object_get(cas, "skipped"));

  if (!json_is_object(cas))
    return;
  printf("sandbox CAs: %lld besides the image's and warren's",
         (long long)wr_cli_jint(cas, "count"));
  if (skipped > 0)
    printf(" (%zu file(s) skipped: see --json)", skipped);
  printf("\n");
}

/* The daemon's part only when it answered; why not otherwise. */
static void print_human(const json_t *info, const wr_error_t *err) {
  printf("client: warren %s\n", WR_VERSION);
  if (info == NULL) {
    printf("daemon: %s\n", err->msg);
    return;
  }
  printf("daemon: warrend %s (API %lld, driver %s, cgroup %s)\n",
         wr_cli_jstr(info, "version"),
         (long long)wr_cli_jint(info, "api_version"),
         wr_cli_jstr(info, "driver"), wr_cli_jstr(info, "cgroup"));
  printf("kernel: %s\n", wr_cli_jstr(info, "kernel"));
  printf("root:   %s\n", wr_cli_jstr(info, "root"));
  printf("sandboxes: %lld (%lld running)\n",
         (long long)wr_cli_jint(info, "sandboxes"),
         (long long)wr_cli_jint(info, "running"));
  print_cas(json_object_get(info, "sandbox_cas"));
}

static int print_json(const json_t *info) {
  _cleanup_json_ json_t *out =
      json_pack("{s:{s:s},s:O}", "client", "version", WR_VERSION, "daemon",
                info ? (json_t *)info : json_null());

  return wr_cli_print_json(out) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
}

/* An unreachable daemon is information here, not an error. */
int wr_cli_cmd_version(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_json_ json_t *info = NULL;
  wr_error_t err = {0};
  bool json = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("version", &err);
    if (c == 'h')
      return wr_cli_help(help);
    json = true;
  }
  if (optind < argc) {
    wr_error_set(&err, 0, "unexpected argument `%s`", argv[optind]);
    return wr_cli_usage("version", &err);
  }
  if (wr_cli_call(ctx, "GET", "/v1/info", NULL, &info, NULL, &err) < 0)
    info = NULL;
  if (json)
    return print_json(info);
  print_human(info, &err);
  return WR_CLI_EXIT_OK;
}
