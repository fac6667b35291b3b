/*
 * DNS messages for the resolver inside each sandbox: parse a query (from
 * the sandbox, so hostile) and build the reply (RFC 1035, 4.1).
 *
 * Only what a stub resolver sends is understood: a standard query with one
 * question whose name is plain host-name labels. A query never needs
 * compression, so a pointer in its question is an error rather than
 * something to follow. Replies are at most WR_DNS_MAX bytes (no EDNS).
 */
#include "common/common.h"
#include "net/net_internal.h"

#define DNS_HEADER 12
#define DNS_QR 0x8000
#define DNS_OPCODE 0x7800
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
  return 0;
}

/* Answer records for the addresses of the asked family that fit between
 * *len and cap; returns how many were written. */
static uint16_t put_answers(const struct wr_dns_query *q,
                            const struct wr_net_addr *addrs, size_t naddrs,
                            uint32_t ttl, uint8_t *out, size_t *len,
                            size_t cap) {
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
    if (cap - *len < DNS_RR_FIXED + alen)
      break;
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

size_t wr_dns_build_reply(const struct wr_dns_query *q, const uint8_t *msg,
                          int rcode, const struct wr_net_addr *addrs,
                          size_t naddrs, uint32_t ttl, uint8_t *out,
                          size_t outsize) {
  size_t cap = WR_MIN(outsize, (size_t)WR_DNS_MAX), len = DNS_HEADER;
  size_t qend = q->question_end;
  bool question;
  uint16_t ancount = 0;

  if (out == NULL || cap < DNS_HEADER)
    return 0;
  question = msg != NULL && qend > DNS_HEADER &&
             qend <= DNS_HEADER + DNS_NAME_WIRE_MAX + 4 && qend <= cap;
  memset(out, 0, DNS_HEADER);
  put16(out, q->id);
  put16(out + 2, (uint16_t)(DNS_QR | (q->flags & (DNS_OPCODE | DNS_RD)) |
                            DNS_RA | ((unsigned)rcode & DNS_RCODE)));
  if (question) {
    memcpy(out + DNS_HEADER, msg + DNS_HEADER, qend - DNS_HEADER);
    len = qend;
    put16(out + 4, 1);
  }
  if (question && rcode == WR_DNS_NOERROR)
    ancount = put_answers(q, addrs, naddrs, ttl, out, &len, cap);
  put16(out + 6, ancount);
  return len;
}
