/*
 * What a git pack from a sandbox expands to, read before the host's git
 * sees it.
 *
 * A pack entry's bytes are zlib data, and a delta's data says how large
 * its result is before a single instruction runs: so a pack of a few
 * hundred bytes can hold an object of a gigabyte (a delta that copies its
 * base a thousand times, on a base that is itself such a delta), which
 * `git index-pack` would allocate and hash in full. This walk reads every
 * entry's header and inflates its data into a small scratch buffer (the
 * only way to find where the next entry starts), so it needs constant
 * memory; it stops at the first object over the limit, or once the
 * objects together pass theirs, before anything has been allocated for
 * them.
 *
 * The sizes read here are the ones git then verifies: index-pack refuses
 * an entry whose data inflates to another length than its header gives,
 * and a delta whose result is not the size its header announces. Where
 * this reading could differ from git's (a varint that overflows, a delta
 * header cut short, junk after the trailer), the pack is refused, never
 * read more generously than git reads it.
 *
 * Format (Documentation/gitformat-pack.txt): "PACK", version 2 or 3,
 * count (32-bit big-endian); per entry a type and size varint, for an
 * OFS_DELTA a base distance, for a REF_DELTA a base id, then zlib data;
 * the pack's hash at the end. A delta's data starts with two varints:
 * the base's size and the result's.
 */
#include "gitremote/gitremote.h"

#include <zlib.h>

#define CHUNK 65536
/* A delta's two size varints fit in this many bytes (10 each at most). */
#define DELTA_HEAD_MAX 20

enum {
  OBJ_COMMIT = 1,
  OBJ_TREE = 2,
  OBJ_BLOB = 3,
  OBJ_TAG = 4,
  OBJ_OFS_DELTA = 6,
  OBJ_REF_DELTA = 7,
};

struct scanner {
  struct wr_pack_scan *s;
  wr_pack_read_fn read;
  void *ctx;
  unsigned char in[CHUNK];
  size_t pos, len;
  uint64_t base; /* the pack offset of in[0] */
  bool eof;
};

static int bad(struct scanner *x, wr_error_t *err, const char *what) {
  x->s->refused = WR_PACK_MALFORMED;
  return wr_error_set(err, 0, "the pack is malformed: %s (at byte %llu)", what,
                      (unsigned long long)(x->base + x->pos));
}

static int past_deadline(struct scanner *x, wr_error_t *err) {
  if (x->s->deadline_ns == 0 || wr_mono_ns() < x->s->deadline_ns)
    return 0;
  x->s->refused = WR_PACK_TIMEOUT;
  return wr_error_set(err, 0, "reading the pack took too long");
}

/* More input when all is used: 0 when there is some, 1 at the end. */
static int refill(struct scanner *x, wr_error_t *err) {
  ssize_t n;

  if (x->pos < x->len)
    return 0;
  if (x->eof)
    return 1;
  if (past_deadline(x, err) < 0)
    return -1;
  do
    n = x->read(x->ctx, x->in, sizeof(x->in));
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    x->s->refused = WR_PACK_IO;
    return wr_error_set(err, errno, "read the pack");
  }
  x->base += x->len;
  x->pos = 0;
  x->len = (size_t)n;
  x->eof = n == 0;
  return x->eof ? 1 : 0;
}

static int next_byte(struct scanner *x, unsigned char *c, wr_error_t *err) {
  int r = refill(x, err);

  if (r != 0)
    return r < 0 ? -1 : bad(x, err, "it is cut short");
  *c = x->in[x->pos++];
  return 0;
}

/* Add 7 bits at shift to *v; false when they do not fit in 64 bits. */
static bool varint_add(uint64_t *v, unsigned bits, unsigned shift) {
  if (shift >= 64 || (shift > 57 && (bits >> (64 - shift)) != 0))
    return false;
  *v |= (uint64_t)bits << shift;
  return true;
}

/* An entry's type and size, and its base's distance or id. */
static int entry_header(struct scanner *x, uint64_t at, int *type,
                        uint64_t *size, wr_error_t *err) {
  unsigned char c;
  unsigned shift = 4;
  uint64_t ofs;

  if (next_byte(x, &c, err) < 0)
    return -1;
  *type = (c >> 4) & 7;
  *size = c & 15;
  while (c & 0x80) {
    if (next_byte(x, &c, err) < 0)
      return -1;
    if (!varint_add(size, c & 0x7f, shift))
      return bad(x, err, "an entry's size overflows");
    shift += 7;
  }
  switch (*type) {
  case OBJ_COMMIT:
  case OBJ_TREE:
  case OBJ_BLOB:
  case OBJ_TAG:
    return 0;
  case OBJ_REF_DELTA:
    for (size_t i = 0; i < x->s->oid_len; i++)
      if (next_byte(x, &c, err) < 0)
        return -1;
    return 0;
  case OBJ_OFS_DELTA:
    /* As git reads it: each continuation adds one before the shift. */
    if (next_byte(x, &c, err) < 0)
      return -1;
    ofs = c & 127;
    while (c & 128) {
      if (++ofs == 0 || (ofs >> 57) != 0)
        return bad(x, err, "a delta's base offset overflows");
      if (next_byte(x, &c, err) < 0)
        return -1;
      ofs = (ofs << 7) + (c & 127);
    }
    if (ofs == 0 || ofs >= at)
      return bad(x, err, "a delta's base is outside the pack");
    return 0;
  default:
    return bad(x, err, "an entry has an unknown type");
  }
}

static int account(struct scanner *x, uint64_t object, uint64_t extra,
                   wr_error_t *err) {
  struct wr_pack_scan *s = x->s;

  s->largest = WR_MAX(s->largest, object);
  if (object > s->max_object) {
    s->refused = WR_PACK_OBJECT_LIMIT;
    return wr_error_set(err, 0, "an object in the pack is too large");
  }
  if (object + extra < object || s->total + object + extra < s->total ||
      s->total + object + extra > s->max_total) {
    s->total = s->max_total + 1;
    s->refused = WR_PACK_TOTAL_LIMIT;
    return wr_error_set(err, 0, "the objects in the pack are too large");
  }
  s->total += object + extra;
  return 0;
}

/* One step of inflate on what input there is; *done at the stream's end. */
static int inflate_step(struct scanner *x, z_stream *z, unsigned char *out,
                        size_t out_len, bool *done, wr_error_t *err) {
  int r = refill(x, err), ret;
  size_t before = x->len - x->pos;

  if (r != 0)
    return r < 0 ? -1 : bad(x, err, "it is cut short inside an entry's data");
  z->next_in = x->in + x->pos;
  z->avail_in = (uInt)before;
  z->next_out = out;
  z->avail_out = (uInt)out_len;
  ret = inflate(z, Z_NO_FLUSH);
  x->pos += before - z->avail_in;
  *done = ret == Z_STREAM_END;
  if (ret == Z_OK || ret == Z_STREAM_END ||
      (ret == Z_BUF_ERROR && z->avail_in == 0))
    return 0;
  return bad(x, err, "an entry's zlib data is corrupt");
}

/* Inflate an entry's data (which must come to exactly size bytes) into a
 * scratch buffer; the first bytes are kept in head. */
static int inflate_entry(struct scanner *x, uint64_t size, unsigned char *head,
                         size_t *head_len, wr_error_t *err) {
  _cleanup_free_ unsigned char *out = xmalloc(CHUNK);
  z_stream z = {0};
  uint64_t produced = 0;
  bool done = false;
  int r = 0;

  if (inflateInit(&z) != Z_OK)
    return wr_error_set(err, ENOMEM, "zlib");
  while (!done && r == 0) {
    size_t n;
    if ((r = inflate_step(x, &z, out, CHUNK, &done, err)) < 0)
      break;
    n = CHUNK - z.avail_out;
    if (head != NULL && *head_len < DELTA_HEAD_MAX) {
      size_t take = WR_MIN(n, DELTA_HEAD_MAX - *head_len);
      memcpy(head + *head_len, out, take);
      *head_len += take;
    }
    produced += n;
    if (produced > size)
      r = bad(x, err, "an entry's data is longer than its header says");
    else if (!done)
      r = past_deadline(x, err);
  }
  inflateEnd(&z);
  if (r == 0 && produced != size)
    r = bad(x, err, "an entry's data is shorter than its header says");
  return r;
}

/* A delta's result size: its second varint (the first is the base's).
 * git reads a varint until the delta's data ends; one that runs into the
 * end is refused here. */
static int delta_target(struct scanner *x, const unsigned char *head,
                        size_t head_len, uint64_t *target, wr_error_t *err) {
  size_t i = 0;
  uint64_t v = 0;

  if (head_len < 4)
    return bad(x, err, "a delta is too short");
  for (int n = 0; n < 2; n++) {
    unsigned char c;
    unsigned shift = 0;
    v = 0;
    do {
      if (i == head_len)
        return bad(x, err, "a delta's header is cut short");
      c = head[i++];
      if (!varint_add(&v, c & 0x7f, shift))
        return bad(x, err, "a delta's size overflows");
      shift += 7;
    } while (c & 0x80);
  }
  *target = v;
  return 0;
}

static int scan_entry(struct scanner *x, wr_error_t *err) {
  unsigned char head[DELTA_HEAD_MAX];
  size_t head_len = 0;
  uint64_t at = x->base + x->pos, size, target = 0;
  int type;

  if (entry_header(x, at, &type, &size, err) < 0)
    return -1;
  if (type != OBJ_OFS_DELTA && type != OBJ_REF_DELTA)
    return account(x, size, 0, err) < 0
               ? -1
               : inflate_entry(x, size, NULL, NULL, err);
  /* The delta's own data is held in memory by git too. */
  if (size > x->s->max_object)
    return account(x, size, 0, err);
  if (inflate_entry(x, size, head, &head_len, err) < 0 ||
      delta_target(x, head, head_len, &target, err) < 0)
    return -1;
  return account(x, target, size, err);
}

static int pack_header(struct scanner *x, uint32_t *count, wr_error_t *err) {
  unsigned char h[12];
  uint32_t version;

  for (size_t i = 0; i < sizeof(h); i++)
    if (next_byte(x, &h[i], err) < 0)
      return -1;
  if (memcmp(h, "PACK", 4) != 0)
    return bad(x, err, "it does not start with PACK");
  version =
      (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
  if (version != 2 && version != 3)
    return bad(x, err, "its version is not 2 or 3");
  *count = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 |
           h[11];
  return 0;
}

/* The pack's hash, and nothing after it (index-pack refuses junk too). */
static int trailer(struct scanner *x, wr_error_t *err) {
  unsigned char c;
  int r;

  for (size_t i = 0; i < x->s->oid_len; i++)
    if (next_byte(x, &c, err) < 0)
      return -1;
  if ((r = refill(x, err)) < 0)
    return -1;
  return r == 1 ? 0 : bad(x, err, "it has junk after its end");
}

int wr_pack_scan(struct wr_pack_scan *s, wr_pack_read_fn read, void *ctx,
                 wr_error_t *err) {
  _cleanup_free_ struct scanner *x = xcalloc(1, sizeof(*x));
  uint32_t count = 0;

  x->s = s;
  x->read = read;
  x->ctx = ctx;
  s->refused = WR_PACK_OK;
  s->objects = 0;
  s->largest = 0;
  s->total = 0;
  if (s->oid_len != 20 && s->oid_len != 32)
    return bad(x, err, "unknown object id length");
  if (pack_header(x, &count, err) < 0)
    return -1;
  for (; s->objects < count; s->objects++)
    if (scan_entry(x, err) < 0)
      return -1;
  return trailer(x, err);
}
