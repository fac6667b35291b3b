/* Unit tests for src/net: names, policy, first-bytes sniffing, DNS, the
 * budgets of buffers held for sandboxes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sys/stat.h>

#include "net/net_internal.h"

/* ---- helpers ------------------------------------------------------------ */

static struct wr_net_addr ip(const char *s) {
  struct wr_net_addr a;

  if (!wr_net_parse_ip(s, &a))
    fail_msg("`%s` does not parse as an IP", s);
  return a;
}

static void assert_ip_text(const char *in, const char *want) {
  struct wr_net_addr a;
  char text[INET6_ADDRSTRLEN];

  if (!wr_net_parse_ip(in, &a))
    fail_msg("`%s` does not parse as an IP", in);
  wr_net_addr_format(&a, text, sizeof(text));
  if (strcmp(text, want) != 0)
    fail_msg("`%s` parses as %s, not %s", in, text, want);
}

static void assert_class(const char *s, enum wr_addr_class want) {
  struct wr_net_addr a = ip(s);
  enum wr_addr_class got = wr_net_addr_class(&a);

  if (got != want)
    fail_msg("%s is %s, not %s", s, wr_net_addr_class_name(got),
             wr_net_addr_class_name(want));
}

static void assert_norm(const char *in, const char *want) {
  char out[WR_HOST_MAX];
  wr_error_t err = {0};

  if (wr_net_normalize_host(in, out, NULL, NULL, &err) < 0)
    fail_msg("normalise `%s`: %s", in, err.msg);
  if (strcmp(out, want) != 0)
    fail_msg("`%s` normalises to `%s`, not `%s`", in, out, want);
}

static void assert_norm_fails(const char *in) {
  char out[WR_HOST_MAX];
  wr_error_t err = {0};

  if (wr_net_normalize_host(in, out, NULL, NULL, &err) == 0)
    fail_msg("`%s` normalised to `%s`", in, out);
  assert_int_equal(err.code, EINVAL);
  assert_true(err.msg[0] != '\0');
  assert_string_equal(out, "");
}

/* ---- IP literals -------------------------------------------------------- */

static void test_ipv4_encodings_of_loopback(void **state) {
  static const char *const forms[] = {
      "127.0.0.1",  "127.1",           "127.0.1",      "2130706433",
      "0x7f000001", "0X7F000001",      "017700000001", "0x7f.0.0.1",
      "0177.0.0.1", "0x7f.1",          "0177.1",       "0x7F.0x0.0x0.0x1",
      "127.0.0.1.", "00000177.0.0.01", "127.0.0x1",    "0x7f.0.1",
  };
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(forms); i++)
    assert_ip_text(forms[i], "127.0.0.1");
}

static void test_ipv4_encodings_of_metadata(void **state) {
  static const char *const forms[] = {
      "169.254.169.254",     "2852039166",          "0xa9fea9fe",
      "025177524776",        "169.254.43518",       "169.16689662",
      "0xa9.0xfe.0xa9.0xfe", "0251.0376.0251.0376", "0xa9.254.0251.0xfe",
  };
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(forms); i++) {
    assert_ip_text(forms[i], "169.254.169.254");
    assert_class(forms[i], WR_ADDR_METADATA);
  }
}

static void test_ipv6_literals(void **state) {
  (void)state;
  assert_ip_text("::1", "::1");
  assert_ip_text("[::1]", "::1");
  assert_ip_text("0:0:0:0:0:0:0:1", "::1");
  assert_ip_text("[::ffff:127.0.0.1]", "::ffff:127.0.0.1");
  assert_ip_text("::ffff:7f00:1", "::ffff:127.0.0.1");
  assert_ip_text("64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe");
  assert_ip_text("2002:7f00:1::", "2002:7f00:1::");
  assert_ip_text("FE80::1", "fe80::1");
  assert_int_equal(ip("::1").family, AF_INET6);
  assert_int_equal(ip("1.2.3.4").family, AF_INET);
}

static void test_not_ip_literals(void **state) {
  static const char *const bad[] = {
      "",         "1.2.3.4 junk", "1.2.3.4\tx",  "1.2.3.4.5",
      "0x1g",     "256.1.1.1",    "1.2.3.256",   "08",
      "0.08",     "4294967296",   "0x100000000", "1..2",
      ".1.2.3",   "[1.2.3.4]",    "::1%lo",      "[::1",
      "::1]",     "1:2",          "example.com", "1.2.3.4..",
      " 1.2.3.4", "+1",           "0x",          "1.0x1000000",
      "[]",       "[::1]:80",     "-1",          "1e1",
      "::g",      "1.2.3.4/8",
  };
  struct wr_net_addr a;
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++)
    if (wr_net_parse_ip(bad[i], &a))
      fail_msg("`%s` parsed as an IP", bad[i]);
  assert_false(wr_net_parse_ip(NULL, &a));
  assert_true(wr_net_parse_ip("1.2.3.4", NULL));
}

/* ---- classes ------------------------------------------------------------ */

static void test_ipv4_classes(void **state) {
  (void)state;
  assert_class("8.8.8.8", WR_ADDR_PUBLIC);
  assert_class("172.32.0.1", WR_ADDR_PUBLIC);
  assert_class("127.255.0.1", WR_ADDR_LOOPBACK);
  assert_class("10.1.2.3", WR_ADDR_PRIVATE);
  assert_class("172.16.0.1", WR_ADDR_PRIVATE);
  assert_class("172.31.255.255", WR_ADDR_PRIVATE);
  assert_class("192.168.1.1", WR_ADDR_PRIVATE);
  assert_class("169.254.1.1", WR_ADDR_LINK_LOCAL);
  assert_class("100.64.0.1", WR_ADDR_CGNAT);
  assert_class("100.127.255.255", WR_ADDR_CGNAT);
  assert_class("100.128.0.1", WR_ADDR_PUBLIC);
  assert_class("169.254.169.254", WR_ADDR_METADATA);
  assert_class("169.254.170.2", WR_ADDR_METADATA);
  assert_class("100.100.100.200", WR_ADDR_METADATA);
  assert_class("224.0.0.1", WR_ADDR_MULTICAST);
  assert_class("239.255.255.250", WR_ADDR_MULTICAST);
  assert_class("0.0.0.0", WR_ADDR_UNSPECIFIED);
  assert_class("0.1.2.3", WR_ADDR_UNSPECIFIED);
  assert_class("255.255.255.255", WR_ADDR_RESERVED);
  assert_class("240.0.0.1", WR_ADDR_RESERVED);
  assert_class("192.0.0.8", WR_ADDR_RESERVED);
  assert_class("192.0.2.1", WR_ADDR_RESERVED);
  assert_class("198.51.100.1", WR_ADDR_RESERVED);
  assert_class("203.0.113.1", WR_ADDR_RESERVED);
  assert_class("198.19.0.1", WR_ADDR_RESERVED);
}

static void test_ipv6_classes(void **state) {
  (void)state;
  assert_class("2606:4700::1111", WR_ADDR_PUBLIC);
  assert_class("::", WR_ADDR_UNSPECIFIED);
  assert_class("::1", WR_ADDR_LOOPBACK);
  assert_class("fe80::1", WR_ADDR_LINK_LOCAL);
  assert_class("febf::1", WR_ADDR_LINK_LOCAL);
  assert_class("fd00::1", WR_ADDR_ULA);
  assert_class("fc12::1", WR_ADDR_ULA);
  assert_class("fd00:ec2::254", WR_ADDR_METADATA);
  assert_class("ff02::1", WR_ADDR_MULTICAST);
  assert_class("2001:db8::1", WR_ADDR_RESERVED);
  assert_class("100::1", WR_ADDR_RESERVED);
  assert_class("4000::1", WR_ADDR_RESERVED);
  assert_class("fec0::1", WR_ADDR_RESERVED);
}

/* IPv6 addresses that carry an IPv4 address take its class. */
static void test_embedded_ipv4_classes(void **state) {
  (void)state;
  assert_class("[::ffff:127.0.0.1]", WR_ADDR_LOOPBACK);
  assert_class("::ffff:7f00:1", WR_ADDR_LOOPBACK);
  assert_class("::ffff:169.254.169.254", WR_ADDR_METADATA);
  assert_class("::ffff:8.8.8.8", WR_ADDR_PUBLIC);
  assert_class("::127.0.0.1", WR_ADDR_LOOPBACK);
  assert_class("::10.0.0.1", WR_ADDR_PRIVATE);
  assert_class("64:ff9b::a9fe:a9fe", WR_ADDR_METADATA);
  assert_class("64:ff9b::10.0.0.1", WR_ADDR_PRIVATE);
  assert_class("64:ff9b::8.8.8.8", WR_ADDR_PUBLIC);
  assert_class("64:ff9b:1::7f00:1", WR_ADDR_LOOPBACK);
  assert_class("64:ff9b:1:7f00:1:100:808:808", WR_ADDR_LOOPBACK);
  assert_class("2002:7f00:1::", WR_ADDR_LOOPBACK);
  assert_class("2002:a9fe:a9fe::1", WR_ADDR_METADATA);
  assert_class("2002:808:808::1", WR_ADDR_PUBLIC);
  /* Teredo: the client address is the last 32 bits inverted. */
  assert_class("2001:0:4136:e378:8000:63bf:80ff:fffe", WR_ADDR_LOOPBACK);
  assert_class("2001:0:4136:e378:8000:63bf:5601:5601", WR_ADDR_METADATA);
  assert_class("2001:0:4136:e378:8000:63bf:f7f7:f7f7", WR_ADDR_PUBLIC);
}

static void test_class_names(void **state) {
  (void)state;
  assert_string_equal(wr_net_addr_class_name(WR_ADDR_PUBLIC), "public");
  assert_string_equal(wr_net_addr_class_name(WR_ADDR_LOOPBACK), "loopback");
  assert_string_equal(wr_net_addr_class_name(WR_ADDR_METADATA), "metadata");
  assert_string_equal(wr_net_addr_class_name(WR_ADDR_LINK_LOCAL), "link-local");
  assert_string_equal(wr_net_addr_class_name((enum wr_addr_class)99),
                      "unknown");
}

/* ---- addresses ---------------------------------------------------------- */

static void test_sockaddr_round_trip(void **state) {
  const char *const addrs[] = {"10.1.2.3", "2001:db8::7"};
  (void)state;

  for (size_t i = 0; i < 2; i++) {
    struct wr_net_addr a = ip(addrs[i]), b;
    struct sockaddr_storage ss;
    uint16_t port = 0;
    socklen_t len = wr_net_addr_to_sockaddr(&a, 8443, &ss);

    assert_int_equal(len, a.family == AF_INET ? sizeof(struct sockaddr_in)
                                              : sizeof(struct sockaddr_in6));
    assert_true(wr_net_addr_from_sockaddr((struct sockaddr *)&ss, &b, &port));
    assert_int_equal(port, 8443);
    assert_int_equal(b.family, a.family);
    assert_memory_equal(b.bytes, a.bytes, 16);
  }
}

static void test_sockaddr_other_family(void **state) {
  struct sockaddr_storage ss = {.ss_family = AF_UNIX};
  struct wr_net_addr a = {.family = AF_UNIX}, b;
  (void)state;

  assert_false(wr_net_addr_from_sockaddr((struct sockaddr *)&ss, &b, NULL));
  assert_int_equal(wr_net_addr_to_sockaddr(&a, 1, &ss), 0);
}

static void test_format_small_buffer(void **state) {
  struct wr_net_addr a = ip("2001:db8::7");
  char small[4] = "xyz";
  (void)state;

  wr_net_addr_format(&a, small, sizeof(small));
  assert_string_equal(small, "");
}

static void test_addr_in(void **state) {
  struct wr_net_addr a = ip("10.1.2.3"), net = ip("10.0.0.0");
  struct wr_net_addr a6 = ip("fd00::1"), net6 = ip("fc00::");
  (void)state;

  assert_true(wr_net_addr_in(&a, &net, 8));
  assert_false(wr_net_addr_in(&a, &net, 16));
  assert_true(wr_net_addr_in(&a, &net, 0));
  assert_false(wr_net_addr_in(&a, &net, 33));
  assert_true(wr_net_addr_in(&a6, &net6, 7));
  assert_false(wr_net_addr_in(&a6, &net6, 8));
  assert_false(wr_net_addr_in(&a6, &net, 0));
  assert_true(wr_net_addr_in(&a, &a, 32));
}

/* ---- names -------------------------------------------------------------- */

static void test_normalize_ascii(void **state) {
  (void)state;
  assert_norm("Example.COM", "example.com");
  assert_norm("example.com.", "example.com");
  assert_norm("A_b-C.example", "a_b-c.example");
  assert_norm("localhost", "localhost");
  assert_norm("1password.com", "1password.com");
  assert_norm("10.in-addr.arpa", "10.in-addr.arpa");
  assert_norm("XN--BCHER-KVA.example", "xn--bcher-kva.example");
}

static void test_normalize_ip_literals(void **state) {
  char out[WR_HOST_MAX];
  struct wr_net_addr a;
  bool is_ip = false;
  (void)state;

  assert_int_equal(wr_net_normalize_host("0x7f.1", out, &is_ip, &a, NULL), 0);
  assert_true(is_ip);
  assert_string_equal(out, "127.0.0.1");
  assert_int_equal(a.family, AF_INET);
  assert_norm("[::FFFF:127.0.0.1]", "::ffff:127.0.0.1");
  assert_norm("::1", "::1");
  assert_norm("2130706433", "127.0.0.1");
  assert_int_equal(
      wr_net_normalize_host("example.com", out, &is_ip, NULL, NULL), 0);
  assert_false(is_ip);
}

static void test_normalize_idna(void **state) {
  (void)state;
  assert_norm("bücher.example", "xn--bcher-kva.example");
  assert_norm("Bücher.Example.", "xn--bcher-kva.example");
  assert_norm("münchen.de", "xn--mnchen-3ya.de");
  /* No Unicode case mapping: Ü is encoded as given. */
  assert_norm("bÜcher.example", "xn--bcher-2pa.example");
  /* The ideographic full stop separates labels. */
  assert_norm("bücher\xe3\x80\x82"
              "example",
              "xn--bcher-kva.example");
  /* RFC 3492, 7.1: (A) Arabic, (B) Chinese, (K) Vietnamese, (L) and (M)
   * Japanese, with their ASCII in lower case. */
  assert_norm("\xd9\x84\xd9\x8a\xd9\x87\xd9\x85\xd8\xa7\xd8\xa8\xd8\xaa\xd9"
              "\x83\xd9\x84\xd9\x85\xd9\x88\xd8\xb4\xd8\xb9\xd8\xb1\xd8\xa8"
              "\xd9\x8a\xd8\x9f",
              "xn--egbpdaj6bu4bxfgehfvwxn");
  assert_norm("\xe4\xbb\x96\xe4\xbb\xac\xe4\xb8\xba\xe4\xbb\x80\xe4\xb9\x88"
              "\xe4\xb8\x8d\xe8\xaf\xb4\xe4\xb8\xad\xe6\x96\x87",
              "xn--ihqwcrb4cv8a8dqg056pqjye");
  assert_norm("T\xe1\xba\xa1isaoh\xe1\xbb\x8dkh\xc3\xb4ngth\xe1\xbb\x83"
              "ch\xe1\xbb\x89n\xc3\xb3iti\xe1\xba\xbfngVi\xe1\xbb\x87t",
              "xn--tisaohkhngthchnitingvit-kjcr8268qyxafd2f1b9g");
  assert_norm("3\xe5\xb9\xb4"
              "B\xe7\xb5\x84\xe9\x87\x91\xe5\x85\xab\xe5\x85"
              "\x88\xe7\x94\x9f",
              "xn--3b-ww4c5e180e575a65lsy2b");
  assert_norm("\xe5\xae\x89\xe5\xae\xa4\xe5\xa5\x88\xe7\xbe\x8e\xe6\x81\xb5"
              "-with-SUPER-MONKEYS",
              "xn---with-super-monkeys-pc58ag80a8qai00g7n9n");
}

static void test_normalize_lengths(void **state) {
  char label63[64], name253[254], name254[255], label[200];
  (void)state;

  memset(label63, 'a', 63);
  label63[63] = '\0';
  assert_norm(label63, label63);
  snprintf(name253, sizeof(name253), "%s.%s.%s.%.61s", label63, label63,
           label63, label63);
  assert_int_equal(strlen(name253), 253);
  assert_norm(name253, name253);
  snprintf(name254, sizeof(name254), "%s.%s.%s.%.62s", label63, label63,
           label63, label63);
  assert_norm_fails(name254);
  snprintf(label, sizeof(label), "%sa.com", label63);
  assert_norm_fails(label);
  /* 57 ü encode to 59 bytes, "xn--" makes 63; one more is too long. */
  label[0] = '\0';
  for (int i = 0; i < 57; i++)
    strcat(label, "\xc3\xbc");
  assert_int_equal(strlen(label), 114);
  {
    char out[WR_HOST_MAX];
    assert_int_equal(wr_net_normalize_host(label, out, NULL, NULL, NULL), 0);
    assert_int_equal(strlen(out), 63);
  }
  strcat(label, "\xc3\xbc");
  assert_norm_fails(label);
}

static void test_normalize_rejects(void **state) {
  static const char *const bad[] = {
      "",
      ".",
      "..",
      "a..b",
      "example.com..",
      ".example.com",
      "ex ample.com",
      "exa%6dple.com",
      "a/b.com",
      "a*b.com",
      "*.example.com",
      "exa\nmple.com",
      "\xc3\x28.com",         /* bad continuation */
      "\xed\xa0\x80.com",     /* surrogate */
      "\xc0\xaf.com",         /* overlong */
      "\xf4\x90\x80\x80.com", /* above U+10FFFF */
      "\xe2\x82",             /* truncated */
      "\x80.com",             /* lone continuation */
      "\xc2\x85.com",         /* C1 control */
      ("xn--b\xc3\xbc"
       "cher.com"),
      "1.2.3.4.5",
      "0x1g",
      "example.08",
      "1.2.3.4.5.",
      "::1:zz",
      "[::1]:80",
      "[example.com]",
      "example.com:80",
  };
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++)
    assert_norm_fails(bad[i]);
  assert_norm_fails(NULL);
}

static void test_normalize_is_idempotent(void **state) {
  static const char *const in[] = {
      "Bücher.Example.", "0177.1", "[::ffff:7f00:1]", "A.b_C.d-E", "xn--X",
  };
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(in); i++) {
    char once[WR_HOST_MAX], twice[WR_HOST_MAX];
    assert_int_equal(wr_net_normalize_host(in[i], once, NULL, NULL, NULL), 0);
    assert_int_equal(wr_net_normalize_host(once, twice, NULL, NULL, NULL), 0);
    assert_string_equal(once, twice);
  }
}

static void assert_split(const char *in, bool wildcard, const char *host,
                         uint16_t port) {
  char out[WR_HOST_MAX];
  uint16_t p = 99;
  wr_error_t err = {0};

  if (wr_net_split_hostport(in, wildcard, out, &p, &err) < 0)
    fail_msg("split `%s`: %s", in, err.msg);
  assert_string_equal(out, host);
  assert_int_equal(p, port);
}

static void assert_split_fails(const char *in, bool wildcard) {
  char out[WR_HOST_MAX];
  uint16_t p;
  wr_error_t err = {0};

  if (wr_net_split_hostport(in, wildcard, out, &p, &err) == 0)
    fail_msg("`%s` split into `%s` and %u", in, out, p);
  assert_true(err.msg[0] != '\0');
}

static void test_split_hostport(void **state) {
  (void)state;
  assert_split("example.com", false, "example.com", 0);
  assert_split("Example.com:443", false, "example.com", 443);
  assert_split("[::1]:8080", false, "::1", 8080);
  assert_split("[::1]", false, "::1", 0);
  assert_split("::1", false, "::1", 0);
  assert_split("fe80::1", false, "fe80::1", 0);
  assert_split("127.1:80", false, "127.0.0.1", 80);
  assert_split("bücher.example:65535", false, "xn--bcher-kva.example", 65535);
  assert_split("*.Example.com:443", true, "*.example.com", 443);
  assert_split("*.bücher.example", true, "*.xn--bcher-kva.example", 0);
  assert_split_fails("*.example.com", false);
  assert_split_fails("example.com:0", false);
  assert_split_fails("example.com:65536", false);
  assert_split_fails("example.com:", false);
  assert_split_fails("example.com:http", false);
  assert_split_fails("example.com:+80", false);
  assert_split_fails(":80", false);
  assert_split_fails("", false);
  assert_split_fails("[::1]x", false);
  assert_split_fails("[::1]:", false);
  assert_split_fails("[::1", false);
  assert_split_fails("[1.2.3.4]:80", false);
  assert_split_fails("*.1.2.3.4", true);
  assert_split_fails("*.", true);
  assert_split_fails("1:2:3", false);
  assert_split_fails("1.2.3.4.5:80", false);
}

/* ---- rules -------------------------------------------------------------- */

static struct wr_rule rule_ok(const char *spec, bool allow) {
  struct wr_rule r;
  wr_error_t err = {0};

  if (wr_rule_parse(spec, allow, &r, &err) < 0)
    fail_msg("parse `%s`: %s", spec, err.msg);
  return r;
}

static void assert_rule_fails(const char *spec, const char *msg_part) {
  struct wr_rule r;
  wr_error_t err = {0};

  if (wr_rule_parse(spec, true, &r, &err) == 0)
    fail_msg("`%s` parsed as a rule", spec);
  if (msg_part != NULL && strstr(err.msg, msg_part) == NULL)
    fail_msg("`%s`: `%s` does not mention `%s`", spec, err.msg, msg_part);
  assert_null(r.pattern);
}

static void assert_rule(const char *spec, enum wr_rule_kind kind,
                        const char *pattern, uint16_t port, unsigned prefix,
                        const char *text) {
  struct wr_rule r = rule_ok(spec, true), again;
  _cleanup_free_ char *formatted = wr_rule_format(&r);
  _cleanup_free_ char *formatted_again = NULL;

  assert_int_equal(r.kind, kind);
  assert_string_equal(r.pattern, pattern);
  assert_int_equal(r.port, port);
  assert_int_equal(r.allow, true);
  assert_null(r.sandbox);
  assert_null(r.source);
  if (kind == WR_RULE_IP || kind == WR_RULE_CIDR)
    assert_int_equal(r.prefix, prefix);
  assert_string_equal(formatted, text);
  again = rule_ok(formatted + strlen("allow "), true);
  formatted_again = wr_rule_format(&again);
  assert_string_equal(formatted_again, formatted);
  wr_rule_clear(&again);
  wr_rule_clear(&r);
  assert_null(r.pattern);
}

static void test_rule_parse(void **state) {
  struct wr_rule r;
  _cleanup_free_ char *text = NULL;
  (void)state;

  assert_rule("Example.com", WR_RULE_DOMAIN, "example.com", 0, 0,
              "allow example.com");
  assert_rule("*.Example.com:443", WR_RULE_SUFFIX, "*.example.com", 443, 0,
              "allow *.example.com:443");
  assert_rule("*.co.uk", WR_RULE_SUFFIX, "*.co.uk", 0, 0, "allow *.co.uk");
  assert_rule("10.0.0.0/8", WR_RULE_CIDR, "10.0.0.0/8", 0, 8,
              "allow 10.0.0.0/8");
  assert_rule("10.0.0.0/8:5432", WR_RULE_CIDR, "10.0.0.0/8", 5432, 8,
              "allow 10.0.0.0/8:5432");
  assert_rule("0.0.0.0/0", WR_RULE_CIDR, "0.0.0.0/0", 0, 0, "allow 0.0.0.0/0");
  assert_rule("fd00::/8", WR_RULE_CIDR, "fd00::/8", 0, 8, "allow fd00::/8");
  assert_rule("[fd00::/8]:443", WR_RULE_CIDR, "fd00::/8", 443, 8,
              "allow [fd00::/8]:443");
  assert_rule("[FD00::]/8:443", WR_RULE_CIDR, "fd00::/8", 443, 8,
              "allow [fd00::/8]:443");
  assert_rule("127.1", WR_RULE_IP, "127.0.0.1", 0, 32, "allow 127.0.0.1");
  assert_rule("0x7f000001:22", WR_RULE_IP, "127.0.0.1", 22, 32,
              "allow 127.0.0.1:22");
  assert_rule("::1", WR_RULE_IP, "::1", 0, 128, "allow ::1");
  assert_rule("::ffff:10.0.0.1", WR_RULE_IP, "10.0.0.1", 0, 32,
              "allow 10.0.0.1");
  assert_rule("[::ffff:10.0.0.0/104]:80", WR_RULE_CIDR, "10.0.0.0/8", 80, 8,
              "allow 10.0.0.0/8:80");
  assert_rule("::ffff:0:0/96", WR_RULE_CIDR, "0.0.0.0/0", 0, 0,
              "allow 0.0.0.0/0");
  assert_rule_fails("::ffff:0:0/80", "host bits");
  assert_rule("[::1]:80", WR_RULE_IP, "::1", 80, 128, "allow [::1]:80");
  assert_rule("bücher.example", WR_RULE_DOMAIN, "xn--bcher-kva.example", 0, 0,
              "allow xn--bcher-kva.example");
  r = rule_ok("example.com:22", false);
  assert_false(r.allow);
  text = wr_rule_format(&r);
  assert_string_equal(text, "deny example.com:22");
  wr_rule_clear(&r);
}

static void test_rule_parse_errors(void **state) {
  (void)state;
  assert_rule_fails("", "empty");
  assert_rule_fails(NULL, "empty");
  assert_rule_fails("*", "every host");
  assert_rule_fails("*:443", "every host");
  assert_rule_fails("*.com", "too broad");
  assert_rule_fails("*.com:443", "too broad");
  assert_rule_fails("*.", NULL);
  assert_rule_fails("*.*.example.com", NULL);
  assert_rule_fails("foo.*.com", NULL);
  assert_rule_fails("example.com:0", "port");
  assert_rule_fails("example.com:65536", "port");
  assert_rule_fails("example.com:99999999", "port");
  assert_rule_fails("10.0.0.1/8", "host bits");
  assert_rule_fails("10.0.0.0/33", "out of range");
  assert_rule_fails("fd00::/129", "out of range");
  assert_rule_fails("fd00::1/8", "host bits");
  assert_rule_fails("10.0.0.0/", "prefix");
  assert_rule_fails("10.0.0.0/x", "prefix");
  assert_rule_fails("10.0.0.0/8/8", "prefix");
  assert_rule_fails("10.0.0.0/0008", "prefix");
  assert_rule_fails("example.com/8", "needs an IP");
  assert_rule_fails("foo bar", NULL);
  assert_rule_fails("http://example.com", NULL);
  assert_rule_fails("1.2.3.4.5", NULL);
  assert_rule_fails("[example.com]:80", NULL);
}

/* ---- policy ------------------------------------------------------------- */

static void add(struct wr_policy *p, const char *spec, bool allow, int64_t id,
                const char *sandbox) {
  struct wr_rule r = rule_ok(spec, allow);

  r.id = id;
  r.sandbox = sandbox ? xstrdup(sandbox) : NULL;
  r.source = xstrdup("user");
  wr_policy_add(p, &r);
  wr_rule_clear(&r);
}

static struct wr_verdict check(const struct wr_policy *p, const char *sandbox,
                               const char *host, const char *addr,
                               uint16_t port) {
  struct wr_net_addr a;
  struct wr_verdict v;

  if (addr != NULL)
    a = ip(addr);
  wr_policy_check(p, sandbox, host, addr ? &a : NULL, port, &v);
  return v;
}

static void assert_verdict(const struct wr_policy *p, const char *sandbox,
                           const char *host, const char *addr, uint16_t port,
                           bool allow, const char *reason) {
  struct wr_verdict v = check(p, sandbox, host, addr, port);

  if (v.allow != allow || (reason && strcmp(v.reason, reason) != 0))
    fail_msg("%s %s:%u: got %s \"%s\", want %s \"%s\"", host ? host : "-",
             addr ? addr : "-", port, v.allow ? "allow" : "deny", v.reason,
             allow ? "allow" : "deny", reason ? reason : "");
}

static void test_presets(void **state) {
  struct wr_policy *open = wr_policy_new(WR_PRESET_OPEN);
  struct wr_policy *locked = wr_policy_new(WR_PRESET_LOCKED);
  enum wr_policy_preset pr;
  wr_error_t err = {0};
  (void)state;

  assert_verdict(open, NULL, "example.com", NULL, 443, true, "preset open");
  assert_verdict(open, NULL, "example.com", "93.184.216.34", 443, true,
                 "preset open");
  assert_verdict(open, NULL, NULL, "93.184.216.34", 443, true, "preset open");
  assert_verdict(locked, NULL, "example.com", NULL, 443, false,
                 "no rule allows example.com (preset locked)");
  assert_verdict(locked, NULL, NULL, "93.184.216.34", 443, false,
                 "no rule allows 93.184.216.34 (preset locked)");
  assert_int_equal(wr_policy_get_preset(locked), WR_PRESET_LOCKED);
  assert_int_equal(wr_policy_nrules(locked), 0);
  assert_null(wr_policy_rule(locked, 0));
  assert_string_equal(wr_policy_preset_name(WR_PRESET_BALANCED), "balanced");
  assert_int_equal(wr_policy_preset_parse("locked", &pr, &err), 0);
  assert_int_equal(pr, WR_PRESET_LOCKED);
  assert_int_equal(wr_policy_preset_parse("open", &pr, &err), 0);
  assert_int_equal(pr, WR_PRESET_OPEN);
  assert_int_equal(wr_policy_preset_parse("wide", &pr, &err), -1);
  assert_non_null(strstr(err.msg, "wide"));
  wr_policy_unref(open);
  wr_policy_unref(locked);
}

static void test_deny_wins(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_OPEN);
  (void)state;

  add(p, "example.com", true, 3, NULL);
  add(p, "example.com", false, 4, NULL);
  add(p, "*.example.org", true, 5, NULL);
  add(p, "bad.example.org", false, 6, NULL);
  assert_verdict(p, NULL, "example.com", NULL, 443, false,
                 "deny example.com (rule 4)");
  assert_verdict(p, NULL, "bad.example.org", "93.184.216.34", 443, false,
                 "deny bad.example.org (rule 6)");
  assert_verdict(p, NULL, "good.example.org", "93.184.216.34", 443, true,
                 "allow *.example.org (rule 5)");
  assert_ptr_equal(check(p, NULL, "example.com", NULL, 1).rule,
                   wr_policy_rule(p, 1));
  wr_policy_unref(p);
}

static void test_suffix_rules(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_LOCKED);
  (void)state;

  add(p, "*.example.com", true, 1, NULL);
  assert_verdict(p, NULL, "a.example.com", NULL, 443, true,
                 "allow *.example.com (rule 1)");
  assert_verdict(p, NULL, "a.b.example.com", NULL, 443, true, NULL);
  assert_verdict(p, NULL, "example.com", NULL, 443, false,
                 "no rule allows example.com (preset locked)");
  assert_verdict(p, NULL, "notexample.com", NULL, 443, false, NULL);
  assert_verdict(p, NULL, "example.com.evil", NULL, 443, false, NULL);
  wr_policy_unref(p);
}

static void test_port_rules(void **state) {
  struct wr_policy *locked = wr_policy_new(WR_PRESET_LOCKED);
  struct wr_policy *open = wr_policy_new(WR_PRESET_OPEN);
  (void)state;

  add(locked, "example.com:443", true, 1, NULL);
  assert_verdict(locked, NULL, "example.com", NULL, 443, true,
                 "allow example.com:443 (rule 1)");
  assert_verdict(locked, NULL, "example.com", NULL, 80, false, NULL);
  /* Port 0 (DNS) asks about no port: a port's allow rule applies. */
  assert_verdict(locked, NULL, "example.com", NULL, 0, true, NULL);
  add(open, "example.com:22", false, 2, NULL);
  assert_verdict(open, NULL, "example.com", NULL, 22, false,
                 "deny example.com:22 (rule 2)");
  assert_verdict(open, NULL, "example.com", NULL, 443, true, "preset open");
  assert_verdict(open, NULL, "example.com", NULL, 0, true, "preset open");
  wr_policy_unref(locked);
  wr_policy_unref(open);
}

static void test_sandbox_rules(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_LOCKED);
  (void)state;

  add(p, "x.example", true, 1, "sb-1");
  add(p, "y.example", true, 2, NULL);
  add(p, "y.example", false, 3, "sb-2");
  assert_verdict(p, "sb-1", "x.example", NULL, 443, true,
                 "allow x.example (rule 1)");
  assert_verdict(p, "sb-2", "x.example", NULL, 443, false, NULL);
  assert_verdict(p, NULL, "x.example", NULL, 443, false, NULL);
  assert_verdict(p, "sb-1", "y.example", NULL, 443, true,
                 "allow y.example (rule 2)");
  assert_verdict(p, "sb-2", "y.example", NULL, 443, false,
                 "deny y.example (rule 3)");
  wr_policy_unref(p);
}

static void test_private_addresses(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_OPEN);
  (void)state;

  assert_verdict(p, NULL, "example.com", "127.0.0.1", 443, false,
                 "127.0.0.1 is loopback and no rule names it");
  assert_verdict(p, NULL, NULL, "169.254.169.254", 80, false,
                 "169.254.169.254 is metadata and no rule names it");
  assert_verdict(p, NULL, NULL, "::ffff:127.0.0.1", 80, false,
                 "::ffff:127.0.0.1 is loopback and no rule names it");
  assert_verdict(p, NULL, NULL, "64:ff9b::a9fe:a9fe", 80, false, NULL);
  assert_verdict(p, NULL, "example.com", "10.0.0.5", 5432, false,
                 "10.0.0.5 is private and no rule names it");
  /* A domain rule never names an address. */
  add(p, "localhost", true, 1, NULL);
  assert_verdict(p, NULL, "localhost", "127.0.0.1", 80, false, NULL);
  add(p, "10.0.0.0/8:5432", true, 2, NULL);
  assert_verdict(p, NULL, "db.internal", "10.0.0.5", 5432, true, "preset open");
  assert_verdict(p, NULL, NULL, "10.0.0.5", 5432, true,
                 "allow 10.0.0.0/8:5432 (rule 2)");
  assert_verdict(p, NULL, NULL, "::ffff:10.0.0.5", 5432, true, NULL);
  assert_verdict(p, NULL, NULL, "10.0.0.5", 22, false, NULL);
  /* An IP literal given as the host is judged as an address. */
  assert_verdict(p, NULL, "127.0.0.1", NULL, 80, false,
                 "127.0.0.1 is loopback and no rule names it");
  wr_policy_unref(p);
}

static void test_address_rules(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_LOCKED);
  (void)state;

  add(p, "example.com", true, 1, NULL);
  add(p, "93.184.216.0/24", false, 2, NULL);
  add(p, "198.51.100.7", true, 3, NULL);
  add(p, "8.8.8.8", true, 4, NULL);
  assert_verdict(p, NULL, "example.com", "93.184.216.34", 443, false,
                 "deny 93.184.216.0/24 (rule 2)");
  assert_verdict(p, NULL, NULL, "::ffff:93.184.216.34", 443, false,
                 "deny 93.184.216.0/24 (rule 2)");
  assert_verdict(p, NULL, NULL, "2002:5db8:d822::1", 443, false,
                 "deny 93.184.216.0/24 (rule 2)");
  assert_verdict(p, NULL, "example.com", "1.1.1.1", 443, true,
                 "allow example.com (rule 1)");
  assert_verdict(p, NULL, "other.example", "8.8.8.8", 443, false,
                 "no rule allows other.example (preset locked)");
  /* When both stages deny, a deny rule or the address class is the more
   * telling reason; a deny rule for the name comes first of all. */
  assert_verdict(p, NULL, "other.example", "93.184.216.34", 443, false,
                 "deny 93.184.216.0/24 (rule 2)");
  assert_verdict(p, NULL, "other.example", "127.0.0.1", 443, false,
                 "127.0.0.1 is loopback and no rule names it");
  add(p, "bad.example", false, 5, NULL);
  assert_verdict(p, NULL, "bad.example", "93.184.216.34", 443, false,
                 "deny bad.example (rule 5)");
  assert_verdict(p, NULL, NULL, "8.8.8.8", 53, true, "allow 8.8.8.8 (rule 4)");
  assert_verdict(p, NULL, NULL, "198.51.100.7", 443, true,
                 "allow 198.51.100.7 (rule 3)");
  assert_verdict(p, NULL, "example.com", "198.51.100.7", 443, true,
                 "allow example.com (rule 1)");
  assert_verdict(p, NULL, NULL, NULL, 443, false, NULL);
  wr_policy_unref(p);
}

static void test_ipv6_rules(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_LOCKED);
  (void)state;

  add(p, "[fd00::/8]:443", true, 1, NULL);
  add(p, "::1", true, 2, NULL);
  assert_verdict(p, NULL, NULL, "fd12::1", 443, true,
                 "allow [fd00::/8]:443 (rule 1)");
  assert_verdict(p, NULL, NULL, "fd12::1", 80, false,
                 "fd12::1 is ula and no rule names it");
  assert_verdict(p, NULL, NULL, "::1", 80, true, "allow ::1 (rule 2)");
  assert_verdict(p, NULL, NULL, "127.0.0.1", 80, false, NULL);
  wr_policy_unref(p);
}

static char *write_temp(const char *text) {
  char *path = xstrdup("/tmp/test_net.XXXXXX");
  int fd = mkstemp(path);

  assert_true(fd >= 0);
  assert_int_equal(wr_write_all(fd, text, strlen(text), NULL), 0);
  close(fd);
  return path;
}

static void test_load_preset(void **state) {
  _cleanup_free_ char *path =
      write_temp("# comment\n\n  pypi.org  # trailing\n*.pythonhosted.org\r\n"
                 "@npm-registry\ngithub.com:22");
  struct wr_policy *p = wr_policy_new(WR_PRESET_BALANCED);
  struct wr_policy *q = wr_policy_new(WR_PRESET_BALANCED);
  static const struct wr_preset_refs npm = {.npm_registry =
                                                "NPM.mirror.example"};
  static const struct wr_preset_refs npm_ip = {.npm_registry = "10.0.0.1"};
  wr_error_t err = {0};
  (void)state;

  if (wr_policy_load_preset(p, path, &npm, &err) < 0)
    fail_msg("load: %s", err.msg);
  assert_int_equal(wr_policy_nrules(p), 4);
  assert_string_equal(wr_policy_rule(p, 0)->source, "preset balanced");
  assert_int_equal(wr_policy_rule(p, 0)->id, 0);
  assert_verdict(p, NULL, "pypi.org", NULL, 443, true,
                 "allow pypi.org (preset balanced)");
  assert_verdict(p, NULL, "files.pythonhosted.org", "104.16.0.1", 443, true,
                 "allow *.pythonhosted.org (preset balanced)");
  assert_verdict(p, NULL, "npm.mirror.example", NULL, 443, true,
                 "allow npm.mirror.example (preset balanced: npm registry)");
  assert_verdict(p, NULL, "github.com", NULL, 22, true, NULL);
  assert_verdict(p, NULL, "github.com", NULL, 443, false,
                 "no rule allows github.com (preset balanced)");
  assert_verdict(p, NULL, "pypi.org", "127.0.0.1", 443, false,
                 "127.0.0.1 is loopback and no rule names it");
  assert_int_equal(wr_policy_load_preset(q, path, NULL, &err), 0);
  assert_int_equal(wr_policy_nrules(q), 3);
  /* A registry configured by address is left out like a missing one. */
  assert_int_equal(wr_policy_load_preset(q, path, &npm_ip, &err), 0);
  assert_int_equal(wr_policy_nrules(q), 6);
  assert_verdict(q, NULL, NULL, "10.0.0.1", 443, false, NULL);
  unlink(path);
  wr_policy_unref(p);
  wr_policy_unref(q);
}

static void assert_preset_fails(const char *text, const char *msg_part) {
  _cleanup_free_ char *path = write_temp(text);
  struct wr_policy *p = wr_policy_new(WR_PRESET_BALANCED);
  static const struct wr_preset_refs bad = {.npm_registry = "bad name"};
  wr_error_t err = {0};

  assert_int_equal(wr_policy_load_preset(p, path, &bad, &err), -1);
  assert_int_equal(wr_policy_nrules(p), 0);
  if (strstr(err.msg, msg_part) == NULL)
    fail_msg("`%s` does not mention `%s`", err.msg, msg_part);
  unlink(path);
  wr_policy_unref(p);
}

static void test_load_preset_errors(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_BALANCED);
  wr_error_t err = {0};
  (void)state;

  assert_preset_fails("pypi.org\nbad name\n", ":2:");
  assert_preset_fails("pypi.org\n*.pythonhosted.org\n@pip\n", ":3:");
  assert_preset_fails("10.0.0.0/8\n", "addresses");
  assert_preset_fails("@pip-registry\n", "unknown entry");
  assert_preset_fails("@npm-registry\n", "npm registry");
  assert_preset_fails("*.com\n", "too broad");
  assert_int_equal(
      wr_policy_load_preset(p, "/nonexistent/balanced.txt", NULL, &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_policy_unref(p);
}

/* The shipped preset file: the names the design lists are in it, and the
 * hosts it names by reference. */
static void test_balanced_file(void **state) {
  static char *const apt[] = {"apt.mirror.example", "security.mirror.example",
                              NULL};
  static const struct wr_preset_refs file_refs = {
      .npm_registry = "npm.mirror.example", .apt_hosts = apt};
  static const char *const names[] = {
      "pypi.org",
      "files.pythonhosted.org",
      "static.crates.io",
      "proxy.golang.org",
      "github.com",
      "codeload.github.com",
      "api.anthropic.com",
      "generativelanguage.googleapis.com",
      "registry.yarnpkg.com",
  };
  struct wr_policy *p = wr_policy_new(WR_PRESET_BALANCED);
  const char *path = "data/policy/balanced.txt";
  wr_error_t err = {0};
  struct stat st;
  (void)state;

  if (stat(path, &st) < 0)
    path = "../../data/policy/balanced.txt";
  if (wr_policy_load_preset(p, path, &file_refs, &err) < 0)
    fail_msg("load %s: %s", path, err.msg);
  for (size_t i = 0; i < WR_ARRAY_SIZE(names); i++)
    assert_verdict(p, NULL, names[i], NULL, 443, true, NULL);
  assert_verdict(p, NULL, "npm.mirror.example", NULL, 443, true, NULL);
  assert_verdict(p, NULL, "apt.mirror.example", NULL, 443, true, NULL);
  assert_verdict(p, NULL, "security.mirror.example", NULL, 80, true, NULL);
  assert_verdict(p, NULL, "example.com", NULL, 443, false, NULL);
  assert_verdict(p, NULL, "evil.github.com", NULL, 443, false, NULL);
  wr_policy_unref(p);
}

/* The hosts the host's own configuration names may resolve to a private
 * or reserved address, on the port it names; loopback, link-local,
 * metadata and multicast stay refused, and a rule someone wrote for a
 * name gets no such leave, even for the same address. */
static void test_host_chosen(void **state) {
  _cleanup_free_ char *path =
      write_temp("pypi.org\n@npm-registry\n@apt-sources\n");
  static char *const apt[] = {"apt.mirror.example:80", NULL};
  static const struct wr_preset_refs refs = {
      .npm_registry = "npm.corp.example:4873", .apt_hosts = apt};
  static const char *const refused[] = {
      "127.0.0.1", "169.254.169.254", "169.254.1.1",
      "::1",       "fe80::1",         "fd00:ec2::254",
      "224.0.0.1", "0.0.0.0",         "::ffff:127.0.0.1"};
  struct wr_policy *p = wr_policy_new(WR_PRESET_BALANCED);
  struct wr_verdict v;
  wr_error_t err = {0};
  (void)state;

  if (wr_policy_load_preset(p, path, &refs, &err) < 0)
    fail_msg("load: %s", err.msg);
  assert_false(wr_policy_rule(p, 0)->host_chosen);
  assert_true(wr_policy_rule(p, 1)->host_chosen);
  assert_true(wr_policy_rule(p, 2)->host_chosen);
  assert_string_equal(wr_policy_rule(p, 2)->source,
                      "preset balanced: apt source");
  assert_verdict(p, NULL, "npm.corp.example", "10.1.2.3", 4873, true,
                 "allow npm.corp.example:4873 (preset balanced: npm "
                 "registry); 10.1.2.3 is private, allowed for a host-chosen "
                 "name");
  assert_verdict(p, NULL, "npm.corp.example", "192.0.2.7", 4873, true, NULL);
  assert_verdict(p, NULL, "npm.corp.example", "100.64.0.9", 4873, true, NULL);
  assert_verdict(p, NULL, "npm.corp.example", "fd12::9", 4873, true, NULL);
  assert_verdict(p, NULL, "apt.mirror.example", "172.16.0.5", 80, true, NULL);
  /* Only on the port the configuration names. */
  assert_verdict(p, NULL, "npm.corp.example", "10.1.2.3", 443, false, NULL);
  assert_verdict(p, NULL, "apt.mirror.example", "172.16.0.5", 443, false, NULL);
  for (size_t i = 0; i < WR_ARRAY_SIZE(refused); i++)
    assert_verdict(p, NULL, "npm.corp.example", refused[i], 4873, false, NULL);
  v = check(p, NULL, NULL, "10.1.2.3", 4873);
  assert_false(v.allow); /* the address alone is not host-chosen */
  /* A user's rule for another name at the same address is not. */
  add(p, "other.example", true, 1, NULL);
  assert_verdict(p, NULL, "other.example", "10.1.2.3", 4873, false,
                 "10.1.2.3 is private and no rule names it");
  assert_verdict(p, NULL, "pypi.org", "10.1.2.3", 443, false, NULL);
  unlink(path);
  wr_policy_unref(p);
}

static void *ref_unref(void *arg) {
  struct wr_policy *p = arg;

  for (int i = 0; i < 100000; i++)
    wr_policy_unref(wr_policy_ref(p));
  wr_policy_unref(p);
  return NULL;
}

/* Each thread holds a reference and drops it at the end; the last one
 * frees (ASan in the sanitizer build sees a double free or a leak). */
static void test_refcount_threads(void **state) {
  struct wr_policy *p = wr_policy_new(WR_PRESET_OPEN);
  pthread_t t[4];
  (void)state;

  add(p, "example.com", true, 1, NULL);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, ref_unref, wr_policy_ref(p)),
                     0);
  wr_policy_unref(p);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  assert_null(wr_policy_ref(NULL));
  wr_policy_unref(NULL);
}

/* ---- secrets ------------------------------------------------------------ */

static void test_secret_builtins(void **state) {
  const struct wr_secret_builtin *b;
  (void)state;

  b = wr_secret_builtin("anthropic");
  assert_non_null(b);
  assert_string_equal(b->hosts[0], "api.anthropic.com");
  assert_null(b->hosts[1]);
  assert_string_equal(b->header, "x-api-key");
  assert_string_equal(b->prefix, "");
  assert_string_equal(b->env[0], "ANTHROPIC_API_KEY");
  b = wr_secret_builtin("openai");
  assert_string_equal(b->hosts[0], "api.openai.com");
  assert_string_equal(b->header, "Authorization");
  assert_string_equal(b->prefix, "Bearer ");
  assert_string_equal(b->env[0], "OPENAI_API_KEY");
  b = wr_secret_builtin("github");
  assert_string_equal(b->hosts[0], "api.github.com");
  assert_string_equal(b->hosts[1], "github.com");
  assert_null(b->hosts[2]);
  assert_string_equal(b->env[0], "GITHUB_TOKEN");
  assert_string_equal(b->env[1], "GH_TOKEN");
  assert_null(b->env[2]);
  assert_null(wr_secret_builtin("gitlab"));
  assert_null(wr_secret_builtin(NULL));
}

static void test_secret_clear(void **state) {
  struct wr_secret s = {
      .service = xstrdup("custom"),
      .hosts = wr_strv_push(NULL, "api.example.com"),
      .header = xstrdup("X-Token"),
      .prefix = xstrdup(""),
      .env = wr_strv_push(NULL, "TOKEN"),
      .value = xstrdup("hunter2"),
  };
  (void)state;

  wr_secret_clear(&s);
  assert_null(s.service);
  assert_null(s.hosts);
  assert_null(s.value);
  wr_secret_clear(&s);
}

/* ---- sniffing ----------------------------------------------------------- */

/* What a real OpenSSL client sends first, taken from the network side of
 * a BIO pair. */
static size_t openssl_hello(const char *sni, uint8_t *out, size_t size) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  BIO *inside = NULL, *network = NULL;
  SSL *ssl;
  int n;

  assert_non_null(ctx);
  ssl = SSL_new(ctx);
  assert_non_null(ssl);
  assert_int_equal(BIO_new_bio_pair(&inside, 0, &network, 0), 1);
  SSL_set_bio(ssl, inside, inside);
  if (sni != NULL)
    assert_int_equal(SSL_set_tlsext_host_name(ssl, sni), 1);
  assert_true(SSL_connect(ssl) <= 0);
  assert_int_equal(SSL_get_error(ssl, -1), SSL_ERROR_WANT_READ);
  n = BIO_read(network, out, (int)size);
  assert_true(n > 0);
  BIO_free(network);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return (size_t)n;
}

static void test_sniff_openssl_hello(void **state) {
  uint8_t hello[4096] = {0};
  char sni[WR_HOST_MAX];
  size_t n = openssl_hello("Api.Example.COM", hello, sizeof(hello));
  (void)state;

  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_TLS);
  assert_string_equal(sni, "Api.Example.COM");
  for (size_t len = 0; len < n; len++) {
    if (wr_sniff_client(hello, len, sni) != WR_SNIFF_MORE)
      fail_msg("a prefix of %zu of %zu bytes is not MORE", len, n);
    assert_string_equal(sni, "");
  }
  /* Bytes after the record (a second record) do not matter. */
  assert_int_equal(wr_sniff_client(hello, sizeof(hello), sni), WR_SNIFF_TLS);
  n = openssl_hello(NULL, hello, sizeof(hello));
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_TLS);
  assert_string_equal(sni, "");
}

static void assert_sniff_other(uint8_t *hello, size_t n, size_t at,
                               uint8_t value) {
  uint8_t saved = hello[at];
  char sni[WR_HOST_MAX];

  hello[at] = value;
  if (wr_sniff_client(hello, n, sni) != WR_SNIFF_OTHER)
    fail_msg("byte %zu = 0x%02x is not OTHER", at, value);
  assert_string_equal(sni, "");
  hello[at] = saved;
}

static void test_sniff_malformed_openssl_hello(void **state) {
  uint8_t hello[4096];
  size_t n = openssl_hello("example.com", hello, sizeof(hello));
  char sni[WR_HOST_MAX];
  (void)state;

  assert_sniff_other(hello, n, 1, 0x02); /* record version 2.x */
  assert_sniff_other(hello, n, 5, 0x02); /* ServerHello */
  assert_sniff_other(hello, n, 6, 0x01); /* handshake longer than record */
  assert_sniff_other(hello, n, 43, 33);  /* session id longer than 32 */
  /* A record longer than TLS allows, or empty. */
  hello[3] = 0x40;
  hello[4] = 0x01;
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  hello[3] = hello[4] = 0;
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  /* A record cut short: the handshake no longer fits. */
  n = openssl_hello("example.com", hello, sizeof(hello));
  hello[3] = (uint8_t)((n - 6) >> 8);
  hello[4] = (uint8_t)(n - 6);
  assert_int_equal(wr_sniff_client(hello, n - 1, sni), WR_SNIFF_OTHER);
}

/* A ClientHello built by hand around the given extensions. */
static size_t make_hello(const uint8_t *ext, size_t ext_len, uint8_t *out) {
  static const uint8_t fixed[] = {
      0x03,        0x03,             /* legacy_version */
      [34] = 0x00,                   /* random, then an empty session id */
      0x00,        0x02, 0x13, 0x01, /* one cipher suite */
      0x01,        0x00,             /* null compression */
  };
  size_t body = sizeof(fixed) + 2 + ext_len;

  out[0] = 22;
  out[1] = 3;
  out[2] = 1;
  out[3] = (uint8_t)((body + 4) >> 8);
  out[4] = (uint8_t)(body + 4);
  out[5] = 1;
  out[6] = 0;
  out[7] = (uint8_t)(body >> 8);
  out[8] = (uint8_t)body;
  memcpy(out + 9, fixed, sizeof(fixed));
  out[9 + sizeof(fixed)] = (uint8_t)(ext_len >> 8);
  out[10 + sizeof(fixed)] = (uint8_t)ext_len;
  memcpy(out + 11 + sizeof(fixed), ext, ext_len);
  return 11 + sizeof(fixed) + ext_len;
}

/* A server_name extension with one host_name of len bytes of c. */
static size_t sni_ext(uint8_t *out, size_t len, char c) {
  out[0] = 0;
  out[1] = 0;
  out[2] = (uint8_t)((len + 5) >> 8);
  out[3] = (uint8_t)(len + 5);
  out[4] = (uint8_t)((len + 3) >> 8);
  out[5] = (uint8_t)(len + 3);
  out[6] = 0;
  out[7] = (uint8_t)(len >> 8);
  out[8] = (uint8_t)len;
  memset(out + 9, c, len);
  return 9 + len;
}

static void test_sniff_crafted_hellos(void **state) {
  uint8_t ext[2048], hello[4096];
  char sni[WR_HOST_MAX];
  size_t e, n;
  (void)state;

  e = sni_ext(ext, 255, 'a');
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_TLS);
  assert_int_equal(strlen(sni), 255);
  e = sni_ext(ext, 256, 'a');
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  /* Two server_name extensions. */
  e = sni_ext(ext, 3, 'a');
  e += sni_ext(ext + e, 3, 'b');
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  /* A NUL inside the name, and an empty name. */
  e = sni_ext(ext, 3, 'a');
  ext[10] = 0;
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  e = sni_ext(ext, 0, 'a');
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  /* An unknown extension first, then the name. */
  memcpy(ext, "\xff\x01\x00\x01\x00", 5);
  e = 5 + sni_ext(ext + 5, 11, 'x');
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_TLS);
  assert_string_equal(sni, "xxxxxxxxxxx");
  /* The name list claims more than the extension holds. */
  e = sni_ext(ext, 4, 'a');
  ext[5] = 8;
  n = make_hello(ext, e, hello);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_OTHER);
  /* No extensions at all. */
  n = make_hello(ext, 0, hello) - 2;
  hello[4] = (uint8_t)(hello[4] - 2);
  hello[8] = (uint8_t)(hello[8] - 2);
  assert_int_equal(wr_sniff_client(hello, n, sni), WR_SNIFF_TLS);
  assert_string_equal(sni, "");
}

static enum wr_sniff sniff_text(const char *s) {
  char sni[WR_HOST_MAX];

  return wr_sniff_client((const uint8_t *)s, strlen(s), sni);
}

static void test_sniff_http_and_other(void **state) {
  (void)state;
  assert_int_equal(sniff_text("GET / HTTP/1.1\r\n"), WR_SNIFF_HTTP);
  assert_int_equal(sniff_text("POST "), WR_SNIFF_HTTP);
  assert_int_equal(sniff_text("CONNECT example.com:443 HTTP/1.1"),
                   WR_SNIFF_HTTP);
  assert_int_equal(sniff_text(""), WR_SNIFF_MORE);
  assert_int_equal(sniff_text("G"), WR_SNIFF_MORE);
  assert_int_equal(sniff_text("GET"), WR_SNIFF_MORE);
  assert_int_equal(sniff_text("ABCDEFGHIJKLMNO"), WR_SNIFF_MORE);
  assert_int_equal(sniff_text("ABCDEFGHIJKLMNOP"), WR_SNIFF_OTHER);
  assert_int_equal(sniff_text("ABCDEFGHIJKLMNO "), WR_SNIFF_HTTP);
  assert_int_equal(sniff_text("get / HTTP/1.1"), WR_SNIFF_OTHER);
  assert_int_equal(sniff_text(" GET"), WR_SNIFF_OTHER);
  assert_int_equal(sniff_text("GE T"), WR_SNIFF_HTTP);
  assert_int_equal(sniff_text("GE\rT"), WR_SNIFF_OTHER);
  assert_int_equal(sniff_text("SSH-2.0-OpenSSH_9.2"), WR_SNIFF_OTHER);
  assert_int_equal(sniff_text("\x16"), WR_SNIFF_MORE);
  assert_int_equal(sniff_text("\x16\x03\x01"), WR_SNIFF_MORE);
  assert_int_equal(sniff_text("\x16\x02"), WR_SNIFF_OTHER);
  assert_int_equal(sniff_text("\x80\x2e\x01"), WR_SNIFF_OTHER);
}

/* ---- DNS ---------------------------------------------------------------- */

/* A query for name (dotted, "" for the root) with the given header. */
static size_t make_query(uint8_t *out, uint16_t id, uint16_t flags,
                         uint16_t qdcount, const char *name, uint16_t qtype) {
  size_t n = 12;

  memset(out, 0, 12);
  out[0] = (uint8_t)(id >> 8);
  out[1] = (uint8_t)id;
  out[2] = (uint8_t)(flags >> 8);
  out[3] = (uint8_t)flags;
  out[5] = (uint8_t)qdcount;
  while (*name != '\0') {
    const char *dot = strchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    out[n++] = (uint8_t)len;
    memcpy(out + n, name, len);
    n += len;
    name += len + (dot != NULL);
  }
  out[n++] = 0;
  out[n++] = (uint8_t)(qtype >> 8);
  out[n++] = (uint8_t)qtype;
  out[n++] = 0;
  out[n++] = 1;
  return n;
}

static uint16_t be16(const uint8_t *p) {
  return (uint16_t)(p[0] << 8 | p[1]);
}

static void test_dns_parse(void **state) {
  uint8_t msg[600];
  struct wr_dns_query q;
  size_t n = make_query(msg, 0xbeef, 0x0100, 1, "WWW.Example.COM", 28);
  (void)state;

  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  assert_int_equal(q.id, 0xbeef);
  assert_int_equal(q.flags, 0x0100);
  assert_string_equal(q.name, "www.example.com");
  assert_int_equal(q.qtype, WR_DNS_AAAA);
  assert_int_equal(q.qclass, 1);
  assert_int_equal(q.question_end, 12 + 17 + 4);
  n = make_query(msg, 1, 0, 1, "", 1);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  assert_string_equal(q.name, "");
  n = make_query(msg, 1, 0, 1, "_dmarc.a-b.example", 16);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  assert_string_equal(q.name, "_dmarc.a-b.example");
}

static void assert_dns_rcode(const uint8_t *msg, size_t n, int rcode) {
  struct wr_dns_query q;

  assert_int_equal(wr_dns_parse_query(msg, n, &q), rcode);
  if (rcode > 0)
    assert_int_equal(q.id, be16(msg));
}

static void test_dns_parse_malformed(void **state) {
  uint8_t msg[600];
  size_t n = make_query(msg, 7, 0x0100, 1, "example.com", 1);
  char long_name[300];
  (void)state;

  assert_dns_rcode(msg, 11, -1);
  assert_dns_rcode(NULL, 0, -1);
  msg[2] |= 0x80; /* a response */
  assert_dns_rcode(msg, n, -1);
  n = make_query(msg, 7, 0x1100, 1, "example.com", 1); /* opcode 2 */
  assert_dns_rcode(msg, n, WR_DNS_NOTIMP);
  n = make_query(msg, 7, 0x0100, 2, "example.com", 1);
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  n = make_query(msg, 7, 0x0100, 0, "example.com", 1);
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  n = make_query(msg, 7, 0x0100, 1, "example.com", 1);
  assert_dns_rcode(msg, 12 + 5, WR_DNS_FORMERR);  /* cut in a label */
  assert_dns_rcode(msg, 12 + 13, WR_DNS_FORMERR); /* no type and class */
  assert_dns_rcode(msg, 12 + 16, WR_DNS_FORMERR);
  msg[12 + 8] = 0xc0; /* a compression pointer for "com" */
  msg[12 + 9] = 12;
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  n = make_query(msg, 7, 0x0100, 1, "exa mple.com", 1);
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  n = make_query(msg, 7, 0x0100, 1, "a.b", 1);
  msg[13] = '.';
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  msg[13] = 0;
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  n = make_query(msg, 7, 0x0100, 1, "a.b", 1);
  msg[12] = 0x41; /* an extended label type */
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  memset(long_name, 'a', 64);
  strcpy(long_name + 64, ".com");
  n = make_query(msg, 7, 0x0100, 1, long_name, 1);
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  /* Labels of 63, 63, 63 and 62 take 256 bytes on the wire, one too
   * many; with 61 the name is 253 characters, the most there can be. */
  for (int i = 0; i < 4; i++) {
    memset(long_name + i * 64, 'a', 63);
    long_name[i * 64 + 63] = '.';
  }
  long_name[254] = '\0';
  n = make_query(msg, 7, 0x0100, 1, long_name, 1);
  assert_dns_rcode(msg, n, WR_DNS_FORMERR);
  long_name[253] = '\0';
  n = make_query(msg, 7, 0x0100, 1, long_name, 1);
  assert_dns_rcode(msg, n, 0);
}

static void test_dns_reply(void **state) {
  struct wr_net_addr addrs[3] = {ip("93.184.216.34"), ip("2001:db8::1"),
                                 ip("10.1.2.3")};
  uint8_t msg[600], out[600];
  struct wr_dns_query q;
  size_t n = make_query(msg, 0x1234, 0x0100, 1, "Example.com", 1), r, a;
  (void)state;

  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  r = wr_dns_build_reply(&q, msg, WR_DNS_NOERROR, addrs, 3, 60, 512, out,
                         sizeof(out));
  assert_int_equal(r, q.question_end + 2 * 16);
  assert_int_equal(be16(out), 0x1234);
  assert_int_equal(be16(out + 2), 0x8180); /* QR, RD, RA, NOERROR */
  assert_int_equal(be16(out + 4), 1);
  assert_int_equal(be16(out + 6), 2);
  assert_int_equal(be16(out + 8), 0);
  assert_int_equal(be16(out + 10), 0);
  assert_memory_equal(out + 12, msg + 12, q.question_end - 12);
  a = q.question_end;
  assert_int_equal(be16(out + a), 0xc00c);
  assert_int_equal(be16(out + a + 2), WR_DNS_A);
  assert_int_equal(be16(out + a + 4), 1);
  assert_int_equal(be16(out + a + 6), 0);
  assert_int_equal(be16(out + a + 8), 60);
  assert_int_equal(be16(out + a + 10), 4);
  assert_memory_equal(out + a + 12, addrs[0].bytes, 4);
  assert_memory_equal(out + a + 28, addrs[2].bytes, 4);
  /* The reply parses as a response: it is dropped as a query. */
  assert_int_equal(wr_dns_parse_query(out, r, &q), -1);
}

static void test_dns_reply_aaaa_and_errors(void **state) {
  struct wr_net_addr addrs[2] = {ip("93.184.216.34"), ip("2001:db8::1")};
  uint8_t msg[600], out[600];
  struct wr_dns_query q;
  size_t n = make_query(msg, 9, 0x0000, 1, "example.com", 28), r;
  (void)state;

  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  r = wr_dns_build_reply(&q, msg, WR_DNS_NOERROR, addrs, 2, 5, 512, out,
                         sizeof(out));
  assert_int_equal(r, q.question_end + 28);
  assert_int_equal(be16(out + 2), 0x8080); /* RD was not set */
  assert_memory_equal(out + q.question_end + 12, addrs[1].bytes, 16);
  r = wr_dns_build_reply(&q, msg, WR_DNS_NXDOMAIN, addrs, 2, 5, 512, out,
                         sizeof(out));
  assert_int_equal(r, q.question_end);
  assert_int_equal(be16(out + 2), 0x8083);
  assert_int_equal(be16(out + 6), 0);
  /* A FORMERR for a broken question: the header alone. */
  n = make_query(msg, 9, 0x0100, 2, "example.com", 1);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), WR_DNS_FORMERR);
  r = wr_dns_build_reply(&q, msg, WR_DNS_FORMERR, NULL, 0, 0, 512, out,
                         sizeof(out));
  assert_int_equal(r, 12);
  assert_int_equal(be16(out), 9);
  assert_int_equal(be16(out + 2), 0x8181);
  assert_int_equal(be16(out + 4), 0);
  /* NOTIMP keeps the opcode. */
  n = make_query(msg, 9, 0x2800, 1, "example.com", 1);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), WR_DNS_NOTIMP);
  r = wr_dns_build_reply(&q, msg, WR_DNS_NOTIMP, NULL, 0, 0, 512, out,
                         sizeof(out));
  assert_int_equal(r, 12);
  assert_int_equal(be16(out + 2), 0xa884);
}

static void test_dns_reply_bounds(void **state) {
  struct wr_net_addr addrs[64];
  uint8_t msg[600], out[600];
  struct wr_dns_query q;
  size_t n = make_query(msg, 1, 0x0100, 1, "example.com", 1), r;
  (void)state;

  for (size_t i = 0; i < 64; i++)
    addrs[i] = ip("192.0.2.1");
  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  assert_int_equal(wr_dns_build_reply(&q, msg, 0, addrs, 64, 1, 512, out, 11),
                   0);
  memset(out, 0xaa, sizeof(out));
  r = wr_dns_build_reply(&q, msg, 0, addrs, 64, 1, 512, out, 12);
  assert_int_equal(r, 12);
  assert_int_equal(be16(out + 4), 0);
  assert_int_equal(out[12], 0xaa);
  r = wr_dns_build_reply(&q, msg, 0, addrs, 64, 1, 512, out,
                         q.question_end + 16 + 15);
  assert_int_equal(r, q.question_end + 16);
  assert_int_equal(be16(out + 6), 1);
  assert_int_equal(out[r], 0xaa);
  /* A reply that does not fit says TC, so the client asks over TCP. */
  r = wr_dns_build_reply(&q, msg, 0, addrs, 64, 1, 512, out, sizeof(out));
  assert_true(r <= 512);
  assert_int_equal(be16(out + 6), (512 - q.question_end) / 16);
  assert_int_equal(be16(out + 2), 0x8380);
}

/* A query with an OPT record after its question (RFC 6891). */
static size_t add_opt(uint8_t *msg, size_t n, uint16_t size, uint8_t version,
                      uint16_t rdlen) {
  uint8_t *o = msg + n;

  o[0] = 0;
  o[1] = 0, o[2] = 41;
  o[3] = (uint8_t)(size >> 8), o[4] = (uint8_t)size;
  o[5] = 0, o[6] = version, o[7] = 0, o[8] = 0;
  o[9] = (uint8_t)(rdlen >> 8), o[10] = (uint8_t)rdlen;
  memset(o + 11, 0, rdlen);
  msg[11] = 1; /* ARCOUNT */
  return n + 11 + rdlen;
}

static void test_dns_edns(void **state) {
  struct wr_net_addr addrs[64];
  uint8_t msg[600], out[WR_DNS_REPLY_MAX];
  struct wr_dns_query q;
  size_t n = make_query(msg, 1, 0x0100, 1, "example.com", 1), r;
  (void)state;

  for (size_t i = 0; i < 64; i++)
    addrs[i] = ip("192.0.2.1");
  n = add_opt(msg, n, 4096, 0, 4);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  assert_true(q.edns);
  /* The advertised size is honoured up to WR_DNS_EDNS_MAX. */
  assert_int_equal(wr_dns_udp_limit(&q), WR_DNS_EDNS_MAX);
  r = wr_dns_build_reply(&q, msg, 0, addrs, 64, 7, wr_dns_udp_limit(&q), out,
                         sizeof(out));
  assert_int_equal(r, q.question_end + 64 * 16 + 11);
  assert_int_equal(be16(out + 2), 0x8180);
  assert_int_equal(be16(out + 6), 64);
  assert_int_equal(be16(out + 10), 1); /* our OPT */
  assert_int_equal(out[r - 11], 0);
  assert_int_equal(be16(out + r - 10), 41);
  assert_int_equal(be16(out + r - 8), WR_DNS_EDNS_MAX);
  /* A small size is 512; what does not fit is cut and says TC. */
  n = make_query(msg, 1, 0x0100, 1, "example.com", 1);
  n = add_opt(msg, n, 100, 0, 0);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), 0);
  assert_int_equal(wr_dns_udp_limit(&q), 512);
  r = wr_dns_build_reply(&q, msg, 0, addrs, 64, 7, 512, out, sizeof(out));
  assert_true(r <= 512);
  assert_int_equal(be16(out + 2), 0x8380);
  assert_int_equal(be16(out + 10), 1);
  /* An unknown EDNS version: BADVERS, carried in the OPT record. */
  n = make_query(msg, 1, 0x0100, 1, "example.com", 1);
  n = add_opt(msg, n, 1232, 1, 0);
  assert_int_equal(wr_dns_parse_query(msg, n, &q), WR_DNS_BADVERS);
  r = wr_dns_build_reply(&q, msg, WR_DNS_BADVERS, NULL, 0, 0, 512, out,
                         sizeof(out));
  assert_int_equal(be16(out + 2) & 0xf, 0);
  assert_int_equal(out[r - 6], 1); /* extended rcode 16 >> 4 */
  /* An OPT record whose data runs past the message. */
  n = make_query(msg, 1, 0x0100, 1, "example.com", 1);
  n = add_opt(msg, n, 1232, 0, 8) - 4;
  assert_int_equal(wr_dns_parse_query(msg, n, &q), WR_DNS_FORMERR);
}

static void test_dns_tcp_frame(void **state) {
  uint8_t buf[2 + WR_DNS_TCP_QUERY_MAX + 1] = {0};
  size_t len = 0;
  (void)state;

  assert_int_equal(wr_dns_tcp_frame(buf, 1, &len), 0);
  buf[1] = 29;
  assert_int_equal(wr_dns_tcp_frame(buf, 2, &len), 0);
  assert_int_equal(wr_dns_tcp_frame(buf, 30, &len), 0);
  assert_int_equal(wr_dns_tcp_frame(buf, 31, &len), 1);
  assert_int_equal(len, 29);
  buf[1] = 11; /* shorter than a header */
  assert_int_equal(wr_dns_tcp_frame(buf, 40, &len), -1);
  buf[0] = (uint8_t)((WR_DNS_TCP_QUERY_MAX + 1) >> 8);
  buf[1] = (uint8_t)(WR_DNS_TCP_QUERY_MAX + 1);
  assert_int_equal(wr_dns_tcp_frame(buf, sizeof(buf), &len), -1);
}

/* ---- held buffers (held.c) --------------------------------------------- */

/* Half of tcp_mem's pressure threshold, never below one sandbox's budget;
 * a fallback for text that makes no sense. */
static void test_held_budget(void **state) {
  (void)state;
  assert_int_equal(wr_net_held_budget("287892\t383858\t575784\n", 4096),
                   (size_t)383858 * 4096 / 2);
  assert_int_equal(wr_net_held_budget("10 20 30", 4096), WR_HELD_PER_SANDBOX);
  assert_int_equal(wr_net_held_budget("x", 4096), WR_HELD_FALLBACK);
  assert_int_equal(wr_net_held_budget(NULL, 4096), WR_HELD_FALLBACK);
  assert_int_equal(wr_net_held_budget("1 18446744073709551615 2", 4096),
                   WR_HELD_FALLBACK);
}

/* A sandbox's connections all fit up to its cap: the first ones get the
 * big tier and the largest upstream buffers, later ones the small tier
 * and the smallest, and growth never takes what the connections still to
 * come need; what is released can be held again; the global budget
 * counts kernel buffers only. */
static void test_held_connections(void **state) {
  struct wr_net n = {.held_max = (size_t)1 << 30};
  struct wr_net_sb sb = {.n = &n};
  struct wr_held base = wr_conn_base_held();
  struct wr_net_conn *c, **all = xcalloc(WR_CONNS_PER_SANDBOX, sizeof(*all));
  size_t count = 0, first = 0, last = 0, big = 0;

  (void)state;
  assert_true(base.kernel < base.all);
  assert_true(WR_CONNS_PER_SANDBOX * base.all < WR_HELD_PER_SANDBOX / 4 * 3);
  while (count < WR_CONNS_PER_SANDBOX) {
    assert_true(wr_net_can_hold(&n, &sb, base));
    c = xcalloc(1, sizeof(*c));
    c->n = &n;
    c->sb = &sb;
    sb.nconns++; /* as wr_conn_new does */
    assert_true(wr_conn_hold(c, base));
    wr_conn_choose_tier(c);
    big += c->tier == &wr_tier_big;
    last = wr_conn_upstream_size(c);
    assert_int_equal(wr_conn_upstream_size(c), last); /* chosen once */
    if (count == 0) {
      first = last;
      assert_ptr_equal(c->tier, &wr_tier_big);
    }
    all[count++] = c;
    assert_true(sb.held + wr_net_reserve(&sb) <= WR_HELD_PER_SANDBOX);
  }
  assert_int_equal(first, WR_SOCKBUF_UP_MAX);
  assert_int_equal(last, WR_SOCKBUF_UP_MIN);
  assert_ptr_equal(all[count - 1]->tier, &wr_tier_small);
  assert_true(big > 10 && big < count / 4);
  assert_true(sb.held <= WR_HELD_PER_SANDBOX);
  assert_true(n.held_kernel < sb.held);
  assert_int_equal(wr_net_reserve(&sb), 0);
  /* What growth left is less than one more big connection would take. */
  assert_true(WR_HELD_PER_SANDBOX - sb.held <
              wr_conn_tier_held(&wr_tier_big).all - base.all);
  sb.nconns--;
  wr_net_release(&n, &sb, &all[0]->held);
  assert_true(wr_net_can_hold(&n, &sb, base));
  for (size_t i = 1; i < count; i++)
    wr_net_release(&n, &sb, &all[i]->held);
  assert_int_equal(sb.held, 0);
  assert_int_equal(n.held_kernel, 0);
  for (size_t i = 0; i < count; i++)
    free(all[i]);
  free(all);

  /* A small global budget binds before the sandbox's. */
  n.held_max = 4 * base.kernel;
  for (count = 0; wr_net_can_hold(&n, &sb, base); count++)
    sb.held += base.all, n.held_kernel += base.kernel;
  assert_int_equal(count, 4);
}

/* A bulk pipe is held only while the sandbox's reserve stays free, counts
 * in the sandbox's budget and not in the kernel's TCP one, and is given
 * back whole; an interception holds the big tier's relay share. */
static void test_held_pipes(void **state) {
  struct wr_net n = {.held_max = (size_t)1 << 30};
  struct wr_net_sb sb = {.n = &n, .nconns = 1};
  struct wr_net_conn c = {.n = &n, .sb = &sb, .tier = &wr_tier_small};
  struct wr_held base = wr_conn_base_held();
  struct wr_held big = wr_conn_tier_held(&wr_tier_big);

  (void)state;
  assert_true(base.all >= base.kernel + 2 * wr_tier_small.pipe);
  assert_true(wr_conn_hold(&c, base));
  assert_true(wr_conn_hold_pipe(&c));
  assert_int_equal(c.held.all, base.all + WR_PIPE_BULK - wr_tier_small.pipe);
  assert_int_equal(n.held_kernel, base.kernel);
  wr_conn_release_pipe(&c);
  assert_int_equal(sb.held, base.all);

  sb.held = WR_HELD_PER_SANDBOX - wr_net_reserve(&sb) - WR_PIPE_BULK / 2;
  assert_false(wr_conn_hold_pipe(&c));
  assert_int_equal(sb.held, WR_HELD_PER_SANDBOX - wr_net_reserve(&sb) -
                                WR_PIPE_BULK / 2);
  sb.held = base.all;

  /* The interception's share comes out of the budget, not the reserve. */
  assert_true(wr_conn_hold_intercept(&c));
  assert_int_equal(c.held.all, base.all + (big.all - big.kernel) -
                                   (base.all - base.kernel));
  assert_int_equal(c.held.kernel, base.kernel);
  c.tier = &wr_tier_big;
  c.held = big;
  sb.held = WR_HELD_PER_SANDBOX;
  assert_true(wr_conn_hold_intercept(&c)); /* nothing more to hold */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4_encodings_of_loopback),
      cmocka_unit_test(test_ipv4_encodings_of_metadata),
      cmocka_unit_test(test_ipv6_literals),
      cmocka_unit_test(test_not_ip_literals),
      cmocka_unit_test(test_ipv4_classes),
      cmocka_unit_test(test_ipv6_classes),
      cmocka_unit_test(test_embedded_ipv4_classes),
      cmocka_unit_test(test_class_names),
      cmocka_unit_test(test_sockaddr_round_trip),
      cmocka_unit_test(test_sockaddr_other_family),
      cmocka_unit_test(test_format_small_buffer),
      cmocka_unit_test(test_addr_in),
      cmocka_unit_test(test_normalize_ascii),
      cmocka_unit_test(test_normalize_ip_literals),
      cmocka_unit_test(test_normalize_idna),
      cmocka_unit_test(test_normalize_lengths),
      cmocka_unit_test(test_normalize_rejects),
      cmocka_unit_test(test_normalize_is_idempotent),
      cmocka_unit_test(test_split_hostport),
      cmocka_unit_test(test_rule_parse),
      cmocka_unit_test(test_rule_parse_errors),
      cmocka_unit_test(test_presets),
      cmocka_unit_test(test_deny_wins),
      cmocka_unit_test(test_suffix_rules),
      cmocka_unit_test(test_port_rules),
      cmocka_unit_test(test_sandbox_rules),
      cmocka_unit_test(test_private_addresses),
      cmocka_unit_test(test_address_rules),
      cmocka_unit_test(test_ipv6_rules),
      cmocka_unit_test(test_load_preset),
      cmocka_unit_test(test_load_preset_errors),
      cmocka_unit_test(test_balanced_file),
      cmocka_unit_test(test_refcount_threads),
      cmocka_unit_test(test_secret_builtins),
      cmocka_unit_test(test_secret_clear),
      cmocka_unit_test(test_sniff_openssl_hello),
      cmocka_unit_test(test_sniff_malformed_openssl_hello),
      cmocka_unit_test(test_sniff_crafted_hellos),
      cmocka_unit_test(test_sniff_http_and_other),
      cmocka_unit_test(test_dns_parse),
      cmocka_unit_test(test_dns_parse_malformed),
      cmocka_unit_test(test_dns_reply),
      cmocka_unit_test(test_dns_reply_aaaa_and_errors),
      cmocka_unit_test(test_dns_reply_bounds),
      cmocka_unit_test(test_dns_edns),
      cmocka_unit_test(test_dns_tcp_frame),
      cmocka_unit_test(test_held_budget),
      cmocka_unit_test(test_held_pipes),
      cmocka_unit_test(test_held_connections),
      cmocka_unit_test(test_host_chosen),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
