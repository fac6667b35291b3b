/* Base64 (standard alphabet, padded) through OpenSSL's EVP codec. */
#include "common.h"

#include <openssl/evp.h>

char *wr_base64_encode(const void *data, size_t len) {
  char *out = xmalloc(4 * ((len + 2) / 3) + 1);

  EVP_EncodeBlock((unsigned char *)out, data, (int)len);
  return out;
}

/* EVP_DecodeBlock decodes whole groups and counts padding as zero bytes;
 * the padding is checked and subtracted here. */
int wr_base64_decode(const char *in, size_t len, wr_buf_t *out,
                     wr_error_t *err) {
  size_t pad = 0;
  int n;

  if (len % 4 != 0 || len > INT32_MAX)
    return wr_error_set(err, 0, "invalid base64 data (length %zu)", len);
  if (len == 0)
    return 0;
  pad = (in[len - 1] == '=') + (in[len - 1] == '=' && in[len - 2] == '=');
  wr_buf_reserve(out, len / 4 * 3);
  n = EVP_DecodeBlock((unsigned char *)out->data + out->len,
                      (const unsigned char *)in, (int)len);
  if (n < 0 || (size_t)n < pad || memchr(in, '=', len - pad) != NULL)
    return wr_error_set(err, 0, "invalid base64 data");
  out->len += (size_t)n - pad;
  out->data[out->len] = '\0';
  return 0;
}
