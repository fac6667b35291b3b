/* Unit tests for src/net/tls.c and src/net/intercept.c: warren's CA, the
 * leaves it mints, and TLS interception end to end against a local
 * upstream with a CA of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <http_parser.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "net/net_internal.h"

#define SECRET "sk-test-SECRET"
#define UPSTREAM_HOST "upstream.test"

/* Each test gets its own directory: warren's CA and the upstream's CA. */
struct fixture {
  char dir[64];
  char *ca_dir;
  char *upstream_ca;
  EVP_PKEY *up_ca_key;
  X509 *up_ca;
};

static int setup(void **state) {
  struct fixture *fx = xcalloc(1, sizeof(*fx));

  strcpy(fx->dir, "/tmp/test_tls.XXXXXX");
  if (mkdtemp(fx->dir) == NULL)
    return -1;
  fx->ca_dir = xasprintf("%s/ca", fx->dir);
  fx->upstream_ca = xasprintf("%s/upstream-ca.pem", fx->dir);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fixture *fx = *state;

  wr_rm_rf(fx->dir, NULL);
  EVP_PKEY_free(fx->up_ca_key);
  X509_free(fx->up_ca);
  free(fx->ca_dir);
  free(fx->upstream_ca);
  free(fx);
  return 0;
}

static struct wr_tls *tls_ok(const char *dir, const char *upstream_ca) {
  struct wr_tls *t = NULL;
  wr_error_t err = {0};

  if (wr_tls_new(dir, upstream_ca, &t, &err) < 0)
    fail_msg("wr_tls_new: %s", err.msg);
  return t;
}

static X509 *pem_cert(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

  BIO_free(b);
  assert_non_null(x);
  return x;
}

static mode_t mode_of(const char *path) {
  struct stat st;

  assert_int_equal(stat(path, &st), 0);
  return st.st_mode & 07777;
}

/* ---- the CA ------------------------------------------------------------ */

static void test_ca_created_and_reloaded(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *key = xasprintf("%s/ca.key", fx->ca_dir);
  _cleanup_free_ char *crt = xasprintf("%s/ca.crt", fx->ca_dir);
  _cleanup_free_ char *first = NULL, *file = NULL;
  struct wr_tls *t = tls_ok(fx->ca_dir, NULL);
  wr_error_t err = {0};
  size_t len = 0;
  char *subject;
  X509 *ca;

  assert_int_equal(mode_of(fx->ca_dir), 0700);
  assert_int_equal(mode_of(key), 0600);
  assert_int_equal(mode_of(crt), 0644);
  first = xstrdup(wr_tls_ca_pem(t));
  assert_int_equal(wr_read_file(crt, 65536, &file, &len, &err), 0);
  assert_string_equal(file, first);
  ca = pem_cert(first);
  assert_int_equal(X509_check_ca(ca), 1);
  subject = X509_NAME_oneline(X509_get_subject_name(ca), NULL, 0);
  assert_non_null(strstr(subject, "/CN=warren local CA "));
  OPENSSL_free(subject);
  X509_free(ca);
  wr_tls_free(t);

  t = tls_ok(fx->ca_dir, NULL);
  assert_string_equal(wr_tls_ca_pem(t), first);
  wr_tls_free(t);

  /* A key others can read is refused rather than used. */
  assert_int_equal(chmod(key, 0644), 0);
  t = NULL;
  assert_int_equal(wr_tls_new(fx->ca_dir, NULL, &t, &err), -1);
  assert_null(t);
  assert_non_null(strstr(err.msg, "0600"));
}

/* A crash after the key was stored but before the certificate: the next
 * start makes the certificate from the same key. */
static void test_ca_cert_remade_from_key(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *crt = xasprintf("%s/ca.crt", fx->ca_dir);
  struct wr_tls *t = tls_ok(fx->ca_dir, NULL);
  X509 *a = pem_cert(wr_tls_ca_pem(t)), *b;

  wr_tls_free(t);
  assert_int_equal(unlink(crt), 0);
  t = tls_ok(fx->ca_dir, NULL);
  b = pem_cert(wr_tls_ca_pem(t));
  assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(a), X509_get0_pubkey(b)), 1);
  X509_free(a);
  X509_free(b);
  wr_tls_free(t);
}

/* ---- leaves ------------------------------------------------------------ */

static int verify_leaf(const char *ca_pem, X509 *leaf, const char *host,
                       const char *ip) {
  X509_STORE *store = X509_STORE_new();
  X509_STORE_CTX *ctx = X509_STORE_CTX_new();
  X509 *ca = pem_cert(ca_pem);
  X509_VERIFY_PARAM *param;
  int ok;

  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX_init(ctx, store, leaf, NULL);
  param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (host != NULL)
    X509_VERIFY_PARAM_set1_host(param, host, 0);
  if (ip != NULL)
    X509_VERIFY_PARAM_set1_ip_asc(param, ip);
  ok = X509_verify_cert(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  return ok;
}

/* The one subjectAltName entry of a certificate. */
static const GENERAL_NAME *only_san(X509 *x, GENERAL_NAMES **names) {
  *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
  assert_non_null(*names);
  assert_int_equal(sk_GENERAL_NAME_num(*names), 1);
  return sk_GENERAL_NAME_value(*names, 0);
}

static void test_leaf_for_name_and_ip(void **state) {
  struct fixture *fx = *state;
  struct wr_tls *t = tls_ok(fx->ca_dir, NULL);
  wr_error_t err = {0};
  SSL *s1 = wr_tls_server(t, "api.example.test", &err);
  SSL *s2 = wr_tls_server(t, "api.example.test", &err);
  SSL *s3 = wr_tls_server(t, "127.0.0.1", &err);
  X509 *leaf = SSL_get_certificate(s1);
  GENERAL_NAMES *names = NULL;
  const GENERAL_NAME *gn;
  const unsigned char loopback[4] = {127, 0, 0, 1};

  assert_non_null(s1);
  assert_non_null(s3);
  assert_int_equal(
      verify_leaf(wr_tls_ca_pem(t), leaf, "api.example.test", NULL), 1);
  assert_int_equal(verify_leaf(wr_tls_ca_pem(t), leaf, "other.test", NULL), 0);
  gn = only_san(leaf, &names);
  assert_int_equal(gn->type, GEN_DNS);
  assert_string_equal(ASN1_STRING_get0_data(gn->d.dNSName), "api.example.test");
  GENERAL_NAMES_free(names);
  assert_true(X509_get_extended_key_usage(leaf) & XKU_SSL_SERVER);
  assert_int_equal(X509_get_extension_flags(leaf) & EXFLAG_CA, 0);
  /* Cached: the same certificate the second time. */
  assert_int_equal(X509_cmp(leaf, SSL_get_certificate(s2)), 0);

  leaf = SSL_get_certificate(s3);
  gn = only_san(leaf, &names);
  assert_int_equal(gn->type, GEN_IPADD);
  assert_int_equal(ASN1_STRING_length(gn->d.iPAddress), 4);
  assert_memory_equal(ASN1_STRING_get0_data(gn->d.iPAddress), loopback, 4);
  GENERAL_NAMES_free(names);
  assert_int_equal(verify_leaf(wr_tls_ca_pem(t), leaf, NULL, "127.0.0.1"), 1);

  assert_null(wr_tls_server(t, "a.test,DNS:b.test", &err));
  assert_int_equal(err.code, EINVAL);
  SSL_free(s1);
  SSL_free(s2);
  SSL_free(s3);
  wr_tls_free(t);
}

/* Drive a handshake between two SSLs in memory. */
static bool handshake_in_memory(SSL *server, SSL *client) {
  BIO *sb = NULL, *cb = NULL;
  int rs = 0, rc = 0;

  assert_int_equal(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
  SSL_set_bio(server, sb, sb);
  SSL_set_bio(client, cb, cb);
  for (int i = 0; i < 50 && (rs != 1 || rc != 1); i++) {
    if (rc != 1 && (rc = SSL_connect(client)) != 1 &&
        SSL_get_error(client, rc) != SSL_ERROR_WANT_READ)
      break;
    if (rs != 1 && (rs = SSL_accept(server)) != 1 &&
        SSL_get_error(server, rs) != SSL_ERROR_WANT_READ)
      break;
  }
  ERR_clear_error();
  return rs == 1 && rc == 1;
}

static SSL_CTX *client_ctx_trusting(const char *ca_pem) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  X509 *ca = pem_cert(ca_pem);

  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
  X509_free(ca);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  return ctx;
}

static bool try_alpn(struct wr_tls *t, const char *wire, size_t len) {
  SSL_CTX *ctx = client_ctx_trusting(wr_tls_ca_pem(t));
  SSL *client = SSL_new(ctx);
  SSL *server = wr_tls_server(t, "api.example.test", NULL);
  const unsigned char *sel = NULL;
  unsigned int sel_len = 0;
  bool ok;

  SSL_set_tlsext_host_name(client, "api.example.test");
  SSL_set1_host(client, "api.example.test");
  SSL_set_alpn_protos(client, (const unsigned char *)wire, (unsigned)len);
  ok = handshake_in_memory(server, client);
  if (ok) {
    SSL_get0_alpn_selected(client, &sel, &sel_len);
    assert_int_equal(sel_len, 8);
    assert_memory_equal(sel, "http/1.1", 8);
  }
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(ctx);
  return ok;
}

static void test_alpn_http11_only(void **state) {
  struct fixture *fx = *state;
  struct wr_tls *t = tls_ok(fx->ca_dir, NULL);

  assert_true(try_alpn(t, "\x02h2\x08http/1.1", 12));
  assert_true(try_alpn(t, "\x08http/1.1", 9));
  assert_false(try_alpn(t, "\x02h2", 3));
  wr_tls_free(t);
}

/* ---- a throwaway upstream ---------------------------------------------- */

static void add_conf_ext(X509 *x, X509 *issuer, int nid, const char *value) {
  X509V3_CTX ctx;
  X509_EXTENSION *ext;

  X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
  ext = X509V3_EXT_nconf_nid(NULL, &ctx, nid, value);
  assert_non_null(ext);
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
}

/* A CA (issuer NULL) or a server certificate for san signed by issuer. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer,
                       EVP_PKEY *issuer_key, const char *san) {
  X509 *x = X509_new();
  uint32_t serial;

  wr_random_bytes(&serial, sizeof(serial));
  X509_set_version(x, X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(serial >> 1));
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             (const unsigned char *)cn, -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x));
  if (issuer == NULL) {
    add_conf_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
    add_conf_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_conf_ext(x, x, NID_subject_key_identifier, "hash");
  } else {
    add_conf_ext(x, issuer, NID_subject_alt_name, san);
    add_conf_ext(x, issuer, NID_ext_key_usage, "serverAuth");
  }
  assert_true(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
  return x;
}

/* The upstream's CA, written where wr_tls_new can be told to trust it. */
static void make_upstream_ca(struct fixture *fx) {
  BIO *b = BIO_new_file(fx->upstream_ca, "w");

  fx->up_ca_key = EVP_EC_gen("P-256");
  fx->up_ca = make_cert(fx->up_ca_key, "test upstream CA", NULL, NULL, NULL);
  assert_non_null(b);
  PEM_write_bio_X509(b, fx->up_ca);
  BIO_free(b);
}

/* One request as the upstream received it. */
struct seen {
  int n_key;
  char key[64];
  char body[256];
  size_t body_len;
  bool head; /* a HEAD request */
};

struct upstream {
  int lfd;
  uint16_t port;
  SSL_CTX *ctx;
  bool serving; /* else it only listens: connections wait in the backlog */
  pthread_t thread;
  wr_buf_t raw; /* every byte received */
  struct seen req[8];
  int nreq;
  bool handshake_ok;
  /* parser state */
  SSL *ssl;
  wr_buf_t field, value;
  bool in_value;
};

static void up_commit(struct upstream *u) {
  struct seen *s = &u->req[u->nreq];

  if (u->field.len > 0 && strcasecmp(u->field.data, "x-api-key") == 0) {
    s->n_key++;
    wr_strlcpy(s->key, u->value.data ? u->value.data : "", sizeof(s->key));
  }
  wr_buf_reset(&u->field);
  wr_buf_reset(&u->value);
  u->in_value = false;
}

static int up_field(http_parser *p, const char *at, size_t len) {
  struct upstream *u = p->data;

  if (u->in_value)
    up_commit(u);
  wr_buf_append(&u->field, at, len);
  return 0;
}

static int up_value(http_parser *p, const char *at, size_t len) {
  struct upstream *u = p->data;

  u->in_value = true;
  wr_buf_append(&u->value, at, len);
  return 0;
}

static int up_head(http_parser *p) {
  struct upstream *u = p->data;

  if (u->in_value)
    up_commit(u);
  u->req[u->nreq].head = p->method == HTTP_HEAD;
  return 0;
}

static int up_body(http_parser *p, const char *at, size_t len) {
  struct upstream *u = p->data;
  struct seen *s = &u->req[u->nreq];
  size_t have = strlen(s->body);

  if (have + len < sizeof(s->body))
    memcpy(s->body + have, at, len);
  s->body_len += len;
  return 0;
}

/* Answer each request with 200 and "ok N" (no body for HEAD). */
static int up_done(http_parser *p) {
  struct upstream *u = p->data;
  char resp[128];
  int n;

  u->nreq++;
  n = snprintf(resp, sizeof(resp),
               "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nok %d", u->nreq);
  if (u->req[u->nreq - 1].head)
    n -= 4;
  SSL_write(u->ssl, resp, n);
  return u->nreq < (int)WR_ARRAY_SIZE(u->req) ? 0 : -1;
}

static const http_parser_settings up_settings = {
    .on_header_field = up_field,
    .on_header_value = up_value,
    .on_headers_complete = up_head,
    .on_body = up_body,
    .on_message_complete = up_done,
};

static void set_timeout(int fd, int seconds) {
  struct timeval tv = {.tv_sec = seconds};

  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Serve one connection, recording what arrives. */
static void *upstream_main(void *arg) {
  struct upstream *u = arg;
  struct pollfd pfd = {.fd = u->lfd, .events = POLLIN};
  http_parser parser;
  char buf[4096];
  int fd, n;

  if (poll(&pfd, 1, 15000) != 1 || (fd = accept(u->lfd, NULL, NULL)) < 0)
    return NULL;
  set_timeout(fd, 15);
  u->ssl = SSL_new(u->ctx);
  SSL_set_fd(u->ssl, fd);
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = u;
  u->handshake_ok = SSL_accept(u->ssl) == 1;
  while (u->handshake_ok && (n = SSL_read(u->ssl, buf, sizeof(buf))) > 0) {
    wr_buf_append(&u->raw, buf, (size_t)n);
    if (http_parser_execute(&parser, &up_settings, buf, (size_t)n) != (size_t)n)
      break;
  }
  SSL_shutdown(u->ssl);
  SSL_free(u->ssl);
  close(fd);
  ERR_clear_error();
  return NULL;
}

static void upstream_start(struct fixture *fx, struct upstream *u,
                           bool serving) {
  struct sockaddr_in sin = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sin);
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *cert = make_cert(key, UPSTREAM_HOST, fx->up_ca, fx->up_ca_key,
                         "DNS:" UPSTREAM_HOST);

  memset(u, 0, sizeof(*u));
  wr_buf_init(&u->raw);
  wr_buf_init(&u->field);
  wr_buf_init(&u->value);
  u->ctx = SSL_CTX_new(TLS_server_method());
  assert_int_equal(SSL_CTX_use_certificate(u->ctx, cert), 1);
  assert_int_equal(SSL_CTX_use_PrivateKey(u->ctx, key), 1);
  X509_free(cert);
  EVP_PKEY_free(key);
  u->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(bind(u->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
  assert_int_equal(listen(u->lfd, 4), 0);
  assert_int_equal(getsockname(u->lfd, (struct sockaddr *)&sin, &len), 0);
  u->port = ntohs(sin.sin_port);
  u->serving = serving;
  if (serving)
    assert_int_equal(pthread_create(&u->thread, NULL, upstream_main, u), 0);
}

static void upstream_stop(struct upstream *u) {
  if (u->serving)
    pthread_join(u->thread, NULL);
  close(u->lfd);
  SSL_CTX_free(u->ctx);
  wr_buf_free(&u->field);
  wr_buf_free(&u->value);
}

/* ---- the sandbox's side ------------------------------------------------ */

struct client {
  int fd;
  const char *ca_pem;
  const char *request;
  size_t chunk;    /* send in records of this size (0: one write) */
  int expect;      /* responses to read before closing, or -1: read to EOF */
  bool head_first; /* the first request is HEAD: its response has no body */
  uv_async_t *answered; /* sent once: at the first response, or at the end */
  pthread_t thread;
  bool handshake_ok;
  wr_buf_t received;
  int nresp;
  int status[8];
  bool eof; /* the connection was closed on the client */
};

static int cl_done(http_parser *p) {
  struct client *c = p->data;

  if (c->nresp < (int)WR_ARRAY_SIZE(c->status))
    c->status[c->nresp] = (int)p->status_code;
  c->nresp++;
  return 0;
}

static int cl_head(http_parser *p) {
  struct client *c = p->data;

  return c->head_first && c->nresp == 0 ? 1 : 0;
}

static const http_parser_settings cl_settings = {
    .on_headers_complete = cl_head,
    .on_message_complete = cl_done,
};

static void cl_send(struct client *c, SSL *ssl) {
  size_t len = strlen(c->request), step = c->chunk ? c->chunk : len;

  for (size_t off = 0; off < len; off += step)
    if (SSL_write(ssl, c->request + off, (int)WR_MIN(step, len - off)) <= 0)
      break;
}

/* Handshake trusting warren's CA, send the requests in one write
 * (pipelined), read the responses. */
static void *client_main(void *arg) {
  struct client *c = arg;
  SSL_CTX *ctx = client_ctx_trusting(c->ca_pem);
  SSL *ssl = SSL_new(ctx);
  http_parser parser;
  bool told = false;
  char buf[4096];
  int n;

  http_parser_init(&parser, HTTP_RESPONSE);
  parser.data = c;
  SSL_set_tlsext_host_name(ssl, UPSTREAM_HOST);
  SSL_set1_host(ssl, UPSTREAM_HOST);
  SSL_set_alpn_protos(ssl, (const unsigned char *)"\x08http/1.1", 9);
  SSL_set_fd(ssl, c->fd);
  c->handshake_ok = SSL_connect(ssl) == 1;
  if (c->handshake_ok)
    cl_send(c, ssl);
  while (c->handshake_ok && (c->expect < 0 || c->nresp < c->expect)) {
    n = SSL_read(ssl, buf, sizeof(buf));
    if (n <= 0) {
      c->eof = true;
      break;
    }
    wr_buf_append(&c->received, buf, (size_t)n);
    http_parser_execute(&parser, &cl_settings, buf, (size_t)n);
    if (c->answered != NULL && c->nresp > 0 && !told) {
      told = true;
      uv_async_send(c->answered);
    }
  }
  if (c->answered != NULL && !told)
    uv_async_send(c->answered);
  if (c->handshake_ok && !c->eof)
    SSL_shutdown(ssl);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(c->fd);
  ERR_clear_error();
  return NULL;
}

/* ---- one interception -------------------------------------------------- */

struct run {
  /* in */
  const char *request;
  size_t chunk;
  int expect;
  bool head_first;
  size_t prefix_max; /* ClientHello bytes the "proxy" reads first */
  bool trust_upstream;
  bool cancel_answered; /* cancel once the client has a response */
  bool cancel_at_once;  /* cancel right after the start */
  /* out */
  struct upstream up;
  struct client cl;
  struct wr_intercept *handle; /* valid until done */
  uv_async_t answered;
  bool done;
  uint64_t cancelled_at, done_at; /* wr_mono_ns() */
  uint64_t bytes_up, bytes_down;
  char *error;
};

static void on_done(void *arg, uint64_t up, uint64_t down, const char *error) {
  struct run *r = arg;

  r->done = true;
  r->done_at = wr_mono_ns();
  r->bytes_up = up;
  r->bytes_down = down;
  r->error = error ? xstrdup(error) : NULL;
}

static struct wr_secret test_secret(void) {
  struct wr_secret s = {
      .service = xstrdup("test"),
      .hosts = wr_strv_push(NULL, UPSTREAM_HOST),
      .header = xstrdup("x-api-key"),
      .prefix = xstrdup(""),
      .value = xstrdup(SECRET),
  };

  return s;
}

/* The client has its first response (or has given up): cancel the
 * interception if asked to and it is still running. */
static void on_answered(uv_async_t *a) {
  struct run *r = a->data;

  if (r->cancel_answered && !r->done && r->cl.nresp > 0) {
    r->cancelled_at = wr_mono_ns();
    wr_intercept_cancel(r->handle);
  }
  uv_close((uv_handle_t *)a, NULL);
}

/* What a proxy does: read the start of the ClientHello, hand the
 * connection over, and run the loop until the interception reports. */
static void run_intercept(struct fixture *fx, struct run *r) {
  struct wr_tls *t;
  struct wr_intercept_args args = {
      .host = UPSTREAM_HOST,
      .addr = {.family = AF_INET, .bytes = {127, 0, 0, 1}},
      .done = on_done,
      .arg = r};
  uint8_t prefix[WR_SNIFF_MAX];
  wr_error_t err = {0};
  uv_loop_t loop;
  ssize_t n;
  int sv[2];

  if (fx->up_ca == NULL)
    make_upstream_ca(fx);
  t = tls_ok(fx->ca_dir, r->trust_upstream ? fx->upstream_ca : NULL);
  args.tls = t;
  upstream_start(fx, &r->up, !r->cancel_at_once);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uv_async_init(&loop, &r->answered, on_answered), 0);
  r->answered.data = r;
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  set_timeout(sv[1], 15);
  r->cl = (struct client){.fd = sv[1],
                          .ca_pem = wr_tls_ca_pem(t),
                          .request = r->request,
                          .chunk = r->chunk,
                          .expect = r->expect,
                          .head_first = r->head_first,
                          .answered = &r->answered};
  wr_buf_init(&r->cl.received);
  assert_int_equal(pthread_create(&r->cl.thread, NULL, client_main, &r->cl), 0);
  n = r->prefix_max == 0 ? 0
      : r->prefix_max < sizeof(prefix)
          ? wr_read_all(sv[0], prefix, r->prefix_max)
          : read(sv[0], prefix, sizeof(prefix));
  assert_true(n >= 0);
  args.client_fd = sv[0];
  args.port = r->up.port;
  args.secret = test_secret();
  args.prefix = prefix;
  args.prefix_len = (size_t)n;
  args.loop = &loop;
  if (wr_intercept_start(&args, &r->handle, &err) < 0)
    fail_msg("wr_intercept_start: %s", err.msg);
  if (r->cancel_at_once) {
    r->cancelled_at = wr_mono_ns();
    wr_intercept_cancel(r->handle);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  print_message("interception ended: %s\n", r->error ? r->error : "cleanly");
  pthread_join(r->cl.thread, NULL);
  upstream_stop(&r->up);
  wr_tls_free(t);
  assert_true(r->done);
}

static void run_free(struct run *r) {
  wr_buf_free(&r->up.raw);
  wr_buf_free(&r->cl.received);
  free(r->error);
}

static bool contains(const wr_buf_t *b, const char *s) {
  return b->data != NULL && memmem(b->data, b->len, s, strlen(s)) != NULL;
}

/* ---- interception ------------------------------------------------------ */

static const char req_get[] = "GET /v1/a HTTP/1.1\r\n"
                              "Host: upstream.test\r\n"
                              "X-Api-Key: warren-proxy-placeholder\r\n"
                              "Accept: */*\r\n"
                              "x-api-key: another\r\n"
                              "\r\n";
static const char req_chunked[] = "POST /v1/b HTTP/1.1\r\n"
                                  "Host: UPSTREAM.test.:443\r\n"
                                  "Transfer-Encoding: chunked\r\n"
                                  "Content-Type: text/plain\r\n"
                                  "\r\n"
                                  "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

static void test_intercept_sets_secret(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *request = xasprintf("%s%s", req_get, req_chunked);
  static const char expected[] =
      "GET /v1/a HTTP/1.1\r\nHost: upstream.test\r\nAccept: */*\r\n"
      "x-api-key: " SECRET "\r\n\r\n"
      "POST /v1/b HTTP/1.1\r\nHost: UPSTREAM.test.:443\r\n"
      "Transfer-Encoding: chunked\r\nContent-Type: text/plain\r\n"
      "x-api-key: " SECRET "\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  struct run r = {.request = request,
                  .expect = 2,
                  .prefix_max = 100, /* part of the ClientHello */
                  .trust_upstream = true};

  run_intercept(fx, &r);
  assert_true(r.cl.handshake_ok);
  assert_true(r.up.handshake_ok);
  assert_int_equal(r.up.nreq, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(r.up.req[i].n_key, 1);
    assert_string_equal(r.up.req[i].key, SECRET);
  }
  assert_string_equal(r.up.req[1].body, "hello world");
  assert_int_equal(r.up.raw.len, strlen(expected));
  assert_memory_equal(r.up.raw.data, expected, strlen(expected));
  assert_int_equal(r.cl.nresp, 2);
  assert_int_equal(r.cl.status[0], 200);
  assert_int_equal(r.cl.status[1], 200);
  assert_true(contains(&r.cl.received, "ok 2"));
  assert_null(r.error);
  assert_int_equal(r.bytes_up, strlen(request));
  assert_int_equal(r.bytes_down, r.cl.received.len);
  run_free(&r);
}

/* The same requests split into 7-byte records: heads and header names
 * arrive in pieces, and nothing changes. */
static void test_intercept_fragmented(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *request = xasprintf("%s%s", req_chunked, req_get);
  struct run r = {.request = request,
                  .chunk = 7,
                  .expect = 2,
                  .prefix_max = SIZE_MAX,
                  .trust_upstream = true};

  run_intercept(fx, &r);
  assert_int_equal(r.up.nreq, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(r.up.req[i].n_key, 1);
    assert_string_equal(r.up.req[i].key, SECRET);
  }
  assert_string_equal(r.up.req[0].body, "hello world");
  assert_int_equal(r.cl.nresp, 2);
  assert_null(r.error);
  assert_int_equal(r.bytes_up, strlen(request));
  run_free(&r);
}

/* A body larger than a TLS record passes through intact. */
static void test_intercept_large_body(void **state) {
  struct fixture *fx = *state;
  size_t body = 100000;
  static const char head[] = "PUT /big HTTP/1.1\r\nHost: upstream.test\r\n"
                             "Content-Length: 100000\r\n\r\n";
  char *request = xmalloc(sizeof(head) + body);
  struct run r = {.expect = 1, .prefix_max = SIZE_MAX, .trust_upstream = true};

  memcpy(request, head, sizeof(head) - 1);
  memset(request + sizeof(head) - 1, 'a', body);
  request[sizeof(head) - 1 + body] = '\0';
  r.request = request;
  run_intercept(fx, &r);
  assert_int_equal(r.up.nreq, 1);
  assert_int_equal(r.up.req[0].n_key, 1);
  assert_int_equal(r.up.req[0].body_len, body);
  assert_int_equal(r.cl.nresp, 1);
  assert_int_equal(r.bytes_up, strlen(request));
  run_free(&r);
  free(request);
}

/* A refusal after a HEAD request waits for the HEAD response, which has no
 * body although it announces one. */
static void test_intercept_refusal_after_head(void **state) {
  struct fixture *fx = *state;
  struct run r = {.request = "HEAD / HTTP/1.1\r\nHost: upstream.test\r\n\r\n"
                             "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n",
                  .expect = -1,
                  .head_first = true,
                  .prefix_max = SIZE_MAX,
                  .trust_upstream = true};

  run_intercept(fx, &r);
  assert_int_equal(r.up.nreq, 1);
  assert_int_equal(r.cl.nresp, 2);
  assert_int_equal(r.cl.status[0], 200);
  assert_int_equal(r.cl.status[1], 421);
  assert_true(r.cl.eof);
  run_free(&r);
}

/* Another host in Host or in an absolute target gets 421, after the
 * responses to the requests before it, and never the credential. */
static void test_intercept_other_host(void **state) {
  struct fixture *fx = *state;
  static const char *const requests[] = {
      "GET / HTTP/1.1\r\nHost: other.test\r\n"
      "X-Api-Key: warren-proxy-placeholder\r\n\r\n",
      "GET https://other.test/ HTTP/1.1\r\nHost: upstream.test\r\n\r\n",
  };

  for (size_t i = 0; i < WR_ARRAY_SIZE(requests); i++) {
    struct run r = {.request = requests[i],
                    .expect = -1,
                    .prefix_max = SIZE_MAX,
                    .trust_upstream = true};
    run_intercept(fx, &r);
    assert_int_equal(r.cl.nresp, 1);
    assert_int_equal(r.cl.status[0], 421);
    assert_true(r.cl.eof);
    assert_int_equal(r.up.nreq, 0);
    assert_false(contains(&r.up.raw, SECRET));
    assert_non_null(r.error);
    assert_non_null(strstr(r.error, "421"));
    assert_null(strstr(r.error, SECRET));
    run_free(&r);
  }
}

static void test_intercept_refusal_after_pipelined(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *request = xasprintf(
      "%sGET /x HTTP/1.1\r\nHost: other.test\r\n\r\n%s", req_get, req_get);
  struct run r = {.request = request,
                  .expect = -1,
                  .prefix_max = SIZE_MAX,
                  .trust_upstream = true};

  run_intercept(fx, &r);
  assert_int_equal(r.up.nreq, 1);
  assert_int_equal(r.cl.nresp, 2);
  assert_int_equal(r.cl.status[0], 200);
  assert_int_equal(r.cl.status[1], 421);
  assert_true(r.cl.eof);
  run_free(&r);
}

static void test_intercept_ambiguous_framing(void **state) {
  struct fixture *fx = *state;
  static const char *const requests[] = {
      "POST / HTTP/1.1\r\nHost: upstream.test\r\nContent-Length: 5\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: upstream.test\r\nContent-Length: 1\r\n"
      "Content-Length: 1\r\n\r\nx",
      "POST / HTTP/1.1\r\nHost: upstream.test\r\n"
      "Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: upstream.test\r\n"
      "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: upstream.test\r\nX-A: b\r\n c\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: upstream.test\r\nConnection: Upgrade\r\n"
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: upstream.test\nX-A: b\r\n\r\n",
      "GET / HTTP/1.1\r\nX-A: b\r\n\r\n",
  };

  for (size_t i = 0; i < WR_ARRAY_SIZE(requests); i++) {
    struct run r = {.request = requests[i],
                    .expect = -1,
                    .prefix_max = 0, /* the handshake reads it all */
                    .trust_upstream = true};
    run_intercept(fx, &r);
    if (r.cl.nresp != 1 || r.cl.status[0] != 400)
      fail_msg("request %zu: %d responses, status %d", i, r.cl.nresp,
               r.cl.status[0]);
    assert_true(r.cl.eof);
    assert_int_equal(r.up.nreq, 0);
    assert_int_equal(r.up.raw.len, 0);
    assert_non_null(r.error);
    run_free(&r);
  }
}

static void test_intercept_untrusted_upstream(void **state) {
  struct fixture *fx = *state;
  struct run r = {.request = req_get,
                  .expect = -1,
                  .prefix_max = SIZE_MAX,
                  .trust_upstream = false};

  run_intercept(fx, &r);
  assert_true(r.cl.handshake_ok);
  assert_true(r.cl.eof);
  assert_int_equal(r.cl.nresp, 0);
  assert_int_equal(r.cl.received.len, 0);
  assert_false(r.up.handshake_ok);
  assert_non_null(r.error);
  assert_non_null(strstr(r.error, "certificate verify failed"));
  assert_int_equal(r.bytes_down, 0);
  run_free(&r);
}

/* Cancelled while it relays (both peers keep their connections open, so
 * it would otherwise wait for the idle timeout): the thread drops both
 * connections at once and done reports the cancel. */
static void test_intercept_cancel_mid_relay(void **state) {
  struct fixture *fx = *state;
  struct run r = {.request = req_get,
                  .expect = -1,
                  .prefix_max = SIZE_MAX,
                  .trust_upstream = true,
                  .cancel_answered = true};

  run_intercept(fx, &r);
  assert_int_equal(r.up.nreq, 1);
  assert_int_equal(r.cl.nresp, 1);
  assert_int_equal(r.cl.status[0], 200);
  assert_true(r.cl.eof);
  assert_true(r.cancelled_at != 0);
  assert_true(r.done_at - r.cancelled_at < 1000000000ull);
  assert_non_null(r.error);
  assert_string_equal(r.error, "cancelled");
  assert_int_equal(r.bytes_up, strlen(req_get));
  run_free(&r);
}

/* Cancelled before the handshake is through (the upstream would never
 * answer either): it ends at once all the same. */
static void test_intercept_cancel_at_once(void **state) {
  struct fixture *fx = *state;
  struct run r = {.request = req_get,
                  .expect = -1,
                  .prefix_max = SIZE_MAX,
                  .trust_upstream = true,
                  .cancel_at_once = true};

  run_intercept(fx, &r);
  assert_int_equal(r.cl.nresp, 0);
  assert_true(r.done_at - r.cancelled_at < 1000000000ull);
  assert_non_null(r.error);
  assert_string_equal(r.error, "cancelled");
  run_free(&r);
}

/* A secret that would inject a header line is refused up front, and the
 * caller keeps what it passed. */
static void test_intercept_bad_secret(void **state) {
  struct fixture *fx = *state;
  struct wr_tls *t = tls_ok(fx->ca_dir, NULL);
  struct wr_intercept_args args = {.tls = t, .client_fd = -1};
  wr_error_t err = {0};

  args.secret = test_secret();
  free(args.secret.value);
  args.secret.value = xstrdup("x\r\nEvil: 1");
  assert_int_equal(wr_intercept_start(&args, NULL, &err), -1);
  assert_null(strstr(err.msg, "Evil"));
  wr_secret_clear(&args.secret);
  args.secret = test_secret();
  free(args.secret.header);
  args.secret.header = xstrdup("Content-Length");
  assert_int_equal(wr_intercept_start(&args, NULL, &err), -1);
  wr_secret_clear(&args.secret);
  wr_tls_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ca_created_and_reloaded, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_ca_cert_remade_from_key, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_leaf_for_name_and_ip, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_alpn_http11_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_intercept_sets_secret, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_fragmented, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_large_body, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_other_host, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_refusal_after_head, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_refusal_after_pipelined,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_intercept_ambiguous_framing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_untrusted_upstream, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_cancel_mid_relay, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_cancel_at_once, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_intercept_bad_secret, setup,
                                      teardown),
  };

  /* As in warrend: a peer that went away is an error, not a signal. */
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
