/*
 * Internal to the net module: the parsers of hostile bytes (first bytes of
 * a connection, DNS messages), TLS, and the engine's shared state.
 */
#ifndef WR_NET_INTERNAL_H
#define WR_NET_INTERNAL_H

#include "api/api.h"
#include "net/net.h"

#include <openssl/ssl.h>

/* ---- first bytes of a connection (sniff.c) ------------------------------ */

/* Enough for a ClientHello in one TLS record (16 KiB) and its header. */
#define WR_SNIFF_MAX (16384 + 5)

enum wr_sniff {
  WR_SNIFF_MORE = 0, /* need more bytes to decide */
  WR_SNIFF_TLS,      /* a TLS ClientHello; sni holds the server name, ""
                        when it has none */
  WR_SNIFF_HTTP,     /* starts like an HTTP/1.x request line */
  WR_SNIFF_OTHER,    /* anything else, or a malformed ClientHello */
};

/* Classify what a client sent first. Bounded: never reads past len, and
 * answers MORE only while len < WR_SNIFF_MAX. The SNI is returned as sent
 * (not normalised); a ClientHello with a malformed or over-long
 * server_name extension is OTHER. */
enum wr_sniff wr_sniff_client(const uint8_t *data, size_t len,
                              char sni[WR_HOST_MAX]);

/* ---- DNS messages (dnsmsg.c) ------------------------------------------- */

/* Replies over UDP fit 512 bytes, or what the client's EDNS0 OPT record
 * advertises up to WR_DNS_EDNS_MAX (the size that avoids IP
 * fragmentation); over TCP up to WR_DNS_REPLY_MAX. */
#define WR_DNS_EDNS_MAX 1232
#define WR_DNS_REPLY_MAX 4096
#define WR_DNS_TCP_QUERY_MAX 1024 /* a query over TCP; longer ones close */

enum {
  WR_DNS_NOERROR = 0,
  WR_DNS_FORMERR = 1,
  WR_DNS_SERVFAIL = 2,
  WR_DNS_NXDOMAIN = 3,
  WR_DNS_NOTIMP = 4,
  WR_DNS_REFUSED = 5,
  WR_DNS_BADVERS = 16, /* extended: needs an OPT record to carry it */
};
enum { WR_DNS_A = 1, WR_DNS_AAAA = 28 };

struct wr_dns_query {
  uint16_t id;
  uint16_t flags;         /* of the query (RD is copied to the reply) */
  char name[WR_HOST_MAX]; /* lower-case, no trailing dot; "" for the root */
  uint16_t qtype, qclass;
  size_t question_end; /* offset just past the first question */
  bool edns;           /* the query has an OPT record: so does the reply */
  uint16_t udp_size;   /* the UDP size it advertises */
};

/* Parse a query. Returns 0 when q is filled; a positive rcode (FORMERR,
 * NOTIMP, BADVERS) when the message is a query we can answer only with
 * that error (q->id and q->flags are then filled, and q->edns when the
 * error is about the OPT record); -1 when it must be dropped (too short, a
 * response, not even a header). */
int wr_dns_parse_query(const uint8_t *msg, size_t len, struct wr_dns_query *q);
/* The largest UDP reply to q: 512, or its EDNS0 size up to
 * WR_DNS_EDNS_MAX. */
size_t wr_dns_udp_limit(const struct wr_dns_query *q);
/* Build the reply to q (msg is the query, for its question section) with
 * rcode and, for NOERROR, an answer record per address of the family the
 * question asked for (A: AF_INET ones, AAAA: AF_INET6 ones), each with
 * ttl, and an OPT record when the query had one. Returns the length
 * written to out (at most limit, outsize and WR_DNS_REPLY_MAX; answers
 * that do not fit are left out and TC is set), or 0 if even the header
 * does not fit. */
size_t wr_dns_build_reply(const struct wr_dns_query *q, const uint8_t *msg,
                          int rcode, const struct wr_net_addr *addrs,
                          size_t naddrs, uint32_t ttl, size_t limit,
                          uint8_t *out, size_t outsize);
/* A DNS message over TCP is its 2-byte length and the message. Of the
 * first len bytes of buf: 1 and *msg_len when a whole message follows the
 * length (at buf + 2), 0 when more bytes are needed, -1 when the length
 * is below a header or above WR_DNS_TCP_QUERY_MAX. */
int wr_dns_tcp_frame(const uint8_t *buf, size_t len, size_t *msg_len);

/* ---- TLS (tls.c) -------------------------------------------------------- */

struct wr_tls;

/* Load warren's CA from dir (ca.key 0600, ca.crt), making it on first use,
 * and build the server and client contexts. upstream_ca: extra PEM
 * bundle trusted for upstreams besides the system's, or NULL. */
int wr_tls_new(const char *dir, const char *upstream_ca, struct wr_tls **out,
               wr_error_t *err);
void wr_tls_free(struct wr_tls *t);
const char *wr_tls_ca_pem(const struct wr_tls *t);
/* A server SSL for a sandbox-side connection to `host`, with a leaf
 * certificate for it signed by warren's CA (minted once per host and
 * cached; thread-safe). ALPN offers http/1.1 only. */
SSL *wr_tls_server(struct wr_tls *t, const char *host, wr_error_t *err);
/* A client SSL to the real upstream: verified against the system bundle
 * and upstream_ca, host name checked, SNI set, ALPN http/1.1. */
SSL *wr_tls_client(struct wr_tls *t, const char *host, wr_error_t *err);

/* ---- TLS interception (intercept.c) ------------------------------------ */

/* How an intercepted connection ended, reported on the loop thread. */
typedef void (*wr_intercept_done_fn)(void *arg, uint64_t bytes_up,
                                     uint64_t bytes_down, const char *error);

struct wr_intercept_args {
  struct wr_tls *tls;
  int client_fd;           /* connected to the sandbox (owned) */
  char host[WR_HOST_MAX];  /* the name the sandbox asked for */
  struct wr_net_addr addr; /* the checked address to dial */
  uint16_t port;
  struct wr_secret secret; /* a copy, owned (freed by the thread) */
  const uint8_t *prefix;   /* bytes already read from the client */
  size_t prefix_len;       /* (copied) */
  int sockbuf;             /* SO_SNDBUF/SO_RCVBUF of the upstream socket */
  uv_loop_t *loop;
  wr_intercept_done_fn done; /* called on the loop thread */
  void *arg;
};

/* An interception in progress: the handle that cancels it. */
struct wr_intercept;

/* Terminate TLS from the sandbox, connect to addr:port with verified TLS,
 * and relay HTTP/1.1 requests with the secret's header set (replacing any
 * the sandbox sent), responses unchanged. Runs on a thread of its own;
 * args is copied. *out (may be NULL) is the handle: it stays valid until
 * the done callback has run and is freed right after, so its holder must
 * forget it in done. */
int wr_intercept_start(const struct wr_intercept_args *args,
                       struct wr_intercept **out, wr_error_t *err);
/* Make the interception end promptly: its thread drops both connections
 * at once, whatever it is waiting for, and done follows on the loop thread
 * with the error "cancelled". Loop thread only; any number of times before
 * done has run, never after. */
void wr_intercept_cancel(struct wr_intercept *ic);

/* ---- the engine (net.c, proxy.c, head.c, connect.c, tunnel.c, dns.c,
 * resolve.c, ports.c) ------------------------------------------------------
 *
 * Everything below runs on the loop thread. A sandbox (struct wr_net_sb)
 * holds its listeners and the list of its connections; a connection
 * (struct wr_net_conn) holds the sandbox by reference, so a detached
 * sandbox lives on until its last handle has closed. */

#include <http_parser.h>

#define WR_PROXY_PORT 3128
#define WR_DNS_PORT 53
#define WR_HEAD_MAX 16384            /* request head; 431 beyond */
#define WR_HEAD_FIELDS 128           /* header lines in a head */
#define WR_IN_MAX (WR_SNIFF_MAX + 1) /* client bytes held before relaying */
#define WR_FIRST_BYTES_MS 10000      /* a whole head or ClientHello */
#define WR_SNIFF_WAIT_MS 300         /* silence: the server speaks first */
#define WR_CONNECT_TIMEOUT_MS 10000  /* resolving, then connecting */
#define WR_IDLE_TIMEOUT_MS (10 * 60 * 1000)
#define WR_WAKE_TIMEOUT_MS 30000   /* a published port's wait for a wake */
#define WR_ACTIVITY_MS 1000        /* bytes reported at most this often */
#define WR_LINGER_MS 2000          /* after an answer, for the client */
#define WR_QUEUE_HIGH (128 * 1024) /* stop reading the other side */
#define WR_QUEUE_LOW (32 * 1024)   /* and resume */
#define WR_CONNS_PER_SANDBOX 512
#define WR_CONNS_MAX 8192
#define WR_RELAY_CHUNK 65536 /* the relay's reads */
#define WR_PIPE_SIZE 65536   /* a spliced direction's pipe (the default) */
#define WR_PIPE_BULK 262144  /* and once it carries bulk (splice.c) */
#define WR_SPLICE_ROUNDS 16  /* pipe-fulls per direction per wakeup */
#define WR_PIPE_CACHE 64     /* empty pipes kept for the next tunnels */
/* Buffers held for a sandbox's connections (held.c): socket buffer sizes
 * as given to SO_SNDBUF/SO_RCVBUF, and the budgets. */
#define WR_SOCKBUF_CLIENT_SND (256 * 1024)
#define WR_SOCKBUF_CLIENT_RCV (128 * 1024)
#define WR_SOCKBUF_UP_MIN (16 * 1024)
#define WR_SOCKBUF_UP_MAX (512 * 1024)
#define WR_HELD_PER_SANDBOX ((size_t)128 << 20)
#define WR_HELD_FALLBACK ((size_t)512 << 20) /* without /proc's tcp_mem */
#define WR_DNS_INFLIGHT 64                   /* per sandbox; dropped beyond */
#define WR_DNS_TCP_CONNS 16                  /* per sandbox; reset beyond */
#define WR_DNS_TCP_PIPELINE 16           /* queries of one connection waiting */
#define WR_DNS_TCP_QUEUE_MAX (64 * 1024) /* answers not yet read by it */
#define WR_DNS_TCP_IDLE_MS 10000
#define WR_RESOLVE_ADDRS 16 /* addresses a connection tries */
/* The resolver (resolve.c). A slow server gets WR_RESOLVE_TRIES tries of
 * WR_RESOLVE_TRY_MS, c-ares doubling the wait each round (1 + 2 + 4 s for
 * one server); a lookup ends by WR_RESOLVE_WAIT_MS whatever the servers
 * do, which leaves room to dial within WR_CONNECT_TIMEOUT_MS. */
#define WR_RESOLVE_TRY_MS 1000
#define WR_RESOLVE_TRIES 3
#define WR_RESOLVE_WAIT_MS 7500
/* Both families asked: once one has addresses, the other gets this much
 * longer (a server that never answers AAAA costs no more). */
#define WR_RESOLVE_FAMILY_WAIT_MS 500
#define WR_RESOLVE_TTL_MIN_S 5      /* answers are kept at least this long */
#define WR_RESOLVE_TTL_MAX_S 300    /* and at most */
#define WR_RESOLVE_NODATA_TTL_S 30  /* no address of that family */
#define WR_RESOLVE_FAIL_TTL_MS 3000 /* NXDOMAIN, SERVFAIL, timeouts */
#define WR_RESOLVE_CACHE_MAX 4096   /* (name, family) entries */
#define WR_RESOLVE_INFLIGHT 1024    /* flights on the host */
#define WR_RESOLVE_PER_SANDBOX 32   /* (name, family) flights per sandbox */
#define WR_RESOLVE_NAME_ADDRS WR_NET_NAME_ADDRS /* per name and family */
#define WR_SELF_ADDRS_MS 10000 /* how long getifaddrs is trusted */

/* A proxy request head, parsed in place (head.c). The bytes stay in the
 * caller's buffer, which must not move or change while the head is in use;
 * fields are offsets into it. */
struct wr_head_field {
  uint32_t name, name_len, value, value_len;
};

struct wr_proxy_head {
  http_parser parser;
  bool transparent; /* a redirected client: origin-form, the Host decides */
  const char *base; /* the buffer being parsed */
  size_t parsed;    /* bytes of base given to the parser */
  int hstate;       /* which part of a header line came last */
  uint32_t url, url_len;
  struct wr_head_field fields[WR_HEAD_FIELDS];
  size_t nfields;
  struct wr_http_framing framing; /* framing headers seen so far */
  bool done;                      /* the head is complete */
  bool body_done;                 /* so is the request's body */
  size_t head_len;                /* bytes of the head, final CRLF included */
  int status;                     /* when refused: 400 or 431 */
  char error[160];                /* and why */
  /* What it asks for. */
  bool connect;
  char host[WR_HOST_MAX]; /* normalised */
  bool host_is_ip;
  struct wr_net_addr host_addr;
  uint16_t port; /* the destination's; redirected: where it connected */
  uint32_t path, path_len; /* the target's path and query, or empty */
  uint32_t query, query_len;
};

/* Start a head. A redirected client (transparent) sends an origin-form
 * request, and its Host header names the destination, reached on port
 * (where the client connected); otherwise port is unused. */
void wr_proxy_head_init(struct wr_proxy_head *h, bool transparent,
                        uint16_t port);
/* Parse more of a head: base holds every byte read so far (len of them).
 * Returns 1 when the head is complete and acceptable, 0 when more bytes are
 * needed, -1 when it is refused (h->status, h->error). */
int wr_proxy_head_feed(struct wr_proxy_head *h, const char *base, size_t len);
/* The request to send upstream: origin-form, one Host, hop-by-hop and
 * Proxy-* headers removed, "Connection: close" added. */
void wr_proxy_head_forward(const struct wr_proxy_head *h, wr_buf_t *out);
/* Account for body bytes that follow the head: *used is how many of them
 * belong to this request (h->body_done once all have been seen). -1 when
 * the body's framing is broken. */
int wr_proxy_body_feed(struct wr_proxy_head *h, const char *data, size_t len,
                       size_t *used);

/* A name resolution in flight (resolve.c). */
struct wr_resolve_req;

struct wr_resolver;
struct wr_net_sb;

/* Resolve a normalised name for sb (NULL: for the host, such as `policy
 * check`): the hosts file, then the cache and c-ares. family is AF_INET,
 * AF_INET6 or AF_UNSPEC (both; IPv4 addresses first). cb always runs later
 * on the loop, never inside this call, unless the request is cancelled
 * first. On failure err->code is ENOENT (no such name), ENODATA (no
 * address), ETIMEDOUT, EAGAIN (the sandbox has WR_RESOLVE_PER_SANDBOX
 * lookups in flight), ECANCELED (shutting down) or another errno. *out
 * (may be NULL) is for wr_resolve_cancel. The request holds a reference to
 * sb until it is delivered. */
int wr_resolve_start(struct wr_net *n, struct wr_net_sb *sb, const char *host,
                     int family, wr_net_resolve_fn cb, void *arg,
                     struct wr_resolve_req **out, wr_error_t *err);
/* The callback will not run; the request frees itself. */
void wr_resolve_cancel(struct wr_resolve_req *r);
/* servers: "ADDR[:PORT]" strings (NULL-ended) or NULL for resolv.conf. */
int wr_resolve_init(struct wr_net *n, char *const *servers, wr_error_t *err);
/* Deliver what is queued (as cancelled) and close the resolver's timer. */
void wr_resolve_shutdown(struct wr_net *n);
void wr_resolve_free(struct wr_net *n);

/* Bytes held out of the budgets (held.c): everything, and the part of it
 * that is kernel socket buffers. */
struct wr_held {
  size_t all, kernel;
};

struct dns_tcp;

/* A sandbox attached to the engine (net.c). */
struct wr_net_sb {
  struct wr_net *n;
  char *id;
  int netns_fd;
  uv_tcp_t listen4, listen6;
  uv_udp_t dns;
  uv_tcp_t dns_tcp;
  bool has4, has6, has_dns, has_dns_tcp; /* which handles were initialised */
  int refs; /* attached + open handles + connections + queries */
  bool detached;
  size_t nconns; /* egress connections, for the per-sandbox cap */
  size_t held;   /* bytes its connections hold (held.c) */
  size_t dns_inflight;
  struct dns_tcp *dns_tcps; /* DNS clients over TCP (dns.c) */
  size_t dns_nconns;
  size_t resolving; /* (name, family) flights it waits on (resolve.c) */
  struct wr_net_conn *conns; /* every connection, egress and published */
  struct wr_net_icpt *icpts; /* intercepted connections (connect.c) */
  struct wr_net_sb *prev, *next;
};

void wr_net_sb_ref(struct wr_net_sb *sb);
void wr_net_sb_unref(struct wr_net_sb *sb);
struct wr_net_sb *wr_net_sb_find(struct wr_net *n, const char *sandbox);

/* A published port (ports.c). */
struct wr_net_pub {
  struct wr_net *n;
  char *sandbox;
  struct wr_net_addr addr;
  uint16_t host_port, port;
  uv_tcp_t listener;
  struct wr_net_pub *prev, *next;
};

void wr_ports_shutdown(struct wr_net *n);

/* The engine. */
struct wr_net {
  uv_loop_t *loop;
  char *hosts_file;
  wr_net_log_fn log;
  void *log_arg;
  wr_net_activity_fn activity;
  wr_net_wake_fn wake;
  void *hook_arg;
  struct wr_tls *tls; /* NULL without a CA dir: nothing is intercepted */
  int self_netns;     /* the loop thread's own network namespace */
  struct wr_policy *policy;
  struct wr_secret *secrets;
  size_t nsecrets;
  struct wr_net_sb *sandboxes;
  struct wr_net_pub *pubs;
  size_t nconns; /* connections and interceptions, for the global cap */
  /* Kernel buffer bytes held for all sandboxes, and the budget (held.c) */
  size_t held_kernel, held_max;
  bool shut;
  struct wr_resolver *resolver; /* resolve.c */
  /* connect.c: this host's own addresses */
  struct wr_net_addr *self;
  size_t nself;
  uint64_t self_at;
  bool self_known;
  /* dns.c: datagrams are handled as they arrive */
  char dns_buf[4096];
  /* tunnel.c: bytes read after an answer are dropped here */
  char discard[4096];
  /* splice.c: empty pipes for the next tunnels */
  int pipes[WR_PIPE_CACHE][2];
  size_t npipes;
};

/* Report a decision; fills time_ms. */
void wr_net_emit(struct wr_net *n, struct wr_net_event *ev);
/* The policy's verdict on a name (addr NULL) or a name and an address, with
 * one more rule than wr_policy_check: an address of this host is not
 * public, and needs an IP or CIDR allow rule. */
void wr_net_check(struct wr_net *n, const char *sandbox, const char *host,
                  const struct wr_net_addr *addr, uint16_t port,
                  struct wr_verdict *v);
/* The secret whose hosts include host, or NULL. */
const struct wr_secret *wr_net_secret_for(const struct wr_net *n,
                                          const char *host);
void wr_net_secret_copy(struct wr_secret *dst, const struct wr_secret *src);
/* wr_net_socket_in with the caller's namespace already open. */
int wr_net_socket_in_ns(int self_fd, int netns_fd, int domain, int type,
                        wr_error_t *err);
/* Accept a connection on server only to reset it (caps, no sandbox). */
void wr_net_reject(struct wr_net *n, uv_stream_t *server);

/* One TCP connection through the engine (tunnel.c). */
enum wr_conn_kind {
  WR_CONN_EXPLICIT = 0, /* spoke to the proxy; the head tells which */
  WR_CONN_CONNECT,
  WR_CONN_HTTP,
  WR_CONN_TCP,  /* redirected */
  WR_CONN_PORT, /* a published port, host to sandbox */
};

/* What a kind of connection is, in one table (tunnel.c), so that code
 * asks a property rather than testing kinds. */
struct wr_conn_kind_info {
  const char *name; /* in the log: "connect", "http", "tcp", "port" */
  /* The host dials into the sandbox (a published port): the upstream
   * socket is made in the sandbox's namespace, the sandbox is woken
   * first, and the policy has no say. */
  bool from_host;
  /* Decided by the policy: checked again when it changes, logged when
   * it closes, and open to TLS interception for a secret. */
  bool policed;
  /* Counted against the sandbox's cap of connections and its budget of
   * buffers (held.c); the others start in the big tier. */
  bool budgeted;
  /* The client spoke HTTP to the proxy and can read an HTTP answer. */
  bool speaks_http;
  /* Forwarded as one HTTP request, not a byte relay. */
  bool one_request;
  /* A refusal resets the connection (the client expects no answer). */
  bool reset_on_refusal;
};

extern const struct wr_conn_kind_info wr_conn_kinds[];

enum wr_conn_state {
  WR_CS_HEAD = 0, /* explicit: reading the request head */
  WR_CS_SNIFF,    /* redirected: reading the first bytes */
  WR_CS_DECIDE,   /* checking and resolving */
  WR_CS_WAKE,     /* from the host: held while the daemon wakes it */
  WR_CS_DIAL,     /* connecting upstream */
  WR_CS_HANDOVER, /* writing 200 before TLS interception takes the fd */
  WR_CS_RELAY,    /* both ways */
  WR_CS_FINISH,   /* an answer is written; then FIN, linger, close */
};

struct wr_net_side {
  uv_tcp_t tcp;
  uv_shutdown_t shutdown;
  struct wr_net_conn *c;
  size_t queued;  /* bytes in writes to this side not yet done */
  uint64_t sent;  /* bytes the relay wrote to this side */
  bool open;      /* handle initialised and not closed */
  bool reading;   /* uv_read_start is in effect */
  bool paused;    /* reading stopped while the other side drains */
  bool eof;       /* this side sent EOF */
  bool done;      /* nothing more is wanted from this side */
  bool shut;      /* uv_shutdown asked (splice.c: shutdown(2) done) */
  bool shut_done; /* and finished */
  /* Spliced relay (splice.c): readiness of tcp's fd, and the pipe that
   * holds bytes read from this side until the other side takes them. */
  uv_poll_t poll;
  bool polled;  /* poll handle initialised and not closed */
  int pevents;  /* what poll watches for */
  int pipe[2];  /* read end, write end; -1 when none */
  size_t piped; /* bytes in pipe */
  size_t pipe_size;
};

struct wr_net_conn {
  struct wr_net *n;
  struct wr_net_sb *sb;   /* a reference */
  struct wr_net_pub *pub; /* published ports: the listener, until it goes */
  struct wr_net_conn *prev, *next; /* in sb->conns */
  enum wr_conn_kind kind;
  enum wr_conn_state state;
  struct wr_net_side client, upstream;
  uv_timer_t timer;
  uv_connect_t connect;
  int handles; /* initialised handles not yet closed */
  bool closing;
  bool allowed;  /* decided and relaying: logged when it closes */
  bool tls;      /* a redirected client began with a ClientHello */
  bool http;     /* a redirected client began with an HTTP request: it is
                    forwarded as one request, like an absolute-URI one */
  bool sniffing; /* CONNECT: the client's first bytes are still held */
  /* A pure byte relay: splice once libuv's queues drain; and then bytes
   * move through pipes (splice.c). */
  bool want_splice, splicing;
  bool got_bytes;
  uint64_t deadline;    /* uv_now() by which the first bytes must be in */
  uint64_t last_active; /* uv_now() of the last relayed bytes */
  uint64_t reported;    /* uv_now() when activity was last reported */
  char *in;             /* client bytes before relaying (WR_IN_MAX) */
  size_t in_len;
  size_t in_off; /* bytes of in that belong to the head */
  struct wr_proxy_head *head;
  struct wr_resolve_req *resolve;
  char host[WR_HOST_MAX];  /* normalised name decided on; "" for none */
  struct wr_net_addr orig; /* redirected: where the client was going */
  uint16_t orig_port;
  struct wr_net_addr addrs[WR_RESOLVE_ADDRS];
  size_t naddrs, next_addr;
  struct wr_net_addr addr; /* checked (and dialed) address */
  bool has_addr;
  uint16_t port;
  int dial_error; /* last connect error (libuv) */
  char *rule;     /* the allowing rule's text, for the log */
  char reason[192];
  struct wr_secret secret; /* for interception, until handed over */
  bool has_secret;
  struct wr_held held;             /* out of the budgets (held.c) */
  const struct wr_conn_tier *tier; /* its buffers' sizes (held.c) */
  size_t upbuf; /* upstream socket buffer size, once chosen */
};

/* held.c: the budgets of buffers held for sandboxes (see its top). */
/* The sizes a connection's buffers have: two tiers, chosen at accept. */
struct wr_conn_tier {
  int client_snd, client_rcv;   /* SO_SNDBUF/SO_RCVBUF, the sandbox's side */
  size_t queue_high, queue_low; /* the relay's: stop reading, and resume */
  size_t chunk;                 /* the relay's reads */
  size_t pipe;                  /* a spliced direction's pipe, at first */
};
extern const struct wr_conn_tier wr_tier_small, wr_tier_big;
/* Half the host's tcp_mem pressure threshold (the text of
 * /proc/sys/net/ipv4/tcp_mem, in pages), at least WR_HELD_PER_SANDBOX;
 * WR_HELD_FALLBACK when it cannot be read. */
size_t wr_net_held_budget(const char *tcp_mem, size_t page_size);
/* What a connection of tier t holds: its sockets' buffers at the smallest
 * upstream size, and (in all) the relay's queues or pipes and the head
 * buffers. */
struct wr_held wr_conn_tier_held(const struct wr_conn_tier *t);
/* What every connection holds from its accept: the small tier's. */
struct wr_held wr_conn_base_held(void);
/* What sb keeps free for connections it may still open (at the small
 * tier, up to WR_CONNS_PER_SANDBOX): growth never takes it. */
size_t wr_net_reserve(const struct wr_net_sb *sb);
/* After c holds the base: the big tier if the budgets leave room for its
 * extra (held), the small one otherwise. Before wr_conn_size_client. */
void wr_conn_choose_tier(struct wr_net_conn *c);
bool wr_net_can_hold(const struct wr_net *n, const struct wr_net_sb *sb,
                     struct wr_held h);
/* Add h to what c holds, if the budgets allow. */
bool wr_conn_hold(struct wr_net_conn *c, struct wr_held h);
/* Give back *h (then zero). */
void wr_net_release(struct wr_net *n, struct wr_net_sb *sb, struct wr_held *h);
/* Fixed buffers on the sandbox's side; sized ones upstream. */
void wr_conn_size_client(struct wr_net_conn *c);
void wr_conn_size_upstream(struct wr_net_conn *c);
/* The upstream size for c, chosen (and held) the first time. */
size_t wr_conn_upstream_size(struct wr_net_conn *c);
/* Hold what growing one pipe from its tier's size to WR_PIPE_BULK adds,
 * if that leaves the sandbox's reserve and half the global budget free;
 * and give it back (the pipe could not grow). */
bool wr_conn_hold_pipe(struct wr_net_conn *c);
void wr_conn_release_pipe(struct wr_net_conn *c);
/* Before a handover: hold what an interception needs beyond c's relay
 * share; false when the budget has no room (refuse it). */
bool wr_conn_hold_intercept(struct wr_net_conn *c);

struct wr_net_conn *wr_conn_new(struct wr_net *n, struct wr_net_sb *sb,
                                enum wr_conn_kind kind);
/* Close at once (both sockets, the timer); logs an allowed connection. */
void wr_conn_close(struct wr_net_conn *c);
/* Close with a TCP reset towards the client (refused redirected clients). */
void wr_conn_reset(struct wr_net_conn *c);
/* After an answer was queued to the client: flush, FIN, drain what the
 * client still sends for a moment, close. */
void wr_conn_finish(struct wr_net_conn *c);
/* Queue bytes to one side (takes data). May close c on error. */
void wr_conn_write(struct wr_net_conn *c, struct wr_net_side *to, char *data,
                   size_t len);
/* Close the upstream socket; while dialing, the next address is tried. */
void wr_conn_drop_upstream(struct wr_net_conn *c);
/* Initialise the upstream handle (made inside the sandbox for ports). */
int wr_conn_open_upstream(struct wr_net_conn *c);
/* Relay both ways from now on. */
void wr_conn_relay(struct wr_net_conn *c);
/* The client's first bytes of a CONNECT tunnel are in c->in (connect.c);
 * when they pass, wr_conn_sni_passed sends them on. */
void wr_conn_sni_check(struct wr_net_conn *c);
void wr_conn_sni_passed(struct wr_net_conn *c);
/* (Re)start the connection's one timer (phases before the relay). */
void wr_conn_set_timer(struct wr_net_conn *c, uint64_t ms);
const char *wr_conn_kind_name(enum wr_conn_kind k);
/* Whether c forwards one plain HTTP request and relays its response until
 * upstream closes: an absolute-URI request, or a redirected client that
 * began with HTTP. */
bool wr_conn_one_request(const struct wr_net_conn *c);
/* Bytes moved on c: its idle clock, and the daemon's activity report. */
void wr_conn_active(struct wr_net_conn *c);
/* Log c's decision (c->host, c->addr, c->port, bytes so far). */
void wr_conn_log(struct wr_net_conn *c, bool allow, const char *rule,
                 const char *reason, bool intercepted);

/* Close the connection once both directions have ended (tunnel.c). */
void wr_conn_check_done(struct wr_net_conn *c);
/* The close callback of every handle of a connection (tunnel.c). */
void wr_conn_on_closed(uv_handle_t *h);

/* The spliced relay (splice.c). Start: the tcp handles must not be
 * reading nor writing (libuv's queues empty); false (and nothing changed)
 * when it cannot, so that the relay goes on in libuv buffers. Stop: close
 * the poll handles (before the tcp handles) and the pipes. */
bool wr_splice_start(struct wr_net_conn *c);
void wr_splice_stop(struct wr_net_conn *c);
/* Close the cached pipes (wr_net_free). */
void wr_splice_free(struct wr_net *n);

/* Deciding and dialing (connect.c). host is normalised or NULL; with NULL
 * the decision is on addr alone. */
void wr_conn_decide(struct wr_net_conn *c, const char *host,
                    const struct wr_net_addr *addr, uint16_t port);
/* Decide on a name from the client (SNI, Host): normalised, and an IP
 * literal sends it down the no-name path with the original address. */
void wr_conn_decide_name(struct wr_net_conn *c, const char *raw, uint16_t port);
/* Dial c->addrs in order (c->port), then wr_proxy_connected. */
void wr_conn_dial(struct wr_net_conn *c);
void wr_conn_dial_next(struct wr_net_conn *c);
void wr_conn_timed_out(struct wr_net_conn *c);
/* Refuse: an HTTP answer to a client that spoke HTTP (to the proxy, or a
 * redirected request), a reset otherwise; logged with allow=false. */
void wr_conn_refuse(struct wr_net_conn *c, int status, const char *rule,
                    const char *reason);
void wr_conn_handover(struct wr_net_conn *c);
/* Whether c would still be allowed (re-checked when the policy changes). */
bool wr_conn_recheck(struct wr_net_conn *c, struct wr_verdict *v);

/* An intercepted connection, from its handover to its done callback
 * (connect.c): the handle that cancels it and what it is logged with. It
 * holds a reference to its sandbox and a place under the caps meanwhile,
 * and sits in sb->icpts. */
struct wr_net_icpt {
  struct wr_net *n;
  struct wr_net_sb *sb;
  struct wr_net_icpt *prev, *next;
  struct wr_intercept *handle; /* valid while in the list */
  enum wr_conn_kind kind;
  char host[WR_HOST_MAX];
  struct wr_net_addr addr; /* the checked address it dials */
  uint16_t port;
  char *rule; /* the allowing rule's text */
  char reason[192];
  bool denied;     /* cancelled because a new policy denies it: logged so */
  char *deny_rule; /* the denying rule's text, or NULL */
  char deny_reason[256];
  struct wr_held held; /* its connection's share of the budgets */
};

/* End every intercepted connection of a sandbox (detach, shutdown). */
void wr_icpt_cancel_all(struct wr_net_sb *sb);
/* End the intercepted connections of a sandbox that the current policy
 * denies, by name and by the address dialed, as for a relaying tunnel. */
void wr_icpt_recheck_all(struct wr_net_sb *sb);

/* The proxy listeners' side (proxy.c). */
void wr_proxy_on_connection(uv_stream_t *server, int status);
void wr_proxy_sniff_timer(struct wr_net_conn *c);
/* Upstream is connected: answer the client, send what is held, relay. */
void wr_proxy_connected(struct wr_net_conn *c);

/* The DNS server (dns.c): UDP on sb->dns, TCP on sb->dns_tcp. */
int wr_dns_start(struct wr_net_sb *sb, wr_error_t *err);
int wr_dns_tcp_start(struct wr_net_sb *sb, wr_error_t *err);
/* Close the sandbox's DNS clients over TCP (detach). */
void wr_dns_close_all(struct wr_net_sb *sb);

#endif
