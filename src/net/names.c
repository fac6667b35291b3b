/*
 * Addresses and host names as the policy sees them (see net.h).
 *
 * Everything a sandbox names a destination with passes through here, so
 * two spellings of one destination must come out the same: every encoding
 * of an IP literal becomes its canonical text, and a name becomes lower
 * case ASCII with Unicode labels in their IDNA A-label form.
 *
 * IPv4 literals: the forms BSD's inet_aton and so every resolver accept:
 * one to four dot-separated parts, each decimal, octal (leading 0) or hex
 * (leading 0x), the last part filling the remaining bytes ("127.1",
 * "0x7f000001", "017700000001"), plus one trailing dot as browsers allow.
 * Only digits, hex letters, "x" and dots may appear: inet_aton itself
 * stops at white space and would take "1.2.3.4 junk" as 1.2.3.4.
 * IPv6 literals: whatever inet_pton takes, with or without brackets; no
 * zone ("%eth0"), and an IPv4 literal is never bracketed.
 *
 * IDNA: a label with non-ASCII bytes must be valid UTF-8 and becomes
 * "xn--" and its RFC 3492 Punycode. Only ASCII is lower-cased; no Unicode
 * case mapping or NFC normalisation is done, so such a label is encoded as
 * given, and the IDNA2008 rules about which code points and mixtures a
 * label may hold are not checked. The only mapping is that of the
 * ideographic full stops (U+3002, U+FF0E, U+FF61), which IDNA clients
 * treat as dots. A label that is already "xn--..." is kept, lower-cased.
 *
 * Names that are not IPs but end in a label starting with a digit
 * ("1.2.3.4.5", "0x1g", "example.08") are refused: no top-level domain
 * starts with a digit, and a client may well read such a name as an
 * address, so it must never be matched as a domain.
 */
#include "common/common.h"
#include "net/net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>

/* The longest name or label after normalisation (RFC 1035). */
#define NAME_MAX_LEN 253
#define LABEL_MAX_LEN 63
/* Room for a label before encoding: 63 ASCII bytes, or fewer code points
 * of up to 4 UTF-8 bytes each, which can never encode to more. */
#define RAW_LABEL_MAX 252
/* Input longer than this cannot normalise to 253 bytes. */
#define RAW_NAME_MAX 1024
/* Longest IP literal text we try to parse, brackets included. */
#define IP_TEXT_MAX 64

/* ---- IP literals ------------------------------------------------------ */

/* A bracketed or bare IPv6 literal of len bytes. */
static bool parse_v6(const char *s, size_t len, struct wr_net_addr *out) {
  char buf[IP_TEXT_MAX];
  struct in6_addr a6;

  if (len > 0 && s[0] == '[') {
    if (len < 2 || s[len - 1] != ']')
      return false;
    s++;
    len -= 2;
  }
  if (len == 0 || len >= sizeof(buf))
    return false;
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (inet_pton(AF_INET6, buf, &a6) != 1)
    return false;
  out->family = AF_INET6;
  memcpy(out->bytes, &a6, 16);
  return true;
}

/* An IPv4 literal in the BSD forms. inet_aton checks the numbers (base,
 * range of each part); we first make sure nothing but a number is there. */
static bool parse_v4(const char *s, size_t len, struct wr_net_addr *out) {
  char buf[IP_TEXT_MAX];
  struct in_addr a4;

  if (len > 0 && s[len - 1] == '.')
    len--;
  if (len == 0 || len >= sizeof(buf))
    return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(isxdigit(c) || c == 'x' || c == 'X' || c == '.'))
      return false;
  }
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (inet_aton(buf, &a4) == 0)
    return false;
  memset(out, 0, sizeof(*out));
  out->family = AF_INET;
  memcpy(out->bytes, &a4, 4);
  return true;
}

bool wr_net_parse_ip(const char *s, struct wr_net_addr *out) {
  struct wr_net_addr a;
  size_t len;

  if (s == NULL)
    return false;
  len = strnlen(s, IP_TEXT_MAX);
  if (len == 0 || len >= IP_TEXT_MAX)
    return false;
  memset(&a, 0, sizeof(a));
  if (s[0] == '[' || memchr(s, ':', len) != NULL) {
    if (!parse_v6(s, len, &a))
      return false;
  } else if (!parse_v4(s, len, &a)) {
    return false;
  }
  if (out != NULL)
    *out = a;
  return true;
}

/* ---- classes ------------------------------------------------------------ */

struct v4_range {
  uint32_t net;
  unsigned prefix;
  enum wr_addr_class cls;
};

/* First match wins, so the single metadata addresses come before the
 * blocks that hold them. */
static const struct v4_range v4_ranges[] = {
    {0xa9fea9fe, 32, WR_ADDR_METADATA}, /* 169.254.169.254 */
    {0xa9feaa02, 32, WR_ADDR_METADATA}, /* 169.254.170.2 (ECS tasks) */
    {0x646464c8, 32, WR_ADDR_METADATA}, /* 100.100.100.200 (Alibaba) */
    {0x00000000, 8, WR_ADDR_UNSPECIFIED}, {0x7f000000, 8, WR_ADDR_LOOPBACK},
    {0x0a000000, 8, WR_ADDR_PRIVATE},     {0xac100000, 12, WR_ADDR_PRIVATE},
    {0xc0a80000, 16, WR_ADDR_PRIVATE},    {0xa9fe0000, 16, WR_ADDR_LINK_LOCAL},
    {0x64400000, 10, WR_ADDR_CGNAT},      {0xe0000000, 4, WR_ADDR_MULTICAST},
    {0xf0000000, 4, WR_ADDR_RESERVED},  /* and 255.255.255.255 */
    {0xc0000000, 24, WR_ADDR_RESERVED}, /* IETF protocol assignments */
    {0xc0000200, 24, WR_ADDR_RESERVED}, /* TEST-NET-1 */
    {0xc6336400, 24, WR_ADDR_RESERVED}, /* TEST-NET-2 */
    {0xcb007100, 24, WR_ADDR_RESERVED}, /* TEST-NET-3 */
    {0xc6120000, 15, WR_ADDR_RESERVED}, /* benchmarking */
};

static uint32_t be32(const uint8_t *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
         (uint32_t)b[3];
}

static enum wr_addr_class class_v4(uint32_t a) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(v4_ranges); i++) {
    uint32_t mask = v4_ranges[i].prefix == 0
                        ? 0
                        : 0xffffffffu << (32 - v4_ranges[i].prefix);
    if ((a & mask) == v4_ranges[i].net)
      return v4_ranges[i].cls;
  }
  return WR_ADDR_PUBLIC;
}

static bool prefix_match(const uint8_t *a, const uint8_t *net,
                         unsigned prefix) {
  unsigned full = prefix / 8, rest = prefix % 8;

  if (memcmp(a, net, full) != 0)
    return false;
  if (rest == 0)
    return true;
  return ((a[full] ^ net[full]) & (0xff << (8 - rest))) == 0;
}

static void set_v4(struct wr_net_addr *a, const uint8_t *b, bool inverted) {
  memset(a, 0, sizeof(*a));
  a->family = AF_INET;
  for (size_t i = 0; i < 4; i++)
    a->bytes[i] = inverted ? (uint8_t)~b[i] : b[i];
}

/* By the prefixes of net.h: the address its owner means, and for the
 * local-use NAT64 prefix, whose layout depends on the network, also the
 * /48 layout of RFC 6052. */
size_t wr_net_addr_embedded_v4(const struct wr_net_addr *a,
                               struct wr_net_addr v4[2]) {
  static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
  static const uint8_t zero[12] = {0};
  static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
  static const uint8_t nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
  static const uint8_t teredo[4] = {0x20, 0x01, 0x00, 0x00};
  const uint8_t *b = a->bytes;
  const uint8_t layout48[4] = {b[6], b[7], b[9], b[10]};

  if (a->family != AF_INET6)
    return 0;
  if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0 ||
      (memcmp(b, zero, 12) == 0 && be32(b + 12) > 1)) {
    set_v4(&v4[0], b + 12, false);
    return 1;
  }
  if (memcmp(b, nat64_local, 6) == 0) {
    set_v4(&v4[0], b + 12, false);
    set_v4(&v4[1], layout48, false);
    return 2;
  }
  if (b[0] == 0x20 && b[1] == 0x02) {
    set_v4(&v4[0], b + 2, false);
    return 1;
  }
  if (memcmp(b, teredo, 4) == 0) {
    set_v4(&v4[0], b + 12, true);
    return 1;
  }
  return 0;
}

struct v6_range {
  uint8_t net[16];
  unsigned prefix;
  enum wr_addr_class cls;
};

static const struct v6_range v6_ranges[] = {
    {{0}, 128, WR_ADDR_UNSPECIFIED},
    {{[15] = 1}, 128, WR_ADDR_LOOPBACK},
    {{0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, 0x54}, 128, WR_ADDR_METADATA},
    {{0xfe, 0x80}, 10, WR_ADDR_LINK_LOCAL},
    {{0xfc}, 7, WR_ADDR_ULA},
    {{0xff}, 8, WR_ADDR_MULTICAST},
    {{0x01, 0x00}, 64, WR_ADDR_RESERVED},             /* discard */
    {{0x20, 0x01, 0x0d, 0xb8}, 32, WR_ADDR_RESERVED}, /* documentation */
    {{0x20, 0x01, 0x00, 0x02}, 48, WR_ADDR_RESERVED}, /* benchmarking */
    {{0x3f, 0xff}, 20, WR_ADDR_RESERVED},             /* documentation */
};

/* Only 2000::/3 is global unicast; the rest of the space is either in the
 * table or not assigned for use on the Internet. */
static enum wr_addr_class class_v6(const struct wr_net_addr *a) {
  const uint8_t *b = a->bytes;
  struct wr_net_addr v4[2];
  size_t n = wr_net_addr_embedded_v4(a, v4);

  for (size_t i = 0; i < n; i++)
    if (class_v4(be32(v4[i].bytes)) != WR_ADDR_PUBLIC)
      return class_v4(be32(v4[i].bytes));
  if (n > 0)
    return WR_ADDR_PUBLIC;
  for (size_t i = 0; i < WR_ARRAY_SIZE(v6_ranges); i++)
    if (prefix_match(b, v6_ranges[i].net, v6_ranges[i].prefix))
      return v6_ranges[i].cls;
  return (b[0] & 0xe0) == 0x20 ? WR_ADDR_PUBLIC : WR_ADDR_RESERVED;
}

enum wr_addr_class wr_net_addr_class(const struct wr_net_addr *a) {
  if (a->family == AF_INET)
    return class_v4(be32(a->bytes));
  if (a->family == AF_INET6)
    return class_v6(a);
  return WR_ADDR_RESERVED;
}

const char *wr_net_addr_class_name(enum wr_addr_class c) {
  static const char *const names[] = {
      [WR_ADDR_PUBLIC] = "public",
      [WR_ADDR_LOOPBACK] = "loopback",
      [WR_ADDR_PRIVATE] = "private",
      [WR_ADDR_LINK_LOCAL] = "link-local",
      [WR_ADDR_CGNAT] = "cgnat",
      [WR_ADDR_ULA] = "ula",
      [WR_ADDR_METADATA] = "metadata",
      [WR_ADDR_MULTICAST] = "multicast",
      [WR_ADDR_UNSPECIFIED] = "unspecified",
      [WR_ADDR_RESERVED] = "reserved",
  };

  if ((unsigned)c >= WR_ARRAY_SIZE(names))
    return "unknown";
  return names[c];
}

/* ---- addresses -------------------------------------------------------- */

void wr_net_addr_format(const struct wr_net_addr *a, char *out, size_t size) {
  if (size == 0)
    return;
  out[0] = '\0';
  if (size > (socklen_t)-1)
    size = (socklen_t)-1;
  if (a->family != AF_INET && a->family != AF_INET6)
    return;
  if (inet_ntop(a->family, a->bytes, out, (socklen_t)size) == NULL)
    out[0] = '\0';
}

bool wr_net_addr_from_sockaddr(const struct sockaddr *sa,
                               struct wr_net_addr *out, uint16_t *port) {
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;

  memset(out, 0, sizeof(*out));
  if (sa->sa_family == AF_INET) {
    memcpy(&sin, sa, sizeof(sin));
    out->family = AF_INET;
    memcpy(out->bytes, &sin.sin_addr, 4);
    if (port != NULL)
      *port = ntohs(sin.sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    memcpy(&sin6, sa, sizeof(sin6));
    out->family = AF_INET6;
    memcpy(out->bytes, &sin6.sin6_addr, 16);
    if (port != NULL)
      *port = ntohs(sin6.sin6_port);
    return true;
  }
  return false;
}

socklen_t wr_net_addr_to_sockaddr(const struct wr_net_addr *a, uint16_t port,
                                  struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (a->family == AF_INET) {
    struct sockaddr_in *sin = (struct sockaddr_in *)out;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    memcpy(&sin->sin_addr, a->bytes, 4);
    return sizeof(*sin);
  }
  if (a->family == AF_INET6) {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    memcpy(&sin6->sin6_addr, a->bytes, 16);
    return sizeof(*sin6);
  }
  return 0;
}

bool wr_net_addr_in(const struct wr_net_addr *a, const struct wr_net_addr *net,
                    unsigned prefix) {
  unsigned bits = a->family == AF_INET ? 32 : 128;

  if (a->family != net->family ||
      (a->family != AF_INET && a->family != AF_INET6) || prefix > bits)
    return false;
  return prefix_match(a->bytes, net->bytes, prefix);
}

/* ---- Punycode (RFC 3492) ---------------------------------------------- */

enum {
  PC_BASE = 36,
  PC_TMIN = 1,
  PC_TMAX = 26,
  PC_SKEW = 38,
  PC_DAMP = 700,
  PC_INITIAL_BIAS = 72,
  PC_INITIAL_N = 128,
};

/* Where the encoder writes: a bounded buffer that remembers overflow. */
struct pc_out {
  char *buf;
  size_t len, cap;
  bool full;
};

static void pc_put(struct pc_out *o, char c) {
  if (o->len >= o->cap) {
    o->full = true;
    return;
  }
  o->buf[o->len++] = c;
}

static char pc_digit(uint32_t d) {
  return d < 26 ? (char)('a' + d) : (char)('0' + d - 26);
}

/* RFC 3492 section 6.1. */
static uint32_t pc_adapt(uint32_t delta, uint32_t numpoints, bool first) {
  uint32_t k = 0;

  delta = first ? delta / PC_DAMP : delta / 2;
  delta += delta / numpoints;
  while (delta > ((PC_BASE - PC_TMIN) * PC_TMAX) / 2) {
    delta /= PC_BASE - PC_TMIN;
    k += PC_BASE;
  }
  return k + (PC_BASE - PC_TMIN + 1) * delta / (delta + PC_SKEW);
}

/* Write delta as a generalised variable-length integer (section 6.3). */
static void pc_put_delta(struct pc_out *o, uint32_t delta, uint32_t bias) {
  uint32_t q = delta;

  for (uint32_t k = PC_BASE;; k += PC_BASE) {
    uint32_t t = k <= bias ? PC_TMIN : k >= bias + PC_TMAX ? PC_TMAX : k - bias;
    if (q < t)
      break;
    pc_put(o, pc_digit(t + (q - t) % (PC_BASE - t)));
    q = (q - t) / (PC_BASE - t);
  }
  pc_put(o, pc_digit(q));
}

/* The smallest code point at least n; UINT32_MAX when there is none. */
static uint32_t pc_next(const uint32_t *cp, size_t ncp, uint32_t n) {
  uint32_t m = UINT32_MAX;

  for (size_t i = 0; i < ncp; i++)
    if (cp[i] >= n && cp[i] < m)
      m = cp[i];
  return m;
}

/* Encode code points (section 6.3). Inputs are at most RAW_LABEL_MAX code
 * points below 0x110000, so delta stays far below 2^32; the checks are
 * there all the same. Returns false on overflow or a full buffer. */
static bool punycode_encode(const uint32_t *cp, size_t ncp, struct pc_out *o) {
  uint32_t n = PC_INITIAL_N, delta = 0, bias = PC_INITIAL_BIAS, h, b = 0;

  for (size_t i = 0; i < ncp; i++)
    if (cp[i] < 0x80) {
      pc_put(o, (char)cp[i]);
      b++;
    }
  if (b > 0)
    pc_put(o, '-');
  for (h = b; h < ncp; delta++, n++) {
    uint32_t m = pc_next(cp, ncp, n);
    if (m - n > (UINT32_MAX - delta) / (h + 1))
      return false;
    delta += (m - n) * (h + 1);
    n = m;
    for (size_t i = 0; i < ncp; i++) {
      if (cp[i] < n && ++delta == 0)
        return false;
      if (cp[i] != n)
        continue;
      pc_put_delta(o, delta, bias);
      bias = pc_adapt(delta, h + 1, h == b);
      delta = 0;
      h++;
    }
  }
  return !o->full;
}

/* ---- names -------------------------------------------------------------- */

/* The name being built, and the input for messages. */
struct name_out {
  char *buf; /* WR_HOST_MAX bytes */
  size_t len;
  const char *input;
};

/* Not tolower(): the result must not depend on the locale. */
static unsigned char ascii_lower(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

static bool label_byte_ok(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

/* Decode one strict UTF-8 sequence at s (n bytes left): no overlong
 * forms, no surrogates, nothing above U+10FFFF. Returns its length, or 0
 * when invalid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
  uint32_t v;

  if (len == 0 || s[0] > 0xf4 || n < len)
    return 0;
  v = s[0] & (0x7f >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    v = v << 6 | (s[i] & 0x3f);
  }
  if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *cp = v;
  return len;
}

static int bad_byte(const struct name_out *o, unsigned char c,
                    wr_error_t *err) {
  if (c < 0x20 || c >= 0x7f)
    return wr_error_setx(err, EINVAL, "byte 0x%02x cannot be in a host name",
                         c);
  return wr_error_setx(err, EINVAL, "`%c` cannot be in a host name (`%s`)", c,
                       o->input);
}

/* A label with non-ASCII bytes becomes its A-label. */
static int unicode_label(struct name_out *o, const unsigned char *s, size_t len,
                         char *label, size_t *label_len, wr_error_t *err) {
  uint32_t cp[RAW_LABEL_MAX];
  struct pc_out pc = {label + 4, 0, LABEL_MAX_LEN - 4, false};
  size_t ncp = 0;

  for (size_t i = 0; i < len; ncp++) {
    size_t n = 1;
    cp[ncp] = s[i];
    if (s[i] >= 0x80 && (n = utf8_decode(s + i, len - i, &cp[ncp])) == 0)
      return wr_error_setx(err, EINVAL, "host name is not valid UTF-8");
    if (cp[ncp] >= 0x80 && cp[ncp] < 0xa0)
      return wr_error_setx(err, EINVAL,
                           "control character U+%04X in a host name",
                           (unsigned)cp[ncp]);
    if (cp[ncp] < 0x80)
      cp[ncp] = ascii_lower((unsigned char)cp[ncp]);
    if (cp[ncp] < 0x80 && !label_byte_ok((unsigned char)cp[ncp]))
      return bad_byte(o, (unsigned char)cp[ncp], err);
    i += n;
  }
  if (len >= 4 && strncasecmp((const char *)s, "xn--", 4) == 0)
    return wr_error_setx(err, EINVAL,
                         "a Unicode label cannot start with `xn--` (`%s`)",
                         o->input);
  memcpy(label, "xn--", 4);
  if (!punycode_encode(cp, ncp, &pc))
    return wr_error_setx(err, EINVAL, "a label of `%s` is too long", o->input);
  *label_len = 4 + pc.len;
  return 0;
}

static int ascii_label(const struct name_out *o, const unsigned char *s,
                       size_t len, char *label, size_t *label_len,
                       wr_error_t *err) {
  if (len > LABEL_MAX_LEN)
    return wr_error_setx(err, EINVAL, "a label of `%s` is too long", o->input);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = ascii_lower(s[i]);
    if (!label_byte_ok(c))
      return bad_byte(o, s[i], err);
    label[i] = (char)c;
  }
  *label_len = len;
  return 0;
}

/* Normalise one label and append it to the name. */
static int put_label(struct name_out *o, const char *s, size_t len,
                     wr_error_t *err) {
  char label[LABEL_MAX_LEN + 1];
  size_t label_len = 0;
  bool unicode = false;

  if (len == 0)
    return wr_error_setx(err, EINVAL, "empty label in host name `%s`",
                         o->input);
  if (len > RAW_LABEL_MAX)
    return wr_error_setx(err, EINVAL, "a label of `%s` is too long", o->input);
  for (size_t i = 0; i < len; i++)
    unicode = unicode || (unsigned char)s[i] >= 0x80;
  if ((unicode ? unicode_label(o, (const unsigned char *)s, len, label,
                               &label_len, err)
               : ascii_label(o, (const unsigned char *)s, len, label,
                             &label_len, err)) < 0)
    return -1;
  if (o->len + (o->len > 0) + label_len > NAME_MAX_LEN)
    return wr_error_setx(err, EINVAL, "host name `%s` is too long", o->input);
  if (o->len > 0)
    o->buf[o->len++] = '.';
  memcpy(o->buf + o->len, label, label_len);
  o->len += label_len;
  o->buf[o->len] = '\0';
  return 0;
}

/* A copy of s with the ideographic full stops turned into dots. */
static char *map_dots(const char *s) {
  static const char *const stops[] = {"\xe3\x80\x82", "\xef\xbc\x8e",
                                      "\xef\xbd\xa1"};
  char *out = xstrdup(s), *w = out;

  for (const char *r = s; *r != '\0';) {
    bool stop = false;
    for (size_t i = 0; i < WR_ARRAY_SIZE(stops) && !stop; i++)
      stop = strncmp(r, stops[i], 3) == 0;
    *w++ = stop ? '.' : *r;
    r += stop ? 3 : 1;
  }
  *w = '\0';
  return out;
}

/* Split name (no trailing dot) into labels and normalise each. */
static int put_labels(struct name_out *o, const char *name, wr_error_t *err) {
  const char *p = name;

  for (;;) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    if (put_label(o, p, len, err) < 0)
      return -1;
    if (dot == NULL)
      return 0;
    p = dot + 1;
  }
}

static int ip_result(const struct wr_net_addr *a, char out[WR_HOST_MAX],
                     bool *is_ip, struct wr_net_addr *addr) {
  wr_net_addr_format(a, out, WR_HOST_MAX);
  if (is_ip != NULL)
    *is_ip = true;
  if (addr != NULL)
    *addr = *a;
  return 0;
}

/* A name whose last label starts with a digit is meant as an address. */
static int check_not_numeric(const struct name_out *o, wr_error_t *err) {
  const char *last = strrchr(o->buf, '.');

  last = last ? last + 1 : o->buf;
  if (isdigit((unsigned char)last[0]))
    return wr_error_setx(err, EINVAL,
                         "`%s` is neither a valid IP address nor a host name",
                         o->input);
  return 0;
}

int wr_net_normalize_host(const char *in, char out[WR_HOST_MAX], bool *is_ip,
                          struct wr_net_addr *addr, wr_error_t *err) {
  _cleanup_free_ char *name = NULL;
  struct name_out o = {out, 0, in};
  struct wr_net_addr a;
  size_t len;

  out[0] = '\0';
  if (is_ip != NULL)
    *is_ip = false;
  if (in == NULL || *in == '\0')
    return wr_error_setx(err, EINVAL, "empty host name");
  if (strnlen(in, RAW_NAME_MAX + 1) > RAW_NAME_MAX)
    return wr_error_setx(err, EINVAL, "host name is too long");
  name = map_dots(in);
  if (wr_net_parse_ip(name, &a))
    return ip_result(&a, out, is_ip, addr);
  if (name[0] == '[' || strchr(name, ':') != NULL)
    return wr_error_setx(err, EINVAL, "`%s` is not a valid IPv6 address", in);
  len = strlen(name);
  if (name[len - 1] == '.')
    name[--len] = '\0';
  if (len == 0)
    return wr_error_setx(err, EINVAL, "empty host name");
  if (put_labels(&o, name, err) < 0 || check_not_numeric(&o, err) < 0) {
    out[0] = '\0';
    return -1;
  }
  return 0;
}

/* ---- host and port ------------------------------------------------------ */

static int parse_port(const char *s, uint16_t *port, wr_error_t *err) {
  unsigned v = 0;
  size_t n = strlen(s);

  if (n == 0 || n > 5)
    return wr_error_setx(err, EINVAL, "invalid port `%s` (use 1-65535)", s);
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i]))
      return wr_error_setx(err, EINVAL, "invalid port `%s` (use 1-65535)", s);
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (v == 0 || v > 65535)
    return wr_error_setx(err, EINVAL, "port %s is out of range (use 1-65535)",
                         s);
  *port = (uint16_t)v;
  return 0;
}

/* "[V6]" or "[V6]:PORT". */
static int split_bracketed(const char *in, char host[WR_HOST_MAX],
                           uint16_t *port, wr_error_t *err) {
  const char *close = strchr(in, ']');
  struct wr_net_addr a;
  _cleanup_free_ char *inner = NULL;

  if (close == NULL)
    return wr_error_setx(err, EINVAL, "`%s`: missing `]`", in);
  inner = xstrndup(in + 1, (size_t)(close - in - 1));
  if (strchr(inner, ':') == NULL || !wr_net_parse_ip(inner, &a))
    return wr_error_setx(err, EINVAL, "`%s` is not a valid IPv6 address", in);
  if (close[1] != '\0' && close[1] != ':')
    return wr_error_setx(err, EINVAL, "`%s`: junk after `]`", in);
  if (close[1] == ':' && parse_port(close + 2, port, err) < 0)
    return -1;
  wr_net_addr_format(&a, host, WR_HOST_MAX);
  return 0;
}

/* A host, or with allow_wildcard a "*.suffix" pattern. */
static int normalize_pattern(const char *name, bool allow_wildcard,
                             char host[WR_HOST_MAX], wr_error_t *err) {
  char rest[WR_HOST_MAX];
  bool is_ip = false;

  if (!allow_wildcard || !wr_str_has_prefix(name, "*."))
    return wr_net_normalize_host(name, host, NULL, NULL, err);
  if (wr_net_normalize_host(name + 2, rest, &is_ip, NULL, err) < 0)
    return -1;
  if (is_ip)
    return wr_error_setx(err, EINVAL,
                         "`%s`: a wildcard needs a domain name, not an address",
                         name);
  if (strlen(rest) + 2 > NAME_MAX_LEN)
    return wr_error_setx(err, EINVAL, "host name `%s` is too long", name);
  snprintf(host, WR_HOST_MAX, "*.%s", rest);
  return 0;
}

int wr_net_split_hostport(const char *in, bool allow_wildcard,
                          char host[WR_HOST_MAX], uint16_t *port,
                          wr_error_t *err) {
  _cleanup_free_ char *name = NULL;
  const char *colon;

  host[0] = '\0';
  *port = 0;
  if (in == NULL || *in == '\0')
    return wr_error_setx(err, EINVAL, "empty host");
  if (in[0] == '[')
    return split_bracketed(in, host, port, err);
  colon = strchr(in, ':');
  if (colon != NULL && strchr(colon + 1, ':') != NULL)
    return wr_net_normalize_host(in, host, NULL, NULL, err);
  if (colon != NULL && parse_port(colon + 1, port, err) < 0)
    return -1;
  name = colon ? xstrndup(in, (size_t)(colon - in)) : xstrdup(in);
  return normalize_pattern(name, allow_wildcard, host, err);
}
