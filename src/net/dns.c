/*
 * The DNS server on 127.0.0.1:53 inside each sandbox.
 *
 * It answers A and AAAA questions for names the policy allows, with the
 * addresses the proxy's resolver finds (TTL WR_DNS_TTL), and REFUSED for
 * names it denies. It answers with real addresses even when one is private:
 * the proxy checks every address before dialing, which is what stops DNS
 * rebinding, and a program that has the address still cannot reach it
 * except through the proxy.
 *
 * Other question types for allowed names get an empty NOERROR answer.
 * Queries waiting for the resolver are bounded per sandbox; more are
 * dropped, as a busy server would, and the client retries.
 */
#include "net/net_internal.h"

struct dns_query {
  struct wr_net_sb *sb; /* a reference */
  struct wr_dns_query q;
  uint8_t *msg; /* the query as received, for its question section */
  size_t len;
  struct sockaddr_storage peer;
};

struct dns_send {
  uv_udp_send_t req;
  uint8_t buf[WR_DNS_MAX];
};

static void on_sent(uv_udp_send_t *req, int status) {
  (void)status;
  free(req);
}

static void reply(struct wr_net_sb *sb, const struct sockaddr *peer,
                  const struct wr_dns_query *q, const uint8_t *msg, int rcode,
                  const struct wr_net_addr *addrs, size_t naddrs) {
  struct dns_send *s;
  uv_buf_t b;
  size_t len;

  if (sb->detached || !sb->has_dns)
    return;
  s = xmalloc(sizeof(*s));
  len = wr_dns_build_reply(q, msg, rcode, addrs, naddrs, WR_DNS_TTL, s->buf,
                           sizeof(s->buf));
  b = uv_buf_init((char *)s->buf, (unsigned)len);
  if (len == 0 || uv_udp_send(&s->req, &sb->dns, &b, 1, peer, on_sent) < 0)
    free(s);
}

static void log_query(struct wr_net_sb *sb, const char *name, bool allow,
                      const char *rule, const char *reason) {
  struct wr_net_event ev = {
      .sandbox = sb->id,
      .kind = "dns",
      .host = name,
      .allow = allow,
      .rule = rule,
      .reason = reason,
  };

  wr_net_emit(sb->n, &ev);
}

static int rcode_of(const wr_error_t *err) {
  if (err == NULL)
    return WR_DNS_NOERROR;
  if (err->code == ENOENT)
    return WR_DNS_NXDOMAIN;
  if (err->code == ENODATA)
    return WR_DNS_NOERROR;
  return WR_DNS_SERVFAIL;
}

static void on_resolved(void *arg, const struct wr_net_addr *addrs,
                        size_t naddrs, const wr_error_t *err) {
  struct dns_query *dq = arg;
  struct wr_net_sb *sb = dq->sb;

  sb->dns_inflight--;
  reply(sb, (struct sockaddr *)&dq->peer, &dq->q, dq->msg, rcode_of(err), addrs,
        naddrs);
  free(dq->msg);
  free(dq);
  wr_net_sb_unref(sb);
}

/* The query waits for the resolver holding a reference to its sandbox; a
 * detached sandbox's answers are dropped (reply checks). */
static void resolve(struct wr_net_sb *sb, const struct sockaddr *peer,
                    const struct wr_dns_query *q, const uint8_t *msg,
                    size_t len, const char *name) {
  struct dns_query *dq;
  wr_error_t err = {0};
  socklen_t plen = peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in);

  if (sb->dns_inflight >= WR_DNS_INFLIGHT) {
    wr_debug("net: %s: DNS query for %s dropped (too many)", sb->id, name);
    return;
  }
  dq = xcalloc(1, sizeof(*dq));
  dq->sb = sb;
  dq->q = *q;
  dq->msg = xmemdup(msg, len);
  dq->len = len;
  memcpy(&dq->peer, peer, plen);
  wr_net_sb_ref(sb);
  sb->dns_inflight++;
  if (wr_resolve_start(sb->n, name, on_resolved, dq, NULL, &err) < 0) {
    wr_error_t fail = {.code = EIO};
    on_resolved(dq, NULL, 0, &fail);
  }
}

/* The name as the policy sees it; names that cannot be normalised, and IP
 * literals, are not names anyone needs resolved. */
#define REASON_MAX (WR_HOST_MAX + sizeof(((wr_error_t *)0)->msg) + 32)

static bool query_name(const struct wr_dns_query *q, char name[WR_HOST_MAX],
                       char reason[REASON_MAX]) {
  bool is_ip = false;
  wr_error_t err = {0};

  if (wr_net_normalize_host(q->name, name, &is_ip, NULL, &err) < 0) {
    snprintf(reason, REASON_MAX, "invalid name: %s", err.msg);
    return false;
  }
  if (is_ip) {
    snprintf(reason, REASON_MAX, "%s is an address, not a name", name);
    return false;
  }
  return true;
}

/* The name stage of the policy decides; only allowed A and AAAA questions
 * go to the resolver. Every decision is logged. */
static void handle_query(struct wr_net_sb *sb, const struct sockaddr *peer,
                         const struct wr_dns_query *q, const uint8_t *msg,
                         size_t len) {
  char name[WR_HOST_MAX], reason[REASON_MAX];
  _cleanup_free_ char *rule = NULL;
  struct wr_verdict v;

  if (!query_name(q, name, reason)) {
    log_query(sb, q->name[0] ? q->name : ".", false, NULL, reason);
    reply(sb, peer, q, msg, WR_DNS_REFUSED, NULL, 0);
    return;
  }
  wr_net_check(sb->n, sb->id, name, NULL, 0, &v);
  rule = v.rule ? wr_rule_format(v.rule) : NULL;
  log_query(sb, name, v.allow, rule, v.reason);
  if (!v.allow)
    reply(sb, peer, q, msg, WR_DNS_REFUSED, NULL, 0);
  else if (q->qtype == WR_DNS_A || q->qtype == WR_DNS_AAAA)
    resolve(sb, peer, q, msg, len, name);
  else
    reply(sb, peer, q, msg, WR_DNS_NOERROR, NULL, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct wr_net_sb *sb = h->data;

  (void)suggested;
  buf->base = sb->n->dns_buf;
  buf->len = sizeof(sb->n->dns_buf);
}

/* Datagrams are handled as they arrive, so one shared buffer does. */
static void on_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *peer, unsigned flags) {
  struct wr_net_sb *sb = h->data;
  const uint8_t *msg = (const uint8_t *)buf->base;
  struct wr_dns_query q;
  int rc;

  if (nread <= 0 || peer == NULL || (flags & UV_UDP_PARTIAL) || sb->detached)
    return;
  memset(&q, 0, sizeof(q));
  rc = wr_dns_parse_query(msg, (size_t)nread, &q);
  if (rc < 0)
    return;
  if (rc > 0)
    reply(sb, peer, &q, msg, rc, NULL, 0);
  else
    handle_query(sb, peer, &q, msg, (size_t)nread);
}

int wr_dns_start(struct wr_net_sb *sb, wr_error_t *err) {
  int rc = uv_udp_recv_start(&sb->dns, on_alloc, on_recv);

  if (rc < 0)
    return wr_error_set(err, -rc, "start the DNS server");
  return 0;
}
