/*
 * Internal to the daemon module: a workspace a create asks for, checked
 * (workspaces.c).
 */
#ifndef WR_DAEMON_WORKSPACES_H
#define WR_DAEMON_WORKSPACES_H

#include <jansson.h>

#include "daemon/daemon.h"

/* A workspace a client asks for, and what checking it found. */
struct wr_ws_check {
  const char *path, *mode; /* as asked (borrowed); mode "direct"/"clone" */
  const char *state_root;  /* the daemon's --root (borrowed) */
  char *real;              /* the canonical path (owned) */
  uint32_t uid, gid;       /* its owner */
  struct wr_ws_identity id;
};

/* The fields of a create request's "workspace" object, checked without
 * touching the disk (loop thread): c->path and c->mode. */
int wr_ws_check_request(json_t *ws, struct wr_ws_check *c, wr_error_t *err);
/* Everything else, on a worker thread (it reads a directory the client
 * names, which may be inside another sandbox's workspace): a directory,
 * not the host's machinery or warren's state, not root's, and in clone
 * mode a git repository with a commit (src/common/gitrepo.c), the same
 * refusals whichever client asks; fills real, uid, gid and id. Errors
 * are EINVAL, with a message for the client. */
int wr_ws_check_host(struct wr_ws_check *c, wr_error_t *err);
void wr_ws_check_clear(struct wr_ws_check *c);

#endif
