/*
 * The top of `warren`: global options (--host, --api-key), the command
 * table and dispatch. Like crun's commands[], each entry names a run
 * function in its own file.
 */
#include "cli/cli.h"

#include <signal.h>

static const struct wr_cli_command commands[] = {
    {"create", "Create a sandbox", wr_cli_cmd_create},
    {"ls", "List sandboxes", wr_cli_cmd_ls},
    {"inspect", "Show a sandbox's details", wr_cli_cmd_inspect},
    {"diff", "List what changed in a sandbox's workspace", wr_cli_cmd_diff},
    {"exec", "Run a command in a sandbox", wr_cli_cmd_exec},
    {"sh", "Open an interactive shell in a sandbox", wr_cli_cmd_sh},
    {"ps", "List a sandbox's background processes", wr_cli_cmd_ps},
    {"logs", "Print a background process's output", wr_cli_cmd_logs},
    {"attach", "Attach to a background process", wr_cli_cmd_attach},
    {"run", "Attach the terminal to a sandbox's agent", wr_cli_cmd_run},
    {"kill", "Send a signal to a background process", wr_cli_cmd_kill},
    {"start", "Start stopped sandboxes", wr_cli_cmd_start},
    {"stop", "Stop sandboxes", wr_cli_cmd_stop},
    {"pause", "Freeze sandboxes", wr_cli_cmd_pause},
    {"resume", "Thaw paused sandboxes", wr_cli_cmd_resume},
    {"rm", "Delete sandboxes", wr_cli_cmd_rm},
    {"cp", "Copy files between the host and a sandbox", wr_cli_cmd_cp},
    {"snapshot", "Take, list, export and remove disk snapshots",
     wr_cli_cmd_snapshot},
    {"fork", "Snapshot a sandbox and create another from it", wr_cli_cmd_fork},
    {"ports", "Publish a sandbox's ports on the host", wr_cli_cmd_ports},
    {"pool", "Keep sandboxes of an image started and paused for creates",
     wr_cli_cmd_pool},
    {"project", "Projects in four tiers with git as the record",
     wr_cli_cmd_project},
    {"plan", "Show or run the tier planner's steps", wr_cli_cmd_plan},
    {"events", "Print or follow sandboxes' lifecycle events",
     wr_cli_cmd_events}, /* events.c */
    {"policy", "Control where sandboxes may connect", wr_cli_cmd_policy},
    {"secret", "Store credentials the proxy adds for sandboxes",
     wr_cli_cmd_secret},
    {"image", "Build, list, inspect and remove images", wr_cli_cmd_image},
    {"daemon", "Run the warren daemon (warrend)", wr_cli_cmd_daemon},
    {"version", "Show the client's and the daemon's versions",
     wr_cli_cmd_version},
    {"help", "Show help for a command", wr_cli_cmd_help},
};

const struct wr_cli_command *wr_cli_commands(size_t *n) {
  *n = WR_ARRAY_SIZE(commands);
  return commands;
}

/* The command list comes from the table, so it cannot go stale. */
void wr_cli_print_usage(FILE *out) {
  fputs("Usage: warren [--host ADDR] [--api-key KEY] COMMAND [ARGS...]\n"
        "\n"
        "warren runs untrusted code in sandboxes: isolated Linux machines\n"
        "that start in milliseconds. This is the client of warrend.\n"
        "\n"
        "Global options:\n"
        "  --host ADDR     where warrend listens: unix:/path or\n"
        "                  tcp://host:port (default: $WARREN_HOST, else\n"
        "                  " WR_CLI_DEFAULT_HOST ")\n"
        "  --api-key KEY   API key for tcp:// (default: $WARREN_API_KEY)\n"
        "  --version       print the client's version\n"
        "  -h, --help      show this help\n"
        "\n"
        "Commands:\n",
        out);
  for (size_t i = 0; i < WR_ARRAY_SIZE(commands); i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fputs("\n"
        "Run `warren help COMMAND` or `warren COMMAND --help` for more.\n"
        "\n"
        "Example:\n"
        "  warren daemon &\n"
        "  warren image build\n"
        "  warren create --name demo\n"
        "  warren exec demo -- uname -a\n",
        out);
}

/* An environment variable, with "" counted as unset. */
static const char *env_or(const char *name, const char *fallback) {
  const char *v = getenv(name);

  return v != NULL && *v != '\0' ? v : fallback;
}

/* "+" stops at the first operand: everything after the command's name
 * belongs to the command, even options that look global. */
int wr_cli_parse_global(int argc, char **argv, struct wr_cli_ctx *ctx,
                        bool *help, bool *version, wr_error_t *err) {
  enum { OPT_HOST = 256, OPT_API_KEY, OPT_VERSION };
  static const struct option longopts[] = {
      {"host", required_argument, NULL, OPT_HOST},
      {"api-key", required_argument, NULL, OPT_API_KEY},
      {"version", no_argument, NULL, OPT_VERSION},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  ctx->host = NULL;
  ctx->api_key = NULL;
  *help = *version = false;
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, "+:h", longopts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == OPT_HOST)
      ctx->host = optarg;
    else if (c == OPT_API_KEY)
      ctx->api_key = optarg;
    else if (c == OPT_VERSION)
      *version = true;
    else
      *help = true;
  }
  if (ctx->host == NULL || *ctx->host == '\0')
    ctx->host = env_or("WARREN_HOST", WR_CLI_DEFAULT_HOST);
  if (ctx->api_key == NULL)
    ctx->api_key = env_or("WARREN_API_KEY", NULL);
  return optind;
}

const struct wr_cli_command *
wr_cli_find_command(const struct wr_cli_command *table, size_t n,
                    const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(table[i].name, name) == 0)
      return &table[i];
  return NULL;
}

/* Shared by the top level and by `image`, whose subcommands are a table
 * too; prefix names the parent in messages. */
int wr_cli_dispatch(const struct wr_cli_ctx *ctx,
                    const struct wr_cli_command *table, size_t n,
                    const char *prefix, int argc, char **argv) {
  const struct wr_cli_command *cmd;
  wr_error_t err = {0};

  if (argc < 1) {
    wr_error_set(&err, 0, "no command given");
    return wr_cli_usage(prefix, &err);
  }
  cmd = wr_cli_find_command(table, n, argv[0]);
  if (cmd == NULL) {
    wr_error_set(&err, 0, "unknown command `%s%s%s`", prefix ? prefix : "",
                 prefix ? " " : "", argv[0]);
    return wr_cli_usage(prefix, &err);
  }
  return cmd->run(ctx, argc, argv);
}

/*
 * SIGPIPE is ignored for the whole program: a daemon that goes away or a
 * closed stdout are errors to report (or an exit like a shell's), not a
 * silent death in the middle of restoring the terminal.
 */
int wr_cli_main(int argc, char **argv) {
  struct wr_cli_ctx ctx;
  bool help, version;
  wr_error_t err = {0};
  int i;

  signal(SIGPIPE, SIG_IGN);
  i = wr_cli_parse_global(argc, argv, &ctx, &help, &version, &err);
  if (i < 0)
    return wr_cli_usage(NULL, &err);
  if (help) {
    wr_cli_print_usage(stdout);
    return WR_CLI_EXIT_OK;
  }
  if (version) {
    printf("warren %s\n", WR_VERSION);
    return WR_CLI_EXIT_OK;
  }
  if (i >= argc) {
    wr_cli_print_usage(stderr);
    return WR_CLI_EXIT_USAGE;
  }
  return wr_cli_dispatch(&ctx, commands, WR_ARRAY_SIZE(commands), NULL,
                         argc - i, argv + i);
}
