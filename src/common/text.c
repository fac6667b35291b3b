/*
 * Text from outside on its way to a terminal: UTF-8 decoding and the one
 * rule for which characters a terminal could obey instead of showing.
 *
 * A file name made in a sandbox, a label set by an API client or a host
 * name a sandbox connected to may carry escape sequences that move the
 * cursor, retitle the window or hide lines. The CLI shows such strings
 * quoted (src/cli/output.c); this file decides what needs it.
 */
#include "common.h"

size_t wr_utf8_seq(const char *s, size_t left) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n;
  uint32_t cp;

  if (left == 0)
    return 0;
  if (p[0] < 0x80)
    return 1;
  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    n = 2, cp = p[0] & 0x1f;
  else if (p[0] >= 0xe0 && p[0] <= 0xef)
    n = 3, cp = p[0] & 0x0f;
  else if (p[0] >= 0xf0 && p[0] <= 0xf4)
    n = 4, cp = p[0] & 0x07;
  else
    return 0;
  if (left < n)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

/* The code point of a valid sequence of n bytes. */
static uint32_t code_point(const unsigned char *p, size_t n) {
  static const unsigned char lead_mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  uint32_t cp = p[0] & lead_mask[n];

  for (size_t i = 1; i < n; i++)
    cp = (cp << 6) | (p[i] & 0x3f);
  return cp;
}

/* C1 controls (some terminals obey U+009B as CSI) and the invisible
 * marks that reorder or hide text (bidi overrides and isolates, the
 * "Trojan Source" characters). */
static bool control_point(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
         cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

size_t wr_text_unit(const char *s, size_t left, bool *unsafe) {
  unsigned char c = (unsigned char)s[0];
  size_t n = wr_utf8_seq(s, left);

  if (n == 0) { /* one byte that is not UTF-8 */
    *unsafe = true;
    return 1;
  }
  if (n == 1)
    *unsafe = c < 0x20 || c == 0x7f;
  else
    *unsafe = control_point(code_point((const unsigned char *)s, n));
  return n;
}

bool wr_text_is_safe(const char *s) {
  size_t left = strlen(s);
  bool unsafe = false;

  while (left > 0 && !unsafe) {
    size_t n = wr_text_unit(s, left, &unsafe);
    s += n;
    left -= n;
  }
  return !unsafe;
}
