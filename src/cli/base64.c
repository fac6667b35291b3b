/*
 * Base64 decoding for the output events of the NDJSON streams. The data
 * comes from the daemon, so malformed input is an error, not a crash.
 */
#include "cli/cli.h"

/* Value of one base64 digit, or -1. */
static int digit(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

/* Decode one group of 4 characters, of which the last `pad` are '='. */
static int decode_group(const char *in, size_t pad, wr_buf_t *out) {
  unsigned char bytes[3];
  uint32_t v = 0;

  for (size_t i = 0; i < 4; i++) {
    int d = i < 4 - pad ? digit((unsigned char)in[i]) : 0;
    if (d < 0 || (i >= 4 - pad && in[i] != '='))
      return -1;
    v = v << 6 | (uint32_t)d;
  }
  bytes[0] = (unsigned char)(v >> 16);
  bytes[1] = (unsigned char)(v >> 8);
  bytes[2] = (unsigned char)v;
  wr_buf_append(out, bytes, 3 - pad);
  return 0;
}

/* Padding is only allowed in the last group, so every group but the last
 * must decode to three bytes. */
int wr_cli_base64_decode(const char *in, size_t len, wr_buf_t *out,
                         wr_error_t *err) {
  if (len % 4 != 0)
    return wr_error_set(err, 0, "invalid base64 data (length %zu)", len);
  wr_buf_reserve(out, len / 4 * 3);
  for (size_t i = 0; i < len; i += 4) {
    size_t pad = 0;
    if (i + 4 == len)
      pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
    if (decode_group(in + i, pad, out) < 0)
      return wr_error_set(err, 0, "invalid base64 data");
  }
  return 0;
}
