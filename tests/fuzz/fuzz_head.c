/*
 * Fuzz the proxy's request-head parser (src/net/head.c) with whatever a
 * sandbox can send, as an explicit client and as a redirected one. For
 * every input:
 *  - the head is parsed whole, and again as it would arrive in pieces
 *    (cut in two, and in small reads): the verdict and what it names must
 *    not depend on how the bytes were cut;
 *  - offsets stay inside what was read;
 *  - an accepted request's forwarded form (origin-form, one Host,
 *    "Connection: close") must itself be accepted (unless it outgrew the
 *    size limits), name the same host, method and version, and frame its
 *    body the same way: fed what follows the head, the proxy and an
 *    upstream that parses the forwarded head end the request at the same
 *    byte. Any disagreement is a request the proxy let through that the
 *    upstream would read differently.
 */
#include "common/common.h"
#include "net/net_internal.h"

#define REDIRECTED_PORT 8080

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_head: %s\n", what);
    abort();
  }
}

/* Feed base[0..len) in reads of at most `step` bytes (0: all at once), as
 * a connection's buffer fills. */
static int feed(struct wr_proxy_head *h, const char *base, size_t len,
                size_t step) {
  size_t have = 0;
  int rc = 0;

  do {
    have = step == 0 ? len : WR_MIN(len, have + step);
    rc = wr_proxy_head_feed(h, base, have);
  } while (rc == 0 && have < len);
  return rc;
}

static void check_offsets(const struct wr_proxy_head *h, size_t len) {
  check(h->head_len <= len && h->head_len <= WR_HEAD_MAX, "head_len");
  check(h->nfields <= WR_HEAD_FIELDS, "nfields");
  check((size_t)h->url + h->url_len <= h->head_len, "url");
  check((size_t)h->path + h->path_len <= h->head_len, "path");
  check((size_t)h->query + h->query_len <= h->head_len, "query");
  for (size_t i = 0; i < h->nfields; i++) {
    const struct wr_head_field *f = &h->fields[i];
    check((size_t)f->name + f->name_len <= h->head_len, "field name");
    check((size_t)f->value + f->value_len <= h->head_len, "field value");
  }
  check(memchr(h->host, '\0', sizeof(h->host)) != NULL, "host unterminated");
}

/* The same verdict, and the same request, however the bytes came. */
static void check_same(const struct wr_proxy_head *a, int rc_a,
                       const struct wr_proxy_head *b, int rc_b) {
  check(rc_a == rc_b, "the verdict depends on how the bytes were cut");
  if (rc_a != 1)
    return;
  check(a->head_len == b->head_len && a->nfields == b->nfields &&
            a->port == b->port && strcmp(a->host, b->host) == 0 &&
            a->body_done == b->body_done && a->path == b->path &&
            a->path_len == b->path_len,
        "the request depends on how the bytes were cut");
}

/* How many bytes of rest each parser takes as the request's body, fed in
 * the same pieces. */
static void check_body(struct wr_proxy_head *proxy, struct wr_proxy_head *up,
                       const char *rest, size_t len) {
  size_t off = 0;

  while (off < len && !proxy->body_done) {
    size_t n = WR_MIN(len - off, (size_t)1 + (off % 97)), used_p, used_u;
    int rc_p = wr_proxy_body_feed(proxy, rest + off, n, &used_p);
    int rc_u = wr_proxy_body_feed(up, rest + off, n, &used_u);

    check(rc_p == rc_u, "the body's framing is read two ways");
    if (rc_p < 0)
      return;
    check(used_p <= n, "used more than it was given");
    check(used_p == used_u, "the body ends at two places");
    check(proxy->body_done == up->body_done, "the body ends two ways");
    check(used_p == n || proxy->body_done, "stopped before the end");
    off += used_p;
  }
}

/* Parse the request as the proxy would send it upstream. */
static void check_forward(struct wr_proxy_head *h, const char *data,
                          size_t size) {
  struct wr_proxy_head up;
  wr_buf_t out;
  size_t len;
  char *fwd;
  int rc;

  if (h->connect)
    return;
  wr_buf_init(&out);
  wr_proxy_head_forward(h, &out);
  fwd = wr_buf_steal(&out, &len);
  wr_proxy_head_init(&up, true, h->port);
  rc = wr_proxy_head_feed(&up, fwd, len);
  if (rc < 0 && up.status == 431) {
    /* Only our limits: a head near them can grow past them on the way
     * out (a Host and "Connection: close" added, CRLFs for LFs, A-labels
     * for U-labels); the upstream has limits of its own anyway. */
    free(fwd);
    return;
  }
  if (rc != 1) {
    fprintf(stderr, "fuzz_head: forwarded %.*s\nrefused: %s\n", (int)len, fwd,
            up.error);
    abort();
  }
  check(up.head_len == len, "the forwarded head has bytes after it");
  check(up.framing.host == 1, "the forwarded head has not one Host");
  check(strcmp(up.host, h->host) == 0, "the forwarded Host names another");
  check(up.host_is_ip == h->host_is_ip, "the forwarded Host changed kind");
  check(up.parser.method == h->parser.method, "the method changed");
  check(up.parser.http_minor == h->parser.http_minor, "the version changed");
  check(up.framing.content_length == h->framing.content_length &&
            up.framing.transfer_encoding == h->framing.transfer_encoding,
        "the framing headers changed");
  check(up.body_done == h->body_done, "a body appeared or went");
  check_body(h, &up, data + h->head_len, size - h->head_len);
  free(fwd);
}

static void run(const char *data, size_t size, bool transparent) {
  struct wr_proxy_head whole, halves, small;
  uint16_t port = transparent ? REDIRECTED_PORT : 0;
  size_t step = 1 + (size > 0 ? (unsigned char)data[0] % 13 : 0);
  int rc_whole, rc_halves, rc_small;

  wr_proxy_head_init(&whole, transparent, port);
  wr_proxy_head_init(&halves, transparent, port);
  wr_proxy_head_init(&small, transparent, port);
  rc_whole = feed(&whole, data, size, 0);
  rc_halves = feed(&halves, data, size, size / 2 + 1);
  rc_small = feed(&small, data, size, step);
  check(rc_whole == 1 || rc_whole == 0 || rc_whole == -1, "feed result");
  check(rc_whole >= 0 || whole.status == 400 || whole.status == 431,
        "refused without 400 or 431");
  check(rc_whole >= 0 || whole.error[0] != '\0', "refused without a reason");
  check_same(&whole, rc_whole, &halves, rc_halves);
  check_same(&whole, rc_whole, &small, rc_small);
  if (rc_whole != 1)
    return;
  check_offsets(&whole, size);
  check(whole.host[0] != '\0', "accepted without a host");
  check(!transparent || whole.port == REDIRECTED_PORT,
        "a redirected request goes to another port");
  check(transparent || whole.port != 0, "no port");
  check_forward(&whole, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so that ASan sees any read past the end. */
  _cleanup_free_ char *copy = xmalloc(size ? size : 1);

  memcpy(copy, data, size);
  run(copy, size, false);
  run(copy, size, true);
  return 0;
}
