/*
 * Projects: the operations' shared steps, the ones that touch only the
 * host (create, remove, log, diff, remix), and the dispatcher that runs
 * one operation with a store connection of its own. See projects.h.
 */
#include "projects/projects_internal.h"

#include <sys/stat.h>

#include "projects/planner.h"

/* What a script's stdout may be (a few lines of status). */
#define SCRIPT_OUT_MAX (64u << 10)

const char *wr_project_verb_name(enum wr_project_verb v) {
  static const char *const names[] = {"create",  "open",  "commit",
                                      "demote",  "log",   "diff",
                                      "restore", "remix", "remove"};

  return (size_t)v < WR_ARRAY_SIZE(names) ? names[v] : "?";
}

bool wr_project_name_valid(const char *name) {
  return wr_name_valid(name) && strlen(name) <= WR_PROJECT_NAME_MAX;
}

char *wr_project_sandbox_name(const char *project) {
  return xasprintf(WR_PROJECT_SANDBOX_PREFIX "%s", project);
}

char *wr_project_mirror_path(const char *root, const char *name) {
  return xasprintf("%s/projects/%s.git", root, name);
}

/* ---- the steps every operation is made of --------------------------------
 */

void op_step(struct op *o, const char *what) {
  uint64_t now = wr_mono_ns();

  json_array_append_new(o->steps, json_pack("{s:s, s:f}", "step", what, "ms",
                                            (double)(now - o->step_ns) / 1e6));
  o->step_ns = now;
}

int op_save(struct op *o, wr_error_t *err) {
  return wr_store_project_update(o->store, &o->rec, err);
}

const char *op_arg(const struct op *o, const char *key, const char *def) {
  const json_t *v = o->args ? json_object_get(o->args, key) : NULL;

  return json_is_string(v) ? json_string_value(v) : def;
}

const char *op_setting(const struct op *o, const char *key, const char *def) {
  _cleanup_json_ json_t *s = json_loads(o->rec.settings_json, 0, NULL);
  const json_t *v = json_object_get(s, key);
  static __thread char buf[1024];

  if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof(buf))
    return def;
  snprintf(buf, sizeof(buf), "%s", json_string_value(v));
  return buf;
}

const char *op_dir(const struct op *o) {
  static __thread char dir[512];

  snprintf(dir, sizeof(dir), "%s",
           op_setting(o, "dir", WR_PROJECT_DEFAULT_DIR));
  return dir;
}

/* The row as the API shows it. */
static json_t *project_json(const struct wr_project_rec *r, const char *tier) {
  json_t *labels = json_loads(r->labels_json, 0, NULL);
  json_t *settings = json_loads(r->settings_json, 0, NULL);

  return json_pack(
      "{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I}", "name",
      r->name, "template", r->template_name, "tier", tier ? tier : r->tier,
      "sandbox", r->sandbox ? json_string(r->sandbox) : json_null(), "snapshot",
      r->snapshot ? json_string(r->snapshot) : json_null(), "remote",
      r->remote ? json_string(r->remote) : json_null(), "revision",
      r->revision ? json_string(r->revision) : json_null(), "labels",
      labels ? labels : json_object(), "settings",
      settings ? settings : json_object(), "last_edit_ms",
      (json_int_t)r->last_edit_ms, "created_ms", (json_int_t)r->created_ms,
      "generation", (json_int_t)r->generation);
}

json_t *op_result(struct op *o, const char *tier) {
  json_t *j = project_json(&o->rec, tier);

  json_object_set(j, "steps", o->steps);
  json_object_set_new(j, "ms",
                      json_real((double)(wr_mono_ns() - o->started_ns) / 1e6));
  return j;
}

int op_api_error(int status, wr_error_t *err) {
  if (status == 404)
    err->code = ENOENT;
  else if (status == 409)
    err->code = EBUSY;
  else if (status == 400)
    err->code = EINVAL;
  return -1;
}

int op_sandbox(struct op *o, json_t **sb, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, NULL);
  int status = 0;

  *sb = NULL;
  if (wr_cli_call(&o->env->api, "GET", path, NULL, sb, &status, err) == 0)
    return 1;
  if (status == 404)
    return 0;
  return op_api_error(status, err);
}

int op_script(struct op *o, const char *script, char *const *args,
              uint64_t timeout_ms, wr_buf_t *out, wr_buf_t *errout,
              int *exit_code, wr_error_t *err) {
  _cleanup_strv_ char **argv = NULL;
  _cleanup_free_ char *text = xasprintf(WR_CLI_GIT_ENV_SH "%s", script);
  struct wr_cli_run_in r = {.cwd = "/",
                            .timeout_ms = timeout_ms,
                            .out = out,
                            .max_out = SCRIPT_OUT_MAX,
                            .errout = errout};

  argv = wr_strv_push(argv, "sh");
  argv = wr_strv_push(argv, "-c");
  argv = wr_strv_push(argv, text);
  argv = wr_strv_push(argv, "sh");
  for (size_t i = 0; args != NULL && args[i] != NULL; i++)
    argv = wr_strv_push(argv, args[i]);
  r.argv = argv;
  if (wr_cli_run_in(&o->env->api, o->sandbox, &r, err) < 0)
    return -1;
  if (r.timed_out)
    return wr_error_setx(err, ETIMEDOUT, "took longer than %llu s",
                         (unsigned long long)(timeout_ms / 1000));
  *exit_code = r.exit_code;
  return 0;
}

int op_script_failed(struct op *o, const char *what, int code,
                     const wr_buf_t *errout, wr_error_t *err) {
  _cleanup_free_ char *said = wr_cli_said(errout);

  return wr_error_setx(err, EIO, "%s in sandbox `%s` failed (exit %d)%s%s",
                       what, o->sandbox, code, said[0] ? ": " : "", said);
}

int op_hand_bundle(struct op *o, char **inside, wr_error_t *err) {
  _cleanup_free_ char *head = NULL;
  _cleanup_free_ char *file = NULL;
  _cleanup_free_ char *dir = xasprintf("%s/projects", o->env->root);
  struct wr_cli_cp_loc dst = {.sandbox = o->sandbox,
                              .path = "/tmp/warren-project.bundle"};
  struct wr_cli_cp_opts opts = {0};
  int r;

  *inside = NULL;
  if (wr_mirror_head(o->env, o->mirror, &head, err) < 0)
    return -1;
  if (head == NULL)
    return 0;
  if (wr_mirror_bundle(o->env, o->mirror, dir, &file, err) < 0)
    return -1;
  r = wr_cli_cp_upload(&o->env->api, file, &dst, &opts, err);
  unlink(file);
  if (r < 0)
    return wr_error_wrap(err, "hand the history to sandbox `%s`", o->sandbox);
  *inside = xstrdup(dst.path);
  return 0;
}

int op_intake(struct op *o, bool *changed, wr_error_t *err) {
  _cleanup_free_ char *head = NULL;

  if (wr_mirror_intake(o->env, o->mirror, o->sandbox, err) < 0 ||
      wr_mirror_head(o->env, o->mirror, &head, err) < 0)
    return -1;
  *changed = head != NULL &&
             (o->rec.revision == NULL || strcmp(head, o->rec.revision) != 0);
  if (*changed) {
    free(o->rec.revision);
    o->rec.revision = steal_ptr(&head);
  }
  return 0;
}

/* ---- operations on the host alone ---------------------------------------- */

/* The template's WORKDIR, else the default: where the repository is. */
static char *template_dir(struct op *o, const char *tpl, wr_error_t *err) {
  _cleanup_free_ char *esc = wr_cli_escape(tpl);
  _cleanup_free_ char *path = xasprintf("/v1/templates/%s", esc);
  _cleanup_json_ json_t *t = NULL;
  int status = 0;
  const char *wd;

  if (wr_cli_call(&o->env->api, "GET", path, NULL, &t, &status, NULL) == 0) {
    wd = wr_cli_jstr(json_object_get(t, "manifest"), "workdir");
    if (wd[0] == '\0')
      wd = wr_cli_jstr(t, "workdir");
    return xstrdup(
        wd[0] == '/' && strcmp(wd, "/") != 0 ? wd : WR_PROJECT_DEFAULT_DIR);
  }
  free(path);
  path = xasprintf("/v1/images/%s", esc);
  if (wr_cli_call(&o->env->api, "GET", path, NULL, NULL, &status, err) < 0) {
    if (status == 404)
      return wr_error_setx(err, ENOENT,
                           "no template or image `%s`: build it with "
                           "`warren image build`",
                           tpl),
             NULL;
    return NULL;
  }
  return xstrdup(WR_PROJECT_DEFAULT_DIR);
}

/* The settings a create fixes: dir, author, install. */
static char *create_settings(struct op *o, const char *dir, wr_error_t *err) {
  _cleanup_json_ json_t *s = json_pack("{s:s}", "dir", dir);
  const char *author = op_arg(o, "author", NULL);
  const char *install = op_arg(o, "install", NULL);

  if (author != NULL) {
    if (strlen(author) > 200 || !wr_text_is_safe(author) ||
        strchr(author, '<') == NULL || author[strlen(author) - 1] != '>')
      return wr_error_setx(err, EINVAL,
                           "author must be `Name <email>`, not `%s`", author),
             NULL;
    json_object_set_new(s, "author", json_string(author));
  }
  if (install != NULL) {
    if (strlen(install) > 4096)
      return wr_error_setx(err, EINVAL, "install is longer than 4096 bytes"),
             NULL;
    json_object_set_new(s, "install", json_string(install));
  }
  return json_dumps(s, JSON_COMPACT);
}

static int check_labels(const json_t *labels, wr_error_t *err) {
  const char *k;
  json_t *v;

  if (labels == NULL)
    return 0;
  if (!json_is_object(labels))
    return wr_error_setx(err, EINVAL, "labels must be an object of strings");
  json_object_foreach ((json_t *)labels, k, v) {
    if (!json_is_string(v) || strlen(k) == 0 || strlen(k) > 128 ||
        strlen(json_string_value(v)) > 1024)
      return wr_error_setx(err, EINVAL,
                           "label `%s`: a label is a string of at most 1024 "
                           "bytes under a key of 1 to 128",
                           k);
  }
  return 0;
}

static int op_create(struct op *o, const char *name, json_t **result,
                     wr_error_t *err) {
  const char *tpl = op_arg(o, "template", NULL);
  const char *remote = op_arg(o, "remote", NULL);
  const char *secret = op_arg(o, "remote_secret", NULL);
  const json_t *labels = json_object_get(o->args, "labels");
  _cleanup_free_ char *dir = NULL;
  _cleanup_free_ char *settings = NULL;
  _cleanup_free_ char *labels_text = NULL;
  int64_t now = wr_now_ms();

  if (tpl == NULL)
    return wr_error_setx(err, EINVAL, "a project needs a template");
  if (remote != NULL && !(wr_str_has_prefix(remote, "https://") ||
                          wr_str_has_prefix(remote, "http://")))
    return wr_error_setx(err, EINVAL,
                         "remote must be an http:// or https:// URL, not "
                         "`%s`",
                         remote);
  if (secret != NULL && (remote == NULL || !wr_store_secret_name_valid(secret)))
    return wr_error_setx(err, EINVAL,
                         "remote_secret needs a remote and a secret's name");
  if (check_labels(labels, err) < 0)
    return -1;
  if ((dir = template_dir(o, tpl, err)) == NULL ||
      (settings = create_settings(o, dir, err)) == NULL)
    return -1;
  if (wr_store_project_get(o->store, name, &o->rec, NULL) == 0)
    return wr_error_setx(err, EEXIST, "a project named `%s` already exists",
                         name);
  /* A mirror without a row is what a create or remove killed halfway
   * left: no project owns it. */
  if (wr_rm_rf(o->mirror, err) < 0)
    return wr_error_wrap(err, "remove the stale mirror");
  labels_text = json_dumps(labels ? labels : json_object(), JSON_COMPACT);
  o->rec = (struct wr_project_rec){
      .name = xstrdup(name),
      .template_name = xstrdup(tpl),
      .tier = xstrdup("cold"),
      .remote = remote ? xstrdup(remote) : NULL,
      .remote_secret = secret ? xstrdup(secret) : NULL,
      .labels_json = steal_ptr(&labels_text),
      .settings_json = steal_ptr(&settings),
      .last_edit_ms = now,
      .created_ms = now,
  };
  if (wr_mirror_init(o->env, o->mirror, err) < 0)
    return -1;
  if (wr_store_project_insert(o->store, &o->rec, err) < 0) {
    wr_rm_rf(o->mirror, NULL);
    return -1;
  }
  op_step(o, "make the mirror");
  *result = op_result(o, "cold");
  return 0;
}

/* Remove what is there: the sandbox, the snapshot, the mirror, and the
 * row last, so that a remove killed halfway can be run again. */
static int op_remove(struct op *o, json_t **result, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, "?force=true");
  _cleanup_free_ char *snap = NULL;
  int status = 0;

  if (wr_cli_call(&o->env->api, "DELETE", path, NULL, NULL, &status, err) < 0 &&
      status != 404)
    return wr_error_wrap(err, "remove sandbox `%s`", o->sandbox);
  if (o->rec.snapshot != NULL) {
    _cleanup_free_ char *esc = wr_cli_escape(o->rec.snapshot);
    snap = xasprintf("/v1/snapshots/%s", esc);
    if (wr_cli_call(&o->env->api, "DELETE", snap, NULL, NULL, &status, err) <
            0 &&
        status != 404)
      return wr_error_wrap(err, "remove snapshot `%s`", o->rec.snapshot);
  }
  free(o->rec.snapshot);
  o->rec.snapshot = NULL;
  op_drop_old_snapshots(o);
  if (wr_rm_rf(o->mirror, err) < 0)
    return wr_error_wrap(err, "remove the mirror");
  if (wr_store_project_delete(o->store, o->rec.name, err) < 0)
    return -1;
  op_step(o, "remove");
  *result = op_result(o, "removed");
  return 0;
}

static int op_log(struct op *o, json_t **result, wr_error_t *err) {
  json_t *v = json_object_get(o->args, "limit");
  json_t *list = NULL;

  if (wr_mirror_log(o->env, o->mirror,
                    json_is_integer(v) && json_integer_value(v) > 0
                        ? (uint64_t)json_integer_value(v)
                        : 0,
                    &list, err) < 0)
    return -1;
  *result = json_pack("{s:s, s:o}", "project", o->rec.name, "versions", list);
  return 0;
}

static int op_diff(struct op *o, json_t **result, wr_error_t *err) {
  const char *from = op_arg(o, "from", NULL), *to = op_arg(o, "to", "HEAD");
  _cleanup_free_ char *a = NULL;
  _cleanup_free_ char *b = NULL;

  if (from == NULL)
    return wr_error_setx(err, EINVAL, "diff needs the revision to compare");
  if (wr_mirror_resolve(o->env, o->mirror, from, &a, err) < 0 ||
      wr_mirror_resolve(o->env, o->mirror, to, &b, err) < 0)
    return -1;
  return wr_mirror_diff(o->env, o->mirror, a, b, result, err);
}

/* A new project from this one's mirror: its history, template, settings
 * and labels (and the request's labels over them); cold, with no
 * remote. The source's sandbox is not asked anything. */
static int op_remix(struct op *o, json_t **result, wr_error_t *err) {
  const char *name = op_arg(o, "name", NULL);
  const json_t *labels = json_object_get(o->args, "labels");
  _cleanup_free_ char *dst = NULL;
  _cleanup_json_ json_t *merged = json_loads(o->rec.labels_json, 0, NULL);
  struct wr_project_rec n = {0};
  int64_t now = wr_now_ms();
  int r;

  if (name == NULL || !wr_project_name_valid(name))
    return wr_error_setx(err, EINVAL,
                         "remix needs a new project's name ([a-z0-9][a-z0-9_.-]"
                         ", at most %d)",
                         WR_PROJECT_NAME_MAX);
  if (check_labels(labels, err) < 0)
    return -1;
  if (merged == NULL)
    merged = json_object();
  if (labels != NULL)
    json_object_update(merged, (json_t *)labels);
  dst = wr_project_mirror_path(o->env->root, name);
  if (wr_store_project_get(o->store, name, &n, NULL) == 0) {
    wr_project_rec_free(&n);
    return wr_error_setx(err, EEXIST, "a project named `%s` already exists",
                         name);
  }
  if (wr_mirror_copy(o->env, o->mirror, dst, err) < 0) {
    if (err->code != EEXIST)
      wr_rm_rf(dst, NULL);
    return -1;
  }
  n = (struct wr_project_rec){
      .name = xstrdup(name),
      .template_name = xstrdup(o->rec.template_name),
      .tier = xstrdup("cold"),
      .labels_json = json_dumps(merged, JSON_COMPACT),
      .settings_json = xstrdup(o->rec.settings_json),
      .revision = o->rec.revision ? xstrdup(o->rec.revision) : NULL,
      .last_edit_ms = now,
      .created_ms = now,
  };
  r = wr_store_project_insert(o->store, &n, err);
  if (r < 0)
    wr_rm_rf(dst, NULL);
  else {
    op_step(o, "copy the history");
    *result = project_json(&n, "cold");
    json_object_set_new(*result, "from", json_string(o->rec.name));
    json_object_set(*result, "steps", o->steps);
  }
  wr_project_rec_free(&n);
  return r;
}

/* ---- one operation --------------------------------------------------------
 */

static void op_clear(struct op *o) {
  wr_project_rec_free(&o->rec);
  json_decref(o->steps);
  free(o->mirror);
  free(o->sandbox);
  if (o->store != NULL)
    wr_store_close(o->store);
}

static int dispatch(struct op *o, enum wr_project_verb verb, const char *name,
                    json_t **result, int *status, wr_error_t *err) {
  *status = 200;
  if (verb == WR_PROJECT_CREATE) {
    *status = 201;
    return op_create(o, name, result, err);
  }
  if (wr_store_project_get(o->store, name, &o->rec, err) < 0)
    return -1;
  switch (verb) {
  case WR_PROJECT_OPEN:
    return op_open(o, result, err);
  case WR_PROJECT_COMMIT:
    return op_commit(o, result, err);
  case WR_PROJECT_DEMOTE:
    return op_demote(o, result, err);
  case WR_PROJECT_LOG:
    return op_log(o, result, err);
  case WR_PROJECT_DIFF:
    return op_diff(o, result, err);
  case WR_PROJECT_RESTORE:
    return op_restore(o, result, err);
  case WR_PROJECT_REMIX:
    *status = 201;
    return op_remix(o, result, err);
  case WR_PROJECT_REMOVE:
    return op_remove(o, result, err);
  default:
    return wr_error_setx(err, EINVAL, "unknown operation");
  }
}

int wr_project_run(const struct wr_projects_env *env, enum wr_project_verb verb,
                   const char *name, const json_t *args, json_t **result,
                   int *status, wr_error_t *err) {
  struct op o = {.env = env, .args = args, .steps = json_array()};
  int r;

  *result = NULL;
  if (!wr_project_name_valid(name)) {
    json_decref(o.steps);
    return wr_error_setx(err, EINVAL,
                         "`%s` is not a project name ([a-z0-9][a-z0-9_.-], at "
                         "most %d)",
                         name, WR_PROJECT_NAME_MAX);
  }
  o.started_ns = o.step_ns = wr_mono_ns();
  o.mirror = wr_project_mirror_path(env->root, name);
  o.sandbox = wr_project_sandbox_name(name);
  o.planner = args != NULL && json_is_true(json_object_get(args, "planner"));
  r = wr_store_open(env->db_path, &o.store, err);
  if (r == 0)
    r = dispatch(&o, verb, name, result, status, err);
  op_clear(&o);
  return r;
}
