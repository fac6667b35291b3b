/*
 * Fuzz the reading of a CA file from the host's CA directory
 * (wr_trust_parse): any bytes at all. It must never crash or read past
 * the input; what it accepts must be certificates only, each re-encoded
 * by OpenSSL (so the PEM that goes into a sandbox parses again, as one
 * certificate of the same subject) with a one-line ASCII subject.
 */
#include "common/common.h"
#include "net/net.h"

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_trust: %s\n", what);
    abort();
  }
}

static void check_cert(const struct wr_trust_cert *c) {
  struct wr_trust_cert *again = NULL;
  size_t n = 0;
  wr_error_t err;

  for (const char *p = c->subject; *p != '\0'; p++)
    check((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
          "subject not printable ASCII");
  check(strstr(c->pem, "-----BEGIN CERTIFICATE-----\n") == c->pem,
        "pem does not start with a certificate");
  /* Far in the past, so that what parsed once cannot expire now. */
  check(wr_trust_parse(c->pem, strlen(c->pem), 0, &again, &n, &err) == 0,
        "re-encoded pem does not parse");
  check(n == 1 && strcmp(again[0].subject, c->subject) == 0,
        "re-encoded pem is another certificate");
  wr_trust_certs_free(again, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  _cleanup_free_ char *copy = xmalloc(len ? len : 1);
  struct wr_trust_cert *certs = NULL;
  size_t n = 0;
  wr_error_t err;

  memcpy(copy, data, len);
  if (wr_trust_parse(copy, len, 0, &certs, &n, &err) < 0) {
    check(certs == NULL, "certificates on failure");
    return 0;
  }
  check(n >= 1, "success without a certificate");
  for (size_t i = 0; i < n; i++)
    check_cert(&certs[i]);
  wr_trust_certs_free(certs, n);
  return 0;
}
