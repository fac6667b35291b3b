/*
 * `warren rm`: DELETE /v1/sandboxes/{id} for each name.
 *
 * A clone-mode sandbox's commits exist only inside it until the host
 * fetches them, so without -f rm first asks the sandbox (starting it for
 * the moment if it is stopped) whether a branch has commits that were
 * never fetched, and refuses if so. Once such a sandbox is gone, its
 * remote `warren-NAME` goes from the host repository.
 */
#include "cli/cli.h"

#include <jansson.h>

static const char help[] =
    "Usage: warren rm [-f] NAME...\n"
    "\n"
    "Delete sandboxes and everything in them: files, processes, cgroups,\n"
    "mounts. A running sandbox must be stopped first, unless -f is given.\n"
    "Prints each name once deleted; goes on after a failure and then\n"
    "exits 1.\n"
    "\n"
    "A clone-mode sandbox (warren create --clone) is not deleted while a\n"
    "branch of its clone has commits that were never fetched to the host\n"
    "(git fetch warren-NAME BRANCH), unless -f is given; a stopped one is\n"
    "started for a moment to check. Once it is deleted, the remote\n"
    "warren-NAME is removed from the host repository.\n"
    "\n"
    "Options:\n"
    "  -f, --force  delete running sandboxes too (their processes are\n"
    "               killed), and clones with unfetched commits\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  warren rm old\n"
    "  warren rm -f $(warren ls -q --label team=ci)\n";

static const struct option longopts[] = {
    {"force", no_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Branches listed in the refusal; the rest are counted. */
#define SHOWN_BRANCHES 20

/* POST /v1/sandboxes/{name}<suffix>; a stop kills at once (nothing but
 * the check ran since rm started it). */
static int post(const struct wr_cli_ctx *ctx, const char *name,
                const char *suffix, wr_error_t *err) {
  _cleanup_json_ json_t *body = NULL;

  if (strcmp(suffix, "/stop") == 0)
    body = json_pack("{s:i}", "timeout", 0);
  return wr_cli_sandbox_post(ctx, name, suffix, body, err);
}

/* The refusal: which branches, how many commits, and the ways on. */
static int refuse(const char *name, const struct wr_cli_clone_info *info,
                  const struct wr_cli_unfetched *u, size_t n, wr_error_t *err) {
  _cleanup_(wr_buf_free) wr_buf_t b = {0};

  wr_buf_printf(&b, "sandbox `%s` has commits that were never fetched:", name);
  for (size_t i = 0; i < n && i < SHOWN_BRANCHES; i++)
    wr_buf_printf(&b, "\n  %s: %llu commit%s", u[i].branch,
                  (unsigned long long)u[i].commits,
                  u[i].commits == 1 ? "" : "s");
  if (n > SHOWN_BRANCHES)
    wr_buf_printf(&b, "\n  and %zu more branches", n - SHOWN_BRANCHES);
  wr_buf_printf(&b,
                "\nfetch them in %s with `git fetch warren-%s %s`, or delete "
                "anyway with `warren rm -f %s`",
                info->host_path, name, u[0].branch, name);
  return wr_error_set(err, 0, "%s", b.data);
}

/* Ask the running sandbox; refuse when something was never fetched. */
static int check_fetched(const struct wr_cli_ctx *ctx, const char *name,
                         const struct wr_cli_clone_info *info,
                         wr_error_t *err) {
  struct wr_cli_unfetched *u = NULL;
  size_t n = 0;
  int r;

  if (wr_cli_clone_unfetched(ctx, name, info->mount, &u, &n, err) < 0)
    return wr_error_wrap(err,
                         "cannot tell whether sandbox `%s` has unfetched "
                         "commits (`warren rm -f %s` deletes it anyway)",
                         name, name);
  r = n > 0 ? refuse(name, info, u, n, err) : 0;
  wr_cli_unfetched_free(u, n);
  return r;
}

/*
 * A stopped sandbox is started for the check and stopped again, so that
 * rm leaves it as it found it when it refuses. A paused one is left to
 * the daemon, which refuses to delete it without -f anyway.
 */
static int check_clone(const struct wr_cli_ctx *ctx, const char *name,
                       const struct wr_cli_clone_info *info, wr_error_t *err) {
  wr_error_t stop_err = {0};
  int r;

  if (strcmp(info->state, "running") == 0)
    return check_fetched(ctx, name, info, err);
  if (strcmp(info->state, "stopped") != 0)
    return 0;
  if (post(ctx, name, "/start", err) < 0)
    return wr_error_wrap(err,
                         "start sandbox `%s` to look for unfetched commits "
                         "(`warren rm -f %s` deletes it anyway)",
                         name, name);
  r = check_fetched(ctx, name, info, err);
  if (post(ctx, name, "/stop", &stop_err) < 0 && r == 0) {
    *err = stop_err;
    return wr_error_wrap(err, "stop sandbox `%s` again after the check", name);
  }
  return r;
}

/* The remote goes once the sandbox has; failing that is only a warning. */
static void remove_remote(const char *name,
                          const struct wr_cli_clone_info *info) {
  wr_error_t err = {0};
  bool removed = false;

  if (wr_cli_clone_remote_remove(info->host_path, name, &removed, &err) < 0)
    wr_cli_fail(0,
                "warning: could not remove the git remote `warren-%s` "
                "from %s: %s",
                name, info->host_path, err.msg);
  else if (removed)
    fprintf(stderr, "removed git remote `warren-%s` from %s\n", name,
            info->host_path);
}

static int delete_one(const struct wr_cli_ctx *ctx, const char *name, void *arg,
                      wr_error_t *err) {
  const bool *force = arg;
  _cleanup_free_ char *path =
      wr_cli_sandbox_path(name, *force ? "?force=true" : NULL);
  struct wr_cli_clone_info info _cleanup_(wr_cli_clone_info_free) = {0};
  bool clone = false;

  if (wr_cli_clone_info(ctx, name, &info, &clone, err) < 0)
    return -1;
  if (clone && !*force && check_clone(ctx, name, &info, err) < 0)
    return -1;
  if (wr_cli_call(ctx, "DELETE", path, NULL, NULL, NULL, err) < 0)
    return -1;
  if (clone)
    remove_remote(name, &info);
  return 0;
}

/* `warren rm`: -f becomes ?force=true on each DELETE. */
int wr_cli_cmd_rm(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  wr_error_t err = {0};
  bool force = false;
  int c;

  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":fh", longopts, &err)) != -1) {
    if (c == '?')
      return wr_cli_usage("rm", &err);
    if (c == 'h')
      return wr_cli_help(help);
    force = true;
  }
  if (optind >= argc) {
    wr_error_set(&err, 0, "expected one or more sandbox names");
    return wr_cli_usage("rm", &err);
  }
  return wr_cli_each(ctx, argv + optind, (size_t)(argc - optind), delete_one,
                     &force);
}
