/*
 * layer streams: a snapshot's layers as one stream, for export and
 * import (`warren snapshot export` / `import`). On the wire it is zstd
 * (with its content checksum) around the records below; the records are
 * parsed by wr_lstream_feed, a pure incremental decoder that the import
 * and the fuzz target (tests/fuzz/fuzz_lstream.c) share.
 *
 * Why not tar: a layer needs whiteouts (character devices 0/0), opaque
 * directories and other xattrs, and setuid bits, which warren's tar
 * reader refuses or drops on purpose (it extracts into live sandboxes).
 *
 * Format (integers little endian): the magic "WRLAYER1", a u32 length
 * and that many bytes of JSON metadata ({"image": NAME, "name": NAME,
 * "layers": N}), then records. A record is a 40-byte header, its path,
 * its link target, its xattrs and its data:
 *   u8 type, u8 flags (1: opaque directory), u16 path_len, u16 link_len,
 *   u16 xattr_len, u32 mode (07777), u32 uid, u32 gid, u32 mtime_nsec,
 *   i64 mtime_sec, u64 data_len
 * Types: 'L' a layer begins (the next applies over the ones before, as
 * overlayfs stacks them), 'd' directory, 'f' file (data_len bytes), 'l'
 * symlink (link = target), 'h' hard link (link = an earlier file's
 * path), 'p' FIFO, 'w' whiteout, 'E' the end (nothing may follow).
 * Paths are relative, clean (no "", ".", ".." component), at most 4095
 * bytes; a directory comes before what is in it. Xattrs are repeated
 * u8 name_len, name, u16 value_len, value; only user.*,
 * trusted.overlay.opaque and a v2 security.capability are allowed. Ids
 * are below 65536.
 */
#ifndef WR_RUNTIME_LAYER_STREAM_H
#define WR_RUNTIME_LAYER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define WR_LSTREAM_MAGIC "WRLAYER1"
#define WR_LSTREAM_META_MAX 65536
#define WR_LSTREAM_HDR 40
#define WR_LSTREAM_FILE_MAX (1ull << 40)

struct wr_lstream_rec {
  char type;
  bool opaque;
  uint32_t mode, uid, gid;
  int64_t mtime_sec;
  uint32_t mtime_nsec;
  uint64_t data_len;
  const char *path; /* NUL-terminated copies, valid during the callback */
  const char *link;
  const unsigned char *xattrs;
  size_t xattr_len;
};

struct wr_lstream_ops {
  /* The metadata (a JSON object, checked to parse). */
  int (*meta)(void *arg, const char *json, size_t len, wr_error_t *err);
  /* A record, before its data. */
  int (*record)(void *arg, const struct wr_lstream_rec *r, wr_error_t *err);
  /* A piece of the current file's data. */
  int (*data)(void *arg, const void *buf, size_t len, wr_error_t *err);
};

struct wr_lstream_dec {
  const struct wr_lstream_ops *ops;
  void *arg;
  int stage; /* see layer_stream.c */
  unsigned char *buf;
  size_t len, want;
  uint64_t data_left;
  struct wr_lstream_rec rec;
  unsigned layers;
  bool ended;
};

void wr_lstream_dec_init(struct wr_lstream_dec *d,
                         const struct wr_lstream_ops *ops, void *arg);
void wr_lstream_dec_free(struct wr_lstream_dec *d);
/* Feed decompressed bytes; -1 with err on a bad stream or a callback's
 * failure (the decoder is then done). */
int wr_lstream_feed(struct wr_lstream_dec *d, const void *data, size_t len,
                    wr_error_t *err);
/* The input ended: an error unless the end record was seen. */
int wr_lstream_finish(struct wr_lstream_dec *d, wr_error_t *err);
/* Whether path is a clean relative path as the format wants. */
bool wr_lstream_path_ok(const char *path, size_t len);

/* Write layers (oldest first) as a compressed stream to fd, with meta (a
 * JSON object's text). Blocks. */
int wr_lstream_export(const char *const *layers, size_t n, const char *meta,
                      int fd, wr_error_t *err);
/* Read a compressed stream from fd into the new directory dst (made),
 * stacking its layers into one; at most max_bytes of file data. *meta
 * gets the metadata's text (caller frees). On failure dst is removed. */
int wr_lstream_import(int fd, const char *dst, uint64_t max_bytes, char **meta,
                      wr_error_t *err);

#endif
