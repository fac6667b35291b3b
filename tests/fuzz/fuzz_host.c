/*
 * Fuzz host names and rules as they come from sandboxes (CONNECT targets,
 * Host headers, SNI) and users (`warren policy`): wr_net_parse_ip,
 * wr_net_normalize_host, wr_net_split_hostport and wr_rule_parse, each
 * checked against its own output: normalising is idempotent, a formatted
 * address or rule parses back to itself, and a rule matches what it names.
 */
#include <arpa/inet.h>

#include "common/common.h"
#include "net/net.h"

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_host: %s\n", what);
    abort();
  }
}

static void check_ip(const char *s) {
  struct wr_net_addr a, b;
  char text[INET6_ADDRSTRLEN];
  unsigned bits;

  if (!wr_net_parse_ip(s, &a))
    return;
  check(a.family == AF_INET || a.family == AF_INET6, "odd family");
  wr_net_addr_format(&a, text, sizeof(text));
  check(wr_net_parse_ip(text, &b) && memcmp(&a, &b, sizeof(a)) == 0,
        "formatted address does not parse back");
  check(strcmp(wr_net_addr_class_name(wr_net_addr_class(&a)), "unknown") != 0,
        "address without a class");
  bits = a.family == AF_INET ? 32 : 128;
  check(wr_net_addr_in(&a, &a, bits) && wr_net_addr_in(&a, &a, 0),
        "address not in its own network");
}

/* Every byte of a normalised name is a host character, a dot, or (for an
 * IP) a hex digit or colon. */
static void check_normalized(const char *in) {
  char out[WR_HOST_MAX], again[WR_HOST_MAX];
  struct wr_net_addr a;
  wr_error_t err = {0};
  bool is_ip = false, again_ip = false;

  if (wr_net_normalize_host(in, out, &is_ip, &a, &err) < 0) {
    check(err.msg[0] != '\0' && err.code == EINVAL, "failure without reason");
    check(out[0] == '\0', "output left after a failure");
    return;
  }
  check(strlen(out) > 0 && strlen(out) <= 253, "bad length");
  for (const char *p = out; *p != '\0'; p++)
    check((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.' || (is_ip && *p == ':'),
          "bad byte in normalised name");
  check(wr_net_normalize_host(out, again, &again_ip, NULL, NULL) == 0,
        "normalised name does not normalise");
  check(strcmp(out, again) == 0 && is_ip == again_ip, "not idempotent");
}

static void check_split(const char *in, bool wildcard) {
  char host[WR_HOST_MAX], again[WR_HOST_MAX];
  uint16_t port = 1;

  if (wr_net_split_hostport(in, wildcard, host, &port, NULL) < 0)
    return;
  check(port == 0 || strchr(in, ':') != NULL, "a port from nowhere");
  if (wildcard && wr_str_has_prefix(host, "*."))
    memmove(host, host + 2, strlen(host + 2) + 1);
  check(wr_net_normalize_host(host, again, NULL, NULL, NULL) == 0 &&
            strcmp(host, again) == 0,
        "split host is not normalised");
}

/* A rule formats to text that parses back to the same rule, and a policy
 * of that rule alone decides on what it names. */
static void check_rule(const char *in) {
  struct wr_rule r, again;
  _cleanup_free_ char *text = NULL, *text_again = NULL;
  struct wr_policy *p;
  struct wr_verdict v = {0};
  char below[WR_HOST_MAX + 2];

  if (wr_rule_parse(in, false, &r, NULL) < 0)
    return;
  text = wr_rule_format(&r);
  check(wr_str_has_prefix(text, "deny "), "format lost the verb");
  check(wr_rule_parse(text + 5, false, &again, NULL) == 0,
        "formatted rule does not parse");
  text_again = wr_rule_format(&again);
  check(strcmp(text, text_again) == 0, "rule changed on a round trip");
  p = wr_policy_new(WR_PRESET_OPEN);
  wr_policy_add(p, &r);
  snprintf(below, sizeof(below), "a%s", r.pattern + 1);
  if (r.kind == WR_RULE_DOMAIN)
    wr_policy_check(p, NULL, r.pattern, NULL, r.port, &v);
  else if (r.kind == WR_RULE_SUFFIX)
    wr_policy_check(p, NULL, below, NULL, r.port, &v);
  else
    wr_policy_check(p, NULL, NULL, &r.addr, r.port, &v);
  check(!v.allow && v.rule == wr_policy_rule(p, 0), "rule does not match");
  wr_policy_unref(p);
  wr_rule_clear(&r);
  wr_rule_clear(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  _cleanup_free_ char *s = NULL;

  if (size > 2048)
    return 0;
  s = xstrndup((const char *)data, size);
  check_ip(s);
  check_normalized(s);
  check_split(s, false);
  check_split(s, true);
  check_rule(s);
  return 0;
}
