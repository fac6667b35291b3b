/*
 * What the operations of src/projects/ share: one operation's context
 * (its project's row, its own store connection, the steps it took and
 * their times) and the calls into warrend's API they are made of.
 */
#ifndef WR_PROJECTS_INTERNAL_H
#define WR_PROJECTS_INTERNAL_H

#include "projects/projects.h"

struct op {
  const struct wr_projects_env *env;
  const json_t *args; /* the request's (borrowed; may be NULL) */
  wr_store_t *store;
  struct wr_project_rec rec;
  char *mirror;  /* ROOT/projects/NAME.git */
  char *sandbox; /* project-NAME */
  json_t *steps; /* [{"step", "ms"}] */
  uint64_t started_ns, step_ns;
  bool planner; /* the planner asked: a hot project is left alone */
};

/* Record a step that has just ended, with the time since the last. */
void op_step(struct op *o, const char *what);
/* Write the row back. */
int op_save(struct op *o, wr_error_t *err);
/* A string argument of the request, or def. */
const char *op_arg(const struct op *o, const char *key, const char *def);
/* A string of the row's settings, or def. */
const char *op_setting(const struct op *o, const char *key, const char *def);
/* The repository inside the sandbox. */
const char *op_dir(const struct op *o);
/* The reply's common part: the project as `inspect` shows it, tier
 * included, and the steps. */
json_t *op_result(struct op *o, const char *tier);

/* GET the project's sandbox: 1 with *sb, 0 when there is none. */
int op_sandbox(struct op *o, json_t **sb, wr_error_t *err);
/* Run `sh -c script sh ARGS...` in the project's sandbox, as root in
 * cwd "/"; 0 with *exit_code whatever it is; stdout in out (bounded)
 * when not NULL; a message with the script's last words in err when it
 * could not run. */
int op_script(struct op *o, const char *script, char *const *args,
              uint64_t timeout_ms, wr_buf_t *out, wr_buf_t *errout,
              int *exit_code, wr_error_t *err);
/* The exit code's message: the script's last words. */
int op_script_failed(struct op *o, const char *what, int code,
                     const wr_buf_t *errout, wr_error_t *err);
/* Hand the mirror's history to the sandbox as a bundle at *inside
 * (caller frees), or NULL when the mirror has no commit yet. */
int op_hand_bundle(struct op *o, char **inside, wr_error_t *err);
/* Take what the sandbox has committed into the mirror; *changed when
 * HEAD moved (rec.revision then follows). */
int op_intake(struct op *o, bool *changed, wr_error_t *err);

/* The operations (open.c, commit.c, demote.c, project.c). */
int op_open(struct op *o, json_t **result, wr_error_t *err);
int op_commit(struct op *o, json_t **result, wr_error_t *err);
int op_restore(struct op *o, json_t **result, wr_error_t *err);
int op_demote(struct op *o, json_t **result, wr_error_t *err);

/* Remove the project's snapshots of earlier generations that nothing
 * uses any more (demote.c); failures are left for the next time. */
void op_drop_old_snapshots(struct op *o);

/* Map an API error to ours: 404 is ENOENT, 409 EBUSY, 400 EINVAL. */
int op_api_error(int status, wr_error_t *err);

#endif
