/*
 * tar_sparse: the holes of sparse files, for src/common/tar.c (internal to
 * the common module).
 *
 * A sparse file is described by a map: the stretches of data it holds, in
 * order, everything between them being a hole that reads as zeros and
 * takes no disk. The writer learns the map from the file itself
 * (SEEK_DATA / SEEK_HOLE); the reader gets it from an archive, where it
 * is hostile input, bounded (WR_SPARSE_MAX segments) and checked before a
 * byte is written.
 *
 * The archive form is GNU tar's PAX sparse format 1.0: the map as decimal
 * text at the start of the entry's data, "COUNT\n" then "OFFSET\nLENGTH\n"
 * per segment, padded with NULs to a 512-byte block, followed by the
 * segments' data back to back.
 */
#ifndef WR_TAR_SPARSE_H
#define WR_TAR_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"

/* Segments a map may hold, read or written: 1 MiB of memory. A file with
 * more holes is archived with its smallest holes stored as zeros. */
#define WR_SPARSE_MAX 65536

struct wr_sparse_seg {
  uint64_t off, len;
};

struct wr_sparse {
  struct wr_sparse_seg *v;
  size_t n, cap;
  uint64_t realsize; /* the file's apparent size */
  uint64_t data;     /* the sum of the segments' lengths */
  uint64_t min_gap;  /* scan: holes shorter than this are kept as data */
};

void wr_sparse_free(struct wr_sparse *sp);

/*
 * The data regions of the first `size` bytes of fd, by SEEK_DATA and
 * SEEK_HOLE, into a fresh map whose realsize is `size`. A file whose
 * filesystem cannot tell is all data. Past WR_SPARSE_MAX segments the
 * smallest holes are merged into the data around them, so the map stays
 * bounded whatever the file looks like. sp->data < size means the file
 * has holes worth keeping.
 */
int wr_sparse_scan(int fd, uint64_t size, struct wr_sparse *sp,
                   wr_error_t *err);

/* Append a segment read from an archive; more than WR_SPARSE_MAX is an
 * error. Order and bounds are checked by wr_sparse_check. */
int wr_sparse_add(struct wr_sparse *sp, uint64_t off, uint64_t len,
                  wr_error_t *err);

/*
 * A map from an archive, against the entry it came with: realsize fits an
 * off_t, segments are in order and do not overlap, none goes past
 * realsize, and together they hold exactly `stored` bytes, the data the
 * entry carries.
 */
int wr_sparse_check(const struct wr_sparse *sp, uint64_t stored,
                    wr_error_t *err);

/* The map as PAX 1.0 text, padded to whole blocks, appended to out. Like
 * GNU tar, a map whose last segment stops short of realsize ends with an
 * empty segment at realsize. */
void wr_sparse_map_text(const struct wr_sparse *sp, wr_buf_t *out);

/* Reads PAX 1.0 map text, a block at a time. Zero-initialise. */
struct wr_sparse_parser {
  bool have_count;
  uint64_t count;  /* segments announced */
  uint64_t got;    /* numbers read after the count */
  uint64_t off;    /* the offset of the segment being read */
  uint64_t value;  /* the number being read */
  unsigned digits; /* its digits so far */
};

/* Feed the next block of map text: 1 once the map is complete (what is
 * left of the block is padding), 0 when more is needed. Segments go to
 * sp with wr_sparse_add. */
int wr_sparse_parse(struct wr_sparse_parser *p, struct wr_sparse *sp,
                    const char *data, size_t len, wr_error_t *err);

#endif
