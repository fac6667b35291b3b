/*
 * Unit tests for the Dockerfile subset (src/common/dockerfile.c): what a
 * template's build reads, and the errors a user sees for what it refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/common.h"
#include "common/dockerfile.h"

static int parse(const char *text, struct wr_dockerfile *df, wr_error_t *err) {
  return wr_dockerfile_parse(text, strlen(text), df, err);
}

/* The Vite fixture's Dockerfile, in both command forms. */
static void test_vite(void **state) {
  (void)state;
  struct wr_dockerfile df;
  wr_error_t err;
  const char *text = "# syntax=docker/dockerfile:1\n"
                     "FROM base\n"
                     "WORKDIR /app\n"
                     "COPY package.json ./\n"
                     "RUN npm install\n"
                     "COPY . .\n"
                     "EXPOSE 5173\n"
                     "CMD [\"npx\", \"vite\", \"--host\", \"0.0.0.0\"]\n";

  assert_int_equal(parse(text, &df, &err), 0);
  assert_int_equal(df.n, 7);
  assert_int_equal(df.steps[0].kind, WR_DF_FROM);
  assert_string_equal(df.steps[0].args[0], "base");
  assert_int_equal(df.steps[0].line, 2);
  assert_string_equal(df.steps[1].args[0], "/app");
  assert_int_equal(df.steps[2].kind, WR_DF_COPY);
  assert_string_equal(df.steps[2].args[0], "package.json");
  assert_string_equal(df.steps[2].args[1], "/app/");
  assert_true(df.steps[3].shell);
  assert_string_equal(df.steps[3].args[0], "/bin/sh");
  assert_string_equal(df.steps[3].args[2], "npm install");
  assert_string_equal(df.steps[4].args[1], "/app/");
  assert_int_equal(df.steps[5].port, 5173);
  assert_false(df.steps[6].shell);
  assert_int_equal(wr_strv_len(df.steps[6].args), 4);
  assert_string_equal(df.steps[6].args[3], "0.0.0.0");
  wr_dockerfile_free(&df);
}

static void test_continuations(void **state) {
  (void)state;
  struct wr_dockerfile df;
  wr_error_t err;
  const char *text = "from base\r\n"
                     "RUN apt-get update && \\\n"
                     "# a comment inside\n"
                     "    apt-get install -y jq   \\  \n"
                     "    && true\n"
                     "\n"
                     "Run echo hi\n";

  assert_int_equal(parse(text, &df, &err), 0);
  assert_int_equal(df.n, 3);
  assert_string_equal(df.steps[1].args[2],
                      "apt-get update &&  apt-get install -y jq    && true");
  assert_int_equal(df.steps[1].line, 2);
  assert_int_equal(df.steps[2].line, 7);
  wr_dockerfile_free(&df);
}

static void test_env(void **state) {
  (void)state;
  struct wr_dockerfile df;
  wr_error_t err;
  const char *text = "FROM base\n"
                     "ENV A=1 B=\"two words\" C='x y' D=a\\ b\n"
                     "ENV OLD the rest of it\n";

  assert_int_equal(parse(text, &df, &err), 0);
  assert_int_equal(wr_strv_len(df.steps[1].args), 4);
  assert_string_equal(df.steps[1].args[0], "A=1");
  assert_string_equal(df.steps[1].args[1], "B=two words");
  assert_string_equal(df.steps[1].args[2], "C=x y");
  assert_string_equal(df.steps[1].args[3], "D=a b");
  assert_string_equal(df.steps[2].args[0], "OLD=the rest of it");
  wr_dockerfile_free(&df);
}

static void test_workdir(void **state) {
  (void)state;
  struct wr_dockerfile df;
  wr_error_t err;
  const char *text = "FROM base\nWORKDIR /srv\nWORKDIR app/../web\n"
                     "COPY a b /x/\nCOPY [\"c d\", \"e\"]\n";

  assert_int_equal(parse(text, &df, &err), 0);
  assert_string_equal(df.steps[2].args[0], "/srv/web");
  assert_string_equal(df.steps[3].args[2], "/x/");
  assert_string_equal(df.steps[4].args[0], "c d");
  assert_string_equal(df.steps[4].args[1], "/srv/web/e");
  wr_dockerfile_free(&df);
}

/* Each refusal names its line and says why. */
static void test_refused(void **state) {
  (void)state;
  static const struct {
    const char *text, *says;
  } cases[] = {
      {"", "empty"},
      {"RUN true\n", "line 1: the first instruction must be FROM"},
      {"FROM base\nARG X\n", "line 2: `ARG` is not supported"},
      {"FROM base\nENTRYPOINT [\"x\"]\n", "`ENTRYPOINT` is not supported"},
      {"FROM base AS b\n", "line 1: FROM takes one"},
      {"FROM base\nFROM base\n", "line 2: FROM must come first"},
      {"FROM base\nCOPY https://x.org/a /a\n", "URL"},
      {"FROM base\nCOPY ../secret /a\n", "leaves the build context"},
      {"FROM base\nCOPY --chown=1:1 a /a\n", "flags"},
      {"FROM base\nCOPY a\n", "a source and a destination"},
      {"FROM base\nCOPY a b /file\n", "directory destination"},
      {"FROM base\nCOPY *.js /a/\n", "wildcards"},
      {"FROM base\nRUN --mount=type=cache true\n", "flags"},
      {"FROM base\nRUN [\"a\", 1]\n", "JSON array"},
      {"FROM base\nCMD\n", "needs a command"},
      {"FROM base\nEXPOSE 80 443\n", "one port"},
      {"FROM base\nEXPOSE 53/udp\n", "only TCP"},
      {"FROM base\nEXPOSE 70000\n", "not a port"},
      {"FROM base\nENV A=\"x\n", "unclosed"},
      {"FROM base\nENV 1A=x\n", "not a variable name"},
      {"FROM base\nENV A\n", "needs a value"},
      {"FROM base\nWORKDIR $HOME\n", "not substituted"},
      {"FROM base\nRUN \xff\n", "UTF-8"},
  };

  for (size_t i = 0; i < WR_ARRAY_SIZE(cases); i++) {
    struct wr_dockerfile df;
    wr_error_t err = {0};
    if (parse(cases[i].text, &df, &err) == 0)
      fail_msg("accepted: %s", cases[i].text);
    if (strstr(err.msg, cases[i].says) == NULL)
      fail_msg("%s: said `%s`, not `%s`", cases[i].text, err.msg,
               cases[i].says);
    assert_int_equal(df.n, 0);
  }
}

static void test_bounds(void **state) {
  (void)state;
  struct wr_dockerfile df;
  wr_error_t err;
  wr_buf_t b;

  wr_buf_init(&b);
  wr_buf_puts(&b, "FROM base\n");
  for (int i = 0; i < WR_DF_STEPS_MAX + 1; i++)
    wr_buf_puts(&b, "RUN true\n");
  assert_int_equal(parse(b.data, &df, &err), -1);
  assert_non_null(strstr(err.msg, "more than"));
  wr_buf_reset(&b);
  wr_buf_puts(&b, "FROM base\nRUN ");
  for (unsigned i = 0; i < WR_DF_LINE_MAX / 2; i++)
    wr_buf_puts(&b, "a \\\n");
  assert_int_equal(parse(b.data, &df, &err), -1);
  assert_non_null(strstr(err.msg, "longer than"));
  wr_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vite),    cmocka_unit_test(test_continuations),
      cmocka_unit_test(test_env),     cmocka_unit_test(test_workdir),
      cmocka_unit_test(test_refused), cmocka_unit_test(test_bounds),
  };

  if (getenv("WR_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("WR_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
