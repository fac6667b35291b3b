/* Parsers for values that come from users and clients. */
#include "common.h"

#include <ctype.h>
#include <math.h>
#include <signal.h>

bool wr_str_has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool wr_str_has_suffix(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);

  return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int wr_strlcpy(char *dst, const char *src, size_t size) {
  size_t n = strlen(src);

  if (size == 0)
    return -1;
  if (n >= size) {
    memcpy(dst, src, size - 1);
    dst[size - 1] = '\0';
    return -1;
  }
  memcpy(dst, src, n + 1);
  return 0;
}

int wr_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out,
                 wr_error_t *err) {
  uint64_t v = 0;

  if (s == NULL || *s == '\0')
    return wr_error_set(err, 0, "empty number");
  for (const char *p = s; *p != '\0'; p++) {
    if (!isdigit((unsigned char)*p))
      return wr_error_set(err, 0, "`%s` is not a whole number", s);
    if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
      return wr_error_set(err, 0, "`%s` is too large", s);
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (v < min || v > max)
    return wr_error_set(err, 0, "%s is out of range [%llu, %llu]", s,
                        (unsigned long long)min, (unsigned long long)max);
  *out = v;
  return 0;
}

/* Split "1.5g" into a positive finite number and its unit suffix. */
static int split_number(const char *s, double *num, const char **unit,
                        const char *what, wr_error_t *err) {
  char *end = NULL;

  if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
    return wr_error_set(err, 0, "invalid %s `%s`", what, s ? s : "");
  errno = 0;
  *num = strtod(s, &end);
  if (errno != 0 || end == s || !isfinite(*num) || *num < 0)
    return wr_error_set(err, 0, "invalid %s `%s`", what, s);
  *unit = end;
  return 0;
}

int wr_parse_size(const char *s, uint64_t *out, wr_error_t *err) {
  static const struct {
    const char *unit;
    uint64_t mult;
  } units[] = {
      {"", 1},
      {"b", 1},
      {"k", 1ULL << 10},
      {"kb", 1ULL << 10},
      {"kib", 1ULL << 10},
      {"m", 1ULL << 20},
      {"mb", 1ULL << 20},
      {"mib", 1ULL << 20},
      {"g", 1ULL << 30},
      {"gb", 1ULL << 30},
      {"gib", 1ULL << 30},
      {"t", 1ULL << 40},
      {"tb", 1ULL << 40},
      {"tib", 1ULL << 40},
  };
  const char *unit;
  double num;

  if (split_number(s, &num, &unit, "size", err) < 0)
    return -1;
  for (size_t i = 0; i < WR_ARRAY_SIZE(units); i++) {
    if (strcasecmp(unit, units[i].unit) == 0) {
      double v = num * (double)units[i].mult;
      if (v >= 18446744073709551615.0)
        return wr_error_set(err, 0, "size `%s` is too large", s);
      *out = (uint64_t)v;
      return 0;
    }
  }
  return wr_error_set(err, 0,
                      "invalid size `%s` (use bytes or a unit: k, m, g, t)", s);
}

int wr_parse_duration_ms(const char *s, uint64_t *out, wr_error_t *err) {
  static const struct {
    const char *unit;
    double mult;
  } units[] = {
      {"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"h", 3600000},
  };
  const char *unit;
  double num;

  if (split_number(s, &num, &unit, "duration", err) < 0)
    return -1;
  for (size_t i = 0; i < WR_ARRAY_SIZE(units); i++) {
    if (strcmp(unit, units[i].unit) == 0) {
      double v = num * units[i].mult;
      if (v > 1e15)
        return wr_error_set(err, 0, "duration `%s` is too long", s);
      *out = (uint64_t)v;
      return 0;
    }
  }
  return wr_error_set(err, 0, "invalid duration `%s` (use ms, s, m or h)", s);
}

bool wr_name_valid(const char *s) {
  size_t n = strlen(s);
  bool all_dots = true;

  if (n == 0 || n > 63)
    return false;
  if (!(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(islower(c) || isdigit(c) || c == '-' || c == '_' || c == '.'))
      return false;
    if (c != '.')
      all_dots = false;
  }
  return !all_dots;
}

bool wr_env_key_valid(const char *key) {
  if (key == NULL || *key == '\0' || strlen(key) > 255)
    return false;
  if (isdigit((unsigned char)key[0]))
    return false;
  for (const char *p = key; *p != '\0'; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_'))
      return false;
  return true;
}

static const struct {
  const char *name;
  int num;
} signals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},
    {"ILL", SIGILL},       {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},
    {"BUS", SIGBUS},       {"FPE", SIGFPE},   {"KILL", SIGKILL},
    {"USR1", SIGUSR1},     {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"CHLD", SIGCHLD},     {"CONT", SIGCONT}, {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},
    {"URG", SIGURG},       {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
    {"IO", SIGIO},         {"PWR", SIGPWR},   {"SYS", SIGSYS},
};

int wr_signal_from_name(const char *s) {
  uint64_t n;

  if (s == NULL || *s == '\0')
    return -1;
  if (isdigit((unsigned char)*s))
    return wr_parse_u64(s, 1, 64, &n, NULL) < 0 ? -1 : (int)n;
  if (strncasecmp(s, "SIG", 3) == 0)
    s += 3;
  for (size_t i = 0; i < WR_ARRAY_SIZE(signals); i++)
    if (strcasecmp(s, signals[i].name) == 0)
      return signals[i].num;
  return -1;
}

const char *wr_signal_name(int sig) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(signals); i++)
    if (signals[i].num == sig)
      return signals[i].name;
  return "UNKNOWN";
}

void wr_format_size(uint64_t bytes, char *out, size_t size) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  size_t u = 0;

  while (v >= 1024 && u + 1 < WR_ARRAY_SIZE(units)) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(out, size, "%llu B", (unsigned long long)bytes);
  else
    snprintf(out, size, "%.1f %s", v, units[u]);
}
