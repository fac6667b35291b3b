/*
 * Fuzz git-remote-warren's reading of a bundle's header, which a sandbox
 * writes. Every accepted header must be self-consistent: ids of the
 * announced length, valid names, a pack right after it.
 */
#include "gitremote/gitremote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct wr_bundle_header h;
  wr_error_t err;

  if (wr_bundle_header_parse((const char *)data, size, &h, &err) < 0)
    return 0;
  if (h.pack_offset + 4 > size || memcmp(data + h.pack_offset, "PACK", 4) != 0)
    abort();
  for (size_t i = 0; i < h.nrefs; i++) {
    if (strlen(h.refs[i].oid) != h.oid_len)
      abort();
    if (strcmp(h.refs[i].name, "HEAD") != 0 &&
        !wr_cli_git_refname_valid(h.refs[i].name))
      abort();
    if (wr_bundle_find(&h, h.refs[i].name) != &h.refs[i])
      abort();
  }
  wr_bundle_header_free(&h);
  return 0;
}
