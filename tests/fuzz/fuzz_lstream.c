/*
 * Fuzz the decoder of snapshot streams (src/runtime/layer_stream.c) with
 * any bytes, as `warren snapshot import` may be given (after zstd, which
 * is its own project's to fuzz). The input is fed in pieces whose sizes
 * come from its first byte, so that every split of a record is tried.
 *
 * Besides "no crash, no overread": every record handed on has a clean
 * path (or none, for a layer), ids below 65536, permission bits only,
 * data only on files, and no more data than its header said.
 */
#include "runtime/layer_stream.h"

struct seen {
  uint64_t data_left;
};

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_lstream: %s\n", what);
    abort();
  }
}

static int on_meta(void *arg, const char *json, size_t len, wr_error_t *err) {
  (void)arg;
  (void)err;
  check(len > 0 && len <= WR_LSTREAM_META_MAX && json != NULL, "meta");
  return 0;
}

static int on_record(void *arg, const struct wr_lstream_rec *r,
                     wr_error_t *err) {
  struct seen *s = arg;

  (void)err;
  check(s->data_left == 0, "a record inside a file's data");
  check(r->type == 'L' || wr_lstream_path_ok(r->path, strlen(r->path)),
        "a path that is not clean");
  check(r->uid < 65536 && r->gid < 65536, "ids");
  check((r->mode & ~07777u) == 0, "mode");
  check(r->type == 'f' || r->data_len == 0, "data on a non-file");
  s->data_left = r->data_len;
  return 0;
}

static int on_data(void *arg, const void *buf, size_t len, wr_error_t *err) {
  struct seen *s = arg;

  (void)buf;
  (void)err;
  check(len > 0 && len <= s->data_left, "more data than declared");
  s->data_left -= len;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const struct wr_lstream_ops ops = {on_meta, on_record, on_data};
  struct seen s = {0};
  struct wr_lstream_dec d;
  size_t piece, off = 1;
  wr_error_t err;

  if (size < 1)
    return 0;
  piece = (size_t)data[0] % 64 + 1;
  wr_lstream_dec_init(&d, &ops, &s);
  while (off < size) {
    size_t n = size - off < piece ? size - off : piece;
    if (wr_lstream_feed(&d, data + off, n, &err) < 0)
      break;
    off += n;
  }
  wr_lstream_finish(&d, &err);
  wr_lstream_dec_free(&d);
  return 0;
}
