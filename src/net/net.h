/*
 * net: the only way out of a sandbox. An egress proxy and a DNS server
 * that warrend runs inside every sandbox's network namespace, the policy
 * they enforce, secrets injected on the host side, and published ports.
 *
 * A sandbox's network namespace has only loopback. warrend listens inside
 * it on 127.0.0.1:3128 and [::1]:3128 (HTTP proxy: CONNECT, absolute-URI
 * requests, and every other outgoing TCP connection, which the namespace's
 * filter rules redirect there) and on 127.0.0.1:53 (DNS). Each connection
 * is checked against the policy by name and by every address the name
 * resolves to; the proxy dials the address it checked. For hosts that have
 * a secret, it terminates TLS with a certificate from warren's own CA and
 * sets the credential header on the way out. See docs/network.md.
 *
 * Threads: everything runs on the loop thread except TLS interception,
 * which runs one thread per intercepted connection and reports back to the
 * loop. Policy objects are immutable and reference counted, so a thread
 * may hold one.
 */
#ifndef WR_NET_H
#define WR_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#include "common/common.h"

/* ---- addresses and names (names.c) -------------------------------------- */

/* Longest normalised host name (253) plus room. */
#define WR_HOST_MAX 256

struct wr_net_addr {
  sa_family_t family; /* AF_INET or AF_INET6 */
  uint8_t bytes[16];  /* network order; 4 used for AF_INET */
};

enum wr_addr_class {
  WR_ADDR_PUBLIC = 0,
  WR_ADDR_LOOPBACK,    /* 127/8, ::1 */
  WR_ADDR_PRIVATE,     /* 10/8, 172.16/12, 192.168/16 */
  WR_ADDR_LINK_LOCAL,  /* 169.254/16, fe80::/10 */
  WR_ADDR_CGNAT,       /* 100.64/10 */
  WR_ADDR_ULA,         /* fc00::/7 */
  WR_ADDR_METADATA,    /* 169.254.169.254, 100.100.100.200, fd00:ec2::254 */
  WR_ADDR_MULTICAST,   /* 224/4, ff00::/8 */
  WR_ADDR_UNSPECIFIED, /* 0/8, :: */
  WR_ADDR_RESERVED,    /* 240/4, 255.255.255.255, 192.0.0/24, test nets,
                          198.18/15, 2001:db8::/32, discard, ... */
};

/* Parse an IP literal in any encoding a resolver or browser accepts:
 * IPv4 with one to four parts, each decimal, octal (leading 0) or hex
 * (0x), so "127.1", "0x7f.0.0.1", "0177.0.0.1" and "2130706433" are all
 * 127.0.0.1; IPv6 with or without brackets (no zone). false when s is not
 * an IP literal. */
bool wr_net_parse_ip(const char *s, struct wr_net_addr *out);
/* The address's class. IPv4-mapped (::ffff:0:0/96), IPv4-compatible
 * (::/96), NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4 (2002::/16) and
 * Teredo (2001::/32) addresses take the class of the IPv4 address they
 * carry. */
enum wr_addr_class wr_net_addr_class(const struct wr_net_addr *a);
const char *wr_net_addr_class_name(enum wr_addr_class c); /* "loopback" */
/* The IPv4 addresses an IPv6 address carries (the kinds listed above;
 * two for the local-use NAT64 prefix, whose layout depends on the
 * network): their count, 0 for IPv4 and other IPv6 addresses. */
size_t wr_net_addr_embedded_v4(const struct wr_net_addr *a,
                               struct wr_net_addr v4[2]);
/* Canonical text ("127.0.0.1", "::1"; no brackets). */
void wr_net_addr_format(const struct wr_net_addr *a, char *out, size_t size);
bool wr_net_addr_from_sockaddr(const struct sockaddr *sa,
                               struct wr_net_addr *out, uint16_t *port);
socklen_t wr_net_addr_to_sockaddr(const struct wr_net_addr *a, uint16_t port,
                                  struct sockaddr_storage *out);
/* Whether a lies in net/prefix (same family). */
bool wr_net_addr_in(const struct wr_net_addr *a, const struct wr_net_addr *net,
                    unsigned prefix);

/* Normalise a host name or IP literal for matching and dialing: ASCII is
 * lower-cased, one trailing dot is dropped, Unicode labels (UTF-8) become
 * IDNA A-labels ("xn--..."), and an IP literal in any encoding becomes its
 * canonical text (then *is_ip is true and *addr holds it; both may be
 * NULL). Fails with EINVAL and a message for an empty or over-long name, an
 * empty or over-long label, bytes that cannot be in a host name, or
 * invalid UTF-8. */
int wr_net_normalize_host(const char *in, char out[WR_HOST_MAX], bool *is_ip,
                          struct wr_net_addr *addr, wr_error_t *err);
/* Split "HOST", "HOST:PORT", "[V6]", "[V6]:PORT" or a bare IPv6 literal
 * ("::1", no port). The host is normalised as above; *port is 0 when
 * absent. "*.example.com" is accepted as a host pattern when
 * allow_wildcard is set (the "*." is kept, the rest normalised). */
int wr_net_split_hostport(const char *in, bool allow_wildcard,
                          char host[WR_HOST_MAX], uint16_t *port,
                          wr_error_t *err);

/* ---- policy (policy.c) -------------------------------------------------- */

enum wr_policy_preset {
  WR_PRESET_OPEN = 0, /* every public destination */
  WR_PRESET_BALANCED, /* the preset file: registries, source hosting, model
                         APIs */
  WR_PRESET_LOCKED,   /* only explicit allow rules */
};
const char *wr_policy_preset_name(enum wr_policy_preset p);
int wr_policy_preset_parse(const char *s, enum wr_policy_preset *out,
                           wr_error_t *err);

enum wr_rule_kind {
  WR_RULE_DOMAIN = 0, /* "example.com": that name only */
  WR_RULE_SUFFIX,     /* "*.example.com": names below it, not itself */
  WR_RULE_IP,         /* "10.1.2.3", "::1" */
  WR_RULE_CIDR,       /* "10.0.0.0/8", "fd00::/8" */
};

struct wr_rule {
  int64_t id;    /* the store's id; 0 for preset rules */
  char *sandbox; /* sandbox id, or NULL for a global rule */
  bool allow;    /* allow or deny */
  enum wr_rule_kind kind;
  char *pattern; /* normalised: "example.com", "*.example.com", "10.0.0.0/8" */
  struct wr_net_addr addr; /* IP and CIDR rules */
  unsigned prefix;         /* CIDR rules (32 or 128 for IP rules) */
  uint16_t port;           /* 0: every port */
  char *source;            /* "user", "preset balanced" */
  /* A name the host's own configuration chose (the preset's
   * "@npm-registry" and "@apt-sources"), not a sandbox's user: it may
   * resolve to a private or reserved address (a company mirror), though
   * never to a loopback, link-local, metadata or multicast one, nor to
   * the host's own (wr_policy_host_chosen_ok). Never set on a rule that
   * someone wrote. */
  bool host_chosen;
};

/* Parse "HOST[:PORT]" as given to `warren policy allow|deny network`:
 * a name, "*.suffix", an IP literal (any encoding) or a CIDR, with an
 * optional port. Fills every field but id, sandbox and source. */
int wr_rule_parse(const char *spec, bool allow, struct wr_rule *out,
                  wr_error_t *err);
void wr_rule_clear(struct wr_rule *r);
/* "allow *.example.com:443" (caller frees). */
char *wr_rule_format(const struct wr_rule *r);

/* A policy: a preset and the rules layered on it (global rules and every
 * sandbox's). Built once, then immutable and shared by reference. */
struct wr_policy;

struct wr_policy *wr_policy_new(enum wr_policy_preset preset);
/* Add a copy of r (before the policy is shared). */
void wr_policy_add(struct wr_policy *p, const struct wr_rule *r);
/* Hosts the preset file names by reference, as configured on this host
 * (never written into warren). */
struct wr_preset_refs {
  const char *npm_registry; /* "@npm-registry": npm's registry,
                               "HOST[:PORT]" (the port its URL names) */
  char *const *apt_hosts;   /* "@apt-sources": the hosts of the host's apt
                               sources, "HOST[:PORT]", NULL-ended */
};
/* Add the balanced preset's domains from a data file: one "name" or
 * "*.suffix" per line, "#" comments. "@npm-registry" and "@apt-sources"
 * stand for the hosts in refs (skipped when absent; refs may be NULL).
 * Rules get source "preset balanced"; those from refs are host_chosen,
 * with source "preset balanced: npm registry" or "...: apt source". */
int wr_policy_load_preset(struct wr_policy *p, const char *path,
                          const struct wr_preset_refs *refs, wr_error_t *err);
struct wr_policy *wr_policy_ref(struct wr_policy *p);
void wr_policy_unref(struct wr_policy *p);
enum wr_policy_preset wr_policy_get_preset(const struct wr_policy *p);
/* Whether a host-chosen name may lead to an address of this class:
 * private, CGNAT, ULA and reserved ones, which a company mirror or the
 * host's resolver may hand out; never loopback, link-local, metadata,
 * multicast or unspecified. */
bool wr_policy_host_chosen_ok(enum wr_addr_class c);
size_t wr_policy_nrules(const struct wr_policy *p);
const struct wr_rule *wr_policy_rule(const struct wr_policy *p, size_t i);

struct wr_verdict {
  bool allow;
  /* The deciding rule (borrowed from the policy), or NULL when the preset
   * or the default decided. */
  const struct wr_rule *rule;
  /* One line for `policy check` and the log: "deny example.com (rule 4)",
   * "preset open", "127.0.0.1 is loopback and no rule names it". */
  char reason[192];
};

/*
 * Decide whether a sandbox may reach a destination. The rules that apply
 * are the global ones and the sandbox's own (sandbox may be NULL: global
 * only). Deny wins over allow; a rule with a port applies to that port
 * only.
 *
 * host is a normalised name (never an IP literal) or NULL; addr is the
 * address that would be dialed, or NULL to decide on the name alone.
 *  - name: a matching deny rule denies; else a matching allow rule, the
 *    open preset, or a balanced preset domain allows; else denied.
 *  - address: a matching IP/CIDR deny rule denies; an address that is not
 *    public (loopback, private, link-local, CGNAT, ULA, metadata, ...) is
 *    denied unless an IP/CIDR allow rule names it; otherwise it is allowed
 *    when the name was allowed, or (no name) when an IP/CIDR allow rule
 *    matches or the preset is open.
 * With both, both stages must allow; the verdict names the deciding rule
 * of the stage that denied, or of the name stage when both allowed.
 */
void wr_policy_check(const struct wr_policy *p, const char *sandbox,
                     const char *host, const struct wr_net_addr *addr,
                     uint16_t port, struct wr_verdict *v);

/* ---- secrets ------------------------------------------------------------ */

/* The value sandboxes see in place of a secret, so SDKs start. */
#define WR_SECRET_PLACEHOLDER "warren-proxy-placeholder"

/* A service whose credential the proxy sets on requests to its hosts. */
struct wr_secret {
  char *service; /* "anthropic", or a custom name */
  char **hosts;  /* normalised names the credential may go to (NULL-ended) */
  char *header;  /* "x-api-key", "Authorization" */
  char *prefix;  /* put before the value: "Bearer " or "" */
  char **env;    /* placeholder variables set in sandboxes (NULL-ended) */
  char *value;   /* the credential; never logged, never returned */
};

/* The built-in services: anthropic, openai, github. NULL when unknown. */
struct wr_secret_builtin {
  const char *service;
  const char *hosts[4];
  const char *header;
  const char *prefix;
  const char *env[4];
};
const struct wr_secret_builtin *wr_secret_builtin(const char *service);
void wr_secret_clear(struct wr_secret *s);

/* ---- the engine (proxy.c, dns.c, ports.c, tls.c) ------------------------ */

/* One decision, for the log. Strings are borrowed for the call. */
struct wr_net_event {
  int64_t time_ms;
  const char *sandbox; /* sandbox id */
  const char *kind;    /* "dns", "connect" (CONNECT), "http" (absolute URI
                          request), "tcp" (redirected connection) */
  const char *host;    /* name asked for, or NULL */
  const char *addr;    /* address dialed or refused, or NULL */
  uint16_t port;
  bool allow;
  const char *rule;              /* the deciding rule's text, or NULL */
  const char *reason;            /* wr_verdict.reason, or why it failed */
  bool intercepted;              /* TLS terminated to set a secret */
  uint64_t bytes_up, bytes_down; /* sandbox -> upstream, upstream -> sandbox */
};
typedef void (*wr_net_log_fn)(void *arg, const struct wr_net_event *ev);

/* What happens on a sandbox's connections, for the daemon to tell an
 * idle sandbox from a busy one: a connection opened, bytes moved on it
 * (at most once a second per connection, not per read), it closed. */
enum wr_net_activity {
  WR_NET_CONN_OPENED = 0,
  WR_NET_CONN_BYTES,
  WR_NET_CONN_CLOSED,
};
/* sandbox is the sandbox's id (borrowed for the call); from_host: a
 * published port's connection, not one the sandbox made. */
typedef void (*wr_net_activity_fn)(void *arg, const char *sandbox,
                                   enum wr_net_activity what, bool from_host);
/* Asked before a connection from the host (a published port) goes to
 * its sandbox: true when it may go now. False holds the connection (the
 * client is accepted and waits) until wr_net_woken names the sandbox, or
 * for WR_WAKE_TIMEOUT_MS; the daemon wakes a paused sandbox meanwhile. */
typedef bool (*wr_net_wake_fn)(void *arg, const char *sandbox);

struct wr_net_config {
  uv_loop_t *loop;
  const char *ca_dir;      /* warren's CA lives here (made on first start) */
  const char *upstream_ca; /* extra PEM bundle trusted for upstreams, or
                              NULL (tests use a CA of their own) */
  const char *hosts_file;  /* static "ADDR NAME..." entries consulted before
                              the host's resolver, or NULL */
  char *const *resolvers;  /* DNS servers "ADDR[:PORT]" (NULL-ended), or
                              NULL for those of /etc/resolv.conf */
  wr_net_log_fn log;
  void *log_arg;
  wr_net_activity_fn activity; /* NULL: not reported */
  wr_net_wake_fn wake;         /* NULL: every connection goes at once */
  void *hook_arg;              /* for activity and wake */
};

struct wr_net;

int wr_net_new(const struct wr_net_config *cfg, struct wr_net **out,
               wr_error_t *err);
/* Close every listener and connection; the loop must then run to let the
 * handles close before wr_net_free. */
void wr_net_shutdown(struct wr_net *n);
void wr_net_free(struct wr_net *n);
/* warren's CA certificate (PEM), as sandboxes must trust it. */
const char *wr_net_ca_pem(const struct wr_net *n);
/* Replace the policy (takes a reference). New decisions use it at once;
 * open connections that it now denies are closed. */
void wr_net_set_policy(struct wr_net *n, struct wr_policy *p);
/* Replace the secrets (copied). */
void wr_net_set_secrets(struct wr_net *n, const struct wr_secret *s,
                        size_t count);

/* The listeners a sandbox's network starts with, in this order. */
enum {
  WR_NET_LISTEN_PROXY4 = 0, /* TCP 127.0.0.1:3128 */
  WR_NET_LISTEN_PROXY6,     /* TCP [::1]:3128; -1 when the host has no IPv6 */
  WR_NET_LISTEN_DNS,        /* UDP 127.0.0.1:53 */
  WR_NET_LISTEN_DNS_TCP,    /* TCP 127.0.0.1:53; -1 for a sandbox started
                               by a warrend that made none */
  WR_NET_LISTENERS
};

/* Start the proxy and DNS server of a sandbox. netns_fd (borrowed;
 * duplicated) is an fd of /proc/PID/ns/net, for port forwards. The
 * listening sockets were made inside that namespace before the sandbox's
 * first process (the runtime's WR_NET_* fds, in the order above). They
 * are taken over (closed on failure too). With listen_fds NULL, the
 * engine binds them itself (tests); that fails if a port is taken. */
int wr_net_attach(struct wr_net *n, const char *sandbox, int netns_fd,
                  const int listen_fds[WR_NET_LISTENERS], wr_error_t *err);
/* Close the sandbox's listeners and connections. */
void wr_net_detach(struct wr_net *n, const char *sandbox);
/* The daemon's answer to wake (loop thread): the sandbox runs (ok) and
 * the connections held for it go on, or it could not be woken and they
 * are reset. Nothing when none is held. */
void wr_net_woken(struct wr_net *n, const char *sandbox, bool ok);

/* Resolve a name as the proxy would (static entries, then the cache and
 * the DNS servers); cb runs later on the loop with the addresses (naddrs 0
 * and err set on failure). */
typedef void (*wr_net_resolve_fn)(void *arg, const struct wr_net_addr *addrs,
                                  size_t naddrs, const wr_error_t *err);
int wr_net_resolve(struct wr_net *n, const char *host, wr_net_resolve_fn cb,
                   void *arg, wr_error_t *err);

/* The resolver's counters since the engine started; index 0 is IPv4 (A),
 * 1 IPv6 (AAAA). */
struct wr_net_resolver_stats {
  uint64_t queries[2];   /* upstream lookups started */
  uint64_t hits[2];      /* answered from the cache */
  uint64_t coalesced[2]; /* joined a lookup already in flight */
  uint64_t failures[2];  /* lookups that failed (no such name, a server
                            failure, a timeout; not "no address") */
  uint64_t hosts;        /* answered by the hosts file */
  uint64_t limited;      /* refused by the per-sandbox or host cap */
  size_t entries;        /* in the cache now */
  size_t inflight;       /* lookups in flight now */
};
void wr_net_resolver_stats(const struct wr_net *n,
                           struct wr_net_resolver_stats *out);

/* Addresses kept per name and family. */
#define WR_NET_NAME_ADDRS 32

/* What the cache holds for one name and family. */
struct wr_net_cached {
  bool answered; /* an answer (addresses or a failure) is held */
  bool fresh;    /* and has not expired */
  bool inflight; /* a lookup is in flight */
  bool failed;
  char error[96]; /* when failed */
  struct wr_net_addr addrs[WR_NET_NAME_ADDRS];
  size_t naddrs;
  uint32_t ttl_s;       /* the TTL it is kept for, as clamped */
  uint64_t age_ms;      /* since the answer came */
  uint64_t ttl_left_ms; /* until it expires (0 once expired) */
  uint64_t queries;     /* upstream lookups made for it */
};
/* The cache's entry for a normalised name and a family (AF_INET or
 * AF_INET6); false when there is none. */
bool wr_net_resolver_peek(const struct wr_net *n, const char *host, int family,
                          struct wr_net_cached *out);

/* Publish 127.0.0.1:port inside a sandbox on addr:host_port on the host
 * (addr NULL: 127.0.0.1). The listener stays while the publication exists,
 * whether the sandbox runs or not; connections reach the sandbox while it
 * is attached and are closed otherwise. */
int wr_net_publish(struct wr_net *n, const char *sandbox, const char *addr,
                   uint16_t host_port, uint16_t port, wr_error_t *err);
int wr_net_unpublish(struct wr_net *n, const char *sandbox, uint16_t host_port,
                     wr_error_t *err);

/* A socket made inside the network namespace netns_fd (CLOEXEC,
 * nonblocking). Loop thread: it switches the thread's namespace for the
 * call and back. */
int wr_net_socket_in(int netns_fd, int domain, int type, wr_error_t *err);

/* ---- CAs trusted inside sandboxes (trust.c) ------------------------------ */

/* Besides its image's bundle and warren's own CA, every sandbox trusts
 * the CAs the host's administrator added (the .crt files below a
 * directory, Debian's /usr/local/share/ca-certificates) and the files the
 * operator names (--sandbox-ca). */
struct wr_trust_config {
  const char *host_dir; /* NULL: no host CAs (--no-host-cas) */
  char *const *files;   /* --sandbox-ca files, NULL-ended; may be NULL */
};

/* One CA of a set. */
struct wr_trust_ca {
  char *subject;   /* RFC 2253, ASCII (other bytes escaped) */
  char *file;      /* the file it came from */
  char *not_after; /* RFC 3339 */
  bool host;       /* from the host's directory, else --sandbox-ca */
};

/* A file that was left out, and why. */
struct wr_trust_skip {
  char *file;
  char *reason;
};

/* One certificate as wr_trust_parse found it. */
struct wr_trust_cert {
  char *subject, *not_after;
  unsigned char sha256[32]; /* of the DER */
  char *pem;                /* OpenSSL's encoding of the parsed certificate */
};

/* Parse one file's text: one or more PEM CERTIFICATE blocks (text between
 * them is ignored), each whole X.509 and not expired at `now`. Any other
 * block (a private key, a CRL), a header, a bad block or no certificate
 * at all fails the whole file, with a message for the operator. */
int wr_trust_parse(const char *data, size_t len, time_t now,
                   struct wr_trust_cert **out, size_t *n, wr_error_t *err);
void wr_trust_certs_free(struct wr_trust_cert *c, size_t n);

/* A set of CAs as one scan found them: immutable and shared by
 * reference between threads. */
struct wr_trust_set;
void wr_trust_set_unref(struct wr_trust_set *s);
/* Every CA in PEM, each after a "# SUBJECT (FILE)" line; "" for none or
 * a NULL set. */
const char *wr_trust_set_pem(const struct wr_trust_set *s);
size_t wr_trust_set_count(const struct wr_trust_set *s);
const struct wr_trust_ca *wr_trust_set_ca(const struct wr_trust_set *s,
                                          size_t i);
size_t wr_trust_set_nskipped(const struct wr_trust_set *s);
const struct wr_trust_skip *wr_trust_set_skipped(const struct wr_trust_set *s,
                                                 size_t i);

/* The scanner and its cache. Thread-safe: scans run on worker threads
 * while the loop asks for the last set. */
struct wr_trust;
struct wr_trust *wr_trust_new(const struct wr_trust_config *cfg);
void wr_trust_free(struct wr_trust *t);
/* Look at the files again and return the set they make now (a
 * reference): the last set when no file changed (path, inode, size,
 * mtime), else a new one, each bad file skipped with a warning. Blocks on
 * the filesystem (a listing and a stat per file, reads when something
 * changed): worker threads, or the daemon's start. */
struct wr_trust_set *wr_trust_scan(struct wr_trust *t);
/* The last scan's set (a reference; NULL before the first), no I/O. */
struct wr_trust_set *wr_trust_last(struct wr_trust *t);

#endif
