/*
 * Unit tests for src/daemon/kits.c: the agent kit files. The kits warren
 * ships parse; every field is checked, and a bad one is refused with a
 * message that names the file and the field; the user's directory comes
 * before warren's, a broken user kit is an error (never a silent fall
 * back), and an unknown kit's message lists the kits there are.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <sys/stat.h>

#include "daemon/kits.h"

/* data/kits of the source tree. */
static const char *shipped_dir(void) {
  static char path[4096];
  const char *top = getenv("WR_TOP");
  char *slash;

  if (top != NULL) {
    snprintf(path, sizeof(path), "%s/data/kits", top);
    return path;
  }
  if (access("data/kits", R_OK) == 0)
    return "data/kits";
  snprintf(path, sizeof(path), "%s", __FILE__);
  slash = strstr(path, "tests/unit/");
  if (slash != NULL)
    strcpy(slash, "data/kits");
  return path;
}

/* Parse text as kit "k" from "/x/k.json"; returns the result. */
static int parse(const char *text, struct wr_kit *k, wr_error_t *err) {
  memset(k, 0, sizeof(*k));
  return wr_kit_parse("k", "/x/k.json", text, strlen(text), k, err);
}

/* The text is refused; the message names the file and holds `want`. */
static void refused(const char *text, const char *want) {
  struct wr_kit k;
  wr_error_t err = {0};

  if (parse(text, &k, &err) == 0) {
    wr_kit_free(&k);
    fail_msg("accepted: %s", text);
  }
  assert_int_equal(EINVAL, err.code);
  if (strstr(err.msg, "/x/k.json") == NULL || strstr(err.msg, want) == NULL)
    fail_msg("for %s: message `%s` lacks `%s`", text, err.msg, want);
}

static void test_shipped_kits(void **state) {
  const char *dir = shipped_dir();
  char *dirs[] = {(char *)dir, NULL};
  _cleanup_strv_ char **names = wr_kit_names(dirs);
  struct wr_kit k = {0};
  wr_error_t err = {0};

  (void)state;
  assert_int_equal(3, wr_strv_len(names));
  assert_string_equal("claude", names[0]);
  assert_string_equal("codex", names[1]);
  assert_string_equal("shell", names[2]);

  if (wr_kit_find(dirs, "shell", &k, &err) < 0)
    fail_msg("shell: %s", err.msg);
  assert_string_equal("bash", k.command[0]);
  assert_null(k.npm);
  assert_null(k.secret);
  assert_null(k.env[0]);
  assert_null(k.allow[0]);
  wr_kit_free(&k);

  if (wr_kit_find(dirs, "claude", &k, &err) < 0)
    fail_msg("claude: %s", err.msg);
  assert_string_equal("claude", k.name);
  assert_string_equal("claude", k.command[0]);
  assert_string_equal("--dangerously-skip-permissions", k.command[1]);
  assert_string_equal("@anthropic-ai/claude-code", k.npm);
  assert_string_equal("anthropic", k.secret);
  assert_string_equal("IS_SANDBOX=1", k.env[0]);
  assert_string_equal("api.anthropic.com", k.allow[0]);
  assert_non_null(strstr(k.source, "claude.json"));
  wr_kit_free(&k);

  if (wr_kit_find(dirs, "codex", &k, &err) < 0)
    fail_msg("codex: %s", err.msg);
  assert_string_equal("@openai/codex", k.npm);
  assert_string_equal("openai", k.secret);
  wr_kit_free(&k);
}

/* Only command is required; the rest has empty defaults, never NULL
 * lists. Variables come out sorted. */
static void test_minimal_and_defaults(void **state) {
  struct wr_kit k;
  wr_error_t err = {0};
  _cleanup_json_ json_t *j = NULL;

  (void)state;
  assert_int_equal(0, parse("{\"command\":[\"sh\"]}", &k, &err));
  assert_string_equal("", k.description);
  assert_null(k.npm);
  assert_null(k.secret);
  assert_non_null(k.env);
  assert_null(k.env[0]);
  assert_non_null(k.allow);
  assert_null(k.allow[0]);
  wr_kit_free(&k);

  assert_int_equal(0, parse("{\"command\":[\"sh\",\"-c\",\"echo hi\"],"
                            "\"npm\":null,\"secret\":null,"
                            "\"env\":{\"ZED\":\"1\",\"ALPHA\":\"a=b\"},"
                            "\"allow\":[\"*.example.com\",\"a.example:443\"]}",
                            &k, &err));
  assert_string_equal("ALPHA=a=b", k.env[0]);
  assert_string_equal("ZED=1", k.env[1]);
  assert_string_equal("*.example.com", k.allow[0]);
  j = wr_kit_json(&k);
  assert_string_equal("k", json_string_value(json_object_get(j, "name")));
  assert_true(json_is_null(json_object_get(j, "npm")));
  assert_string_equal("a=b", json_string_value(json_object_get(
                                 json_object_get(j, "env"), "ALPHA")));
  assert_int_equal(3, json_array_size(json_object_get(j, "command")));
  assert_string_equal("/x/k.json",
                      json_string_value(json_object_get(j, "source")));
  wr_kit_free(&k);
}

static void test_structure_errors(void **state) {
  (void)state;
  refused("", "invalid JSON");
  refused("{\"command\":[\"sh\"],}", "line 1");
  refused("[\"sh\"]", "object");
  refused("{\"command\":[\"sh\"],\"comand\":1}", "unknown field `comand`");
  refused("{\"command\":[\"sh\"],\"command\":[\"sh\"]}", "duplicate");
  refused("{}", "missing field `command`");
  refused("{\"command\":\"sh\"}", "`command`");
}

static void test_field_errors(void **state) {
  (void)state;
  refused("{\"command\":[]}", "`command` must name a program");
  refused("{\"command\":[\"\"]}", "`command[0]` is empty");
  refused("{\"command\":[\"sh\",1]}", "`command[1]`");
  refused("{\"command\":[\"sh\"],\"description\":\"a\\nb\"}", "`description`");
  refused("{\"command\":[\"sh\"],\"description\":7}", "`description`");
  refused("{\"command\":[\"sh\"],\"env\":[\"A=1\"]}", "`env`");
  refused("{\"command\":[\"sh\"],\"env\":{\"1A\":\"x\"}}", "`1A`");
  refused("{\"command\":[\"sh\"],\"env\":{\"A-B\":\"x\"}}", "`A-B`");
  refused("{\"command\":[\"sh\"],\"env\":{\"A\":1}}", "`env.A`");
  refused("{\"command\":[\"sh\"],\"env\":{\"HTTPS_PROXY\":\"x\"}}",
          "`env.HTTPS_PROXY`");
  refused("{\"command\":[\"sh\"],\"env\":{\"NODE_EXTRA_CA_CERTS\":\"/x\"}}",
          "warren sets this variable itself");
  refused("{\"command\":[\"sh\"],\"secret\":\"Anthropic\"}", "`secret`");
  refused("{\"command\":[\"sh\"],\"secret\":\"\"}", "`secret`");
  refused("{\"command\":[\"sh\"],\"npm\":\"--global\"}", "`npm`");
  refused("{\"command\":[\"sh\"],\"npm\":true}", "`npm`");
  refused("{\"command\":[\"sh\"],\"allow\":\"a.example\"}", "`allow`");
  refused("{\"command\":[\"sh\"],\"allow\":[\"*\"]}", "`allow[0]`");
  refused("{\"command\":[\"sh\"],\"allow\":[\"ok.example\",\"*.com\"]}",
          "`allow[1]`");
  refused("{\"command\":[\"sh\"],\"allow\":[\"10.0.0.0/8\"]}",
          "a kit may only name hosts");
  refused("{\"command\":[\"sh\"],\"allow\":[\"127.0.0.1\"]}",
          "a kit may only name hosts");
  refused("{\"command\":[\"sh\"],\"allow\":[\"a b\"]}", "`allow[0]`");
}

/* Limits: many arguments, long values. */
static void test_limits(void **state) {
  wr_buf_t b;
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *big = xcalloc(1, 5000);

  (void)state;
  wr_buf_init(&b);
  wr_buf_puts(&b, "{\"command\":[\"sh\"");
  for (int i = 0; i < 70; i++)
    wr_buf_puts(&b, ",\"x\"");
  wr_buf_puts(&b, "]}");
  text = wr_buf_steal(&b, NULL);
  refused(text, "`command`");
  free(text);

  memset(big, 'a', 4999);
  text = xasprintf("{\"command\":[\"sh\",\"%s\"]}", big);
  refused(text, "`command[1]` is longer");
  free(text);
  text = xasprintf("{\"command\":[\"sh\"],\"env\":{\"A\":\"%s\"}}", big);
  refused(text, "`env.A` is longer");
  free(text);
  big[300] = '\0';
  text = xasprintf("{\"command\":[\"sh\"],\"description\":\"%s\"}", big);
  refused(text, "`description` is longer");
}

static void test_npm_names(void **state) {
  (void)state;
  assert_true(wr_kit_npm_valid("@anthropic-ai/claude-code"));
  assert_true(wr_kit_npm_valid("@openai/codex"));
  assert_true(wr_kit_npm_valid("typescript"));
  assert_true(wr_kit_npm_valid("lodash.merge"));
  assert_true(wr_kit_npm_valid("@openai/codex@0.1.2"));
  assert_true(wr_kit_npm_valid("cowsay@latest"));
  assert_false(wr_kit_npm_valid(""));
  assert_false(wr_kit_npm_valid("-g"));
  assert_false(wr_kit_npm_valid("--prefix=/"));
  assert_false(wr_kit_npm_valid("Upper"));
  assert_false(wr_kit_npm_valid(".hidden"));
  assert_false(wr_kit_npm_valid("_x"));
  assert_false(wr_kit_npm_valid("a b"));
  assert_false(wr_kit_npm_valid("@scope"));
  assert_false(wr_kit_npm_valid("@/x"));
  assert_false(wr_kit_npm_valid("@scope/"));
  assert_false(wr_kit_npm_valid("x@"));
  assert_false(wr_kit_npm_valid("x@1 2"));
  assert_false(wr_kit_npm_valid("../x"));
  assert_false(wr_kit_npm_valid("git+ssh://h/x"));
  assert_false(wr_kit_npm_valid("a/b"));
}

/* ---- finding kits in directories ----------------------------------------- */

struct fixture {
  char dir[64];
  char *user, *data;
  char *dirs[3];
};

static int setup(void **state) {
  struct fixture *fx = xcalloc(1, sizeof(*fx));

  strcpy(fx->dir, "/tmp/test_kits.XXXXXX");
  if (mkdtemp(fx->dir) == NULL)
    return -1;
  fx->user = xasprintf("%s/user", fx->dir);
  fx->data = xasprintf("%s/data", fx->dir);
  if (mkdir(fx->user, 0755) < 0 || mkdir(fx->data, 0755) < 0)
    return -1;
  fx->dirs[0] = fx->user;
  fx->dirs[1] = fx->data;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fixture *fx = *state;

  wr_rm_rf(fx->dir, NULL);
  free(fx->user);
  free(fx->data);
  free(fx);
  return 0;
}

static void put(const char *dir, const char *name, const char *text) {
  _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
  wr_error_t err = {0};

  if (wr_write_file(path, text, strlen(text), 0644, &err) < 0)
    fail_msg("write %s: %s", path, err.msg);
}

static void test_user_first(void **state) {
  struct fixture *fx = *state;
  struct wr_kit k = {0};
  wr_error_t err = {0};

  put(fx->data, "shell.json", "{\"command\":[\"bash\"]}");
  put(fx->data, "only-data.json", "{\"command\":[\"d\"]}");
  put(fx->user, "shell.json", "{\"command\":[\"zsh\"]}");
  assert_int_equal(0, wr_kit_find(fx->dirs, "shell", &k, &err));
  assert_string_equal("zsh", k.command[0]);
  assert_non_null(strstr(k.source, "/user/shell.json"));
  wr_kit_free(&k);
  assert_int_equal(0, wr_kit_find(fx->dirs, "only-data", &k, &err));
  assert_string_equal("d", k.command[0]);
  wr_kit_free(&k);

  /* A broken kit of the user's is an error, not warren's kit. */
  put(fx->user, "shell.json", "{\"command\":[\"zsh\"],\"alow\":[]}");
  assert_int_equal(-1, wr_kit_find(fx->dirs, "shell", &k, &err));
  assert_int_equal(EINVAL, err.code);
  assert_non_null(strstr(err.msg, "/user/shell.json"));
  assert_non_null(strstr(err.msg, "`alow`"));
}

static void test_not_found_and_names(void **state) {
  struct fixture *fx = *state;
  _cleanup_strv_ char **names = NULL;
  struct wr_kit k = {0};
  wr_error_t err = {0};

  assert_int_equal(-1, wr_kit_find(fx->dirs, "claude", &k, &err));
  assert_int_equal(ENOENT, err.code);
  assert_non_null(strstr(err.msg, "kits: none"));

  put(fx->data, "shell.json", "{\"command\":[\"bash\"]}");
  put(fx->data, "claude.json", "{\"command\":[\"claude\"]}");
  put(fx->user, "shell.json", "{\"command\":[\"zsh\"]}");
  put(fx->user, "mine.json", "{\"command\":[\"x\"]}");
  put(fx->user, "Bad.json", "{\"command\":[\"x\"]}");
  put(fx->user, "notes.txt", "hello");
  put(fx->user, ".json", "{}");
  names = wr_kit_names(fx->dirs);
  assert_int_equal(3, wr_strv_len(names));
  assert_string_equal("claude", names[0]);
  assert_string_equal("mine", names[1]);
  assert_string_equal("shell", names[2]);

  assert_int_equal(-1, wr_kit_find(fx->dirs, "codex", &k, &err));
  assert_int_equal(ENOENT, err.code);
  assert_non_null(strstr(err.msg, "no agent kit `codex`"));
  assert_non_null(strstr(err.msg, "claude, mine, shell"));

  /* Names that could leave the directory are refused before any open. */
  assert_int_equal(-1, wr_kit_find(fx->dirs, "../data/shell", &k, &err));
  assert_int_equal(EINVAL, err.code);
  assert_int_equal(-1, wr_kit_find(fx->dirs, "Bad", &k, &err));
  assert_int_equal(EINVAL, err.code);
  assert_int_equal(-1, wr_kit_find(fx->dirs, "", &k, &err));
  assert_false(wr_kit_name_valid(".."));
  assert_true(wr_kit_name_valid("my-agent.v2"));
}

/* A kit path that is a directory, or a file too big, is an error that
 * names the kit. */
static void test_unreadable(void **state) {
  struct fixture *fx = *state;
  _cleanup_free_ char *path = xasprintf("%s/odd.json", fx->user);
  _cleanup_free_ char *big = xcalloc(1, 70000);
  struct wr_kit k = {0};
  wr_error_t err = {0};

  assert_int_equal(0, mkdir(path, 0755));
  assert_int_equal(-1, wr_kit_find(fx->dirs, "odd", &k, &err));
  assert_int_equal(EINVAL, err.code);
  assert_non_null(strstr(err.msg, "odd"));

  memset(big, ' ', 69999);
  put(fx->user, "huge.json", big);
  assert_int_equal(-1, wr_kit_find(fx->dirs, "huge", &k, &err));
  assert_int_equal(EINVAL, err.code);
  assert_non_null(strstr(err.msg, "huge"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shipped_kits),
      cmocka_unit_test(test_minimal_and_defaults),
      cmocka_unit_test(test_structure_errors),
      cmocka_unit_test(test_field_errors),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_npm_names),
      cmocka_unit_test_setup_teardown(test_user_first, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_found_and_names, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unreadable, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
