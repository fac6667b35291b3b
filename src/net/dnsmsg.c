/*
 * DNS messages for the resolver inside each sandbox: parse a query (from
 * the sandbox, so hostile) and build the reply (RFC 1035, 4.1).
 *
 * Only what a stub resolver sends is understood: a standard query with one
 * question whose name is plain host-name labels, and an EDNS0 OPT record
 * (RFC 6891) right after it. A query never needs compression, so a
 * pointer in its question is an error rather than something to follow.
 * A UDP reply fits 512 bytes, or the size the client's OPT advertises up
 * to WR_DNS_EDNS_MAX; what does not fit is left out and the reply says TC,
 * so the client asks again over TCP (2-byte length framing, RFC 7766).
 */
#include "common/common.h"
#include "net/net_internal.h"

#define DNS_HEADER 12
#define DNS_QR 0x8000
#define DNS_OPCODE 0x7800
#define DNS_TC 0x0200
#define DNS_RD 0x0100
#define DNS_RA 0x0080
#define DNS_RCODE 0x000f
#define DNS_CLASS_IN 1
/* A name takes at most 255 bytes on the wire (RFC 1035, 3.1). */
#define DNS_NAME_WIRE_MAX 255
#define DNS_LABEL_MAX 63
/* Name pointer, type, class, TTL and data length. */
#define DNS_RR_FIXED 12
#define DNS_PTR_QNAME 0xc00c
/* An OPT record: root name, type, UDP size, extended rcode, version,
 * flags, data length (RFC 6891, 6.1.2). */
#define DNS_TYPE_OPT 41
#define DNS_OPT_FIXED 11
#define DNS_UDP_MIN 512

static uint16_t get16(const uint8_t *p) {
  return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v) {
  put16(p, (uint16_t)(v >> 16));
  put16(p + 2, (uint16_t)v);
}

/* Lower-case a label byte; 0 when it cannot be in a host name. */
static char host_char(uint8_t c) {
  if (c >= 'A' && c <= 'Z')
    return (char)(c - 'A' + 'a');
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
    return (char)c;
  return 0;
}

/* Read the question's name at *off as lower-case text. Length bytes of
 * 64 and more (pointers, extended label types) are refused. */
static bool read_name(const uint8_t *msg, size_t len, size_t *off,
                      char name[WR_HOST_MAX]) {
  size_t o = *off, n = 0, wire = 1;

  for (;;) {
    size_t l;
    if (o >= len)
      return false;
    l = msg[o++];
    if (l == 0)
      break;
    wire += l + 1;
    if (l > DNS_LABEL_MAX || l > len - o || wire > DNS_NAME_WIRE_MAX)
      return false;
    if (n > 0)
      name[n++] = '.';
    for (size_t i = 0; i < l; i++)
      if ((name[n++] = host_char(msg[o + i])) == 0)
        return false;
    o += l;
  }
  name[n] = '\0';
  *off = o;
  return true;
}

/* An OPT record right after the question, if the query has one there
 * and nothing in its answer or authority sections. Returns 0, or FORMERR
 * or BADVERS. */
static int read_opt(const uint8_t *msg, size_t len, struct wr_dns_query *q) {
  size_t off = q->question_end;

  if (get16(msg + 10) == 0 || get16(msg + 6) != 0 || get16(msg + 8) != 0)
    return 0;
  if (len - off < DNS_OPT_FIXED || msg[off] != 0 ||
      get16(msg + off + 1) != DNS_TYPE_OPT)
    return 0;
  if (get16(msg + off + 9) > len - off - DNS_OPT_FIXED)
    return WR_DNS_FORMERR;
  q->edns = true;
  q->udp_size = get16(msg + off + 3);
  if (msg[off + 6] != 0)
    return WR_DNS_BADVERS;
  return 0;
}

int wr_dns_parse_query(const uint8_t *msg, size_t len, struct wr_dns_query *q) {
  size_t off = DNS_HEADER;

  memset(q, 0, sizeof(*q));
  if (msg == NULL || len < DNS_HEADER)
    return -1;
  q->id = get16(msg);
  q->flags = get16(msg + 2);
  if (q->flags & DNS_QR)
    return -1;
  if (q->flags & DNS_OPCODE)
    return WR_DNS_NOTIMP;
  if (get16(msg + 4) != 1)
    return WR_DNS_FORMERR;
  if (!read_name(msg, len, &off, q->name) || len - off < 4) {
    q->name[0] = '\0';
    return WR_DNS_FORMERR;
  }
  q->qtype = get16(msg + off);
  q->qclass = get16(msg + off + 2);
  q->question_end = off + 4;
  return read_opt(msg, len, q);
}

size_t wr_dns_udp_limit(const struct wr_dns_query *q) {
  if (!q->edns || q->udp_size <= DNS_UDP_MIN)
    return DNS_UDP_MIN;
  return WR_MIN((size_t)q->udp_size, (size_t)WR_DNS_EDNS_MAX);
}

int wr_dns_tcp_frame(const uint8_t *buf, size_t len, size_t *msg_len) {
  size_t l;

  if (len < 2)
    return 0;
  l = get16(buf);
  if (l < DNS_HEADER || l > WR_DNS_TCP_QUERY_MAX)
    return -1;
  if (len - 2 < l)
    return 0;
  *msg_len = l;
  return 1;
}

/* Answer records for the addresses of the asked family that fit between
 * *len and cap; returns how many were written, *truncated when one did not
 * fit. */
static uint16_t put_answers(const struct wr_dns_query *q,
                            const struct wr_net_addr *addrs, size_t naddrs,
                            uint32_t ttl, uint8_t *out, size_t *len, size_t cap,
                            bool *truncated) {
  int family = q->qtype == WR_DNS_A      ? AF_INET
               : q->qtype == WR_DNS_AAAA ? AF_INET6
                                         : AF_UNSPEC;
  size_t alen = family == AF_INET ? 4 : 16;
  uint16_t count = 0;

  if (family == AF_UNSPEC || q->qclass != DNS_CLASS_IN || addrs == NULL)
    return 0;
  for (size_t i = 0; i < naddrs && count < UINT16_MAX; i++) {
    uint8_t *rr = out + *len;
    if (addrs[i].family != family)
      continue;
    if (cap - *len < DNS_RR_FIXED + alen) {
      *truncated = true;
      break;
    }
    put16(rr, DNS_PTR_QNAME);
    put16(rr + 2, q->qtype);
    put16(rr + 4, DNS_CLASS_IN);
    put32(rr + 6, ttl);
    put16(rr + 10, (uint16_t)alen);
    memcpy(rr + DNS_RR_FIXED, addrs[i].bytes, alen);
    *len += DNS_RR_FIXED + alen;
    count++;
  }
  return count;
}

/* Our OPT record: the size we accept, and the upper bits of rcode. */
static void put_opt(uint8_t *rr, int rcode) {
  rr[0] = 0;
  put16(rr + 1, DNS_TYPE_OPT);
  put16(rr + 3, WR_DNS_EDNS_MAX);
  rr[5] = (uint8_t)((unsigned)rcode >> 4);
  rr[6] = 0;
  put16(rr + 7, 0);
  put16(rr + 9, 0);
}

size_t wr_dns_build_reply(const struct wr_dns_query *q, const uint8_t *msg,
                          int rcode, const struct wr_net_addr *addrs,
                          size_t naddrs, uint32_t ttl, size_t limit,
                          uint8_t *out, size_t outsize) {
  size_t cap = WR_MIN(WR_MIN(outsize, limit), (size_t)WR_DNS_REPLY_MAX);
  size_t qend = q->question_end, len = DNS_HEADER;
  bool question, truncated = false;
  uint16_t ancount = 0, flags;

  if (out == NULL || cap < DNS_HEADER + (q->edns ? DNS_OPT_FIXED : 0))
    return 0;
  if (q->edns)
    cap -= DNS_OPT_FIXED; /* room kept for the OPT record */
  question = msg != NULL && qend > DNS_HEADER &&
             qend <= DNS_HEADER + DNS_NAME_WIRE_MAX + 4 && qend <= cap;
  memset(out, 0, DNS_HEADER);
  put16(out, q->id);
  if (question) {
    memcpy(out + DNS_HEADER, msg + DNS_HEADER, qend - DNS_HEADER);
    len = qend;
    put16(out + 4, 1);
  }
  if (question && rcode == WR_DNS_NOERROR)
    ancount = put_answers(q, addrs, naddrs, ttl, out, &len, cap, &truncated);
  flags = (uint16_t)(DNS_QR | (q->flags & (DNS_OPCODE | DNS_RD)) | DNS_RA |
                     ((unsigned)rcode & DNS_RCODE));
  put16(out + 2, truncated ? (uint16_t)(flags | DNS_TC) : flags);
  put16(out + 6, ancount);
  if (q->edns) {
    put_opt(out + len, rcode);
    len += DNS_OPT_FIXED;
    put16(out + 10, 1);
  }
  return len;
}
