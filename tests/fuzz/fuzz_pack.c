/*
 * Fuzz wr_pack_scan, git-remote-warren's reading of a pack from a
 * sandbox. The first byte picks the object id length (bit 0) and the size
 * of the pieces the pack is read in (the rest); the pack follows. Besides
 * crashes and leaks, it aborts when a result breaks the limits, when a
 * refusal gives no reason, or when reading in small pieces and reading
 * all at once disagree.
 */
#include "gitremote/gitremote.h"

struct source {
  const uint8_t *data;
  size_t len, pos, piece;
};

static ssize_t source_read(void *ctx, void *buf, size_t len) {
  struct source *s = ctx;
  size_t n = WR_MIN(WR_MIN(len, s->piece), s->len - s->pos);

  memcpy(buf, s->data + s->pos, n);
  s->pos += n;
  return (ssize_t)n;
}

static int scan(const uint8_t *data, size_t size, size_t oid_len, size_t piece,
                struct wr_pack_scan *s) {
  struct source src = {data, size, 0, piece};
  wr_error_t err;

  *s = (struct wr_pack_scan){
      .oid_len = oid_len, .max_object = 1u << 20, .max_total = 8u << 20};
  return wr_pack_scan(s, source_read, &src, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct wr_pack_scan a, b;
  size_t oid_len, piece;
  int ra, rb;

  if (size < 1)
    return 0;
  oid_len = (data[0] & 1) ? 32 : 20;
  piece = 1 + (data[0] >> 1);
  ra = scan(data + 1, size - 1, oid_len, piece, &a);
  rb = scan(data + 1, size - 1, oid_len, 65536, &b);
  if (ra != rb || a.refused != b.refused || a.objects != b.objects ||
      a.total != b.total || a.largest != b.largest)
    abort();
  if (ra == 0 && (a.refused != WR_PACK_OK || a.total > a.max_total ||
                  a.largest > a.max_object))
    abort();
  if (ra < 0 && a.refused == WR_PACK_OK)
    abort();
  return 0;
}
