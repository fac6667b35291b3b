/*
 * pack_bomb: git packs that are tiny but expand to a lot, for the bounded
 * fetch tests (tests/security/47-git-fetch.sh). A sandbox that controls
 * its own git can hand any such pack to the host in a bundle.
 *
 *   pack_bomb PARENT IDFILE delta SIZE
 *       one blob of SIZE zero bytes, made by a chain of deltas from a
 *       16-byte blob (the pack is under a KiB for a GiB)
 *   pack_bomb PARENT IDFILE many COUNT SIZE
 *       COUNT different blobs of SIZE bytes each, deltas on one 16 MiB
 *       blob of zeros
 *
 * The pack also holds a commit on PARENT (a commit id in hex) whose tree
 * has one small file, so that a fetch of it is a fetch of new work; its
 * id goes into IDFILE, for the bundle's header. SIZE takes k, m and g.
 * The pack (version 2, SHA-1) goes to stdout. Every object is valid: git
 * index-pack --strict takes the pack if it is given the memory and time
 * to expand it. Data is stored in zlib's "stored" blocks, so no zlib is
 * needed here; the deltas are small anyway.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- SHA-1, for the pack's trailer -------------------------------------- */

struct sha1 {
  uint32_t h[5];
  uint64_t len;
  unsigned char block[64];
  size_t used;
};

static uint32_t rol(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

static void sha1_block(struct sha1 *s, const unsigned char *p) {
  uint32_t w[80], a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3],
                  e = s->h[4];

  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 80; i++)
    w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  for (int i = 0; i < 80; i++) {
    uint32_t f, k, t;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5a827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ed9eba1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;
      k = 0xca62c1d6;
    }
    t = rol(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rol(b, 30);
    b = a;
    a = t;
  }
  s->h[0] += a;
  s->h[1] += b;
  s->h[2] += c;
  s->h[3] += d;
  s->h[4] += e;
}

static void sha1_init(struct sha1 *s) {
  static const uint32_t h0[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476,
                                 0xc3d2e1f0};
  memset(s, 0, sizeof(*s));
  memcpy(s->h, h0, sizeof(h0));
}

static void sha1_update(struct sha1 *s, const void *data, size_t n) {
  const unsigned char *p = data;

  s->len += n;
  while (n > 0) {
    size_t take = 64 - s->used < n ? 64 - s->used : n;
    memcpy(s->block + s->used, p, take);
    s->used += take;
    p += take;
    n -= take;
    if (s->used == 64) {
      sha1_block(s, s->block);
      s->used = 0;
    }
  }
}

static void sha1_final(struct sha1 *s, unsigned char out[20]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0, len[8];

  sha1_update(s, &pad, 1);
  while (s->used != 56)
    sha1_update(s, &zero, 1);
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha1_update(s, len, 8);
  for (int i = 0; i < 20; i++)
    out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

/* ---- output: everything written is hashed, and its offset known -------- */

static struct sha1 pack_hash;
static uint64_t pack_offset;

static void put(const void *data, size_t n) {
  if (fwrite(data, 1, n, stdout) != n) {
    perror("pack_bomb: write");
    exit(1);
  }
  sha1_update(&pack_hash, data, n);
  pack_offset += n;
}

static void put_be32(uint32_t v) {
  unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 8), (unsigned char)v};
  put(b, 4);
}

/* A growable byte string, for delta data before it is stored. */
struct bytes {
  unsigned char *p;
  size_t len, cap;
};

static void add(struct bytes *b, const void *data, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2;
    b->p = realloc(b->p, b->cap);
    if (b->p == NULL)
      exit(1);
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
}

static void add_byte(struct bytes *b, unsigned char c) {
  add(b, &c, 1);
}

static void add_varint(struct bytes *b, uint64_t v) {
  while (v >= 0x80) {
    add_byte(b, (unsigned char)(v | 0x80));
    v >>= 7;
  }
  add_byte(b, (unsigned char)v);
}

/* A zlib stream of stored blocks (no compression) around data. */
static void put_zlib_stored(const unsigned char *data, size_t n) {
  static const unsigned char head[2] = {0x78, 0x01};
  uint32_t a = 1, b = 0;
  size_t off = 0;

  put(head, 2);
  do {
    size_t take = n - off > 65535 ? 65535 : n - off;
    unsigned char blk[5] = {off + take == n, (unsigned char)take,
                            (unsigned char)(take >> 8), (unsigned char)~take,
                            (unsigned char)(~take >> 8)};
    put(blk, 5);
    put(data + off, take);
    off += take;
  } while (off < n);
  for (size_t i = 0; i < n; i++) {
    a = (a + data[i]) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(b << 16 | a);
}

/* An entry's header: type and inflated size. */
static void put_entry_header(int type, uint64_t size) {
  unsigned char c = (unsigned char)(type << 4 | (size & 15));

  size >>= 4;
  while (size > 0) {
    c |= 0x80;
    put(&c, 1);
    c = size & 0x7f;
    size >>= 7;
  }
  put(&c, 1);
}

/* The distance back to the base, as git encodes it. */
static void put_ofs(uint64_t ofs) {
  unsigned char b[16];
  size_t pos = sizeof(b) - 1;

  b[pos] = ofs & 127;
  while (ofs >>= 7)
    b[--pos] = (unsigned char)(128 | (--ofs & 127));
  put(b + pos, sizeof(b) - pos);
}

/* ---- objects ------------------------------------------------------------ */

enum { OBJ_COMMIT = 1, OBJ_TREE = 2, OBJ_BLOB = 3, OBJ_OFS_DELTA = 6 };

/* Copy len (1..0xffffff) bytes from offset 0 of the base. */
static void add_copy(struct bytes *d, uint32_t len) {
  unsigned char cmd = 0x80, sz[3];
  size_t n = 0;

  if (len != 0x10000)
    for (int i = 0; i < 3; i++)
      if ((len >> (8 * i)) & 0xff) {
        cmd |= (unsigned char)(0x10 << i);
        sz[n++] = (unsigned char)(len >> (8 * i));
      }
  add_byte(d, cmd);
  add(d, sz, n);
}

/* A whole object with its git id (the hash of "TYPE SIZE\0DATA"). */
static void put_object(int type, const char *name, const void *data, size_t n,
                       unsigned char id[20]) {
  struct sha1 h;
  char head[64];
  int hn = snprintf(head, sizeof(head), "%s %zu", name, n);

  sha1_init(&h);
  sha1_update(&h, head, (size_t)hn + 1);
  sha1_update(&h, data, n);
  sha1_final(&h, id);
  put_entry_header(type, n);
  put_zlib_stored(data, n);
}

/* A commit on parent with a tree of one file; its id in hex into idfile. */
static void put_commit(const char *parent, const char *idfile) {
  static const char readme[] = "bomb\n";
  unsigned char blob[20], tree[20], commit[20];
  char entries[64], text[512], hex[41];
  size_t n = (size_t)snprintf(entries, sizeof(entries), "100644 BOMB.md") + 1;
  FILE *f;

  put_object(OBJ_BLOB, "blob", readme, sizeof(readme) - 1, blob);
  memcpy(entries + n, blob, 20);
  put_object(OBJ_TREE, "tree", entries, n + 20, tree);
  for (int i = 0; i < 20; i++)
    snprintf(hex + 2 * i, 3, "%02x", tree[i]);
  n = (size_t)snprintf(text, sizeof(text),
                       "tree %s\nparent %s\n"
                       "author a <a@b> 1700000000 +0000\n"
                       "committer a <a@b> 1700000000 +0000\n"
                       "\nbomb\n",
                       hex, parent);
  put_object(OBJ_COMMIT, "commit", text, n, commit);
  for (int i = 0; i < 20; i++)
    snprintf(hex + 2 * i, 3, "%02x", commit[i]);
  f = fopen(idfile, "w");
  if (f == NULL || fprintf(f, "%s\n", hex) < 0 || fclose(f) != 0) {
    perror("pack_bomb: write the commit's id");
    exit(1);
  }
}

/* Returns the entry's offset. */
static uint64_t put_blob(size_t size) {
  uint64_t at = pack_offset;
  unsigned char *zeros = calloc(1, size ? size : 1);

  put_entry_header(OBJ_BLOB, size);
  put_zlib_stored(zeros, size);
  free(zeros);
  return at;
}

/* An object of target bytes: `prefix` then zeros copied from a base of
 * base_size zero bytes at base_at. Returns the entry's offset. */
static uint64_t put_delta(uint64_t base_at, uint64_t base_size, uint64_t target,
                          const char *prefix) {
  uint64_t at = pack_offset, left = target, chunk;
  struct bytes d = {0};
  size_t plen = prefix ? strlen(prefix) : 0;

  add_varint(&d, base_size);
  add_varint(&d, target);
  if (plen > 0) {
    add_byte(&d, (unsigned char)plen);
    add(&d, prefix, plen);
    left -= plen;
  }
  /* The largest copy that takes one size byte (two bytes in all). */
  chunk = base_size < 0xff0000 ? base_size : 0xff0000;
  while (left > 0) {
    uint64_t n = left < chunk ? left : chunk;
    add_copy(&d, (uint32_t)n);
    left -= n;
  }
  put_entry_header(OBJ_OFS_DELTA, d.len);
  put_ofs(at - base_at);
  put_zlib_stored(d.p, d.len);
  free(d.p);
  return at;
}

static uint64_t parse_size(const char *s) {
  char *end;
  uint64_t v;

  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || end == s)
    goto bad;
  switch (*end) {
  case 'g':
    v <<= 10; /* fall through */
  case 'm':
    v <<= 10; /* fall through */
  case 'k':
    v <<= 10;
    end++;
  }
  if (*end == '\0')
    return v;
bad:
  fprintf(stderr, "pack_bomb: bad size `%s`\n", s);
  exit(2);
}

/* 16 bytes of zeros, then 256 B, 4 KiB, 64 KiB, 1 MiB and 16 MiB made
 * by deltas that copy the one before 16 times; returns the last one's
 * offset. */
static uint64_t put_ladder(void) {
  uint64_t at = put_blob(16), size = 16;

  for (; size < 16 << 20; size *= 16)
    at = put_delta(at, size, size * 16, NULL);
  return at;
}

int main(int argc, char **argv) {
  unsigned char trailer[20];
  uint64_t count = 1, size, top;
  bool many;

  if (argc == 5 && strcmp(argv[3], "delta") == 0) {
    many = false;
    size = parse_size(argv[4]);
  } else if (argc == 6 && strcmp(argv[3], "many") == 0) {
    many = true;
    count = parse_size(argv[4]);
    size = parse_size(argv[5]);
  } else {
    fprintf(stderr, "usage: pack_bomb PARENT IDFILE delta SIZE | "
                    "PARENT IDFILE many COUNT SIZE\n");
    return 2;
  }
  if (strlen(argv[1]) != 40 || strspn(argv[1], "0123456789abcdef") != 40) {
    fprintf(stderr, "pack_bomb: PARENT must be a commit id in hex\n");
    return 2;
  }
  if (size < 32 || count == 0 || count > 100000) {
    fprintf(stderr, "pack_bomb: SIZE must be at least 32, COUNT 1..100000\n");
    return 2;
  }
  sha1_init(&pack_hash);
  put("PACK", 4);
  put_be32(2);
  put_be32((uint32_t)(3 + 6 + count));
  put_commit(argv[1], argv[2]);
  top = put_ladder();
  for (uint64_t i = 0; i < count; i++) {
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "warren bomb %llu\n",
             (unsigned long long)i);
    put_delta(top, 16 << 20, size, many ? prefix : NULL);
  }
  sha1_final(&pack_hash, trailer);
  if (fwrite(trailer, 1, 20, stdout) != 20 || fflush(stdout) != 0) {
    perror("pack_bomb: write");
    return 1;
  }
  return 0;
}
