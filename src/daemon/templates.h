/*
 * Templates (templates.c): images built from a Dockerfile in cached
 * layers, whose CMD a sandbox starts and whose EXPOSE port says when it
 * is ready. See docs/templates.md. Loop thread only.
 */
#ifndef WR_DAEMON_TEMPLATES_H
#define WR_DAEMON_TEMPLATES_H

#include "daemon/sandbox.h"

/* How long a create or start waits for the start command's port unless
 * it says otherwise. */
#define WR_TEMPLATE_READY_TIMEOUT_S 120.0
/* The largest build context a client may send. */
#define WR_TEMPLATE_CONTEXT_MAX (1ull << 30)

/* ---- for sandbox.c and lifecycle.c ----------------------------------------
 */

/*
 * The lower layer of a new sandbox made from `image`: when it names a
 * template (or sb is made from a snapshot of a template sandbox), the
 * template's image's rootfs, with sb->spec.template set and its layers
 * added under the snapshot's in sb->spec.layer_dirs, its ENV under the
 * sandbox's, and its WORKDIR unless workdir_given. Otherwise the image's
 * rootfs (wr_image_rootfs). NULL with err (ENOENT: no such image).
 */
char *wr_template_prepare(struct wr_daemon *d, struct wr_sandbox *sb,
                          const char *image, bool workdir_given,
                          wr_error_t *err);
/* Recovery: the layer directories and image of a sandbox whose stored
 * spec names a template. */
void wr_template_load(struct wr_daemon *d, struct wr_sandbox *sb);
/*
 * For a create with start and a start: when sb has a start command,
 * *done and *arg become a wrapper that, once the sandbox runs, starts it
 * (background, tag `start`) and calls the original only when
 * 127.0.0.1:PORT answers inside the sandbox (or at once with
 * sb->tpl.no_wait, or without EXPOSE), or with an error that
 * wr_template_not_ready recognises when it does not answer in time or
 * exits. The sandbox is left running either way. done may be NULL.
 */
void wr_template_wrap_done(struct wr_sandbox *sb, wr_sandbox_done_fn *done,
                           void **arg);
/* Whether err is a start command that did not answer (HTTP 504). */
bool wr_template_not_ready(const wr_error_t *err);
/*
 * Restart a running template sandbox's start command with its current
 * environment: SIGKILL the `start` process, start the command again and
 * wait for its port as a create does (sb->tpl says how). -1 with err when
 * refused at once (not running, busy, no start command); otherwise done
 * is called once.
 */
int wr_template_restart(struct wr_sandbox *sb, wr_sandbox_done_fn done,
                        void *arg, wr_error_t *err);

/* After the sandboxes are recovered (daemon.c): remove what builds that
 * died with an earlier daemon left (work directories, half-made layers,
 * build sandboxes). */
void wr_templates_recover(struct wr_daemon *d);

/* ---- for images.c ---------------------------------------------------------
 */

bool wr_template_exists(struct wr_daemon *d, const char *name);
/* How many templates are built over `image` (which may then not go). */
unsigned wr_templates_on_image(struct wr_daemon *d, const char *image);
/* The templates, as `image ls` shows them (each with "kind":"template"). */
json_t *wr_templates_list_json(struct wr_daemon *d);

void wr_api_template_build(wr_http_req_t *req, void *ctx);
void wr_api_template_list(wr_http_req_t *req, void *ctx);
void wr_api_template_get(wr_http_req_t *req, void *ctx);
void wr_api_template_delete(wr_http_req_t *req, void *ctx);

#endif
