/*
 * projects: a project is a git mirror on the host and, while someone
 * works on it, a sandbox made from its template. It lives in one of four
 * tiers (planner.h): hot (its sandbox runs), warm (paused), cool (a disk
 * snapshot of the sandbox; the sandbox deleted), cold (only the mirror).
 * See docs/projects.md.
 *
 * The operations here are the steps an app builder would otherwise write
 * against warren's API, and they are written against that API: each runs
 * on a thread of its own (the daemon's projects_api.c starts it and
 * answers on the loop), and drives sandboxes, snapshots and exec through
 * warrend's own socket with the blocking client, as the seed's demote and
 * reopen do. So a project's sandbox is an ordinary sandbox (the limiter
 * counts it, the pool serves it, idle pause pauses it, any request wakes
 * it), and the daemon's loop never waits on a project: the loop serves
 * the requests the thread makes. The host's side (the mirror) is git run
 * bounded on the host (src/gitremote/bounded.c); what comes out of a
 * sandbox enters the mirror only through git-remote-warren, with its
 * checks. Operations on one project are serialized by the caller.
 */
#ifndef WR_PROJECTS_H
#define WR_PROJECTS_H

#include <jansson.h>

#include "cli/cli.h"
#include "common/common.h"
#include "projects/planner.h"
#include "store/store.h"

/* A project's sandbox is named this plus the project's name; names are
 * kept short enough for it to be a sandbox name. */
#define WR_PROJECT_SANDBOX_PREFIX "project-"
#define WR_PROJECT_NAME_MAX 48
/* The repository inside when the template says no WORKDIR. */
#define WR_PROJECT_DEFAULT_DIR "/app"
/* The branch every project has. */
#define WR_PROJECT_BRANCH "main"

/* What every operation needs; borrowed, and the same for all threads. */
struct wr_projects_env {
  struct wr_cli_ctx api;  /* warrend's own socket */
  const char *root;       /* state root: mirrors in ROOT/projects */
  const char *db_path;    /* each operation opens the store for itself */
  const char *bin_dir;    /* where git-remote-warren is */
  unsigned idle_pause_s;  /* of the sandboxes it makes (0: the daemon's) */
  unsigned snapshot_days; /* retention of a demote's snapshot (0: none) */
};

/* The operations (`warren project VERB`). */
enum wr_project_verb {
  WR_PROJECT_CREATE,
  WR_PROJECT_OPEN,
  WR_PROJECT_COMMIT,
  WR_PROJECT_DEMOTE,
  WR_PROJECT_LOG,
  WR_PROJECT_DIFF,
  WR_PROJECT_RESTORE,
  WR_PROJECT_REMIX,
  WR_PROJECT_REMOVE,
};

const char *wr_project_verb_name(enum wr_project_verb v);

/*
 * Run one operation on project `name` with the request's arguments
 * (borrowed; may be NULL) and wait for it. 0 with *result, the reply's
 * object (it says what was done, each step with its time); -1 with err,
 * whose code classifies it: ENOENT (no such project, revision or
 * template: 404), EEXIST (409), EINVAL (400), EBUSY (409), anything else
 * 500. *status is the HTTP status of a success (200 or 201). Blocking:
 * never on the loop thread.
 */
int wr_project_run(const struct wr_projects_env *env, enum wr_project_verb verb,
                   const char *name, const json_t *args, json_t **result,
                   int *status, wr_error_t *err);

/* The sandbox name of a project (caller frees). */
char *wr_project_sandbox_name(const char *project);
/* A project's name: a sandbox name of at most WR_PROJECT_NAME_MAX. */
bool wr_project_name_valid(const char *name);
/* ROOT/projects/NAME.git (caller frees). */
char *wr_project_mirror_path(const char *root, const char *name);

/* ---- the mirror on the host (mirror.c) ----------------------------------- */

/* One host git command's environment and limits (mirror.c). */
struct wr_git_run {
  const struct wr_projects_env *env;
  const char *git_dir; /* the mirror, or NULL */
  char **extra_env;    /* "K=V" added (NULL-ended), or NULL */
  wr_buf_t *out;       /* stdout, or NULL */
  size_t max_out;      /* 0: 16 MiB */
  uint64_t timeout_ms; /* 0: 5 minutes */
  int stdin_fd;        /* -1: none */
};
/* Run `git ARGV...` (argv NULL-ended, without "git"); a failure's message
 * says the command and git's last words. */
int wr_git(const struct wr_git_run *r, const char *const *argv,
           wr_error_t *err);

/* A new bare mirror with HEAD on WR_PROJECT_BRANCH; EEXIST if there. */
int wr_mirror_init(const struct wr_projects_env *env, const char *path,
                   wr_error_t *err);
/* The commit HEAD names, or NULL (nothing yet) in *rev. */
int wr_mirror_head(const struct wr_projects_env *env, const char *path,
                   char **rev, wr_error_t *err);
/* How many commits HEAD has (its version number). */
int wr_mirror_count(const struct wr_projects_env *env, const char *path,
                    const char *rev, uint64_t *count, wr_error_t *err);
/* A full bundle of the mirror's branches and tags, in a file in dir
 * (caller unlinks *file). */
int wr_mirror_bundle(const struct wr_projects_env *env, const char *path,
                     const char *dir, char **file, wr_error_t *err);
/* Take what sandbox `sandbox` committed into the mirror: `git fetch`
 * through git-remote-warren (the bundle checks, limits and quarantine of
 * clone mode), branches and tags, fast-forward only. */
int wr_mirror_intake(const struct wr_projects_env *env, const char *path,
                     const char *sandbox, wr_error_t *err);
/* Push the mirror's branches and tags to url, with the credential in the
 * secret file ROOT/secrets/SECRET (`USER:PASSWORD`, or a token sent as
 * the password of user `git`) when secret is not NULL. The credential
 * goes to git through the environment, never a command line. */
int wr_mirror_push(const struct wr_projects_env *env, const char *path,
                   const char *url, const char *secret, wr_error_t *err);
/* The versions, newest first: [{version, commit, author, email, time,
 * subject}]; at most limit (0: all). */
int wr_mirror_log(const struct wr_projects_env *env, const char *path,
                  uint64_t limit, json_t **out, wr_error_t *err);
/* The parsers of what host git prints about a mirror whose commits a
 * sandbox made (names, subjects and paths are its): `git log -z
 * --format=%H%x00%an%x00%ae%x00%at%x00%s` of `total` commits into
 * [{version, commit, author, email, time, subject}] (at most limit, 0:
 * all), and `git diff --name-status -z` into [{status, path}]. Text that
 * is not UTF-8 is kept with U+FFFD for its bad bytes; anything else that
 * is not what git prints is EPROTO. */
int wr_mirror_log_parse(const char *data, size_t len, uint64_t total,
                        uint64_t limit, json_t **out, wr_error_t *err);
int wr_mirror_names_parse(const char *data, size_t len, json_t **out,
                          wr_error_t *err);
/* A revision as the user gives it: a version number ("3", "v3"), or a
 * commit (a full or abbreviated hash, or a ref) that the mirror has, to
 * its full hash. ENOENT when there is none. */
int wr_mirror_resolve(const struct wr_projects_env *env, const char *path,
                      const char *rev, char **commit, wr_error_t *err);
/* `git diff` between two commits: the patch text (bounded) and the
 * files changed. */
int wr_mirror_diff(const struct wr_projects_env *env, const char *path,
                   const char *a, const char *b, json_t **out, wr_error_t *err);
/* A new mirror at dst with the history of src (no sandbox involved). */
int wr_mirror_copy(const struct wr_projects_env *env, const char *src,
                   const char *dst, wr_error_t *err);

#endif
