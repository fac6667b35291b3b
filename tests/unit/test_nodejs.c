/*
 * Unit tests for src/daemon/nodejs.c: what --node accepts, SRI strings,
 * picking a major's highest release from a packument, and the tarball
 * cache (a copy that still has its digest is used without the network;
 * one that does not is removed, never used).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include "daemon/images_internal.h"

/* sha512("hello\n"), as npm writes it. */
#define HELLO_SRI                                                              \
  "sha512-58IrmUxZ2c8rSOVJseJGZmNgRZMNPafBrLKZ0cO3+"                           \
  "TH5Sq5B7dosKyB6NuEPi8uNRSI+"                                                \
  "VIePWzFufOO2vAGWKQ=="

static void test_node_spec(void **state) {
  unsigned major = 99;
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(wr_node_spec_parse("debian", &major, &err), 0);
  assert_int_equal(major, 0);
  assert_int_equal(wr_node_spec_parse("24", &major, &err), 0);
  assert_int_equal(major, 24);
  assert_int_equal(wr_node_spec_parse("18", &major, &err), 0);
  assert_int_equal(major, 18);
  static const char *const bad[] = {"7",  "17",   "abc", "",       "24.1",
                                    "-1", "1000", "24 ", "Debian", "024x"};
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    err.msg[0] = '\0';
    assert_int_equal(wr_node_spec_parse(bad[i], &major, &err), -1);
    assert_non_null(strstr(err.msg, "use a Node.js major version"));
  }
  assert_int_equal(wr_node_spec_parse(NULL, &major, &err), -1);
  assert_int_equal(wr_npm_major_for_node(18), 10);
  assert_int_equal(wr_npm_major_for_node(24), 11);
}

static void test_sri(void **state) {
  unsigned char d[WR_SHA512_LEN], e[WR_SHA512_LEN];
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(wr_sri_sha512(HELLO_SRI, d, &err), 0);
  assert_int_equal(d[0], 0xe7);
  /* The sha512 among others, and options after '?'. */
  assert_int_equal(wr_sri_sha512("sha1-abcd " HELLO_SRI "?opt", e, &err), 0);
  assert_memory_equal(d, e, WR_SHA512_LEN);
  assert_int_equal(
      wr_sri_sha512("sha1-2ef7bde608ce5404e97d5f042f95f89f1c232871", d, &err),
      -1);
  assert_non_null(strstr(err.msg, "no sha512"));
  assert_int_equal(wr_sri_sha512("sha512-AAAA", d, &err), -1);
  assert_non_null(strstr(err.msg, "malformed"));
  assert_int_equal(wr_sri_sha512("sha512-!!!!", d, &err), -1);
  assert_int_equal(wr_sri_sha512("", d, &err), -1);
}

static json_t *packument(void) {
  static const char text[] =
      "{\"versions\":{"
      "\"24.2.0\":{\"dist\":{\"tarball\":\"https://r.test/a-24.2.0.tgz\","
      "\"integrity\":\"" HELLO_SRI "\"}},"
      "\"24.10.1\":{\"dist\":{\"tarball\":\"https://r.test/a-24.10.1.tgz\","
      "\"integrity\":\"" HELLO_SRI "\"}},"
      "\"24.11.0-rc.1\":{\"dist\":{\"tarball\":\"https://r.test/rc.tgz\","
      "\"integrity\":\"" HELLO_SRI "\"}},"
      "\"24.9.9\":{\"dist\":{\"tarball\":\"https://r.test/a-24.9.9.tgz\","
      "\"integrity\":\"" HELLO_SRI "\"}},"
      "\"25.0.0\":{\"dist\":{\"tarball\":\"https://r.test/a-25.0.0.tgz\","
      "\"integrity\":\"" HELLO_SRI "\"}},"
      "\"22.1.0\":{\"dist\":{\"tarball\":\"file:///etc/passwd\","
      "\"integrity\":\"" HELLO_SRI "\"}},"
      "\"20.1.0\":{\"dist\":{\"tarball\":\"https://r.test/a-20.1.0.tgz\"}},"
      "\"240.1.0\":\"not an object\""
      "}}";

  return json_loads(text, 0, NULL);
}

/* Numeric order, not string order; pre-releases never. */
static void test_pick(void **state) {
  _cleanup_json_ json_t *doc = packument();
  struct wr_npm_dist dist = {0};
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(wr_npm_pick(doc, 24, &dist, &err), 0);
  assert_string_equal(dist.version, "24.10.1");
  assert_string_equal(dist.tarball, "https://r.test/a-24.10.1.tgz");
  assert_int_equal(dist.sha512[0], 0xe7);
  wr_npm_dist_free(&dist);
  assert_int_equal(wr_npm_pick(doc, 25, &dist, &err), 0);
  assert_string_equal(dist.version, "25.0.0");
  wr_npm_dist_free(&dist);
  assert_int_equal(wr_npm_pick(doc, 26, &dist, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_int_equal(wr_npm_pick(doc, 22, &dist, &err), -1);
  assert_non_null(strstr(err.msg, "no tarball URL"));
  assert_int_equal(wr_npm_pick(doc, 20, &dist, &err), -1);
  assert_non_null(strstr(err.msg, "no sha512"));
  assert_null(dist.version);
  assert_int_equal(
      wr_npm_pick(json_object_get(doc, "versions"), 24, &dist, &err), -1);
}

struct fixture {
  char dir[64];
};

static int setup(void **state) {
  struct fixture *fx = xcalloc(1, sizeof(*fx));

  strcpy(fx->dir, "/tmp/test_nodejs.XXXXXX");
  if (mkdtemp(fx->dir) == NULL)
    return -1;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fixture *fx = *state;

  wr_rm_rf(fx->dir, NULL);
  free(fx);
  return 0;
}

static char *cache_path(const struct fixture *fx) {
  return xasprintf("%s/sha512-"
                   "e7c22b994c59d9cf2b48e549b1e24666636045930d3da7c1acb299d1c3"
                   "b7f931f94aae41edda2c2b207a36e10f8bcb8d45223e54878f5b316e7c"
                   "e3b6bc019629.tgz",
                   fx->dir);
}

/* The cache is keyed by digest; the tarball's URL is unreachable, so a
 * success can only come from the cache. */
static void test_cache(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *file = cache_path(fx);
  char *path = NULL, *note = NULL;
  atomic_bool cancel = false;
  struct wr_npm_dist dist = {.version = "1.0.0",
                             .tarball = "http://127.0.0.1:1/x.tgz"};
  unsigned char d[WR_SHA512_LEN];
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(wr_sri_sha512(HELLO_SRI, dist.sha512, &err), 0);
  assert_int_equal(wr_write_file(file, "hello\n", 6, 0644, &err), 0);
  assert_int_equal(wr_file_sha512(file, d, &err), 0);
  assert_memory_equal(d, dist.sha512, WR_SHA512_LEN);
  assert_int_equal(wr_npm_fetch(&dist, fx->dir, &cancel, &path, &note, &err),
                   0);
  assert_string_equal(path, file);
  assert_string_equal(note, "from the cache");
  free(path);
  free(note);
  path = note = NULL;

  /* A changed copy is removed, and the failed download says why. */
  assert_int_equal(wr_write_file(file, "hellO\n", 6, 0644, &err), 0);
  assert_int_equal(wr_npm_fetch(&dist, fx->dir, &cancel, &path, &note, &err),
                   -1);
  assert_non_null(strstr(err.msg, "http://127.0.0.1:1/x.tgz"));
  assert_int_equal(access(file, F_OK), -1);
  assert_null(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_spec),
      cmocka_unit_test(test_sri),
      cmocka_unit_test(test_pick),
      cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
  };

  curl_global_init(CURL_GLOBAL_DEFAULT);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
