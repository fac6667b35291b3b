/*
 * Option parsing shared by the subcommands: getopt_long with our own
 * messages, KEY=VALUE checks, CPU counts and durations in seconds.
 */
#include "cli/cli.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>

/*
 * getopt's own messages name the program, not the subcommand, and go out
 * before we can add a hint; so opterr is off and the error is ours.
 */
int wr_cli_getopt(int argc, char **argv, const char *shortopts,
                  const struct option *longopts, wr_error_t *err) {
  const char *arg;
  int c;

  opterr = 0;
  c = getopt_long(argc, argv, shortopts, longopts, NULL);
  if (c != '?' && c != ':')
    return c;
  arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  if (c == ':')
    wr_error_set(err, 0, "option `%s` needs a value", arg);
  else if (optopt != 0)
    wr_error_set(err, 0, "unknown option `-%c`", optopt);
  else
    wr_error_set(err, 0, "unknown option `%s`", arg);
  return '?';
}

int wr_cli_check_text(const char *s, const char *what, wr_error_t *err) {
  json_t *j = json_string(s);

  if (j == NULL)
    return wr_error_set(err, 0, "%s is not valid UTF-8", what);
  json_decref(j);
  return 0;
}

/* Label keys are free-form but must be visible characters without '='. */
static bool label_key_valid(const char *key, size_t len) {
  if (len == 0 || len > 255)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!isgraph((unsigned char)key[i]))
      return false;
  return true;
}

/* Checked here rather than by the daemon so that a typo is a usage error
 * naming the option, before any request is made. */
int wr_cli_check_kv(const char *arg, const char *option, bool env,
                    wr_error_t *err) {
  const char *eq = strchr(arg, '=');
  _cleanup_free_ char *key = NULL;

  if (wr_cli_check_text(arg, option, err) < 0)
    return -1;
  if (eq == NULL)
    return wr_error_set(err, 0, "invalid %s `%s`: expected KEY=VALUE", option,
                        arg);
  key = xstrndup(arg, (size_t)(eq - arg));
  if (*key == '\0')
    return wr_error_set(err, 0, "invalid %s `%s`: the key is empty", option,
                        arg);
  if (env && !wr_env_key_valid(key))
    return wr_error_set(err, 0,
                        "invalid %s `%s`: `%s` is not a variable name "
                        "(letters, digits and _, not starting with a digit)",
                        option, arg, key);
  if (!env && !label_key_valid(key, strlen(key)))
    return wr_error_set(err, 0,
                        "invalid %s `%s`: the key must be visible characters",
                        option, arg);
  return 0;
}

int wr_cli_push_kv(char ***v, const char *arg, const char *option, bool env,
                   wr_error_t *err) {
  if (wr_cli_check_kv(arg, option, env, err) < 0)
    return -1;
  *v = wr_strv_push(*v, arg);
  return 0;
}

/* Later entries win, as they would in a shell's environment. */
json_t *wr_cli_kv_object(char *const *kv) {
  json_t *obj = json_object();

  for (size_t i = 0; kv != NULL && kv[i] != NULL; i++) {
    const char *eq = strchr(kv[i], '=');
    _cleanup_free_ char *key = NULL;
    if (eq == NULL)
      continue;
    key = xstrndup(kv[i], (size_t)(eq - kv[i]));
    json_object_set_new(obj, key, json_string(eq + 1));
  }
  return obj;
}

/* strtod alone would take "nan", "inf", "-1" or "1x"; none is a CPU count. */
int wr_cli_parse_cpus(const char *s, double *out, wr_error_t *err) {
  char *end = NULL;
  double v;

  if (s == NULL || !(isdigit((unsigned char)*s) || *s == '.'))
    return wr_error_set(err, 0, "invalid CPU count `%s`", s ? s : "");
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || *end != '\0' || !isfinite(v) || v <= 0 || v > 4096)
    return wr_error_set(
        err, 0, "invalid CPU count `%s` (a number above 0, like 1.5)", s);
  *out = v;
  return 0;
}

json_t *wr_cli_seconds_json(uint64_t ms) {
  if (ms % 1000 == 0)
    return json_integer((json_int_t)(ms / 1000));
  return json_real((double)ms / 1000.0);
}

/* As the user would write it: "30s", "0.5s", never "30.000s". */
void wr_cli_format_seconds(uint64_t ms, char *out, size_t size) {
  char num[48];
  size_t n;

  if (ms % 1000 == 0) {
    snprintf(out, size, "%llus", (unsigned long long)(ms / 1000));
    return;
  }
  snprintf(num, sizeof(num), "%llu.%03u", (unsigned long long)(ms / 1000),
           (unsigned)(ms % 1000));
  n = strlen(num);
  while (num[n - 1] == '0')
    num[--n] = '\0';
  snprintf(out, size, "%ss", num);
}
