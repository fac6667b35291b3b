/*
 * Fuzz the DNS server's message handling: wr_dns_parse_query on any
 * bytes (EDNS0 OPT records included), then wr_dns_build_reply for what it
 * parsed into buffers of several sizes, with the UDP limit the query asks
 * for and the TCP one. A reply must stay within its buffer and its limit,
 * and must carry the question of the query it answers; TCP framing
 * (wr_dns_tcp_frame) must never claim more bytes than it was given.
 */
#include "common/common.h"
#include "net/net_internal.h"

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_dns: %s\n", what);
    abort();
  }
}

/* A parsed name is lower-case host characters and dots, no empty label. */
static void check_name(const char *name) {
  size_t len = strlen(name);

  check(len <= 253, "name longer than 253");
  check(len == 0 || (name[0] != '.' && name[len - 1] != '.'),
        "name starts or ends with a dot");
  check(strstr(name, "..") == NULL, "empty label");
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    check((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.',
          "byte outside host characters");
  }
}

/* Build into a buffer with a guard zone after outsize bytes. */
static void build(const struct wr_dns_query *q, const uint8_t *msg, int rcode,
                  size_t limit, size_t outsize) {
  static const struct wr_net_addr addrs[] = {
      {AF_INET, {93, 184, 216, 34}},
      {AF_INET6, {0x20, 0x01, 0x0d, 0xb8, [15] = 1}},
      {AF_INET, {10, 0, 0, 1}},
  };
  uint8_t out[WR_DNS_REPLY_MAX + 64];
  size_t r;

  memset(out, 0xa5, sizeof(out));
  r = wr_dns_build_reply(q, msg, rcode, addrs, WR_ARRAY_SIZE(addrs), 300, limit,
                         out, outsize);
  check(r <= outsize && r <= limit && r <= WR_DNS_REPLY_MAX,
        "reply longer than its buffer or its limit");
  check(r == 0 || r >= 12, "reply shorter than a header");
  for (size_t i = WR_MIN(outsize, sizeof(out)); i < sizeof(out); i++)
    check(out[i] == 0xa5, "wrote past outsize");
  if (r == 0)
    return;
  check(out[0] == q->id >> 8 && out[1] == (q->id & 0xff), "id changed");
  check(out[2] & 0x80, "reply without QR");
  if (rcode == WR_DNS_NOERROR && out[5] == 1)
    check(memcmp(out + 12, msg + 12, q->question_end - 12) == 0,
          "question not copied");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t sizes[] = {
      0, 11, 12, 23, 40, 100, 512, WR_DNS_EDNS_MAX, WR_DNS_REPLY_MAX + 64};
  struct wr_dns_query q;
  int rc = wr_dns_parse_query(data, size, &q);
  size_t mlen = 0;
  int frame = wr_dns_tcp_frame(data, size, &mlen);

  check(frame != 1 ||
            (mlen >= 12 && mlen <= WR_DNS_TCP_QUERY_MAX && mlen <= size - 2),
        "a TCP frame longer than its bytes or its bound");
  if (rc < 0)
    return 0;
  check(rc == 0 || rc == WR_DNS_FORMERR || rc == WR_DNS_NOTIMP ||
            rc == WR_DNS_BADVERS,
        "unexpected rcode");
  check(wr_dns_udp_limit(&q) >= 512 && wr_dns_udp_limit(&q) <= WR_DNS_EDNS_MAX,
        "UDP limit out of bounds");
  check_name(q.name);
  if (rc == 0)
    check(q.question_end > 12 && q.question_end <= size,
          "question_end outside the message");
  else if (rc == WR_DNS_BADVERS || q.question_end != 0)
    check(q.question_end > 12 && q.question_end <= size &&
              (rc == WR_DNS_BADVERS || rc == WR_DNS_FORMERR),
          "question_end set for an error about the question");
  for (size_t i = 0; i < WR_ARRAY_SIZE(sizes); i++) {
    build(&q, data, rc, wr_dns_udp_limit(&q), sizes[i]);
    build(&q, data, WR_DNS_NXDOMAIN, wr_dns_udp_limit(&q), sizes[i]);
    build(&q, data, rc, WR_DNS_REPLY_MAX, sizes[i]);
  }
  return 0;
}
