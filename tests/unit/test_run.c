/*
 * Unit tests for `warren run`'s pure parts: its arguments (src/cli/run.c)
 * and the detach keys (src/cli/frames.c): parsing --detach-keys and
 * recognising any sequence in typed input, held back across reads and
 * never forwarded, with partial matches passed on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cli/cli.h"

#define ARGV(...) ((char *[]){(char *)"run", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)) + 1)
#define PARSE(o, err, ...)                                                     \
  wr_cli_run_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (o), (err))

static void test_parse(void **state) {
  struct wr_cli_run_opts o;
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(0, PARSE(&o, &err, "--name", "web"));
  assert_string_equal("web", o.name);
  assert_null(o.cmd);
  assert_int_equal(0, o.ncmd);
  assert_int_equal(0, o.keys.nkeys);

  assert_int_equal(0, PARSE(&o, &err, "-n", "web", "--", "bash", "-l"));
  assert_string_equal("web", o.name);
  assert_int_equal(2, o.ncmd);
  assert_string_equal("bash", o.cmd[0]);
  assert_string_equal("-l", o.cmd[1]);

  /* Options of the command are the command's. */
  assert_int_equal(0, PARSE(&o, &err, "--name=web", "--", "ls", "--name", "x"));
  assert_int_equal(3, o.ncmd);

  assert_int_equal(
      0, PARSE(&o, &err, "--detach-keys", "ctrl-a,d", "--name", "web"));
  assert_int_equal(2, o.keys.nkeys);
  assert_int_equal(0x01, o.keys.keys[0]);
  assert_int_equal('d', o.keys.keys[1]);

  assert_int_equal(0, PARSE(&o, &err, "--help"));
  assert_true(o.help);
}

static void test_parse_errors(void **state) {
  struct wr_cli_run_opts o;
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(-1, PARSE(&o, &err, "--detach-keys", "ctrl-a"));
  assert_non_null(strstr(err.msg, "--name"));
  assert_int_equal(-1, PARSE(&o, &err, "--name", "web", "bash"));
  assert_non_null(strstr(err.msg, "after `--`"));
  assert_int_equal(-1, PARSE(&o, &err, "--name", "web", "--"));
  assert_non_null(strstr(err.msg, "followed by a command"));
  assert_int_equal(-1, PARSE(&o, &err, "--name"));
  assert_int_equal(-1, PARSE(&o, &err, "--bogus", "--name", "web"));
  assert_int_equal(-1,
                   PARSE(&o, &err, "--name", "web", "--detach-keys", "ctrl-1"));
  assert_non_null(strstr(err.msg, "--detach-keys"));
}

static void test_detach_key_specs(void **state) {
  struct wr_cli_detach d;
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(0, wr_cli_parse_detach_keys("ctrl-p,ctrl-q", &d, &err));
  assert_int_equal(2, d.nkeys);
  assert_memory_equal("\x10\x11", d.keys, 2);
  assert_int_equal(0, wr_cli_parse_detach_keys("CTRL-]", &d, &err));
  assert_int_equal(1, d.nkeys);
  assert_int_equal(0x1d, d.keys[0]);
  assert_int_equal(0, wr_cli_parse_detach_keys("ctrl-@,ctrl-_,x", &d, &err));
  assert_memory_equal("\x00\x1fx", d.keys, 3);

  assert_int_equal(-1, wr_cli_parse_detach_keys("", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys("ctrl-p,", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys(",", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys("ctrl-", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys("ctrl-pq", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys("ab", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys(" ", &d, &err));
  assert_int_equal(-1, wr_cli_parse_detach_keys("a,b,c,d,e,f,g,h,i", &d, &err));
  assert_non_null(strstr(err.msg, "at most"));
  assert_int_equal(0, wr_cli_parse_detach_keys("a,b,c,d,e,f,g,h", &d, &err));
}

/* Feed pieces and collect what is forwarded; returns whether it detached. */
static bool feed(struct wr_cli_detach *d, const char *in, size_t len,
                 wr_buf_t *out) {
  return wr_cli_detach_feed(d, in, len, out);
}

static void test_custom_sequence(void **state) {
  struct wr_cli_detach d;
  wr_buf_t out;
  wr_error_t err = {0};

  (void)state;
  wr_buf_init(&out);
  assert_int_equal(0, wr_cli_parse_detach_keys("ctrl-a,d", &d, &err));
  /* A lone ctrl-a is held back, then forwarded with what follows. */
  assert_false(feed(&d, "x\x01", 2, &out));
  assert_int_equal(1, out.len);
  assert_false(feed(&d, "y", 1, &out));
  assert_memory_equal("x\x01y", out.data, 3);
  /* The sequence split across reads detaches; nothing of it goes on. */
  wr_buf_reset(&out);
  assert_false(feed(&d, "z\x01", 2, &out));
  assert_true(feed(&d, "d", 1, &out));
  assert_memory_equal("z", out.data, out.len);

  /* Overlap: "a,a,b" after "a a a b" forwards one "a" and detaches. */
  assert_int_equal(0, wr_cli_parse_detach_keys("a,a,b", &d, &err));
  wr_buf_reset(&out);
  assert_true(feed(&d, "aaab", 4, &out));
  assert_int_equal(1, out.len);
  assert_memory_equal("a", out.data, 1);
  /* "a a c": both held keys are passed on with the c. */
  wr_buf_reset(&out);
  assert_false(feed(&d, "aac", 3, &out));
  assert_memory_equal("aac", out.data, 3);

  /* The default is still Ctrl-P Ctrl-Q. */
  memset(&d, 0, sizeof(d));
  wr_buf_reset(&out);
  assert_true(feed(&d, "\x10\x10\x11", 3, &out));
  assert_memory_equal("\x10", out.data, 1);
  wr_buf_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_detach_key_specs),
      cmocka_unit_test(test_custom_sequence),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
