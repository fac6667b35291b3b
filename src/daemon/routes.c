/*
 * The daemon's route table: every API route and its handler, in one
 * place (tests/unit/test_routes.c checks it against docs/api.yaml).
 */
#include "daemon/daemon.h"
#include "daemon/files.h"
#include "daemon/network.h"
#include "daemon/procs.h"
#include "daemon/sandbox.h"
#include "daemon/kits.h"
#include "daemon/events.h"
#include "daemon/snapshots.h"
#include "daemon/pool.h"
#include "daemon/templates.h"
#include "daemon/lease.h"
#include "daemon/projects_api.h"

static const struct wr_http_route routes[] = {
    {"GET", "/v1/info", wr_api_info, 0},
    {"GET", "/v1/images", wr_api_image_list, 0},
    {"POST", "/v1/images", wr_api_image_build, 0},
    {"GET", "/v1/images/{name}", wr_api_image_get, 0},
    {"DELETE", "/v1/images/{name}", wr_api_image_delete, 0},
    {"POST", "/v1/sandboxes", wr_api_sandbox_create, 0},
    {"GET", "/v1/sandboxes", wr_api_sandbox_list, 0},
    {"GET", "/v1/sandboxes/{id}", wr_api_sandbox_get, 0},
    {"DELETE", "/v1/sandboxes/{id}", wr_api_sandbox_delete, 0},
    {"POST", "/v1/sandboxes/{id}/start", wr_api_sandbox_start, 0},
    {"POST", "/v1/sandboxes/{id}/stop", wr_api_sandbox_stop, 0},
    {"POST", "/v1/sandboxes/{id}/pause", wr_api_sandbox_pause, 0},
    {"POST", "/v1/sandboxes/{id}/resume", wr_api_sandbox_resume, 0},
    {"POST", "/v1/sandboxes/{id}/restart-start", wr_api_sandbox_restart_start,
     0},
    {"POST", "/v1/sandboxes/{id}/exec", wr_api_exec, 0},
    {"GET", "/v1/sandboxes/{id}/processes", wr_api_proc_list, 0},
    {"GET", "/v1/sandboxes/{id}/processes/{tag}", wr_api_proc_get, 0},
    {"DELETE", "/v1/sandboxes/{id}/processes/{tag}", wr_api_proc_delete, 0},
    {"GET", "/v1/sandboxes/{id}/processes/{tag}/output", wr_api_proc_output, 0},
    {"POST", "/v1/sandboxes/{id}/processes/{tag}/signal", wr_api_proc_signal,
     0},
    {"GET", "/v1/sandboxes/{id}/files", wr_api_files_read, 0},
    {"PUT", "/v1/sandboxes/{id}/files", wr_api_files_write,
     WR_ROUTE_STREAM_BODY},
    {"DELETE", "/v1/sandboxes/{id}/files", wr_api_files_delete, 0},
    {"GET", "/v1/sandboxes/{id}/files/stat", wr_api_files_stat, 0},
    {"GET", "/v1/sandboxes/{id}/files/list", wr_api_files_list, 0},
    {"POST", "/v1/sandboxes/{id}/files/mkdir", wr_api_files_mkdir, 0},
    {"POST", "/v1/sandboxes/{id}/files/move", wr_api_files_move, 0},
    {"POST", "/v1/sandboxes/{id}/files/chmod", wr_api_files_chmod, 0},
    {"GET", "/v1/sandboxes/{id}/files/archive", wr_api_files_archive_get, 0},
    {"PUT", "/v1/sandboxes/{id}/files/archive", wr_api_files_archive_put,
     WR_ROUTE_STREAM_BODY},
    {"GET", "/v1/sandboxes/{id}/diff", wr_api_sandbox_diff, 0},
    {"GET", "/v1/sandboxes/{id}/ports", wr_api_ports_list, 0},
    {"POST", "/v1/sandboxes/{id}/ports", wr_api_ports_publish, 0},
    {"DELETE", "/v1/sandboxes/{id}/ports/{host_port}", wr_api_ports_unpublish,
     0},
    {"GET", "/v1/policy", wr_api_policy_get, 0},
    {"POST", "/v1/policy/init", wr_api_policy_init, 0},
    {"POST", "/v1/policy/rules", wr_api_policy_rule_add, 0},
    {"DELETE", "/v1/policy/rules/{rule}", wr_api_policy_rule_delete, 0},
    {"POST", "/v1/policy/check", wr_api_policy_check, 0},
    {"GET", "/v1/policy/log", wr_api_policy_log, 0},
    {"GET", "/v1/secrets", wr_api_secret_list, 0},
    {"PUT", "/v1/secrets/{service}", wr_api_secret_put, 0},
    {"DELETE", "/v1/secrets/{service}", wr_api_secret_delete, 0},
    {"GET", "/v1/kits", wr_api_kit_list, 0},
    {"GET", "/v1/kits/{name}", wr_api_kit_get, 0},
    {"GET", "/v1/events", wr_api_events, 0}, /* events.c */
    /* Snapshots (snapshots.c). */
    {"POST", "/v1/sandboxes/{id}/snapshots", wr_api_snapshot_create, 0},
    {"GET", "/v1/snapshots", wr_api_snapshot_list, 0},
    {"GET", "/v1/snapshots/{id}", wr_api_snapshot_get, 0},
    {"DELETE", "/v1/snapshots/{id}", wr_api_snapshot_delete, 0},
    {"GET", "/v1/snapshots/{id}/export", wr_api_snapshot_export, 0},
    {"POST", "/v1/snapshots/import", wr_api_snapshot_import,
     WR_ROUTE_STREAM_BODY},
    /* Warm pools (pool_api.c). */
    {"GET", "/v1/pools", wr_api_pool_list, 0},
    {"PUT", "/v1/pools/{image}", wr_api_pool_put, 0},
    {"DELETE", "/v1/pools/{image}", wr_api_pool_delete, 0},
    /* Templates (templates.c). */
    {"GET", "/v1/templates", wr_api_template_list, 0},
    {"POST", "/v1/templates/{name}/build", wr_api_template_build,
     WR_ROUTE_STREAM_BODY},
    {"GET", "/v1/templates/{name}", wr_api_template_get, 0},
    {"DELETE", "/v1/templates/{name}", wr_api_template_delete, 0},
    /* projects_api.c */
    {"GET", "/v1/projects", wr_api_project_list, 0},
    {"POST", "/v1/projects", wr_api_project_create, 0},
    {"GET", "/v1/projects/{id}", wr_api_project_get, 0},
    {"DELETE", "/v1/projects/{id}", wr_api_project_delete, 0},
    {"POST", "/v1/projects/{id}/open", wr_api_project_open, 0},
    {"POST", "/v1/projects/{id}/commit", wr_api_project_commit, 0},
    {"POST", "/v1/projects/{id}/demote", wr_api_project_demote, 0},
    {"POST", "/v1/projects/{id}/restore", wr_api_project_restore, 0},
    {"POST", "/v1/projects/{id}/remix", wr_api_project_remix, 0},
    {"GET", "/v1/projects/{id}/log", wr_api_project_log, 0},
    {"GET", "/v1/projects/{id}/diff", wr_api_project_diff, 0},
    {"POST", "/v1/projects/{id}/lease", wr_api_lease_take, 0}, /* lease.c */
    {"PUT", "/v1/projects/{id}/lease", wr_api_lease_renew, 0},
    {"DELETE", "/v1/projects/{id}/lease", wr_api_lease_release, 0},
    {"GET", "/v1/projects/{id}/lease", wr_api_lease_get, 0},
    {"GET", "/v1/plan", wr_api_plan_get, 0},
    {"POST", "/v1/plan", wr_api_plan_apply, 0},
};

const struct wr_http_route *wr_daemon_routes(size_t *n) {
  *n = WR_ARRAY_SIZE(routes);
  return routes;
}
