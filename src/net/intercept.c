/*
 * TLS interception. The proxy hands over a sandbox connection whose
 * ClientHello names a host that has a secret. A thread of its own
 * terminates TLS with a leaf from warren's CA, dials the address the proxy
 * checked with verified TLS, and relays HTTP/1.1: requests are parsed and
 * re-emitted with the secret's header set (every header of that name the
 * sandbox sent is dropped), responses pass unchanged.
 *
 * Ownership: wr_intercept_start copies its arguments into a struct
 * wr_intercept, which is also the caller's handle. Once the thread runs it
 * owns everything in it but the async handle and the cancel flag: the
 * sockets, the SSL objects, the secret. When the connection ends the
 * thread closes and wipes all of that, leaves the counts and the error in
 * the struct, and sends the async as its very last act. The loop thread
 * then calls done and closes the async, whose close callback frees the
 * struct: the handle is valid until done has run, never after.
 *
 * Cancelling (wr_intercept_cancel, loop thread) shuts both sockets down,
 * which wakes the thread from any poll() or blocking read or write at
 * once; everything it tries next fails, and it ends as it would after an
 * error. The only state both threads touch is the cancel flag and the two
 * descriptors, under a mutex: the thread publishes a socket and closes it
 * holding the lock, so a cancel never shuts down a descriptor number that
 * has been closed (and perhaps reused) meanwhile, and a socket made after
 * a cancel is closed at once.
 *
 * Sockets are blocking with send and receive timeouts, so no single call
 * hangs for long; poll() waits on both sides with an idle timeout.
 * SSL_read returns after a record that carries no data instead of blocking
 * for the next one (SSL_MODE_AUTO_RETRY is off in tls.c), and data OpenSSL
 * has already decrypted (SSL_pending) is drained before polling. Without
 * read-ahead OpenSSL never holds a whole unread record, only part of one
 * after a receive timeout, and poll() reports when the rest arrives.
 *
 * Requests are framed by http-parser. Heads are collected raw, split into
 * lines that must agree with what http-parser saw, checked, and re-emitted
 * line for line; bodies pass byte for byte. Ambiguous framing, upgrades
 * and other hosts are refused with 400 or 421. A refusal waits until the
 * responses to earlier pipelined requests have gone out (responses are
 * parsed only to count them), so it never answers the wrong request.
 */
#include "net/net_internal.h"

#include <http_parser.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509.h>

#define STACK_SIZE ((size_t)256 * 1024)
#define CONNECT_TIMEOUT_MS 10000
#define HANDSHAKE_IO_S 10
#define RELAY_IO_S 60
#define IDLE_TIMEOUT_MS (5 * 60 * 1000)
#define LINGER_MS 2000
#define LINGER_MAX ((size_t)256 * 1024)
#define HEAD_MAX ((size_t)64 * 1024)
#define HEADERS_MAX 128
#define PIPELINE_MAX 1024
#define IO_CHUNK 16384

/* One side of the relay. */
struct side {
  int fd;
  SSL *ssl;
  bool notify; /* end with close_notify (false after an error or when the
                  other side vanished without one) */
};

enum req_event { EV_NONE = 0, EV_HEAD, EV_DONE };

struct wr_intercept {
  uv_async_t async;     /* the loop thread's */
  pthread_mutex_t lock; /* guards cancelled, cli.fd and up.fd */
  bool cancelled;       /* set by the loop thread */
  /* Copied from the arguments. */
  struct wr_tls *tls;
  char host[WR_HOST_MAX];
  struct wr_net_addr addr;
  uint16_t port;
  struct wr_secret secret;
  uint8_t *prefix;
  size_t prefix_len;
  int sockbuf;
  wr_intercept_done_fn done;
  void *arg;
  /* The thread's. */
  struct side cli, up;
  char *cred; /* "Header: prefix value\r\n", wiped at the end */
  size_t cred_len;
  /* Requests from the sandbox. */
  http_parser req;
  enum req_event ev;
  bool in_head;   /* reading a head (else a body passes through) */
  wr_buf_t head;  /* raw bytes of the head being read */
  wr_buf_t names; /* its header names as http-parser saw them, "\n"-joined */
  size_t nnames;
  bool in_name; /* the last header callback was a name */
  wr_buf_t out; /* bytes for the upstream not yet written */
  int refusal;  /* status of a refusal waiting for earlier responses */
  const char *refusal_why;
  /* Responses from the upstream, followed only to count them. */
  http_parser resp;
  wr_buf_t pending; /* a byte per request awaiting its response: 'H'
                       for HEAD, whose response has no body */
  bool resp_lost;   /* responses can no longer be followed */
  /* Outcome, read by the loop thread after the async. */
  uint64_t bytes_up, bytes_down;
  wr_error_t err;
};

/* ---- sockets ----------------------------------------------------------- */

static void set_io_timeouts(int fd, int seconds) {
  struct timeval tv = {.tv_sec = seconds};

  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Small writes (a head, then the credential line) go out at once. Fails
 * harmlessly on a socket that is not TCP. */
static void set_nodelay(int fd) {
  int one = 1;

  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int ms_until(uint64_t deadline_ns) {
  uint64_t now = wr_mono_ns();

  return now >= deadline_ns ? 0 : (int)((deadline_ns - now) / 1000000u);
}

/* Wait for a nonblocking connect; returns 0 or an errno value. */
static int wait_connected(int fd) {
  uint64_t deadline = wr_mono_ns() + CONNECT_TIMEOUT_MS * 1000000ull;
  struct pollfd pfd = {.fd = fd, .events = POLLOUT};
  int soerr = 0;
  socklen_t len = sizeof(soerr);

  for (;;) {
    int left = ms_until(deadline);
    int r = left > 0 ? poll(&pfd, 1, left) : 0;
    if (r > 0)
      break;
    if (r == 0)
      return ETIMEDOUT;
    if (errno != EINTR)
      return errno;
  }
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
    return errno;
  return soerr;
}

static bool is_cancelled(struct wr_intercept *ic) {
  bool yes;

  pthread_mutex_lock(&ic->lock);
  yes = ic->cancelled;
  pthread_mutex_unlock(&ic->lock);
  return yes;
}

/* Publish a new socket on side s, so that a cancel can reach it; after a
 * cancel it is closed instead (ECANCELED). */
static int take_socket(struct wr_intercept *ic, struct side *s, int fd) {
  int rc = 0;

  if (fd < 0)
    return -1;
  pthread_mutex_lock(&ic->lock);
  if (ic->cancelled) {
    close(fd);
    errno = ECANCELED;
    rc = -1;
  } else {
    s->fd = fd;
  }
  pthread_mutex_unlock(&ic->lock);
  return rc;
}

/* Connect to the address the proxy checked (never a fresh lookup), giving
 * up after CONNECT_TIMEOUT_MS. */
static int dial(struct wr_intercept *ic) {
  struct sockaddr_storage ss;
  socklen_t sslen = wr_net_addr_to_sockaddr(&ic->addr, ic->port, &ss);
  char addr[64];
  int e = 0;

  wr_net_addr_format(&ic->addr, addr, sizeof(addr));
  if (take_socket(ic, &ic->up,
                  socket(ss.ss_family,
                         SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
    return wr_error_set(&ic->err, errno, "socket for %s", addr);
  if (ic->sockbuf > 0) {
    setsockopt(ic->up.fd, SOL_SOCKET, SO_SNDBUF, &ic->sockbuf,
               sizeof(ic->sockbuf));
    setsockopt(ic->up.fd, SOL_SOCKET, SO_RCVBUF, &ic->sockbuf,
               sizeof(ic->sockbuf));
  }
  if (connect(ic->up.fd, (struct sockaddr *)&ss, sslen) < 0)
    e = errno == EINPROGRESS ? wait_connected(ic->up.fd) : errno;
  if (e != 0)
    return wr_error_set(&ic->err, e, "connect to %s port %u", addr,
                        (unsigned)ic->port);
  if (wr_set_nonblock(ic->up.fd, false) < 0)
    return wr_error_set(&ic->err, errno, "socket for %s", addr);
  set_nodelay(ic->up.fd);
  set_io_timeouts(ic->up.fd, HANDSHAKE_IO_S);
  return 0;
}

/* Shut the sandbox's socket for writing and read what it still sends for
 * a moment before closing. Closing a socket with unread input sends a
 * reset, which can destroy a response (or a refusal) the client has not
 * read yet; web servers do the same ("lingering close"). */
static void linger_close(int fd) {
  uint64_t deadline = wr_mono_ns() + LINGER_MS * 1000000ull;
  size_t total = 0;
  char buf[4096];

  shutdown(fd, SHUT_WR);
  while (total < LINGER_MAX) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int left = ms_until(deadline);
    ssize_t n;

    if (left <= 0 || poll(&pfd, 1, left) <= 0)
      break;
    n = read(fd, buf, sizeof(buf));
    if (n <= 0)
      break;
    total += (size_t)n;
  }
}

/* ---- TLS --------------------------------------------------------------- */

/* Why an SSL call failed, in words; empties the thread's error queue. */
static void ssl_reason(SSL *ssl, int ret, int saved_errno, char *out,
                       size_t size) {
  unsigned long e;

  switch (SSL_get_error(ssl, ret)) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
    snprintf(out, size, "timed out");
    break;
  case SSL_ERROR_ZERO_RETURN:
    snprintf(out, size, "closed by the peer");
    break;
  case SSL_ERROR_SYSCALL:
    snprintf(out, size, "%s",
             saved_errno ? strerror(saved_errno) : "connection closed");
    break;
  default:
    e = ERR_peek_last_error();
    if (e != 0)
      ERR_error_string_n(e, out, size);
    else
      snprintf(out, size, "TLS error");
  }
  ERR_clear_error();
}

/* Record a failed SSL call on s. No close_notify follows a fatal error. */
static int io_fail(struct wr_intercept *ic, struct side *s, int ret,
                   const char *what) {
  int saved = errno;
  char why[256];

  ssl_reason(s->ssl, ret, saved, why, sizeof(why));
  s->notify = false;
  return wr_error_setx(&ic->err, EIO, "%s: %s", what, why);
}

/* Whether the handshake still reads the ClientHello the proxy handed over
 * (a memory BIO) rather than the socket. */
static bool reading_prefix(SSL *ssl) {
  return SSL_get_rbio(ssl) != SSL_get_wbio(ssl);
}

/* Make the socket the read side. Nothing is lost at the switch: it happens
 * only once the memory BIO is empty, and OpenSSL keeps a partial record in
 * its own buffer. */
static void read_from_socket(SSL *ssl) {
  BIO *sock = SSL_get_wbio(ssl);

  BIO_up_ref(sock);
  SSL_set0_rbio(ssl, sock);
}

/* Feed the bytes the proxy already read first, then the socket. */
static int attach_client_bios(struct wr_intercept *ic) {
  SSL *ssl = ic->cli.ssl;
  BIO *sock = BIO_new_socket(ic->cli.fd, BIO_NOCLOSE);
  BIO *mem = NULL;

  if (sock == NULL)
    return io_fail(ic, &ic->cli, 0, "socket BIO");
  SSL_set0_wbio(ssl, sock);
  if (ic->prefix_len == 0) {
    read_from_socket(ssl);
    return 0;
  }
  /* An empty memory BIO asks to retry rather than report the end. */
  mem = BIO_new(BIO_s_mem());
  if (mem == NULL ||
      BIO_write(mem, ic->prefix, (int)ic->prefix_len) != (int)ic->prefix_len) {
    BIO_free(mem);
    return io_fail(ic, &ic->cli, 0, "memory BIO");
  }
  SSL_set0_rbio(ssl, mem);
  return 0;
}

/* The handshake with the sandbox, with a leaf for the host it asked for. */
static int accept_sandbox(struct wr_intercept *ic) {
  int r;

  ic->cli.ssl = wr_tls_server(ic->tls, ic->host, &ic->err);
  if (ic->cli.ssl == NULL || attach_client_bios(ic) < 0)
    return -1;
  while ((r = SSL_accept(ic->cli.ssl)) != 1) {
    bool used_up = reading_prefix(ic->cli.ssl) &&
                   BIO_ctrl_pending(SSL_get_rbio(ic->cli.ssl)) == 0;
    if (SSL_get_error(ic->cli.ssl, r) != SSL_ERROR_WANT_READ || !used_up)
      return io_fail(ic, &ic->cli, r, "TLS handshake with the sandbox");
    read_from_socket(ic->cli.ssl);
  }
  if (reading_prefix(ic->cli.ssl)) {
    if (BIO_ctrl_pending(SSL_get_rbio(ic->cli.ssl)) > 0)
      return wr_error_setx(&ic->err, EPROTO,
                           "the sandbox sent data before the TLS handshake "
                           "finished");
    read_from_socket(ic->cli.ssl);
  }
  ic->cli.notify = true;
  return 0;
}

/* The verified handshake with the real host. A certificate problem is
 * reported as such, since it is the likeliest failure and the one an
 * operator can act on. */
static int connect_upstream(struct wr_intercept *ic) {
  long verify;
  int r;

  ic->up.ssl = wr_tls_client(ic->tls, ic->host, &ic->err);
  if (ic->up.ssl == NULL)
    return -1;
  if (!SSL_set_fd(ic->up.ssl, ic->up.fd))
    return io_fail(ic, &ic->up, 0, "TLS client socket");
  r = SSL_connect(ic->up.ssl);
  if (r == 1) {
    ic->up.notify = true;
    return 0;
  }
  verify = SSL_get_verify_result(ic->up.ssl);
  if (verify != X509_V_OK) {
    ERR_clear_error();
    return wr_error_setx(&ic->err, EPROTO,
                         "TLS handshake with `%s`: certificate verify "
                         "failed: %s",
                         ic->host, X509_verify_cert_error_string(verify));
  }
  return io_fail(ic, &ic->up, r, "TLS handshake with the upstream");
}

enum rd { RD_DATA, RD_NONE, RD_EOF, RD_TRUNC, RD_ERR };

/* Read what one record gives. RD_NONE: a record without data, or a timeout
 * (back to poll either way); RD_EOF: close_notify; RD_TRUNC: the peer went
 * away without one. */
static enum rd read_some(struct side *s, char *buf, size_t size, size_t *n) {
  if (SSL_read_ex(s->ssl, buf, size, n) == 1)
    return RD_DATA;
  switch (SSL_get_error(s->ssl, 0)) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
    return RD_NONE;
  case SSL_ERROR_ZERO_RETURN:
    return RD_EOF;
  case SSL_ERROR_SSL:
    if (ERR_GET_REASON(ERR_peek_error()) != SSL_R_UNEXPECTED_EOF_WHILE_READING)
      return RD_ERR;
    ERR_clear_error();
    s->notify = false;
    return RD_TRUNC;
  default:
    return RD_ERR;
  }
}

/* Write everything; blocking, so a short write only comes with an error
 * (a send timeout shows as WANT_WRITE and ends the connection too). */
static int write_all(struct wr_intercept *ic, struct side *s, const void *data,
                     size_t len, const char *what) {
  const char *p = data;

  while (len > 0) {
    size_t n = 0;
    if (SSL_write_ex(s->ssl, p, len, &n) != 1)
      return io_fail(ic, s, 0, what);
    p += n;
    len -= n;
  }
  return 0;
}

static int flush_out(struct wr_intercept *ic) {
  if (ic->out.len == 0)
    return 0;
  if (write_all(ic, &ic->up, ic->out.data, ic->out.len, "write to upstream") <
      0)
    return -1;
  wr_buf_reset(&ic->out);
  return 0;
}

/* ---- request heads ----------------------------------------------------- */

struct hline {
  const char *start; /* the line without its CRLF */
  size_t len;
  size_t name_len;   /* up to the colon */
  const char *value; /* without surrounding blanks */
  size_t value_len;
};

struct head {
  const char *start; /* the request line */
  size_t len;
  const char *target;
  size_t target_len;
  struct hline lines[HEADERS_MAX];
  size_t n;
  const char *end; /* the final empty line (or its CR): emitted as is */
  size_t end_len;
};

static bool is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s, size_t len) {
  if (len == 0)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!is_tchar((unsigned char)s[i]))
      return false;
  return true;
}

/*
 * The next CRLF-terminated line at *p. Returns 1 with the line (without
 * CRLF) and *p moved past it; 0 when no CRLF follows (the rest is the start
 * of the final empty line, which http-parser has not all consumed when it
 * stops at the end of a head); -1 for a CR or LF that is not part of a
 * CRLF, which other parsers may read differently.
 */
static int next_line(const char **p, const char *end, const char **line,
                     size_t *len) {
  for (const char *q = *p; q < end; q++) {
    if (*q == '\n')
      return -1;
    if (*q != '\r')
      continue;
    if (q + 1 == end)
      return 0;
    if (q[1] != '\n')
      return -1;
    *line = *p;
    *len = (size_t)(q - *p);
    *p = q + 2;
    return 1;
  }
  return 0;
}

static bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

/* "Name: value". The name must be a token right before the colon, so a
 * space there or a folded continuation line is not a header. */
static int parse_header_line(const char *line, size_t len, struct hline *h) {
  const char *colon = memchr(line, ':', len);
  const char *v, *vend = line + len;

  if (colon == NULL || !is_token(line, (size_t)(colon - line)))
    return -1;
  for (v = colon + 1; v < vend && is_blank(*v); v++)
    ;
  while (vend > v && is_blank(vend[-1]))
    vend--;
  *h = (struct hline){.start = line,
                      .len = len,
                      .name_len = (size_t)(colon - line),
                      .value = v,
                      .value_len = (size_t)(vend - v)};
  return 0;
}

/* "METHOD SP target SP version". */
static int parse_request_line(const char *line, size_t len, struct head *h) {
  const char *sp1 = memchr(line, ' ', len);
  const char *sp2 = memrchr(line, ' ', len);

  if (sp1 == NULL || sp2 == sp1 || sp2 == sp1 + 1)
    return -1;
  h->start = line;
  h->len = len;
  h->target = sp1 + 1;
  h->target_len = (size_t)(sp2 - sp1 - 1);
  return 0;
}

/*
 * Split a complete head into the request line and header lines. Empty
 * lines before the request line (which http-parser skips) are dropped.
 * Returns 0, or an HTTP status with *why.
 */
static int split_head(const char *data, size_t len, struct head *h,
                      const char **why) {
  const char *p = data, *end = data + len, *line, *at;
  size_t n;
  int rc;

  while (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
    p += 2;
  *why = "malformed request head";
  if (next_line(&p, end, &line, &n) != 1 || parse_request_line(line, n, h) < 0)
    return 400;
  h->n = 0;
  for (;;) {
    at = p;
    rc = next_line(&p, end, &line, &n);
    if (rc < 0)
      return 400;
    if (rc == 0 || n == 0)
      break;
    if (h->n == HEADERS_MAX) {
      *why = "too many header lines";
      return 431;
    }
    if (parse_header_line(line, n, &h->lines[h->n++]) < 0)
      return 400;
  }
  h->end = at;
  h->end_len = (size_t)(end - at);
  /* What is left is the final CRLF, or its CR with the LF still unread. */
  if (!(h->end_len == 1 && *at == '\r') && !(rc == 1 && p == end))
    return 400;
  return 0;
}

/* The header lines name the headers http-parser reported, in order: the two
 * views of the head agree, so nothing can hide from one of them. */
static bool names_agree(const struct wr_intercept *ic, const struct head *h) {
  const char *p = ic->names.data ? ic->names.data : "";
  const char *end = p + ic->names.len;

  if (ic->nnames != h->n)
    return false;
  for (size_t i = 0; i < h->n; i++) {
    const struct hline *l = &h->lines[i];
    if (i > 0 && (p == end || *p++ != '\n'))
      return false;
    if ((size_t)(end - p) < l->name_len ||
        memcmp(p, l->start, l->name_len) != 0)
      return false;
    p += l->name_len;
  }
  return p == end;
}

static bool name_is(const struct hline *l, const char *name) {
  size_t len = strlen(name);

  return l->name_len == len && strncasecmp(l->start, name, len) == 0;
}

/* A host as a request names it, against the host the sandbox dialed: case
 * does not matter and one trailing dot is dropped. Anything the proxy would
 * have normalised differently (another IP encoding, a U-label) is simply
 * not a match, which refuses rather than leaks. */
static bool name_matches(const char *name, size_t len, const char *host) {
  if (len > 0 && name[len - 1] == '.')
    len--;
  return len > 0 && len == strlen(host) && strncasecmp(name, host, len) == 0;
}

static bool all_digits(const char *s, size_t len, size_t max) {
  if (len == 0 || len > max)
    return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

/* A Host header value: "name", "name:port", "[v6]" or "[v6]:port". */
static bool host_header_matches(const char *v, size_t len, const char *host) {
  const char *end = v + len, *name = v, *name_end, *rest;

  if (len > 0 && v[0] == '[') {
    name = v + 1;
    name_end = memchr(v, ']', len);
    if (name_end == NULL)
      return false;
    rest = name_end + 1;
  } else {
    name_end = memchr(v, ':', len);
    name_end = name_end ? name_end : end;
    rest = name_end;
  }
  if (rest < end &&
      (*rest != ':' || !all_digits(rest + 1, (size_t)(end - rest - 1), 5)))
    return false;
  return name_matches(name, (size_t)(name_end - name), host);
}

/* An absolute-form target ("https://host/path") is what the upstream goes
 * by instead of Host (RFC 9112 3.2.2), so it must name the host too. */
static int check_target(const struct wr_intercept *ic, const struct head *h,
                        const char **why) {
  struct http_parser_url u;
  const char *t = h->target;

  if (t[0] == '/' || (h->target_len == 1 && t[0] == '*'))
    return 0;
  http_parser_url_init(&u);
  *why = "malformed request target";
  if (http_parser_parse_url(t, h->target_len, 0, &u) != 0 ||
      !(u.field_set & (1 << UF_HOST)) || (u.field_set & (1 << UF_USERINFO)))
    return 400;
  *why = "the request target names another host";
  if (!name_matches(t + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len,
                    ic->host))
    return 421;
  return 0;
}

struct head_counts {
  struct wr_http_framing framing;
  const struct hline *host_line;
};

/* One header's part in framing (src/api/framing.c: a Content-Length of
 * digits, a Transfer-Encoding that is exactly "chunked", one Host) and no
 * protocol upgrade. */
static int check_header(const struct hline *l, struct head_counts *c,
                        const char **why) {
  *why = wr_http_framing_header(&c->framing, l->start, l->name_len, l->value,
                                l->value_len);
  if (*why != NULL)
    return 400;
  if (name_is(l, "host"))
    c->host_line = l;
  *why = "protocol upgrades are not relayed";
  return name_is(l, "upgrade") || name_is(l, "http2-settings") ? 400 : 0;
}

/* Framing that two parsers could read differently is refused, as are
 * requests for another host: they would carry the credential elsewhere. */
static int check_headers(const struct wr_intercept *ic, const struct head *h,
                         const char **why) {
  struct head_counts c = {0};
  bool http10 = ic->req.http_minor == 0;
  int status;

  for (size_t i = 0; i < h->n; i++)
    if ((status = check_header(&h->lines[i], &c, why)) != 0)
      return status;
  *why = wr_http_framing_end(&c.framing, http10);
  if (*why != NULL)
    return 400;
  *why = "exactly one Host header is required";
  if (c.framing.host == 0 && !http10)
    return 400;
  *why = "the Host header names another host";
  if (c.host_line != NULL &&
      !host_header_matches(c.host_line->value, c.host_line->value_len,
                           ic->host))
    return 421;
  return 0;
}

static int check_request(const struct wr_intercept *ic, const struct head *h,
                         const char **why) {
  int status;

  *why = "only HTTP/1.0 and HTTP/1.1 are relayed";
  if (ic->req.http_major != 1 || ic->req.http_minor > 1)
    return 400;
  *why = "protocol upgrades are not relayed";
  if (ic->req.method == HTTP_CONNECT || ic->req.upgrade)
    return 400;
  if ((status = check_headers(ic, h, why)) != 0)
    return status;
  return check_target(ic, h, why);
}

/* The head as the sandbox sent it, without its headers of the secret's
 * name, and with the credential line last. The credential goes straight to
 * the TLS write, never into a buffer that grows (and leaves copies). */
static int emit_head(struct wr_intercept *ic, const struct head *h) {
  wr_buf_append(&ic->out, h->start, h->len);
  wr_buf_puts(&ic->out, "\r\n");
  for (size_t i = 0; i < h->n; i++) {
    const struct hline *l = &h->lines[i];
    if (name_is(l, ic->secret.header))
      continue;
    wr_buf_append(&ic->out, l->start, l->len);
    wr_buf_puts(&ic->out, "\r\n");
  }
  if (flush_out(ic) < 0 ||
      write_all(ic, &ic->up, ic->cred, ic->cred_len, "write to upstream") < 0)
    return -1;
  wr_buf_append(&ic->out, h->end, h->end_len);
  return 0;
}

static void refuse(struct wr_intercept *ic, int status, const char *why) {
  ic->refusal = status;
  ic->refusal_why = why;
}

/* A complete head: check it and send it on, or refuse the request. */
static int forward_head(struct wr_intercept *ic) {
  struct head h;
  const char *why = NULL;
  int status = split_head(ic->head.data, ic->head.len, &h, &why);

  if (status == 0 && !names_agree(ic, &h)) {
    status = 400;
    why = "malformed header line";
  }
  if (status == 0)
    status = check_request(ic, &h, &why);
  if (status != 0) {
    refuse(ic, status, why);
    return 0;
  }
  if (ic->pending.len >= PIPELINE_MAX)
    return wr_error_setx(&ic->err, EPROTO, "more than %d pipelined requests",
                         PIPELINE_MAX);
  if (emit_head(ic, &h) < 0)
    return -1;
  wr_buf_append(&ic->pending, ic->req.method == HTTP_HEAD ? "H" : "R", 1);
  wr_buf_reset(&ic->head);
  ic->in_head = false;
  return 0;
}

/* ---- the request parser ------------------------------------------------ */

static int on_req_begin(http_parser *p) {
  struct wr_intercept *ic = p->data;

  wr_buf_reset(&ic->names);
  ic->nnames = 0;
  ic->in_name = false;
  return 0;
}

/* Names arrive in pieces when they span two reads; a new name starts after
 * a value. Trailers (after the head) pass through as part of the body. */
static int on_req_field(http_parser *p, const char *at, size_t len) {
  struct wr_intercept *ic = p->data;

  if (!ic->in_head)
    return 0;
  if (!ic->in_name) {
    if (ic->nnames++ > 0)
      wr_buf_append(&ic->names, "\n", 1);
    ic->in_name = true;
  }
  wr_buf_append(&ic->names, at, len);
  return 0;
}

static int on_req_value(http_parser *p, const char *at, size_t len) {
  struct wr_intercept *ic = p->data;

  (void)at;
  (void)len;
  ic->in_name = false;
  return 0;
}

/* Each event pauses the parser, so the bytes consumed up to it are known
 * and the head can be handled before any of the body is passed on. */
static int on_req_head(http_parser *p) {
  struct wr_intercept *ic = p->data;

  ic->ev = EV_HEAD;
  http_parser_pause(p, 1);
  return 0;
}

static int on_req_done(http_parser *p) {
  struct wr_intercept *ic = p->data;

  ic->ev = EV_DONE;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings req_settings = {
    .on_message_begin = on_req_begin,
    .on_header_field = on_req_field,
    .on_header_value = on_req_value,
    .on_headers_complete = on_req_head,
    .on_message_complete = on_req_done,
};

/* Bytes the parser consumed: part of a head (held back) or of a body. */
static void take(struct wr_intercept *ic, const char *data, size_t n) {
  if (!ic->in_head) {
    wr_buf_append(&ic->out, data, n);
    return;
  }
  if (ic->head.len + n > HEAD_MAX) {
    refuse(ic, 431, "request head too large");
    return;
  }
  wr_buf_append(&ic->head, data, n);
}

/* A parse error in a head is refused with a status. In a body, part of the
 * request has already gone upstream and no answer can be put in sequence,
 * so the connection just ends. */
static int parse_failed(struct wr_intercept *ic, enum http_errno e) {
  if (!ic->in_head)
    return wr_error_setx(&ic->err, EPROTO, "malformed request body: %s",
                         http_errno_description(e));
  if (e == HPE_HEADER_OVERFLOW)
    refuse(ic, 431, "request head too large");
  else
    refuse(ic, 400, http_errno_description(e));
  return 0;
}

/* Run the sandbox's bytes through the request parser, forwarding as it
 * goes. Returns -1 to end the connection; a refusal only stops input. */
static int forward_up(struct wr_intercept *ic, const char *data, size_t len) {
  while (len > 0 && ic->refusal == 0) {
    size_t n;
    enum http_errno e;

    ic->ev = EV_NONE;
    n = http_parser_execute(&ic->req, &req_settings, data, len);
    e = HTTP_PARSER_ERRNO(&ic->req);
    take(ic, data, n);
    data += n;
    len -= n;
    if (ic->refusal != 0)
      break;
    if (e != HPE_OK && e != HPE_PAUSED)
      return parse_failed(ic, e);
    http_parser_pause(&ic->req, 0);
    if (ic->ev == EV_HEAD && forward_head(ic) < 0)
      return -1;
    if (ic->ev == EV_DONE)
      ic->in_head = true;
    if (e == HPE_OK && len > 0)
      return wr_error_setx(&ic->err, EPROTO, "request parser stalled");
  }
  return flush_out(ic);
}

/* ---- the response counter ---------------------------------------------- */

/* A response to HEAD has headers only; interim (1xx) responses never have a
 * body and do not answer the request. */
static int on_resp_head(http_parser *p) {
  struct wr_intercept *ic = p->data;

  if (p->status_code < 200)
    return 0;
  return ic->pending.len > 0 && ic->pending.data[0] == 'H' ? 1 : 0;
}

static int on_resp_done(http_parser *p) {
  struct wr_intercept *ic = p->data;

  if (p->status_code < 200 && p->status_code != 101)
    return 0;
  if (ic->pending.len == 0)
    ic->resp_lost = true; /* a response nobody asked for */
  else
    wr_buf_consume(&ic->pending, 1);
  return 0;
}

static const http_parser_settings resp_settings = {
    .on_headers_complete = on_resp_head,
    .on_message_complete = on_resp_done,
};

static void follow_responses(struct wr_intercept *ic, const char *data,
                             size_t len) {
  size_t n;

  if (ic->resp_lost)
    return;
  n = http_parser_execute(&ic->resp, &resp_settings, data, len);
  if (n != len || HTTP_PARSER_ERRNO(&ic->resp) != HPE_OK || ic->resp.upgrade)
    ic->resp_lost = true;
}

/* ---- the relay --------------------------------------------------------- */

static const char *status_text(int status) {
  switch (status) {
  case 421:
    return "Misdirected Request";
  case 431:
    return "Request Header Fields Too Large";
  default:
    return "Bad Request";
  }
}

/* Answer the refused request and end. When responses could not be
 * followed there is no telling which request an answer would be taken
 * for, so the connection just closes. */
static int answer_refusal(struct wr_intercept *ic) {
  char body[256], msg[512];
  int blen, mlen;

  if (!ic->resp_lost) {
    blen = snprintf(body, sizeof(body), "warren: %s\n", ic->refusal_why);
    mlen = snprintf(msg, sizeof(msg),
                    "HTTP/1.1 %d %s\r\nContent-Type: text/plain; "
                    "charset=utf-8\r\nContent-Length: %d\r\nConnection: "
                    "close\r\n\r\n%s",
                    ic->refusal, status_text(ic->refusal), blen, body);
    if (write_all(ic, &ic->cli, msg, (size_t)mlen, "write to the sandbox") < 0)
      return -1;
    ic->bytes_down += (uint64_t)mlen;
  }
  return wr_error_setx(&ic->err, EPROTO, "refused a request for `%s` (%d): %s",
                       ic->host, ic->refusal, ic->refusal_why);
}

/* Returns 1 to go on, 0 at the end, -1 on an error. */
static int pump_client(struct wr_intercept *ic) {
  char buf[IO_CHUNK];
  size_t n = 0;

  switch (read_some(&ic->cli, buf, sizeof(buf), &n)) {
  case RD_DATA:
    ic->bytes_up += n;
    return forward_up(ic, buf, n) < 0 ? -1 : 1;
  case RD_NONE:
    return 1;
  case RD_EOF:
    return 0;
  case RD_TRUNC:
    ic->up.notify = false;
    return 0;
  default:
    return io_fail(ic, &ic->cli, 0, "read from the sandbox");
  }
}

static int pump_upstream(struct wr_intercept *ic) {
  char buf[IO_CHUNK];
  size_t n = 0;

  switch (read_some(&ic->up, buf, sizeof(buf), &n)) {
  case RD_DATA:
    follow_responses(ic, buf, n);
    if (write_all(ic, &ic->cli, buf, n, "write to the sandbox") < 0)
      return -1;
    ic->bytes_down += n;
    return 1;
  case RD_NONE:
    return 1;
  case RD_EOF:
    return 0;
  case RD_TRUNC:
    ic->cli.notify = false;
    return 0;
  default:
    return io_fail(ic, &ic->up, 0, "read from upstream");
  }
}

/* One round: answer a refusal that is due, use what OpenSSL already holds,
 * else wait for either socket. While a refusal waits, the sandbox is not
 * read. An idle connection ends quietly. */
static int relay_step(struct wr_intercept *ic) {
  bool read_client = ic->refusal == 0;
  struct pollfd pfd[2];
  int rc;

  if (is_cancelled(ic))
    return 0;
  if (!read_client && (ic->resp_lost || ic->pending.len == 0))
    return answer_refusal(ic);
  if (read_client && SSL_pending(ic->cli.ssl) > 0)
    return pump_client(ic);
  if (SSL_pending(ic->up.ssl) > 0)
    return pump_upstream(ic);
  pfd[0] =
      (struct pollfd){.fd = read_client ? ic->cli.fd : -1, .events = POLLIN};
  pfd[1] = (struct pollfd){.fd = ic->up.fd, .events = POLLIN};
  rc = poll(pfd, 2, IDLE_TIMEOUT_MS);
  if (rc < 0)
    return errno == EINTR ? 1 : wr_error_set(&ic->err, errno, "poll");
  if (rc == 0)
    return 0;
  if (pfd[1].revents != 0 && (rc = pump_upstream(ic)) <= 0)
    return rc;
  return pfd[0].revents != 0 ? pump_client(ic) : 1;
}

static int setup(struct wr_intercept *ic) {
  if (wr_set_nonblock(ic->cli.fd, false) < 0)
    return wr_error_set(&ic->err, errno, "sandbox socket");
  set_nodelay(ic->cli.fd);
  set_io_timeouts(ic->cli.fd, HANDSHAKE_IO_S);
  if (accept_sandbox(ic) < 0 || dial(ic) < 0 || connect_upstream(ic) < 0)
    return -1;
  set_io_timeouts(ic->cli.fd, RELAY_IO_S);
  set_io_timeouts(ic->up.fd, RELAY_IO_S);
  return 0;
}

/* ---- the thread -------------------------------------------------------- */

/* close_notify when the side ended cleanly, then the socket (under the
 * lock: a cancel must not find its number once it is closed). */
static void close_side(struct wr_intercept *ic, struct side *s, bool linger) {
  if (s->ssl != NULL && s->notify)
    SSL_shutdown(s->ssl);
  if (s->fd >= 0 && linger)
    linger_close(s->fd);
  SSL_free(s->ssl);
  s->ssl = NULL;
  pthread_mutex_lock(&ic->lock);
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  pthread_mutex_unlock(&ic->lock);
  ERR_clear_error();
}

/* Free the buffers; the credential line is wiped first. */
static void release(struct wr_intercept *ic) {
  if (ic->cred != NULL)
    OPENSSL_cleanse(ic->cred, ic->cred_len);
  free(steal_ptr(&ic->cred));
  free(steal_ptr(&ic->prefix));
  wr_buf_free(&ic->head);
  wr_buf_free(&ic->names);
  wr_buf_free(&ic->out);
  wr_buf_free(&ic->pending);
}

static void *intercept_main(void *arg) {
  struct wr_intercept *ic = arg;

  if (setup(ic) == 0)
    while (relay_step(ic) > 0)
      ;
  close_side(ic, &ic->up, false);
  close_side(ic, &ic->cli, true);
  release(ic);
  OPENSSL_cleanse(ic->secret.value, strlen(ic->secret.value));
  wr_secret_clear(&ic->secret);
  OPENSSL_thread_stop();
  /* The last touch: after this the loop thread may free ic. */
  uv_async_send(&ic->async);
  return NULL;
}

/* Detached, with a modest stack and every signal blocked: signals are the
 * loop thread's business, and a write to a closed socket must fail with
 * EPIPE here rather than raise SIGPIPE. Returns 0 or an errno value. */
static int start_thread(struct wr_intercept *ic) {
  pthread_attr_t attr;
  pthread_t tid;
  sigset_t all, old;
  int rc;

  if ((rc = pthread_attr_init(&attr)) != 0)
    return rc;
  pthread_attr_setstacksize(&attr, STACK_SIZE);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = pthread_create(&tid, &attr, intercept_main, ic);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return rc;
}

/* ---- the loop side ----------------------------------------------------- */

static void on_closed(uv_handle_t *h) {
  struct wr_intercept *ic = h->data;

  pthread_mutex_destroy(&ic->lock);
  free(ic);
}

/* The thread has ended. Whatever error a cancel caused, it was the
 * cancel; the thread no longer reads the flag, so no lock is needed. */
static void on_reported(uv_async_t *h) {
  struct wr_intercept *ic = h->data;
  const char *error = ic->err.msg[0] != '\0' ? ic->err.msg : NULL;

  if (ic->cancelled)
    error = "cancelled";
  if (ic->done != NULL)
    ic->done(ic->arg, ic->bytes_up, ic->bytes_down, error);
  uv_close((uv_handle_t *)h, on_closed);
}

static bool has_ctl(const char *s) {
  for (; *s != '\0'; s++)
    if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
      return true;
  return false;
}

/* Headers that carry framing or routing: a secret set there would change
 * how the upstream reads the stream. */
static bool reserved_header(const char *name) {
  static const char *const names[] = {
      "host",          "content-length", "transfer-encoding",
      "connection",    "upgrade",        "te",
      "trailer",       "keep-alive",     "proxy-connection",
      "http2-settings"};

  for (size_t i = 0; i < WR_ARRAY_SIZE(names); i++)
    if (strcasecmp(name, names[i]) == 0)
      return true;
  return false;
}

/* The credential line is built from configuration; a line break in it
 * would let a value add headers of its own. The value is never quoted in
 * a message. */
static int check_secret(const struct wr_secret *s, wr_error_t *err) {
  const char *service = s->service ? s->service : "?";

  if (s->header == NULL || !is_token(s->header, strlen(s->header)) ||
      reserved_header(s->header))
    return wr_error_setx(err, EINVAL, "secret `%s`: invalid header name",
                         service);
  if (s->value == NULL || has_ctl(s->value) ||
      (s->prefix != NULL && has_ctl(s->prefix)))
    return wr_error_setx(err, EINVAL,
                         "secret `%s`: missing value or control characters",
                         service);
  return 0;
}

/* "Header: prefix value\r\n", built in a buffer of exactly its size so
 * that no reallocation leaves a copy of the value behind. */
static void build_cred(struct wr_intercept *ic) {
  const struct wr_secret *s = &ic->secret;
  const char *prefix = s->prefix ? s->prefix : "";
  size_t hl = strlen(s->header), pl = strlen(prefix), vl = strlen(s->value);
  char *p;

  ic->cred_len = hl + 2 + pl + vl + 2;
  ic->cred = p = xmalloc(ic->cred_len + 1);
  memcpy(p, s->header, hl);
  memcpy(p + hl, ": ", 2);
  memcpy(p + hl + 2, prefix, pl);
  memcpy(p + hl + 2 + pl, s->value, vl);
  memcpy(p + hl + 2 + pl + vl, "\r\n", 3);
}

static struct wr_intercept *icpt_new(const struct wr_intercept_args *args) {
  struct wr_intercept *ic = xcalloc(1, sizeof(*ic));

  ic->tls = args->tls;
  wr_strlcpy(ic->host, args->host, sizeof(ic->host));
  ic->addr = args->addr;
  ic->port = args->port;
  ic->sockbuf = args->sockbuf;
  ic->secret = args->secret;
  if (args->prefix_len > 0)
    ic->prefix = xmemdup(args->prefix, args->prefix_len);
  ic->prefix_len = args->prefix_len;
  ic->done = args->done;
  ic->arg = args->arg;
  ic->cli = (struct side){.fd = args->client_fd};
  ic->up = (struct side){.fd = -1};
  pthread_mutex_init(&ic->lock, NULL);
  build_cred(ic);
  http_parser_init(&ic->req, HTTP_REQUEST);
  ic->req.data = ic;
  http_parser_init(&ic->resp, HTTP_RESPONSE);
  ic->resp.data = ic;
  ic->in_head = true;
  wr_buf_init(&ic->head);
  wr_buf_init(&ic->names);
  wr_buf_init(&ic->out);
  wr_buf_init(&ic->pending);
  return ic;
}

/* Undo icpt_new without touching what the caller still owns on failure:
 * the socket and the secret. */
static void icpt_abandon(struct wr_intercept *ic) {
  memset(&ic->secret, 0, sizeof(ic->secret));
  release(ic);
}

/*
 * On success the thread owns client_fd and the secret; on failure nothing
 * has been taken and the caller still owns both. The wr_tls must outlive
 * every interception (until its done callback has run).
 */
int wr_intercept_start(const struct wr_intercept_args *args,
                       struct wr_intercept **out, wr_error_t *err) {
  struct wr_intercept *ic;
  int rc;

  if (check_secret(&args->secret, err) < 0)
    return -1;
  ic = icpt_new(args);
  rc = uv_async_init(args->loop, &ic->async, on_reported);
  if (rc < 0) {
    icpt_abandon(ic);
    pthread_mutex_destroy(&ic->lock);
    free(ic);
    return wr_error_setx(err, -rc, "intercept `%s`: %s", args->host,
                         uv_strerror(rc));
  }
  ic->async.data = ic;
  rc = start_thread(ic);
  if (rc != 0) {
    icpt_abandon(ic);
    uv_close((uv_handle_t *)&ic->async, on_closed);
    return wr_error_set(err, rc, "intercept `%s`: start a thread", args->host);
  }
  if (out != NULL)
    *out = ic;
  return 0;
}

void wr_intercept_cancel(struct wr_intercept *ic) {
  pthread_mutex_lock(&ic->lock);
  ic->cancelled = true;
  if (ic->cli.fd >= 0)
    shutdown(ic->cli.fd, SHUT_RDWR);
  if (ic->up.fd >= 0)
    shutdown(ic->up.fd, SHUT_RDWR);
  pthread_mutex_unlock(&ic->lock);
}
