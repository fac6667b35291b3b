/*
 * Unit tests for src/daemon/sources.c: reading the host's apt sources
 * (one-line and deb822), keeping one release's entries and writing them
 * in deb822 form; the codename and package-name checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <sys/stat.h>

#include "daemon/images_internal.h"

/* A fake /etc/apt per test. */
struct fixture {
  char dir[64];
};

static int setup(void **state) {
  struct fixture *fx = xcalloc(1, sizeof(*fx));
  _cleanup_free_ char *d = NULL;

  strcpy(fx->dir, "/tmp/test_sources.XXXXXX");
  if (mkdtemp(fx->dir) == NULL)
    return -1;
  d = xasprintf("%s/sources.list.d", fx->dir);
  if (mkdir(d, 0755) < 0)
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

static void put_file(const struct fixture *fx, const char *name,
                     const char *text) {
  _cleanup_free_ char *path = xasprintf("%s/%s", fx->dir, name);
  wr_error_t err = {0};

  if (wr_write_file(path, text, strlen(text), 0644, &err) < 0)
    fail_msg("write %s: %s", name, err.msg);
}

/* Collect for bookworm and compare the whole output. */
static void expect_sources(const struct fixture *fx, int count,
                           const char *want) {
  wr_buf_t out;
  wr_error_t err = {0};
  int n;

  wr_buf_init(&out);
  n = wr_apt_sources_collect(fx->dir, "bookworm", &out, &err);
  if (n < 0)
    fail_msg("collect: %s", err.msg);
  assert_int_equal(n, count);
  assert_string_equal(out.data, want);
  wr_buf_free(&out);
}

static void test_one_line(void **state) {
  struct fixture *fx = *state;

  put_file(fx, "sources.list",
           "# the release\n"
           "deb file:/srv/mirror/debian bookworm main contrib # note\n"
           "deb-src file:/srv/mirror/debian bookworm main\n"
           "  deb   file:/srv/mirror/debian   bookworm-updates  main\n"
           "#deb file:/srv/mirror/debian bookworm-backports main\n"
           "deb file:/srv/mirror/debian trixie main\n"
           "\n");
  expect_sources(fx, 2,
                 "Types: deb\n"
                 "URIs: file:/srv/mirror/debian\n"
                 "Suites: bookworm\n"
                 "Components: main contrib\n"
                 "\n"
                 "Types: deb\n"
                 "URIs: file:/srv/mirror/debian\n"
                 "Suites: bookworm-updates\n"
                 "Components: main\n");
}

static void test_one_line_options(void **state) {
  struct fixture *fx = *state;

  put_file(fx, "sources.list",
           "deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/a.gpg] "
           "http://127.0.0.1:9/debian bookworm main\n"
           "deb [ trusted=yes arch+=i386 lang-=de frobnicate=1 ] "
           "http://127.0.0.1:9/security bookworm-security main\n"
           "deb[check-valid-until=no] file:/srv/x bookworm main\n"
           "deb [arch=amd64 file:/srv/unclosed bookworm main\n");
  expect_sources(fx, 3,
                 "Types: deb\n"
                 "URIs: http://127.0.0.1:9/debian\n"
                 "Suites: bookworm\n"
                 "Components: main\n"
                 "Architectures: amd64 arm64\n"
                 "Signed-By: /usr/share/keyrings/a.gpg\n"
                 "\n"
                 "Types: deb\n"
                 "URIs: http://127.0.0.1:9/security\n"
                 "Suites: bookworm-security\n"
                 "Components: main\n"
                 "Trusted: yes\n"
                 "Architectures-Add: i386\n"
                 "Languages-Remove: de\n"
                 "\n"
                 "Types: deb\n"
                 "URIs: file:/srv/x\n"
                 "Suites: bookworm\n"
                 "Components: main\n"
                 "Check-Valid-Until: no\n");
}

static void test_deb822(void **state) {
  struct fixture *fx = *state;

  put_file(fx, "sources.list.d/debian.sources",
           "Types: deb deb-src\n"
           "# a comment inside the stanza\n"
           "URIs: http://127.0.0.1:9/debian\n"
           "Suites: bookworm bookworm-updates trixie\n"
           "Components: main\n"
           "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
           "\n"
           "# a disabled stanza\n"
           "Types: deb\n"
           "URIs: http://127.0.0.1:9/off\n"
           "Suites: bookworm\n"
           "Components: main\n"
           "Enabled: no\n"
           "\n"
           "Types: deb-src\n"
           "URIs: http://127.0.0.1:9/src\n"
           "Suites: bookworm\n"
           "Components: main\n"
           "\n\n"
           "types: deb\n"
           "uris: http://127.0.0.1:9/a\n"
           "  http://127.0.0.1:9/b\n"
           "suites: bookworm-security\n"
           "components: main non-free-firmware\n"
           "Architectures: amd64\n"
           "Signed-By:\n"
           " -----BEGIN PGP PUBLIC KEY BLOCK-----\n"
           " .\n"
           " mQINBFake\n"
           " -----END PGP PUBLIC KEY BLOCK-----\n");
  expect_sources(fx, 2,
                 "Types: deb\n"
                 "URIs: http://127.0.0.1:9/debian\n"
                 "Suites: bookworm bookworm-updates\n"
                 "Components: main\n"
                 "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
                 "\n"
                 "Types: deb\n"
                 "URIs: http://127.0.0.1:9/a http://127.0.0.1:9/b\n"
                 "Suites: bookworm-security\n"
                 "Components: main non-free-firmware\n"
                 "Architectures: amd64\n"
                 "Signed-By:\n"
                 " -----BEGIN PGP PUBLIC KEY BLOCK-----\n"
                 " .\n"
                 " mQINBFake\n"
                 " -----END PGP PUBLIC KEY BLOCK-----\n");
}

/* Only [A-Za-z0-9_.-]+ names ending in .list or .sources are read, in
 * name order, after sources.list. */
static void test_files_and_order(void **state) {
  struct fixture *fx = *state;

  put_file(fx, "sources.list", "deb file:/srv/0 bookworm main\n");
  put_file(fx, "sources.list.d/b.list", "deb file:/srv/2 bookworm main\n");
  put_file(fx, "sources.list.d/a.sources",
           "Types: deb\nURIs: file:/srv/1\nSuites: bookworm\n"
           "Components: main\n");
  put_file(fx, "sources.list.d/c.list.disabled",
           "deb file:/srv/off bookworm main\n");
  put_file(fx, "sources.list.d/d.sources.disabled-by-farm",
           "Types: deb\nURIs: file:/srv/off\nSuites: bookworm\n"
           "Components: main\n");
  put_file(fx, "sources.list.d/e.list.save",
           "deb file:/srv/off bookworm main\n");
  put_file(fx, "sources.list.d/bad name.list",
           "deb file:/srv/off bookworm main\n");
  expect_sources(fx, 3,
                 "Types: deb\nURIs: file:/srv/0\nSuites: bookworm\n"
                 "Components: main\n"
                 "\n"
                 "Types: deb\nURIs: file:/srv/1\nSuites: bookworm\n"
                 "Components: main\n"
                 "\n"
                 "Types: deb\nURIs: file:/srv/2\nSuites: bookworm\n"
                 "Components: main\n");
}

/* The codename itself and codename-SOMETHING; nothing else. */
static void test_suite_filter(void **state) {
  struct fixture *fx = *state;

  put_file(fx, "sources.list.d/x.list",
           "deb file:/srv/a cloud-sdk-bookworm main\n"
           "deb file:/srv/a nodistro main\n"
           "deb file:/srv/a bookwormish main\n"
           "deb file:/srv/a bookworm- main\n"
           "deb file:/srv/a stable main\n"
           "deb file:/srv/a ./ \n"
           "deb file:/srv/a bookworm\n"
           "deb file:/srv/a bookworm-backports main\n");
  expect_sources(fx, 1,
                 "Types: deb\nURIs: file:/srv/a\n"
                 "Suites: bookworm-backports\nComponents: main\n");
}

static void test_none_found(void **state) {
  struct fixture *fx = *state;
  wr_buf_t out;
  wr_error_t err = {0};

  put_file(fx, "sources.list.d/node.sources",
           "Types: deb\nURIs: file:/srv/n\nSuites: nodistro\n"
           "Components: main\n");
  wr_buf_init(&out);
  assert_int_equal(wr_apt_sources_collect(fx->dir, "bookworm", &out, &err), -1);
  assert_int_equal(err.code, ENOENT);
  assert_non_null(strstr(err.msg, "no apt source for bookworm found in"));
  assert_non_null(strstr(err.msg, "host's apt sources"));
  assert_int_equal(out.len, 0);
  wr_buf_free(&out);
}

/* An /etc/apt without sources.list or sources.list.d has no sources. */
static void test_missing_files(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *d = xasprintf("%s/sources.list.d", fx->dir);
  wr_buf_t out;
  wr_error_t err = {0};

  rmdir(d);
  wr_buf_init(&out);
  assert_int_equal(wr_apt_sources_collect(fx->dir, "bookworm", &out, &err), -1);
  assert_int_equal(err.code, ENOENT);
  wr_buf_free(&out);
}

static void test_codename(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *path = xasprintf("%s/os-release", fx->dir);
  wr_error_t err = {0};
  char *name = NULL;

  put_file(fx, "os-release",
           "NAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n"
           "VERSION_CODENAME=bookworm\nID=debian\n");
  assert_int_equal(wr_os_codename(path, &name, &err), 0);
  assert_string_equal(name, "bookworm");
  free(name);
  put_file(fx, "os-release", "VERSION_CODENAME=\"trixie\"\n");
  assert_int_equal(wr_os_codename(path, &name, &err), 0);
  assert_string_equal(name, "trixie");
  free(name);
  put_file(fx, "os-release", "VERSION_CODENAME=--include=x\n");
  assert_int_equal(wr_os_codename(path, &name, &err), -1);
  put_file(fx, "os-release", "ID=debian\n");
  assert_int_equal(wr_os_codename(path, &name, &err), -1);
  assert_non_null(strstr(err.msg, "VERSION_CODENAME"));
}

/* The balanced network preset names the mirrors' hosts: http(s) only,
 * each once, without user info or port; other releases' are left out. */
static void test_source_hosts(void **state) {
  struct fixture *fx = *state;
  char **hosts = NULL;
  wr_error_t err = {0};

  put_file(fx, "sources.list",
           "deb http://mirror.example/debian bookworm main\n"
           "deb https://user:pw@secure.example:8443/debian-security "
           "bookworm-security main\n"
           "deb http://mirror.example/debian bookworm-updates main\n"
           "deb http://old.example/debian bullseye main\n"
           "deb file:/srv/repo bookworm main\n");
  put_file(fx, "sources.list.d/v6.sources",
           "Types: deb\nURIs: http://[2001:db8::5]/debian\n"
           "Suites: bookworm\nComponents: main\n");
  if (wr_apt_source_hosts(fx->dir, "bookworm", &hosts, &err) < 0)
    fail_msg("hosts: %s", err.msg);
  assert_int_equal(wr_strv_len(hosts), 3);
  assert_string_equal(hosts[0], "mirror.example:80");
  assert_string_equal(hosts[1], "secure.example:8443");
  assert_string_equal(hosts[2], "[2001:db8::5]:80");
  wr_strv_free(hosts);
}

static void test_package_names(void **state) {
  (void)state;
  assert_true(wr_deb_package_valid("git"));
  assert_true(wr_deb_package_valid("g++"));
  assert_true(wr_deb_package_valid("libstdc++6"));
  assert_true(wr_deb_package_valid("python3.11-venv"));
  assert_true(wr_deb_package_valid("0ad"));
  assert_false(wr_deb_package_valid(""));
  assert_false(wr_deb_package_valid("a"));
  assert_false(wr_deb_package_valid("--variant=x"));
  assert_false(wr_deb_package_valid("-x"));
  assert_false(wr_deb_package_valid(".x"));
  assert_false(wr_deb_package_valid("Git"));
  assert_false(wr_deb_package_valid("git,curl"));
  assert_false(wr_deb_package_valid("git curl"));
  assert_false(wr_deb_package_valid("libc6:i386"));
  assert_false(wr_deb_package_valid("a/b"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_one_line, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_line_options, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deb822, setup, teardown),
      cmocka_unit_test_setup_teardown(test_files_and_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_suite_filter, setup, teardown),
      cmocka_unit_test_setup_teardown(test_none_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_codename, setup, teardown),
      cmocka_unit_test_setup_teardown(test_source_hosts, setup, teardown),
      cmocka_unit_test(test_package_names),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
