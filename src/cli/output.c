/*
 * What the CLI prints: error lines, help, pretty JSON, aligned tables and
 * human times ("2 minutes ago").
 */
#include "cli/cli.h"

#include <ctype.h>
#include <jansson.h>
#include <time.h>

/* Every error line looks the same, so users and scripts can grep for it. */
int wr_cli_fail(int code, const char *fmt, ...) {
  va_list ap;

  fputs("warren: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return code;
}

int wr_cli_usage(const char *cmd, const wr_error_t *err) {
  fprintf(stderr, "warren: %s\n", err->msg);
  if (cmd != NULL)
    fprintf(stderr, "See `warren %s --help`.\n", cmd);
  else
    fputs("See `warren --help`.\n", stderr);
  return WR_CLI_EXIT_USAGE;
}

int wr_cli_help(const char *text) {
  fputs(text, stdout);
  return fflush(stdout) == 0 ? WR_CLI_EXIT_OK : WR_CLI_EXIT_ERROR;
}

int wr_cli_print_json(const json_t *j) {
  if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY) < 0)
    return -1;
  fputc('\n', stdout);
  return fflush(stdout) == 0 ? 0 : -1;
}

/* ---- tables -------------------------------------------------------------- */

void wr_cli_table_init(struct wr_cli_table *t, size_t ncols) {
  t->ncols = ncols;
  t->nrows = 0;
  t->cells = NULL;
}

void wr_cli_table_add(struct wr_cli_table *t, const char *const *row) {
  t->cells = xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(char *));
  for (size_t c = 0; c < t->ncols; c++)
    t->cells[t->nrows * t->ncols + c] = xstrdup(row[c] ? row[c] : "");
  t->nrows++;
}

/* Columns are separated by three spaces; the last one is not padded, so
 * lines carry no trailing blanks. */
void wr_cli_table_print(const struct wr_cli_table *t, FILE *out) {
  _cleanup_free_ size_t *width = xcalloc(t->ncols, sizeof(size_t));

  for (size_t i = 0; i < t->nrows * t->ncols; i++)
    width[i % t->ncols] = WR_MAX(width[i % t->ncols], strlen(t->cells[i]));
  for (size_t r = 0; r < t->nrows; r++) {
    for (size_t c = 0; c < t->ncols; c++) {
      const char *cell = t->cells[r * t->ncols + c];
      if (c + 1 == t->ncols)
        fprintf(out, "%s\n", cell);
      else
        fprintf(out, "%-*s   ", (int)width[c], cell);
    }
  }
}

void wr_cli_table_free(struct wr_cli_table *t) {
  for (size_t i = 0; i < t->nrows * t->ncols; i++)
    free(t->cells[i]);
  free(t->cells);
  t->cells = NULL;
  t->nrows = 0;
}

/* ---- times --------------------------------------------------------------- */

/* Parse the "Z" or "+hh:mm" that ends an RFC 3339 stamp, in seconds. */
static int parse_offset(const char *p, long *offset) {
  int hh, mm, n = 0;

  if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
    *offset = 0;
    return 0;
  }
  if ((*p != '+' && *p != '-') ||
      sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || p[1 + n] != '\0')
    return -1;
  *offset = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
  return 0;
}

/* The daemon writes "...Z"; fractions and offsets are accepted too so
 * that a change on its side does not break the column. */
int wr_cli_parse_time(const char *s, int64_t *ms, wr_error_t *err) {
  struct tm tm = {0};
  int n = 0;
  long offset, frac_ms = 0;
  const char *p;

  if (s == NULL ||
      sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
             &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
    return wr_error_set(err, 0, "invalid time `%s`", s ? s : "");
  p = s + n;
  if (*p == '.') {
    for (long scale = 100; isdigit((unsigned char)*++p); scale /= 10)
      frac_ms += (*p - '0') * scale;
  }
  if (parse_offset(p, &offset) < 0)
    return wr_error_set(err, 0, "invalid time `%s`", s);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  *ms = ((int64_t)timegm(&tm) - offset) * 1000 + frac_ms;
  return 0;
}

/* Coarse on purpose, like docker: the unit grows with the age. */
void wr_cli_format_ago(int64_t now_ms, int64_t then_ms, char *out,
                       size_t size) {
  static const struct {
    int64_t below; /* seconds */
    int64_t unit;
    const char *name;
  } steps[] = {
      {60, 1, "second"},
      {3600, 60, "minute"},
      {86400, 3600, "hour"},
      {14 * 86400, 86400, "day"},
      {60 * 86400, 7 * 86400, "week"},
      {365 * 86400, 30 * 86400, "month"},
      {INT64_MAX, 365 * 86400, "year"},
  };
  int64_t secs = (now_ms - then_ms) / 1000;

  if (secs < 1) {
    snprintf(out, size, "just now");
    return;
  }
  for (size_t i = 0; i < WR_ARRAY_SIZE(steps); i++) {
    if (secs < steps[i].below) {
      int64_t n = secs / steps[i].unit;
      snprintf(out, size, "%lld %s%s ago", (long long)n, steps[i].name,
               n == 1 ? "" : "s");
      return;
    }
  }
}

void wr_cli_field_ago(const json_t *obj, const char *key, char *out,
                      size_t size) {
  int64_t ms;

  if (wr_cli_parse_time(wr_cli_jstr(obj, key), &ms, NULL) < 0)
    snprintf(out, size, "-");
  else
    wr_cli_format_ago(wr_now_ms(), ms, out, size);
}

/* ---- tolerant JSON accessors --------------------------------------------- */

const char *wr_cli_jstr(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));

  return s ? s : "";
}

int64_t wr_cli_jint(const json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);

  if (json_is_integer(v))
    return json_integer_value(v);
  if (json_is_real(v))
    return (int64_t)json_real_value(v);
  return -1;
}

bool wr_cli_jbool(const json_t *obj, const char *key) {
  return json_is_true(json_object_get(obj, key));
}
