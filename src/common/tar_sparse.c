/*
 * Sparse files for the tar code: maps from SEEK_DATA / SEEK_HOLE, and
 * GNU tar's PAX 1.0 map text both ways (see tar_sparse.h).
 *
 * The point is the host's disk and the sandbox's: a file of a terabyte of
 * holes is a few blocks of archive and a few blocks when extracted, never
 * a terabyte of zeros. The map an archive brings is bounded and checked
 * here so that the extractor only ever writes inside the size it declared.
 */
#include "common/common.h"
#include "common/tar_sparse.h"

#include <fcntl.h>

#define BLOCK 512
#define FIRST_MIN_GAP 65536u

void wr_sparse_free(struct wr_sparse *sp) {
  free(sp->v);
  memset(sp, 0, sizeof(*sp));
}

static void push(struct wr_sparse *sp, uint64_t off, uint64_t len) {
  if (sp->n == sp->cap) {
    sp->cap = sp->cap ? sp->cap * 2 : 16;
    sp->v = xrealloc(sp->v, sp->cap * sizeof(*sp->v));
  }
  sp->v[sp->n++] = (struct wr_sparse_seg){off, len};
}

/* Merge, in place, every hole shorter than min_gap into the data around
 * it. */
static void merge_small_holes(struct wr_sparse *sp) {
  size_t j = 0;

  for (size_t i = 1; i < sp->n; i++) {
    struct wr_sparse_seg *last = &sp->v[j];
    uint64_t gap = sp->v[i].off - (last->off + last->len);

    if (gap < sp->min_gap)
      last->len = sp->v[i].off + sp->v[i].len - last->off;
    else
      sp->v[++j] = sp->v[i];
  }
  sp->n = sp->n > 0 ? j + 1 : 0;
}

/* The map is full: double the smallest hole worth keeping until half of
 * the room is free again. Ends, since a hole as long as the file merges
 * everything into one segment. */
static void coarsen(struct wr_sparse *sp) {
  do {
    if (sp->min_gap == 0)
      sp->min_gap = FIRST_MIN_GAP;
    else
      sp->min_gap = sp->min_gap > UINT64_MAX / 2 ? UINT64_MAX : sp->min_gap * 2;
    merge_small_holes(sp);
  } while (sp->n > WR_SPARSE_MAX / 2);
}

/* A data region found by the scan, after the ones before it. */
static void scan_add(struct wr_sparse *sp, uint64_t off, uint64_t len) {
  if (sp->n > 0) {
    struct wr_sparse_seg *last = &sp->v[sp->n - 1];

    if (off - (last->off + last->len) < sp->min_gap) {
      last->len = off + len - last->off;
      return;
    }
  }
  if (sp->n == WR_SPARSE_MAX) {
    coarsen(sp);
    scan_add(sp, off, len);
    return;
  }
  push(sp, off, len);
}

/* The next data region at or after off: *start == size when none. */
static int next_data(int fd, uint64_t off, uint64_t size, uint64_t *start,
                     uint64_t *end, wr_error_t *err) {
  off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;

  *start = *end = size;
  if (d < 0 && errno == ENXIO)
    return 0; /* nothing but a hole up to the end */
  if (d < 0 && errno == EINVAL) {
    *start = off; /* no way to tell: all data */
    return 0;
  }
  if (d < 0)
    return wr_error_set(err, errno, "look for data");
  if ((uint64_t)d >= size)
    return 0;
  h = lseek(fd, d, SEEK_HOLE);
  if (h < 0)
    return wr_error_set(err, errno, "look for a hole");
  *start = (uint64_t)d;
  *end = WR_MIN((uint64_t)h, size);
  return 0;
}

int wr_sparse_scan(int fd, uint64_t size, struct wr_sparse *sp,
                   wr_error_t *err) {
  uint64_t off = 0;

  memset(sp, 0, sizeof(*sp));
  sp->realsize = size;
  while (off < size) {
    uint64_t start, end;

    if (next_data(fd, off, size, &start, &end, err) < 0) {
      wr_sparse_free(sp);
      return -1;
    }
    if (start >= size)
      break;
    if (end <= start) /* a file changing under us: the rest is data */
      end = size;
    scan_add(sp, start, end - start);
    off = end;
  }
  for (size_t i = 0; i < sp->n; i++)
    sp->data += sp->v[i].len;
  return 0;
}

int wr_sparse_add(struct wr_sparse *sp, uint64_t off, uint64_t len,
                  wr_error_t *err) {
  if (sp->n >= WR_SPARSE_MAX)
    return wr_error_setx(err, EINVAL, "sparse map has more than %d segments",
                         WR_SPARSE_MAX);
  if (len > UINT64_MAX - sp->data)
    return wr_error_setx(err, EINVAL, "sparse map holds too much data");
  push(sp, off, len);
  sp->data += len;
  return 0;
}

int wr_sparse_check(const struct wr_sparse *sp, uint64_t stored,
                    wr_error_t *err) {
  uint64_t end = 0;

  if (sp->realsize > (uint64_t)INT64_MAX)
    return wr_error_setx(err, EINVAL, "sparse file size %llu is too large",
                         (unsigned long long)sp->realsize);
  for (size_t i = 0; i < sp->n; i++) {
    const struct wr_sparse_seg *s = &sp->v[i];

    if (s->off < end)
      return wr_error_setx(err, EINVAL,
                           "sparse map segments overlap or are out of "
                           "order (at offset %llu)",
                           (unsigned long long)s->off);
    if (s->off > sp->realsize || s->len > sp->realsize - s->off)
      return wr_error_setx(err, EINVAL,
                           "sparse map goes past the file's size %llu",
                           (unsigned long long)sp->realsize);
    end = s->off + s->len;
  }
  if (sp->data != stored)
    return wr_error_setx(err, EINVAL,
                         "sparse map claims %llu bytes of data, the entry "
                         "holds %llu",
                         (unsigned long long)sp->data,
                         (unsigned long long)stored);
  return 0;
}

void wr_sparse_map_text(const struct wr_sparse *sp, wr_buf_t *out) {
  static const char zeros[BLOCK];
  bool tail =
      sp->n == 0 || sp->v[sp->n - 1].off + sp->v[sp->n - 1].len < sp->realsize;
  size_t start = out->len;

  wr_buf_printf(out, "%zu\n", sp->n + (tail ? 1 : 0));
  for (size_t i = 0; i < sp->n; i++)
    wr_buf_printf(out, "%llu\n%llu\n", (unsigned long long)sp->v[i].off,
                  (unsigned long long)sp->v[i].len);
  if (tail)
    wr_buf_printf(out, "%llu\n0\n", (unsigned long long)sp->realsize);
  wr_buf_append(out, zeros, (BLOCK - (out->len - start) % BLOCK) % BLOCK);
}

/* A number of the map is complete: 1 when it was the last one. */
static int parse_number(struct wr_sparse_parser *p, struct wr_sparse *sp,
                        wr_error_t *err) {
  uint64_t v = p->value;

  p->value = 0;
  p->digits = 0;
  if (!p->have_count) {
    if (v > WR_SPARSE_MAX)
      return wr_error_setx(err, EINVAL,
                           "sparse map of %llu segments (at most %d)",
                           (unsigned long long)v, WR_SPARSE_MAX);
    p->have_count = true;
    p->count = v;
    return p->count == 0 ? 1 : 0;
  }
  if (p->got++ % 2 == 0) {
    p->off = v;
    return 0;
  }
  if (wr_sparse_add(sp, p->off, v, err) < 0)
    return -1;
  return p->got == 2 * p->count ? 1 : 0;
}

int wr_sparse_parse(struct wr_sparse_parser *p, struct wr_sparse *sp,
                    const char *data, size_t len, wr_error_t *err) {
  for (size_t i = 0; i < len; i++) {
    char ch = data[i];
    int r;

    if (ch >= '0' && ch <= '9') {
      if (p->digits == 20 || p->value > (UINT64_MAX - 9) / 10)
        return wr_error_setx(err, EINVAL, "sparse map number too large");
      p->value = p->value * 10 + (uint64_t)(ch - '0');
      p->digits++;
      continue;
    }
    if (ch != '\n' || p->digits == 0)
      return wr_error_setx(err, EINVAL, "malformed sparse map");
    r = parse_number(p, sp, err);
    if (r != 0)
      return r;
  }
  return 0;
}
