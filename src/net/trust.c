/*
 * The CAs a sandbox trusts besides its image's bundle and warren's own:
 * the ones the host's administrator added locally (Debian: every .crt
 * file below /usr/local/share/ca-certificates, as update-ca-certificates
 * reads them) and the files given with --sandbox-ca.
 *
 * Why: on a host whose outbound TLS is inspected (a company proxy, this
 * build machine), a sandbox's TLS through warren's proxy is tunnelled to
 * the same inspecting proxy, so it sees a certificate signed by the
 * host's extra CA and refuses it unless it trusts that CA too.
 *
 * Every file is outside input of a kind: a directory anyone with root may
 * fill, perhaps with a private key next to a certificate or with junk. So
 * files are read with the bounded, confined readers of common/fs.c, each
 * PEM block must be a CERTIFICATE without headers and decode whole as
 * X.509, and what goes into a sandbox is OpenSSL's own encoding of the
 * parsed certificate, never the file's bytes. A bad file is skipped with
 * a warning (a private key's bytes are wiped, never parsed as a key).
 *
 * The set is scanned at daemon start and again before every sandbox
 * start, on the job's worker thread; a scan that finds the same files
 * (path, inode, size, mtime) as the last one reuses its set, so a start
 * costs a directory listing and a stat per file.
 */
#include "common/common.h"
#include "net/net.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#define TRUST_FILE_MAX (1u << 20) /* one .crt file */
#define TRUST_FILES_MAX 256       /* files in the host's directory */
#define TRUST_CERTS_MAX 256       /* certificates in one file */
#define TRUST_DEPTH_MAX 8         /* levels below the host's directory */

/* What a file was when it was last read: a scan that finds every file as
 * it was keeps the set it made then. */
struct stamp {
  char *path; /* absolute */
  bool host;  /* found in the host's directory (else --sandbox-ca) */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
};

struct wr_trust_set {
  atomic_uint refs;
  struct wr_trust_ca *cas;
  size_t ncas;
  struct wr_trust_skip *skipped;
  size_t nskipped;
  struct stamp *stamps;
  size_t nstamps;
  char *pem; /* every CA, each after a comment naming it; "" when none */
};

struct wr_trust {
  char *host_dir; /* NULL: --no-host-cas */
  char **files;   /* --sandbox-ca, NULL-ended */
  pthread_mutex_t lock;
  struct wr_trust_set *last; /* guarded by lock */
};

/* ---- one file's certificates -------------------------------------------- */

void wr_trust_certs_free(struct wr_trust_cert *c, size_t n) {
  for (size_t i = 0; c != NULL && i < n; i++) {
    free(c[i].subject);
    free(c[i].not_after);
    free(c[i].pem);
  }
  free(c);
}

static char *bio_text(BIO *b) {
  char *data = NULL;
  long n = BIO_get_mem_data(b, &data);

  return n > 0 ? xstrndup(data, (size_t)n) : xstrdup("");
}

/* RFC 2253 with every control and non-ASCII byte escaped, so that the
 * subject is plain ASCII in JSON, logs and bundle comments. */
static char *subject_text(X509 *x) {
  BIO *b = BIO_new(BIO_s_mem());
  char *s;

  if (b == NULL)
    abort();
  X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253);
  s = bio_text(b);
  BIO_free(b);
  return s;
}

static char *not_after_text(X509 *x) {
  struct tm tm;
  char buf[32];

  if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
    return xstrdup("unknown");
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return xstrdup(buf);
}

static int cert_pem(X509 *x, char **out) {
  BIO *b = BIO_new(BIO_s_mem());

  if (b == NULL)
    abort();
  if (PEM_write_bio_X509(b, x) != 1) {
    BIO_free(b);
    return -1;
  }
  *out = bio_text(b);
  BIO_free(b);
  return 0;
}

/* One decoded PEM block into c: a whole DER certificate, not expired. */
static int take_cert(const unsigned char *der, long len, time_t now,
                     struct wr_trust_cert *c, wr_error_t *err) {
  const unsigned char *p = der;
  X509 *x = d2i_X509(NULL, &p, len);
  unsigned int mdlen = 0;
  int r = 0;

  if (x == NULL || p != der + len) {
    X509_free(x);
    return wr_error_setx(err, EINVAL, "a CERTIFICATE block is not X.509");
  }
  c->subject = subject_text(x);
  c->not_after = not_after_text(x);
  if (X509_cmp_time(X509_get0_notAfter(x), &now) < 0)
    r = wr_error_setx(err, EINVAL, "`%s` expired on %s", c->subject,
                      c->not_after);
  else if (X509_digest(x, EVP_sha256(), c->sha256, &mdlen) != 1 ||
           cert_pem(x, &c->pem) < 0)
    r = wr_error_setx(err, EINVAL, "`%s` cannot be encoded", c->subject);
  X509_free(x);
  return r;
}

/* The next PEM block: 1 with one, 0 at the end, -1 on a block that is
 * not a certificate (its bytes are wiped: it may be a private key). */
static int next_block(BIO *in, time_t now, struct wr_trust_cert *c,
                      wr_error_t *err) {
  char *name = NULL, *header = NULL;
  unsigned char *data = NULL;
  long len = 0;
  int r = 1;

  ERR_clear_error();
  if (PEM_read_bio(in, &name, &header, &data, &len) != 1) {
    unsigned long e = ERR_peek_last_error();
    ERR_clear_error();
    if (ERR_GET_LIB(e) == ERR_LIB_PEM &&
        ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
      return 0;
    return wr_error_setx(err, EINVAL, "a PEM block is malformed");
  }
  if (strcmp(name, "CERTIFICATE") != 0)
    r = wr_error_setx(err, EINVAL, "it holds a %s block, not a certificate",
                      strlen(name) < 40 ? name : "foreign");
  else if (header != NULL && *header != '\0')
    r = wr_error_setx(err, EINVAL, "a CERTIFICATE block has headers");
  else if (take_cert(data, len, now, c, err) < 0)
    r = -1;
  OPENSSL_clear_free(data, (size_t)len);
  OPENSSL_free(name);
  OPENSSL_free(header);
  return r;
}

int wr_trust_parse(const char *data, size_t len, time_t now,
                   struct wr_trust_cert **out, size_t *n, wr_error_t *err) {
  BIO *in = BIO_new_mem_buf(data, (int)WR_MIN(len, (size_t)INT_MAX));
  struct wr_trust_cert *certs = NULL;
  size_t count = 0;
  int r = 1;

  if (in == NULL)
    abort();
  while (r == 1 && count <= TRUST_CERTS_MAX) {
    certs = xrealloc(certs, (count + 1) * sizeof(*certs));
    memset(&certs[count], 0, sizeof(*certs));
    r = next_block(in, now, &certs[count], err);
    count += r == 1;
  }
  BIO_free(in);
  if (r == 1)
    r = wr_error_setx(err, EFBIG, "more than %d certificates", TRUST_CERTS_MAX);
  else if (r == 0 && count == 0)
    r = wr_error_setx(err, EINVAL, "no PEM certificate in it");
  if (r < 0) {
    wr_trust_certs_free(certs, count + 1);
    return -1;
  }
  *out = certs;
  *n = count;
  return 0;
}

/* ---- which files ----------------------------------------------------------
 */

struct stamps {
  struct stamp *v;
  size_t n;
};

static void stamps_free(struct stamp *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i].path);
  free(v);
}

static void stamp_add(struct stamps *s, const char *path, bool host,
                      const struct stat *st) {
  struct stamp *p;

  s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
  p = &s->v[s->n++];
  *p = (struct stamp){.path = xstrdup(path),
                      .host = host,
                      .dev = st ? st->st_dev : 0,
                      .ino = st ? st->st_ino : 0,
                      .size = st ? st->st_size : -1,
                      .mtime = st ? st->st_mtim : (struct timespec){0}};
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);

  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void list_dir(int dirfd, const char *path, int depth, struct stamps *s);

/* One entry of the host's directory: a .crt file (anything else that
 * ends in .crt is stamped too, so that the read says what it is), or a
 * directory to go down into. */
static void list_entry(int dirfd, const char *dir, const char *name, int depth,
                       struct stamps *s) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
  struct stat st;

  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return;
  if (S_ISDIR(st.st_mode) && depth < TRUST_DEPTH_MAX) {
    _cleanup_close_ int sub =
        openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0)
      list_dir(sub, path, depth + 1, s);
  } else if (has_suffix(name, ".crt") && s->n < TRUST_FILES_MAX) {
    stamp_add(s, path, true, &st);
  }
}

static void list_dir(int dirfd, const char *path, int depth, struct stamps *s) {
  int fd = dup(dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *e;

  if (d == NULL) {
    if (fd >= 0)
      close(fd);
    return;
  }
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      list_entry(dirfd, path, e->d_name, depth, s);
  closedir(d);
}

static int stamp_cmp(const void *a, const void *b) {
  const struct stamp *x = a, *y = b;

  if (x->host != y->host)
    return x->host ? -1 : 1;
  return x->host ? strcmp(x->path, y->path) : 0;
}

/* Every file to read now, the host's in name order, then --sandbox-ca's
 * in the order given. A missing host directory is no host CA; one that
 * cannot be opened (a symlink, a file) is none either, with a warning. */
static void list_files(const struct wr_trust *t, struct stamps *s) {
  if (t->host_dir != NULL) {
    wr_error_t err;
    _cleanup_close_ int dir =
        wr_open_host_confined(t->host_dir, WR_CONFINED_DIR, NULL, &err);
    if (dir >= 0)
      list_dir(dir, t->host_dir, 0, s);
    else if (err.code != ENOENT)
      wr_warn("sandbox CAs: %s; no host CA is trusted", err.msg);
  }
  if (s->n > 1)
    qsort(s->v, s->n, sizeof(*s->v), stamp_cmp);
  for (size_t i = 0; t->files[i] != NULL; i++) {
    struct stat st;
    stamp_add(s, t->files[i], false, stat(t->files[i], &st) == 0 ? &st : NULL);
  }
}

static bool same_stamps(const struct stamp *a, size_t na, const struct stamp *b,
                        size_t nb) {
  if (na != nb)
    return false;
  for (size_t i = 0; i < na; i++)
    if (strcmp(a[i].path, b[i].path) != 0 || a[i].dev != b[i].dev ||
        a[i].ino != b[i].ino || a[i].size != b[i].size ||
        a[i].mtime.tv_sec != b[i].mtime.tv_sec ||
        a[i].mtime.tv_nsec != b[i].mtime.tv_nsec)
      return false;
  return true;
}

/* ---- a set ----------------------------------------------------------------
 */

/* A file's bytes: the host's confined in its directory (no symlink as
 * the last component, no FIFO, bounded); an operator's file may be a
 * symlink to where it really is. */
static int read_one(const struct stamp *st, char **data, size_t *len,
                    wr_error_t *err) {
  _cleanup_free_ char *real = st->host ? NULL : realpath(st->path, NULL);
  _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (root < 0)
    return wr_error_set(err, errno, "open `/`");
  if (!st->host && real == NULL)
    return wr_error_set(err, errno, "%s", st->path);
  return wr_read_in_root(root, "on the host", real ? real : st->path,
                         TRUST_FILE_MAX, data, len, err);
}

static void add_skip(struct wr_trust_set *s, const char *file,
                     const char *reason) {
  s->skipped = xrealloc(s->skipped, (s->nskipped + 1) * sizeof(*s->skipped));
  s->skipped[s->nskipped++] =
      (struct wr_trust_skip){xstrdup(file), xstrdup(reason)};
}

static bool seen(const struct wr_trust_cert *c, const struct wr_trust_set *s,
                 const unsigned char (*digests)[32]) {
  for (size_t i = 0; i < s->ncas; i++)
    if (memcmp(digests[i], c->sha256, 32) == 0)
      return true;
  return false;
}

/* Comments in a bundle are one line each: a path may hold a newline. */
static void put_comment(wr_buf_t *b, const char *text) {
  for (const char *p = text; *p != '\0'; p++)
    wr_buf_append(b, (unsigned char)*p < 0x20 ? "?" : p, 1);
}

/* The certificates of one file into the set, each once. */
static void add_certs(struct wr_trust_set *s, const struct stamp *st,
                      struct wr_trust_cert *c, size_t n, wr_buf_t *pem,
                      unsigned char (**digests)[32]) {
  for (size_t i = 0; i < n; i++) {
    if (seen(&c[i], s, *digests))
      continue;
    *digests = xrealloc(*digests, (s->ncas + 1) * sizeof(**digests));
    memcpy((*digests)[s->ncas], c[i].sha256, 32);
    s->cas = xrealloc(s->cas, (s->ncas + 1) * sizeof(*s->cas));
    s->cas[s->ncas++] = (struct wr_trust_ca){
        .subject = steal_ptr(&c[i].subject),
        .file = xstrdup(st->path),
        .not_after = steal_ptr(&c[i].not_after),
        .host = st->host,
    };
    wr_buf_puts(pem, "# ");
    put_comment(pem, s->cas[s->ncas - 1].subject);
    wr_buf_puts(pem, " (");
    put_comment(pem, st->path);
    wr_buf_puts(pem, ")\n");
    wr_buf_puts(pem, c[i].pem);
  }
}

static void read_into(struct wr_trust_set *s, const struct stamp *st,
                      time_t now, wr_buf_t *pem,
                      unsigned char (**digests)[32]) {
  _cleanup_free_ char *data = NULL;
  struct wr_trust_cert *certs = NULL;
  size_t len = 0, n = 0;
  wr_error_t err;

  if (read_one(st, &data, &len, &err) < 0 ||
      wr_trust_parse(data, len, now, &certs, &n, &err) < 0) {
    wr_warn("sandbox CAs: %s: %s; skipped", st->path, err.msg);
    add_skip(s, st->path, err.msg);
    return;
  }
  add_certs(s, st, certs, n, pem, digests);
  wr_trust_certs_free(certs, n);
}

static struct wr_trust_set *make_set(struct stamps *files) {
  struct wr_trust_set *s = xcalloc(1, sizeof(*s));
  _cleanup_free_ unsigned char(*digests)[32] = NULL;
  time_t now = time(NULL);
  wr_buf_t pem;

  atomic_init(&s->refs, 1);
  wr_buf_init(&pem);
  for (size_t i = 0; i < files->n; i++)
    read_into(s, &files->v[i], now, &pem, &digests);
  wr_buf_append(&pem, "", 1);
  s->pem = wr_buf_steal(&pem, NULL);
  s->stamps = steal_ptr(&files->v);
  s->nstamps = files->n;
  files->n = 0;
  return s;
}

void wr_trust_set_unref(struct wr_trust_set *s) {
  if (s == NULL ||
      atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
    return;
  for (size_t i = 0; i < s->ncas; i++) {
    free(s->cas[i].subject);
    free(s->cas[i].file);
    free(s->cas[i].not_after);
  }
  for (size_t i = 0; i < s->nskipped; i++) {
    free(s->skipped[i].file);
    free(s->skipped[i].reason);
  }
  free(s->cas);
  free(s->skipped);
  stamps_free(s->stamps, s->nstamps);
  free(s->pem);
  free(s);
}

static struct wr_trust_set *set_ref(struct wr_trust_set *s) {
  atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return s;
}

const char *wr_trust_set_pem(const struct wr_trust_set *s) {
  return s != NULL ? s->pem : "";
}

size_t wr_trust_set_count(const struct wr_trust_set *s) {
  return s != NULL ? s->ncas : 0;
}

const struct wr_trust_ca *wr_trust_set_ca(const struct wr_trust_set *s,
                                          size_t i) {
  return i < wr_trust_set_count(s) ? &s->cas[i] : NULL;
}

size_t wr_trust_set_nskipped(const struct wr_trust_set *s) {
  return s != NULL ? s->nskipped : 0;
}

const struct wr_trust_skip *wr_trust_set_skipped(const struct wr_trust_set *s,
                                                 size_t i) {
  return i < wr_trust_set_nskipped(s) ? &s->skipped[i] : NULL;
}

/* ---- the cache ------------------------------------------------------------
 */

struct wr_trust *wr_trust_new(const struct wr_trust_config *cfg) {
  struct wr_trust *t = xcalloc(1, sizeof(*t));

  t->host_dir = cfg->host_dir ? xstrdup(cfg->host_dir) : NULL;
  t->files = cfg->files ? wr_strv_dup(cfg->files) : xcalloc(1, sizeof(char *));
  pthread_mutex_init(&t->lock, NULL);
  return t;
}

void wr_trust_free(struct wr_trust *t) {
  if (t == NULL)
    return;
  wr_trust_set_unref(t->last);
  pthread_mutex_destroy(&t->lock);
  free(t->host_dir);
  wr_strv_free(t->files);
  free(t);
}

/* Two scans at once may both read; the later one's set is kept, and
 * both are right for the files they saw. */
struct wr_trust_set *wr_trust_scan(struct wr_trust *t) {
  struct stamps files = {0};
  struct wr_trust_set *s;

  list_files(t, &files);
  pthread_mutex_lock(&t->lock);
  s = t->last;
  if (s != NULL && same_stamps(s->stamps, s->nstamps, files.v, files.n)) {
    set_ref(s);
    pthread_mutex_unlock(&t->lock);
    stamps_free(files.v, files.n);
    return s;
  }
  pthread_mutex_unlock(&t->lock);
  s = make_set(&files);
  pthread_mutex_lock(&t->lock);
  wr_trust_set_unref(t->last);
  t->last = set_ref(s);
  pthread_mutex_unlock(&t->lock);
  return s;
}

struct wr_trust_set *wr_trust_last(struct wr_trust *t) {
  struct wr_trust_set *s;

  pthread_mutex_lock(&t->lock);
  s = t->last != NULL ? set_ref(t->last) : NULL;
  pthread_mutex_unlock(&t->lock);
  return s;
}
