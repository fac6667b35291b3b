/*
 * Demote: a project one tier down, never waking its sandbox.
 *
 *   warm -> cool  snapshot the paused sandbox's disk (it stays paused: a
 *                 snapshot freezes, it does not thaw), record it, delete
 *                 the sandbox, drop the snapshot it was made from;
 *   cool -> cold  remove the snapshot and keep the row and the mirror.
 *
 * Each step can be run again: the snapshot of a demote is named by the
 * project's generation (project-NAME-N), so a demote killed after the
 * capture finds it and goes on; the row is written before the sandbox
 * goes, so a kill between the two leaves a cool row whose sandbox the
 * rerun deletes. A hot project is paused first when a user asks, and
 * left alone when the planner does.
 */
#include "projects/projects_internal.h"

static char *snapshot_name(const struct op *o, int64_t generation) {
  return xasprintf(WR_PROJECT_SANDBOX_PREFIX "%s-%lld", o->rec.name,
                   (long long)generation);
}

static char *snapshot_path(const char *name) {
  _cleanup_free_ char *esc = wr_cli_escape(name);

  return xasprintf("/v1/snapshots/%s", esc);
}

/* "ready", "" (none) or another state; *source (may be NULL) gets the
 * id of the sandbox it was taken of. */
static char *snapshot_state_of(struct op *o, const char *name, char **source) {
  _cleanup_free_ char *path = snapshot_path(name);
  _cleanup_json_ json_t *s = NULL;

  if (source != NULL)
    *source = NULL;
  if (wr_cli_call(&o->env->api, "GET", path, NULL, &s, NULL, NULL) < 0)
    return xstrdup("");
  if (source != NULL)
    *source = xstrdup(wr_cli_jstr(json_object_get(s, "source"), "id"));
  return xstrdup(wr_cli_jstr(s, "state"));
}

static char *snapshot_state(struct op *o, const char *name) {
  return snapshot_state_of(o, name, NULL);
}

static int delete_snapshot(struct op *o, const char *name, bool must,
                           wr_error_t *err) {
  _cleanup_free_ char *path = snapshot_path(name);
  int status = 0;

  if (wr_cli_call(&o->env->api, "DELETE", path, NULL, NULL, &status, err) ==
          0 ||
      status == 404 || !must)
    return 0;
  return wr_error_wrap(err, "remove snapshot `%s`", name);
}

/* Whether name is one of the project's snapshots: project-NAME-N. */
static bool generation_of(const struct op *o, const char *name) {
  size_t n = strlen(WR_PROJECT_SANDBOX_PREFIX) + strlen(o->rec.name);
  const char *num = name + n + 1;

  return strncmp(name, WR_PROJECT_SANDBOX_PREFIX,
                 strlen(WR_PROJECT_SANDBOX_PREFIX)) == 0 &&
         strncmp(name + strlen(WR_PROJECT_SANDBOX_PREFIX), o->rec.name,
                 strlen(o->rec.name)) == 0 &&
         name[n] == '-' && num[0] != '\0' &&
         strspn(num, "0123456789") == strlen(num);
}

void op_drop_old_snapshots(struct op *o) {
  _cleanup_json_ json_t *list = NULL;
  const json_t *s;
  size_t i;

  if (wr_cli_call(&o->env->api, "GET", "/v1/snapshots", NULL, &list, NULL,
                  NULL) < 0)
    return;
  /* Newest first: a snapshot stacked on an older one goes before it. */
  for (i = json_array_size(json_object_get(list, "snapshots")); i-- > 0;) {
    s = json_array_get(json_object_get(list, "snapshots"), i);
    const char *name = wr_cli_jstr(s, "name");
    if (generation_of(o, name) &&
        (o->rec.snapshot == NULL || strcmp(name, o->rec.snapshot) != 0))
      delete_snapshot(o, name, false, NULL);
  }
}

/* The paused sandbox's disk, as the next generation's snapshot. One of
 * that name already there is an earlier run's when it was taken of this
 * very sandbox; any other (a removed project's of the same name) goes. */
static int capture(struct op *o, const char *name, const char *sandbox_id,
                   wr_error_t *err) {
  _cleanup_free_ char *source = NULL;
  _cleanup_free_ char *state = snapshot_state_of(o, name, &source);
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, "/snapshots");
  _cleanup_json_ json_t *body = json_pack("{s:s}", "name", name);

  if (strcmp(state, "ready") == 0 && source != NULL &&
      strcmp(source, sandbox_id) == 0)
    return 0; /* an earlier run took it */
  if (state[0] != '\0' && delete_snapshot(o, name, true, err) < 0)
    return -1;
  if (o->env->snapshot_days > 0)
    json_object_set_new(body, "retention_days",
                        json_integer((json_int_t)o->env->snapshot_days));
  if (wr_cli_call(&o->env->api, "POST", path, body, NULL, NULL, err) < 0)
    return wr_error_wrap(err, "snapshot sandbox `%s`", o->sandbox);
  op_step(o, "snapshot the disk");
  return 0;
}

static int pause_first(struct op *o, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, "/pause");

  if (wr_cli_call(&o->env->api, "POST", path, NULL, NULL, NULL, err) < 0)
    return wr_error_wrap(err, "pause sandbox `%s`", o->sandbox);
  op_step(o, "pause");
  return 0;
}

static int set_tier(struct op *o, const char *tier, wr_error_t *err) {
  free(o->rec.tier);
  o->rec.tier = xstrdup(tier);
  return op_save(o, err);
}

/* How long a demote waits for its snapshot to be on disk. */
#define SYNC_WAIT_MS (120 * 1000)

/* The snapshot is on disk (synced), not only complete: the sandbox it
 * comes from is about to go. */
static int wait_synced(struct op *o, const char *name, wr_error_t *err) {
  _cleanup_free_ char *path = snapshot_path(name);
  uint64_t deadline = wr_mono_ns() + SYNC_WAIT_MS * 1000000ull;

  while (wr_mono_ns() < deadline) {
    _cleanup_json_ json_t *s = NULL;
    if (wr_cli_call(&o->env->api, "GET", path, NULL, &s, NULL, err) < 0)
      return wr_error_wrap(err, "snapshot `%s`", name);
    if (json_is_true(json_object_get(s, "synced")))
      return 0;
    usleep(20 * 1000);
  }
  return wr_error_setx(err, ETIMEDOUT,
                       "snapshot `%s` was not on disk after %d s: the "
                       "sandbox is kept",
                       name, SYNC_WAIT_MS / 1000);
}

/* The sandbox goes (the row already says cool), then the row says so. */
static int delete_sandbox(struct op *o, wr_error_t *err) {
  _cleanup_free_ char *path = wr_cli_sandbox_path(o->sandbox, "?force=true");
  int status = 0;

  if (wr_cli_call(&o->env->api, "DELETE", path, NULL, NULL, &status, err) < 0 &&
      status != 404)
    return wr_error_wrap(err, "delete sandbox `%s`", o->sandbox);
  op_step(o, "delete the sandbox");
  free(o->rec.sandbox);
  o->rec.sandbox = NULL;
  return op_save(o, err);
}

/* Live -> cool. */
static int to_cool(struct op *o, const json_t *sb, wr_error_t *err) {
  const char *state = wr_cli_jstr(sb, "state");
  _cleanup_free_ char *name = snapshot_name(o, o->rec.generation + 1);
  _cleanup_free_ char *old = o->rec.snapshot ? xstrdup(o->rec.snapshot) : NULL;

  /* Recorded cool with its snapshot whole, and a sandbox still there: a
   * demote killed between the two (or an open from cool killed before it
   * recorded hot). The snapshot has everything: only the delete is left. */
  if (strcmp(o->rec.tier, "cool") == 0 && o->rec.snapshot != NULL) {
    _cleanup_free_ char *have = snapshot_state(o, o->rec.snapshot);
    if (strcmp(have, "ready") == 0)
      return delete_sandbox(o, err);
  }
  if (strcmp(state, "running") == 0) {
    if (o->planner)
      return wr_error_setx(err, EBUSY, "project `%s` is hot: left alone",
                           o->rec.name);
    if (pause_first(o, err) < 0)
      return -1;
  } else if (strcmp(state, "paused") != 0 && strcmp(state, "stopped") != 0) {
    return wr_error_setx(err, EBUSY, "sandbox `%s` is %s: try again",
                         o->sandbox, state);
  }
  if (capture(o, name, wr_cli_jstr(sb, "id"), err) < 0 ||
      wait_synced(o, name, err) < 0)
    return -1;
  free(o->rec.snapshot);
  o->rec.snapshot = xstrdup(name);
  o->rec.generation++;
  if (set_tier(o, "cool", err) < 0)
    return -1;
  if (delete_sandbox(o, err) < 0)
    return -1;
  /* The snapshot it was made from, unless the new one stacks on it (the
   * daemon refuses to remove a snapshot in use; retention takes it). */
  if (old != NULL && strcmp(old, name) != 0)
    delete_snapshot(o, old, false, NULL);
  return 0;
}

/* Cool -> cold. */
static int to_cold(struct op *o, wr_error_t *err) {
  if (o->rec.snapshot != NULL) {
    if (delete_snapshot(o, o->rec.snapshot, true, err) < 0)
      return -1;
    op_step(o, "remove the snapshot");
    free(o->rec.snapshot);
    o->rec.snapshot = NULL;
  }
  if (set_tier(o, "cold", err) < 0)
    return -1;
  op_drop_old_snapshots(o); /* earlier generations it stacked on */
  return 0;
}

int op_demote(struct op *o, json_t **result, wr_error_t *err) {
  const char *to = op_arg(o, "to", NULL);
  _cleanup_json_ json_t *sb = NULL;
  _cleanup_free_ char *from = xstrdup(o->rec.tier);
  int have;

  if (to != NULL && strcmp(to, "cool") != 0 && strcmp(to, "cold") != 0)
    return wr_error_setx(err, EINVAL, "demote goes to cool or cold, not `%s`",
                         to);
  if ((have = op_sandbox(o, &sb, err)) < 0)
    return -1;
  if (have) {
    free(from);
    from = xstrdup(strcmp(wr_cli_jstr(sb, "state"), "running") == 0 ? "hot"
                                                                    : "warm");
  } else if (strcmp(from, "hot") == 0 || strcmp(from, "warm") == 0) {
    /* Its sandbox went: git is what is left (a snapshot it was made
     * from predates its last commits). */
    free(from);
    from = xstrdup("cold");
  }
  if (to == NULL)
    to = "cool"; /* so that a rerun does what the first run meant */
  if (strcmp(from, "cold") == 0) {
    if (strcmp(o->rec.tier, "cold") != 0 && to_cold(o, err) < 0)
      return -1;
  } else if (have && to_cool(o, sb, err) < 0) {
    return -1;
  } else if (!have && strcmp(o->rec.tier, "cool") != 0 &&
             set_tier(o, "cool", err) < 0) {
    return -1;
  }
  if (strcmp(to, "cold") == 0 && to_cold(o, err) < 0)
    return -1;
  *result = op_result(o, NULL);
  json_object_set_new(*result, "from", json_string(from));
  json_object_set_new(*result, "to", json_string(o->rec.tier));
  return 0;
}
