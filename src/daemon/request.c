/*
 * What every API handler uses to read a request (a strict JSON body,
 * query flags and numbers) and to answer an error from its code.
 */
#include "daemon/request.h"

void wr_reply_err(wr_http_req_t *req, const wr_error_t *err) {
  switch (err->code) {
  case ENOENT:
    wr_http_reply_error(req, 404, "not_found", "%s", err->msg);
    break;
  case EEXIST:
    wr_http_reply_error(req, 409, "conflict", "%s", err->msg);
    break;
  case EBUSY:
    wr_http_reply_error(req, 409, "busy", "%s", err->msg);
    break;
  case ESTALE: /* a workspace that is not the directory recorded */
    wr_http_reply_error(req, 409, "conflict", "%s", err->msg);
    break;
  case E2BIG:
    wr_http_reply_error(req, 400, "too_large", "%s", err->msg);
    break;
  case 0:
  case EINVAL:
  case ENAMETOOLONG:
  case ELOOP:
  case ENOTDIR:
  case EISDIR:
  case ENOTEMPTY:
  case EXDEV:
    wr_http_reply_error(req, 400, "bad_request", "%s", err->msg);
    break;
  case EACCES:
  case EPERM:
  case EROFS:
    wr_http_reply_error(req, 403, "forbidden", "%s", err->msg);
    break;
  case ENOSPC:
  case EDQUOT:
  case EFBIG:
    wr_http_reply_error(req, 507, "no_space", "%s", err->msg);
    break;
  default:
    wr_http_reply_error(req, 500, "internal", "%s", err->msg);
  }
}

json_t *wr_req_json(wr_http_req_t *req, const struct wr_json_field *fields,
                    size_t n) {
  size_t len = 0;
  const char *body = wr_http_body(req, &len);
  json_t *j = NULL;
  wr_error_t err;

  if (wr_json_parse_object(body, len, true, &j, &err) < 0 ||
      wr_json_unpack(j, fields, n, &err) < 0) {
    json_decref(j);
    wr_http_reply_error(req, 400, "bad_request", "%s", err.msg);
    return NULL;
  }
  return j;
}

int wr_req_bool(wr_http_req_t *req, const char *name, bool def, bool *out) {
  const char *v = wr_http_query(req, name);

  if (v == NULL) {
    *out = def;
    return 0;
  }
  if (*v == '\0' || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
    *out = true;
    return 0;
  }
  if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
    *out = false;
    return 0;
  }
  wr_http_reply_error(req, 400, "bad_request",
                      "query `%s` must be true or false", name);
  return -1;
}

int wr_req_u64(wr_http_req_t *req, const char *name, uint64_t def, uint64_t min,
               uint64_t max, uint64_t *out) {
  const char *v = wr_http_query(req, name);
  wr_error_t err;

  *out = def;
  if (v == NULL || wr_parse_u64(v, min, max, out, &err) == 0)
    return 0;
  wr_http_reply_error(req, 400, "bad_request", "query `%s`: %s", name, err.msg);
  return -1;
}
