/*
 * Internal to the daemon module: what every API handler uses to read a
 * request and answer an error (request.c). Loop thread.
 */
#ifndef WR_DAEMON_REQUEST_H
#define WR_DAEMON_REQUEST_H

#include <jansson.h>

#include "daemon/daemon.h"

/* Reply with an error derived from err->code (ENOENT -> 404 not_found,
 * EEXIST -> 409 conflict, EINVAL -> 400 bad_request, E2BIG -> 400
 * too_large (a limit, which the message names), EBUSY -> 409 busy,
 * others -> 500 internal). */
void wr_reply_err(wr_http_req_t *req, const wr_error_t *err);
/* Parse and strictly unpack a JSON request body; replies 400 on failure. */
json_t *wr_req_json(wr_http_req_t *req, const struct wr_json_field *fields,
                    size_t n);
/* Query flag: "true"/"1"/"" -> true, "false"/"0" -> false; others 400. */
int wr_req_bool(wr_http_req_t *req, const char *name, bool def, bool *out);
/* Query number in [min, max], def when absent; others 400. */
int wr_req_u64(wr_http_req_t *req, const char *name, uint64_t def, uint64_t min,
               uint64_t max, uint64_t *out);

#endif
