/*
 * Fuzz what an image build reads from the npm registry: a packument
 * (JSON from the network) through wr_npm_pick for a few majors, and any
 * string as an SRI integrity through wr_sri_sha512. Either gives a
 * release with a tarball URL and a digest, or an error that says why.
 */
#include <jansson.h>

#include "daemon/images_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void pick(const json_t *doc, unsigned major) {
  struct wr_npm_dist dist;
  wr_error_t err = {0};

  if (wr_npm_pick(doc, major, &dist, &err) < 0) {
    if (err.msg[0] == '\0' || dist.version != NULL)
      abort();
    return;
  }
  if (dist.version == NULL || dist.tarball == NULL ||
      (strncmp(dist.tarball, "https://", 8) != 0 &&
       strncmp(dist.tarball, "http://", 7) != 0))
    abort();
  wr_npm_dist_free(&dist);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  _cleanup_free_ char *text = xstrndup((const char *)data, size);
  _cleanup_json_ json_t *doc = json_loadb((const char *)data, size, 0, NULL);
  unsigned char digest[WR_SHA512_LEN];
  unsigned major;
  wr_error_t err = {0};

  if (wr_sri_sha512(text, digest, &err) < 0 && err.msg[0] == '\0')
    abort();
  if (wr_node_spec_parse(text, &major, &err) == 0 && major != 0 &&
      (major < WR_NODE_MAJOR_MIN || major > WR_NODE_MAJOR_MAX))
    abort();
  if (doc == NULL)
    return 0;
  pick(doc, 0);
  pick(doc, 24);
  pick(doc, 4294967295u);
  return 0;
}
