/*
 * The warm pools' API: GET /v1/pools, PUT and DELETE /v1/pools/{image},
 * adapters over pool.c.
 */
#include "daemon/pool.h"
#include "daemon/templates.h"
#include "daemon/request.h"

void wr_api_pool_list(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  json_t *arr = json_array();

  for (struct wr_pool *p = d->pools->list; p != NULL; p = p->next)
    json_array_append_new(arr, wr_pool_json(d, p));
  wr_http_reply_json(req, 200, json_pack("{s:o}", "pools", arr));
}

/* The image of {image}: a name, and (for a pool to be made) one that is
 * ready to start sandboxes from. */
static const char *image_param(wr_http_req_t *req) {
  const char *image = wr_http_param(req, "image");

  if (image == NULL || !wr_name_valid(image)) {
    wr_http_reply_error(req, 400, "bad_request", "invalid image name `%s`",
                        image ? image : "");
    return NULL;
  }
  return image;
}

void wr_api_pool_put(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  int64_t size = -1;
  struct wr_json_field f[] = {
      {"size", WR_JSON_INT, &size, true, NULL},
  };
  _cleanup_json_ json_t *body = wr_req_json(req, f, WR_ARRAY_SIZE(f));
  _cleanup_free_ char *rootfs = NULL;
  const char *image;
  struct wr_pool *p;
  wr_error_t err;

  if (body == NULL || (image = image_param(req)) == NULL)
    return;
  if (size < 0 || size > WR_POOL_MAX_SIZE) {
    wr_http_reply_error(req, 400, "bad_request",
                        "size must be between 0 (no pool) and %d",
                        WR_POOL_MAX_SIZE);
    return;
  }
  if (size > 0 && !wr_template_exists(d, image) && /* a template, or */
      (rootfs = wr_image_rootfs(d, image, &err)) == NULL) {
    wr_http_reply_error(req, 404, "image_not_found", "%s", err.msg);
    return;
  }
  if (wr_pool_set(d, image, (unsigned)size, &err) < 0) {
    wr_reply_err(req, &err);
    return;
  }
  if ((p = wr_pool_find(d, image)) != NULL)
    wr_http_reply_json(req, 200, wr_pool_json(d, p));
  else
    wr_http_reply_json(req, 200,
                       json_pack("{s:s,s:i}", "image", image, "size", 0));
}

void wr_api_pool_delete(wr_http_req_t *req, void *ctx) {
  struct wr_daemon *d = ctx;
  const char *image = image_param(req);
  wr_error_t err;

  if (image == NULL)
    return;
  if (wr_pool_find(d, image) == NULL) {
    wr_http_reply_error(req, 404, "not_found", "no pool for image `%s`", image);
    return;
  }
  if (wr_pool_set(d, image, 0, &err) < 0)
    wr_reply_err(req, &err);
  else
    wr_http_reply_empty(req, 204);
}
