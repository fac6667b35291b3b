/*
 * Fuzz the classification of a connection's first bytes: wr_sniff_client
 * on any input and on its prefixes. It must never read past the input,
 * answer MORE only below WR_SNIFF_MAX, fill sni only for TLS, and not
 * change its mind once it has decided; the server name it returns then
 * goes through wr_net_normalize_host as the proxy would.
 */
#include "common/common.h"
#include "net/net_internal.h"

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_sni: %s\n", what);
    abort();
  }
}

/* Sniff an exact-size copy, so that ASan sees any read past the end. */
static enum wr_sniff sniff(const uint8_t *data, size_t len,
                           char sni[WR_HOST_MAX]) {
  _cleanup_free_ uint8_t *copy = xmalloc(len ? len : 1);
  enum wr_sniff s;

  memcpy(copy, data, len);
  memset(sni, 'x', WR_HOST_MAX);
  s = wr_sniff_client(copy, len, sni);
  check(memchr(sni, '\0', WR_HOST_MAX) != NULL, "sni not terminated");
  check(s == WR_SNIFF_TLS || sni[0] == '\0', "sni set for non-TLS");
  check(s != WR_SNIFF_MORE || len < WR_SNIFF_MAX, "MORE at WR_SNIFF_MAX");
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char sni[WR_HOST_MAX], part_sni[WR_HOST_MAX], host[WR_HOST_MAX];
  enum wr_sniff all = sniff(data, size, sni);
  size_t cuts[] = {size / 2, size > 0 ? size - 1 : 0, WR_MIN(size, 5)};

  for (size_t i = 0; i < WR_ARRAY_SIZE(cuts); i++) {
    enum wr_sniff part = sniff(data, cuts[i], part_sni);
    if (part == WR_SNIFF_MORE)
      continue;
    check(part == all, "a decision changed with more bytes");
    check(strcmp(part_sni, sni) == 0, "the server name changed");
  }
  if (all == WR_SNIFF_TLS && sni[0] != '\0')
    wr_net_normalize_host(sni, host, NULL, NULL, NULL);
  return 0;
}
