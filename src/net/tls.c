/*
 * TLS for interception: warren's own CA, leaf certificates minted per host
 * on demand, and the two contexts an intercepted connection uses (a server
 * facing the sandbox, a verifying client facing the real host).
 *
 * The CA lives in a directory of its own: ca.key (0600) and ca.crt (0644).
 * The key is written to a temporary file opened with O_EXCL and linked into
 * place only once it is complete and synced, so a crash never leaves half a
 * key; a crash between the key and the certificate leaves a key alone, and
 * the next start makes the certificate from it.
 *
 * Leaves share one EC P-256 key made at startup (it never touches disk) and
 * are cached by host. wr_tls_server runs on interception threads, so the
 * cache is behind a mutex; everything else is immutable after wr_tls_new.
 */
#include "net/net_internal.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define CA_DAYS 3650
#define LEAF_DAYS 365
/* Leaves are re-minted well before they expire in a long-running daemon. */
#define LEAF_MAX_AGE_S ((time_t)30 * 24 * 3600)
#define CACHE_MAX 1024
#define PEM_MAX ((size_t)64 * 1024)
/* Longest common name X.509 allows (ub-common-name). */
#define CN_MAX 64

struct leaf {
  char host[WR_HOST_MAX];
  X509 *cert;
  time_t made;
};

struct wr_tls {
  X509 *ca_cert;
  EVP_PKEY *ca_key;
  char *ca_pem;
  EVP_PKEY *leaf_key;
  SSL_CTX *server_ctx;
  SSL_CTX *client_ctx;
  pthread_mutex_t lock; /* guards cache, ncache and next */
  struct leaf cache[CACHE_MAX];
  size_t ncache;
  size_t next; /* the slot to fill (and evict) next once full */
};

static const unsigned char alpn_http11[] = "\x08http/1.1";

/* Turn the thread's OpenSSL error queue into an error value and empty it,
 * so that a later failure does not report a stale reason. The oldest entry
 * is the root cause ("No such file or directory"); later ones only say
 * which layer gave up. */
static int ssl_fail(wr_error_t *err, const char *fmt, ...) WR_PRINTF(2, 3);
static int ssl_fail(wr_error_t *err, const char *fmt, ...) {
  unsigned long e = ERR_peek_error();
  char what[256], reason[256] = "unknown error";
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  if (e != 0)
    ERR_error_string_n(e, reason, sizeof(reason));
  ERR_clear_error();
  return wr_error_setx(err, EPROTO, "%s: %s", what, reason);
}

/* A host we can mint for or dial: what wr_net_normalize_host produces. */
static bool host_valid(const char *host) {
  size_t len = strlen(host);

  if (len == 0 || len > 253)
    return false;
  for (const char *p = host; *p != '\0'; p++) {
    unsigned char ch = (unsigned char)*p;
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' ||
          ch == ':'))
      return false;
  }
  return true;
}

/* The host's address bytes when it is an IP literal; 0 otherwise. */
static size_t host_ip(const char *host, unsigned char out[16]) {
  if (inet_pton(AF_INET, host, out) == 1)
    return 4;
  if (inet_pton(AF_INET6, host, out) == 1)
    return 16;
  return 0;
}

static int check_host(const char *host, wr_error_t *err) {
  unsigned char ip[16];

  if (!host_valid(host) ||
      (strchr(host, ':') != NULL && host_ip(host, ip) == 0))
    return wr_error_setx(err, EINVAL, "invalid host name for TLS");
  return 0;
}

/* ---- certificates ------------------------------------------------------ */

/* A random positive 128-bit serial, as CAs are expected to use. */
static int set_random_serial(X509 *x) {
  unsigned char raw[16];
  BIGNUM *bn;
  int ok;

  wr_random_bytes(raw, sizeof(raw));
  raw[0] |= 0x01; /* never zero */
  bn = BN_bin2bn(raw, sizeof(raw), NULL);
  if (bn == NULL)
    return -1;
  ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
  BN_free(bn);
  return ok ? 0 : -1;
}

/* Subject, issuer, key, serial and validity of a new certificate. The
 * validity starts an hour back so that a sandbox whose clock lags a little
 * still accepts it. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, X509 *issuer, long days) {
  X509 *x = X509_new();
  X509_NAME *name;

  if (x == NULL || !X509_set_version(x, X509_VERSION_3) ||
      set_random_serial(x) < 0 ||
      X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
      X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL) == NULL ||
      !X509_set_pubkey(x, key))
    goto fail;
  name = X509_get_subject_name(x);
  if (cn != NULL &&
      !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                  (const unsigned char *)cn, -1, -1, 0))
    goto fail;
  if (!X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name))
    goto fail;
  return x;
fail:
  X509_free(x);
  return NULL;
}

/* Add one extension given in OpenSSL's configuration syntax. Only fixed
 * strings go through here; names from outside use add_san. */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value) {
  X509V3_CTX ctx;
  X509_EXTENSION *ext;
  int ok;

  X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
  ext = X509V3_EXT_nconf_nid(NULL, &ctx, nid, value);
  if (ext == NULL)
    return -1;
  ok = X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  return ok ? 0 : -1;
}

/* subjectAltName with the host as a DNS name, or as an IP address when it
 * is an IP literal. Built from structures rather than a configuration
 * string, so no byte of the name can add a second entry. */
static int add_san(X509 *x, const char *host) {
  GENERAL_NAMES *names = GENERAL_NAMES_new();
  GENERAL_NAME *gn = GENERAL_NAME_new();
  ASN1_OCTET_STRING *value = ASN1_OCTET_STRING_new();
  unsigned char ip[16];
  size_t iplen = host_ip(host, ip);
  int ok = 0;

  if (names == NULL || gn == NULL || value == NULL)
    goto out;
  if (iplen > 0)
    ok = ASN1_OCTET_STRING_set(value, ip, (int)iplen);
  else
    ok = ASN1_STRING_set(value, host, (int)strlen(host));
  if (!ok)
    goto out;
  GENERAL_NAME_set0_value(gn, iplen > 0 ? GEN_IPADD : GEN_DNS, value);
  value = NULL;
  ok = sk_GENERAL_NAME_push(names, gn) > 0;
  if (ok)
    gn = NULL;
  ok = ok && X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0,
                               X509V3_ADD_DEFAULT) == 1;
out:
  ASN1_OCTET_STRING_free(value);
  GENERAL_NAME_free(gn);
  GENERAL_NAMES_free(names);
  return ok ? 0 : -1;
}

/* warren's CA certificate for key: self-signed, ten years. The random
 * suffix keeps two warren installations' CAs apart in a trust store. */
static X509 *make_ca_cert(EVP_PKEY *key) {
  _cleanup_free_ char *cn = wr_random_id("warren local CA ", 8);
  X509 *x = cert_new(key, cn, NULL, CA_DAYS);

  if (x == NULL ||
      add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
      add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
      add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
      add_ext(x, x, NID_authority_key_identifier, "keyid:always") < 0 ||
      X509_sign(x, key, EVP_sha256()) == 0) {
    X509_free(x);
    return NULL;
  }
  return x;
}

/* A leaf never outlives the CA that signed it. */
static int clamp_to_ca(X509 *x, const X509 *ca) {
  const ASN1_TIME *ca_end = X509_get0_notAfter(ca);

  if (ASN1_TIME_compare(X509_get0_notAfter(x), ca_end) <= 0)
    return 0;
  return X509_set1_notAfter(x, ca_end) ? 0 : -1;
}

/* A server certificate for host, signed by the CA. The CN is only a
 * courtesy (clients match the subjectAltName) and is left out for names
 * longer than X.509 allows in it. */
static X509 *mint_leaf(const struct wr_tls *t, const char *host) {
  const char *cn = strlen(host) <= CN_MAX ? host : NULL;
  X509 *x = cert_new(t->leaf_key, cn, t->ca_cert, LEAF_DAYS);

  if (x == NULL || clamp_to_ca(x, t->ca_cert) < 0 ||
      add_ext(x, t->ca_cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
      add_ext(x, t->ca_cert, NID_key_usage, "critical,digitalSignature") < 0 ||
      add_ext(x, t->ca_cert, NID_ext_key_usage, "serverAuth") < 0 ||
      add_ext(x, t->ca_cert, NID_subject_key_identifier, "hash") < 0 ||
      add_ext(x, t->ca_cert, NID_authority_key_identifier, "keyid:always") <
          0 ||
      add_san(x, host) < 0 || X509_sign(x, t->ca_key, EVP_sha256()) == 0) {
    X509_free(x);
    return NULL;
  }
  return x;
}

/* ---- the CA on disk ---------------------------------------------------- */

/* PEM text of a certificate (caller frees). */
static char *cert_pem(X509 *x) {
  BIO *b = BIO_new(BIO_s_mem());
  char *data = NULL, *out = NULL;
  long len;

  if (b != NULL && PEM_write_bio_X509(b, x)) {
    len = BIO_get_mem_data(b, &data);
    if (len > 0)
      out = xstrndup(data, (size_t)len);
  }
  BIO_free(b);
  return out;
}

/* Write data to dir/name through a temporary file opened with O_EXCL and
 * linked into place once synced: the name never holds a partial file, and
 * an existing file is never replaced. Returns 0 when written, 1 when the
 * name already exists (another process was first), -1 on failure. */
static int write_new_file(int dirfd, const char *name, const void *data,
                          size_t len, mode_t mode, wr_error_t *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.tmp", name);
  _cleanup_close_ int fd = -1;
  int rc = 0;

  unlinkat(dirfd, tmp, 0); /* left by a crash */
  fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return wr_error_set(err, errno, "create `%s`", tmp);
  if (fchmod(fd, mode) < 0) /* the umask may have taken bits off */
    rc = wr_error_set(err, errno, "chmod `%s`", tmp);
  else if (wr_write_all(fd, data, len, err) < 0)
    rc = wr_error_wrap(err, "`%s`", tmp);
  else if (fsync(fd) < 0)
    rc = wr_error_set(err, errno, "fsync `%s`", tmp);
  else if (linkat(dirfd, tmp, dirfd, name, 0) < 0)
    rc = errno == EEXIST ? 1 : wr_error_set(err, errno, "link `%s`", name);
  unlinkat(dirfd, tmp, 0);
  if (rc == 0)
    fsync(dirfd);
  return rc;
}

/* Make a CA key and store it as ca.key. Returns 1 (keeping nothing) when
 * another process stored one first; the caller then loads theirs. */
static int create_ca_key(int dirfd, EVP_PKEY **out, wr_error_t *err) {
  EVP_PKEY *key = EVP_EC_gen("P-256");
  BIO *b = BIO_new(BIO_s_mem());
  char *data = NULL;
  long len = 0;
  int rc = -1;

  if (key == NULL || b == NULL ||
      !PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) ||
      (len = BIO_get_mem_data(b, &data)) <= 0) {
    ssl_fail(err, "make the CA key");
  } else {
    rc = write_new_file(dirfd, "ca.key", data, (size_t)len, 0600, err);
    OPENSSL_cleanse(data, (size_t)len);
  }
  BIO_free(b);
  if (rc == 0)
    *out = key;
  else
    EVP_PKEY_free(key);
  return rc;
}

/* Read dir/name (at most PEM_MAX bytes) into a fresh buffer. A private
 * file must be a regular file that only its owner can read. */
static int read_pem(int dirfd, const char *name, bool private, char **out,
                    size_t *len, wr_error_t *err) {
  _cleanup_close_ int fd = -1;
  struct stat st;
  char *buf;
  ssize_t n;

  fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", name);
  if (fstat(fd, &st) < 0)
    return wr_error_set(err, errno, "stat `%s`", name);
  if (!S_ISREG(st.st_mode))
    return wr_error_setx(err, EINVAL, "`%s` is not a regular file", name);
  if (private && (st.st_mode & 077) != 0)
    return wr_error_setx(err, EPERM, "`%s` has mode %o; it must be 0600", name,
                         (unsigned)(st.st_mode & 07777));
  buf = xmalloc(PEM_MAX + 1);
  n = wr_read_all(fd, buf, PEM_MAX + 1);
  if (n < 0 || (size_t)n > PEM_MAX) {
    int e = n < 0 ? errno : EFBIG;
    free(buf);
    return wr_error_set(err, e, "read `%s`", name);
  }
  *out = buf;
  *len = (size_t)n;
  return 0;
}

/* Never prompt on a terminal for a pass phrase: warren's key has none. */
static int no_password(char *buf, int size, int rwflag, void *u) {
  (void)buf;
  (void)size;
  (void)rwflag;
  (void)u;
  return -1;
}

static int load_ca_key(int dirfd, EVP_PKEY **out, wr_error_t *err) {
  char *data = NULL;
  size_t len = 0;
  BIO *b;

  if (read_pem(dirfd, "ca.key", true, &data, &len, err) < 0)
    return -1;
  b = BIO_new_mem_buf(data, (int)len);
  *out = b ? PEM_read_bio_PrivateKey(b, NULL, no_password, NULL) : NULL;
  BIO_free(b);
  OPENSSL_cleanse(data, len);
  free(data);
  return *out ? 0 : ssl_fail(err, "read `ca.key`");
}

static bool exists_at(int dirfd, const char *name) {
  struct stat st;

  return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

/* The CA key: made on first use, loaded afterwards. */
static int get_ca_key(int dirfd, EVP_PKEY **out, wr_error_t *err) {
  if (!exists_at(dirfd, "ca.key")) {
    int rc = create_ca_key(dirfd, out, err);
    if (rc <= 0)
      return rc;
  }
  return load_ca_key(dirfd, out, err);
}

/* A stored CA certificate must belong to the key, be a CA and be valid
 * now: leaves signed under anything else would fail in every sandbox. */
static int check_ca_cert(X509 *cert, EVP_PKEY *key, wr_error_t *err) {
  if (!X509_check_private_key(cert, key))
    return ssl_fail(err, "`ca.crt` does not match `ca.key`");
  if (X509_check_ca(cert) < 1)
    return wr_error_setx(err, EINVAL, "`ca.crt` is not a CA certificate");
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
    return wr_error_setx(err, EINVAL,
                         "`ca.crt` has expired; remove `ca.key` and `ca.crt` "
                         "to make a new CA");
  return 0;
}

static int load_ca_cert(int dirfd, struct wr_tls *t, wr_error_t *err) {
  _cleanup_free_ char *data = NULL;
  size_t len = 0;
  BIO *b;

  if (read_pem(dirfd, "ca.crt", false, &data, &len, err) < 0)
    return -1;
  b = BIO_new_mem_buf(data, (int)len);
  t->ca_cert = b ? PEM_read_bio_X509(b, NULL, no_password, NULL) : NULL;
  BIO_free(b);
  if (t->ca_cert == NULL)
    return ssl_fail(err, "read `ca.crt`");
  if (check_ca_cert(t->ca_cert, t->ca_key, err) < 0)
    return -1;
  t->ca_pem = cert_pem(t->ca_cert);
  return t->ca_pem ? 0 : ssl_fail(err, "encode `ca.crt`");
}

/* The CA certificate: made from the key when there is none yet (first
 * start, or a crash after the key was stored), loaded otherwise. */
static int get_ca_cert(int dirfd, struct wr_tls *t, wr_error_t *err) {
  int rc;

  if (exists_at(dirfd, "ca.crt"))
    return load_ca_cert(dirfd, t, err);
  t->ca_cert = make_ca_cert(t->ca_key);
  if (t->ca_cert == NULL)
    return ssl_fail(err, "make the CA certificate");
  t->ca_pem = cert_pem(t->ca_cert);
  if (t->ca_pem == NULL)
    return ssl_fail(err, "encode the CA certificate");
  rc = write_new_file(dirfd, "ca.crt", t->ca_pem, strlen(t->ca_pem), 0644, err);
  if (rc <= 0)
    return rc;
  X509_free(steal_ptr(&t->ca_cert));
  free(steal_ptr(&t->ca_pem));
  return load_ca_cert(dirfd, t, err);
}

static int load_ca(struct wr_tls *t, const char *dir, wr_error_t *err) {
  _cleanup_close_ int dirfd = -1;

  if (wr_mkdir_p(dir, 0700, err) < 0)
    return wr_error_wrap(err, "CA directory `%s`", dir);
  dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return wr_error_set(err, errno, "open `%s`", dir);
  if (get_ca_key(dirfd, &t->ca_key, err) < 0 || get_ca_cert(dirfd, t, err) < 0)
    return wr_error_wrap(err, "CA in `%s`", dir);
  return 0;
}

/* ---- contexts ---------------------------------------------------------- */

/* ALPN on the sandbox side: HTTP/1.1 or nothing. A client that offers only
 * h2 fails the handshake here rather than speak a protocol the relay does
 * not parse; one that offers no ALPN at all speaks HTTP/1.1 anyway. */
static int select_alpn(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  for (unsigned int i = 0; i < inlen; i += 1u + in[i]) {
    unsigned int len = in[i];
    if (len > inlen - i - 1)
      break;
    if (len == 8 && memcmp(in + i + 1, alpn_http11 + 1, 8) == 0) {
      *out = in + i + 1;
      *outlen = 8;
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* Options both sides share. Sessions are not resumed on the sandbox side
 * (each host has its own certificate, and a ticket must not carry one
 * host's session to another), renegotiation is off, and SSL_read returns
 * after a non-application record instead of blocking for the next one,
 * which the relay's poll loop relies on. */
static int ctx_common(SSL_CTX *ctx) {
  if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
    return -1;
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
  return 0;
}

static SSL_CTX *server_ctx_new(void) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

  if (ctx == NULL || ctx_common(ctx) < 0 || !SSL_CTX_set_num_tickets(ctx, 0)) {
    SSL_CTX_free(ctx);
    return NULL;
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
  return ctx;
}

/* The upstream side verifies against the system's trust store and, when
 * given, an extra bundle; host names are checked per connection. */
static SSL_CTX *client_ctx_new(const char *upstream_ca, wr_error_t *err) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

  if (ctx == NULL || ctx_common(ctx) < 0 ||
      !SSL_CTX_set_default_verify_paths(ctx) ||
      SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof(alpn_http11) - 1) != 0) {
    ssl_fail(err, "make the upstream TLS context");
    SSL_CTX_free(ctx);
    return NULL;
  }
  if (upstream_ca != NULL &&
      !X509_STORE_load_file(SSL_CTX_get_cert_store(ctx), upstream_ca)) {
    ssl_fail(err, "load upstream CA bundle `%s`", upstream_ca);
    SSL_CTX_free(ctx);
    return NULL;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  return ctx;
}

static int make_contexts(struct wr_tls *t, const char *upstream_ca,
                         wr_error_t *err) {
  t->leaf_key = EVP_EC_gen("P-256");
  if (t->leaf_key == NULL)
    return ssl_fail(err, "make the leaf key");
  t->server_ctx = server_ctx_new();
  if (t->server_ctx == NULL)
    return ssl_fail(err, "make the sandbox TLS context");
  t->client_ctx = client_ctx_new(upstream_ca, err);
  return t->client_ctx ? 0 : -1;
}

/* ---- the leaf cache ---------------------------------------------------- */

static struct leaf *cache_find(struct wr_tls *t, const char *host) {
  for (size_t i = 0; i < t->ncache; i++)
    if (strcmp(t->cache[i].host, host) == 0)
      return &t->cache[i];
  return NULL;
}

/* A free slot, evicting the oldest entry once the cache is full. */
static struct leaf *cache_take_slot(struct wr_tls *t) {
  struct leaf *slot;

  if (t->ncache < CACHE_MAX)
    return &t->cache[t->ncache++];
  slot = &t->cache[t->next];
  t->next = (t->next + 1) % CACHE_MAX;
  X509_free(steal_ptr(&slot->cert));
  slot->host[0] = '\0';
  return slot;
}

/* The leaf for host with a reference for the caller, minted when it is not
 * cached or getting old. Minting (one EC signature) is quick enough to do
 * under the lock. */
static X509 *leaf_for(struct wr_tls *t, const char *host) {
  time_t now = time(NULL);
  struct leaf *slot;
  X509 *cert = NULL;

  pthread_mutex_lock(&t->lock);
  slot = cache_find(t, host);
  if (slot == NULL || now - slot->made > LEAF_MAX_AGE_S) {
    X509 *fresh = mint_leaf(t, host);
    if (fresh != NULL) {
      if (slot == NULL)
        slot = cache_take_slot(t);
      X509_free(slot->cert);
      slot->cert = fresh;
      slot->made = now;
      wr_strlcpy(slot->host, host, sizeof(slot->host));
    }
    slot = fresh ? slot : NULL;
  }
  if (slot != NULL && X509_up_ref(slot->cert))
    cert = slot->cert;
  pthread_mutex_unlock(&t->lock);
  return cert;
}

/* ---- public ------------------------------------------------------------ */

int wr_tls_new(const char *dir, const char *upstream_ca, struct wr_tls **out,
               wr_error_t *err) {
  struct wr_tls *t = xcalloc(1, sizeof(*t));

  pthread_mutex_init(&t->lock, NULL);
  if (load_ca(t, dir, err) < 0 || make_contexts(t, upstream_ca, err) < 0) {
    wr_tls_free(t);
    return -1;
  }
  *out = t;
  return 0;
}

void wr_tls_free(struct wr_tls *t) {
  if (t == NULL)
    return;
  for (size_t i = 0; i < t->ncache; i++)
    X509_free(t->cache[i].cert);
  SSL_CTX_free(t->server_ctx);
  SSL_CTX_free(t->client_ctx);
  EVP_PKEY_free(t->leaf_key);
  EVP_PKEY_free(t->ca_key);
  X509_free(t->ca_cert);
  free(t->ca_pem);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

const char *wr_tls_ca_pem(const struct wr_tls *t) {
  return t->ca_pem;
}

SSL *wr_tls_server(struct wr_tls *t, const char *host, wr_error_t *err) {
  X509 *cert;
  SSL *ssl;

  if (check_host(host, err) < 0)
    return NULL;
  cert = leaf_for(t, host);
  if (cert == NULL) {
    ssl_fail(err, "mint a certificate for `%s`", host);
    return NULL;
  }
  ssl = SSL_new(t->server_ctx);
  if (ssl == NULL || !SSL_use_certificate(ssl, cert) ||
      !SSL_use_PrivateKey(ssl, t->leaf_key)) {
    ssl_fail(err, "TLS server for `%s`", host);
    SSL_free(steal_ptr(&ssl));
  }
  X509_free(cert);
  return ssl;
}

/* SNI goes out only for names (RFC 6066 forbids IP literals there); the
 * peer's certificate must name the host, or carry the address for an IP
 * literal. */
SSL *wr_tls_client(struct wr_tls *t, const char *host, wr_error_t *err) {
  unsigned char ip[16];
  SSL *ssl;
  int ok;

  if (check_host(host, err) < 0)
    return NULL;
  ssl = SSL_new(t->client_ctx);
  if (ssl == NULL) {
    ssl_fail(err, "TLS client for `%s`", host);
    return NULL;
  }
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (host_ip(host, ip) > 0)
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
  else
    ok = SSL_set_tlsext_host_name(ssl, host) && SSL_set1_host(ssl, host);
  if (!ok) {
    ssl_fail(err, "TLS client for `%s`", host);
    SSL_free(steal_ptr(&ssl));
  }
  return ssl;
}
