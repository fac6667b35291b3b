/*
 * Small pieces of HTTP the server needs around http-parser: name/value
 * lists, percent-decoding of paths and queries (http-parser splits a URL
 * but does not decode it), header token lists and error bodies.
 */
#include "api/api_internal.h"

#include <jansson.h>
#include <strings.h>

void wr_api_kv_add(struct wr_http_kv_list *l, const char *name, size_t nlen,
                   const char *value, size_t vlen) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->items = xrealloc(l->items, l->cap * sizeof(*l->items));
  }
  l->items[l->n].name = xstrndup(name, nlen);
  l->items[l->n].value = xstrndup(value, vlen);
  l->n++;
}

const char *wr_api_kv_find(const struct wr_http_kv_list *l, const char *name,
                           bool ignore_case) {
  for (size_t i = 0; i < l->n; i++) {
    const char *n = l->items[i].name;
    if (ignore_case ? strcasecmp(n, name) == 0 : strcmp(n, name) == 0)
      return l->items[i].value;
  }
  return NULL;
}

void wr_api_kv_free(struct wr_http_kv_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->items[i].name);
    free(l->items[i].value);
  }
  free(l->items);
  l->items = NULL;
  l->n = l->cap = 0;
}

static int hex_value(char ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/*
 * RFC 3986 percent-decoding, and nothing more: '+' stays '+' (that is an
 * HTML form convention, not a URL one). A decoded NUL is refused because
 * every consumer treats the result as a C string, and a truncated name is
 * a different name.
 */
int wr_api_decode(const char *s, size_t len, char **out, wr_error_t *err) {
  _cleanup_free_ char *r = xmalloc(len + 1);
  size_t o = 0;

  for (size_t i = 0; i < len; i++) {
    int hi, lo;
    if (s[i] != '%') {
      r[o++] = s[i];
      continue;
    }
    hi = i + 2 < len ? hex_value(s[i + 1]) : -1;
    lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
    if (lo < 0)
      return wr_error_set(err, 0, "invalid percent-escape in the URL");
    r[o++] = (char)(hi * 16 + lo);
    i += 2;
  }
  r[o] = '\0';
  if (strlen(r) != o)
    return wr_error_set(err, 0, "the URL decodes to a NUL byte");
  *out = steal_ptr(&r);
  return 0;
}

static int add_query_pair(const char *s, size_t len, struct wr_http_kv_list *l,
                          wr_error_t *err) {
  const char *eq = memchr(s, '=', len);
  size_t nlen = eq ? (size_t)(eq - s) : len;
  _cleanup_free_ char *name = NULL;
  _cleanup_free_ char *value = NULL;

  if (wr_api_decode(s, nlen, &name, err) < 0)
    return -1;
  if (wr_api_decode(eq ? eq + 1 : "", eq ? len - nlen - 1 : 0, &value, err) < 0)
    return -1;
  wr_api_kv_add(l, name, strlen(name), value, strlen(value));
  return 0;
}

int wr_api_parse_query(const char *s, size_t len, struct wr_http_kv_list *l,
                       wr_error_t *err) {
  while (len > 0) {
    const char *amp = memchr(s, '&', len);
    size_t plen = amp ? (size_t)(amp - s) : len;
    if (plen > 0 && add_query_pair(s, plen, l, err) < 0)
      return wr_error_wrap(err, "query");
    if (amp == NULL)
      break;
    s = amp + 1;
    len -= plen + 1;
  }
  return 0;
}

static bool is_ows(char ch) {
  return ch == ' ' || ch == '\t';
}

bool wr_api_has_token(const char *list, const char *token) {
  size_t tlen = strlen(token);

  while (*list != '\0') {
    const char *end = strchr(list, ',');
    const char *stop = end ? end : list + strlen(list);
    while (list < stop && is_ows(*list))
      list++;
    while (stop > list && is_ows(stop[-1]))
      stop--;
    if ((size_t)(stop - list) == tlen && strncasecmp(list, token, tlen) == 0)
      return true;
    if (end == NULL)
      break;
    list = end + 1;
  }
  return false;
}

/* RFC 9110 tchar. */
bool wr_api_is_token(const char *s, size_t len) {
  static const char extra[] = "!#$%&'*+-.^_`|~";

  if (len == 0)
    return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    bool alnum = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
                 (ch >= 'A' && ch <= 'Z');
    if (!alnum && (ch == '\0' || strchr(extra, ch) == NULL))
      return false;
  }
  return true;
}

const char *wr_api_reason(int status) {
  const char *r;

  if (status == 431)
    return "Request Header Fields Too Large";
  r = http_status_str((enum http_status)status);
  return strcmp(r, "<unknown>") == 0 ? "Status" : r;
}

/* A message may echo client input that is not valid UTF-8, which jansson
 * refuses; such bytes become '?' rather than losing the whole error. */
static json_t *string_lossy(const char *s) {
  json_t *j = json_string(s);
  _cleanup_free_ char *copy = NULL;

  if (j != NULL)
    return j;
  copy = xstrdup(s);
  for (char *p = copy; *p != '\0'; p++)
    if ((unsigned char)*p >= 0x80)
      *p = '?';
  return json_string(copy);
}

char *wr_api_error_body(const char *code, const char *message, size_t *len) {
  _cleanup_json_ json_t *j = NULL;
  _cleanup_free_ char *s = NULL;
  char *r;

  j = json_pack("{s:{s:s,s:o}}", "error", "code", code, "message",
                string_lossy(message));
  if (j == NULL)
    abort();
  s = wr_json_dumps(j);
  r = xasprintf("%s\n", s);
  *len = strlen(r);
  return r;
}
