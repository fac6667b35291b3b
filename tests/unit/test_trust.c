/*
 * The CAs sandboxes trust (src/net/trust.c): what a file must be to be
 * trusted, and what a scan of a directory finds, skips and reuses.
 * Certificates are made here with OpenSSL, so each test knows exactly
 * what it feeds in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/common.h"
#include "net/net.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

/* A self-signed CA named CN that expires `days` from now (negative: it
 * has expired), in PEM; with key_pem, its private key too. */
static char *make_ca(const char *cn, long days, char **key_pem) {
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  X509_NAME *name = X509_get_subject_name(x);
  BIO *b = BIO_new(BIO_s_mem());
  char *data = NULL, *out;
  long n;

  assert_non_null(key);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), days < 0 ? days * 2 * 86400 : 0);
  X509_gmtime_adj(X509_getm_notAfter(x), days * 86400);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             (const unsigned char *)cn, -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_set_pubkey(x, key);
  assert_true(X509_sign(x, key, EVP_sha256()) > 0);
  PEM_write_bio_X509(b, x);
  n = BIO_get_mem_data(b, &data);
  out = xstrndup(data, (size_t)n);
  if (key_pem != NULL) {
    BIO *k = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(k, key, NULL, NULL, 0, NULL, NULL);
    n = BIO_get_mem_data(k, &data);
    *key_pem = xstrndup(data, (size_t)n);
    BIO_free(k);
  }
  BIO_free(b);
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

static int parse(const char *text, struct wr_trust_cert **c, size_t *n,
                 wr_error_t *err) {
  return wr_trust_parse(text, strlen(text), time(NULL), c, n, err);
}

static void assert_refused(const char *text, const char *msg_part) {
  struct wr_trust_cert *c = NULL;
  size_t n = 0;
  wr_error_t err = {0};

  assert_int_equal(parse(text, &c, &n, &err), -1);
  assert_null(c);
  if (strstr(err.msg, msg_part) == NULL)
    fail_msg("`%s` does not mention `%s`", err.msg, msg_part);
}

static void test_parse(void **state) {
  _cleanup_free_ char *a = make_ca("warren unit CA one", 30, NULL);
  _cleanup_free_ char *b = make_ca("warren unit CA two", 30, NULL);
  _cleanup_free_ char *both = xasprintf("# a comment\n%s\ntext\n%s", a, b);
  struct wr_trust_cert *c = NULL;
  size_t n = 0;
  wr_error_t err = {0};
  (void)state;

  if (parse(both, &c, &n, &err) < 0)
    fail_msg("parse: %s", err.msg);
  assert_int_equal(n, 2);
  assert_string_equal(c[0].subject, "CN=warren unit CA one");
  assert_string_equal(c[1].subject, "CN=warren unit CA two");
  assert_string_equal(c[0].pem, a); /* OpenSSL's encoding of the same */
  assert_int_equal(strlen(c[0].not_after), 20);
  assert_memory_not_equal(c[0].sha256, c[1].sha256, 32);
  wr_trust_certs_free(c, n);
}

/* A private key next to a certificate refuses the whole file: it was
 * not meant to be shared, and nothing of it may reach a sandbox. */
static void test_parse_refuses(void **state) {
  _cleanup_free_ char *key = NULL;
  _cleanup_free_ char *ca = make_ca("warren unit CA", 30, &key);
  _cleanup_free_ char *old = make_ca("warren expired CA", -1, NULL);
  _cleanup_free_ char *with_key = xasprintf("%s%s", ca, key);
  _cleanup_free_ char *cut = xstrndup(ca, strlen(ca) / 2);
  _cleanup_free_ char *headers = NULL;
  _cleanup_free_ char *not_x509 =
      xstrdup("-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n"
              "-----END CERTIFICATE-----\n");
  const char *nl = strchr(ca, '\n');
  (void)state;

  /* Proc-Type and DEK-Info headers are how encrypted PEM looks. */
  headers = xasprintf("%.*sProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
                      "00112233445566778899AABBCCDDEEFF\n\n%s",
                      (int)(nl + 1 - ca), ca, nl + 1);
  assert_refused("", "no PEM certificate");
  assert_refused("\x7f"
                 "ELF junk\n\x01\x02",
                 "no PEM certificate");
  assert_refused(key, "PRIVATE KEY block");
  assert_refused(with_key, "PRIVATE KEY block");
  assert_refused(old, "expired");
  assert_refused(cut, "malformed");
  assert_refused(not_x509, "not X.509");
  assert_refused(headers, "headers");
}

/* ---- scans ----------------------------------------------------------------
 */

struct dir {
  char path[64];
};

static void put(const struct dir *d, const char *name, const char *text) {
  _cleanup_free_ char *p = xasprintf("%s/%s", d->path, name);
  wr_error_t err = {0};

  if (wr_write_file(p, text, strlen(text), 0644, &err) < 0)
    fail_msg("write %s: %s", p, err.msg);
}

static int setup_dir(void **state) {
  struct dir *d = xcalloc(1, sizeof(*d));

  snprintf(d->path, sizeof(d->path), "/tmp/wr-trust-XXXXXX");
  assert_non_null(mkdtemp(d->path));
  *state = d;
  return 0;
}

static int teardown_dir(void **state) {
  struct dir *d = *state;

  wr_rm_rf(d->path, NULL);
  free(d);
  return 0;
}

static bool has_subject(const struct wr_trust_set *s, const char *subject) {
  for (size_t i = 0; i < wr_trust_set_count(s); i++)
    if (strcmp(wr_trust_set_ca(s, i)->subject, subject) == 0)
      return true;
  return false;
}

static void test_scan(void **state) {
  struct dir *d = *state;
  _cleanup_free_ char *key = NULL;
  _cleanup_free_ char *a = make_ca("host CA a", 30, &key);
  _cleanup_free_ char *b = make_ca("host CA b", 30, NULL);
  _cleanup_free_ char *c = make_ca("operator CA", 30, NULL);
  _cleanup_free_ char *later = make_ca("added later", 30, NULL);
  _cleanup_free_ char *sub = xasprintf("%s/corp", d->path);
  _cleanup_free_ char *link = xasprintf("%s/link.crt", d->path);
  _cleanup_free_ char *op = xasprintf("%s/operator.pem", d->path);
  char *files[] = {op, NULL};
  struct wr_trust_config cfg = {.host_dir = d->path, .files = files};
  struct wr_trust *t;
  struct wr_trust_set *s1, *s2, *s3;
  (void)state;

  assert_int_equal(mkdir(sub, 0755), 0);
  put(d, "a.crt", a);
  put(d, "corp/b.crt", b);
  put(d, "corp/again.crt", a); /* the same CA twice is trusted once */
  put(d, "junk.crt", "not a certificate\n");
  put(d, "key.crt", key);
  put(d, "b.pem", b); /* not a .crt: update-ca-certificates skips it */
  put(d, "operator.pem", c);
  assert_int_equal(symlink("a.crt", link), 0);
  t = wr_trust_new(&cfg);
  s1 = wr_trust_scan(t);
  assert_int_equal(wr_trust_set_count(s1), 3);
  assert_true(has_subject(s1, "CN=host CA a"));
  assert_true(has_subject(s1, "CN=host CA b"));
  assert_true(has_subject(s1, "CN=operator CA"));
  assert_false(wr_trust_set_ca(s1, 2)->host);
  /* junk, the key and the symlink (only regular files are read). */
  assert_int_equal(wr_trust_set_nskipped(s1), 3);
  assert_null(strstr(wr_trust_set_pem(s1), "PRIVATE"));
  assert_non_null(strstr(wr_trust_set_pem(s1), "# CN=host CA b ("));
  /* Nothing changed: the same set, no new read. */
  s2 = wr_trust_scan(t);
  assert_ptr_equal(s1, s2);
  /* A CA added later is in the next scan, and the last set is it. */
  put(d, "corp/new.crt", later);
  s3 = wr_trust_scan(t);
  assert_ptr_not_equal(s3, s1);
  assert_true(has_subject(s3, "CN=added later"));
  wr_trust_set_unref(s2);
  s2 = wr_trust_last(t);
  assert_ptr_equal(s2, s3);
  wr_trust_set_unref(s1);
  wr_trust_set_unref(s2);
  wr_trust_set_unref(s3);
  wr_trust_free(t);
}

/* --no-host-cas and a missing directory both mean no host CA. */
static void test_scan_none(void **state) {
  struct dir *d = *state;
  _cleanup_free_ char *gone = xasprintf("%s/absent", d->path);
  struct wr_trust_config off = {0}, missing = {.host_dir = gone};
  struct wr_trust *t1, *t2;
  _cleanup_free_ char *a = make_ca("host CA a", 30, NULL);
  struct wr_trust_set *s1, *s2;

  put(d, "a.crt", a);
  t1 = wr_trust_new(&off);
  t2 = wr_trust_new(&missing);
  s1 = wr_trust_scan(t1);
  s2 = wr_trust_scan(t2);
  assert_int_equal(wr_trust_set_count(s1), 0);
  assert_int_equal(wr_trust_set_count(s2), 0);
  assert_string_equal(wr_trust_set_pem(s1), "");
  assert_string_equal(wr_trust_set_pem(NULL), "");
  wr_trust_set_unref(s1);
  wr_trust_set_unref(s2);
  wr_trust_free(t1);
  wr_trust_free(t2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_parse_refuses),
      cmocka_unit_test_setup_teardown(test_scan, setup_dir, teardown_dir),
      cmocka_unit_test_setup_teardown(test_scan_none, setup_dir, teardown_dir),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
