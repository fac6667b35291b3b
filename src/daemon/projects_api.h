/*
 * Projects in the daemon (projects_api.c): the /v1/projects and /v1/plan
 * routes, one queue of operations per project (an open, a commit or a
 * demote at a time; opens that arrive while one is pending join it), the
 * threads that run them (src/projects/), and the planner's timer. Loop
 * thread, except where a function says otherwise.
 */
#ifndef WR_DAEMON_PROJECTS_API_H
#define WR_DAEMON_PROJECTS_API_H

#include "daemon/daemon.h"
#include "projects/projects.h"

/* The planner's settings unless warrend is told otherwise. */
#define WR_PLAN_INTERVAL_S 300
#define WR_PLAN_FREE 2
#define WR_SNAPSHOT_DAYS 30

int wr_projects_init(struct wr_daemon *d, wr_error_t *err);
/* Stop the timer and answer nothing more; operations in flight finish
 * on their threads and are dropped. */
void wr_projects_shutdown(struct wr_daemon *d);
void wr_projects_free(struct wr_daemon *d);

/*
 * Run an operation from inside the daemon (the gateway, the app
 * builder): done is called on the loop once it ends, with the reply's
 * object (borrowed) or err. An open of a project that has one pending
 * joins it. args is stolen (may be NULL).
 */
typedef void (*wr_project_done_fn)(void *arg, const json_t *result,
                                   const wr_error_t *err);
void wr_project_submit(struct wr_daemon *d, enum wr_project_verb verb,
                       const char *name, json_t *args, wr_project_done_fn done,
                       void *arg);
/* The tier a project is in now: its row, corrected by its sandbox's
 * state (a paused sandbox is warm however the row calls it). */
enum wr_tier wr_project_tier(struct wr_daemon *d,
                             const struct wr_project_rec *rec);
/* Whether an operation on the project is queued or running. */
bool wr_project_busy(struct wr_daemon *d, const char *name);

void wr_api_project_list(wr_http_req_t *req, void *ctx);
void wr_api_project_create(wr_http_req_t *req, void *ctx);
void wr_api_project_get(wr_http_req_t *req, void *ctx);
void wr_api_project_delete(wr_http_req_t *req, void *ctx);
void wr_api_project_open(wr_http_req_t *req, void *ctx);
void wr_api_project_commit(wr_http_req_t *req, void *ctx);
void wr_api_project_demote(wr_http_req_t *req, void *ctx);
void wr_api_project_restore(wr_http_req_t *req, void *ctx);
void wr_api_project_remix(wr_http_req_t *req, void *ctx);
void wr_api_project_log(wr_http_req_t *req, void *ctx);
void wr_api_project_diff(wr_http_req_t *req, void *ctx);
void wr_api_plan_get(wr_http_req_t *req, void *ctx);
void wr_api_plan_apply(wr_http_req_t *req, void *ctx);

#endif
