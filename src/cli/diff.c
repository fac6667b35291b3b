/*
 * `warren diff`: GET /v1/sandboxes/{id}/diff as one line per change, or
 * the API's JSON. git's object store and logs change with every commit, so
 * the text form counts them on one line per directory; everything else is
 * listed, and what git runs on the host (hooks, config) is pointed out.
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <jansson.h>

#define DIFF_DEFAULT_LIMIT 100000
#define DIFF_MAX_LIMIT 1000000

static const char help[] =
    "Usage: warren diff [OPTIONS] NAME\n"
    "\n"
    "List what changed in NAME's direct-mode workspace (the host directory\n"
    "given to `warren create --name NAME PATH`) since the sandbox was\n"
    "created.\n"
    "\n"
    "The baseline is the state of every file, directory and symlink under\n"
    "PATH, recorded when the sandbox was created, before anything ran in\n"
    "it. Every change since shows, whoever made it: the sandbox, or you on\n"
    "the host (an editor, git). That includes what `git status` and\n"
    "`git diff` do not show: ignored files, .git/config and hooks in\n"
    ".git/hooks, which git runs on the host. Read those before you run git\n"
    "in PATH.\n"
    "\n"
    "One line per change (directories end with /):\n"
    "  A  added\n"
    "  D  deleted\n"
    "  M  modified: the content may have changed (its size, times, inode,\n"
    "     a symlink's target or its type). An edit whose time was put\n"
    "     back still shows: the kernel's change time cannot be set.\n"
    "  m  metadata: only the mode or the owner changed\n"
    "git's object store and logs (.git/objects/, .git/logs/) change with\n"
    "every commit: they are counted on one line each. --json lists every\n"
    "path.\n"
    "\n"
    "A clone-mode sandbox has no such list: its changes are commits, which\n"
    "`git fetch warren-NAME BRANCH` brings to the host.\n"
    "\n"
    "Options:\n"
    "  --json       print the API's JSON: {\"changes\": [{\"path\",\n"
    "               \"change\", \"type\"}, ...], \"truncated\": bool}\n"
    "  --limit N    list at most N changes (default 100000)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  warren diff web\n"
    "  warren diff --json web | jq -r '.changes[].path'\n";

enum { OPT_JSON = 256, OPT_LIMIT };

static const struct option longopts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int wr_cli_diff_parse(int argc, char **argv, struct wr_cli_diff_opts *o,
                      wr_error_t *err) {
  int c;

  memset(o, 0, sizeof(*o));
  o->limit = DIFF_DEFAULT_LIMIT;
  optind = 0;
  while ((c = wr_cli_getopt(argc, argv, ":h", longopts, err)) != -1) {
    if (c == '?')
      return -1;
    if (c == OPT_JSON)
      o->json = true;
    else if (c == OPT_LIMIT &&
             wr_parse_u64(optarg, 1, DIFF_MAX_LIMIT, &o->limit, err) < 0)
      return wr_error_wrap(err, "--limit");
    else if (c == 'h')
      o->help = true;
  }
  if (o->help)
    return 0;
  if (argc - optind != 1)
    return wr_error_set(err, 0, "expected one sandbox name");
  o->sandbox = argv[optind];
  return 0;
}

/* ---- the text form ------------------------------------------------------ */

static const char *const noisy_dirs[] = {".git/objects", ".git/logs"};

/* The length of the git-internal directory path is counted in ("a/.git/
 * objects" for "a/.git/objects/ab/cd"), 0 when it is listed by itself. */
static size_t group_len(const char *path) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(noisy_dirs); i++) {
    const char *d = noisy_dirs[i];
    size_t n = strlen(d);
    for (const char *p = path; (p = strstr(p, d)) != NULL; p++) {
      if ((p == path || p[-1] == '/') && (p[n] == '/' || p[n] == '\0'))
        return (size_t)(p - path) + n;
    }
  }
  return 0;
}

/* Whether path is name inside a .git directory ("x/.git/NAME..."). */
static bool in_git(const char *path, const char *name, bool below) {
  size_t n = strlen(name);

  for (const char *p = path; (p = strstr(p, ".git/")) != NULL; p++) {
    if ((p == path || p[-1] == '/') && strncmp(p + 5, name, n) == 0 &&
        (below ? p[5 + n] == '/' && p[6 + n] != '\0' : p[5 + n] == '\0'))
      return true;
  }
  return false;
}

/* Why a change matters beyond what it says, or NULL. */
static const char *note(const char *path, const char *change, const char *type,
                        bool setuid) {
  if (strcmp(change, "deleted") == 0 || strcmp(type, "dir") == 0)
    return NULL;
  if (setuid)
    return "setuid/setgid: runs as its owner for whoever runs it";
  if (in_git(path, "hooks", true) && !wr_str_has_suffix(path, ".sample"))
    return "git hook: git runs it, git diff does not show it";
  if (in_git(path, "config", false))
    return "git config: can make git run programs, git diff does not "
           "show it";
  return NULL;
}

static char letter(const char *change) {
  if (strcmp(change, "added") == 0)
    return 'A';
  if (strcmp(change, "deleted") == 0)
    return 'D';
  if (strcmp(change, "metadata") == 0)
    return 'm';
  return 'M';
}

static void print_change(FILE *out, const json_t *c) {
  const char *path = wr_cli_jstr(c, "path");
  const char *change = wr_cli_jstr(c, "change");
  const char *type = wr_cli_jstr(c, "type");
  const char *was = wr_cli_jstr(c, "was");
  const char *why =
      note(path, change, type, json_is_true(json_object_get(c, "setuid")));
  bool dir = strcmp(type, "dir") == 0;
  _cleanup_free_ char *name = xasprintf("%s%s", path, dir ? "/" : "");
  _cleanup_free_ char *shown = wr_cli_quote(name);

  fprintf(out, "%c %s", letter(change), shown);
  if (*was != '\0')
    fprintf(out, "   (now a %s, was a %s)", type, was);
  else if (strcmp(type, "symlink") == 0 || strcmp(type, "other") == 0)
    fprintf(out, "   (%s)", type);
  if (why != NULL)
    fprintf(out, "   (%s)", why);
  fputc('\n', out);
}

/* One line for every change below a git-internal directory, at the
 * place of the first: "* .git/objects/   (14 added, 1 deleted)". */
static void print_group(FILE *out, const json_t *changes, size_t first,
                        size_t len) {
  static const char *const kinds[] = {"added", "deleted", "modified",
                                      "metadata"};
  const char *key = wr_cli_jstr(json_array_get(changes, first), "path");
  size_t counts[4] = {0}, i;
  const char *sep = "";
  json_t *c;

  json_array_foreach ((json_t *)changes, i, c) {
    const char *path = wr_cli_jstr(c, "path");
    if (i < first || group_len(path) != len || strncmp(path, key, len) != 0)
      continue;
    for (size_t k = 0; k < WR_ARRAY_SIZE(kinds); k++)
      counts[k] += strcmp(wr_cli_jstr(c, "change"), kinds[k]) == 0;
  }
  fprintf(out, "* %.*s/   (", (int)len, key);
  for (size_t k = 0; k < WR_ARRAY_SIZE(kinds); k++) {
    if (counts[k] == 0)
      continue;
    fprintf(out, "%s%zu %s", sep, counts[k], kinds[k]);
    sep = ", ";
  }
  fputs("; git's internals, not listed one by one)\n", out);
}

void wr_cli_diff_print(FILE *out, const json_t *diff) {
  const json_t *changes = json_object_get(diff, "changes");
  const char *last_key = NULL;
  size_t i, last_len = 0;
  json_t *c;

  json_array_foreach ((json_t *)changes, i, c) {
    const char *path = wr_cli_jstr(c, "path");
    size_t len = group_len(path);
    if (len == 0) {
      print_change(out, c);
      continue;
    }
    /* Tree order keeps a directory's contents together. */
    if (last_key != NULL && len == last_len &&
        strncmp(path, last_key, len) == 0)
      continue;
    print_group(out, changes, i, len);
    last_key = path;
    last_len = len;
  }
}

/* `warren diff`. */
int wr_cli_cmd_diff(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  struct wr_cli_diff_opts o;
  _cleanup_json_ json_t *reply = NULL;
  _cleanup_free_ char *suffix = NULL, *path = NULL;
  wr_error_t err = {0};

  if (wr_cli_diff_parse(argc, argv, &o, &err) < 0)
    return wr_cli_usage("diff", &err);
  if (o.help)
    return wr_cli_help(help);
  suffix = xasprintf("/diff?limit=%" PRIu64, o.limit);
  path = wr_cli_sandbox_path(o.sandbox, suffix);
  if (wr_cli_call(ctx, "GET", path, NULL, &reply, NULL, &err) < 0)
    return wr_cli_fail(WR_CLI_EXIT_ERROR, "%s", err.msg);
  if (o.json)
    return wr_cli_print_json(reply) < 0 ? WR_CLI_EXIT_ERROR : WR_CLI_EXIT_OK;
  if (json_array_size(json_object_get(reply, "changes")) == 0)
    printf("No changes in %s's workspace since it was created.\n", o.sandbox);
  wr_cli_diff_print(stdout, reply);
  if (wr_cli_jbool(reply, "truncated"))
    fprintf(stderr,
            "warren: the list is incomplete: more than %" PRIu64
            " changes (see --limit), or a part of the workspace too large "
            "or too deep to compare\n",
            o.limit);
  return fflush(stdout) == 0 ? WR_CLI_EXIT_OK : WR_CLI_EXIT_ERROR;
}
