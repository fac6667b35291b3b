/*
 * The DNS server on 127.0.0.1:53 inside each sandbox, over UDP and TCP.
 *
 * It answers A and AAAA questions for names the policy allows, from the
 * proxy's resolver and its cache (so a sandbox and its proxy see the same
 * answer, with the TTL that remains of it), and REFUSED for names it
 * denies. It answers with real addresses even when one is private: the
 * proxy checks every address before dialing, which is what stops DNS
 * rebinding, and a program that has the address still cannot reach it
 * except through the proxy.
 *
 * Other question types for allowed names get an empty NOERROR answer.
 * Queries waiting for the resolver are bounded per sandbox; more are
 * dropped (UDP), as a busy server would, and the client retries.
 *
 * A UDP answer that does not fit the client's size (512, or its EDNS0
 * size) says TC, and the client asks again over TCP. A TCP client may send
 * several queries on one connection (answers may come back out of order,
 * as RFC 7766 allows); it has WR_DNS_TCP_PIPELINE of them waiting at most
 * (its further bytes are not read meanwhile), is closed after
 * WR_DNS_TCP_IDLE_MS without a query, and a sandbox has at most
 * WR_DNS_TCP_CONNS such connections.
 */
#include "net/net_internal.h"

struct dns_tcp {
  struct wr_net_sb *sb; /* a reference */
  uv_tcp_t tcp;
  uv_timer_t idle;
  int handles; /* not yet closed */
  int refs;    /* its handles, and each query waiting */
  bool closing, reading;
  bool processing; /* inside tcp_process, which an answer may re-enter */
  size_t waiting;  /* queries waiting for the resolver */
  uint8_t in[2 + WR_DNS_TCP_QUERY_MAX];
  size_t in_len;
  struct dns_tcp *prev, *next; /* in sb->dns_tcps */
};

/* Where a reply goes: a UDP peer, or a TCP client. */
struct dns_from {
  const struct sockaddr *peer;
  struct dns_tcp *tcp;
};

struct dns_query {
  struct wr_net_sb *sb; /* a reference */
  struct dns_tcp *tcp;  /* a reference, or NULL for UDP */
  struct wr_dns_query q;
  char name[WR_HOST_MAX]; /* normalised */
  uint8_t *msg;           /* the query as received, for its question section */
  size_t len;
  struct sockaddr_storage peer;
};

struct dns_send {
  uv_udp_send_t req;
  uint8_t buf[WR_DNS_EDNS_MAX];
};

struct dns_write {
  uv_write_t req;
  uint8_t buf[2 + WR_DNS_REPLY_MAX];
};

static void tcp_close(struct dns_tcp *t);
static void tcp_process(struct dns_tcp *t);
static void tcp_unref(struct dns_tcp *t);

/* ---- replies ------------------------------------------------------------ */

static void on_sent(uv_udp_send_t *req, int status) {
  (void)status;
  free(req);
}

static void on_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static void reply_tcp(struct dns_tcp *t, const struct wr_dns_query *q,
                      const uint8_t *msg, int rcode,
                      const struct wr_net_addr *addrs, size_t naddrs,
                      uint32_t ttl) {
  struct dns_write *w;
  uv_buf_t b;
  size_t len;

  if (t->closing)
    return;
  w = xmalloc(sizeof(*w));
  len = wr_dns_build_reply(q, msg, rcode, addrs, naddrs, ttl, WR_DNS_REPLY_MAX,
                           w->buf + 2, sizeof(w->buf) - 2);
  w->buf[0] = (uint8_t)(len >> 8);
  w->buf[1] = (uint8_t)len;
  b = uv_buf_init((char *)w->buf, (unsigned)len + 2);
  if (len == 0 ||
      uv_write(&w->req, (uv_stream_t *)&t->tcp, &b, 1, on_written) < 0) {
    free(w);
    tcp_close(t);
  }
}

static void reply(struct wr_net_sb *sb, const struct dns_from *from,
                  const struct wr_dns_query *q, const uint8_t *msg, int rcode,
                  const struct wr_net_addr *addrs, size_t naddrs,
                  uint32_t ttl) {
  struct dns_send *s;
  uv_buf_t b;
  size_t len;

  if (sb->detached)
    return;
  if (from->tcp != NULL) {
    reply_tcp(from->tcp, q, msg, rcode, addrs, naddrs, ttl);
    return;
  }
  if (!sb->has_dns)
    return;
  s = xmalloc(sizeof(*s));
  len = wr_dns_build_reply(q, msg, rcode, addrs, naddrs, ttl,
                           wr_dns_udp_limit(q), s->buf, sizeof(s->buf));
  b = uv_buf_init((char *)s->buf, (unsigned)len);
  if (len == 0 ||
      uv_udp_send(&s->req, &sb->dns, &b, 1, from->peer, on_sent) < 0)
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

/* What remains of the cached answer's TTL, rounded up; the floor for
 * answers the cache does not hold (the hosts file). */
static uint32_t ttl_left(struct wr_net *n, const char *name, int family) {
  struct wr_net_cached c;

  if (!wr_net_resolver_peek(n, name, family, &c) || !c.fresh || c.failed)
    return WR_RESOLVE_TTL_MIN_S;
  return (uint32_t)((c.ttl_left_ms + 999) / 1000);
}

/* ---- resolving ---------------------------------------------------------- */

static int query_family(const struct wr_dns_query *q) {
  return q->qtype == WR_DNS_A ? AF_INET : AF_INET6;
}

static void query_free(struct dns_query *dq) {
  struct dns_tcp *t = dq->tcp;

  dq->sb->dns_inflight--;
  wr_net_sb_unref(dq->sb);
  free(dq->msg);
  free(dq);
  if (t == NULL)
    return;
  t->waiting--;
  if (!t->closing)
    tcp_process(t);
  tcp_unref(t);
}

static void on_resolved(void *arg, const struct wr_net_addr *addrs,
                        size_t naddrs, const wr_error_t *err) {
  struct dns_query *dq = arg;
  struct dns_from from = {(struct sockaddr *)&dq->peer, dq->tcp};
  uint32_t ttl =
      err == NULL ? ttl_left(dq->sb->n, dq->name, query_family(&dq->q)) : 0;

  /* Too many lookups: a UDP client retries, as with a busy server. */
  if (err == NULL || err->code != EAGAIN || dq->tcp != NULL)
    reply(dq->sb, &from, &dq->q, dq->msg, rcode_of(err), addrs, naddrs, ttl);
  query_free(dq);
}

/* The query waits for the resolver holding a reference to its sandbox (and
 * its TCP client); a detached sandbox's answers are dropped (reply
 * checks). */
static void resolve(struct wr_net_sb *sb, const struct dns_from *from,
                    const struct wr_dns_query *q, const uint8_t *msg,
                    size_t len, const char *name) {
  struct dns_query *dq;
  wr_error_t err = {0};

  if (sb->dns_inflight >= WR_DNS_INFLIGHT) {
    wr_debug("net: %s: DNS query for %s dropped (too many)", sb->id, name);
    return;
  }
  dq = xcalloc(1, sizeof(*dq));
  dq->sb = sb;
  dq->q = *q;
  wr_strlcpy(dq->name, name, sizeof(dq->name));
  dq->msg = xmemdup(msg, len);
  dq->len = len;
  if (from->tcp != NULL) {
    dq->tcp = from->tcp;
    from->tcp->refs++;
    from->tcp->waiting++;
  } else
    memcpy(&dq->peer, from->peer,
           from->peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                             : sizeof(struct sockaddr_in));
  wr_net_sb_ref(sb);
  sb->dns_inflight++;
  if (wr_resolve_start(sb->n, sb, name, query_family(q), on_resolved, dq, NULL,
                       &err) < 0) {
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
static void handle_query(struct wr_net_sb *sb, const struct dns_from *from,
                         const struct wr_dns_query *q, const uint8_t *msg,
                         size_t len) {
  char name[WR_HOST_MAX], reason[REASON_MAX];
  _cleanup_free_ char *rule = NULL;
  struct wr_verdict v;

  if (!query_name(q, name, reason)) {
    log_query(sb, q->name[0] ? q->name : ".", false, NULL, reason);
    reply(sb, from, q, msg, WR_DNS_REFUSED, NULL, 0, 0);
    return;
  }
  wr_net_check(sb->n, sb->id, name, NULL, 0, &v);
  rule = v.rule ? wr_rule_format(v.rule) : NULL;
  log_query(sb, name, v.allow, rule, v.reason);
  if (!v.allow)
    reply(sb, from, q, msg, WR_DNS_REFUSED, NULL, 0, 0);
  else if (q->qtype == WR_DNS_A || q->qtype == WR_DNS_AAAA)
    resolve(sb, from, q, msg, len, name);
  else
    reply(sb, from, q, msg, WR_DNS_NOERROR, NULL, 0, 0);
}

/* One message from the sandbox, over either transport. */
static void handle_message(struct wr_net_sb *sb, const struct dns_from *from,
                           const uint8_t *msg, size_t len) {
  struct wr_dns_query q;
  int rc = wr_dns_parse_query(msg, len, &q);

  if (rc < 0)
    return;
  if (rc > 0)
    reply(sb, from, &q, msg, rc, NULL, 0, 0);
  else
    handle_query(sb, from, &q, msg, len);
}

/* ---- UDP ---------------------------------------------------------------- */

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
  struct dns_from from = {peer, NULL};

  if (nread <= 0 || peer == NULL || (flags & UV_UDP_PARTIAL) || sb->detached)
    return;
  handle_message(sb, &from, (const uint8_t *)buf->base, (size_t)nread);
}

int wr_dns_start(struct wr_net_sb *sb, wr_error_t *err) {
  int rc = uv_udp_recv_start(&sb->dns, on_alloc, on_recv);

  if (rc < 0)
    return wr_error_set(err, -rc, "start the DNS server");
  return 0;
}

/* ---- TCP ---------------------------------------------------------------- */

static void tcp_unref(struct dns_tcp *t) {
  if (--t->refs > 0)
    return;
  wr_net_sb_unref(t->sb);
  free(t);
}

static void on_tcp_handle_closed(uv_handle_t *h) {
  struct dns_tcp *t = h->data;

  if (--t->handles == 0)
    tcp_unref(t);
}

static void tcp_close(struct dns_tcp *t) {
  struct wr_net_sb *sb = t->sb;

  if (t->closing)
    return;
  t->closing = true;
  if (t->prev != NULL)
    t->prev->next = t->next;
  else
    sb->dns_tcps = t->next;
  if (t->next != NULL)
    t->next->prev = t->prev;
  sb->dns_nconns--;
  uv_close((uv_handle_t *)&t->tcp, on_tcp_handle_closed);
  uv_close((uv_handle_t *)&t->idle, on_tcp_handle_closed);
}

static void on_idle(uv_timer_t *h) {
  struct dns_tcp *t = h->data;

  if (t->waiting > 0)
    uv_timer_start(&t->idle, on_idle, WR_DNS_TCP_IDLE_MS, 0);
  else
    tcp_close(t);
}

static void on_tcp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct dns_tcp *t = h->data;

  (void)suggested;
  buf->base = (char *)t->in + t->in_len;
  buf->len = sizeof(t->in) - t->in_len;
}

/* Whether t may take another query now: few enough waiting, and its
 * answers are being read. */
static bool tcp_may_take(const struct dns_tcp *t) {
  return t->waiting < WR_DNS_TCP_PIPELINE &&
         uv_stream_get_write_queue_size((const uv_stream_t *)&t->tcp) <
             WR_DNS_TCP_QUEUE_MAX;
}

static void on_tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void tcp_reading(struct dns_tcp *t, bool on) {
  if (on == t->reading)
    return;
  t->reading = on;
  if (on)
    uv_read_start((uv_stream_t *)&t->tcp, on_tcp_alloc, on_tcp_read);
  else
    uv_read_stop((uv_stream_t *)&t->tcp);
}

/* Handle every whole query held, while t may take more; read on only
 * then. The buffer holds one query of the largest size, so a full buffer
 * always holds a whole one. */
static void tcp_process(struct dns_tcp *t) {
  size_t mlen = 0;
  int rc = 0;

  if (t->processing)
    return;
  t->processing = true;
  while (!t->closing && tcp_may_take(t) &&
         (rc = wr_dns_tcp_frame(t->in, t->in_len, &mlen)) != 0) {
    struct dns_from from = {NULL, t};
    if (rc < 0)
      break;
    handle_message(t->sb, &from, t->in + 2, mlen);
    t->in_len -= mlen + 2;
    memmove(t->in, t->in + mlen + 2, t->in_len);
  }
  t->processing = false;
  if (rc < 0)
    tcp_close(t);
  else if (!t->closing)
    tcp_reading(t, tcp_may_take(t) && t->in_len < sizeof(t->in));
}

static void on_tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  struct dns_tcp *t = s->data;

  (void)buf;
  if (nread == 0)
    return;
  if (nread < 0 || t->sb->detached) {
    tcp_close(t);
    return;
  }
  t->in_len += (size_t)nread;
  uv_timer_start(&t->idle, on_idle, WR_DNS_TCP_IDLE_MS, 0);
  tcp_process(t);
}

static void on_tcp_connection(uv_stream_t *server, int status) {
  struct wr_net_sb *sb = server->data;
  struct dns_tcp *t;

  if (status < 0)
    return;
  if (sb->detached || sb->dns_nconns >= WR_DNS_TCP_CONNS) {
    wr_net_reject(sb->n, server);
    return;
  }
  t = xcalloc(1, sizeof(*t));
  t->sb = sb;
  wr_net_sb_ref(sb);
  uv_tcp_init(sb->n->loop, &t->tcp);
  uv_timer_init(sb->n->loop, &t->idle);
  t->tcp.data = t->idle.data = t;
  t->handles = 2;
  t->refs = 1;
  t->next = sb->dns_tcps;
  if (sb->dns_tcps != NULL)
    sb->dns_tcps->prev = t;
  sb->dns_tcps = t;
  sb->dns_nconns++;
  if (uv_accept(server, (uv_stream_t *)&t->tcp) < 0) {
    tcp_close(t);
    return;
  }
  uv_timer_start(&t->idle, on_idle, WR_DNS_TCP_IDLE_MS, 0);
  tcp_reading(t, true);
}

int wr_dns_tcp_start(struct wr_net_sb *sb, wr_error_t *err) {
  int rc = uv_listen((uv_stream_t *)&sb->dns_tcp, 64, on_tcp_connection);

  if (rc < 0)
    return wr_error_set(err, -rc, "listen for DNS over TCP");
  return 0;
}

void wr_dns_close_all(struct wr_net_sb *sb) {
  while (sb->dns_tcps != NULL)
    tcp_close(sb->dns_tcps);
}
