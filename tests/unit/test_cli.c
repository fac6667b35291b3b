/* Unit tests for src/cli: the parts that need no daemon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli.h"

/* argv from a literal list; getopt permutes it, so it must be writable. */
#define ARGV(...) ((char *[]){__VA_ARGS__, NULL})
static int ARGC(char **v) {
  int n = 0;

  while (v[n] != NULL)
    n++;
  return n;
}

/* ---- dispatch and global options ----------------------------------------- */

static int ran;

static int fake_run(const struct wr_cli_ctx *ctx, int argc, char **argv) {
  (void)ctx;
  (void)argv;
  ran = argc;
  return 7;
}

static void test_dispatch(void **state) {
  static const struct wr_cli_command table[] = {
      {"one", "first", fake_run},
      {"two", "second", fake_run},
  };
  struct wr_cli_ctx ctx = {"unix:/nowhere", NULL};
  char *known[] = {(char *)"two", (char *)"x", NULL};
  char *unknown[] = {(char *)"three", NULL};
  size_t n;
  (void)state;

  assert_ptr_equal(wr_cli_find_command(table, 2, "one"), &table[0]);
  assert_null(wr_cli_find_command(table, 2, "on"));
  assert_int_equal(wr_cli_dispatch(&ctx, table, 2, NULL, 2, known), 7);
  assert_int_equal(ran, 2);
  assert_int_equal(wr_cli_dispatch(&ctx, table, 2, NULL, 1, unknown), 2);
  assert_int_equal(wr_cli_dispatch(&ctx, table, 2, "image", 0, unknown), 2);
  /* The real table: every command can be found and has a summary. */
  const struct wr_cli_command *cmds = wr_cli_commands(&n);
  assert_true(n >= 19);
  for (size_t i = 0; i < n; i++) {
    assert_ptr_equal(wr_cli_find_command(cmds, n, cmds[i].name), &cmds[i]);
    assert_true(strlen(cmds[i].summary) > 0);
  }
  assert_non_null(wr_cli_find_command(cmds, n, "exec"));
  assert_null(wr_cli_find_command(cmds, n, "bogus"));
}

static void test_main_usage_errors(void **state) {
  char **bad = ARGV("warren", "frobnicate");
  char **noopt = ARGV("warren", "--bogus");
  char **none = ARGV("warren");
  char **help = ARGV("warren", "exec", "--help");
  (void)state;

  assert_int_equal(wr_cli_main(ARGC(bad), bad), 2);
  assert_int_equal(wr_cli_main(ARGC(noopt), noopt), 2);
  assert_int_equal(wr_cli_main(ARGC(none), none), 2);
  assert_int_equal(wr_cli_main(ARGC(help), help), 0);
}

static void test_global_options(void **state) {
  struct wr_cli_ctx ctx;
  wr_error_t err = {0};
  bool help, version;
  char **a =
      ARGV("warren", "--host", "tcp://h:1", "--api-key", "k", "ls", "--json");
  char **b = ARGV("warren", "ls", "--host", "x");
  char **c = ARGV("warren", "--host");
  (void)state;

  assert_int_equal(wr_cli_parse_global(ARGC(a), a, &ctx, &help, &version, &err),
                   5);
  assert_string_equal(ctx.host, "tcp://h:1");
  assert_string_equal(ctx.api_key, "k");
  assert_string_equal(a[5], "ls");
  assert_false(help);

  /* Options after the command belong to the command. */
  setenv("WARREN_HOST", "unix:/tmp/w.sock", 1);
  unsetenv("WARREN_API_KEY");
  assert_int_equal(wr_cli_parse_global(ARGC(b), b, &ctx, &help, &version, &err),
                   1);
  assert_string_equal(ctx.host, "unix:/tmp/w.sock");
  assert_null(ctx.api_key);
  unsetenv("WARREN_HOST");
  assert_int_equal(wr_cli_parse_global(ARGC(b), b, &ctx, &help, &version, &err),
                   1);
  assert_string_equal(ctx.host, WR_CLI_DEFAULT_HOST);

  assert_int_equal(wr_cli_parse_global(ARGC(c), c, &ctx, &help, &version, &err),
                   -1);
  assert_string_equal(err.msg, "option `--host` needs a value");
}

/* ---- create -------------------------------------------------------------- */

static void test_create_parse(void **state) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char **a = ARGV("create", "--name", "web", "--image", "py", "--memory", "1g",
                  "--cpus", "1.5", "--pids", "512", "--env", "A=1", "--env",
                  "B=x=y", "--label", "team=infra", "--workdir", "/src",
                  "--no-start", "--json");
  _cleanup_json_ json_t *body = NULL;
  _cleanup_free_ char *text = NULL;
  (void)state;

  assert_int_equal(wr_cli_create_parse(ARGC(a), a, &o, &err), 0);
  assert_string_equal(o.name, "web");
  assert_string_equal(o.image, "py");
  assert_true(o.has_memory);
  assert_int_equal(o.memory, 1ULL << 30);
  assert_true(o.cpus > 1.49 && o.cpus < 1.51);
  assert_int_equal(o.pids, 512);
  assert_int_equal(wr_strv_len(o.env), 2);
  assert_true(o.no_start && o.json);
  body = wr_cli_create_body(&o);
  text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text,
                      "{\"cpus\":1.5,\"env\":{\"A\":\"1\",\"B\":\"x=y\"},"
                      "\"image\":\"py\",\"labels\":{\"team\":\"infra\"},"
                      "\"memory\":1073741824,\"name\":\"web\",\"pids\":512,"
                      "\"start\":false,\"workdir\":\"/src\"}");
  wr_cli_create_opts_free(&o);
}

/* From a template: --no-wait and --ready-timeout go in the body. */
static void test_create_template_wait(void **state) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char **a =
      ARGV("create", "--image", "vite", "--no-wait", "--ready-timeout", "1m");
  _cleanup_json_ json_t *body = NULL;
  _cleanup_free_ char *text = NULL;
  (void)state;

  assert_int_equal(wr_cli_create_parse(ARGC(a), a, &o, &err), 0);
  body = wr_cli_create_body(&o);
  text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"image\":\"vite\",\"ready_timeout\":60.0,"
                            "\"wait\":false}");
  wr_cli_create_opts_free(&o);
}

static void expect_create_error(const char *opt, const char *val,
                                const char *needle) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char *argv[] = {(char *)"create", (char *)opt, (char *)val, NULL};
  int argc = val ? 3 : 2;

  argv[argc] = NULL;
  assert_int_equal(wr_cli_create_parse(argc, argv, &o, &err), -1);
  if (strstr(err.msg, needle) == NULL)
    fail_msg("`%s`: expected `%s` in `%s`", opt, needle, err.msg);
  wr_cli_create_opts_free(&o);
}

static void test_create_errors(void **state) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char **empty = ARGV("create");
  _cleanup_json_ json_t *body = NULL;
  (void)state;

  expect_create_error("--env", "NOEQUALS", "expected KEY=VALUE");
  expect_create_error("--env", "1A=x", "not a variable name");
  expect_create_error("--env", "=x", "the key is empty");
  expect_create_error("--label", "a b=c", "visible characters");
  expect_create_error("--memory", "lots", "--memory: invalid size");
  expect_create_error("--cpus", "0", "invalid CPU count");
  expect_create_error("--cpus", "1x", "invalid CPU count");
  expect_create_error("--pids", "-3", "--pids");
  expect_create_error("--name", "Bad_Name", "invalid name");
  expect_create_error("--clone", NULL, "--clone needs a PATH");
  expect_create_error("--name", NULL, "needs a value");
  expect_create_error("--nope", NULL, "unknown option `--nope`");
  expect_create_error("Claude", NULL, "invalid agent `Claude`");
  expect_create_error("claude", "/nonexistent/dir", "workspace");
  expect_create_error("--ready-timeout", "0", "more than 0");
  expect_create_error("--ready-timeout", "soon", "--ready-timeout");

  assert_int_equal(wr_cli_create_parse(ARGC(empty), empty, &o, &err), 0);
  body = wr_cli_create_body(&o);
  assert_int_equal(json_object_size(body), 0);
}

/* [AGENT] [PATH]: one argument is PATH when it is a directory. */
static void test_create_workspace(void **state) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char **both = ARGV("create", "--name", "p", "claude", "/tmp", "--clone");
  char **dir = ARGV("create", ".");
  char **agent = ARGV("create", "codex");
  char **three = ARGV("create", "shell", "/tmp", "x");
  _cleanup_json_ json_t *body = NULL;
  _cleanup_free_ char *cwd = getcwd(NULL, 0);
  (void)state;

  assert_int_equal(wr_cli_create_parse(ARGC(both), both, &o, &err), 0);
  assert_string_equal(o.agent, "claude");
  assert_string_equal(o.path, "/tmp");
  body = wr_cli_create_body(&o);
  assert_string_equal(json_string_value(json_object_get(body, "agent")),
                      "claude");
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(body, "workspace"), "mode")),
                      "clone");
  wr_cli_create_opts_free(&o);

  assert_int_equal(wr_cli_create_parse(ARGC(dir), dir, &o, &err), 0);
  assert_null(o.agent);
  assert_string_equal(o.path, cwd);
  wr_cli_create_opts_free(&o);

  assert_int_equal(wr_cli_create_parse(ARGC(agent), agent, &o, &err), 0);
  assert_string_equal(o.agent, "codex");
  assert_null(o.path);
  wr_cli_create_opts_free(&o);

  assert_int_equal(wr_cli_create_parse(ARGC(three), three, &o, &err), -1);
  assert_non_null(strstr(err.msg, "unexpected argument `x`"));
  wr_cli_create_opts_free(&o);
}

/* Warm pools: --no-pool and --restart-start are sent only when given. */
static void test_create_pool_options(void **state) {
  struct wr_cli_create_opts o = {0};
  wr_error_t err = {0};
  char **a = ARGV("create", "--image", "vite", "--no-pool", "--restart-start");
  _cleanup_json_ json_t *body = NULL;
  (void)state;

  assert_int_equal(wr_cli_create_parse(ARGC(a), a, &o, &err), 0);
  body = wr_cli_create_body(&o);
  assert_true(json_is_false(json_object_get(body, "pool")));
  assert_true(json_is_true(json_object_get(body, "restart_start")));
  wr_cli_create_opts_free(&o);
}

/* ---- ls ------------------------------------------------------------------ */

static void test_ls_parse(void **state) {
  struct wr_cli_ls_opts o = {0};
  wr_error_t err = {0};
  char **a = ARGV("ls", "-q", "--label", "team=a b", "--label", "x=1",
                  "--state", "running");
  char **bad = ARGV("ls", "--state", "sleeping");
  char **extra = ARGV("ls", "web");
  _cleanup_free_ char *path = NULL;
  (void)state;

  assert_int_equal(wr_cli_ls_parse(ARGC(a), a, &o, &err), 0);
  assert_true(o.quiet);
  assert_false(o.json);
  path = wr_cli_ls_path(&o);
  assert_string_equal(path, "/v1/sandboxes?label=team%3Da%20b&label=x%3D1"
                            "&state=running");
  wr_strv_free(o.labels);
  {
    char **all = ARGV("ls", "--all");
    char **all_state = ARGV("ls", "--state", "paused", "--all");
    _cleanup_free_ char *p1 = NULL, *p2 = NULL;
    assert_int_equal(wr_cli_ls_parse(ARGC(all), all, &o, &err), 0);
    p1 = wr_cli_ls_path(&o);
    assert_string_equal(p1, "/v1/sandboxes?all=1");
    assert_int_equal(wr_cli_ls_parse(ARGC(all_state), all_state, &o, &err), 0);
    p2 = wr_cli_ls_path(&o);
    assert_string_equal(p2, "/v1/sandboxes?state=paused&all=1");
  }
  assert_int_equal(wr_cli_ls_parse(ARGC(bad), bad, &o, &err), -1);
  assert_non_null(strstr(err.msg, "invalid --state"));
  assert_int_equal(wr_cli_ls_parse(ARGC(extra), extra, &o, &err), -1);
  assert_non_null(strstr(err.msg, "unexpected argument `web`"));
}

/* ---- exec ---------------------------------------------------------------- */

static void test_exec_parse(void **state) {
  struct wr_cli_exec_opts o = {0};
  wr_error_t err = {0};
  char **a = ARGV("exec", "-it", "-e", "A=1", "--env", "B=2", "-w", "/src",
                  "-u", "1000:1000", "--timeout", "500ms", "box", "--", "ls",
                  "-l", "--", "x");
  char **b = ARGV("exec", "box", "ls", "-la", "--color");
  char **c = ARGV("exec", "-d", "--tag", "srv", "box", "--", "-weird");
  _cleanup_json_ json_t *body = NULL;
  _cleanup_free_ char *text = NULL;
  (void)state;

  assert_int_equal(wr_cli_exec_parse(ARGC(a), a, &o, &err), 0);
  assert_true(o.interactive && o.tty && !o.detach);
  assert_string_equal(o.sandbox, "box");
  assert_int_equal(o.ncmd, 4);
  assert_string_equal(o.cmd[0], "ls");
  assert_string_equal(o.cmd[2], "--");
  assert_string_equal(o.cwd, "/src");
  assert_string_equal(o.user, "1000:1000");
  assert_int_equal(o.timeout_ms, 500);
  body = wr_cli_exec_body(&o, 40, 120);
  text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text,
                      "{\"cmd\":[\"ls\",\"-l\",\"--\",\"x\"],\"cols\":120,"
                      "\"cwd\":\"/src\",\"env\":{\"A\":\"1\",\"B\":\"2\"},"
                      "\"rows\":40,\"timeout\":0.5,\"tty\":true,"
                      "\"user\":\"1000:1000\"}");
  wr_cli_exec_opts_free(&o);

  /* Without "--", everything after NAME is the command, options too. */
  assert_int_equal(wr_cli_exec_parse(ARGC(b), b, &o, &err), 0);
  assert_string_equal(o.sandbox, "box");
  assert_int_equal(o.ncmd, 3);
  assert_string_equal(o.cmd[1], "-la");
  assert_false(o.interactive);
  wr_cli_exec_opts_free(&o);

  assert_int_equal(wr_cli_exec_parse(ARGC(c), c, &o, &err), 0);
  assert_true(o.detach);
  assert_string_equal(o.tag, "srv");
  assert_string_equal(o.cmd[0], "-weird");
  json_decref(body);
  free(text);
  body = wr_cli_exec_body(&o, 0, 0);
  text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"background\":true,\"cmd\":[\"-weird\"],"
                            "\"tag\":\"srv\"}");
  wr_cli_exec_opts_free(&o);
}

static void expect_exec_error(char **argv, const char *needle) {
  struct wr_cli_exec_opts o = {0};
  wr_error_t err = {0};

  assert_int_equal(wr_cli_exec_parse(ARGC(argv), argv, &o, &err), -1);
  if (strstr(err.msg, needle) == NULL)
    fail_msg("expected `%s` in `%s`", needle, err.msg);
  wr_cli_exec_opts_free(&o);
}

static void test_exec_errors(void **state) {
  struct wr_cli_exec_opts o = {0};
  wr_error_t err = {0};
  char **help = ARGV("exec", "--help");
  (void)state;

  expect_exec_error(ARGV("exec"), "expected a sandbox name");
  expect_exec_error(ARGV("exec", "box"), "no command given");
  expect_exec_error(ARGV("exec", "box", "--"), "no command given");
  expect_exec_error(ARGV("exec", "-e", "X", "box", "true"), "KEY=VALUE");
  expect_exec_error(ARGV("exec", "--timeout", "soon", "box", "true"),
                    "--timeout: invalid duration");
  expect_exec_error(ARGV("exec", "--timeout", "0", "box", "true"), "above 0");
  expect_exec_error(ARGV("exec", "--tag", "t", "box", "true"), "add -d");
  expect_exec_error(ARGV("exec", "-d", "-i", "box", "true"), "cannot be");
  expect_exec_error(ARGV("exec", "-x", "box", "true"), "unknown option `-x`");
  expect_exec_error(ARGV("exec", "box", "echo", "\xff"), "not valid UTF-8");
  expect_exec_error(ARGV("exec", "-e", "A=\xc3", "box", "true"),
                    "--env is not valid UTF-8");
  assert_int_equal(wr_cli_exec_parse(ARGC(help), help, &o, &err), 0);
  assert_true(o.help);
}

static void test_exec_timeout_and_exit(void **state) {
  struct wr_cli_exec_opts o = {0};
  wr_error_t err = {0};
  char **a = ARGV("exec", "--timeout", "2m", "box", "sleep", "1000");
  char **b = ARGV("exec", "--timeout", "30", "box", "true");
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *exit1 =
      json_pack("{s:i,s:b}", "exit_code", 3, "timed_out", 0);
  _cleanup_json_ json_t *exit2 =
      json_pack("{s:i,s:b}", "exit_code", 137, "timed_out", 1);
  (void)state;

  assert_int_equal(wr_cli_exec_parse(ARGC(a), a, &o, &err), 0);
  body = wr_cli_exec_body(&o, 0, 0);
  assert_true(json_is_integer(json_object_get(body, "timeout")));
  assert_int_equal(json_integer_value(json_object_get(body, "timeout")), 120);
  assert_int_equal(wr_cli_exec_parse(ARGC(b), b, &o, &err), 0);
  assert_int_equal(o.timeout_ms, 30000);

  assert_int_equal(wr_cli_exec_error_exit("command_not_found"), 127);
  assert_int_equal(wr_cli_exec_error_exit("permission_denied"), 126);
  assert_int_equal(wr_cli_exec_error_exit("exec_failed"), 126);
  assert_int_equal(wr_cli_exec_error_exit("not_running"), 125);
  assert_int_equal(wr_cli_exec_error_exit(NULL), 125);
  assert_int_equal(wr_cli_exit_code(exit1), 3);
  assert_int_equal(wr_cli_exit_code(exit2), 124);
}

/* Options after the command belong to the command. */
static void test_exec_trailing_options(void **state) {
  struct wr_cli_exec_opts o = {0};
  wr_error_t err = {0};
  char **a = ARGV("exec", "box", "true", "-w");
  (void)state;

  assert_int_equal(wr_cli_exec_parse(ARGC(a), a, &o, &err), 0);
  assert_int_equal(o.ncmd, 2);
  assert_null(o.cwd);
}

/* ---- options helpers ----------------------------------------------------- */

static void test_kv_and_numbers(void **state) {
  wr_error_t err = {0};
  _cleanup_json_ json_t *obj = NULL;
  _cleanup_free_ char *text = NULL;
  char *kv[] = {(char *)"A=1", (char *)"A=2", (char *)"E=", NULL};
  char buf[32];
  double cpus;
  (void)state;

  assert_int_equal(wr_cli_check_kv("PATH=/bin:/usr/bin", "--env", true, &err),
                   0);
  assert_int_equal(wr_cli_check_kv("a.b/c=1", "--label", false, &err), 0);
  assert_int_equal(wr_cli_check_kv("a.b=1", "--env", true, &err), -1);
  obj = wr_cli_kv_object(kv);
  text = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"A\":\"2\",\"E\":\"\"}");

  assert_int_equal(wr_cli_parse_cpus("0.25", &cpus, &err), 0);
  assert_true(cpus > 0.24 && cpus < 0.26);
  assert_int_equal(wr_cli_parse_cpus("-1", &cpus, &err), -1);
  assert_int_equal(wr_cli_parse_cpus("nan", &cpus, &err), -1);
  assert_int_equal(wr_cli_parse_cpus("", &cpus, &err), -1);

  wr_cli_format_seconds(30000, buf, sizeof(buf));
  assert_string_equal(buf, "30s");
  wr_cli_format_seconds(500, buf, sizeof(buf));
  assert_string_equal(buf, "0.5s");
  wr_cli_format_seconds(1234, buf, sizeof(buf));
  assert_string_equal(buf, "1.234s");
  wr_cli_format_seconds(90010, buf, sizeof(buf));
  assert_string_equal(buf, "90.01s");
}

static void test_escape(void **state) {
  _cleanup_free_ char *a = wr_cli_escape("/srv/my file&x=1");
  _cleanup_free_ char *b = wr_cli_sandbox_path("web.1", "/exec");
  _cleanup_free_ char *c = wr_cli_sandbox_path("a/../b", NULL);
  (void)state;

  assert_string_equal(a, "%2Fsrv%2Fmy%20file%26x%3D1");
  assert_string_equal(b, "/v1/sandboxes/web.1/exec");
  assert_string_equal(c, "/v1/sandboxes/a%2F..%2Fb");
}

/* ---- frames -------------------------------------------------------------- */

/* A server's side of a short exec: STARTED, output, an empty frame, EXIT. */
static void sample_stream(wr_buf_t *b) {
  wr_frame_encode(b, WR_FRAME_STARTED, "{\"pid\":42}", 10);
  wr_frame_encode(b, WR_FRAME_STDOUT, "hello\n", 6);
  wr_frame_encode(b, WR_FRAME_STDERR, "", 0);
  wr_frame_encode(b, WR_FRAME_STDERR, "oops", 4);
  wr_frame_encode(b, WR_FRAME_EXIT, "{\"exit_code\":0}", 15);
}

/* Decode everything available; record "type:payload;" per frame. */
static void drain(struct wr_frame_decoder *d, wr_buf_t *log) {
  struct wr_frame f;
  wr_error_t err = {0};
  int r;

  while ((r = wr_frame_next(d, &f, &err)) == 1) {
    wr_buf_printf(log, "%u:", f.type);
    wr_buf_append(log, f.data, f.len);
    wr_buf_puts(log, ";");
  }
  assert_int_equal(r, 0);
}

static const char expected_log[] = "10:{\"pid\":42};11:hello\n;12:;12:oops;"
                                   "13:{\"exit_code\":0};";

static void test_frames_split_everywhere(void **state) {
  wr_buf_t stream = {0};
  (void)state;

  sample_stream(&stream);
  assert_int_equal(stream.len, 5 * 5 + 10 + 6 + 0 + 4 + 15);
  assert_int_equal((unsigned char)stream.data[0], 10);
  assert_memory_equal(stream.data + 1, "\0\0\0\x0a", 4);
  for (size_t cut = 0; cut <= stream.len; cut++) {
    struct wr_frame_decoder d;
    wr_buf_t log = {0};
    wr_frame_decoder_init(&d, WR_FRAME_MAX_PAYLOAD);
    wr_frame_feed(&d, stream.data, cut);
    drain(&d, &log);
    wr_frame_feed(&d, stream.data + cut, stream.len - cut);
    drain(&d, &log);
    assert_string_equal(log.data, expected_log);
    wr_buf_free(&log);
    wr_frame_decoder_free(&d);
  }
  wr_buf_free(&stream);
}

static void test_frames_byte_by_byte(void **state) {
  wr_buf_t stream = {0}, log = {0};
  struct wr_frame_decoder d;
  (void)state;

  sample_stream(&stream);
  wr_frame_decoder_init(&d, WR_FRAME_MAX_PAYLOAD);
  for (size_t i = 0; i < stream.len; i++) {
    wr_frame_feed(&d, stream.data + i, 1);
    drain(&d, &log);
  }
  assert_string_equal(log.data, expected_log);
  wr_frame_decoder_free(&d);
  wr_buf_free(&stream);
  wr_buf_free(&log);
}

static void test_frames_encode_and_limits(void **state) {
  wr_buf_t b = {0};
  struct wr_frame_decoder d;
  struct wr_frame f;
  wr_error_t err = {0};
  const unsigned char huge[] = {WR_FRAME_STDOUT, 0x7f, 0xff, 0xff, 0xff};
  (void)state;

  wr_frame_encode_resize(&b, 50, 300);
  assert_int_equal(b.len, 9);
  assert_memory_equal(b.data, "\x02\0\0\0\x04\x00\x32\x01\x2c", 9);
  wr_buf_reset(&b);
  wr_frame_encode(&b, WR_FRAME_SIGNAL, "INT", 3);
  assert_memory_equal(b.data, "\x03\0\0\0\x03INT", 8);
  wr_buf_reset(&b);
  wr_frame_encode(&b, WR_FRAME_STDIN_EOF, NULL, 0);
  assert_memory_equal(b.data, "\x01\0\0\0\0", 5);
  wr_buf_free(&b);

  wr_frame_decoder_init(&d, WR_FRAME_MAX_PAYLOAD);
  wr_frame_feed(&d, huge, sizeof(huge));
  assert_int_equal(wr_frame_next(&d, &f, &err), -1);
  assert_non_null(strstr(err.msg, "too large"));
  wr_frame_decoder_free(&d);
}

static void test_detach_keys(void **state) {
  struct wr_cli_detach d = {0};
  wr_buf_t out = {0};
  (void)state;

  assert_false(wr_cli_detach_feed(&d, "ab", 2, &out));
  assert_string_equal(out.data, "ab");
  /* Ctrl-P held back across reads, then released by another key. */
  assert_false(wr_cli_detach_feed(&d, "x\x10", 2, &out));
  assert_string_equal(out.data, "abx");
  assert_false(wr_cli_detach_feed(&d, "y", 1, &out));
  assert_string_equal(out.data, "abx\x10y");
  /* Ctrl-P Ctrl-P Ctrl-Q: the first is forwarded, the pair detaches. */
  wr_buf_reset(&out);
  assert_true(wr_cli_detach_feed(&d, "\x10\x10\x11z", 4, &out));
  assert_string_equal(out.data, "\x10");
  /* Split across reads. */
  wr_buf_reset(&out);
  d.matched = 0;
  assert_false(wr_cli_detach_feed(&d, "q\x10", 2, &out));
  assert_true(wr_cli_detach_feed(&d, "\x11", 1, &out));
  assert_string_equal(out.data, "q");
  wr_buf_free(&out);
}

/* ---- cp paths ------------------------------------------------------------ */

static void expect_loc(const char *arg, const char *sandbox, const char *path) {
  struct wr_cli_cp_loc loc = {0};
  wr_error_t err = {0};

  if (wr_cli_cp_parse_loc(arg, &loc, &err) < 0)
    fail_msg("`%s`: %s", arg, err.msg);
  if (sandbox == NULL)
    assert_null(loc.sandbox);
  else
    assert_string_equal(loc.sandbox, sandbox);
  assert_string_equal(loc.path, path);
  wr_cli_cp_loc_free(&loc);
}

static void test_cp_locations(void **state) {
  struct wr_cli_cp_loc loc = {0};
  wr_error_t err = {0};
  (void)state;

  expect_loc("web:/etc/hosts", "web", "/etc/hosts");
  expect_loc("my.box:/srv/", "my.box", "/srv/");
  expect_loc("sb-3f9k2a:/x:y", "sb-3f9k2a", "/x:y");
  expect_loc("./a:b", NULL, "./a:b");
  expect_loc("/tmp/a:b", NULL, "/tmp/a:b");
  expect_loc("dir/web:/x", NULL, "dir/web:/x");
  expect_loc("C:\\Users\\x", NULL, "C:\\Users\\x");
  expect_loc("Web:/x", NULL, "Web:/x");
  expect_loc("-", NULL, "-");
  expect_loc("file.txt", NULL, "file.txt");
  expect_loc(".hidden:x", NULL, ".hidden:x");
  assert_int_equal(wr_cli_cp_parse_loc("web:etc", &loc, &err), -1);
  assert_non_null(strstr(err.msg, "must be absolute"));
  assert_int_equal(wr_cli_cp_parse_loc("web:", &loc, &err), -1);
  assert_int_equal(wr_cli_cp_parse_loc("", &loc, &err), -1);
}

/* ---- output -------------------------------------------------------------- */

static void test_times(void **state) {
  int64_t ms;
  char buf[64];
  const int64_t now = 1800000000000LL;
  static const struct {
    int64_t ago_s;
    const char *text;
  } cases[] = {
      {0, "just now"},
      {-5, "just now"},
      {1, "1 second ago"},
      {59, "59 seconds ago"},
      {60, "1 minute ago"},
      {150, "2 minutes ago"},
      {3600, "1 hour ago"},
      {86399, "23 hours ago"},
      {86400, "1 day ago"},
      {13 * 86400, "13 days ago"},
      {15 * 86400, "2 weeks ago"},
      {90 * 86400, "3 months ago"},
      {400 * 86400, "1 year ago"},
      {800 * 86400, "2 years ago"},
  };
  (void)state;

  assert_int_equal(wr_cli_parse_time("2026-11-30T02:50:41Z", &ms, NULL), 0);
  assert_int_equal(ms, 1796007041000LL);
  assert_int_equal(wr_cli_parse_time("2026-11-30T02:50:41.25Z", &ms, NULL), 0);
  assert_int_equal(ms, 1796007041250LL);
  assert_int_equal(wr_cli_parse_time("2026-11-30T03:50:41+01:00", &ms, NULL),
                   0);
  assert_int_equal(ms, 1796007041000LL);
  assert_int_equal(wr_cli_parse_time("2026-11-30", &ms, NULL), -1);
  assert_int_equal(wr_cli_parse_time("2026-11-30T02:50:41", &ms, NULL), -1);
  assert_int_equal(wr_cli_parse_time("2026-11-30T02:50:41Zjunk", &ms, NULL),
                   -1);
  for (size_t i = 0; i < WR_ARRAY_SIZE(cases); i++) {
    wr_cli_format_ago(now, now - cases[i].ago_s * 1000, buf, sizeof(buf));
    assert_string_equal(buf, cases[i].text);
  }
}

static void test_table(void **state) {
  struct wr_cli_table t;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  (void)state;

  wr_cli_table_init(&t, 3);
  wr_cli_table_add(&t, (const char *const[]){"NAME", "STATE", "CREATED"});
  wr_cli_table_add(
      &t, (const char *const[]){"a-long-name", "running", "2 minutes ago"});
  wr_cli_table_add(&t, (const char *const[]){"b", NULL, "just now"});
  wr_cli_table_print(&t, f);
  fclose(f);
  assert_string_equal(text, "NAME          STATE     CREATED\n"
                            "a-long-name   running   2 minutes ago\n"
                            "b                       just now\n");
  free(text);
  wr_cli_table_free(&t);
}

/* Names a sandbox made reach the terminal quoted as ls quotes them, and
 * only when they need it; what comes back through a shell is the name. */
static void test_quote(void **state) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"plain", "plain"},
      {"with space/and.dots", "with space/and.dots"},
      {"caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93"},
      {"", ""},
      {"a\x1b]0;pwned\x07"
       "b",
       "'a'$'\\033'']0;pwned'$'\\a''b'"},
      {"\x1b[2J", "$'\\033''[2J'"},
      {"line\nnext", "'line'$'\\n''next'"},
      {"cr\rhide", "'cr'$'\\r''hide'"},
      {"it's\t", "'it'\\''s'$'\\t'"},
      {"del\x7f", "'del'$'\\177'"},
      {"csi\xc2\x9b", "'csi'$'\\302\\233'"}, /* U+009B */
      {"bad\xff\xfe", "'bad'$'\\377\\376'"}, /* not UTF-8 */
      {"\xe2\x80\xae"
       "evil",
       "$'\\342\\200\\256''evil'"}, /* RLO */
      {"cut\xc3", "'cut'$'\\303'"}, /* truncated */
  };
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(cases); i++) {
    char *q = wr_cli_quote(cases[i].in);
    assert_string_equal(q, cases[i].out);
    free(q);
  }
}

static void test_safe_text(void **state) {
  char *t;
  (void)state;

  t = wr_cli_safe_text("no such file `a\x1b[31mb`\n\tnext line");
  assert_string_equal(t, "no such file `a\\033[31mb`\n\tnext line");
  free(t);
  t = wr_cli_safe_text("\r\xc2\x9b\xff ok \xc3\xa9");
  assert_string_equal(t, "\\r\\302\\233\\377 ok \xc3\xa9");
  free(t);
}

/* Every cell of a table is quoted: no escape byte reaches the output. */
static void test_table_quotes_cells(void **state) {
  struct wr_cli_table t;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  (void)state;

  wr_cli_table_init(&t, 2);
  wr_cli_table_add(&t, (const char *const[]){"PATH", "KIND"});
  wr_cli_table_add(&t, (const char *const[]){"x\x1b[8m", "file"});
  wr_cli_table_print(&t, f);
  fclose(f);
  assert_null(memchr(text, 0x1b, len));
  assert_string_equal(text, "PATH              KIND\n"
                            "'x'$'\\033''[8m'   file\n");
  free(text);
  wr_cli_table_free(&t);
}

static void test_base64(void **state) {
  static const struct {
    const char *in, *out;
  } ok[] = {
      {"", ""},
      {"YQ==", "a"},
      {"YWI=", "ab"},
      {"YWJj", "abc"},
      {"aGVsbG8gd29ybGQK", "hello world\n"},
      {"/+8=", "\xff\xef"},
  };
  static const char *const bad[] = {
      "a", "YQ=", "Y===", "@@@@", "YQ=a", "YQ==YQ=="};
  wr_error_t err = {0};
  (void)state;

  for (size_t i = 0; i < WR_ARRAY_SIZE(ok); i++) {
    wr_buf_t b = {0};
    assert_int_equal(wr_base64_decode(ok[i].in, strlen(ok[i].in), &b, &err), 0);
    assert_int_equal(b.len, strlen(ok[i].out));
    if (b.len > 0)
      assert_memory_equal(b.data, ok[i].out, b.len);
    wr_buf_free(&b);
  }
  for (size_t i = 0; i < WR_ARRAY_SIZE(bad); i++) {
    wr_buf_t b = {0};
    if (wr_base64_decode(bad[i], strlen(bad[i]), &b, &err) == 0)
      fail_msg("`%s` decoded", bad[i]);
    wr_buf_free(&b);
  }
}

static void test_json_accessors(void **state) {
  _cleanup_json_ json_t *o = json_pack("{s:s,s:i,s:f,s:b,s:n}", "s", "x", "i",
                                       5, "f", 2.5, "b", 1, "n");
  (void)state;

  assert_string_equal(wr_cli_jstr(o, "s"), "x");
  assert_string_equal(wr_cli_jstr(o, "i"), "");
  assert_string_equal(wr_cli_jstr(NULL, "s"), "");
  assert_int_equal(wr_cli_jint(o, "i"), 5);
  assert_int_equal(wr_cli_jint(o, "f"), 2);
  assert_int_equal(wr_cli_jint(o, "n"), -1);
  assert_true(wr_cli_jbool(o, "b"));
  assert_false(wr_cli_jbool(o, "missing"));
}

/* ---- policy, secret, ports --------------------------------------------- */

static void test_policy_rule_parse(void **state) {
  char **a = ARGV("allow", "--sandbox", "web", "network", "example.com:443");
  char **b = ARGV("check", "network", "10.0.0.1", "--json");
  char **help = ARGV("deny", "--help");
  struct wr_cli_policy_rule_opts o;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_cli_policy_rule_parse(ARGC(a), a, &o, &err), 0);
  assert_string_equal(o.verb, "allow");
  assert_string_equal(o.sandbox, "web");
  assert_string_equal(o.host, "example.com:443");
  assert_false(o.json);
  assert_int_equal(wr_cli_policy_rule_parse(ARGC(b), b, &o, &err), 0);
  assert_string_equal(o.verb, "check");
  assert_null(o.sandbox);
  assert_string_equal(o.host, "10.0.0.1");
  assert_true(o.json);
  assert_int_equal(wr_cli_policy_rule_parse(ARGC(help), help, &o, &err), 0);
  assert_true(o.help);
}

static void test_policy_rule_errors(void **state) {
  char **no_kind = ARGV("allow", "example.com");
  char **no_host = ARGV("allow", "network");
  char **two = ARGV("deny", "network", "a.example", "b.example");
  char **json = ARGV("allow", "--json", "network", "a.example");
  char **none = ARGV("allow");
  struct wr_cli_policy_rule_opts o;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_cli_policy_rule_parse(ARGC(no_kind), no_kind, &o, &err),
                   -1);
  assert_non_null(strstr(err.msg, "only `network`"));
  assert_int_equal(wr_cli_policy_rule_parse(ARGC(no_host), no_host, &o, &err),
                   -1);
  assert_int_equal(wr_cli_policy_rule_parse(ARGC(two), two, &o, &err), -1);
  assert_int_equal(wr_cli_policy_rule_parse(ARGC(json), json, &o, &err), -1);
  assert_int_equal(wr_cli_policy_rule_parse(ARGC(none), none, &o, &err), -1);
}

static void test_policy_log_parse(void **state) {
  char **a = ARGV("log", "--sandbox", "web app", "-f", "--limit", "20");
  char **b = ARGV("log", "--json");
  char **bad = ARGV("log", "--limit", "0");
  char **big = ARGV("log", "--limit", "10001");
  char **extra = ARGV("log", "web");
  struct wr_cli_policy_log_opts o;
  _cleanup_free_ char *p1 = NULL;
  _cleanup_free_ char *p2 = NULL;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_cli_policy_log_parse(ARGC(a), a, &o, &err), 0);
  assert_string_equal(o.sandbox, "web app");
  assert_true(o.follow);
  assert_int_equal(o.limit, 20);
  p1 = wr_cli_policy_log_path(&o, 42);
  assert_string_equal(p1, "/v1/policy/log?limit=20&sandbox=web%20app"
                          "&after=42&follow=true");
  assert_int_equal(wr_cli_policy_log_parse(ARGC(b), b, &o, &err), 0);
  assert_true(o.json);
  p2 = wr_cli_policy_log_path(&o, 0);
  assert_string_equal(p2, "/v1/policy/log?limit=100");
  assert_int_equal(wr_cli_policy_log_parse(ARGC(bad), bad, &o, &err), -1);
  assert_non_null(strstr(err.msg, "--limit"));
  assert_int_equal(wr_cli_policy_log_parse(ARGC(big), big, &o, &err), -1);
  assert_int_equal(wr_cli_policy_log_parse(ARGC(extra), extra, &o, &err), -1);
}

static void test_secret_set_parse(void **state) {
  char **a = ARGV("set", "internal", "--host", "a.example", "--host",
                  "b.example", "--header", "Authorization", "--prefix",
                  "Bearer ", "--env", "TOKEN");
  char **builtin = ARGV("set", "openai");
  char **in_argv = ARGV("set", "openai", "sk-secret");
  char **bad_env = ARGV("set", "x", "--env", "1BAD");
  struct wr_cli_secret_set_opts o = {0};
  _cleanup_json_ json_t *body = NULL;
  _cleanup_json_ json_t *bare = NULL;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_cli_secret_set_parse(ARGC(a), a, &o, &err), 0);
  assert_string_equal(o.service, "internal");
  assert_int_equal(wr_strv_len(o.hosts), 2);
  assert_string_equal(o.header, "Authorization");
  body = wr_cli_secret_body(&o, "tok\0en", 6);
  assert_int_equal(json_string_length(json_object_get(body, "value")), 6);
  assert_int_equal(json_array_size(json_object_get(body, "hosts")), 2);
  assert_string_equal(json_string_value(json_object_get(body, "prefix")),
                      "Bearer ");
  assert_string_equal(
      json_string_value(json_array_get(json_object_get(body, "env"), 0)),
      "TOKEN");
  assert_null(wr_cli_secret_body(&o, "\xff", 1));
  wr_cli_secret_set_opts_free(&o);

  /* A built-in service sends only the value: the daemon knows the rest. */
  assert_int_equal(wr_cli_secret_set_parse(ARGC(builtin), builtin, &o, &err),
                   0);
  bare = wr_cli_secret_body(&o, "v", 1);
  assert_int_equal(json_object_size(bare), 1);
  wr_cli_secret_set_opts_free(&o);

  /* The value never comes from the command line. */
  assert_int_equal(wr_cli_secret_set_parse(ARGC(in_argv), in_argv, &o, &err),
                   -1);
  assert_non_null(strstr(err.msg, "stdin"));
  wr_cli_secret_set_opts_free(&o);
  assert_int_equal(wr_cli_secret_set_parse(ARGC(bad_env), bad_env, &o, &err),
                   -1);
  wr_cli_secret_set_opts_free(&o);
}

static void test_secret_trim(void **state) {
  char a[] = "sk-1\n", b[] = "sk-2\r\n", c[] = "sk-3\n\n", d[] = "sk-4";
  size_t la = 5, lb = 6, lc = 6, ld = 4;
  (void)state;

  wr_cli_secret_trim(a, &la);
  assert_string_equal(a, "sk-1");
  wr_cli_secret_trim(b, &lb);
  assert_string_equal(b, "sk-2");
  wr_cli_secret_trim(c, &lc);
  assert_int_equal(lc, 5); /* one newline only */
  wr_cli_secret_trim(d, &ld);
  assert_int_equal(ld, 4);
}

static void test_publish_spec(void **state) {
  struct wr_cli_publish p;
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_cli_parse_publish("8080:8000", &p, &err), 0);
  assert_null(p.addr);
  assert_int_equal(p.host_port, 8080);
  assert_int_equal(p.port, 8000);
  assert_int_equal(wr_cli_parse_publish("0.0.0.0:80:3000", &p, &err), 0);
  assert_string_equal(p.addr, "0.0.0.0");
  assert_int_equal(p.host_port, 80);
  assert_int_equal(p.port, 3000);
  free(p.addr);
  assert_int_equal(wr_cli_parse_publish("[::1]:8080:8000", &p, &err), 0);
  assert_string_equal(p.addr, "::1");
  assert_int_equal(p.host_port, 8080);
  free(p.addr);
  assert_int_equal(wr_cli_parse_publish("8080", &p, &err), -1);
  assert_int_equal(wr_cli_parse_publish("8080:0", &p, &err), -1);
  assert_int_equal(wr_cli_parse_publish("70000:80", &p, &err), -1);
  assert_int_equal(wr_cli_parse_publish(":80:80", &p, &err), -1);
  assert_int_equal(wr_cli_parse_publish("::1:8080:8000", &p, &err), -1);
  assert_non_null(strstr(err.msg, "brackets"));
}

static void test_ports_parse(void **state) {
  char **list = ARGV("ports", "web", "--json");
  char **pub = ARGV("ports", "--publish", "8080:8000", "web");
  char **unpub = ARGV("ports", "web", "--unpublish", "8080");
  char **both = ARGV("ports", "web", "--publish", "1:2", "--unpublish", "1");
  char **none = ARGV("ports");
  struct wr_cli_ports_opts o = {0};
  wr_error_t err = {0};
  (void)state;

  assert_int_equal(wr_cli_ports_parse(ARGC(list), list, &o, &err), 0);
  assert_string_equal(o.sandbox, "web");
  assert_true(o.json);
  assert_false(o.has_publish);
  assert_int_equal(wr_cli_ports_parse(ARGC(pub), pub, &o, &err), 0);
  assert_true(o.has_publish);
  assert_int_equal(o.publish.host_port, 8080);
  assert_int_equal(wr_cli_ports_parse(ARGC(unpub), unpub, &o, &err), 0);
  assert_int_equal(o.unpublish, 8080);
  assert_int_equal(wr_cli_ports_parse(ARGC(both), both, &o, &err), -1);
  wr_cli_ports_opts_free(&o);
  assert_int_equal(wr_cli_ports_parse(ARGC(none), none, &o, &err), -1);
}

/* `warren events`: options, the request path (escaped filters, the
 * reconnect's since) and the human line with its details. */
static void test_events_parse_and_print(void **state) {
  char **all = ARGV("events", "-f", "--json", "--since", "12", "--sandbox",
                    "my web", "--type", "paused,resumed");
  char **bad = ARGV("events", "--since", "x");
  char **extra = ARGV("events", "web");
  struct wr_cli_events_opts o;
  wr_error_t err = {0};
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *line = NULL;
  _cleanup_json_ json_t *ev = NULL;
  (void)state;

  assert_int_equal(wr_cli_events_parse(ARGC(all), all, &o, &err), 0);
  assert_true(o.follow && o.json);
  assert_int_equal(o.since, 12);
  path = wr_cli_events_path(&o, 40);
  assert_string_equal(path, "/v1/events?follow=true&since=40&sandbox=my%20web"
                            "&type=paused%2Cresumed");
  assert_int_equal(wr_cli_events_parse(ARGC(bad), bad, &o, &err), -1);
  assert_int_equal(wr_cli_events_parse(ARGC(extra), extra, &o, &err), -1);
  ev = json_pack("{s:I,s:I,s:s,s:{s:s,s:s},s:s}", "id", (json_int_t)3, "time",
                 (json_int_t)1700000000512, "type", "stopped", "sandbox", "id",
                 "sb-abc123", "name", "web", "reason", "requested");
  line = wr_cli_event_line(ev);
  assert_non_null(strstr(line, ".512  stopped  web (sb-abc123)  "
                               "reason=requested"));
  assert_int_equal(line[2], ':');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dispatch),
      cmocka_unit_test(test_main_usage_errors),
      cmocka_unit_test(test_global_options),
      cmocka_unit_test(test_create_parse),
      cmocka_unit_test(test_create_template_wait),
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test(test_create_workspace),
      cmocka_unit_test(test_create_pool_options),
      cmocka_unit_test(test_ls_parse),
      cmocka_unit_test(test_exec_parse),
      cmocka_unit_test(test_exec_errors),
      cmocka_unit_test(test_exec_timeout_and_exit),
      cmocka_unit_test(test_exec_trailing_options),
      cmocka_unit_test(test_kv_and_numbers),
      cmocka_unit_test(test_escape),
      cmocka_unit_test(test_frames_split_everywhere),
      cmocka_unit_test(test_frames_byte_by_byte),
      cmocka_unit_test(test_frames_encode_and_limits),
      cmocka_unit_test(test_detach_keys),
      cmocka_unit_test(test_cp_locations),
      cmocka_unit_test(test_times),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_quote),
      cmocka_unit_test(test_safe_text),
      cmocka_unit_test(test_table_quotes_cells),
      cmocka_unit_test(test_base64),
      cmocka_unit_test(test_json_accessors),
      cmocka_unit_test(test_policy_rule_parse),
      cmocka_unit_test(test_policy_rule_errors),
      cmocka_unit_test(test_policy_log_parse),
      cmocka_unit_test(test_secret_set_parse),
      cmocka_unit_test(test_secret_trim),
      cmocka_unit_test(test_publish_spec),
      cmocka_unit_test(test_ports_parse),
      cmocka_unit_test(test_events_parse_and_print),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
