/*
 * Unit tests for the parts of src/projects/ that need no daemon: the
 * parsers of host git's output about a mirror whose commits a sandbox
 * made (names and subjects that are not UTF-8 are kept, anything that is
 * not what git prints is refused), project names, and the names derived
 * from them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "projects/projects.h"

#define H1 "1111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222"

static void test_log_numbers_versions_newest_first(void **state) {
  static const char log[] = H2 "\0ann\0a@x\0"
                               "1700000100\0Second\0" H1 "\0bob\0b@x\0"
                               "1700000000\0First\0";
  json_t *out = NULL;
  wr_error_t err;

  (void)state;
  assert_int_equal(wr_mirror_log_parse(log, sizeof(log) - 1, 2, 0, &out, &err),
                   0);
  assert_int_equal(json_array_size(out), 2);
  assert_int_equal(
      json_integer_value(json_object_get(json_array_get(out, 0), "version")),
      2);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(out, 1), "subject")),
      "First");
  assert_int_equal(
      json_integer_value(json_object_get(json_array_get(out, 1), "time")),
      1700000000);
  json_decref(out);
  assert_int_equal(wr_mirror_log_parse(log, sizeof(log) - 1, 2, 1, &out, &err),
                   0);
  assert_int_equal(json_array_size(out), 1);
  json_decref(out);
  /* Cut short, more commits than counted, no commit hash. */
  assert_int_equal(wr_mirror_log_parse(log, sizeof(log) - 4, 2, 0, &out, &err),
                   -1);
  assert_int_equal(wr_mirror_log_parse(log, sizeof(log) - 1, 1, 0, &out, &err),
                   -1);
  assert_int_equal(wr_mirror_log_parse("x\0a\0b\0"
                                       "1\0s\0",
                                       10, 1, 0, &out, &err),
                   -1);
}

static void test_log_keeps_text_that_is_not_utf8(void **state) {
  static const char log[] = H1 "\0\xff\xfe name\0a@x\0"
                               "1\0sub \xc3(\0";
  json_t *out = NULL;
  wr_error_t err;
  const char *author;

  (void)state;
  assert_int_equal(wr_mirror_log_parse(log, sizeof(log) - 1, 1, 0, &out, &err),
                   0);
  author = json_string_value(json_object_get(json_array_get(out, 0), "author"));
  assert_non_null(author);
  assert_non_null(strstr(author, " name"));
  json_decref(out);
}

static void test_names_with_renames(void **state) {
  static const char names[] = "M\0a.txt\0R100\0old\0new\0A\0dir/b\0";
  json_t *out = NULL;
  wr_error_t err;

  (void)state;
  assert_int_equal(wr_mirror_names_parse(names, sizeof(names) - 1, &out, &err),
                   0);
  assert_int_equal(json_array_size(out), 3);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(out, 1), "path")),
      "new");
  json_decref(out);
  assert_int_equal(wr_mirror_names_parse("M\0a", 3, &out, &err), -1);
  assert_int_equal(wr_mirror_names_parse("\0a\0", 3, &out, &err), -1);
  assert_int_equal(wr_mirror_names_parse("", 0, &out, &err), 0);
  assert_int_equal(json_array_size(out), 0);
  json_decref(out);
}

static void test_names_and_paths(void **state) {
  char *s;

  (void)state;
  assert_true(wr_project_name_valid("shop"));
  assert_true(wr_project_name_valid("p-07"));
  assert_false(wr_project_name_valid("Shop"));
  assert_false(wr_project_name_valid("../x"));
  assert_false(wr_project_name_valid(""));
  assert_false(
      wr_project_name_valid("a-name-that-is-far-too-long-for-a-project-x123"
                            "4567"));
  s = wr_project_sandbox_name("shop");
  assert_string_equal(s, "project-shop");
  free(s);
  s = wr_project_mirror_path("/var/lib/warren", "shop");
  assert_string_equal(s, "/var/lib/warren/projects/shop.git");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_numbers_versions_newest_first),
      cmocka_unit_test(test_log_keeps_text_that_is_not_utf8),
      cmocka_unit_test(test_names_with_renames),
      cmocka_unit_test(test_names_and_paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
