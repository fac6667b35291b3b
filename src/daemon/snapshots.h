/*
 * Disk snapshots and forks (snapshots.c): what a sandbox made from a
 * snapshot stacks, and the API. Loop thread only.
 */
#ifndef WR_DAEMON_SNAPSHOTS_H
#define WR_DAEMON_SNAPSHOTS_H

#include "daemon/daemon.h"

/* What a sandbox made from a snapshot stacks. */
struct wr_snapshot_use {
  char *id, *image;
  char **ids;  /* the stack's snapshots, newest first, NULL-ended */
  char **dirs; /* their layer directories, the same order */
  size_t n;
};
/* The ready snapshot `id_or_name` (ENOENT: none; EBUSY: being made). */
int wr_snapshot_use(struct wr_daemon *d, const char *id_or_name,
                    struct wr_snapshot_use *u, wr_error_t *err);
void wr_snapshot_use_clear(struct wr_snapshot_use *u);
/* ROOT/snapshots (wr_daemon_init); after the sandboxes are recovered:
 * drop interrupted captures and strays, expire, start the expiry timer;
 * close it (shutdown). */
int wr_snapshots_init(struct wr_daemon *d, wr_error_t *err);
void wr_snapshots_recover(struct wr_daemon *d);
void wr_snapshots_shutdown(struct wr_daemon *d);

void wr_api_snapshot_create(wr_http_req_t *req, void *ctx);
void wr_api_snapshot_list(wr_http_req_t *req, void *ctx);
void wr_api_snapshot_get(wr_http_req_t *req, void *ctx);
void wr_api_snapshot_delete(wr_http_req_t *req, void *ctx);
void wr_api_snapshot_export(wr_http_req_t *req, void *ctx);
void wr_api_snapshot_import(wr_http_req_t *req, void *ctx);

#endif
