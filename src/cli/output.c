/*
 * What the CLI prints: error lines, help, pretty JSON, aligned tables and
 * human times ("2 minutes ago").
 *
 * Strings that a sandbox or an API client controls (file names, labels,
 * host names, the daemon's messages that echo them) never reach the
 * terminal raw: a control character could move the cursor, retitle the
 * window or hide lines. Names and values are quoted as `ls` quotes file
 * names, and only when they need it; messages get C escapes in place.
 * --json output keeps the exact values (JSON-escaped).
 */
#include "cli/cli.h"

#include <ctype.h>
#include <jansson.h>
#include <time.h>

/* ---- strings for the terminal -------------------------------------------- */

/* One byte as bash's $'...' and ls write it: \n, \t ... or \ooo. */
static void put_escape(wr_buf_t *b, unsigned char c) {
  static const char named[] = "\a\b\t\n\v\f\r";
  static const char letters[] = "abtnvfr";
  const char *p = c != 0 ? memchr(named, c, sizeof(named) - 1) : NULL;

  if (p != NULL)
    wr_buf_printf(b, "\\%c", letters[p - named]);
  else
    wr_buf_printf(b, "\\%03o", c);
}

/*
 * ls's "shell-escape" style: runs of safe characters in single quotes,
 * unsafe ones as $'\ooo', a quote as \', so "a<ESC>b" is 'a'$'\033''b'
 * and pasting it into a shell gives the name back.
 */
char *wr_cli_quote(const char *s) {
  enum { OUTSIDE, QUOTED, ESCAPED } at = OUTSIDE;
  size_t left = strlen(s);
  wr_buf_t b;

  if (wr_text_is_safe(s))
    return xstrdup(s);
  wr_buf_init(&b);
  while (left > 0) {
    bool unsafe;
    size_t n = wr_text_unit(s, left, &unsafe);
    if (unsafe) {
      if (at == QUOTED)
        wr_buf_puts(&b, "'");
      if (at != ESCAPED)
        wr_buf_puts(&b, "$'");
      at = ESCAPED;
      for (size_t i = 0; i < n; i++)
        put_escape(&b, (unsigned char)s[i]);
    } else if (*s == '\'') {
      if (at != OUTSIDE)
        wr_buf_puts(&b, "'");
      wr_buf_puts(&b, "\\'");
      at = OUTSIDE;
    } else {
      if (at == ESCAPED)
        wr_buf_puts(&b, "'");
      if (at != QUOTED)
        wr_buf_puts(&b, "'");
      at = QUOTED;
      wr_buf_append(&b, s, n);
    }
    s += n;
    left -= n;
  }
  if (at != OUTSIDE)
    wr_buf_puts(&b, "'");
  return wr_buf_steal(&b, NULL);
}

char *wr_cli_safe_text(const char *s) {
  size_t left = strlen(s);
  wr_buf_t b;

  wr_buf_init(&b);
  wr_buf_reserve(&b, left);
  while (left > 0) {
    bool unsafe;
    size_t n = wr_text_unit(s, left, &unsafe);
    if (unsafe && *s != '\n' && *s != '\t')
      for (size_t i = 0; i < n; i++)
        put_escape(&b, (unsigned char)s[i]);
    else
      wr_buf_append(&b, s, n);
    s += n;
    left -= n;
  }
  return b.data != NULL ? wr_buf_steal(&b, NULL) : xstrdup("");
}

/* ---- messages ------------------------------------------------------------ */

static void put_line(FILE *out, const char *prefix, const char *fmt,
                     va_list ap) {
  _cleanup_free_ char *text = NULL, *shown = NULL;

  if (vasprintf(&text, fmt, ap) < 0)
    abort();
  shown = wr_cli_safe_text(text);
  fprintf(out, "%s%s\n", prefix, shown);
}

void wr_cli_line(FILE *out, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  put_line(out, "", fmt, ap);
  va_end(ap);
}

/* Every error line looks the same, so users and scripts can grep for it. */
int wr_cli_fail(int code, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  put_line(stderr, "warren: ", fmt, ap);
  va_end(ap);
  return code;
}

int wr_cli_usage(const char *cmd, const wr_error_t *err) {
  _cleanup_free_ char *shown = wr_cli_safe_text(err->msg);

  fprintf(stderr, "warren: %s\n", shown);
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

/* jansson escapes C0 controls; everything past ASCII is escaped too (as
 * Python's json does by default), since DEL and the C1 controls, which
 * some terminals obey, are characters of UTF-8 text. The values stay
 * exact; the bytes are plain ASCII. */
size_t wr_cli_json_flags(void) {
  return JSON_ENSURE_ASCII;
}

int wr_cli_print_json(const json_t *j) {
  if (json_dumpf(j, stdout,
                 JSON_INDENT(2) | JSON_ENCODE_ANY | wr_cli_json_flags()) < 0)
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
    t->cells[t->nrows * t->ncols + c] = wr_cli_quote(row[c] ? row[c] : "");
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
