/*
 * `warren daemon`: run warrend, the binary installed next to `warren`.
 * Its options are passed through untouched; warrend parses them.
 */
#include "cli/cli.h"

#include <libgen.h>
#include <limits.h>
#include <signal.h>

static const char help[] =
    "Usage: warren daemon [OPTIONS]\n"
    "\n"
    "Run warrend, the warren daemon, in the foreground. It is the binary\n"
    "`warrend` next to this `warren`; the options go to it unchanged.\n"
    "\n"
    "warrend's options:\n"
    "  --root DIR         state directory (default /var/lib/warren)\n"
    "  --socket PATH      unix socket to listen on (default\n"
    "                     /run/warren/warrend.sock, root only)\n"
    "  --listen ADDR      also listen on TCP HOST:PORT (needs an API key)\n"
    "  --init PATH        the warren-init binary to use\n"
    "  --cgroup V         cgroup layout: auto, v1 or v2\n"
    "  --cgroup-parent P  cgroup below which sandboxes live (default: the\n"
    "                     root's own; another root's is refused)\n"
    "  --default-disk SIZE  disk limit of sandboxes created without one\n"
    "  --log-level LEVEL  error, warn, info or debug\n"
    "  --log-json         log one JSON object per line\n"
    "(`warrend --help` has the full list.)\n"
    "\n"
    "Examples:\n"
    "  warren daemon\n"
    "  warren daemon --root /srv/warren --log-level debug &\n";

/* The directory of the running binary, from /proc/self/exe. */
static int self_dir(char *out, size_t size, wr_error_t *err) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

  if (n < 0)
    return wr_error_set(err, errno, "readlink /proc/self/exe");
  exe[n] = '\0';
  if (wr_strlcpy(out, dirname(exe), size) < 0)
    return wr_error_set(err, ENAMETOOLONG, "path of warren");
  return 0;
}

/* Only a --help before a "--" is ours; everything else is warrend's. */
static bool wants_help(int argc, char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return true;
  return false;
}

/* exec, not fork: the daemon becomes this process, so a service manager
 * or a shell's job control sees warrend itself. */
int wr_cli_cmd_daemon(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char **args = NULL;
  wr_error_t err = {0};
  char dir[PATH_MAX];

  (void)ctx;
  if (wants_help(argc, argv))
    return wr_cli_help(help);
  if (self_dir(dir, sizeof(dir), &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  path = xasprintf("%s/warrend", dir);
  args = xcalloc((size_t)argc + 1, sizeof(char *));
  args[0] = path;
  for (int i = 1; i < argc; i++)
    args[i] = argv[i];
  fflush(NULL);
  signal(SIGPIPE, SIG_DFL); /* ignored dispositions survive exec */
  execv(path, args);
  return wr_cli_fail(errno == ENOENT ? WR_CLI_EXIT_NOT_FOUND
                                     : WR_CLI_EXIT_CANNOT_EXEC,
                     "cannot run %s: %s (warrend is installed next to "
                     "warren)",
                     path, strerror(errno));
}
