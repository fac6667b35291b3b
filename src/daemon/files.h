/*
 * Internal to the daemon module: a sandbox's files from the host: the
 * files API (files_api.c), users looked up in its /etc (users.c) and a
 * workspace's diff (diff_api.c).
 */
#ifndef WR_DAEMON_FILES_H
#define WR_DAEMON_FILES_H

#include "daemon/daemon.h"
#include "init/init.h"

/* ---- files (files_api.c) ------------------------------------------------ */

void wr_api_files_read(wr_http_req_t *req, void *ctx);
void wr_api_files_write(wr_http_req_t *req, void *ctx);
void wr_api_files_stat(wr_http_req_t *req, void *ctx);
void wr_api_files_list(wr_http_req_t *req, void *ctx);
void wr_api_files_mkdir(wr_http_req_t *req, void *ctx);
void wr_api_files_delete(wr_http_req_t *req, void *ctx);
void wr_api_files_move(wr_http_req_t *req, void *ctx);
void wr_api_files_chmod(wr_http_req_t *req, void *ctx);
void wr_api_files_archive_get(wr_http_req_t *req, void *ctx);
void wr_api_files_archive_put(wr_http_req_t *req, void *ctx);

/* ---- users (users.c) ----------------------------------------------------- */

struct wr_user {
  uint32_t uid, gid;
  uint32_t groups[WR_INIT_MAX_GROUPS];
  uint32_t ngroups;
  char home[256];
  char name[64];
};

/* Resolve "root", "name", "uid" or "uid:gid" against /etc/passwd and
 * /etc/group inside the sandbox's root. */
int wr_user_resolve(int rootfd, const char *spec, struct wr_user *out,
                    wr_error_t *err);

/* ---- workspace diff (diff_api.c) ----------------------------------------- */

/* GET /v1/sandboxes/{id}/diff: changes in a direct-mode workspace since
 * the sandbox was created. */
void wr_api_sandbox_diff(wr_http_req_t *req, void *ctx);

#endif
