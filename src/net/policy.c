/*
 * The egress policy: a preset and rules, and the one decision the proxy
 * and the DNS server make with them (see wr_policy_check in net.h).
 *
 * A policy is built once and then shared read-only between the loop and
 * the TLS threads, so only its reference count ever changes after that,
 * and that atomically.
 */
#include "common/common.h"
#include "net/net.h"

#include <stdatomic.h>
#include <strings.h>

/* The preset file is a short list of names; anything larger is a mistake. */
#define PRESET_FILE_MAX (1024 * 1024)
#define PRESET_SOURCE "preset balanced"

struct wr_policy {
  atomic_uint refs;
  enum wr_policy_preset preset;
  struct wr_rule *rules;
  size_t nrules, cap;
};

/* ---- presets ------------------------------------------------------------ */

static const char *const preset_names[] = {
    [WR_PRESET_OPEN] = "open",
    [WR_PRESET_BALANCED] = "balanced",
    [WR_PRESET_LOCKED] = "locked",
};

const char *wr_policy_preset_name(enum wr_policy_preset p) {
  if ((unsigned)p >= WR_ARRAY_SIZE(preset_names))
    return "unknown";
  return preset_names[p];
}

int wr_policy_preset_parse(const char *s, enum wr_policy_preset *out,
                           wr_error_t *err) {
  for (size_t i = 0; s != NULL && i < WR_ARRAY_SIZE(preset_names); i++) {
    if (strcasecmp(s, preset_names[i]) == 0) {
      *out = (enum wr_policy_preset)i;
      return 0;
    }
  }
  return wr_error_setx(err, EINVAL,
                       "unknown preset `%s` (use open, balanced or locked)",
                       s ? s : "");
}

/* ---- rules -------------------------------------------------------------- */

void wr_rule_clear(struct wr_rule *r) {
  free(r->sandbox);
  free(r->pattern);
  free(r->source);
  memset(r, 0, sizeof(*r));
}

static void rule_copy(struct wr_rule *dst, const struct wr_rule *src) {
  *dst = *src;
  dst->sandbox = src->sandbox ? xstrdup(src->sandbox) : NULL;
  dst->pattern = xstrdup(src->pattern ? src->pattern : "");
  dst->source = src->source ? xstrdup(src->source) : NULL;
}

/* "allow *.example.com:443"; an IPv6 pattern is bracketed before a port
 * so that the text parses back to the same rule. */
static void rule_text(const struct wr_rule *r, char *out, size_t size) {
  const char *verb = r->allow ? "allow" : "deny";
  const char *pattern = r->pattern ? r->pattern : "";
  bool v6 = (r->kind == WR_RULE_IP || r->kind == WR_RULE_CIDR) &&
            r->addr.family == AF_INET6;

  if (r->port == 0)
    snprintf(out, size, "%s %s", verb, pattern);
  else if (v6)
    snprintf(out, size, "%s [%s]:%u", verb, pattern, (unsigned)r->port);
  else
    snprintf(out, size, "%s %s:%u", verb, pattern, (unsigned)r->port);
}

char *wr_rule_format(const struct wr_rule *r) {
  char text[WR_HOST_MAX + 32];

  rule_text(r, text, sizeof(text));
  return xstrdup(text);
}

/* Take "/PREFIX" out of a spec: "10.0.0.0/8:443" -> "10.0.0.0:443" and 8,
 * "[fd00::/8]:443" -> "[fd00::]:443" and 8. *prefix is -1 without one. */
static int cut_prefix(const char *spec, char **rest, int *prefix,
                      wr_error_t *err) {
  const char *slash = strchr(spec, '/');
  const char *end;
  int v = 0;

  *prefix = -1;
  if (slash == NULL) {
    *rest = xstrdup(spec);
    return 0;
  }
  for (end = slash + 1; *end >= '0' && *end <= '9' && end - slash <= 3; end++)
    v = v * 10 + (*end - '0');
  if (end == slash + 1 || (*end != '\0' && *end != ':' && *end != ']'))
    return wr_error_setx(err, EINVAL, "`%s`: invalid prefix length", spec);
  *rest = xasprintf("%.*s%s", (int)(slash - spec), spec, end);
  *prefix = v;
  return 0;
}

/* An IPv4-mapped address (::ffff:a.b.c.d) is the IPv4 address itself to
 * the kernel, so a rule for one (with a prefix of at least 96) becomes
 * the IPv4 rule: it then judges both forms. */
static void unmap_v4(struct wr_rule *out, int *prefix, char *host,
                     size_t size) {
  static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
  struct wr_net_addr v4 = {.family = AF_INET};

  if (out->addr.family != AF_INET6 || memcmp(out->addr.bytes, mapped, 12) ||
      (*prefix >= 0 && *prefix < 96))
    return;
  memcpy(v4.bytes, out->addr.bytes + 12, 4);
  out->addr = v4;
  if (*prefix >= 0)
    *prefix -= 96;
  wr_net_addr_format(&v4, host, size);
}

/* An IP or CIDR rule; host is the canonical address text. */
static int ip_rule(struct wr_rule *out, const char *spec, char *host,
                   int prefix, wr_error_t *err) {
  unsigned bits;
  struct wr_net_addr net;
  char text[WR_HOST_MAX];

  unmap_v4(out, &prefix, host, WR_HOST_MAX);
  bits = out->addr.family == AF_INET ? 32 : 128;
  net = out->addr;
  if (prefix < 0) {
    out->kind = WR_RULE_IP;
    out->prefix = bits;
    out->pattern = xstrdup(host);
    return 0;
  }
  if ((unsigned)prefix > bits)
    return wr_error_setx(err, EINVAL, "`%s`: prefix /%d is out of range (0-%u)",
                         spec, prefix, bits);
  for (unsigned i = (unsigned)prefix; i < bits; i++)
    net.bytes[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
  if (memcmp(net.bytes, out->addr.bytes, bits / 8) != 0) {
    wr_net_addr_format(&net, text, sizeof(text));
    return wr_error_setx(err, EINVAL,
                         "`%s` has host bits set (the network is %s/%d)", spec,
                         text, prefix);
  }
  out->kind = WR_RULE_CIDR;
  out->prefix = (unsigned)prefix;
  out->pattern = xasprintf("%s/%d", host, prefix);
  return 0;
}

/* "*.example.com": names below a domain of at least two labels, so that
 * "*.com" cannot open a whole top-level domain by accident. */
static int suffix_rule(struct wr_rule *out, const char *spec, const char *host,
                       wr_error_t *err) {
  if (strchr(host + 2, '.') == NULL)
    return wr_error_setx(err, EINVAL,
                         "`%s` is too broad: name at least two labels after "
                         "`*.`",
                         spec);
  out->kind = WR_RULE_SUFFIX;
  out->pattern = xstrdup(host);
  return 0;
}

int wr_rule_parse(const char *spec, bool allow, struct wr_rule *out,
                  wr_error_t *err) {
  _cleanup_free_ char *rest = NULL;
  char host[WR_HOST_MAX];
  uint16_t port = 0;
  int prefix;

  memset(out, 0, sizeof(*out));
  if (spec == NULL || *spec == '\0')
    return wr_error_setx(err, EINVAL, "empty rule");
  if (strcmp(spec, "*") == 0 || wr_str_has_prefix(spec, "*:"))
    return wr_error_setx(
        err, EINVAL, "`%s` would match every host (use the open preset)", spec);
  if (cut_prefix(spec, &rest, &prefix, err) < 0 ||
      wr_net_split_hostport(rest, prefix < 0, host, &port, err) < 0)
    return -1;
  out->allow = allow;
  out->port = port;
  if (wr_net_parse_ip(host, &out->addr))
    return ip_rule(out, spec, host, prefix, err);
  if (prefix >= 0)
    return wr_error_setx(err, EINVAL,
                         "`%s`: a prefix length needs an IP address", spec);
  if (wr_str_has_prefix(host, "*."))
    return suffix_rule(out, spec, host, err);
  out->kind = WR_RULE_DOMAIN;
  out->pattern = xstrdup(host);
  return 0;
}

/* ---- policies ----------------------------------------------------------- */

struct wr_policy *wr_policy_new(enum wr_policy_preset preset) {
  struct wr_policy *p = xcalloc(1, sizeof(*p));

  atomic_init(&p->refs, 1);
  p->preset = preset;
  return p;
}

void wr_policy_add(struct wr_policy *p, const struct wr_rule *r) {
  if (p->nrules == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 16;
    p->rules = xrealloc(p->rules, p->cap * sizeof(*p->rules));
  }
  rule_copy(&p->rules[p->nrules++], r);
}

struct wr_policy *wr_policy_ref(struct wr_policy *p) {
  if (p != NULL)
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
  return p;
}

/* The last reference frees; acq_rel so that no thread's reads of the
 * policy can be ordered after the free. */
void wr_policy_unref(struct wr_policy *p) {
  if (p == NULL ||
      atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
    return;
  for (size_t i = 0; i < p->nrules; i++)
    wr_rule_clear(&p->rules[i]);
  free(p->rules);
  free(p);
}

enum wr_policy_preset wr_policy_get_preset(const struct wr_policy *p) {
  return p->preset;
}

size_t wr_policy_nrules(const struct wr_policy *p) {
  return p->nrules;
}

const struct wr_rule *wr_policy_rule(const struct wr_policy *p, size_t i) {
  return i < p->nrules ? &p->rules[i] : NULL;
}

/* ---- the preset file ---------------------------------------------------- */

static char *trim(char *s) {
  char *end;

  while (*s == ' ' || *s == '\t')
    s++;
  end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
    *--end = '\0';
  return s;
}

/* Add one preset entry. The preset names hosts only: it must never open
 * an address, which needs an IP rule of its own. A host found by
 * reference (npm's registry, apt's mirrors) may be an address; that entry
 * is then left out, as when there is none. */
static int preset_rule(struct wr_policy *p, const char *spec, const char *ref,
                       const char *where, wr_error_t *err) {
  struct wr_rule r;

  if (wr_rule_parse(spec, true, &r, err) < 0)
    return ref != NULL ? wr_error_wrap(err, "%s: %s", where, ref)
                       : wr_error_wrap(err, "%s", where);
  if (r.kind == WR_RULE_IP || r.kind == WR_RULE_CIDR) {
    wr_rule_clear(&r);
    if (ref != NULL)
      return 0;
    return wr_error_setx(err, EINVAL,
                         "%s: `%s`: the preset may only name hosts, not "
                         "addresses",
                         where, spec);
  }
  /* Only the host's own files and npm's configuration name these hosts,
   * and the host resolves them: a sandbox cannot point them elsewhere. */
  r.host_chosen = ref != NULL;
  r.source = ref != NULL ? xasprintf(PRESET_SOURCE ": %s", ref)
                         : xstrdup(PRESET_SOURCE);
  wr_policy_add(p, &r);
  wr_rule_clear(&r);
  return 0;
}

/* One line of the preset file: a name, a "*.suffix", "@npm-registry",
 * "@apt-sources", a comment or nothing. */
static int preset_line(struct wr_policy *p, char *line,
                       const struct wr_preset_refs *refs, const char *where,
                       wr_error_t *err) {
  static const struct wr_preset_refs none = {0};
  int r = 0;

  if (refs == NULL)
    refs = &none;
  line[strcspn(line, "#")] = '\0';
  line = trim(line);
  if (*line == '\0')
    return 0;
  if (line[0] != '@')
    return preset_rule(p, line, NULL, where, err);
  if (strcmp(line, "@npm-registry") == 0)
    return refs->npm_registry != NULL
               ? preset_rule(p, refs->npm_registry, "npm registry", where, err)
               : 0;
  if (strcmp(line, "@apt-sources") != 0)
    return wr_error_setx(err, EINVAL, "%s: unknown entry `%s`", where, line);
  for (size_t i = 0;
       refs->apt_hosts != NULL && refs->apt_hosts[i] != NULL && r == 0; i++)
    r = preset_rule(p, refs->apt_hosts[i], "apt source", where, err);
  return r;
}

/* The file is read into a scratch policy first so that a bad line leaves
 * p as it was rather than half loaded. */
int wr_policy_load_preset(struct wr_policy *p, const char *path,
                          const struct wr_preset_refs *refs, wr_error_t *err) {
  _cleanup_free_ char *data = NULL;
  struct wr_policy *scratch;
  char where[512];
  size_t len, lineno = 0;
  char *line, *next;
  int r = 0;

  if (wr_read_file(path, PRESET_FILE_MAX, &data, &len, err) < 0)
    return wr_error_wrap(err, "load preset");
  if (memchr(data, '\0', len) != NULL)
    return wr_error_setx(err, EINVAL, "preset `%s` holds a NUL byte", path);
  scratch = wr_policy_new(p->preset);
  for (line = data; line != NULL && r == 0; line = next) {
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    snprintf(where, sizeof(where), "%s:%zu", path, ++lineno);
    r = preset_line(scratch, line, refs, where, err);
  }
  for (size_t i = 0; r == 0 && i < scratch->nrules; i++)
    wr_policy_add(p, &scratch->rules[i]);
  wr_policy_unref(scratch);
  return r;
}

/* ---- decisions ---------------------------------------------------------- */

/* A rule applies to its sandbox (or all, when global) and its port (or
 * all, when 0). A check for port 0 asks about no port in particular, as
 * the DNS server does: an allow rule for one port then applies, a deny
 * rule for one port does not. */
static bool rule_applies(const struct wr_rule *r, const char *sandbox,
                         uint16_t port) {
  if (r->port != 0 && r->port != port && !(port == 0 && r->allow))
    return false;
  return r->sandbox == NULL ||
         (sandbox != NULL && strcmp(r->sandbox, sandbox) == 0);
}

/* Domain rules match names only; "*.example.com" matches names below
 * example.com, never example.com itself. */
static bool name_matches(const struct wr_rule *r, const char *host) {
  size_t hlen, slen;

  if (r->kind == WR_RULE_DOMAIN)
    return strcmp(r->pattern, host) == 0;
  if (r->kind != WR_RULE_SUFFIX)
    return false;
  hlen = strlen(host);
  slen = strlen(r->pattern + 1);
  return hlen > slen && memcmp(host + hlen - slen, r->pattern + 1, slen) == 0;
}

static bool addr_matches(const struct wr_rule *r, const struct wr_net_addr *a) {
  struct wr_net_addr v4[2];
  size_t n;

  if (r->kind != WR_RULE_IP && r->kind != WR_RULE_CIDR)
    return false;
  if (wr_net_addr_in(a, &r->addr, r->prefix))
    return true;
  n = r->addr.family == AF_INET ? wr_net_addr_embedded_v4(a, v4) : 0;
  for (size_t i = 0; i < n; i++)
    if (wr_net_addr_in(&v4[i], &r->addr, r->prefix))
      return true;
  return false;
}

/* What a decision is about: a name or an address, for one sandbox and
 * port. */
struct target {
  const char *sandbox;
  const char *host;
  const struct wr_net_addr *addr;
  uint16_t port;
};

/* The first rule of the given verb that applies and matches. */
static const struct wr_rule *find_rule(const struct wr_policy *p,
                                       const struct target *t, bool allow) {
  for (size_t i = 0; i < p->nrules; i++) {
    const struct wr_rule *r = &p->rules[i];
    if (r->allow != allow || !rule_applies(r, t->sandbox, t->port))
      continue;
    if (t->host != NULL ? name_matches(r, t->host) : addr_matches(r, t->addr))
      return r;
  }
  return NULL;
}

/* The reason is one line of at most 191 bytes; a long name is cut, which
 * is safe because normalised names are ASCII. */
static void set_reason(struct wr_verdict *v, const char *fmt, ...)
    WR_PRINTF(2, 3);
static void set_reason(struct wr_verdict *v, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
  va_end(ap);
}

/* A verdict by a rule: "deny example.com (rule 4)", "allow *.pythonhosted.org
 * (preset balanced)". */
static void by_rule(struct wr_verdict *v, const struct wr_rule *r) {
  char text[WR_HOST_MAX + 32];

  rule_text(r, text, sizeof(text));
  v->allow = r->allow;
  v->rule = r;
  if (r->id > 0)
    set_reason(v, "%s (rule %lld)", text, (long long)r->id);
  else if (r->source != NULL)
    set_reason(v, "%s (%s)", text, r->source);
  else
    set_reason(v, "%s", text);
}

/* "REASON; MORE", cut like set_reason: the log then says why a private
 * address was allowed. */
static void append_reason(struct wr_verdict *v, const char *more) {
  size_t n = strlen(v->reason);

  snprintf(v->reason + n, sizeof(v->reason) - n, "; %s", more);
}

/* A verdict by the preset when no rule matched. */
static void by_preset(struct wr_verdict *v, const struct wr_policy *p,
                      const char *what) {
  v->rule = NULL;
  v->allow = p->preset == WR_PRESET_OPEN;
  if (v->allow)
    set_reason(v, "preset open");
  else
    set_reason(v, "no rule allows %s (preset %s)", what,
               wr_policy_preset_name(p->preset));
}

static void name_stage(const struct wr_policy *p, const struct target *t,
                       struct wr_verdict *v) {
  const struct wr_rule *r = find_rule(p, t, false);

  if (r == NULL)
    r = find_rule(p, t, true);
  if (r != NULL)
    by_rule(v, r);
  else
    by_preset(v, p, t->host);
}

bool wr_policy_host_chosen_ok(enum wr_addr_class c) {
  return c == WR_ADDR_PUBLIC || c == WR_ADDR_PRIVATE || c == WR_ADDR_CGNAT ||
         c == WR_ADDR_ULA || c == WR_ADDR_RESERVED;
}

/* The address stage. Only IP and CIDR rules name addresses; an address
 * that is not public needs one, unless the name that led there is
 * host-chosen (by_name, the name stage's allow rule) and the address of a
 * class such a name may have. With a name, an address allowed here
 * leaves the name stage's verdict standing. */
static void addr_stage(const struct wr_policy *p, const struct target *t,
                       bool named, const struct wr_rule *by_name,
                       struct wr_verdict *v) {
  const struct wr_rule *r = find_rule(p, t, false);
  enum wr_addr_class cls = wr_net_addr_class(t->addr);
  char text[INET6_ADDRSTRLEN];

  if (r == NULL)
    r = find_rule(p, t, true);
  if (r != NULL) {
    by_rule(v, r);
    return;
  }
  wr_net_addr_format(t->addr, text, sizeof(text));
  if (cls != WR_ADDR_PUBLIC && by_name != NULL && by_name->host_chosen &&
      wr_policy_host_chosen_ok(cls)) {
    v->allow = true;
    v->rule = NULL;
    set_reason(v, "%s is %s, allowed for a host-chosen name", text,
               wr_net_addr_class_name(cls));
  } else if (cls != WR_ADDR_PUBLIC) {
    v->allow = false;
    v->rule = NULL;
    set_reason(v, "%s is %s and no rule names it", text,
               wr_net_addr_class_name(cls));
  } else if (named) {
    v->allow = true;
    v->rule = NULL;
  } else {
    by_preset(v, p, text);
  }
}

void wr_policy_check(const struct wr_policy *p, const char *sandbox,
                     const char *host, const struct wr_net_addr *addr,
                     uint16_t port, struct wr_verdict *v) {
  struct target name = {sandbox, host, NULL, port};
  struct target where = {sandbox, NULL, addr, port};
  struct wr_net_addr literal;
  struct wr_verdict av;

  memset(v, 0, sizeof(*v));
  /* The contract says host is never an IP literal; if it is one all the
   * same, it is judged as the address it is, never as a name. */
  if (host != NULL && wr_net_parse_ip(host, &literal)) {
    where.addr = addr ? addr : &literal;
    name.host = NULL;
  }
  if (name.host == NULL && where.addr == NULL) {
    set_reason(v, "no destination to check");
    return;
  }
  /* When both stages deny, the more telling reason wins, in the order of
   * docs/network.md: a deny rule for the name, one for the address, an
   * address that is not public, and only then no rule for the name. */
  if (name.host != NULL) {
    name_stage(p, &name, v);
    if (where.addr == NULL || (!v->allow && v->rule != NULL))
      return;
  }
  memset(&av, 0, sizeof(av));
  addr_stage(p, &where, name.host != NULL,
             name.host != NULL && v->allow ? v->rule : NULL, &av);
  if (!av.allow || name.host == NULL)
    *v = av;
  else if (av.rule == NULL && av.reason[0] != '\0')
    append_reason(v, av.reason); /* a host-chosen name's private address */
}

/* ---- secrets ------------------------------------------------------------ */

static const struct wr_secret_builtin builtins[] = {
    {"anthropic",
     {"api.anthropic.com"},
     "x-api-key",
     "",
     {"ANTHROPIC_API_KEY"}},
    {"openai",
     {"api.openai.com"},
     "Authorization",
     "Bearer ",
     {"OPENAI_API_KEY"}},
    {"github",
     {"api.github.com", "github.com"},
     "Authorization",
     "Bearer ",
     {"GITHUB_TOKEN", "GH_TOKEN"}},
};

const struct wr_secret_builtin *wr_secret_builtin(const char *service) {
  for (size_t i = 0; service != NULL && i < WR_ARRAY_SIZE(builtins); i++)
    if (strcmp(service, builtins[i].service) == 0)
      return &builtins[i];
  return NULL;
}

/* The value is wiped before it is freed so that it does not linger in
 * freed heap memory. */
void wr_secret_clear(struct wr_secret *s) {
  if (s->value != NULL) {
    explicit_bzero(s->value, strlen(s->value));
    free(s->value);
  }
  free(s->service);
  wr_strv_free(s->hosts);
  free(s->header);
  free(s->prefix);
  wr_strv_free(s->env);
  memset(s, 0, sizeof(*s));
}
