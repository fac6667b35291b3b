/*
 * Open: a running sandbox for the project, from whichever tier it is in.
 *
 *   hot   its sandbox runs: nothing to do;
 *   warm  its sandbox is paused (or stopped): woken;
 *   cool  its snapshot: a sandbox made from it, whose template start
 *         command starts as a fork's does;
 *   cold  the template (from the warm pool when it has one), the mirror's
 *         history handed in as a bundle (no network), checked out over
 *         the template's files, the install step, the start command
 *         restarted.
 *
 * The sandbox has a fixed name (project-NAME) and is made with reuse, so
 * an open that died halfway is finished by the next (the row moves to
 * hot only at the end), and two opens make one sandbox even if the
 * caller's serialization were lost. A snapshot that expired or went
 * missing falls back to cold.
 */
#include "projects/projects_internal.h"

/* The install step, when the project does not say. */
#define DEFAULT_INSTALL                                                        \
  "[ ! -f package.json ] || npm install --prefer-offline --no-audit "          \
  "--no-fund"
#define INSTALL_TIMEOUT_MS (15ull * 60 * 1000)
#define CHECKOUT_TIMEOUT_MS (5ull * 60 * 1000)

/*
 * Inside, in the repository's directory ($1): a repository on branch
 * main whose files are the mirror's (from the bundle $2), or, for a new
 * project ($2 empty), the template's files as its first commit ($3 is
 * the template). node_modules is the install's, never the project's.
 * Untracked files the template has and the project does not are
 * removed; ignored ones (node_modules) stay, so npm finds them.
 * Prints "fetched", "started" or "kept" (a repository was there).
 */
static const char checkout_script[] =
    "set -e\n"
    "mkdir -p \"$1\" && cd \"$1\"\n"
    "[ -d .git ] || git init -q --initial-branch=" WR_PROJECT_BRANCH "\n"
    "grep -qx 'node_modules/' .git/info/exclude 2>/dev/null ||"
    " printf 'node_modules/\\n' >> .git/info/exclude\n"
    "if [ -n \"$2\" ]; then\n"
    "  git fetch -q --update-head-ok \"$2\" '+refs/heads/*:refs/heads/*'"
    " '+refs/tags/*:refs/tags/*'\n"
    "  git reset -q --hard " WR_PROJECT_BRANCH "\n"
    "  git clean -fdq\n"
    "  rm -f \"$2\"\n"
    "  echo fetched\n"
    "elif git rev-parse -q --verify HEAD >/dev/null; then\n"
    "  echo kept\n"
    "else\n"
    "  git add -A\n"
    "  git -c user.name=warren -c user.email=warren@localhost commit -q"
    " --allow-empty -m \"Start from template $3\"\n"
    "  echo started\n"
    "fi\n";

/* The labels of a project's sandbox: the project's, plus the two that
 * say whose it is and where its repository is (git-remote-warren). */
static json_t *sandbox_labels(struct op *o) {
  json_t *l = json_loads(o->rec.labels_json, 0, NULL);

  if (!json_is_object(l)) {
    json_decref(l);
    l = json_object();
  }
  json_object_set_new(l, "warren.project", json_string(o->rec.name));
  json_object_set_new(l, "warren.repo", json_string(op_dir(o)));
  return l;
}

/* POST /v1/sandboxes with reuse, in line for a slot if need be. */
static int make_sandbox(struct op *o, const char *snapshot, bool *from_pool,
                        wr_error_t *err) {
  _cleanup_json_ json_t *body =
      json_pack("{s:s, s:b, s:o}", "name", o->sandbox, "reuse", true, "labels",
                sandbox_labels(o));
  _cleanup_json_ json_t *out = NULL;

  if (snapshot != NULL)
    json_object_set_new(body, "snapshot", json_string(snapshot));
  else
    json_object_set_new(body, "image", json_string(o->rec.template_name));
  if (o->env->idle_pause_s > 0)
    json_object_set_new(body, "idle_pause",
                        json_integer((json_int_t)o->env->idle_pause_s));
  if (wr_cli_call_in_line(&o->env->api, "POST", "/v1/sandboxes", body, 0, &out,
                          err) < 0)
    return wr_error_wrap(err, "make sandbox `%s`", o->sandbox);
  *from_pool = json_is_true(json_object_get(out, "from_pool"));
  return 0;
}

/* Whether the project's snapshot is there and whole. */
static bool snapshot_usable(struct op *o) {
  _cleanup_free_ char *esc = NULL;
  _cleanup_free_ char *path = NULL;
  _cleanup_json_ json_t *s = NULL;

  if (o->rec.snapshot == NULL)
    return false;
  esc = wr_cli_escape(o->rec.snapshot);
  path = xasprintf("/v1/snapshots/%s", esc);
  if (wr_cli_call(&o->env->api, "GET", path, NULL, &s, NULL, NULL) < 0)
    return false;
  return strcmp(wr_cli_jstr(s, "state"), "ready") == 0;
}

/* Wake a paused or stopped sandbox (in line for a slot if need be). */
static int wake(struct op *o, const char *state, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(
      o->sandbox, strcmp(state, "paused") == 0 ? "/resume" : "/start");
  _cleanup_json_ json_t *out = NULL;

  if (wr_cli_call_in_line(&o->env->api, "POST", path, NULL, 0, &out, err) < 0)
    return wr_error_wrap(err, "wake sandbox `%s`", o->sandbox);
  op_step(o, strcmp(state, "paused") == 0 ? "resume" : "start");
  return 0;
}

/* The files of the mirror in the sandbox; a new project's first commit
 * goes the other way. *fetched when the files changed under the
 * template's (so the install and the start command run again). */
static int checkout(struct op *o, bool *fetched, wr_error_t *err) {
  _cleanup_free_ char *bundle = NULL;
  _cleanup_(wr_buf_free) wr_buf_t out = {0};
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  bool changed = false;
  int code = 0;

  if (op_hand_bundle(o, &bundle, err) < 0)
    return -1;
  if (bundle != NULL)
    op_step(o, "hand the history in");
  char *args[] = {(char *)op_dir(o), bundle ? bundle : "", o->rec.template_name,
                  NULL};
  if (op_script(o, checkout_script, args, CHECKOUT_TIMEOUT_MS, &out, &errout,
                &code, err) < 0)
    return wr_error_wrap(err, "check out the project");
  if (code != 0)
    return op_script_failed(o, "checking out the project", code, &errout, err);
  *fetched = out.data != NULL && wr_str_has_prefix(out.data, "fetched");
  op_step(o, *fetched ? "check out" : "start the repository");
  if (!*fetched && op_intake(o, &changed, err) < 0)
    return -1;
  if (changed)
    op_step(o, "take the first commit");
  return 0;
}

static int install(struct op *o, wr_error_t *err) {
  const char *cmd = op_setting(o, "install", DEFAULT_INSTALL);
  _cleanup_free_ char *script = NULL;
  _cleanup_(wr_buf_free) wr_buf_t errout = {0};
  char *args[] = {(char *)op_dir(o), NULL};
  int code = 0;

  if (cmd[0] == '\0')
    return 0;
  script = xasprintf("cd \"$1\" && %s", cmd);
  if (op_script(o, script, args, INSTALL_TIMEOUT_MS, NULL, &errout, &code,
                err) < 0)
    return wr_error_wrap(err, "install");
  if (code != 0)
    return op_script_failed(o, "the install step", code, &errout, err);
  op_step(o, "install");
  return 0;
}

/* A template's start command, again, now that its files are the
 * project's; nothing for an image without one. */
static int restart_start(struct op *o, const json_t *sb, wr_error_t *err) {
  _cleanup_free_ char *path = NULL;
  const json_t *cmd = json_object_get(json_object_get(sb, "template"), "cmd");

  if (json_array_size(cmd) == 0)
    return 0;
  path = wr_cli_sandbox_path(o->sandbox, "/restart-start");
  if (wr_cli_call(&o->env->api, "POST", path, NULL, NULL, NULL, err) < 0)
    return wr_error_wrap(err, "restart the start command");
  op_step(o, "restart the start command");
  return 0;
}

/* Cold: the template's sandbox made the project's. */
static int from_git(struct op *o, wr_error_t *err) {
  _cleanup_json_ json_t *sb = NULL;
  bool fetched = false;

  if (checkout(o, &fetched, err) < 0)
    return -1;
  if (!fetched)
    return 0;
  if (install(o, err) < 0 || op_sandbox(o, &sb, err) < 0)
    return -1;
  return restart_start(o, sb, err);
}

/* A sandbox of that name is there but the row is not hot or warm: an
 * open that died halfway, or one the planner raced. */
static int finish(struct op *o, const char *from, wr_error_t *err) {
  if (strcmp(from, "cold") == 0)
    return from_git(o, err);
  return 0;
}

int op_open(struct op *o, json_t **result, wr_error_t *err) {
  _cleanup_json_ json_t *sb = NULL;
  _cleanup_free_ char *from = xstrdup(o->rec.tier);
  const char *state;
  bool live = strcmp(from, "hot") == 0 || strcmp(from, "warm") == 0;
  int have;

  if ((have = op_sandbox(o, &sb, err)) < 0)
    return -1;
  if (have) {
    state = wr_cli_jstr(sb, "state");
    if (strcmp(state, "paused") == 0 || strcmp(state, "stopped") == 0) {
      free(from);
      from = xstrdup(live ? "warm" : from);
      if (wake(o, state, err) < 0)
        return -1;
    } else if (strcmp(state, "running") != 0) {
      return wr_error_setx(err, EBUSY,
                           "sandbox `%s` of project `%s` is %s: try again",
                           o->sandbox, o->rec.name, state);
    } else if (live) {
      free(from);
      from = xstrdup("hot");
    }
    if (!live && finish(o, from, err) < 0)
      return -1;
  } else {
    /* No sandbox: from the snapshot when the project was demoted to it
     * and it is there and whole, else from git (a snapshot that expired
     * or went; a live project whose sandbox someone removed, whose
     * snapshot, if any, predates its last commits). */
    bool cool = strcmp(from, "cool") == 0 && snapshot_usable(o);
    bool pooled = false;
    free(from);
    from = xstrdup(cool ? "cool" : "cold");
    if (make_sandbox(o, cool ? o->rec.snapshot : NULL, &pooled, err) < 0)
      return -1;
    op_step(o, cool     ? "sandbox from the snapshot"
               : pooled ? "sandbox from the warm pool"
                        : "sandbox from the template");
    if (!cool && from_git(o, err) < 0)
      return -1;
  }
  free(o->rec.tier);
  o->rec.tier = xstrdup("hot");
  free(o->rec.sandbox);
  o->rec.sandbox = xstrdup(o->sandbox);
  if (op_save(o, err) < 0)
    return -1;
  *result = op_result(o, "hot");
  json_object_set_new(*result, "from", json_string(from));
  return 0;
}
