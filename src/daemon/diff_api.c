/*
 * GET /v1/sandboxes/{id}/diff: what changed in a direct-mode workspace
 * since the sandbox was created, compared with the manifest the runtime
 * recorded before the sandbox's first process (src/runtime/manifest.c).
 *
 * The walk blocks on the filesystem, so it runs as a threadpool job on
 * copies of the paths it needs. The workspace is a host directory, so the
 * diff works whether the sandbox runs, is paused or is stopped; it is
 * reached as the mount reaches it (wr_workspace_open: no symlink on the
 * way, the very directory recorded at create), so a neighbour that
 * re-aimed its path gets the diff refused, not a listing of where it
 * points.
 */
#include "daemon/files.h"
#include "daemon/jobs.h"
#include "daemon/request.h"
#include "daemon/sandbox.h"

#define DIFF_DEFAULT_LIMIT 10000
#define DIFF_MAX_LIMIT 1000000

struct diff_job {
  struct wr_job job;
  wr_http_req_t *req;
  char *name;
  char *ws_path;
  uint32_t ws_uid, ws_gid;
  struct wr_ws_identity ws_id;
  char *manifest;
  size_t limit;
  json_t *result;
  bool no_manifest; /* failed because the manifest is missing */
};

static void diff_job_free(struct diff_job *j) {
  free(j->name);
  free(j->ws_path);
  free(j->manifest);
  json_decref(j->result);
  free(j);
}

static void diff_work(struct wr_job *job) {
  struct diff_job *j = job->arg;
  struct wr_rt_spec spec = {.ws_path = j->ws_path,
                            .ws_uid = j->ws_uid,
                            .ws_gid = j->ws_gid,
                            .ws_id = j->ws_id};
  _cleanup_close_ int ws = wr_workspace_open(&spec, false, &job->err);

  j->result =
      ws < 0 ? NULL : wr_manifest_diff(ws, j->manifest, j->limit, &job->err);
  job->result = j->result != NULL ? 0 : -1;
  j->no_manifest = j->result == NULL && job->err.code == ENOENT &&
                   access(j->manifest, F_OK) < 0 && errno == ENOENT;
}

/* A missing manifest is not a missing sandbox: say what is missing. */
static void diff_done(struct wr_job *job) {
  struct diff_job *j = job->arg;

  if (job->result == 0)
    wr_http_reply_json(j->req, 200, json_incref(j->result));
  else if (j->no_manifest)
    wr_http_reply_error(j->req, 409, "conflict",
                        "`%s` has no record of its workspace's state at "
                        "creation to compare with (%s)",
                        j->name, job->err.msg);
  else
    wr_reply_err(j->req, &job->err);
  diff_job_free(j);
}

/* Only a direct-mode workspace is the host's own directory; a clone's
 * changes travel as commits. */
static bool check_direct(wr_http_req_t *req, const struct wr_sandbox *sb) {
  const char *mode = sb->spec.ws_mode;

  if (mode != NULL && strcmp(mode, "direct") == 0 && sb->spec.ws_path != NULL)
    return true;
  if (mode != NULL && strcmp(mode, "clone") == 0)
    wr_http_reply_error(req, 409, "conflict",
                        "`%s` has no direct-mode workspace: clone mode's "
                        "changes are commits, fetch them with git fetch "
                        "warren-%s BRANCH",
                        sb->name, sb->name);
  else
    wr_http_reply_error(req, 409, "conflict",
                        "`%s` has no direct-mode workspace (it was created "
                        "without a PATH), so there is nothing to compare",
                        sb->name);
  return false;
}

void wr_api_sandbox_diff(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  struct wr_sandbox *sb = wr_sandbox_from_req(d, req);
  _cleanup_free_ char *dir = NULL;
  struct diff_job *j;
  uint64_t limit;

  if (sb == NULL || !check_direct(req, sb) ||
      wr_req_u64(req, "limit", DIFF_DEFAULT_LIMIT, 1, DIFF_MAX_LIMIT, &limit) <
          0)
    return;
  dir = wr_rt_sandbox_dir(d->rt, sb->id);
  j = xcalloc(1, sizeof(*j));
  j->req = req;
  j->name = xstrdup(sb->name);
  j->ws_path = xstrdup(sb->spec.ws_path);
  j->ws_uid = sb->spec.ws_uid;
  j->ws_gid = sb->spec.ws_gid;
  j->ws_id = sb->spec.ws_id;
  j->manifest = xasprintf("%s/%s", dir, WR_WS_MANIFEST);
  j->limit = (size_t)limit;
  j->job.fn = diff_work;
  j->job.done = diff_done;
  j->job.arg = j;
  wr_job_queue(d, &j->job);
}
