/*
 * The Dockerfile subset that templates are built from (dockerfile.h).
 *
 * The text is split into logical lines first (comments dropped, a line
 * ending in a backslash joined to the next, as Docker does, with comment
 * lines inside a continuation skipped), then each logical line is one
 * instruction: a keyword, case-insensitive, and its arguments. What
 * Docker would do that warren does not (multi-stage builds, URLs, flags
 * such as --chown or --mount, variable substitution) is refused here
 * with the line number, not silently done differently.
 */
#include "common/dockerfile.h"

#include <ctype.h>
#include <jansson.h>

struct kind_info {
  const char *name;
  enum wr_df_kind kind;
};

static const struct kind_info kinds[] = {
    {"FROM", WR_DF_FROM}, {"RUN", WR_DF_RUN},       {"COPY", WR_DF_COPY},
    {"ADD", WR_DF_COPY},  {"ENV", WR_DF_ENV},       {"WORKDIR", WR_DF_WORKDIR},
    {"USER", WR_DF_USER}, {"EXPOSE", WR_DF_EXPOSE}, {"CMD", WR_DF_CMD},
};

static const char supported[] =
    "FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, EXPOSE, CMD";

const char *wr_df_kind_name(enum wr_df_kind kind) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(kinds); i++)
    if (kinds[i].kind == kind)
      return kinds[i].name;
  return "?";
}

/* The parser's position: the current WORKDIR (for relative ones), and
 * the line the error messages name. */
struct df_parser {
  struct wr_dockerfile *df;
  unsigned line;
  char *workdir;
  wr_error_t *err;
};

static int fail(struct df_parser *p, const char *fmt, ...) WR_PRINTF(2, 3);
static int fail(struct df_parser *p, const char *fmt, ...) {
  char msg[400];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return wr_error_setx(p->err, EINVAL, "Dockerfile line %u: %s", p->line, msg);
}

static bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

static const char *skip_blanks(const char *s) {
  while (is_blank(*s))
    s++;
  return s;
}

/* Whether [s, e) is only blanks, then a backslash: a continued line. */
static bool continues(const char *s, const char *e) {
  while (e > s && (is_blank(e[-1]) || e[-1] == '\r'))
    e--;
  return e > s && e[-1] == '\\';
}

/* ---- arguments ---------------------------------------------------------- */

/* A JSON array of strings (the exec form), or NULL when text is not one
 * (then it is the shell form, as Docker reads it). */
static char **json_form(const char *text) {
  _cleanup_json_ json_t *j = NULL;
  char **v = NULL;
  size_t i;
  json_t *e;

  if (*text != '[')
    return NULL;
  j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_array(j) || json_array_size(j) == 0)
    return NULL;
  json_array_foreach (j, i, e) {
    if (!json_is_string(e) ||
        strlen(json_string_value(e)) != json_string_length(e)) {
      wr_strv_free(v);
      return NULL;
    }
  }
  v = xcalloc(1, sizeof(char *));
  json_array_foreach (j, i, e)
    v = wr_strv_push(v, json_string_value(e));
  return v;
}

/* Whitespace-separated words, no quoting (COPY's shell form). */
static char **words(const char *s) {
  char **v = xcalloc(1, sizeof(char *));

  for (s = skip_blanks(s); *s != '\0'; s = skip_blanks(s)) {
    const char *e = s;
    while (*e != '\0' && !is_blank(*e))
      e++;
    _cleanup_free_ char *w = xstrndup(s, (size_t)(e - s));
    v = wr_strv_push(v, w);
    s = e;
  }
  return v;
}

/*
 * One word of ENV's K=V form: quotes (single: literal; double: backslash
 * escapes) and backslash escapes outside them, ending at a blank outside
 * quotes. *s moves past it. NULL with an error for an unclosed quote.
 */
static char *env_word(struct df_parser *p, const char **s) {
  const char *c = *s;
  wr_buf_t b;
  char q = 0;

  wr_buf_init(&b);
  wr_buf_puts(&b, "");
  for (; *c != '\0' && (q != 0 || !is_blank(*c)); c++) {
    if (q == 0 && (*c == '"' || *c == '\'')) {
      q = *c;
    } else if (q != 0 && *c == q) {
      q = 0;
    } else if (*c == '\\' && q != '\'' && c[1] != '\0') {
      c++;
      wr_buf_append(&b, c, 1);
    } else {
      wr_buf_append(&b, c, 1);
    }
  }
  if (q != 0) {
    wr_buf_free(&b);
    fail(p, "ENV: unclosed %c quote", q);
    return NULL;
  }
  *s = c;
  return wr_buf_steal(&b, NULL);
}

static int env_check_key(struct df_parser *p, const char *kv) {
  const char *eq = strchr(kv, '=');
  _cleanup_free_ char *key = xstrndup(kv, eq ? (size_t)(eq - kv) : strlen(kv));

  if (!wr_env_key_valid(key))
    return fail(p, "ENV: `%.64s` is not a variable name", key);
  return 0;
}

/* ENV K=V K2="v 2" ..., or the old form ENV K the rest of the line. */
static int parse_env(struct df_parser *p, const char *args, char ***out) {
  const char *s = skip_blanks(args);
  const char *sp = strpbrk(s, " \t"), *eq = strchr(s, '=');
  char **v = xcalloc(1, sizeof(char *));

  if (eq == NULL || (sp != NULL && sp < eq)) {
    _cleanup_free_ char *key = xstrndup(s, sp ? (size_t)(sp - s) : strlen(s));
    _cleanup_free_ char *kv = NULL;
    if (sp == NULL || *skip_blanks(sp) == '\0') {
      wr_strv_free(v);
      return fail(p, "ENV %.64s needs a value (ENV KEY=VALUE)", key);
    }
    kv = xasprintf("%s=%s", key, skip_blanks(sp));
    *out = wr_strv_push(v, kv);
    return env_check_key(p, kv);
  }
  for (; *s != '\0'; s = skip_blanks(s)) {
    char *w = env_word(p, &s);
    if (w == NULL || strchr(w, '=') == NULL || env_check_key(p, w) < 0) {
      if (w != NULL && strchr(w, '=') == NULL)
        fail(p, "ENV: `%.64s` is not KEY=VALUE", w);
      free(w);
      wr_strv_free(v);
      return -1;
    }
    v = wr_strv_push(v, w);
    free(w);
  }
  *out = v;
  return 0;
}

/* ---- instructions -------------------------------------------------------- */

static int parse_from(struct df_parser *p, struct wr_df_step *st,
                      const char *args) {
  _cleanup_strv_ char **w = words(args);

  if (p->df->n > 0)
    return fail(p, "FROM must come first, once (multi-stage builds are not "
                   "supported)");
  if (w[0] != NULL && w[0][0] == '-')
    return fail(p, "FROM %s: flags are not supported", w[0]);
  if (wr_strv_len(w) != 1)
    return fail(p, "FROM takes one image or template name (no AS)");
  if (!wr_name_valid(w[0]))
    return fail(p, "FROM `%.64s`: not an image or template name", w[0]);
  st->args = steal_ptr(&w);
  return 0;
}

static int parse_command(struct df_parser *p, struct wr_df_step *st,
                         const char *args) {
  const char *name = wr_df_kind_name(st->kind);

  if (*args == '\0')
    return fail(p, "%s needs a command", name);
  if (wr_str_has_prefix(args, "--"))
    return fail(p, "%s flags such as `%.32s` are not supported", name, args);
  st->args = json_form(args);
  if (st->args != NULL)
    return 0;
  if (*args == '[')
    return fail(p, "%s: not a JSON array of strings (the exec form)", name);
  st->shell = true;
  st->args = wr_strv_push(NULL, "/bin/sh");
  st->args = wr_strv_push(st->args, "-c");
  st->args = wr_strv_push(st->args, args);
  return 0;
}

/* A source must stay in the context: relative, no "..", no URL. */
static int check_source(struct df_parser *p, const char *src) {
  _cleanup_free_ char *copy = xstrdup(src);
  char *save = NULL;

  if (strstr(src, "://") != NULL)
    return fail(p,
                "COPY/ADD of a URL (`%.64s`) is not supported; only files "
                "from the build context",
                src);
  if (strpbrk(src, "*?[") != NULL)
    return fail(p, "COPY/ADD: wildcards (`%.64s`) are not supported", src);
  for (char *c = strtok_r(copy, "/", &save); c != NULL;
       c = strtok_r(NULL, "/", &save))
    if (strcmp(c, "..") == 0)
      return fail(p, "COPY/ADD: `%.64s` leaves the build context", src);
  return 0;
}

/* The destination made absolute against the WORKDIR; a trailing slash
 * (a directory) is kept. */
static char *absolute(const char *workdir, const char *path) {
  if (path[0] == '/')
    return xstrdup(path);
  if (strcmp(path, ".") == 0 || strcmp(path, "./") == 0)
    return xasprintf("%s/", workdir);
  if (wr_str_has_prefix(path, "./"))
    path += 2;
  return xasprintf("%s%s%s", workdir,
                   wr_str_has_suffix(workdir, "/") ? "" : "/", path);
}

static int parse_copy(struct df_parser *p, struct wr_df_step *st,
                      const char *args) {
  char **v;
  size_t n;

  if (wr_str_has_prefix(args, "--"))
    return fail(p,
                "COPY/ADD flags such as `%.32s` are not supported "
                "(files are copied owned by root, with their modes)",
                args);
  v = json_form(args);
  if (v == NULL && *args == '[')
    return fail(p, "COPY: not a JSON array of strings");
  if (v == NULL)
    v = words(args);
  st->args = v;
  n = wr_strv_len(v);
  if (n < 2)
    return fail(p, "COPY needs a source and a destination");
  for (size_t i = 0; i + 1 < n; i++)
    if (check_source(p, v[i]) < 0)
      return -1;
  if (n > 2 && !wr_str_has_suffix(v[n - 1], "/") && strcmp(v[n - 1], ".") != 0)
    return fail(p, "COPY with several sources needs a directory destination "
                   "ending in /");
  {
    char *dst = absolute(p->workdir, v[n - 1]);
    free(v[n - 1]);
    v[n - 1] = dst;
  }
  return 0;
}

static int parse_one_word(struct df_parser *p, struct wr_df_step *st,
                          const char *args) {
  _cleanup_strv_ char **w = words(args);
  const char *name = wr_df_kind_name(st->kind);

  if (wr_strv_len(w) != 1)
    return fail(p, "%s takes one value", name);
  if (strchr(w[0], '$') != NULL)
    return fail(p, "%s: variables (`%.64s`) are not substituted", name, w[0]);
  st->args = steal_ptr(&w);
  return 0;
}

static int parse_workdir(struct df_parser *p, struct wr_df_step *st,
                         const char *args) {
  char *dir;

  if (parse_one_word(p, st, args) < 0)
    return -1;
  _cleanup_free_ char *abs = absolute(p->workdir, st->args[0]);

  dir = wr_path_normalize(abs);
  free(p->workdir);
  p->workdir = dir;
  free(st->args[0]);
  st->args[0] = xstrdup(dir);
  return 0;
}

static int parse_expose(struct df_parser *p, struct wr_df_step *st,
                        const char *args) {
  uint64_t port;
  char *slash;
  wr_error_t e;

  if (parse_one_word(p, st, args) < 0)
    return fail(p, "EXPOSE takes one port: the one that says the start "
                   "command is ready");
  slash = strchr(st->args[0], '/');
  if (slash != NULL && strcmp(slash, "/tcp") != 0)
    return fail(p, "EXPOSE %.32s: only TCP ports", st->args[0]);
  if (slash != NULL)
    *slash = '\0';
  if (wr_parse_u64(st->args[0], 1, 65535, &port, &e) < 0)
    return fail(p, "EXPOSE `%.32s`: not a port (1-65535)", st->args[0]);
  st->port = (uint16_t)port;
  return 0;
}

static int parse_args(struct df_parser *p, struct wr_df_step *st,
                      const char *args) {
  switch (st->kind) {
  case WR_DF_FROM:
    return parse_from(p, st, args);
  case WR_DF_RUN:
  case WR_DF_CMD:
    return parse_command(p, st, args);
  case WR_DF_COPY:
    return parse_copy(p, st, args);
  case WR_DF_ENV:
    return parse_env(p, args, &st->args);
  case WR_DF_WORKDIR:
    return parse_workdir(p, st, args);
  case WR_DF_USER:
    return parse_one_word(p, st, args);
  case WR_DF_EXPOSE:
    return parse_expose(p, st, args);
  }
  return fail(p, "unknown instruction");
}

static int find_kind(struct df_parser *p, const char *word, size_t len,
                     enum wr_df_kind *kind) {
  for (size_t i = 0; i < WR_ARRAY_SIZE(kinds); i++) {
    if (strlen(kinds[i].name) == len &&
        strncasecmp(kinds[i].name, word, len) == 0) {
      *kind = kinds[i].kind;
      return 0;
    }
  }
  return fail(p, "`%.*s` is not supported (warren builds %s)",
              (int)WR_MIN(len, 32), word, supported);
}

/* One logical line, comments and continuations already gone. */
static int parse_instruction(struct df_parser *p, const char *text) {
  struct wr_dockerfile *df = p->df;
  const char *s = skip_blanks(text), *e = s;
  struct wr_df_step st = {.line = p->line};
  int r;

  while (*e != '\0' && !is_blank(*e))
    e++;
  if (find_kind(p, s, (size_t)(e - s), &st.kind) < 0)
    return -1;
  if (df->n == 0 && st.kind != WR_DF_FROM)
    return fail(p, "the first instruction must be FROM");
  if (df->n >= WR_DF_STEPS_MAX)
    return fail(p, "more than %d instructions", WR_DF_STEPS_MAX);
  st.text = xstrdup(s);
  r = parse_args(p, &st, skip_blanks(e));
  if (r < 0) {
    free(st.text);
    wr_strv_free(st.args);
    return -1;
  }
  df->steps = xrealloc(df->steps, (df->n + 1) * sizeof(*df->steps));
  df->steps[df->n++] = st;
  return 0;
}

/* A physical line, without its newline and a trailing CR or blanks. */
static char *physical(const char *s, const char *e) {
  while (e > s && (e[-1] == '\r' || is_blank(e[-1])))
    e--;
  return xstrndup(s, (size_t)(e - s));
}

static bool is_comment(const char *line) {
  return *skip_blanks(line) == '#';
}

/* Split into logical lines and parse each; cur holds the instruction
 * being joined, starting at line `start`. */
static int parse_lines(struct df_parser *p, const char *text, size_t len) {
  const char *s = text, *end = text + len;
  unsigned lineno = 0, start = 0;
  wr_buf_t cur;
  int r = 0;

  wr_buf_init(&cur);
  while (r == 0 && s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    _cleanup_free_ char *line = physical(s, e);
    bool more = continues(s, e);
    lineno++;
    s = nl ? nl + 1 : end;
    if (is_comment(line) || (cur.len == 0 && *skip_blanks(line) == '\0'))
      continue;
    if (cur.len == 0)
      start = lineno;
    if (more)
      line[strlen(line) - 1] = '\0';
    if (cur.len > 0)
      wr_buf_puts(&cur, " ");
    wr_buf_puts(&cur, skip_blanks(line));
    p->line = start;
    if (cur.len > WR_DF_LINE_MAX)
      r = fail(p, "an instruction longer than %u bytes", WR_DF_LINE_MAX);
    else if (!more && *skip_blanks(cur.data) != '\0') {
      r = parse_instruction(p, cur.data);
      wr_buf_reset(&cur);
    } else if (!more) {
      wr_buf_reset(&cur);
    }
  }
  if (r == 0 && cur.len > 0 && *skip_blanks(cur.data) != '\0')
    r = parse_instruction(p, cur.data);
  wr_buf_free(&cur);
  return r;
}

/* Its text goes into JSON (steps, progress), which must be UTF-8. */
static bool utf8_valid(const char *s, size_t len) {
  for (size_t i = 0, n; i < len; i += n)
    if ((n = wr_utf8_seq(s + i, len - i)) == 0)
      return false;
  return true;
}

int wr_dockerfile_parse(const char *text, size_t len, struct wr_dockerfile *out,
                        wr_error_t *err) {
  struct df_parser p = {.df = out, .workdir = xstrdup("/"), .err = err};
  int r;

  memset(out, 0, sizeof(*out));
  if (len > WR_DF_TEXT_MAX)
    r = wr_error_setx(err, EFBIG, "the Dockerfile is larger than %u bytes",
                      WR_DF_TEXT_MAX);
  else if (memchr(text, '\0', len) != NULL)
    r = wr_error_setx(err, EINVAL, "the Dockerfile has a NUL byte");
  else if (!utf8_valid(text, len))
    r = wr_error_setx(err, EINVAL, "the Dockerfile is not UTF-8 text");
  else
    r = parse_lines(&p, text, len);
  if (r == 0 && out->n == 0)
    r = wr_error_setx(err, EINVAL, "the Dockerfile is empty (it needs FROM)");
  free(p.workdir);
  if (r < 0)
    wr_dockerfile_free(out);
  return r;
}

void wr_dockerfile_free(struct wr_dockerfile *df) {
  for (size_t i = 0; i < df->n; i++) {
    free(df->steps[i].text);
    wr_strv_free(df->steps[i].args);
  }
  free(df->steps);
  memset(df, 0, sizeof(*df));
}
